//! The `linuxabi.*` figures: the Linux baseline's own `lbench` binary, unmodified, run as a Linux
//! process on sawmill (systems/linux.toml: the storage stack, proc, the personality library)
//! under `-icount shift=0`, from an ext2 root image holding `/lbench` and the benchmark files in
//! `/bench` (the same files as the Linux side's disk). Its terminal (COM2) is piped to a file,
//! whose `BENCH` lines are the figures. Touches: `<out>/linuxabi/` and the images under target/.

use super::linux as baseline;
use super::Metric;
use crate::linux::{self as sys_linux, Boot, Ending, Process, Terminal};
use crate::repo::Repo;
use crate::rootfs;
use std::fs;
use std::path::Path;
use std::time::Duration;

/// Metric name prefix of this run (`lbench --prefix=`).
pub const PREFIX: &str = "linuxabi";
/// `lbench` metrics skipped on sawmill (`--skip=`; `NAME*` is every metric starting with NAME):
/// the network ones, which need the NIC and are their own run (`net.rs`: `net.*`), and the cold
/// reads, which drop Linux's caches through /proc/sys/vm/drop_caches (sawmill's PFS has no such
/// control; its cold figures are the native `fs.read4k.cold` and `fs.seqread.cold`).
pub const SKIPPED: &[&str] = &[super::net::PATTERN, "read4k.cold", "seqread.cold"];

/// Whether `--skip=` leaves metric `name` (without prefix) out, as lbench reads the list.
fn skipped(name: &str) -> bool {
    SKIPPED.iter().any(|s| match s.strip_suffix('*') {
        Some(start) => name.starts_with(start),
        None => name == *s,
    })
}
/// Where the benchmark files lie in the image (`lbench`'s directory argument).
const DATA_DIR: &str = "bench";
/// Hard limit on the boot (about 30 s of wall time here).
const TIMEOUT: Duration = Duration::from_secs(900);

/// `lbench`'s command line on sawmill.
pub fn argv() -> Vec<String> {
    let mut a = vec![
        "/lbench".into(),
        format!("/{DATA_DIR}"),
        format!("--prefix={PREFIX}"),
    ];
    if !SKIPPED.is_empty() {
        a.push(format!("--skip={}", SKIPPED.join(",")));
    }
    a
}

/// The figures this run must give: the baseline's, renamed, without the skipped ones.
pub fn expected() -> Vec<String> {
    baseline::EXPECTED
        .iter()
        .filter_map(|n| n.strip_prefix("linux."))
        .filter(|n| !skipped(n))
        .map(|n| format!("{PREFIX}.{n}"))
        .collect()
}

/// Builds `lbench` and the root image, boots the Linux system once, returns the figures.
pub fn run(
    repo: &Repo,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Metric>, String> {
    let work = out_dir.join("linuxabi");
    progress("linuxabi: building bench/linux/lbench.c with musl-gcc");
    let lbench = baseline::build_lbench(&repo.root, &work)?;
    let tree = work.join("tree");
    let _ = fs::remove_dir_all(&tree);
    baseline::write_disk_files(&tree.join(DATA_DIR))?;
    fs::copy(&lbench, tree.join("lbench")).map_err(|e| format!("copy lbench: {e}"))?;
    let image = work.join("root.img");
    progress("linuxabi: making the root image (busybox, /lbench, /bench)");
    rootfs::build(&rootfs::Options {
        trees: vec![tree],
        output: image.clone(),
        size_mb: rootfs::DEFAULT_SIZE_MB,
        busybox: rootfs::HOST_BUSYBOX.into(),
        motd: None,
    })?;
    let metrics = boot_lbench(
        repo,
        &LbenchRun {
            what: "lbench",
            tag: "bench-linuxabi",
            work: &work,
            image,
            argv: argv(),
            net: Vec::new(),
            expected: &expected(),
        },
        progress,
    )?;
    Ok(metrics)
}

/// One boot of the Linux system running `lbench` under `-icount shift=0`.
pub struct LbenchRun<'a> {
    /// How errors name the run (`lbench`, `lbench net`).
    pub what: &'a str,
    /// The boot's tag (QEMU's and the scenario harness's name for it).
    pub tag: &'a str,
    /// The directory of `output.txt` (the program's terminal) and `serial.log`.
    pub work: &'a Path,
    pub image: std::path::PathBuf,
    pub argv: Vec<String>,
    /// QEMU's network arguments (none: no NIC).
    pub net: Vec<String>,
    /// Every metric the run must print.
    pub expected: &'a [String],
}

/// Boots `run`, checks that lbench ended well, that its calibration says the guest's clock
/// counts instructions and that it printed every expected metric; returns its figures.
pub fn boot_lbench(
    repo: &Repo,
    run: &LbenchRun,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Metric>, String> {
    let what = run.what;
    let output = run.work.join("output.txt");
    let log = run.work.join("serial.log");
    let _ = fs::remove_file(&output);
    progress(&format!(
        "{what}: booting {} under -icount shift=0{}: {}",
        sys_linux::MANIFEST,
        if run.net.is_empty() {
            ""
        } else {
            " with virtio-net"
        },
        run.argv.join(" ")
    ));
    let booted = sys_linux::boot(
        repo,
        &Boot {
            tag: run.tag.into(),
            disk: run.image.clone(),
            process: Process {
                argv: run.argv.clone(),
                env: sys_linux::DEFAULT_ENV
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                cwd: None,
                trace: false,
                no_echo: true,
            },
            terminal: Terminal::Piped {
                input: Vec::new(),
                output: output.clone(),
            },
            log: log.clone(),
            show_log: false,
            timeout: TIMEOUT,
            icount: true,
            net: run.net.clone(),
        },
    );
    let out = String::from_utf8_lossy(&fs::read(&output).unwrap_or_default()).into_owned();
    let tail = |s: &str| crate::scenario::tail(s, 20).join("\n    | ");
    match booted.ending {
        Ok(Ending::Exited(0)) => {}
        Ok(e) => {
            return Err(format!(
                "{what} on sawmill: {}; output {}:\n    | {}",
                sys_linux::describe(e),
                output.display(),
                tail(&out)
            ))
        }
        Err(e) => {
            return Err(format!(
                "{what} on sawmill: {e}; debug console {}:\n    | {}",
                log.display(),
                tail(&booted.log)
            ))
        }
    }
    if let Some(line) = out.lines().find(|l| l.contains("LBENCH error")) {
        return Err(format!("{what} on sawmill reported: {}", line.trim()));
    }
    if let Some(calib) = out.lines().find(|l| l.starts_with("CALIB")) {
        baseline::check_calibration(calib.trim())?;
        progress(&format!("{what}: {}", calib.trim()));
    }
    let metrics = baseline::parse_bench_lines(&out);
    let missing: Vec<&str> = run
        .expected
        .iter()
        .filter(|n| !metrics.iter().any(|m| &m.name == *n))
        .map(|n| n.as_str())
        .collect();
    if !missing.is_empty() || !out.contains("LBENCH done") {
        return Err(format!(
            "{what} on sawmill incomplete (missing: {}); output {}:\n    | {}",
            missing.join(", "),
            output.display(),
            tail(&out)
        ));
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_names_follow_the_baseline() {
        let e = expected();
        assert!(e.contains(&"linuxabi.syscall.null".to_string()));
        assert!(e.contains(&"linuxabi.reread4k.4m".to_string()));
        assert!(e.contains(&"linuxabi.exec".to_string()));
        assert!(e.contains(&"linuxabi.pipe.roundtrip".to_string()));
        assert!(e.contains(&"linuxabi.pipe.bw".to_string()));
        assert!(e.contains(&"linuxabi.shell_script".to_string()));
        assert!(!e.iter().any(|n| n.contains(".net.")));
        assert!(e.contains(&"linuxabi.readdir".to_string()));
        assert!(!e.contains(&"linuxabi.read4k.cold".to_string()));
        assert_eq!(
            e.len(),
            baseline::EXPECTED.len() - super::super::net::METRICS.len() - 2
        );
    }

    #[test]
    fn argv_names_the_data_and_the_skips() {
        assert_eq!(
            argv(),
            [
                "/lbench",
                "/bench",
                "--prefix=linuxabi",
                "--skip=net.*,read4k.cold,seqread.cold"
            ]
        );
    }
}
