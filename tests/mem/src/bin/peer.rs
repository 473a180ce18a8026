//! mem-peer: the other side of mem-basic's sharing test. Attaches the dataspace it is sent,
//! reads and writes through it, and later confirms that revoking it removed it here too. A test
//! peer speaking raw labels, so it keeps its own few-line loop rather than `rpc::serve`.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_interfaces::dataspace;
use sawmill_rm as rm;
use sawmill_rt::{env, ipc, println, sys, thread, utcb};

sawmill_rt::entry!(main);

fn main() {
    rm::init().expect("rm init");
    let ep = env::cap("peer").expect("peer endpoint");
    let slot = thread::alloc_slot();
    let mut at = 0;
    utcb().caps_in[0] = slot;
    let mut m = ipc::recv(ep, 0);
    loop {
        let (l, w) = match m.tag.label() {
            1 if m.tag.caps() == 1 => {
                at = rm::attach(slot, 0, 16 * 4096, None, rm::READ | rm::WRITE).expect("attach");
                // SAFETY: attached above; our region manager pages it in from mem.
                let v = unsafe { core::ptr::read_volatile((at + m.w[0] * 4096 + 8) as *const u64) };
                // SAFETY: as above, writable.
                unsafe { core::ptr::write_volatile((at + 5 * 4096 + 16) as *mut u64, 0x5eed) };
                (0, [v, 0, 0, 0])
            }
            2 => {
                let unmapped = sys::translate(at + 3 * 4096).is_err();
                let dead = dataspace::Client::new(slot).info().is_err();
                println!(
                    "mem-peer: after revoke: page unmapped {}, capability dead {}",
                    unmapped, dead
                );
                (
                    if unmapped && dead { 0 } else { 1 },
                    [unmapped as u64, dead as u64, 0, 0],
                )
            }
            _ => (0xffe0, [0; 4]),
        };
        m = ipc::reply_recv(ep, MsgTag::new(l, 2), w);
    }
}
