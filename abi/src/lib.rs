//! The sawmill kernel ABI, shared by the kernel and every user program.
//!
//! This crate is pure data: numbers, bit layouts and `repr(C)` structures. It touches nothing and
//! is `no_std` so both the kernel and user space (and host tests) can depend on it.
//!
//! # System-call convention
//! `syscall` with `rax` = [`Sys`] number. Arguments in `rdi, rsi, rdx, r10, r8, r9`. On return `rax`
//! holds an [`Error`] code (0 = success) and the other argument registers carry results as each
//! call documents. `rcx` and `r11` are clobbered by the instruction itself; every other register is
//! preserved.
//!
//! # IPC registers
//! The four IPC calls ([`Sys::Call`], [`Sys::ReplyRecv`], [`Sys::Send`], [`Sys::Recv`]) use
//! `rdi` = endpoint capability slot (in) / badge of the sender (out), `rsi` = [`MsgTag`] (in/out) and
//! `rdx, r10, r8, r9` = message words 0..4 (in/out). Words 4.. of a longer message travel in the
//! sender's and receiver's [`Utcb::mr`]. A register-only message never touches memory.
#![no_std]

/// System-call numbers (`rax` on entry).
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sys {
    /// Does nothing; returns 0. For measuring kernel entry and exit.
    Null = 0,
    /// Send to an endpoint and wait for the reply, atomically.
    Call = 1,
    /// Reply to the caller being served (if any), then wait on an endpoint.
    ReplyRecv = 2,
    /// Send to an endpoint; no reply expected.
    Send = 3,
    /// Wait on an endpoint (or a notification bound to nothing: use NotifyWait).
    Recv = 4,
    /// Give up the rest of the time slice.
    Yield = 5,
    /// Write `rdx` bytes at `rsi` to the kernel debug console, through the console capability
    /// in slot `rdi` (root holds it and hands copies to the servers it lets print).
    DebugWrite = 6,
    /// `cap_copy(src=rdi, dst=rsi)`: a derived copy in the caller's own table.
    CapCopy = 7,
    /// `cap_mint(src=rdi, dst=rsi, badge=rdx, rights=r10, flags=r8 [mint], notice=r9)`: derived
    /// copy with a badge and rights mask. With [`mint::NO_SENDERS`] the source must be an
    /// unbadged endpoint capability, the badge nonzero and `notice` an endpoint capability with
    /// SEND: when the last capability carrying the new badge is gone (deleted, revoked, or its
    /// task ended), a [`label::NO_SENDERS`] message arrives on `notice`. The watch costs a small
    /// kernel object charged to the caller's own factory.
    CapMint = 8,
    /// `cap_delete(slot=rdi, n=rsi, flags=rdx)`. With `n` > 0 (at most [`CAP_PUT_MAX`]) it
    /// deletes the `n` slots of the caller's message words `mr[0..n]` instead (`slot` is
    /// ignored), each first revoked with [`CAP_DELETE_REVOKE`] in `flags`; an empty slot is
    /// passed over; `rdi` = how many were deleted. What a process leaves at its end goes in one
    /// call (proc's copies of what was handed on, its minted capabilities).
    CapDelete = 9,
    /// `cap_revoke(slot=rdi)`: delete every capability derived from this one; keep it.
    CapRevoke = 10,
    /// `factory_create(factory=rdi, kind=rsi [ObjKind], dst=rdx, arg=r10)`.
    FactoryCreate = 11,
    /// `task_cap_put(task=rdi, src=rsi, dst=rdx, n=r10)`: derived copy of our slot `src` into
    /// slot `dst` of the task. With `n` > 0 (at most [`CAP_PUT_MAX`]) it places `n` pairs
    /// instead, from the caller's message words: `mr[i]` = `src | dst << 32`; `src`, `dst` are
    /// ignored. Pairs are placed in order; `rdi` = how many were placed (on an error, the index
    /// of the pair that failed: those before it stay placed; `u64::MAX` for an error of no
    /// pair, such as the task capability or `n` past the limit, before any is placed). What a new task is started with
    /// goes in one call rather than one call a capability (a Linux process gets ~18).
    TaskCapPut = 12,
    /// `task_map(task=rdi, src_vaddr=rsi, dst_vaddr=rdx, pages=r10, flags=r8 [MapFlags])`.
    TaskMap = 13,
    /// `unmap(vaddr=rdi, pages=rsi, flags=rdx [UnmapFlags])`: revoke every mapping derived from
    /// ours in the range, and with `UNMAP_SELF` ours too. With [`UNMAP_WRITE`] the mappings stay
    /// and lose only their write right (derivation kept: a later unmap still reaches them, and
    /// what is derived from them later is read-only too), except on a page whose frame has DMA
    /// pins (see [`Sys::Pin`]), which is left as it is; `rdi` = the number of such pages. With
    /// [`UNMAP_PINS`] (a revoke) `rdi` = the number of pages whose frames have DMA pins, else 0.
    /// Other flag bits are Invalid.
    Unmap = 14,
    /// `thread_config(thread=rdi, task=rsi, utcb_vaddr=rdx, pager=r10, exc_handler=r8, prio=r9)`.
    /// `task` binds a new thread to a task; pager and handler are endpoint slots of the caller.
    ThreadConfig = 15,
    /// `thread_start(thread=rdi, rip=rsi, rsp=rdx, arg=r10)`: arg lands in the thread's `rdi`.
    ThreadStart = 16,
    /// `irq_get(irq_control=rdi, line=rsi, dst=rdx)`. An IRQ-control capability minted with a
    /// non-zero badge may only hand out the lines whose bits are set in it (else NoRights).
    IrqGet = 17,
    /// `irq_bind(irq=rdi, notification=rsi, bits=rdx)`.
    IrqBind = 18,
    /// `irq_ack(irq=rdi)`: unmask the line again.
    IrqAck = 19,
    /// `notify_signal(notification=rdi, bits=rsi)`; a badged capability signals only
    /// `bits & badge`.
    NotifySignal = 20,
    /// `notify_wait(notification=rdi, flags=rsi [NONBLOCK])` -> `rdi` = bits (cleared).
    NotifyWait = 21,
    /// `ioport_give(io_control=rdi, task=rsi, base=rdx, count=r10)`. An I/O-control capability
    /// minted with a non-zero badge covers only the port window [`io_window`] decodes from it
    /// (else NoRights): root hands such a capability to the PCI server for the PCI I/O range.
    IoPortGive = 22,
    /// `shutdown(control=rdi, code=rsi)`.
    Shutdown = 23,
    /// `kernel_info(which=rdi)` -> `rdi` = value. See [`KInfo`].
    KernelInfo = 24,
    /// `thread_exit(status=rdi)`: ends the calling thread; its handler gets an EXIT message.
    ThreadExit = 25,
    /// `set_tls(fs_base=rdi, gs_base=rsi)` for the calling thread.
    SetTls = 26,
    /// `thread_foreign(thread=rdi, entry=rsi, native_lo=rdx, native_hi=r10)`: mark a thread as
    /// running foreign (Linux) code. A `syscall` instruction it executes outside
    /// `[native_lo, native_hi)` (the emulation library's code) is not a sawmill system call: the
    /// kernel stores the registers in the thread's [`Utcb::foreign`] and resumes the thread at
    /// `entry` in its own task (no address-space switch) with `rdi` = that frame's address and
    /// `rsp` = the foreign `rsp` minus [`FOREIGN_REDZONE`], 16-byte aligned. The handler returns to
    /// the foreign code in user mode (`rcx`/`r11` are free, as after a real `syscall`).
    ThreadForeign = 27,
    /// `map_phys(control=rdi, paddr=rsi, vaddr=rdx, pages=r10, flags=r8)`: map device memory
    /// (never RAM) into the caller.
    MapPhys = 28,
    /// `factory_info(factory=rdi)` -> `rdi` = bytes used, `rsi` = limit.
    FactoryInfo = 29,
    /// `task_kill(task=rdi)`: end every thread of the task and free what it holds.
    TaskKill = 30,
    /// `thread_regs(thread=rdi, out=rsi)`: copy a stopped thread's registers into a
    /// [`ForeignFrame`]-shaped buffer of the caller.
    ThreadRegs = 31,
    /// `translate(vaddr=rdi, flags=rsi)` -> `rdi` = physical address backing the caller's page;
    /// with [`pin::TRANSLATE_PINS`] also `rsi` = the number of DMA pins on that frame (any task's;
    /// see [`Sys::Pin`]): the memory server asks this of its own page before a freed frame goes
    /// back to its pool. Other flag bits are Invalid.
    Translate = 32,
    /// `pin(vaddr=rdi, pages=rsi, flags=rdx [pin::DEVICE_WRITES | pin::LIST])` -> `rdi` =
    /// physical address of the first page; the physical address of page i is in the caller's
    /// [`Utcb::mr`]`[i]` (undefined after a failure). Pins `pages` (1..=[`pin::MAX_PAGES`])
    /// mapped pages of user RAM of the caller (`vaddr` and the pages after it, or with `LIST`
    /// the addresses in `mr[0..pages]`, so that one call covers a driver's whole batch) for DMA:
    /// the frames keep a pin until [`Sys::Unpin`] or the task's death, and the memory server
    /// does not reuse a frame with pins. `DEVICE_WRITES` (the device will write the memory)
    /// needs writable mappings. All or nothing. Errors: Invalid (alignment, count, flag;
    /// a page that is not user RAM), Fault (a page not mapped), NoRights (read-only for
    /// `DEVICE_WRITES`), NoMemory (more than [`pin::PER_TASK`] pins, or the quota for the list).
    Pin = 33,
    /// `unpin(paddr=rdi, flags=rsi [pin::UNPIN_ALL])` -> `rdi` = pins released: one pin the
    /// caller holds on the frame at `paddr`, or with `UNPIN_ALL` every pin it holds. Invalid if
    /// it holds none there.
    Unpin = 34,
    /// `dma_bind(control=rdi, bdf=rsi, task=rdx)` -> `rdi` = 1 if the device's DMA is now
    /// confined by the IOMMU to what `task` shares with [`Sys::DmaMap`], 0 if the machine has no
    /// IOMMU (nothing confines it). Device authority: a [`root_slots::CONTROL`] capability, or
    /// one minted from it (the restricted device control root gives the PCI server). Only bus 0.
    /// Busy if the device is bound to another live task.
    DmaBind = 35,
    /// `dma_map(vaddr=rdi, pages=rsi)` -> `rdi` = the device address of `vaddr`: let the devices
    /// bound to the caller reach these pages of its own (RAM, not device memory), for as long as
    /// the caller keeps them mapped. Under an IOMMU the device address is `vaddr` itself (the
    /// caller's domain mirrors its address space for the shared pages; an unmap, a grant away or
    /// the task's end takes them from the devices before the call returns). Without one it is
    /// the physical address of the first page (nothing is confined).
    DmaMap = 36,
    /// `thread_interrupt(thread=rdi, notification=rsi, entry=rdx)`: when `notification` (held
    /// with RECV) is signalled while foreign thread `thread` of the caller's task is preempted
    /// in its foreign code, the thread continues at `entry` with its registers saved in
    /// `Utcb::foreign` (as for a DIVERT verdict: rdi = the frame, rsi = rdx = 0). How a Linux
    /// library gets a signal to a program that makes no system call. Replaces an earlier
    /// binding of either; entry 0 unbinds the thread.
    ThreadInterrupt = 37,
    /// `task_link(task=rdi, source=rsi, vaddr=rdx)`: task `task` borrows `source`'s page table
    /// of the 2 MiB window at `vaddr` (2 MiB aligned): the same table, linked into its own
    /// tables, so every page `source` has there (and maps there later, and unmaps) shows in
    /// `task` with `source`'s rights, at no cost per page. How proc gives every Linux process
    /// the library's read-only image without mapping it page by page. The pages stay
    /// `source`'s: `task` cannot map, unmap or grant in the window (mappings there fail with
    /// NoMemory), its end unlinks the table, and `source`'s end unlinks it from every
    /// borrower. Both capabilities need CONTROL. Errors: Invalid (alignment, outside user space,
    /// the same task, more than [`MAX_LINKS`] windows), Fault (`source` has no 4 KiB page
    /// table there, or borrows it itself), Busy (`task` has something in the window), NoMemory
    /// (`task`'s quota for its upper tables).
    TaskLink = 38,
    /// `thread_info(thread=rdi)` -> `rdi` = timer ticks ([`TICK_MS`] each) the thread has been
    /// running since it last waited — any call, send, receive, notification wait or yield,
    /// whether or not it blocked (saturating at 65535) — and `rsi` = its state
    /// ([`thread_state`]). Needs the thread capability with CONTROL. How root tells a server
    /// spinning in a request from one idle in its receive or waiting for another server.
    ThreadInfo = 39,
    /// `page_copy(src=rdi, dst=rsi)`: copies the 4 KiB page mapped at `src` to the page mapped
    /// writable at `dst`, both in the caller's address space and page-aligned. The kernel runs
    /// on one CPU with interrupts off, so the copy cannot be cut by a revocation: a page that
    /// went before it gives Fault instead of a page fault in the copier. How a region manager
    /// copies a file's page for copy-on-write when the file system lending it may die meanwhile
    /// (issue 16). Errors: Invalid (alignment, outside user space), Fault (`src` not mapped,
    /// `dst` not mapped writable).
    PageCopy = 40,
    /// `task_dirty(task=rdi, src=rsi, dst=rdx, pages=r10)` -> `rdi` = a mask, bit i for page i
    /// (`pages` 1..=64): set unless `task`'s 4 KiB page at `dst + i*4096` is still the frame the
    /// caller maps at `src + i*4096`, never written through that mapping (its dirty bit, which
    /// the kernel also sets for its own writes into user memory), and `task` never had a
    /// mapping derived from one of its own (a map item, a grant, a `task_map` from it). How the
    /// builder of a task learns which of the zeroed pages it lent the task may hold data, so
    /// that it zeroes only those before lending them to the next (proc's library heaps and
    /// stacks). Needs CONTROL. Errors: Invalid (alignment, count, outside user space),
    /// PeerGone (the task has ended).
    TaskDirty = 41,
    /// Number 42 is no call: it was `task_map_copy`'s, built beside `task_reset` and left out
    /// (bench/README, "a fork child that starts with its parent's read-only file pages
    /// mapped"); the kernel refuses it with NoSys.
    Reserved42 = 42,
    /// `task_reset(task=rdi, lender=rsi, runs=rdx)` -> `rdi` = pages kept: empties a live task
    /// so that its builder can build another program into it (proc's pool of tasks: a task is
    /// made and ended once, not per process). Every thread of the task ends (its exception
    /// handler gets EXIT, as at `task_kill`), its DMA pins and device binding go, every
    /// capability in its table is deleted, its I/O ports close, the page tables it lends leave
    /// their borrowers, the windows it borrows leave it (but those borrowed from `lender`, a task
    /// capability of the caller's, or none with `u64::MAX`), and every mapping goes with
    /// everything derived from it, but the runs kept: `runs` (at most [`RESET_RUNS`]) triples
    /// (src, dst, pages 1..=64) in the caller's message words `mr[3i..3i+3]`; the task's 4 KiB
    /// page at `dst + j*4096` stays if it is still derived from the caller's 4 KiB page at
    /// `src + j*4096` (where `task_map` put it). What was derived from a kept page goes, its
    /// dirty bit is cleared (so [`Sys::TaskDirty`] then answers for the next program's writes
    /// only) and the task counts as never having mapped a page of its own out. What a kept page
    /// holds is the caller's to clear (`task_dirty` before the reset says which were written).
    /// Capabilities to the task or its factory held elsewhere are the caller's to revoke; the
    /// task's page tables and its factory's charges stay. Needs CONTROL on both tasks. Errors:
    /// Invalid (the caller's own task, a run unaligned, empty, longer than 64 pages or outside
    /// user space, runs overlapping, too many runs; nothing is emptied then), PeerGone (the task
    /// has ended).
    TaskReset = 43,
}

/// Most runs [`Sys::TaskReset`] keeps (three message words each).
pub const RESET_RUNS: usize = 8;
/// Most pages of one run [`Sys::TaskReset`] keeps.
pub const RESET_RUN_PAGES: u64 = 64;

/// Most pairs one [`Sys::TaskCapPut`] places, and most slots one [`Sys::CapDelete`] deletes
/// (one message word each).
pub const CAP_PUT_MAX: usize = 32;
/// [`Sys::CapDelete`] of several slots: revoke each first (what was derived from it goes too).
pub const CAP_DELETE_REVOKE: u64 = 1;

/// Root's priority: every server runs below it (the manifest's rule), so root always gets the
/// CPU to supervise them.
pub const ROOT_PRIORITY: u8 = 200;

/// Milliseconds per timer tick (the kernel's periodic timer; scheduling slices, `TICKS`,
/// [`Sys::ThreadInfo`]).
pub const TICK_MS: u64 = 10;

/// A thread's state as [`Sys::ThreadInfo`] reports it.
pub mod thread_state {
    /// Created, not started.
    pub const INACTIVE: u64 = 0;
    /// Running or ready to run.
    pub const READY: u64 = 1;
    /// Blocked sending (no receiver yet).
    pub const SENDING: u64 = 2;
    /// Blocked in a receive.
    pub const RECEIVING: u64 = 3;
    /// Blocked in a call, waiting for the reply.
    pub const AWAIT_REPLY: u64 = 4;
    /// Blocked on a notification.
    pub const NOTIFY: u64 = 5;
    /// Ended.
    pub const DEAD: u64 = 6;
}

/// How many windows one task may borrow with [`Sys::TaskLink`].
pub const MAX_LINKS: usize = 8;

/// Number of system calls; anything at or above is [`Error::NoSys`].
pub const SYS_COUNT: u64 = 44;

/// The system call a number names; numbers at or above [`SYS_COUNT`] name none.
impl TryFrom<u64> for Sys {
    type Error = Error;

    fn try_from(n: u64) -> Result<Sys, Error> {
        use Sys::*;
        const ALL: [Sys; SYS_COUNT as usize] = [
            Null,
            Call,
            ReplyRecv,
            Send,
            Recv,
            Yield,
            DebugWrite,
            CapCopy,
            CapMint,
            CapDelete,
            CapRevoke,
            FactoryCreate,
            TaskCapPut,
            TaskMap,
            Unmap,
            ThreadConfig,
            ThreadStart,
            IrqGet,
            IrqBind,
            IrqAck,
            NotifySignal,
            NotifyWait,
            IoPortGive,
            Shutdown,
            KernelInfo,
            ThreadExit,
            SetTls,
            ThreadForeign,
            MapPhys,
            FactoryInfo,
            TaskKill,
            ThreadRegs,
            Translate,
            Pin,
            Unpin,
            DmaBind,
            DmaMap,
            ThreadInterrupt,
            TaskLink,
            ThreadInfo,
            PageCopy,
            TaskDirty,
            Reserved42,
            TaskReset,
        ];
        ALL.get(usize::try_from(n).map_err(|_| Error::NoSys)?)
            .copied()
            .ok_or(Error::NoSys)
    }
}

/// Error codes returned in `rax`.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    Ok = 0,
    /// Unknown system call number.
    NoSys = 1,
    /// Slot out of range or empty.
    BadCap = 2,
    /// The capability is of the wrong kind for this call.
    WrongKind = 3,
    /// The capability lacks a right this call needs.
    NoRights = 4,
    /// An argument is out of range (address, size, alignment, flag).
    Invalid = 5,
    /// The destination slot is occupied.
    SlotFull = 6,
    /// The factory's quota is used up (or the kernel is out of memory).
    NoMemory = 7,
    /// A non-blocking operation would block (timeout 0).
    WouldBlock = 8,
    /// The peer went away while we were waiting.
    PeerGone = 9,
    /// A user pointer does not point at mapped, accessible user memory.
    Fault = 10,
    /// The mapping or object is in use in a way that forbids the operation.
    Busy = 11,
    /// Nothing to reply to.
    NoCaller = 12,
}

impl Error {
    pub fn from_raw(v: u64) -> Error {
        match v {
            0 => Error::Ok,
            1 => Error::NoSys,
            2 => Error::BadCap,
            3 => Error::WrongKind,
            4 => Error::NoRights,
            5 => Error::Invalid,
            6 => Error::SlotFull,
            7 => Error::NoMemory,
            8 => Error::WouldBlock,
            9 => Error::PeerGone,
            10 => Error::Fault,
            11 => Error::Busy,
            _ => Error::NoCaller,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Error::Ok => "ok",
            Error::NoSys => "no such system call",
            Error::BadCap => "bad capability slot",
            Error::WrongKind => "wrong kind of capability",
            Error::NoRights => "insufficient rights",
            Error::Invalid => "invalid argument",
            Error::SlotFull => "slot occupied",
            Error::NoMemory => "out of memory or quota",
            Error::WouldBlock => "would block",
            Error::PeerGone => "peer gone",
            Error::Fault => "bad user address",
            Error::Busy => "busy",
            Error::NoCaller => "no caller to reply to",
        }
    }
}

/// Kinds of kernel object a factory can create (`rsi` of [`Sys::FactoryCreate`]).
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjKind {
    /// `arg` = number of capability slots (1..=4096) in bits 0..32, and in bits 32..40 the
    /// highest priority the task's threads may be given (0 = the creator's own ceiling; never
    /// above it).
    Task = 1,
    Thread = 2,
    Endpoint = 3,
    Notification = 4,
    /// A sub-factory; `arg` = its quota in bytes, charged to the parent.
    Factory = 5,
}

/// The object kind a number names ([`Error::Invalid`] for none).
impl TryFrom<u64> for ObjKind {
    type Error = Error;

    fn try_from(n: u64) -> Result<ObjKind, Error> {
        match n {
            1 => Ok(ObjKind::Task),
            2 => Ok(ObjKind::Thread),
            3 => Ok(ObjKind::Endpoint),
            4 => Ok(ObjKind::Notification),
            5 => Ok(ObjKind::Factory),
            _ => Err(Error::Invalid),
        }
    }
}

/// What a capability refers to (reported by the kernel in debugging output).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapKind {
    Task = 1,
    Thread = 2,
    Endpoint = 3,
    Notification = 4,
    Factory = 5,
    Irq = 6,
    IrqControl = 7,
    IoControl = 8,
    Control = 9,
}

/// Rights bits of a capability.
pub mod rights {
    /// May send to / signal the object.
    pub const SEND: u64 = 1 << 0;
    /// May receive from / wait on the object.
    pub const RECV: u64 = 1 << 1;
    /// May transfer capabilities through it.
    pub const GRANT: u64 = 1 << 2;
    /// May operate on the object (task, thread, factory, irq).
    pub const CONTROL: u64 = 1 << 3;
    pub const ALL: u64 = SEND | RECV | GRANT | CONTROL;
}

/// The message tag (`rsi` of the IPC calls).
///
/// Bits 0..16 label (the opcode of a request, the status of a reply); 16..23 untyped words (0..=64);
/// 24..27 capability items (0..=4); 27..30 map items (0..=4); bit 32 non-blocking (timeout 0).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MsgTag(pub u64);

impl MsgTag {
    pub const NONBLOCK: u64 = 1 << 32;
    #[inline(always)]
    pub const fn new(label: u16, words: u8) -> MsgTag {
        MsgTag(label as u64 | (words as u64 & 0x7f) << 16)
    }
    #[inline(always)]
    pub const fn with_caps(self, n: u8) -> MsgTag {
        MsgTag(self.0 & !(7 << 24) | (n as u64 & 7) << 24)
    }
    #[inline(always)]
    pub const fn with_maps(self, n: u8) -> MsgTag {
        MsgTag(self.0 & !(7 << 27) | (n as u64 & 7) << 27)
    }
    #[inline(always)]
    pub const fn nonblocking(self) -> MsgTag {
        MsgTag(self.0 | Self::NONBLOCK)
    }
    #[inline(always)]
    pub const fn label(self) -> u16 {
        self.0 as u16
    }
    #[inline(always)]
    pub const fn words(self) -> usize {
        ((self.0 >> 16) & 0x7f) as usize
    }
    #[inline(always)]
    pub const fn caps(self) -> usize {
        ((self.0 >> 24) & 7) as usize
    }
    #[inline(always)]
    pub const fn maps(self) -> usize {
        ((self.0 >> 27) & 7) as usize
    }
    #[inline(always)]
    pub const fn is_nonblocking(self) -> bool {
        self.0 & Self::NONBLOCK != 0
    }
}

/// Most untyped words in one message.
pub const MAX_WORDS: usize = 64;
/// Words carried in registers.
pub const REG_WORDS: usize = 4;
/// Most capability or map items in one message.
pub const MAX_ITEMS: usize = 4;

/// Labels the kernel uses for messages it synthesises on behalf of a thread.
pub mod label {
    /// Page fault. Words: 0 = fault address, 1 = [`super::fault`] bits, 2 = rip.
    /// Reply: map items resolve it (the whole faulting address space is the receive window);
    /// label 0 resumes the thread, any other label ends it.
    pub const PAGE_FAULT: u16 = 0xfff0;
    /// CPU exception. Words: 0 = vector, 1 = error code, 2 = rip, 3 = cr2 (or 0).
    /// Reply label 0 resumes (rarely sensible), other labels end the thread.
    pub const EXCEPTION: u16 = 0xfff1;
    /// The thread ended. Words: 0 = exit status. No reply expected.
    pub const EXIT: u16 = 0xfff2;
    /// A kernel-synthesised error reply to a call whose server was destroyed.
    pub const GONE: u16 = 0xfff3;
    /// No capability carrying a watched badge remains (see [`super::mint::NO_SENDERS`]).
    /// Words: 0 = the watched badge. The receiver's badge is that of the notice capability
    /// named at the mint, which is how a server tells this from a client's forgery. No reply.
    pub const NO_SENDERS: u16 = 0xfff4;
    /// Reply label to a `PAGE_FAULT` or `EXCEPTION` message: the thread continues at word 0
    /// in its own task with its registers saved in `Utcb::foreign` (as for a reflected foreign
    /// system call, but rcx and r11 its own), rdi = that frame, rsi = word 1, rdx = word 2,
    /// rsp below the red zone. How a Linux library turns a fault into a signal.
    pub const DIVERT: u16 = 0xfff5;
}

/// Flags of [`Sys::CapMint`] (`r8`).
pub mod mint {
    /// Tell the minter when the last capability carrying the new badge is gone.
    pub const NO_SENDERS: u64 = 1 << 0;
    /// Every flag the kernel knows; others are refused.
    pub const ALL: u64 = NO_SENDERS;
}

/// Page-fault error bits (word 1 of a PAGE_FAULT message).
pub mod fault {
    pub const PRESENT: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const EXEC: u64 = 1 << 4;

    /// "write" or "read": the access of a fault with error-code `bits` (word 1 of a PAGE_FAULT
    /// message), as the reports of unresolved faults print it.
    pub fn access(bits: u64) -> &'static str {
        if bits & WRITE != 0 {
            "write"
        } else {
            "read"
        }
    }
}

/// The name of CPU exception `vector` (word 0 of an EXCEPTION message), as the kernel's log and
/// root's reports print it.
pub fn exception_name(vector: u64) -> &'static str {
    const NAMES: [&str; 20] = [
        "divide error",
        "debug",
        "nmi",
        "breakpoint",
        "overflow",
        "bound range",
        "invalid opcode",
        "device not available",
        "double fault",
        "coprocessor",
        "invalid tss",
        "segment not present",
        "stack fault",
        "general protection",
        "page fault",
        "reserved",
        "x87 error",
        "alignment check",
        "machine check",
        "simd error",
    ];
    NAMES.get(vector as usize).copied().unwrap_or("exception")
}

/// Flags of [`Sys::TaskMap`] and of map items.
pub mod map {
    pub const READ: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    pub const EXEC: u64 = 1 << 2;
    /// Use 2 MiB pages: addresses must be 2 MiB aligned, `pages` counts 2 MiB pages.
    pub const HUGE: u64 = 1 << 3;
    /// Move instead of copy: the source mapping is removed (grant).
    pub const GRANT: u64 = 1 << 4;
    /// Device memory: uncached (MapPhys only).
    pub const UNCACHED: u64 = 1 << 5;
}

/// Flags of [`Sys::Unmap`].
pub const UNMAP_SELF: u64 = 1;
/// [`Sys::Unmap`]: lower the mappings to read-only instead of removing them (the memory server's
/// copy-on-write `copy`: the sharers keep reading without a fault, a write faults).
pub const UNMAP_WRITE: u64 = 2;
/// [`Sys::Unmap`]: also count the pages of the range whose frames have DMA pins (the memory
/// server frees frames in runs and asks about each frame's pins only if there are any).
pub const UNMAP_PINS: u64 = 4;

/// A map item in [`Utcb::map_items`]: map `pages` pages (4 KiB, or 2 MiB with HUGE) starting at the
/// sender's `src` to the receiver's `dst`, with rights no greater than the sender's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MapItem {
    pub src: u64,
    pub dst: u64,
    pub pages: u64,
    pub flags: u64,
}

/// The user thread control block: one page per thread, at an address chosen when the thread is
/// configured. User space finds it through its own bookkeeping (the runtime keeps it in GS-based
/// thread-local storage); the kernel finds it through the thread.
#[repr(C)]
pub struct Utcb {
    /// Message words. Words 0..4 travel in registers; the kernel copies words 4..n from the
    /// sender's UTCB to the receiver's.
    pub mr: [u64; MAX_WORDS],
    /// Capability items to send: slot numbers in the sender's table.
    pub caps_out: [u64; MAX_ITEMS],
    /// Where received capabilities land: empty slots of the receiver's table, in item order.
    /// Items are transferred until one cannot be (slot invalid or occupied, or the sender's
    /// endpoint capability lacks GRANT); the rest are dropped. The number that arrived is in the
    /// received tag.
    pub caps_in: [u64; MAX_ITEMS],
    /// Map items to send. On receiving a message with map items, the kernel writes here the ones
    /// that landed in the receive window, in order (`src` = 0; the tag counts them), so the
    /// receiver knows what each request brought.
    pub map_items: [MapItem; MAX_ITEMS],
    /// Receive window for map items: `[base, size)` in the receiver's address space; size 0 = none.
    pub map_window: [u64; 2],
    /// Free for the user runtime (e.g. a self pointer and thread-local values).
    pub user: [u64; 16],
    /// Registers of a foreign thread at its last reflected `syscall`.
    pub foreign: ForeignFrame,
}

/// Registers of a foreign thread at its `syscall`, saved by the kernel for the emulation entry
/// point (and for [`Sys::ThreadRegs`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ForeignFrame {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub rsp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub rip: u64,
    pub rflags: u64,
}

/// Values of [`Sys::KernelInfo`].
pub mod kinfo {
    /// Free bytes in the kernel's own memory pool.
    pub const KMEM_FREE: u64 = 0;
    /// Timer ticks since boot.
    pub const TICKS: u64 = 1;
    /// Frames of user RAM handed to root.
    pub const USER_FRAMES: u64 = 2;
    /// The real-time clock at boot, in seconds since 1970 (read from the CMOS RTC; 0 if it
    /// held no valid date).
    pub const BOOT_EPOCH: u64 = 3;
    /// The time-stamp counter when the RTC was read.
    pub const BOOT_TSC: u64 = 4;
    /// The time-stamp counter's rate in kHz, measured against the timer in the first tenth of a
    /// second after boot; 0 until then. Wall time = `BOOT_EPOCH` + (rdtsc - `BOOT_TSC`) / rate
    /// (`sawmill_rt::clock`).
    pub const TSC_KHZ: u64 = 5;
    /// `USER_RANGES + 2i` and `+ 2i + 1`: start and end of user RAM range `i` (0 past the last).
    pub const USER_RANGES: u64 = 16;
}

/// DMA pins ([`Sys::Pin`], [`Sys::Unpin`]).
pub mod pin {
    /// `pin` flag: the device will write the pages (they must be mapped writable).
    pub const DEVICE_WRITES: u64 = 1;
    /// `pin` flag: the pages are the page-aligned addresses in the caller's message words
    /// `mr[0..pages]` (any order, repeats allowed), not `vaddr` and the pages after it.
    pub const LIST: u64 = 2;
    /// Most pages one `pin` call takes (their addresses fill the message words).
    pub const MAX_PAGES: u64 = 64;
    /// Most pins one task holds at once.
    pub const PER_TASK: u64 = 256;
    /// `unpin` flag: release every pin of the caller.
    pub const UNPIN_ALL: u64 = 1;
    /// `translate` flag: report the frame's pin count too.
    pub const TRANSLATE_PINS: u64 = 1;
}

/// Flags of [`Sys::NotifyWait`]: do not block.
pub const NOTIFY_NONBLOCK: u64 = 1;
/// Flag of [`Sys::NotifyWait`]: block at most until the time-stamp counter reads the third
/// argument (then `WouldBlock`; checked on the timer's ticks, so up to one tick late).
pub const NOTIFY_DEADLINE: u64 = 2;

/// The port window of a minted I/O-control capability: badge = `base | count << 16`
/// (use [`io_badge`]); returns (base, count).
pub const fn io_window(badge: u64) -> (u64, u64) {
    (badge & 0xffff, (badge >> 16) & 0x1_ffff)
}

/// The badge that restricts an I/O-control capability to `[base, base + count)`.
pub const fn io_badge(base: u16, count: u32) -> u64 {
    base as u64 | (count as u64 & 0x1_ffff) << 16
}

/// Capability slots the root task finds filled at start.
pub mod root_slots {
    pub const TASK: u64 = 0;
    pub const THREAD: u64 = 1;
    pub const FACTORY: u64 = 2;
    pub const IRQ_CONTROL: u64 = 3;
    pub const IO_CONTROL: u64 = 4;
    pub const CONTROL: u64 = 5;
    /// The debug console (the same slot as `sawmill_rt::slots::CONSOLE` of every server).
    pub const CONSOLE: u64 = 6;
    /// First free slot.
    pub const FIRST_FREE: u64 = 8;
}

/// Fixed user addresses the kernel sets up for root.
pub mod layout {
    /// Root sees all user RAM here: physical address `p` at `PHYS_WINDOW + p`, mapped at boot.
    pub const PHYS_WINDOW: u64 = 0x0000_4000_0000_0000;
    /// The boot archive, mapped read-only into root.
    pub const BOOT_ARCHIVE: u64 = 0x0000_3000_0000_0000;
    /// Root's initial UTCB.
    pub const ROOT_UTCB: u64 = 0x0000_2fff_ffff_0000;
    /// Root's initial stack top (64 KiB below it are mapped).
    pub const ROOT_STACK_TOP: u64 = 0x0000_2fff_fffe_0000;
    /// Highest user address + 1. The last page of the canonical lower half is never mapped:
    /// the return address of a `syscall` is then always canonical, so `sysretq` cannot fault
    /// in ring 0 (the classic sysret bug) and the kernel's IPC path need not test it.
    pub const USER_END: u64 = 0x0000_7fff_ffff_f000;
}

/// Reflection of `syscall` from a foreign thread: on entry to the handler `rsp` is the foreign
/// `rsp` minus this many bytes (the red zone is skipped), `rdi` points at the [`ForeignFrame`].
pub const FOREIGN_REDZONE: u64 = 128;

/// `0x10 | code` is written to the isa-debug-exit port on shutdown, so QEMU exits with
/// `((0x10 | code) << 1) | 1`: 33 for code 0.
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

#[cfg(test)]
mod conversion_tests {
    use super::*;

    #[test]
    fn every_sys_number_round_trips_and_others_are_nosys() {
        for n in 0..SYS_COUNT {
            assert_eq!(Sys::try_from(n).map(|s| s as u64), Ok(n));
        }
        for n in [SYS_COUNT, SYS_COUNT + 1, 1 << 32, u64::MAX] {
            assert_eq!(Sys::try_from(n), Err(Error::NoSys));
        }
    }

    #[test]
    fn obj_kinds_convert_and_others_are_invalid() {
        for k in [
            ObjKind::Task,
            ObjKind::Thread,
            ObjKind::Endpoint,
            ObjKind::Notification,
            ObjKind::Factory,
        ] {
            assert_eq!(ObjKind::try_from(k as u64), Ok(k));
        }
        for n in [0, 6, u64::MAX] {
            assert_eq!(ObjKind::try_from(n), Err(Error::Invalid));
        }
    }
}
