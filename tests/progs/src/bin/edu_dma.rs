//! A driver for QEMU's `edu` device that tries to make the device write where it must not
//! (scenarios iommu-confine and iommu-none).
//!
//! It claims the device from `pci` (`claim_mmio`: BAR 0 mapped here, the device's DMA bound to
//! this task), shares one page with it (`dma_map`) and has the device's DMA engine copy a pattern
//! out of that page and back into it: that must work. Under an IOMMU it then aims the device at
//! memory it did not share: its own canary page (by its address here, and by its physical
//! address, where an unconfined device would land), a shared page after it was unmapped, and a
//! read of the canary. Each DMA must fault (the kernel reports it) and the canary must keep every
//! byte. Without an IOMMU only the shared-page copy runs (physical addresses), and the driver
//! says DMA is not confined. With a `mem` capability it also shares a page of a dataspace, frees
//! the dataspace and checks that the device cannot write into the frame's next owner's page.
//! Capabilities: `pci` (a badge with the edu device assigned), optionally `mem`.
#![no_std]
#![no_main]

extern crate alloc;

use core::ptr::{read_volatile, write_volatile};
use sawmill_abi::kinfo;
use sawmill_interfaces::{dataspace, mem, pci, MapFlags};
use sawmill_rt::{env, println, slots, sys};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

/// Where pci maps the device's BAR 0 for us.
const BAR: u64 = 0x6000_0000;
/// The device's own DMA buffer, in its address space. QEMU 7.2's edu refuses (aborts QEMU on) a
/// transfer of its whole 4 KiB buffer, so transfers here are at most half of it.
const EDU_BUF: u64 = 0x4_0000;
const PAGE: usize = 4096;

fn reg_read(off: u64) -> u64 {
    // SAFETY: BAR 0 of our device is mapped at BAR (uncached) by pci's claim.
    unsafe { read_volatile((BAR + off) as *const u64) }
}
fn reg_write(off: u64, v: u64) {
    // SAFETY: as in `reg_read`.
    unsafe { write_volatile((BAR + off) as *mut u64, v) }
}
fn reg_read32(off: u64) -> u32 {
    // SAFETY: as in `reg_read`; registers below 0x80 take 4-byte accesses only.
    unsafe { read_volatile((BAR + off) as *const u32) }
}
fn reg_write32(off: u64, v: u32) {
    // SAFETY: as in `reg_read32`.
    unsafe { write_volatile((BAR + off) as *mut u32, v) }
}

/// Runs one transfer of the device's DMA engine and waits until it is done.
/// `to_ram`: device buffer → `addr`; else `addr` → device buffer.
fn dma(addr: u64, len: u64, to_ram: bool) {
    let (src, dst) = if to_ram {
        (EDU_BUF, addr)
    } else {
        (addr, EDU_BUF)
    };
    reg_write(0x80, src);
    reg_write(0x88, dst);
    reg_write(0x90, len);
    reg_write(0x98, if to_ram { 3 } else { 1 });
    let mut spins = 0u64;
    while reg_read(0x98) & 1 != 0 {
        sys::yield_now();
        spins += 1;
        check!(spins < 50_000_000, "the device never finished a DMA");
    }
}

/// Lets a few timer ticks pass, so the kernel has polled the IOMMU's fault records.
fn settle() {
    let t0 = sys::kernel_info(kinfo::TICKS).unwrap_or(0);
    while sys::kernel_info(kinfo::TICKS).unwrap_or(0) < t0 + 3 {
        sys::yield_now();
    }
}

/// Where the dataspaces of step 5 are mapped.
const DS_OLD: u64 = 0x3000_0000;
const DS_NEW: u64 = 0x3010_0000;

/// A dataspace of one page from mem, mapped read-write at `at`; its capability in `slot`.
fn dataspace_page(mem_ep: u64, slot: u64, at: u64) -> dataspace::Client {
    let ds = match mem::Client::new(mem_ep).alloc(PAGE as u64, 0, slot) {
        Ok(ds) => ds,
        Err(e) => {
            println!("edu-dma: FAIL no dataspace from mem: {:?}", e);
            sawmill_rt::exit(1);
        }
    };
    let ds = dataspace::Client::new(ds);
    let rw = MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE;
    check!(
        ds.map(0, at, 1, rw, [at, PAGE as u64]).is_ok(),
        "mapping a dataspace page"
    );
    ds
}

fn freed_dataspace(mem_ep: u64, shared: u64) {
    let free_slot = env::last_slot() + 1;
    let old = dataspace_page(mem_ep, free_slot, DS_OLD);
    check!(
        sys::dma_map(DS_OLD, 1) == Ok(DS_OLD),
        "dma_map of the dataspace page"
    );
    let old_pa = sys::translate(DS_OLD).unwrap_or(0);
    // The device's buffer still holds the pattern of the shared page.
    dma(shared, 256, false);
    dma(DS_OLD, 256, true);
    // SAFETY: DS_OLD maps the dataspace page read-write.
    let got = unsafe { core::slice::from_raw_parts(DS_OLD as *const u8, 256) };
    // SAFETY: `shared` is our page, mapped read-write.
    let want = unsafe { core::slice::from_raw_parts(shared as *const u8, 256) };
    check!(got == want, "DMA into the shared dataspace page");
    check!(old.free().is_ok(), "freeing the dataspace");
    // mem may hand the same frame to the next dataspace: a new owner's page, filled with its data.
    let new = dataspace_page(mem_ep, free_slot + 1, DS_NEW);
    let reused = sys::translate(DS_NEW).unwrap_or(1) == old_pa;
    // SAFETY: DS_NEW maps the new dataspace page read-write.
    let page = unsafe { core::slice::from_raw_parts_mut(DS_NEW as *mut u8, PAGE) };
    page.fill(0x77);
    dma(DS_OLD, 256, true);
    settle();
    check!(
        page.iter().all(|&x| x == 0x77),
        "the device wrote into the new owner's page"
    );
    println!(
        "edu-dma: PASS write into a freed dataspace page refused (frame reused: {}), new owner's page intact",
        if reused { "yes" } else { "no" }
    );
    let _ = new.free();
}

fn main() {
    let pci_ep = env::cap("pci").expect("pci endpoint");
    let out = match pci::Client::new(pci_ep).claim_mmio(0, slots::TASK, BAR) {
        Ok(o) => o,
        Err(e) => {
            println!("edu-dma: FAIL no device from pci: {:?}", e);
            sawmill_rt::exit(1);
        }
    };
    check!(
        out.vendor == 0x1234 && out.device == 0x11e8,
        "not an edu device: {:04x}:{:04x}",
        out.vendor,
        out.device
    );
    let id = reg_read32(0);
    check!(id & 0xff == 0xed, "identification register reads {:#x}", id);
    reg_write32(4, 0x1234_5678);
    check!(
        reg_read32(4) == !0x1234_5678u32,
        "liveness register does not invert"
    );
    println!("edu-dma: device {:#x} answers at {:#x}", id, BAR);

    // Three pages of our own: shared, canary (never shared), shared then unmapped. Never freed:
    // the third one leaves our address space below.
    let layout = core::alloc::Layout::from_size_align(3 * PAGE, PAGE).unwrap();
    // SAFETY: a non-zero-sized layout.
    let base = unsafe { alloc::alloc::alloc_zeroed(layout) } as u64;
    check!(base != 0, "no memory for the buffers");
    let (shared, canary, revoked) = (base, base + PAGE as u64, base + 2 * PAGE as u64);
    // SAFETY: these pages are ours (the allocation above) and mapped read-write.
    let page = |va: u64| unsafe { core::slice::from_raw_parts_mut(va as *mut u8, PAGE) };
    page(canary).fill(0x5a);

    let dev = match sys::dma_map(shared, 1) {
        Ok(a) => a,
        Err(e) => {
            println!("edu-dma: FAIL dma_map of the shared page: {}", e.name());
            sawmill_rt::exit(1);
        }
    };
    check!(
        !out.dma_confined || dev == shared,
        "device address {:#x} is not the IOVA {:#x}",
        dev,
        shared
    );
    for (i, b) in page(shared)[..256].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7).wrapping_add(1);
    }
    dma(dev, 256, false);
    dma(dev + 2048, 256, true);
    let (a, b) = page(shared).split_at(2048);
    check!(
        a[..256] == b[..256],
        "the device's copy into the shared page differs"
    );
    println!(
        "edu-dma: PASS DMA into the shared page (device address {:#x})",
        dev
    );

    if !out.dma_confined {
        println!(
            "edu-dma: DMA is not confined on this machine (no IOMMU); confinement checks skipped"
        );
        println!("edu-dma: PASS");
        return;
    }

    // 1. The canary by its address here: ours, but never shared with the device.
    dma(canary, 2048, true);
    settle();
    check!(
        page(canary).iter().all(|&x| x == 0x5a),
        "the device wrote into the unshared canary page"
    );
    println!("edu-dma: PASS write to an unshared page of ours refused, canary intact");

    // 2. The canary by its physical address: where a device without an IOMMU would write.
    let pa = sys::translate(canary).unwrap_or(0);
    dma(pa, 2048, true);
    settle();
    check!(
        page(canary).iter().all(|&x| x == 0x5a),
        "the device reached the canary by physical address"
    );
    println!("edu-dma: PASS write to the canary's physical address refused, canary intact");

    // 3. A read of unshared memory.
    dma(canary, 64, false);
    settle();
    println!("edu-dma: PASS read of an unshared page refused");

    // 4. A shared page, then unmapped: the device loses it with us.
    check!(
        sys::dma_map(revoked, 1).is_ok(),
        "dma_map of the second page"
    );
    // The refused read left the device's buffer undefined: load the pattern again.
    dma(dev, 256, false);
    dma(revoked, 256, true);
    check!(
        page(revoked)[..256] == page(shared)[..256],
        "DMA into the second shared page"
    );
    check!(
        sys::unmap(revoked, 1, sawmill_abi::UNMAP_SELF).is_ok(),
        "unmapping the second page"
    );
    dma(revoked, 256, true);
    settle();
    println!("edu-dma: PASS write to a page after we unmapped it refused");

    // 5. Hole 3 of issue 12: a page of a `mem` dataspace shared with the device, then the
    // dataspace freed. mem revokes the page from us; the device must lose it at the same time,
    // so when mem hands the frame to a new dataspace the device cannot write into it.
    if let Some(mem_ep) = env::cap("mem") {
        freed_dataspace(mem_ep, shared);
    }

    // Pages that are not ours to share are refused by the kernel.
    check!(
        sys::dma_map(revoked, 1).is_err(),
        "dma_map of an unmapped page succeeded"
    );
    check!(
        sys::dma_map(0x7fff_ffff_e000, 1).is_err(),
        "dma_map of an address beyond the domain succeeded"
    );
    check!(page(canary).iter().all(|&x| x == 0x5a), "canary changed");
    // The device still works for what is shared.
    page(shared)[2048..2304].fill(0);
    dma(dev + 2048, 256, true);
    let (a, b) = page(shared).split_at(2048);
    check!(
        a[..256] == b[..256],
        "the device no longer reaches the shared page"
    );
    println!("edu-dma: PASS");
}
