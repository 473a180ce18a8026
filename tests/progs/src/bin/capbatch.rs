//! Capabilities placed and deleted many at a time (`task_cap_put` and `cap_delete` with a count:
//! the message words carry the pairs or slots). Checks that every pair lands where it says, that
//! a failing pair is reported by its index with those before it placed and none after, the
//! refusals (too many, an unknown flag, a task capability that is none), that a batched delete
//! passes over empty slots and, when asked, revokes what was derived first. Root then checks
//! every byte of kernel memory came back.
#![no_std]
#![no_main]
use sawmill_abi::{Error, ObjKind, Sys, CAP_DELETE_REVOKE, CAP_PUT_MAX};
use sawmill_rt::{println, slots, sys, thread};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

/// Whether our slot `s` is empty (a copy into it succeeds; the copy is deleted again).
fn empty(s: u64) -> bool {
    let ok = sys::cap_copy(slots::CONSOLE, s).is_ok();
    if ok {
        let _ = sys::cap_delete(s);
    }
    ok
}

/// Whether slot `dst` of `task` holds a capability (a put into it is refused as full).
fn held(task: u64, dst: u64) -> bool {
    sys::task_cap_put(task, slots::CONSOLE, dst) == Err(Error::SlotFull)
}

fn main() {
    let task = thread::alloc_slot();
    sys::factory_create(slots::FACTORY, ObjKind::Task, task, 64).expect("the task");
    let note = thread::alloc_slot();
    sys::factory_create(slots::FACTORY, ObjKind::Notification, note, 0).expect("a notification");

    // Every pair of one call lands in its slot.
    let pairs = [(note, 10), (slots::CONSOLE, 11), (note, 12)];
    check!(
        sys::task_cap_put_many(task, &pairs).is_ok(),
        "three pairs were refused"
    );
    check!(
        [10, 11, 12].iter().all(|&d| held(task, d)) && !held(task, 13),
        "the pairs did not land where they said"
    );
    println!("capbatch: PASS every pair of one put lands in its slot");

    // A failing pair: its index, those before it placed, none after.
    let gone = thread::alloc_slot();
    let pairs = [(note, 20), (gone, 21), (note, 22)];
    check!(
        sys::task_cap_put_many(task, &pairs) == Err((1, Error::BadCap)),
        "an empty source was not reported as the second pair"
    );
    check!(
        held(task, 20) && !held(task, 21) && !held(task, 22),
        "pairs around a failing one were placed wrongly"
    );
    check!(
        sys::task_cap_put_many(task, &[(note, 23), (note, 20)]) == Err((1, Error::SlotFull)),
        "a full destination was not reported as the second pair"
    );
    println!("capbatch: PASS a failing pair is named by its index, those before it stay");

    // Refusals of no pair: rdi says so, and nothing is placed.
    let mr = &mut sawmill_rt::utcb().mr;
    for (i, w) in mr.iter_mut().enumerate().take(CAP_PUT_MAX + 1) {
        *w = note | (30 + i as u64) << 32;
    }
    let (r, at, _) = sys::raw(Sys::TaskCapPut, [task, 0, 0, CAP_PUT_MAX as u64 + 1, 0, 0]);
    check!(
        r == Error::Invalid as u64 && at == u64::MAX && !held(task, 30),
        "a put of too many pairs was not refused whole"
    );
    let (r, at, _) = sys::raw(Sys::TaskCapPut, [note, 0, 0, 1, 0, 0]);
    check!(
        r == Error::WrongKind as u64 && at == u64::MAX,
        "a put into a notification was not refused as no pair's"
    );
    println!("capbatch: PASS a put of too many pairs or into no task is refused whole");

    // A batched delete passes over empty slots and counts what it deleted.
    let copies = [
        thread::alloc_slot(),
        thread::alloc_slot(),
        thread::alloc_slot(),
    ];
    for &c in &copies {
        sys::cap_copy(note, c).expect("a copy");
    }
    let with_empty = [copies[0], gone, copies[1], copies[2]];
    check!(
        sys::cap_delete_many(&with_empty, false) == Ok(3),
        "three copies and an empty slot did not count three"
    );
    check!(
        copies.iter().all(|&c| empty(c)),
        "a listed slot kept its capability"
    );
    check!(!empty(note), "an unlisted slot lost its capability");
    println!("capbatch: PASS a batched delete passes over empty slots");

    // With CAP_DELETE_REVOKE what was derived from a listed slot goes too; without, it stays.
    let (parent, child, other, other_child) = (
        thread::alloc_slot(),
        thread::alloc_slot(),
        thread::alloc_slot(),
        thread::alloc_slot(),
    );
    sys::cap_copy(note, parent).expect("a parent");
    sys::cap_copy(parent, child).expect("its child");
    sys::cap_copy(note, other).expect("another parent");
    sys::cap_copy(other, other_child).expect("its child");
    check!(
        sys::cap_delete_many(&[parent], true) == Ok(1) && empty(parent) && empty(child),
        "a revoking delete left what was derived"
    );
    check!(
        sys::cap_delete_many(&[other], false) == Ok(1) && empty(other) && !empty(other_child),
        "a plain delete took what was derived"
    );
    let _ = sys::cap_delete(other_child);
    println!("capbatch: PASS a revoking delete takes what was derived, a plain one does not");

    // Refusals: too many slots, an unknown flag; nothing is deleted.
    let keep = thread::alloc_slot();
    sys::cap_copy(note, keep).expect("a copy to keep");
    let mr = &mut sawmill_rt::utcb().mr;
    for w in mr.iter_mut().take(CAP_PUT_MAX + 1) {
        *w = keep;
    }
    let (r, _, _) = sys::raw(Sys::CapDelete, [0, CAP_PUT_MAX as u64 + 1, 0, 0, 0, 0]);
    check!(
        r == Error::Invalid as u64 && !empty(keep),
        "a delete of too many slots was not refused"
    );
    let (r, _, _) = sys::raw(Sys::CapDelete, [0, 1, CAP_DELETE_REVOKE << 1, 0, 0, 0]);
    check!(
        r == Error::Invalid as u64 && !empty(keep),
        "a delete with an unknown flag was not refused"
    );
    println!("capbatch: PASS a delete of too many slots or with an unknown flag is refused whole");

    let _ = sys::cap_delete_many(&[keep, note, task], false);
    println!("capbatch: PASS capabilities placed and deleted many at a time");
}
