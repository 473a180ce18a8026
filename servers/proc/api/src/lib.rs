//! What the process server `proc` and the rest of the system agree on: the schema of its
//! manifest `config` table (the first process and what every process gets). Plain types only;
//! it touches nothing. proc and the host tool (which checks, fills in and encodes the table;
//! `./sawmill run linux` sets `init`, `env` and `trace`) use it.
//!
//! ```toml
//! [[server]]
//! name = "proc"
//! provides = ["proc"]
//! uses = ["vfs", "mem", "console", "console-in"]
//! modules = ["linux-personality"]
//! [server.config]
//! init = ["/bin/busybox", "ls", "-l", "/"]
//! env = ["PATH=/bin:/usr/bin", "HOME=/root"]
//! ```
//! - `init`: the first process's `argv`; `init[0]` is the program (a path; without a `/` it is
//!   looked up in the `PATH` of `env`, as a shell does).
//! - `env`: its environment strings (`NAME=value`).
//! - `cwd`: its working directory (default `/`).
//! - `trace`: print every system call of every process (default off).
//! - `uid`, `gid`: its credentials (default 0, root).
//! - `personality`: the boot module started as each process's library (default
//!   `linux-personality`; a test may name a stand-in).
//! - `process_kmem_kb`: kernel memory each process may use (page tables, mapping nodes, the
//!   objects its library creates), default 4096.
//! - `lib_heap_kb`: the library's first heap, mapped before it starts (default 128); the rest
//!   of its heap is demand-zero memory of `mem` the library attaches itself.
//! - `pool_kb`: memory proc takes from `mem` to build processes from (their libraries' heaps,
//!   stacks and writable pages), default 8192.
//! - `priority`: the priority of every process (default 50, below the servers).
//! - `max_procs`: processes at once, running and zombies (default 64): `fork` beyond it is
//!   refused with `EAGAIN` (Linux `RLIMIT_NPROC`, for every user together).
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_manifest::config::{Peer, Peers};
use serde::{Deserialize, Serialize};

pub const DEFAULT_PERSONALITY: &str = "linux-personality";

/// What proc prints on the debug console when `reboot(2)` stops the machine (the host tool
/// reads it as a clean end, like init's exit).
pub const POWER_OFF_LINE: &str = "proc: the machine powers off";
pub const DEFAULT_PROCESS_KMEM_KB: u32 = 4096;
pub const DEFAULT_LIB_HEAP_KB: u32 = 64;
pub const DEFAULT_POOL_KB: u32 = 8192;
pub const DEFAULT_PRIORITY: u8 = 50;
pub const DEFAULT_MAX_PROCS: u32 = 64;

/// The name of each process's wake notification: every blocking wait of a Linux process (a
/// child's change of state, a signal, a pipe or the terminal becoming ready) is a wait on this
/// one notification, so that any of them ends it. proc creates one per process (kept across
/// its execs) and keeps the original; the bits say who signalled. A library that must wait for
/// something proc decides asks proc without blocking and, if nothing is there yet, waits on it.
pub const WAKE_CAP: &str = "proc:wake";
/// The capability name of a new image's library heap: a demand-zero dataspace proc allocates
/// (charged to proc's account) and frees when the image's task is gone, so nothing of it
/// outlives the process (the library cannot free the heap it runs on).
pub const HEAP_CAP: &str = "proc:heap";
/// A child of the process changed state (ended, or ran a new program after `vfork`).
pub const WAKE_CHILD: u64 = 1;
/// A signal is pending for the process.
pub const WAKE_SIGNAL: u64 = 2;
/// A pipe or the terminal the process waits on may go on (registered with the pipe server or
/// the console).
pub const WAKE_IO: u64 = 4;
/// Set by the library itself: its interval timer expired (its timer thread).
pub const WAKE_TIMER: u64 = 8;
/// The process was stopped and a `SIGCONT` continued it (job control): its library, waiting
/// in its stop, goes on.
pub const WAKE_CONT: u64 = 16;

/// The badge of the console server's `proc` capability (systems/linux.toml): only its holder
/// may call the terminal's `tty_signal` (a typed Ctrl-C, Ctrl-\, Ctrl-Z). Above every pid
/// (proc's `PID_MAX` is 4 Mi), so it speaks for no process.
pub const CONSOLE_BADGE: u64 = 0x4000_0001;

/// proc's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub init: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default = "root_dir")]
    pub cwd: String,
    #[serde(default)]
    pub trace: bool,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    #[serde(default = "personality")]
    pub personality: String,
    #[serde(default = "process_kmem_kb")]
    pub process_kmem_kb: u32,
    #[serde(default = "lib_heap_kb")]
    pub lib_heap_kb: u32,
    #[serde(default = "pool_kb")]
    pub pool_kb: u32,
    #[serde(default = "priority")]
    pub priority: u8,
    #[serde(default = "max_procs")]
    pub max_procs: u32,
}

fn root_dir() -> String {
    String::from("/")
}
fn personality() -> String {
    String::from(DEFAULT_PERSONALITY)
}
fn process_kmem_kb() -> u32 {
    DEFAULT_PROCESS_KMEM_KB
}
fn lib_heap_kb() -> u32 {
    DEFAULT_LIB_HEAP_KB
}
fn pool_kb() -> u32 {
    DEFAULT_POOL_KB
}
fn priority() -> u8 {
    DEFAULT_PRIORITY
}
fn max_procs() -> u32 {
    DEFAULT_MAX_PROCS
}

impl Peers for Config {
    fn peers(&mut self, _f: &mut dyn FnMut(Peer<'_>)) {}
}

/// Most capabilities one `fork` or `exec` may hand off (`proc.handoff`): the state dataspace, the
/// program's regions and its open files.
pub const MAX_HANDOFF_CAPS: usize = 256;
/// The name of handed-off capability `i` in the new image's environment: this prefix and `i`.
pub const HANDOFF_CAP_PREFIX: &str = "hand";
/// Most bytes of state `proc.handoff_state` carries (into the new image's one-page
/// environment, beside its other records).
pub const MAX_INLINE_STATE: usize = 2048;

/// The process information page: one page proc maps into the process's library
/// (`sawmill_linux::layout::LIB_INFO`), so that what proc may change under a running process (its
/// parent, when the parent ends) is read without a call, and what the library says of itself (it
/// sleeps) is read by proc without a call. Byte offsets of its little-endian fields:
/// The parent's pid (u32; 0 for none), written by proc. Changes to 1 when the parent ends
/// (reparenting).
pub const INFO_PPID: usize = 0;
/// Written by the library: 1 while its program's thread sleeps in a wait (`S` in /proc), 0 while
/// it runs (`R`). Only the process's own state is at stake: proc reads it for /proc, nothing else.
pub const INFO_SLEEPING: usize = 4;
/// Written by the library: its program's name (Linux's `comm`: set at start, changed by
/// `prctl(PR_SET_NAME)`), up to [`INFO_COMM_LEN`] bytes, NUL-padded; /proc shows it (all NULs:
/// proc's own idea, the program file's name).
pub const INFO_COMM: usize = 8;
pub const INFO_COMM_LEN: usize = 16;

/// The request of `proc.exec` (interfaces/proc.idl): what the library writes into the dataspace
/// it passes. Little-endian; each string is a u32 length and its bytes: the program (a path, or a
/// name looked up in the `PATH` of the new environment), the working directory, a u32 count and
/// the `argv` strings, a u32 count and the environment strings. [`ExecRequest::decode`] is total:
/// any bytes give a request or `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecRequest {
    pub program: String,
    pub cwd: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
}

/// An exec request's bytes ([`ExecRequest::encode`]'s) made part by part: the program and
/// working directory, then the `argv` list, then the environment list, each string's bytes
/// written straight into the request by the caller. How the library builds its request from the
/// program's memory without a `String` (an allocation, a copy) per argument first.
pub struct RequestWriter {
    out: Vec<u8>,
    /// Where the open list's count goes, and its count so far.
    list: Option<(usize, u32)>,
}

impl RequestWriter {
    pub fn new(program: &str, cwd: &str) -> Self {
        let mut w = RequestWriter {
            out: Vec::with_capacity(256),
            list: None,
        };
        for s in [program, cwd] {
            w.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            w.out.extend_from_slice(s.as_bytes());
        }
        w
    }

    /// Opens the next list (first `argv`, then the environment).
    pub fn begin_list(&mut self) {
        self.list = Some((self.out.len(), 0));
        self.out.extend_from_slice(&0u32.to_le_bytes());
    }

    /// Adds a string to the open list: `fill` appends its bytes (and may refuse, leaving
    /// the request unusable). Not UTF-8: Err(None), the request unusable too.
    pub fn string<E>(
        &mut self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), Option<E>> {
        let at = self.out.len();
        self.out.extend_from_slice(&0u32.to_le_bytes());
        fill(&mut self.out).map_err(Some)?;
        let bytes = &self.out[at + 4..];
        if core::str::from_utf8(bytes).is_err() {
            return Err(None);
        }
        let n = bytes.len() as u32;
        self.out[at..at + 4].copy_from_slice(&n.to_le_bytes());
        if let Some((_, count)) = self.list.as_mut() {
            *count += 1;
        }
        Ok(())
    }

    /// Strings in the open list so far.
    pub fn list_len(&self) -> usize {
        self.list.map_or(0, |(_, n)| n as usize)
    }

    /// Closes the open list (its count written).
    pub fn end_list(&mut self) {
        if let Some((at, n)) = self.list.take() {
            self.out[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The request's bytes (the open list closed first).
    pub fn finish(mut self) -> Vec<u8> {
        self.end_list();
        self.out
    }
}

/// Most bytes an exec request may take (Linux's own limit on `argv` plus environment is larger;
/// a process's arguments and environment must also fit its one-page environment).
pub const MAX_EXEC_REQUEST: usize = 64 * 1024;

impl ExecRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = RequestWriter::new(&self.program, &self.cwd);
        for list in [&self.argv, &self.env] {
            w.begin_list();
            for s in list {
                w.string(|out| {
                    out.extend_from_slice(s.as_bytes());
                    Ok::<(), ()>(())
                })
                .ok();
            }
            w.end_list();
        }
        w.finish()
    }

    pub fn decode(b: &[u8]) -> Option<ExecRequest> {
        let mut pos = 0usize;
        let u32_ = |pos: &mut usize| -> Option<u32> {
            let w = b.get(*pos..*pos + 4)?;
            *pos += 4;
            Some(u32::from_le_bytes(w.try_into().ok()?))
        };
        let string = |pos: &mut usize| -> Option<String> {
            let n = u32_(pos)? as usize;
            let s = b.get(*pos..pos.checked_add(n)?)?;
            *pos += n;
            Some(String::from(core::str::from_utf8(s).ok()?))
        };
        let program = string(&mut pos)?;
        let cwd = string(&mut pos)?;
        let mut lists: [Vec<String>; 2] = [Vec::new(), Vec::new()];
        for l in &mut lists {
            let n = u32_(&mut pos)? as usize;
            // Each string takes at least its 4-byte length: bounds the allocation.
            if n > (b.len() - pos) / 4 {
                return None;
            }
            for _ in 0..n {
                l.push(string(&mut pos)?);
            }
        }
        if pos != b.len() {
            return None;
        }
        let [argv, env] = lists;
        Some(ExecRequest {
            program,
            cwd,
            argv,
            env,
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn exec_requests_round_trip_and_garbage_is_refused() {
        let r = ExecRequest {
            program: "/bin/busybox".into(),
            cwd: "/tmp".into(),
            argv: alloc::vec!["ls".into(), "-l".into(), "".into()],
            env: alloc::vec!["PATH=/bin".into()],
        };
        let b = r.encode();
        assert_eq!(ExecRequest::decode(&b), Some(r));
        for n in 0..b.len() {
            assert_eq!(ExecRequest::decode(&b[..n]), None, "truncated at {n}");
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(ExecRequest::decode(&long), None);
        // A count far beyond the input, and bytes that are not UTF-8.
        let mut huge = ExecRequest::default().encode();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(ExecRequest::decode(&huge), None);
        let mut bad = b.clone();
        bad[4] = 0xff;
        assert_eq!(ExecRequest::decode(&bad), None);
    }

    #[test]
    fn a_request_written_part_by_part_decodes_as_the_strings_given() {
        let r = ExecRequest {
            program: "/bin/busybox".into(),
            cwd: "/".into(),
            argv: alloc::vec!["sh".into(), "-c".into(), "echo é".into()],
            env: alloc::vec![],
        };
        let mut w = RequestWriter::new(&r.program, &r.cwd);
        w.begin_list();
        for a in &r.argv {
            w.string(|out| {
                out.extend_from_slice(a.as_bytes());
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        assert_eq!(w.list_len(), 3);
        w.end_list();
        w.begin_list();
        assert_eq!(w.list_len(), 0);
        // The environment list left open: finish closes it.
        let b = w.finish();
        assert_eq!(b, r.encode());
        assert_eq!(ExecRequest::decode(&b), Some(r));

        // A string that is not UTF-8, and one whose bytes could not be read.
        let mut w = RequestWriter::new("/p", "/");
        w.begin_list();
        let bad = w.string(|out| {
            out.extend_from_slice(&[b'a', 0xff]);
            Ok::<(), u32>(())
        });
        assert_eq!(bad, Err(None));
        let mut w = RequestWriter::new("/p", "/");
        w.begin_list();
        assert_eq!(w.string(|_| Err::<(), u32>(14)), Err(Some(14)));
        assert_eq!(w.list_len(), 0);
    }
}
