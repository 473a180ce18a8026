//! net-echo: a native sawmill program on the socket interface (interfaces/socket.idl). Waits
//! until the stack has an address, then:
//! - with argument `selftest`: connects to a closed port of QEMU's gateway (10.0.2.2:1, which
//!   QEMU's user network answers with a reset) and checks that the connection is refused, then
//!   ends (scenario `net-dhcp`);
//! - otherwise: serves TCP echo on port 7777 (any number of connections at once) and UDP echo
//!   on 7778 until a UDP datagram `sawmill-net-echo: quit` arrives (answered `bye`). The host
//!   test tools/sawmill/tests/net.rs talks to it through QEMU's port forwards.
//!
//! Every call is non-blocking; the program waits on the notification it registered with the
//! stack (`watch`), with a short timeout as a safety net.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_abi::ObjKind;
use sawmill_interfaces::{socket, SockError, SockKind};
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
    sock: u32,
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
    if let Err(e) = sk.watch(notif, 1) {
        println!("net-echo: FAIL watch: {:?}", e);
        return;
    }
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

fn selftest(sk: &socket::Client, w: &Waiter, gateway: u32) {
    let s = match sk.create(SockKind::Tcp) {
        Ok(s) => s,
        Err(e) => {
            println!("net-echo: FAIL create: {:?}", e);
            return;
        }
    };
    let mut tries = 0;
    let r = loop {
        match sk.connect(s, gateway, 1) {
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
    let _ = sk.close(s);
}

fn is_would_block(e: &sawmill_interfaces::rpc::Error<SockError>) -> bool {
    matches!(
        e,
        sawmill_interfaces::rpc::Error::App(SockError::WouldBlock)
    )
}

fn serve(sk: &socket::Client, w: &Waiter) {
    let (Ok(l), Ok(u)) = (sk.create(SockKind::Tcp), sk.create(SockKind::Udp)) else {
        println!("net-echo: FAIL creating sockets");
        return;
    };
    if let Err(e) = sk
        .bind(l, 0, TCP_PORT)
        .and_then(|_| sk.listen(l, 8))
        .and_then(|_| sk.bind(u, 0, UDP_PORT))
    {
        println!("net-echo: FAIL bind/listen: {:?}", e);
        return;
    }
    println!("net-echo: serving tcp {} and udp {}", TCP_PORT, UDP_PORT);
    let mut conns: Vec<Conn> = Vec::new();
    let (mut accepted, mut datagrams) = (0u64, 0u64);
    loop {
        let mut progress = false;
        while let Ok(a) = sk.accept(l) {
            conns.push(Conn {
                sock: a.conn,
                pending: Vec::new(),
                eof: false,
            });
            accepted += 1;
            progress = true;
        }
        while let Ok(d) = sk.recv_from(u, sawmill_interfaces::MAX_DATA) {
            progress = true;
            datagrams += 1;
            if d.data.as_slice() == QUIT {
                let _ = sk.send_to(u, d.addr, d.port, b"bye");
                // Let the reply leave before the program (and the machine) ends.
                w.sleep(300);
                println!(
                    "net-echo: quit after {} connections and {} datagrams",
                    accepted, datagrams
                );
                return;
            }
            let _ = sk.send_to(u, d.addr, d.port, d.data.as_slice());
        }
        conns.retain_mut(|c| {
            let mut alive = true;
            while !c.pending.is_empty() {
                let n = c.pending.len().min(sawmill_interfaces::MAX_DATA as usize);
                match sk.send(c.sock, &c.pending[..n]) {
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
                match sk.recv(c.sock, sawmill_interfaces::MAX_DATA) {
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
                let _ = sk.close(c.sock);
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
