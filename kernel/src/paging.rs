//! Four-level page tables of user address spaces. The upper half of every PML4 is shared with
//! the kernel's own; the lower half belongs to the task. Page-table frames come from the kernel
//! pool and are charged to the task's factory by the caller.
use crate::mem::{phys, phys_to_virt, PAGE};

pub const P: u64 = 1;
pub const W: u64 = 1 << 1;
pub const U: u64 = 1 << 2;
pub const PWT: u64 = 1 << 3;
pub const PCD: u64 = 1 << 4;
/// Set by the processor on a write through the entry; the kernel sets it for its own writes
/// into user memory (`copy_to_user`, `page_copy`), so that `task_dirty` sees every write.
pub const D: u64 = 1 << 6;
pub const PS: u64 = 1 << 7;
pub const NX: u64 = 1 << 63;
/// Software bit of a page-directory entry: the page table it points at is borrowed from another
/// task (`task_link`). Walks that would change or free what is under it stop there.
pub const LINKED: u64 = 1 << 9;
pub const ADDR: u64 = 0x000f_ffff_ffff_f000;

fn table(p: u64) -> &'static mut [u64; 512] {
    // SAFETY: p is the physical address of a page-table frame inside the direct map.
    unsafe { &mut *(phys_to_virt(p) as *mut [u64; 512]) }
}

extern "C" {
    static boot_pml4: [u64; 512];
}

/// Physical address of the kernel's own PML4 (the boot one).
pub fn kernel_pml4() -> u64 {
    // Taking the address of a linker symbol needs no unsafe.
    (core::ptr::addr_of!(boot_pml4) as u64) - 0xffff_ffff_8000_0000
}

/// Creates a PML4 sharing the kernel half. Returns its physical address.
pub fn new_space() -> Option<u64> {
    let p = phys().alloc_frame()?;
    let k = table(kernel_pml4());
    let t = table(p);
    t[256..].copy_from_slice(&k[256..]);
    Some(p)
}

/// Hardware flags for a user mapping with the given abi map rights.
pub fn pte_flags(rights: u64, uncached: bool) -> u64 {
    let mut f = P | U;
    if rights & sawmill_abi::map::WRITE != 0 {
        f |= W;
    }
    if rights & sawmill_abi::map::EXEC == 0 {
        f |= NX;
    }
    if uncached {
        f |= PCD | PWT;
    }
    f
}

/// Walks to the table at `level` (3 = PDPT, 2 = PD, 1 = PT) for `va`, creating tables with
/// `alloc` as needed. Returns None if allocation fails or a huge page or a borrowed page table
/// is in the way.
fn walk(pml4: u64, va: u64, level: u32, alloc: &mut dyn FnMut() -> Option<u64>) -> Option<u64> {
    let mut t = pml4;
    let mut l = 4;
    while l > level {
        let idx = ((va >> (12 + 9 * (l - 1))) & 511) as usize;
        let e = table(t)[idx];
        if e & P == 0 {
            let n = alloc()?;
            table(t)[idx] = n | P | W | U;
            t = n;
        } else if e & (PS | LINKED) != 0 {
            return None;
        } else {
            t = e & ADDR;
        }
        l -= 1;
    }
    Some(t)
}

/// Installs a 4 KiB (or 2 MiB with `huge`) mapping. The slot must be empty.
pub fn map(
    pml4: u64,
    va: u64,
    pa: u64,
    flags: u64,
    huge: bool,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> bool {
    let level = if huge { 2 } else { 1 };
    let Some(t) = walk(pml4, va, level, alloc) else {
        return false;
    };
    let idx = ((va >> if huge { 21 } else { 12 }) & 511) as usize;
    if table(t)[idx] & P != 0 {
        return false;
    }
    table(t)[idx] = pa | flags | if huge { PS } else { 0 };
    true
}

/// The page table holding `va`'s 4 KiB entry, created with `alloc` as needed (None: no memory,
/// or a 2 MiB page in the way). With [`map_in`], a run of pages walks the levels above once per
/// page table instead of once per page.
pub fn page_table(pml4: u64, va: u64, alloc: &mut dyn FnMut() -> Option<u64>) -> Option<u64> {
    walk(pml4, va, 1, alloc)
}

/// The page table of the last 2 MiB window a run of pages asked about: (window, its table if
/// the task has one of its own there).
pub type LastTable = Option<(u64, Option<u64>)>;

/// The page table holding `va`'s 4 KiB entry, if the task has one of its own there (none is
/// made; None also under a 2 MiB page or a borrowed table). `last` remembers the last window's,
/// so that a run of pages walks the levels above once per page table.
#[inline(always)]
fn existing_pt_in_run(pml4: u64, va: u64, last: &mut LastTable) -> Option<u64> {
    let window = va >> 21;
    match *last {
        Some((w, pt)) if w == window => pt,
        _ => {
            let pt = walk(pml4, va, 1, &mut || None);
            *last = Some((window, pt));
            pt
        }
    }
}

/// The 4 KiB entry of `va` (0 if none, or if a 2 MiB page or a borrowed table is in the way),
/// `last` as in [`existing_pt_in_run`].
pub fn pte_in_run(pml4: u64, va: u64, last: &mut LastTable) -> u64 {
    existing_pt_in_run(pml4, va, last).map_or(0, |t| table(t)[((va >> 12) & 511) as usize])
}

/// Clears `va`'s 4 KiB entry, if the task has a page table of its own there; `last` as in
/// [`existing_pt_in_run`].
#[inline(always)]
pub fn clear_in_run(pml4: u64, va: u64, last: &mut LastTable) {
    if let Some(t) = existing_pt_in_run(pml4, va, last) {
        table(t)[((va >> 12) & 511) as usize] = 0;
    }
}

/// Installs a 4 KiB mapping of `va` in `pt`, the page table [`page_table`] gave for `va`. The
/// entry must be empty.
pub fn map_in(pt: u64, va: u64, pa: u64, flags: u64) -> bool {
    let idx = ((va >> 12) & 511) as usize;
    if table(pt)[idx] & P != 0 {
        return false;
    }
    table(pt)[idx] = pa | flags;
    true
}

/// If the 2 MiB slot of `va` holds a page table with no present entry, detaches it and returns
/// its frame (the caller frees and uncharges it), so a 2 MiB page can take the slot.
pub fn take_empty_pt(pml4: u64, va: u64) -> Option<u64> {
    let mut none = || None;
    let pd = walk(pml4, va, 2, &mut none)?;
    let idx = ((va >> 21) & 511) as usize;
    let e = table(pd)[idx];
    if e & P == 0 || e & (PS | LINKED) != 0 {
        return None;
    }
    let pt = e & ADDR;
    if table(pt).iter().any(|&x| x & P != 0) {
        return None;
    }
    table(pd)[idx] = 0;
    Some(pt)
}

/// Links `src`'s page table of the 2 MiB window at `va` into `dst` (upper tables of `dst`
/// created with `alloc`), marked [`LINKED`]. Fault: `src` has no own page table there; Busy:
/// `dst`'s slot is taken; NoMemory: `alloc` failed.
pub fn link_pt(
    dst: u64,
    src: u64,
    va: u64,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<(), sawmill_abi::Error> {
    use sawmill_abi::Error;
    let mut none = || None;
    let pt = walk(src, va, 1, &mut none).ok_or(Error::Fault)?;
    let idx = ((va >> 21) & 511) as usize;
    let pd = walk(dst, va, 2, alloc).ok_or(Error::NoMemory)?;
    if table(pd)[idx] != 0 {
        return Err(Error::Busy);
    }
    table(pd)[idx] = pt | P | W | U | LINKED;
    Ok(())
}

/// Removes the borrowed page table of `va`'s window from `pml4` (if one is linked there).
pub fn unlink_pt(pml4: u64, va: u64) {
    let mut none = || None;
    if let Some(pd) = walk(pml4, va, 2, &mut none) {
        let idx = ((va >> 21) & 511) as usize;
        if table(pd)[idx] & LINKED != 0 {
            table(pd)[idx] = 0;
        }
    }
}

/// Removes a mapping; returns whether one was there.
pub fn unmap(pml4: u64, va: u64, huge: bool) -> bool {
    let mut none = || None;
    let level = if huge { 2 } else { 1 };
    let Some(t) = walk(pml4, va, level, &mut none) else {
        return false;
    };
    let idx = ((va >> if huge { 21 } else { 12 }) & 511) as usize;
    let was = table(t)[idx] & P != 0;
    table(t)[idx] = 0;
    was
}

/// Takes the write right from the entry of a mapping (a 4 KiB page, or the 2 MiB one with
/// `huge`); its other bits (dirty, accessed) stay.
pub fn write_protect(pml4: u64, va: u64, huge: bool) {
    let mut none = || None;
    let level = if huge { 2 } else { 1 };
    if let Some(t) = walk(pml4, va, level, &mut none) {
        let idx = ((va >> if huge { 21 } else { 12 }) & 511) as usize;
        table(t)[idx] &= !W;
    }
}

/// The present entry mapping a user address (a 4 KiB page's, or a 2 MiB page's with `PS`).
fn leaf(pml4: u64, va: u64) -> Option<&'static mut u64> {
    let mut t = pml4;
    for l in (1..=4).rev() {
        let idx = ((va >> (12 + 9 * (l - 1))) & 511) as usize;
        let e = table(t)[idx];
        if e & P == 0 {
            return None;
        }
        if l == 1 || (l == 2 && e & PS != 0) {
            return Some(&mut table(t)[idx]);
        }
        t = e & ADDR;
    }
    None
}

/// Translates a user address: (physical address, pte flags).
pub fn translate(pml4: u64, va: u64) -> Option<(u64, u64)> {
    let e = *leaf(pml4, va)?;
    if e & PS != 0 {
        return Some(((e & ADDR & !0x1f_ffff) + (va & 0x1f_ffff), e));
    }
    Some(((e & ADDR) + (va & 0xfff), e))
}

/// Marks the page mapping `va` written, as the processor does for a write through it (the
/// kernel's own writes go through the direct map).
pub fn mark_dirty(pml4: u64, va: u64) {
    if let Some(e) = leaf(pml4, va) {
        *e |= D;
    }
}

/// Clears the dirty bits of the 4 KiB entries of `pages` pages from `va` (`task_reset`'s kept
/// pages; none where a 2 MiB page or a borrowed table is in the way). The levels above are
/// walked once per page table; the caller flushes the TLB of the space if it is loaded.
pub fn clear_dirty_run(pml4: u64, va: u64, pages: u64) {
    let mut last: Option<(u64, Option<u64>)> = None;
    for i in 0..pages {
        let a = va + i * 4096;
        let window = a >> 21;
        let pt = match last {
            Some((w, pt)) if w == window => pt,
            _ => {
                let pt = walk(pml4, a, 1, &mut || None);
                last = Some((window, pt));
                pt
            }
        };
        if let Some(t) = pt {
            table(t)[((a >> 12) & 511) as usize] &= !D;
        }
    }
}

/// The 4 KiB entry of `va` if present (0 if not, or if a 2 MiB page maps it).
pub fn pte(pml4: u64, va: u64) -> u64 {
    leaf(pml4, va).map_or(0, |e| if *e & PS != 0 { 0 } else { *e })
}

/// Frees every page-table frame of the lower half and the PML4: those `listed` if the space
/// kept a complete list of them, else every one a walk of the tables finds. Returns how many
/// frames.
pub fn free_space(pml4: u64, listed: Option<&[u64]>) -> u64 {
    if let Some(frames) = listed {
        for &f in frames {
            phys().free_frame(f);
        }
        phys().free_frame(pml4);
        return frames.len() as u64 + 1;
    }
    let mut n = 0;
    for i in 0..256 {
        let e3 = table(pml4)[i];
        if e3 & P == 0 {
            continue;
        }
        let pdpt = e3 & ADDR;
        for j in 0..512 {
            let e2 = table(pdpt)[j];
            if e2 & P == 0 {
                continue;
            }
            let pd = e2 & ADDR;
            for k in 0..512 {
                let e1 = table(pd)[k];
                // A borrowed page table is its lender's to free.
                if e1 & P != 0 && e1 & (PS | LINKED) == 0 {
                    phys().free_frame(e1 & ADDR);
                    n += 1;
                }
            }
            phys().free_frame(pd);
            n += 1;
        }
        phys().free_frame(pdpt);
        n += 1;
    }
    phys().free_frame(pml4);
    n + 1
}

/// Whether `[va, va+len)` is a valid range of user addresses.
pub fn user_range_ok(va: u64, len: u64) -> bool {
    va.checked_add(len)
        .is_some_and(|e| e <= sawmill_abi::layout::USER_END)
}

/// Walks `[va, va+len)` of the user space `pml4` page by page, calling `f(direct-map pointer,
/// offset into the range, bytes)`; fails (having called `f` for a prefix) unless every byte is
/// mapped user-accessible (and writable, with `write`).
fn user_chunks(
    pml4: u64,
    va: u64,
    len: usize,
    write: bool,
    mut f: impl FnMut(*mut u8, usize, usize),
) -> bool {
    if !user_range_ok(va, len as u64) {
        return false;
    }
    let mut done = 0;
    while done < len {
        let a = va + done as u64;
        let Some((pa, fl)) = translate(pml4, a) else {
            return false;
        };
        if fl & U == 0 || (write && fl & W == 0) {
            return false;
        }
        if write {
            mark_dirty(pml4, a);
        }
        let n = ((PAGE - (a & 0xfff)) as usize).min(len - done);
        f(phys_to_virt(pa), done, n);
        done += n;
    }
    true
}

/// Hands the bytes of `[va, va+len)` of the user space `pml4` to `f`, a page's piece at a time
/// (no copy); fails (having handed a prefix) unless every byte is mapped user-readable.
pub fn read_user(pml4: u64, va: u64, len: usize, mut f: impl FnMut(&[u8])) -> bool {
    user_chunks(pml4, va, len, false, |p, _, n| {
        // SAFETY: p..p+n lies in one mapped user page, reachable through the direct map, and
        // nothing runs meanwhile that could unmap it.
        f(unsafe { core::slice::from_raw_parts(p, n) })
    })
}

/// Copies `buf` into user memory; fails unless every byte is mapped user-writable.
pub fn copy_to_user(pml4: u64, va: u64, buf: &[u8]) -> bool {
    user_chunks(pml4, va, buf.len(), true, |p, off, n| {
        // SAFETY: as above, and the page is writable by the user, so not kernel data.
        unsafe { core::ptr::copy_nonoverlapping(buf[off..].as_ptr(), p, n) }
    })
}
