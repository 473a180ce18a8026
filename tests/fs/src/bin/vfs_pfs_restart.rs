//! The workload of the vfs-pfs-restart scenario (issue 16): the VFS and the ext2 PFS are killed
//! by turns (VFS, PFS, VFS, PFS, ...; both have the policy `restart`) while files opened before
//! any kill stay open (option 3 at the PFS, option 2 through the VFS) and path calls go on in
//! between. What it proves: a capability the PFS handed out survives a VFS restart, and when
//! the PFS then dies it fails at once (the endpoint the PFS served was root's, made for that
//! incarnation and destroyed with it) so the client library reopens the file; it never
//! blocks. (Before, the endpoint was the first VFS's: a restarted VFS could not revoke it, and
//! the first read after the PFS's death waited for ever.) A second thread reads a held file in a
//! loop with its own descriptors; each PFS kill is made while that thread is inside a call, so a
//! caller blocked on the dying PFS must be woken with an error and carry on. Every byte reads
//! back; the scenario's deadline and root's hang detector catch a hang; the tool then runs
//! `e2fsck -fn`.
//!
//! Arguments: the VFS's server name, the PFS's, then the number of cycles (each kills both).
//! May touch: the VFS (`vfs`) and root's kill request on `sys:pager` (manifest `may_kill`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use sawmill_fsclient::{Files, Protocol, O_CREATE, O_NOMAP, O_READ, O_TRUNC, O_WRITE};
use sawmill_fstests::{check, files, kill_server, ok, read_file, sleep_ms};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

/// Bytes of the file the reader thread reads: several pages, so a whole read is many calls.
const SHARED_LEN: usize = 48 * 1024;
/// The reader thread is inside a call to the file system (set before, cleared after).
static IN_CALL: AtomicBool = AtomicBool::new(false);
/// Whole reads the reader thread finished, and those during which a PFS kill happened.
static READS: AtomicU32 = AtomicU32::new(0);
static OVERLAPPED: AtomicU32 = AtomicU32::new(0);
/// PFS kills so far (the reader thread compares it before and after each call).
static PFS_KILLS: AtomicU32 = AtomicU32::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
/// The reader thread saw bytes other than the file's (it cannot end the program itself while
/// the main thread works: it records, the main thread reports).
static READER_BAD: AtomicBool = AtomicBool::new(false);
static READER_DONE: AtomicBool = AtomicBool::new(false);

fn content(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| i.wrapping_mul(37).wrapping_add(seed * 13 + 1) as u8)
        .collect()
}

/// The whole file through descriptor `fd` with `pread`, `piece` bytes a call.
fn pread_all(f: &mut Files, fd: usize, len: usize, piece: usize, what: &str) -> Vec<u8> {
    let mut out = alloc::vec![0u8; len];
    let mut off = 0;
    while off < len {
        let end = (off + piece).min(len);
        let n = ok(f.pread(fd, &mut out[off..end], off as u64), what);
        check!(n > 0, "{}: short file at {}", what, off);
        off += n;
    }
    out
}

/// Descriptors the main thread's clients never reach: clients in one task share the window
/// area by descriptor number, so the reader's descriptor must be another number.
const READER_FD: usize = 4;

/// The reader thread: its own client (option 3) and descriptor, opened before any kill, read
/// in 4 KiB calls until told to stop.
fn reader(fd_path: &'static str, expect: Vec<u8>) {
    let mut h = files();
    let mut fd = ok(h.open(fd_path, O_READ | O_NOMAP, 0), "the reader's open");
    while fd < READER_FD {
        // Kept open, never used: they only hold the lower numbers.
        fd = ok(h.open(fd_path, O_READ | O_NOMAP, 0), "the reader's open");
    }
    let mut buf = alloc::vec![0u8; 4096];
    while !STOP.load(Ordering::SeqCst) {
        let kills = PFS_KILLS.load(Ordering::SeqCst);
        let mut off = 0;
        while off < expect.len() {
            IN_CALL.store(true, Ordering::SeqCst);
            let r = h.pread(fd, &mut buf, off as u64);
            IN_CALL.store(false, Ordering::SeqCst);
            match r {
                Ok(n) if n > 0 && buf[..n] == expect[off..off + n] => off += n,
                r => {
                    println!("vfs-pfs-restart: the reader's read at {} gave {:?}", off, r);
                    READER_BAD.store(true, Ordering::SeqCst);
                    READER_DONE.store(true, Ordering::SeqCst);
                    park();
                }
            }
        }
        READS.fetch_add(1, Ordering::SeqCst);
        if PFS_KILLS.load(Ordering::SeqCst) != kills {
            OVERLAPPED.fetch_add(1, Ordering::SeqCst);
        }
    }
    let _ = h.close(fd);
    READER_DONE.store(true, Ordering::SeqCst);
    park();
}

/// The reader thread's end: it waits for the task to end with the main thread (a thread that
/// returns would report its exit to its pager for nothing).
fn park() -> ! {
    let timer = thread::create(sawmill_abi::ObjKind::Notification, 0).unwrap_or(0);
    loop {
        sleep_ms(timer, 1000);
    }
}

fn main() {
    let vfs = env::arg(0).unwrap_or("vfs");
    let pfs = env::arg(1).unwrap_or("pfs0");
    let cycles: u32 = env::arg(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    // The region manager pages us (and the reader thread): a read of a page the dead PFS lent
    // us gets a scratch page instead of ending the task, and the library notices.
    if let Err(e) = sawmill_rm::init() {
        println!("vfs-pfs-restart: FAIL region manager: {:?}", e);
        return;
    }
    let mut f = files();
    let mut g = files();
    g.protocol = Protocol::Vfs;
    let Ok(timer) = thread::create(sawmill_abi::ObjKind::Notification, 0) else {
        println!("vfs-pfs-restart: FAIL no notification");
        return;
    };

    ok(f.mkdir("/vp", 0o755), "mkdir /vp");
    // Held across every kill: written at the PFS (option 3), read through the VFS (option 2).
    let held = ok(
        f.open("/vp/held.bin", O_READ | O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create /vp/held.bin",
    );
    let mut expect = content(0, 9000);
    ok(f.write(held, &expect), "write");
    ok(f.fsync(held), "fsync");
    let via_vfs = ok(
        g.open("/vp/held.bin", O_READ | O_NOMAP, 0),
        "open via the VFS",
    );
    // The reader thread's file, never written again.
    let shared = content(77, SHARED_LEN);
    let fd = ok(
        f.open("/vp/shared.bin", O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create /vp/shared.bin",
    );
    ok(f.write(fd, &shared), "write");
    ok(f.fsync(fd), "fsync");
    ok(f.close(fd), "close");
    ok(f.sync(), "sync");
    let copy = shared.clone();
    check!(
        sawmill_rm::spawn(32 * 1024, move || reader("/vp/shared.bin", copy)).is_ok(),
        "starting the reader thread"
    );
    // The reader has opened its file before the first kill.
    while READS.load(Ordering::SeqCst) == 0 && !READER_DONE.load(Ordering::SeqCst) {
        sleep_ms(timer, 5);
    }

    let mut made: Vec<Vec<u8>> = alloc::vec![b"held.bin".to_vec(), b"shared.bin".to_vec()];
    for cycle in 1..=cycles {
        for (k, victim) in [vfs, pfs].into_iter().enumerate() {
            let step = (cycle - 1) * 2 + k as u32 + 1;
            if victim == pfs {
                // Kill it while the reader is inside a call (a caller blocked on it or about
                // to be): the kill must wake it with an error, not leave it waiting.
                let mut spins = 0;
                while !IN_CALL.load(Ordering::SeqCst) && spins < 1000 {
                    sleep_ms(timer, 1);
                    spins += 1;
                }
                check!(kill_server(victim), "root would not kill {}", victim);
                PFS_KILLS.fetch_add(1, Ordering::SeqCst);
            } else {
                check!(kill_server(victim), "root would not kill {}", victim);
            }
            // The descriptors opened before any kill: reads through both, a write at the PFS.
            let got = pread_all(&mut g, via_vfs, expect.len(), 16384, "read via the VFS");
            check!(
                got == expect,
                "step {} ({}): the VFS descriptor reads back other bytes",
                step,
                victim
            );
            let got = pread_all(&mut f, held, expect.len(), 4096, "read at the PFS");
            check!(
                got == expect,
                "step {} ({}): the PFS descriptor reads back other bytes",
                step,
                victim
            );
            let more = content(step, 3000);
            ok(f.lseek(held, 0, 2), "lseek end");
            ok(f.write(held, &more), "write the held file");
            ok(f.fsync(held), "fsync the held file");
            expect.extend_from_slice(&more);
            // Path calls, both protocols: stat, create, rename, list.
            let st = ok(g.stat("/vp/held.bin"), "stat via the VFS");
            check!(st.size == expect.len() as u64, "stat: size {}", st.size);
            let (a, b) = (format!("/vp/new{}", step), format!("/vp/file{}", step));
            let c = content(100 + step, 5000);
            let fd = ok(g.open(&a, O_WRITE | O_CREATE | O_TRUNC, 0o644), "create");
            ok(g.write(fd, &c), "write");
            ok(g.fsync(fd), "fsync");
            ok(g.close(fd), "close");
            ok(f.rename(&a, &b), "rename");
            made.push(b.as_bytes()[4..].to_vec());
            made.sort();
            let mut names: Vec<Vec<u8>> = ok(g.readdir("/vp"), "readdir")
                .into_iter()
                .map(|e| e.name)
                .filter(|n| n != b"." && n != b"..")
                .collect();
            names.sort();
            check!(names == made, "step {}: /vp lists other names", step);
            check!(
                ok(read_file(&mut f, &b), "read the renamed file") == c,
                "step {}: the renamed file reads back other bytes",
                step
            );
            check!(
                !READER_BAD.load(Ordering::SeqCst),
                "step {}: the reader thread read other bytes",
                step
            );
            // Durable before the next kill (a PFS's death loses what its cache did not write
            // back: names made and renamed too, as on Linux without a sync).
            ok(f.sync(), "sync");
            println!(
                "vfs-pfs-restart: step {} ({} killed): open files and path calls carried on",
                step, victim
            );
        }
    }
    STOP.store(true, Ordering::SeqCst);
    while !READER_DONE.load(Ordering::SeqCst) {
        sleep_ms(timer, 5);
    }
    check!(
        !READER_BAD.load(Ordering::SeqCst),
        "the reader thread read other bytes"
    );
    println!(
        "vfs-pfs-restart: the reader thread made {} whole reads, {} across a PFS kill",
        READS.load(Ordering::SeqCst),
        OVERLAPPED.load(Ordering::SeqCst)
    );
    ok(g.close(via_vfs), "close");
    ok(f.close(held), "close");
    check!(
        ok(read_file(&mut g, "/vp/held.bin"), "read afresh") == expect,
        "/vp/held.bin read afresh differs"
    );
    ok(f.sync(), "sync");
    println!(
        "vfs-pfs-restart: PASS {} cycles ({} kills), {} bytes intact",
        cycles,
        cycles * 2,
        expect.len()
    );
}
