//! mem-hogwatch: asks mem-hog to fill memory and waits until mem has all of it back after the
//! hog exited.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_memtest::check;
use sawmill_rm as rm;
use sawmill_rt::{env, ipc, println, sys};

sawmill_rt::entry!(main);

fn main() {
    let mem = rm::mem().expect("mem");
    let hog = env::cap("hog").expect("hog");
    let r = ipc::call(hog, MsgTag::new(1, 0), [0; 4]);
    check!(
        r.err == 0 && r.tag.label() == 0 && r.w[1] == 200,
        "hog answered {} {} {}",
        r.err,
        r.tag.label(),
        r.w[1]
    );
    let free0 = r.w[0];
    let t0 = sys::kernel_info(sawmill_abi::kinfo::TICKS).unwrap_or(0);
    loop {
        let f = mem.stats().unwrap().free;
        if f == free0 {
            break;
        }
        let t = sys::kernel_info(sawmill_abi::kinfo::TICKS).unwrap_or(0);
        check!(
            t - t0 < 2000,
            "mem free stuck at {} (was {} before the hog)",
            f,
            free0
        );
        sys::yield_now();
    }
    println!(
        "mem-hogwatch: PASS the dead hog's 200 pages are back (mem free {})",
        free0
    );
}
