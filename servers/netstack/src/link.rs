//! The stack's end of the session with the network driver, as smoltcp's `Device`: received
//! frames are handed to smoltcp in place in their slots, and frames to send are written straight
//! into free slots. Slots 0..64 receive, 64..128 send; each set alone fits its ring, so
//! submitting never finds a ring full. The loopback lives here too: a frame for one of our own
//! addresses (`sawmill_netstack_api::loopback`) stays in its send slot and is handed back to
//! smoltcp as received, without the driver. TCP and UDP checksums are done here, not by smoltcp
//! (`sawmill_netstack_api::csum`, as a NIC's offload would): filled in on frames to the driver,
//! checked on frames from it (a wrong one is dropped), skipped on frames the loopback turns
//! around, as Linux's `lo` skips them.
//!
//! The interface's MTU is the loopback's, [`LINK_MTU`] (Linux's `lo` has 64 KiB): a frame
//! larger than a slot is written into memory of ours and, if it loops back, received from there;
//! one for the wire that large is dropped. TCP's MSS is clamped to an Ethernet frame's in SYNs
//! both ways on the wire (`csum::clamp_mss`): other hosts never send more, and smoltcp never
//! sends them more.
//!
//! Received frames are taken ahead of smoltcp (`Link::next_set`): the stack looks at each one's
//! destination port and polls smoltcp's ingress with that port's socket set only
//! (`sawmill_netstack_api::sets`, `sockets.rs`).
//!
//! Send completions are reaped lazily, by the next `transmit` or `receive`: the driver wakes the
//! poll thread for them only while we wait for a free send slot (`Shared::set_tx_wait`), so a
//! datagram to the wire costs no wake of the stack after its call.
//!
//! The UDP fast path ([`Link::send_udp`]): a datagram to a destination smoltcp sent to in the
//! last [`NEIGHBOUR_LIFE_US`] is framed here straight into a send slot
//! (`sawmill_netstack_api::udpfast`), without smoltcp's egress round (which visits every socket
//! and looks up the route and the neighbour for each frame). Where a destination's frames go is
//! learned from smoltcp's own frames to the driver, so smoltcp still decides it, and decides
//! again once the entry is old.
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use sawmill_net_virtio_api::session::{
    Desc, Shared, StackSide, MAX_FRAME, RING_ENTRIES, SLOTS, SLOT_SIZE,
};
use sawmill_netstack_api::conns::ConnIndex;
use sawmill_netstack_api::udpfast::{self, Neighbours, Route};
use sawmill_netstack_api::{csum, loopback};
use sawmill_rt::sys;
use smoltcp::phy::{self, Checksum, Device, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

const RX_SLOTS: u16 = RING_ENTRIES as u16;
/// The interface's MTU as smoltcp counts it (the Ethernet frame): the loopback's, the largest
/// IPv4 packet. Segments between two local sockets are then as large as the receiver's window.
pub const LINK_MTU: usize = 14 + 65535;
/// The MSS announced to other hosts: what an Ethernet frame (`MAX_FRAME`) holds after the IPv4
/// and TCP headers.
const WIRE_MSS: u16 = (MAX_FRAME - 14 - 20 - 20) as u16;
/// Buffers for large loopback frames kept for reuse.
const SPARE_FRAMES: usize = 8;
/// How long a destination learned from smoltcp's frames is used by the UDP fast path, in
/// microseconds: short next to smoltcp's neighbour cache (an entry lives 60 s there; Linux's
/// are reachable for ~30 s), so a neighbour that goes away is asked for again within seconds.
/// A neighbour that announces a new MAC is followed at once (an ARP frame received forgets
/// them all), and a new address or route too (`set_local`).
const NEIGHBOUR_LIFE_US: u64 = 5_000_000;

/// A frame turned around, to be received: in its send slot (slot, length) or, larger than a
/// slot, in a buffer of ours of [`LINK_MTU`] bytes (buffer, length: made zeroed once, reused
/// without zeroing again).
enum Looped {
    Slot(u16, u16),
    Owned(Vec<u8>, usize),
}

/// A frame taken to be received next: one the loopback turned around (its slot goes back to the
/// free send slots once read) or one from the driver (its slot is offered to the driver again).
enum Staged {
    Looped(RxFrame),
    Wire(Desc),
}

/// The send slots not in the driver's hands: a stack of them (the last freed goes out first)
/// and a mask of the same set, so that a slot the driver reports finished twice (or a receive
/// slot it reports as sent) is refused with one test, not a scan of the stack per completion.
struct FreeTx {
    stack: Vec<u16>,
    mask: u64,
}

// One mask bit per send slot.
const _: () = assert!(SLOTS - RX_SLOTS as usize == u64::BITS as usize);

impl FreeTx {
    /// Every send slot but those `held` says are in use.
    fn all_but(held: impl Fn(u16) -> bool) -> FreeTx {
        let mut f = FreeTx {
            stack: Vec::with_capacity(SLOTS - RX_SLOTS as usize),
            mask: 0,
        };
        for slot in (RX_SLOTS..SLOTS as u16).rev().filter(|&s| !held(s)) {
            f.give(slot);
        }
        f
    }

    fn pop(&mut self) -> Option<u16> {
        let slot = self.stack.pop()?;
        self.mask &= !(1 << (slot - RX_SLOTS));
        Some(slot)
    }

    /// `slot` is free again; anything but a send slot in use is ignored.
    fn give(&mut self, slot: u16) {
        if slot < RX_SLOTS || slot as usize >= SLOTS {
            return;
        }
        let bit = 1 << (slot - RX_SLOTS);
        if self.mask & bit == 0 {
            self.mask |= bit;
            self.stack.push(slot);
        }
    }

    fn is_empty(&self) -> bool {
        self.mask == 0
    }
}

pub struct Link {
    shared: Shared,
    side: StackSide,
    /// Send slots not in the driver's hands.
    free_tx: FreeTx,
    /// Frames written into send slots during a poll, queued at its end.
    tx_queued: Vec<(u16, u16)>,
    /// Receive slots smoltcp has read, given back at the end of a poll.
    rx_done: Vec<u16>,
    /// The driver's kick notification.
    kick: u64,
    /// Our MAC and interface address (0: none yet), for the loopback.
    mac: [u8; 6],
    addr: u32,
    /// Frames turned around (send slot, length), to be received; and send slots smoltcp has
    /// read them from, free again at the end of a poll.
    looped: VecDeque<Looped>,
    loop_done: Vec<u16>,
    /// Buffers for large loopback frames, and those of frames just received (spare again at the
    /// next `receive` or `transmit`: a token pair cannot share one list).
    spare: Vec<Vec<u8>>,
    returned: Vec<Vec<u8>>,
    /// The next frame to receive, taken from the loopback queue or the driver's ring (and
    /// checked) ahead of smoltcp, so that the stack can look at it first ([`Link::next_set`]).
    staged: Option<Staged>,
    /// Whether we told the driver we wait for a send completion (`Shared::set_tx_wait`).
    tx_waiting: bool,
    /// Where smoltcp sent IPv4 lately, for the UDP fast path.
    neighbours: Neighbours,
    /// A frame with no free slot to go to is dropped (TCP sends it again).
    pub tx_dropped: u64,
    pub rx_frames: u64,
    pub tx_frames: u64,
}

impl Link {
    /// A fresh session over `shared` (the rings emptied), every receive slot offered.
    pub fn new(shared: Shared) -> Link {
        let mut side = StackSide::new(&shared);
        for slot in 0..RX_SLOTS {
            side.submit_rx(&shared, slot);
        }
        Link {
            shared,
            side,
            free_tx: FreeTx::all_but(|_| false),
            tx_queued: Vec::with_capacity(SLOTS),
            rx_done: Vec::with_capacity(SLOTS),
            kick: 0,
            mac: [0; 6],
            addr: 0,
            looped: VecDeque::with_capacity(SLOTS),
            loop_done: Vec::with_capacity(SLOTS),
            spare: Vec::new(),
            returned: Vec::new(),
            staged: None,
            tx_waiting: false,
            neighbours: Neighbours::new(NEIGHBOUR_LIFE_US),
            tx_dropped: 0,
            rx_frames: 0,
            tx_frames: 0,
        }
    }

    pub fn set_kick(&mut self, kick: u64) {
        self.kick = kick;
    }

    /// The driver's session is gone (it died, or ended it): no more kicks. Returns the old kick
    /// capability's slot for the caller to empty. Frames go on piling up in the rings until the
    /// send slots run out; [`Link::reset`] starts the next session.
    pub fn detach(&mut self) -> u64 {
        core::mem::take(&mut self.kick)
    }

    /// Whether a driver session is live.
    pub fn attached(&self) -> bool {
        self.kick != 0
    }

    /// Empties the rings for a new session with a new driver, before it attaches: every receive
    /// slot offered again, every send slot ours again but those holding frames the loopback
    /// turned around. What the last driver held or had not yet taken is dropped (TCP sends it
    /// again). Runs between polls, so no slot is in a poll's hands.
    pub fn reset(&mut self) {
        self.side = StackSide::new(&self.shared);
        for slot in 0..RX_SLOTS {
            self.side.submit_rx(&self.shared, slot);
        }
        self.rx_done.clear();
        self.tx_queued.clear();
        self.loop_done.clear();
        // A staged frame of the driver's is dropped with the ring; a looped one stays ours.
        if let Some(Staged::Looped(f)) = self.staged.take() {
            self.looped.push_front(match f {
                RxFrame::Slot(d) => Looped::Slot(d.slot, d.len),
                RxFrame::Owned(buf, len) => Looped::Owned(buf, len),
            });
        }
        let looped: Vec<u16> = self
            .looped
            .iter()
            .filter_map(|l| match l {
                Looped::Slot(slot, _) => Some(*slot),
                Looped::Owned(..) => None,
            })
            .collect();
        self.free_tx = FreeTx::all_but(|s| looped.contains(&s));
        self.tx_waiting = false;
        self.shared.set_tx_wait(false);
    }

    /// Our MAC and interface address: frames for them (or for 127.0.0.0/8) loop back.
    /// Every destination the fast path knew is forgotten (the routes change with the address).
    pub fn set_local(&mut self, mac: [u8; 6], addr: u32) {
        self.mac = mac;
        self.addr = addr;
        self.neighbours.clear();
    }

    /// The UDP fast path: if smoltcp sent to `dst` lately (from our address) and a send slot is
    /// free, the datagram's frame is written into the slot and handed to the driver at once,
    /// as smoltcp's egress would have done it. Whether it went; if not, nothing happened and the
    /// caller gives the datagram to smoltcp.
    pub fn send_udp(
        &mut self,
        now: Instant,
        dst: u32,
        src_port: u16,
        dst_port: u16,
        hop_limit: u8,
        payload: &[u8],
    ) -> bool {
        let len = udpfast::HEADERS + payload.len();
        if len > MAX_FRAME || self.addr == 0 {
            return false;
        }
        let Some((dst_mac, src)) = self.neighbours.lookup(dst, now.total_micros() as u64) else {
            return false;
        };
        if src != self.addr {
            return false;
        }
        self.reclaim();
        let Some(slot) = self.free_tx.pop() else {
            return false;
        };
        // SAFETY: a free send slot: ours until we submit it.
        let frame = unsafe { core::slice::from_raw_parts_mut(self.shared.slot_ptr(slot), len) };
        let route = Route {
            dst_mac,
            src_mac: self.mac,
            src,
            dst,
            src_port,
            dst_port,
            hop_limit,
        };
        udpfast::build(frame, &route, payload);
        csum::fill(frame);
        self.tx_queued.push((slot, len as u16));
        self.flush();
        true
    }

    /// Whether we wait for the driver's send completions (no send slot was free): smoltcp then
    /// wants a poll at once for what it could not send, but only a completion can help, and
    /// the driver wakes the poll thread for it.
    pub fn tx_waiting(&self) -> bool {
        self.tx_waiting
    }

    /// Frames turned around that smoltcp has not received yet (another poll round takes them).
    pub fn looped(&self) -> bool {
        !self.looped.is_empty() || matches!(self.staged, Some(Staged::Looped(_)))
    }

    /// Takes the next frame to receive (if none is taken yet): a looped one first, else the
    /// driver's next one whose checksum holds. Whether there is one.
    fn stage(&mut self) -> bool {
        if self.staged.is_some() {
            return true;
        }
        if let Some(l) = self.looped.pop_front() {
            self.staged = Some(Staged::Looped(match l {
                Looped::Slot(slot, len) => RxFrame::Slot(Desc { slot, len }),
                Looped::Owned(buf, len) => RxFrame::Owned(buf, len),
            }));
            return true;
        }
        // A driver that hands back a send slot as received is ignored; a frame whose TCP or UDP
        // checksum is wrong is dropped (its slot offered again).
        let desc = loop {
            let Some(d) = self.side.reap_rx(&self.shared) else {
                return false;
            };
            if d.slot >= RX_SLOTS {
                continue;
            }
            let len = (d.len as usize).min(SLOT_SIZE);
            // SAFETY: as in `RxToken::consume`: a receive slot the driver gave back, ours.
            let frame =
                unsafe { core::slice::from_raw_parts_mut(self.shared.slot_ptr(d.slot), len) };
            self.neighbours.heard(frame);
            if csum::valid(frame) {
                // A peer's SYN announcing more than an Ethernet frame holds would have smoltcp
                // send it frames the wire cannot carry (our MTU is the loopback's). The checksum
                // is not looked at again.
                csum::clamp_mss(frame, WIRE_MSS);
                break d;
            }
            self.rx_done.push(d.slot);
        };
        self.rx_frames += 1;
        self.staged = Some(Staged::Wire(desc));
        true
    }

    /// The socket set (`sawmill_netstack_api::sets`, or `conns` for an indexed connection's
    /// segment) the next frame to receive is for, None when nothing waits: the caller polls
    /// smoltcp's ingress once with that set.
    pub fn next_set(&mut self, conns: &ConnIndex) -> Option<usize> {
        self.reclaim();
        if !self.stage() {
            return None;
        }
        let (slot, len) = match &self.staged {
            Some(Staged::Looped(RxFrame::Owned(buf, len))) => {
                return Some(conns.set_of_frame(&buf[..*len]))
            }
            Some(Staged::Looped(RxFrame::Slot(d)) | Staged::Wire(d)) => (d.slot, d.len),
            None => return None,
        };
        // SAFETY: a staged frame's slot (a receive slot the driver gave back or a send slot the
        // loopback turned around): ours until smoltcp has read it.
        let frame = unsafe {
            core::slice::from_raw_parts(self.shared.slot_ptr(slot), (len as usize).min(SLOT_SIZE))
        };
        Some(conns.set_of_frame(frame))
    }

    fn reclaim(&mut self) {
        if !self.returned.is_empty() {
            self.spare.append(&mut self.returned);
            self.spare.truncate(SPARE_FRAMES);
        }
        while let Some(slot) = self.side.reap_tx(&self.shared) {
            self.free_tx.give(slot);
        }
        if self.tx_waiting && !self.free_tx.is_empty() {
            self.tx_waiting = false;
            self.shared.set_tx_wait(false);
        }
    }

    /// No send slot is free: the driver wakes us for its send completions from now on (it
    /// does not otherwise: completions are reaped by the next send). Set, then looked at again,
    /// so a completion published before the driver saw the word is not missed; the driver is
    /// kicked once to see it (it turns the device's send interrupts on). Whether a slot is
    /// free now.
    fn wait_for_tx(&mut self) -> bool {
        if !self.tx_waiting {
            self.tx_waiting = true;
            self.shared.set_tx_wait(true);
            self.reclaim();
            if !self.free_tx.is_empty() {
                return true;
            }
            if self.kick != 0 {
                let _ = sys::notify_signal(self.kick, u64::MAX);
            }
        }
        false
    }

    /// Hands what the last poll produced to the driver and kicks it if there was any.
    pub fn flush(&mut self) {
        for slot in self.loop_done.drain(..) {
            self.free_tx.give(slot);
        }
        let mut any = false;
        for (slot, len) in self.tx_queued.drain(..) {
            any |= self.side.submit_tx(&self.shared, slot, len);
            self.tx_frames += 1;
        }
        for slot in self.rx_done.drain(..) {
            any |= self.side.submit_rx(&self.shared, slot);
        }
        if any && self.kick != 0 {
            // A badged capability: the kernel signals only the driver's kick bit.
            let _ = sys::notify_signal(self.kick, u64::MAX);
        }
    }
}

pub struct RxToken<'a> {
    shared: Shared,
    frame: RxFrame,
    done: &'a mut Vec<u16>,
    spare: &'a mut Vec<Vec<u8>>,
}

/// What a received frame is in: a slot (given back when read) or a large loopback frame's
/// buffer (kept for reuse).
enum RxFrame {
    Slot(Desc),
    Owned(Vec<u8>, usize),
}

pub struct TxToken<'a> {
    shared: Shared,
    free: &'a mut FreeTx,
    queued: &'a mut Vec<(u16, u16)>,
    looped: &'a mut VecDeque<Looped>,
    spare: &'a mut Vec<Vec<u8>>,
    mac: [u8; 6],
    addr: u32,
    dropped: &'a mut u64,
    neighbours: &'a mut Neighbours,
    now: Instant,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        match self.frame {
            RxFrame::Slot(desc) => {
                let len = (desc.len as usize).min(SLOT_SIZE);
                // SAFETY: a receive slot the driver gave back (StackSide checked index and
                // length), or a send slot the loopback turned around: in the session memory,
                // ours until we submit it again after this call.
                let frame =
                    unsafe { core::slice::from_raw_parts(self.shared.slot_ptr(desc.slot), len) };
                let r = f(frame);
                self.done.push(desc.slot);
                r
            }
            RxFrame::Owned(buf, len) => {
                let r = f(&buf[..len]);
                if self.spare.len() < SPARE_FRAMES {
                    self.spare.push(buf);
                }
                r
            }
        }
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        match self.free.pop() {
            Some(slot) if len <= MAX_FRAME => {
                // SAFETY: a free send slot: ours until we submit it.
                let frame =
                    unsafe { core::slice::from_raw_parts_mut(self.shared.slot_ptr(slot), len) };
                let r = f(frame);
                let addr = self.addr;
                if loopback::turn_around(frame, self.mac, |a| addr != 0 && a == addr) {
                    self.looped.push_back(Looped::Slot(slot, len as u16));
                } else {
                    csum::clamp_mss(frame, WIRE_MSS);
                    csum::fill(frame);
                    self.neighbours
                        .learn(frame, addr, self.now.total_micros() as u64);
                    self.queued.push((slot, len as u16));
                }
                r
            }
            Some(slot) if len <= LINK_MTU => {
                // Larger than a slot: only the loopback takes it.
                self.free.give(slot);
                let mut buf = self.spare.pop().unwrap_or_else(|| vec![0; LINK_MTU]);
                let r = f(&mut buf[..len]);
                let addr = self.addr;
                if loopback::turn_around(&mut buf[..len], self.mac, |a| addr != 0 && a == addr) {
                    self.looped.push_back(Looped::Owned(buf, len));
                } else {
                    *self.dropped += 1;
                    self.spare.push(buf);
                }
                r
            }
            other => {
                if let Some(slot) = other {
                    self.free.give(slot);
                }
                *self.dropped += 1;
                let mut scratch = [0u8; SLOT_SIZE];
                f(&mut scratch[..len.min(SLOT_SIZE)])
            }
        }
    }
}

impl Device for Link {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, now: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        self.reclaim();
        if !self.stage() {
            return None;
        }
        let (frame, done) = match self.staged.take()? {
            Staged::Looped(f) => (f, &mut self.loop_done),
            Staged::Wire(d) => (RxFrame::Slot(d), &mut self.rx_done),
        };
        Some((
            RxToken {
                shared: self.shared,
                frame,
                done,
                spare: &mut self.returned,
            },
            TxToken {
                shared: self.shared,
                free: &mut self.free_tx,
                queued: &mut self.tx_queued,
                looped: &mut self.looped,
                spare: &mut self.spare,
                mac: self.mac,
                addr: self.addr,
                dropped: &mut self.tx_dropped,
                neighbours: &mut self.neighbours,
                now,
            },
        ))
    }

    fn transmit(&mut self, now: Instant) -> Option<TxToken<'_>> {
        self.reclaim();
        if self.free_tx.is_empty() && !self.wait_for_tx() {
            return None;
        }
        Some(TxToken {
            shared: self.shared,
            free: &mut self.free_tx,
            queued: &mut self.tx_queued,
            looped: &mut self.looped,
            spare: &mut self.spare,
            mac: self.mac,
            addr: self.addr,
            dropped: &mut self.tx_dropped,
            neighbours: &mut self.neighbours,
            now,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        c.max_transmission_unit = LINK_MTU;
        c.max_burst_size = Some(RING_ENTRIES as usize);
        // Ours (see the module's header).
        c.checksum.tcp = Checksum::None;
        c.checksum.udp = Checksum::None;
        c
    }
}
