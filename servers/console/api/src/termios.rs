//! A terminal's settings as Linux keeps them: the kernel's `struct termios` (what `ioctl(TCGETS)`
//! fills, 36 bytes on x86-64: four flag words, the line discipline number, 19 control
//! characters), the flag bits and control-character indices the console acts on, and the
//! settings a new serial tty starts with. Values as in the kernel's uapi `asm-generic/termbits.h`.
//!
//! The console stores every field as given (so `stty` reads back what it set) and acts on the
//! subset its line discipline implements (see [`crate::ldisc`]). Plain data; touches nothing.

/// Control characters in `c_cc`.
pub const NCCS: usize = 19;
/// Size of the kernel's `struct termios`.
pub const TERMIOS_SIZE: usize = 36;

// c_iflag
pub const IGNBRK: u32 = 0o1;
pub const BRKINT: u32 = 0o2;
pub const ISTRIP: u32 = 0o40;
pub const INLCR: u32 = 0o100;
pub const IGNCR: u32 = 0o200;
pub const ICRNL: u32 = 0o400;
pub const IXON: u32 = 0o2000;
// c_oflag
pub const OPOST: u32 = 0o1;
pub const ONLCR: u32 = 0o4;
// c_cflag
pub const B9600: u32 = 0o15;
pub const B38400: u32 = 0o17;
pub const CS8: u32 = 0o60;
pub const CREAD: u32 = 0o200;
pub const HUPCL: u32 = 0o2000;
pub const CLOCAL: u32 = 0o4000;
// c_lflag
pub const ISIG: u32 = 0o1;
pub const ICANON: u32 = 0o2;
pub const ECHO: u32 = 0o10;
pub const ECHOE: u32 = 0o20;
pub const ECHOK: u32 = 0o40;
pub const ECHONL: u32 = 0o100;
pub const ECHOCTL: u32 = 0o1000;
pub const ECHOKE: u32 = 0o4000;
pub const NOFLSH: u32 = 0o200;
/// A background process group's write to the terminal gets SIGTTOU (kept by the terminal; the
/// Linux personality acts on it).
pub const TOSTOP: u32 = 0o400;
pub const IEXTEN: u32 = 0o100000;

// c_cc indices
pub const VINTR: usize = 0;
pub const VQUIT: usize = 1;
pub const VERASE: usize = 2;
pub const VKILL: usize = 3;
pub const VEOF: usize = 4;
pub const VTIME: usize = 5;
pub const VMIN: usize = 6;
pub const VSTART: usize = 8;
pub const VSTOP: usize = 9;
pub const VSUSP: usize = 10;
pub const VEOL: usize = 11;
pub const VREPRINT: usize = 12;
pub const VDISCARD: usize = 13;
pub const VWERASE: usize = 14;
pub const VLNEXT: usize = 15;
pub const VEOL2: usize = 16;

/// A control character set to this is disabled (`_POSIX_VDISABLE`).
pub const DISABLED: u8 = 0;

/// One terminal's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termios {
    pub iflag: u32,
    pub oflag: u32,
    pub cflag: u32,
    pub lflag: u32,
    /// `c_line`: the line discipline number (0, N_TTY); kept, not acted on.
    pub line: u8,
    pub cc: [u8; NCCS],
}

impl Default for Termios {
    /// What a Linux serial tty starts with (`tty_std_termios` with the 8250 driver's
    /// `c_cflag`): canonical mode with echo and signals, CR→NL on input, NL→CRNL on output,
    /// 9600 baud 8 bits, and the usual control characters (^C ^\ DEL ^U ^D, VMIN 1, ^Q ^S ^Z,
    /// ^R ^O ^W ^V).
    fn default() -> Self {
        let mut cc = [DISABLED; NCCS];
        cc[VINTR] = 0x03;
        cc[VQUIT] = 0x1c;
        cc[VERASE] = 0x7f;
        cc[VKILL] = 0x15;
        cc[VEOF] = 0x04;
        cc[VMIN] = 1;
        cc[VSTART] = 0x11;
        cc[VSTOP] = 0x13;
        cc[VSUSP] = 0x1a;
        cc[VREPRINT] = 0x12;
        cc[VDISCARD] = 0x0f;
        cc[VWERASE] = 0x17;
        cc[VLNEXT] = 0x16;
        Termios {
            iflag: ICRNL | IXON,
            oflag: OPOST | ONLCR,
            cflag: B9600 | CS8 | CREAD | HUPCL | CLOCAL,
            lflag: ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN,
            line: 0,
            cc,
        }
    }
}

impl Termios {
    /// The echo bits a terminal with "echo off" clears (`stty -echo -echoe -echok -echonl
    /// -echoctl`), as the test harness sets its host pseudo-terminal.
    pub const ECHO_BITS: u32 = ECHO | ECHOE | ECHOK | ECHONL | ECHOCTL;

    pub fn canonical(&self) -> bool {
        self.lflag & ICANON != 0
    }

    /// Whether control character `i` is `b` (a disabled one matches nothing).
    pub fn is_cc(&self, i: usize, b: u8) -> bool {
        self.cc[i] != DISABLED && self.cc[i] == b
    }

    /// The kernel's `struct termios` bytes (little-endian words).
    pub fn to_bytes(&self) -> [u8; TERMIOS_SIZE] {
        let mut b = [0u8; TERMIOS_SIZE];
        for (i, w) in [self.iflag, self.oflag, self.cflag, self.lflag]
            .into_iter()
            .enumerate()
        {
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        b[16] = self.line;
        b[17..].copy_from_slice(&self.cc);
        b
    }

    /// The settings in a kernel `struct termios`.
    pub fn from_bytes(b: &[u8; TERMIOS_SIZE]) -> Self {
        let word =
            |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        let mut cc = [0u8; NCCS];
        cc.copy_from_slice(&b[17..]);
        Termios {
            iflag: word(0),
            oflag: word(1),
            cflag: word(2),
            lflag: word(3),
            line: b[16],
            cc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_layout() {
        let t = Termios::default();
        let b = t.to_bytes();
        assert_eq!(&b[0..4], &(ICRNL | IXON).to_le_bytes());
        assert_eq!(b[17 + VERASE], 0x7f);
        assert_eq!(b[17 + VMIN], 1);
        assert_eq!(Termios::from_bytes(&b), t);
    }
}
