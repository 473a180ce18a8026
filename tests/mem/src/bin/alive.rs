//! mem-alive: while mem-hung waits forever on its manager, keeps using memory through mem.
#![no_std]
#![no_main]
use sawmill_memtest::check;
use sawmill_rm as rm;
use sawmill_rt::{println, sys, thread};

sawmill_rt::entry!(main);

fn main() {
    // Let the hung task get stuck first (it runs at a higher priority).
    for _ in 0..50 {
        sys::yield_now();
    }
    rm::init().expect("rm init");
    rm::init_heap(4 << 20).expect("heap");
    let mem = rm::mem().expect("mem");
    for round in 0..20u64 {
        let ds = mem.alloc(8 * 4096, 0, thread::alloc_slot()).expect("alloc");
        let a = rm::attach(ds, 0, 8 * 4096, None, rm::READ | rm::WRITE).unwrap();
        for i in 0..8 {
            // SAFETY: attached read-write.
            unsafe { core::ptr::write_volatile((a + i * 4096) as *mut u64, round + i) };
        }
        rm::detach(a).unwrap();
        sawmill_interfaces::dataspace::Client::new(ds)
            .free()
            .unwrap();
    }
    // The heap on the region manager: allocate well past what root mapped for us.
    let mut v: alloc::vec::Vec<u64> = alloc::vec::Vec::new();
    for i in 0..100_000u64 {
        v.push(i);
    }
    check!(
        v.iter().sum::<u64>() == 100_000 * 99_999 / 2,
        "heap contents"
    );
    println!("mem-alive: PASS 160 faults served and an 800 KiB heap vector while another task hangs on its manager");
}
extern crate alloc;
