//! The kernel's global state and the one way to reach it.
//!
//! Everything the kernel keeps between entries that is not inside an object (the capability
//! space, the mapping database, the task table, the ready queues, what hardware state is loaded,
//! IRQ bindings, the release queue) lives in one [`Kernel`], reached only through [`kernel`].
//! The frame pool and heap (`mem`) keep their own statics under the same rules, because they
//! exist before this state can be built.
use crate::obj::{Cap, IrqLine, Task, Thread};
use alloc::vec::Vec;
use sawmill_kcore::cspace::CSpace;
use sawmill_kcore::mapdb::MapDb;
use sawmill_kcore::pins::PinTable;
use sawmill_kcore::timers::TimerQueue;

pub const NPRIO: usize = 256;
/// Fixed sizes of the kernel's bookkeeping arrays, allocated once at boot so that the kernel's
/// free-memory figure moves only with objects and page tables (which quotas account for).
pub const MAX_TASKS: usize = 512;
pub const MAX_MAPPINGS: usize = 131072;

/// All kernel state of the CPU. One instance: the kernel runs on one CPU.
pub struct Kernel {
    pub cspace: CSpace<Cap>,
    pub mapdb: MapDb,
    /// DMA pin counts of every frame of user RAM (`pin`).
    pub pins: PinTable,
    pub tasks: Vec<*mut Task>,
    pub current: *mut Thread,
    pub ready_head: [*mut Thread; NPRIO],
    pub ready_tail: [*mut Thread; NPRIO],
    pub ready_bits: [u64; 4],
    /// Bit i set when `ready_bits[i]` is not zero: the highest ready priority in two bit scans
    /// (every exit from the kernel with another thread ready asks for it).
    pub ready_words: u64,
    /// Threads in the ready queues (not counting the current one): the IPC fast path's one test.
    pub ready_n: u32,
    /// The thread whose state (address space, FS/GS, TS, I/O bitmap, entry frame) is loaded.
    pub loaded_thread: *mut Thread,
    pub io_loaded: *mut Task,
    /// Whether CR0.TS is set (kept here so a switch need not read CR0).
    pub fpu_trap: bool,
    /// CR0.TS is clear or an I/O bitmap is loaded: a switch must look at both (kept by
    /// `note_extra` wherever either changes, so that a switch tests one flag).
    pub extra_loaded: bool,
    pub fpu_owner: *mut Thread,
    pub loaded_fs: u64,
    pub loaded_gs: u64,
    pub loaded_cr3: u64,
    pub ticks: u64,
    /// Threads in a timed wait, earliest deadline first (`timeout`).
    pub timeouts: TimerQueue<*mut Thread>,
    /// The wall clock's figures (`clock`).
    pub boot_epoch: u64,
    pub boot_tsc: u64,
    pub calibration_tsc: u64,
    pub tsc_khz: u64,
    pub irqs: [IrqLine; 16],
    /// Dropped references not yet accounted (see `object::reap`).
    pub release: Vec<Cap>,
    pub root_task: *mut Task,
    pub ram: [crate::mem::Range; crate::mem::MAX_RANGES],
    pub nram: usize,
    /// Log every rejected system call (boot flag `trace=rejected`, see `trace`).
    pub trace_rejected: bool,
}

static mut KERNEL: Option<Kernel> = None;

/// The kernel state.
///
/// Invariants that make handing out `&mut` sound, and would stay true with one instance per
/// CPU (this function would then return the running CPU's):
/// - only kernel code calls it, and the kernel runs with interrupts disabled except around
///   `hlt` in the idle loop, where no reference obtained here is live; the interrupt handlers
///   that run there finish before the loop looks at the state again. So nothing runs
///   concurrently with a holder of the reference, on this CPU or (one CPU) any other;
/// - a reference is used for the statement or block that took it, not stored: code that calls
///   into another module takes a fresh reference afterwards rather than holding one across;
/// - it is not called before `init` (boot code before that uses only `mem` and `arch`).
///
/// Objects reached through raw pointers in the state follow the same rules.
#[inline(always)]
pub fn kernel() -> &'static mut Kernel {
    // SAFETY: see the invariants above; `init` ran first, so the option is `Some`.
    unsafe {
        (*core::ptr::addr_of_mut!(KERNEL))
            .as_mut()
            .unwrap_unchecked()
    }
}

/// Builds the state once at boot, after the heap exists.
pub fn init() {
    let k = Kernel {
        cspace: CSpace::with_capacity(MAX_TASKS),
        mapdb: MapDb::with_capacity(MAX_MAPPINGS),
        pins: crate::pin::table_for_user_ram(),
        tasks: Vec::with_capacity(MAX_TASKS),
        current: core::ptr::null_mut(),
        ready_head: [core::ptr::null_mut(); NPRIO],
        ready_tail: [core::ptr::null_mut(); NPRIO],
        ready_bits: [0; 4],
        ready_words: 0,
        ready_n: 0,
        loaded_thread: core::ptr::null_mut(),
        io_loaded: core::ptr::null_mut(),
        fpu_trap: false,
        extra_loaded: false,
        fpu_owner: core::ptr::null_mut(),
        loaded_fs: 0,
        loaded_gs: 0,
        loaded_cr3: 0,
        ticks: 0,
        timeouts: TimerQueue::new(),
        boot_epoch: 0,
        boot_tsc: 0,
        calibration_tsc: 0,
        tsc_khz: 0,
        irqs: [IrqLine {
            notif: core::ptr::null_mut(),
            bits: 0,
            caps: 0,
        }; 16],
        release: Vec::with_capacity(8192),
        root_task: core::ptr::null_mut(),
        ram: [crate::mem::Range { start: 0, end: 0 }; crate::mem::MAX_RANGES],
        nram: 0,
        trace_rejected: false,
    };
    // SAFETY: called once at boot before anything reads KERNEL; no reference to it exists yet.
    unsafe { *core::ptr::addr_of_mut!(KERNEL) = Some(k) };
    // CR0.TS starts clear: the flag must say so until the first switch sets it.
    note_extra();
}

/// Recomputes `Kernel::extra_loaded` after CR0.TS or the loaded I/O bitmap changed.
pub fn note_extra() {
    let k = kernel();
    k.extra_loaded = !k.fpu_trap || !k.io_loaded.is_null();
}
