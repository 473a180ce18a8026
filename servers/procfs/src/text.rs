//! The text of each /proc file, in Linux's formats (field order, spacing and units as proc(5)
//! and Linux 6.1's `fs/proc` print them), from plain figures the server gathers. Where sawmill
//! does not measure a figure Linux reports (CPU time, load, per-process memory), the field is
//! there with 0, so that Linux's parsers (busybox `ps`, `top`, `free`) read every line; the
//! figures sawmill has are true.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// Linux's `USER_HZ`: clock ticks per second in /proc. The kernel's timer runs at the same rate
/// (10 ms), so its ticks are used as they are.
pub const USER_HZ: u64 = 100;

/// One process, as /proc shows it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Process {
    pub pid: u32,
    /// `comm`: the program's name, at most 15 bytes.
    pub name: String,
    pub zombie: bool,
    /// Stopped by a stop signal (`T`).
    pub stopped: bool,
    /// Its thread waits (`S`; else `R`).
    pub sleeping: bool,
    pub ppid: u32,
    pub pgid: u32,
    pub sid: u32,
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
    /// Clock ticks after boot when it started.
    pub started: u64,
    /// A zombie's `wait` status.
    pub exit: u32,
    /// Its threads.
    pub threads: u32,
}

impl Process {
    fn state(&self) -> (char, &'static str) {
        if self.zombie {
            ('Z', "zombie")
        } else if self.stopped {
            ('T', "stopped")
        } else if self.sleeping {
            ('S', "sleeping")
        } else {
            ('R', "running")
        }
    }
}

/// `/proc/PID/stat`: the 52 fields of proc(5), one line.
pub fn pid_stat(p: &Process) -> String {
    let (state, _) = p.state();
    let mut s = String::with_capacity(200);
    // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    let _ = write!(
        s,
        "{} ({}) {} {} {} {} 0 -1 0 0 0 0 0 ",
        p.pid, p.name, state, p.ppid, p.pgid, p.sid
    );
    // utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize rss rsslim
    let _ = write!(
        s,
        "0 0 0 0 20 0 {} 0 {} 0 0 18446744073709551615 ",
        p.threads.max(1),
        p.started
    );
    // startcode endcode startstack kstkesp kstkeip signal blocked sigignore sigcatch wchan nswap
    // cnswap exit_signal processor rt_priority policy delayacct_blkio_ticks guest_time
    // cguest_time start_data end_data start_brk arg_start arg_end env_start env_end exit_code
    let _ = writeln!(
        s,
        "0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 {}",
        if p.zombie { p.exit } else { 0 }
    );
    s
}

/// `/proc/PID/status`: the lines sawmill knows, in Linux's order and layout (`Name:\tvalue`).
pub fn pid_status(p: &Process) -> String {
    let (c, word) = p.state();
    let mut s = String::with_capacity(300);
    let _ = writeln!(s, "Name:\t{}", p.name);
    let _ = writeln!(s, "State:\t{} ({})", c, word);
    let _ = writeln!(s, "Tgid:\t{}", p.pid);
    let _ = writeln!(s, "Ngid:\t0");
    let _ = writeln!(s, "Pid:\t{}", p.pid);
    let _ = writeln!(s, "PPid:\t{}", p.ppid);
    let _ = writeln!(s, "TracerPid:\t0");
    // Real, effective, saved and file-system ids (the last two follow the effective one).
    let _ = writeln!(s, "Uid:\t{}\t{}\t{}\t{}", p.uid, p.euid, p.euid, p.euid);
    let _ = writeln!(s, "Gid:\t{}\t{}\t{}\t{}", p.gid, p.egid, p.egid, p.egid);
    let _ = writeln!(s, "Groups:\t");
    let _ = writeln!(s, "NStgid:\t{}", p.pid);
    let _ = writeln!(s, "NSpid:\t{}", p.pid);
    let _ = writeln!(s, "NSpgid:\t{}", p.pgid);
    let _ = writeln!(s, "NSsid:\t{}", p.sid);
    let _ = writeln!(s, "Threads:\t{}", p.threads.max(1));
    s
}

/// `/proc/PID/comm`.
pub fn pid_comm(p: &Process) -> String {
    format!("{}\n", p.name)
}

/// One `/proc/meminfo` line: the label padded to 16 columns, the figure to 8, in KiB.
fn kb_line(s: &mut String, label: &str, kb: u64) {
    let _ = writeln!(s, "{:<16}{:>8} kB", label, kb);
}

/// `/proc/meminfo`: all of user RAM and what the memory server has free (sawmill has no swap,
/// and the file servers' caches are their own memory, not counted as `Cached`).
pub fn meminfo(total_kb: u64, free_kb: u64) -> String {
    let mut s = String::with_capacity(400);
    let free_kb = free_kb.min(total_kb);
    for (label, kb) in [
        ("MemTotal:", total_kb),
        ("MemFree:", free_kb),
        ("MemAvailable:", free_kb),
        ("Buffers:", 0),
        ("Cached:", 0),
        ("SwapCached:", 0),
        ("SwapTotal:", 0),
        ("SwapFree:", 0),
        ("Shmem:", 0),
        ("SReclaimable:", 0),
    ] {
        kb_line(&mut s, label, kb);
    }
    s
}

/// Ticks as seconds with two decimals.
fn seconds(ticks: u64) -> String {
    format!("{}.{:02}", ticks / USER_HZ, ticks % USER_HZ)
}

/// `/proc/uptime`: seconds since boot and seconds spent idle (not measured: 0).
pub fn uptime(ticks: u64) -> String {
    format!("{} 0.00\n", seconds(ticks))
}

/// `/proc/loadavg`: the three load averages (not measured: 0), running/all processes, the
/// newest pid.
pub fn loadavg(running: u32, total: u32, last_pid: u32) -> String {
    format!("0.00 0.00 0.00 {}/{} {}\n", running, total, last_pid)
}

/// `/proc/stat`: CPU time (not measured: 0), boot time, processes.
pub fn stat(boot_epoch: u64, created: u32, running: u32) -> String {
    let mut s = String::with_capacity(300);
    s.push_str("cpu  0 0 0 0 0 0 0 0 0 0\n");
    s.push_str("cpu0 0 0 0 0 0 0 0 0 0 0\n");
    s.push_str("intr 0\nctxt 0\n");
    let _ = writeln!(s, "btime {}", boot_epoch);
    let _ = writeln!(s, "processes {}", created);
    let _ = writeln!(s, "procs_running {}", running);
    s.push_str("procs_blocked 0\n");
    s.push_str("softirq 0 0 0 0 0 0 0 0 0 0 0\n");
    s
}

/// A field of `/proc/mounts` with Linux's octal escapes for space, tab, newline and backslash.
fn mount_field(s: &mut String, f: &str) {
    for c in f.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => {
                let _ = write!(s, "\\{:03o}", c as u32);
            }
            c => s.push(c),
        }
    }
}

/// `/proc/mounts`: `source path type options 0 0` per mount.
pub fn mounts<'a>(list: impl Iterator<Item = [&'a str; 4]>) -> String {
    let mut s = String::new();
    for m in list {
        for (i, f) in m.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            mount_field(&mut s, f);
        }
        s.push_str(" 0 0\n");
    }
    s
}

/// What `cpuid` says about the processor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cpu {
    pub vendor: String,
    /// Leaf 0's highest standard leaf.
    pub level: u32,
    /// Leaf 1: eax (signature), ecx, edx; leaf 7 ebx; leaf 0x8000_0001 ecx, edx.
    pub sig: u32,
    pub ecx1: u32,
    pub edx1: u32,
    pub ebx7: u32,
    pub ecx81: u32,
    pub edx81: u32,
    /// The brand string (leaves 0x8000_0002..4), trimmed.
    pub brand: String,
    /// Leaf 0x8000_0008 eax: physical and virtual address bits.
    pub addr_bits: u32,
    /// The time-stamp counter's rate.
    pub khz: u64,
}

/// Linux's names of the feature bits, in its order of words: leaf 1 edx, 0x8000_0001 edx, leaf
/// 1 ecx, 0x8000_0001 ecx, leaf 7 ebx.
const EDX1: &[(u32, &str)] = &[
    (0, "fpu"),
    (1, "vme"),
    (2, "de"),
    (3, "pse"),
    (4, "tsc"),
    (5, "msr"),
    (6, "pae"),
    (7, "mce"),
    (8, "cx8"),
    (9, "apic"),
    (11, "sep"),
    (12, "mtrr"),
    (13, "pge"),
    (14, "mca"),
    (15, "cmov"),
    (16, "pat"),
    (17, "pse36"),
    (19, "clflush"),
    (23, "mmx"),
    (24, "fxsr"),
    (25, "sse"),
    (26, "sse2"),
    (27, "ss"),
    (28, "ht"),
];
const EDX81: &[(u32, &str)] = &[
    (11, "syscall"),
    (20, "nx"),
    (26, "pdpe1gb"),
    (27, "rdtscp"),
    (29, "lm"),
];
const ECX1: &[(u32, &str)] = &[
    (0, "pni"),
    (1, "pclmulqdq"),
    (9, "ssse3"),
    (12, "fma"),
    (13, "cx16"),
    (19, "sse4_1"),
    (20, "sse4_2"),
    (21, "x2apic"),
    (22, "movbe"),
    (23, "popcnt"),
    (25, "aes"),
    (26, "xsave"),
    (28, "avx"),
    (29, "f16c"),
    (30, "rdrand"),
    (31, "hypervisor"),
];
const ECX81: &[(u32, &str)] = &[
    (0, "lahf_lm"),
    (5, "abm"),
    (6, "sse4a"),
    (8, "3dnowprefetch"),
];
const EBX7: &[(u32, &str)] = &[
    (0, "fsgsbase"),
    (3, "bmi1"),
    (5, "avx2"),
    (7, "smep"),
    (8, "bmi2"),
    (9, "erms"),
    (10, "invpcid"),
    (18, "rdseed"),
    (19, "adx"),
    (20, "smap"),
    (23, "clflushopt"),
    (29, "sha_ni"),
];

impl Cpu {
    /// The `flags` line's names of the bits set.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (word, names) in [
            (self.edx1, EDX1),
            (self.edx81, EDX81),
            (self.ecx1, ECX1),
            (self.ecx81, ECX81),
            (self.ebx7, EBX7),
        ] {
            out.extend(
                names
                    .iter()
                    .filter(|(bit, _)| word & (1 << bit) != 0)
                    .map(|x| x.1),
            );
        }
        out
    }

    /// Family, model and stepping as Linux computes them from the signature.
    pub fn family_model_stepping(&self) -> (u32, u32, u32) {
        let base_family = (self.sig >> 8) & 0xf;
        let family = if base_family == 0xf {
            base_family + ((self.sig >> 20) & 0xff)
        } else {
            base_family
        };
        let mut model = (self.sig >> 4) & 0xf;
        if family >= 6 {
            model += ((self.sig >> 16) & 0xf) << 4;
        }
        (family, model, self.sig & 0xf)
    }
}

/// `/proc/cpuinfo`: one block per processor (sawmill's kernel runs on one).
pub fn cpuinfo(c: &Cpu, processors: u32) -> String {
    let (family, model, stepping) = c.family_model_stepping();
    let flags = c.flags().join(" ");
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut s = String::with_capacity(1024 * processors as usize);
    for n in 0..processors {
        let _ = writeln!(s, "processor\t: {}", n);
        let _ = writeln!(s, "vendor_id\t: {}", c.vendor);
        let _ = writeln!(s, "cpu family\t: {}", family);
        let _ = writeln!(s, "model\t\t: {}", model);
        let _ = writeln!(s, "model name\t: {}", c.brand);
        let _ = writeln!(s, "stepping\t: {}", stepping);
        let _ = writeln!(s, "cpu MHz\t\t: {}.{:03}", c.khz / 1000, c.khz % 1000);
        let _ = writeln!(s, "fpu\t\t: {}", yes_no(c.edx1 & 1 != 0));
        let _ = writeln!(s, "fpu_exception\t: {}", yes_no(c.edx1 & 1 != 0));
        let _ = writeln!(s, "cpuid level\t: {}", c.level);
        let _ = writeln!(s, "wp\t\t: yes");
        let _ = writeln!(s, "flags\t\t: {}", flags);
        // Linux's calibrated delay loop runs two instructions per cycle.
        let bogo = c.khz * 2 / 10;
        let _ = writeln!(s, "bogomips\t: {}.{:02}", bogo / 100, bogo % 100);
        let _ = writeln!(s, "clflush size\t: 64");
        let _ = writeln!(s, "cache_alignment\t: 64");
        let _ = writeln!(
            s,
            "address sizes\t: {} bits physical, {} bits virtual",
            c.addr_bits & 0xff,
            (c.addr_bits >> 8) & 0xff
        );
        let _ = writeln!(s, "power management:");
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> Process {
        Process {
            pid: 4566,
            name: String::from("cat"),
            ppid: 4473,
            pgid: 4473,
            sid: 22391,
            uid: 1000,
            euid: 1000,
            gid: 100,
            egid: 100,
            started: 2074035,
            ..Process::default()
        }
    }

    #[test]
    fn pid_stat_has_linux_fields() {
        // The layout of a Linux 6.1 line (`cat /proc/self/stat`), with the figures sawmill
        // does not measure at 0.
        let s = pid_stat(&cat());
        assert_eq!(
            s,
            "4566 (cat) R 4473 4473 22391 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 2074035 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        );
        // 52 fields, as proc(5) lists them.
        assert_eq!(s.split_whitespace().count(), 52);
        let mut z = cat();
        z.zombie = true;
        z.exit = 0x200;
        let s = pid_stat(&z);
        assert!(s.starts_with("4566 (cat) Z "));
        assert!(s.ends_with(" 512\n"));
    }

    #[test]
    fn pid_status_lines() {
        let s = pid_status(&cat());
        assert!(s.starts_with("Name:\tcat\nState:\tR (running)\nTgid:\t4566\nNgid:\t0\nPid:\t4566\nPPid:\t4473\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\n"));
        assert!(s.contains("\nNSsid:\t22391\nThreads:\t1\n"));
        assert_eq!(pid_comm(&cat()), "cat\n");
        // Linux's words for the other states (host `cat /proc/PID/status` of a sleeping, a
        // stopped and a zombie process).
        let mut p = cat();
        p.sleeping = true;
        assert!(pid_status(&p).contains("\nState:\tS (sleeping)\n"));
        assert!(pid_stat(&p).starts_with("4566 (cat) S "));
        p.stopped = true;
        assert!(pid_status(&p).contains("\nState:\tT (stopped)\n"));
        assert!(pid_stat(&p).starts_with("4566 (cat) T "));
        p.zombie = true;
        assert!(pid_status(&p).contains("\nState:\tZ (zombie)\n"));
    }

    #[test]
    fn meminfo_columns() {
        let s = meminfo(24683656, 20014804);
        // As Linux prints them (host `cat /proc/meminfo`).
        assert!(s.starts_with("MemTotal:       24683656 kB\nMemFree:        20014804 kB\n"));
        assert!(s.contains("\nSwapTotal:             0 kB\n"));
        for l in s.lines() {
            assert!(l.ends_with(" kB") && l.len() == 27, "{:?}", l);
        }
        // Free never exceeds total.
        assert!(meminfo(4, 8).contains("MemFree:               4 kB"));
    }

    #[test]
    fn small_files() {
        assert_eq!(uptime(2074035), "20740.35 0.00\n");
        assert_eq!(uptime(5), "0.05 0.00\n");
        assert_eq!(loadavg(1, 3, 17), "0.00 0.00 0.00 1/3 17\n");
        let s = stat(1_700_000_000, 9, 2);
        assert!(s.starts_with("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 "));
        assert!(s.contains("\nbtime 1700000000\nprocesses 9\nprocs_running 2\nprocs_blocked 0\n"));
        let m = mounts(
            [
                ["/dev/root", "/", "ext2", "rw"],
                ["proc", "/proc", "proc", "rw"],
                ["a b", "/x\\y", "t", "ro"],
            ]
            .into_iter(),
        );
        assert_eq!(
            m,
            "/dev/root / ext2 rw 0 0\nproc /proc proc rw 0 0\na\\040b /x\\134y t ro 0 0\n"
        );
    }

    #[test]
    fn cpuinfo_of_qemu64() {
        // QEMU's `qemu64` model: family 15 (0xf + 0), model 107 (0x6b), stepping 1.
        let c = Cpu {
            vendor: String::from("AuthenticAMD"),
            level: 13,
            sig: 0x0006_0fb1,
            edx1: 0x0781_abfd,
            ecx1: 0x8080_2001,
            edx81: 0x2010_0800,
            ecx81: 0x0000_0065,
            ebx7: 0,
            brand: String::from("QEMU Virtual CPU version 2.5+"),
            addr_bits: 0x3028,
            khz: 1_000_000,
        };
        assert_eq!(c.family_model_stepping(), (15, 107, 1));
        let s = cpuinfo(&c, 1);
        assert!(s.starts_with("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 15\nmodel\t\t: 107\nmodel name\t: QEMU Virtual CPU version 2.5+\nstepping\t: 1\ncpu MHz\t\t: 1000.000\n"));
        assert!(s.contains("\nflags\t\t: fpu de pse tsc msr pae mce cx8 apic sep pge cmov pat mmx fxsr sse sse2 syscall nx lm pni cx16 popcnt hypervisor lahf_lm abm sse4a\n"));
        assert!(s.contains("\nbogomips\t: 2000.00\n"));
        assert!(s.contains("\naddress sizes\t: 40 bits physical, 48 bits virtual\n"));
        assert!(s.ends_with("power management:\n\n"));
        assert_eq!(cpuinfo(&c, 2).matches("processor\t:").count(), 2);
    }
}
