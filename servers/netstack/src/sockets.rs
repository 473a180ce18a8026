//! The stack's smoltcp sockets, partitioned into socket sets by local port
//! (`sawmill_netstack_api::sets`), an established TCP connection by its 4-tuple
//! (`sawmill_netstack_api::conns`: the index the ingress consults lives here), so that smoltcp's per-packet search of its sockets and its
//! egress visit one set, not every socket. A [`Handle`] names a socket and its set. Each set
//! remembers whether something may have changed in it since its last egress (`touched`: a call
//! took it mutably, a frame arrived for it) and when smoltcp wants it polled next (`poll_at`,
//! recomputed only for touched sets): a poll runs egress only for touched and due sets, and the
//! poll thread's timer is the least of the sets' times. Which sets are touched and which have a
//! time are bit masks: a poll's cost does not grow with the sets either. Touches only smoltcp's
//! sockets.
use alloc::vec;
use alloc::vec::Vec;
use sawmill_netstack_api::conns::{ConnIndex, ConnKey};
use sawmill_netstack_api::sets::{self, SETS};
use smoltcp::iface::{Interface, SocketHandle, SocketSet};
use smoltcp::socket::{AnySocket, Socket};
use smoltcp::time::Instant;

/// A socket: its set and its handle there, and the connection it is indexed by if it lives in
/// its 4-tuple's set ([`Sockets::pin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle {
    set: u8,
    h: SocketHandle,
    conn: Option<ConnKey>,
}

impl Handle {
    pub fn set(self) -> usize {
        self.set as usize
    }
}

const _: () = assert!(SETS <= u8::MAX as usize);

struct Set {
    sockets: SocketSet<'static>,
    /// The stack's sockets (capability badges) whose smoltcp sockets live here: the readiness
    /// pass after a poll looks at those of the sets it polled only.
    badges: Vec<u64>,
}

pub struct Sockets {
    sets: Vec<Set>,
    /// Per set: when smoltcp wants it polled (None: only when a frame arrives), as of its last
    /// egress.
    poll_at: Vec<Option<Instant>>,
    /// Sets in which something may have changed since their last egress round (a call took a
    /// socket mutably, a frame arrived), and sets whose `poll_at` is some: masks, so that a poll
    /// costs nothing for the sets that have nothing to do.
    touched: u128,
    timed: u128,
    /// The connections that live in their 4-tuple's set (pinned handles' keys).
    conns: ConnIndex,
}

impl Sockets {
    pub fn new() -> Sockets {
        Sockets {
            sets: (0..SETS)
                .map(|_| Set {
                    sockets: SocketSet::new(Vec::new()),
                    badges: Vec::new(),
                })
                .collect(),
            poll_at: vec![None; SETS],
            touched: 0,
            timed: 0,
            conns: ConnIndex::new(),
        }
    }

    pub fn get<T: AnySocket<'static>>(&self, h: Handle) -> &T {
        self.sets[h.set()].sockets.get(h.h)
    }

    /// The socket, and its set marked touched.
    pub fn get_mut<T: AnySocket<'static>>(&mut self, h: Handle) -> &mut T {
        self.touch(h.set());
        self.sets[h.set()].sockets.get_mut(h.h)
    }

    /// Adds `s` to set `set` (`sets::set_of_port` of its port, or the control set).
    pub fn add<T: AnySocket<'static>>(&mut self, set: usize, s: T) -> Handle {
        self.touch(set);
        Handle {
            set: set as u8,
            h: self.sets[set].sockets.add(s),
            conn: None,
        }
    }

    /// Removes the socket (and its connection from the index).
    pub fn remove(&mut self, h: Handle) -> Socket<'static> {
        self.touch(h.set());
        if let Some(key) = h.conn {
            self.conns.remove(key);
        }
        self.sets[h.set()].sockets.remove(h.h)
    }

    /// Moves the socket `h` to `set`, unindexed: its new handle.
    fn move_to(&mut self, mut h: Handle, set: usize) -> Handle {
        if h.set() == set {
            if let Some(key) = h.conn.take() {
                self.conns.remove(key);
            }
            return h;
        }
        let s = self.remove(h);
        self.add(set, s)
    }

    /// Moves the socket `h` to the set of local port `port` (it is about to use it): its new
    /// handle.
    pub fn move_to_port(&mut self, h: Handle, port: u16) -> Handle {
        self.move_to(h, sets::set_of_port(port))
    }

    /// Moves the TCP socket `h`, a connection from now on named by `key` (established, or
    /// connecting with its endpoints chosen), to the set of its 4-tuple and indexes it there, so
    /// that the ingress polls its segments with that set and not its port's: its new handle.
    /// Every holder of `h` has to take the new one.
    pub fn pin(&mut self, h: Handle, key: ConnKey) -> Handle {
        let set = sawmill_netstack_api::conns::set_of_conn(key);
        let mut h = self.move_to(h, set);
        self.conns.insert(key);
        h.conn = Some(key);
        h
    }

    /// The index of the connections that live in their 4-tuple's set: the ingress's first look.
    pub fn conns(&self) -> &ConnIndex {
        &self.conns
    }

    /// The stack's socket `badge` lives in set `set` (or no longer does).
    pub fn enter(&mut self, set: usize, badge: u64) {
        self.sets[set].badges.push(badge);
    }
    pub fn leave(&mut self, set: usize, badge: u64) {
        let b = &mut self.sets[set].badges;
        if let Some(i) = b.iter().position(|&x| x == badge) {
            b.swap_remove(i);
        }
    }
    pub fn badges(&self, set: usize) -> &[u64] {
        &self.sets[set].badges
    }

    /// Set `set` has to be looked at by the next poll (its egress and its sockets' readiness).
    pub fn touch(&mut self, set: usize) {
        self.touched |= 1 << set;
    }

    /// Every set has (a neighbour was learned: sockets of any set may send now).
    pub fn touch_all(&mut self) {
        self.touched = u128::MAX >> (u128::BITS as usize - SETS);
    }

    /// Set `set` for smoltcp's ingress of one frame: touched (what arrives may call for an
    /// answer).
    pub fn for_ingress(&mut self, set: usize) -> &mut SocketSet<'static> {
        self.touch(set);
        &mut self.sets[set].sockets
    }

    /// The sets to run egress for at `now`: touched ones and those due, as a mask.
    pub fn due(&self, now: Instant) -> u128 {
        let mut mask = self.touched;
        for i in sets::members(self.timed & !self.touched) {
            if self.poll_at[i].is_some_and(|t| t <= now) {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// Set `set` for smoltcp's egress (untouched: its time is taken again with
    /// [`Sockets::settle`]).
    pub fn for_egress(&mut self, set: usize) -> &mut SocketSet<'static> {
        &mut self.sets[set].sockets
    }

    /// Takes set `set`'s time again.
    fn retime(&mut self, iface: &mut Interface, now: Instant, set: usize) {
        let at = iface.poll_at(now, &self.sets[set].sockets);
        self.poll_at[set] = at;
        if at.is_some() {
            self.timed |= 1 << set;
        } else {
            self.timed &= !(1 << set);
        }
    }

    /// After set `set`'s egress: its time taken again, untouched.
    pub fn settle(&mut self, iface: &mut Interface, now: Instant, set: usize) {
        self.retime(iface, now, set);
        self.touched &= !(1 << set);
    }

    /// When smoltcp wants the next poll: the least of the sets' times, a touched set's taken
    /// again (a call changed it and no poll followed).
    pub fn poll_at(&mut self, iface: &mut Interface, now: Instant) -> Option<Instant> {
        for i in sets::members(self.touched) {
            self.retime(iface, now, i);
        }
        sets::members(self.timed)
            .filter_map(|i| self.poll_at[i])
            .min()
    }
}
