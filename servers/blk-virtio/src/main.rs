//! The virtio-blk driver server.
//!
//! Drives one virtio-blk-pci device. A modern-only device (no I/O BAR 0) goes through the virtio
//! 1.x transport in `modern.rs` (memory BAR, DMA by IOVA under an IOMMU). Otherwise the legacy
//! (transitional) virtio-pci interface: the device registers are I/O BAR 0 and the interrupt is a
//! PCI INTx line. The driver gets both from the `pci` server, never from root: it `claim`s its device (its badge on `pci` says which) with
//! its own task capability, and pci grants it the BAR's ports and returns an Irq capability, which
//! the driver binds to a notification it makes itself (so it needs `kmem_kb`). Its virtqueue and
//! request headers live in a DMA dataspace of the memory server (`mem.alloc_dma`: physically
//! contiguous, its bus address known), mapped into the driver with `dataspace.map`. Arguments:
//! none; capabilities: `pci`, `mem`, the endpoint it serves (`blkN`, the first provided endpoint)
//! and a factory.
//!
//! Data path (no copy in the driver): a client first maps a region of its own memory into the
//! driver's receive window with `blk.share` (a map item); the driver records where the region
//! lies in its window. Requests then name byte offsets into that region; each becomes a
//! descriptor chain header → data pages → status, so the device DMAs straight into the client's
//! pages. Offsets outside the caller's region are refused (`BadBuffer`): a client can only name
//! memory it mapped itself.
//!
//! No physical address outlives a request: for each call the driver pins the pages its requests
//! cover (one `sys::pin` with `LIST`, which also translates them) before the device sees their
//! addresses, and unpins them when the device has finished. A page the client has freed since it shared it is no longer
//! mapped here (mem revoked it), so its request fails with `Revoked` and nothing else happens; a
//! page freed while the device works on it keeps its pins, so mem holds the frame back until the
//! device is done (docs/memory.md, "DMA and frame reuse").
//!
//! All requests of one call are queued before the single notify, so up to 16 are in flight on
//! the device at once.
//!
//! Restartable (manifest `restart = "restart"`): the driver keeps no state a client cannot
//! rebuild. A new incarnation resets the device before touching its queue; its clients find it
//! in the slot of the old one, `share` their region again (a call before that is `NotShared`)
//! and resubmit what was in flight (servers/ext2/src/cache.rs).
#![no_std]
#![no_main]

extern crate alloc;

mod modern;

use alloc::vec::Vec;
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{fence, Ordering};
use sawmill_abi::{pin, Error, ObjKind};
use sawmill_interfaces::blk::{self, InfoOut};
use sawmill_interfaces::rpc::{self, AfterReply, FaultKind as Kind, IpcResult, Map, Next};
use sawmill_interfaces::{dataspace, mem, pci, BlkError, MapFlags, PciError};
use sawmill_rt::port::{inb, inl, inw, outb, outl, outw};
use sawmill_rt::{env, println, slots, sys, thread};

sawmill_rt::entry!(main);

/// The receive window for shared regions.
const WINDOW: u64 = 0x4000_0000;
const WINDOW_SIZE: u64 = 0x1000_0000;
const MAX_BATCH: usize = 16;
/// How long the driver waits for the device to complete a request it dropped (an injected fault)
/// before it ends itself for a restart.
const REQUEST_DEADLINE_MS: u64 = 200;
const MAX_SECTORS: u16 = 64;
/// Pages one request of `MAX_SECTORS` can touch (32 KiB, not page aligned).
const MAX_PAGES_PER_REQUEST: usize = 9;
/// Status reads a legacy device's reset is given to complete.
const RESET_POLLS: u32 = 100_000;

// Legacy virtio-pci register offsets (virtio 1.x spec, 4.1.4.8 "Legacy Interfaces").
const R_HOST_FEATURES: u16 = 0x00;
const R_GUEST_FEATURES: u16 = 0x04;
const R_QUEUE_PFN: u16 = 0x08;
const R_QUEUE_SIZE: u16 = 0x0c;
const R_QUEUE_SEL: u16 = 0x0e;
const R_QUEUE_NOTIFY: u16 = 0x10;
const R_STATUS: u16 = 0x12;
const R_ISR: u16 = 0x13;
const R_CONFIG: u16 = 0x14;
const F_BLK_FLUSH: u32 = 1 << 9;
const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FAILED: u8 = 0x80;
const D_NEXT: u16 = 1;
const D_WRITE: u16 = 2;
const T_IN: u32 = 0;
const T_OUT: u32 = 1;
const T_FLUSH: u32 = 4;

/// Where the DMA dataspace is mapped in the driver.
const DMA_AT: u64 = 0x3000_0000;

/// `pages` of physically contiguous, zeroed memory for the device: a DMA dataspace of the memory
/// server, mapped page by page at `DMA_AT` (the driver is paged by root and has no region
/// manager; every page is mapped up front, so it never faults). Returns its address here and its
/// bus address. The dataspace stays the driver's for good (mem frees it when the driver dies).
fn dma_alloc(mem_ep: u64, ds_slot: u64, pages: u64) -> (*mut u8, u64) {
    let out = match mem::Client::new(mem_ep).alloc_dma(pages, ds_slot) {
        Ok(o) => o,
        Err(e) => panic!("blk-virtio: no DMA memory from mem: {:?}", e),
    };
    let ds = dataspace::Client::new(out.ds);
    let rw = MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE;
    for i in 0..pages {
        let va = DMA_AT + i * 4096;
        ds.map(i * 4096, va, 1, rw, [va, 4096])
            .expect("mapping the DMA dataspace");
        // The device is told physical addresses: check mem's answer against the page tables.
        assert!(
            sys::translate(va) == Ok(out.paddr + i * 4096),
            "DMA dataspace is not contiguous"
        );
    }
    (DMA_AT as *mut u8, out.paddr)
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

struct Queue {
    size: u16,
    desc: *mut Desc,
    avail: *mut u16,
    used: *const u16,
    /// Our next avail index and the used index we have consumed up to.
    avail_idx: u16,
    used_idx: u16,
}

impl Queue {
    /// The split virtqueue's layout for `size` entries (legacy and modern alike): the used
    /// ring's offset (page-aligned) and the bytes of the whole queue.
    fn layout(size: u16) -> (usize, usize) {
        let n = size as usize;
        let used_off = (16 * n + 6 + 2 * n + 4095) & !4095;
        (used_off, used_off + ((6 + 8 * n + 4095) & !4095))
    }

    /// The queue of `size` entries laid out at `mem` as [`Queue::layout`] says.
    ///
    /// # Safety
    /// `mem` points at that many bytes of zeroed memory, mapped for the queue's lifetime and used
    /// for nothing else.
    unsafe fn at(mem: *mut u8, size: u16) -> Queue {
        let (used_off, _) = Queue::layout(size);
        Queue {
            size,
            desc: mem as *mut Desc,
            // SAFETY: inside the queue memory the caller vouches for.
            avail: unsafe { mem.add(16 * size as usize) } as *mut u16,
            // SAFETY: likewise.
            used: unsafe { mem.add(used_off) } as *const u16,
            avail_idx: 0,
            used_idx: 0,
        }
    }
}

/// A client's shared region: where it is in our space (its physical addresses are looked up
/// per request, never kept).
struct Region {
    badge: u64,
    base: u64,
    pages: u64,
}

struct Blk {
    io: u16,
    irq: u64,
    /// The notification our Irq capability signals.
    notif: u64,
    q: Queue,
    sectors: u64,
    /// Request headers (16 bytes each at `i * 16`) and status bytes (at `1024 + i`).
    hdr: *mut u8,
    hdr_pa: u64,
    regions: Vec<Region>,
    /// The physical addresses of the pages of the call being served, in request order (pinned
    /// from before the device sees them until it has finished; kept here so that a call need
    /// not clear a buffer of its own).
    dma_pages: [u64; MAX_BATCH * MAX_PAGES_PER_REQUEST],
    next_window: u64,
    /// The modern transport's registers (None: legacy, registers in I/O BAR 0 at `io`).
    modern: Option<modern::Modern>,
    /// The device's DMA goes through the IOMMU: it is given our own addresses (IOVAs, shared
    /// with `dma_map`), never physical ones.
    confined: bool,
    /// Post-reply work of the shared loop: the receive window, moved past every share.
    after: AfterReply,
}

impl Blk {
    fn init(io: u16, irq: u64, notif: u64, line: u8, mem_ep: u64, ds_slot: u64) -> Blk {
        // Reset first, before any queue register is touched: a previous incarnation of this
        // driver (root restarts it: docs/ARCHITECTURE.md, "Supervision") may have left requests
        // in flight whose queue and buffers are freed by now. The reset ends them, so the device
        // never DMAs into pages that have changed hands (the modern transport does the same in
        // `negotiate`). Reading the status back as 0 says the reset is done (bounded: a device
        // that never says so is driven anyway and fails its requests).
        outb(io + R_STATUS, 0);
        for _ in 0..RESET_POLLS {
            if inb(io + R_STATUS) == 0 {
                break;
            }
        }
        outb(io + R_STATUS, S_ACK);
        outb(io + R_STATUS, S_ACK | S_DRIVER);
        let host = inl(io + R_HOST_FEATURES);
        outl(io + R_GUEST_FEATURES, host & F_BLK_FLUSH);
        outw(io + R_QUEUE_SEL, 0);
        let size = inw(io + R_QUEUE_SIZE);
        if size == 0 || size & (size - 1) != 0 {
            outb(io + R_STATUS, S_FAILED);
            panic!("virtio-blk: bad queue size {}", size);
        }
        let (_, total) = Queue::layout(size);
        // One DMA dataspace: the queue, then a page of request headers and status bytes.
        let (mem, pa) = dma_alloc(mem_ep, ds_slot, total as u64 / 4096 + 1);
        outl(io + R_QUEUE_PFN, (pa >> 12) as u32);
        // SAFETY: the page after the queue, inside the dataspace just mapped.
        let (hdr, hdr_pa) = (unsafe { mem.add(total) }, pa + total as u64);
        let sectors = inl(io + R_CONFIG) as u64 | (inl(io + R_CONFIG + 4) as u64) << 32;
        outb(io + R_STATUS, S_ACK | S_DRIVER | S_DRIVER_OK);
        // SAFETY: the freshly allocated, zeroed queue memory, ours for good.
        let q = unsafe { Queue::at(mem, size) };
        println!("blk-virtio: io {:#x} irq {} queue {} capacity {} sectors{} (queue in DMA memory at {:#x})", io, line, size, sectors, if host & F_BLK_FLUSH != 0 { ", flush" } else { "" }, pa);
        Blk {
            io,
            irq,
            notif,
            q,
            sectors,
            hdr,
            hdr_pa,
            regions: Vec::new(),
            dma_pages: [0; MAX_BATCH * MAX_PAGES_PER_REQUEST],
            next_window: WINDOW,
            modern: None,
            confined: false,
            after: AfterReply::new(),
        }
    }

    fn set_desc(&mut self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        // SAFETY: i < queue size (callers check the chain fits), inside the descriptor table.
        unsafe {
            write_volatile(
                self.q.desc.add(i as usize),
                Desc {
                    addr,
                    len,
                    flags,
                    next,
                },
            )
        };
    }

    /// The driver's disk fault points (fault injection, docs/ARCHITECTURE.md §4.1), inert unless
    /// root armed one: a failed request (`EIO`, as the device reports it), or a dropped one —
    /// the device never completes it, so the driver's request deadline runs out and the driver
    /// ends itself as a device it can no longer trust; root restarts it (manifest policy), the
    /// new incarnation resets the device and its client resubmits.
    fn disk_fault(&mut self) -> Result<(), BlkError> {
        if rpc::take_fault(Kind::Eio).is_some() {
            println!("blk-virtio: injected fault: the disk request fails (EIO)");
            return Err(BlkError::Io);
        }
        if rpc::take_fault(Kind::Drop).is_some() {
            println!("blk-virtio: injected fault: the device drops the disk request");
            let khz = sawmill_rt::clock::Wall::get().khz;
            let deadline = sys::rdtsc() + REQUEST_DEADLINE_MS * khz;
            while sys::rdtsc() < deadline {
                if sys::notify_wait_until(self.notif, deadline).is_err() {
                    sys::yield_now();
                }
            }
            println!(
                "blk-virtio: a request was not completed within {} ms: ending for a restart",
                REQUEST_DEADLINE_MS
            );
            sawmill_rt::exit(1);
        }
        Ok(())
    }

    /// Queues the chains built in descriptors, one head per request, notifies once, and waits
    /// until the device has used all of them.
    fn submit_and_wait(&mut self, heads: &[u16]) {
        let n = self.q.size as usize;
        for &h in heads {
            // SAFETY: ring entry inside the avail ring (flags, idx, ring[n]).
            unsafe { write_volatile(self.q.avail.add(2 + (self.q.avail_idx as usize % n)), h) };
            self.q.avail_idx = self.q.avail_idx.wrapping_add(1);
        }
        fence(Ordering::SeqCst);
        // SAFETY: the avail ring's idx field.
        unsafe { write_volatile(self.q.avail.add(1), self.q.avail_idx) };
        fence(Ordering::SeqCst);
        match &self.modern {
            Some(m) => m.notify(),
            None => outw(self.io + R_QUEUE_NOTIFY, 0),
        }
        let want = self.q.used_idx.wrapping_add(heads.len() as u16);
        loop {
            fence(Ordering::SeqCst);
            // SAFETY: the used ring's idx field, written by the device.
            let idx = unsafe { read_volatile(self.q.used.add(1)) };
            if idx == want {
                break;
            }
            if let Some(m) = &self.modern {
                // No interrupt for a memory-BAR device: poll, letting others run meanwhile.
                m.ack_isr();
                sys::yield_now();
                continue;
            }
            let _ = sys::notify_wait(self.notif, 0);
            // Reading the ISR deasserts the (level-triggered) line; then unmask it.
            let _ = inb(self.io + R_ISR);
            let _ = sys::irq_ack(self.irq);
        }
        self.q.used_idx = want;
    }

    fn rw(
        &mut self,
        badge: u64,
        write: bool,
        n: u32,
        sector: [u64; 16],
        off: [u32; 16],
        count: [u16; 16],
    ) -> Result<(), BlkError> {
        let n = n as usize;
        if n == 0 || n > MAX_BATCH {
            return Err(BlkError::TooMany);
        }
        let r = self
            .regions
            .iter()
            .position(|r| r.badge == badge)
            .ok_or(BlkError::NotShared)?;
        // Check everything before touching the queue: a bad request fails the call as a whole.
        for i in 0..n {
            let end = sector[i]
                .checked_add(count[i] as u64)
                .ok_or(BlkError::OutOfRange)?;
            if count[i] == 0 || count[i] > MAX_SECTORS || end > self.sectors {
                return Err(BlkError::OutOfRange);
            }
            let len = count[i] as u64 * 512;
            if !off[i].is_multiple_of(512) || off[i] as u64 + len > self.regions[r].pages * 4096 {
                return Err(BlkError::BadBuffer);
            }
        }
        self.disk_fault()?;
        // Pin (and translate) every page of the batch, one call per 64 pages: their addresses
        // are valid until the unpin below, after the device has finished with them. The page
        // addresses go straight into our message words, where the kernel answers.
        let base = self.regions[r].base;
        let how = pin::LIST | if write { 0 } else { pin::DEVICE_WRITES };
        let (mut k, mut done) = (0, 0);
        for i in 0..n {
            let first = off[i] as u64 / 4096;
            let last = (off[i] as u64 + count[i] as u64 * 512 - 1) / 4096;
            for p in first..=last {
                sawmill_rt::utcb().mr[k - done] = base + p * 4096;
                k += 1;
                if k - done == pin::MAX_PAGES as usize || (i == n - 1 && p == last) {
                    if let Err(e) = sys::pin(0, (k - done) as u64, how) {
                        let _ = sys::unpin_all();
                        return Err(match e {
                            Error::Fault => BlkError::Revoked,
                            _ => BlkError::BadBuffer,
                        });
                    }
                    // The kernel wrote the addresses into our message words.
                    self.dma_pages[done..k].copy_from_slice(&sawmill_rt::utcb().mr[..k - done]);
                    done = k;
                }
            }
        }
        let mut heads = [0u16; MAX_BATCH];
        let mut d: u16 = 0;
        // Index in `dma_pages` of the first page of request i.
        let mut page = 0;
        for i in 0..n {
            // SAFETY: header slot i of the header page.
            unsafe {
                let h = self.hdr.add(i * 16);
                write_volatile(h as *mut u32, if write { T_OUT } else { T_IN });
                write_volatile(h.add(4) as *mut u32, 0);
                write_volatile(h.add(8) as *mut u64, sector[i]);
                write_volatile(self.hdr.add(1024 + i), 0xff);
            }
            heads[i] = d;
            self.set_desc(d, self.hdr_pa + i as u64 * 16, 16, D_NEXT, d + 1);
            d += 1;
            let mut pos = off[i] as u64;
            let mut left = count[i] as u64 * 512;
            while left > 0 {
                let chunk = (4096 - pos % 4096).min(left);
                // Confined: the device reaches the region at our own addresses (shared with
                // `dma_map` when it arrived); else at the pinned pages' physical addresses.
                let pa = if self.confined {
                    self.regions[r].base + pos
                } else {
                    self.dma_pages[page + (pos / 4096 - off[i] as u64 / 4096) as usize] + pos % 4096
                };
                self.set_desc(
                    d,
                    pa,
                    chunk as u32,
                    D_NEXT | if write { 0 } else { D_WRITE },
                    d + 1,
                );
                d += 1;
                pos += chunk;
                left -= chunk;
            }
            self.set_desc(d, self.hdr_pa + 1024 + i as u64, 1, D_WRITE, 0);
            d += 1;
            page += ((off[i] as u64 + count[i] as u64 * 512 - 1) / 4096 - off[i] as u64 / 4096)
                as usize
                + 1;
        }
        debug_assert!(d <= self.q.size);
        self.submit_and_wait(&heads[..n]);
        let _ = sys::unpin_all();
        for i in 0..n {
            // SAFETY: status byte i, written by the device.
            if unsafe { read_volatile(self.hdr.add(1024 + i)) } != 0 {
                return Err(BlkError::Io);
            }
        }
        Ok(())
    }
}

impl Blk {
    /// Forgets the regions of clients that died (issue 16: a restarted PFS shares its new cache
    /// under the same badge): their pages went with the dead task's memory, so the first page
    /// no longer translates. Requests are synchronous, so no DMA into them is in flight. The
    /// last region's window space is handed out again (`reuse`: not while a share's pages have
    /// landed after it already).
    fn forget_dead_regions(&mut self, reuse: bool) {
        let mut i = 0;
        while i < self.regions.len() {
            let r = &self.regions[i];
            if sys::translate(r.base).is_ok() {
                i += 1;
                continue;
            }
            if reuse && r.base + r.pages * 4096 == self.next_window {
                self.next_window = r.base;
                // The next share lands there: the window the loop arms starts there too.
                self.after
                    .receive_window(r.base, WINDOW + WINDOW_SIZE - r.base);
            }
            self.regions.swap_remove(i);
        }
    }
}

impl blk::Server for Blk {
    fn info(&mut self, _badge: u64) -> Result<InfoOut, BlkError> {
        self.forget_dead_regions(true);
        Ok(InfoOut {
            sectors: self.sectors,
            window: self.next_window,
            window_size: WINDOW + WINDOW_SIZE - self.next_window,
        })
    }
    fn read(
        &mut self,
        badge: u64,
        n: u32,
        sector: [u64; 16],
        off: [u32; 16],
        count: [u16; 16],
    ) -> Result<(), BlkError> {
        self.rw(badge, false, n, sector, off, count)
    }
    fn write(
        &mut self,
        badge: u64,
        n: u32,
        sector: [u64; 16],
        off: [u32; 16],
        count: [u16; 16],
    ) -> Result<(), BlkError> {
        self.rw(badge, true, n, sector, off, count)
    }
    /// The map item has already landed at the start of our window; `region` is what the client
    /// says it mapped, which must be exactly the pages that arrived. The window then moves past
    /// whatever arrived (accepted or not), so it only ever receives new shares.
    fn share(&mut self, badge: u64, region: Map) -> Result<(), BlkError> {
        self.forget_dead_regions(false);
        let (base, end) = (self.next_window, WINDOW + WINDOW_SIZE);
        let mut va = base;
        while va < end && sys::translate(va).is_ok() {
            va += 4096;
        }
        self.next_window = va;
        self.after.receive_window(va, end - va);
        let pages = (va - base) / 4096;
        if pages == 0
            || region.dst != base
            || region.pages != pages
            || self.regions.iter().any(|r| r.badge == badge)
        {
            return Err(BlkError::NotShared);
        }
        if self.confined {
            // The device reaches only what we share with it: this region, at its addresses here.
            if let Err(e) = sys::dma_map(base, pages) {
                println!(
                    "blk-virtio: sharing {} pages at {:#x} with the device failed: {}",
                    pages,
                    base,
                    e.name()
                );
                return Err(BlkError::NotShared);
            }
        }
        self.regions.push(Region { badge, base, pages });
        Ok(())
    }
    fn flush(&mut self, _badge: u64) -> Result<(), BlkError> {
        self.disk_fault()?;
        // SAFETY: header slot 0 and status byte 0.
        unsafe {
            write_volatile(self.hdr as *mut u32, T_FLUSH);
            write_volatile(self.hdr.add(4) as *mut u32, 0);
            write_volatile(self.hdr.add(8) as *mut u64, 0);
            write_volatile(self.hdr.add(1024), 0xff);
        }
        self.set_desc(0, self.hdr_pa, 16, D_NEXT, 1);
        self.set_desc(1, self.hdr_pa + 1024, 1, D_WRITE, 0);
        self.submit_and_wait(&[0]);
        // SAFETY: status byte 0.
        if unsafe { read_volatile(self.hdr.add(1024)) } != 0 {
            return Err(BlkError::Io);
        }
        Ok(())
    }
}

/// The driver as the loop serves it: `blk` requests, whose `share` map item lands in the receive
/// window the loop arms before every receive.
impl rpc::Serve for Blk {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        // The kernel maps a message's map items into the window whatever the request, and says
        // where they landed; only `share` keeps them. What any other request brought is unmapped
        // once it is answered, so no client can fill the window ahead of another's share.
        if m.tag.maps() != 0 && m.tag.label() != blk::op::SHARE {
            let landed = &sawmill_rt::utcb().map_items;
            for it in landed.iter().take(m.tag.maps()) {
                let pages = if it.flags & sawmill_abi::map::HUGE != 0 {
                    it.pages * 512
                } else {
                    it.pages
                };
                self.after.unmap(it.dst, pages, sawmill_abi::UNMAP_SELF);
            }
        }
        blk::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

fn main() {
    let pci_ep = env::cap("pci").expect("pci endpoint");
    let Some(mem_ep) = env::cap("mem") else {
        println!("blk-virtio: FAIL the manifest gives us no `mem` (DMA memory)");
        return;
    };
    let (irq, notif, ds_slot) = (
        thread::alloc_slot(),
        thread::alloc_slot(),
        thread::alloc_slot(),
    );
    // Our ports and interrupt come from pci: it grants the ports to our task (we lend it our task
    // capability for the call; pci deletes its copy) and returns the Irq capability.
    let mut b = match pci::Client::new(pci_ep).claim(0, slots::TASK, irq) {
        Ok(c) => {
            if let Err(e) = sys::factory_create(slots::FACTORY, ObjKind::Notification, notif, 0)
                .and_then(|_| sys::irq_bind(irq, notif, 1 << c.line))
            {
                println!("blk-virtio: FAIL binding irq {}: {}", c.line, e.name());
                return;
            }
            Blk::init(c.io_base as u16, irq, notif, c.line, mem_ep, ds_slot)
        }
        // No I/O BAR 0: a modern-only device, its registers in a memory BAR.
        Err(rpc::Error::App(PciError::WrongBar)) => match modern::init(pci_ep, mem_ep, ds_slot) {
            Ok(b) => b,
            Err(e) => {
                println!("blk-virtio: FAIL modern virtio device: {}", e);
                return;
            }
        },
        Err(e) => {
            println!("blk-virtio: FAIL no device from pci: {:?}", e);
            return;
        }
    };
    // Our endpoint: the first one the manifest says we provide.
    let Some((ep, _)) = env::served() else {
        println!("blk-virtio: FAIL the manifest gives us no endpoint to serve");
        return;
    };
    b.after
        .receive_window(b.next_window, WINDOW + WINDOW_SIZE - b.next_window);
    let _ = rpc::serve(ep, &mut b);
}
