//! Waiting on many descriptors: `poll`, `ppoll`, `select`, `pselect6`. Readiness is Linux's:
//! a pipe's read end is readable with data (`POLLIN`) and hung up once every writer is gone
//! (`POLLHUP`); a write end is writable with room for `PIPE_BUF` bytes (`POLLOUT`) and in error
//! once every reader is gone (`POLLERR`); the terminal is readable when a read would not wait
//! and always writable; files and the library's devices are always both (Linux's
//! `DEFAULT_POLLMASK`); a descriptor not open is `POLLNVAL` (`poll`) or `EBADF` (`select`).
//!
//! A wait arms everything first (registers the process's wake notification with each pipe end
//! and the terminal, counts itself in as a waiter of each pipe end it wants to go on), looks once
//! more, and only then sleeps on the one wake notification (`PipeHost::wait_io`): whatever
//! becomes ready after the look signals it, so nothing is missed. Timeouts: 0 looks once;
//! infinite sleeps until woken; a finite one sleeps until woken or the deadline.
//!
//! A caught signal ends a wait with `EINTR`, never a restart under `SA_RESTART` (Linux's
//! `ERESTARTNOHAND`: restarted only when no handler runs). `ppoll` and `pselect6` wait under
//! the signal mask they are given (the host's `PipeHost::wait_mask_begin`/`_end`): a signal
//! that mask unblocks ends the wait and its handler runs with the old mask saved; otherwise
//! the old mask is back before the call returns.

use alloc::vec;
use alloc::vec::Vec;
use sawmill_pipe_api::{End, Ring};

use super::backend::Backend;
use super::table::{Device, Object};
use super::{Files, MAX_FDS};
use crate::errno::*;
use crate::signal::{ERESTARTNOHAND, ERESTARTSYS};
use crate::{Errno, SysResult, User};

pub const POLLIN: u16 = 0x1;
pub const POLLPRI: u16 = 0x2;
pub const POLLOUT: u16 = 0x4;
pub const POLLERR: u16 = 0x8;
pub const POLLHUP: u16 = 0x10;
pub const POLLNVAL: u16 = 0x20;
pub const POLLRDNORM: u16 = 0x40;
pub const POLLRDBAND: u16 = 0x80;
pub const POLLWRNORM: u16 = 0x100;
pub const POLLWRBAND: u16 = 0x200;

/// What a file without a poll operation reports (Linux's `DEFAULT_POLLMASK`).
const DEFAULT_POLLMASK: u16 = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
/// What `select` counts as readable, writable, exceptional (Linux's `POLLIN_SET`...).
const SELECT_IN: u16 = POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR;
const SELECT_OUT: u16 = POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR;
const SELECT_EX: u16 = POLLPRI;
/// The size of the signal set `ppoll` and `pselect6` take (Linux's `sizeof(sigset_t)`).
const SIGSET_SIZE: u64 = 8;
const NS: u64 = 1_000_000_000;

/// How long to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// Look once.
    Zero,
    /// Until something is ready.
    Infinite,
    /// Until monotonic time (ns).
    Until(u64),
}

/// A timespec from the program: `EINVAL` for a negative or out-of-range one.
fn read_timespec(u: &dyn User, addr: u64) -> Result<(u64, u64), Errno> {
    let mut b = [0u8; 16];
    u.read(addr, &mut b)?;
    let sec = i64::from_le_bytes(b[..8].try_into().unwrap());
    let nsec = i64::from_le_bytes(b[8..].try_into().unwrap());
    if sec < 0 || !(0..NS as i64).contains(&nsec) {
        return Err(EINVAL);
    }
    Ok((sec as u64, nsec as u64))
}

/// The signal set at `addr` (`size` bytes): None for no set (a null pointer), `EINVAL` for a
/// size other than Linux's `sigset_t`.
fn read_sigmask(u: &dyn User, addr: u64, size: u64) -> Result<Option<u64>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    if size != SIGSET_SIZE {
        return Err(EINVAL);
    }
    let mut b = [0u8; 8];
    u.read(addr, &mut b)?;
    Ok(Some(u64::from_le_bytes(b)))
}

fn write_pair(u: &dyn User, addr: u64, a: u64, b: u64) -> Result<(), Errno> {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&a.to_le_bytes());
    out[8..].copy_from_slice(&b.to_le_bytes());
    u.write(addr, &out)
}

impl<B: Backend> Files<B> {
    /// The deadline `ns` from now.
    fn deadline(&mut self, ns: u64) -> Timeout {
        if ns == 0 {
            Timeout::Zero
        } else {
            Timeout::Until(self.backend.now_ns().saturating_add(ns))
        }
    }

    /// What is left of `t` (0 once passed).
    fn left(&mut self, t: Timeout) -> u64 {
        match t {
            Timeout::Until(d) => d.saturating_sub(self.backend.now_ns()),
            _ => 0,
        }
    }

    /// The events of `fd` now, among `events` (plus those always reported).
    fn revents(&mut self, fd: i32, events: u16) -> u16 {
        let Ok(d) = self.table.get(fd) else {
            return POLLNVAL;
        };
        if let Some(s) = Self::sock_of(&d) {
            return self.sock_revents(&d, &s) & (events | POLLERR | POLLHUP);
        }
        let pipe = Self::pipe_of(&d);
        let console = matches!(d.borrow().object, Object::Device(Device::Console));
        let mask = if let Some(p) = pipe {
            let r = p.ring.ready(p.end);
            match p.end {
                End::Read => {
                    (if r.ready { POLLIN | POLLRDNORM } else { 0 })
                        | if r.gone { POLLHUP } else { 0 }
                }
                End::Write => {
                    (if r.ready { POLLOUT | POLLWRNORM } else { 0 })
                        | if r.gone { POLLERR } else { 0 }
                }
            }
        } else if console {
            let readable = events & (POLLIN | POLLRDNORM) != 0 && self.backend.console_readable();
            POLLOUT | POLLWRNORM | if readable { POLLIN | POLLRDNORM } else { 0 }
        } else {
            DEFAULT_POLLMASK
        };
        mask & (events | POLLERR | POLLHUP)
    }

    /// Looks at every entry once: how many have events.
    fn scan(&mut self, wants: &[(i32, u16)], out: &mut [u16]) -> usize {
        let mut n = 0;
        for (i, &(fd, events)) in wants.iter().enumerate() {
            out[i] = if fd < 0 { 0 } else { self.revents(fd, events) };
            if out[i] != 0 {
                n += 1;
            }
        }
        n
    }

    /// Registers the process with everything `wants` waits on and counts it in as a waiter of
    /// the pipe ends; returns the counts to take back.
    fn arm(&mut self, wants: &[(i32, u16)]) -> Result<Vec<(Ring, End)>, Errno> {
        let mut armed = Vec::new();
        let mut console = false;
        for &(fd, events) in wants {
            let Ok(d) = self.table.get(fd) else {
                continue;
            };
            if let Some(x) = Self::unix_of(&d) {
                if let Err(e) = self.unix_arm(&x, events, &mut armed) {
                    self.disarm(armed);
                    return Err(e);
                }
            } else if let Some(s) = Self::sock_of(&d) {
                // A socket that cannot be watched (its stack went, a connection reset) shows
                // that in its readiness, which the scan reports.
                let _ = self.backend.sock_watch(s.handle);
            } else if let Some(p) = Self::pipe_of(&d) {
                let (handle, end, ring) = (p.handle, p.end, p.ring);
                if let Err(e) = self.backend.pipe_watch(handle) {
                    self.disarm(armed);
                    return Err(e);
                }
                let wanted = match end {
                    End::Read => events & (POLLIN | POLLRDNORM) != 0,
                    End::Write => events & (POLLOUT | POLLWRNORM) != 0,
                };
                if wanted {
                    ring.begin_wait(end);
                    armed.push((ring, end));
                }
            } else if matches!(d.borrow().object, Object::Device(Device::Console))
                && events & (POLLIN | POLLRDNORM) != 0
            {
                console = true;
            }
        }
        if console {
            if let Err(e) = self.backend.console_watch() {
                self.disarm(armed);
                return Err(e);
            }
        }
        Ok(armed)
    }

    fn disarm(&mut self, armed: Vec<(Ring, End)>) {
        for (ring, end) in armed {
            ring.end_wait(end);
        }
    }

    /// Waits until an entry of `wants` has events or `t` passes; their events in `out`.
    pub(super) fn wait_ready(
        &mut self,
        wants: &[(i32, u16)],
        out: &mut [u16],
        t: Timeout,
    ) -> Result<usize, Errno> {
        loop {
            let n = self.scan(wants, out);
            if n > 0 {
                return Ok(n);
            }
            if t == Timeout::Zero {
                // Linux looks at signals before the timeout.
                return if self.backend.signal_pending() {
                    Err(ERESTARTNOHAND)
                } else {
                    Ok(0)
                };
            }
            let armed = self.arm(wants)?;
            let n = self.scan(wants, out);
            if n > 0 {
                self.disarm(armed);
                return Ok(n);
            }
            let deadline = match t {
                Timeout::Until(d) => Some(d),
                _ => None,
            };
            // With network sockets among them the wait is bounded (`STACK_RECHECK_NS`): a
            // stack that died signals nobody, so only a look finds out.
            let inet = wants.iter().any(|&(fd, _)| {
                self.table
                    .get(fd)
                    .ok()
                    .and_then(|d| Self::sock_of(&d))
                    .is_some_and(|s| s.unix.is_none())
            });
            let recheck = inet.then(|| {
                self.backend
                    .now_ns()
                    .saturating_add(super::socket::STACK_RECHECK_NS)
            });
            let wait_until = match (deadline, recheck) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            let r = self.backend.wait_io(wait_until).map_err(|e| {
                if e == ERESTARTSYS {
                    ERESTARTNOHAND
                } else {
                    e
                }
            });
            self.disarm(armed);
            if r? && deadline.is_some_and(|d| self.backend.now_ns() >= d) {
                return Ok(self.scan(wants, out));
            }
        }
    }

    /// The `pollfd` array at `fds`, waited on and written back.
    fn poll_array(&mut self, fds: u64, nfds: u64, t: Timeout, u: &dyn User) -> SysResult {
        if nfds > MAX_FDS as u64 {
            return Err(EINVAL);
        }
        let mut raw = vec![0u8; nfds as usize * 8];
        u.read(fds, &mut raw)?;
        let wants: Vec<(i32, u16)> = raw
            .chunks(8)
            .map(|p| {
                (
                    i32::from_le_bytes(p[0..4].try_into().unwrap()),
                    u16::from_le_bytes(p[4..6].try_into().unwrap()),
                )
            })
            .collect();
        let mut out = vec![0u16; wants.len()];
        let n = self.wait_ready(&wants, &mut out, t)?;
        for (p, r) in raw.chunks_mut(8).zip(out) {
            p[6..8].copy_from_slice(&r.to_le_bytes());
        }
        u.write(fds, &raw)?;
        Ok(n as u64)
    }

    /// `poll(fds, nfds, timeout_ms)`: a negative timeout is infinite.
    pub(super) fn poll(&mut self, fds: u64, nfds: u64, timeout_ms: i32, u: &dyn User) -> SysResult {
        let t = if timeout_ms < 0 {
            Timeout::Infinite
        } else {
            self.deadline(timeout_ms as u64 * 1_000_000)
        };
        self.poll_array(fds, nfds, t, u)
    }

    /// `ppoll(fds, nfds, timeout, sigmask, sigsetsize)`: waits under `sigmask` if given.
    pub(super) fn ppoll(
        &mut self,
        fds: u64,
        nfds: u64,
        ts: u64,
        sigmask: u64,
        sigsetsize: u64,
        u: &dyn User,
    ) -> SysResult {
        let t = if ts == 0 {
            Timeout::Infinite
        } else {
            let (s, ns) = read_timespec(u, ts)?;
            self.deadline(s.saturating_mul(NS).saturating_add(ns))
        };
        let mask = read_sigmask(u, sigmask, sigsetsize)?;
        let r = self.with_wait_mask(mask, |f| f.poll_array(fds, nfds, t, u));
        if ts != 0 && r.is_ok() {
            let left = self.left(t);
            write_pair(u, ts, left / NS, left % NS)?;
        }
        r
    }

    /// `select(nfds, readfds, writefds, exceptfds, timeval)`, and `pselect6`'s work with a
    /// timespec (`ns_time`).
    pub(super) fn select(
        &mut self,
        nfds: i32,
        sets: [u64; 3],
        tv: u64,
        ns_time: bool,
        u: &dyn User,
    ) -> SysResult {
        if nfds < 0 {
            return Err(EINVAL);
        }
        let t = if tv == 0 {
            Timeout::Infinite
        } else if ns_time {
            let (s, ns) = read_timespec(u, tv)?;
            self.deadline(s.saturating_mul(NS).saturating_add(ns))
        } else {
            let mut b = [0u8; 16];
            u.read(tv, &mut b)?;
            let sec = i64::from_le_bytes(b[..8].try_into().unwrap());
            let usec = i64::from_le_bytes(b[8..].try_into().unwrap());
            if sec < 0 || usec < 0 {
                return Err(EINVAL);
            }
            // Linux normalises microseconds beyond a second.
            let ns = (sec as u64)
                .saturating_mul(NS)
                .saturating_add((usec as u64).saturating_mul(1000));
            self.deadline(ns)
        };
        // Descriptors beyond the table's end cannot be open (Linux cuts nfds there too).
        let n = (nfds as usize).min(MAX_FDS);
        let words = n.div_ceil(64);
        let mut bits = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
        for (k, &addr) in sets.iter().enumerate() {
            if addr != 0 && words > 0 {
                let mut raw = vec![0u8; words * 8];
                u.read(addr, &mut raw)?;
                for (w, c) in bits[k].iter_mut().zip(raw.chunks(8)) {
                    *w = u64::from_le_bytes(c.try_into().unwrap());
                }
                // Bits at or above nfds are not looked at.
                if !n.is_multiple_of(64) {
                    bits[k][words - 1] &= (1u64 << (n % 64)) - 1;
                }
            }
        }
        let mut wants = Vec::new();
        for fd in 0..n {
            let (w, b) = (fd / 64, fd % 64);
            let mut events = 0;
            for (k, set) in [SELECT_IN, SELECT_OUT, SELECT_EX].into_iter().enumerate() {
                if bits[k][w] >> b & 1 != 0 {
                    events |= set;
                }
            }
            if events != 0 {
                if self.table.get(fd as i32).is_err() {
                    return Err(EBADF);
                }
                wants.push((fd as i32, events));
            }
        }
        let mut out = vec![0u16; wants.len()];
        self.wait_ready(&wants, &mut out, t)?;
        let mut result = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
        let mut count = 0u64;
        for (&(fd, events), &r) in wants.iter().zip(&out) {
            let (w, b) = (fd as usize / 64, fd as usize % 64);
            for (k, set) in [SELECT_IN, SELECT_OUT, SELECT_EX].into_iter().enumerate() {
                if events & set != 0 && r & set != 0 {
                    result[k][w] |= 1 << b;
                    count += 1;
                }
            }
        }
        for (k, &addr) in sets.iter().enumerate() {
            if addr != 0 && words > 0 {
                let raw: Vec<u8> = result[k].iter().flat_map(|w| w.to_le_bytes()).collect();
                u.write(addr, &raw)?;
            }
        }
        if tv != 0 {
            let left = self.left(t);
            if ns_time {
                write_pair(u, tv, left / NS, left % NS)?;
            } else {
                write_pair(u, tv, left / NS, left % NS / 1000)?;
            }
        }
        Ok(count)
    }

    /// `pselect6(nfds, readfds, writefds, exceptfds, timespec, sig)`: `sig` points at a
    /// {sigset pointer, size} pair; the wait runs under that mask if given.
    pub(super) fn pselect6(
        &mut self,
        nfds: i32,
        sets: [u64; 3],
        ts: u64,
        sig: u64,
        u: &dyn User,
    ) -> SysResult {
        let mut mask = None;
        if sig != 0 {
            let mut b = [0u8; 16];
            u.read(sig, &mut b)?;
            let set = u64::from_le_bytes(b[..8].try_into().unwrap());
            let size = u64::from_le_bytes(b[8..].try_into().unwrap());
            mask = read_sigmask(u, set, size)?;
        }
        self.with_wait_mask(mask, |f| f.select(nfds, sets, ts, true, u))
    }

    /// Runs the wait `f` under signal mask `mask` (if given), the old mask back afterwards
    /// (at the delivery of the signal that interrupted it, if one did).
    fn with_wait_mask(
        &mut self,
        mask: Option<u64>,
        f: impl FnOnce(&mut Self) -> SysResult,
    ) -> SysResult {
        let Some(m) = mask else {
            return f(self);
        };
        self.backend.wait_mask_begin(m);
        let r = f(self);
        self.backend.wait_mask_end(r == Err(ERESTARTNOHAND));
        r
    }
}
