//! The environment root writes into a server's address space before starting it: the server's
//! name, its arguments or typed configuration, its heap, and the capability slots it was given,
//! by name.
//!
//! Layout (little-endian u64 words at the address the program starts with in `rdi`, normally
//! [`crate::layout::ENV`]; one page): magic, heap base, heap
//! size, record count, then records `{kind, value, len}` each followed by `len` bytes padded to 8.
//! The same code writes it (root, through [`Writer`]) and reads it (every server). Every record
//! kind is defined here and nowhere else.

pub const MAGIC: u64 = u64::from_le_bytes(*b"SAWMENV1");
/// Bytes = the server's name.
pub const KIND_NAME: u64 = 1;
/// Bytes = one positional argument (`args`; test programs and benchmarks).
pub const KIND_ARG: u64 = 2;
/// Value = a capability slot, bytes = its name (an endpoint the server uses, `sys:*`, `irq:N`).
pub const KIND_CAP: u64 = 3;
/// Value = a capability slot, bytes = the name of an endpoint the server provides (serves).
pub const KIND_PROVIDES: u64 = 4;
/// One range of the memory server's RAM pool: value = the pool address of its first page, bytes
/// = physical address and page count (two little-endian u64).
pub const KIND_RAM: u64 = 16;
/// Value = `sawmill_abi::io_badge(base, count)` of the server's `io_window`.
pub const KIND_IO_WINDOW: u64 = 17;
/// Value = bit mask of the server's `irq_lines`.
pub const KIND_IRQ_LINES: u64 = 18;
/// Bytes = the server's typed configuration, encoded by the host tool (see [`config`]).
pub const KIND_CONFIG: u64 = 19;
/// A boot module root maps read-only into the server (manifest `modules`): value = its address,
/// bytes = its length (little-endian u64) followed by its name.
pub const KIND_MODULE: u64 = 20;
/// Value = the address of the server's fault word (two words: the armed fault's kind, then its
/// argument), in a page root shares with a server some controller may inject faults into
/// (manifest `may_inject`; `sawmill_interfaces::rpc::fault_word`).
pub const KIND_FAULT_WORD: u64 = 21;
/// Value = the server's incarnation: 1 at boot, one more for each restart by root (manifest
/// `restart`/`reset`; docs/ARCHITECTURE.md §4.1, generations).
pub const KIND_INCARNATION: u64 = 22;

// Records of a Linux process (the process server writes them for the personality library,
// which starts the program from them). `KIND_ARG` records are the program's `argv`, in order.
/// Bytes = one environment string of the program (`NAME=value`), in order.
pub const KIND_LINUX_ENV: u64 = 32;
/// Bytes = the absolute path of the program to run (what `AT_EXECFN` and `/proc/self/exe` give).
pub const KIND_LINUX_EXEC: u64 = 33;
/// Value = the process id; bytes = parent id, uid, euid, gid, egid (little-endian u32 each).
pub const KIND_LINUX_IDS: u64 = 34;
/// Value = the real-time clock at boot (seconds since 1970, read from the RTC); bytes = the
/// time-stamp counter at that moment and its rate in kHz (little-endian u64 each).
pub const KIND_LINUX_CLOCK: u64 = 35;
/// Value = 1: print every system call of the process with its arguments and result.
pub const KIND_LINUX_TRACE: u64 = 36;
/// Bytes = 32 bytes of seed for the process's random numbers (`getrandom`, `AT_RANDOM`).
pub const KIND_LINUX_SEED: u64 = 37;
/// Bytes = the working directory to start in.
pub const KIND_LINUX_CWD: u64 = 38;
/// Value = how many capabilities the process's previous image (a `fork` parent, or the image
/// before an `execve`) handed over (`hand0`, `hand1`, ...: the first a dataspace with the state
/// the library adopts, `personality/linux/src/handoff.rs`, unless the state is in a
/// [`KIND_LINUX_STATE`] record: then there is no `hand0`).
pub const KIND_LINUX_HANDOFF: u64 = 39;
/// Bytes = the state the previous image handed over (`proc.handoff_state`), carried here
/// rather than in a dataspace.
pub const KIND_LINUX_STATE: u64 = 46;
/// A Linux process's signal state across `execve` (value: the blocked mask; bytes: the
/// ignored mask, u64 little-endian).
pub const KIND_LINUX_SIGNALS: u64 = 45;
pub const PAGE: usize = 4096;

/// Builds an environment page.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
    count: u64,
}

impl<'a> Writer<'a> {
    /// `buf` comes zeroed (a spawner's fresh page: the records' padding and the rest of the
    /// page then carry nothing of the page's past; zeroing it here again was ~520 instructions
    /// of every process's start).
    pub fn new(buf: &'a mut [u8], heap_base: u64, heap_size: u64) -> Self {
        buf[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        buf[8..16].copy_from_slice(&heap_base.to_le_bytes());
        buf[16..24].copy_from_slice(&heap_size.to_le_bytes());
        Writer {
            buf,
            pos: 32,
            count: 0,
        }
    }

    /// Adds a record; false if the page is full.
    pub fn add(&mut self, kind: u64, value: u64, bytes: &[u8]) -> bool {
        let need = 24 + bytes.len().div_ceil(8) * 8;
        if self.pos + need > self.buf.len() {
            return false;
        }
        let p = self.pos;
        self.buf[p..p + 8].copy_from_slice(&kind.to_le_bytes());
        self.buf[p + 8..p + 16].copy_from_slice(&value.to_le_bytes());
        self.buf[p + 16..p + 24].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.buf[p + 24..p + 24 + bytes.len()].copy_from_slice(bytes);
        self.pos += need;
        self.count += 1;
        self.buf[24..32].copy_from_slice(&self.count.to_le_bytes());
        true
    }
}

static PRESENT: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
/// Where the environment page is: the address the program was started with. Programs with the
/// standard layout find it at [`crate::layout::ENV`]; a program started with another layout
/// (the Linux personality, which lives above the Linux program's address range) elsewhere.
static ADDR: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Whether `addr` holds an environment page; if so, it is this program's from now on.
pub(crate) fn set_present(addr: u64) -> bool {
    if addr == 0 || !addr.is_multiple_of(PAGE as u64) {
        return false;
    }
    // SAFETY: the spawner passes the address of the page it mapped read-only for this program.
    let magic = unsafe { core::ptr::read_volatile(addr as *const u64) };
    if magic != MAGIC {
        return false;
    }
    ADDR.store(addr, core::sync::atomic::Ordering::Relaxed);
    PRESENT.store(true, core::sync::atomic::Ordering::Relaxed);
    true
}

/// Whether this program was started with an environment page (every program but root).
pub fn present() -> bool {
    PRESENT.load(core::sync::atomic::Ordering::Relaxed)
}

fn page() -> &'static [u8] {
    if !PRESENT.load(core::sync::atomic::Ordering::Relaxed) {
        return &[];
    }
    let addr = ADDR.load(core::sync::atomic::Ordering::Relaxed);
    // SAFETY: the spawner maps the environment page read-only before the program starts; it
    // stays, and `set_present` checked its magic.
    unsafe { core::slice::from_raw_parts(addr as *const u8, PAGE) }
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Iterates the records of an environment page: (kind, value, bytes).
pub fn records(b: &[u8]) -> impl Iterator<Item = (u64, u64, &[u8])> {
    let ok = b.len() >= 32 && word(b, 0) == MAGIC;
    let count = if ok { word(b, 24) } else { 0 };
    let mut pos = 32;
    let mut i = 0;
    core::iter::from_fn(move || {
        if i >= count || pos + 24 > b.len() {
            return None;
        }
        let (k, v, l) = (word(b, pos), word(b, pos + 8), word(b, pos + 16) as usize);
        if l > b.len() - pos - 24 {
            return None;
        }
        let bytes = &b[pos + 24..pos + 24 + l];
        pos += 24 + l.div_ceil(8) * 8;
        i += 1;
        Some((k, v, bytes))
    })
}

/// The server's name.
pub fn name() -> &'static str {
    if !PRESENT.load(core::sync::atomic::Ordering::Relaxed) {
        return "root";
    }
    records(page())
        .find(|r| r.0 == KIND_NAME)
        .and_then(|r| core::str::from_utf8(r.2).ok())
        .unwrap_or("?")
}

/// The slot of the capability the manifest named `name`: an endpoint the server uses or
/// provides, or one of root's `sys:` slots. This is the one way a program finds a capability.
pub fn cap(name: &str) -> Option<u64> {
    records(page())
        .find(|r| (r.0 == KIND_CAP || r.0 == KIND_PROVIDES) && r.2 == name.as_bytes())
        .map(|r| r.1)
}

/// The endpoint this server serves: the first its manifest `provides` (its slot and name). For
/// servers whose endpoint is named per instance (`blk0`, `pfs1`).
pub fn served() -> Option<(u64, &'static str)> {
    records(page())
        .find(|r| r.0 == KIND_PROVIDES)
        .and_then(|r| Some((r.1, core::str::from_utf8(r.2).ok()?)))
}

/// The records of `kind`: (value, bytes).
pub fn find_all(kind: u64) -> impl Iterator<Item = (u64, &'static [u8])> {
    records(page())
        .filter(move |r| r.0 == kind)
        .map(|r| (r.1, r.2))
}

/// Every record: (kind, value, bytes), in order. For a program that wants several kinds: one
/// pass over the page where a [`find_all`] or [`cap`] each is one.
pub fn all() -> impl Iterator<Item = (u64, u64, &'static [u8])> {
    records(page())
}

/// The value of the first record of `kind` (for the records that carry one number).
pub fn value(kind: u64) -> Option<u64> {
    records(page()).find(|r| r.0 == kind).map(|r| r.1)
}

/// Why [`config`] found no usable configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// The environment has no configuration record.
    Missing,
    /// The record does not decode as the type asked for.
    Malformed,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ConfigError::Missing => {
                "no configuration in the environment (does the host tool know this module's schema?)"
            }
            ConfigError::Malformed => {
                "the configuration does not decode as this server's schema (image built from other sources?)"
            }
        })
    }
}

/// The server's typed configuration: its manifest `config` table, checked on the host against
/// `T` (the `Config` of the server's `*-api` crate) and decoded here as that same type.
pub fn config<T: serde::de::DeserializeOwned>() -> Result<T, ConfigError> {
    let r = records(page())
        .find(|r| r.0 == KIND_CONFIG)
        .ok_or(ConfigError::Missing)?;
    postcard::from_bytes(r.2).map_err(|_| ConfigError::Malformed)
}

/// The arguments from the manifest.
pub fn args() -> impl Iterator<Item = &'static str> {
    records(page())
        .filter(|r| r.0 == KIND_ARG)
        .filter_map(|r| core::str::from_utf8(r.2).ok())
}

/// Argument `i`, if present.
pub fn arg(i: usize) -> Option<&'static str> {
    args().nth(i)
}

/// Heap base and size.
pub fn heap() -> (u64, u64) {
    let b = page();
    if b.len() < 32 || word(b, 0) != MAGIC {
        return (0, 0);
    }
    (word(b, 8), word(b, 16))
}

/// The highest capability slot root filled (new capabilities go above it).
pub fn last_slot() -> u64 {
    records(page())
        .filter(|r| r.0 == KIND_CAP || r.0 == KIND_PROVIDES)
        .map(|r| r.1)
        .max()
        .unwrap_or(crate::slots::FIRST_NAMED)
}
