//! Replacing mappings (the map-replacement fault of docs/requests-fs.md): a page mapped over an
//! existing mapping must be the new page at once, and its neighbours must stay.
//!
//! `role=server` answers "map your page `w0` at my `w1`" with one map item. The client (default
//! role) plays a file client that reuses its receive window for a second file, as lib/fsclient
//! did before it learnt to unmap on close: the server maps four pages into a window that starts
//! at a 2 MiB boundary, then four other pages over them one by one, and after each step the
//! client reads every window page. It then replaces its own mappings while their translations
//! are cached (4 KiB over 4 KiB, 2 MiB over 4 KiB, 4 KiB over 2 MiB), and checks that a map item
//! outside its window is refused and leaves the old page in place.
#![no_std]
#![no_main]
extern crate alloc;
use sawmill_abi::{map, Error, MapItem, MsgTag};
use sawmill_rt::{env, ipc, layout, println, slots, sys, utcb};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

const PAGE: u64 = 4096;
/// The client's receive window: at a 2 MiB boundary, like lib/fsclient's file windows.
const WINDOW: u64 = 0x8000_0000;
const WINDOW_SIZE: u64 = 64 << 20;
/// Where the client replaces its own mappings (2 MiB aligned).
const LOCAL: u64 = 0xa000_0000;
/// Label of a request: map the server's page `w0` at the client's address `w1`.
const MAP: u16 = 1;

fn main() {
    match sawmill_testprogs::arg_value("role") {
        Some("server") => server(),
        _ => client(),
    }
}

/// The first word of every page carries `tag`, the rest the word index: a stale page or a
/// neighbour shows up as a wrong tag.
fn fill(page: u64, tag: u64) {
    // SAFETY: callers pass a page of their own heap, mapped read-write.
    let words = unsafe { core::slice::from_raw_parts_mut(page as *mut u64, 512) };
    for (i, w) in words.iter_mut().enumerate() {
        *w = if i == 0 { tag } else { i as u64 };
    }
}

/// Reads word `i` of the page at `a` through the TLB (not through the kernel's page walk).
fn word(a: u64, i: u64) -> u64 {
    // SAFETY: callers read only addresses they expect to be mapped; a missing page faults and
    // ends this program, which the scenario reports.
    unsafe { core::ptr::read_volatile((a + i * 8) as *const u64) }
}

/// Heap pages, page-aligned.
fn pages(n: u64) -> u64 {
    let pool = alloc::vec![0u8; ((n + 1) * PAGE) as usize].leak();
    (pool.as_ptr() as u64 + PAGE - 1) & !(PAGE - 1)
}

fn server() {
    let ep = env::cap("remap").expect("remap endpoint");
    let base = pages(8);
    for i in 0..8 {
        fill(base + i * PAGE, 0x5e00 + i);
    }
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        let tag = if m.tag.label() == MAP && m.w[0] < 8 {
            utcb().map_items[0] = MapItem {
                src: base + m.w[0] * PAGE,
                dst: m.w[1],
                pages: 1,
                flags: map::READ,
            };
            MsgTag::new(0, 0).with_maps(1)
        } else {
            MsgTag::new(1, 0)
        };
        m = ipc::reply_recv(ep, tag, [0; 4]);
    }
}

/// Asks the server to map its page `src` at `dst`; returns how many map items arrived.
fn remote_map(ep: u64, src: u64, dst: u64) -> usize {
    let r = ipc::call(ep, MsgTag::new(MAP, 2), [src, dst, 0, 0]);
    check!(
        r.err == 0 && r.tag.label() == 0,
        "map request failed: {}",
        r.err
    );
    r.tag.maps()
}

fn client() {
    let ep = sawmill_testprogs::endpoint("remap");
    utcb().map_window = [WINDOW, WINDOW_SIZE];
    // "File A": server pages 0..4 at window pages 0..4.
    for p in 0..4 {
        check!(
            remote_map(ep, p, WINDOW + p * PAGE) == 1,
            "map item refused"
        );
    }
    for p in 0..4 {
        let got = word(WINDOW + p * PAGE, 0);
        check!(got == 0x5e00 + p, "window page {}: {:#x}", p, got);
    }
    // "File B" in the same window: server pages 4..8 over the old ones, one page at a time.
    for j in 0..4 {
        check!(
            remote_map(ep, 4 + j, WINDOW + j * PAGE) == 1,
            "replacing map item refused"
        );
        for p in 0..4 {
            let want = if p <= j { 0x5e04 + p } else { 0x5e00 + p };
            let got = word(WINDOW + p * PAGE, 0);
            check!(
                got == want && word(WINDOW + p * PAGE, 7) == 7,
                "after replacing page {}: window page {} holds {:#x}, want {:#x}",
                j,
                p,
                got,
                want
            );
        }
    }
    println!("remap: PASS map items over an existing window replace only their own pages");

    // Bad input: an item outside the window is refused; what is mapped stays.
    check!(
        remote_map(ep, 0, WINDOW + WINDOW_SIZE) == 0,
        "map item outside the window accepted"
    );
    check!(
        sys::translate(WINDOW + WINDOW_SIZE) == Err(Error::Fault),
        "page mapped outside the window"
    );
    check!(
        word(WINDOW, 0) == 0x5e04,
        "refused item disturbed the window"
    );
    utcb().map_window = [0, 0];
    println!("remap: PASS a map item outside the window is refused");

    local();
}

/// Replacements in our own, loaded, address space, each with the old translation cached.
fn local() {
    let rw = map::READ | map::WRITE;
    let own = pages(2);
    fill(own, 0xa0);
    fill(own + PAGE, 0xa1);
    sys::task_map(slots::TASK, own, LOCAL, 1, rw).expect("4 KiB map");
    check!(word(LOCAL, 0) == 0xa0, "first local page wrong");
    sys::task_map(slots::TASK, own + PAGE, LOCAL, 1, rw).expect("4 KiB over 4 KiB");
    check!(
        word(LOCAL, 0) == 0xa1,
        "4 KiB over 4 KiB: still the old page"
    );

    // 2 MiB over 4 KiB pieces, and 4 KiB back over the 2 MiB page.
    let h = layout::HUGE;
    fill(h + 3 * PAGE, 0xb3);
    sys::task_map(slots::TASK, own, LOCAL + 3 * PAGE, 1, rw).expect("piece");
    check!(word(LOCAL + 3 * PAGE, 0) == 0xa0, "piece wrong");
    let r = sys::task_map(slots::TASK, h, LOCAL, 1, rw | map::HUGE);
    check!(r.is_ok(), "2 MiB over 4 KiB pieces: {:?}", r);
    check!(
        word(LOCAL, 0) != 0xa1 && word(LOCAL + 3 * PAGE, 0) == 0xb3,
        "2 MiB over 4 KiB: stale pieces"
    );
    sys::task_map(slots::TASK, own + PAGE, LOCAL + 3 * PAGE, 1, rw).expect("4 KiB over 2 MiB");
    check!(
        word(LOCAL + 3 * PAGE, 0) == 0xa1,
        "4 KiB over 2 MiB: still the 2 MiB page"
    );
    check!(
        sys::translate(LOCAL) == Err(Error::Fault),
        "4 KiB over 2 MiB left the rest of the 2 MiB page"
    );
    println!("remap: PASS replacing cached 4 KiB and 2 MiB mappings in our own space");
    // PageCopy: the kernel copies a page of ours; a source or destination not mapped (as a
    // page revoked with a dead file system) is an error, not a fault.
    let dst = pages(1);
    fill(dst, 0x77);
    check!(
        sys::page_copy(LOCAL + 3 * PAGE, dst).is_ok(),
        "page copy refused"
    );
    check!(
        word(dst, 0) == 0xa1 && word(dst, 511) == word(LOCAL + 3 * PAGE, 511),
        "page copy: not the source's bytes"
    );
    let r = sys::page_copy(LOCAL, dst);
    check!(
        r == Err(Error::Fault),
        "page copy from an unmapped page: {:?}",
        r
    );
    check!(word(dst, 0) == 0xa1, "a refused page copy wrote");
    let r = sys::page_copy(dst, LOCAL);
    check!(
        r == Err(Error::Fault),
        "page copy to an unmapped page: {:?}",
        r
    );
    let r = sys::page_copy(LOCAL + 3 * PAGE + 8, dst);
    check!(r == Err(Error::Invalid), "unaligned page copy: {:?}", r);
    println!("remap: PASS page copy in the kernel, refused for pages not mapped");
}
