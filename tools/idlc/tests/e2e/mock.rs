//! A loop-back mock of the kernel's IPC for host tests of generated code: `call`/`send` copy the
//! message (words 4.. and capability items through the two UTCBs) to a registered server
//! function on the same thread and copy its reply back, as the real kernel does between threads.
use std::cell::RefCell;

pub use sawmill_abi::{MsgTag, Utcb};

#[path = "wire.rs"]
mod wire;
pub use wire::*;

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
        Kernel { client, server, cur: client, badge: 0, sent: vec![], returned: vec![], deleted: vec![], requests: 0, fail_next: 0 }
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
    K.with(|k| k.borrow_mut().deleted.push(slot));
    0
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

pub fn recv(_ep: u64, _flags: u64) -> IpcResult {
    unimplemented!("the mock has no server threads")
}

pub fn reply_recv(_ep: u64, _tag: MsgTag, _w: [u64; 4]) -> IpcResult {
    unimplemented!("the mock has no server threads")
}
