//! File-system benchmarks (systems/bench-fs.toml, `./sawmill bench`): prints
//! `BENCH <name> <value> insn` with guest instructions counted by `rdtsc` under `-icount`.
//!
//! - `fs.open`: open + close of an existing file (option 3: at the PFS directly);
//!   `fs.open.opt2`: the same through the VFS.
//! - `fs.read4k.cold`: per 4 KiB record, first read of a file not yet in the PFS's cache (the
//!   best of `COLD_FILES` such files, `/b/cold`, `/b/cold1`, ...).
//! - `fs.reread4k.<config>.<size>`: per 4 KiB record, rereading a cached file of that size,
//!   measured here in the reading client. Configs: `multiserver` (the standard system: driver,
//!   PFS, VFS and this client in separate tasks; the library's default, option 3 with mapped
//!   cache pages), `opt2` (opened through the VFS, reads straight to the PFS with mapped pages),
//!   `opt3` (mount table cached in the client, opened at the PFS, mapped pages) and `ipc`
//!   (option 3 but every record copied through a PFS read call: no mapping).
//! - `fs.reread4k.mmap.<size>`: per 4 KiB record, copying a record out of the file attached as a
//!   dataspace (`Files::mmap`, pages faulted in through the region manager on the warm pass).
//! - `fs.read4k.first.{read,mmap}.1m`: per 4 KiB record, the first pass over a file that is in
//!   the PFS's cache but not yet mapped in this client: `read` (the library maps 4 pages per
//!   `file::MAP` call) against touching an attached dataspace (a page fault, the region
//!   manager and one `dataspace.map` per page).
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_fsclient::{Files, Protocol, O_CREATE, O_NOMAP, O_READ, O_WRITE};
use sawmill_fstests::files;
use sawmill_rt::{println, sys};

sawmill_rt::entry!(main);

/// Files of the cold read, each read once (lbench's PASSES drops of Linux's caches).
const COLD_FILES: usize = 9;

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

/// Rereading through the file's dataspace attached with the region manager.
fn mmap_cost(f: &mut Files, path: &str, passes: u64) -> u64 {
    let fd = f.open(path, O_READ, 0).expect("open");
    let (a, len) = f.mmap(fd).expect("mmap");
    let recs = len / 4096;
    let mut buf = alloc::vec![0u8; 4096];
    // SAFETY: [a, a + len) is attached read-only; touching it faults the pages in.
    let src = unsafe { core::slice::from_raw_parts(a as *const u8, len as usize) };
    // Warm: fault every page in.
    let f0 = sys::rdtsc();
    for r in 0..recs as usize {
        buf.copy_from_slice(&src[r * 4096..(r + 1) * 4096]);
    }
    let first = sys::rdtsc();
    let t0 = sys::rdtsc();
    for _ in 0..passes {
        for r in 0..recs as usize {
            buf.copy_from_slice(&src[r * 4096..(r + 1) * 4096]);
            core::hint::black_box(&mut buf);
        }
    }
    let t = sys::rdtsc() - t0;
    f.munmap(a).expect("munmap");
    f.close(fd).expect("close");
    FIRST.store((first - f0) / recs, core::sync::atomic::Ordering::Relaxed);
    t / (passes * recs)
}

/// Per record, the first (mapping) pass of the last `mmap_cost`.
static FIRST: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Per record, the first `read` pass over a file cached at the PFS but not mapped here.
fn first_read_cost(f: &mut Files, path: &str) -> u64 {
    let fd = f.open(path, O_READ, 0).expect("open");
    let mut buf = alloc::vec![0u8; 4096];
    let mut recs = 0u64;
    let t0 = sys::rdtsc();
    while f.read(fd, &mut buf).expect("read") == 4096 {
        recs += 1;
    }
    let t = sys::rdtsc() - t0;
    f.close(fd).expect("close");
    t / recs
}

fn main() {
    sawmill_rm::init().expect("rm init");
    let mut f = files();
    let sizes = [
        ("64k", 4u64),
        ("128k", 4),
        ("256k", 2),
        ("1m", 1),
        ("4m", 1),
    ];
    // Open cost.
    for (name, proto) in [
        ("fs.open", Protocol::Direct),
        ("fs.open.opt2", Protocol::Vfs),
    ] {
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
    // Cold read: each of the files was never read since boot. Like lbench (which drops
    // Linux's caches before each of its passes), the minimum over COLD_FILES passes, one file
    // each: the waits for the disk count the host's time under icount (bench/README.md).
    f.protocol = Protocol::Direct;
    let mut buf = alloc::vec![0u8; 4096];
    let mut best = u64::MAX;
    for i in 0..COLD_FILES {
        let name = if i == 0 {
            alloc::string::String::from("/b/cold")
        } else {
            alloc::format!("/b/cold{i}")
        };
        let fd = f.open(&name, O_READ, 0).expect("open");
        let t0 = sys::rdtsc();
        let mut recs = 0;
        while f.read(fd, &mut buf).expect("read") == 4096 {
            recs += 1;
        }
        best = best.min((sys::rdtsc() - t0) / recs);
        f.close(fd).expect("close");
    }
    println!("BENCH fs.read4k.cold {} insn", best);
    for (cfg, proto, flags) in [
        ("multiserver", Protocol::Direct, 0),
        ("opt2", Protocol::Vfs, 0),
        ("opt3", Protocol::Direct, 0),
        ("ipc", Protocol::Direct, O_NOMAP),
    ] {
        f.protocol = proto;
        for (size, passes) in sizes {
            if cfg == "ipc" && size != "64k" && size != "1m" {
                continue;
            }
            let c = rec_cost(&mut f, &alloc::format!("/b/{}", size), flags, passes);
            println!("BENCH fs.reread4k.{}.{} {} insn", cfg, size, c);
        }
    }
    f.protocol = Protocol::Direct;
    for (size, passes) in sizes {
        let c = mmap_cost(&mut f, &alloc::format!("/b/{}", size), passes);
        println!("BENCH fs.reread4k.mmap.{} {} insn", size, c);
        if size == "1m" {
            let first_mmap = FIRST.load(core::sync::atomic::Ordering::Relaxed);
            let first_read = first_read_cost(&mut f, "/b/1m");
            println!("BENCH fs.read4k.first.read.1m {} insn", first_read);
            println!("BENCH fs.read4k.first.mmap.1m {} insn", first_mmap);
        }
    }
    // Writes: 4 KiB records over a 64 KiB file, rewritten in place (its blocks are allocated
    // and cached after the first pass): the cost of moving the data into the PFS's cache.
    let fd = f
        .open("/b/w64k", O_WRITE | O_CREATE, 0o644)
        .expect("create");
    let rec = alloc::vec![0x5au8; 4096];
    for i in 0..16 {
        f.pwrite(fd, &rec, i * 4096).expect("write");
    }
    let t0 = sys::rdtsc();
    for _ in 0..4 {
        for i in 0..16 {
            f.pwrite(fd, &rec, i * 4096).expect("write");
        }
    }
    println!("BENCH fs.write4k {} insn", (sys::rdtsc() - t0) / 64);
    f.close(fd).expect("close");
    println!("fs-bench: done");
}
