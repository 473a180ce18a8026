//! A client of the block driver that lies about its shared region (scenario blk-share).
//!
//! `blk.share` carries a map item plus what it maps as words; the driver must accept a region only
//! when the words say exactly what arrived at the start of its window, once per client. This
//! program sends a share without its map item, shares whose words disagree with the item (another
//! address, more pages), an item aimed below the window and a second share after a good one; all
//! must be refused. Then it reads the disk's ext2 superblock through its region: the driver still
//! works for it, at the place it really shared.
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_abi::{MapItem, MsgTag};
use sawmill_interfaces::rpc::{self, Error as RpcError, Map};
use sawmill_interfaces::{blk, BlkError};
use sawmill_rt::{env, ipc, println, utcb};

sawmill_rt::entry!(main);

const PAGE: u64 = 4096;
const RW: u64 = sawmill_abi::map::READ | sawmill_abi::map::WRITE;

fn fail(what: &str) -> ! {
    println!("blk-intruder: FAIL {}", what);
    sawmill_rt::exit(1)
}

/// A `share` whose words (`claim`: dst, pages) need not match its map item (`item`).
fn raw_share(ep: u64, item: Option<MapItem>, claim: (u64, u64)) -> u16 {
    let maps = match item {
        Some(it) => {
            utcb().map_items[0] = it;
            1
        }
        None => 0,
    };
    let tag = MsgTag::new(blk::op::SHARE, 3).with_maps(maps);
    let r = ipc::call(ep, tag, [claim.0, claim.1, RW, 0]);
    if r.err != 0 {
        fail("share: IPC error");
    }
    r.tag.label()
}

fn main() {
    let ep = env::cap("blk0").expect("blk0 endpoint");
    let c = blk::Client::new(ep);
    // Three pages of our own memory, present (the heap is paged in by touching it).
    let layout = core::alloc::Layout::from_size_align(3 * PAGE as usize, PAGE as usize).unwrap();
    // SAFETY: a non-zero size; the block is never freed (the driver keeps it mapped).
    let base = unsafe { alloc::alloc::alloc_zeroed(layout) };
    if base.is_null() {
        fail("no heap");
    }
    for i in 0..3 {
        // SAFETY: inside the block just allocated.
        unsafe { core::ptr::write_volatile(base.add(i * PAGE as usize), 1) };
    }
    let src = base as u64;
    let window = || c.info().unwrap_or_else(|_| fail("info")).window;
    let item = |dst: u64, pages: u64| MapItem {
        src,
        dst,
        pages,
        flags: RW,
    };
    let not_shared = BlkError::NotShared as u16;

    // No map item at all: dispatch refuses the shape.
    let w = window();
    if raw_share(ep, None, (w, 1)) != rpc::proto::BAD_SHAPE {
        fail("share without a map item accepted");
    }
    // The item lands at the window, the words claim the next page.
    let w = window();
    if raw_share(ep, Some(item(w, 1)), (w + PAGE, 1)) != not_shared {
        fail("share claiming another address accepted");
    }
    // The words claim more pages than arrived.
    let w2 = window();
    if w2 <= w {
        fail("the window did not move past a refused share");
    }
    if raw_share(ep, Some(item(w2, 1)), (w2, 2)) != not_shared {
        fail("share claiming more pages accepted");
    }
    // An item aimed below the window (where an earlier share went): the kernel drops it.
    if raw_share(ep, Some(item(w, 1)), (w, 1)) != rpc::proto::BAD_SHAPE {
        fail("share below the window accepted");
    }
    // Another request carrying a map item into the window, ahead of the share (one page in):
    // refused, and what it brought must not stay there to spoil the share that follows.
    let w = window();
    utcb().map_items[0] = item(w + PAGE, 3);
    let r = ipc::call(ep, MsgTag::new(blk::op::INFO, 0).with_maps(1), [0; 4]);
    if r.err != 0 || r.tag.label() != rpc::proto::BAD_SHAPE {
        fail("a request other than share with a map item accepted");
    }
    if window() != w {
        fail("the window moved for a request other than share");
    }
    // The real share, through the generated stub, then a second one.
    let w = window();
    let region = Map {
        src,
        dst: w,
        pages: 3,
        flags: RW,
    };
    if let Err(e) = c.share(region) {
        println!("blk-intruder: FAIL honest share: {:?}", e);
        sawmill_rt::exit(1);
    }
    let again = Map {
        dst: window(),
        ..region
    };
    if c.share(again) != Err(RpcError::App(BlkError::NotShared)) {
        fail("second share accepted");
    }
    // Sectors 2..4 (the ext2 superblock) into the region's second page.
    let mut sector = [0u64; 16];
    let mut off = [0u32; 16];
    let mut count = [0u16; 16];
    sector[0] = 2;
    off[0] = PAGE as u32;
    count[0] = 2;
    if let Err(e) = c.read(1, sector, off, count) {
        println!("blk-intruder: FAIL read: {:?}", e);
        sawmill_rt::exit(1);
    }
    // SAFETY: inside our block; the device wrote it (DMA) before the reply.
    let magic = unsafe { core::ptr::read_volatile(base.add(PAGE as usize + 56) as *const u16) };
    if magic != 0xef53 {
        println!("blk-intruder: FAIL superblock magic {:#x}", magic);
        sawmill_rt::exit(1);
    }
    off[0] = 3 * PAGE as u32;
    if c.read(1, sector, off, count) != Err(RpcError::App(BlkError::BadBuffer)) {
        fail("read past the region accepted");
    }
    println!("blk-intruder: PASS lying shares refused, the honest one works");
}
