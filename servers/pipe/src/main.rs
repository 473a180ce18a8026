//! The pipe server: serves `interfaces/pipe.idl` and, on each end, `dataspace` (the pipe's
//! ring). A pipe's ring ([`RING_BYTES`]: control page and 64 KiB of data) is a slice of a slab:
//! an anonymous dataspace of `mem` holding [`SLAB_PIPES`] rings (mem bounds the dataspaces of
//! one client), which the server keeps attached and maps onward, page by page, to whoever
//! attaches an end. When a pipe ends, the server revokes every mapping made from its pages and
//! zeroes each page it mapped writable and the control page (no former holder can see the next
//! pipe in that place); the ends read and write the ring themselves (`sawmill_pipe_api::Ring`).
//! The server does three things only: hand out ends (`create`), wake the registered waiters
//! of an end (`poke`, and when the other end goes; or hand the other side a signal-only
//! capability to an end's one waiter, `waker`), and mark an end gone (`*_gone` in the control
//! page) when the kernel's `NO_SENDERS` notice says its last capability is gone — closed,
//! dropped at exit or exec, or its process died. It never reads the ring's positions, so nothing a client
//! writes there can mislead it.
//!
//! Bounds: at most [`MAX_PIPES`] pipes, [`MAX_WATCHERS`] registrations per end and
//! [`MAX_REGISTRATIONS`] in all (each a capability slot of ours); a registration whose
//! notification is gone (its process ended) is dropped when found. It touches its endpoint,
//! `mem` and the notifications clients register.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use sawmill_abi::rights;
use sawmill_interfaces::rpc::{self, AfterReply, IpcResult, Map, Next};
use sawmill_interfaces::{dataspace, pipe, DsError, DsFlags, MapFlags, PipeError};
use sawmill_pipe_api::{unix, End, Ring, MAX_PIPES, MAX_WATCHERS, RING_BYTES};
use sawmill_rm as rm;
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

/// Badges of end capabilities: this bit, the pipe's index shifted by one, and bit 0 for the
/// write end. No manifest badge is this large.
const END_BIT: u64 = 1 << 40;
/// The badge of our notice capability (the kernel's NO_SENDERS notices arrive with it).
const NOTICE_BADGE: u64 = 1 << 41;
/// Badges of listener capabilities: this bit and the listener's index.
const LISTENER_BIT: u64 = 1 << 42;
/// Listeners and datagram receivers in all (each holds a name).
const MAX_NAMES: usize = 64;
/// Most connections waiting in one listener's backlog (each holds two pipes).
const MAX_BACKLOG: usize = 16;
/// Registrations in all (each holds one capability slot).
const MAX_REGISTRATIONS: usize = 512;
/// Rings per slab dataspace.
const SLAB_PIPES: usize = 16;
const SLAB_BYTES: u64 = (SLAB_PIPES * RING_BYTES) as u64;
const PAGE: u64 = 4096;

struct Pipe {
    /// Where its ring is (in its slab, attached here).
    at: u64,
    /// Which ends still have a capability somewhere.
    alive: [bool; 2],
    /// Registered notifications of each end: (slot, bits).
    watchers: [Vec<(u64, u64)>; 2],
    /// Registrations ever made with each end (published in the ring: `waker`'s validity).
    registered: [u32; 2],
    /// The ring's pages (bit i: page i) mapped writable to a client: only those (and the
    /// control page, which we write too) can hold bytes when the pipe ends, so only those are
    /// cleared (a shell's pipe carries a few hundred bytes; clearing all 68 KiB was ~8.5k
    /// instructions a pipe).
    written: u32,
}

const RING_PAGES: usize = RING_BYTES / PAGE as usize;
const _: () = assert!(RING_PAGES <= 32 && RING_BYTES.is_multiple_of(PAGE as usize));

impl Pipe {
    fn ring(&self) -> Ring {
        // SAFETY: `at` holds RING_BYTES attached read-write and populated for as long as the
        // pipe exists.
        unsafe { Ring::new(self.at as *mut u8) }
    }
}

fn index(end: End) -> usize {
    match end {
        End::Read => 0,
        End::Write => 1,
    }
}

/// The credentials of a side that gave none (plain `listen`/`connect`): Linux's (pid 0, uid
/// and gid -1).
const NO_CRED: [u32; 3] = [0, u32::MAX, u32::MAX];

/// A listening local socket.
struct Listener {
    name: Vec<u8>,
    backlog: usize,
    /// Connections waiting for `accept`: our slots of the server side's (read, write) ends and
    /// the connecting side's credentials.
    waiting: VecDeque<(u64, u64, [u32; 3])>,
    /// The listener's credentials (pid, uid, gid): what those that connect get.
    cred: [u32; 3],
    /// Registered notifications: (slot, bits).
    watchers: Vec<(u64, u64)>,
}

/// A bound datagram socket: its name and its pipe's write end (our slot; copies go to senders).
struct Mailbox {
    name: Vec<u8>,
    pipe: usize,
    write: u64,
}

struct Server {
    /// Our endpoint (unbadged): end capabilities are minted from it.
    ep: u64,
    notice: u64,
    pipes: Vec<Option<Pipe>>,
    /// Where each slab is attached (its dataspace capability stays ours).
    slabs: Vec<u64>,
    /// Capability slots free for reuse (the runtime never reuses one itself).
    free_slots: Vec<u64>,
    /// Registrations held now.
    registrations: usize,
    listeners: Vec<Option<Listener>>,
    mailboxes: Vec<Mailbox>,
    after: AfterReply,
}

impl Server {
    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    fn free_slot(&mut self, s: u64) {
        let _ = sys::cap_delete(s);
        self.free_slots.push(s);
    }

    /// The pipe and end a badge names.
    fn end_of(&self, badge: u64) -> Result<(usize, End), PipeError> {
        if badge & END_BIT == 0 {
            return Err(PipeError::Invalid);
        }
        let i = ((badge & !END_BIT) >> 1) as usize;
        let end = if badge & 1 != 0 {
            End::Write
        } else {
            End::Read
        };
        match self.pipes.get(i) {
            Some(Some(_)) => Ok((i, end)),
            _ => Err(PipeError::Invalid),
        }
    }

    /// Signals every registered waiter of `end` of pipe `i`; drops those whose notification is
    /// gone.
    fn wake(&mut self, i: usize, end: End) {
        let Some(Some(p)) = self.pipes.get_mut(i) else {
            return;
        };
        let mut dead = Vec::new();
        p.watchers[index(end)].retain(|&(slot, bits)| {
            let ok = sys::notify_signal(slot, bits).is_ok();
            if !ok {
                dead.push(slot);
            }
            ok
        });
        for s in dead {
            self.registrations -= 1;
            self.free_slot(s);
        }
    }

    /// Drops the registrations of `end` whose notification is gone (a signal of no bits tells).
    fn prune(&mut self, i: usize, end: End) {
        let Some(Some(p)) = self.pipes.get_mut(i) else {
            return;
        };
        let mut dead = Vec::new();
        p.watchers[index(end)].retain(|&(slot, _)| {
            let ok = sys::notify_signal(slot, 0).is_ok();
            if !ok {
                dead.push(slot);
            }
            ok
        });
        for s in dead {
            self.registrations -= 1;
            self.free_slot(s);
        }
    }

    /// The address of ring `i`, its slab made if needed.
    fn ring_at(&mut self, i: usize) -> Result<u64, PipeError> {
        let slab = i / SLAB_PIPES;
        while self.slabs.len() <= slab {
            let mem = rm::mem().ok_or(PipeError::NoMemory)?;
            let ds = mem
                .alloc(SLAB_BYTES, 0, self.slot())
                .map_err(|_| PipeError::NoMemory)?;
            match rm::attach(ds, 0, SLAB_BYTES, None, rm::READ | rm::WRITE) {
                Ok(at) => self.slabs.push(at),
                Err(_) => {
                    let _ = dataspace::Client::new(ds).free();
                    self.free_slot(ds);
                    return Err(PipeError::NoMemory);
                }
            }
        }
        Ok(self.slabs[slab] + ((i % SLAB_PIPES) * RING_BYTES) as u64)
    }

    fn new_pipe(&mut self) -> Result<usize, PipeError> {
        let i = match self.pipes.iter().position(|p| p.is_none()) {
            Some(i) => i,
            None if self.pipes.len() < MAX_PIPES => {
                self.pipes.push(None);
                self.pipes.len() - 1
            }
            None => return Err(PipeError::NoSpace),
        };
        let at = self.ring_at(i)?;
        // Every page now: the pages we map onward must be there, and a fault in the server
        // would wait on mem.
        rm::populate(at, RING_BYTES as u64, true).map_err(|_| PipeError::NoMemory)?;
        // A ring is all zeros here: fresh from mem, or cleared when its last pipe ended.
        self.pipes[i] = Some(Pipe {
            at,
            alive: [true, true],
            watchers: [Vec::new(), Vec::new()],
            registered: [0, 0],
            written: 1,
        });
        Ok(i)
    }

    /// Ends pipe `i` (both ends gone): its registrations, every mapping made from its ring's
    /// pages (ours stay, for the next pipe in its place), its index.
    fn destroy(&mut self, i: usize) {
        let Some(p) = self.pipes.get_mut(i).and_then(|p| p.take()) else {
            return;
        };
        for w in p.watchers.iter() {
            for &(s, _) in w {
                self.registrations -= 1;
                self.free_slot(s);
            }
        }
        let _ = sys::unmap(p.at, (RING_BYTES as u64) / PAGE, 0);
        // Nothing of this pipe's data reaches whoever gets the next pipe in its place: every
        // page anyone could write is cleared.
        for page in (0..RING_PAGES).filter(|&k| p.written & (1 << k) != 0) {
            let at = p.at + page as u64 * PAGE;
            // SAFETY: the ring is attached read-write here and populated; no one else maps it
            // now.
            unsafe { core::ptr::write_bytes(at as *mut u8, 0, PAGE as usize) };
        }
    }
}

impl Server {
    /// A new pipe and its two ends (read, write), capabilities of ours the caller hands out or
    /// keeps.
    fn new_ends(&mut self) -> Result<(usize, [u64; 2]), PipeError> {
        let i = self.new_pipe()?;
        let mut caps = [0u64; 2];
        for (k, cap) in caps.iter_mut().enumerate() {
            let s = self.slot();
            let b = END_BIT | (i as u64) << 1 | k as u64;
            if sys::cap_mint_watched(self.ep, s, b, rights::SEND | rights::GRANT, self.notice)
                .is_err()
            {
                self.free_slots.push(s);
                if k == 0 {
                    self.destroy(i);
                } else {
                    self.free_slot(caps[0]);
                }
                return Err(PipeError::NoMemory);
            }
            *cap = s;
        }
        Ok((i, caps))
    }

    /// The listener a badge names.
    fn listener_of(&mut self, badge: u64) -> Result<&mut Listener, PipeError> {
        if badge & LISTENER_BIT == 0 || badge & (END_BIT | NOTICE_BADGE) != 0 {
            return Err(PipeError::Invalid);
        }
        let i = (badge & !LISTENER_BIT) as usize;
        match self.listeners.get_mut(i) {
            Some(Some(l)) => Ok(l),
            _ => Err(PipeError::Invalid),
        }
    }

    /// Whether `name` is held by a listener or a receiver.
    fn taken(&self, name: &[u8]) -> bool {
        self.listeners.iter().flatten().any(|l| l.name == name)
            || self.mailboxes.iter().any(|m| m.name == name)
    }

    /// A call only the server's own endpoint answers (not an end or a listener).
    fn on_endpoint(badge: u64) -> Result<(), PipeError> {
        if badge & (END_BIT | NOTICE_BADGE | LISTENER_BIT) != 0 {
            return Err(PipeError::Invalid);
        }
        Ok(())
    }

    /// Ends listener `i` (its last capability is gone): its name, its waiting connections
    /// (their clients see end of file), its registrations.
    fn end_listener(&mut self, i: usize) {
        let Some(l) = self.listeners.get_mut(i).and_then(|l| l.take()) else {
            return;
        };
        for (r, w, _) in l.waiting {
            self.free_slot(r);
            self.free_slot(w);
        }
        for (s, _) in l.watchers {
            self.registrations -= 1;
            self.free_slot(s);
        }
    }

    /// Wakes the listener's registered waiters (a connection arrived).
    fn wake_listener(&mut self, i: usize) {
        let Some(Some(l)) = self.listeners.get_mut(i) else {
            return;
        };
        let mut dead = Vec::new();
        l.watchers.retain(|&(slot, bits)| {
            let ok = sys::notify_signal(slot, bits).is_ok();
            if !ok {
                dead.push(slot);
            }
            ok
        });
        for s in dead {
            self.registrations -= 1;
            self.free_slot(s);
        }
    }
}

impl pipe::Server for Server {
    fn create(&mut self, badge: u64) -> Result<pipe::CreateOut, PipeError> {
        if badge & (END_BIT | NOTICE_BADGE | LISTENER_BIT) != 0 {
            return Err(PipeError::Invalid);
        }
        let i = self.new_pipe()?;
        let mut caps = [0u64; 2];
        for (k, cap) in caps.iter_mut().enumerate() {
            let s = self.slot();
            let b = END_BIT | (i as u64) << 1 | k as u64;
            if sys::cap_mint_watched(self.ep, s, b, rights::SEND | rights::GRANT, self.notice)
                .is_err()
            {
                self.free_slots.push(s);
                // The read end's capability (if minted) is deleted with our copy: its notice
                // then ends the pipe. Without one, end it here.
                if k == 0 {
                    self.destroy(i);
                } else {
                    self.after.delete(caps[0]);
                }
                return Err(PipeError::NoMemory);
            }
            *cap = s;
        }
        // Watched capabilities must not stay with us: our copies go once the reply is out.
        self.after.delete(caps[0]);
        self.after.delete(caps[1]);
        Ok(pipe::CreateOut {
            read: caps[0],
            write: caps[1],
        })
    }

    fn register(&mut self, badge: u64, wake: u64, bits: u64) -> Result<(), PipeError> {
        if badge & LISTENER_BIT != 0 {
            self.listener_of(badge)?;
            if self.registrations >= MAX_REGISTRATIONS {
                return Err(PipeError::NoSpace);
            }
            let i = (badge & !LISTENER_BIT) as usize;
            if let Some(Some(l)) = self.listeners.get_mut(i) {
                // Those whose notification is gone first.
                let mut dead = Vec::new();
                l.watchers.retain(|&(slot, _)| {
                    let ok = sys::notify_signal(slot, 0).is_ok();
                    if !ok {
                        dead.push(slot);
                    }
                    ok
                });
                for d in dead {
                    self.registrations -= 1;
                    self.free_slot(d);
                }
            }
            if self.listener_of(badge)?.watchers.len() >= MAX_WATCHERS {
                return Err(PipeError::NoSpace);
            }
            let s = self.slot();
            if sys::cap_copy(wake, s).is_err() {
                self.free_slots.push(s);
                return Err(PipeError::Invalid);
            }
            self.registrations += 1;
            self.listener_of(badge)?.watchers.push((s, bits));
            return Ok(());
        }
        let (i, end) = self.end_of(badge)?;
        let full = |s: &Server| {
            s.registrations >= MAX_REGISTRATIONS
                || s.pipes[i]
                    .as_ref()
                    .is_some_and(|p| p.watchers[index(end)].len() >= MAX_WATCHERS)
        };
        if full(self) {
            // Registrations of processes that ended go first: this pipe's, then, if the
            // server's table is what is full, every pipe's.
            self.prune(i, end);
            self.prune(i, end.peer());
            if self.registrations >= MAX_REGISTRATIONS {
                for k in 0..self.pipes.len() {
                    self.prune(k, End::Read);
                    self.prune(k, End::Write);
                }
            }
            if full(self) {
                return Err(PipeError::NoSpace);
            }
        }
        let s = self.slot();
        if sys::cap_copy(wake, s).is_err() {
            self.free_slots.push(s);
            return Err(PipeError::Invalid);
        }
        self.registrations += 1;
        if let Some(Some(p)) = self.pipes.get_mut(i) {
            p.watchers[index(end)].push((s, bits));
            // Before the reply: a side that cached the one waiter of this end (`waker`) sees
            // the count change before this registrant can count itself in as a waiter.
            let n = p.registered[index(end)].wrapping_add(1);
            p.registered[index(end)] = n;
            p.ring().set_registrations(end, n);
        }
        Ok(())
    }

    fn waker(&mut self, badge: u64) -> Result<pipe::WakerOut, PipeError> {
        let (i, end) = self.end_of(badge)?;
        let peer = end.peer();
        let (src, bits, registrations) = match self.pipes[i].as_ref() {
            Some(p) => match p.watchers[index(peer)].as_slice() {
                // Bits 0 would mint an unbadged capability: one that signals anything.
                &[(src, bits)] if bits != 0 => (src, bits, p.registered[index(peer)]),
                _ => return Err(PipeError::NotOne),
            },
            None => return Err(PipeError::Invalid),
        };
        let s = self.slot();
        // Signal-only, and only the registered bits (a badged notification capability).
        if sys::cap_mint(src, s, bits, rights::SEND).is_err() {
            self.free_slots.push(s);
            return Err(PipeError::NotOne);
        }
        self.after.delete(s);
        Ok(pipe::WakerOut {
            wake: s,
            registrations: registrations as u64,
        })
    }

    fn poke(&mut self, badge: u64) -> Result<(), PipeError> {
        let (i, end) = self.end_of(badge)?;
        self.wake(i, end.peer());
        Ok(())
    }

    fn sync(&mut self, _badge: u64) -> Result<(), PipeError> {
        Ok(())
    }

    fn listen(&mut self, badge: u64, name: &[u8], backlog: u32) -> Result<u64, PipeError> {
        self.listen_as(badge, name, backlog, NO_CRED)
    }

    fn listen_as(
        &mut self,
        badge: u64,
        name: &[u8],
        backlog: u32,
        cred: [u32; 3],
    ) -> Result<u64, PipeError> {
        Self::on_endpoint(badge)?;
        if !unix::valid_name(name) {
            return Err(PipeError::Invalid);
        }
        if self.taken(name) {
            return Err(PipeError::Busy);
        }
        let i = match self.listeners.iter().position(|l| l.is_none()) {
            Some(i) => i,
            None if self.listeners.len() + self.mailboxes.len() < MAX_NAMES => {
                self.listeners.push(None);
                self.listeners.len() - 1
            }
            None => return Err(PipeError::NoSpace),
        };
        let s = self.slot();
        let b = LISTENER_BIT | i as u64;
        if sys::cap_mint_watched(self.ep, s, b, rights::SEND | rights::GRANT, self.notice).is_err()
        {
            self.free_slots.push(s);
            return Err(PipeError::NoMemory);
        }
        self.listeners[i] = Some(Listener {
            name: name.to_vec(),
            backlog: (backlog as usize).clamp(1, MAX_BACKLOG),
            waiting: VecDeque::new(),
            watchers: Vec::new(),
            cred,
        });
        self.after.delete(s);
        Ok(s)
    }

    fn connect(&mut self, badge: u64, name: &[u8]) -> Result<pipe::ConnectOut, PipeError> {
        let c = self.connect_as(badge, name, NO_CRED)?;
        Ok(pipe::ConnectOut {
            read: c.read,
            write: c.write,
        })
    }

    fn connect_as(
        &mut self,
        badge: u64,
        name: &[u8],
        cred: [u32; 3],
    ) -> Result<pipe::ConnectAsOut, PipeError> {
        Self::on_endpoint(badge)?;
        let Some(i) = self
            .listeners
            .iter()
            .position(|l| l.as_ref().is_some_and(|l| l.name == name))
        else {
            return Err(PipeError::NotFound);
        };
        if self.listeners[i]
            .as_ref()
            .is_some_and(|l| l.waiting.len() >= l.backlog)
        {
            return Err(PipeError::Empty);
        }
        // Client to server, and server to client.
        let (_, up) = self.new_ends()?;
        let down = match self.new_ends() {
            Ok((_, d)) => d,
            Err(e) => {
                self.free_slot(up[0]);
                self.free_slot(up[1]);
                return Err(e);
            }
        };
        let mut peer = NO_CRED;
        if let Some(Some(l)) = self.listeners.get_mut(i) {
            l.waiting.push_back((up[0], down[1], cred));
            peer = l.cred;
        }
        self.wake_listener(i);
        self.after.delete(down[0]);
        self.after.delete(up[1]);
        Ok(pipe::ConnectAsOut {
            read: down[0],
            write: up[1],
            peer,
        })
    }

    fn accept(&mut self, badge: u64) -> Result<pipe::AcceptOut, PipeError> {
        let a = self.accept_as(badge)?;
        Ok(pipe::AcceptOut {
            read: a.read,
            write: a.write,
        })
    }

    fn accept_as(&mut self, badge: u64) -> Result<pipe::AcceptAsOut, PipeError> {
        let (read, write, peer) = self
            .listener_of(badge)?
            .waiting
            .pop_front()
            .ok_or(PipeError::Empty)?;
        self.after.delete(read);
        self.after.delete(write);
        Ok(pipe::AcceptAsOut { read, write, peer })
    }

    fn pending(&mut self, badge: u64) -> Result<u64, PipeError> {
        Ok(self.listener_of(badge)?.waiting.len() as u64)
    }

    fn mailbox(&mut self, badge: u64, name: &[u8]) -> Result<u64, PipeError> {
        Self::on_endpoint(badge)?;
        if !unix::valid_name(name) {
            return Err(PipeError::Invalid);
        }
        if self.taken(name) {
            return Err(PipeError::Busy);
        }
        if self.listeners.iter().flatten().count() + self.mailboxes.len() >= MAX_NAMES {
            return Err(PipeError::NoSpace);
        }
        let (pipe, [read, write]) = self.new_ends()?;
        self.mailboxes.push(Mailbox {
            name: name.to_vec(),
            pipe,
            write,
        });
        self.after.delete(read);
        Ok(read)
    }

    fn deliver_to(&mut self, badge: u64, name: &[u8]) -> Result<u64, PipeError> {
        Self::on_endpoint(badge)?;
        let src = self
            .mailboxes
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.write)
            .ok_or(PipeError::NotFound)?;
        let s = self.slot();
        if sys::cap_copy(src, s).is_err() {
            self.free_slots.push(s);
            return Err(PipeError::NotFound);
        }
        self.after.delete(s);
        Ok(s)
    }
}

/// An end is its pipe's ring as a dataspace: `info` and `map`, nothing else.
impl dataspace::Server for Server {
    fn info(&mut self, badge: u64) -> Result<dataspace::InfoOut, DsError> {
        self.end_of(badge).map_err(|_| DsError::Invalid)?;
        Ok(dataspace::InfoOut {
            size: RING_BYTES as u64,
            flags: DsFlags::WRITABLE,
        })
    }

    fn map(
        &mut self,
        badge: u64,
        offset: u64,
        dst: u64,
        _pages: u64,
        flags: MapFlags,
    ) -> Result<Map, DsError> {
        let (i, _) = self.end_of(badge).map_err(|_| DsError::Invalid)?;
        let p = self.pipes[i].as_mut().ok_or(DsError::Gone)?;
        if !offset.is_multiple_of(PAGE)
            || !dst.is_multiple_of(PAGE)
            || offset >= RING_BYTES as u64
            || dst >= sawmill_abi::layout::USER_END
        {
            return Err(DsError::Invalid);
        }
        if flags.bits() & sawmill_abi::map::WRITE != 0 {
            p.written |= 1 << (offset / PAGE);
        }
        Ok(Map {
            src: p.at + offset,
            dst,
            pages: 1,
            flags: flags.bits() & (sawmill_abi::map::READ | sawmill_abi::map::WRITE),
        })
    }

    fn copy(&mut self, _badge: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn phys(&mut self, _badge: u64, _offset: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn read_only(&mut self, _badge: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn resize(&mut self, _badge: u64, _size: u64) -> Result<(), DsError> {
        Err(DsError::Unsupported)
    }
    fn free(&mut self, _badge: u64) -> Result<(), DsError> {
        Err(DsError::Unsupported)
    }
}

/// Dataspace calls carry labels from 0xd01 on (interfaces/dataspace.idl), pipe calls below.
const DATASPACE_LABELS: u16 = 0xd01;

impl rpc::Serve for Server {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.tag.label() >= DATASPACE_LABELS {
            dataspace::handle(self, m, next)
        } else {
            pipe::handle(self, m, next)
        }
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn slot_freed(&mut self, slot: u64) {
        self.free_slots.push(slot);
    }
    const NOTICES: bool = true;
    fn notice_badge(&self) -> u64 {
        NOTICE_BADGE
    }
    /// The last capability of an end is gone: the other end learns it (end of file, or
    /// `EPIPE`), its waiters are woken; the registrations of the gone end go; once both ends
    /// are gone, the pipe.
    fn no_senders(&mut self, badge: u64) {
        if badge & LISTENER_BIT != 0 && badge & (END_BIT | NOTICE_BADGE) == 0 {
            self.end_listener((badge & !LISTENER_BIT) as usize);
            return;
        }
        let Ok((i, end)) = self.end_of(badge) else {
            return;
        };
        // A receiver's read end gone: its name is free, and our write end goes (the pipe ends
        // once the senders' copies are gone too).
        if end == End::Read {
            if let Some(k) = self.mailboxes.iter().position(|m| m.pipe == i) {
                let m = self.mailboxes.swap_remove(k);
                self.free_slot(m.write);
            }
        }
        let mut gone_regs = Vec::new();
        let both = match self.pipes[i].as_mut() {
            Some(p) => {
                p.alive[index(end)] = false;
                p.ring().set_gone(end);
                gone_regs = core::mem::take(&mut p.watchers[index(end)]);
                !p.alive[0] && !p.alive[1]
            }
            None => false,
        };
        for (s, _) in gone_regs {
            self.registrations -= 1;
            self.free_slot(s);
        }
        if both {
            self.destroy(i);
        } else {
            self.wake(i, end.peer());
        }
    }
}

fn main() {
    let Some(ep) = env::cap(pipe::NAME) else {
        println!("pipe: FAIL no `{}` endpoint", pipe::NAME);
        return;
    };
    if let Err(e) = rm::init() {
        println!("pipe: FAIL region manager: {:?}", e);
        return;
    }
    let notice = thread::alloc_slot();
    if sys::cap_mint(ep, notice, NOTICE_BADGE, rights::SEND).is_err() {
        println!("pipe: FAIL no notice capability");
        return;
    }
    let rx = thread::alloc_slot();
    let mut st = Server {
        ep,
        notice,
        pipes: Vec::new(),
        slabs: Vec::new(),
        free_slots: Vec::new(),
        registrations: 0,
        listeners: Vec::new(),
        mailboxes: Vec::new(),
        after: AfterReply::new(),
    };
    st.after.receive_into(&[rx]);
    println!("pipe: serving (at most {} pipes)", MAX_PIPES);
    let _ = rpc::serve(ep, &mut st);
}
