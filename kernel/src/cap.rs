//! Capabilities: slots of a task's table, derivation, deletion and revocation (the derivation
//! tree itself is `sawmill_kcore::cspace`), and the reference counts capabilities hold on
//! objects. A dropped reference is queued with [`release`]; `object::reap` accounts for it on
//! the way out of the kernel, so nothing here destroys an object.
use crate::obj::{Cap, Hdr, Obj, Senders, Task, Thread};
use crate::state::kernel;
use sawmill_abi::{rights, Error};
use sawmill_kcore::cspace::{CsError, SlotId};

/// Maps capability-space errors to ABI errors.
pub fn cs<T>(r: Result<T, CsError>) -> Result<T, Error> {
    r.map_err(|e| match e {
        CsError::BadSlot | CsError::Empty => Error::BadCap,
        CsError::Full => Error::SlotFull,
    })
}

/// The reference-counting header of an object, if it has one.
pub fn hdr_of(o: Obj) -> Option<*mut Hdr> {
    // SAFETY: the pointers in live capabilities point at live objects.
    unsafe {
        Some(match o {
            Obj::Task(p) => &mut (*p).hdr,
            Obj::Thread(p) => &mut (*p).hdr,
            Obj::Endpoint(p) => &mut (*p).hdr,
            Obj::Notification(p) => &mut (*p).hdr,
            Obj::Factory(p) => &mut (*p).hdr,
            Obj::Senders(p) => &mut (*p).hdr,
            _ => return None,
        })
    }
}

pub fn incref(o: Obj) {
    if let Obj::Irq(l) = o {
        kernel().irqs[l as usize].caps += 1;
    }
    if let Some(h) = hdr_of(o) {
        // SAFETY: live object.
        unsafe { (*h).refs += 1 };
    }
}

/// Takes the references a copy of `c` holds: on its object, and on its watch if it carries one
/// (every capability and kernel reference made from a watched capability is a holder).
pub fn hold(c: &Cap) {
    incref(c.obj);
    if !c.senders.is_null() {
        // SAFETY: a live capability keeps its watch alive (its count is not zero).
        unsafe { (*c.senders).count.add() };
    }
}

/// Queues a dropped reference; `object::reap` destroys objects whose count reaches zero.
pub fn release(c: Cap) {
    kernel().release.push(c);
}

pub fn slot(t: *mut Task, s: u64) -> Result<SlotId, Error> {
    // SAFETY: live task.
    let task = unsafe { &*t };
    if s >= kernel().cspace.table_len(task.table) as u64 {
        return Err(Error::BadCap);
    }
    Ok(SlotId {
        table: task.table,
        index: s as u32,
    })
}

/// The capability in slot `s` of task `t`.
#[inline(always)]
pub fn lookup(t: *mut Task, s: u64) -> Result<Cap, Error> {
    // SAFETY: live task, whose view is of its own live table (emptied before the table goes).
    unsafe { (*t).slots.cap_at(s).copied().ok_or(Error::BadCap) }
}

/// Task `t`'s view of its table, taken again after a capability went into it (the table may
/// have made more slots: `CSpace::create_table`).
fn refresh_view(t: *mut Task) {
    // SAFETY: live task; a dead one's view stays empty.
    let task = unsafe { &mut *t };
    if !task.dead {
        task.slots = kernel().cspace.view(task.table);
    }
}

/// Inserts an original capability; takes a reference.
pub fn insert_root(t: *mut Task, s: u64, c: Cap) -> Result<(), Error> {
    let id = slot(t, s)?;
    cs(kernel().cspace.insert_root(id, c))?;
    refresh_view(t);
    hold(&c);
    Ok(())
}

/// Derives `src` of task `st` into `dst` of task `dt` with a badge (if the source has none) and
/// a rights mask.
pub fn derive(
    st: *mut Task,
    src: u64,
    dt: *mut Task,
    dst: u64,
    badge: Option<u64>,
    mask: u64,
) -> Result<(), Error> {
    let s = slot(st, src)?;
    let d = slot(dt, dst)?;
    let c = *cs(kernel().cspace.get(s))?;
    let nc = Cap {
        obj: c.obj,
        rights: c.rights & mask,
        badge: match badge {
            Some(b) if c.badge == 0 => b,
            Some(_) => return Err(Error::Invalid),
            None => c.badge,
        },
        senders: c.senders,
    };
    cs(kernel().cspace.insert_child(s, d, nc))?;
    refresh_view(dt);
    hold(&nc);
    Ok(())
}

/// Derives `src` of `t` into `dst` with `badge` and a rights mask, under the fresh watch `w`,
/// whose count already counts this capability. The caller checked that `src` holds an unbadged
/// capability and `dst` is free.
pub fn derive_watched(
    t: *mut Task,
    src: u64,
    dst: u64,
    badge: u64,
    mask: u64,
    w: *mut Senders,
) -> Result<(), Error> {
    let s = slot(t, src)?;
    let d = slot(t, dst)?;
    let c = *cs(kernel().cspace.get(s))?;
    let nc = Cap {
        obj: c.obj,
        rights: c.rights & mask,
        badge,
        senders: w,
    };
    cs(kernel().cspace.insert_child(s, d, nc))?;
    refresh_view(t);
    incref(c.obj);
    Ok(())
}

pub fn delete(t: *mut Task, s: u64) -> Result<(), Error> {
    let c = cs(kernel().cspace.delete(slot(t, s)?))?;
    release(c);
    Ok(())
}

pub fn revoke(t: *mut Task, s: u64) -> Result<(), Error> {
    let v = cs(kernel().cspace.revoke(slot(t, s)?))?;
    for c in v {
        release(c);
    }
    Ok(())
}

/// The capability in `slot` of `t`, if it has every right in `need`.
pub fn cap_of(t: *mut Task, slot: u64, need: u64) -> Result<Cap, Error> {
    let c = lookup(t, slot)?;
    if !crate::obj::has(&c, need) {
        return Err(Error::NoRights);
    }
    Ok(c)
}

/// The live task a CONTROL capability in `slot` names.
pub fn task_cap(t: *mut Task, slot: u64) -> Result<*mut Task, Error> {
    match cap_of(t, slot, rights::CONTROL)?.obj {
        Obj::Task(p) => {
            // SAFETY: capabilities point at live objects.
            if unsafe { (*p).dead } {
                return Err(Error::PeerGone);
            }
            Ok(p)
        }
        _ => Err(Error::WrongKind),
    }
}

/// The thread a CONTROL capability in `slot` names.
pub fn thread_cap(t: *mut Task, slot: u64) -> Result<*mut Thread, Error> {
    match cap_of(t, slot, rights::CONTROL)?.obj {
        Obj::Thread(p) => Ok(p),
        _ => Err(Error::WrongKind),
    }
}

/// The endpoint capability (with SEND) in `slot`, or none for slot `u64::MAX`.
pub fn endpoint_cap_opt(t: *mut Task, slot: u64) -> Result<Option<Cap>, Error> {
    if slot == u64::MAX {
        return Ok(None);
    }
    let c = cap_of(t, slot, rights::SEND)?;
    match c.obj {
        Obj::Endpoint(_) => Ok(Some(c)),
        _ => Err(Error::WrongKind),
    }
}
