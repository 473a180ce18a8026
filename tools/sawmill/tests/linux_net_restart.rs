//! Issue 16: a network stack restart resets connections, and everything else comes back. Boots
//! the Linux system (`systems/linux.toml`, its stack's policy `reset`) with QEMU's user network
//! and unmodified busybox `httpd -f -p 80 -h /www` as the first process, plus `net-kill` (a test
//! server that asks root to kill a server when the host sends it `kill NAME K` over UDP,
//! `may_kill`), added to a copy of the manifest written here (`SAWMILL_LINUX_MANIFEST`). Three
//! times in a row:
//! - the host holds a connection open to httpd (half a request sent: httpd's child waits in
//!   `read`), the stack is killed, and the host sends the rest: the connection must be reset or
//!   ended within a bounded wait (the new stack answers segments of connections it does not
//!   know with a reset; QEMU's forwarder passes that on), never answered and never left hanging;
//! - then `curl` fetches the page again, the same bytes (sha256): httpd's listening socket was
//!   made again on the new incarnation (same port, same backlog) and its children's accepted
//!   connections work — without restarting httpd.
//!
//! The log must show three kills of the stack and its fourth incarnation running, and no
//! panic.
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{ask_killer, free_port, repo, sha256, Guest};

/// `./sawmill run linux` keeps its image and patched manifest at fixed places under target/:
/// this file's tests boot one at a time.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The test server added to the Linux system: net-kill on UDP port 7780, allowed to kill the
/// stack.
const KILLER: &str = r#"
# Added by tools/sawmill/tests/linux_net_restart.rs: the fault injector.
[[server]]
name = "net-kill"
uses = ["socket"]
args = ["7780"]
may_kill = ["netstack"]
kmem_kb = 64
heap_kb = 256
"#;

/// Fetches `url` into `out` with curl; the HTTP status (0: no reply).
fn curl(url: &str, out: &Path) -> u32 {
    let r = Command::new("curl")
        .args(["-s", "-m", "20", "-o"])
        .arg(out)
        .args(["-w", "%{http_code}", url])
        .stdin(Stdio::null())
        .output()
        .expect("running curl (scripts/setup.sh installs it)");
    String::from_utf8_lossy(&r.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Fetches until a 200 comes back, at most `limit`.
fn fetch(url: &str, out: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if curl(url, out) == 200 {
            return true;
        }
        thread::sleep(Duration::from_secs(1));
    }
    false
}

/// Boots the Linux system with net-kill (`manifest`) from a root image of `dir/tree`, running
/// `program`, with a host port forwarded to the guest's TCP `guest_port` and one to net-kill;
/// the guest, the TCP port and the kill port. Its messages go to `dir/guest.out` and `.err`.
fn boot(dir: &Path, guest_port: u16, program: &[&str]) -> (Guest, u16, u16) {
    let image = dir.join("root.img");
    rootfs(&dir.join("tree"), &image);
    let manifest = manifest(dir);
    let (port, ctl) = (free_port(), free_port());
    let child = Command::new(repo().join("sawmill"))
        .env("SAWMILL_LINUX_MANIFEST", &manifest)
        .args(["run", "linux", "--net", "--timeout", "600", "--root"])
        .arg(&image)
        .args(["--forward", &format!("tcp:{port}:{guest_port}")])
        .args(["--forward", &format!("udp:{ctl}:7780")])
        .arg("--")
        .args(program)
        .stdout(std::fs::File::create(dir.join("guest.out")).unwrap())
        .stderr(std::fs::File::create(dir.join("guest.err")).unwrap())
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("running ./sawmill");
    let guest = Guest {
        child,
        log: dir.join("guest.err"),
    };
    (guest, port, ctl)
}

/// Writes the Linux system with net-kill added into `dir`; its path.
fn manifest(dir: &Path) -> PathBuf {
    let system = std::fs::read_to_string(repo().join("systems/linux.toml")).unwrap();
    assert!(
        system.contains("restart = \"reset\""),
        "the Linux system's stack policy is reset"
    );
    let manifest = dir.join("linux-net-restart.toml");
    std::fs::write(&manifest, format!("{system}{KILLER}")).unwrap();
    manifest
}

/// Makes a root image of `tree` at `image`.
fn rootfs(tree: &Path, image: &Path) {
    let st = Command::new(repo().join("sawmill"))
        .arg("rootfs")
        .arg(tree)
        .arg("-o")
        .arg(image)
        .status()
        .expect("running ./sawmill rootfs");
    assert!(st.success(), "./sawmill rootfs");
}

#[test]
fn httpd_keeps_serving_across_stack_restarts() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let dir = repo().join("target/test-logs/linux-net-restart");
    let _ = std::fs::remove_dir_all(&dir);
    let www = dir.join("tree/www");
    std::fs::create_dir_all(&www).unwrap();
    let page = b"<html><body><h1>sawmill</h1><p>served across stack restarts</p></body></html>\n";
    std::fs::write(www.join("index.html"), page).unwrap();
    let (mut g, port, ctl) = boot(
        &dir,
        80,
        &["/bin/busybox", "httpd", "-f", "-p", "80", "-h", "/www"],
    );
    let url = format!("http://127.0.0.1:{port}/index.html");
    let want = sha256(&www.join("index.html"));

    // Ready when the page comes back (the build and boot may take minutes on a loaded host).
    let out = dir.join("index.out");
    let start = Instant::now();
    while curl(&url, &out) != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no HTTP reply within 300 s; guest log:\n{}",
            g.log()
        );
        if let Ok(Some(st)) = g.child.try_wait() {
            panic!("the guest ended early ({st}); log:\n{}", g.log());
        }
        thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(sha256(&out), want, "the page before any kill");

    for k in 1..=3 {
        // A connection httpd accepted and waits on: half a request.
        let mut held = TcpStream::connect(("127.0.0.1", port)).unwrap();
        held.write_all(b"GET /index.html HTTP/1.0\r\n").unwrap();
        thread::sleep(Duration::from_secs(1));

        assert_eq!(
            ask_killer(ctl, "netstack", k).as_deref(),
            Some(format!("killed netstack {k}").as_str()),
            "kill {k}; guest log:\n{}",
            g.log()
        );

        // The rest of the request reaches the new stack, which knows no such connection: a
        // reset (or an end), within a bounded wait; never a reply, never a hang.
        let _ = held.write_all(b"\r\n");
        held.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut b = [0u8; 512];
        match held.read(&mut b) {
            Ok(0) => {}
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {}
            Ok(n) => panic!(
                "kill {k}: the dead connection answered {:?}; guest log:\n{}",
                String::from_utf8_lossy(&b[..n]),
                g.log()
            ),
            Err(e) => panic!(
                "kill {k}: the held connection was neither reset nor ended: {e}; guest log:\n{}",
                g.log()
            ),
        }
        drop(held);

        // httpd serves again, unrestarted.
        let out = dir.join(format!("after{k}.out"));
        assert!(
            fetch(&url, &out, Duration::from_secs(60)),
            "kill {k}: no page within 60 s; guest log:\n{}",
            g.log()
        );
        assert_eq!(sha256(&out), want, "the page after kill {k}");
    }

    let text = g.log() + &std::fs::read_to_string(dir.join("guest.out")).unwrap_or_default();
    for want in [
        "root: fault: server netstack incarnation 1 reason killed-by-net-kill",
        "root: fault: server netstack incarnation 3 reason killed-by-net-kill",
        "root: netstack restarted: incarnation 4",
        "proc: the network stack restarted: new capabilities from netmgr",
    ] {
        assert!(text.contains(want), "`{want}` missing; log:\n{text}");
    }
    for bad in ["PANIC", "panicked"] {
        assert!(!text.contains(bad), "`{bad}` in the log:\n{text}");
    }
}

/// What `reset_server` (tests/net/c/reset_server.c) prints when its connection is reset under
/// it: by the peer on the host (Linux, the oracle), by a stack restart in the guest.
fn reset_server_output(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .skip_while(|l| l != "listening")
        .take_while(|l| !l.starts_with("second write"))
        .collect()
}

/// Connects to `port` and has the answer to `again` within `limit` (retried: the listener may
/// not be there yet).
fn second_connection(port: u16, limit: Duration) -> Option<Vec<u8>> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            if s.write_all(b"again").is_ok() {
                let mut b = [0u8; 16];
                if let Ok(n) = s.read(&mut b) {
                    if n > 0 {
                        return Some(b[..n].to_vec());
                    }
                }
            }
        }
        thread::sleep(Duration::from_millis(500));
    }
    None
}

#[test]
fn a_program_sees_a_reset_as_linux_shows_it() {
    let _one = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let dir = repo().join("target/test-logs/linux-net-reset");
    let _ = std::fs::remove_dir_all(&dir);
    let bin = dir.join("tree/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let prog = bin.join("reset_server");
    let st = Command::new("musl-gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&prog)
        .arg(repo().join("tests/net/c/reset_server.c"))
        .status()
        .expect("running musl-gcc");
    assert!(st.success(), "musl-gcc reset_server.c");

    // Linux: the client resets the connection (SO_LINGER 0, then close).
    let port = free_port();
    let host = Command::new(&prog)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let s = loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the host's server"
        );
        thread::sleep(Duration::from_millis(50));
    };
    (&s).write_all(b"hello").unwrap();
    thread::sleep(Duration::from_millis(300));
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: SO_LINGER with a zero time on a socket we own; the close then sends a reset.
    let r = unsafe {
        libc::setsockopt(
            std::os::unix::io::AsRawFd::as_raw_fd(&s),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER");
    drop(s);
    assert_eq!(
        second_connection(port, Duration::from_secs(10)).as_deref(),
        Some(&b"bye\n"[..]),
        "the host's second connection"
    );
    let out = host.wait_with_output().unwrap();
    let want = reset_server_output(&String::from_utf8_lossy(&out.stdout));
    assert!(want.len() >= 5, "the host's output: {want:?}");

    // The guest: the stack is killed under the connection.
    let (g, port, ctl) = boot(&dir, 7777, &["/bin/reset_server", "7777"]);
    let output = || std::fs::read_to_string(dir.join("guest.out")).unwrap_or_default();
    let start = Instant::now();
    while !output().contains("listening") {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the guest's server did not start; log:\n{}",
            g.log()
        );
        thread::sleep(Duration::from_millis(500));
    }
    // QEMU's forwarder accepts at once; the data says the guest has the connection.
    let mut held = TcpStream::connect(("127.0.0.1", port)).unwrap();
    held.write_all(b"hello").unwrap();
    thread::sleep(Duration::from_secs(2));
    assert_eq!(
        ask_killer(ctl, "netstack", 1).as_deref(),
        Some("killed netstack 1"),
        "the kill; log:\n{}",
        g.log()
    );
    assert_eq!(
        second_connection(port, Duration::from_secs(60)).as_deref(),
        Some(&b"bye\n"[..]),
        "the guest's second connection; log:\n{}",
        g.log()
    );
    drop(held);
    let start = Instant::now();
    while !output().contains("second write") && start.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(500));
    }
    let got = reset_server_output(&output());
    assert_eq!(got, want, "guest output; log:\n{}", g.log());
}
