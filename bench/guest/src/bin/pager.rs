//! Minimal user-level pager for the page-fault benchmark: answers each fault with a map item of
//! the next page of a pre-touched pool (the mechanism's cost, no page clearing). Its own loop,
//! not the runtime's `rpc::serve`, so that the figure is the kernel's path with the least user
//! code around it.
#![no_std]
#![no_main]
extern crate alloc;
use sawmill_abi::{map, MapItem, MsgTag};
use sawmill_rt::{env, ipc, utcb};

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("bpager").expect("pager endpoint");
    let pages = 512u64;
    let pool = alloc::vec![1u8; (pages as usize + 1) * 4096].leak();
    let base = (pool.as_ptr() as u64 + 4095) & !4095;
    let mut next = 0;
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        let u = utcb();
        u.map_items[0] = MapItem {
            src: base + (next % pages) * 4096,
            dst: m.w[0] & !0xfff,
            pages: 1,
            flags: map::READ | map::WRITE,
        };
        next += 1;
        m = ipc::reply_recv(ep, MsgTag::new(0, 0).with_maps(1), [0; 4]);
    }
}
