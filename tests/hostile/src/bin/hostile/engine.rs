//! The firing side of the hostile client: turns generated messages into real calls (words,
//! capability items, map items, the non-blocking bit), keeps the capabilities the servers hand
//! back (to call them later, to close them, to call them again after closing), counts every
//! outcome, and runs the watchdog that reports a hang.
//!
//! Touches only its own task: its capability slots (a reused pool), its UTCB, and two bait pages
//! that map items offer to servers (never read or written here, so a server that takes them with
//! GRANT harms nobody).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use sawmill_abi::{kinfo, map, MapItem, MsgTag};
use sawmill_hostile::{message, Learned, Msg, Rng, Summary, Tally, Target};
use sawmill_rt::ipc::{self, IpcResult};
use sawmill_rt::{println, slots, sys, thread, utcb};

// The generator's view of the protocol labels must match the runtime's.
const _: () = assert!(sawmill_hostile::BAD_OPCODE == sawmill_interfaces::rpc::proto::BAD_OPCODE);
const _: () = assert!(sawmill_hostile::BAD_SHAPE == sawmill_interfaces::rpc::proto::BAD_SHAPE);

/// Calls that have come back; the watchdog compares it over time.
pub static PROGRESS: AtomicU64 = AtomicU64::new(0);
/// Set once the run is over: the watchdog stops.
pub static FINISHED: AtomicBool = AtomicBool::new(false);
/// What the watchdog prints if the run hangs (set once at start).
static SERVER: spin_free::Name = spin_free::Name::new();
static SEED: AtomicU64 = AtomicU64::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);

/// A `&'static str` shared with the watchdog without a lock: written once before it starts.
mod spin_free {
    use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
    pub struct Name(AtomicPtr<u8>, AtomicUsize);
    impl Name {
        pub const fn new() -> Name {
            Name(AtomicPtr::new(core::ptr::null_mut()), AtomicUsize::new(0))
        }
        pub fn set(&self, s: &'static str) {
            self.1.store(s.len(), Ordering::SeqCst);
            self.0.store(s.as_ptr() as *mut u8, Ordering::SeqCst);
        }
        pub fn get(&self) -> &'static str {
            let p = self.0.load(Ordering::SeqCst);
            if p.is_null() {
                return "?";
            }
            // SAFETY: `p` and the length came from one `&'static str` in `set`.
            let b = unsafe { core::slice::from_raw_parts(p, self.1.load(Ordering::SeqCst)) };
            core::str::from_utf8(b).unwrap_or("?")
        }
    }
}

/// Two pages map items may offer; page-aligned so nothing else of ours shares them.
#[repr(C, align(4096))]
struct Bait([u8; 8192]);
static BAIT: Bait = Bait([0; 8192]);

/// Where replies' map items may land (when the window is open): never read or written here.
pub const SCRATCH: u64 = 0x6000_0000;
pub const SCRATCH_SIZE: u64 = 64 * 4096;

/// What a held capability is, which decides how it is called and how it is given back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// An open file of a PFS (file + dataspace interfaces; given back with `close`).
    File,
    /// A dataspace of mem (given back with `free`).
    Ds,
    /// A PFS session (pfs interface; simply dropped).
    Session,
    /// Anything else a reply carried (dropped).
    Other,
}

#[derive(Clone, Copy, Debug)]
pub struct Held {
    pub slot: u64,
    pub kind: Kind,
}

/// At most this many capabilities are held, and this many closed ones kept for calls after close.
const HOLD: usize = 8;
const KEEP_CLOSED: usize = 8;

pub struct Engine {
    pub rng: Rng,
    pub learned: Learned,
    pub tally: Tally,
    pub seed: u64,
    pub server: &'static str,
    free: Vec<u64>,
    pub held: Vec<Held>,
    pub closed: Vec<Held>,
}

impl Engine {
    pub fn new(server: &'static str, seed: u64) -> Engine {
        SERVER.set(server);
        SEED.store(seed, Ordering::SeqCst);
        Engine {
            rng: Rng::new(seed),
            learned: Learned::new(),
            tally: Tally::default(),
            seed,
            server,
            free: Vec::new(),
            held: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// An empty slot of ours (reused: a task has only 1024).
    pub fn slot(&mut self) -> u64 {
        self.free.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// Deletes whatever is in `slot` and makes it free again.
    pub fn release(&mut self, slot: u64) {
        let _ = sys::cap_delete(slot);
        self.free.push(slot);
    }

    /// A call that counts (progress for the watchdog, the tally).
    pub fn call(&mut self, ep: u64, tag: MsgTag, w: [u64; 4]) -> IpcResult {
        let r = ipc::call(ep, tag, w);
        self.done(&r);
        r
    }

    fn done(&mut self, r: &IpcResult) {
        self.tally.count(r.err, r.tag.label());
        PROGRESS.fetch_add(1, Ordering::Relaxed);
        SENT.store(self.tally.sent, Ordering::Relaxed);
    }

    /// A capability item to send: an empty slot, a bogus slot number, one of ours (the target
    /// itself, a held or closed capability, our own thread), or our task.
    fn cap_item(&mut self, ep: u64) -> u64 {
        match self.rng.below(10) {
            0 => 1000,
            1 => self.rng.pick(&[u64::MAX, 1 << 32, 4096]),
            2 | 3 => ep,
            4 | 5 if !self.held.is_empty() => {
                self.held[self.rng.below(self.held.len() as u64) as usize].slot
            }
            6 if !self.closed.is_empty() => {
                self.closed[self.rng.below(self.closed.len() as u64) as usize].slot
            }
            7 => slots::THREAD,
            8 => slots::TASK,
            _ => ep,
        }
    }

    fn map_item(&mut self) -> MapItem {
        let bait = BAIT.0.as_ptr() as u64;
        let r = &mut self.rng;
        let noise = r.next_u64();
        MapItem {
            src: r.pick(&[
                bait,
                bait + 4096,
                bait + 1,
                0,
                0xffff_8000_0000_0000,
                0x7fff_ffff_f000,
                noise,
            ]),
            dst: sawmill_hostile::word(r, &[0x4000_0000, SCRATCH, SCRATCH + 4096]),
            pages: r.pick(&[1, 2, 0, 3, 512, u64::MAX]),
            flags: r.pick(&[
                map::READ,
                map::READ | map::WRITE,
                map::READ | map::WRITE | map::EXEC,
                map::HUGE | map::READ,
                map::GRANT | map::READ,
                noise,
            ]),
        }
    }

    /// Sends one generated message for `t` to `ep` and keeps what comes back; capabilities in the
    /// reply are held as `kind_of(label)`.
    pub fn fire(&mut self, ep: u64, t: &Target, kind_of: impl Fn(u16) -> Kind) -> IpcResult {
        let m: Msg = message(&mut self.rng, t, &self.learned);
        let mut caps = [0u64; 4];
        for c in caps.iter_mut() {
            *c = self.cap_item(ep);
        }
        let mut maps = [MapItem::default(); 4];
        for mi in maps.iter_mut() {
            *mi = self.map_item();
        }
        let rx = [self.slot(), self.slot(), self.slot(), self.slot()];
        let u = utcb();
        u.mr[4..].copy_from_slice(&m.w[4..]);
        u.caps_out = caps;
        u.caps_in = rx;
        u.map_items = maps;
        // Sometimes open a receive window, so that what a server maps really lands (and is
        // charged); the scratch range is never touched here.
        u.map_window = if self.rng.chance(25) {
            [SCRATCH, SCRATCH_SIZE]
        } else {
            [0, 0]
        };
        let tag = MsgTag(m.tag());
        let w = [m.w[0], m.w[1], m.w[2], m.w[3]];
        let oneway = self.rng.chance(3);
        let r = if oneway {
            // One-way: the server's reply goes nowhere.
            let err = ipc::send(ep, tag, w);
            IpcResult {
                err,
                badge: 0,
                tag: MsgTag(0),
                w: [0; 4],
            }
        } else {
            ipc::call(ep, tag, w)
        };
        self.done(&r);
        let got = if r.err == 0 { r.tag.caps().min(4) } else { 0 };
        // A one-way message has no answer to learn from.
        if r.err == 0 && !oneway {
            self.learned.note(m.label, m.shape, r.tag.label());
        }
        for (i, &s) in rx.iter().enumerate() {
            if i < got {
                self.hold(Held {
                    slot: s,
                    kind: kind_of(m.label),
                });
            } else {
                // Nothing arrived there; deleting an empty slot is harmless.
                self.release(s);
            }
        }
        r
    }

    /// Keeps a capability a server handed us; past [`HOLD`] the oldest is given back.
    pub fn hold(&mut self, h: Held) {
        self.held.push(h);
        if self.held.len() > HOLD {
            let old = self.held.remove(0);
            self.give_back(old);
        }
    }

    /// Closes a file / frees a dataspace properly, and keeps the dead capability a while to call
    /// it after close.
    pub fn give_back(&mut self, h: Held) {
        let label = match h.kind {
            Kind::File => Some(sawmill_interfaces::file::op::CLOSE),
            Kind::Ds => Some(sawmill_interfaces::dataspace::op::FREE),
            _ => None,
        };
        if let Some(l) = label {
            self.call(h.slot, MsgTag::new(l, 0), [0; 4]);
        }
        self.closed.push(h);
        if self.closed.len() > KEEP_CLOSED {
            let old = self.closed.remove(0);
            self.release(old.slot);
        }
    }

    /// Gives back everything held (at the end, so the servers' tables are as before).
    pub fn give_back_all(&mut self) {
        while let Some(h) = self.held.pop() {
            self.give_back(h);
        }
        while let Some(h) = self.closed.pop() {
            self.release(h.slot);
        }
    }

    /// A target for the next message: the server's endpoint mostly, else a held capability, a
    /// closed one (use after close) or a slot that holds nothing.
    pub fn pick_target(&mut self, main: u64) -> (u64, Option<Kind>) {
        match self.rng.below(100) {
            0..=59 => (main, None),
            60..=89 if !self.held.is_empty() => {
                let h = self.held[self.rng.below(self.held.len() as u64) as usize];
                (h.slot, Some(h.kind))
            }
            60..=94 if !self.closed.is_empty() => {
                let h = self.closed[self.rng.below(self.closed.len() as u64) as usize];
                (h.slot, Some(h.kind))
            }
            95..=99 => (self.rng.pick(&[1000, u64::MAX, 4095]), None),
            _ => (main, None),
        }
    }

    pub fn summary(&self, alive: bool) {
        // How deep the run reached: labels whose accepted shapes it learned.
        println!(
            "hostile: {} learned the shapes of {} labels",
            self.server,
            self.learned.labels_known()
        );
        println!(
            "{}",
            Summary {
                server: self.server,
                tally: &self.tally,
                alive,
                seed: self.seed
            }
        );
    }
}

/// Timer ticks (10 ms each) without progress that count as a hang, unless `hang_ticks=N` says
/// otherwise.
const HANG_TICKS: u64 = 3000;

/// Starts the watchdog: a lowest-priority thread that runs only when everything else waits. If no
/// call came back for [`HANG_TICKS`], it reports the hang with the usual summary line and ends
/// the task (root reaps it).
pub const DEFAULT_HANG_TICKS: u64 = HANG_TICKS;

pub fn start_watchdog(hang_ticks: u64) {
    let r = thread::spawn(1, 8192, move || {
        let mut last = PROGRESS.load(Ordering::Relaxed);
        let mut since = sys::kernel_info(kinfo::TICKS).unwrap_or(0);
        while !FINISHED.load(Ordering::Relaxed) {
            sys::yield_now();
            let now = sys::kernel_info(kinfo::TICKS).unwrap_or(0);
            let p = PROGRESS.load(Ordering::Relaxed);
            if p != last {
                last = p;
                since = now;
            } else if now.saturating_sub(since) > hang_ticks {
                let t = Tally {
                    sent: SENT.load(Ordering::Relaxed),
                    hangs: 1,
                    ..Tally::default()
                };
                println!(
                    "hostile: {} hung: no answer for {} ticks after {} messages",
                    SERVER.get(),
                    hang_ticks,
                    t.sent
                );
                println!(
                    "{}",
                    Summary {
                        server: SERVER.get(),
                        tally: &t,
                        alive: false,
                        seed: SEED.load(Ordering::Relaxed)
                    }
                );
                let _ = sys::task_kill(slots::TASK);
                return;
            }
        }
    });
    if let Err(e) = r {
        println!(
            "hostile: no watchdog ({}): hangs will show as a scenario timeout",
            e.name()
        );
    }
}
