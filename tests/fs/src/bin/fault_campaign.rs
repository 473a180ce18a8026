//! The controller and workload of the fault-injection campaign (issue 16, `./sawmill faults`;
//! docs/ARCHITECTURE.md §4.1): one round per planned fault — a file written in two halves,
//! fsync'd, closed, then files read back and checked by content hash — with the round's fault
//! injected at the point of the round the seeded plan (`sawmill_manifest::faults::planned`)
//! names. Every step that fails is reported and the campaign goes on; the host tool reads the log
//! and then the disk image.
//!
//! Lines for the host (`faults: ...`, parsed by tools/sawmill/src/faults.rs):
//! `inject I KIND TARGET` before fault I is asked for, `refused I` if root refused it,
//! `error I STEP WHY` for a failed step, `trunc PATH` when a file's old content stops counting,
//! `synced PATH LEN HASH` once its new content is fsync'd, `done I` at the end.
//!
//! Arguments: seed, first fault index, count, kinds (comma-separated names), targets
//! (comma-separated server names, `:disk` after a block driver). May touch: the VFS (`vfs`) and
//! root's fault-injection request on `sys:pager` (manifest `may_inject`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use sawmill_abi::MsgTag;
use sawmill_fsclient::{Files, O_CREATE, O_READ, O_TRUNC, O_WRITE};
use sawmill_manifest::faults::{self, Kind, Target};
use sawmill_rt::{env, ipc, println, slots};

sawmill_rt::entry!(main);

/// Bytes per file, and how many files the workload cycles through: together more than the PFS's
/// cache in the campaign system, so reading an older file back goes to the disk.
const FILE_BYTES: usize = 32 * 1024;
const SLOTS: u64 = 12;

/// Asks root to inject `kind` into `target` with argument `arg`: true if root did.
fn inject(target: &str, kind: Kind, arg: u64) -> bool {
    let mut name = [0u8; 16];
    let n = target.len().min(16);
    name[..n].copy_from_slice(&target.as_bytes()[..n]);
    let w = [
        u64::from_le_bytes(name[..8].try_into().unwrap_or([0; 8])),
        u64::from_le_bytes(name[8..].try_into().unwrap_or([0; 8])),
        kind as u64,
        arg,
    ];
    let r = ipc::call(slots::PAGER, MsgTag::new(faults::INJECT_LABEL, 4), w);
    r.err == 0 && r.tag.label() == 0
}

/// FNV-1a, 64 bits (the host checks the image with the same hash).
fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn content(i: u64) -> Vec<u8> {
    (0..FILE_BYTES)
        .map(|k| {
            (k as u64).wrapping_mul(31).wrapping_add(i.wrapping_mul(97)) as u8 ^ (i >> 8) as u8
        })
        .collect()
}

fn read_all(f: &mut Files, path: &str) -> Result<Vec<u8>, sawmill_fsclient::Error> {
    let fd = f.open(path, O_READ, 0)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let r = loop {
        match f.read(fd, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    let _ = f.close(fd);
    r.map(|_| out)
}

/// One round: fault `i` injected at its moment into the round's work. Errors are reported with
/// the step they ended; the caller goes on with the next round.
fn round(
    f: &mut Files,
    i: u64,
    p: &faults::Planned,
    target: &str,
    written: &mut [Option<u64>],
) -> Result<(), (&'static str, sawmill_fsclient::Error)> {
    let fire = |at: u32| {
        if p.moment == at && !inject(target, p.kind, p.arg) {
            println!("faults: refused {}", i);
        }
    };
    let slot = (i % SLOTS) as usize;
    let path = format!("/fault-{}.bin", slot);
    let data = content(i);
    fire(0);
    written[slot] = None;
    println!("faults: trunc {}", path);
    let fd = f
        .open(&path, O_WRITE | O_CREATE | O_TRUNC, 0o644)
        .map_err(|e| ("open", e))?;
    let half = FILE_BYTES / 2;
    let r = (|| {
        f.write(fd, &data[..half]).map_err(|e| ("write", e))?;
        fire(1);
        f.write(fd, &data[half..]).map_err(|e| ("write", e))?;
        fire(2);
        f.fsync(fd).map_err(|e| ("fsync", e))
    })();
    let closed = f.close(fd).map_err(|e| ("close", e));
    r?;
    closed?;
    println!(
        "faults: synced {} {} {:016x}",
        path,
        FILE_BYTES,
        hash(&data)
    );
    written[slot] = Some(i);
    fire(3);
    // The file just written, and the oldest one this boot wrote (mostly not cached any more).
    let older = ((i + 1) % SLOTS) as usize;
    for s in [slot, older] {
        let Some(w) = written[s] else { continue };
        let p = format!("/fault-{}.bin", s);
        let got = read_all(f, &p).map_err(|e| ("read", e))?;
        let want = content(w);
        if got.len() != want.len() || hash(&got) != hash(&want) {
            println!(
                "faults: error {} check {}: read back {} bytes, hash {:016x}, want {:016x}",
                i,
                p,
                got.len(),
                hash(&got),
                hash(&want)
            );
        }
    }
    // A sync reaches the driver whatever the cache holds: the round's fault has met a request
    // before the next is armed.
    f.sync().map_err(|e| ("sync", e))
}

fn main() {
    let num = |k: usize| env::arg(k).and_then(|a| a.parse::<u64>().ok());
    let (Some(seed), Some(first), Some(count)) = (num(0), num(1), num(2)) else {
        println!("faults: FAIL arguments: seed first count kinds targets");
        sawmill_rt::exit(1);
    };
    let kinds: Vec<Kind> = env::arg(3)
        .unwrap_or("")
        .split(',')
        .filter_map(Kind::from_name)
        .collect();
    let targets: Vec<Target> = env::arg(4)
        .unwrap_or("")
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| match t.strip_suffix(":disk") {
            Some(name) => Target { name, disk: true },
            None => Target {
                name: t,
                disk: false,
            },
        })
        .collect();
    let mut f = sawmill_fstests::files().with_redo();
    f.protocol = sawmill_fsclient::Protocol::Vfs;
    let mut written = [None; SLOTS as usize];
    // The stack is up before the first fault: a fault during the PFS's own start (its first
    // call to the driver) is not what the campaign measures.
    if let Err(e) = f.sync() {
        println!("faults: FAIL the file system is not up: {:?}", e);
        sawmill_rt::exit(1);
    }
    println!(
        "faults: campaign seed {} faults {}..{} ({} kinds, {} targets)",
        seed,
        first,
        first + count,
        kinds.len(),
        targets.len()
    );
    for i in first..first + count {
        let Some(p) = faults::planned(seed, i, &targets, &kinds) else {
            println!("faults: FAIL no fault fits the targets");
            sawmill_rt::exit(1);
        };
        let target = targets[p.target].name;
        println!(
            "faults: inject {} {} {} at {}",
            i,
            p.kind.name(),
            target,
            p.moment
        );
        if let Err((step, e)) = round(&mut f, i, &p, target, &mut written) {
            println!("faults: error {} {}: {:?}", i, step, e);
        }
    }
    if let Err(e) = f.sync() {
        println!("faults: error {} sync: {:?}", first + count, e);
    }
    println!("faults: done {}", first + count);
}
