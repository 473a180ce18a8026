//! Timed notification waits (`notify_wait` with `NOTIFY_DEADLINE`): a wait with no signal ends
//! with WouldBlock no earlier than its deadline (and not much later: a tick); a deadline already
//! past answers at once; a signal before the deadline ends the wait with its bits; a thread
//! blocked with a deadline on a notification that is destroyed is woken (PeerGone) and its
//! timer is gone with it (the kernel survives its old deadline); a badged capability signals
//! only its badge's bits and cannot wait; unknown flags are refused.
#![no_std]
#![no_main]
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::{Error, ObjKind, NOTIFY_DEADLINE};
use sawmill_rt::{clock::Wall, println, sys, thread};

sawmill_rt::entry!(main);

fn fail(what: &str) -> ! {
    println!("timedwait: FAIL {}", what);
    sawmill_rt::exit(1)
}

fn main() {
    let khz = Wall::get().khz;
    let ms = move |n: u64| n * khz;
    let n = thread::create(ObjKind::Notification, 0).unwrap_or_else(|_| fail("notification"));

    // Nothing comes: WouldBlock at the deadline, not before, and within a few ticks after.
    let t0 = sys::rdtsc();
    match sys::notify_wait_until(n, t0 + ms(50)) {
        Err(Error::WouldBlock) => {}
        Ok(_) => fail("a 50 ms wait returned bits"),
        Err(_) => fail("a 50 ms wait: wrong error"),
    }
    let took = sys::rdtsc() - t0;
    if took < ms(50) || took > ms(2_000) {
        println!("timedwait: FAIL 50 ms wait took {} ms", took / khz);
        sawmill_rt::exit(1);
    }
    println!("timedwait: a 50 ms wait ended after {} ms", took / khz);

    // A deadline already past: at once.
    if sys::notify_wait_until(n, t0) != Err(Error::WouldBlock) {
        fail("past deadline");
    }

    // A signal before the deadline: its bits, long before the deadline.
    let t1 = sys::rdtsc();
    thread::spawn(60, 16 * 1024, move || {
        let _ = sys::notify_signal(n, 0x5);
        loop {
            sys::yield_now();
        }
    })
    .unwrap_or_else(|_| fail("spawn"));
    match sys::notify_wait_until(n, t1 + ms(10_000)) {
        Ok(0x5) => {}
        _ => fail("signal before the deadline"),
    }
    if sys::rdtsc() - t1 > ms(5_000) {
        fail("signalled wait waited for its deadline");
    }
    println!("timedwait: a signal ends the wait with its bits");

    // A waiter with a deadline whose notification is destroyed: woken with PeerGone; its old
    // deadline passes without the kernel touching it.
    let doomed = thread::create(ObjKind::Notification, 0).unwrap_or_else(|_| fail("n3"));
    static GONE: AtomicU64 = AtomicU64::new(0);
    thread::spawn(60, 16 * 1024, move || {
        let r = sys::notify_wait_until(doomed, sys::rdtsc() + ms(100));
        GONE.store(
            if r == Err(Error::PeerGone) { 1 } else { 2 },
            Ordering::Release,
        );
        loop {
            sys::yield_now();
        }
    })
    .unwrap_or_else(|_| fail("spawn"));
    let t2 = sys::rdtsc();
    while sys::rdtsc() - t2 < ms(20) {
        sys::yield_now();
    }
    let _ = sys::cap_delete(doomed);
    while GONE.load(Ordering::Acquire) == 0 {
        sys::yield_now();
    }
    if GONE.load(Ordering::Acquire) != 1 {
        fail("waiter of a destroyed notification");
    }
    // Past the old deadline (the tick that would have expired it).
    let _ = sys::notify_wait_until(n, sys::rdtsc() + ms(200));
    println!("timedwait: a destroyed notification's timed waiter is woken, its timer gone");

    // A badged (minted) capability signals only its badge's bits; it cannot wait.
    let badged = thread::alloc_slot();
    sys::cap_mint(n, badged, 0x4, sawmill_abi::rights::SEND).unwrap_or_else(|_| fail("mint"));
    if sys::notify_signal(badged, 0x7).is_err() {
        fail("signal through a badged capability");
    }
    if sys::notify_wait(n, sawmill_abi::NOTIFY_NONBLOCK) != Ok(0x4) {
        fail("a badged capability signalled bits outside its badge");
    }
    if sys::notify_wait(badged, sawmill_abi::NOTIFY_NONBLOCK) != Err(Error::NoRights) {
        fail("a signal-only capability could wait");
    }
    let _ = sys::cap_delete(badged);
    println!("timedwait: a badged capability signals only its badge's bits");

    let (r, _, _) = sys::raw(
        sawmill_abi::Sys::NotifyWait,
        [n, NOTIFY_DEADLINE | 0x100, 0, 0, 0, 0],
    );
    if r != Error::Invalid as u64 {
        fail("unknown flag accepted");
    }
    println!("timedwait: PASS");
}
