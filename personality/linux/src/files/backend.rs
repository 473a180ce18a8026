//! What the file layer needs from the rest of the system: the file system (by absolute path and
//! by open handle), the console and a source of random bytes. The guest implements it over
//! `lib/fsclient` and the console interface (`src/files_guest.rs`); the host tests over an
//! in-memory tree (`mock.rs`). Every method answers Linux errno values: the translation from the
//! servers' errors happens once, in the implementation.
//!
//! A backend that cannot do an operation answers `ENOSYS` for it; for the calls by handle
//! (fchmod, fchown, futimens, fstatfs) the file layer then retries by the description's path.
//! The guest's backend (fsclient) serves every one of them.

use alloc::vec::Vec;
pub use sawmill_console_api::termios::Termios;

use crate::Errno;

/// A file's attributes as the file system reports them (Linux `struct stat` without the
/// packing). `dev` is filled in by the file layer when the backend leaves it 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    /// Type and permission bits (`S_IFMT` | `0o7777`).
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Device number of a device inode (Linux `makedev` encoding, see [`makedev`]).
    pub rdev: u64,
    pub size: u64,
    /// Allocated 512-byte blocks; `None` when the backend cannot tell (the file layer then
    /// reports the size rounded up to 4 KiB blocks).
    pub blocks: Option<u64>,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
}

/// Seconds and nanoseconds since 1970.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

/// What `utimensat` asks for one of the two times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    /// Leave it (`UTIME_OMIT`).
    Omit,
    /// The current time (`UTIME_NOW`, or a null `times` pointer).
    Now,
    At(Timespec),
}

/// A file system's figures (`statfs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub fs_type: u64,
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_avail: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u64,
    pub fsid: u64,
    pub flags: u64,
}

/// One directory entry. `kind` is a Linux `DT_*` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: u8,
    pub name: Vec<u8>,
}

/// How to open: access, creation and truncation (the rest of Linux's flags are the file
/// layer's business).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenHow {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub excl: bool,
    pub trunc: bool,
    /// Permission bits for a created file, umask already applied.
    pub mode: u32,
}

/// What an open produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// An open file of the file system: its handle, and its mode when the open reported it (the
    /// file layer asks `fstat` when it needs the type otherwise).
    File { handle: u64, mode: Option<u32> },
    /// A device inode (the file system does not serve devices): the file layer serves it by
    /// its number.
    Device { rdev: u64 },
}

/// Linux's device-number encoding (`makedev` of glibc and the kernel's `new_encode_dev`).
pub const fn makedev(major: u32, minor: u32) -> u64 {
    let (ma, mi) = (major as u64, minor as u64);
    (mi & 0xff) | ((ma & 0xfff) << 8) | ((mi & !0xff) << 12) | ((ma & !0xfff) << 32)
}

/// The major and minor of a [`makedev`] number.
pub const fn major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// The system below the file layer. Paths are absolute, `/`-separated, at most 4095 bytes, each
/// name at most 255; they may hold `..` (resolved by the file system, physically, as Linux does).
pub trait Backend:
    super::pipe::PipeHost + super::socket::SocketHost + super::unix::UnixHost
{
    fn open(&mut self, path: &[u8], how: OpenHow) -> Result<Opened, Errno>;
    /// Drops a handle of [`Opened::File`]; the last use of it.
    fn close(&mut self, handle: u64);
    fn pread(&mut self, handle: u64, buf: &mut [u8], off: u64) -> Result<usize, Errno>;
    fn pwrite(&mut self, handle: u64, data: &[u8], off: u64) -> Result<usize, Errno>;
    fn fstat(&mut self, handle: u64) -> Result<Stat, Errno>;
    fn ftruncate(&mut self, handle: u64, size: u64) -> Result<(), Errno>;
    fn fsync(&mut self, handle: u64) -> Result<(), Errno>;
    /// `ENOSYS`: the file layer changes the mode by the description's path.
    fn fchmod(&mut self, handle: u64, mode: u32) -> Result<(), Errno>;
    /// `ENOSYS`: by path. `u32::MAX` leaves an id unchanged.
    fn fchown(&mut self, handle: u64, uid: u32, gid: u32) -> Result<(), Errno>;
    /// `ENOSYS`: by path.
    fn futimens(&mut self, handle: u64, times: [TimeSet; 2]) -> Result<(), Errno>;
    /// `ENOSYS`: by path.
    fn fstatfs(&mut self, handle: u64) -> Result<StatFs, Errno>;

    fn stat(&mut self, path: &[u8], follow: bool) -> Result<Stat, Errno>;
    fn truncate(&mut self, path: &[u8], size: u64) -> Result<(), Errno>;
    fn mkdir(&mut self, path: &[u8], mode: u32) -> Result<(), Errno>;
    fn rmdir(&mut self, path: &[u8]) -> Result<(), Errno>;
    fn unlink(&mut self, path: &[u8]) -> Result<(), Errno>;
    /// `flags`: Linux `RENAME_*` (already checked for unknown bits).
    fn rename(&mut self, from: &[u8], to: &[u8], flags: u32) -> Result<(), Errno>;
    fn link(&mut self, old: &[u8], new: &[u8]) -> Result<(), Errno>;
    fn symlink(&mut self, target: &[u8], path: &[u8]) -> Result<(), Errno>;
    fn readlink(&mut self, path: &[u8]) -> Result<Vec<u8>, Errno>;
    fn chmod(&mut self, path: &[u8], mode: u32) -> Result<(), Errno>;
    /// `u32::MAX` leaves an id unchanged; `follow` false changes a symlink itself.
    fn chown(&mut self, path: &[u8], uid: u32, gid: u32, follow: bool) -> Result<(), Errno>;
    fn utimens(&mut self, path: &[u8], times: [TimeSet; 2], follow: bool) -> Result<(), Errno>;
    fn statfs(&mut self, path: &[u8]) -> Result<StatFs, Errno>;
    /// Every entry of the directory, `.` and `..` included, in the file system's order.
    fn read_dir(&mut self, path: &[u8]) -> Result<Vec<DirEntry>, Errno>;
    fn sync(&mut self) -> Result<(), Errno>;

    /// Writes to the terminal; returns the bytes taken.
    fn console_write(&mut self, data: &[u8]) -> Result<usize, Errno>;
    /// Reads from the terminal (at most one line in line mode; 0 = end of file); `nonblock`
    /// (O_NONBLOCK): EAGAIN instead of waiting. A read from a background process group gets
    /// SIGTTIN (ERESTARTSYS) or EIO, a wait ends for a caught signal (ERESTARTSYS).
    fn console_read(&mut self, buf: &mut [u8], nonblock: bool) -> Result<usize, Errno>;
    /// The terminal's job control (`TIOCSCTTY`, `TIOCNOTTY`, `TIOCGPGRP`, `TIOCSPGRP`,
    /// `TIOCGSID`: `req` with its integer argument): the value the ioctl reports. Without a
    /// process server the terminal is no one's (ENOTTY).
    fn tty_job(&mut self, _req: u32, _arg: u32) -> Result<u32, Errno> {
        Err(crate::errno::ENOTTY)
    }
    /// Before a change of the terminal's settings: a background process group gets SIGTTOU
    /// (ERESTARTSYS) unless it ignores or blocks it.
    fn tty_may_change(&mut self) -> Result<(), Errno> {
        Ok(())
    }
    /// The terminal's rows and columns.
    fn console_winsize(&mut self) -> Result<(u16, u16), Errno>;
    /// Bytes a read could take now without waiting (FIONREAD).
    fn console_pending(&mut self) -> Result<usize, Errno>;
    /// Sets what [`console_winsize`](Backend::console_winsize) reports.
    fn console_set_winsize(&mut self, rows: u16, cols: u16) -> Result<(), Errno>;
    /// The terminal's settings (kept by the terminal, shared by every process on it).
    fn console_tcgets(&mut self) -> Result<Termios, Errno>;
    /// New terminal settings; `flush` discards the input held first (TCSETSF).
    fn console_tcsets(&mut self, t: &Termios, flush: bool) -> Result<(), Errno>;
    /// Fills `buf` with random bytes (`/dev/random`, `/dev/urandom`).
    fn random(&mut self, buf: &mut [u8]);
}
