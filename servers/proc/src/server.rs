//! The process server in the guest: its pool, starting processes, the server loop.

extern crate alloc;

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::{label, rights, MsgTag, ObjKind};
use sawmill_fsclient::{Files, O_NOMAP, O_READ};
use sawmill_interfaces::rpc::{self, AfterReply, IpcResult, Next, Reply};
use sawmill_interfaces::{netmgr, proc, proc_info, FsError, ProcError, ProcState, WaitKind};
use sawmill_linux::layout as linux;
use sawmill_proc::exec::{self, ExecError};
use sawmill_proc::info::{self, Facts, Known};
use sawmill_proc::signal;
use sawmill_proc::table::{Creds, Pid, State, Status, Table, TableError, WaitFor, INIT};
use sawmill_proc::tty::{self, Caller, Terminal, TtyError};
use sawmill_proc_api::{
    Config, ExecRequest, CONSOLE_BADGE, HANDOFF_CAP_PREFIX, HEAP_CAP, INFO_COMM, INFO_COMM_LEN,
    INFO_PPID, INFO_SLEEPING, MAX_EXEC_REQUEST, MAX_HANDOFF_CAPS, MAX_INLINE_STATE, WAKE_CAP,
    WAKE_CHILD, WAKE_CONT, WAKE_SIGNAL,
};
use sawmill_rt::{env, println, slots, sys};
use sawmill_spawn::{
    plan_program, prepare_planned, prepare_planned_into, share_image, Cap, Child, Layout, Map,
    MappedImage, MemPool, Plan, Program, Record, Resources, SharedImage, Sizes, SpawnError,
};

sawmill_rt::entry!(main);

/// Badge bit of the capabilities the kernel's messages about a process's threads arrive with
/// (the threads' pager and exception handler; the rest of the badge is the process's serial
/// number). Only proc and the kernel hold them, so no process can forge such a message; a
/// process's own `proc` capability carries just its pid.
const KERNEL_BIT: u64 = 1 << 62;
/// With [`KERNEL_BIT`]: the message is about a thread the library started itself, not the main
/// thread (its normal exit does not end the process).
const SECONDARY_BIT: u64 = 1 << 61;
/// Pages of mem a fork needs left (of our quota, and free) to go ahead: a small process's
/// library heap, stack and first copy-on-write copies (1 MiB).
const FORK_HEADROOM_PAGES: u64 = 256;
/// Kernel memory of the task holding the library's shared windows: its page tables and a
/// mapping node per page (the library's ~75 read-only pages).
const LIB_SHARED_KMEM: u64 = 64 * 1024;
/// Ended processes' tasks kept emptied (`Child::recycle`) for the next builds: a fork and exec
/// loop needs two (the exec's new image is built while the old one still runs). Each holds its
/// library's heap, stack, copied and environment pages (~28 of our pool's) and its factory.
const SPARE_TASKS: usize = 4;
/// Pages of our pool that must be left for new builds for an ended task to be kept.
const SPARE_POOL_RESERVE: u64 = 128;

fn fail(what: core::fmt::Arguments) -> ! {
    println!("proc: FAIL {}", what);
    sawmill_rt::exit(1)
}

/// What a new task of a process is built from (its first program, or an exec's).
#[derive(Clone, Copy)]
struct Launch<'a> {
    pid: Pid,
    /// The task's serial number (the badge of the kernel's messages about its threads).
    serial: u64,
    parent: Option<Pid>,
    creds: Creds,
    /// The program's absolute path and its last component (the task's name).
    path: &'a str,
    short: &'a str,
    argv: &'a [String],
    envs: &'a [String],
    cwd: &'a str,
    /// Capabilities the caller handed off for the new image (`proc.handoff`), given to it as
    /// `hand0`, `hand1`, ... (from `hand1` with a `state`).
    handoff: &'a [u64],
    /// The state the caller handed off in messages (`proc.handoff_state`; empty: none).
    state: &'a [u8],
    /// The process's wake notification and information page (proc's slot and address).
    wake: u64,
    info: u64,
    /// The library's heap (`HEAP_CAP`; 0: none, the library asks mem).
    heap: u64,
}

/// An exec request `exec_check` accepted: the program's path, the `argv` it runs with (None:
/// the request's own), the request.
type Checked = (String, Option<Vec<String>>, ExecRequest);

/// A program [`Server::resolve`] found: its absolute path and the `argv` it runs with (None: the
/// `argv` given, unchanged, as for every program but a script).
type Resolved = (String, Option<Vec<String>>);

/// A script's `#!` line: the interpreter and its optional argument.
type Script = (String, Option<String>);

/// What proc keeps for a running process.
struct Running {
    child: Option<Child>,
    /// proc's own slots minted for it (its `proc` capability, the kernel-message capabilities).
    caps: Vec<u64>,
    /// Its program's name, for messages.
    name: String,
    /// Its pending exec request (`proc.exec_data`).
    exec: Vec<u8>,
    /// What /proc shows of it (`proc_info`).
    facts: Facts,
    /// Capabilities handed off for its next fork or exec (proc's slots).
    handoff: Vec<u64>,
    /// State handed off in messages for its next fork or exec (`proc.handoff_state`).
    state: Vec<u8>,
    /// Its exec request after `exec_check`: the program's path and the `argv` it runs with.
    checked: Option<Checked>,
    /// Where its library takes its program's faults (`proc.sig_entry`; 0: they kill).
    fault_entry: u64,
    /// The ignored signals and the mask its next exec keeps (`proc.sig_exec`).
    exec_signals: (u64, u64),
    /// Its library's heap (`HEAP_CAP`, our slot; 0: none), freed when its task is gone.
    heap: u64,
}

impl Known for Running {
    fn facts(&self) -> &Facts {
        &self.facts
    }
}

/// The kernel's timer ticks since boot (100 a second).
fn ticks() -> u64 {
    sys::kernel_info(sawmill_abi::kinfo::TICKS).unwrap_or(0)
}

/// What proc keeps for a process for as long as it runs, across its execs: its wake
/// notification (proc's slot) and its information page (an address in proc's pool).
#[derive(Clone, Copy)]
struct Extra {
    wake: u64,
    info: u64,
}

/// The clock record every process starts with.
#[derive(Clone, Copy)]
struct Clock {
    unix: u64,
    tsc: u64,
    khz: u64,
}

struct Proc {
    cfg: Config,
    table: Table<Running>,
    pool: MemPool,
    files: Files,
    /// Our endpoint (unbadged): processes' capabilities are minted from it.
    ep: u64,
    /// The personality library's boot module: address and length.
    library: (u64, u64),
    /// How the library is laid out in a new task (made at the first start: the same for every
    /// process, as the image, layout, sizes and maps are).
    lib_plan: Option<Plan>,
    /// The library's read-only windows, held by a task of ours and lent to every process
    /// (made with the plan; None if that failed: each process then maps them itself).
    lib_shared: Option<SharedImage>,
    /// Tasks of ended processes, emptied, to build the next processes into (at most
    /// [`SPARE_TASKS`]).
    spare: Vec<Child>,
    /// The servers every process gets (name, our slot), looked up once.
    peers: Vec<(&'static str, u64)>,
    /// The names of handed-on capabilities (`hand0`, `hand1`, ...), each formatted once and
    /// kept for good ([`Proc::hand_name`]): formatted anew they were an allocation and a free
    /// per capability of every fork and exec.
    hand_names: Vec<&'static str>,
    /// The network stack capability for processes whose effective uid is not 0 (granted by
    /// netmgr without the privileged-ports right); None without netmgr (every process then
    /// gets the `socket` peer).
    socket_user: Option<u64>,
    /// The slot `net_stack` hands a stack capability over in (emptied after each reply).
    net_slot: u64,
    /// Each Linux process's own share of the stack's sockets (`socket.grant_sub`, the pid its
    /// sub-account): minted on its first `net_stack`, kept (with whether it may bind ports
    /// below 1024) until the process is released, emptied when the stack restarts.
    net_subs: BTreeMap<Pid, (bool, u64)>,
    clock: Clock,
    /// A counter mixed into each process's seed.
    seeds: u64,
    /// Set once init has ended: the loop stops.
    done: bool,
    /// The console's session and foreground group (`src/tty.rs`).
    terminal: Terminal,
    extras: BTreeMap<Pid, Extra>,
    /// The receive slot of `proc.handoff`'s capability (emptied after each handler).
    after: AfterReply,
}

/// The wall clock every process starts from: the kernel's figures (the RTC read at boot, the
/// time-stamp counter's rate).
fn read_clock() -> Clock {
    let w = sawmill_rt::clock::Wall::get();
    if w.epoch == 0 {
        println!("proc: the kernel has no valid date; the clock starts at 1970");
    }
    Clock {
        unix: w.epoch,
        tsc: w.tsc,
        khz: w.khz,
    }
}

/// A 64-bit mix (splitmix64's finaliser).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fs_error(e: FsError) -> ExecError {
    match e {
        FsError::NotFound | FsError::NotDir => ExecError::NotFound,
        FsError::Denied => ExecError::NoPermission,
        FsError::IsDir => ExecError::NotRegular,
        e => ExecError::Io(format!("{:?}", e)),
    }
}

/// Why a process could not be started.
enum StartError {
    Exec(String, ExecError),
    Spawn(SpawnError),
    Table,
    /// A limit on processes or memory is reached (`fork`: EAGAIN).
    Again,
}

impl StartError {
    fn shell_status(&self) -> u8 {
        match self {
            StartError::Exec(_, e) => e.shell_status(),
            _ => 126,
        }
    }
}

impl core::fmt::Display for StartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StartError::Exec(path, e) => write!(f, "{}: {}", path, e.describe()),
            StartError::Spawn(SpawnError::EnvFull) => {
                write!(
                    f,
                    "Argument list too long (arguments and environment exceed a page)"
                )
            }
            StartError::Spawn(e) => write!(f, "cannot build the process: {}", e),
            StartError::Table => write!(f, "too many processes"),
            StartError::Again => write!(f, "a process or memory limit is reached"),
        }
    }
}

impl Proc {
    /// Finds program `name` (a path, or looked up in `PATH`) and checks it can run: its absolute
    /// path, and for a script its `#!` line (interpreter, optional argument).
    fn find_program(
        &mut self,
        name: &str,
        env: &[String],
        cwd: &str,
    ) -> Result<(String, Option<Script>), StartError> {
        let mut last = ExecError::NotFound;
        for path in exec::candidates(name, cwd, exec::search_path(env)) {
            match self.files.stat(&path) {
                Ok(st) => {
                    return match self.check_file(&path, st.mode) {
                        Ok(script) => Ok((path, script)),
                        Err(e) => Err(StartError::Exec(path, e)),
                    }
                }
                Err(e) => last = fs_error(e),
            }
            if last != ExecError::NotFound {
                return Err(StartError::Exec(path, last));
            }
        }
        Err(StartError::Exec(String::from(name), last))
    }

    /// The program `argv` names, as `execve` runs it: a static ELF executable, or a script
    /// whose `#!` line names the interpreter (itself possibly a script, a few levels deep). Its
    /// absolute path and the `argv` it runs with.
    fn resolve(
        &mut self,
        name: &str,
        argv: &[String],
        env: &[String],
        cwd: &str,
    ) -> Result<Resolved, StartError> {
        let (mut path, mut script) = self.find_program(name, env, cwd)?;
        let mut new_argv: Option<Vec<String>> = None;
        // The script's name as the caller gave it (Linux's `bprm->filename`).
        let mut given = if name.contains('/') {
            String::from(name)
        } else {
            path.clone()
        };
        for _ in 0..exec::SHEBANG_DEPTH {
            let Some((interp, arg)) = script else {
                return Ok((path, new_argv));
            };
            let now = new_argv.as_deref().unwrap_or(argv);
            new_argv = Some(exec::script_argv(&interp, arg.as_deref(), &given, now));
            let (p, s) = self.find_program(&exec::absolute(cwd, &interp), env, cwd)?;
            given = interp;
            path = p;
            script = s;
        }
        Err(StartError::Exec(path, ExecError::NotElf))
    }

    fn check_file(&mut self, path: &str, mode: u32) -> Result<Option<Script>, ExecError> {
        exec::check_mode(mode)?;
        let fd = self
            .files
            .open(path, O_READ | O_NOMAP, 0)
            .map_err(fs_error)?;
        // The first bytes usually decide (a read costs ~10 instructions a byte), or they and
        // the rest of the program headers they announce: the whole head is read only for a
        // verdict other than "runs", so every refusal is the same as from it.
        let mut head = alloc::vec![0u8; exec::HEAD_FIRST];
        let mut r = self.files.pread(fd, &mut head, 0);
        if let Ok(n) = r {
            if n == head.len() && exec::check_head(&head).is_err() {
                let rest = exec::headers_end(&head).filter(|&end| end > n);
                let runs = rest.is_some_and(|end| {
                    head.resize(end, 0);
                    let more = self.files.pread(fd, &mut head[n..], n as u64);
                    more == Ok(end - n) && exec::check_head(&head).is_ok()
                });
                if runs {
                    r = Ok(head.len());
                } else {
                    head.resize(exec::HEAD_BYTES, 0);
                    r = self.files.pread(fd, &mut head, 0);
                }
            }
        }
        let _ = self.files.close(fd);
        let n = r.map_err(fs_error)?;
        exec::check_head(&head[..n])
    }

    /// Starts a process running `argv` (its program found as a shell would) as a child of
    /// `parent`: its pid.
    fn start(
        &mut self,
        parent: Option<Pid>,
        creds: Creds,
        argv: &[String],
        envs: &[String],
        cwd: &str,
    ) -> Result<Pid, StartError> {
        let name = argv.first().map(|s| s.as_str()).unwrap_or("");
        let (path, new_argv) = self.resolve(name, argv, envs, cwd)?;
        let argv = new_argv.as_deref().unwrap_or(argv);
        let short = String::from(path.rsplit('/').next().unwrap_or("?"));
        let running = Running {
            child: None,
            caps: Vec::new(),
            name: short.clone(),
            exec: Vec::new(),
            facts: Facts::new(argv, &path, ticks()),
            handoff: Vec::new(),
            state: Vec::new(),
            checked: None,
            fault_entry: 0,
            exec_signals: (0, 0),
            heap: 0,
        };
        let (pid, serial) = self
            .table
            .create(parent, creds, running)
            .map_err(|_| StartError::Table)?;
        let extra = match self.new_extra(parent.unwrap_or(0)) {
            Ok(x) => x,
            Err(e) => {
                self.forget(pid);
                return Err(StartError::Spawn(e));
            }
        };
        self.extras.insert(pid, extra);
        let launch = Launch {
            handoff: &[],
            state: &[],
            wake: extra.wake,
            info: extra.info,
            heap: 0,
            pid,
            serial,
            parent,
            creds,
            path: &path,
            short: &short,
            argv,
            envs,
            cwd,
        };
        match self.build(launch) {
            Ok(()) => Ok(pid),
            Err(e) => {
                self.forget(pid);
                Err(StartError::Spawn(e))
            }
        }
    }

    /// Takes a process of which nothing runs out of the table again, with all made for it.
    fn forget(&mut self, pid: Pid) {
        if let Ok(r) = self.table.end(pid, Status::Signaled(signal::SIGKILL)) {
            self.release(r);
        }
        let _ = self.table.reap(pid);
        self.release_extra(pid);
    }

    /// A new wake notification and information page (the parent's pid in it).
    fn new_extra(&mut self, ppid: Pid) -> Result<Extra, SpawnError> {
        let info = self.pool.page()?;
        let wake = match self.pool.slot() {
            Ok(s) => s,
            Err(e) => {
                self.pool.free_page(info);
                return Err(e);
            }
        };
        if let Err(e) = sys::factory_create(slots::FACTORY, ObjKind::Notification, wake, 0) {
            self.pool.free_slot(wake);
            self.pool.free_page(info);
            return Err(SpawnError::Sys("creating a notification", e));
        }
        set_info_ppid(info, ppid);
        Ok(Extra { wake, info })
    }

    fn release_extra(&mut self, pid: Pid) {
        if let Some((_, c)) = self.net_subs.remove(&pid) {
            self.drop_cap(c);
        }
        if let Some(x) = self.extras.remove(&pid) {
            // Revoked first: the copies the process registered (at the pipe server, the
            // console) die with it.
            let _ = sys::cap_revoke(x.wake);
            self.drop_cap(x.wake);
            self.pool.free_page(x.info);
        }
    }

    /// Wakes process `pid`'s library with `bits` (it finds out what changed by asking).
    fn wake(&self, pid: Pid, bits: u64) {
        if let Some(x) = self.extras.get(&pid) {
            let _ = sys::notify_signal(x.wake, bits);
        }
    }

    /// The environment name of handed-on capability `i` (`hand<i>`). At most
    /// `MAX_HANDOFF_CAPS + 1` are ever made (a handoff is refused past it), so what is kept is
    /// bounded.
    fn hand_name(&mut self, i: usize) -> &'static str {
        while self.hand_names.len() <= i {
            let name = format!("{}{}", HANDOFF_CAP_PREFIX, self.hand_names.len());
            self.hand_names
                .push(alloc::boxed::Box::leak(name.into_boxed_str()));
        }
        self.hand_names[i]
    }

    /// A capability to our endpoint with `badge`; `grant`: its holder may send capabilities
    /// (a process's own `proc` capability, for `proc.handoff`).
    fn mint(&mut self, badge: u64, grant: bool, caps: &mut Vec<u64>) -> Result<u64, SpawnError> {
        let s = self.pool.slot()?;
        caps.push(s);
        let r = if grant {
            rights::SEND | rights::GRANT
        } else {
            rights::SEND
        };
        sys::cap_mint(self.ep, s, badge, r)
            .map_err(|e| SpawnError::Sys("minting a capability", e))?;
        Ok(s)
    }

    fn build(&mut self, mut l: Launch) -> Result<(), SpawnError> {
        let pid = l.pid;
        let mut caps = Vec::new();
        l.heap = self.lib_heap();
        let r = self.build_with(l, &mut caps);
        match r {
            Ok(child) => {
                let run = self.table.get_mut(pid).and_then(|p| p.task.as_mut());
                if let Some(run) = run {
                    run.child = Some(child);
                    run.caps = caps;
                    run.heap = l.heap;
                } else {
                    self.free_heap(l.heap);
                }
                Ok(())
            }
            Err(e) => {
                self.drop_caps(caps);
                self.free_heap(l.heap);
                Err(e)
            }
        }
    }

    /// Builds and starts the task ([`Self::build_retrying`]); says if handed-on capabilities
    /// were left out, revoked since the handoff.
    fn build_with(&mut self, l: Launch, caps: &mut Vec<u64>) -> Result<Child, SpawnError> {
        let r = self.build_retrying(l, caps);
        if let Ok(child) = &r {
            if child.caps_gone > 0 {
                println!(
                    "proc: pid {}: {} handed-on capabilities were revoked (their server died): left out",
                    l.pid, child.caps_gone
                );
            }
        }
        r
    }

    /// Builds and starts the task; returns it and our copy of its wake notification.
    /// [`Self::build_once`], made once more if it failed while our `vfs` slot was empty (issue
    /// 16: the VFS died and restarts; root refills the slot after its backoff and the new
    /// incarnation's start) and the slot is refilled within [`VFS_WAIT_MS`]. Nothing on the
    /// usual path: the slot is looked at only after a failure.
    fn build_retrying(&mut self, l: Launch, caps: &mut Vec<u64>) -> Result<Child, SpawnError> {
        match self.build_once(l, caps) {
            Err(_) if self.wait_for_vfs() => {
                self.drop_caps(core::mem::take(caps));
                self.build_once(l, caps)
            }
            r => r,
        }
    }

    /// Whether our `vfs` slot was empty and is filled again within [`VFS_WAIT_MS`] (sleeping
    /// meanwhile: the restarting VFS may run below us).
    fn wait_for_vfs(&mut self) -> bool {
        let vfs = self.files.vfs_slot();
        let Ok(probe) = self.pool.slot() else {
            return false;
        };
        let live = |probe: u64| {
            let ok = sys::cap_copy(vfs, probe).is_ok();
            let _ = sys::cap_delete(probe);
            ok
        };
        if live(probe) {
            self.pool.free_slot(probe);
            return false;
        }
        let khz = sawmill_rt::clock::Wall::get().khz.max(1);
        let deadline = sys::rdtsc() + VFS_WAIT_MS * khz;
        let timer = vfs_wait_timer();
        let mut back = false;
        while sys::rdtsc() < deadline {
            let _ = sys::notify_wait_until(timer, (sys::rdtsc() + 5 * khz).min(deadline));
            if live(probe) {
                back = true;
                break;
            }
        }
        self.pool.free_slot(probe);
        back
    }

    fn build_once(&mut self, l: Launch, caps: &mut Vec<u64>) -> Result<Child, SpawnError> {
        let Launch {
            pid,
            serial,
            parent,
            creds,
            path,
            short,
            argv,
            envs,
            cwd,
            handoff,
            state,
            wake,
            info,
            heap,
        } = l;
        let proc_cap = self.mint(pid as u64, true, caps)?;
        let main_cap = self.mint(KERNEL_BIT | serial, false, caps)?;
        let helper_cap = self.mint(KERNEL_BIT | SECONDARY_BIT | serial, false, caps)?;
        let kmem = self.cfg.process_kmem_kb as u64 * 1024;
        let mut p = Program::new(short, slots::FACTORY, kmem, self.cfg.priority);
        // Room for every capability and record below at once: grown from empty, each vector
        // was reallocated and copied four or five times a build.
        p.caps.reserve(6 + self.peers.len() + handoff.len());
        p.records.reserve(9 + envs.len());
        p.give_factory = true;
        p.layout = Layout {
            env: linux::LIB_ENV,
            heap: linux::LIB_HEAP,
            stack_top: linux::LIB_STACK_TOP,
            utcb: linux::LIB_UTCB,
            huge: linux::LIB_HUGE,
            user_end: sawmill_abi::layout::USER_END,
        };
        p.sizes = Sizes {
            heap_bytes: self.cfg.lib_heap_kb as u64 * 1024,
            stack_bytes: linux::LIB_STACK_BYTES,
            huge_pages: 0,
        };
        p.args = argv.iter().map(|a| Cow::Borrowed(a.as_str())).collect();
        // Faults and exceptions of the main thread (until the library's region manager pages
        // it) and of the library's own threads come to us.
        p.pager = main_cap;
        p.exception_handler = main_cap;
        p.caps.push(Cap::at("sys:pager", main_cap, slots::PAGER));
        p.caps.push(Cap::at(
            "sys:thread-handler",
            helper_cap,
            slots::THREAD_HANDLER,
        ));
        p.caps
            .push(Cap::at("sys:console", slots::CONSOLE, slots::CONSOLE));
        p.caps.push(Cap::named(proc::NAME, proc_cap));
        for &(name, c) in &self.peers {
            // The stack capability follows the credentials: only root may bind ports below
            // 1024 (netmgr granted proc both kinds; `stack_caps`).
            // The stack capability is not handed on: a process asks `net_stack` for one of its
            // own share on its first socket (so a spawn makes no call to the stack).
            if name == SOCKET_PEER {
                continue;
            }
            p.caps.push(Cap::named(name, c));
        }
        p.caps.push(Cap::named(WAKE_CAP, wake));
        if heap != 0 {
            p.caps.push(Cap::named(HEAP_CAP, heap));
        }
        // With the state in the environment, index 0 (its dataspace) is none.
        let first_cap = usize::from(!state.is_empty());
        // A handed-on capability of a server that died since (a PFS, a network stack) was
        // emptied by root's revocation: left out, and the new image finds that descriptor dead
        // (it reopens a file it knows, a socket reads as reset), rather than the exec failing.
        for (i, &c) in handoff.iter().enumerate() {
            p.caps.push(Cap {
                optional: true,
                ..Cap::named(self.hand_name(i + first_cap), c)
            });
        }
        p.maps.push(Map {
            what: "the process information page",
            src: info,
            dst: linux::LIB_INFO,
            pages: 1,
            // Writable: the library says there when it sleeps (INFO_SLEEPING).
            flags: sawmill_abi::map::READ | sawmill_abi::map::WRITE,
        });
        // The records' bytes are lent (the launch's strings and state) or moved in, not copied.
        fn rec<'a>(kind: u64, value: u64, bytes: impl Into<Cow<'a, [u8]>>) -> Record<'a> {
            Record {
                kind,
                value,
                bytes: bytes.into(),
                optional: false,
            }
        }
        for e in envs {
            p.records.push(rec(env::KIND_LINUX_ENV, 0, e.as_bytes()));
        }
        p.records
            .push(rec(env::KIND_LINUX_EXEC, 0, path.as_bytes()));
        let mut ids = Vec::with_capacity(20);
        for v in [
            parent.unwrap_or(0),
            creds.uid,
            creds.euid,
            creds.gid,
            creds.egid,
        ] {
            ids.extend_from_slice(&v.to_le_bytes());
        }
        p.records.push(rec(env::KIND_LINUX_IDS, pid as u64, ids));
        let mut clk = Vec::with_capacity(16);
        clk.extend_from_slice(&self.clock.tsc.to_le_bytes());
        clk.extend_from_slice(&self.clock.khz.to_le_bytes());
        p.records
            .push(rec(env::KIND_LINUX_CLOCK, self.clock.unix, clk));
        let mut seed = Vec::with_capacity(32);
        for i in 0..4u64 {
            self.seeds = self.seeds.wrapping_add(1);
            let v = mix(sys::rdtsc() ^ mix(self.seeds ^ (pid as u64) << 32 ^ i));
            seed.extend_from_slice(&v.to_le_bytes());
        }
        p.records.push(rec(env::KIND_LINUX_SEED, 0, seed));
        p.records
            .push(rec(env::KIND_LINUX_TRACE, self.cfg.trace as u64, &[][..]));
        p.records.push(rec(env::KIND_LINUX_CWD, 0, cwd.as_bytes()));
        if !handoff.is_empty() || !state.is_empty() {
            p.records.push(rec(
                env::KIND_LINUX_HANDOFF,
                (handoff.len() + first_cap) as u64,
                &[][..],
            ));
        }
        if !state.is_empty() {
            p.records.push(rec(env::KIND_LINUX_STATE, 0, state));
        }
        // Across an exec: the signals the old program ignored and its mask.
        let (ignored, blocked) = self
            .table
            .get(pid)
            .and_then(|p| p.task.as_ref())
            .map_or((0, 0), |r| r.exec_signals);
        if ignored | blocked != 0 {
            p.records.push(rec(
                env::KIND_LINUX_SIGNALS,
                blocked,
                ignored.to_le_bytes().to_vec(),
            ));
        }

        // SAFETY: root maps the module read-only and executable for as long as we run.
        let image = unsafe { MappedImage::resident(self.library.0, self.library.1) };
        // Every process starts the same library the same way: planned once.
        let plan = match self.lib_plan.take() {
            Some(pl) => pl,
            None => {
                let pl = plan_program(&p, &image)?;
                self.lib_shared = share_image(&p, &pl, &image, LIB_SHARED_KMEM, &mut self.pool)
                    .unwrap_or_else(|e| {
                        println!("proc: the library's image is not shared: {:?}", e);
                        None
                    });
                pl
            }
        };
        p.shared = self.lib_shared.clone();
        // Into an ended process's emptied task if one is kept (the same plan built it).
        let child = match self.spare.pop() {
            Some(spare) => prepare_planned_into(&p, &plan, &image, &mut self.pool, spare),
            None => prepare_planned(&p, &plan, &image, &mut self.pool),
        };
        self.lib_plan = Some(plan);
        let child = child?;
        if let Err(e) = child.start() {
            child.destroy(&mut self.pool);
            return Err(e);
        }
        Ok(child)
    }

    /// Process `pid` runs a new program: a new task for the same pid is built and started,
    /// then the old one ends. On an error the old one runs on, unchanged.
    /// `resolved`: the program's path and arguments `exec_check` found (else resolved here).
    fn exec_request(
        &mut self,
        pid: Pid,
        req: ExecRequest,
        resolved: Option<Resolved>,
    ) -> Result<(), StartError> {
        // What the caller handed off is used up by this exec, whatever becomes of it.
        let handoff = self.take_handoff(pid);
        let state = self.take_state(pid);
        let r = self.exec_with(pid, req, resolved, &handoff, &state);
        self.drop_caps(handoff);
        r
    }

    fn exec_with(
        &mut self,
        pid: Pid,
        req: ExecRequest,
        resolved: Option<Resolved>,
        handoff: &[u64],
        state: &[u8],
    ) -> Result<(), StartError> {
        let (path, new_argv) = match resolved {
            Some(r) => r,
            None => self.resolve(&req.program, &req.argv, &req.env, &req.cwd)?,
        };
        let argv = new_argv.as_deref().unwrap_or(&req.argv);
        let short = String::from(path.rsplit('/').next().unwrap_or("?"));
        let (ppid, creds) = match self.table.get(pid) {
            Some(p) => (p.ppid, p.creds),
            None => return Err(StartError::Table),
        };
        let serial = self.table.begin_exec(pid).map_err(|_| StartError::Table)?;
        let parent = (ppid != 0).then_some(ppid);
        let mut caps = Vec::new();
        let extra = self.extras.get(&pid).copied().ok_or(StartError::Table)?;
        let heap = self.lib_heap();
        let built = self.build_with(
            Launch {
                handoff,
                state,
                wake: extra.wake,
                info: extra.info,
                heap,
                pid,
                serial,
                parent,
                creds,
                path: &path,
                short: &short,
                argv,
                envs: &req.env,
                cwd: &req.cwd,
            },
            &mut caps,
        );
        match built {
            Ok(child) => {
                let new = Running {
                    child: Some(child),
                    caps,
                    name: short.clone(),
                    exec: Vec::new(),
                    facts: Facts::new(&req.argv, &path, ticks()),
                    handoff: Vec::new(),
                    state: Vec::new(),
                    checked: None,
                    fault_entry: 0,
                    exec_signals: (0, 0),
                    heap,
                };
                match self.table.finish_exec(pid, serial, new) {
                    Ok(old) => {
                        println!("proc: pid {} runs {}", pid, path);
                        self.release(old);
                        // A vfork parent may go on.
                        self.wake(ppid, WAKE_CHILD);
                        Ok(())
                    }
                    Err(_) => Err(StartError::Table),
                }
            }
            Err(e) => {
                self.drop_caps(caps);
                self.free_heap(heap);
                self.table.abort_exec(serial);
                Err(StartError::Spawn(e))
            }
        }
    }

    /// The capabilities `pid` handed off, taken.
    fn take_handoff(&mut self, pid: Pid) -> Vec<u64> {
        self.table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .map(|r| core::mem::take(&mut r.handoff))
            .unwrap_or_default()
    }

    /// The state `pid` handed off in messages, taken.
    fn take_state(&mut self, pid: Pid) -> Vec<u8> {
        self.table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .map(|r| core::mem::take(&mut r.state))
            .unwrap_or_default()
    }

    /// Deletes proc's copies of handed-off capabilities (in one call) and gives their slots back.
    fn drop_caps(&mut self, caps: Vec<u64>) {
        if caps.is_empty() {
            return;
        }
        let _ = sys::cap_delete_many(&caps, false);
        for c in caps {
            self.pool.free_slot(c);
        }
    }

    /// Deletes capability `c` of ours and gives its slot back to the pool.
    fn drop_cap(&mut self, c: u64) {
        let _ = sys::cap_delete(c);
        self.pool.free_slot(c);
    }

    /// Whether mem has room for one more process under our badge (which carries every
    /// process's memory): a new process's library takes its heap and its first copies from mem
    /// on demand, so a fork is refused (EAGAIN) while the room is still there rather than its
    /// child failing on a fault later. Unknown (no answer) counts as room.
    fn memory_for_one_more(&self) -> bool {
        let Some(s) = sawmill_rm::mem().and_then(|m| m.stats().ok()) else {
            return true;
        };
        s.quota.saturating_sub(s.used) >= FORK_HEADROOM_PAGES && s.free >= FORK_HEADROOM_PAGES
    }

    /// A child of `parent` built from the state it handed off (`proc.fork`).
    fn fork_child(
        &mut self,
        parent: Pid,
        handoff: &[u64],
        state: &[u8],
    ) -> Result<Pid, StartError> {
        if !self.memory_for_one_more() {
            return Err(StartError::Again);
        }
        let (creds, facts, short) = match self.table.get(parent) {
            Some(p) => {
                let r = p.task.as_ref().ok_or(StartError::Table)?;
                (p.creds, r.facts.clone(), r.name.clone())
            }
            None => return Err(StartError::Table),
        };
        let path = facts.exe.clone();
        let running = Running {
            child: None,
            caps: Vec::new(),
            name: short.clone(),
            exec: Vec::new(),
            // The parent's program and arguments, started now.
            facts: Facts {
                started: ticks(),
                ..facts
            },
            handoff: Vec::new(),
            state: Vec::new(),
            checked: None,
            fault_entry: 0,
            exec_signals: (0, 0),
            heap: 0,
        };
        let (pid, serial) =
            self.table
                .create(Some(parent), creds, running)
                .map_err(|e| match e {
                    TableError::Full => StartError::Again,
                    _ => StartError::Table,
                })?;
        let extra = match self.new_extra(parent) {
            Ok(x) => x,
            Err(_) => {
                self.forget(pid);
                return Err(StartError::Again);
            }
        };
        self.extras.insert(pid, extra);
        let launch = Launch {
            pid,
            serial,
            parent: Some(parent),
            creds,
            path: &path,
            short: &short,
            argv: &[],
            envs: &[],
            cwd: "/",
            handoff,
            state,
            wake: extra.wake,
            info: extra.info,
            heap: 0,
        };
        match self.build(launch) {
            Ok(()) => Ok(pid),
            Err(_) => {
                // The program learns EAGAIN; a fork bomb would fill the console otherwise.
                self.forget(pid);
                Err(StartError::Again)
            }
        }
    }

    /// Ends a process's task and gives back everything made for it.
    fn release(&mut self, r: Running) {
        if let Some(c) = r.child {
            // Emptied and kept for the next process while there is room and memory, else gone.
            if self.spare.len() < SPARE_TASKS && self.pool.available() >= SPARE_POOL_RESERVE {
                if let Some(c) = c.recycle(&mut self.pool) {
                    self.spare.push(c);
                }
            } else {
                c.destroy(&mut self.pool);
            }
        }
        // Ours (minted) revoked first: copies handed on (a wake notification registered at
        // the pipe server) end with the process. Then proc's copies of what was handed on.
        let _ = sys::cap_delete_many(&r.caps, true);
        for &c in &r.caps {
            self.pool.free_slot(c);
        }
        self.drop_caps(r.handoff);
        // The task is gone, so nothing runs on it any more.
        self.free_heap(r.heap);
    }

    /// A fresh demand-zero dataspace for a new image's library heap (`HEAP_CAP`): as large as
    /// the library would ask for, halved while mem refuses. Ours to free ([`Self::free_heap`]):
    /// the library cannot free the heap it runs on, and a dataspace handed to us by a process
    /// would be a capability we call on its word (a hostile one could make us wait forever).
    /// 0 if mem has none (the library then asks mem itself).
    fn lib_heap(&mut self) -> u64 {
        let Some(m) = sawmill_rm::mem() else {
            return 0;
        };
        let mut size = linux::LIB_HEAP_DEMAND;
        loop {
            let Ok(slot) = self.pool.slot() else {
                return 0;
            };
            match m.alloc(size, 0, slot) {
                Ok(ds) => return ds,
                Err(_) => self.pool.free_slot(slot),
            }
            if size <= linux::LIB_HEAP_DEMAND_MIN {
                return 0;
            }
            size /= 2;
        }
    }

    /// Frees a library heap [`Self::lib_heap`] made (0: none).
    fn free_heap(&mut self, heap: u64) {
        if heap != 0 {
            let _ = sawmill_interfaces::dataspace::Client::new(heap).free();
            self.drop_cap(heap);
        }
    }

    /// Process `pid` ended with `status`: its task goes, it stays a zombie for its parent (or,
    /// without one, leaves the table). When init ends, everything ends.
    fn end(&mut self, pid: Pid, status: Status) {
        let orphans = self
            .table
            .get(pid)
            .map(|p| p.children.clone())
            .unwrap_or_default();
        // The groups this end orphans with a stopped member (before the table forgets who
        // was whose link).
        let orphaned = tty::newly_orphaned(&self.table, pid);
        // A zombie keeps its name for /proc.
        let comm = self.comm_of(pid);
        if let Some(p) = self.table.get_mut(pid) {
            p.comm = comm;
        }
        let Ok(r) = self.table.end(pid, status) else {
            return;
        };
        self.release(r);
        // The controlling process is gone: its terminal is free, its foreground group hung up.
        if let Some(fg) = self.terminal.leader_ended(pid) {
            if pid != INIT {
                self.signal_group(fg, signal::SIGHUP);
                self.signal_group(fg, signal::SIGCONT);
            }
        }
        // No one is left to continue their stopped jobs: hung up, then continued (POSIX).
        for g in orphaned {
            self.signal_group(g, signal::SIGHUP);
            self.signal_group(g, signal::SIGCONT);
        }
        self.release_extra(pid);
        for c in orphans {
            let heir = self.table.get(c).map_or(0, |p| p.ppid);
            if let Some(x) = self.extras.get(&c) {
                set_info_ppid(x.info, heir);
            }
        }
        // The parent learns by SIGCHLD (its default action ignores it).
        if let Some((ppid, uid)) = self.table.get(pid).map(|p| (p.ppid, p.creds.uid)) {
            if ppid != 0 {
                let (code, st) = match status {
                    Status::Exited(c) => (1, c as i32),
                    Status::Signaled(s) if s & signal::CORE != 0 => (3, (s & 0x7f) as i32),
                    Status::Signaled(s) => (2, s as i32),
                };
                self.post(
                    ppid,
                    signal::Record {
                        sig: signal::SIGCHLD,
                        code,
                        pid,
                        uid,
                        status: st,
                    },
                );
            }
        }
        let ppid = self.table.get(pid).map_or(0, |p| p.ppid);
        if ppid == 0 {
            let _ = self.table.reap(pid);
        } else {
            self.wake(ppid, WAKE_CHILD);
        }
        if pid == INIT {
            // As Linux's reboot does: what the processes wrote reaches the disks before the
            // machine stops.
            if let Err(e) = self.files.sync() {
                println!("proc: sync before shutdown failed: {:?}", e);
            }
            report_init(status);
            self.done = true;
        }
    }

    /// The name /proc shows for running process `pid`: what its library wrote in its
    /// information page (`prctl(PR_SET_NAME)`), else its program file's.
    fn comm_of(&self, pid: Pid) -> String {
        if let Some(x) = self.extras.get(&pid) {
            let mut b = [0u8; INFO_COMM_LEN];
            for (i, c) in b.iter_mut().enumerate() {
                // SAFETY: `x.info` is a page of our pool, mapped here while the process has
                // its extras; any bytes the process wrote are only read.
                *c = unsafe {
                    core::ptr::read_volatile((x.info as usize + INFO_COMM + i) as *const u8)
                };
            }
            let n = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(15);
            if n > 0 {
                return String::from_utf8_lossy(&b[..n]).into_owned();
            }
        }
        self.table
            .get(pid)
            .and_then(|p| p.task.as_ref())
            .map(|t| String::from(t.facts.name()))
            .unwrap_or_default()
    }

    /// Makes signal `r` pending for running process `pid` and wakes its library.
    fn post(&mut self, pid: Pid, r: signal::Record) {
        let Some(p) = self.table.get_mut(pid) else {
            return;
        };
        if p.state != State::Running {
            return;
        }
        let continued = tty::on_send(&mut self.table, pid, r.sig);
        if let Some(p) = self.table.get_mut(pid) {
            p.signals.push(r);
        }
        if continued {
            self.wake(pid, WAKE_CONT | WAKE_SIGNAL);
            self.tell_parent(pid, tty::Change::Continued);
        } else {
            self.wake(pid, WAKE_SIGNAL);
        }
    }

    /// The parent of `pid` learns of its stop or continue: SIGCHLD (its library drops it under
    /// SA_NOCLDSTOP) and a wake for a `wait`.
    fn tell_parent(&mut self, pid: Pid, change: tty::Change) {
        let Some((ppid, uid)) = self.table.get(pid).map(|p| (p.ppid, p.creds.uid)) else {
            return;
        };
        if ppid == 0 {
            return;
        }
        let (code, status) = change.sigchld();
        self.post(
            ppid,
            signal::Record {
                sig: signal::SIGCHLD,
                code,
                pid,
                uid,
                status,
            },
        );
        self.wake(ppid, WAKE_CHILD);
    }

    /// Sends `sig` from the kernel (sender pid 0, SI_KERNEL) to every running member of
    /// process group `pgrp`.
    fn signal_group(&mut self, pgrp: Pid, sig: u32) {
        if pgrp == 0 {
            return;
        }
        for p in self.table.running_pids() {
            if self.group_of(p) != pgrp {
                continue;
            }
            if sig == signal::SIGKILL {
                self.end(p, Status::Signaled(sig));
                continue;
            }
            self.post(
                p,
                signal::Record {
                    sig,
                    code: 0x80,
                    pid: 0,
                    uid: 0,
                    status: 0,
                },
            );
        }
    }

    /// The caller's facts for a terminal call.
    fn tty_caller(&self, badge: u64) -> Result<Caller, ProcError> {
        let pid = self.caller(badge)?;
        Caller::of(&self.table, pid).ok_or(ProcError::NoProcess)
    }

    /// The process group of `pid` (0 if it is not in the table).
    fn group_of(&self, pid: Pid) -> Pid {
        self.table.get(pid).map_or(0, |p| p.pgid)
    }

    fn name_of(&self, pid: Pid) -> &str {
        self.table
            .get(pid)
            .and_then(|p| p.task.as_ref())
            .map_or("?", |r| r.name.as_str())
    }

    /// A kernel message about a thread of the process with serial number `serial`; the reply
    /// if the thread is to go on (an exception diverted to its library's fault entry).
    fn kernel_message(&mut self, serial: u64, secondary: bool, m: &IpcResult) -> Option<Reply> {
        let Some(pid) = self.table.by_serial(serial) else {
            return None; // About a process already gone (its other threads' exits).
        };
        if self.table.get(pid).map(|p| p.state) != Some(State::Running) {
            return None;
        }
        let status = match m.tag.label() {
            label::EXCEPTION => {
                let s = signal::for_exception(m.w[0]);
                let entry = self
                    .table
                    .get(pid)
                    .and_then(|p| p.task.as_ref())
                    .map_or(0, |r| r.fault_entry);
                // Any thread's: a Linux program's threads (secondary, like the library's own
                // threads, whose faults the library's entry ends the process for).
                if entry != 0 && m.w[0] < 32 {
                    // The library decides: the program's handler, or the default action.
                    let (vector, err, rip) = (m.w[0], m.w[1], m.w[2]);
                    let code = signal::code_for_exception(vector) as u16 as u64;
                    let info = s as u64 | vector << 8 | code << 16 | (err & 0xffff_ffff) << 32;
                    let addr = if signal::addr_is_rip(vector) { rip } else { 0 };
                    return Some(Reply {
                        tag: MsgTag::new(label::DIVERT, 3),
                        w: [entry, info, addr, 0],
                    });
                }
                println!(
                    "proc: pid {} ({}): {} at rip {:#x}: signal {}",
                    pid,
                    self.name_of(pid),
                    sawmill_abi::exception_name(m.w[0]),
                    m.w[2],
                    s
                );
                Status::Signaled(s)
            }
            label::PAGE_FAULT => {
                let what = sawmill_abi::fault::access(m.w[1]);
                println!(
                    "proc: pid {} ({}): unresolved {} fault at {:#x}, rip {:#x}: signal {}",
                    pid,
                    self.name_of(pid),
                    what,
                    m.w[0],
                    m.w[2],
                    signal::SIGSEGV
                );
                Status::Signaled(signal::SIGSEGV)
            }
            // A secondary thread's own end (a Linux thread's exit: status 0) is the library's
            // business; its death otherwise (killed, a panic in the library) ends the process,
            // which could not go on without it (it may hold the library's lock).
            label::EXIT if secondary && m.w[0] == 0 => return None,
            label::EXIT => {
                // The library ended without telling us (or its task was killed).
                println!(
                    "proc: pid {} ({}): its library ended without exit (status {:#x}): signal {}",
                    pid,
                    self.name_of(pid),
                    m.w[0],
                    signal::SIGKILL
                );
                Status::Signaled(signal::SIGKILL)
            }
            _ => return None,
        };
        self.end(pid, status);
        None
    }

    /// The running process whose `proc` capability carries `badge`.
    fn caller(&self, badge: u64) -> Result<Pid, ProcError> {
        let pid = Pid::try_from(badge).map_err(|_| ProcError::NoProcess)?;
        match self.table.get(pid) {
            Some(p) if p.state == State::Running => Ok(pid),
            _ => Err(ProcError::NoProcess),
        }
    }
}

/// Writes the parent's pid into a process's information page.
fn set_info_ppid(info: u64, ppid: Pid) {
    // SAFETY: `info` is a page of our pool, mapped read-write here, given to this process only
    // (read-only in its task).
    unsafe {
        core::ptr::write_volatile((info as usize + INFO_PPID) as *mut u32, ppid);
    }
}

fn tty_error(e: TtyError) -> ProcError {
    match e {
        TtyError::NotTty => ProcError::NotTty,
        TtyError::NotPermitted => ProcError::NotPermitted,
        TtyError::NoGroup => ProcError::NoSuchProcess,
        TtyError::Invalid => ProcError::Invalid,
        TtyError::Background(_) => ProcError::Background,
        TtyError::Io => ProcError::Io,
    }
}

fn table_error(e: TableError) -> ProcError {
    match e {
        TableError::NoChild => ProcError::NoChild,
        TableError::NotPermitted | TableError::Execed => ProcError::NotPermitted,
        TableError::Full => ProcError::Again,
        TableError::NoProcess | TableError::WrongState => ProcError::NoSuchProcess,
    }
}

fn report_init(status: Status) {
    match status {
        Status::Exited(c) => println!("proc: init exited with status {}", c),
        Status::Signaled(s) if s & signal::CORE != 0 => println!(
            "proc: init killed by signal {} (core dumped)",
            s & !signal::CORE
        ),
        Status::Signaled(s) => println!("proc: init killed by signal {}", s),
    }
}

impl proc::Server for Proc {
    fn exit(&mut self, badge: u64, status: u32) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        let code = u8::try_from(status).map_err(|_| ProcError::Invalid)?;
        self.end(pid, Status::Exited(code));
        Ok(())
    }

    fn killed(&mut self, badge: u64, sig: u32) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        let num = sig & !signal::CORE;
        if num == 0 || num > signal::MAX {
            return Err(ProcError::Invalid);
        }
        self.end(pid, Status::Signaled(sig));
        Ok(())
    }

    fn kill(&mut self, badge: u64, target: i32, sig: u32, code: i32) -> Result<(), ProcError> {
        let me = self.caller(badge)?;
        if sig > signal::MAX {
            return Err(ProcError::Invalid);
        }
        // A process may claim only the codes kill and tkill give (Linux refuses a forged
        // kernel code from user space the same way).
        if code != 0 && code != -6 {
            return Err(ProcError::NotPermitted);
        }
        let creds = self
            .table
            .get(me)
            .map(|p| p.creds)
            .ok_or(ProcError::NoProcess)?;
        let sel = signal::target(target, self.group_of(me));
        let named: Vec<Pid> = self
            .table
            .running_pids()
            .into_iter()
            .filter(|&p| match sel {
                // A thread's id names its process (Linux's kill of a thread id).
                signal::Target::One(t) => self.table.thread_owner(t) == Some(p),
                signal::Target::Group(g) => self.group_of(p) == g,
                signal::Target::All => p != INIT && p != me,
            })
            .collect();
        if named.is_empty() {
            return Err(ProcError::NoSuchProcess);
        }
        let allowed: Vec<Pid> = named
            .into_iter()
            .filter(|&p| {
                self.table.get(p).is_some_and(|t| {
                    signal::may_signal(creds.uid, creds.euid, t.creds.uid, t.creds.euid)
                })
            })
            .collect();
        if allowed.is_empty() {
            return Err(ProcError::NotPermitted);
        }
        if sig == 0 {
            return Ok(());
        }
        for p in allowed {
            if sig == signal::SIGKILL {
                // Nothing the process does can stop this one: its task ends here.
                self.end(p, Status::Signaled(signal::SIGKILL));
            } else {
                let rec = signal::Record {
                    sig,
                    code,
                    pid: me,
                    uid: creds.uid,
                    status: 0,
                };
                self.post(p, rec);
            }
        }
        Ok(())
    }

    fn sig_next(&mut self, badge: u64) -> Result<proc::SigNextOut, ProcError> {
        let pid = self.caller(badge)?;
        let p = self.table.get_mut(pid).ok_or(ProcError::NoProcess)?;
        let r = p.signals.take().unwrap_or(signal::Record {
            sig: 0,
            code: 0,
            pid: 0,
            uid: 0,
            status: 0,
        });
        Ok(proc::SigNextOut {
            sig: r.sig,
            code: r.code,
            pid: r.pid,
            uid: r.uid,
            status: r.status,
        })
    }

    fn net_stack(&mut self, badge: u64) -> Result<u64, ProcError> {
        let pid = self.caller(badge)?;
        let euid = self.table.get(pid).map_or(0, |p| p.creds.euid);
        self.renew_stack_caps();
        let peer = self.peers.iter().find(|p| p.0 == SOCKET_PEER).map(|p| p.1);
        let (c, privileged) = match (peer, self.socket_user) {
            (Some(_), Some(user)) if euid != 0 => (user, false),
            (Some(c), _) => (c, true),
            (None, _) => return Err(ProcError::NoProcess),
        };
        let c = self.net_sub(pid, c, privileged);
        let _ = sys::cap_delete(self.net_slot);
        sys::cap_copy(c, self.net_slot).map_err(|_| ProcError::NoProcess)?;
        self.after.delete(self.net_slot);
        Ok(self.net_slot)
    }

    fn reboot(&mut self, badge: u64, cmd: u32) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        if self.table.get(pid).is_none_or(|p| p.creds.euid != 0) {
            return Err(ProcError::NotPermitted);
        }
        // As Linux's reboot does: what the processes wrote reaches the disks first.
        if let Err(e) = self.files.sync() {
            println!("proc: sync before shutdown failed: {:?}", e);
        }
        println!(
            "{} (reboot command {:#x} by pid {})",
            sawmill_proc_api::POWER_OFF_LINE,
            cmd,
            pid
        );
        // The loop stops; main ends every process.
        self.done = true;
        Ok(())
    }

    fn vfs_again(&mut self, badge: u64) -> Result<u64, ProcError> {
        self.caller(badge)?;
        let ours = self.files.vfs_slot();
        let spare = VFS_AGAIN_SPARE.swap(0, Ordering::Relaxed);
        let copy = if spare != 0 {
            spare
        } else {
            sawmill_rt::thread::alloc_slot()
        };
        if sys::cap_copy(ours, copy).is_err() {
            VFS_AGAIN_SPARE.store(copy, Ordering::Relaxed);
            return Err(ProcError::Again);
        }
        // Handed over in the reply; our copy goes once it is delivered.
        self.after.delete(copy);
        Ok(copy)
    }

    fn sig_exec(&mut self, badge: u64, ignored: u64, blocked: u64) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        run.exec_signals = (ignored, blocked);
        Ok(())
    }

    fn sig_entry(&mut self, badge: u64, entry: u64) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        // Only inside the library's zone: a program cannot make proc divert to its own code.
        if entry != 0 && !(linux::LIB_BASE..linux::LIB_END).contains(&entry) {
            return Err(ProcError::Invalid);
        }
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        run.fault_entry = entry;
        Ok(())
    }

    fn exec_data(&mut self, badge: u64, chunk: &[u8]) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        if run.exec.len() + chunk.len() > MAX_EXEC_REQUEST {
            run.exec = Vec::new();
            return Err(ProcError::TooBig);
        }
        run.exec.extend_from_slice(chunk);
        Ok(())
    }

    fn exec(&mut self, badge: u64) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        let bytes = core::mem::take(&mut run.exec);
        // What `exec_check` resolved is taken, not copied (the request's strings, the program's
        // path and arguments: a few dozen allocations an exec).
        let checked = run.checked.take();
        let past_checks = checked.is_some();
        let (req, resolved) = match checked {
            Some((path, argv, req)) => (req, Some((path, argv))),
            None => match ExecRequest::decode(&bytes) {
                Some(r) => (r, None),
                None => {
                    let h = self.take_handoff(pid);
                    self.drop_caps(h);
                    self.take_state(pid);
                    return Err(ProcError::Invalid);
                }
            },
        };
        let r = self.exec_request(pid, req, resolved).map_err(|e| {
            println!("proc: pid {}: exec refused: {}", pid, e);
            exec_error(&e)
        });
        if r.is_err() && past_checks {
            // Past the point of no return: the caller has given up its memory.
            self.end(pid, Status::Signaled(signal::SIGKILL));
        }
        r
    }

    fn exec_check(&mut self, badge: u64) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        run.checked = None;
        let bytes = core::mem::take(&mut run.exec);
        let req = ExecRequest::decode(&bytes).ok_or(ProcError::Invalid)?;
        match self.resolve(&req.program, &req.argv, &req.env, &req.cwd) {
            Ok((path, argv)) => {
                if let Some(run) = self.table.get_mut(pid).and_then(|p| p.task.as_mut()) {
                    run.checked = Some((path, argv, req));
                }
                Ok(())
            }
            Err(e) => {
                println!("proc: pid {}: exec refused: {}", pid, e);
                Err(exec_error(&e))
            }
        }
    }

    fn handoff(&mut self, badge: u64, c: u64, first: bool) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        if first {
            let h = self.take_handoff(pid);
            self.drop_caps(h);
            self.take_state(pid);
        }
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        if run.handoff.len() >= MAX_HANDOFF_CAPS {
            return Err(ProcError::Invalid);
        }
        // The received capability goes when we return: keep a copy.
        let s = self.pool.slot().map_err(|_| ProcError::Again)?;
        if sys::cap_copy(c, s).is_err() {
            self.pool.free_slot(s);
            return Err(ProcError::Invalid);
        }
        if let Some(r) = self.table.get_mut(pid).and_then(|p| p.task.as_mut()) {
            r.handoff.push(s);
        }
        Ok(())
    }

    fn handoff_state(&mut self, badge: u64, chunk: &[u8], first: bool) -> Result<(), ProcError> {
        let pid = self.caller(badge)?;
        if first {
            let h = self.take_handoff(pid);
            self.drop_caps(h);
            self.take_state(pid);
        }
        let run = self
            .table
            .get_mut(pid)
            .and_then(|p| p.task.as_mut())
            .ok_or(ProcError::NoProcess)?;
        if run.state.len() + chunk.len() > MAX_INLINE_STATE {
            run.state = Vec::new();
            return Err(ProcError::TooBig);
        }
        run.state.extend_from_slice(chunk);
        Ok(())
    }

    fn fork(&mut self, badge: u64) -> Result<u32, ProcError> {
        let pid = self.caller(badge)?;
        let handoff = self.take_handoff(pid);
        let state = self.take_state(pid);
        let r = self.fork_child(pid, &handoff, &state);
        self.drop_caps(handoff);
        r.map_err(|e| match e {
            StartError::Again | StartError::Spawn(_) => ProcError::Again,
            e => exec_error(&e),
        })
    }

    fn wait(&mut self, badge: u64, pid: i32) -> Result<proc::WaitOut, ProcError> {
        let me = self.caller(badge)?;
        let pgid = self.table.get(me).map_or(0, |p| p.pgid);
        match self
            .table
            .wait(me, WaitFor::from_linux(pid, pgid))
            .map_err(table_error)?
        {
            Some((child, st)) => {
                self.release_extra(child);
                Ok(proc::WaitOut {
                    child,
                    kind: WaitKind::Ended,
                    status: st.wait_status(),
                })
            }
            None => Ok(proc::WaitOut {
                child: 0,
                kind: WaitKind::None,
                status: 0,
            }),
        }
    }

    fn vfork_done(&mut self, badge: u64, pid: u32) -> Result<bool, ProcError> {
        let me = self.caller(badge)?;
        Ok(match self.table.get(pid) {
            Some(p) if p.ppid == me => p.execed || p.state != State::Running,
            _ => true,
        })
    }

    fn setpgid(&mut self, badge: u64, pid: u32, pgid: u32) -> Result<(), ProcError> {
        let me = self.caller(badge)?;
        self.table.setpgid(me, pid, pgid).map_err(table_error)
    }

    fn getpgid(&mut self, badge: u64, pid: u32) -> Result<u32, ProcError> {
        let me = self.caller(badge)?;
        let pid = if pid == 0 { me } else { pid };
        self.table
            .get(pid)
            .map(|p| p.pgid)
            .ok_or(ProcError::NoSuchProcess)
    }

    fn setsid(&mut self, badge: u64) -> Result<u32, ProcError> {
        let me = self.caller(badge)?;
        self.table.setsid(me).map_err(table_error)
    }

    fn tty_set_ctty(&mut self, badge: u64, steal: bool) -> Result<(), ProcError> {
        let c = self.tty_caller(badge)?;
        self.terminal.set_ctty(&c, steal).map_err(tty_error)
    }

    fn tty_drop_ctty(&mut self, badge: u64) -> Result<(), ProcError> {
        let c = self.tty_caller(badge)?;
        if let Some(fg) = self.terminal.drop_ctty(&c).map_err(tty_error)? {
            self.signal_group(fg, signal::SIGHUP);
            self.signal_group(fg, signal::SIGCONT);
        }
        Ok(())
    }

    fn tty_get(&mut self, badge: u64) -> Result<proc::TtyGetOut, ProcError> {
        let c = self.tty_caller(badge)?;
        let (pgrp, sid) = self.terminal.get(&c).map_err(tty_error)?;
        Ok(proc::TtyGetOut { pgrp, sid })
    }

    fn tty_set_pgrp(&mut self, badge: u64, pgrp: u32, ttou_ok: bool) -> Result<(), ProcError> {
        let c = self.tty_caller(badge)?;
        let session = tty::session_of_group(&self.table, pgrp);
        let mut r = self.terminal.set_pgrp(&c, pgrp, ttou_ok, session);
        if let Err(TtyError::Background(sig)) = r {
            if tty::orphaned(&self.table, c.pgid, None) {
                r = Err(TtyError::Io);
            } else {
                self.signal_group(c.pgid, sig);
            }
        }
        r.map_err(tty_error)
    }

    fn tty_check(&mut self, badge: u64, sig: u32, ignored: bool) -> Result<(), ProcError> {
        let c = self.tty_caller(badge)?;
        if sig != signal::SIGTTIN && sig != signal::SIGTTOU {
            return Err(ProcError::Invalid);
        }
        let orphaned = tty::orphaned(&self.table, c.pgid, None);
        let r = self.terminal.check(&c, sig, ignored, orphaned);
        if let Err(TtyError::Background(s)) = r {
            self.signal_group(c.pgid, s);
        }
        r.map_err(tty_error)
    }

    fn tty_signal(&mut self, badge: u64, sig: u32) -> Result<(), ProcError> {
        if badge != CONSOLE_BADGE {
            return Err(ProcError::NotPermitted);
        }
        if sig == 0 || sig > signal::MAX {
            return Err(ProcError::Invalid);
        }
        if self.terminal.session != 0 {
            self.signal_group(self.terminal.fg, sig);
        }
        Ok(())
    }

    fn stop(&mut self, badge: u64, sig: u32) -> Result<bool, ProcError> {
        let pid = self.caller(badge)?;
        if !tty::is_stop(sig) {
            return Err(ProcError::Invalid);
        }
        if !tty::stop(&mut self.table, pid, sig) {
            return Ok(false);
        }
        self.tell_parent(pid, tty::Change::Stopped(sig));
        Ok(true)
    }

    fn wait_change(
        &mut self,
        badge: u64,
        pid: i32,
        options: u32,
    ) -> Result<proc::WaitChangeOut, ProcError> {
        let me = self.caller(badge)?;
        let pgid = self.table.get(me).map_or(0, |p| p.pgid);
        let found = tty::wait_change(&mut self.table, me, WaitFor::from_linux(pid, pgid), options)
            .map_err(table_error)?;
        Ok(match found {
            Some(tty::Found::Ended(child, status)) => {
                self.release_extra(child);
                proc::WaitChangeOut {
                    child,
                    kind: WaitKind::Ended,
                    status,
                }
            }
            Some(tty::Found::Changed(child, ch)) => proc::WaitChangeOut {
                child,
                kind: match ch {
                    tty::Change::Stopped(_) => WaitKind::Stopped,
                    tty::Change::Continued => WaitKind::Continued,
                },
                status: ch.wait_status(),
            },
            None => proc::WaitChangeOut {
                child: 0,
                kind: WaitKind::None,
                status: 0,
            },
        })
    }

    fn thread_new(&mut self, badge: u64) -> Result<u32, ProcError> {
        let me = self.caller(badge)?;
        self.table.thread_new(me).map_err(table_error)
    }

    fn thread_end(&mut self, badge: u64, tid: u32) -> Result<(), ProcError> {
        let me = self.caller(badge)?;
        self.table.thread_end(me, tid).map_err(table_error)
    }

    fn getsid(&mut self, badge: u64, pid: u32) -> Result<u32, ProcError> {
        let me = self.caller(badge)?;
        let pid = if pid == 0 { me } else { pid };
        self.table
            .get(pid)
            .map(|p| p.sid)
            .ok_or(ProcError::NoSuchProcess)
    }
}

/// /proc's questions (servers/procfs): the logic is `sawmill_proc::info`.
impl proc_info::Server for Proc {
    fn pids(&mut self, _badge: u64, after: u32) -> Result<rpc::Bytes<480>, ProcError> {
        rpc::Bytes::from_slice(&info::pids_after(&self.table, after)).ok_or(ProcError::Invalid)
    }

    fn status(&mut self, _badge: u64, pid: u32) -> Result<proc_info::StatusOut, ProcError> {
        let sleeping = self.extras.get(&pid).is_some_and(|x| {
            // SAFETY: `x.info` is a page of our pool, mapped here for as long as the process
            // has its extras; the process may write any value at INFO_SLEEPING (only its own
            // /proc state is at stake).
            unsafe {
                core::ptr::read_volatile((x.info as usize + INFO_SLEEPING) as *const u32) != 0
            }
        });
        let mut i = info::info(&self.table, pid, sleeping).ok_or(ProcError::NoProcess)?;
        if i.state != info::RunState::Zombie {
            i.name = self.comm_of(pid);
        }
        let mut name = rpc::Bytes::<64>::default();
        name.set(&i.name.as_bytes()[..i.name.len().min(64)]);
        Ok(proc_info::StatusOut {
            state: match i.state {
                info::RunState::Running => ProcState::Running,
                info::RunState::Sleeping => ProcState::Sleeping,
                info::RunState::Stopped => ProcState::Stopped,
                info::RunState::Zombie => ProcState::Zombie,
            },
            ppid: i.ppid,
            pgid: i.pgid,
            sid: i.sid,
            uid: i.uid,
            euid: i.euid,
            gid: i.gid,
            egid: i.egid,
            started: i.started,
            exit: i.exit,
            name,
            threads: self.table.threads_of(pid) as u32 + 1,
        })
    }

    fn cmdline(&mut self, _badge: u64, pid: u32, off: u32) -> Result<rpc::Bytes<480>, ProcError> {
        let d = info::cmdline(&self.table, pid, off, 480).ok_or(ProcError::NoProcess)?;
        rpc::Bytes::from_slice(&d).ok_or(ProcError::Invalid)
    }

    fn exe(&mut self, _badge: u64, pid: u32, off: u32) -> Result<rpc::Bytes<400>, ProcError> {
        let d = info::exe(&self.table, pid, off, 400).ok_or(ProcError::NoProcess)?;
        rpc::Bytes::from_slice(&d).ok_or(ProcError::Invalid)
    }
}

fn exec_error(e: &StartError) -> ProcError {
    match e {
        StartError::Exec(_, ExecError::NotFound) => ProcError::NotFound,
        StartError::Exec(_, ExecError::NotRegular | ExecError::NoPermission) => ProcError::Denied,
        StartError::Exec(_, ExecError::Io(_)) => ProcError::Io,
        StartError::Exec(_, _) => ProcError::NoExec,
        StartError::Spawn(SpawnError::EnvFull) => ProcError::TooBig,
        StartError::Spawn(_) | StartError::Table => ProcError::NoMemory,
        StartError::Again => ProcError::Again,
    }
}

/// How long a process build waits for a restarting VFS (`Proc::wait_for_vfs`).
const VFS_WAIT_MS: u64 = 2000;

/// The notification `Proc::wait_for_vfs` sleeps on (nothing signals it), made at its first use.
fn vfs_wait_timer() -> u64 {
    static TIMER: AtomicU64 = AtomicU64::new(0);
    match TIMER.load(Ordering::Relaxed) {
        0 => {
            let t = sawmill_rt::thread::create(ObjKind::Notification, 0).unwrap_or(0);
            TIMER.store(t, Ordering::Relaxed);
            t
        }
        t => t,
    }
}

/// A slot `vfs_again` used and the post-reply step emptied (the only capability proc hands out
/// and then deletes), kept for the next one.
static VFS_AGAIN_SPARE: AtomicU64 = AtomicU64::new(0);

impl rpc::Serve for Proc {
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }

    fn slot_freed(&mut self, slot: u64) {
        VFS_AGAIN_SPARE.store(slot, Ordering::Relaxed);
    }

    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.badge & KERNEL_BIT != 0 {
            let serial = m.badge & !(KERNEL_BIT | SECONDARY_BIT);
            let r = self.kernel_message(serial, m.badge & SECONDARY_BIT != 0, m);
            // No answer unless the thread goes on: the thread's task is gone, or an exit has no
            // caller.
            return match r {
                _ if self.done => next.stop(),
                Some(r) => next.reply(self, r),
                None => next.skip(self),
            };
        }
        let r: Reply = if (proc_info::op::PIDS..=proc_info::op::EXE).contains(&m.tag.label()) {
            proc_info::dispatch(self, m)
        } else {
            proc::dispatch(self, m)
        };
        if self.done {
            // Init ended: its caller is gone with it, nothing to answer.
            next.stop()
        } else {
            next.reply(self, r)
        }
    }
}

/// The personality library's boot module (manifest `modules`): its address and length.
fn module(name: &str) -> Option<(u64, u64)> {
    env::find_all(env::KIND_MODULE).find_map(|(addr, b)| {
        let len = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        (b.get(8..)? == name.as_bytes()).then_some((addr, len))
    })
}

fn main() {
    let cfg: Config = env::config().unwrap_or_else(|e| fail(format_args!("config: {}", e)));
    let Some(ep) = env::cap(proc::NAME) else {
        fail(format_args!("no `{}` endpoint", proc::NAME))
    };
    let library = module(&cfg.personality).unwrap_or_else(|| {
        fail(format_args!(
            "boot module `{}` not given (manifest `modules`)",
            cfg.personality
        ))
    });
    sawmill_rm::init().unwrap_or_else(|e| fail(format_args!("region manager: {:?}", e)));
    let vfs = env::cap("vfs").unwrap_or_else(|| fail(format_args!("no `vfs` endpoint")));
    let pool = MemPool::new(cfg.pool_kb as u64 * 1024)
        .unwrap_or_else(|e| fail(format_args!("the page pool: {:?}", e)));
    let clock = read_clock();
    println!(
        "proc: ready (clock {} s since 1970, TSC {} kHz; library {} KiB)",
        clock.unix,
        clock.khz,
        library.1 / 1024
    );
    let (socket_root, socket_user) = stack_caps();
    let mut st = Proc {
        table: Table::new(cfg.max_procs as usize),
        extras: BTreeMap::new(),
        after: AfterReply::new(),
        pool,
        files: Files::new(vfs),
        ep,
        library,
        lib_plan: None,
        lib_shared: None,
        spare: Vec::new(),
        hand_names: Vec::new(),
        peers: ["vfs", "mem", "console", "console-in", "pipe"]
            .into_iter()
            .filter_map(|name| Some((name, env::cap(name)?)))
            .chain(socket_root.map(|c| (SOCKET_PEER, c)))
            .collect(),
        socket_user,
        net_slot: sawmill_rt::thread::alloc_slot(),
        net_subs: BTreeMap::new(),
        clock,
        seeds: clock.tsc,
        done: false,
        terminal: Terminal::default(),
        cfg,
    };
    let rx = sawmill_rt::thread::alloc_slot();
    st.after.receive_into(&[rx]);
    let creds = Creds::of(st.cfg.uid, st.cfg.gid);
    let (argv, envs, cwd) = (st.cfg.init.clone(), st.cfg.env.clone(), st.cfg.cwd.clone());
    match st.start(None, creds, &argv, &envs, &cwd) {
        Ok(pid) => {
            println!("proc: started pid {} ({})", pid, st.name_of(pid));
            // As a getty's login does for the shell it starts: the console is the controlling
            // terminal of init's session (init's descriptors 0, 1 and 2 are on it).
            if let Some(c) = Caller::of(&st.table, pid) {
                let _ = st.terminal.set_ctty(&c, false);
            }
        }
        Err(e) => {
            println!("proc: cannot run init: {}", e);
            report_init(Status::Exited(e.shell_status()));
            return;
        }
    }
    let _ = rpc::serve(ep, &mut st);
    // Init has ended: so does every other process.
    for pid in st.table.running_pids() {
        if let Ok(r) = st.table.end(pid, Status::Signaled(signal::SIGKILL)) {
            st.release(r);
        }
    }
}

/// The name a process finds its network stack capability under (the personality's
/// `socket_guest::STACK_CAP`).
const SOCKET_PEER: &str = "socket";

impl Proc {
    /// Process `pid`'s own sub-account of `stack` (ours, with the rights `privileged` says),
    /// minted on first use: its sockets count against the process's bound and ours. Our own
    /// capability if the stack refused (the process then shares our share, as before).
    fn net_sub(&mut self, pid: Pid, stack: u64, privileged: bool) -> u64 {
        if let Some(&(p, c)) = self.net_subs.get(&pid) {
            if p == privileged {
                return c;
            }
        }
        let Ok(slot) = self.pool.slot() else {
            return stack;
        };
        match sawmill_interfaces::socket::Client::new(stack).grant_sub(pid, slot) {
            Ok(_) => {
                // A change of credentials: the same sub-account, with the other rights.
                if let Some((_, old)) = self.net_subs.insert(pid, (privileged, slot)) {
                    self.drop_cap(old);
                }
                slot
            }
            Err(_) => {
                self.pool.free_slot(slot);
                stack
            }
        }
    }

    /// Asks netmgr again for the stack capabilities if the stack they lead to is gone (it
    /// restarted: root revoked the dead incarnation's endpoint and every capability minted from
    /// it). Without netmgr the `socket` peer is root's slot, which holds the new incarnation.
    fn renew_stack_caps(&mut self) {
        if env::cap(netmgr::NAME).is_none() {
            return;
        }
        let current = self.peers.iter().find(|p| p.0 == SOCKET_PEER).map(|p| p.1);
        let alive = |c: Option<u64>| {
            c.is_some_and(|c| {
                !matches!(
                    sawmill_interfaces::socket::Client::new(c).config(),
                    Err(rpc::Error::Ipc(_))
                )
            })
        };
        if alive(current) && (self.socket_user.is_none() || alive(self.socket_user)) {
            return;
        }
        for c in current.into_iter().chain(self.socket_user) {
            let _ = sys::cap_delete(c);
        }
        // The processes' sub-accounts went with the dead stack: each asks again.
        for (_, (_, c)) in core::mem::take(&mut self.net_subs) {
            self.drop_cap(c);
        }
        self.peers.retain(|p| p.0 != SOCKET_PEER);
        let (root, user) = stack_caps();
        if let Some(c) = root {
            self.peers.push((SOCKET_PEER, c));
        }
        self.socket_user = user;
        println!("proc: the network stack restarted: new capabilities from netmgr");
    }
}

/// The network stack capabilities for processes run as root and as anyone else. With a network
/// manager (`netmgr` among our peers): one granted with the privileged-ports right and one
/// without; else the stack's endpoint (`socket`, whose configuration may list us `privileged`)
/// for both.
fn stack_caps() -> (Option<u64>, Option<u64>) {
    let Some(m) = env::cap(netmgr::NAME) else {
        return (env::cap(SOCKET_PEER), None);
    };
    let mgr = netmgr::Client::new(m);
    let open = |rights: u32| {
        let slot = sawmill_rt::thread::alloc_slot();
        match mgr.open(0, rights, slot) {
            Ok(_) => Some(slot),
            Err(e) => {
                println!(
                    "proc: netmgr refused a stack with rights {}: {:?}",
                    rights, e
                );
                None
            }
        }
    };
    let user = open(0);
    let root = open(sawmill_interfaces::RIGHT_PRIVILEGED_PORTS);
    (root.or(user), user)
}
