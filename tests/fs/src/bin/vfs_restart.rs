//! The workload of the vfs-restart scenario (issue 16): path calls and open files while root
//! kills the VFS again and again (its manifest policy is `restart`). A restarted VFS rebuilds
//! its mount table from its configuration and takes over the PFS that still serves; the client
//! library takes the dead VFS's errors (PeerGone, GONE, an empty slot: BadCap) as "restarted",
//! waits for the new incarnation in the same slot and makes the call again. Open files are the
//! PFS's capabilities (option 2 through the VFS, option 3 at the PFS) and do not notice at
//! all. No call fails: the kills come between calls, and from a second thread while only calls
//! that may be made twice are in flight (stat, readdir, opens for reading, statfs): a `rename`
//! or `unlink` the dead VFS carried out but did not answer would report the state it left.
//! The tool then runs `e2fsck -fn`.
//!
//! Arguments: the server to kill (the VFS), then the number of rounds. May touch: the VFS
//! (`vfs`) and root's kill request on `sys:pager` (manifest `may_kill`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
use sawmill_fsclient::{Files, Protocol, O_CREATE, O_NOMAP, O_READ, O_TRUNC, O_WRITE};
use sawmill_fstests::{check, files, kill_server, ok, read_file, sleep_ms};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

/// Kills the background thread makes while the main thread makes path calls, and the pause
/// before each.
const BACKGROUND_KILLS: u32 = 4;
const BACKGROUND_PAUSE_MS: u64 = 30;
static BACKGROUND_DONE: AtomicU32 = AtomicU32::new(0);

fn content(round: u32) -> Vec<u8> {
    (0..6000u32)
        .map(|i| i.wrapping_mul(31).wrapping_add(round * 11 + 5) as u8)
        .collect()
}

/// The names in directory `path`, sorted, without `.` and `..`.
fn names(f: &mut Files, path: &str) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = ok(f.readdir(path), "readdir")
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n != b"." && n != b"..")
        .collect();
    v.sort();
    v
}

fn main() {
    let vfs = env::arg(0).unwrap_or("vfs");
    let rounds: u32 = env::arg(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    let mut f = files();
    let mut g = files();
    g.protocol = Protocol::Vfs;

    ok(f.mkdir("/vr", 0o755), "mkdir /vr");
    // Held open across every kill: written at the PFS (option 3), read through the VFS's
    // capability (option 2).
    let held = ok(
        f.open("/vr/held.bin", O_READ | O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "create /vr/held.bin",
    );
    let mut expect = content(0);
    ok(f.write(held, &expect), "write");
    ok(f.fsync(held), "fsync");
    let reader = ok(
        g.open("/vr/held.bin", O_READ | O_NOMAP, 0),
        "open via the VFS",
    );

    let mut made: Vec<Vec<u8>> = alloc::vec![b"held.bin".to_vec()];
    for round in 1..=rounds {
        check!(kill_server(vfs), "root would not kill {}", vfs);
        // Path calls to the new incarnation, both protocols.
        let st = ok(f.stat("/vr/held.bin"), "stat after a restart");
        check!(st.size == expect.len() as u64, "stat: size {}", st.size);
        let st = ok(g.stat("/vr/held.bin"), "stat via the VFS after a restart");
        check!(st.size == expect.len() as u64, "stat: size {}", st.size);
        // Create through the VFS, write, rename, list.
        let (a, b) = (format!("/vr/new{}", round), format!("/vr/file{}", round));
        let fd = ok(g.open(&a, O_WRITE | O_CREATE | O_TRUNC, 0o644), "create");
        let c = content(round);
        ok(g.write(fd, &c), "write");
        ok(g.fsync(fd), "fsync");
        ok(g.close(fd), "close");
        check!(kill_server(vfs), "root would not kill {}", vfs);
        ok(f.rename(&a, &b), "rename after a restart");
        made.push(b.as_bytes()[4..].to_vec());
        made.sort();
        check!(
            names(&mut g, "/vr") == made,
            "round {}: /vr lists other names",
            round
        );
        check!(
            ok(read_file(&mut f, &b), "read the renamed file") == c,
            "round {}: the renamed file reads back other bytes",
            round
        );
        // The descriptors held across the kills: reads, and a write at the PFS.
        let mut buf = alloc::vec![0u8; expect.len() + 16];
        let n = ok(g.pread(reader, &mut buf, 0), "read via the VFS descriptor");
        check!(
            buf[..n] == expect[..],
            "round {}: the held file reads back other bytes",
            round
        );
        let more = content(100 + round);
        ok(f.lseek(held, 0, 2), "lseek end");
        ok(f.write(held, &more), "write the held file");
        ok(f.fsync(held), "fsync the held file");
        expect.extend_from_slice(&more);
        println!(
            "vfs-restart: round {} path calls and open files carried on",
            round
        );
    }

    // Kills at moments another thread picks, while path calls are in flight.
    let Ok(timer) = thread::create(sawmill_abi::ObjKind::Notification, 0) else {
        println!("vfs-restart: FAIL no notification");
        return;
    };
    let target = vfs;
    let killer = thread::spawn(100, 16 * 1024, move || {
        for k in 0..BACKGROUND_KILLS as u64 {
            sleep_ms(timer, BACKGROUND_PAUSE_MS * (k + 1));
            kill_server(target);
            BACKGROUND_DONE.fetch_add(1, Ordering::SeqCst);
        }
    });
    check!(killer.is_ok(), "starting the killing thread");
    let mut calls = 0u32;
    while BACKGROUND_DONE.load(Ordering::SeqCst) < BACKGROUND_KILLS {
        let st = ok(g.stat("/vr/held.bin"), "stat while killed");
        check!(
            st.size == expect.len() as u64,
            "stat while killed: size {}",
            st.size
        );
        check!(
            names(&mut g, "/vr") == made,
            "readdir while killed lists other names"
        );
        let fd = ok(g.open("/vr/held.bin", O_READ, 0), "open while killed");
        ok(g.close(fd), "close");
        ok(f.statfs("/vr"), "statfs while killed");
        calls += 4;
    }
    println!(
        "vfs-restart: {} path calls while the VFS was killed {} times under them",
        calls, BACKGROUND_KILLS
    );

    ok(g.close(reader), "close");
    ok(f.close(held), "close");
    check!(
        ok(read_file(&mut g, "/vr/held.bin"), "read afresh") == expect,
        "/vr/held.bin read afresh differs"
    );
    ok(f.sync(), "sync");
    println!(
        "vfs-restart: PASS {} rounds, {} kills, {} bytes intact",
        rounds,
        rounds * 2 + BACKGROUND_KILLS,
        expect.len()
    );
}
