//! File-system benchmarks (systems/bench-fs.toml, `./sawmill bench`): prints
//! `BENCH <name> <value> insn` with guest instructions counted by `rdtsc` under `-icount`.
//!
//! - `fs.open`: open + close of an existing file (option 3: at the PFS directly);
//!   `fs.open.opt2`: the same through the VFS.
//! - `fs.read4k.cold`: per 4 KiB record, first read of a file not yet in the PFS's cache.
//! - `fs.reread4k.<config>.<size>`: per 4 KiB record, rereading a cached file of that size,
//!   measured here in the reading client. Configs: `multiserver` (the standard system: driver,
//!   PFS, VFS and this client in separate tasks; the library's default, option 3 with mapped
//!   cache pages), `opt2` (opened through the VFS, reads straight to the PFS with mapped pages),
//!   `opt3` (mount table cached in the client, opened at the PFS, mapped pages) and `ipc`
//!   (option 3 but every record copied through a PFS read call: no mapping).
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_fsclient::{Files, Protocol, O_NOMAP, O_READ};
use sawmill_fstests::files;
use sawmill_rt::{println, sys};

sawmill_rt::entry!(main);

fn rec_cost(f: &mut Files, path: &str, flags: u32, passes: u64) -> u64 {
    let fd = f.open(path, O_READ | flags, 0).expect("open");
    let mut buf = alloc::vec![0u8; 4096];
    // Warm: the first pass fills the PFS cache and maps the pages.
    let mut recs = 0u64;
    while f.read(fd, &mut buf).expect("read") == 4096 {
        recs += 1;
    }
    let t0 = sys::rdtsc();
    for _ in 0..passes {
        f.lseek(fd, 0, 0).expect("lseek");
        for _ in 0..recs {
            f.read(fd, &mut buf).expect("read");
        }
    }
    let t = sys::rdtsc() - t0;
    f.close(fd).expect("close");
    t / (passes * recs)
}

fn main() {
    let mut f = files();
    let sizes = [("64k", 4u64), ("128k", 4), ("256k", 2), ("1m", 1), ("4m", 1)];
    // Open cost.
    for (name, proto) in [("fs.open", Protocol::Direct), ("fs.open.opt2", Protocol::Vfs)] {
        f.protocol = proto;
        let fd = f.open("/b/64k", O_READ, 0).expect("open");
        f.close(fd).expect("close");
        let t0 = sys::rdtsc();
        for _ in 0..50 {
            let fd = f.open("/b/64k", O_READ, 0).expect("open");
            f.close(fd).expect("close");
        }
        println!("BENCH {} {} insn", name, (sys::rdtsc() - t0) / 50);
    }
    // Cold read: the file was never read since boot.
    f.protocol = Protocol::Direct;
    let fd = f.open("/b/cold", O_READ, 0).expect("open");
    let mut buf = alloc::vec![0u8; 4096];
    let t0 = sys::rdtsc();
    let mut recs = 0;
    while f.read(fd, &mut buf).expect("read") == 4096 {
        recs += 1;
    }
    println!("BENCH fs.read4k.cold {} insn", (sys::rdtsc() - t0) / recs);
    f.close(fd).expect("close");
    for (cfg, proto, flags) in [("multiserver", Protocol::Direct, 0), ("opt2", Protocol::Vfs, 0), ("opt3", Protocol::Direct, 0), ("ipc", Protocol::Direct, O_NOMAP)] {
        f.protocol = proto;
        for (size, passes) in sizes {
            if cfg == "ipc" && size != "64k" && size != "1m" {
                continue;
            }
            let c = rec_cost(&mut f, &alloc::format!("/b/{}", size), flags, passes);
            println!("BENCH fs.reread4k.{}.{} {} insn", cfg, size, c);
        }
    }
    println!("fs-bench: done");
}
