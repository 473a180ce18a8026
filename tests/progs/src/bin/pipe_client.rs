//! Scenario `pipe`: a client of the pipe server (servers/pipe) doing what the Linux
//! personality does, with two threads as the two sides.
//!
//! It checks the refusals (calls on the wrong capability, dataspace calls an end does not
//! allow, pages outside the ring), that both ends map one ring, then moves 256 KiB from a
//! writer (the main thread) to a reader thread through the ring with blocking on both sides
//! (each registered its own notification and sleeps on it; the other side pokes the server
//! when it finds it counted in), then drops the write end: the server marks it gone and wakes
//! the reader, which sees end of file after the last byte. A pipe whose read end is dropped
//! refuses writes (EPIPE's case). Finally it fills the server (NoSpace at its limit) and shows
//! that pipes whose ends are dropped are given back (300 more come and go).
#![no_std]
#![no_main]
extern crate alloc;

use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::ObjKind;
use sawmill_interfaces::rpc::Error;
use sawmill_interfaces::{dataspace, pipe, DsError, MapFlags, PipeError};
use sawmill_pipe_api::{End, Ring, Step, CAPACITY, MAX_PIPES, RING_BYTES};
use sawmill_rm as rm;
use sawmill_rt::{println, sys, thread};
use sawmill_testprogs::{check, endpoint};

sawmill_rt::entry!(main);

const TOTAL: u64 = 256 * 1024;
const WAKE: u64 = 4;

/// What the reader thread got, and whether it saw end of file.
static GOT: AtomicU64 = AtomicU64::new(0);
static EOF: AtomicU64 = AtomicU64::new(0);

fn attach(end: u64) -> Ring {
    let at = attach_raw(end);
    // SAFETY: attached read-write just above, never detached while the ring is used.
    unsafe { Ring::new(at as *mut u8) }
}

/// Attaches an end's ring read-write; its address.
fn attach_raw(end: u64) -> u64 {
    rm::attach(end, 0, RING_BYTES as u64, None, rm::READ | rm::WRITE).unwrap_or_else(|e| {
        println!("pipe-client: FAIL attach: {:?}", e);
        sawmill_rt::exit(1)
    })
}

fn byte(i: u64) -> u8 {
    (i % 251) as u8
}

fn reader(r: u64, ring: Ring, wake: u64) {
    let mut buf = [0u8; 3000];
    let mut got = 0u64;
    loop {
        match ring.read(&mut buf) {
            Step::Moved(n) => {
                for (k, &b) in buf[..n].iter().enumerate() {
                    if b != byte(got + k as u64) {
                        println!("pipe-client: FAIL byte {} wrong", got + k as u64);
                        sawmill_rt::exit(1);
                    }
                }
                got += n as u64;
                GOT.store(got, Ordering::SeqCst);
                if ring.peer_waiting(End::Read) {
                    let _ = pipe::Client::new(r).poke();
                }
            }
            Step::Wait => {
                ring.begin_wait(End::Read);
                if !ring.can_go(End::Read, 1) {
                    let _ = sys::notify_wait(wake, 0);
                }
                ring.end_wait(End::Read);
            }
            Step::Eof => {
                EOF.store(1, Ordering::SeqCst);
                return;
            }
            s => {
                println!("pipe-client: FAIL reader step {:?}", s);
                sawmill_rt::exit(1);
            }
        }
    }
}

fn main() {
    let srv = pipe::Client::new(endpoint("pipe"));
    if let Err(e) = rm::init() {
        println!("pipe-client: FAIL region manager: {:?}", e);
        return;
    }
    let (rs, ws) = (thread::alloc_slot(), thread::alloc_slot());
    let ends = srv.create(rs, ws);
    check!(ends.is_ok(), "create: {:?}", ends);
    let ends = ends.unwrap();
    let (r, w) = (ends.read, ends.write);

    // Refusals.
    let end = pipe::Client::new(r);
    let x = thread::alloc_slot();
    check!(
        end.create(x, x) == Err(Error::App(PipeError::Invalid)),
        "create on an end"
    );
    check!(
        srv.poke() == Err(Error::App(PipeError::Invalid)),
        "poke on the server"
    );
    let ds = dataspace::Client::new(w);
    check!(
        ds.free() == Err(Error::App(DsError::Unsupported)),
        "an end let itself be freed"
    );
    check!(
        ds.resize(4096) == Err(Error::App(DsError::Unsupported)),
        "an end let itself be resized"
    );
    check!(
        ds.info().map(|i| i.size) == Ok(RING_BYTES as u64),
        "info: {:?}",
        ds.info()
    );
    let probe = rm::attach(r, 0, 4096, None, 0).unwrap_or(0x7000_0000_0000);
    check!(
        ds.map(RING_BYTES as u64, probe, 1, MapFlags::READ, [probe, 4096])
            .is_err(),
        "a page beyond the ring was mapped"
    );

    // One ring, two mappings.
    let (rr, wr) = (attach(r), attach(w));
    check!(wr.write(b"shared", true) == Step::Moved(6), "first write");
    let mut six = [0u8; 6];
    check!(
        rr.read(&mut six) == Step::Moved(6) && &six == b"shared",
        "read {:?}",
        six
    );

    // Blocking both ways: each side registers its own notification.
    let (nr, nw) = match (
        thread::create(ObjKind::Notification, 0),
        thread::create(ObjKind::Notification, 0),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            println!("pipe-client: FAIL notifications (kmem_kb?)");
            return;
        }
    };
    check!(end.register(nr, WAKE).is_ok(), "register the reader");
    check!(
        pipe::Client::new(w).register(nw, WAKE).is_ok(),
        "register the writer"
    );
    if let Err(e) = rm::spawn(16 * 1024, move || reader(r, rr, nr)) {
        println!("pipe-client: FAIL reader thread: {:?}", e);
        return;
    }
    let mut sent = 0u64;
    let mut chunk = [0u8; 5000];
    let mut blocked = 0u64;
    while sent < TOTAL {
        let len = (TOTAL - sent).min(1 + sent % 4999) as usize;
        for (k, b) in chunk[..len].iter_mut().enumerate() {
            *b = byte(sent + k as u64);
        }
        let mut off = 0;
        while off < len {
            match wr.write(&chunk[off..len], len <= 4096) {
                Step::Moved(n) => {
                    off += n;
                    if wr.peer_waiting(End::Write) {
                        let _ = pipe::Client::new(w).poke();
                    }
                }
                Step::Wait => {
                    blocked += 1;
                    wr.begin_wait(End::Write);
                    if !wr.can_go(End::Write, len - off) {
                        let _ = sys::notify_wait(nw, 0);
                    }
                    wr.end_wait(End::Write);
                }
                s => {
                    println!("pipe-client: FAIL writer step {:?}", s);
                    return;
                }
            }
        }
        sent += len as u64;
    }
    // Drop the write end (its mapping, then its only capability): the server marks it gone
    // and wakes the reader, which reads what is left and then sees end of file.
    let _ = sys::cap_delete(w);
    let mut waited = 0u64;
    while EOF.load(Ordering::SeqCst) == 0 {
        sys::yield_now();
        waited += 1;
        check!(
            waited < 2_000_000,
            "no end of file (got {})",
            GOT.load(Ordering::SeqCst)
        );
    }
    check!(
        GOT.load(Ordering::SeqCst) == TOTAL,
        "reader got {} of {}",
        GOT.load(Ordering::SeqCst),
        TOTAL
    );
    println!(
        "pipe-client: {} bytes through the ring, the writer blocked {} times, end of file seen",
        TOTAL, blocked
    );

    // A pipe without a reader refuses writes.
    let (a, b) = (thread::alloc_slot(), thread::alloc_slot());
    let p = srv.create(a, b);
    check!(p.is_ok(), "create: {:?}", p);
    let p = p.unwrap();
    let ring = attach(p.write);
    let _ = sys::cap_delete(p.read);
    check!(srv.sync().is_ok(), "sync");
    check!(
        ring.write(b"x", true) == Step::Broken,
        "write without a reader"
    );
    let _ = sys::cap_delete(p.write);
    check!(srv.sync().is_ok(), "sync");

    // The limit, and pipes given back when their ends go.
    let mut held = alloc::vec::Vec::new();
    loop {
        let (a, b) = (thread::alloc_slot(), thread::alloc_slot());
        match srv.create(a, b) {
            Ok(p) => held.push(p),
            Err(Error::App(PipeError::NoSpace)) => break,
            Err(e) => {
                println!("pipe-client: FAIL create #{}: {:?}", held.len(), e);
                return;
            }
        }
        check!(held.len() <= MAX_PIPES, "more than {} pipes", MAX_PIPES);
    }
    // The first pipe (its read end still held here, mapped) counts too.
    check!(held.len() == MAX_PIPES - 1, "held {} pipes", held.len());
    for p in held.drain(..) {
        let _ = sys::cap_delete(p.read);
        let _ = sys::cap_delete(p.write);
    }
    check!(srv.sync().is_ok(), "sync");
    let (a, b) = (thread::alloc_slot(), thread::alloc_slot());
    for i in 0..300 {
        match srv.create(a, b) {
            Ok(_) => {
                let _ = sys::cap_delete(a);
                let _ = sys::cap_delete(b);
                let _ = srv.sync();
            }
            Err(e) => {
                println!(
                    "pipe-client: FAIL create after {} came and went: {:?}",
                    i, e
                );
                return;
            }
        }
    }

    // A ring a client wrote all over (every page, through its writable mapping) is all zeros
    // for whoever gets the next pipe in its place (the lowest free one: the same).
    let (a, b) = (thread::alloc_slot(), thread::alloc_slot());
    check!(srv.create(a, b).is_ok(), "create the scribbled pipe");
    let at = attach_raw(b);
    for off in (0..RING_BYTES).step_by(1024) {
        // SAFETY: inside the ring attached read-write just above.
        unsafe { core::ptr::write_volatile((at + off as u64) as *mut u8, 0xa5) };
    }
    check!(rm::detach(at).is_ok(), "detach the scribbled ring");
    let _ = sys::cap_delete(a);
    let _ = sys::cap_delete(b);
    check!(srv.sync().is_ok(), "sync");
    check!(srv.create(a, b).is_ok(), "create after the scribbled pipe");
    let at = attach_raw(a);
    let dirty = (0..RING_BYTES)
        // SAFETY: inside the ring attached just above.
        .filter(|&off| unsafe { core::ptr::read_volatile((at + off as u64) as *const u8) } != 0)
        .count();
    check!(
        dirty == 0,
        "{} bytes of the last pipe seen in the next",
        dirty
    );
    let _ = CAPACITY;
    println!("pipe-client: PASS");
}
