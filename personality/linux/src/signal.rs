//! Signals as the library keeps them for its process: the actions (`rt_sigaction`), the blocked
//! mask, the pending set with each signal's `siginfo`, the alternate stack, the default action
//! of every signal, and the x86-64 `rt_sigframe` a caught signal's handler runs on (built here
//! as bytes and registers; written and entered by the guest). Linux's layouts and rules
//! (`arch/x86/kernel/signal.c`, `kernel/signal.c`). Pure logic, tested on the host.

use crate::errno::{self, Errno};

pub const SIGHUP: u32 = 1;
pub const SIGINT: u32 = 2;
pub const SIGQUIT: u32 = 3;
pub const SIGILL: u32 = 4;
pub const SIGTRAP: u32 = 5;
pub const SIGABRT: u32 = 6;
pub const SIGBUS: u32 = 7;
pub const SIGFPE: u32 = 8;
pub const SIGKILL: u32 = 9;
pub const SIGUSR1: u32 = 10;
pub const SIGSEGV: u32 = 11;
pub const SIGUSR2: u32 = 12;
pub const SIGPIPE: u32 = 13;
pub const SIGALRM: u32 = 14;
pub const SIGTERM: u32 = 15;
pub const SIGCHLD: u32 = 17;
pub const SIGCONT: u32 = 18;
pub const SIGSTOP: u32 = 19;
pub const SIGTSTP: u32 = 20;
pub const SIGTTIN: u32 = 21;
pub const SIGTTOU: u32 = 22;
pub const SIGURG: u32 = 23;
pub const SIGXCPU: u32 = 24;
pub const SIGXFSZ: u32 = 25;
pub const SIGWINCH: u32 = 28;
pub const SIGSYS: u32 = 31;
/// Signals are 1..=NSIG (`_NSIG` = 64).
pub const NSIG: u32 = 64;

pub const SIG_DFL: u64 = 0;
pub const SIG_IGN: u64 = 1;

pub const SA_NOCLDSTOP: u64 = 0x1;
pub const SA_NOCLDWAIT: u64 = 0x2;
pub const SA_SIGINFO: u64 = 0x4;
pub const SA_RESTORER: u64 = 0x0400_0000;
pub const SA_ONSTACK: u64 = 0x0800_0000;
pub const SA_RESTART: u64 = 0x1000_0000;
pub const SA_NODEFER: u64 = 0x4000_0000;
pub const SA_RESETHAND: u64 = 0x8000_0000;

pub const SIG_BLOCK: u64 = 0;
pub const SIG_UNBLOCK: u64 = 1;
pub const SIG_SETMASK: u64 = 2;

pub const SS_ONSTACK: u32 = 1;
pub const SS_DISABLE: u32 = 2;
pub const SS_AUTODISARM: u32 = 1 << 31;
/// The smallest alternate stack `sigaltstack` accepts (x86-64's `MINSIGSTKSZ`).
pub const MINSIGSTKSZ: u64 = 2048;

// `si_code` values.
pub const SI_USER: i32 = 0;
pub const SI_KERNEL: i32 = 0x80;
pub const SI_TKILL: i32 = -6;
pub const ILL_ILLOPN: i32 = 2;
pub const FPE_INTDIV: i32 = 1;
pub const SEGV_MAPERR: i32 = 1;
pub const SEGV_ACCERR: i32 = 2;
pub const BUS_ADRERR: i32 = 2;
pub const TRAP_BRKPT: i32 = 1;
pub const CLD_EXITED: i32 = 1;
pub const CLD_KILLED: i32 = 2;
pub const CLD_DUMPED: i32 = 3;

/// Internal results of a blocking call a signal interrupted (never seen by the program): what
/// happens depends on the handler, as in Linux. `RESTARTSYS`: restart if the handler has
/// `SA_RESTART`, else `EINTR`; `RESTARTNOHAND`: `EINTR` if a handler runs, else restart;
/// `RESTART_RESTARTBLOCK` (`nanosleep`): as `RESTARTNOHAND`.
pub const ERESTARTSYS: Errno = Errno(512);
pub const ERESTARTNOHAND: Errno = Errno(514);
pub const ERESTART_RESTARTBLOCK: Errno = Errno(516);

/// The bit of signal `sig` in a mask.
pub const fn bit(sig: u32) -> u64 {
    1 << (sig - 1)
}

/// Signals no mask blocks and no action catches.
pub const UNBLOCKABLE: u64 = bit(SIGKILL) | bit(SIGSTOP);
/// The signals whose default action stops the process.
pub const STOP_SIGNALS: u64 = bit(SIGSTOP) | bit(SIGTSTP) | bit(SIGTTIN) | bit(SIGTTOU);
/// SIGCHLD's `si_code` for a child that stopped or was continued.
pub const CLD_STOPPED: i32 = 5;
pub const CLD_CONTINUED: i32 = 6;

/// Whether `sig` is a signal number.
pub fn valid(sig: u32) -> bool {
    (1..=NSIG).contains(&sig)
}

/// What a signal does when its action is `SIG_DFL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    Terminate,
    /// Terminate with a core dump (the wait status's core bit).
    Core,
    Ignore,
    Stop,
    Continue,
}

/// Linux's default action for `sig` (signal(7)).
pub fn default_action(sig: u32) -> Default {
    match sig {
        SIGQUIT | SIGILL | SIGTRAP | SIGABRT | SIGBUS | SIGFPE | SIGSEGV | SIGXCPU | SIGXFSZ
        | SIGSYS => Default::Core,
        SIGCHLD | SIGURG | SIGWINCH => Default::Ignore,
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU => Default::Stop,
        SIGCONT => Default::Continue,
        _ => Default::Terminate,
    }
}

/// A `struct sigaction` as the kernel's `rt_sigaction` sees it (handler, flags, restorer,
/// mask: 32 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

impl Action {
    pub const SIZE: usize = 32;

    pub fn from_bytes(b: &[u8; 32]) -> Action {
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        Action {
            handler: w(0),
            flags: w(1),
            restorer: w(2),
            mask: w(3),
        }
    }

    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for (i, v) in [self.handler, self.flags, self.restorer, self.mask]
            .iter()
            .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// A signal's `siginfo`: number, code and the two words of its union that Linux's senders fill
/// (kill: pid and uid; a fault: the address; SIGCHLD: pid, uid and status).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub signo: u32,
    pub code: i32,
    /// Bytes 16..24: `si_pid | si_uid << 32`, or `si_addr`.
    pub word0: u64,
    /// Bytes 24..32: `si_status` (SIGCHLD) or the value of a queued signal.
    pub word1: u64,
}

impl Info {
    pub const SIZE: usize = 128;

    /// Sent by process `pid` (user `uid`) with code `code` (SI_USER from kill, SI_TKILL).
    pub fn from_process(signo: u32, code: i32, pid: u32, uid: u32) -> Info {
        Info {
            signo,
            code,
            word0: pid as u64 | (uid as u64) << 32,
            word1: 0,
        }
    }

    /// Sent by the kernel (a timer, a fault without an address).
    pub fn kernel(signo: u32) -> Info {
        Info {
            signo,
            code: SI_KERNEL,
            word0: 0,
            word1: 0,
        }
    }

    /// A fault at `addr`.
    pub fn fault(signo: u32, code: i32, addr: u64) -> Info {
        Info {
            signo,
            code,
            word0: addr,
            word1: 0,
        }
    }

    pub fn to_bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(&self.signo.to_le_bytes());
        b[8..12].copy_from_slice(&self.code.to_le_bytes());
        b[16..24].copy_from_slice(&self.word0.to_le_bytes());
        b[24..32].copy_from_slice(&self.word1.to_le_bytes());
        b
    }
}

/// The alternate signal stack (`sigaltstack`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AltStack {
    pub sp: u64,
    pub size: u64,
    /// `SS_AUTODISARM` if asked for; `SS_DISABLE` when there is none.
    pub flags: u32,
}

impl AltStack {
    pub const SIZE: usize = 24;

    fn enabled(&self) -> bool {
        self.size != 0 && self.flags & SS_DISABLE == 0
    }

    /// Whether stack pointer `sp` lies on the alternate stack.
    pub fn on(&self, sp: u64) -> bool {
        self.enabled() && sp > self.sp && sp - self.sp <= self.size
    }

    /// `stack_t` as `sigaltstack` and `uc_stack` report it while the thread's stack pointer is
    /// `sp`: `ss_flags` is SS_ONSTACK on it, SS_DISABLE without one.
    pub fn to_bytes(&self, sp: u64) -> [u8; 24] {
        let flags = if !self.enabled() {
            SS_DISABLE
        } else if self.on(sp) {
            SS_ONSTACK | (self.flags & SS_AUTODISARM)
        } else {
            self.flags & SS_AUTODISARM
        };
        let (ss_sp, size) = if self.enabled() {
            (self.sp, self.size)
        } else {
            (0, 0)
        };
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&ss_sp.to_le_bytes());
        b[8..12].copy_from_slice(&flags.to_le_bytes());
        b[16..24].copy_from_slice(&size.to_le_bytes());
        b
    }

    pub fn parse(b: &[u8; 24]) -> (u64, u32, u64) {
        (
            u64::from_le_bytes(b[0..8].try_into().unwrap()),
            u32::from_le_bytes(b[8..12].try_into().unwrap()),
            u64::from_le_bytes(b[16..24].try_into().unwrap()),
        )
    }
}

/// The program's registers at the point a signal interrupts it (the order of the kernel's
/// `ForeignFrame`: rax rbx rcx rdx rsi rdi rbp rsp r8..r15 rip rflags).
pub type Regs = [u64; 18];
pub const RAX: usize = 0;
pub const RBX: usize = 1;
pub const RCX: usize = 2;
pub const RDX: usize = 3;
pub const RSI: usize = 4;
pub const RDI: usize = 5;
pub const RBP: usize = 6;
pub const RSP: usize = 7;
pub const R8: usize = 8;
pub const R11: usize = 11;
pub const RIP: usize = 16;
pub const RFLAGS: usize = 17;

/// What the processor state says about the fault a signal reports (sigcontext `err`,
/// `trapno`, `cr2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trap {
    pub err: u64,
    pub trapno: u64,
    pub cr2: u64,
}

/// What happens to a signal taken from the pending set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Run the program's handler with this action.
    Handle(Action),
    Ignore,
    /// The process ends by the signal (with a core dump if `core`).
    Terminate {
        core: bool,
    },
    Stop,
    Continue,
}

/// The signal state of the process as the thread in the library sees it: the process's
/// actions and the signals sent to the process, and that thread's own part (mask, alternate
/// stack, the signals sent to it alone), which a threaded process swaps in and out with
/// [`ThreadSignals`] as its threads take turns in the library.
#[derive(Clone, Debug)]
pub struct Signals {
    actions: [Action; NSIG as usize],
    pub blocked: u64,
    /// Pending for the process (any thread that does not block it takes it).
    pending: u64,
    info: [Info; NSIG as usize],
    /// Pending for the current thread alone (`tgkill`, a fault).
    thread_pending: u64,
    thread_info: [Info; NSIG as usize],
    pub altstack: AltStack,
    /// The mask `rt_sigsuspend` replaced, given back when its handler returns.
    pub saved_mask: Option<u64>,
}

/// One thread's own part of the signal state while another thread's is in [`Signals`].
#[derive(Clone, Debug)]
pub struct ThreadSignals {
    pub blocked: u64,
    pub saved_mask: Option<u64>,
    pub altstack: AltStack,
    pending: u64,
    info: [Info; NSIG as usize],
}

impl ThreadSignals {
    /// A new thread's: the creating thread's mask, nothing pending, no alternate stack (Linux's
    /// `clone` with `CLONE_VM` clears it).
    pub fn new(blocked: u64) -> ThreadSignals {
        ThreadSignals {
            blocked,
            saved_mask: None,
            altstack: AltStack {
                sp: 0,
                size: 0,
                flags: SS_DISABLE,
            },
            pending: 0,
            info: [Info::default(); NSIG as usize],
        }
    }

    /// Whether a signal sent to this thread alone waits that it does not block.
    pub fn deliverable(&self) -> bool {
        self.pending & !self.blocked != 0
    }
}

/// `new` arrives at a pending set: the stop/continue rules, discarded if its action ignores
/// it and `blocked` does not hold it, one instance of each signal kept.
fn arrive(
    actions: &[Action; NSIG as usize],
    blocked: u64,
    pending: &mut u64,
    info: &mut [Info; NSIG as usize],
    new: Info,
) {
    let sig = new.signo;
    if !valid(sig) {
        return;
    }
    // A SIGCONT discards the stop signals pending, a stop signal a pending SIGCONT, even
    // when ignored (Linux's `prepare_signal`).
    if sig == SIGCONT {
        *pending &= !STOP_SIGNALS;
    } else if STOP_SIGNALS & bit(sig) != 0 {
        *pending &= !bit(SIGCONT);
    }
    let a = actions[sig as usize - 1];
    // A child's stop or continue does not interest a parent with SA_NOCLDSTOP.
    if sig == SIGCHLD
        && (new.code == CLD_STOPPED || new.code == CLD_CONTINUED)
        && a.flags & SA_NOCLDSTOP != 0
    {
        return;
    }
    let ignored = blocked & bit(sig) == 0
        && match a.handler {
            SIG_IGN => true,
            SIG_DFL => default_action(sig) == Default::Ignore,
            _ => false,
        };
    if ignored {
        return;
    }
    if *pending & bit(sig) == 0 {
        *pending |= bit(sig);
        info[sig as usize - 1] = new;
    }
}

impl core::default::Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}

impl Signals {
    pub fn new() -> Signals {
        Signals {
            actions: [Action::default(); NSIG as usize],
            blocked: 0,
            pending: 0,
            info: [Info::default(); NSIG as usize],
            thread_pending: 0,
            thread_info: [Info::default(); NSIG as usize],
            altstack: AltStack {
                sp: 0,
                size: 0,
                flags: SS_DISABLE,
            },
            saved_mask: None,
        }
    }

    pub fn action(&self, sig: u32) -> Action {
        self.actions[sig as usize - 1]
    }

    /// Whether `sig` would be discarded on arrival: ignored (explicitly, or by default) and not
    /// blocked (a blocked signal stays pending: its action may change before it is unblocked).
    fn ignored(&self, sig: u32) -> bool {
        if self.blocked & bit(sig) != 0 {
            return false;
        }
        match self.action(sig).handler {
            SIG_IGN => true,
            SIG_DFL => default_action(sig) == Default::Ignore,
            _ => false,
        }
    }

    /// `rt_sigaction(sig, new)`: the old action; a new one replaces it. SIGKILL and SIGSTOP
    /// cannot be caught or ignored (EINVAL), nor can a signal that does not exist.
    pub fn sigaction(&mut self, sig: u32, new: Option<Action>) -> Result<Action, Errno> {
        if !valid(sig) || (new.is_some() && bit(sig) & UNBLOCKABLE != 0) {
            return Err(errno::EINVAL);
        }
        let old = self.action(sig);
        if let Some(mut a) = new {
            a.mask &= !UNBLOCKABLE;
            self.actions[sig as usize - 1] = a;
            // Setting an action that ignores discards what is pending (POSIX).
            if self.ignored(sig) {
                self.pending &= !bit(sig);
                self.thread_pending &= !bit(sig);
            }
        }
        Ok(old)
    }

    /// `rt_sigprocmask(how, set)`: the old mask; SIGKILL and SIGSTOP never blocked.
    pub fn sigprocmask(&mut self, how: u64, set: Option<u64>) -> Result<u64, Errno> {
        let old = self.blocked;
        if let Some(s) = set {
            self.blocked = match how {
                SIG_BLOCK => old | s,
                SIG_UNBLOCK => old & !s,
                SIG_SETMASK => s,
                _ => return Err(errno::EINVAL),
            } & !UNBLOCKABLE;
        }
        // Without a new set, `how` is not looked at (Linux).
        Ok(old)
    }

    /// The signal `info.signo` arrives: pending unless its action discards it. One instance of
    /// each signal is kept (a second arrival while pending merges with the first).
    pub fn raise(&mut self, info: Info) {
        arrive(
            &self.actions,
            self.blocked,
            &mut self.pending,
            &mut self.info,
            info,
        );
    }

    /// The signal `info.signo` arrives for the current thread alone (`tgkill`).
    pub fn raise_thread(&mut self, info: Info) {
        arrive(
            &self.actions,
            self.blocked,
            &mut self.thread_pending,
            &mut self.thread_info,
            info,
        );
    }

    /// The signal `info.signo` arrives for another thread, whose own part is `t`.
    pub fn raise_other(&self, t: &mut ThreadSignals, info: Info) {
        arrive(&self.actions, t.blocked, &mut t.pending, &mut t.info, info);
    }

    /// Swaps the current thread's own part with `t` (another thread takes its turn).
    pub fn swap_thread(&mut self, t: &mut ThreadSignals) {
        core::mem::swap(&mut self.blocked, &mut t.blocked);
        core::mem::swap(&mut self.saved_mask, &mut t.saved_mask);
        core::mem::swap(&mut self.altstack, &mut t.altstack);
        core::mem::swap(&mut self.thread_pending, &mut t.pending);
        core::mem::swap(&mut self.thread_info, &mut t.info);
    }

    /// Whether a process-directed signal waits that `t`'s mask lets through (that thread
    /// should take it).
    pub fn deliverable_to(&self, t: &ThreadSignals) -> bool {
        self.pending & !t.blocked != 0 || t.deliverable()
    }

    /// A fault signal the program cannot refuse (Linux's `force_sig`): if it is blocked or
    /// ignored, it is unblocked and its action reset to the default, so it kills.
    pub fn force(&mut self, info: Info) {
        let sig = info.signo;
        let i = sig as usize - 1;
        if self.blocked & bit(sig) != 0 || self.actions[i].handler == SIG_IGN {
            self.blocked &= !bit(sig);
            self.actions[i].handler = SIG_DFL;
        }
        // A fault is the faulting thread's.
        self.thread_pending |= bit(sig);
        self.thread_info[i] = info;
    }

    /// Pending for the process or the current thread.
    pub fn pending(&self) -> u64 {
        self.pending | self.thread_pending
    }

    /// Whether a signal is pending that is not blocked.
    pub fn deliverable(&self) -> bool {
        (self.pending | self.thread_pending) & !self.blocked != 0
    }

    /// Takes the next deliverable signal (the synchronous fault signals first, then the lowest
    /// number, as Linux does) and decides what it does; a handler with `SA_RESETHAND` is
    /// reset to the default on the way.
    pub fn take(&mut self) -> Option<(Info, Disposition)> {
        let ready = (self.pending | self.thread_pending) & !self.blocked;
        if ready == 0 {
            return None;
        }
        const SYNCHRONOUS: u64 =
            bit(SIGSEGV) | bit(SIGBUS) | bit(SIGILL) | bit(SIGTRAP) | bit(SIGFPE) | bit(SIGSYS);
        let pick = if ready & SYNCHRONOUS != 0 {
            ready & SYNCHRONOUS
        } else {
            ready
        };
        let sig = pick.trailing_zeros() + 1;
        // The thread's own instance first.
        let info = if self.thread_pending & bit(sig) != 0 {
            self.thread_pending &= !bit(sig);
            self.thread_info[sig as usize - 1]
        } else {
            self.pending &= !bit(sig);
            self.info[sig as usize - 1]
        };
        let a = self.action(sig);
        let d = match a.handler {
            SIG_IGN => Disposition::Ignore,
            SIG_DFL => match default_action(sig) {
                Default::Terminate => Disposition::Terminate { core: false },
                Default::Core => Disposition::Terminate { core: true },
                Default::Ignore => Disposition::Ignore,
                Default::Stop => Disposition::Stop,
                Default::Continue => Disposition::Continue,
            },
            _ => {
                if a.flags & SA_RESETHAND != 0 {
                    self.actions[sig as usize - 1].handler = SIG_DFL;
                    self.actions[sig as usize - 1].flags &= !SA_SIGINFO;
                }
                Disposition::Handle(a)
            }
        };
        Some((info, d))
    }

    /// `sigaltstack(new)` while the stack pointer is `sp`: the old setting as a `stack_t`.
    /// EPERM to change it while running on it, EINVAL for unknown flags, ENOMEM if too small.
    pub fn sigaltstack(
        &mut self,
        new: Option<(u64, u32, u64)>,
        sp: u64,
    ) -> Result<[u8; 24], Errno> {
        let old = self.altstack.to_bytes(sp);
        if let Some((ss_sp, flags, size)) = new {
            if self.altstack.on(sp) {
                return Err(errno::EPERM);
            }
            let mode = flags & !SS_AUTODISARM;
            if mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE {
                return Err(errno::EINVAL);
            }
            if mode == SS_DISABLE {
                self.altstack = AltStack {
                    sp: 0,
                    size: 0,
                    flags: SS_DISABLE,
                };
            } else {
                if size < MINSIGSTKSZ {
                    return Err(errno::ENOMEM);
                }
                self.altstack = AltStack {
                    sp: ss_sp,
                    size,
                    flags: flags & SS_AUTODISARM,
                };
            }
        }
        Ok(old)
    }

    /// What survives `execve` (Linux): the signals whose action is SIG_IGN stay ignored (caught
    /// ones return to the default), the mask stays. `(ignored, blocked)`.
    pub fn exec_state(&self) -> (u64, u64) {
        let ignored = (1..=NSIG)
            .filter(|&s| self.action(s).handler == SIG_IGN)
            .fold(0, |m, s| m | bit(s));
        (ignored, self.blocked)
    }

    /// The state a new program starts with after `execve` (see [`Signals::exec_state`]).
    pub fn after_exec(ignored: u64, blocked: u64) -> Signals {
        let mut s = Signals::new();
        for sig in 1..=NSIG {
            if ignored & bit(sig) != 0 && bit(sig) & UNBLOCKABLE == 0 {
                s.actions[sig as usize - 1].handler = SIG_IGN;
            }
        }
        s.blocked = blocked & !UNBLOCKABLE;
        s
    }

    /// The state a `fork` child inherits, as bytes for the trip through proc: every action, the
    /// mask and the alternate stack (pending signals are not inherited, as Linux).
    pub fn encode_for_fork(&self) -> alloc::vec::Vec<u8> {
        let mut out = alloc::vec::Vec::with_capacity(FORK_STATE_LEN);
        for a in &self.actions {
            out.extend_from_slice(&a.to_bytes());
        }
        out.extend_from_slice(&self.blocked.to_le_bytes());
        out.extend_from_slice(&self.altstack.sp.to_le_bytes());
        out.extend_from_slice(&self.altstack.size.to_le_bytes());
        out.extend_from_slice(&(self.altstack.flags as u64).to_le_bytes());
        out
    }

    /// A fork child's state from [`Signals::encode_for_fork`]'s bytes (None if malformed).
    pub fn decode_fork(b: &[u8]) -> Option<Signals> {
        if b.len() != FORK_STATE_LEN {
            return None;
        }
        let mut s = Signals::new();
        for (i, a) in s.actions.iter_mut().enumerate() {
            let mut w = [0u8; 32];
            w.copy_from_slice(&b[i * 32..i * 32 + 32]);
            *a = Action::from_bytes(&w);
            a.mask &= !UNBLOCKABLE;
        }
        let word = |i: usize| {
            let at = NSIG as usize * 32 + i * 8;
            u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
        };
        s.blocked = word(0) & !UNBLOCKABLE;
        s.altstack = AltStack {
            sp: word(1),
            size: word(2),
            flags: word(3) as u32,
        };
        Some(s)
    }

    /// The mask a handler of `sig` with action `a` runs under, set now; returns the mask to
    /// give back at `rt_sigreturn` (the one `rt_sigsuspend` replaced, if it did).
    pub fn enter_handler(&mut self, sig: u32, a: &Action) -> u64 {
        let old = self.saved_mask.take().unwrap_or(self.blocked);
        let mut add = a.mask;
        if a.flags & SA_NODEFER == 0 {
            add |= bit(sig);
        }
        self.blocked = (old | add) & !UNBLOCKABLE;
        old
    }
}

/// Bytes of [`Signals::encode_for_fork`].
pub const FORK_STATE_LEN: usize = NSIG as usize * 32 + 4 * 8;

/// `sizeof(struct rt_sigframe)` on x86-64: the return address, `ucontext` (304) and
/// `siginfo` (128).
pub const FRAME_SIZE: u64 = 8 + UCONTEXT_SIZE + Info::SIZE as u64;
const UCONTEXT_SIZE: u64 = 304;
/// Offsets in the frame.
pub const UC_OFFSET: u64 = 8;
pub const INFO_OFFSET: u64 = 8 + UCONTEXT_SIZE;
const MCONTEXT_OFFSET: usize = 8 + 40;
const SIGMASK_OFFSET: usize = 8 + 296;
/// `fxsave`'s area, where the frame's FPU state lives (64-byte aligned, as Linux places it).
pub const FPSTATE_SIZE: u64 = 512;
/// Below the interrupted stack pointer: the x86-64 red zone, never overwritten.
const RED_ZONE: u64 = 128;
/// `uc_flags` as Linux 6.1 sets them without XSAVE: `UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS`.
const UC_FLAGS: u64 = 0x2 | 0x4;
/// The selectors Linux reports in `sigcontext`: user code and data.
const USER_CS: u64 = 0x33;
const USER_SS: u64 = 0x2b;
/// RFLAGS bits a handler starts without (DF, TF, RF) and the ones `rt_sigreturn` may restore
/// (Linux's `FIX_EFLAGS`: CF PF AF ZF SF TF DF OF AC RF).
const HANDLER_CLEARS: u64 = 0x400 | 0x100 | 0x1_0000;
const RESTORABLE_FLAGS: u64 =
    0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x100 | 0x400 | 0x800 | 0x4_0000 | 0x1_0000;

/// A signal frame ready to be written: where, its bytes (frame then, at `fpstate`, the FPU
/// area), and the registers the handler starts with.
pub struct Frame {
    pub addr: u64,
    pub bytes: [u8; FRAME_SIZE as usize],
    pub fpstate: u64,
    pub regs: Regs,
}

/// Builds the frame for handler `a` of signal `info.signo`, interrupting registers `regs`:
/// `old_mask` is the mask `rt_sigreturn` gives back. On the alternate stack if the action
/// asks (`SA_ONSTACK`) and the thread is not already on it; otherwise below the red zone.
/// None if the stack pointer would wrap.
pub fn build_frame(
    regs: &Regs,
    trap: &Trap,
    info: &Info,
    a: &Action,
    old_mask: u64,
    alt: &AltStack,
) -> Option<Frame> {
    let sp = regs[RSP];
    let top = if a.flags & SA_ONSTACK != 0 && alt.enabled() && !alt.on(sp) {
        alt.sp.checked_add(alt.size)?
    } else {
        sp.checked_sub(RED_ZONE)?
    };
    let fpstate = top.checked_sub(FPSTATE_SIZE)? & !63;
    let addr = (fpstate.checked_sub(FRAME_SIZE)? & !15).checked_sub(8)?;
    let mut b = [0u8; FRAME_SIZE as usize];
    let put = |b: &mut [u8], at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut b, 0, a.restorer);
    put(&mut b, 8, UC_FLAGS);
    b[24..48].copy_from_slice(&alt.to_bytes(sp));
    // sigcontext: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags, then
    // cs/gs/fs/ss, err, trapno, oldmask, cr2, fpstate.
    let m = MCONTEXT_OFFSET;
    for (i, r) in (R8..=R8 + 7).enumerate() {
        put(&mut b, m + i * 8, regs[r]);
    }
    for (i, r) in [RDI, RSI, RBP, RBX, RDX, RAX, RCX, RSP, RIP, RFLAGS]
        .iter()
        .enumerate()
    {
        put(&mut b, m + 64 + i * 8, regs[*r]);
    }
    put(&mut b, m + 144, USER_CS | USER_SS << 48);
    put(&mut b, m + 152, trap.err);
    put(&mut b, m + 160, trap.trapno);
    put(&mut b, m + 168, old_mask);
    put(&mut b, m + 176, trap.cr2);
    put(&mut b, m + 184, fpstate);
    put(&mut b, SIGMASK_OFFSET, old_mask);
    b[INFO_OFFSET as usize..].copy_from_slice(&info.to_bytes());

    let mut r = *regs;
    r[RIP] = a.handler;
    r[RSP] = addr;
    r[RDI] = info.signo as u64;
    r[RSI] = addr + INFO_OFFSET;
    r[RDX] = addr + UC_OFFSET;
    r[RAX] = 0;
    r[RFLAGS] &= !HANDLER_CLEARS;
    Some(Frame {
        addr,
        bytes: b,
        fpstate,
        regs: r,
    })
}

/// What `rt_sigreturn` takes back from the `ucontext` at the frame: the registers, the mask,
/// the alternate stack (`stack_t`) and where the FPU state is (0: none).
pub struct Restored {
    pub regs: Regs,
    pub mask: u64,
    pub stack: (u64, u32, u64),
    pub fpstate: u64,
}

/// Reads back a frame's `ucontext` (`uc`: its 304 bytes) over the registers `now` (rflags bits
/// a program may not set are kept from `now`).
pub fn restore(uc: &[u8; UCONTEXT_SIZE as usize], now: &Regs) -> Restored {
    let get = |at: usize| u64::from_le_bytes(uc[at..at + 8].try_into().unwrap());
    let m = MCONTEXT_OFFSET - 8;
    let mut r = *now;
    for (i, reg) in (R8..=R8 + 7).enumerate() {
        r[reg] = get(m + i * 8);
    }
    for (i, reg) in [RDI, RSI, RBP, RBX, RDX, RAX, RCX, RSP, RIP]
        .iter()
        .enumerate()
    {
        r[*reg] = get(m + 64 + i * 8);
    }
    let fl = get(m + 136);
    r[RFLAGS] = (now[RFLAGS] & !RESTORABLE_FLAGS) | (fl & RESTORABLE_FLAGS);
    let stack: [u8; 24] = uc[16..40].try_into().unwrap();
    Restored {
        regs: r,
        mask: get(SIGMASK_OFFSET - 8) & !UNBLOCKABLE,
        stack: AltStack::parse(&stack),
        fpstate: get(m + 184),
    }
}

/// The `ucontext` of a frame at `addr` (as `rt_sigreturn` finds it: `rsp - 8`).
pub const UCONTEXT_LEN: usize = UCONTEXT_SIZE as usize;

/// Makes an FPU area from a program safe for `fxrstor` (which faults on MXCSR bits the
/// processor does not have): MXCSR limited to `mxcsr_mask`, the reserved tail zeroed.
pub fn sanitize_fpstate(fx: &mut [u8; 512], mxcsr_mask: u32) {
    let mx = u32::from_le_bytes(fx[24..28].try_into().unwrap()) & mxcsr_mask;
    fx[24..28].copy_from_slice(&mx.to_le_bytes());
    fx[28..32].copy_from_slice(&mxcsr_mask.to_le_bytes());
}

/// The wait status of a process ended by `sig` (with the core bit if it dumped core).
pub fn kill_status(sig: u32, core: bool) -> u32 {
    sig | if core { 0x80 } else { 0 }
}

/// An interval timer (`ITIMER_REAL`, `alarm`): the next expiry and the reload interval, in
/// nanoseconds of the monotonic clock (0 = disarmed / one-shot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Itimer {
    pub deadline: u64,
    pub interval: u64,
}

impl Itimer {
    /// `(value, interval)` left at time `now` (value 0: disarmed).
    pub fn get(&self, now: u64) -> (u64, u64) {
        if self.deadline == 0 {
            (0, self.interval)
        } else {
            // An armed timer never reads 0 left (Linux reports at least a microsecond).
            (self.deadline.saturating_sub(now).max(1000), self.interval)
        }
    }

    /// Arms it to fire `value` ns from `now` (0 disarms), then every `interval` ns; the old
    /// `(value, interval)`.
    pub fn set(&mut self, now: u64, value: u64, interval: u64) -> (u64, u64) {
        let old = self.get(now);
        self.deadline = if value == 0 {
            0
        } else {
            now.saturating_add(value)
        };
        self.interval = if value == 0 { 0 } else { interval };
        old
    }

    /// Whether it fired by `now`; then it is re-armed for the next interval (or disarmed).
    pub fn fire(&mut self, now: u64) -> bool {
        if self.deadline == 0 || now < self.deadline {
            return false;
        }
        // Expiries missed while nobody looked are merged into one signal, as Linux does.
        self.deadline = match (now - self.deadline).checked_div(self.interval) {
            None => 0,
            Some(missed) => self.deadline + (missed + 1) * self.interval,
        };
        true
    }
}

/// `alarm(seconds)`'s result from the old timer value: the seconds left, rounded to the
/// nearest (at least 1 while armed), as Linux reports.
pub fn alarm_seconds(old_ns: u64) -> u64 {
    if old_ns == 0 {
        0
    } else {
        ((old_ns + 500_000_000) / 1_000_000_000).max(1)
    }
}

#[cfg(test)]
mod tests;
