//! Scenario 3, the paged task: touches memory nobody mapped; its pager (another task) maps it.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rt::{env, ipc, println};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

const REGION: u64 = 0x5000_0000;

fn main() {
    let ctl = env::cap("pager").expect("pager control endpoint");
    for p in 0..16u64 {
        let a = REGION + p * 4096;
        for i in [0u64, 1, 511] {
            // SAFETY: the access faults and our pager maps the page; that is the test.
            let v = unsafe { core::ptr::read_volatile((a + i * 8) as *const u64) };
            check!(v == a + i * 8, "page {} word {}: {:#x}", p, i, v);
        }
        // SAFETY: as above; the pager mapped it writable.
        unsafe { core::ptr::write_volatile(a as *mut u64, 0xfeed) };
    }
    println!("paged: PASS 16 pages served by a user-level pager");
    // The pager revokes page 0 (its heap page index 0): our next access faults again and gets
    // a fresh page with the pattern, so our write is gone.
    let r = ipc::call(ctl, MsgTag::new(7, 1), [0, 0, 0, 0]);
    check!(
        r.err == 0 && r.tag.label() == 0,
        "revoke request: {} {}",
        r.err,
        r.tag.label()
    );
    // SAFETY: as above.
    let v = unsafe { core::ptr::read_volatile(REGION as *const u64) };
    check!(v == REGION, "after revoke the page still held {:#x}", v);
    println!("paged: PASS unmap revoked the mapping in this task");
}
