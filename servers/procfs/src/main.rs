#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
mod server;

#[cfg(not(target_os = "none"))]
fn main() {}
