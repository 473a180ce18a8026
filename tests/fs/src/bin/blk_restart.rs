//! The workload of the blk-restart scenario (issue 16): files written, fsync'd and read back
//! (checked by content hash) while root kills the block driver under the PFS again and again,
//! at chosen points (between a write and its fsync) and at moments a second thread picks. The
//! driver's manifest policy is `restart` and the PFS resubmits what was in flight, so not one
//! call may fail and every byte must read back as written; the tool then runs `e2fsck -fn`.
//!
//! Arguments: the server to kill (the driver), then the number of rounds; or `sleep MS`: just
//! wait that long (a system's waited-for server while root deals with others). May touch: the VFS
//! (`vfs`) and root's kill request on `sys:pager` (manifest `may_kill`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
use sawmill_fsclient::{O_CREATE, O_TRUNC, O_WRITE};
use sawmill_fstests::{check, files, ok, read_file, sleep_ms};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

/// Bytes per file: larger than the PFS's cache in the scenario together, so reading the files
/// back goes to the disk through the restarted driver.
const FILE_BYTES: usize = 96 * 1024;
/// Kills the background thread makes, and the pause before each (milliseconds, grows).
const BACKGROUND_KILLS: u32 = 4;
const BACKGROUND_PAUSE_MS: u64 = 40;

/// Kills that root carried out (from both threads).
static KILLS: AtomicU32 = AtomicU32::new(0);

/// Asks root to kill server `name`: true if it did.
fn kill(name: &str) -> bool {
    let done = sawmill_fstests::kill_server(name);
    if done {
        KILLS.fetch_add(1, Ordering::Relaxed);
    }
    done
}

/// FNV-1a, 64 bits: the content hash the read-back is checked by.
fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn content(round: u32) -> Vec<u8> {
    (0..FILE_BYTES)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(round * 97) as u8)
        .collect()
}

fn main() {
    let driver = env::arg(0).unwrap_or("blk0");
    if driver == "sleep" {
        // The restart-held scenario's waited-for server: keeps the system up meanwhile.
        let ms = env::arg(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
        if let Ok(timer) = thread::create(sawmill_abi::ObjKind::Notification, 0) {
            sleep_ms(timer, ms);
        }
        println!("restart: slept {} ms", ms);
        return;
    }
    let rounds: u32 = env::arg(1).and_then(|a| a.parse().ok()).unwrap_or(6);
    let mut f = files();
    f.protocol = sawmill_fsclient::Protocol::Vfs;
    // Authority is the manifest's: a server not in our `may_kill` is refused.
    check!(!kill("mem"), "root killed `mem` for us");
    let timer = thread::create(sawmill_abi::ObjKind::Notification, 0);
    let timer2 = thread::create(sawmill_abi::ObjKind::Notification, 0);
    let (Ok(timer), Ok(timer2)) = (timer, timer2) else {
        println!("restart: FAIL no notification");
        return;
    };
    let background = thread::spawn(100, 16 * 1024, move || {
        for k in 0..BACKGROUND_KILLS as u64 {
            sleep_ms(timer2, BACKGROUND_PAUSE_MS * (k + 1));
            kill(driver);
        }
    });
    check!(background.is_ok(), "starting the killing thread");
    let mut hashes = Vec::new();
    for round in 0..rounds {
        let path = format!("/restart-{}.bin", round);
        let data = content(round);
        let fd = ok(f.open(&path, O_WRITE | O_CREATE | O_TRUNC, 0o644), &path);
        let half = FILE_BYTES / 2;
        check!(ok(f.write(fd, &data[..half]), &path) == half, "short write");
        // Every other round the driver dies between the write and the fsync that must reach it.
        if round % 2 == 0 {
            check!(kill(driver), "root would not kill {}", driver);
        }
        check!(
            ok(f.write(fd, &data[half..]), &path) == FILE_BYTES - half,
            "short write"
        );
        ok(f.fsync(fd), "fsync");
        ok(f.close(fd), &path);
        hashes.push(hash(&data));
        println!("restart: round {} written and fsync'd", round);
    }
    // Give the killing thread time to finish, then one more kill before reading back.
    sleep_ms(
        timer,
        BACKGROUND_PAUSE_MS * (BACKGROUND_KILLS as u64 + 1) * 2,
    );
    check!(kill(driver), "root would not kill {}", driver);
    for (round, want) in hashes.iter().enumerate() {
        let path = format!("/restart-{}.bin", round);
        let got = ok(read_file(&mut f, &path), &path);
        check!(
            got.len() == FILE_BYTES && hash(&got) == *want,
            "{}: read back {} bytes, hash {:#x}, want {:#x}",
            path,
            got.len(),
            hash(&got),
            want
        );
    }
    ok(f.sync(), "sync");
    println!(
        "restart: PASS {} rounds, {} driver kills, every file read back intact",
        rounds,
        KILLS.load(Ordering::Relaxed)
    );
}
