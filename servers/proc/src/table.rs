//! The process table: process ids, parent and children, credentials, state and exit status, and
//! the task behind each process. Built for what comes next (fork, wait, signals): a process that
//! ends stays as a zombie holding its status until it is reaped, its children go to init, and
//! every process has a serial number that is never reused (the badge of the kernel's messages
//! about its threads), so a late message about an ended process can never be taken for another
//! that got its pid.
//!
//! `T` is what the caller keeps per running process (its task and resources); the table hands it
//! back when the process ends.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

pub type Pid = u32;
/// The first process (Linux's init).
pub const INIT: Pid = 1;
/// Pids run below this (Linux's `PID_MAX_LIMIT` on 64-bit machines).
pub const PID_MAX: Pid = 4 * 1024 * 1024;
/// After wrapping, allocation starts again here (Linux's `RESERVED_PIDS`).
pub const PID_WRAP: Pid = 300;

/// Who a process acts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creds {
    pub uid: u32,
    pub gid: u32,
    pub euid: u32,
    pub egid: u32,
}

impl Creds {
    /// Real and effective ids both `uid` / `gid`.
    pub fn of(uid: u32, gid: u32) -> Creds {
        Creds {
            uid,
            gid,
            euid: uid,
            egid: gid,
        }
    }
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `exit_group(code)`: the low 8 bits of the code.
    Exited(u8),
    /// Ended by a signal's default action.
    Signaled(u32),
}

impl Status {
    /// The `wstatus` `wait4` reports (`WIFEXITED`: code << 8; `WIFSIGNALED`: the signal).
    pub fn wait_status(self) -> u32 {
        match self {
            Status::Exited(c) => (c as u32) << 8,
            // The signal, with the core-dump bit (0x80) if the default action dumped core.
            Status::Signaled(s) => s & 0xff,
        }
    }

    /// What a shell reports as the command's status (`$?`): the code, or 128 + signal.
    pub fn shell_status(self) -> u32 {
        match self {
            Status::Exited(c) => c as u32,
            Status::Signaled(s) => 128 + (s & 0x7f),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Running,
    /// Ended, its status kept until its parent reaps it.
    Zombie(Status),
}

#[derive(Debug)]
pub struct Process<T> {
    pub pid: Pid,
    /// 0 for a process without a parent (init).
    pub ppid: Pid,
    pub creds: Creds,
    pub state: State,
    pub children: Vec<Pid>,
    /// Its process group and session (Linux: inherited at fork, changed by `setpgid` and
    /// `setsid`).
    pub pgid: Pid,
    pub sid: Pid,
    /// Ran a new program since it was made (a parent's `setpgid` on it is then refused, and a
    /// `vfork` parent may go on).
    pub execed: bool,
    /// Never reused: names the process in the kernel's messages about its threads.
    pub serial: u64,
    /// The caller's data while the process runs.
    pub task: Option<T>,
    /// Signals sent to it that its library has not taken yet (kept across exec, as Linux).
    pub signals: crate::signal::Pending,
    /// Stopped or not, and the change its parent's `wait` has not seen yet (job control).
    pub job: crate::tty::Job,
    /// A zombie's program name (`comm`: /proc shows it after the task is gone, as Linux).
    pub comm: alloc::string::String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableError {
    /// As many processes as the table may hold, or no pid left.
    Full,
    /// No such process.
    NoProcess,
    /// The process has already ended (or, for `reap`, has not).
    WrongState,
    /// No child matches (`wait`).
    NoChild,
    /// Not allowed (`setpgid`, `setsid`: Linux's EPERM).
    NotPermitted,
    /// `setpgid` of a child that ran a new program (Linux's EACCES).
    Execed,
}

/// Which children a `wait` means (Linux `wait4`'s pid argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    Any,
    Pid(Pid),
    /// Members of this process group.
    Group(Pid),
}

impl WaitFor {
    /// Linux's encoding: > 0 a pid, -1 any, 0 the caller's group (`own_pgid`), < -1 group -pid.
    pub fn from_linux(pid: i32, own_pgid: Pid) -> WaitFor {
        match pid {
            -1 => WaitFor::Any,
            0 => WaitFor::Group(own_pgid),
            p if p > 0 => WaitFor::Pid(p as Pid),
            p => WaitFor::Group(p.unsigned_abs()),
        }
    }
}

pub struct Table<T> {
    procs: BTreeMap<Pid, Process<T>>,
    serials: BTreeMap<u64, Pid>,
    next_pid: Pid,
    next_serial: u64,
    limit: usize,
    /// Thread ids of Linux threads beyond each process's first (its pid), with the process
    /// they belong to: they come from the pid space, so no process gets one as its pid.
    tids: BTreeMap<Pid, Pid>,
}

/// Most thread ids one process may hold at once (its threads beyond the first).
pub const MAX_THREADS: usize = 1024;

impl<T> Table<T> {
    /// A table holding at most `limit` processes (running and zombies).
    pub fn new(limit: usize) -> Table<T> {
        Table {
            procs: BTreeMap::new(),
            serials: BTreeMap::new(),
            next_pid: INIT,
            next_serial: 1,
            limit,
            tids: BTreeMap::new(),
        }
    }

    /// A new running process, child of `parent` (None: no parent, like init): its pid and
    /// serial number. Pids count up and wrap to [`PID_WRAP`], skipping those in use.
    pub fn create(
        &mut self,
        parent: Option<Pid>,
        creds: Creds,
        task: T,
    ) -> Result<(Pid, u64), TableError> {
        if self.procs.len() >= self.limit {
            return Err(TableError::Full);
        }
        let (mut pgid, mut sid) = (0, 0);
        if let Some(pp) = parent {
            match self.procs.get(&pp) {
                Some(p) if p.state == State::Running => (pgid, sid) = (p.pgid, p.sid),
                Some(_) => return Err(TableError::WrongState),
                None => return Err(TableError::NoProcess),
            }
        }
        let pid = self.fresh_id()?;
        let serial = self.next_serial;
        self.next_serial += 1;
        if let Some(pp) = parent {
            if let Some(p) = self.procs.get_mut(&pp) {
                p.children.push(pid);
            }
        }
        self.procs.insert(
            pid,
            Process {
                pid,
                ppid: parent.unwrap_or(0),
                creds,
                state: State::Running,
                children: Vec::new(),
                // Without a parent it leads a session and group of its own.
                pgid: if parent.is_some() { pgid } else { pid },
                sid: if parent.is_some() { sid } else { pid },
                execed: false,
                serial,
                task: Some(task),
                signals: Default::default(),
                job: Default::default(),
                comm: Default::default(),
            },
        );
        self.serials.insert(serial, pid);
        Ok((pid, serial))
    }

    /// The next id of the pid space that is neither a process's pid nor a thread's id; pids
    /// count up and wrap to [`PID_WRAP`].
    fn fresh_id(&mut self) -> Result<Pid, TableError> {
        let mut pid = self.next_pid;
        let mut tries: u32 = 0;
        while self.procs.contains_key(&pid) || self.tids.contains_key(&pid) {
            pid = if pid + 1 >= PID_MAX {
                PID_WRAP
            } else {
                pid + 1
            };
            tries += 1;
            if tries >= PID_MAX {
                return Err(TableError::Full);
            }
        }
        self.next_pid = if pid + 1 >= PID_MAX {
            PID_WRAP
        } else {
            pid + 1
        };
        Ok(pid)
    }

    /// A thread id for a new thread of running process `pid` (Linux `clone` with
    /// `CLONE_THREAD`), from the pid space. Full past [`MAX_THREADS`] for the process.
    pub fn thread_new(&mut self, pid: Pid) -> Result<Pid, TableError> {
        match self.procs.get(&pid) {
            Some(p) if p.state == State::Running => {}
            Some(_) => return Err(TableError::WrongState),
            None => return Err(TableError::NoProcess),
        }
        if self.threads_of(pid) >= MAX_THREADS {
            return Err(TableError::Full);
        }
        let tid = self.fresh_id()?;
        self.tids.insert(tid, pid);
        Ok(tid)
    }

    /// Thread `tid` of process `pid` ended: its id is free again (NoProcess if it is not one
    /// of that process's).
    pub fn thread_end(&mut self, pid: Pid, tid: Pid) -> Result<(), TableError> {
        if self.tids.get(&tid) != Some(&pid) {
            return Err(TableError::NoProcess);
        }
        self.tids.remove(&tid);
        Ok(())
    }

    /// How many thread ids process `pid` holds (its threads beyond the first).
    pub fn threads_of(&self, pid: Pid) -> usize {
        self.tids.values().filter(|&&p| p == pid).count()
    }

    /// The process thread `tid` belongs to (its pid for the first thread).
    pub fn thread_owner(&self, tid: Pid) -> Option<Pid> {
        self.tids
            .get(&tid)
            .copied()
            .or_else(|| self.procs.contains_key(&tid).then_some(tid))
    }

    pub fn get(&self, pid: Pid) -> Option<&Process<T>> {
        self.procs.get(&pid)
    }

    pub fn get_mut(&mut self, pid: Pid) -> Option<&mut Process<T>> {
        self.procs.get_mut(&pid)
    }

    /// The process with serial number `serial`, if it is still in the table.
    pub fn by_serial(&self, serial: u64) -> Option<Pid> {
        self.serials.get(&serial).copied()
    }

    /// Processes in the table (running and zombies).
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// The pids in the table (running and zombies) greater than `after`, ascending (/proc).
    pub fn pids_after(&self, after: Pid) -> impl Iterator<Item = Pid> + '_ {
        self.procs
            .range(after.saturating_add(1)..)
            .map(|(&pid, _)| pid)
    }

    /// The pids of the running processes.
    pub fn running_pids(&self) -> Vec<Pid> {
        self.procs
            .values()
            .filter(|p| p.state == State::Running)
            .map(|p| p.pid)
            .collect()
    }

    /// Running processes.
    pub fn running(&self) -> usize {
        self.procs
            .values()
            .filter(|p| p.state == State::Running)
            .count()
    }

    /// Process `pid` is about to run a new program: a new serial number for the new task's
    /// threads (the old one stays valid until [`Table::finish_exec`] or [`Table::abort_exec`]).
    pub fn begin_exec(&mut self, pid: Pid) -> Result<u64, TableError> {
        match self.procs.get(&pid) {
            Some(p) if p.state == State::Running => {}
            Some(_) => return Err(TableError::WrongState),
            None => return Err(TableError::NoProcess),
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        self.serials.insert(serial, pid);
        Ok(serial)
    }

    /// The new program of `pid` runs under `serial` with `task`: the old task's data comes back
    /// (to be released), and messages under the old serial no longer name the process.
    pub fn finish_exec(&mut self, pid: Pid, serial: u64, task: T) -> Result<T, TableError> {
        if self.serials.get(&serial) != Some(&pid) {
            return Err(TableError::NoProcess);
        }
        let p = self.procs.get_mut(&pid).ok_or(TableError::NoProcess)?;
        if p.state != State::Running {
            return Err(TableError::WrongState);
        }
        // The old image's threads end with it (a new program starts with one thread).
        self.tids.retain(|_, owner| *owner != pid);
        let p = self.procs.get_mut(&pid).ok_or(TableError::NoProcess)?;
        let old = p.task.replace(task).ok_or(TableError::WrongState)?;
        p.execed = true;
        let old_serial = core::mem::replace(&mut p.serial, serial);
        self.serials.remove(&old_serial);
        Ok(old)
    }

    /// The exec begun under `serial` failed: the serial is forgotten, the process unchanged.
    pub fn abort_exec(&mut self, serial: u64) {
        if let Some(pid) = self.serials.get(&serial) {
            if self.procs.get(pid).is_some_and(|p| p.serial != serial) {
                self.serials.remove(&serial);
            }
        }
    }

    /// Process `pid` ended with `status`: it becomes a zombie, its children become init's (or
    /// parentless if it is init), and the caller gets back its data to release the task.
    pub fn end(&mut self, pid: Pid, status: Status) -> Result<T, TableError> {
        let p = self.procs.get_mut(&pid).ok_or(TableError::NoProcess)?;
        if p.state != State::Running {
            return Err(TableError::WrongState);
        }
        p.state = State::Zombie(status);
        let task = p.task.take().ok_or(TableError::WrongState)?;
        // Its threads ended with it.
        self.tids.retain(|_, owner| *owner != pid);
        let p = self.procs.get_mut(&pid).ok_or(TableError::NoProcess)?;
        let orphans = core::mem::take(&mut p.children);
        let heir = if pid != INIT && self.procs.contains_key(&INIT) {
            INIT
        } else {
            0
        };
        for c in &orphans {
            if let Some(cp) = self.procs.get_mut(c) {
                cp.ppid = heir;
            }
        }
        if heir != 0 {
            if let Some(init) = self.procs.get_mut(&INIT) {
                init.children.extend(orphans);
            }
        }
        Ok(task)
    }

    /// The first ended child of `parent` that `which` matches, reaped: `Ok(Some((pid,
    /// status)))`; `Ok(None)` if children match but none has ended; `NoChild` if none matches.
    pub fn wait(
        &mut self,
        parent: Pid,
        which: WaitFor,
    ) -> Result<Option<(Pid, Status)>, TableError> {
        let p = self.procs.get(&parent).ok_or(TableError::NoProcess)?;
        let mut matched = false;
        let mut ended = None;
        for &c in &p.children {
            let Some(cp) = self.procs.get(&c) else {
                continue;
            };
            let hit = match which {
                WaitFor::Any => true,
                WaitFor::Pid(x) => c == x,
                WaitFor::Group(g) => cp.pgid == g,
            };
            if !hit {
                continue;
            }
            matched = true;
            if let State::Zombie(st) = cp.state {
                ended = Some((c, st));
                break;
            }
        }
        match ended {
            Some((c, st)) => {
                self.reap(c)?;
                Ok(Some((c, st)))
            }
            None if matched => Ok(None),
            None => Err(TableError::NoChild),
        }
    }

    /// Linux `setpgid(pid, pgid)` by `caller` (0 for either means the caller / the pid).
    pub fn setpgid(&mut self, caller: Pid, pid: Pid, pgid: Pid) -> Result<(), TableError> {
        let pid = if pid == 0 { caller } else { pid };
        let pgid = if pgid == 0 { pid } else { pgid };
        let c = self.procs.get(&caller).ok_or(TableError::NoProcess)?;
        let (csid, cchildren) = (c.sid, c.children.contains(&pid));
        if pid != caller && !cchildren {
            return Err(TableError::NoProcess);
        }
        let t = self.procs.get(&pid).ok_or(TableError::NoProcess)?;
        if t.state != State::Running {
            return Err(TableError::NoProcess);
        }
        if pid != caller && t.sid != csid {
            return Err(TableError::NotPermitted);
        }
        if pid != caller && t.execed {
            return Err(TableError::Execed);
        }
        // A session leader stays in its group.
        if t.sid == pid {
            return Err(TableError::NotPermitted);
        }
        // Joining a group: it must exist in the same session.
        if pgid != pid
            && !self
                .procs
                .values()
                .any(|q| q.pgid == pgid && q.sid == csid && q.state == State::Running)
        {
            return Err(TableError::NotPermitted);
        }
        if let Some(t) = self.procs.get_mut(&pid) {
            t.pgid = pgid;
        }
        Ok(())
    }

    /// Linux `setsid()` by `caller`: it leads a new session and group (refused for a group
    /// leader): the session id.
    pub fn setsid(&mut self, caller: Pid) -> Result<Pid, TableError> {
        if self
            .procs
            .values()
            .any(|q| q.pgid == caller && q.state == State::Running)
        {
            return Err(TableError::NotPermitted);
        }
        let c = self.procs.get_mut(&caller).ok_or(TableError::NoProcess)?;
        c.pgid = caller;
        c.sid = caller;
        Ok(caller)
    }

    /// Removes zombie `pid` from the table: its status.
    pub fn reap(&mut self, pid: Pid) -> Result<Status, TableError> {
        let p = self.procs.get(&pid).ok_or(TableError::NoProcess)?;
        let State::Zombie(status) = p.state else {
            return Err(TableError::WrongState);
        };
        let (ppid, serial) = (p.ppid, p.serial);
        self.procs.remove(&pid);
        self.serials.remove(&serial);
        if let Some(parent) = self.procs.get_mut(&ppid) {
            parent.children.retain(|&c| c != pid);
        }
        Ok(status)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn wait_status_of_a_core_dump() {
        // The signal with the core bit (0x80) as proc.killed records it; the shell sees
        // 128 + the signal.
        assert_eq!(Status::Signaled(11 | 0x80).wait_status(), 0x8b);
        assert_eq!(Status::Signaled(11 | 0x80).shell_status(), 139);
        assert_eq!(Status::Signaled(15).wait_status(), 15);
    }
    use super::*;

    fn root() -> Creds {
        Creds::of(0, 0)
    }

    #[test]
    fn create_end_reap() {
        let mut t: Table<&str> = Table::new(8);
        let (init, s1) = t.create(None, root(), "init").unwrap();
        assert_eq!(init, INIT);
        let (a, s2) = t.create(Some(init), Creds::of(1000, 100), "a").unwrap();
        assert_eq!(a, 2);
        assert_ne!(s1, s2);
        assert_eq!(t.by_serial(s2), Some(a));
        assert_eq!(t.get(a).unwrap().ppid, init);
        assert_eq!(t.get(a).unwrap().creds.euid, 1000);
        assert_eq!(t.get(init).unwrap().children, vec![a]);
        assert_eq!(t.running(), 2);
        assert_eq!(t.running_pids(), vec![init, a]);
        assert_eq!(t.end(a, Status::Exited(3)), Ok("a"));
        // Ending twice, or reaping a running process, is refused.
        assert_eq!(t.end(a, Status::Exited(3)), Err(TableError::WrongState));
        assert_eq!(t.reap(init), Err(TableError::WrongState));
        assert_eq!(t.get(a).unwrap().state, State::Zombie(Status::Exited(3)));
        assert_eq!(t.running(), 1);
        assert_eq!(t.reap(a), Ok(Status::Exited(3)));
        assert_eq!(t.by_serial(s2), None);
        assert!(t.get(init).unwrap().children.is_empty());
        assert_eq!(t.reap(a), Err(TableError::NoProcess));
        // A new process gets a new pid and serial.
        let (b, s3) = t.create(Some(init), root(), "b").unwrap();
        assert_eq!(b, 3);
        assert!(s3 > s2);
    }

    #[test]
    fn orphans_go_to_init() {
        let mut t: Table<u8> = Table::new(8);
        let (init, _) = t.create(None, root(), 0).unwrap();
        let (p, _) = t.create(Some(init), root(), 1).unwrap();
        let (c1, _) = t.create(Some(p), root(), 2).unwrap();
        let (c2, _) = t.create(Some(p), root(), 3).unwrap();
        t.end(p, Status::Signaled(9)).unwrap();
        assert_eq!(t.get(c1).unwrap().ppid, init);
        assert_eq!(t.get(c2).unwrap().ppid, init);
        assert_eq!(t.get(init).unwrap().children, vec![p, c1, c2]);
        assert!(t.get(p).unwrap().children.is_empty());
        // A child of an ended process cannot be made.
        assert_eq!(
            t.create(Some(p), root(), 9).err(),
            Some(TableError::WrongState)
        );
        assert_eq!(
            t.create(Some(77), root(), 9).err(),
            Some(TableError::NoProcess)
        );
        // When init ends, its children have no parent.
        t.end(init, Status::Exited(0)).unwrap();
        assert_eq!(t.get(c1).unwrap().ppid, 0);
    }

    #[test]
    fn thread_ids_come_from_the_pid_space() {
        let mut t: Table<()> = Table::new(8);
        let (init, _) = t.create(None, root(), ()).unwrap();
        let tid = t.thread_new(init).unwrap();
        assert_ne!(tid, init);
        assert_eq!(t.thread_owner(tid), Some(init));
        assert_eq!(t.thread_owner(init), Some(init));
        // A new process never gets a live thread's id.
        t.next_pid = tid;
        let (p, _) = t.create(Some(init), root(), ()).unwrap();
        assert_ne!(p, tid);
        assert_eq!(t.threads_of(init), 1);
        // Only the owner frees it.
        assert_eq!(t.thread_end(p, tid), Err(TableError::NoProcess));
        t.thread_end(init, tid).unwrap();
        assert_eq!(t.thread_owner(tid), None);
        // A process's thread ids go when it ends.
        let a = t.thread_new(p).unwrap();
        let b = t.thread_new(p).unwrap();
        t.end(p, Status::Exited(0)).unwrap();
        assert_eq!(t.thread_owner(a), None);
        assert_eq!(t.thread_owner(b), None);
        assert_eq!(t.thread_new(p), Err(TableError::WrongState));
    }

    #[test]
    fn pids_wrap_and_skip_those_in_use() {
        let mut t: Table<()> = Table::new(4);
        let (init, _) = t.create(None, root(), ()).unwrap();
        t.next_pid = PID_MAX - 1;
        let (a, _) = t.create(Some(init), root(), ()).unwrap();
        assert_eq!(a, PID_MAX - 1);
        let (b, _) = t.create(Some(init), root(), ()).unwrap();
        assert_eq!(b, PID_WRAP);
        t.next_pid = PID_WRAP;
        let (c, _) = t.create(Some(init), root(), ()).unwrap();
        assert_eq!(c, PID_WRAP + 1);
        // The table is full.
        assert_eq!(
            t.create(Some(init), root(), ()).err(),
            Some(TableError::Full)
        );
        t.end(c, Status::Exited(0)).unwrap();
        // A zombie still holds its slot and pid.
        assert_eq!(
            t.create(Some(init), root(), ()).err(),
            Some(TableError::Full)
        );
        t.reap(c).unwrap();
        assert!(t.create(Some(init), root(), ()).is_ok());
    }

    #[test]
    fn exec_keeps_the_pid_and_changes_the_serial() {
        let mut t: Table<&str> = Table::new(4);
        let (init, s1) = t.create(None, root(), "old").unwrap();
        let s2 = t.begin_exec(init).unwrap();
        // Both serials name it while the new image is built.
        assert_eq!((t.by_serial(s1), t.by_serial(s2)), (Some(init), Some(init)));
        assert_eq!(t.finish_exec(init, s2, "new"), Ok("old"));
        assert_eq!((t.by_serial(s1), t.by_serial(s2)), (None, Some(init)));
        assert_eq!(t.get(init).unwrap().serial, s2);
        // A failed exec changes nothing.
        let s3 = t.begin_exec(init).unwrap();
        t.abort_exec(s3);
        assert_eq!(t.by_serial(s3), None);
        assert_eq!(t.by_serial(s2), Some(init));
        t.abort_exec(s2); // Not an exec in progress: kept.
        assert_eq!(t.by_serial(s2), Some(init));
        assert_eq!(t.finish_exec(init, s3, "x"), Err(TableError::NoProcess));
        t.end(init, Status::Exited(0)).unwrap();
        assert_eq!(t.begin_exec(init), Err(TableError::WrongState));
        assert_eq!(t.begin_exec(9), Err(TableError::NoProcess));
    }

    #[test]
    fn wait_reaps_the_matching_ended_child() {
        let mut t: Table<u8> = Table::new(8);
        let (init, _) = t.create(None, root(), 0).unwrap();
        assert_eq!(t.wait(init, WaitFor::Any), Err(TableError::NoChild));
        let (a, _) = t.create(Some(init), root(), 1).unwrap();
        let (b, _) = t.create(Some(init), root(), 2).unwrap();
        assert_eq!(t.wait(init, WaitFor::Any), Ok(None));
        t.end(b, Status::Exited(4)).unwrap();
        assert_eq!(t.wait(init, WaitFor::Pid(a)), Ok(None));
        assert_eq!(t.wait(init, WaitFor::Pid(99)), Err(TableError::NoChild));
        assert_eq!(t.wait(init, WaitFor::Any), Ok(Some((b, Status::Exited(4)))));
        assert!(t.get(b).is_none());
        t.setpgid(init, a, 0).unwrap();
        assert_eq!(t.wait(init, WaitFor::Group(init)), Err(TableError::NoChild));
        t.end(a, Status::Signaled(9)).unwrap();
        assert_eq!(
            t.wait(init, WaitFor::from_linux(-(a as i32), 1)),
            Ok(Some((a, Status::Signaled(9))))
        );
        assert_eq!(WaitFor::from_linux(0, 7), WaitFor::Group(7));
        assert_eq!(WaitFor::from_linux(-1, 7), WaitFor::Any);
        assert_eq!(WaitFor::from_linux(5, 7), WaitFor::Pid(5));
    }

    #[test]
    fn groups_and_sessions_as_linux() {
        let mut t: Table<u8> = Table::new(8);
        let (init, _) = t.create(None, root(), 0).unwrap();
        assert_eq!(
            (t.get(init).unwrap().pgid, t.get(init).unwrap().sid),
            (1, 1)
        );
        let (a, _) = t.create(Some(init), root(), 1).unwrap();
        let (b, _) = t.create(Some(a), root(), 2).unwrap();
        assert_eq!((t.get(b).unwrap().pgid, t.get(b).unwrap().sid), (1, 1));
        // init leads its session: it cannot leave its group, nor start a session.
        assert_eq!(t.setpgid(init, 0, 0), Err(TableError::NotPermitted));
        assert_eq!(t.setsid(init), Err(TableError::NotPermitted));
        // Not a child of the caller.
        assert_eq!(t.setpgid(init, b, 0), Err(TableError::NoProcess));
        // A new group led by a, and b joins it from a.
        t.setpgid(a, 0, 0).unwrap();
        t.setpgid(a, b, a).unwrap();
        assert_eq!(t.get(b).unwrap().pgid, a);
        // A group that does not exist.
        assert_eq!(t.setpgid(a, b, 77), Err(TableError::NotPermitted));
        // a leads a group: no setsid; b may.
        assert_eq!(t.setsid(a), Err(TableError::NotPermitted));
        assert_eq!(t.setsid(b), Ok(b));
        assert_eq!((t.get(b).unwrap().pgid, t.get(b).unwrap().sid), (b, b));
        // Now in another session: a cannot move it.
        assert_eq!(t.setpgid(a, b, a), Err(TableError::NotPermitted));
        // After exec a parent cannot change the child's group.
        let (c, _) = t.create(Some(a), root(), 3).unwrap();
        let s = t.begin_exec(c).unwrap();
        t.finish_exec(c, s, 4).unwrap();
        assert_eq!(t.setpgid(a, c, a), Err(TableError::Execed));
    }

    #[test]
    fn statuses() {
        assert_eq!(Status::Exited(7).wait_status(), 0x700);
        assert_eq!(Status::Signaled(11).wait_status(), 11);
        assert_eq!(Status::Exited(7).shell_status(), 7);
        assert_eq!(Status::Signaled(11).shell_status(), 139);
    }
}
