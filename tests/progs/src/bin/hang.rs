//! Hang detection (issue 16, scenario `hang`): the servers and the client of one test.
//!
//! The first argument is the role:
//! - `spinner spin-at=N`: a server on `rpc::serve` that answers each request with its number in
//!   this incarnation and spins forever in request N (never, without `spin-at`: an idle server);
//! - `sink`: takes a request and never answers it (idle in its receive from then on);
//! - `waiter`: on a one-way message, calls the sink and so waits forever for its answer;
//! - `client`: drives the test and checks, against root's fault log (which its manifest lets it
//!   read), that the spinner and only the spinner was found hung, within 2 s.
//!
//! Touches only its own capabilities; the client reads the fault log through `sys:pager`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_abi::{kinfo, label, MsgTag, ObjKind};
use sawmill_interfaces::rpc::{self, IpcResult, Next, Reply};
use sawmill_manifest::faultlog;
use sawmill_rt::{env, ipc, println, slots, sys, thread};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

/// The label of a request to the servers here (any label works; this one is logged).
const ECHO: u16 = 1;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Spinner,
    Sink,
    Waiter,
}

struct Server {
    role: Role,
    served: u64,
    spin_at: u64,
    sink: u64,
}

impl rpc::Serve for Server {
    #[inline(always)]
    fn handle(&mut self, _m: &IpcResult, next: Next) -> IpcResult {
        self.served += 1;
        match self.role {
            Role::Spinner => {
                if self.served == self.spin_at {
                    println!("hang-spinner: spinning in request {}", self.served);
                    loop {
                        core::hint::spin_loop();
                    }
                }
                next.reply(
                    self,
                    Reply {
                        tag: MsgTag::new(0, 1),
                        w: [self.served, 0, 0, 0],
                    },
                )
            }
            Role::Sink => {
                println!("hang-sink: got request {}; never answering", self.served);
                next.skip(self)
            }
            Role::Waiter => {
                println!("hang-waiter: calling the sink, which never answers");
                let r = ipc::call(self.sink, MsgTag::new(ECHO, 0), [0; 4]);
                println!("hang-waiter: FAIL the sink's call came back ({})", r.err);
                next.skip(self)
            }
        }
    }
}

/// Milliseconds since boot, as root's fault log counts them.
struct Clock {
    khz: u64,
    boot: u64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            khz: sawmill_rt::clock::Wall::get().khz,
            boot: sys::kernel_info(kinfo::BOOT_TSC).unwrap_or(0),
        }
    }
    fn ms(&self) -> u64 {
        sys::rdtsc().saturating_sub(self.boot) / self.khz
    }
    fn sleep_until(&self, timer: u64, ms: u64) {
        let deadline = self.boot + ms * self.khz;
        while sys::rdtsc() < deadline {
            if sys::notify_wait_until(timer, deadline).is_err() {
                break;
            }
        }
    }
}

/// Line `seq` (or the oldest kept after it) of root's fault log, None when there is none yet.
fn fault_line(seq: u64) -> Option<(u64, String)> {
    let r = ipc::call(
        slots::PAGER,
        MsgTag::new(sawmill_manifest::FAULT_LOG_LABEL, 1),
        [seq, 0, 0, 0],
    );
    check!(r.err == 0, "reading the fault log: error {}", r.err);
    if r.tag.label() != 0 {
        check!(r.tag.label() == 1, "root refused the fault log");
        return None;
    }
    let mut words = [0u64; 64];
    let n = r.tag.words().min(64);
    words[..4].copy_from_slice(&r.w);
    words[4..n.max(4)].copy_from_slice(&sawmill_rt::utcb().mr[4..n.max(4)]);
    faultlog::decode_line(&words, n)
}

/// Whether a call's answer says the server is gone (killed, its endpoint revoked).
fn gone(r: &IpcResult) -> bool {
    r.err != 0 || r.tag.label() == label::GONE
}

fn client() {
    let cap = |n: &str| {
        env::cap(n).unwrap_or_else(|| {
            println!("hang-client: FAIL no capability {}", n);
            sawmill_rt::exit(1)
        })
    };
    let (spin, waiter, idle) = (cap("spin"), cap("waiter"), cap("idle"));
    let spin_at: u64 = sawmill_testprogs::arg_value("spin-at")
        .and_then(|n| n.parse().ok())
        .unwrap_or(4);
    let timer = thread::create(ObjKind::Notification, 0).unwrap_or_else(|e| {
        println!("hang-client: FAIL notification: {}", e.name());
        sawmill_rt::exit(1)
    });
    let clock = Clock::new();
    for k in 1..spin_at {
        let r = ipc::call(spin, MsgTag::new(ECHO, 0), [0; 4]);
        check!(
            r.err == 0 && r.tag.label() == 0 && r.w[0] == k,
            "request {} to the spinner: error {} label {} answer {}",
            k,
            r.err,
            r.tag.label(),
            r.w[0]
        );
    }
    println!("hang-client: the spinner answered {} requests", spin_at - 1);
    // The waiter blocks for good in a call to the sink: waiting, not hung.
    check!(
        ipc::send(waiter, MsgTag::new(ECHO, 0), [0; 4]) == 0,
        "message to the waiter"
    );
    let t0 = clock.ms();
    println!(
        "hang-client: request {} makes the spinner spin; waiting for root",
        spin_at
    );
    let r = ipc::call(spin, MsgTag::new(ECHO, 0), [0; 4]);
    let t1 = clock.ms();
    check!(
        gone(&r),
        "the spinning request was answered: error {} label {}",
        r.err,
        r.tag.label()
    );
    let waited = t1 - t0;
    println!("hang-client: the spinning call ended after {} ms", waited);
    check!(
        waited < 2000,
        "the spinning server was stopped only after {} ms",
        waited
    );
    println!("hang-client: the spinner was stopped within 2 s");
    // The new incarnation answers in the same slot (its first request).
    let mut answered = false;
    while clock.ms() < t1 + 3000 {
        let r = ipc::call(spin, MsgTag::new(ECHO, 0), [0; 4]);
        if !gone(&r) {
            check!(
                r.tag.label() == 0 && r.w[0] == 1,
                "the new spinner: label {} answer {}",
                r.tag.label(),
                r.w[0]
            );
            answered = true;
            break;
        }
        clock.sleep_until(timer, clock.ms() + 10);
    }
    check!(answered, "no new incarnation of the spinner answers");
    println!("hang-client: the new incarnation answers its request 1");
    // The waiter (which ran once the spinner was gone) stays blocked and the idle server idle
    // for more than 5 s.
    clock.sleep_until(timer, t1 + 5500);
    let r = ipc::call(idle, MsgTag::new(ECHO, 0), [0; 4]);
    check!(
        !gone(&r) && r.w[0] == 1,
        "the idle server: error {} label {}",
        r.err,
        r.tag.label()
    );
    println!("hang-client: the idle server answers after 5 s idle");
    let mut lines: Vec<(u64, String)> = Vec::new();
    while let Some(l) = fault_line(lines.last().map_or(0, |l| l.0 + 1)) {
        println!("hang-client: fault log {}: {}", l.0, l.1);
        lines.push(l);
    }
    check!(
        lines.len() == 1,
        "{} lines in the fault log, 1 expected (the spinner only)",
        lines.len()
    );
    let line = &lines[0].1;
    let prefix = "server spinner incarnation 1 reason hung at ";
    check!(line.starts_with(prefix), "unexpected fault: {}", line);
    let at: u64 = line[prefix.len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    check!(
        at >= t0 && at - t0 < 2000,
        "the fault log says the spinner was found hung at {} ms; it started spinning after {} ms",
        at,
        t0
    );
    println!("hang-client: the fault log names the spinner, hung within 2 s");
    println!("hang-client: PASS");
}

fn main() {
    let role = match env::arg(0) {
        Some("client") => return client(),
        Some("spinner") => Role::Spinner,
        Some("sink") => Role::Sink,
        Some("waiter") => Role::Waiter,
        other => {
            println!("hang: FAIL unknown role {:?}", other);
            sawmill_rt::exit(1)
        }
    };
    let sink = if role == Role::Waiter {
        env::cap("sink").unwrap_or(u64::MAX)
    } else {
        u64::MAX
    };
    let mut srv = Server {
        role,
        served: 0,
        spin_at: sawmill_testprogs::arg_value("spin-at")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        sink,
    };
    let (ep, _) = env::served().unwrap_or_else(|| {
        println!("hang: FAIL no endpoint to serve");
        sawmill_rt::exit(1)
    });
    let _ = rpc::serve(ep, &mut srv);
}
