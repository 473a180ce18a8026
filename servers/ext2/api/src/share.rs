//! What each client holds in the PFS and how much it may: every open file is charged to the
//! party that opened it — a session (one per client, made through the VFS) or the VFS itself
//! (opens it resolves component by component) — and each party has a bound, so one client that
//! opens without end gets `NoSpace` alone. A file's index (its badge) is reused only once the
//! kernel says that no capability carrying it is left (a `NO_SENDERS` notice): until then the
//! file stays charged, closed or not, and a stale capability can never reach a newer file.
//! Sessions are watched the same way. This is what the config's `files_per_session`,
//! `vfs_files` and `files` mean, kept here so that it is host-tested. Pure bookkeeping: touches
//! nothing but itself.
use alloc::vec::Vec;

/// One client session: its credentials and what it holds.
pub struct Session {
    pub cred: (u32, u32),
    /// Some capability carrying the session's badge may still exist.
    pub live: bool,
    /// Open file indices charged to it (open, or closed with a capability still out).
    pub files: u32,
}

/// Who each file index is charged to, and the bounds.
pub struct Shares {
    /// Per file index: the badge of the party it is charged to; 0 when the index is free.
    owner: Vec<u64>,
    pub sessions: Vec<Session>,
    free_sessions: Vec<usize>,
    vfs_files: u32,
    /// Bounds of open files per session and for the VFS.
    pub per_session: u32,
    pub per_vfs: u32,
    /// Open file indices charged in all, and the most there may be (what the PFS's kernel
    /// quota and heap can hold: each is a watch in the kernel and an entry here).
    total: u32,
    pub max_total: u32,
}

/// The badge space the charges are kept in (the PFS's own constants).
pub struct Badges {
    pub vfs: u64,
    pub session_base: u64,
}

impl Shares {
    pub fn new(per_session: u32, per_vfs: u32, max_total: u32) -> Shares {
        Shares {
            owner: Vec::new(),
            sessions: Vec::new(),
            free_sessions: Vec::new(),
            vfs_files: 0,
            per_session,
            per_vfs,
            total: 0,
            max_total,
        }
    }

    fn count(&mut self, by: u64, b: &Badges) -> Option<&mut u32> {
        if by == b.vfs {
            return Some(&mut self.vfs_files);
        }
        let i = by.checked_sub(b.session_base)? as usize;
        self.sessions
            .get_mut(i)
            .filter(|s| s.live)
            .map(|s| &mut s.files)
    }

    /// Charges a new open file at `index` to `by`; false (nothing charged) when `by` is at its
    /// bound or is no party.
    pub fn charge(&mut self, by: u64, index: usize, b: &Badges) -> bool {
        if self.total >= self.max_total {
            return false;
        }
        let limit = if by == b.vfs {
            self.per_vfs
        } else {
            self.per_session
        };
        match self.count(by, b) {
            Some(n) if *n < limit => *n += 1,
            _ => return false,
        }
        if self.owner.len() <= index {
            self.owner.resize(index + 1, 0);
        }
        self.owner[index] = by;
        self.total += 1;
        true
    }

    /// The file index's last capability is gone: its charge goes back. Returns whether it was
    /// charged (a notice for an index that is not is ignored).
    pub fn release(&mut self, index: usize, b: &Badges) -> bool {
        let Some(by) = self.owner.get_mut(index).map(core::mem::take) else {
            return false;
        };
        if by == 0 {
            return false;
        }
        self.total -= 1;
        if by == b.vfs {
            self.vfs_files -= 1;
        } else if let Some(s) = self.sessions.get_mut((by - b.session_base) as usize) {
            s.files -= 1;
            if !s.live && s.files == 0 {
                self.free_sessions.push((by - b.session_base) as usize);
            }
        }
        true
    }

    /// Whose credentials file `index` acts with: `Some(None)` charged to the VFS (trusted),
    /// `Some(Some(cred))` to a session (kept while the session has files, even after its last
    /// capability went), `None` not charged.
    pub fn file_cred(&self, index: usize, b: &Badges) -> Option<Option<(u32, u32)>> {
        let by = *self.owner.get(index).filter(|&&by| by != 0)?;
        if by == b.vfs {
            return Some(None);
        }
        let s = self
            .sessions
            .get(by.checked_sub(b.session_base)? as usize)?;
        Some(Some(s.cred))
    }

    /// The credentials of the live session file `index` is charged to; `None` when it is
    /// charged to the VFS, to a session whose last capability went, or to no one (what
    /// `file.reopen` may act with).
    pub fn live_session_cred(&self, index: usize, b: &Badges) -> Option<(u32, u32)> {
        let by = *self
            .owner
            .get(index)
            .filter(|&&by| by != 0 && by != b.vfs)?;
        self.cred(by.checked_sub(b.session_base)? as usize)
    }

    /// A new session index for `cred`.
    pub fn new_session(&mut self, cred: (u32, u32)) -> usize {
        let s = Session {
            cred,
            live: true,
            files: 0,
        };
        match self.free_sessions.pop() {
            Some(i) => {
                self.sessions[i] = s;
                i
            }
            None => {
                self.sessions.push(s);
                self.sessions.len() - 1
            }
        }
    }

    /// A session index that was never handed out goes back at once.
    pub fn drop_session(&mut self, i: usize) {
        if let Some(s) = self.sessions.get_mut(i) {
            s.live = false;
            if s.files == 0 {
                self.free_sessions.push(i);
            }
        }
    }

    /// The credentials of a live session.
    pub fn cred(&self, i: usize) -> Option<(u32, u32)> {
        self.sessions.get(i).filter(|s| s.live).map(|s| s.cred)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Badges = Badges {
        vfs: 1,
        session_base: 100,
    };

    #[test]
    fn a_session_is_bounded_alone() {
        let mut sh = Shares::new(2, 5, 100);
        let a = 100 + sh.new_session((1000, 1000)) as u64;
        let b = 100 + sh.new_session((1000, 1000)) as u64;
        assert_ne!(
            a, b,
            "one session per request, even for the same credentials"
        );
        assert!(sh.charge(a, 0, &B) && sh.charge(a, 1, &B));
        assert!(!sh.charge(a, 2, &B), "a's third file is refused");
        // b and the VFS are untouched by a's bound.
        assert!(sh.charge(b, 2, &B) && sh.charge(b, 3, &B));
        assert!(sh.charge(1, 4, &B));
        // A file's last capability goes: its charge comes back to its owner only.
        assert!(sh.release(0, &B));
        assert!(
            !sh.release(0, &B),
            "a second notice for the index changes nothing"
        );
        assert!(sh.charge(a, 0, &B));
        assert!(!sh.charge(b, 5, &B));
    }

    #[test]
    fn the_total_bounds_everyone_and_comes_back() {
        let mut sh = Shares::new(3, 3, 4);
        let a = 100 + sh.new_session((0, 0)) as u64;
        let b = 100 + sh.new_session((0, 0)) as u64;
        for i in 0..3 {
            assert!(sh.charge(a, i, &B));
        }
        assert!(sh.charge(b, 3, &B));
        assert!(!sh.charge(b, 4, &B), "the total is reached");
        // a dies: its three files' notices arrive, then its session's.
        for i in 0..3 {
            assert!(sh.release(i, &B));
        }
        sh.drop_session((a - 100) as usize);
        assert_eq!(sh.cred((a - 100) as usize), None);
        assert!(sh.charge(b, 4, &B) && sh.charge(b, 5, &B));
    }

    #[test]
    fn a_session_index_is_reused_only_when_its_files_are_gone() {
        let mut sh = Shares::new(4, 4, 100);
        let i = sh.new_session((5, 5));
        let a = 100 + i as u64;
        assert!(sh.charge(a, 0, &B));
        // The session's capability goes while a file of it is still out.
        sh.drop_session(i);
        assert!(!sh.charge(a, 1, &B), "a dead session opens nothing");
        let j = sh.new_session((6, 6));
        assert_ne!(i, j, "not reused while its file is charged to it");
        assert!(sh.release(0, &B));
        assert_eq!(sh.new_session((7, 7)), i, "reused once its last file went");
        assert_eq!(sh.cred(i), Some((7, 7)));
    }

    #[test]
    fn a_file_acts_with_its_openers_credentials() {
        let mut sh = Shares::new(4, 4, 100);
        let i = sh.new_session((5, 6));
        assert!(sh.charge(100 + i as u64, 0, &B));
        assert!(sh.charge(1, 1, &B));
        assert_eq!(sh.file_cred(0, &B), Some(Some((5, 6))));
        assert_eq!(sh.file_cred(1, &B), Some(None), "the VFS's: trusted");
        assert_eq!(sh.file_cred(2, &B), None, "not charged");
        // The session's capability goes: its open file keeps its credentials.
        sh.drop_session(i);
        assert_eq!(sh.file_cred(0, &B), Some(Some((5, 6))));
        assert!(sh.release(0, &B));
        assert_eq!(sh.file_cred(0, &B), None);
    }

    #[test]
    fn only_a_live_sessions_file_may_be_reopened() {
        let mut sh = Shares::new(4, 4, 100);
        let i = sh.new_session((5, 6));
        assert!(sh.charge(100 + i as u64, 0, &B));
        assert!(sh.charge(1, 1, &B));
        assert_eq!(sh.live_session_cred(0, &B), Some((5, 6)));
        assert_eq!(sh.live_session_cred(1, &B), None, "the VFS's file");
        assert_eq!(sh.live_session_cred(2, &B), None, "not charged");
        // The session's capability goes: its kept file opens nothing more.
        sh.drop_session(i);
        assert_eq!(sh.live_session_cred(0, &B), None);
        assert!(sh.release(0, &B));
        assert_eq!(sh.live_session_cred(0, &B), None);
    }

    #[test]
    fn strangers_are_charged_nothing() {
        let mut sh = Shares::new(4, 4, 100);
        assert!(!sh.charge(0, 0, &B), "not a party");
        assert!(!sh.charge(100 + 7, 0, &B), "no such session");
        assert!(!sh.release(9, &B), "no such index");
    }
}
