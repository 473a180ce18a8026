//! Issue 16: a network driver restart is invisible to TCP. Boots `systems/net-restart.toml`
//! (net.toml's driver, stack and echo server, plus net-kill, which asks root to kill a server
//! when told to over UDP) with QEMU's user network, and sends a few MiB through the guest's TCP
//! echo while the driver is killed three times in the middle of it (each kill once the echo has
//! come back past a mark). The driver's policy is `restart`: each time root starts a new
//! incarnation, which resets the device; the stack notices its session token's end, attaches
//! the same session memory to the new driver, and TCP sends again what was lost meanwhile. The
//! echo must come back whole (length, checksum, contents) on the one connection, never reset,
//! and UDP echo must work afterwards.
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{ask_killer, fnv1a, free_port, pseudo_random, repo, udp_ask};

const QUIT: &[u8] = b"sawmill-net-echo: quit";
/// Bytes echoed, and the marks (bytes back) at which the driver is killed.
const TOTAL: usize = 3 << 20;
const KILL_AT: [usize; 3] = [512 << 10, 1280 << 10, 2048 << 10];

struct Guest {
    child: Child,
    udp: u16,
    log: PathBuf,
}

impl Guest {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
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
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = udp_ask(self.udp, QUIT, Duration::from_secs(5));
            if self.wait_exit(Duration::from_secs(20)).is_none() {
                // The whole process group: QEMU too, which outlives `./sawmill` killed alone.
                common::kill_group(&mut self.child);
            }
        }
    }
}

#[test]
fn tcp_survives_driver_restarts() {
    let (tcp, udp, ctl) = (free_port(), free_port(), free_port());
    let dir = repo().join("target/test-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("net-restart.log");
    let child = Command::new(repo().join("sawmill"))
        .args(["run", "net-restart", "--net", "--timeout", "500"])
        .args(["--forward", &format!("tcp:{tcp}:7777")])
        .args(["--forward", &format!("udp:{udp}:7778")])
        .args(["--forward", &format!("udp:{ctl}:7780")])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("running ./sawmill");
    let mut g = Guest {
        child,
        udp,
        log: log.clone(),
    };

    // Ready when an echo comes back (the build and boot may take minutes on a loaded host).
    let start = Instant::now();
    while udp_ask(udp, b"ready?", Duration::from_secs(1)).as_deref() != Some(b"ready?") {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no UDP echo within 300 s; guest log:\n{}",
            g.log()
        );
        if let Ok(Some(st)) = g.child.try_wait() {
            panic!("the guest ended early ({st}); log:\n{}", g.log());
        }
    }

    // One connection; a thread writes everything and ends its side, this one reads the echo and
    // has the driver killed as the marks go by (from further threads, so reading goes on).
    let data = pseudo_random(TOTAL, 0x16);
    let s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut w = s.try_clone().unwrap();
    let out = data.clone();
    let writer = thread::spawn(move || {
        for piece in out.chunks(16 * 1024) {
            w.write_all(piece)?;
        }
        w.shutdown(Shutdown::Write)
    });
    let mut got = Vec::with_capacity(TOTAL);
    let mut buf = vec![0u8; 64 * 1024];
    let mut kills = Vec::new();
    loop {
        let n = match (&s).read(&mut buf) {
            Ok(n) => n,
            Err(e) => panic!(
                "the echo broke after {} bytes: {e}; guest log:\n{}",
                got.len(),
                g.log()
            ),
        };
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        while kills.len() < KILL_AT.len() && got.len() >= KILL_AT[kills.len()] {
            let k = kills.len() + 1;
            kills.push(thread::spawn(move || ask_killer(ctl, "net0", k)));
        }
    }
    writer.join().unwrap().expect("writing the data");
    let answers: Vec<Option<String>> = kills.into_iter().map(|t| t.join().unwrap()).collect();
    let text = g.log();
    assert_eq!(answers.len(), KILL_AT.len(), "kills asked; log:\n{text}");
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(
            a.as_deref(),
            Some(format!("killed net0 {}", i + 1).as_str()),
            "kill {}; log:\n{text}",
            i + 1
        );
    }
    assert_eq!(got.len(), data.len(), "bytes back; log:\n{text}");
    assert_eq!(fnv1a(&got), fnv1a(&data), "checksum");
    assert!(got == data, "contents");

    // The network still works afterwards: UDP echo and a new connection.
    assert_eq!(
        udp_ask(udp, b"after", Duration::from_secs(10)).as_deref(),
        Some(&b"after"[..]),
        "UDP echo after the restarts"
    );
    let mut s2 = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    s2.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s2.write_all(b"again").unwrap();
    let mut b = [0u8; 5];
    s2.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"again");
    drop(s2);

    // Then the stack itself (policy `reset`), with a connection open and data on its way: the
    // connection is reset or ended within a bounded wait (the new stack answers its segments
    // with a reset), and the new incarnation passes traffic at once: UDP echoes and a new
    // connection. (A stack killed under traffic once left the driver's interrupt line masked:
    // the new stack then got frames only when it sent some, and this stalled.)
    let mut held = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    held.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    held.write_all(b"before").unwrap();
    let mut b = [0u8; 6];
    held.read_exact(&mut b).unwrap();
    assert_eq!(
        ask_killer(ctl, "netstack", KILL_AT.len() + 1).as_deref(),
        Some(format!("killed netstack {}", KILL_AT.len() + 1).as_str()),
        "the stack's kill; log:\n{}",
        g.log()
    );
    let _ = held.write_all(b"after the stack went");
    let mut b = [0u8; 64];
    match (&held).read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(n) => panic!(
            "the dead stack's connection echoed {:?}; log:\n{}",
            String::from_utf8_lossy(&b[..n]),
            g.log()
        ),
        Err(e) => panic!(
            "the dead stack's connection was neither reset nor ended: {e}; log:\n{}",
            g.log()
        ),
    }
    drop(held);
    // The echo server listens again on the new incarnation; the first answer may take a moment.
    let start = Instant::now();
    while udp_ask(udp, b"first", Duration::from_secs(1)).as_deref() != Some(&b"first"[..]) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no UDP echo within 30 s of the stack's restart; log:\n{}",
            g.log()
        );
    }
    let answered = (0..20)
        .filter(|i| {
            let m = format!("udp {i}");
            udp_ask(udp, m.as_bytes(), Duration::from_secs(2)).as_deref() == Some(m.as_bytes())
        })
        .count();
    assert!(
        answered >= 19,
        "{answered} of 20 UDP echoes after the stack's restart"
    );
    let mut s3 = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    s3.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s3.write_all(b"fresh").unwrap();
    let mut b = [0u8; 5];
    s3.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"fresh");
    drop(s3);

    assert_eq!(
        udp_ask(udp, QUIT, Duration::from_secs(5)).as_deref(),
        Some(&b"bye"[..]),
        "quit"
    );
    let st = g
        .wait_exit(Duration::from_secs(60))
        .expect("the guest ends");
    let text = g.log();
    assert!(st.success(), "guest exit: {st}; log:\n{text}");
    for want in [
        "root: fault: server net0 incarnation 1 reason killed-by-net-kill",
        "root: fault: server net0 incarnation 3 reason killed-by-net-kill",
        "root: net0 restarted: incarnation 4",
        "netstack: attached to the driver again (session 4)",
        "root: fault: server netstack incarnation 1 reason killed-by-net-kill",
        "root: netstack restarted: incarnation 2",
        "root: all done, success",
    ] {
        assert!(text.contains(want), "`{want}` missing; log:\n{text}");
    }
    for bad in ["PANIC", "FAIL", "panicked"] {
        assert!(!text.contains(bad), "`{bad}` in the log:\n{text}");
    }
}
