//! What the network stack `netstack` and the rest of the system agree on: the schema of its
//! manifest `config` table, and how its addresses are written. Plain types only; it touches
//! nothing. netstack and the host tool (which checks and encodes the table) use it. Also the
//! stack's host-testable logic: its loopback ([`loopback`]) and checksums ([`csum`]).
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

pub mod csum;
pub mod grant;
pub mod loopback;

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
}

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
    /// Checks the written addresses (the host tool calls it, so a typo fails the build of the
    /// image, not the boot).
    pub fn check(&self) -> Result<(), &'static str> {
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
