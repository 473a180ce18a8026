//! Notifications: a word of signal bits and at most one waiter. Interrupts arrive as signals.
//! A wait may carry a deadline (`NOTIFY_DEADLINE`): the timer interrupt ends it with
//! `WouldBlock` if no bit came by then ([`expire`]).
use crate::error::SysResult;
use crate::factory::{charge, hdr};
use crate::obj::{Notification, State, Thread};
use crate::sched;
use crate::state::kernel;
use crate::timeout;
use alloc::boxed::Box;
use sawmill_abi::{Error, NOTIFY_DEADLINE, NOTIFY_NONBLOCK};

pub fn new_notification(f: *mut crate::obj::Factory) -> Result<*mut Notification, Error> {
    let size = core::mem::size_of::<Notification>() as u64;
    charge(f, size)?;
    Ok(Box::into_raw(Box::new(Notification {
        hdr: hdr(f, size),
        bits: 0,
        waiter: core::ptr::null_mut(),
        interrupt: core::ptr::null_mut(),
    })))
}

/// Signals a notification, waking its waiter.
pub fn signal(n: *mut Notification, bits: u64) {
    // SAFETY: live notification (held by a capability or an IRQ binding).
    let n = unsafe { &mut *n };
    n.bits |= bits;
    let w = n.waiter;
    if !w.is_null() && n.bits != 0 {
        n.waiter = core::ptr::null_mut();
        // SAFETY: the waiter is live (kill clears the binding).
        let wt = unsafe { &mut *w };
        wt.notif = core::ptr::null_mut();
        wt.frame.rdi = n.bits;
        n.bits = 0;
        timeout::disarm(w);
        sched::wake_with(w, 0);
    }
}

/// `notify_wait`: takes the pending bits into `rdi`, or blocks `cur` until a signal (with
/// `NOTIFY_DEADLINE`, at most until the TSC reads `deadline`: then `WouldBlock`).
pub fn wait(cur: *mut Thread, np: *mut Notification, flags: u64, deadline: u64) -> SysResult {
    // SAFETY: live notification (the caller holds a capability) and current thread.
    let (n, t) = unsafe { (&mut *np, &mut *cur) };
    if n.bits != 0 {
        t.frame.rdi = n.bits;
        n.bits = 0;
        return Ok(());
    }
    if flags & !(NOTIFY_NONBLOCK | NOTIFY_DEADLINE) != 0 {
        return Err(reject!(Error::Invalid, "unknown notify_wait flag"));
    }
    let timed = flags & NOTIFY_DEADLINE != 0;
    if flags & NOTIFY_NONBLOCK != 0 || (timed && crate::clock::rdtsc() >= deadline) {
        return Err(Error::WouldBlock.into());
    }
    if !n.waiter.is_null() {
        return Err(reject!(
            Error::Busy,
            "another thread waits on the notification",
        ));
    }
    n.waiter = cur;
    t.notif = np;
    t.state = State::Notify;
    if timed {
        timeout::arm(cur, deadline);
    }
    Ok(())
}

/// On a timer tick: ends the timed waits whose deadline has passed with `WouldBlock`.
pub fn expire() {
    if kernel().timeouts.is_empty() {
        return;
    }
    let now = crate::clock::rdtsc();
    while let Some(t) = timeout::pop_expired(now) {
        // SAFETY: queued threads are live and waiting (see timeout).
        let th = unsafe { &mut *t };
        if th.state == State::Notify && !th.notif.is_null() {
            // SAFETY: a waiting thread's notification is live.
            unsafe { (*th.notif).waiter = core::ptr::null_mut() };
            th.notif = core::ptr::null_mut();
            sched::wake_with(t, Error::WouldBlock as u64);
        }
    }
}

/// The foreign thread a signal of `n` interrupts (`thread_interrupt`), if any.
pub fn interrupt_target(n: *mut Notification) -> Option<*mut Thread> {
    // SAFETY: live notification.
    let t = unsafe { (*n).interrupt };
    (!t.is_null()).then_some(t)
}

/// A notification is destroyed: its waiter learns so, IRQ lines bound to it are unbound, a
/// thread it would interrupt is unbound.
pub fn gone(p: *mut Notification) {
    // SAFETY: p is being destroyed; a bound thread is live.
    unsafe {
        let t = (*p).interrupt;
        if !t.is_null() {
            (*t).interrupt = None;
            (*p).interrupt = core::ptr::null_mut();
        }
    }
    // SAFETY: p is being destroyed; its waiter is live.
    let w = unsafe { (*p).waiter };
    if !w.is_null() {
        // SAFETY: as above.
        unsafe { (*w).notif = core::ptr::null_mut() };
        timeout::disarm(w);
        sched::wake_with(w, Error::PeerGone as u64);
    }
    for l in kernel().irqs.iter_mut() {
        if l.notif == p {
            l.notif = core::ptr::null_mut();
        }
    }
}
