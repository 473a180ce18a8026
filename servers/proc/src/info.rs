//! What proc tells /proc about its processes (interface `proc_info`, methods 50..59 of
//! interfaces/proc.idl; served to `servers/procfs`): the facts proc keeps per process beyond the
//! table (its `argv`, its program's path, when it started) and the answers built from the table.
//! Host-tested; the guest glue in `server.rs` only calls these.
//!
//! It touches nothing but the table it is given.

use alloc::string::String;
use alloc::vec::Vec;

use crate::table::{Pid, Process, State, Status, Table};

/// Most pids one `pids` answer carries (its `bytes<480>`, four bytes each).
pub const PIDS_PER_CALL: usize = 120;

/// What proc keeps per running process for /proc, set when a program starts (first start or
/// `execve`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Its `argv`.
    pub argv: Vec<String>,
    /// Its program's absolute path (`/proc/PID/exe`).
    pub exe: String,
    /// The kernel's timer ticks when it started (100 a second: Linux's `USER_HZ`).
    pub started: u64,
}

impl Facts {
    pub fn new(argv: &[String], exe: &str, started: u64) -> Facts {
        Facts {
            argv: argv.to_vec(),
            exe: String::from(exe),
            started,
        }
    }

    /// The program's name as Linux's `comm`: the last component of its path, at most 15 bytes.
    pub fn name(&self) -> &str {
        let last = self.exe.rsplit('/').next().unwrap_or("");
        let mut n = last.len().min(15);
        while !last.is_char_boundary(n) {
            n -= 1;
        }
        &last[..n]
    }

    /// `/proc/PID/cmdline`: every `argv` string followed by a NUL.
    pub fn cmdline(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for a in &self.argv {
            out.extend_from_slice(a.as_bytes());
            out.push(0);
        }
        out
    }
}

/// What proc keeps per running process, as far as /proc is concerned.
pub trait Known {
    fn facts(&self) -> &Facts;
}

/// `pids`: up to [`PIDS_PER_CALL`] pids in the table (running and zombies) greater than `after`,
/// ascending, as little-endian u32s.
pub fn pids_after<T>(t: &Table<T>, after: Pid) -> Vec<u8> {
    let mut out = Vec::with_capacity(PIDS_PER_CALL * 4);
    for pid in t.pids_after(after).take(PIDS_PER_CALL) {
        out.extend_from_slice(&pid.to_le_bytes());
    }
    out
}

/// A process's run state as /proc shows it (Linux's letters R, S, T, Z).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Running,
    /// Its program's thread waits (for a child, input, a signal, time).
    Sleeping,
    /// Stopped by a stop signal (job control) until a SIGCONT.
    Stopped,
    Zombie,
}

/// One process as `status` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub state: RunState,
    pub ppid: Pid,
    pub pgid: Pid,
    pub sid: Pid,
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
    pub started: u64,
    /// The `wait` status of a zombie (0 while it runs).
    pub exit: u32,
    pub name: String,
}

/// `status`: process `pid`, or None if it is not in the table. `sleeping`: its library says its
/// program's thread waits now (the process information page).
pub fn info<T: Known>(t: &Table<T>, pid: Pid, sleeping: bool) -> Option<Info> {
    let p: &Process<T> = t.get(pid)?;
    let facts = p.task.as_ref().map(|r| r.facts());
    Some(Info {
        state: match p.state {
            State::Zombie(_) => RunState::Zombie,
            State::Running if p.job.stopped => RunState::Stopped,
            State::Running if sleeping => RunState::Sleeping,
            State::Running => RunState::Running,
        },
        ppid: p.ppid,
        pgid: p.pgid,
        sid: p.sid,
        uid: p.creds.uid,
        euid: p.creds.euid,
        gid: p.creds.gid,
        egid: p.creds.egid,
        started: facts.map_or(0, |f| f.started),
        exit: match p.state {
            State::Zombie(s) => Status::wait_status(s),
            State::Running => 0,
        },
        name: String::from(facts.map_or(p.comm.as_str(), |f| f.name())),
    })
}

/// At most `max` bytes of `data` from byte `off` (empty past the end).
pub fn window(data: &[u8], off: u32, max: usize) -> &[u8] {
    let start = (off as usize).min(data.len());
    &data[start..(start + max).min(data.len())]
}

/// `cmdline`: process `pid`'s `argv` from byte `off` (empty for a zombie, as on Linux).
pub fn cmdline<T: Known>(t: &Table<T>, pid: Pid, off: u32, max: usize) -> Option<Vec<u8>> {
    let p = t.get(pid)?;
    Some(match &p.task {
        Some(r) => window(&r.facts().cmdline(), off, max).to_vec(),
        None => Vec::new(),
    })
}

/// `exe`: process `pid`'s program path from byte `off` (empty for a zombie).
pub fn exe<T: Known>(t: &Table<T>, pid: Pid, off: u32, max: usize) -> Option<Vec<u8>> {
    let p = t.get(pid)?;
    Some(match &p.task {
        Some(r) => window(r.facts().exe.as_bytes(), off, max).to_vec(),
        None => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{Creds, INIT};
    use alloc::vec;

    impl Known for Facts {
        fn facts(&self) -> &Facts {
            self
        }
    }

    fn facts(argv: &[&str], exe: &str, started: u64) -> Facts {
        let argv: Vec<String> = argv.iter().map(|s| String::from(*s)).collect();
        Facts::new(&argv, exe, started)
    }

    #[test]
    fn names_and_cmdlines_as_linux() {
        let f = facts(&["ls", "-l", ""], "/bin/ls", 7);
        assert_eq!(f.name(), "ls");
        assert_eq!(f.cmdline(), b"ls\0-l\0\0");
        // comm keeps 15 bytes (TASK_COMM_LEN - 1).
        let long = facts(&["x"], "/usr/bin/a-very-long-program-name", 0);
        assert_eq!(long.name(), "a-very-long-pro");
    }

    #[test]
    fn pids_come_in_pages() {
        let mut t: Table<Facts> = Table::new(300);
        let (init, _) = t.create(None, Creds::of(0, 0), Facts::default()).unwrap();
        for _ in 0..130 {
            t.create(Some(init), Creds::of(0, 0), Facts::default())
                .unwrap();
        }
        let first = pids_after(&t, 0);
        assert_eq!(first.len(), PIDS_PER_CALL * 4);
        assert_eq!(&first[..8], &[1, 0, 0, 0, 2, 0, 0, 0]);
        let last = u32::from_le_bytes(first[first.len() - 4..].try_into().unwrap());
        assert_eq!(last, 120);
        let rest = pids_after(&t, last);
        assert_eq!(rest.len(), 11 * 4);
        assert!(pids_after(&t, 131).is_empty());
    }

    #[test]
    fn info_of_running_and_zombie() {
        let mut t: Table<Facts> = Table::new(8);
        let (init, _) = t
            .create(None, Creds::of(0, 0), facts(&["sh"], "/bin/sh", 3))
            .unwrap();
        let (a, _) = t
            .create(
                Some(init),
                Creds::of(1000, 100),
                facts(&["cat", "/etc/motd"], "/bin/cat", 40),
            )
            .unwrap();
        let i = info(&t, a, false).unwrap();
        assert_eq!(
            i,
            Info {
                state: RunState::Running,
                ppid: INIT,
                pgid: INIT,
                sid: INIT,
                uid: 1000,
                euid: 1000,
                gid: 100,
                egid: 100,
                started: 40,
                exit: 0,
                name: String::from("cat"),
            }
        );
        assert_eq!(cmdline(&t, a, 0, 480).unwrap(), b"cat\0/etc/motd\0");
        assert_eq!(cmdline(&t, a, 4, 3).unwrap(), b"/et");
        assert_eq!(cmdline(&t, a, 99, 480).unwrap(), b"");
        assert_eq!(exe(&t, a, 0, 400).unwrap(), b"/bin/cat");
        assert_eq!(info(&t, a, true).unwrap().state, RunState::Sleeping);
        // Stopped shows as such, sleeping or not.
        assert!(crate::tty::stop(&mut t, a, 19));
        assert_eq!(info(&t, a, true).unwrap().state, RunState::Stopped);
        t.end(a, Status::Exited(2)).unwrap();
        let z = info(&t, a, true).unwrap();
        assert_eq!(z.state, RunState::Zombie);
        assert_eq!(z.exit, 0x200);
        assert_eq!(cmdline(&t, a, 0, 480).unwrap(), vec![0u8; 0]);
        assert_eq!(info(&t, 77, false), None);
        assert_eq!(exe(&t, 77, 0, 400), None);
    }
}
