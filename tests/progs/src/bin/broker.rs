//! Scenario 2, the server: hands each caller a badged capability to a second endpoint ("the
//! vault") served by its own thread, and revokes all of them on request.
#![no_std]
#![no_main]
use sawmill_abi::{rights, MsgTag, ObjKind};
use sawmill_rt::{env, ipc, println, sys, thread, utcb};

sawmill_rt::entry!(main);

const OP_GET: u16 = 1;
const OP_REVOKE: u16 = 2;

fn main() {
    let ep = env::cap("broker").expect("broker endpoint");
    let vault = thread::create(ObjKind::Endpoint, 0).expect("vault endpoint");
    // The minted copies hang below this intermediate capability, so revoking it reaches every
    // copy handed out, wherever it went, while the vault itself stays.
    let parent = thread::alloc_slot();
    sys::cap_copy(vault, parent).expect("copy");
    thread::spawn(100, 16 * 1024, move || loop {
        let mut m = ipc::recv(vault, 0);
        while m.err == 0 {
            // The answer identifies the caller by the badge the broker minted for it.
            m = ipc::reply_recv(vault, MsgTag::new(0, 1), [0x05ec_12e7 + m.badge, 0, 0, 0]);
        }
    })
    .expect("vault thread");
    let mut m = ipc::recv(ep, 0);
    loop {
        let (tag, w) = match m.tag.label() {
            OP_GET => {
                let s = thread::alloc_slot();
                match sys::cap_mint(parent, s, m.badge + 100, rights::SEND) {
                    Ok(()) => {
                        utcb().caps_out[0] = s;
                        (MsgTag::new(0, 0).with_caps(1), [0; 4])
                    }
                    Err(e) => (MsgTag::new(e as u16, 0), [0; 4]),
                }
            }
            OP_REVOKE => {
                let r = sys::cap_revoke(parent);
                println!("broker: revoked every vault capability");
                (MsgTag::new(if r.is_ok() { 0 } else { 1 }, 0), [0; 4])
            }
            _ => (MsgTag::new(0xfff, 0), [0; 4]),
        };
        m = ipc::reply_recv(ep, tag, w);
    }
}
