//! What the pipe server (`servers/pipe`) and its clients (the Linux personality) agree on: the
//! layout of a pipe's shared memory and the logic every side runs on it. Plain logic over a
//! memory range; it touches nothing else, and it is tested on the host.
//!
//! A pipe is one dataspace of [`RING_BYTES`]: a control page ([`Control`]) and then
//! [`CAPACITY`] bytes of data. Both ends map it and move data through it themselves; the server
//! only writes the `*_gone` flags (when the kernel tells it that the last capability of an end
//! is gone) and wakes waiters. Positions are free-running `u32` byte counts (`head` = bytes ever
//! written, `tail` = bytes ever read); a byte's place is its count modulo [`CAPACITY`].
//!
//! **Nothing in the page is trusted.** Every process sharing a pipe can write every word of
//! it, so every reader of a position bounds what it finds: indices are always reduced modulo
//! the capacity (no access outside the ring, whatever the values), and `head - tail` larger than
//! the capacity is [`Step::Corrupt`] (the caller reports `EIO`). A peer can garble the data of a
//! pipe it shares; it cannot make another side touch memory outside the ring.
//!
//! **Wakeups.** A side that must wait counts itself in (`readers_waiting` or `writers_waiting`,
//! [`Ring::begin_wait`]) and then looks at the ring again before it sleeps; a side that made
//! progress publishes its position first and then looks at the other side's count
//! ([`Ring::peer_waiting`]), and if it is not zero asks the server to wake that side. All four
//! accesses are sequentially consistent, so at least one of the two sees the other (no wakeup is
//! lost). The server sets a `*_gone` flag before it wakes the other side, and a reader looks at
//! `writers_gone` before `head`, so end of file is never reported while data is still there.
//!
//! **Several writers (or readers)** on one end (after `fork` or `dup`) exclude each other with
//! a lock word in the page ([`Ring::lock`]) held only while bytes are copied, so a write of at
//! most [`PIPE_BUF`] bytes lands in one piece. A holder that died holding it (killed between
//! taking and releasing, a few hundred instructions) would block the end forever, so a waiter
//! that has waited longer than its caller's bound breaks the lock: the dead holder had not
//! published anything (positions move only at the end), so the ring stays consistent; a live
//! holder that was merely slow loses its exclusion for that one write, whose bytes may then
//! interleave with another's. That is the whole damage, and only between processes that share
//! the end.
#![no_std]

use core::sync::atomic::{AtomicU32, Ordering::SeqCst};

/// Bytes of data a pipe holds (Linux's default pipe size).
pub const CAPACITY: usize = 64 * 1024;
/// Writes of at most this many bytes are atomic (Linux's `PIPE_BUF`).
pub const PIPE_BUF: usize = 4096;
/// The control page.
pub const CONTROL_BYTES: usize = 4096;
/// The whole shared range: the control page, then the data.
pub const RING_BYTES: usize = CONTROL_BYTES + CAPACITY;
/// Most pipes the server keeps at once (each costs [`RING_BYTES`] of its memory).
pub const MAX_PIPES: usize = 128;
/// Most wake notifications registered on one end of one pipe: one per process, so that every
/// process proc may hold (its `max_procs`) can wait on the same end (200 children blocked
/// reading one pipe, issue 14).
pub const MAX_WATCHERS: usize = 256;

/// Which end of a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Read,
    Write,
}

impl End {
    /// The other end.
    pub fn peer(self) -> End {
        match self {
            End::Read => End::Write,
            End::Write => End::Read,
        }
    }
}

/// The control page's words (at offset 0 of the shared range).
#[repr(C)]
pub struct Control {
    /// Bytes ever written (wrapping).
    pub head: AtomicU32,
    /// Bytes ever read (wrapping).
    pub tail: AtomicU32,
    /// 0 when free, else the holder's token: writers' and readers' locks.
    pub write_lock: AtomicU32,
    pub read_lock: AtomicU32,
    /// How many readers (writers) wait to be woken.
    pub readers_waiting: AtomicU32,
    pub writers_waiting: AtomicU32,
    /// Set by the server: the last capability of the write (read) end is gone.
    pub writers_gone: AtomicU32,
    pub readers_gone: AtomicU32,
    /// Set by the server: how often a notification was registered with the read (write) end.
    /// A side that cached the other end's one waiter (`waker`) signals it directly while this
    /// count is what it was then.
    pub readers_registered: AtomicU32,
    pub writers_registered: AtomicU32,
}

const _: () = assert!(core::mem::size_of::<Control>() <= CONTROL_BYTES);
const _: () = assert!(CAPACITY.is_power_of_two() && CAPACITY < u32::MAX as usize);

/// What a read or write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Moved this many bytes (at least one).
    Moved(usize),
    /// Nothing to read yet, or no room for the write (all of it, for an atomic one).
    Wait,
    /// Read: empty and every writer gone (end of file).
    Eof,
    /// Write: every reader gone (`EPIPE`).
    Broken,
    /// The positions make no sense (a peer wrote garbage): `EIO`.
    Corrupt,
}

/// Readiness of an end for `poll`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Read end: data to read. Write end: room for [`PIPE_BUF`] bytes.
    pub ready: bool,
    /// Read end: every writer gone (`POLLHUP`). Write end: every reader gone (`POLLERR`).
    pub gone: bool,
}

/// Below this many bytes a transfer is copied byte by byte inline rather than by a call to
/// `memcpy` (whose call and setup cost more than the copy: one-byte and line-sized writes are
/// the common pipe traffic of shells and of `linuxabi.pipe.roundtrip`).
const SMALL_COPY: usize = 16;

/// Copies `n` bytes from `src` to `dst`.
///
/// # Safety
/// As `core::ptr::copy_nonoverlapping`.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    if n < SMALL_COPY {
        for i in 0..n {
            // SAFETY: the caller's promise; volatile keeps the compiler from turning the loop
            // back into a `memcpy` call.
            unsafe { dst.add(i).write_volatile(src.add(i).read_volatile()) };
        }
    } else {
        // SAFETY: the caller's promise.
        unsafe { core::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

/// A pipe's shared range as one side sees it: a pointer to [`RING_BYTES`] of mapped memory.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    base: *mut u8,
}

// SAFETY: the ring is memory shared with other processes by design: every access through it is
// an atomic or a copy bounded to the ring (the module header), so several threads may use it.
unsafe impl Send for Ring {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ring {}

impl Ring {
    /// The ring at `base`.
    ///
    /// # Safety
    /// `base` is page aligned and [`RING_BYTES`] from it stay mapped readable and writable for
    /// as long as this value (or a copy) is used. Other processes may write the memory at any
    /// time; that is what the ring is built for.
    pub unsafe fn new(base: *mut u8) -> Ring {
        Ring { base }
    }

    #[inline]
    fn ctl(&self) -> &Control {
        // SAFETY: `new`'s contract: the control page is mapped; `Control` is only atomics, so
        // concurrent writers in other processes are fine.
        unsafe { &*(self.base as *const Control) }
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        // SAFETY: inside the mapped range (`new`'s contract).
        unsafe { self.base.add(CONTROL_BYTES) }
    }

    /// Bytes held now, or `None` if the positions are garbage.
    #[inline]
    pub fn used(&self) -> Option<usize> {
        let c = self.ctl();
        let tail = c.tail.load(SeqCst);
        let head = c.head.load(SeqCst);
        let used = head.wrapping_sub(tail) as usize;
        (used <= CAPACITY).then_some(used)
    }

    /// Copies up to `dst.len()` bytes out (the caller holds the read lock).
    #[inline]
    pub fn read(&self, dst: &mut [u8]) -> Step {
        let c = self.ctl();
        // `writers_gone` first: if it is set, every write happened before it, so `head` below
        // sees them all.
        let gone = c.writers_gone.load(SeqCst) != 0;
        let tail = c.tail.load(SeqCst);
        let head = c.head.load(SeqCst);
        let used = head.wrapping_sub(tail) as usize;
        if used > CAPACITY {
            return Step::Corrupt;
        }
        if used == 0 {
            return if gone { Step::Eof } else { Step::Wait };
        }
        if dst.is_empty() {
            return Step::Moved(0);
        }
        let n = used.min(dst.len());
        let at = tail as usize % CAPACITY;
        let first = n.min(CAPACITY - at);
        // SAFETY: `at < CAPACITY` and `at + first <= CAPACITY`, `n - first < CAPACITY`: both
        // ranges lie in the data area; `dst` is our own memory, distinct from the ring.
        unsafe {
            copy(self.data().add(at), dst.as_mut_ptr(), first);
            if n > first {
                copy(self.data(), dst.as_mut_ptr().add(first), n - first);
            }
        }
        c.tail.store(tail.wrapping_add(n as u32), SeqCst);
        Step::Moved(n)
    }

    /// Copies up to `dst.len()` bytes out from `skip` bytes past the oldest, without taking
    /// them (`MSG_PEEK`, and a datagram's header). The caller holds the read lock. Returns the
    /// bytes copied, or `None` if the positions are garbage.
    pub fn peek(&self, dst: &mut [u8], skip: usize) -> Option<usize> {
        let c = self.ctl();
        let tail = c.tail.load(SeqCst);
        let head = c.head.load(SeqCst);
        let used = head.wrapping_sub(tail) as usize;
        if used > CAPACITY {
            return None;
        }
        let n = used.saturating_sub(skip).min(dst.len());
        let at = (tail as usize).wrapping_add(skip) % CAPACITY;
        let first = n.min(CAPACITY - at);
        // SAFETY: as in `read`: `at < CAPACITY`, `first <= CAPACITY - at`, `n - first <
        // CAPACITY`; `dst` is our own memory.
        unsafe {
            core::ptr::copy_nonoverlapping(self.data().add(at), dst.as_mut_ptr(), first);
            core::ptr::copy_nonoverlapping(self.data(), dst.as_mut_ptr().add(first), n - first);
        }
        Some(n)
    }

    /// Drops `n` bytes (at most what is held) without copying them (the rest of a datagram
    /// cut short). The caller holds the read lock.
    pub fn discard(&self, n: usize) {
        let c = self.ctl();
        let tail = c.tail.load(SeqCst);
        let used = c.head.load(SeqCst).wrapping_sub(tail) as usize;
        let n = n.min(used.min(CAPACITY));
        c.tail.store(tail.wrapping_add(n as u32), SeqCst);
    }

    /// Whether the server (or a `shutdown`) marked `end` gone.
    pub fn gone(&self, end: End) -> bool {
        let c = self.ctl();
        match end {
            End::Read => c.readers_gone.load(SeqCst) != 0,
            End::Write => c.writers_gone.load(SeqCst) != 0,
        }
    }

    /// Copies up to `src.len()` bytes in (the caller holds the write lock); `atomic`: all or
    /// nothing (a write of at most [`PIPE_BUF`] bytes).
    #[inline]
    pub fn write(&self, src: &[u8], atomic: bool) -> Step {
        let c = self.ctl();
        if c.readers_gone.load(SeqCst) != 0 {
            return Step::Broken;
        }
        let head = c.head.load(SeqCst);
        let tail = c.tail.load(SeqCst);
        let used = head.wrapping_sub(tail) as usize;
        if used > CAPACITY {
            return Step::Corrupt;
        }
        let free = CAPACITY - used;
        if src.is_empty() {
            return Step::Moved(0);
        }
        if free == 0 || (atomic && free < src.len()) {
            return Step::Wait;
        }
        let n = free.min(src.len());
        let at = head as usize % CAPACITY;
        let first = n.min(CAPACITY - at);
        // SAFETY: as in `read`: both ranges lie in the data area; `src` is our own memory.
        unsafe {
            copy(src.as_ptr(), self.data().add(at), first);
            if n > first {
                copy(src.as_ptr().add(first), self.data(), n - first);
            }
        }
        c.head.store(head.wrapping_add(n as u32), SeqCst);
        Step::Moved(n)
    }

    /// Readiness of `end` (for `poll`). Garbage positions count as ready (the call that follows
    /// reports `EIO`).
    pub fn ready(&self, end: End) -> Ready {
        let c = self.ctl();
        match end {
            End::Read => {
                let gone = c.writers_gone.load(SeqCst) != 0;
                Ready {
                    ready: self.used() != Some(0),
                    gone,
                }
            }
            End::Write => {
                let gone = c.readers_gone.load(SeqCst) != 0;
                Ready {
                    ready: self.used().is_none_or(|u| CAPACITY - u >= PIPE_BUF),
                    gone,
                }
            }
        }
    }

    /// Whether the wait of `end` can end now: something to read (or end of file), room to
    /// write `want` bytes (or no reader left).
    #[inline]
    pub fn can_go(&self, end: End, want: usize) -> bool {
        let c = self.ctl();
        match end {
            End::Read => c.writers_gone.load(SeqCst) != 0 || self.used() != Some(0),
            End::Write => {
                c.readers_gone.load(SeqCst) != 0
                    || self
                        .used()
                        .is_none_or(|u| CAPACITY - u >= want.clamp(1, CAPACITY))
            }
        }
    }

    #[inline]
    fn waiting_word(&self, end: End) -> &AtomicU32 {
        match end {
            End::Read => &self.ctl().readers_waiting,
            End::Write => &self.ctl().writers_waiting,
        }
    }

    /// Counts a waiter of `end` in; the caller then checks [`Ring::can_go`] before it sleeps.
    #[inline]
    pub fn begin_wait(&self, end: End) {
        self.waiting_word(end).fetch_add(1, SeqCst);
    }

    /// Counts the waiter out again (it never goes below 0, whatever a peer wrote).
    #[inline]
    pub fn end_wait(&self, end: End) {
        let w = self.waiting_word(end);
        let _ = w.fetch_update(SeqCst, SeqCst, |v| Some(v.saturating_sub(1)));
    }

    /// After moving data at `end`: whether the other end has waiters to wake.
    #[inline]
    pub fn peer_waiting(&self, end: End) -> bool {
        self.waiting_word(end.peer()).load(SeqCst) != 0
    }

    /// How often a notification was registered with `end` (a peer may have written anything
    /// here: a wrong count misleads only the sides of this pipe).
    #[inline]
    pub fn registrations(&self, end: End) -> u32 {
        self.registered_word(end).load(SeqCst)
    }

    /// The server publishes its count of registrations with `end`, before it answers
    /// `register` (so before the registrant can count itself in as a waiter).
    pub fn set_registrations(&self, end: End, n: u32) {
        self.registered_word(end).store(n, SeqCst);
    }

    #[inline]
    fn registered_word(&self, end: End) -> &AtomicU32 {
        match end {
            End::Read => &self.ctl().readers_registered,
            End::Write => &self.ctl().writers_registered,
        }
    }

    /// The server's mark that the last capability of `end` is gone.
    pub fn set_gone(&self, end: End) {
        let c = self.ctl();
        match end {
            End::Read => c.readers_gone.store(1, SeqCst),
            End::Write => c.writers_gone.store(1, SeqCst),
        }
    }

    #[inline]
    fn lock_word(&self, end: End) -> &AtomicU32 {
        match end {
            End::Read => &self.ctl().read_lock,
            End::Write => &self.ctl().write_lock,
        }
    }

    /// Takes `end`'s lock for `token` (not 0). While another holds it, `keep_waiting(n)` is
    /// called (n = how often so far; it may yield the processor) and, once it says false, the
    /// lock is broken and taken (see the module header for why that is safe).
    #[inline]
    pub fn lock(&self, end: End, token: u32, keep_waiting: &mut dyn FnMut(u32) -> bool) {
        let token = token.max(1);
        if self
            .lock_word(end)
            .compare_exchange(0, token, SeqCst, SeqCst)
            .is_err()
        {
            self.lock_contended(end, token, keep_waiting);
        }
    }

    /// [`Ring::lock`] once the lock was found held.
    #[inline(never)]
    fn lock_contended(&self, end: End, token: u32, keep_waiting: &mut dyn FnMut(u32) -> bool) {
        let w = self.lock_word(end);
        let mut tries = 0u32;
        loop {
            match w.compare_exchange(0, token, SeqCst, SeqCst) {
                Ok(_) => return,
                Err(held) => {
                    tries = tries.saturating_add(1);
                    if !keep_waiting(tries)
                        && w.compare_exchange(held, token, SeqCst, SeqCst).is_ok()
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Gives `end`'s lock back (unless someone broke it meanwhile: then it is theirs).
    #[inline]
    pub fn unlock(&self, end: End, token: u32) {
        let _ = self
            .lock_word(end)
            .compare_exchange(token.max(1), 0, SeqCst, SeqCst);
    }
}

pub mod unix;

#[cfg(test)]
mod tests;
