//! The guest side of the file layer: the process's one [`Files`] (descriptor table, working
//! directory) over a backend made of `lib/fsclient` (the `vfs` capability) and the console
//! server (`console` for output and control, `console-in` for input). The core (main.rs) calls
//! [`init`], [`dispatch`], [`mmap_source`] and [`with_fs`].
//!
//! It touches the capabilities named above, the environment records of the process (its
//! working directory, ids and seed) and, only when the process has no `console` capability, the
//! debug console (so output is visible in systems without the console server).
//!
//! Every file-system call of the backend maps to one fsclient call; the one Linux operation the
//! file system refuses by design is `RENAME_EXCHANGE` (`EINVAL`, docs/filesystem.md).

use alloc::rc::{Rc, Weak};
use alloc::vec::Vec;
use core::cell::{RefCell, UnsafeCell};
use core::sync::atomic::{AtomicBool, Ordering};

use sawmill_fsclient::{Error as FsError, Files as Fs, RenameFlags};
use sawmill_interfaces::{console, EntryKind};
use sawmill_linux::errno::*;
use sawmill_linux::files::abi::RENAME_NOREPLACE;
use sawmill_linux::files::backend::{
    makedev, Backend, DirEntry, OpenHow, Opened, Stat, StatFs, Termios, TimeSet, Timespec,
};
use sawmill_linux::files::table::{Description, Shared};
use sawmill_linux::files::Files;
use sawmill_linux::{Errno, SysResult, User};
use sawmill_proc_api::WAKE_IO;
use sawmill_rt::env;

/// What `mmap` of a descriptor maps: a dataspace capability slot of this task and the access
/// the descriptor was opened with.
pub struct MapSource {
    pub dataspace: u64,
    pub readable: bool,
    pub writable: bool,
}

/// A file-system error as Linux's errno.
fn errno(e: FsError) -> Errno {
    match e {
        FsError::NotFound => ENOENT,
        FsError::Denied => EACCES,
        FsError::Exists => EEXIST,
        FsError::NotDir => ENOTDIR,
        FsError::IsDir => EISDIR,
        FsError::NotEmpty => ENOTEMPTY,
        FsError::NoSpace => ENOSPC,
        FsError::Io | FsError::Gone => EIO,
        // Linux's EFSCORRUPTED.
        FsError::Corrupt => EUCLEAN,
        FsError::Invalid => EINVAL,
        FsError::NameTooLong => ENAMETOOLONG,
        FsError::Loop => ELOOP,
        FsError::Xdev => EXDEV,
        FsError::BadFile => EBADF,
        FsError::ReadOnly => EROFS,
        FsError::TooLarge => EFBIG,
        FsError::TooManyLinks => EMLINK,
        FsError::NotPermitted => EPERM,
        // Opening a device node: the caller serves the device itself (by its stat rdev).
        FsError::Device => ENXIO,
        // The file's PFS restarted and the file is no longer there (issue 16).
        FsError::Stale => ESTALE,
    }
}

/// fsclient takes paths as `str`: a name that is not UTF-8 cannot be passed yet. (Length is
/// fsclient's business: it stages long paths at the VFS; the file layer keeps Linux's limits.)
fn text(p: &[u8]) -> Result<&str, Errno> {
    core::str::from_utf8(p).map_err(|_| EINVAL)
}

/// The first device number of file systems other than the root (Linux's anonymous majors are
/// 0; the root's number is the file layer's `ROOT_DEV`, given when `dev` is left 0).
const MOUNT_DEV_BASE: u32 = 0x20;

fn stat_of(s: sawmill_fsclient::Stat) -> Stat {
    let time = |(sec, nsec): (u32, u32)| Timespec {
        sec: sec as i64,
        nsec,
    };
    Stat {
        // Mount 0 (the root, and every `fstat`, which does not know its mount) is the file
        // layer's root device.
        dev: if s.mount == 0 {
            0
        } else {
            makedev(0, MOUNT_DEV_BASE + s.mount)
        },
        ino: s.ino as u64,
        mode: s.mode,
        nlink: s.nlink,
        uid: s.uid,
        gid: s.gid,
        rdev: makedev(s.rdev.0, s.rdev.1),
        size: s.size,
        blocks: Some(s.blocks),
        atime: time(s.atime),
        mtime: time(s.mtime),
        ctime: time(s.ctime),
    }
}

/// ext2's magic, statfs's `f_type` for every file system of ours (docs/filesystem.md).
const EXT2_SUPER_MAGIC: u64 = 0xEF53;

fn statfs_of(s: sawmill_fsclient::StatFs) -> StatFs {
    StatFs {
        fs_type: EXT2_SUPER_MAGIC,
        block_size: s.bsize as u64,
        blocks: s.blocks,
        blocks_free: s.bfree,
        blocks_avail: s.bavail,
        files: s.files,
        files_free: s.ffree,
        name_max: s.namelen as u64,
        ..StatFs::default()
    }
}

/// One time of utimensat as fsclient takes it: whole seconds (ext2 keeps no more). A time
/// outside the file system's range is clamped to it, as Linux does (`timestamp_truncate`).
fn time_set(t: TimeSet) -> sawmill_fsclient::TimeSet {
    match t {
        TimeSet::Omit => sawmill_fsclient::TimeSet::Omit,
        TimeSet::Now => sawmill_fsclient::TimeSet::Now,
        TimeSet::At(ts) => sawmill_fsclient::TimeSet::At(ts.sec.clamp(0, u32::MAX as i64) as u32),
    }
}

/// chown's `-1` (`u32::MAX`) leaves the id alone.
fn id(v: u32) -> Option<u32> {
    (v != u32::MAX).then_some(v)
}

/// The `DT_*` of a directory entry's kind.
fn dt_of(k: EntryKind) -> u8 {
    match k {
        EntryKind::Unknown => 0,
        EntryKind::Fifo => 1,
        EntryKind::CharDev => 2,
        EntryKind::Dir => 4,
        EntryKind::BlockDev => 6,
        EntryKind::Regular => 8,
        EntryKind::Symlink => 10,
        EntryKind::Socket => 12,
    }
}

/// The backend of a Linux process.
pub struct Guest {
    fs: Fs,
    pub(crate) console: Option<console::Client>,
    console_in: Option<console::Client>,
    /// The terminal's settings and size when there is no console server (the debug console
    /// stands in for it): kept so that a program reads back what it set.
    fallback_termios: Termios,
    fallback_winsize: (u16, u16),
    /// State of the generator behind `/dev/random` and `/dev/urandom` (from the process's seed).
    rng: u64,
    /// Pipes and waiting (`pipe_guest.rs`).
    pub(crate) pipes: crate::pipe_guest::Pipes,
    /// Sockets (`socket_guest.rs`).
    pub(crate) sockets: crate::socket_guest::Sockets,
}

/// The process's ids record (`KIND_LINUX_IDS`: pid, then parent, uid, euid, gid, egid) and its
/// working directory (`KIND_LINUX_CWD`), as the file layer's start finds them.
#[derive(Default)]
struct StartRecords {
    ids: Option<(u64, &'static [u8])>,
    cwd: Option<&'static [u8]>,
}

/// The file layer's records of the environment (its servers' capabilities, the seed, the ids
/// and working directory), gathered by the library start's one pass over it
/// ([`FileRecords::note`]) or by a pass of their own ([`Guest::from_env`]).
#[derive(Default)]
pub struct FileRecords {
    vfs: Option<u64>,
    console: Option<u64>,
    console_in: Option<u64>,
    pipe: Option<u64>,
    wake: Option<u64>,
    stack: Option<u64>,
    seed: Option<&'static [u8]>,
    records: StartRecords,
}

impl FileRecords {
    /// Takes what the file layer needs of the record; other parts of the start may need the
    /// same record (the ids, the seed, the wake notification), so it is not consumed.
    pub fn note(&mut self, kind: u64, value: u64, bytes: &'static [u8]) {
        match kind {
            env::KIND_CAP => {
                let name = bytes;
                let slot = if name == b"vfs" {
                    &mut self.vfs
                } else if name == b"console" {
                    &mut self.console
                } else if name == b"console-in" {
                    &mut self.console_in
                } else if name == sawmill_interfaces::pipe::NAME.as_bytes() {
                    &mut self.pipe
                } else if name == sawmill_proc_api::WAKE_CAP.as_bytes() {
                    &mut self.wake
                } else if name == crate::socket_guest::STACK_CAP.as_bytes() {
                    &mut self.stack
                } else {
                    return;
                };
                slot.get_or_insert(value);
            }
            env::KIND_LINUX_SEED => {
                self.seed.get_or_insert(bytes);
            }
            env::KIND_LINUX_IDS => {
                self.records.ids.get_or_insert((value, bytes));
            }
            env::KIND_LINUX_CWD => {
                self.records.cwd.get_or_insert(bytes);
            }
            _ => {}
        }
    }
}

impl Guest {
    fn new() -> Guest {
        Guest::from_env().0
    }

    /// The backend, and the records the start reads besides, from one pass over the
    /// environment's records (a lookup by name or kind each walks them all: ~1.2k instructions
    /// apiece at every start).
    fn from_env() -> (Guest, StartRecords) {
        let mut found = FileRecords::default();
        for (kind, value, bytes) in env::all() {
            found.note(kind, value, bytes);
        }
        Guest::from_records(found)
    }

    /// The backend, and the records the start reads besides, from what `found` gathered.
    fn from_records(found: FileRecords) -> (Guest, StartRecords) {
        let FileRecords {
            vfs,
            console,
            console_in,
            pipe,
            wake,
            stack,
            seed,
            records,
        } = found;
        let pid = records.ids.map_or(1, |(pid, _)| pid);
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        for c in seed.unwrap_or(&[]).chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            rng = (rng ^ u64::from_le_bytes(w)).rotate_left(23);
        }
        // The region manager's reopen of a mapped file refills the same slot the same way.
        sawmill_rm::set_vfs_refill(vfs_again);
        let guest = Guest {
            // Issue 16: no redo log (`Files::with_redo`): Linux's rule for writes a restarted
            // PFS lost (EIO at the next fsync), and the write path within its goal
            // (docs/filesystem.md).
            // Our VFS capability is a copy of proc's: after a VFS restart proc hands out the
            // new incarnation's (`vfs_again`), root refills only proc's.
            fs: Fs::with_windows(vfs.unwrap_or(0), sawmill_linux::layout::LIB_FILE_WINDOWS)
                .with_vfs_refill(vfs_again),
            console: console.map(console::Client::new),
            console_in: console_in.map(console::Client::new),
            fallback_termios: Termios::default(),
            fallback_winsize: (24, 80),
            rng,
            pipes: crate::pipe_guest::Pipes::with_caps(pipe, wake, pid),
            sockets: crate::socket_guest::Sockets::with_caps(stack, wake),
        };
        (guest, records)
    }
}

impl Backend for Guest {
    fn open(&mut self, path: &[u8], how: OpenHow) -> Result<Opened, Errno> {
        let mut flags = 0;
        for (on, bit) in [
            (how.read, sawmill_fsclient::O_READ),
            (how.write, sawmill_fsclient::O_WRITE),
            (how.trunc, sawmill_fsclient::O_TRUNC),
            (how.create, sawmill_fsclient::O_CREATE),
            (how.excl, sawmill_fsclient::O_EXCL),
        ] {
            if on {
                flags |= bit;
            }
        }
        let p = text(path)?;
        let fd = match self.fs.open(p, flags, how.mode) {
            Ok(fd) => fd,
            // A device, FIFO or socket inode: the file layer serves it by its number.
            Err(FsError::Device) => {
                let s = self.fs.stat(p).map_err(errno)?;
                return Ok(Opened::Device {
                    rdev: makedev(s.rdev.0, s.rdev.1),
                });
            }
            Err(e) => return Err(errno(e)),
        };
        Ok(Opened::File {
            handle: fd as u64,
            mode: None,
        })
    }
    fn close(&mut self, handle: u64) {
        let _ = self.fs.close(handle as usize);
    }
    #[inline]
    fn pread(&mut self, handle: u64, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        self.fs.pread(handle as usize, buf, off).map_err(errno)
    }
    fn pwrite(&mut self, handle: u64, data: &[u8], off: u64) -> Result<usize, Errno> {
        self.fs.pwrite(handle as usize, data, off).map_err(errno)
    }
    fn fstat(&mut self, handle: u64) -> Result<Stat, Errno> {
        self.fs.fstat(handle as usize).map(stat_of).map_err(errno)
    }
    fn ftruncate(&mut self, handle: u64, size: u64) -> Result<(), Errno> {
        self.fs.ftruncate(handle as usize, size).map_err(errno)
    }
    fn fsync(&mut self, handle: u64) -> Result<(), Errno> {
        self.fs.fsync(handle as usize).map_err(errno)
    }
    fn fchmod(&mut self, handle: u64, mode: u32) -> Result<(), Errno> {
        self.fs.fchmod(handle as usize, mode).map_err(errno)
    }
    fn fchown(&mut self, handle: u64, uid: u32, gid: u32) -> Result<(), Errno> {
        self.fs
            .fchown(handle as usize, id(uid), id(gid))
            .map_err(errno)
    }
    fn futimens(&mut self, handle: u64, times: [TimeSet; 2]) -> Result<(), Errno> {
        let (a, m) = (time_set(times[0]), time_set(times[1]));
        self.fs.futimens(handle as usize, a, m).map_err(errno)
    }
    fn fstatfs(&mut self, handle: u64) -> Result<StatFs, Errno> {
        self.fs
            .fstatfs(handle as usize)
            .map(statfs_of)
            .map_err(errno)
    }
    fn stat(&mut self, path: &[u8], follow: bool) -> Result<Stat, Errno> {
        let p = text(path)?;
        let s = if follow {
            self.fs.stat(p)
        } else {
            self.fs.lstat(p)
        };
        s.map(stat_of).map_err(errno)
    }
    fn truncate(&mut self, path: &[u8], size: u64) -> Result<(), Errno> {
        self.fs.truncate(text(path)?, size).map_err(errno)
    }
    fn mkdir(&mut self, path: &[u8], mode: u32) -> Result<(), Errno> {
        self.fs.mkdir(text(path)?, mode).map_err(errno)
    }
    fn rmdir(&mut self, path: &[u8]) -> Result<(), Errno> {
        self.fs.rmdir(text(path)?).map_err(errno)
    }
    fn unlink(&mut self, path: &[u8]) -> Result<(), Errno> {
        self.fs.unlink(text(path)?).map_err(errno)
    }
    fn rename(&mut self, from: &[u8], to: &[u8], flags: u32) -> Result<(), Errno> {
        let (f, t) = (text(from)?, text(to)?);
        let sent = match flags {
            0 => RenameFlags::from_bits_retain(0),
            // Decided by the file system's engine, atomically with the rename.
            RENAME_NOREPLACE => RenameFlags::NOREPLACE,
            // RENAME_EXCHANGE: the file system does not offer it (as some of Linux's do not).
            _ => return Err(EINVAL),
        };
        self.fs.rename_flags(f, t, sent).map_err(errno)
    }
    fn link(&mut self, old: &[u8], new: &[u8]) -> Result<(), Errno> {
        self.fs.link(text(old)?, text(new)?).map_err(errno)
    }
    fn symlink(&mut self, target: &[u8], path: &[u8]) -> Result<(), Errno> {
        self.fs.symlink(text(target)?, text(path)?).map_err(errno)
    }
    fn readlink(&mut self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        self.fs.readlink(text(path)?).map_err(errno)
    }
    fn chmod(&mut self, path: &[u8], mode: u32) -> Result<(), Errno> {
        self.fs.chmod(text(path)?, mode).map_err(errno)
    }
    fn chown(&mut self, path: &[u8], uid: u32, gid: u32, follow: bool) -> Result<(), Errno> {
        self.fs
            .chown(text(path)?, id(uid), id(gid), follow)
            .map_err(errno)
    }
    fn utimens(&mut self, path: &[u8], times: [TimeSet; 2], follow: bool) -> Result<(), Errno> {
        let (a, m) = (time_set(times[0]), time_set(times[1]));
        self.fs.utimens(text(path)?, a, m, follow).map_err(errno)
    }
    fn statfs(&mut self, path: &[u8]) -> Result<StatFs, Errno> {
        self.fs.statfs(text(path)?).map(statfs_of).map_err(errno)
    }
    fn read_dir(&mut self, path: &[u8]) -> Result<Vec<DirEntry>, Errno> {
        let list = self.fs.readdir(text(path)?).map_err(errno)?;
        Ok(list
            .into_iter()
            .map(|e| DirEntry {
                ino: e.ino as u64,
                kind: dt_of(e.kind),
                name: e.name,
            })
            .collect())
    }
    fn sync(&mut self) -> Result<(), Errno> {
        self.fs.sync().map_err(errno)
    }
    fn console_write(&mut self, data: &[u8]) -> Result<usize, Errno> {
        let piece = &data[..data.len().min(480)];
        match self.console {
            Some(c) => c.write(piece).map(|n| n as usize).map_err(|_| EIO),
            None => {
                // No terminal in this system: the debug console shows the output.
                sawmill_rt::write_bytes(piece);
                Ok(piece.len())
            }
        }
    }
    fn console_read(&mut self, buf: &mut [u8], nonblock: bool) -> Result<usize, Errno> {
        let Some(c_in) = self.console_in else {
            return Ok(0);
        };
        // A background process group of the terminal's session gets SIGTTIN (or EIO).
        crate::tty_guest::check(sawmill_linux::signal::SIGTTIN)?;
        let max = buf.len().min(480) as u32;
        let wake = crate::signal_guest::wake_cap();
        let (Some(c), true) = (self.console, wake != 0) else {
            // No wake notification to wait on: the console's own waiting read.
            let d = c_in.read(max).map_err(|_| EIO)?;
            let n = d.as_slice().len().min(buf.len());
            buf[..n].copy_from_slice(&d.as_slice()[..n]);
            return Ok(n);
        };
        // The console never holds us: a read that must wait waits on the process's wake
        // notification (the console signals it when input is readable), where a signal ends
        // the wait as it does for pipes.
        loop {
            let r = c.try_read(max).map_err(|_| EIO)?;
            if r.done {
                let n = r.data.as_slice().len().min(buf.len());
                buf[..n].copy_from_slice(&r.data.as_slice()[..n]);
                return Ok(n);
            }
            if nonblock {
                return Err(EAGAIN);
            }
            if crate::signal_guest::interrupted() {
                return Err(sawmill_linux::signal::ERESTARTSYS);
            }
            c.watch(wake, WAKE_IO).map_err(|_| EIO)?;
            wait_wake_unbusy(None);
        }
    }
    fn tty_job(&mut self, req: u32, arg: u32) -> Result<u32, Errno> {
        if self.console.is_none() {
            return Err(ENOTTY);
        }
        crate::tty_guest::job(req, arg)
    }
    fn tty_may_change(&mut self) -> Result<(), Errno> {
        if self.console.is_none() {
            return Ok(());
        }
        crate::tty_guest::check(sawmill_linux::signal::SIGTTOU)
    }
    fn console_winsize(&mut self) -> Result<(u16, u16), Errno> {
        match self.console {
            Some(c) => c.winsize().map(|w| (w.rows, w.cols)).map_err(|_| EIO),
            None => Ok(self.fallback_winsize),
        }
    }
    fn console_pending(&mut self) -> Result<usize, Errno> {
        match self.console_in {
            Some(c) => c.pending().map(|n| n as usize).map_err(|_| EIO),
            None => Ok(0),
        }
    }
    fn console_set_winsize(&mut self, rows: u16, cols: u16) -> Result<(), Errno> {
        match self.console {
            Some(c) => c.set_winsize(rows, cols).map_err(|_| EIO),
            None => {
                self.fallback_winsize = (rows, cols);
                Ok(())
            }
        }
    }
    fn console_tcgets(&mut self) -> Result<Termios, Errno> {
        let Some(c) = self.console else {
            return Ok(self.fallback_termios);
        };
        let t = c.tcgets().map_err(|_| EIO)?;
        Ok(Termios {
            iflag: t.iflag,
            oflag: t.oflag,
            cflag: t.cflag,
            lflag: t.lflag,
            line: t.line,
            cc: t.cc,
        })
    }
    fn console_tcsets(&mut self, t: &Termios, flush: bool) -> Result<(), Errno> {
        match self.console {
            Some(c) => c
                .tcsets(t.iflag, t.oflag, t.cflag, t.lflag, t.line, t.cc, flush)
                .map_err(|_| EIO),
            None => {
                self.fallback_termios = *t;
                Ok(())
            }
        }
    }
    fn random(&mut self, buf: &mut [u8]) {
        // splitmix64: fast and well mixed; the seed is the process's own.
        for chunk in buf.chunks_mut(8) {
            self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// The process's file state, made at [`init`] (or the first call). The library lock serves
/// one thread at a time; the flag makes a second one wait rather than share it (a sleeping
/// call lets it go: [`wait_wake_unbusy`]).
struct State {
    busy: AtomicBool,
    files: UnsafeCell<Option<Files<Guest>>>,
}

// SAFETY: `files` is only reached through `with`, which holds `busy` for the whole access.
unsafe impl Sync for State {}

static STATE: State = State {
    busy: AtomicBool::new(false),
    files: UnsafeCell::new(None),
};

fn with<R>(f: impl FnOnce(&mut Files<Guest>) -> R) -> R {
    let files = take_state();
    let files = match files {
        Some(f) => f,
        None => make_default(files),
    };
    let r = f(files);
    STATE.busy.store(false, Ordering::Release);
    r
}

/// [`with`] inlined into its caller: for the hot calls' fast paths (`read_fast`,
/// `write_fast`), where the call and its frame were a tenth of a pipe transfer.
#[inline(always)]
fn with_inline<R>(f: impl FnOnce(&mut Files<Guest>) -> R) -> R {
    let files = take_state();
    let files = match files {
        Some(f) => f,
        None => make_default(files),
    };
    let r = f(files);
    STATE.busy.store(false, Ordering::Release);
    r
}

/// The state made on first use (out of line: every system call passes through [`with`], and
/// a server lookup inlined there gave each a large stack frame to set up).
#[cold]
#[inline(never)]
fn make_default(files: &mut Option<Files<Guest>>) -> &mut Files<Guest> {
    files.insert(Files::new(Guest::new(), b""))
}

/// [`with`] on a file layer made fresh (the start's `init` and `adopt`), replacing any there
/// was: made once, where `with` alone would first make a default one (its servers looked up in
/// the environment, ~12k instructions of every process's start) only to drop it.
fn with_fresh<R>(fresh: Files<Guest>, f: impl FnOnce(&mut Files<Guest>) -> R) -> R {
    let files = take_state();
    let r = f(files.insert(fresh));
    STATE.busy.store(false, Ordering::Release);
    r
}

/// Takes `busy` (the caller stores false into it when done) and gives the state it guards.
#[inline(always)]
fn take_state() -> &'static mut Option<Files<Guest>> {
    while STATE.busy.swap(true, Ordering::Acquire) {
        core::hint::spin_loop();
    }
    // SAFETY: `busy` is ours until the caller's store of false, so no other reference to
    // `files` exists meanwhile (the caller drops the one returned before that store).
    unsafe { &mut *STATE.files.get() }
}

/// The file layer's sleep (a pipe's or the terminal's wait, inside [`with`]): the state is
/// let go for the sleep, so that another thread of a threaded process can use the file layer
/// meanwhile (the library lock is released in the sleep too), and taken again after it. The
/// waiting call's own view (its description, its ring) is looked at again after the sleep.
pub fn wait_wake_unbusy(deadline: Option<u64>) -> u64 {
    STATE.busy.store(false, Ordering::Release);
    let bits = crate::signal_guest::wait_wake(deadline);
    while STATE.busy.swap(true, Ordering::Acquire) {
        core::hint::spin_loop();
    }
    bits
}

/// Sets up the descriptor table: 0, 1 and 2 on the console; `exe` is the program's path. The
/// working directory and ids come from the environment records (KIND_LINUX_CWD, _IDS).
pub fn init(exe: &str, found: FileRecords) {
    let (guest, records) = Guest::from_records(found);
    with_fresh(Files::new(guest, exe.as_bytes()), |f| {
        if let Some((pid, ids)) = records.ids {
            f.pid = u32::try_from(pid).unwrap_or(0);
            let id = |i: usize| {
                ids.get(i * 4..i * 4 + 4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            };
            // parent, uid, euid, gid, egid: `access` checks the real ids.
            if let (Some(uid), Some(gid)) = (id(1), id(3)) {
                f.uid = uid;
                f.gid = gid;
            }
        }
        if let Some(cwd) = records.cwd {
            if f.set_cwd(cwd).is_err() {
                sawmill_rt::println!("linux: cannot start in the working directory; using /");
            }
        }
    })
}

/// Serves the call if it is a file-system, descriptor or device call.
pub fn dispatch(nr: u64, args: [u64; 6], user: &dyn User) -> Option<SysResult> {
    with(|f| {
        if sharing().cells.is_empty() {
            return f.dispatch(nr, args, user);
        }
        dispatch_shared(f, nr, args, user)
    })
}

/// A call while some descriptions' offsets are shared with other processes: the offsets of
/// the descriptors it names come in from their cells and go back after it.
#[inline(never)]
fn dispatch_shared(
    f: &mut Files<Guest>,
    nr: u64,
    args: [u64; 6],
    user: &dyn User,
) -> Option<SysResult> {
    let sh = sharing();
    let second = if nr == sawmill_linux::nr::SENDFILE {
        args[1] as i32
    } else {
        -1
    };
    let mut synced: [Option<(Shared, u32)>; 2] = [None, None];
    for (k, fd) in [args[0] as i32, second].into_iter().enumerate() {
        if let Some(d) = f.description(fd) {
            if let Some(c) = sh.cell_of(&d) {
                d.borrow_mut().offset = cell_ptr(c).load(Ordering::Relaxed);
                synced[k] = Some((d, c));
            }
        }
    }
    let r = f.dispatch(nr, args, user);
    for (d, c) in synced.into_iter().flatten() {
        cell_ptr(c).store(d.borrow().offset, Ordering::Relaxed);
    }
    r
}

/// `read(fd, buf, count)` when it is the common case (`Files::read_file`: a regular file, one
/// chunk), with the program's memory access `U` known at compile time; `None` otherwise (the
/// general [`dispatch`] serves it).
#[inline(always)]
pub fn read_fast<U: User>(fd: u64, buf: u64, count: u64, user: &U) -> Option<SysResult> {
    with_inline(|f| {
        let fd = fd as u32 as i32;
        f.read_file(fd, buf, count, user)
            .or_else(|| f.pipe_rw(fd, buf, count, false, user))
    })
}

/// `write(fd, buf, count)` on a pipe end (`Files::pipe_rw`); `None` otherwise.
#[inline(always)]
pub fn write_fast<U: User>(fd: u64, buf: u64, count: u64, user: &U) -> Option<SysResult> {
    with_inline(|f| f.pipe_rw(fd as u32 as i32, buf, count, true, user))
}

/// `pwrite64(fd, buf, count, off)` when it is the common case (`Files::pwrite_file`); `None`
/// otherwise.
#[inline(always)]
pub fn pwrite_fast<U: User>(
    fd: u64,
    buf: u64,
    count: u64,
    off: u64,
    user: &U,
) -> Option<SysResult> {
    with(|f| f.pwrite_file(fd as u32 as i32, buf, count, off as i64, user))
}

/// The dataspace behind descriptor `fd`, for `mmap` (the open file's capability, a read-only
/// dataspace of the PFS; it stays valid while the descriptor's description is open).
pub fn mmap_source(fd: i32) -> Result<MapSource, Errno> {
    with(|f| {
        let (handle, readable, writable, _) = f.map_handle(fd)?;
        // Shared with the region manager's mapping, which may outlive the descriptor: the
        // file's close must then only drop the library's capability, never close the file at
        // the PFS and reuse the capability for another (fsclient's kept files).
        let dataspace = f.backend.fs.share(handle as usize).map_err(errno)?;
        Ok(MapSource {
            dataspace,
            readable,
            writable,
        })
    })
}

/// The process's one fsclient instance (the core opens the program's ELF through it).
pub fn with_fs<R>(f: impl FnOnce(&mut Fs) -> R) -> R {
    with(|files| f(&mut files.backend.fs))
}

/// The working directory (for `execve`'s request).
pub fn cwd() -> alloc::vec::Vec<u8> {
    with(|f| f.cwd().to_vec())
}

/// File offsets shared across `fork` (Linux: one offset per open file description, whichever
/// process moves it). A description both processes hold gets a cell in the family's offset
/// page (an anonymous dataspace every process of it maps at `layout::LIB_OFFSETS`; cell 0 counts
/// the cells given out); each holder keeps its own `Description` and copies the offset in from
/// the cell before a call on the descriptor and back after it. Only the file layer's own
/// thread uses it (under `with`).
struct Sharing {
    /// The offset page's dataspace slot (0: none yet).
    page: u64,
    cells: Vec<(Weak<RefCell<Description>>, u32)>,
}

struct SharingCell(UnsafeCell<Sharing>);
// SAFETY: used only inside `with`, which holds the file state's `busy` flag.
unsafe impl Sync for SharingCell {}
static SHARING: SharingCell = SharingCell(UnsafeCell::new(Sharing {
    page: 0,
    cells: Vec::new(),
}));

/// Cells in the offset page (the first counts those given out).
const OFFSET_CELLS: u32 = 512;

fn sharing() -> &'static mut Sharing {
    // SAFETY: see `SharingCell`: the caller holds the file state (inside `with`).
    unsafe { &mut *SHARING.0.get() }
}

fn cell_ptr(cell: u32) -> &'static core::sync::atomic::AtomicU64 {
    // SAFETY: the offset page is attached read-write at LIB_OFFSETS whenever a cell exists
    // (cells are only handed out or adopted after it is), and `cell` < OFFSET_CELLS.
    unsafe {
        &*((sawmill_linux::layout::LIB_OFFSETS + cell as u64 * 8)
            as *const core::sync::atomic::AtomicU64)
    }
}

impl Sharing {
    fn cell_of(&self, d: &Shared) -> Option<u32> {
        let p = Rc::as_ptr(d);
        self.cells
            .iter()
            .find(|(w, _)| core::ptr::eq(w.as_ptr(), p))
            .map(|&(_, c)| c)
    }

    /// Makes the offset page if there is none yet: false if it cannot be had.
    fn ensure_page(&mut self) -> bool {
        if self.page != 0 {
            return true;
        }
        let Some(m) = sawmill_rm::mem() else {
            return false;
        };
        let Ok(ds) = m.alloc(4096, 0, sawmill_rt::thread::alloc_slot()) else {
            return false;
        };
        let at = sawmill_linux::layout::LIB_OFFSETS;
        if sawmill_rm::attach(ds, 0, 4096, Some(at), sawmill_rm::READ | sawmill_rm::WRITE).is_err()
        {
            let _ = sawmill_interfaces::dataspace::Client::new(ds).free();
            return false;
        }
        self.page = ds;
        cell_ptr(0).store(1, Ordering::Relaxed);
        true
    }

    /// A new cell holding `offset`, for description `d`.
    fn new_cell(&mut self, d: &Shared, offset: u64) -> Option<u32> {
        if !self.ensure_page() {
            return None;
        }
        let c = cell_ptr(0).fetch_add(1, Ordering::Relaxed);
        if c >= OFFSET_CELLS as u64 {
            return None;
        }
        cell_ptr(c as u32).store(offset, Ordering::Relaxed);
        self.cells.retain(|(w, _)| w.strong_count() > 0);
        self.cells.push((Rc::downgrade(d), c as u32));
        Some(c as u32)
    }
}

/// The descriptors, working directory and umask to hand to a new image (`exec`: without the
/// close-on-exec ones). `index` gives a capability's index in the handoff; a file that cannot be
/// handed on is left out with its descriptors. For a `fork`, every file description gets a
/// shared offset cell.
pub fn export(exec: bool, index: &mut dyn FnMut(u64) -> u32) -> sawmill_linux::handoff::State {
    use sawmill_linux::handoff::{Object, State, NONE};
    with(|f| {
        let (mut descriptions, mut descriptors) = f.export(exec);
        let sh = sharing();
        let mut dropped = Vec::new();
        for (i, d) in descriptions.iter_mut().enumerate() {
            // A pipe end: its capability (the host's handle is its slot) goes as it is.
            if let Object::Pipe { end, .. } = &mut d.object {
                *end = index(*end as u64);
                continue;
            }
            // A socket likewise: the child holds a copy of the capability (and of a fused
            // connection's pipe ends).
            if let Object::Socket { sock, fused, .. } = &mut d.object {
                *sock = index(*sock as u64);
                if let Some((r, w)) = fused {
                    *r = index(*r as u64);
                    *w = index(*w as u64);
                }
                continue;
            }
            // A local socket: its pipe ends and listener.
            if let Object::Unix {
                rx, tx, listener, ..
            } = &mut d.object
            {
                for c in [rx, tx, listener] {
                    if *c != NONE {
                        *c = index(*c as u64);
                    }
                }
                continue;
            }
            if let Object::File {
                file: handle,
                open_flags,
                reopen,
                ..
            } = &mut d.object
            {
                let fs = &mut f.backend.fs;
                let h = *handle as usize;
                // Shared from now on: our close must not close the other holder's file.
                match (fs.share(h), fs.open_flags(h)) {
                    (Ok(cap), Ok(flags)) => {
                        *handle = index(cap);
                        *open_flags = flags;
                        // The new image reopens it as we would after a PFS restart.
                        *reopen = fs.reopen_of(h).unwrap_or([0; 3]);
                    }
                    _ => {
                        dropped.push(i as u32);
                        continue;
                    }
                }
                // The description itself, through any descriptor naming it.
                let shared = descriptors
                    .iter()
                    .find(|x| x.description == i as u32)
                    .and_then(|x| f.description(x.fd));
                if let Some(sd) = shared {
                    d.cell = match sh.cell_of(&sd) {
                        // The cell is the truth (another process may have moved it since).
                        Some(c) => {
                            d.offset = cell_ptr(c).load(Ordering::Relaxed);
                            c
                        }
                        None if !exec => sh.new_cell(&sd, d.offset).unwrap_or(NONE),
                        None => NONE,
                    };
                }
            }
        }
        descriptors.retain(|d| !dropped.contains(&d.description));
        State {
            fork: None,
            cwd: f.cwd().to_vec(),
            umask: f.umask(),
            descriptions,
            descriptors,
            offsets: if sh.page != 0 { index(sh.page) } else { NONE },
        }
    })
}

/// Issue 16: a capability to the VFS's new incarnation into `slot`, from proc (a copy of its
/// own, which root refilled); false while proc has none yet.
fn vfs_again(slot: u64) -> bool {
    crate::guest::proc_cap().is_some_and(|p| {
        sawmill_interfaces::proc::Client::new(p)
            .vfs_again(slot)
            .is_ok()
    })
}

/// Sets up the descriptor table from the state a previous image handed on (`caps`: the handed
/// capabilities by index; a file's becomes an fsclient descriptor of this process), and maps
/// the family's offset page.
pub fn adopt(exe: &str, st: &sawmill_linux::handoff::State, caps: &[u64], found: FileRecords) {
    use sawmill_linux::handoff::{Object, NONE};
    let (guest, records) = Guest::from_records(found);
    with_fresh(Files::new(guest, exe.as_bytes()), |f| {
        if let Some((pid, ids)) = records.ids {
            f.pid = u32::try_from(pid).unwrap_or(0);
            if let (Some(uid), Some(gid)) = (
                ids.get(4..8)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap())),
                ids.get(12..16)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap())),
            ) {
                f.uid = uid;
                f.gid = gid;
            }
        }
        // A local socket's capabilities are adopted first (its pipe ends' rings attached):
        // the file layer then finds them by handle.
        let mut unix_st;
        let mut st = st;
        if st.descriptions.iter().any(|d| {
            matches!(
                d.object,
                Object::Unix { .. } | Object::Socket { fused: Some(_), .. }
            )
        }) {
            unix_st = st.clone();
            for d in unix_st.descriptions.iter_mut() {
                // A fused connection's pipe ends likewise (left out, both, if one fails: the
                // socket is then not fused in this image).
                if let Object::Socket { fused, .. } = &mut d.object {
                    if let Some((r, w)) = *fused {
                        let mut take = |c: u32| match caps.get(c as usize).copied() {
                            Some(s) if s != 0 => f.backend.pipes.adopt(s).ok(),
                            _ => None,
                        };
                        *fused = match (take(r), take(w)) {
                            (Some(r), Some(w)) => Some((r as u32, w as u32)),
                            (r, w) => {
                                for h in [r, w].into_iter().flatten() {
                                    f.backend.pipes.drop_end(h);
                                }
                                None
                            }
                        };
                    }
                }
                if let Object::Unix {
                    rx, tx, listener, ..
                } = &mut d.object
                {
                    let mut take = |c: &mut u32, pipe_end: bool| {
                        if *c == NONE {
                            return;
                        }
                        let slot = caps.get(*c as usize).copied().unwrap_or(0);
                        *c = match (slot, pipe_end) {
                            (0, _) => NONE,
                            (s, true) => f.backend.pipes.adopt(s).map_or(NONE, |h| h as u32),
                            (s, false) => s as u32,
                        };
                    };
                    take(rx, true);
                    take(tx, true);
                    take(listener, false);
                }
            }
            st = &unix_st;
        }
        let made = f.adopt(st, &mut |b, o| match o {
            Object::File {
                file,
                open_flags,
                reopen,
                ..
            } => {
                let cap = *caps.get(*file as usize)?;
                b.fs.adopt_reopenable(cap, *open_flags, *reopen)
                    .ok()
                    .map(|h| h as u64)
            }
            Object::Pipe { end, .. } => b.pipes.adopt(*caps.get(*end as usize)?).ok(),
            Object::Socket { sock, .. } => b.sock_adopt(*caps.get(*sock as usize)?),
            _ => None,
        });
        let sh = sharing();
        let page = if st.offsets == NONE {
            0
        } else {
            caps.get(st.offsets as usize).copied().unwrap_or(0)
        };
        if page == 0
            || sawmill_rm::attach(
                page,
                0,
                4096,
                Some(sawmill_linux::layout::LIB_OFFSETS),
                sawmill_rm::READ | sawmill_rm::WRITE,
            )
            .is_err()
        {
            return;
        }
        sh.page = page;
        for (d, m) in st.descriptions.iter().zip(&made) {
            if let (Some(m), true) = (m, d.cell < OFFSET_CELLS && d.cell != 0) {
                sh.cells.push((Rc::downgrade(m), d.cell));
            }
        }
    })
}
