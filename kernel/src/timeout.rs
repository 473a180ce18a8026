//! Timed waits: the threads blocked with a deadline (a TSC value), in `kcore`'s intrusive timer
//! queue whose links live in the thread objects. Arming and disarming allocate nothing. The
//! timer interrupt takes out the waiters whose time has come ([`pop_expired`]); what waking
//! them means belongs to the object they wait on (`notification::expire`).
use crate::obj::Thread;
use crate::state::kernel;
use sawmill_kcore::timers::{Links, TimerStore};

/// The queue's view of the thread objects.
struct Threads;

impl TimerStore for Threads {
    type Id = *mut Thread;
    fn deadline(&self, t: *mut Thread) -> u64 {
        // SAFETY: only live threads are queued (every way a thread stops waiting disarms it).
        unsafe { (*t).deadline }
    }
    fn links(&self, t: *mut Thread) -> Option<Links<*mut Thread>> {
        // SAFETY: as above.
        unsafe { (*t).timer }
    }
    fn set_links(&mut self, t: *mut Thread, l: Option<Links<*mut Thread>>) {
        // SAFETY: as above.
        unsafe { (*t).timer = l }
    }
}

/// Queues `t` to be woken at TSC value `deadline`.
pub fn arm(t: *mut Thread, deadline: u64) {
    disarm(t);
    // SAFETY: live thread.
    unsafe { (*t).deadline = deadline };
    kernel().timeouts.insert(&mut Threads, t);
}

/// Takes `t` out of the queue if it is in it (its wait ended another way, or it dies).
pub fn disarm(t: *mut Thread) {
    // SAFETY: live thread.
    if unsafe { (*t).timer.is_none() } {
        return;
    }
    kernel().timeouts.remove(&mut Threads, t);
}

/// The next thread whose deadline is at or before `now`, taken out of the queue.
pub fn pop_expired(now: u64) -> Option<*mut Thread> {
    kernel().timeouts.pop_expired(&mut Threads, now)
}
