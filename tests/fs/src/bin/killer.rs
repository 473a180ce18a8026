//! A test server that has root kill another server at fixed moments (issue 16): for systems
//! whose workload cannot ask root itself (a Linux program). Test manifests only: it needs
//! `may_kill` for its target.
//!
//! Arguments: the server to kill, how many times, the milliseconds before the first kill and
//! between kills. May touch: root's kill request on `sys:pager`.
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_fstests::{kill_server, sleep_ms};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

fn main() {
    let target = env::arg(0).unwrap_or("pfs0");
    let num = |i: usize, default: u64| env::arg(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (count, first_ms, every_ms) = (num(1, 3), num(2, 2000), num(3, 1000));
    let Ok(timer) = thread::create(sawmill_abi::ObjKind::Notification, 0) else {
        println!("killer: FAIL no notification (kmem_kb)");
        return;
    };
    sleep_ms(timer, first_ms);
    for k in 1..=count {
        let done = kill_server(target);
        println!(
            "killer: kill {} of {}: {}",
            k,
            target,
            if done { "done" } else { "refused" }
        );
        if k < count {
            sleep_ms(timer, every_ms);
        }
    }
    println!("killer: done");
}
