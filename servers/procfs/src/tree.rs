//! The shape of /proc: which names exist, their inode numbers and modes. An inode number says
//! what it names without a table: the fixed entries of the root are small numbers, and
//! `pid << 4 | entry` names a process's directory (entry 0) or a file in it, so the numbers of a
//! process's files stay the same for as long as the process lives, as on Linux.

use sawmill_path::{S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};

/// The root directory (`/proc`).
pub const ROOT: u32 = 1;
/// Below this, numbers name the root's fixed entries; from it, processes' entries.
const PID_SHIFT: u32 = 4;
/// The largest pid an inode number can carry (proc's pids stay below 4 Mi: `PID_MAX`).
pub const MAX_PID: u32 = u32::MAX >> PID_SHIFT;

/// A file of the root, or the `self` link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Global {
    /// `self`: a link to the reader's own directory. The server cannot tell who reads (every
    /// Linux process reaches it through the VFS); the Linux personality rewrites `/proc/self`
    /// to `/proc/PID` before a path leaves the process.
    SelfLink,
    Cpuinfo,
    /// `faults`, sawmill's own: root's fault log, one line per death of a server.
    Faults,
    Loadavg,
    Meminfo,
    Mounts,
    Stat,
    Uptime,
}

/// An entry of a process's directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidEntry {
    Dir,
    Cmdline,
    Comm,
    Exe,
    Fd,
    Stat,
    Status,
}

/// What an inode number names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Root,
    Global(Global),
    Pid(u32, PidEntry),
}

/// The root's fixed entries in listing order, with their names and numbers (2..16).
pub const GLOBALS: [(&str, Global); 8] = [
    ("cpuinfo", Global::Cpuinfo),
    ("faults", Global::Faults),
    ("loadavg", Global::Loadavg),
    ("meminfo", Global::Meminfo),
    ("mounts", Global::Mounts),
    ("self", Global::SelfLink),
    ("stat", Global::Stat),
    ("uptime", Global::Uptime),
];

/// A process directory's entries in listing order (without `.` and `..`).
pub const PID_ENTRIES: [(&str, PidEntry); 6] = [
    ("cmdline", PidEntry::Cmdline),
    ("comm", PidEntry::Comm),
    ("exe", PidEntry::Exe),
    ("fd", PidEntry::Fd),
    ("stat", PidEntry::Stat),
    ("status", PidEntry::Status),
];

const PID_CODES: [PidEntry; 7] = [
    PidEntry::Dir,
    PidEntry::Cmdline,
    PidEntry::Comm,
    PidEntry::Exe,
    PidEntry::Fd,
    PidEntry::Stat,
    PidEntry::Status,
];

impl Node {
    pub fn ino(self) -> u32 {
        match self {
            Node::Root => ROOT,
            Node::Global(g) => 2 + GLOBALS.iter().position(|x| x.1 == g).unwrap_or(0) as u32,
            Node::Pid(pid, e) => {
                pid << PID_SHIFT | PID_CODES.iter().position(|&x| x == e).unwrap_or(0) as u32
            }
        }
    }

    /// What inode number `ino` names (None: nothing).
    pub fn from_ino(ino: u32) -> Option<Node> {
        if ino == ROOT {
            return Some(Node::Root);
        }
        let pid = ino >> PID_SHIFT;
        if pid == 0 {
            let g = GLOBALS.get(ino.checked_sub(2)? as usize)?;
            return Some(Node::Global(g.1));
        }
        let e = *PID_CODES.get((ino & ((1 << PID_SHIFT) - 1)) as usize)?;
        Some(Node::Pid(pid, e))
    }

    /// The pid whose directory this lies in.
    pub fn pid(self) -> Option<u32> {
        match self {
            Node::Pid(p, _) => Some(p),
            _ => None,
        }
    }

    /// `st_mode` as Linux's: directories `r-x` for all (`fd` for its owner only), files `r--`
    /// for all, links `rwx`.
    pub fn mode(self) -> u32 {
        match self {
            Node::Root | Node::Pid(_, PidEntry::Dir) => S_IFDIR | 0o555,
            Node::Global(Global::SelfLink) | Node::Pid(_, PidEntry::Exe) => S_IFLNK | 0o777,
            Node::Pid(_, PidEntry::Fd) => S_IFDIR | 0o500,
            _ => S_IFREG | 0o444,
        }
    }

    pub fn is_dir(self) -> bool {
        self.mode() & S_IFMT == S_IFDIR
    }

    /// Links (Linux's count for a directory: 2 plus its subdirectories).
    pub fn nlink(self, processes: u32) -> u32 {
        match self {
            Node::Root => 2 + processes,
            Node::Pid(_, PidEntry::Dir) => 3,
            Node::Pid(_, PidEntry::Fd) => 2,
            _ => 1,
        }
    }

    /// The node `name` in directory `self`, by name alone (whether a process exists is the
    /// caller's question). None: no such name.
    pub fn child(self, name: &[u8]) -> Option<Node> {
        match self {
            Node::Root => {
                if let Some(g) = GLOBALS.iter().find(|g| g.0.as_bytes() == name) {
                    return Some(Node::Global(g.1));
                }
                parse_pid(name).map(|p| Node::Pid(p, PidEntry::Dir))
            }
            Node::Pid(pid, PidEntry::Dir) => PID_ENTRIES
                .iter()
                .find(|e| e.0.as_bytes() == name)
                .map(|e| Node::Pid(pid, e.1)),
            _ => None,
        }
    }
}

/// A pid as a directory name: decimal, no sign, no leading zero, in range.
pub fn parse_pid(name: &[u8]) -> Option<u32> {
    if name.is_empty() || name.len() > 10 || name[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in name {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    (v <= MAX_PID as u64).then_some(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_name_what_they_say() {
        let all = [
            Node::Root,
            Node::Global(Global::Faults),
            Node::Global(Global::Meminfo),
            Node::Global(Global::SelfLink),
            Node::Global(Global::Uptime),
            Node::Pid(1, PidEntry::Dir),
            Node::Pid(1, PidEntry::Status),
            Node::Pid(MAX_PID, PidEntry::Exe),
        ];
        for n in all {
            assert_eq!(Node::from_ino(n.ino()), Some(n), "{:?}", n);
        }
        assert_eq!(Node::from_ino(0), None);
        assert_eq!(Node::from_ino(2 + GLOBALS.len() as u32), None);
        assert_eq!(Node::from_ino(1 << PID_SHIFT | 15), None);
        // Every root entry is below the first process's numbers.
        assert!(Node::Global(Global::Uptime).ino() < Node::Pid(1, PidEntry::Dir).ino());
    }

    #[test]
    fn names() {
        assert_eq!(
            Node::Root.child(b"meminfo"),
            Some(Node::Global(Global::Meminfo))
        );
        assert_eq!(Node::Root.child(b"42"), Some(Node::Pid(42, PidEntry::Dir)));
        assert_eq!(Node::Root.child(b"042"), None);
        assert_eq!(Node::Root.child(b"0"), None);
        assert_eq!(Node::Root.child(b"-1"), None);
        assert_eq!(Node::Root.child(b"99999999999"), None);
        assert_eq!(Node::Root.child(b"nosuch"), None);
        let d = Node::Pid(7, PidEntry::Dir);
        assert_eq!(d.child(b"cmdline"), Some(Node::Pid(7, PidEntry::Cmdline)));
        assert_eq!(d.child(b"nosuch"), None);
        assert_eq!(Node::Pid(7, PidEntry::Stat).child(b"x"), None);
        assert!(Node::Root.is_dir() && d.is_dir() && Node::Pid(7, PidEntry::Fd).is_dir());
        assert!(!Node::Pid(7, PidEntry::Exe).is_dir());
        assert_eq!(Node::Pid(7, PidEntry::Exe).mode(), S_IFLNK | 0o777);
        assert_eq!(Node::Global(Global::Meminfo).mode(), S_IFREG | 0o444);
    }
}
