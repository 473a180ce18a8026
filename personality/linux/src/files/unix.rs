//! Local (AF_UNIX) sockets in the file layer: `socket(AF_UNIX, ...)`, `socketpair`, and the
//! socket calls on them, with Linux's structures, flags and errno values (docs/net.md, "Local
//! sockets").
//!
//! A local socket moves its data through pipes (`pipe.rs`, `sawmill_pipe_api`): a connected one
//! holds the read end of one pipe (`rx`, what the peer sent) and the write end of another
//! (`tx`), so data never passes through a server. The pipe server also keeps the names: a
//! listener (stream or seqpacket) and a datagram receiver are registered under their bound name,
//! and `connect` / `sendto` find them there ([`UnixHost`]). A path name is also an inode of the
//! file system (created by `bind`: `ls -l` shows `s`, a second `bind` finds it and answers
//! `EADDRINUSE`); the server knows it by its absolute path. An abstract name (leading 0 byte)
//! exists only in the server.
//!
//! Datagram and seqpacket sockets frame each message in the ring (`sawmill_pipe_api::unix`):
//! written whole under the ring's write lock, read whole under its read lock.
//!
//! The state lives in the socket's description ([`Unix`] in [`super::socket::Sock`]); `fork`
//! and `execve` hand on the capabilities of its pipe ends and listener (`handoff::Object::Unix`).

use alloc::vec;
use alloc::vec::Vec;

use sawmill_pipe_api::unix::{header, parse_header, HEADER, MAX_NAME};
use sawmill_pipe_api::{End, Ring, Step, CAPACITY};

use super::abi::*;
use super::backend::{Backend, OpenHow, Opened};
use super::pipe::{pieces, PipeEnd};
use super::socket::*;
use super::table::{Description, Object, Shared};
use super::{Files, MAX_RW};
use crate::errno::*;
use crate::{Errno, SysResult, User};

use alloc::rc::Rc;
use core::cell::RefCell;

pub const SOCK_SEQPACKET: u32 = 5;
/// `MSG_TRUNC`: `recv` returns a datagram's full length (and `msg_flags` says it was cut).
pub const MSG_TRUNC: u32 = 0x20;
/// `SO_PEERCRED`.
pub const SO_PEERCRED: u32 = 17;
/// `struct sockaddr_un`'s `sun_path` size.
const SUN_PATH: usize = 108;
/// Where `sun_path` begins in `struct sockaddr_un`.
const SUN_PATH_AT: usize = 2;
/// How often a blocking `connect` to a full backlog looks again (ns).
const BACKLOG_RETRY_NS: u64 = 5_000_000;

/// What local sockets need from the system beyond pipes (the guest: the pipe server's names).
/// Names are the server's: an absolute path, or an abstract name with its leading 0.
pub trait UnixHost {
    /// A listener on `name`: its handle. `EADDRINUSE` if the name is taken.
    fn unix_listen(&mut self, _name: &[u8], _backlog: u32) -> Result<u64, Errno> {
        Err(EAFNOSUPPORT)
    }
    /// A connection to the listener on `name`: (read end, write end, the listener's
    /// credentials), rings mapped. `ECONNREFUSED` if nobody listens, `EAGAIN` if its backlog is
    /// full.
    fn unix_connect(&mut self, _name: &[u8]) -> Result<(u64, u64, Cred), Errno> {
        Err(ECONNREFUSED)
    }
    /// The oldest waiting connection of listener `l`, with the credentials of the side that
    /// connected (`EAGAIN`: none).
    fn unix_accept(&mut self, _l: u64) -> Result<(u64, u64, Cred), Errno> {
        Err(EAGAIN)
    }
    /// This process's credentials (what `socketpair` gives both sockets).
    fn unix_cred(&mut self) -> Cred {
        NO_CRED
    }
    /// How many connections wait on listener `l`.
    fn unix_pending(&mut self, _l: u64) -> usize {
        0
    }
    /// Makes sure a wait for listener `l` is woken by a connection.
    fn unix_watch(&mut self, _l: u64) -> Result<(), Errno> {
        Ok(())
    }
    /// Drops listener `l` (its last descriptor closed).
    fn unix_close(&mut self, _l: u64) {}
    /// A datagram receiver on `name`: the read end of its pipe, ring mapped.
    fn unix_mailbox(&mut self, _name: &[u8]) -> Result<u64, Errno> {
        Err(EAFNOSUPPORT)
    }
    /// A write end to the receiver on `name`, ring mapped (`ECONNREFUSED`: none).
    fn unix_deliver_to(&mut self, _name: &[u8]) -> Result<u64, Errno> {
        Err(ECONNREFUSED)
    }
}

/// Credentials as `SO_PEERCRED` reports them: `struct ucred` (pid, uid, gid; the effective
/// ids at the time of `connect`, `listen` or `socketpair`, as Linux records them).
pub type Cred = [u32; 3];

/// A socket without a peer's credentials: Linux's (pid 0, uid and gid -1).
pub const NO_CRED: Cred = [0, u32::MAX, u32::MAX];

/// A local socket's state.
#[derive(Debug, Clone, Default)]
pub struct Unix {
    /// `SOCK_STREAM`, `SOCK_DGRAM` or `SOCK_SEQPACKET`.
    pub kind: u32,
    /// What the peer sends us: the read end of a pipe (its handle and ring).
    pub rx: Option<(u64, Ring)>,
    /// What we send: the write end of a pipe.
    pub tx: Option<(u64, Ring)>,
    /// The listener registered under our name (stream and seqpacket, once bound).
    pub listener: Option<u64>,
    pub listening: bool,
    /// The name bound, as the program gave it (`sun_path` bytes; an abstract one with its 0);
    /// empty while unbound.
    pub name: Vec<u8>,
    /// The peer's name (the one connected to).
    pub peer: Vec<u8>,
    /// The peer's credentials, once connected (`SO_PEERCRED`).
    pub peer_cred: Option<Cred>,
}

impl Unix {
    fn stream(&self) -> bool {
        self.kind == SOCK_STREAM
    }
}

/// The name of a `struct sockaddr_un` of `raw.len()` bytes: the path (up to its NUL) or the
/// abstract name (all of it, with its leading 0). `EINVAL` for another family or no name.
pub fn parse_sockaddr_un(raw: &[u8]) -> Result<Vec<u8>, Errno> {
    if raw.len() < SUN_PATH_AT || raw.len() > SUN_PATH_AT + SUN_PATH {
        return Err(EINVAL);
    }
    if u16::from_le_bytes([raw[0], raw[1]]) as u32 != AF_UNIX {
        return Err(EINVAL);
    }
    let path = &raw[SUN_PATH_AT..];
    match path.first() {
        None => Err(EINVAL),
        Some(0) if path.len() == 1 => Err(EINVAL),
        Some(0) => Ok(path.to_vec()),
        Some(_) => {
            let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
            Ok(path[..end].to_vec())
        }
    }
}

/// `struct sockaddr_un` for `name` and the length Linux reports for it (a path's includes its
/// NUL; an unnamed socket's is the family alone).
pub fn sockaddr_un(name: &[u8]) -> (Vec<u8>, usize) {
    let mut b = Vec::with_capacity(SUN_PATH_AT + name.len() + 1);
    b.extend_from_slice(&(AF_UNIX as u16).to_le_bytes());
    b.extend_from_slice(name);
    let len = match name.first() {
        None => SUN_PATH_AT,
        Some(0) => SUN_PATH_AT + name.len(),
        Some(_) => {
            b.push(0);
            SUN_PATH_AT + name.len() + 1
        }
    };
    (b, len)
}

/// Writes `name` as a `sockaddr_un` to `at` with its length at `len_at` (in: room; out: the
/// full length); nothing if `at` is 0.
pub(super) fn write_sockaddr_un(
    u: &dyn User,
    at: u64,
    len_at: u64,
    name: &[u8],
) -> Result<(), Errno> {
    if at == 0 || len_at == 0 {
        return Ok(());
    }
    let mut l = [0u8; 4];
    u.read(len_at, &mut l)?;
    let room = i32::from_le_bytes(l);
    if room < 0 {
        return Err(EINVAL);
    }
    let (sa, len) = sockaddr_un(name);
    let n = (room as usize).min(sa.len());
    u.write(at, &sa[..n])?;
    u.write(len_at, &(len as u32).to_le_bytes())
}

/// A datagram taken from a ring: its payload's full length, its sender's name, the payload
/// (cut to the room given).
type Frame = (usize, Vec<u8>, Vec<u8>);

/// Lends the destination of a receive: `(offset, len, fill)`.
type Put<'a> = dyn FnMut(usize, usize, &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
    + 'a;

/// Hands `data` to the destination at its start.
fn give(put: &mut Put<'_>, data: &[u8]) -> Result<(), Errno> {
    if data.is_empty() {
        return Ok(());
    }
    put(0, data.len(), &mut |dst| {
        dst.copy_from_slice(data);
        Ok(data.len())
    })?;
    Ok(())
}

impl<B: Backend> Files<B> {
    /// `sendmsg` on a local socket: the vectors as one write (one message for a datagram).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unix_sendmsg(
        &mut self,
        d: &Shared,
        x: &Unix,
        name: u64,
        namelen: u64,
        vecs: &[(u64, u64)],
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        let dest = if name != 0 && namelen != 0 && x.kind == SOCK_DGRAM {
            Some(Self::read_sockaddr_un(u, name, namelen)?)
        } else {
            None
        };
        let total = vecs
            .iter()
            .map(|v| v.1)
            .fold(0u64, u64::saturating_add)
            .min(MAX_RW) as usize;
        self.unix_send(d, x, total, dest, flags, &mut |off, len, take| {
            let mut tmp = vec![0u8; len];
            let mut k = 0;
            for (addr, n) in pieces(vecs, off, len) {
                u.read(addr, &mut tmp[k..k + n])?;
                k += n;
            }
            take(&tmp)
        })
        .map(|n| n as u64)
    }

    /// `recvmsg` on a local socket: one read over all the vectors; the sender's name for a
    /// datagram; no control data.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unix_recvmsg(
        &mut self,
        d: &Shared,
        x: &Unix,
        msg: u64,
        name: u64,
        vecs: &[(u64, u64)],
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        let total = vecs
            .iter()
            .map(|v| v.1)
            .fold(0u64, u64::saturating_add)
            .min(MAX_RW);
        let (n, src) = self.unix_recv_into(d, x, total, flags, &mut |off, len, fill| {
            let mut tmp = vec![0u8; len];
            let got = fill(&mut tmp)?;
            let mut k = 0;
            for (addr, m) in pieces(vecs, off, got) {
                u.write(addr, &tmp[k..k + m])?;
                k += m;
            }
            Ok(got)
        })?;
        // msg_namelen, msg_controllen, msg_flags.
        match src {
            Some(s) if name != 0 && !s.is_empty() => write_sockaddr_un(u, name, msg + 8, &s)?,
            _ => u.write(msg + 8, &0u32.to_le_bytes())?,
        }
        u.write(msg + 40, &0u64.to_le_bytes())?;
        let truncated = n > total;
        u.write(
            msg + 48,
            &(if truncated { MSG_TRUNC } else { 0 }).to_le_bytes(),
        )?;
        Ok(n)
    }

    /// The local socket state of a description, if it is one, or a fused TCP connection's
    /// (its rings are armed and counted the same way).
    pub(super) fn unix_of(d: &Shared) -> Option<Unix> {
        match &d.borrow().object {
            Object::Socket(s) => s.unix.clone().or_else(|| s.fused.as_deref().cloned()),
            _ => None,
        }
    }

    fn unix_update(d: &Shared, f: impl FnOnce(&mut Unix)) {
        if let Object::Socket(s) = &mut d.borrow_mut().object {
            if let Some(x) = s.unix.as_mut() {
                f(x);
            }
        }
    }

    /// The server's name for a program's: an absolute path, or the abstract name itself.
    fn unix_key(&mut self, name: &[u8]) -> Result<Vec<u8>, Errno> {
        let key = if name[0] == 0 {
            name.to_vec()
        } else {
            self.path_at(AT_FDCWD, name)?
        };
        if key.len() > MAX_NAME {
            return Err(ENAMETOOLONG);
        }
        Ok(key)
    }

    fn unix_install(&mut self, x: Unix, nonblock: bool, cloexec: bool) -> SysResult {
        let d = Rc::new(RefCell::new(Description {
            object: Object::Socket(Sock {
                unix: Some(x),
                ..Sock::default()
            }),
            offset: 0,
            flags: O_RDWR | if nonblock { O_NONBLOCK } else { 0 },
        }));
        match self.table.insert(0, d, cloexec) {
            Ok(fd) => Ok(fd as u64),
            Err(e) => {
                self.unix_release(&Sock::default(), None);
                Err(e)
            }
        }
    }

    /// Drops what a local socket holds (its last descriptor closed); `x` if it is one.
    pub(super) fn unix_release(&mut self, _s: &Sock, x: Option<&Unix>) {
        let Some(x) = x else {
            return;
        };
        if let Some((h, _)) = x.rx {
            self.backend.pipe_close(h);
        }
        if let Some((h, _)) = x.tx {
            self.backend.pipe_close(h);
        }
        if let Some(l) = x.listener {
            self.backend.unix_close(l);
        }
    }

    fn unix_kind(ty: u32, proto: u32) -> Result<u32, Errno> {
        let kind = ty & SOCK_TYPE_MASK;
        if proto != 0 {
            return Err(EPROTONOSUPPORT);
        }
        match kind {
            SOCK_STREAM | SOCK_DGRAM | SOCK_SEQPACKET => Ok(kind),
            _ => Err(ESOCKTNOSUPPORT),
        }
    }

    pub(super) fn unix_socket(&mut self, ty: u32, proto: u32) -> SysResult {
        let kind = Self::unix_kind(ty, proto)?;
        self.unix_install(
            Unix {
                kind,
                ..Unix::default()
            },
            ty & SOCK_NONBLOCK != 0,
            ty & SOCK_CLOEXEC != 0,
        )
    }

    /// `socketpair(domain, type, protocol, sv)`.
    pub(super) fn socketpair(
        &mut self,
        domain: u32,
        ty: u32,
        proto: u32,
        sv: u64,
        u: &dyn User,
    ) -> SysResult {
        if domain != AF_UNIX {
            return Err(if domain == AF_INET {
                EOPNOTSUPP
            } else {
                EAFNOSUPPORT
            });
        }
        if ty & !(SOCK_TYPE_MASK | SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
            return Err(EINVAL);
        }
        let kind = Self::unix_kind(ty, proto)?;
        let (r1, w1) = self.backend.pipe_create()?;
        let (r2, w2) = match self.backend.pipe_create() {
            Ok(p) => p,
            Err(e) => {
                self.backend.pipe_close(r1);
                self.backend.pipe_close(w1);
                return Err(e);
            }
        };
        let ring = |b: &mut B, h| b.pipe_ring(h).ok_or(ENFILE);
        let rings = (|| {
            Ok::<_, Errno>([
                ring(&mut self.backend, r1)?,
                ring(&mut self.backend, w1)?,
                ring(&mut self.backend, r2)?,
                ring(&mut self.backend, w2)?,
            ])
        })();
        let rings = match rings {
            Ok(r) => r,
            Err(e) => {
                for h in [r1, w1, r2, w2] {
                    self.backend.pipe_close(h);
                }
                return Err(e);
            }
        };
        let nonblock = ty & SOCK_NONBLOCK != 0;
        let cloexec = ty & SOCK_CLOEXEC != 0;
        // Both ends are ours: each one's peer has our credentials.
        let cred = Some(self.backend.unix_cred());
        let a = Unix {
            kind,
            rx: Some((r1, rings[0])),
            tx: Some((w2, rings[3])),
            peer_cred: cred,
            ..Unix::default()
        };
        let b = Unix {
            kind,
            rx: Some((r2, rings[2])),
            tx: Some((w1, rings[1])),
            peer_cred: cred,
            ..Unix::default()
        };
        let fa = match self.unix_install(a.clone(), nonblock, cloexec) {
            Ok(fd) => fd,
            Err(e) => {
                self.unix_release(&Sock::default(), Some(&a));
                self.unix_release(&Sock::default(), Some(&b));
                return Err(e);
            }
        };
        let fb = match self.unix_install(b.clone(), nonblock, cloexec) {
            Ok(fd) => fd,
            Err(e) => {
                self.unix_release(&Sock::default(), Some(&b));
                let _ = self.close(fa as i32);
                return Err(e);
            }
        };
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&(fa as i32).to_le_bytes());
        out[4..].copy_from_slice(&(fb as i32).to_le_bytes());
        if let Err(e) = u.write(sv, &out) {
            let _ = self.close(fa as i32);
            let _ = self.close(fb as i32);
            return Err(e);
        }
        Ok(0)
    }

    pub(super) fn read_sockaddr_un(u: &dyn User, at: u64, len: u64) -> Result<Vec<u8>, Errno> {
        if len > 128 {
            return Err(EINVAL);
        }
        let mut raw = vec![0u8; len as usize];
        u.read(at, &mut raw)?;
        parse_sockaddr_un(&raw)
    }

    pub(super) fn unix_bind(
        &mut self,
        d: &Shared,
        x: &Unix,
        at: u64,
        len: u64,
        u: &dyn User,
    ) -> SysResult {
        let name = Self::read_sockaddr_un(u, at, len)?;
        if !x.name.is_empty() {
            return Err(EINVAL);
        }
        let key = self.unix_key(&name)?;
        if name[0] != 0 {
            // The inode first: a name that exists (socket or not) is in use.
            let how = OpenHow {
                read: true,
                write: false,
                create: true,
                excl: true,
                trunc: false,
                mode: super::abi::S_IFSOCK | (0o777 & !self.umask),
            };
            if self.backend.stat(&key, false).is_ok() {
                return Err(EADDRINUSE);
            }
            match self.backend.open(&key, how) {
                Ok(Opened::File { handle, .. }) => self.backend.close(handle),
                // The socket inode made: the file system does not open it, the file layer would
                // serve it by its number.
                Ok(Opened::Device { .. }) => {}
                // Should the open fail after the create, the create succeeded if the name is a
                // socket now (it did not exist a moment ago).
                Err(e) => {
                    let made = self
                        .backend
                        .stat(&key, false)
                        .is_ok_and(|st| st.mode & S_IFMT == super::abi::S_IFSOCK);
                    if !made {
                        return Err(if e == EEXIST { EADDRINUSE } else { e });
                    }
                }
            }
        }
        let busy = |e: Errno| if e == EBUSY { EADDRINUSE } else { e };
        if x.kind == SOCK_DGRAM {
            let h = self.backend.unix_mailbox(&key).map_err(busy)?;
            let ring = self.backend.pipe_ring(h).ok_or(ENFILE)?;
            Self::unix_update(d, |x| x.rx = Some((h, ring)));
        } else {
            // Registered at once: the name is taken now, as Linux's `bind` takes it.
            let l = self.backend.unix_listen(&key, u32::MAX).map_err(busy)?;
            Self::unix_update(d, |x| x.listener = Some(l));
        }
        Self::unix_update(d, |x| x.name = name);
        Ok(0)
    }

    pub(super) fn unix_listen_on(&mut self, d: &Shared, x: &Unix) -> SysResult {
        if x.kind == SOCK_DGRAM {
            return Err(EOPNOTSUPP);
        }
        if x.listener.is_none() || x.rx.is_some() {
            return Err(EINVAL);
        }
        Self::unix_update(d, |x| x.listening = true);
        Ok(0)
    }

    /// Runs `op` until it does not answer `EAGAIN`; in between, `arm` makes sure a change wakes
    /// the process, which then waits (unless `nonblock`).
    fn unix_block<T>(
        &mut self,
        nonblock: bool,
        arm: &mut dyn FnMut(&mut B) -> Result<(), Errno>,
        op: &mut dyn FnMut(&mut B) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let mut armed = false;
        loop {
            match op(&mut self.backend) {
                Err(e) if e == EAGAIN && !nonblock => {}
                r => return r,
            }
            if !armed {
                arm(&mut self.backend)?;
                armed = true;
                continue;
            }
            if self.backend.signal_pending() {
                return Err(crate::signal::ERESTARTSYS);
            }
            self.backend.wait_io(None)?;
        }
    }

    pub(super) fn unix_accept(
        &mut self,
        d: &Shared,
        x: &Unix,
        at: u64,
        len_at: u64,
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        if x.kind == SOCK_DGRAM {
            return Err(EOPNOTSUPP);
        }
        let (Some(l), true) = (x.listener, x.listening) else {
            return Err(EINVAL);
        };
        let nonblock = Self::nonblocking(d);
        let (r, w, cred) = self.unix_block(nonblock, &mut |b| b.unix_watch(l), &mut |b| {
            b.unix_accept(l)
        })?;
        let (Some(rr), Some(wr)) = (self.backend.pipe_ring(r), self.backend.pipe_ring(w)) else {
            self.backend.pipe_close(r);
            self.backend.pipe_close(w);
            return Err(ENFILE);
        };
        let fd = self.unix_install(
            Unix {
                kind: x.kind,
                rx: Some((r, rr)),
                tx: Some((w, wr)),
                // An accepted socket has the listener's name.
                name: x.name.clone(),
                peer_cred: Some(cred),
                ..Unix::default()
            },
            flags & SOCK_NONBLOCK != 0,
            flags & SOCK_CLOEXEC != 0,
        )?;
        if let Err(e) = write_sockaddr_un(u, at, len_at, &[]) {
            let _ = self.close(fd as i32);
            return Err(e);
        }
        Ok(fd)
    }

    pub(super) fn unix_connect(
        &mut self,
        d: &Shared,
        x: &Unix,
        at: u64,
        len: u64,
        u: &dyn User,
    ) -> SysResult {
        let name = Self::read_sockaddr_un(u, at, len)?;
        let key = self.unix_key(&name)?;
        if name[0] != 0 {
            // A path that is not there is ENOENT; one nobody listens on, ECONNREFUSED.
            self.backend.stat(&key, true)?;
        }
        if x.kind == SOCK_DGRAM {
            let h = self.backend.unix_deliver_to(&key)?;
            let Some(ring) = self.backend.pipe_ring(h) else {
                self.backend.pipe_close(h);
                return Err(ENFILE);
            };
            if let Some((old, _)) = x.tx {
                self.backend.pipe_close(old);
            }
            Self::unix_update(d, |x| {
                x.tx = Some((h, ring));
                x.peer = name;
            });
            return Ok(0);
        }
        if x.rx.is_some() {
            return Err(EISCONN);
        }
        if x.listening {
            return Err(EINVAL);
        }
        let nonblock = Self::nonblocking(d);
        // A full backlog: Linux's blocking connect waits for room; the server does not tell
        // when there is, so this one looks again every few milliseconds.
        let (r, w, cred) = loop {
            match self.backend.unix_connect(&key) {
                Err(e) if e == EAGAIN && !nonblock => {
                    if self.backend.signal_pending() {
                        return Err(crate::signal::ERESTARTSYS);
                    }
                    let at = self.backend.now_ns() + BACKLOG_RETRY_NS;
                    self.backend.wait_io(Some(at))?;
                }
                r => break r?,
            }
        };
        let (Some(rr), Some(wr)) = (self.backend.pipe_ring(r), self.backend.pipe_ring(w)) else {
            self.backend.pipe_close(r);
            self.backend.pipe_close(w);
            return Err(ENFILE);
        };
        Self::unix_update(d, |x| {
            x.rx = Some((r, rr));
            x.tx = Some((w, wr));
            x.peer = name;
            x.peer_cred = Some(cred);
        });
        Ok(0)
    }

    pub(super) fn unix_shutdown(&mut self, x: &Unix, how: u32) -> SysResult {
        if how > SHUT_RDWR {
            return Err(EINVAL);
        }
        if x.kind != SOCK_DGRAM && (x.rx.is_none() || x.tx.is_none()) {
            return Err(ENOTCONN);
        }
        if how != SHUT_RD {
            if let Some((h, ring)) = x.tx {
                // The peer reads to the end, then end of file: for every holder of this socket.
                ring.set_gone(End::Write);
                self.backend.pipe_poke(h, ring, End::Write);
            }
        }
        if how != SHUT_WR {
            if let Some((h, ring)) = x.rx {
                // Our reads end after what is there; the peer's writes find no reader.
                ring.set_gone(End::Write);
                ring.set_gone(End::Read);
                self.backend.pipe_poke(h, ring, End::Read);
            }
        }
        Ok(0)
    }

    pub(super) fn unix_sockname(
        &mut self,
        x: &Unix,
        at: u64,
        len_at: u64,
        peer: bool,
        u: &dyn User,
    ) -> SysResult {
        if peer {
            let connected = x.tx.is_some() && (x.kind == SOCK_DGRAM || x.rx.is_some());
            if !connected {
                return Err(ENOTCONN);
            }
            write_sockaddr_un(u, at, len_at, &x.peer)?;
        } else {
            write_sockaddr_un(u, at, len_at, &x.name)?;
        }
        Ok(0)
    }

    /// `getsockopt` values only a local socket has; `None`: as for any socket.
    pub(super) fn unix_sockopt(x: &Unix, level: u32, name: u32) -> Option<i32> {
        match (level, name) {
            (SOL_SOCKET, SO_TYPE) => Some(x.kind as i32),
            (SOL_SOCKET, SO_DOMAIN) => Some(AF_UNIX as i32),
            (SOL_SOCKET, SO_PROTOCOL) => Some(0),
            (SOL_SOCKET, SO_ACCEPTCONN) => Some(x.listening as i32),
            _ => None,
        }
    }

    // ---- data ----

    /// Sends `count` bytes (lent by `source`) on a local socket; `to`: a datagram's receiver.
    pub(super) fn unix_send(
        &mut self,
        d: &Shared,
        x: &Unix,
        count: usize,
        to: Option<Vec<u8>>,
        flags: u32,
        source: &mut super::pipe::Source<'_>,
    ) -> Result<usize, Errno> {
        let nonblock = Self::nonblocking(d) || flags & MSG_DONTWAIT != 0;
        let sigpipe = flags & MSG_NOSIGNAL == 0;
        if x.stream() {
            let Some((handle, ring)) = x.tx else {
                return Err(ENOTCONN);
            };
            let p = PipeEnd {
                handle,
                end: End::Write,
                ring,
                nonblock,
            };
            return self.ring_write_from(p, count, sigpipe, source);
        }
        // One message: header, our name, the payload.
        if HEADER + x.name.len() + count > CAPACITY {
            return Err(EMSGSIZE);
        }
        let mut frame = Vec::with_capacity(HEADER + x.name.len() + count);
        frame.extend_from_slice(&header(count, x.name.len()));
        frame.extend_from_slice(&x.name);
        let at = frame.len();
        frame.resize(at + count, 0);
        if count > 0 {
            source(0, count, &mut |b| {
                frame[at..at + b.len()].copy_from_slice(b);
                Ok(b.len())
            })?;
        }
        let temp;
        let (handle, ring) = match (to, x.tx) {
            (Some(name), _) if x.kind == SOCK_DGRAM => {
                let key = self.unix_key(&name)?;
                if name[0] != 0 {
                    self.backend.stat(&key, true)?;
                }
                let h = self.backend.unix_deliver_to(&key)?;
                let Some(ring) = self.backend.pipe_ring(h) else {
                    self.backend.pipe_close(h);
                    return Err(ENFILE);
                };
                temp = Some(h);
                (h, ring)
            }
            (_, Some(t)) => {
                temp = None;
                t
            }
            (_, None) => return Err(ENOTCONN),
        };
        let r = self.unix_put_frame(handle, ring, &frame, nonblock);
        if let Some(h) = temp {
            self.backend.pipe_close(h);
        }
        match r {
            Ok(()) => Ok(count),
            Err(e) if e == EPIPE && x.kind == SOCK_DGRAM => Err(ECONNREFUSED),
            Err(e) if e == EPIPE => {
                if sigpipe {
                    self.backend.sigpipe();
                }
                Err(EPIPE)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes one whole frame (waits for room unless `nonblock`).
    fn unix_put_frame(
        &mut self,
        handle: u64,
        ring: Ring,
        frame: &[u8],
        nonblock: bool,
    ) -> Result<(), Errno> {
        loop {
            let token = self.backend.lock_token();
            let backend = &mut self.backend;
            ring.lock(End::Write, token, &mut |n| backend.lock_patience(n));
            let step = ring.write(frame, true);
            ring.unlock(End::Write, token);
            match step {
                Step::Moved(_) => {
                    if ring.peer_waiting(End::Write) {
                        self.backend.pipe_poke(handle, ring, End::Write);
                    }
                    return Ok(());
                }
                Step::Broken => return Err(EPIPE),
                Step::Wait if nonblock => return Err(EAGAIN),
                Step::Wait => self.pipe_wait(handle, ring, End::Write, frame.len())?,
                Step::Eof | Step::Corrupt => return Err(EIO),
            }
        }
    }

    /// Receives into the program's `buf` (up to `len`) from a local socket: the count (a
    /// datagram's full length with `MSG_TRUNC`) and, for a datagram, its sender's name.
    pub(super) fn unix_recv(
        &mut self,
        d: &Shared,
        x: &Unix,
        buf: u64,
        len: u64,
        flags: u32,
        u: &dyn User,
    ) -> Result<(u64, Option<Vec<u8>>), Errno> {
        self.unix_recv_into(d, x, len, flags, &mut |off, n, fill| {
            u.with_out(buf + off as u64, n, fill)
        })
    }

    /// The receive itself: `put(offset, len, fill)` lends `fill` `len` bytes of the
    /// destination at `offset` and returns how many it filled.
    fn unix_recv_into(
        &mut self,
        d: &Shared,
        x: &Unix,
        len: u64,
        flags: u32,
        put: &mut Put<'_>,
    ) -> Result<(u64, Option<Vec<u8>>), Errno> {
        let nonblock = Self::nonblocking(d) || flags & MSG_DONTWAIT != 0;
        let len = len.min(MAX_RW) as usize;
        let Some((handle, ring)) = x.rx else {
            return Err(if x.stream() { EINVAL } else { ENOTCONN });
        };
        if x.stream() {
            if flags & MSG_PEEK != 0 {
                return self
                    .unix_peek(handle, ring, len, nonblock, put)
                    .map(|n| (n, None));
            }
            let p = PipeEnd {
                handle,
                end: End::Read,
                ring,
                nonblock,
            };
            let waitall = flags & MSG_WAITALL != 0;
            let mut done = 0usize;
            loop {
                let want = (len - done).min(CAPACITY);
                let r = self.ring_read_into(p, want, &mut |n, fill| put(done, n, fill));
                match r {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(_) if done > 0 => break,
                    Err(e) => return Err(e),
                }
                if !waitall || done >= len {
                    break;
                }
            }
            return Ok((done as u64, None));
        }
        loop {
            let token = self.backend.lock_token();
            let backend = &mut self.backend;
            ring.lock(End::Read, token, &mut |n| backend.lock_patience(n));
            let got = Self::unix_take_frame(ring, len, flags & MSG_PEEK != 0);
            ring.unlock(End::Read, token);
            match got {
                Ok(Some((full, name, data))) => {
                    if ring.peer_waiting(End::Read) {
                        self.backend.pipe_poke(handle, ring, End::Read);
                    }
                    give(put, &data)?;
                    let n = if flags & MSG_TRUNC != 0 {
                        full
                    } else {
                        data.len()
                    };
                    return Ok((n as u64, Some(name)));
                }
                Ok(None) if ring.gone(End::Write) => return Ok((0, None)),
                Ok(None) if nonblock => return Err(EAGAIN),
                Ok(None) => self.pipe_wait(handle, ring, End::Read, 1)?,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next frame of `ring` (the caller holds its read lock): its payload's full length,
    /// its sender's name and up to `room` bytes of payload; taken unless `peek`. `None`: empty.
    fn unix_take_frame(ring: Ring, room: usize, peek: bool) -> Result<Option<Frame>, Errno> {
        let held = ring.used().ok_or(EIO)?;
        if held == 0 {
            return Ok(None);
        }
        let mut h = [0u8; HEADER];
        if ring.peek(&mut h, 0) != Some(HEADER) {
            return Err(EIO);
        }
        let (len, name_len) = parse_header(&h, held).ok_or(EIO)?;
        let mut name = vec![0u8; name_len];
        ring.peek(&mut name, HEADER).ok_or(EIO)?;
        let mut data = vec![0u8; len.min(room)];
        ring.peek(&mut data, HEADER + name_len).ok_or(EIO)?;
        if !peek {
            ring.discard(HEADER + name_len + len);
        }
        Ok(Some((len, name, data)))
    }

    /// `MSG_PEEK` on a stream: what is there, left there.
    fn unix_peek(
        &mut self,
        handle: u64,
        ring: Ring,
        len: usize,
        nonblock: bool,
        put: &mut Put<'_>,
    ) -> Result<u64, Errno> {
        let len = len.min(CAPACITY);
        loop {
            let mut tmp = vec![0u8; len];
            let token = self.backend.lock_token();
            let backend = &mut self.backend;
            ring.lock(End::Read, token, &mut |n| backend.lock_patience(n));
            let n = ring.peek(&mut tmp, 0);
            ring.unlock(End::Read, token);
            match n {
                None => return Err(EIO),
                Some(0) if len == 0 || ring.gone(End::Write) => return Ok(0),
                Some(0) if nonblock => return Err(EAGAIN),
                Some(0) => self.pipe_wait(handle, ring, End::Read, 1)?,
                Some(n) => {
                    give(put, &tmp[..n])?;
                    return Ok(n as u64);
                }
            }
        }
    }

    /// `poll` events of a local socket.
    pub(super) fn unix_revents(&mut self, x: &Unix) -> u16 {
        use super::poll::*;
        let mut m = 0;
        if let Some(l) = x.listener.filter(|_| x.listening) {
            if self.backend.unix_pending(l) > 0 {
                m |= POLLIN | POLLRDNORM;
            }
            return m;
        }
        let rx_gone = x.rx.is_some_and(|(_, r)| r.gone(End::Write));
        if let Some((_, r)) = x.rx {
            if r.ready(End::Read).ready || rx_gone {
                m |= POLLIN | POLLRDNORM;
            }
        }
        match x.tx {
            Some((_, r)) => {
                let ready = r.ready(End::Write);
                if ready.ready || ready.gone {
                    m |= POLLOUT | POLLWRNORM;
                }
                if x.stream() && rx_gone && ready.gone {
                    m |= POLLHUP;
                }
            }
            // A datagram socket without a peer can send (to a name); a stream one that never
            // connected is hung up.
            None if x.kind == SOCK_DGRAM => m |= POLLOUT | POLLWRNORM,
            None => m |= POLLOUT | POLLWRNORM | POLLHUP,
        }
        m
    }

    /// Registers the process with what a local socket waits on, and counts it in as a waiter
    /// of its rings (`armed` collects the counts to take back).
    pub(super) fn unix_arm(
        &mut self,
        x: &Unix,
        events: u16,
        armed: &mut Vec<(Ring, End)>,
    ) -> Result<(), Errno> {
        use super::poll::*;
        if let Some(l) = x.listener.filter(|_| x.listening) {
            return self.backend.unix_watch(l);
        }
        if let Some((h, r)) = x.rx {
            self.backend.pipe_watch(h)?;
            if events & (POLLIN | POLLRDNORM) != 0 {
                r.begin_wait(End::Read);
                armed.push((r, End::Read));
            }
        }
        if let Some((h, r)) = x.tx {
            self.backend.pipe_watch(h)?;
            if events & (POLLOUT | POLLWRNORM) != 0 {
                r.begin_wait(End::Write);
                armed.push((r, End::Write));
            }
        }
        Ok(())
    }

    /// `FIONREAD` on a local socket: bytes held (a datagram's: the next one's length).
    pub(super) fn unix_unread(x: &Unix) -> u32 {
        x.rx.map_or(0, |(_, r)| r.used().unwrap_or(0) as u32)
    }
}
