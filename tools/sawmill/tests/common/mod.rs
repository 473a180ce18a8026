//! Helpers shared by the tool's integration tests (each test file is its own crate and includes
//! this module with `mod common;`; a file uses only some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A port of the host's loopback that is free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `n` bytes of a fixed xorshift sequence (test data whose checksum means something).
pub fn pseudo_random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Ends `child` and its whole process group (it was spawned with `process_group(0)`): QEMU
/// outlives a `./sawmill` killed alone.
pub fn kill_group(child: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
}
