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
        // Slot 3 is root's fault endpoint (send-only): a call there is answered by root with an
        // error label, which is also not the broker.
        if slot == 3 {
            check!(r.err == 0 && r.tag.label() != 0, "root endpoint answered label {}", r.tag.label());
            continue;
        }
        check!(r.err == Error::BadCap as u64 || r.err == Error::WrongKind as u64, "slot {} gave err {}", slot, r.err);
        bad += 1;
    }
    println!("outsider: PASS {} slots refused without a capability", bad);
}
