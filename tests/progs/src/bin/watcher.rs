//! Scenario `nosenders`, the server: mints a watched badge, hands copies to two clients (one
//! drops its copies, the other ends holding its copy) and checks that exactly one NO_SENDERS
//! notice arrives, only after the last copy is gone. Before that it checks the refusals of a
//! watched mint (no endpoint, a notice endpoint without SEND, no badge, unknown flags, its own
//! quota exhausted), and that notices whose endpoint goes away cost nothing afterwards.
#![no_std]
#![no_main]
use sawmill_abi::{label, rights, Error, MsgTag, ObjKind, Sys};
use sawmill_rt::{env, ipc, println, slots, sys, thread, utcb};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

/// Requests of the holders (`test-holder`).
const OP_GET: u16 = 1;
const OP_DROPPED: u16 = 2;
const OP_BYE: u16 = 3;
const OP_PING: u16 = 4;
/// The watched badge and the badge notices arrive with.
const WATCHED: u64 = 0x77;
const NOTICE_BADGE: u64 = 0x5e4d;

/// Fails unless no message waits on `ep`.
fn no_notice(ep: u64, when: &str) {
    let r = ipc::recv(ep, MsgTag::NONBLOCK);
    check!(
        r.err == Error::WouldBlock as u64,
        "a message waited {}: err {} label {:#x} word {:#x}",
        when,
        r.err,
        r.tag.label(),
        r.w[0]
    );
}

/// Fails unless `r` is the notice for `badge`, arriving with the notice capability's badge `by`.
fn is_notice(r: &ipc::IpcResult, badge: u64, by: u64) {
    check!(
        r.err == 0 && r.tag.label() == label::NO_SENDERS && r.badge == by && r.w[0] == badge,
        "expected the notice for {:#x}: err {} label {:#x} badge {:#x} word {:#x}",
        badge,
        r.err,
        r.tag.label(),
        r.badge,
        r.w[0]
    );
}

fn used() -> u64 {
    sys::factory_info(slots::FACTORY).expect("factory info").0
}

fn refuses(what: &str, r: Result<(), Error>, want: Error, dst: u64) {
    check!(r == Err(want), "{}: got {:?}, want {:?}", what, r, want);
    check!(
        sys::cap_delete(dst) == Err(Error::BadCap),
        "{}: a capability was placed anyway",
        what
    );
}

fn bad_input(ep: u64, notice: u64) {
    let before = used();
    let dst = thread::alloc_slot();
    let notif = thread::create(ObjKind::Notification, 0).expect("notification");
    let recv_only = thread::alloc_slot();
    sys::cap_mint(notice, recv_only, 0, rights::RECV).expect("RECV-only copy");
    let empty = thread::alloc_slot();
    let all = rights::ALL;
    refuses(
        "watch on a task",
        sys::cap_mint_watched(slots::TASK, dst, 1, all, notice),
        Error::WrongKind,
        dst,
    );
    refuses(
        "watch on a notification",
        sys::cap_mint_watched(notif, dst, 1, all, notice),
        Error::WrongKind,
        dst,
    );
    refuses(
        "notice endpoint without SEND",
        sys::cap_mint_watched(ep, dst, 1, all, recv_only),
        Error::NoRights,
        dst,
    );
    refuses(
        "notice to a notification",
        sys::cap_mint_watched(ep, dst, 1, all, notif),
        Error::WrongKind,
        dst,
    );
    refuses(
        "notice to an empty slot",
        sys::cap_mint_watched(ep, dst, 1, all, empty),
        Error::BadCap,
        dst,
    );
    refuses(
        "watched mint without a badge",
        sys::cap_mint_watched(ep, dst, 0, all, notice),
        Error::Invalid,
        dst,
    );
    refuses(
        "watched mint of a badged capability",
        sys::cap_mint_watched(notice, dst, 1, all, notice),
        Error::Invalid,
        dst,
    );
    let (rax, _, _) = sys::raw(Sys::CapMint, [ep, dst, 1, all, 1 << 5, notice]);
    check!(rax == Error::Invalid as u64, "unknown mint flag: {}", rax);
    sys::cap_delete(notif).expect("delete");
    sys::cap_delete(recv_only).expect("delete");
    check!(
        used() == before,
        "refusals changed the quota: {} -> {}",
        before,
        used()
    );
    println!("watcher: PASS bad watched mints refused, nothing kept");
}

/// Fills the own quota but a few bytes, then mints watched badges until refused; every watch
/// comes back when its capabilities and its notices are gone.
fn quota(ep: u64) {
    let before = used();
    let notices = thread::create(ObjKind::Endpoint, 0).expect("endpoint");
    let (used0, limit) = sys::factory_info(slots::FACTORY).unwrap();
    let filler = thread::alloc_slot();
    sys::factory_create(
        slots::FACTORY,
        ObjKind::Factory,
        filler,
        limit - used0 - 256,
    )
    .expect("filler factory");
    let first = thread::alloc_slot();
    let mut n = 0;
    let err = loop {
        let s = first + n;
        match sys::cap_mint_watched(ep, s, 0x1000 + n, rights::SEND, notices) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        // Slots are not reused; keep clear of the next allocation.
        if n > 8 {
            break Error::Ok;
        }
        thread::alloc_slot();
    };
    check!(
        err == Error::NoMemory && n >= 1,
        "watched mints ended with {:?} after {}",
        err,
        n
    );
    check!(
        sys::cap_delete(first + n) == Err(Error::BadCap),
        "a refused watched mint placed a capability"
    );
    sys::cap_delete(filler).expect("delete filler");
    for i in 0..n {
        sys::cap_delete(first + i).expect("delete watched");
    }
    // One notice per badge, in order; the rest are dropped with their endpoint.
    for i in 0..n.min(2) {
        is_notice(&ipc::recv(notices, MsgTag::NONBLOCK), 0x1000 + i, 0);
    }
    // A watch whose notice endpoint is destroyed first: nothing to send to, nothing kept.
    let orphan_to = thread::create(ObjKind::Endpoint, 0).expect("endpoint");
    let orphan = thread::alloc_slot();
    sys::cap_mint_watched(ep, orphan, 0x2000, rights::SEND, orphan_to).expect("mint");
    sys::cap_delete(orphan_to).expect("delete endpoint");
    sys::cap_delete(orphan).expect("delete watched");
    sys::cap_delete(notices).expect("delete notices");
    check!(
        used() == before,
        "quota not returned: {} before, {} after",
        before,
        used()
    );
    println!(
        "watcher: PASS quota refused the watched mint after {} (NoMemory), all returned",
        n
    );
}

fn main() {
    let ep = env::cap("watcher").expect("watcher endpoint");
    let notices = thread::create(ObjKind::Endpoint, 0).expect("notice endpoint");
    let notice = thread::alloc_slot();
    sys::cap_mint(notices, notice, NOTICE_BADGE, rights::SEND).expect("notice capability");
    bad_input(ep, notice);
    quota(ep);

    let w = thread::alloc_slot();
    sys::cap_mint_watched(ep, w, WATCHED, rights::SEND, notice).expect("watched mint");
    let (mut handed, mut dropped) = (0, false);
    let mut m = ipc::recv(ep, 0);
    loop {
        let ok = MsgTag::new(0, 0);
        let tag = match m.tag.label() {
            OP_GET if handed < 2 => {
                handed += 1;
                utcb().caps_out[0] = w;
                ok.with_caps(1)
            }
            OP_PING if m.badge == WATCHED => ok,
            OP_DROPPED => {
                no_notice(notices, "after one holder dropped its copies");
                dropped = true;
                ok
            }
            OP_BYE if dropped && handed == 2 => break,
            OP_BYE => MsgTag::new(1, 0),
            _ => MsgTag::new(0xfff, 0),
        };
        m = ipc::reply_recv(ep, tag, [0; 4]);
    }
    // The last holder waits for our answer: drop our copy, see no notice, then let it end.
    sys::cap_delete(w).expect("delete own copy");
    no_notice(notices, "while the second holder lives");
    println!("watcher: PASS no notice while a holder remains");
    let r = ipc::reply_recv(notices, MsgTag::new(0, 0), [0; 4]);
    is_notice(&r, WATCHED, NOTICE_BADGE);
    no_notice(notices, "after the notice");
    println!("watcher: PASS exactly one notice after the last holder ended");
}
