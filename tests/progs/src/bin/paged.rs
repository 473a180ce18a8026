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
    // The pager lowers page 1 (its heap page index 1) to read-only: a read still finds our
    // write there (the mapping stayed; a fault would have brought a fresh pattern page), and a
    // write faults (the pager then maps a fresh pattern page, which the write lands on).
    let a = REGION + 4096;
    // SAFETY: page 1 is mapped writable; a mark that only the old page holds.
    unsafe { core::ptr::write_volatile((a + 16) as *mut u64, 0x1234) };
    let r = ipc::call(ctl, MsgTag::new(8, 1), [1, 0, 0, 0]);
    check!(
        r.err == 0 && r.tag.label() == 0,
        "write-protect request: {} {}",
        r.err,
        r.tag.label()
    );
    // SAFETY: page 1 is mapped (read-only now).
    let v = unsafe { core::ptr::read_volatile(a as *const u64) };
    check!(v == 0xfeed, "after write-protect the page held {:#x}", v);
    // SAFETY: the write faults and our pager maps a page again; that is the test.
    unsafe { core::ptr::write_volatile(a as *mut u64, 0xbeef) };
    // SAFETY: as above.
    let (v0, v2) = unsafe {
        (
            core::ptr::read_volatile(a as *const u64),
            core::ptr::read_volatile((a + 16) as *const u64),
        )
    };
    check!(
        v0 == 0xbeef && v2 == a + 16,
        "after the write: {:#x} {:#x} (the old page's mark: no fault)",
        v0,
        v2
    );
    println!("paged: PASS write-protect kept the mapping for reads and a write faulted");
}
