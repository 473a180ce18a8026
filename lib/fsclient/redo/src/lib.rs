//! The redo log of an open file (issue 16, docs/filesystem.md "Writes not yet fsync'd"): the
//! changes this client made to the file's content since its last successful `fsync` (or sync),
//! so that after its PFS restarts — the dead incarnation's cache, holding whatever it had not
//! written back, is gone — the library replays them, in order, into the reopened file before it
//! retries the call that found the PFS gone. Then `fsync` succeeds and the bytes are there, as
//! if nothing had happened (QNX-style client recovery).
//!
//! Bounded: at most [`FILE_BYTES`] per file and [`TOTAL_BYTES`] per process (each entry counts
//! its bytes plus [`ENTRY_COST`]), and only what the allocator grants (`try_reserve`: a full
//! heap never ends the task). A change that does not fit *overflows* the log: its contents are
//! dropped, and a restart before the next successful fsync is reported as before (the next
//! fsync returns `Io` once). Memory is this task's heap, never the server's.
//!
//! Kept small: a rewrite inside a logged write that nothing later overlaps goes into its bytes
//! in place; any other write drops the bytes of earlier writes it covers (they can never be seen
//! again, whatever came between: a truncate cuts only what it covers, and the later write puts
//! its own bytes back); a write that continues the last one extends it; a truncate drops the
//! earlier writes' bytes past the new size.
//!
//! Plain logic, no system calls: host-tested below. May touch: nothing but its own memory.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;

/// Most bytes one file's log holds.
pub const FILE_BYTES: usize = 256 << 10;
/// Most bytes all of a process's logs hold together.
pub const TOTAL_BYTES: usize = 1 << 20;
/// Longest write entry that later writes extend: one grows by doubling (few copies for many
/// small sequential writes), so this bounds the spare capacity a file's log may hold.
pub const RUN: usize = 64 << 10;
/// What an entry costs beyond its data (its header, rounded up), so many tiny writes are bounded
/// too.
pub const ENTRY_COST: usize = 32;

/// One change to the file, replayed as it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `data` written at `off`.
    Write { off: u64, data: Vec<u8> },
    /// The size set (ftruncate, or `open` with TRUNC: 0).
    Truncate(u64),
}

impl Change {
    fn cost(&self) -> usize {
        ENTRY_COST
            + match self {
                Change::Write { data, .. } => data.len(),
                Change::Truncate(_) => 0,
            }
    }
}

/// One open file's changes since its last successful fsync.
#[derive(Default, Debug)]
pub struct RedoLog {
    changes: Vec<Change>,
    /// What `changes` costs (counted against the file's and the process's bounds).
    bytes: usize,
    /// A change did not fit: the log no longer says everything (replaying it cannot restore the
    /// file); stays so until [`RedoLog::clear`].
    overflowed: bool,
}

impl RedoLog {
    /// The changes, oldest first.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Whether some change since the last fsync is missing from the log.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// What the log costs against the bounds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Empties the log (the file was made durable, or closed): gives its bytes back to `total`.
    pub fn clear(&mut self, total: &mut usize) {
        *total = total.saturating_sub(self.bytes);
        self.changes = Vec::new();
        self.bytes = 0;
        self.overflowed = false;
    }

    /// Drops what the log holds and marks it incomplete.
    fn overflow(&mut self, total: &mut usize) {
        self.clear(total);
        self.overflowed = true;
    }

    /// Records `data` written at `off`; `total` is what all the process's logs hold.
    pub fn write(&mut self, off: u64, data: &[u8], total: &mut usize) {
        if self.overflowed || data.is_empty() {
            return;
        }
        let end = off.saturating_add(data.len() as u64);
        // A rewrite inside a logged write that nothing after it overlaps (no truncate, no write
        // of those bytes): into that write's bytes, no allocation, no copy of the rest.
        let inside = |c: &Change| matches!(c, Change::Write { off: o, data: d } if *o <= off && end <= *o + d.len() as u64);
        let apart = |c: &Change| matches!(c, Change::Write { off: o, data: d } if *o + d.len() as u64 <= off || *o >= end);
        if let Some(i) = self.changes.iter().rposition(inside) {
            if self.changes[i + 1..].iter().all(apart) {
                if let Change::Write { off: o, data: d } = &mut self.changes[i] {
                    let at = (off - *o) as usize;
                    d[at..at + data.len()].copy_from_slice(data);
                }
                return;
            }
        }
        self.cut(off, end, total);
        // Continues the last write: extend it rather than add an entry.
        let fits = self.fits(data.len(), *total);
        if let Some(Change::Write { off: o, data: d }) = self.changes.last_mut() {
            if *o + d.len() as u64 == off && d.len() + data.len() <= RUN {
                if !fits || d.try_reserve(data.len()).is_err() {
                    return self.overflow(total);
                }
                d.extend_from_slice(data);
                self.bytes += data.len();
                *total += data.len();
                return;
            }
        }
        let mut copy = Vec::new();
        if !self.fits(data.len() + ENTRY_COST, *total)
            || copy.try_reserve_exact(data.len()).is_err()
        {
            return self.overflow(total);
        }
        copy.extend_from_slice(data);
        self.push(Change::Write { off, data: copy }, total);
    }

    /// Records the file's size set to `size`.
    pub fn truncate(&mut self, size: u64, total: &mut usize) {
        if self.overflowed {
            return;
        }
        self.cut(size, u64::MAX, total);
        if !self.fits(ENTRY_COST, *total) {
            return self.overflow(total);
        }
        self.push(Change::Truncate(size), total);
    }

    fn fits(&self, more: usize, total: usize) -> bool {
        self.bytes + more <= FILE_BYTES && total + more <= TOTAL_BYTES
    }

    fn push(&mut self, c: Change, total: &mut usize) {
        if self.changes.try_reserve(1).is_err() {
            return self.overflow(total);
        }
        let cost = c.cost();
        self.bytes += cost;
        *total += cost;
        self.changes.push(c);
    }

    /// Drops the bytes in `[from, to)` from every write logged so far (a later change replaces
    /// them), splitting a write that reaches past both ends and removing emptied ones.
    fn cut(&mut self, from: u64, to: u64, total: &mut usize) {
        let mut i = 0;
        while i < self.changes.len() {
            let Change::Write { off, data } = &mut self.changes[i] else {
                i += 1;
                continue;
            };
            let (a, b) = (*off, *off + data.len() as u64);
            if b <= from || a >= to {
                i += 1;
                continue;
            }
            let before = data.len();
            let mut tail = None;
            if b > to {
                // The part after the cut survives as its own entry (its bytes move, and its
                // header is free: the cut bytes paid far more than one).
                tail = Some(Change::Write {
                    off: to,
                    data: data[(to - a) as usize..].to_vec(),
                });
            }
            data.truncate(from.saturating_sub(a) as usize);
            let kept = data.len() + tail.as_ref().map_or(0, |t| t.cost() - ENTRY_COST);
            let freed = before - kept;
            self.bytes -= freed;
            *total -= freed;
            if data.is_empty() {
                self.changes.remove(i);
                self.bytes -= ENTRY_COST;
                *total -= ENTRY_COST;
                if let Some(t) = tail {
                    self.bytes += ENTRY_COST;
                    *total += ENTRY_COST;
                    self.changes.insert(i, t);
                    i += 1;
                }
            } else {
                i += 1;
                if let Some(t) = tail {
                    self.bytes += ENTRY_COST;
                    *total += ENTRY_COST;
                    self.changes.insert(i, t);
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// The file a sequence of changes makes from `base`, as the PFS would.
    fn apply(base: &[u8], changes: &[Change]) -> Vec<u8> {
        let mut f = base.to_vec();
        for c in changes {
            match c {
                Change::Write { off, data } => {
                    let end = *off as usize + data.len();
                    if f.len() < end {
                        f.resize(end, 0);
                    }
                    f[*off as usize..end].copy_from_slice(data);
                }
                Change::Truncate(s) => f.resize(*s as usize, 0),
            }
        }
        f
    }

    /// Logs `changes` and checks that replaying the log onto `base` gives what applying them
    /// did, and that the counts add up.
    fn same(base: &[u8], changes: &[Change]) -> RedoLog {
        let mut log = RedoLog::default();
        let mut total = 0;
        for c in changes {
            match c {
                Change::Write { off, data } => log.write(*off, data, &mut total),
                Change::Truncate(s) => log.truncate(*s, &mut total),
            }
        }
        assert!(!log.overflowed());
        assert_eq!(apply(base, log.changes()), apply(base, changes));
        assert_eq!(total, log.bytes());
        let counted: usize = log.changes().iter().map(Change::cost).sum();
        assert_eq!(counted, log.bytes());
        log
    }

    fn w(off: u64, byte: u8, len: usize) -> Change {
        Change::Write {
            off,
            data: vec![byte; len],
        }
    }

    #[test]
    fn keeps_order_of_writes_and_truncates() {
        let base = vec![7u8; 100];
        let log = same(
            &base,
            &[
                Change::Truncate(0),
                w(0, 1, 50),
                Change::Truncate(20),
                w(30, 2, 10),
                Change::Truncate(35),
                w(60, 3, 5),
            ],
        );
        assert!(matches!(log.changes()[0], Change::Truncate(0)));
    }

    #[test]
    fn overlapping_writes_keep_only_the_newest_bytes() {
        let base = vec![9u8; 64];
        // Rewriting the same page again and again costs one page.
        let changes: Vec<Change> = (0..50).map(|i| w(0, i as u8, 4096)).collect();
        let log = same(&base, &changes);
        assert_eq!(log.bytes(), 4096 + ENTRY_COST);
        // A write inside another splits it; one across two trims both.
        same(&base, &[w(0, 1, 100), w(40, 2, 10)]);
        same(&base, &[w(0, 1, 100), w(100, 2, 100), w(50, 3, 100)]);
        same(&base, &[w(10, 1, 10), w(0, 2, 40)]);
        same(&base, &[w(0, 1, 30), Change::Truncate(10), w(5, 2, 20)]);
    }

    #[test]
    fn rewrites_inside_a_write_go_in_place() {
        // fs.write4k's loop: 4 KiB rewrites of a 64 KiB file, pass after pass.
        let mut changes: Vec<Change> = (0..16).map(|i| w(i * 4096, 1, 4096)).collect();
        changes.extend((0..16).map(|i| w(i * 4096, 2, 4096)));
        let log = same(&[], &changes);
        assert_eq!(log.changes().len(), 1);
        assert_eq!(log.bytes(), 65536 + ENTRY_COST);
        // Not past a later truncate or an overlapping write.
        same(&[], &[w(0, 1, 100), Change::Truncate(10), w(20, 2, 10)]);
        same(&[], &[w(0, 1, 100), w(30, 2, 10), w(25, 3, 10)]);
        same(&[], &[w(0, 1, 100), w(200, 2, 10), w(25, 3, 10)]);
    }

    #[test]
    fn sequential_writes_extend_one_entry() {
        let changes: Vec<Change> = (0..8).map(|i| w(i * 512, i as u8, 512)).collect();
        let log = same(&[], &changes);
        assert_eq!(log.changes().len(), 1);
        assert_eq!(log.bytes(), 8 * 512 + ENTRY_COST);
        // Up to RUN bytes an entry, then another.
        let changes: Vec<Change> = (0..3).map(|i| w(i * 40960, i as u8, 40960)).collect();
        let log = same(&[], &changes);
        assert_eq!(log.changes().len(), 3);
    }

    #[test]
    fn truncate_drops_bytes_past_the_size() {
        let log = same(&[1, 2, 3], &[w(0, 5, 1000), Change::Truncate(100)]);
        assert_eq!(log.bytes(), 100 + 2 * ENTRY_COST);
        let log = same(&[], &[w(500, 5, 100), Change::Truncate(10)]);
        assert_eq!(log.changes(), &[Change::Truncate(10)]);
    }

    #[test]
    fn a_file_past_its_bound_overflows_until_cleared() {
        let mut log = RedoLog::default();
        let mut total = 0;
        log.write(0, &vec![1u8; FILE_BYTES - 2 * ENTRY_COST], &mut total);
        assert!(!log.overflowed());
        // Rewriting what it holds still fits.
        log.write(0, &[2u8; 4096], &mut total);
        assert!(!log.overflowed());
        log.write(FILE_BYTES as u64, &[3u8; 1], &mut total);
        assert!(log.overflowed() && log.is_empty());
        assert_eq!(total, 0);
        // Later changes are not logged: the log cannot restore the file any more.
        log.write(0, &[4u8; 1], &mut total);
        log.truncate(0, &mut total);
        assert!(log.is_empty() && total == 0);
        // A successful fsync starts it again.
        log.clear(&mut total);
        log.write(0, &[5u8; 10], &mut total);
        assert!(!log.overflowed() && log.changes().len() == 1);
    }

    #[test]
    fn the_process_bound_is_shared() {
        let mut total = 0;
        let mut logs: Vec<RedoLog> = (0..5).map(|_| RedoLog::default()).collect();
        for l in logs.iter_mut().take(4) {
            l.write(0, &vec![0u8; FILE_BYTES - ENTRY_COST], &mut total);
            assert!(!l.overflowed());
        }
        assert_eq!(total, TOTAL_BYTES);
        logs[4].write(0, &[1], &mut total);
        assert!(logs[4].overflowed());
        // One emptied (fsync'd): room for another.
        logs[0].clear(&mut total);
        logs[4].clear(&mut total);
        logs[4].write(0, &[1], &mut total);
        assert!(!logs[4].overflowed());
        assert_eq!(total, 3 * FILE_BYTES + 1 + ENTRY_COST);
    }

    /// Random sequences of writes and truncates over a small file: replaying the log always
    /// gives what the changes themselves did.
    #[test]
    fn random_changes_replay_the_same() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for round in 0..500 {
            let base: Vec<u8> = (0..next(300)).map(|i| i as u8).collect();
            let changes: Vec<Change> = (0..next(20))
                .map(|k| {
                    if next(5) == 0 {
                        Change::Truncate(next(400))
                    } else {
                        w(next(300), (round + k) as u8, next(200) as usize + 1)
                    }
                })
                .collect();
            same(&base, &changes);
        }
    }
}
