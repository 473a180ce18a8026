//! `./sawmill faults [SYSTEM] [--seed S] [--count N]`: the fault-injection campaign (issue 16;
//! docs/ARCHITECTURE.md §4.1, "Fault injection").
//!
//! Boots SYSTEM (default `systems/faults.toml`: ext2 on blk-virtio under the VFS, and the
//! campaign's controller, the server with a `may_inject`) with the controller's arguments filled
//! in: the seed, the first fault, how many, the kinds and the targets — the servers its
//! `may_inject` names whose manifest policy restarts them (a block driver, module `blk-virtio`,
//! also gets the disk kinds). The controller (tests/fs `fault-campaign`) injects one seeded fault
//! per workload round and logs what it did; a boot that hangs (no campaign line for
//! [`HANG_SECS`]) or crashes (the boot ends without root's clean finish) is counted and the
//! campaign boots again from the next fault, on the same disk. Then the host checks the disk
//! image: `e2fsck -fn`, and every file whose content the workload had fsync'd (read from the image
//! with the host's ext2 engine) against its length and content hash. Prints one line per kind
//! and the summary line; the exit status is non-zero when a goal of issue 16 is missed.
//! Touches only target/faults/ (image, disk, exported files), and target/test-logs/ (the logs).

use crate::repo::Repo;
use crate::{guest, image, qemu, scenario};
use sawmill_manifest::faults::Kind;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The kinds a campaign injects unless told otherwise: every kind (an endless loop is ended by
/// root's hang detection, docs/ARCHITECTURE.md §4.1 "Hangs").
pub const DEFAULT_KINDS: [Kind; 7] = sawmill_manifest::faults::ALL;

/// A boot whose log shows no new campaign line for this long (wall clock) is hung.
pub const HANG_SECS: u64 = 15;

/// The share of faults the workload must not notice, per kind of target (issue 16's goals).
const GOAL_DRIVER: f64 = 0.99;
const GOAL_PFS: f64 = 0.90;

/// Boots a campaign may take before it gives up (each hang or crash costs one).
const MAX_BOOTS: usize = 64;

pub struct Options {
    pub system: Option<String>,
    pub seed: u64,
    pub count: u64,
    pub kinds: Vec<Kind>,
}

/// What happened to one injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Recovered,
    Error,
    Hung,
    /// The boot ended without root's clean finish while this fault was the last one.
    Crash,
}

/// One boot's log, as the campaign reads it.
#[derive(Debug, Default, PartialEq)]
pub struct Boot {
    /// Faults announced: (index, kind, target).
    pub injected: Vec<(u64, Kind, String)>,
    /// Faults root refused.
    pub refused: Vec<u64>,
    /// Faults after which a workload step failed.
    pub errors: Vec<u64>,
    /// The workload's record, in order: `Some((len, hash))` when a file's content was fsync'd,
    /// `None` when its old content stopped counting (truncated).
    pub record: Vec<(String, Option<(u64, u64)>)>,
    /// The controller finished (`faults: done`).
    pub done: bool,
    /// Root finished cleanly (`root: all done, success`).
    pub root_done: bool,
}

/// Reads one boot's serial log.
pub fn parse_boot(log: &str) -> Boot {
    let mut b = Boot::default();
    for line in log.lines() {
        if line.starts_with("root: all done, success") {
            b.root_done = true;
        }
        let Some(rest) = line.strip_prefix("faults: ") else {
            continue;
        };
        let f: Vec<&str> = rest.split(' ').collect();
        let num = |k: usize| f.get(k).and_then(|v| v.parse::<u64>().ok());
        match f[0] {
            "inject" => {
                if let (Some(i), Some(kind), Some(t)) =
                    (num(1), f.get(2).and_then(|k| Kind::from_name(k)), f.get(3))
                {
                    b.injected.push((i, kind, t.to_string()));
                }
            }
            "refused" => b.refused.extend(num(1)),
            "error" => b.errors.extend(num(1)),
            "trunc" => {
                if let Some(p) = f.get(1) {
                    b.record.push((p.to_string(), None));
                }
            }
            "synced" => {
                let hash = f.get(3).and_then(|h| u64::from_str_radix(h, 16).ok());
                if let (Some(p), Some(len), Some(hash)) = (f.get(1), num(2), hash) {
                    b.record.push((p.to_string(), Some((len, hash))));
                }
            }
            "done" => b.done = true,
            _ => {}
        }
    }
    b
}

/// Tallies per kind: injected, recovered, errors, hung, crashes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub injected: u64,
    pub recovered: u64,
    pub errors: u64,
    pub hung: u64,
    pub crashes: u64,
}

impl Tally {
    fn add(&mut self, fate: Fate) {
        self.injected += 1;
        match fate {
            Fate::Recovered => self.recovered += 1,
            Fate::Error => self.errors += 1,
            Fate::Hung => self.hung += 1,
            Fate::Crash => self.crashes += 1,
        }
    }
}

/// The campaign's result.
#[derive(Debug, Default)]
pub struct Summary {
    pub total: Tally,
    pub by_kind: BTreeMap<Kind, Tally>,
    /// By target: (tally, whether it is a block driver).
    pub by_target: BTreeMap<String, (Tally, bool)>,
    /// Boots that ended without root's clean finish (not hangs).
    pub crashes: u64,
    pub lost_bytes: u64,
    pub fsck_clean: bool,
    pub refused: u64,
}

impl Summary {
    /// Exactly the line issue 16 names.
    pub fn line(&self) -> String {
        format!(
            "faults: {} injected, {} kernel/root crashes, {} recovered transparently, {} surfaced as errors, {} hung, {} acknowledged bytes lost, fsck {}",
            self.total.injected,
            self.crashes,
            self.total.recovered,
            self.total.errors,
            self.total.hung,
            self.lost_bytes,
            if self.fsck_clean { "clean" } else { "DIRTY" }
        )
    }

    /// Every goal of issue 16 this run missed (empty: all met).
    pub fn missed(&self) -> Vec<String> {
        let mut m = Vec::new();
        if self.crashes != 0 {
            m.push(format!("{} kernel/root crashes (goal 0)", self.crashes));
        }
        if self.total.hung != 0 {
            m.push(format!("{} hung (goal 0)", self.total.hung));
        }
        if self.lost_bytes != 0 {
            m.push(format!(
                "{} acknowledged bytes lost (goal 0)",
                self.lost_bytes
            ));
        }
        if !self.fsck_clean {
            m.push("e2fsck -fn is not clean".into());
        }
        for (name, (t, disk)) in &self.by_target {
            let goal = if *disk { GOAL_DRIVER } else { GOAL_PFS };
            if t.injected > 0 && (t.recovered as f64) < goal * t.injected as f64 {
                m.push(format!(
                    "{name}: {} of {} faults transparent (goal {:.0}%)",
                    t.recovered,
                    t.injected,
                    goal * 100.0
                ));
            }
        }
        if self.total.injected == 0 {
            m.push("no fault was injected".into());
        }
        m
    }
}

/// How one boot ended, as far as the campaign is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The controller finished and root shut down cleanly.
    Clean,
    /// The campaign's watch stopped it: no progress for [`HANG_SECS`].
    Hung,
    /// Anything else: a panic, QEMU's death, a triple fault, root's unclean end.
    Crash,
}

/// Folds one boot into the summary: each announced fault's fate (the last one's decided by how
/// the boot ended), the refusals, and the workload's record into `files`. Returns the index
/// after the last fault announced (where the next boot resumes), if any was.
pub fn fold_boot(
    s: &mut Summary,
    b: &Boot,
    ending: Ending,
    disk_targets: &[String],
    files: &mut BTreeMap<String, (u64, u64)>,
) -> Option<u64> {
    let last = b.injected.last().map(|l| l.0);
    for (i, kind, target) in &b.injected {
        if b.refused.contains(i) {
            s.refused += 1;
            continue;
        }
        let fate = if Some(*i) == last && ending == Ending::Hung {
            Fate::Hung
        } else if Some(*i) == last && ending == Ending::Crash {
            Fate::Crash
        } else if b.errors.contains(i) {
            Fate::Error
        } else {
            Fate::Recovered
        };
        s.total.add(fate);
        s.by_kind.entry(*kind).or_default().add(fate);
        let e = s
            .by_target
            .entry(target.clone())
            .or_insert((Tally::default(), disk_targets.contains(target)));
        e.0.add(fate);
    }
    if ending == Ending::Crash {
        s.crashes += 1;
    }
    for (path, what) in &b.record {
        match what {
            Some(v) => {
                files.insert(path.clone(), *v);
            }
            None => {
                files.remove(path);
            }
        }
    }
    last.map(|l| l + 1)
}

/// FNV-1a, 64 bits: the workload's content hash.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Acknowledged bytes missing from the exported tree `dir`: the length of every recorded file
/// that is absent or differs (its whole content counts: which bytes differ is not recorded).
pub fn lost_bytes(dir: &Path, files: &BTreeMap<String, (u64, u64)>) -> (u64, Vec<String>) {
    let mut lost = 0;
    let mut why = Vec::new();
    for (path, &(len, hash)) in files {
        let got = std::fs::read(dir.join(path.trim_start_matches('/')));
        match got {
            Ok(b) if b.len() as u64 == len && fnv1a(&b) == hash => {}
            Ok(b) => {
                lost += len;
                why.push(format!(
                    "{path}: {} bytes, hash {:016x}; fsync'd {len} bytes, hash {hash:016x}",
                    b.len(),
                    fnv1a(&b)
                ));
            }
            Err(e) => {
                lost += len;
                why.push(format!("{path}: fsync'd {len} bytes, now {e}"));
            }
        }
    }
    (lost, why)
}

/// The per-kind line.
pub fn kind_line(kind: Kind, t: &Tally) -> String {
    format!(
        "faults: {:<8} {} injected, {} recovered, {} errors, {} hung, {} crashes",
        format!("{}:", kind.name()),
        t.injected,
        t.recovered,
        t.errors,
        t.hung,
        t.crashes
    )
}

/// Reads a summary line back: (injected, crashes, recovered, errors, hung, lost bytes, clean).
/// The unit tests' check that the line says what the summary holds.
#[cfg(test)]
pub fn parse_summary(text: &str) -> Option<(u64, u64, u64, u64, u64, u64, bool)> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("faults: ") && l.contains(" acknowledged bytes lost"))?;
    let nums: Vec<u64> = line
        .split([' ', ','])
        .filter_map(|w| w.parse().ok())
        .collect();
    if nums.len() != 6 {
        return None;
    }
    let clean = line.ends_with("fsck clean");
    if !clean && !line.ends_with("fsck DIRTY") {
        return None;
    }
    Some((nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], clean))
}

/// Runs the campaign; prints as it goes. `Ok(summary)` whatever the goals say.
pub fn campaign(repo: &Repo, o: &Options) -> Result<Summary, String> {
    let path = repo.resolve_system(o.system.as_deref().unwrap_or("faults"))?;
    let mut mf = image::load(&path)?;
    let spec = scenario::parse(mf.test.as_ref())?;
    let sys = &mf.system;
    let ctl = sys
        .servers
        .iter()
        .position(|s| !s.may_inject.is_empty())
        .ok_or_else(|| format!("{}: no server has a `may_inject`", path.display()))?;
    let targets: Vec<&sawmill_manifest::Server> = sys.servers[ctl]
        .may_inject
        .iter()
        .filter_map(|n| sys.servers.iter().find(|s| s.name == *n))
        .filter(|s| s.restart.restarts())
        .collect();
    if targets.is_empty() {
        return Err(format!(
            "{}: none of the servers `{}` may inject faults into restarts (manifest `restart`)",
            path.display(),
            sys.servers[ctl].name
        ));
    }
    let disk_targets: Vec<String> = targets
        .iter()
        .filter(|s| s.module == "blk-virtio")
        .map(|s| s.name.clone())
        .collect();
    let target_arg = targets
        .iter()
        .map(|s| {
            if disk_targets.contains(&s.name) {
                format!("{}:disk", s.name)
            } else {
                s.name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let kinds_arg = o
        .kinds
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "faults: {} faults, seed {}, kinds {}, targets {}",
        o.count, o.seed, kinds_arg, target_arg
    );
    guest::build(repo)?;
    let dir = repo.target().join("faults");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let disks = scenario::disk::prepare_disks(&repo.root, &dir, "campaign", &spec.disks)?;
    let disk = disks
        .first()
        .ok_or_else(|| format!("{}: the system has no [test] disk", path.display()))?
        .clone();
    let logs = repo.target().join("test-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let img = dir.join("faults.img");
    let mut summary = Summary::default();
    let mut files = BTreeMap::new();
    let mut next = 0;
    let mut boots = 0;
    while next < o.count {
        if boots == MAX_BOOTS {
            return Err(format!(
                "gave up after {MAX_BOOTS} boots at fault {next} of {}",
                o.count
            ));
        }
        boots += 1;
        mf.system.servers[ctl].args = vec![
            o.seed.to_string(),
            next.to_string(),
            (o.count - next).to_string(),
            kinds_arg.clone(),
            target_arg.clone(),
        ];
        image::write_image(repo, &mf.system, &img)?;
        let log = logs.join(format!("faults-boot{boots}.log"));
        let _ = std::fs::remove_file(&log);
        let mut extra = scenario::disk::qemu_args(std::slice::from_ref(&disk));
        extra.extend(spec.qemu_args.iter().cloned());
        let cfg = qemu::Config {
            image: img.clone(),
            memory: spec.memory.clone(),
            icount: false,
            extra,
            serial_log: Some(log.clone()),
            com2: qemu::Com2::None,
        };
        let (mut lines, mut since) = (0usize, Instant::now());
        let mut watch = || {
            let text = std::fs::read(&log).ok()?;
            let n = text
                .split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"faults: "))
                .count();
            if n != lines {
                (lines, since) = (n, Instant::now());
            }
            (since.elapsed() >= Duration::from_secs(HANG_SECS))
                .then(|| format!("{}no progress for {HANG_SECS}s", qemu::KILL_NOW))
        };
        let outcome = qemu::run(
            &cfg,
            Duration::from_secs(spec.timeout),
            Some(&logs.join(format!("faults-boot{boots}.qemu.log"))),
            Some(&mut watch),
        )?;
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
        let b = parse_boot(&text);
        let ending = match outcome {
            qemu::Outcome::Guest(0) if b.done && b.root_done => Ending::Clean,
            qemu::Outcome::Stopped(_) | qemu::Outcome::Timeout(_) => Ending::Hung,
            _ => Ending::Crash,
        };
        let resume = fold_boot(&mut summary, &b, ending, &disk_targets, &mut files);
        if ending == Ending::Clean {
            break;
        }
        println!(
            "faults: boot {boots} {} ({}) at fault {}; log {}",
            if ending == Ending::Hung {
                "hung"
            } else {
                "crashed"
            },
            outcome.describe(),
            resume.map_or("none".to_string(), |r| (r - 1).to_string()),
            log.display()
        );
        match resume {
            Some(r) if r > next => next = r,
            _ => {
                return Err(format!(
                    "boot {boots} ended before injecting a fault ({}); log {}",
                    outcome.describe(),
                    log.display()
                ))
            }
        }
    }
    // The disk: e2fsck, then every fsync'd byte from the image itself.
    let fsck = std::process::Command::new("e2fsck")
        .arg("-fn")
        .arg(&disk)
        .output()
        .map_err(|e| format!("cannot run e2fsck: {e}"))?;
    summary.fsck_clean = fsck.status.success();
    if !summary.fsck_clean {
        let out = String::from_utf8_lossy(&fsck.stdout).into_owned();
        for l in out.lines().take(12) {
            println!("faults: e2fsck: {l}");
        }
    }
    let export = dir.join("export");
    let _ = std::fs::remove_dir_all(&export);
    let mut sink = Vec::new();
    let args = vec![
        "export".to_string(),
        disk.display().to_string(),
        export.display().to_string(),
    ];
    if crate::ext2cmd::run_to(&args, &mut sink) != 0 {
        println!(
            "faults: reading the image failed: {}",
            String::from_utf8_lossy(&sink).trim()
        );
        summary.lost_bytes = files.values().map(|v| v.0).sum();
    } else {
        let (lost, why) = lost_bytes(&export, &files);
        summary.lost_bytes = lost;
        for w in why.iter().take(12) {
            println!("faults: lost: {w}");
        }
    }
    let _ = std::fs::remove_dir_all(&export);
    println!(
        "faults: {} files checked on the disk image, {} boots",
        files.len(),
        boots
    );
    Ok(summary)
}

/// The long campaign of `make bench` (`./sawmill bench --only faults`): as many faults as fit
/// in about 3 minutes of TCG on a quiet machine (10 to 20 a second).
pub const BENCH_COUNT: u64 = 3000;

/// `make bench`'s campaign: its lines, then the figures `faults.*` (bench/README.md, "Faults").
/// An error when a goal is missed, after the figures.
pub fn bench(repo: &Repo) -> Result<Vec<crate::bench::Metric>, String> {
    let o = Options {
        system: None,
        seed: 1,
        count: BENCH_COUNT,
        kinds: DEFAULT_KINDS.to_vec(),
    };
    let s = campaign(repo, &o)?;
    let missed = report(&s, Instant::now());
    let m = |name: &str, unit: &str, value: u64| crate::bench::Metric {
        name: format!("faults.{name}"),
        unit: unit.into(),
        value: value as f64,
    };
    let figures = vec![
        m("injected", "faults", s.total.injected),
        m("recovered", "faults", s.total.recovered),
        m("errors", "faults", s.total.errors),
        m("hung", "faults", s.total.hung),
        m("lost_bytes", "bytes", s.lost_bytes),
        m("crashes", "boots", s.crashes),
    ];
    if missed.is_empty() {
        Ok(figures)
    } else {
        for f in &figures {
            println!("  {:<40} {:>14.1} {}", f.name, f.value, f.unit);
        }
        Err(format!("goals missed: {}", missed.join("; ")))
    }
}

/// `./sawmill faults`: the campaign, its lines and the summary; 0 when every goal is met.
pub fn run(repo: &Repo, o: &Options) -> i32 {
    let start = Instant::now();
    let s = match campaign(repo, o) {
        Ok(s) => s,
        Err(e) => {
            println!("faults: FAIL {e}");
            return 1;
        }
    };
    i32::from(!report(&s, start).is_empty())
}

/// Prints the per-kind and per-target lines, the summary line and the goals missed (returned).
fn report(s: &Summary, start: Instant) -> Vec<String> {
    for (k, t) in &s.by_kind {
        println!("{}", kind_line(*k, t));
    }
    for (name, (t, disk)) in &s.by_target {
        println!(
            "faults: target {name} ({}): {} injected, {} recovered",
            if *disk { "block driver" } else { "server" },
            t.injected,
            t.recovered
        );
    }
    if s.refused > 0 {
        println!("faults: {} refused by root", s.refused);
    }
    println!("{}", s.line());
    let missed = s.missed();
    for m in &missed {
        println!("faults: goal missed: {m}");
    }
    println!(
        "faults: {:.1}s, {}",
        start.elapsed().as_secs_f64(),
        if missed.is_empty() {
            "every goal met"
        } else {
            "goals missed"
        }
    );
    missed
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "root: starting system 'faults' (6 servers)\n\
faults: campaign seed 1 faults 0..3 (6 kinds, 1 targets)\n\
faults: inject 0 kill blk0 at 0\n\
faults: trunc /fault-0.bin\n\
faults: synced /fault-0.bin 32768 00000000000000ff\n\
faults: inject 1 eio blk0 at 2\n\
faults: trunc /fault-1.bin\n\
faults: error 1 fsync: Io\n\
faults: inject 2 panic blk0 at 1\n\
faults: refused 2\n\
faults: trunc /fault-0.bin\n\
faults: synced /fault-0.bin 32768 0000000000000abc\n\
faults: done 3\n\
root: all done, success\n";

    #[test]
    fn reads_a_boot() {
        let b = parse_boot(LOG);
        assert_eq!(
            b.injected,
            vec![
                (0, Kind::Kill, "blk0".to_string()),
                (1, Kind::Eio, "blk0".to_string()),
                (2, Kind::Panic, "blk0".to_string())
            ]
        );
        assert_eq!(b.errors, vec![1]);
        assert_eq!(b.refused, vec![2]);
        assert!(b.done && b.root_done);
        assert_eq!(b.record.len(), 5);
        assert_eq!(
            b.record[1],
            ("/fault-0.bin".to_string(), Some((32768, 0xff)))
        );
    }

    #[test]
    fn folds_fates_and_the_record() {
        let mut s = Summary::default();
        let mut files = BTreeMap::new();
        let disk = vec!["blk0".to_string()];
        let r = fold_boot(&mut s, &parse_boot(LOG), Ending::Clean, &disk, &mut files);
        assert_eq!(r, Some(3));
        assert_eq!(s.total.injected, 2, "the refused one is not injected");
        assert_eq!((s.total.recovered, s.total.errors), (1, 1));
        assert_eq!(s.refused, 1);
        assert_eq!(s.by_kind[&Kind::Eio].errors, 1);
        assert!(s.by_target["blk0"].1, "blk0 is a block driver");
        // The file's last fsync'd content counts; the truncated-and-failed one does not.
        assert_eq!(files.len(), 1);
        assert_eq!(files["/fault-0.bin"], (32768, 0xabc));
        // A boot that hangs: its last fault is the hung one; one that crashes counts a crash.
        let hung = "faults: inject 7 loop blk0 at 1\nfaults: trunc /fault-0.bin\n";
        let r = fold_boot(&mut s, &parse_boot(hung), Ending::Hung, &disk, &mut files);
        assert_eq!(r, Some(8));
        assert_eq!(s.total.hung, 1);
        assert!(files.is_empty());
        let r = fold_boot(&mut s, &parse_boot(hung), Ending::Crash, &disk, &mut files);
        assert_eq!(r, Some(8));
        assert_eq!((s.crashes, s.total.crashes), (1, 1));
        assert_eq!(
            fold_boot(&mut s, &parse_boot(""), Ending::Crash, &disk, &mut files),
            None
        );
    }

    #[test]
    fn summary_line_goals_and_parser() {
        let mut s = Summary {
            fsck_clean: true,
            ..Summary::default()
        };
        let mut t = (Tally::default(), true);
        for _ in 0..100 {
            t.0.add(Fate::Recovered);
            s.total.add(Fate::Recovered);
        }
        s.by_target.insert("blk0".into(), t);
        assert!(s.missed().is_empty(), "{:?}", s.missed());
        let line = s.line();
        assert_eq!(
            line,
            "faults: 100 injected, 0 kernel/root crashes, 100 recovered transparently, 0 surfaced as errors, 0 hung, 0 acknowledged bytes lost, fsck clean"
        );
        assert_eq!(
            parse_summary(&format!("x\n{line}\nfaults: 3.0s\n")),
            Some((100, 0, 100, 0, 0, 0, true))
        );
        // One error in 100 driver faults is 99%: still met; two are not.
        s.by_target.get_mut("blk0").unwrap().0.recovered = 98;
        assert_eq!(s.missed().len(), 1);
        s.by_target.insert(
            "pfs0".into(),
            (
                Tally {
                    injected: 10,
                    recovered: 9,
                    ..Tally::default()
                },
                false,
            ),
        );
        assert_eq!(s.missed().len(), 1, "90% of PFS faults is the goal");
        s.lost_bytes = 5;
        s.fsck_clean = false;
        s.crashes = 1;
        assert_eq!(s.missed().len(), 4);
        assert!(s.line().ends_with("5 acknowledged bytes lost, fsck DIRTY"));
        assert_eq!(
            parse_summary(&s.line()),
            Some((100, 1, 100, 0, 0, 5, false))
        );
        assert_eq!(parse_summary("faults: nonsense"), None);
    }

    #[test]
    fn lost_bytes_compares_content() {
        let dir = std::env::temp_dir().join(format!("sawmill-faults-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), b"hello").unwrap();
        std::fs::write(dir.join("b"), b"hellO").unwrap();
        let mut files = BTreeMap::new();
        files.insert("/a".to_string(), (5, fnv1a(b"hello")));
        files.insert("/b".to_string(), (5, fnv1a(b"hello")));
        files.insert("/c".to_string(), (7, 0));
        let (lost, why) = lost_bytes(&dir, &files);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(lost, 12);
        assert_eq!(why.len(), 2);
    }
}
