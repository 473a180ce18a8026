//! Scenario 8: creates kernel objects in a loop until its factory's quota refuses, then frees
//! them and checks the quota (and the kernel's free memory) came back.
#![no_std]
#![no_main]
use sawmill_abi::{kinfo, Error, ObjKind};
use sawmill_rt::{println, slots, sys, thread};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn main() {
    let (used0, limit) = sys::factory_info(slots::FACTORY).expect("factory info");
    let k0 = sys::kernel_info(kinfo::KMEM_FREE).unwrap();
    let first = thread::alloc_slot();
    let mut n = 0u64;
    let err = loop {
        let s = first + n;
        let kind = match n % 3 {
            0 => ObjKind::Endpoint,
            1 => ObjKind::Notification,
            _ => ObjKind::Thread,
        };
        match sys::factory_create(slots::FACTORY, kind, s, 0) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        if n > 100_000 {
            break Error::Ok;
        }
    };
    check!(
        err == Error::NoMemory,
        "loop ended with {:?} after {} objects",
        err,
        n
    );
    let (used1, _) = sys::factory_info(slots::FACTORY).unwrap();
    println!(
        "quota: PASS refused after {} objects ({} of {} bytes used)",
        n, used1, limit
    );
    for i in 0..n {
        sys::cap_delete(first + i).expect("delete");
    }
    let (used2, _) = sys::factory_info(slots::FACTORY).unwrap();
    let k2 = sys::kernel_info(kinfo::KMEM_FREE).unwrap();
    check!(
        used2 == used0,
        "quota not returned: {} used before, {} after",
        used0,
        used2
    );
    check!(
        k2 == k0,
        "kernel memory not returned: {} free before, {} after",
        k0,
        k2
    );
    // And it can create again.
    sys::factory_create(slots::FACTORY, ObjKind::Endpoint, first, 0).expect("create after free");
    println!("quota: PASS deleting the objects returned the quota and the kernel memory");
}
