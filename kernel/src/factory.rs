//! Factories: quotas of kernel memory. Every object, page-table frame, UTCB page and mapping
//! node is charged to one; a factory holds a reference on its parent while it lives.
use crate::cap::incref;
use crate::mem::{kmem_free, phys, PAGE};
use crate::obj::{Factory, Hdr, Obj, Task};
use alloc::boxed::Box;
use sawmill_abi::Error;

/// Charges `bytes` to factory `f`. Fails when the quota (or kernel memory) would be exceeded.
pub fn charge(f: *mut Factory, bytes: u64) -> Result<(), Error> {
    if f.is_null() {
        return Ok(());
    }
    // SAFETY: factories stay alive while anything charged to them exists (they hold a ref).
    let f = unsafe { &mut *f };
    if f.used + bytes > f.limit {
        return Err(Error::NoMemory);
    }
    // Leave headroom so the kernel itself can always finish an operation it has started.
    if kmem_free() < bytes + 64 * 1024 {
        return Err(Error::NoMemory);
    }
    f.used += bytes;
    Ok(())
}

pub fn uncharge(f: *mut Factory, bytes: u64) {
    if !f.is_null() {
        // SAFETY: as in `charge`.
        let f = unsafe { &mut *f };
        f.used = f.used.saturating_sub(bytes);
    }
}

/// A page-table frame for `t`, charged to its factory.
pub fn pt_alloc(t: *mut Task) -> Option<u64> {
    // SAFETY: t is a live task.
    let task = unsafe { &mut *t };
    charge(task.hdr.factory, PAGE).ok()?;
    match phys().alloc_frame() {
        Some(p) => {
            task.pt_frames += 1;
            task.pt_list.add(p);
            Some(p)
        }
        None => {
            uncharge(task.hdr.factory, PAGE);
            None
        }
    }
}

/// The header of a new object charged `charge_` bytes to `f`; takes a reference on `f`.
pub fn hdr(f: *mut Factory, charge_: u64) -> Hdr {
    if !f.is_null() {
        incref(Obj::Factory(f));
    }
    Hdr {
        refs: 0,
        factory: f,
        charge: charge_,
    }
}

pub fn new_factory(parent: *mut Factory, limit: u64) -> Result<*mut Factory, Error> {
    let size = core::mem::size_of::<Factory>() as u64 + limit;
    charge(parent, size)?;
    Ok(Box::into_raw(Box::new(Factory {
        hdr: hdr(parent, size),
        limit,
        used: 0,
    })))
}

/// `factory_info`: bytes used and the limit.
pub fn info(f: *mut Factory) -> (u64, u64) {
    // SAFETY: live factory (a capability holds it).
    let fa = unsafe { &*f };
    (fa.used, fa.limit)
}
