//! Host tests of local sockets in the file layer over the mock's in-memory pipes
//! (`pipe_tests.rs`): a stream `socketpair` both ways, `MSG_PEEK`, end of file after
//! `shutdown`, `EPIPE` without `SIGPIPE` under `MSG_NOSIGNAL` after the peer closed, datagram
//! pairs keeping message boundaries, poll, addresses as Linux lays them out. The behaviour
//! against Linux itself is tests/linux/unix.c.

use alloc::vec::Vec;

use super::pipe_tests::{BUF, FDS, P};
use super::poll::*;
use super::socket::*;
use super::unix::*;
use crate::errno::*;
use crate::{nr, User};

impl UnixHost for super::mock::Mock {}

fn pair(p: &mut P, ty: u32) -> (u64, u64) {
    assert_eq!(
        p.call(nr::SOCKETPAIR, &[AF_UNIX as u64, ty as u64, 0, FDS]),
        Ok(0)
    );
    let mut b = [0u8; 8];
    p.m.read(FDS, &mut b).unwrap();
    (
        u32::from_le_bytes(b[..4].try_into().unwrap()) as u64,
        u32::from_le_bytes(b[4..].try_into().unwrap()) as u64,
    )
}

fn recv(p: &mut P, fd: u64, n: usize, flags: u32) -> Result<Vec<u8>, crate::Errno> {
    let got = p.call(nr::RECVFROM, &[fd, BUF, n as u64, flags as u64, 0, 0])? as usize;
    let mut b = alloc::vec![0u8; got];
    p.m.read(BUF, &mut b).unwrap();
    Ok(b)
}

#[test]
fn stream_pair_both_ways_then_eof_and_epipe() {
    let mut p = P::new();
    let (a, b) = pair(&mut p, SOCK_STREAM);
    assert_eq!(p.poll1(b as i64, POLLIN | POLLOUT, 0).1, POLLOUT);
    assert_eq!(p.write(a, b"hello"), Ok(5));
    assert_eq!(p.poll1(b as i64, POLLIN | POLLOUT, 0).1, POLLIN | POLLOUT);
    assert_eq!(recv(&mut p, b, 64, MSG_PEEK).as_deref(), Ok(&b"hello"[..]));
    assert_eq!(p.read(b, 64).as_deref(), Ok(&b"hello"[..]));
    assert_eq!(p.write(b, b"ok"), Ok(2));
    assert_eq!(p.read(a, 64).as_deref(), Ok(&b"ok"[..]));
    assert_eq!(recv(&mut p, a, 64, MSG_DONTWAIT), Err(EAGAIN));
    // Shut our sending side: the peer reads end of file.
    assert_eq!(p.call(nr::SHUTDOWN, &[a, SHUT_WR as u64]), Ok(0));
    assert_eq!(p.read(b, 64).as_deref(), Ok(&b""[..]));
    // The peer closes: sending finds no reader.
    assert_eq!(p.call(nr::CLOSE, &[b]), Ok(0));
    let sigpipes = p.f.backend.pipes.sigpipes;
    assert_eq!(
        p.call(nr::SENDTO, &[a, BUF, 1, MSG_NOSIGNAL as u64, 0, 0]),
        Err(EPIPE)
    );
    assert_eq!(p.f.backend.pipes.sigpipes, sigpipes);
    assert_eq!(p.call(nr::WRITE, &[a, BUF, 1]), Err(EPIPE));
    assert_eq!(p.f.backend.pipes.sigpipes, sigpipes + 1);
}

#[test]
fn datagram_pair_keeps_boundaries() {
    let mut p = P::new();
    let (a, b) = pair(&mut p, SOCK_DGRAM);
    assert_eq!(p.write(a, b"one"), Ok(3));
    assert_eq!(p.write(a, b"two"), Ok(3));
    assert_eq!(p.write(a, b""), Ok(0));
    // Cut to the buffer: the rest of that message is gone.
    assert_eq!(p.read(b, 2).as_deref(), Ok(&b"on"[..]));
    assert_eq!(recv(&mut p, b, 64, MSG_PEEK).as_deref(), Ok(&b"two"[..]));
    assert_eq!(p.read(b, 64).as_deref(), Ok(&b"two"[..]));
    assert_eq!(p.read(b, 64).as_deref(), Ok(&b""[..]));
    assert_eq!(recv(&mut p, b, 64, MSG_DONTWAIT), Err(EAGAIN));
}

#[test]
fn errors() {
    let mut p = P::new();
    assert_eq!(
        p.call(
            nr::SOCKETPAIR,
            &[AF_INET as u64, SOCK_STREAM as u64, 0, FDS]
        ),
        Err(EOPNOTSUPP)
    );
    assert_eq!(
        p.call(
            nr::SOCKETPAIR,
            &[AF_UNIX as u64, SOCK_STREAM as u64, 6, FDS]
        ),
        Err(EPROTONOSUPPORT)
    );
    let s = p
        .call(nr::SOCKET, &[AF_UNIX as u64, SOCK_STREAM as u64, 0])
        .unwrap();
    assert_eq!(p.call(nr::WRITE, &[s, BUF, 1]), Err(ENOTCONN));
    assert_eq!(p.call(nr::LISTEN, &[s, 5]), Err(EINVAL));
}

#[test]
fn addresses() {
    assert_eq!(
        parse_sockaddr_un(&[1, 0, b'/', b'a', 0, b'x']),
        Ok(b"/a".to_vec())
    );
    assert_eq!(parse_sockaddr_un(&[1, 0, 0, b'a']), Ok(b"\0a".to_vec()));
    assert_eq!(parse_sockaddr_un(&[2, 0, b'/']), Err(EINVAL));
    assert_eq!(parse_sockaddr_un(&[1, 0]), Err(EINVAL));
    assert_eq!(sockaddr_un(b"/a").1, 5);
    assert_eq!(sockaddr_un(b"\0a").1, 4);
    assert_eq!(sockaddr_un(b"").1, 2);
}

#[test]
fn socketpair_peers_have_our_credentials_and_a_lone_socket_none() {
    let mut p = P::new();
    let (a, _b) = pair(&mut p, SOCK_STREAM);
    let cred = |p: &mut P, fd: u64, room: u32| {
        p.m.write(BUF + 64, &room.to_le_bytes()).unwrap();
        let r = p.call(
            nr::GETSOCKOPT,
            &[fd, SOL_SOCKET as u64, SO_PEERCRED as u64, BUF, BUF + 64],
        );
        let mut v = [0u8; 16];
        p.m.read(BUF, &mut v).unwrap();
        let mut l = [0u8; 4];
        p.m.read(BUF + 64, &mut l).unwrap();
        (r, v, u32::from_le_bytes(l))
    };
    // The mock's own credentials are NO_CRED (the trait's default).
    let (r, v, l) = cred(&mut p, a, 16);
    assert_eq!((r, l), (Ok(0), 12));
    assert_eq!(&v[..4], &0u32.to_le_bytes());
    assert_eq!(&v[4..12], &[0xff; 8]);
    // Cut to the room given.
    assert_eq!(cred(&mut p, a, 4).2, 4);
    let s = p
        .call(nr::SOCKET, &[AF_UNIX as u64, SOCK_STREAM as u64, 0])
        .unwrap();
    let (r, v, _) = cred(&mut p, s, 12);
    assert_eq!(r, Ok(0));
    assert_eq!(&v[4..12], &[0xff; 8]);
}

#[test]
fn descriptors_in_control_data_are_refused_not_dropped() {
    let mut p = P::new();
    let (a, b) = pair(&mut p, SOCK_STREAM);
    // A msghdr at BUF + 0x100: one iovec of 2 bytes, control data at BUF + 0x200.
    let (msg, iov, ctl) = (BUF + 0x100, BUF + 0x180, BUF + 0x200);
    p.m.write(BUF, b"hi").unwrap();
    let mut h = [0u8; 56];
    h[16..24].copy_from_slice(&iov.to_le_bytes());
    h[24..32].copy_from_slice(&1u64.to_le_bytes());
    h[32..40].copy_from_slice(&ctl.to_le_bytes());
    h[40..48].copy_from_slice(&24u64.to_le_bytes());
    p.m.write(msg, &h).unwrap();
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&BUF.to_le_bytes());
    v[8..].copy_from_slice(&2u64.to_le_bytes());
    p.m.write(iov, &v).unwrap();
    // SCM_RIGHTS with one descriptor (0).
    let mut c = [0u8; 24];
    c[..8].copy_from_slice(&20u64.to_le_bytes());
    c[8..12].copy_from_slice(&SOL_SOCKET.to_le_bytes());
    c[12..16].copy_from_slice(&1u32.to_le_bytes());
    p.m.write(ctl, &c).unwrap();
    assert_eq!(p.call(nr::SENDMSG, &[a, msg, 0]), Err(EOPNOTSUPP));
    assert_eq!(recv(&mut p, b, 64, MSG_DONTWAIT), Err(EAGAIN));
    // A control message that lies about its length is EINVAL.
    c[..8].copy_from_slice(&200u64.to_le_bytes());
    p.m.write(ctl, &c).unwrap();
    assert_eq!(p.call(nr::SENDMSG, &[a, msg, 0]), Err(EINVAL));
    // Another control message (SCM_CREDENTIALS, type 2) does not stop the data.
    c[..8].copy_from_slice(&24u64.to_le_bytes());
    c[12..16].copy_from_slice(&2u32.to_le_bytes());
    p.m.write(ctl, &c).unwrap();
    assert_eq!(p.call(nr::SENDMSG, &[a, msg, 0]), Ok(2));
    assert_eq!(p.read(b, 64).as_deref(), Ok(&b"hi"[..]));
}
