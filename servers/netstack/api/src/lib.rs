//! What the network stack `netstack` and the rest of the system agree on: the schema of its
//! manifest `config` table, and how its addresses are written. Plain types only; it touches
//! nothing. netstack and the host tool (which checks and encodes the table) use it. Also the
//! stack's host-testable logic: its loopback ([`loopback`]), socket sets ([`sets`]) and connection index ([`conns`]), checksums ([`csum`]) and UDP fast path ([`udpfast`]).
//!
//! ```toml
//! [[server]]
//! name = "netstack"
//! provides = ["socket"]
//! uses = ["net0", "mem"]
//! config = { driver = "net0", address = "10.0.2.15/24", gateway = "10.0.2.2", privileged = ["httpd"] }
//! ```
//! - `driver`: the network driver's endpoint (`interfaces/net.idl`), one the stack `uses`.
//! - `address` (`a.b.c.d/prefix`) and `gateway`: a static configuration; without `address` the
//!   stack asks DHCP (QEMU's user network answers 10.0.2.15/24, gateway 10.0.2.2).
//! - `privileged`: clients that may bind ports below 1024 with their own manifest capability
//!   (a client that gets its capability from the network manager has its rights in its badge).
//! - `manager`: the network manager (`servers/netmgr`), the one client whose `socket.grant`
//!   mints capabilities with rights ([`grant`]).
#![no_std]

#[cfg(test)]
extern crate std;

pub mod conns;
pub mod csum;
pub mod grant;
pub mod loopback;
pub mod sets;
pub mod udpfast;

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_manifest::config::{Client, Endpoint, Peer, Peers};
use serde::{Deserialize, Serialize};

/// netstack's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub driver: Endpoint,
    #[serde(default)]
    pub address: Option<String>,
    #[serde(default)]
    pub gateway: Option<String>,
    #[serde(default)]
    pub privileged: Vec<Client>,
    #[serde(default)]
    pub manager: Option<Client>,
    /// smoltcp sockets the stack holds at most ([`DEFAULT_SOCKETS`] without it): each holds up
    /// to [`SOCKET_BYTES`] of the stack's heap, so `heap_kb` has to be sized with it.
    #[serde(default)]
    pub sockets: Option<u32>,
    /// ... and one client at most (a quarter of `sockets` without it). All Linux processes are
    /// one client (proc's badge): the Linux system gives it the larger part.
    #[serde(default)]
    pub client_sockets: Option<u32>,
    /// ... and one sub-account at most ([`DEFAULT_PROCESS_SOCKETS`], at most `client_sockets`,
    /// without it): proc mints one per Linux process (`socket.grant_sub`), so one process that
    /// floods leaves its client's other processes the rest.
    #[serde(default)]
    pub process_sockets: Option<u32>,
}

/// A sub-account's smoltcp sockets at most without `process_sockets`.
pub const DEFAULT_PROCESS_SOCKETS: u32 = 128;

/// smoltcp sockets in all without `sockets`: what fits an 8 MiB heap with room to spare.
pub const DEFAULT_SOCKETS: u32 = 192;
/// The most `sockets` may say.
pub const MOST_SOCKETS: u32 = 4096;
/// The heap one socket may hold at most: a TCP socket's two 16 KiB buffers.
pub const SOCKET_BYTES: usize = 32 * 1024;

impl Peers for Config {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        f(Peer::Endpoint(&self.driver));
        for c in &mut self.privileged {
            f(Peer::Client(c));
        }
        if let Some(m) = &mut self.manager {
            f(Peer::Client(m));
        }
    }
}

/// `a.b.c.d` as the socket interface's number (`a << 24 | ... | d`).
pub fn parse_addr(s: &str) -> Option<u32> {
    let mut v: u32 = 0;
    let mut parts = 0;
    for p in s.split('.') {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = p.parse().ok()?;
        if n > 255 {
            return None;
        }
        v = v << 8 | n;
        parts += 1;
    }
    (parts == 4).then_some(v)
}

/// `a.b.c.d/prefix` as an address and a prefix length (0..=32).
pub fn parse_cidr(s: &str) -> Option<(u32, u8)> {
    let (a, p) = s.split_once('/')?;
    let prefix: u8 = p.parse().ok()?;
    (prefix <= 32).then_some((parse_addr(a)?, prefix))
}

impl Config {
    /// smoltcp sockets in all and per client.
    pub fn socket_bounds(&self) -> (usize, usize) {
        let all = self.sockets.unwrap_or(DEFAULT_SOCKETS) as usize;
        (all, self.client_sockets.map_or(all / 4, |n| n as usize))
    }

    /// smoltcp sockets one sub-account (a Linux process) may hold.
    pub fn process_sockets(&self) -> usize {
        let one = self.socket_bounds().1;
        self.process_sockets
            .map_or(one.min(DEFAULT_PROCESS_SOCKETS as usize), |n| n as usize)
    }

    /// Checks the written addresses (the host tool calls it, so a typo fails the build of the
    /// image, not the boot).
    pub fn check(&self) -> Result<(), &'static str> {
        let (all, one) = self.socket_bounds();
        if all == 0 || all > MOST_SOCKETS as usize {
            return Err("`sockets` is not within 1..=4096");
        }
        if one == 0 || one > all {
            return Err("`client_sockets` is not within 1..=`sockets`");
        }
        let sub = self.process_sockets();
        if sub == 0 || sub > one {
            return Err("`process_sockets` is not within 1..=`client_sockets`");
        }
        if let Some(a) = &self.address {
            parse_cidr(a).ok_or("`address` is not a.b.c.d/prefix")?;
        }
        if let Some(g) = &self.gateway {
            parse_addr(g).ok_or("`gateway` is not a.b.c.d")?;
            if self.address.is_none() {
                return Err("`gateway` without `address` (DHCP gives the gateway)");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_sockets(all: Option<u32>, one: Option<u32>) -> Config {
        Config {
            driver: Endpoint::new("net0"),
            address: None,
            gateway: None,
            privileged: Vec::new(),
            manager: None,
            sockets: all,
            client_sockets: one,
            process_sockets: None,
        }
    }

    #[test]
    fn process_sockets() {
        assert_eq!(with_sockets(None, None).process_sockets(), 48);
        assert_eq!(with_sockets(Some(512), Some(448)).process_sockets(), 128);
        let mut c = with_sockets(Some(640), Some(576));
        c.process_sockets = Some(416);
        assert_eq!(c.process_sockets(), 416);
        assert!(c.check().is_ok());
        for bad in [0, 577] {
            c.process_sockets = Some(bad);
            assert!(c.check().is_err(), "{bad}");
        }
    }

    #[test]
    fn socket_bounds() {
        assert_eq!(with_sockets(None, None).socket_bounds(), (192, 48));
        assert_eq!(with_sockets(Some(512), None).socket_bounds(), (512, 128));
        assert_eq!(
            with_sockets(Some(512), Some(448)).socket_bounds(),
            (512, 448)
        );
        assert!(with_sockets(Some(512), Some(448)).check().is_ok());
        for (all, one) in [
            (Some(0), None),
            (Some(5000), None),
            (None, Some(193)),
            (None, Some(0)),
        ] {
            assert!(with_sockets(all, one).check().is_err(), "{all:?} {one:?}");
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("10.0.2.15"), Some(0x0a00_020f));
        assert_eq!(parse_addr("255.255.255.255"), Some(u32::MAX));
        for bad in [
            "10.0.2",
            "10.0.2.15.1",
            "10.0.2.256",
            "a.b.c.d",
            "10..2.15",
            "",
        ] {
            assert_eq!(parse_addr(bad), None, "{bad}");
        }
        assert_eq!(parse_cidr("10.0.2.15/24"), Some((0x0a00_020f, 24)));
        assert_eq!(parse_cidr("10.0.2.15/33"), None);
        assert_eq!(parse_cidr("10.0.2.15"), None);
    }

    #[test]
    fn checks() {
        let mut c = Config {
            driver: Endpoint::new("net0"),
            address: Some("10.0.2.15/24".into()),
            gateway: Some("10.0.2.2".into()),
            privileged: Vec::new(),
            manager: None,
            sockets: None,
            client_sockets: None,
            process_sockets: None,
        };
        assert_eq!(c.check(), Ok(()));
        c.address = None;
        assert!(c.check().is_err());
        c.gateway = None;
        assert_eq!(c.check(), Ok(()));
        c.address = Some("10.0.2.15/40".into());
        assert!(c.check().is_err());
    }
}
