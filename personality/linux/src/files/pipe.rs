//! Pipes in the file layer: `pipe`/`pipe2`, and `read`, `write`, `fstat`, `FIONREAD` on a pipe
//! end, over the ring both ends map (`sawmill_pipe_api::Ring`) and a [`PipeHost`] that creates
//! pipes, wakes the other end and sleeps. A read or write that neither waits nor finds the
//! other end waiting touches only the ring: no server call (the fast path of
//! `linuxabi.pipe.roundtrip`). A side that must wait counts itself in, looks again, and sleeps on
//! the process's one wake notification; a side that moved data and finds the other end counted
//! in asks the host to wake it (`pipe_poke`).
//!
//! A descriptor's end is [`super::table::Object::Pipe`]; the status flags (`O_NONBLOCK`) live in
//! the description as for any file, so `fcntl(F_SETFL)` and `dup` work unchanged.

pub use sawmill_pipe_api::CAPACITY;
use sawmill_pipe_api::{End, Ring, Step, PIPE_BUF};

/// `fcntl` command: the pipe's capacity.
pub const F_GETPIPE_SZ: u32 = 1032;

use super::abi::*;
use super::backend::{makedev, Backend, Stat};
use super::table::{Description, Object, Shared};
use super::{Files, MAX_RW};
use crate::errno::*;
use crate::{Errno, SysResult, User};

use alloc::rc::Rc;
use core::cell::RefCell;

/// What pipes need from the system (the guest: the pipe server and the wake notification; the
/// host tests: rings in memory).
pub trait PipeHost {
    /// A new pipe, both rings mapped: (read end, write end) handles.
    fn pipe_create(&mut self) -> Result<(u64, u64), Errno>;
    /// The ring of an open end.
    fn pipe_ring(&mut self, end: u64) -> Option<Ring>;
    /// Drops an end (its last descriptor closed); once every holder has dropped it, the other
    /// end sees end of file or `EPIPE`.
    fn pipe_close(&mut self, end: u64);
    /// Wakes the waiters of the other end: `end` (whose ring is `ring`, on `side`) moved data
    /// and found the other side's waiting count non-zero.
    fn pipe_poke(&mut self, end: u64, ring: Ring, side: End);
    /// Makes sure a wait on `end` will be woken (registers the process's wake notification once
    /// per end).
    fn pipe_watch(&mut self, end: u64) -> Result<(), Errno>;
    /// Asks the terminal to wake the process once input is readable.
    fn console_watch(&mut self) -> Result<(), Errno>;
    /// Whether a read of the terminal would return at once (a line, end of file, raw bytes).
    fn console_readable(&mut self) -> bool;
    /// Sleeps until woken for input/output, or until monotonic time `deadline` (ns); true if
    /// the deadline passed. `EINTR` if a signal ended the wait.
    fn wait_io(&mut self, deadline: Option<u64>) -> Result<bool, Errno>;
    /// Monotonic time in ns.
    fn now_ns(&mut self) -> u64;
    /// This process's token for the rings' locks (not 0).
    fn lock_token(&mut self) -> u32;
    /// A ring lock was found held `tries` times: wait a little; false once it has been held
    /// too long (its holder is presumed dead and the lock is broken).
    fn lock_patience(&mut self, tries: u32) -> bool;
    /// A write found no reader: the process gets `SIGPIPE` (the signals layer's business).
    fn sigpipe(&mut self);
    /// Whether a signal is deliverable now (a wait that would not sleep still ends with
    /// `EINTR` for one, as Linux's `do_poll` looks at signals before the timeout).
    fn signal_pending(&mut self) -> bool;
    /// `ppoll`/`pselect6`: the signal mask `mask` replaces the process's for the wait (the
    /// signals layer keeps the old one).
    fn wait_mask_begin(&mut self, mask: u64);
    /// The wait with [`wait_mask_begin`](PipeHost::wait_mask_begin)'s mask ended: the old mask
    /// is back now, or, when a signal `interrupted` it, once that signal is delivered (its
    /// handler runs with the old mask saved in its frame, as Linux's
    /// `restore_saved_sigmask_unless`).
    fn wait_mask_end(&mut self, interrupted: bool);
}

/// Lends the bytes of a write: `(offset, len, take)` gives `take` the `len` bytes at `offset`.
pub(super) type Source<'a> = dyn FnMut(usize, usize, &mut dyn FnMut(&[u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
    + 'a;

/// Lends a buffer for a read: `(len, fill)` gives `fill` `len` bytes to fill, returns its count.
pub(super) type Sink<'a> = dyn FnMut(usize, &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
    + 'a;

/// What a [`Source`] is, as a bound: the hot path passes its own closure (inlined), the other
/// callers a `Source`.
pub(super) trait SourceFn:
    FnMut(usize, usize, &mut dyn FnMut(&[u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
{
}
impl<F> SourceFn for F where
    F: FnMut(usize, usize, &mut dyn FnMut(&[u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
        + ?Sized
{
}

/// What a [`Sink`] is, as a bound (see [`SourceFn`]).
pub(super) trait SinkFn:
    FnMut(usize, &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
{
}
impl<F> SinkFn for F where
    F: FnMut(usize, &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>) -> Result<usize, Errno>
        + ?Sized
{
}

/// A pipe end as a description holds it.
#[derive(Clone, Copy)]
pub(super) struct PipeEnd {
    pub handle: u64,
    pub end: End,
    pub ring: Ring,
    pub nonblock: bool,
}

/// The device number `fstat` reports for pipes (Linux's pipefs is an anonymous device too).
const PIPEFS_DEV: u64 = makedev(0, 12);

impl<B: Backend> Files<B> {
    /// `pipe2(fds, flags)`: `pipe` is `flags` 0.
    pub(super) fn pipe2(&mut self, fds: u64, flags: u32, u: &dyn User) -> SysResult {
        if flags & !(O_CLOEXEC | O_NONBLOCK) != 0 {
            return Err(EINVAL);
        }
        let r = self.table.lowest_free(0)?;
        // Two descriptors are needed; the second is looked for above the first.
        let w = self.table.lowest_free(r + 1)?;
        let (re, we) = self.backend.pipe_create()?;
        let (Some(rr), Some(wr)) = (self.backend.pipe_ring(re), self.backend.pipe_ring(we)) else {
            self.backend.pipe_close(re);
            self.backend.pipe_close(we);
            return Err(ENFILE);
        };
        let cloexec = flags & O_CLOEXEC != 0;
        let desc = |handle, end, ring, acc| {
            Rc::new(RefCell::new(Description {
                object: Object::Pipe { handle, end, ring },
                offset: 0,
                flags: acc | flags & O_NONBLOCK,
            }))
        };
        self.table
            .set(r, desc(re, End::Read, rr, O_RDONLY), cloexec);
        self.table
            .set(w, desc(we, End::Write, wr, O_WRONLY), cloexec);
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&(r as i32).to_le_bytes());
        out[4..].copy_from_slice(&(w as i32).to_le_bytes());
        if let Err(e) = u.write(fds, &out) {
            for fd in [r, w] {
                if let Ok(d) = self.table.remove(fd as i32) {
                    self.release(d);
                }
            }
            return Err(e);
        }
        Ok(0)
    }

    /// The end a description is open on, if a pipe.
    pub(super) fn pipe_of(d: &Shared) -> Option<PipeEnd> {
        let d = d.borrow();
        match d.object {
            Object::Pipe { handle, end, ring } => Some(PipeEnd {
                handle,
                end,
                ring,
                nonblock: d.flags & O_NONBLOCK != 0,
            }),
            _ => None,
        }
    }

    /// Waits until `end` may go on (`want` bytes of room for a writer). The caller saw
    /// [`Step::Wait`] and the description is blocking.
    pub(super) fn pipe_wait(
        &mut self,
        handle: u64,
        ring: Ring,
        end: End,
        want: usize,
    ) -> Result<(), Errno> {
        self.backend.pipe_watch(handle)?;
        ring.begin_wait(end);
        let r = if ring.can_go(end, want) {
            Ok(false)
        } else {
            self.backend.wait_io(None)
        };
        ring.end_wait(end);
        r.map(|_| ())
    }

    /// `read` or (`write`) `write` on a pipe end, served straight from the descriptor table:
    /// the hot path of a pipe (one description borrow, no second dispatch, the program-memory
    /// access `U` known at compile time so the range check and the copy are inlined). `None` if
    /// `fd` is not a pipe end open that way: the general path serves it (and gives the error).
    /// The description is held (a reference taken) for the call: a wait lets the file layer go,
    /// and another thread may close the descriptor meanwhile; the ring stays attached while the
    /// description lives.
    #[inline(always)]
    pub fn pipe_rw<U: User + ?Sized>(
        &mut self,
        fd: i32,
        buf: u64,
        count: u64,
        write: bool,
        u: &U,
    ) -> Option<SysResult> {
        let d = self.table.peek(fd)?.clone();
        let p = {
            let d = d.try_borrow().ok()?;
            let Object::Pipe { handle, end, ring } = d.object else {
                return None;
            };
            let acc = d.flags & O_ACCMODE;
            let ok = if write {
                end == End::Write && (acc == O_WRONLY || acc == O_RDWR)
            } else {
                end == End::Read && (acc == O_RDONLY || acc == O_RDWR)
            };
            if !ok || d.flags & O_PATH != 0 {
                return None;
            }
            PipeEnd {
                handle,
                end,
                ring,
                nonblock: d.flags & O_NONBLOCK != 0,
            }
        };
        let r = if write {
            let count = count.min(MAX_RW) as usize;
            self.ring_write_from(p, count, true, &mut |off, len, take| {
                u.with_in(buf + off as u64, len, take)
            })
        } else {
            let count = count.min(MAX_RW).min(CAPACITY as u64) as usize;
            self.ring_read_into(p, count, &mut |len, fill| u.with_out(buf, len, fill))
        };
        drop(d);
        Some(r.map(|n| n as u64))
    }

    /// `read` on a pipe's read end.
    pub(super) fn pipe_read(
        &mut self,
        d: &Shared,
        buf: u64,
        count: u64,
        u: &dyn User,
    ) -> SysResult {
        // One read never returns more than the pipe holds.
        let count = count.min(MAX_RW).min(CAPACITY as u64) as usize;
        self.pipe_read_into(d, count, &mut |len, fill| u.with_out(buf, len, fill))
            .map(|n| n as u64)
    }

    /// `readv` / `writev` on a pipe: one transfer over all the vectors, as Linux makes it (a
    /// read returns what is there without waiting for a later vector; a write of at most
    /// [`PIPE_BUF`] bytes in all is atomic).
    pub(super) fn pipe_vectored(
        &mut self,
        d: &Shared,
        vecs: &[(u64, u64)],
        write: bool,
        u: &dyn User,
    ) -> SysResult {
        let total = vecs.iter().map(|v| v.1).sum::<u64>().min(MAX_RW) as usize;
        let r = if write {
            self.pipe_write_from(d, total, &mut |off, len, take| {
                let mut tmp = alloc::vec![0u8; len];
                let mut k = 0;
                for (addr, n) in pieces(vecs, off, len) {
                    u.read(addr, &mut tmp[k..k + n])?;
                    k += n;
                }
                take(&tmp)
            })
        } else {
            let count = total.min(CAPACITY);
            self.pipe_read_into(d, count, &mut |len, fill| {
                let mut tmp = alloc::vec![0u8; len];
                let n = fill(&mut tmp)?;
                let mut k = 0;
                for (addr, m) in pieces(vecs, 0, n) {
                    u.write(addr, &tmp[k..k + m])?;
                    k += m;
                }
                Ok(n)
            })
        };
        r.map(|n| n as u64)
    }

    /// The read itself: `sink(len, fill)` lends `fill` a buffer of `len` bytes to read into and
    /// returns how many it took.
    fn pipe_read_into(
        &mut self,
        d: &Shared,
        count: usize,
        sink: &mut Sink<'_>,
    ) -> Result<usize, Errno> {
        let p = Self::pipe_of(d).ok_or(EBADF)?;
        self.ring_read_into(p, count, sink)
    }

    /// A read from the ring of end `p` (a pipe's, or a local socket's inbound one).
    #[inline]
    pub(super) fn ring_read_into<S: ?Sized + SinkFn>(
        &mut self,
        p: PipeEnd,
        count: usize,
        sink: &mut S,
    ) -> Result<usize, Errno> {
        let PipeEnd {
            handle,
            ring,
            nonblock,
            ..
        } = p;
        if count == 0 {
            return Ok(0);
        }
        loop {
            let token = self.backend.lock_token();
            let backend = &mut self.backend;
            let mut step = Step::Wait;
            sink(count, &mut |dst| {
                // An empty ring with a writer left (the first look of most blocking reads):
                // nothing to take, so no lock either. The buffer was checked (a bad one is
                // EFAULT, not a wait); the wait counts itself in and looks again.
                if !ring.can_go(End::Read, 1) {
                    return Ok(0);
                }
                ring.lock(End::Read, token, &mut |n| backend.lock_patience(n));
                step = ring.read(dst);
                ring.unlock(End::Read, token);
                Ok(match step {
                    Step::Moved(n) => n,
                    _ => 0,
                })
            })?;
            match step {
                Step::Moved(n) => {
                    if ring.peer_waiting(End::Read) {
                        self.backend.pipe_poke(handle, ring, End::Read);
                    }
                    return Ok(n);
                }
                Step::Eof => return Ok(0),
                Step::Wait if nonblock => return Err(EAGAIN),
                Step::Wait => self.pipe_wait(handle, ring, End::Read, 1)?,
                Step::Broken | Step::Corrupt => return Err(EIO),
            }
        }
    }

    /// `write` on a pipe's write end: at most [`PIPE_BUF`] bytes land in one piece.
    pub(super) fn pipe_write(
        &mut self,
        d: &Shared,
        buf: u64,
        count: u64,
        u: &dyn User,
    ) -> SysResult {
        let count = count.min(MAX_RW) as usize;
        self.pipe_write_from(d, count, &mut |off, len, take| {
            u.with_in(buf + off as u64, len, take)
        })
        .map(|n| n as u64)
    }

    /// Writes the library's own bytes to a pipe (`sendfile` into a pipe).
    pub(super) fn pipe_write_bytes(&mut self, d: &Shared, data: &[u8]) -> Result<usize, Errno> {
        self.pipe_write_from(d, data.len(), &mut |off, len, take| {
            take(&data[off..off + len])
        })
    }

    /// The write itself: `source(offset, len, take)` lends `take` the `len` bytes at `offset`
    /// of what is written.
    fn pipe_write_from(
        &mut self,
        d: &Shared,
        count: usize,
        source: &mut Source<'_>,
    ) -> Result<usize, Errno> {
        let p = Self::pipe_of(d).ok_or(EBADF)?;
        self.ring_write_from(p, count, true, source)
    }

    /// A write into the ring of end `p` (a pipe's, or a local socket's outbound one);
    /// `sigpipe`: a write that finds no reader raises `SIGPIPE` (not with `MSG_NOSIGNAL`).
    #[inline]
    pub(super) fn ring_write_from<S: ?Sized + SourceFn>(
        &mut self,
        p: PipeEnd,
        count: usize,
        sigpipe: bool,
        source: &mut S,
    ) -> Result<usize, Errno> {
        let PipeEnd {
            handle,
            ring,
            nonblock,
            ..
        } = p;
        if count == 0 {
            return Ok(0);
        }
        let atomic = count <= PIPE_BUF;
        let mut done = 0usize;
        let partial = |done: usize, e: Errno| if done == 0 { Err(e) } else { Ok(done) };
        loop {
            let chunk = (count - done).min(CAPACITY);
            let token = self.backend.lock_token();
            let backend = &mut self.backend;
            let mut step = Step::Wait;
            let r = source(done, chunk, &mut |src| {
                ring.lock(End::Write, token, &mut |n| backend.lock_patience(n));
                step = ring.write(src, atomic);
                ring.unlock(End::Write, token);
                Ok(0)
            });
            if let Err(e) = r {
                return partial(done, e);
            }
            match step {
                Step::Moved(n) => {
                    done += n;
                    if ring.peer_waiting(End::Write) {
                        self.backend.pipe_poke(handle, ring, End::Write);
                    }
                    if done == count {
                        return Ok(done);
                    }
                }
                Step::Broken => {
                    if sigpipe {
                        self.backend.sigpipe();
                    }
                    return partial(done, EPIPE);
                }
                Step::Wait if nonblock => return partial(done, EAGAIN),
                Step::Wait => {
                    let want = if atomic { count } else { 1 };
                    if let Err(e) = self.pipe_wait(handle, ring, End::Write, want) {
                        return partial(done, e);
                    }
                }
                Step::Eof | Step::Corrupt => return partial(done, EIO),
            }
        }
    }

    /// What `fstat` says of a pipe end.
    pub(super) fn pipe_stat(&self, handle: u64) -> Stat {
        Stat {
            dev: PIPEFS_DEV,
            ino: handle,
            mode: S_IFIFO | 0o600,
            nlink: 1,
            uid: self.uid,
            gid: self.gid,
            blocks: Some(0),
            ..Stat::default()
        }
    }

    /// `FIONREAD` on a pipe end: the bytes it holds.
    pub(super) fn pipe_unread(ring: Ring) -> u32 {
        ring.used().unwrap_or(0) as u32
    }
}

/// The bytes at logical offset `off` (`len` of them) of the vectors `vecs`: (address, length)
/// pieces. Shared by pipes and local sockets (`unix.rs`).
pub(super) fn pieces(vecs: &[(u64, u64)], off: usize, len: usize) -> alloc::vec::Vec<(u64, usize)> {
    let mut out = alloc::vec::Vec::new();
    let (mut at, mut want) = (0usize, len);
    for &(base, l) in vecs {
        let l = l as usize;
        if want == 0 {
            break;
        }
        if off < at + l && off + len > at {
            let from = off.max(at) - at;
            let n = (l - from).min(want);
            out.push((base + from as u64, n));
            want -= n;
        }
        at += l;
    }
    out
}
