//! The Linux test harness: Linux is the oracle. Each case of a test list (`tests/linux/*.txt`)
//! runs twice — on the host (Debian's `/bin/busybox`, or a musl-static test program) in a fresh
//! copy of the input tree, and in sawmill as the first process of the Linux system on an image
//! made from the same tree — and the two must agree on the terminal's output bytes, the exit
//! status, and the tree afterwards (files, modes, owners, sizes, contents, link targets, and
//! the times that are not "now"); the image must also be `e2fsck -fn` clean afterwards.
//!
//! Both sides get a terminal: on the host a pseudo-terminal set up as the console starts for
//! piped input (a serial tty's settings with echo off, output CR LF; 80x24), so programs that ask `isatty` (ls's columns, line buffering)
//! behave alike. Input is fed on the terminal and ended with ^D on both sides.
//!
//! A test list line: `[@root] [@unordered] WORDS... [< FILE]` — busybox arguments (applet
//! first), quoted with '…' or "…"; `@prog NAME ARGS` runs `tests/linux/NAME.c` (built with
//! `musl-gcc -static`) instead; `@survive NAME ARGS` runs it in sawmill only, passing if the
//! program ends (any status) and the system stays up (the hostile program: it would harm a
//! host). `< FILE` feeds `tests/linux/FILE`. `@root` cases need the host run as root (uids
//! shown).
//!
//! `@unordered` compares the output's lines as a multiset (both sides' lines sorted): for
//! commands that print directory entries in readdir order (`find`, `du -a`), which POSIX
//! leaves unspecified and which differs between the host's file system and ext2 (the host run
//! cannot read the same image without mounting it). Use it only where the order is readdir's.
//!
//! The host run's working directory is a copy of the tree somewhere under target/, the guest's
//! is [`GUEST_TREE`]: the host's output has that directory's absolute path replaced by
//! [`GUEST_TREE`] before the comparison (`readlink -f`, `pwd`).
//! Touches: target/linux/harness/ (copies, images, logs), the host's busybox and musl-gcc.

use super::{Boot, Process, Terminal};
use crate::repo::Repo;
use crate::rootfs;
use crate::testcmd::Tally;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The checked-in inputs, relative to the repository.
pub const DIR: &str = "tests/linux";
/// The input tree every case starts from.
pub const TREE: &str = "tests/linux/tree";
/// Where the tree is in the guest's image, and the first process's working directory.
pub const GUEST_TREE: &str = "/t";
/// Where compiled test programs live in the image.
pub const GUEST_BIN: &str = "/opt/bin";
/// Every file of the input tree gets this modification and access time (2023-11-14 22:13:20
/// UTC), so `ls -l`, `stat`, `find -newer` and `tar` agree between the two runs.
pub const TREE_TIME: i64 = 1_700_000_000;
/// The environment of both runs: the default one plus a fixed time zone (the host's
/// /etc/localtime must not matter) and the terminal size busybox falls back to.
/// Sorted by name: the host's `Command` passes its environment sorted, so `env` shows the
/// same order on both sides.
pub const ENV: &[&str] = &[
    "HOME=/root",
    "PATH=/bin:/usr/bin:/sbin:/usr/sbin",
    "TERM=vt100",
    "TZ=UTC0",
];
/// An empty directory added to every copy of the tree (git keeps no empty directories).
pub const EMPTY_DIR: &str = "emptydir";
/// Terminal size of the host's pseudo-terminal (what the console reports).
pub const COLUMNS: u16 = 80;
pub const ROWS: u16 = 24;
const HOST_TIMEOUT: Duration = Duration::from_secs(60);
/// A busybox applet or edge case boots and ends well within this under TCG.
const GUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The hostile program's 100,000 calls take longer.
const SURVIVE_TIMEOUT: Duration = Duration::from_secs(600);
/// After this many boots in a row that never reached proc's last line (and none that did),
/// the remaining cases fail at once instead of each waiting for its timeout.
const BOOT_FAILURES_TO_GIVE_UP: u32 = 3;
const EOF_CHAR: u8 = 0x04;
/// What a `@survive` program prints when the system still answered its last calls.
pub const SURVIVED: &str = ": survived\n";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Busybox,
    Prog(String),
    Survive(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// `FILE:LINE` of the list, for reports.
    pub at: String,
    pub kind: Kind,
    pub args: Vec<String>,
    pub stdin: Option<String>,
    pub root_only: bool,
    /// Output compared as a multiset of lines (readdir order, see the module header).
    pub unordered: bool,
}

impl Case {
    pub fn title(&self) -> String {
        let mut words = vec![self.at.clone()];
        match &self.kind {
            Kind::Busybox => {}
            Kind::Prog(p) => words.push(p.clone()),
            Kind::Survive(p) => words.push(format!("{p} (survive)")),
        }
        words.extend(self.args.iter().cloned());
        if let Some(s) = &self.stdin {
            words.push(format!("< {s}"));
        }
        words.join(" ")
    }

    /// The argv on one side: busybox (same path on both) or a test program.
    fn argv(&self, prog_dir: &str) -> Vec<String> {
        let mut v = match &self.kind {
            Kind::Busybox => vec![rootfs::HOST_BUSYBOX.to_string()],
            Kind::Prog(p) | Kind::Survive(p) => vec![format!("{prog_dir}/{p}")],
        };
        v.extend(self.args.iter().cloned());
        v
    }
}

/// Splits a line into words: blanks separate, '…' and "…" quote (no escapes inside '…';
/// `\"` and `\\` inside "…"), `\` outside quotes escapes the next character.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut have = false;
    let mut it = line.chars();
    while let Some(c) = it.next() {
        match c {
            ' ' | '\t' => {
                if have {
                    words.push(std::mem::take(&mut cur));
                    have = false;
                }
            }
            '\'' => {
                have = true;
                loop {
                    match it.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err("unterminated '".into()),
                    }
                }
            }
            '"' => {
                have = true;
                loop {
                    match it.next() {
                        Some('"') => break,
                        Some('\\') => match it.next() {
                            Some(x @ ('"' | '\\')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err("unterminated \"".into()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err("unterminated \"".into()),
                    }
                }
            }
            '\\' => {
                have = true;
                cur.push(it.next().ok_or("trailing \\")?);
            }
            c => {
                have = true;
                cur.push(c);
            }
        }
    }
    if have {
        words.push(cur);
    }
    Ok(words)
}

fn prog_name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Parses a test list (see the module doc); `file` names it in errors and case titles.
pub fn parse_list(file: &str, text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{file}:{}", i + 1);
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = split_words(line).map_err(|e| format!("{at}: {e}"))?;
        let (mut root_only, mut unordered) = (false, false);
        loop {
            match words.first().map(String::as_str) {
                Some("@root") if !root_only => root_only = true,
                Some("@unordered") if !unordered => unordered = true,
                _ => break,
            }
            words.remove(0);
        }
        let first = words.first().cloned().unwrap_or_default();
        let kind = match first.as_str() {
            w @ ("@prog" | "@survive") => {
                let survive = w == "@survive";
                words.remove(0);
                if words.is_empty() || !prog_name_ok(&words[0]) {
                    return Err(format!("{at}: {w} needs a program name"));
                }
                let p = words.remove(0);
                if survive {
                    Kind::Survive(p)
                } else {
                    Kind::Prog(p)
                }
            }
            "" => return Err(format!("{at}: no command")),
            w if w.starts_with('@') => return Err(format!("{at}: unknown marker {w}")),
            _ => Kind::Busybox,
        };
        let mut stdin = None;
        if words.len() >= 2 && words[words.len() - 2] == "<" {
            let f = words.pop().unwrap_or_default();
            words.pop();
            if f.contains("..") || f.starts_with('/') {
                return Err(format!("{at}: `< {f}`: a file under {DIR}"));
            }
            stdin = Some(f);
        }
        if kind == Kind::Busybox && words.is_empty() {
            return Err(format!("{at}: no applet"));
        }
        cases.push(Case {
            at,
            kind,
            args: words,
            stdin,
            root_only,
            unordered,
        });
    }
    Ok(cases)
}

/// Terminal output as a pipe would have it: CR LF → LF.
pub fn strip_cr(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    for (i, &c) in b.iter().enumerate() {
        if c == b'\r' && b.get(i + 1) == Some(&b'\n') {
            continue;
        }
        out.push(c);
    }
    out
}

/// The bytes typed on the terminal: the input, then ^D (twice if the last line is not ended:
/// the first one hands over the partial line, the second is end of file).
pub fn terminal_input(stdin: &[u8]) -> Vec<u8> {
    let mut v = stdin.to_vec();
    if !v.is_empty() && !v.ends_with(b"\n") {
        v.push(EOF_CHAR);
    }
    v.push(EOF_CHAR);
    v
}

/// Output with its lines sorted, for an `@unordered` case (the last line's newline is kept
/// apart: a missing final newline still differs).
pub fn sorted_lines(b: &[u8]) -> Vec<u8> {
    let (body, ends) = match b.strip_suffix(b"\n") {
        Some(body) => (body, true),
        None => (b, false),
    };
    let mut lines: Vec<&[u8]> = body.split(|&c| c == b'\n').collect();
    if body.is_empty() {
        lines.clear();
    }
    lines.sort_unstable();
    let mut out = lines.join(&b'\n');
    if ends {
        out.push(b'\n');
    }
    out
}

/// The host's output with the absolute path of its working directory (the tree's copy) written
/// as the guest's ([`GUEST_TREE`]): the one difference of place between the two runs.
pub fn as_guest_paths(out: &[u8], host_dir: &Path) -> Vec<u8> {
    let from = host_dir.as_os_str().as_encoded_bytes();
    let mut res = Vec::with_capacity(out.len());
    let mut i = 0;
    while i < out.len() {
        if !from.is_empty() && out[i..].starts_with(from) {
            res.extend_from_slice(GUEST_TREE.as_bytes());
            i += from.len();
        } else {
            res.push(out[i]);
            i += 1;
        }
    }
    res
}

/// A short line diff: common head and tail dropped, the differing middle shown.
pub fn diff(want: &str, got: &str) -> Vec<String> {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let head = w.iter().zip(&g).take_while(|(a, b)| a == b).count();
    let tail = w[head..]
        .iter()
        .rev()
        .zip(g[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = vec![format!("@@ line {} (- host, + sawmill)", head + 1)];
    let shown = 15;
    for l in w[head..w.len() - tail].iter().take(shown) {
        out.push(format!("-{l}"));
    }
    for l in g[head..g.len() - tail].iter().take(shown) {
        out.push(format!("+{l}"));
    }
    if w.len() - tail - head > shown || g.len() - tail - head > shown {
        out.push("(more differences)".into());
    }
    if want.ends_with('\n') != got.ends_with('\n') {
        out.push("(one ends with a newline, the other does not)".into());
    }
    out
}

// ---- the host side ---------------------------------------------------------------------------

/// Sets a path's access and modification time without following a symbolic link.
fn set_time(p: &Path, t: i64) -> Result<(), String> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: NUL in path", p.display()))?;
    let ts = [
        libc::timespec {
            tv_sec: t,
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: t,
            tv_nsec: 0,
        },
    ];
    // SAFETY: a NUL-terminated path and two timespecs, as utimensat(2) takes them.
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r != 0 {
        return Err(format!(
            "{}: {}",
            p.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Gives every entry under `root` (and `root`) the fixed tree time, children first, and the
/// permissions a checkout under umask 022 has (the checkout's umask must not matter).
pub fn fix_times(root: &Path) -> Result<(), String> {
    let perm = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    for e in std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let ft = e.file_type().map_err(|e| e.to_string())?;
        if ft.is_dir() {
            fix_times(&e.path())?;
            continue;
        }
        if ft.is_file() {
            let md = e.metadata().map_err(|e| e.to_string())?;
            perm(
                &e.path(),
                if md.mode() & 0o111 != 0 { 0o755 } else { 0o644 },
            )?;
        }
        set_time(&e.path(), TREE_TIME)?;
    }
    perm(root, 0o755)?;
    set_time(root, TREE_TIME)
}

/// A fresh copy of the input tree at `to`, with the fixed times.
fn fresh_tree(repo: &Repo, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    rootfs::copy_tree(&repo.root.join(TREE), to)?;
    let empty = to.join(EMPTY_DIR);
    std::fs::create_dir_all(&empty).map_err(|e| format!("{}: {e}", empty.display()))?;
    fix_times(to)
}

/// What one side produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub output: Vec<u8>,
    pub status: i32,
}

/// Gives the terminal `tty` exactly the settings `want` (the guest console's).
pub fn set_terminal(tty: &OwnedFd, want: &sawmill_console_api::termios::Termios) {
    // SAFETY: termios is plain data; tcgetattr fills it from a valid terminal descriptor.
    let mut tio: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: as above; tcsetattr reads the termios we pass, cfset*speed only write into it.
    unsafe {
        libc::tcgetattr(tty.as_raw_fd(), &mut tio);
        tio.c_iflag = want.iflag;
        tio.c_oflag = want.oflag;
        tio.c_cflag = want.cflag;
        tio.c_lflag = want.lflag;
        tio.c_line = want.line;
        tio.c_cc = [0; libc::NCCS];
        tio.c_cc[..want.cc.len()].copy_from_slice(&want.cc);
        let speed = want.cflag & libc::CBAUD;
        libc::cfsetispeed(&mut tio, speed);
        libc::cfsetospeed(&mut tio, speed);
        libc::tcsetattr(tty.as_raw_fd(), libc::TCSANOW, &tio);
    }
}

/// Starts `argv` in `cwd` with environment `env` (`NAME=value`) as the leader of a new session
/// on a fresh pseudo-terminal of `rows` x `cols` with exactly the terminal settings `settings`
/// (its controlling terminal, standard input, output and error). Returns the child, the master
/// side and one descriptor of the slave side: while the caller holds it, reading the master
/// never ends early; once it is dropped, reading ends (EIO) when the child and whatever it left
/// behind close theirs.
pub fn spawn_on_pty(
    argv: &[String],
    cwd: &Path,
    env: &[&str],
    settings: &sawmill_console_api::termios::Termios,
    (rows, cols): (u16, u16),
) -> Result<(std::process::Child, OwnedFd, OwnedFd), String> {
    let (mut master, mut slave) = (-1, -1);
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors; null name and termios mean the defaults.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    if r != 0 {
        return Err(format!("openpty: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: openpty just returned these descriptors, and nothing else owns them.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    set_terminal(&slave, settings);
    let dup = |fd: &OwnedFd| fd.try_clone().map_err(|e| format!("dup: {e}"));
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().filter_map(|kv| kv.split_once('=')))
        .stdin(Stdio::from(dup(&slave)?))
        .stdout(Stdio::from(dup(&slave)?))
        .stderr(Stdio::from(dup(&slave)?));
    // SAFETY: between fork and exec only async-signal-safe calls: signal, sigprocmask, setsid
    // and ioctl.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            // As a terminal's login would start it: the signals a terminal sends act, whatever
            // this tool inherited (a test run in the background has SIGINT and SIGQUIT ignored,
            // and ignored signals stay ignored across exec).
            for sig in [
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
                libc::SIGHUP,
                libc::SIGPIPE,
            ] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| format!("{}: {e}", argv[0]))?;
    // The Command holds copies of the slave side: only the child and the caller may keep one.
    drop(cmd);
    Ok((child, master, slave))
}

/// Runs `argv` in `cwd` on a fresh pseudo-terminal (echo off, 80x24), typing `input`.
pub fn host_run(argv: &[String], cwd: &Path, input: &[u8]) -> Result<Outcome, String> {
    // The guest's terminal starts with the console's settings for piped input (a serial tty's,
    // echo off): the pty gets exactly those, so `stty -a` agrees on both sides.
    let settings = sawmill_console_api::Config {
        echo: false,
        ..Default::default()
    }
    .termios();
    let (mut child, master, slave) = spawn_on_pty(argv, cwd, ENV, &settings, (ROWS, COLUMNS))?;
    let mut writer = std::fs::File::from(master.try_clone().map_err(|e| format!("dup: {e}"))?);
    let input = input.to_vec();
    let in_thread = std::thread::spawn(move || {
        let _ = writer.write_all(&input);
        // Kept open until the child is gone: a closed master would hang up the terminal.
        writer
    });
    // Linux may answer a read of the master with EIO as soon as the last slave descriptor
    // closes, while the child's last lines are still in the terminal's buffers (seen on a CI
    // host: the last seven lines of a test's output were lost). So this side holds a slave
    // descriptor until the child is gone and the master has been quiet for QUIET; only then is
    // it dropped, and reading goes on to the EIO that says every other holder (a background
    // job the child left) closed too.
    const QUIET: Duration = Duration::from_millis(100);
    let mut slave = Some(slave);
    let mut output = Vec::new();
    let mut status = None;
    let mut last_data = Instant::now();
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match read_within(&master, &mut buf, Duration::from_millis(20)) {
            PtyRead::Data(n) => {
                output.extend_from_slice(&buf[..n]);
                last_data = Instant::now();
                continue;
            }
            PtyRead::End => break,
            PtyRead::Nothing => {}
        }
        if start.elapsed() > HOST_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "host run timed out after {}s",
                HOST_TIMEOUT.as_secs()
            ));
        }
        if status.is_none() {
            status = child
                .try_wait()
                .map_err(|e| format!("waiting for the host run: {e}"))?;
            if status.is_some() {
                last_data = Instant::now();
            }
        } else if slave.is_some() && last_data.elapsed() > QUIET {
            slave = None;
        }
    }
    let status = match status {
        Some(status) => status,
        None => child
            .wait()
            .map_err(|e| format!("waiting for the host run: {e}"))?,
    };
    drop(in_thread.join());
    use std::os::unix::process::ExitStatusExt;
    let status = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1);
    Ok(Outcome {
        output: strip_cr(&output),
        status,
    })
}

/// What one wait on a pseudo-terminal's master gave.
enum PtyRead {
    Data(usize),
    /// Every slave descriptor is closed (EIO) or the master failed.
    End,
    /// Nothing arrived within the wait.
    Nothing,
}

/// Reads what `master` has, waiting at most `wait` for something to arrive.
fn read_within(master: &OwnedFd, buf: &mut [u8], wait: Duration) -> PtyRead {
    let mut poll = libc::pollfd {
        fd: master.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd that lives across the call.
    let ready = unsafe { libc::poll(&mut poll, 1, wait.as_millis() as libc::c_int) };
    if ready == 0
        || (ready < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted)
    {
        return PtyRead::Nothing;
    }
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    match n {
        n if n > 0 => PtyRead::Data(n as usize),
        n if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
            PtyRead::Nothing
        }
        _ => PtyRead::End,
    }
}

/// Builds `tests/linux/NAME.c` with `musl-gcc -static -O2` into `out_dir` unless up to date.
pub fn build_prog(repo: &Repo, name: &str, out_dir: &Path) -> Result<PathBuf, String> {
    let src = repo.root.join(DIR).join(format!("{name}.c"));
    let bin = out_dir.join(name);
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let s = mtime(&src).ok_or_else(|| format!("{}: missing", src.display()))?;
    if mtime(&bin).is_some_and(|b| b >= s) {
        return Ok(bin);
    }
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let tmp = out_dir.join(format!("{name}.tmp"));
    let out = Command::new("musl-gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| format!("musl-gcc: {e} (apt-get install musl-tools)"))?;
    if !out.status.success() {
        return Err(format!(
            "musl-gcc {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::rename(&tmp, &bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    Ok(bin)
}

// ---- tree comparison ---------------------------------------------------------------------

/// One entry of a tree as both sides can describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    /// `dir`, `file SIZE FNV`, `symlink -> TARGET`, `chr MAJ,MIN` …
    pub what: String,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
}

impl Entry {
    fn show(&self) -> String {
        format!(
            "{} {} {:o} {}:{} mtime {}",
            self.path, self.what, self.perm, self.uid, self.gid, self.mtime
        )
    }
}

/// Whether two entries agree; a time at or after the run's start is "now" on either side and
/// only needs to be "now" on the other (the two runs happen at different moments).
fn same(a: &Entry, b: &Entry, started: i64) -> bool {
    let times = a.mtime == b.mtime || (a.mtime >= started && b.mtime >= started);
    a.path == b.path
        && a.what == b.what
        && a.perm == b.perm
        && a.uid == b.uid
        && a.gid == b.gid
        && times
}

pub fn host_tree(root: &Path, rel: &str, out: &mut Vec<Entry>) -> Result<(), String> {
    let dir = root.join(rel);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let r = format!("{rel}{}", e.file_name().to_string_lossy());
        let md = std::fs::symlink_metadata(e.path()).map_err(|e| e.to_string())?;
        let ft = md.file_type();
        let what = if ft.is_dir() {
            "dir".to_string()
        } else if ft.is_symlink() {
            let t = std::fs::read_link(e.path()).map_err(|e| e.to_string())?;
            format!("symlink -> {}", t.display())
        } else if ft.is_file() {
            let b = std::fs::read(e.path()).map_err(|e| e.to_string())?;
            format!("file {} {:016x}", b.len(), crate::scenario::disk::fnv64(&b))
        } else {
            format!("special {:o}", md.mode() & 0o170000)
        };
        out.push(Entry {
            path: r.clone(),
            what,
            perm: md.mode() & 0o7777,
            uid: md.uid(),
            gid: md.gid(),
            mtime: md.mtime(),
        });
        if ft.is_dir() {
            host_tree(root, &format!("{r}/"), out)?;
        }
    }
    Ok(())
}

/// The same listing of the tree at `at` in an ext2 image, read with our own engine.
pub fn image_tree(img: &Path, at: &str) -> Result<Vec<Entry>, String> {
    use sawmill_ext2::FileKind;
    let mut fs = crate::ext2cmd::open_image(&img.display().to_string(), false)?;
    let top = fs
        .resolve_path(at.as_bytes(), false)
        .map_err(|e| format!("{at}: {e}"))?;
    let mut out = Vec::new();
    let mut queue = vec![(String::new(), top)];
    let mut seen = std::collections::HashSet::new();
    while let Some((rel, dino)) = queue.pop() {
        if !seen.insert(dino) {
            return Err(format!("{at}/{rel}: directory cycle"));
        }
        let mut ents = fs.readdir(dino).map_err(|e| format!("{at}/{rel}: {e}"))?;
        ents.retain(|e| e.name != b"." && e.name != b"..");
        ents.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subdirs = Vec::new();
        for e in ents {
            let r = format!("{rel}{}", String::from_utf8_lossy(&e.name));
            let st = fs.stat(e.ino).map_err(|x| format!("{r}: {x}"))?;
            let what = match st.kind {
                FileKind::Dir => {
                    subdirs.push((format!("{r}/"), e.ino));
                    "dir".to_string()
                }
                FileKind::Symlink => {
                    let t = fs.readlink(e.ino).map_err(|x| format!("{r}: {x}"))?;
                    format!("symlink -> {}", String::from_utf8_lossy(&t))
                }
                FileKind::Regular => {
                    let mut data = vec![0u8; st.size as usize];
                    let mut off = 0;
                    while off < data.len() {
                        let n = fs
                            .read(e.ino, off as u64, &mut data[off..])
                            .map_err(|x| format!("{r}: {x}"))?;
                        if n == 0 {
                            break;
                        }
                        off += n;
                    }
                    data.truncate(off);
                    format!(
                        "file {} {:016x}",
                        data.len(),
                        crate::scenario::disk::fnv64(&data)
                    )
                }
                _ => format!("special {:o}", st.mode as u32 & 0o170000),
            };
            out.push(Entry {
                path: r,
                what,
                perm: st.mode as u32 & 0o7777,
                uid: st.uid,
                gid: st.gid,
                mtime: st.mtime as i64,
            });
        }
        // Depth first in name order, as host_tree lists.
        for s in subdirs.into_iter().rev() {
            queue.push(s);
        }
    }
    // host_tree lists a directory's subtree right after it; sort both the same way.
    out.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    Ok(out)
}

fn tree_problems(want: &[Entry], got: &[Entry], started: i64) -> Vec<String> {
    let mut p = Vec::new();
    for w in want {
        match got.iter().find(|g| g.path == w.path) {
            None => p.push(format!("missing in sawmill: {}", w.show())),
            Some(g) if !same(w, g, started) => {
                p.push(format!("differs: host {} / sawmill {}", w.show(), g.show()))
            }
            Some(_) => {}
        }
    }
    for g in got {
        if !want.iter().any(|w| w.path == g.path) {
            p.push(format!("only in sawmill: {}", g.show()));
        }
    }
    p.truncate(12);
    p
}

pub fn fsck(img: &Path) -> Option<String> {
    match Command::new("e2fsck").arg("-fn").arg(img).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "e2fsck -fn not clean ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .take(8)
                .collect::<Vec<_>>()
                .join(" | ")
        )),
        Err(e) => Some(format!("cannot run e2fsck: {e}")),
    }
}

// ---- running the lists -------------------------------------------------------------------

pub struct Options {
    /// Only cases whose title contains one of these (all when empty).
    pub filters: Vec<String>,
    pub jobs: usize,
    /// Run only the host side (checks the oracle and the programs; no sawmill needed).
    pub host_only: bool,
}

/// The test lists: every `tests/linux/*.txt`, sorted.
pub fn load_cases(repo: &Repo) -> Result<Vec<Case>, String> {
    let dir = repo.root.join(DIR);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        cases.extend(parse_list(&name, &text)?);
    }
    Ok(cases)
}

/// Shared state of one harness run.
struct Work {
    /// Boots that never reached proc's last line while no boot has (see
    /// [`BOOT_FAILURES_TO_GIVE_UP`]); `None` once one has.
    boot_failures: Mutex<Option<u32>>,
    dir: PathBuf,
    progs: PathBuf,
    /// The image every guest run starts from (base system, tree at /t, programs).
    template: PathBuf,
    started: i64,
}

fn prepare(repo: &Repo, cases: &[Case], host_only: bool) -> Result<Work, String> {
    let dir = repo.target().join("linux").join("harness");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let progs = dir.join("bin");
    let mut names: Vec<&str> = cases
        .iter()
        .filter_map(|c| match &c.kind {
            Kind::Prog(p) | Kind::Survive(p) => Some(p.as_str()),
            Kind::Busybox => None,
        })
        .collect();
    names.sort();
    names.dedup();
    for n in &names {
        build_prog(repo, n, &progs)?;
    }
    let template = dir.join("template.img");
    if !host_only {
        let stage = dir.join("template.stage");
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
        rootfs::stage_base(&stage, Path::new(rootfs::HOST_BUSYBOX))?;
        let bin = stage.join(GUEST_BIN.trim_start_matches('/'));
        std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        for n in &names {
            std::fs::copy(progs.join(n), bin.join(n)).map_err(|e| format!("{n}: {e}"))?;
        }
        fresh_tree(repo, &stage.join(GUEST_TREE.trim_start_matches('/')))?;
        let r = rootfs::image_from_stage(&stage, &template, rootfs::DEFAULT_SIZE_MB);
        let _ = std::fs::remove_dir_all(&stage);
        r?;
    }
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok(Work {
        boot_failures: Mutex::new(Some(0)),
        dir,
        progs,
        template,
        started,
    })
}

fn slug(c: &Case) -> String {
    c.at.replace(['.', ':'], "-")
}

/// Runs one case; returns whether it passed and the lines to print.
fn run_case(repo: &Repo, w: &Work, c: &Case, host_only: bool) -> (bool, Vec<String>) {
    let title = c.title();
    let fail = |why: String| (false, vec![format!("FAIL linux {title}: {why}")]);
    let t0 = Instant::now();
    let input = match &c.stdin {
        Some(f) => match std::fs::read(repo.root.join(DIR).join(f)) {
            Ok(b) => terminal_input(&b),
            Err(e) => return fail(format!("{f}: {e}")),
        },
        None => terminal_input(b""),
    };
    let slug = slug(c);
    let host_dir = w.dir.join(format!("{slug}.host"));
    let want = if matches!(c.kind, Kind::Survive(_)) {
        None
    } else {
        if let Err(e) = fresh_tree(repo, &host_dir) {
            return fail(e);
        }
        let progs = w.progs.display().to_string();
        match host_run(&c.argv(&progs), &host_dir, &input) {
            Ok(o) => {
                // Kept for reading: what the oracle printed.
                let _ = std::fs::write(w.dir.join(format!("{slug}.expected")), &o.output);
                Some(o)
            }
            Err(e) => return fail(format!("host: {e}")),
        }
    };
    if host_only {
        let _ = std::fs::remove_dir_all(&host_dir);
        let secs = t0.elapsed().as_secs_f64();
        let status = want.as_ref().map(|o| o.status).unwrap_or(0);
        return (
            true,
            vec![format!(
                "PASS linux {title} (host only, status {status}, {secs:.1}s)"
            )],
        );
    }
    if let Some(n) = *w.boot_failures.lock().unwrap() {
        if n >= BOOT_FAILURES_TO_GIVE_UP {
            return fail(format!(
                "not run: the Linux system did not get to the end of its first process in \
                 {n} boots (see the first failures)"
            ));
        }
    }
    let img = w.dir.join(format!("{slug}.img"));
    let copied = Command::new("cp")
        .args(["--sparse=always"])
        .arg(&w.template)
        .arg(&img)
        .status();
    if !matches!(copied, Ok(s) if s.success()) {
        return fail(format!("cannot copy {}", w.template.display()));
    }
    let out_file = w.dir.join(format!("{slug}.out"));
    let log = w.dir.join(format!("{slug}.log"));
    let b = Boot {
        tag: format!("linux-{slug}"),
        disk: img.clone(),
        process: Process {
            argv: c.argv(GUEST_BIN),
            env: ENV.iter().map(|s| s.to_string()).collect(),
            cwd: Some(GUEST_TREE.into()),
            trace: false,
            no_echo: true,
        },
        terminal: Terminal::Piped {
            input,
            output: out_file.clone(),
        },
        log: log.clone(),
        show_log: false,
        timeout: if matches!(c.kind, Kind::Survive(_)) {
            SURVIVE_TIMEOUT
        } else {
            GUEST_TIMEOUT
        },
        icount: false,
        net: Vec::new(),
    };
    let booted = super::boot(repo, &b);
    {
        let mut f = w.boot_failures.lock().unwrap();
        *f = match (booted.ending.is_ok(), *f) {
            (true, _) | (false, None) => None,
            (false, Some(n)) => Some(n + 1),
        };
    }
    let got_out = strip_cr(&std::fs::read(&out_file).unwrap_or_default());
    let mut problems = Vec::new();
    let mut details = Vec::new();
    match (&booted.ending, &want) {
        (Err(e), _) => problems.push(e.clone()),
        (Ok(end), None) => {
            // Survival: root finished its round after the program ended (every server up), and
            // the program either was killed alone or reported that proc and the file system
            // still answered.
            if !booted.log.contains("root: all done") {
                problems.push("root did not finish after the program ended".into());
            }
            let said = String::from_utf8_lossy(&got_out).contains(SURVIVED);
            if matches!(end, super::Ending::Exited(_)) && !said {
                problems.push(format!("the program exited without `{SURVIVED}`"));
            }
        }
        (Ok(end), Some(want)) => {
            if end.status() != want.status {
                problems.push(format!(
                    "exit status {} in sawmill, {} on the host",
                    end.status(),
                    want.status
                ));
            }
            let mut want_out = as_guest_paths(&want.output, &host_dir);
            let mut got_out = got_out.clone();
            if c.unordered {
                want_out = sorted_lines(&want_out);
                got_out = sorted_lines(&got_out);
            }
            if got_out != want_out {
                problems.push(if c.unordered {
                    "output differs (lines sorted: @unordered)".into()
                } else {
                    "output differs".into()
                });
                details.extend(diff(
                    &String::from_utf8_lossy(&want_out),
                    &String::from_utf8_lossy(&got_out),
                ));
            }
            let mut host = Vec::new();
            match host_tree(&host_dir, "", &mut host).and_then(|_| image_tree(&img, GUEST_TREE)) {
                Ok(got) => {
                    let p = tree_problems(&host, &got, w.started);
                    if !p.is_empty() {
                        problems.push("tree differs afterwards".into());
                        details.extend(p);
                    }
                }
                Err(e) => problems.push(format!("tree comparison: {e}")),
            }
        }
    }
    if let Some(f) = fsck(&img) {
        problems.push(f);
    }
    let secs = t0.elapsed().as_secs_f64();
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(&host_dir);
        let _ = std::fs::remove_file(&img);
        return (true, vec![format!("PASS linux {title} ({secs:.1}s)")]);
    }
    let mut lines = vec![format!(
        "FAIL linux {title}: {} ({secs:.1}s)",
        problems.join("; ")
    )];
    lines.extend(details.into_iter().map(|d| format!("    {d}")));
    lines.push(format!("    debug console: {}", log.display()));
    for l in crate::scenario::tail(&booted.log, 8) {
        lines.push(format!("    | {l}"));
    }
    (false, lines)
}

/// Runs the test lists; every case counts as one test.
pub fn run(repo: &Repo, o: &Options) -> Tally {
    let mut tally = Tally::default();
    let mut cases = match load_cases(repo) {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL linux test lists: {e}");
            tally.failed += 1;
            return tally;
        }
    };
    if !o.filters.is_empty() {
        cases.retain(|c| o.filters.iter().any(|f| c.title().contains(f.as_str())));
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        let n = cases.len();
        cases.retain(|c| !c.root_only);
        if n != cases.len() {
            println!(
                "SKIP linux: {} cases need the host run as root (uids in the output)",
                n - cases.len()
            );
        }
    }
    if o.host_only {
        cases.retain(|c| !matches!(c.kind, Kind::Survive(_)));
    }
    let w = match prepare(repo, &cases, o.host_only) {
        Ok(w) => w,
        Err(e) => {
            println!("FAIL linux harness: {e}");
            tally.failed += 1;
            return tally;
        }
    };
    let t = crate::testcmd::run_parallel(o.jobs, cases, |c| run_case(repo, &w, c, o.host_only));
    tally.passed += t.passed;
    tally.failed += t.failed;
    // The scripted terminal sessions (each a boot of its own).
    let sessions = match super::session::scripts(repo, &o.filters) {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL linux sessions: {e}");
            tally.failed += 1;
            return tally;
        }
    };
    let t = crate::testcmd::run_parallel(o.jobs, sessions, |(name, path)| {
        let start = Instant::now();
        let took = || format!("{:.1}s", start.elapsed().as_secs_f64());
        match super::session::run_one(repo, name, path, o.host_only) {
            Ok(()) => (true, vec![format!("PASS session {name} ({})", took())]),
            Err(e) => (
                false,
                vec![format!("FAIL session {name} ({}): {e}", took())],
            ),
        }
    });
    tally.passed += t.passed;
    tally.failed += t.failed;
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_quotes() {
        assert_eq!(
            split_words(r#"grep -e 'a b' "c\"d" e\ f"#).unwrap(),
            vec!["grep", "-e", "a b", "c\"d", "e f"]
        );
        assert_eq!(split_words("x ''").unwrap(), vec!["x", ""]);
        assert!(split_words("'open").is_err());
    }

    #[test]
    fn lists_parse() {
        let l = parse_list(
            "a.txt",
            "# c\n\nls -l\n@root id\nsort < in/words\n@prog edge segv\n@survive hostile 5\n\
             @unordered @root find .\n",
        )
        .unwrap();
        assert_eq!(l.len(), 6);
        assert!(l[5].unordered && l[5].root_only);
        assert_eq!(l[5].args, vec!["find", "."]);
        assert!(!l[0].unordered);
        assert!(parse_list("a", "@unordered @unordered ls\n").is_err());
        assert_eq!(l[0].args, vec!["ls", "-l"]);
        assert_eq!(l[0].at, "a.txt:3");
        assert!(l[1].root_only);
        assert_eq!(l[2].stdin.as_deref(), Some("in/words"));
        assert_eq!(l[2].args, vec!["sort"]);
        assert_eq!(l[3].kind, Kind::Prog("edge".into()));
        assert_eq!(l[3].argv("/opt/bin"), vec!["/opt/bin/edge", "segv"]);
        assert_eq!(l[4].kind, Kind::Survive("hostile".into()));
        assert_eq!(l[0].argv("x"), vec!["/bin/busybox", "ls", "-l"]);
        assert!(parse_list("a", "@prog ../x\n").is_err());
        assert!(parse_list("a", "@bogus x\n").is_err());
        assert!(parse_list("a", "cat < /etc/passwd\n").is_err());
        assert!(parse_list("a", "@root\n").is_err());
    }

    #[test]
    fn unordered_output_and_host_paths() {
        assert_eq!(sorted_lines(b"./b\n./a\n.\n"), b".\n./a\n./b\n");
        assert_eq!(sorted_lines(b"b\na"), b"a\nb");
        assert_ne!(sorted_lines(b"a\nb\n"), sorted_lines(b"a\nb"));
        // A multiset: a line twice is not the same as once.
        assert_ne!(sorted_lines(b"a\na\n"), sorted_lines(b"a\n"));
        assert_eq!(sorted_lines(b""), b"");
        let d = Path::new("/w/target/x.host");
        assert_eq!(
            as_guest_paths(b"/w/target/x.host/dir/sub\n/w/target/x\n", d),
            b"/t/dir/sub\n/w/target/x\n"
        );
    }

    #[test]
    fn terminal_bytes() {
        assert_eq!(strip_cr(b"a\r\nb\r\r\n\r"), b"a\nb\r\n\r");
        assert_eq!(terminal_input(b""), vec![EOF_CHAR]);
        assert_eq!(terminal_input(b"x\n"), b"x\n\x04");
        assert_eq!(terminal_input(b"x"), b"x\x04\x04");
    }

    #[test]
    fn diffs_show_the_middle() {
        let d = diff("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(d, vec!["@@ line 2 (- host, + sawmill)", "-b", "+B"]);
        let d = diff("a\n", "a");
        assert!(d.last().unwrap().contains("newline"));
    }

    #[test]
    fn times_now_match_now() {
        let e = |m| Entry {
            path: "f".into(),
            what: "file 1 0".into(),
            perm: 0o644,
            uid: 0,
            gid: 0,
            mtime: m,
        };
        assert!(same(&e(5), &e(5), 100));
        assert!(!same(&e(5), &e(6), 100));
        assert!(same(&e(150), &e(170), 100));
        assert!(!same(&e(5), &e(170), 100));
    }

    /// The comparison itself: the input tree on the host and in an image made from it are the
    /// same tree, so a mismatch after a run is the run's doing.
    #[test]
    fn a_fresh_image_matches_the_fresh_host_tree() {
        if Command::new("mke2fs").arg("-V").output().is_err() {
            return;
        }
        let repo = Repo {
            root: Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        };
        let dir = std::env::temp_dir().join(format!("sawmill-harness-{}", std::process::id()));
        let host = dir.join("host");
        let stage = dir.join("stage");
        fresh_tree(&repo, &host).unwrap();
        fresh_tree(&repo, &stage.join("t")).unwrap();
        let img = dir.join("t.img");
        rootfs::image_from_stage(&stage, &img, 16).unwrap();
        let mut want = Vec::new();
        host_tree(&host, "", &mut want).unwrap();
        let got = image_tree(&img, GUEST_TREE).unwrap();
        assert!(want.len() > 10, "{want:?}");
        assert_eq!(tree_problems(&want, &got, i64::MAX), Vec::<String>::new());
        assert!(want.iter().all(|e| e.mtime == TREE_TIME));
        // A changed byte is seen.
        std::fs::write(host.join("a.txt"), "changed").unwrap();
        let mut want = Vec::new();
        host_tree(&host, "", &mut want).unwrap();
        assert_eq!(tree_problems(&want, &got, i64::MAX).len(), 1);
        assert!(fsck(&img).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The last lines a program writes before it exits reach the comparison (a CI host once
    /// lost a test's last seven lines to a read that ended at the slave's close).
    #[test]
    fn host_pty_run_keeps_the_last_output() {
        if !Path::new(rootfs::HOST_BUSYBOX).is_file() {
            return;
        }
        let dir = std::env::temp_dir();
        let script = "i=0; while [ $i -lt 200 ]; do echo line $i; i=$((i+1)); done; echo end";
        let want: String = (0..200).map(|i| format!("line {i}\n")).collect::<String>() + "end\n";
        for _ in 0..20 {
            let o = host_run(
                &[
                    "/bin/busybox".into(),
                    "sh".into(),
                    "-c".into(),
                    script.into(),
                ],
                &dir,
                b"",
            )
            .unwrap();
            assert_eq!(o.status, 0);
            assert_eq!(String::from_utf8_lossy(&o.output), want);
        }
    }

    #[test]
    fn host_pty_run_looks_like_a_terminal() {
        if !Path::new(rootfs::HOST_BUSYBOX).is_file() {
            return;
        }
        let dir = std::env::temp_dir();
        let o = host_run(
            &[
                "/bin/busybox".into(),
                "sh".into(),
                "-c".into(),
                "tty -s && echo tty; cat; exit 3".into(),
            ],
            &dir,
            &terminal_input(b"line one\nline two"),
        )
        .unwrap();
        assert_eq!(o.status, 3);
        assert_eq!(
            String::from_utf8_lossy(&o.output),
            "tty\nline one\nline two"
        );
    }
}
