//! Linux threads at run time: `clone` with `CLONE_THREAD`, thread ids (`gettid`,
//! `set_tid_address`, `CLONE_*_SETTID`, `CLONE_CHILD_CLEARTID`), a thread's end, `futex`, and
//! the library lock that lets several threads of one program use the library.
//!
//! **Design** (ARCHITECTURE §9, Threads). A Linux thread is a kernel thread in the process's
//! task, marked foreign like the main thread, with its own UTCB, its own library stack
//! (`Utcb::user[15]`), its own FS base and its own notification. The library's state stays in
//! its `Single` cells, guarded by one lock: a process that never made a thread never takes it
//! (its threads enter through `linux_syscall_entry`, whose path is unchanged); the first
//! `CLONE_THREAD` switches the caller to `linux_syscall_entry_mt`, which takes the lock on
//! entry and releases it on return, and every new thread enters there too. The lock is
//! released only around a sleep (`signal_guest::wait_wake` → [`sleep`]), where no borrow of
//! library state is alive, and on the way out of the library. A thread's own part of the
//! signal state (mask, alternate stack, the signals sent to it) and its FS base are swapped
//! into the process's state when it takes the lock after another thread ([`switch_in`]).
//!
//! **Waking.** A kernel notification has at most one waiter, so each thread sleeps on its own
//! notification, except one sleeping thread (the watcher) that sleeps on the process's
//! `proc:wake`, where proc, pipes and the console signal; whoever takes bits from `proc:wake`
//! wakes every other sleeper to look again ([`kick_sleepers`]), and a watcher that leaves hands
//! the watch to another sleeper. A futex wake, `tgkill` or a kick signals the notification the
//! thread sleeps on (recorded under the lock before it sleeps, so no wakeup is lost: a signal
//! that comes before the sleep leaves its bit, and the sleep returns at once). A thread's own
//! notification also diverts it from foreign code (`thread_interrupt`), so a signal reaches a
//! thread that makes no system call.
//!
//! It touches the library's state under the lock only, the program's memory through
//! [`GuestUser`], and proc (thread ids) through the process's `proc` capability.

use crate::guest::{self, GuestUser, Single};
use crate::signal_guest;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use sawmill_abi::{ForeignFrame, ObjKind, Sys, Utcb};
use sawmill_interfaces::proc;
use sawmill_linux::errno::{self, Errno};
use sawmill_linux::futex::{self, Futexes, Op};
use sawmill_linux::signal::{self as sig, Info, ThreadSignals};
use sawmill_linux::{layout, procs, SysResult, User};
use sawmill_proc_api::WAKE_TIMER;
use sawmill_rt::{println, slots, sys, thread};

/// Set by the process's first `CLONE_THREAD`, never cleared: from then on every entry to the
/// library takes [`LOCK`].
static THREADED: AtomicBool = AtomicBool::new(false);
/// The library lock: 0 free, else the holder's thread id.
static LOCK: AtomicU32 = AtomicU32::new(0);

/// `Utcb::user` word holding the thread's id (0 for the main thread, whose id is the pid).
const TID_WORD: usize = 13;
/// The bit a wake of one thread signals (any bit would do: the woken thread looks again; this
/// one is dropped by `signal_guest`'s handling of `proc:wake` bits, so waking the watcher
/// this way fakes nothing).
const KICK: u64 = WAKE_TIMER;

/// One Linux thread of the process.
struct LinuxThread {
    tid: u32,
    /// Its kernel thread (`slots::THREAD` for the main thread).
    cap: u64,
    /// Its own notification.
    wake: u64,
    /// The notification it sleeps on now (0: awake).
    asleep_on: u64,
    /// `CLONE_CHILD_CLEARTID` / `set_tid_address`: zeroed and futex-woken at its end.
    clear_tid: u64,
    /// Its thread pointer, while another thread's is the process's.
    fs_base: u64,
    /// Its signal state, while another thread's is the process's.
    signals: ThreadSignals,
    /// Its UTCB address and library stack (0 for the main thread's, which are never reused).
    utcb: u64,
    stack: u64,
}

/// What an ended thread leaves for the next one: its kernel thread's slot (the object is
/// deleted before the slot is used again), notification, UTCB address and library stack.
struct Spare {
    cap: u64,
    wake: u64,
    utcb: u64,
    stack: u64,
}

struct Threads {
    all: Vec<LinuxThread>,
    spares: Vec<Spare>,
    futexes: Futexes,
    /// The thread whose own state is in the process's state now.
    active: u32,
    /// The thread sleeping on `proc:wake` (0: none).
    watcher: u32,
    /// The main thread's `set_tid_address` before the process had threads.
    main_clear_tid: u64,
}

static THREADS: Single<Threads> = Single(UnsafeCell::new(Threads {
    all: Vec::new(),
    spares: Vec::new(),
    futexes: Futexes::new(),
    active: 0,
    watcher: 0,
    main_clear_tid: 0,
}));

impl Threads {
    fn find(&mut self, tid: u32) -> Option<&mut LinuxThread> {
        self.all.iter_mut().find(|t| t.tid == tid)
    }
}

/// Whether the process has (had) more than one thread.
#[inline(always)]
pub fn threaded() -> bool {
    THREADED.load(Ordering::Relaxed)
}

fn lock() {
    let me = current_tid();
    while LOCK
        .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        // The holder runs (or waits for a server, which answers at once): let it.
        sys::yield_now();
    }
}

fn unlock() {
    LOCK.store(0, Ordering::Release);
}

/// Leaves the library other than through the return of [`serve_mt`] (a handler's frame, a
/// full restore): releases the lock of a threaded process.
pub fn leave() {
    if threaded() {
        unlock();
    }
}

/// The calling thread's id.
pub fn current_tid() -> u32 {
    match sawmill_rt::utcb().user[TID_WORD] {
        0 => match MAIN_TID.load(Ordering::Relaxed) {
            0 => guest::ids().0 as u32,
            pid => pid,
        },
        t => t as u32,
    }
}

/// The main thread's id (the pid) once the process has threads: read without the lock.
static MAIN_TID: AtomicU32 = AtomicU32::new(0);

/// After taking the lock: if another thread was last in the library, its own state goes back
/// to its record and the caller's comes in.
fn switch_in() {
    let me = current_tid();
    let t = THREADS.get();
    if t.active == me {
        return;
    }
    let sigs = signal_guest::signals();
    let fs = guest::fs_base_mut();
    let prev = t.active;
    if let Some(p) = t.find(prev) {
        sigs.swap_thread(&mut p.signals);
        core::mem::swap(fs, &mut p.fs_base);
    }
    if let Some(m) = t.find(me) {
        sigs.swap_thread(&mut m.signals);
        core::mem::swap(fs, &mut m.fs_base);
    }
    t.active = me;
    if sigs.deliverable() {
        signal_guest::force_look();
    }
}

// The entry of every thread of a threaded process: as `linux_syscall_entry`, with the lock.
core::arch::global_asm!(
    r#"
.section .text.linux_syscall_entry_mt, "ax"
.global linux_syscall_entry_mt
linux_syscall_entry_mt:
    mov rsp, [rdi - 8]
    cld
    call {serve}
    jmp linux_syscall_return
"#,
    serve = sym serve_mt
);

extern "C" {
    fn linux_syscall_entry_mt();
    fn linux_fault_entry();
}

extern "C" fn serve_mt(frame: *mut ForeignFrame) -> *mut ForeignFrame {
    lock();
    switch_in();
    let f = guest::serve_reflected(frame);
    unlock();
    f
}

/// The fault entry of a threaded process takes the lock too (`signal_guest::serve_fault`),
/// unless the faulting thread holds it: a fault in the library itself, which ends the process.
pub fn fault_enter() {
    if threaded() && LOCK.load(Ordering::Relaxed) != current_tid() {
        lock();
        switch_in();
    }
}

// ---------------------------------------------------------------------------------------------
// Sleeping and waking.

/// A sleep of the calling thread (threaded process) until a bit comes or the TSC reaches
/// `deadline`: on `proc_wake` if no other thread watches it, else on the thread's own
/// notification. The lock is released for the sleep. Returns the bits and whether they came
/// from `proc_wake`.
pub fn sleep(deadline: Option<u64>, proc_wake: u64) -> (Result<u64, sawmill_abi::Error>, bool) {
    let me = current_tid();
    let t = THREADS.get();
    let watch = t.watcher == 0 && proc_wake != 0;
    let Some(rec) = t.find(me) else {
        return (Ok(0), false);
    };
    let n = if watch { proc_wake } else { rec.wake };
    rec.asleep_on = n;
    if watch {
        t.watcher = me;
    }
    unlock();
    let got = match deadline {
        Some(d) => sys::notify_wait_until(n, d),
        None => sys::notify_wait(n, 0),
    };
    lock();
    switch_in();
    let t = THREADS.get();
    if let Some(rec) = t.find(me) {
        rec.asleep_on = 0;
    }
    if watch {
        t.watcher = 0;
        // Someone else sleeping takes over the watch.
        if let Some(o) = t.all.iter().find(|o| o.asleep_on != 0) {
            let _ = sys::notify_signal(o.asleep_on, KICK);
        }
    }
    (got, watch)
}

/// Wakes every sleeping thread but the caller to look again (bits came from `proc:wake`:
/// I/O, a child, a signal for the process).
#[inline(always)]
pub fn kick_sleepers() {
    if threaded() {
        kick_other_sleepers();
    }
}

fn kick_other_sleepers() {
    let me = current_tid();
    for o in THREADS.get().all.iter().filter(|o| o.tid != me) {
        if o.asleep_on != 0 {
            let _ = sys::notify_signal(o.asleep_on, KICK);
        }
    }
}

/// A signal for the process arrived: if the calling thread blocks it, a thread that does not
/// is woken (asleep) or diverted from its code (running) to take it.
#[inline(always)]
pub fn route_process_signal() {
    if threaded() {
        route_to_unblocking_thread();
    }
}

fn route_to_unblocking_thread() {
    let sigs = signal_guest::signals();
    if sigs.deliverable() {
        return; // the caller takes it at its return
    }
    let me = current_tid();
    let t = THREADS.get();
    if let Some(x) = t
        .all
        .iter()
        .find(|x| x.tid != me && sigs.deliverable_to(&x.signals))
    {
        kick(x);
    }
}

/// Wakes thread `tid`: the notification it sleeps on, or, awake, its own (which diverts it
/// from foreign code to look at its signals; the main thread's is `proc:wake`'s binding).
fn kick(t: &LinuxThread) {
    let n = if t.asleep_on != 0 {
        t.asleep_on
    } else if t.cap == slots::THREAD {
        signal_guest::wake_cap()
    } else {
        t.wake
    };
    if n != 0 {
        let _ = sys::notify_signal(n, KICK);
    }
}

fn kick_tids(tids: &[u32]) {
    let t = THREADS.get();
    for &tid in tids {
        if let Some(x) = t.all.iter().find(|x| x.tid == tid) {
            kick(x);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Thread ids.

pub fn gettid() -> SysResult {
    Ok(current_tid() as u64)
}

pub fn set_tid_address(addr: u64) -> SysResult {
    let me = current_tid();
    let t = THREADS.get();
    match t.find(me) {
        Some(r) => r.clear_tid = addr,
        None => t.main_clear_tid = addr,
    }
    Ok(me as u64)
}

/// `tgkill`/`tkill` to `tid` if it is a thread of this process (None: it is not, ask proc).
pub fn signal_thread(tid: u32, info: Info) -> Option<SysResult> {
    let me = current_tid();
    if tid == me {
        signal_guest::raise_thread(info);
        return Some(Ok(0));
    }
    let t = THREADS.get();
    let x = t.all.iter_mut().find(|x| x.tid == tid)?;
    if info.signo != 0 {
        if info.signo == sig::SIGKILL {
            // Kills the whole process, as on Linux.
            signal_guest::raise_thread(info);
            return Some(Ok(0));
        }
        signal_guest::signals().raise_other(&mut x.signals, info);
        kick(x);
    }
    Some(Ok(0))
}

// ---------------------------------------------------------------------------------------------
// clone(CLONE_THREAD).

/// What a new thread needs to start (handed to its native start in the library).
struct Start {
    frame: ForeignFrame,
    fs_base: u64,
    stack_top: u64,
    tid: u32,
    cap: u64,
    wake: u64,
}

fn proc_client() -> Option<proc::Client> {
    crate::guest::proc_cap().map(proc::Client::new)
}

/// The first thread beyond the main one: the main thread gets its record, the lock is taken
/// (and held by the caller from here), and the caller enters through the locked entry from
/// its next call on.
fn become_threaded() -> Result<(), Errno> {
    let wake = thread::create(ObjKind::Notification, 0).map_err(|_| errno::EAGAIN)?;
    let pid = guest::ids().0 as u32;
    let t = THREADS.get();
    let clear_tid = t.main_clear_tid;
    t.all.push(LinuxThread {
        tid: pid,
        cap: slots::THREAD,
        wake,
        asleep_on: 0,
        clear_tid,
        fs_base: 0,
        signals: ThreadSignals::new(0),
        utcb: 0,
        stack: 0,
    });
    t.active = pid;
    MAIN_TID.store(pid, Ordering::Relaxed);
    LOCK.store(pid, Ordering::Relaxed);
    THREADED.store(true, Ordering::Release);
    let entry = linux_syscall_entry_mt as *const () as u64;
    if let Err(e) = sys::thread_foreign(slots::THREAD, entry, layout::LIB_BASE, layout::LIB_END) {
        println!("linux: cannot switch to the threaded entry: {}", e.name());
        guest::kill_process(sig::SIGKILL);
    }
    Ok(())
}

/// A spare (an ended thread's) or fresh kernel thread slot, notification, UTCB and library
/// stack; the kernel thread object is created here, bound to the task and paged by the region
/// manager. EAGAIN when the kernel memory quota, the UTCB area or the heap is exhausted.
fn new_kernel_thread() -> Result<Spare, Errno> {
    let t = THREADS.get();
    let s = match t.spares.pop() {
        Some(s) => {
            // The ended thread may still be in its last instructions: deleting the object
            // ends it for good before its UTCB address is used again.
            let _ = sys::cap_delete(s.cap);
            while sys::notify_wait(s.wake, sawmill_abi::NOTIFY_NONBLOCK).is_ok() {}
            s
        }
        None => {
            let wake = thread::create(ObjKind::Notification, 0).map_err(|_| errno::EAGAIN)?;
            let utcb = match thread::next_utcb() {
                Ok(u) => u,
                Err(_) => {
                    let _ = sys::cap_delete(wake);
                    return Err(errno::EAGAIN);
                }
            };
            Spare {
                cap: thread::alloc_slot(),
                wake,
                utcb,
                stack: guest::syscall_stack_top(),
            }
        }
    };
    let made = sys::factory_create(slots::FACTORY, ObjKind::Thread, s.cap, 0)
        .map_err(|_| errno::EAGAIN)
        .and_then(|_| {
            let pager = sawmill_rm::shared_pager_cap().map_err(|_| errno::EAGAIN)?;
            // 255: capped at the task's ceiling, the main thread's priority.
            sys::thread_config(
                s.cap,
                slots::TASK,
                s.utcb,
                pager,
                slots::THREAD_HANDLER,
                255,
            )
            .map_err(|_| errno::EAGAIN)
        });
    match made {
        Ok(()) => Ok(s),
        Err(e) => {
            let _ = sys::cap_delete(s.cap);
            t.spares.push(s);
            Err(e)
        }
    }
}

/// `clone(flags, stack, parent_tid, child_tid, tls)` making a thread: its id, or EAGAIN.
pub fn clone_thread(
    flags: u64,
    stack: u64,
    parent_tid: u64,
    child_tid: u64,
    tls: u64,
) -> SysResult {
    let first = !threaded();
    let p = proc_client().ok_or(errno::EAGAIN)?;
    let tid = p.thread_new().map_err(|_| errno::EAGAIN)?;
    if first {
        if let Err(e) = become_threaded() {
            let _ = p.thread_end(tid);
            return Err(e);
        }
    }
    let s = match new_kernel_thread() {
        Ok(s) => s,
        Err(e) => {
            let _ = p.thread_end(tid);
            return finish(first, Err(e));
        }
    };
    let u = &GuestUser;
    if flags & procs::CLONE_PARENT_SETTID != 0 {
        // Linux ignores a bad pointer here.
        let _ = u.write(parent_tid, &tid.to_le_bytes());
    }
    if flags & procs::CLONE_CHILD_SETTID != 0 {
        let _ = u.write(child_tid, &tid.to_le_bytes());
    }
    let mut frame = sawmill_rt::utcb().foreign;
    frame.rax = 0;
    if stack != 0 {
        frame.rsp = stack;
    }
    // As a `syscall` returns: rcx = rip, r11 = rflags.
    frame.rcx = frame.rip;
    frame.r11 = frame.rflags;
    let fs_base = if flags & procs::CLONE_SETTLS != 0 {
        if tls >= layout::PROGRAM_END {
            let _ = p.thread_end(tid);
            let _ = sys::cap_delete(s.cap);
            THREADS.get().spares.push(s);
            return finish(first, Err(errno::EPERM));
        }
        tls
    } else {
        *guest::fs_base_mut()
    };
    let blocked = signal_guest::signals().blocked;
    let start = Box::new(Start {
        frame,
        fs_base,
        stack_top: s.stack,
        tid,
        cap: s.cap,
        wake: s.wake,
    });
    let t = THREADS.get();
    t.all.push(LinuxThread {
        tid,
        cap: s.cap,
        wake: s.wake,
        asleep_on: 0,
        clear_tid: if flags & procs::CLONE_CHILD_CLEARTID != 0 {
            child_tid
        } else {
            0
        },
        fs_base,
        signals: ThreadSignals::new(blocked),
        utcb: s.utcb,
        stack: s.stack,
    });
    let arg = Box::into_raw(start) as u64;
    let entry = thread_start as *const () as u64;
    if sys::thread_start(s.cap, entry, s.stack - 8, arg).is_err() {
        // SAFETY: the box was leaked just above and the thread never started.
        drop(unsafe { Box::from_raw(arg as *mut Start) });
        t.all.retain(|x| x.tid != tid);
        let _ = p.thread_end(tid);
        let _ = sys::cap_delete(s.cap);
        t.spares.push(s);
        return finish(first, Err(errno::EAGAIN));
    }
    finish(first, Ok(tid as u64))
}

/// The result of the `clone` that made the process threaded returns here: it entered without
/// the lock, which it holds since, so its return releases it itself.
fn finish(first: bool, r: SysResult) -> SysResult {
    if !first {
        return r;
    }
    let frame = &mut sawmill_rt::utcb().foreign;
    frame.rax = match r {
        Ok(v) => v,
        Err(e) => e.ret() as u64,
    };
    let frame = frame as *mut ForeignFrame;
    unlock();
    // SAFETY: the frame holds the caller's registers with the result in rax; the return stub
    // restores them and jumps back to the program, touching no library state (the signal
    // look of this one return is skipped: the next call's comes).
    unsafe {
        core::arch::asm!(
            "jmp linux_syscall_return",
            in("rax") frame,
            options(noreturn)
        )
    }
}

/// A new thread's first instructions, native in the library on its library stack: its UTCB
/// words, thread pointer, foreign mode and interrupt binding, then the program's code with the
/// registers of the `clone` (rax = 0).
extern "C" fn thread_start(arg: u64) -> ! {
    // SAFETY: `arg` is the box `clone_thread` leaked for exactly this thread.
    let s = unsafe { Box::from_raw(arg as *mut Start) };
    let u = sawmill_rt::utcb();
    u.user[guest::SYSCALL_STACK_WORD] = s.stack_top;
    u.user[TID_WORD] = s.tid as u64;
    let gs = u as *const Utcb as u64;
    let entry = linux_syscall_entry_mt as *const () as u64;
    if sys::set_tls(s.fs_base, gs).is_err()
        || sys::thread_foreign(s.cap, entry, layout::LIB_BASE, layout::LIB_END).is_err()
    {
        println!("linux: thread {}: cannot start", s.tid);
        guest::kill_process(sig::SIGKILL);
    }
    let _ = sys::thread_interrupt(s.cap, s.wake, linux_fault_entry as *const () as u64);
    u.foreign = s.frame;
    drop(s);
    let frame = &mut u.foreign as *mut ForeignFrame;
    // SAFETY: the frame holds the program's registers for the new thread; the full restore
    // jumps to its rip on its own stack.
    unsafe { core::arch::asm!("jmp linux_resume_full", in("rdi") frame, options(noreturn)) }
}

// ---------------------------------------------------------------------------------------------
// A thread's end.

/// `exit(status)`: ends the calling thread; the last thread's end ends the process with
/// `status`.
pub fn exit_thread(status: u32) -> ! {
    if !threaded() {
        guest::exit_process(status);
    }
    let me = current_tid();
    let t = THREADS.get();
    if t.all.len() <= 1 {
        guest::exit_process(status);
    }
    let Some(i) = t.all.iter().position(|x| x.tid == me) else {
        guest::exit_process(status);
    };
    let rec = t.all.remove(i);
    if rec.clear_tid != 0 {
        // pthread_join's wait: the word is zeroed and one waiter woken (a bad pointer is
        // ignored, as on Linux).
        if GuestUser.write(rec.clear_tid, &0u32.to_le_bytes()).is_ok() {
            let woken = t.futexes.wake(rec.clear_tid, 1, futex::BITSET_MATCH_ANY);
            kick_tids(&woken);
        }
    }
    t.futexes.cancel(me);
    // Its own state in the process's state is nobody's now.
    t.active = 0;
    let pid = guest::ids().0 as u32;
    if me == pid {
        // The main thread's kernel thread stays (its end would end the task for proc); it
        // sleeps for good, out of the table.
        unlock();
        loop {
            let _ = sys::notify_wait(rec.wake, 0);
        }
    }
    if let Some(p) = proc_client() {
        let _ = p.thread_end(me);
    }
    t.spares.push(Spare {
        cap: rec.cap,
        wake: rec.wake,
        utcb: rec.utcb,
        stack: rec.stack,
    });
    // SAFETY: releases the lock and ends the thread without touching its stack again (the next
    // thread may get this stack as soon as the lock is free).
    unsafe {
        core::arch::asm!(
            "mov dword ptr [rip + {lock}], 0",
            "syscall",
            "ud2",
            lock = sym LOCK,
            in("rax") Sys::ThreadExit as u64,
            in("rdi") 0u64,
            options(noreturn)
        )
    }
}

// ---------------------------------------------------------------------------------------------
// futex.

fn read_u32(addr: u64) -> Result<u32, Errno> {
    let mut b = [0u8; 4];
    GuestUser.read(addr, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// `futex(uaddr, op, val, timeout | val2, uaddr2, val3)`.
pub fn sys_futex(uaddr: u64, op: u64, val: u64, timeout: u64, uaddr2: u64, val3: u64) -> SysResult {
    let decoded = futex::decode(op as u32, val3 as u32)?;
    if !uaddr.is_multiple_of(4) {
        return Err(errno::EINVAL);
    }
    match decoded {
        Op::Wait {
            bitset,
            absolute,
            realtime,
        } => {
            let deadline = if timeout != 0 {
                let mut b = [0u8; 16];
                GuestUser.read(timeout, &mut b)?;
                let ns = futex::timespec_ns(
                    i64::from_le_bytes(b[0..8].try_into().unwrap()),
                    i64::from_le_bytes(b[8..16].try_into().unwrap()),
                )?;
                let rel = if absolute {
                    ns.saturating_sub(guest::clock_ns(if realtime { 0 } else { 1 }))
                } else {
                    ns
                };
                Some(sys::rdtsc().saturating_add(guest::ns_to_tsc(rel)))
            } else {
                None
            };
            futex_wait(uaddr, val as u32, bitset, deadline)
        }
        Op::Wake { bitset } => {
            if op as u32 & futex::FUTEX_PRIVATE_FLAG == 0 {
                // A shared futex must be mapped (Linux looks the page up); a private one is
                // only an address.
                read_u32(uaddr)?;
            }
            let woken = THREADS.get().futexes.wake(uaddr, val as u32, bitset);
            kick_tids(&woken);
            Ok(woken.len() as u64)
        }
        Op::Requeue { compare } => {
            let (n_wake, n_move) = (val as u32, timeout as u32);
            if (n_wake as i32) < 0 || (n_move as i32) < 0 {
                return Err(errno::EINVAL);
            }
            if !uaddr2.is_multiple_of(4) {
                return Err(errno::EINVAL);
            }
            if compare && read_u32(uaddr)? != val3 as u32 {
                return Err(errno::EAGAIN);
            }
            let (woken, moved) = THREADS.get().futexes.requeue(uaddr, n_wake, uaddr2, n_move);
            kick_tids(&woken);
            Ok(woken.len() as u64 + moved as u64)
        }
    }
}

/// Sleeps while the word at `uaddr` holds `val`, until a wake takes the thread out of the
/// table, a signal, or the TSC deadline.
fn futex_wait(uaddr: u64, val: u32, bitset: u32, deadline: Option<u64>) -> SysResult {
    if read_u32(uaddr)? != val {
        return Err(errno::EAGAIN);
    }
    let me = current_tid();
    THREADS.get().futexes.wait(uaddr, me, bitset);
    loop {
        if !THREADS.get().futexes.queued(me) {
            return Ok(0);
        }
        if signal_guest::interrupted() {
            return if THREADS.get().futexes.cancel(me) {
                Err(sig::ERESTARTSYS)
            } else {
                Ok(0)
            };
        }
        if deadline.is_some_and(|d| sys::rdtsc() >= d) {
            return if THREADS.get().futexes.cancel(me) {
                Err(errno::ETIMEDOUT)
            } else {
                Ok(0)
            };
        }
        signal_guest::wait_wake(deadline);
    }
}

// ---------------------------------------------------------------------------------------------
// Small calls.

/// `sched_yield`: in a threaded process the lock is let go for the yield, so that the thread
/// yielded to can enter the library (else a loop of `sched_yield` waiting for another thread
/// would hold the lock whenever that thread runs).
pub fn sched_yield() -> SysResult {
    if threaded() {
        unlock();
        sys::yield_now();
        lock();
        switch_in();
    } else {
        sys::yield_now();
    }
    Ok(0)
}

/// `sched_getaffinity(pid, len, mask)`: one processor (musl's count of online processors).
pub fn sched_getaffinity(pid: u64, len: u64, mask: u64) -> SysResult {
    if pid != 0 && pid as u32 != guest::ids().0 as u32 && THREADS.get().find(pid as u32).is_none() {
        return Err(errno::ESRCH);
    }
    if len < 8 || !len.is_multiple_of(8) {
        return Err(errno::EINVAL);
    }
    GuestUser.write(mask, &1u64.to_le_bytes())?;
    Ok(8)
}

/// `get_robust_list(pid, head, len)`: no list is kept (the library never walks one), so the
/// answer is an empty list of the size Linux expects.
pub fn get_robust_list(pid: u64, head: u64, len: u64) -> SysResult {
    if pid != 0 && pid as u32 != current_tid() && THREADS.get().find(pid as u32).is_none() {
        return Err(errno::ESRCH);
    }
    GuestUser.write(head, &0u64.to_le_bytes())?;
    GuestUser.write(len, &24u64.to_le_bytes())?;
    Ok(0)
}

/// How many threads the process has (for `/proc`).
#[allow(dead_code)]
pub fn count() -> usize {
    THREADS.get().all.len().max(1)
}
