//! What the PCI platform server `pci` and the rest of the system agree on: the schema of pci's
//! manifest `config` table, which says which device goes to which driver. Plain types only; it
//! touches nothing. pci and the host tool (which checks and encodes the table) use it.
//!
//! ```toml
//! [[server]]
//! name = "pci"
//! provides = ["pci"]
//! config = { assign = [{ driver = "blk0", vendor = 0x1af4, device = 0x1001, index = 0 }] }
//! ```
//! Each `assign` entry hands the `index`-th device (from 0, in bus order) with that vendor and
//! device ID to `driver`, a server that `uses` pci; its `claim` then gets the device's ports and
//! interrupt. pci places BAR 0 in its I/O window, at `bar0` if given.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_manifest::config::{Client, Peer, Peers};
use serde::{Deserialize, Serialize};

/// pci's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub assign: Vec<Assign>,
}

/// One device for one driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assign {
    pub driver: Client,
    pub vendor: u16,
    pub device: u16,
    #[serde(default)]
    pub index: u32,
    /// Port address for BAR 0 (inside pci's I/O window); by default the next free aligned one.
    #[serde(default)]
    pub bar0: Option<u16>,
}

impl Peers for Config {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        for a in &mut self.assign {
            f(Peer::Client(&mut a.driver));
        }
    }
}
