//! mem-hog: on request, fills 200 pages through its region manager, answers, and exits without
//! freeing anything: root tells mem, which must take every page back.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rm as rm;
use sawmill_rt::{env, ipc, println, thread};

sawmill_rt::entry!(main);

fn main() {
    rm::init().expect("rm init");
    let mem = rm::mem().expect("mem");
    let ep = env::cap("hog").expect("hog endpoint");
    let m = ipc::recv(ep, 0);
    let free0 = mem.stats().unwrap().free;
    let mut held = 0;
    for _ in 0..4 {
        let ds = mem
            .alloc(50 * 4096, 0, thread::alloc_slot())
            .expect("alloc");
        let a = rm::attach(ds, 0, 50 * 4096, None, rm::READ | rm::WRITE).unwrap();
        for i in 0..50 {
            // SAFETY: attached read-write.
            unsafe { core::ptr::write_volatile((a + i * 4096) as *mut u64, i) };
            held += 1;
        }
    }
    let free1 = mem.stats().unwrap().free;
    println!(
        "mem-hog: holding {} pages (mem free {} -> {}); exiting without freeing",
        held, free0, free1
    );
    let _ = m;
    // Reply, then (non-blocking, so at once) fall through to exit.
    let _ = ipc::reply_recv(ep, MsgTag::new(0, 2).nonblocking(), [free0, held, 0, 0]);
}
