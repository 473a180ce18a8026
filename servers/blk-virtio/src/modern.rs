//! The modern (virtio 1.x) PCI transport of the virtio-blk driver.
//!
//! A modern-only virtio-pci device (`disable-legacy=on` in QEMU) has no I/O BAR: its registers
//! are four blocks in a memory BAR, found through vendor-specific capabilities in its PCI
//! configuration space (virtio 1.x, 4.1.4): common configuration (features, status, queue
//! set-up), notification (one doorbell per queue), ISR status and the device's own configuration
//! (virtio-blk: capacity). pci maps the BAR into the driver (`claim_mmio`) and lets it read the
//! configuration space (`config_read`); this module walks the capabilities, checks every block
//! lies inside the mapped BAR, and touches the device only through that mapping.
//!
//! The reason for this transport is DMA confinement: a modern device that negotiates
//! VIRTIO_F_ACCESS_PLATFORM sends its DMA through the platform's IOMMU, so under VT-d the driver
//! gives it IOVAs (its own virtual addresses, shared with `dma_map`) and the device reaches
//! nothing else. Without an IOMMU (pci says DMA is not confined), or if the device does not offer
//! ACCESS_PLATFORM (its DMA then bypasses the IOMMU), the driver gives physical addresses, as the
//! legacy transport does. No interrupt: pci hands out no Irq for a memory-BAR device, so the
//! driver polls the used ring, yielding between looks.

use super::{
    dma_alloc, Blk, Queue, D_NEXT, D_WRITE, MAX_BATCH, MAX_PAGES_PER_REQUEST, T_IN, WINDOW,
};
use alloc::vec::Vec;
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{fence, Ordering};
use sawmill_abi::kinfo;
use sawmill_blk_virtio_api::{layout, Config};
use sawmill_interfaces::pci;
use sawmill_interfaces::rpc::AfterReply;
use sawmill_rt::{env, println, slots, sys};

// Common configuration structure offsets (virtio 1.x, 4.1.4.3).
const C_DEVICE_FEATURE_SELECT: usize = 0x00;
const C_DEVICE_FEATURE: usize = 0x04;
const C_DRIVER_FEATURE_SELECT: usize = 0x08;
const C_DRIVER_FEATURE: usize = 0x0c;
const C_DEVICE_STATUS: usize = 0x14;
const C_QUEUE_SELECT: usize = 0x16;
const C_QUEUE_SIZE: usize = 0x18;
const C_QUEUE_ENABLE: usize = 0x1c;
const C_QUEUE_NOTIFY_OFF: usize = 0x1e;
const C_QUEUE_DESC: usize = 0x20;
const C_QUEUE_DRIVER: usize = 0x28;
const C_QUEUE_DEVICE: usize = 0x30;

/// Feature bits, as bit numbers in the 64-bit feature space.
pub const F_BLK_FLUSH: u64 = 1 << 9;
pub const F_VERSION_1: u64 = 1 << 32;
pub const F_ACCESS_PLATFORM: u64 = 1 << 33;

const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FEATURES_OK: u8 = 8;
const S_NEEDS_RESET: u8 = 0x40;
const S_FAILED: u8 = 0x80;

/// The device's register blocks, as mapped in the driver.
pub struct Modern {
    common: *mut u8,
    isr: *const u8,
    device: *const u8,
    notify_base: *mut u8,
    notify_mult: u32,
    notify_len: u32,
    /// Queue 0's doorbell, once the queue is set up.
    notify_q0: *mut u16,
}

impl Modern {
    /// Finds the four blocks in the device's capability list (read through pci; the walk and
    /// its checks are `sawmill_blk_virtio_api::layout`); the BAR is mapped at `bar` and is
    /// `bar_size` bytes. Refuses a device whose blocks are missing, in different BARs, or reach
    /// past the BAR.
    pub fn find(pci: &pci::Client, bar: *mut u8, bar_size: u64) -> Result<Modern, &'static str> {
        let l = layout::find(&mut |reg| pci.config_read(0, reg).ok(), bar_size)?;
        // pci mapped the first placed memory BAR: the blocks must be in that one (a device with
        // an MSI-X table BAR before them is refused rather than driven through the wrong BAR).
        let mapped = (0..6u32).find(|i| {
            pci.config_read(0, 0x10 + 4 * i)
                .is_ok_and(|v| v != 0 && v & 1 == 0)
        });
        if mapped != Some(l.bar as u32) {
            return Err("the virtio blocks are not in the BAR pci mapped");
        }
        // SAFETY: every block lies inside the BAR mapping pci made (`layout::find` checked it);
        // nothing is dereferenced here.
        let at = |b: layout::Block| unsafe { bar.add(b.offset as usize) };
        Ok(Modern {
            common: at(l.common),
            isr: at(l.isr),
            device: at(l.device),
            notify_base: at(l.notify),
            notify_mult: l.notify_mult,
            notify_len: l.notify.len,
            notify_q0: core::ptr::null_mut(),
        })
    }

    fn r8(&self, off: usize) -> u8 {
        // SAFETY: a field of the common block, inside the BAR mapping (`find`).
        unsafe { read_volatile(self.common.add(off)) }
    }
    fn w8(&self, off: usize, v: u8) {
        // SAFETY: as in `r8`.
        unsafe { write_volatile(self.common.add(off), v) }
    }
    fn r16(&self, off: usize) -> u16 {
        // SAFETY: as in `r8`; the field is naturally aligned.
        unsafe { read_volatile(self.common.add(off) as *const u16) }
    }
    fn w16(&self, off: usize, v: u16) {
        // SAFETY: as in `r16`.
        unsafe { write_volatile(self.common.add(off) as *mut u16, v) }
    }
    fn r32(&self, off: usize) -> u32 {
        // SAFETY: as in `r16`.
        unsafe { read_volatile(self.common.add(off) as *const u32) }
    }
    fn w32(&self, off: usize, v: u32) {
        // SAFETY: as in `r16`.
        unsafe { write_volatile(self.common.add(off) as *mut u32, v) }
    }
    /// A 64-bit field, written as two 32-bit halves (the spec allows it; low half first).
    fn w64(&self, off: usize, v: u64) {
        self.w32(off, v as u32);
        self.w32(off + 4, (v >> 32) as u32);
    }

    /// Resets the device and negotiates features: VERSION_1 is required, ACCESS_PLATFORM and
    /// FLUSH are taken when offered. Returns the accepted features, or why the device was
    /// refused (then marked FAILED).
    pub fn negotiate(&self) -> Result<u64, &'static str> {
        self.w8(C_DEVICE_STATUS, 0);
        while self.r8(C_DEVICE_STATUS) != 0 {
            core::hint::spin_loop();
        }
        self.w8(C_DEVICE_STATUS, S_ACK);
        self.w8(C_DEVICE_STATUS, S_ACK | S_DRIVER);
        self.w32(C_DEVICE_FEATURE_SELECT, 0);
        let lo = self.r32(C_DEVICE_FEATURE) as u64;
        self.w32(C_DEVICE_FEATURE_SELECT, 1);
        let offered = lo | (self.r32(C_DEVICE_FEATURE) as u64) << 32;
        if offered & F_VERSION_1 == 0 {
            self.w8(C_DEVICE_STATUS, S_FAILED);
            return Err("the device does not offer VIRTIO_F_VERSION_1");
        }
        let take = offered & (F_VERSION_1 | F_ACCESS_PLATFORM | F_BLK_FLUSH);
        self.w32(C_DRIVER_FEATURE_SELECT, 0);
        self.w32(C_DRIVER_FEATURE, take as u32);
        self.w32(C_DRIVER_FEATURE_SELECT, 1);
        self.w32(C_DRIVER_FEATURE, (take >> 32) as u32);
        self.w8(C_DEVICE_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
        if self.r8(C_DEVICE_STATUS) & S_FEATURES_OK == 0 {
            self.w8(C_DEVICE_STATUS, S_FAILED);
            return Err("the device refused our features");
        }
        Ok(take)
    }

    /// Queue 0's size as the device offers it (0: no queue).
    pub fn queue_size(&self) -> u16 {
        self.w16(C_QUEUE_SELECT, 0);
        self.r16(C_QUEUE_SIZE)
    }

    /// Gives the device queue 0 (descriptor table, driver and device areas at these device
    /// addresses), enables it and sets DRIVER_OK. Fails (device marked FAILED) if its doorbell
    /// lies outside the notify block.
    pub fn start(&mut self, desc: u64, driver: u64, device: u64) -> Result<(), &'static str> {
        self.w16(C_QUEUE_SELECT, 0);
        let off = self.r16(C_QUEUE_NOTIFY_OFF) as usize * self.notify_mult as usize;
        if off + 2 > self.notify_len as usize {
            self.w8(C_DEVICE_STATUS, S_FAILED);
            return Err("queue 0's doorbell lies outside the notify block");
        }
        self.w64(C_QUEUE_DESC, desc);
        self.w64(C_QUEUE_DRIVER, driver);
        self.w64(C_QUEUE_DEVICE, device);
        // SAFETY: inside the notify block (checked above), which `find` checked against the BAR.
        self.notify_q0 = unsafe { self.notify_base.add(off) } as *mut u16;
        self.w16(C_QUEUE_ENABLE, 1);
        self.w8(
            C_DEVICE_STATUS,
            S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK,
        );
        Ok(())
    }

    /// The device status (NEEDS_RESET: the device hit an error it cannot recover from).
    pub fn status(&self) -> u8 {
        self.r8(C_DEVICE_STATUS)
    }

    /// Capacity in 512-byte sectors (virtio-blk device configuration, offset 0).
    pub fn capacity(&self) -> u64 {
        // SAFETY: the first 8 bytes of the device block (`find` checked its length).
        unsafe {
            read_volatile(self.device as *const u32) as u64
                | (read_volatile(self.device.add(4) as *const u32) as u64) << 32
        }
    }

    /// Rings queue 0's doorbell.
    pub fn notify(&self) {
        // SAFETY: the doorbell address computed in `start`.
        unsafe { write_volatile(self.notify_q0, 0) }
    }

    /// Reads (and so clears) the ISR status, which deasserts the device's INTx line.
    pub fn ack_isr(&self) {
        // SAFETY: the ISR block, inside the BAR (`find`).
        let _ = unsafe { read_volatile(self.isr) };
    }
}

/// Where the modern BAR is mapped in the driver (above the receive window, below the stack).
const BAR_AT: u64 = 0x6000_0000;

/// Claims the device from pci as a memory-BAR device, negotiates, sets up queue 0 (in a DMA
/// dataspace, shared with the device when its DMA is confined) and returns the driver, or why
/// the device cannot be driven.
pub(super) fn init(pci_ep: u64, mem_ep: u64, ds_slot: u64) -> Result<Blk, &'static str> {
    let probe = match env::config::<Config>() {
        Ok(c) => c.stray_dma_probe,
        Err(env::ConfigError::Missing) => false,
        Err(_) => return Err("our config table is malformed"),
    };
    let pci = pci::Client::new(pci_ep);
    let c = pci
        .claim_mmio(0, slots::TASK, BAR_AT)
        .map_err(|_| "pci refused to hand out its memory BAR")?;
    let mut m = Modern::find(&pci, BAR_AT as *mut u8, c.bar_size as u64)?;
    let features = m.negotiate()?;
    // pci's binding confines only a device that translates its DMA through the platform.
    let confined = c.dma_confined && features & F_ACCESS_PLATFORM != 0;
    let size = m.queue_size();
    if size == 0 || size & (size - 1) != 0 || size < 16 {
        return Err("queue 0 missing or of a bad size");
    }
    let (used_off, total) = Queue::layout(size);
    // One DMA dataspace: the queue, then a page of request headers and status bytes.
    let pages = total as u64 / 4096 + 1;
    let (mem, pa) = dma_alloc(mem_ep, ds_slot, pages);
    let dev = if confined {
        sys::dma_map(mem as u64, pages).map_err(|_| "sharing the queue with the device failed")?
    } else {
        pa
    };
    m.start(dev, dev + 16 * size as u64, dev + used_off as u64)?;
    let sectors = m.capacity();
    println!(
        "blk-virtio: modern virtio-pci {:04x}:{:04x}, queue {} capacity {} sectors{}, {}",
        c.vendor,
        c.device,
        size,
        sectors,
        if features & F_BLK_FLUSH != 0 {
            ", flush"
        } else {
            ""
        },
        if confined {
            "ACCESS_PLATFORM: DMA confined by the IOMMU to what we share (device given our addresses)"
        } else if features & F_ACCESS_PLATFORM == 0 && c.dma_confined {
            "no ACCESS_PLATFORM: its DMA bypasses the IOMMU, device given physical addresses"
        } else {
            "no IOMMU: device given physical addresses"
        }
    );
    // SAFETY: the queue memory just allocated (zeroed), ours for good.
    let q = unsafe { Queue::at(mem, size) };
    let mut b = Blk {
        io: 0,
        irq: 0,
        notif: 0,
        q,
        sectors,
        // SAFETY: the page after the queue, inside the dataspace.
        hdr: unsafe { mem.add(total) },
        hdr_pa: dev + total as u64,
        regions: Vec::new(),
        dma_pages: [0; MAX_BATCH * MAX_PAGES_PER_REQUEST],
        next_window: WINDOW,
        modern: Some(m),
        confined,
        after: AfterReply::new(),
    };
    if probe {
        if !confined {
            return Err("stray_dma_probe needs a device whose DMA the IOMMU confines");
        }
        stray_dma_probe(&mut b, pa + total as u64 + CANARY as u64, total)?;
    }
    Ok(b)
}

/// Where in the header page the stray probe's canary lies (past headers and status bytes).
const CANARY: usize = 2048;

/// Test only (`stray_dma_probe`): gives the device one read of sector 2 (the ext2 superblock,
/// never all 0xa5) whose data buffer is `stray`, the physical address of the canary in our
/// header page (shared with the device at its IOVA only), as a driver that ignored the IOMMU
/// would. The device must not reach it: the IOMMU refuses the write (the kernel reports the
/// fault) and the canary keeps every byte, whatever the device then says (QEMU drops the
/// refused write and may even report success). The device is then reset and queue 0 (the
/// first `queue_bytes` of the DMA dataspace) set up afresh.
fn stray_dma_probe(b: &mut Blk, stray: u64, queue_bytes: usize) -> Result<(), &'static str> {
    println!(
        "blk-virtio: stray DMA probe: a read into physical address {:#x} (shared only at IOVA {:#x})",
        stray,
        b.hdr_pa + CANARY as u64
    );
    // SAFETY: header slot 0, status byte 0 and the canary, all in the header page.
    unsafe {
        write_volatile(b.hdr as *mut u32, T_IN);
        write_volatile(b.hdr.add(4) as *mut u32, 0);
        write_volatile(b.hdr.add(8) as *mut u64, 2);
        write_volatile(b.hdr.add(1024), 0xff);
        core::ptr::write_bytes(b.hdr.add(CANARY), 0xa5, 512);
    }
    b.set_desc(0, b.hdr_pa, 16, D_NEXT, 1);
    b.set_desc(1, stray, 512, D_NEXT | D_WRITE, 2);
    b.set_desc(2, b.hdr_pa + 1024, 1, D_WRITE, 0);
    // SAFETY: ring entry 0 and the idx field of the avail ring.
    unsafe { write_volatile(b.q.avail.add(2), 0) };
    fence(Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { write_volatile(b.q.avail.add(1), 1) };
    fence(Ordering::SeqCst);
    let m = b.modern.as_ref().ok_or("no modern transport")?;
    m.notify();
    let mut refused = None;
    for _ in 0..1_000_000 {
        if m.status() & S_NEEDS_RESET != 0 {
            refused = Some("it needs a reset");
            break;
        }
        fence(Ordering::SeqCst);
        // SAFETY: the used ring's idx field, written by the device.
        if unsafe { read_volatile(b.q.used.add(1)) } != 0 {
            // SAFETY: status byte 0.
            refused = Some(if unsafe { read_volatile(b.hdr.add(1024)) } == 0 {
                "the device saw success, its write was dropped"
            } else {
                "the request failed"
            });
            break;
        }
        sys::yield_now();
    }
    let Some(how) = refused else {
        return Err("stray DMA probe: the device never answered");
    };
    // SAFETY: the canary's bytes, in the header page.
    if (0..512).any(|i| unsafe { read_volatile(b.hdr.add(CANARY + i)) } != 0xa5) {
        return Err("stray DMA probe: the device wrote to a physical address");
    }
    // The kernel reports DMA faults on the timer tick: let it, so the report precedes ours.
    let t0 = sys::kernel_info(kinfo::TICKS).unwrap_or(0);
    while sys::kernel_info(kinfo::TICKS).unwrap_or(0) < t0 + 3 {
        sys::yield_now();
    }
    // Reset the device (negotiation starts with one) and give it a clean queue.
    m.negotiate()?;
    // SAFETY: the queue's bytes at the start of our DMA dataspace.
    unsafe { core::ptr::write_bytes(b.q.desc as *mut u8, 0, queue_bytes) };
    b.q.avail_idx = 0;
    b.q.used_idx = 0;
    let n = b.q.size as u64;
    let dev = b.hdr_pa - queue_bytes as u64;
    let used = dev + ((16 * n + 6 + 2 * n + 4095) & !4095);
    let m = b.modern.as_mut().ok_or("no modern transport")?;
    m.start(dev, dev + 16 * n, used)?;
    println!(
        "blk-virtio: PASS stray DMA refused, canary intact ({}); the device is reset and serves again",
        how
    );
    Ok(())
}
