//! Endpoints: synchronous IPC. Call, send, receive and reply; message transfer (registers,
//! UTCB words, capability items, map items through `vm`); the IPC fast path; the kernel's
//! fault, exception, exit and no-senders messages; and what happens to waiters when a thread or
//! an endpoint goes away.
use crate::cap;
use crate::error::SysResult;
use crate::obj::{self, th, utcb, Cap, Endpoint, KMsg, Obj, Senders, State, Task, Thread};
use crate::sched;
use crate::state::kernel;
use crate::vm;
use core::ptr::null_mut;
use sawmill_abi::{label, map, rights, Error, MsgTag, MAX_ITEMS, MAX_WORDS, REG_WORDS};

// ---- endpoint queues ---------------------------------------------------------------------

fn push(head: &mut *mut Thread, t: *mut Thread) {
    // Append at the tail (FIFO) of a circular doubly linked list.
    let x = th(t);
    if head.is_null() {
        x.next = t;
        x.prev = t;
        *head = t;
    } else {
        let h = th(*head);
        let tail = h.prev;
        x.next = *head;
        x.prev = tail;
        th(tail).next = t;
        h.prev = t;
    }
}

fn unlink(head: &mut *mut Thread, t: *mut Thread) {
    let x = th(t);
    if x.next == t {
        *head = null_mut();
    } else {
        th(x.prev).next = x.next;
        th(x.next).prev = x.prev;
        if *head == t {
            *head = x.next;
        }
    }
    x.next = null_mut();
    x.prev = null_mut();
}

fn pop(head: &mut *mut Thread) -> Option<*mut Thread> {
    let h = *head;
    if h.is_null() {
        return None;
    }
    unlink(head, h);
    Some(h)
}

// ---- message transfer --------------------------------------------------------------------

/// Whether a message is registers only: at most 4 words (rdx, r10, r8, r9), no capability or
/// map items.
#[inline(always)]
fn regs_only(tag: u64) -> bool {
    (tag >> 16) & 0x3f7f <= REG_WORDS as u64
}

/// Copies the message of `src` (its registers and UTCB, or its kernel message) into `dst`'s
/// registers and UTCB. `badge` identifies the capability the sender used; `grant` allows
/// capability items.
#[inline(always)]
fn deliver(src: *mut Thread, dst: *mut Thread, badge: u64, grant: bool) {
    let s = th(src);
    // Fast path: a register-only message is six register moves.
    if s.kmsg.is_none() && regs_only(s.frame.rsi) {
        let d = th(dst);
        d.frame.rax = 0;
        d.frame.rdi = badge;
        d.frame.rsi = s.frame.rsi & 0x7f_ffff;
        d.frame.rdx = s.frame.rdx;
        d.frame.r10 = s.frame.r10;
        d.frame.r8 = s.frame.r8;
        d.frame.r9 = s.frame.r9;
        return;
    }
    deliver_slow(src, dst, badge, grant)
}

#[inline(never)]
fn deliver_slow(src: *mut Thread, dst: *mut Thread, badge: u64, grant: bool) {
    let s = th(src);
    let (tag, w) = match s.kmsg {
        Some(km) => (MsgTag::new(km.label, 4), km.w),
        None => (
            MsgTag(s.frame.rsi),
            [s.frame.rdx, s.frame.r10, s.frame.r8, s.frame.r9],
        ),
    };
    let words = tag.words().min(MAX_WORDS);
    let mut out = tag.label() as u64 | (words as u64) << 16;
    if words > REG_WORDS && s.kmsg.is_none() {
        let su = utcb(src);
        let du = utcb(dst);
        du.mr[REG_WORDS..words].copy_from_slice(&su.mr[REG_WORDS..words]);
    }
    if s.kmsg.is_none() {
        let ncaps = tag.caps().min(MAX_ITEMS);
        if ncaps > 0 && grant {
            let su = utcb(src);
            let du = utcb(dst);
            let mut n = 0;
            for i in 0..ncaps {
                if cap::derive(
                    s.task,
                    su.caps_out[i],
                    th(dst).task,
                    du.caps_in[i],
                    None,
                    rights::ALL,
                )
                .is_err()
                {
                    break;
                }
                n += 1;
            }
            out |= (n as u64) << 24;
        }
        let nmaps = tag.maps().min(MAX_ITEMS);
        if nmaps > 0 {
            out |= (map_items(src, dst, nmaps) as u64) << 27;
        }
    }
    let d = &mut th(dst).frame;
    d.rax = 0;
    d.rdi = badge;
    d.rsi = out;
    d.rdx = w[0];
    d.r10 = w[1];
    d.r8 = w[2];
    d.r9 = w[3];
}

/// Maps the first `n` map items of `src`'s message into `dst` through `dst`'s receive window,
/// in order, up to the first that does not fit or fails; returns how many landed. The receiver
/// learns where each item landed (the sender's address stays the sender's), so it can take back
/// what a request should not have brought.
#[inline(always)]
fn map_items(src: *mut Thread, dst: *mut Thread, n: usize) -> usize {
    let (su, du) = (utcb(src), utcb(dst));
    let (base, size) = (du.map_window[0], du.map_window[1]);
    let (st, dt) = (th(src).task, th(dst).task);
    for i in 0..n {
        let it = su.map_items[i];
        if !map_item_ok(&it, base, size)
            || vm::map_pages(st, it.src, dt, it.dst, it.pages, it.flags).is_err()
        {
            return i;
        }
        du.map_items[i] = sawmill_abi::MapItem { src: 0, ..it };
    }
    n
}

fn item_bytes(it: &sawmill_abi::MapItem) -> Option<u64> {
    let size = if it.flags & map::HUGE != 0 {
        0x20_0000
    } else {
        0x1000
    };
    it.pages.checked_mul(size)
}

fn map_item_ok(it: &sawmill_abi::MapItem, base: u64, size: u64) -> bool {
    let Some(len) = item_bytes(it) else {
        return false;
    };
    let Some(end) = it.dst.checked_add(len) else {
        return false;
    };
    size != 0 && it.dst >= base && end <= base.saturating_add(size)
}

/// The sender finished handing over its message: it now awaits the reply, ends (exit message),
/// or continues.
fn sender_done(s: *mut Thread, r: *mut Thread) {
    let x = th(s);
    x.ep = null_mut();
    if x.send_call {
        x.state = State::AwaitReply;
        x.server = r;
        th(r).caller = s;
    } else if x.zombie {
        // The EXIT message of an ended thread is delivered: nothing of it remains.
        x.kmsg = None;
        x.zombie = false;
        x.state = State::Dead;
    } else {
        sched::wake_with(s, 0);
    }
}

/// `s` sends on `ep`. Returns the receiver if one was waiting (it is made runnable but not
/// queued: the caller decides whether to switch to it).
fn send_to(
    ep: *mut Endpoint,
    s: *mut Thread,
    badge: u64,
    grant: bool,
    call: bool,
    nonblock: bool,
) -> Result<Option<*mut Thread>, Error> {
    // SAFETY: ep is live (a capability or the sender's pager reference holds it).
    let e = unsafe { &mut *ep };
    let x = th(s);
    x.send_call = call;
    match pop(&mut e.recv_head) {
        Some(r) => {
            th(r).ep = null_mut();
            deliver(s, r, badge, grant);
            th(r).state = State::Ready;
            sender_done(s, r);
            Ok(Some(r))
        }
        None => {
            if nonblock {
                return Err(Error::WouldBlock);
            }
            x.state = State::Sending;
            x.ep = ep;
            x.send_badge = badge;
            x.send_grant = grant;
            push(&mut e.send_head, s);
            Ok(None)
        }
    }
}

/// `r` receives on `ep`. Returns true if a message arrived at once.
pub fn recv_from(ep: *mut Endpoint, r: *mut Thread, nonblock: bool) -> Result<bool, Error> {
    // SAFETY: ep is live.
    let e = unsafe { &mut *ep };
    // Notices first: each frees what a client left behind, so a flood of requests cannot hold
    // them back.
    if let Some(w) = pop_notice(e) {
        deliver_notice(w, r);
        cap::release(Cap::new(Obj::Senders(w), 0, 0));
        return Ok(true);
    }
    match pop(&mut e.send_head) {
        Some(s) => {
            let x = th(s);
            x.ep = null_mut();
            deliver(s, r, x.send_badge, x.send_grant);
            sender_done(s, r);
            Ok(true)
        }
        None => {
            if nonblock {
                return Err(Error::WouldBlock);
            }
            let y = th(r);
            y.state = State::Receiving;
            y.ep = ep;
            push(&mut e.recv_head, r);
            Ok(false)
        }
    }
}

/// What a reply did to the caller.
pub enum Replied {
    /// Nobody was waiting for our reply.
    NoCaller,
    /// The caller is runnable but not yet queued: the system call decides whether to switch to
    /// it directly or queue it.
    Woken(*mut Thread),
    /// The caller sent a fault or exception message and the verdict ends it: the system call
    /// kills it (a layer above this one).
    Refused(*mut Thread),
    /// The caller sent a fault or exception message and the verdict (`label::DIVERT`) sends it
    /// to its own handler code: entry and two arguments (carried out a layer above).
    Diverted(*mut Thread, [u64; 3]),
}

/// Replies to the caller `r` is serving, if any.
pub fn reply(r: *mut Thread) -> Replied {
    let y = th(r);
    let c = y.caller;
    if c.is_null() {
        return Replied::NoCaller;
    }
    y.caller = null_mut();
    let x = th(c);
    x.server = null_mut();
    match x.kmsg.take() {
        Some(km) => {
            let lbl = MsgTag(y.frame.rsi).label();
            if km.label == label::PAGE_FAULT {
                // Map items resolve the fault; the whole faulting space is the window.
                let tag = MsgTag(y.frame.rsi);
                let u = utcb(r);
                for i in 0..tag.maps().min(MAX_ITEMS) {
                    let it = u.map_items[i];
                    let _ = vm::map_pages(y.task, it.src, x.task, it.dst, it.pages, it.flags);
                }
            }
            if lbl == label::DIVERT {
                let f = &y.frame;
                return Replied::Diverted(c, [f.rdx, f.r10, f.r8]);
            }
            // Resuming needs a return address a return instruction can use (see
            // sched::off_the_end), whatever the handler says.
            if lbl == 0 && x.frame.rip < crate::arch::CANONICAL_END {
                x.state = State::Ready;
            } else {
                return Replied::Refused(c);
            }
        }
        None => {
            deliver(r, c, 0, true);
            x.state = State::Ready;
        }
    }
    Replied::Woken(c)
}

/// The endpoint in slot `slot` of task `t`, with the right `need`.
pub fn ep_cap(t: *mut Task, slot: u64, need: u64) -> Result<(*mut Endpoint, Cap), Error> {
    let c = cap::lookup(t, slot)?;
    let Obj::Endpoint(ep) = c.obj else {
        return Err(Error::WrongKind);
    };
    if !obj::has(&c, need) {
        return Err(Error::NoRights);
    }
    Ok((ep, c))
}

/// Runs `r` next if it may: the current thread is blocked and nothing of higher priority waits.
pub fn run_next(r: *mut Thread) {
    let cur = kernel().current;
    if th(cur).state != State::Ready {
        // Direct switch: r takes over the CPU without going through the ready queue.
        kernel().current = r;
    } else {
        sched::make_ready(r);
    }
}

// ---- fast path ---------------------------------------------------------------------------

// The IPC fast path (L4's): a register-only `call` or `send` to a waiting receiver, or a
// register-only `reply_recv` to a waiting caller with no sender queued, when the thread it runs
// next is the one the general path would run: no ready thread of a higher priority (of an equal
// one, for a `send` that puts the receiver behind it). It moves the message words and switches
// straight to the partner. Anything else returns and takes the general path, which gives the
// same result. (Asking for no ready thread at all, as this once did, sent two IPCs in three of
// the shell script benchmark down the general path: a process of a pipeline is often ready.)

/// The common checks of the fast path: register-only message, blocking, a valid endpoint
/// capability. Returns the capability and its endpoint.
#[inline(always)]
fn fast_check(t: &Thread) -> Option<(Cap, *mut Endpoint)> {
    // Bits 16..48 of the tag as one number: at most 4 words, and no item counts, no
    // non-blocking bit, no reserved bits (those go the general way, which ignores them).
    if (t.frame.rsi >> 16) as u32 > REG_WORDS as u32 {
        return None;
    }
    // SAFETY: t's task is live, its view of its own live table (see cap::lookup).
    match unsafe { (*t.task).slots.cap_at(t.frame.rdi) } {
        Some(
            &c @ Cap {
                obj: Obj::Endpoint(ep),
                ..
            },
        ) => Some((c, ep)),
        _ => None,
    }
}

/// Moves the register words of `t`'s message into `r`'s frame.
#[inline(always)]
fn fast_copy(t: &Thread, r: &mut Thread, badge: u64) {
    r.frame.rax = 0;
    r.frame.rdi = badge;
    r.frame.rsi = t.frame.rsi & 0x7f_ffff;
    r.frame.rdx = t.frame.rdx;
    r.frame.r10 = t.frame.r10;
    r.frame.r8 = t.frame.r8;
    r.frame.r9 = t.frame.r9;
}

/// Fast `call`: a waiting receiver takes the message and the CPU.
#[inline(always)]
pub fn fast_call(cur: *mut Thread) {
    let t = th(cur);
    let Some((c, ep)) = fast_check(t) else { return };
    // SAFETY: the capability holds the endpoint alive.
    let e = unsafe { &mut *ep };
    let r = e.recv_head;
    if c.rights & rights::SEND == 0
        || r.is_null()
        || !sched::can_take_msg(th(r))
        || !sched::none_ready_above(th(r).prio)
    {
        return;
    }
    unlink(&mut e.recv_head, r);
    let rt = th(r);
    rt.ep = null_mut();
    rt.state = State::Ready;
    rt.caller = cur;
    t.send_call = true;
    t.state = State::AwaitReply;
    t.run_ticks = 0;
    t.server = r;
    sched::switch_with_msg(r, &t.frame, c.badge)
}

/// Fast `send`: a waiting receiver takes the message; it runs first if its priority is higher.
#[inline(always)]
pub fn fast_send(cur: *mut Thread) {
    let t = th(cur);
    let Some((c, ep)) = fast_check(t) else { return };
    // SAFETY: the capability holds the endpoint alive.
    let e = unsafe { &mut *ep };
    let r = e.recv_head;
    if c.rights & rights::SEND == 0 || r.is_null() {
        return;
    }
    // The general path queues the receiver behind its equals and keeps the sender unless a
    // thread of a higher priority is ready; the one of them that runs is the one chosen here.
    let (rp, tp) = (th(r).prio, t.prio);
    let runs_general = if rp > tp {
        sched::none_ready_above(rp - 1)
    } else {
        sched::none_ready_above(tp)
    };
    if !runs_general {
        return;
    }
    unlink(&mut e.recv_head, r);
    let rt = th(r);
    rt.ep = null_mut();
    fast_copy(t, rt, c.badge);
    rt.state = State::Ready;
    t.frame.rax = 0;
    t.run_ticks = 0;
    if rt.prio > t.prio {
        // Nothing ready at the receiver's priority or above (checked): the sender waits its turn.
        sched::enqueue(cur);
        sched::switch_now(r)
    }
    sched::enqueue(r);
    sched::switch_now(cur)
}

/// The caller `t` answers on `ep`, if it may run at once on the fast path's rule: nothing else
/// waits on `ep` (the receive that follows blocks) and no ready thread is above its priority.
#[inline(always)]
fn caller_to_run(t: &Thread, ep: *mut Endpoint) -> Option<*mut Thread> {
    // SAFETY: the caller's capability holds the endpoint alive.
    let e = unsafe { &*ep };
    let cl = t.caller;
    if cl.is_null()
        || !e.send_head.is_null()
        || !e.notice_head.is_null()
        || !sched::none_ready_above(th(cl).prio)
    {
        return None;
    }
    Some(cl)
}

/// The reply to the caller `ct` is delivered: it is runnable (its kernel message, if it
/// faulted, answered) and `t` (the thread `cur`) waits on `ep`.
#[inline(always)]
fn answered_now_wait(t: &mut Thread, cur: *mut Thread, ct: &mut Thread, ep: *mut Endpoint) {
    ct.kmsg = None;
    ct.state = State::Ready;
    ct.server = null_mut();
    t.caller = null_mut();
    t.state = State::Receiving;
    t.run_ticks = 0;
    t.ep = ep;
    // SAFETY: as in caller_to_run.
    push(unsafe { &mut (*ep).recv_head }, cur);
}

/// Fast `reply_recv`: the caller waiting for our reply gets it and the CPU; we wait on `ep`.
#[inline(always)]
pub fn fast_reply_recv(cur: *mut Thread) {
    let t = th(cur);
    let Some((c, ep)) = fast_check(t) else { return };
    if c.rights & rights::RECV == 0 {
        return;
    }
    let Some(cl) = caller_to_run(t, ep) else {
        return;
    };
    let ct = th(cl);
    // A handler's plain verdict "resume" (label 0; fast_check let no map item through) to a
    // thread that faulted sends it back to the faulting instruction, as `reply` does: the
    // region manager's answer to every page fault its dataspace's manager mapped already.
    let resume = match ct.kmsg {
        None if sched::can_take_msg(ct) => false,
        Some(_)
            if MsgTag(t.frame.rsi).label() == 0 && ct.frame.rip < crate::arch::CANONICAL_END =>
        {
            true
        }
        _ => return,
    };
    answered_now_wait(t, cur, ct, ep);
    if resume {
        sched::switch_to(cl)
    }
    sched::switch_with_msg(cl, &t.frame, 0)
}

// The direct path: a register-word `reply_recv` the fast path left (map items: a dataspace
// manager's answer to `map`, about one IPC in six of the shell script benchmark; a pager's
// "resume" that maps the page) to a caller that may run at once under the fast path's rule.
// The items are mapped as the general path maps them, the message goes into the caller's frame
// (its tag saying how many items landed), and the caller runs without the general path's
// scheduler round and exit. (Taking capability items and more words this way too, through
// `deliver`, measured dearer; so did `call`s.)

/// `reply_recv` by the direct path; returns when the general path must do it (capability
/// items, words past the registers, a bad endpoint, a caller that cannot run now, a verdict
/// other than "resume" to a thread that faulted).
#[inline(never)]
pub fn reply_recv_direct(cur: *mut Thread) {
    let t = th(cur);
    let tag = MsgTag(t.frame.rsi);
    // A non-blocking receive may return at once: the general path's.
    if tag.caps() != 0 || tag.words() > REG_WORDS || tag.is_nonblocking() {
        return;
    }
    // SAFETY: t's task is live, its view of its own live table (see cap::lookup).
    let ep = match unsafe { (*t.task).slots.cap_at(t.frame.rdi) } {
        Some(&Cap {
            obj: Obj::Endpoint(ep),
            rights: r,
            ..
        }) if r & rights::RECV != 0 => ep,
        _ => return,
    };
    let Some(cl) = caller_to_run(t, ep) else {
        return;
    };
    let ct = th(cl);
    match ct.kmsg {
        None if sched::can_take_msg(ct) => {}
        // A handler's "resume" with map items to a thread that faulted (a pager that maps the
        // page itself): as `reply` does, a page fault's items map into the whole faulting
        // space, each on its own, and the thread goes back to the faulting instruction.
        Some(km) if tag.label() == 0 && ct.frame.rip < crate::arch::CANONICAL_END => {
            if km.label == label::PAGE_FAULT {
                let u = utcb(cur);
                for it in &u.map_items[..tag.maps().min(MAX_ITEMS)] {
                    let _ = vm::map_pages(t.task, it.src, ct.task, it.dst, it.pages, it.flags);
                }
            }
            answered_now_wait(t, cur, ct, ep);
            sched::switch_to(cl)
        }
        _ => return,
    }
    let n = map_items(cur, cl, tag.maps().min(MAX_ITEMS));
    let f = &mut ct.frame;
    f.rax = 0;
    f.rdi = 0;
    f.rsi = t.frame.rsi & 0x7f_ffff | (n as u64) << 27;
    f.rdx = t.frame.rdx;
    f.r10 = t.frame.r10;
    f.r8 = t.frame.r8;
    f.r9 = t.frame.r9;
    answered_now_wait(t, cur, ct, ep);
    sched::switch_to(cl)
}

// ---- system calls ------------------------------------------------------------------------

fn endpoint_of(
    t: *mut Task,
    slot: u64,
    need: u64,
) -> Result<(*mut Endpoint, Cap), crate::error::Rejection> {
    ep_cap(t, slot, need).map_err(|e| match e {
        Error::NoRights if need == rights::SEND => {
            reject!(Error::NoRights, "endpoint capability lacks SEND")
        }
        Error::NoRights => reject!(Error::NoRights, "endpoint capability lacks RECV"),
        Error::WrongKind => reject!(Error::WrongKind, "not an endpoint"),
        _ => reject!(Error::BadCap, "no capability in the endpoint slot"),
    })
}

/// `call` and `send` on the general path.
pub fn sys_send(cur: *mut Thread, call: bool) -> SysResult {
    let x = th(cur);
    let tag = MsgTag(x.frame.rsi);
    let (ep, c) = endpoint_of(x.task, x.frame.rdi, rights::SEND)?;
    match send_to(
        ep,
        cur,
        c.badge,
        obj::has(&c, rights::GRANT),
        call,
        tag.is_nonblocking(),
    )? {
        Some(r) if call => run_next(r),
        Some(r) => sched::make_ready(r),
        None => {}
    }
    Ok(())
}

/// `recv` on the general path.
pub fn sys_recv(cur: *mut Thread) -> SysResult {
    let x = th(cur);
    let nonblock = MsgTag(x.frame.rsi).is_nonblocking();
    let (ep, _) = endpoint_of(x.task, x.frame.rdi, rights::RECV)?;
    recv_from(ep, cur, nonblock)?;
    Ok(())
}

/// The receive half of `reply_recv` after the reply went out (`woken`: the caller it woke).
pub fn recv_after_reply(cur: *mut Thread, woken: Option<*mut Thread>) -> SysResult {
    let x = th(cur);
    let nonblock = MsgTag(x.frame.rsi).is_nonblocking();
    let got = endpoint_of(x.task, x.frame.rdi, rights::RECV)
        .and_then(|(ep, _)| Ok(recv_from(ep, cur, nonblock)?));
    match (got, woken) {
        // We block: hand the CPU straight to the client we answered.
        (Ok(false), Some(c)) => run_next(c),
        (_, Some(c)) => sched::make_ready(c),
        _ => {}
    }
    got.map(|_| ())
}

/// A thread raised a fault or exception: send the kernel message to `handler` and wait for the
/// verdict. Returns false if there is no usable handler (the caller then ends the thread).
pub fn kernel_call(t: *mut Thread, handler: Option<Cap>, km: KMsg) -> bool {
    let Some(c) = handler else { return false };
    let Obj::Endpoint(ep) = c.obj else {
        return false;
    };
    let x = th(t);
    x.kmsg = Some(km);
    match send_to(ep, t, c.badge, false, true, false) {
        Ok(Some(r)) => {
            run_next(r);
            true
        }
        Ok(None) => true,
        Err(_) => {
            x.kmsg = None;
            false
        }
    }
}

/// Queues the EXIT message of an ended thread on its handler's endpoint (or hands it to a
/// waiting receiver). The thread object carries the message until it is received.
pub fn send_exit(t: *mut Thread, handler: Cap, status: u64) {
    let Obj::Endpoint(ep) = handler.obj else {
        return;
    };
    let x = th(t);
    x.kmsg = Some(KMsg {
        label: label::EXIT,
        w: [status, 0, 0, 0],
    });
    x.zombie = true;
    match send_to(ep, t, handler.badge, false, false, false) {
        Ok(Some(r)) => sched::make_ready(r),
        Ok(None) => {}
        Err(_) => {
            x.kmsg = None;
            x.zombie = false;
            x.state = State::Dead;
        }
    }
}

/// Removes a dying thread from every IPC relationship.
pub fn detach(t: *mut Thread) {
    let x = th(t);
    match x.state {
        State::Sending | State::Receiving if !x.ep.is_null() => {
            // SAFETY: a queued thread's ep is live.
            let e = unsafe { &mut *x.ep };
            if x.state == State::Sending {
                unlink(&mut e.send_head, t);
            } else {
                unlink(&mut e.recv_head, t);
            }
            x.ep = null_mut();
        }
        State::Notify if !x.notif.is_null() => {
            // SAFETY: live notification.
            unsafe { (*x.notif).waiter = null_mut() };
            x.notif = null_mut();
            crate::timeout::disarm(t);
        }
        _ => {}
    }
    if !x.server.is_null() {
        th(x.server).caller = null_mut();
        x.server = null_mut();
    }
    if !x.caller.is_null() {
        let c = x.caller;
        x.caller = null_mut();
        th(c).server = null_mut();
        if th(c).kmsg.is_none() {
            sched::wake_with(c, Error::PeerGone as u64);
        }
        // A faulting thread whose pager died stays blocked: it cannot continue without its page.
    }
    x.kmsg = None;
}

// ---- no-senders notices ------------------------------------------------------------------

/// Watch `w` will send its notice to `ep`: linked into `ep`'s watches, so that `ep`'s
/// destruction can tell it.
pub fn watch(ep: *mut Endpoint, w: *mut Senders) {
    // SAFETY: ep is live (the minter's capability holds it); w is a fresh watch.
    let (e, x) = unsafe { (&mut *ep, &mut *w) };
    x.prev = null_mut();
    x.next = e.watches;
    if !e.watches.is_null() {
        // SAFETY: the list holds live watches.
        unsafe { (*e.watches).prev = w };
    }
    e.watches = w;
}

fn unwatch(e: &mut Endpoint, w: *mut Senders) {
    // SAFETY: w and its neighbours are live watches in e's list.
    unsafe {
        let x = &mut *w;
        if x.prev.is_null() {
            e.watches = x.next;
        } else {
            (*x.prev).next = x.next;
        }
        if !x.next.is_null() {
            (*x.next).prev = x.prev;
        }
        x.next = null_mut();
        x.prev = null_mut();
    }
}

fn pop_notice(e: &mut Endpoint) -> Option<*mut Senders> {
    let w = e.notice_head;
    if w.is_null() {
        return None;
    }
    // SAFETY: the queue holds live watches.
    e.notice_head = unsafe { (*w).next };
    if e.notice_head.is_null() {
        e.notice_tail = null_mut();
    }
    Some(w)
}

/// Writes the NO_SENDERS message of watch `w` into the receiver's registers.
fn deliver_notice(w: *mut Senders, r: *mut Thread) {
    // SAFETY: live watch.
    let x = unsafe { &*w };
    let d = &mut th(r).frame;
    d.rax = 0;
    d.rdi = x.to_badge;
    d.rsi = MsgTag::new(label::NO_SENDERS, 1).0;
    d.rdx = x.badge;
    d.r10 = 0;
    d.r8 = 0;
    d.r9 = 0;
}

/// The last capability carrying watch `w`'s badge is gone: its notice goes to a waiting
/// receiver, or waits in the endpoint's queue carried by the watch itself. Returns whether the
/// watch is kept (queued; released when received or when the endpoint goes); otherwise the
/// caller releases it.
pub fn no_senders(w: *mut Senders) -> bool {
    // SAFETY: live watch.
    let x = unsafe { &mut *w };
    let ep = x.to;
    if ep.is_null() {
        return false;
    }
    // SAFETY: a watch's endpoint is live until it clears `to` (endpoint_gone).
    let e = unsafe { &mut *ep };
    unwatch(e, w);
    x.to = null_mut();
    if let Some(r) = pop(&mut e.recv_head) {
        th(r).ep = null_mut();
        deliver_notice(w, r);
        sched::make_ready(r);
        return false;
    }
    x.next = null_mut();
    if e.notice_tail.is_null() {
        e.notice_head = w;
    } else {
        // SAFETY: the tail is a live queued watch.
        unsafe { (*e.notice_tail).next = w };
    }
    e.notice_tail = w;
    true
}

/// An endpoint is destroyed: everyone waiting on it learns so.
pub fn endpoint_gone(ep: *mut Endpoint) {
    // SAFETY: ep is being destroyed; its queues hold live threads.
    let e = unsafe { &mut *ep };
    // Armed watches will have nowhere to send; queued notices are dropped with it.
    while !e.watches.is_null() {
        let w = e.watches;
        unwatch(e, w);
        // SAFETY: live watch.
        unsafe { (*w).to = null_mut() };
    }
    while let Some(w) = pop_notice(e) {
        cap::release(Cap::new(Obj::Senders(w), 0, 0));
    }
    while let Some(t) = pop(&mut e.send_head) {
        th(t).ep = null_mut();
        if th(t).zombie {
            th(t).zombie = false;
            th(t).kmsg = None;
            th(t).state = State::Dead;
        } else if th(t).kmsg.is_none() {
            sched::wake_with(t, Error::PeerGone as u64);
        } else {
            th(t).state = State::AwaitReply;
        }
    }
    while let Some(t) = pop(&mut e.recv_head) {
        th(t).ep = null_mut();
        sched::wake_with(t, Error::PeerGone as u64);
    }
}
