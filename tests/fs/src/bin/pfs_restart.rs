//! The workload of the pfs-restart scenario (issue 16): files held open while root kills the
//! ext2 PFS under them again and again (its manifest policy is `restart`). Each open descriptor
//! must carry on: the client library reopens the file by inode and generation at the new
//! incarnation and retries the call, so reads through the same descriptors return what was
//! fsync'd, at the same offsets; writes not fsync'd before a kill are redone from the library's
//! log (fsync succeeds, the bytes are there; a file created meanwhile is created again), and past
//! the log's bound the next fsync reports `Io` (the data may be lost, as on Linux); a file unlinked after a kill while we held it
//! open gives `Stale` (ESTALE). Descriptors from both protocols (option 3 at the PFS, option 2
//! through the VFS). The tool then runs `e2fsck -fn`.
//!
//! Arguments: the server to kill (the PFS), then the number of rounds. May touch: the VFS
//! (`vfs`) and root's kill request on `sys:pager` (manifest `may_kill`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
use sawmill_fsclient::{Error, Files, Protocol, O_CREATE, O_NOMAP, O_READ, O_TRUNC, O_WRITE};
use sawmill_fstests::{check, files, kill_server, ok, read_file, sleep_ms};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

/// Bytes of the file each round extends (a chunk per round): more than a page and a write
/// buffer, so reads go through mapped pages and writes through the write buffer.
const CHUNK: usize = 20 * 1024;

/// Kills the background thread makes while the main thread reads, and the pause before each.
const BACKGROUND_KILLS: u32 = 3;
const BACKGROUND_PAUSE_MS: u64 = 25;
/// Background kills carried out so far.
static BACKGROUND_DONE: AtomicU32 = AtomicU32::new(0);

fn chunk(round: u32) -> Vec<u8> {
    (0..CHUNK)
        .map(|i| (i as u32).wrapping_mul(131).wrapping_add(round * 7 + 3) as u8)
        .collect()
}

/// Reads `len` bytes at the descriptor's offset from `off` (lseek then read, so the offset the
/// library keeps across a restart is what is tested), `piece` bytes a call.
fn read_at(f: &mut Files, fd: usize, off: u64, len: usize, piece: usize, what: &str) -> Vec<u8> {
    ok(f.lseek(fd, off as i64, 0), what);
    let mut out = alloc::vec![0u8; len];
    let mut got = 0;
    while got < len {
        let end = (got + piece).min(len);
        let n = ok(f.read(fd, &mut out[got..end]), what);
        if n == 0 {
            break;
        }
        got += n;
    }
    out.truncate(got);
    out
}

fn main() {
    let pfs = env::arg(0).unwrap_or("pfs0");
    let rounds: u32 = env::arg(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    // The region manager pages us: a read of a page the dead PFS lent us then gets a scratch
    // page instead of ending the task, and the library notices (`sawmill_rm::lent_faults`).
    if let Err(e) = sawmill_rm::init() {
        println!("pfs-restart: FAIL region manager: {:?}", e);
        return;
    }
    let mut f = files().with_redo();
    let mut g = files().with_redo();
    g.protocol = Protocol::Vfs;

    // The log: extended by a chunk per round, fsync'd, read back through the same descriptor
    // after each kill. Opened at the PFS (option 3).
    let log = ok(
        f.open("/log.bin", O_READ | O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create /log.bin",
    );
    // A reader of the same file through the VFS (option 2), in the second client.
    let mut expect: Vec<u8> = Vec::new();
    let first = chunk(0);
    check!(ok(f.write(log, &first), "write") == CHUNK, "short write");
    ok(f.fsync(log), "fsync");
    expect.extend_from_slice(&first);
    let reader = ok(
        g.open("/log.bin", O_READ | O_NOMAP, 0),
        "open /log.bin via the VFS",
    );

    // A file we hold open for reading and that is unlinked after a kill: Stale.
    let doomed = ok(
        f.open("/doomed.txt", O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create",
    );
    ok(f.write(doomed, b"soon gone"), "write");
    ok(f.fsync(doomed), "fsync");
    ok(f.close(doomed), "close");
    let doomed = ok(
        f.open("/doomed.txt", O_READ | O_NOMAP, 0),
        "open /doomed.txt",
    );

    for round in 1..=rounds {
        check!(kill_server(pfs), "root would not kill {}", pfs);
        // Through the same descriptors: everything fsync'd so far, at the offsets asked.
        // Mapped pages (the fast path), 4 KiB a read: the first read after the kill touches
        // a page the dead incarnation lent us.
        let got = read_at(
            &mut f,
            log,
            0,
            expect.len(),
            4096,
            "read /log.bin after a restart",
        );
        check!(
            got == expect,
            "round {}: /log.bin read back {} bytes, not the {} fsync'd",
            round,
            got.len(),
            expect.len()
        );
        let mid = (expect.len() / 2) as u64;
        // The read buffer (O_NOMAP), 16 KiB a read.
        let got = read_at(
            &mut g,
            reader,
            mid,
            expect.len() - mid as usize,
            16384,
            "read via VFS fd",
        );
        check!(
            got[..] == expect[mid as usize..],
            "round {}: the VFS descriptor read back other bytes",
            round
        );
        // Extend it, fsync, and the next round's kill must not lose it.
        let c = chunk(round);
        ok(f.lseek(log, 0, 2), "lseek end");
        check!(ok(f.write(log, &c), "write") == CHUNK, "short write");
        ok(f.fsync(log), "fsync after a restart");
        expect.extend_from_slice(&c);
        println!(
            "pfs-restart: round {} read back {} bytes through open descriptors",
            round,
            expect.len()
        );
    }

    // Kills at moments another thread picks, while reads are in flight through the same
    // descriptors (a caller blocked on the dead incarnation is woken with an error, the file
    // reopened and the call made again): every read returns what was fsync'd.
    let Ok(timer) = thread::create(sawmill_abi::ObjKind::Notification, 0) else {
        println!("pfs-restart: FAIL no notification");
        return;
    };
    let target = pfs;
    let killer = thread::spawn(100, 16 * 1024, move || {
        for k in 0..BACKGROUND_KILLS as u64 {
            sleep_ms(timer, BACKGROUND_PAUSE_MS * (k + 1));
            kill_server(target);
            BACKGROUND_DONE.fetch_add(1, Ordering::SeqCst);
        }
    });
    check!(killer.is_ok(), "starting the killing thread");
    let mut reads = 0u32;
    while BACKGROUND_DONE.load(Ordering::SeqCst) < BACKGROUND_KILLS {
        let got = read_at(&mut f, log, 0, expect.len(), 4096, "read while killed");
        check!(
            got == expect,
            "a read during the kills returned other bytes"
        );
        let got = read_at(&mut g, reader, 0, expect.len(), 16384, "read while killed");
        check!(
            got == expect,
            "a read via the VFS during the kills returned other bytes"
        );
        reads += 1;
    }
    println!(
        "pfs-restart: {} whole reads while the PFS was killed {} times under them",
        reads, BACKGROUND_KILLS
    );

    // Written, not fsync'd, then the PFS dies: the library replays the writes it logged since
    // the last fsync into the reopened file, so fsync succeeds and the bytes are there.
    let lost = ok(
        f.open(
            "/unsynced.bin",
            O_READ | O_WRITE | O_CREATE | O_TRUNC | O_NOMAP,
            0o644,
        ),
        "create",
    );
    ok(f.fsync(lost), "fsync of the empty file");
    let c = chunk(99);
    ok(f.write(lost, &c[..CHUNK / 2]), "write");
    ok(f.ftruncate(lost, 100), "ftruncate");
    ok(f.pwrite(lost, &c[100..], 100), "write");
    check!(kill_server(pfs), "root would not kill {}", pfs);
    let r = f.fsync(lost);
    check!(
        r.is_ok(),
        "fsync after a restart with writes to redo gave {:?}",
        r
    );
    let got = read_at(&mut f, lost, 0, CHUNK + 1, 4096, "read the redone writes");
    check!(got == c, "the redone writes read back differently");
    println!("pfs-restart: unsynced writes redone after a restart (fsync ok, bytes there)");

    // A file created and written, neither fsync'd, then the PFS dies: it may be missing from
    // the new incarnation (never written back); the library creates it again by its name and
    // redoes the writes.
    let fresh = ok(
        f.open("/fresh.bin", O_READ | O_WRITE | O_CREATE | O_NOMAP, 0o644),
        "create /fresh.bin",
    );
    let d = chunk(77);
    ok(f.write(fresh, &d), "write /fresh.bin");
    check!(kill_server(pfs), "root would not kill {}", pfs);
    let r = f.fsync(fresh);
    check!(
        r.is_ok(),
        "fsync of a file created before a restart gave {:?}",
        r
    );
    ok(f.close(fresh), "close /fresh.bin");
    let all = ok(read_file(&mut f, "/fresh.bin"), "read /fresh.bin");
    check!(all == d, "/fresh.bin read afresh differs");
    println!("pfs-restart: a file created before a restart is there after its fsync");

    // Past the redo log's bound (256 KiB a file) the old rule holds: the writes may be lost,
    // and the next fsync says so (EIO), once; written again and fsync'd, they are there.
    let big = ok(
        f.open(
            "/big.bin",
            O_READ | O_WRITE | O_CREATE | O_TRUNC | O_NOMAP,
            0o644,
        ),
        "create /big.bin",
    );
    ok(f.fsync(big), "fsync of the empty file");
    const BIG_CHUNKS: u64 = 14;
    const _: () = assert!(BIG_CHUNKS as usize * CHUNK > 256 << 10);
    for k in 0..BIG_CHUNKS {
        ok(f.pwrite(big, &c, k * CHUNK as u64), "write /big.bin");
    }
    check!(kill_server(pfs), "root would not kill {}", pfs);
    check!(
        f.fsync(big) == Err(Error::Io),
        "fsync after losing more unsynced writes than the log holds did not report Io"
    );
    for k in 0..BIG_CHUNKS {
        ok(f.pwrite(big, &c, k * CHUNK as u64), "write /big.bin again");
    }
    ok(f.fsync(big), "fsync again");
    let got = read_at(
        &mut f,
        big,
        CHUNK as u64 * (BIG_CHUNKS - 1),
        CHUNK,
        4096,
        "read",
    );
    check!(got == c, "/big.bin's last chunk read back differently");
    ok(f.close(big), "close /big.bin");
    println!("pfs-restart: unsynced writes past the redo log's bound reported by fsync (EIO)");

    // The file is unlinked after a kill, while we still hold it: the reopen finds it gone.
    check!(kill_server(pfs), "root would not kill {}", pfs);
    ok(f.unlink("/doomed.txt"), "unlink /doomed.txt");
    let mut b = [0u8; 16];
    let r = f.read(doomed, &mut b);
    check!(
        r == Err(Error::Stale),
        "reading a file unlinked during the outage gave {:?}",
        r
    );
    println!("pfs-restart: a file unlinked during the outage is stale (ESTALE)");

    // A file attached with the region manager (`Files::mmap`), read through the mapping, then
    // the PFS killed: the next touch of a page finds the dead one's capability revoked and its
    // page gone; the region manager opens the file again by inode and generation into the
    // same slot and maps the page from the new incarnation. The same bytes, no file call.
    let mapped = ok(f.open("/log.bin", O_READ, 0), "open /log.bin to map");
    let (at, size) = ok(f.mmap(mapped), "mmap /log.bin");
    check!(size == expect.len() as u64, "mmap: size {}", size);
    // SAFETY: `f.mmap` attached `size` readable bytes at `at`; the file is not written meanwhile.
    let view = || unsafe { core::slice::from_raw_parts(at as *const u8, size as usize) };
    check!(view() == &expect[..], "the mapping reads other bytes");
    for k in 0..2 {
        check!(kill_server(pfs), "root would not kill {}", pfs);
        check!(
            view() == &expect[..],
            "the mapping reads other bytes after restart {}",
            k + 1
        );
    }
    check!(
        sawmill_rm::reopened() >= 2,
        "the region manager did not open the mapped file again ({})",
        sawmill_rm::reopened()
    );
    ok(f.close(mapped), "close the mapped file");
    println!(
        "pfs-restart: a mapped file reads the same after 2 restarts (reopened {} times by the region manager)",
        sawmill_rm::reopened()
    );

    ok(f.close(log), "close");
    ok(g.close(reader), "close");
    let _ = f.close(doomed);
    ok(f.close(lost), "close");
    let all = ok(read_file(&mut f, "/log.bin"), "read /log.bin afresh");
    check!(all == expect, "/log.bin read afresh differs");
    let all = ok(read_file(&mut f, "/unsynced.bin"), "read /unsynced.bin");
    check!(all == c, "/unsynced.bin read afresh differs");
    let name = "/log.bin";
    ok(f.sync(), "sync");
    // From round 2 on, the first read through the log's descriptor touched a page mapped from
    // the dead incarnation: recovered from, not a crash.
    let lost = sawmill_rm::lent_faults();
    check!(
        rounds < 2 || lost > 0,
        "no read touched a page of a dead incarnation: the test missed the mapped path"
    );
    println!(
        "pfs-restart: PASS {} rounds, {} bytes of {} intact, {} reads of lost pages redone",
        rounds,
        expect.len(),
        name,
        lost
    );
}
