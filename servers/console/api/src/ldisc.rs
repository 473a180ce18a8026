//! The console's line discipline: what happens to bytes between the line (the UART) and the
//! programs reading and writing the terminal. Pure logic, no hardware: the driver feeds it each
//! received byte ([`LineDiscipline::input`]), sends the echo it produces, and serves reads from
//! what it has finished ([`LineDiscipline::read`]); output goes through [`output`].
//!
//! Today's subset of a Linux tty's `termios` (the next step, a terminal server, adds the rest —
//! signals, VMIN/VTIME, the other special characters — as more fields of [`Modes`] and more arms
//! of `input`):
//! - canonical (line) mode: input is edited a line at a time; a read returns at most one line,
//!   including its `\n`, or the part of it that fits; the rest goes to the next read.
//!   Ctrl-D (VEOF) at the start of a line is end of file (a read of 0 bytes); elsewhere it ends
//!   the line without being part of it. Backspace (0x08) and DEL (0x7f, Linux's VERASE) erase
//!   the last character of the line being typed (a whole UTF-8 sequence).
//! - ICRNL: a received `\r` becomes `\n` (a terminal's Enter key sends `\r`).
//! - ECHO: received characters are echoed, control characters as `^X` (ECHOCTL), erase as
//!   "backspace, space, backspace" (ECHOE).
//! - ONLCR: `\n` written becomes `\r\n` on the line.
//! - raw (non-canonical) mode: bytes are passed on as they come; a read returns what is there.
//!
//! The discipline holds at most [`CAPACITY`] bytes (finished input plus the line being typed).
//! When that is reached, [`input`](LineDiscipline::input) refuses the byte and the driver stops
//! taking bytes from the UART until a read makes room. A line being typed stops growing at
//! [`LINE_MAX`] (further ordinary characters are dropped, as Linux does), so the end-of-line
//! and erase characters always have room and a reader can never be starved by a full buffer.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Most bytes held at once (Linux's N_TTY_BUF_SIZE).
pub const CAPACITY: usize = 4096;
/// Longest line, its `\n` included (Linux: 4095 characters and the newline).
pub const LINE_MAX: usize = CAPACITY;

/// Ctrl-D: end of file at the start of a line (VEOF).
pub const EOF_CHAR: u8 = 0x04;
/// Backspace (0x08) and DEL (0x7f, what a Linux tty's VERASE is by default) both erase.
pub const ERASE_CHARS: [u8; 2] = [0x08, 0x7f];

/// Which parts of the discipline are on (a subset of termios' flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// ICANON: line editing, reads of one line.
    pub canonical: bool,
    /// ECHO (with ECHOCTL and ECHOE).
    pub echo: bool,
    /// ICRNL: received `\r` becomes `\n`.
    pub icrnl: bool,
    /// ONLCR: written `\n` becomes `\r\n`.
    pub onlcr: bool,
}

impl Default for Modes {
    /// What a Linux tty starts with.
    fn default() -> Self {
        Modes {
            canonical: true,
            echo: true,
            icrnl: true,
            onlcr: true,
        }
    }
}

/// What became of a received byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Consumed (stored, acted on, or dropped because the line is at its limit).
    Taken,
    /// No room: not consumed; offer it again after a read.
    Full,
}

/// One terminal's input state.
#[derive(Debug)]
pub struct LineDiscipline {
    modes: Modes,
    /// Input readers may take: finished lines in canonical mode, every byte in raw mode.
    ready: VecDeque<u8>,
    /// Canonical mode: the length of each finished line in `ready`, oldest first (they add up
    /// to `ready.len()`); 0 is an end of file.
    lines: VecDeque<usize>,
    /// Canonical mode: the line being typed.
    line: Vec<u8>,
}

impl LineDiscipline {
    pub fn new(modes: Modes) -> Self {
        LineDiscipline {
            modes,
            ready: VecDeque::new(),
            lines: VecDeque::new(),
            line: Vec::new(),
        }
    }

    pub fn modes(&self) -> Modes {
        self.modes
    }

    /// Whether another byte would be taken now.
    pub fn has_room(&self) -> bool {
        self.ready.len() + self.line.len() < CAPACITY
    }

    /// Whether a read would return now (data or end of file) instead of waiting.
    pub fn readable(&self) -> bool {
        if self.modes.canonical {
            !self.lines.is_empty()
        } else {
            !self.ready.is_empty()
        }
    }

    /// Bytes reads could take now (FIONREAD): in canonical mode the finished lines only.
    pub fn pending(&self) -> usize {
        self.ready.len()
    }

    /// Takes one byte received from the line; appends what to echo (already output-processed,
    /// ready for the line) to `echo`.
    pub fn input(&mut self, byte: u8, echo: &mut Vec<u8>) -> Input {
        if !self.has_room() {
            return Input::Full;
        }
        let b = if self.modes.icrnl && byte == b'\r' {
            b'\n'
        } else {
            byte
        };
        if !self.modes.canonical {
            self.ready.push_back(b);
            self.echo(b, echo);
            return Input::Taken;
        }
        match b {
            b'\n' => {
                self.line.push(b'\n');
                self.finish_line();
                self.echo(b'\n', echo);
            }
            EOF_CHAR => self.finish_line(),
            b if ERASE_CHARS.contains(&b) => self.erase(echo),
            b => {
                // Keep room for the newline that ends the line.
                if self.line.len() < LINE_MAX - 1 {
                    self.line.push(b);
                    self.echo(b, echo);
                }
            }
        }
        Input::Taken
    }

    /// Moves the line being typed to the finished input (an empty one is an end of file).
    fn finish_line(&mut self) {
        self.lines.push_back(self.line.len());
        self.ready.extend(self.line.drain(..));
    }

    /// Erases the last character of the line being typed: one byte, or a whole UTF-8 sequence.
    fn erase(&mut self, echo: &mut Vec<u8>) {
        let Some(mut last) = self.line.pop() else {
            return;
        };
        while is_utf8_continuation(last) {
            match self.line.pop() {
                Some(b) => last = b,
                None => break,
            }
        }
        if self.modes.echo {
            // A control character was echoed as two columns (`^X`).
            let columns = if echoes_as_caret(last) { 2 } else { 1 };
            for _ in 0..columns {
                echo.extend_from_slice(b"\x08 \x08");
            }
        }
    }

    fn echo(&self, b: u8, out: &mut Vec<u8>) {
        if !self.modes.echo {
            return;
        }
        if echoes_as_caret(b) {
            out.extend_from_slice(&[b'^', b ^ 0x40]);
        } else {
            output(self.modes, &[b], out);
        }
    }

    /// Serves one read of at most `buf.len()` bytes: `None` if the reader must wait for input,
    /// else the number of bytes put in `buf` (0: end of file, canonical mode only).
    pub fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
        if !self.readable() || buf.is_empty() {
            return None;
        }
        let n = if self.modes.canonical {
            let first = self.lines.front_mut()?;
            let n = (*first).min(buf.len());
            *first -= n;
            // A line read to its end is done (an end of file once read, too).
            if *first == 0 {
                self.lines.pop_front();
            }
            n
        } else {
            self.ready.len().min(buf.len())
        };
        for (dst, src) in buf.iter_mut().zip(self.ready.drain(..n)) {
            *dst = src;
        }
        Some(n)
    }
}

/// Output processing of bytes written to the terminal, appended to `out`: ONLCR.
pub fn output(modes: Modes, data: &[u8], out: &mut Vec<u8>) {
    if !modes.onlcr {
        out.extend_from_slice(data);
        return;
    }
    for &b in data {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
}

/// Control characters other than tab and newline echo as `^X` (ECHOCTL).
fn echoes_as_caret(b: u8) -> bool {
    (b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7f
}

fn is_utf8_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use alloc::vec;

    fn feed(ld: &mut LineDiscipline, bytes: &[u8]) -> Vec<u8> {
        let mut echo = Vec::new();
        for &b in bytes {
            assert_eq!(ld.input(b, &mut echo), Input::Taken);
        }
        echo
    }

    /// Reads until the discipline would wait, with reads of `max` bytes.
    fn reads(ld: &mut LineDiscipline, max: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; max];
        while let Some(n) = ld.read(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    #[test]
    fn lines_cr_and_eof() {
        let mut ld = LineDiscipline::new(Modes::default());
        assert!(!ld.readable());
        feed(&mut ld, b"hello\rworld\n\x04");
        assert_eq!(ld.pending(), 12);
        assert_eq!(
            reads(&mut ld, 480),
            vec![b"hello\n".to_vec(), b"world\n".to_vec(), b"".to_vec()]
        );
        assert_eq!(ld.read(&mut [0; 8]), None);
    }

    #[test]
    fn partial_line_waits_for_its_end() {
        let mut ld = LineDiscipline::new(Modes::default());
        feed(&mut ld, b"abc");
        assert!(!ld.readable());
        assert_eq!(ld.pending(), 0);
        assert_eq!(ld.read(&mut [0; 8]), None);
        feed(&mut ld, b"\n");
        assert_eq!(reads(&mut ld, 8), vec![b"abc\n".to_vec()]);
    }

    #[test]
    fn short_reads_split_a_line_but_never_join_two() {
        let mut ld = LineDiscipline::new(Modes::default());
        feed(&mut ld, b"abcdef\nxy\n");
        assert_eq!(
            reads(&mut ld, 4),
            vec![b"abcd".to_vec(), b"ef\n".to_vec(), b"xy\n".to_vec()]
        );
    }

    #[test]
    fn ctrl_d_mid_line_ends_the_read_without_the_byte() {
        let mut ld = LineDiscipline::new(Modes::default());
        feed(&mut ld, b"ab\x04cd\n\x04\x04");
        assert_eq!(
            reads(&mut ld, 64),
            vec![b"ab".to_vec(), b"cd\n".to_vec(), b"".to_vec(), b"".to_vec()]
        );
    }

    #[test]
    fn erase_removes_the_last_character_and_echoes_it_away() {
        let mut ld = LineDiscipline::new(Modes::default());
        let echo = feed(&mut ld, b"abx\x7fc\x08\x08d\n");
        assert_eq!(reads(&mut ld, 64), vec![b"ad\n".to_vec()]);
        assert_eq!(echo, b"abx\x08 \x08c\x08 \x08\x08 \x08d\r\n".to_vec());
    }

    #[test]
    fn erase_takes_a_whole_utf8_character_and_a_caret_pair() {
        let mut ld = LineDiscipline::new(Modes::default());
        let echo = feed(&mut ld, "aé\x7f\x01\x7f\n".as_bytes());
        assert_eq!(reads(&mut ld, 64), vec![b"a\n".to_vec()]);
        let mut want = "aé\x08 \x08^A".as_bytes().to_vec();
        want.extend_from_slice(b"\x08 \x08\x08 \x08\r\n");
        assert_eq!(echo, want);
    }

    #[test]
    fn no_echo_when_off_and_no_cr_without_onlcr() {
        let modes = Modes {
            echo: false,
            ..Modes::default()
        };
        let mut ld = LineDiscipline::new(modes);
        assert!(feed(&mut ld, b"quiet\r").is_empty());
        let mut out = Vec::new();
        output(modes, b"a\nb\n", &mut out);
        assert_eq!(out, b"a\r\nb\r\n");
        out.clear();
        output(
            Modes {
                onlcr: false,
                ..modes
            },
            b"a\nb\n",
            &mut out,
        );
        assert_eq!(out, b"a\nb\n");
    }

    #[test]
    fn raw_mode_passes_bytes_as_they_come() {
        let mut ld = LineDiscipline::new(Modes {
            canonical: false,
            echo: false,
            ..Modes::default()
        });
        feed(&mut ld, b"ab\x04\x7f\r");
        assert_eq!(
            reads(&mut ld, 2),
            vec![b"ab".to_vec(), b"\x04\x7f".to_vec(), b"\n".to_vec()]
        );
    }

    #[test]
    fn full_buffer_refuses_bytes_until_a_read_makes_room() {
        let mut ld = LineDiscipline::new(Modes {
            echo: false,
            ..Modes::default()
        });
        let mut echo = Vec::new();
        let mut taken = 0;
        while ld.input(if taken % 10 == 9 { b'\n' } else { b'x' }, &mut echo) == Input::Taken {
            taken += 1;
        }
        assert_eq!(taken, CAPACITY);
        assert!(!ld.has_room());
        assert_eq!(ld.read(&mut [0; 64]), Some(10));
        assert!(ld.has_room());
        assert_eq!(ld.input(b'y', &mut echo), Input::Taken);
    }

    #[test]
    fn an_overlong_line_is_cut_but_can_always_end() {
        let mut ld = LineDiscipline::new(Modes {
            echo: false,
            ..Modes::default()
        });
        feed(&mut ld, &[b'z'; CAPACITY + 100]);
        feed(&mut ld, b"\n");
        let got = reads(&mut ld, 4096);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), LINE_MAX);
        assert_eq!(got[0].last(), Some(&b'\n'));
        // Erase still works on a line at its limit.
        feed(&mut ld, &[b'z'; CAPACITY]);
        feed(&mut ld, b"\x7f\x7f\n");
        assert_eq!(reads(&mut ld, 4096)[0].len(), LINE_MAX - 2);
    }

    #[test]
    fn erase_on_an_empty_line_does_nothing() {
        let mut ld = LineDiscipline::new(Modes::default());
        assert!(feed(&mut ld, b"\x7f\x08").is_empty());
        feed(&mut ld, b"\n");
        assert_eq!(reads(&mut ld, 8), vec![b"\n".to_vec()]);
    }

    #[test]
    fn empty_buffer_read_waits() {
        let mut ld = LineDiscipline::new(Modes::default());
        feed(&mut ld, b"x\n");
        assert_eq!(ld.read(&mut []), None);
        assert_eq!(ld.read(&mut [0; 1]), Some(1));
    }
}
