//! The checker: a separate task with its own badges at each server, so that "the server still
//! answers valid requests correctly" is tested from another client's side (a server that now
//! serves only the hostile client badly, or refuses everyone else, shows up here).
//!
//! Protocol on the `check` endpoint: label = what to check ([`MEM`], [`VFS`], [`PFS`], [`PCI`],
//! [`CONSOLE`]);
//! reply word 0 = wrong answers seen (0: all correct), word 1 = 1 if the server did not answer at
//! all (an IPC error or GONE: it is dead). Every wrong answer is printed with what was expected.
//!
//! Touches only its own task: the servers named in its manifest, a few slots, and one page of
//! address space ([`WIN`]) where a dataspace page is mapped and touched while it exists.

use sawmill_abi::MsgTag;
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{
    console, dataspace, file, mem, pci, pfs, pipe, sock, socket, vfs, DsError, DsFlags, MapFlags,
    OpenFlags, PciError, PipeError, SockError, SockKind,
};
use sawmill_rt::slots::TASK;
use sawmill_rt::{env, ipc, println, sys, thread};

use crate::engine::{Engine, PROGRESS};
use core::sync::atomic::Ordering;

pub const MEM: u16 = 1;
pub const VFS: u16 = 2;
pub const PFS: u16 = 3;
pub const PCI: u16 = 4;
pub const CONSOLE: u16 = 5;
pub const PIPE: u16 = 6;
pub const SOCKET: u16 = 7;

/// Where the checker maps a page of a fresh dataspace.
const WIN: u64 = 0x5800_0000;
/// Map read-write, and writable now.
const RW_NOW: MapFlags = MapFlags::from_bits_retain(0x103);
const HELLO: &[u8] = b"hello, sawmill\n";

/// Asks the checker; returns (wrong answers, server alive). Counts as progress for the watchdog
/// (a hung server hangs the checker, and so this call).
pub fn ask(e: &mut Engine, what: u16) -> (u64, bool) {
    let Some(ep) = env::cap("check") else {
        println!("hostile: FAIL the manifest gives no `check` endpoint");
        return (1, false);
    };
    let r = ipc::call(ep, MsgTag::new(what, 0), [0; 4]);
    PROGRESS.fetch_add(1, Ordering::Relaxed);
    e.tally.checks += 1;
    let (wrong, alive) = if r.err != 0 || r.tag.label() != 0 {
        (1, false)
    } else {
        (r.w[0], r.w[1] == 0)
    };
    e.tally.wrong += wrong;
    (wrong, alive)
}

/// A wrong answer: printed, counted.
macro_rules! wrong {
    ($n:ident, $dead:ident, $r:expr, $($t:tt)*) => {{
        println!("hostile-check: WRONG {}: got {:?}", format_args!($($t)*), $r);
        $n += 1;
        if matches!($r, Err(RpcError::Gone) | Err(RpcError::Ipc(_))) {
            $dead = true;
        }
    }};
}

struct Checker {
    slot: u64,
    session: Option<u64>,
}

impl Checker {
    fn mem(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("mem") else {
            return (1, false);
        };
        let m = mem::Client::new(ep);
        let before = match m.stats() {
            Ok(s) => s.used,
            Err(e) => {
                wrong!(n, dead, Err::<(), _>(e), "mem.stats");
                return (n, dead);
            }
        };
        match m.alloc(8192, 0, self.slot) {
            Ok(ds) => {
                let d = dataspace::Client::new(ds);
                match d.info() {
                    Ok(i) if i.size == 8192 && i.flags.contains(DsFlags::WRITABLE) => {}
                    r => wrong!(n, dead, r, "dataspace.info of a fresh 8 KiB dataspace"),
                }
                match d.map(4096, WIN, 1, RW_NOW, [WIN, 4096]) {
                    Ok(_) => {
                        let p = WIN as *mut u64;
                        // SAFETY: the page was just mapped writable at WIN for us; nothing else
                        // uses WIN, and it is not touched after `free` below.
                        let (z, v) = unsafe {
                            let z = core::ptr::read_volatile(p);
                            core::ptr::write_volatile(p, 0x5a5a_1234);
                            (z, core::ptr::read_volatile(p))
                        };
                        if z != 0 || v != 0x5a5a_1234 {
                            println!(
                                "hostile-check: WRONG a fresh page read {:#x} (want 0), then {:#x}",
                                z, v
                            );
                            n += 1;
                        }
                    }
                    r => wrong!(n, dead, r, "dataspace.map writable"),
                }
                match d.free() {
                    Ok(()) => {}
                    r => wrong!(n, dead, r, "dataspace.free"),
                }
                match d.info() {
                    Err(RpcError::App(DsError::Gone)) | Err(RpcError::Ipc(_)) => {}
                    r => wrong!(n, dead, r, "dataspace.info after free (want Gone)"),
                }
            }
            Err(e) => wrong!(n, dead, Err::<(), _>(e), "mem.alloc 8 KiB"),
        }
        let _ = sys::cap_delete(self.slot);
        match m.stats() {
            Ok(s) if s.used == before => {}
            r => wrong!(n, dead, r, "mem.stats after free (want used={})", before),
        }
        (n, dead)
    }

    /// Reads hello.txt through an open file and closes it.
    fn read_hello(&mut self, f: u64, n: &mut u64, dead: &mut bool, via: &str) {
        let fc = file::Client::new(f);
        let (mut n2, mut d2) = (0, false);
        match fc.read(0, 64) {
            Ok(b) if &b[..] == HELLO => {}
            r => wrong!(n2, d2, r.map(|b| b.len()), "{}: read hello.txt", via),
        }
        match fc.close() {
            Ok(()) => {}
            r => wrong!(n2, d2, r, "{}: close", via),
        }
        let _ = sys::cap_delete(f);
        *n += n2;
        *dead |= d2;
    }

    fn vfs(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("vfs") else {
            return (1, false);
        };
        let v = vfs::Client::new(ep);
        match v.open(b"/hello.txt", OpenFlags::READ, 0, self.slot) {
            Ok(o) if o.size == HELLO.len() as u64 => {
                self.read_hello(o.file, &mut n, &mut dead, "vfs")
            }
            Ok(o) => {
                wrong!(
                    n,
                    dead,
                    Ok::<u64, RpcError<()>>(o.size),
                    "vfs.open /hello.txt size"
                );
                let _ = sys::cap_delete(self.slot);
            }
            r => wrong!(n, dead, r.map(|_| ()), "vfs.open /hello.txt"),
        }
        match v.stat(b"/docs/medium.bin", true) {
            Ok(s) if s.size == 20000 => {}
            r => wrong!(
                n,
                dead,
                r.map(|s| s.size),
                "vfs.stat /docs/medium.bin (want 20000 bytes)"
            ),
        }
        match v.readdir(b"/docs", 0) {
            Ok(_) => {}
            r => wrong!(n, dead, r.map(|_| ()), "vfs.readdir /docs"),
        }
        (n, dead)
    }

    fn pfs(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("vfs") else {
            return (1, false);
        };
        let s = match self.session {
            Some(s) => s,
            None => {
                let s = thread::alloc_slot();
                match vfs::Client::new(ep).mount(0, s) {
                    Ok(m) => {
                        self.session = Some(m.s);
                        m.s
                    }
                    r => {
                        wrong!(n, dead, r.map(|_| ()), "vfs.mount 0 (a session)");
                        return (n, dead);
                    }
                }
            }
        };
        match pfs::Client::new(s).open_path(b"hello.txt", OpenFlags::READ, 0, self.slot) {
            Ok(o) => self.read_hello(o.file, &mut n, &mut dead, "pfs session"),
            r => wrong!(n, dead, r.map(|_| ()), "pfs.open_path hello.txt"),
        }
        (n, dead)
    }

    fn pci(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("pci") else {
            return (1, false);
        };
        // Our badge has no device: the right answer is NotYours, and nothing granted.
        match pci::Client::new(ep).claim(0, TASK, self.slot) {
            Err(RpcError::App(PciError::NotYours)) => {}
            r => wrong!(
                n,
                dead,
                r.map(|c| c.vendor),
                "pci.claim by a badge without devices (want NotYours)"
            ),
        }
        let _ = sys::cap_delete(self.slot);
        (n, dead)
    }
}

impl Checker {
    /// The console answers another client correctly: its settings come back as they were set
    /// (whatever the hostile client left), a write is taken whole, and nothing is pending on
    /// the output endpoint's side that a read there could wait for.
    fn console(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("console") else {
            return (1, false);
        };
        let c = console::Client::new(ep);
        match c.tcgets() {
            Ok(t) => {
                let mut cc = t.cc;
                cc[0] ^= 1;
                let set = c.tcsets(t.iflag, t.oflag, t.cflag, t.lflag, t.line, cc, false);
                match (set, c.tcgets()) {
                    (Ok(()), Ok(u)) if u.cc == cc && u.lflag == t.lflag && u.iflag == t.iflag => {}
                    r => wrong!(
                        n,
                        dead,
                        r.1.map(|u| u.cc),
                        "console.tcsets then tcgets (want the new settings)"
                    ),
                }
            }
            r => wrong!(n, dead, r.map(|t| t.lflag), "console.tcgets"),
        }
        match c.write(b"check\n") {
            Ok(6) => {}
            r => wrong!(n, dead, r, "console.write of 6 bytes (want 6)"),
        }
        match c.set_winsize(24, 80).and_then(|_| c.winsize()) {
            Ok(w) if w.rows == 24 && w.cols == 80 => {}
            r => wrong!(
                n,
                dead,
                r.map(|w| (w.rows, w.cols)),
                "console.set_winsize then winsize"
            ),
        }
        (n, dead)
    }
}

impl Checker {
    /// The pipe server answers another client correctly: a pipe is created, its ends report the
    /// ring's size, a poke and a sync are answered, a registration of a notification is taken,
    /// and calls on the wrong capability are refused.
    fn pipe(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("pipe") else {
            return (1, false);
        };
        let p = pipe::Client::new(ep);
        let (a, b) = (thread::alloc_slot(), thread::alloc_slot());
        match p.create(a, b) {
            Ok(ends) => {
                match dataspace::Client::new(ends.read).info() {
                    Ok(i) if i.size == sawmill_pipe_api::RING_BYTES as u64 => {}
                    r => wrong!(
                        n,
                        dead,
                        r.map(|i| i.size),
                        "info of a pipe end (want the ring)"
                    ),
                }
                let end = pipe::Client::new(ends.write);
                match end.poke().and_then(|_| end.sync()) {
                    Ok(()) => {}
                    r => wrong!(n, dead, r, "poke and sync on an end"),
                }
                if let Ok(wake) = thread::create(sawmill_abi::ObjKind::Notification, 0) {
                    match end.register(wake, 4) {
                        Ok(()) => {}
                        r => wrong!(n, dead, r, "register on an end"),
                    }
                    let _ = sys::cap_delete(wake);
                }
                match p.poke() {
                    Err(RpcError::App(PipeError::Invalid)) => {}
                    r => wrong!(n, dead, r, "poke on the server (want Invalid)"),
                }
                let _ = sys::cap_delete(ends.read);
                let _ = sys::cap_delete(ends.write);
            }
            r => wrong!(n, dead, r.map(|_| ()), "pipe.create"),
        }
        // A local socket: a listener on a name of ours, a connection to it, accepted.
        let name = b"\0hostile-check";
        let l = thread::alloc_slot();
        match p.listen(name, 4, l) {
            Ok(l) => {
                let (r, w) = (thread::alloc_slot(), thread::alloc_slot());
                match p.connect(name, r, w) {
                    Ok(c) => {
                        let lc = pipe::Client::new(l);
                        match lc.pending() {
                            Ok(1) => {}
                            r => wrong!(n, dead, r, "pending after a connect (want 1)"),
                        }
                        let (ar, aw) = (thread::alloc_slot(), thread::alloc_slot());
                        match lc.accept(ar, aw) {
                            Ok(a) => {
                                let _ = sys::cap_delete(a.read);
                                let _ = sys::cap_delete(a.write);
                            }
                            r => wrong!(n, dead, r.map(|_| ()), "accept"),
                        }
                        let _ = sys::cap_delete(c.read);
                        let _ = sys::cap_delete(c.write);
                    }
                    r => wrong!(n, dead, r.map(|_| ()), "connect to a listener"),
                }
                let _ = sys::cap_delete(l);
                // Its name is free once the server took the notice.
                let _ = p.sync();
            }
            r => wrong!(n, dead, r.map(|_| ()), "listen on a free name"),
        }
        (n, dead)
    }
}

impl Checker {
    /// The network stack answers another client correctly: its configuration, a UDP socket
    /// bound to a free port and named, a TCP socket listening with nothing to accept, both
    /// dropped, and a socket call on the stack's endpoint (no socket) refused.
    fn socket(&mut self) -> (u64, bool) {
        let (mut n, mut dead) = (0, false);
        let Some(ep) = env::cap("socket") else {
            return (1, false);
        };
        let sk = socket::Client::new(ep);
        match sk.config() {
            Ok(c) if c.addr == 0x0a00_020f && c.prefix == 24 => {}
            r => wrong!(n, dead, r, "socket.config (want 10.0.2.15/24)"),
        }
        match sk.create(SockKind::Udp, self.slot) {
            Ok(c) => {
                let u = sock::Client::new(c);
                match u.bind(0, 0).and_then(|_| u.name()) {
                    Ok(a) if a.port >= 49152 => {}
                    r => wrong!(
                        n,
                        dead,
                        r,
                        "bind to port 0 and name (want an ephemeral port)"
                    ),
                }
                match u.recv_from(16) {
                    Err(RpcError::App(SockError::WouldBlock)) => {}
                    r => wrong!(n, dead, r.map(|_| ()), "recv_from with nothing sent"),
                }
                // Another client hoarding channels leaves this one its share.
                let chan = thread::alloc_slot();
                match u.channel(chan) {
                    Ok(_) => {
                        let _ = sys::cap_delete(chan);
                    }
                    r => wrong!(
                        n,
                        dead,
                        r,
                        "a channel (want one: others hold only their share)"
                    ),
                }
                let _ = sys::cap_delete(c);
            }
            r => wrong!(n, dead, r, "create a UDP socket"),
        }
        match sk.create(SockKind::Tcp, self.slot) {
            Ok(c) => {
                let t = sock::Client::new(c);
                match t.listen(4).and_then(|_| t.ready()) {
                    Ok(r) if r.is_empty() => {}
                    r => wrong!(n, dead, r, "listen and ready (want nothing pending)"),
                }
                match t.accept(thread::alloc_slot()) {
                    Err(RpcError::App(SockError::WouldBlock)) => {}
                    r => wrong!(n, dead, r.map(|_| ()), "accept with nobody connecting"),
                }
                let _ = sys::cap_delete(c);
            }
            r => wrong!(n, dead, r, "create a TCP socket"),
        }
        match sock::Client::new(ep).ready() {
            Err(RpcError::Protocol(_)) | Err(RpcError::App(SockError::BadSocket)) => {}
            r => wrong!(
                n,
                dead,
                r,
                "ready asked on the stack's endpoint (want a refusal)"
            ),
        }
        (n, dead)
    }
}

/// Serves the `check` endpoint for ever.
pub fn serve() -> ! {
    let ep = env::cap("check").expect("check endpoint");
    let mut c = Checker {
        slot: thread::alloc_slot(),
        session: None,
    };
    println!("hostile-check: ready");
    let mut m = ipc::recv(ep, 0);
    loop {
        if m.err != 0 {
            m = ipc::recv(ep, 0);
            continue;
        }
        let (n, dead) = match m.tag.label() {
            MEM => c.mem(),
            VFS => c.vfs(),
            PFS => c.pfs(),
            PCI => c.pci(),
            CONSOLE => c.console(),
            PIPE => c.pipe(),
            SOCKET => c.socket(),
            _ => (1, false),
        };
        m = ipc::reply_recv(ep, MsgTag::new(0, 2), [n, dead as u64, 0, 0]);
    }
}
