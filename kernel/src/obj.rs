//! The kernel objects' data: what a capability names, and the layout of each object. Behaviour
//! lives in one module per object (task, thread, endpoint, notification, irq, factory);
//! lifetimes in `object`.
//!
//! Objects live on the kernel heap and are named by raw pointers inside the kernel; user space
//! names them only through capability slots. Each object counts the capabilities (and kernel
//! references such as a thread's pager) that point at it; when the count drops to zero it is
//! destroyed and its memory returned to the factory it was charged to.
use crate::arch::Frame;
use crate::mem::phys_to_virt;
use alloc::boxed::Box;
use alloc::vec::Vec;
use sawmill_abi::Utcb;

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
    /// A watch on a badge (see [`Senders`]). Never in a capability slot: named here so that its
    /// references go through the release queue like every other object's.
    Senders(*mut Senders),
}

#[derive(Clone, Copy, Debug)]
pub struct Cap {
    pub obj: Obj,
    pub rights: u64,
    pub badge: u64,
    /// The watch this capability's badge is under (null: none). A capability carrying one is a
    /// holder of it, as is every kernel reference made from such a capability.
    pub senders: *mut Senders,
}

impl Cap {
    /// A capability under no watch.
    pub const fn new(obj: Obj, rights: u64, badge: u64) -> Cap {
        Cap {
            obj,
            rights,
            badge,
            senders: core::ptr::null_mut(),
        }
    }
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
    /// Those page-table frames, for freeing them when the task ends.
    pub pt_list: sawmill_kcore::ptlist::PtList,
    pub nodes: u64,
    /// Highest priority its threads may be given by this task.
    pub max_prio: u8,
    /// DMA pins it holds (made on its first `pin`, see `pin`).
    pub pins: Option<Box<sawmill_kcore::pins::PinList>>,
    /// Page tables it borrows (`task_link`): the 2 MiB window and its lender.
    pub links: Vec<(u64, *mut Task)>,
    /// How many of its page tables other tasks borrow.
    pub lent: u32,
    /// A mapping was ever derived from one of its own (or granted away): a page may then have
    /// been written through another entry than its own (`task_dirty` answers every page).
    pub mapped_out: bool,
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
    /// Timer ticks at which this thread was running since it last waited: any receive, call,
    /// send, notification wait or yield, whether or not it had to block (`thread_info`; how root
    /// tells a server spinning in a request from one that is idle or waits for another).
    pub run_ticks: u16,
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
    /// A timed wait's deadline (TSC) and the thread's place in the timer queue while armed.
    pub deadline: u64,
    pub timer: Option<sawmill_kcore::timers::Links<*mut Thread>>,
    pub fs_base: u64,
    pub gs_base: u64,
    /// Foreign (Linux) mode: reflection entry and the native code range.
    pub foreign: Option<(u64, u64, u64)>,
    /// The notification whose signal interrupts this thread in its foreign code, and where it
    /// then continues (`thread_interrupt`).
    pub interrupt: Option<(*mut Notification, u64)>,
    pub started: bool,
    /// Ended, but its EXIT message still waits in its handler's endpoint queue.
    pub zombie: bool,
}

pub struct Endpoint {
    pub hdr: Hdr,
    pub send_head: *mut Thread,
    pub recv_head: *mut Thread,
    /// NO_SENDERS notices waiting to be received (FIFO through `Senders::next`). Non-empty only
    /// while no receiver waits, like `send_head`.
    pub notice_head: *mut Senders,
    pub notice_tail: *mut Senders,
    /// Watches whose notice will come here (doubly linked through `Senders::next`/`prev`), so
    /// that this endpoint's destruction can tell them.
    pub watches: *mut Senders,
}

/// A watch on one badge: counts the capabilities carrying it and, when the last is gone,
/// carries the NO_SENDERS notice in its endpoint's queue until it is received (as an ended
/// thread carries its EXIT message), so the notice needs no memory of its own and cannot fail.
/// Charged to the factory of the task that minted it. `hdr.refs` is 1 while the watch is armed
/// or its notice waits; the capabilities are counted in `count`.
pub struct Senders {
    pub hdr: Hdr,
    pub count: sawmill_kcore::senders::SenderCount,
    /// The watched badge: word 0 of the notice.
    pub badge: u64,
    /// Where the notice goes (no reference: null once that endpoint is destroyed) and the
    /// badge it arrives with.
    pub to: *mut Endpoint,
    pub to_badge: u64,
    /// Links in `to`'s list of watches while armed, in its notice queue (`next` only) after.
    pub next: *mut Senders,
    pub prev: *mut Senders,
}

pub struct Notification {
    pub hdr: Hdr,
    pub bits: u64,
    pub waiter: *mut Thread,
    /// A foreign thread a signal interrupts (`thread_interrupt`; its `interrupt` names us).
    pub interrupt: *mut Thread,
}

#[derive(Clone, Copy)]
pub struct IrqLine {
    pub notif: *mut Notification,
    pub bits: u64,
    /// Capabilities naming this line; when the last goes, the line is masked and unbound.
    pub caps: u32,
}

/// Status word of the EXIT message of a thread that was killed rather than exiting itself.
pub const EXIT_KILLED: u64 = u64::MAX;

/// Whether capability `c` carries every right in `r`.
pub fn has(c: &Cap, r: u64) -> bool {
    c.rights & r == r
}

/// A live thread object.
#[inline(always)]
pub fn th(t: *mut Thread) -> &'static mut Thread {
    // SAFETY: callers pass live threads (a capability, a queue link or `current` holds each).
    unsafe { &mut *t }
}

/// The UTCB of a thread bound to a task.
pub fn utcb(t: *mut Thread) -> &'static mut Utcb {
    // SAFETY: only called for configured threads, whose UTCB frame is a live pool page.
    unsafe { &mut *(phys_to_virt((*t).utcb_pa) as *mut Utcb) }
}
