//! net-kill: the fault injector of the network restart tests (issue 16). Serves UDP on the port
//! of its first argument; a datagram `kill NAME K` asks root to kill server NAME (manifest
//! `may_kill`) unless K kills were asked for already (so a host that sends a command again,
//! not having seen the answer, kills once), then answers `killed NAME K` (or `refused NAME K`).
//! The host test decides when — in the middle of a transfer it watches.
//!
//! When NAME is the network stack itself, its own socket dies with the stack: it opens a new one
//! (the `socket` capability's slot holds the stack's next incarnation, root put it there) and
//! answers from that, which is the test that new sockets work after a stack restart.
//!
//! May touch: the stack (`socket`) and root's kill request on `sys:pager`.
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_abi::{MsgTag, ObjKind};
use sawmill_interfaces::rpc::Error;
use sawmill_interfaces::{sock, socket, SockError, SockKind};
use sawmill_rt::{env, ipc, println, slots, sys, thread};

sawmill_rt::entry!(main);

/// How long a new socket is tried for after the stack went (milliseconds).
const REOPEN_MS: u64 = 10_000;

/// Asks root to kill server `name`: true if it did.
fn kill(name: &str) -> bool {
    let r = ipc::call(
        slots::PAGER,
        MsgTag::new(sawmill_manifest::KILL_LABEL, 4),
        sawmill_manifest::name_words(name),
    );
    r.err == 0 && r.tag.label() == 0
}

struct Waiter {
    notif: u64,
    ticks_per_ms: u64,
}

impl Waiter {
    fn wait(&self, ms: u64) {
        let _ = sys::notify_wait_until(self.notif, sys::rdtsc() + ms * self.ticks_per_ms);
    }
}

/// A UDP socket bound to `port`, registered with our notification; tried for `REOPEN_MS` (the
/// stack may be restarting).
fn open(sk: &socket::Client, w: &Waiter, port: u16, slot: u64) -> Option<sock::Client> {
    let end = sys::rdtsc() + REOPEN_MS * w.ticks_per_ms;
    while sys::rdtsc() < end {
        let _ = sys::cap_delete(slot);
        if let Ok(c) = sk.create(SockKind::Udp, slot) {
            let s = sock::Client::new(c);
            if s.bind(0, port).is_ok() && s.register(w.notif, 1).is_ok() {
                return Some(s);
            }
        }
        w.wait(20);
    }
    None
}

fn main() {
    let (Some(ep), Some(port)) = (
        env::cap("socket"),
        env::arg(0).and_then(|a| a.parse::<u16>().ok()),
    ) else {
        println!("net-kill: FAIL needs `socket` and a port");
        return;
    };
    let sk = socket::Client::new(ep);
    let Ok(notif) = thread::create(ObjKind::Notification, 0) else {
        println!("net-kill: FAIL notification (kmem_kb?)");
        return;
    };
    let w = Waiter {
        notif,
        ticks_per_ms: sawmill_rt::clock::Wall::get().khz,
    };
    let slot = thread::alloc_slot();
    let Some(mut u) = open(&sk, &w, port, slot) else {
        println!("net-kill: FAIL no UDP socket on port {}", port);
        return;
    };
    println!("net-kill: serving udp {}", port);
    let mut asked = 0u32;
    loop {
        let d = match u.recv_from(sawmill_interfaces::MAX_DATA) {
            Ok(d) => d,
            Err(Error::App(SockError::WouldBlock)) => {
                w.wait(100);
                continue;
            }
            Err(e) => {
                // Our socket's stack went (a kill of it, or someone else's): a new one.
                println!("net-kill: socket gone ({:?}): opening a new one", e);
                match open(&sk, &w, port, slot) {
                    Some(s) => {
                        u = s;
                        println!("net-kill: a new socket works");
                        continue;
                    }
                    None => {
                        println!("net-kill: FAIL no new socket after the stack went");
                        return;
                    }
                }
            }
        };
        let text = core::str::from_utf8(d.data.as_slice()).unwrap_or("");
        let mut words = text.split_whitespace();
        let (Some("kill"), Some(name), Some(k)) = (
            words.next(),
            words.next(),
            words.next().and_then(|k| k.parse::<u32>().ok()),
        ) else {
            continue;
        };
        let mut verdict = "killed";
        if k > asked {
            asked = k;
            if kill(name) {
                println!("net-kill: killed {} ({})", name, k);
            } else {
                verdict = "refused";
                println!("net-kill: root refused to kill {}", name);
            }
        }
        let reply = alloc::format!("{} {} {}", verdict, name, k);
        if u.send_to(d.addr, d.port, reply.as_bytes()).is_err() {
            // The stack was the one killed: answer from a socket of its next incarnation.
            if let Some(s) = open(&sk, &w, port, slot) {
                u = s;
                println!("net-kill: a new socket works");
                let _ = u.send_to(d.addr, d.port, reply.as_bytes());
            } else {
                println!("net-kill: FAIL no new socket after the stack went");
                return;
            }
        }
    }
}
