//! What the network manager `netmgr` and the rest of the system agree on: the schema of its
//! manifest `config` table and its access rule ([`Config::decide`]), host-tested. Plain types
//! only; it touches nothing. netmgr and the host tool (which checks and encodes the table) use
//! it.
//!
//! ```toml
//! [[server]]
//! name = "netmgr"
//! provides = ["netmgr"]
//! uses = ["socket"]
//! config = { stacks = [{ stack = "socket", devices = ["net0"] }], rules = [{ client = "proc", privileged_ports = true }] }
//! ```
//! - `stacks`: the network stacks (each an endpoint netmgr `uses`; the stack's configuration
//!   names netmgr its `manager`) and the drivers each is bound to (for re-binding after a
//!   driver restarts, not done yet).
//! - `rules`: what a client may ask for beyond plain sockets: `privileged_ports` (bind ports
//!   below 1024), `raw` (raw sockets; no stack serves them yet). A client without a rule gets
//!   unprivileged capabilities only.
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_manifest::config::{Client, Endpoint, Peer, Peers};
use serde::{Deserialize, Serialize};

/// The rights a stack capability can carry (the stack's badge layout).
pub use sawmill_netstack_api::grant::{RIGHT_PRIVILEGED_PORTS, RIGHT_RAW};

/// netmgr's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub stacks: Vec<Stack>,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// One network stack and the drivers it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stack {
    pub stack: Endpoint,
    #[serde(default)]
    pub devices: Vec<String>,
}

/// What one client may ask for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub client: Client,
    #[serde(default)]
    pub privileged_ports: bool,
    #[serde(default)]
    pub raw: bool,
}

impl Peers for Config {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        for s in &mut self.stacks {
            f(Peer::Endpoint(&s.stack));
        }
        for r in &mut self.rules {
            f(Peer::Client(&mut r.client));
        }
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NoStack,
    Denied,
}

impl Config {
    /// The rights the client with manifest badge `badge` may ask for.
    pub fn allowed(&self, badge: u64) -> u32 {
        self.rules
            .iter()
            .filter(|r| r.client.badge == badge)
            .map(|r| {
                (if r.privileged_ports {
                    RIGHT_PRIVILEGED_PORTS
                } else {
                    0
                }) | (if r.raw { RIGHT_RAW } else { 0 })
            })
            .fold(0, |a, b| a | b)
    }

    /// The decision on `open(stack, rights)` from `badge`: the stack's index, or why not.
    pub fn decide(&self, badge: u64, stack: u32, rights: u32) -> Result<usize, Refusal> {
        let i = stack as usize;
        if i >= self.stacks.len() {
            return Err(Refusal::NoStack);
        }
        if rights & !self.allowed(badge) != 0 {
            return Err(Refusal::Denied);
        }
        Ok(i)
    }

    /// Checks what the schema cannot say (the host tool calls it before building an image).
    pub fn check(&self) -> Result<(), &'static str> {
        if self.stacks.is_empty() {
            return Err("`stacks` is empty: netmgr manages at least one stack");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn cfg() -> Config {
        Config {
            stacks: vec![Stack {
                stack: Endpoint::new("socket"),
                devices: vec!["net0".into()],
            }],
            rules: vec![
                Rule {
                    client: Client::new("proc", 3),
                    privileged_ports: true,
                    raw: false,
                },
                Rule {
                    client: Client::new("ping", 4),
                    privileged_ports: false,
                    raw: true,
                },
            ],
        }
    }

    #[test]
    fn rules_decide_rights() {
        let c = cfg();
        assert_eq!(c.allowed(3), RIGHT_PRIVILEGED_PORTS);
        assert_eq!(c.allowed(4), RIGHT_RAW);
        assert_eq!(c.allowed(5), 0, "no rule: plain sockets only");
        assert_eq!(c.decide(3, 0, RIGHT_PRIVILEGED_PORTS), Ok(0));
        assert_eq!(
            c.decide(3, 0, 0),
            Ok(0),
            "fewer rights than allowed is fine"
        );
        assert_eq!(c.decide(3, 0, RIGHT_RAW), Err(Refusal::Denied));
        assert_eq!(c.decide(5, 0, RIGHT_PRIVILEGED_PORTS), Err(Refusal::Denied));
        assert_eq!(c.decide(5, 0, 0), Ok(0));
        assert_eq!(
            c.decide(5, 0, 1 << 20),
            Err(Refusal::Denied),
            "unknown rights"
        );
        assert_eq!(c.decide(3, 1, 0), Err(Refusal::NoStack));
        assert_eq!(c.decide(3, u32::MAX, 0), Err(Refusal::NoStack));
    }

    #[test]
    fn checks() {
        let mut c = cfg();
        assert_eq!(c.check(), Ok(()));
        c.stacks.clear();
        assert!(c.check().is_err());
    }
}
