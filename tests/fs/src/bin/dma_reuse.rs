//! A block-driver client that frees memory it shared with the driver (scenario dma-reuse,
//! issue 12 hole 3), and a check of the kernel's DMA pins.
//!
//! 1. The hole as reported: share a page of a `mem` dataspace with `blk0`, free the dataspace,
//!    allocate until `mem` hands the same physical frame to a new dataspace, then ask for a
//!    `blk` read into the old region. It must fail (`Revoked`) and the new owner's page must be
//!    intact. (A driver that kept the physical addresses of the share wrote the disk into it.)
//! 2. In-flight DMA: a pinned frame (we pin it ourselves, as a driver would before starting its
//!    device) that is freed must not come back from `mem` while the pin holds, and must come
//!    back once it is released.
//! 3. Bad input to `pin`/`unpin`: a page not mapped, not RAM (our UTCB), read-only for device
//!    writes, bad sizes, alignment and flags, unpin of what is not pinned, and a task's pin list
//!    running full; each gives its error and changes nothing.
//!
//! Uses: `mem`, `blk0`; needs a disk holding an ext2 file system (its superblock is read).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_abi::{pin, Error};
use sawmill_interfaces::rpc::{Error as RpcError, Map};
use sawmill_interfaces::{blk, dataspace, mem, BlkError, MapFlags};
use sawmill_rt::{env, println, sys, thread, utcb};

sawmill_rt::entry!(main);

const PAGE: u64 = 4096;
/// Where the shared page lives here.
const SHARED_AT: u64 = 0x5000_0000;
/// Where the pinned page of part 2 lives.
const PINNED_AT: u64 = 0x5001_0000;
/// A read-only mapping for part 3.
const RO_AT: u64 = 0x5002_0000;
/// Where "take every free frame" maps its pages (up to 4096 of them).
const SWEEP_AT: u64 = 0x5100_0000;
/// Never mapped.
const HOLE_AT: u64 = 0x5f00_0000;

fn fail(what: &str) -> ! {
    println!("dma-reuse: FAIL {}", what);
    sawmill_rt::exit(1)
}

fn rw() -> MapFlags {
    MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE
}

/// A new dataspace of `pages` pages from mem.
fn alloc(m: &mem::Client, pages: u64) -> dataspace::Client {
    let slot = thread::alloc_slot();
    match m.alloc(pages * PAGE, 0, slot) {
        Ok(ds) => dataspace::Client::new(ds),
        Err(_) => fail("mem.alloc"),
    }
}

fn map(ds: &dataspace::Client, page: u64, at: u64, flags: MapFlags) -> bool {
    ds.map(page * PAGE, at, 1, flags, [at, PAGE]).is_ok()
}

fn fill(at: u64, byte: u8) {
    // SAFETY: `at` is a page mapped writable here just before.
    unsafe { core::ptr::write_bytes(at as *mut u8, byte, PAGE as usize) };
}

fn all(at: u64, byte: u8) -> bool {
    // SAFETY: `at` is a page mapped here.
    let p = unsafe { core::slice::from_raw_parts(at as *const u8, PAGE as usize) };
    p.iter().all(|&b| b == byte)
}

/// Takes every free frame of mem into one new dataspace, filling each page with `byte`;
/// returns the dataspace and the physical address of each page.
fn sweep(m: &mem::Client, byte: u8) -> (dataspace::Client, Vec<u64>) {
    let free = m.stats().unwrap_or_else(|_| fail("mem.stats")).free;
    if free == 0 || free > 4096 {
        fail("mem's free pages out of the range this test sweeps");
    }
    let ds = alloc(m, free);
    let mut got = Vec::new();
    for i in 0..free {
        let at = SWEEP_AT + i * PAGE;
        if !map(&ds, i, at, rw()) {
            break;
        }
        fill(at, byte);
        got.push(sys::translate(at).unwrap_or_else(|_| fail("translate of a swept page")));
    }
    (ds, got)
}

fn read(b: &blk::Client, sector: u64, off: u32, count: u16) -> Result<(), RpcError<BlkError>> {
    let (mut s, mut o, mut c) = ([0u64; 16], [0u32; 16], [0u16; 16]);
    (s[0], o[0], c[0]) = (sector, off, count);
    b.read(1, s, o, c)
}

fn expect(what: &str, got: Result<u64, Error>, want: Error) {
    if got != Err(want) {
        println!("dma-reuse: FAIL {}: {:?}, expected {:?}", what, got, want);
        sawmill_rt::exit(1);
    }
}

/// Part 1: the reported hole.
fn freed_share(m: &mem::Client, b: &blk::Client) {
    let ds = alloc(m, 1);
    if !map(&ds, 0, SHARED_AT, rw()) {
        fail("mapping the page to share");
    }
    let old = sys::translate(SHARED_AT).unwrap_or_else(|_| fail("translate"));
    let window = b.info().unwrap_or_else(|_| fail("blk.info")).window;
    let region = Map {
        src: SHARED_AT,
        dst: window,
        pages: 1,
        flags: sawmill_abi::map::READ | sawmill_abi::map::WRITE,
    };
    if b.share(region).is_err() {
        fail("blk.share");
    }
    // The share works: the ext2 superblock (sectors 2..4) lands in it.
    if read(b, 2, 0, 2).is_err() {
        fail("first read into the shared page");
    }
    // SAFETY: our mapped page, written by the device before the reply.
    let magic = unsafe { core::ptr::read_volatile((SHARED_AT + 56) as *const u16) };
    if magic != 0xef53 {
        fail("superblock magic");
    }
    if ds.free().is_err() {
        fail("dataspace.free");
    }
    if sys::translate(SHARED_AT).is_ok() {
        fail("the freed page is still mapped here");
    }
    // mem hands the frame to a new dataspace (the driver holds no pin: nothing is in flight).
    let (new, got) = sweep(m, 0x5a);
    let Some(i) = got.iter().position(|&p| p == old) else {
        fail("the freed frame never came back from mem");
    };
    let at = SWEEP_AT + i as u64 * PAGE;
    println!(
        "dma-reuse: frame {:#x} freed and handed to a new dataspace (page {})",
        old, i
    );
    match read(b, 0, 0, 8) {
        Err(RpcError::App(BlkError::Revoked)) => {}
        Ok(()) => {
            if !all(at, 0x5a) {
                fail("a read into the freed region succeeded and overwrote the new owner's page");
            }
            fail("a read into the freed region succeeded");
        }
        Err(e) => {
            println!(
                "dma-reuse: FAIL read into the freed region: {:?}, expected Revoked",
                e
            );
            sawmill_rt::exit(1);
        }
    }
    if !all(at, 0x5a) {
        fail("the new owner's page changed");
    }
    let _ = new.free();
    println!("dma-reuse: PASS a read into a freed shared page is refused (Revoked), the new owner's page is intact");
}

/// Part 2: a pinned frame is held back until it is unpinned.
fn pinned_frame(m: &mem::Client) {
    let ds = alloc(m, 1);
    if !map(&ds, 0, PINNED_AT, rw()) {
        fail("mapping the page to pin");
    }
    let pa = sys::translate(PINNED_AT).unwrap_or_else(|_| fail("translate"));
    if sys::pin(PINNED_AT, 1, pin::DEVICE_WRITES) != Ok(pa) || utcb().mr[0] != pa {
        fail("pin: wrong physical address");
    }
    if sys::translate_pins(PINNED_AT) != Ok((pa, 1)) {
        fail("translate does not report the pin");
    }
    let free0 = m.stats().unwrap_or_else(|_| fail("stats")).free;
    if ds.free().is_err() {
        fail("dataspace.free of the pinned page");
    }
    if m.stats().unwrap_or_else(|_| fail("stats")).free != free0 {
        fail("a pinned frame went back to mem's free pool");
    }
    let (all_free, got) = sweep(m, 0x33);
    if got.contains(&pa) {
        fail("mem handed out a frame still pinned for DMA");
    }
    let _ = all_free.free();
    if sys::unpin(pa).is_err() {
        fail("unpin");
    }
    expect(
        "second unpin of the same frame",
        sys::unpin(pa).map(|_| 0),
        Error::Invalid,
    );
    let (again, got) = sweep(m, 0x44);
    if !got.contains(&pa) {
        fail("the unpinned frame did not come back from quarantine");
    }
    let _ = again.free();
    println!("dma-reuse: PASS a frame freed while pinned stays out of mem's pool until unpinned");
}

/// Part 3: bad input.
fn bad_input(m: &mem::Client) {
    expect(
        "pin of a page not mapped",
        sys::pin(HOLE_AT, 1, 0),
        Error::Fault,
    );
    let utcb_at = utcb() as *const _ as u64;
    expect(
        "pin of our UTCB (not user RAM)",
        sys::pin(utcb_at, 1, 0),
        Error::Invalid,
    );
    expect("pin of 0 pages", sys::pin(SWEEP_AT, 0, 0), Error::Invalid);
    expect("pin of 65 pages", sys::pin(SWEEP_AT, 65, 0), Error::Invalid);
    expect("unaligned pin", sys::pin(RO_AT + 8, 1, 0), Error::Invalid);
    expect(
        "pin with unknown flags",
        sys::pin(RO_AT, 1, 4),
        Error::Invalid,
    );
    expect(
        "pin beyond user space",
        sys::pin(sawmill_abi::layout::USER_END, 1, 0),
        Error::Invalid,
    );
    expect(
        "unpin of a frame never pinned",
        sys::unpin(0x10_0000).map(|_| 0),
        Error::Invalid,
    );
    expect(
        "unpin with unknown flags",
        sawmill_rt::sys::raw(sawmill_abi::Sys::Unpin, [0, 2, 0, 0, 0, 0])
            .0
            .ok(),
        Error::Invalid,
    );
    let ds = alloc(m, 2);
    if !map(&ds, 0, RO_AT, rw()) || !map(&ds, 1, RO_AT + PAGE, MapFlags::READ) {
        fail("mapping the pages for bad input");
    }
    fill(RO_AT, 7);
    expect(
        "translate with unknown flags",
        sawmill_rt::sys::raw(sawmill_abi::Sys::Translate, [RO_AT, 2, 0, 0, 0, 0])
            .0
            .ok(),
        Error::Invalid,
    );
    // The second page is read-only here: a device may read it, not write it. A range with it
    // fails as a whole and pins nothing.
    expect(
        "pin for device writes of a read-only page",
        sys::pin(RO_AT, 2, pin::DEVICE_WRITES),
        Error::NoRights,
    );
    if sys::translate_pins(RO_AT).map(|x| x.1) != Ok(0) {
        fail("a refused pin left a pin behind");
    }
    if sys::pin(RO_AT, 2, 0).is_err() || sys::unpin_all() != Ok(2) {
        fail("pin for device reads of a read-only page");
    }
    // A listed pin, as the driver makes one per batch: any order, repeats allowed; one bad entry
    // and the pins the call took are given back.
    let ro0 = sys::translate(RO_AT).unwrap_or_else(|_| fail("translate"));
    let ro1 = sys::translate(RO_AT + PAGE).unwrap_or_else(|_| fail("translate"));
    utcb().mr[..3].copy_from_slice(&[RO_AT + PAGE, RO_AT, RO_AT + PAGE]);
    if sys::pin(0, 3, pin::LIST) != Ok(ro1) || utcb().mr[..3] != [ro1, ro0, ro1] {
        fail("listed pin: wrong physical addresses");
    }
    if sys::translate_pins(RO_AT + PAGE).map(|x| x.1) != Ok(2) || sys::unpin_all() != Ok(3) {
        fail("listed pin: counts");
    }
    utcb().mr[..3].copy_from_slice(&[RO_AT, RO_AT + PAGE, HOLE_AT]);
    expect(
        "listed pin with a page not mapped",
        sys::pin(0, 3, pin::LIST),
        Error::Fault,
    );
    utcb().mr[..2].copy_from_slice(&[RO_AT, RO_AT + 8]);
    expect(
        "listed pin of an unaligned address",
        sys::pin(0, 2, pin::LIST),
        Error::Invalid,
    );
    if sys::translate_pins(RO_AT).map(|x| x.1) != Ok(0) || sys::unpin_all() != Ok(0) {
        fail("a refused listed pin left pins behind");
    }
    // A task's pins are bounded.
    for _ in 0..pin::PER_TASK / 2 {
        if sys::pin(RO_AT, 2, 0).is_err() {
            fail("pin below the limit refused");
        }
    }
    expect(
        "pin past the task's limit",
        sys::pin(RO_AT, 1, 0),
        Error::NoMemory,
    );
    if sys::translate_pins(RO_AT).map(|x| x.1) != Ok(pin::PER_TASK / 2) {
        fail("pin count after exhaustion");
    }
    if sys::unpin_all() != Ok(pin::PER_TASK) || sys::unpin_all() != Ok(0) {
        fail("unpin_all count");
    }
    // One pin stays when we exit: the kernel releases it with the task (root then checks that
    // kernel memory came back, and mem gets the frame back).
    if sys::pin(RO_AT, 1, 0).is_err() {
        fail("last pin");
    }
    println!("dma-reuse: PASS bad pins and unpins refused with their errors");
}

trait RawOk {
    fn ok(self) -> Result<u64, Error>;
}

impl RawOk for u64 {
    fn ok(self) -> Result<u64, Error> {
        if self == 0 {
            Ok(0)
        } else {
            Err(Error::from_raw(self))
        }
    }
}

fn main() {
    let m = mem::Client::new(env::cap("mem").unwrap_or_else(|| fail("no mem")));
    let b = blk::Client::new(env::cap("blk0").unwrap_or_else(|| fail("no blk0")));
    freed_share(&m, &b);
    pinned_frame(&m);
    bad_input(&m);
}
