//! What the process server `proc` and the rest of the system agree on: the schema of its
//! manifest `config` table (the first process and what every process gets). Plain types only;
//! it touches nothing. proc and the host tool (which checks, fills in and encodes the table;
//! `./sawmill run linux` sets `init`, `env` and `trace`) use it.
//!
//! ```toml
//! [[server]]
//! name = "proc"
//! provides = ["proc"]
//! uses = ["vfs", "mem", "console", "console-in"]
//! modules = ["linux-personality"]
//! [server.config]
//! init = ["/bin/busybox", "ls", "-l", "/"]
//! env = ["PATH=/bin:/usr/bin", "HOME=/root"]
//! ```
//! - `init`: the first process's `argv`; `init[0]` is the program (a path; without a `/` it is
//!   looked up in the `PATH` of `env`, as a shell does).
//! - `env`: its environment strings (`NAME=value`).
//! - `cwd`: its working directory (default `/`).
//! - `trace`: print every system call of every process (default off).
//! - `uid`, `gid`: its credentials (default 0, root).
//! - `personality`: the boot module started as each process's library (default
//!   `linux-personality`; a test may name a stand-in).
//! - `process_kmem_kb`: kernel memory each process may use (page tables, mapping nodes, the
//!   objects its library creates), default 4096.
//! - `lib_heap_kb`: the library's heap, mapped before it starts (default 1024).
//! - `pool_kb`: memory proc takes from `mem` to build processes from (their libraries' heaps,
//!   stacks and writable pages), default 8192.
//! - `priority`: the priority of every process (default 50, below the servers).
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_manifest::config::{Peer, Peers};
use serde::{Deserialize, Serialize};

pub const DEFAULT_PERSONALITY: &str = "linux-personality";
pub const DEFAULT_PROCESS_KMEM_KB: u32 = 4096;
pub const DEFAULT_LIB_HEAP_KB: u32 = 1024;
pub const DEFAULT_POOL_KB: u32 = 8192;
pub const DEFAULT_PRIORITY: u8 = 50;

/// proc's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub init: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default = "root_dir")]
    pub cwd: String,
    #[serde(default)]
    pub trace: bool,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    #[serde(default = "personality")]
    pub personality: String,
    #[serde(default = "process_kmem_kb")]
    pub process_kmem_kb: u32,
    #[serde(default = "lib_heap_kb")]
    pub lib_heap_kb: u32,
    #[serde(default = "pool_kb")]
    pub pool_kb: u32,
    #[serde(default = "priority")]
    pub priority: u8,
}

fn root_dir() -> String {
    String::from("/")
}
fn personality() -> String {
    String::from(DEFAULT_PERSONALITY)
}
fn process_kmem_kb() -> u32 {
    DEFAULT_PROCESS_KMEM_KB
}
fn lib_heap_kb() -> u32 {
    DEFAULT_LIB_HEAP_KB
}
fn pool_kb() -> u32 {
    DEFAULT_POOL_KB
}
fn priority() -> u8 {
    DEFAULT_PRIORITY
}

impl Peers for Config {
    fn peers(&mut self, _f: &mut dyn FnMut(Peer<'_>)) {}
}
