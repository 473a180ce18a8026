//! The program `spawn-exec` starts from the file system: proves it runs with its environment,
//! its writable data, heap and console, and ends with a status its parent checks.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

/// Initialised writable data: lives in a copied page of the image.
static mut VISITS: u64 = 41;

/// The exit status `spawn-exec` expects.
const STATUS: u64 = 0x5a;

fn main() {
    // SAFETY: the only thread of this program; nothing else touches VISITS.
    let visits = unsafe {
        VISITS += 1;
        VISITS
    };
    let mut v: Vec<u64> = Vec::new();
    v.extend(0..1000);
    let sum: u64 = v.iter().sum();
    println!(
        "spawn-child: hello from {} (started by {}; data {}, heap sum {}, {} KiB heap)",
        env::name(),
        env::arg(0).unwrap_or("?"),
        visits,
        sum,
        env::heap().1 / 1024
    );
    sawmill_rt::exit(STATUS)
}
