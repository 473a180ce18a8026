//! The network stack server: smoltcp (TCP, UDP, ICMP echo, DHCP over IPv4 and Ethernet) over a
//! session with a network driver (`interfaces/net.idl`), serving sockets to its clients
//! (`interfaces/socket.idl`).
//!
//! It allocates the session memory from `mem`, maps it, lays out the rings and attaches it to
//! the driver (`link.rs` is smoltcp's `Device` over it: frames are parsed in place in the slots
//! the driver received them into and written straight into the slots it sends from). Two
//! threads share the stack under one lock: the main thread serves the socket calls (none blocks:
//! `WouldBlock`, and the client waits on the notification it registered with `watch`); the poll
//! thread wakes on the driver's completions, on smoltcp's next timer, and when a call changed
//! what the timers should be, polls, and signals every client's notification when any socket's
//! state may have changed. Delayed ACKs are off, so request/response traffic is not throttled.
//!
//! The network manager's one rule lives here for now: ports below 1024 only for the clients the
//! configuration names (`privileged`). Configuration: static (`address`, `gateway`) or DHCP.
//! Capabilities: the driver's endpoint (config `driver`), `mem`, the endpoint it serves (the
//! first provided), a factory (`kmem_kb`: a notification and a thread).
#![no_std]
#![no_main]

extern crate alloc;

mod link;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use link::Link;
use sawmill_abi::ObjKind;
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, IpcResult, Map, Next};
use sawmill_interfaces::socket::{self, AcceptOut, ConfigOut, NameOut, RecvFromOut, RecvOut};
use sawmill_interfaces::{dataspace, mem, net, MapFlags, Ready, SockError, SockKind};
use sawmill_net_virtio_api::session::{Shared, SESSION_BYTES, SESSION_PAGES};
use sawmill_netstack_api::{parse_addr, parse_cidr, Config};
use sawmill_rt::{env, println, sys, thread};
use smoltcp::iface::{Config as IfaceConfig, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::{dhcpv4, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{
    EthernetAddress, IpAddress, IpCidr, IpEndpoint, IpListenEndpoint, Ipv4Address, Ipv4Cidr,
};

sawmill_rt::entry!(main);

/// Where the session memory is mapped here.
const SESSION_AT: u64 = 0x5000_0000;
/// Bits of the poll thread's notification: the driver has completions; a call changed timers.
const WAKE_DRIVER: u64 = 1;
const WAKE_CALL: u64 = 2;
const TCP_BUFFER: usize = 16 * 1024;
const UDP_PACKETS: usize = 16;
const UDP_BUFFER: usize = 8 * 1024;
/// Sockets in the stack and per client: each holds at most 32 KiB of buffers, so these bound the
/// heap one client (and all of them) can make the stack spend (6 MiB of its 8).
const MAX_SOCKETS: usize = 192;
const MAX_CLIENT_SOCKETS: usize = 64;
const MAX_BACKLOG: u32 = 16;
const EPHEMERAL_FIRST: u16 = 49152;
const THREAD_STACK: usize = 64 * 1024;

/// Time-stamp counter ticks per microsecond.
static TICKS_PER_US: AtomicU64 = AtomicU64::new(1);
/// The poll thread's notification.
static WAKE: AtomicU64 = AtomicU64::new(0);

fn now() -> Instant {
    Instant::from_micros((sys::rdtsc() / TICKS_PER_US.load(Ordering::Relaxed)) as i64)
}

fn endpoint(addr: u32, port: u16) -> IpEndpoint {
    IpEndpoint::new(IpAddress::Ipv4(Ipv4Address::from_bits(addr)), port)
}

fn number(a: IpAddress) -> u32 {
    match a {
        IpAddress::Ipv4(v) => v.to_bits(),
    }
}

/// A client's socket.
enum Sock {
    Tcp {
        h: SocketHandle,
        /// The port `bind` gave it (ours to release).
        bound: Option<u16>,
        connecting: bool,
        connected: bool,
    },
    /// A listening TCP socket: `pending` listen on the port, each taking one connection; an
    /// established one is what `accept` hands out (the backlog).
    Listener {
        port: u16,
        pending: Vec<SocketHandle>,
    },
    Udp {
        h: SocketHandle,
        port: Option<u16>,
        peer: Option<IpEndpoint>,
    },
}

#[derive(Default)]
struct Client {
    /// The client's notification (our copy) and its bits.
    wake: Option<(u64, u64)>,
    socks: BTreeMap<u32, Sock>,
    next: u32,
}

struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    link: Link,
    dhcp: Option<SocketHandle>,
    clients: BTreeMap<u64, Client>,
    /// smoltcp sockets in use (listeners count each pending one).
    count: usize,
    tcp_ports: BTreeSet<u16>,
    udp_ports: BTreeSet<u16>,
    next_port: u16,
    /// Closed TCP sockets still finishing their goodbye.
    closing: Vec<SocketHandle>,
    privileged: Vec<u64>,
    addr: u32,
    prefix: u8,
    gateway: u32,
}

fn tcp_socket() -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; TCP_BUFFER]),
        tcp::SocketBuffer::new(vec![0; TCP_BUFFER]),
    );
    s.set_ack_delay(None);
    s
}

fn udp_socket() -> udp::Socket<'static> {
    let buf = || {
        udp::PacketBuffer::new(
            vec![udp::PacketMetadata::EMPTY; UDP_PACKETS],
            vec![0; UDP_BUFFER],
        )
    };
    udp::Socket::new(buf(), buf())
}

impl Stack {
    /// Polls smoltcp, hands the frames to the driver, follows DHCP, finishes closed sockets and
    /// wakes the clients if anything may have changed.
    fn poll(&mut self) {
        let r = self.iface.poll(now(), &mut self.link, &mut self.sockets);
        self.link.flush();
        let mut changed = r == PollResult::SocketStateChanged;
        if let Some(h) = self.dhcp {
            let ev = match self.sockets.get_mut::<dhcpv4::Socket>(h).poll() {
                Some(dhcpv4::Event::Configured(c)) => Some(Some((c.address, c.router))),
                Some(dhcpv4::Event::Deconfigured) => Some(None),
                None => None,
            };
            match ev {
                Some(Some((cidr, router))) => self.configure(cidr, router),
                Some(None) => {
                    // smoltcp reports "deconfigured" once at the start too.
                    if self.addr != 0 {
                        println!("netstack: DHCP lease lost");
                    }
                    self.iface.update_ip_addrs(|a| a.clear());
                    self.iface.routes_mut().remove_default_ipv4_route();
                    self.addr = 0;
                    self.prefix = 0;
                    self.gateway = 0;
                }
                None => {}
            }
            changed |= ev.is_some();
        }
        let mut i = 0;
        while i < self.closing.len() {
            let h = self.closing[i];
            let st = self.sockets.get::<tcp::Socket>(h).state();
            if matches!(st, tcp::State::Closed | tcp::State::TimeWait) {
                self.sockets.remove(h);
                self.count -= 1;
                self.closing.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if changed {
            for c in self.clients.values() {
                if let Some((n, bits)) = c.wake {
                    let _ = sys::notify_signal(n, bits);
                }
            }
        }
    }

    fn configure(&mut self, cidr: Ipv4Cidr, router: Option<Ipv4Address>) {
        self.iface.update_ip_addrs(|a| {
            a.clear();
            let _ = a.push(IpCidr::Ipv4(cidr));
        });
        match router {
            Some(r) => {
                let _ = self.iface.routes_mut().add_default_ipv4_route(r);
            }
            None => {
                self.iface.routes_mut().remove_default_ipv4_route();
            }
        }
        self.addr = cidr.address().to_bits();
        self.prefix = cidr.prefix_len();
        self.gateway = router.map_or(0, |r| r.to_bits());
        let (a, g) = (cidr.address().octets(), self.gateway.to_be_bytes());
        println!(
            "netstack: address {}.{}.{}.{}/{} gateway {}.{}.{}.{}",
            a[0], a[1], a[2], a[3], self.prefix, g[0], g[1], g[2], g[3]
        );
    }

    fn sock(&mut self, badge: u64, id: u32) -> Result<&mut Sock, SockError> {
        sock_of(&mut self.clients, badge, id)
    }

    fn add(&mut self, badge: u64, s: Sock) -> Result<u32, SockError> {
        let c = self.clients.entry(badge).or_default();
        if c.socks.len() >= MAX_CLIENT_SOCKETS {
            return Err(SockError::NoSpace);
        }
        let id = c.next;
        c.next = c.next.wrapping_add(1);
        c.socks.insert(id, s);
        Ok(id)
    }

    fn room(&self, n: usize) -> Result<(), SockError> {
        if self.count + n > MAX_SOCKETS {
            Err(SockError::NoSpace)
        } else {
            Ok(())
        }
    }

    /// A free port for `bind(0)`, a listener or an outgoing connection.
    fn ephemeral(&mut self, udp: bool) -> Result<u16, SockError> {
        for _ in 0..(u16::MAX - EPHEMERAL_FIRST) {
            let p = self.next_port;
            self.next_port = if p == u16::MAX {
                EPHEMERAL_FIRST
            } else {
                p + 1
            };
            let used = if udp {
                &self.udp_ports
            } else {
                &self.tcp_ports
            };
            if !used.contains(&p) {
                return Ok(p);
            }
        }
        Err(SockError::AddrInUse)
    }

    fn listen_socket(&mut self, port: u16) -> Result<SocketHandle, SockError> {
        self.room(1)?;
        let mut s = tcp_socket();
        s.listen(IpListenEndpoint { addr: None, port })
            .map_err(|_| SockError::Invalid)?;
        self.count += 1;
        Ok(self.sockets.add(s))
    }

    fn tcp_ready(&self, h: SocketHandle, connecting: bool) -> Ready {
        let s = self.sockets.get::<tcp::Socket>(h);
        let mut r = Ready::EMPTY;
        let st = s.state();
        if s.can_recv() {
            r |= Ready::READABLE;
        }
        if s.can_send() {
            r |= Ready::WRITABLE;
        }
        if connecting && st == tcp::State::Closed {
            r |= Ready::ERROR | Ready::HANGUP | Ready::READABLE | Ready::WRITABLE;
        } else if !s.may_recv()
            && !matches!(
                st,
                tcp::State::SynSent | tcp::State::SynReceived | tcp::State::Listen
            )
        {
            r |= Ready::READABLE | Ready::HANGUP;
        }
        r
    }

    fn release(&mut self, s: Sock) {
        match s {
            Sock::Tcp { h, bound, .. } => {
                if let Some(p) = bound {
                    self.tcp_ports.remove(&p);
                }
                let sock = self.sockets.get_mut::<tcp::Socket>(h);
                sock.close();
                if sock.state() == tcp::State::Closed {
                    self.sockets.remove(h);
                    self.count -= 1;
                } else {
                    self.closing.push(h);
                }
            }
            Sock::Listener { port, pending } => {
                self.tcp_ports.remove(&port);
                for h in pending {
                    self.sockets.get_mut::<tcp::Socket>(h).abort();
                    self.closing.push(h);
                }
            }
            Sock::Udp { h, port, .. } => {
                if let Some(p) = port {
                    self.udp_ports.remove(&p);
                }
                self.sockets.remove(h);
                self.count -= 1;
            }
        }
    }
}

/// Client `badge`'s socket `id` (borrowing the client table only).
fn sock_of(
    clients: &mut BTreeMap<u64, Client>,
    badge: u64,
    id: u32,
) -> Result<&mut Sock, SockError> {
    clients
        .get_mut(&badge)
        .and_then(|c| c.socks.get_mut(&id))
        .ok_or(SockError::BadSocket)
}

static STACK: spin::Mutex<Option<Stack>> = spin::Mutex::new(None);

/// The socket endpoint's state: the stack itself is behind `STACK`.
struct Front {
    after: AfterReply,
}

/// Runs `f` on the stack, then polls (so what the call queued goes out now) and has the poll
/// thread recompute its timer.
fn with_stack<T>(f: impl FnOnce(&mut Stack) -> Result<T, SockError>) -> Result<T, SockError> {
    let mut g = STACK.lock();
    let s = g.as_mut().ok_or(SockError::Unreachable)?;
    let r = f(s);
    s.poll();
    drop(g);
    let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), WAKE_CALL);
    r
}

impl socket::Server for Front {
    fn watch(&mut self, badge: u64, wake: u64, bits: u64) -> Result<(), SockError> {
        if bits == 0 {
            return Err(SockError::Invalid);
        }
        let copy = thread::alloc_slot();
        sys::cap_copy(wake, copy).map_err(|_| SockError::Invalid)?;
        with_stack(|s| {
            let c = s.clients.entry(badge).or_default();
            if let Some((old, _)) = c.wake.replace((copy, bits)) {
                let _ = sys::cap_delete(old);
            }
            Ok(())
        })
    }

    fn create(&mut self, badge: u64, kind: SockKind) -> Result<u32, SockError> {
        with_stack(|s| {
            s.room(1)?;
            if s.clients
                .get(&badge)
                .is_some_and(|c| c.socks.len() >= MAX_CLIENT_SOCKETS)
            {
                return Err(SockError::NoSpace);
            }
            let sock = match kind {
                SockKind::Tcp => Sock::Tcp {
                    h: s.sockets.add(tcp_socket()),
                    bound: None,
                    connecting: false,
                    connected: false,
                },
                SockKind::Udp => Sock::Udp {
                    h: s.sockets.add(udp_socket()),
                    port: None,
                    peer: None,
                },
            };
            s.count += 1;
            s.add(badge, sock)
        })
    }

    fn bind(&mut self, badge: u64, sock: u32, addr: u32, port: u16) -> Result<(), SockError> {
        with_stack(|s| {
            if port != 0 && port < 1024 && !s.privileged.contains(&badge) {
                return Err(SockError::Denied);
            }
            if addr != 0 && addr != s.addr {
                return Err(SockError::Invalid);
            }
            let udp = matches!(s.sock(badge, sock)?, Sock::Udp { .. });
            let port = if port == 0 { s.ephemeral(udp)? } else { port };
            let used = if udp { &s.udp_ports } else { &s.tcp_ports };
            if used.contains(&port) {
                return Err(SockError::AddrInUse);
            }
            let h = match s.sock(badge, sock)? {
                Sock::Tcp {
                    bound: b @ None,
                    connecting: false,
                    connected: false,
                    ..
                } => {
                    *b = Some(port);
                    None
                }
                Sock::Udp {
                    h, port: p @ None, ..
                } => {
                    *p = Some(port);
                    Some(*h)
                }
                _ => return Err(SockError::Invalid),
            };
            match h {
                Some(h) => {
                    s.sockets
                        .get_mut::<udp::Socket>(h)
                        .bind(port)
                        .map_err(|_| SockError::Invalid)?;
                    s.udp_ports.insert(port);
                }
                None => {
                    s.tcp_ports.insert(port);
                }
            }
            Ok(())
        })
    }

    fn listen(&mut self, badge: u64, sock: u32, backlog: u32) -> Result<(), SockError> {
        with_stack(|s| {
            let (h, bound) = match s.sock(badge, sock)? {
                Sock::Tcp {
                    h,
                    bound,
                    connecting: false,
                    connected: false,
                } => (*h, *bound),
                _ => return Err(SockError::Invalid),
            };
            let port = match bound {
                Some(p) => p,
                None => {
                    let p = s.ephemeral(false)?;
                    s.tcp_ports.insert(p);
                    p
                }
            };
            s.sockets
                .get_mut::<tcp::Socket>(h)
                .listen(IpListenEndpoint { addr: None, port })
                .map_err(|_| SockError::Invalid)?;
            let mut pending = vec![h];
            for _ in 1..backlog.clamp(1, MAX_BACKLOG) {
                match s.listen_socket(port) {
                    Ok(h) => pending.push(h),
                    Err(_) => break,
                }
            }
            *s.sock(badge, sock)? = Sock::Listener { port, pending };
            Ok(())
        })
    }

    fn accept(&mut self, badge: u64, sock: u32) -> Result<AcceptOut, SockError> {
        with_stack(|s| {
            let (port, h) = match sock_of(&mut s.clients, badge, sock)? {
                Sock::Listener { port, pending } => {
                    let sockets = &s.sockets;
                    let i = pending
                        .iter()
                        .position(|&h| {
                            matches!(
                                sockets.get::<tcp::Socket>(h).state(),
                                tcp::State::Established | tcp::State::CloseWait
                            )
                        })
                        .ok_or(SockError::WouldBlock)?;
                    (*port, pending.swap_remove(i))
                }
                _ => return Err(SockError::Invalid),
            };
            // A fresh listener takes the accepted one's place in the backlog.
            if let Ok(fresh) = s.listen_socket(port) {
                if let Sock::Listener { pending, .. } = s.sock(badge, sock)? {
                    pending.push(fresh);
                }
            }
            let remote = s.sockets.get::<tcp::Socket>(h).remote_endpoint();
            let conn = s.add(
                badge,
                Sock::Tcp {
                    h,
                    bound: None,
                    connecting: false,
                    connected: true,
                },
            );
            let conn = match conn {
                Ok(c) => c,
                Err(e) => {
                    s.sockets.get_mut::<tcp::Socket>(h).abort();
                    s.closing.push(h);
                    return Err(e);
                }
            };
            let (addr, port) = remote.map_or((0, 0), |e| (number(e.addr), e.port));
            Ok(AcceptOut { conn, addr, port })
        })
    }

    fn connect(&mut self, badge: u64, sock: u32, addr: u32, port: u16) -> Result<(), SockError> {
        with_stack(|s| {
            let remote = endpoint(addr, port);
            match sock_of(&mut s.clients, badge, sock)? {
                Sock::Udp { peer, .. } => {
                    *peer = Some(remote);
                    return Ok(());
                }
                Sock::Listener { .. } => return Err(SockError::Invalid),
                Sock::Tcp {
                    h,
                    connecting: connecting @ true,
                    connected,
                    ..
                } => {
                    return match s.sockets.get::<tcp::Socket>(*h).state() {
                        tcp::State::SynSent | tcp::State::SynReceived => Err(SockError::WouldBlock),
                        tcp::State::Closed => {
                            *connecting = false;
                            Err(SockError::ConnRefused)
                        }
                        _ => {
                            *connecting = false;
                            *connected = true;
                            Ok(())
                        }
                    };
                }
                Sock::Tcp {
                    connected: true, ..
                } => return Err(SockError::Invalid),
                Sock::Tcp { .. } => {}
            }
            let local = match s.sock(badge, sock)? {
                Sock::Tcp { bound: Some(p), .. } => *p,
                _ => s.ephemeral(false)?,
            };
            let Sock::Tcp { h, connecting, .. } = s.sock(badge, sock)? else {
                return Err(SockError::Invalid);
            };
            let h = *h;
            *connecting = true;
            let cx = s.iface.context();
            if s.sockets
                .get_mut::<tcp::Socket>(h)
                .connect(cx, remote, local)
                .is_err()
            {
                if let Sock::Tcp { connecting, .. } = s.sock(badge, sock)? {
                    *connecting = false;
                }
                return Err(SockError::Unreachable);
            }
            Err(SockError::WouldBlock)
        })
    }

    fn send(&mut self, badge: u64, sock: u32, data: &[u8]) -> Result<u32, SockError> {
        with_stack(|s| match s.sock(badge, sock)? {
            &mut Sock::Tcp { h, connecting, .. } => {
                let t = s.sockets.get_mut::<tcp::Socket>(h);
                if !t.may_send() {
                    return Err(match t.state() {
                        tcp::State::SynSent | tcp::State::SynReceived => SockError::WouldBlock,
                        tcp::State::Closed if connecting => SockError::ConnRefused,
                        _ => SockError::NotConnected,
                    });
                }
                match t.send_slice(data) {
                    Ok(0) if !data.is_empty() => Err(SockError::WouldBlock),
                    Ok(n) => Ok(n as u32),
                    Err(_) => Err(SockError::NotConnected),
                }
            }
            &mut Sock::Udp { h, peer, port } => {
                let peer = peer.ok_or(SockError::NotConnected)?;
                udp_send(s, badge, sock, h, port, peer, data)
            }
            Sock::Listener { .. } => Err(SockError::NotConnected),
        })
    }

    fn recv(&mut self, badge: u64, sock: u32, max: u32) -> Result<RecvOut, SockError> {
        with_stack(|s| {
            let mut data = Bytes::new();
            let n = (max as usize).min(data.buf_mut().len());
            match s.sock(badge, sock)? {
                &mut Sock::Tcp { h, connecting, .. } => {
                    let t = s.sockets.get_mut::<tcp::Socket>(h);
                    if t.can_recv() {
                        let got = t
                            .recv_slice(&mut data.buf_mut()[..n])
                            .map_err(|_| SockError::ConnReset)?;
                        data.set_len(got);
                        return Ok(RecvOut { data, eof: false });
                    }
                    match t.state() {
                        tcp::State::Closed if connecting => Err(SockError::ConnRefused),
                        tcp::State::SynSent | tcp::State::SynReceived | tcp::State::Listen => {
                            Err(SockError::WouldBlock)
                        }
                        _ if !t.may_recv() => Ok(RecvOut { data, eof: true }),
                        _ => Err(SockError::WouldBlock),
                    }
                }
                &mut Sock::Udp { h, .. } => {
                    let (got, _, _) = udp_recv(s, h, &mut data.buf_mut()[..n])?;
                    data.set_len(got);
                    Ok(RecvOut { data, eof: false })
                }
                Sock::Listener { .. } => Err(SockError::NotConnected),
            }
        })
    }

    fn send_to(
        &mut self,
        badge: u64,
        sock: u32,
        addr: u32,
        port: u16,
        data: &[u8],
    ) -> Result<u32, SockError> {
        with_stack(|s| match s.sock(badge, sock)? {
            &mut Sock::Udp { h, port: bound, .. } => {
                udp_send(s, badge, sock, h, bound, endpoint(addr, port), data)
            }
            _ => Err(SockError::Invalid),
        })
    }

    fn recv_from(&mut self, badge: u64, sock: u32, max: u32) -> Result<RecvFromOut, SockError> {
        with_stack(|s| match s.sock(badge, sock)? {
            &mut Sock::Udp { h, .. } => {
                let mut data = Bytes::new();
                let n = (max as usize).min(data.buf_mut().len());
                let (got, addr, port) = udp_recv(s, h, &mut data.buf_mut()[..n])?;
                data.set_len(got);
                Ok(RecvFromOut { data, addr, port })
            }
            _ => Err(SockError::Invalid),
        })
    }

    fn ready(&mut self, badge: u64, sock: u32) -> Result<Ready, SockError> {
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        Ok(match sock_of(&mut s.clients, badge, sock)? {
            &mut Sock::Tcp { h, connecting, .. } => s.tcp_ready(h, connecting),
            Sock::Listener { pending, .. } => {
                let sockets = &s.sockets;
                if pending.iter().any(|&h| {
                    matches!(
                        sockets.get::<tcp::Socket>(h).state(),
                        tcp::State::Established | tcp::State::CloseWait
                    )
                }) {
                    Ready::READABLE
                } else {
                    Ready::EMPTY
                }
            }
            &mut Sock::Udp { h, .. } => {
                let u = s.sockets.get::<udp::Socket>(h);
                let mut r = Ready::EMPTY;
                if u.can_recv() {
                    r |= Ready::READABLE;
                }
                if u.can_send() {
                    r |= Ready::WRITABLE;
                }
                r
            }
        })
    }

    fn name(&mut self, badge: u64, sock: u32) -> Result<NameOut, SockError> {
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        let me = s.addr;
        let (local, remote) = match s.sock(badge, sock)? {
            &mut Sock::Tcp { h, bound, .. } => {
                let t = s.sockets.get::<tcp::Socket>(h);
                (
                    t.local_endpoint()
                        .map(|e| (number(e.addr), e.port))
                        .or(bound.map(|p| (0, p))),
                    t.remote_endpoint().map(|e| (number(e.addr), e.port)),
                )
            }
            Sock::Listener { port, .. } => (Some((0, *port)), None),
            &mut Sock::Udp { port, peer, .. } => (
                port.map(|p| (me, p)),
                peer.map(|e| (number(e.addr), e.port)),
            ),
        };
        let (addr, port) = local.unwrap_or((0, 0));
        let (peer_addr, peer_port) = remote.unwrap_or((0, 0));
        Ok(NameOut {
            addr,
            port,
            peer_addr,
            peer_port,
        })
    }

    fn shutdown(&mut self, badge: u64, sock: u32) -> Result<(), SockError> {
        with_stack(|s| match s.sock(badge, sock)? {
            &mut Sock::Tcp { h, .. } => {
                s.sockets.get_mut::<tcp::Socket>(h).close();
                Ok(())
            }
            _ => Err(SockError::Invalid),
        })
    }

    fn close(&mut self, badge: u64, sock: u32) -> Result<(), SockError> {
        with_stack(|s| {
            let c = s.clients.get_mut(&badge).ok_or(SockError::BadSocket)?;
            let sk = c.socks.remove(&sock).ok_or(SockError::BadSocket)?;
            s.release(sk);
            Ok(())
        })
    }

    fn config(&mut self, _badge: u64) -> Result<ConfigOut, SockError> {
        let g = STACK.lock();
        let s = g.as_ref().ok_or(SockError::Unreachable)?;
        Ok(ConfigOut {
            addr: s.addr,
            prefix: s.prefix,
            gateway: s.gateway,
        })
    }
}

/// One datagram from the UDP socket `h` (bound to a free port first if it is not yet).
fn udp_send(
    s: &mut Stack,
    badge: u64,
    sock: u32,
    h: SocketHandle,
    bound: Option<u16>,
    to: IpEndpoint,
    data: &[u8],
) -> Result<u32, SockError> {
    if bound.is_none() {
        let p = s.ephemeral(true)?;
        s.sockets
            .get_mut::<udp::Socket>(h)
            .bind(p)
            .map_err(|_| SockError::Invalid)?;
        s.udp_ports.insert(p);
        if let Sock::Udp { port, .. } = s.sock(badge, sock)? {
            *port = Some(p);
        }
    }
    match s.sockets.get_mut::<udp::Socket>(h).send_slice(data, to) {
        Ok(()) => Ok(data.len() as u32),
        Err(udp::SendError::BufferFull) => Err(SockError::WouldBlock),
        Err(udp::SendError::Unaddressable) => Err(SockError::Unreachable),
    }
}

/// One datagram of the UDP socket `h` into `buf` (cut to its length): bytes, source.
fn udp_recv(
    s: &mut Stack,
    h: SocketHandle,
    buf: &mut [u8],
) -> Result<(usize, u32, u16), SockError> {
    match s.sockets.get_mut::<udp::Socket>(h).recv() {
        Ok((d, meta)) => {
            let n = d.len().min(buf.len());
            buf[..n].copy_from_slice(&d[..n]);
            Ok((n, number(meta.endpoint.addr), meta.endpoint.port))
        }
        Err(_) => Err(SockError::WouldBlock),
    }
}

impl rpc::Serve for Front {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        socket::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

/// The poll thread: the driver's completions, smoltcp's timers, calls that changed them.
fn poller(wake: u64) -> ! {
    loop {
        let delay = {
            let mut g = STACK.lock();
            let s = g.as_mut().expect("stack");
            s.poll();
            s.iface.poll_delay(now(), &s.sockets)
        };
        match delay {
            Some(d) => {
                let ticks = d.total_micros() * TICKS_PER_US.load(Ordering::Relaxed);
                let _ = sys::notify_wait_until(wake, sys::rdtsc().saturating_add(ticks.max(1)));
            }
            None => {
                let _ = sys::notify_wait(wake, 0);
            }
        }
    }
}

/// The session memory: a dataspace of mem's, mapped here at `SESSION_AT`.
fn session_memory(mem_ep: u64) -> Result<(u64, Shared), &'static str> {
    let ds = mem::Client::new(mem_ep)
        .alloc(SESSION_BYTES as u64, 0, thread::alloc_slot())
        .map_err(|_| "no memory for the session from mem")?;
    let d = dataspace::Client::new(ds);
    let rw = MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE;
    let mut at = 0;
    while at < SESSION_PAGES as u64 {
        let va = SESSION_AT + at * 4096;
        let left = SESSION_PAGES as u64 - at;
        match d.map(at * 4096, va, left, rw, [va, left * 4096]) {
            Ok(m) if m.pages > 0 => at += m.pages,
            _ => return Err("mapping the session memory"),
        }
    }
    // SAFETY: SESSION_BYTES mapped at SESSION_AT just now, ours for good.
    Ok((ds, unsafe { Shared::new(SESSION_AT as *mut u8) }))
}

fn main() {
    let cfg: Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("netstack: FAIL config: {}", e);
            return;
        }
    };
    let (Some(driver), Some(mem_ep), Some((ep, _))) =
        (env::cap(&cfg.driver.name), env::cap("mem"), env::served())
    else {
        println!("netstack: FAIL needs the driver's endpoint, `mem` and an endpoint to serve");
        return;
    };
    let static_addr = match (&cfg.address, &cfg.gateway) {
        (Some(a), g) => match (parse_cidr(a), g.as_deref().map(parse_addr)) {
            (Some(a), None) => Some((a, None)),
            (Some(a), Some(Some(g))) => Some((a, Some(g))),
            _ => {
                println!("netstack: FAIL bad address or gateway");
                return;
            }
        },
        (None, _) => None,
    };
    let khz = sawmill_rt::clock::Wall::get().khz;
    TICKS_PER_US.store((khz / 1000).max(1), Ordering::Relaxed);
    let wake = match thread::create(ObjKind::Notification, 0) {
        Ok(n) => n,
        Err(e) => {
            println!("netstack: FAIL notification (kmem_kb?): {}", e.name());
            return;
        }
    };
    WAKE.store(wake, Ordering::Relaxed);
    let (_ds, shared) = match session_memory(mem_ep) {
        Ok(x) => x,
        Err(e) => {
            println!("netstack: FAIL {}", e);
            return;
        }
    };
    let mut link = Link::new(shared);
    let nic = net::Client::new(driver);
    // The session memory goes to the driver as a map item at its window (derived from our
    // mapping: unmapping or freeing it here takes it from the driver too).
    let (mac, kick) = match nic.info().and_then(|i| {
        let region = Map {
            src: SESSION_AT,
            dst: i.window,
            pages: SESSION_PAGES as u64,
            flags: sawmill_abi::map::READ | sawmill_abi::map::WRITE,
        };
        nic.attach(region, wake, WAKE_DRIVER, thread::alloc_slot())
            .map(|k| (i.mac, k))
    }) {
        Ok(x) => x,
        Err(e) => {
            println!("netstack: FAIL attaching to the driver: {:?}", e);
            return;
        }
    };
    link.set_kick(kick);
    let m = mac.to_le_bytes();
    let mut ic = IfaceConfig::new(EthernetAddress([m[0], m[1], m[2], m[3], m[4], m[5]]).into());
    ic.random_seed = sys::rdtsc();
    let iface = Interface::new(ic, &mut link, now());
    let mut st = Stack {
        iface,
        sockets: SocketSet::new(Vec::new()),
        link,
        dhcp: None,
        clients: BTreeMap::new(),
        count: 0,
        tcp_ports: BTreeSet::new(),
        udp_ports: BTreeSet::new(),
        next_port: EPHEMERAL_FIRST,
        closing: Vec::new(),
        privileged: cfg.privileged.iter().map(|c| c.badge).collect(),
        addr: 0,
        prefix: 0,
        gateway: 0,
    };
    match static_addr {
        Some(((a, prefix), gw)) => st.configure(
            Ipv4Cidr::new(Ipv4Address::from_bits(a), prefix),
            gw.map(Ipv4Address::from_bits),
        ),
        None => {
            let mut d = dhcpv4::Socket::new();
            d.set_max_lease_duration(Some(Duration::from_secs(3600)));
            st.dhcp = Some(st.sockets.add(d));
            println!("netstack: asking DHCP");
        }
    }
    *STACK.lock() = Some(st);
    if let Err(e) = thread::spawn(255, THREAD_STACK, move || poller(wake)) {
        println!("netstack: FAIL poll thread: {}", e.name());
        return;
    }
    println!(
        "netstack: serving sockets, mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    );
    let mut front = Front {
        after: AfterReply::new(),
    };
    front.after.receive_into(&[thread::alloc_slot()]);
    let _ = rpc::serve(ep, &mut front);
}
