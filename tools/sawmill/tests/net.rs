//! The network system from the host: boots `systems/net.toml` (the virtio-net driver, the
//! network stack configured by DHCP, and net-echo on the socket interface) with QEMU's user
//! network forwarding ports of the host's 127.0.0.1 to the guest, and talks to it:
//! - TCP echo returns exactly the bytes sent, small and 1 MiB (equal, and the same checksum),
//!   and on several connections at once; after the host ends its side, the guest closes its
//!   socket (by dropping the capability) and the host reads the end;
//! - UDP echo returns each datagram;
//! - a connection to a guest port nobody listens on ends at once (the guest's reset), it does
//!   not hang;
//! - malformed traffic (empty and oversized datagrams, which QEMU fragments, connections
//!   dropped at once or half-closed) leaves the stack serving.
//!
//! QEMU's forwarder accepts a TCP connection before anything in the guest listens, so readiness
//! is a real echo reply, retried for a bounded time, never a bare connect.
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{fnv1a, free_port, pseudo_random, repo, udp_ask};

const QUIT: &[u8] = b"sawmill-net-echo: quit";

/// The booted guest; dropping it asks net-echo to quit, then ends the tool if it has not.
struct Guest {
    child: Child,
    udp: u16,
    log: PathBuf,
}

impl Guest {
    fn quit(&self) -> Option<Vec<u8>> {
        let u = UdpSocket::bind("127.0.0.1:0").ok()?;
        u.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        u.send_to(QUIT, ("127.0.0.1", self.udp)).ok()?;
        let mut b = [0u8; 64];
        let (n, _) = u.recv_from(&mut b).ok()?;
        Some(b[..n].to_vec())
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            thread::sleep(Duration::from_millis(200));
        }
        None
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.quit();
            if self.wait_exit(Duration::from_secs(20)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// Sends `data` on a new connection to `port`, ends its sending side, and reads the echo until
/// the guest closes the connection (the echo server closes its socket — drops the capability —
/// once it has read the end and sent everything back). A second thread writes while this one
/// reads, so neither side's window stalls the other.
fn tcp_echo(port: u16, data: &[u8]) -> std::io::Result<Vec<u8>> {
    let s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    s.set_nodelay(true)?;
    let mut w = s.try_clone()?;
    let out = data.to_vec();
    let writer = thread::spawn(move || {
        w.write_all(&out)?;
        w.shutdown(Shutdown::Write)
    });
    let mut got = Vec::with_capacity(data.len());
    (&s).read_to_end(&mut got)?;
    writer.join().unwrap()?;
    Ok(got)
}

#[test]
fn host_talks_to_the_guest_through_forwarded_ports() {
    let (tcp, udp, closed) = (free_port(), free_port(), free_port());
    let dir = repo().join("target/test-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("net-host.log");
    let child = Command::new(repo().join("sawmill"))
        .args(["run", "net", "--net", "--timeout", "400"])
        .args(["--forward", &format!("tcp:{tcp}:7777")])
        .args(["--forward", &format!("udp:{udp}:7778")])
        .args(["--forward", &format!("tcp:{closed}:7779")])
        .args(["--pcap", dir.join("net-host.pcap").to_str().unwrap()])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .expect("running ./sawmill");
    let mut g = Guest {
        child,
        udp,
        log: log.clone(),
    };

    // Ready when an echo comes back (the build and boot may take minutes on a loaded host).
    let start = Instant::now();
    loop {
        if udp_ask(udp, b"ready?", Duration::from_secs(1)).as_deref() == Some(b"ready?") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no UDP echo within 300 s; guest log:\n{}",
            g.log()
        );
        if let Ok(Some(st)) = g.child.try_wait() {
            panic!("the guest ended early ({st}); log:\n{}", g.log());
        }
    }

    let small = b"hello, sawmill\n".to_vec();
    assert_eq!(tcp_echo(tcp, &small).unwrap(), small, "small TCP echo");
    assert_eq!(
        udp_ask(udp, b"one datagram", Duration::from_secs(5)).as_deref(),
        Some(&b"one datagram"[..]),
        "UDP echo"
    );

    let big = pseudo_random(1 << 20, 0x5a5a);
    let got = tcp_echo(tcp, &big).unwrap();
    assert_eq!(got.len(), big.len(), "1 MiB echo: bytes back");
    assert_eq!(fnv1a(&got), fnv1a(&big), "1 MiB echo: checksum");
    assert!(got == big, "1 MiB echo: contents");

    // Several connections at once in the guest: opened one after another (QEMU's forwarder
    // listens on the host with a backlog of one, so a burst of connects can be refused on the
    // host side before the guest sees them), each proven by a first echo, then all transfer
    // together.
    let conns: Vec<TcpStream> = (0..8)
        .map(|i| {
            let mut s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s.write_all(b"+").unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b)
                .unwrap_or_else(|e| panic!("connection {i}: first echo: {e}"));
            s
        })
        .collect();
    let parallel: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            thread::spawn(move || {
                let d = pseudo_random(64 * 1024, 100 + i as u64);
                let mut w = s.try_clone().unwrap();
                let out = d.clone();
                let writer = thread::spawn(move || w.write_all(&out));
                let mut got = vec![0u8; d.len()];
                let r = (&s).read_exact(&mut got);
                writer.join().unwrap().unwrap();
                (r.map(|_| got == d), i)
            })
        })
        .collect();
    for t in parallel {
        let (ok, i) = t.join().unwrap();
        assert!(matches!(ok, Ok(true)), "parallel connection {i}: {ok:?}");
    }

    // Nobody listens on the guest's 7779: QEMU accepted the host's connection, the guest
    // answers QEMU's SYN with a reset, and the host's connection ends within seconds.
    let mut s = TcpStream::connect(("127.0.0.1", closed)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(b"anyone?");
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {}
        other => panic!("a connection to a closed guest port: {other:?} (expected its end)"),
    }

    // Malformed and rude traffic, then the echo still works.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    for size in [0usize, 1, 447, 448, 449, 1472, 1473, 4000, 20000, 65000] {
        let _ = u.send_to(&pseudo_random(size, size as u64), ("127.0.0.1", udp));
    }
    for i in 0..20 {
        let s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
        if i % 2 == 0 {
            let mut s = s;
            let _ = s.write_all(&pseudo_random(3000, i));
            let _ = s.shutdown(Shutdown::Both);
        }
    }
    let start = Instant::now();
    let after = loop {
        match udp_ask(udp, b"still there?", Duration::from_secs(2)) {
            Some(r) if r == b"still there?" => break r,
            _ if start.elapsed() > Duration::from_secs(30) => {
                panic!("no UDP echo after the rude traffic; log:\n{}", g.log())
            }
            _ => {}
        }
    };
    assert_eq!(after, b"still there?");
    let d = pseudo_random(100_000, 7);
    assert!(
        tcp_echo(tcp, &d).unwrap() == d,
        "TCP echo after the rude traffic"
    );

    assert_eq!(g.quit().as_deref(), Some(&b"bye"[..]), "quit");
    let st = g
        .wait_exit(Duration::from_secs(60))
        .expect("the guest ends");
    let text = g.log();
    assert!(st.success(), "guest exit: {st}; log:\n{text}");
    assert!(text.contains("root: all done, success"), "log:\n{text}");
    for bad in ["PANIC", "FAIL", "killed"] {
        assert!(!text.contains(bad), "`{bad}` in the log:\n{text}");
    }
}
