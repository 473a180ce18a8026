//! net-echo: a native sawmill program on the socket interface (interfaces/socket.idl). Waits
//! until the stack has an address, then:
//! - with argument `selftest`: connects to a closed port of QEMU's gateway (10.0.2.2:1, which
//!   QEMU's user network answers with a reset) and checks that the connection is refused, then
//!   talks to itself over the stack's loopback (TCP through 127.0.0.1, UDP to its own address),
//!   then ends (scenario `net-dhcp`);
//! - otherwise: serves TCP echo on port 7777 (any number of connections at once) and UDP echo
//!   on 7778 until a UDP datagram `sawmill-net-echo: quit` arrives (answered `bye`). The host
//!   test tools/sawmill/tests/net.rs talks to it through QEMU's port forwards.
//!
//! Every socket is a capability; every call is non-blocking, and the program waits on the one
//! notification it registered with each socket, with a short timeout as a safety net. Closing a
//! socket is deleting its capability.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_abi::ObjKind;
use sawmill_interfaces::{sock, socket, SockError, SockKind};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

const TCP_PORT: u16 = 7777;
const UDP_PORT: u16 = 7778;
const QUIT: &[u8] = b"sawmill-net-echo: quit";
/// Bytes a connection may hold that the peer has not yet taken back.
const MAX_PENDING: usize = 64 * 1024;

struct Waiter {
    notif: u64,
    ticks_per_ms: u64,
}

impl Waiter {
    /// Until the stack signals, or `ms` milliseconds.
    fn wait(&self, ms: u64) {
        let _ = sys::notify_wait_until(self.notif, sys::rdtsc() + ms * self.ticks_per_ms);
    }

    /// `ms` milliseconds, signals or not.
    fn sleep(&self, ms: u64) {
        let end = sys::rdtsc() + ms * self.ticks_per_ms;
        while sys::rdtsc() < end {
            let _ = sys::notify_wait_until(self.notif, end);
        }
    }
}

struct Conn {
    sock: sock::Client,
    pending: Vec<u8>,
    eof: bool,
}

fn main() {
    let Some(ep) = env::cap("socket") else {
        println!("net-echo: FAIL no `socket` endpoint");
        return;
    };
    let sk = socket::Client::new(ep);
    let notif = match thread::create(ObjKind::Notification, 0) {
        Ok(n) => n,
        Err(e) => {
            println!("net-echo: FAIL notification (kmem_kb?): {}", e.name());
            return;
        }
    };
    let w = Waiter {
        notif,
        ticks_per_ms: sawmill_rt::clock::Wall::get().khz,
    };
    let cfg = loop {
        match sk.config() {
            Ok(c) if c.addr != 0 => break c,
            _ => w.wait(100),
        }
    };
    let a = cfg.addr.to_be_bytes();
    println!(
        "net-echo: the stack has {}.{}.{}.{}/{}",
        a[0], a[1], a[2], a[3], cfg.prefix
    );
    if env::arg(0) == Some("selftest") {
        selftest(&sk, &w, cfg.gateway);
        return;
    }
    serve(&sk, &w);
}

/// A new socket of `kind`, registered with our notification.
fn open(sk: &socket::Client, w: &Waiter, kind: SockKind) -> Option<sock::Client> {
    match sk.create(kind, thread::alloc_slot()) {
        Ok(c) => {
            let s = sock::Client::new(c);
            if let Err(e) = s.register(w.notif, 1) {
                println!("net-echo: FAIL register: {:?}", e);
                return None;
            }
            Some(s)
        }
        Err(e) => {
            println!("net-echo: FAIL create: {:?}", e);
            None
        }
    }
}

/// Closing a socket is dropping its capability.
fn close(s: sock::Client) {
    let _ = sys::cap_delete(s.ep);
}

fn selftest(sk: &socket::Client, w: &Waiter, gateway: u32) {
    let Some(s) = open(sk, w, SockKind::Tcp) else {
        return;
    };
    let mut tries = 0;
    let r = loop {
        match s.connect(gateway, 1) {
            Err(e) if is_would_block(&e) && tries < 100 => {
                tries += 1;
                w.wait(100);
            }
            other => break other,
        }
    };
    match r {
        Err(sawmill_interfaces::rpc::Error::App(SockError::ConnRefused)) => {
            println!("net-echo: PASS a connect to a closed port is refused")
        }
        other => println!("net-echo: FAIL connect to a closed port: {:?}", other),
    }
    close(s);
    match loopback(sk, w) {
        Ok(()) => println!("net-echo: PASS TCP over 127.0.0.1 and UDP to our own address"),
        Err(e) => println!("net-echo: FAIL loopback: {}", e),
    }
}

type Res<T> = Result<T, sawmill_interfaces::rpc::Error<SockError>>;

/// Asks `f` until it does not answer `WouldBlock` (at most 10 s), waiting in between.
fn until<T>(w: &Waiter, mut f: impl FnMut() -> Res<T>) -> Res<T> {
    for _ in 0..100 {
        match f() {
            Err(e) if is_would_block(&e) => w.wait(100),
            other => return other,
        }
    }
    f()
}

/// The stack's loopback: a TCP connection to ourselves through 127.0.0.1 carries bytes both
/// ways, and a UDP datagram to our own interface address arrives from it.
fn loopback(sk: &socket::Client, w: &Waiter) -> Result<(), &'static str> {
    const PORT: u16 = 9000;
    let l = open(sk, w, SockKind::Tcp).ok_or("socket")?;
    let c = open(sk, w, SockKind::Tcp).ok_or("socket")?;
    l.bind(0, PORT)
        .and_then(|_| l.listen(1))
        .map_err(|_| "listen")?;
    until(w, || c.connect(0x7f00_0001, PORT)).map_err(|_| "connect to 127.0.0.1")?;
    let a = until(w, || l.accept(thread::alloc_slot())).map_err(|_| "accept")?;
    let conn = sock::Client::new(a.conn);
    if a.addr != 0x7f00_0001 {
        return Err("the accepted connection is not from 127.0.0.1");
    }
    until(w, || c.send(b"ping")).map_err(|_| "send")?;
    let got = until(w, || conn.recv(16)).map_err(|_| "recv")?;
    if got.data.as_slice() != b"ping" {
        return Err("wrong bytes over loopback");
    }
    until(w, || conn.send(b"pong")).map_err(|_| "send back")?;
    let got = until(w, || c.recv(16)).map_err(|_| "recv back")?;
    if got.data.as_slice() != b"pong" {
        return Err("wrong bytes back over loopback");
    }
    for s in [c, conn, l] {
        close(s);
    }
    let me = sk.config().map_err(|_| "config")?.addr;
    let (u1, u2) = (
        open(sk, w, SockKind::Udp).ok_or("socket")?,
        open(sk, w, SockKind::Udp).ok_or("socket")?,
    );
    u1.bind(0, PORT + 1).map_err(|_| "bind")?;
    until(w, || u2.send_to(me, PORT + 1, b"to myself")).map_err(|_| "send_to")?;
    let d = until(w, || u1.recv_from(64)).map_err(|_| "recv_from")?;
    if d.data.as_slice() != b"to myself" || d.addr != me {
        return Err("wrong datagram over loopback");
    }
    close(u1);
    close(u2);
    Ok(())
}

fn is_would_block(e: &sawmill_interfaces::rpc::Error<SockError>) -> bool {
    matches!(
        e,
        sawmill_interfaces::rpc::Error::App(SockError::WouldBlock)
    )
}

/// The TCP listener and the UDP socket of the echo service.
fn listen(sk: &socket::Client, w: &Waiter) -> Option<(sock::Client, sock::Client)> {
    let (Some(l), Some(u)) = (open(sk, w, SockKind::Tcp), open(sk, w, SockKind::Udp)) else {
        return None;
    };
    if let Err(e) = l
        .bind(0, TCP_PORT)
        .and_then(|_| l.listen(8))
        .and_then(|_| u.bind(0, UDP_PORT))
    {
        println!("net-echo: FAIL bind/listen: {:?}", e);
        return None;
    }
    Some((l, u))
}

/// Whether a socket call failed because the stack that made the socket is gone (it restarted:
/// its capabilities were revoked with it).
fn stack_gone(e: &sawmill_interfaces::rpc::Error<SockError>) -> bool {
    e.peer_died()
        || matches!(e, sawmill_interfaces::rpc::Error::Ipc(c) if *c == sawmill_abi::Error::BadCap as u64)
}

fn serve(sk: &socket::Client, w: &Waiter) {
    let Some((mut l, mut u)) = listen(sk, w) else {
        return;
    };
    println!("net-echo: serving tcp {} and udp {}", TCP_PORT, UDP_PORT);
    let mut conns: Vec<Conn> = Vec::new();
    // Capability slots of closed connections, for the next ones.
    let mut free: Vec<u64> = Vec::new();
    let mut spare: Option<u64> = None;
    let (mut accepted, mut datagrams) = (0u64, 0u64);
    loop {
        let mut progress = false;
        // A stack that restarted (policy `reset`) took every socket with it: listen on the new
        // incarnation (the `socket` slot holds it) and let the old connections go.
        if matches!(u.ready(), Err(e) if stack_gone(&e)) {
            println!("net-echo: the stack went: listening again");
            for c in conns.drain(..) {
                close(c.sock);
            }
            close(l);
            close(u);
            loop {
                // Once the new incarnation answers and has its address again (DHCP).
                if !matches!(sk.config(), Ok(c) if c.addr != 0) {
                    w.sleep(100);
                    continue;
                }
                if let Some((nl, nu)) = listen(sk, w) {
                    (l, u) = (nl, nu);
                    break;
                }
                w.sleep(100);
            }
            println!("net-echo: serving again on the stack's new incarnation");
        }
        loop {
            // One spare slot for the next connection's capability, reused while none comes.
            let slot = *spare.get_or_insert_with(thread::alloc_slot);
            let Ok(a) = l.accept(slot) else { break };
            spare = free.pop();
            let sock = sock::Client::new(a.conn);
            let _ = sock.register(w.notif, 1);
            conns.push(Conn {
                sock,
                pending: Vec::new(),
                eof: false,
            });
            accepted += 1;
            progress = true;
        }
        while let Ok(d) = u.recv_from(sawmill_interfaces::MAX_DATA) {
            progress = true;
            datagrams += 1;
            if d.data.as_slice() == QUIT {
                let _ = u.send_to(d.addr, d.port, b"bye");
                // Let the reply leave before the program (and the machine) ends.
                w.sleep(300);
                println!(
                    "net-echo: quit after {} connections and {} datagrams",
                    accepted, datagrams
                );
                return;
            }
            let _ = u.send_to(d.addr, d.port, d.data.as_slice());
        }
        conns.retain_mut(|c| {
            let mut alive = true;
            while !c.pending.is_empty() {
                let n = c.pending.len().min(sawmill_interfaces::MAX_DATA as usize);
                match c.sock.send(&c.pending[..n]) {
                    Ok(sent) => {
                        c.pending.drain(..sent as usize);
                        progress = true;
                    }
                    Err(e) if is_would_block(&e) => break,
                    Err(_) => {
                        alive = false;
                        break;
                    }
                }
            }
            while alive && !c.eof && c.pending.len() < MAX_PENDING {
                match c.sock.recv(sawmill_interfaces::MAX_DATA) {
                    Ok(r) if r.eof => c.eof = true,
                    Ok(r) if r.data.is_empty() => break,
                    Ok(r) => {
                        c.pending.extend_from_slice(r.data.as_slice());
                        progress = true;
                    }
                    Err(e) if is_would_block(&e) => break,
                    Err(_) => alive = false,
                }
            }
            if !alive || (c.eof && c.pending.is_empty()) {
                free.push(c.sock.ep);
                close(c.sock);
                progress = true;
                return false;
            }
            true
        });
        if !progress {
            w.wait(50);
        }
    }
}
