//! The stack's UDP fast path to the wire, its pure half: which link-layer destination a
//! datagram to an address gets ([`Neighbours`], learned from the frames smoltcp itself sent),
//! and the frame such a datagram is ([`build`]: Ethernet + IPv4 + UDP, byte for byte what
//! smoltcp's egress would emit for it, the UDP checksum left to [`crate::csum::fill`] as for
//! every frame to the driver). A datagram whose destination is not known here takes smoltcp's
//! path (its route, its ARP), so smoltcp stays the one that resolves; this only repeats, for a
//! short while, what it decided. Plain functions and types over byte slices; it touches nothing.

/// Ethernet header length, the IPv4 and UDP header lengths smoltcp emits (no options).
pub const ETH_HEADER: usize = 14;
pub const IPV4_HEADER: usize = 20;
pub const UDP_HEADER: usize = 8;
/// All three: a datagram's frame is this plus its payload.
pub const HEADERS: usize = ETH_HEADER + IPV4_HEADER + UDP_HEADER;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
const PROTO_UDP: u8 = 17;
/// IPv4's "don't fragment" flag (smoltcp sets it on everything it sends; its identification is
/// then always 0).
const DONT_FRAGMENT: u16 = 0x4000;
/// How many destinations are remembered (the least recently learned one is forgotten first).
pub const NEIGHBOURS: usize = 8;

/// One destination smoltcp sent to: the destination MAC it chose (the neighbour's, or the
/// router's for another network) and the source address it chose, until `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Known {
    dst: u32,
    mac: [u8; 6],
    src: u32,
    until: u64,
}

/// Destinations smoltcp sent IPv4 to lately, learned from its frames on their way to the
/// driver. An entry lives `ttl` (time units of the caller's clock) from the last frame that
/// taught it: past that, a datagram goes through smoltcp again (which looks at its route and
/// neighbour cache, and asks ARP if its entry expired) and that frame teaches it anew. Any ARP
/// frame received forgets them all: it may change smoltcp's cache (a neighbour that moved).
#[derive(Debug)]
pub struct Neighbours {
    known: [Option<Known>; NEIGHBOURS],
    next: usize,
    ttl: u64,
}

fn ip_at(f: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]])
}

impl Neighbours {
    /// None known; entries live `ttl`.
    pub const fn new(ttl: u64) -> Neighbours {
        Neighbours {
            known: [None; NEIGHBOURS],
            next: 0,
            ttl,
        }
    }

    /// Forgets every destination (the interface's address or routes changed).
    pub fn clear(&mut self) {
        self.known = [None; NEIGHBOURS];
    }

    /// Looks at `frame`, one received from the driver: an ARP frame forgets every destination
    /// (smoltcp learns from it; the next frame smoltcp sends teaches us again).
    pub fn heard(&mut self, frame: &[u8]) {
        if frame.len() >= ETH_HEADER && frame[12..14] == ETHERTYPE_ARP {
            self.clear();
        }
    }

    /// Learns from `frame`, one smoltcp sent to the driver at `now`: an IPv4 packet from `ours`
    /// (our interface address, not 0) to a unicast MAC tells where that destination's packets
    /// go. Anything else (ARP, broadcasts, DHCP's packets from 0.0.0.0) teaches nothing.
    pub fn learn(&mut self, frame: &[u8], ours: u32, now: u64) {
        if ours == 0
            || frame.len() < ETH_HEADER + IPV4_HEADER
            || frame[12..14] != ETHERTYPE_IPV4
            || frame[0] & 1 != 0
            || frame[ETH_HEADER] >> 4 != 4
        {
            return;
        }
        let src = ip_at(frame, ETH_HEADER + 12);
        let dst = ip_at(frame, ETH_HEADER + 16);
        if src != ours {
            return;
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&frame[..6]);
        let entry = Known {
            dst,
            mac,
            src,
            until: now.saturating_add(self.ttl),
        };
        if let Some(k) = self.known.iter_mut().flatten().find(|k| k.dst == dst) {
            *k = entry;
            return;
        }
        self.known[self.next] = Some(entry);
        self.next = (self.next + 1) % NEIGHBOURS;
    }

    /// Where a packet to `dst` goes at `now`: (destination MAC, source address), if smoltcp
    /// sent to it less than the lifetime ago.
    pub fn lookup(&self, dst: u32, now: u64) -> Option<([u8; 6], u32)> {
        self.known
            .iter()
            .flatten()
            .find(|k| k.dst == dst && now < k.until)
            .map(|k| (k.mac, k.src))
    }
}

/// Where a datagram goes and comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: u32,
    pub dst: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub hop_limit: u8,
}

/// Writes the frame of a UDP datagram carrying `payload` along `route` into `frame` (at least
/// [`HEADERS`] + `payload.len()` bytes; the payload at most 65,507 bytes) and returns its
/// length. The UDP checksum is left 0, for [`crate::csum::fill`]; the IPv4 header's is done.
pub fn build(frame: &mut [u8], route: &Route, payload: &[u8]) -> usize {
    let len = HEADERS + payload.len();
    let udp_len = (UDP_HEADER + payload.len()) as u16;
    let ip_len = IPV4_HEADER as u16 + udp_len;
    frame[..6].copy_from_slice(&route.dst_mac);
    frame[6..12].copy_from_slice(&route.src_mac);
    frame[12..14].copy_from_slice(&ETHERTYPE_IPV4);
    let ip = &mut frame[ETH_HEADER..ETH_HEADER + IPV4_HEADER];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&[0, 0]);
    ip[6..8].copy_from_slice(&DONT_FRAGMENT.to_be_bytes());
    ip[8] = route.hop_limit;
    ip[9] = PROTO_UDP;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&route.src.to_be_bytes());
    ip[16..20].copy_from_slice(&route.dst.to_be_bytes());
    let c = !crate::csum::fold(crate::csum::sum(ip, 0));
    ip[10..12].copy_from_slice(&c.to_ne_bytes());
    let udp = &mut frame[ETH_HEADER + IPV4_HEADER..len];
    udp[0..2].copy_from_slice(&route.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&route.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    udp[UDP_HEADER..].copy_from_slice(payload);
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csum;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpProtocol, Ipv4Address,
        Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
    };
    use std::vec;
    use std::vec::Vec;

    const ROUTE: Route = Route {
        dst_mac: [0x52, 0x55, 0x0a, 0x00, 0x02, 0x02],
        src_mac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
        src: 0x0a00_020f,
        dst: 0x0a00_0202,
        src_port: 49152,
        dst_port: 9,
        hop_limit: 64,
    };

    /// The frame smoltcp's egress emits for the datagram (as `InterfaceInner::dispatch_ip`
    /// does: Ethernet, then IPv4 with its header checksum, then UDP with the checksum left to
    /// the device, as the stack's link asks), with the link's checksum filled in.
    fn smoltcp_frame(r: &Route, payload: &[u8]) -> Vec<u8> {
        let mut caps = ChecksumCapabilities::default();
        caps.udp = smoltcp::phy::Checksum::None;
        let udp = UdpRepr {
            src_port: r.src_port,
            dst_port: r.dst_port,
        };
        let ip = Ipv4Repr {
            src_addr: Ipv4Address::from_bits(r.src),
            dst_addr: Ipv4Address::from_bits(r.dst),
            next_header: IpProtocol::Udp,
            payload_len: udp.header_len() + payload.len(),
            hop_limit: r.hop_limit,
        };
        let eth = EthernetRepr {
            src_addr: EthernetAddress(r.src_mac),
            dst_addr: EthernetAddress(r.dst_mac),
            ethertype: EthernetProtocol::Ipv4,
        };
        let mut buf = vec![0u8; HEADERS + payload.len()];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.emit(&mut f);
        let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
        ip.emit(&mut p, &caps);
        let mut u = UdpPacket::new_unchecked(p.payload_mut());
        udp.emit(
            &mut u,
            &ip.src_addr.into(),
            &ip.dst_addr.into(),
            payload.len(),
            |b| b.copy_from_slice(payload),
            &caps,
        );
        csum::fill(&mut buf);
        buf
    }

    fn ours(r: &Route, payload: &[u8]) -> Vec<u8> {
        // Dirty memory first: a reused slot holds an older frame.
        let mut buf = vec![0xa5u8; HEADERS + payload.len() + 16];
        let n = build(&mut buf, r, payload);
        buf.truncate(n);
        csum::fill(&mut buf);
        buf
    }

    #[test]
    fn frames_are_smoltcps_byte_for_byte() {
        for len in [0usize, 1, 7, 64, 447, 448, 1000, 1471, 1472] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            assert_eq!(
                ours(&ROUTE, &payload),
                smoltcp_frame(&ROUTE, &payload),
                "{len}"
            );
        }
        let other = Route {
            src_port: 0xffff,
            dst_port: 0x8001,
            hop_limit: 1,
            dst: 0xc0a8_0101,
            ..ROUTE
        };
        assert_eq!(ours(&other, b"x"), smoltcp_frame(&other, b"x"));
        // A payload whose checksum comes out 0 is sent as 0xffff by both.
        for b in 0..=255u8 {
            assert_eq!(ours(&ROUTE, &[b, 0x11]), smoltcp_frame(&ROUTE, &[b, 0x11]));
        }
    }

    #[test]
    fn learns_unicast_ipv4_from_our_address() {
        let frame = ours(&ROUTE, b"hello");
        let mut n = Neighbours::new(100);
        assert_eq!(n.lookup(ROUTE.dst, 0), None);
        // From another address (DHCP's 0.0.0.0, before the lease): nothing.
        n.learn(&frame, 0x0a00_0299, 10);
        assert_eq!(n.lookup(ROUTE.dst, 10), None);
        n.learn(&frame, 0, 10);
        assert_eq!(n.lookup(ROUTE.dst, 10), None);
        n.learn(&frame, ROUTE.src, 10);
        assert_eq!(n.lookup(ROUTE.dst, 10), Some((ROUTE.dst_mac, ROUTE.src)));
        assert_eq!(n.lookup(ROUTE.dst, 109), Some((ROUTE.dst_mac, ROUTE.src)));
        // Expired, and learned again from the next frame smoltcp sends.
        assert_eq!(n.lookup(ROUTE.dst, 110), None);
        n.learn(&frame, ROUTE.src, 200);
        assert_eq!(n.lookup(ROUTE.dst, 250), Some((ROUTE.dst_mac, ROUTE.src)));
        n.clear();
        assert_eq!(n.lookup(ROUTE.dst, 250), None);
    }

    #[test]
    fn learns_nothing_from_broadcasts_arp_or_short_frames() {
        let mut n = Neighbours::new(100);
        let bcast = Route {
            dst_mac: [0xff; 6],
            dst: 0xffff_ffff,
            ..ROUTE
        };
        n.learn(&ours(&bcast, b"x"), ROUTE.src, 0);
        assert_eq!(n.lookup(bcast.dst, 0), None);
        let mut arp = ours(&ROUTE, b"x");
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        n.learn(&arp, ROUTE.src, 0);
        assert_eq!(n.lookup(ROUTE.dst, 0), None);
        n.learn(&ours(&ROUTE, b"x")[..30], ROUTE.src, 0);
        assert_eq!(n.lookup(ROUTE.dst, 0), None);
    }

    #[test]
    fn an_arp_frame_received_forgets_everything() {
        let mut n = Neighbours::new(100);
        let frame = ours(&ROUTE, b"x");
        n.learn(&frame, ROUTE.src, 0);
        // IPv4 and short frames change nothing.
        n.heard(&frame);
        n.heard(&frame[..10]);
        assert!(n.lookup(ROUTE.dst, 0).is_some());
        let mut arp = frame.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        n.heard(&arp[..42]);
        assert_eq!(n.lookup(ROUTE.dst, 0), None);
    }

    #[test]
    fn a_new_mac_replaces_the_old_and_the_oldest_goes_first() {
        let mut n = Neighbours::new(1000);
        n.learn(&ours(&ROUTE, b""), ROUTE.src, 0);
        let moved = Route {
            dst_mac: [2, 0, 0, 0, 0, 9],
            ..ROUTE
        };
        n.learn(&ours(&moved, b""), ROUTE.src, 1);
        assert_eq!(n.lookup(ROUTE.dst, 2), Some((moved.dst_mac, ROUTE.src)));
        for i in 0..NEIGHBOURS as u32 {
            let r = Route {
                dst: 0x0808_0800 + i,
                ..ROUTE
            };
            n.learn(&ours(&r, b""), ROUTE.src, 2);
        }
        // Eight others learned since: the first is forgotten, the last eight are known.
        assert_eq!(n.lookup(ROUTE.dst, 3), None);
        assert!(n.lookup(0x0808_0800, 3).is_some());
        assert!(n.lookup(0x0808_0807, 3).is_some());
    }
}
