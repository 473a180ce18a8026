//! Fixed-priority round-robin scheduling and the switch to a thread.
//!
//! 256 priorities; the highest non-empty ready queue runs; equal priorities share the CPU in
//! time slices. IPC may switch directly to a partner (the scheduler is not consulted) as long as
//! no higher-priority thread is ready: `finish` checks that on every exit from the kernel.
use crate::arch::{self, return_to_user, set_current_frame};
use crate::obj::{k, State, Thread};
use core::ptr::null_mut;

/// Timer ticks per time slice.
pub const SLICE: u32 = 2;

fn set_bit(p: usize) {
    k().ready_bits[p / 64] |= 1 << (p % 64);
}
fn clear_bit(p: usize) {
    k().ready_bits[p / 64] &= !(1 << (p % 64));
}

pub fn highest_ready() -> Option<usize> {
    let b = &k().ready_bits;
    for i in (0..4).rev() {
        if b[i] != 0 {
            return Some(i * 64 + 63 - b[i].leading_zeros() as usize);
        }
    }
    None
}

/// Appends a runnable thread to its ready queue.
pub fn enqueue(t: *mut Thread) {
    // SAFETY: t is a live thread not in any queue.
    let th = unsafe { &mut *t };
    let p = th.prio as usize;
    th.next = null_mut();
    th.prev = k().ready_tail[p];
    if th.prev.is_null() {
        k().ready_head[p] = t;
    } else {
        // SAFETY: queue members are live.
        unsafe { (*th.prev).next = t };
    }
    k().ready_tail[p] = t;
    k().ready_n += 1;
    set_bit(p);
}

fn unlink_ready(t: *mut Thread) {
    // SAFETY: t is in ready queue `prio`.
    let th = unsafe { &mut *t };
    let p = th.prio as usize;
    if th.prev.is_null() {
        k().ready_head[p] = th.next;
    } else {
        unsafe { (*th.prev).next = th.next };
    }
    if th.next.is_null() {
        k().ready_tail[p] = th.prev;
    } else {
        unsafe { (*th.next).prev = th.prev };
    }
    th.next = null_mut();
    th.prev = null_mut();
    k().ready_n -= 1;
    if k().ready_head[p].is_null() {
        clear_bit(p);
    }
}

fn in_ready_queue(t: *mut Thread) -> bool {
    // SAFETY: live thread.
    let th = unsafe { &*t };
    th.state == State::Ready && (k().ready_head[th.prio as usize] == t || !th.prev.is_null())
}

/// Removes a thread from whatever scheduling queue it is in (endpoint queues are handled by IPC).
pub fn dequeue_any(t: *mut Thread) {
    if in_ready_queue(t) {
        unlink_ready(t);
    }
}

fn pop_ready() -> Option<*mut Thread> {
    let p = highest_ready()?;
    let t = k().ready_head[p];
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
    if t != k().current && !in_ready_queue(t) {
        enqueue(t);
    }
}

pub fn clear_io() {
    // SAFETY: single CPU; the TSS bitmap is only read by hardware in user mode.
    unsafe { (&mut (*core::ptr::addr_of_mut!(arch::TSS)).iomap)[..8192].fill(0xff) };
    k().io_loaded = null_mut();
}

/// The thread whose state (address space, FS/GS, TS, I/O bitmap, entry frame) is loaded.
static mut LOADED: *mut Thread = null_mut();

/// A thread object is freed: its memory may be reused for another thread, whose state must then
/// be loaded in full.
pub fn forget(t: *mut Thread) {
    // SAFETY: single CPU.
    unsafe {
        if LOADED == t {
            LOADED = null_mut();
        }
    }
}

/// Forces a full reload of the current thread's state on the way out (its FS/GS base or its
/// task's I/O bitmap changed).
pub fn reload() {
    // SAFETY: single CPU.
    unsafe { LOADED = null_mut() };
}

/// Loads a thread's address space and per-thread state and returns to it. Kept lean: it runs on
/// every IPC switch, so what rarely changes (FS/GS base, the I/O bitmap) is compared here and
/// loaded out of line.
fn switch_to(t: *mut Thread) -> ! {
    switch_inline(t)
}

#[inline(always)]
fn switch_inline(t: *mut Thread) -> ! {
    let kk = k();
    kk.current = t;
    // SAFETY: single CPU; LOADED is only used here. t is live and runnable, bound to a live task.
    unsafe {
        if LOADED != t {
            // Not the thread that entered (a system call that did not block needs no reload).
            LOADED = t;
            let th = &mut *t;
            let task = &*th.task;
            set_current_frame(&mut th.frame);
            if kk.loaded_cr3 != task.pml4 {
                arch::write_cr3(task.pml4);
                kk.loaded_cr3 = task.pml4;
            }
            if kk.loaded_fs != th.fs_base || kk.loaded_gs != th.gs_base {
                load_tls(th);
            }
            // Lazy FPU switch: the first FPU/SSE instruction of a thread that does not own the
            // FPU traps (#NM) and swaps the state then.
            crate::trap::set_fpu_trap(kk.fpu_owner != t);
            if !kk.io_loaded.is_null() || task.io.is_some() {
                load_io(th.task);
            }
        }
        if (*t).frame.rip >= sawmill_abi::layout::USER_END {
            off_the_end(t);
        }
        return_to_user(&(*t).frame)
    }
}

/// The thread's return address is past the user half (it executed `syscall` in the last bytes
/// of it): no return instruction can resume it, so it takes a general-protection fault of its
/// own. Checked here, on the way out, rather than on every system call entry.
#[cold]
#[inline(never)]
fn off_the_end(t: *mut Thread) -> ! {
    crate::trap::user_exception(t, 13);
    finish()
}

/// Loads the FS and GS base of the thread being switched to.
#[cold]
#[inline(never)]
fn load_tls(th: &Thread) {
    let kk = k();
    if kk.loaded_fs != th.fs_base {
        arch::wrmsr(arch::MSR_FS_BASE, th.fs_base);
        kk.loaded_fs = th.fs_base;
    }
    if kk.loaded_gs != th.gs_base {
        arch::wrmsr(arch::MSR_GS_BASE, th.gs_base);
        kk.loaded_gs = th.gs_base;
    }
}

/// Makes the TSS I/O bitmap the one of `t` (all ports closed if it has none).
#[cold]
#[inline(never)]
fn load_io(t: *mut crate::obj::Task) {
    let kk = k();
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
        }
    }
}

/// Runs `t` now (the IPC fast path has checked that nothing of higher priority is ready).
#[inline(always)]
pub fn switch_now(t: *mut Thread) -> ! {
    // Inlined into the fast path: its frame and register saves are shared with the caller's.
    switch_inline(t)
}

/// Leaves the kernel: continues the current thread if it is runnable and no higher-priority
/// thread is ready; otherwise runs the best ready thread, idling until there is one.
pub fn finish() -> ! {
    if !k().release.is_empty() {
        crate::obj::drain_release();
    }
    let cur = k().current;
    if !cur.is_null() {
        // SAFETY: current is live (destroy clears it).
        let th = unsafe { &mut *cur };
        if th.state == State::Ready {
            if k().ready_n == 0 {
                switch_to(cur);
            }
            match highest_ready() {
                Some(p) if p > th.prio as usize => {
                    enqueue(cur);
                }
                _ => switch_to(cur),
            }
        }
    }
    k().current = null_mut();
    loop {
        if let Some(t) = pop_ready() {
            switch_to(t);
        }
        idle();
    }
}

/// Current thread used up its slice: round robin among equals.
pub fn preempt_tick() {
    let cur = k().current;
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
        k().current = null_mut();
    }
}

/// Waits for an interrupt with nothing to run.
fn idle() {
    // SAFETY: enabling interrupts only around hlt; handlers run on this stack and return here.
    unsafe { core::arch::asm!("sti", "hlt", "cli", options(nostack)) };
}
