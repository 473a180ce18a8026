//! Echo server: replies to each request with the sum of its words plus the caller's badge, and
//! logs which badges it saw, so a scenario can check that callers are told apart.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rt::{ipc, println};

sawmill_rt::entry!(main);

fn main() {
    let ep = sawmill_testprogs::endpoint("pong");
    let mut seen = [0u64; 8];
    // With argument `crash-after=N` the server dereferences NULL while serving request N.
    let crash_after: u64 = sawmill_testprogs::arg_value("crash-after")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    let mut served = 0u64;
    // With `work=N`, spin N iterations per request, so that callers queue behind each other.
    let work: u64 = sawmill_testprogs::arg_value("work")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
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
        served += 1;
        for k in 0..work {
            core::hint::black_box(k);
        }
        if served == crash_after {
            println!("pong: crashing while serving request {}", served);
            // SAFETY: deliberately faults: this server is meant to die here.
            unsafe { core::ptr::read_volatile(core::ptr::null::<u64>()) };
        }
        let sum = m.w[0].wrapping_add(m.w[1]).wrapping_add(m.badge);
        m = ipc::reply_recv(ep, MsgTag::new(0, 1), [sum, 0, 0, 0]);
    }
}
