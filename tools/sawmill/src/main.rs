//! `sawmill`: the host tool. Builds the guest crates, packs a system manifest and its servers
//! into one bootable image, boots it in QEMU (interactively, as a test scenario, or as the
//! benchmark), and fronts the ext2 utilities. Called via the `./sawmill` wrapper at the
//! repository root, which builds this tool first.

mod archive;
mod bench;
mod configs;
mod crash;
mod crashcmd;
mod elfimage;
mod ext2cmd;
mod faults;
mod guest;
mod hostilecmd;
mod image;
mod iso;
mod lint;
mod linux;
mod qemu;
mod repo;
mod rootfs;
mod scenario;
mod testcmd;

use clap::{Parser, Subcommand};
use repo::Repo;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "sawmill",
    about = "Build, run, test and benchmark sawmill systems"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build every guest crate (kernel, root task, servers, test programs) for x86_64-unknown-none.
    Build,
    /// Build a bootable image (kernel + boot archive) for a system manifest.
    Image {
        /// System name (systems/NAME.toml or systems/tests/NAME.toml) or path to a manifest.
        system: String,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Use the guest binaries already built instead of running cargo.
        #[arg(long)]
        no_build: bool,
        /// Write a GRUB CD image instead (boots in other hypervisors and on a PC). `linux`: the
        /// login shell as the first process, and the root file system beside the ISO as
        /// `NAME-root.img` (attach it as a virtio disk).
        #[arg(long)]
        iso: bool,
    },
    /// Boot a system in QEMU with the serial console on this terminal. `run` (or `run linux`)
    /// boots the Linux system into a login shell on this terminal; `run linux [OPTIONS] --
    /// PROGRAM [ARGS...]` runs one Linux program instead and exits with its status.
    Run {
        /// System name or manifest path (`linux`: the Linux system, with PROGRAM or a login
        /// shell as the first process).
        #[arg(default_value = "linux")]
        system: String,
        /// Hard timeout in seconds; QEMU is killed when it expires (default 600, none for the
        /// interactive shell).
        #[arg(long)]
        timeout: Option<u64>,
        /// Count instructions deterministically (-icount shift=0, TCG only).
        #[arg(long)]
        icount: bool,
        /// Use the guest binaries already built instead of running cargo.
        #[arg(long)]
        no_build: bool,
        /// linux: the root file system image (default: target/linux/root.img, built if missing).
        #[arg(long)]
        root: Option<PathBuf>,
        /// linux: show only what the program writes (the debug console goes to
        /// target/linux/run.log only).
        #[arg(long)]
        quiet: bool,
        /// linux: print every system call of the program on the debug console, like strace.
        #[arg(long)]
        trace: bool,
        /// linux: feed this file to the program's terminal (then ^D) instead of this terminal.
        #[arg(long)]
        stdin: Option<PathBuf>,
        /// Attach a virtio-net device on QEMU's user network (the guest gets 10.0.2.15 by
        /// DHCP; the host is 10.0.2.2).
        #[arg(long)]
        net: bool,
        /// With --net: forward the host's 127.0.0.1:HOSTPORT to the guest's GUESTPORT
        /// (`tcp:HOSTPORT:GUESTPORT` or `udp:...`; repeatable).
        #[arg(long, value_name = "PROTO:HOSTPORT:GUESTPORT")]
        forward: Vec<qemu::Forward>,
        /// With --net: write the guest's network traffic to FILE (pcap).
        #[arg(long, value_name = "FILE")]
        pcap: Option<PathBuf>,
        /// Instead of QEMU's user network: the guest's wire is UDP on 127.0.0.1, each frame one
        /// datagram; QEMU sends to HOSTPORT and receives on QEMUPORT (a host program plays the
        /// network, e.g. tools/sawmill/tests/net_frames.rs).
        #[arg(long, value_name = "HOSTPORT:QEMUPORT", conflicts_with_all = ["net", "forward"])]
        net_raw: Option<String>,
        /// linux: the program and its arguments (after `--`).
        #[arg(last = true)]
        program: Vec<String>,
    },
    /// Build a root file-system image for the Linux system: Debian's static busybox with a link
    /// per applet, /etc/passwd and /etc/group, /tmp, /root, /dev nodes, plus the given trees.
    Rootfs {
        /// Host directories copied into the image's root, in order.
        trees: Vec<PathBuf>,
        /// Output image.
        #[arg(short, long)]
        output: PathBuf,
        /// Image size in MiB.
        #[arg(long, default_value_t = rootfs::DEFAULT_SIZE_MB)]
        size_mb: u64,
        /// The busybox binary to put in /bin.
        #[arg(long, default_value = rootfs::HOST_BUSYBOX)]
        busybox: PathBuf,
    },
    /// The Linux test harness alone: each case of tests/linux/*.txt on the host and in sawmill,
    /// compared (also part of a full `test` run).
    TestLinux {
        /// Only cases whose title contains one of these (e.g. `applets.txt:12`, `sort`).
        filters: Vec<String>,
        /// Cases run in parallel.
        #[arg(short, long, default_value_t = 2)]
        jobs: usize,
        /// Run only the host side (the oracle), e.g. to check a new case.
        #[arg(long)]
        host_only: bool,
    },
    /// Run host unit tests and the QEMU scenarios in systems/tests/ (or only the named ones).
    Test {
        /// Scenario names (systems/tests/NAME.toml) or manifest paths; none = everything.
        scenarios: Vec<String>,
        /// Scenarios run in parallel.
        #[arg(short, long, default_value_t = 2)]
        jobs: usize,
        /// Skip the host unit tests (`cargo test`) when running all scenarios.
        #[arg(long)]
        no_host: bool,
    },
    /// Format and lint checks: `cargo fmt --check` and clippy `-D warnings` over host and guest
    /// crates (also part of a full `test` run).
    Lint,
    /// Run the benchmarks (sawmill and a Linux baseline) and write target/bench/.
    Bench {
        /// Skip the Linux baseline.
        #[arg(long)]
        no_linux: bool,
        /// Run only these parts (comma-separated): benchmark system names (`bench-fs`),
        /// `linuxabi` (lbench on the Linux personality), `net` (its network figures), `boot` (reset to the shell's first
        /// prompt, sawmill and Linux), `linux` (the baseline), `faults` (the long fault-injection
        /// campaign).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// The long run of the hostile client (issue 12): every systems/tests/hostile-*.toml with
    /// COUNT messages per server, then a table of sent / alive / wrong / hangs per server.
    Hostile {
        /// Messages per server.
        #[arg(long, default_value_t = 100_000)]
        count: u64,
        /// Replay with this seed instead of each scenario's own.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// The fault-injection campaign (issue 16): boots SYSTEM (default systems/faults.toml) and
    /// injects COUNT seeded faults into its restartable servers while a workload writes, fsyncs
    /// and reads back files; then checks the disk (e2fsck, every fsync'd byte). Exit status 1
    /// when a goal is missed.
    Faults {
        /// The system (a name under systems/ or a manifest path).
        system: Option<String>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 300)]
        count: u64,
        /// Kinds to inject (comma-separated: kill, panic, corrupt, wild, loop, drop, eio);
        /// default every kind but `loop` (until root detects hangs).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
    },
    /// ext2 image utilities (see `./sawmill ext2 help`).
    #[command(disable_help_flag = true)]
    Ext2 {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Crash consistency (issue 16): run the fsync workload with every disk write logged by
    /// QEMU, replay the log to every flush and to points between, and check each with e2fsck
    /// and against what the fsyncs acknowledged (docs/filesystem.md, "Crash consistency").
    Crash {
        /// At most N crash points between two flushes (default: one after every write).
        #[arg(long, value_name = "N")]
        samples: Option<usize>,
        /// Use the guest binaries already built instead of running cargo.
        #[arg(long)]
        no_build: bool,
    },
}

fn main() {
    // ext2 owns its whole argument syntax, so hand it the raw arguments before clap sees them.
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("ext2") {
        std::process::exit(ext2cmd::main(&raw[1..]));
    }
    let cli = Cli::parse();
    let code = match real_main(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sawmill: {e}");
            1
        }
    };
    std::process::exit(code);
}

fn real_main(cmd: Cmd) -> Result<i32, String> {
    let repo = Repo::find()?;
    match cmd {
        Cmd::Build => {
            guest::build(&repo)?;
            Ok(0)
        }
        Cmd::Image {
            system,
            output,
            no_build,
            iso,
        } => {
            let path = if iso && system == "linux" {
                linux::patched_manifest(&repo, "iso", &linux::login_process())?
            } else {
                repo.resolve_system(&system)?
            };
            let mf = image::load(&path)?;
            if !no_build {
                guest::build(&repo)?;
            }
            if iso {
                iso::write(&repo, &mf.system, &output)?;
                println!(
                    "{}: GRUB CD image of system `{}`",
                    output.display(),
                    mf.system.name
                );
                if system == "linux" {
                    let root = iso::root_beside(&output);
                    rootfs::build(&rootfs::Options {
                        trees: Vec::new(),
                        output: root.clone(),
                        size_mb: rootfs::DEFAULT_SIZE_MB,
                        busybox: rootfs::HOST_BUSYBOX.into(),
                        motd: Some(linux::motd(&repo)?),
                    })?;
                    println!(
                        "{}: its root file system; boot both with\n  qemu-system-x86_64 -m 1G \
                         -cdrom {} -drive file={},if=virtio,format=raw -nic none -serial file:debug.log \
                         -serial stdio",
                        root.display(),
                        output.display(),
                        root.display()
                    );
                }
                return Ok(0);
            }
            let info = image::write_image(&repo, &mf.system, &output)?;
            let p = info.placement;
            println!(
                "{}: system `{}`, boot archive {} bytes at physical {:#x}",
                output.display(),
                mf.system.name,
                p.len,
                p.paddr
            );
            for (name, size) in &info.entries {
                println!("  {name:<48} {size:>10} bytes");
            }
            Ok(0)
        }
        Cmd::Run {
            system,
            timeout,
            icount,
            no_build,
            root,
            quiet,
            trace,
            stdin,
            net,
            forward,
            pcap,
            net_raw,
            program,
        } => {
            if !net && net_raw.is_none() && (!forward.is_empty() || pcap.is_some()) {
                return Err("--forward and --pcap need --net".into());
            }
            let net_args = match &net_raw {
                Some(ports) => {
                    let bad = || format!("--net-raw {ports}: want HOSTPORT:QEMUPORT");
                    let (h, q) = ports.split_once(':').ok_or_else(bad)?;
                    let (h, q) = (h.parse().map_err(|_| bad())?, q.parse().map_err(|_| bad())?);
                    Some(qemu::raw_net_args(h, q, pcap.as_deref()))
                }
                None => net.then(|| qemu::net_args(&forward, pcap.as_deref())),
            };
            if system == "linux" {
                return linux::run(
                    &repo,
                    &linux::RunOptions {
                        argv: program,
                        root,
                        quiet,
                        trace,
                        stdin,
                        timeout,
                        no_build,
                        icount,
                        net: net_args.unwrap_or_default(),
                    },
                );
            }
            if !program.is_empty() || root.is_some() || quiet || trace || stdin.is_some() {
                return Err(
                    "--root, --quiet, --trace, --stdin and a program are for `run linux`".into(),
                );
            }
            run(
                &repo,
                &system,
                timeout.unwrap_or(600),
                icount,
                no_build,
                net_args.unwrap_or_default(),
            )
        }
        Cmd::Rootfs {
            trees,
            output,
            size_mb,
            busybox,
        } => {
            rootfs::build(&rootfs::Options {
                trees,
                output: output.clone(),
                size_mb,
                busybox,
                motd: Some(linux::motd(&repo)?),
            })?;
            println!("{}: root image ({size_mb} MiB)", output.display());
            Ok(0)
        }
        Cmd::TestLinux {
            filters,
            jobs,
            host_only,
        } => Ok(testcmd::run_linux(&repo, filters, jobs, host_only)),
        Cmd::Test {
            scenarios,
            jobs,
            no_host,
        } => Ok(testcmd::run(
            &repo,
            &testcmd::Options {
                names: scenarios,
                jobs,
                host: !no_host,
            },
        )),
        Cmd::Lint => {
            let (passed, failed) = lint::run(&repo);
            println!("{passed} passed, {failed} failed");
            Ok(i32::from(failed != 0))
        }
        Cmd::Bench { no_linux, only } => Ok(bench::run(&repo, !no_linux, &only)),
        Cmd::Hostile { count, seed } => Ok(hostilecmd::run(&repo, count, seed)),
        Cmd::Faults {
            system,
            seed,
            count,
            kinds,
        } => {
            let kinds = if kinds.is_empty() {
                faults::DEFAULT_KINDS.to_vec()
            } else {
                kinds
                    .iter()
                    .map(|k| {
                        sawmill_manifest::faults::Kind::from_name(k)
                            .ok_or_else(|| format!("unknown fault kind `{k}`"))
                    })
                    .collect::<Result<_, _>>()?
            };
            Ok(faults::run(
                &repo,
                &faults::Options {
                    system,
                    seed,
                    count,
                    kinds,
                },
            ))
        }
        Cmd::Ext2 { args } => Ok(ext2cmd::main(&args)),
        Cmd::Crash { samples, no_build } => Ok(crashcmd::main(
            &repo,
            &crashcmd::Options { samples, no_build },
        )),
    }
}

fn run(
    repo: &Repo,
    system: &str,
    timeout: u64,
    icount: bool,
    no_build: bool,
    net_args: Vec<String>,
) -> Result<i32, String> {
    let path = repo.resolve_system(system)?;
    let mf = image::load(&path)?;
    // Memory size and extra QEMU arguments may come from the manifest's [test] table.
    let spec = scenario::parse(mf.test.as_ref())?;
    if !no_build {
        guest::build(repo)?;
    }
    let img = repo
        .target()
        .join("images")
        .join(format!("{}.img", repo::system_stem(&path)));
    image::write_image(repo, &mf.system, &img)?;
    let cfg = qemu::Config {
        image: img.clone(),
        memory: spec.memory,
        icount,
        extra: spec.qemu_args.into_iter().chain(net_args).collect(),
        serial_log: None,
        com2: qemu::Com2::None,
    };
    let accel = if icount {
        "TCG, icount"
    } else if qemu::kvm_usable() {
        "KVM"
    } else {
        "TCG"
    };
    eprintln!(
        "sawmill: booting {} ({accel}, timeout {timeout}s)",
        img.display()
    );
    let outcome = qemu::run(&cfg, Duration::from_secs(timeout), None, None)?;
    match outcome {
        qemu::Outcome::Guest(code) => {
            eprintln!("sawmill: guest exited with code {code}");
            Ok(code as i32)
        }
        qemu::Outcome::Timeout(_) => {
            eprintln!("sawmill: {}", outcome.describe());
            Ok(124)
        }
        other => {
            eprintln!("sawmill: {}", other.describe());
            Ok(125)
        }
    }
}
