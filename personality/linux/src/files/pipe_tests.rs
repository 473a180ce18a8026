//! Host tests of pipes and poll/select in the file layer: a mock host keeps the rings in
//! memory and plays the pipe server (an end is gone once its last handle is closed). Expected
//! values are Linux's (the same cases run on Linux in tests/linux/pipe.c).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::abi::*;
use super::mock::Mock;
use super::pipe::PipeHost;
use super::poll::*;
use super::Files;
use crate::errno::*;
use crate::signal::ERESTARTNOHAND;
use crate::{nr, Errno, SysResult, User};
use sawmill_pipe_api::{End, Ring, CAPACITY, RING_BYTES};

/// The pipe side of the mock: rings, which handle is which end, a clock.
#[derive(Default)]
pub struct MockPipes {
    rings: Vec<Box<[u64]>>,
    /// handle -> (ring index, end)
    ends: BTreeMap<u64, (usize, End)>,
    next: u64,
    pub now: u64,
    pub pokes: usize,
    pub watches: usize,
    pub sigpipes: usize,
    pub console_watches: usize,
    /// A wait without a deadline ends as a caught signal would end it (ERESTARTSYS).
    pub signal_in_wait: bool,
    /// The masks `ppoll`/`pselect6` set for their waits, and whether each wait's end was
    /// interrupted.
    pub wait_masks: Vec<u64>,
    pub mask_ends: Vec<bool>,
}

impl MockPipes {
    fn ring_at(&mut self, i: usize) -> Ring {
        // SAFETY: the boxed slice holds RING_BYTES and lives as long as the mock.
        unsafe { Ring::new(self.rings[i].as_mut_ptr() as *mut u8) }
    }
}

impl PipeHost for Mock {
    fn pipe_create(&mut self) -> Result<(u64, u64), Errno> {
        let p = &mut self.pipes;
        p.rings.push(vec![0u64; RING_BYTES / 8].into_boxed_slice());
        let i = p.rings.len() - 1;
        p.next += 2;
        p.ends.insert(p.next, (i, End::Read));
        p.ends.insert(p.next + 1, (i, End::Write));
        Ok((p.next, p.next + 1))
    }
    fn pipe_ring(&mut self, end: u64) -> Option<Ring> {
        let (i, _) = *self.pipes.ends.get(&end)?;
        Some(self.pipes.ring_at(i))
    }
    fn pipe_close(&mut self, end: u64) {
        // The library drops an end once (its last description); the mock server then marks it.
        if let Some((i, e)) = self.pipes.ends.remove(&end) {
            self.pipes.ring_at(i).set_gone(e);
        }
    }
    fn pipe_poke(&mut self, _end: u64, _ring: Ring, _side: End) {
        self.pipes.pokes += 1;
    }
    fn pipe_watch(&mut self, _end: u64) -> Result<(), Errno> {
        self.pipes.watches += 1;
        Ok(())
    }
    fn console_watch(&mut self) -> Result<(), Errno> {
        self.pipes.console_watches += 1;
        Ok(())
    }
    fn console_readable(&mut self) -> bool {
        !self.console_in.is_empty()
    }
    /// One thread only: a wait without a deadline would never end (EDEADLK tells the test it
    /// was reached); with one, the clock jumps there.
    fn wait_io(&mut self, deadline: Option<u64>) -> Result<bool, Errno> {
        match deadline {
            Some(d) => {
                self.pipes.now = self.pipes.now.max(d);
                Ok(true)
            }
            None if self.pipes.signal_in_wait => Err(crate::signal::ERESTARTSYS),
            None => Err(EDEADLK),
        }
    }
    fn now_ns(&mut self) -> u64 {
        self.pipes.now
    }
    fn lock_token(&mut self) -> u32 {
        1
    }
    fn lock_patience(&mut self, tries: u32) -> bool {
        tries < 3
    }
    fn sigpipe(&mut self) {
        self.pipes.sigpipes += 1;
    }
    fn signal_pending(&mut self) -> bool {
        self.pipes.signal_in_wait
    }
    fn wait_mask_begin(&mut self, mask: u64) {
        self.pipes.wait_masks.push(mask);
    }
    fn wait_mask_end(&mut self, interrupted: bool) {
        self.pipes.mask_ends.push(interrupted);
    }
}

/// The program's memory: one range at BASE.
pub(super) struct Mem(RefCell<Vec<u8>>);
const BASE: u64 = 0x10_0000;
const SIZE: usize = 1 << 20;
const BAD: u64 = 0x1000;
pub(super) const FDS: u64 = BASE;
pub(super) const BUF: u64 = BASE + 0x1000;

impl User for Mem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let o = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        let m = self.0.borrow();
        let src = m.get(o..o + buf.len()).ok_or(EFAULT)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        let o = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        let mut m = self.0.borrow_mut();
        m.get_mut(o..o + data.len())
            .ok_or(EFAULT)?
            .copy_from_slice(data);
        Ok(())
    }
    fn cstr(&self, _addr: u64, _max: usize) -> Result<Vec<u8>, Errno> {
        Err(EFAULT)
    }
    // Lends the memory itself after checking the range, as the guest does.
    fn with_out(
        &self,
        addr: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let o = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        let mut m = self.0.borrow_mut();
        fill(m.get_mut(o..o + len).ok_or(EFAULT)?)
    }
    fn with_in(
        &self,
        addr: u64,
        len: usize,
        take: &mut dyn FnMut(&[u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let o = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        let m = self.0.borrow();
        take(m.get(o..o + len).ok_or(EFAULT)?)
    }
}

pub(super) struct P {
    pub(super) f: Files<Mock>,
    pub(super) m: Mem,
}

impl P {
    pub(super) fn new() -> P {
        P {
            f: Files::new(Mock::new(), b"/bin/prog"),
            m: Mem(RefCell::new(vec![0; SIZE])),
        }
    }
    pub(super) fn call(&mut self, n: u64, a: &[u64]) -> SysResult {
        let mut args = [0u64; 6];
        args[..a.len()].copy_from_slice(a);
        self.f.dispatch(n, args, &self.m).expect("a file call")
    }
    /// pipe2: (read fd, write fd).
    fn pipe(&mut self, flags: u32) -> (u64, u64) {
        assert_eq!(self.call(nr::PIPE2, &[FDS, flags as u64]), Ok(0));
        let mut b = [0u8; 8];
        self.m.read(FDS, &mut b).unwrap();
        (
            u32::from_le_bytes(b[..4].try_into().unwrap()) as u64,
            u32::from_le_bytes(b[4..].try_into().unwrap()) as u64,
        )
    }
    pub(super) fn write(&mut self, fd: u64, data: &[u8]) -> SysResult {
        self.m.write(BUF, data).unwrap();
        self.call(nr::WRITE, &[fd, BUF, data.len() as u64])
    }
    pub(super) fn read(&mut self, fd: u64, n: usize) -> Result<Vec<u8>, Errno> {
        let got = self.call(nr::READ, &[fd, BUF, n as u64])? as usize;
        let mut b = vec![0u8; got];
        self.m.read(BUF, &mut b).unwrap();
        Ok(b)
    }
    /// poll on one descriptor: (result, revents).
    pub(super) fn poll1(&mut self, fd: i64, events: u16, timeout: i32) -> (SysResult, u16) {
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&(fd as i32).to_le_bytes());
        e[4..6].copy_from_slice(&events.to_le_bytes());
        self.m.write(FDS, &e).unwrap();
        let r = self.call(nr::POLL, &[FDS, 1, timeout as u32 as u64]);
        self.m.read(FDS, &mut e).unwrap();
        (r, u16::from_le_bytes(e[6..8].try_into().unwrap()))
    }
}

#[test]
fn a_pipe_carries_bytes_and_reports_itself() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    assert_eq!((r, w), (3, 4));
    assert_eq!(p.write(w, b"hello"), Ok(5));
    assert_eq!(p.call(nr::IOCTL, &[r, FIONREAD as u64, BUF + 64]), Ok(0));
    let mut n = [0u8; 4];
    p.m.read(BUF + 64, &mut n).unwrap();
    assert_eq!(u32::from_le_bytes(n), 5);
    assert_eq!(p.read(r, 3).unwrap(), b"hel");
    assert_eq!(p.read(r, 100).unwrap(), b"lo");
    // fstat: a FIFO, owner read-write.
    assert_eq!(p.call(nr::FSTAT, &[r, BUF + 256]), Ok(0));
    let mut st = [0u8; 144];
    p.m.read(BUF + 256, &mut st).unwrap();
    let mode = u32::from_le_bytes(st[24..28].try_into().unwrap());
    assert_eq!(mode, S_IFIFO | 0o600);
    // Not seekable, no pread; the wrong direction is EBADF.
    assert_eq!(p.call(nr::LSEEK, &[r, 0, 0]), Err(ESPIPE));
    assert_eq!(p.call(nr::PREAD64, &[r, BUF, 1, 0]), Err(ESPIPE));
    assert_eq!(p.call(nr::WRITE, &[r, BUF, 1]), Err(EBADF));
    assert_eq!(p.call(nr::READ, &[w, BUF, 1]), Err(EBADF));
    assert_eq!(p.call(nr::IOCTL, &[r, TCGETS as u64, BUF]), Err(ENOTTY));
    assert_eq!(p.call(nr::FCNTL, &[w, F_GETFL as u64]), Ok(O_WRONLY as u64));
    assert_eq!(p.call(nr::FCNTL, &[r, 1032]), Ok(CAPACITY as u64));
    // No server call on the way: nobody waited.
    assert_eq!(p.f.backend.pipes.pokes, 0);
}

#[test]
fn end_of_file_comes_after_the_data_once_every_writer_is_gone() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    let w2 = p.call(nr::DUP, &[w]).unwrap();
    assert_eq!(p.write(w, b"ab"), Ok(2));
    assert_eq!(p.call(nr::CLOSE, &[w]), Ok(0));
    // The dup still writes.
    assert_eq!(p.write(w2, b"c"), Ok(1));
    assert_eq!(p.call(nr::CLOSE, &[w2]), Ok(0));
    assert_eq!(p.read(r, 10).unwrap(), b"abc");
    assert_eq!(p.read(r, 10).unwrap(), b"");
    let (res, ev) = p.poll1(r as i64, POLLIN, 0);
    assert_eq!((res, ev), (Ok(1), POLLHUP));
}

#[test]
fn writing_without_readers_is_epipe_and_sigpipe() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    assert_eq!(p.call(nr::CLOSE, &[r]), Ok(0));
    assert_eq!(p.write(w, b"x"), Err(EPIPE));
    assert_eq!(p.f.backend.pipes.sigpipes, 1);
    assert_eq!(p.write(w, b""), Ok(0), "an empty write is not a write");
    let (res, ev) = p.poll1(w as i64, POLLOUT, 0);
    assert_eq!((res, ev), (Ok(1), POLLOUT | POLLERR));
}

#[test]
fn non_blocking_ends_say_eagain_when_empty_or_full() {
    let mut p = P::new();
    let (r, w) = p.pipe(O_NONBLOCK);
    assert_eq!(p.read(r, 1), Err(EAGAIN));
    let chunk = vec![b'z'; 60000];
    assert_eq!(p.write(w, &chunk), Ok(60000));
    // 5536 bytes left: an atomic write of 4096 fits, the next does not; a big one is cut.
    assert_eq!(p.write(w, &chunk[..4096]), Ok(4096));
    assert_eq!(p.write(w, &chunk[..4096]), Err(EAGAIN));
    assert_eq!(p.write(w, &chunk[..5000]), Ok(1440));
    assert_eq!(p.write(w, b"1"), Err(EAGAIN));
    let (res, ev) = p.poll1(w as i64, POLLOUT, 0);
    assert_eq!((res, ev), (Ok(0), 0));
    assert_eq!(p.read(r, CAPACITY).unwrap().len(), CAPACITY);
    // F_SETFL takes O_NONBLOCK away: an empty read would now sleep.
    assert_eq!(p.call(nr::FCNTL, &[r, F_SETFL as u64, 0]), Ok(0));
    assert_eq!(p.read(r, 1), Err(EDEADLK));
}

#[test]
fn a_blocking_read_registers_counts_itself_in_and_out() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    assert_eq!(p.read(r, 1), Err(EDEADLK), "it went to sleep");
    assert_eq!(p.f.backend.pipes.watches, 1);
    // The count went back: a write does not poke.
    assert_eq!(p.write(w, b"x"), Ok(1));
    assert_eq!(p.f.backend.pipes.pokes, 0);
}

#[test]
fn a_writer_pokes_when_a_reader_waits() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    let ring = p.f.backend.pipe_ring(2).unwrap();
    let _ = r;
    ring.begin_wait(End::Read);
    assert_eq!(p.write(w, b"x"), Ok(1));
    assert_eq!(p.f.backend.pipes.pokes, 1);
}

#[test]
fn pipe2_checks_flags_and_pointers() {
    let mut p = P::new();
    assert_eq!(p.call(nr::PIPE2, &[FDS, 0o1]), Err(EINVAL));
    assert_eq!(p.call(nr::PIPE, &[BAD]), Err(EFAULT));
    // Nothing was left open: the next pipe gets 3 and 4.
    assert_eq!(p.pipe(O_CLOEXEC), (3, 4));
    assert_eq!(p.call(nr::FCNTL, &[3, F_GETFD as u64]), Ok(FD_CLOEXEC));
    p.f.exec_closes();
    assert_eq!(p.call(nr::CLOSE, &[3]), Err(EBADF));
}

#[test]
fn garbage_from_a_peer_is_eio_not_a_crash() {
    let mut p = P::new();
    let (r, w) = p.pipe(O_NONBLOCK);
    // A peer writes nonsense positions into the shared page.
    let base = p.f.backend.pipes.rings[0].as_mut_ptr() as *mut u32;
    // SAFETY: the first words of the ring are head and tail.
    unsafe {
        *base = 0x9000_0000;
        *base.add(1) = 0x1000;
    }
    assert_eq!(p.read(r, 10), Err(EIO));
    assert_eq!(p.write(w, b"x"), Err(EIO));
    let (res, ev) = p.poll1(r as i64, POLLIN | POLLRDNORM, 0);
    assert_eq!((res, ev), (Ok(1), POLLIN | POLLRDNORM));
}

#[test]
fn poll_reports_linux_readiness_and_honours_timeouts() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    assert_eq!(p.poll1(r as i64, POLLIN, 0), (Ok(0), 0));
    // Only what was asked for (and the errors) comes back.
    assert_eq!(p.poll1(w as i64, POLLOUT | POLLIN, 0), (Ok(1), POLLOUT));
    // A finite timeout waits until the deadline, then reports nothing.
    p.f.backend.pipes.now = 1_000;
    assert_eq!(p.poll1(r as i64, POLLIN, 25), (Ok(0), 0));
    assert_eq!(p.f.backend.pipes.now, 1_000 + 25_000_000);
    // An infinite one sleeps (the mock says it would never wake).
    assert_eq!(p.poll1(r as i64, POLLIN, -1).0, Err(EDEADLK));
    assert_eq!(p.write(w, b"q"), Ok(1));
    assert_eq!(p.poll1(r as i64, POLLIN, -1), (Ok(1), POLLIN));
    // Bad descriptors: POLLNVAL; negative ones are skipped.
    assert_eq!(p.poll1(99, POLLIN, 0), (Ok(1), POLLNVAL));
    assert_eq!(p.poll1(-1, POLLIN, 0), (Ok(0), 0));
    // Files and devices are always ready; the terminal is writable.
    assert_eq!(
        p.poll1(1, POLLOUT | POLLWRNORM, 0),
        (Ok(1), POLLOUT | POLLWRNORM)
    );
    assert_eq!(p.poll1(0, POLLIN, 0), (Ok(0), 0));
    // Waiting on the terminal asks it to wake us.
    assert_eq!(p.poll1(0, POLLIN, 10).0, Ok(0));
    assert_eq!(p.f.backend.pipes.console_watches, 1);
}

#[test]
fn select_marks_ready_descriptors_and_refuses_bad_ones() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    let (rs, ws) = (BUF + 512, BUF + 520);
    let set = |p: &mut P, at: u64, fds: &[u64]| {
        let mut v = 0u64;
        for f in fds {
            v |= 1 << f;
        }
        p.m.write(at, &v.to_le_bytes()).unwrap();
    };
    let get = |p: &mut P, at: u64| {
        let mut b = [0u8; 8];
        p.m.read(at, &mut b).unwrap();
        u64::from_le_bytes(b)
    };
    // Zero timeout (a timeval of 0).
    let tv = BUF + 600;
    p.m.write(tv, &[0u8; 16]).unwrap();
    set(&mut p, rs, &[r]);
    set(&mut p, ws, &[w]);
    assert_eq!(p.call(nr::SELECT, &[8, rs, ws, 0, tv]), Ok(1));
    assert_eq!((get(&mut p, rs), get(&mut p, ws)), (0, 1 << w));
    assert_eq!(p.write(w, b"x"), Ok(1));
    set(&mut p, rs, &[r]);
    set(&mut p, ws, &[w]);
    assert_eq!(p.call(nr::SELECT, &[8, rs, ws, 0, tv]), Ok(2));
    assert_eq!((get(&mut p, rs), get(&mut p, ws)), (1 << r, 1 << w));
    // A descriptor not open is EBADF; one at or above nfds is not looked at.
    set(&mut p, rs, &[9]);
    assert_eq!(p.call(nr::SELECT, &[10, rs, 0, 0, tv]), Err(EBADF));
    set(&mut p, rs, &[9]);
    assert_eq!(p.call(nr::SELECT, &[9, rs, 0, 0, tv]), Ok(0));
    assert_eq!(
        p.call(nr::SELECT, &[-1i64 as u64, rs, 0, 0, tv]),
        Err(EINVAL)
    );
    // pselect6 with a timespec, and a bad one.
    set(&mut p, rs, &[r]);
    assert_eq!(p.call(nr::PSELECT6, &[8, rs, 0, 0, tv, 0]), Ok(1));
    p.m.write(tv, &(-1i64).to_le_bytes()).unwrap();
    assert_eq!(p.call(nr::PSELECT6, &[8, rs, 0, 0, tv, 0]), Err(EINVAL));
}

#[test]
fn ppoll_and_pselect6_wait_under_their_mask() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    let (mask, ts, arg, rs) = (BUF + 0x400, BUF + 0x410, BUF + 0x420, BUF + 0x440);
    p.m.write(mask, &0x200u64.to_le_bytes()).unwrap();
    let pollfd = |p: &mut P| {
        let mut e = (r as i32).to_le_bytes().to_vec();
        e.extend_from_slice(&POLLIN.to_le_bytes());
        e.extend_from_slice(&[0, 0]);
        p.m.write(FDS, &e).unwrap();
    };
    // Ready at once: the mask was set and put back (not interrupted).
    assert_eq!(p.write(w, b"x"), Ok(1));
    pollfd(&mut p);
    assert_eq!(p.call(nr::PPOLL, &[FDS, 1, 0, mask, 8]), Ok(1));
    assert_eq!(p.f.backend.pipes.wait_masks, [0x200]);
    assert_eq!(p.f.backend.pipes.mask_ends, [false]);
    // No mask: none set.
    assert_eq!(p.call(nr::PPOLL, &[FDS, 1, 0, 0, 0]), Ok(1));
    assert_eq!(p.f.backend.pipes.wait_masks.len(), 1);
    // A bad size of the set is EINVAL before any wait; a bad pointer EFAULT.
    assert_eq!(p.call(nr::PPOLL, &[FDS, 1, 0, mask, 4]), Err(EINVAL));
    assert_eq!(p.call(nr::PPOLL, &[FDS, 1, 0, BAD, 8]), Err(EFAULT));
    assert_eq!(p.f.backend.pipes.wait_masks.len(), 1);
    // A signal ends the wait: interrupted (the old mask comes back at delivery), never
    // restarted after a handler (ERESTARTNOHAND), also with a zero timeout.
    assert_eq!(p.call(nr::READ, &[r, BUF + 0x100, 1]), Ok(1));
    p.f.backend.pipes.signal_in_wait = true;
    assert_eq!(
        p.call(nr::PPOLL, &[FDS, 1, 0, mask, 8]),
        Err(ERESTARTNOHAND)
    );
    p.m.write(ts, &[0u8; 16]).unwrap();
    assert_eq!(
        p.call(nr::PPOLL, &[FDS, 1, ts, mask, 8]),
        Err(ERESTARTNOHAND)
    );
    assert_eq!(p.call(nr::POLL, &[FDS, 1, 0]), Err(ERESTARTNOHAND));
    assert_eq!(p.f.backend.pipes.mask_ends, [false, true, true]);
    // pselect6: {set, size} at arg; a null set with any size is no mask.
    p.m.write(rs, &(1u64 << r).to_le_bytes()).unwrap();
    let pair = |p: &mut P, set: u64, size: u64| {
        let mut b = set.to_le_bytes().to_vec();
        b.extend_from_slice(&size.to_le_bytes());
        p.m.write(arg, &b).unwrap();
    };
    pair(&mut p, mask, 8);
    assert_eq!(
        p.call(nr::PSELECT6, &[8, rs, 0, 0, 0, arg]),
        Err(ERESTARTNOHAND)
    );
    assert_eq!(p.f.backend.pipes.mask_ends, [false, true, true, true]);
    pair(&mut p, mask, 4);
    assert_eq!(p.call(nr::PSELECT6, &[8, rs, 0, 0, 0, arg]), Err(EINVAL));
    p.f.backend.pipes.signal_in_wait = false;
    pair(&mut p, 0, 4);
    p.m.write(ts, &[0u8; 16]).unwrap();
    assert_eq!(p.call(nr::PSELECT6, &[8, rs, 0, 0, ts, arg]), Ok(0));
    assert_eq!(p.f.backend.pipes.wait_masks.len(), 4);
}

#[test]
fn readv_returns_what_is_there_and_writev_is_one_write() {
    let mut p = P::new();
    let (r, w) = p.pipe(0);
    // writev of "ab" + "cde": one write of 5.
    let iov = BUF + 0x100;
    p.m.write(BUF, b"ab").unwrap();
    p.m.write(BUF + 0x10, b"cde").unwrap();
    let mut v = Vec::new();
    for (a, l) in [(BUF, 2u64), (BUF + 0x10, 3)] {
        v.extend_from_slice(&a.to_le_bytes());
        v.extend_from_slice(&l.to_le_bytes());
    }
    p.m.write(iov, &v).unwrap();
    assert_eq!(p.call(nr::WRITEV, &[w, iov, 2]), Ok(5));
    // readv into 5 + 100 bytes: the 5 that are there, without waiting for the second vector.
    let mut v = Vec::new();
    for (a, l) in [(BUF + 0x200, 5u64), (BUF + 0x300, 100)] {
        v.extend_from_slice(&a.to_le_bytes());
        v.extend_from_slice(&l.to_le_bytes());
    }
    p.m.write(iov, &v).unwrap();
    assert_eq!(p.call(nr::READV, &[r, iov, 2]), Ok(5));
    let mut got = [0u8; 5];
    p.m.read(BUF + 0x200, &mut got).unwrap();
    assert_eq!(&got, b"abcde");
    // Split across the vectors: 3 + 2.
    assert_eq!(p.write(w, b"vwxyz"), Ok(5));
    let mut v = Vec::new();
    for (a, l) in [(BUF + 0x200, 3u64), (BUF + 0x300, 100)] {
        v.extend_from_slice(&a.to_le_bytes());
        v.extend_from_slice(&l.to_le_bytes());
    }
    p.m.write(iov, &v).unwrap();
    assert_eq!(p.call(nr::READV, &[r, iov, 2]), Ok(5));
    let mut a = [0u8; 3];
    let mut b = [0u8; 2];
    p.m.read(BUF + 0x200, &mut a).unwrap();
    p.m.read(BUF + 0x300, &mut b).unwrap();
    assert_eq!((&a, &b), (b"vwx", b"yz"));
}

/// Not a check: a loop to count instructions of the file layer's pipe path on the host
/// (`perf stat cargo test --release -p sawmill-linux -- --ignored pipe_path_loop`).
#[test]
#[ignore]
fn pipe_path_loop() {
    let mut p = P::new();
    let (r, w) = p.pipe(O_NONBLOCK);
    let n: u64 = std::env::var("LOOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    p.m.write(BUF, b"x").unwrap();
    for _ in 0..n {
        assert_eq!(p.call(nr::WRITE, &[w, BUF, 1]), Ok(1));
        assert_eq!(p.call(nr::READ, &[r, BUF, 1]), Ok(1));
    }
}
