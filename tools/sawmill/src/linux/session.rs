//! Scripted terminal sessions: `tests/linux/sessions/NAME.txt` is typed into busybox's shell
//! the way a person types, once into the host's `/bin/busybox sh` on a fresh pseudo-terminal
//! (the oracle: every expectation of the script must hold on Linux) and once into the login
//! shell `make run` gives on sawmill's terminal (COM2). Both must pass.
//!
//! A script is one step per line: `send TEXT` types TEXT, `expect TEXT` waits (up to a
//! deadline) until the terminal has shown TEXT after what the previous `expect` matched,
//! `sleep SECONDS` waits (host time), `# ...` and empty lines are comments. TEXT takes the
//! escapes `\r \n \t \\ \e` (escape) and `\xHH` (so ^C is `\x03`, arrow-up `\e[A`). A script
//! ends with the shell gone (`send exit\r`). Touches: a work directory under target/linux/.

use super::{harness, Boot, Process, Terminal, DEFAULT_ENV, LOGIN_SHELL};
use crate::repo::Repo;
use crate::rootfs;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the scripts live, relative to the repository.
pub const DIR: &str = "tests/linux/sessions";
/// How long one `expect` may wait: on the host, and on the emulated machine.
const HOST_WAIT: Duration = Duration::from_secs(10);
const GUEST_WAIT: Duration = Duration::from_secs(90);
/// The whole guest session, boot included.
const GUEST_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Send(Vec<u8>),
    Expect(Vec<u8>),
    Sleep(Duration),
}

/// TEXT of a step with its escapes resolved.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            continue;
        }
        match chars.next() {
            Some('r') => out.push(b'\r'),
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('e') => out.push(0x1b),
            Some('\\') => out.push(b'\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let v = u8::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 2)
                    .ok_or_else(|| format!("`\\x{hex}`: two hex digits expected"))?;
                out.push(v);
            }
            other => return Err(format!("unknown escape `\\{}`", other.unwrap_or(' '))),
        }
    }
    Ok(out)
}

pub fn parse(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let at = |e: String| format!("line {}: {e}", i + 1);
        steps.push(match word {
            "send" => Step::Send(unescape(rest).map_err(at)?),
            "expect" if rest.is_empty() => return Err(at("`expect` needs a text".into())),
            "expect" => Step::Expect(unescape(rest).map_err(at)?),
            "sleep" => Step::Sleep(Duration::from_secs_f64(
                rest.trim()
                    .parse::<f64>()
                    .map_err(|_| at(format!("`sleep {rest}`: seconds expected")))?,
            )),
            _ => return Err(at(format!("`{word}`: send, expect or sleep expected"))),
        });
    }
    if steps.is_empty() {
        return Err("no steps".into());
    }
    Ok(steps)
}

/// Where a session stands against what the terminal has shown so far.
pub struct Progress {
    steps: Vec<Step>,
    next: usize,
    /// Output before this offset was matched by an earlier `expect`.
    seen: usize,
    /// When the current step started.
    since: Instant,
    wait: Duration,
}

/// What a session did on one look at the terminal.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    Running,
    /// Every step is done.
    Done,
    Failed(String),
}

impl Progress {
    pub fn new(steps: Vec<Step>, wait: Duration) -> Progress {
        Progress {
            steps,
            next: 0,
            seen: 0,
            since: Instant::now(),
            wait,
        }
    }

    /// Takes every step that can be taken now with the terminal showing `output` (all of it
    /// since the start), typing through `send`.
    pub fn advance(&mut self, output: &[u8], send: &mut dyn FnMut(&[u8])) -> State {
        loop {
            let Some(step) = self.steps.get(self.next) else {
                return State::Done;
            };
            match step {
                Step::Send(bytes) => send(bytes),
                Step::Sleep(d) if self.since.elapsed() < *d => return State::Running,
                Step::Sleep(_) => {}
                Step::Expect(want) => {
                    let tail = &output[self.seen.min(output.len())..];
                    match find(tail, want) {
                        Some(at) => self.seen += at + want.len(),
                        None if self.since.elapsed() > self.wait => {
                            return State::Failed(format!(
                                "step {}: `{}` not shown within {} s; the terminal after the \
                                 last match:\n{}",
                                self.next + 1,
                                String::from_utf8_lossy(want).escape_debug(),
                                self.wait.as_secs(),
                                String::from_utf8_lossy(tail)
                            ))
                        }
                        None => return State::Running,
                    }
                }
            }
            self.next += 1;
            self.since = Instant::now();
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The session on the host: `/bin/busybox sh -i` as the session leader of a fresh
/// pseudo-terminal with the console's default settings, in an empty directory.
fn on_host(steps: &[Step], dir: &Path) -> Result<(), String> {
    let console = sawmill_console_api::Config::default();
    let argv = [rootfs::HOST_BUSYBOX.to_string(), "sh".into(), "-i".into()];
    let (mut child, master, slave) = harness::spawn_on_pty(
        &argv,
        dir,
        DEFAULT_ENV,
        &console.termios(),
        (console.rows, console.cols),
    )
    .map_err(|e| format!("host busybox: {e}"))?;
    // The shell is the last holder of the slave side: its end is the reader's EIO.
    drop(slave);
    let dup = |fd: &OwnedFd| fd.try_clone().map_err(|e| format!("dup: {e}"));
    let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut reader = std::fs::File::from(dup(&master)?);
    let sink = shown.clone();
    let out_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with EIO once the shell (the last holder of the slave side) is gone.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let mut writer = std::fs::File::from(master);
    let mut progress = Progress::new(steps.to_vec(), HOST_WAIT);
    let result = loop {
        let output = shown.lock().unwrap().clone();
        match progress.advance(&output, &mut |b| {
            let _ = writer.write_all(b);
        }) {
            State::Running => {}
            State::Done => break Ok(()),
            State::Failed(e) => break Err(e),
        }
        if let Ok(Some(_)) = child.try_wait() {
            // The shell is gone: what it showed last may still complete the script.
            std::thread::sleep(Duration::from_millis(50));
            let output = shown.lock().unwrap().clone();
            break match progress.advance(&output, &mut |_| {}) {
                State::Done => Ok(()),
                State::Failed(e) => Err(e),
                State::Running => Err(format!(
                    "the shell ended at step {} of {}; it showed:\n{}",
                    progress.next + 1,
                    progress.steps.len(),
                    String::from_utf8_lossy(&output)
                )),
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let start = Instant::now();
    while !matches!(child.try_wait(), Ok(Some(_))) {
        if start.elapsed() > HOST_WAIT {
            let _ = child.kill();
            let _ = child.wait();
            return result.and(Err("the shell did not end after the script".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(writer);
    let _ = out_thread.join();
    result
}

/// The session on sawmill: the Linux system boots into the login shell on a fresh root image,
/// its terminal on QEMU's pipe device; the image must be `e2fsck` clean afterwards.
fn on_guest(repo: &Repo, name: &str, steps: &[Step], dir: &Path) -> Result<(), String> {
    let disk = dir.join("root.img");
    rootfs::build(&rootfs::Options {
        trees: Vec::new(),
        output: disk.clone(),
        size_mb: rootfs::DEFAULT_SIZE_MB,
        busybox: rootfs::HOST_BUSYBOX.into(),
        motd: Some(super::motd(repo)?),
    })?;
    let fifo = dir.join("com2");
    let (fifo_in, fifo_out) = (fifo.with_extension("in"), fifo.with_extension("out"));
    for f in [&fifo_in, &fifo_out] {
        let _ = std::fs::remove_file(f);
        let c = std::ffi::CString::new(f.as_os_str().as_encoded_bytes())
            .map_err(|_| "odd path".to_string())?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(format!(
                "mkfifo {}: {}",
                f.display(),
                std::io::Error::last_os_error()
            ));
        }
    }
    let open = |p: &Path, flags: i32| -> Option<std::fs::File> {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: a valid NUL-terminated path; the descriptor is owned by the File at once.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        // SAFETY: open returned a fresh descriptor nothing else owns.
        (fd >= 0).then(|| unsafe { std::fs::File::from_raw_fd(fd) })
    };
    // Opened before QEMU starts, so the guest's output always has a reader.
    let mut out = open(&fifo_out, libc::O_RDONLY).ok_or("opening the terminal's output")?;
    let mut typed: Option<std::fs::File> = None;
    let mut shown = Vec::new();
    let mut progress = Progress::new(steps.to_vec(), GUEST_WAIT);
    let mut failure: Option<String> = None;
    let transcript = dir.join("terminal.txt");
    let b = Boot {
        tag: format!("session-{name}"),
        disk: disk.clone(),
        process: Process {
            argv: LOGIN_SHELL.iter().map(|s| s.to_string()).collect(),
            env: DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            trace: false,
            no_echo: false,
        },
        terminal: Terminal::Fifo(fifo.clone()),
        log: dir.join("debug.log"),
        show_log: false,
        timeout: GUEST_TIMEOUT,
        icount: false,
        net: Vec::new(),
    };
    let booted = super::boot_driven(repo, &b, &mut || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            shown.extend_from_slice(&buf[..n]);
        }
        let _ = std::fs::write(&transcript, &shown);
        if typed.is_none() {
            // QEMU opens its side when it starts; until then nothing can be typed.
            typed = open(&fifo_in, libc::O_WRONLY);
            typed.as_ref()?;
        }
        let w = typed.as_mut()?;
        match progress.advance(&shown, &mut |bytes| {
            let _ = w.write_all(bytes);
        }) {
            State::Running | State::Done => None,
            State::Failed(e) => {
                failure = Some(e.clone());
                Some(e)
            }
        }
    });
    if let Some(e) = failure {
        return Err(format!("{e}\n(debug console: {})", b.log.display()));
    }
    match booted.ending {
        Ok(_) if progress.next < progress.steps.len() => Err(format!(
            "the shell ended at step {} of {}; terminal: {}",
            progress.next + 1,
            progress.steps.len(),
            transcript.display()
        )),
        Ok(_) => harness::fsck(&disk).map_or(Ok(()), Err),
        Err(e) => Err(format!("{e}; terminal: {}", transcript.display())),
    }
}

/// The scripts whose name contains one of `filters` (all without filters), sorted.
pub fn scripts(repo: &Repo, filters: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    let dir = repo.root.join(DIR);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut v: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p)))
        .filter(|(n, _)| {
            filters.is_empty() || filters.iter().any(|f| format!("session {n}").contains(f))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Runs one script on the host and (unless `host_only`) on sawmill; the failure's reason.
pub fn run_one(repo: &Repo, name: &str, path: &Path, host_only: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let steps = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = repo.target().join("linux").join("sessions").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let host_dir = dir.join("host");
    std::fs::create_dir_all(&host_dir).map_err(|e| format!("{}: {e}", host_dir.display()))?;
    on_host(&steps, &host_dir).map_err(|e| format!("on the host (the oracle): {e}"))?;
    if host_only {
        return Ok(());
    }
    on_guest(repo, name, &steps, &dir).map_err(|e| format!("on sawmill: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse() {
        let s =
            parse("# c\n\nsend echo a\\r\nexpect a\\r\\n\nsleep 0.5\nsend \\x03\\e[A\n").unwrap();
        assert_eq!(
            s,
            vec![
                Step::Send(b"echo a\r".to_vec()),
                Step::Expect(b"a\r\n".to_vec()),
                Step::Sleep(Duration::from_millis(500)),
                Step::Send(vec![3, 0x1b, b'[', b'A']),
            ]
        );
        assert!(parse("expect\n").is_err());
        assert!(parse("type x\n").is_err());
        assert!(parse("send \\q\n").is_err());
        assert!(parse("send \\x4\n").is_err());
        assert!(parse("# only\n").is_err());
    }

    #[test]
    fn progress_matches_in_order_and_times_out() {
        let steps = parse("send a\nexpect one\nexpect two\nsend b\n").unwrap();
        let mut p = Progress::new(steps, Duration::from_millis(50));
        let mut typed = Vec::new();
        assert_eq!(
            p.advance(b"two", &mut |b| typed.extend_from_slice(b)),
            State::Running
        );
        assert_eq!(typed, b"a");
        // `two` before `one` does not count for the second expect.
        assert_eq!(
            p.advance(b"two one", &mut |b| typed.extend_from_slice(b)),
            State::Running
        );
        assert_eq!(
            p.advance(b"two one two", &mut |b| typed.extend_from_slice(b)),
            State::Done
        );
        assert_eq!(typed, b"ab");
        let mut p = Progress::new(parse("expect never\n").unwrap(), Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(p.advance(b"x", &mut |_| {}), State::Failed(_)));
    }

    #[test]
    fn the_sessions_pass_on_the_host() {
        let repo = Repo::find().unwrap();
        if !Path::new(rootfs::HOST_BUSYBOX).is_file() {
            return;
        }
        for (name, path) in scripts(&repo, &[]).unwrap() {
            run_one(&repo, &name, &path, true).unwrap_or_else(|e| panic!("session {name}: {e}"));
        }
    }
}
