//! Echo server: replies to each request with the sum of its words plus the caller's badge, and
//! logs which badges it saw, so a scenario can check that callers are told apart.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rt::{env, ipc, println};

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("pong").expect("pong endpoint");
    let mut seen = [0u64; 8];
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        let b = m.badge as usize;
        if b < 8 && seen[b] == 0 {
            println!("pong: first call from badge {}", b);
        }
        if b < 8 {
            seen[b] += 1;
        }
        let sum = m.w[0].wrapping_add(m.w[1]).wrapping_add(m.badge);
        m = ipc::reply_recv(ep, MsgTag::new(0, 1), [sum, 0, 0, 0]);
    }
}
