#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]
#[cfg(not(target_os = "none"))]
fn main() {}
#[cfg(target_os = "none")]
sawmill_rt::entry!(guest_main);
#[cfg(target_os = "none")]
fn guest_main() {}
