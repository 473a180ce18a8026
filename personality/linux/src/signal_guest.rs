//! Signals at run time: the signal system calls, delivery at the return of every system call
//! and at a fault of the program (the kernel's DIVERT, `linux_fault_entry`), `rt_sigreturn`,
//! the blocking waits (`pause`, `rt_sigsuspend`, `nanosleep`) on the process's wake
//! notification with a deadline, the real-time interval timer (`alarm`, `setitimer`), and the
//! signals other processes send through proc. The decisions are the host-tested
//! `sawmill_linux::signal`; this module carries them out for the thread in the library (a
//! threaded process's threads swap their own mask, alternate stack and pending set in:
//! `thread_guest`; its sleeps go through `thread_guest::sleep`).
//!
//! The program's FPU/SSE state is saved into a signal frame with `fxsave` and restored with
//! `fxrstor`: the only SSE instructions of the (soft-float) library.

use crate::guest::{self, GuestUser, Single};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use sawmill_abi::{ForeignFrame, ObjKind, Utcb};
use sawmill_interfaces::proc;
use sawmill_linux::errno::{self, Errno};
use sawmill_linux::signal::{
    self as sig, Action, Disposition, Info, Itimer, Regs, Signals, Trap, RAX, RSP,
};
use sawmill_linux::{layout, nr, procs, SysResult, User};
use sawmill_proc_api::{WAKE_CAP, WAKE_CONT, WAKE_SIGNAL, WAKE_TIMER};
use sawmill_rt::{env, println, slots, sys, thread};

/// The process's signal state with the current thread's own part (see guest's `Single`).
static SIGNALS: Single<Option<Signals>> = Single(UnsafeCell::new(None));
/// `ITIMER_REAL` (and `alarm`), in ns of the monotonic clock.
static REAL_TIMER: Single<Itimer> = Single(UnsafeCell::new(Itimer {
    deadline: 0,
    interval: 0,
}));
/// System calls left until the return path next looks (at the pending set, the clock, proc's
/// wake bits): 1 forces a look at the next return. Counting is the cheapest test the return of
/// every call can make (`linuxabi.syscall.null`); the look itself reads the clock.
static COUNTDOWN: Single<u64> = Single(UnsafeCell::new(1));
/// Returns between looks while nothing is pending.
const LOOK_EVERY: u64 = 32;
/// The TSC value at which a look next takes the timer and proc's wake bits.
static NEXT_POLL: AtomicU64 = AtomicU64::new(0);
/// The wake notification (proc's `proc:wake`, or our own without proc) and wake bits taken by
/// a poll that the waiter they were meant for has not seen yet.
static WAKE: AtomicU64 = AtomicU64::new(0);
static WAKE_STASH: AtomicU64 = AtomicU64::new(0);
/// Whether proc diverts our program's CPU exceptions to us (registered on the first handler
/// for a fault signal).
static FAULT_ENTRY_SET: AtomicBool = AtomicBool::new(false);
/// What `fxrstor` accepts in MXCSR (from the processor's `fxsave`).
static MXCSR_MASK: AtomicU64 = AtomicU64::new(0xffbf);

/// How often (ms) the return path looks at proc's wake bits while nothing else is due.
const POLL_MS: u64 = 10;

pub(crate) fn signals() -> &'static mut Signals {
    match SIGNALS.get() {
        Some(s) => s,
        none => first_signals(none),
    }
}

/// The signal state made on first use (out of line: [`signals`] is on every wait's path, and
/// the table it builds inlined gave each caller a large frame).
#[cold]
#[inline(never)]
fn first_signals(none: &'static mut Option<Signals>) -> &'static mut Signals {
    none.insert(Signals::new())
}

/// Makes the return path look at the next return if a signal is deliverable.
fn refresh() {
    if signals().deliverable() {
        force_look();
    }
}

pub(crate) fn force_look() {
    *COUNTDOWN.get() = 1;
}

/// The hot-path test at the return of every system call: whether to look now.
#[inline(always)]
pub fn attention() -> bool {
    let c = COUNTDOWN.get();
    *c = c.wrapping_sub(1);
    *c == 0
}

/// A 512-byte `fxsave` area (the instruction needs 16-byte alignment).
#[repr(C, align(16))]
struct Fx([u8; 512]);

fn fxsave(fx: &mut Fx) {
    // SAFETY: writes the 512-byte, 16-byte aligned area; the program's FPU state is this
    // thread's (the kernel loads it lazily on first use).
    unsafe { core::arch::asm!("fxsave64 [{}]", in(reg) fx.0.as_mut_ptr(), options(nostack)) };
}

fn fxrstor(fx: &Fx) {
    // SAFETY: reads the 512-byte, 16-byte aligned area, whose MXCSR was masked to what the
    // processor accepts (sanitize_fpstate) so the instruction cannot fault.
    unsafe { core::arch::asm!("fxrstor64 [{}]", in(reg) fx.0.as_ptr(), options(nostack)) };
}

/// The FPU state a handler starts with (Linux resets it): FNINIT's control word, MXCSR's
/// default.
fn fpu_init_state() -> Fx {
    let mut fx = Fx([0; 512]);
    fx.0[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
    fx.0[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    fx
}

/// The signals layer's records, gathered by the start's one pass over the environment
/// ([`StartRecords::note`]; a pass of its own cost ~1.5k instructions a process).
#[derive(Default)]
pub struct StartRecords {
    /// The signal state an exec kept: the blocked mask, the ignored mask's bytes.
    kept: Option<(u64, &'static [u8])>,
    /// proc's wake notification.
    wake: Option<u64>,
}

impl StartRecords {
    /// Takes the record if it is the signals layer's; says whether it was.
    pub fn note(&mut self, kind: u64, value: u64, bytes: &'static [u8]) -> bool {
        match kind {
            env::KIND_LINUX_SIGNALS => {
                self.kept.get_or_insert((value, bytes));
            }
            env::KIND_CAP if bytes == WAKE_CAP.as_bytes() => {
                self.wake.get_or_insert(value);
            }
            _ => return false,
        }
        true
    }
}

/// At start: the signal state an exec kept, the wake notification (both from `found`), the
/// processor's MXCSR mask, the first poll time.
pub fn init(found: StartRecords) {
    let StartRecords { kept, wake } = found;
    if let Some((blocked, b)) = kept {
        let ignored = b
            .get(..8)
            .map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap()));
        *SIGNALS.get() = Some(Signals::after_exec(ignored, blocked));
    }
    let wake = wake
        .or_else(|| thread::create(ObjKind::Notification, 0).ok())
        .unwrap_or(0);
    WAKE.store(wake, Ordering::Relaxed);
    if wake != 0 {
        // A signal of the wake notification (proc's, or our timer thread's) reaches the program
        // even while it runs without system calls.
        let _ = sys::thread_interrupt(slots::THREAD, wake, linux_fault_entry as *const () as u64);
    }
    let mut fx = Fx([0; 512]);
    fxsave(&mut fx);
    let mask = u32::from_le_bytes(fx.0[28..32].try_into().unwrap());
    MXCSR_MASK.store(
        if mask == 0 { 0xffbf } else { mask as u64 },
        Ordering::Relaxed,
    );
    NEXT_POLL.store(
        sys::rdtsc() + guest::ns_to_tsc(POLL_MS * 1_000_000),
        Ordering::Relaxed,
    );
}

// ---------------------------------------------------------------------------------------------
// Sources: the timer, proc.

/// Looks at the interval timer and at proc's wake bits (without blocking) and makes what came
/// pending, if their time has come; sets the next poll time.
fn look() {
    *COUNTDOWN.get() = LOOK_EVERY;
    if sys::rdtsc() >= NEXT_POLL.load(Ordering::Relaxed) {
        poll();
    }
}

/// Looks at the interval timer and at proc's wake bits (without blocking) and makes what came
/// pending; sets the next poll time.
fn poll() {
    *COUNTDOWN.get() = LOOK_EVERY;
    let now_tsc = sys::rdtsc();
    let now = guest::monotonic_ns();
    let t = REAL_TIMER.get();
    if t.fire(now) {
        signals().raise(Info::kernel(sig::SIGALRM));
        sync_timer_thread();
    }
    let wake = WAKE.load(Ordering::Relaxed);
    if wake != 0 {
        if let Ok(bits) = sys::notify_wait(wake, sawmill_abi::NOTIFY_NONBLOCK) {
            take_wake_bits(bits);
        }
    }
    let mut next = now_tsc + guest::ns_to_tsc(POLL_MS * 1_000_000);
    if t.deadline != 0 {
        next = next.min(now_tsc + guest::ns_to_tsc(t.deadline.saturating_sub(now)));
    }
    NEXT_POLL.store(next, Ordering::Relaxed);
    refresh();
}

/// Wake bits arrived: signals are fetched from proc, the rest kept for their waiter (the
/// timer's bit only woke us: the timer itself is read by `poll`).
fn take_wake_bits(bits: u64) {
    if bits & WAKE_CONT != 0 {
        CONTINUED.store(true, Ordering::Relaxed);
    }
    if bits & WAKE_SIGNAL != 0 {
        fetch_from_proc();
        crate::thread_guest::route_process_signal();
        // Delivered at this call's return if deliverable.
        refresh();
    }
    WAKE_STASH.fetch_or(
        bits & !(WAKE_SIGNAL | WAKE_TIMER | WAKE_CONT),
        Ordering::Relaxed,
    );
    if bits & !WAKE_TIMER != 0 {
        // The other threads sleeping may be the ones these bits are for.
        crate::thread_guest::kick_sleepers();
    }
}

/// Set when proc said a SIGCONT continued us (`WAKE_CONT`): the stop's wait ends.
static CONTINUED: AtomicBool = AtomicBool::new(false);

/// Takes what proc holds for us now (signals sent by others), without waiting: a call that
/// learned proc just sent us one (a background terminal access) delivers it at its return.
pub fn fetch_now() {
    poll();
}

/// The process's wake notification (0: none).
pub fn wake_cap() -> u64 {
    WAKE.load(Ordering::Relaxed)
}

/// Whether the program ignores or blocks `signo` (the terminal's background checks).
pub fn ignores_or_blocks(signo: u32) -> bool {
    let s = signals();
    s.blocked & sig::bit(signo) != 0 || s.action(signo).handler == sig::SIG_IGN
}

/// The default action of stop signal `signo`: proc records the stop (the parent's `wait`
/// and SIGCHLD), and the program's thread waits here until a SIGCONT (proc's `WAKE_CONT`);
/// a SIGKILL ends the task meanwhile. Other signals stay pending until then, as on Linux.
fn stop(signo: u32) {
    let Some(p) = crate::guest::proc_cap() else {
        return;
    };
    CONTINUED.store(false, Ordering::Relaxed);
    if !proc::Client::new(p).stop(signo).unwrap_or(false) {
        return; // a SIGCONT came first
    }
    let mut kept = 0;
    while !CONTINUED.swap(false, Ordering::Relaxed) {
        // Bits for other waiters (a child's end, a pipe) are kept for them.
        kept |= wait_wake(None);
    }
    WAKE_STASH.fetch_or(kept, Ordering::Relaxed);
}

/// The TSC deadline the timer thread waits for (0: none) and its notification (0: the thread
/// is not started yet; it starts with the first armed timer).
static TIMER_TSC: AtomicU64 = AtomicU64::new(0);
static TIMER_KICK: AtomicU64 = AtomicU64::new(0);

/// Tells the timer thread the real-time timer's next expiry (it signals the wake notification
/// then, which interrupts the program wherever it runs: `thread_interrupt`).
fn sync_timer_thread() {
    let t = REAL_TIMER.get();
    let want = if t.deadline == 0 {
        0
    } else {
        sys::rdtsc() + guest::ns_to_tsc(t.deadline.saturating_sub(guest::monotonic_ns()))
    };
    TIMER_TSC.store(want, Ordering::Release);
    let kick = TIMER_KICK.load(Ordering::Acquire);
    if kick != 0 {
        let _ = sys::notify_signal(kick, 1);
        return;
    }
    if want == 0 || WAKE.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Ok(n) = thread::create(ObjKind::Notification, 0) else {
        return;
    };
    TIMER_KICK.store(n, Ordering::Release);
    if sawmill_rm::spawn(16 * 1024, move || timer_thread(n)).is_err() {
        TIMER_KICK.store(0, Ordering::Release);
    }
}

/// The timer thread: waits until the deadline (or a new one), then signals the wake
/// notification once per expiry.
fn timer_thread(kick: u64) {
    let wake = WAKE.load(Ordering::Relaxed);
    loop {
        let d = TIMER_TSC.load(Ordering::Acquire);
        let r = if d == 0 {
            sys::notify_wait(kick, 0)
        } else {
            sys::notify_wait_until(kick, d)
        };
        if r == Err(sawmill_abi::Error::WouldBlock)
            && d != 0
            && TIMER_TSC
                .compare_exchange(d, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let _ = sys::notify_signal(wake, WAKE_TIMER);
        }
    }
}

/// Takes every signal proc holds for us into the pending set.
fn fetch_from_proc() {
    let Some(p) = crate::guest::proc_cap() else {
        return;
    };
    let c = proc::Client::new(p);
    while let Ok(r) = c.sig_next() {
        if r.sig == 0 || !sig::valid(r.sig) {
            break;
        }
        let mut info = Info::from_process(r.sig, r.code, r.pid, r.uid);
        info.word1 = r.status as u32 as u64;
        signals().raise(info);
    }
}

/// Waits on the wake notification until a bit arrives or the TSC reaches `deadline` (None:
/// no deadline); returns the bits other than WAKE_SIGNAL (taken here: signals are fetched),
/// with any stashed by an earlier poll. For the library's blocking calls (and fork's wait).
pub fn wait_wake(deadline: Option<u64>) -> u64 {
    let stashed = WAKE_STASH.swap(0, Ordering::Relaxed);
    if stashed != 0 {
        return stashed;
    }
    if crate::thread_guest::threaded() {
        return wait_wake_threaded(deadline);
    }
    let wake = WAKE.load(Ordering::Relaxed);
    guest::set_sleeping(true);
    let got = match (wake, deadline) {
        (0, Some(_)) | (0, None) => {
            sys::yield_now();
            Ok(0)
        }
        (w, Some(d)) => sys::notify_wait_until(w, d),
        (w, None) => sys::notify_wait(w, 0),
    };
    guest::set_sleeping(false);
    match got {
        // The common wake (input/output, a child): nothing for the signals layer, and no
        // other thread to share the bits with; the stash was empty before the sleep.
        Ok(bits) if bits & (WAKE_SIGNAL | WAKE_CONT) == 0 => return bits & !WAKE_TIMER,
        Ok(bits) => take_wake_bits(bits),
        Err(_) => {}
    }
    WAKE_STASH.swap(0, Ordering::Relaxed)
}

/// [`wait_wake`] in a threaded process: the sleep of `thread_guest` (on `proc:wake` or the
/// thread's own notification, the lock released meanwhile). Bits taken from `proc:wake` may
/// be for another thread, and another thread may take the caller's: every wake returns
/// `WAKE_IO` too, so that every waiter looks at its condition again.
fn wait_wake_threaded(deadline: Option<u64>) -> u64 {
    let (got, from_proc) = crate::thread_guest::sleep(deadline, WAKE.load(Ordering::Relaxed));
    if let (Ok(bits), true) = (got, from_proc) {
        take_wake_bits(bits);
    }
    WAKE_STASH.swap(0, Ordering::Relaxed) | sawmill_proc_api::WAKE_IO
}

/// Whether a signal is deliverable now (after a look at the timer and proc): a blocking call
/// ends then (`EINTR` or a restart, decided at delivery). The shape of every blocking call
/// (`wait4`, a pipe's read):
/// `loop { try without blocking; if interrupted() { return Err(signal::ERESTARTSYS) }
/// wait_wake(None); }` — ERESTARTSYS restarts under SA_RESTART, else EINTR (or
/// `ERESTARTNOHAND` for calls Linux never restarts).
pub fn interrupted() -> bool {
    poll();
    signals().deliverable()
}

/// [`interrupted`] for a wait about to sleep on the wake notification ([`wait_wake`]): the
/// same answer without a system call. It skips the look at the notification: a signal proc
/// holds for us leaves `WAKE_SIGNAL` set there until taken, so the sleep that follows returns
/// at once with it (and the waiter's next look says true). The interval timer is read here.
pub fn interrupted_before_wait() -> bool {
    let t = REAL_TIMER.get();
    // An unarmed timer needs no clock (its 128-bit division, at every pipe and terminal wait).
    if t.deadline != 0 && t.fire(guest::monotonic_ns()) {
        signals().raise(Info::kernel(sig::SIGALRM));
        sync_timer_thread();
    }
    let deliverable = signals().deliverable();
    if deliverable {
        force_look(); // as `refresh`
    }
    deliverable
}

/// Blocks until a signal is deliverable or the TSC reaches `deadline`: true if a signal came.
fn block_until(deadline: Option<u64>) -> bool {
    loop {
        if interrupted() {
            return true;
        }
        let now = sys::rdtsc();
        if deadline.is_some_and(|d| now >= d) {
            return false;
        }
        // Wake for the interval timer too.
        let t = REAL_TIMER.get();
        let timer = (t.deadline != 0)
            .then(|| now + guest::ns_to_tsc(t.deadline.saturating_sub(guest::monotonic_ns())));
        let until = match (deadline, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        wait_wake(until);
    }
}

// ---------------------------------------------------------------------------------------------
// Delivery.

fn regs_of(f: &ForeignFrame) -> Regs {
    [
        f.rax, f.rbx, f.rcx, f.rdx, f.rsi, f.rdi, f.rbp, f.rsp, f.r8, f.r9, f.r10, f.r11, f.r12,
        f.r13, f.r14, f.r15, f.rip, f.rflags,
    ]
}

fn set_regs(f: &mut ForeignFrame, r: &Regs) {
    [
        f.rax, f.rbx, f.rcx, f.rdx, f.rsi, f.rdi, f.rbp, f.rsp, f.r8, f.r9, f.r10, f.r11, f.r12,
        f.r13, f.r14, f.r15, f.rip, f.rflags,
    ] = *r;
}

/// Ends the process by `signo`'s default action (with the core bit when it dumps core).
fn terminate(signo: u32, core: bool) -> ! {
    guest::kill_process(sig::kill_status(signo, core))
}

/// Sets up handler `a` for `info` over the registers in `frame`; false if the frame could not
/// be written (the process is then killed by SIGSEGV, as Linux's `force_sigsegv`).
fn setup_frame(frame: &mut ForeignFrame, info: &Info, a: &Action, trap: &Trap) -> bool {
    let s = signals();
    let regs = regs_of(frame);
    let old_mask = s.saved_mask.unwrap_or(s.blocked);
    let Some(f) = sig::build_frame(&regs, trap, info, a, old_mask, &s.altstack) else {
        return false;
    };
    let mut fx = Fx([0; 512]);
    fxsave(&mut fx);
    if GuestUser.write(f.fpstate, &fx.0).is_err() || GuestUser.write(f.addr, &f.bytes).is_err() {
        return false;
    }
    s.enter_handler(info.signo, a);
    if a.flags & sig::SA_ONSTACK != 0 && s.altstack.flags & sig::SS_AUTODISARM != 0 {
        // SS_AUTODISARM: the alternate stack is off while the handler runs (given back by
        // its rt_sigreturn from uc_stack).
        s.altstack = sig::AltStack {
            sp: 0,
            size: 0,
            flags: sig::SS_DISABLE,
        };
    }
    set_regs(frame, &f.regs);
    fxrstor(&fpu_init_state());
    true
}

/// Delivers every deliverable signal onto `frame` (a handler frame each, the last set up runs
/// first, as in Linux). `result`: the interrupted system call's result, for the restart rules
/// (None at a fault). Returns whether the registers changed beyond rax (the full restore is
/// needed).
fn deliver(frame: &mut ForeignFrame, nr_: u64, mut result: Option<u64>, trap: &Trap) -> bool {
    let mut changed = false;
    while let Some((info, d)) = signals().take() {
        match d {
            Disposition::Ignore | Disposition::Continue => {}
            Disposition::Stop => stop(info.signo),
            Disposition::Terminate { core } => {
                if let Some(cmd) = procs::init_power_command(guest::ids().0, &info) {
                    guest::power_off(cmd);
                }
                terminate(info.signo, core)
            }
            Disposition::Handle(a) => {
                if let Some(r) = result.take() {
                    fix_result(frame, nr_, r, Some(&a));
                }
                if !setup_frame(frame, &info, &a, trap) {
                    terminate(sig::SIGSEGV, true);
                }
                changed = true;
            }
        }
    }
    if let Some(r) = result {
        fix_result(frame, nr_, r, None);
    }
    // A wait of rt_sigsuspend that ran no handler gives its mask back.
    let s = signals();
    if let Some(m) = s.saved_mask.take() {
        s.blocked = m;
    }
    refresh();
    changed
}

/// Writes the system call's result (`rax`: a value or a negated errno) into `frame`, or
/// restarts the call (rip back to the `syscall` instruction, rax its number again) when a
/// signal interrupted it and the rules say so: `handler` is the action of the handler about
/// to run, None if none runs.
fn fix_result(frame: &mut ForeignFrame, nr_: u64, rax: u64, handler: Option<&Action>) {
    let restart = match rax {
        r if r == sig::ERESTARTSYS.ret() as u64 => {
            handler.is_none_or(|a| a.flags & sig::SA_RESTART != 0)
        }
        r if r == sig::ERESTARTNOHAND.ret() as u64
            || r == sig::ERESTART_RESTARTBLOCK.ret() as u64 =>
        {
            handler.is_none()
        }
        _ => {
            frame.rax = rax;
            return;
        }
    };
    if restart {
        frame.rax = nr_;
        frame.rip -= 2;
    } else {
        frame.rax = errno::EINTR.ret() as u64;
    }
}

/// The return path when [`attention`] said so: looks, delivers, and writes the result. If a
/// handler is entered or `rt_sigreturn` ran, it resumes the program itself with every
/// register restored (`linux_resume_full`) and does not return.
pub fn on_return(frame: *mut ForeignFrame, nr_: u64, rax: u64) {
    look();
    // SAFETY: this thread's UTCB frame (see guest::serve_reflected).
    let f = unsafe { &mut *frame };
    // The common case: the look found nothing to do.
    if !signals().deliverable() && !FULL_AFTER.load(Ordering::Relaxed) && !is_restart(rax) {
        f.rax = rax;
        return;
    }
    let full = deliver(f, nr_, Some(rax), &Trap::default());
    if full | FULL_AFTER.swap(false, Ordering::Relaxed) {
        crate::thread_guest::leave();
        // SAFETY: the frame holds the program's complete registers; the stub restores them
        // and jumps to its rip, leaving the library (its stack is taken afresh next entry).
        unsafe { core::arch::asm!("jmp linux_resume_full", in("rdi") frame, options(noreturn)) }
    }
}

/// Whether `rax` is one of the internal restart results.
fn is_restart(rax: u64) -> bool {
    [
        sig::ERESTARTSYS,
        sig::ERESTARTNOHAND,
        sig::ERESTART_RESTARTBLOCK,
    ]
    .iter()
    .any(|e| rax == e.ret() as u64)
}

/// Set by `rt_sigreturn` (which also forces a look, so that its return comes through
/// [`on_return`]): every register it restored must be restored.
static FULL_AFTER: AtomicBool = AtomicBool::new(false);

/// The kernel diverted a fault of the program here (see `linux_fault_entry`): `packed` is
/// signal | trap number << 8 | si_code << 16 | error code << 32, `addr` the fault address.
extern "C" fn serve_fault(frame: *mut ForeignFrame, packed: u64, addr: u64) -> *mut ForeignFrame {
    crate::thread_guest::fault_enter();
    let f = serve_fault_locked(frame, packed, addr);
    crate::thread_guest::leave();
    f
}

fn serve_fault_locked(frame: *mut ForeignFrame, packed: u64, addr: u64) -> *mut ForeignFrame {
    // SAFETY: the kernel passes this thread's UTCB frame.
    let f = unsafe { &mut *frame };
    if packed == 0 {
        // Not a fault: the wake notification interrupted the program (`thread_interrupt`).
        poll();
        deliver(f, 0, None, &Trap::default());
        return frame;
    }
    let signo = (packed & 0xff) as u32;
    let trapno = (packed >> 8) & 0xff;
    let code = (packed >> 16) as u16 as i16 as i32;
    let err = packed >> 32;
    if !sig::valid(signo) || (layout::LIB_BASE..layout::LIB_END).contains(&f.rip) {
        // A fault of the library itself is a bug, never the program's to handle.
        println!("linux: signal {} in the library at rip {:#x}", signo, f.rip);
        terminate(
            if sig::valid(signo) {
                signo
            } else {
                sig::SIGSEGV
            },
            true,
        );
    }
    let trap = Trap {
        err,
        trapno,
        cr2: if trapno == 14 { addr } else { 0 },
    };
    let s = signals();
    s.force(Info::fault(signo, code, addr));
    if s.action(signo).handler == sig::SIG_DFL {
        // The process dies of it: say where on the debug console (the program's output is
        // left as Linux leaves it).
        let name = match signo {
            sig::SIGSEGV => "SIGSEGV",
            sig::SIGBUS => "SIGBUS",
            sig::SIGILL => "SIGILL",
            sig::SIGFPE => "SIGFPE",
            _ => "SIGTRAP",
        };
        println!("linux: {} at {:#x} (rip {:#x})", name, addr, f.rip);
    }
    deliver(f, 0, None, &trap);
    frame
}

/// The region manager's hook for a fault it cannot resolve: the program's (rip outside the
/// library) goes to [`serve_fault`] as SIGSEGV (SIGBUS for a page the dataspace refused, as
/// beyond a file's end).
pub fn unresolved_fault(
    addr: u64,
    bits: u64,
    rip: u64,
    why: sawmill_rm::FaultWhy,
) -> Option<[u64; 3]> {
    use sawmill_rm::FaultWhy;
    if (layout::LIB_BASE..layout::LIB_END).contains(&rip) {
        println!(
            "linux: SIGSEGV in the library at {:#x} (rip {:#x})",
            addr, rip
        );
        terminate(sig::SIGSEGV, true);
    }
    let (signo, code) = match why {
        FaultWhy::NoRegion => (sig::SIGSEGV, sig::SEGV_MAPERR),
        FaultWhy::NoRights => (sig::SIGSEGV, sig::SEGV_ACCERR),
        FaultWhy::Dataspace => (sig::SIGBUS, sig::BUS_ADRERR),
        FaultWhy::NoMemory => (sig::SIGSEGV, sig::SEGV_MAPERR),
    };
    // Linux's page-fault error code: the fault bits and "from user mode".
    let err = (bits & 0x1f) | 4;
    let packed = signo as u64 | 14 << 8 | (code as u16 as u64) << 16 | err << 32;
    Some([linux_fault_entry as *const () as u64, packed, addr])
}

extern "C" {
    fn linux_fault_entry();
}

/// `Utcb::user` word the full restore jumps through (GS-relative: GS holds the UTCB).
const RESUME_WORD: usize = 14;
const RESUME_OFFSET: usize = core::mem::offset_of!(Utcb, user) + RESUME_WORD * 8;

// The kernel diverts a faulting program thread here with rdi = &Utcb::foreign (all its
// registers), rsi/rdx = what the fault was; like the system-call entry, we move to the
// library's stack, serve, and resume from the frame, every register restored.
//
// `linux_resume_full` (rdi = the frame) restores all sixteen registers, rflags and rip: rip
// through a UTCB word (no register is free and nothing may be written on the program's stack,
// whose red zone may be live).
core::arch::global_asm!(
    r#"
.section .text.linux_fault_entry, "ax"
.global linux_fault_entry
linux_fault_entry:
    mov rsp, [rdi - 8]
    cld
    call {serve}
    mov rdi, rax
.global linux_resume_full
linux_resume_full:
    mov rax, [rdi + 16*8]
    mov gs:[{resume}], rax
    push qword ptr [rdi + 17*8]
    popfq
    mov rax, [rdi + 0*8]
    mov rbx, [rdi + 1*8]
    mov rcx, [rdi + 2*8]
    mov rdx, [rdi + 3*8]
    mov rsi, [rdi + 4*8]
    mov rbp, [rdi + 6*8]
    mov r8, [rdi + 8*8]
    mov r9, [rdi + 9*8]
    mov r10, [rdi + 10*8]
    mov r11, [rdi + 11*8]
    mov r12, [rdi + 12*8]
    mov r13, [rdi + 13*8]
    mov r14, [rdi + 14*8]
    mov r15, [rdi + 15*8]
    mov rsp, [rdi + 7*8]
    mov rdi, [rdi + 5*8]
    jmp qword ptr gs:[{resume}]
"#,
    serve = sym serve_fault,
    resume = const RESUME_OFFSET,
);

// ---------------------------------------------------------------------------------------------
// The system calls.

const SIGSET_SIZE: u64 = 8;

fn read_u64(addr: u64) -> Result<u64, Errno> {
    let mut b = [0u8; 8];
    GuestUser.read(addr, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn is_fault_signal(s: u32) -> bool {
    matches!(
        s,
        sig::SIGSEGV | sig::SIGBUS | sig::SIGILL | sig::SIGFPE | sig::SIGTRAP
    )
}

fn sys_rt_sigaction(signo: u64, act: u64, oact: u64, size: u64) -> SysResult {
    if size != SIGSET_SIZE || signo == 0 || signo > sig::NSIG as u64 {
        return Err(errno::EINVAL);
    }
    let new = if act != 0 {
        let mut b = [0u8; Action::SIZE];
        GuestUser.read(act, &mut b)?;
        Some(Action::from_bytes(&b))
    } else {
        None
    };
    let signo = signo as u32;
    let old = signals().sigaction(signo, new)?;
    if let Some(a) = new {
        if is_fault_signal(signo) && a.handler > sig::SIG_IGN {
            register_fault_entry();
        }
    }
    if oact != 0 {
        GuestUser.write(oact, &old.to_bytes())?;
    }
    refresh();
    Ok(0)
}

/// The signal state a fork child inherits (actions, mask, alternate stack: Linux's fork).
pub fn fork_state() -> alloc::vec::Vec<u8> {
    signals().encode_for_fork()
}

/// A fork child takes its parent's signal state (`fork_state`; pending signals are not
/// inherited); proc diverts its faults again if it catches a fault signal.
pub fn adopt_fork(state: &[u8]) {
    if let Some(s) = Signals::decode_fork(state) {
        *SIGNALS.get() = Some(s);
    }
    let caught = [
        sig::SIGSEGV,
        sig::SIGBUS,
        sig::SIGILL,
        sig::SIGFPE,
        sig::SIGTRAP,
    ]
    .into_iter()
    .any(|s| signals().action(s).handler > sig::SIG_IGN);
    if caught {
        register_fault_entry();
    }
}

/// Asks proc to divert the program's CPU exceptions to us (once, when a handler for a fault
/// signal first appears; page faults come through the region manager's hook anyway).
fn register_fault_entry() {
    if FAULT_ENTRY_SET.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Some(p) = crate::guest::proc_cap() {
        let _ = proc::Client::new(p).sig_entry(linux_fault_entry as *const () as u64);
    }
}

fn sys_rt_sigprocmask(how: u64, set: u64, oset: u64, size: u64) -> SysResult {
    if size != SIGSET_SIZE {
        return Err(errno::EINVAL);
    }
    let new = if set != 0 { Some(read_u64(set)?) } else { None };
    let old = signals().sigprocmask(how, new)?;
    if oset != 0 {
        GuestUser.write(oset, &old.to_le_bytes())?;
    }
    refresh();
    Ok(0)
}

fn sys_rt_sigpending(set: u64, size: u64) -> SysResult {
    if size > SIGSET_SIZE {
        return Err(errno::EINVAL);
    }
    poll();
    let s = signals();
    let bits = s.pending() & s.blocked;
    GuestUser.write(set, &bits.to_le_bytes()[..size as usize])?;
    Ok(0)
}

fn sys_rt_sigsuspend(set: u64, size: u64) -> SysResult {
    if size != SIGSET_SIZE {
        return Err(errno::EINVAL);
    }
    let mask = read_u64(set)?;
    let s = signals();
    s.saved_mask = Some(s.blocked);
    s.blocked = mask & !sig::UNBLOCKABLE;
    block_until(None);
    Err(sig::ERESTARTNOHAND)
}

/// `ppoll`/`pselect6`: `mask` is the signal mask until [`wait_mask_end`] (the old one kept
/// as `rt_sigsuspend` keeps it).
pub fn wait_mask_begin(mask: u64) {
    let s = signals();
    s.saved_mask = Some(s.blocked);
    s.blocked = mask & !sig::UNBLOCKABLE;
}

/// The wait of [`wait_mask_begin`] ended: the old mask is back now, unless a signal
/// `interrupted` it: then its delivery at this call's return saves the old mask in the
/// handler's frame (or puts it back if no handler runs), and a signal only the old mask blocks
/// stays pending.
pub fn wait_mask_end(interrupted: bool) {
    let s = signals();
    if !interrupted {
        if let Some(m) = s.saved_mask.take() {
            s.blocked = m;
        }
    }
    refresh();
}

fn sys_pause() -> SysResult {
    block_until(None);
    Err(sig::ERESTARTNOHAND)
}

fn sys_sigaltstack(ss: u64, old: u64, sp: u64) -> SysResult {
    let new = if ss != 0 {
        let mut b = [0u8; sig::AltStack::SIZE];
        GuestUser.read(ss, &mut b)?;
        Some(sig::AltStack::parse(&b))
    } else {
        None
    };
    let prev = signals().sigaltstack(new, sp)?;
    if old != 0 {
        GuestUser.write(old, &prev)?;
    }
    Ok(0)
}

/// `rt_sigreturn`: the registers, mask, alternate stack and FPU state of the frame the
/// handler returned from (at `rsp - 8`: the handler's `ret` popped the return address).
fn sys_rt_sigreturn(frame: &mut ForeignFrame) -> SysResult {
    let at = frame.rsp.wrapping_sub(8);
    let mut uc = [0u8; sig::UCONTEXT_LEN];
    if GuestUser
        .read(at.wrapping_add(sig::UC_OFFSET), &mut uc)
        .is_err()
    {
        terminate(sig::SIGSEGV, true);
    }
    let back = sig::restore(&uc, &regs_of(frame));
    let mut fx = Fx([0; 512]);
    if back.fpstate != 0 {
        if GuestUser.read(back.fpstate, &mut fx.0).is_err() {
            terminate(sig::SIGSEGV, true);
        }
        sig::sanitize_fpstate(&mut fx.0, MXCSR_MASK.load(Ordering::Relaxed) as u32);
    } else {
        fx = fpu_init_state();
    }
    fxrstor(&fx);
    let s = signals();
    s.blocked = back.mask;
    // The alternate stack as the frame recorded it (errors ignored, as Linux's
    // restore_altstack does).
    let (ss_sp, flags, size) = back.stack;
    let _ = s.sigaltstack(
        Some((ss_sp, flags & !sig::SS_ONSTACK, size)),
        back.regs[RSP],
    );
    set_regs(frame, &back.regs);
    FULL_AFTER.store(true, Ordering::Relaxed);
    force_look();
    Ok(back.regs[RAX])
}

/// Sends `signo` to this process itself.
pub(crate) fn raise_self(signo: u32, code: i32) -> SysResult {
    if signo == 0 {
        return Ok(0);
    }
    let (pid, uid) = guest::ids();
    if signo == sig::SIGKILL {
        terminate(sig::SIGKILL, false);
    }
    signals().raise(Info::from_process(signo, code, pid as u32, uid));
    force_look();
    // A thread that does not block it takes it.
    crate::thread_guest::route_process_signal();
    Ok(0)
}

/// A signal for the calling thread alone (`tgkill` of itself).
pub(crate) fn raise_thread(info: Info) {
    if info.signo == sig::SIGKILL {
        terminate(sig::SIGKILL, false);
    }
    signals().raise_thread(info);
    force_look();
}

/// Sends through proc (another process, a group, everyone); then takes at once what proc may
/// have made pending for us.
fn send_via_proc(target: i64, signo: u32, code: i32) -> SysResult {
    let Some(p) = crate::guest::proc_cap() else {
        return Err(errno::ESRCH);
    };
    let target = i32::try_from(target).map_err(|_| errno::ESRCH)?;
    let r = proc::Client::new(p).kill(target, signo, code);
    poll();
    r.map(|_| 0).map_err(|e| {
        use sawmill_interfaces::rpc::Error as E;
        use sawmill_interfaces::ProcError as P;
        match e {
            E::App(P::NoSuchProcess) => errno::ESRCH,
            E::App(P::NotPermitted) => errno::EPERM,
            _ => errno::EINVAL,
        }
    })
}

fn sys_kill(pid: u64, signo: u64) -> SysResult {
    let pid = pid as i32 as i64;
    if signo > sig::NSIG as u64 {
        return Err(errno::EINVAL);
    }
    if pid == guest::ids().0 as i64 {
        return raise_self(signo as u32, sig::SI_USER);
    }
    send_via_proc(pid, signo as u32, sig::SI_USER)
}

fn sys_tgkill(tgid: i64, tid: i64, signo: u64) -> SysResult {
    if tgid <= 0 || tid <= 0 || signo > sig::NSIG as u64 {
        return Err(errno::EINVAL);
    }
    let (pid, uid) = guest::ids();
    if tgid == pid as i64 || tgid == i64::MAX {
        let info = Info::from_process(signo as u32, sig::SI_TKILL, pid as u32, uid);
        if let Some(r) = crate::thread_guest::signal_thread(tid as u32, info) {
            return r;
        }
        if tgid != i64::MAX {
            return Err(errno::ESRCH);
        }
    }
    // Another process's thread: only its first thread (id = pid) is reached, through proc.
    if tgid != tid && tgid != i64::MAX {
        return Err(errno::ESRCH);
    }
    send_via_proc(tid, signo as u32, sig::SI_TKILL)
}

const ITIMER_REAL: u64 = 0;
const ITIMER_PROF: u64 = 2;

fn read_timeval(addr: u64) -> Result<u64, Errno> {
    let mut b = [0u8; 16];
    GuestUser.read(addr, &mut b)?;
    let s = i64::from_le_bytes(b[0..8].try_into().unwrap());
    let us = i64::from_le_bytes(b[8..16].try_into().unwrap());
    if s < 0 || !(0..1_000_000).contains(&us) {
        return Err(errno::EINVAL);
    }
    Ok((s as u64).saturating_mul(1_000_000_000) + us as u64 * 1000)
}

fn write_itimerval(addr: u64, (value, interval): (u64, u64)) -> SysResult {
    let mut b = [0u8; 32];
    // Rounded up to whole microseconds, as Linux reports.
    for (i, ns) in [interval, value].iter().enumerate() {
        let us = ns.div_ceil(1000);
        b[i * 16..i * 16 + 8].copy_from_slice(&(us / 1_000_000).to_le_bytes());
        b[i * 16 + 8..i * 16 + 16].copy_from_slice(&(us % 1_000_000).to_le_bytes());
    }
    GuestUser.write(addr, &b).map(|_| 0)
}

/// The virtual and profiling timers are kept (reported back) but never fire: the library
/// does not measure the process's CPU time.
static OTHER_TIMERS: Single<[Itimer; 2]> = Single(UnsafeCell::new(
    [Itimer {
        deadline: 0,
        interval: 0,
    }; 2],
));

fn timer(which: u64) -> Result<&'static mut Itimer, Errno> {
    match which {
        ITIMER_REAL => Ok(REAL_TIMER.get()),
        1..=ITIMER_PROF => Ok(&mut OTHER_TIMERS.get()[which as usize - 1]),
        _ => Err(errno::EINVAL),
    }
}

fn sys_setitimer(which: u64, new: u64, old: u64) -> SysResult {
    let t = timer(which)?;
    let (interval, value) = if new != 0 {
        (read_timeval(new)?, read_timeval(new + 16)?)
    } else {
        (0, 0)
    };
    let now = guest::monotonic_ns();
    let prev = t.get(now);
    if old != 0 {
        write_itimerval(old, prev)?;
    }
    t.set(now, value, interval);
    if which == ITIMER_REAL {
        sync_timer_thread();
    }
    // The next poll no later than the expiry.
    NEXT_POLL.store(0, Ordering::Relaxed);
    force_look();
    Ok(0)
}

fn sys_getitimer(which: u64, cur: u64) -> SysResult {
    let t = timer(which)?;
    write_itimerval(cur, t.get(guest::monotonic_ns()))
}

fn sys_alarm(secs: u64) -> SysResult {
    let secs = secs as u32 as u64;
    let now = guest::monotonic_ns();
    let (old, _) = REAL_TIMER.get().set(now, secs * 1_000_000_000, 0);
    sync_timer_thread();
    NEXT_POLL.store(0, Ordering::Relaxed);
    force_look();
    Ok(sig::alarm_seconds(old))
}

/// Before `execve`: tells proc what the new program keeps (the ignored signals, the mask).
pub fn before_exec(p: &proc::Client) {
    let (ignored, blocked) = signals().exec_state();
    if ignored | blocked != 0 {
        let _ = p.sig_exec(ignored, blocked);
    }
}

/// Sleeps until the TSC reads `deadline`, or a signal: `ERESTART_RESTARTBLOCK` then (EINTR
/// when a handler runs).
pub fn sleep_until(deadline: u64) -> Result<(), Errno> {
    if block_until(Some(deadline)) {
        Err(sig::ERESTART_RESTARTBLOCK)
    } else {
        Ok(())
    }
}

/// The signal calls; None for the others. `frame`: the caller's registers (`rt_sigreturn`,
/// `sigaltstack`).
pub fn dispatch(n: u64, a: [u64; 6], frame: *mut ForeignFrame) -> Option<SysResult> {
    Some(match n {
        nr::RT_SIGACTION => sys_rt_sigaction(a[0], a[1], a[2], a[3]),
        nr::RT_SIGPROCMASK => sys_rt_sigprocmask(a[0], a[1], a[2], a[3]),
        nr::RT_SIGPENDING => sys_rt_sigpending(a[0], a[1]),
        nr::RT_SIGSUSPEND => sys_rt_sigsuspend(a[0], a[1]),
        // SAFETY: this thread's UTCB frame (see guest::serve_reflected).
        nr::RT_SIGRETURN => sys_rt_sigreturn(unsafe { &mut *frame }),
        // SAFETY: as above; only read.
        nr::SIGALTSTACK => sys_sigaltstack(a[0], a[1], unsafe { (*frame).rsp }),
        nr::PAUSE => sys_pause(),
        nr::KILL => sys_kill(a[0], a[1]),
        // tkill: any thread group (i64::MAX stands for "not named").
        nr::TKILL => sys_tgkill(i64::MAX, a[0] as i32 as i64, a[1]),
        nr::TGKILL => sys_tgkill(a[0] as i32 as i64, a[1] as i32 as i64, a[2]),
        nr::ALARM => sys_alarm(a[0]),
        nr::SETITIMER => sys_setitimer(a[0], a[1], a[2]),
        nr::GETITIMER => sys_getitimer(a[0], a[1]),
        _ => return None,
    })
}
