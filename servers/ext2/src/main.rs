//! The ext2 physical file system (PFS) server.
//!
//! Runs the fs/ext2 engine over [`cache::Cache`], a write-back page cache in a dataspace of the
//! memory server (`mem`, which the manifest must give it; charged to this PFS) that the block
//! driver DMAs into directly. Settings: the `config` table (`sawmill_ext2_api::Config`: the
//! driver endpoint it uses, the cache size, the shadow-page limit (see [`MAX_SHADOWS`]), whether
//! cache pages are mapped executable so programs can run straight from files, and a name for
//! messages). The first endpoint it provides is its manifest endpoint, where the VFS (at boot
//! and after a restart of its own) asks for a capability to the endpoint the PFS serves
//! (`reconnect`; `sawmill_interfaces::pfs_manifest`). That one is made by root for this
//! incarnation (`pfs_manifest::own_endpoint`) and every capability the PFS hands out is minted
//! from it, so all of them fail at once when the PFS dies (root destroys it: nobody hangs).
//!
//! Badges on the served endpoint: [`VFS_BADGE`] (the VFS, trusted: it did the access checks),
//! `SESSION_BASE + i` (a client session of protocol option 3, with the credentials the VFS gave:
//! the PFS checks access itself), `FILE_BASE + i` (open file `i`: the badge indexes the table
//! directly, no handle lookup); with [`FILE_RO`] set, the same open file through a capability that
//! may only read (from `dataspace.read_only`).
//!
//! An open file's endpoint also answers the dataspace protocol (interfaces/dataspace.idl, opcodes
//! 0xd01..; the loop dispatches by label): the open file *is* a read-only dataspace whose `map`
//! hands out the cached pages themselves, so a client's region manager can attach the file.
#![no_std]
#![no_main]

extern crate alloc;

mod cache;

use alloc::rc::Rc;
use alloc::vec::Vec;
use cache::{Cache, Dev, PAGE};
use core::cell::RefCell;
use sawmill_abi::{map, rights, MapItem};
use sawmill_ext2::{DevError, Error as E2, FileKind, Fs, SetAttr, Stat, StatMore};
use sawmill_ext2_api::{read_buffer, share};
use sawmill_interfaces::file::{self, MapOut, StatOut};
use sawmill_interfaces::pfs::VFS_BADGE;
use sawmill_interfaces::pfs::{self, LookupOut, OpenOut, OpenPathOut, ReaddirOut};
use sawmill_interfaces::pfs::{GetattrOut as Attrs, StatfsOut};
use sawmill_interfaces::pfs::{OpenInodeOut, ReaddirManyOut, StatPathOut};
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, IpcResult, Map, Next, Reply};
use sawmill_interfaces::{
    dataspace, DsError, DsFlags, EntryKind, FsError, MapFlags, OpenFlags, RenameFlags,
    SetAttrFields,
};
use sawmill_path::{dirents, Attr, Cred, Error as WalkError, Walked, Walker};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

/// Mount points inside this file system the VFS may tell us about (`cover`).
const MAX_COVERED: usize = 64;
/// The `readdir` cookie after a directory's last entry: a position past any directory's end.
const READDIR_END: u64 = u64::MAX;
const SESSION_BASE: u64 = 1 << 20;
/// The badge of our notice capability: the kernel's NO_SENDERS notices arrive with it (see
/// [`share`]).
const NOTICE_BADGE: u64 = 2;
const BADGES: share::Badges = share::Badges {
    vfs: VFS_BADGE,
    session_base: SESSION_BASE,
};
const FILE_BASE: u64 = 1 << 32;
/// Badge bit of a file capability that may only read (`dataspace.read_only`).
const FILE_RO: u64 = 1 << 62;
/// How many shadow pages ([`Shadow`]) a PFS keeps at most unless `shadow_pages=N` says
/// otherwise; past that the oldest is revoked and reused (its client faults it in again).
const MAX_SHADOWS: usize = 128;

fn err(e: E2) -> FsError {
    match e {
        E2::Io => FsError::Io,
        E2::NotFound => FsError::NotFound,
        E2::NotDir => FsError::NotDir,
        E2::IsDir => FsError::IsDir,
        E2::Exists => FsError::Exists,
        E2::NotEmpty => FsError::NotEmpty,
        E2::NoSpace => FsError::NoSpace,
        E2::NameTooLong => FsError::NameTooLong,
        E2::TooManyLinks => FsError::TooManyLinks,
        E2::FileTooLarge => FsError::TooLarge,
        E2::Loop => FsError::Loop,
        E2::ReadOnly => FsError::ReadOnly,
        E2::Invalid(_) => FsError::Invalid,
        E2::Corrupt(_) => FsError::Corrupt,
        E2::Unsupported(_) => FsError::Invalid,
    }
}

/// Every attribute of an inode as the protocol carries it (`getattr`, `file.stat`, the VFS's
/// `stat`). Nanoseconds come from a large inode's extra fields, 0 without them (as Linux).
fn attrs(st: &Stat, more: StatMore) -> Attrs {
    Attrs {
        mode: st.mode as u32,
        nlink: st.nlink as u32,
        uid: st.uid,
        gid: st.gid,
        size: st.size,
        blocks: st.sectors,
        rdev_major: st.rdev.0,
        rdev_minor: st.rdev.1,
        atime: st.atime,
        mtime: st.mtime,
        ctime: st.ctime,
        atime_ns: more.nsec[0],
        mtime_ns: more.nsec[1],
        ctime_ns: more.nsec[2],
        generation: more.generation,
    }
}

fn statfs_out(fs: &Fs<Dev>) -> StatfsOut {
    let s = fs.statfs();
    StatfsOut {
        bsize: s.block_size,
        blocks: s.blocks,
        bfree: s.free_blocks,
        bavail: s.avail_blocks,
        files: s.inodes,
        ffree: s.free_inodes,
        namelen: s.name_max,
    }
}

/// The engine's change for `which` (times set to now at `now`).
fn set_attr_of(
    now: u32,
    mode: u32,
    uid: u32,
    gid: u32,
    atime: u32,
    mtime: u32,
    which: SetAttrFields,
) -> SetAttr {
    let time = |to_now: SetAttrFields, given: SetAttrFields, t: u32| {
        if which.contains(to_now) {
            Some(now)
        } else {
            which.contains(given).then_some(t)
        }
    };
    SetAttr {
        perm: which
            .contains(SetAttrFields::MODE)
            .then_some(mode as u16 & 0o7777),
        uid: which.contains(SetAttrFields::UID).then_some(uid),
        gid: which.contains(SetAttrFields::GID).then_some(gid),
        atime: time(SetAttrFields::ATIME_NOW, SetAttrFields::ATIME, atime),
        mtime: time(SetAttrFields::MTIME_NOW, SetAttrFields::MTIME, mtime),
    }
}

/// What the permission check (`sawmill_path::may`) needs of an inode.
fn attr(st: &Stat) -> Attr {
    Attr {
        mode: st.mode as u32,
        uid: st.uid,
        gid: st.gid,
    }
}

/// Whether a caller with `cred` may access an inode with `st` for `want` (`MAY_*` bits).
fn may(st: &Stat, cred: (u32, u32), want: u32) -> bool {
    sawmill_path::may(
        attr(st),
        Cred {
            uid: cred.0,
            gid: cred.1,
        },
        want,
    )
}

/// The option-3 walk's view of this file system (`sawmill_path::Tree`): nodes are inodes with
/// their attributes, each read once for both the permission check and the step into it. The
/// walk may not leave the file system: `..` at its root, an absolute symlink and a place
/// another file system is mounted on (`covered`) answer `Xdev`, and the VFS goes on.
struct Inodes<'a> {
    fs: &'a mut Fs<Dev>,
    covered: &'a [Vec<u8>],
}

impl sawmill_path::Tree for Inodes<'_> {
    type Node = (u32, Stat);
    type Error = FsError;
    fn error(e: WalkError) -> FsError {
        e.into()
    }
    fn attr(&self, node: &(u32, Stat)) -> Attr {
        attr(&node.1)
    }
    fn lookup(
        &mut self,
        dir: &(u32, Stat),
        name: &[u8],
        at: &[u8],
    ) -> Result<Option<(u32, Stat)>, FsError> {
        // Another file system is mounted here: only the VFS may go on.
        if !self.covered.is_empty() && self.covered.iter().any(|c| c[..] == *at) {
            return Err(FsError::Xdev);
        }
        match self.fs.lookup(dir.0, name) {
            Ok(ino) => Ok(Some((ino, self.fs.stat(ino).map_err(err)?))),
            Err(E2::NotFound) => Ok(None),
            Err(e) => Err(err(e)),
        }
    }
    fn read_link(&mut self, link: &(u32, Stat), target: &mut Vec<u8>) -> Result<(), FsError> {
        target.extend_from_slice(&self.fs.readlink(link.0).map_err(err)?);
        Ok(())
    }
    fn above_root(&mut self) -> Result<(), FsError> {
        Err(FsError::Xdev)
    }
    fn absolute_link(&mut self) -> Result<(), FsError> {
        Err(FsError::Xdev)
    }
    fn track_path(&self) -> bool {
        !self.covered.is_empty()
    }
}

struct Open {
    ino: u32,
    flags: OpenFlags,
    /// Cache slots this open file has mapped into its client (pinned while open).
    mapped: Vec<usize>,
    /// Our copy of the read-only capability handed out by `dataspace.read_only` (0: none).
    ro_cap: u64,
    /// The write buffer shared with the client (`write_buffer`), if it asked for one.
    wbuf: Option<SharedBuf<WBUF_PAGES>>,
    /// The read buffer shared with the client (`read_buffer`), if it asked for one.
    rbuf: Option<SharedBuf<RBUF_PAGES>>,
}

/// Size of an open file's write buffer, in pages.
const WBUF_PAGES: usize = 4;
const WBUF: usize = WBUF_PAGES * PAGE;
/// An open file's read buffer: its data, then the header page (`sawmill_ext2_api::read_buffer`).
const RBUF_PAGES: usize = read_buffer::PAGES as usize;

/// `PAGES` page-aligned pages of our memory that clients map (writable: the write buffer;
/// read-only: the read buffer): a client can at most change the bytes, never take the pages
/// away (its mapping is derived from ours), so using them is always safe for us.
struct SharedBuf<const PAGES: usize>(core::ptr::NonNull<u8>);

impl<const PAGES: usize> SharedBuf<PAGES> {
    fn layout() -> core::alloc::Layout {
        // A constant, valid size and alignment.
        core::alloc::Layout::from_size_align(PAGES * PAGE, PAGE).unwrap()
    }
    fn new() -> Option<Self> {
        // SAFETY: non-zero size.
        let p = unsafe { alloc::alloc::alloc_zeroed(Self::layout()) };
        core::ptr::NonNull::new(p).map(SharedBuf)
    }
    fn addr(&self) -> u64 {
        self.0.as_ptr() as u64
    }
}

impl<const PAGES: usize> Drop for SharedBuf<PAGES> {
    fn drop(&mut self) {
        // The clients' mappings go first: nobody may see the pages once they are reused.
        let _ = sys::unmap(self.addr(), PAGES as u64, 0);
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { alloc::alloc::dealloc(self.0.as_ptr(), Self::layout()) };
    }
}

impl SharedBuf<RBUF_PAGES> {
    fn header(&self) -> &read_buffer::Header {
        // SAFETY: the buffer is RBUF_PAGES pages of ours, alive as long as `self`.
        unsafe { read_buffer::Header::at(self.addr()) }
    }
}

/// A private page holding file page `page` of `ino` (see [`MAX_SHADOWS`]); kept up to date by
/// writes through the file interface, so mappings of it stay coherent.
struct Shadow {
    ino: u32,
    page: u64,
    addr: u64,
}

struct Pfs {
    fs: Fs<Dev>,
    cache: Rc<RefCell<Cache>>,
    ep: u64,
    /// Our capability (SEND, [`NOTICE_BADGE`]) to `ep` that NO_SENDERS notices are sent with.
    notice: u64,
    files: Vec<Option<Open>>,
    free_files: Vec<usize>,
    /// Sessions and what each party holds (see [`share`]).
    shares: share::Shares,
    free_slots: Vec<u64>,
    /// Where other file systems are mounted inside this one (paths from its root, by the VFS,
    /// as the walk's canonical paths: names joined by `/`).
    covered: Vec<Vec<u8>>,
    /// The option-3 path walker; it keeps its buffers, so a walk allocates nothing.
    walker: Walker<(u32, Stat)>,
    shadows: Vec<Shadow>,
    max_shadows: usize,
    /// Open files with a read buffer: while 0, writes skip looking for them.
    read_buffers: usize,
    /// The device pages of the file last read (`file_pages`), kept until its bytes change.
    file_pages: Option<(u32, Option<(u64, u64)>)>,
    /// What the last mapped files' page faults found out (`mapped_page`), most recent last.
    page_memos: Vec<PageMemo>,
    /// Config `trace_reads`: a line per read of file data that went to the disk.
    trace_reads: bool,
    name: &'static str,
    /// The wall clock that stamps changes (read with `rdtsc`, no system call).
    clock: sawmill_rt::clock::Wall,
    /// The receive slot, and per reply: the cache pages `file.map` hands out, the session
    /// capability `session` handed over (our copy goes once the reply is out).
    after: AfterReply,
}

/// A mapped file's size and where its pages lie on the device, as learnt by the faults in it:
/// every process running a program faults on the same pages of it, and looking them up in the
/// block map each time (the inode, the indirect blocks) was a third of a fault's cost in this
/// server. Valid while nothing was written (`Cache::writes` is still `writes`).
struct PageMemo {
    ino: u32,
    writes: u64,
    size: u64,
    /// Per file page, its device page + 1 (0: not looked up yet, or not mappable from the
    /// cache: see `dev_page`).
    dev: Vec<u32>,
    /// The pages some fault asked for itself (1 bit per page): the ones programs use, which
    /// fault-around maps (`map_around`).
    used: Vec<u64>,
    /// Per file page, the cache slot it was last mapped from (`u32::MAX`: none): checked
    /// first, it spares the cache's hash lookup on most faults (`Cache::lookup_at`).
    slot: Vec<u32>,
}

/// Files whose pages are remembered (`PageMemo`): a program, its library, a mapped data file.
const PAGE_MEMOS: usize = 4;
/// Files larger than this (in pages) are not remembered: 16 MiB, 16 KiB of memo.
const PAGE_MEMO_MAX: u64 = 4096;

const SHADOW_LAYOUT: core::alloc::Layout = match core::alloc::Layout::from_size_align(PAGE, PAGE) {
    Ok(l) => l,
    Err(_) => panic!(),
};

impl Pfs {
    /// `setattr` for a caller with `cred` (None: trusted), by path or by open file.
    #[allow(clippy::too_many_arguments)]
    fn do_setattr(
        &mut self,
        ino: u32,
        cred: Option<(u32, u32)>,
        mode: u32,
        uid: u32,
        gid: u32,
        atime: u32,
        mtime: u32,
        which: SetAttrFields,
    ) -> Result<(), FsError> {
        let st = self.fs.stat(ino).map_err(err)?;
        let cred = cred.map(|(uid, gid)| Cred { uid, gid });
        sawmill_interfaces::may_setattr(attr(&st), cred, which, uid, gid)?;
        let a = set_attr_of(
            self.clock.now_secs() as u32,
            mode,
            uid,
            gid,
            atime,
            mtime,
            which,
        );
        self.fs.set_attr(ino, &a).map_err(err)
    }

    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// The caller's credentials: None for the VFS (trusted), Some for a session.
    fn creds(&self, badge: u64) -> Result<Option<(u32, u32)>, FsError> {
        if badge == VFS_BADGE {
            return Ok(None);
        }
        if (SESSION_BASE..FILE_BASE).contains(&badge) {
            if let Some(c) = self.shares.cred((badge - SESSION_BASE) as usize) {
                return Ok(Some(c));
            }
        }
        Err(FsError::Denied)
    }

    fn check(&mut self, badge: u64, ino: u32, want: u32) -> Result<(), FsError> {
        if let Some((uid, gid)) = self.creds(badge)? {
            let st = self.fs.stat(ino).map_err(err)?;
            if !may(&st, (uid, gid), want) {
                return Err(FsError::Denied);
            }
        }
        Ok(())
    }

    /// Writes `data` at `off` into the file of `badge` (a writable open file).
    fn write_data(&mut self, badge: u64, off: u64, data: &[u8]) -> Result<usize, FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::WRITE) || badge & FILE_RO != 0 {
            return Err(FsError::BadFile);
        }
        let ino = f.ino;
        self.forget_reads(ino);
        let n = self.fs.write(ino, off, data).map_err(err)?;
        if !self.shadows.is_empty() {
            self.refresh_shadows(ino, off, n as u64);
        }
        Ok(n)
    }

    fn file(&mut self, badge: u64) -> Result<&mut Open, FsError> {
        let i = (badge & !FILE_RO).wrapping_sub(FILE_BASE) as usize;
        self.files
            .get_mut(i)
            .and_then(|f| f.as_mut())
            .ok_or(FsError::BadFile)
    }

    fn do_open(&mut self, by: u64, ino: u32, flags: OpenFlags) -> Result<OpenOut, FsError> {
        let st = self.fs.stat(ino).map_err(err)?;
        self.do_open_stat(by, ino, flags, st)
    }

    /// `do_open` with the inode's attributes already read; the file is charged to `by`.
    fn do_open_stat(
        &mut self,
        by: u64,
        ino: u32,
        flags: OpenFlags,
        st: Stat,
    ) -> Result<OpenOut, FsError> {
        Self::openable(&st, flags)?;
        if flags.contains(OpenFlags::TRUNC) && st.kind == FileKind::Regular {
            self.revoke_ino(ino);
            self.fs.truncate(ino, 0).map_err(err)?;
        }
        let i = match self.free_files.pop() {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.files.len() - 1
            }
        };
        if !self.shares.charge(by, i, &BADGES) {
            self.free_files.push(i);
            return Err(FsError::NoSpace);
        }
        // Watched: when the client's last copy goes (dropped, or it died) we are told, and the
        // file is closed and its index reused (`no_senders`). We keep no copy ourselves.
        let cap = self.slot();
        let badge = FILE_BASE + i as u64;
        if sys::cap_mint_watched(self.ep, cap, badge, rights::SEND, self.notice).is_err() {
            self.shares.release(i, &BADGES);
            self.free_slots.push(cap);
            self.free_files.push(i);
            return Err(FsError::NoSpace);
        }
        self.after.delete(cap);
        let size = self.fill(i, ino, flags, &st);
        // What the client reopens the file by if we restart (`open_inode`).
        let generation = self.fs.stat_more(ino).map_or(0, |m| m.generation);
        Ok(OpenOut {
            file: cap,
            size,
            ino,
            generation,
        })
    }

    /// Whether an inode with attributes `st` may be opened with `flags` at all (permissions
    /// aside).
    fn openable(st: &Stat, flags: OpenFlags) -> Result<(), FsError> {
        if st.kind == FileKind::Dir && flags.intersects(OpenFlags::WRITE | OpenFlags::TRUNC) {
            return Err(FsError::IsDir);
        }
        if matches!(
            st.kind,
            FileKind::CharDev | FileKind::BlockDev | FileKind::Fifo | FileKind::Socket
        ) {
            return Err(FsError::Device);
        }
        Ok(())
    }

    /// Makes file index `i` the open file of `ino` (truncated already if asked); returns the
    /// size the client is told.
    fn fill(&mut self, i: usize, ino: u32, flags: OpenFlags, st: &Stat) -> u64 {
        self.files[i] = Some(Open {
            ino,
            flags,
            mapped: Vec::new(),
            ro_cap: 0,
            wbuf: None,
            rbuf: None,
        });
        if flags.contains(OpenFlags::TRUNC) {
            0
        } else {
            st.size
        }
    }

    /// Takes back every client mapping of `ino`'s cached pages (truncate, unlink): the blocks
    /// may be freed and reused for other data.
    fn revoke_ino(&mut self, ino: u32) {
        self.forget_reads(ino);
        let mut c = self.cache.borrow_mut();
        for f in self.files.iter_mut().flatten() {
            if f.ino == ino {
                for &s in &f.mapped {
                    c.pinned[s] -= 1;
                    if c.ever_mapped[s] {
                        let _ = sys::unmap(c.addr(s), 1, 0);
                        c.ever_mapped[s] = false;
                    }
                }
                f.mapped.clear();
            }
        }
        drop(c);
        self.drop_shadows(ino);
    }

    /// `ino`'s bytes change: the read buffers of its open files no longer hold any of them (a
    /// reader's next read asks us again, and sees the change).
    fn forget_reads(&mut self, ino: u32) {
        // Its blocks may change too (written, truncated, freed).
        if self.file_pages.is_some_and(|(i, _)| i == ino) {
            self.file_pages = None;
        }
        if self.read_buffers == 0 {
            return;
        }
        for f in self.files.iter().flatten() {
            if let (true, Some(b)) = (f.ino == ino, &f.rbuf) {
                b.header().forget();
            }
        }
    }

    /// Frees `ino`'s shadow pages, revoking every mapping of them first.
    fn drop_shadows(&mut self, ino: u32) {
        self.shadows.retain(|s| {
            if s.ino != ino {
                return true;
            }
            let _ = sys::unmap(s.addr, 1, 0);
            // SAFETY: allocated in `shadow` with SHADOW_LAYOUT; no mapping of it is left.
            unsafe { alloc::alloc::dealloc(s.addr as *mut u8, SHADOW_LAYOUT) };
            false
        });
    }

    /// Fills a shadow page with the file's current contents (zeros past the end).
    fn fill_shadow(fs: &mut Fs<Dev>, ino: u32, page: u64, addr: u64) -> Result<(), FsError> {
        // SAFETY: `addr` is a page of ours (SHADOW_LAYOUT); clients map it read-only.
        let buf = unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, PAGE) };
        buf.fill(0);
        let mut done = 0;
        while done < PAGE {
            let n = fs
                .read(ino, page * PAGE as u64 + done as u64, &mut buf[done..])
                .map_err(err)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(())
    }

    /// The shadow page for file page `page` of `ino`, made if needed.
    fn shadow(&mut self, ino: u32, page: u64) -> Result<u64, DsError> {
        if let Some(s) = self.shadows.iter().find(|s| s.ino == ino && s.page == page) {
            return Ok(s.addr);
        }
        let addr = if self.shadows.len() >= self.max_shadows.max(1) {
            // Reuse the oldest: revoke its mappings (their region managers fault it back in).
            let old = self.shadows.remove(0);
            let _ = sys::unmap(old.addr, 1, 0);
            old.addr
        } else {
            // SAFETY: a non-zero-sized layout.
            unsafe { alloc::alloc::alloc(SHADOW_LAYOUT) as u64 }
        };
        if addr == 0 {
            return Err(DsError::NoMemory);
        }
        if Self::fill_shadow(&mut self.fs, ino, page, addr).is_err() {
            // SAFETY: just allocated, never mapped.
            unsafe { alloc::alloc::dealloc(addr as *mut u8, SHADOW_LAYOUT) };
            return Err(DsError::Gone);
        }
        self.shadows.push(Shadow { ino, page, addr });
        Ok(addr)
    }

    /// After a write of [off, off + n) to `ino`: refresh the shadow pages it touched.
    fn refresh_shadows(&mut self, ino: u32, off: u64, n: u64) {
        let (first, last) = (off / PAGE as u64, (off + n.max(1) - 1) / PAGE as u64);
        for s in self
            .shadows
            .iter()
            .filter(|s| s.ino == ino && s.page >= first && s.page <= last)
        {
            let _ = Self::fill_shadow(&mut self.fs, ino, s.page, s.addr);
        }
    }

    /// The size of `ino` and the device page holding its page `fp` (`dev_page`), through the
    /// file's memo ([`PageMemo`]) while nothing has been written since.
    /// Also the memo's index (None for a file too large to remember).
    fn mapped_page(
        &mut self,
        ino: u32,
        fp: u64,
    ) -> Result<(u64, Option<u64>, Option<usize>), DsError> {
        let writes = self.cache.borrow().writes;
        let i = match self.page_memos.iter().position(|m| m.ino == ino) {
            Some(i) if self.page_memos[i].writes == writes => i,
            found => {
                if let Some(i) = found {
                    self.page_memos.remove(i);
                }
                let size = self.fs.stat(ino).map_err(|_| DsError::Gone)?.size;
                let pages = size.div_ceil(PAGE as u64);
                if pages > PAGE_MEMO_MAX {
                    let dp = (fp < pages).then(|| self.dev_page(ino, fp)).flatten();
                    return Ok((size, dp, None));
                }
                if self.page_memos.len() >= PAGE_MEMOS {
                    self.page_memos.remove(0);
                }
                self.page_memos.push(PageMemo {
                    ino,
                    writes,
                    size,
                    dev: alloc::vec![0; pages as usize],
                    used: alloc::vec![0; pages.div_ceil(64) as usize],
                    slot: alloc::vec![u32::MAX; pages as usize],
                });
                self.page_memos.len() - 1
            }
        };
        let m = &self.page_memos[i];
        let size = m.size;
        match m.dev.get(fp as usize) {
            None => Ok((size, None, Some(i))),
            Some(&d) if d != 0 => Ok((size, Some(d as u64 - 1), Some(i))),
            Some(_) => {
                let dp = self.dev_page(ino, fp);
                if let Some(d) = dp.and_then(|d| u32::try_from(d + 1).ok()) {
                    self.page_memos[i].dev[fp as usize] = d;
                }
                Ok((size, dp, Some(i)))
            }
        }
    }

    /// Device page holding file page `fp` of `ino`, if the page lies in one aligned run of
    /// blocks on disk (always so with 4 KiB blocks; otherwise only when contiguous).
    fn dev_page(&mut self, ino: u32, fp: u64) -> Option<u64> {
        let bs = self.fs.block_size() as u64;
        let k = PAGE as u64 / bs;
        let b0 = self.fs.block_of(ino, fp * k).ok()? as u64;
        if b0 == 0 || !(b0 * bs).is_multiple_of(PAGE as u64) {
            return None;
        }
        for j in 1..k {
            if self.fs.block_of(ino, fp * k + j).ok()? as u64 != b0 + j {
                return None;
            }
        }
        Some(b0 * bs / PAGE as u64)
    }

    /// The device pages `lo..hi` holding `ino`'s data, for read-ahead to stop at the file's end
    /// (`Cache::set_file`): `hi` is the page after its last block, `lo` its first block's page
    /// (0 where that lies after `hi`: blocks out of order). None if the file is empty or ends in
    /// a hole (its last block unknown without walking the map): its reads then read ahead as
    /// metadata, a few pages. Only a hint to the cache: computed once per file and kept until
    /// the file's bytes change (`forget_reads`).
    fn file_pages(&mut self, ino: u32) -> Option<(u64, u64)> {
        if let Some((i, pages)) = self.file_pages {
            if i == ino {
                return pages;
            }
        }
        let pages = self.find_file_pages(ino);
        self.file_pages = Some((ino, pages));
        pages
    }

    #[inline(never)]
    fn find_file_pages(&mut self, ino: u32) -> Option<(u64, u64)> {
        let size = self.fs.stat(ino).ok()?.size;
        let bs = self.fs.block_size() as u64;
        let last = self.fs.block_of(ino, size.checked_sub(1)? / bs).ok()? as u64;
        if last == 0 {
            return None;
        }
        let hi = last * bs / PAGE as u64 + 1;
        let first = self.fs.block_of(ino, 0).ok()? as u64 * bs / PAGE as u64;
        Some((if first != 0 && first < hi { first } else { 0 }, hi))
    }

    /// The cache slot of device page `dp`, file page `fp` of `ino` (of `size` bytes), pinned
    /// for a client's mapping: a miss reads ahead no further than the file's last block.
    /// `hint`: the slot it was last found in, checked first.
    fn map_data(
        &mut self,
        ino: u32,
        size: u64,
        fp: u64,
        dp: u64,
        hint: Option<usize>,
    ) -> Result<usize, DevError> {
        let hit = match hint {
            Some(h) => self.cache.borrow_mut().lookup_at(dp, h),
            None => self.cache.borrow_mut().lookup(dp),
        };
        let s = match hit {
            Some(s) => s,
            None => self.read_miss(ino, size, fp, dp)?,
        };
        let mut c = self.cache.borrow_mut();
        c.pinned[s] += 1;
        c.ever_mapped[s] = true;
        Ok(s)
    }

    /// Fault-around: how many pages from file page `fp` of `ino` (device page `dp`, mapped
    /// from slot `s`, pinned already) one map item of at most `want` pages carries: `fp` and the
    /// pages after it that faults of programs asked for before (`PageMemo::used`: mapping a
    /// page costs about half a fault, so only pages likely to be touched are worth it), that
    /// are cached (nothing is read from the disk for them) in the slots after `s` (one item
    /// maps one contiguous range of the cache) and lie on the device pages after `dp`, not
    /// shadowed. Each is pinned as `map_data` pins one. Marks `fp` used and records slot `s` as
    /// where it was mapped from (`PageMemo::slot`: the memo is at hand here).
    fn map_around(
        &mut self,
        memo: Option<usize>,
        ino: u32,
        fp: u64,
        dp: u64,
        s: usize,
        want: u64,
    ) -> u64 {
        let Some(m) = memo.and_then(|i| self.page_memos.get_mut(i)) else {
            return 1;
        };
        if let Some(x) = m.slot.get_mut(fp as usize) {
            *x = s as u32;
        }
        let bit = |fp: u64| (fp / 64) as usize;
        if let Some(w) = m.used.get_mut(bit(fp)) {
            *w |= 1 << (fp % 64);
        }
        let want = want
            .min(dataspace::MAP_AROUND_MAX)
            .min(m.dev.len() as u64 - fp.min(m.dev.len() as u64));
        let c = self.cache.borrow();
        let mut n = 1;
        while n < want {
            let q = fp + n;
            let used = m.used.get(bit(q)).is_some_and(|w| w >> (q % 64) & 1 != 0);
            if !used
                || m.dev[q as usize] as u64 != dp + n + 1
                || !c.holds(s + n as usize, dp + n)
                || self.shadows.iter().any(|x| x.ino == ino && x.page == q)
            {
                break;
            }
            n += 1;
        }
        drop(c);
        let mut c = self.cache.borrow_mut();
        for slot in s + 1..s + n as usize {
            c.pinned[slot] += 1;
            c.ever_mapped[slot] = true;
        }
        n
    }

    #[inline(never)]
    fn read_miss(&mut self, ino: u32, size: u64, fp: u64, dp: u64) -> Result<usize, DevError> {
        // Finding the file's last block may read metadata: before the cache is borrowed.
        let pages = self.file_pages(ino);
        let mut c = self.cache.borrow_mut();
        let misses = c.stats[1];
        c.set_file(pages);
        let r = c.get(dp, false);
        c.set_file(None);
        if self.trace_reads && c.stats[1] != misses {
            println!(
                "ext2-pfs[{}]: read miss at page {} of a {}-page file: {} pages read",
                self.name,
                fp,
                size.div_ceil(PAGE as u64),
                c.last_window
            );
        }
        r
    }

    /// The engine's read of `ino` into `buf`, read-ahead stopping at the file's last block.
    fn read_data(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize, E2> {
        let pages = self.file_pages(ino);
        self.cache.borrow_mut().set_file(pages);
        let r = self.fs.read(ino, off, buf);
        self.cache.borrow_mut().set_file(None);
        r
    }

    fn lookup_in(&mut self, badge: u64, dir: u32, name: &[u8]) -> Result<u32, FsError> {
        self.check(badge, dir, 1)?;
        self.fs.lookup(dir, name).map_err(err)
    }

    /// Option 3 path walk inside this file system, with a session's credentials (none for the
    /// VFS, which checked already). The last name of the path is `self.walker.name()`.
    fn walk(
        &mut self,
        creds: Option<(u32, u32)>,
        path: &[u8],
        follow_last: bool,
    ) -> Result<Walked<(u32, Stat)>, FsError> {
        let cred = creds.map(|(uid, gid)| Cred { uid, gid });
        let root = self.fs.root();
        let root_st = self.fs.stat(root).map_err(err)?;
        let mut tree = Inodes {
            fs: &mut self.fs,
            covered: &self.covered,
        };
        self.walker
            .walk(&mut tree, (root, root_st), path, follow_last, cred)
    }

    /// As many entries of `dir` from position `cookie` as fit in `N` bytes, packed
    /// (`sawmill_path::dirents`), and the position to continue from (0: the end).
    fn packed_entries<const N: usize>(
        &mut self,
        dir: u32,
        cookie: u64,
    ) -> Result<(u64, Bytes<N>), FsError> {
        let mut packed = [0u8; N];
        let mut used = 0;
        let next = self
            .fs
            .readdir_at(dir, cookie, |ino, kind, name| {
                match dirents::put(&mut packed[used..], ino, entry_kind(kind).repr(), name) {
                    Some(n) => {
                        used += n;
                        true
                    }
                    None => false,
                }
            })
            .map_err(err)?;
        let pos = next.unwrap_or(0);
        let packed = Bytes::from_slice(&packed[..used]).ok_or(FsError::Invalid)?;
        Ok((pos, packed))
    }
}

impl pfs::Server for Pfs {
    fn watch(&mut self, _badge: u64) -> Result<(), FsError> {
        Err(FsError::Invalid)
    }
    fn reconnect(&mut self, _badge: u64) -> Result<u64, FsError> {
        Err(FsError::Invalid)
    }
    fn root(&mut self, badge: u64) -> Result<u32, FsError> {
        self.creds(badge)?;
        Ok(self.fs.root())
    }
    fn lookup(&mut self, badge: u64, dir: u32, name: &[u8]) -> Result<LookupOut, FsError> {
        let ino = self.lookup_in(badge, dir, name)?;
        let st = self.fs.stat(ino).map_err(err)?;
        Ok(LookupOut {
            ino,
            mode: st.mode as u32,
            uid: st.uid,
            gid: st.gid,
        })
    }
    fn getattr(&mut self, badge: u64, ino: u32) -> Result<Attrs, FsError> {
        self.creds(badge)?;
        let st = self.fs.stat(ino).map_err(err)?;
        let more = self.fs.stat_more(ino).map_err(err)?;
        Ok(attrs(&st, more))
    }
    fn open(&mut self, badge: u64, ino: u32, flags: OpenFlags) -> Result<OpenOut, FsError> {
        self.check(badge, ino, open_want(flags))?;
        self.do_open(badge, ino, flags)
    }
    fn create(
        &mut self,
        badge: u64,
        dir: u32,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<u32, FsError> {
        self.check(badge, dir, 3)?;
        let (uid, gid) = self.creds(badge)?.unwrap_or((uid, gid));
        create_node(&mut self.fs, dir, name, mode, uid, gid).map_err(err)
    }
    fn mkdir(
        &mut self,
        badge: u64,
        dir: u32,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<u32, FsError> {
        self.check(badge, dir, 3)?;
        let (uid, gid) = self.creds(badge)?.unwrap_or((uid, gid));
        self.fs
            .mkdir(dir, name, mode as u16 & 0o7777, uid, gid)
            .map_err(err)
    }
    fn symlink(
        &mut self,
        badge: u64,
        dir: u32,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<u32, FsError> {
        self.check(badge, dir, 3)?;
        let (uid, gid) = self.creds(badge)?.unwrap_or((uid, gid));
        self.fs.symlink(dir, name, target, uid, gid).map_err(err)
    }
    fn readlink(&mut self, badge: u64, ino: u32) -> Result<Bytes<256>, FsError> {
        self.creds(badge)?;
        let t = self.fs.readlink(ino).map_err(err)?;
        Bytes::from_slice(&t).ok_or(FsError::NameTooLong)
    }
    fn unlink(&mut self, badge: u64, dir: u32, name: &[u8]) -> Result<(), FsError> {
        self.check(badge, dir, 3)?;
        if let Ok(ino) = self.fs.lookup(dir, name) {
            self.revoke_ino(ino);
        }
        self.fs.unlink(dir, name).map_err(err)
    }
    fn rmdir(&mut self, badge: u64, dir: u32, name: &[u8]) -> Result<(), FsError> {
        self.check(badge, dir, 3)?;
        self.fs.rmdir(dir, name).map_err(err)
    }
    fn rename(
        &mut self,
        badge: u64,
        dirs: [u32; 2],
        sname: &[u8],
        dname: &[u8],
        flags: RenameFlags,
    ) -> Result<(), FsError> {
        let [sdir, ddir] = dirs;
        self.check(badge, sdir, 3)?;
        self.check(badge, ddir, 3)?;
        if flags.contains(RenameFlags::EXCHANGE) {
            return Err(FsError::Invalid);
        }
        let noreplace = flags.contains(RenameFlags::NOREPLACE);
        if !noreplace {
            if let Ok(ino) = self.fs.lookup(ddir, dname) {
                self.revoke_ino(ino);
            }
        }
        self.fs
            .rename_with(sdir, sname, ddir, dname, noreplace)
            .map_err(err)
    }
    fn setattr(
        &mut self,
        badge: u64,
        ino: u32,
        mode: u32,
        uid: u32,
        gid: u32,
        atime: u32,
        mtime: u32,
        which: SetAttrFields,
    ) -> Result<(), FsError> {
        let cred = self.creds(badge)?;
        self.do_setattr(ino, cred, mode, uid, gid, atime, mtime, which)
    }
    fn truncate(&mut self, badge: u64, ino: u32, size: u64) -> Result<(), FsError> {
        self.check(badge, ino, 2)?;
        self.revoke_ino(ino);
        self.fs.truncate(ino, size).map_err(err)
    }
    fn readdir(&mut self, badge: u64, dir: u32, cookie: u64) -> Result<ReaddirOut, FsError> {
        self.check(badge, dir, 4)?;
        // The cookie is the entry's byte position in the directory (0: the start; END past
        // the last): one call looks at one directory block, not at the whole directory.
        let mut out = ReaddirOut {
            next: 0,
            ino: 0,
            kind: EntryKind::Unknown,
            name: Bytes::new(),
        };
        let (mut taken, mut long) = (false, false);
        let next = self
            .fs
            .readdir_at(dir, cookie, |ino, kind, name| {
                if taken {
                    return false;
                }
                taken = true;
                out.ino = ino;
                out.kind = entry_kind(kind);
                match Bytes::from_slice(name) {
                    Some(b) => out.name = b,
                    None => long = true,
                }
                true
            })
            .map_err(err)?;
        if long {
            return Err(FsError::NameTooLong);
        }
        if taken {
            out.next = next.unwrap_or(READDIR_END);
        }
        Ok(out)
    }
    fn sync(&mut self, badge: u64) -> Result<(), FsError> {
        self.creds(badge)?;
        self.fs.flush().map_err(err)
    }
    fn session(&mut self, badge: u64, uid: u32, gid: u32) -> Result<u64, FsError> {
        if badge != VFS_BADGE {
            return Err(FsError::Denied);
        }
        // One session per request: each client's share is its own (the VFS asks once per client
        // and mount). Watched like files, so it goes when its last capability does.
        let i = self.shares.new_session((uid, gid));
        let s = self.slot();
        let badge = SESSION_BASE + i as u64;
        if sys::cap_mint_watched(self.ep, s, badge, rights::SEND, self.notice).is_err() {
            self.shares.drop_session(i);
            self.free_slots.push(s);
            return Err(FsError::NoSpace);
        }
        // Handed over in the reply; our copy goes once the reply is delivered.
        self.after.delete(s);
        Ok(s)
    }
    fn crash(&mut self, badge: u64) -> Result<(), FsError> {
        if badge != VFS_BADGE {
            return Err(FsError::Denied);
        }
        println!(
            "ext2-pfs[{}]: crashing on request (fault injection)",
            self.name
        );
        sawmill_rt::exit(0x99)
    }
    fn link(&mut self, badge: u64, ino: u32, dir: u32, name: &[u8]) -> Result<(), FsError> {
        self.check(badge, dir, 3)?;
        if self.fs.stat(ino).map_err(err)?.kind == FileKind::Dir {
            return Err(FsError::NotPermitted);
        }
        self.fs.link(ino, dir, name).map_err(err)
    }
    fn statfs(&mut self, badge: u64) -> Result<StatfsOut, FsError> {
        self.creds(badge)?;
        Ok(statfs_out(&self.fs))
    }
    fn cover(&mut self, badge: u64, path: &[u8]) -> Result<(), FsError> {
        if badge != VFS_BADGE {
            return Err(FsError::Denied);
        }
        // Kept as the walk's canonical path of the place: its names joined by `/`.
        let comps = path
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect::<Vec<_>>()
            .join(&b'/');
        if comps.is_empty() {
            return Err(FsError::Invalid);
        }
        if !self.covered.contains(&comps) {
            // As many as the VFS can have mounts; a table never grows without bound.
            if self.covered.len() >= MAX_COVERED {
                return Err(FsError::NoSpace);
            }
            self.covered.push(comps);
        }
        Ok(())
    }
    fn open_path(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
    ) -> Result<OpenPathOut, FsError> {
        let creds = self.creds(badge)?;
        let w = self.walk(creds, path, true)?;
        let dir = w.parent.0;
        let access = flags - (OpenFlags::CREATE | OpenFlags::EXCL);
        let o = match w.node {
            Some((ino, st)) => {
                if flags.contains(OpenFlags::CREATE | OpenFlags::EXCL) {
                    return Err(FsError::Exists);
                }
                // The walk read its attributes: the permission check and the open use them.
                let want = open_want(flags);
                if let Some((uid, gid)) = creds {
                    if !may(&st, (uid, gid), want) {
                        return Err(FsError::Denied);
                    }
                }
                self.do_open_stat(badge, ino, access, st)?
            }
            // A name with a slash after it may only become a directory.
            None if flags.contains(OpenFlags::CREATE) && w.dir_only => return Err(FsError::IsDir),
            None if flags.contains(OpenFlags::CREATE) => {
                let (uid, gid) = creds.unwrap_or((0, 0));
                self.check(badge, dir, 3)?;
                let ino = create_node(&mut self.fs, dir, self.walker.name(), mode, uid, gid)
                    .map_err(err)?;
                pfs::Server::open(self, badge, ino, access)?
            }
            None => return Err(FsError::NotFound),
        };
        Ok(OpenPathOut {
            file: o.file,
            size: o.size,
            ino: o.ino,
            generation: o.generation,
        })
    }
    fn readdir_many(
        &mut self,
        badge: u64,
        dir: u32,
        cookie: u64,
    ) -> Result<ReaddirManyOut, FsError> {
        self.check(badge, dir, 4)?;
        let (next, packed) = self.packed_entries(dir, cookie)?;
        Ok(ReaddirManyOut { next, packed })
    }
    fn stat_path(&mut self, badge: u64, path: &[u8], follow: bool) -> Result<StatPathOut, FsError> {
        let creds = self.creds(badge)?;
        let (ino, st) = self
            .walk(creds, path, follow)?
            .node
            .ok_or(FsError::NotFound)?;
        let a = attrs(&st, self.fs.stat_more(ino).map_err(err)?);
        Ok(StatPathOut {
            ino,
            mode: a.mode,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            blocks: a.blocks,
            rdev_major: a.rdev_major,
            rdev_minor: a.rdev_minor,
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns,
            ctime_ns: a.ctime_ns,
            generation: a.generation,
        })
    }
    fn open_inode(
        &mut self,
        badge: u64,
        ino: u32,
        generation: u32,
        flags: OpenFlags,
    ) -> Result<OpenInodeOut, FsError> {
        // A reopen never changes the file: what `open` did to it (TRUNC) happened before.
        if flags.intersects(OpenFlags::TRUNC | OpenFlags::CREATE | OpenFlags::EXCL) {
            return Err(FsError::Invalid);
        }
        let creds = self.creds(badge)?;
        // Only ordinary inodes (not the reserved ones but the root), and only the very file the
        // client had: a freed inode (no links) or one reused since (another generation) is
        // not it.
        if !self.fs.is_file_inode(ino) {
            return Err(FsError::Stale);
        }
        let st = self.fs.stat(ino).map_err(err)?;
        let more = self.fs.stat_more(ino).map_err(err)?;
        if st.nlink == 0 || more.generation != generation || st.kind == FileKind::Unknown {
            return Err(FsError::Stale);
        }
        // The check `open` makes of a session: its credentials against the inode.
        if let Some(c) = creds {
            if !may(&st, c, open_want(flags)) {
                return Err(FsError::Denied);
            }
        }
        let o = self.do_open_stat(badge, ino, flags, st)?;
        Ok(OpenInodeOut {
            file: o.file,
            size: o.size,
        })
    }
}

/// The IDL's kind of an entry of the engine's kind.
fn entry_kind(kind: FileKind) -> EntryKind {
    match kind {
        FileKind::Regular => EntryKind::Regular,
        FileKind::Dir => EntryKind::Dir,
        FileKind::Symlink => EntryKind::Symlink,
        FileKind::CharDev => EntryKind::CharDev,
        FileKind::BlockDev => EntryKind::BlockDev,
        FileKind::Fifo => EntryKind::Fifo,
        FileKind::Socket => EntryKind::Socket,
        FileKind::Unknown => EntryKind::Unknown,
    }
}

/// The permission bits (4 read, 2 write) an open with `flags` needs.
fn open_want(flags: OpenFlags) -> u32 {
    (if flags.contains(OpenFlags::READ) {
        4
    } else {
        0
    }) | if flags.intersects(OpenFlags::WRITE | OpenFlags::TRUNC) {
        2
    } else {
        0
    }
}

impl file::Server for Pfs {
    fn write_buffer(&mut self, badge: u64, dst: u64) -> Result<Map, FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::WRITE) || badge & FILE_RO != 0 {
            return Err(FsError::BadFile);
        }
        if f.wbuf.is_none() {
            f.wbuf = Some(SharedBuf::new().ok_or(FsError::NoSpace)?);
        }
        let src = f.wbuf.as_ref().map_or(0, |w| w.addr());
        Ok(Map {
            src,
            dst,
            pages: WBUF_PAGES as u64,
            flags: map::READ | map::WRITE,
        })
    }
    fn read_buffer(&mut self, badge: u64, dst: u64) -> Result<Map, FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::READ) {
            return Err(FsError::BadFile);
        }
        if f.rbuf.is_none() {
            f.rbuf = Some(SharedBuf::new().ok_or(FsError::NoSpace)?);
            self.read_buffers += 1;
        }
        let src = self.file(badge)?.rbuf.as_ref().map_or(0, |b| b.addr());
        Ok(Map {
            src,
            dst,
            pages: RBUF_PAGES as u64,
            flags: map::READ,
        })
    }
    fn read_to_buffer(&mut self, badge: u64, off: u64, len: u32) -> Result<u32, FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::READ) {
            return Err(FsError::BadFile);
        }
        let Some(b) = f.rbuf.as_ref() else {
            return Err(FsError::Invalid);
        };
        if len as usize > read_buffer::DATA {
            return Err(FsError::Invalid);
        }
        let (ino, p) = (f.ino, b.0.as_ptr());
        // SAFETY: our own buffer, alive while the open file holds it (the engine's read does not
        // touch open files); the first `DATA` bytes are data, the header lies after them.
        let (data, header) = unsafe {
            (
                core::slice::from_raw_parts_mut(p, len as usize),
                read_buffer::Header::at(p as u64),
            )
        };
        header.begin();
        match self.read_data(ino, off, data) {
            Ok(n) => {
                header.finish(off, n as u64);
                Ok(n as u32)
            }
            Err(x) => {
                header.finish(0, 0);
                Err(err(x))
            }
        }
    }
    fn write_from_buffer(&mut self, badge: u64, off: u64, len: u32) -> Result<u32, FsError> {
        let f = self.file(badge)?;
        let Some(w) = f.wbuf.as_ref() else {
            return Err(FsError::Invalid);
        };
        if len as usize > WBUF {
            return Err(FsError::Invalid);
        }
        let p = w.0.as_ptr();
        // SAFETY: our own buffer, allocated and mapped for as long as the open file holds it; the
        // client may change the bytes meanwhile, which only changes its own data. The slice ends
        // before `write_data` can drop the buffer (it does not touch `wbuf`).
        let data = unsafe { core::slice::from_raw_parts(p, len as usize) };
        self.write_data(badge, off, data).map(|n| n as u32)
    }
    fn read(&mut self, badge: u64, off: u64, len: u32) -> Result<Bytes<480>, FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::READ) {
            return Err(FsError::BadFile);
        }
        let ino = f.ino;
        let mut b = Bytes::<480>::new();
        let n = (len as usize).min(480);
        let got = self
            .read_data(ino, off, &mut b.buf_mut()[..n])
            .map_err(err)?;
        b.set_len(got);
        Ok(b)
    }
    fn write(&mut self, badge: u64, off: u64, data: &[u8]) -> Result<u32, FsError> {
        self.write_data(badge, off, data).map(|n| n as u32)
    }
    fn stat(&mut self, badge: u64) -> Result<StatOut, FsError> {
        let ino = self.file(badge)?.ino;
        let st = self.fs.stat(ino).map_err(err)?;
        let more = self.fs.stat_more(ino).map_err(err)?;
        let a = attrs(&st, more);
        Ok(StatOut {
            ino,
            mode: a.mode,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            blocks: a.blocks,
            rdev_major: a.rdev_major,
            rdev_minor: a.rdev_minor,
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns,
            ctime_ns: a.ctime_ns,
            generation: a.generation,
        })
    }
    fn setattr(
        &mut self,
        badge: u64,
        mode: u32,
        uid: u32,
        gid: u32,
        atime: u32,
        mtime: u32,
        which: SetAttrFields,
    ) -> Result<(), FsError> {
        let ino = self.file(badge)?.ino;
        // The credentials of the session the file is charged to (it opened it).
        let i = (badge & !FILE_RO).wrapping_sub(FILE_BASE) as usize;
        let cred = self.shares.file_cred(i, &BADGES).ok_or(FsError::BadFile)?;
        self.do_setattr(ino, cred, mode, uid, gid, atime, mtime, which)
    }
    fn statfs(&mut self, badge: u64) -> Result<file::StatfsOut, FsError> {
        self.file(badge)?;
        let s = statfs_out(&self.fs);
        Ok(file::StatfsOut {
            bsize: s.bsize,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namelen: s.namelen,
        })
    }
    fn truncate(&mut self, badge: u64, size: u64) -> Result<(), FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::WRITE) || badge & FILE_RO != 0 {
            return Err(FsError::BadFile);
        }
        let ino = f.ino;
        self.revoke_ino(ino);
        self.fs.truncate(ino, size).map_err(err)
    }
    fn fsync(&mut self, badge: u64) -> Result<(), FsError> {
        self.file(badge)?;
        self.fs.flush().map_err(err)
    }
    fn map(&mut self, badge: u64, page: u64, count: u32, dst: u64) -> Result<MapOut, FsError> {
        let f = self.file(badge)?;
        if !f.flags.contains(OpenFlags::READ) {
            return Err(FsError::BadFile);
        }
        let ino = f.ino;
        let size = self.fs.stat(ino).map_err(err)?.size;
        let pages = size.div_ceil(PAGE as u64);
        let mut n = 0usize;
        while n < (count as usize).min(4) && page + (n as u64) < pages {
            let Some(dp) = self.dev_page(ino, page + n as u64) else {
                break;
            };
            let s = self
                .map_data(ino, size, page + n as u64, dp, None)
                .map_err(|_| FsError::Io)?;
            let addr = self.cache.borrow().addr(s);
            self.file(badge)?.mapped.push(s);
            // Added to the reply beside the generated words (only if it succeeds).
            self.after.map(MapItem {
                src: addr,
                dst: dst + (n * PAGE) as u64,
                pages: 1,
                flags: map::READ,
            });
            n += 1;
        }
        Ok(MapOut {
            mapped: n as u32,
            size,
        })
    }
    fn close(&mut self, badge: u64) -> Result<(), FsError> {
        if badge & FILE_RO != 0 {
            return Err(FsError::BadFile);
        }
        // The index stays charged until the last capability goes (`no_senders`).
        self.close_index(badge.wrapping_sub(FILE_BASE) as usize)
    }
    fn reopen(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
        _mode: u32,
    ) -> Result<file::ReopenOut, FsError> {
        // Only the full capability of a closed file, charged to a session still alive: the
        // walk and the permission check use that session's credentials, as `open_path` would.
        if badge & FILE_RO != 0 {
            return Err(FsError::BadFile);
        }
        let i = badge.wrapping_sub(FILE_BASE) as usize;
        if self.files.get(i).is_none_or(|f| f.is_some()) {
            return Err(FsError::BadFile);
        }
        let creds = self
            .shares
            .live_session_cred(i, &BADGES)
            .ok_or(FsError::BadFile)?;
        if flags.intersects(OpenFlags::CREATE | OpenFlags::EXCL) {
            return Err(FsError::Invalid);
        }
        let w = self.walk(Some(creds), path, true)?;
        let Some((ino, st)) = w.node else {
            return Err(FsError::NotFound);
        };
        if !may(&st, creds, open_want(flags)) {
            return Err(FsError::Denied);
        }
        Self::openable(&st, flags)?;
        if flags.contains(OpenFlags::TRUNC) && st.kind == FileKind::Regular {
            self.revoke_ino(ino);
            self.fs.truncate(ino, 0).map_err(err)?;
        }
        let size = self.fill(i, ino, flags, &st);
        let generation = self.fs.stat_more(ino).map_or(0, |m| m.generation);
        Ok(file::ReopenOut {
            size,
            ino,
            generation,
        })
    }
}

impl Pfs {
    /// Closes open file `i`: its pinned pages, read-only capabilities and shadows go. The
    /// client's capability stays (calls on it get BadFile) until it drops it.
    fn close_index(&mut self, i: usize) -> Result<(), FsError> {
        let f = self
            .files
            .get_mut(i)
            .and_then(|f| f.take())
            .ok_or(FsError::BadFile)?;
        if f.rbuf.is_some() {
            self.read_buffers -= 1;
        }
        {
            let mut c = self.cache.borrow_mut();
            for &s in &f.mapped {
                c.pinned[s] -= 1;
            }
        }
        // Every read-only copy goes (the clients' included), then our own.
        if f.ro_cap != 0 {
            let _ = sys::cap_revoke(f.ro_cap);
            let _ = sys::cap_delete(f.ro_cap);
            self.free_slots.push(f.ro_cap);
        }
        // Shadow pages live while some open file of the inode may map them.
        if !self.shadows.is_empty() && !self.files.iter().flatten().any(|o| o.ino == f.ino) {
            self.drop_shadows(f.ino);
        }
        Ok(())
    }
}

fn fs_ds(e: FsError) -> DsError {
    match e {
        FsError::BadFile => DsError::Gone,
        FsError::Denied => DsError::Denied,
        FsError::Invalid => DsError::Invalid,
        _ => DsError::NoMemory,
    }
}

/// An open file as a dataspace: read-only, the size of the file rounded up to pages; `map`
/// hands out the cache page itself (or a shadow copy, see [`Shadow`]), so writes through the
/// file interface are seen at once, and truncate/unlink revoke the mappings.
impl dataspace::Server for Pfs {
    fn info(&mut self, badge: u64) -> Result<dataspace::InfoOut, DsError> {
        let ino = self.file(badge).map_err(fs_ds)?.ino;
        let size = self.fs.stat(ino).map_err(|_| DsError::Gone)?.size;
        Ok(dataspace::InfoOut {
            size: size.div_ceil(PAGE as u64) * PAGE as u64,
            flags: DsFlags::EMPTY,
        })
    }
    fn map(
        &mut self,
        badge: u64,
        offset: u64,
        dst: u64,
        pages: u64,
        flags: MapFlags,
    ) -> Result<Map, DsError> {
        let f = self.file(badge).map_err(fs_ds)?;
        if !f.flags.contains(OpenFlags::READ) {
            return Err(DsError::Denied);
        }
        let ino = f.ino;
        if !offset.is_multiple_of(PAGE as u64) || !dst.is_multiple_of(PAGE as u64) || pages == 0 {
            return Err(DsError::Invalid);
        }
        if flags.intersects(MapFlags::WRITE | MapFlags::NEED_WRITE) {
            return Err(DsError::Denied);
        }
        let fp = offset / PAGE as u64;
        let (size, dp, memo) = self.mapped_page(ino, fp)?;
        if fp >= size.div_ceil(PAGE as u64) {
            return Err(DsError::Invalid);
        }
        let shadowed = self.shadows.iter().any(|s| s.ino == ino && s.page == fp);
        let hint = memo
            .and_then(|i| self.page_memos[i].slot.get(fp as usize).copied())
            .filter(|&x| x != u32::MAX)
            .map(|x| x as usize);
        let (src, n) = match (shadowed, dp) {
            (false, Some(dp)) => {
                let s = self
                    .map_data(ino, size, fp, dp, hint)
                    .map_err(|_| DsError::NoMemory)?;
                let n = self.map_around(memo, ino, fp, dp, s, pages);
                self.file(badge)
                    .map_err(fs_ds)?
                    .mapped
                    .extend(s..s + n as usize);
                (self.cache.borrow().addr(s), n)
            }
            _ => (self.shadow(ino, fp)?, 1),
        };
        Ok(Map {
            src,
            dst,
            pages: n,
            flags: map::READ | flags.bits() & map::EXEC,
        })
    }
    fn copy(&mut self, _badge: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn phys(&mut self, _badge: u64, _offset: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn read_only(&mut self, badge: u64) -> Result<u64, DsError> {
        let i = (badge & !FILE_RO).wrapping_sub(FILE_BASE);
        let ep = self.ep;
        if self.file(badge).map_err(fs_ds)?.ro_cap == 0 {
            let s = self.slot();
            if sys::cap_mint(ep, s, (FILE_BASE + i) | FILE_RO, rights::SEND).is_err() {
                self.free_slots.push(s);
                return Err(DsError::NoMemory);
            }
            self.file(badge).map_err(fs_ds)?.ro_cap = s;
        }
        Ok(self.file(badge).map_err(fs_ds)?.ro_cap)
    }
    fn resize(&mut self, badge: u64, _size: u64) -> Result<(), DsError> {
        self.file(badge).map_err(fs_ds)?;
        Err(DsError::Denied)
    }
    fn free(&mut self, badge: u64) -> Result<(), DsError> {
        self.file(badge).map_err(fs_ds)?;
        Err(DsError::Denied)
    }
}

/// Phase 2: every request of the VFS, its sessions and the open files, on our own endpoint.
impl rpc::Serve for Pfs {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        // A file's dataspace changes nothing that is stamped (a file's pages are mapped
        // read-only; resizing and freeing are refused): its requests, a page fault's each,
        // do not read the clock.
        if m.badge >= FILE_BASE
            && (dataspace::op::INFO..=dataspace::op::FREE).contains(&m.tag.label())
        {
            return dataspace::handle(self, m, next);
        }
        // Every change this request makes is stamped with the time it arrived.
        self.fs.set_time(self.clock.now_secs() as u32);
        if m.badge >= FILE_BASE {
            file::handle(self, m, next)
        } else {
            pfs::handle(self, m, next)
        }
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn slot_freed(&mut self, slot: u64) {
        self.free_slots.push(slot);
    }
    const NOTICES: bool = true;
    fn notice_badge(&self) -> u64 {
        NOTICE_BADGE
    }
    /// A client dropped its last capability to a file or session, or died: a file still open
    /// is closed (what it leaked comes back), and the index is free for reuse.
    fn no_senders(&mut self, badge: u64) {
        if badge >= FILE_BASE && badge & FILE_RO == 0 {
            let i = (badge - FILE_BASE) as usize;
            let _ = self.close_index(i);
            if self.shares.release(i, &BADGES) {
                self.free_files.push(i);
            }
        } else if (SESSION_BASE..FILE_BASE).contains(&badge) {
            self.shares.drop_session((badge - SESSION_BASE) as usize);
        }
    }
}

/// A file system we cannot mount: every request is answered with an error, never a crash.
struct Unmountable;

impl rpc::Serve for Unmountable {
    fn handle(&mut self, _m: &IpcResult, next: Next) -> IpcResult {
        next.reply_plain(Reply::error(&FsError::Corrupt))
    }
}

fn main() {
    let cfg: sawmill_ext2_api::Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("ext2-pfs: FAIL config: {}", e);
            return;
        }
    };
    // Messages name the file system for the server's whole life.
    let name: &'static str = cfg.name.leak();
    let Some(blk_ep) = env::cap(&cfg.blk.name) else {
        println!(
            "ext2-pfs[{}]: FAIL no endpoint `{}` for the block device",
            name, cfg.blk.name
        );
        return;
    };
    let cache_kb = cfg.cache_kb as usize;
    let max_shadows = cfg.shadow_pages.map_or(MAX_SHADOWS, |n| n as usize);
    let Some(mem_ep) = env::cap("mem") else {
        println!(
            "ext2-pfs[{}]: FAIL the manifest gives us no `mem` (the cache's memory)",
            name
        );
        return;
    };
    // `exec`: programs may run straight from this file system's pages (lib/spawn).
    let cache = match Cache::new(blk_ep, mem_ep, cache_kb * 1024 / PAGE, cfg.exec) {
        Ok(c) => Rc::new(RefCell::new(c)),
        Err(e) => {
            println!("ext2-pfs[{}]: FAIL {}", name, e);
            return;
        }
    };
    let Some((manifest_ep, _)) = env::served() else {
        println!(
            "ext2-pfs[{}]: FAIL the manifest gives us no endpoint to serve",
            name
        );
        return;
    };
    let fs = Fs::open(Dev(cache.clone()));
    // The endpoint we serve is root's, made for this incarnation: when we die root destroys it,
    // so every capability we handed out (open files, sessions, the VFS's) fails at once, whatever
    // VFS incarnation came and went meanwhile (issue 16; `pfs_manifest`).
    let Some(ep) = sawmill_interfaces::pfs_manifest::own_endpoint() else {
        println!("ext2-pfs[{}]: FAIL root gave us no endpoint to serve", name);
        return;
    };
    // The manifest endpoint is the manifest thread's: it hands the VFS (at boot, and a
    // restarted one) a capability to `ep` (`reconnect`) and takes its `watch` call, never
    // answered, so the VFS learns of our death from the kernel.
    thread::spawn(254, 8192, move || {
        sawmill_interfaces::pfs_manifest::serve_manifest(manifest_ep, ep)
    })
    .expect("watch thread");
    let mut fs = match fs {
        Ok(fs) => fs,
        Err(e) => {
            println!("ext2-pfs[{}]: cannot mount: {}", name, e);
            let _ = rpc::serve(ep, &mut Unmountable);
            return;
        }
    };
    let clock = sawmill_rt::clock::Wall::get();
    fs.set_time(clock.now_secs() as u32);
    // New inodes' generations continue from a fresh point on every start, so a restarted PFS
    // never gives a reused inode number the generation a client of the dead one holds.
    fs.seed_generation((sys::rdtsc() as u32) ^ (clock.now_secs() as u32).rotate_left(16));
    // Checked when root restarted us (the dead incarnation may have left the disk half written
    // back), not at boot: the image was checked when it was made, and a boot check would cost
    // every boot the whole file system's metadata read (`boot.to_prompt`).
    if cfg.check && env::value(env::KIND_INCARNATION).unwrap_or(1) > 1 {
        check_on_start(&mut fs, name);
    }
    let st = fs.statfs();
    println!(
        "ext2-pfs[{}]: mounted: {} blocks of {} bytes, {} free; cache {} KiB",
        name, st.blocks, st.block_size, st.free_blocks, cache_kb
    );
    let notice = thread::alloc_slot();
    if sys::cap_mint(ep, notice, NOTICE_BADGE, rights::SEND).is_err() {
        println!("ext2-pfs[{}]: FAIL no notice capability", name);
        return;
    }
    let mut p = Pfs {
        clock,
        fs,
        cache,
        ep,
        notice,
        files: Vec::new(),
        free_files: Vec::new(),
        shares: share::Shares::new(
            cfg.files_per_session
                .unwrap_or(sawmill_ext2_api::DEFAULT_FILES_PER_SESSION),
            cfg.vfs_files.unwrap_or(sawmill_ext2_api::DEFAULT_VFS_FILES),
            cfg.files.unwrap_or(sawmill_ext2_api::DEFAULT_FILES),
        ),
        free_slots: Vec::new(),
        covered: Vec::new(),
        walker: Walker::new(),
        shadows: Vec::new(),
        max_shadows,
        read_buffers: 0,
        file_pages: None,
        page_memos: Vec::new(),
        trace_reads: cfg.trace_reads,
        name,
        after: AfterReply::new(),
    };
    // No receive slot here: no request on `ep` takes a capability (arming one before every
    // receive would cost each request about 10 instructions).
    let first = sawmill_rt::ipc::recv(ep, 0);
    serve_pfs(&mut p, ep, first);
}

/// The restart check (`check` in the config; issue 16): the engine's own checker reads the
/// whole file system, changing nothing. Clean: served as usual. Otherwise served read-only, with
/// the reason logged: a new incarnation after a crash does not build on damage it cannot repair
/// (the engine has no repair; `e2fsck` on the host does that).
fn check_on_start(fs: &mut Fs<Dev>, name: &str) {
    let t0 = sys::rdtsc();
    let report = fs.check();
    let khz = sawmill_rt::clock::Wall::get().khz.max(1);
    let ms = (sys::rdtsc() - t0) / khz;
    match report {
        Ok(r) if r.is_clean() => println!(
            "ext2-pfs[{}]: check: clean ({} inodes, {} directories, {} blocks in use; {} ms)",
            name, r.inodes_used, r.dirs, r.blocks_used, ms
        ),
        Ok(r) => {
            println!(
                "ext2-pfs[{}]: check: {} problems, serving read-only; the first: {}",
                name,
                r.problems.len(),
                r.problems.first().map_or("?", |p| p.as_str())
            );
            fs.set_read_only();
        }
        Err(e) => {
            println!(
                "ext2-pfs[{}]: check: failed ({}), serving read-only",
                name, e
            );
            fs.set_read_only();
        }
    }
}

/// Phase 2's loop, a function of its own so that the handlers are inlined into it (inside `main`,
/// beside phase 1's loop, LLVM left them out of line).
#[inline(never)]
fn serve_pfs(p: &mut Pfs, ep: u64, first: IpcResult) {
    let _ = rpc::serve_from(ep, first, p);
}

/// Creates a regular file, or a socket inode when `mode`'s type bits say so (the one other
/// type a client makes through `create`: `bind` of a local socket).
fn create_node(
    fs: &mut Fs<Dev>,
    dir: u32,
    name: &[u8],
    mode: u32,
    uid: u32,
    gid: u32,
) -> sawmill_ext2::Result<u32> {
    let perm = mode as u16 & 0o7777;
    if mode & 0o170000 == sawmill_path::S_IFSOCK {
        fs.mknod(dir, name, FileKind::Socket, perm, uid, gid, (0, 0))
    } else {
        fs.create(dir, name, perm, uid, gid)
    }
}
