//! `boot.to_prompt` (issue 14): from reset to the login shell's first prompt, sawmill against
//! Linux booting a busybox initramfs to a prompt, both under `-icount shift=0` in the same QEMU.
//!
//! On both sides the login shell (`sh -l`) reads the same `/etc/profile` ([`profile`]), whose
//! last lines run `bench/linux/stamp.c` (musl-static: `BENCH <name> <tsc> insn`, the guest's
//! time-stamp counter, which counts from 0 at reset) and then power the machine off, so the
//! figure is everything from reset to where the shell would print its first prompt.
//!
//! - sawmill: systems/linux.toml with `/bin/sh -l` as the first process, on a root image made
//!   by `rootfs` (busybox, the base /etc) with `/bin/stamp` and the benchmark's profile; its
//!   terminal (COM2) piped to `<out>/boot/output.txt`.
//! - Linux: the newest Debian kernel, `KERNEL_CMDLINE` as the baseline's, the same guest memory
//!   as sawmill's Linux system, an initramfs of busybox (its applet links made in the archive,
//!   as sawmill's image has them), `/bin/stamp`, the profile and `/init` =
//!   `bench/linux/boot-init.sh` (mounts proc, sysfs, devtmpfs; `setsid cttyhack sh -l`); no disk.
//!
//! Touches: `<out>/boot/`, `<out>/boot-linux/`, the images under target/.

use super::linux as baseline;
use super::Metric;
use crate::linux::{self as sys_linux, Boot, Ending, Terminal};
use crate::repo::Repo;
use crate::{image, rootfs, scenario};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The sawmill figure; the Linux one is `linux.` + this, the ratio `ratio.` + this.
pub const NAME: &str = "boot.to_prompt";
/// Where the stamp program lies on both systems.
const STAMP: &str = "/bin/stamp";
/// Hard limit on one sawmill boot (about 3 s of wall time here).
const TIMEOUT: Duration = Duration::from_secs(600);
/// Boots per system; the figure is their minimum. While the CPU idles (sawmill waiting for the
/// virtual disk) QEMU's virtual clock follows the host's, so a boot may count a few million
/// more than its instructions (sawmill: 161–176 M over four boots); the minimum drops most of
/// that, as lbench's minimum of passes drops timer ticks.
pub const BOOTS: usize = 3;

/// The smallest of `BOOTS` figures from `one` (called with the boot's number from 1).
fn minimum_of_boots(
    progress: &mut dyn FnMut(&str),
    mut one: impl FnMut(usize) -> Result<Metric, String>,
) -> Result<Metric, String> {
    let mut best: Option<Metric> = None;
    for k in 1..=BOOTS {
        let m = one(k)?;
        progress(&format!(
            "boot: {k}/{BOOTS} {} = {} {}",
            m.name, m.value, m.unit
        ));
        if best.as_ref().is_none_or(|b| m.value < b.value) {
            best = Some(m);
        }
    }
    best.ok_or_else(|| "no boot".to_string())
}

/// The Linux figure's name.
pub fn linux_name() -> String {
    format!("linux.{NAME}")
}

/// The login shell's `/etc/profile` on both systems: the prompt sawmill's own profile sets,
/// the stamp named `name`, then power-off (the shell never reaches its prompt).
pub fn profile(name: &str) -> String {
    format!(
        "# /etc/profile of the boot benchmark (tools/sawmill/src/bench/boot.rs): the time from\n\
         # reset to here is the boot's cost to the first prompt.\n\
         export PS1='\\u@\\h:\\w\\$ '\n\
         {STAMP} {name}\n\
         poweroff -f\n"
    )
}

/// Builds `bench/linux/stamp.c` (musl, static) into `work/stamp`.
fn build_stamp(repo: &Path, work: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(work).map_err(|e| format!("create {}: {e}", work.display()))?;
    let out = work.join("stamp");
    let status = Command::new("musl-gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&out)
        .arg(repo.join("bench/linux/stamp.c"))
        .status()
        .map_err(|e| format!("run musl-gcc (Debian package musl-tools): {e}"))?;
    if !status.success() {
        return Err(format!("musl-gcc bench/linux/stamp.c failed ({status})"));
    }
    Ok(out)
}

/// The one `BENCH name` figure of `text`, or why there is none.
fn the_figure(text: &str, name: &str, file: &Path) -> Result<Metric, String> {
    baseline::parse_bench_lines(text)
        .into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| {
            format!(
                "no `BENCH {name}` line; output {}:\n    | {}",
                file.display(),
                scenario::tail(text, 20).join("\n    | ")
            )
        })
}

/// The sawmill side: boots the Linux system into the login shell once; returns `boot.to_prompt`.
pub fn sawmill(
    repo: &Repo,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Metric, String> {
    let work = out_dir.join("boot");
    progress("boot: building bench/linux/stamp.c with musl-gcc");
    let stamp = build_stamp(&repo.root, &work)?;
    let tree = work.join("tree");
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(tree.join("bin")).map_err(|e| format!("create {}: {e}", tree.display()))?;
    fs::create_dir_all(tree.join("etc")).map_err(|e| format!("create {}: {e}", tree.display()))?;
    fs::copy(&stamp, tree.join("bin/stamp")).map_err(|e| format!("copy stamp: {e}"))?;
    fs::write(tree.join("etc/profile"), profile(NAME))
        .map_err(|e| format!("write the profile: {e}"))?;
    let pristine = work.join("root.img");
    progress("boot: making the root image (busybox, /bin/stamp, the benchmark's /etc/profile)");
    rootfs::build(&rootfs::Options {
        trees: vec![tree],
        output: pristine.clone(),
        size_mb: rootfs::DEFAULT_SIZE_MB,
        busybox: rootfs::HOST_BUSYBOX.into(),
        motd: None,
    })?;
    progress(&format!(
        "boot: booting {} into `sh -l` under -icount shift=0, {BOOTS} times",
        sys_linux::MANIFEST
    ));
    minimum_of_boots(progress, |_| sawmill_boot(repo, &work, &pristine))
}

/// One sawmill boot, on a fresh copy of `pristine` (the file systems are mounted read-write: a
/// boot may leave access times behind).
fn sawmill_boot(repo: &Repo, work: &Path, pristine: &Path) -> Result<Metric, String> {
    let disk = work.join("root-booted.img");
    fs::copy(pristine, &disk).map_err(|e| format!("copy {}: {e}", pristine.display()))?;
    let output = work.join("output.txt");
    let log = work.join("serial.log");
    let _ = fs::remove_file(&output);
    let booted = sys_linux::boot(
        repo,
        &Boot {
            tag: "bench-boot".into(),
            disk,
            process: sys_linux::login_process(),
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
    match booted.ending {
        Ok(Ending::PoweredOff) | Ok(Ending::Exited(0)) => {}
        Ok(e) => {
            return Err(format!(
                "the login shell: {}; output {}:\n    | {}",
                sys_linux::describe(e),
                output.display(),
                scenario::tail(&out, 20).join("\n    | ")
            ))
        }
        Err(e) => {
            return Err(format!(
                "the login shell: {e}; debug console {}:\n    | {}",
                log.display(),
                scenario::tail(&booted.log, 20).join("\n    | ")
            ))
        }
    }
    the_figure(&out, NAME, &output)
}

/// The guest memory of sawmill's Linux system (its `[test] memory`), which the Linux boot gets
/// too: both machines the same size.
fn sawmill_memory(repo: &Repo) -> Result<String, String> {
    let mf = image::load(&repo.root.join(sys_linux::MANIFEST))?;
    Ok(scenario::parse(mf.test.as_ref())?.memory)
}

/// The Linux side: boots the busybox initramfs to the stamp; returns `linux.boot.to_prompt`.
pub fn linux(
    repo: &Repo,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Metric, String> {
    let work = out_dir.join("boot-linux");
    let kernel = baseline::find_kernel()?;
    progress(&format!("boot: Linux kernel {}", kernel.image.display()));
    let stamp = build_stamp(&repo.root, &work)?;
    let bb = fs::read(rootfs::HOST_BUSYBOX).map_err(|e| {
        format!(
            "read {}: {e} (install busybox-static)",
            rootfs::HOST_BUSYBOX
        )
    })?;
    if !baseline::is_static_elf(&bb) {
        return Err(format!(
            "{} is dynamically linked; install the busybox-static package",
            rootfs::HOST_BUSYBOX
        ));
    }
    let list = Command::new(rootfs::HOST_BUSYBOX)
        .arg("--list-full")
        .output()
        .map_err(|e| format!("{} --list-full: {e}", rootfs::HOST_BUSYBOX))?;
    let applets = rootfs::parse_applet_list(&String::from_utf8_lossy(&list.stdout))?;
    let init = fs::read(repo.root.join("bench/linux/boot-init.sh"))
        .map_err(|e| format!("read bench/linux/boot-init.sh: {e}"))?;
    let mut cpio = baseline::Cpio::new();
    for dir in [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "root", "tmp",
    ] {
        cpio.dir(dir);
    }
    cpio.char_dev("dev/console", 0o600, 5, 1);
    cpio.file("init", 0o755, &init);
    cpio.file("bin/busybox", 0o755, &bb);
    for a in applets.iter().filter(|a| *a != "bin/busybox") {
        cpio.symlink(a, "/bin/busybox");
    }
    let st = fs::read(&stamp).map_err(|e| format!("read {}: {e}", stamp.display()))?;
    cpio.file(STAMP.trim_start_matches('/'), 0o755, &st);
    cpio.file("etc/profile", 0o644, profile(&linux_name()).as_bytes());
    let initrd = work.join("initramfs.cpio");
    fs::write(&initrd, cpio.finish()).map_err(|e| format!("write {}: {e}", initrd.display()))?;
    let memory = sawmill_memory(repo)?;
    let serial_path = work.join("serial.log");
    progress(&format!(
        "boot: booting Linux with the busybox initramfs (-m {memory}, -icount shift=0), \
         {BOOTS} times"
    ));
    minimum_of_boots(progress, |_| {
        let serial = baseline::boot(
            &baseline::Guest {
                kernel: &kernel.image,
                initrd: &initrd,
                disk: None,
                memory: &memory,
                expected: 1,
                net: &[],
            },
            &serial_path,
            baseline::timeout_secs(),
            &mut |_| {},
        )?;
        the_figure(&serial, &linux_name(), &serial_path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_stamps_then_powers_off() {
        let p = profile("linux.boot.to_prompt");
        let lines: Vec<&str> = p.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "export PS1='\\u@\\h:\\w\\$ '",
                "/bin/stamp linux.boot.to_prompt",
                "poweroff -f"
            ]
        );
        assert_eq!(linux_name(), "linux.boot.to_prompt");
    }

    #[test]
    fn the_smallest_boot_wins() {
        let values = [170.0, 161.0, 176.0];
        let m = minimum_of_boots(&mut |_| {}, |k| {
            Ok(Metric {
                name: NAME.into(),
                unit: "insn".into(),
                value: values[(k - 1) % values.len()],
            })
        })
        .unwrap();
        assert_eq!(m.value, 161.0);
        assert!(minimum_of_boots(&mut |_| {}, |_| Err("no".into())).is_err());
    }

    #[test]
    fn the_figure_is_found_among_noise() {
        let out = "sawmill login\r\nBENCH boot.to_prompt 123456789 insn\r\n";
        let m = the_figure(out, NAME, Path::new("x")).unwrap();
        assert_eq!(m.value, 123456789.0);
        assert!(the_figure("nothing", NAME, Path::new("x")).is_err());
    }
}
