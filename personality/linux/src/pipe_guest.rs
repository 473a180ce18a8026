//! The guest side of pipes and waiting: [`PipeHost`] for the process's backend, over the pipe
//! server (`pipe`: create ends, register, poke, waker, sync), the region manager (each end's ring is
//! attached as a dataspace of the pipe server, in the library's own range, paged in on touch)
//! and the process's one wake notification (`proc:wake`, `sawmill_proc_api::WAKE_*`).
//!
//! It touches the capabilities named above and the `console` (its `watch`), and the end
//! capabilities the pipe server hands out (one slot per end, and per end at most one
//! signal-only capability to the other end's one waiter; slots are reused).
//!
//! **Wake bits.** Every blocking wait of the process is on the one notification, whose wait
//! takes all bits at once. [`PipeHost::wait_io`] ends on `WAKE_IO`; bits it does not handle
//! (a child, a signal) are kept while it waits and posted back to the notification when it
//! returns, so the wait that does handle them (wait4, the signals layer) still sees them.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use sawmill_interfaces::pipe;
use sawmill_linux::errno::*;
use sawmill_linux::files::pipe::PipeHost;
use sawmill_linux::Errno;
use sawmill_pipe_api::{End, Ring, RING_BYTES};
use sawmill_proc_api::{WAKE_CAP, WAKE_IO};
use sawmill_rm as rm;
use sawmill_rt::{env, sys, thread};

use crate::files_guest::Guest;

/// How long a ring lock may stay held before its holder is presumed dead (ms): far above the
/// few hundred instructions a holder keeps it, far below anything a person would notice.
const LOCK_PATIENCE_MS: u64 = 200;

/// One end this process holds.
struct EndState {
    /// Where its ring is attached.
    at: u64,
    /// Whether this process's wake notification is registered with it. (A forked child starts
    /// a fresh library: it adopts its ends unregistered, with its own pid as its lock token.)
    registered: bool,
    /// What this process knows of the other end's waiters.
    waker: Waker,
}

/// The other end's registered waiters, as learnt from the server (`waker`) when that end's
/// registration count (in the ring) was `registrations`; valid while the count stays.
#[derive(Clone, Copy)]
enum Waker {
    /// Not asked yet.
    Unknown,
    /// One: capability `slot` signals its `WAKE_IO` (and nothing else), no server call needed.
    One { registrations: u32, slot: u64 },
    /// None or several: `poke` the server, which signals them all.
    NotOne { registrations: u32 },
}

/// The process's pipe state.
pub struct Pipes {
    pub(crate) server: Option<pipe::Client>,
    pub(crate) wake: Option<u64>,
    ends: EndTable,
    pub(crate) free_slots: Vec<u64>,
    token: u32,
    /// TSC ticks per ms (the clock of deadlines and lock patience); 0 until asked (`khz`).
    khz: u64,
}

/// The process's pipe ends by capability slot: a list searched from its newest entry, since a
/// process holds a few ends and looks one up at every transfer, wait and wake (a `BTreeMap`'s
/// search cost more of a pipe round trip).
struct EndTable(Vec<(u64, EndState)>);

impl EndTable {
    fn at(&self, slot: u64) -> Option<usize> {
        self.0.iter().rposition(|e| e.0 == slot)
    }
    fn get(&self, slot: &u64) -> Option<&EndState> {
        self.at(*slot).map(|i| &self.0[i].1)
    }
    fn get_mut(&mut self, slot: &u64) -> Option<&mut EndState> {
        self.at(*slot).map(|i| &mut self.0[i].1)
    }
    /// Records `slot`'s state, replacing what it had.
    fn insert(&mut self, slot: u64, state: EndState) {
        match self.at(slot) {
            Some(i) => self.0[i].1 = state,
            None => self.0.push((slot, state)),
        }
    }
    fn remove(&mut self, slot: &u64) -> Option<EndState> {
        self.at(*slot).map(|i| self.0.swap_remove(i).1)
    }
}

/// When the current wait for a ring lock began (TSC).
static LOCK_WAIT_START: AtomicU64 = AtomicU64::new(0);

impl Pipes {
    pub fn new() -> Pipes {
        let pid = env::find_all(env::KIND_LINUX_IDS)
            .next()
            .map_or(1, |(pid, _)| pid);
        Pipes::with_caps(env::cap(pipe::NAME), env::cap(WAKE_CAP), pid)
    }

    /// The state over the pipe server's capability and the wake notification (found by the
    /// caller), for process `pid`.
    pub fn with_caps(server: Option<u64>, wake: Option<u64>, pid: u64) -> Pipes {
        Pipes {
            server: server.map(pipe::Client::new),
            wake,
            ends: EndTable(Vec::new()),
            free_slots: Vec::new(),
            // Not 0 (the free lock), and different from other processes'.
            token: (pid as u32).max(1),
            khz: 0,
        }
    }

    /// TSC ticks per ms, asked of the kernel on first use (three calls that most processes,
    /// which never wait with a deadline, do without).
    fn khz(&mut self) -> u64 {
        if self.khz == 0 {
            self.khz = sawmill_rt::clock::Wall::get().khz.max(1);
        }
        self.khz
    }

    pub(crate) fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    fn client(&self, end: u64) -> pipe::Client {
        pipe::Client::new(end)
    }

    /// Attaches the ring of end `slot` (paged in from the pipe server on first touch).
    fn attach(&mut self, slot: u64) -> Result<(), Errno> {
        let at = rm::attach(slot, 0, RING_BYTES as u64, None, rm::READ | rm::WRITE)
            .map_err(|_| ENOMEM)?;
        self.ends.insert(
            slot,
            EndState {
                at,
                registered: false,
                waker: Waker::Unknown,
            },
        );
        Ok(())
    }

    /// Takes over a pipe end another image of the process (or its parent) held: capability
    /// `slot` of this task, its ring attached anew. Returns the end's handle.
    pub fn adopt(&mut self, slot: u64) -> Result<u64, Errno> {
        self.attach(slot)?;
        Ok(slot)
    }

    /// Drops end `slot`: its ring, its capability (the server learns whether it was the last).
    pub(crate) fn drop_end(&mut self, slot: u64) {
        if let Some(e) = self.ends.remove(&slot) {
            let _ = rm::detach(e.at);
            self.forget_waker(e.waker);
        }
        let _ = sys::cap_delete(slot);
        self.free_slots.push(slot);
    }
}

impl Pipes {
    /// Asks the server to wake the other end's waiters (none or several registered).
    #[cold]
    #[inline(never)]
    fn poke(&self, end: u64) {
        let _ = self.client(end).poke();
    }

    /// Drops the capability a [`Waker::One`] holds.
    fn forget_waker(&mut self, w: Waker) {
        if let Waker::One { slot, .. } = w {
            let _ = sys::cap_delete(slot);
            self.free_slots.push(slot);
        }
    }

    /// Wakes the other end of `end` directly if it has one registered waiter (its
    /// notification, signalled through the signal-only capability the server handed out);
    /// false if the server must be poked. The registration count is read after the caller saw
    /// the other side waiting, and a waiter registers before it counts itself in: a waiter
    /// the cached capability does not reach has changed the count.
    #[inline]
    fn wake_directly(&mut self, end: u64, ring: Ring, side: End) -> bool {
        let now = ring.registrations(side.peer());
        let Some(known) = self.ends.get(&end).map(|e| e.waker) else {
            return false;
        };
        match known {
            Waker::One {
                registrations,
                slot,
            } if registrations == now && sys::notify_signal(slot, WAKE_IO).is_ok() => true,
            Waker::NotOne { registrations } if registrations == now => false,
            _ => self.learn_waker(end, known, now),
        }
    }

    /// [`Pipes::wake_directly`] when what it knew of the other end is stale: asks the server
    /// (`waker`) anew and wakes with what it learns.
    #[cold]
    #[inline(never)]
    fn learn_waker(&mut self, end: u64, known: Waker, now: u32) -> bool {
        self.forget_waker(known);
        let slot = self.slot();
        let (learnt, woke) = match self.client(end).waker(slot) {
            Ok(o) => (
                Waker::One {
                    registrations: o.registrations as u32,
                    slot,
                },
                sys::notify_signal(slot, WAKE_IO).is_ok(),
            ),
            Err(_) => {
                self.free_slots.push(slot);
                (Waker::NotOne { registrations: now }, false)
            }
        };
        if let Some(e) = self.ends.get_mut(&end) {
            e.waker = learnt;
        }
        woke
    }
}

impl Default for Pipes {
    fn default() -> Self {
        Self::new()
    }
}

fn now_ms(khz: u64) -> u64 {
    sys::rdtsc() / khz
}

impl PipeHost for Guest {
    fn pipe_create(&mut self) -> Result<(u64, u64), Errno> {
        let p = &mut self.pipes;
        let server = p.server.ok_or(ENFILE)?;
        let (r, w) = (p.slot(), p.slot());
        let made = match server.create(r, w) {
            Ok(o) => (o.read, o.write),
            Err(e) => {
                p.free_slots.extend([r, w]);
                return Err(match e {
                    sawmill_interfaces::rpc::Error::App(sawmill_interfaces::PipeError::NoSpace) => {
                        ENFILE
                    }
                    _ => ENOMEM,
                });
            }
        };
        if let Err(e) = p.attach(made.0).and_then(|_| p.attach(made.1)) {
            p.drop_end(made.0);
            p.drop_end(made.1);
            return Err(e);
        }
        Ok(made)
    }

    fn pipe_ring(&mut self, end: u64) -> Option<Ring> {
        let e = self.pipes.ends.get(&end)?;
        // SAFETY: the ring is attached read-write at `at` (RING_BYTES) until `pipe_close`
        // detaches it; the region manager pages it in from the pipe server when touched.
        Some(unsafe { Ring::new(e.at as *mut u8) })
    }

    fn pipe_close(&mut self, end: u64) {
        self.pipes.drop_end(end);
        // Once the server answers, it has taken the notice our deletion may have caused: the
        // other end's `*_gone` is set before this process's next call (a read right after
        // closing the write end sees end of file at once).
        if let Some(s) = self.pipes.server {
            let _ = s.sync();
        }
    }

    fn pipe_poke(&mut self, end: u64, ring: Ring, side: End) {
        if !self.pipes.wake_directly(end, ring, side) {
            self.pipes.poke(end);
        }
    }

    fn pipe_watch(&mut self, end: u64) -> Result<(), Errno> {
        let Some(wake) = self.pipes.wake else {
            return Ok(()); // no notification: `wait_io` polls
        };
        let c = self.pipes.client(end);
        let e = self.pipes.ends.get_mut(&end).ok_or(EBADF)?;
        if !e.registered {
            c.register(wake, WAKE_IO).map_err(|_| ENOMEM)?;
            e.registered = true;
        }
        Ok(())
    }

    fn console_watch(&mut self) -> Result<(), Errno> {
        if let (Some(c), Some(wake)) = (self.console, self.pipes.wake) {
            c.watch(wake, WAKE_IO).map_err(|_| EIO)?;
        }
        Ok(())
    }

    fn console_readable(&mut self) -> bool {
        self.console.is_some_and(|c| c.readable().unwrap_or(false))
    }

    fn signal_pending(&mut self) -> bool {
        crate::signal_guest::interrupted_before_wait()
    }

    fn wait_mask_begin(&mut self, mask: u64) {
        crate::signal_guest::wait_mask_begin(mask);
    }

    fn wait_mask_end(&mut self, interrupted: bool) {
        crate::signal_guest::wait_mask_end(interrupted);
    }

    fn wait_io(&mut self, deadline: Option<u64>) -> Result<bool, Errno> {
        // Every wait of the process goes through the signals layer's, so a caught signal ends
        // it (EINTR, or a restart under SA_RESTART) and no wake bit is lost to another waiter:
        // a waiter always looks at its condition again before it waits.
        let tsc_deadline =
            deadline.map(|ns| (ns as u128 * self.pipes.khz() as u128 / 1_000_000) as u64);
        loop {
            if crate::signal_guest::interrupted_before_wait() {
                return Err(sawmill_linux::signal::ERESTARTSYS);
            }
            let bits = crate::files_guest::wait_wake_unbusy(tsc_deadline);
            if bits & WAKE_IO != 0 {
                return Ok(false);
            }
            if deadline.is_some_and(|d| self.now_ns() >= d) {
                return Ok(true);
            }
        }
    }

    fn now_ns(&mut self) -> u64 {
        ((sys::rdtsc() as u128) * 1_000_000 / self.pipes.khz() as u128) as u64
    }

    fn lock_token(&mut self) -> u32 {
        self.pipes.token
    }

    fn lock_patience(&mut self, tries: u32) -> bool {
        let khz = self.pipes.khz();
        if tries == 1 {
            LOCK_WAIT_START.store(now_ms(khz), Ordering::Relaxed);
        }
        sys::yield_now();
        now_ms(khz).saturating_sub(LOCK_WAIT_START.load(Ordering::Relaxed)) < LOCK_PATIENCE_MS
    }

    fn sigpipe(&mut self) {
        let _ = crate::signal_guest::raise_self(
            sawmill_linux::signal::SIGPIPE,
            sawmill_linux::signal::SI_USER,
        );
    }
}
