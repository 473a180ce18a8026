//! mem-hang: a dataspace manager that never answers `map` (it hands out its dataspace, then
//! swallows every request without replying).
#![no_std]
#![no_main]
use sawmill_abi::{rights, MsgTag};
use sawmill_rt::{env, ipc, println, sys, thread, utcb};

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("hang").expect("hang endpoint");
    let dscap = thread::alloc_slot();
    sys::cap_mint(ep, dscap, 1 << 63, rights::SEND).expect("mint");
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err == 0 && m.badge == 0 && m.tag.label() == 0x100 {
            utcb().caps_out[0] = dscap;
            m = ipc::reply_recv(ep, MsgTag::new(0, 0).with_caps(1), [0; 4]);
            continue;
        }
        if m.err == 0 {
            println!(
                "mem-hang: got request {:#x}; never answering",
                m.tag.label()
            );
        }
        // Receive again without replying: the caller stays blocked.
        m = ipc::recv(ep, 0);
    }
}
