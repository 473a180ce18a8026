//! `mem`, the memory server. See the library (`src/lib.rs`) for the bookkeeping and
//! `docs/memory.md` for the protocol. The server itself exists only in the guest; on the host this
//! binary is empty so that `cargo test` can build the crate.
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
mod server;

#[cfg(not(target_os = "none"))]
fn main() {}
