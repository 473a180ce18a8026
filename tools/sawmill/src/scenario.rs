//! Scenario settings (`[test]` in a manifest) and judging a finished run against them.

use crate::qemu::Outcome;

#[derive(Debug, Clone, PartialEq)]
pub struct TestSpec {
    /// Wall-clock seconds before QEMU is killed.
    pub timeout: u64,
    /// Must all appear in the serial log, in this order.
    pub expect: Vec<String>,
    /// Must all appear in the serial log, in any order (lines of servers that run concurrently).
    pub expect_any: Vec<String>,
    /// Must not appear anywhere in the serial log.
    pub reject: Vec<String>,
    /// Expected guest exit code.
    pub exit: u8,
    pub memory: String,
    pub qemu_args: Vec<String>,
    /// ext2 disks made on the host and attached as virtio-blk devices (see [`DiskSpec`]).
    pub disks: Vec<DiskSpec>,
    /// Checks on the disk images after QEMU has exited (see [`post_checks`]).
    pub post: Vec<String>,
    /// Kill QEMU (SIGKILL, no shutdown) as soon as this string appears in the log: the
    /// fsync-durability test. The run then counts as ended on purpose.
    pub kill_after: Option<String>,
    /// Bytes written to COM2 (the console server's line) at start; `Some` wires COM2 to a pipe.
    pub com2_input: Option<Vec<u8>>,
    /// Must all appear (in any order) in what the guest wrote to COM2.
    pub com2_expect: Vec<Vec<u8>>,
    /// Must not appear in what the guest wrote to COM2.
    pub com2_reject: Vec<Vec<u8>>,
}

pub const DEFAULT_TIMEOUT: u64 = 120;

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            timeout: DEFAULT_TIMEOUT,
            expect: Vec::new(),
            expect_any: Vec::new(),
            reject: vec!["PANIC".into(), "FAIL".into()],
            exit: 0,
            memory: "256M".into(),
            qemu_args: Vec::new(),
            disks: Vec::new(),
            post: Vec::new(),
            kill_after: None,
            com2_input: None,
            com2_expect: Vec::new(),
            com2_reject: Vec::new(),
        }
    }
}

const KEYS: &[&str] = &[
    "timeout",
    "expect",
    "expect_any",
    "reject",
    "exit",
    "memory",
    "qemu_args",
    "disks",
    "post",
    "kill_after",
    "com2_input",
    "com2_expect",
    "com2_reject",
];

/// Reads a `[test]` table; unknown keys are errors so a typo cannot silently weaken a test.
pub fn parse(table: Option<&toml::Table>) -> Result<TestSpec, String> {
    let mut s = TestSpec::default();
    let Some(t) = table else { return Ok(s) };
    for k in t.keys() {
        if !KEYS.contains(&k.as_str()) {
            return Err(format!(
                "[test]: unknown key `{k}` (known: {})",
                KEYS.join(", ")
            ));
        }
    }
    let strings = |k: &str| -> Result<Option<Vec<String>>, String> {
        match t.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
                .map(Some)
                .ok_or_else(|| format!("[test]: `{k}` must be an array of strings")),
        }
    };
    if let Some(v) = t.get("timeout") {
        s.timeout = v
            .as_integer()
            .filter(|&n| n > 0)
            .ok_or("[test]: `timeout` must be a positive number of seconds")?
            as u64;
    }
    if let Some(v) = strings("expect")? {
        s.expect = v;
    }
    if let Some(v) = strings("expect_any")? {
        s.expect_any = v;
    }
    if let Some(v) = strings("reject")? {
        s.reject = v;
    }
    if let Some(v) = t.get("exit") {
        s.exit = v
            .as_integer()
            .filter(|n| (0..=15).contains(n))
            .ok_or("[test]: `exit` must be a guest exit code 0..=15")? as u8;
    }
    if let Some(v) = t.get("memory") {
        s.memory = v
            .as_str()
            .ok_or("[test]: `memory` must be a string like \"256M\"")?
            .into();
    }
    if let Some(v) = strings("qemu_args")? {
        s.qemu_args = v;
    }
    if let Some(v) = t.get("disks") {
        let arr = v
            .as_array()
            .ok_or("[test]: `disks` must be an array of tables")?;
        for (i, d) in arr.iter().enumerate() {
            let d = d
                .as_table()
                .ok_or_else(|| format!("[test]: disks[{i}] must be a table"))?;
            s.disks
                .push(disk::parse(d).map_err(|e| format!("[test]: disks[{i}]: {e}"))?);
        }
    }
    if let Some(v) = strings("post")? {
        for p in &v {
            disk::parse_post(p, s.disks.len()).map_err(|e| format!("[test]: post: {e}"))?;
        }
        s.post = v;
    }
    if let Some(v) = t.get("kill_after") {
        s.kill_after = Some(
            v.as_str()
                .ok_or("[test]: `kill_after` must be a string")?
                .to_string(),
        );
    }
    if let Some(v) = t.get("com2_input") {
        let text = v.as_str().ok_or("[test]: `com2_input` must be a string")?;
        s.com2_input = Some(unescape(text).map_err(|e| format!("[test]: `com2_input`: {e}"))?);
    }
    for (key, field) in [
        ("com2_expect", &mut s.com2_expect),
        ("com2_reject", &mut s.com2_reject),
    ] {
        if let Some(v) = strings(key)? {
            *field = v
                .iter()
                .map(|e| unescape(e).map_err(|m| format!("[test]: `{key}`: {m}")))
                .collect::<Result<_, _>>()?;
        }
    }
    Ok(s)
}

/// The bytes a `com2_input` or `com2_expect` string stands for: after TOML's own escapes (in a
/// basic string), `\r`, `\n`, `\t`, `\e` (escape), `\\` and `\xHH` (any byte) are decoded,
/// so a TOML literal string can say `'hello\rworld\n\x04'`.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&c, tail)) = rest.split_first() {
        rest = tail;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some((&e, tail)) = rest.split_first() else {
            return Err(format!("`{text}`: a lone `\\` at the end"));
        };
        rest = tail;
        out.push(match e {
            b'r' => b'\r',
            b'n' => b'\n',
            b't' => b'\t',
            b'e' => 0x1b,
            b'\\' => b'\\',
            b'x' => {
                let hex = rest
                    .get(..2)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("`{text}`: `\\x` needs two hex digits"))?;
                rest = &rest[2..];
                hex
            }
            other => {
                return Err(format!(
                    "`{text}`: unknown escape `\\{}` (known: \\r \\n \\t \\e \\\\ \\xHH)",
                    other as char
                ))
            }
        });
    }
    Ok(out)
}

/// What is wrong with the guest's COM2 output against `com2_expect` (each must appear, in any
/// order: input is echoed as it arrives, so its place among the guest's writes is not fixed)
/// and `com2_reject`.
pub fn judge_com2(spec: &TestSpec, output: &[u8]) -> Vec<String> {
    let has = |e: &[u8]| !e.is_empty() && output.windows(e.len()).any(|w| w == e);
    let missing = spec.com2_expect.iter().filter(|e| !e.is_empty() && !has(e));
    let seen = spec.com2_reject.iter().filter(|e| has(e));
    missing
        .map(|e| format!("COM2: missing expected `{}`", e.escape_ascii()))
        .chain(seen.map(|e| format!("COM2: reject string `{}` seen", e.escape_ascii())))
        .collect()
}

pub use disk::{post_checks, prepare_disks, DiskSpec};

/// Scenario disks: ext2 images built on the host with `mke2fs -d` from a checked-in tree plus
/// generated files, attached to QEMU as virtio-blk-pci devices, and checked after the run.
pub mod disk {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// One `[test] disks` entry, e.g.
    /// `{ tree = "tests/fs/trees/basic", size_mb = 16, block_size = 1024, checksums = true,
    ///    gen = [{ path = "big/1m", size = 1048576 }], debugfs = ["sif /x uid 1000"],
    ///    bins = [{ path = "bin/child", module = "spawn-child" }] }`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct DiskSpec {
        /// Host tree (relative to the repository) copied into the image; none = empty.
        pub tree: Option<String>,
        pub size_mb: u64,
        pub block_size: u32,
        /// Files of pseudo-random content added to the tree: (path in the image, size).
        pub gen: Vec<(String, u64)>,
        /// Guest binaries copied into the image: (path in the image, binary name as a manifest's
        /// `module` names it), for programs that start programs from the file system.
        pub bins: Vec<(String, String)>,
        /// Linux test programs compiled on the host with `musl-gcc -static -O2` into the image:
        /// (path in the image, C source relative to the repository).
        pub cbins: Vec<(String, String)>,
        /// Write `/CHECKSUMS` listing `fnv64 size path` of every regular file, so a guest
        /// program can check everything it reads against the host's view.
        pub checksums: bool,
        /// `debugfs -w -R CMD` run on the image after mke2fs (owners, modes, crafted damage).
        pub debugfs: Vec<String>,
        /// The Linux root image's base system too (Debian's static busybox and its links,
        /// /etc, /proc: `rootfs::stage_base`), for scenarios that run busybox applets.
        pub busybox: bool,
    }

    const KEYS: &[&str] = &[
        "tree",
        "size_mb",
        "block_size",
        "gen",
        "bins",
        "cbins",
        "checksums",
        "debugfs",
        "busybox",
    ];

    pub fn parse(t: &toml::Table) -> Result<DiskSpec, String> {
        for k in t.keys() {
            if !KEYS.contains(&k.as_str()) {
                return Err(format!("unknown key `{k}` (known: {})", KEYS.join(", ")));
            }
        }
        let mut d = DiskSpec {
            tree: None,
            size_mb: 16,
            block_size: 4096,
            gen: Vec::new(),
            bins: Vec::new(),
            cbins: Vec::new(),
            checksums: false,
            debugfs: Vec::new(),
            busybox: false,
        };
        if let Some(v) = t.get("tree") {
            d.tree = Some(v.as_str().ok_or("`tree` must be a path")?.to_string());
        }
        if let Some(v) = t.get("size_mb") {
            d.size_mb = v
                .as_integer()
                .filter(|n| (1..=4096).contains(n))
                .ok_or("`size_mb` must be 1..=4096")? as u64;
        }
        if let Some(v) = t.get("block_size") {
            d.block_size =
                v.as_integer()
                    .filter(|n| [1024, 2048, 4096].contains(n))
                    .ok_or("`block_size` must be 1024, 2048 or 4096")? as u32;
        }
        if let Some(v) = t.get("gen") {
            for g in v.as_array().ok_or("`gen` must be an array")? {
                let path = g.get("path").and_then(|p| p.as_str());
                let size = g.get("size").and_then(|p| p.as_integer());
                match (path, size) {
                    (Some(p), Some(n)) if n >= 0 && !p.contains("..") => d
                        .gen
                        .push((p.trim_start_matches('/').to_string(), n as u64)),
                    _ => return Err("`gen` entries are { path = \"...\", size = N }".into()),
                }
            }
        }
        if let Some(v) = t.get("bins") {
            for b in v.as_array().ok_or("`bins` must be an array")? {
                let path = b.get("path").and_then(|p| p.as_str());
                let module = b.get("module").and_then(|p| p.as_str());
                match (path, module) {
                    (Some(p), Some(m))
                        if !p.contains("..") && !m.is_empty() && !m.contains('/') =>
                    {
                        d.bins
                            .push((p.trim_start_matches('/').to_string(), m.to_string()))
                    }
                    _ => {
                        return Err(
                            "`bins` entries are { path = \"...\", module = \"NAME\" }".into()
                        )
                    }
                }
            }
        }
        if let Some(v) = t.get("cbins") {
            for b in v.as_array().ok_or("`cbins` must be an array")? {
                let path = b.get("path").and_then(|p| p.as_str());
                let src = b.get("src").and_then(|p| p.as_str());
                match (path, src) {
                    (Some(p), Some(c))
                        if !p.contains("..") && !c.contains("..") && c.ends_with(".c") =>
                    {
                        d.cbins
                            .push((p.trim_start_matches('/').to_string(), c.to_string()))
                    }
                    _ => {
                        return Err(
                            "`cbins` entries are { path = \"...\", src = \"tests/....c\" }".into(),
                        )
                    }
                }
            }
        }
        if let Some(v) = t.get("busybox") {
            d.busybox = v.as_bool().ok_or("`busybox` must be true or false")?;
        }
        if let Some(v) = t.get("checksums") {
            d.checksums = v.as_bool().ok_or("`checksums` must be true or false")?;
        }
        if let Some(v) = t.get("debugfs") {
            d.debugfs = v
                .as_array()
                .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
                .ok_or("`debugfs` must be an array of strings")?;
        }
        Ok(d)
    }

    /// A post-run check: `fsck:N` (e2fsck -fn clean on disk N) or
    /// `export-matches:N:DIR` (the image's tree equals the host tree DIR, lost+found aside).
    #[derive(Debug, PartialEq)]
    pub enum Post {
        Fsck(usize),
        Export(usize, String),
    }

    pub fn parse_post(s: &str, ndisks: usize) -> Result<Post, String> {
        let disk = |n: &str| -> Result<usize, String> {
            n.parse::<usize>()
                .ok()
                .filter(|&i| i < ndisks)
                .ok_or_else(|| format!("`{s}`: no disk {n}"))
        };
        if let Some(n) = s.strip_prefix("fsck:") {
            return Ok(Post::Fsck(disk(n)?));
        }
        if let Some(rest) = s.strip_prefix("export-matches:") {
            let (n, dir) = rest
                .split_once(':')
                .ok_or_else(|| format!("`{s}`: export-matches:N:DIR"))?;
            return Ok(Post::Export(disk(n)?, dir.to_string()));
        }
        Err(format!(
            "`{s}`: known checks are fsck:N and export-matches:N:DIR"
        ))
    }

    /// Deterministic file content: an xorshift stream seeded by the path, so a generated file
    /// is the same on every run and different from every other.
    pub fn gen_content(path: &str, size: u64) -> Vec<u8> {
        let mut x = fnv64(path.as_bytes()) | 1;
        let mut v = Vec::with_capacity(size as usize);
        while (v.len() as u64) < size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.truncate(size as usize);
        v
    }

    /// FNV-1a, 64 bit: what the guest programs compute too.
    pub fn fnv64(b: &[u8]) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &c in b {
            h ^= c as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        h
    }

    fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
        std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
        for e in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
            let e = e.map_err(|e| e.to_string())?;
            let (src, dst) = (e.path(), to.join(e.file_name()));
            let ft = e.file_type().map_err(|e| e.to_string())?;
            if ft.is_dir() {
                copy_tree(&src, &dst)?;
            } else if ft.is_symlink() {
                let t = std::fs::read_link(&src).map_err(|e| e.to_string())?;
                std::os::unix::fs::symlink(t, &dst)
                    .map_err(|e| format!("{}: {e}", dst.display()))?;
            } else {
                std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
            }
        }
        Ok(())
    }

    fn checksum_lines(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), String> {
        let dir = root.join(rel);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok())
            .collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e.file_type().map_err(|e| e.to_string())?;
            if ft.is_dir() {
                checksum_lines(root, &r, out)?;
            } else if ft.is_file() {
                let b = std::fs::read(e.path()).map_err(|e| e.to_string())?;
                out.push(format!("{:016x} {} /{r}", fnv64(&b), b.len()));
            }
        }
        Ok(())
    }

    use crate::rootfs::run;

    /// Builds every disk of a scenario into `dir` as `NAME-I.img`; returns the image paths.
    pub fn prepare_disks(
        repo: &Path,
        dir: &Path,
        name: &str,
        disks: &[DiskSpec],
    ) -> Result<Vec<PathBuf>, String> {
        let mut imgs = Vec::new();
        for (i, d) in disks.iter().enumerate() {
            let stage = dir.join(format!("{name}-{i}.tree"));
            let img = dir.join(format!("{name}-{i}.img"));
            let _ = std::fs::remove_dir_all(&stage);
            let _ = std::fs::remove_file(&img);
            std::fs::create_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
            if d.busybox {
                crate::rootfs::stage_base(&stage, Path::new(crate::rootfs::HOST_BUSYBOX))?;
            }
            if let Some(t) = &d.tree {
                copy_tree(&repo.join(t), &stage)?;
            }
            for (p, size) in &d.gen {
                let f = stage.join(p);
                if let Some(parent) = f.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                std::fs::write(&f, gen_content(p, *size))
                    .map_err(|e| format!("{}: {e}", f.display()))?;
            }
            for (p, module) in &d.bins {
                let f = stage.join(p);
                if let Some(parent) = f.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                let bin = crate::repo::Repo {
                    root: repo.to_path_buf(),
                }
                .guest_bin(module);
                std::fs::copy(&bin, &f)
                    .map_err(|e| format!("disk binary `{module}` ({}): {e}", bin.display()))?;
            }
            for (p, src) in &d.cbins {
                let f = stage.join(p);
                if let Some(parent) = f.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                }
                run(Command::new("musl-gcc")
                    .args(["-static", "-O2", "-o"])
                    .arg(&f)
                    .arg(repo.join(src)))
                .map_err(|e| format!("compiling {src} (is musl-tools installed?): {e}"))?;
            }
            if d.checksums {
                let mut lines = Vec::new();
                checksum_lines(&stage, "", &mut lines)?;
                let mut text = lines.join("\n");
                text.push('\n');
                std::fs::write(stage.join("CHECKSUMS"), text).map_err(|e| e.to_string())?;
            }
            run(Command::new("mke2fs")
                .args([
                    "-q",
                    "-F",
                    "-t",
                    "ext2",
                    "-b",
                    &d.block_size.to_string(),
                    "-E",
                    "root_owner=0:0",
                    "-d",
                ])
                .arg(&stage)
                .arg(&img)
                .arg(format!("{}M", d.size_mb)))?;
            for c in &d.debugfs {
                run(Command::new("debugfs").args(["-w", "-R", c]).arg(&img))?;
            }
            imgs.push(img);
        }
        Ok(imgs)
    }

    /// QEMU arguments attaching the images as legacy-capable virtio-blk-pci devices at fixed
    /// PCI slots 4, 5, ... (so their I/O ports and interrupt lines are deterministic; see
    /// docs/filesystem.md). The default NIC is left out: it would share an interrupt line.
    /// `cache=unsafe`: the guest's flushes do not reach the host's disk (the image stays in the
    /// host's page cache, whole after QEMU ends), so a benchmark's `fsync` does not count the
    /// host disk's latency under icount (bench/README.md; the Linux baseline's disk the same).
    pub fn qemu_args(imgs: &[PathBuf]) -> Vec<String> {
        let mut a = vec!["-nic".to_string(), "none".to_string()];
        for (i, img) in imgs.iter().enumerate() {
            a.push("-drive".into());
            a.push(format!(
                "file={},if=none,id=d{i},format=raw,cache=unsafe",
                img.display()
            ));
            a.push("-device".into());
            a.push(format!("virtio-blk-pci,drive=d{i},addr={:#x}", 4 + i));
        }
        a
    }

    fn tree_listing(root: &Path, rel: &str, out: &mut Vec<(String, String)>) -> Result<(), String> {
        let dir = root.join(rel);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok())
            .collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().to_string_lossy().into_owned();
            if rel.is_empty() && name == "lost+found" {
                continue;
            }
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e.file_type().map_err(|e| e.to_string())?;
            if ft.is_dir() {
                out.push((r.clone(), "dir".into()));
                tree_listing(root, &r, out)?;
            } else if ft.is_symlink() {
                let t = std::fs::read_link(e.path()).map_err(|e| e.to_string())?;
                out.push((r, format!("symlink -> {}", t.display())));
            } else {
                let b = std::fs::read(e.path()).map_err(|e| e.to_string())?;
                out.push((r, format!("file {} bytes fnv {:016x}", b.len(), fnv64(&b))));
            }
        }
        Ok(())
    }

    /// Runs the `post` checks; returns every problem found.
    pub fn post_checks(repo: &Path, post: &[String], imgs: &[PathBuf]) -> Vec<String> {
        let mut problems = Vec::new();
        for p in post {
            match parse_post(p, imgs.len()) {
                Err(e) => problems.push(e),
                Ok(Post::Fsck(i)) => {
                    let out = Command::new("e2fsck").arg("-fn").arg(&imgs[i]).output();
                    match out {
                        Ok(o) if o.status.success() => {}
                        Ok(o) => {
                            let text = String::from_utf8_lossy(&o.stdout).into_owned();
                            let lines: Vec<&str> = text.lines().take(12).collect();
                            problems.push(format!(
                                "e2fsck -fn {} not clean ({}):\n      {}",
                                imgs[i].display(),
                                o.status,
                                lines.join("\n      ")
                            ));
                        }
                        Err(e) => problems.push(format!("cannot run e2fsck: {e}")),
                    }
                }
                Ok(Post::Export(i, dir)) => {
                    let out = imgs[i].with_extension("export");
                    let _ = std::fs::remove_dir_all(&out);
                    let mut sink = Vec::new();
                    let args = vec![
                        "export".to_string(),
                        imgs[i].display().to_string(),
                        out.display().to_string(),
                    ];
                    if crate::ext2cmd::run_to(&args, &mut sink) != 0 {
                        problems.push(format!(
                            "export of {} failed: {}",
                            imgs[i].display(),
                            String::from_utf8_lossy(&sink).trim()
                        ));
                        continue;
                    }
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    if let Err(e) = tree_listing(&out, "", &mut got)
                        .and_then(|_| tree_listing(&repo.join(&dir), "", &mut want))
                    {
                        problems.push(e);
                        continue;
                    }
                    if got != want {
                        let mut diff = Vec::new();
                        for w in &want {
                            if !got.contains(w) {
                                diff.push(format!("missing/different: {} ({})", w.0, w.1));
                            }
                        }
                        for g in &got {
                            if !want.contains(g) {
                                diff.push(format!("unexpected: {} ({})", g.0, g.1));
                            }
                        }
                        diff.truncate(12);
                        problems.push(format!(
                            "exported tree differs from {dir}:\n      {}",
                            diff.join("\n      ")
                        ));
                    }
                }
            }
        }
        problems
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn parses_disks_and_posts() {
            let t: toml::Table = r#"
                disks = [{ tree = "tests/fs/trees/basic", size_mb = 8, block_size = 1024, checksums = true, gen = [{ path = "/big/1m", size = 1048576 }], debugfs = ["sif /a uid 5"], bins = [{ path = "/bin/x", module = "spawn-child" }] }, {}]
                post = ["fsck:0", "export-matches:1:tests/fs/expected/x"]
                kill_after = "fsync done"
            "#
            .parse()
            .unwrap();
            let s = super::super::parse(Some(&t)).unwrap();
            assert_eq!(s.disks.len(), 2);
            assert_eq!(s.disks[0].gen, vec![("big/1m".to_string(), 1048576)]);
            assert_eq!(
                s.disks[0].bins,
                vec![("bin/x".to_string(), "spawn-child".to_string())]
            );
            assert_eq!(s.disks[1].block_size, 4096);
            assert_eq!(s.kill_after.as_deref(), Some("fsync done"));
            let bad: toml::Table = "disks = [{ sise_mb = 3 }]".parse().unwrap();
            assert!(super::super::parse(Some(&bad)).is_err());
            let bad: toml::Table = "disks = [{ bins = [{ path = \"x\" }] }]".parse().unwrap();
            assert!(
                super::super::parse(Some(&bad)).is_err(),
                "a binary needs its module"
            );
            let bad: toml::Table =
                "disks = [{ bins = [{ path = \"x\", module = \"../kernel\" }] }]"
                    .parse()
                    .unwrap();
            assert!(
                super::super::parse(Some(&bad)).is_err(),
                "a module is a name, not a path"
            );
            let bad: toml::Table = "post = [\"fsck:1\"]".parse().unwrap();
            assert!(super::super::parse(Some(&bad)).is_err());
            assert_eq!(gen_content("a", 20), gen_content("a", 20));
            assert_ne!(gen_content("a", 20), gen_content("b", 20));
        }
    }
}

/// The first reject string present in `log`, if any.
pub fn rejected<'a>(spec: &'a TestSpec, log: &str) -> Option<&'a str> {
    spec.reject
        .iter()
        .find(|r| !r.is_empty() && log.contains(r.as_str()))
        .map(|s| s.as_str())
}

/// Every way the run fell short, most telling first; empty means PASS.
pub fn judge(spec: &TestSpec, log: &str, outcome: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(r) = rejected(spec, log) {
        problems.push(format!("reject string `{r}` seen in the log"));
    }
    match outcome {
        Outcome::Guest(c) if *c == spec.exit => {}
        Outcome::Guest(c) => problems.push(format!("guest exit code {c}, expected {}", spec.exit)),
        Outcome::Stopped(_) if spec.kill_after.is_some() && rejected(spec, log).is_none() => {}
        Outcome::Stopped(_) => {} // Already reported as the reject string.
        other => problems.push(other.describe()),
    }
    let mut at = 0;
    for e in &spec.expect {
        match log[at..].find(e.as_str()) {
            Some(i) => at += i + e.len(),
            None => {
                let anywhere = log.contains(e.as_str());
                problems.push(if anywhere {
                    format!("expected `{e}` appears, but out of order")
                } else {
                    format!("missing expected `{e}`")
                });
                break; // Later expectations are judged relative to this one; stop here.
            }
        }
    }
    for e in &spec.expect_any {
        if !log.contains(e.as_str()) {
            problems.push(format!("missing expected `{e}`"));
        }
    }
    problems
}

/// The last `n` lines of a log, for failure reports.
pub fn tail(log: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        let t: toml::Table = r#"
            timeout = 60
            expect = ["pong: badge 1", "PASS pingpong"]
            exit = 0
        "#
        .parse()
        .unwrap();
        parse(Some(&t)).unwrap()
    }

    /// Linux is the oracle: every line of a Linux test program the `linux-core` scenario expects
    /// (`PROG: ...`, for the programs whose output does not depend on how they were started) is
    /// what the same C program, compiled the same way, prints on the host's Linux, which must
    /// also give the same exit status.
    #[test]
    fn linux_core_expectations_are_what_linux_prints() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let text = std::fs::read_to_string(repo.join("systems/tests/linux-core.toml")).unwrap();
        let t: toml::Table = text.parse().unwrap();
        let spec = parse(t.get("test").and_then(|v| v.as_table())).unwrap();
        let dir = std::env::temp_dir().join(format!("sawmill-linux-oracle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (prog, status) in [
            ("mem", 0),
            ("efault", 0),
            ("sse", 0),
            ("misc", 0),
            ("segv", -11),
        ] {
            let bin = dir.join(prog);
            let built = std::process::Command::new("musl-gcc")
                .args(["-static", "-O2", "-o"])
                .arg(&bin)
                .arg(repo.join(format!("tests/linux/core/{prog}.c")))
                .status()
                .expect("musl-gcc (scripts/setup.sh installs musl-tools)");
            assert!(built.success(), "compiling {prog}.c");
            let out = std::process::Command::new(&bin).output().unwrap();
            use std::os::unix::process::ExitStatusExt;
            let got = out
                .status
                .code()
                .unwrap_or_else(|| -out.status.signal().unwrap_or(0));
            assert_eq!(got, status, "{prog} on Linux");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let prefix = format!("{prog}: ");
            let expected: Vec<&String> = spec
                .expect
                .iter()
                .filter(|e| e.starts_with(&prefix))
                .collect();
            assert!(
                !expected.is_empty(),
                "the scenario expects nothing of {prog}"
            );
            for e in expected {
                assert!(
                    stdout.lines().any(|l| l == e.as_str()),
                    "`{e}` is not what {prog} prints on Linux:\n{stdout}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn parses_with_defaults() {
        let s = spec();
        assert_eq!(s.timeout, 60);
        assert_eq!(s.reject, vec!["PANIC", "FAIL"]);
        assert_eq!(s.memory, "256M");
        assert_eq!(parse(None).unwrap(), TestSpec::default());
        let bad: toml::Table = "expekt = []".parse().unwrap();
        assert!(parse(Some(&bad)).unwrap_err().contains("`expekt`"));
        let bad: toml::Table = "exit = 300".parse().unwrap();
        assert!(parse(Some(&bad)).is_err());
        let bad: toml::Table = "expect = [1]".parse().unwrap();
        assert!(parse(Some(&bad)).is_err());
    }

    #[test]
    fn judging() {
        let s = spec();
        let good = "boot\npong: badge 1\nping done\nPASS pingpong\n";
        assert!(judge(&s, good, &Outcome::Guest(0)).is_empty());
        let p = judge(&s, good, &Outcome::Guest(1));
        assert_eq!(p, vec!["guest exit code 1, expected 0"]);
        let p = judge(&s, "PASS pingpong\npong: badge 1\n", &Outcome::Guest(0));
        assert_eq!(
            p,
            vec!["expected `PASS pingpong` appears, but out of order"]
        );
        let p = judge(&s, "pong: badge 1\n", &Outcome::Timeout(60));
        assert_eq!(p[0], "timed out after 60s (QEMU killed)");
        assert_eq!(p[1], "missing expected `PASS pingpong`");
        let p = judge(
            &s,
            "pong: badge 1\nKERNEL PANIC: x\n",
            &Outcome::Stopped("x".into()),
        );
        assert_eq!(p[0], "reject string `PANIC` seen in the log");
        let p = judge(&s, good, &Outcome::Qemu(0));
        assert!(p[0].contains("without a guest exit code"));
    }

    #[test]
    fn com2_input_and_expectations() {
        let t: toml::Table = r#"
            com2_input = 'hello\rworld\n\x04\\'
            com2_expect = ["a\r\n", 'b\e[0m\xff']
            com2_reject = ["zz"]
        "#
        .parse()
        .unwrap();
        let s = parse(Some(&t)).unwrap();
        assert_eq!(s.com2_input.as_deref(), Some(&b"hello\rworld\n\x04\\"[..]));
        assert_eq!(
            s.com2_expect,
            vec![b"a\r\n".to_vec(), b"b\x1b[0m\xff".to_vec()]
        );
        assert!(judge_com2(&s, b"xa\r\nyb\x1b[0m\xffz").is_empty());
        assert!(judge_com2(&s, b"b\x1b[0m\xffa\r\n").is_empty());
        assert_eq!(
            judge_com2(&s, b"a\r\nb\x1b[0m\xffzz"),
            vec!["COM2: reject string `zz` seen"]
        );
        assert_eq!(
            judge_com2(&s, b"a\nb\x1b[0m"),
            vec![
                "COM2: missing expected `a\\r\\n`",
                "COM2: missing expected `b\\x1b[0m\\xff`"
            ]
        );
        for bad in [r"'\x4'", r"'\q'", r"'end\'"] {
            let t: toml::Table = format!("com2_input = {bad}").parse().unwrap();
            assert!(parse(Some(&t)).is_err(), "{bad}");
        }
        assert_eq!(parse(None).unwrap().com2_input, None);
    }

    #[test]
    fn tails() {
        assert_eq!(tail("a\nb\nc\n", 2), vec!["b", "c"]);
        assert_eq!(tail("a", 5), vec!["a"]);
    }

    #[test]
    fn expected_in_any_order() {
        let mut s = spec();
        s.expect_any = vec!["beta".into(), "alpha".into()];
        let log = "boot\npong: badge 1\nalpha\nping done\nbeta\nPASS pingpong\n";
        assert!(judge(&s, log, &Outcome::Guest(0)).is_empty());
        let p = judge(
            &s,
            "boot\npong: badge 1\nping done\nbeta\nPASS pingpong\n",
            &Outcome::Guest(0),
        );
        assert_eq!(p, vec!["missing expected `alpha`"]);
    }
}
