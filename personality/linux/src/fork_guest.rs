//! The process calls that need proc and the handoff between images, in the guest: `fork`,
//! `vfork` and `clone` (the parent's side: the state and capabilities handed to proc), the state
//! an `execve` hands on, `wait4`/`waitid` and the wake loop, process groups and sessions.
//! What is decided is decided by the host-tested modules (`handoff`, `procs`); the child's side
//! of a fork (adopting the state, returning to the program) is `guest::start`.
//!
//! It touches the program's region map (lib/rm: a snapshot, `dataspace.copy` of its private
//! memory, which makes the parent's own pages copy-on-write), the descriptor table through
//! `files_guest`, and the `proc` and `mem` capabilities and the wake notification.

use alloc::vec::Vec;
use core::cell::UnsafeCell;

use sawmill_interfaces::{dataspace, proc, WaitKind};
use sawmill_linux::errno::{self, Errno};
use sawmill_linux::handoff::{self, CapIndex, State, NONE};
use sawmill_linux::procs::{self, CloneKind};
use sawmill_linux::{layout, SysResult, User};
use sawmill_proc_api::{HANDOFF_CAP_PREFIX, MAX_INLINE_STATE};
use sawmill_rm as rm;
use sawmill_rt::{env, sys, thread};

use crate::guest::{self, GuestUser};

/// State used by the program's one thread only (see `guest`).
struct Single<T>(UnsafeCell<T>);
// SAFETY: only the program's one thread enters the library (guest's module header).
unsafe impl<T> Sync for Single<T> {}
impl<T> Single<T> {
    #[allow(clippy::mut_from_ref)]
    fn get(&self) -> &mut T {
        // SAFETY: as for `Sync`: each use takes it once and does not keep it across a call
        // that takes it again.
        unsafe { &mut *self.0.get() }
    }
}

/// Capability slots given back, for reuse (a task has 1024 and the runtime never reuses one;
/// a shell forks without end).
static FREE_SLOTS: Single<Vec<u64>> = Single(UnsafeCell::new(Vec::new()));
fn slot() -> u64 {
    FREE_SLOTS.get().pop().unwrap_or_else(thread::alloc_slot)
}

fn free_slot(s: u64) {
    let _ = sys::cap_delete(s);
    FREE_SLOTS.get().push(s);
}

fn proc_client() -> Result<proc::Client, Errno> {
    crate::guest::proc_cap()
        .map(proc::Client::new)
        .ok_or(errno::ENOSYS)
}

fn proc_errno(e: sawmill_interfaces::rpc::Error<sawmill_interfaces::ProcError>) -> Errno {
    use sawmill_interfaces::rpc::Error as E;
    use sawmill_interfaces::ProcError as P;
    match e {
        E::App(P::Again) => errno::EAGAIN,
        E::App(P::NoChild) => errno::ECHILD,
        E::App(P::NotPermitted) => errno::EPERM,
        E::App(P::NoSuchProcess) => errno::ESRCH,
        E::App(P::NoMemory) => errno::ENOMEM,
        _ => errno::EINVAL,
    }
}

/// Waits until the process's wake notification is signalled (through the signals layer, which
/// takes the signal bits), or ends the wait for a caught signal.
pub fn wait_wake() -> Result<(), Errno> {
    // A caught signal ends the wait (EINTR, or a restart under SA_RESTART).
    if crate::signal_guest::interrupted() {
        return Err(sawmill_linux::signal::ERESTARTSYS);
    }
    // Whatever woke us, the caller asks proc again (a child's change of state is proc's to
    // tell); other bits are the signals layer's, which took them.
    crate::signal_guest::wait_wake(None);
    Ok(())
}

/// The capabilities a new image gets, by index, and the indices given out so far.
struct Caps {
    slots: Vec<u64>,
    /// Of `slots`, those made for the handoff (copies): given back after it.
    made: Vec<u64>,
}

impl Caps {
    fn new() -> Caps {
        // Index 0 is the state's dataspace, filled in last.
        Caps {
            slots: alloc::vec![0],
            made: Vec::new(),
        }
    }
    /// The index of `slot`, added once.
    fn index(&mut self, slot: u64) -> CapIndex {
        match self.slots.iter().position(|&s| s == slot) {
            Some(i) => i as CapIndex,
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as CapIndex
            }
        }
    }
    /// A copy-on-write copy of dataspace `ds` (once per dataspace: `copies` maps the
    /// original slot to its copy's index).
    fn copy(&mut self, ds: u64, copies: &mut Vec<(u64, CapIndex)>) -> Result<CapIndex, Errno> {
        if let Some(&(_, i)) = copies.iter().find(|(o, _)| *o == ds) {
            return Ok(i);
        }
        let s = slot();
        match dataspace::Client::new(ds).copy(s) {
            Ok(c) => {
                self.made.push(c);
                let i = self.index(c);
                copies.push((ds, i));
                Ok(i)
            }
            Err(_) => {
                FREE_SLOTS.get().push(s);
                Err(errno::EAGAIN)
            }
        }
    }
    /// Frees what was made (the handoff failed: nothing of it may stay).
    fn discard(self) {
        for c in self.made {
            let _ = dataspace::Client::new(c).free();
            free_slot(c);
        }
    }
    /// Gives back our slots of what was made (the new image holds them now).
    fn done(self) {
        for c in self.made {
            free_slot(c);
        }
    }
}

/// The descriptors, working directory and umask for the new image (`exec`: without the
/// close-on-exec ones), files as capabilities in `caps`.
fn file_state(caps: &mut Caps, exec: bool) -> State {
    crate::files_guest::export(exec, &mut |cap| caps.index(cap))
}

/// The piece of a state one `proc.handoff_state` message carries (its `bytes<480>`).
const STATE_CHUNK: usize = 480;
/// Environment bytes a handed-off capability's name takes (`hand` and its index: a record's
/// 24-byte header and 8 bytes).
const ENV_BYTES_PER_CAP: usize = 32;

/// Environment bytes of the new image left for a state and its capabilities' names (of
/// [`MAX_INLINE_STATE`]) after an exec request's strings: each string as a record (a 24-byte
/// header), the request counted twice (the program's path and working directory come back as
/// records of their own, a script's interpreter adds to `argv`). None: no room.
pub fn inline_room(request_bytes: usize, strings: usize) -> Option<usize> {
    MAX_INLINE_STATE.checked_sub(2 * request_bytes + 24 * (strings + 4))
}

/// Hands `st` and every capability to proc: if the state and its capabilities' names fit in
/// `room` bytes of the new image's environment (a fork: [`MAX_INLINE_STATE`]; an exec: what
/// its arguments and environment strings leave, [`inline_room`]), the state in messages for
/// the environment; else written into a fresh dataspace (index 0 of `caps`). In messages, a
/// handoff spares a dataspace made, attached, written, detached and handed over here, and
/// looked up, attached, read and freed in the new image.
fn hand_off(st: &State, caps: &mut Caps, room: Option<usize>) -> Result<(), Errno> {
    // A new task has room for so many handed-on capabilities (descriptors of distinct open
    // files, mapped files, the state): past it the fork or exec fails as Linux's does when it
    // cannot allocate what the new image needs, before anything is handed.
    if caps.slots.len() > sawmill_proc_api::MAX_HANDOFF_CAPS {
        return Err(errno::ENOMEM);
    }
    let bytes = st.encode();
    if room.is_some_and(|r| bytes.len() + ENV_BYTES_PER_CAP * caps.slots.len() <= r) {
        let p = proc_client()?;
        for (i, chunk) in bytes.chunks(STATE_CHUNK).enumerate() {
            p.handoff_state(chunk, i == 0).map_err(proc_errno)?;
        }
        for &c in &caps.slots[1..] {
            p.handoff(c, false).map_err(proc_errno)?;
        }
        return Ok(());
    }
    let len = (bytes.len() as u64 + 8).div_ceil(4096) * 4096;
    let m = rm::mem().ok_or(errno::ENOMEM)?;
    let s = slot();
    let ds = m.alloc(len, 0, s).map_err(|_| {
        FREE_SLOTS.get().push(s);
        errno::EAGAIN
    })?;
    caps.made.push(ds);
    caps.slots[0] = ds;
    let at = rm::attach(ds, 0, len, None, rm::READ | rm::WRITE).map_err(|_| errno::ENOMEM)?;
    // SAFETY: attached read-write just above, `len` >= 8 + bytes.len(): the length, the state.
    unsafe {
        core::ptr::write_unaligned(at as *mut u64, bytes.len() as u64);
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), (at + 8) as *mut u8, bytes.len());
    }
    let _ = rm::detach(at);
    let p = proc_client()?;
    for (i, &c) in caps.slots.iter().enumerate() {
        p.handoff(c, i == 0).map_err(proc_errno)?;
    }
    Ok(())
}

/// The records of a handoff, gathered by the start's one pass over the environment
/// ([`Handed::note`]; a pass of its own cost ~2.7k instructions a process).
#[derive(Default)]
pub struct Handed {
    /// How many capabilities were handed over (`KIND_LINUX_HANDOFF`).
    count: Option<usize>,
    /// The state, when it came in the environment (`KIND_LINUX_STATE`).
    state: Option<&'static [u8]>,
    /// The capability records (`hand<i>`): index and slot.
    caps: Vec<(usize, u64)>,
}

impl Handed {
    /// Takes the record if it is part of a handoff; says whether it was.
    pub fn note(&mut self, kind: u64, value: u64, bytes: &'static [u8]) -> bool {
        match kind {
            env::KIND_LINUX_HANDOFF => {
                self.count.get_or_insert(value as usize);
            }
            env::KIND_LINUX_STATE => {
                self.state.get_or_insert(bytes);
            }
            env::KIND_CAP => match bytes
                .strip_prefix(HANDOFF_CAP_PREFIX.as_bytes())
                .and_then(decimal)
            {
                Some(i) => self.caps.push((i, value)),
                None => return false,
            },
            _ => return false,
        }
        true
    }
}

/// The state the previous image handed on (a fork parent, or the image before `execve`) and
/// the capabilities it names (this task's slots, by index), from the records `h` gathered;
/// `None` if there is none. The state is in the environment, or in a dataspace (index 0),
/// freed once read.
pub fn received(h: Handed) -> Option<(State, Vec<u64>)> {
    let Handed {
        count,
        state,
        caps: named,
    } = h;
    // No more than a task can be handed (proc's limit; the index 0 of a dataspace's state).
    let n = count?.min(sawmill_proc_api::MAX_HANDOFF_CAPS + 1);
    let mut caps = alloc::vec![0; n];
    for (i, c) in named {
        if let Some(slot) = caps.get_mut(i) {
            *slot = c;
        }
    }
    // A handed capability proc found revoked (its server died after the handoff: a file's PFS,
    // a socket's stack) is not named. It gets an empty slot of ours, not 0: the descriptor or
    // mapped file it was then finds its server gone at first use and is reopened (or reads as
    // reset) as any of ours would be. Index 0 with the state inline is no capability.
    let first = usize::from(state.is_some());
    for c in caps.iter_mut().skip(first).filter(|c| **c == 0) {
        *c = thread::alloc_slot();
    }
    if let Some(bytes) = state {
        return State::decode(bytes).map(|s| (s, caps));
    }
    let ds = *caps.first()?;
    let info = dataspace::Client::new(ds).info().ok()?;
    let at = rm::attach(ds, 0, info.size, None, rm::READ).ok()?;
    // SAFETY: attached readable just above, `info.size` bytes: a length word, then the state.
    let bytes = unsafe { core::slice::from_raw_parts(at as *const u8, info.size as usize) };
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8])) as usize;
    let st = bytes
        .get(8..8usize.saturating_add(len))
        .and_then(State::decode);
    let _ = rm::detach(at);
    let _ = dataspace::Client::new(ds).free();
    let _ = sys::cap_delete(ds);
    st.map(|s| (s, caps))
}

/// The number a capability record's name ends in (`hand12`: 12), plain decimal digits only.
fn decimal(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0usize, |n, &d| {
        d.is_ascii_digit().then_some(())?;
        n.checked_mul(10)?.checked_add((d - b'0') as usize)
    })
}

/// `fork`, `vfork` and `clone`: the child's pid, or an error with nothing changed.
pub fn fork(kind: CloneKind, flags: u64, stack: u64, parent_tid: u64, child_tid: u64) -> SysResult {
    match fork_once(kind, flags, stack, parent_tid, child_tid) {
        // Issue 16: a mapped file whose file system restarted has an empty slot until the next
        // fault in it reopens it, and an empty slot cannot be handed to the child. Reopened
        // (only on this failure: nothing on the fast path), the fork is made again.
        Err(e) if rm::revive_files() > 0 => {
            let _ = e;
            fork_once(kind, flags, stack, parent_tid, child_tid)
        }
        r => r,
    }
}

fn fork_once(
    kind: CloneKind,
    flags: u64,
    stack: u64,
    parent_tid: u64,
    child_tid: u64,
) -> SysResult {
    let frame = &sawmill_rt::utcb().foreign;
    let mut words = Vec::with_capacity(18);
    for w in [
        frame.rax,
        frame.rbx,
        frame.rcx,
        frame.rdx,
        frame.rsi,
        frame.rdi,
        frame.rbp,
        frame.rsp,
        frame.r8,
        frame.r9,
        frame.r10,
        frame.r11,
        frame.r12,
        frame.r13,
        frame.r14,
        frame.r15,
        frame.rip,
        frame.rflags,
    ] {
        words.push(w);
    }
    let mut caps = Caps::new();
    let mut copies = Vec::new();
    let mut regions = Vec::new();
    let mut lowered = Vec::new();
    let snap = rm::snapshot(layout::PROGRAM_MIN, layout::PROGRAM_END);
    // Shared anonymous memory: the child counts as one more user of each such dataspace.
    let mut shared: Vec<u64> = Vec::new();
    // A vfork child (CLONE_VM) runs in the parent's memory until it execs or ends: it gets
    // the parent's own dataspaces, borrowed (never freed by it), and its writes are the
    // parent's. The parent waits meanwhile (below), as on Linux.
    let borrow = kind == CloneKind::Vfork && flags & procs::CLONE_VM != 0;
    let made = (|| -> Result<(), Errno> {
        for r in &snap {
            if borrow && r.flags & rm::SHARED == 0 {
                let ds = caps.index(r.ds);
                let shadow = if r.shadow != 0 {
                    caps.index(r.shadow)
                } else {
                    NONE
                };
                regions.push(handoff::Region {
                    start: r.start,
                    size: r.size,
                    ds,
                    offset: r.offset,
                    flags: r.flags | rm::BORROWED,
                    shadow,
                    shadow_offset: r.shadow_offset,
                    private: r.private.clone(),
                    reopen: reopen_of(r.ds),
                });
                continue;
            }
            if r.flags & rm::SHARED != 0 && !shared.contains(&r.ds) {
                rm::share(r.ds, 1).map_err(|_| errno::EAGAIN)?;
                shared.push(r.ds);
            }
            let private = r.flags & rm::OWNED != 0;
            let ds = if private {
                caps.copy(r.ds, &mut copies)?
            } else {
                caps.index(r.ds)
            };
            let shadow = if r.shadow != 0 {
                caps.copy(r.shadow, &mut copies)?
            } else {
                NONE
            };
            if private || r.shadow != 0 {
                lowered.push((r.start, r.size));
            }
            regions.push(handoff::Region {
                start: r.start,
                size: r.size,
                ds,
                offset: r.offset,
                // A fork of a vfork child copies what it borrowed: the copy is the new child's.
                flags: r.flags & !rm::BORROWED,
                shadow,
                shadow_offset: r.shadow_offset,
                private: r.private.clone(),
                reopen: if private { [0; 3] } else { reopen_of(r.ds) },
            });
        }
        Ok(())
    })();
    // The copies made the parent's pages copy-on-write: mem lowered their mappings to
    // read-only, so they are read without a fault and mapped again on the next write.
    for &(a, l) in &lowered {
        rm::write_protected(a, l);
    }
    guest::forget_region();
    // A fork that fails takes its counts back.
    let unshare = |shared: &[u64]| {
        for &ds in shared {
            let _ = rm::share(ds, -1);
        }
    };
    if let Err(e) = made {
        unshare(&shared);
        caps.discard();
        return Err(e);
    }
    let mut st = file_state(&mut caps, false);
    let (fs_base, brk, name) = guest::fork_fields();
    st.fork = Some(handoff::ForkState {
        frame: words,
        fs_base,
        brk,
        name,
        regions,
        stack,
        child_tid: if flags & procs::CLONE_CHILD_SETTID != 0 {
            child_tid
        } else {
            0
        },
        signals: crate::signal_guest::fork_state(),
    });
    if let Err(e) = hand_off(&st, &mut caps, Some(MAX_INLINE_STATE)) {
        unshare(&shared);
        caps.discard();
        return Err(e);
    }
    let pid = match proc_client().and_then(|p| p.fork().map_err(proc_errno)) {
        Ok(pid) => pid,
        Err(e) => {
            unshare(&shared);
            caps.discard();
            return Err(e);
        }
    };
    caps.done();
    if flags & procs::CLONE_PARENT_SETTID != 0 && parent_tid != 0 {
        let _ = GuestUser.write(parent_tid, &pid.to_le_bytes());
    }
    if kind == CloneKind::Vfork {
        // The parent waits until the child runs a new program or ends. The child exists: as on
        // Linux, a signal does not end this wait (it stays pending, delivered when vfork
        // returns). Ending it with EINTR told the program vfork failed while its child ran on
        // (busybox `find -exec` printed "Interrupted system call" when a SIGCHLD of the child
        // before came in this wait).
        let p = proc_client()?;
        while !p.vfork_done(pid).unwrap_or(true) {
            crate::signal_guest::wait_wake(None);
        }
    }
    Ok(pid as u64)
}

/// Hands the descriptors, working directory and umask to proc for the image `execve` starts,
/// in `room` bytes of its environment if they fit ([`inline_room`]). On an error nothing is
/// left over.
pub fn exec_handoff(room: Option<usize>) -> Result<(), Errno> {
    match exec_handoff_once(room) {
        // Issue 16: as for `fork`, a descriptor whose file system restarted has an empty slot
        // until something reopens it; the registered files are reopened (only on this
        // failure) and the handoff made again.
        Err(_) if rm::revive_files() > 0 => exec_handoff_once(room),
        r => r,
    }
}

fn exec_handoff_once(room: Option<usize>) -> Result<(), Errno> {
    let mut caps = Caps::new();
    let st = file_state(&mut caps, true);
    match hand_off(&st, &mut caps, room) {
        Ok(()) => {
            // The state's dataspace (none if it went in messages) is the new image's to free;
            // if the exec fails it is proc's copy that goes, and ours is freed here.
            if caps.slots[0] != 0 {
                EXEC_STATE.get().replace(caps.slots[0]);
            }
            caps.made.retain(|&c| c != caps.slots[0]);
            caps.done();
            Ok(())
        }
        Err(e) => {
            caps.discard();
            Err(e)
        }
    }
}

/// The state dataspace of an `execve` under way (freed if the exec fails).
static EXEC_STATE: Single<Option<u64>> = Single(UnsafeCell::new(None));

/// The exec failed: its state is freed.
pub fn exec_failed() {
    if let Some(ds) = EXEC_STATE.get().take() {
        let _ = dataspace::Client::new(ds).free();
        free_slot(ds);
    }
}

/// `wait4(pid, wstatus, options, rusage)`.
pub fn wait4(pid: u64, wstatus: u64, options: u64, rusage: u64) -> SysResult {
    procs::wait4_options(options)?;
    let (child, status) = wait_for(pid as i32, options)?;
    if child != 0 {
        if wstatus != 0 {
            GuestUser.write(wstatus, &status.to_le_bytes())?;
        }
        if rusage != 0 {
            GuestUser.write(rusage, &[0u8; 144])?;
        }
    }
    Ok(child as u64)
}

/// `waitid(idtype, id, infop, options, rusage)`.
pub fn waitid(idtype: u64, id: u64, info: u64, options: u64, rusage: u64) -> SysResult {
    let target = procs::waitid_target(idtype, id, options)?;
    let (child, status) = wait_for(target, options)?;
    if info != 0 {
        let uid = guest::uid();
        GuestUser.write(info, &procs::waitid_info(child, status, uid))?;
    }
    if rusage != 0 {
        GuestUser.write(rusage, &[0u8; 144])?;
    }
    Ok(0)
}

/// Waits for a child matching `pid` (wait4's encoding) to end, or with `WUNTRACED` /
/// `WCONTINUED` in `options` to stop or continue: (its pid, wstatus), or (0, 0) with `WNOHANG`
/// if nothing happened yet.
fn wait_for(pid: i32, options: u64) -> Result<(u32, u32), Errno> {
    if pid == i32::MIN {
        return Err(errno::ESRCH);
    }
    let p = proc_client()?;
    let changes = (options & (procs::WUNTRACED | procs::WCONTINUED)) as u32;
    loop {
        let (child, kind, status) = if changes == 0 {
            let r = p.wait(pid).map_err(proc_errno)?;
            (r.child, r.kind, r.status)
        } else {
            let r = p.wait_change(pid, changes).map_err(proc_errno)?;
            (r.child, r.kind, r.status)
        };
        if kind != WaitKind::None {
            return Ok((child, status));
        }
        if options & procs::WNOHANG != 0 {
            return Ok((0, 0));
        }
        wait_wake()?;
    }
}

pub fn setpgid(pid: u64, pgid: u64) -> SysResult {
    if (pid as i64) < 0 || (pgid as i64) < 0 {
        return Err(errno::EINVAL);
    }
    proc_client()?
        .setpgid(pid as u32, pgid as u32)
        .map(|_| 0)
        .map_err(proc_errno)
}

pub fn getpgid(pid: u64) -> SysResult {
    if (pid as i64) < 0 {
        return Err(errno::ESRCH);
    }
    proc_client()?
        .getpgid(pid as u32)
        .map(|g| g as u64)
        .map_err(proc_errno)
}

pub fn setsid() -> SysResult {
    proc_client()?
        .setsid()
        .map(|s| s as u64)
        .map_err(proc_errno)
}

pub fn getsid(pid: u64) -> SysResult {
    if (pid as i64) < 0 {
        return Err(errno::ESRCH);
    }
    proc_client()?
        .getsid(pid as u32)
        .map(|s| s as u64)
        .map_err(proc_errno)
}

/// What the region manager would reopen dataspace `ds` by (a mapped file), for the child's
/// region (`handoff::Region::reopen`): [mount, inode, generation], inode 0 = nothing.
fn reopen_of(ds: u64) -> [u32; 3] {
    rm::reopen_of(ds).map_or([0; 3], |r| [r.mount, r.ino, r.generation])
}
