//! The terminal and job control as proc keeps them (DESIGN §9: the process server owns sessions
//! and the controlling terminal): which session the one terminal (the console) belongs to and
//! its foreground process group, Linux's rules for `TIOCSCTTY`, `TIOCNOTTY`, `TIOCGPGRP`,
//! `TIOCSPGRP`, `TIOCGSID` and for a background group that reads the terminal or changes it
//! (SIGTTIN, SIGTTOU), and each process's stop state with the change its parent's `wait` has
//! not seen yet (WUNTRACED, WCONTINUED).
//!
//! Orphaned process groups (POSIX; Linux's `will_become_orphaned_pgrp`, `kill_orphaned_pgrp`):
//! a group is orphaned when no member has a parent in another group of the same session (no
//! shell left to continue its stopped jobs). When an exit orphans a group with a stopped
//! member, every member gets SIGHUP then SIGCONT ([`newly_orphaned`]); a process of an
//! orphaned group is not stopped by SIGTSTP, SIGTTIN or SIGTTOU, and its background terminal
//! access is EIO instead of a stop. One difference from Linux: a parent that is init counts
//! as a link like any other (Linux ignores init there), because here init is the login shell,
//! whose jobs must stop and continue.
//!
//! Plain data over the process table: it touches nothing else; the server sends the signals
//! the answers name.

use crate::signal::{SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU};
use crate::table::{Pid, State, Table, TableError, WaitFor, PID_MAX};

/// `wait4`'s options proc looks at (Linux's values).
pub const WUNTRACED: u32 = 2;
pub const WCONTINUED: u32 = 8;

/// Whether `sig` stops a process by default.
pub fn is_stop(sig: u32) -> bool {
    matches!(sig, SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU)
}

/// A change of a child's run state its parent has not been told of by `wait`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Stopped by this signal.
    Stopped(u32),
    Continued,
}

impl Change {
    /// The `wstatus` `wait4` reports: WIFSTOPPED (0x7f, the signal above it), WIFCONTINUED.
    pub fn wait_status(self) -> u32 {
        match self {
            Change::Stopped(sig) => 0x7f | (sig & 0xff) << 8,
            Change::Continued => 0xffff,
        }
    }

    /// SIGCHLD's `si_code` (CLD_STOPPED, CLD_CONTINUED) and `si_status`.
    pub fn sigchld(self) -> (i32, i32) {
        match self {
            Change::Stopped(sig) => (5, sig as i32),
            Change::Continued => (6, SIGCONT as i32),
        }
    }
}

/// One process's job-control state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Job {
    pub stopped: bool,
    /// The last change, until the parent's `wait` reports it.
    pub report: Option<Change>,
}

/// Why a terminal call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtyError {
    /// The terminal is not the caller's controlling terminal (ENOTTY).
    NotTty,
    /// EPERM.
    NotPermitted,
    /// ESRCH: no such process group.
    NoGroup,
    /// EINVAL.
    Invalid,
    /// The caller is in a background group: its group is to get this signal, and the call is
    /// restarted after it (ERESTARTSYS).
    Background(u32),
    /// EIO: a background read that ignores or blocks SIGTTIN.
    Io,
}

/// Who calls: the facts of the caller's table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub pid: Pid,
    pub pgid: Pid,
    pub sid: Pid,
    /// Effective uid 0 (Linux's CAP_SYS_ADMIN, which `TIOCSCTTY`'s steal needs).
    pub root: bool,
}

impl Caller {
    pub fn of<T>(table: &Table<T>, pid: Pid) -> Option<Caller> {
        table.get(pid).map(|p| Caller {
            pid,
            pgid: p.pgid,
            sid: p.sid,
            root: p.creds.euid == 0,
        })
    }
}

/// The terminal: the session it is the controlling terminal of (0: none) and that session's
/// foreground process group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Terminal {
    pub session: Pid,
    pub fg: Pid,
}

impl Terminal {
    /// Whether it is `c`'s controlling terminal.
    fn is_ctty_of(&self, c: &Caller) -> bool {
        self.session != 0 && self.session == c.sid
    }

    /// Linux `TIOCSCTTY(steal)`: only a session leader; a terminal held by another session
    /// only with `steal` by root.
    pub fn set_ctty(&mut self, c: &Caller, steal: bool) -> Result<(), TtyError> {
        if c.pid != c.sid {
            return Err(TtyError::NotPermitted);
        }
        if self.session == c.sid {
            return Ok(());
        }
        if self.session != 0 && !(steal && c.root) {
            return Err(TtyError::NotPermitted);
        }
        self.session = c.sid;
        self.fg = c.pgid;
        Ok(())
    }

    /// Linux `TIOCNOTTY`: for a session leader the terminal leaves the session, whose
    /// foreground group (returned) is to get SIGHUP and SIGCONT; another member keeps it
    /// (proc keeps the terminal per session, not per process).
    pub fn drop_ctty(&mut self, c: &Caller) -> Result<Option<Pid>, TtyError> {
        if !self.is_ctty_of(c) {
            return Err(TtyError::NotTty);
        }
        if c.pid != c.sid {
            return Ok(None);
        }
        let fg = self.fg;
        *self = Terminal::default();
        Ok(Some(fg))
    }

    /// Linux `TIOCGPGRP`, `TIOCGSID`: (foreground group, session).
    pub fn get(&self, c: &Caller) -> Result<(Pid, Pid), TtyError> {
        if !self.is_ctty_of(c) {
            return Err(TtyError::NotTty);
        }
        Ok((self.fg, self.session))
    }

    /// Linux `TIOCSPGRP(pgrp)`: `group_session` is the session of group `pgrp` (None: no
    /// such group); `ttou_ok`: the caller ignores or blocks SIGTTOU.
    pub fn set_pgrp(
        &mut self,
        c: &Caller,
        pgrp: Pid,
        ttou_ok: bool,
        group_session: Option<Pid>,
    ) -> Result<(), TtyError> {
        if !self.is_ctty_of(c) {
            return Err(TtyError::NotTty);
        }
        if c.pgid != self.fg && !ttou_ok {
            return Err(TtyError::Background(SIGTTOU));
        }
        if pgrp >= PID_MAX {
            return Err(TtyError::Invalid);
        }
        match group_session {
            None => Err(TtyError::NoGroup),
            Some(s) if s != c.sid => Err(TtyError::NotPermitted),
            Some(_) => {
                self.fg = pgrp;
                Ok(())
            }
        }
    }

    /// Before a read (`sig` SIGTTIN) or a change of the settings or a write under `TOSTOP`
    /// (`sig` SIGTTOU) by `c`; `ignored`: the caller ignores or blocks `sig`; `orphaned`: the
    /// caller's group is orphaned (no one would continue it: EIO instead of the stop).
    pub fn check(
        &self,
        c: &Caller,
        sig: u32,
        ignored: bool,
        orphaned: bool,
    ) -> Result<(), TtyError> {
        if !self.is_ctty_of(c) || c.pgid == self.fg {
            return Ok(());
        }
        match (ignored, sig) {
            (true, SIGTTIN) => Err(TtyError::Io),
            (true, _) => Ok(()),
            (false, _) if orphaned => Err(TtyError::Io),
            (false, s) => Err(TtyError::Background(s)),
        }
    }

    /// Process `pid` ended: if it led the terminal's session, the terminal is free again and
    /// its foreground group (returned) is to get SIGHUP (Linux's `disassociate_ctty`).
    pub fn leader_ended(&mut self, pid: Pid) -> Option<Pid> {
        if self.session == 0 || self.session != pid {
            return None;
        }
        let fg = self.fg;
        *self = Terminal::default();
        Some(fg)
    }
}

/// The session of process group `pgrp` (None if no running process is in it).
pub fn session_of_group<T>(table: &Table<T>, pgrp: Pid) -> Option<Pid> {
    table
        .running_pids()
        .into_iter()
        .filter_map(|p| table.get(p))
        .find(|p| p.pgid == pgrp)
        .map(|p| p.sid)
}

/// Whether process group `pgrp` is orphaned, not counting process `ignoring` (one that is
/// ending): no running member has a parent in another group of its session.
pub fn orphaned<T>(table: &Table<T>, pgrp: Pid, ignoring: Option<Pid>) -> bool {
    !table.running_pids().into_iter().any(|m| {
        if Some(m) == ignoring {
            return false;
        }
        let Some(p) = table.get(m) else {
            return false;
        };
        if p.pgid != pgrp {
            return false;
        }
        table
            .get(p.ppid)
            .is_some_and(|q| Some(q.pid) != ignoring && q.pgid != pgrp && q.sid == p.sid)
    })
}

/// Whether a running member of `pgrp` is stopped.
pub fn has_stopped<T>(table: &Table<T>, pgrp: Pid) -> bool {
    table
        .running_pids()
        .into_iter()
        .filter_map(|m| table.get(m))
        .any(|p| p.pgid == pgrp && p.job.stopped)
}

/// Running process `pid` is about to end: the groups its end orphans that have a stopped
/// member (each to get SIGHUP then SIGCONT). Its own group, if it was that group's link to
/// its parent's group; and its children's groups (other groups of its session), if it was
/// theirs. Call before the table ends it.
pub fn newly_orphaned<T>(table: &Table<T>, pid: Pid) -> alloc::vec::Vec<Pid> {
    let mut out = alloc::vec::Vec::new();
    let Some(p) = table.get(pid) else {
        return out;
    };
    let (pgid, sid) = (p.pgid, p.sid);
    let consider = |g: Pid, out: &mut alloc::vec::Vec<Pid>| {
        if !out.contains(&g) && orphaned(table, g, Some(pid)) && has_stopped(table, g) {
            out.push(g);
        }
    };
    if let Some(parent) = table.get(p.ppid) {
        if parent.pgid != pgid && parent.sid == sid {
            consider(pgid, &mut out);
        }
    }
    for &c in &p.children {
        let Some(cp) = table.get(c) else {
            continue;
        };
        if cp.state == State::Running && cp.pgid != pgid && cp.sid == sid {
            consider(cp.pgid, &mut out);
        }
    }
    out
}

/// Process `pid` stops by `sig` (its library carries out the default action): false if a
/// SIGCONT is already waiting for it (then it goes on; the SIGCONT is taken as usual), or if
/// `sig` is a terminal stop signal (not SIGSTOP) and its group is orphaned (Linux discards
/// the stop then).
pub fn stop<T>(table: &mut Table<T>, pid: Pid, sig: u32) -> bool {
    let Some(p) = table.get(pid) else {
        return false;
    };
    if sig != SIGSTOP && orphaned(table, p.pgid, None) {
        return false;
    }
    let Some(p) = table.get_mut(pid) else {
        return false;
    };
    if p.state != State::Running || p.signals.has(SIGCONT) {
        return false;
    }
    p.job = Job {
        stopped: true,
        report: Some(Change::Stopped(sig)),
    };
    true
}

/// A signal `sig` is sent to running process `pid`: a SIGCONT discards the stop signals waiting
/// and continues a stopped process (true: it was stopped, its parent is to be told and the
/// process woken with `WAKE_CONT`); a stop signal discards a waiting SIGCONT.
pub fn on_send<T>(table: &mut Table<T>, pid: Pid, sig: u32) -> bool {
    let Some(p) = table.get_mut(pid) else {
        return false;
    };
    if sig == SIGCONT {
        p.signals.discard(is_stop);
        if p.job.stopped {
            p.job = Job {
                stopped: false,
                report: Some(Change::Continued),
            };
            return true;
        }
    } else if is_stop(sig) {
        p.signals.discard(|s| s == SIGCONT);
    }
    false
}

/// What `wait_change` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// An ended child, reaped: its wstatus.
    Ended(Pid, u32),
    /// A stop or continue, now reported.
    Changed(Pid, Change),
}

/// Linux `wait4(which, options)` by `parent`: an ended child first (reaped), then, as
/// `options` ask (WUNTRACED, WCONTINUED), a child's stop or continue not yet reported.
/// `Ok(None)`: children match but nothing to report; `NoChild` if none matches.
pub fn wait_change<T>(
    table: &mut Table<T>,
    parent: Pid,
    which: WaitFor,
    options: u32,
) -> Result<Option<Found>, TableError> {
    if let Some((c, st)) = table.wait(parent, which)? {
        return Ok(Some(Found::Ended(c, st.wait_status())));
    }
    let children = table
        .get(parent)
        .map(|p| p.children.clone())
        .unwrap_or_default();
    for c in children {
        let Some(cp) = table.get_mut(c) else {
            continue;
        };
        let hit = match which {
            WaitFor::Any => true,
            WaitFor::Pid(x) => c == x,
            WaitFor::Group(g) => cp.pgid == g,
        };
        if !hit || cp.state != State::Running {
            continue;
        }
        let wanted = match cp.job.report {
            Some(Change::Stopped(_)) => options & WUNTRACED != 0,
            Some(Change::Continued) => options & WCONTINUED != 0,
            None => false,
        };
        if wanted {
            let ch = cp.job.report.take().expect("checked above");
            return Ok(Some(Found::Changed(c, ch)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::Record;
    use crate::table::{Creds, Status};

    fn caller(pid: Pid, pgid: Pid, sid: Pid) -> Caller {
        Caller {
            pid,
            pgid,
            sid,
            root: false,
        }
    }

    #[test]
    fn controlling_terminal_rules() {
        let mut t = Terminal::default();
        let leader = caller(5, 5, 5);
        let member = caller(6, 6, 5);
        // Nobody's yet: TIOCGPGRP is ENOTTY; only a session leader may take it.
        assert_eq!(t.get(&leader), Err(TtyError::NotTty));
        assert_eq!(t.set_ctty(&member, false), Err(TtyError::NotPermitted));
        assert_eq!(t.set_ctty(&leader, false), Ok(()));
        assert_eq!(t.get(&member), Ok((5, 5)));
        // Again by the holder: nothing to do; another session cannot take it, nor steal it
        // without root.
        assert_eq!(t.set_ctty(&leader, false), Ok(()));
        let other = caller(9, 9, 9);
        assert_eq!(t.set_ctty(&other, true), Err(TtyError::NotPermitted));
        assert_eq!(t.get(&other), Err(TtyError::NotTty));
        let root = Caller {
            root: true,
            ..other
        };
        assert_eq!(t.set_ctty(&root, false), Err(TtyError::NotPermitted));
        assert_eq!(t.set_ctty(&root, true), Ok(()));
        assert_eq!(t.get(&root), Ok((9, 9)));
        // TIOCNOTTY: another member keeps it; the leader gives it up, its foreground group
        // gets SIGHUP.
        assert_eq!(t.drop_ctty(&leader), Err(TtyError::NotTty));
        assert_eq!(t.drop_ctty(&caller(10, 9, 9)), Ok(None));
        assert_eq!(t.drop_ctty(&root), Ok(Some(9)));
        assert_eq!(t.get(&root), Err(TtyError::NotTty));
        // A leader's end frees it.
        t.set_ctty(&leader, false).unwrap();
        assert_eq!(t.leader_ended(6), None);
        assert_eq!(t.leader_ended(5), Some(5));
        assert_eq!(t, Terminal::default());
    }

    #[test]
    fn foreground_group_and_background_access() {
        let mut t = Terminal::default();
        let shell = caller(5, 5, 5);
        let job = caller(7, 7, 5);
        t.set_ctty(&shell, false).unwrap();
        // The shell (foreground) hands the terminal to the job's group.
        assert_eq!(t.set_pgrp(&shell, 7, false, Some(5)), Ok(()));
        assert_eq!(t.get(&shell), Ok((7, 5)));
        // Now the shell is in the background: SIGTTOU unless it ignores or blocks it.
        assert_eq!(
            t.set_pgrp(&shell, 5, false, Some(5)),
            Err(TtyError::Background(SIGTTOU))
        );
        assert_eq!(t.set_pgrp(&shell, 5, true, Some(5)), Ok(()));
        // A group of another session, no such group, a pgrp out of range.
        assert_eq!(
            t.set_pgrp(&shell, 9, false, Some(9)),
            Err(TtyError::NotPermitted)
        );
        assert_eq!(t.set_pgrp(&shell, 8, false, None), Err(TtyError::NoGroup));
        assert_eq!(
            t.set_pgrp(&shell, PID_MAX, false, None),
            Err(TtyError::Invalid)
        );
        // Not the caller's terminal.
        let stranger = caller(9, 9, 9);
        assert_eq!(
            t.set_pgrp(&stranger, 9, false, Some(9)),
            Err(TtyError::NotTty)
        );
        // A background read: SIGTTIN, or EIO when ignored; a background change of the
        // settings: SIGTTOU, or allowed when ignored. The foreground and strangers pass.
        assert_eq!(
            t.check(&job, SIGTTIN, false, false),
            Err(TtyError::Background(SIGTTIN))
        );
        assert_eq!(t.check(&job, SIGTTIN, true, false), Err(TtyError::Io));
        assert_eq!(
            t.check(&job, SIGTTOU, false, false),
            Err(TtyError::Background(SIGTTOU))
        );
        assert_eq!(t.check(&job, SIGTTOU, true, false), Ok(()));
        assert_eq!(t.check(&shell, SIGTTIN, false, false), Ok(()));
        assert_eq!(t.check(&stranger, SIGTTIN, false, false), Ok(()));
        // An orphaned group is not stopped: EIO.
        assert_eq!(t.check(&job, SIGTTIN, false, true), Err(TtyError::Io));
        assert_eq!(t.check(&job, SIGTTOU, false, true), Err(TtyError::Io));
        assert_eq!(t.check(&job, SIGTTOU, true, true), Ok(()));
    }

    fn rec(sig: u32) -> Record {
        Record {
            sig,
            code: 0,
            pid: 1,
            uid: 0,
            status: 0,
        }
    }

    #[test]
    fn stop_continue_and_wait_reports() {
        let mut t: Table<()> = Table::new(8);
        let (init, _) = t.create(None, Creds::of(0, 0), ()).unwrap();
        let (a, _) = t.create(Some(init), Creds::of(0, 0), ()).unwrap();
        let (b, _) = t.create(Some(init), Creds::of(0, 0), ()).unwrap();
        // Jobs of their own (init's group is orphaned: nothing in it stops by SIGTSTP).
        t.setpgid(init, a, 0).unwrap();
        t.setpgid(init, b, 0).unwrap();
        assert_eq!(
            wait_change(&mut t, init, WaitFor::Any, WUNTRACED | WCONTINUED),
            Ok(None)
        );
        assert!(stop(&mut t, a, SIGTSTP));
        // Without WUNTRACED a stop is not reported; with it, once.
        assert_eq!(wait_change(&mut t, init, WaitFor::Any, 0), Ok(None));
        assert_eq!(
            wait_change(&mut t, init, WaitFor::Pid(b), WUNTRACED),
            Ok(None)
        );
        assert_eq!(
            wait_change(&mut t, init, WaitFor::Any, WUNTRACED),
            Ok(Some(Found::Changed(a, Change::Stopped(SIGTSTP))))
        );
        assert_eq!(wait_change(&mut t, init, WaitFor::Any, WUNTRACED), Ok(None));
        assert_eq!(Change::Stopped(SIGTSTP).wait_status(), 0x147f);
        assert_eq!(Change::Continued.wait_status(), 0xffff);
        // SIGCONT continues it (once), and discards a waiting stop signal.
        t.get_mut(a).unwrap().signals.push(rec(SIGTTIN));
        assert!(on_send(&mut t, a, SIGCONT));
        assert!(!t.get(a).unwrap().signals.has(SIGTTIN));
        assert!(!on_send(&mut t, a, SIGCONT));
        assert_eq!(
            wait_change(&mut t, init, WaitFor::Group(a), WCONTINUED),
            Ok(Some(Found::Changed(a, Change::Continued)))
        );
        // A SIGCONT already waiting cancels the stop; a stop signal sent discards it.
        t.get_mut(b).unwrap().signals.push(rec(SIGCONT));
        assert!(!stop(&mut t, b, SIGSTOP));
        assert!(!on_send(&mut t, b, SIGSTOP));
        assert!(!t.get(b).unwrap().signals.has(SIGCONT));
        assert!(stop(&mut t, b, SIGSTOP));
        // An ended child comes first, reaped.
        t.end(a, Status::Exited(4)).unwrap();
        assert_eq!(
            wait_change(&mut t, init, WaitFor::Any, WUNTRACED),
            Ok(Some(Found::Ended(a, 4 << 8)))
        );
        assert_eq!(
            wait_change(&mut t, init, WaitFor::Any, WUNTRACED),
            Ok(Some(Found::Changed(b, Change::Stopped(SIGSTOP))))
        );
        assert_eq!(
            wait_change(&mut t, b, WaitFor::Any, WUNTRACED),
            Err(TableError::NoChild)
        );
    }

    #[test]
    fn orphaned_groups_as_posix() {
        // init (shell, session 1) -> s (leads session s) -> m (group m) -> c (group m).
        let mut t: Table<()> = Table::new(8);
        let (init, _) = t.create(None, Creds::of(0, 0), ()).unwrap();
        let (s, _) = t.create(Some(init), Creds::of(0, 0), ()).unwrap();
        t.setsid(s).unwrap();
        let (m, _) = t.create(Some(s), Creds::of(0, 0), ()).unwrap();
        t.setpgid(m, 0, 0).unwrap();
        let (c, _) = t.create(Some(m), Creds::of(0, 0), ()).unwrap();
        // m's parent s is in another group of the session: not orphaned. s's own group has
        // no parent in its session (init is in another): orphaned.
        assert!(!orphaned(&t, m, None));
        assert!(orphaned(&t, s, None));
        // A terminal stop signal stops c; m's end would orphan group m with c stopped.
        assert!(stop(&mut t, c, SIGTSTP));
        assert!(has_stopped(&t, m));
        assert!(!has_stopped(&t, s));
        assert_eq!(newly_orphaned(&t, m), vec![m]);
        // Without the stop nothing is to be signalled.
        t.get_mut(c).unwrap().job = Job::default();
        assert!(newly_orphaned(&t, m).is_empty());
        t.end(m, Status::Exited(0)).unwrap();
        assert!(orphaned(&t, m, None));
        // Now in an orphaned group: SIGTSTP, SIGTTIN, SIGTTOU do not stop c; SIGSTOP does.
        assert!(!stop(&mut t, c, SIGTSTP));
        assert!(!stop(&mut t, c, SIGTTIN));
        assert!(stop(&mut t, c, SIGSTOP));
        // A child in another group of the session, stopped: its parent's end orphans it.
        let (d, _) = t.create(Some(s), Creds::of(0, 0), ()).unwrap();
        t.setpgid(s, d, 0).unwrap();
        let (e, _) = t.create(Some(d), Creds::of(0, 0), ()).unwrap();
        assert!(stop(&mut t, e, SIGTTOU));
        // s's end: d's group loses its link (d's parent s).
        assert_eq!(newly_orphaned(&t, s), vec![d]);
        // A group kept by another link is not orphaned by one member's end.
        let (f, _) = t.create(Some(s), Creds::of(0, 0), ()).unwrap();
        t.setpgid(s, f, d).unwrap();
        assert!(newly_orphaned(&t, d).is_empty());
    }

    #[test]
    fn group_sessions() {
        let mut t: Table<()> = Table::new(8);
        let (init, _) = t.create(None, Creds::of(0, 0), ()).unwrap();
        let (a, _) = t.create(Some(init), Creds::of(0, 0), ()).unwrap();
        t.setsid(a).unwrap();
        assert_eq!(session_of_group(&t, init), Some(init));
        assert_eq!(session_of_group(&t, a), Some(a));
        assert_eq!(session_of_group(&t, 77), None);
        assert_eq!(
            Caller::of(&t, a).map(|c| (c.pgid, c.sid, c.root)),
            Some((a, a, true))
        );
    }
}
