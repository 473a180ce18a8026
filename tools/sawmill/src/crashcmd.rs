//! `./sawmill crash`: the crash-consistency test of issue 16 ("kill QEMU, not a server";
//! docs/filesystem.md, "Crash consistency"). Boots the Linux system with the workload
//! (tests/crash/workload.c) as its first process on a small ext2 image, QEMU's `blklogwrites`
//! driver recording every write and flush the guest's virtio-blk device completes (host side:
//! nothing in the guest's disk path changes), then replays the log (`crash`) to every flush
//! and to sampled points between flushes, and checks each: `e2fsck -fy` repairs it (exit 0 or
//! 1: ext2 has no journal), `e2fsck -fn` is then clean, and every state the workload's fsyncs
//! acknowledged is there, read with our own engine. Prints one summary line; fails on any lost
//! fsync'd byte or unrepairable image. Touches: target/crash/ (the images, the log, the
//! workload's output), QEMU, musl-gcc, e2fsck.

use crate::crash::{self, Figures, Kind};
use crate::linux::{self, Boot, Process, Terminal};
use crate::repo::Repo;
use crate::rootfs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The workload, relative to the repository; installed in the image as [`WORKLOAD_AT`].
pub const WORKLOAD_SRC: &str = "tests/crash/workload.c";
const WORKLOAD_AT: &str = "crash/workload";
/// The disk: one 8 MiB block group with 4 KiB blocks (the Linux root image's block size), so a
/// crash point is quick to write out and check.
const IMAGE_MB: u64 = 8;
/// The boot's hard timeout (the workload takes seconds; TCG on a busy machine, more).
const BOOT_TIMEOUT: Duration = Duration::from_secs(300);
pub struct Options {
    /// At most this many crash points between two flushes (spread over the batch's writes);
    /// `None`: after every write (the workload's ~150 writes take seconds to check).
    pub samples: Option<usize>,
    pub no_build: bool,
}

/// QEMU arguments attaching `img` as the virtio-blk disk at PCI slot 4 (where
/// `scenario::disk::qemu_args` puts disk 0) with every request logged to `log` (which must
/// exist, empty): `file` nodes for both, the `blklogwrites` node between them and the device.
/// The device's write cache is on, so the guest's flushes reach the log; the host files skip
/// the real `fsync` (`cache.no-flush`, as `cache=unsafe` does for the other disks). The super
/// block's entry count is rewritten after every entry, so a log cut short still says how far
/// it is whole.
pub fn logged_disk_args(img: &Path, log: &Path) -> Vec<String> {
    [
        "-nic".to_string(),
        "none".to_string(),
        "-blockdev".to_string(),
        format!(
            "driver=file,node-name=crashimg,filename={},cache.no-flush=on",
            img.display()
        ),
        "-blockdev".to_string(),
        format!(
            "driver=file,node-name=crashlog,filename={},cache.no-flush=on",
            log.display()
        ),
        "-blockdev".to_string(),
        "driver=blklogwrites,node-name=d0,file=crashimg,log=crashlog,log-sector-size=512,\
         log-super-update-interval=1"
            .to_string(),
        "-device".to_string(),
        "virtio-blk-pci,drive=d0,addr=0x4,write-cache=on".to_string(),
    ]
    .to_vec()
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Builds the workload and the image it runs on (`base`).
fn prepare(repo: &Repo, dir: &Path, base: &Path) -> Result<(), String> {
    let stage = dir.join("stage");
    let _ = std::fs::remove_dir_all(&stage);
    let bin = stage.join(WORKLOAD_AT);
    std::fs::create_dir_all(bin.parent().unwrap()).map_err(io(&stage))?;
    let out = Command::new("musl-gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(repo.root.join(WORKLOAD_SRC))
        .output()
        .map_err(|e| format!("musl-gcc: {e} (apt-get install musl-tools)"))?;
    if !out.status.success() {
        return Err(format!(
            "musl-gcc {WORKLOAD_SRC}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let r = rootfs::image_from_stage(&stage, base, IMAGE_MB);
    let _ = std::fs::remove_dir_all(&stage);
    r
}

/// Runs `e2fsck` with `flag` on `img`: its exit status and what it said.
fn e2fsck(flag: &str, img: &Path) -> Result<(i32, String), String> {
    let out = Command::new("e2fsck")
        .arg(flag)
        .arg(img)
        .output()
        .map_err(|e| format!("e2fsck: {e} (apt-get install e2fsprogs)"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.code().unwrap_or(-1), text))
}

/// A file's contents in the (repaired) image; `None` if the path does not exist.
fn contents(img: &mut crate::ext2cmd::Image, path: &str) -> Result<Option<Vec<u8>>, String> {
    let ino = match img.resolve_path(path.as_bytes(), false) {
        Ok(i) => i,
        Err(sawmill_ext2::Error::NotFound) => return Ok(None),
        Err(e) => return Err(format!("{path}: {e}")),
    };
    let mut data = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = img
            .read(ino, data.len() as u64, &mut buf)
            .map_err(|e| format!("{path}: {e}"))?;
        if n == 0 {
            return Ok(Some(data));
        }
        data.extend_from_slice(&buf[..n]);
    }
}

/// The last lines of e2fsck's report, for a failure message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(6)..].join("\n      ")
}

/// Boots, replays and checks; `Err` for a run that could not be judged at all.
pub fn run(repo: &Repo, o: &Options) -> Result<Figures, String> {
    linux::available(repo)?;
    if !o.no_build {
        crate::guest::build(repo)?;
    }
    let dir = repo.target().join("crash");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let (base, disk, log, out, debug) = (
        dir.join("base.img"),
        dir.join("disk.img"),
        dir.join("writes.log"),
        dir.join("workload.out"),
        dir.join("debug.log"),
    );
    prepare(repo, &dir, &base)?;
    std::fs::copy(&base, &disk).map_err(io(&disk))?;
    std::fs::write(&log, b"").map_err(io(&log))?;
    let _ = std::fs::remove_file(&out);

    // 1. The run, every request the disk completes logged.
    let started = Instant::now();
    let b = Boot {
        tag: "crash".into(),
        disk: disk.clone(),
        process: Process {
            argv: vec![format!("/{WORKLOAD_AT}")],
            env: linux::DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            trace: false,
            no_echo: true,
        },
        terminal: Terminal::Piped {
            input: Vec::new(),
            output: out.clone(),
        },
        log: debug.clone(),
        show_log: false,
        timeout: BOOT_TIMEOUT,
        icount: false,
        net: Vec::new(),
    };
    let booted = linux::boot_with_disk(repo, &b, logged_disk_args(&disk, &log), &mut || None);
    let text = String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned();
    match booted.ending {
        Ok(linux::Ending::Exited(0)) => {}
        Ok(e) => {
            return Err(format!(
                "the workload: {} ({}; its output in {})",
                linux::describe(e),
                text.lines().rfind(|l| l.contains("error")).unwrap_or(""),
                out.display()
            ))
        }
        Err(e) => return Err(format!("{e} (debug console: {})", debug.display())),
    }
    let record = crash::parse_record(&text)?;

    // 2. The log, checked against the image QEMU wrote: replaying all of it onto the image as
    //    it was must give the image as it is (a parse or replay bug cannot hide).
    let raw = std::fs::read(&log).map_err(io(&log))?;
    let wlog = crash::parse_log(&raw)?;
    let before = std::fs::read(&base).map_err(io(&base))?;
    let after = std::fs::read(&disk).map_err(io(&disk))?;
    let mut whole = before.clone();
    wlog.apply(&raw, &mut whole, 0..wlog.entries.len())?;
    if whole != after {
        return Err(format!(
            "replaying all of {} onto {} does not give {}",
            log.display(),
            base.display(),
            disk.display()
        ));
    }
    let flushes = wlog.flushes().len();
    let acks = wlog.ack_flushes(&raw, record.fsyncs)?;
    let writes = wlog.entries.iter().filter(|e| e.changes()).count();
    println!(
        "crash: the workload ran in {:.1} s: {} fsyncs, {} record lines; the log: {} entries, \
         {writes} writes, {flushes} flushes, fsyncs acknowledged by flushes {}..={}",
        started.elapsed().as_secs_f64(),
        record.fsyncs,
        record.lines.len(),
        wlog.entries.len(),
        acks.first().copied().unwrap_or(0),
        acks.last().copied().unwrap_or(0)
    );

    // 3. Every crash point, in log order (the image is built up as we go).
    let points = crash::crash_points(&wlog, o.samples.unwrap_or(usize::MAX));
    let point_img = dir.join("point.img");
    let mut image = before;
    let mut applied = 0usize;
    let mut f = Figures::default();
    let mut kept_one = false;
    for (i, p) in points.iter().enumerate() {
        wlog.apply(&raw, &mut image, applied..p.entries)?;
        applied = p.entries;
        match p.kind {
            Kind::AtFlush => f.at_flush += 1,
            Kind::Between => f.between += 1,
        }
        let what = format!(
            "point {i} ({} entries, {} flushes, {})",
            p.entries,
            p.flushes,
            if p.kind == Kind::AtFlush {
                "at a flush"
            } else {
                "between flushes"
            }
        );
        std::fs::write(&point_img, &image).map_err(io(&point_img))?;
        let mut keep = false;
        let (fy, fy_text) = e2fsck("-fy", &point_img)?;
        match fy {
            0 => {}
            1 => {
                f.repaired += 1;
                f.repaired_at_flush += usize::from(p.kind == Kind::AtFlush);
            }
            n => {
                f.unrepairable += 1;
                keep = true;
                println!(
                    "crash: {what}: e2fsck -fy exit {n}:\n      {}",
                    tail(&fy_text)
                );
            }
        }
        if fy <= 1 {
            let (fn_, fn_text) = e2fsck("-fn", &point_img)?;
            if fn_ != 0 {
                f.unrepairable += 1;
                keep = true;
                println!(
                    "crash: {what}: e2fsck -fn exit {fn_} after the repair:\n      {}",
                    tail(&fn_text)
                );
            }
        }
        // What the fsyncs acknowledged, read after the repair (what a rebooted machine sees).
        let mut lost = Vec::new();
        match crate::ext2cmd::open_image(&point_img.display().to_string(), false) {
            Err(e) => lost.push(format!("the image does not mount: {e}")),
            Ok(mut img) => {
                for e in crash::expectations(&record, &acks, p.flushes) {
                    match contents(&mut img, &e.path) {
                        Err(err) => lost.push(err),
                        Ok(found) if crash::satisfies(&e, found.as_deref()) => {}
                        Ok(found) => lost.push(format!(
                            "{}: want {}{}, found {}",
                            e.path,
                            e.state,
                            e.next
                                .as_ref()
                                .map(|n| format!(" (or, in flight, {n})"))
                                .unwrap_or_default(),
                            match found {
                                None => crash::State::Absent,
                                Some(b) => crash::State::Content {
                                    len: b.len() as u64,
                                    hash: crate::scenario::disk::fnv64(&b),
                                },
                            }
                        )),
                    }
                }
            }
        }
        if !lost.is_empty() {
            f.lost += 1;
            keep = true;
            println!("crash: {what}: LOST\n      {}", lost.join("\n      "));
        }
        // The first bad point's image stays for a look (its prefix, before the repair).
        if keep && !kept_one {
            kept_one = true;
            let bad = dir.join("first-bad.img");
            let mut prefix = std::fs::read(&base).map_err(io(&base))?;
            wlog.apply(&raw, &mut prefix, 0..p.entries)?;
            std::fs::write(&bad, prefix).map_err(io(&bad))?;
            println!(
                "crash: {what}: its image (before e2fsck) is {}",
                bad.display()
            );
        }
    }
    let _ = std::fs::remove_file(&point_img);
    Ok(f)
}

/// `./sawmill crash`: prints the figures and the summary line; status 1 if anything was lost or
/// could not be repaired, or the run could not be judged.
pub fn main(repo: &Repo, o: &Options) -> i32 {
    match run(repo, o) {
        Ok(f) => {
            println!("{}", f.summary());
            i32::from(f.lost != 0 || f.unrepairable != 0)
        }
        Err(e) => {
            println!("crash: {e}");
            println!("crash: FAILED (no figures)");
            1
        }
    }
}

/// `make bench`'s figures (`crash.points`, `crash.repaired`: crash points checked, and how many
/// `e2fsck -fy` had to repair; the fewer, the better the PFS orders its writes). A run that lost
/// a byte or left an image unrepairable is a failure, not a figure. The guests must be built.
pub fn bench_metrics(repo: &Repo) -> Result<Vec<crate::bench::Metric>, String> {
    let f = run(
        repo,
        &Options {
            samples: None,
            no_build: true,
        },
    )?;
    println!("{}", f.summary());
    if f.lost != 0 || f.unrepairable != 0 {
        return Err(f.summary());
    }
    let m = |name: &str, value: usize| crate::bench::Metric {
        name: name.into(),
        unit: "points".into(),
        value: value as f64,
    };
    Ok(vec![
        m("crash.points", f.at_flush + f.between),
        m("crash.repaired", f.repaired),
    ])
}
