//! Host tests of sockets in the file layer over a fake stack: addresses as Linux lays them out,
//! a `write` larger than one stack call moved in calls of at most `MAX_DATA` bytes, or of the
//! channel's size where the host has one (all of it, or a short count when non-blocking and
//! the stack is full), datagrams in one call through a channel, `EPIPE` with `SIGPIPE` after
//! `shutdown(SHUT_WR)` (none with `MSG_NOSIGNAL`), the errors without a stack, `fstat` and
//! `SO_TYPE`. The loopback behaviour against Linux itself is tests/linux/socket.c.

use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::mock::Mock;
use super::socket::*;
use super::Files;
use crate::errno::*;
use crate::{nr, Errno, SysResult, User};

/// The stack's side: one kind of socket that takes what it has room for.
#[derive(Default)]
pub struct FakeNet {
    /// Whether there is a stack at all.
    pub up: bool,
    next: u64,
    /// Bytes the stack still takes before it answers `EAGAIN`.
    pub room: usize,
    /// The length of every send call, and everything sent.
    pub sends: Vec<usize>,
    pub sent: Vec<u8>,
    pub closed: Vec<u64>,
    /// UDP: the parts of the datagram being sent, the datagrams sent, those to receive.
    pub parts: Vec<u8>,
    pub datagrams: Vec<Vec<u8>>,
    pub inbox: Vec<Vec<u8>>,
    /// Calls that moved datagram bytes (each at most `MAX_DATA`).
    pub datagram_calls: usize,
    /// What one call moves for a transfer larger than a message (the guest's channel); 0: none.
    pub bulk: usize,
    /// The peer reset every connection: receives answer `ECONNRESET`, readiness is an error.
    pub reset: bool,
    /// Loopback fusion: connects to 127/8 are fused (pipes of the mock); the ends offered to
    /// the side that accepts.
    pub fuse: bool,
    offered: Option<(u64, u64)>,
}

impl FakeNet {
    /// The most one call may move.
    fn limit(&self) -> usize {
        MAX_DATA.max(self.bulk)
    }
}

impl SocketHost for Mock {
    fn sock_bind(&mut self, _h: u64, _addr: u32, _port: u16) -> Result<(), Errno> {
        Ok(())
    }
    fn sock_listen(&mut self, _h: u64, _backlog: u32) -> Result<(), Errno> {
        Ok(())
    }
    fn sock_accept(&mut self, _h: u64) -> Result<(u64, u32, u16), Errno> {
        self.net.next += 1;
        Ok((self.net.next, 0x7f00_0001, 40000))
    }
    fn sock_connect_fused(
        &mut self,
        _h: u64,
        _addr: u32,
        _port: u16,
    ) -> Result<Option<(u64, u64)>, Errno> {
        if !self.net.fuse {
            return Ok(None);
        }
        use super::pipe::PipeHost;
        let (ar, aw) = self.pipe_create()?;
        let (br, bw) = self.pipe_create()?;
        self.net.offered = Some((ar, bw));
        Ok(Some((br, aw)))
    }
    fn sock_fused_ends(&mut self, _h: u64) -> Option<(u64, u64)> {
        self.net.offered.take()
    }
    fn sock_max_data(&mut self, _h: u64, want: usize) -> usize {
        if want > MAX_DATA && self.net.bulk > 0 {
            self.net.bulk
        } else {
            MAX_DATA
        }
    }
    fn sock_create(&mut self, _udp: bool) -> Result<u64, Errno> {
        if !self.net.up {
            return Err(EAFNOSUPPORT);
        }
        self.net.next += 1;
        Ok(self.net.next)
    }
    fn sock_close(&mut self, h: u64) {
        self.net.closed.push(h);
    }
    fn sock_connect(&mut self, _h: u64, _addr: u32, _port: u16) -> Result<(), Errno> {
        Ok(())
    }
    fn sock_send(&mut self, _h: u64, data: &[u8]) -> Result<usize, Errno> {
        assert!(
            data.len() <= self.net.limit(),
            "a send of more than the stack takes per call"
        );
        let n = data.len().min(self.net.room);
        if n == 0 {
            return Err(EAGAIN);
        }
        self.net.room -= n;
        self.net.sends.push(n);
        self.net.sent.extend_from_slice(&data[..n]);
        Ok(n)
    }
    fn sock_recv(&mut self, _h: u64, _buf: &mut [u8]) -> Result<usize, Errno> {
        Err(if self.net.reset { ECONNRESET } else { EAGAIN })
    }
    fn sock_ready(&mut self, _h: u64) -> u32 {
        if self.net.reset {
            READY_READABLE | READY_HANGUP | READY_ERROR
        } else {
            READY_WRITABLE
        }
    }
    fn sock_shutdown(&mut self, _h: u64) -> Result<(), Errno> {
        Ok(())
    }
    fn sock_send_more(&mut self, _h: u64, first: bool, d: &[u8]) -> Result<(), Errno> {
        assert!(d.len() <= MAX_DATA);
        if first {
            self.net.parts.clear();
        }
        self.net.parts.extend_from_slice(d);
        self.net.datagram_calls += 1;
        Ok(())
    }
    fn sock_send_to(&mut self, _h: u64, _addr: u32, _port: u16, d: &[u8]) -> Result<usize, Errno> {
        assert!(d.len() <= self.net.limit());
        let mut whole = core::mem::take(&mut self.net.parts);
        whole.extend_from_slice(d);
        self.net.datagram_calls += 1;
        let n = whole.len();
        self.net.datagrams.push(whole);
        Ok(n)
    }
    fn sock_peek_from(
        &mut self,
        _h: u64,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(usize, usize, u32, u16), Errno> {
        let d = self.net.inbox.first().ok_or(EAGAIN)?;
        let n = d.len().saturating_sub(offset).min(buf.len()).min(MAX_DATA);
        buf[..n].copy_from_slice(&d[offset..offset + n]);
        self.net.datagram_calls += 1;
        Ok((n, d.len(), 0x7f00_0001, 9))
    }
    fn sock_recv_from(&mut self, _h: u64, buf: &mut [u8]) -> Result<(usize, u32, u16), Errno> {
        if self.net.inbox.is_empty() {
            return Err(EAGAIN);
        }
        let d = self.net.inbox.remove(0);
        let n = d.len().min(buf.len()).min(self.net.limit());
        buf[..n].copy_from_slice(&d[..n]);
        self.net.datagram_calls += 1;
        Ok((n, 0x7f00_0001, 9))
    }
}

struct Mem(RefCell<Vec<u8>>);
const BASE: u64 = 0x10_0000;
const BUF: u64 = BASE + 0x1000;
const ADDR: u64 = BASE;

impl User for Mem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let o = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        buf.copy_from_slice(self.0.borrow().get(o..o + buf.len()).ok_or(EFAULT)?);
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        let o = addr.checked_sub(BASE).ok_or(EFAULT)? as usize;
        self.0
            .borrow_mut()
            .get_mut(o..o + data.len())
            .ok_or(EFAULT)?
            .copy_from_slice(data);
        Ok(())
    }
    fn cstr(&self, _addr: u64, _max: usize) -> Result<Vec<u8>, Errno> {
        Err(EFAULT)
    }
}

struct P {
    f: Files<Mock>,
    m: Mem,
}

impl P {
    fn new(up: bool) -> P {
        let mut f = Files::new(Mock::new(), b"/bin/prog");
        f.backend.net.up = up;
        P {
            f,
            m: Mem(RefCell::new(vec![0; 1 << 20])),
        }
    }
    fn call(&mut self, n: u64, a: &[u64]) -> SysResult {
        let mut args = [0u64; 6];
        args[..a.len()].copy_from_slice(a);
        self.f.dispatch(n, args, &self.m).expect("a file call")
    }
    /// A connected TCP socket.
    fn connected(&mut self, flags: u32) -> u64 {
        let fd = self
            .call(
                nr::SOCKET,
                &[AF_INET as u64, (SOCK_STREAM | flags) as u64, 0],
            )
            .unwrap();
        self.m.write(ADDR, &sockaddr_in(0x7f00_0001, 80)).unwrap();
        assert_eq!(self.call(nr::CONNECT, &[fd, ADDR, 16]), Ok(0));
        fd
    }
}

#[test]
fn sockaddr_in_is_linux_layout() {
    let b = sockaddr_in(0x7f00_0001, 8080);
    assert_eq!(&b[..8], &[2, 0, 0x1f, 0x90, 127, 0, 0, 1]);
    assert_eq!(&b[8..], &[0; 8]);
    assert_eq!(parse_sockaddr(&b), Ok((0x7f00_0001, 8080)));
    assert_eq!(parse_sockaddr(&b[..8]), Err(EINVAL));
    assert_eq!(parse_sockaddr(&[1, 0, 0, 0]), Err(EAFNOSUPPORT));
    assert_eq!(parse_sockaddr(&[]), Err(EINVAL));
}

#[test]
fn a_large_write_goes_in_stack_sized_calls() {
    let mut p = P::new(true);
    let fd = p.connected(0);
    p.f.backend.net.room = usize::MAX;
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    p.m.write(BUF, &data).unwrap();
    assert_eq!(p.call(nr::WRITE, &[fd, BUF, data.len() as u64]), Ok(65536));
    assert!(p.f.backend.net.sends.iter().all(|&n| n <= MAX_DATA));
    assert_eq!(p.f.backend.net.sent, data);
}

#[test]
fn a_nonblocking_write_returns_what_fit() {
    let mut p = P::new(true);
    let fd = p.connected(SOCK_NONBLOCK);
    p.f.backend.net.room = 1000;
    assert_eq!(p.call(nr::WRITE, &[fd, BUF, 4096]), Ok(1000));
    assert_eq!(p.call(nr::WRITE, &[fd, BUF, 4096]), Err(EAGAIN));
    // MSG_DONTWAIT on a blocking socket does the same.
    let fd2 = p.connected(0);
    assert_eq!(
        p.call(nr::SENDTO, &[fd2, BUF, 10, MSG_DONTWAIT as u64, 0, 0]),
        Err(EAGAIN)
    );
}

#[test]
fn a_write_after_shutdown_is_epipe_with_sigpipe() {
    let mut p = P::new(true);
    let fd = p.connected(0);
    p.f.backend.net.room = usize::MAX;
    assert_eq!(p.call(nr::SHUTDOWN, &[fd, SHUT_WR as u64]), Ok(0));
    assert_eq!(p.call(nr::WRITE, &[fd, BUF, 1]), Err(EPIPE));
    assert_eq!(p.f.backend.pipes.sigpipes, 1);
    assert_eq!(
        p.call(nr::SENDTO, &[fd, BUF, 1, MSG_NOSIGNAL as u64, 0, 0]),
        Err(EPIPE)
    );
    assert_eq!(p.f.backend.pipes.sigpipes, 1);
    assert_eq!(p.call(nr::SHUTDOWN, &[fd, 7]), Err(EINVAL));
}

#[test]
fn without_a_stack_and_on_non_sockets() {
    let mut p = P::new(false);
    assert_eq!(
        p.call(nr::SOCKET, &[AF_INET as u64, SOCK_STREAM as u64, 0]),
        Err(EAFNOSUPPORT)
    );
    assert_eq!(
        p.call(nr::SOCKET, &[AF_INET as u64, 9, 0]),
        Err(ESOCKTNOSUPPORT)
    );
    assert_eq!(p.call(nr::LISTEN, &[1, 5]), Err(ENOTSOCK));
    assert_eq!(p.call(nr::LISTEN, &[77, 5]), Err(EBADF));
    assert_eq!(
        p.call(nr::SOCKETPAIR, &[AF_INET6 as u64, 1, 0, ADDR]),
        Err(EAFNOSUPPORT)
    );
}

#[test]
fn fstat_type_and_close() {
    let mut p = P::new(true);
    let fd = p
        .call(nr::SOCKET, &[AF_INET as u64, SOCK_DGRAM as u64, 0])
        .unwrap();
    assert_eq!(p.call(nr::FSTAT, &[fd, BUF]), Ok(0));
    let mut mode = [0u8; 4];
    p.m.read(BUF + 24, &mut mode).unwrap();
    assert_eq!(u32::from_le_bytes(mode) & 0o170000, S_IFSOCK);
    p.m.write(ADDR, &4u32.to_le_bytes()).unwrap();
    assert_eq!(
        p.call(
            nr::GETSOCKOPT,
            &[fd, SOL_SOCKET as u64, SO_TYPE as u64, BUF, ADDR]
        ),
        Ok(0)
    );
    let mut v = [0u8; 4];
    p.m.read(BUF, &mut v).unwrap();
    assert_eq!(u32::from_le_bytes(v), SOCK_DGRAM);
    assert_eq!(p.call(nr::LSEEK, &[fd, 0, 0]), Err(ESPIPE));
    assert_eq!(p.call(nr::CLOSE, &[fd]), Ok(0));
    assert_eq!(p.f.backend.net.closed, vec![1]);
}

#[test]
fn a_datagram_larger_than_one_call_goes_whole_both_ways() {
    let mut p = P::new(true);
    let fd = p
        .call(nr::SOCKET, &[AF_INET as u64, SOCK_DGRAM as u64, 0])
        .unwrap();
    let data: Vec<u8> = (0..MAX_DATAGRAM as u32).map(|i| (i * 13) as u8).collect();
    p.m.write(BUF, &data).unwrap();
    p.m.write(ADDR, &sockaddr_in(0x7f00_0001, 9)).unwrap();
    let n = data.len() as u64;
    assert_eq!(p.call(nr::SENDTO, &[fd, BUF, n, 0, ADDR, 16]), Ok(n));
    assert_eq!(p.f.backend.net.datagrams.len(), 1);
    assert_eq!(p.f.backend.net.datagrams[0], data);
    assert_eq!(p.f.backend.net.datagram_calls, 4);
    // One more byte than a datagram may hold: refused whole.
    assert_eq!(
        p.call(nr::SENDTO, &[fd, BUF, n + 1, 0, ADDR, 16]),
        Err(EMSGSIZE)
    );
    // Received into a large buffer: whole, the queue's head taken once.
    p.f.backend.net.inbox = vec![data[..1000].to_vec(), b"next".to_vec()];
    let at = BUF + 0x4000;
    assert_eq!(p.call(nr::RECVFROM, &[fd, at, 2048, 0, 0, 0]), Ok(1000));
    let mut got = vec![0u8; 1000];
    p.m.read(at, &mut got).unwrap();
    assert_eq!(got, &data[..1000]);
    assert_eq!(p.call(nr::RECVFROM, &[fd, at, 2048, 0, 0, 0]), Ok(4));
    // Into a buffer smaller than the datagram: cut, as Linux cuts it.
    p.f.backend.net.inbox = vec![data.clone()];
    assert_eq!(p.call(nr::RECVFROM, &[fd, at, 600, 0, 0, 0]), Ok(600));
    assert!(p.f.backend.net.inbox.is_empty());
}

#[test]
fn through_a_channel_one_call_moves_up_to_its_size() {
    let mut p = P::new(true);
    p.f.backend.net.bulk = 32768;
    let fd = p.connected(0);
    p.f.backend.net.room = usize::MAX;
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    p.m.write(BUF, &data).unwrap();
    assert_eq!(p.call(nr::WRITE, &[fd, BUF, data.len() as u64]), Ok(65536));
    assert_eq!(p.f.backend.net.sends, vec![32768, 32768]);
    assert_eq!(p.f.backend.net.sent, data);
    // A datagram of 1,472 bytes is one call each way.
    let fd = p
        .call(nr::SOCKET, &[AF_INET as u64, SOCK_DGRAM as u64, 0])
        .unwrap();
    let d = &data[..MAX_DATAGRAM];
    p.m.write(ADDR, &sockaddr_in(0x7f00_0001, 9)).unwrap();
    let n = d.len() as u64;
    assert_eq!(p.call(nr::SENDTO, &[fd, BUF, n, 0, ADDR, 16]), Ok(n));
    assert_eq!(p.f.backend.net.datagrams, vec![d.to_vec()]);
    assert_eq!(p.f.backend.net.datagram_calls, 1);
    p.f.backend.net.inbox = vec![d.to_vec()];
    let at = BUF + 0x4000;
    assert_eq!(p.call(nr::RECVFROM, &[fd, at, 4096, 0, 0, 0]), Ok(n));
    let mut got = vec![0u8; d.len()];
    p.m.read(at, &mut got).unwrap();
    assert_eq!(got, d);
    assert_eq!(p.f.backend.net.datagram_calls, 2);
    // Cut to a buffer smaller than the datagram, as Linux cuts it.
    p.f.backend.net.inbox = vec![d.to_vec()];
    assert_eq!(p.call(nr::RECVFROM, &[fd, at, 1000, 0, 0, 0]), Ok(1000));
    assert!(p.f.backend.net.inbox.is_empty());
}

#[test]
fn a_reset_reads_once_as_an_error_then_as_the_end() {
    let mut p = P::new(true);
    let fd = p.connected(0);
    p.f.backend.net.reset = true;
    // poll: readable, hung up, an error (the reset is pending).
    let pollfd = |p: &mut P| {
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&(fd as i32).to_le_bytes());
        e[4..6].copy_from_slice(&1u16.to_le_bytes());
        p.m.write(ADDR, &e).unwrap();
        assert_eq!(p.call(nr::POLL, &[ADDR, 1, 0]), Ok(1));
        let mut r = [0u8; 2];
        p.m.read(ADDR + 6, &mut r).unwrap();
        u16::from_le_bytes(r)
    };
    assert_ne!(pollfd(&mut p) & super::poll::POLLERR, 0);
    assert_eq!(p.call(nr::READ, &[fd, BUF, 16]), Err(ECONNRESET));
    // Taken: the end of the stream from now on, and no more POLLERR.
    assert_eq!(p.call(nr::READ, &[fd, BUF, 16]), Ok(0));
    assert_eq!(p.call(nr::RECVFROM, &[fd, BUF, 16, 0, 0, 0]), Ok(0));
    let ev = pollfd(&mut p);
    assert_eq!(ev & super::poll::POLLERR, 0);
    assert_ne!(ev & super::poll::POLLIN, 0);
}

/// A connected pair through the mock's loopback fusion: the connecting and the accepted socket.
fn fused_pair(p: &mut P) -> (u64, u64) {
    p.f.backend.net.fuse = true;
    let c = p.connected(0);
    let l = p
        .call(nr::SOCKET, &[AF_INET as u64, SOCK_STREAM as u64, 0])
        .unwrap();
    p.m.write(ADDR, &sockaddr_in(0x7f00_0001, 80)).unwrap();
    assert_eq!(p.call(nr::BIND, &[l, ADDR, 16]), Ok(0));
    assert_eq!(p.call(nr::LISTEN, &[l, 4]), Ok(0));
    let a = p.call(nr::ACCEPT4, &[l, 0, 0, 0]).unwrap();
    (c, a)
}

#[test]
fn a_fused_connection_moves_its_data_through_pipes_not_the_stack() {
    let mut p = P::new(true);
    let (c, a) = fused_pair(&mut p);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    p.m.write(BUF, &data[..60_000]).unwrap();
    assert_eq!(p.call(nr::WRITE, &[c, BUF, 60_000]), Ok(60_000));
    let out = BUF + 0x20000;
    let mut got = 0u64;
    while got < 60_000 {
        got += p.call(nr::READ, &[a, out + got, 60_000 - got]).unwrap();
    }
    let mut back = vec![0u8; 60_000];
    p.m.read(out, &mut back).unwrap();
    assert_eq!(&back[..], &data[..60_000]);
    // Not a byte went through the stack.
    assert!(p.f.backend.net.sent.is_empty());
    // Nothing more: a non-blocking read says so.
    assert_eq!(
        p.call(nr::RECVFROM, &[a, out, 10, MSG_DONTWAIT as u64, 0, 0]),
        Err(EAGAIN)
    );
    // Half-close: the other side reads the end, and can still answer.
    assert_eq!(p.call(nr::SHUTDOWN, &[c, SHUT_WR as u64]), Ok(0));
    assert_eq!(p.call(nr::READ, &[a, out, 10]), Ok(0));
    assert_eq!(p.call(nr::WRITE, &[a, BUF, 5]), Ok(5));
    assert_eq!(p.call(nr::READ, &[c, out, 10]), Ok(5));
}

#[test]
fn a_fused_peer_closing_with_data_unread_resets_once() {
    let mut p = P::new(true);
    let (c, a) = fused_pair(&mut p);
    assert_eq!(p.call(nr::WRITE, &[c, BUF, 6]), Ok(6));
    assert_eq!(p.call(nr::CLOSE, &[a]), Ok(0));
    assert_eq!(p.call(nr::READ, &[c, BUF, 16]), Err(ECONNRESET));
    assert_eq!(
        p.call(nr::SENDTO, &[c, BUF, 1, MSG_NOSIGNAL as u64, 0, 0]),
        Err(EPIPE)
    );
    assert_eq!(p.call(nr::READ, &[c, BUF, 16]), Ok(0));
}

#[test]
fn a_fused_peer_closing_cleanly_lets_one_write_through_then_epipe() {
    let mut p = P::new(true);
    let (c, a) = fused_pair(&mut p);
    assert_eq!(p.call(nr::WRITE, &[a, BUF, 3]), Ok(3));
    assert_eq!(p.call(nr::CLOSE, &[a]), Ok(0));
    assert_eq!(p.call(nr::READ, &[c, BUF, 16]), Ok(3));
    assert_eq!(p.call(nr::READ, &[c, BUF, 16]), Ok(0));
    let before = p.f.backend.pipes.sigpipes;
    assert_eq!(p.call(nr::WRITE, &[c, BUF, 1]), Ok(1));
    assert_eq!(p.call(nr::WRITE, &[c, BUF, 1]), Err(EPIPE));
    assert_eq!(p.f.backend.pipes.sigpipes, before + 1);
}
