//! Watches on badges ("no more senders"): `cap_mint` with `mint::NO_SENDERS` makes one, every
//! capability carrying the badge (and every kernel reference made from one) is a holder, and
//! when the last holder goes the NO_SENDERS notice goes to the endpoint the minter named (the
//! counting rule is `sawmill_kcore::senders`; the queueing is `endpoint`'s). A client's death
//! deletes its capabilities, so drop and death are one mechanism. A watch is charged to the
//! minting task's own factory, so no client can make a server's kernel memory grow.
//!
//! Touches: the minter's capability table (through `cap`), its factory's quota, the notice
//! endpoint's watch list and queue (through `endpoint`). Never destroys: a watch whose notice
//! is done is released to `object`.
use crate::cap;
use crate::endpoint;
use crate::error::SysResult;
use crate::factory::{charge, hdr};
use crate::obj::{Cap, Obj, Senders, Task};
use crate::state::kernel;
use alloc::boxed::Box;
use core::ptr::null_mut;
use sawmill_abi::{rights, Error};
use sawmill_kcore::senders::{Dropped, SenderCount};

/// `cap_mint` with `NO_SENDERS`: derives endpoint capability `src` of `task` into `dst` with
/// `badge` and the rights `mask`, under a new watch whose notice goes to the endpoint in slot
/// `notice` (which needs SEND) with that capability's badge.
pub fn mint(task: *mut Task, src: u64, dst: u64, badge: u64, mask: u64, notice: u64) -> SysResult {
    let c = cap::lookup(task, src)
        .map_err(|_| reject!(Error::BadCap, "no capability in the source slot"))?;
    if !matches!(c.obj, Obj::Endpoint(_)) {
        return Err(reject!(
            Error::WrongKind,
            "a watched badge needs an endpoint"
        ));
    }
    if c.badge != 0 {
        return Err(reject!(
            Error::Invalid,
            "the source capability has a badge already"
        ));
    }
    if badge == 0 {
        return Err(reject!(
            Error::Invalid,
            "a watched mint needs a nonzero badge"
        ));
    }
    let (to, nc) = endpoint::ep_cap(task, notice, rights::SEND).map_err(|e| match e {
        Error::NoRights => reject!(Error::NoRights, "notice endpoint capability lacks SEND"),
        Error::WrongKind => reject!(Error::WrongKind, "notice capability is not an endpoint"),
        _ => reject!(Error::BadCap, "no capability in the notice slot"),
    })?;
    let d = cap::slot(task, dst)?;
    if !cap::cs(kernel().cspace.is_free(d))? {
        return Err(reject!(Error::SlotFull, "destination slot occupied"));
    }
    // SAFETY: live task.
    let f = unsafe { (*task).hdr.factory };
    let size = core::mem::size_of::<Senders>() as u64;
    charge(f, size).map_err(|_| reject!(Error::NoMemory, "the minter's quota is exhausted"))?;
    let mut h = hdr(f, size);
    // The watch's own reference: armed, then carrying its notice.
    h.refs = 1;
    let w = Box::into_raw(Box::new(Senders {
        hdr: h,
        count: SenderCount::minted(),
        badge,
        to,
        to_badge: nc.badge,
        next: null_mut(),
        prev: null_mut(),
    }));
    if let Err(e) = cap::derive_watched(task, src, dst, badge, mask, w) {
        // Not expected (source and destination were checked); the watch goes unannounced.
        cap::release(Cap::new(Obj::Senders(w), 0, 0));
        return Err(e.into());
    }
    endpoint::watch(to, w);
    Ok(())
}

/// A capability or kernel reference carrying watch `w` went away (from `object`'s release
/// queue). The last one sends the notice.
pub fn holder_gone(w: *mut Senders) {
    // SAFETY: a holder keeps its watch alive; this was one.
    if unsafe { (*w).count.drop_one() } == Dropped::Last && !endpoint::no_senders(w) {
        cap::release(Cap::new(Obj::Senders(w), 0, 0));
    }
}
