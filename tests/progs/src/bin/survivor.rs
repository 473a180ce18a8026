//! Scenario 4: keeps working (IPC with pong) while other tasks fault, and checks every answer.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rt::{env, ipc, println, sys};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("pong").expect("pong endpoint");
    // The faulters have higher priority and run first; yield a while so all of them are done.
    for _ in 0..50 {
        sys::yield_now();
    }
    for i in 0..2000u64 {
        let r = ipc::call(ep, MsgTag::new(1, 2), [i, i, 0, 0]);
        check!(
            r.err == 0 && r.w[0] == 2 * i + 5,
            "call {}: err {} value {}",
            i,
            r.err,
            r.w[0]
        );
    }
    println!("survivor: PASS 2000 calls while other tasks faulted");
}
