//! Kernel objects, capabilities and their lifetimes, and quota accounting.
//!
//! Objects live on the kernel heap and are named by raw pointers inside the kernel; user space
//! names them only through capability slots. Each object counts the capabilities (and kernel
//! references such as a thread's pager) that point at it; when the count drops to zero it is
//! destroyed and its memory returned to the factory it was charged to. Destruction that releases
//! further references goes through a work list, never recursion.
use crate::arch::Frame;
use crate::mem::{phys, PAGE};
use crate::paging;
use alloc::boxed::Box;
use alloc::vec::Vec;
use sawmill_abi::Error;
use sawmill_kcore::cspace::{CSpace, CsError, SlotId};
use sawmill_kcore::mapdb::{MapDb, Mapping};

/// What a capability points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Obj {
    Task(*mut Task),
    Thread(*mut Thread),
    Endpoint(*mut Endpoint),
    Notification(*mut Notification),
    Factory(*mut Factory),
    Irq(u8),
    IrqControl,
    IoControl,
    Control,
    /// The kernel debug console: `DebugWrite` needs it.
    Console,
}

#[derive(Clone, Copy, Debug)]
pub struct Cap {
    pub obj: Obj,
    pub rights: u64,
    pub badge: u64,
}

/// Common header: reference count and where the memory was charged.
pub struct Hdr {
    pub refs: u32,
    pub factory: *mut Factory,
    pub charge: u64,
}

pub struct Factory {
    pub hdr: Hdr,
    pub limit: u64,
    pub used: u64,
}

pub struct Task {
    pub hdr: Hdr,
    pub id: u32,
    pub pml4: u64,
    pub table: u32,
    /// Direct view of `table` for lookups (valid while the task lives; emptied when it dies).
    pub slots: sawmill_kcore::cspace::TableView<Cap>,
    pub threads: Vec<*mut Thread>,
    pub io: Option<Box<[u8; 8192]>>,
    pub dead: bool,
    /// Page-table frames and mapping nodes charged to `hdr.factory`.
    pub pt_frames: u64,
    pub nodes: u64,
    /// Highest priority its threads may be given by this task.
    pub max_prio: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created, not started.
    Inactive,
    /// Runnable (in a ready queue, or current).
    Ready,
    /// Waiting to send on `ep`.
    Sending,
    /// Waiting for a message on `ep`.
    Receiving,
    /// Waiting for the reply of `server`.
    AwaitReply,
    /// Waiting on a notification.
    Notify,
    Dead,
}

/// A message the kernel sends on a thread's behalf.
#[derive(Clone, Copy, Debug)]
pub struct KMsg {
    pub label: u16,
    pub w: [u64; 4],
}

#[repr(C, align(16))]
pub struct FxArea(pub [u8; 512]);

#[repr(C)]
pub struct Thread {
    /// Must stay first: entry stubs save user registers here.
    pub frame: Frame,
    pub fx: FxArea,
    pub hdr: Hdr,
    pub task: *mut Task,
    pub state: State,
    pub prio: u8,
    pub slice: u32,
    pub utcb_pa: u64,
    pub utcb_va: u64,
    pub pager: Option<Cap>,
    pub exc: Option<Cap>,
    /// Endpoint queue or ready queue links (a thread is in at most one queue).
    pub next: *mut Thread,
    pub prev: *mut Thread,
    pub ep: *mut Endpoint,
    /// Sending: the badge and rights of the capability used; whether a reply is awaited.
    pub send_badge: u64,
    pub send_grant: bool,
    pub send_call: bool,
    /// A kernel-made message (fault, exception, exit) this thread is sending.
    pub kmsg: Option<KMsg>,
    /// The thread whose request this thread is serving.
    pub caller: *mut Thread,
    /// The thread this thread awaits a reply from.
    pub server: *mut Thread,
    pub notif: *mut Notification,
    pub fs_base: u64,
    pub gs_base: u64,
    /// Foreign (Linux) mode: reflection entry and the native code range.
    pub foreign: Option<(u64, u64, u64)>,
    pub started: bool,
    /// Ended, but its EXIT message still waits in its handler's endpoint queue.
    pub zombie: bool,
}

pub struct Endpoint {
    pub hdr: Hdr,
    pub send_head: *mut Thread,
    pub recv_head: *mut Thread,
}

pub struct Notification {
    pub hdr: Hdr,
    pub bits: u64,
    pub waiter: *mut Thread,
}

#[derive(Clone, Copy)]
pub struct IrqLine {
    pub notif: *mut Notification,
    pub bits: u64,
    /// Capabilities naming this line; when the last goes, the line is masked and unbound.
    pub caps: u32,
}

pub const NPRIO: usize = 256;
/// Fixed sizes of the kernel's bookkeeping arrays, allocated once at boot so that the kernel's
/// free-memory figure moves only with objects and page tables (which quotas account for).
pub const MAX_TASKS: usize = 512;
pub const MAX_MAPPINGS: usize = 131072;

/// All kernel state. One instance; the kernel runs on one CPU with interrupts disabled, so a
/// plain mutable global is sound (see `k()`).
pub struct Kernel {
    pub cspace: CSpace<Cap>,
    pub mapdb: MapDb,
    pub tasks: Vec<*mut Task>,
    pub current: *mut Thread,
    pub ready_head: [*mut Thread; NPRIO],
    pub ready_tail: [*mut Thread; NPRIO],
    pub ready_bits: [u64; 4],
    /// Threads in the ready queues (not counting the current one): the IPC fast path's one test.
    pub ready_n: u32,
    pub io_loaded: *mut Task,
    /// CR0.TS is clear or an I/O bitmap is loaded: a switch must look at both (kept by
    /// `note_extra` wherever either changes, so that a switch tests one flag).
    pub extra_loaded: bool,
    pub fpu_owner: *mut Thread,
    pub loaded_fs: u64,
    pub loaded_gs: u64,
    pub loaded_cr3: u64,
    pub ticks: u64,
    pub irqs: [IrqLine; 16],
    pub release: Vec<Cap>,
    pub root_task: *mut Task,
    pub ram: [crate::mem::Range; crate::mem::MAX_RANGES],
    pub nram: usize,
}

static mut KERNEL: Option<Kernel> = None;

/// Recomputes `Kernel::extra_loaded` after CR0.TS or the loaded I/O bitmap changed.
pub fn note_extra() {
    let kk = k();
    kk.extra_loaded = !crate::trap::fpu_trap_on() || !kk.io_loaded.is_null();
}

/// The kernel state.
pub fn k() -> &'static mut Kernel {
    // SAFETY: uniprocessor kernel with interrupts disabled on every kernel path except the idle
    // loop, whose interrupt handlers run to completion before it looks at the state again.
    unsafe {
        (*core::ptr::addr_of_mut!(KERNEL))
            .as_mut()
            .unwrap_unchecked()
    }
}

pub fn init_kernel() {
    let k = Kernel {
        cspace: CSpace::with_capacity(MAX_TASKS),
        mapdb: MapDb::with_capacity(MAX_MAPPINGS),
        tasks: Vec::with_capacity(MAX_TASKS),
        current: core::ptr::null_mut(),
        ready_head: [core::ptr::null_mut(); NPRIO],
        ready_tail: [core::ptr::null_mut(); NPRIO],
        ready_bits: [0; 4],
        ready_n: 0,
        io_loaded: core::ptr::null_mut(),
        extra_loaded: false,
        fpu_owner: core::ptr::null_mut(),
        loaded_fs: 0,
        loaded_gs: 0,
        loaded_cr3: 0,
        ticks: 0,
        irqs: [IrqLine {
            notif: core::ptr::null_mut(),
            bits: 0,
            caps: 0,
        }; 16],
        release: Vec::with_capacity(8192),
        root_task: core::ptr::null_mut(),
        ram: [crate::mem::Range { start: 0, end: 0 }; crate::mem::MAX_RANGES],
        nram: 0,
    };
    // SAFETY: called once at boot before anything reads KERNEL.
    unsafe { *core::ptr::addr_of_mut!(KERNEL) = Some(k) };
    // CR0.TS starts clear: the flag must say so until the first switch sets it.
    note_extra();
}

/// Maps capability-space errors to ABI errors.
pub fn cs<T>(r: Result<T, CsError>) -> Result<T, Error> {
    r.map_err(|e| match e {
        CsError::BadSlot | CsError::Empty => Error::BadCap,
        CsError::Full => Error::SlotFull,
    })
}

// ---- quota -------------------------------------------------------------------------------

/// Charges `bytes` to factory `f`. Fails when the quota (or kernel memory) would be exceeded.
pub fn charge(f: *mut Factory, bytes: u64) -> Result<(), Error> {
    if f.is_null() {
        return Ok(());
    }
    // SAFETY: factories stay alive while anything charged to them exists (they hold a ref).
    let f = unsafe { &mut *f };
    if f.used + bytes > f.limit {
        return Err(Error::NoMemory);
    }
    // Leave headroom so the kernel itself can always finish an operation it has started.
    if crate::mem::kmem_free() < bytes + 64 * 1024 {
        return Err(Error::NoMemory);
    }
    f.used += bytes;
    Ok(())
}

pub fn uncharge(f: *mut Factory, bytes: u64) {
    if !f.is_null() {
        // SAFETY: as in `charge`.
        let f = unsafe { &mut *f };
        f.used = f.used.saturating_sub(bytes);
    }
}

/// A page-table frame for `t`, charged to its factory.
pub fn pt_alloc(t: *mut Task) -> Option<u64> {
    // SAFETY: t is a live task.
    let task = unsafe { &mut *t };
    charge(task.hdr.factory, PAGE).ok()?;
    match phys().alloc_frame() {
        Some(p) => {
            task.pt_frames += 1;
            Some(p)
        }
        None => {
            uncharge(task.hdr.factory, PAGE);
            None
        }
    }
}

// ---- reference counting ------------------------------------------------------------------

fn hdr_of(o: Obj) -> Option<*mut Hdr> {
    // SAFETY: the pointers in live capabilities point at live objects.
    unsafe {
        Some(match o {
            Obj::Task(p) => &mut (*p).hdr,
            Obj::Thread(p) => &mut (*p).hdr,
            Obj::Endpoint(p) => &mut (*p).hdr,
            Obj::Notification(p) => &mut (*p).hdr,
            Obj::Factory(p) => &mut (*p).hdr,
            _ => return None,
        })
    }
}

pub fn incref(o: Obj) {
    if let Obj::Irq(l) = o {
        k().irqs[l as usize].caps += 1;
    }
    if let Some(h) = hdr_of(o) {
        // SAFETY: live object.
        unsafe { (*h).refs += 1 };
    }
}

/// Queues a dropped reference; `drain_release` destroys objects whose count reaches zero.
pub fn release(c: Cap) {
    k().release.push(c);
}

pub fn drain_release() {
    while let Some(c) = k().release.pop() {
        if let Obj::Irq(l) = c.obj {
            let line = &mut k().irqs[l as usize];
            line.caps -= 1;
            if line.caps == 0 {
                crate::trap::pic_mask(l);
                let n = core::mem::replace(&mut line.notif, core::ptr::null_mut());
                if !n.is_null() {
                    release(Cap {
                        obj: Obj::Notification(n),
                        rights: 0,
                        badge: 0,
                    });
                }
            }
            continue;
        }
        let Some(h) = hdr_of(c.obj) else { continue };
        // SAFETY: live object; we hold one of its references until here.
        let refs = unsafe {
            (*h).refs -= 1;
            (*h).refs
        };
        if refs == 0 {
            destroy(c.obj);
        }
    }
}

/// Frees an object whose last reference went away.
fn destroy(o: Obj) {
    // SAFETY: refs == 0, so nothing else points at the object any more (queues and waiters were
    // cleared by kill paths, which run first here).
    unsafe {
        match o {
            Obj::Task(p) => {
                kill_task(p);
                let f = (*p).hdr.factory;
                let charge_ = (*p).hdr.charge;
                k().tasks[(*p).id as usize] = core::ptr::null_mut();
                drop(Box::from_raw(p));
                uncharge(f, charge_);
                release_factory(f);
            }
            Obj::Thread(p) => {
                kill_thread_silently(p);
                let f = (*p).hdr.factory;
                let charge_ = (*p).hdr.charge;
                if k().current == p {
                    k().current = core::ptr::null_mut();
                }
                crate::sched::forget(p);
                drop(Box::from_raw(p));
                uncharge(f, charge_);
                release_factory(f);
            }
            Obj::Endpoint(p) => {
                crate::ipc::endpoint_gone(p);
                let f = (*p).hdr.factory;
                let charge_ = (*p).hdr.charge;
                drop(Box::from_raw(p));
                uncharge(f, charge_);
                release_factory(f);
            }
            Obj::Notification(p) => {
                let w = (*p).waiter;
                if !w.is_null() {
                    (*w).notif = core::ptr::null_mut();
                    crate::sched::wake_with(w, Error::PeerGone as u64);
                }
                for l in k().irqs.iter_mut() {
                    if l.notif == p {
                        l.notif = core::ptr::null_mut();
                    }
                }
                let f = (*p).hdr.factory;
                let charge_ = (*p).hdr.charge;
                drop(Box::from_raw(p));
                uncharge(f, charge_);
                release_factory(f);
            }
            Obj::Factory(p) => {
                let f = (*p).hdr.factory;
                let charge_ = (*p).hdr.charge;
                drop(Box::from_raw(p));
                uncharge(f, charge_);
                release_factory(f);
            }
            _ => {}
        }
    }
}

fn release_factory(f: *mut Factory) {
    if !f.is_null() {
        release(Cap {
            obj: Obj::Factory(f),
            rights: 0,
            badge: 0,
        });
    }
}

// ---- creation ----------------------------------------------------------------------------

fn hdr(f: *mut Factory, charge_: u64) -> Hdr {
    if !f.is_null() {
        incref(Obj::Factory(f));
    }
    Hdr {
        refs: 0,
        factory: f,
        charge: charge_,
    }
}

pub fn new_factory(parent: *mut Factory, limit: u64) -> Result<*mut Factory, Error> {
    let size = core::mem::size_of::<Factory>() as u64 + limit;
    charge(parent, size)?;
    Ok(Box::into_raw(Box::new(Factory {
        hdr: hdr(parent, size),
        limit,
        used: 0,
    })))
}

pub fn new_endpoint(f: *mut Factory) -> Result<*mut Endpoint, Error> {
    let size = core::mem::size_of::<Endpoint>() as u64;
    charge(f, size)?;
    Ok(Box::into_raw(Box::new(Endpoint {
        hdr: hdr(f, size),
        send_head: core::ptr::null_mut(),
        recv_head: core::ptr::null_mut(),
    })))
}

pub fn new_notification(f: *mut Factory) -> Result<*mut Notification, Error> {
    let size = core::mem::size_of::<Notification>() as u64;
    charge(f, size)?;
    Ok(Box::into_raw(Box::new(Notification {
        hdr: hdr(f, size),
        bits: 0,
        waiter: core::ptr::null_mut(),
    })))
}

pub fn new_task(f: *mut Factory, slots: u64, max_prio: u8) -> Result<*mut Task, Error> {
    if slots == 0 || slots > 4096 {
        return Err(Error::Invalid);
    }
    let size = core::mem::size_of::<Task>() as u64
        + CSpace::<Cap>::table_bytes(slots as usize) as u64
        + PAGE
        + 64;
    charge(f, size)?;
    if !k().cspace.has_room()
        || (k().tasks.len() >= MAX_TASKS && !k().tasks.iter().any(|t| t.is_null()))
    {
        uncharge(f, size);
        return Err(Error::NoMemory);
    }
    let Some(pml4) = paging::new_space() else {
        uncharge(f, size);
        return Err(Error::NoMemory);
    };
    let table = k().cspace.create_table(slots as usize);
    let id = match k().tasks.iter().position(|t| t.is_null()) {
        Some(i) => i as u32,
        None => {
            k().tasks.push(core::ptr::null_mut());
            (k().tasks.len() - 1) as u32
        }
    };
    let t = Box::into_raw(Box::new(Task {
        hdr: hdr(f, size),
        id,
        pml4,
        table,
        slots: k().cspace.view(table),
        threads: Vec::new(),
        io: None,
        dead: false,
        pt_frames: 0,
        nodes: 0,
        max_prio,
    }));
    k().tasks[id as usize] = t;
    Ok(t)
}

pub fn new_thread(f: *mut Factory) -> Result<*mut Thread, Error> {
    let size = core::mem::size_of::<Thread>() as u64;
    charge(f, size)?;
    let mut fx = FxArea([0; 512]);
    // Default x87 control word and MXCSR (all exceptions masked), as after FNINIT.
    fx.0[0] = 0x7f;
    fx.0[1] = 0x03;
    fx.0[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    Ok(Box::into_raw(Box::new(Thread {
        frame: Frame::default(),
        fx,
        hdr: hdr(f, size),
        task: core::ptr::null_mut(),
        state: State::Inactive,
        prio: 0,
        slice: crate::sched::SLICE,
        utcb_pa: 0,
        utcb_va: 0,
        pager: None,
        exc: None,
        next: core::ptr::null_mut(),
        prev: core::ptr::null_mut(),
        ep: core::ptr::null_mut(),
        send_badge: 0,
        send_grant: false,
        send_call: false,
        kmsg: None,
        caller: core::ptr::null_mut(),
        server: core::ptr::null_mut(),
        notif: core::ptr::null_mut(),
        fs_base: 0,
        gs_base: 0,
        foreign: None,
        started: false,
        zombie: false,
    })))
}

// ---- capability slots --------------------------------------------------------------------

pub fn slot(t: *mut Task, s: u64) -> Result<SlotId, Error> {
    // SAFETY: live task.
    let task = unsafe { &*t };
    if s >= k().cspace.table_len(task.table) as u64 {
        return Err(Error::BadCap);
    }
    Ok(SlotId {
        table: task.table,
        index: s as u32,
    })
}

/// The capability in slot `s` of the current thread's task.
#[inline(always)]
pub fn lookup(t: *mut Task, s: u64) -> Result<Cap, Error> {
    // SAFETY: live task, whose view is of its own live table (emptied before the table goes).
    unsafe { (*t).slots.cap_at(s).copied().ok_or(Error::BadCap) }
}

/// Inserts an original capability; takes a reference.
pub fn insert_root(t: *mut Task, s: u64, c: Cap) -> Result<(), Error> {
    let id = slot(t, s)?;
    cs(k().cspace.insert_root(id, c))?;
    incref(c.obj);
    Ok(())
}

/// Derives `src` of task `st` into `dst` of task `dt` with a badge (if the source has none) and
/// a rights mask.
pub fn derive(
    st: *mut Task,
    src: u64,
    dt: *mut Task,
    dst: u64,
    badge: Option<u64>,
    mask: u64,
) -> Result<(), Error> {
    let s = slot(st, src)?;
    let d = slot(dt, dst)?;
    let c = *cs(k().cspace.get(s))?;
    let nc = Cap {
        obj: c.obj,
        rights: c.rights & mask,
        badge: match badge {
            Some(b) if c.badge == 0 => b,
            Some(_) => return Err(Error::Invalid),
            None => c.badge,
        },
    };
    cs(k().cspace.insert_child(s, d, nc))?;
    incref(c.obj);
    Ok(())
}

pub fn delete(t: *mut Task, s: u64) -> Result<(), Error> {
    let c = cs(k().cspace.delete(slot(t, s)?))?;
    release(c);
    Ok(())
}

pub fn revoke(t: *mut Task, s: u64) -> Result<(), Error> {
    let v = cs(k().cspace.revoke(slot(t, s)?))?;
    for c in v {
        release(c);
    }
    Ok(())
}

// ---- killing -----------------------------------------------------------------------------

/// Status word of the EXIT message of a thread that was killed rather than exiting itself.
pub const EXIT_KILLED: u64 = u64::MAX;

/// Stops a thread for good: out of every queue, partners told, UTCB unmapped and freed. Its
/// exception handler then receives an EXIT message with `status`, so whoever supervises the
/// thread learns of its end however it came about (exit, fault verdict, its task killed).
pub fn kill_thread(p: *mut Thread) {
    end_thread(p, EXIT_KILLED, true)
}

/// Ends a thread without telling its handler (the object itself is being freed).
pub fn kill_thread_silently(p: *mut Thread) {
    end_thread(p, EXIT_KILLED, false)
}

pub fn end_thread(p: *mut Thread, status: u64, notify: bool) {
    // SAFETY: p is a live thread object.
    let t = unsafe { &mut *p };
    if t.zombie {
        // Already ended; only its pending EXIT message remains. Drop it.
        crate::ipc::detach(p);
        t.zombie = false;
        t.state = State::Dead;
        return;
    }
    if t.state == State::Dead {
        return;
    }
    crate::sched::dequeue_any(p);
    crate::ipc::detach(p);
    t.state = State::Dead;
    if k().fpu_owner == p {
        k().fpu_owner = core::ptr::null_mut();
    }
    if let Some(c) = t.pager.take() {
        release(c);
    }
    let exc = t.exc.take();
    if !t.task.is_null() {
        // SAFETY: the task outlives the binding (kill_task kills threads first).
        let task = unsafe { &mut *t.task };
        task.threads.retain(|&x| x != p);
        if t.utcb_pa != 0 {
            if !task.dead {
                paging::unmap(task.pml4, t.utcb_va, false);
                if k().loaded_cr3 == task.pml4 {
                    crate::arch::invlpg(t.utcb_va);
                }
            }
            phys().free_frame(t.utcb_pa);
            uncharge(task.hdr.factory, PAGE);
            t.utcb_pa = 0;
        }
        t.task = core::ptr::null_mut();
    }
    if let Some(c) = exc {
        if notify && t.started {
            crate::ipc::send_exit(p, c, status);
        }
        release(c);
    }
}

/// Ends a task: kills its threads, deletes its capabilities, removes its mappings (and all
/// derived from them) and frees its page tables. The object itself lives on while referenced.
pub fn kill_task(p: *mut Task) {
    // SAFETY: p is a live task.
    let task = unsafe { &mut *p };
    if task.dead {
        return;
    }
    while let Some(&th) = task.threads.last() {
        kill_thread(th);
    }
    let mut gone = Vec::new();
    k().mapdb.remove_space(task.id, &mut gone);
    unmap_removed(&gone);

    task.dead = true;
    task.slots = sawmill_kcore::cspace::TableView::EMPTY;
    for c in k().cspace.destroy_table(task.table) {
        release(c);
    }
    if k().io_loaded == p {
        crate::sched::clear_io();
    }
    if let Some(io) = task.io.take() {
        drop(io);
        uncharge(task.hdr.factory, 8192);
    }
    if k().loaded_cr3 == task.pml4 {
        crate::arch::write_cr3(paging::kernel_pml4());
        k().loaded_cr3 = paging::kernel_pml4();
    }
    let n = paging::free_space(task.pml4);
    // The PML4 itself was part of the task's own charge.
    uncharge(task.hdr.factory, (n - 1) * PAGE);
    task.pt_frames = 0;
}

/// Clears the page-table entries of mappings removed from the database and returns their node
/// charges.
pub fn unmap_removed(v: &[Mapping]) {
    for m in v {
        let t = k()
            .tasks
            .get(m.space as usize)
            .copied()
            .unwrap_or(core::ptr::null_mut());
        if t.is_null() {
            continue;
        }
        // SAFETY: live task (tasks[] holds only live ones).
        let task = unsafe { &mut *t };
        if !task.dead {
            paging::unmap(task.pml4, m.vaddr, m.huge);
            if k().loaded_cr3 == task.pml4 {
                crate::arch::invlpg(m.vaddr);
            }
        }
        if task.nodes > 0 {
            task.nodes -= 1;
            uncharge(task.hdr.factory, sawmill_kcore::mapdb::NODE_BYTES as u64);
        }
    }
}

pub fn has(c: &Cap, r: u64) -> bool {
    c.rights & r == r
}
