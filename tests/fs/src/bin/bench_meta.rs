//! File-system benchmarks of issue 17 (systems/bench-fsmeta.toml, `./sawmill bench`): the sawmill
//! side of the cold sequential read and the metadata operations, each measured as
//! bench/linux/lbench.c measures its `linux.*` twin, and printed as `BENCH <name> <value> insn`
//! (guest instructions counted by `rdtsc` under `-icount`). A program of its own, so the figures
//! of `fs-bench` (tests/fs/src/bin/bench.rs; `fs.read4k.cold` among them) stay as they were.
//!
//! - `fs.seqread.cold`: `/b/seq16m`, `/b/seq16m.1`, `/b/seq16m.2` (16 MiB each, never read since
//!   boot, so none of their pages is in the PFS's cache), each read once from start to end in
//!   64 KiB reads; the best, per MiB.
//! - `fs.stat`: `stat("/b/small")`; per call.
//! - `fs.readdir`: listing `/b/d1000` (1,000 empty files made here first, untimed: 1,002 entries
//!   with `.` and `..`); per whole listing.
//! - `fs.create_unlink`: create `/b/cu` (write, create, truncate) + close + unlink; per round.
//! - `fs.rename`: `/b/ra` to `/b/rb` and back; per rename.
//! - `fs.fsync`: a 4 KiB `pwrite` at offset 0 of `/b/sync4k` + `fsync`; per round.
//!
//! Like lbench: one untimed pass, then `PASSES` timed ones, the minimum of the per-pass means
//! (the cold read has one pass per file: after it the file is cached).
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_fsclient::{Files, O_CREATE, O_READ, O_TRUNC, O_WRITE};
use sawmill_fstests::{files, ok};
use sawmill_rt::{println, sys};

sawmill_rt::entry!(main);

/// Timed passes per metric, after one untimed pass (lbench's PASSES).
const PASSES: usize = 9;
/// Operations per pass of `stat` and `rename` (lbench's META_OPS).
const META_OPS: u64 = 1000;
/// Listings per pass of `readdir` (lbench's LISTINGS) and the directory's files.
const LISTINGS: u64 = 4;
const DIR_ENTRIES: usize = 1000;
/// Rounds per pass of `create_unlink` (lbench's CREATE_OPS) and `fsync` (FSYNC_OPS).
const CREATE_OPS: u64 = 200;
const FSYNC_OPS: u64 = 8;
/// Request size of the sequential read (lbench's SEQ_CHUNK).
const SEQ_CHUNK: usize = 64 * 1024;
/// Files of the cold sequential read (lbench's SEQ_PASSES).
const SEQ_FILES: usize = 3;

/// One untimed pass of `op`, then `PASSES` timed ones: the minimum per-operation mean, where a
/// pass is `ops` operations.
fn best_of(f: &mut Files, ops: u64, mut pass: impl FnMut(&mut Files)) -> u64 {
    pass(f);
    let mut best = u64::MAX;
    for _ in 0..PASSES {
        let t0 = sys::rdtsc();
        pass(f);
        best = best.min((sys::rdtsc() - t0) / ops);
    }
    best
}

fn main() {
    sawmill_rm::init().expect("rm init");
    let mut f = files();

    // Cold sequential read: nothing has read the files since boot; the best of SEQ_FILES, one
    // pass each (lbench drops Linux's caches before each of its SEQ_PASSES).
    let mut buf = alloc::vec![0u8; SEQ_CHUNK];
    let mut best = u64::MAX;
    for i in 0..SEQ_FILES {
        let name = if i == 0 {
            alloc::string::String::from("/b/seq16m")
        } else {
            alloc::format!("/b/seq16m.{i}")
        };
        let fd = ok(f.open(&name, O_READ, 0), "open /b/seq16m");
        let t0 = sys::rdtsc();
        let mut total = 0usize;
        loop {
            let n = ok(f.read(fd, &mut buf), "read /b/seq16m");
            if n == 0 {
                break;
            }
            total += n;
        }
        let t = sys::rdtsc() - t0;
        ok(f.close(fd), "close");
        sawmill_fstests::check!(total == 16 << 20, "read {} bytes of {}", total, name);
        best = best.min(t / (total as u64 >> 20));
    }
    println!("BENCH fs.seqread.cold {} insn", best);

    let stat = best_of(&mut f, META_OPS, |f| {
        for _ in 0..META_OPS {
            ok(f.stat("/b/small"), "stat");
        }
    });
    println!("BENCH fs.stat {} insn", stat);

    ok(f.mkdir("/b/d1000", 0o755), "mkdir /b/d1000");
    for i in 0..DIR_ENTRIES {
        let name = alloc::format!("/b/d1000/e{:04}", i);
        let fd = ok(f.open(&name, O_WRITE | O_CREATE | O_TRUNC, 0o644), "create");
        ok(f.close(fd), "close");
    }
    let readdir = best_of(&mut f, LISTINGS, |f| {
        for _ in 0..LISTINGS {
            let n = ok(f.readdir("/b/d1000"), "readdir").len();
            sawmill_fstests::check!(n == DIR_ENTRIES + 2, "/b/d1000 lists {} entries", n);
        }
    });
    println!("BENCH fs.readdir {} insn", readdir);

    let create = best_of(&mut f, CREATE_OPS, |f| {
        for _ in 0..CREATE_OPS {
            let fd = ok(
                f.open("/b/cu", O_WRITE | O_CREATE | O_TRUNC, 0o644),
                "create",
            );
            ok(f.close(fd), "close");
            ok(f.unlink("/b/cu"), "unlink");
        }
    });
    println!("BENCH fs.create_unlink {} insn", create);

    let fd = ok(
        f.open("/b/ra", O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create",
    );
    ok(f.close(fd), "close");
    let rename = best_of(&mut f, META_OPS, |f| {
        for _ in 0..META_OPS / 2 {
            ok(f.rename("/b/ra", "/b/rb"), "rename");
            ok(f.rename("/b/rb", "/b/ra"), "rename back");
        }
    });
    println!("BENCH fs.rename {} insn", rename);

    let fd = ok(
        f.open("/b/sync4k", O_READ | O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create",
    );
    let mut rec = alloc::vec![0x5au8; 4096];
    ok(f.pwrite(fd, &rec, 0), "pwrite");
    ok(f.fsync(fd), "fsync");
    let fsync = best_of(&mut f, FSYNC_OPS, |f| {
        for i in 0..FSYNC_OPS {
            rec[0] = i as u8;
            ok(f.pwrite(fd, &rec, 0), "pwrite");
            ok(f.fsync(fd), "fsync");
        }
    });
    println!("BENCH fs.fsync {} insn", fsync);
    ok(f.close(fd), "close");
    println!("fs-bench-meta: done");
}
