//! `./sawmill bench`: boots every `systems/bench*.toml` under `-icount shift=0` (TCG, `-cpu
//! qemu64`), so guest `rdtsc` counts executed guest instructions, collects their `BENCH <name>
//! <value> <unit>` lines, runs the same kind of measurements on Linux in the same emulator
//! ([`linux`]), and writes the report ([`report`]) to target/bench/.

pub mod boot;
pub mod linux;
pub mod linuxabi;
pub mod net;
pub mod report;

use crate::qemu::{self, Outcome};
use crate::repo::Repo;
use crate::{guest, image, scenario};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// One benchmark figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: String,
    pub unit: String,
    pub value: f64,
}

/// Hard limit for the sawmill benchmark boot unless its manifest's `[test] timeout` says more.
const DEFAULT_TIMEOUT: u64 = 600;

fn step(k: usize, n: usize, what: &str) {
    println!("[{k}/{n}] {what}");
    let _ = std::io::stdout().flush();
}

/// The benchmark systems: `systems/bench*.toml`, sorted.
fn bench_systems(repo: &Repo) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo.root.join("systems"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("bench") && n.ends_with(".toml"))
                .map(|n| n.trim_end_matches(".toml").to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Builds and boots one benchmark system; returns its metrics.
fn sawmill_figures(
    repo: &Repo,
    out_dir: &Path,
    name: &str,
    k: usize,
    steps: usize,
) -> Result<Vec<Metric>, String> {
    step(
        k,
        steps,
        &format!("sawmill: systems/{name}.toml (QEMU TCG, -icount shift=0)"),
    );
    let path = repo.resolve_system(name)?;
    let mf = image::load(&path)?;
    // The [test] table of bench.toml may set a timeout, memory size and extra QEMU args.
    let spec = scenario::parse(mf.test.as_ref())?;
    let timeout = if mf.test.as_ref().is_some_and(|t| t.contains_key("timeout")) {
        spec.timeout
    } else {
        DEFAULT_TIMEOUT
    };
    let img = repo.target().join("images").join(format!("{name}.img"));
    image::write_image(repo, &mf.system, &img)?;
    let log = out_dir.join(format!("{name}-serial.log"));
    // Benchmark systems may name scenario-style disks (issue 6: the file-system benchmarks).
    let disks =
        scenario::prepare_disks(&repo.root, &repo.target().join("disks"), name, &spec.disks)?;
    let mut extra = if disks.is_empty() {
        Vec::new()
    } else {
        scenario::disk::qemu_args(&disks)
    };
    extra.extend(spec.qemu_args.iter().cloned());
    let cfg = qemu::Config {
        image: img,
        memory: spec.memory.clone(),
        icount: true,
        extra,
        serial_log: Some(log.clone()),
        com2: qemu::Com2::None,
    };
    let outcome = qemu::run(
        &cfg,
        Duration::from_secs(timeout),
        Some(&out_dir.join(format!("{name}-qemu.log"))),
        None,
    )?;
    let serial = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    let metrics = linux::parse_bench_lines(&serial);
    if outcome != Outcome::Guest(0) {
        let tail = scenario::tail(&serial, 15).join("\n    | ");
        let why = format!(
            "sawmill benchmark run: {}; log {}:\n    | {tail}",
            outcome.describe(),
            log.display()
        );
        if metrics.is_empty() {
            return Err(why);
        }
        eprintln!(
            "warning: {why}\n(keeping the {} figures it printed)",
            metrics.len()
        );
    }
    if metrics.is_empty() {
        return Err(format!(
            "sawmill benchmark printed no BENCH lines (log {})",
            log.display()
        ));
    }
    Ok(metrics)
}

/// Runs the benchmarks; `only`, when not empty, names the parts to run (system names,
/// `linuxabi`, `net`, `boot`, `linux`, `crash`). `boot` boots both systems to the shell's prompt (the Linux side
/// only `with_linux`); `linux` is the Linux baseline's `lbench` run.
pub fn run(repo: &Repo, with_linux: bool, only: &[String]) -> i32 {
    let chosen = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    let with_boot = chosen("boot");
    let with_boot_linux = with_boot && with_linux;
    let with_linux = with_linux && chosen("linux");
    let with_linuxabi = chosen("linuxabi");
    let with_net = chosen("net");
    let with_faults = chosen("faults");
    let out_dir = repo.target().join("bench");
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("sawmill bench: {}: {e}", out_dir.display());
        return 1;
    }
    let systems: Vec<String> = bench_systems(repo)
        .into_iter()
        .filter(|s| chosen(s))
        .collect();
    // build, each system, [the Linux personality's lbench], [boot to the prompt: sawmill,
    // Linux], [the Linux baseline], the report
    let steps = 2
        + systems.len()
        + with_linuxabi as usize
        + with_net as usize
        + with_boot as usize
        + with_boot_linux as usize
        + with_linux as usize
        + with_faults as usize;
    let mut progress = |msg: &str| {
        println!("      {msg}");
        let _ = std::io::stdout().flush();
    };
    let mut failures = Vec::new();
    let mut metrics = Vec::new();
    step(1, steps, "build sawmill guests");
    if let Err(e) = guest::build(repo) {
        failures.push(format!("guest build: {e}"));
    } else {
        for (i, name) in systems.iter().enumerate() {
            match sawmill_figures(repo, &out_dir, name, 2 + i, steps) {
                Ok(m) => metrics.extend(m),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
        if with_linuxabi {
            step(
                2 + systems.len(),
                steps,
                "sawmill: lbench on the Linux personality (systems/linux.toml, -icount shift=0)",
            );
            match linuxabi::run(repo, &out_dir, &mut progress) {
                Ok(m) => metrics.extend(m),
                Err(e) => failures.push(format!("linuxabi: {e}")),
            }
        }
        if with_net {
            step(
                2 + systems.len() + with_linuxabi as usize,
                steps,
                "sawmill: lbench's network figures (systems/linux.toml with virtio-net, -icount shift=0)",
            );
            match net::run(repo, &out_dir, &mut progress) {
                Ok(m) => metrics.extend(m),
                Err(e) => failures.push(format!("net: {e}")),
            }
        }
        if with_boot {
            step(
                2 + systems.len() + with_linuxabi as usize + with_net as usize,
                steps,
                "sawmill: boot to the login shell's prompt (systems/linux.toml, -icount shift=0)",
            );
            match boot::sawmill(repo, &out_dir, &mut progress) {
                Ok(m) => metrics.push(m),
                Err(e) => failures.push(format!("{}: {e}", boot::NAME)),
            }
        }
        // Crash consistency (issue 16, `./sawmill crash`): counts, not instructions; no step of
        // its own in the numbering above.
        if chosen("crash") {
            println!("      sawmill: crash points replayed and checked (./sawmill crash)");
            match crate::crashcmd::bench_metrics(repo) {
                Ok(m) => metrics.extend(m),
                Err(e) => failures.push(format!("crash: {e}")),
            }
        }
        if with_faults {
            step(
                2 + systems.len() + with_linuxabi as usize + with_net as usize + with_boot as usize,
                steps,
                "sawmill: the fault-injection campaign (systems/faults.toml, TCG, wall clock)",
            );
            match crate::faults::bench(repo) {
                Ok(m) => metrics.extend(m),
                Err(e) => failures.push(format!("faults: {e}")),
            }
        }
    }
    if with_boot_linux {
        step(
            steps - 1 - with_linux as usize,
            steps,
            "Linux: boot a busybox initramfs to the shell's prompt (same QEMU, -icount shift=0)",
        );
        match boot::linux(repo, &out_dir, &mut progress) {
            Ok(m) => metrics.push(m),
            Err(e) => failures.push(format!("{}: {e}", boot::linux_name())),
        }
    }
    if with_linux {
        step(
            steps - 1,
            steps,
            "Linux baseline (same QEMU, -icount shift=0)",
        );
        match linux::run(&repo.root, &out_dir.join("linux"), &mut progress) {
            Ok(m) => metrics.extend(m),
            Err(e) => failures.push(format!("Linux baseline failed: {e}")),
        }
    }
    step(steps, steps, "report");
    for m in &metrics {
        println!("  {:<40} {:>14.1} {}", m.name, m.value, m.unit);
    }
    if let Err(e) = report::write(&out_dir, &metrics) {
        failures.push(format!("report: {e}"));
    } else {
        println!(
            "results in {} (unit insn = guest instructions, QEMU icount)",
            out_dir.display()
        );
    }
    for f in &failures {
        eprintln!("sawmill bench: {f}");
    }
    if failures.is_empty() {
        0
    } else {
        if !metrics.is_empty() {
            eprintln!(
                "sawmill bench: the figures that were obtained are written above and in the report"
            );
        }
        1
    }
}
