//! What the ext2 file-system server (`ext2-pfs`) and the rest of the system agree on: the schema
//! of its manifest `config` table, what its bounds on each client mean ([`share`]), and the
//! layout of an open file's read buffer that clients map ([`read_buffer`]). Plain types and
//! bookkeeping only; it touches nothing. The server and the host tool (which checks and
//! encodes the table) use it.
//!
//! ```toml
//! [[server]]
//! name = "pfs0"
//! module = "ext2-pfs"
//! provides = ["pfs0"]
//! uses = ["blk0", "mem"]
//! config = { blk = "blk0", name = "root", cache_kb = 2048 }
//! ```
//! - `blk`: the block device, an endpoint the server `uses`.
//! - `name`: how the server calls itself in its messages (`ext2-pfs[root]`).
//! - `cache_kb`: the page cache, from mem under the server's own quota (default 2048).
//! - `shadow_pages`: the most pages held back for mapped files being written (default: the
//!   server's built-in limit).
//! - `exec`: map the cache pages executable, so programs can run straight from files (lib/spawn
//!   maps their text from the file's pages); default false.
//! - `files_per_session`: the most files one client session may hold open (default 256); one
//!   more gets `NoSpace`, for that client only.
//! - `vfs_files`: the same for the files the VFS opens as itself (default 1024).
//! - `files`: the most open files in all (default 4096): what the server's kernel quota
//!   (`kmem_kb`; each open file is a kernel watch of 72 bytes) and heap must hold.
//! - `check`: check the file system with the engine's checker (read-only) on every start, and
//!   serve it read-only if it is not clean (default false). For a PFS whose manifest policy is
//!   `restart`: a new incarnation finds the image as the dead one left it (issue 16).
//! - `trace_reads`: print a line for each miss on a file's data that reads from the disk —
//!   `ext2-pfs[NAME]: read miss at page P of a N-page file: W pages read` (P and N in file
//!   pages, W the window read and waited for) — so a scenario can see which reads went to the
//!   disk without timing anything (default false).
#![no_std]

extern crate alloc;

pub mod read_buffer;
pub mod readahead;
pub mod share;

use alloc::string::String;
use sawmill_manifest::config::{Endpoint, Peer, Peers};
use serde::{Deserialize, Serialize};

/// The cache size without a `cache_kb`.
pub const DEFAULT_CACHE_KB: u32 = 2048;

fn default_cache_kb() -> u32 {
    DEFAULT_CACHE_KB
}

/// Open files one session may hold without a `files_per_session`.
pub const DEFAULT_FILES_PER_SESSION: u32 = 256;
/// Open files the VFS may hold without a `vfs_files`.
pub const DEFAULT_VFS_FILES: u32 = 1024;
/// Open files in all without a `files`.
pub const DEFAULT_FILES: u32 = 4096;

/// The ext2 server's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub blk: Endpoint,
    pub name: String,
    #[serde(default = "default_cache_kb")]
    pub cache_kb: u32,
    #[serde(default)]
    pub shadow_pages: Option<u32>,
    #[serde(default)]
    pub exec: bool,
    #[serde(default)]
    pub files_per_session: Option<u32>,
    #[serde(default)]
    pub vfs_files: Option<u32>,
    #[serde(default)]
    pub files: Option<u32>,
    #[serde(default)]
    pub check: bool,
    #[serde(default)]
    pub trace_reads: bool,
}

impl Peers for Config {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        f(Peer::Endpoint(&self.blk));
    }
}
