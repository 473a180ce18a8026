//! How the stack partitions its smoltcp sockets so that no packet is offered to all of them:
//! smoltcp hands a received TCP or UDP packet to the sockets of the set it polls with, one by
//! one until one accepts it, and its egress visits every socket of the set. The stack keeps
//! [`SETS`] socket sets: a control set ([`CONTROL_SET`]: sockets with no local port yet, and the
//! frames that are neither TCP nor UDP) and [`PORT_SETS`] sets by local port ([`set_of_port`]:
//! every socket with local port p, a listener and its backlog and its connections, lives in
//! one, until it is established: then it moves to a set by its 4-tuple, `crate::conns`). A
//! received frame goes to the set of its destination port ([`set_of_frame`]), which holds every
//! socket that could accept it, unless `crate::conns` names its connection's set. Plain functions over byte slices; touches nothing.

/// Sets by local port, and all of them with the control set: as many as a 128-bit mask has
/// bits (a set is a bit in the stack's masks), so 256 sockets on consecutive ports share a set
/// with one or two others.
pub const PORT_SETS: usize = 127;
pub const SETS: usize = PORT_SETS + 1;
/// Sockets without a local port, and frames for no port (ARP, ICMP, fragments, malformed).
pub const CONTROL_SET: usize = 0;

const ETH_HEADER: usize = 14;
pub(crate) const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
pub(crate) const PROTO_TCP: u8 = 6;
pub(crate) const PROTO_UDP: u8 = 17;
/// IPv4's "more fragments" flag and fragment offset.
const FRAGMENT: u16 = 0x3fff;

/// The set of the sockets with local port `port`.
pub const fn set_of_port(port: u16) -> usize {
    1 + port as usize % PORT_SETS
}

/// What the ingress needs of a received segment's headers: its protocol, source address and
/// ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport {
    pub tcp: bool,
    pub src_addr: u32,
    pub src_port: u16,
    pub dst_port: u16,
}

/// The transport headers of `frame`, an Ethernet frame holding an unfragmented IPv4 TCP or UDP
/// packet; None for anything else.
pub fn transport(frame: &[u8]) -> Option<Transport> {
    let ip = frame.get(ETH_HEADER..)?;
    if frame[12..14] != ETHERTYPE_IPV4 || ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let header = (ip[0] & 0x0f) as usize * 4;
    let proto = ip[9];
    if header < 20 || u16::from_be_bytes([ip[6], ip[7]]) & FRAGMENT != 0 {
        return None;
    }
    if proto != PROTO_TCP && proto != PROTO_UDP {
        return None;
    }
    let ports = ip.get(header..header + 4)?;
    Some(Transport {
        tcp: proto == PROTO_TCP,
        src_addr: u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]),
        src_port: u16::from_be_bytes([ports[0], ports[1]]),
        dst_port: u16::from_be_bytes([ports[2], ports[3]]),
    })
}

/// The destination port of `frame`, an Ethernet frame holding an unfragmented IPv4 TCP or UDP
/// packet; None for anything else (smoltcp, looking at such a frame, wants no socket with a
/// port: it answers ARP and pings itself and drops what it cannot parse).
pub fn dest_port(frame: &[u8]) -> Option<u16> {
    transport(frame).map(|t| t.dst_port)
}

/// The set a received frame is polled with.
pub fn set_of_frame(frame: &[u8]) -> usize {
    dest_port(frame).map_or(CONTROL_SET, set_of_port)
}

/// The sets a mask names (bit i: set i), lowest first, one step per set named: the stack keeps
/// which sets are touched and which have a timer as masks, so a poll costs nothing per set
/// that has nothing to do.
pub fn members(mask: u128) -> impl Iterator<Item = usize> {
    let mut left = mask;
    core::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let i = left.trailing_zeros() as usize;
        left &= left - 1;
        Some(i)
    })
}

const _: () = assert!(SETS <= u128::BITS as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn frame(proto: u8, frag: u16, ihl: u8, dst_port: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        let mut ip = vec![0u8; ihl as usize * 4];
        ip[0] = 0x40 | ihl;
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip[9] = proto;
        f.extend_from_slice(&ip);
        f.extend_from_slice(&1234u16.to_be_bytes());
        f.extend_from_slice(&dst_port.to_be_bytes());
        f.extend_from_slice(&[0; 16]);
        f
    }

    #[test]
    fn tcp_and_udp_go_to_their_ports_set() {
        assert_eq!(dest_port(&frame(PROTO_TCP, 0, 5, 80)), Some(80));
        assert_eq!(dest_port(&frame(PROTO_UDP, 0x4000, 5, 7)), Some(7));
        // Options move the transport header.
        assert_eq!(dest_port(&frame(PROTO_UDP, 0, 6, 5353)), Some(5353));
        assert_eq!(set_of_frame(&frame(PROTO_TCP, 0, 5, 80)), set_of_port(80));
    }

    #[test]
    fn everything_else_goes_to_the_control_set() {
        // ICMP, a fragment, a later fragment, a bad header length, a truncated frame, ARP.
        assert_eq!(set_of_frame(&frame(1, 0, 5, 80)), CONTROL_SET);
        assert_eq!(set_of_frame(&frame(PROTO_UDP, 0x2000, 5, 80)), CONTROL_SET);
        assert_eq!(set_of_frame(&frame(PROTO_UDP, 0x0010, 5, 80)), CONTROL_SET);
        assert_eq!(set_of_frame(&frame(PROTO_UDP, 0, 4, 80)), CONTROL_SET);
        assert_eq!(set_of_frame(&frame(PROTO_TCP, 0, 5, 80)[..36]), CONTROL_SET);
        let mut arp = frame(PROTO_TCP, 0, 5, 80);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(set_of_frame(&arp), CONTROL_SET);
        assert_eq!(set_of_frame(&[]), CONTROL_SET);
        assert_eq!(set_of_frame(&[0; 13]), CONTROL_SET);
    }

    #[test]
    fn members_are_the_bits_set() {
        assert_eq!(members(0).count(), 0);
        let m: Vec<usize> = members(1 | 1 << 5 | 1 << 64 | 1 << 127).collect();
        assert_eq!(m, [0, 5, 64, 127]);
    }

    #[test]
    fn ports_spread_over_the_port_sets() {
        assert!((0..=u16::MAX).all(|p| (1..SETS).contains(&set_of_port(p))));
        let mut seen = [0usize; SETS];
        for p in 49152..49152 + 256 {
            seen[set_of_port(p)] += 1;
        }
        let (least, most) = (seen[1..].iter().min(), seen[1..].iter().max());
        assert_eq!((least, most), (Some(&2), Some(&3)));
    }
}
