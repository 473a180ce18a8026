//! Scenario 3, the pager: resolves page faults of another task by mapping pages of its own heap,
//! filled with a pattern derived from the fault address; on request revokes one mapping or lowers
//! it to read-only (`unmap` with `UNMAP_WRITE`, after checking that unknown flags are refused). Written
//! against the raw kernel protocol with its own loop on purpose: the scenario tests the kernel's
//! pager mechanism, not the runtime.
#![no_std]
#![no_main]
extern crate alloc;
use sawmill_abi::{label, map, MapItem, MsgTag};
use sawmill_rt::{env, ipc, println, sys, utcb};

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("pager").expect("pager endpoint");
    let pool = alloc::vec![0u8; 64 * 4096 + 4096].leak();
    let base = (pool.as_ptr() as u64 + 4095) & !4095;
    let mut used = 0u64;
    let mut faults = 0;
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        let (tag, w) = if m.tag.label() == label::PAGE_FAULT {
            faults += 1;
            let addr = m.w[0] & !0xfff;
            if used >= 64 {
                (MsgTag::new(1, 0), [0; 4])
            } else {
                let page = base + used * 4096;
                used += 1;
                // SAFETY: the page lies in our heap allocation.
                let words = unsafe { core::slice::from_raw_parts_mut(page as *mut u64, 512) };
                for (i, x) in words.iter_mut().enumerate() {
                    *x = addr + i as u64 * 8;
                }
                utcb().map_items[0] = MapItem {
                    src: page,
                    dst: addr,
                    pages: 1,
                    flags: map::READ | map::WRITE,
                };
                if faults <= 3 || faults % 8 == 0 {
                    println!(
                        "pager: fault {} at {:#x} (badge {}) resolved",
                        faults, m.w[0], m.badge
                    );
                }
                (MsgTag::new(0, 0).with_maps(1), [0; 4])
            }
        } else if m.tag.label() == 7 {
            // Revoke the mapping we gave for page index w0: unmap our own page's children.
            let r = sys::unmap(base + m.w[0] * 4096, 1, 0);
            (MsgTag::new(if r.is_ok() { 0 } else { 1 }, 0), [0; 4])
        } else if m.tag.label() == 8 {
            // Lower the mapping we gave for page index w0 to read-only, keeping it.
            let bad = sys::unmap(base + m.w[0] * 4096, 1, 1 << 7);
            let r = sys::write_protect(base + m.w[0] * 4096, 1);
            let ok = bad == Err(sawmill_abi::Error::Invalid) && r == Ok(0);
            (MsgTag::new(if ok { 0 } else { 1 }, 0), [0; 4])
        } else {
            (MsgTag::new(0xfff, 0), [0; 4])
        };
        m = ipc::reply_recv(ep, tag, w);
    }
}
