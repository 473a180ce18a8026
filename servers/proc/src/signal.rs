//! Signals as proc records them: the numbers of the default actions it carries out, the
//! signal a CPU exception means (what Linux's `arch/x86/kernel/traps.c` sends for each vector,
//! with its `si_code`), the signals pending at proc for a process until its library takes them,
//! and whom `kill` names and may reach.

use alloc::collections::VecDeque;

// Linux's signal numbers: one definition, the personality's (`sawmill_linux::signal`).
pub use sawmill_linux::signal::{
    SIGABRT, SIGBUS, SIGCHLD, SIGCONT, SIGFPE, SIGHUP, SIGILL, SIGKILL, SIGSEGV, SIGSTOP, SIGTRAP,
    SIGTSTP, SIGTTIN, SIGTTOU,
};
/// `proc.killed`'s flag: the default action dumped core (the wait status's core bit).
pub const CORE: u32 = 0x80;
/// Signal numbers run 1..=64 (`_NSIG`).
pub const MAX: u32 = sawmill_linux::signal::NSIG;

/// The signal Linux sends for CPU exception `vector`.
pub fn for_exception(vector: u64) -> u32 {
    match vector {
        0 | 16 | 19 | 9 => SIGFPE, // #DE, #MF, #XM, coprocessor segment overrun
        1 | 3 => SIGTRAP,          // #DB, #BP
        6 => SIGILL,               // #UD
        11 | 12 | 17 => SIGBUS,    // #NP, #SS, #AC
        _ => SIGSEGV,              // #OF, #BR, #TS, #GP, #PF and anything else
    }
}

/// The `si_code` Linux gives the signal of exception `vector`: FPE_INTDIV for #DE, ILL_ILLOPN
/// for #UD; SI_KERNEL for the rest (int3, #GP, and the FPU traps, whose precise code would need
/// the FPU status word).
pub fn code_for_exception(vector: u64) -> i32 {
    match vector {
        0 => 1,
        6 => 2,
        _ => 0x80,
    }
}

/// Whether the exception's reported address is the faulting instruction (Linux's si_addr for
/// #DE, #UD and the FPU traps) or none (0, as for #GP and int3).
pub fn addr_is_rip(vector: u64) -> bool {
    matches!(vector, 0 | 6 | 16 | 19)
}

/// One signal waiting at proc for a process: what its siginfo says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub sig: u32,
    pub code: i32,
    pub pid: u32,
    pub uid: u32,
    pub status: i32,
}

/// Signals sent to a process and not yet taken by its library. A standard signal already
/// waiting is not queued twice (Linux merges them); real-time ones (32..=64) queue, up to a
/// bound.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    queue: VecDeque<Record>,
}

/// Most signals waiting for one process (Linux's RLIMIT_SIGPENDING is larger; a bound keeps a
/// sender from filling proc's memory).
pub const MAX_PENDING: usize = 128;

impl Pending {
    pub fn push(&mut self, r: Record) {
        if r.sig < 32 && self.queue.iter().any(|q| q.sig == r.sig) {
            return;
        }
        if self.queue.len() < MAX_PENDING {
            self.queue.push_back(r);
        }
    }

    pub fn take(&mut self) -> Option<Record> {
        self.queue.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether signal `sig` is waiting.
    pub fn has(&self, sig: u32) -> bool {
        self.queue.iter().any(|q| q.sig == sig)
    }

    /// Drops every waiting signal `drop` names (a SIGCONT discards the stop signals waiting,
    /// a stop signal a waiting SIGCONT, as Linux's `prepare_signal`).
    pub fn discard(&mut self, drop: impl Fn(u32) -> bool) {
        self.queue.retain(|q| !drop(q.sig));
    }
}

/// Whom `kill(pid, ...)` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    One(u32),
    Group(u32),
    /// Every process but init and the caller.
    All,
}

/// `kill`'s `pid` argument for a caller in process group `own_group`.
pub fn target(pid: i32, own_group: u32) -> Target {
    match pid {
        p if p > 0 => Target::One(p as u32),
        0 => Target::Group(own_group),
        -1 => Target::All,
        p => Target::Group(p.unsigned_abs()),
    }
}

/// Whether a sender acting as (`uid`, `euid`) may signal a process whose ids are (`tuid`,
/// `teuid`): root may signal anyone; else a real or effective id must match the target's real
/// or saved id (proc keeps no saved id: the effective one stands for it), as Linux's
/// `kill_ok_by_cred`.
pub fn may_signal(uid: u32, euid: u32, tuid: u32, teuid: u32) -> bool {
    euid == 0 || uid == tuid || uid == teuid || euid == tuid || euid == teuid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_targets_and_permissions() {
        assert_eq!(target(5, 1), Target::One(5));
        assert_eq!(target(0, 7), Target::Group(7));
        assert_eq!(target(-1, 7), Target::All);
        assert_eq!(target(-9, 7), Target::Group(9));
        assert_eq!(target(i32::MIN, 7), Target::Group(1 << 31));
        assert!(may_signal(1000, 0, 5, 5));
        assert!(may_signal(1000, 1000, 1000, 1000));
        assert!(may_signal(1000, 1000, 0, 1000));
        assert!(!may_signal(1000, 1000, 0, 0));
    }

    #[test]
    fn pending_merges_standard_signals_and_queues_realtime() {
        let r = |sig| Record {
            sig,
            code: 0,
            pid: 1,
            uid: 0,
            status: 0,
        };
        let mut p = Pending::default();
        p.push(r(10));
        p.push(r(10));
        p.push(r(40));
        p.push(r(40));
        assert_eq!(p.take().map(|x| x.sig), Some(10));
        assert_eq!(p.take().map(|x| x.sig), Some(40));
        assert_eq!(p.take().map(|x| x.sig), Some(40));
        assert!(p.take().is_none());
        for _ in 0..1000 {
            p.push(r(50));
        }
        assert_eq!(p.queue.len(), MAX_PENDING);
    }

    #[test]
    fn exception_codes() {
        assert_eq!(code_for_exception(0), 1);
        assert_eq!(code_for_exception(6), 2);
        assert_eq!(code_for_exception(3), 0x80);
        assert!(addr_is_rip(0) && !addr_is_rip(13));
    }

    #[test]
    fn exceptions_map_like_linux() {
        assert_eq!(for_exception(0), SIGFPE);
        assert_eq!(for_exception(3), SIGTRAP);
        assert_eq!(for_exception(6), SIGILL);
        assert_eq!(for_exception(13), SIGSEGV);
        assert_eq!(for_exception(14), SIGSEGV);
        assert_eq!(for_exception(17), SIGBUS);
        assert_eq!(for_exception(19), SIGFPE);
        assert_eq!(for_exception(u64::MAX), SIGSEGV);
    }
}
