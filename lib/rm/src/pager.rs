//! The region manager at run time: the attach API, the pager thread and the heap.
use crate::regions::{Fault, RegionErr, Regions, PAGE};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use sawmill_abi::{fault, label, map, rights, Error, MsgTag, ObjKind};
use sawmill_interfaces::rpc::{self, IpcResult, Next, Reply};
use sawmill_interfaces::{dataspace, mem, DsError, MapFlags};
use sawmill_rt::{env, ipc, println, slots, sys, thread};

pub use crate::regions::flags::{BORROWED, COW, EXEC, OWNED, READ, RIGHTS, SHARED, WRITE};

/// The address range the region manager hands out (1 TiB .. 32 TiB): clear of the fixed layout
/// root gives every server (environment, heap, stack, UTCBs below 4 GiB; mem's pool at 64 GiB).
pub const RM_BASE: u64 = 0x0000_0100_0000_0000;
pub const RM_END: u64 = 0x0000_2000_0000_0000;
/// The pager thread's scratch page (for copying copy-on-write pages), just below the range
/// unless [`configure`] puts it elsewhere.
static SCRATCH: AtomicU64 = AtomicU64::new(RM_BASE - PAGE);
/// Called with (address, fault bits, rip, why) for a fault the region manager cannot resolve,
/// instead of passing it on to root (0 = none). It does not return if it ends the task; if it
/// returns `Some(words)` the thread is diverted (`label::DIVERT` with those words), else the
/// fault goes on to root.
static UNRESOLVED_HOOK: AtomicU64 = AtomicU64::new(0);

/// Why the region manager could not resolve a fault (for [`set_unresolved_hook`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultWhy {
    /// No region covers the address.
    NoRegion,
    /// A region covers it without the rights the access needs.
    NoRights,
    /// The dataspace refused the page (e.g. beyond the end of a file).
    Dataspace,
    /// No memory for a private copy.
    NoMemory,
}

/// What a hook of [`set_unresolved_hook`] is.
pub type UnresolvedHook = fn(u64, u64, u64, FaultWhy) -> Option<[u64; 3]>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmError {
    /// Bad address, size, offset or flags.
    Invalid,
    /// Overlaps an attached region.
    Busy,
    /// No free range big enough.
    NoSpace,
    /// Nothing attached there.
    NotFound,
    /// `init` was not called (or failed).
    NotReady,
    /// A system call failed.
    Sys(Error),
    /// The dataspace (or mem) refused.
    Ds(rpc::Error<DsError>),
    Mem(rpc::Error<sawmill_interfaces::MemError>),
}

impl From<RegionErr> for RmError {
    fn from(e: RegionErr) -> RmError {
        match e {
            RegionErr::Invalid => RmError::Invalid,
            RegionErr::Busy => RmError::Busy,
            RegionErr::NoSpace => RmError::NoSpace,
            RegionErr::NotFound => RmError::NotFound,
        }
    }
}

/// A lock that yields while it waits: the holder may be a thread of the same priority that needs
/// the CPU to finish.
struct Lock<T> {
    busy: AtomicBool,
    v: UnsafeCell<T>,
}

// SAFETY: access to `v` is serialised by `busy`.
unsafe impl<T: Send> Sync for Lock<T> {}

struct Guard<'a, T>(&'a Lock<T>);

impl<T> Lock<T> {
    const fn new(v: T) -> Self {
        Lock {
            busy: AtomicBool::new(false),
            v: UnsafeCell::new(v),
        }
    }
    fn lock(&self) -> Guard<'_, T> {
        while self
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            sys::yield_now();
        }
        Guard(self)
    }
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: we hold the lock.
        unsafe { &*self.0.v.get() }
    }
}
impl<T> core::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: we hold the lock.
        unsafe { &mut *self.0.v.get() }
    }
}
impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

static REGIONS: Lock<Regions> = Lock::new(Regions::new(RM_BASE, RM_END));
/// Our endpoint that the threads we page fault to (0 = not initialised).
static EP: AtomicU64 = AtomicU64::new(0);
static NEXT_BADGE: AtomicU64 = AtomicU64::new(1);
/// The heap region, resolved without the region lock: the lock holder may itself be allocating
/// (and so faulting on a fresh heap page).
static HEAP_BASE: AtomicU64 = AtomicU64::new(0);
static HEAP_SIZE: AtomicU64 = AtomicU64::new(0);
static HEAP_DS: AtomicU64 = AtomicU64::new(0);
/// Faults resolved, and how many of them found the page already mapped.
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// Issue 16: addresses where a server lends us its pages and may die with them gone (the
/// file-system client's windows onto a PFS's cache, `set_lent_range`), the one-page
/// dataspace a fault there is resolved with instead, and how many such faults there were.
static LENT_BASE: AtomicU64 = AtomicU64::new(0);
static LENT_END: AtomicU64 = AtomicU64::new(0);
static LENT_DS: AtomicU64 = AtomicU64::new(0);
static LENT_FAULTS: AtomicU64 = AtomicU64::new(0);

/// After [`init`]: `[base, base + len)` holds pages other servers lend us by map items (not
/// regions of ours). A fault there means the lender took them back or died with them (a
/// restarted file-system server): instead of ending the task, the page is resolved with a
/// scratch page of our own (its contents meaningless) and [`lent_faults`] counts it, so the
/// borrower, which compares the count around its accesses, redoes them another way.
pub fn set_lent_range(base: u64, len: u64) -> Result<(), RmError> {
    if EP.load(Ordering::Acquire) == 0 {
        return Err(RmError::NotReady);
    }
    if LENT_BASE.load(Ordering::Acquire) != 0 {
        return Err(RmError::Busy);
    }
    // The scratch page is asked of mem at the first such fault (most tasks never have one).
    LENT_END.store(base.saturating_add(len), Ordering::Relaxed);
    LENT_BASE.store(base, Ordering::Release);
    Ok(())
}

/// Faults in the lent range so far (see [`set_lent_range`]).
#[inline(always)]
pub fn lent_faults() -> u64 {
    LENT_FAULTS.load(Ordering::Acquire)
}
static CACHED: AtomicU64 = AtomicU64::new(0);

/// Issue 16: how a file dataspace is opened again after its file system restarted: through
/// the VFS `vfs` (a session at its mount `mount`, for our own credentials), the inode `ino` of
/// generation `generation` (`pfs.open_inode`, read-only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reopen {
    /// The VFS to reopen through; 0: the environment's `vfs`, looked up when needed.
    pub vfs: u64,
    pub mount: u32,
    pub ino: u32,
    pub generation: u32,
}

/// Dataspace slots that are open files, with how to open each again (see [`set_reopen`]).
static REOPEN: Lock<alloc::vec::Vec<(u64, Reopen)>> = Lock::new(alloc::vec::Vec::new());
/// File dataspaces opened again after their server died.
static REOPENED: AtomicU64 = AtomicU64::new(0);

/// Dataspace slot `ds` is an open file (the file-system client's capability): if its server
/// dies, the next fault in a region of it opens the file again by `r` *into the same slot* and
/// maps the page from the new incarnation (the page contents are the file's), so a mapped
/// file — a program's text — survives a file-system restart. A file no longer there (`Stale`)
/// leaves the fault unresolved (the task's hook: a Linux process gets SIGBUS). Replaces an
/// earlier entry for the slot.
pub fn set_reopen(ds: u64, r: Reopen) {
    let mut g = REOPEN.lock();
    match g.iter_mut().find(|e| e.0 == ds) {
        Some(e) => e.1 = r,
        None => g.push((ds, r)),
    }
}

/// [`set_reopen`]'s entry for slot `ds`, if any (a `fork` hands it to the child).
pub fn reopen_of(ds: u64) -> Option<Reopen> {
    REOPEN.lock().iter().find(|e| e.0 == ds).map(|e| e.1)
}

/// Forgets [`set_reopen`]'s entry for slot `ds` (the file was closed: the slot may be reused).
pub fn clear_reopen(ds: u64) {
    REOPEN.lock().retain(|e| e.0 != ds);
}

/// File dataspaces opened again so far (see [`set_reopen`]).
pub fn reopened() -> u64 {
    REOPENED.load(Ordering::Acquire)
}

/// Whether a dataspace call failed because its server died (PeerGone/GONE) or its capability
/// was revoked with it (BadCap).
fn ds_gone(e: &Unresolved) -> bool {
    match e {
        Unresolved::Ds(x) => x.server_gone(),
        _ => false,
    }
}

/// Who puts a capability to the VFS's new incarnation into our VFS slot when the VFS restarted,
/// if root does not refill it (a Linux process: its copy came from proc; [`set_vfs_refill`]).
/// 0: none.
static VFS_REFILL: AtomicUsize = AtomicUsize::new(0);

/// How long a reopen waits for a restarting VFS (its backoff and start) before it gives up.
const VFS_WAIT_MS: u64 = 5000;

/// For a task whose VFS capability root does not refill (see `sawmill_fsclient`'s
/// `with_vfs_refill`, the same function): `refill(slot)` puts a capability to the VFS's new
/// incarnation into the emptied `slot` (true) or not yet (false). A mapped file's reopen
/// ([`set_reopen`]) that finds the VFS gone calls it, so a program faulting on its text before
/// any file call of its own still finds the VFS after a VFS and a PFS restart.
pub fn set_vfs_refill(refill: fn(u64) -> bool) {
    VFS_REFILL.store(refill as usize, Ordering::Release);
}

/// `vfs.mount` of mount `mount` into `session` (the session capability's slot); while the VFS is gone (its slot emptied by the
/// revocation, or the peer dead), the VFS slot is refilled ([`set_vfs_refill`]) and the call
/// made again, for at most [`VFS_WAIT_MS`].
fn vfs_mount(vfs: u64, mount: u32, session: u64) -> Option<u64> {
    let call = || sawmill_interfaces::vfs::Client::new(vfs).mount(mount, session);
    match call() {
        Ok(m) => return Some(m.s),
        Err(e) if e.server_gone() => {}
        Err(_) => return None,
    }
    let refill = VFS_REFILL.load(Ordering::Acquire);
    if refill == 0 {
        return None;
    }
    // SAFETY: the value was stored from a `fn(u64) -> bool` by set_vfs_refill.
    let refill: fn(u64) -> bool = unsafe { core::mem::transmute(refill) };
    let khz = sawmill_rt::clock::Wall::get().khz.max(1);
    let deadline = sys::rdtsc() + VFS_WAIT_MS * khz;
    while sys::rdtsc() < deadline {
        // Filled already (by the file library's own refill): the call is simply made again.
        refill(vfs);
        match call() {
            Ok(m) => return Some(m.s),
            Err(e) if e.server_gone() => sys::yield_now(),
            Err(_) => return None,
        }
    }
    None
}

/// Opens the file of slot `ds` again into the same slot (see [`set_reopen`]): true if done.
/// Another thread (the file-system client's own recovery) may have done it meanwhile: then the
/// slot answers and nothing is to be done.
fn reopen(ds: u64) -> bool {
    let Some(r) = REOPEN.lock().iter().find(|e| e.0 == ds).map(|e| e.1) else {
        return false;
    };
    if dataspace::Client::new(ds).info().is_ok() {
        return true;
    }
    // Only the pager thread reopens: one slot for the session, kept empty between reopens.
    static SESSION: AtomicU64 = AtomicU64::new(0);
    let session = match SESSION.load(Ordering::Relaxed) {
        0 => {
            let s = thread::alloc_slot();
            SESSION.store(s, Ordering::Relaxed);
            s
        }
        s => s,
    };
    // The VFS waits for the restarted file system before it answers.
    // 0: the environment's "vfs", looked up only now (a fork child registers its mapped files
    // without walking its environment).
    let vfs = match r.vfs {
        0 => env::cap("vfs").unwrap_or(0),
        v => v,
    };
    let Some(m_session) = vfs_mount(vfs, r.mount, session) else {
        return false;
    };
    let _ = sys::cap_delete(ds);
    let opened = sawmill_interfaces::pfs::Client::new(m_session).open_inode(
        r.ino,
        r.generation,
        sawmill_interfaces::OpenFlags::READ,
        ds,
    );
    let _ = sys::cap_delete(m_session);
    match opened {
        Ok(_) => {
            REOPENED.fetch_add(1, Ordering::AcqRel);
            true
        }
        Err(e) => {
            println!(
                "rm: {}: a mapped file cannot be opened again after its file system restarted: {:?}",
                env::name(),
                e
            );
            false
        }
    }
}

/// Opens again every registered file ([`set_reopen`]) whose server died, now rather than at
/// its next fault (a `fork` must hand the child a live capability). Returns how many.
pub fn revive_files() -> u64 {
    let slots: alloc::vec::Vec<u64> = REOPEN.lock().iter().map(|e| e.0).collect();
    let before = REOPENED.load(Ordering::Acquire);
    for ds in slots {
        reopen(ds);
    }
    REOPENED.load(Ordering::Acquire) - before
}

/// [`ds_map`], and once more after opening the file again if its server died ([`set_reopen`]).
#[inline(always)]
fn ds_map_again(
    ds: u64,
    offset: u64,
    page: u64,
    pages: u64,
    rfl: u32,
    need_write: bool,
) -> Result<(bool, u64), Unresolved> {
    match ds_map_around(ds, offset, page, pages, rfl, need_write) {
        Err(e) => ds_map_reopened(e, ds, offset, page, rfl, need_write).map(|w| (w, 1)),
        r => r,
    }
}

/// [`ds_map_again`]'s second try, out of line: the common fault path stays as it was.
#[cold]
#[inline(never)]
fn ds_map_reopened(
    e: Unresolved,
    ds: u64,
    offset: u64,
    page: u64,
    rfl: u32,
    need_write: bool,
) -> Result<bool, Unresolved> {
    if ds_gone(&e) && reopen(ds) {
        ds_map(ds, offset, page, rfl, need_write)
    } else {
        Err(e)
    }
}

/// mem's slot, looked up once (the environment stays as it is while the program runs, and a
/// lookup by name walks every record: ~1.2k instructions at every anonymous `mmap`, first
/// copy-on-write fault of a region and start). 0: not yet; `u64::MAX`: none.
static MEM_CAP: AtomicU64 = AtomicU64::new(0);

/// Records mem's slot as the environment names it (`None`: it names none), for a program that
/// reads every record in one pass at its start: [`mem`] then looks nothing up.
pub fn note_mem(cap: Option<u64>) {
    MEM_CAP.store(cap.unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// The memory server, if the manifest lets us use it (`uses = [{ endpoint = "mem", ... }]`).
pub fn mem() -> Option<mem::Client> {
    let cap = match MEM_CAP.load(Ordering::Relaxed) {
        0 => {
            let found = env::cap(mem::NAME).unwrap_or(u64::MAX);
            MEM_CAP.store(found, Ordering::Relaxed);
            found
        }
        c => c,
    };
    (cap != u64::MAX).then(|| mem::Client::new(cap))
}

/// Starts the region manager: creates its endpoint and pager thread and makes it the pager of
/// the calling (main) thread. Needs a kernel-memory factory (`kmem_kb` in the manifest).
/// Faults outside every region, and faults the region manager cannot resolve, are passed on to
/// root (the task's original pager), which reports them and ends the task.
pub fn init() -> Result<(), RmError> {
    if EP.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let ep = thread::create(ObjKind::Endpoint, 0).map_err(RmError::Sys)?;
    EP.store(ep, Ordering::Release);
    // The pager thread's own faults (there should be none: its stack is touched before it starts
    // and it allocates nothing) go to root.
    thread::spawn(254, 16 * 1024, move || pager_loop(ep)).map_err(RmError::Sys)?;
    page_thread(slots::THREAD)
}

/// Before [`init`]: manage `[lo, hi)` instead of `[RM_BASE, RM_END)`, place attachments without
/// an address in `[auto_lo, auto_hi)`, and use the page at `scratch` (outside every region) for
/// copies. For tasks with another layout (a Linux process's library).
pub fn configure(
    lo: u64,
    hi: u64,
    auto_lo: u64,
    auto_hi: u64,
    scratch: u64,
) -> Result<(), RmError> {
    if EP.load(Ordering::Acquire) != 0 || !scratch.is_multiple_of(PAGE) {
        return Err(RmError::Invalid);
    }
    REGIONS.lock().set_range(lo, hi, auto_lo, auto_hi)?;
    SCRATCH.store(scratch, Ordering::Relaxed);
    Ok(())
}

/// Calls `hook(address, fault bits, rip, why)` for faults the region manager cannot resolve;
/// its `Some(words)` diverts the faulting thread (`label::DIVERT`), None passes the fault on to
/// root.
pub fn set_unresolved_hook(hook: UnresolvedHook) {
    UNRESOLVED_HOOK.store(hook as usize as u64, Ordering::Release);
}

/// Frees the dataspaces of removed regions that no region uses any more: shadows always, the
/// source when the region manager owns it.
fn release(gone: &[crate::regions::Region]) {
    for r in gone {
        let _ = sys::unmap(r.start, r.pages(), sawmill_abi::UNMAP_SELF);
    }
    free_dataspaces(gone);
}

/// Frees the dataspaces of removed regions that no region uses any more (without unmapping:
/// see [`release`] and [`detach_range_ending`]).
fn free_dataspaces(gone: &[crate::regions::Region]) {
    let g = REGIONS.lock();
    let mut freed: alloc::vec::Vec<u64> = alloc::vec::Vec::new();
    for r in gone {
        if r.flags & BORROWED != 0 {
            continue;
        }
        let mut drop = alloc::vec::Vec::new();
        if r.shadow != 0 {
            drop.push(r.shadow);
        }
        if r.flags & (OWNED | SHARED) != 0 {
            drop.push(r.ds);
        }
        for ds in drop {
            if !g.uses(ds) && !freed.contains(&ds) {
                freed.push(ds);
            }
        }
    }
    let shared: alloc::vec::Vec<u64> = gone
        .iter()
        .filter(|r| r.flags & SHARED != 0)
        .map(|r| r.ds)
        .collect();
    core::mem::drop(g);
    for ds in freed {
        // A shared dataspace goes only with its last task; the others drop their capability.
        if shared.contains(&ds) && share(ds, -1).map_or(true, |left| left > 0) {
            let _ = sys::cap_delete(ds);
            continue;
        }
        let _ = dataspace::Client::new(ds).free();
        let _ = sys::cap_delete(ds);
    }
}

/// Adds `delta` to the count of tasks using shared dataspace `ds` (flag [`SHARED`]: the count
/// is a u64 in its first page, which no region attaches); returns the count after. A new
/// shared dataspace starts at 1 (its creator); `fork` adds 1 for the child before handing it on.
/// The count is changed atomically, as the tasks sharing it may run at once.
pub fn share(ds: u64, delta: i64) -> Result<u64, RmError> {
    let at = attach(ds, 0, PAGE, None, READ | WRITE)?;
    // SAFETY: the first page of `ds`, attached read-write just above; a u64 at its start, only
    // ever changed atomically.
    let count = unsafe { &*(at as *const core::sync::atomic::AtomicU64) };
    let after = if delta >= 0 {
        count.fetch_add(delta as u64, Ordering::AcqRel) + delta as u64
    } else {
        count
            .fetch_sub(delta.unsigned_abs(), Ordering::AcqRel)
            .saturating_sub(delta.unsigned_abs())
    };
    let r = REGIONS.lock().detach(at)?;
    let _ = sys::unmap(r.start, r.pages(), sawmill_abi::UNMAP_SELF);
    Ok(after)
}

/// Detaches everything in `[addr, addr + len)` (page multiples), splitting regions that
/// straddle its ends; pages go, and dataspaces no region uses any more are freed (shadows, and
/// owned sources).
pub fn detach_range(addr: u64, len: u64) -> Result<(), RmError> {
    let gone = REGIONS.lock().remove_range(addr, len)?;
    release(&gone);
    Ok(())
}

/// [`detach_range`] for a task that is ending: the regions go and their dataspaces are freed
/// (their memory back to `mem` now), but nothing is unmapped: the kernel removes the whole
/// address space with the task, and `mem` revokes the mappings of the frames it takes back.
/// Unmapping would visit every page of every region (2,048 for a Linux stack: most of the
/// cost of a process's exit).
pub fn detach_range_ending(addr: u64, len: u64) -> Result<(), RmError> {
    let gone = REGIONS.lock().remove_range(addr, len)?;
    free_dataspaces(&gone);
    Ok(())
}

/// Changes the rights of `[addr, addr + len)` (attached without a gap) to `rights`
/// (READ | WRITE | EXEC, or 0 for none); the pages are unmapped so that the next access faults
/// and is checked against the new rights.
pub fn protect(addr: u64, len: u64, rights: u32) -> Result<(), RmError> {
    REGIONS.lock().protect(addr, len, rights)?;
    let _ = sys::unmap(addr, len / PAGE, sawmill_abi::UNMAP_SELF);
    Ok(())
}

/// What is attached at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub start: u64,
    pub end: u64,
    pub flags: u32,
    /// The dataspace slot and the byte offset in it of `start`.
    pub ds: u64,
    pub offset: u64,
}

/// The region at `addr`.
pub fn region_info(addr: u64) -> Option<RegionInfo> {
    REGIONS.lock().lookup(addr).map(|r| RegionInfo {
        start: r.start,
        end: r.end(),
        flags: r.flags,
        ds: r.ds,
        offset: r.offset,
    })
}

/// Every attached range, `(start, end)`, in address order.
pub fn ranges() -> alloc::vec::Vec<(u64, u64)> {
    REGIONS.lock().iter().map(|r| (r.start, r.end())).collect()
}

/// Moves everything attached in `[addr, addr + len)` to `[to, to + len)` (free): `mremap`.
pub fn relocate(addr: u64, len: u64, to: u64) -> Result<(), RmError> {
    REGIONS.lock().relocate(addr, len, to)?;
    let _ = sys::unmap(addr, len / PAGE, sawmill_abi::UNMAP_SELF);
    Ok(())
}

/// One region as [`snapshot`] reports it: enough to attach the same memory elsewhere
/// ([`adopt`], in a `fork` child).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionSnap {
    pub start: u64,
    pub size: u64,
    /// The dataspace slot and the byte offset in it of `start`.
    pub ds: u64,
    pub offset: u64,
    pub flags: u32,
    /// A COW region's private pages: their dataspace (0 = none yet), the offset in it of
    /// `start`, and which pages live there (1 bit per page).
    pub shadow: u64,
    pub shadow_offset: u64,
    pub private: alloc::vec::Vec<u64>,
}

/// Every region in `[lo, hi)`, in address order (for `fork`).
pub fn snapshot(lo: u64, hi: u64) -> alloc::vec::Vec<RegionSnap> {
    REGIONS
        .lock()
        .iter()
        .filter(|r| r.start >= lo && r.end() <= hi)
        .map(|r| RegionSnap {
            start: r.start,
            size: r.size,
            ds: r.ds,
            offset: r.offset,
            flags: r.flags,
            shadow: r.shadow,
            shadow_offset: r.shadow_offset,
            private: r.private_bits().to_vec(),
        })
        .collect()
}

/// Attaches a region of a snapshot (with dataspace and shadow slots of this task): nothing is
/// mapped until touched.
pub fn adopt(r: &RegionSnap) -> Result<(), RmError> {
    if EP.load(Ordering::Acquire) == 0 {
        return Err(RmError::NotReady);
    }
    Ok(REGIONS.lock().adopt(
        r.start,
        r.size,
        r.ds,
        r.offset,
        r.flags,
        r.shadow,
        r.shadow_offset,
        &r.private,
    )?)
}

/// The pages of `[addr, addr + len)` are no longer mapped here (their dataspace revoked them,
/// e.g. a `dataspace.copy` made them copy-on-write): unmaps them and forgets them, so the next
/// access faults and maps them again.
pub fn forget(addr: u64, len: u64) {
    let runs = {
        let mut g = REGIONS.lock();
        let runs = g.resident_runs(addr, len);
        g.forget(addr, len);
        runs
    };
    // Only what we mapped is there to unmap.
    for (a, pages) in runs {
        let _ = sys::unmap(a, pages, sawmill_abi::UNMAP_SELF);
    }
}

/// The pages of `[addr, addr + len)` are still mapped here but read-only (their dataspace
/// lowered them: a `dataspace.copy` made them copy-on-write): reads go on without a fault, the
/// next write maps its page again.
pub fn write_protected(addr: u64, len: u64) {
    REGIONS.lock().write_protected(addr, len);
}

/// Whether `[addr, addr + len)` is attached without a gap with at least the flags `need`.
pub fn covered(addr: u64, len: u64, need: u32) -> bool {
    REGIONS.lock().covered(addr, len, need)
}

/// Makes the region manager the pager of thread `th` (a slot of this task).
pub fn page_thread(th: u64) -> Result<(), RmError> {
    let ep = EP.load(Ordering::Acquire);
    if ep == 0 {
        return Err(RmError::NotReady);
    }
    let pcap = thread::alloc_slot();
    let badge = NEXT_BADGE.fetch_add(1, Ordering::Relaxed);
    sys::cap_mint(ep, pcap, badge, rights::SEND).map_err(RmError::Sys)?;
    // u64::MAX: keep the task and the exception handler; 254 is capped at our ceiling.
    sys::thread_config(th, u64::MAX, 0, pcap, u64::MAX, 254).map_err(RmError::Sys)
}

/// A pager capability for threads the caller configures itself (`thread_config`), minted once
/// and shared by all of them (a Linux program's threads, which come and go: one slot, not one
/// per thread).
pub fn shared_pager_cap() -> Result<u64, RmError> {
    let have = SHARED_PAGER.load(Ordering::Acquire);
    if have != 0 {
        return Ok(have);
    }
    let ep = EP.load(Ordering::Acquire);
    if ep == 0 {
        return Err(RmError::NotReady);
    }
    let pcap = thread::alloc_slot();
    let badge = NEXT_BADGE.fetch_add(1, Ordering::Relaxed);
    sys::cap_mint(ep, pcap, badge, rights::SEND).map_err(RmError::Sys)?;
    SHARED_PAGER.store(pcap, Ordering::Release);
    Ok(pcap)
}

static SHARED_PAGER: AtomicU64 = AtomicU64::new(0);

/// Starts a thread running `f`, paged by the region manager. (When `f` returns, the thread exits,
/// and root ends the whole task, as for any server thread.)
pub fn spawn(stack: usize, f: impl FnOnce() + Send + 'static) -> Result<u64, RmError> {
    let go = alloc::sync::Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    // The thread waits (touching nothing new) until its pager is switched.
    let th = thread::spawn(254, stack, move || {
        while !go2.load(Ordering::Acquire) {
            sys::yield_now();
        }
        f()
    })
    .map_err(RmError::Sys)?;
    let r = page_thread(th);
    go.store(true, Ordering::Release);
    r.map(|_| th)
}

/// Attaches `size` bytes of dataspace `ds` (a capability slot; the region manager does not take
/// it over) from byte `offset` at address `at`, or anywhere if None. `fl`: READ | WRITE | EXEC
/// | COW | OWNED | SHARED (0 rights: a reserved range, every access faults). Size and offset are page multiples; the dataspace checks its bounds at fault time (so
/// attaching never waits for its manager).
pub fn attach(ds: u64, offset: u64, size: u64, at: Option<u64>, fl: u32) -> Result<u64, RmError> {
    if EP.load(Ordering::Acquire) == 0 {
        return Err(RmError::NotReady);
    }
    // No rights at all is a reserved range (PROT_NONE); writable or executable implies readable.
    if fl & !(READ | WRITE | EXEC | COW | OWNED | SHARED) != 0
        || (fl & (WRITE | EXEC) != 0 && fl & READ == 0)
    {
        return Err(RmError::Invalid);
    }
    let align = if size >= 0x20_0000 { 0x20_0000 } else { PAGE };
    Ok(REGIONS.lock().attach(at, size, align, ds, offset, fl)?)
}

/// Attaches a whole dataspace (its size from `dataspace.info`) anywhere.
pub fn attach_all(ds: u64, fl: u32) -> Result<u64, RmError> {
    let info = dataspace::Client::new(ds).info().map_err(RmError::Ds)?;
    attach(ds, 0, info.size, None, fl)
}

/// Detaches the region that starts at `addr`: its pages are unmapped here (the dataspace keeps
/// them), a copy-on-write region's private pages are freed. Returns the dataspace slot, which
/// stays the caller's.
pub fn detach(addr: u64) -> Result<u64, RmError> {
    let r = REGIONS.lock().detach(addr)?;
    let ds = r.ds;
    release(&[r]);
    Ok(ds)
}

/// Maps every page of `[addr, addr + len)` now, from the calling thread (no faults): for memory
/// that must not fault later (e.g. used by the pager thread itself). A page the region map
/// says we hold (with write access, for `write`) is taken as held, without asking the kernel:
/// the pipe server populates each new pipe's ring, which it has held since an earlier pipe,
/// and a `translate` a page was ~40 system calls a pipe. (Its manager may have revoked it
/// since, unseen: then the next touch faults and is resolved as any fault is. Memory the pager
/// thread uses is mem's, which revokes nothing of a dataspace still attached.)
pub fn populate(addr: u64, len: u64, write: bool) -> Result<(), RmError> {
    let mut a = addr & !(PAGE - 1);
    while a < addr.saturating_add(len) {
        if REGIONS.lock().fault(a, write) != Fault::Cached {
            resolve(a, write).map_err(|_| RmError::Invalid)?;
        }
        a += PAGE;
    }
    Ok(())
}

/// (faults resolved, faults that found the page already mapped)
pub fn stats() -> (u64, u64) {
    (
        FAULTS.load(Ordering::Relaxed),
        CACHED.load(Ordering::Relaxed),
    )
}

/// Gives the task a heap of up to `size` bytes on a fresh anonymous dataspace of mem, paged in
/// (and charged to this task) only as it is used. Call once, after `init`.
pub fn init_heap(size: u64) -> Result<(), RmError> {
    if HEAP_BASE.load(Ordering::Acquire) != 0 {
        return Err(RmError::Busy);
    }
    let m = mem().ok_or(RmError::NotReady)?;
    let size = (size + PAGE - 1) & !(PAGE - 1);
    let ds = m
        .alloc(size, 0, thread::alloc_slot())
        .map_err(RmError::Mem)?;
    install_heap(ds, size)
}

/// As [`init_heap`], on dataspace `ds` someone else allocated (and frees once the task is gone:
/// a Linux process's heap is proc's, `HEAP_CAP`), all of it.
pub fn init_heap_from(ds: u64) -> Result<(), RmError> {
    if HEAP_BASE.load(Ordering::Acquire) != 0 {
        return Err(RmError::Busy);
    }
    let size = dataspace::Client::new(ds).info().map_err(RmError::Ds)?.size;
    install_heap(ds, size & !(PAGE - 1))
}

/// Attaches heap dataspace `ds` of `size` bytes and gives it to the allocator.
fn install_heap(ds: u64, size: u64) -> Result<(), RmError> {
    let base = attach(ds, 0, size, None, READ | WRITE)?;
    HEAP_DS.store(ds, Ordering::Relaxed);
    HEAP_SIZE.store(size, Ordering::Relaxed);
    HEAP_BASE.store(base, Ordering::Release);
    // Given to the allocator only once the heap it has runs out: most programs (a Linux
    // process's library) never touch it then, not even the first and last words a claim writes.
    // SAFETY: the range is ours alone from now on, attached read-write and paged on demand.
    unsafe { sawmill_rt::heap_reserve(base, size) };
    Ok(())
}

/// Why a fault could not be resolved.
enum Unresolved {
    NoRegion,
    ReadOnly(u64, u64),
    Ds(rpc::Error<DsError>),
    Mem,
}

fn ds_map(ds: u64, offset: u64, page: u64, rfl: u32, need_write: bool) -> Result<bool, Unresolved> {
    ds_map_around(ds, offset, page, 1, rfl, need_write).map(|(w, _)| w)
}

/// Maps page `offset` of `ds` at `page` and, as the dataspace has them at hand, up to `pages`
/// pages from there on (fault-around: the receive window spans them all). Returns whether the
/// mapping is writable and how many pages came (at least the first; never more than asked,
/// the window sees to that).
fn ds_map_around(
    ds: u64,
    offset: u64,
    page: u64,
    pages: u64,
    rfl: u32,
    need_write: bool,
) -> Result<(bool, u64), Unresolved> {
    let mut fl = MapFlags::from_bits_truncate((rfl & (READ | WRITE | EXEC)) as u64);
    if need_write {
        fl |= MapFlags::NEED_WRITE;
    }
    // Fault-around asks for no more than a manager answers with.
    const _: () = assert!(crate::regions::FAULT_AROUND <= dataspace::MAP_AROUND_MAX);
    // READ/WRITE/EXEC have the values of sawmill_abi::map's.
    const _: () =
        assert!(READ as u64 == map::READ && WRITE as u64 == map::WRITE && EXEC as u64 == map::EXEC);
    let m = dataspace::Client::new(ds)
        .map(offset, page, pages, fl, [page, pages * PAGE])
        .map_err(Unresolved::Ds)?;
    Ok((m.flags & map::WRITE != 0, m.pages.clamp(1, pages)))
}

/// A fault outside our heap and regions: in the lent range ([`set_lent_range`]) it is resolved
/// with the scratch page and counted; anywhere else it is unresolved.
#[cold]
#[inline(never)]
fn lent_fault(page: u64, write: bool) -> Result<(), Unresolved> {
    let lb = LENT_BASE.load(Ordering::Acquire);
    if lb == 0 || page < lb || page >= LENT_END.load(Ordering::Relaxed) {
        return Err(Unresolved::NoRegion);
    }
    // Counted first: the borrower must see it once it runs again.
    LENT_FAULTS.fetch_add(1, Ordering::AcqRel);
    let mut ds = LENT_DS.load(Ordering::Relaxed);
    if ds == 0 {
        // Only this (the pager) thread resolves faults: no race for the first one.
        ds = mem()
            .ok_or(Unresolved::Mem)?
            .alloc(PAGE, 0, thread::alloc_slot())
            .map_err(|_| Unresolved::Mem)?;
        LENT_DS.store(ds, Ordering::Relaxed);
    }
    ds_map(ds, 0, page, READ | WRITE, write)?;
    Ok(())
}

/// The page of the last write fault let run again without mapping ([`resolve`]).
static RETRIED_WRITE: AtomicU64 = AtomicU64::new(u64::MAX);

/// Whether a write fault on `page`, mapped writable by us and still mapped, is to be let run
/// again: yes unless the last write fault so let was on the same page (then the page really is
/// read-only now and must be mapped again).
fn first_write_retry(page: u64) -> bool {
    RETRIED_WRITE.swap(page, Ordering::Relaxed) != page || {
        RETRIED_WRITE.store(u64::MAX, Ordering::Relaxed);
        false
    }
}

/// Resolves a fault at `addr` from the calling thread.
fn resolve(addr: u64, write: bool) -> Result<(), Unresolved> {
    let page = addr & !(PAGE - 1);
    let hb = HEAP_BASE.load(Ordering::Acquire);
    if hb != 0 && page >= hb && page < hb + HEAP_SIZE.load(Ordering::Relaxed) {
        ds_map(
            HEAP_DS.load(Ordering::Relaxed),
            page - hb,
            page,
            READ | WRITE,
            write,
        )?;
        return Ok(());
    }
    let mut f = REGIONS.lock().fault(addr, write);
    if f == Fault::Cached {
        // We mapped it before; if it is still there another thread's fault resolved it, else
        // its manager revoked it meanwhile and we must ask again. A write to a page we mapped
        // writable may also find it lowered to read-only (see `write_protected`), which
        // `translate` does not tell. But most such write faults are spurious: the processor
        // still held the page's read-only entry from before it became writable, and the
        // instruction run again succeeds (mapping every one again made `net.tcp.connect` 45%
        // dearer). So a write is let run again once; a second write fault in a row on the same
        // page maps it again.
        if sys::translate(page).is_ok() && (!write || first_write_retry(page)) {
            CACHED.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let mut g = REGIONS.lock();
        g.forget(page, PAGE);
        f = g.fault(addr, write);
    }
    match f {
        // The lent range is no region of ours: looked at only here, off the common path.
        Fault::Unmapped => lent_fault(page, write),
        Fault::Denied { start, size, .. } => Err(Unresolved::ReadOnly(start, size)),
        Fault::Cached => Ok(()),
        Fault::Map {
            id,
            ds,
            offset,
            page,
            pages,
            flags: fl,
        } => {
            let (w, got) = ds_map_again(ds, offset, page, pages, fl, write)?;
            REGIONS.lock().mapped(id, page, got, w);
            Ok(())
        }
        Fault::Copy {
            id,
            ds,
            offset,
            shadow,
            shadow_offset,
            page,
            mapped,
        } => {
            let shadow = if shadow != 0 {
                shadow
            } else {
                let size = REGIONS.lock().lookup(page).map_or(0, |r| r.size);
                let m = mem().ok_or(Unresolved::Mem)?;
                let s = m
                    .alloc(size, 0, thread::alloc_slot())
                    .map_err(|_| Unresolved::Mem)?;
                if !REGIONS.lock().set_shadow(id, s) {
                    let _ = dataspace::Client::new(s).free();
                    let _ = sys::cap_delete(s);
                    return Err(Unresolved::NoRegion);
                }
                s
            };
            // A source page mapped before may have gone with a dead file system's memory.
            if !mapped || sys::translate(page).is_err() {
                ds_map_again(ds, offset, page, 1, READ, false)?;
            }
            let scratch = SCRATCH.load(Ordering::Relaxed);
            ds_map(shadow, shadow_offset, scratch, READ | WRITE, true)?;
            copy_source(ds, offset, page, scratch)?;
            // Move the private page from the scratch address to its place.
            sys::task_map(
                slots::TASK,
                scratch,
                page,
                1,
                map::READ | map::WRITE | map::GRANT,
            )
            .map_err(|_| Unresolved::Mem)?;
            REGIONS.lock().copied(id, page, shadow);
            Ok(())
        }
    }
}

/// Copies the source page mapped at `page` (from `ds` at `offset`) to `scratch`. A file's page
/// is copied by the kernel (`page_copy`): its file system may die during the copy, and a page
/// revoked under a copy of our own would fault in this thread, which nobody pages but root or
/// proc (the process would be killed). The kernel copy fails instead; the file is then opened
/// again ([`set_reopen`]) and the copy made from the new incarnation's page. Other
/// dataspaces (memory's, for anonymous copy-on-write) are not lent by a server that restarts:
/// copied here, without a system call.
fn copy_source(ds: u64, offset: u64, page: u64, scratch: u64) -> Result<(), Unresolved> {
    if reopen_of(ds).is_none() {
        // SAFETY: `page` (the source, read-only) and SCRATCH (the private copy) are both
        // mapped in this task now; only this thread uses SCRATCH.
        unsafe {
            core::ptr::copy_nonoverlapping(page as *const u8, scratch as *mut u8, PAGE as usize)
        };
        return Ok(());
    }
    if sys::page_copy(page, scratch).is_ok() {
        return Ok(());
    }
    // The source went with its file system: map it from the new incarnation and copy again.
    if !reopen(ds) {
        return Err(Unresolved::Ds(rpc::Error::Gone));
    }
    ds_map(ds, offset, page, READ, false)?;
    sys::page_copy(page, scratch).map_err(|_| Unresolved::Ds(rpc::Error::Gone))
}

/// The pager thread as the runtime's loop serves it: the kernel's `PAGE_FAULT` messages of the
/// threads it pages (the badge names the thread).
struct Pager;

impl rpc::Serve for Pager {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        let r = if m.tag.label() == label::PAGE_FAULT {
            handle(m.badge, m.w[0], m.w[1], m.w[2])
        } else {
            Reply::label(rpc::proto::BAD_OPCODE)
        };
        next.reply_plain(r)
    }
}

fn pager_loop(ep: u64) {
    let _ = rpc::serve(ep, &mut Pager);
}

/// Resolves one fault; the reply (label 0 resumes the thread).
fn handle(thread: u64, addr: u64, bits: u64, rip: u64) -> Reply {
    let write = bits & fault::WRITE != 0;
    FAULTS.fetch_add(1, Ordering::Relaxed);
    match resolve(addr, write) {
        Ok(()) => Reply::EMPTY,
        Err(why) => {
            let name = env::name();
            let what = if write { "write" } else { "read" };
            match &why {
                Unresolved::NoRegion => {}
                Unresolved::ReadOnly(s, n) => {
                    println!("rm: {}: thread {} wrote to read-only region {:#x}+{:#x} at {:#x} (rip {:#x})", name, thread, s, n, addr, rip)
                }
                Unresolved::Ds(e) => println!(
                    "rm: {}: thread {}: {} fault at {:#x}: dataspace refused: {:?}",
                    name, thread, what, addr, e
                ),
                Unresolved::Mem => println!(
                    "rm: {}: thread {}: {} fault at {:#x}: no memory for a copy",
                    name, thread, what, addr
                ),
            }
            let hook = UNRESOLVED_HOOK.load(Ordering::Acquire);
            if hook != 0 {
                let kind = match &why {
                    Unresolved::NoRegion => FaultWhy::NoRegion,
                    Unresolved::ReadOnly(..) => FaultWhy::NoRights,
                    Unresolved::Ds(_) => FaultWhy::Dataspace,
                    Unresolved::Mem => FaultWhy::NoMemory,
                };
                // SAFETY: the value was stored from an `UnresolvedHook` by set_unresolved_hook.
                let f: UnresolvedHook = unsafe { core::mem::transmute(hook as usize) };
                if let Some(w) = f(addr, bits, rip, kind) {
                    return Reply {
                        tag: MsgTag::new(label::DIVERT, 3),
                        w: [w[0], w[1], w[2], 0],
                    };
                }
            }
            // Root reports it like any unresolved fault and ends the task.
            let r = ipc::call(
                slots::PAGER,
                MsgTag::new(label::PAGE_FAULT, 3),
                [addr, bits, rip, 0],
            );
            Reply::label(if r.err == 0 && r.tag.label() != 0 {
                r.tag.label()
            } else {
                1
            })
        }
    }
}
