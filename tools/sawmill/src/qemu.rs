//! Running a boot image in QEMU with a hard timeout, and reading the guest's exit code.
//!
//! The guest reports its result by writing `0x10 | code` to the isa-debug-exit port 0xf4; QEMU
//! then exits with `(value << 1) | 1`, i.e. 33 + 2·code. Any other QEMU exit means the guest did
//! not shut down on purpose (0: reset/triple fault under -no-reboot; 1: QEMU itself failed).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Config {
    pub image: PathBuf,
    pub memory: String,
    /// Deterministic instruction counting (benchmarks); forces TCG.
    pub icount: bool,
    pub extra: Vec<String>,
    /// `None`: serial on our stdio (interactive); `Some(file)`: serial into a log file.
    pub serial_log: Option<PathBuf>,
    /// The second serial line (COM2), which the guest's user-level UART driver (servers/console)
    /// serves as the Linux programs' terminal while the kernel's debug console keeps COM1.
    pub com2: Com2,
}

/// Where the guest's COM2 goes.
#[derive(Clone, Debug, Default)]
pub enum Com2 {
    /// Not connected.
    #[default]
    None,
    /// This process's standard input and output (an interactive run; needs `serial_log`, so
    /// that COM1 does not take the terminal too).
    Terminal,
    /// `input` is written to the line at start (QEMU reads it as the guest drains the UART);
    /// everything the guest writes goes to the file `output`.
    Piped { input: Vec<u8>, output: PathBuf },
}

/// Hardware virtualisation only when the CPU advertises it: /dev/kvm may exist on machines where
/// it cannot run a guest.
pub fn kvm_usable() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| cpuinfo_has_virt(&c))
}

fn cpuinfo_has_virt(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"))
}

pub fn args(cfg: &Config, kvm: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "-machine",
        "pc",
        "-cpu",
        "qemu64",
        "-m",
        &cfg.memory,
        "-display",
        "none",
        "-no-reboot",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match &cfg.serial_log {
        None => a.extend(["-serial".into(), "stdio".into()]),
        Some(p) => a.extend(["-serial".into(), format!("file:{}", p.display())]),
    }
    match (&cfg.com2, &cfg.serial_log) {
        (Com2::None, _) => {}
        // Without a log file COM1 already has stdio; COM2 cannot share it.
        (_, None) => a.extend(["-serial".into(), "null".into()]),
        // A person at the terminal: Ctrl-C and Ctrl-Z go to the guest (signal=off), and the
        // multiplexer's Ctrl-A x still quits QEMU.
        (Com2::Terminal, Some(_)) => a.extend([
            "-chardev".into(),
            "stdio,id=com2,mux=on,signal=off".into(),
            "-serial".into(),
            "chardev:com2".into(),
        ]),
        (Com2::Piped { .. }, Some(_)) => a.extend(["-serial".into(), "stdio".into()]),
    }
    a.extend(
        [
            "-monitor",
            "none",
            "-device",
            "isa-debug-exit,iobase=0xf4,iosize=0x04",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    if cfg.icount {
        a.extend([
            "-accel".into(),
            "tcg".into(),
            "-icount".into(),
            "shift=0".into(),
        ]);
    } else if kvm {
        a.extend(["-accel".into(), "kvm".into()]);
    } else {
        a.extend(["-accel".into(), "tcg".into()]);
    }
    a.push("-kernel".into());
    a.push(cfg.image.display().to_string());
    a.extend(cfg.extra.iter().cloned());
    a
}

/// Where the network device sits on the PCI bus (the manifests' `pci` assigns it by vendor
/// and device ID; a fixed slot keeps its interrupt line the same from run to run).
pub const NET_PCI_ADDR: u32 = 5;

/// A port forward of QEMU's user network: the host's 127.0.0.1:`host` reaches the guest's
/// `guest` port (`tcp:HOSTPORT:GUESTPORT` or `udp:...` on the command line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward {
    pub udp: bool,
    pub host: u16,
    pub guest: u16,
}

impl std::str::FromStr for Forward {
    type Err = String;
    fn from_str(s: &str) -> Result<Forward, String> {
        let bad =
            || format!("`{s}`: a forward is tcp:HOSTPORT:GUESTPORT or udp:HOSTPORT:GUESTPORT");
        let mut it = s.split(':');
        let (Some(proto), Some(h), Some(g), None) = (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(bad());
        };
        let udp = match proto {
            "tcp" => false,
            "udp" => true,
            _ => return Err(bad()),
        };
        let (host, guest) = (h.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?);
        if host == 0 || guest == 0 {
            return Err(bad());
        }
        Ok(Forward { udp, host, guest })
    }
}

/// QEMU arguments for a virtio-net device on QEMU's user network (NAT; the guest gets
/// 10.0.2.15 by DHCP, the host is 10.0.2.2) with these forwards, bound to the host's loopback
/// only, and the guest's traffic written to `pcap` if given.
pub fn net_args(forwards: &[Forward], pcap: Option<&Path>) -> Vec<String> {
    let mut netdev = String::from("user,id=n0");
    for f in forwards {
        netdev += &format!(
            ",hostfwd={}:127.0.0.1:{}-:{}",
            if f.udp { "udp" } else { "tcp" },
            f.host,
            f.guest
        );
    }
    let mut a = vec![
        "-netdev".to_string(),
        netdev,
        "-device".to_string(),
        format!("virtio-net-pci,netdev=n0,addr={NET_PCI_ADDR:#x}"),
    ];
    if let Some(p) = pcap {
        a.push("-object".into());
        a.push(format!(
            "filter-dump,id=dump0,netdev=n0,file={}",
            p.display()
        ));
    }
    a
}

/// QEMU arguments for a virtio-net device whose wire is a UDP socket pair on the host's
/// loopback: every frame the guest sends arrives as one datagram at 127.0.0.1:`host`, and every
/// datagram sent to 127.0.0.1:`qemu` reaches the guest as one frame (a host program plays the
/// whole network, malformed frames included).
pub fn raw_net_args(host: u16, qemu: u16, pcap: Option<&Path>) -> Vec<String> {
    let mut a = vec![
        "-netdev".to_string(),
        format!("socket,id=n0,udp=127.0.0.1:{host},localaddr=127.0.0.1:{qemu}"),
        "-device".to_string(),
        format!("virtio-net-pci,netdev=n0,addr={NET_PCI_ADDR:#x}"),
    ];
    if let Some(p) = pcap {
        a.push("-object".into());
        a.push(format!(
            "filter-dump,id=dump0,netdev=n0,file={}",
            p.display()
        ));
    }
    a
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The guest wrote `0x10 | code` to isa-debug-exit.
    Guest(u8),
    /// QEMU exited with a status that is not a guest exit code.
    Qemu(i32),
    /// QEMU was killed by a signal we did not send.
    Signal(i32),
    /// We killed QEMU when the hard timeout expired.
    Timeout(u64),
    /// We killed QEMU early because the log showed a reject string (see `run`).
    Stopped(String),
}

impl Outcome {
    pub fn from_status(code: Option<i32>, signal: Option<i32>) -> Outcome {
        match (code, signal) {
            (Some(c), _) if (33..=63).contains(&c) && c % 2 == 1 => {
                Outcome::Guest(((c - 33) / 2) as u8)
            }
            (Some(c), _) => Outcome::Qemu(c),
            (None, Some(s)) => Outcome::Signal(s),
            (None, None) => Outcome::Qemu(-1),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Outcome::Guest(c) => format!("guest exited with code {c}"),
            Outcome::Qemu(0) => "QEMU exited without a guest exit code (reset, triple fault or \
                                 power-off instead of isa-debug-exit)"
                .into(),
            Outcome::Qemu(c) => format!("QEMU failed with exit status {c} (not a guest exit code)"),
            Outcome::Signal(s) => format!("QEMU was killed by signal {s}"),
            Outcome::Timeout(t) => format!("timed out after {t}s (QEMU killed)"),
            Outcome::Stopped(why) => format!("stopped early: {why}"),
        }
    }
}

/// Sends SIGTERM (QEMU restores the terminal on it), then SIGKILL if it lingers.
fn kill(child: &mut Child) {
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Something `run` checks periodically while QEMU runs; returning `Some(reason)` stops QEMU.
/// A reason starting with [`KILL_NOW`] kills it with SIGKILL at once (no orderly QEMU exit:
/// the guest gets no chance to write anything more, as in a power cut).
pub type Watch<'a> = &'a mut dyn FnMut() -> Option<String>;

pub const KILL_NOW: &str = "killed at once: ";

/// Runs QEMU to completion or until `timeout`. QEMU's own stderr goes to `stderr_to` if given.
pub fn run(
    cfg: &Config,
    timeout: Duration,
    stderr_to: Option<&Path>,
    mut watch: Option<Watch<'_>>,
) -> Result<Outcome, String> {
    let kvm = !cfg.icount && kvm_usable();
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(args(cfg, kvm));
    match (&cfg.com2, &cfg.serial_log) {
        (Com2::Terminal, Some(_)) => {}
        (Com2::Piped { output, .. }, Some(_)) => {
            let out =
                std::fs::File::create(output).map_err(|e| format!("{}: {e}", output.display()))?;
            cmd.stdin(Stdio::piped()).stdout(out);
        }
        (_, Some(_)) => {
            cmd.stdin(Stdio::null()).stdout(Stdio::null());
        }
        (_, None) => {}
    }
    if let Some(p) = stderr_to {
        let f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
        cmd.stderr(f);
    }
    let mut child = cmd.spawn().map_err(|e| {
        format!("cannot start qemu-system-x86_64: {e} (run scripts/setup.sh to install it)")
    })?;
    // COM2's input: written from a thread (QEMU takes it only as fast as the guest drains the
    // UART), and the pipe kept open until QEMU ends, so the guest never sees the line close.
    let _com2_input = match (&cfg.com2, child.stdin.take()) {
        (Com2::Piped { input, .. }, Some(mut stdin)) => {
            let input = input.clone();
            Some(std::thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(&input);
                let _ = stdin.flush();
                // Returned, not dropped: the pipe closes when `run` returns.
                stdin
            }))
        }
        _ => None,
    };
    let start = Instant::now();
    let mut next_watch = start;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                use std::os::unix::process::ExitStatusExt;
                return Ok(Outcome::from_status(st.code(), st.signal()));
            }
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for QEMU: {e}")),
        }
        if start.elapsed() >= timeout {
            kill(&mut child);
            return Ok(Outcome::Timeout(timeout.as_secs()));
        }
        if let Some(w) = watch.as_mut() {
            if Instant::now() >= next_watch {
                next_watch = Instant::now() + Duration::from_millis(100);
                if let Some(why) = w() {
                    if why.starts_with(KILL_NOW) {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Ok(Outcome::Stopped(why));
                    }
                    kill(&mut child);
                    return Ok(Outcome::Stopped(why));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_map_to_guest_codes() {
        assert_eq!(Outcome::from_status(Some(33), None), Outcome::Guest(0));
        assert_eq!(Outcome::from_status(Some(35), None), Outcome::Guest(1));
        assert_eq!(Outcome::from_status(Some(63), None), Outcome::Guest(15));
        assert_eq!(Outcome::from_status(Some(0), None), Outcome::Qemu(0));
        assert_eq!(Outcome::from_status(Some(1), None), Outcome::Qemu(1));
        assert_eq!(Outcome::from_status(Some(34), None), Outcome::Qemu(34));
        assert_eq!(Outcome::from_status(Some(65), None), Outcome::Qemu(65));
        assert_eq!(Outcome::from_status(None, Some(9)), Outcome::Signal(9));
    }

    #[test]
    fn network_arguments() {
        let f: Vec<Forward> = ["tcp:8080:80", "udp:5353:53"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            net_args(&f, Some(Path::new("/t/x.pcap"))).join(" "),
            "-netdev user,id=n0,hostfwd=tcp:127.0.0.1:8080-:80,hostfwd=udp:127.0.0.1:5353-:53 \
             -device virtio-net-pci,netdev=n0,addr=0x5 -object filter-dump,id=dump0,netdev=n0,file=/t/x.pcap"
        );
        assert_eq!(
            raw_net_args(5000, 5001, None).join(" "),
            "-netdev socket,id=n0,udp=127.0.0.1:5000,localaddr=127.0.0.1:5001 \
             -device virtio-net-pci,netdev=n0,addr=0x5"
        );
        for bad in ["tcp:80", "sctp:1:2", "tcp:0:80", "tcp:1:70000", "tcp:1:2:3"] {
            assert!(bad.parse::<Forward>().is_err(), "{bad}");
        }
    }

    #[test]
    fn kvm_only_with_virt_flags() {
        assert!(cpuinfo_has_virt(
            "processor: 0\nflags\t\t: fpu vme vmx sse\n"
        ));
        assert!(cpuinfo_has_virt("flags : fpu svm\n"));
        assert!(!cpuinfo_has_virt(
            "flags : fpu vmxnot sse\nmodel name: svm\n"
        ));
    }

    #[test]
    fn command_line() {
        let mut cfg = Config {
            image: "/x/a.img".into(),
            memory: "256M".into(),
            icount: false,
            extra: vec!["-smp".into(), "1".into()],
            serial_log: None,
            com2: Com2::None,
        };
        let a = args(&cfg, false).join(" ");
        assert_eq!(
            a,
            "-machine pc -cpu qemu64 -m 256M -display none -no-reboot -serial stdio -monitor none \
             -device isa-debug-exit,iobase=0xf4,iosize=0x04 -accel tcg -kernel /x/a.img -smp 1"
        );
        assert!(args(&cfg, true).join(" ").contains("-accel kvm"));
        cfg.icount = true;
        cfg.serial_log = Some("/l/x.log".into());
        let a = args(&cfg, true).join(" ");
        assert!(
            a.contains("-accel tcg -icount shift=0") && !a.contains("kvm"),
            "{a}"
        );
        assert!(a.contains("-serial file:/l/x.log"));
    }
}
