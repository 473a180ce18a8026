//! The network stack server: smoltcp (TCP, UDP, ICMP echo, DHCP over IPv4 and Ethernet) over a
//! session with a network driver (`interfaces/net.idl`), serving sockets to its clients
//! (`interfaces/socket.idl`).
//!
//! It allocates the session memory from `mem`, maps it, lays out the rings and attaches it to
//! the driver (`link.rs` is smoltcp's `Device` over it: frames are parsed in place in the slots
//! the driver received them into and written straight into the slots it sends from). Every
//! socket is a capability the stack minted with a watched badge (`NO_SENDERS`): the socket
//! closes when the last copy is gone, whichever task held it. Two threads share the stack under
//! one lock: the main thread serves `socket` and `sock` calls (none blocks: `WouldBlock`, and
//! the client waits on a notification it registered with the socket); the poll thread wakes on
//! the driver's completions (received frames; sent ones only while out of send slots), on
//! smoltcp's next timer, and when a call changed what the timers should be, polls, and signals
//! the registrations of every socket that became readier. A call that queued one UDP datagram
//! polls only one egress round (`Stack::poll_sent`); one to a destination smoltcp sent to
//! lately does not go through smoltcp at all (`Stack::send_fast`, the link's UDP fast path).
//! Delayed ACKs are off, so request/response traffic is not throttled. smoltcp's sockets live in
//! sets by local port (`sockets.rs`): a received frame is polled with its port's set only, and
//! egress runs for the sets touched or due (docs/net.md "The stack").
//!
//! The stack enforces the network manager's rule (servers/netmgr holds it): ports below 1024
//! only for the clients the configuration names (`privileged`) or whose capability the network
//! manager granted with that right in its badge (`socket.grant`, only on the `manager`'s capability; `grant.rs` of the
//! api crate). Configuration: static (`address`, `gateway`) or DHCP.
//!
//! A driver restart is invisible to TCP: the stack gives the driver a token with `attach`, a
//! capability minted under a watch, which the driver holds while the session lasts. When the
//! driver dies (or ends the session) the token goes with it and the kernel's `NO_SENDERS` notice
//! tells the stack at once; the poll thread then waits for the driver's endpoint to answer again
//! (root puts the new incarnation's endpoint into the very slot the old one was in), empties the
//! rings and attaches the same session memory to it. Frames lost meanwhile are sent again by
//! TCP; the sockets, their connections and the DHCP lease are the stack's and stay.
//!
//! Loopback fusion (docs/net.md): a client connecting to one of our own sockets may offer two
//! pipe ends (`sock.connect_fused`); the stack keeps them (our copies, never used here) until the
//! accepted socket, or the fused UDP peer, takes them (`sock.fused_ends`). The data of such a
//! pair goes through the pipes, never through smoltcp.
//!
//! Capabilities: the driver's endpoint (config `driver`), `mem`, the endpoint it serves (the
//! first provided), a factory (`kmem_kb`: a notification and a thread), pipe ends clients offer.
#![no_std]
#![no_main]

extern crate alloc;

mod link;
mod sockets;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use link::Link;
use sawmill_abi::{rights, ObjKind};
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, IpcResult, Map, Next};
use sawmill_interfaces::sock::{self, AcceptOut, NameOut, PeekFromOut, RecvFromOut, RecvOut};
use sawmill_interfaces::sock::{RecvBufOut, RecvFromBufOut};
use sawmill_interfaces::socket::{self, ConfigOut};
use sawmill_interfaces::{
    dataspace, mem, net, DsError, DsFlags, MapFlags, NetError, Ready, SockError, SockKind,
    CHANNEL_BYTES, MAX_DATAGRAM,
};
use sawmill_net_virtio_api::session::{Shared, SESSION_BYTES, SESSION_PAGES};
use sawmill_netstack_api::conns::ConnKey;
use sawmill_netstack_api::sets::{members, set_of_port, CONTROL_SET};
use sawmill_netstack_api::{grant, parse_addr, parse_cidr, Config, SOCKET_BYTES};
use sawmill_rt::{env, println, sys, thread};
use smoltcp::iface::{Config as IfaceConfig, Interface, PollResult};
use smoltcp::socket::{dhcpv4, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{
    EthernetAddress, IpAddress, IpCidr, IpEndpoint, IpListenEndpoint, Ipv4Address, Ipv4Cidr,
};
use sockets::{Handle, Sockets};

sawmill_rt::entry!(main);

/// Where the session memory is mapped here.
const SESSION_AT: u64 = 0x5000_0000;
/// Bits of the poll thread's notification: the driver has completions; a call changed timers.
const WAKE_DRIVER: u64 = 1;
const WAKE_CALL: u64 = 2;
/// How long the poll thread sleeps at most while out of send slots (the driver's send
/// completion wakes it sooner).
const TX_WAIT_SLACK_MS: u64 = 1;
const TCP_BUFFER: usize = SOCKET_BYTES / 2;
const UDP_PACKETS: usize = 16;
const UDP_BUFFER: usize = 8 * 1024;
/// The hop limit of UDP datagrams: smoltcp's default for a socket that sets none (ours never
/// do), which the fast path (`Stack::send_fast`) writes too.
const UDP_HOP_LIMIT: u8 = 64;
/// The largest backlog a listener gets (Linux's `somaxconn` was 128 for long): its places are
/// made as connections arrive ([`LISTEN_SPARE`]), each a socket of the owner's share.
const MAX_BACKLOG: u32 = 128;
/// Fused connections offered and not accepted yet (each holds two pipe ends of ours): past it
/// `connect_fused` answers not fused and the connection goes through smoltcp.
const MAX_OFFERS: usize = 32;
/// Listening smoltcp sockets a listener keeps free beyond those holding connections (up to its
/// backlog): smoltcp looks at every socket for every packet, so a backlog of 16 made sixteen
/// sockets that each packet of every connection passed; now the backlog grows as connections
/// arrive (each poll tops the free ones up) and shrinks as they are accepted.
const LISTEN_SPARE: usize = 2;
const EPHEMERAL_FIRST: u16 = 49152;
/// The DHCP socket's port (smoltcp's default): its socket lives in that port's set.
const DHCP_CLIENT_PORT: u16 = 68;
/// Badges of socket capabilities have this bit (manifest badges never do), and the notice
/// capability for `NO_SENDERS` messages has its own.
const SOCK_BIT: u64 = 1 << 40;
const NOTICE_BADGE: u64 = 1 << 41;
/// Badges of channel capabilities (`sock.channel`) have this bit besides [`SOCK_BIT`].
const CHAN_BIT: u64 = 1 << 39;
/// Badges of the tokens given to the driver with `attach` (and the session's number): no
/// rights, so the driver cannot call us with it; only its `NO_SENDERS` notice matters.
const DRIVER_TOKEN: u64 = 1 << 42;
/// How often the poll thread asks after a driver that is not back yet.
const REATTACH_MS: u64 = 20;
/// Channels in all (each holds [`CHANNEL_BYTES`] of the heap: 1 MiB beside the sockets'), and
/// per client: like sockets, one client takes at most a quarter, so one that hoards channels
/// cannot push every other client back onto the message path.
const MAX_CHANNELS: usize = 32;
const MAX_CLIENT_CHANNELS: usize = MAX_CHANNELS / 4;
const CHANNEL: usize = CHANNEL_BYTES as usize;
const PAGE: usize = 4096;
/// Dataspace calls (a channel's buffer) carry labels from 0xd01 on (interfaces/dataspace.idl).
const DATASPACE_LABELS: u16 = 0xd01;
/// Registrations per socket.
const MAX_WATCHERS: usize = 8;
const THREAD_STACK: usize = 64 * 1024;
/// The loopback network, an address of the interface from the start (`link.rs` turns its
/// frames around).
const LOOPBACK: Ipv4Cidr = Ipv4Cidr::new(Ipv4Address::new(127, 0, 0, 1), 8);

/// Time-stamp counter ticks per microsecond.
static TICKS_PER_US: AtomicU64 = AtomicU64::new(1);
/// The poll thread's notification.
static WAKE: AtomicU64 = AtomicU64::new(0);
/// The time-stamp counter value the poll thread waits until (u64::MAX: no deadline), written
/// under the stack's lock: a call wakes the thread only when smoltcp wants it earlier.
static POLL_DEADLINE: AtomicU64 = AtomicU64::new(0);
/// The badge of the live session's token (0: none), and the sessions attached so far.
static TOKEN: AtomicU64 = AtomicU64::new(0);
static SESSIONS: AtomicU64 = AtomicU64::new(0);

// The rights bits are socket.idl's; the api crate repeats them for the host.
const _: () = assert!(grant::RIGHT_PRIVILEGED_PORTS == sawmill_interfaces::RIGHT_PRIVILEGED_PORTS);
const _: () = assert!(grant::RIGHT_RAW == sawmill_interfaces::RIGHT_RAW);

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
        h: Handle,
        /// The port `bind` gave it (ours to release).
        bound: Option<u16>,
        connecting: bool,
        connected: bool,
        /// The client ended its sending side (`shutdown`): a connection that then reaches
        /// `Closed` ended normally, not by a reset.
        shut: bool,
    },
    /// A listening TCP socket: `pending` listen on the port, each taking one connection; an
    /// established one is what `accept` hands out (the backlog).
    Listener {
        port: u16,
        pending: Vec<Handle>,
        /// How many `pending` may grow to (the backlog asked, within the owner's share).
        backlog: usize,
    },
    Udp {
        h: Handle,
        port: Option<u16>,
        peer: Option<IpEndpoint>,
        /// The start of a datagram larger than one call (`send_more`), sent with the next
        /// `send`/`send_to`.
        pending: Vec<u8>,
    },
}

/// A socket and who waits on it.
struct Entry {
    sock: Sock,
    /// The client (manifest badge) whose share it counts against.
    owner: u64,
    /// Registered notifications (our copies) and their bits.
    watchers: Vec<(u64, u64)>,
    /// Its readiness at the last poll: a registration is signalled when a bit appears.
    last: Ready,
}

struct Stack {
    iface: Interface,
    mac: [u8; 6],
    /// smoltcp's sockets, in sets by local port (`sockets.rs`).
    sockets: Sockets,
    link: Link,
    dhcp: Option<Handle>,
    /// Every socket, by its capability's badge.
    socks: BTreeMap<u64, Entry>,
    /// Sockets per client and per sub-account.
    shares: grant::Shares,
    next_id: u64,
    /// smoltcp sockets in use (listeners count each pending one).
    count: usize,
    /// smoltcp sockets in all and per client (a listener holds one per backlog place), from the
    /// manifest (`sockets`, `client_sockets`): each holds at most `SOCKET_BYTES` of buffers, so
    /// these bound the heap one client (and all of them) can make the stack spend.
    max_sockets: usize,
    max_client_sockets: usize,
    /// ... and per sub-account (a Linux process; manifest `process_sockets`).
    max_process_sockets: usize,
    tcp_ports: BTreeSet<u16>,
    udp_ports: BTreeSet<u16>,
    next_port: u16,
    /// Closed TCP sockets still finishing their goodbye.
    closing: Vec<Handle>,
    /// Listening sockets (`Sock::Listener`): the polls that top them up look only if any.
    listeners: usize,
    /// UDP sockets a peer fused (`connect_fused`), by badge: our copies of their pipe ends
    /// (read, write), kept while the socket lives and handed to every holder that asks.
    udp_fused: BTreeMap<u64, (u64, u64)>,
    privileged: Vec<u64>,
    addr: u32,
    prefix: u8,
    gateway: u32,
    /// The call just queued a UDP datagram (on this socket) and nothing else: its poll is one
    /// egress round ([`Stack::poll_sent`]).
    udp_queued: Option<Handle>,
    /// The call sent a UDP datagram by the fast path ([`Stack::send_fast`]): nothing of
    /// smoltcp's changed, so no poll and no timer follow it.
    udp_fast: bool,
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
    /// When smoltcp wants the next poll, as a time-stamp counter value (u64::MAX: never).
    fn next_poll(&mut self) -> u64 {
        let t = now();
        match self.sockets.poll_at(&mut self.iface, t) {
            Some(at) => {
                let us = (at.total_micros() - t.total_micros()).max(0) as u64;
                let ticks = us * TICKS_PER_US.load(Ordering::Relaxed);
                sys::rdtsc().saturating_add(ticks.max(1))
            }
            None => u64::MAX,
        }
    }

    /// The poll after a call that queued one UDP datagram: one round of smoltcp's egress (it
    /// sends the datagram), not the whole poll (ingress, egress until nothing moves, DHCP, the
    /// readiness scan): nothing else changed, and what arrives meanwhile wakes the poll thread
    /// (the driver wakes it for every received frame). A datagram the loopback turned around
    /// is received by the whole poll at once. Whether one frame went to the driver and nothing
    /// else moved (no other socket sent in that round, no whole poll): then no timer of
    /// smoltcp's can have changed but the sending socket's, and a datagram has none.
    fn poll_sent(&mut self, h: Handle) -> bool {
        let sent = self.link.tx_frames;
        self.iface
            .poll_egress(now(), &mut self.link, self.sockets.for_egress(h.set()));
        self.link.flush();
        if self.link.looped() {
            self.poll();
            return false;
        }
        self.link.tx_frames == sent + 1
    }

    /// A datagram from the UDP socket `h` to `to` framed by the link itself (`Link::send_udp`),
    /// skipping smoltcp's egress round, when smoltcp would send it at once and as the link
    /// frames it: nothing queued before it on the socket (order), the socket bound to a port
    /// and not an address (the source is the interface's), the default hop limit, and a
    /// destination smoltcp sent to lately. Whether it went; if not, smoltcp takes it.
    fn send_fast(&mut self, h: Handle, to: IpEndpoint, data: &[u8]) -> bool {
        let sock = self.sockets.get::<udp::Socket>(h);
        let local = sock.endpoint();
        if sock.send_queue() != 0
            || sock.hop_limit().is_some()
            || local.addr.is_some()
            || local.port == 0
            || to.port == 0
        {
            return false;
        }
        self.link.send_udp(
            now(),
            number(to.addr),
            local.port,
            to.port,
            UDP_HOP_LIMIT,
            data,
        )
    }

    /// Polls smoltcp, hands the frames to the driver, follows DHCP, finishes closed sockets and
    /// wakes whoever waits on a socket that became readier.
    fn poll(&mut self) {
        // Frames turned around by the loopback are received in the next round (bounded: a
        // round trip of a TCP segment and its ACK takes a few).
        let mut polled = 0u128;
        for _ in 0..8 {
            let t = now();
            // Each frame with the set of its connection, or of its destination port, only
            // (`sockets.rs`). A frame for
            // no port may be ARP's: a neighbour learned lets sockets of any set send that
            // waited for it, so every set's egress runs.
            while let Some(set) = self.link.next_set(self.sockets.conns()) {
                self.iface
                    .poll_ingress_single(t, &mut self.link, self.sockets.for_ingress(set));
                if set == CONTROL_SET {
                    self.sockets.touch_all();
                }
            }
            polled |= self.egress(t);
            self.link.flush();
            if !self.link.looped() {
                break;
            }
        }
        if let Some(h) = self.dhcp {
            let ev = match self.sockets.get_mut::<dhcpv4::Socket>(h).poll() {
                Some(dhcpv4::Event::Configured(c)) => {
                    // The stack resolves no names; Linux programs do (musl's resolver asks the
                    // nameserver in /etc/resolv.conf): the log says which one the network
                    // announced (QEMU's user network: 10.0.2.3), docs/net.md "Names".
                    for d in c.dns_servers.iter() {
                        let o = d.octets();
                        println!(
                            "netstack: DHCP name server {}.{}.{}.{}",
                            o[0], o[1], o[2], o[3]
                        );
                    }
                    Some(Some((c.address, c.router)))
                }
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
                    self.iface.update_ip_addrs(|a| {
                        a.clear();
                        let _ = a.push(IpCidr::Ipv4(LOOPBACK));
                    });
                    self.link.set_local(self.mac, 0);
                    self.iface.routes_mut().remove_default_ipv4_route();
                    self.addr = 0;
                    self.prefix = 0;
                    self.gateway = 0;
                }
                None => {}
            }
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
        // Listeners whose free sockets were taken get new ones (only those of the sets polled:
        // nothing changed in the others).
        if self.listeners > 0 {
            let mut listeners: Vec<(u64, u64)> = Vec::new();
            for set in members(polled) {
                for b in self.sockets.badges(set) {
                    if let Some(e) = self.socks.get(b) {
                        if matches!(e.sock, Sock::Listener { .. }) {
                            listeners.push((*b, e.owner));
                        }
                    }
                }
            }
            for (badge, owner) in listeners {
                self.top_up(badge, owner);
            }
        }
        // Wake whoever waits on a socket that became readier (computed for registered sockets
        // of the sets polled only).
        let sockets = &self.sockets;
        for set in members(polled) {
            for b in sockets.badges(set) {
                let Some(e) = self.socks.get_mut(b) else {
                    continue;
                };
                if e.watchers.is_empty() {
                    continue;
                }
                let r = ready_of(sockets, &e.sock);
                if !(r - e.last).is_empty() {
                    for &(n, bits) in &e.watchers {
                        let _ = sys::notify_signal(n, bits);
                    }
                }
                e.last = r;
            }
        }
    }

    /// smoltcp's egress for the sets touched since their last one or due at `t`, each until
    /// nothing more goes; their times taken again. The sets it ran for, as a mask.
    fn egress(&mut self, t: Instant) -> u128 {
        let mask = self.sockets.due(t);
        for set in members(mask) {
            while matches!(
                self.iface
                    .poll_egress(t, &mut self.link, self.sockets.for_egress(set)),
                PollResult::SocketStateChanged
            ) {}
            self.sockets.settle(&mut self.iface, t, set);
        }
        mask
    }

    /// Moves the smoltcp socket of the stack's socket `badge` to the set of `port`, the local
    /// port it is about to use: its handle there.
    fn rehome(&mut self, badge: u64, port: u16) -> Result<Handle, SockError> {
        let e = self.socks.get_mut(&badge).ok_or(SockError::BadSocket)?;
        let before = set_of(&e.sock);
        let h = match &mut e.sock {
            Sock::Tcp { h, .. } | Sock::Udp { h, .. } => h,
            Sock::Listener { .. } => return Err(SockError::Invalid),
        };
        *h = self.sockets.move_to_port(*h, port);
        let h = *h;
        if h.set() != before {
            self.sockets.leave(before, badge);
            self.sockets.enter(h.set(), badge);
        }
        Ok(h)
    }

    /// Moves the TCP connection `h` (established, or connecting with its endpoints chosen) to
    /// the set of its 4-tuple, indexed there (`sockets.rs` `pin`), so that its segments are not
    /// offered to the other connections on its local port: its handle there (`h` itself while
    /// its endpoints are unknown). Every holder of `h` has to take the new handle.
    fn pin_conn(&mut self, h: Handle) -> Handle {
        let t = self.sockets.get::<tcp::Socket>(h);
        let (Some(local), Some(remote)) = (t.local_endpoint(), t.remote_endpoint()) else {
            return h;
        };
        let key = ConnKey {
            local_port: local.port,
            remote_addr: number(remote.addr),
            remote_port: remote.port,
        };
        self.sockets.pin(h, key)
    }

    fn configure(&mut self, cidr: Ipv4Cidr, router: Option<Ipv4Address>) {
        self.iface.update_ip_addrs(|a| {
            // The interface's address first: smoltcp takes the first one as the source of
            // packets to other networks.
            a.clear();
            let _ = a.push(IpCidr::Ipv4(cidr));
            let _ = a.push(IpCidr::Ipv4(LOOPBACK));
        });
        self.link.set_local(self.mac, cidr.address().to_bits());
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

    fn sock(&mut self, badge: u64) -> Result<&mut Sock, SockError> {
        sock_of(&mut self.socks, badge)
    }

    /// Room for `n` more smoltcp sockets of `owner`'s.
    fn room_for(&self, owner: u64, n: usize) -> Result<(), SockError> {
        self.shares
            .room(owner, n, self.max_client_sockets, self.max_process_sockets)
            .map_err(|f| match f {
                grant::Full::Sub => SockError::ProcessFull,
                grant::Full::Client => SockError::NoSpace,
            })?;
        self.room(n)
    }

    /// `owner` holds `n` smoltcp sockets more (or fewer).
    fn charge(&mut self, owner: u64, n: isize) {
        self.shares.charge(owner, n);
    }

    fn room(&self, n: usize) -> Result<(), SockError> {
        if self.count + n > self.max_sockets {
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

    /// Keeps [`LISTEN_SPARE`] of the listener `badge`'s sockets listening (up to its backlog
    /// and the owner's share): a connection that arrives takes one, the next poll adds one.
    fn top_up(&mut self, badge: u64, owner: u64) {
        loop {
            let Some(Entry {
                sock:
                    Sock::Listener {
                        port,
                        pending,
                        backlog,
                    },
                ..
            }) = self.socks.get(&badge)
            else {
                return;
            };
            let free = pending
                .iter()
                .filter(|&&h| self.sockets.get::<tcp::Socket>(h).state() == tcp::State::Listen)
                .count();
            if free >= LISTEN_SPARE || pending.len() >= *backlog || self.room_for(owner, 1).is_err()
            {
                return;
            }
            let port = *port;
            let Ok(fresh) = self.listen_socket(port) else {
                return;
            };
            self.charge(owner, 1);
            if let Some(Entry {
                sock: Sock::Listener { pending, .. },
                ..
            }) = self.socks.get_mut(&badge)
            {
                pending.push(fresh);
            }
        }
    }

    fn listen_socket(&mut self, port: u16) -> Result<Handle, SockError> {
        self.room(1)?;
        let mut s = tcp_socket();
        s.listen(IpListenEndpoint { addr: None, port })
            .map_err(|_| SockError::Invalid)?;
        self.count += 1;
        Ok(self.sockets.add(set_of_port(port), s))
    }

    fn release(&mut self, s: Sock) {
        match s {
            Sock::Tcp { h, bound, .. } => {
                if let Some(p) = bound {
                    self.tcp_ports.remove(&p);
                }
                let sock = self.sockets.get_mut::<tcp::Socket>(h);
                if sock.recv_queue() > 0 {
                    // Closed with data it never read: Linux resets the connection (RFC 2525
                    // 2.17), so the peer learns its data was lost. The reset goes out with the
                    // next poll; the socket is removed after it.
                    sock.abort();
                    self.closing.push(h);
                    return;
                }
                sock.close();
                if sock.state() == tcp::State::Closed {
                    self.sockets.remove(h);
                    self.count -= 1;
                } else {
                    self.closing.push(h);
                }
            }
            Sock::Listener { port, pending, .. } => {
                self.listeners -= 1;
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

/// The set a socket's smoltcp sockets live in.
fn set_of(s: &Sock) -> usize {
    match *s {
        Sock::Tcp { h, .. } | Sock::Udp { h, .. } => h.set(),
        Sock::Listener { port, .. } => set_of_port(port),
    }
}

/// The socket whose capability carries `badge` (borrowing the socket table only).
fn sock_of(socks: &mut BTreeMap<u64, Entry>, badge: u64) -> Result<&mut Sock, SockError> {
    socks
        .get_mut(&badge)
        .map(|e| &mut e.sock)
        .ok_or(SockError::BadSocket)
}

/// What a socket is ready for now.
fn ready_of(sockets: &Sockets, s: &Sock) -> Ready {
    match *s {
        Sock::Tcp {
            h,
            connecting,
            connected,
            shut,
            ..
        } => {
            let t = sockets.get::<tcp::Socket>(h);
            let mut r = Ready::EMPTY;
            let st = t.state();
            if t.can_recv() {
                r |= Ready::READABLE;
            }
            if t.can_send() {
                r |= Ready::WRITABLE;
            }
            let reset = connected && !shut && st == tcp::State::Closed;
            if (connecting || reset) && st == tcp::State::Closed {
                r |= Ready::ERROR | Ready::HANGUP | Ready::READABLE | Ready::WRITABLE;
            } else if !t.may_recv()
                && !matches!(
                    st,
                    tcp::State::Closed
                        | tcp::State::SynSent
                        | tcp::State::SynReceived
                        | tcp::State::Listen
                )
            {
                r |= Ready::READABLE | Ready::HANGUP;
            }
            r
        }
        Sock::Listener { ref pending, .. } => {
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
        Sock::Udp { h, .. } => {
            let u = sockets.get::<udp::Socket>(h);
            let mut r = Ready::EMPTY;
            if u.can_recv() {
                r |= Ready::READABLE;
            }
            if u.can_send() {
                r |= Ready::WRITABLE;
            }
            r
        }
    }
}

static STACK: spin::Mutex<Option<Stack>> = spin::Mutex::new(None);

/// A channel's buffer: [`CHANNEL`] bytes of our heap, page-aligned, mapped by the client that
/// asked for the channel (`dataspace.map` on the channel). The client may change the bytes at
/// any time; that only changes its own data.
struct ChanBuf(*mut u8);

impl ChanBuf {
    fn layout() -> core::alloc::Layout {
        // A constant, valid size and alignment.
        core::alloc::Layout::from_size_align(CHANNEL, PAGE).unwrap()
    }
    fn new() -> Option<ChanBuf> {
        // SAFETY: non-zero size.
        let p = unsafe { alloc::alloc::alloc_zeroed(Self::layout()) };
        (!p.is_null()).then_some(ChanBuf(p))
    }
    fn addr(&self) -> u64 {
        self.0 as u64
    }
    /// `len` bytes from `off`, if both lie within the buffer (never trusted: the client names
    /// them).
    fn range(&self, off: u32, len: u32) -> Result<&'static mut [u8], SockError> {
        let end = off as usize + len as usize;
        if end > CHANNEL {
            return Err(SockError::Invalid);
        }
        // SAFETY: within our allocation (checked above), which lives as long as the channel;
        // the slice is used only during the one call that asked for it, before the channel can
        // be dropped (only `no_senders`, on the same thread, drops it).
        Ok(unsafe { core::slice::from_raw_parts_mut(self.0.add(off as usize), len as usize) })
    }
}

impl Drop for ChanBuf {
    fn drop(&mut self) {
        // The client's mapping goes first: nobody may see the pages once they are reused.
        let _ = sys::unmap(self.addr(), (CHANNEL / PAGE) as u64, 0);
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { alloc::alloc::dealloc(self.0, Self::layout()) };
    }
}

/// A channel: the socket (its badge) whose bulk calls it carries, and its buffer.
struct Channel {
    sock: u64,
    /// The client (manifest badge) of its socket, whose share of channels it counts against.
    owner: u64,
    buf: ChanBuf,
}

/// The socket endpoint's state: the stack itself is behind `STACK`.
struct Front {
    after: AfterReply,
    /// Our endpoint (unbadged: socket capabilities are minted from it) and the notice
    /// capability their `NO_SENDERS` messages come through.
    ep: u64,
    notice: u64,
    free_slots: Vec<u64>,
    /// Channels by their capability's badge.
    chans: BTreeMap<u64, Channel>,
    next_chan: u64,
    /// The network manager's badge (config `manager`): the one caller `grant` answers.
    manager: Option<u64>,
    /// Loopback fusion: the pipe ends a connector offered (`connect_fused`) for the socket
    /// its listener will accept, by the connector's local port, until `fused_ends` takes them.
    offers: BTreeMap<u16, Offer>,
}

/// A fused connection's ends waiting for its accepted socket (docs/net.md, "Loopback fusion").
struct Offer {
    /// The listener's port (the accepted socket's local port).
    dest: u16,
    /// The connector's socket (its badge), while it may still be connecting.
    connector: u64,
    /// Our copies of the ends: what the acceptor reads and what it writes.
    read: u64,
    write: u64,
}

impl Front {
    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// A capability for the new socket `sock` of `owner`'s, handed to the caller with the
    /// reply (our copy goes after it). Room was checked.
    fn mint(&mut self, s: &mut Stack, owner: u64, sock: Sock) -> Result<u64, SockError> {
        let badge = SOCK_BIT | s.next_id;
        let slot = self.slot();
        if sys::cap_mint_watched(
            self.ep,
            slot,
            badge,
            rights::SEND | rights::GRANT,
            self.notice,
        )
        .is_err()
        {
            self.free_slots.push(slot);
            s.release(sock);
            return Err(SockError::NoSpace);
        }
        s.next_id = (s.next_id + 1) & (CHAN_BIT - 1);
        s.sockets.enter(set_of(&sock), badge);
        s.socks.insert(
            badge,
            Entry {
                sock,
                owner,
                watchers: Vec::new(),
                last: Ready::EMPTY,
            },
        );
        s.charge(owner, 1);
        self.after.delete(slot);
        Ok(slot)
    }
}

/// Runs `f` on the stack, then polls (so what the call queued goes out now) and has the poll
/// thread recompute its timer.
fn with_stack<T>(f: impl FnOnce(&mut Stack) -> Result<T, SockError>) -> Result<T, SockError> {
    let mut g = STACK.lock();
    let s = g.as_mut().ok_or(SockError::Unreachable)?;
    let r = f(s);
    if core::mem::take(&mut s.udp_fast) {
        return r;
    }
    if let Some(h) = s.udp_queued.take() {
        // Sent alone, and nothing left queued: no timer of smoltcp's changed, so the poll
        // thread's stands. Otherwise (no slot, an address to resolve first, another socket's
        // segment in the same round) the timer is found again below.
        if s.poll_sent(h) && s.sockets.get::<udp::Socket>(h).send_queue() == 0 {
            return r;
        }
    } else {
        s.poll();
    }
    // The poll thread's timer: woken only when smoltcp now wants a poll before the time the
    // thread waits for (a wake and a whole poll more per call, otherwise).
    let want = s.next_poll();
    drop(g);
    if want < POLL_DEADLINE.load(Ordering::Relaxed) {
        let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), WAKE_CALL);
    }
    r
}

/// Runs a receiving call `f` on socket `badge`: it polls as [`with_stack`] does unless `f` made
/// no traffic (`quiet`: it found nothing, or took a UDP datagram), when only the socket's
/// readiness is taken again (so that the next arrival still wakes its waiters). A poll costs
/// ~1,500 instructions and the timer's recomputation more: a blocking receive's first look
/// and every datagram taken were paying for polls that had nothing to do.
fn with_stack_recv<T>(
    badge: u64,
    f: impl FnOnce(&mut Stack) -> Result<T, SockError>,
    quiet: impl FnOnce(&Stack, &Result<T, SockError>) -> bool,
) -> Result<T, SockError> {
    let mut g = STACK.lock();
    let s = g.as_mut().ok_or(SockError::Unreachable)?;
    let r = f(s);
    if !quiet(s, &r) {
        drop(g);
        // The rest of `with_stack`: the poll and the poll thread's timer.
        return with_stack(|_| r);
    }
    if let Some(e) = s.socks.get_mut(&badge) {
        e.last = ready_of(&s.sockets, &e.sock);
    }
    r
}

impl socket::Server for Front {
    fn create(&mut self, badge: u64, kind: SockKind) -> Result<u64, SockError> {
        if badge & (SOCK_BIT | NOTICE_BADGE) != 0 {
            return Err(SockError::BadSocket);
        }
        with_stack(|s| {
            s.room_for(badge, 1)?;
            let sock = match kind {
                SockKind::Tcp => Sock::Tcp {
                    h: s.sockets.add(CONTROL_SET, tcp_socket()),
                    bound: None,
                    connecting: false,
                    connected: false,
                    shut: false,
                },
                SockKind::Udp => Sock::Udp {
                    h: s.sockets.add(CONTROL_SET, udp_socket()),
                    port: None,
                    peer: None,
                    pending: Vec::new(),
                },
            };
            s.count += 1;
            self.mint(s, badge, sock)
        })
    }

    fn grant(&mut self, badge: u64, client: u32, rights: u32) -> Result<u64, SockError> {
        if self.manager != Some(badge) {
            return Err(SockError::Denied);
        }
        let slot = self.slot();
        // Not watched: a client capability holds nothing of the stack's; its sockets do.
        if sys::cap_mint(
            self.ep,
            slot,
            grant::granted(client, rights),
            rights::SEND | rights::GRANT,
        )
        .is_err()
        {
            self.free_slots.push(slot);
            return Err(SockError::NoSpace);
        }
        self.after.delete(slot);
        Ok(slot)
    }

    fn grant_sub(&mut self, badge: u64, sub: u32) -> Result<u64, SockError> {
        if badge & (SOCK_BIT | NOTICE_BADGE) != 0 {
            return Err(SockError::BadSocket);
        }
        let sub_badge = with_stack(|s| {
            grant::granted_sub(badge, sub, &s.privileged).map_err(|e| match e {
                grant::SubRefusal::Denied => SockError::Denied,
                grant::SubRefusal::Invalid => SockError::Invalid,
            })
        })?;
        let slot = self.slot();
        // Not watched, as `grant`'s: the sub-account's sockets hold the stack's memory.
        if sys::cap_mint(self.ep, slot, sub_badge, rights::SEND | rights::GRANT).is_err() {
            self.free_slots.push(slot);
            return Err(SockError::NoSpace);
        }
        self.after.delete(slot);
        Ok(slot)
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

impl sock::Server for Front {
    fn register(&mut self, badge: u64, wake: u64, bits: u64) -> Result<(), SockError> {
        if bits == 0 {
            return Err(SockError::Invalid);
        }
        let copy = self.slot();
        if sys::cap_copy(wake, copy).is_err() {
            self.free_slots.push(copy);
            return Err(SockError::Invalid);
        }
        let mut g = STACK.lock();
        let Some(e) = g.as_mut().and_then(|s| s.socks.get_mut(&badge)) else {
            drop(g);
            self.free_slot(copy);
            return Err(SockError::BadSocket);
        };
        let old = (e.watchers.len() >= MAX_WATCHERS).then(|| e.watchers.remove(0));
        e.watchers.push((copy, bits));
        // Whatever it is ready for now counts as new for the newcomer.
        e.last = Ready::EMPTY;
        // The poll this wakes looks at it.
        let set = set_of(&e.sock);
        if let Some(s) = g.as_mut() {
            s.sockets.touch(set);
        }
        drop(g);
        if let Some((slot, _)) = old {
            self.free_slot(slot);
        }
        let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), WAKE_CALL);
        Ok(())
    }

    fn bind(&mut self, badge: u64, addr: u32, port: u16) -> Result<(), SockError> {
        with_stack(|s| {
            let owner = s.socks.get(&badge).ok_or(SockError::BadSocket)?.owner;
            if !grant::may_bind(grant::rights(owner, &s.privileged), port) {
                return Err(SockError::Denied);
            }
            if addr != 0 && addr != s.addr {
                return Err(SockError::Invalid);
            }
            let udp = matches!(s.sock(badge)?, Sock::Udp { .. });
            let port = if port == 0 { s.ephemeral(udp)? } else { port };
            let used = if udp { &s.udp_ports } else { &s.tcp_ports };
            if used.contains(&port) {
                return Err(SockError::AddrInUse);
            }
            let h = match s.sock(badge)? {
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
                Some(_) => {
                    let h = s.rehome(badge, port)?;
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

    fn listen(&mut self, badge: u64, backlog: u32) -> Result<(), SockError> {
        with_stack(|s| {
            let owner = s.socks.get(&badge).ok_or(SockError::BadSocket)?.owner;
            let bound = match s.sock(badge)? {
                Sock::Tcp {
                    bound,
                    connecting: false,
                    connected: false,
                    ..
                } => *bound,
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
            let h = s.rehome(badge, port)?;
            s.sockets
                .get_mut::<tcp::Socket>(h)
                .listen(IpListenEndpoint { addr: None, port })
                .map_err(|_| SockError::Invalid)?;
            // The backlog's places are the owner's sockets too: as many as its share allows, made
            // as they are needed (`top_up`, after each poll).
            *s.sock(badge)? = Sock::Listener {
                port,
                pending: vec![h],
                backlog: backlog.clamp(1, MAX_BACKLOG) as usize,
            };
            s.listeners += 1;
            s.top_up(badge, owner);
            Ok(())
        })
    }

    fn accept(&mut self, badge: u64) -> Result<AcceptOut, SockError> {
        with_stack(|s| {
            let owner = s.socks.get(&badge).ok_or(SockError::BadSocket)?.owner;
            let h = match sock_of(&mut s.socks, badge)? {
                Sock::Listener { pending, .. } => {
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
                    pending.swap_remove(i)
                }
                _ => return Err(SockError::Invalid),
            };
            // Out of the listener's set: the connection's segments go to its own.
            let h = s.pin_conn(h);
            // The accepted socket leaves the backlog (its share moves to the new socket); the
            // poll after this call tops the free listeners up.
            s.charge(owner, -1);
            let remote = s.sockets.get::<tcp::Socket>(h).remote_endpoint();
            let conn = self.mint(
                s,
                owner,
                Sock::Tcp {
                    h,
                    bound: None,
                    connecting: false,
                    connected: true,
                    shut: false,
                },
            )?;
            let (addr, port) = remote.map_or((0, 0), |e| (number(e.addr), e.port));
            Ok(AcceptOut { conn, addr, port })
        })
    }

    fn connect(&mut self, badge: u64, addr: u32, port: u16) -> Result<(), SockError> {
        with_stack(|s| {
            let remote = endpoint(addr, port);
            match sock_of(&mut s.socks, badge)? {
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
            let local = match s.sock(badge)? {
                Sock::Tcp { bound: Some(p), .. } => *p,
                _ => s.ephemeral(false)?,
            };
            let h = s.rehome(badge, local)?;
            let Sock::Tcp { connecting, .. } = s.sock(badge)? else {
                return Err(SockError::Invalid);
            };
            *connecting = true;
            let cx = s.iface.context();
            if s.sockets
                .get_mut::<tcp::Socket>(h)
                .connect(cx, remote, local)
                .is_err()
            {
                if let Sock::Tcp { connecting, .. } = s.sock(badge)? {
                    *connecting = false;
                }
                return Err(SockError::Unreachable);
            }
            // Its endpoints are known now: the connection goes to its own set before its SYN
            // does, so that the answer finds it there.
            let pinned = s.pin_conn(h);
            if let Sock::Tcp { h, .. } = s.sock(badge)? {
                *h = pinned;
            }
            if pinned.set() != h.set() {
                s.sockets.leave(h.set(), badge);
                s.sockets.enter(pinned.set(), badge);
            }
            Err(SockError::WouldBlock)
        })
    }

    fn send_part(&mut self, badge: u64, data: &[u8]) -> Result<u32, SockError> {
        // Taken whole: more follows at once, the last piece's `send` polls.
        with_stack_recv(
            badge,
            |s| match s.sock(badge)? {
                &mut Sock::Tcp { h, connecting, .. } => tcp_send(s, h, connecting, data),
                _ => Err(SockError::Invalid),
            },
            |_, r| matches!(r, Ok(n) if *n as usize == data.len()),
        )
    }

    fn send(&mut self, badge: u64, data: &[u8]) -> Result<u32, SockError> {
        with_stack(|s| match s.sock(badge)? {
            &mut Sock::Tcp { h, connecting, .. } => tcp_send(s, h, connecting, data),
            &mut Sock::Udp { h, peer, port, .. } => {
                let peer = peer.ok_or(SockError::NotConnected)?;
                not_fused(s, badge)?;
                udp_send(s, badge, h, port, peer, data)
            }
            Sock::Listener { .. } => Err(SockError::NotConnected),
        })
    }

    fn recv(&mut self, badge: u64, max: u32) -> Result<RecvOut, SockError> {
        let mut data = Bytes::new();
        let n = (max as usize).min(data.buf_mut().len());
        let (got, eof) = recv_call(badge, &mut data.buf_mut()[..n])?;
        data.set_len(got);
        Ok(RecvOut { data, eof })
    }

    fn send_to(&mut self, badge: u64, addr: u32, port: u16, data: &[u8]) -> Result<u32, SockError> {
        with_stack(|s| match s.sock(badge)? {
            &mut Sock::Udp {
                h,
                port: bound,
                peer,
                ..
            } => {
                // To the fused peer: through the ends.
                if peer == Some(endpoint(addr, port)) {
                    not_fused(s, badge)?;
                }
                udp_send(s, badge, h, bound, endpoint(addr, port), data)
            }
            _ => Err(SockError::Invalid),
        })
    }

    fn recv_from(&mut self, badge: u64, max: u32) -> Result<RecvFromOut, SockError> {
        let mut data = Bytes::new();
        let n = (max as usize).min(data.buf_mut().len());
        let (got, addr, port) = recv_from_call(badge, &mut data.buf_mut()[..n])?;
        data.set_len(got);
        Ok(RecvFromOut { data, addr, port })
    }

    fn send_more(&mut self, badge: u64, first: bool, data: &[u8]) -> Result<(), SockError> {
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        match s.sock(badge)? {
            Sock::Udp { pending, .. } => {
                if first {
                    pending.clear();
                }
                if pending.len() + data.len() > MAX_DATAGRAM as usize {
                    pending.clear();
                    return Err(SockError::Invalid);
                }
                pending.extend_from_slice(data);
                Ok(())
            }
            _ => Err(SockError::Invalid),
        }
    }

    fn peek_from(&mut self, badge: u64, offset: u32) -> Result<PeekFromOut, SockError> {
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        let h = match s.sock(badge)? {
            &mut Sock::Udp { h, .. } => h,
            _ => return Err(SockError::Invalid),
        };
        not_fused(s, badge)?;
        let (d, meta) = s
            .sockets
            .get_mut::<udp::Socket>(h)
            .peek()
            .map_err(|_| SockError::WouldBlock)?;
        let mut data = Bytes::new();
        let from = (offset as usize).min(d.len());
        let n = (d.len() - from).min(data.buf_mut().len());
        data.buf_mut()[..n].copy_from_slice(&d[from..from + n]);
        data.set_len(n);
        Ok(PeekFromOut {
            data,
            len: d.len() as u32,
            addr: number(meta.endpoint.addr),
            port: meta.endpoint.port,
        })
    }

    fn channel(&mut self, badge: u64) -> Result<u64, SockError> {
        if badge & CHAN_BIT != 0 {
            return Err(SockError::Invalid);
        }
        let owner = {
            let g = STACK.lock();
            let s = g.as_ref().ok_or(SockError::Unreachable)?;
            s.socks.get(&badge).ok_or(SockError::BadSocket)?.owner
        };
        if self.chans.len() >= MAX_CHANNELS
            || self.chans.values().filter(|c| c.owner == owner).count() >= MAX_CLIENT_CHANNELS
        {
            return Err(SockError::NoSpace);
        }
        let buf = ChanBuf::new().ok_or(SockError::NoSpace)?;
        let chan = SOCK_BIT | CHAN_BIT | self.next_chan;
        let slot = self.slot();
        if sys::cap_mint_watched(self.ep, slot, chan, rights::SEND, self.notice).is_err() {
            self.free_slots.push(slot);
            return Err(SockError::NoSpace);
        }
        self.next_chan = (self.next_chan + 1) & (CHAN_BIT - 1);
        self.chans.insert(
            chan,
            Channel {
                sock: badge,
                owner,
                buf,
            },
        );
        self.after.delete(slot);
        Ok(slot)
    }

    fn send_buf(&mut self, badge: u64, off: u32, len: u32, more: bool) -> Result<u32, SockError> {
        let (sock, data) = self.channel_range(badge, off, len)?;
        if more {
            sock::Server::send_part(self, sock, data)
        } else {
            sock::Server::send(self, sock, data)
        }
    }

    fn recv_buf(&mut self, badge: u64, off: u32, max: u32) -> Result<RecvBufOut, SockError> {
        let (sock, buf) = self.channel_range(badge, off, max)?;
        let (len, eof) = recv_call(sock, buf)?;
        Ok(RecvBufOut {
            len: len as u32,
            eof,
        })
    }

    fn send_to_buf(
        &mut self,
        badge: u64,
        addr: u32,
        port: u16,
        off: u32,
        len: u32,
    ) -> Result<u32, SockError> {
        let (sock, data) = self.channel_range(badge, off, len)?;
        sock::Server::send_to(self, sock, addr, port, data)
    }

    fn recv_from_buf(
        &mut self,
        badge: u64,
        off: u32,
        max: u32,
    ) -> Result<RecvFromBufOut, SockError> {
        let (sock, buf) = self.channel_range(badge, off, max)?;
        let (len, addr, port) = recv_from_call(sock, buf)?;
        Ok(RecvFromBufOut {
            len: len as u32,
            addr,
            port,
        })
    }

    fn ready(&mut self, badge: u64) -> Result<Ready, SockError> {
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        let e = s.socks.get(&badge).ok_or(SockError::BadSocket)?;
        let fused = match s.udp_fused.contains_key(&badge) {
            true => Ready::FUSED,
            false => Ready::EMPTY,
        };
        Ok(ready_of(&s.sockets, &e.sock) | fused)
    }

    fn name(&mut self, badge: u64) -> Result<NameOut, SockError> {
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        let me = s.addr;
        let (local, remote) = match s.sock(badge)? {
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

    fn shutdown(&mut self, badge: u64) -> Result<(), SockError> {
        with_stack(|s| match s.sock(badge)? {
            Sock::Tcp { h, shut, .. } => {
                *shut = true;
                let h = *h;
                s.sockets.get_mut::<tcp::Socket>(h).close();
                Ok(())
            }
            _ => Err(SockError::Invalid),
        })
    }

    fn connect_fused(
        &mut self,
        badge: u64,
        addr: u32,
        port: u16,
        read: u64,
        write: u64,
    ) -> Result<bool, SockError> {
        if self.udp_sock(badge)? {
            return self.connect_fused_udp(badge, addr, port, read, write);
        }
        {
            let mut g = STACK.lock();
            let s = g.as_mut().ok_or(SockError::Unreachable)?;
            let ours = LOOPBACK.contains_addr(&Ipv4Address::from_bits(addr))
                || (addr != 0 && addr == s.addr);
            let listened = s
                .socks
                .values()
                .any(|e| matches!(e.sock, Sock::Listener { port: p, .. } if p == port));
            let fresh = matches!(
                s.socks.get(&badge).map(|e| &e.sock),
                Some(Sock::Tcp {
                    connecting: false,
                    connected: false,
                    ..
                })
            );
            if !(ours && listened && fresh) {
                return Ok(false);
            }
            if self.offers.len() >= MAX_OFFERS {
                self.forget_dead_offers(s);
                if self.offers.len() >= MAX_OFFERS {
                    return Ok(false);
                }
            }
        }
        let (r, w) = (self.slot(), self.slot());
        if sys::cap_copy(read, r).is_err() || sys::cap_copy(write, w).is_err() {
            self.free_slot(r);
            self.free_slot(w);
            return Err(SockError::Invalid);
        }
        match self.connect(badge, addr, port) {
            Err(SockError::WouldBlock) | Ok(()) => {}
            Err(e) => {
                self.free_slot(r);
                self.free_slot(w);
                return Err(e);
            }
        }
        let local = {
            let mut g = STACK.lock();
            let s = g.as_mut().ok_or(SockError::Unreachable)?;
            match s.sock(badge)? {
                &mut Sock::Tcp { h, .. } => s
                    .sockets
                    .get::<tcp::Socket>(h)
                    .local_endpoint()
                    .map(|e| e.port),
                _ => None,
            }
        };
        let Some(local) = local else {
            self.free_slot(r);
            self.free_slot(w);
            return Ok(false);
        };
        let offer = Offer {
            dest: port,
            connector: badge,
            read: r,
            write: w,
        };
        if let Some(old) = self.offers.insert(local, offer) {
            self.free_slot(old.read);
            self.free_slot(old.write);
        }
        Ok(true)
    }

    fn fused_ends(&mut self, badge: u64) -> Result<sock::FusedEndsOut, SockError> {
        if self.udp_sock(badge)? {
            let ends = {
                let g = STACK.lock();
                let s = g.as_ref().ok_or(SockError::Unreachable)?;
                s.udp_fused.get(&badge).copied()
            };
            let (r, w) = ends.ok_or(SockError::NotConnected)?;
            // Copies: every holder of the socket takes them; ours stay with the socket.
            let (cr, cw) = (self.slot(), self.slot());
            if sys::cap_copy(r, cr).is_err() || sys::cap_copy(w, cw).is_err() {
                self.free_slot(cr);
                self.free_slot(cw);
                return Err(SockError::NoSpace);
            }
            self.after.delete(cr);
            self.after.delete(cw);
            return Ok(sock::FusedEndsOut {
                read: cr,
                write: cw,
            });
        }
        let key = {
            let mut g = STACK.lock();
            let s = g.as_mut().ok_or(SockError::Unreachable)?;
            match s.sock(badge)? {
                &mut Sock::Tcp { h, .. } => {
                    let t = s.sockets.get::<tcp::Socket>(h);
                    match (t.local_endpoint(), t.remote_endpoint()) {
                        (Some(l), Some(r)) => (r.port, l.port),
                        _ => return Err(SockError::NotConnected),
                    }
                }
                _ => return Err(SockError::NotConnected),
            }
        };
        match self.offers.get(&key.0) {
            Some(o) if o.dest == key.1 => {}
            _ => return Err(SockError::NotConnected),
        }
        let o = self.offers.remove(&key.0).ok_or(SockError::NotConnected)?;
        // Handed over: our copies go once the reply carried them.
        self.after.delete(o.read);
        self.after.delete(o.write);
        Ok(sock::FusedEndsOut {
            read: o.read,
            write: o.write,
        })
    }
}

impl Front {
    /// Whether `badge` is a UDP socket.
    fn udp_sock(&self, badge: u64) -> Result<bool, SockError> {
        let g = STACK.lock();
        let s = g.as_ref().ok_or(SockError::Unreachable)?;
        let e = s.socks.get(&badge).ok_or(SockError::BadSocket)?;
        Ok(matches!(e.sock, Sock::Udp { .. }))
    }

    /// `connect_fused` of UDP socket `badge` (bound) to `addr:port`: fused if a UDP socket of
    /// ours is bound there, connected to `badge`'s port, not fused yet, and neither socket has
    /// datagrams queued (so none is overtaken by one through the ends).
    fn connect_fused_udp(
        &mut self,
        badge: u64,
        addr: u32,
        port: u16,
        read: u64,
        write: u64,
    ) -> Result<bool, SockError> {
        let (r, w) = (self.slot(), self.slot());
        let mut g = STACK.lock();
        let s = g.as_mut().ok_or(SockError::Unreachable)?;
        let ours = |s: &Stack, a: u32| {
            LOOPBACK.contains_addr(&Ipv4Address::from_bits(a)) || (a != 0 && a == s.addr)
        };
        let (my_port, my_h) = match s.socks.get(&badge).map(|e| &e.sock) {
            Some(&Sock::Udp {
                port: Some(p), h, ..
            }) => (p, h),
            _ => {
                drop(g);
                self.free_slots.extend([r, w]);
                return Ok(false);
            }
        };
        let target = s.socks.iter().find_map(|(&b, e)| match e.sock {
            Sock::Udp {
                port: Some(p),
                peer: Some(peer),
                h,
                ..
            } if p == port && peer.port == my_port && ours(s, number(peer.addr)) => Some((b, h)),
            _ => None,
        });
        let fusable = ours(s, addr)
            && !s.udp_fused.contains_key(&badge)
            && target.is_some_and(|(b, h)| {
                b != badge
                    && !s.udp_fused.contains_key(&b)
                    && !s.sockets.get::<udp::Socket>(h).can_recv()
                    && !s.sockets.get::<udp::Socket>(my_h).can_recv()
            });
        let Some((peer_badge, _)) = target.filter(|_| fusable) else {
            drop(g);
            self.free_slots.extend([r, w]);
            return Ok(false);
        };
        if sys::cap_copy(read, r).is_err() || sys::cap_copy(write, w).is_err() {
            drop(g);
            self.free_slot(r);
            self.free_slot(w);
            return Err(SockError::Invalid);
        }
        if let Some(Sock::Udp { peer, .. }) = s.socks.get_mut(&badge).map(|e| &mut e.sock) {
            *peer = Some(endpoint(addr, port));
        }
        s.udp_fused.insert(peer_badge, (r, w));
        // A holder waiting on the peer learns at once (its next call answers `Fused`).
        let watchers: Vec<(u64, u64)> = s
            .socks
            .get(&peer_badge)
            .map_or(Vec::new(), |e| e.watchers.clone());
        drop(g);
        for (wake, bits) in watchers {
            let _ = sys::notify_signal(wake, bits);
        }
        Ok(true)
    }

    /// Drops the offers nobody will take: the connector's socket is not connecting any more
    /// and no listener holds a connection from its port (refused, or the listener went).
    fn forget_dead_offers(&mut self, s: &Stack) {
        // The remote ports of every connection (waiting in a backlog, or accepted and not
        // asked yet): an offer keyed by one of them may still be taken.
        let mut waiting = BTreeSet::new();
        let mut note = |h: Handle| {
            if let Some(r) = s.sockets.get::<tcp::Socket>(h).remote_endpoint() {
                waiting.insert(r.port);
            }
        };
        for e in s.socks.values() {
            match &e.sock {
                Sock::Listener { pending, .. } => pending.iter().for_each(|&h| note(h)),
                &Sock::Tcp { h, .. } => note(h),
                Sock::Udp { .. } => {}
            }
        }
        let dead: Vec<u16> = self
            .offers
            .iter()
            .filter(|(port, o)| {
                let connecting = matches!(
                    s.socks.get(&o.connector).map(|e| &e.sock),
                    Some(Sock::Tcp {
                        connecting: true,
                        ..
                    })
                );
                !connecting && !waiting.contains(port)
            })
            .map(|(p, _)| *p)
            .collect();
        for p in dead {
            if let Some(o) = self.offers.remove(&p) {
                self.free_slot(o.read);
                self.free_slot(o.write);
            }
        }
    }

    /// The socket a channel call on `badge` is for and `len` bytes from `off` of the channel's
    /// buffer (both checked: `Invalid` past its end, `BadSocket` on anything but a channel).
    fn channel_range(
        &self,
        badge: u64,
        off: u32,
        len: u32,
    ) -> Result<(u64, &'static mut [u8]), SockError> {
        let c = self.chans.get(&badge).ok_or(SockError::BadSocket)?;
        Ok((c.sock, c.buf.range(off, len)?))
    }

    fn free_slot(&mut self, slot: u64) {
        let _ = sys::cap_delete(slot);
        self.free_slots.push(slot);
    }
}

/// `Fused` for a UDP socket whose peer fused the pair: its data goes through the pipe ends.
fn not_fused(s: &Stack, badge: u64) -> Result<(), SockError> {
    match s.udp_fused.contains_key(&badge) {
        true => Err(SockError::Fused),
        false => Ok(()),
    }
}

/// One datagram from the UDP socket `h` (bound to a free port first if it is not yet).
fn udp_send(
    s: &mut Stack,
    badge: u64,
    h: Handle,
    bound: Option<u16>,
    to: IpEndpoint,
    data: &[u8],
) -> Result<u32, SockError> {
    let mut h = h;
    if bound.is_none() {
        let p = s.ephemeral(true)?;
        h = s.rehome(badge, p)?;
        s.sockets
            .get_mut::<udp::Socket>(h)
            .bind(p)
            .map_err(|_| SockError::Invalid)?;
        s.udp_ports.insert(p);
        if let Sock::Udp { port, .. } = s.sock(badge)? {
            *port = Some(p);
        }
    }
    // The start a `send_more` left, if any, goes first (and is used up either way: a client
    // sends every part again when it retries).
    let pending = match s.sock(badge)? {
        Sock::Udp { pending, .. } if !pending.is_empty() => core::mem::take(pending),
        _ => Vec::new(),
    };
    if data.len() > MAX_DATAGRAM as usize {
        return Err(SockError::Invalid);
    }
    let whole;
    let data = if pending.is_empty() {
        data
    } else {
        whole = [pending.as_slice(), data].concat();
        if whole.len() > MAX_DATAGRAM as usize {
            return Err(SockError::Invalid);
        }
        &whole[..]
    };
    if s.send_fast(h, to, data) {
        s.udp_fast = true;
        return Ok(data.len() as u32);
    }
    match s.sockets.get_mut::<udp::Socket>(h).send_slice(data, to) {
        Ok(()) => {
            s.udp_queued = Some(h);
            Ok(data.len() as u32)
        }
        Err(udp::SendError::BufferFull) => Err(SockError::WouldBlock),
        Err(udp::SendError::Unaddressable) => Err(SockError::Unreachable),
    }
}

/// Queues `data` on the TCP socket `h`: how much it took.
fn tcp_send(s: &mut Stack, h: Handle, connecting: bool, data: &[u8]) -> Result<u32, SockError> {
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

/// A `recv` on socket `badge` into `buf`: (bytes, end of stream).
fn recv_call(badge: u64, buf: &mut [u8]) -> Result<(usize, bool), SockError> {
    let before = core::cell::Cell::new(0);
    with_stack_recv(
        badge,
        |s| {
            before.set(recv_fill(s, badge));
            recv_into(s, badge, buf)
        },
        |s, r| quiet_recv(s, badge, r.as_ref().err(), before.get()),
    )
}

/// Takes what socket `badge` has into `buf`: (bytes, end of stream).
fn recv_into(s: &mut Stack, badge: u64, buf: &mut [u8]) -> Result<(usize, bool), SockError> {
    match s.sock(badge)? {
        &mut Sock::Tcp {
            h,
            connecting,
            connected,
            shut,
            ..
        } => {
            let t = s.sockets.get_mut::<tcp::Socket>(h);
            if t.can_recv() {
                return match t.recv_slice(buf) {
                    Ok(got) => Ok((got, false)),
                    Err(tcp::RecvError::Finished) => Ok((0, true)),
                    Err(_) => Err(SockError::ConnReset),
                };
            }
            match t.state() {
                tcp::State::Closed if connecting => Err(SockError::ConnRefused),
                // A connection that ended without our FIN: the peer reset it (Linux's
                // ECONNRESET; what arrived before the reset was read first) — unless the
                // peer's FIN came first: the stream had ended, and Linux reads end of file
                // whatever follows it (smoltcp keeps that a FIN came; an empty receive says so).
                tcp::State::Closed if connected && !shut => match t.recv_slice(&mut []) {
                    Err(tcp::RecvError::Finished) => Ok((0, true)),
                    _ => Err(SockError::ConnReset),
                },
                tcp::State::SynSent | tcp::State::SynReceived | tcp::State::Listen => {
                    Err(SockError::WouldBlock)
                }
                _ if !t.may_recv() => Ok((0, true)),
                _ => Err(SockError::WouldBlock),
            }
        }
        &mut Sock::Udp { h, .. } => udp_recv(s, h, buf).map(|(got, _, _)| (got, false)),
        Sock::Listener { .. } => Err(SockError::NotConnected),
    }
}

/// A `recv_from` on socket `badge` into `buf`: (bytes, source address, source port).
fn recv_from_call(badge: u64, buf: &mut [u8]) -> Result<(usize, u32, u16), SockError> {
    with_stack_recv(
        badge,
        |s| match s.sock(badge)? {
            &mut Sock::Udp { h, .. } => {
                not_fused(s, badge)?;
                udp_recv(s, h, buf)
            }
            _ => Err(SockError::Invalid),
        },
        |s, r| quiet_recv(s, badge, r.as_ref().err(), 0),
    )
}

/// Whether a receive on `badge` that ended with `err` made no traffic: it found nothing
/// (`WouldBlock`), it took a UDP datagram, or it took TCP data and the receive buffer is still
/// at least half full or already was below half before (`before`: its fill then) and is not
/// empty: the window update waits until the reader has drained half of the buffer or all of
/// it (one or two updates per buffer, not one per call).
fn quiet_recv(s: &Stack, badge: u64, err: Option<&SockError>, before: usize) -> bool {
    if let Some(e) = err {
        return *e == SockError::WouldBlock;
    }
    match s.socks.get(&badge).map(|e| &e.sock) {
        Some(Sock::Udp { .. }) => true,
        Some(&Sock::Tcp { h, .. }) => {
            let t = s.sockets.get::<tcp::Socket>(h);
            let (after, half) = (t.recv_queue(), t.recv_capacity() / 2);
            after > 0 && (after >= half || before < half)
        }
        _ => false,
    }
}

/// The fill of `badge`'s TCP receive buffer (0 for any other socket).
fn recv_fill(s: &Stack, badge: u64) -> usize {
    match s.socks.get(&badge).map(|e| &e.sock) {
        Some(&Sock::Tcp { h, .. }) => s.sockets.get::<tcp::Socket>(h).recv_queue(),
        _ => 0,
    }
}

/// One datagram of the UDP socket `h` into `buf` (cut to its length): bytes, source.
fn udp_recv(s: &mut Stack, h: Handle, buf: &mut [u8]) -> Result<(usize, u32, u16), SockError> {
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
        if m.badge & CHAN_BIT != 0 && m.tag.label() >= DATASPACE_LABELS {
            dataspace::handle(self, m, next)
        } else if m.badge & SOCK_BIT != 0 {
            sock::handle(self, m, next)
        } else {
            socket::handle(self, m, next)
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
    /// The last copy of a socket's capability is gone: the socket closes (gracefully for a
    /// connection), its registrations go.
    fn no_senders(&mut self, badge: u64) {
        if badge & DRIVER_TOKEN != 0 {
            // The live session's token: the driver died or ended the session. The poll thread
            // attaches again once the driver answers (an older session's token: nothing).
            let mut g = STACK.lock();
            if TOKEN.load(Ordering::Relaxed) == badge {
                TOKEN.store(0, Ordering::Relaxed);
                if let Some(s) = g.as_mut() {
                    let kick = s.link.detach();
                    if kick != 0 {
                        let _ = sys::cap_delete(kick);
                    }
                }
                drop(g);
                println!(
                    "netstack: the driver's session {} ended: attaching again when it answers",
                    badge & !DRIVER_TOKEN
                );
                let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), WAKE_CALL);
            }
            return;
        }
        if badge & CHAN_BIT != 0 {
            // Its buffer is unmapped from the client and freed.
            self.chans.remove(&badge);
            return;
        }
        let mut g = STACK.lock();
        let Some(s) = g.as_mut() else { return };
        let Some(e) = s.socks.remove(&badge) else {
            return;
        };
        s.sockets.leave(set_of(&e.sock), badge);
        let mut fused: Vec<(u64, u64)> = s.udp_fused.remove(&badge).into_iter().collect();
        // A fused UDP pair ends with either socket: the ends kept for the other one (if it was
        // the one to take them) go, so its holders use smoltcp again (their library undoes the
        // pair once it read what the ring still held).
        if let Sock::Udp { port: Some(p), .. } = e.sock {
            let partners: Vec<u64> = s
                .udp_fused
                .keys()
                .copied()
                .filter(|b| {
                    matches!(s.socks.get(b).map(|e| &e.sock),
                        Some(Sock::Udp { peer: Some(peer), .. }) if peer.port == p)
                })
                .collect();
            for b in partners {
                fused.extend(s.udp_fused.remove(&b));
            }
        }
        let held = match &e.sock {
            Sock::Listener { pending, .. } => pending.len(),
            _ => 1,
        };
        s.charge(e.owner, -(held as isize));
        s.release(e.sock);
        s.poll();
        drop(g);
        for (slot, _) in e.watchers {
            self.free_slot(slot);
        }
        for (r, w) in fused {
            self.free_slot(r);
            self.free_slot(w);
        }
        let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), WAKE_CALL);
    }
}

/// A channel is also its buffer as a dataspace: `info` and `map`, nothing else.
impl dataspace::Server for Front {
    fn info(&mut self, badge: u64) -> Result<dataspace::InfoOut, DsError> {
        self.chans.get(&badge).ok_or(DsError::Invalid)?;
        Ok(dataspace::InfoOut {
            size: CHANNEL as u64,
            flags: DsFlags::WRITABLE,
        })
    }

    fn map(
        &mut self,
        badge: u64,
        offset: u64,
        dst: u64,
        pages: u64,
        flags: MapFlags,
    ) -> Result<Map, DsError> {
        let c = self.chans.get(&badge).ok_or(DsError::Invalid)?;
        if !offset.is_multiple_of(PAGE as u64)
            || !dst.is_multiple_of(PAGE as u64)
            || offset >= CHANNEL as u64
            || dst >= sawmill_abi::layout::USER_END
        {
            return Err(DsError::Invalid);
        }
        let left = (CHANNEL as u64 - offset) / PAGE as u64;
        let pages = pages.clamp(1, left);
        if dst
            .checked_add(pages * PAGE as u64)
            .is_none_or(|end| end > sawmill_abi::layout::USER_END)
        {
            return Err(DsError::Invalid);
        }
        Ok(Map {
            src: c.buf.addr() + offset,
            dst,
            pages,
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

/// What attaching to the driver takes: the first time, and again after it restarted.
struct Driver {
    nic: net::Client,
    /// Our endpoint (the token is minted from it) and the notice capability its `NO_SENDERS`
    /// comes through.
    ep: u64,
    notice: u64,
    /// The poll thread's notification, which the driver signals.
    wake: u64,
    /// Where the token is made before `attach` (emptied after it: the driver holds the only
    /// copy) and where the kick capability lands.
    token_slot: u64,
    kick_slot: u64,
}

impl Driver {
    /// Attaches the session memory to the driver, whose `info` said `window`, with a new token:
    /// its badge is [`TOKEN`] from now on. The kick capability is in `kick_slot` after it.
    fn attach(&self, window: u64) -> Result<u64, rpc::Error<NetError>> {
        let badge = DRIVER_TOKEN | (SESSIONS.fetch_add(1, Ordering::Relaxed) + 1);
        if sys::cap_mint_watched(self.ep, self.token_slot, badge, 0, self.notice).is_err() {
            return Err(rpc::Error::App(NetError::Invalid));
        }
        TOKEN.store(badge, Ordering::Relaxed);
        let region = Map {
            src: SESSION_AT,
            dst: window,
            pages: SESSION_PAGES as u64,
            flags: sawmill_abi::map::READ | sawmill_abi::map::WRITE,
        };
        let r = self.nic.attach(
            region,
            self.wake,
            WAKE_DRIVER,
            self.token_slot,
            self.kick_slot,
        );
        // Ours goes: the driver's copy is the only holder, so its end is the notice.
        let _ = sys::cap_delete(self.token_slot);
        r.map(|_| badge)
    }

    /// The session is gone (the token's notice, `Front::no_senders`): once the driver answers
    /// again (its next incarnation, in the same slot), the rings are emptied and the same memory
    /// attached to it. False if it is not there yet.
    fn reattach(&self) -> bool {
        let window = match self.nic.info() {
            Ok(i) if i.mac != 0 => i.window,
            _ => return false,
        };
        if let Some(s) = STACK.lock().as_mut() {
            s.link.reset();
        }
        let badge = match self.attach(window) {
            Ok(b) => b,
            Err(e) => {
                println!("netstack: attaching to the driver again failed: {:?}", e);
                return false;
            }
        };
        let mut g = STACK.lock();
        let Some(s) = g.as_mut() else { return false };
        // A notice that came meanwhile (the new driver died at once) cleared the token.
        if TOKEN.load(Ordering::Relaxed) != badge {
            let _ = sys::cap_delete(self.kick_slot);
            return false;
        }
        s.link.set_kick(self.kick_slot);
        println!(
            "netstack: attached to the driver again (session {})",
            badge & !DRIVER_TOKEN
        );
        true
    }
}

/// The poll thread: the driver's completions, smoltcp's timers, calls that changed them; and
/// attaching again to a driver that restarted (`driver`: None without a device).
fn poller(wake: u64, driver: Option<Driver>) -> ! {
    let mut retry_at = 0u64;
    loop {
        let (mut deadline, detached) = {
            let mut g = STACK.lock();
            let s = g.as_mut().expect("stack");
            s.poll();
            let mut d = s.next_poll();
            if s.link.tx_waiting() {
                // Out of send slots: the driver's completion wakes us; smoltcp's "now" for the
                // frames it could not send would only spin until then (other timers wait
                // `TX_WAIT_SLACK_MS` at most).
                let slack = TX_WAIT_SLACK_MS * 1000 * TICKS_PER_US.load(Ordering::Relaxed);
                d = d.max(sys::rdtsc().saturating_add(slack));
            }
            POLL_DEADLINE.store(d, Ordering::Relaxed);
            (d, !s.link.attached())
        };
        if let (Some(drv), true) = (&driver, detached) {
            if sys::rdtsc() >= retry_at {
                if drv.reattach() {
                    continue;
                }
                retry_at = sys::rdtsc() + REATTACH_MS * 1000 * TICKS_PER_US.load(Ordering::Relaxed);
            }
            deadline = deadline.min(retry_at);
        }
        if deadline == u64::MAX {
            let _ = sys::notify_wait(wake, 0);
        } else {
            let _ = sys::notify_wait_until(wake, deadline);
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
    // The notice capability first: the driver's token reports through it.
    let notice = thread::alloc_slot();
    if sys::cap_mint(ep, notice, NOTICE_BADGE, rights::SEND).is_err() {
        println!("netstack: FAIL no notice capability");
        return;
    }
    let drv = Driver {
        nic: net::Client::new(driver),
        ep,
        notice,
        wake,
        token_slot: thread::alloc_slot(),
        kick_slot: thread::alloc_slot(),
    };
    // The session memory goes to the driver as a map item at its window (derived from our
    // mapping: unmapping or freeing it here takes it from the driver too).
    // A driver without a device reports no MAC: the stack serves its loopback only.
    let no_device = matches!(drv.nic.info(), Ok(i) if i.mac == 0);
    let attached = if no_device {
        println!("netstack: the driver has no device: loopback only");
        Ok(0)
    } else {
        drv.nic
            .info()
            .and_then(|i| drv.attach(i.window).map(|_| i.mac))
    };
    let mac = match attached {
        Ok(x) => x,
        Err(e) => {
            println!("netstack: FAIL attaching to the driver: {:?}", e);
            return;
        }
    };
    if !no_device {
        link.set_kick(drv.kick_slot);
    }
    let driver = (!no_device).then_some(drv);
    let m = mac.to_le_bytes();
    let mut ic = IfaceConfig::new(EthernetAddress([m[0], m[1], m[2], m[3], m[4], m[5]]).into());
    ic.random_seed = sys::rdtsc();
    let iface = Interface::new(ic, &mut link, now());
    let mac6 = [m[0], m[1], m[2], m[3], m[4], m[5]];
    let mut st = Stack {
        iface,
        mac: mac6,
        sockets: Sockets::new(),
        link,
        dhcp: None,
        socks: BTreeMap::new(),
        shares: grant::Shares::default(),
        next_id: 0,
        count: 0,
        max_sockets: cfg.socket_bounds().0,
        max_client_sockets: cfg.socket_bounds().1,
        max_process_sockets: cfg.process_sockets(),
        tcp_ports: BTreeSet::new(),
        udp_ports: BTreeSet::new(),
        next_port: EPHEMERAL_FIRST,
        closing: Vec::new(),
        listeners: 0,
        udp_fused: BTreeMap::new(),
        privileged: cfg.privileged.iter().map(|c| c.badge).collect(),
        addr: 0,
        prefix: 0,
        gateway: 0,
        udp_queued: None,
        udp_fast: false,
    };
    st.iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::Ipv4(LOOPBACK));
    });
    st.link.set_local(mac6, 0);
    match static_addr {
        Some(((a, prefix), gw)) => st.configure(
            Ipv4Cidr::new(Ipv4Address::from_bits(a), prefix),
            gw.map(Ipv4Address::from_bits),
        ),
        None if no_device => {}
        None => {
            let mut d = dhcpv4::Socket::new();
            d.set_max_lease_duration(Some(Duration::from_secs(3600)));
            st.dhcp = Some(st.sockets.add(set_of_port(DHCP_CLIENT_PORT), d));
            println!("netstack: asking DHCP");
        }
    }
    *STACK.lock() = Some(st);
    if let Err(e) = thread::spawn(255, THREAD_STACK, move || poller(wake, driver)) {
        println!("netstack: FAIL poll thread: {}", e.name());
        return;
    }
    println!(
        "netstack: serving sockets, mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    );
    let mut front = Front {
        after: AfterReply::new(),
        ep,
        notice,
        free_slots: Vec::new(),
        chans: BTreeMap::new(),
        next_chan: 0,
        manager: cfg.manager.as_ref().map(|c| c.badge),
        offers: BTreeMap::new(),
    };
    // Two: `connect_fused` brings two pipe ends.
    front
        .after
        .receive_into(&[thread::alloc_slot(), thread::alloc_slot()]);
    let _ = rpc::serve(ep, &mut front);
}
