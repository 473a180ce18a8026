//! System manifests: the static description of a sawmill system — which servers run, at which
//! priority, which endpoints each provides and may call (with the badge root mints), and which
//! devices it is given.
//!
//! The host tool parses the TOML form (feature `toml`), validates it and embeds the compact binary
//! encoding (`encode`) in the boot image; the root task `decode`s it inside the guest. Because the
//! root task trusts nothing it did not check, `decode` is total: any byte string yields either a
//! `System` or a `DecodeError`, never a panic, and allocation is bounded by the input length.
#![cfg_attr(not(test), no_std)]

extern crate alloc;
#[cfg(all(feature = "std", not(test)))]
extern crate std;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub mod config;
pub mod faultlog;
pub mod faults;
#[cfg(feature = "toml")]
mod from_toml;
#[cfg(feature = "toml")]
pub use from_toml::{
    from_toml, from_toml_file, schema, server_position, HostConfig, NoSchemas, Schemas,
};

/// A whole system: a name and the servers root starts, in manifest order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct System {
    pub name: String,
    pub servers: Vec<Server>,
}

/// One server task and the authority root hands it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Unique within the system.
    pub name: String,
    /// Boot-module (binary) name; in TOML it defaults to `name`.
    pub module: String,
    /// 1..=254; higher preempts lower.
    pub priority: u8,
    pub args: Vec<String>,
    /// Root waits for all `wait` servers to exit, then shuts the machine down.
    pub wait: bool,
    /// Kernel-memory quota of the factory capability the server gets; 0 = no factory.
    pub kmem_kb: u32,
    pub heap_kb: u32,
    /// Endpoint names this server serves.
    pub provides: Vec<String>,
    /// Endpoints it may call, each with the badge root mints for it.
    pub uses: Vec<Use>,
    /// ISA IRQ lines delegated to it (0 and 2 stay with the kernel).
    pub irqs: Vec<u8>,
    /// I/O port ranges delegated to it.
    pub ioports: Vec<IoRange>,
    /// Endpoint (provided by some server) that pages this server's threads instead of root.
    pub pager: Option<String>,
    /// RAM root hands this server as a pool of physical pages (the memory server's), in KiB;
    /// 0 = none. Root maps it at a fixed address and lists the physical ranges in the
    /// environment (see `servers/mem`).
    pub ram_kb: u32,
    /// 2 MiB pages root maps for this server at `sawmill_rt::layout::HUGE` (0 = none, at most
    /// 64).
    pub huge_pages: u32,
    /// Size of its capability table (default [`DEFAULT_CAP_SLOTS`], at most
    /// [`MAX_CAP_SLOTS`]): servers that hold a capability or two per client object (`mem` per
    /// dataspace, `proc` per process) need more than the default.
    pub cap_slots: u32,
    /// Restricted I/O-port authority: root mints its I/O-control capability with the badge
    /// `sawmill_abi::io_badge(base, count)` (slot named `sys:io-control`), so the server can grant
    /// ports of this window to other tasks (`ioport_give`) and no others. For a platform server
    /// such as `pci`, which hands device ports to drivers.
    pub io_window: Option<IoRange>,
    /// Restricted IRQ authority: root mints its IRQ-control capability with bit n set for each
    /// line n listed (slot `sys:irq-control`); the server may `irq_get` these lines only.
    pub irq_lines: Vec<u8>,
    /// Whether the server may write to the kernel debug console (root puts a copy of its console
    /// capability in `sawmill_rt::slots::CONSOLE`); true unless the manifest says otherwise.
    pub console: bool,
    /// The server's typed configuration (its `config` table), encoded by the host tool with the
    /// schema of its module (see [`config`]); empty if the module has no schema. Root passes it
    /// on unread in the environment, where the server decodes it (`sawmill_rt::env::config`).
    pub config: Vec<u8>,
    /// Further boot modules root maps read-only (and executable) into the server, each listed in
    /// its environment (`sawmill_rt::env::KIND_MODULE`: address, length and name): programs the
    /// server starts itself, such as the process server's Linux personality library.
    pub modules: Vec<String>,
    /// What root does when this server exits or faults (docs/ARCHITECTURE.md, "Supervision").
    pub restart: Restart,
    /// Restarts in a row (each incarnation dying within [`STABLE_MS`] of its start) before root
    /// holds the server for good; 1..=[`MAX_RESTARTS`] when `restart` restarts.
    pub max_restarts: u32,
    /// Pause before the first restart in a row, in milliseconds (doubled for each further one);
    /// at most [`MAX_BACKOFF_MS`].
    pub backoff_ms: u32,
    /// Servers this one may have root kill (fault injection for tests: the `sys:pager` call
    /// [`KILL_LABEL`]); each names a server of the system other than itself.
    pub may_kill: Vec<String>,
    /// How long, in milliseconds, the server's main thread may run without waiting (a receive,
    /// call, send, notification wait or yield) before root takes it for hung: 0 (never checked)
    /// or [`MIN_HANG_MS`]..=[`MAX_HANG_MS`]; [`DEFAULT_HANG_MS`] unless the manifest says
    /// otherwise. Only servers that provide an endpoint are watched.
    pub hang_ms: u32,
    /// The server may read root's fault log (the `sys:pager` call [`FAULT_LOG_LABEL`]).
    pub fault_log: bool,
    /// Servers this one may have root inject faults into (the fault-injection campaign: the
    /// `sys:pager` call [`faults::INJECT_LABEL`]); each names a server of the system other than
    /// itself, and never the memory server.
    pub may_inject: Vec<String>,
}

/// A server's restart policy (manifest `restart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Restart {
    /// Reaped and left dead (its clients get errors): what root did before supervision.
    #[default]
    Hold,
    /// A new incarnation from the same module, configuration and capabilities; clients that
    /// can resubmit (the PFS's block client) see nothing.
    Restart,
    /// Like `Restart`, for servers whose clients lose their state with it and see errors first.
    Reset,
    /// The machine goes down (for servers nothing can run without).
    Reboot,
}

impl Restart {
    pub fn name(self) -> &'static str {
        match self {
            Restart::Hold => "hold",
            Restart::Restart => "restart",
            Restart::Reset => "reset",
            Restart::Reboot => "reboot",
        }
    }
    pub fn from_name(n: &str) -> Option<Restart> {
        [
            Restart::Hold,
            Restart::Restart,
            Restart::Reset,
            Restart::Reboot,
        ]
        .into_iter()
        .find(|r| r.name() == n)
    }
    /// Whether root starts a new incarnation.
    pub fn restarts(self) -> bool {
        matches!(self, Restart::Restart | Restart::Reset)
    }
}

/// Restarts in a row before a server is held, unless the manifest says otherwise.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;
pub const MAX_RESTARTS: u32 = 100;
pub const DEFAULT_BACKOFF_MS: u32 = 10;
pub const MAX_BACKOFF_MS: u32 = 1000;
/// An incarnation that lived this long before dying starts a new count of restarts in a row.
pub const STABLE_MS: u64 = 1000;
/// The label of a request on `sys:pager` asking root to kill a server (words: its name, up to
/// 32 bytes, zero-padded); allowed only for servers the caller's `may_kill` names.
pub const KILL_LABEL: u16 = 0x5001;

/// A server's name as the four words of a [`KILL_LABEL`] request (up to 32 bytes, zero-padded,
/// little-endian), and back: the one encoding root and the programs that ask it share.
pub fn name_words(name: &str) -> [u64; 4] {
    let mut bytes = [0u8; 32];
    let n = name.len().min(32);
    bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut w = [0u64; 4];
    for (k, word) in w.iter_mut().enumerate() {
        let mut chunk = [0u8; 8];
        chunk.copy_from_slice(&bytes[k * 8..k * 8 + 8]);
        *word = u64::from_le_bytes(chunk);
    }
    w
}

/// The name [`name_words`] encoded, if it is UTF-8; written into `buf`.
pub fn words_name<'b>(words: &[u64; 4], buf: &'b mut [u8; 32]) -> Option<&'b str> {
    for (k, w) in words.iter().enumerate() {
        buf[k * 8..k * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(32);
    core::str::from_utf8(&buf[..len]).ok()
}
/// The label of a request on `sys:pager` for one line of root's fault log (word 0: the line's
/// sequence number, from 0); allowed only for servers whose manifest says `fault_log = true`.
/// Reply label 0 with word 0 the sequence number of the line returned (the oldest kept at or
/// after the one asked for), word 1 its length in bytes and the text from word 2 on (at most
/// [`FAULT_LINE_MAX`] bytes, the message's further words); label 1 when there is no such line yet.
pub const FAULT_LOG_LABEL: u16 = 0x5004;
/// The label of a request on `sys:pager` for an endpoint that dies with the caller's
/// incarnation (issue 16): root creates it (charged to the server's own factory), answers label
/// 0 with a capability to it (all rights: the server mints what it hands out from it) and, when
/// this incarnation ends, revokes and destroys it, so every capability minted from it fails at
/// once and every caller blocked on it is woken with `GONE` whoever else made copies. A file
/// system serves its clients on one (its endpoint's origin must not live in a server that may
/// restart before it). Label 1: refused (the limit, [`MAX_OWN_ENDPOINTS`], or no memory).
pub const OWN_ENDPOINT_LABEL: u16 = 0x5005;
/// Endpoints one incarnation may ask root for with [`OWN_ENDPOINT_LABEL`].
pub const MAX_OWN_ENDPOINTS: usize = 2;
/// Longest fault-log line [`FAULT_LOG_LABEL`] returns (the message words after the first two).
pub const FAULT_LINE_MAX: usize = 8 * 62;
/// A server that runs this long without waiting is hung (manifest `hang_ms`, the default):
/// with root's check every [`HANG_CHECK_MS`], a spinning server is caught within 1.2 s of its
/// last wait, well inside the 2 s the supervision promises.
pub const DEFAULT_HANG_MS: u32 = 1000;
pub const MIN_HANG_MS: u32 = 100;
pub const MAX_HANG_MS: u32 = 60_000;
/// How often root looks at its servers' run times.
pub const HANG_CHECK_MS: u64 = 200;
/// The highest priority a server may have: below root's, so root runs whatever a server does
/// (and can tell that it spins).
pub const MAX_PRIORITY: u8 = sawmill_abi::ROOT_PRIORITY - 1;

/// Defaults match the TOML defaults, so code building manifests by hand only names what differs.
impl Default for Server {
    fn default() -> Self {
        Server {
            name: String::new(),
            module: String::new(),
            priority: DEFAULT_PRIORITY,
            args: Vec::new(),
            wait: false,
            kmem_kb: 0,
            heap_kb: DEFAULT_HEAP_KB,
            provides: Vec::new(),
            uses: Vec::new(),
            irqs: Vec::new(),
            ioports: Vec::new(),
            pager: None,
            ram_kb: 0,
            huge_pages: 0,
            cap_slots: DEFAULT_CAP_SLOTS,
            io_window: None,
            irq_lines: Vec::new(),
            console: true,
            config: Vec::new(),
            modules: Vec::new(),
            restart: Restart::Hold,
            max_restarts: DEFAULT_MAX_RESTARTS,
            backoff_ms: DEFAULT_BACKOFF_MS,
            may_kill: Vec::new(),
            hang_ms: DEFAULT_HANG_MS,
            fault_log: false,
            may_inject: Vec::new(),
        }
    }
}

/// A right to call `endpoint`; calls arrive at the server carrying `badge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    pub endpoint: String,
    pub badge: u64,
}

/// Ports `base .. base + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRange {
    pub base: u16,
    pub count: u16,
}

pub const DEFAULT_PRIORITY: u8 = 100;
pub const DEFAULT_HEAP_KB: u32 = 256;
/// A server's capability table unless its manifest says otherwise.
pub const DEFAULT_CAP_SLOTS: u32 = 1024;
/// The largest capability table the kernel makes.
pub const MAX_CAP_SLOTS: u32 = 4096;
/// Module names become boot-archive entry names, which hold at most 47 bytes.
pub const MAX_MODULE_NAME: usize = 47;

const MAGIC: &[u8; 8] = b"SWMANIF1";

// ---------------------------------------------------------------------------------------------
// Binary encoding. Little endian; strings and lists are a u32 count followed by the items.

/// Serialises a system into the form root decodes. Infallible: anything representable in the
/// structs is representable in the encoding (lengths beyond u32 cannot occur in practice).
pub fn encode(sys: &System) -> Vec<u8> {
    let mut w = Vec::new();
    w.extend_from_slice(MAGIC);
    put_str(&mut w, &sys.name);
    put_u32(&mut w, sys.servers.len() as u32);
    for s in &sys.servers {
        put_str(&mut w, &s.name);
        put_str(&mut w, &s.module);
        w.push(s.priority);
        w.push(s.wait as u8);
        put_u32(&mut w, s.kmem_kb);
        put_u32(&mut w, s.heap_kb);
        put_u32(&mut w, s.args.len() as u32);
        for a in &s.args {
            put_str(&mut w, a);
        }
        put_u32(&mut w, s.provides.len() as u32);
        for p in &s.provides {
            put_str(&mut w, p);
        }
        put_u32(&mut w, s.uses.len() as u32);
        for u in &s.uses {
            put_str(&mut w, &u.endpoint);
            w.extend_from_slice(&u.badge.to_le_bytes());
        }
        put_u32(&mut w, s.irqs.len() as u32);
        w.extend_from_slice(&s.irqs);
        put_u32(&mut w, s.ioports.len() as u32);
        for r in &s.ioports {
            w.extend_from_slice(&r.base.to_le_bytes());
            w.extend_from_slice(&r.count.to_le_bytes());
        }
        match &s.pager {
            None => w.push(0),
            Some(p) => {
                w.push(1);
                put_str(&mut w, p);
            }
        }
        put_u32(&mut w, s.ram_kb);
        put_u32(&mut w, s.huge_pages);
        put_u32(&mut w, s.cap_slots);
        match &s.io_window {
            None => w.push(0),
            Some(r) => {
                w.push(1);
                w.extend_from_slice(&r.base.to_le_bytes());
                w.extend_from_slice(&r.count.to_le_bytes());
            }
        }
        put_u32(&mut w, s.irq_lines.len() as u32);
        w.extend_from_slice(&s.irq_lines);
        w.push(s.console as u8);
        put_u32(&mut w, s.config.len() as u32);
        w.extend_from_slice(&s.config);
        put_u32(&mut w, s.modules.len() as u32);
        for m in &s.modules {
            put_str(&mut w, m);
        }
        w.push(s.restart as u8);
        put_u32(&mut w, s.max_restarts);
        put_u32(&mut w, s.backoff_ms);
        put_u32(&mut w, s.may_kill.len() as u32);
        for k in &s.may_kill {
            put_str(&mut w, k);
        }
        put_u32(&mut w, s.hang_ms);
        w.push(s.fault_log as u8);
        put_u32(&mut w, s.may_inject.len() as u32);
        for k in &s.may_inject {
            put_str(&mut w, k);
        }
    }
    w
}

fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}

fn put_str(w: &mut Vec<u8>, s: &str) {
    put_u32(w, s.len() as u32);
    w.extend_from_slice(s.as_bytes());
}

/// Why a byte string is not an encoded manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub what: &'static str,
    /// Byte offset at which decoding gave up.
    pub offset: usize,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad manifest encoding at byte {}: {}",
            self.offset, self.what
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DecodeError {}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, what: &'static str) -> DecodeError {
        DecodeError {
            what,
            offset: self.pos,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let rest = &self.buf[self.pos..];
        if n > rest.len() {
            return Err(self.err("truncated"));
        }
        self.pos += n;
        Ok(&rest[..n])
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.err("flag is neither 0 nor 1")),
        }
    }

    /// A list count, refused unless `count` items of at least `min_item` bytes each could still
    /// fit in the input: this is what bounds allocation by the input length.
    fn count(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        let remaining = self.buf.len() - self.pos;
        match n.checked_mul(min_item) {
            Some(need) if need <= remaining => Ok(n),
            _ => Err(self.err("list count exceeds the remaining input")),
        }
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let n = self.u32()? as usize;
        let at = self.pos;
        let b = self.take(n)?;
        match core::str::from_utf8(b) {
            Ok(s) => Ok(String::from(s)),
            Err(_) => Err(DecodeError {
                what: "string is not UTF-8",
                offset: at,
            }),
        }
    }
}

/// Parses the output of `encode`. Total on arbitrary input (see the crate doc). The result is
/// structurally sound but not necessarily valid: callers that need the semantic rules run
/// `validate` as well.
pub fn decode(bytes: &[u8]) -> Result<System, DecodeError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err(DecodeError {
            what: "bad magic",
            offset: 0,
        });
    }
    let name = r.string()?;
    // Smallest possible server record: 2 empty strings, priority, wait, 2 quotas, 5 empty lists,
    // the pager flag, the RAM pool size, the huge pages, the I/O window flag, the IRQ-line
    // list, the console flag, the configuration, the module list, the restart policy, its
    // tries and back-off and the kill list.
    let n =
        r.count(4 + 4 + 1 + 1 + 4 + 4 + 5 * 4 + 1 + 4 + 4 + 4 + 1 + 4 + 1 + 4 + 4 + 1 + 4 + 4 + 4)?;
    let mut servers = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let module = r.string()?;
        let priority = r.u8()?;
        let wait = r.bool()?;
        let kmem_kb = r.u32()?;
        let heap_kb = r.u32()?;
        let n = r.count(4)?;
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            args.push(r.string()?);
        }
        let n = r.count(4)?;
        let mut provides = Vec::with_capacity(n);
        for _ in 0..n {
            provides.push(r.string()?);
        }
        let n = r.count(4 + 8)?;
        let mut uses = Vec::with_capacity(n);
        for _ in 0..n {
            let endpoint = r.string()?;
            let badge = r.u64()?;
            uses.push(Use { endpoint, badge });
        }
        let n = r.count(1)?;
        let irqs = r.take(n)?.to_vec();
        let n = r.count(4)?;
        let mut ioports = Vec::with_capacity(n);
        for _ in 0..n {
            let base = r.u16()?;
            let count = r.u16()?;
            ioports.push(IoRange { base, count });
        }
        let pager = if r.bool()? { Some(r.string()?) } else { None };
        let ram_kb = r.u32()?;
        let huge_pages = r.u32()?;
        let cap_slots = r.u32()?;
        let io_window = if r.bool()? {
            let base = r.u16()?;
            let count = r.u16()?;
            Some(IoRange { base, count })
        } else {
            None
        };
        let n = r.count(1)?;
        let irq_lines = r.take(n)?.to_vec();
        let console = r.bool()?;
        let n = r.count(1)?;
        let config = r.take(n)?.to_vec();
        let n = r.count(4)?;
        let mut modules = Vec::with_capacity(n);
        for _ in 0..n {
            modules.push(r.string()?);
        }
        let restart = match r.u8()? {
            0 => Restart::Hold,
            1 => Restart::Restart,
            2 => Restart::Reset,
            3 => Restart::Reboot,
            _ => return Err(r.err("bad restart policy")),
        };
        let max_restarts = r.u32()?;
        let backoff_ms = r.u32()?;
        let n = r.count(4)?;
        let mut may_kill = Vec::with_capacity(n);
        for _ in 0..n {
            may_kill.push(r.string()?);
        }
        let hang_ms = r.u32()?;
        let fault_log = r.u8()? != 0;
        let n = r.count(4)?;
        let mut may_inject = Vec::with_capacity(n);
        for _ in 0..n {
            may_inject.push(r.string()?);
        }
        servers.push(Server {
            name,
            module,
            priority,
            args,
            wait,
            kmem_kb,
            heap_kb,
            provides,
            uses,
            irqs,
            ioports,
            pager,
            ram_kb,
            huge_pages,
            cap_slots,
            io_window,
            irq_lines,
            console,
            config,
            modules,
            restart,
            max_restarts,
            backoff_ms,
            may_kill,
            hang_ms,
            fault_log,
            may_inject,
        });
    }
    if r.pos != bytes.len() {
        return Err(r.err("trailing bytes after the last server"));
    }
    Ok(System { name, servers })
}

// ---------------------------------------------------------------------------------------------
// Validation.

fn module_name_ok(m: &str) -> bool {
    !m.is_empty()
        && m.len() <= MAX_MODULE_NAME
        && m.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

/// Endpoints whose servers tell their clients' authority apart by badge alone, so two users may
/// not share one: `mem` (memory accounting) and `pci` (device assignment).
pub const BADGE_KEYED: [&str; 2] = ["mem", "pci"];

/// Checks the rules that make a manifest startable. The first problem found is reported, naming
/// the server it concerns:
/// - server names non-empty and unique; at least one server;
/// - priority in 1..=[`MAX_PRIORITY`] (0 is the idle level; root runs above every server, so
///   that it notices a server spinning);
/// - module names non-empty, at most 47 bytes, characters `[a-z0-9_-]`;
/// - every endpoint provided by at most one server, and every used or pager endpoint provided by
///   exactly one;
/// - IRQ lines in 0..=15 except 0 (timer) and 2 (cascade), each given to at most one server;
/// - I/O port ranges non-empty and not running past port 0xffff;
/// - an `io_window` likewise, and overlapping neither another server's window nor any other
///   server's `ioports` (ports in a window are granted only by its holder);
/// - `irq_lines` valid lines like `irqs`, and counted with them: a line is either given to one
///   server directly or held by one server's restricted IRQ control, never both or twice;
/// - badges below 2^63 (badges with bit 63 are minted by servers themselves, e.g. mem's
///   dataspaces, and root's own to mem is `u64::MAX`), and distinct among the users of an
///   endpoint whose server keys authority by badge ([`BADGE_KEYED`], and whatever the server with
///   the RAM pool or an I/O window provides: mem charges memory per badge and frees it when that
///   client dies; pci gives each badge the devices assigned to it);
/// - at most one server with a RAM pool (`ram_kb`), at most 1 GiB, providing at most one
///   endpoint (the one root and its clients call it on);
/// - `modules` named like modules, each at most once per server and never the server's own;
/// - a restart policy that restarts only for a server that is neither the memory server (its
///   pool is everyone's memory) nor a `wait` server, with `max_restarts` in 1..=[`MAX_RESTARTS`]
///   and `backoff_ms` at most [`MAX_BACKOFF_MS`]; `may_kill` naming other servers of the system;
/// - `hang_ms` 0 or in [`MIN_HANG_MS`]..=[`MAX_HANG_MS`].
pub fn validate(sys: &System) -> Result<(), String> {
    if sys.name.is_empty() {
        return Err(String::from("system has no name"));
    }
    if sys.servers.is_empty() {
        return Err(format!("system `{}` has no servers", sys.name));
    }
    let mut names: BTreeMap<&str, ()> = BTreeMap::new();
    let mut providers: BTreeMap<&str, &str> = BTreeMap::new();
    let mut irq_owner: BTreeMap<u8, &str> = BTreeMap::new();
    for s in &sys.servers {
        let n = s.name.as_str();
        if n.is_empty() {
            return Err(String::from("a server has an empty name"));
        }
        if names.insert(n, ()).is_some() {
            return Err(format!("server `{n}` is defined more than once"));
        }
        if !(1..=MAX_PRIORITY).contains(&s.priority) {
            return Err(format!(
                "server `{n}`: priority {} is outside 1..={MAX_PRIORITY} (root runs above every server)",
                s.priority
            ));
        }
        if !module_name_ok(&s.module) {
            return Err(format!(
                "server `{n}`: module name `{}` must be 1-{MAX_MODULE_NAME} characters of [a-z0-9_-]",
                s.module
            ));
        }
        for (i, m) in s.modules.iter().enumerate() {
            if !module_name_ok(m) || m == "manifest" || m == "root" {
                return Err(format!(
                    "server `{n}`: boot module `{m}` must be 1-{MAX_MODULE_NAME} characters of [a-z0-9_-] (not `manifest` or `root`)"
                ));
            }
            if *m == s.module || s.modules[..i].contains(m) {
                return Err(format!(
                    "server `{n}`: boot module `{m}` is listed twice (or is its own module)"
                ));
            }
        }
        for p in &s.provides {
            if p.is_empty() {
                return Err(format!(
                    "server `{n}`: provides an endpoint with an empty name"
                ));
            }
            // `name:` prefixes are reserved for the slots root fills itself (sys:pager, irq:8).
            if p.contains(':') || p.len() > 64 {
                return Err(format!(
                    "server `{n}`: endpoint name `{p}` must be at most 64 characters without `:`"
                ));
            }
            if let Some(other) = providers.insert(p.as_str(), n) {
                return Err(format!(
                    "server `{n}`: endpoint `{p}` is already provided by server `{other}`"
                ));
            }
        }
        for &irq in s.irqs.iter().chain(&s.irq_lines) {
            if irq > 15 || irq == 0 || irq == 2 {
                return Err(format!(
                    "server `{n}`: IRQ {irq} cannot be delegated (valid: 1 and 3..=15)"
                ));
            }
            if let Some(other) = irq_owner.insert(irq, n) {
                return Err(if other == n {
                    format!("server `{n}`: IRQ {irq} listed twice")
                } else {
                    format!("server `{n}`: IRQ {irq} is already given to server `{other}`")
                });
            }
        }
        for r in s.ioports.iter().chain(&s.io_window) {
            if r.count == 0 {
                return Err(format!(
                    "server `{n}`: I/O port range at {:#x} is empty",
                    r.base
                ));
            }
            if r.base as u32 + r.count as u32 > 0x1_0000 {
                return Err(format!(
                    "server `{n}`: I/O port range {:#x}+{} runs past port 0xffff",
                    r.base, r.count
                ));
            }
        }
    }
    for s in &sys.servers {
        let Some(w) = &s.io_window else { continue };
        let (lo, hi) = (w.base as u32, w.base as u32 + w.count as u32);
        for o in &sys.servers {
            let ranges = o.ioports.iter().filter(|_| o.name != s.name);
            let windows = o.io_window.iter().filter(|_| o.name != s.name);
            for r in ranges.chain(windows) {
                if (r.base as u32) < hi && lo < r.base as u32 + r.count as u32 {
                    return Err(format!(
                        "server `{}`: I/O ports {:#x}+{} overlap the I/O window of server `{}`",
                        o.name, r.base, r.count, s.name
                    ));
                }
            }
        }
    }
    for s in &sys.servers {
        let n = s.name.as_str();
        if s.restart.restarts() {
            if s.ram_kb > 0 || s.wait {
                return Err(format!(
                    "server `{n}`: restart = \"{}\" is not for the memory server or a `wait` server",
                    s.restart.name()
                ));
            }
            if !(1..=MAX_RESTARTS).contains(&s.max_restarts) {
                return Err(format!(
                    "server `{n}`: max_restarts = {} is not in 1..={MAX_RESTARTS}",
                    s.max_restarts
                ));
            }
        }
        if s.backoff_ms > MAX_BACKOFF_MS {
            return Err(format!(
                "server `{n}`: backoff_ms = {} is above {MAX_BACKOFF_MS}",
                s.backoff_ms
            ));
        }
        for k in &s.may_kill {
            if *k == s.name || !names.contains_key(k.as_str()) {
                return Err(format!(
                    "server `{n}`: may_kill names `{k}`, which is not another server of the system"
                ));
            }
        }
        if s.hang_ms != 0 && !(MIN_HANG_MS..=MAX_HANG_MS).contains(&s.hang_ms) {
            return Err(format!(
                "server `{n}`: hang_ms = {} is neither 0 nor in {MIN_HANG_MS}..={MAX_HANG_MS}",
                s.hang_ms
            ));
        }
        for k in &s.may_inject {
            let target = sys.servers.iter().find(|t| t.name == *k);
            if *k == s.name || target.is_none() {
                return Err(format!(
                    "server `{n}`: may_inject names `{k}`, which is not another server of the system"
                ));
            }
            if target.is_some_and(|t| t.ram_kb > 0) {
                return Err(format!(
                    "server `{n}`: may_inject names `{k}`, the memory server (not restartable)"
                ));
            }
        }
    }
    let mut pool: Option<&str> = None;
    for s in &sys.servers {
        let n = s.name.as_str();
        if !(64..=MAX_CAP_SLOTS).contains(&s.cap_slots) {
            return Err(format!(
                "server `{n}`: cap_slots = {} is not in 64..={MAX_CAP_SLOTS}",
                s.cap_slots
            ));
        }
        if s.huge_pages > 64 {
            return Err(format!(
                "server `{n}`: huge_pages = {} is above 64",
                s.huge_pages
            ));
        }
        if s.ram_kb > 0 {
            if s.ram_kb > 1024 * 1024 {
                return Err(format!(
                    "server `{n}`: ram_kb = {} is above 1 GiB",
                    s.ram_kb
                ));
            }
            if let Some(other) = pool.replace(n) {
                return Err(format!(
                    "server `{n}`: only one server may have a RAM pool, and `{other}` has one"
                ));
            }
            if s.provides.len() > 1 {
                return Err(format!(
                    "server `{n}`: a server with a RAM pool provides at most one endpoint"
                ));
            }
        }
    }
    let mut keyed: BTreeMap<(&str, u64), &str> = BTreeMap::new();
    let keyed_by_role = sys
        .servers
        .iter()
        .filter(|s| s.ram_kb > 0 || s.io_window.is_some())
        .flat_map(|s| s.provides.iter().map(|p| p.as_str()));
    let badge_keyed: Vec<&str> = BADGE_KEYED.iter().copied().chain(keyed_by_role).collect();
    // Second pass: uses may name endpoints of servers listed later.
    for s in &sys.servers {
        let n = s.name.as_str();
        let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
        for u in &s.uses {
            if u.badge >> 63 != 0 {
                return Err(format!(
                    "server `{n}`: badge {:#x} for `{}` has bit 63 set, which is reserved",
                    u.badge, u.endpoint
                ));
            }
            if badge_keyed.contains(&u.endpoint.as_str()) {
                if let Some(other) = keyed.insert((u.endpoint.as_str(), u.badge), n) {
                    return Err(format!(
                        "server `{n}`: badge {} on `{}` is already used by server `{other}`",
                        u.badge, u.endpoint
                    ));
                }
            }
            if !providers.contains_key(u.endpoint.as_str()) {
                return Err(format!(
                    "server `{n}`: uses endpoint `{}`, which no server provides",
                    u.endpoint
                ));
            }
            // The server finds its capabilities by endpoint name, so two would be ambiguous.
            if seen.insert(u.endpoint.as_str(), ()).is_some() {
                return Err(format!(
                    "server `{n}`: uses endpoint `{}` twice",
                    u.endpoint
                ));
            }
        }
        if let Some(p) = &s.pager {
            if !providers.contains_key(p.as_str()) {
                return Err(format!(
                    "server `{n}`: pager endpoint `{p}` is not provided by any server"
                ));
            }
        }
    }
    Ok(())
}

impl System {
    /// The distinct module names in first-use order: the boot modules an image must carry (each
    /// server's module, then the further modules it lists).
    pub fn modules(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for s in &self.servers {
            for m in core::iter::once(&s.module).chain(&s.modules) {
                if !out.contains(&m.as_str()) {
                    out.push(m);
                }
            }
        }
        out
    }

    /// The server that provides `endpoint`, if any.
    pub fn provider(&self, endpoint: &str) -> Option<&Server> {
        self.servers
            .iter()
            .find(|s| s.provides.iter().any(|p| p == endpoint))
    }
}

#[cfg(test)]
mod tests;
