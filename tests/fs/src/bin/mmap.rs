//! Files as dataspaces (systems/tests/fs-mmap.toml): an open file's capability is also a
//! read-only dataspace of its PFS, attached with the region manager (`Files::mmap`), read by
//! touching memory. Roles (first argument):
//! - `read`: every file listed in `/CHECKSUMS` of both mounts attached and checksummed through
//!   memory (big ones twice: shadow pages the PFS reused fault back in); a sparse file (shadow pages) sees a write; truncate revokes and the page faults back
//!   in; then `/data/ready` tells the writer to write into `/data/shared`, which this mapping must
//!   show; `/data/done`; finally a write to the read-only mapping (the region manager reports
//!   the thread, root ends the task).
//! - `other` (uid 1000), once `/data/ready` exists: a file it may not read cannot be opened; a
//!   file opened for writing only cannot be mapped (library and PFS both refuse); a read-only
//!   capability (`read_only`) maps but cannot write or close; writable mappings are refused.
//!   Then it writes a marker into `/data/shared` (mode 0666) through the file interface, waits
//!   for `/data/done` and lets the reader fault.
#![no_std]
#![no_main]

extern crate alloc;

use sawmill_fsclient::{fnv64, Error, Files, O_CREATE, O_READ, O_TRUNC, O_WRITE};
use sawmill_fstests::{check, files, ok, read_file};
use sawmill_interfaces::{dataspace, file, rpc, DsError, DsFlags, MapFlags};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

/// The bytes of an attached range.
fn mem(addr: u64, len: u64) -> &'static [u8] {
    // SAFETY: `addr..addr+len` is attached read-only by the region manager; touching it faults
    // the pages in. The contents may change under us (writes through the file interface): we
    // only read bytes.
    unsafe { core::slice::from_raw_parts(addr as *const u8, len as usize) }
}

fn byte(addr: u64) -> u8 {
    // SAFETY: as `mem`; volatile, since another task's write changes it.
    unsafe { core::ptr::read_volatile(addr as *const u8) }
}

fn touch_file(f: &mut Files, path: &str) {
    let fd = ok(f.open(path, O_WRITE | O_CREATE | O_TRUNC, 0o644), path);
    ok(f.close(fd), path);
}

fn wait_for(f: &mut Files, path: &str) {
    for _ in 0..200_000 {
        if let Ok(fd) = f.open(path, O_READ, 0) {
            ok(f.close(fd), path);
            return;
        }
        sys::yield_now();
    }
    println!("{}: FAIL {} never appeared", env::name(), path);
    sawmill_rt::exit(1)
}

fn check_mount(f: &mut Files, base: &str) -> usize {
    let list = ok(
        read_file(f, &alloc::format!("{}/CHECKSUMS", base)),
        "CHECKSUMS",
    );
    let text = core::str::from_utf8(&list).expect("utf8");
    let mut n = 0;
    for line in text.lines() {
        let mut it = line.splitn(3, ' ');
        let (Some(h), Some(size), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let want = u64::from_str_radix(h, 16).unwrap();
        let size: u64 = size.parse().unwrap();
        let full = alloc::format!("{}{}", base, path);
        let fd = ok(f.open(&full, O_READ, 0), &full);
        if size == 0 {
            check!(
                f.mmap(fd) == Err(Error::Invalid),
                "{}: empty file mapped",
                full
            );
        } else {
            let (a, len) = ok(f.mmap(fd), &full);
            check!(
                len == size,
                "{}: mapped {} bytes, expected {}",
                full,
                len,
                size
            );
            let got = fnv64(mem(a, len));
            check!(
                got == want,
                "{}: checksum {:016x} through the mapping, expected {:016x}",
                full,
                got,
                want
            );
            if len > 64 * 1024 {
                // Again: on the 1 KiB disk some of these pages are shadow copies, and the PFS
                // keeps only a few (`shadow_pages`): revoked ones fault back in.
                let again = fnv64(mem(a, len));
                check!(
                    again == want,
                    "{}: second pass checksum {:016x}",
                    full,
                    again
                );
            }
            ok(f.munmap(a), &full);
        }
        ok(f.close(fd), &full);
        n += 1;
    }
    n
}

fn read_role(f: &mut Files) {
    let n = check_mount(f, "") + check_mount(f, "/data");
    println!(
        "fs-mmap: PASS {} files checksummed through mapped file dataspaces",
        n
    );

    // A sparse file on the 1 KiB disk: its holes are served as shadow pages, kept coherent.
    let w = ok(
        f.open("/sparse", O_READ | O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "sparse",
    );
    ok(f.pwrite(w, b"end", 3 * 4096 + 10), "sparse write");
    let (a, len) = ok(f.mmap(w), "sparse mmap");
    check!(len == 3 * 4096 + 13, "sparse: size {}", len);
    check!(
        mem(a, 4096 * 3).iter().all(|&b| b == 0),
        "sparse: hole not zero"
    );
    check!(mem(a + 3 * 4096 + 10, 3) == b"end", "sparse: tail");
    ok(f.pwrite(w, b"HOLEFILL", 4096 + 100), "sparse fill");
    check!(
        mem(a + 4096 + 100, 8) == b"HOLEFILL",
        "sparse: write into a hole not seen in the mapping"
    );
    ok(f.close(w), "sparse close");

    // Truncate revokes the mappings; the remaining page faults back in with current data.
    let t = ok(
        f.open("/data/trunc", O_READ | O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "trunc",
    );
    ok(f.pwrite(t, &[b'A'; 8192], 0), "trunc write");
    let (a, _) = ok(f.mmap(t), "trunc mmap");
    check!(byte(a) == b'A' && byte(a + 4096) == b'A', "trunc: contents");
    ok(f.ftruncate(t, 4096), "ftruncate");
    ok(f.pwrite(t, b"B", 0), "trunc rewrite");
    check!(
        byte(a) == b'B',
        "trunc: page after revocation shows {:#x}",
        byte(a)
    );
    ok(f.close(t), "trunc close");
    println!("fs-mmap: PASS holes and truncate");

    // Another client writes through the file interface; the mapping is the cache page.
    let fd = ok(f.open("/data/shared", O_READ, 0), "shared");
    let (a, _) = ok(f.mmap(fd), "shared mmap");
    let before = mem(a + 100, 8).to_vec();
    check!(before != b"WRITTEN!", "shared: marker already there");
    touch_file(f, "/data/ready");
    let mut seen = false;
    for _ in 0..200_000 {
        if (0..8).all(|i| byte(a + 100 + i) == b"WRITTEN!"[i as usize]) {
            seen = true;
            break;
        }
        sys::yield_now();
    }
    check!(
        seen,
        "shared: the other client's write never showed in the mapping"
    );
    println!("fs-mmap: PASS another client's write seen through the mapping");
    touch_file(f, "/data/done");
    println!("fs-mmap: writing to the read-only mapping at {:#x}", a);
    // SAFETY: deliberately wrong: the range is attached read-only; the region manager refuses.
    unsafe { core::ptr::write_volatile(a as *mut u8, 1) };
    println!("fs-mmap: FAIL wrote to a read-only file mapping");
}

fn other_role(f: &mut Files) {
    wait_for(f, "/data/ready");
    perm(f);
    let fd = ok(f.open("/data/shared", O_WRITE, 0), "shared");
    ok(f.pwrite(fd, b"WRITTEN!", 100), "shared write");
    ok(f.close(fd), "shared close");
    wait_for(f, "/data/done");
    // Let the reader reach its faulting write before we end (and with us the scenario).
    for _ in 0..20_000 {
        sys::yield_now();
    }
    println!("fs-mmap-other: PASS done");
}

fn perm(f: &mut Files) {
    check!(
        f.open("/data/secret", O_READ, 0) == Err(Error::Denied),
        "secret: open for reading not refused"
    );
    // Opened for writing only: no mapping, in the library and at the PFS.
    let fd = ok(f.open("/data/wonly", O_WRITE, 0), "wonly");
    check!(
        f.mmap(fd) == Err(Error::BadFile),
        "wonly: library mapped a write-only file"
    );
    let cap = ok(f.file_cap(fd), "cap");
    let dst = 0x0000_0f00_0000_0000u64;
    let r = dataspace::Client::new(cap).map(0, dst, 1, MapFlags::READ, [dst, 4096]);
    check!(
        r == Err(rpc::Error::App(DsError::Denied)),
        "wonly: PFS map gave {:?}",
        r
    );
    check!(sys::translate(dst).is_err(), "wonly: something was mapped");
    ok(f.close(fd), "wonly close");
    // Readable: maps, matches read(); writable mappings refused; a read-only capability maps
    // but cannot write or close.
    let fd = ok(f.open("/data/pub", O_READ, 0), "pub");
    let (a, len) = ok(f.mmap(fd), "pub mmap");
    let mut buf = alloc::vec![0u8; len as usize];
    check!(
        ok(f.pread(fd, &mut buf, 0), "pub read") == len as usize,
        "pub: short read"
    );
    check!(mem(a, len) == &buf[..], "pub: mapping differs from read()");
    let cap = ok(f.file_cap(fd), "cap");
    let ds = dataspace::Client::new(cap);
    let info = ds.info();
    check!(
        info.map(|i| (i.size, i.flags)) == Ok((len.div_ceil(4096) * 4096, DsFlags::EMPTY)),
        "pub: info {:?}",
        info
    );
    let r = ds.map(0, dst, 1, MapFlags::READ | MapFlags::WRITE, [dst, 4096]);
    check!(
        r == Err(rpc::Error::App(DsError::Denied)),
        "pub: writable map gave {:?}",
        r
    );
    check!(
        ds.copy(thread::alloc_slot()) == Err(rpc::Error::App(DsError::Unsupported)),
        "pub: copy"
    );
    let ro = ds.read_only(thread::alloc_slot());
    let ro = match ro {
        Ok(c) => c,
        Err(e) => {
            println!("fs-mmap-other: FAIL read_only: {:?}", e);
            sawmill_rt::exit(1)
        }
    };
    let m = dataspace::Client::new(ro).map(0, dst, 1, MapFlags::READ, [dst, 4096]);
    check!(
        m.is_ok() && mem(dst, len.min(4096)) == &buf[..len.min(4096) as usize],
        "pub: read-only cap map {:?}",
        m
    );
    let _ = sys::unmap(dst, 1, sawmill_abi::UNMAP_SELF);
    let rf = file::Client::new(ro);
    check!(
        rf.write(0, b"x") == Err(rpc::Error::App(sawmill_interfaces::FsError::BadFile)),
        "pub: write through read-only cap"
    );
    check!(
        rf.close() == Err(rpc::Error::App(sawmill_interfaces::FsError::BadFile)),
        "pub: close through read-only cap"
    );
    ok(f.munmap(a), "pub munmap");
    ok(f.close(fd), "pub close");
    // Closing revoked the read-only capability too.
    check!(
        dataspace::Client::new(ro).info().is_err(),
        "pub: read-only cap survived close"
    );
    println!("fs-mmap-other: PASS mapping needs read permission");
}

fn main() {
    if let Err(e) = sawmill_rm::init() {
        println!("{}: FAIL rm init: {:?}", env::name(), e);
        sawmill_rt::exit(1);
    }
    let mut f = files();
    match env::args().next() {
        Some("read") => read_role(&mut f),
        Some("other") => other_role(&mut f),
        _ => println!("{}: FAIL no role", env::name()),
    }
}
