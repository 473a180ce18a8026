//! net-hoard: a client that asks the stack for more sockets than its share (scenario
//! `net-share`). It binds UDP sockets on ports from 20000 on until the stack refuses one; the
//! refusal must be `NoSpace` and come after exactly `args[0]` sockets (the manifest's
//! `client_sockets`). Then, holding them all, it sends a datagram from its first socket to its
//! last over 127.0.0.1 (the stack still serves it, with that many sockets open), and holds them
//! a while longer (`args[1]` ms) while other clients use the stack (`net-echo selftest` in the
//! same scenario).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_abi::ObjKind;
use sawmill_interfaces::rpc::Error;
use sawmill_interfaces::{sock, socket, SockError, SockKind};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

const FIRST_PORT: u16 = 20000;
const LOOPBACK: u32 = 0x7f00_0001;

fn main() {
    let share: usize = env::arg(0).and_then(|a| a.parse().ok()).unwrap_or(0);
    let hold_ms: u64 = env::arg(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    match run(share, hold_ms) {
        Ok(()) => println!("net-hoard: PASS"),
        Err(e) => println!("net-hoard: FAIL {}", e),
    }
}

/// Waits `ms` milliseconds on `notif` (nobody signals it).
fn sleep(notif: u64, ms: u64) {
    let end = sys::rdtsc() + ms * sawmill_rt::clock::Wall::get().khz;
    while sys::rdtsc() < end {
        let _ = sys::notify_wait_until(notif, end);
    }
}

fn run(share: usize, hold_ms: u64) -> Result<(), &'static str> {
    let sk = socket::Client::new(env::cap("socket").ok_or("no `socket` endpoint")?);
    let notif = thread::create(ObjKind::Notification, 0).map_err(|_| "notification")?;
    let mut socks: Vec<sock::Client> = Vec::new();
    let refused = loop {
        if socks.len() > share + 8 {
            break None;
        }
        let port = FIRST_PORT + socks.len() as u16;
        match sk.create(SockKind::Udp, thread::alloc_slot()) {
            Ok(c) => {
                let s = sock::Client::new(c);
                s.bind(0, port).map_err(|_| "bind")?;
                socks.push(s);
            }
            Err(e) => break Some(e),
        }
    };
    match refused {
        Some(Error::App(SockError::NoSpace)) => {
            println!("net-hoard: NoSpace after {} sockets", socks.len())
        }
        Some(_) => return Err("refused, but not with NoSpace"),
        None => return Err("never refused"),
    }
    if socks.len() != share {
        return Err("refused at another count than the share");
    }
    let (first, last) = (&socks[0], &socks[socks.len() - 1]);
    let last_port = FIRST_PORT + socks.len() as u16 - 1;
    first
        .send_to(LOOPBACK, last_port, b"hoarded")
        .map_err(|_| "send_to")?;
    let mut got = None;
    for _ in 0..200 {
        match last.recv_from(64) {
            Ok(d) => {
                got = Some(d);
                break;
            }
            Err(Error::App(SockError::WouldBlock)) => sleep(notif, 10),
            Err(_) => return Err("recv_from"),
        }
    }
    let d = got.ok_or("the datagram never came")?;
    if d.data.as_slice() != b"hoarded" || d.port != FIRST_PORT {
        return Err("the wrong datagram");
    }
    println!(
        "net-hoard: a datagram from its first socket to its {}th",
        socks.len()
    );
    sleep(notif, hold_ms);
    for s in socks {
        let _ = sys::cap_delete(s.ep);
    }
    Ok(())
}
