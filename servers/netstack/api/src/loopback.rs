//! The stack's loopback, decided frame by frame on the way out: a frame for one of the stack's
//! own addresses (127.0.0.0/8 or an interface address) never goes to the driver; it is turned
//! around into a frame the stack receives. Pure: it reads and rewrites the frame it is given, so
//! it is tested on the host.
//!
//! smoltcp sees one Ethernet interface that also has 127.0.0.1/8; it asks ARP for a local
//! address like any other (the answer is made here: our own MAC) and sends IPv4 to our MAC, and
//! both come back to it as received frames.

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];
/// Ethernet + IPv4 header offsets of what is looked at.
const IPV4_DST: usize = 14 + 16;
const ARP_OP: usize = 14 + 6;
const ARP_SENDER_HW: usize = 14 + 8;
const ARP_SENDER_IP: usize = 14 + 14;
const ARP_TARGET_HW: usize = 14 + 18;
const ARP_TARGET_IP: usize = 14 + 24;
const ARP_LEN: usize = 14 + 28;

/// Whether `addr` (a.b.c.d as a << 24 | ...) is the loopback network's.
pub fn is_loopback(addr: u32) -> bool {
    addr >> 24 == 127
}

fn ip_at(f: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]])
}

/// If `frame` (Ethernet) is for one of our own addresses — `ours(addr)`, or 127.0.0.0/8 — turns
/// it into what we receive and returns true: an IPv4 packet gets our MAC as its destination, an
/// ARP request for one of our addresses becomes the reply (our MAC). Anything else: false,
/// unchanged (it goes to the wire).
pub fn turn_around(frame: &mut [u8], mac: [u8; 6], ours: impl Fn(u32) -> bool) -> bool {
    let local = |a: u32| is_loopback(a) || ours(a);
    if frame.len() < 14 {
        return false;
    }
    let ethertype = [frame[12], frame[13]];
    if ethertype == ETHERTYPE_IPV4 && frame.len() >= IPV4_DST + 4 {
        if !local(ip_at(frame, IPV4_DST)) {
            return false;
        }
        frame[..6].copy_from_slice(&mac);
        return true;
    }
    if ethertype == ETHERTYPE_ARP
        && frame.len() >= ARP_LEN
        && frame[ARP_OP..ARP_OP + 2] == [0, 1]
        && local(ip_at(frame, ARP_TARGET_IP))
    {
        let (asker_hw, asker_ip, wanted) = {
            let mut hw = [0u8; 6];
            hw.copy_from_slice(&frame[ARP_SENDER_HW..ARP_SENDER_HW + 6]);
            let mut ip = [0u8; 4];
            ip.copy_from_slice(&frame[ARP_SENDER_IP..ARP_SENDER_IP + 4]);
            let mut w = [0u8; 4];
            w.copy_from_slice(&frame[ARP_TARGET_IP..ARP_TARGET_IP + 4]);
            (hw, ip, w)
        };
        frame[..6].copy_from_slice(&asker_hw);
        frame[6..12].copy_from_slice(&mac);
        frame[ARP_OP + 1] = 2;
        frame[ARP_SENDER_HW..ARP_SENDER_HW + 6].copy_from_slice(&mac);
        frame[ARP_SENDER_IP..ARP_SENDER_IP + 4].copy_from_slice(&wanted);
        frame[ARP_TARGET_HW..ARP_TARGET_HW + 6].copy_from_slice(&asker_hw);
        frame[ARP_TARGET_IP..ARP_TARGET_IP + 4].copy_from_slice(&asker_ip);
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    const GW_MAC: [u8; 6] = [0x52, 0x55, 10, 0, 2, 2];
    const ME: u32 = 0x0a00_020f;

    fn ipv4_to(dst: u32) -> std::vec::Vec<u8> {
        let mut f = std::vec![0u8; 60];
        f[..6].copy_from_slice(&GW_MAC);
        f[6..12].copy_from_slice(&MAC);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        f[14] = 0x45;
        f[IPV4_DST..IPV4_DST + 4].copy_from_slice(&dst.to_be_bytes());
        f
    }

    fn arp_for(target: u32) -> std::vec::Vec<u8> {
        let mut f = std::vec![0u8; 42];
        f[..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&MAC);
        f[12..14].copy_from_slice(&ETHERTYPE_ARP);
        f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f[ARP_SENDER_HW..ARP_SENDER_HW + 6].copy_from_slice(&MAC);
        f[ARP_SENDER_IP..ARP_SENDER_IP + 4].copy_from_slice(&ME.to_be_bytes());
        f[ARP_TARGET_IP..ARP_TARGET_IP + 4].copy_from_slice(&target.to_be_bytes());
        f
    }

    #[test]
    fn packets_for_us_come_back() {
        for dst in [0x7f00_0001, 0x7f12_3456, ME] {
            let mut f = ipv4_to(dst);
            assert!(turn_around(&mut f, MAC, |a| a == ME), "{dst:#x}");
            assert_eq!(f[..6], MAC);
        }
        let mut f = ipv4_to(0x0a00_0202);
        let before = f.clone();
        assert!(!turn_around(&mut f, MAC, |a| a == ME));
        assert_eq!(f, before);
    }

    #[test]
    fn arp_for_our_address_is_answered_here() {
        let mut f = arp_for(0x7f00_0001);
        assert!(turn_around(&mut f, MAC, |a| a == ME));
        assert_eq!(f[..6], MAC);
        assert_eq!(f[ARP_OP..ARP_OP + 2], [0, 2]);
        assert_eq!(f[ARP_SENDER_HW..ARP_SENDER_HW + 6], MAC);
        assert_eq!(ip_at(&f, ARP_SENDER_IP), 0x7f00_0001);
        assert_eq!(ip_at(&f, ARP_TARGET_IP), ME);
        // A request for the gateway goes out; so do replies and short frames.
        let mut f = arp_for(0x0a00_0202);
        assert!(!turn_around(&mut f, MAC, |a| a == ME));
        let mut f = arp_for(ME);
        f[ARP_OP + 1] = 2;
        assert!(!turn_around(&mut f, MAC, |a| a == ME));
        let mut short = [0u8; 20];
        short[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        assert!(!turn_around(&mut short, MAC, |_| true));
    }
}
