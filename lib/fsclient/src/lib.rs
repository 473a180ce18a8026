//! The file-system client library (docs/filesystem.md).
//!
//! `Files::new(vfs_slot)` gives open/read/write/pread/pwrite/lseek/close, stat/lstat/fstat
//! (every attribute Linux's stat has), readdir, mkdir, rmdir, unlink, rename (with renameat2's
//! flags), link, truncate/ftruncate, fsync, symlink, readlink, chmod/fchmod,
//! chown/lchown/fchown, utimens/futimens, statfs/fstatfs.
//!
//! - **Long paths.** A path too long for its message field (400 bytes; 240 for `rename`,
//!   `link` and `symlink`) is written into a staging buffer of the VFS first (`vfs.stage`, 400
//!   bytes a call) and named by `[0, slot]` in the request, so every path up to Linux's
//!   PATH_MAX works; opens of such paths go through the VFS.
//!
//! - **Opening.** [`Protocol::Vfs`] (option 2): every open goes to the VFS, which resolves the
//!   name and returns the PFS's open-file capability. [`Protocol::Direct`] (option 3, the
//!   default): the library caches the VFS's mount table (versioned; refreshed when a call shows
//!   a mount changed) with a session capability per PFS, and opens by path at the PFS directly;
//!   only paths that leave a file system (`..` above its root, absolute symlinks) go to the VFS.
//! - **Reading.** Reads and writes go straight to the PFS's file object (its own badged
//!   endpoint). Reads are served from the PFS's cache pages mapped read-only into this task (a
//!   window per open file): the first read of a page asks the PFS to map it (up to four pages a
//!   call), every later read of it is a plain copy with no IPC at all. Pages the PFS cannot map
//!   (holes, blocks not page-aligned on disk) are read through IPC.
//! - **Mapping.** [`Files::mmap`] attaches an open file read-only with the region manager
//!   (`sawmill_rm::init()` first): the file's capability is also a dataspace served by the PFS,
//!   whose `map` hands out the cache pages, so touching the memory faults the pages in through
//!   the region manager and later accesses are plain loads. Writes through the file interface
//!   are seen in the mapping at once (it *is* the cache).
//! - **Closing.** A file opened directly at a mount is closed at the PFS (`file.close`) and its
//!   capability kept, up to four per mount; the next direct open there reopens one in place
//!   (`file.reopen`: no capability minted, moved or revoked). A file whose capability was handed
//!   out ([`Files::share`]) or that came from the VFS is closed by dropping our capability.
//! - **Sizes** are cached per open file (from open, our own writes and `fstat`); a read at or
//!   past the cached end asks the PFS for the current size first.
//! - **A PFS that restarts** (issue 16, docs/filesystem.md): a file call that finds its server
//!   gone waits for the new incarnation through the VFS, reopens the file by inode and
//!   generation (`pfs.open_inode`), keeps the offset and retries; reads of pages the dead one
//!   had lent are caught by the region manager (`sawmill_rm::set_lent_range`) and redone. A
//!   file no longer there is `Stale`. Writes and truncates not yet fsync'd are kept in a
//!   bounded redo log per descriptor and replayed into the reopened file (replay.rs); a file we
//!   created since it was last durable and the new incarnation lacks is created again by its
//!   path. Past the log's bound, the next `fsync` fails with `Io`.
#![no_std]

extern crate alloc;

use sawmill_fsclient_redo as redo;
mod replay;

use alloc::vec::Vec;
use sawmill_abi::MsgTag;
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{file, pfs, vfs, EntryKind, FsError, OpenFlags, SetAttrFields};

use sawmill_ext2_api::read_buffer;
pub use sawmill_interfaces::RenameFlags;
use sawmill_path::{dirents, S_IFDIR, S_IFMT};
use sawmill_rt::{ipc, sys, thread};

pub use sawmill_interfaces::FsError as Error;

// `open` flags in the style of open(2): the protocol's `OpenFlags` (interfaces/fs.idl) as bits,
// plus this library's own O_NOMAP, which is never sent.
pub const O_READ: u32 = OpenFlags::READ.bits();
pub const O_WRITE: u32 = OpenFlags::WRITE.bits();
pub const O_TRUNC: u32 = OpenFlags::TRUNC.bits();
pub const O_CREATE: u32 = OpenFlags::CREATE.bits();
pub const O_EXCL: u32 = OpenFlags::EXCL.bits();
/// Read through IPC only (no mapped pages): for measuring the copy-through-the-server path.
pub const O_NOMAP: u32 = 1 << 16;
const _: () = assert!(O_NOMAP & OpenFlags::ALL.bits() == 0);

/// How many times a file call that met a dead PFS is redone after a recovery (see `on_file`).
const RECOVER_TRIES: u32 = 4;

const PAGE: u64 = 4096;
/// Per-file mapping windows: file `fd` maps at `windows + fd * WINDOW_SIZE`, by default from
/// here (a task with another layout chooses the base: [`Files::with_windows`]).
pub const WINDOWS: u64 = 0x8000_0000;
const WINDOW_SIZE: u64 = 64 << 20;
const MAX_FDS: usize = 64;
/// Where each descriptor's write buffer (the PFS's, `file::write_buffer`) is mapped: this far
/// after the base of the read windows.
const WBUFS: u64 = MAX_FDS as u64 * WINDOW_SIZE;
/// Where each descriptor's read buffer (the PFS's, `file::read_buffer`) is mapped: this far after
/// the base of the read windows, [`RBUF_STRIDE`] apart.
const RBUFS: u64 = WBUFS + MAX_FDS as u64 * WBUF_SIZE;
const RBUF_STRIDE: u64 = 32 << 10;
const _: () = assert!(read_buffer::PAGES * PAGE <= RBUF_STRIDE);
/// Address space the windows, write buffers and read buffers take from their base.
pub const WINDOWS_SPAN: u64 = RBUFS + MAX_FDS as u64 * RBUF_STRIDE;
const WBUF_SIZE: u64 = 16 << 10;
/// Writes longer than one message's 480 bytes go through the write buffer.
const SMALL_WRITE: usize = 480;
/// Reads of pages we do not map: up to one message's 480 bytes through `file::read` (unless the
/// descriptor has its read buffer already), longer ones through the read buffer.
const SMALL_READ: usize = 480;

pub type Result<T> = core::result::Result<T, FsError>;

/// How long a call that found the VFS gone waits for its new incarnation (issue 16): root
/// restarts it (after its backoff) and puts the new endpoint in the slot we call.
const VFS_RESTART_WAIT_MS: u64 = 5000;

fn e(x: RpcError<FsError>) -> FsError {
    match x {
        RpcError::App(e) => e,
        _ => FsError::Gone,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Protocol {
    /// Option 2: every open through the VFS.
    Vfs,
    /// Option 3: cached mount table, opens at the PFS.
    Direct,
}

/// A file's attributes (stat(2)'s, from the PFS's `getattr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stat {
    pub ino: u32,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Allocated space in 512-byte units (st_blocks).
    pub blocks: u64,
    /// For device inodes: (major, minor); else (0, 0).
    pub rdev: (u32, u32),
    /// Seconds since 1970 and nanoseconds.
    pub atime: (u32, u32),
    pub mtime: (u32, u32),
    pub ctime: (u32, u32),
    pub generation: u32,
    /// Which mount holds it (the VFS's mount index; 0 from `fstat`): st_dev's stand-in.
    pub mount: u32,
}

/// statfs(2)'s counts.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatFs {
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
}

/// One time of `utimens`: utimensat's UTIME_NOW, UTIME_OMIT or a time in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    Now,
    Omit,
    At(u32),
}

/// The `setattr` request of a utimens: (which, atime, mtime).
fn times(atime: TimeSet, mtime: TimeSet) -> (SetAttrFields, u32, u32) {
    let mut which = SetAttrFields::from_bits_retain(0);
    let mut t = [0u32; 2];
    for (i, (ts, now, at)) in [
        (atime, SetAttrFields::ATIME_NOW, SetAttrFields::ATIME),
        (mtime, SetAttrFields::MTIME_NOW, SetAttrFields::MTIME),
    ]
    .into_iter()
    .enumerate()
    {
        match ts {
            TimeSet::Now => which |= now,
            TimeSet::Omit => {}
            TimeSet::At(s) => {
                which |= at;
                t[i] = s;
            }
        }
    }
    (which, t[0], t[1])
}

/// The `setattr` request of a chown: `None` leaves an id alone (chown's -1).
fn owner(uid: Option<u32>, gid: Option<u32>) -> (SetAttrFields, u32, u32) {
    let mut which = SetAttrFields::from_bits_retain(0);
    if uid.is_some() {
        which |= SetAttrFields::UID;
    }
    if gid.is_some() {
        which |= SetAttrFields::GID;
    }
    (which, uid.unwrap_or(0), gid.unwrap_or(0))
}

/// Longest path sent in place by the 400-byte fields, and by the 240-byte ones.
const PATH_FIELD: usize = 400;
const PATH_FIELD_SHORT: usize = 240;

/// A path argument ready to send: the path itself, or the name of the staging slot it was
/// written into (`[0, slot]`, see `vfs.stage`).
enum PathArg<'a> {
    Inline(&'a [u8]),
    Staged([u8; 2]),
}

impl PathArg<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            PathArg::Inline(p) => p,
            PathArg::Staged(s) => s,
        }
    }
}

impl Stat {
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
}

pub struct DirEntry {
    pub ino: u32,
    pub kind: EntryKind,
    pub name: Vec<u8>,
}

struct Fd {
    cap: u64,
    /// The session capability of the mount it was opened at directly (option 3), 0 if it came
    /// from the VFS: such a file can be kept closed for a later open at that mount.
    session: u64,
    /// Whether our capability may be the file's only one: false once it was handed out
    /// ([`Files::share`]). Only then does `close` close the file at the PFS (and keep it).
    sole: bool,
    /// The VFS's mount index of a file `vfs.open` gave us ([`NO_MOUNT`] otherwise): such a file
    /// is kept closed for a later open through the VFS (`vfs.reopen`).
    mount: u32,
    flags: u32,
    off: u64,
    size: u64,
    /// What the file is reopened by if its PFS restarts (issue 16): the VFS's mount index
    /// ([`NO_MOUNT`]: not known, an adopted file), the inode and its generation (inode 0: a
    /// server that does not restart, procfs).
    home: u32,
    ino: u32,
    generation: u32,
    /// Written since the last successful `fsync`: if the PFS restarts now, those writes may
    /// be lost (it had not made them durable), and the next `fsync` says so (`lost`).
    unsynced: bool,
    lost: bool,
    /// Registered with the region manager for reopening (`mapped_by_rm`): `close` takes the
    /// registration back only then, so a plain open/close never touches the region manager.
    rm_reopen: bool,
    /// The writes and truncates since the last successful `fsync`, replayed after a restart
    /// (replay.rs), and what re-creates the file if we created it since (None: not ours).
    redo: redo::RedoLog,
    created: Option<replay::Created>,
    /// One bit per page of the window: mapped.
    mapped: Vec<u64>,
    /// Addresses where `mmap` attached this file (detached on close).
    #[cfg_attr(not(target_os = "none"), allow(dead_code))]
    attached: Vec<u64>,
    /// The PFS's write buffer is mapped at `windows + WBUFS + fd * WBUF_SIZE` (asked for on the first
    /// long write; the PFS takes it back on close).
    wbuf: bool,
    /// The PFS's read buffer, mapped at `windows + RBUFS + fd * RBUF_STRIDE` once asked for.
    rbuf: ReadBuf,
}

/// A descriptor's read buffer (`file::read_buffer`): the copy path for pages we do not map.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadBuf {
    NotAsked,
    Mapped,
    /// The server has none (procfs): every read of an unmapped page is a `file::read`.
    Refused,
}

struct MountEnt {
    prefix: Vec<u8>,
    session: u64,
    /// Files of this mount we closed and kept (at most [`KEPT_FILES`]): the next direct open
    /// reopens one (`file.reopen`) instead of asking for a new capability.
    kept: Vec<u64>,
}

/// How long a call that found its file system gone tries again before it gives up (`Gone`).
/// Only for the moment between a PFS's death and the VFS seeing it (its watch thread runs at
/// the highest priority): the wait for a restarting PFS itself happens in the VFS (`vfs.mount`,
/// up to 5 s), and a mount that does not restart answers `Gone` at once.
const RESTART_WAIT_MS: u64 = 100;

/// Puts a capability to the VFS's current incarnation into the slot it is given: true if it
/// did ([`Files::with_vfs_refill`]).
pub type VfsRefill = fn(u64) -> bool;

/// [`Fd::mount`] of a file that did not come from `vfs.open` (or was created by it).
const NO_MOUNT: u32 = u32::MAX;

/// What `close` needs of a descriptor once it is gone from the table.
struct Closing {
    cap: u64,
    session: u64,
    sole: bool,
    mount: u32,
}

/// An open file as an open gave it: its capability and size, the session it was opened
/// through (0: the VFS), the mount it is kept for ([`Fd::mount`]), and what it is reopened by
/// after a restart ([`Fd::home`], inode, generation).
struct Opened {
    cap: u64,
    size: u64,
    session: u64,
    mount: u32,
    home: u32,
    ino: u32,
    generation: u32,
}

/// Closed files kept per mount for reuse. Each holds one of the session's file charges at the
/// PFS, so only a few: enough for a program that opens and closes in a loop.
const KEPT_FILES: usize = 4;

pub struct Files {
    vfs: vfs::Client,
    pub protocol: Protocol,
    fds: Vec<Option<Fd>>,
    free_slots: Vec<u64>,
    mounts: Vec<MountEnt>,
    mounts_version: u64,
    /// Files `vfs.open` gave us that we closed and kept, with their mounts (at most
    /// [`KEPT_FILES`]): the next open through the VFS reopens one (`vfs.reopen`).
    vfs_kept: Vec<(u32, u64)>,
    /// Base of the file windows and write buffers.
    windows: u64,
    /// What all descriptors' redo logs hold (bounded: `redo::TOTAL_BYTES`).
    redo_total: usize,
    /// Who refills our VFS slot after the VFS restarted, if not root ([`Files::with_vfs_refill`]).
    vfs_refill: Option<VfsRefill>,
    /// Whether writes are logged for replay after a PFS restart ([`Files::with_redo`]).
    redo_on: bool,
}

impl Files {
    pub fn new(vfs_ep: u64) -> Files {
        Files::with_windows(vfs_ep, WINDOWS)
    }

    /// As [`Files::new`], with the file windows and write buffers in
    /// `[windows, windows + WINDOWS_SPAN)`, which nothing else in the task may use.
    pub fn with_windows(vfs_ep: u64, windows: u64) -> Files {
        let mut fds = Vec::new();
        fds.resize_with(MAX_FDS, || None);
        // Issue 16: the windows hold a PFS's pages; if it dies they vanish, and a read of one
        // must not end the task. With a region manager, such a fault gets a scratch page and is
        // counted (`lost_pages`), and the read is redone after the file is reopened. Without one
        // (root is the pager) it still ends the task. Set once per task (Busy after).
        #[cfg(target_os = "none")]
        let _ = sawmill_rm::set_lent_range(windows, WINDOWS_SPAN);
        Files {
            vfs: vfs::Client::new(vfs_ep),
            protocol: Protocol::Direct,
            fds,
            free_slots: Vec::new(),
            mounts: Vec::new(),
            mounts_version: 0,
            vfs_kept: Vec::new(),
            windows,
            redo_total: 0,
            redo_on: false,
            vfs_refill: None,
        }
    }

    /// For a client whose VFS capability root does not refill when the VFS restarts (a Linux
    /// process: its copy came from proc): `refill` is called with our VFS slot, emptied, while
    /// [`Self::vfs_call`] waits for the new incarnation, and puts a capability to it there
    /// (true) or not yet (false: it is asked again after a yield).
    pub fn with_vfs_refill(mut self, refill: VfsRefill) -> Files {
        self.vfs_refill = Some(refill);
        self
    }

    /// The slot of our VFS capability (what a refill fills; proc hands out a copy of its own).
    pub fn vfs_slot(&self) -> u64 {
        self.vfs.ep
    }

    /// A call to the VFS, made again while the VFS is gone (issue 16): a restarted VFS serves the
    /// same name space (its mount table is rebuilt from its configuration and the PFSs), and our
    /// open files and sessions are the PFSs' capabilities, which outlive it. The wait is
    /// bounded ([`VFS_RESTART_WAIT_MS`]); a VFS that does not restart gives the error at once
    /// after it. A call the dead VFS carried out but did not answer is made again: a `rename`,
    /// `unlink`, `mkdir` or exclusive create killed in that moment reports the state it left
    /// (NotFound, Exists).
    fn vfs_call<T>(
        &self,
        mut call: impl FnMut(&vfs::Client) -> core::result::Result<T, RpcError<FsError>>,
    ) -> core::result::Result<T, RpcError<FsError>> {
        let mut deadline = None;
        loop {
            match call(&self.vfs) {
                // The VFS died: a caller blocked or queued on it is woken with PeerGone/GONE,
                // and its slot is empty (BadCap) until it is refilled.
                Err(x) if x.server_gone() => {
                    let now = sys::rdtsc();
                    let khz = sawmill_rt::clock::Wall::get().khz.max(1);
                    if now >= *deadline.get_or_insert(now + VFS_RESTART_WAIT_MS * khz) {
                        return Err(x);
                    }
                    if let Some(refill) = self.vfs_refill {
                        // Our copy went with the dead incarnation (or is about to).
                        let _ = sys::cap_delete(self.vfs.ep);
                        if refill(self.vfs.ep) {
                            continue;
                        }
                    }
                    sys::yield_now();
                }
                r => return r,
            }
        }
    }

    /// With a redo log (issue 16, docs/filesystem.md): writes not yet fsync'd when a PFS
    /// restarts are replayed at the new incarnation, and files created since they were last
    /// durable are created again, so the restart is invisible. A client's choice, as `O_SYNC`
    /// is: the log copies every written byte once more (a 4 KiB write ~600 instructions), so it
    /// is off by default and a client whose writes must survive a PFS restart without an error
    /// turns it on. Without it, Linux's rule: the next fsync after a restart that lost writes
    /// reports `Io` (EIO).
    pub fn with_redo(mut self) -> Files {
        self.redo_on = true;
        self
    }

    /// `p` as a path argument of a field holding `max` bytes: in place if it fits, else
    /// staged at the VFS in staging slot `slot`.
    fn path<'a>(&self, slot: u32, p: &'a [u8], max: usize) -> Result<PathArg<'a>> {
        if p.len() <= max && p.first() != Some(&0) {
            return Ok(PathArg::Inline(p));
        }
        if p.len() >= vfs::STAGE_MAX as usize {
            return Err(FsError::NameTooLong);
        }
        for (i, chunk) in p.chunks(PATH_FIELD).enumerate() {
            self.vfs_call(|v| v.stage(slot, (i * PATH_FIELD) as u32, chunk))
                .map_err(e)?;
        }
        Ok(PathArg::Staged([0, slot as u8]))
    }

    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    fn fd(&mut self, fd: usize) -> Result<&mut Fd> {
        self.fds
            .get_mut(fd)
            .and_then(|f| f.as_mut())
            .ok_or(FsError::BadFile)
    }

    /// Refreshes the cached mount table when the VFS's version differs.
    fn refresh_mounts(&mut self) -> Result<()> {
        let m = self.vfs_call(|v| v.mounts()).map_err(e)?;
        if m.version == self.mounts_version && !self.mounts.is_empty() {
            return Ok(());
        }
        for old in self.mounts.drain(..) {
            for k in old.kept {
                let _ = sys::cap_delete(k);
                self.free_slots.push(k);
            }
            if old.session != 0 {
                let _ = sys::cap_delete(old.session);
                self.free_slots.push(old.session);
            }
        }
        for i in 0..m.count {
            let rx = self.slot();
            match self.vfs_call(|v| v.mount(i, rx)) {
                Ok(o) => self.mounts.push(MountEnt {
                    prefix: o.prefix.as_slice().to_vec(),
                    session: o.s,
                    kept: Vec::new(),
                }),
                Err(_) => {
                    self.free_slots.push(rx);
                    // A dead mount still shadows its prefix: opens under it fail, never
                    // fall through to the parent file system.
                    self.mounts.push(MountEnt {
                        prefix: Vec::new(),
                        session: 0,
                        kept: Vec::new(),
                    });
                }
            }
        }
        self.mounts_version = m.version;
        Ok(())
    }

    /// Option 3: open at the PFS owning the path's longest mounted prefix. None = ask the VFS.
    fn open_direct(&mut self, path: &[u8], flags: OpenFlags, mode: u32) -> Option<Result<Opened>> {
        if path.first() != Some(&b'/')
            || path.len() > PATH_FIELD
            || path.split(|&c| c == b'/').any(|c| c == b"..")
        {
            return None;
        }
        if self.mounts.is_empty() && self.refresh_mounts().is_err() {
            return None;
        }
        // With a mount lost, only the VFS knows what its prefix shadows.
        if self.mounts.iter().any(|m| m.session == 0) {
            return None;
        }
        let under = |prefix: &[u8]| {
            let p = prefix.strip_suffix(b"/").unwrap_or(prefix);
            path.starts_with(p) && (path.len() == p.len() || path[p.len()] == b'/')
        };
        let m = (0..self.mounts.len())
            .filter(|&i| !self.mounts[i].prefix.is_empty() && under(&self.mounts[i].prefix))
            .max_by_key(|&i| self.mounts[i].prefix.len())?;
        let rest = &path[self.mounts[m]
            .prefix
            .strip_suffix(b"/")
            .unwrap_or(&self.mounts[m].prefix)
            .len()..];
        let session = self.mounts[m].session;
        // A closed file kept from this mount: reopened in place, no capability minted or moved.
        while let Some(k) = self.mounts[m].kept.pop() {
            match file::Client::new(k).reopen(rest, flags, mode) {
                Ok(o) => {
                    return Some(Ok(Opened {
                        cap: k,
                        size: o.size,
                        session,
                        mount: NO_MOUNT,
                        home: m as u32,
                        ino: o.ino,
                        generation: o.generation,
                    }))
                }
                Err(RpcError::App(FsError::BadFile)) => {
                    // The PFS will not reopen it (its session went): let it go.
                    let _ = sys::cap_delete(k);
                    self.free_slots.push(k);
                }
                Err(RpcError::App(FsError::Xdev)) => {
                    self.mounts[m].kept.push(k);
                    return None;
                }
                Err(RpcError::App(x)) => {
                    self.mounts[m].kept.push(k);
                    return Some(Err(x));
                }
                Err(_) => {
                    let _ = sys::cap_delete(k);
                    self.free_slots.push(k);
                    let _ = self.refresh_mounts();
                    return Some(Err(FsError::Gone));
                }
            }
        }
        // A mount point inside the rest (a deeper mount we know is dead) is the VFS's business.
        let rx = self.slot();
        match pfs::Client::new(session).open_path(rest, flags, mode, rx) {
            Ok(o) => Some(Ok(Opened {
                cap: o.file,
                size: o.size,
                session,
                mount: NO_MOUNT,
                home: m as u32,
                ino: o.ino,
                generation: o.generation,
            })),
            Err(RpcError::App(FsError::Xdev)) => {
                self.free_slots.push(rx);
                None
            }
            Err(RpcError::App(x)) => {
                self.free_slots.push(rx);
                Some(Err(x))
            }
            Err(_) => {
                // The PFS is gone: the VFS's table changed; refetch it and report the loss.
                self.free_slots.push(rx);
                let _ = self.refresh_mounts();
                Some(Err(FsError::Gone))
            }
        }
    }

    /// As [`Self::open`], but a client that has not fetched the mount table yet opens through
    /// the VFS (one call, which the VFS passes to the PFS) rather than fetching the table first
    /// (a call to the VFS per mount, then the open at the PFS). For a process's one open at its
    /// start, which may be its only one; the table is fetched at the next open as before.
    pub fn open_sparing_mounts(&mut self, path: &str, flags: u32, mode: u32) -> Result<usize> {
        if !self.mounts.is_empty() || self.protocol != Protocol::Direct {
            return self.open(path, flags, mode);
        }
        self.protocol = Protocol::Vfs;
        let r = self.open(path, flags, mode);
        self.protocol = Protocol::Direct;
        r
    }

    pub fn open(&mut self, path: &str, flags: u32, mode: u32) -> Result<usize> {
        match self.open_once(path, flags, mode) {
            // The file system restarted under us (issue 16): once it is back, again.
            Err(FsError::Gone) => self.until_back(|s| s.open_once(path, flags, mode)),
            r => r,
        }
    }

    /// Issue 16: `attempt` after a fresh mount table, again while it finds a file system gone
    /// (a PFS that died a moment ago: the VFS has not seen it yet and still hands out the dead
    /// one's session), for at most [`RESTART_WAIT_MS`] beyond the VFS's own wait.
    fn until_back<T>(&mut self, mut attempt: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        let khz = sawmill_rt::clock::Wall::get().khz.max(1);
        let deadline = sys::rdtsc().saturating_add(RESTART_WAIT_MS * khz);
        loop {
            self.await_file_systems();
            match attempt(self) {
                Err(FsError::Gone) if sys::rdtsc() < deadline => sys::yield_now(),
                r => return r,
            }
        }
    }

    /// After a call found a PFS gone: refetches the mount table with fresh sessions, which
    /// has the VFS wait for a restarting file system to come back (`vfs.mount` of a mount whose
    /// PFS died and restarts reconnects it first).
    fn await_file_systems(&mut self) {
        self.mounts_version = 0;
        let _ = self.refresh_mounts();
    }

    fn open_once(&mut self, path: &str, flags: u32, mode: u32) -> Result<usize> {
        let i = self
            .fds
            .iter()
            .position(|f| f.is_none())
            .ok_or(FsError::NoSpace)?;
        let p = path.as_bytes();
        let sent = OpenFlags::from_bits(flags & !O_NOMAP).ok_or(FsError::Invalid)?;
        let direct = if self.protocol == Protocol::Direct && !sent.contains(OpenFlags::CREATE) {
            self.open_direct(p, sent, mode)
        } else {
            None
        };
        let o = match direct {
            Some(r) => r?,
            None => match self.reopen_via_vfs(p, sent, mode) {
                Some(r) => r?,
                None => {
                    let arg = self.path(0, p, PATH_FIELD)?;
                    let rx = self.slot();
                    match self.vfs_call(|v| v.open(arg.bytes(), sent, mode, rx)) {
                        Ok(o) => Opened {
                            cap: o.file,
                            size: o.size,
                            session: 0,
                            // A file the VFS may have created for us is not kept (it is
                            // charged to the VFS, which cannot reopen it in place).
                            mount: if sent.contains(OpenFlags::CREATE) {
                                NO_MOUNT
                            } else {
                                o.mount
                            },
                            home: o.mount,
                            ino: o.ino,
                            generation: o.generation,
                        },
                        Err(x) => {
                            self.free_slots.push(rx);
                            return Err(e(x));
                        }
                    }
                }
            },
        };
        self.fds[i] = Some(Fd {
            cap: o.cap,
            session: o.session,
            sole: true,
            mount: o.mount,
            flags,
            off: 0,
            size: o.size,
            home: o.home,
            ino: o.ino,
            generation: o.generation,
            unsynced: false,
            lost: false,
            rm_reopen: false,
            redo: redo::RedoLog::default(),
            created: None,
            mapped: Vec::new(),
            attached: Vec::new(),
            wbuf: false,
            rbuf: ReadBuf::NotAsked,
        });
        if self.redo_on {
            self.note_open(i, p, sent, mode);
        }
        Ok(i)
    }

    /// Takes over an open file another task opened (its capability `cap`, a slot of this task
    /// that becomes the descriptor's, and the `open` flags it was opened with): the descriptor.
    /// For a process made by `fork`, or the image after `execve`: the PFS sees one more holder
    /// of the same open file.
    pub fn adopt(&mut self, cap: u64, flags: u32) -> Result<usize> {
        self.adopt_reopenable(cap, flags, [NO_MOUNT, 0, 0])
    }

    /// What descriptor `fd` is reopened by if its PFS restarts: the VFS's mount index, the
    /// inode and its generation (inode 0: nothing, the descriptor cannot be reopened). For the
    /// state a `fork` or `execve` hands on, so the other task's descriptor
    /// ([`Self::adopt_reopenable`]) comes back as ours does (issue 16).
    pub fn reopen_of(&mut self, fd: usize) -> Result<[u32; 3]> {
        let f = self.fd(fd)?;
        Ok(if f.home == NO_MOUNT || f.ino == 0 {
            [0; 3]
        } else {
            [f.home, f.ino, f.generation]
        })
    }

    /// As [`Self::adopt`], with what the other task's descriptor was reopened by
    /// ([`Self::reopen_of`]; inode 0: nothing): a PFS restart then reopens it at our session
    /// by inode and generation, with our own credentials, as any descriptor of ours.
    pub fn adopt_reopenable(&mut self, cap: u64, flags: u32, reopen: [u32; 3]) -> Result<usize> {
        let [home, ino, generation] = reopen;
        let home = if ino == 0 { NO_MOUNT } else { home };
        let i = self
            .fds
            .iter()
            .position(|f| f.is_none())
            .ok_or(FsError::NoSpace)?;
        self.fds[i] = Some(Fd {
            cap,
            // Shared with its other holders: closing drops our capability, never closes the file
            // at the PFS for them (see `share`).
            session: 0,
            sole: false,
            mount: NO_MOUNT,
            flags,
            off: 0,
            // Unknown: a read at or past it asks the PFS for the size first.
            size: 0,
            // Reopened after a PFS restart if the other task knew what it is.
            home,
            ino,
            generation,
            unsynced: false,
            lost: false,
            rm_reopen: false,
            redo: redo::RedoLog::default(),
            created: None,
            mapped: Vec::new(),
            attached: Vec::new(),
            wbuf: false,
            rbuf: ReadBuf::NotAsked,
        });
        Ok(i)
    }

    /// The `open` flags descriptor `fd` was opened (or adopted) with.
    pub fn open_flags(&mut self, fd: usize) -> Result<u32> {
        Ok(self.fd(fd)?.flags)
    }

    pub fn close(&mut self, fd: usize) -> Result<()> {
        // Without the redo log a descriptor has nothing logged (`note_open`, `note_write`).
        if self.redo_on {
            self.note_durable(fd);
        }
        // Read in place and dropped there: the descriptor is large (its restart state), and
        // moving it out cost a copy on every close.
        let f = self
            .fds
            .get(fd)
            .and_then(|f| f.as_ref())
            .ok_or(FsError::BadFile)?;
        #[cfg(target_os = "none")]
        for &a in &f.attached {
            let _ = sawmill_rm::detach(a);
        }
        // The slot may hold another file next (kept, or freed).
        #[cfg(target_os = "none")]
        if f.rm_reopen {
            sawmill_rm::clear_reopen(f.cap);
        }
        let last_mapped = f.mapped.iter().rposition(|&w| w != 0);
        let f = Closing {
            cap: f.cap,
            session: f.session,
            sole: f.sole,
            mount: f.mount,
        };
        self.fds[fd] = None;
        // Drop our mappings of the file's pages so the window starts empty for the next file.
        if let Some(last) = last_mapped {
            let _ = sys::unmap(
                self.windows + fd as u64 * WINDOW_SIZE,
                (last as u64 + 1) * 64,
                sawmill_abi::UNMAP_SELF,
            );
        }
        // A file opened directly at a mount is closed at the PFS and kept for the next direct
        // open there (`file.reopen`), up to KEPT_FILES; the mount must still be the one it came
        // from. Otherwise closing is dropping the capability: it is our only one, so the kernel
        // tells the PFS (NO_SENDERS), which closes the file before it takes our next request.
        if f.session != 0 && f.sole {
            if let Some(m) = self
                .mounts
                .iter_mut()
                .find(|m| m.session == f.session && m.kept.len() < KEPT_FILES)
            {
                if file::Client::new(f.cap).close().is_ok() {
                    m.kept.push(f.cap);
                    return Ok(());
                }
            }
        }
        // The same for a file the VFS gave us: kept for a later open through it.
        if f.session == 0
            && f.sole
            && f.mount != NO_MOUNT
            && self.vfs_kept.len() < KEPT_FILES
            && file::Client::new(f.cap).close().is_ok()
        {
            self.vfs_kept.push((f.mount, f.cap));
            return Ok(());
        }
        let _ = sys::cap_delete(f.cap);
        self.free_slots.push(f.cap);
        Ok(())
    }

    /// Option 2 without a new capability: opens `path` through the VFS into a file we kept
    /// closed (`vfs.reopen`): (capability, size, mount). None = use `vfs.open`.
    fn reopen_via_vfs(
        &mut self,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
    ) -> Option<Result<Opened>> {
        if flags.contains(OpenFlags::CREATE) || path.len() > PATH_FIELD || path.first() == Some(&0)
        {
            return None;
        }
        let (m, k) = self.vfs_kept.pop()?;
        match self.vfs_call(|v| v.reopen(path, flags, mode, m, k)) {
            Ok(o) => Some(Ok(Opened {
                cap: k,
                size: o.size,
                session: 0,
                mount: m,
                home: m,
                ino: o.ino,
                generation: o.generation,
            })),
            // Not a path the VFS hands to that mount whole: `open` it.
            Err(RpcError::App(FsError::Xdev)) => {
                self.vfs_kept.push((m, k));
                None
            }
            Err(RpcError::App(x)) if x != FsError::BadFile && x != FsError::Gone => {
                self.vfs_kept.push((m, k));
                Some(Err(x))
            }
            // The file cannot be reopened (its file system went, or it never can): let it go
            // and open afresh.
            Err(_) => {
                let _ = sys::cap_delete(k);
                self.free_slots.push(k);
                None
            }
        }
    }

    /// Attaches the whole file `fd` (opened for reading) read-only anywhere in this task with
    /// the region manager (`sawmill_rm::init()` must have been called) and returns (address,
    /// file size in bytes). The file's capability is a dataspace of the PFS: touching a page
    /// faults it in (region manager → `dataspace.map` at the PFS → its cache page, read-only).
    /// Writes to the range are refused (the region manager reports the thread). The length
    /// attached is the size now, rounded up to pages; bytes past the end of the file in the last
    /// page read as zero (or the disk block's tail).
    #[cfg(target_os = "none")]
    pub fn mmap(&mut self, fd: usize) -> Result<(u64, u64)> {
        let size = self.fstat(fd)?.size;
        let cap = self.mapped_by_rm(fd)?;
        let f = self.fd(fd)?;
        if f.flags & O_READ == 0 {
            return Err(FsError::BadFile);
        }
        if size == 0 {
            return Err(FsError::Invalid);
        }
        let len = size.div_ceil(PAGE) * PAGE;
        let a = sawmill_rm::attach(cap, 0, len, None, sawmill_rm::READ).map_err(|x| match x {
            sawmill_rm::RmError::NotReady => FsError::Invalid,
            _ => FsError::NoSpace,
        })?;
        f.attached.push(a);
        Ok((a, size))
    }

    /// Detaches a range `mmap` returned.
    #[cfg(target_os = "none")]
    pub fn munmap(&mut self, addr: u64) -> Result<()> {
        let f = self
            .fds
            .iter_mut()
            .flatten()
            .find(|f| f.attached.contains(&addr))
            .ok_or(FsError::Invalid)?;
        f.attached.retain(|&a| a != addr);
        sawmill_rm::detach(addr)
            .map(|_| ())
            .map_err(|_| FsError::Invalid)
    }

    /// Runs `op` on descriptor `fd`; when it finds the file's PFS gone and the file can be
    /// reopened there ([`Self::recover`]), runs it once more on the reopened file. Every call
    /// `op` makes is idempotent (reads, writes of the same bytes at the same offset, stat,
    /// truncate to a size), so doing it again after a partial first try is safe.
    fn on_file<T>(&mut self, fd: usize, mut op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        // More than one try: the lost-page count is the task's, so another thread's page lost
        // in the same moment (its own file's PFS restart) also reads as Gone here; and the PFS
        // may die again while we redo the call. `recover` fails when it does not come back.
        let mut tries = 0;
        loop {
            match op(self) {
                Err(FsError::Gone) if tries < RECOVER_TRIES => {
                    tries += 1;
                    self.recover(fd)?;
                }
                r => return r,
            }
        }
    }

    /// Issue 16: descriptor `fd`'s PFS died and restarts. Waits for it through the VFS (a fresh
    /// mount table: `vfs.mount` of that mount reconnects it first), reopens the file by inode
    /// and generation (`pfs.open_inode` on our session there: our own credentials, checked as
    /// any open; READ and WRITE as before, never TRUNC) and makes the descriptor use it: same
    /// offset, size asked anew, no pages mapped (the old ones went with the dead incarnation's
    /// memory), write and read buffers asked for again when next needed. Writes not fsync'd,
    /// lost with the dead incarnation's cache, are replayed from the descriptor's redo log
    /// (replay.rs); past its bound the next `fsync` reports `Io` (Linux's rule for writes lost
    /// before they were durable). A file we created since it was last durable that the new
    /// incarnation lacks is created again by its path; any other file no longer there is
    /// `Stale` (freed, or its number reused); `Gone` if the file system did not come back, or for a
    /// descriptor we cannot reopen (adopted from a task that did not know its inode, or a server
    /// that does not restart). Attachments of the file (its slot) see the new file at once: it is reopened into
    /// the same slot.
    fn recover(&mut self, fd: usize) -> Result<()> {
        let f = self.fd(fd)?;
        if f.home == NO_MOUNT || f.ino == 0 {
            return Err(FsError::Gone);
        }
        match self.until_back(|s| s.reopen_inode(fd)) {
            // Not in the new incarnation: ours to create again if we made it (replay.rs).
            Err(FsError::Stale) => {
                self.recreate(fd)?;
                self.until_back(|s| s.reopen_inode(fd))
            }
            r => r,
        }
    }

    /// One try of [`Self::recover`]'s reopen, with the mount table just refetched.
    fn reopen_inode(&mut self, fd: usize) -> Result<()> {
        let (home, ino, generation, flags) = {
            let f = self.fd(fd)?;
            (f.home, f.ino, f.generation, f.flags)
        };
        let session = self.mounts.get(home as usize).map_or(0, |m| m.session);
        if session == 0 {
            return Err(FsError::Gone);
        }
        let access = OpenFlags::from_bits_truncate(flags) & (OpenFlags::READ | OpenFlags::WRITE);
        // Into the same slot (emptied when the dead incarnation's endpoint was revoked): the
        // region manager's attachments of the file name it, and see the new file at once.
        let slot = self.fd(fd)?.cap;
        let _ = sys::cap_delete(slot);
        let o = pfs::Client::new(session)
            .open_inode(ino, generation, access, slot)
            .map_err(e)?;
        let windows = self.windows;
        let f = self.fd(fd)?;
        f.cap = o.file;
        if let Some(last) = f.mapped.iter().rposition(|&w| w != 0) {
            let _ = sys::unmap(
                windows + fd as u64 * WINDOW_SIZE,
                (last as u64 + 1) * 64,
                sawmill_abi::UNMAP_SELF,
            );
        }
        f.mapped.clear();
        if f.wbuf {
            let _ = sys::unmap(
                windows + WBUFS + fd as u64 * WBUF_SIZE,
                WBUF_SIZE / PAGE,
                sawmill_abi::UNMAP_SELF,
            );
            f.wbuf = false;
        }
        if f.rbuf == ReadBuf::Mapped {
            let _ = sys::unmap(
                windows + RBUFS + fd as u64 * RBUF_STRIDE,
                read_buffer::PAGES,
                sawmill_abi::UNMAP_SELF,
            );
        }
        f.rbuf = ReadBuf::NotAsked;
        f.size = o.size;
        // Opened through our session now: kept for a direct open at that mount on close.
        f.session = session;
        f.mount = NO_MOUNT;
        // Writes not fsync'd are redone from the log (replay.rs); only if it could not hold
        // them all may they be lost, and the next fsync says so.
        if f.unsynced && f.redo.overflowed() {
            f.lost = true;
            f.unsynced = false;
            f.redo = redo::RedoLog::default();
        }
        self.replay(fd)
    }

    /// The open file's capability: a `file` endpoint that is also a read-only `dataspace`
    /// (interfaces/dataspace.idl). It stays the library's; valid until `close`. To pass the open
    /// file on to another task, use [`Self::share`].
    pub fn file_cap(&mut self, fd: usize) -> Result<u64> {
        self.mapped_by_rm(fd)
    }

    /// Descriptor `fd`'s capability, which the caller may attach with the region manager:
    /// registered with it (`sawmill_rm::set_reopen`) so that, if the file's PFS restarts, the
    /// region manager opens the file again by inode and generation into the same slot at the
    /// next fault (issue 16). A descriptor we could not reopen ourselves is not registered.
    fn mapped_by_rm(&mut self, fd: usize) -> Result<u64> {
        #[cfg(target_os = "none")]
        let vfs = self.vfs.ep;
        let f = self.fd(fd)?;
        #[cfg(target_os = "none")]
        if f.home != NO_MOUNT && f.ino != 0 {
            f.rm_reopen = true;
            sawmill_rm::set_reopen(
                f.cap,
                sawmill_rm::Reopen {
                    vfs,
                    mount: f.home,
                    ino: f.ino,
                    generation: f.generation,
                },
            );
        }
        Ok(f.cap)
    }

    /// The open file's capability, for copying to another task that is to share the open file
    /// (a forked child: issue 14). From now on our `close` only drops our capability — the file
    /// stays open at the PFS until the last copy goes — instead of closing it there and keeping
    /// the capability for a later open (which would close the other task's file too).
    pub fn share(&mut self, fd: usize) -> Result<u64> {
        self.fd(fd)?.sole = false;
        self.mapped_by_rm(fd)
    }

    /// Asks the PFS to map pages [page, page+count) of the file into its window; returns how
    /// many from the first were mapped.
    fn map_pages(f: &mut Fd, windows: u64, fd: usize, page: u64, count: u64) -> Result<u64> {
        let win = windows + fd as u64 * WINDOW_SIZE;
        let u = sawmill_rt::utcb();
        u.map_window = [win, WINDOW_SIZE];
        let dst = win + page * PAGE;
        let r = ipc::call(
            f.cap,
            MsgTag::new(file::op::MAP, 3),
            [page, count.min(4), dst, 0],
        );
        u.map_window = [0, 0];
        if r.err != 0 || r.tag.label() == sawmill_abi::label::GONE {
            return Err(FsError::Gone);
        }
        if r.tag.label() != 0 {
            return Err(FsError::Io);
        }
        let n = (r.tag.maps() as u64).min(r.w[0]);
        f.size = r.w[1];
        for p in page..page + n {
            let w = (p / 64) as usize;
            if f.mapped.len() <= w {
                f.mapped.resize(w + 1, 0);
            }
            f.mapped[w] |= 1 << (p % 64);
        }
        Ok(n)
    }

    /// Reads at `off`. The common case (a reread of a cached file: the whole request inside one
    /// page already mapped in our window, inside the known size) is inlined into the caller;
    /// everything else is [`Self::pread_slow`].
    #[inline]
    pub fn pread(&mut self, fd: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        let windows = self.windows;
        if let Some(Some(f)) = self.fds.get(fd) {
            match copy_mapped(f, windows, fd, buf, off) {
                Mapped::Copied => return Ok(buf.len()),
                Mapped::Lost => return self.pread_lost(fd, buf, off),
                Mapped::No => {}
            }
        }
        self.pread_slow(fd, buf, off)
    }

    /// A read whose mapped page vanished while we copied it (its PFS died): what we copied is
    /// meaningless; the file is reopened and the read redone. Out of line, so that the fast
    /// paths ([`Self::pread`], [`Self::read`]) stay as short as before issue 16.
    #[cold]
    #[inline(never)]
    fn pread_lost(&mut self, fd: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        self.recover(fd)?;
        self.on_file(fd, |s| s.pread_once(fd, buf, off))
    }

    #[inline(never)]
    fn pread_slow(&mut self, fd: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        self.on_file(fd, |s| s.pread_once(fd, buf, off))
    }

    /// One try of a read; `Gone` if a page it read from vanished meanwhile (see `lost_pages`).
    fn pread_once(&mut self, fd: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        let lost = lost_pages();
        let r = self.pread_pages(fd, buf, off);
        if lost_pages() != lost {
            return Err(FsError::Gone);
        }
        r
    }

    fn pread_pages(&mut self, fd: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        let windows = self.windows;
        let f = self
            .fds
            .get_mut(fd)
            .and_then(|f| f.as_mut())
            .ok_or(FsError::BadFile)?;
        if f.flags & O_READ == 0 {
            return Err(FsError::BadFile);
        }
        if off.saturating_add(buf.len() as u64) > f.size {
            // Past what we know: the file may have grown.
            f.size = file::Client::new(f.cap).stat().map_err(e)?.size;
        }
        let end = (off.saturating_add(buf.len() as u64)).min(f.size);
        let mut pos = off;
        let win = windows + fd as u64 * WINDOW_SIZE;
        let rbuf = windows + RBUFS + fd as u64 * RBUF_STRIDE;
        while pos < end {
            let page = pos / PAGE;
            let po = pos % PAGE;
            let n = (PAGE - po).min(end - pos) as usize;
            let dst = &mut buf[(pos - off) as usize..(pos - off) as usize + n];
            let mapped = |f: &Fd| {
                f.mapped
                    .get((page / 64) as usize)
                    .is_some_and(|w| w & (1 << (page % 64)) != 0)
            };
            let can_map = f.flags & O_NOMAP == 0 && (page + 1) * PAGE <= WINDOW_SIZE;
            if can_map && !mapped(f) {
                let want = (end - pos).div_ceil(PAGE).clamp(1, 4);
                Self::map_pages(f, windows, fd, page, want)?;
            }
            if can_map && mapped(f) {
                // SAFETY: the page is mapped read-only at this address in our window (the PFS
                // granted it above or earlier); `n` stays within the page.
                let src = unsafe {
                    core::slice::from_raw_parts((win + page * PAGE + po) as *const u8, n)
                };
                dst.copy_from_slice(src);
                pos += n as u64;
                continue;
            }
            // Through the read buffer: the PFS copies up to 16 KiB into it per call, and what one
            // call brought serves the next reads (checked against the buffer's header).
            let want = (end - pos).min(read_buffer::DATA as u64) as usize;
            if f.rbuf == ReadBuf::NotAsked && want > SMALL_READ {
                Self::map_read_buffer(f, rbuf)?;
            }
            if f.rbuf == ReadBuf::Mapped {
                let at = (pos - off) as usize;
                let got = Self::read_buffered(f, rbuf, pos, &mut buf[at..at + want])?;
                pos += got as u64;
                if got < want {
                    // Shorter than we thought (truncated meanwhile).
                    f.size = pos;
                    return Ok((pos - off) as usize);
                }
                continue;
            }
            // Through the PFS: at most 480 bytes per call.
            let c = file::Client::new(f.cap);
            let mut done = 0;
            while done < n {
                let d = c
                    .read(pos + done as u64, (n - done).min(480) as u32)
                    .map_err(e)?;
                if d.is_empty() {
                    // Shorter than we thought (truncated meanwhile).
                    f.size = pos + done as u64;
                    return Ok((f.size.saturating_sub(off)) as usize);
                }
                dst[done..done + d.len()].copy_from_slice(&d);
                done += d.len();
            }
            pos += n as u64;
        }
        Ok((end.saturating_sub(off)) as usize)
    }

    /// Maps the descriptor's read buffer at `at` (or learns that the server has none).
    fn map_read_buffer(f: &mut Fd, at: u64) -> Result<()> {
        let span = read_buffer::PAGES * PAGE;
        match file::Client::new(f.cap).read_buffer(at, [at, span]) {
            Ok(_) => {}
            Err(RpcError::App(_)) => {
                f.rbuf = ReadBuf::Refused;
                return Ok(());
            }
            Err(_) => return Err(FsError::Gone),
        }
        // Every page must really be here before we read from it.
        if (0..read_buffer::PAGES).any(|i| sys::translate(at + i * PAGE).is_err()) {
            return Err(FsError::Io);
        }
        f.rbuf = ReadBuf::Mapped;
        Ok(())
    }

    /// Reads the file's bytes from `pos` into `dst` (at most the buffer's 16 KiB) through the
    /// read buffer mapped at `rbuf`: from what it holds if that covers them, else after one
    /// `read_to_buffer`. Fewer than asked only at the end of the file.
    fn read_buffered(f: &mut Fd, rbuf: u64, pos: u64, dst: &mut [u8]) -> Result<usize> {
        // SAFETY: the PFS mapped the buffer's pages at `rbuf` for this descriptor (checked in
        // `map_read_buffer`); they stay until the file is closed.
        let header = unsafe { read_buffer::Header::at(rbuf) };
        let c = file::Client::new(f.cap);
        let mut n = dst.len();
        // A task sharing the open file (a forked child) may refill the buffer between our call
        // and our copy: then ask again, a few times, before giving up.
        for attempt in 0..=4 {
            if let Some((at, seq)) = header.find(pos, n as u64) {
                // SAFETY: `find` checked `at + n` is within the buffer's data, which is mapped
                // readable (above) and does not overlap `dst` (ours).
                unsafe { copy_bytes((rbuf + at as u64) as *const u8, dst.as_mut_ptr(), n) };
                if header.unchanged(seq) {
                    return Ok(n);
                }
            }
            if attempt == 4 {
                break;
            }
            // A read that starts where the buffer's data ends is sequential: it fills the whole
            // buffer (read-ahead); any other only what it needs.
            let ask = if header.follows(pos) {
                read_buffer::DATA
            } else {
                n
            };
            let got = c.read_to_buffer(pos, ask as u32).map_err(e)? as usize;
            n = n.min(got);
            if n == 0 {
                return Ok(0);
            }
        }
        Err(FsError::Io)
    }

    pub fn read(&mut self, fd: usize, buf: &mut [u8]) -> Result<usize> {
        // The fast path of `pread`, with the offset moved on through the same descriptor.
        // Every other way out is a tail call, so the fast path saves no registers.
        let windows = self.windows;
        if let Some(Some(f)) = self.fds.get_mut(fd) {
            let off = f.off;
            match copy_mapped(f, windows, fd, buf, off) {
                Mapped::Copied => {
                    f.off = off + buf.len() as u64;
                    return Ok(buf.len());
                }
                Mapped::Lost => return self.read_lost(fd, buf),
                Mapped::No => {}
            }
        }
        self.read_slow(fd, buf)
    }

    /// [`Self::read`] whose copy found its page gone ([`Self::pread_lost`]).
    #[cold]
    #[inline(never)]
    fn read_lost(&mut self, fd: usize, buf: &mut [u8]) -> Result<usize> {
        let off = self.fd(fd)?.off;
        let n = self.pread_lost(fd, buf, off)?;
        self.fd(fd)?.off += n as u64;
        Ok(n)
    }

    #[inline(never)]
    fn read_slow(&mut self, fd: usize, buf: &mut [u8]) -> Result<usize> {
        let off = self.fd(fd)?.off;
        let n = self.on_file(fd, |s| s.pread_once(fd, buf, off))?;
        self.fd(fd)?.off += n as u64;
        Ok(n)
    }

    pub fn pwrite(&mut self, fd: usize, buf: &[u8], off: u64) -> Result<usize> {
        // `pwrite_once` marks the descriptor unsynced; the redo log is looked at only when on.
        let n = self.on_file(fd, |s| s.pwrite_once(fd, buf, off))?;
        if self.redo_on {
            self.note_write(fd, &buf[..n], off);
        }
        Ok(n)
    }

    fn pwrite_once(&mut self, fd: usize, buf: &[u8], off: u64) -> Result<usize> {
        let windows = self.windows;
        let f = self.fd(fd)?;
        if f.flags & O_WRITE == 0 {
            return Err(FsError::BadFile);
        }
        let c = file::Client::new(f.cap);
        let mut done = 0;
        if buf.len() > SMALL_WRITE {
            // Through the PFS's write buffer, mapped here: copy in, one call per 16 KiB.
            let at = windows + WBUFS + fd as u64 * WBUF_SIZE;
            if !f.wbuf {
                c.write_buffer(at, [at, WBUF_SIZE]).map_err(e)?;
                // Every page must really be here before we write to it.
                if (0..WBUF_SIZE / PAGE).any(|i| sys::translate(at + i * PAGE).is_err()) {
                    return Err(FsError::Io);
                }
                f.wbuf = true;
            }
            while done < buf.len() {
                let chunk = &buf[done..(done + WBUF_SIZE as usize).min(buf.len())];
                // The PFS takes the buffer back if it dies (its pages go): then there is nothing
                // to write into, and the file is gone anyway.
                if sys::translate(at).is_err() {
                    return Err(FsError::Gone);
                }
                // SAFETY: the PFS mapped WBUF_SIZE writable bytes at `at` for this descriptor
                // (checked above); only this descriptor's writes use them.
                unsafe { copy_bytes(chunk.as_ptr(), at as *mut u8, chunk.len()) };
                let n = c
                    .write_from_buffer(off + done as u64, chunk.len() as u32)
                    .map_err(e)? as usize;
                if n == 0 {
                    break;
                }
                done += n;
            }
        }
        while done < buf.len() {
            let chunk = &buf[done..(done + SMALL_WRITE).min(buf.len())];
            let n = c.write(off + done as u64, chunk).map_err(e)? as usize;
            if n == 0 {
                break;
            }
            done += n;
        }
        let f = self.fd(fd)?;
        f.size = f.size.max(off + done as u64);
        f.unsynced = true;
        Ok(done)
    }

    pub fn write(&mut self, fd: usize, buf: &[u8]) -> Result<usize> {
        let off = self.fd(fd)?.off;
        let n = self.pwrite(fd, buf, off)?;
        self.fd(fd)?.off += n as u64;
        Ok(n)
    }

    /// whence: 0 set, 1 current, 2 end.
    pub fn lseek(&mut self, fd: usize, off: i64, whence: u32) -> Result<u64> {
        let end = if whence == 2 { self.fstat(fd)?.size } else { 0 };
        let f = self.fd(fd)?;
        let base = match whence {
            0 => 0,
            1 => f.off,
            2 => end,
            _ => return Err(FsError::Invalid),
        };
        let n = base.checked_add_signed(off).ok_or(FsError::Invalid)?;
        f.off = n;
        Ok(n)
    }

    /// The file's size as its open (or the last call that learnt it) reported: no call to
    /// the file system, where [`Self::fstat`] asks it again.
    pub fn known_size(&mut self, fd: usize) -> Result<u64> {
        Ok(self.fd(fd)?.size)
    }

    pub fn fstat(&mut self, fd: usize) -> Result<Stat> {
        let s = self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap).stat().map_err(e)
        })?;
        let f = self.fd(fd)?;
        f.size = s.size;
        Ok(Stat {
            ino: s.ino,
            mode: s.mode,
            nlink: s.nlink,
            uid: s.uid,
            gid: s.gid,
            size: s.size,
            blocks: s.blocks,
            rdev: (s.rdev_major, s.rdev_minor),
            atime: (s.atime, s.atime_ns),
            mtime: (s.mtime, s.mtime_ns),
            ctime: (s.ctime, s.ctime_ns),
            generation: s.generation,
            mount: 0,
        })
    }

    /// fchmod.
    pub fn fchmod(&mut self, fd: usize, mode: u32) -> Result<()> {
        self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap)
                .setattr(mode & 0o7777, 0, 0, 0, 0, SetAttrFields::MODE)
                .map_err(e)
        })
    }
    /// fchown: `None` leaves an id alone.
    pub fn fchown(&mut self, fd: usize, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let (which, u, g) = owner(uid, gid);
        self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap)
                .setattr(0, u, g, 0, 0, which)
                .map_err(e)
        })
    }
    /// futimens.
    pub fn futimens(&mut self, fd: usize, atime: TimeSet, mtime: TimeSet) -> Result<()> {
        let (which, a, m) = times(atime, mtime);
        self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap)
                .setattr(0, 0, 0, a, m, which)
                .map_err(e)
        })
    }
    /// fstatfs.
    pub fn fstatfs(&mut self, fd: usize) -> Result<StatFs> {
        let s = self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap).statfs().map_err(e)
        })?;
        Ok(StatFs {
            bsize: s.bsize,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namelen: s.namelen,
        })
    }

    pub fn ftruncate(&mut self, fd: usize, size: u64) -> Result<()> {
        self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap).truncate(size).map_err(e)
        })?;
        let f = self.fd(fd)?;
        // The PFS took back our mappings of this file.
        f.mapped.clear();
        f.size = size;
        self.note_truncate(fd, size);
        Ok(())
    }

    /// Durable when it returns Ok: the PFS wrote back and flushed the device. `Io` once if
    /// the file's PFS restarted while it held writes of ours not yet fsync'd that the redo log
    /// could not hold (they may be lost).
    pub fn fsync(&mut self, fd: usize) -> Result<()> {
        self.on_file(fd, |me| {
            let f = me.fd(fd)?;
            file::Client::new(f.cap).fsync().map_err(e)
        })?;
        self.note_durable(fd);
        let f = self.fd(fd)?;
        f.unsynced = false;
        if core::mem::take(&mut f.lost) {
            return Err(FsError::Io);
        }
        Ok(())
    }

    pub fn stat(&mut self, path: &str) -> Result<Stat> {
        self.stat_path(path, true)
    }
    pub fn lstat(&mut self, path: &str) -> Result<Stat> {
        self.stat_path(path, false)
    }
    fn stat_path(&mut self, path: &str, follow: bool) -> Result<Stat> {
        if self.protocol == Protocol::Direct {
            if let Some(st) = self.stat_direct(path.as_bytes(), follow) {
                return st;
            }
        }
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        let s = self.vfs_call(|v| v.stat(p.bytes(), follow)).map_err(e)?;
        Ok(Stat {
            ino: s.ino,
            mode: s.mode,
            nlink: s.nlink,
            uid: s.uid,
            gid: s.gid,
            size: s.size,
            blocks: s.blocks,
            rdev: (s.rdev_major, s.rdev_minor),
            atime: (s.atime, s.atime_ns),
            mtime: (s.mtime, s.mtime_ns),
            ctime: (s.ctime, s.ctime_ns),
            generation: s.generation,
            mount: s.mount,
        })
    }
    pub fn mkdir(&mut self, path: &str, mode: u32) -> Result<()> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        self.vfs_call(|v| v.mkdir(p.bytes(), mode)).map_err(e)
    }
    pub fn rmdir(&mut self, path: &str) -> Result<()> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        self.vfs_call(|v| v.rmdir(p.bytes())).map_err(e)
    }
    pub fn unlink(&mut self, path: &str) -> Result<()> {
        self.forget_name(path.as_bytes());
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        self.vfs_call(|v| v.unlink(p.bytes())).map_err(e)
    }
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.rename_flags(from, to, RenameFlags::from_bits_retain(0))
    }
    /// renameat2: NOREPLACE fails with `Exists` when `to` exists; EXCHANGE is refused
    /// (`Invalid`).
    pub fn rename_flags(&mut self, from: &str, to: &str, flags: RenameFlags) -> Result<()> {
        self.forget_name(from.as_bytes());
        let a = self.path(0, from.as_bytes(), PATH_FIELD_SHORT)?;
        let b = self.path(1, to.as_bytes(), PATH_FIELD_SHORT)?;
        self.vfs_call(|v| v.rename(a.bytes(), b.bytes(), flags))
            .map_err(e)
    }
    /// A hard link `to` to `from` (a final symlink in `from` is not followed).
    pub fn link(&mut self, from: &str, to: &str) -> Result<()> {
        let a = self.path(0, from.as_bytes(), PATH_FIELD_SHORT)?;
        let b = self.path(1, to.as_bytes(), PATH_FIELD_SHORT)?;
        self.vfs_call(|v| v.link(a.bytes(), b.bytes())).map_err(e)
    }
    pub fn symlink(&mut self, target: &str, path: &str) -> Result<()> {
        let a = self.path(0, target.as_bytes(), PATH_FIELD_SHORT)?;
        let b = self.path(1, path.as_bytes(), PATH_FIELD_SHORT)?;
        self.vfs_call(|v| v.symlink(a.bytes(), b.bytes()))
            .map_err(e)
    }
    pub fn readlink(&mut self, path: &str) -> Result<Vec<u8>> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        Ok(self
            .vfs_call(|v| v.readlink(p.bytes()))
            .map_err(e)?
            .as_slice()
            .to_vec())
    }
    pub fn chmod(&mut self, path: &str, mode: u32) -> Result<()> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        self.vfs_call(|v| v.chmod(p.bytes(), mode)).map_err(e)
    }
    #[allow(clippy::too_many_arguments)]
    fn setattr_path(
        &mut self,
        path: &str,
        follow: bool,
        (which, a, b): (SetAttrFields, u32, u32),
        is_times: bool,
    ) -> Result<()> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        let (uid, gid, at, mt) = if is_times { (0, 0, a, b) } else { (a, b, 0, 0) };
        self.vfs_call(|v| v.setattr(p.bytes(), follow, 0, uid, gid, at, mt, which))
            .map_err(e)
    }
    /// chown (`follow`) or lchown: `None` leaves an id alone.
    pub fn chown(
        &mut self,
        path: &str,
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
    ) -> Result<()> {
        self.setattr_path(path, follow, owner(uid, gid), false)
    }
    /// utimensat: `follow` unless AT_SYMLINK_NOFOLLOW.
    pub fn utimens(
        &mut self,
        path: &str,
        atime: TimeSet,
        mtime: TimeSet,
        follow: bool,
    ) -> Result<()> {
        self.setattr_path(path, follow, times(atime, mtime), true)
    }
    pub fn statfs(&mut self, path: &str) -> Result<StatFs> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        let s = self.vfs_call(|v| v.statfs(p.bytes())).map_err(e)?;
        Ok(StatFs {
            bsize: s.bsize,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namelen: s.namelen,
        })
    }
    pub fn truncate(&mut self, path: &str, size: u64) -> Result<()> {
        let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
        self.vfs_call(|v| v.truncate(p.bytes(), size)).map_err(e)
    }
    pub fn sync(&mut self) -> Result<()> {
        self.vfs_call(|v| v.sync()).map_err(e)?;
        self.note_synced();
        Ok(())
    }
    /// Option 3 (issue 17): `stat` at the PFS owning the path's longest mounted prefix, one
    /// call instead of the VFS's walk (a call per name) and `getattr`. None = ask the VFS: a
    /// path with `..`, a lost mount, or the PFS answering Xdev (the walk leaves it).
    fn stat_direct(&mut self, path: &[u8], follow: bool) -> Option<Result<Stat>> {
        let (m, rest) = self.direct_mount(path)?;
        match pfs::Client::new(self.mounts[m].session).stat_path(&path[rest..], follow) {
            Ok(s) => Some(Ok(Stat {
                ino: s.ino,
                mode: s.mode,
                nlink: s.nlink,
                uid: s.uid,
                gid: s.gid,
                size: s.size,
                blocks: s.blocks,
                rdev: (s.rdev_major, s.rdev_minor),
                atime: (s.atime, s.atime_ns),
                mtime: (s.mtime, s.mtime_ns),
                ctime: (s.ctime, s.ctime_ns),
                generation: s.generation,
                mount: m as u32,
            })),
            Err(RpcError::App(FsError::Xdev)) => None,
            Err(RpcError::App(x)) => Some(Err(x)),
            Err(_) => {
                // The PFS is gone: the VFS's table changed; refetch it, and let the VFS answer.
                let _ = self.refresh_mounts();
                None
            }
        }
    }

    /// Option 3's choice of file system for `path` (as `open_direct` makes it): the index of
    /// the mount with the longest prefix of the path and where the rest of the path starts.
    /// None = ask the VFS.
    fn direct_mount(&mut self, path: &[u8]) -> Option<(usize, usize)> {
        if path.first() != Some(&b'/')
            || path.len() > PATH_FIELD
            || path.split(|&c| c == b'/').any(|c| c == b"..")
        {
            return None;
        }
        if self.mounts.is_empty() && self.refresh_mounts().is_err() {
            return None;
        }
        // With a mount lost, only the VFS knows what its prefix shadows.
        if self.mounts.iter().any(|m| m.session == 0) {
            return None;
        }
        let trimmed = |prefix: &[u8]| prefix.len() - prefix.ends_with(b"/") as usize;
        let under = |prefix: &[u8]| {
            let p = &prefix[..trimmed(prefix)];
            path.starts_with(p) && (path.len() == p.len() || path[p.len()] == b'/')
        };
        let m = (0..self.mounts.len())
            .filter(|&i| !self.mounts[i].prefix.is_empty() && under(&self.mounts[i].prefix))
            .max_by_key(|&i| self.mounts[i].prefix.len())?;
        Some((m, trimmed(&self.mounts[m].prefix)))
    }

    /// Every entry of a directory (`.` and `..` included): as many per call as one message
    /// holds (`vfs.readdir_many`), or one per call from a file system without it.
    pub fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
            let r = match self.vfs_call(|v| v.readdir_many(p.bytes(), cookie)) {
                Ok(r) => r,
                Err(RpcError::App(FsError::Invalid)) if cookie == 0 => {
                    return self.readdir_one_by_one(path)
                }
                Err(x) => return Err(e(x)),
            };
            for d in dirents::entries(r.packed.as_slice()) {
                let d = d.map_err(|_| FsError::Corrupt)?;
                out.push(DirEntry {
                    ino: d.ino,
                    kind: EntryKind::from_repr(d.kind).ok_or(FsError::Corrupt)?,
                    name: d.name.to_vec(),
                });
            }
            if r.next == 0 {
                return Ok(out);
            }
            // Any entry fits in a reply: one with none that goes on would never end.
            if r.packed.as_slice().is_empty() {
                return Err(FsError::Corrupt);
            }
            cookie = r.next;
        }
    }

    /// `readdir` one entry per call (`vfs.readdir`).
    fn readdir_one_by_one(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let p = self.path(0, path.as_bytes(), PATH_FIELD)?;
            let r = self.vfs_call(|v| v.readdir(p.bytes(), cookie)).map_err(e)?;
            if r.next == 0 {
                return Ok(out);
            }
            out.push(DirEntry {
                ino: r.ino,
                kind: r.kind,
                name: r.name.as_slice().to_vec(),
            });
            cookie = r.next;
        }
    }
    /// Fault injection (admin badge): kill the PFS behind mount `i`.
    pub fn crash_mount(&mut self, i: u32) -> Result<()> {
        self.vfs_call(|v| v.crash(i)).map_err(e)
    }
}

/// What [`copy_mapped`] did.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mapped {
    /// The request was copied out of a page mapped in our window.
    Copied,
    /// It was, but the page vanished meanwhile (see `lost_pages`): the copy is meaningless.
    Lost,
    /// Not the fast case: nothing was copied.
    No,
}

/// The fast case of a read of descriptor `fd` (`f`) at `off`: the whole request inside one page
/// already mapped in our window, inside the known size. O_NOMAP files never have a page marked
/// mapped, nor do files not open for reading (only the slow path maps pages, after checking
/// O_READ), so neither flag is looked at here.
#[inline(always)]
fn copy_mapped(f: &Fd, windows: u64, fd: usize, buf: &mut [u8], off: u64) -> Mapped {
    let len = buf.len() as u64;
    let page = off / PAGE;
    // `off` is inside the window (below 2^26) and `len` at most a page: `off + len` cannot
    // overflow once the first two tests passed.
    if page < WINDOW_SIZE / PAGE
        && off % PAGE + len <= PAGE
        && off + len <= f.size
        && f.mapped
            .get((page / 64) as usize)
            .is_some_and(|w| w & (1 << (page % 64)) != 0)
    {
        let at = windows + fd as u64 * WINDOW_SIZE + off;
        let lost = lost_pages();
        // SAFETY: the page is mapped read-only at this address in our window (the PFS granted
        // it earlier, and a fault if it took it back since is resolved with a scratch page: see
        // `lost_pages`); the range stays within the page (checked above).
        unsafe { copy_bytes(at as *const u8, buf.as_mut_ptr(), buf.len()) };
        if lost_pages() == lost {
            Mapped::Copied
        } else {
            Mapped::Lost
        }
    } else {
        Mapped::No
    }
}

/// How many times a page lent to this task (a file window's, a read or write buffer's) was
/// found gone: the region manager resolves such a fault with a scratch page (issue 16), so a
/// copy from one finishes with meaningless bytes and a changed count. Always 0 on the host.
#[inline(always)]
fn lost_pages() -> u64 {
    #[cfg(target_os = "none")]
    return sawmill_rm::lent_faults();
    #[cfg(not(target_os = "none"))]
    0
}

/// Copies `n` bytes from `src` to `dst` (not overlapping): eight at a time with `rep movsq`,
/// then the rest with `rep movsb`, without the general `memcpy`'s alignment prologue (a 4 KiB
/// record is 512 iterations and a few instructions).
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, and the two must not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract; the direction flag is clear (the ABI's default, and the
    // library's entry stub clears it).
    unsafe {
        core::arch::asm!(
            "rep movsq",
            "mov rcx, {rest}",
            "rep movsb",
            rest = in(reg) n % 8,
            inout("rcx") n / 8 => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack, preserves_flags)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above.
    unsafe {
        core::ptr::copy_nonoverlapping(src, dst, n)
    };
}

/// FNV-1a, 64 bit (the host tool writes these into `/CHECKSUMS`).
pub fn fnv64(b: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &c in b {
        h ^= c as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
