//! The one server loop of sawmill (docs/idl.md §2.1): receive, dispatch by
//! interface, reply, then the post-reply step.
//!
//! A server's state implements [`Serve`]: `handle` picks the interface a message is for (by
//! badge, by label, or a raw handler for kernel messages such as `PAGE_FAULT`) and answers through
//! [`Next`]; work that may only happen once the reply is out — deleting the copy of a capability
//! the reply handed over, unmapping, re-arming receive slots, adding map items to the reply — goes
//! into the server's [`AfterReply`] instead of globals or the UTCB.
//!
//! The loop is also the one place where the kernel's `NO_SENDERS` notices are recognised (a
//! server that hands out watched capabilities, see [`Serve::NOTICES`]): the last capability
//! carrying a watched badge is gone — the client dropped it or died — and the server frees what
//! that badge held ([`Serve::no_senders`]). A notice is taken only with the badge the server
//! reserved for them, so a client sending that label is an ordinary (refused) request.
//!
//! It is also every server's fault point for the fault-injection campaign (docs/ARCHITECTURE.md
//! §4.1): while root has armed a fault in the server's fault word (`super::fault_word`, a word
//! that stays 0 unless the manifest lets a controller inject faults into this server), the next
//! request meets it (`super::fault_fires`). One load and branch per request otherwise.
//!
//! Portable like `wire.rs`: it reaches the kernel only through `super::{recv, reply_recv, utcb,
//! cap_delete, unmap, fault_word, fault_fires}`, which the host tests replace with a mock.
use super::{cap_delete, recv, reply_recv, unmap, utcb, IpcResult, MsgTag, Reply};
use sawmill_abi::{label, MapItem};

/// In `IpcResult::err`: a handler stopped the loop ([`Next::stop`]). Kernel errors are small
/// numbers, so neither this nor [`HANDED_OFF`] can come from the kernel.
const STOPPED: u64 = 1 << 63;
/// In `IpcResult::err`: a handler replied and received on another endpoint ([`Next::hand_off`]).
const HANDED_OFF: u64 = 1 << 62;
/// In `IpcResult::err`: a reply went out with post-reply work staged and no message was
/// waiting (see [`Next::reply_after`]): the loop runs the step, then waits.
const IDLE_AFTER_REPLY: u64 = 1 << 61;
/// The kernel's `WouldBlock` as an `IpcResult::err`.
const WOULD_BLOCK: u64 = sawmill_abi::Error::WouldBlock as u64;

/// A server the loop drives: usually a few lines routing each message to the generated
/// `dispatch_then` (or `handle`) of the interface it is for.
pub trait Serve {
    /// Handles one message whose receive succeeded and answers it through `next` (every path ends
    /// in one of `next`'s methods, which return the next message). Mark it `#[inline(always)]`:
    /// inlined into the loop, the next message stays in registers; called, it goes through
    /// memory (about 30 instructions per message more).
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult;

    /// The server's post-reply list. The default (none) costs nothing on the loop's path.
    #[inline(always)]
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        None
    }

    /// The post-reply step deleted our copy of the capability in `slot`: the slot is free again.
    #[inline(always)]
    fn slot_freed(&mut self, slot: u64) {
        let _ = slot;
    }

    /// Whether this server receives `NO_SENDERS` notices on its endpoint. A constant, so the
    /// loop of a server that does not costs nothing.
    const NOTICES: bool = false;

    /// The badge of the notice capability the server named when minting watched badges
    /// (`sys::cap_mint_watched`): only a `NO_SENDERS` message with it is a notice.
    #[inline(always)]
    fn notice_badge(&self) -> u64 {
        0
    }

    /// No capability carrying the watched `badge` remains: free what it held. Not answered.
    #[inline(always)]
    fn no_senders(&mut self, badge: u64) {
        let _ = badge;
    }
}

/// What the generated `dispatch_then` hands each reply to, with the server. Every arm calls it,
/// so the implementations the loop uses ([`Next`], [`ReplyAfter`]) are `#[inline(always)]`: each
/// arm then issues its own reply system call with the registers computed in place (a closure
/// would be outlined once a dispatch has many arms). Any `FnOnce(&mut S, Reply) -> T` closure is
/// one too (give its parameter types: `|s: &mut S, r: Reply| ...`).
pub trait Answer<S: ?Sized> {
    type Out;
    fn answer(self, srv: &mut S, r: Reply) -> Self::Out;
}

impl<S: ?Sized, T, F: FnOnce(&mut S, Reply) -> T> Answer<S> for F {
    type Out = T;
    #[inline(always)]
    fn answer(self, srv: &mut S, r: Reply) -> T {
        self(srv, r)
    }
}

impl<S: Serve + ?Sized> Answer<S> for Next {
    type Out = IpcResult;
    #[inline(always)]
    fn answer(self, srv: &mut S, r: Reply) -> IpcResult {
        self.reply(srv, r)
    }
}

/// [`Next`] with an [`AfterReply`] that is not the dispatched server's own (e.g. a field beside
/// the state `dispatch_then` gets): [`Next::with`].
pub struct ReplyAfter<'a> {
    next: Next,
    after: &'a mut AfterReply,
}

impl<S: ?Sized> Answer<S> for ReplyAfter<'_> {
    type Out = IpcResult;
    #[inline(always)]
    fn answer(self, _srv: &mut S, r: Reply) -> IpcResult {
        self.next.reply_after(self.after, r)
    }
}

/// [`Next`] for a server without an [`AfterReply`] of any kind: [`Next::plain`].
#[derive(Clone, Copy, Debug)]
pub struct ReplyPlain(Next);

impl<S: ?Sized> Answer<S> for ReplyPlain {
    type Out = IpcResult;
    #[inline(always)]
    fn answer(self, _srv: &mut S, r: Reply) -> IpcResult {
        self.0.reply_plain(r)
    }
}

/// How a handler answers: every method replies (or not) and waits for the next message.
#[derive(Clone, Copy, Debug)]
pub struct Next {
    ep: u64,
}

impl Next {
    /// The endpoint being served.
    #[inline(always)]
    pub fn ep(self) -> u64 {
        self.ep
    }

    /// Replies with `r` — with the map items `srv`'s [`AfterReply`] holds added if `r` is a
    /// success — re-arms the receive slots and window, and waits for the next message.
    #[inline(always)]
    pub fn reply<S: Serve + ?Sized>(self, srv: &mut S, r: Reply) -> IpcResult {
        match srv.after_reply() {
            Some(a) => self.reply_after(a, r),
            None => self.reply_plain(r),
        }
    }

    /// Answers without post-reply work, whatever the dispatched server is.
    #[inline(always)]
    pub fn plain(self) -> ReplyPlain {
        ReplyPlain(self)
    }

    /// Answers through `after`, which is not the dispatched server's (see [`ReplyAfter`]).
    #[inline(always)]
    pub fn with(self, after: &mut AfterReply) -> ReplyAfter<'_> {
        ReplyAfter { next: self, after }
    }

    /// [`Next::reply`] with the [`AfterReply`] given directly (e.g. a field beside the one
    /// `dispatch_then` borrows).
    #[inline(always)]
    pub fn reply_after(self, a: &mut AfterReply, r: Reply) -> IpcResult {
        let pending = a.pending();
        let r = a.prepare(r);
        if pending {
            // The post-reply step must not wait for the next message: a copy of a capability
            // the reply handed over would outlive the client's own (a watched badge's
            // NO_SENDERS notice, and what it frees, held back while we are idle). So the
            // receive is non-blocking here; if nothing waits, the loop runs the step and then
            // waits ([`IDLE_AFTER_REPLY`]).
            let m = reply_recv(self.ep, r.tag.nonblocking(), r.w);
            if m.err == WOULD_BLOCK {
                return IpcResult {
                    err: IDLE_AFTER_REPLY,
                    ..m
                };
            }
            return m;
        }
        reply_recv(self.ep, r.tag, r.w)
    }

    /// [`Next::reply`] for a server without an [`AfterReply`].
    #[inline(always)]
    pub fn reply_plain(self, r: Reply) -> IpcResult {
        reply_recv(self.ep, r.tag, r.w)
    }

    /// Does not answer (there is no caller, e.g. after a kernel `EXIT` message, or the caller
    /// must stay blocked) and waits for the next message.
    #[inline(always)]
    pub fn skip<S: Serve + ?Sized>(self, srv: &mut S) -> IpcResult {
        if let Some(a) = srv.after_reply() {
            // Map items for a reply that is not sent go nowhere.
            a.nmaps = 0;
            a.arm();
        }
        recv(self.ep, 0)
    }

    /// Does not answer and ends the loop: [`serve`] returns `None` (after the post-reply step).
    #[inline(always)]
    pub fn stop(self) -> IpcResult {
        IpcResult {
            err: STOPPED,
            badge: 0,
            tag: MsgTag(0),
            w: [0; 4],
        }
    }

    /// Replies with `r`, then waits on endpoint `ep` instead and ends the loop: [`serve`] returns
    /// the message that arrived there, for the loop that serves `ep` next ([`serve_from`]).
    #[inline(always)]
    pub fn hand_off<S: Serve + ?Sized>(self, srv: &mut S, ep: u64, r: Reply) -> IpcResult {
        let mut m = Next { ep }.reply(srv, r);
        if m.err == IDLE_AFTER_REPLY {
            // The step is this server's, not the next loop's.
            after(srv);
            m = Next { ep }.skip(srv);
        }
        m.err |= HANDED_OFF;
        m
    }
}

/// How many entries each list of an [`AfterReply`] holds: a reply carries at most 4
/// capabilities and 4 map items.
pub const AFTER_MAX: usize = 4;

/// What the loop does around a server's replies: receive slots and window it arms before every
/// receive (set once), and per reply the map items to add and the capabilities to delete and
/// pages to unmap once the reply is delivered (filled by handlers, emptied by the loop).
#[derive(Clone, Copy, Debug, Default)]
pub struct AfterReply {
    /// The receive slots (unused entries 0, which the kernel ignores past a message's count).
    rx: [u64; AFTER_MAX],
    arm_rx: bool,
    window: [u64; 2],
    arm_window: bool,
    /// Map items staged for the current reply (in the UTCB's `map_items[..nmaps]`).
    nmaps: u8,
    deletes: [u64; AFTER_MAX],
    ndel: u8,
    unmaps: [[u64; 3]; AFTER_MAX],
    nunmap: u8,
}

impl AfterReply {
    pub const fn new() -> AfterReply {
        AfterReply {
            rx: [0; AFTER_MAX],
            arm_rx: false,
            window: [0; 2],
            arm_window: false,
            nmaps: 0,
            deletes: [0; AFTER_MAX],
            ndel: 0,
            unmaps: [[0; 3]; AFTER_MAX],
            nunmap: 0,
        }
    }

    /// Capabilities sent to the server land in `slots` (empty slots of its own, at most 4): the
    /// loop puts them in `caps_in` before every receive, so a client call a handler makes (whose
    /// stub points `caps_in` at its own result slots) cannot misdirect the next request's
    /// capabilities. Returns false (and changes nothing) for more than 4.
    pub fn receive_into(&mut self, slots: &[u64]) -> bool {
        if slots.len() > AFTER_MAX {
            return false;
        }
        self.rx = [0; AFTER_MAX];
        self.rx[..slots.len()].copy_from_slice(slots);
        self.arm_rx = !slots.is_empty();
        true
    }

    /// Map items sent to the server may land in `[base, base + size)`; armed before every
    /// receive until changed (`size` 0 closes it).
    pub fn receive_window(&mut self, base: u64, size: u64) {
        self.window = [base, size];
        self.arm_window = true;
    }

    /// Adds `item` to the current reply if it succeeds (label 0; an error reply maps nothing).
    /// Returns false when the reply already carries 4. The item is staged at once in the UTCB's
    /// map items (the reply's own staging area, so it is written once), which leaves two rules:
    /// not for a method with a `map` result (that item takes the first place), and no call that
    /// sends map items between staging and the reply.
    pub fn map(&mut self, item: MapItem) -> bool {
        match utcb().map_items.get_mut(self.nmaps as usize) {
            Some(m) => {
                *m = item;
                self.nmaps += 1;
                true
            }
            None => false,
        }
    }

    /// Deletes our capability in `slot` once the current reply is delivered (the reply hands a
    /// copy of it over), then reports the slot free ([`Serve::slot_freed`]). Returns false when
    /// 4 are pending already.
    pub fn delete(&mut self, slot: u64) -> bool {
        match self.deletes.get_mut(self.ndel as usize) {
            Some(d) => {
                *d = slot;
                self.ndel += 1;
                true
            }
            None => false,
        }
    }

    /// `unmap(addr, pages, flags)` once the current reply is delivered. Returns false when 4
    /// are pending already.
    pub fn unmap(&mut self, addr: u64, pages: u64, flags: u64) -> bool {
        match self.unmaps.get_mut(self.nunmap as usize) {
            Some(u) => {
                *u = [addr, pages, flags];
                self.nunmap += 1;
                true
            }
            None => false,
        }
    }

    /// Work waiting for the current reply to be delivered.
    #[inline(always)]
    pub fn pending(&self) -> bool {
        self.ndel | self.nunmap != 0
    }

    /// Map items waiting for the current reply.
    pub fn maps_pending(&self) -> usize {
        self.nmaps as usize
    }

    /// Before a reply: adds the staged map items to a success reply without map items of its
    /// own (dropping them otherwise) and arms the receive slots and window.
    #[inline(always)]
    pub fn prepare(&mut self, mut r: Reply) -> Reply {
        if self.nmaps != 0 {
            let n = core::mem::take(&mut self.nmaps);
            if r.tag.label() == 0 && r.tag.maps() == 0 {
                r.tag = r.tag.with_maps(n);
            }
        }
        self.arm();
        r
    }

    /// Before a receive: the receive slots and window (a few stores).
    #[inline(always)]
    pub fn arm(&self) {
        if self.arm_rx {
            utcb().caps_in = self.rx;
        }
        if self.arm_window {
            utcb().map_window = self.window;
        }
    }
}

/// The post-reply step: runs the unmaps and deletes the handlers asked for (reading the lists in
/// place: a copy of the whole list would cost more than the work).
#[inline(never)]
fn after<S: Serve + ?Sized>(srv: &mut S) {
    let Some(a) = srv.after_reply() else { return };
    let nu = core::mem::take(&mut a.nunmap) as usize;
    for u in a.unmaps.iter().take(nu) {
        let _ = unmap(u[0], u[1], u[2]);
    }
    let nd = core::mem::take(&mut a.ndel) as usize;
    for i in 0..nd.min(AFTER_MAX) {
        let Some(s) = srv.after_reply().map(|a| a.deletes[i]) else {
            return;
        };
        if cap_delete(s) == 0 {
            srv.slot_freed(s);
        }
    }
}

/// Serves `ep` until a handler stops the loop: `None` after [`Next::stop`], the message received
/// on the other endpoint after [`Next::hand_off`]. A failed receive is not answered (there is no
/// caller); the loop waits again.
#[inline(always)]
pub fn serve<S: Serve + ?Sized>(ep: u64, srv: &mut S) -> Option<IpcResult> {
    let first = Next { ep }.skip(srv);
    serve_from(ep, first, srv)
}

/// [`serve`] starting with `first`, a message already received on `ep`.
#[inline(always)]
pub fn serve_from<S: Serve + ?Sized>(ep: u64, first: IpcResult, srv: &mut S) -> Option<IpcResult> {
    let mut m = first;
    let armed = super::fault_word();
    loop {
        if S::NOTICES
            && m.err == 0
            && m.tag.label() == label::NO_SENDERS
            && m.badge == srv.notice_badge()
        {
            srv.no_senders(m.w[0]);
            if let Some(a) = srv.after_reply() {
                if a.pending() {
                    after(srv);
                }
            }
            m = Next { ep }.skip(srv);
            continue;
        }
        if m.err == 0 {
            if armed.load(core::sync::atomic::Ordering::Relaxed) != 0 {
                if let Some(garbage) = super::fault_fires(armed) {
                    m = Next { ep }.reply_plain(garbage);
                    continue;
                }
            }
            m = srv.handle(&m, Next { ep });
            if let Some(a) = srv.after_reply() {
                if a.pending() {
                    after(srv);
                }
            }
            continue;
        }
        if m.err == IDLE_AFTER_REPLY {
            if let Some(a) = srv.after_reply() {
                if a.pending() {
                    after(srv);
                }
            }
            m = Next { ep }.skip(srv);
            continue;
        }
        if m.err & HANDED_OFF != 0 {
            m.err &= !HANDED_OFF;
            return Some(m);
        }
        if m.err == STOPPED {
            return None;
        }
        m = Next { ep }.skip(srv);
    }
}
