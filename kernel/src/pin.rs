//! DMA pins (`pin`, `unpin`, and the pin count `translate` reports): a driver pins the pages of a
//! request before its device is told their physical addresses and unpins them when the device
//! is done, so that the memory server never hands a frame a device may still write to a new
//! owner (docs/memory.md, "DMA and frame reuse"). The counting is `sawmill_kcore::pins`; this
//! module checks the caller's mappings, keeps each task's pin list (charged to the task's
//! factory when its first pin is taken) and releases a task's pins when it dies.
//!
//! Touches: the caller's page tables (read only), its UTCB message words (the addresses), the
//! pin table in the kernel state, and the task's factory charge.
use crate::error::SysResult;
use crate::factory;
use crate::obj::{utcb, Task, Thread};
use crate::paging;
use crate::state::kernel;
use alloc::boxed::Box;
use sawmill_abi::{pin, Error};
use sawmill_kcore::pins::{PinList, PinTable};

const PAGE: u64 = 4096;
/// What a task's pin list costs its factory.
const LIST_BYTES: u64 = core::mem::size_of::<PinList>() as u64;

/// The pins of `t` (its list made and charged on first use).
fn list_of(t: *mut Task) -> Result<&'static mut PinList, Error> {
    // SAFETY: live task (the caller's own).
    let task = unsafe { &mut *t };
    if task.pins.is_none() {
        factory::charge(task.hdr.factory, LIST_BYTES)?;
        task.pins = Some(Box::new(PinList::new()));
    }
    Ok(task.pins.as_deref_mut().unwrap())
}

/// `pin(vaddr, pages, flags)` for the calling thread: all pages or none. The pages are
/// `vaddr` and the pages after it, or with `LIST` the addresses in the message words.
pub fn pin(cur: *mut Thread, va: u64, pages: u64, flags: u64) -> SysResult {
    if flags & !(pin::DEVICE_WRITES | pin::LIST) != 0 {
        return Err(reject!(Error::Invalid, "unknown pin flags"));
    }
    if pages == 0 || pages > pin::MAX_PAGES {
        return Err(reject!(Error::Invalid, "pin of 0 or more than 64 pages"));
    }
    let listed = flags & pin::LIST != 0;
    if !listed && (va & (PAGE - 1) != 0 || !paging::user_range_ok(va, pages * PAGE)) {
        return Err(reject!(
            Error::Invalid,
            "pin address unaligned or outside user space"
        ));
    }
    // SAFETY: the current thread is live and bound to a live task.
    let task = unsafe { (*cur).task };
    // SAFETY: live task.
    let pml4 = unsafe { (*task).pml4 };
    let list = list_of(task)?;
    let before = list.len();
    if before + pages as usize > pin::PER_TASK as usize {
        return Err(reject!(
            Error::NoMemory,
            "pin list full (256 pins per task)"
        ));
    }
    // Pins are taken page by page (one look-up each) and taken back if a later page is refused.
    let u = utcb(cur);
    for i in 0..pages as usize {
        let v = if listed {
            u.mr[i]
        } else {
            va + i as u64 * PAGE
        };
        let refused = if listed && (v & (PAGE - 1) != 0 || !paging::user_range_ok(v, PAGE)) {
            Some(reject!(
                Error::Invalid,
                "pin address unaligned or outside user space"
            ))
        } else {
            match paging::translate(pml4, v) {
                None => Some(reject!(Error::Fault, "pin of a page not mapped")),
                Some((_, pte)) if flags & pin::DEVICE_WRITES != 0 && pte & paging::W == 0 => {
                    Some(reject!(
                        Error::NoRights,
                        "pin for device writes of a read-only mapping"
                    ))
                }
                Some((p, _)) => match kernel().pins.pin(list, p) {
                    Ok(()) => {
                        u.mr[i] = p & !(PAGE - 1);
                        None
                    }
                    // The list has room (checked above): only "not RAM" is left.
                    Err(_) => Some(reject!(
                        Error::Invalid,
                        "pin of a page that is not user RAM"
                    )),
                },
            }
        };
        if let Some(r) = refused {
            kernel().pins.truncate(list, before);
            return Err(r);
        }
    }
    // SAFETY: live current thread.
    unsafe { (*cur).frame.rdi = u.mr[0] };
    Ok(())
}

/// `unpin(paddr, flags)` for the calling thread; `rdi` = pins released.
pub fn unpin(cur: *mut Thread, pa: u64, flags: u64) -> SysResult {
    if flags & !pin::UNPIN_ALL != 0 {
        return Err(reject!(Error::Invalid, "unknown unpin flags"));
    }
    // SAFETY: the current thread is live and bound to a live task.
    let task = unsafe { &mut *(*cur).task };
    let n = match task.pins.as_deref_mut() {
        Some(l) if flags & pin::UNPIN_ALL != 0 => kernel().pins.release_all(l) as u64,
        Some(l) => match kernel().pins.unpin(l, pa) {
            Ok(()) => 1,
            Err(_) => return Err(reject!(Error::Invalid, "no pin of this task on that frame")),
        },
        None if flags & pin::UNPIN_ALL != 0 => 0,
        None => return Err(reject!(Error::Invalid, "no pin of this task on that frame")),
    };
    // SAFETY: live current thread.
    unsafe { (*cur).frame.rdi = n };
    Ok(())
}

/// Pins on the frame holding `pa` (0 if it is not user RAM).
pub fn count(pa: u64) -> u64 {
    kernel().pins.count(pa) as u64
}

/// A dying task's pins go, and its list's charge returns to its factory.
pub fn release_task(t: *mut Task) {
    // SAFETY: live task (being killed).
    let task = unsafe { &mut *t };
    if let Some(mut l) = task.pins.take() {
        kernel().pins.release_all(&mut l);
        factory::uncharge(task.hdr.factory, LIST_BYTES);
    }
}

/// The pin table for the user RAM `mem` set aside at boot (built once, with the kernel state).
pub fn table_for_user_ram() -> PinTable {
    let p = crate::mem::phys();
    let mut r = [(0u64, 0u64); crate::mem::MAX_RANGES];
    for (i, u) in p.user[..p.nuser].iter().enumerate() {
        r[i] = (u.start, u.end);
    }
    PinTable::new(&r[..p.nuser])
}
