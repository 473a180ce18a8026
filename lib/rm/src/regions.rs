//! The region map: which dataspace (and which part of it) is attached where, with which rights,
//! and which of its pages the task already holds. Pure bookkeeping, tested on the host.
use alloc::vec::Vec;
use core::cell::Cell;

pub const PAGE: u64 = 4096;
/// Pages a read fault may map at once (the faulting page and those after it, as far as the
/// dataspace has them at hand: fault-around), as Linux's 64 KiB: a program touching its text
/// takes one fault per run of pages, not one per page.
pub const FAULT_AROUND: u64 = 16;

/// Region flags.
pub mod flags {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const EXEC: u32 = 4;
    /// Private copy-on-write: reads see the dataspace, the first write to a page copies it into
    /// a private anonymous page; the dataspace itself never changes.
    pub const COW: u32 = 8;
    /// The region manager owns the dataspace: it frees it when the last region attached from
    /// it goes (anonymous memory of a Linux program, split by `munmap` and `mprotect`).
    pub const OWNED: u32 = 16;
    /// Shared between tasks (a Linux program's `MAP_SHARED|MAP_ANONYMOUS` memory across
    /// `fork`): the dataspace's first page (never attached) counts the tasks that use it; the
    /// last task to stop using it frees it (`pager::share`).
    pub const SHARED: u32 = 32;
    /// Borrowed from another task (a `vfork` child runs in its parent's memory until it execs
    /// or ends): the dataspace and its shadow are the other task's, never freed here (the
    /// other flags say what they are to their owner: `OWNED` memory is copied by a fork).
    pub const BORROWED: u32 = 64;
    /// The bits that are access rights (what `protect` changes).
    pub const RIGHTS: u32 = READ | WRITE | EXEC;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionErr {
    /// Misaligned, empty, outside the managed range or wrapping.
    Invalid,
    /// Overlaps an attached region.
    Busy,
    /// No free range big enough.
    NoSpace,
    /// No region there.
    NotFound,
}

/// One attached range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub size: u64,
    /// Capability slot of the dataspace.
    pub ds: u64,
    /// Byte offset in the dataspace of `start`.
    pub offset: u64,
    pub flags: u32,
    /// Private anonymous dataspace holding the copied pages of a COW region (0 until needed).
    pub shadow: u64,
    /// Byte offset in the shadow dataspace of `start` (non-zero for the upper part of a split
    /// region, which shares its shadow).
    pub shadow_offset: u64,
    /// Distinguishes this attachment from a later one at the same place (a fault resolved for a
    /// detached region must not be recorded in its successor).
    pub id: u64,
    /// Pages the task holds a mapping of (1 bit per page), and of those the writable ones,
    /// and for COW regions the ones already copied.
    resident: Vec<u64>,
    writable: Vec<u64>,
    private: Vec<u64>,
}

fn bit(v: &[u64], i: u64) -> bool {
    v.get((i / 64) as usize)
        .is_some_and(|w| w >> (i % 64) & 1 != 0)
}

/// The word of bitmap `v` holding bit `i` (0 past its end).
fn word(v: &[u64], i: u64) -> u64 {
    v.get((i / 64) as usize).copied().unwrap_or(0)
}

/// Makes room in bitmap `v` for bit `i`.
fn grow(v: &mut Vec<u64>, i: u64) {
    let at = (i / 64) as usize;
    if at >= v.len() {
        v.resize(at + 1, 0);
    }
}

/// Sets (`on`) or clears bits `[from, from + n)` of `v` a word at a time (a fault maps up to
/// 16 pages, an unmap may cover thousands: bit by bit was ~7 instructions a page); setting grows
/// the bitmap, clearing never does.
fn set_range(v: &mut Vec<u64>, from: u64, n: u64, on: bool) {
    if n == 0 {
        return;
    }
    let end = from + n;
    if on {
        grow(v, end - 1);
    }
    let mut i = from;
    while i < end {
        let Some(w) = v.get_mut((i / 64) as usize) else {
            return;
        };
        let k = (64 - i % 64).min(end - i);
        let mask = if k == 64 {
            !0
        } else {
            ((1u64 << k) - 1) << (i % 64)
        };
        if on {
            *w |= mask;
        } else {
            *w &= !mask;
        }
        i += k;
    }
}

/// How many bits from `from` on (at most `limit`) are clear in both `a` and `b`: the run of
/// pages a fault-around may take, found a word at a time.
fn clear_run(a: &[u64], b: &[u64], from: u64, limit: u64) -> u64 {
    let mut n = 0;
    while n < limit {
        let i = from + n;
        let w = (word(a, i) | word(b, i)) >> (i % 64);
        if w != 0 {
            return (n + w.trailing_zeros() as u64).min(limit);
        }
        n += 64 - i % 64;
    }
    limit
}

/// Sets or clears bit `i`; a bitmap grows as bits are set (one of a region of 64 MiB is 2 KiB,
/// and most of a region's pages are never mapped: made at full size and zeroed, the bitmaps were
/// ~9k instructions of every process's start and a page of its heap).
fn set(v: &mut Vec<u64>, i: u64, on: bool) {
    if on {
        grow(v, i);
    }
    if let Some(w) = v.get_mut((i / 64) as usize) {
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }
}

/// What the region manager should do about a fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing attached at the address.
    Unmapped,
    /// A write (or execution) the region does not allow.
    Denied { start: u64, size: u64, flags: u32 },
    /// The page is already mapped with the access needed: another thread resolved it first;
    /// just resume.
    Cached,
    /// Ask the region's dataspace for page `offset` (bytes) at `page`, and (fault-around) for
    /// up to `pages` pages from there on (>= 1): the ones after it in the region that the task
    /// does not hold and that read the same dataspace.
    Map {
        id: u64,
        ds: u64,
        offset: u64,
        page: u64,
        pages: u64,
        flags: u32,
    },
    /// COW region, page not yet private and a write: copy it. `ds`/`offset` is the source;
    /// `shadow`/`shadow_offset` the private page (shadow may be 0: create it first). `mapped`:
    /// the source page is already mapped at `page` (read-only).
    Copy {
        id: u64,
        ds: u64,
        offset: u64,
        shadow: u64,
        shadow_offset: u64,
        page: u64,
        mapped: bool,
    },
}

impl Region {
    pub fn pages(&self) -> u64 {
        self.size / PAGE
    }
    /// The pages (first index, count) of `[lo, hi)` (clipped to the region already), the page
    /// holding `lo` on; None if empty.
    fn page_span(&self, lo: u64, hi: u64) -> Option<(u64, u64)> {
        let first = ((lo & !(PAGE - 1)).checked_sub(self.start)? / PAGE).min(self.pages());
        let end = hi.checked_sub(self.start)?.div_ceil(PAGE).min(self.pages());
        (end > first).then(|| (first, end - first))
    }
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
    pub fn contains(&self, a: u64) -> bool {
        a >= self.start && a < self.end()
    }
    /// How many pages from page `i` on a read fault there may map ([`FAULT_AROUND`]): `i` and
    /// the pages after it, up to the region's end, the first one the task holds already or
    /// (COW) has a private copy of (those stay as they are).
    fn around(&self, i: u64) -> u64 {
        let limit = (FAULT_AROUND - 1).min(self.pages().saturating_sub(i + 1));
        1 + clear_run(&self.resident, &self.private, i + 1, limit)
    }
    pub fn is_resident(&self, i: u64) -> bool {
        bit(&self.resident, i)
    }
    pub fn is_private(&self, i: u64) -> bool {
        bit(&self.private, i)
    }
    /// A COW region's pages that live in its shadow (1 bit per page).
    pub fn private_bits(&self) -> &[u64] {
        &self.private
    }
}

/// The regions of one address space range, sorted by address.
pub struct Regions {
    v: Vec<Region>,
    lo: u64,
    hi: u64,
    /// Where attachments without an address go (inside `[lo, hi)`).
    auto_lo: u64,
    auto_hi: u64,
    next_id: u64,
    /// The index of the region the last lookup found: faults come in runs on one region (a
    /// program's text), and checking it first spares the search (~60 instructions a fault) and
    /// the walk by id when the fault's mapping is recorded. Only a hint: checked at every use.
    hint: Cell<usize>,
}

/// Bits `[from, from + n)` of `v` as a fresh bitmap.
fn bits_from(v: &[u64], from: u64, n: u64) -> Vec<u64> {
    if v.is_empty() {
        return Vec::new();
    }
    let mut out = alloc::vec![0; n.div_ceil(64) as usize];
    for i in 0..n {
        set(&mut out, i, bit(v, from + i));
    }
    out
}

impl Regions {
    /// Manages `[lo, hi)`.
    pub const fn new(lo: u64, hi: u64) -> Regions {
        Regions {
            v: Vec::new(),
            lo,
            hi,
            auto_lo: lo,
            auto_hi: hi,
            next_id: 1,
            hint: Cell::new(0),
        }
    }

    /// Manages `[lo, hi)` from now on, placing attachments without an address in
    /// `[auto_lo, auto_hi)`. Only before anything is attached.
    pub fn set_range(
        &mut self,
        lo: u64,
        hi: u64,
        auto_lo: u64,
        auto_hi: u64,
    ) -> Result<(), RegionErr> {
        if !self.v.is_empty() || lo >= hi || auto_lo < lo || auto_hi > hi || auto_lo >= auto_hi {
            return Err(RegionErr::Invalid);
        }
        (self.lo, self.hi, self.auto_lo, self.auto_hi) = (lo, hi, auto_lo, auto_hi);
        Ok(())
    }

    /// Splits the region that strictly contains `at` (page aligned) into two at `at`; nothing
    /// to do if `at` falls on a boundary or in a gap.
    pub fn split(&mut self, at: u64) -> Result<(), RegionErr> {
        if !at.is_multiple_of(PAGE) {
            return Err(RegionErr::Invalid);
        }
        let Some(i) = self.v.iter().position(|r| r.start < at && at < r.end()) else {
            return Ok(());
        };
        let id = self.next_id;
        self.next_id += 1;
        let r = &mut self.v[i];
        let low = (at - r.start) / PAGE;
        let high = (r.end() - at) / PAGE;
        let upper = Region {
            start: at,
            size: r.end() - at,
            ds: r.ds,
            offset: r.offset + (at - r.start),
            flags: r.flags,
            shadow: r.shadow,
            // Without a shadow yet, each part gets its own, sized for it.
            shadow_offset: if r.shadow == 0 {
                0
            } else {
                r.shadow_offset + (at - r.start)
            },
            id,
            resident: bits_from(&r.resident, low, high),
            writable: bits_from(&r.writable, low, high),
            private: bits_from(&r.private, low, high),
        };
        r.size = at - r.start;
        r.resident = bits_from(&r.resident, 0, low);
        r.writable = bits_from(&r.writable, 0, low);
        r.private = bits_from(&r.private, 0, low);
        self.v.insert(i + 1, upper);
        Ok(())
    }

    /// Removes everything attached in `[a, a + len)`, splitting regions that straddle its
    /// ends; returns the removed pieces.
    pub fn remove_range(&mut self, a: u64, len: u64) -> Result<Vec<Region>, RegionErr> {
        let end = a.checked_add(len).ok_or(RegionErr::Invalid)?;
        if !a.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) {
            return Err(RegionErr::Invalid);
        }
        self.split(a)?;
        self.split(end)?;
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.v.len() {
            if self.v[i].start >= a && self.v[i].end() <= end {
                out.push(self.v.remove(i));
            } else {
                i += 1;
            }
        }
        Ok(out)
    }

    /// Whether `[a, a + len)` is attached without a gap, every part with all of `need`.
    pub fn covered(&self, a: u64, len: u64, need: u32) -> bool {
        let Some(end) = a.checked_add(len) else {
            return false;
        };
        let mut p = a;
        while p < end {
            match self.lookup(p) {
                Some(r) if r.flags & need == need => p = r.end(),
                _ => return false,
            }
        }
        true
    }

    /// Gives every region in `[a, a + len)` the rights `rights` (of [`flags::RIGHTS`]),
    /// splitting at the ends; the range must be attached without a gap (else `NotFound`, and
    /// nothing changes). What was cached is forgotten (the caller unmaps the range).
    pub fn protect(&mut self, a: u64, len: u64, rights: u32) -> Result<(), RegionErr> {
        if !a.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) || rights & !flags::RIGHTS != 0 {
            return Err(RegionErr::Invalid);
        }
        if !self.covered(a, len, 0) {
            return Err(RegionErr::NotFound);
        }
        self.split(a)?;
        self.split(a + len)?;
        for r in self.v.iter_mut() {
            if r.start >= a && r.end() <= a + len {
                r.flags = (r.flags & !flags::RIGHTS) | rights;
            }
        }
        self.forget(a, len);
        Ok(())
    }

    /// Moves everything in `[a, a + len)` (attached without a gap) to `[to, to + len)`, which
    /// must be free: the same dataspaces and copies, nothing cached (the caller unmaps the old
    /// range).
    pub fn relocate(&mut self, a: u64, len: u64, to: u64) -> Result<(), RegionErr> {
        let end = to.checked_add(len).ok_or(RegionErr::Invalid)?;
        if !to.is_multiple_of(PAGE) || to < self.lo || end > self.hi {
            return Err(RegionErr::Invalid);
        }
        if !self.covered(a, len, 0) {
            return Err(RegionErr::NotFound);
        }
        let mut pieces = self.remove_range(a, len)?;
        let busy = self.v.iter().any(|r| to < r.end() && r.start < end);
        for p in pieces.iter_mut() {
            if !busy {
                p.start = p.start - a + to;
                p.resident.iter_mut().for_each(|w| *w = 0);
                p.writable.iter_mut().for_each(|w| *w = 0);
            }
        }
        for p in pieces {
            let pos = self.v.partition_point(|x| x.start < p.start);
            self.v.insert(pos, p);
        }
        if busy {
            Err(RegionErr::Busy)
        } else {
            Ok(())
        }
    }

    /// Whether some region still uses dataspace slot `ds` (as its source or its shadow).
    pub fn uses(&self, ds: u64) -> bool {
        self.v.iter().any(|r| r.ds == ds || r.shadow == ds)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Region> {
        self.v.iter()
    }

    /// Attaches `size` bytes (page multiple) of dataspace `ds` from `offset` at `at`, or at the
    /// lowest free address aligned to `align` (a power of two, at least a page) if `at` is None.
    pub fn attach(
        &mut self,
        at: Option<u64>,
        size: u64,
        align: u64,
        ds: u64,
        offset: u64,
        fl: u32,
    ) -> Result<u64, RegionErr> {
        if size == 0
            || !size.is_multiple_of(PAGE)
            || !offset.is_multiple_of(PAGE)
            || !align.is_power_of_two()
            || align < PAGE
        {
            return Err(RegionErr::Invalid);
        }
        offset.checked_add(size).ok_or(RegionErr::Invalid)?;
        let start = match at {
            Some(a) => {
                let end = a.checked_add(size).ok_or(RegionErr::Invalid)?;
                if !a.is_multiple_of(PAGE) || a < self.lo || end > self.hi {
                    return Err(RegionErr::Invalid);
                }
                if self.v.iter().any(|r| a < r.end() && r.start < end) {
                    return Err(RegionErr::Busy);
                }
                a
            }
            None => self.find(size, align).ok_or(RegionErr::NoSpace)?,
        };
        let id = self.next_id;
        self.next_id += 1;
        let r = Region {
            start,
            size,
            ds,
            offset,
            flags: fl,
            shadow: 0,
            shadow_offset: 0,
            id,
            resident: Vec::new(),
            writable: Vec::new(),
            private: Vec::new(),
        };
        let pos = self.v.partition_point(|x| x.start < start);
        self.v.insert(pos, r);
        Ok(start)
    }

    fn find(&self, size: u64, align: u64) -> Option<u64> {
        let mut cand = self.auto_lo.checked_add(align - 1)? & !(align - 1);
        for r in self.v.iter().filter(|r| r.end() > self.auto_lo) {
            if cand.checked_add(size)? <= r.start {
                return Some(cand);
            }
            if r.end() > cand {
                cand = r.end().checked_add(align - 1)? & !(align - 1);
            }
        }
        if cand.checked_add(size)? <= self.auto_hi {
            Some(cand)
        } else {
            None
        }
    }

    /// Attaches a region another address space had (`fork`): as [`Regions::attach`] at
    /// `start`, with its shadow (a COW region's private pages) and which pages live there;
    /// nothing is resident yet.
    #[allow(clippy::too_many_arguments)]
    pub fn adopt(
        &mut self,
        start: u64,
        size: u64,
        ds: u64,
        offset: u64,
        fl: u32,
        shadow: u64,
        shadow_offset: u64,
        private: &[u64],
    ) -> Result<(), RegionErr> {
        let at = self.attach(Some(start), size, PAGE, ds, offset, fl)?;
        let i = self.v.partition_point(|x| x.start < at);
        let r = &mut self.v[i];
        if fl & flags::COW != 0 {
            r.shadow = shadow;
            r.shadow_offset = shadow_offset;
            let words = (size.div_ceil(PAGE * 64) as usize).min(private.len());
            r.private = private[..words].to_vec();
        }
        Ok(())
    }

    /// Removes the region starting at `start`.
    pub fn detach(&mut self, start: u64) -> Result<Region, RegionErr> {
        let i = self
            .v
            .iter()
            .position(|r| r.start == start)
            .ok_or(RegionErr::NotFound)?;
        Ok(self.v.remove(i))
    }

    pub fn lookup(&self, a: u64) -> Option<&Region> {
        if let Some(r) = self.v.get(self.hint.get()).filter(|r| r.contains(a)) {
            return Some(r);
        }
        let i = self.v.partition_point(|r| r.start <= a);
        if i == 0 {
            return None;
        }
        let r = &self.v[i - 1];
        if r.contains(a) {
            self.hint.set(i - 1);
            Some(r)
        } else {
            None
        }
    }

    fn by_id(&mut self, id: u64) -> Option<&mut Region> {
        let i = match self.v.get(self.hint.get()) {
            Some(r) if r.id == id => self.hint.get(),
            _ => self.v.iter().position(|r| r.id == id)?,
        };
        self.v.get_mut(i)
    }

    /// Decides what a fault at `addr` needs (`write`: a write access).
    pub fn fault(&self, addr: u64, write: bool) -> Fault {
        let Some(r) = self.lookup(addr) else {
            return Fault::Unmapped;
        };
        if (write && r.flags & flags::WRITE == 0) || r.flags & flags::READ == 0 {
            return Fault::Denied {
                start: r.start,
                size: r.size,
                flags: r.flags,
            };
        }
        let page = addr & !(PAGE - 1);
        let i = (page - r.start) / PAGE;
        if bit(&r.resident, i) && (!write || bit(&r.writable, i)) {
            return Fault::Cached;
        }
        let offset = r.offset + (page - r.start);
        if r.flags & flags::COW != 0 {
            if bit(&r.private, i) {
                return Fault::Map {
                    id: r.id,
                    ds: r.shadow,
                    offset: r.shadow_offset + (page - r.start),
                    page,
                    pages: 1,
                    flags: r.flags & !flags::COW,
                };
            }
            if write {
                return Fault::Copy {
                    id: r.id,
                    ds: r.ds,
                    offset,
                    shadow: r.shadow,
                    shadow_offset: r.shadow_offset + (page - r.start),
                    page,
                    mapped: bit(&r.resident, i),
                };
            }
            // Reads see the dataspace, never writably: a write must come back to copy.
            return Fault::Map {
                id: r.id,
                ds: r.ds,
                offset,
                page,
                pages: r.around(i),
                flags: r.flags & !(flags::COW | flags::WRITE),
            };
        }
        Fault::Map {
            id: r.id,
            ds: r.ds,
            offset,
            page,
            pages: if write { 1 } else { r.around(i) },
            flags: r.flags,
        }
    }

    /// Records that `pages` pages from `page` are now mapped (writable or not) in region `id`
    /// (ignored if that region was detached meanwhile).
    pub fn mapped(&mut self, id: u64, page: u64, pages: u64, writable: bool) {
        if let Some(r) = self.by_id(id) {
            let hi = page.saturating_add(pages.saturating_mul(PAGE)).min(r.end());
            if let Some((first, n)) = r.page_span(page, hi) {
                set_range(&mut r.resident, first, n, true);
                set_range(&mut r.writable, first, n, writable);
            }
        }
    }

    /// Records that a COW page now lives in the shadow dataspace.
    pub fn copied(&mut self, id: u64, page: u64, shadow: u64) {
        if let Some(r) = self.by_id(id) {
            r.shadow = shadow;
            if r.contains(page) {
                let i = (page - r.start) / PAGE;
                if r.flags & flags::COW != 0 {
                    set(&mut r.private, i, true);
                }
                set(&mut r.resident, i, true);
                set(&mut r.writable, i, true);
            }
        }
    }

    /// Sets the shadow dataspace of region `id`; false if it has one already or is gone.
    pub fn set_shadow(&mut self, id: u64, shadow: u64) -> bool {
        match self.by_id(id) {
            Some(r) if r.shadow == 0 => {
                r.shadow = shadow;
                true
            }
            _ => false,
        }
    }

    /// Forgets what is cached for `[a, a + len)` (its mappings were revoked).
    pub fn forget(&mut self, a: u64, len: u64) {
        for r in self.v.iter_mut() {
            let lo = a.max(r.start);
            let hi = a.saturating_add(len).min(r.end());
            if let Some((first, n)) = r.page_span(lo, hi) {
                set_range(&mut r.resident, first, n, false);
                set_range(&mut r.writable, first, n, false);
            }
        }
    }

    /// The pages of `[a, a + len)` stay mapped but lost their write right (their dataspace
    /// lowered them, e.g. a `dataspace.copy` made them copy-on-write): a read needs no fault, a
    /// write maps the page again.
    pub fn write_protected(&mut self, a: u64, len: u64) {
        for r in self.v.iter_mut() {
            let lo = a.max(r.start);
            let hi = a.saturating_add(len).min(r.end());
            if let Some((first, n)) = r.page_span(lo, hi) {
                set_range(&mut r.writable, first, n, false);
            }
        }
    }

    /// The runs of resident pages in `[a, a + len)`: (address, pages), in address order. What
    /// [`Self::forget`] is about to drop is what must be unmapped, no more: unmapping a whole
    /// 8 MiB stack page by page was most of a `fork`.
    pub fn resident_runs(&self, a: u64, len: u64) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for r in &self.v {
            let lo = a.max(r.start);
            let hi = a.saturating_add(len).min(r.end());
            let mut p = lo & !(PAGE - 1);
            while p < hi {
                let i = (p - r.start) / PAGE;
                if i.is_multiple_of(64) && p + 64 * PAGE <= hi && word(&r.resident, i) == 0 {
                    p += 64 * PAGE;
                    continue;
                }
                if bit(&r.resident, i) {
                    match out.last_mut() {
                        Some((s, n)) if *s + *n * PAGE == p => *n += 1,
                        _ => out.push((p, 1)),
                    }
                }
                p += PAGE;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const RW: u32 = flags::READ | flags::WRITE;

    #[test]
    fn attach_fixed_and_anywhere() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        assert_eq!(
            m.attach(Some(0x1000_0000), 0x4000, PAGE, 5, 0, RW),
            Ok(0x1000_0000)
        );
        assert_eq!(
            m.attach(Some(0x1000_3000), 0x1000, PAGE, 5, 0, RW),
            Err(RegionErr::Busy)
        );
        assert_eq!(m.attach(None, 0x2000, PAGE, 6, 0, RW), Ok(0x1000_4000));
        assert_eq!(m.attach(None, 0x1000, 0x10_0000, 7, 0, RW), Ok(0x1010_0000));
        assert_eq!(m.attach(None, 0x1000, PAGE, 8, 0, RW), Ok(0x1000_6000));
        assert_eq!(m.lookup(0x1000_5fff).unwrap().ds, 6);
        assert_eq!(m.lookup(0x1000_7000), None);
        assert_eq!(m.lookup(0x0fff_ffff), None);
        let r = m.detach(0x1000_4000).unwrap();
        assert_eq!(r.ds, 6);
        assert_eq!(m.detach(0x1000_4000), Err(RegionErr::NotFound));
        assert_eq!(
            m.attach(None, 0x2000, PAGE, 9, 0, RW),
            Ok(0x1000_4000),
            "the hole is reused"
        );
    }

    #[test]
    fn adopted_cow_regions_keep_their_private_pages() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        let cow = RW | flags::COW;
        // Page 1 lives in the shadow (slot 9, whose offset 0x3000 is the region's start), page 0
        // in the source.
        m.adopt(0x1000_0000, 0x2000, 5, 0x1000, cow, 9, 0x3000, &[0b10])
            .unwrap();
        let r = m.lookup(0x1000_0000).unwrap();
        assert!(!r.is_private(0) && r.is_private(1) && !r.is_resident(1));
        assert_eq!(r.private_bits(), &[0b10]);
        let id = r.id;
        assert_eq!(
            m.fault(0x1000_1000, false),
            Fault::Map {
                id,
                ds: 9,
                offset: 0x4000,
                page: 0x1000_1000,
                pages: 1,
                flags: RW
            }
        );
        assert!(matches!(
            m.fault(0x1000_0000, true),
            Fault::Copy {
                ds: 5,
                offset: 0x1000,
                shadow: 9,
                ..
            }
        ));
        // A plain region ignores shadow and bits; overlaps are refused as for attach.
        m.adopt(0x1100_0000, 0x1000, 6, 0, RW, 7, 0, &[1]).unwrap();
        assert_eq!(m.lookup(0x1100_0000).unwrap().shadow, 0);
        assert_eq!(
            m.adopt(0x1000_1000, 0x1000, 6, 0, RW, 0, 0, &[]),
            Err(RegionErr::Busy)
        );
        // What was mapped is forgotten (a copy revoked it).
        m.mapped(id, 0x1000_1000, 1, true);
        assert_eq!(m.fault(0x1000_1000, true), Fault::Cached);
        m.forget(0x1000_0000, 0x2000);
        assert_ne!(m.fault(0x1000_1000, true), Fault::Cached);
    }

    #[test]
    fn bad_attaches() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        assert_eq!(m.attach(None, 0, PAGE, 1, 0, RW), Err(RegionErr::Invalid));
        assert_eq!(m.attach(None, 100, PAGE, 1, 0, RW), Err(RegionErr::Invalid));
        assert_eq!(
            m.attach(None, PAGE, PAGE, 1, 5, RW),
            Err(RegionErr::Invalid)
        );
        assert_eq!(m.attach(None, PAGE, 3, 1, 0, RW), Err(RegionErr::Invalid));
        assert_eq!(
            m.attach(None, PAGE, PAGE, 1, !0xfff, RW),
            Err(RegionErr::Invalid)
        );
        assert_eq!(
            m.attach(Some(0x1000_0001), PAGE, PAGE, 1, 0, RW),
            Err(RegionErr::Invalid)
        );
        assert_eq!(
            m.attach(Some(0x0fff_f000), PAGE, PAGE, 1, 0, RW),
            Err(RegionErr::Invalid)
        );
        assert_eq!(
            m.attach(Some(0x1fff_f000), 2 * PAGE, PAGE, 1, 0, RW),
            Err(RegionErr::Invalid)
        );
        assert_eq!(
            m.attach(Some(!0xfff), 2 * PAGE, PAGE, 1, 0, RW),
            Err(RegionErr::Invalid)
        );
        assert_eq!(
            m.attach(None, 0x1000_0000 + PAGE, PAGE, 1, 0, RW),
            Err(RegionErr::NoSpace)
        );
        assert_eq!(m.attach(None, 0x1000_0000, PAGE, 1, 0, RW), Ok(0x1000_0000));
        assert_eq!(
            m.attach(None, PAGE, PAGE, 1, 0, RW),
            Err(RegionErr::NoSpace)
        );
    }

    #[test]
    fn faults_rights_and_cache() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        let a = m
            .attach(None, 4 * PAGE, PAGE, 3, 0x8000, flags::READ)
            .unwrap();
        assert_eq!(m.fault(0x500, false), Fault::Unmapped);
        assert!(matches!(m.fault(a + 10, true), Fault::Denied { .. }));
        let Fault::Map {
            id,
            ds,
            offset,
            page,
            pages,
            flags: f,
        } = m.fault(a + PAGE + 8, false)
        else {
            panic!()
        };
        assert_eq!((ds, offset, page, f), (3, 0x9000, a + PAGE, flags::READ));
        // Pages 1..4 of the region: fault-around asks for the three up to its end.
        assert_eq!(pages, 3);
        m.mapped(id, page, 1, false);
        assert_eq!(m.fault(a + PAGE + 16, false), Fault::Cached);
        m.forget(a, 4 * PAGE);
        assert!(matches!(m.fault(a + PAGE, false), Fault::Map { .. }));
        // A writable region: a read mapping that came back read-only does not satisfy a write.
        let b = m.attach(None, PAGE, PAGE, 4, 0, RW).unwrap();
        let Fault::Map { id, .. } = m.fault(b, false) else {
            panic!()
        };
        m.mapped(id, b, 1, false);
        assert!(matches!(m.fault(b, true), Fault::Map { .. }));
        m.mapped(id, b, 1, true);
        assert_eq!(m.fault(b, true), Fault::Cached);
        // Detached: late results are ignored.
        m.detach(b).unwrap();
        m.mapped(id, b, 1, true);
        assert_eq!(m.fault(b, false), Fault::Unmapped);
    }

    #[test]
    fn resident_runs_are_what_forget_drops() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        // A stack-like region of 2,048 pages with a few resident at both ends and in between.
        let a = m.attach(None, 2048 * PAGE, PAGE, 3, 0, RW).unwrap();
        let touch = |m: &mut Regions, page: u64, write: bool| {
            let Fault::Map { id, page: p, .. } = m.fault(a + page * PAGE, write) else {
                panic!("page {page}")
            };
            m.mapped(id, p, 1, write);
        };
        for p in [0, 1, 2, 63, 64, 700, 2045, 2046, 2047] {
            touch(&mut m, p, p % 2 == 0);
        }
        let runs = m.resident_runs(a, 2048 * PAGE);
        assert_eq!(
            runs,
            std::vec![
                (a, 3),
                (a + 63 * PAGE, 2),
                (a + 700 * PAGE, 1),
                (a + 2045 * PAGE, 3)
            ]
        );
        // Part of the range only, starting inside a run.
        assert_eq!(
            m.resident_runs(a + PAGE, 64 * PAGE),
            std::vec![(a + PAGE, 2), (a + 63 * PAGE, 2)]
        );
        m.forget(a, 2048 * PAGE);
        assert!(m.resident_runs(a, 2048 * PAGE).is_empty());
        for p in [0, 64, 700, 2047] {
            assert!(matches!(m.fault(a + p * PAGE, false), Fault::Map { .. }));
        }
    }

    #[test]
    fn write_protected_pages_stay_for_reads_and_map_again_for_writes() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        let a = m.attach(None, 200 * PAGE, PAGE, 3, 0, RW).unwrap();
        for p in [0, 1, 64, 130, 199] {
            let Fault::Map { id, page, .. } = m.fault(a + p * PAGE, true) else {
                panic!("page {p}")
            };
            m.mapped(id, page, 1, true);
        }
        m.write_protected(a + PAGE, 198 * PAGE);
        for p in [0, 1, 64, 130, 199] {
            assert_eq!(m.fault(a + p * PAGE, false), Fault::Cached, "page {p}");
        }
        // Outside the range the write right stays; inside, a write maps the page again.
        assert_eq!(m.fault(a, true), Fault::Cached);
        assert_eq!(m.fault(a + 199 * PAGE, true), Fault::Cached);
        for p in [1, 64, 130] {
            assert!(matches!(
                m.fault(a + p * PAGE, true),
                Fault::Map { pages: 1, .. }
            ));
        }
        assert_eq!(
            m.resident_runs(a, 200 * PAGE),
            std::vec![
                (a, 2),
                (a + 64 * PAGE, 1),
                (a + 130 * PAGE, 1),
                (a + 199 * PAGE, 1)
            ],
            "nothing is forgotten"
        );
    }

    #[test]
    fn copy_on_write_regions() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        let a = m
            .attach(None, 2 * PAGE, PAGE, 3, 0x4000, RW | flags::COW)
            .unwrap();
        let Fault::Map {
            id,
            ds,
            offset,
            flags: f,
            ..
        } = m.fault(a, false)
        else {
            panic!()
        };
        assert_eq!(
            (ds, offset, f),
            (3, 0x4000, flags::READ),
            "reads map the source read-only"
        );
        m.mapped(id, a, 1, false);
        let Fault::Copy {
            shadow,
            shadow_offset,
            mapped,
            ..
        } = m.fault(a, true)
        else {
            panic!()
        };
        assert_eq!((shadow, shadow_offset, mapped), (0, 0, true));
        assert!(m.set_shadow(id, 77));
        assert!(!m.set_shadow(id, 78));
        m.copied(id, a, 77);
        assert_eq!(m.fault(a, true), Fault::Cached);
        m.forget(a, PAGE);
        let Fault::Map {
            ds,
            offset,
            flags: f,
            ..
        } = m.fault(a, false)
        else {
            panic!()
        };
        assert_eq!(
            (ds, offset, f),
            (77, 0, RW),
            "a copied page comes from the shadow"
        );
        let Fault::Copy {
            shadow,
            shadow_offset,
            mapped,
            ..
        } = m.fault(a + PAGE, true)
        else {
            panic!()
        };
        assert_eq!((shadow, shadow_offset, mapped), (77, PAGE, false));
    }

    #[test]
    fn split_remove_protect() {
        let mut m = Regions::new(0x1000, 0x10_0000_0000);
        m.set_range(0x1000, 0x10_0000_0000, 0x8_0000_0000, 0x10_0000_0000)
            .unwrap();
        // Anywhere goes to the automatic range; fixed addresses anywhere in the whole one.
        assert_eq!(m.attach(None, 0x2000, PAGE, 3, 0, RW), Ok(0x8_0000_0000));
        assert_eq!(
            m.attach(Some(0x40_0000), 0x8000, PAGE, 4, 0, RW),
            Ok(0x40_0000)
        );
        m.mapped(m.lookup(0x40_0000).unwrap().id, 0x40_0000, 8, true);
        // Remove the middle: two pieces stay, the upper one reading the dataspace further on.
        let gone = m.remove_range(0x40_2000, 0x2000).unwrap();
        assert_eq!(gone.len(), 1);
        assert_eq!(
            (gone[0].start, gone[0].size, gone[0].offset),
            (0x40_2000, 0x2000, 0x2000)
        );
        let up = m.lookup(0x40_4000).unwrap();
        assert_eq!(
            (up.start, up.size, up.offset, up.ds),
            (0x40_4000, 0x4000, 0x4000, 4)
        );
        assert!(up.is_resident(0));
        assert_eq!(m.lookup(0x40_0000).unwrap().size, 0x2000);
        assert!(m.lookup(0x40_2000).is_none());
        assert!(m.uses(4));
        assert!(m.covered(0x40_0000, 0x2000, flags::WRITE));
        assert!(!m.covered(0x40_0000, 0x3000, 0));
        // Protect part of the upper piece read-only: writes there are denied, cache forgotten.
        assert_eq!(m.protect(0x40_5000, 0x1000, flags::READ), Ok(()));
        assert!(matches!(m.fault(0x40_5000, true), Fault::Denied { .. }));
        assert!(matches!(
            m.fault(0x40_5000, false),
            Fault::Map { offset: 0x5000, .. }
        ));
        assert_eq!(m.fault(0x40_4000, true), Fault::Cached);
        assert_eq!(m.fault(0x40_6000, true), Fault::Cached);
        // PROT_NONE: even reads are denied; a gap is refused.
        assert_eq!(m.protect(0x40_6000, 0x1000, 0), Ok(()));
        assert!(matches!(m.fault(0x40_6000, false), Fault::Denied { .. }));
        assert_eq!(m.protect(0x40_1000, 0x2000, 0), Err(RegionErr::NotFound));
        // Moving: to a taken place is refused with nothing changed; to a free one keeps the
        // sources and offsets, nothing cached.
        assert_eq!(
            m.relocate(0x40_4000, 0x4000, 0x40_0000),
            Err(RegionErr::Busy)
        );
        assert!(m.covered(0x40_4000, 0x4000, 0));
        assert_eq!(m.relocate(0x40_4000, 0x4000, 0x90_0000), Ok(()));
        assert!(!m.covered(0x40_4000, 0x1000, 0));
        let r = m.lookup(0x90_1000).unwrap();
        assert_eq!((r.start, r.offset, r.ds), (0x90_1000, 0x5000, 4));
        assert!(matches!(
            m.fault(0x90_0000, true),
            Fault::Map { offset: 0x4000, .. }
        ));
        let gone = m.remove_range(0x40_0000, 0x8000).unwrap();
        assert_eq!(gone.len(), 1);
        let gone = m.remove_range(0x90_0000, 0x4000).unwrap();
        assert_eq!(gone.len(), 4);
        assert!(!m.uses(4));
    }

    /// The word-at-a-time bit helpers agree with bit-by-bit ones on every range of a few
    /// pseudo-random bitmaps (ranges crossing words, ending at and past a bitmap's end).
    #[test]
    fn word_helpers_agree_with_bits() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..40 {
            let a: Vec<u64> = (0..3).map(|_| next() & next()).collect();
            let b: Vec<u64> = (0..2).map(|_| next() & next() & next()).collect();
            for from in 0..200 {
                for limit in [0, 1, 15, 64, 70] {
                    let mut want = 0;
                    while want < limit && !bit(&a, from + want) && !bit(&b, from + want) {
                        want += 1;
                    }
                    assert_eq!(clear_run(&a, &b, from, limit), want, "{from} {limit}");
                }
                for n in [0, 1, 3, 63, 64, 65, 130] {
                    for on in [false, true] {
                        let (mut got, mut want) = (a.clone(), a.clone());
                        set_range(&mut got, from, n, on);
                        for i in from..from + n {
                            set(&mut want, i, on);
                        }
                        assert_eq!(got, want, "{from} {n} {on}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_last_region_found_is_only_a_hint() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        let ds_of = |m: &Regions, a: u64| m.lookup(a).map(|r| r.ds);
        let a = m
            .attach(Some(0x1000_0000), 4 * PAGE, PAGE, 1, 0, flags::READ)
            .unwrap();
        let b = m
            .attach(Some(0x1100_0000), 4 * PAGE, PAGE, 2, 0, flags::READ)
            .unwrap();
        let c = m
            .attach(Some(0x1200_0000), 4 * PAGE, PAGE, 3, 0, flags::READ)
            .unwrap();
        assert_eq!(ds_of(&m, c), Some(3));
        assert_eq!(ds_of(&m, a + PAGE), Some(1));
        assert_eq!(ds_of(&m, a + PAGE), Some(1));
        // The hinted region goes and another comes before it: the hint's index now names
        // another region, which is not taken for the address.
        m.detach(a).unwrap();
        assert_eq!(ds_of(&m, a + PAGE), None);
        assert_eq!(ds_of(&m, b), Some(2));
        m.detach(b).unwrap();
        let d = m
            .attach(Some(0x1080_0000), 4 * PAGE, PAGE, 4, 0, flags::READ)
            .unwrap();
        assert_eq!(ds_of(&m, b), None);
        assert_eq!(ds_of(&m, d + 3 * PAGE), Some(4));
        assert_eq!(ds_of(&m, c + 3 * PAGE), Some(3));
        assert_eq!(ds_of(&m, c + 4 * PAGE), None);
        // Recording a mapping by id finds its region whatever the hint says.
        let Fault::Map { id, .. } = m.fault(d, false) else {
            panic!()
        };
        assert_eq!(ds_of(&m, c), Some(3));
        m.mapped(id, d, 2, false);
        assert_eq!(m.fault(d + PAGE, false), Fault::Cached);
        assert!(matches!(m.fault(c, false), Fault::Map { .. }));
    }

    #[test]
    fn read_faults_map_around_up_to_what_is_held() {
        let mut m = Regions::new(0x1000_0000, 0x2000_0000);
        let a = m
            .attach(None, 40 * PAGE, PAGE, 3, 0, flags::READ | flags::EXEC)
            .unwrap();
        let pages_at = |m: &Regions, addr: u64, write: bool| match m.fault(addr, write) {
            Fault::Map { pages, .. } => pages,
            f => panic!("{:?}", f),
        };
        // At most FAULT_AROUND pages, never past the region's end.
        assert_eq!(pages_at(&m, a, false), FAULT_AROUND);
        assert_eq!(pages_at(&m, a + 37 * PAGE, false), 3);
        // Stops before a page the task holds already.
        let Fault::Map { id, .. } = m.fault(a, false) else {
            panic!()
        };
        m.mapped(id, a + 5 * PAGE, 1, false);
        assert_eq!(pages_at(&m, a + 2 * PAGE, false), 3);
        // Marked resident as mapped: the pages that came are Cached.
        m.mapped(id, a + 2 * PAGE, 3, false);
        assert_eq!(m.fault(a + 4 * PAGE, false), Fault::Cached);
        // A COW region: a read maps around, not over private pages; writes one page.
        let cow = flags::READ | flags::WRITE | flags::COW;
        m.adopt(0x1800_0000, 8 * PAGE, 5, 0, cow, 9, 0, &[0b1000])
            .unwrap();
        assert_eq!(pages_at(&m, 0x1800_0000, false), 3);
        assert_eq!(pages_at(&m, 0x1800_3000, false), 1);
        assert_eq!(pages_at(&m, 0x1800_4000, false), 4);
        let rw = m
            .attach(None, 8 * PAGE, PAGE, 4, 0, flags::READ | flags::WRITE)
            .unwrap();
        assert_eq!(pages_at(&m, rw, true), 1);
        assert_eq!(pages_at(&m, rw, false), 8);
    }
}
