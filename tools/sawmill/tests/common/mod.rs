//! Helpers shared by the tool's integration tests (each test file is its own crate and includes
//! this module with `mod common;`; a file uses only some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// The file's SHA-256 as `sha256sum` prints it (lower-case hex).
pub fn sha256(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// FNV-1a, 64 bits: a checksum both ends of an echo compute the same way.
pub fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One datagram to the host's forwarded `port` and its answer, if one came within `timeout`.
pub fn udp_ask(port: u16, msg: &[u8], timeout: Duration) -> Option<Vec<u8>> {
    let u = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
    u.set_read_timeout(Some(timeout)).ok()?;
    u.send_to(msg, ("127.0.0.1", port)).ok()?;
    let mut b = vec![0u8; 65536];
    let (n, _) = u.recv_from(&mut b).ok()?;
    b.truncate(n);
    Some(b)
}

/// Asks the guest's net-kill test server (UDP, forwarded to `port`) to kill server `name` as
/// its `k`th kill; its answer. Asked again every 2 s until it answers (an answer may be lost
/// while the network restarts; net-kill kills once per `k`), for at most 60 s.
pub fn ask_killer(port: u16, name: &str, k: usize) -> Option<String> {
    let msg = format!("kill {name} {k}");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if let Some(r) = udp_ask(port, msg.as_bytes(), Duration::from_secs(2)) {
            return Some(String::from_utf8_lossy(&r).into_owned());
        }
    }
    None
}

/// A booted guest (`./sawmill run` spawned with `process_group(0)`) and the file its messages
/// go to; dropping it ends the tool and QEMU.
pub struct Guest {
    pub child: std::process::Child,
    pub log: PathBuf,
}

impl Guest {
    /// What the guest printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}
