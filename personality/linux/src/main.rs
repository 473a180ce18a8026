//! The Linux personality's guest binary: the library of `src/lib.rs` as mapped into a Linux
//! process (being built). On the host this binary is empty so that `cargo test` builds the crate.
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod files_guest;

#[cfg(target_os = "none")]
sawmill_rt::entry!(main);

#[cfg(target_os = "none")]
fn main() {}

#[cfg(not(target_os = "none"))]
fn main() {}
