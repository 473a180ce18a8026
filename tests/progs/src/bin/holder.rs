//! Scenario `nosenders`, a client of `test-watcher`: gets a copy of the watched capability and
//! uses it; `role=drop` copies and deletes its copies, `role=die` ends holding its copy.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rt::{env, ipc, println, sys, thread, utcb};
use sawmill_testprogs::{arg_value, check};

sawmill_rt::entry!(main);

const OP_GET: u16 = 1;
const OP_DROPPED: u16 = 2;
const OP_BYE: u16 = 3;
const OP_PING: u16 = 4;

fn main() {
    let ep = env::cap("watcher").expect("watcher endpoint");
    let name = env::name();
    let held = thread::alloc_slot();
    utcb().caps_in[0] = held;
    let r = ipc::call(ep, MsgTag::new(OP_GET, 0), [0; 4]);
    check!(
        r.err == 0 && r.tag.label() == 0 && r.tag.caps() == 1,
        "get: err {} label {} caps {}",
        r.err,
        r.tag.label(),
        r.tag.caps()
    );
    let p = ipc::call(held, MsgTag::new(OP_PING, 0), [0; 4]);
    check!(
        p.err == 0 && p.tag.label() == 0,
        "ping through the copy failed"
    );
    if arg_value("role") == Some("drop") {
        let copy = thread::alloc_slot();
        sys::cap_copy(held, copy).expect("copy");
        sys::cap_delete(held).expect("delete");
        sys::cap_delete(copy).expect("delete");
        let r = ipc::call(ep, MsgTag::new(OP_DROPPED, 0), [0; 4]);
        check!(r.err == 0 && r.tag.label() == 0, "dropped: {}", r.err);
        println!("{}: PASS dropped both copies", name);
    } else {
        loop {
            let r = ipc::call(ep, MsgTag::new(OP_BYE, 0), [0; 4]);
            check!(r.err == 0, "bye: {}", r.err);
            if r.tag.label() == 0 {
                break;
            }
            sys::yield_now();
        }
        println!("{}: PASS ending with the copy held", name);
    }
}
