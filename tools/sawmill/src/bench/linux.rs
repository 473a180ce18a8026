//! Linux baseline of the benchmark suite (issue 7).
//!
//! Boots Debian's `linux-image-amd64` kernel in the same QEMU configuration as sawmill
//! (`-icount shift=0 -cpu qemu64`, TCG), with an initramfs made here from `busybox-static`, the
//! kernel modules for virtio-blk and ext4, and `bench/linux/lbench.c` built with `musl-gcc`.
//! The disk is an ext2 image made by `mkfs.ext2 -d` from generated files. The guest program
//! prints `BENCH <name> <value> insn` lines on the serial console; they are parsed into metrics.
//!
//! Host programs used: `qemu-system-x86_64`, `musl-gcc`, `mkfs.ext2`, `/bin/busybox` (static),
//! and only for kernels that ship compressed modules `xz`, `zstd` or `gzip`. The cpio archive is
//! written here (no `cpio` tool needed).

use super::Metric;
use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Modules the initramfs loads, in this order (dependencies first). Any of them may be built
/// into a given kernel (skipped) or absent (skipped; the mount then fails if it mattered).
pub const MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "virtio_blk",
    "crc16",
    "crc32c_generic",
    "mbcache",
    "jbd2",
    "ext4",
    // The NIC of the network figures (issue 15: net.udp.send*).
    "failover",
    "net_failover",
    "virtio_net",
];

/// The metrics `lbench` must print; a run missing any of them is an error.
pub const EXPECTED: &[&str] = &[
    "linux.reread4k.64k",
    "linux.reread4k.128k",
    "linux.reread4k.256k",
    "linux.reread4k.1m",
    "linux.reread4k.4m",
    "linux.syscall.null",
    "linux.pipe.roundtrip",
    "linux.pipe.bw",
    "linux.pagefault.anon",
    "linux.open",
    "linux.write4k",
    "linux.fork_wait",
    "linux.fork_exec_wait",
    "linux.shell_script",
    "linux.exec",
    "linux.net.udp.roundtrip",
    "linux.net.udp.roundtrip.sockets0",
    "linux.net.udp.roundtrip.sockets256",
    "linux.net.tcp.roundtrip",
    "linux.net.tcp.connect",
    "linux.net.tcp.bulk",
    "linux.net.udp.send64",
    "linux.net.udp.send1472",
    "linux.read4k.cold",
    "linux.seqread.cold",
    "linux.stat",
    "linux.readdir",
    "linux.create_unlink",
    "linux.rename",
    "linux.fsync",
];

/// Files on the benchmark disk: (name, size in bytes). `lbench` knows these names.
pub const DISK_FILES: &[(&str, usize)] = &[
    ("f64k", 64 << 10),
    ("f128k", 128 << 10),
    ("f256k", 256 << 10),
    ("f1m", 1 << 20),
    ("f4m", 4 << 20),
    ("small", 512),
];

/// Files read from the disk with the caches dropped (`read4k.cold`, `seqread.cold`): on the
/// baseline's disk only (sawmill's Linux personality skips the cold metrics, so its root image
/// does not carry 16 MiB for nothing).
pub const COLD_FILES: &[(&str, usize)] = &[("cold", 256 << 10), ("seq16m", 16 << 20)];

/// Size of the baseline's ext2 disk: the files above and the metadata metrics' 1,000 files.
const DISK_SIZE: &str = "48M";

/// Kernel command line of the Linux guest.
pub const KERNEL_CMDLINE: &str = "console=ttyS0 panic=-1 quiet nokaslr norandmaps";

/// Timestamp (2024-01-01T00:00:00Z) given to the disk's files and to mkfs.ext2, and the
/// guest's wall clock at boot: every run boots the same bytes at the same guest time.
const FIXED_TIME: u64 = 1_704_067_200;
const RTC: &str = "base=2024-01-01T00:00:00,clock=vm";

/// Default hard limit on one QEMU run (boot + benchmark + power-off takes about 15 s of wall
/// time on our machines). Override with `SAWMILL_LINUX_TIMEOUT` (seconds).
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// The baseline's guest memory (`-m`).
const MEMORY: &str = "512M";

/// The hard limit on one QEMU run: `SAWMILL_LINUX_TIMEOUT` (seconds) or the default.
pub fn timeout_secs() -> u64 {
    std::env::var("SAWMILL_LINUX_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
}

/// Runs the whole Linux baseline and returns its metrics (unit `insn`).
pub fn run(
    repo: &Path,
    work: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Metric>, String> {
    fs::create_dir_all(work).map_err(|e| format!("create {}: {e}", work.display()))?;

    let kernel = find_kernel()?;
    progress(&format!(
        "linux: kernel {} (modules {})",
        kernel.image.display(),
        kernel.moddir.display()
    ));

    // 1. The benchmark program.
    progress("linux: building bench/linux/lbench.c with musl-gcc");
    let lbench = build_lbench(repo, work)?;

    // 2. The initramfs.
    progress("linux: building the initramfs");
    let busybox = PathBuf::from("/bin/busybox");
    let bb = fs::read(&busybox)
        .map_err(|e| format!("read {}: {e} (install busybox-static)", busybox.display()))?;
    if !is_static_elf(&bb) {
        return Err(format!(
            "{} is dynamically linked; install the busybox-static package",
            busybox.display()
        ));
    }
    let init = fs::read(repo.join("bench/linux/init.sh"))
        .map_err(|e| format!("read bench/linux/init.sh: {e}"))?;
    let modules = resolve_modules(&kernel.moddir, MODULES)?;
    let mut cpio = Cpio::new();
    for dir in ["bin", "dev", "proc", "sys", "mnt", "lib", "lib/modules"] {
        cpio.dir(dir);
    }
    cpio.char_dev("dev/console", 0o600, 5, 1);
    cpio.file("init", 0o755, &init);
    cpio.file("bin/busybox", 0o755, &bb);
    let lb = fs::read(&lbench).map_err(|e| format!("read {}: {e}", lbench.display()))?;
    cpio.file("lbench", 0o755, &lb);
    let mut load_list = String::new();
    for m in &modules {
        match m {
            ModuleStep::Builtin(name) => progress(&format!("linux: module {name} is built in")),
            ModuleStep::Absent(name) => progress(&format!(
                "linux: module {name} not found in this kernel; skipped"
            )),
            ModuleStep::Load { name, path } => {
                let data = read_module(path)?;
                let inside = format!("lib/modules/{name}.ko");
                cpio.file(&inside, 0o644, &data);
                load_list.push('/');
                load_list.push_str(&inside);
                load_list.push('\n');
            }
        }
    }
    cpio.file("modules.load", 0o644, load_list.as_bytes());
    // The host's UDP sink of the network sends (`lbench --sink=`, read by /init); it stays
    // bound until the boot is over, dropping what arrives.
    let sink = super::net::HostSink::bind()?;
    cpio.file("lbench.sink", 0o644, sink.guest_address().as_bytes());
    let initrd = work.join("initramfs.cpio");
    fs::write(&initrd, cpio.finish()).map_err(|e| format!("write {}: {e}", initrd.display()))?;

    // 3. The ext2 disk.
    progress("linux: making the ext2 disk image with mkfs.ext2 -d");
    let disk_dir = work.join("disk");
    write_disk_files(&disk_dir)?;
    write_files(
        &disk_dir,
        COLD_FILES
            .iter()
            .enumerate()
            .map(|(i, (name, size))| (*name, pattern(*size, i as u64 + 101))),
    )?;
    let image = work.join("disk.img");
    let _ = fs::remove_file(&image);
    run_tool(
        Command::new(find_program("mkfs.ext2")?)
            // e2fsprogs takes its "now" from here: fixed mkfs and inode times.
            .env("E2FSPROGS_FAKE_TIME", FIXED_TIME.to_string())
            .args(["-q", "-F", "-b", "4096", "-L", "lbench"])
            // Fixed UUID and directory-hash seed: the image is the same on every run.
            .args(["-U", "5a3f1c2e-7b4d-4e8a-9c61-0d2b3e4f5a6b"])
            .args(["-E", "hash_seed=0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"])
            .arg("-d")
            .arg(&disk_dir)
            .arg(&image)
            .arg(DISK_SIZE),
        "mkfs.ext2 (Debian package e2fsprogs)",
    )?;

    // 4. Boot.
    let serial_path = work.join("serial.log");
    progress(&format!(
        "linux: booting under qemu-system-x86_64 -icount shift=0 -cpu qemu64 (timeout {} s)",
        timeout_secs()
    ));
    let serial = boot(
        &Guest {
            kernel: &kernel.image,
            initrd: &initrd,
            disk: Some(&image),
            memory: MEMORY,
            expected: EXPECTED.len(),
            net: &super::net::qemu_args(),
        },
        &serial_path,
        timeout_secs(),
        progress,
    )?;

    // 5. Results.
    if let Some(line) = serial
        .lines()
        .find(|l| l.contains("LINIT error") || l.contains("LBENCH error"))
    {
        return Err(format!(
            "linux guest reported: {}\n{}",
            line.trim(),
            tail(&serial, 30)
        ));
    }
    if let Some(calib) = serial.lines().find(|l| l.starts_with("CALIB")) {
        check_calibration(calib)?;
        progress(&format!("linux: {}", calib.trim()));
    }
    let metrics = parse_bench_lines(&serial);
    let missing: Vec<&str> = EXPECTED
        .iter()
        .copied()
        .filter(|n| !metrics.iter().any(|m| m.name == *n))
        .collect();
    if !missing.is_empty() || !serial.contains("LBENCH done") {
        return Err(format!(
            "linux benchmark incomplete (missing: {}); serial log {}:\n{}",
            missing.join(", "),
            serial_path.display(),
            tail(&serial, 30)
        ));
    }
    Ok(metrics)
}

/// Builds `lbench` (musl, static) from bench/linux/lbench.c into `work/lbench`; returns its path.
/// The same binary runs on Linux and, unmodified, on sawmill's Linux personality.
pub fn build_lbench(repo: &Path, work: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(work).map_err(|e| format!("create {}: {e}", work.display()))?;
    let src = repo.join("bench/linux/lbench.c");
    let lbench = work.join("lbench");
    run_tool(
        Command::new("musl-gcc")
            .arg("-static")
            .arg("-O2")
            .arg("-Wall")
            .arg("-o")
            .arg(&lbench)
            .arg(&src),
        "musl-gcc (Debian package musl-tools)",
    )?;
    Ok(lbench)
}

/// The shell script `lbench`'s `shell_script` runs (with the benchmark files, as `script.sh`).
pub const SHELL_SCRIPT: &str = include_str!("../../../../bench/linux/script.sh");

/// Writes the benchmark files ([`DISK_FILES`] and the shell script, fixed contents and times)
/// into `dir`, made anew.
pub fn write_disk_files(disk_dir: &Path) -> Result<(), String> {
    let _ = fs::remove_dir_all(disk_dir);
    fs::create_dir_all(disk_dir).map_err(|e| format!("create {}: {e}", disk_dir.display()))?;
    let files = DISK_FILES
        .iter()
        .enumerate()
        .map(|(i, (name, size))| (*name, pattern(*size, i as u64 + 1)))
        .chain([("script.sh", SHELL_SCRIPT.as_bytes().to_vec())]);
    write_files(disk_dir, files)
}

/// Writes each (name, contents) into `dir` with the fixed times.
fn write_files<'a>(
    dir: &Path,
    files: impl Iterator<Item = (&'a str, Vec<u8>)>,
) -> Result<(), String> {
    let fixed = std::time::UNIX_EPOCH + Duration::from_secs(FIXED_TIME);
    let times = fs::FileTimes::new().set_accessed(fixed).set_modified(fixed);
    for (name, bytes) in files {
        let path = dir.join(name);
        fs::write(&path, bytes).map_err(|e| format!("write {name}: {e}"))?;
        fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_times(times))
            .map_err(|e| format!("set times of {name}: {e}"))?;
    }
    Ok(())
}

/// Parses every `BENCH <name> <value> <unit>` line of a serial log, in order. Tolerates CR
/// line ends and console noise before `BENCH` on the same line; ignores malformed lines and
/// anything after the unit. Duplicate names are all returned.
pub fn parse_bench_lines(serial: &str) -> Vec<Metric> {
    let mut out = Vec::new();
    for raw in serial.lines() {
        let line = raw.trim_end_matches('\r');
        let Some(pos) = find_bench_token(line) else {
            continue;
        };
        let mut words = line[pos + "BENCH".len()..].split_whitespace();
        let (Some(name), Some(value), Some(unit)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if !value.is_finite() || !valid_name(name) {
            continue;
        }
        out.push(Metric {
            name: name.to_string(),
            unit: unit.to_string(),
            value,
        });
    }
    out
}

/// Position of a `BENCH` word followed by whitespace, at the start of the line or after a
/// non-alphanumeric character.
fn find_bench_token(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(off) = line[from..].find("BENCH") {
        let pos = from + off;
        let before_ok = pos == 0 || !bytes[pos - 1].is_ascii_alphanumeric();
        let after = bytes.get(pos + 5);
        let after_ok = matches!(after, Some(b' ') | Some(b'\t'));
        if before_ok && after_ok {
            return Some(pos);
        }
        from = pos + 5;
    }
    None
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

// ---------------------------------------------------------------------------------------------
// Kernel and modules

pub struct Kernel {
    pub image: PathBuf,
    pub moddir: PathBuf,
}

/// The kernel to boot: `SAWMILL_LINUX_KERNEL` if set (a `/boot/vmlinuz-<version>` path), else
/// the newest `/boot/vmlinuz-<version>` whose `/lib/modules/<version>/modules.dep` exists.
pub fn find_kernel() -> Result<Kernel, String> {
    let candidates: Vec<PathBuf> = match std::env::var_os("SAWMILL_LINUX_KERNEL") {
        Some(p) => vec![PathBuf::from(p)],
        None => {
            let mut v: Vec<PathBuf> = fs::read_dir("/boot")
                .map_err(|e| format!("read /boot: {e} (install linux-image-amd64)"))?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("vmlinuz-"))
                })
                .collect();
            v.sort_by(|a, b| version_cmp(&kernel_version(b), &kernel_version(a)));
            v
        }
    };
    for image in candidates {
        let ver = kernel_version(&image);
        let moddir = Path::new("/lib/modules").join(&ver);
        if moddir.join("modules.dep").is_file() {
            return Ok(Kernel { image, moddir });
        }
    }
    Err(
        "no /boot/vmlinuz-<version> with /lib/modules/<version>/modules.dep; \
         install the Debian package linux-image-amd64"
            .to_string(),
    )
}

fn kernel_version(image: &Path) -> String {
    let name = image.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.strip_prefix("vmlinuz-").unwrap_or(name).to_string()
}

/// Compares version strings by runs of digits (numerically) and other characters.
fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<Result<u64, String>> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut digits = false;
        for c in s.chars() {
            if !cur.is_empty() && c.is_ascii_digit() != digits {
                out.push(if digits {
                    Ok(cur.parse().unwrap_or(u64::MAX))
                } else {
                    Err(std::mem::take(&mut cur))
                });
                cur.clear();
            }
            digits = c.is_ascii_digit();
            cur.push(c);
        }
        if !cur.is_empty() {
            out.push(if digits {
                Ok(cur.parse().unwrap_or(u64::MAX))
            } else {
                Err(cur)
            });
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(pb.iter()) {
        let o = match (x, y) {
            (Ok(x), Ok(y)) => x.cmp(y),
            (Err(x), Err(y)) => x.cmp(y),
            (Ok(_), Err(_)) => std::cmp::Ordering::Greater,
            (Err(_), Ok(_)) => std::cmp::Ordering::Less,
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

#[derive(Debug, PartialEq)]
enum ModuleStep {
    Builtin(String),
    Absent(String),
    Load { name: String, path: PathBuf },
}

/// Module name as the kernel sees it: file name without `.ko[.xz|.zst|.gz]`, `-` as `_`.
fn module_name(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let stem = base.split(".ko").next().unwrap_or(base);
    stem.replace('-', "_")
}

fn resolve_modules(moddir: &Path, wanted: &[&str]) -> Result<Vec<ModuleStep>, String> {
    let dep = fs::read_to_string(moddir.join("modules.dep"))
        .map_err(|e| format!("read {}/modules.dep: {e}", moddir.display()))?;
    // modules.builtin is absent on kernels without built-in modules info; treat as empty.
    let builtin = fs::read_to_string(moddir.join("modules.builtin")).unwrap_or_default();
    Ok(plan_modules(moddir, &dep, &builtin, wanted))
}

/// Load plan for `wanted`, given the text of modules.dep and modules.builtin: each wanted
/// module is preceded by whatever modules.dep says it needs (deepest first), every module
/// appears once, built-in ones are reported and not loaded, unknown ones are reported absent.
fn plan_modules(moddir: &Path, dep: &str, builtin: &str, wanted: &[&str]) -> Vec<ModuleStep> {
    let builtin: Vec<String> = builtin
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(module_name)
        .collect();
    let mut table: HashMap<String, (String, Vec<String>)> = HashMap::new();
    for line in dep.lines() {
        let Some((path, deps)) = line.split_once(':') else {
            continue;
        };
        let path = path.trim();
        if path.is_empty() {
            continue;
        }
        let deps = deps.split_whitespace().map(str::to_string).collect();
        table.insert(module_name(path), (path.to_string(), deps));
    }

    fn visit(
        name: &str,
        moddir: &Path,
        table: &HashMap<String, (String, Vec<String>)>,
        builtin: &[String],
        done: &mut Vec<String>,
        out: &mut Vec<ModuleStep>,
    ) {
        if done.iter().any(|d| d == name) {
            return;
        }
        done.push(name.to_string());
        if builtin.iter().any(|b| b == name) {
            out.push(ModuleStep::Builtin(name.to_string()));
            return;
        }
        let Some((path, deps)) = table.get(name) else {
            out.push(ModuleStep::Absent(name.to_string()));
            return;
        };
        // depmod lists the module's dependencies with the ones to load first last.
        for d in deps.iter().rev() {
            visit(&module_name(d), moddir, table, builtin, done, out);
        }
        let path = if Path::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            moddir.join(path)
        };
        out.push(ModuleStep::Load {
            name: name.to_string(),
            path,
        });
    }

    let mut done = Vec::new();
    let mut out = Vec::new();
    for w in wanted {
        visit(
            &w.replace('-', "_"),
            moddir,
            &table,
            &builtin,
            &mut done,
            &mut out,
        );
    }
    out
}

/// Reads a module file, decompressing `.ko.xz`, `.ko.zst` and `.ko.gz` with the host tool
/// (busybox insmod may not handle compressed modules).
fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".ko.xz") {
        Some(("xz", "xz-utils"))
    } else if name.ends_with(".ko.zst") {
        Some(("zstd", "zstd"))
    } else if name.ends_with(".ko.gz") {
        Some(("gzip", "gzip"))
    } else {
        None
    };
    match tool {
        None => fs::read(path).map_err(|e| format!("read {name}: {e}")),
        Some((prog, pkg)) => {
            let out = Command::new(prog)
                .arg("-dc")
                .arg(path)
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| format!("run {prog} (Debian package {pkg}): {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{prog} -dc {name} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(out.stdout)
        }
    }
}

/// An ELF file without a PT_INTERP program header (statically linked).
pub fn is_static_elf(data: &[u8]) -> bool {
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&data[o..o + 8]);
        u64::from_le_bytes(b) as usize
    };
    let phoff = u64_at(32);
    let phentsize = u16_at(54);
    let phnum = u16_at(56);
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > data.len() {
            return false;
        }
        let p_type = u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
        if p_type == 3 {
            return false; // PT_INTERP
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// cpio (newc) writer

/// Builds a cpio archive in the "newc" format the kernel unpacks as an initramfs: for each
/// entry a 110-byte ASCII header ("070701" and 13 eight-digit hex fields), the NUL-terminated
/// name padded to 4 bytes, the data padded to 4 bytes; closed by an entry named TRAILER!!!.
/// All times and owners are 0, so the archive is the same on every run.
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Cpio {
    pub fn new() -> Self {
        Cpio {
            buf: Vec::new(),
            ino: 1,
        }
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, 2, (0, 0), &[]);
    }

    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, 1, (0, 0), data);
    }

    /// A symbolic link `name` -> `target` (the target is the entry's data).
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, 1, (0, 0), target.as_bytes());
    }

    pub fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) {
        self.entry(name, 0o020000 | perm, 1, (major, minor), &[]);
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) {
        let ino = if name == "TRAILER!!!" { 0 } else { self.ino };
        self.ino += 1;
        let fields = [
            ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, 1, (0, 0), &[]);
        self.buf
    }
}

// ---------------------------------------------------------------------------------------------
// QEMU

/// What a Linux benchmark boot runs.
pub struct Guest<'a> {
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    /// A virtio disk, if any.
    pub disk: Option<&'a Path>,
    /// Guest memory (`-m`).
    pub memory: &'a str,
    /// How many `BENCH` lines the run gives (for the progress lines).
    pub expected: usize,
    /// QEMU arguments of a network device; empty: `-nic none`.
    pub net: &'a [String],
}

/// Boots the guest, streams `BENCH` lines to `progress` as they appear, kills QEMU after
/// `timeout_secs`, and returns the serial output.
pub fn boot(
    guest: &Guest,
    serial_path: &Path,
    timeout_secs: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<String, String> {
    let log = fs::File::create(serial_path)
        .map_err(|e| format!("create {}: {e}", serial_path.display()))?;
    let log_err = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-machine", "pc", "-accel", "tcg", "-cpu", "qemu64", "-m"])
        .arg(guest.memory)
        .args(["-icount", "shift=0"])
        .args(["-nographic", "-no-reboot"])
        // A fixed guest wall clock that advances with virtual time: every run sees the same
        // dates (file times on the disk, the kernel's boot-time random-pool input).
        .args(["-rtc", RTC])
        .arg("-kernel")
        .arg(guest.kernel)
        .arg("-initrd")
        .arg(guest.initrd)
        // nokaslr/norandmaps (KERNEL_CMDLINE): a fixed kernel and user address layout. With
        // KASLR the layout changes every boot and the page-fault figure wanders by ~1.5% between
        // runs; fixed, every figure agrees to 0.05% (bench/README.md).
        .arg("-append")
        .arg(KERNEL_CMDLINE);
    if guest.net.is_empty() {
        cmd.args(["-nic", "none"]);
    } else {
        cmd.args(guest.net);
    }
    if let Some(disk) = guest.disk {
        cmd.arg("-drive").arg(format!(
            "file={},format=raw,if=virtio,cache=unsafe",
            disk.display()
        ));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err));
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("run qemu-system-x86_64 (Debian package qemu-system-x86): {e}"))?;

    let start = Instant::now();
    let mut reader =
        fs::File::open(serial_path).map_err(|e| format!("open {}: {e}", serial_path.display()))?;
    let mut seen = String::new();
    let mut reported = 0usize;
    let mut partial_from = 0usize;
    let status = loop {
        let done = child
            .try_wait()
            .map_err(|e| format!("wait for qemu: {e}"))?;
        // Pick up new serial output (also after exit, to get the last lines).
        let mut chunk = Vec::new();
        let _ = reader.seek(SeekFrom::Start(seen.len() as u64));
        let _ = reader.read_to_end(&mut chunk);
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(nl) = seen.rfind('\n') {
            if nl + 1 > partial_from {
                for m in parse_bench_lines(&seen[partial_from..nl + 1]) {
                    reported += 1;
                    progress(&format!(
                        "linux: {reported}/{} {} = {} {}",
                        guest.expected, m.name, m.value, m.unit
                    ));
                }
                partial_from = nl + 1;
            }
        }
        if let Some(st) = done {
            break st;
        }
        if start.elapsed() > Duration::from_secs(timeout_secs) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "linux benchmark: qemu killed after {timeout_secs} s; serial log {}:\n{}",
                serial_path.display(),
                tail(&seen, 30)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Read the whole log again: the incremental reads may have split a UTF-8 sequence.
    let full = fs::read(serial_path).map_err(|e| format!("read {}: {e}", serial_path.display()))?;
    let full = String::from_utf8_lossy(&full).into_owned();
    if !status.success() {
        return Err(format!(
            "qemu exited with {status}; serial log {}:\n{}",
            serial_path.display(),
            tail(&full, 30)
        ));
    }
    Ok(full)
}

/// `CALIB loop of N instructions measured M units`: under icount M is N plus the few
/// instructions of the time-stamp sequence. Anything else means the guest clock is not counting
/// instructions (no `-icount`?) and every figure would be meaningless.
pub fn check_calibration(line: &str) -> Result<(), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let n = words.get(3).and_then(|w| w.parse::<f64>().ok());
    let m = words.get(6).and_then(|w| w.parse::<f64>().ok());
    match (n, m) {
        (Some(n), Some(m)) if (m - n).abs() <= 64.0 => Ok(()),
        _ => Err(format!(
            "guest TSC does not count instructions (expected icount): {}",
            line.trim()
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// helpers

fn run_tool(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// A program on PATH, or in /usr/sbin or /sbin (not on a normal user's PATH).
fn find_program(name: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in
        std::env::split_paths(&path).chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
    {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(format!("{name} not found (install e2fsprogs)"))
}

/// Deterministic file contents (xorshift64), so every run builds the same disk.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bench_lines() {
        let log = "SeaBIOS\r\n\
            BENCH linux.reread4k.64k 2025.0 insn\r\n\
            [    2.1] random: crng init done BENCH linux.open 6640.7 insn\n\
            XBENCH not.this 1 insn\n\
            BENCH missing.unit 12\n\
            BENCH bad.value abc insn\n\
            BENCH nan.value NaN insn\n\
            BENCHMARK x 1 insn\n\
            BENCH fs.reread4k.multiserver.1m 1800 insn trailing words\n\
            BENCH ipc.null_rpc.roundtrip 7e2 insn";
        let m = parse_bench_lines(log);
        let got: Vec<(&str, f64, &str)> = m
            .iter()
            .map(|m| (m.name.as_str(), m.value, m.unit.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("linux.reread4k.64k", 2025.0, "insn"),
                ("linux.open", 6640.7, "insn"),
                ("fs.reread4k.multiserver.1m", 1800.0, "insn"),
                ("ipc.null_rpc.roundtrip", 700.0, "insn"),
            ]
        );
    }

    #[test]
    fn parses_empty_and_noise() {
        assert!(parse_bench_lines("").is_empty());
        assert!(parse_bench_lines("BENCH\nBENCH \n\n").is_empty());
    }

    #[test]
    fn module_plan_orders_dependencies_and_skips_builtins() {
        let dep = "kernel/drivers/virtio/virtio_ring.ko:\n\
            kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko\n\
            kernel/drivers/block/virtio_blk.ko.xz: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n\
            kernel/fs/ext4/ext4.ko.zst: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko\n\
            kernel/lib/crc16.ko:\n\
            kernel/fs/jbd2/jbd2.ko:\n";
        let builtin = "kernel/fs/mbcache.ko\nkernel/crypto/crc32c_generic.ko\n";
        let md = Path::new("/m");
        let plan = plan_modules(
            md,
            dep,
            builtin,
            &["virtio_blk", "crc32c_generic", "ext4", "nope"],
        );
        let load = |n: &str, p: &str| ModuleStep::Load {
            name: n.to_string(),
            path: md.join(p),
        };
        assert_eq!(
            plan,
            vec![
                load("virtio_ring", "kernel/drivers/virtio/virtio_ring.ko"),
                load("virtio", "kernel/drivers/virtio/virtio.ko"),
                load("virtio_blk", "kernel/drivers/block/virtio_blk.ko.xz"),
                ModuleStep::Builtin("crc32c_generic".into()),
                load("jbd2", "kernel/fs/jbd2/jbd2.ko"),
                ModuleStep::Builtin("mbcache".into()),
                load("crc16", "kernel/lib/crc16.ko"),
                load("ext4", "kernel/fs/ext4/ext4.ko.zst"),
                ModuleStep::Absent("nope".into()),
            ]
        );
    }

    #[test]
    fn module_names() {
        assert_eq!(module_name("kernel/a/virtio-blk.ko.xz"), "virtio_blk");
        assert_eq!(module_name("ext4.ko"), "ext4");
    }

    #[test]
    fn cpio_newc_layout() {
        let mut c = Cpio::new();
        c.dir("bin");
        c.file("init", 0o755, b"hello");
        let a = c.finish();
        assert!(a.len().is_multiple_of(4));
        assert_eq!(&a[..6], b"070701");
        // First header: ino 1, mode dir 0755, nlink 2, namesize 4 ("bin\0").
        let hdr = std::str::from_utf8(&a[6..110]).unwrap();
        let field = |i: usize| u32::from_str_radix(&hdr[i * 8..i * 8 + 8], 16).unwrap();
        assert_eq!(field(0), 1);
        assert_eq!(field(1), 0o040755);
        assert_eq!(field(4), 2);
        assert_eq!(field(11), 4);
        assert_eq!(&a[110..113], b"bin");
        // 110 + 4 = 114 -> padded to 116; the next header starts there.
        assert_eq!(&a[116..122], b"070701");
        let hdr2 = std::str::from_utf8(&a[122..226]).unwrap();
        assert_eq!(u32::from_str_radix(&hdr2[48..56], 16).unwrap(), 5); // filesize
        assert_eq!(&a[226..231], b"init\0");
        // name 226..231 -> pad to 232; data 232..237 -> pad to 240.
        assert_eq!(&a[232..237], b"hello");
        assert_eq!(&a[240..246], b"070701");
        // 110-byte header + "TRAILER!!!\0" (11) padded to 124; no data.
        let t = a.len() - 124;
        assert_eq!(&a[t..t + 6], b"070701");
        assert_eq!(&a[t + 110..t + 121], b"TRAILER!!!\0");
        assert!(a[t + 121..].iter().all(|&b| b == 0));
    }

    #[test]
    fn versions_sort_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(version_cmp("6.1.0-10-amd64", "6.1.0-9-amd64"), Greater);
        assert_eq!(version_cmp("5.10.0-1-amd64", "6.1.0-1-amd64"), Less);
        assert_eq!(version_cmp("6.1.0-1-amd64", "6.1.0-1-amd64"), Equal);
    }

    #[test]
    fn calibration_check() {
        assert!(
            check_calibration("CALIB loop of 2000000 instructions measured 2000005 units").is_ok()
        );
        assert!(
            check_calibration("CALIB loop of 2000000 instructions measured 731220 units").is_err()
        );
        assert!(check_calibration("CALIB garbage").is_err());
    }

    #[test]
    fn static_elf_detection() {
        // A minimal ELF64 header with one program header at offset 64 of the given type.
        let elf = |p_type: u32| {
            let mut d = vec![0u8; 64 + 56];
            d[..4].copy_from_slice(b"\x7fELF");
            d[4] = 2; // ELFCLASS64
            d[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
            d[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
            d[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
            d[64..68].copy_from_slice(&p_type.to_le_bytes());
            d
        };
        assert!(is_static_elf(&elf(1))); // PT_LOAD only
        assert!(!is_static_elf(&elf(3))); // PT_INTERP: dynamically linked
        assert!(!is_static_elf(b"not an elf"));
        let mut truncated = elf(1);
        truncated[56..58].copy_from_slice(&9u16.to_le_bytes());
        assert!(!is_static_elf(&truncated));
    }

    #[test]
    fn pattern_is_deterministic() {
        assert_eq!(pattern(100, 3), pattern(100, 3));
        assert_ne!(pattern(100, 3), pattern(100, 4));
        assert_eq!(pattern(4097, 1).len(), 4097);
    }

    /// The full Linux baseline: boots QEMU (about 15 s). `cargo test -- --ignored linux_baseline`
    #[test]
    #[ignore]
    fn linux_baseline() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let work = std::env::temp_dir().join("sawmill-linux-bench-test");
        let metrics = run(&repo, &work, &mut |s| eprintln!("{s}")).expect("linux baseline");
        for m in &metrics {
            eprintln!("{} {} {}", m.name, m.value, m.unit);
        }
        assert_eq!(metrics.len(), EXPECTED.len());
    }
}
