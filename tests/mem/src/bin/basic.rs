//! mem-basic: attach / fault / detach, read-only capabilities, DMA dataspaces, copy-on-write
//! (mem's `copy` and the region manager's private COW regions), sharing with another task and
//! revoking it there, and hostile arguments.
#![no_std]
#![no_main]
extern crate alloc;
use sawmill_abi::MsgTag;
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{dataspace, DsError, DsFlags, MapFlags, MemError};
use sawmill_memtest::check;
use sawmill_rm as rm;
use sawmill_rt::{env, ipc, println, sys, thread, utcb};

sawmill_rt::entry!(main);

const P: u64 = 4096;
const AT: u64 = rm::RM_BASE + 0x100_0000;

fn rd(a: u64) -> u64 {
    // SAFETY: the address lies in an attached region; a fault is resolved by our region manager.
    unsafe { core::ptr::read_volatile(a as *const u64) }
}
fn wr(a: u64, v: u64) {
    // SAFETY: as in `rd`, in a writable region.
    unsafe { core::ptr::write_volatile(a as *mut u64, v) }
}

fn main() {
    rm::init().expect("rm init");
    let mem = rm::mem().expect("mem capability");
    let s0 = mem.stats().expect("stats");

    // --- attach / fault / detach ---------------------------------------------------------
    let ds = mem.alloc(16 * P, 0, thread::alloc_slot()).expect("alloc");
    let d = dataspace::Client::new(ds);
    let info = d.info().expect("info");
    check!(
        info.size == 16 * P && info.flags.contains(DsFlags::WRITABLE),
        "info {:?}",
        info
    );
    let a = rm::attach(ds, 0, 16 * P, Some(AT), rm::READ | rm::WRITE).expect("attach");
    check!(a == AT, "attached at {:#x}", a);
    for i in 0..16 {
        check!(rd(a + i * P) == 0, "fresh page {} not zero", i);
        wr(a + i * P + 8, 0x1000 + i);
    }
    let s1 = mem.stats().unwrap();
    check!(
        s1.used == s0.used + 16 && s1.free == s0.free - 16,
        "16 pages charged: {:?} -> {:?}",
        s0,
        s1
    );
    rm::detach(a).expect("detach");
    check!(sys::translate(a).is_err(), "detached page still mapped");
    // The dataspace keeps its contents: attach it again, elsewhere, read-only.
    let b = rm::attach(ds, 4 * P, 8 * P, None, rm::READ).expect("attach ro");
    check!(
        b != a && rd(b + 8) == 0x1004 && rd(b + 7 * P + 8) == 0x100b,
        "contents after re-attach"
    );
    rm::detach(b).unwrap();
    println!("mem-basic: PASS attach/fault/detach, 16 pages charged");

    // --- sharing with another task, then revoking -----------------------------------------
    let a = rm::attach(ds, 0, 16 * P, Some(AT), rm::READ | rm::WRITE).unwrap();
    let peer = env::cap("peer").expect("peer endpoint");
    let ro = d.read_only(thread::alloc_slot()).expect("read-only cap");
    // Label 1: here is the dataspace; attach it, read word 1 of page 3, write word 2 of page 5.
    // Label 2: is it gone at your side (page unmapped, capability dead)?
    utcb().caps_out[0] = ds;
    let r = ipc::call(peer, MsgTag::new(1, 1).with_caps(1), [3, 0, 0, 0]);
    check!(
        r.err == 0 && r.tag.label() == 0 && r.w[0] == 0x1003,
        "peer read {:#x} (label {})",
        r.w[0],
        r.tag.label()
    );
    check!(
        rd(a + 5 * P + 16) == 0x5eed,
        "peer's write through the shared dataspace not seen: {:#x}",
        rd(a + 5 * P + 16)
    );
    // A read-only capability refuses writable mappings at the manager.
    let e = dataspace::Client::new(ro).map(
        0,
        a,
        1,
        MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE,
        [a, P],
    );
    check!(
        e == Err(RpcError::App(DsError::Denied)),
        "write map through read-only cap: {:?}",
        e
    );
    check!(
        dataspace::Client::new(ro).free() == Err(RpcError::App(DsError::Denied)),
        "free through read-only cap"
    );
    // Revoke: freeing the dataspace unmaps it everywhere and kills every capability to it.
    rm::detach(a).unwrap();
    d.free().expect("free");
    let r = ipc::call(peer, MsgTag::new(2, 0), [0; 4]);
    check!(
        r.err == 0 && r.tag.label() == 0,
        "peer: after revoke {} {:#x} {:#x}",
        r.tag.label(),
        r.w[0],
        r.w[1]
    );
    check!(
        mem.stats().unwrap().used == s0.used,
        "freeing returned the pages"
    );
    println!("mem-basic: PASS shared with a peer; revoking unmapped it there");

    // --- DMA -----------------------------------------------------------------------------
    let out = mem.alloc_dma(4, thread::alloc_slot()).expect("alloc_dma");
    let dd = dataspace::Client::new(out.ds);
    check!(
        dd.info().unwrap().flags.contains(DsFlags::CONTIGUOUS),
        "dma ds not contiguous"
    );
    let a = rm::attach(out.ds, 0, 4 * P, None, rm::READ | rm::WRITE).unwrap();
    for i in 0..4 {
        wr(a + i * P, i);
        let pa = sys::translate(a + i * P).expect("translate");
        check!(
            pa == out.paddr + i * P,
            "page {} at {:#x}, expected {:#x}",
            i,
            pa,
            out.paddr + i * P
        );
        check!(
            dd.phys(i * P) == Ok(out.paddr + i * P),
            "phys of page {}",
            i
        );
    }
    check!(
        dd.resize(P) == Err(RpcError::App(DsError::Unsupported)),
        "dma resize"
    );
    rm::detach(a).unwrap();
    dd.free().unwrap();
    println!(
        "mem-basic: PASS dma dataspace at {:#x} is contiguous",
        out.paddr
    );

    // --- copy-on-write through mem (both directions) ---------------------------------------
    let orig = mem.alloc(4 * P, 0, thread::alloc_slot()).unwrap();
    let oa = rm::attach(orig, 0, 4 * P, None, rm::READ | rm::WRITE).unwrap();
    for i in 0..4 {
        wr(oa + i * P, 100 + i);
    }
    let copy = dataspace::Client::new(orig)
        .copy(thread::alloc_slot())
        .expect("copy");
    let ca = rm::attach(copy, 0, 4 * P, None, rm::READ | rm::WRITE).unwrap();
    check!(rd(ca) == 100 && rd(ca + 3 * P) == 103, "copy contents");
    wr(ca + P, 7);
    check!(
        rd(oa + P) == 101,
        "copy's write seen in the original: {}",
        rd(oa + P)
    );
    wr(oa + 2 * P, 8);
    check!(
        rd(ca + 2 * P) == 102,
        "original's write seen in the copy: {}",
        rd(ca + 2 * P)
    );
    check!(rd(ca + P) == 7 && rd(oa + 2 * P) == 8, "own writes");
    rm::detach(ca).unwrap();
    dataspace::Client::new(copy).free().unwrap();
    println!("mem-basic: PASS copy-on-write copy: writes invisible both ways");

    // --- private copy-on-write region of the region manager --------------------------------
    let pa = rm::attach(orig, 0, 4 * P, None, rm::READ | rm::WRITE | rm::COW).unwrap();
    check!(rd(pa + 3 * P) == 103, "cow region reads the dataspace");
    wr(pa + 3 * P, 9);
    check!(
        rd(pa + 3 * P) == 9 && rd(oa + 3 * P) == 103,
        "cow region write leaked: {}",
        rd(oa + 3 * P)
    );
    wr(oa + 3 * P, 10);
    check!(
        rd(pa + 3 * P) == 9,
        "original's write seen in a copied page"
    );
    rm::detach(pa).unwrap();
    rm::detach(oa).unwrap();
    dataspace::Client::new(orig).free().unwrap();
    check!(
        mem.stats().unwrap().used == s0.used,
        "everything returned: {:?}",
        mem.stats()
    );
    println!("mem-basic: PASS copy-on-write region: private copies");

    // --- a large dataspace: mem's page map past one chunk, dense, copied and shrunk ---------
    // 1,100 pages span three of mem's 512-page chunks (servers/mem/src/pagemap.rs); touched in
    // order they go from the short list to the array form. Every page keeps its own contents,
    // a copy shares them, shrinking across a chunk boundary drops exactly the tail, and the
    // charge is the present pages throughout.
    const BIG: u64 = 1100;
    let b0 = mem.stats().unwrap();
    let big = mem.alloc(BIG * P, 0, thread::alloc_slot()).unwrap();
    let ba = rm::attach(big, 0, BIG * P, None, rm::READ | rm::WRITE).unwrap();
    for i in 0..BIG {
        wr(ba + i * P + 16, 0x5000 + i);
    }
    let b1 = mem.stats().unwrap();
    check!(
        b1.used == b0.used + BIG,
        "{} pages charged: {:?} -> {:?}",
        BIG,
        b0,
        b1
    );
    let bc = dataspace::Client::new(big)
        .copy(thread::alloc_slot())
        .expect("copy of a large dataspace");
    let ca = rm::attach(bc, 0, BIG * P, None, rm::READ).unwrap();
    for i in 0..BIG {
        check!(
            rd(ba + i * P + 16) == 0x5000 + i && rd(ca + i * P + 16) == 0x5000 + i,
            "page {} of the large dataspace or its copy",
            i
        );
    }
    check!(
        mem.stats().unwrap().used == b0.used + 2 * BIG,
        "a copy is charged in full: {:?}",
        mem.stats()
    );
    rm::detach(ca).unwrap();
    dataspace::Client::new(bc).free().unwrap();
    rm::detach(ba).unwrap();
    // Shrink to 600 pages (inside the second chunk): 500 pages go back.
    dataspace::Client::new(big).resize(600 * P).expect("shrink");
    check!(
        mem.stats().unwrap().used == b0.used + 600,
        "shrunk to 600 pages: {:?}",
        mem.stats()
    );
    let ba = rm::attach(big, 0, 600 * P, None, rm::READ).unwrap();
    check!(
        rd(ba + 16) == 0x5000 && rd(ba + 599 * P + 16) == 0x5000 + 599,
        "contents kept below the cut"
    );
    rm::detach(ba).unwrap();
    dataspace::Client::new(big).free().unwrap();
    check!(
        mem.stats().unwrap().used == b0.used,
        "large dataspace returned: {:?}",
        mem.stats()
    );
    println!(
        "mem-basic: PASS large dataspace: every page its own, copied, shrunk, charged exactly"
    );

    // --- hostile arguments -------------------------------------------------------------------
    let slot = thread::alloc_slot();
    check!(
        mem.alloc(0, 0, slot) == Err(RpcError::App(MemError::Invalid)),
        "alloc 0"
    );
    check!(
        mem.alloc(u64::MAX, 0, slot) == Err(RpcError::App(MemError::Invalid)),
        "alloc max"
    );
    check!(
        mem.alloc(1 << 40, 0, slot) == Err(RpcError::App(MemError::Invalid)),
        "alloc 1 TiB"
    );
    check!(
        mem.alloc(P, 1, slot) == Err(RpcError::App(MemError::Invalid)),
        "alloc flags"
    );
    check!(
        mem.alloc_dma(0, slot).is_err() && mem.alloc_dma(u64::MAX, slot).is_err(),
        "alloc_dma sizes"
    );
    check!(
        mem.client_gone(1) == Err(RpcError::App(MemError::Denied)),
        "client_gone from a client"
    );
    let ds = mem.alloc(2 * P, 0, slot).unwrap();
    let d = dataspace::Client::new(ds);
    let w = rm::RM_BASE + 0x4000_0000;
    check!(
        d.map(1, w, 1, MapFlags::READ, [w, P]) == Err(RpcError::App(DsError::Invalid)),
        "misaligned offset"
    );
    check!(
        d.map(2 * P, w, 1, MapFlags::READ, [w, P]) == Err(RpcError::App(DsError::Invalid)),
        "offset past the end"
    );
    check!(
        d.map(!0xfff, w, 1, MapFlags::READ, [w, P]) == Err(RpcError::App(DsError::Invalid)),
        "huge offset"
    );
    check!(
        d.map(0, w + 1, 1, MapFlags::READ, [w, P]) == Err(RpcError::App(DsError::Invalid)),
        "misaligned dst"
    );
    check!(
        d.map(0, 0xffff_8000_0000_0000, 1, MapFlags::READ, [w, P])
            == Err(RpcError::App(DsError::Invalid)),
        "kernel dst"
    );
    check!(
        d.map(0, w, 0, MapFlags::READ, [w, P]) == Err(RpcError::App(DsError::Invalid)),
        "0 pages"
    );
    check!(
        d.map(0, w, 1, MapFlags::from_bits_retain(1 << 20), [w, P])
            == Err(RpcError::App(DsError::Invalid)),
        "unknown flags"
    );
    // A mapping outside the window we opened is dropped by the kernel: the reply is refused.
    check!(
        d.map(0, w + P, 1, MapFlags::READ, [w, P]) == Err(RpcError::BadReply),
        "map outside the window"
    );
    check!(
        sys::translate(w + P).is_err(),
        "a page landed outside the window"
    );
    check!(
        d.resize(0) == Err(RpcError::App(DsError::Invalid)),
        "resize 0"
    );
    check!(
        d.resize(1 << 45) == Err(RpcError::App(DsError::Invalid)),
        "resize huge"
    );
    check!(
        d.phys(0) == Err(RpcError::App(DsError::Unsupported)),
        "phys of anonymous"
    );
    // Dataspace operations through the mem capability, and mem operations through a dataspace.
    let e = dataspace::Client::new(rm::mem().unwrap().ep).info();
    check!(
        matches!(e, Err(RpcError::Protocol(_))),
        "info on the mem endpoint: {:?}",
        e
    );
    let e = sawmill_interfaces::mem::Client::new(ds).stats();
    check!(
        matches!(e, Err(RpcError::Protocol(_))),
        "stats on a dataspace: {:?}",
        e
    );
    // Capabilities that are not dataspaces (an empty slot, our own task).
    check!(
        matches!(dataspace::Client::new(1000).info(), Err(RpcError::Ipc(_))),
        "empty slot"
    );
    check!(
        matches!(dataspace::Client::new(0).info(), Err(RpcError::Ipc(_))),
        "task cap"
    );
    // Region manager arguments.
    check!(
        rm::attach(ds, 1, P, None, rm::READ) == Err(rm::RmError::Invalid),
        "rm misaligned offset"
    );
    check!(
        rm::attach(ds, 0, 0, None, rm::READ) == Err(rm::RmError::Invalid),
        "rm size 0"
    );
    check!(
        rm::attach(ds, 0, P, Some(0x1000), rm::READ) == Err(rm::RmError::Invalid),
        "rm outside range"
    );
    check!(
        rm::attach(ds, 0, P, None, rm::WRITE) == Err(rm::RmError::Invalid),
        "rm write-only"
    );
    check!(
        rm::attach(ds, 0, P, None, 0x100) == Err(rm::RmError::Invalid),
        "rm flags"
    );
    let x = rm::attach(ds, 0, 2 * P, None, rm::READ).unwrap();
    check!(
        rm::attach(ds, 0, P, Some(x + P), rm::READ) == Err(rm::RmError::Busy),
        "rm overlap"
    );
    check!(
        rm::detach(x + P) == Err(rm::RmError::NotFound),
        "rm detach middle"
    );
    rm::detach(x).unwrap();
    d.free().unwrap();
    check!(d.info().is_err(), "freed dataspace still answers");
    check!(
        mem.stats().unwrap().used == s0.used,
        "hostile calls leaked pages"
    );
    println!("mem-basic: PASS hostile arguments refused");
    let (f, c) = rm::stats();
    println!(
        "mem-basic: region manager resolved {} faults ({} already mapped)",
        f, c
    );
}
