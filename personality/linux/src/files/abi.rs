//! Linux's file ABI on x86-64: flag values and the byte layouts of the structures the file
//! calls fill in (`struct stat`, `struct statx`, `struct statfs`, `struct linux_dirent64`,
//! `struct termios`, `struct winsize`). Values as in the kernel's uapi headers; the layouts are
//! checked by host tests against offsets a C program compiled on the host prints.

use super::backend::{major_minor, Stat, StatFs, Timespec};

// open(2) flags.
pub const O_ACCMODE: u32 = 0o3;
pub const O_RDONLY: u32 = 0;
pub const O_WRONLY: u32 = 0o1;
pub const O_RDWR: u32 = 0o2;
pub const O_CREAT: u32 = 0o100;
pub const O_EXCL: u32 = 0o200;
pub const O_NOCTTY: u32 = 0o400;
pub const O_TRUNC: u32 = 0o1000;
pub const O_APPEND: u32 = 0o2000;
pub const O_NONBLOCK: u32 = 0o4000;
pub const O_DSYNC: u32 = 0o10000;
pub const O_ASYNC: u32 = 0o20000;
pub const O_DIRECT: u32 = 0o40000;
pub const O_LARGEFILE: u32 = 0o100000;
pub const O_DIRECTORY: u32 = 0o200000;
pub const O_NOFOLLOW: u32 = 0o400000;
pub const O_NOATIME: u32 = 0o1000000;
pub const O_CLOEXEC: u32 = 0o2000000;
pub const O_SYNC: u32 = 0o4010000;
pub const O_PATH: u32 = 0o10000000;
pub const O_TMPFILE: u32 = 0o20000000 | O_DIRECTORY;
/// Every bit `open` knows (Linux ignores unknown bits in `open`/`openat`, and the file layer does
/// too; `openat2` is not served).
pub const O_VALID: u32 = O_ACCMODE
    | O_CREAT
    | O_EXCL
    | O_NOCTTY
    | O_TRUNC
    | O_APPEND
    | O_NONBLOCK
    | O_SYNC
    | O_ASYNC
    | O_DIRECT
    | O_LARGEFILE
    | O_DIRECTORY
    | O_NOFOLLOW
    | O_NOATIME
    | O_CLOEXEC
    | O_PATH
    | O_TMPFILE;
/// What `fcntl(F_SETFL)` may change (Linux `SETFL_MASK` without O_DIRECT/O_ASYNC effects).
pub const SETFL_MASK: u32 = O_APPEND | O_NONBLOCK | O_NOATIME | O_DIRECT | O_ASYNC;
/// The flags a description keeps and `F_GETFL` reports (not the open-time-only ones).
pub const STATUS_KEPT: u32 = O_ACCMODE
    | O_APPEND
    | O_NONBLOCK
    | O_SYNC
    | O_ASYNC
    | O_DIRECT
    | O_LARGEFILE
    | O_NOATIME
    | O_PATH
    | O_DIRECTORY;

// *at(2) flags and the special directory descriptor.
pub const AT_FDCWD: i32 = -100;
pub const AT_SYMLINK_NOFOLLOW: u32 = 0x100;
pub const AT_REMOVEDIR: u32 = 0x200;
pub const AT_EACCESS: u32 = 0x200;
pub const AT_SYMLINK_FOLLOW: u32 = 0x400;
pub const AT_NO_AUTOMOUNT: u32 = 0x800;
pub const AT_EMPTY_PATH: u32 = 0x1000;
pub const AT_STATX_SYNC_TYPE: u32 = 0x6000;

// renameat2 flags.
pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;
pub const RENAME_WHITEOUT: u32 = 4;

// lseek whence.
pub const SEEK_SET: u32 = 0;
pub const SEEK_CUR: u32 = 1;
pub const SEEK_END: u32 = 2;
pub const SEEK_DATA: u32 = 3;
pub const SEEK_HOLE: u32 = 4;

// fcntl commands.
pub const F_DUPFD: u32 = 0;
pub const F_GETFD: u32 = 1;
pub const F_SETFD: u32 = 2;
pub const F_GETFL: u32 = 3;
pub const F_SETFL: u32 = 4;
pub const F_GETLK: u32 = 5;
pub const F_SETLK: u32 = 6;
pub const F_SETLKW: u32 = 7;
pub const F_DUPFD_CLOEXEC: u32 = 1030;
pub const FD_CLOEXEC: u64 = 1;
/// `struct flock`'s `l_type` for "no lock" (what F_GETLK reports: nothing else holds one).
pub const F_UNLCK: u16 = 2;

// access(2) modes.
pub const F_OK: u32 = 0;
pub const X_OK: u32 = sawmill_path::MAY_EXEC;
pub const W_OK: u32 = sawmill_path::MAY_WRITE;
pub const R_OK: u32 = sawmill_path::MAY_READ;

// ioctl requests.
pub const TCGETS: u32 = 0x5401;
pub const TCSETS: u32 = 0x5402;
pub const TCSETSW: u32 = 0x5403;
pub const TCSETSF: u32 = 0x5404;
pub const TCSBRK: u32 = 0x5409;
pub const TCFLSH: u32 = 0x540b;
pub const TIOCSCTTY: u32 = 0x540e;
pub const TIOCGPGRP: u32 = 0x540f;
pub const TIOCSPGRP: u32 = 0x5410;
pub const TIOCGWINSZ: u32 = 0x5413;
pub const TIOCSWINSZ: u32 = 0x5414;
pub const FIONREAD: u32 = 0x541b;
pub const FIONBIO: u32 = 0x5421;
pub const TIOCNOTTY: u32 = 0x5422;
pub const TIOCGSID: u32 = 0x5429;
pub const FIONCLEX: u32 = 0x5450;
pub const FIOCLEX: u32 = 0x5451;

// TCFLSH's queue selectors.
pub const TCIFLUSH: u64 = 0;
pub const TCOFLUSH: u64 = 1;
pub const TCIOFLUSH: u64 = 2;

// utimensat's special nanosecond values.
pub const UTIME_NOW: i64 = (1 << 30) - 1;
pub const UTIME_OMIT: i64 = (1 << 30) - 2;

// File types (st_mode): the one definition in lib/path. Directory-entry types.
pub use sawmill_path::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK};
pub const DT_UNKNOWN: u8 = 0;
pub const DT_DIR: u8 = 4;
pub const DT_CHR: u8 = 2;
pub const DT_LNK: u8 = 10;
pub const DT_REG: u8 = 8;

/// The `DT_*` of a mode.
pub fn dt_of_mode(mode: u32) -> u8 {
    ((mode & S_IFMT) >> 12) as u8
}

/// Blocks reported in `st_blksize`.
pub const BLKSIZE: u64 = 4096;
/// The device number every file of the file system reports as `st_dev` until the backend
/// gives one per mount (the root file system's, as a `/dev/vda`-like 254:0).
pub const ROOT_DEV: u64 = super::backend::makedev(254, 0);

/// Size of `struct stat` on x86-64.
pub const STAT_SIZE: usize = 144;
/// Size of `struct statx`.
pub const STATX_SIZE: usize = 256;
/// Size of `struct statfs` on x86-64.
pub const STATFS_SIZE: usize = 120;
pub use sawmill_console_api::termios::TERMIOS_SIZE;
/// Size of `struct winsize`.
pub const WINSIZE_SIZE: usize = 8;

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

/// 512-byte blocks of a [`Stat`] (its own figure, else the size in whole 4 KiB blocks).
pub fn blocks_of(s: &Stat) -> u64 {
    s.blocks
        .unwrap_or_else(|| s.size.div_ceil(BLKSIZE) * (BLKSIZE / 512))
}

/// `struct stat` (x86-64 layout: `st_nlink` before `st_mode`).
pub fn pack_stat(s: &Stat) -> [u8; STAT_SIZE] {
    let mut b = [0u8; STAT_SIZE];
    put(&mut b, 0, &s.dev.to_le_bytes());
    put(&mut b, 8, &s.ino.to_le_bytes());
    put(&mut b, 16, &(s.nlink as u64).to_le_bytes());
    put(&mut b, 24, &s.mode.to_le_bytes());
    put(&mut b, 28, &s.uid.to_le_bytes());
    put(&mut b, 32, &s.gid.to_le_bytes());
    put(&mut b, 40, &s.rdev.to_le_bytes());
    put(&mut b, 48, &s.size.to_le_bytes());
    put(&mut b, 56, &BLKSIZE.to_le_bytes());
    put(&mut b, 64, &blocks_of(s).to_le_bytes());
    for (i, t) in [s.atime, s.mtime, s.ctime].iter().enumerate() {
        put(&mut b, 72 + i * 16, &t.sec.to_le_bytes());
        put(&mut b, 80 + i * 16, &(t.nsec as u64).to_le_bytes());
    }
    b
}

// statx mask bits.
pub const STATX_TYPE: u32 = 0x1;
pub const STATX_BASIC_STATS: u32 = 0x7ff;
pub const STATX_BTIME: u32 = 0x800;
pub const STATX_RESERVED: u32 = 0x8000_0000;

/// `struct statx` with the basic fields (`STATX_BASIC_STATS`); no birth time.
pub fn pack_statx(s: &Stat) -> [u8; STATX_SIZE] {
    let mut b = [0u8; STATX_SIZE];
    put(&mut b, 0, &STATX_BASIC_STATS.to_le_bytes());
    put(&mut b, 4, &(BLKSIZE as u32).to_le_bytes());
    put(&mut b, 16, &s.nlink.to_le_bytes());
    put(&mut b, 20, &s.uid.to_le_bytes());
    put(&mut b, 24, &s.gid.to_le_bytes());
    put(&mut b, 28, &(s.mode as u16).to_le_bytes());
    put(&mut b, 32, &s.ino.to_le_bytes());
    put(&mut b, 40, &s.size.to_le_bytes());
    put(&mut b, 48, &blocks_of(s).to_le_bytes());
    let ts = |b: &mut [u8], at: usize, t: Timespec| {
        put(b, at, &t.sec.to_le_bytes());
        put(b, at + 8, &t.nsec.to_le_bytes());
    };
    ts(&mut b, 64, s.atime);
    ts(&mut b, 96, s.ctime);
    ts(&mut b, 112, s.mtime);
    let (rmaj, rmin) = major_minor(s.rdev);
    let (dmaj, dmin) = major_minor(s.dev);
    put(&mut b, 128, &rmaj.to_le_bytes());
    put(&mut b, 132, &rmin.to_le_bytes());
    put(&mut b, 136, &dmaj.to_le_bytes());
    put(&mut b, 140, &dmin.to_le_bytes());
    b
}

/// `struct statfs` (x86-64: every count a 64-bit word).
pub fn pack_statfs(s: &StatFs) -> [u8; STATFS_SIZE] {
    let mut b = [0u8; STATFS_SIZE];
    let words = [
        s.fs_type,
        s.block_size,
        s.blocks,
        s.blocks_free,
        s.blocks_avail,
        s.files,
        s.files_free,
        s.fsid,
        s.name_max,
        s.block_size,
        s.flags,
    ];
    for (i, w) in words.iter().enumerate() {
        put(&mut b, i * 8, &w.to_le_bytes());
    }
    b
}

/// The length of a `struct linux_dirent64` record for a name of `name_len` bytes: the 19-byte
/// head, the name and its NUL, rounded up to 8.
pub fn dirent64_len(name_len: usize) -> usize {
    (19 + name_len + 1).div_ceil(8) * 8
}

/// Appends one `struct linux_dirent64` to `out`.
pub fn pack_dirent64(
    out: &mut alloc::vec::Vec<u8>,
    ino: u64,
    next_off: u64,
    kind: u8,
    name: &[u8],
) {
    let len = dirent64_len(name.len());
    let at = out.len();
    out.resize(at + len, 0);
    put(out, at, &ino.to_le_bytes());
    put(out, at + 8, &next_off.to_le_bytes());
    put(out, at + 16, &(len as u16).to_le_bytes());
    out[at + 18] = kind;
    put(out, at + 19, name);
}

/// `struct winsize` for `rows` x `cols`.
pub fn pack_winsize(rows: u16, cols: u16) -> [u8; WINSIZE_SIZE] {
    let mut b = [0u8; WINSIZE_SIZE];
    put(&mut b, 0, &rows.to_le_bytes());
    put(&mut b, 2, &cols.to_le_bytes());
    b
}

/// Rows and columns of a `struct winsize`.
pub fn unpack_winsize(b: &[u8; WINSIZE_SIZE]) -> (u16, u16) {
    (
        u16::from_le_bytes([b[0], b[1]]),
        u16::from_le_bytes([b[2], b[3]]),
    )
}
