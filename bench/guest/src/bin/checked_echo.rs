//! The `add` server hand-written in Rust with the checks the IDL-generated dispatch makes: a
//! failed receive is not answered, a wrong opcode or message shape gets an error reply, and the
//! reply clears the words it does not use (no server state reaches the client). The reference
//! for "generated stubs are no worse than writing the same by hand" (`ipc.null_rpc.checked`).
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_benchprogs::REP;
use sawmill_interfaces::rpc::{proto, SHAPE_NOLABEL};
use sawmill_rt::{env, ipc};

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("echo-checked").expect("echo-checked endpoint");
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        m = if m.tag.label() != 1 {
            ipc::reply_recv(ep, MsgTag::new(proto::BAD_OPCODE, 0), [0; 4])
        } else if m.tag.0 & SHAPE_NOLABEL != 2 << 16 {
            ipc::reply_recv(ep, MsgTag::new(proto::BAD_SHAPE, 0), [0; 4])
        } else {
            ipc::reply_recv(ep, MsgTag(REP), [m.w[0].wrapping_add(m.w[1]), 0, 0, 0])
        };
    }
}
