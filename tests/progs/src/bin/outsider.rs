//! Scenario 2, a task that was given nothing: every slot it tries to call through is empty or
//! not an endpoint, and each attempt returns an error at once.
#![no_std]
#![no_main]
use sawmill_abi::{Error, MsgTag};
use sawmill_rt::{ipc, println};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn main() {
    let mut bad = 0;
    for slot in 0..2048u64 {
        let r = ipc::call(slot, MsgTag::new(1, 0), [0; 4]);
        // The only endpoints we hold are root's fault endpoints (sys:pager, sys:thread-handler,
        // send-only): root answers a request there with its "unknown request" label 0xffff.
        // Anything else that answers would be a capability we were never given.
        if r.err == 0 {
            check!(
                r.tag.label() == 0xffff,
                "slot {} reached a server (label {})",
                slot,
                r.tag.label()
            );
            continue;
        }
        check!(
            r.err == Error::BadCap as u64 || r.err == Error::WrongKind as u64,
            "slot {} gave err {}",
            slot,
            r.err
        );
        bad += 1;
    }
    println!("outsider: PASS {} slots refused without a capability", bad);
}
