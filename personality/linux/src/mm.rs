//! Address-space decisions for the memory calls (`mmap`, `munmap`, `mprotect`, `mremap`,
//! `brk`): argument checks as Linux makes them, the rights a protection means, and where a
//! mapping without a fixed address goes, and whether new anonymous memory may be promised.
//! Pure logic over a list of used ranges; the guest carries the decisions out with the region
//! manager.

use crate::errno::{self, Errno};
use crate::layout;

pub const PAGE: u64 = 4096;

pub const PROT_READ: u64 = 1;
pub const PROT_WRITE: u64 = 2;
pub const PROT_EXEC: u64 = 4;

pub const MAP_SHARED: u64 = 0x01;
pub const MAP_PRIVATE: u64 = 0x02;
pub const MAP_SHARED_VALIDATE: u64 = 0x03;
pub const MAP_FIXED: u64 = 0x10;
pub const MAP_ANONYMOUS: u64 = 0x20;
pub const MAP_GROWSDOWN: u64 = 0x100;
pub const MAP_DENYWRITE: u64 = 0x800;
pub const MAP_EXECUTABLE: u64 = 0x1000;
pub const MAP_LOCKED: u64 = 0x2000;
pub const MAP_NORESERVE: u64 = 0x4000;
pub const MAP_POPULATE: u64 = 0x8000;
pub const MAP_NONBLOCK: u64 = 0x1_0000;
pub const MAP_STACK: u64 = 0x2_0000;
pub const MAP_HUGETLB: u64 = 0x4_0000;
pub const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;

pub const MREMAP_MAYMOVE: u64 = 1;
pub const MREMAP_FIXED: u64 = 2;

/// Rounds up to a page; None if that wraps.
pub fn page_up(n: u64) -> Option<u64> {
    n.checked_add(PAGE - 1).map(|v| v & !(PAGE - 1))
}

/// Whether `[a, a + len)` stays in the program's part and out of the library's code zone.
pub fn program_range(a: u64, len: u64) -> bool {
    let Some(end) = a.checked_add(len) else {
        return false;
    };
    a >= layout::PROGRAM_MIN
        && end <= layout::PROGRAM_END
        && !(a < layout::LIB_END && layout::LIB_BASE < end)
}

/// Where a mapping goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Exactly here, replacing what is there (`MAP_FIXED`).
    Replace(u64),
    /// Exactly here, or `EEXIST` (`MAP_FIXED_NOREPLACE`).
    NoReplace(u64),
    /// Anywhere; try `hint` first (0 = none).
    Anywhere(u64),
}

/// A checked `mmap` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmapReq {
    pub place: Place,
    /// Page-rounded length.
    pub len: u64,
    pub prot: u64,
    pub shared: bool,
    /// None for anonymous memory.
    pub fd: Option<i32>,
    pub offset: u64,
    pub populate: bool,
}

/// Checks `mmap(addr, len, prot, flags, fd, offset)`'s arguments as Linux does.
pub fn mmap_args(
    addr: u64,
    len: u64,
    prot: u64,
    flags: u64,
    fd: u64,
    offset: u64,
) -> Result<MmapReq, Errno> {
    const KNOWN: u64 = MAP_SHARED
        | MAP_PRIVATE
        | MAP_FIXED
        | MAP_ANONYMOUS
        | MAP_GROWSDOWN
        | MAP_DENYWRITE
        | MAP_EXECUTABLE
        | MAP_LOCKED
        | MAP_NORESERVE
        | MAP_POPULATE
        | MAP_NONBLOCK
        | MAP_STACK
        | MAP_HUGETLB
        | MAP_FIXED_NOREPLACE;
    let kind = flags & MAP_SHARED_VALIDATE;
    if kind == 0 || (kind == MAP_SHARED_VALIDATE && flags & !KNOWN != 0) {
        return Err(errno::EINVAL);
    }
    if flags & MAP_HUGETLB != 0 {
        return Err(errno::EINVAL);
    }
    if prot & !(PROT_READ | PROT_WRITE | PROT_EXEC) != 0 {
        return Err(errno::EINVAL);
    }
    if len == 0 || !offset.is_multiple_of(PAGE) {
        return Err(errno::EINVAL);
    }
    let len = page_up(len).ok_or(errno::ENOMEM)?;
    if len > layout::PROGRAM_END {
        return Err(errno::ENOMEM);
    }
    let place = if flags & MAP_FIXED_NOREPLACE != 0 {
        Place::NoReplace(addr)
    } else if flags & MAP_FIXED != 0 {
        Place::Replace(addr)
    } else {
        Place::Anywhere(addr & !(PAGE - 1))
    };
    if let Place::Replace(a) | Place::NoReplace(a) = place {
        if !a.is_multiple_of(PAGE) {
            return Err(errno::EINVAL);
        }
        if !program_range(a, len) {
            return Err(if a.checked_add(len).is_none() {
                errno::EINVAL
            } else {
                errno::ENOMEM
            });
        }
    }
    let anonymous = flags & MAP_ANONYMOUS != 0;
    if !anonymous && (fd as i64) < 0 {
        return Err(errno::EBADF);
    }
    Ok(MmapReq {
        place,
        len,
        prot,
        shared: kind != MAP_PRIVATE,
        fd: if anonymous { None } else { Some(fd as i32) },
        offset: if anonymous { 0 } else { offset },
        populate: flags & MAP_POPULATE != 0,
    })
}

/// Checks an `(addr, len)` pair of `munmap`/`mprotect`/`madvise`: page-aligned address, some
/// length, inside the program's part. Returns the page-rounded length.
pub fn range_args(addr: u64, len: u64) -> Result<u64, Errno> {
    if !addr.is_multiple_of(PAGE) {
        return Err(errno::EINVAL);
    }
    let len = page_up(len).ok_or(errno::EINVAL)?;
    if len == 0 || !program_range(addr, len) {
        return Err(errno::EINVAL);
    }
    Ok(len)
}

/// The highest free range of `len` bytes below `top` and at or above
/// `bottom` that misses every range of `used` (sorted by start, `(start, end)`), as Linux's
/// top-down `mmap` placement does; or the `hint` itself if it is free and in the program part.
pub fn place(used: &[(u64, u64)], len: u64, hint: u64, bottom: u64, top: u64) -> Option<u64> {
    let free = |a: u64| program_range(a, len) && used.iter().all(|&(s, e)| a + len <= s || e <= a);
    if hint != 0 && free(hint) {
        return Some(hint);
    }
    // Try just below the ceiling; on a conflict, lower the ceiling to the start of the lowest
    // range in the way. The library zone counts as used.
    let lib = (layout::LIB_BASE, layout::LIB_END);
    let mut ceiling = top;
    loop {
        let a = ceiling.checked_sub(len).filter(|&a| a >= bottom)?;
        let in_way = used
            .iter()
            .chain(core::iter::once(&lib))
            .filter(|&&(s, e)| a < e && s < ceiling)
            .map(|&(s, _)| s)
            .min();
        match in_way {
            None => return Some(a),
            Some(s) => ceiling = s,
        }
    }
}

/// Rights for the region manager from `PROT_*` bits: (read, write, exec). Linux on x86-64
/// grants read with write or exec.
pub fn rights(prot: u64) -> (bool, bool, bool) {
    let w = prot & PROT_WRITE != 0;
    let x = prot & PROT_EXEC != 0;
    (prot & PROT_READ != 0 || w || x, w, x)
}

/// The program break: where it starts, where it is, and how far the memory behind it reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Brk {
    pub start: u64,
    pub cur: u64,
    /// Page-aligned end of the memory attached for the break.
    pub mapped: u64,
}

/// What a `brk(want)` call does to the memory: attach `[from, to)` or detach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrkStep {
    Nothing,
    Grow { from: u64, to: u64 },
    Shrink { from: u64, to: u64 },
}

impl Brk {
    pub fn new(start: u64) -> Brk {
        Brk {
            start,
            cur: start,
            mapped: start,
        }
    }

    /// Plans `brk(want)`: None if the break stays (below the start, or into the library zone);
    /// else the step and the break after it.
    pub fn plan(&self, want: u64) -> Option<(BrkStep, Brk)> {
        if want < self.start || want > layout::LIB_BASE {
            return None;
        }
        let end = page_up(want)?;
        let step = if end > self.mapped {
            BrkStep::Grow {
                from: self.mapped,
                to: end,
            }
        } else if end < self.mapped {
            BrkStep::Shrink {
                from: end,
                to: self.mapped,
            }
        } else {
            BrkStep::Nothing
        };
        Some((
            step,
            Brk {
                start: self.start,
                cur: want,
                mapped: end,
            },
        ))
    }
}

/// Kernel memory one more mapped 4 KiB page costs the process: its mapping node and its share
/// of a page table (charged to the process's own kernel-memory quota, `process_kmem_kb`).
pub const KMEM_PER_PAGE: u64 = sawmill_kcore::mapdb::NODE_BYTES as u64 + 8;
/// Kernel memory the library keeps for itself (its heap, file windows, signal frames): new
/// anonymous memory is refused before it would take this.
pub const KMEM_RESERVE: u64 = 96 * 1024;

/// Whether the process's own kernel memory (`used` of `limit` bytes) can map `pages` more
/// pages and keep the library's reserve: the per-process bound on memory (each process has a
/// quota of its own), met with ENOMEM up front rather than a fault that cannot be served.
pub fn kmem_admit(pages: u64, used: u64, limit: u64) -> bool {
    limit.saturating_sub(used)
        >= pages
            .saturating_mul(KMEM_PER_PAGE)
            .saturating_add(KMEM_RESERVE)
}

/// The part of the memory every process draws on (mem's room for proc's account) that a new
/// anonymous mapping, `brk` or `mremap` growth may not take: 1/RESERVE_SHARE of it stays for the
/// pages other processes have mapped but not touched yet, their forks and the file servers.
pub const RESERVE_SHARE: u64 = 8;

/// Whether `pages` of new anonymous memory may be promised, given the account every process
/// shares at mem (`used` and `quota` pages of it, `free` pages left in mem): Linux's heuristic
/// overcommit in spirit (an allocation that cannot be met is refused with ENOMEM up front), with
/// a reserve, so that one process allocating without end gets ENOMEM while the others can
/// still touch what they have and allocate a little.
pub fn anon_admit(pages: u64, used: u64, quota: u64, free: u64) -> bool {
    let room = quota.saturating_sub(used).min(free);
    let capacity = used.saturating_add(room);
    room >= pages.saturating_add(capacity / RESERVE_SHARE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmap_arguments() {
        let anon = MAP_PRIVATE | MAP_ANONYMOUS;
        let r = mmap_args(0, 5000, PROT_READ | PROT_WRITE, anon, u64::MAX, 0).unwrap();
        assert_eq!(
            (r.len, r.fd, r.shared, r.place),
            (8192, None, false, Place::Anywhere(0))
        );
        // Linux: no MAP_SHARED/PRIVATE, zero length, unaligned offset, unknown prot → EINVAL.
        assert_eq!(
            mmap_args(0, 4096, 1, MAP_ANONYMOUS, 0, 0),
            Err(errno::EINVAL)
        );
        assert_eq!(mmap_args(0, 0, 1, anon, 0, 0), Err(errno::EINVAL));
        assert_eq!(
            mmap_args(0, 4096, 1, MAP_PRIVATE, 3, 100),
            Err(errno::EINVAL)
        );
        assert_eq!(mmap_args(0, 4096, 0x10, anon, 0, 0), Err(errno::EINVAL));
        assert_eq!(
            mmap_args(0, 4096, 1, MAP_PRIVATE, u64::MAX, 0),
            Err(errno::EBADF)
        );
        assert_eq!(mmap_args(0, u64::MAX, 1, anon, 0, 0), Err(errno::ENOMEM));
        // Fixed: aligned, inside the program's part, never into the library zone.
        assert_eq!(
            mmap_args(0x1001, 4096, 1, anon | MAP_FIXED, 0, 0),
            Err(errno::EINVAL)
        );
        assert_eq!(
            mmap_args(layout::LIB_BASE, 4096, 1, anon | MAP_FIXED, 0, 0),
            Err(errno::ENOMEM)
        );
        assert_eq!(
            mmap_args(0x20_0000, 4096, 1, anon | MAP_FIXED_NOREPLACE, 0, 0)
                .unwrap()
                .place,
            Place::NoReplace(0x20_0000)
        );
        let f = mmap_args(0, 4096, 1, MAP_SHARED, 3, 8192).unwrap();
        assert_eq!((f.fd, f.shared, f.offset), (Some(3), true, 8192));
    }

    #[test]
    fn placement_is_top_down_and_avoids_used_ranges() {
        let top = 0x1_0000_0000;
        assert_eq!(place(&[], 0x2000, 0, 0x10000, top), Some(top - 0x2000));
        let used = [(top - 0x1000, top)];
        assert_eq!(place(&used, 0x2000, 0, 0x10000, top), Some(top - 0x3000));
        // A hint that is free wins; a taken one is ignored.
        assert_eq!(
            place(&used, 0x1000, 0x50_0000, 0x10000, top),
            Some(0x50_0000)
        );
        assert_eq!(
            place(&used, 0x1000, top - 0x1000, 0x10000, top),
            Some(top - 0x2000)
        );
        // A gap too small is skipped; the library zone is never chosen.
        let used = [(top - 0x3000, top - 0x2000), (top - 0x1000, top)];
        assert_eq!(place(&used, 0x2000, 0, 0x10000, top), Some(top - 0x5000));
        let lib_top = layout::LIB_END;
        assert_eq!(
            place(&[], 0x1000, 0, 0x10000, lib_top),
            Some(layout::LIB_BASE - 0x1000)
        );
        assert_eq!(place(&[(0x10000, top)], 0x1000, 0, 0x10000, top), None);
    }

    #[test]
    fn break_steps() {
        let b = Brk::new(0x40_6000);
        assert_eq!(b.plan(0x40_0000), None);
        assert_eq!(b.plan(layout::LIB_BASE + 1), None);
        let (s, b2) = b.plan(0x40_6001).unwrap();
        assert_eq!(
            s,
            BrkStep::Grow {
                from: 0x40_6000,
                to: 0x40_7000
            }
        );
        assert_eq!((b2.cur, b2.mapped), (0x40_6001, 0x40_7000));
        let (s, b3) = b2.plan(0x40_6800).unwrap();
        assert_eq!(s, BrkStep::Nothing);
        let (s, _) = b3.plan(0x40_6000).unwrap();
        assert_eq!(
            s,
            BrkStep::Shrink {
                from: 0x40_6000,
                to: 0x40_7000
            }
        );
    }

    #[test]
    fn ranges_and_rights() {
        assert_eq!(range_args(0x40_0001, 1), Err(errno::EINVAL));
        assert_eq!(range_args(0x40_0000, 0), Err(errno::EINVAL));
        assert_eq!(range_args(0x40_0000, 1), Ok(4096));
        assert_eq!(
            range_args(layout::LIB_BASE - 0x1000, 0x2000),
            Err(errno::EINVAL)
        );
        assert_eq!(rights(PROT_WRITE), (true, true, false));
        assert_eq!(rights(0), (false, false, false));
    }

    #[test]
    fn anonymous_memory_keeps_a_reserve() {
        // 160 MiB in all (40,960 pages), nothing used: up to 7/8 of it at once.
        assert!(anon_admit(35_840, 0, u64::MAX, 40_960));
        assert!(!anon_admit(35_841, 0, u64::MAX, 40_960));
        // Most of it used: 1 MiB no longer fits above the reserve.
        assert!(!anon_admit(256, 36_000, u64::MAX, 4_960));
        assert!(anon_admit(256, 30_000, u64::MAX, 10_960));
        // A quota below mem's free pages bounds the room.
        assert!(!anon_admit(100, 1_000, 1_050, 40_000));
        // Nothing left: nothing promised.
        assert!(!anon_admit(1, 0, 0, 0));
    }

    #[test]
    fn kernel_memory_bounds_a_process() {
        let limit = 768 * 1024;
        assert!(kmem_admit(256, 180 * 1024, limit));
        // Near the end: the reserve stays.
        let used = limit - KMEM_RESERVE - 255 * KMEM_PER_PAGE;
        assert!(!kmem_admit(256, used, limit));
        assert!(kmem_admit(255, used, limit));
        assert!(!kmem_admit(0, limit, limit));
    }
}
