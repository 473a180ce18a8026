//! The trace of rejected system calls: with the boot flag `trace=rejected` on the kernel command
//! line, every system call that returns an error is logged with the call, the caller and the
//! reason (as seL4's `userError` does). Off by default: a refused call then costs nothing more
//! than its error code, and scenarios that make many bad calls stay quiet.
use crate::error::Rejection;
use crate::obj::Thread;
use crate::state::kernel;
use sawmill_abi::{Error, Sys};

/// The boot flag that turns the trace on.
pub const FLAG: &str = "trace=rejected";

/// Reads the kernel command line once at boot.
pub fn init(cmdline: &[u8]) {
    kernel().trace_rejected = sawmill_kcore::cmdline::has_word(cmdline, FLAG);
    if kernel().trace_rejected {
        crate::kprintln!("kernel: tracing rejected system calls");
    }
}

/// Logs a rejected call of thread `cur` (system-call number `n`) if the trace is on.
#[inline(always)]
pub fn rejected(cur: *mut Thread, n: u64, r: Rejection) {
    // A non-blocking IPC that finds no partner is a normal answer, not a refusal.
    if kernel().trace_rejected && r.err != Error::WouldBlock {
        log(cur, n, r);
    }
}

#[cold]
#[inline(never)]
fn log(cur: *mut Thread, n: u64, r: Rejection) {
    // SAFETY: the thread that made the call is live until the release queue drains, after this.
    let t = unsafe { &*cur };
    let task = if t.task.is_null() {
        u32::MAX
    } else {
        // SAFETY: a bound thread's task outlives the binding.
        unsafe { (*t.task).id }
    };
    let why = if r.why.is_empty() {
        r.err.name()
    } else {
        r.why
    };
    match Sys::try_from(n) {
        Ok(sys) => crate::kprintln!(
            "kernel: rejected {:?} from task {} thread {:#x} (rip {:#x}): {:?}, {}",
            sys,
            task,
            t.utcb_va,
            t.frame.rip,
            r.err,
            why
        ),
        Err(_) => crate::kprintln!(
            "kernel: rejected call #{} from task {} thread {:#x} (rip {:#x}): {:?}, {}",
            n,
            task,
            t.utcb_va,
            t.frame.rip,
            r.err,
            why
        ),
    }
}
