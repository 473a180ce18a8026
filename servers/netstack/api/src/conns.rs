//! Where the stack keeps its established TCP connections, so that many connections on one
//! local port (an httpd's 200 on port 80) are not all offered each segment: `crate::sets` puts
//! a socket in the set of its local port, where a listener and its not-yet-established sockets
//! must stay (a SYN or a stray segment has to find them); a connection, once established
//! (accepted or connected), moves to the set of its 4-tuple ([`set_of_conn`]) and is entered
//! in a [`ConnIndex`] that the ingress consults first for a TCP frame ([`ConnIndex::set_of_frame`]).
//! A frame that names no indexed connection goes to its port's set as before. Plain data over
//! byte slices; touches nothing.

use crate::sets::{self, PORT_SETS};
use alloc::collections::BTreeMap;

/// A connection as a received segment names it: the local port (the segment's destination),
/// the remote address and port (its source). The local address is left out: two connections
/// that differ only in it land in one set, which only makes them hash mates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConnKey {
    pub local_port: u16,
    pub remote_addr: u32,
    pub remote_port: u16,
}

/// The set of connection `key`: a port set (never the control set), spread by a multiplicative
/// hash of the 4-tuple so that connections from one peer's consecutive ports, or from many
/// peers to one port, spread over all of them.
pub fn set_of_conn(key: ConnKey) -> usize {
    let word =
        (key.local_port as u64) << 48 | (key.remote_port as u64) << 32 | key.remote_addr as u64;
    let mixed = word.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    1 + (mixed >> 32) as usize % PORT_SETS
}

/// The connection a received frame's TCP segment is for; None for a frame that is not an
/// unfragmented IPv4 TCP segment.
pub fn conn_of_frame(frame: &[u8]) -> Option<ConnKey> {
    let t = sets::transport(frame)?;
    t.tcp.then_some(ConnKey {
        local_port: t.dst_port,
        remote_addr: t.src_addr,
        remote_port: t.src_port,
    })
}

/// The established connections that live in their 4-tuple's set, counted per key (a closing
/// connection and a new one with the same key may briefly both be there: both live in the
/// key's set, the key leaves when the last one does).
#[derive(Default, Debug)]
pub struct ConnIndex {
    conns: BTreeMap<ConnKey, u32>,
}

impl ConnIndex {
    pub const fn new() -> ConnIndex {
        ConnIndex {
            conns: BTreeMap::new(),
        }
    }

    /// A connection with `key` now lives in `set_of_conn(key)`: its set.
    pub fn insert(&mut self, key: ConnKey) -> usize {
        *self.conns.entry(key).or_default() += 1;
        set_of_conn(key)
    }

    /// A connection with `key` left its set (it was removed).
    pub fn remove(&mut self, key: ConnKey) {
        if let Some(n) = self.conns.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.conns.remove(&key);
            }
        }
    }

    pub fn contains(&self, key: ConnKey) -> bool {
        self.conns.contains_key(&key)
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The set a received frame is polled with: its connection's set if the index holds it,
    /// else its port's set (`sets::set_of_frame`).
    pub fn set_of_frame(&self, frame: &[u8]) -> usize {
        if !self.conns.is_empty() {
            if let Some(key) = conn_of_frame(frame) {
                if self.contains(key) {
                    return set_of_conn(key);
                }
            }
        }
        sets::set_of_frame(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sets::{set_of_port, CONTROL_SET, ETHERTYPE_IPV4, PROTO_TCP, PROTO_UDP, SETS};
    use std::vec;
    use std::vec::Vec;

    fn segment(proto: u8, src: u32, src_port: u16, dst_port: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&src.to_be_bytes());
        ip[16..20].copy_from_slice(&0x0a00_020fu32.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&src_port.to_be_bytes());
        f.extend_from_slice(&dst_port.to_be_bytes());
        f.extend_from_slice(&[0; 16]);
        f
    }

    const HOST: u32 = 0x0a00_0202;

    fn key(remote_port: u16) -> ConnKey {
        ConnKey {
            local_port: 80,
            remote_addr: HOST,
            remote_port,
        }
    }

    #[test]
    fn a_segment_names_its_connection() {
        let f = segment(PROTO_TCP, HOST, 40000, 80);
        assert_eq!(conn_of_frame(&f), Some(key(40000)));
        assert_eq!(conn_of_frame(&segment(PROTO_UDP, HOST, 40000, 80)), None);
        assert_eq!(conn_of_frame(&f[..20]), None);
        assert_eq!(conn_of_frame(&[]), None);
    }

    #[test]
    fn indexed_connections_get_their_set_and_the_rest_their_ports() {
        let mut index = ConnIndex::new();
        let pinned = segment(PROTO_TCP, HOST, 40000, 80);
        // Nothing indexed: the port's set (the listener's, where a SYN must go).
        assert_eq!(index.set_of_frame(&pinned), set_of_port(80));
        let set = index.insert(key(40000));
        assert_eq!(set, set_of_conn(key(40000)));
        assert_eq!(index.set_of_frame(&pinned), set);
        // Another peer port, another peer, UDP with the same ports, ARP: not indexed.
        assert_eq!(
            index.set_of_frame(&segment(PROTO_TCP, HOST, 40001, 80)),
            set_of_port(80)
        );
        assert_eq!(
            index.set_of_frame(&segment(PROTO_TCP, HOST + 1, 40000, 80)),
            set_of_port(80)
        );
        assert_eq!(
            index.set_of_frame(&segment(PROTO_UDP, HOST, 40000, 80)),
            set_of_port(80)
        );
        let mut arp = pinned.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(index.set_of_frame(&arp), CONTROL_SET);
        // Counted: the key stays while one connection with it does.
        index.insert(key(40000));
        index.remove(key(40000));
        assert_eq!(index.set_of_frame(&pinned), set);
        index.remove(key(40000));
        assert!(index.is_empty());
        assert_eq!(index.set_of_frame(&pinned), set_of_port(80));
        // Removing what is not there changes nothing.
        index.remove(key(1));
        assert!(index.is_empty());
    }

    #[test]
    fn connections_on_one_port_spread_over_the_sets() {
        // 200 connections to port 80 from one peer's consecutive ports, and 200 from as many
        // peers on one port: the set of each holds it and a few hash mates, never all.
        for keys in [
            (0..200u16).map(|i| key(40000 + i)).collect::<Vec<_>>(),
            (0..200u32)
                .map(|i| ConnKey {
                    local_port: 80,
                    remote_addr: HOST + i,
                    remote_port: 5000,
                })
                .collect(),
        ] {
            let mut per_set = [0usize; SETS];
            for k in &keys {
                let s = set_of_conn(*k);
                assert!((1..SETS).contains(&s));
                per_set[s] += 1;
            }
            let most = per_set.iter().max().copied().unwrap();
            let used = per_set.iter().filter(|&&n| n > 0).count();
            assert!(most <= 6, "a set holds {most} of 200 connections");
            assert!(used >= 80, "200 connections use {used} sets");
        }
    }
}
