//! Fixed-priority round-robin scheduling and the switch to a thread.
//!
//! 256 priorities; the highest non-empty ready queue runs; equal priorities share the CPU in
//! time slices. IPC may switch directly to a partner (the scheduler is not consulted) as long as
//! no higher-priority thread is ready: `finish` checks that on every exit from the kernel.
use crate::arch::{self, return_to_user, set_current_frame};
use crate::obj::{State, Task, Thread};
use crate::state::{kernel, note_extra};
use core::ptr::null_mut;

/// Timer ticks per time slice.
pub const SLICE: u32 = 2;

fn set_bit(p: usize) {
    let k = kernel();
    k.ready_bits[p / 64] |= 1 << (p % 64);
    k.ready_words |= 1 << (p / 64);
}
fn clear_bit(p: usize) {
    let k = kernel();
    let w = &mut k.ready_bits[p / 64];
    *w &= !(1 << (p % 64));
    if *w == 0 {
        k.ready_words &= !(1 << (p / 64));
    }
}

pub fn highest_ready() -> Option<usize> {
    let k = kernel();
    if k.ready_words == 0 {
        return None;
    }
    let i = (63 - k.ready_words.leading_zeros()) as usize;
    // `i` < 4: only set_bit sets bits of `ready_words`, at p / 64 for p < NPRIO = 256.
    let b = k.ready_bits[i & 3];
    Some(i * 64 + 63 - b.leading_zeros() as usize)
}

/// Whether no ready thread has a priority above `prio`: then the thread an IPC hands the CPU to
/// (of priority `prio`) is the one the scheduler would keep running.
#[inline(always)]
pub fn none_ready_above(prio: u8) -> bool {
    kernel().ready_n == 0 || highest_ready().is_none_or(|p| p <= prio as usize)
}

/// Appends a runnable thread to its ready queue.
pub fn enqueue(t: *mut Thread) {
    // SAFETY: t is a live thread not in any queue.
    let th = unsafe { &mut *t };
    let p = th.prio as usize;
    th.next = null_mut();
    th.prev = kernel().ready_tail[p];
    if th.prev.is_null() {
        kernel().ready_head[p] = t;
    } else {
        // SAFETY: queue members are live.
        unsafe { (*th.prev).next = t };
    }
    kernel().ready_tail[p] = t;
    kernel().ready_n += 1;
    set_bit(p);
}

fn unlink_ready(t: *mut Thread) {
    // SAFETY: t is in ready queue `prio`.
    let th = unsafe { &mut *t };
    let p = th.prio as usize;
    if th.prev.is_null() {
        kernel().ready_head[p] = th.next;
    } else {
        // SAFETY: queue neighbours are live threads.
        unsafe { (*th.prev).next = th.next };
    }
    if th.next.is_null() {
        kernel().ready_tail[p] = th.prev;
    } else {
        // SAFETY: as above.
        unsafe { (*th.next).prev = th.prev };
    }
    th.next = null_mut();
    th.prev = null_mut();
    kernel().ready_n -= 1;
    if kernel().ready_head[p].is_null() {
        clear_bit(p);
    }
}

fn in_ready_queue(t: *mut Thread) -> bool {
    // SAFETY: live thread.
    let th = unsafe { &*t };
    th.state == State::Ready && (kernel().ready_head[th.prio as usize] == t || !th.prev.is_null())
}

/// Removes a thread from whatever scheduling queue it is in (endpoint queues are handled by IPC).
pub fn dequeue_any(t: *mut Thread) {
    if in_ready_queue(t) {
        unlink_ready(t);
    }
}

fn pop_ready() -> Option<*mut Thread> {
    let p = highest_ready()?;
    let t = kernel().ready_head[p];
    unlink_ready(t);
    Some(t)
}

/// Makes a blocked thread runnable with `rax` = `err`.
pub fn wake_with(t: *mut Thread, err: u64) {
    // SAFETY: live thread.
    let th = unsafe { &mut *t };
    th.frame.rax = err;
    make_ready(t);
}

/// Makes a thread runnable (queues it unless it is the current thread).
pub fn make_ready(t: *mut Thread) {
    // SAFETY: live thread.
    let th = unsafe { &mut *t };
    if th.state == State::Dead {
        return;
    }
    th.state = State::Ready;
    if t != kernel().current && !in_ready_queue(t) {
        enqueue(t);
    }
}

pub fn clear_io() {
    // SAFETY: single CPU; the TSS bitmap is only read by hardware in user mode.
    unsafe { (&mut (*core::ptr::addr_of_mut!(arch::TSS)).iomap)[..8192].fill(0xff) };
    kernel().io_loaded = null_mut();
    note_extra();
}

/// Sets or clears CR0.TS, which makes the next FPU/SSE instruction raise #NM.
pub fn set_fpu_trap(on: bool) {
    let k = kernel();
    if k.fpu_trap == on {
        return;
    }
    k.fpu_trap = on;
    note_extra();
    arch::set_cr0_ts(on);
}

/// A thread object is freed: its memory may be reused for another thread, whose state must then
/// be loaded in full.
pub fn forget(t: *mut Thread) {
    let k = kernel();
    if k.loaded_thread == t {
        k.loaded_thread = null_mut();
    }
}

/// Forces a full reload of the current thread's state on the way out (its FS/GS base or its
/// task's I/O bitmap changed).
pub fn reload() {
    kernel().loaded_thread = null_mut();
}

/// Loads a thread's address space and per-thread state and returns to it. What rarely changes
/// (the I/O bitmap) is compared here and loaded out of line. The caller has checked that the
/// thread's rip is one a return instruction can use (`trap::leave`).
pub fn switch_to(t: *mut Thread) -> ! {
    switch_inline(t)
}

#[inline(always)]
fn switch_inline(t: *mut Thread) -> ! {
    load_context(t);
    // SAFETY: t is live; its frame holds a user context with a usable rip.
    unsafe { return_to_user(&(*t).frame) }
}

/// Makes `t` current and loads what of its state is not loaded yet.
#[inline(always)]
fn load_context(t: *mut Thread) {
    if kernel().loaded_thread == t {
        // The thread that entered (a system call that did not block): nothing to reload.
        kernel().current = t;
        return;
    }
    // SAFETY: t is live and runnable, bound to a live task, and not the loaded thread.
    unsafe {
        load_base(t);
        load_tls(&*t);
    }
    load_fpu_io(t);
}

/// The FPU trap and the I/O bitmap for the current thread `t`.
#[inline(always)]
fn load_fpu_io(t: *mut Thread) {
    // Lazy FPU switch: the first FPU/SSE instruction of a thread that does not own the FPU
    // traps (#NM) and swaps the state then.
    set_fpu_trap(kernel().fpu_owner != t);
    // SAFETY: live thread bound to a live task.
    let task = unsafe { (*t).task };
    // SAFETY: the task of a live thread is live.
    if !kernel().io_loaded.is_null() || unsafe { (*task).io.is_some() } {
        load_io(task);
    }
}

/// Makes `t` (not the loaded thread) current: entry stack and address space.
///
/// # Safety
/// `t` is live and runnable, bound to a live task, and not `Kernel::loaded_thread`.
#[inline(always)]
unsafe fn load_base(t: *mut Thread) {
    let kk = kernel();
    kk.current = t;
    kk.loaded_thread = t;
    // SAFETY: the caller's promise.
    unsafe {
        let th = &mut *t;
        set_current_frame(&mut th.frame);
        let pml4 = (*th.task).pml4;
        if kk.loaded_cr3 != pml4 {
            kk.loaded_cr3 = pml4;
            arch::write_cr3(pml4);
        }
    }
}

/// Loads the FS and GS base of the thread being switched to (threads of one task differ at
/// least in GS, which points at their UTCB).
#[inline(always)]
fn load_tls(th: &Thread) {
    let kk = kernel();
    if kk.loaded_fs != th.fs_base {
        arch::wrmsr(arch::MSR_FS_BASE, th.fs_base);
        kk.loaded_fs = th.fs_base;
    }
    if kk.loaded_gs != th.gs_base {
        arch::wrmsr(arch::MSR_GS_BASE, th.gs_base);
        kk.loaded_gs = th.gs_base;
    }
}

/// Whether the IPC fast path may hand `t` a message in registers with [`switch_with_msg`]: it
/// entered through `syscall`. Its rip is then the return address of a `syscall` in a mapped
/// page, at most `layout::USER_END`, which is canonical.
#[inline(always)]
pub fn can_take_msg(t: &Thread) -> bool {
    t.frame.vector == arch::SYSCALL_VECTOR
}

/// Runs `t` now, its registers carrying the message of the frame `from` with `badge` (the IPC
/// fast path; [`can_take_msg`] holds for `t`, nothing of higher priority is ready). `t`'s frame
/// is not updated with the message: it is rewritten on its next entry anyway.
#[inline(always)]
pub fn switch_with_msg(t: *mut Thread, from: *const arch::Frame, badge: u64) -> ! {
    // SAFETY: t is live and runnable; its frame a `syscall` frame with a usable rip
    // (can_take_msg); `from` is a live thread's frame in kernel memory, mapped in every space.
    unsafe {
        // t waited in the kernel, so it is not the thread that entered, whose state is loaded.
        load_base(t);
        load_tls(&*t);
        // The FPU trap and the I/O bitmap: TS set and no bitmap loaded (`extra_loaded` false)
        // is what every thread but the FPU owner and tasks with I/O ports wants. Each test is
        // its own branch to an out-of-line load that does not come back, so no value lives
        // across a call here and the compiler does not fold the tests into flag arithmetic.
        let kk = kernel();
        if kk.fpu_owner == t {
            load_rest_then_msg(t, from, badge);
        }
        if kk.extra_loaded {
            load_rest_then_msg(t, from, badge);
        }
        if (*(*t).task).io.is_some() {
            load_rest_then_msg(t, from, badge);
        }
        arch::return_sysret_msg_to(&(*t).frame, from, badge)
    }
}

/// The FPU trap and I/O bitmap part of a fast-path switch, then the return.
#[cold]
#[inline(never)]
fn load_rest_then_msg(t: *mut Thread, from: *const arch::Frame, badge: u64) -> ! {
    load_fpu_io(t);
    // SAFETY: as in switch_with_msg.
    unsafe { arch::return_sysret_msg_to(&(*t).frame, from, badge) }
}

/// Makes the TSS I/O bitmap the one of `t` (all ports closed if it has none).
#[cold]
#[inline(never)]
fn load_io(t: *mut Task) {
    let kk = kernel();
    // SAFETY: live task.
    let task = unsafe { &*t };
    let want = if task.io.is_some() { t } else { null_mut() };
    if kk.io_loaded == want {
        return;
    }
    match &task.io {
        None => clear_io(),
        Some(map) => {
            // SAFETY: as in clear_io.
            unsafe {
                (&mut (*core::ptr::addr_of_mut!(arch::TSS)).iomap)[..8192].copy_from_slice(&map[..])
            };
            kk.io_loaded = t;
            note_extra();
        }
    }
}

/// Runs `t` now (the IPC fast path has checked that nothing of higher priority is ready).
#[inline(always)]
pub fn switch_now(t: *mut Thread) -> ! {
    // Inlined into the fast path: its frame and register saves are shared with the caller's.
    switch_inline(t)
}

/// The thread to run next: the current one if it is runnable and no higher-priority thread is
/// ready; otherwise the best ready thread (made current), idling until there is one.
#[inline(always)]
pub fn next() -> *mut Thread {
    let cur = kernel().current;
    if !cur.is_null() {
        // SAFETY: current is live (destroy clears it).
        let th = unsafe { &mut *cur };
        if th.state == State::Ready {
            if kernel().ready_n == 0 {
                return cur;
            }
            match highest_ready() {
                Some(p) if p > th.prio as usize => {
                    enqueue(cur);
                }
                _ => return cur,
            }
        }
    }
    kernel().current = null_mut();
    loop {
        if let Some(t) = pop_ready() {
            kernel().current = t;
            return t;
        }
        idle();
    }
}

/// Current thread used up its slice: round robin among equals.
pub fn preempt_tick() {
    let cur = kernel().current;
    if cur.is_null() {
        return;
    }
    // SAFETY: live current thread.
    let th = unsafe { &mut *cur };
    if th.state != State::Ready {
        return;
    }
    th.slice = th.slice.saturating_sub(1);
    if th.slice == 0 {
        th.slice = SLICE;
        enqueue(cur);
        kernel().current = null_mut();
    }
}

/// How long the idle loop polls before it halts (microseconds): a device that answers within
/// it wakes its waiter without the CPU having halted (Linux's guest halt-polling, for the same
/// reason: in a virtual machine a halt and its wake-up are expensive). Under `-icount` it also
/// keeps the host's time out of the instruction count: QEMU advances the guest's clock by the
/// host's time while the CPU is halted, and a disk request that completes during the poll costs
/// only the poll's instructions (bench/README.md, `fsync`).
const IDLE_POLL_US: u64 = 10;

/// Waits for an interrupt with nothing to run: polls for [`IDLE_POLL_US`] with interrupts on
/// (a handler that makes a thread ready ends it), then halts. Out of line, so the scheduler's
/// hot path (every system call's exit) stays as it was.
#[cold]
#[inline(never)]
fn idle() {
    let khz = kernel().tsc_khz;
    if khz != 0 {
        let until = crate::clock::rdtsc() + IDLE_POLL_US * khz / 1000;
        // SAFETY: interrupts on while polling; handlers run on this stack and return here.
        unsafe { core::arch::asm!("sti", options(nostack)) };
        loop {
            // SAFETY: a plain read of a field the interrupt handlers may change.
            let ready = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(kernel().ready_n)) };
            if ready != 0 || crate::clock::rdtsc() >= until {
                break;
            }
            core::hint::spin_loop();
        }
        // SAFETY: back to interrupts off, as the scheduler runs.
        unsafe { core::arch::asm!("cli", options(nostack)) };
        // SAFETY: as above.
        if unsafe { core::ptr::read_volatile(core::ptr::addr_of!(kernel().ready_n)) } != 0 {
            return;
        }
    }
    // SAFETY: enabling interrupts only around hlt; handlers run on this stack and return here.
    unsafe { core::arch::asm!("sti", "hlt", "cli", options(nostack)) };
}
