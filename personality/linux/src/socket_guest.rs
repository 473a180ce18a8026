//! The guest side of sockets: [`SocketHost`] for the process's backend over the network stack
//! (`interfaces/socket.idl`: `socket.create` on a capability to the stack, then `sock` calls on
//! the socket capability the stack minted). The stack capability is the process's own share of
//! the stack's sockets, which proc mints on the first socket (`proc.net_stack`); a launcher that
//! is not proc may hand one as `socket` in the environment instead.
//!
//! A socket's handle is the capability slot it lives in; closing drops the capability (the
//! stack closes the socket once every copy, in every process, is gone). A fork child adopts the
//! copies the handoff gave it, unregistered. No call blocks: `WouldBlock` is `EAGAIN`, and the
//! file layer waits on the process's wake notification (`WAKE_IO`) after [`sock_watch`]
//! registered it with the socket.
//!
//! Bulk data (a transfer larger than one message's [`MAX_DATA`]) goes through a channel
//! (`sock.channel`): a capability the stack mints for this process and socket, also a dataspace
//! of [`CHANNEL_BYTES`] attached here through the region manager (high, outside the program's
//! range, so a fork child does not inherit it: it asks for its own). Every use copies in and
//! calls, or calls and copies out, within one socket operation under the library lock, so a
//! retry after a wait copies again and threads never see each other's bytes. A socket the
//! stack refused a channel keeps the message path.
//!
//! **A stack restart** (its policy `reset`: connections die with it) fails every call on a
//! capability of the dead incarnation with an IPC error. A connection then reads as reset
//! (`ECONNRESET` once, then the end; writes `EPIPE`), as Linux reports a peer's reset. What
//! the new stack can do again is done again, in the same capability slot (the handle stays,
//! so the descriptor does not notice): a listening socket is made again with its address, port
//! and backlog, a UDP socket with its binding and peer (datagrams in flight are lost, as on a
//! wire: UDP promises no more), a TCP socket not connected yet with its binding. The stack capability
//! itself comes again from proc (`proc.net_stack`, which asks netmgr), so new sockets work at
//! once. Sockets this image adopted (fork, exec) have no recorded plan and read as reset.
//!
//! **Loopback fusion** (docs/net.md): a connect to 127/8 makes two pipes with the pipe server
//! (`pipe.create`), offers the peer's ends with `sock.connect_fused` and keeps its own (rings
//! attached through the process's `Pipes`); an accepted loopback connection, or a UDP socket the
//! stack says is fused, takes its ends with `sock.fused_ends`.
//!
//! It touches the `socket` capability, proc (`net_stack`), `proc:wake`, the socket and channel capabilities it
//! holds, the channels' regions, and the pipe server (`pipe.create`) for fused connections.
//!
//! [`sock_watch`]: SocketHost::sock_watch

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use sawmill_interfaces::rpc::Error;
use sawmill_interfaces::{sock, socket, SockError, SockKind, CHANNEL_BYTES};
use sawmill_linux::errno::*;
use sawmill_linux::files::socket::{SocketHost, MAX_DATA};
use sawmill_linux::Errno;
use sawmill_proc_api::{WAKE_CAP, WAKE_IO};
use sawmill_rm as rm;
use sawmill_rt::{env, sys, thread};

use crate::files_guest::Guest;

/// The name of the stack's endpoint in a Linux process's environment (proc hands it on).
pub const STACK_CAP: &str = "socket";

/// The process's socket state.
pub struct Sockets {
    stack: Option<socket::Client>,
    /// The slot the stack capability is in (a new one from proc replaces it there).
    stack_slot: Option<u64>,
    /// How each socket made here was set up: what a stack restart needs to make it again.
    plans: BTreeMap<u64, Plan>,
    wake: Option<u64>,
    /// Sockets this process registered its wake notification with.
    watched: BTreeSet<u64>,
    /// Channels by socket handle (`None`: the stack refused one; the message path stays).
    chans: BTreeMap<u64, Option<Chan>>,
    free_slots: Vec<u64>,
}

/// How a socket was set up here, so a new stack incarnation can be given it again.
#[derive(Clone, Copy, Default)]
struct Plan {
    udp: bool,
    /// `bind`'s address and port.
    bound: Option<(u32, u16)>,
    /// `listen`'s backlog.
    backlog: Option<u32>,
    /// `connect`'s peer: for UDP made again, for TCP a connection (not made again).
    peer: Option<(u32, u16)>,
}

/// Whether a stack call failed because the stack that made the capability is gone.
fn stack_gone<T>(r: &Result<T, Error<SockError>>) -> bool {
    matches!(r, Err(Error::Ipc(_)))
}

/// A socket's channel here: its capability and where its buffer is attached.
#[derive(Clone, Copy)]
struct Chan {
    slot: u64,
    at: u64,
}

/// A channel buffer's size.
const CHANNEL: usize = CHANNEL_BYTES as usize;

impl Sockets {
    pub fn new() -> Sockets {
        Sockets::with_caps(env::cap(STACK_CAP), env::cap(WAKE_CAP))
    }

    /// The state over the network stack's capability and the wake notification (found by the
    /// caller).
    pub fn with_caps(stack: Option<u64>, wake: Option<u64>) -> Sockets {
        Sockets {
            stack: stack.map(socket::Client::new),
            stack_slot: stack,
            plans: BTreeMap::new(),
            wake,
            watched: BTreeSet::new(),
            chans: BTreeMap::new(),
            free_slots: Vec::new(),
        }
    }

    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// A capability to the stack's current incarnation in its slot, from proc: after the one
    /// we had failed. False if proc has none.
    fn renew_stack(&mut self) -> bool {
        let (Some(slot), Some(p)) = (self.stack_slot, crate::guest::proc_cap()) else {
            return false;
        };
        let _ = sys::cap_delete(slot);
        sawmill_interfaces::proc::Client::new(p)
            .net_stack(slot)
            .is_ok()
    }

    /// The stack capability, asked of proc on the first socket (proc hands each process one of
    /// its own share of the stack's sockets, not with the image: `proc.net_stack`).
    fn stack(&mut self) -> Option<socket::Client> {
        if self.stack.is_none() {
            let slot = match self.stack_slot {
                Some(slot) => slot,
                None => {
                    let slot = self.slot();
                    self.stack_slot = Some(slot);
                    slot
                }
            };
            if self.renew_stack() {
                self.stack = Some(socket::Client::new(slot));
            }
        }
        self.stack
    }

    /// `stack.create` into `slot`, with the stack capability renewed once if it failed.
    fn create_in(&mut self, udp: bool, slot: u64) -> Result<u64, Error<SockError>> {
        let stack = self.stack().ok_or(Error::App(SockError::Unreachable))?;
        let kind = if udp { SockKind::Udp } else { SockKind::Tcp };
        let r = stack.create(kind, slot);
        if stack_gone(&r) && self.renew_stack() {
            return stack.create(kind, slot);
        }
        r
    }

    /// Socket `h`'s stack went: made again in the same slot on the new incarnation if its plan
    /// allows (see the module's header), else `ECONNRESET` (a connection's reset).
    fn remake(&mut self, h: u64) -> Result<(), Errno> {
        let plan = match self.plans.get(&h) {
            Some(p) if p.udp || p.peer.is_none() => *p,
            _ => return Err(ECONNRESET),
        };
        self.watched.remove(&h);
        self.close_chan(h);
        let _ = sys::cap_delete(h);
        self.create_in(plan.udp, h).map_err(errno_of)?;
        let c = client(h);
        if let Some((addr, port)) = plan.bound {
            c.bind(addr, port).map_err(errno_of)?;
        }
        if let Some((addr, port)) = plan.peer {
            c.connect(addr, port).map_err(errno_of)?;
        }
        if let Some(backlog) = plan.backlog {
            c.listen(backlog).map_err(errno_of)?;
        }
        Ok(())
    }

    /// A send through socket `h`'s channel: if the stack went, the socket is made again (a
    /// connection's is `ECONNRESET`) and the `len` bytes count as sent (a datagram lost, as on
    /// a wire; the made-again socket has no channel, so the next transfer asks for one).
    fn bulk_result(
        &mut self,
        h: u64,
        r: Result<u32, Error<SockError>>,
        len: u32,
    ) -> Result<usize, Errno> {
        if stack_gone(&r) {
            self.remake(h)?;
            return Ok(len as usize);
        }
        r.map(|n| n as usize).map_err(errno_of)
    }

    /// Runs stack call `f` on socket `h`; if the stack went, makes the socket again
    /// ([`Sockets::remake`]) and runs it once more.
    fn call<T>(
        &mut self,
        h: u64,
        mut f: impl FnMut(&mut Sockets) -> Result<T, Error<SockError>>,
    ) -> Result<T, Errno> {
        let r = f(self);
        if stack_gone(&r) {
            self.remake(h)?;
            return f(self).map_err(errno_of);
        }
        r.map_err(errno_of)
    }

    /// Socket `h`'s channel, if it has one.
    fn chan(&self, h: u64) -> Option<Chan> {
        self.chans.get(&h).copied().flatten()
    }

    /// Socket `h`'s channel, asked for (and its buffer attached and mapped) the first time.
    fn open_chan(&mut self, h: u64) -> Option<Chan> {
        if let Some(c) = self.chans.get(&h) {
            return *c;
        }
        let slot = self.slot();
        let made = match client(h).channel(slot) {
            Ok(chan) => match rm::attach(chan, 0, CHANNEL as u64, None, rm::READ | rm::WRITE) {
                // Mapped now: a copy into it must not fault halfway through a call.
                Ok(at) if rm::populate(at, CHANNEL as u64, true).is_ok() => {
                    Some(Chan { slot: chan, at })
                }
                Ok(at) => {
                    let _ = rm::detach(at);
                    None
                }
                Err(_) => None,
            },
            Err(_) => None,
        };
        if made.is_none() {
            let _ = sys::cap_delete(slot);
            self.free_slots.push(slot);
        }
        self.chans.insert(h, made);
        made
    }

    /// Drops socket `h`'s channel: its region, its capability (the stack frees the buffer).
    fn close_chan(&mut self, h: u64) {
        if let Some(Some(c)) = self.chans.remove(&h) {
            let _ = rm::detach(c.at);
            let _ = sys::cap_delete(c.slot);
            self.free_slots.push(c.slot);
        }
    }
}

impl Chan {
    fn client(&self) -> sock::Client {
        sock::Client::new(self.slot)
    }

    /// Copies `data` (cut to [`CHANNEL`] bytes) to the start of the buffer: how many.
    fn put(&self, data: &[u8]) -> u32 {
        let n = data.len().min(CHANNEL);
        // SAFETY: CHANNEL bytes attached and populated at `at` for as long as the channel is
        // ours; only this process uses them, under the library lock.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.at as *mut u8, n) };
        n as u32
    }

    /// Copies the first `n` bytes of the buffer (at most [`CHANNEL`]) into `buf`: how many.
    fn take(&self, n: usize, buf: &mut [u8]) -> usize {
        let n = n.min(buf.len()).min(CHANNEL);
        // SAFETY: as in `put`.
        unsafe { core::ptr::copy_nonoverlapping(self.at as *const u8, buf.as_mut_ptr(), n) };
        n
    }
}

impl Default for Sockets {
    fn default() -> Self {
        Self::new()
    }
}

/// Linux's errno for a stack call's failure. A stack that is not there (or went) is a network
/// that is down.
fn errno_of(e: Error<SockError>) -> Errno {
    match e {
        Error::App(e) => match e {
            SockError::Invalid => EINVAL,
            SockError::NoSpace => ENOBUFS,
            SockError::BadSocket => EBADF,
            SockError::AddrInUse => EADDRINUSE,
            SockError::WouldBlock => EAGAIN,
            SockError::NotConnected => ENOTCONN,
            SockError::ConnRefused => ECONNREFUSED,
            SockError::ConnReset => ECONNRESET,
            SockError::Denied => EACCES,
            SockError::Unreachable => ENETUNREACH,
            SockError::Fused => sawmill_linux::files::socket::EFUSED,
            SockError::ProcessFull => EMFILE,
        },
        Error::TooLong => EMSGSIZE,
        _ => ENETDOWN,
    }
}

fn client(h: u64) -> sock::Client {
    sock::Client::new(h)
}

impl Guest {
    /// The channel a transfer of `len` bytes on socket `h` goes through: none for one that
    /// fits a message (cheaper) or a socket without a channel. A transfer larger than the
    /// buffer is cut to it (the file layer asks [`SocketHost::sock_max_data`] first).
    fn bulk(&self, h: u64, len: usize) -> Option<Chan> {
        if len <= MAX_DATA {
            return None;
        }
        self.sockets.chan(h)
    }

    /// Takes over a socket another image of the process (or its parent) held: capability
    /// `slot` of this task. Returns its handle.
    pub fn sock_adopt(&mut self, slot: u64) -> Option<u64> {
        (slot != 0).then_some(slot)
    }
}

impl SocketHost for Guest {
    fn sock_create(&mut self, udp: bool) -> Result<u64, Errno> {
        let s = &mut self.sockets;
        if s.stack().is_none() {
            return Err(EAFNOSUPPORT);
        }
        let slot = s.slot();
        match s.create_in(udp, slot) {
            Ok(h) => {
                s.plans.insert(
                    h,
                    Plan {
                        udp,
                        ..Plan::default()
                    },
                );
                Ok(h)
            }
            Err(e) => {
                s.free_slots.push(slot);
                Err(match e {
                    Error::App(SockError::NoSpace) => ENFILE,
                    e => errno_of(e),
                })
            }
        }
    }

    fn sock_close(&mut self, h: u64) {
        let s = &mut self.sockets;
        s.watched.remove(&h);
        s.plans.remove(&h);
        s.close_chan(h);
        let _ = sys::cap_delete(h);
        s.free_slots.push(h);
    }

    fn sock_bind(&mut self, h: u64, addr: u32, port: u16) -> Result<(), Errno> {
        let s = &mut self.sockets;
        s.call(h, |_| client(h).bind(addr, port))?;
        // An ephemeral port (0) is kept as the stack chose it.
        let port = match port {
            0 => client(h).name().map_or(0, |n| n.port),
            p => p,
        };
        if let Some(p) = s.plans.get_mut(&h) {
            p.bound = Some((addr, port));
        }
        Ok(())
    }

    fn sock_listen(&mut self, h: u64, backlog: u32) -> Result<(), Errno> {
        let s = &mut self.sockets;
        s.call(h, |_| client(h).listen(backlog))?;
        if let Some(p) = s.plans.get_mut(&h) {
            p.backlog = Some(backlog);
        }
        Ok(())
    }

    fn sock_accept(&mut self, h: u64) -> Result<(u64, u32, u16), Errno> {
        let slot = self.sockets.slot();
        match self.sockets.call(h, |_| client(h).accept(slot)) {
            Ok(a) => Ok((a.conn, a.addr, a.port)),
            Err(e) => {
                self.sockets.free_slots.push(slot);
                Err(e)
            }
        }
    }

    fn sock_connect(&mut self, h: u64, addr: u32, port: u16) -> Result<(), Errno> {
        let s = &mut self.sockets;
        let r = s.call(h, |_| client(h).connect(addr, port));
        // From now on a TCP connection (under way or made): a restart resets it.
        if let Some(p) = s.plans.get_mut(&h) {
            p.peer = Some((addr, port));
        }
        r
    }

    fn sock_max_data(&mut self, h: u64, want: usize) -> usize {
        if want <= MAX_DATA {
            return MAX_DATA;
        }
        match self.sockets.open_chan(h) {
            Some(_) => CHANNEL,
            None => MAX_DATA,
        }
    }

    fn sock_send(&mut self, h: u64, data: &[u8]) -> Result<usize, Errno> {
        if let Some(c) = self.bulk(h, data.len()) {
            let n = c.client().send_buf(0, c.put(data), false);
            return self.sockets.bulk_result(h, n, data.len() as u32);
        }
        self.sockets
            .call(h, |_| client(h).send(data))
            .map(|n| n as usize)
    }

    fn sock_recv(&mut self, h: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        if let Some(c) = self.bulk(h, buf.len()) {
            let max = buf.len().min(CHANNEL) as u32;
            let r = c.client().recv_buf(0, max);
            if stack_gone(&r) {
                self.sockets.remake(h)?;
                return Err(EAGAIN);
            }
            let r = r.map_err(errno_of)?;
            if r.len == 0 && !r.eof {
                return Err(EAGAIN);
            }
            return Ok(c.take(r.len as usize, buf));
        }
        let r = self.sockets.call(h, |_| client(h).recv(buf.len() as u32))?;
        let d = r.data.as_slice();
        if d.is_empty() && !r.eof {
            return Err(EAGAIN);
        }
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        Ok(n)
    }

    fn sock_send_to(&mut self, h: u64, addr: u32, port: u16, d: &[u8]) -> Result<usize, Errno> {
        if let Some(c) = self.bulk(h, d.len()) {
            let n = c.client().send_to_buf(addr, port, 0, c.put(d));
            return self.sockets.bulk_result(h, n, d.len() as u32);
        }
        self.sockets
            .call(h, |_| client(h).send_to(addr, port, d))
            .map(|n| n as usize)
    }

    fn sock_recv_from(&mut self, h: u64, buf: &mut [u8]) -> Result<(usize, u32, u16), Errno> {
        if let Some(c) = self.bulk(h, buf.len()) {
            let max = buf.len().min(CHANNEL) as u32;
            let r = c.client().recv_from_buf(0, max);
            if stack_gone(&r) {
                self.sockets.remake(h)?;
                return Err(EAGAIN);
            }
            let r = r.map_err(errno_of)?;
            return Ok((c.take(r.len as usize, buf), r.addr, r.port));
        }
        let r = self
            .sockets
            .call(h, |_| client(h).recv_from(buf.len() as u32))?;
        let d = r.data.as_slice();
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        Ok((n, r.addr, r.port))
    }

    fn sock_send_part(&mut self, h: u64, data: &[u8]) -> Result<usize, Errno> {
        if let Some(c) = self.bulk(h, data.len()) {
            let n = c.client().send_buf(0, c.put(data), true);
            return self.sockets.bulk_result(h, n, data.len() as u32);
        }
        self.sockets
            .call(h, |_| client(h).send_part(data))
            .map(|n| n as usize)
    }

    fn sock_send_more(&mut self, h: u64, first: bool, d: &[u8]) -> Result<(), Errno> {
        self.sockets.call(h, |_| client(h).send_more(first, d))
    }

    fn sock_peek_from(
        &mut self,
        h: u64,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(usize, usize, u32, u16), Errno> {
        let r = self
            .sockets
            .call(h, |_| client(h).peek_from(offset as u32))?;
        let d = r.data.as_slice();
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        Ok((n, r.len as usize, r.addr, r.port))
    }

    fn sock_ready(&mut self, h: u64) -> u32 {
        match self.sockets.call(h, |_| client(h).ready()) {
            Ok(r) => r.bits(),
            // Gone (a connection of a stack that restarted): a read ends at once, a write
            // fails.
            Err(_) => {
                sawmill_linux::files::socket::READY_HANGUP
                    | sawmill_linux::files::socket::READY_ERROR
            }
        }
    }

    fn sock_name(&mut self, h: u64) -> Result<(u32, u16, u32, u16), Errno> {
        let n = self.sockets.call(h, |_| client(h).name())?;
        Ok((n.addr, n.port, n.peer_addr, n.peer_port))
    }

    fn sock_shutdown(&mut self, h: u64) -> Result<(), Errno> {
        self.sockets.call(h, |_| client(h).shutdown())
    }

    fn sock_connect_fused(
        &mut self,
        h: u64,
        addr: u32,
        port: u16,
    ) -> Result<Option<(u64, u64)>, Errno> {
        let Some(server) = self.pipes.server else {
            return Ok(None);
        };
        // Pipe `a` carries what we send, `b` what we receive; the peer gets a's read end and
        // b's write end through the stack.
        let slots = [
            self.pipes.slot(),
            self.pipes.slot(),
            self.pipes.slot(),
            self.pipes.slot(),
        ];
        let [a_read, a_write, b_read, b_write] = slots;
        // `drop_end` on a slot that is no end yet just deletes its capability (if any) and
        // keeps the slot for reuse.
        if server.create(a_read, a_write).is_err() || server.create(b_read, b_write).is_err() {
            for c in slots {
                self.pipes.drop_end(c);
            }
            return Ok(None);
        }
        let r = self
            .sockets
            .call(h, |_| client(h).connect_fused(addr, port, a_read, b_write));
        // The stack keeps copies of the peer's ends; ours go.
        self.pipes.drop_end(a_read);
        self.pipes.drop_end(b_write);
        if !matches!(r, Ok(true)) {
            // Not fused (no listener of ours there, or a stack without fusion): the plain
            // connect that follows says what there is.
            self.pipes.drop_end(b_read);
            self.pipes.drop_end(a_write);
            return Ok(None);
        }
        if let Some(p) = self.sockets.plans.get_mut(&h) {
            p.peer = Some((addr, port));
        }
        let adopted = self
            .pipes
            .adopt(b_read)
            .and_then(|_| self.pipes.adopt(a_write));
        match adopted {
            Ok(_) => Ok(Some((b_read, a_write))),
            Err(e) => {
                self.pipes.drop_end(b_read);
                self.pipes.drop_end(a_write);
                Err(e)
            }
        }
    }

    fn sock_fused_ends(&mut self, h: u64) -> Option<(u64, u64)> {
        let (r, w) = (self.pipes.slot(), self.pipes.slot());
        let Ok(o) = client(h).fused_ends(r, w) else {
            self.pipes.drop_end(r);
            self.pipes.drop_end(w);
            return None;
        };
        match (self.pipes.adopt(o.read), self.pipes.adopt(o.write)) {
            (Ok(r), Ok(w)) => Some((r, w)),
            _ => {
                self.pipes.drop_end(o.read);
                self.pipes.drop_end(o.write);
                None
            }
        }
    }

    fn sock_watched(&self, h: u64) -> bool {
        self.sockets.wake.is_some() && self.sockets.watched.contains(&h)
    }

    fn sock_watch(&mut self, h: u64) -> Result<(), Errno> {
        let s = &mut self.sockets;
        let Some(wake) = s.wake else {
            return Ok(());
        };
        if s.watched.contains(&h) {
            return Ok(());
        }
        s.call(h, |_| client(h).register(wake, WAKE_IO))?;
        s.watched.insert(h);
        Ok(())
    }
}
