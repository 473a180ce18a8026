//! The console's line discipline: what happens to bytes between the line (the UART) and the
//! programs reading and writing the terminal. Pure logic, no hardware: the driver feeds it each
//! received byte ([`LineDiscipline::input`]), sends the echo it produces, and serves reads from
//! what it has finished ([`LineDiscipline::read`]); output goes through [`output`]. What it does
//! follows the terminal's [`Termios`], which programs change at run time
//! ([`LineDiscipline::set_termios`]):
//! - ICANON (canonical mode): input is edited a line at a time; a read returns at most one line,
//!   including its `\n`, or the part of it that fits; the rest goes to the next read. VEOF
//!   (^D) at the start of a line is end of file (a read of 0 bytes); elsewhere it ends the line
//!   without being part of it; VEOL ends a line like `\n`. VERASE (DEL), and backspace (0x08)
//!   as well, erase the last character of the line being typed (a whole UTF-8 sequence); VKILL
//!   (^U) erases the whole line.
//! - non-canonical mode: bytes are passed on as they come. A read waits until min(VMIN, count)
//!   bytes are there, then returns what is there up to the count; VMIN 0 with VTIME 0 returns
//!   at once (0 bytes if none). VTIME's timer is not kept: VMIN 0 with VTIME > 0 waits for one
//!   byte, VTIME with VMIN > 0 is VMIN alone.
//! - input: IGNCR drops `\r`, else ICRNL makes it `\n`; INLCR makes `\n` a `\r`; ISTRIP.
//! - echo: ECHO echoes received characters, control characters as `^X` with ECHOCTL; erase as
//!   "backspace, space, backspace" with ECHOE; kill erases the line on screen with ECHOKE,
//!   else echoes the kill character and, with ECHOK, a newline; ECHONL echoes `\n` even
//!   without ECHO.
//! - output: OPOST with ONLCR makes `\n` written `\r\n` on the line.
//! - ISIG: VINTR (^C), VQUIT (^\\) and VSUSP (^Z) are not input: each is echoed (as `^C` with
//!   ECHOCTL), throws away the input held unless NOFLSH, and is reported to the driver as
//!   [`Input::Signal`] with SIGINT, SIGQUIT or SIGTSTP for the foreground process group.
//! - not acted on (kept in the settings): IEXTEN's characters (VWERASE, VLNEXT, VREPRINT),
//!   IXON flow control.
//!
//! Changing ICANON with input held follows Linux: to non-canonical, the line being typed and
//! the finished lines all become readable bytes; to canonical, bytes not yet read become one
//! finished line (a reader gets them at once).
//!
//! The discipline holds at most [`CAPACITY`] bytes (finished input plus the line being typed).
//! When that is reached, [`input`](LineDiscipline::input) refuses the byte and the driver stops
//! taking bytes from the UART until a read makes room. A line being typed stops growing at
//! [`LINE_MAX`] (further ordinary characters are dropped, as Linux does), so the end-of-line
//! and erase characters always have room and a reader can never be starved by a full buffer.

use crate::termios::*;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Most bytes held at once (Linux's N_TTY_BUF_SIZE).
pub const CAPACITY: usize = 4096;
/// Longest line, its `\n` included (Linux: 4095 characters and the newline).
pub const LINE_MAX: usize = CAPACITY;

/// Backspace: erases in canonical mode besides VERASE (terminals send either for the key).
pub const BACKSPACE: u8 = 0x08;

/// What became of a received byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Consumed (stored, acted on, or dropped because the line is at its limit).
    Taken,
    /// No room: not consumed; offer it again after a read.
    Full,
    /// Consumed as a signal character (ISIG): the foreground process group gets this signal.
    Signal(u32),
}

/// The signals ISIG's characters raise (Linux's numbers).
pub const SIGINT: u32 = 2;
pub const SIGQUIT: u32 = 3;
pub const SIGTSTP: u32 = 20;

/// One terminal's input state.
#[derive(Debug)]
pub struct LineDiscipline {
    termios: Termios,
    /// Input readers may take: finished lines in canonical mode, every byte otherwise.
    ready: VecDeque<u8>,
    /// Canonical mode: the length of each finished line in `ready`, oldest first (they add up
    /// to `ready.len()`); 0 is an end of file.
    lines: VecDeque<usize>,
    /// Canonical mode: the line being typed.
    line: Vec<u8>,
}

impl LineDiscipline {
    pub fn new(termios: Termios) -> Self {
        LineDiscipline {
            termios,
            ready: VecDeque::new(),
            lines: VecDeque::new(),
            line: Vec::new(),
        }
    }

    pub fn termios(&self) -> &Termios {
        &self.termios
    }

    /// New settings; `flush` discards all input held first (TCSETSF, TCFLSH).
    pub fn set_termios(&mut self, new: Termios, flush: bool) {
        if flush {
            self.ready.clear();
            self.lines.clear();
            self.line.clear();
        }
        let was = self.termios.canonical();
        self.termios = new;
        match (was, new.canonical()) {
            (true, false) => {
                // Everything typed becomes plain bytes (an end of file is no byte).
                self.lines.clear();
                self.ready.extend(self.line.drain(..));
            }
            (false, true) if !self.ready.is_empty() => {
                self.lines.clear();
                self.lines.push_back(self.ready.len());
            }
            _ => {}
        }
    }

    /// Whether another byte would be taken now.
    pub fn has_room(&self) -> bool {
        self.ready.len() + self.line.len() < CAPACITY
    }

    /// Whether a reader waiting should look again: a line (or end of file) is finished, or in
    /// non-canonical mode any byte is there (how many a read needs depends on its count).
    pub fn readable(&self) -> bool {
        if self.termios.canonical() {
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
        let t = self.termios;
        let mut b = if t.iflag & ISTRIP != 0 {
            byte & 0x7f
        } else {
            byte
        };
        // Signal characters act even when the input is full (^C must get through a flood).
        if t.lflag & ISIG != 0 {
            let sig = [(VINTR, SIGINT), (VQUIT, SIGQUIT), (VSUSP, SIGTSTP)]
                .into_iter()
                .find(|&(cc, _)| t.is_cc(cc, b));
            if let Some((_, sig)) = sig {
                if t.lflag & NOFLSH == 0 {
                    self.ready.clear();
                    self.lines.clear();
                    self.line.clear();
                }
                self.echo(b, echo);
                return Input::Signal(sig);
            }
        }
        if !self.has_room() {
            return Input::Full;
        }
        if b == b'\r' {
            if t.iflag & IGNCR != 0 {
                return Input::Taken;
            }
            if t.iflag & ICRNL != 0 {
                b = b'\n';
            }
        } else if b == b'\n' && t.iflag & INLCR != 0 {
            b = b'\r';
        }
        if !t.canonical() {
            self.ready.push_back(b);
            self.echo(b, echo);
            return Input::Taken;
        }
        if b == b'\n' || t.is_cc(VEOL, b) || t.is_cc(VEOL2, b) {
            self.line.push(b);
            self.finish_line();
            self.echo(b, echo);
        } else if t.is_cc(VEOF, b) {
            self.finish_line();
        } else if t.is_cc(VERASE, b) || b == BACKSPACE {
            self.erase(echo);
        } else if t.is_cc(VKILL, b) {
            self.kill(b, echo);
        } else if self.line.len() < LINE_MAX - 1 {
            // Keep room for the newline that ends the line.
            self.line.push(b);
            self.echo(b, echo);
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
        let lflag = self.termios.lflag;
        if lflag & ECHO != 0 && lflag & ECHOE != 0 {
            self.rub_out(last, echo);
        }
    }

    /// "backspace, space, backspace" over the columns `last` was echoed as.
    fn rub_out(&self, last: u8, echo: &mut Vec<u8>) {
        let columns = if self.echoes_as_caret(last) { 2 } else { 1 };
        for _ in 0..columns {
            echo.extend_from_slice(b"\x08 \x08");
        }
    }

    /// VKILL: drops the line being typed.
    fn kill(&mut self, kill_char: u8, echo: &mut Vec<u8>) {
        let lflag = self.termios.lflag;
        if lflag & ECHO == 0 {
            self.line.clear();
            return;
        }
        if lflag & ECHOKE != 0 && lflag & ECHOE != 0 {
            while !self.line.is_empty() {
                self.erase(echo);
            }
            return;
        }
        self.line.clear();
        self.echo(kill_char, echo);
        if lflag & ECHOK != 0 {
            output(&self.termios, b"\n", echo);
        }
    }

    fn echo(&self, b: u8, out: &mut Vec<u8>) {
        let lflag = self.termios.lflag;
        if lflag & ECHO == 0 {
            if b == b'\n' && lflag & ECHONL != 0 && self.termios.canonical() {
                output(&self.termios, b"\n", out);
            }
            return;
        }
        if self.echoes_as_caret(b) {
            out.extend_from_slice(&[b'^', b ^ 0x40]);
        } else {
            output(&self.termios, &[b], out);
        }
    }

    /// Control characters other than tab and newline echo as `^X` with ECHOCTL.
    fn echoes_as_caret(&self, b: u8) -> bool {
        self.termios.lflag & ECHOCTL != 0 && ((b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7f)
    }

    /// Serves one read of at most `buf.len()` bytes: `None` if the reader must wait for input,
    /// else the number of bytes put in `buf` (0: end of file in canonical mode, no input with
    /// VMIN 0 and VTIME 0 otherwise).
    pub fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
        if buf.is_empty() {
            return None;
        }
        let n = if self.termios.canonical() {
            let first = self.lines.front_mut()?;
            let n = (*first).min(buf.len());
            *first -= n;
            // A line read to its end is done (an end of file once read, too).
            if *first == 0 {
                self.lines.pop_front();
            }
            n
        } else {
            let (vmin, vtime) = (self.termios.cc[VMIN], self.termios.cc[VTIME]);
            // How many bytes must be there before the read returns.
            let needed = match (vmin, vtime) {
                (0, 0) => 0,
                (0, _) => 1,
                (m, _) => (m as usize).min(buf.len()),
            };
            if self.ready.len() < needed {
                return None;
            }
            self.ready.len().min(buf.len())
        };
        for (dst, src) in buf.iter_mut().zip(self.ready.drain(..n)) {
            *dst = src;
        }
        Some(n)
    }
}

/// Output processing of bytes written to the terminal, appended to `out`: OPOST's ONLCR.
pub fn output(termios: &Termios, data: &[u8], out: &mut Vec<u8>) {
    if termios.oflag & (OPOST | ONLCR) != OPOST | ONLCR {
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

fn is_utf8_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use alloc::vec;

    /// The default settings with echo off (as the harness's terminals have them).
    fn quiet() -> Termios {
        let mut t = Termios::default();
        t.lflag &= !Termios::ECHO_BITS;
        t
    }

    /// Non-canonical without echo, with VMIN and VTIME (ICRNL stays on: it applies in both
    /// modes).
    fn raw(vmin: u8, vtime: u8) -> Termios {
        let mut t = quiet();
        t.lflag &= !ICANON;
        t.cc[VMIN] = vmin;
        t.cc[VTIME] = vtime;
        t
    }

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
        let mut ld = LineDiscipline::new(Termios::default());
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
        let mut ld = LineDiscipline::new(Termios::default());
        feed(&mut ld, b"abc");
        assert!(!ld.readable());
        assert_eq!(ld.pending(), 0);
        assert_eq!(ld.read(&mut [0; 8]), None);
        feed(&mut ld, b"\n");
        assert_eq!(reads(&mut ld, 8), vec![b"abc\n".to_vec()]);
    }

    #[test]
    fn short_reads_split_a_line_but_never_join_two() {
        let mut ld = LineDiscipline::new(Termios::default());
        feed(&mut ld, b"abcdef\nxy\n");
        assert_eq!(
            reads(&mut ld, 4),
            vec![b"abcd".to_vec(), b"ef\n".to_vec(), b"xy\n".to_vec()]
        );
    }

    #[test]
    fn ctrl_d_mid_line_ends_the_read_without_the_byte() {
        let mut ld = LineDiscipline::new(Termios::default());
        feed(&mut ld, b"ab\x04cd\n\x04\x04");
        assert_eq!(
            reads(&mut ld, 64),
            vec![b"ab".to_vec(), b"cd\n".to_vec(), b"".to_vec(), b"".to_vec()]
        );
    }

    #[test]
    fn erase_removes_the_last_character_and_echoes_it_away() {
        let mut ld = LineDiscipline::new(Termios::default());
        let echo = feed(&mut ld, b"abx\x7fc\x08\x08d\n");
        assert_eq!(reads(&mut ld, 64), vec![b"ad\n".to_vec()]);
        assert_eq!(echo, b"abx\x08 \x08c\x08 \x08\x08 \x08d\r\n".to_vec());
    }

    #[test]
    fn erase_takes_a_whole_utf8_character_and_a_caret_pair() {
        let mut ld = LineDiscipline::new(Termios::default());
        let echo = feed(&mut ld, "aé\x7f\x01\x7f\n".as_bytes());
        assert_eq!(reads(&mut ld, 64), vec![b"a\n".to_vec()]);
        let mut want = "aé\x08 \x08^A".as_bytes().to_vec();
        want.extend_from_slice(b"\x08 \x08\x08 \x08\r\n");
        assert_eq!(echo, want);
    }

    #[test]
    fn no_echo_when_off_and_no_cr_without_onlcr() {
        let t = quiet();
        let mut ld = LineDiscipline::new(t);
        assert!(feed(&mut ld, b"quiet\r").is_empty());
        let mut out = Vec::new();
        output(&t, b"a\nb\n", &mut out);
        assert_eq!(out, b"a\r\nb\r\n");
        for oflag in [OPOST, ONLCR, 0] {
            out.clear();
            output(&Termios { oflag, ..t }, b"a\nb\n", &mut out);
            assert_eq!(out, b"a\nb\n");
        }
    }

    #[test]
    fn raw_mode_passes_bytes_as_they_come() {
        let mut ld = LineDiscipline::new(raw(1, 0));
        feed(&mut ld, b"ab\x04\x7f\r");
        assert_eq!(
            reads(&mut ld, 2),
            vec![b"ab".to_vec(), b"\x04\x7f".to_vec(), b"\n".to_vec()]
        );
    }

    #[test]
    fn full_buffer_refuses_bytes_until_a_read_makes_room() {
        let mut ld = LineDiscipline::new(quiet());
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
        let mut ld = LineDiscipline::new(quiet());
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
        let mut ld = LineDiscipline::new(Termios::default());
        assert!(feed(&mut ld, b"\x7f\x08").is_empty());
        feed(&mut ld, b"\n");
        assert_eq!(reads(&mut ld, 8), vec![b"\n".to_vec()]);
    }

    #[test]
    fn empty_buffer_read_waits() {
        let mut ld = LineDiscipline::new(Termios::default());
        feed(&mut ld, b"x\n");
        assert_eq!(ld.read(&mut []), None);
        assert_eq!(ld.read(&mut [0; 1]), Some(1));
    }

    #[test]
    fn vmin_waits_for_min_of_vmin_and_count() {
        let mut ld = LineDiscipline::new(raw(3, 0));
        feed(&mut ld, b"ab");
        assert!(ld.readable());
        assert_eq!(ld.read(&mut [0; 8]), None);
        // A read asking for fewer than VMIN needs only its count.
        let mut two = [0; 2];
        assert_eq!(ld.read(&mut two), Some(2));
        assert_eq!(&two, b"ab");
        feed(&mut ld, b"cdefg");
        let mut buf = [0; 8];
        assert_eq!(ld.read(&mut buf), Some(5));
        assert_eq!(&buf[..5], b"cdefg");
    }

    #[test]
    fn vmin_zero_vtime_zero_polls() {
        let mut ld = LineDiscipline::new(raw(0, 0));
        assert_eq!(ld.read(&mut [0; 4]), Some(0));
        feed(&mut ld, b"x");
        assert_eq!(ld.read(&mut [0; 4]), Some(1));
        // VTIME without a timer: wait for one byte.
        ld.set_termios(raw(0, 5), false);
        assert_eq!(ld.read(&mut [0; 4]), None);
    }

    #[test]
    fn raw_echo_and_no_line_editing() {
        let mut t = raw(1, 0);
        t.lflag |= ECHO | ECHOCTL;
        let mut ld = LineDiscipline::new(t);
        // Erase and kill are plain bytes; ECHOCTL still shows control characters.
        let echo = feed(&mut ld, b"a\x7f\x15\r");
        assert_eq!(echo, b"a^?^U\r\n");
        assert_eq!(reads(&mut ld, 8), vec![b"a\x7f\x15\n".to_vec()]);
    }

    #[test]
    fn switching_to_raw_with_a_partial_line_makes_it_readable() {
        let mut ld = LineDiscipline::new(quiet());
        feed(&mut ld, b"one\ntw");
        ld.set_termios(raw(1, 0), false);
        assert_eq!(ld.pending(), 6);
        assert_eq!(reads(&mut ld, 64), vec![b"one\ntw".to_vec()]);
        // Bytes now come one by one, no line needed.
        feed(&mut ld, b"o");
        assert_eq!(reads(&mut ld, 64), vec![b"o".to_vec()]);
    }

    #[test]
    fn switching_to_canonical_makes_unread_bytes_one_line() {
        let mut ld = LineDiscipline::new(raw(1, 0));
        feed(&mut ld, b"xy");
        ld.set_termios(quiet(), false);
        assert_eq!(reads(&mut ld, 64), vec![b"xy".to_vec()]);
        // Then line editing again.
        feed(&mut ld, b"ab\x7fc");
        assert!(!ld.readable());
        feed(&mut ld, b"\n");
        assert_eq!(reads(&mut ld, 64), vec![b"ac\n".to_vec()]);
        // Nothing held: nothing becomes readable.
        ld.set_termios(raw(1, 0), false);
        ld.set_termios(quiet(), false);
        assert!(!ld.readable());
    }

    #[test]
    fn flush_discards_typed_and_finished_input() {
        let mut ld = LineDiscipline::new(quiet());
        feed(&mut ld, b"gone\nhalf");
        ld.set_termios(quiet(), true);
        assert_eq!(ld.pending(), 0);
        feed(&mut ld, b"kept\n");
        assert_eq!(reads(&mut ld, 64), vec![b"kept\n".to_vec()]);
    }

    #[test]
    fn echo_switched_off_and_on_at_run_time() {
        let mut ld = LineDiscipline::new(Termios::default());
        assert_eq!(feed(&mut ld, b"a"), b"a");
        ld.set_termios(quiet(), false);
        assert!(feed(&mut ld, b"b").is_empty());
        let mut echonl = quiet();
        echonl.lflag |= ECHONL;
        ld.set_termios(echonl, false);
        assert_eq!(feed(&mut ld, b"c\r"), b"\r\n");
        assert_eq!(reads(&mut ld, 64), vec![b"abc\n".to_vec()]);
    }

    #[test]
    fn kill_erases_the_line() {
        let mut ld = LineDiscipline::new(Termios::default());
        // ECHOKE: rubbed out on screen, one column per character (two for ^A).
        let echo = feed(&mut ld, b"a\x01\x15z\n");
        assert_eq!(echo, b"a^A\x08 \x08\x08 \x08\x08 \x08z\r\n");
        assert_eq!(reads(&mut ld, 64), vec![b"z\n".to_vec()]);
        // Without ECHOKE: the kill character, then a newline (ECHOK).
        let mut t = Termios::default();
        t.lflag &= !ECHOKE;
        ld.set_termios(t, false);
        assert_eq!(feed(&mut ld, b"ab\x15"), b"ab^U\r\n");
        feed(&mut ld, b"c\n");
        assert_eq!(reads(&mut ld, 64), vec![b"c\n".to_vec()]);
    }

    #[test]
    fn input_mapping_flags() {
        let mut t = quiet();
        t.iflag = IGNCR;
        let mut ld = LineDiscipline::new(t);
        feed(&mut ld, b"a\rb\n");
        assert_eq!(reads(&mut ld, 64), vec![b"ab\n".to_vec()]);
        // No ICRNL: `\r` is an ordinary character; INLCR: `\n` becomes `\r`.
        t.iflag = INLCR;
        ld.set_termios(t, false);
        feed(&mut ld, b"x\n\r");
        assert!(!ld.readable());
        t.iflag = ICRNL;
        ld.set_termios(t, false);
        feed(&mut ld, b"\r");
        assert_eq!(reads(&mut ld, 64), vec![b"x\r\r\n".to_vec()]);
    }

    #[test]
    fn a_changed_control_character_acts_and_a_disabled_one_does_not() {
        let mut t = quiet();
        t.cc[VERASE] = b'#';
        t.cc[VEOF] = DISABLED;
        let mut ld = LineDiscipline::new(t);
        feed(&mut ld, b"ab#\x04\n");
        assert_eq!(reads(&mut ld, 64), vec![b"a\x04\n".to_vec()]);
    }

    #[test]
    fn signal_characters_flush_echo_and_report() {
        let mut t = Termios::default();
        let mut ld = LineDiscipline::new(t);
        let mut echo = Vec::new();
        feed(&mut ld, b"done\npart");
        assert_eq!(ld.input(0x03, &mut echo), Input::Signal(SIGINT));
        assert_eq!(echo, b"^C".to_vec());
        assert!(
            !ld.readable(),
            "^C flushes the finished and the typed input"
        );
        assert_eq!(ld.input(0x1c, &mut echo), Input::Signal(SIGQUIT));
        assert_eq!(ld.input(0x1a, &mut echo), Input::Signal(SIGTSTP));
        // NOFLSH keeps the input; without ISIG ^C is an ordinary character.
        t.lflag |= NOFLSH;
        ld.set_termios(t, false);
        feed(&mut ld, b"kept\n");
        assert_eq!(ld.input(0x03, &mut Vec::new()), Input::Signal(SIGINT));
        t.lflag &= !ISIG;
        ld.set_termios(t, false);
        feed(&mut ld, b"\x03\n");
        assert_eq!(
            reads(&mut ld, 64),
            vec![b"kept\n".to_vec(), b"\x03\n".to_vec()]
        );
    }

    #[test]
    fn a_signal_character_gets_through_full_input() {
        let mut ld = LineDiscipline::new(raw(1, 0));
        let mut echo = Vec::new();
        while ld.input(b'x', &mut echo) == Input::Taken {}
        let mut t = raw(1, 0);
        t.lflag |= ISIG;
        ld.set_termios(t, false);
        assert_eq!(ld.input(0x03, &mut echo), Input::Signal(SIGINT));
        assert!(ld.has_room());
    }
}
