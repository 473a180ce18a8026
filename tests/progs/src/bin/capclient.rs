//! Scenario 2, the client: asks the broker for a vault capability, uses it, and checks that it
//! stops working once the broker revokes it (an error, not a hang).
#![no_std]
#![no_main]
use sawmill_abi::{Error, MsgTag};
use sawmill_rt::{env, ipc, println, thread, utcb};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn main() {
    let broker = env::cap("broker").expect("broker endpoint");
    let slot = thread::alloc_slot();
    utcb().caps_in[0] = slot;
    let r = ipc::call(broker, MsgTag::new(1, 0), [0; 4]);
    check!(
        r.err == 0 && r.tag.label() == 0,
        "get capability: err {} label {}",
        r.err,
        r.tag.label()
    );
    check!(
        r.tag.caps() == 1,
        "expected one capability item, got {}",
        r.tag.caps()
    );
    let v = ipc::call(slot, MsgTag::new(0, 0), [0; 4]);
    check!(
        v.err == 0 && v.w[0] == 0x05ec_12e7 + 101,
        "vault answered err {} value {:#x}",
        v.err,
        v.w[0]
    );
    println!("capclient: PASS received capability works (vault saw badge 101)");
    let r = ipc::call(broker, MsgTag::new(2, 0), [0; 4]);
    check!(r.err == 0 && r.tag.label() == 0, "revoke request failed");
    let v = ipc::call(slot, MsgTag::new(0, 0), [0; 4]);
    check!(
        v.err == Error::BadCap as u64,
        "after revoke the call gave err {} (want BadCap)",
        v.err
    );
    println!("capclient: PASS revoked capability gives BadCap");
}
