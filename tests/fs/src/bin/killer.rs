//! A test server that has root kill another server at fixed moments (issue 16): for systems
//! whose workload cannot ask root itself (a Linux program). Test manifests only: it needs
//! `may_kill` for its target.
//!
//! Arguments: the servers to kill (comma-separated: each round kills them in that order, one
//! right after the other), how many rounds, the milliseconds before the first round and between
//! rounds. May touch: root's kill request on `sys:pager`.
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_fstests::{kill_server, sleep_ms};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

fn main() {
    let targets = env::arg(0).unwrap_or("pfs0");
    let num = |i: usize, default: u64| env::arg(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (count, first_ms, every_ms) = (num(1, 3), num(2, 2000), num(3, 1000));
    let Ok(timer) = thread::create(sawmill_abi::ObjKind::Notification, 0) else {
        println!("killer: FAIL no notification (kmem_kb)");
        return;
    };
    sleep_ms(timer, first_ms);
    for k in 1..=count {
        for name in targets.split(',') {
            let done = kill_server(name);
            println!(
                "killer: kill {} of {}: {}",
                k,
                name,
                if done { "done" } else { "refused" }
            );
        }
        if k < count {
            sleep_ms(timer, every_ms);
        }
    }
    println!("killer: done");
}
