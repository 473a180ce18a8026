//! hostile-client: the standing hostile client of issue 12, one program with a mode per server
//! interface, and the checker that proves between batches that the server still answers other
//! clients correctly.
//!
//! Arguments: `MODE SEED COUNT [leak=N] [batch=N] [hang_ticks=N] [ep=NAME]`. MODE is one of
//! - `mem`: the memory server and the dataspaces it hands out;
//! - `vfs`: the VFS, and the open files and PFS sessions it hands out;
//! - `pfs`: a PFS through the session an ordinary client gets (`vfs.mount`), and its open files;
//! - `blk`: a block driver whose only client we are (a region shared with it from mem);
//! - `pci`: the platform server, through a badge that has no device;
//! - `console`: the console server's `console` endpoint (output and terminal control; its
//!   `console-in` endpoint waits for input by design, so only a flood of reads is not aimed);
//! - `pipe`: the pipe server and the pipe ends it hands out (pipe and dataspace calls);
//! - `check`: serves the `check` endpoint for the others (see [`check`]);
//! - `hole-mount`, `hole-exhaust`, `hole-dma`, `hole-victim`: the reproducers of issue 12's three
//!   holes (see [`holes`]).
//!
//! Each hostile mode sends COUNT seeded messages (SEED is printed; the same seed replays the same
//! run) and, every `batch` (default 1000), runs misuse patterns (leaks bounded by `leak`, floods,
//! use after close/free) and a health check — through the checker task, which calls the server
//! with its own badge and compares with known truth, or (blk) here. It holds only what its
//! manifest gives it: the server's endpoint with an ordinary badge and a factory for its own
//! watchdog thread. At the end it prints one line the scenarios check:
//! `hostile: MODE alive=yes wrong=0 hangs=0 sent=N ...`.
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod check;
#[cfg(target_os = "none")]
mod engine;
#[cfg(target_os = "none")]
mod holes;
#[cfg(target_os = "none")]
mod modes;

#[cfg(not(target_os = "none"))]
fn main() {}

#[cfg(target_os = "none")]
sawmill_rt::entry!(guest_main);

/// Settings of one run.
#[cfg(target_os = "none")]
pub struct Opts {
    pub seed: u64,
    pub count: u64,
    pub batch: u64,
    /// Capabilities we may drop without giving them back, over the whole run: servers do not yet
    /// learn of dropped capabilities (issue 12, hole 2), so an unbounded leak is the hole
    /// reproducer's business, not this client's.
    pub leak: u64,
}

#[cfg(target_os = "none")]
fn guest_main() {
    use sawmill_rt::{env, println};
    let mode = env::arg(0).unwrap_or("");
    let num = |i: usize, d: u64| env::arg(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let kv = |k: &str, d: u64| {
        env::args()
            .find_map(|a| {
                a.strip_prefix(k)
                    .and_then(|v| v.strip_prefix('='))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(d)
    };
    let o = Opts {
        seed: num(1, 1),
        count: num(2, 20_000),
        batch: kv("batch", 1000).max(1),
        leak: kv("leak", 16),
    };
    match mode {
        "check" => check::serve(),
        "hole-victim" => holes::victim(),
        "hole-mount" => return holes::mount(),
        "hole-dma" => return holes::dma(),
        "hole-exhaust" => return holes::exhaust(&mut engine::Engine::new("hole-exhaust", 0)),
        _ => {}
    }
    println!(
        "hostile: {} starting, seed={} count={} batch={} leak={}",
        mode, o.seed, o.count, o.batch, o.leak
    );
    engine::start_watchdog(kv("hang_ticks", engine::DEFAULT_HANG_TICKS));
    let name: &'static str = match mode {
        "mem" => "mem",
        "vfs" => "vfs",
        "pfs" => "pfs",
        "blk" => "blk",
        "pci" => "pci",
        "console" => "console",
        "pipe" => "pipe",
        "socket" => "socket",
        "net" => "net",
        _ => {
            println!(
                "hostile: FAIL unknown mode `{}` (mem, vfs, pfs, blk, pci, console, pipe, socket, net, check)",
                mode
            );
            sawmill_rt::exit(1);
        }
    };
    let mut e = engine::Engine::new(name, o.seed);
    let alive = modes::run(&mut e, &o);
    e.give_back_all();
    engine::FINISHED.store(true, core::sync::atomic::Ordering::SeqCst);
    e.summary(alive);
}
