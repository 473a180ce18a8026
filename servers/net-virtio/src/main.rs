//! The virtio-net driver server.
//!
//! Drives one virtio-net-pci device through the legacy (transitional) virtio-pci interface: its
//! registers are I/O BAR 0 and its interrupt a PCI INTx line, both granted by the `pci` server
//! (`claim`), as for blk-virtio. Our own code rather than the `virtio-drivers` crate: that crate's
//! PCI transport is modern-only (registers in a memory BAR, which pci hands out without an
//! interrupt, so the driver would have to poll), and its `Hal` wants to translate every buffer
//! itself, where here the device's addresses come from the driver's own table of the session's
//! pinned pages.
//!
//! One session at a time (`interfaces/net.idl`): a stack attaches a dataspace of its own (the
//! rings and packet slots of `sawmill_net_virtio_api::session`). The driver maps it, pins its
//! pages and keeps their physical addresses in its own table; a descriptor names a slot, never
//! an address. Each queued packet is two device descriptors: the 10-byte virtio-net header in the
//! driver's private DMA memory, then the slot, so frames start at a slot's first byte. Up to 64
//! frames are in flight in each direction (the session rings' size).
//!
//! Send completions interrupt only while the stack waits for a send slot (a word it sets in the
//! session, `Shared::set_tx_wait`); otherwise each pump (the stack's next kick) reaps them and
//! they wake nobody: a frame sent costs one kick, not a kick, an interrupt and a wake.
//!
//! Threads: the main thread serves `net` (attach, detach, info); the I/O thread waits on one
//! notification for the device's interrupt and the stack's kick and moves descriptors between the
//! session rings and the virtqueues; the fault thread is the I/O thread's pager. The I/O thread
//! is the only one that touches session memory: if the stack frees it under the driver, the I/O
//! thread faults, the fault thread diverts it to `recover`, which resets the device, ends that
//! session and goes back to serving. Any other fault is root's (it ends the driver).
//!
//! Restartable (manifest `restart = "restart"`): the driver keeps nothing a stack cannot give it
//! again. A new incarnation resets the device (and waits until it reads back reset) before it
//! allocates or touches a queue, so nothing a dead incarnation queued reaches memory that has
//! changed hands. The stack learns of the death from the `token` it gave with `attach` (the
//! driver's capabilities die with it, the stack's watch on the token fires), finds the new
//! incarnation in the same slot (root puts it there) and attaches again; frames lost meanwhile
//! are TCP's to send again (docs/net.md, "Driver restart").
//!
//! Capabilities: `pci`, `mem` (DMA memory for the virtqueues), the endpoint it serves (the first
//! provided), a factory (notifications, threads, an endpoint: `kmem_kb`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{fence, AtomicU64, Ordering};
use sawmill_abi::{label, rights, ObjKind};
use sawmill_interfaces::net::{self, InfoOut};
use sawmill_interfaces::rpc::{self, AfterReply, IpcResult, Map, MsgTag, Next, Reply};
use sawmill_interfaces::{dataspace, mem, pci, MapFlags, NetError};
use sawmill_net_virtio_api::session::{
    Bad, DriverSide, Shared, SESSION_BYTES, SESSION_PAGES, SLOT_SIZE,
};
use sawmill_rt::port::{inb, inl, inw, outb, outl, outw};
use sawmill_rt::{env, ipc, println, slots, sys, thread};

sawmill_rt::entry!(main);

// Legacy virtio-pci register offsets (virtio 1.x spec, 4.1.4.8 "Legacy Interfaces").
const R_HOST_FEATURES: u16 = 0x00;
const R_GUEST_FEATURES: u16 = 0x04;
const R_QUEUE_PFN: u16 = 0x08;
const R_QUEUE_SIZE: u16 = 0x0c;
const R_QUEUE_SEL: u16 = 0x0e;
const R_QUEUE_NOTIFY: u16 = 0x10;
const R_STATUS: u16 = 0x12;
const R_ISR: u16 = 0x13;
/// Device configuration without MSI-X: the MAC address first.
const R_CONFIG: u16 = 0x14;
const F_NET_MAC: u32 = 1 << 5;
const S_ACK: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FAILED: u8 = 0x80;
const D_NEXT: u16 = 1;
const D_WRITE: u16 = 2;
/// The avail ring's flag asking the device for no interrupt when it uses a buffer.
const AVAIL_NO_INTERRUPT: u16 = 1;
const QUEUE_RX: u16 = 0;
const QUEUE_TX: u16 = 1;
/// The legacy virtio-net header without mergeable buffers.
const NET_HDR: u64 = 10;
/// Most packets per virtqueue (two descriptors each); the session rings hold 64 anyway.
const MAX_PACKETS: u16 = 128;
const MTU: u32 = 1500;

/// Where the virtqueues' DMA memory is mapped.
const DMA_AT: u64 = 0x3000_0000;
/// The two places a session's memory may be: the live session's, and the receive window where
/// the next `attach` lands (the other one). A session ended by a fault leaves the window open.
const AREAS: [u64; 2] = [0x5000_0000, 0x5100_0000];
/// Bits of the I/O thread's notification besides the interrupt line's.
const KICK_BIT: u64 = 1 << 32;
/// Refusals logged per session; the rest are counted.
const LOG_REFUSALS: u32 = 8;
/// Status reads a legacy device's reset is given to complete.
const RESET_POLLS: u32 = 100_000;
const THREAD_STACK: usize = 64 * 1024;

/// One split virtqueue in the driver's DMA memory. Packet `k` uses descriptors `2k` (the header,
/// at `hdr + 16k`) and `2k + 1` (the slot).
struct Vq {
    index: u16,
    size: u16,
    mem: *mut u8,
    pa: u64,
    used_off: usize,
    avail_idx: u16,
    used_idx: u16,
    /// Packet numbers free to queue, and which slot each queued one carries.
    free: Vec<u16>,
    slot_of: [u16; MAX_PACKETS as usize],
    /// Bus address of this queue's headers (16 bytes per packet).
    hdr_pa: u64,
}

impl Vq {
    /// Bytes of the split queue's layout for `size` entries: the used ring's (page-aligned)
    /// offset and the whole.
    fn layout(size: u16) -> (usize, usize) {
        let n = size as usize;
        let used_off = (16 * n + 6 + 2 * n + 4095) & !4095;
        (used_off, used_off + ((6 + 8 * n + 4095) & !4095))
    }

    /// Empties the queue (its memory zeroed, every packet free) and gives it to the device.
    fn start(&mut self, io: u16) {
        let (_, total) = Vq::layout(self.size);
        // SAFETY: the queue's own DMA memory (mapped for good, `total` bytes).
        unsafe { core::ptr::write_bytes(self.mem, 0, total) };
        self.avail_idx = 0;
        self.used_idx = 0;
        self.free = (0..(self.size / 2).min(MAX_PACKETS)).rev().collect();
        outw(io + R_QUEUE_SEL, self.index);
        outl(io + R_QUEUE_PFN, (self.pa >> 12) as u32);
    }

    fn set_desc(&mut self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        debug_assert!(i < self.size);
        // SAFETY: descriptor i of the table at the start of the queue memory.
        unsafe {
            let d = self.mem.add(16 * i as usize);
            write_volatile(d as *mut u64, addr);
            write_volatile(d.add(8) as *mut u32, len);
            write_volatile(d.add(12) as *mut u16, flags);
            write_volatile(d.add(14) as *mut u16, next);
        }
    }

    /// Queues packet `k`: header then `len` bytes at device address `pa` (written by the device
    /// if `receive`). Published by [`Vq::publish`].
    fn queue(&mut self, k: u16, pa: u64, len: u32, receive: bool) {
        let w = if receive { D_WRITE } else { 0 };
        self.set_desc(
            2 * k,
            self.hdr_pa + 16 * k as u64,
            NET_HDR as u32,
            D_NEXT | w,
            2 * k + 1,
        );
        self.set_desc(2 * k + 1, pa, len, w, 0);
        let n = self.size as usize;
        // SAFETY: avail ring entry (flags, idx, ring[n]) right after the descriptor table.
        unsafe {
            let avail = self.mem.add(16 * n) as *mut u16;
            write_volatile(avail.add(2 + self.avail_idx as usize % n), 2 * k);
        }
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    /// Asks the device for an interrupt when it finishes a packet, or not (legacy virtio's
    /// `VRING_AVAIL_F_NO_INTERRUPT`: a hint; used entries are looked at afterwards either way).
    fn set_interrupts(&mut self, on: bool) {
        let flags = if on { 0 } else { AVAIL_NO_INTERRUPT };
        // SAFETY: the avail ring's flags field, right after the descriptor table.
        unsafe { write_volatile(self.mem.add(16 * self.size as usize) as *mut u16, flags) };
        fence(Ordering::SeqCst);
    }

    /// Makes the queued packets visible and tells the device.
    fn publish(&mut self, io: u16) {
        fence(Ordering::SeqCst);
        // SAFETY: the avail ring's idx field.
        unsafe {
            write_volatile(
                (self.mem.add(16 * self.size as usize) as *mut u16).add(1),
                self.avail_idx,
            )
        };
        fence(Ordering::SeqCst);
        outw(io + R_QUEUE_NOTIFY, self.index);
    }

    /// The next packet the device has finished: its number and the bytes it wrote.
    fn next_used(&mut self) -> Option<(u16, u32)> {
        fence(Ordering::SeqCst);
        // SAFETY: the used ring (flags, idx, ring[n] of (id, len)) at `used_off`.
        unsafe {
            let used = self.mem.add(self.used_off);
            if read_volatile((used as *const u16).add(1)) == self.used_idx {
                return None;
            }
            let e = used.add(4 + 8 * (self.used_idx % self.size) as usize);
            let id = read_volatile(e as *const u32);
            let len = read_volatile(e.add(4) as *const u32);
            self.used_idx = self.used_idx.wrapping_add(1);
            // The device names the head descriptor, 2k for packet k.
            let k = (id / 2) as u16;
            (id.is_multiple_of(2) && k < MAX_PACKETS).then_some((k, len))
        }
    }
}

/// The attached stack.
struct Session {
    badge: u64,
    /// Where its memory is mapped here (one of `AREAS`).
    at: u64,
    shared: Shared,
    /// Physical address of each page of the session memory (pinned while the session lasts).
    pages: [u64; SESSION_PAGES],
    side: DriverSide,
    /// The stack's notification (our copy) and the bits it wants.
    wake: u64,
    bits: u64,
    /// The stack's token (`net.attach`): held while the session lasts, dropped when it ends,
    /// which the stack's watch on it reports.
    token: u64,
    refused: u32,
}

impl Session {
    fn slot_pa(&self, slot: u16) -> u64 {
        let off = Shared::slot_offset(slot);
        self.pages[off / 4096] + (off % 4096) as u64
    }

    /// One line per refusal, up to `LOG_REFUSALS` per session.
    fn refuse(&mut self, bad: Bad) {
        self.refused += 1;
        if self.refused <= LOG_REFUSALS {
            println!(
                "net-virtio: session of badge {}: refused: {}{}",
                self.badge,
                bad,
                if self.refused == LOG_REFUSALS {
                    " (further refusals are counted, not logged)"
                } else {
                    ""
                }
            );
        }
    }
}

struct Dev {
    io: u16,
    mac: u64,
    rx: Vq,
    tx: Vq,
    session: Option<Session>,
}

// SAFETY: the raw pointers are this task's own mappings; the mutex serialises every use.
unsafe impl Send for Dev {}

static DEV: spin::Mutex<Option<Dev>> = spin::Mutex::new(None);
/// The I/O thread's notification (interrupt line bit and `KICK_BIT`).
static NOTIF: AtomicU64 = AtomicU64::new(0);
/// The I/O thread's stack pointer at the top of its loop, where `recover` starts again.
static IO_RSP: AtomicU64 = AtomicU64::new(0);
/// The address of the last fault on session memory, for `recover`'s log line.
static FAULT_AT: AtomicU64 = AtomicU64::new(0);

impl Dev {
    /// Resets the device and starts it again with empty queues: afterwards it holds no address
    /// of anyone's memory.
    fn reset(&mut self) {
        let io = self.io;
        outb(io + R_STATUS, 0);
        outb(io + R_STATUS, S_ACK);
        outb(io + R_STATUS, S_ACK | S_DRIVER);
        let host = inl(io + R_HOST_FEATURES);
        outl(io + R_GUEST_FEATURES, host & F_NET_MAC);
        self.rx.start(io);
        self.tx.start(io);
        outb(io + R_STATUS, S_ACK | S_DRIVER | S_DRIVER_OK);
    }

    /// Ends the session: the device first (so it stops using the pages), then the pins.
    fn end_session(&mut self, why: &str) {
        let Some(s) = self.session.take() else { return };
        self.reset();
        for pa in s.pages {
            let _ = sys::unpin(pa);
        }
        let _ = sys::unmap(s.at, SESSION_PAGES as u64, sawmill_abi::UNMAP_SELF);
        let _ = sys::cap_delete(s.wake);
        let _ = sys::cap_delete(s.token);
        // The session's kick capability (minted from our notification, the only capability
        // derived from it) goes too: an ended stack cannot keep waking the I/O thread.
        let _ = sys::cap_revoke(NOTIF.load(Ordering::Relaxed));
        println!(
            "net-virtio: session of badge {} ended: {} ({} refusals)",
            s.badge, why, s.refused
        );
    }

    /// Moves finished packets to the completion rings and new submissions to the device. Runs
    /// on the I/O thread only (it touches session memory).
    fn pump(&mut self) {
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let shared = s.shared;
        // Sends finish without an interrupt (each pump, on the stack's next kick, reaps them)
        // unless the stack waits for a send slot: then they interrupt, and their completions
        // wake it. Set before the used ring is read, so a packet finished after the read
        // interrupts.
        let tx_wait = shared.tx_wait();
        self.tx.set_interrupts(tx_wait);
        let mut tx_completed = false;
        while let Some((k, _)) = self.tx.next_used() {
            s.side.complete_tx(&shared, self.tx.slot_of[k as usize]);
            self.tx.free.push(k);
            tx_completed = true;
        }
        let mut rx_completed = false;
        while let Some((k, len)) = self.rx.next_used() {
            let frame = (len as u64).saturating_sub(NET_HDR).min(SLOT_SIZE as u64);
            s.side
                .complete_rx(&shared, self.rx.slot_of[k as usize], frame as u16);
            self.rx.free.push(k);
            rx_completed = true;
        }
        let mut posted = false;
        while let Some(&k) = self.tx.free.last() {
            match s.side.take_tx(&shared) {
                Ok(Some(d)) => {
                    self.tx.free.pop();
                    self.tx.slot_of[k as usize] = d.slot;
                    self.tx.queue(k, s.slot_pa(d.slot), d.len as u32, false);
                    posted = true;
                }
                Ok(None) => break,
                Err(bad @ Bad::Index { .. }) => {
                    s.refuse(bad);
                    break;
                }
                Err(bad) => s.refuse(bad),
            }
        }
        if posted {
            self.tx.publish(self.io);
        }
        posted = false;
        while let Some(&k) = self.rx.free.last() {
            match s.side.take_rx(&shared) {
                Ok(Some(slot)) => {
                    self.rx.free.pop();
                    self.rx.slot_of[k as usize] = slot;
                    self.rx.queue(k, s.slot_pa(slot), SLOT_SIZE as u32, true);
                    posted = true;
                }
                Ok(None) => break,
                Err(bad @ Bad::Index { .. }) => {
                    s.refuse(bad);
                    break;
                }
                Err(bad) => s.refuse(bad),
            }
        }
        if posted {
            self.rx.publish(self.io);
        }
        // The stack's word is read again after the completions are published: one set since
        // the read above still gets its wake (the stack looks at the ring after setting it).
        if rx_completed || (tx_completed && (tx_wait || shared.tx_wait())) {
            let _ = sys::notify_signal(s.wake, s.bits);
        }
    }
}

/// The I/O thread: interrupts and kicks. Never returns; `recover` starts it again after a fault
/// on session memory.
fn io_loop() -> ! {
    let rsp: u64;
    // SAFETY: reads the stack pointer only.
    unsafe { core::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack)) };
    IO_RSP.store(rsp, Ordering::Relaxed);
    let packed = IO.load(Ordering::Relaxed);
    let (io, line, irq) = (packed as u16, (packed >> 16) as u8, packed >> 32);
    let notif = NOTIF.load(Ordering::Relaxed);
    loop {
        let bits = sys::notify_wait(notif, 0).unwrap_or(0);
        let interrupt = bits & (1 << line) != 0;
        if interrupt {
            // Reading the ISR deasserts the (level-triggered) line.
            let _ = inb(io + R_ISR);
        }
        if let Some(d) = DEV.lock().as_mut() {
            d.pump();
        }
        if interrupt {
            let _ = sys::irq_ack(irq);
        }
    }
}

/// The device's ports, interrupt line and Irq capability, for the I/O thread:
/// `io | line << 16 | irq << 32`.
static IO: AtomicU64 = AtomicU64::new(0);

// Where the fault thread diverts the I/O thread after a fault on session memory: back to the
// stack pointer its loop started with (the frames below are abandoned), into `recover`.
core::arch::global_asm!(
    ".global net_virtio_recover",
    "net_virtio_recover:",
    "mov rsp, [rip + {rsp}]",
    "and rsp, -16",
    "call {recover}",
    "ud2",
    rsp = sym IO_RSP,
    recover = sym recover,
);

extern "C" {
    fn net_virtio_recover();
}

/// The I/O thread faulted on session memory (the stack freed it): the lock it held is ours
/// again, the session ends, the loop goes on.
extern "C" fn recover() -> ! {
    // SAFETY: only the I/O thread touches session memory, so the fault interrupted it inside
    // `pump`, holding the lock; that pump will never continue.
    unsafe { DEV.force_unlock() };
    if let Some(d) = DEV.lock().as_mut() {
        let at = FAULT_AT.load(Ordering::Relaxed);
        d.end_session(if at != 0 {
            "its memory was revoked"
        } else {
            "fault"
        });
    }
    // The abandoned pump may have run for an interrupt the loop had not acknowledged yet (the
    // line stays masked until it is): acknowledge it here, or the device's interrupts would
    // never come again and received frames would be taken only when a kick comes by. An
    // acknowledgement without an interrupt only unmasks a line that is unmasked already.
    let _ = sys::irq_ack(IO.load(Ordering::Relaxed) >> 32);
    io_loop()
}

/// The fault thread: the I/O thread's pager. A fault inside the session window is the stack's
/// doing; anything else goes to root, which ends the driver.
fn faults(ep: u64) -> ! {
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        let addr = m.w[0];
        let verdict = if m.tag.label() == label::PAGE_FAULT
            && AREAS
                .iter()
                .any(|&a| (a..a + SESSION_BYTES as u64).contains(&addr))
        {
            FAULT_AT.store(addr, Ordering::Relaxed);
            Reply {
                tag: MsgTag::new(label::DIVERT, 3),
                w: [net_virtio_recover as *const () as u64, 0, 0, 0],
            }
        } else {
            let r = ipc::call(slots::PAGER, m.tag, m.w);
            Reply::label(if r.err == 0 && r.tag.label() != 0 {
                r.tag.label()
            } else {
                1
            })
        };
        m = ipc::reply_recv(ep, verdict.tag, verdict.w);
    }
}

/// The `net` endpoint's state.
struct Server {
    after: AfterReply,
    /// Where the next session's memory lands (the receive window): the area of `AREAS` the
    /// live session does not use.
    window: u64,
    /// Capability slots given back by refused attaches.
    free_slots: Vec<u64>,
}

impl Server {
    fn attach_locked(
        &mut self,
        d: &mut Dev,
        badge: u64,
        memory: Map,
        wake: u64,
        bits: u64,
        token: u64,
    ) -> Result<u64, NetError> {
        if let Some(s) = &d.session {
            // A stack that died left its session behind: its memory went with it, so it is no
            // longer mapped here, and the session can go.
            if sys::translate(s.at).is_ok() {
                return Err(NetError::Busy);
            }
            d.end_session("its memory is gone");
        }
        let at = self.window;
        // What arrived in the window must be exactly the session: its words say so and every
        // page is there (the kernel maps an item whole or not at all).
        if bits == 0 {
            return Err(NetError::Invalid);
        }
        if memory.dst != at
            || memory.pages != SESSION_PAGES as u64
            || memory.flags & sawmill_abi::map::HUGE != 0
            || (0..SESSION_PAGES as u64).any(|i| sys::translate(at + i * 4096).is_err())
        {
            return Err(NetError::BadMemory);
        }
        // Pin every page and keep its physical address: the only addresses the device is given.
        // Pinning for device writes also proves the pages are writable RAM.
        let mut pages = [0u64; SESSION_PAGES];
        let mut done = 0;
        while done < SESSION_PAGES {
            let n = (SESSION_PAGES - done).min(sawmill_abi::pin::MAX_PAGES as usize);
            if sys::pin(
                at + done as u64 * 4096,
                n as u64,
                sawmill_abi::pin::DEVICE_WRITES,
            )
            .is_err()
            {
                for &pa in &pages[..done] {
                    let _ = sys::unpin(pa);
                }
                return Err(NetError::BadMemory);
            }
            pages[done..done + n].copy_from_slice(&sawmill_rt::utcb().mr[..n]);
            done += n;
        }
        let undo = || {
            for &pa in &pages {
                let _ = sys::unpin(pa);
            }
        };
        let (wake_copy, token_copy, kick) = (self.slot(), self.slot(), self.slot());
        if sys::cap_copy(wake, wake_copy).is_err()
            || sys::cap_copy(token, token_copy).is_err()
            || sys::cap_mint(NOTIF.load(Ordering::Relaxed), kick, KICK_BIT, rights::SEND).is_err()
        {
            undo();
            let _ = sys::cap_delete(wake_copy);
            let _ = sys::cap_delete(token_copy);
            self.free_slots.push(wake_copy);
            self.free_slots.push(token_copy);
            self.free_slots.push(kick);
            return Err(NetError::Invalid);
        }
        self.after.delete(kick);
        // SAFETY: SESSION_BYTES mapped at `at` just now; a fault on it (the stack freeing it) is
        // caught by the fault thread.
        let shared = unsafe { Shared::new(at as *mut u8) };
        d.session = Some(Session {
            badge,
            at,
            shared,
            pages,
            side: DriverSide::new(),
            wake: wake_copy,
            bits,
            token: token_copy,
            refused: 0,
        });
        println!("net-virtio: session of badge {} attached", badge);
        Ok(kick)
    }
}

impl net::Server for Server {
    fn info(&mut self, _badge: u64) -> Result<InfoOut, NetError> {
        let mac = DEV.lock().as_ref().map_or(0, |d| d.mac);
        Ok(InfoOut {
            mac,
            mtu: MTU,
            window: self.window,
        })
    }

    fn attach(
        &mut self,
        badge: u64,
        memory: Map,
        wake: u64,
        bits: u64,
        token: u64,
    ) -> Result<u64, NetError> {
        let mut g = DEV.lock();
        let d = g.as_mut().ok_or(NetError::Invalid)?;
        let r = self.attach_locked(d, badge, memory, wake, bits, token);
        drop(g);
        match r {
            Ok(_) => {
                // The next attach lands in the other area; the stack may have queued receive
                // slots before attaching.
                self.window = AREAS[usize::from(self.window == AREAS[0])];
                self.after.receive_window(self.window, SESSION_BYTES as u64);
                let _ = sys::notify_signal(NOTIF.load(Ordering::Relaxed), KICK_BIT);
            }
            // What a refused attach brought goes again (the window never holds a live session).
            Err(_) => {
                self.after
                    .unmap(self.window, SESSION_PAGES as u64, sawmill_abi::UNMAP_SELF);
            }
        }
        r
    }

    fn detach(&mut self, badge: u64) -> Result<(), NetError> {
        let mut g = DEV.lock();
        let d = g.as_mut().ok_or(NetError::Invalid)?;
        if d.session.as_ref().map(|s| s.badge) != Some(badge) {
            return Err(NetError::NoSession);
        }
        d.end_session("detached");
        Ok(())
    }
}

impl Server {
    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }
}

impl rpc::Serve for Server {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        // Whatever a request other than `attach` mapped into the window goes once it is
        // answered: only an attach places session memory.
        if m.tag.maps() != 0 && m.tag.label() != net::op::ATTACH {
            self.after
                .unmap(self.window, SESSION_PAGES as u64, sawmill_abi::UNMAP_SELF);
        }
        net::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

/// `pages` of physically contiguous, zeroed memory for the device, mapped at `DMA_AT`: its
/// address here and its bus address.
fn dma_alloc(mem_ep: u64, pages: u64) -> Result<(*mut u8, u64), &'static str> {
    let out = mem::Client::new(mem_ep)
        .alloc_dma(pages, thread::alloc_slot())
        .map_err(|_| "no DMA memory from mem")?;
    let ds = dataspace::Client::new(out.ds);
    let rw = MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE;
    for i in 0..pages {
        let va = DMA_AT + i * 4096;
        ds.map(i * 4096, va, 1, rw, [va, 4096])
            .map_err(|_| "mapping the DMA memory")?;
        if sys::translate(va) != Ok(out.paddr + i * 4096) {
            return Err("DMA memory is not contiguous");
        }
    }
    Ok((DMA_AT as *mut u8, out.paddr))
}

fn init(io: u16, mem_ep: u64) -> Result<Dev, &'static str> {
    // Reset first, before any queue register is touched or DMA memory allocated: a previous
    // incarnation of this driver (root restarts it) may have left frames queued whose queue
    // memory is freed by now. The reset ends them; reading the status back as 0 says it is done
    // (bounded: a device that never says so is driven anyway).
    outb(io + R_STATUS, 0);
    for _ in 0..RESET_POLLS {
        if inb(io + R_STATUS) == 0 {
            break;
        }
    }
    outb(io + R_STATUS, S_ACK | S_DRIVER);
    let mut sizes = [0u16; 2];
    for (q, size) in sizes.iter_mut().enumerate() {
        outw(io + R_QUEUE_SEL, q as u16);
        *size = inw(io + R_QUEUE_SIZE);
        if *size < 4 || *size & (*size - 1) != 0 {
            outb(io + R_STATUS, S_FAILED);
            return Err("bad queue size");
        }
    }
    let (_, rx_bytes) = Vq::layout(sizes[0]);
    let (_, tx_bytes) = Vq::layout(sizes[1]);
    // The two queues, then a page of headers: receive headers in its first half, send headers
    // (zero: no offloads) in its second.
    let pages = (rx_bytes + tx_bytes) / 4096 + 1;
    let (mem, pa) = dma_alloc(mem_ep, pages as u64)?;
    let hdr_off = rx_bytes + tx_bytes;
    let vq = |index: u16, size: u16, off: usize, hdr: usize| Vq {
        index,
        size,
        // SAFETY: inside the DMA memory just mapped.
        mem: unsafe { mem.add(off) },
        pa: pa + off as u64,
        used_off: Vq::layout(size).0,
        avail_idx: 0,
        used_idx: 0,
        free: Vec::new(),
        slot_of: [0; MAX_PACKETS as usize],
        hdr_pa: pa + hdr as u64,
    };
    let mut mac = 0u64;
    for i in 0..6 {
        mac |= (inb(io + R_CONFIG + i) as u64) << (8 * i);
    }
    let mut d = Dev {
        io,
        mac,
        rx: vq(QUEUE_RX, sizes[0], 0, hdr_off),
        tx: vq(QUEUE_TX, sizes[1], rx_bytes, hdr_off + 2048),
        session: None,
    };
    d.reset();
    Ok(d)
}

/// Serves the endpoint with no device behind it (`DEV` stays empty).
fn serve_without_device(ep: u64) {
    let mut srv = Server {
        after: AfterReply::new(),
        window: AREAS[0],
        free_slots: Vec::new(),
    };
    srv.after
        .receive_into(&[thread::alloc_slot(), thread::alloc_slot()]);
    srv.after.receive_window(srv.window, SESSION_BYTES as u64);
    let _ = rpc::serve(ep, &mut srv);
}

fn main() {
    let (Some(pci_ep), Some(mem_ep)) = (env::cap("pci"), env::cap("mem")) else {
        println!("net-virtio: FAIL the manifest gives us no `pci` or no `mem`");
        return;
    };
    let Some((ep, _)) = env::served() else {
        println!("net-virtio: FAIL the manifest gives us no endpoint to serve");
        return;
    };
    let irq = thread::alloc_slot();
    let c = match pci::Client::new(pci_ep).claim(0, slots::TASK, irq) {
        Ok(c) => c,
        Err(e) => {
            // A machine without the device (a system that boots with or without a network):
            // the endpoint is still served, `info` reports no MAC and `attach` is refused, so
            // a stack learns there is no network instead of waiting for a driver.
            println!(
                "net-virtio: no device from pci ({:?}): the network is off",
                e
            );
            serve_without_device(ep);
            return;
        }
    };
    let (notif, fault_ep) = match (
        thread::create(ObjKind::Notification, 0),
        thread::create(ObjKind::Endpoint, 0),
    ) {
        (Ok(n), Ok(e)) => (n, e),
        _ => {
            println!("net-virtio: FAIL no notification or endpoint (kmem_kb?)");
            return;
        }
    };
    if let Err(e) = sys::irq_bind(irq, notif, 1 << c.line) {
        println!("net-virtio: FAIL binding irq {}: {}", c.line, e.name());
        return;
    }
    NOTIF.store(notif, Ordering::Relaxed);
    let d = match init(c.io_base as u16, mem_ep) {
        Ok(d) => d,
        Err(e) => {
            println!("net-virtio: FAIL {}", e);
            return;
        }
    };
    let m = d.mac.to_le_bytes();
    println!(
        "net-virtio: io {:#x} irq {} queues {}/{} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        c.io_base, c.line, d.rx.size, d.tx.size, m[0], m[1], m[2], m[3], m[4], m[5]
    );
    *DEV.lock() = Some(d);
    IO.store(
        c.io_base as u64 & 0xffff | (c.line as u64) << 16 | irq << 32,
        Ordering::Relaxed,
    );
    if thread::spawn(255, THREAD_STACK, move || faults(fault_ep)).is_err()
        || thread::spawn_paged(255, THREAD_STACK, fault_ep, || io_loop()).is_err()
    {
        println!("net-virtio: FAIL starting threads (kmem_kb?)");
        return;
    }
    let mut srv = Server {
        after: AfterReply::new(),
        window: AREAS[0],
        free_slots: Vec::new(),
    };
    // `attach` brings the stack's notification; its memory arrives in the window.
    srv.after
        .receive_into(&[thread::alloc_slot(), thread::alloc_slot()]);
    srv.after.receive_window(srv.window, SESSION_BYTES as u64);
    let _ = rpc::serve(ep, &mut srv);
}
