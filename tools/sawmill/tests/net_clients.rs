//! Real clients across the network (issue 15), on the Linux system booted with QEMU's user
//! network: one boot runs `tests/net_clients/clients.sh` (busybox `nc -l`, a UDP echo built
//! from `udp_echo.c` with musl, busybox `wget`), and the host, with tools nobody here wrote:
//! - sends 8 MiB with the host's `nc` (netcat-openbsd) to the guest's busybox `nc -l`, which
//!   writes it to ext2: the guest's sha256 and the file read back from the image after power-off
//!   (`debugfs`) equal the source's, and `e2fsck -fn` finds the image clean;
//! - UDP echo from the host: datagrams of 1, 100 and 1,400 bytes come back whole, while the
//!   guest's echo holds 256 more UDP sockets;
//! - a connection to a guest port nobody listens on ends at once (the guest's reset reaches the
//!   host as QEMU's forwarder closing), not hung;
//! - the guest as client: busybox `wget` fetches 1 MiB from busybox `httpd` on the host at
//!   QEMU's gateway address (10.0.2.2), checksum equal;
//! - names: the image's `/etc/resolv.conf` names QEMU's DNS (10.0.2.3, what DHCP announces);
//!   a tiny DNS responder here on 127.0.0.1:53 (the guest's 10.0.2.2:53) answers the A query
//!   for `sawmill-host.test` with 10.0.2.2: busybox `nslookup` asks it directly, and busybox
//!   `wget http://sawmill-host.test:PORT/` (glibc's resolver, through a resolv.conf the script
//!   points at it) fetches a page from the host's HTTP server by that name.
//!
//! Readiness is a real reply (the UDP echo), retried for a bounded time; QEMU's forwarder
//! accepts TCP before anything in the guest listens, so a bare connect proves nothing.
use std::io::{ErrorKind, Read};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{free_port, pseudo_random, repo, sha256, udp_ask};

/// The guest's ports (clients.sh): nc -l, the UDP echo, and one nobody listens on.
const GUEST_NC: u16 = 5000;
const GUEST_UDP: u16 = 5001;
const GUEST_CLOSED: u16 = 5002;
/// The bytes host nc sends.
const NC_BYTES: usize = 8 << 20;

/// A UDP port of the host's loopback that is free now.
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process ended (killed) when dropped: the guest, the host's HTTP server.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The name the guest resolves, and the address the responder gives it (QEMU's gateway: the
/// host).
const HOST_NAME: &str = "sawmill-host.test";
const HOST_ADDR: [u8; 4] = [10, 0, 2, 2];

/// A DNS answer to query `q` (RFC 1035): for an A query of [`HOST_NAME`], one record with
/// [`HOST_ADDR`]; other types of that name, no records; other names, NXDOMAIN. `None` for what
/// is not one plain query.
fn dns_answer(q: &[u8]) -> Option<Vec<u8>> {
    if q.len() < 12 || u16::from_be_bytes([q[4], q[5]]) != 1 || q[2] & 0x80 != 0 {
        return None;
    }
    // The question: labels up to the root, then type and class.
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let n = *q.get(i)? as usize;
        if n == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(i + 1..i + 1 + n)?).to_lowercase());
        i += 1 + n;
    }
    let end = i + 5;
    let qtype = u16::from_be_bytes([*q.get(i + 1)?, *q.get(i + 2)?]);
    q.get(end - 1)?;
    let ours = labels.join(".") == HOST_NAME;
    let a = ours && qtype == 1;
    let mut r = Vec::new();
    r.extend_from_slice(&q[..2]);
    // A response, recursion desired as asked and available; NXDOMAIN for another name.
    r.extend_from_slice(&[0x80 | (q[2] & 1), if ours { 0x80 } else { 0x83 }]);
    r.extend_from_slice(&[0, 1, 0, a as u8, 0, 0, 0, 0]);
    r.extend_from_slice(&q[12..end]);
    if a {
        // The name as a pointer to the question's, type A, class IN, TTL 60, 4 bytes.
        r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        r.extend_from_slice(&HOST_ADDR);
    }
    Some(r)
}

/// The host's DNS responder on 127.0.0.1:53 (QEMU's user network takes the guest's
/// 10.0.2.2:53 there), answering until dropped; counts the A queries for [`HOST_NAME`].
struct Dns {
    stop: Arc<AtomicBool>,
    asked: Arc<AtomicUsize>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Dns {
    fn start() -> Dns {
        // Port 53 is fixed (the guest cannot name another): another run of this test may hold
        // it for a while, so wait for it, boundedly.
        let start = Instant::now();
        let sock = loop {
            match UdpSocket::bind("127.0.0.1:53") {
                Ok(s) => break s,
                Err(e) if e.kind() == ErrorKind::AddrInUse => {
                    assert!(
                        start.elapsed() < Duration::from_secs(600),
                        "127.0.0.1:53 stayed in use"
                    );
                    thread::sleep(Duration::from_secs(1));
                }
                Err(e) => panic!("binding the DNS responder to 127.0.0.1:53: {e}"),
            }
        };
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let asked = Arc::new(AtomicUsize::new(0));
        let (s2, a2) = (stop.clone(), asked.clone());
        let thread = thread::spawn(move || {
            let mut b = [0u8; 512];
            while !s2.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut b) else {
                    continue;
                };
                if let Some(r) = dns_answer(&b[..n]) {
                    if r[7] == 1 {
                        a2.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = sock.send_to(&r, from);
                }
            }
        });
        Dns {
            stop,
            asked,
            thread: Some(thread),
        }
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn the_dns_responder_answers_as_rfc_1035_says() {
    // A query for sawmill-host.test, type A, class IN (id 0x1234, recursion desired).
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for l in HOST_NAME.split('.') {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let r = dns_answer(&q).unwrap();
    assert_eq!(&r[..4], &[0x12, 0x34, 0x81, 0x80]);
    assert_eq!(&r[4..12], &[0, 1, 0, 1, 0, 0, 0, 0]);
    assert_eq!(&r[r.len() - 4..], &HOST_ADDR);
    // AAAA: no records; another name: NXDOMAIN; a truncated query: no answer.
    let mut aaaa = q.clone();
    let t = aaaa.len() - 3;
    aaaa[t] = 28;
    assert_eq!(&dns_answer(&aaaa).unwrap()[6..8], &[0, 0]);
    let mut other = q.clone();
    other[13] = b'x';
    assert_eq!(dns_answer(&other).unwrap()[3] & 0xf, 3);
    assert!(dns_answer(&q[..20]).is_none());
}

/// `debugfs -R "dump PATH OUT"` of the image: the file as ext2 holds it.
fn dump(image: &Path, path: &str, out: &Path) {
    let st = Command::new("debugfs")
        .arg("-R")
        .arg(format!("dump {path} {}", out.display()))
        .arg(image)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running debugfs (e2fsprogs)");
    assert!(st.success() && out.is_file(), "debugfs dump {path}");
}

#[test]
fn host_and_guest_clients_reach_each_other() {
    let root = repo();
    let dir = root.join("target/test-logs/net-clients");
    let _ = std::fs::remove_dir_all(&dir);
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("data")).unwrap();
    let src = root.join("tools/sawmill/tests/net_clients");
    std::fs::copy(src.join("clients.sh"), tree.join("clients.sh")).unwrap();
    let st = Command::new("musl-gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(tree.join("udp_echo"))
        .arg(src.join("udp_echo.c"))
        .status()
        .expect("running musl-gcc (scripts/setup.sh installs musl-tools)");
    assert!(st.success(), "musl-gcc udp_echo.c");
    let image = dir.join("root.img");
    let st = Command::new(root.join("sawmill"))
        .arg("rootfs")
        .arg(&tree)
        .arg("-o")
        .arg(&image)
        .status()
        .expect("running ./sawmill rootfs");
    assert!(st.success(), "./sawmill rootfs");

    // The host's side: the data nc sends, the file httpd serves.
    let sent = dir.join("sent.bin");
    std::fs::write(&sent, pseudo_random(NC_BYTES, 0x5eed_0015)).unwrap();
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("file.bin"), pseudo_random(1 << 20, 0x0077_6765)).unwrap();
    std::fs::write(www.join("named.txt"), "reached by name\n").unwrap();
    let dns = Dns::start();
    let http_port = free_port();
    let _httpd = Owned(
        Command::new("/bin/busybox")
            .args(["httpd", "-f", "-p", &format!("127.0.0.1:{http_port}"), "-h"])
            .arg(&www)
            .stdin(Stdio::null())
            .spawn()
            .expect("running the host's busybox httpd"),
    );

    let (nc_port, udp_port, closed_port) = (free_port(), free_udp_port(), free_port());
    let out = dir.join("guest.out");
    let err = dir.join("guest.err");
    let mut guest = Owned(
        Command::new(root.join("sawmill"))
            .args(["run", "linux", "--net", "--timeout", "900", "--root"])
            .arg(&image)
            .args(["--forward", &format!("tcp:{nc_port}:{GUEST_NC}")])
            .args(["--forward", &format!("udp:{udp_port}:{GUEST_UDP}")])
            .args(["--forward", &format!("tcp:{closed_port}:{GUEST_CLOSED}")])
            .args(["--", "/bin/busybox", "sh", "/clients.sh"])
            .arg(http_port.to_string())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("running ./sawmill"),
    );
    let logs = || {
        format!(
            "guest output:\n{}\nguest log:\n{}",
            std::fs::read_to_string(&out).unwrap_or_default(),
            std::fs::read_to_string(&err).unwrap_or_default()
        )
    };

    // Ready when the UDP echo answers (the build and boot may take minutes on a loaded host).
    let start = Instant::now();
    loop {
        if udp_ask(udp_port, b"ready?", Duration::from_secs(2)).as_deref() == Some(b"ready?") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(400),
            "no UDP echo within 400 s; {}",
            logs()
        );
        if let Ok(Some(st)) = guest.0.try_wait() {
            panic!("the guest ended early ({st}); {}", logs());
        }
        thread::sleep(Duration::from_secs(1));
    }

    // UDP echo: each datagram back whole.
    for (i, len) in [1usize, 100, 1400].into_iter().enumerate() {
        let data = pseudo_random(len, 0x0dd0 + i as u64);
        let back = (0..5).find_map(|_| udp_ask(udp_port, &data, Duration::from_secs(5)));
        assert!(
            back.as_deref() == Some(&data[..]),
            "UDP echo of {len} bytes came back as {:?} bytes; {}",
            back.map(|b| b.len()),
            logs()
        );
    }

    // A closed guest port: QEMU's forwarder accepts, the guest answers its SYN with a reset, the
    // forwarder closes; the host reads the end (or a reset) at once, it does not wait.
    let asked = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", closed_port)).expect("QEMU's forwarder");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ) => {}
        other => panic!(
            "a closed guest port gave {other:?} after {:?}; {}",
            asked.elapsed(),
            logs()
        ),
    }
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "the refusal took {:?}",
        asked.elapsed()
    );

    // 8 MiB from the host's nc to the guest's nc -l (-N: the end of input ends the sending
    // side, so the guest's nc sees the end of the data and exits).
    let mut nc = Owned(
        Command::new("nc")
            .args(["-N", "127.0.0.1", &nc_port.to_string()])
            .stdin(std::fs::File::open(&sent).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .expect("running the host's nc (scripts/setup.sh installs netcat-openbsd)"),
    );
    let sending = Instant::now();
    let st = loop {
        if let Ok(Some(st)) = nc.0.try_wait() {
            break st;
        }
        assert!(
            sending.elapsed() < Duration::from_secs(300),
            "host nc still sending after 300 s; {}",
            logs()
        );
        thread::sleep(Duration::from_millis(200));
    };
    assert!(st.success(), "host nc: {st}; {}", logs());

    // The echo's quit: the guest goes on to wget, the checksums, sync, and powers off.
    let quit = (0..5).find_map(|_| udp_ask(udp_port, b"quit", Duration::from_secs(5)));
    assert_eq!(
        quit.as_deref(),
        Some(&b"quit"[..]),
        "the echo's quit; {}",
        logs()
    );
    let end = Instant::now();
    let st = loop {
        if let Ok(Some(st)) = guest.0.try_wait() {
            break st;
        }
        assert!(
            end.elapsed() < Duration::from_secs(300),
            "the guest did not finish within 300 s; {}",
            logs()
        );
        thread::sleep(Duration::from_millis(500));
    };
    let output = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(st.success(), "the guest ended with {st}; {}", logs());
    assert!(output.contains("clients: done"), "{}", logs());
    // The echo answered with 256 more of the guest's UDP sockets bound (issue 15: hundreds of
    // sockets without a per-packet scan of all of them).
    assert!(
        output.contains("udp_echo: listening on 5001 beside 256 other sockets"),
        "{}",
        logs()
    );
    // Names: the image's resolv.conf, nslookup's answer, the page fetched by name.
    assert!(
        output.contains("clients: resolv.conf: nameserver 10.0.2.3"),
        "{}",
        logs()
    );
    // The terminal ends lines with CR LF.
    let lines: Vec<&str> = output.lines().map(|l| l.trim_end()).collect();
    assert!(
        lines
            .windows(2)
            .any(|w| w[0] == format!("Name:\t{HOST_NAME}") && w[1] == "Address: 10.0.2.2"),
        "nslookup's answer; {}",
        logs()
    );
    assert!(
        output.contains("clients: by name: reached by name"),
        "{}",
        logs()
    );
    assert!(dns.asked.load(Ordering::Relaxed) >= 2, "A queries asked");
    assert!(!output.contains("failed"), "{}", logs());

    // The guest's checksums, then the files as ext2 holds them.
    let (want_nc, want_http) = (sha256(&sent), sha256(&www.join("file.bin")));
    assert!(
        output.contains(&format!("{want_nc}  /data/recv.bin")),
        "guest sha256 of what nc received; {}",
        logs()
    );
    assert!(
        output.contains(&format!("{want_http}  /data/got.bin")),
        "guest sha256 of what wget fetched; {}",
        logs()
    );
    let (recv, got) = (dir.join("recv.dump"), dir.join("got.dump"));
    dump(&image, "/data/recv.bin", &recv);
    dump(&image, "/data/got.bin", &got);
    assert_eq!(sha256(&recv), want_nc, "nc's 8 MiB on ext2");
    assert_eq!(sha256(&got), want_http, "wget's 1 MiB on ext2");
    let fsck = Command::new("e2fsck")
        .args(["-fn"])
        .arg(&image)
        .output()
        .expect("running e2fsck");
    assert!(
        fsck.status.success(),
        "e2fsck -fn: {}",
        String::from_utf8_lossy(&fsck.stdout)
    );
}
