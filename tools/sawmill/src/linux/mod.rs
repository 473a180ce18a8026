//! `./sawmill run linux`: boots `systems/linux.toml` with a root image as disk 0 and one Linux
//! program as the first process, its terminal (COM2) on this terminal or piped, and turns the
//! proc server's last line into an exit status. The Linux test harness (`harness`) boots the
//! same way. Touches: the manifest (patched copy under target/linux/), images, QEMU.

pub mod harness;
pub mod session;

use crate::repo::Repo;
use crate::{image, qemu, rootfs, scenario};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Linux system's manifest, relative to the repository.
pub const MANIFEST: &str = "systems/linux.toml";
/// The environment variable that names another manifest for `run linux` (a test's variant).
pub const MANIFEST_VAR: &str = "SAWMILL_LINUX_MANIFEST";
/// The proc server's entry in it (by name or module) and the keys of its config the tool fills.
pub const PROC: &str = "proc";
/// The console server's entry; `echo = false` is set for piped (test) input when the console
/// has a configuration schema.
pub const CONSOLE: &str = "console";
/// The environment of the first process unless the user gives one.
pub const DEFAULT_ENV: &[&str] = &[
    "PATH=/bin:/usr/bin:/sbin:/usr/sbin",
    "HOME=/root",
    "TERM=vt100",
];

/// The first process when `run linux` is given no program: busybox's shell as a login shell
/// (it reads /etc/profile, which shows /etc/motd).
pub const LOGIN_SHELL: &[&str] = &["/bin/sh", "-l"];
/// Hard timeouts (s) of `run linux`: a program, and an interactive shell (a week: the user
/// ends it).
pub const PROGRAM_TIMEOUT: u64 = 600;
pub const SHELL_TIMEOUT: u64 = 7 * 24 * 3600;

const EXITED: &str = "proc: init exited with status ";
const KILLED: &str = "proc: init killed by signal ";

/// How the first process ended, from proc's line on the debug console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Killed(i32),
    /// A process stopped the machine with `reboot(2)` (busybox `poweroff -f`, `halt -f`).
    PoweredOff,
}

impl Ending {
    /// What a shell reports: the status, or 128 + the signal.
    pub fn status(self) -> i32 {
        match self {
            Ending::Exited(n) => n,
            Ending::Killed(s) => 128 + s,
            Ending::PoweredOff => 0,
        }
    }
}

/// The first `proc: init ...` line in a debug-console log.
pub fn parse_ending(log: &str) -> Option<Ending> {
    for line in log.lines() {
        let num = |rest: &str| -> Option<i32> {
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().ok()
        };
        if let Some(i) = line.find(EXITED) {
            if let Some(n) = num(&line[i + EXITED.len()..]) {
                return Some(Ending::Exited(n));
            }
        }
        if let Some(i) = line.find(KILLED) {
            if let Some(s) = num(&line[i + KILLED.len()..]) {
                return Some(Ending::Killed(s));
            }
        }
        if line.contains(sawmill_proc_api::POWER_OFF_LINE) {
            return Some(Ending::PoweredOff);
        }
    }
    None
}

/// What the first process is and sees.
#[derive(Debug, Clone, Default)]
pub struct Process {
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: Option<String>,
    pub trace: bool,
    /// Terminal echo off (input fed from a file, so the output holds only what the program
    /// wrote).
    pub no_echo: bool,
}

fn strings(v: &[String]) -> toml::Value {
    toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect())
}

/// The Linux manifest with the first process filled into proc's `config` (`init`, `env`,
/// `cwd`, `trace`), as TOML text.
pub fn patch_manifest(text: &str, p: &Process, console_has_schema: bool) -> Result<String, String> {
    let mut top: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let servers = top
        .get_mut("server")
        .and_then(|s| s.as_array_mut())
        .ok_or("no [[server]] entries")?;
    let is = |s: &toml::Value, name: &str| {
        s.get("name").and_then(|v| v.as_str()) == Some(name)
            || s.get("module").and_then(|v| v.as_str()) == Some(name)
    };
    let proc = servers
        .iter_mut()
        .find(|s| is(s, PROC))
        .ok_or_else(|| format!("no server `{PROC}` (the process server)"))?;
    let c = config_of(proc)?;
    c.insert("init".into(), strings(&p.argv));
    c.insert("env".into(), strings(&p.env));
    if let Some(cwd) = &p.cwd {
        c.insert("cwd".into(), toml::Value::String(cwd.clone()));
    }
    c.insert("trace".into(), toml::Value::Boolean(p.trace));
    if p.no_echo && console_has_schema {
        if let Some(con) = servers.iter_mut().find(|s| is(s, CONSOLE)) {
            config_of(con)?.insert("echo".into(), toml::Value::Boolean(false));
        }
    }
    toml::to_string(&top).map_err(|e| e.to_string())
}

/// A server entry's `config` table, made empty if it had none.
fn config_of(s: &mut toml::Value) -> Result<&mut toml::Table, String> {
    let t = s.as_table_mut().ok_or("a [[server]] is not a table")?;
    t.entry("config")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| "`config` is not a table".to_string())
}

/// Where the program's terminal goes.
pub enum Terminal {
    /// This process's terminal (interactive).
    Here,
    /// `input` fed to the line, the program's output into the file `output`.
    Piped { input: Vec<u8>, output: PathBuf },
    /// QEMU's pipe character device on the FIFOs `PATH.in` (typed) and `PATH.out` (shown),
    /// which the caller creates and drives (a scripted session, `session`).
    Fifo(PathBuf),
}

/// One boot of the Linux system.
pub struct Boot {
    /// Names the patched manifest and the image under target/ (distinct per parallel run).
    pub tag: String,
    pub disk: PathBuf,
    pub process: Process,
    pub terminal: Terminal,
    /// The debug console (COM1) goes here; shown live on stderr when `show_log`.
    pub log: PathBuf,
    pub show_log: bool,
    pub timeout: Duration,
    /// QEMU `-icount shift=0` (guest `rdtsc` counts instructions: the benchmarks).
    pub icount: bool,
    /// QEMU arguments of a network device (`qemu::net_args`); empty: no network.
    pub net: Vec<String>,
}

/// The result of a boot: the ending, or why there is none (with the log for the report).
pub struct Booted {
    pub ending: Result<Ending, String>,
    pub log: String,
}

/// The Linux manifest with `process` as the first process, written under target/linux/ as
/// `TAG.toml` (distinct per parallel run); returns its path.
pub fn patched_manifest(repo: &Repo, tag: &str, process: &Process) -> Result<PathBuf, String> {
    // A test may boot a variant of the Linux system (one with a fault injector added, as
    // tools/sawmill/tests/linux_net_restart.rs does), written from this manifest.
    let mpath = std::env::var_os(MANIFEST_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.root.join(MANIFEST));
    let text = std::fs::read_to_string(&mpath)
        .map_err(|e| format!("{}: {e} (the Linux system's manifest)", mpath.display()))?;
    let patched = patch_manifest(
        &text,
        process,
        sawmill_manifest::Schemas::has(&crate::configs::Servers, CONSOLE),
    )
    .map_err(|e| format!("{}: {e}", mpath.display()))?;
    let dir = repo.target().join("linux");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let patched_path = dir.join(format!("{tag}.toml"));
    std::fs::write(&patched_path, patched)
        .map_err(|e| format!("{}: {e}", patched_path.display()))?;
    Ok(patched_path)
}

/// The first process of an interactive system: the login shell on the terminal.
pub fn login_process() -> Process {
    Process {
        argv: LOGIN_SHELL.iter().map(|s| s.to_string()).collect(),
        env: DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
        cwd: None,
        trace: false,
        no_echo: false,
    }
}

/// Makes the boot image for `b` (the guest crates must be built).
fn prepare(repo: &Repo, b: &Boot) -> Result<(PathBuf, scenario::TestSpec), String> {
    let mf = image::load(&patched_manifest(repo, &b.tag, &b.process)?)?;
    let spec = scenario::parse(mf.test.as_ref())?;
    let img = repo.target().join("images").join(format!("{}.img", b.tag));
    image::write_image(repo, &mf.system, &img)?;
    Ok((img, spec))
}

/// Boots the Linux system once and waits for the first process to end.
pub fn boot(repo: &Repo, b: &Boot) -> Booted {
    boot_driven(repo, b, &mut || None)
}

/// [`boot`], calling `driver` every 100 ms while the machine runs; a `Some(reason)` from it
/// stops the machine.
pub fn boot_driven(repo: &Repo, b: &Boot, driver: &mut dyn FnMut() -> Option<String>) -> Booted {
    let disk = scenario::disk::qemu_args(std::slice::from_ref(&b.disk));
    boot_with_disk(repo, b, disk, driver)
}

/// [`boot_driven`] with `disk` as the QEMU arguments that attach `b.disk` (`./sawmill crash`
/// puts QEMU's write log between the device and the image: `crash::logged_disk_args`).
pub fn boot_with_disk(
    repo: &Repo,
    b: &Boot,
    disk: Vec<String>,
    driver: &mut dyn FnMut() -> Option<String>,
) -> Booted {
    let fail = |e: String| Booted {
        ending: Err(e),
        log: String::new(),
    };
    // A log left from an earlier run must not be read as this one's.
    let _ = std::fs::remove_file(&b.log);
    let (img, spec) = match prepare(repo, b) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let mut extra = disk;
    extra.extend(spec.qemu_args.iter().cloned());
    extra.extend(b.net.iter().cloned());
    let com2 = match &b.terminal {
        Terminal::Here => qemu::Com2::Terminal,
        Terminal::Piped { input, output } => qemu::Com2::Piped {
            input: input.clone(),
            output: output.clone(),
        },
        Terminal::Fifo(path) => {
            // After the debug console's `-serial`, so it is the second serial line.
            extra.extend([
                "-chardev".to_string(),
                format!("pipe,id=com2,path={}", path.display()),
                "-serial".to_string(),
                "chardev:com2".to_string(),
            ]);
            qemu::Com2::None
        }
    };
    let cfg = qemu::Config {
        image: img,
        memory: spec.memory.clone(),
        icount: b.icount,
        extra,
        serial_log: Some(b.log.clone()),
        com2,
    };
    let qlog = b.log.with_extension("qemu.log");
    // Show the debug console as it grows; stop on a panic, or when proc has reported the end
    // and the machine does not power off by itself soon after.
    let mut shown = 0usize;
    let mut ended_at: Option<Instant> = None;
    let mut panic_at: Option<Instant> = None;
    let mut watch = || {
        let text = std::fs::read(&b.log).unwrap_or_default();
        if b.show_log && text.len() > shown {
            let mut e = std::io::stderr().lock();
            let _ = e.write_all(&text[shown..]);
            let _ = e.flush();
            shown = text.len();
        }
        let s = String::from_utf8_lossy(&text);
        if parse_ending(&s).is_some() {
            let t = *ended_at.get_or_insert_with(Instant::now);
            if t.elapsed() >= Duration::from_secs(10) {
                return Some("the machine did not power off after init ended".into());
            }
        }
        if s.contains("PANIC") {
            let t = *panic_at.get_or_insert_with(Instant::now);
            if t.elapsed() >= Duration::from_secs(2) {
                return Some("PANIC on the debug console".into());
            }
        }
        if let Some(why) = driver() {
            return Some(why);
        }
        None
    };
    let outcome = qemu::run(&cfg, b.timeout, Some(&qlog), Some(&mut watch));
    // The boot image is made anew for every boot (`prepare`); the harness boots hundreds, so
    // it is not kept once the machine is off.
    let _ = std::fs::remove_file(&cfg.image);
    let log = String::from_utf8_lossy(&std::fs::read(&b.log).unwrap_or_default()).into_owned();
    if b.show_log && log.len() > shown {
        eprint!("{}", &log[shown.min(log.len())..]);
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            return Booted {
                ending: Err(e),
                log,
            }
        }
    };
    let ending = match parse_ending(&log) {
        Some(e) if !log.contains("PANIC") => Ok(e),
        Some(_) => Err("PANIC on the debug console".into()),
        None => {
            let qerr = std::fs::read_to_string(&qlog).unwrap_or_default();
            let qerr = qerr
                .lines()
                .rfind(|l| !l.contains("terminating on signal"))
                .map(|l| format!(" (QEMU: {l})"))
                .unwrap_or_default();
            Err(format!(
                "the first process did not end ({}){qerr}",
                outcome.describe()
            ))
        }
    };
    Booted { ending, log }
}

/// The default root image (busybox, /etc, /dev, /tmp), built when missing.
pub fn default_root(repo: &Repo) -> Result<PathBuf, String> {
    let img = repo.target().join("linux").join("root.img");
    if img.is_file() {
        // Kept between runs: its message of the day follows the manifest's servers.
        rootfs::replace_file(&img, "/etc/motd", &motd(repo)?)?;
    } else {
        eprintln!("sawmill: building the default root image {}", img.display());
        rootfs::build(&rootfs::Options {
            trees: Vec::new(),
            output: img.clone(),
            size_mb: rootfs::DEFAULT_SIZE_MB,
            busybox: rootfs::HOST_BUSYBOX.into(),
            motd: Some(motd(repo)?),
        })?;
    }
    Ok(img)
}

/// `/etc/motd` of a root image for the Linux system: what the machine is and every server of
/// its manifest (name, program, what it serves and uses), so the list is always the one booted.
pub fn motd(repo: &Repo) -> Result<String, String> {
    let mf = image::load(&repo.root.join(MANIFEST))?;
    Ok(motd_text(&mf.system))
}

fn motd_text(system: &sawmill_manifest::System) -> String {
    let mut rows = vec![(
        "server".to_string(),
        "program".to_string(),
        "serves".to_string(),
        "uses".to_string(),
    )];
    for s in &system.servers {
        let uses: Vec<&str> = s.uses.iter().map(|u| u.endpoint.as_str()).collect();
        let or_dash = |v: String| if v.is_empty() { "-".to_string() } else { v };
        rows.push((
            s.name.clone(),
            s.module.clone(),
            or_dash(s.provides.join(" ")),
            or_dash(uses.join(" ")),
        ));
    }
    let width =
        |f: fn(&(String, String, String, String)) -> usize| rows.iter().map(f).max().unwrap_or(0);
    let (w0, w1, w2) = (
        width(|r| r.0.len()),
        width(|r| r.1.len()),
        width(|r| r.2.len()),
    );
    let mut m = String::from(
        "sawmill: a multiserver operating system running unmodified Linux programs.\n\n\
         This shell is a Linux process. Its system calls are served by the Linux personality\n\
         library in its own task and by these servers, each a task of its own, protected from\n\
         the others by the hardware (systems/linux.toml), on a capability microkernel:\n\n",
    );
    for r in &rows {
        m.push_str(&format!(
            "  {:w0$}  {:w1$}  {:w2$}  {}\n",
            r.0, r.1, r.2, r.3
        ));
    }
    m.push_str(
        "\n`exit` or `poweroff` stops the machine with the file systems synced; what you write\n\
         under / stays in the root image (target/linux/root.img for `make run`).\n",
    );
    m
}

/// Options of `./sawmill run linux`.
pub struct RunOptions {
    pub argv: Vec<String>,
    pub root: Option<PathBuf>,
    pub quiet: bool,
    pub trace: bool,
    pub stdin: Option<PathBuf>,
    /// None: [`PROGRAM_TIMEOUT`], or [`SHELL_TIMEOUT`] for the login shell.
    pub timeout: Option<u64>,
    pub no_build: bool,
    /// `-icount shift=0`: the program's `rdtsc` counts guest instructions (measuring by hand).
    pub icount: bool,
    /// QEMU arguments of a network device (`--net`); empty: no network.
    pub net: Vec<String>,
}

/// `./sawmill run linux`: returns the program's exit status (128 + signal if killed), or an
/// error for a boot that did not get that far.
pub fn run(repo: &Repo, o: &RunOptions) -> Result<i32, String> {
    available(repo)?;
    let disk = match &o.root {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => return Err(format!("{}: no such root image", p.display())),
        None => default_root(repo)?,
    };
    if !o.no_build {
        crate::guest::build(repo)?;
    }
    let dir = repo.target().join("linux");
    let log = dir.join("run.log");
    let piped_out = dir.join("run.out");
    let terminal = match &o.stdin {
        None => Terminal::Here,
        Some(f) => Terminal::Piped {
            input: harness::terminal_input(
                &std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?,
            ),
            output: piped_out.clone(),
        },
    };
    // Without a program: a login shell on this terminal, the way `make run` boots the system.
    let shell = o.argv.is_empty();
    let argv = if shell {
        LOGIN_SHELL.iter().map(|s| s.to_string()).collect()
    } else {
        o.argv.clone()
    };
    let piped = matches!(terminal, Terminal::Piped { .. });
    // An interactive shell has this terminal: the debug console goes to the log file only.
    let interactive = shell && !piped;
    let show_log = !o.quiet && !interactive;
    if interactive {
        eprintln!(
            "sawmill: booting {MANIFEST} into a login shell on this terminal, {} as / (kept \
             between runs), the debug console in {}; `exit` or `poweroff` ends it, Ctrl-A x \
             quits QEMU at once",
            disk.display(),
            log.display()
        );
    } else if !o.quiet {
        eprintln!(
            "sawmill: booting {MANIFEST} with {} as /, debug console below (also {})",
            disk.display(),
            log.display()
        );
    }
    let b = Boot {
        tag: "linux-run".into(),
        disk,
        process: Process {
            argv,
            env: DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            trace: o.trace,
            no_echo: piped,
        },
        terminal,
        log: log.clone(),
        show_log,
        timeout: Duration::from_secs(o.timeout.unwrap_or(if shell {
            SHELL_TIMEOUT
        } else {
            PROGRAM_TIMEOUT
        })),
        icount: o.icount,
        net: o.net.clone(),
    };
    let r = boot(repo, &b);
    if piped {
        // The program's output, with the terminal's CR before LF taken out.
        let out = std::fs::read(&piped_out).unwrap_or_default();
        let mut so = std::io::stdout().lock();
        let _ = so.write_all(&harness::strip_cr(&out));
        let _ = so.flush();
    }
    match r.ending {
        Ok(e) => {
            if !o.quiet {
                eprintln!("sawmill: {}", describe(e));
            }
            Ok(e.status())
        }
        Err(e) if log.is_file() => Err(format!("{e}; debug console log: {}", log.display())),
        Err(e) => Err(e),
    }
}

pub fn describe(e: Ending) -> String {
    match e {
        Ending::Exited(n) => format!("program exited with status {n}"),
        Ending::Killed(s) => format!("program killed by signal {s} (status {})", 128 + s),
        Ending::PoweredOff => "the machine was powered off (reboot(2))".into(),
    }
}

/// Whether the Linux system can be booted in this tree (its manifest exists).
pub fn available(repo: &Repo) -> Result<(), String> {
    let m = repo.root.join(MANIFEST);
    if !m.is_file() {
        return Err(format!(
            "{} is missing (the Linux system is not in this tree)",
            Path::new(MANIFEST).display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_motd_lists_every_server_of_the_manifest() {
        let repo = Repo::find().unwrap();
        let mf = image::load(&repo.root.join(MANIFEST)).unwrap();
        let m = motd_text(&mf.system);
        for s in &mf.system.servers {
            let row = m
                .lines()
                .find(|l| l.split_whitespace().next() == Some(s.name.as_str()))
                .unwrap_or_else(|| panic!("no row for {}:\n{m}", s.name));
            assert!(row.contains(&s.module), "{row}");
        }
        assert!(m.lines().count() < 25, "more than one screen:\n{m}");
    }

    #[test]
    fn endings_from_the_log() {
        assert_eq!(
            parse_ending("root: x\nproc: init exited with status 3\n"),
            Some(Ending::Exited(3))
        );
        assert_eq!(
            parse_ending("[proc] proc: init killed by signal 11\r\n"),
            Some(Ending::Killed(11))
        );
        assert_eq!(Ending::Killed(11).status(), 139);
        assert_eq!(parse_ending("proc: init exited with status \n"), None);
        assert_eq!(parse_ending("nothing"), None);
        assert_eq!(
            parse_ending("proc: the machine powers off (reboot command 0x4321fedc by pid 1)\n"),
            Some(Ending::PoweredOff)
        );
    }

    const SYS: &str = r#"name = "linux"
[[server]]
name = "console"
provides = ["console"]
[[server]]
name = "proc"
uses = ["console"]
wait = true
[server.config]
kmem_kb = 512
"#;

    #[test]
    fn manifest_gets_the_first_process() {
        let p = Process {
            argv: vec!["/bin/busybox".into(), "ls".into(), "-l".into()],
            env: vec!["HOME=/root".into()],
            cwd: Some("/t".into()),
            trace: true,
            no_echo: true,
        };
        let out = patch_manifest(SYS, &p, true).unwrap();
        let t: toml::Table = out.parse().unwrap();
        let servers = t["server"].as_array().unwrap();
        let c = servers[1]["config"].as_table().unwrap();
        assert_eq!(c["kmem_kb"].as_integer(), Some(512), "kept what was there");
        assert_eq!(c["init"].as_array().unwrap().len(), 3);
        assert_eq!(c["init"][1].as_str(), Some("ls"));
        assert_eq!(c["env"][0].as_str(), Some("HOME=/root"));
        assert_eq!(c["cwd"].as_str(), Some("/t"));
        assert_eq!(c["trace"].as_bool(), Some(true));
        assert_eq!(servers[0]["config"]["echo"].as_bool(), Some(false));
        // A console without a schema takes no config; proc gets one even if it had none.
        let out = patch_manifest(
            &SYS.replace("[server.config]\nkmem_kb = 512\n", ""),
            &p,
            false,
        )
        .unwrap();
        let t: toml::Table = out.parse().unwrap();
        assert!(t["server"][0].get("config").is_none());
        assert_eq!(
            t["server"][1]["config"]["init"][0].as_str(),
            Some("/bin/busybox")
        );
        assert!(patch_manifest("name = \"x\"\n", &p, false).is_err());
        let e = patch_manifest(&SYS.replace("\"proc\"", "\"prok\""), &p, false).unwrap_err();
        assert!(e.contains("`proc`"), "{e}");
    }
}
