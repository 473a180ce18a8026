//! Host tests of the file layer over the in-memory file system (`mock.rs`). Expected values
//! are Linux's: errno values as Linux returns them for the same calls, structure offsets as the
//! host's C headers give them (see `stat_layout`).

use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::abi::*;
use super::backend::makedev;
use super::mock::Mock;
use super::Files;
use crate::errno::*;
use crate::{nr, Errno, SysResult, User};

/// The program's memory: one range at [`BASE`]; everything else faults.
struct Mem(RefCell<Vec<u8>>);
const BASE: u64 = 0x10_0000;
const SIZE: usize = 1 << 20;
/// A pointer the program does not own.
const BAD: u64 = 0x1000;

impl Mem {
    fn new() -> Mem {
        Mem(RefCell::new(vec![0; SIZE]))
    }
    fn range(&self, addr: u64, len: usize) -> Result<usize, Errno> {
        let off = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        if off.checked_add(len).is_none_or(|e| e > SIZE) {
            return Err(EFAULT);
        }
        Ok(off)
    }
    fn get(&self, addr: u64, len: usize) -> Vec<u8> {
        let o = self.range(addr, len).unwrap();
        self.0.borrow()[o..o + len].to_vec()
    }
    fn set(&self, addr: u64, data: &[u8]) {
        User::write(self, addr, data).unwrap()
    }
}

impl User for Mem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let o = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.0.borrow()[o..o + buf.len()]);
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        let o = self.range(addr, data.len())?;
        self.0.borrow_mut()[o..o + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
        let mut out = Vec::new();
        for i in 0..max as u64 {
            let mut b = [0u8];
            self.read(addr + i, &mut b)?;
            if b[0] == 0 {
                return Ok(out);
            }
            out.push(b[0]);
        }
        Err(ENAMETOOLONG)
    }
    // Lends the memory itself after checking the range, as the guest does.
    fn with_out(
        &self,
        addr: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let o = self.range(addr, len)?;
        fill(&mut self.0.borrow_mut()[o..o + len])
    }
    fn with_in(
        &self,
        addr: u64,
        len: usize,
        take: &mut dyn FnMut(&[u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let o = self.range(addr, len)?;
        take(&self.0.borrow()[o..o + len])
    }
}

/// A process over the mock, with helpers that put strings in its memory.
struct T {
    f: Files<Mock>,
    m: Mem,
    /// Next free address for strings.
    top: core::cell::Cell<u64>,
}

/// Where buffers go (strings go above).
const BUF: u64 = BASE + 0x8_0000;

impl T {
    fn new() -> T {
        let mut mock = Mock::new();
        mock.put("/tmp/", b"");
        mock.put("/etc/passwd", b"root:x:0:0::/root:/bin/sh\n");
        T {
            f: Files::new(mock, b"/bin/prog"),
            m: Mem::new(),
            top: core::cell::Cell::new(BASE),
        }
    }
    fn s(&self, s: &str) -> u64 {
        let a = self.top.get();
        self.m.set(a, s.as_bytes());
        self.m.set(a + s.len() as u64, &[0]);
        self.top.set(a + s.len() as u64 + 1);
        a
    }
    fn call(&mut self, n: u64, a: &[u64]) -> SysResult {
        let mut args = [0u64; 6];
        args[..a.len()].copy_from_slice(a);
        self.f.dispatch(n, args, &self.m).expect("a file call")
    }
    fn open(&mut self, p: &str, flags: u32, mode: u32) -> SysResult {
        let a = self.s(p);
        self.call(nr::OPENAT, &[AT_FDCWD as u64, a, flags as u64, mode as u64])
    }
    fn write(&mut self, fd: u64, data: &[u8]) -> SysResult {
        self.m.set(BUF, data);
        self.call(nr::WRITE, &[fd, BUF, data.len() as u64])
    }
    fn read(&mut self, fd: u64, n: usize) -> Result<Vec<u8>, Errno> {
        let got = self.call(nr::READ, &[fd, BUF, n as u64])? as usize;
        Ok(self.m.get(BUF, got))
    }
    fn stat(&mut self, p: &str, flags: u32) -> Result<Vec<u8>, Errno> {
        let a = self.s(p);
        self.call(nr::NEWFSTATAT, &[AT_FDCWD as u64, a, BUF, flags as u64])?;
        Ok(self.m.get(BUF, STAT_SIZE))
    }
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn word32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[test]
fn console_descriptors_at_start() {
    let mut t = T::new();
    assert_eq!(t.write(1, b"hello\n"), Ok(6));
    assert_eq!(t.write(2, b"err"), Ok(3));
    assert_eq!(t.f.backend.console_out, b"hello\nerr");
    // Longer than one console message: all of it, in pieces.
    let long = vec![b'x'; 2000];
    assert_eq!(t.write(1, &long), Ok(2000));
    t.f.backend.console_in = b"line one\nline two\n".to_vec();
    assert_eq!(t.read(0, 100).unwrap(), b"line one\n");
    assert_eq!(t.call(nr::LSEEK, &[0, 0, SEEK_SET as u64]), Err(ESPIPE));
    // isatty: TCGETS works on the console, ENOTTY on a file.
    assert_eq!(t.call(nr::IOCTL, &[1, TCGETS as u64, BUF]), Ok(0));
    let tio = t.m.get(BUF, TERMIOS_SIZE);
    use sawmill_console_api::termios::{ECHO, ICANON};
    assert_ne!(word32(&tio, 12) & ICANON, 0);
    assert_ne!(word32(&tio, 12) & ECHO, 0);
    assert_eq!(t.call(nr::IOCTL, &[1, TIOCGWINSZ as u64, BUF]), Ok(0));
    assert_eq!(t.m.get(BUF, 4), [24, 0, 80, 0]);
    let fd = t.open("/etc/passwd", O_RDONLY, 0).unwrap();
    assert_eq!(t.call(nr::IOCTL, &[fd, TCGETS as u64, BUF]), Err(ENOTTY));
    assert_eq!(t.call(nr::IOCTL, &[1, TCGETS as u64, BAD]), Err(EFAULT));
}

#[test]
fn tostop_stops_a_background_write() {
    use sawmill_console_api::termios::TOSTOP;
    let mut t = T::new();
    t.f.backend.background = true;
    // Without TOSTOP a background group writes; with it, SIGTTOU (the call restarts after).
    assert_eq!(t.write(1, b"a"), Ok(1));
    t.f.backend.termios.lflag |= TOSTOP;
    assert_eq!(t.write(1, b"b"), Err(crate::signal::ERESTARTSYS));
    // The foreground writes.
    t.f.backend.background = false;
    assert_eq!(t.write(1, b"d"), Ok(1));
    assert_eq!(t.f.backend.console_out, b"ad");
}

#[test]
fn terminal_settings_live_in_the_terminal() {
    use sawmill_console_api::termios::{Termios, ECHO, ICANON, VMIN};
    let mut t = T::new();
    assert_eq!(t.call(nr::IOCTL, &[0, TCGETS as u64, BUF]), Ok(0));
    let got = t.m.get(BUF, TERMIOS_SIZE);
    assert_eq!(got, Termios::default().to_bytes());
    // `stty raw -echo`-like: what TCSETS sets, the terminal keeps, and TCGETS reads back.
    let mut raw = Termios::default();
    raw.lflag &= !(ICANON | ECHO);
    raw.cc[VMIN] = 1;
    t.m.set(BUF, &raw.to_bytes());
    assert_eq!(t.call(nr::IOCTL, &[0, TCSETSW as u64, BUF]), Ok(0));
    assert_eq!(t.f.backend.termios, raw);
    t.m.set(BUF, &[0; TERMIOS_SIZE]);
    assert_eq!(t.call(nr::IOCTL, &[2, TCGETS as u64, BUF]), Ok(0));
    assert_eq!(t.m.get(BUF, TERMIOS_SIZE), raw.to_bytes());
    // TCSETSF discards input held; TCSETS keeps it.
    t.f.backend.console_in = b"typed ahead\n".to_vec();
    t.m.set(BUF, &Termios::default().to_bytes());
    assert_eq!(t.call(nr::IOCTL, &[0, TCSETS as u64, BUF]), Ok(0));
    assert_eq!(t.f.backend.console_in.len(), 12);
    assert_eq!(t.call(nr::IOCTL, &[0, TCSETSF as u64, BUF]), Ok(0));
    assert!(t.f.backend.console_in.is_empty());
    // TIOCSWINSZ sets what TIOCGWINSZ reports.
    t.m.set(BUF, &[50, 0, 132, 0, 0, 0, 0, 0]);
    assert_eq!(t.call(nr::IOCTL, &[1, TIOCSWINSZ as u64, BUF]), Ok(0));
    t.m.set(BUF, &[0; 8]);
    assert_eq!(t.call(nr::IOCTL, &[1, TIOCGWINSZ as u64, BUF]), Ok(0));
    assert_eq!(t.m.get(BUF, 4), [50, 0, 132, 0]);
    // Bad pointers: EFAULT, nothing changed.
    assert_eq!(t.call(nr::IOCTL, &[0, TCSETS as u64, BAD]), Err(EFAULT));
    assert_eq!(t.call(nr::IOCTL, &[0, TIOCSWINSZ as u64, BAD]), Err(EFAULT));
    assert_eq!(t.call(nr::IOCTL, &[0, TIOCGWINSZ as u64, BAD]), Err(EFAULT));
    assert_eq!(t.f.backend.termios, Termios::default());
    // FIONREAD: what the terminal holds; TCFLSH of the input empties it; a bad queue: EINVAL.
    t.f.backend.console_in = b"abc".to_vec();
    assert_eq!(t.call(nr::IOCTL, &[0, FIONREAD as u64, BUF]), Ok(0));
    assert_eq!(t.m.get(BUF, 4), [3, 0, 0, 0]);
    assert_eq!(t.call(nr::IOCTL, &[0, TCFLSH as u64, TCOFLUSH]), Ok(0));
    assert_eq!(t.f.backend.console_in.len(), 3);
    assert_eq!(t.call(nr::IOCTL, &[0, TCFLSH as u64, 3]), Err(EINVAL));
    assert_eq!(t.call(nr::IOCTL, &[0, TCFLSH as u64, TCIFLUSH]), Ok(0));
    assert!(t.f.backend.console_in.is_empty());
    assert_eq!(t.call(nr::IOCTL, &[0, TCSBRK as u64, 1]), Ok(0));
    // A request a terminal does not know: ENOTTY, as Linux answers on a tty.
    assert_eq!(t.call(nr::IOCTL, &[0, 0x54ff, BUF]), Err(ENOTTY));
    // Not a terminal: ENOTTY for all of them.
    let fd = t.open("/etc/passwd", O_RDONLY, 0).unwrap();
    for req in [TCSETS, TCSETSF, TIOCGWINSZ, TIOCSWINSZ] {
        assert_eq!(t.call(nr::IOCTL, &[fd, req as u64, BUF]), Err(ENOTTY));
    }
}

#[test]
fn dup_shares_the_offset_and_cloexec_is_per_descriptor() {
    let mut t = T::new();
    let fd = t.open("/etc/passwd", O_RDONLY | O_CLOEXEC, 0).unwrap();
    assert_eq!(fd, 3, "lowest free descriptor");
    let d = t.call(nr::DUP, &[fd]).unwrap();
    assert_eq!(d, 4);
    assert_eq!(t.read(fd, 4).unwrap(), b"root");
    assert_eq!(t.read(d, 2).unwrap(), b":x", "one offset for both");
    assert_eq!(t.call(nr::FCNTL, &[fd, F_GETFD as u64]), Ok(FD_CLOEXEC));
    assert_eq!(t.call(nr::FCNTL, &[d, F_GETFD as u64]), Ok(0));
    // dup2 onto itself returns it; dup3 onto itself is EINVAL.
    assert_eq!(t.call(nr::DUP2, &[fd, fd]), Ok(fd));
    assert_eq!(t.call(nr::DUP3, &[fd, fd, 0]), Err(EINVAL));
    assert_eq!(t.call(nr::DUP3, &[fd, 9, 0xff]), Err(EINVAL));
    assert_eq!(t.call(nr::DUP3, &[fd, 9, O_CLOEXEC as u64]), Ok(9));
    assert_eq!(t.call(nr::FCNTL, &[9, F_GETFD as u64]), Ok(FD_CLOEXEC));
    assert_eq!(t.call(nr::FCNTL, &[fd, F_DUPFD as u64, 20]), Ok(20));
    assert_eq!(t.call(nr::DUP2, &[55, 3]), Err(EBADF));
    assert_eq!(t.call(nr::DUP2, &[fd, 5000]), Err(EBADF));
    // Closing one keeps the file open for the others; the last close releases it.
    assert_eq!(t.call(nr::CLOSE, &[fd]), Ok(0));
    assert_eq!(t.call(nr::CLOSE, &[fd]), Err(EBADF));
    assert_eq!(t.f.backend.open_handles(), 1);
    assert_eq!(t.read(d, 3).unwrap(), b":0:");
    // exec closes the close-on-exec ones.
    t.f.exec_closes();
    assert_eq!(t.call(nr::FCNTL, &[9, F_GETFD as u64]), Err(EBADF));
    for fd in [4, 20] {
        t.call(nr::CLOSE, &[fd]).unwrap();
    }
    assert_eq!(t.f.backend.open_handles(), 0);
    // dup2 over an open descriptor closes what was there.
    let a = t.open("/etc/passwd", O_RDONLY, 0).unwrap();
    let b = t.open("/etc/passwd", O_RDONLY, 0).unwrap();
    assert_eq!(t.call(nr::DUP2, &[a, b]), Ok(b));
    assert_eq!(t.f.backend.open_handles(), 1);
    assert_eq!(t.call(nr::CLOSE, &[-1i64 as u64]), Err(EBADF));
    assert_eq!(t.call(nr::READ, &[1000, BUF, 1]), Err(EBADF));
}

#[test]
fn status_flags() {
    let mut t = T::new();
    let fd = t
        .open("/tmp/f", O_WRONLY | O_CREAT | O_NONBLOCK, 0o644)
        .unwrap();
    let fl = t.call(nr::FCNTL, &[fd, F_GETFL as u64]).unwrap() as u32;
    assert_eq!(fl, O_WRONLY | O_NONBLOCK | O_LARGEFILE);
    t.call(nr::FCNTL, &[fd, F_SETFL as u64, (O_APPEND | O_RDWR) as u64])
        .unwrap();
    let fl = t.call(nr::FCNTL, &[fd, F_GETFL as u64]).unwrap() as u32;
    assert_eq!(fl, O_WRONLY | O_APPEND | O_LARGEFILE, "access mode stays");
    assert_eq!(t.read(fd, 1), Err(EBADF), "write-only");
    assert_eq!(t.call(nr::FCNTL, &[fd, 999]), Err(EINVAL));
    // Locks are accepted (one process: nothing conflicts).
    assert_eq!(t.call(nr::FCNTL, &[fd, F_SETLK as u64, BUF]), Ok(0));
    assert_eq!(t.call(nr::FCNTL, &[fd, F_GETLK as u64, BUF]), Ok(0));
    assert_eq!(t.m.get(BUF, 2), F_UNLCK.to_le_bytes());
}

#[test]
fn open_flags() {
    let mut t = T::new();
    assert_eq!(t.open("/tmp/new", O_RDONLY, 0), Err(ENOENT));
    let fd = t
        .open("/tmp/new", O_RDWR | O_CREAT | O_EXCL, 0o666)
        .unwrap();
    // O_CREAT applies the umask (022).
    let s = t.stat("/tmp/new", 0).unwrap();
    assert_eq!(word32(&s, 24), S_IFREG | 0o644);
    assert_eq!(
        t.open("/tmp/new", O_RDWR | O_CREAT | O_EXCL, 0o666),
        Err(EEXIST)
    );
    assert_eq!(t.write(fd, b"0123456789"), Ok(10));
    // O_TRUNC empties it.
    let fd2 = t.open("/tmp/new", O_WRONLY | O_TRUNC, 0).unwrap();
    assert_eq!(t.f.backend.data("/tmp/new"), b"");
    // O_APPEND writes at the end whatever the offset.
    t.write(fd2, b"abc").unwrap();
    let fa = t.open("/tmp/new", O_WRONLY | O_APPEND, 0).unwrap();
    assert_eq!(t.write(fa, b"XY"), Ok(2));
    t.call(nr::LSEEK, &[fa, 0, SEEK_SET as u64]).unwrap();
    assert_eq!(t.write(fa, b"Z"), Ok(1));
    assert_eq!(t.f.backend.data("/tmp/new"), b"abcXYZ");
    assert_eq!(t.call(nr::LSEEK, &[fa, 0, SEEK_CUR as u64]), Ok(6));
    // O_DIRECTORY.
    assert_eq!(t.open("/tmp/new", O_RDONLY | O_DIRECTORY, 0), Err(ENOTDIR));
    let d = t.open("/tmp", O_RDONLY | O_DIRECTORY, 0).unwrap();
    assert_eq!(t.read(d, 10), Err(EISDIR));
    assert_eq!(t.open("/tmp", O_WRONLY, 0), Err(EISDIR));
    assert_eq!(t.open("/tmp/x", O_CREAT | O_DIRECTORY, 0), Err(EINVAL));
    // O_TMPFILE: a read-only one or one without O_DIRECTORY's bit is EINVAL (checked before the
    // path, as Linux does: edge.c's "openat(bad flags)"); a valid one is not offered.
    assert_eq!(t.open("/tmp", O_RDONLY | O_TMPFILE, 0), Err(EINVAL));
    assert_eq!(
        t.open("/tmp", O_RDWR | (O_TMPFILE & !O_DIRECTORY), 0),
        Err(EINVAL)
    );
    assert_eq!(t.open("/tmp", O_RDWR | O_TMPFILE, 0), Err(EOPNOTSUPP));
    // O_NOFOLLOW on a symlink.
    t.f.backend.put_link("/tmp/l", "/tmp/new");
    assert_eq!(t.open("/tmp/l", O_RDONLY | O_NOFOLLOW, 0), Err(ELOOP));
    assert!(t.open("/tmp/l", O_RDONLY, 0).is_ok());
    // A trailing slash on a file, an empty path, a bad pointer.
    assert_eq!(t.open("/tmp/new/", O_RDONLY, 0), Err(ENOTDIR));
    assert_eq!(t.open("", O_RDONLY, 0), Err(ENOENT));
    assert_eq!(t.call(nr::OPEN, &[BAD, O_RDONLY as u64, 0]), Err(EFAULT));
    // O_PATH: a name only.
    let p = t.open("/tmp", O_PATH, 0).unwrap();
    assert_eq!(t.read(p, 1), Err(EBADF));
    assert_eq!(t.call(nr::FSTAT, &[p, BUF]), Ok(0));
}

#[test]
fn lseek_and_sparse_files() {
    let mut t = T::new();
    let fd = t.open("/tmp/s", O_RDWR | O_CREAT, 0o600).unwrap();
    t.write(fd, b"head").unwrap();
    assert_eq!(t.call(nr::LSEEK, &[fd, 10000, SEEK_SET as u64]), Ok(10000));
    assert_eq!(t.read(fd, 10).unwrap(), b"", "past the end reads nothing");
    t.write(fd, b"tail").unwrap();
    assert_eq!(t.call(nr::LSEEK, &[fd, 0, SEEK_END as u64]), Ok(10004));
    assert_eq!(
        t.call(nr::LSEEK, &[fd, -4i64 as u64, SEEK_END as u64]),
        Ok(10000)
    );
    assert_eq!(
        t.call(nr::LSEEK, &[fd, -20000i64 as u64, SEEK_CUR as u64]),
        Err(EINVAL)
    );
    assert_eq!(t.call(nr::LSEEK, &[fd, 0, 7]), Err(EINVAL));
    assert_eq!(t.call(nr::LSEEK, &[fd, 5, SEEK_DATA as u64]), Ok(5));
    assert_eq!(t.call(nr::LSEEK, &[fd, 5, SEEK_HOLE as u64]), Ok(10004));
    assert_eq!(
        t.call(nr::LSEEK, &[fd, 20000, SEEK_DATA as u64]),
        Err(ENXIO)
    );
    assert_eq!(t.call(nr::LSEEK, &[fd, 0, SEEK_CUR as u64]), Ok(10004));
    t.call(nr::LSEEK, &[fd, 10000, SEEK_SET as u64]).unwrap();
    // The gap reads as zeros.
    t.m.set(BUF, &[0xaa; 100]);
    assert_eq!(t.call(nr::PREAD64, &[fd, BUF, 100, 4]), Ok(100));
    assert_eq!(t.m.get(BUF, 100), [0u8; 100]);
    assert_eq!(
        t.call(nr::PREAD64, &[fd, BUF, 10, -1i64 as u64]),
        Err(EINVAL)
    );
    assert_eq!(t.call(nr::PREAD64, &[1, BUF, 10, 0]), Err(ESPIPE));
    // pread leaves the offset.
    assert_eq!(t.call(nr::LSEEK, &[fd, 0, SEEK_CUR as u64]), Ok(10000));
    // A bad buffer: EFAULT, offset unchanged.
    assert_eq!(t.call(nr::READ, &[fd, BAD, 4]), Err(EFAULT));
    assert_eq!(t.call(nr::WRITE, &[fd, BAD, 4]), Err(EFAULT));
    assert_eq!(t.read(fd, 4).unwrap(), b"tail");
}

#[test]
fn vectors() {
    let mut t = T::new();
    let fd = t.open("/tmp/v", O_RDWR | O_CREAT, 0o600).unwrap();
    t.m.set(BUF + 0x100, b"hello ");
    t.m.set(BUF + 0x200, b"world");
    let iov = [BUF + 0x100, 6, BUF + 0x200, 5];
    let raw: Vec<u8> = iov.iter().flat_map(|w| w.to_le_bytes()).collect();
    t.m.set(BUF, &raw);
    assert_eq!(t.call(nr::WRITEV, &[fd, BUF, 2]), Ok(11));
    assert_eq!(t.f.backend.data("/tmp/v"), b"hello world");
    t.call(nr::LSEEK, &[fd, 0, 0]).unwrap();
    let iov = [BUF + 0x300, 3, BUF + 0x400, 100];
    let raw: Vec<u8> = iov.iter().flat_map(|w| w.to_le_bytes()).collect();
    t.m.set(BUF, &raw);
    assert_eq!(t.call(nr::READV, &[fd, BUF, 2]), Ok(11));
    assert_eq!(t.m.get(BUF + 0x300, 3), b"hel");
    assert_eq!(t.m.get(BUF + 0x400, 8), b"lo world");
    assert_eq!(t.call(nr::READV, &[fd, BUF, 5000]), Err(EINVAL));
    assert_eq!(t.call(nr::READV, &[fd, BAD, 2]), Err(EFAULT));
}

#[test]
fn relative_paths_cwd_and_dirfd() {
    let mut t = T::new();
    t.f.backend.put("/a/b/c/file", b"deep");
    t.f.backend.put_link("/a/link", "b/c");
    let p = t.s("/a/b");
    assert_eq!(t.call(nr::CHDIR, &[p]), Ok(0));
    assert_eq!(t.call(nr::GETCWD, &[BUF, 100]), Ok(5));
    assert_eq!(t.m.get(BUF, 5), b"/a/b\0");
    assert_eq!(t.call(nr::GETCWD, &[BUF, 4]), Err(ERANGE));
    let fd = t.open("c//./file", O_RDONLY, 0).unwrap();
    assert_eq!(t.read(fd, 10).unwrap(), b"deep");
    assert!(t.open("../b/c/file", O_RDONLY, 0).is_ok());
    assert!(t.open("../../../../a/b/c/file", O_RDONLY, 0).is_ok());
    // chdir through a symlink: getcwd reports the real directory.
    let p = t.s("/a/link");
    t.call(nr::CHDIR, &[p]).unwrap();
    let n = t.call(nr::GETCWD, &[BUF, 100]).unwrap() as usize;
    assert_eq!(t.m.get(BUF, n), b"/a/b/c\0");
    let p = t.s("file");
    assert_eq!(t.call(nr::CHDIR, &[p]), Err(ENOTDIR));
    let p = t.s("/nope");
    assert_eq!(t.call(nr::CHDIR, &[p]), Err(ENOENT));
    // A directory descriptor opened through a symlink: `..` is the link target's parent.
    let d = t.open("/a/link", O_RDONLY | O_DIRECTORY, 0).unwrap();
    let p = t.s("../c/file");
    let r = t.call(nr::OPENAT, &[d, p, 0, 0]);
    assert!(r.is_ok(), "{r:?}");
    // A file descriptor as dirfd: ENOTDIR; a closed one: EBADF; absolute paths ignore it.
    let p = t.s("x");
    assert_eq!(t.call(nr::OPENAT, &[fd, p, 0, 0]), Err(ENOTDIR));
    assert_eq!(t.call(nr::OPENAT, &[77, p, 0, 0]), Err(EBADF));
    let p = t.s("/etc/passwd");
    assert!(t.call(nr::OPENAT, &[77, p, 0, 0]).is_ok());
    // fchdir.
    let d = t.open("/a", O_RDONLY | O_DIRECTORY, 0).unwrap();
    assert_eq!(t.call(nr::FCHDIR, &[d]), Ok(0));
    let n = t.call(nr::GETCWD, &[BUF, 100]).unwrap() as usize;
    assert_eq!(t.m.get(BUF, n), b"/a\0");
    assert_eq!(t.call(nr::FCHDIR, &[fd]), Err(ENOTDIR));
}

#[test]
fn name_limits_and_loops() {
    let mut t = T::new();
    let long_name = "n".repeat(256);
    assert_eq!(t.open(&long_name, O_RDONLY, 0), Err(ENAMETOOLONG));
    assert_eq!(t.open(&"n".repeat(255), O_RDONLY, 0), Err(ENOENT));
    // 4096 bytes without a NUL: too long; 4095 is a path.
    let long_path = "/".repeat(4096);
    assert_eq!(t.open(&long_path, O_RDONLY, 0), Err(ENAMETOOLONG));
    assert!(t.open(&"/".repeat(4095), O_RDONLY, 0).is_ok());
    t.f.backend.put_link("/tmp/l1", "/tmp/l2");
    t.f.backend.put_link("/tmp/l2", "/tmp/l1");
    assert_eq!(t.open("/tmp/l1", O_RDONLY, 0), Err(ELOOP));
    let p = t.s("/tmp/l1");
    assert_eq!(t.call(nr::CHDIR, &[p]), Err(ELOOP));
}

#[test]
fn getdents64_small_buffers_over_2000_entries() {
    let mut t = T::new();
    let mut want: Vec<Vec<u8>> = vec![b".".to_vec(), b"..".to_vec()];
    let mut names: Vec<Vec<u8>> = (0..2000)
        .map(|i| alloc::format!("entry-{i:05}-{}", "x".repeat(i % 40)).into_bytes())
        .collect();
    names.sort();
    for n in &names {
        t.f.backend.put(
            &alloc::format!("/big/{}", core::str::from_utf8(n).unwrap()),
            b"",
        );
    }
    want.extend(names);
    let fd = t.open("/big", O_RDONLY | O_DIRECTORY, 0).unwrap();
    // Too small for even one entry.
    assert_eq!(t.call(nr::GETDENTS64, &[fd, BUF, 10]), Err(EINVAL));
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut last_off = 0;
    loop {
        let n = t.call(nr::GETDENTS64, &[fd, BUF, 100]).unwrap() as usize;
        if n == 0 {
            break;
        }
        let b = t.m.get(BUF, n);
        let mut at = 0;
        while at < n {
            let reclen = u16::from_le_bytes([b[at + 16], b[at + 17]]) as usize;
            assert_eq!(reclen % 8, 0);
            let name = &b[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&c| c == 0).unwrap()];
            assert_eq!(dirent64_len(name.len()), reclen);
            let off = word(&b, at + 8);
            assert!(off > last_off);
            last_off = off;
            let kind = b[at + 18];
            assert_eq!(
                kind,
                if name.starts_with(b".") {
                    DT_DIR
                } else {
                    DT_REG
                }
            );
            got.push(name.to_vec());
            at += reclen;
        }
    }
    assert_eq!(got, want);
    // Rewind and read again with a large buffer.
    t.call(nr::LSEEK, &[fd, 0, SEEK_SET as u64]).unwrap();
    let n = t.call(nr::GETDENTS64, &[fd, BUF, 0x8_0000 - 1]).unwrap();
    assert!(n > 0);
    assert_eq!(t.call(nr::GETDENTS64, &[fd, BUF, 1000]), Ok(0));
    // Not a directory; a bad buffer.
    let f = t.open("/etc/passwd", O_RDONLY, 0).unwrap();
    assert_eq!(t.call(nr::GETDENTS64, &[f, BUF, 1000]), Err(ENOTDIR));
    t.call(nr::LSEEK, &[fd, 0, SEEK_SET as u64]).unwrap();
    assert_eq!(t.call(nr::GETDENTS64, &[fd, BAD, 1000]), Err(EFAULT));
}

#[test]
fn stat_layout() {
    // Offsets of glibc's `struct stat`, `struct statx` and `struct statfs` on x86-64, as a C
    // program printing offsetof(...) compiled with the host's gcc reports them:
    //   stat:   size 144; dev 0 ino 8 nlink 16 mode 24 uid 28 gid 32 rdev 40 size 48
    //           blksize 56 blocks 64 atim 72 mtim 88 ctim 104
    //   statx:  size 256; blksize 4 nlink 16 uid 20 gid 24 mode 28 ino 32 size 40 blocks 48
    //           atime 64 ctime 96 mtime 112 rdev_major 128 rdev_minor 132 dev_major 136
    //           dev_minor 140
    //   statfs: size 120; bsize 8 blocks 16 bfree 24 bavail 32 files 40 ffree 48 fsid 56
    //           namelen 64 frsize 72 flags 80
    use super::backend::{Stat, StatFs, Timespec};
    let s = Stat {
        dev: 0x0101,
        ino: 0x0202,
        mode: 0o100644,
        nlink: 3,
        uid: 1000,
        gid: 100,
        rdev: makedev(1, 3),
        size: 5000,
        blocks: Some(16),
        atime: Timespec { sec: 11, nsec: 12 },
        mtime: Timespec { sec: 21, nsec: 22 },
        ctime: Timespec { sec: 31, nsec: 32 },
    };
    let b = pack_stat(&s);
    assert_eq!(b.len(), 144);
    assert_eq!(word(&b, 0), 0x0101);
    assert_eq!(word(&b, 8), 0x0202);
    assert_eq!(word(&b, 16), 3);
    assert_eq!(word32(&b, 24), 0o100644);
    assert_eq!(word32(&b, 28), 1000);
    assert_eq!(word32(&b, 32), 100);
    assert_eq!(word(&b, 40), 0x103);
    assert_eq!(word(&b, 48), 5000);
    assert_eq!(word(&b, 56), 4096);
    assert_eq!(word(&b, 64), 16);
    assert_eq!((word(&b, 72), word(&b, 80)), (11, 12));
    assert_eq!((word(&b, 88), word(&b, 96)), (21, 22));
    assert_eq!((word(&b, 104), word(&b, 112)), (31, 32));
    let x = pack_statx(&s);
    assert_eq!(x.len(), 256);
    assert_eq!(word32(&x, 0), STATX_BASIC_STATS);
    assert_eq!(word32(&x, 4), 4096);
    assert_eq!(word32(&x, 16), 3);
    assert_eq!(word32(&x, 20), 1000);
    assert_eq!(word32(&x, 24), 100);
    assert_eq!(u16::from_le_bytes([x[28], x[29]]), 0o100644);
    assert_eq!(word(&x, 32), 0x0202);
    assert_eq!(word(&x, 40), 5000);
    assert_eq!(word(&x, 48), 16);
    assert_eq!((word(&x, 64), word32(&x, 72)), (11, 12));
    assert_eq!((word(&x, 96), word32(&x, 104)), (31, 32));
    assert_eq!((word(&x, 112), word32(&x, 120)), (21, 22));
    assert_eq!((word32(&x, 128), word32(&x, 132)), (1, 3));
    assert_eq!((word32(&x, 136), word32(&x, 140)), (1, 1));
    let f = pack_statfs(&StatFs {
        fs_type: 0xef53,
        block_size: 1024,
        blocks: 3,
        blocks_free: 4,
        blocks_avail: 5,
        files: 6,
        files_free: 7,
        name_max: 255,
        fsid: 9,
        flags: 10,
    });
    assert_eq!(f.len(), 120);
    let w: Vec<u64> = (0..11).map(|i| word(&f, i * 8)).collect();
    assert_eq!(w, [0xef53, 1024, 3, 4, 5, 6, 7, 9, 255, 1024, 10]);
    // glibc's makedev.
    assert_eq!(makedev(1, 3), 0x103);
    // glibc's makedev (<sys/sysmacros.h>) on the host gives these.
    assert_eq!(makedev(259, 70000), 0x1111_0370);
    assert_eq!(makedev(0x12345, 0x6789a), 0x1_2000_6783_459a);
    assert_eq!(
        super::backend::major_minor(makedev(0x12345, 0x6789a)),
        (0x12345, 0x6789a)
    );
}

#[test]
fn stat_calls() {
    let mut t = T::new();
    let s = t.stat("/etc/passwd", 0).unwrap();
    assert_eq!(word32(&s, 24) & S_IFMT, S_IFREG);
    assert_eq!(word(&s, 48), 26);
    assert_eq!(word(&s, 0), ROOT_DEV, "st_dev filled in");
    assert_eq!(word(&s, 64), 8, "blocks from the size in 4 KiB blocks");
    t.f.backend.put_link("/tmp/l", "/etc/passwd");
    let s = t.stat("/tmp/l", AT_SYMLINK_NOFOLLOW).unwrap();
    assert_eq!(word32(&s, 24) & S_IFMT, S_IFLNK);
    let s = t.stat("/tmp/l", 0).unwrap();
    assert_eq!(word32(&s, 24) & S_IFMT, S_IFREG);
    assert_eq!(t.stat("/tmp/l", 0x4), Err(EINVAL));
    assert_eq!(t.stat("", 0), Err(ENOENT));
    // AT_EMPTY_PATH on a descriptor (glibc's fstat) and on the console.
    let fd = t.open("/etc/passwd", 0, 0).unwrap();
    let e = t.s("");
    assert_eq!(
        t.call(nr::NEWFSTATAT, &[fd, e, BUF, AT_EMPTY_PATH as u64]),
        Ok(0)
    );
    assert_eq!(word(&t.m.get(BUF, 144), 48), 26);
    assert_eq!(
        t.call(nr::NEWFSTATAT, &[1, e, BUF, AT_EMPTY_PATH as u64]),
        Ok(0)
    );
    assert_eq!(word32(&t.m.get(BUF, 144), 24) & S_IFMT, S_IFCHR);
    assert_eq!(
        t.call(nr::NEWFSTATAT, &[99, e, BUF, AT_EMPTY_PATH as u64]),
        Err(EBADF)
    );
    assert_eq!(t.call(nr::FSTAT, &[fd, BAD]), Err(EFAULT));
    assert_eq!(t.call(nr::FSTAT, &[AT_FDCWD as u64, BUF]), Err(EBADF));
    assert_eq!(t.call(nr::FSTATFS, &[AT_FDCWD as u64, BUF]), Err(EBADF));
    // statx.
    let p = t.s("/etc/passwd");
    assert_eq!(
        t.call(
            nr::STATX,
            &[AT_FDCWD as u64, p, 0, STATX_BASIC_STATS as u64, BUF]
        ),
        Ok(0)
    );
    assert_eq!(word(&t.m.get(BUF, 256), 40), 26);
    assert_eq!(
        t.call(
            nr::STATX,
            &[AT_FDCWD as u64, p, 0, STATX_RESERVED as u64, BUF]
        ),
        Err(EINVAL)
    );
    assert_eq!(
        t.call(nr::STATX, &[AT_FDCWD as u64, p, 0x6000, 0x7ff, BUF]),
        Err(EINVAL)
    );
    // access.
    assert_eq!(t.call(nr::ACCESS, &[p, R_OK as u64]), Ok(0));
    assert_eq!(t.call(nr::ACCESS, &[p, X_OK as u64]), Err(EACCES));
    assert_eq!(t.call(nr::ACCESS, &[p, 8]), Err(EINVAL));
    let q = t.s("/etc/none");
    assert_eq!(t.call(nr::ACCESS, &[q, F_OK as u64]), Err(ENOENT));
    // statfs.
    assert_eq!(t.call(nr::STATFS, &[p, BUF]), Ok(0));
    assert_eq!(word(&t.m.get(BUF, 120), 0), 0xef53);
    assert_eq!(t.call(nr::FSTATFS, &[fd, BUF]), Ok(0));
}

#[test]
fn devices() {
    let mut t = T::new();
    let calls = t.f.backend.calls;
    let null = t.open("/dev/null", O_RDWR, 0).unwrap();
    assert_eq!(t.read(null, 10).unwrap(), b"");
    assert_eq!(t.write(null, b"gone"), Ok(4));
    let zero = t.open("/dev/zero", O_RDONLY, 0).unwrap();
    t.m.set(BUF, &[9; 16]);
    assert_eq!(t.read(zero, 16).unwrap(), [0; 16]);
    let rnd = t.open("/dev/urandom", O_RDONLY, 0).unwrap();
    assert_eq!(t.read(rnd, 8).unwrap().len(), 8);
    let tty = t.open("/dev/tty", O_WRONLY, 0).unwrap();
    t.write(tty, b"to the terminal").unwrap();
    assert_eq!(t.f.backend.console_out, b"to the terminal");
    // One call each, the open (the mock image has no /dev nodes, so the path is served as a
    // devtmpfs would); reads and writes are served in the library.
    assert_eq!(t.f.backend.calls, calls + 4, "served in the library");
    // stat of a device the image does not have.
    let s = t.stat("/dev/null", 0).unwrap();
    assert_eq!(word32(&s, 24), S_IFCHR | 0o666);
    assert_eq!(word(&s, 40), makedev(1, 3));
    assert_eq!(t.open("/dev/null", O_RDONLY | O_DIRECTORY, 0), Err(ENOTDIR));
    // readlink of /proc/self/exe (glibc's start-up).
    let p = t.s("/proc/self/exe");
    assert_eq!(t.call(nr::READLINK, &[p, BUF, 100]), Ok(9));
    assert_eq!(t.m.get(BUF, 9), b"/bin/prog");
    assert_eq!(t.call(nr::READLINK, &[p, BUF, 4]), Ok(4));
    assert_eq!(t.call(nr::READLINK, &[p, BUF, 0]), Err(EINVAL));
    let p = t.s("/proc/self/fd/1");
    assert_eq!(t.call(nr::READLINK, &[p, BUF, 100]), Ok(12));
}

#[test]
fn name_space_calls() {
    let mut t = T::new();
    let p = t.s("/tmp/d");
    assert_eq!(t.call(nr::MKDIR, &[p, 0o777]), Ok(0));
    assert_eq!(word32(&t.stat("/tmp/d", 0).unwrap(), 24), S_IFDIR | 0o755);
    assert_eq!(t.call(nr::MKDIR, &[p, 0o777]), Err(EEXIST));
    let q = t.s("/tmp/d2/");
    assert_eq!(t.call(nr::MKDIR, &[q, 0o700]), Ok(0));
    t.f.backend.put("/tmp/d/f", b"x");
    assert_eq!(t.call(nr::RMDIR, &[p]), Err(ENOTEMPTY));
    let f = t.s("/tmp/d/f");
    assert_eq!(t.call(nr::RMDIR, &[f]), Err(ENOTDIR));
    assert_eq!(t.call(nr::UNLINK, &[p]), Err(EISDIR));
    let fs = t.s("/tmp/d/f/");
    assert_eq!(t.call(nr::UNLINK, &[fs]), Err(ENOTDIR));
    let dot = t.s("/tmp/d/.");
    assert_eq!(t.call(nr::RMDIR, &[dot]), Err(EINVAL));
    // unlinkat with AT_REMOVEDIR, and bad flags.
    let rel = t.s("f");
    let d = t.open("/tmp/d", O_RDONLY | O_DIRECTORY, 0).unwrap();
    assert_eq!(t.call(nr::UNLINKAT, &[d, rel, 0x4]), Err(EINVAL));
    assert_eq!(t.call(nr::UNLINKAT, &[d, rel, 0]), Ok(0));
    assert_eq!(
        t.call(nr::UNLINKAT, &[AT_FDCWD as u64, p, AT_REMOVEDIR as u64]),
        Ok(0)
    );
    // rename, renameat2 flags.
    t.f.backend.put("/tmp/a", b"A");
    t.f.backend.put("/tmp/b", b"B");
    let (a, b) = (t.s("/tmp/a"), t.s("/tmp/b"));
    let fdcwd = AT_FDCWD as u64;
    assert_eq!(
        t.call(
            nr::RENAMEAT2,
            &[fdcwd, a, fdcwd, b, RENAME_NOREPLACE as u64]
        ),
        Err(EEXIST)
    );
    assert_eq!(t.call(nr::RENAMEAT2, &[fdcwd, a, fdcwd, b, 3]), Err(EINVAL));
    assert_eq!(t.call(nr::RENAMEAT2, &[fdcwd, a, fdcwd, b, 8]), Err(EINVAL));
    assert_eq!(t.call(nr::RENAME, &[a, b]), Ok(0));
    assert_eq!(t.f.backend.data("/tmp/b"), b"A");
    // symlink and readlink.
    let tgt = t.s("/tmp/b");
    let l = t.s("/tmp/sl");
    assert_eq!(t.call(nr::SYMLINK, &[tgt, l]), Ok(0));
    assert_eq!(t.call(nr::READLINK, &[l, BUF, 100]), Ok(6));
    assert_eq!(t.m.get(BUF, 6), b"/tmp/b");
    assert_eq!(t.call(nr::READLINK, &[tgt, BUF, 100]), Err(EINVAL));
    let empty = t.s("");
    assert_eq!(t.call(nr::SYMLINK, &[empty, l]), Err(ENOENT));
    // chmod by path and by descriptor (falls back to the path).
    assert_eq!(t.call(nr::CHMOD, &[tgt, 0o600]), Ok(0));
    assert_eq!(word32(&t.stat("/tmp/b", 0).unwrap(), 24), S_IFREG | 0o600);
    let fd = t.open("/tmp/b", O_RDONLY, 0).unwrap();
    assert_eq!(t.call(nr::FCHMOD, &[fd, 0o640]), Ok(0));
    assert_eq!(word32(&t.stat("/tmp/b", 0).unwrap(), 24), S_IFREG | 0o640);
    assert_eq!(t.call(nr::FCHOWN, &[fd, 5, u32::MAX as u64]), Ok(0));
    assert_eq!(word32(&t.stat("/tmp/b", 0).unwrap(), 28), 5);
    // truncate and ftruncate.
    assert_eq!(t.call(nr::TRUNCATE, &[tgt, 10]), Ok(0));
    assert_eq!(t.f.backend.data("/tmp/b"), b"A\0\0\0\0\0\0\0\0\0");
    assert_eq!(
        t.call(nr::FTRUNCATE, &[fd, 1]),
        Err(EINVAL),
        "read-only descriptor"
    );
    let w = t.open("/tmp/b", O_WRONLY, 0).unwrap();
    assert_eq!(t.call(nr::FTRUNCATE, &[w, 2]), Ok(0));
    assert_eq!(t.call(nr::FTRUNCATE, &[w, -1i64 as u64]), Err(EINVAL));
    let tmp = t.s("/tmp");
    assert_eq!(t.call(nr::TRUNCATE, &[tmp, 0]), Err(EISDIR));
    // utimensat: flags, nanoseconds, a null path on a descriptor.
    let ts = [0u64, UTIME_NOW as u64, 5, 1_000_000_000];
    let raw: Vec<u8> = ts.iter().flat_map(|w| w.to_le_bytes()).collect();
    t.m.set(BUF, &raw);
    assert_eq!(t.call(nr::UTIMENSAT, &[fdcwd, tgt, BUF, 0]), Err(EINVAL));
    assert_eq!(t.call(nr::UTIMENSAT, &[fdcwd, tgt, 0, 0]), Ok(0));
    assert_eq!(t.call(nr::UTIMENSAT, &[fdcwd, tgt, 0, 0x2]), Err(EINVAL));
    assert_eq!(t.call(nr::UTIMENSAT, &[fd, 0, 0, 0]), Ok(0));
    assert_eq!(t.call(nr::UTIMENSAT, &[fdcwd, tgt, BAD, 0]), Err(EFAULT));
    // umask.
    assert_eq!(t.call(nr::UMASK, &[0o077]), Ok(0o022));
    assert_eq!(t.call(nr::UMASK, &[0o022]), Ok(0o077));
    assert_eq!(t.call(nr::FSYNC, &[w]), Ok(0));
    assert_eq!(t.call(nr::FSYNC, &[1]), Err(EINVAL));
    assert_eq!(t.call(nr::SYNC, &[]), Ok(0));
}

#[test]
fn sendfile_and_poll() {
    let mut t = T::new();
    let src = t.open("/etc/passwd", O_RDONLY, 0).unwrap();
    assert_eq!(t.call(nr::SENDFILE, &[1, src, 0, 1000]), Ok(26));
    assert_eq!(t.f.backend.console_out, b"root:x:0:0::/root:/bin/sh\n");
    assert_eq!(t.call(nr::SENDFILE, &[1, src, 0, 1000]), Ok(0));
    // With an offset pointer: the descriptor's offset stays, the pointer moves.
    t.m.set(BUF, &5u64.to_le_bytes());
    let dst = t.open("/tmp/copy", O_WRONLY | O_CREAT, 0o644).unwrap();
    assert_eq!(t.call(nr::SENDFILE, &[dst, src, BUF, 4]), Ok(4));
    assert_eq!(word(&t.m.get(BUF, 8), 0), 9);
    assert_eq!(t.f.backend.data("/tmp/copy"), b"x:0:");
    assert_eq!(t.call(nr::SENDFILE, &[src, dst, 0, 4]), Err(EBADF));
    // poll: two ready (the terminal has input), one closed.
    t.f.backend.console_in = b"typed\n".to_vec();
    let mut raw = Vec::new();
    for (fd, ev) in [(0i32, 1u16), (1, 4), (50, 1), (-1, 1)] {
        raw.extend_from_slice(&fd.to_le_bytes());
        raw.extend_from_slice(&ev.to_le_bytes());
        raw.extend_from_slice(&0u16.to_le_bytes());
    }
    t.m.set(BUF, &raw);
    assert_eq!(t.call(nr::POLL, &[BUF, 4, 0]), Ok(3));
    let r = t.m.get(BUF, 32);
    assert_eq!(u16::from_le_bytes([r[6], r[7]]), 1);
    assert_eq!(u16::from_le_bytes([r[14], r[15]]), 4);
    assert_eq!(u16::from_le_bytes([r[22], r[23]]), 0x20);
    assert_eq!(u16::from_le_bytes([r[30], r[31]]), 0);
}

#[test]
fn descriptor_limit() {
    let mut t = T::new();
    let mut n = 3;
    while t.call(nr::DUP, &[0]).is_ok() {
        n += 1;
    }
    assert_eq!(n, 1024);
    assert_eq!(t.call(nr::DUP, &[0]), Err(EMFILE));
    assert_eq!(t.open("/etc/passwd", 0, 0), Err(EMFILE));
    t.call(nr::CLOSE, &[500]).unwrap();
    assert_eq!(t.call(nr::DUP, &[0]), Ok(500));
}

#[test]
fn not_a_file_call() {
    let mut t = T::new();
    assert!(t.f.dispatch(nr::GETPID, [0; 6], &t.m).is_none());
}

/// A `User` with only the required methods: transfers go through the trait's default copies.
struct Plain<'a>(&'a Mem);

impl User for Plain<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        User::read(self.0, addr, buf)
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        User::write(self.0, addr, data)
    }
    fn cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
        self.0.cstr(addr, max)
    }
}

#[test]
fn transfers_through_the_default_copies() {
    let mut t = T::new();
    let p = t.s("/tmp/plain");
    let plain = Plain(&t.m);
    let flags = (O_RDWR | O_CREAT) as u64;
    let fd = t.f.dispatch(nr::OPEN, [p, flags, 0o644, 0, 0, 0], &plain);
    let fd = fd.unwrap().unwrap();
    t.m.set(BUF, b"through a buffer");
    let w =
        t.f.dispatch(nr::WRITE, [fd, BUF, 16, 0, 0, 0], &plain)
            .unwrap();
    assert_eq!(w, Ok(16));
    let r =
        t.f.dispatch(nr::PREAD64, [fd, BUF + 100, 100, 8, 0, 0], &plain);
    assert_eq!(r.unwrap(), Ok(8));
    assert_eq!(t.m.get(BUF + 100, 8), b"a buffer");
    let r = t.f.dispatch(nr::READ, [fd, BAD, 100, 0, 0, 0], &plain);
    assert_eq!(r.unwrap(), Err(EFAULT));
    let r = t.f.dispatch(nr::WRITE, [fd, BAD, 100, 0, 0, 0], &plain);
    assert_eq!(r.unwrap(), Err(EFAULT));
}

#[test]
fn proc_self_names_the_own_directory() {
    let mut t = T::new();
    t.f.pid = 42;
    t.f.backend.put("/proc/42/status", b"Name:\tprog\n");
    // A path under /proc/self reaches /proc/PID.
    let fd = t.open("/proc/self/status", O_RDONLY, 0).unwrap();
    assert_eq!(t.read(fd, 100).unwrap(), b"Name:\tprog\n");
    // readlink of the link itself gives the pid; the own directory's links are the library's.
    let p = t.s("/proc/self");
    assert_eq!(t.call(nr::READLINK, &[p, BUF, 100]), Ok(2));
    assert_eq!(t.m.get(BUF, 2), b"42");
    for own in ["/proc/self/exe", "/proc/42/exe"] {
        let p = t.s(own);
        assert_eq!(t.call(nr::READLINK, &[p, BUF, 100]), Ok(9));
        assert_eq!(t.m.get(BUF, 9), b"/bin/prog");
    }
    let p = t.s("/proc/42/fd/1");
    assert_eq!(t.call(nr::READLINK, &[p, BUF, 100]), Ok(12));
    assert_eq!(t.m.get(BUF, 12), b"/dev/console");
}
