//! `procfs`, the /proc file system server: Linux's /proc as a PFS behind the VFS (mounted at
//! `/proc` by the VFS's `mounts`). It speaks the PFS protocol of interfaces/fs.idl like the ext2
//! server (the VFS asks for a capability to our own endpoint, `reconnect`; sessions of protocol option 3;
//! each open file its own watched badge), read-only. A file's text is made when it is opened
//! (a snapshot: reads of one open file agree with each other) from figures it gathers then:
//! processes from proc (`proc_info`), memory from mem (`mem.stats`) and the kernel (user RAM),
//! time from the kernel's timer ticks, the processor from `cpuid`, the mount list from our
//! config. Files cannot be mapped: `file.map` maps no page, so clients read through `read`.
//!
//! **proc is asked without risk of deadlock.** proc calls the VFS (to check programs), and the
//! VFS calls us: if proc's call walks into /proc while we wait on proc, all three would wait
//! for ever. So each question to proc is first offered without blocking (a `status(0)` with a
//! non-blocking send): if proc is not waiting for messages we yield and offer again for at most
//! [`PROC_WAIT_MS`]; if proc stays busy the request fails with `Io` instead of hanging.
//!
//! It touches its own task, the endpoint root made for it (`pfs_manifest::own_endpoint`), capabilities it mints from that for
//! open files and sessions, and asks proc, mem, the kernel and root (its fault log, for
//! `/proc/faults`, if the manifest lets it: `fault_log = true`); it writes nothing anywhere.

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use sawmill_abi::{rights, MsgTag};
use sawmill_interfaces::file::{self, MapOut, StatOut};
use sawmill_interfaces::pfs::{self, LookupOut, OpenOut, OpenPathOut, ReaddirOut, VFS_BADGE};
use sawmill_interfaces::pfs::{GetattrOut as Attrs, StatfsOut};
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, IpcResult, Next};
use sawmill_interfaces::{
    mem, proc_info, EntryKind, FsError, OpenFlags, ProcState, RenameFlags, SetAttrFields,
};
use sawmill_procfs::text::{self, Cpu, Process, USER_HZ};
use sawmill_procfs::tree::{Global, Node, PidEntry, GLOBALS, PID_ENTRIES, ROOT};
use sawmill_procfs_api::Config;
use sawmill_rt::{env, ipc, println, sys, thread};

sawmill_rt::entry!(main);

/// Badges of client sessions (option 3): `SESSION_BASE + n`.
const SESSION_BASE: u64 = 1 << 20;
/// Badges of open files: `FILE_BASE + index`.
const FILE_BASE: u64 = 1 << 32;
/// The badge of our notice capability: the kernel's NO_SENDERS notices arrive with it.
const NOTICE_BADGE: u64 = 2;
/// How long a question to proc may wait for proc to take messages (see the module header).
const PROC_WAIT_MS: u64 = 100;
/// `readdir` cookies from here on list processes: the cookie is this plus the last pid listed.
const PID_COOKIE: u64 = 1 << 32;
/// The root's entries before the processes: `.`, `..` and the fixed ones.
const ROOT_FIXED: u64 = 2 + GLOBALS.len() as u64;

/// `/proc/faults`: root's fault log, one line per death of a server in the order they happened
/// (`server NAME incarnation G reason R at T ms (policy P)`, as on the serial console), read a
/// line at a time with `FAULT_LOG_LABEL` on our `sys:pager` capability. Root answers at once
/// and never calls us, so the call cannot deadlock. Empty if root refuses (no `fault_log`).
fn fault_log() -> String {
    use sawmill_manifest::faultlog;
    let mut out = String::new();
    let mut seq = 0;
    for _ in 0..faultlog::FAULT_LOG_LINES {
        let r = ipc::call(
            sawmill_rt::slots::PAGER,
            MsgTag::new(sawmill_manifest::FAULT_LOG_LABEL, 1),
            [seq, 0, 0, 0],
        );
        if r.err != 0 || r.tag.label() != 0 {
            break;
        }
        let n = r.tag.words().min(64);
        let mut words = [0u64; 64];
        words[..4].copy_from_slice(&r.w);
        words[4..n.max(4)].copy_from_slice(&sawmill_rt::utcb().mr[4..n.max(4)]);
        let Some((at, line)) = faultlog::decode_line(&words, n) else {
            break;
        };
        out.push_str(&line);
        out.push('\n');
        seq = at + 1;
    }
    out
}

/// One open file: what it names and the text it had when opened.
struct Open {
    node: Node,
    text: Vec<u8>,
    /// Who it is charged to (the opener's badge: the VFS or a session).
    by: u64,
}

struct Procfs {
    cfg: Config,
    /// Our endpoint (the VFS made it): every capability we hand out is minted from it.
    ep: u64,
    notice: u64,
    proc_ep: u64,
    mem_ep: Option<u64>,
    /// Open files by index (badge - FILE_BASE); an index stays taken until its capability goes.
    files: Vec<Option<Open>>,
    taken: Vec<bool>,
    /// Open files charged to each opener.
    held: BTreeMap<u64, u32>,
    next_session: u64,
    /// The wall clock at boot (the kernel's RTC reading).
    boot_epoch: u64,
    cpu: Cpu,
    free_slots: Vec<u64>,
    after: AfterReply,
}

/// What the processor says about itself.
fn read_cpu(khz: u64) -> Cpu {
    use core::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: `cpuid` exists on every x86-64 processor and only reads identification registers.
    let id = |leaf: u32| unsafe { __cpuid(leaf) };
    let l0 = id(0);
    let mut vendor = Vec::with_capacity(12);
    for r in [l0.ebx, l0.edx, l0.ecx] {
        vendor.extend_from_slice(&r.to_le_bytes());
    }
    let l1 = id(1);
    let ebx7 = if l0.eax >= 7 { id(7).ebx } else { 0 };
    let top = id(0x8000_0000).eax;
    let (ecx81, edx81) = if top >= 0x8000_0001 {
        let l = id(0x8000_0001);
        (l.ecx, l.edx)
    } else {
        (0, 0)
    };
    let mut brand = Vec::with_capacity(48);
    if top >= 0x8000_0004 {
        for leaf in 0x8000_0002..=0x8000_0004 {
            let r = id(leaf);
            for w in [r.eax, r.ebx, r.ecx, r.edx] {
                brand.extend_from_slice(&w.to_le_bytes());
            }
        }
    }
    let addr_bits = if top >= 0x8000_0008 {
        id(0x8000_0008).eax
    } else {
        0x3024
    };
    let text = |b: &[u8]| {
        String::from(
            core::str::from_utf8(b)
                .unwrap_or("")
                .trim_matches(|c: char| c == '\0' || c == ' '),
        )
    };
    Cpu {
        vendor: text(&vendor),
        level: l0.eax,
        sig: l1.eax,
        ecx1: l1.ecx,
        edx1: l1.edx,
        ebx7,
        ecx81,
        edx81,
        brand: text(&brand),
        addr_bits,
        khz,
    }
}

fn ticks() -> u64 {
    sys::kernel_info(sawmill_abi::kinfo::TICKS).unwrap_or(0)
}

fn bytes<const N: usize>(b: &[u8]) -> Result<Bytes<N>, FsError> {
    Bytes::from_slice(&b[..b.len().min(N)]).ok_or(FsError::Io)
}

impl Procfs {
    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// Whether proc takes messages now (waiting at most [`PROC_WAIT_MS`] for it to).
    fn proc_ready(&self) -> bool {
        let start = sys::rdtsc();
        let limit = PROC_WAIT_MS.saturating_mul(self.cpu.khz.max(1));
        loop {
            let probe = MsgTag::new(proc_info::op::STATUS, 1).nonblocking();
            let r = ipc::call(self.proc_ep, probe, [0; 4]);
            if r.err != sawmill_abi::Error::WouldBlock as u64 {
                return r.err == 0;
            }
            if sys::rdtsc().wrapping_sub(start) > limit {
                return false;
            }
            sys::yield_now();
        }
    }

    fn proc(&self) -> Result<proc_info::Client, FsError> {
        if self.proc_ready() {
            Ok(proc_info::Client::new(self.proc_ep))
        } else {
            Err(FsError::Io)
        }
    }

    /// Process `pid` as /proc shows it (NotFound: no such process).
    fn process(&self, pid: u32) -> Result<Process, FsError> {
        let s = self.proc()?.status(pid).map_err(|e| match e {
            rpc::Error::App(_) => FsError::NotFound,
            _ => FsError::Io,
        })?;
        Ok(Process {
            pid,
            name: String::from(core::str::from_utf8(s.name.as_slice()).unwrap_or("?")),
            zombie: s.state == ProcState::Zombie,
            stopped: s.state == ProcState::Stopped,
            sleeping: s.state == ProcState::Sleeping,
            ppid: s.ppid,
            pgid: s.pgid,
            sid: s.sid,
            uid: s.uid,
            euid: s.euid,
            gid: s.gid,
            egid: s.egid,
            started: s.started,
            exit: s.exit,
            threads: s.threads.max(1),
        })
    }

    /// The first pid greater than `after` (None: no more).
    fn next_pid(&self, after: u32) -> Result<Option<u32>, FsError> {
        let l = self.proc()?.pids(after).map_err(|_| FsError::Io)?;
        Ok(l.as_slice()
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    }

    /// Every process.
    fn processes(&self) -> Result<Vec<Process>, FsError> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let l = self.proc()?.pids(after).map_err(|_| FsError::Io)?;
            if l.is_empty() {
                return Ok(out);
            }
            for b in l.as_slice().chunks_exact(4) {
                let pid = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                after = pid;
                // A process may go between the two questions.
                if let Ok(p) = self.process(pid) {
                    out.push(p);
                }
            }
        }
    }

    /// Reads all of a proc answer given in pieces from an offset.
    fn pieces<const N: usize>(
        &self,
        mut get: impl FnMut(&proc_info::Client, u32) -> proc_info::Result<Bytes<N>>,
    ) -> Result<Vec<u8>, FsError> {
        let p = self.proc()?;
        let mut out = Vec::new();
        loop {
            let d = get(&p, out.len() as u32).map_err(|e| match e {
                rpc::Error::App(_) => FsError::NotFound,
                _ => FsError::Io,
            })?;
            out.extend_from_slice(d.as_slice());
            if d.len() < N {
                return Ok(out);
            }
        }
    }

    /// The node `ino` names, checking that its process exists: the node and the process.
    fn node(&self, ino: u32) -> Result<(Node, Option<Process>), FsError> {
        let n = Node::from_ino(ino).ok_or(FsError::NotFound)?;
        let p = match n.pid() {
            Some(pid) => Some(self.process(pid)?),
            None => None,
        };
        Ok((n, p))
    }

    fn attrs(&self, n: Node, p: Option<&Process>, size: u64) -> Attrs {
        let (uid, gid, time) = match p {
            Some(p) => (p.euid, p.egid, self.boot_epoch + p.started / USER_HZ),
            None => (0, 0, self.boot_epoch),
        };
        Attrs {
            mode: n.mode(),
            nlink: n.nlink(0),
            uid,
            gid,
            size,
            blocks: 0,
            rdev_major: 0,
            rdev_minor: 0,
            atime: time as u32,
            mtime: time as u32,
            ctime: time as u32,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            generation: 0,
        }
    }

    /// `name` in directory `dir`: the node and its process.
    fn child(&self, dir: Node, name: &[u8]) -> Result<(Node, Option<Process>), FsError> {
        if !dir.is_dir() {
            return Err(FsError::NotDir);
        }
        let n = match name {
            b"." => dir,
            b".." => match dir {
                Node::Pid(p, PidEntry::Fd) => Node::Pid(p, PidEntry::Dir),
                _ => Node::Root,
            },
            _ => dir.child(name).ok_or(FsError::NotFound)?,
        };
        let p = match n.pid() {
            Some(pid) => Some(self.process(pid)?),
            None => None,
        };
        Ok((n, p))
    }

    /// The text of file `n` now.
    fn text(&self, n: Node, p: Option<&Process>) -> Result<Vec<u8>, FsError> {
        let s = match (n, p) {
            (Node::Global(g), _) => match g {
                Global::Meminfo => {
                    let frames = sys::kernel_info(sawmill_abi::kinfo::USER_FRAMES).unwrap_or(0);
                    let free = match self.mem_ep {
                        Some(m) => mem::Client::new(m).stats().map_or(0, |s| s.free),
                        None => 0,
                    };
                    text::meminfo(frames * 4, free * 4)
                }
                Global::Uptime => text::uptime(ticks()),
                Global::Loadavg => {
                    let all = self.processes()?;
                    let running = all.iter().filter(|p| !p.zombie).count() as u32;
                    let last = all.iter().map(|p| p.pid).max().unwrap_or(0);
                    text::loadavg(running, all.len() as u32, last)
                }
                Global::Stat => {
                    let all = self.processes()?;
                    let running = all.iter().filter(|p| !p.zombie).count() as u32;
                    let last = all.iter().map(|p| p.pid).max().unwrap_or(0);
                    text::stat(self.boot_epoch, last, running)
                }
                Global::Mounts => text::mounts(self.cfg.mounts.iter().map(|m| {
                    [
                        m.source.as_str(),
                        m.path.as_str(),
                        m.fstype.as_str(),
                        m.options.as_str(),
                    ]
                })),
                Global::Cpuinfo => text::cpuinfo(&self.cpu, 1),
                Global::Faults => fault_log(),
                Global::SelfLink => return Err(FsError::NotFound),
            },
            (Node::Pid(pid, e), Some(p)) => match e {
                PidEntry::Stat => text::pid_stat(p),
                PidEntry::Status => text::pid_status(p),
                PidEntry::Comm => text::pid_comm(p),
                PidEntry::Cmdline => {
                    return self.pieces(|c, off| c.cmdline(pid, off));
                }
                PidEntry::Dir | PidEntry::Fd | PidEntry::Exe => String::new(),
            },
            _ => String::new(),
        };
        Ok(s.into_bytes())
    }

    /// Opens `n` for `by`: the file capability and the size of its text.
    fn open_node(
        &mut self,
        by: u64,
        n: Node,
        p: Option<&Process>,
        flags: OpenFlags,
    ) -> Result<(u64, u64), FsError> {
        if flags.intersects(OpenFlags::WRITE | OpenFlags::TRUNC) {
            return if n.is_dir() {
                Err(FsError::IsDir)
            } else {
                Err(FsError::Denied)
            };
        }
        let held = self.held.get(&by).copied().unwrap_or(0);
        let open = self.taken.iter().filter(|&&t| t).count();
        if held >= self.cfg.per_client || open >= self.cfg.open_files as usize {
            return Err(FsError::NoSpace);
        }
        let text = self.text(n, p)?;
        let i = match self.taken.iter().position(|&t| !t) {
            Some(i) => i,
            None => {
                self.taken.push(false);
                self.files.push(None);
                self.taken.len() - 1
            }
        };
        // Watched: when the client's last copy goes (closed, or it died) we are told and the
        // snapshot goes (`no_senders`). We keep no copy ourselves.
        let cap = self.slot();
        if sys::cap_mint_watched(
            self.ep,
            cap,
            FILE_BASE + i as u64,
            rights::SEND,
            self.notice,
        )
        .is_err()
        {
            self.free_slots.push(cap);
            return Err(FsError::NoSpace);
        }
        self.after.delete(cap);
        let size = text.len() as u64;
        self.taken[i] = true;
        self.files[i] = Some(Open { node: n, text, by });
        *self.held.entry(by).or_insert(0) += 1;
        Ok((cap, size))
    }

    fn file(&self, badge: u64) -> Result<&Open, FsError> {
        let i = badge.wrapping_sub(FILE_BASE) as usize;
        self.files
            .get(i)
            .and_then(|f| f.as_ref())
            .ok_or(FsError::BadFile)
    }

    /// Who may ask: the VFS or a session we made.
    fn caller(&self, badge: u64) -> Result<(), FsError> {
        if badge == VFS_BADGE || (SESSION_BASE..SESSION_BASE + self.next_session).contains(&badge) {
            Ok(())
        } else {
            Err(FsError::Denied)
        }
    }

    fn statfs_out() -> StatfsOut {
        StatfsOut {
            bsize: 4096,
            blocks: 0,
            bfree: 0,
            bavail: 0,
            files: 0,
            ffree: 0,
            namelen: 255,
        }
    }
}

macro_rules! read_only {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {
        $(fn $name(&mut self, badge: u64, $($a: $t),*) -> Result<$r, FsError> {
            $(let _ = $a;)*
            self.caller(badge)?;
            Err(FsError::Denied)
        })*
    };
}

impl pfs::Server for Procfs {
    fn watch(&mut self, _badge: u64) -> Result<(), FsError> {
        Err(FsError::Invalid)
    }
    fn reconnect(&mut self, _badge: u64) -> Result<u64, FsError> {
        Err(FsError::Invalid)
    }
    fn root(&mut self, badge: u64) -> Result<u32, FsError> {
        self.caller(badge)?;
        Ok(ROOT)
    }
    fn lookup(&mut self, badge: u64, dir: u32, name: &[u8]) -> Result<LookupOut, FsError> {
        self.caller(badge)?;
        let (d, _) = self.node(dir)?;
        let (n, p) = self.child(d, name)?;
        let a = self.attrs(n, p.as_ref(), 0);
        Ok(LookupOut {
            ino: n.ino(),
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
        })
    }
    fn getattr(&mut self, badge: u64, ino: u32) -> Result<Attrs, FsError> {
        self.caller(badge)?;
        let (n, p) = self.node(ino)?;
        // Sizes are 0, as Linux's /proc reports them: the text exists only when read.
        Ok(self.attrs(n, p.as_ref(), 0))
    }
    fn open(&mut self, badge: u64, ino: u32, flags: OpenFlags) -> Result<OpenOut, FsError> {
        self.caller(badge)?;
        let (n, p) = self.node(ino)?;
        if matches!(
            n,
            Node::Global(Global::SelfLink) | Node::Pid(_, PidEntry::Exe)
        ) {
            return Err(FsError::Loop);
        }
        let (file, size) = self.open_node(badge, n, p.as_ref(), flags)?;
        // Inode 0: nothing to reopen by (procfs keeps no state a restart would lose).
        Ok(OpenOut {
            file,
            size,
            ino: 0,
            generation: 0,
        })
    }
    fn readlink(&mut self, badge: u64, ino: u32) -> Result<Bytes<256>, FsError> {
        self.caller(badge)?;
        let (n, _) = self.node(ino)?;
        match n {
            Node::Pid(pid, PidEntry::Exe) => {
                let path = self.pieces(|c, off| c.exe(pid, off))?;
                if path.is_empty() {
                    return Err(FsError::NotFound);
                }
                bytes(&path)
            }
            // Who reads is not known here (see `Global::SelfLink`).
            Node::Global(Global::SelfLink) => Err(FsError::NotFound),
            _ => Err(FsError::Invalid),
        }
    }
    fn readdir(&mut self, badge: u64, dir: u32, cookie: u64) -> Result<ReaddirOut, FsError> {
        self.caller(badge)?;
        let (d, _) = self.node(dir)?;
        if !d.is_dir() {
            return Err(FsError::NotDir);
        }
        let entry = |next: u64, n: Node, name: &[u8]| -> Result<ReaddirOut, FsError> {
            let kind = match n.mode() & sawmill_path::S_IFMT {
                sawmill_path::S_IFDIR => EntryKind::Dir,
                sawmill_path::S_IFLNK => EntryKind::Symlink,
                _ => EntryKind::Regular,
            };
            Ok(ReaddirOut {
                next,
                ino: n.ino(),
                kind,
                name: bytes(name)?,
            })
        };
        let parent = match d {
            Node::Pid(p, PidEntry::Fd) => Node::Pid(p, PidEntry::Dir),
            _ => Node::Root,
        };
        match (d, cookie) {
            (_, 0) => return entry(1, d, b"."),
            (_, 1) => return entry(2, parent, b".."),
            (Node::Root, c) if c < ROOT_FIXED => {
                let (name, g) = GLOBALS[(c - 2) as usize];
                return entry(c + 1, Node::Global(g), name.as_bytes());
            }
            (Node::Root, c) => {
                let after = c.saturating_sub(PID_COOKIE).min(u32::MAX as u64) as u32;
                if let Some(pid) = self.next_pid(after)? {
                    let mut name = [0u8; 10];
                    let mut k = name.len();
                    let mut v = pid;
                    loop {
                        k -= 1;
                        name[k] = b'0' + (v % 10) as u8;
                        v /= 10;
                        if v == 0 {
                            break;
                        }
                    }
                    return entry(
                        PID_COOKIE + pid as u64,
                        Node::Pid(pid, PidEntry::Dir),
                        &name[k..],
                    );
                }
            }
            (Node::Pid(pid, PidEntry::Dir), c) if c < 2 + PID_ENTRIES.len() as u64 => {
                let (name, e) = PID_ENTRIES[(c - 2) as usize];
                return entry(c + 1, Node::Pid(pid, e), name.as_bytes());
            }
            _ => {}
        }
        Ok(ReaddirOut {
            next: 0,
            ino: 0,
            kind: EntryKind::Unknown,
            name: Bytes::new(),
        })
    }
    fn sync(&mut self, badge: u64) -> Result<(), FsError> {
        self.caller(badge)
    }
    fn session(&mut self, badge: u64, _uid: u32, _gid: u32) -> Result<u64, FsError> {
        if badge != VFS_BADGE {
            return Err(FsError::Denied);
        }
        // Everything here is readable by everyone, so a session needs no credentials; its badge
        // only says whom its open files are charged to.
        let s = self.slot();
        let b = SESSION_BASE + self.next_session;
        if b >= FILE_BASE || sys::cap_mint(self.ep, s, b, rights::SEND).is_err() {
            self.free_slots.push(s);
            return Err(FsError::NoSpace);
        }
        self.next_session += 1;
        self.after.delete(s);
        Ok(s)
    }
    fn crash(&mut self, badge: u64) -> Result<(), FsError> {
        self.caller(badge)?;
        Err(FsError::Denied)
    }
    fn open_path(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
        _mode: u32,
    ) -> Result<OpenPathOut, FsError> {
        self.caller(badge)?;
        if flags.intersects(OpenFlags::CREATE | OpenFlags::EXCL) {
            return Err(FsError::Denied);
        }
        let (mut n, mut p) = (Node::Root, None);
        let names: Vec<&[u8]> = path.split(|&c| c == b'/').collect();
        for name in &names {
            if name.is_empty() || *name == b"." {
                continue;
            }
            if *name == b".." || name.len() > sawmill_path::NAME_MAX {
                // `..` and long names: the VFS's walker decides.
                return Err(FsError::Xdev);
            }
            if n.mode() & sawmill_path::S_IFMT == sawmill_path::S_IFLNK {
                return Err(FsError::Xdev);
            }
            (n, p) = self.child(n, name)?;
        }
        // A link (followed by open) is the VFS's to resolve.
        if n.mode() & sawmill_path::S_IFMT == sawmill_path::S_IFLNK {
            return Err(FsError::Xdev);
        }
        if path.ends_with(b"/") && !n.is_dir() {
            return Err(FsError::NotDir);
        }
        let (file, size) = self.open_node(badge, n, p.as_ref(), flags)?;
        Ok(OpenPathOut {
            file,
            size,
            ino: 0,
            generation: 0,
        })
    }
    fn cover(&mut self, badge: u64, _path: &[u8]) -> Result<(), FsError> {
        // Nothing is mounted inside /proc; accepted so a VFS that asks is not refused.
        self.caller(badge)
    }
    fn statfs(&mut self, badge: u64) -> Result<StatfsOut, FsError> {
        self.caller(badge)?;
        Ok(Self::statfs_out())
    }
    // Not served here (issue 17's calls, for ext2's metadata speed): Invalid makes a client list
    // with `readdir`, Xdev makes it stat through the VFS.
    fn readdir_many(
        &mut self,
        badge: u64,
        _dir: u32,
        _cookie: u64,
    ) -> Result<pfs::ReaddirManyOut, FsError> {
        self.caller(badge)?;
        Err(FsError::Invalid)
    }
    fn stat_path(
        &mut self,
        badge: u64,
        _path: &[u8],
        _follow: bool,
    ) -> Result<pfs::StatPathOut, FsError> {
        self.caller(badge)?;
        Err(FsError::Xdev)
    }
    // Issue 16's reopen after a restart: procfs hands out inode 0, so nobody asks.
    fn open_inode(
        &mut self,
        badge: u64,
        _ino: u32,
        _generation: u32,
        _flags: OpenFlags,
    ) -> Result<pfs::OpenInodeOut, FsError> {
        self.caller(badge)?;
        Err(FsError::Invalid)
    }
    read_only! {
        create(dir: u32, name: &[u8], mode: u32, uid: u32, gid: u32) -> u32;
        mkdir(dir: u32, name: &[u8], mode: u32, uid: u32, gid: u32) -> u32;
        symlink(dir: u32, name: &[u8], target: &[u8], uid: u32, gid: u32) -> u32;
        unlink(dir: u32, name: &[u8]) -> ();
        rmdir(dir: u32, name: &[u8]) -> ();
        rename(dirs: [u32; 2], sname: &[u8], dname: &[u8], flags: RenameFlags) -> ();
        setattr(ino: u32, mode: u32, uid: u32, gid: u32, atime: u32, mtime: u32, which: SetAttrFields) -> ();
        truncate(ino: u32, size: u64) -> ();
        link(ino: u32, dir: u32, name: &[u8]) -> ();
    }
}

impl file::Server for Procfs {
    fn read(&mut self, badge: u64, off: u64, len: u32) -> Result<Bytes<480>, FsError> {
        let f = self.file(badge)?;
        let start = (off.min(f.text.len() as u64)) as usize;
        let end = (start + (len as usize).min(480)).min(f.text.len());
        bytes(&f.text[start..end])
    }
    fn write(&mut self, badge: u64, _off: u64, _data: &[u8]) -> Result<u32, FsError> {
        self.file(badge)?;
        Err(FsError::BadFile)
    }
    fn stat(&mut self, badge: u64) -> Result<StatOut, FsError> {
        let (node, size) = {
            let f = self.file(badge)?;
            (f.node, f.text.len() as u64)
        };
        // The open file is the snapshot: its size is its text's (a path's `stat` says 0).
        let p = match node.pid() {
            Some(pid) => self.process(pid).ok(),
            None => None,
        };
        let a = self.attrs(node, p.as_ref(), size);
        Ok(StatOut {
            ino: node.ino(),
            mode: a.mode,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            blocks: 0,
            rdev_major: 0,
            rdev_minor: 0,
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            generation: 0,
        })
    }
    fn truncate(&mut self, badge: u64, _size: u64) -> Result<(), FsError> {
        self.file(badge)?;
        Err(FsError::BadFile)
    }
    fn fsync(&mut self, badge: u64) -> Result<(), FsError> {
        self.file(badge).map(|_| ())
    }
    fn map(&mut self, badge: u64, _page: u64, _count: u32, _dst: u64) -> Result<MapOut, FsError> {
        // No page to map: the text lives in our heap. Zero pages mapped tells the client to
        // read through `read` (the protocol's answer for pages that cannot be mapped).
        let size = self.file(badge)?.text.len() as u64;
        Ok(MapOut { mapped: 0, size })
    }
    fn close(&mut self, badge: u64) -> Result<(), FsError> {
        let i = badge.wrapping_sub(FILE_BASE) as usize;
        self.file(badge)?;
        // The snapshot goes now; the index stays taken until the capability goes.
        if let Some(f) = self.files[i].take() {
            if let Some(h) = self.held.get_mut(&f.by) {
                *h = h.saturating_sub(1);
            }
        }
        Ok(())
    }
    fn reopen(
        &mut self,
        badge: u64,
        _path: &[u8],
        _flags: OpenFlags,
        _mode: u32,
    ) -> Result<file::ReopenOut, FsError> {
        // Snapshots are made per open: a kept file is not reopened in place (BadFile tells the
        // client to let it go and open afresh).
        self.file(badge)?;
        Err(FsError::BadFile)
    }
    fn write_buffer(&mut self, badge: u64, _dst: u64) -> Result<rpc::Map, FsError> {
        self.file(badge)?;
        Err(FsError::BadFile)
    }
    fn write_from_buffer(&mut self, badge: u64, _off: u64, _len: u32) -> Result<u32, FsError> {
        self.file(badge)?;
        Err(FsError::BadFile)
    }
    // No read buffer: the library reads a generated file through `read` instead.
    fn read_buffer(&mut self, badge: u64, _dst: u64) -> Result<rpc::Map, FsError> {
        self.file(badge)?;
        Err(FsError::Invalid)
    }
    fn read_to_buffer(&mut self, badge: u64, _off: u64, _len: u32) -> Result<u32, FsError> {
        self.file(badge)?;
        Err(FsError::Invalid)
    }
    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &mut self,
        badge: u64,
        _mode: u32,
        _uid: u32,
        _gid: u32,
        _atime: u32,
        _mtime: u32,
        _which: SetAttrFields,
    ) -> Result<(), FsError> {
        self.file(badge)?;
        Err(FsError::NotPermitted)
    }
    fn statfs(&mut self, badge: u64) -> Result<file::StatfsOut, FsError> {
        self.file(badge)?;
        let s = Self::statfs_out();
        Ok(file::StatfsOut {
            bsize: s.bsize,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namelen: s.namelen,
        })
    }
}

impl rpc::Serve for Procfs {
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.badge >= FILE_BASE {
            file::handle(self, m, next)
        } else {
            pfs::handle(self, m, next)
        }
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn slot_freed(&mut self, slot: u64) {
        self.free_slots.push(slot);
    }
    const NOTICES: bool = true;
    fn notice_badge(&self) -> u64 {
        NOTICE_BADGE
    }
    /// A client dropped its last capability to an open file, or died: the snapshot goes and
    /// the index is free again.
    fn no_senders(&mut self, badge: u64) {
        if badge < FILE_BASE {
            return;
        }
        let i = (badge - FILE_BASE) as usize;
        if let Some(f) = self.files.get_mut(i).and_then(|f| f.take()) {
            if let Some(h) = self.held.get_mut(&f.by) {
                *h = h.saturating_sub(1);
            }
        }
        if let Some(t) = self.taken.get_mut(i) {
            *t = false;
        }
    }
}

fn main() {
    let cfg: Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("procfs: FAIL config: {}", e);
            return;
        }
    };
    let Some((manifest_ep, _)) = env::served() else {
        println!("procfs: FAIL the manifest gives us no endpoint to serve");
        return;
    };
    let Some(proc_ep) = env::cap("proc") else {
        println!("procfs: FAIL the manifest gives us no `proc`");
        return;
    };
    let mem_ep = env::cap("mem");
    // The endpoint we serve is root's, made for this incarnation: when we die root destroys it,
    // so every capability we handed out fails at once (issue 16; `pfs_manifest`).
    let Some(ep) = sawmill_interfaces::pfs_manifest::own_endpoint() else {
        println!("procfs: FAIL root gave us no endpoint to serve");
        return;
    };
    // The manifest endpoint is left to the watch thread: it hands the VFS a capability to `ep`
    // (`reconnect`, at boot and after a VFS restart) and takes the VFS's `watch`, never
    // answered, so the VFS learns of our death from the kernel.
    let watch = thread::spawn(254, 8192, move || {
        sawmill_interfaces::pfs_manifest::serve_manifest(manifest_ep, ep)
    });
    if watch.is_err() {
        println!("procfs: FAIL no watch thread (kmem_kb)");
        return;
    }
    let notice = thread::alloc_slot();
    if sys::cap_mint(ep, notice, NOTICE_BADGE, rights::SEND).is_err() {
        println!("procfs: FAIL no notice capability");
        return;
    }
    let wall = sawmill_rt::clock::Wall::get();
    let boot_epoch = sys::kernel_info(sawmill_abi::kinfo::BOOT_EPOCH).unwrap_or(0);
    let mut p = Procfs {
        cpu: read_cpu(wall.khz),
        cfg,
        ep,
        notice,
        proc_ep,
        mem_ep,
        files: Vec::new(),
        taken: Vec::new(),
        held: BTreeMap::new(),
        next_session: 0,
        boot_epoch,
        free_slots: Vec::new(),
        after: AfterReply::new(),
    };
    println!("procfs: ready, {} mounts listed", p.cfg.mounts.len());
    let _ = rpc::serve(ep, &mut p);
}
