//! TCP and UDP checksums of IPv4 frames, done by the stack's link instead of smoltcp (as a NIC's
//! checksum offload would): frames that go to the driver get theirs filled in ([`fill`]), frames
//! from the driver are dropped unless theirs is right ([`valid`]), and frames the loopback
//! turns around skip both, as Linux's `lo` does. smoltcp's own sum takes ~1.75 instructions a
//! byte and ran twice over every loopback segment; this one adds 8 bytes at a time with
//! end-around carry (RFC 1071). Plain functions over byte slices; it touches nothing.

/// Ethernet header length and the IPv4 ethertype.
const ETH_HEADER: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
/// Where the checksum field is in a TCP and a UDP header.
const TCP_CHECKSUM_AT: usize = 16;
const UDP_CHECKSUM_AT: usize = 6;

/// The one's complement sum of `data` (as 16-bit words in memory order, an odd last byte
/// padded with zero) added to `acc`, not yet folded. Pieces summed one after the other must each
/// start at an even offset of the whole.
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let add = |acc: u64, w: u64| {
        let (s, carry) = acc.overflowing_add(w);
        s + carry as u64
    };
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for i in 0..4 {
            let w = u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
            acc = add(acc, w);
        }
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        acc = add(acc, u64::from_ne_bytes(w.try_into().unwrap()));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    add(acc, u64::from_ne_bytes(tail))
}

/// `acc` folded to 16 bits (in memory order, as [`sum`] added them).
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Where a frame's TCP or UDP segment is: (its offset, its length, the checksum field's offset
/// in it, whether UDP), with the pseudo header's sum. None for anything else (not IPv4, another
/// protocol, a fragment, lengths that do not fit: smoltcp judges those).
fn segment(frame: &[u8]) -> Option<(usize, usize, usize, bool, u64)> {
    if frame.len() < ETH_HEADER + 20 || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4
    {
        return None;
    }
    let ip = &frame[ETH_HEADER..];
    let header = ((ip[0] & 0xf) as usize) * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if ip[0] >> 4 != 4 || header < 20 || total < header || total > ip.len() || fragment != 0 {
        return None;
    }
    let (at, udp) = match ip[9] {
        PROTO_TCP => (TCP_CHECKSUM_AT, false),
        PROTO_UDP => (UDP_CHECKSUM_AT, true),
        _ => return None,
    };
    let len = total - header;
    if len < at + 2 {
        return None;
    }
    // Source and destination, zero and protocol, length.
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&ip[12..20]);
    pseudo[9] = ip[9];
    pseudo[10..12].copy_from_slice(&(len as u16).to_be_bytes());
    Some((ETH_HEADER + header, len, at, udp, sum(&pseudo, 0)))
}

/// Fills in the TCP or UDP checksum of an IPv4 frame (anything else is left as it is).
pub fn fill(frame: &mut [u8]) {
    let Some((off, len, at, udp, pseudo)) = segment(frame) else {
        return;
    };
    let seg = &mut frame[off..off + len];
    seg[at] = 0;
    seg[at + 1] = 0;
    let mut c = !fold(sum(seg, pseudo));
    // UDP's 0 means "no checksum": a computed 0 is sent as its other form.
    if udp && c == 0 {
        c = 0xffff;
    }
    seg[at..at + 2].copy_from_slice(&c.to_ne_bytes());
}

/// Whether an IPv4 frame's TCP or UDP checksum is right (true for anything else, and for a UDP
/// datagram sent without one).
pub fn valid(frame: &[u8]) -> bool {
    let Some((off, len, at, udp, pseudo)) = segment(frame) else {
        return true;
    };
    let seg = &frame[off..off + len];
    if udp && seg[at] == 0 && seg[at + 1] == 0 {
        return true;
    }
    fold(sum(seg, pseudo)) == 0xffff
}

/// TCP's option kind for the maximum segment size, and the end of options.
const TCP_OPT_END: u8 = 0;
const TCP_OPT_NOP: u8 = 1;
const TCP_OPT_MSS: u8 = 2;

/// Lowers the maximum segment size a TCP segment of an IPv4 frame announces (a SYN's option) to
/// `max`, if it announces more (before [`fill`], which then covers it). The stack's interface
/// has the loopback's large MTU, so smoltcp announces an MSS to match; a frame to the wire
/// carries one that fits an Ethernet frame instead (as a router's "MSS clamping" does). Anything
/// else is left as it is.
pub fn clamp_mss(frame: &mut [u8], max: u16) {
    let Some((off, len, _, false, _)) = segment(frame) else {
        return;
    };
    let seg = &mut frame[off..off + len];
    let header = ((seg[12] >> 4) as usize) * 4;
    if seg.len() < 20 || header > seg.len() || seg[13] & 0x02 == 0 {
        return;
    }
    let mut i = 20;
    while i < header {
        match seg[i] {
            TCP_OPT_END => return,
            TCP_OPT_NOP => i += 1,
            kind => {
                let n = *seg.get(i + 1).unwrap_or(&0) as usize;
                if n < 2 || i + n > header {
                    return;
                }
                if kind == TCP_OPT_MSS && n == 4 {
                    let mss = u16::from_be_bytes([seg[i + 2], seg[i + 3]]);
                    if mss > max {
                        seg[i + 2..i + 4].copy_from_slice(&max.to_be_bytes());
                    }
                    return;
                }
                i += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// RFC 1071's sum the plain way: big-endian 16-bit words.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for w in data.chunks(2) {
            let v = if w.len() == 2 {
                u16::from_be_bytes([w[0], w[1]])
            } else {
                u16::from_be_bytes([w[0], 0])
            };
            acc += v as u32;
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
        }
        acc as u16
    }

    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn sums_as_rfc_1071_does() {
        for n in [
            0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 1460, 1461, 1500,
        ] {
            for seed in [1, 7, 99] {
                let d = bytes(n, seed);
                let ours = u16::from_be_bytes(fold(sum(&d, 0)).to_ne_bytes());
                assert_eq!(ours, reference(&d), "{n} bytes, seed {seed}");
            }
        }
        // All ones: the carries wrap around.
        let d = [0xffu8; 100];
        assert_eq!(
            u16::from_be_bytes(fold(sum(&d, 0)).to_ne_bytes()),
            reference(&d)
        );
    }

    /// An Ethernet + IPv4 frame of protocol `proto` with `payload` as its segment.
    fn frame(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = std::vec![0u8; 14];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let total = (20 + payload.len()) as u16;
        let mut ip = std::vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&[10, 0, 2, 15, 10, 0, 2, 2]);
        f.extend_from_slice(&ip);
        f.extend_from_slice(payload);
        f
    }

    /// The segment's checksum the plain way (pseudo header and segment, its field as zero).
    fn expected(f: &[u8], proto: u8, at: usize) -> u16 {
        let seg = &f[34..];
        let mut all = Vec::new();
        all.extend_from_slice(&f[26..34]);
        all.extend_from_slice(&[0, proto]);
        all.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        let mut s = seg.to_vec();
        s[at] = 0;
        s[at + 1] = 0;
        all.extend_from_slice(&s);
        !reference(&all)
    }

    #[test]
    fn fills_and_checks_tcp_and_udp() {
        for (proto, at) in [(PROTO_TCP, TCP_CHECKSUM_AT), (PROTO_UDP, UDP_CHECKSUM_AT)] {
            for n in [20, 21, 64, 1001, 1480] {
                let mut f = frame(proto, &bytes(n, n as u32));
                fill(&mut f);
                let got = u16::from_be_bytes([f[34 + at], f[35 + at]]);
                assert_eq!(got, expected(&f, proto, at), "proto {proto}, {n} bytes");
                assert!(valid(&f));
                // One bit wrong anywhere in the segment or the addresses is caught.
                for i in [27, 33, 34, 34 + n / 2, 33 + n] {
                    let mut bad = f.clone();
                    bad[i] ^= 0x10;
                    assert!(!valid(&bad), "proto {proto}, {n} bytes, byte {i}");
                }
            }
        }
    }

    #[test]
    fn leaves_what_it_does_not_know() {
        // UDP without a checksum is valid; ICMP, ARP, fragments, lies about the length pass to
        // smoltcp untouched.
        let f = frame(PROTO_UDP, &[0; 12]);
        assert!(valid(&f));
        let mut icmp = frame(1, &[8, 0, 1, 2, 3, 4, 5, 6]);
        let before = icmp.clone();
        fill(&mut icmp);
        assert_eq!(icmp, before);
        let mut arp = frame(PROTO_TCP, &[1; 20]);
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(valid(&arp));
        let mut frag = frame(PROTO_TCP, &[1; 20]);
        frag[20] = 0x20;
        assert!(valid(&frag));
        let mut long = frame(PROTO_TCP, &[1; 20]);
        long[16] = 0xff;
        assert!(valid(&long));
        fill(&mut long);
        assert!(valid(&frame(PROTO_TCP, &[1; 10])));
        assert!(valid(&[0u8; 20]));
    }

    #[test]
    fn clamps_a_syns_mss() {
        // A SYN with NOP, MSS 65495, window scale.
        let mut tcp = std::vec![0u8; 32];
        tcp[12] = 8 << 4;
        tcp[13] = 0x02;
        tcp[20..32].copy_from_slice(&[1, 2, 4, 0xff, 0xd7, 3, 3, 7, 1, 1, 1, 0]);
        let mut f = frame(PROTO_TCP, &tcp);
        clamp_mss(&mut f, 1460);
        assert_eq!(&f[34 + 23..34 + 25], &1460u16.to_be_bytes());
        fill(&mut f);
        assert!(valid(&f));
        // A smaller one stays; a segment without SYN, or options that lie, are left alone.
        clamp_mss(&mut f, 9000);
        assert_eq!(&f[34 + 23..34 + 25], &1460u16.to_be_bytes());
        let mut ack = tcp.clone();
        ack[13] = 0x10;
        let mut f = frame(PROTO_TCP, &ack);
        clamp_mss(&mut f, 1460);
        assert_eq!(&f[34 + 23..34 + 25], &[0xff, 0xd7]);
        let mut lie = tcp.clone();
        lie[21] = 0;
        lie[22] = 0xff;
        let mut f = frame(PROTO_TCP, &lie);
        let before = f.clone();
        clamp_mss(&mut f, 1460);
        assert_eq!(f, before);
        let mut long = tcp.clone();
        long[12] = 15 << 4;
        let mut f = frame(PROTO_TCP, &long);
        let before = f.clone();
        clamp_mss(&mut f, 1460);
        assert_eq!(f, before);
    }
}
