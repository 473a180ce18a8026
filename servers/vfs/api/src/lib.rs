//! What the VFS server `vfs` and the rest of the system agree on: the schema of the VFS's
//! manifest `config` table (its mounts and who its clients are). Plain types only; it touches
//! nothing. vfs and the host tool (which checks and encodes the table) use it.
//!
//! ```toml
//! [[server]]
//! name = "vfs"
//! provides = ["vfs"]
//! uses = ["pfs0", "pfs1"]
//! [server.config]
//! mounts = [{ path = "/", pfs = "pfs0" }, { path = "/data", pfs = "pfs1" }]
//! creds = [{ client = "ops", uid = 0, gid = 0 }]
//! admins = ["ops"]
//! ```
//! - `mounts`: mount points in order, the first `/`; `pfs` is an endpoint the VFS `uses`.
//! - `creds`: the user and group a client (a server that `uses` the VFS) acts as; a client not
//!   listed is `nobody` (65534).
//! - `admins`: clients allowed the `crash` test call.
//! - A mount's `restarts = true` says its PFS comes back (manifest policy `restart`, issue 16):
//!   when it dies the VFS waits for the new incarnation (up to [`RESTART_WAIT_MS`]) at the next
//!   request for that mount, connects to it and serves the mount again; without it a dead
//!   mount stays dead (`Gone`).
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_manifest::config::{Client, Endpoint, Peer, Peers};
use serde::{Deserialize, Serialize};

/// The VFS's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub mounts: Vec<Mount>,
    #[serde(default)]
    pub creds: Vec<Cred>,
    #[serde(default)]
    pub admins: Vec<Client>,
}

/// A file system served by `pfs`, seen at `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    pub path: String,
    pub pfs: Endpoint,
    #[serde(default)]
    pub restarts: bool,
}

/// How long the VFS waits for a restarting PFS to answer again.
pub const RESTART_WAIT_MS: u64 = 5000;

/// Who a client is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cred {
    pub client: Client,
    pub uid: u32,
    pub gid: u32,
}

impl Peers for Config {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        for m in &self.mounts {
            f(Peer::Endpoint(&m.pfs));
        }
        for c in &mut self.creds {
            f(Peer::Client(&mut c.client));
        }
        for a in &mut self.admins {
            f(Peer::Client(a));
        }
    }
}
