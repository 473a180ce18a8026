//! The network figures (issue 15): `net.*` on sawmill, `linux.net.*` from the Linux baseline.
//! Both run the same `lbench` net metrics: loopback between two processes (UDP and TCP 1-byte
//! round trips, a whole short TCP connection, TCP bulk) and UDP sends through virtio-net to a
//! sink on the host (QEMU's user network: the guest reaches the host's loopback as 10.0.2.2).
//! The sawmill side boots systems/linux.toml with the NIC under `-icount shift=0` and runs
//! `/lbench /bench --prefix= --only=net.*`. Touches: `<out>/net/`, images under target/, one
//! UDP port on the host's loopback while a run lasts.

use super::linux as baseline;
use super::Metric;
use crate::repo::Repo;
use crate::rootfs;
use std::fs;
use std::net::UdpSocket;
use std::path::Path;

/// The metrics, without prefix: sawmill's names; Linux's are `linux.` + these.
pub const METRICS: &[&str] = &[
    "net.udp.roundtrip",
    "net.udp.roundtrip.sockets0",
    "net.udp.roundtrip.sockets256",
    "net.tcp.roundtrip",
    "net.tcp.connect",
    "net.tcp.bulk",
    "net.udp.send64",
    "net.udp.send1472",
];

/// `lbench --only=` / `--skip=` pattern of every network metric.
pub const PATTERN: &str = "net.*";

/// The host as QEMU's user network shows it to the guest.
const HOST_FROM_GUEST: &str = "10.0.2.2";

/// Where the benchmark files lie in the image (`lbench`'s directory argument).
const DATA_DIR: &str = "bench";

/// QEMU arguments of the NIC both sides measure: the user network, virtio-net.
pub fn qemu_args() -> Vec<String> {
    crate::qemu::net_args(&[], None)
}

/// A UDP port on the host's loopback that takes the guest's datagrams and drops them (nobody
/// reads; a full receive buffer drops silently, with no ICMP back to the guest). Bound while
/// it lives.
pub struct HostSink {
    socket: UdpSocket,
}

impl HostSink {
    pub fn bind() -> Result<HostSink, String> {
        let socket =
            UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind the UDP sink: {e}"))?;
        Ok(HostSink { socket })
    }

    /// `IP:PORT` of the sink as the guest addresses it (`lbench --sink=`).
    pub fn guest_address(&self) -> String {
        let port = self.socket.local_addr().map(|a| a.port()).unwrap_or(0);
        format!("{HOST_FROM_GUEST}:{port}")
    }
}

/// `lbench`'s command line on sawmill.
pub fn argv(sink: &str) -> Vec<String> {
    vec![
        "/lbench".into(),
        format!("/{DATA_DIR}"),
        "--prefix=".into(),
        format!("--only={PATTERN}"),
        format!("--sink={sink}"),
    ]
}

/// Builds `lbench` and the root image, boots the Linux system with the NIC once, returns the
/// `net.*` figures.
pub fn run(
    repo: &Repo,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Metric>, String> {
    let work = out_dir.join("net");
    progress("net: building bench/linux/lbench.c with musl-gcc");
    let lbench = baseline::build_lbench(&repo.root, &work)?;
    let tree = work.join("tree");
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(tree.join(DATA_DIR)).map_err(|e| format!("{}: {e}", tree.display()))?;
    fs::copy(&lbench, tree.join("lbench")).map_err(|e| format!("copy lbench: {e}"))?;
    let image = work.join("root.img");
    progress("net: making the root image (busybox, /lbench)");
    rootfs::build(&rootfs::Options {
        trees: vec![tree],
        output: image.clone(),
        size_mb: rootfs::DEFAULT_SIZE_MB,
        busybox: rootfs::HOST_BUSYBOX.into(),
        motd: None,
    })?;
    let sink = HostSink::bind()?;
    let argv = argv(&sink.guest_address());
    let expected: Vec<String> = METRICS.iter().map(|m| m.to_string()).collect();
    let metrics = super::linuxabi::boot_lbench(
        repo,
        &super::linuxabi::LbenchRun {
            what: "lbench net",
            tag: "bench-net",
            work: &work,
            image,
            argv,
            net: qemu_args(),
            expected: &expected,
        },
        progress,
    );
    // The sink stays bound until the guest has sent its last datagram.
    drop(sink);
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_expects_every_network_metric() {
        for m in METRICS {
            assert!(
                baseline::EXPECTED.contains(&format!("linux.{m}").as_str()),
                "{m}"
            );
            assert!(m.starts_with(PATTERN.trim_end_matches('*')), "{m}");
        }
    }

    #[test]
    fn argv_selects_the_network_metrics_without_prefix() {
        assert_eq!(
            argv("10.0.2.2:9"),
            [
                "/lbench",
                "/bench",
                "--prefix=",
                "--only=net.*",
                "--sink=10.0.2.2:9"
            ]
        );
    }
}
