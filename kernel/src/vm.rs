//! Memory mapping between address spaces: map items and `task_map` (each page derived from its
//! source in the mapping database), replacement of what a destination held, the kernel's own
//! (root) mappings, device memory, and clearing the page tables of revoked mappings.
use crate::factory;
use crate::mem::PAGE;
use crate::obj::Task;
use crate::paging;
use crate::state::kernel;
use sawmill_abi::{map, Error};
use sawmill_kcore::mapdb::{Mapping, MdbError, NODE_BYTES};

/// Clears the page-table entries of mappings removed from the database and returns their node
/// charges.
pub fn unmap_removed(v: &[Mapping]) {
    crate::iommu::revoked(v);
    // The page table of the last 4 KiB entry cleared, as (PML4, its 2 MiB window and table):
    // a task's removed mappings come in runs of neighbours (a walk from the top was ~35
    // instructions of every page of every process that ended).
    let mut last: Option<(u64, paging::LastTable)> = None;
    for m in v {
        let t = kernel()
            .tasks
            .get(m.space as usize)
            .copied()
            .unwrap_or(core::ptr::null_mut());
        if t.is_null() {
            continue;
        }
        // SAFETY: live task (tasks[] holds only live ones).
        let task = unsafe { &mut *t };
        if !task.dead {
            if last.is_none_or(|(pml4, _)| pml4 != task.pml4) {
                last = Some((task.pml4, None));
            }
            if let Some((pml4, window)) = last.as_mut() {
                clear_entry(*pml4, m, window);
            }
            // A lent page table is in other spaces too, at the same address.
            if kernel().loaded_cr3 == task.pml4 || task.lent > 0 {
                crate::arch::invlpg(m.vaddr);
            }
        }
        if task.nodes > 0 {
            task.nodes -= 1;
            factory::uncharge(task.hdr.factory, NODE_BYTES as u64);
        }
    }
}

/// Clears the entry of mapping `m` in the page tables at `pml4` (flushing it from a processor
/// that may hold it is the caller's business). `last` remembers the page table of the last
/// 4 KiB entry cleared, so that a run of neighbours walks the levels above once.
pub fn clear_entry(pml4: u64, m: &Mapping, last: &mut paging::LastTable) {
    if m.huge {
        paging::unmap(pml4, m.vaddr, true);
        return;
    }
    paging::clear_in_run(pml4, m.vaddr, last);
}

/// Clears the write bit of the page-table entries of mappings the database lowered to
/// read-only. Devices lose them (as on a revoke): a domain entry carries no rights to lower.
fn write_protected(v: &[Mapping]) {
    crate::iommu::revoked(v);
    for m in v {
        let t = kernel()
            .tasks
            .get(m.space as usize)
            .copied()
            .unwrap_or(core::ptr::null_mut());
        if t.is_null() {
            continue;
        }
        // SAFETY: live task (tasks[] holds only live ones).
        let task = unsafe { &mut *t };
        if !task.dead {
            paging::write_protect(task.pml4, m.vaddr, m.huge);
            // A lent page table is in other spaces too, at the same address.
            if kernel().loaded_cr3 == task.pml4 || task.lent > 0 {
                crate::arch::invlpg(m.vaddr);
            }
        }
    }
}

/// `unmap`: revokes what was derived from each page of `[va, va + pages)` of task `t` (and the
/// pages themselves with `UNMAP_SELF`); with `UNMAP_WRITE` lowers them to read-only instead,
/// leaving the pages whose frames have DMA pins as they are. Returns how many were left so, or
/// with `UNMAP_PINS` how many of the pages' frames have pins (else 0).
pub fn unmap_range(t: *mut Task, va: u64, pages: u64, flags: u64) -> Result<u64, Error> {
    if pages > (1 << 20)
        || va & 0xfff != 0
        || !paging::user_range_ok(va, pages * PAGE)
        || flags & !(sawmill_abi::UNMAP_SELF | sawmill_abi::UNMAP_WRITE | sawmill_abi::UNMAP_PINS)
            != 0
    {
        return Err(Error::Invalid);
    }
    let with_self = flags & sawmill_abi::UNMAP_SELF != 0;
    // SAFETY: live task.
    let id = unsafe { (*t).id };
    let mut gone = alloc::vec::Vec::new();
    if flags & sawmill_abi::UNMAP_WRITE != 0 {
        let mut pinned = 0;
        for i in 0..pages {
            let a = va + i * PAGE;
            let Some(node) = kernel().mapdb.find_id(id, a) else {
                continue;
            };
            let m = kernel().mapdb.get(node);
            let pa = if m.huge {
                m.paddr + (a - m.vaddr)
            } else {
                m.paddr
            };
            // A device may write the frame: a read-only mapping would not stop it.
            if crate::pin::count(pa) > 0 {
                pinned += 1;
                continue;
            }
            kernel()
                .mapdb
                .protect_node(node, with_self, map::WRITE, &mut gone);
        }
        write_protected(&gone);
        return Ok(pinned);
    }
    let count_pins = flags & sawmill_abi::UNMAP_PINS != 0;
    let mut pinned = 0;
    for i in 0..pages {
        let a = va + i * PAGE;
        let Some(node) = kernel().mapdb.find_id(id, a) else {
            continue;
        };
        if count_pins {
            let m = kernel().mapdb.get(node);
            let pa = if m.huge {
                m.paddr + (a - m.vaddr)
            } else {
                m.paddr
            };
            pinned += (crate::pin::count(pa) > 0) as u64;
        }
        kernel().mapdb.revoke_node(node, with_self, &mut gone);
    }
    unmap_removed(&gone);
    Ok(pinned)
}

/// `map_phys`: device memory (never RAM) at `va` of task `t`, uncached.
pub fn map_device(t: *mut Task, pa: u64, va: u64, pages: u64) -> Result<(), Error> {
    if pa & 0xfff != 0
        || va & 0xfff != 0
        || pages == 0
        || pages > 65536
        || pa >= (1 << 46)
        || !paging::user_range_ok(va, pages * PAGE)
    {
        return Err(Error::Invalid);
    }
    for i in 0..pages {
        let p = pa + i * PAGE;
        let k = kernel();
        if k.ram[..k.nram].iter().any(|r| p >= r.start && p < r.end) || crate::iommu::owns(p) {
            return Err(Error::Invalid);
        }
    }
    for i in 0..pages {
        map_root(
            t,
            va + i * PAGE,
            pa + i * PAGE,
            map::READ | map::WRITE | map::UNCACHED,
        )?;
    }
    Ok(())
}

/// Maps `pages` pages of `st`'s address space at `src` into `dt` at `dst`, each derived from the
/// source mapping in the mapping database. Existing mappings at the destination are replaced.
pub fn map_pages(
    st: *mut Task,
    src: u64,
    dt: *mut Task,
    dst: u64,
    pages: u64,
    flags: u64,
) -> Result<(), Error> {
    let huge = flags & map::HUGE != 0;
    let size: u64 = if huge { 0x20_0000 } else { 0x1000 };
    if pages == 0 || pages > (1 << 20) || !src.is_multiple_of(size) || !dst.is_multiple_of(size) {
        return Err(Error::Invalid);
    }
    let len = pages.checked_mul(size).ok_or(Error::Invalid)?;
    if !paging::user_range_ok(src, len) || !paging::user_range_ok(dst, len) {
        return Err(Error::Invalid);
    }
    // SAFETY: both tasks are live (held by capabilities or current).
    let (s, d) = unsafe { (&mut *st, &mut *dt) };
    if s.dead || d.dead {
        return Err(Error::PeerGone);
    }
    if st == dt && src < dst + len && dst < src + len {
        return Err(Error::Invalid);
    }
    // The destination's page table of the last 4 KiB page mapped: (its 2 MiB window, frame).
    // Nothing in this loop frees a page table but `take_empty_pt`, which only 2 MiB pages use.
    let mut last_pt: Option<(u64, u64)> = None;
    for i in 0..pages {
        let sa = src + i * size;
        let da = dst + i * size;
        let mut sid = kernel().mapdb.find_id(s.id, sa).ok_or(Error::Fault)?;
        let m = kernel().mapdb.get(sid);
        if huge && !m.huge {
            return Err(Error::Invalid);
        }
        let pa = if m.huge && !huge {
            m.paddr + (sa - m.vaddr)
        } else {
            m.paddr
        };
        let r = (flags & (map::READ | map::WRITE | map::EXEC) | map::READ) & m.rights
            | (m.rights & map::UNCACHED);
        let grant = flags & map::GRANT != 0 && m.huge == huge;
        // What the destination gets unless the source moves there whole (a grant).
        let child = Mapping {
            space: d.id,
            vaddr: da,
            paddr: pa,
            huge,
            rights: r,
        };
        // The common case (every page of a map item): the place is probed once, by the
        // insertion itself, not first by `vacant` (~90 instructions a page). A task at its
        // quota goes the general way, which frees what it replaces before charging the page.
        if !huge && !grant && factory::charge(d.hdr.factory, NODE_BYTES as u64).is_ok() {
            s.mapped_out = true;
            let inserted = match kernel().mapdb.insert_child_of(sid, child) {
                Err(MdbError::Exists) => replace_with(d.id, da, s.id, sa, child),
                other => other.map_err(|_| Error::Busy),
            };
            if let Err(e) = inserted {
                factory::uncharge(d.hdr.factory, NODE_BYTES as u64);
                return Err(e);
            }
            d.nodes += 1;
            let pte = paging::pte_flags(r, r & map::UNCACHED != 0);
            if !map_4k(d.pml4, dt, da, pa, pte, &mut last_pt) {
                return Err(unmap_failed(d.id, da));
            }
            continue;
        }
        // Replace what is there: the mapping covering `da` (4 KiB, or 2 MiB around it) and, for
        // a 2 MiB destination, every 4 KiB mapping inside it; no other 4 KiB mapping. (Revoking
        // also the mapping at `da`'s 2 MiB boundary, as this once did, took a neighbour with it:
        // scenario `remap`, docs/ARCHITECTURE.md 3.6.)
        let vacant = match kernel().mapdb.vacant(d.id, da, size) {
            Some(v) => v,
            None => {
                let mut gone = alloc::vec::Vec::new();
                if let Some(id) = kernel().mapdb.find_id(d.id, da) {
                    let old = kernel().mapdb.get(id);
                    kernel().mapdb.revoke(d.id, old.vaddr, true, &mut gone);
                }
                if huge {
                    let mut a = da;
                    while a < da + size {
                        kernel().mapdb.revoke(d.id, a, true, &mut gone);
                        a += 0x1000;
                    }
                }
                unmap_removed(&gone);
                let v = kernel().mapdb.vacant(d.id, da, size).ok_or(Error::Busy)?;
                // Revocation may have freed and reused nodes: look the source up again.
                sid = kernel().mapdb.find_id(s.id, sa).ok_or(Error::Fault)?;
                v
            }
        };
        factory::charge(d.hdr.factory, NODE_BYTES as u64)?;
        // A granted page keeps its dirty bit (`task_dirty`: moved back and forth, a written page
        // must not come back looking clean).
        let mut carried = 0;
        if grant {
            carried = paging::pte(s.pml4, m.vaddr) & paging::D;
            // Grant: the mapping moves, keeping what was derived from it.
            paging::unmap(s.pml4, m.vaddr, m.huge);
            crate::iommu::unmapped(s.id, m.vaddr, m.huge);
            if kernel().loaded_cr3 == s.pml4 || s.lent > 0 {
                crate::arch::invlpg(m.vaddr);
            }
            let _ = kernel().mapdb.move_mapping(s.id, m.vaddr, d.id, da);
            s.nodes = s.nodes.saturating_sub(1);
            factory::uncharge(s.hdr.factory, NODE_BYTES as u64);
        } else {
            // Another entry for the same frame: writes through it show in no entry of `s`.
            s.mapped_out = true;
            if kernel()
                .mapdb
                .insert_child_into(sid, child, vacant)
                .is_err()
            {
                factory::uncharge(d.hdr.factory, NODE_BYTES as u64);
                return Err(Error::Busy);
            }
        }
        d.nodes += 1;
        // 4 KiB mappings that were here may have left an empty page table in the slot (kept if
        // the task lends page tables: it may be one of them).
        if huge && d.lent == 0 {
            if let Some(pt) = paging::take_empty_pt(d.pml4, da) {
                crate::mem::phys().free_frame(pt);
                d.pt_frames -= 1;
                d.pt_list.remove(pt);
                factory::uncharge(d.hdr.factory, crate::mem::PAGE);
                if kernel().loaded_cr3 == d.pml4 {
                    crate::arch::write_cr3(d.pml4);
                }
            }
        }
        let pte = paging::pte_flags(r, r & map::UNCACHED != 0) | carried;
        let mapped = if huge {
            paging::map(d.pml4, da, pa, pte, true, &mut || factory::pt_alloc(dt))
        } else {
            map_4k(d.pml4, dt, da, pa, pte, &mut last_pt)
        };
        if !mapped {
            return Err(unmap_failed(d.id, da));
        }
    }
    Ok(())
}

/// Enters `da` → `pa` (4 KiB, entry bits `pte`) in `dt`'s page tables (at `pml4`), making the
/// page table as needed; `last_pt` as in [`map_pages`] (a run of pages walks the levels above
/// once per page table).
#[inline(always)]
fn map_4k(
    pml4: u64,
    dt: *mut Task,
    da: u64,
    pa: u64,
    pte: u64,
    last_pt: &mut Option<(u64, u64)>,
) -> bool {
    let window = da >> 21;
    let pt = match *last_pt {
        Some((w, pt)) if w == window => Some(pt),
        _ => paging::page_table(pml4, da, &mut || factory::pt_alloc(dt)),
    };
    *last_pt = pt.map(|pt| (window, pt));
    pt.is_some_and(|pt| paging::map_in(pt, da, pa, pte))
}

/// [`map_pages`]' page `child` at `da` of space `dst`, where a mapping is already: that one
/// goes (with what was derived from it) and `child` takes its place, derived from the mapping
/// at `sa` of space `src` (looked up again: the revocation may have freed and reused nodes, or
/// taken the source itself).
#[cold]
#[inline(never)]
fn replace_with(dst: u32, da: u64, src: u32, sa: u64, child: Mapping) -> Result<(), Error> {
    let mut gone = alloc::vec::Vec::new();
    if let Some(id) = kernel().mapdb.find_id(dst, da) {
        let old = kernel().mapdb.get(id);
        kernel().mapdb.revoke(dst, old.vaddr, true, &mut gone);
    }
    unmap_removed(&gone);
    let sid = kernel().mapdb.find_id(src, sa).ok_or(Error::Fault)?;
    kernel()
        .mapdb
        .insert_child_of(sid, child)
        .map_err(|_| Error::Busy)
}

/// A page [`map_pages`] recorded but could not enter in the page table (no memory for one):
/// the record goes again.
#[cold]
#[inline(never)]
fn unmap_failed(dst: u32, da: u64) -> Error {
    let mut gone = alloc::vec::Vec::new();
    kernel().mapdb.revoke(dst, da, true, &mut gone);
    unmap_removed(&gone);
    Error::NoMemory
}

/// `task_dirty`: bit i set unless page `dst + i` of `dt` is still the frame `st` maps at
/// `src + i`, with its dirty bit clear, in a task that never mapped a page of its own out.
pub fn dirty_mask(
    st: *mut Task,
    src: u64,
    dt: *mut Task,
    dst: u64,
    pages: u64,
) -> Result<u64, Error> {
    if pages == 0
        || pages > 64
        || src & 0xfff != 0
        || dst & 0xfff != 0
        || !paging::user_range_ok(src, pages * PAGE)
        || !paging::user_range_ok(dst, pages * PAGE)
    {
        return Err(Error::Invalid);
    }
    let all = u64::MAX >> (64 - pages);
    // SAFETY: both tasks are live (held by capabilities or current).
    let (s, d) = unsafe { (&*st, &*dt) };
    if d.mapped_out {
        return Ok(all);
    }
    let mut mask = 0;
    let (mut their_pt, mut our_pt) = (None, None);
    for i in 0..pages {
        let theirs = paging::pte_in_run(d.pml4, dst + i * PAGE, &mut their_pt);
        let ours = paging::pte_in_run(s.pml4, src + i * PAGE, &mut our_pt);
        let clean = theirs & ours & paging::P != 0
            && theirs & paging::D == 0
            && ours & paging::ADDR == theirs & paging::ADDR;
        if !clean {
            mask |= 1 << i;
        }
    }
    Ok(mask)
}

/// Records and installs a kernel-made (root) mapping.
pub fn map_root(t: *mut Task, va: u64, pa: u64, rights_: u64) -> Result<(), Error> {
    map_root_sized(t, va, pa, rights_, false)
}

/// As `map_root`, with a 2 MiB page if `huge`.
pub fn map_root_sized(
    t: *mut Task,
    va: u64,
    pa: u64,
    rights_: u64,
    huge: bool,
) -> Result<(), Error> {
    // SAFETY: live task.
    let task = unsafe { &mut *t };
    factory::charge(task.hdr.factory, NODE_BYTES as u64)?;
    if kernel()
        .mapdb
        .insert_root(Mapping {
            space: task.id,
            vaddr: va,
            paddr: pa,
            huge,
            rights: rights_,
        })
        .is_err()
    {
        factory::uncharge(task.hdr.factory, NODE_BYTES as u64);
        return Err(Error::Busy);
    }
    task.nodes += 1;
    let mut alloc = || factory::pt_alloc(t);
    if !paging::map(
        task.pml4,
        va,
        pa,
        paging::pte_flags(rights_, rights_ & map::UNCACHED != 0),
        huge,
        &mut alloc,
    ) {
        let mut gone = alloc::vec::Vec::new();
        kernel().mapdb.revoke(task.id, va, true, &mut gone);
        unmap_removed(&gone);
        return Err(Error::NoMemory);
    }
    Ok(())
}
