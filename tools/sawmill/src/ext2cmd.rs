//! `./sawmill ext2 ...`: inspect and edit ext2 images on the host with our own engine
//! (`sawmill-ext2`), the same code the PFS server runs.
//!
//! Every error names the image path (or host path) and the reason, and exits non-zero.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, FileTimes};
use std::io::{Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sawmill_ext2::{BlockDevice, DevError, FileKind, Fs, SetAttr, Stat};

const USAGE: &str = "usage: sawmill ext2 <command> ...
  ls [-R] IMAGE [PATH]       list a directory (or one file)
  cat IMAGE PATH             write a file to stdout
  stat IMAGE PATH            show an inode
  put IMAGE HOSTFILE PATH    copy a host file into the image
  mkdir IMAGE PATH           make a directory
  rm [-r] IMAGE PATH         remove a file (or a tree with -r)
  mv IMAGE FROM TO           rename or move
  ln [-s] IMAGE TARGET PATH  hard link (or symbolic link with -s)
  export IMAGE HOSTDIR       extract the whole tree
  import HOSTDIR IMAGE       copy a host tree into the image's root
  check IMAGE                consistency report";

/// A file-backed device (pread/pwrite through std).
pub(crate) struct FileDevice {
    file: File,
    size: u64,
}

impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), DevError> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.size)
        {
            return Err(DevError);
        }
        self.file.read_exact_at(buf, offset).map_err(|_| DevError)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), DevError> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.size)
        {
            return Err(DevError);
        }
        self.file.write_all_at(buf, offset).map_err(|_| DevError)
    }
    fn flush(&mut self) -> Result<(), DevError> {
        self.file.sync_data().map_err(|_| DevError)
    }
}

pub(crate) type Image = Fs<FileDevice>;
type CmdResult = Result<i32, String>;

pub fn main(args: &[String]) -> i32 {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let code = run_to(args, &mut out);
    if out.flush().is_err() {
        return 1;
    }
    code
}

/// Like [`main`], with standard output going to `out` (tests read it back).
pub fn run_to(args: &[String], out: &mut dyn Write) -> i32 {
    match run(args, out) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("sawmill ext2: {msg}");
            1
        }
    }
}

pub(crate) fn open_image(path: &str, write: bool) -> Result<Image, String> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))?;
    // A block device reports length 0 in its metadata; seeking to the end gives its size.
    let size = (&file)
        .seek(std::io::SeekFrom::End(0))
        .map_err(|e| format!("{path}: {e}"))?;
    let mut fs = Fs::open(FileDevice { file, size }).map_err(|e| format!("{path}: {e}"))?;
    if write && !fs.is_writable() {
        return Err(format!(
            "{path}: image has features this engine cannot write"
        ));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    fs.set_time(now.min(u32::MAX as u64) as u32);
    Ok(fs)
}

fn finish(mut fs: Image, image: &str) -> CmdResult {
    fs.flush().map_err(|e| format!("{image}: {e}"))?;
    Ok(0)
}

/// Splits leading `-x` flags (from `allowed`) from the positional words.
fn flags<'a>(args: &'a [String], allowed: &str) -> Result<(HashSet<char>, Vec<&'a str>), String> {
    let mut set = HashSet::new();
    let mut pos = Vec::new();
    for a in args {
        if a.len() > 1 && a.starts_with('-') && pos.is_empty() {
            for c in a[1..].chars() {
                if !allowed.contains(c) {
                    return Err(format!("unknown option -{c}\n{USAGE}"));
                }
                set.insert(c);
            }
        } else {
            pos.push(a.as_str());
        }
    }
    Ok((set, pos))
}

fn want(pos: &[&str], min: usize, max: usize) -> Result<(), String> {
    if pos.len() < min || pos.len() > max {
        return Err(format!("wrong number of arguments\n{USAGE}"));
    }
    Ok(())
}

fn run(args: &[String], out: &mut dyn Write) -> CmdResult {
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return Ok(2);
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "ls" => {
            let (f, p) = flags(rest, "R")?;
            want(&p, 1, 2)?;
            cmd_ls(
                p[0],
                p.get(1).copied().unwrap_or("/"),
                f.contains(&'R'),
                out,
            )
        }
        "cat" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 2, 2)?;
            cmd_cat(p[0], p[1], out)
        }
        "stat" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 2, 2)?;
            cmd_stat(p[0], p[1], out)
        }
        "put" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 3, 3)?;
            cmd_put(p[0], p[1], p[2])
        }
        "mkdir" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 2, 2)?;
            let mut fs = open_image(p[0], true)?;
            let (dir, name) = fs
                .resolve_parent(p[1].as_bytes())
                .map_err(|e| format!("{}: {e}", p[1]))?;
            fs.mkdir(dir, name, 0o755, 0, 0)
                .map_err(|e| format!("{}: {e}", p[1]))?;
            finish(fs, p[0])
        }
        "rm" => {
            let (f, p) = flags(rest, "r")?;
            want(&p, 2, 2)?;
            cmd_rm(p[0], p[1], f.contains(&'r'))
        }
        "mv" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 3, 3)?;
            cmd_mv(p[0], p[1], p[2])
        }
        "ln" => {
            let (f, p) = flags(rest, "s")?;
            want(&p, 3, 3)?;
            cmd_ln(p[0], p[1], p[2], f.contains(&'s'))
        }
        "export" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 2, 2)?;
            cmd_export(p[0], Path::new(p[1]))
        }
        "import" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 2, 2)?;
            cmd_import(Path::new(p[0]), p[1])
        }
        "check" => {
            let (_, p) = flags(rest, "")?;
            want(&p, 1, 1)?;
            cmd_check(p[0], out)
        }
        "help" | "-h" | "--help" => {
            writeln!(out, "{USAGE}").map_err(|e| format!("stdout: {e}"))?;
            Ok(0)
        }
        other => Err(format!("unknown command '{other}'\n{USAGE}")),
    }
}

fn resolve(fs: &mut Image, path: &str, follow: bool) -> Result<u32, String> {
    fs.resolve_path(path.as_bytes(), follow)
        .map_err(|e| format!("{path}: {e}"))
}

fn join(dir: &str, name: &[u8]) -> String {
    let n = String::from_utf8_lossy(name);
    if dir.ends_with('/') {
        format!("{dir}{n}")
    } else {
        format!("{dir}/{n}")
    }
}

// ---- listing ------------------------------------------------------------------------------

fn mode_string(st: &Stat) -> String {
    let t = match st.kind {
        FileKind::Regular => '-',
        FileKind::Dir => 'd',
        FileKind::Symlink => 'l',
        FileKind::CharDev => 'c',
        FileKind::BlockDev => 'b',
        FileKind::Fifo => 'p',
        FileKind::Socket => 's',
        FileKind::Unknown => '?',
    };
    let m = st.mode;
    let mut s = String::from(t);
    for (shift, special, lower, upper) in [
        (6, 0o4000, 's', 'S'),
        (3, 0o2000, 's', 'S'),
        (0, 0o1000, 't', 'T'),
    ] {
        let bits = (m >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        let x = bits & 1 != 0;
        s.push(match (m & special != 0, x) {
            (true, true) => lower,
            (true, false) => upper,
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// UTC "YYYY-MM-DD HH:MM" without a date library (days-from-civil, inverted).
fn fmt_time(t: u32) -> String {
    let secs = t as i64;
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

fn ls_line(fs: &mut Image, ino: u32, name: &[u8], out: &mut dyn Write) -> Result<(), String> {
    let st = fs
        .stat(ino)
        .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(name)))?;
    let size = match st.kind {
        FileKind::CharDev | FileKind::BlockDev => format!("{}, {}", st.rdev.0, st.rdev.1),
        _ => st.size.to_string(),
    };
    let mut line = format!(
        "{} {:>3} {:>5} {:>5} {:>10} {} {}",
        mode_string(&st),
        st.nlink,
        st.uid,
        st.gid,
        size,
        fmt_time(st.mtime),
        String::from_utf8_lossy(name)
    );
    if st.kind == FileKind::Symlink {
        if let Ok(t) = fs.readlink(ino) {
            line.push_str(" -> ");
            line.push_str(&String::from_utf8_lossy(&t));
        }
    }
    writeln!(out, "{line}").map_err(|e| format!("stdout: {e}"))
}

fn cmd_ls(image: &str, path: &str, recursive: bool, out: &mut dyn Write) -> CmdResult {
    let mut fs = open_image(image, false)?;
    let ino = resolve(&mut fs, path, true)?;
    if fs.stat(ino).map_err(|e| format!("{path}: {e}"))?.kind != FileKind::Dir {
        ls_line(&mut fs, ino, path.as_bytes(), out)?;
        return Ok(0);
    }
    let mut seen = HashSet::new();
    let mut queue = vec![(path.to_string(), ino)];
    let mut first = true;
    while let Some((dpath, dino)) = queue.pop() {
        if !seen.insert(dino) {
            return Err(format!("{dpath}: directory cycle"));
        }
        if recursive {
            if !first {
                writeln!(out).ok();
            }
            writeln!(out, "{dpath}:").ok();
        }
        first = false;
        let mut entries = fs.readdir(dino).map_err(|e| format!("{dpath}: {e}"))?;
        entries.retain(|e| e.name != b"." && e.name != b"..");
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subdirs = Vec::new();
        for e in &entries {
            ls_line(&mut fs, e.ino, &e.name, out)?;
            if recursive
                && fs
                    .stat(e.ino)
                    .map(|s| s.kind == FileKind::Dir)
                    .unwrap_or(false)
            {
                subdirs.push((join(&dpath, &e.name), e.ino));
            }
        }
        queue.extend(subdirs.into_iter().rev());
    }
    Ok(0)
}

fn cmd_cat(image: &str, path: &str, out: &mut dyn Write) -> CmdResult {
    let mut fs = open_image(image, false)?;
    let ino = resolve(&mut fs, path, true)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut off = 0u64;
    loop {
        let n = fs
            .read(ino, off, &mut buf)
            .map_err(|e| format!("{path}: {e}"))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])
            .map_err(|e| format!("stdout: {e}"))?;
        off += n as u64;
    }
    out.flush().map_err(|e| format!("stdout: {e}"))?;
    Ok(0)
}

fn cmd_stat(image: &str, path: &str, out: &mut dyn Write) -> CmdResult {
    let mut fs = open_image(image, false)?;
    let ino = resolve(&mut fs, path, false)?;
    let st = fs.stat(ino).map_err(|e| format!("{path}: {e}"))?;
    writeln!(out, "  File: {path}").map_err(|e| format!("stdout: {e}"))?;
    writeln!(
        out,
        " Inode: {}   Type: {:?}   Mode: {:04o} ({})",
        st.ino,
        st.kind,
        st.mode & 0o7777,
        mode_string(&st)
    )
    .map_err(|e| format!("stdout: {e}"))?;
    writeln!(
        out,
        " Links: {}   Uid: {}   Gid: {}",
        st.nlink, st.uid, st.gid
    )
    .map_err(|e| format!("stdout: {e}"))?;
    writeln!(
        out,
        "  Size: {}   Blocks (512B): {}   Flags: {:#x}",
        st.size, st.sectors, st.flags
    )
    .map_err(|e| format!("stdout: {e}"))?;
    if matches!(st.kind, FileKind::CharDev | FileKind::BlockDev) {
        writeln!(out, "Device: {}, {}", st.rdev.0, st.rdev.1)
            .map_err(|e| format!("stdout: {e}"))?;
    }
    if st.kind == FileKind::Symlink {
        let t = fs.readlink(ino).map_err(|e| format!("{path}: {e}"))?;
        writeln!(out, "Target: {}", String::from_utf8_lossy(&t))
            .map_err(|e| format!("stdout: {e}"))?;
    }
    writeln!(out, "Access: {} ({})", fmt_time(st.atime), st.atime)
        .map_err(|e| format!("stdout: {e}"))?;
    writeln!(out, "Modify: {} ({})", fmt_time(st.mtime), st.mtime)
        .map_err(|e| format!("stdout: {e}"))?;
    writeln!(out, "Change: {} ({})", fmt_time(st.ctime), st.ctime)
        .map_err(|e| format!("stdout: {e}"))?;
    Ok(0)
}

// ---- writing ------------------------------------------------------------------------------

/// Copies host file contents into inode `ino`, leaving all-zero blocks as holes.
fn copy_in(fs: &mut Image, ino: u32, host: &Path, ipath: &str) -> Result<(), String> {
    let mut f = File::open(host).map_err(|e| format!("{}: {e}", host.display()))?;
    let bs = fs.block_size() as usize;
    let mut buf = vec![0u8; 64 * bs];
    let mut off = 0u64;
    fs.truncate(ino, 0).map_err(|e| format!("{ipath}: {e}"))?;
    loop {
        let mut n = 0;
        while n < buf.len() {
            let r = f
                .read(&mut buf[n..])
                .map_err(|e| format!("{}: {e}", host.display()))?;
            if r == 0 {
                break;
            }
            n += r;
        }
        if n == 0 {
            break;
        }
        for (i, chunk) in buf[..n].chunks(bs).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                fs.write(ino, off + (i * bs) as u64, chunk)
                    .map_err(|e| format!("{ipath}: {e}"))?;
            }
        }
        off += n as u64;
        if n < buf.len() {
            break;
        }
    }
    fs.truncate(ino, off).map_err(|e| format!("{ipath}: {e}"))
}

fn cmd_put(image: &str, host: &str, path: &str) -> CmdResult {
    let md = fs::metadata(host).map_err(|e| format!("{host}: {e}"))?;
    if !md.is_file() {
        return Err(format!("{host}: not a regular file"));
    }
    let mut fs = open_image(image, true)?;
    let mut target = path.to_string();
    if let Ok(ino) = fs.resolve_path(path.as_bytes(), true) {
        if fs
            .stat(ino)
            .map(|s| s.kind == FileKind::Dir)
            .unwrap_or(false)
        {
            let base = Path::new(host)
                .file_name()
                .ok_or(format!("{host}: no file name"))?;
            target = join(path, base.as_bytes());
        }
    }
    let ino = match fs.resolve_path(target.as_bytes(), true) {
        Ok(ino) => ino,
        Err(sawmill_ext2::Error::NotFound) => {
            let (dir, name) = fs
                .resolve_parent(target.as_bytes())
                .map_err(|e| format!("{target}: {e}"))?;
            fs.create(dir, name, (md.mode() & 0o7777) as u16, md.uid(), md.gid())
                .map_err(|e| format!("{target}: {e}"))?
        }
        Err(e) => return Err(format!("{target}: {e}")),
    };
    copy_in(&mut fs, ino, Path::new(host), &target)?;
    finish(fs, image)
}

/// Removes `name` from `dir`, recursing into directories when `recursive`.
fn remove(
    fs: &mut Image,
    dir: u32,
    name: &[u8],
    path: &str,
    recursive: bool,
    depth: u32,
) -> Result<(), String> {
    let ino = fs.lookup(dir, name).map_err(|e| format!("{path}: {e}"))?;
    let st = fs.stat(ino).map_err(|e| format!("{path}: {e}"))?;
    if st.kind != FileKind::Dir {
        return fs.unlink(dir, name).map_err(|e| format!("{path}: {e}"));
    }
    if !recursive {
        return Err(format!("{path}: is a directory (use rm -r)"));
    }
    if depth > 4096 {
        return Err(format!("{path}: directory tree too deep"));
    }
    for e in fs.readdir(ino).map_err(|e| format!("{path}: {e}"))? {
        if e.name != b"." && e.name != b".." {
            remove(fs, ino, &e.name, &join(path, &e.name), true, depth + 1)?;
        }
    }
    fs.rmdir(dir, name).map_err(|e| format!("{path}: {e}"))
}

fn cmd_rm(image: &str, path: &str, recursive: bool) -> CmdResult {
    let mut fs = open_image(image, true)?;
    let (dir, name) = fs
        .resolve_parent(path.as_bytes())
        .map_err(|e| format!("{path}: {e}"))?;
    remove(&mut fs, dir, name, path, recursive, 0)?;
    finish(fs, image)
}

fn cmd_mv(image: &str, from: &str, to: &str) -> CmdResult {
    let mut fs = open_image(image, true)?;
    let (sdir, sname) = fs
        .resolve_parent(from.as_bytes())
        .map_err(|e| format!("{from}: {e}"))?;
    fs.lookup(sdir, sname).map_err(|e| format!("{from}: {e}"))?;
    // Moving onto an existing directory puts the source inside it, like mv(1).
    let mut dest = to.to_string();
    if let Ok(ino) = fs.resolve_path(to.as_bytes(), true) {
        if fs
            .stat(ino)
            .map(|s| s.kind == FileKind::Dir)
            .unwrap_or(false)
        {
            dest = join(to, sname);
        }
    }
    let (ddir, dname) = fs
        .resolve_parent(dest.as_bytes())
        .map_err(|e| format!("{dest}: {e}"))?;
    fs.rename(sdir, sname, ddir, dname)
        .map_err(|e| format!("{from} -> {dest}: {e}"))?;
    finish(fs, image)
}

fn cmd_ln(image: &str, target: &str, path: &str, symbolic: bool) -> CmdResult {
    let mut fs = open_image(image, true)?;
    let (dir, name) = fs
        .resolve_parent(path.as_bytes())
        .map_err(|e| format!("{path}: {e}"))?;
    if symbolic {
        fs.symlink(dir, name, target.as_bytes(), 0, 0)
            .map_err(|e| format!("{path}: {e}"))?;
    } else {
        let ino = resolve(&mut fs, target, false)?;
        fs.link(ino, dir, name)
            .map_err(|e| format!("{path}: {e}"))?;
    }
    finish(fs, image)
}

fn cmd_check(image: &str, out: &mut dyn Write) -> CmdResult {
    let mut fs = open_image(image, false)?;
    let rep = fs.check().map_err(|e| format!("{image}: {e}"))?;
    if rep.is_clean() {
        writeln!(
            out,
            "{image}: clean, {} inodes, {} directories, {} blocks in use",
            rep.inodes_used, rep.dirs, rep.blocks_used
        )
        .map_err(|e| format!("stdout: {e}"))?;
        Ok(0)
    } else {
        for p in &rep.problems {
            writeln!(out, "{image}: {p}").map_err(|e| format!("stdout: {e}"))?;
        }
        writeln!(out, "{image}: {} problem(s) found", rep.problems.len())
            .map_err(|e| format!("stdout: {e}"))?;
        Ok(1)
    }
}

// ---- export -------------------------------------------------------------------------------

fn set_times(path: &Path, atime: u32, mtime: u32) -> std::io::Result<()> {
    let f = File::open(path)?;
    let t = |s: u32| UNIX_EPOCH + Duration::from_secs(s as u64);
    f.set_times(
        FileTimes::new()
            .set_accessed(t(atime))
            .set_modified(t(mtime)),
    )
}

struct Exporter<'a> {
    fs: &'a mut Image,
    links: HashMap<u32, PathBuf>,
    dirs_seen: HashSet<u32>,
    warnings: u32,
    is_root: bool,
}

impl Exporter<'_> {
    fn warn(&mut self, msg: String) {
        eprintln!("sawmill ext2: warning: {msg}");
        self.warnings += 1;
    }

    fn dir(&mut self, ino: u32, ipath: &str, host: &Path, depth: u32) -> Result<(), String> {
        if !self.dirs_seen.insert(ino) || depth > 4096 {
            return Err(format!("{ipath}: directory cycle"));
        }
        let entries = self.fs.readdir(ino).map_err(|e| format!("{ipath}: {e}"))?;
        for e in entries {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            if e.name.contains(&b'/') {
                return Err(format!("{ipath}: entry with '/' in its name"));
            }
            let ip = join(ipath, &e.name);
            let hp = host.join(std::ffi::OsStr::from_bytes(&e.name));
            self.entry(e.ino, &ip, &hp, depth)?;
        }
        Ok(())
    }

    fn entry(&mut self, ino: u32, ipath: &str, hp: &Path, depth: u32) -> Result<(), String> {
        let st = self.fs.stat(ino).map_err(|e| format!("{ipath}: {e}"))?;
        let herr = |e: std::io::Error| format!("{}: {e}", hp.display());
        if st.kind != FileKind::Dir && st.nlink > 1 {
            if let Some(first) = self.links.get(&ino) {
                return fs::hard_link(first, hp).map_err(herr);
            }
            self.links.insert(ino, hp.to_path_buf());
        }
        match st.kind {
            FileKind::Dir => {
                match fs::create_dir(hp) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && hp.is_dir() => {}
                    Err(e) => return Err(herr(e)),
                }
                self.dir(ino, ipath, hp, depth + 1)?;
            }
            FileKind::Regular => {
                let f = File::create(hp).map_err(herr)?;
                let mut buf = vec![0u8; 1 << 16];
                let mut off = 0u64;
                let bs = self.fs.block_size() as u64;
                loop {
                    let n = self
                        .fs
                        .read(ino, off, &mut buf)
                        .map_err(|e| format!("{ipath}: {e}"))?;
                    if n == 0 {
                        break;
                    }
                    // Keep holes: skip all-zero blocks instead of writing them.
                    for (i, chunk) in buf[..n].chunks(bs as usize).enumerate() {
                        if chunk.iter().any(|&b| b != 0) {
                            f.write_all_at(chunk, off + i as u64 * bs).map_err(herr)?;
                        }
                    }
                    off += n as u64;
                }
                f.set_len(st.size).map_err(herr)?;
            }
            FileKind::Symlink => {
                let t = self.fs.readlink(ino).map_err(|e| format!("{ipath}: {e}"))?;
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&t), hp).map_err(herr)?;
            }
            FileKind::Fifo | FileKind::CharDev | FileKind::BlockDev => {
                let mut c = std::process::Command::new("mknod");
                c.arg(hp);
                match st.kind {
                    FileKind::Fifo => c.arg("p"),
                    FileKind::CharDev => {
                        c.args(["c", &st.rdev.0.to_string(), &st.rdev.1.to_string()])
                    }
                    _ => c.args(["b", &st.rdev.0.to_string(), &st.rdev.1.to_string()]),
                };
                match c.status() {
                    Ok(s) if s.success() => {}
                    _ => {
                        self.warn(format!("{ipath}: could not create special file (skipped)"));
                        return Ok(());
                    }
                }
            }
            FileKind::Socket => {
                self.warn(format!("{ipath}: socket skipped"));
                return Ok(());
            }
            FileKind::Unknown => {
                self.warn(format!("{ipath}: unknown file type skipped"));
                return Ok(());
            }
        }
        // Owner first: chown clears set-id bits, so the mode comes after it.
        if self.is_root {
            std::os::unix::fs::lchown(hp, Some(st.uid), Some(st.gid)).map_err(herr)?;
        }
        if st.kind != FileKind::Symlink {
            fs::set_permissions(hp, fs::Permissions::from_mode((st.mode & 0o7777) as u32))
                .map_err(herr)?;
        }
        if matches!(st.kind, FileKind::Regular | FileKind::Dir) {
            // Directory times last, after their contents were written.
            set_times(hp, st.atime, st.mtime).map_err(herr)?;
        } else {
            // Opening a FIFO or device to set its times could block or fail; touch -h sets
            // them by name (std has no utimensat).
            let ok = std::process::Command::new("touch")
                .args(["-h", "-d", &format!("@{}", st.mtime)])
                .arg(hp)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                self.warn(format!("{ipath}: could not set times"));
            }
        }
        Ok(())
    }
}

fn cmd_export(image: &str, host: &Path) -> CmdResult {
    let mut fs = open_image(image, false)?;
    fs::create_dir_all(host).map_err(|e| format!("{}: {e}", host.display()))?;
    let is_root = fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    let root = fs.root();
    let st = fs.stat(root).map_err(|e| format!("/: {e}"))?;
    let mut ex = Exporter {
        fs: &mut fs,
        links: HashMap::new(),
        dirs_seen: HashSet::new(),
        warnings: 0,
        is_root,
    };
    ex.dir(root, "/", host, 0)?;
    fs::set_permissions(host, fs::Permissions::from_mode((st.mode & 0o7777) as u32))
        .and_then(|_| set_times(host, st.atime, st.mtime))
        .map_err(|e| format!("{}: {e}", host.display()))?;
    Ok(0)
}

// ---- import -------------------------------------------------------------------------------

struct Importer<'a> {
    fs: &'a mut Image,
    links: HashMap<(u64, u64), u32>,
}

impl Importer<'_> {
    fn dir(&mut self, host: &Path, dir: u32, ipath: &str, depth: u32) -> Result<(), String> {
        if depth > 4096 {
            return Err(format!("{}: tree too deep", host.display()));
        }
        let mut names: Vec<_> = fs::read_dir(host)
            .map_err(|e| format!("{}: {e}", host.display()))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", host.display()))?;
        names.sort();
        for name in names {
            let hp = host.join(&name);
            let ip = join(ipath, name.as_bytes());
            self.entry(&hp, dir, name.as_bytes(), &ip, depth)?;
        }
        Ok(())
    }

    fn entry(
        &mut self,
        hp: &Path,
        dir: u32,
        name: &[u8],
        ip: &str,
        depth: u32,
    ) -> Result<(), String> {
        let md = fs::symlink_metadata(hp).map_err(|e| format!("{}: {e}", hp.display()))?;
        let ierr = |e: sawmill_ext2::Error| format!("{ip}: {e}");
        let ft = md.file_type();
        // An existing directory is merged into and an existing non-directory replaced, as
        // tar does; a directory is never replaced by something else.
        let existing = match self.fs.lookup(dir, name) {
            Ok(ino) => Some(ino),
            Err(sawmill_ext2::Error::NotFound) => None,
            Err(e) => return Err(ierr(e)),
        };
        if let Some(ino) = existing {
            let is_dir = self.fs.stat(ino).map_err(ierr)?.kind == FileKind::Dir;
            if is_dir && !ft.is_dir() {
                return Err(format!(
                    "{ip}: is a directory in the image, cannot replace it"
                ));
            }
            if !is_dir {
                remove(self.fs, dir, name, ip, false, 0)?;
            }
        }
        let perm = (md.mode() & 0o7777) as u16;
        let (uid, gid) = (md.uid(), md.gid());
        if !ft.is_dir() && md.nlink() > 1 {
            if let Some(&ino) = self.links.get(&(md.dev(), md.ino())) {
                return self.fs.link(ino, dir, name).map_err(ierr);
            }
        }
        let ino = if ft.is_dir() {
            let ino = match existing {
                Some(ino) if self.fs.stat(ino).map_err(ierr)?.kind == FileKind::Dir => ino,
                _ => self.fs.mkdir(dir, name, perm, uid, gid).map_err(ierr)?,
            };
            self.dir(hp, ino, ip, depth + 1)?;
            ino
        } else if ft.is_file() {
            let ino = self.fs.create(dir, name, perm, uid, gid).map_err(ierr)?;
            copy_in(self.fs, ino, hp, ip)?;
            ino
        } else if ft.is_symlink() {
            let t = fs::read_link(hp).map_err(|e| format!("{}: {e}", hp.display()))?;
            self.fs
                .symlink(dir, name, t.as_os_str().as_bytes(), uid, gid)
                .map_err(ierr)?
        } else {
            let (kind, rdev) = if ft.is_fifo() {
                (FileKind::Fifo, (0, 0))
            } else if ft.is_socket() {
                (FileKind::Socket, (0, 0))
            } else {
                let r = md.rdev();
                let major = ((r >> 8) & 0xfff) | ((r >> 32) & !0xfff);
                let minor = (r & 0xff) | ((r >> 12) & !0xff);
                let k = if ft.is_char_device() {
                    FileKind::CharDev
                } else {
                    FileKind::BlockDev
                };
                (k, (major as u32, minor as u32))
            };
            self.fs
                .mknod(dir, name, kind, perm, uid, gid, rdev)
                .map_err(ierr)?
        };
        if !ft.is_dir() && md.nlink() > 1 {
            self.links.insert((md.dev(), md.ino()), ino);
        }
        // Attributes last, so a directory's mtime is not disturbed by filling it.
        let t = |s: i64| s.clamp(0, u32::MAX as i64) as u32;
        let attr = SetAttr {
            perm: Some(perm),
            uid: Some(uid),
            gid: Some(gid),
            atime: Some(t(md.atime())),
            mtime: Some(t(md.mtime())),
        };
        self.fs.set_attr(ino, &attr).map_err(ierr)
    }
}

fn cmd_import(host: &Path, image: &str) -> CmdResult {
    let md = fs::metadata(host).map_err(|e| format!("{}: {e}", host.display()))?;
    if !md.is_dir() {
        return Err(format!("{}: not a directory", host.display()));
    }
    let mut fs = open_image(image, true)?;
    let root = fs.root();
    let mut im = Importer {
        fs: &mut fs,
        links: HashMap::new(),
    };
    im.dir(host, root, "/", 0)?;
    // The root takes the tree's own attributes, after it was filled (as `tar` restores `.`):
    // otherwise its mtime is whenever the last entry went in.
    let t = |s: i64| s.clamp(0, u32::MAX as i64) as u32;
    let attr = SetAttr {
        perm: Some((md.mode() & 0o7777) as u16),
        uid: Some(md.uid()),
        gid: Some(md.gid()),
        atime: Some(t(md.atime())),
        mtime: Some(t(md.mtime())),
    };
    fs.set_attr(root, &attr).map_err(|e| format!("/: {e}"))?;
    finish(fs, image)
}
