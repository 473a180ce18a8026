//! A loop-back mock of the kernel's IPC for host tests of generated code: `call`/`send` copy the
//! message (words 4.. and capability items through the two UTCBs) to a registered server
//! function on the same thread and copy its reply back, as the real kernel does between threads.
//! For the server loop (`serve.rs`), `recv`/`reply_recv` take messages from a script and log what
//! the loop did.
use std::cell::RefCell;
use std::collections::VecDeque;

pub use sawmill_abi::{MsgTag, Utcb};

#[path = "wire.rs"]
mod wire;
pub use wire::*;

/// No fault is ever armed in the mock (the fault point of `serve.rs`).
pub fn fault_word() -> &'static std::sync::atomic::AtomicU64 {
    static NONE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    &NONE
}

pub fn fault_fires(_w: &std::sync::atomic::AtomicU64) -> Option<Reply> {
    None
}

#[path = "serve.rs"]
mod serve;
pub use serve::*;

/// What the server loop did, in order (with the receive slots and window armed at the time).
#[derive(Clone, Debug, PartialEq)]
pub enum Ev {
    Recv { ep: u64, caps_in: [u64; 4], window: [u64; 2] },
    Reply { ep: u64, tag: MsgTag, w: [u64; 4], maps: Vec<[u64; 4]>, caps_in: [u64; 4], window: [u64; 2] },
    Delete(u64),
    Unmap(u64, u64, u64),
}

#[derive(Clone, Copy, Debug)]
pub struct IpcResult {
    pub err: u64,
    pub badge: u64,
    pub tag: MsgTag,
    pub w: [u64; 4],
}

type Handler = Box<dyn FnMut(&IpcResult) -> Reply>;

pub struct Kernel {
    pub client: *mut Utcb,
    pub server: *mut Utcb,
    pub cur: *mut Utcb,
    /// Badge the server sees.
    pub badge: u64,
    /// `(client slot, server slot)` of each capability sent in a request.
    pub sent: Vec<(u64, u64)>,
    /// `(server slot, client slot)` of each capability sent in a reply.
    pub returned: Vec<(u64, u64)>,
    /// Slots the server deleted.
    pub deleted: Vec<u64>,
    /// Requests the server saw.
    pub requests: u64,
    /// Error the next call fails with before reaching the server (0 = none).
    pub fail_next: u64,
    /// The messages the server loop receives next.
    pub inbox: VecDeque<IpcResult>,
    /// What the server loop did.
    pub log: Vec<Ev>,
}

thread_local! {
    pub static K: RefCell<Kernel> = RefCell::new(Kernel::new());
    static H: RefCell<Option<Handler>> = RefCell::new(None);
}

fn new_utcb() -> *mut Utcb {
    // SAFETY: Utcb is plain integers; all-zero is a valid value. Leaked for 'static.
    Box::into_raw(Box::new(unsafe { core::mem::zeroed::<Utcb>() }))
}

impl Kernel {
    fn new() -> Kernel {
        let client = new_utcb();
        let server = new_utcb();
        // SAFETY: freshly allocated.
        unsafe { (*server).caps_in = [100, 101, 102, 103] };
        Kernel { client, server, cur: client, badge: 0, sent: vec![], returned: vec![], deleted: vec![], requests: 0, fail_next: 0, inbox: VecDeque::new(), log: vec![] }
    }
}

/// Installs the server side of the loop-back and resets the bookkeeping.
pub fn set_server(badge: u64, h: impl FnMut(&IpcResult) -> Reply + 'static) {
    H.with(|x| *x.borrow_mut() = Some(Box::new(h)));
    K.with(|k| {
        let mut k = k.borrow_mut();
        k.badge = badge;
        k.sent.clear();
        k.returned.clear();
        k.deleted.clear();
        k.requests = 0;
    });
}

pub fn utcb() -> &'static mut Utcb {
    // SAFETY: single-threaded test; the pointers are leaked boxes.
    K.with(|k| unsafe { &mut *k.borrow().cur })
}

pub fn cap_delete(slot: u64) -> u64 {
    K.with(|k| {
        let mut k = k.borrow_mut();
        k.deleted.push(slot);
        k.log.push(Ev::Delete(slot));
    });
    0
}

pub fn unmap(addr: u64, pages: u64, flags: u64) -> u64 {
    K.with(|k| k.borrow_mut().log.push(Ev::Unmap(addr, pages, flags)));
    0
}

/// Runs `f` as the server thread with `script` as the messages it receives; returns what the
/// loop did. Receiving past the end of the script is a test failure.
pub fn run_loop<T>(script: Vec<IpcResult>, f: impl FnOnce() -> T) -> (T, Vec<Ev>) {
    K.with(|k| {
        let mut k = k.borrow_mut();
        k.inbox = script.into();
        k.log.clear();
        k.cur = k.server;
    });
    let r = f();
    K.with(|k| {
        let mut k = k.borrow_mut();
        k.cur = k.client;
        assert!(k.inbox.is_empty(), "the loop stopped before its script ended");
        (r, std::mem::take(&mut k.log))
    })
}

fn next_msg() -> IpcResult {
    K.with(|k| k.borrow_mut().inbox.pop_front()).expect("the loop received past its script")
}

fn armed() -> ([u64; 4], [u64; 2]) {
    let u = utcb();
    (u.caps_in, u.map_window)
}

fn transfer(from: *mut Utcb, to: *mut Utcb, tag: MsgTag) -> Vec<(u64, u64)> {
    // SAFETY: distinct leaked boxes, no other live references during the copy.
    let (f, t) = unsafe { (&mut *from, &mut *to) };
    let n = tag.words().min(64);
    for i in 4..n {
        t.mr[i] = f.mr[i];
    }
    (0..tag.caps().min(4)).map(|i| (f.caps_out[i], t.caps_in[i])).collect()
}

fn deliver(tag: MsgTag, w: [u64; 4]) -> Result<Reply, u64> {
    let (client, server, badge, fail) = K.with(|k| {
        let mut k = k.borrow_mut();
        let f = core::mem::take(&mut k.fail_next);
        (k.client, k.server, k.badge, f)
    });
    if fail != 0 {
        return Err(fail);
    }
    let sent = transfer(client, server, tag);
    K.with(|k| {
        let mut k = k.borrow_mut();
        k.sent.extend(sent);
        k.requests += 1;
        k.cur = server;
    });
    let m = IpcResult { err: 0, badge, tag, w };
    let mut h = H.with(|x| x.borrow_mut().take()).expect("no server installed");
    let r = h(&m);
    H.with(|x| *x.borrow_mut() = Some(h));
    K.with(|k| k.borrow_mut().cur = client);
    Ok(r)
}

pub fn call(_ep: u64, tag: MsgTag, w: [u64; 4]) -> IpcResult {
    let r = match deliver(tag, w) {
        Ok(r) => r,
        Err(e) => return IpcResult { err: e, badge: 0, tag: MsgTag(0), w: [0; 4] },
    };
    let (client, server) = K.with(|k| (k.borrow().client, k.borrow().server));
    let back = transfer(server, client, r.tag);
    K.with(|k| k.borrow_mut().returned.extend(back));
    IpcResult { err: 0, badge: 0, tag: r.tag, w: r.w }
}

pub fn send(_ep: u64, tag: MsgTag, w: [u64; 4]) -> u64 {
    match deliver(tag, w) {
        Ok(_) => 0,
        Err(e) => e,
    }
}

pub fn recv(ep: u64, _flags: u64) -> IpcResult {
    let (caps_in, window) = armed();
    K.with(|k| k.borrow_mut().log.push(Ev::Recv { ep, caps_in, window }));
    next_msg()
}

pub fn reply_recv(ep: u64, tag: MsgTag, w: [u64; 4]) -> IpcResult {
    let (caps_in, window) = armed();
    let maps = utcb().map_items[..tag.maps().min(4)].iter().map(|m| [m.src, m.dst, m.pages, m.flags]).collect();
    K.with(|k| k.borrow_mut().log.push(Ev::Reply { ep, tag, w, maps, caps_in, window }));
    next_msg()
}
