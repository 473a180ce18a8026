//! Supervision's bookkeeping, shared by root and the readers of its fault log: the log root
//! keeps for the running system (a bounded ring of lines, read one at a time by sequence number
//! with the `sys:pager` call [`crate::FAULT_LOG_LABEL`]), how a line travels in message words,
//! and the rule that says a server is hung. No system calls: root and its readers make those.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;

/// Lines of the fault log root keeps; older ones are dropped (their sequence numbers are not
/// reused, so a reader sees the gap).
pub const FAULT_LOG_LINES: usize = 64;

/// The fault log: one line per death of a server, numbered from 0 in the order they happened.
#[derive(Debug, Default)]
pub struct FaultLog {
    lines: VecDeque<String>,
    /// Sequence number of `lines[0]`.
    first: u64,
}

impl FaultLog {
    pub fn new() -> FaultLog {
        FaultLog::default()
    }

    /// The line for one death, as on the serial console after `root: fault: `.
    pub fn line(name: &str, generation: u64, reason: &str, at_ms: u64, policy: &str) -> String {
        format!(
            "server {name} incarnation {generation} reason {reason} at {at_ms} ms (policy {policy})"
        )
    }

    /// Appends a line, dropping the oldest beyond [`FAULT_LOG_LINES`].
    pub fn push(&mut self, line: String) {
        if self.lines.len() == FAULT_LOG_LINES {
            self.lines.pop_front();
            self.first += 1;
        }
        self.lines.push_back(line);
    }

    /// The oldest line kept whose sequence number is at least `seq`, with its number.
    pub fn get(&self, seq: u64) -> Option<(u64, &str)> {
        let at = seq.max(self.first);
        let i = usize::try_from(at - self.first).ok()?;
        self.lines.get(i).map(|l| (at, l.as_str()))
    }

    /// Sequence number the next line will get.
    pub fn next_seq(&self) -> u64 {
        self.first + self.lines.len() as u64
    }
}

/// Writes line `seq` with `text` (cut at [`crate::FAULT_LINE_MAX`] bytes) into the words of a
/// [`crate::FAULT_LOG_LABEL`] reply: word 0 the sequence number, word 1 the length, the bytes
/// from word 2 on. Returns how many words the reply carries.
pub fn encode_line(seq: u64, text: &str, words: &mut [u64; 64]) -> usize {
    let b = &text.as_bytes()[..text.len().min(crate::FAULT_LINE_MAX)];
    words[0] = seq;
    words[1] = b.len() as u64;
    for (k, chunk) in b.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        words[2 + k] = u64::from_le_bytes(w);
    }
    2 + b.len().div_ceil(8)
}

/// The line in the words of a [`crate::FAULT_LOG_LABEL`] reply of `n` words: its sequence number
/// and text (None if the words do not hold one; bytes that are not UTF-8 become `?`).
pub fn decode_line(words: &[u64; 64], n: usize) -> Option<(u64, String)> {
    let len = usize::try_from(words[1]).ok()?;
    if n < 2 || len > crate::FAULT_LINE_MAX || 2 + len.div_ceil(8) > n.min(64) {
        return None;
    }
    let mut bytes = alloc::vec::Vec::with_capacity(len);
    for w in &words[2..2 + len.div_ceil(8)] {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    bytes.truncate(len);
    let text = bytes
        .iter()
        .map(|&c| if c.is_ascii() { c as char } else { '?' })
        .collect();
    Some((words[0], text))
}

/// Whether a server whose main thread has run `run_ticks` timer ticks of `tick_ms` since it last
/// waited is hung under deadline `hang_ms` (0: never checked).
pub fn hung(run_ticks: u64, tick_ms: u64, hang_ms: u32) -> bool {
    hang_ms != 0 && run_ticks.saturating_mul(tick_ms) >= hang_ms as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_and_numbers_stay() {
        let mut log = FaultLog::new();
        assert_eq!(log.get(0), None);
        log.push(FaultLog::line("blk0", 1, "hung", 1234, "restart"));
        assert_eq!(
            log.get(0),
            Some((
                0,
                "server blk0 incarnation 1 reason hung at 1234 ms (policy restart)"
            ))
        );
        assert_eq!(log.get(1), None);
        for k in 1..(FAULT_LOG_LINES as u64 + 10) {
            log.push(format!("line {k}"));
        }
        assert_eq!(log.next_seq(), FAULT_LOG_LINES as u64 + 10);
        // The first 10 are gone: asking for them gives the oldest kept.
        assert_eq!(log.get(0), Some((10, "line 10")));
        assert_eq!(log.get(11), Some((11, "line 11")));
        let last = FAULT_LOG_LINES as u64 + 9;
        assert_eq!(log.get(last).map(|l| l.0), Some(last));
        assert_eq!(log.get(last + 1), None);
        assert_eq!(log.get(u64::MAX), None);
    }

    #[test]
    fn lines_travel_in_words() {
        let mut w = [0u64; 64];
        let t = "server pfs0 incarnation 2 reason killed-by-faults at 98765 ms (policy restart)";
        let n = encode_line(7, t, &mut w);
        assert_eq!(n, 2 + t.len().div_ceil(8));
        assert_eq!(decode_line(&w, n), Some((7, String::from(t))));
        // Too few words for the length claimed, or a length past the most there is: nothing.
        assert_eq!(decode_line(&w, n - 1), None);
        w[1] = 10_000;
        assert_eq!(decode_line(&w, 64), None);
        // A long line is cut to what the message holds.
        let long = "x".repeat(1000);
        let n = encode_line(1, &long, &mut w);
        assert_eq!(n, 64);
        assert_eq!(decode_line(&w, n).unwrap().1.len(), crate::FAULT_LINE_MAX);
    }

    #[test]
    fn hung_only_past_the_deadline_and_never_when_off() {
        assert!(!hung(99, 10, 1000));
        assert!(hung(100, 10, 1000));
        assert!(!hung(u64::MAX, 10, 0));
        assert!(hung(u64::MAX, 10, 60_000));
    }
}
