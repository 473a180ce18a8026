//! Malformed frames against the network system: boots `systems/net-frames.toml` with the
//! guest's wire on a UDP socket pair of the host's loopback (`--net-raw`), so this test plays
//! the whole network as host 10.0.3.2 and sends frames no QEMU user network would: truncated
//! Ethernet, IPv4 and ARP headers, lengths that lie in both directions, bad checksums, IP
//! fragments, TCP and UDP headers that do not fit, oversized and random frames. Before and after
//! them, UDP echo answers (with the reply frame checked), and a TCP SYN to a closed port is
//! answered with a reset. The driver and the stack must keep serving, and nothing in the guest
//! may panic or fail.
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{pseudo_random, repo};

const GUEST_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
const HOST_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
const GUEST_IP: [u8; 4] = [10, 0, 3, 15];
const HOST_IP: [u8; 4] = [10, 0, 3, 2];
const UDP_ECHO: u16 = 7778;
const QUIT: &[u8] = b"sawmill-net-echo: quit";

fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for p in parts {
        for c in p.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&GUEST_MAC);
    f.extend_from_slice(&HOST_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 packet from us to the guest (`frag`: flags and offset word).
fn ipv4(proto: u8, payload: &[u8], id: u16, frag: u16) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&HOST_IP);
    h[16..20].copy_from_slice(&GUEST_IP);
    let c = checksum(&[&h]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn pseudo(proto: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&HOST_IP);
    p.extend_from_slice(&GUEST_IP);
    p.extend_from_slice(&[0, proto]);
    p.extend_from_slice(&(len as u16).to_be_bytes());
    p
}

fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    let c = checksum(&[&pseudo(17, u.len()), &u]);
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

fn tcp_syn(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02;
    t[14..16].copy_from_slice(&8192u16.to_be_bytes());
    let c = checksum(&[&pseudo(6, t.len()), &t]);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

fn udp_frame(sport: u16, data: &[u8]) -> Vec<u8> {
    eth(0x0800, &ipv4(17, &udp(sport, UDP_ECHO, data), 1, 0))
}

fn arp(op: u16, target_ip: [u8; 4], target_mac: [u8; 6]) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&HOST_MAC);
    a.extend_from_slice(&HOST_IP);
    a.extend_from_slice(&target_mac);
    a.extend_from_slice(&target_ip);
    let mut f = eth(0x0806, &a);
    if op == 2 {
        f[..6].copy_from_slice(&target_mac);
    } else {
        f[..6].copy_from_slice(&[0xff; 6]);
    }
    f
}

/// The host's end of the wire: sends frames to QEMU and reads the guest's, answering its ARP
/// requests for us on the way.
struct Wire {
    sock: UdpSocket,
    qemu: u16,
}

impl Wire {
    fn send(&self, frame: &[u8]) {
        self.sock.send_to(frame, ("127.0.0.1", self.qemu)).unwrap();
    }

    /// Frames from the guest until `want` says yes (its frame), or None after `limit`.
    fn until(&self, limit: Duration, want: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        let end = Instant::now() + limit;
        let mut b = vec![0u8; 65536];
        while Instant::now() < end {
            self.sock
                .set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let Ok((n, _)) = self.sock.recv_from(&mut b) else {
                continue;
            };
            let f = &b[..n];
            // The guest asks who we are: tell it.
            if n >= 42 && f[12..14] == [8, 6] && f[20..22] == [0, 1] && f[38..42] == HOST_IP {
                self.send(&arp(2, GUEST_IP, GUEST_MAC));
                continue;
            }
            if want(f) {
                return Some(f.to_vec());
            }
        }
        None
    }

    /// [`Self::echo`] asked again each second until `limit`: a datagram sent right after a
    /// burst can be dropped on its way (the host's socket buffer toward QEMU, or the guest's
    /// receive ring, full of the burst while a loaded host runs the guest slowly), which says
    /// nothing about the stack. A stack that stopped serving still answers none of them.
    fn echo_retried(&self, sport: u16, data: &[u8], limit: Duration) -> Option<Vec<u8>> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Some(reply) = self.echo(sport, data, Duration::from_secs(1)) {
                return Some(reply);
            }
        }
        None
    }

    /// A UDP echo of `data` from our port `sport`: the reply's payload, if it came.
    fn echo(&self, sport: u16, data: &[u8], limit: Duration) -> Option<Vec<u8>> {
        self.send(&udp_frame(sport, data));
        self.until(limit, |f| {
            f.len() >= 42
                && f[12..14] == [8, 0]
                && f[23] == 17
                && f[26..30] == GUEST_IP
                && f[36..38] == sport.to_be_bytes()
        })
        .map(|f| {
            let ihl = (f[14] & 15) as usize * 4;
            let ulen = u16::from_be_bytes([f[14 + ihl + 4], f[14 + ihl + 5]]) as usize;
            f[14 + ihl + 8..14 + ihl + ulen].to_vec()
        })
    }
}

/// The frames no well-behaved network sends.
fn malformed() -> Vec<Vec<u8>> {
    let good_ip = ipv4(17, &udp(4000, UDP_ECHO, b"x"), 2, 0);
    let mut v: Vec<Vec<u8>> = vec![
        vec![0xff],
        GUEST_MAC.to_vec(),
        eth(0x0800, &[]),
        eth(0x0800, &good_ip[..10]),
        eth(0x0806, &[0, 1, 8, 0]),
        eth(0x86dd, &[0x60; 40]),
        eth(0x1234, &[0; 50]),
    ];
    // IPv4 headers that lie: version, header length, total length both ways, checksum, TTL 0.
    let edits: [(usize, u8); 8] = [
        (0, 0x65),
        (0, 0x44),
        (0, 0x4f),
        (2, 0xff),
        (3, 0x05),
        (10, 0x00),
        (11, 0x00),
        (8, 0x00),
    ];
    for (at, val) in edits {
        let mut p = good_ip.clone();
        p[at] = val;
        if at == 2 {
            p[3] = 0xff;
        }
        v.push(eth(0x0800, &p));
    }
    // Fragments: a first piece with more to come, a middle piece, a last one that overlaps, and
    // a piece whose offset reaches past 64 KiB.
    let big = udp(4001, UDP_ECHO, &[7u8; 1000]);
    v.push(eth(0x0800, &ipv4(17, &big[..512], 3, 0x2000)));
    v.push(eth(0x0800, &ipv4(17, &big[512..800], 3, 0x2000 | 64)));
    v.push(eth(0x0800, &ipv4(17, &big[400..], 3, 50)));
    v.push(eth(0x0800, &ipv4(17, &big[..100], 4, 0x1fff)));
    // UDP that does not fit: length below its header, length past the packet, bad checksum.
    for (at, val) in [(4, 0u8), (5, 4), (4, 0x40), (6, 0x12)] {
        let mut u = udp(4002, UDP_ECHO, b"hello");
        u[at] = val;
        v.push(eth(0x0800, &ipv4(17, &u, 5, 0)));
    }
    // TCP whose header does not fit, and every flag at once.
    let mut t = tcp_syn(4003, 7777);
    t[12] = 0xf0;
    v.push(eth(0x0800, &ipv4(6, &t, 6, 0)));
    let mut t = tcp_syn(4004, 7777);
    t[13] = 0x3f;
    v.push(eth(0x0800, &ipv4(6, &t, 7, 0)));
    v.push(eth(0x0800, &ipv4(6, &t[..7], 8, 0)));
    // ARP that lies about its sizes, and an unknown operation.
    let mut a = arp(1, GUEST_IP, [0; 6]);
    a[18] = 0;
    v.push(a);
    let mut a = arp(1, GUEST_IP, [0; 6]);
    a[21] = 9;
    v.push(a);
    // Oversized frames (beyond an Ethernet frame, beyond a packet slot) and random ones.
    v.push(udp_frame(4005, &[1u8; 1600]));
    v.push(eth(0x0800, &pseudo_random(4000, 9)));
    for i in 0..200u64 {
        let mut f = eth(0x0800, &pseudo_random((i as usize * 7) % 1500 + 1, i));
        if i % 3 == 0 {
            f[14] = 0x45;
        }
        v.push(f);
    }
    v
}

struct Guest(Child);

impl Drop for Guest {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn malformed_frames_leave_the_stack_serving() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let host = sock.local_addr().unwrap().port();
    let qemu = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = repo().join("target/test-logs");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("net-frames.log");
    let child = Command::new(repo().join("sawmill"))
        .args(["run", "net-frames", "--timeout", "400"])
        .args(["--net-raw", &format!("{host}:{qemu}")])
        .args(["--pcap", dir.join("net-frames.pcap").to_str().unwrap()])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .spawn()
        .expect("running ./sawmill");
    let mut guest = Guest(child);
    let wire = Wire { sock, qemu };
    let text = || std::fs::read_to_string(&log).unwrap_or_default();

    let start = Instant::now();
    while wire
        .echo(5000, b"ready?", Duration::from_secs(1))
        .as_deref()
        != Some(b"ready?")
    {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no UDP echo within 300 s; log:\n{}",
            text()
        );
        if let Ok(Some(st)) = guest.0.try_wait() {
            panic!("the guest ended early ({st}); log:\n{}", text());
        }
    }

    for (i, f) in malformed().iter().enumerate() {
        wire.send(f);
        if i % 16 == 0 {
            thread::sleep(Duration::from_millis(5));
        }
    }

    // Still serving: UDP echo, and a SYN to a closed port is refused with a reset.
    let after = wire.echo_retried(5001, b"still there?", Duration::from_secs(20));
    assert_eq!(
        after.as_deref(),
        Some(&b"still there?"[..]),
        "UDP echo after the malformed frames; log:\n{}",
        text()
    );
    // The SYN sent again each second, as the echo above.
    let rst = (0..10).find_map(|_| {
        wire.send(&eth(0x0800, &ipv4(6, &tcp_syn(5002, 7779), 9, 0)));
        wire.until(Duration::from_secs(1), |f| {
            f.len() >= 54 && f[12..14] == [8, 0] && f[23] == 6 && f[36..38] == 5002u16.to_be_bytes()
        })
    });
    let rst =
        rst.unwrap_or_else(|| panic!("no answer to a SYN to a closed port; log:\n{}", text()));
    let ihl = (rst[14] & 15) as usize * 4;
    assert!(
        rst[14 + ihl + 13] & 0x04 != 0,
        "the answer to a SYN to a closed port is no reset"
    );

    assert_eq!(
        wire.echo(5003, QUIT, Duration::from_secs(10)).as_deref(),
        Some(&b"bye"[..]),
        "quit"
    );
    let end = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Ok(Some(st)) = guest.0.try_wait() {
            break st;
        }
        assert!(
            Instant::now() < end,
            "the guest did not end; log:\n{}",
            text()
        );
        thread::sleep(Duration::from_millis(200));
    };
    let t = text();
    assert!(status.success(), "guest exit: {status}; log:\n{t}");
    assert!(t.contains("root: all done, success"), "log:\n{t}");
    for bad in ["PANIC", "FAIL", "killed"] {
        assert!(!t.contains(bad), "`{bad}` in the log:\n{t}");
    }
}
