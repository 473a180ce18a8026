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
    let output = work.join("output.txt");
    let log = work.join("serial.log");
    let _ = fs::remove_file(&output);
    progress(&format!(
        "linuxabi: booting {} under -icount shift=0: {}",
        sys_linux::MANIFEST,
        argv().join(" ")
    ));
    let booted = sys_linux::boot(
        repo,
        &Boot {
            tag: "bench-linuxabi".into(),
            disk: image,
            process: Process {
                argv: argv(),
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
            net: Vec::new(),
        },
    );
    let out = String::from_utf8_lossy(&fs::read(&output).unwrap_or_default()).into_owned();
    let tail = |s: &str| crate::scenario::tail(s, 20).join("\n    | ");
    match booted.ending {
        Ok(Ending::Exited(0)) => {}
        Ok(e) => {
            return Err(format!(
                "lbench on sawmill: {}; output {}:\n    | {}",
                sys_linux::describe(e),
                output.display(),
                tail(&out)
            ))
        }
        Err(e) => {
            return Err(format!(
                "lbench on sawmill: {e}; debug console {}:\n    | {}",
                log.display(),
                tail(&booted.log)
            ))
        }
    }
    if let Some(line) = out.lines().find(|l| l.contains("LBENCH error")) {
        return Err(format!("lbench on sawmill reported: {}", line.trim()));
    }
    if let Some(calib) = out.lines().find(|l| l.starts_with("CALIB")) {
        baseline::check_calibration(calib.trim())?;
        progress(&format!("linuxabi: {}", calib.trim()));
    }
    let metrics = baseline::parse_bench_lines(&out);
    let missing: Vec<String> = expected()
        .into_iter()
        .filter(|n| !metrics.iter().any(|m| &m.name == n))
        .collect();
    if !missing.is_empty() || !out.contains("LBENCH done") {
        return Err(format!(
            "lbench on sawmill incomplete (missing: {}); output {}:\n    | {}",
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
