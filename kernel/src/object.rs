//! Object lifetimes across kinds: creation by a factory (`factory_create`) and destruction when
//! the last reference goes. This is the one module that reaches every kind of object; the
//! per-kind modules below it never destroy anything themselves, they queue dropped references
//! (`cap::release`), and [`reap`] accounts for them on every way out of the kernel, through a
//! work list rather than recursion.
use crate::cap;
use crate::endpoint;
use crate::error::SysResult;
use crate::factory::{charge, hdr, new_factory, uncharge};
use crate::irq;
use crate::notification;
use crate::obj::{Cap, Endpoint, Factory, Obj, Task};
use crate::sched;
use crate::senders;
use crate::state::kernel;
use crate::task;
use crate::thread;
use alloc::boxed::Box;
use sawmill_abi::{rights, Error, ObjKind};

pub fn new_endpoint(f: *mut Factory) -> Result<*mut Endpoint, Error> {
    let size = core::mem::size_of::<Endpoint>() as u64;
    charge(f, size)?;
    Ok(Box::into_raw(Box::new(Endpoint {
        hdr: hdr(f, size),
        send_head: core::ptr::null_mut(),
        recv_head: core::ptr::null_mut(),
        notice_head: core::ptr::null_mut(),
        notice_tail: core::ptr::null_mut(),
        watches: core::ptr::null_mut(),
    })))
}

/// `factory_create`: a new object of `kind` charged to `fac`, its capability in slot `dst` of
/// `task`. `arg` as `ObjKind` documents.
pub fn create(task: *mut Task, fac: *mut Factory, kind: u64, dst: u64, arg: u64) -> SysResult {
    let d = cap::slot(task, dst)?;
    if !cap::cs(kernel().cspace.is_free(d))? {
        return Err(reject!(Error::SlotFull, "destination slot occupied"));
    }
    let kind =
        ObjKind::try_from(kind).map_err(|_| reject!(Error::Invalid, "no such object kind"))?;
    let o = match kind {
        ObjKind::Task => {
            // arg: slots in bits 0..32, the new task's priority ceiling in bits 32..40 (0 =
            // ours); never above our own ceiling.
            // SAFETY: live task.
            let mine = unsafe { (*task).max_prio };
            let want = ((arg >> 32) & 0xff) as u8;
            let mp = if want == 0 { mine } else { want.min(mine) };
            if arg >> 40 != 0 {
                return Err(reject!(Error::Invalid, "task argument has bits above 40"));
            }
            let slots = arg & 0xffff_ffff;
            if slots == 0 || slots > 4096 {
                return Err(reject!(Error::Invalid, "task table not 1..4096 slots"));
            }
            Obj::Task(task::new_task(fac, slots, mp)?)
        }
        ObjKind::Thread => Obj::Thread(thread::new_thread(fac)?),
        ObjKind::Endpoint => Obj::Endpoint(new_endpoint(fac)?),
        ObjKind::Notification => Obj::Notification(notification::new_notification(fac)?),
        ObjKind::Factory => {
            if arg > (1 << 40) {
                return Err(reject!(Error::Invalid, "factory quota above 1 TiB"));
            }
            Obj::Factory(new_factory(fac, arg)?)
        }
    };
    cap::insert_root(task, dst, Cap::new(o, rights::ALL, 0))?;
    Ok(())
}

/// Accounts for every queued dropped reference, destroying objects whose count reaches zero
/// (their own references are queued in turn). Called on every way out of the kernel.
#[inline(always)]
pub fn reap() {
    if !kernel().release.is_empty() {
        drain_release();
    }
}

#[inline(never)]
fn drain_release() {
    while let Some(c) = kernel().release.pop() {
        if !c.senders.is_null() {
            senders::holder_gone(c.senders);
        }
        if let Obj::Irq(l) = c.obj {
            irq::cap_gone(l);
            continue;
        }
        let Some(h) = cap::hdr_of(c.obj) else {
            continue;
        };
        // SAFETY: live object; we hold one of its references until here.
        let refs = unsafe {
            (*h).refs -= 1;
            (*h).refs
        };
        if refs == 0 {
            destroy(c.obj);
        }
    }
}

/// Frees an object whose last reference went away.
fn destroy(o: Obj) {
    // SAFETY: refs == 0, so nothing else points at the object any more (queues and waiters were
    // cleared by the kill paths, which run first here).
    unsafe {
        let (f, charge_) = match o {
            Obj::Task(p) => {
                task::kill_task(p);
                let fc = ((*p).hdr.factory, (*p).hdr.charge);
                kernel().tasks[(*p).id as usize] = core::ptr::null_mut();
                drop(Box::from_raw(p));
                fc
            }
            Obj::Thread(p) => {
                thread::kill_thread_silently(p);
                let fc = ((*p).hdr.factory, (*p).hdr.charge);
                if kernel().current == p {
                    kernel().current = core::ptr::null_mut();
                }
                sched::forget(p);
                drop(Box::from_raw(p));
                fc
            }
            Obj::Endpoint(p) => {
                endpoint::endpoint_gone(p);
                let fc = ((*p).hdr.factory, (*p).hdr.charge);
                drop(Box::from_raw(p));
                fc
            }
            Obj::Notification(p) => {
                notification::gone(p);
                let fc = ((*p).hdr.factory, (*p).hdr.charge);
                drop(Box::from_raw(p));
                fc
            }
            Obj::Factory(p) => {
                let fc = ((*p).hdr.factory, (*p).hdr.charge);
                drop(Box::from_raw(p));
                fc
            }
            Obj::Senders(p) => {
                // Its notice was delivered, dropped with its endpoint, or had nowhere to go.
                let fc = ((*p).hdr.factory, (*p).hdr.charge);
                drop(Box::from_raw(p));
                fc
            }
            _ => return,
        };
        uncharge(f, charge_);
        if !f.is_null() {
            cap::release(Cap::new(Obj::Factory(f), 0, 0));
        }
    }
}
