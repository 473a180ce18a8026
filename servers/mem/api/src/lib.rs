//! What the memory server `mem` and the rest of the system agree on: where root maps mem's RAM
//! pool, and the schema of mem's manifest `config` table. Constants and plain types only; it
//! touches nothing. Root, mem and the host tool (which checks and encodes the table) use it.
//!
//! ```toml
//! [[server]]
//! name = "mem"
//! provides = ["mem"]
//! ram_kb = 4608
//! config = { quota = [{ client = "pfs0", kb = 2048 }, { client = "pfs1", kb = 2048 }] }
//! ```
//! - `quota`: the most memory each named client (a server that `uses` mem) may hold, in KiB. A
//!   client is told apart by the badge root mints for its use of mem, which the host tool fills
//!   in.
//! - `default_quota_kb`: the limit of every client not listed; without it, 1 GiB (no limit).
//! - `dataspaces_per_client`, `dataspaces`: most dataspaces one client, and all together, may
//!   hold at once (defaults 64 and 400).
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_manifest::config::{Client, Peer, Peers};
use serde::{Deserialize, Serialize};

/// Where mem's pool lies in mem's address space: root maps the pool's physical ranges one after
/// the other from here and lists them in mem's environment (`sawmill_rt::env::KIND_RAM`).
pub const POOL_BASE: u64 = 0x0000_0010_0000_0000;

/// mem's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub default_quota_kb: Option<u32>,
    /// Dataspaces one client may hold at once (default [`DEFAULT_DATASPACES_PER_CLIENT`]); the
    /// process server's badge carries every Linux process's memory, so its system raises it.
    #[serde(default)]
    pub dataspaces_per_client: Option<u32>,
    /// Dataspaces at once in all (default [`DEFAULT_DATASPACES`]). Each costs mem up to two
    /// capability slots, so a system that raises it gives mem a larger table (`cap_slots`).
    #[serde(default)]
    pub dataspaces: Option<u32>,
    #[serde(default)]
    pub quota: Vec<Quota>,
}

pub const DEFAULT_DATASPACES_PER_CLIENT: u32 = 64;
/// Dataspaces in all unless the manifest says otherwise: two capability slots each fit mem's
/// default table of 1024.
pub const DEFAULT_DATASPACES: u32 = 400;

/// The limit of one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    pub client: Client,
    pub kb: u32,
}

impl Peers for Config {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        for q in &mut self.quota {
            f(Peer::Client(&mut q.client));
        }
    }
}
