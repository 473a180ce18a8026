//! What the /proc file system server `procfs` and the rest of the system agree on: the schema of
//! its manifest `config` table. Plain types only; it touches nothing. procfs and the host tool
//! (which checks and encodes the table) use it.
//!
//! ```toml
//! [[server]]
//! name = "procfs"
//! provides = ["procfs"]
//! uses = [{ endpoint = "proc", badge = 0x4000_0000 }, "mem"]   # a badge above every pid
//! [server.config]
//! mounts = [
//!     { source = "/dev/root", path = "/", fstype = "ext2" },
//!     { source = "proc", path = "/proc", fstype = "proc" },
//! ]
//! ```
//! - `mounts`: the lines of `/proc/mounts`, in order (what the VFS's `mounts` table mounts, with
//!   the names Linux's tools show: the device or source, the mount point, the file-system type;
//!   `options` defaults to `rw`). procfs does not ask the VFS (the VFS is procfs's client: a
//!   call back could deadlock); a host test (tools/sawmill `configs.rs`) checks that
//!   systems/linux.toml's two tables agree.
//! - `open_files`: snapshots open at once in all (default 256); `per_client`: of those, how many
//!   one opener (the VFS, or one client's session) may hold (default 64).
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_manifest::config::{Peer, Peers};
use serde::{Deserialize, Serialize};

pub const DEFAULT_OPEN_FILES: u32 = 256;
pub const DEFAULT_PER_CLIENT: u32 = 64;

/// procfs's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub mounts: Vec<Mount>,
    #[serde(default = "open_files")]
    pub open_files: u32,
    #[serde(default = "per_client")]
    pub per_client: u32,
}

/// One line of `/proc/mounts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    pub source: String,
    pub path: String,
    pub fstype: String,
    #[serde(default = "rw")]
    pub options: String,
}

fn open_files() -> u32 {
    DEFAULT_OPEN_FILES
}
fn per_client() -> u32 {
    DEFAULT_PER_CLIENT
}
fn rw() -> String {
    String::from("rw")
}

impl Peers for Config {
    fn peers(&mut self, _f: &mut dyn FnMut(Peer<'_>)) {}
}
