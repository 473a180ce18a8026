//! The bookkeeping of the memory server `mem` (the binary is `src/main.rs`): which frames of its
//! RAM pool are free, which dataspace holds which frame at which page, copy-on-write sharing,
//! and how many pages each client (badge) is charged against its quota.
//!
//! Pure logic: it touches no memory and makes no system calls. What must happen to real memory
//! (zeroing, copying a frame, revoking every mapping derived from a frame) is asked of a
//! [`Backend`], which the server implements with its pool window and `unmap`, and the host tests
//! with plain arrays. The logic is therefore tested on the host (`cargo test -p sawmill-mem`).
//!
//! Accounting rule: a client is charged one page for every page *present* in a dataspace it owns
//! (allocated on first touch for anonymous dataspaces, at once for DMA ones). A copy-on-write copy
//! is charged in full when made (its pages are present, if shared), so breaking the sharing later
//! never needs quota; it may still fail if the pool itself is empty.
//!
//! Copy-on-write rule: every mapping of a frame two dataspaces share is read-only. `copy` lowers
//! the mappings made so far ([`Backend::write_protect`]: the sharers keep reading without a
//! fault), and `fault` maps a shared frame read-only. So a frame's bytes change only through a
//! write fault, which breaks the sharing first, and a dataspace that lets go of a shared frame
//! need not revoke its mappings at once: they stay, read-only, until the frame's last holder
//! writes it, and that write fault revokes them (the frame is marked *stale* meanwhile).
//!
//! DMA rule: a frame a device may still reach is never reused. A driver pins the frames of a
//! request for as long as its device works on them (`Sys::Pin`); a freed frame that still has
//! pins ([`Backend::pinned`]) goes to a quarantine instead of the free pool, and returns to the
//! pool at the first allocation after its pins are gone. A copy-on-write `copy` never shares a
//! pinned frame (a device write into it would show in the copy): the copy gets its own page.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod pagemap;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
pub use pagemap::PageMap;

pub const PAGE: u64 = 4096;

/// Index of a frame of the pool (its address in mem is
/// `sawmill_mem_api::POOL_BASE + f * PAGE`).
pub type Frame = u32;

/// The memory operations the logic needs done.
pub trait Backend {
    /// Fill frame `f` with zeroes.
    fn zero(&mut self, f: Frame);
    /// Copy frame `from` to frame `to`.
    fn copy(&mut self, from: Frame, to: Frame);
    /// Revoke every mapping derived from mem's own mapping of `f` (in all tasks).
    fn revoke(&mut self, f: Frame);
    /// Lower every mapping derived from mem's own mappings of frames `first..first + n` (in all
    /// tasks) to read-only, keeping them, except those of frames a device may still reach (DMA
    /// pins), which stay as they are. Returns how many frames were left for their pins.
    fn write_protect(&mut self, first: Frame, n: u32) -> u32;
    /// [`Self::revoke`] of frames `first..first + n`; returns how many of them have DMA pins
    /// (0: none, so none needs asking about).
    fn revoke_run(&mut self, first: Frame, n: u32) -> u32 {
        let mut pinned = 0;
        for f in first..first + n {
            self.revoke(f);
            pinned += self.pinned(f) as u32;
        }
        pinned
    }
    /// Whether some task has `f` pinned for DMA (a device may still read or write it).
    fn pinned(&mut self, _f: Frame) -> bool {
        false
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemErr {
    /// Argument out of range.
    Invalid,
    /// The owner's quota would be exceeded.
    Quota,
    /// The pool or a table is full.
    NoMemory,
    /// No such dataspace.
    Gone,
    /// The operation makes no sense for this dataspace (resize of a DMA one, phys of an
    /// anonymous one).
    Unsupported,
}

/// The RAM pool: ranges of physically contiguous frames, numbered consecutively.
pub struct Frames {
    /// (physical address, first frame, frames)
    ranges: Vec<(u64, Frame, u32)>,
    /// Reference count per frame: 0 = free; >1 = shared copy-on-write.
    refs: Vec<u16>,
    nfree: u32,
    /// Where the next search for a free frame starts (so allocation is not quadratic).
    hint: u32,
    /// Freed frames that still had DMA pins: held (reference count 1, owned by nobody) until
    /// their pins are gone.
    quarantine: Vec<Frame>,
    /// One bit per frame: read-only mappings of a dataspace that let go of the frame while it
    /// was shared may still be there (the copy-on-write rule, above).
    stale: Vec<u64>,
}

impl Frames {
    /// `ranges`: (physical address, pages) in pool order.
    pub fn new(ranges: &[(u64, u64)]) -> Frames {
        let mut v = Vec::new();
        let mut n: u32 = 0;
        for &(pa, pages) in ranges {
            let pages = pages.min((u32::MAX - n) as u64 / 2) as u32;
            v.push((pa, n, pages));
            n += pages;
        }
        Frames {
            ranges: v,
            refs: alloc::vec![0; n as usize],
            nfree: n,
            hint: 0,
            quarantine: Vec::new(),
            stale: alloc::vec![0; (n as usize).div_ceil(64)],
        }
    }
    pub fn total(&self) -> u32 {
        self.refs.len() as u32
    }
    pub fn free(&self) -> u32 {
        self.nfree
    }
    pub fn refs(&self, f: Frame) -> u16 {
        self.refs[f as usize]
    }
    /// Physical address of a frame.
    pub fn paddr(&self, f: Frame) -> u64 {
        for &(pa, first, n) in &self.ranges {
            if f >= first && f < first + n {
                return pa + (f - first) as u64 * PAGE;
            }
        }
        0
    }
    pub fn alloc(&mut self) -> Option<Frame> {
        let n = self.total();
        if self.nfree == 0 {
            return None;
        }
        for i in 0..n {
            let f = (self.hint + i) % n;
            if self.refs[f as usize] == 0 {
                self.refs[f as usize] = 1;
                self.nfree -= 1;
                self.hint = (f + 1) % n;
                return Some(f);
            }
        }
        None
    }
    /// `n` physically contiguous frames (inside one range): the first.
    pub fn alloc_contig(&mut self, n: u32) -> Option<Frame> {
        if n == 0 || n > self.nfree {
            return None;
        }
        for &(_, first, count) in &self.ranges {
            let mut run = 0;
            for f in first..first + count {
                if self.refs[f as usize] == 0 {
                    run += 1;
                    if run == n {
                        let start = f + 1 - n;
                        for g in start..=f {
                            self.refs[g as usize] = 1;
                        }
                        self.nfree -= n;
                        return Some(start);
                    }
                } else {
                    run = 0;
                }
            }
        }
        None
    }
    pub fn incref(&mut self, f: Frame) {
        self.refs[f as usize] += 1;
    }
    /// Frames held in quarantine (freed while pinned).
    pub fn quarantined(&self) -> &[Frame] {
        &self.quarantine
    }
    /// Drops one reference; true if the frame became free.
    pub fn decref(&mut self, f: Frame) -> bool {
        let r = &mut self.refs[f as usize];
        *r -= 1;
        if *r == 0 {
            self.nfree += 1;
            // Freed only after a revoke of all its mappings (or never mapped).
            self.set_stale(f, false);
            true
        } else {
            false
        }
    }
    /// Whether read-only mappings of a former sharer of `f` may remain.
    pub fn stale(&self, f: Frame) -> bool {
        self.stale[f as usize / 64] & 1 << (f % 64) != 0
    }
    fn set_stale(&mut self, f: Frame, on: bool) {
        let w = &mut self.stale[f as usize / 64];
        if on {
            *w |= 1 << (f % 64);
        } else {
            *w &= !(1 << (f % 64));
        }
    }
}

/// A client's account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account {
    /// Pages charged.
    pub used: u64,
    /// Most pages it may be charged.
    pub quota: u64,
    /// Dataspaces it owns.
    pub dataspaces: u32,
}

/// One dataspace.
#[derive(Debug)]
pub struct Ds {
    /// Badge of the client that created it (and pays for it).
    pub owner: u64,
    /// Size in pages.
    pub size: u64,
    /// Present pages (sparse: an untouched page costs nothing, not even here).
    pub pages: PageMap,
    /// Physically contiguous (DMA): all pages present from the start, never resized.
    pub contig: bool,
    /// Made by or copied from with `copy` (pages may be shared).
    pub cow: bool,
    /// The owner's account (index into `Mem::accounts`): a fault charges it without a lookup.
    acct: usize,
}

/// Limits of the server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Quota of a client not named otherwise, in pages.
    pub default_quota: u64,
    /// Dataspaces one client may own at once (they cost mem capability slots).
    pub ds_per_client: u32,
    /// Dataspaces in all.
    pub ds_total: usize,
}

/// The whole state of the memory server.
pub struct Mem {
    pub frames: Frames,
    ds: Vec<Option<Ds>>,
    /// The accounts, by index (a dataspace names its owner's); `None`: a free slot.
    accounts: Vec<Option<Account>>,
    /// Badge -> index in `accounts`.
    account_of: BTreeMap<u64, usize>,
    quotas: BTreeMap<u64, u64>,
    pub limits: Limits,
}

impl Mem {
    pub fn new(frames: Frames, limits: Limits) -> Mem {
        Mem {
            frames,
            ds: Vec::new(),
            accounts: Vec::new(),
            account_of: BTreeMap::new(),
            quotas: BTreeMap::new(),
            limits,
        }
    }

    /// Gives client `badge` a quota other than the default.
    pub fn set_quota(&mut self, badge: u64, pages: u64) {
        self.quotas.insert(badge, pages);
        if let Some(&i) = self.account_of.get(&badge) {
            self.acct(i).quota = pages;
        }
    }

    /// The index of `badge`'s account, made on first use.
    fn account_index(&mut self, badge: u64) -> usize {
        if let Some(&i) = self.account_of.get(&badge) {
            return i;
        }
        let a = Account {
            used: 0,
            quota: *self
                .quotas
                .get(&badge)
                .unwrap_or(&self.limits.default_quota),
            dataspaces: 0,
        };
        let i = match self.accounts.iter().position(|a| a.is_none()) {
            Some(i) => {
                self.accounts[i] = Some(a);
                i
            }
            None => {
                self.accounts.push(Some(a));
                self.accounts.len() - 1
            }
        };
        self.account_of.insert(badge, i);
        i
    }

    fn acct(&mut self, i: usize) -> &mut Account {
        self.accounts[i].as_mut().expect("live account")
    }

    pub fn account(&mut self, badge: u64) -> &mut Account {
        let i = self.account_index(badge);
        self.acct(i)
    }

    fn charge(&mut self, badge: u64, n: u64) -> Result<(), MemErr> {
        let i = self.account_index(badge);
        self.charge_at(i, n)
    }

    /// Charges account `i` (a live dataspace's `acct`) `n` pages.
    #[inline]
    fn charge_at(&mut self, i: usize, n: u64) -> Result<(), MemErr> {
        let a = self.acct(i);
        match a.used.checked_add(n) {
            Some(u) if u <= a.quota => {
                a.used = u;
                Ok(())
            }
            _ => Err(MemErr::Quota),
        }
    }

    fn uncharge(&mut self, badge: u64, n: u64) {
        let i = self.account_index(badge);
        self.uncharge_at(i, n);
    }

    fn uncharge_at(&mut self, i: usize, n: u64) {
        let a = self.acct(i);
        a.used = a.used.saturating_sub(n);
    }

    pub fn get(&self, id: usize) -> Option<&Ds> {
        self.ds.get(id).and_then(|d| d.as_ref())
    }

    /// Ids of the live dataspaces.
    pub fn ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.ds
            .iter()
            .enumerate()
            .filter(|d| d.1.is_some())
            .map(|d| d.0)
    }

    fn new_ds(&mut self, mut ds: Ds) -> Result<usize, MemErr> {
        let owner = ds.owner;
        let per = self.limits.ds_per_client;
        ds.acct = self.account_index(owner);
        let a = self.acct(ds.acct);
        if a.dataspaces >= per {
            return Err(MemErr::NoMemory);
        }
        let id = match self.ds.iter().position(|d| d.is_none()) {
            Some(i) => i,
            None if self.ds.len() < self.limits.ds_total => {
                self.ds.push(None);
                self.ds.len() - 1
            }
            None => return Err(MemErr::NoMemory),
        };
        self.acct(ds.acct).dataspaces += 1;
        self.ds[id] = Some(ds);
        Ok(id)
    }

    fn pages_of(&self, bytes: u64) -> Result<u64, MemErr> {
        let pages = bytes.checked_add(PAGE - 1).ok_or(MemErr::Invalid)? / PAGE;
        // Nothing larger than the pool can ever be backed; refusing it also bounds offsets.
        if pages == 0 || pages > self.frames.total() as u64 {
            return Err(MemErr::Invalid);
        }
        Ok(pages)
    }

    /// A new anonymous dataspace of `bytes` (rounded up to pages), owned by `client`.
    pub fn alloc(&mut self, client: u64, bytes: u64) -> Result<usize, MemErr> {
        let size = self.pages_of(bytes)?;
        self.new_ds(Ds {
            owner: client,
            size,
            pages: PageMap::new(),
            contig: false,
            cow: false,
            acct: 0,
        })
    }

    /// A physically contiguous dataspace, all pages present and zeroed. Returns it and its
    /// physical address.
    pub fn alloc_dma(
        &mut self,
        b: &mut impl Backend,
        client: u64,
        pages: u64,
    ) -> Result<(usize, u64), MemErr> {
        let n = self.pages_of(pages.checked_mul(PAGE).ok_or(MemErr::Invalid)?)?;
        self.reclaim(b);
        self.charge(client, n)?;
        let Some(first) = self.frames.alloc_contig(n as u32) else {
            self.uncharge(client, n);
            return Err(MemErr::NoMemory);
        };
        let mut map = PageMap::new();
        let mut made = Ok(());
        for i in 0..n {
            b.zero(first + i as u32);
            if made.is_ok() {
                made = map.insert(i, first + i as u32).map(|_| ());
            }
        }
        match made.and_then(|_| {
            self.new_ds(Ds {
                owner: client,
                size: n,
                pages: map,
                contig: true,
                cow: false,
                acct: 0,
            })
        }) {
            Ok(id) => Ok((id, self.frames.paddr(first))),
            Err(e) => {
                for i in 0..n {
                    self.frames.decref(first + i as u32);
                }
                self.uncharge(client, n);
                Err(e)
            }
        }
    }

    /// Resolves a fault on page `page` of dataspace `id`: the frame to map and whether it may be
    /// mapped writable. `write` = the caller needs write access now (breaks copy-on-write
    /// sharing). Allocates (and charges the owner) on first touch.
    pub fn fault(
        &mut self,
        b: &mut impl Backend,
        id: usize,
        page: u64,
        write: bool,
    ) -> Result<(Frame, bool), MemErr> {
        let ds = self.get(id).ok_or(MemErr::Gone)?;
        if page >= ds.size {
            return Err(MemErr::Invalid);
        }
        let acct = ds.acct;
        match ds.pages.get(page) {
            None => {
                self.reclaim(b);
                self.charge_at(acct, 1)?;
                let Some(f) = self.frames.alloc() else {
                    self.uncharge_at(acct, 1);
                    return Err(MemErr::NoMemory);
                };
                if let Err(e) = self.ds[id].as_mut().unwrap().pages.insert(page, f) {
                    self.frames.decref(f);
                    self.uncharge_at(acct, 1);
                    return Err(e);
                }
                b.zero(f);
                Ok((f, true))
            }
            Some(f) if self.frames.refs(f) > 1 => {
                if !write {
                    return Ok((f, false));
                }
                // Break the sharing: this dataspace gets a private copy (already paid for). The
                // shared frame's mappings go, so whoever mapped it through this dataspace faults
                // again and finds the copy.
                self.reclaim(b);
                let nf = self.frames.alloc().ok_or(MemErr::NoMemory)?;
                b.copy(f, nf);
                self.revoke(b, f);
                self.frames.decref(f);
                // Replacing a present page needs no memory.
                let _ = self.ds[id].as_mut().unwrap().pages.insert(page, nf);
                Ok((nf, true))
            }
            Some(f) if self.frames.stale(f) => {
                // Ours alone now, but a former sharer may still map it: read-only until the
                // first write, which takes every other mapping away first.
                if !write {
                    return Ok((f, false));
                }
                self.revoke(b, f);
                Ok((f, true))
            }
            Some(f) => Ok((f, true)),
        }
    }

    /// Revokes every mapping of `f`; none of a former sharer is left.
    fn revoke(&mut self, b: &mut impl Backend, f: Frame) {
        b.revoke(f);
        self.frames.set_stale(f, false);
    }

    /// A copy-on-write copy of `id`, owned (and paid for) by `id`'s owner.
    pub fn copy(&mut self, b: &mut impl Backend, id: usize) -> Result<usize, MemErr> {
        let ds = self.get(id).ok_or(MemErr::Gone)?;
        if ds.contig {
            // Sharing would let a write move a DMA page away from its physical address.
            return Err(MemErr::Unsupported);
        }
        let (owner, n) = (ds.owner, ds.pages.len());
        let size = ds.size;
        // Every mapping of the frames about to be shared loses its write right, so that a write
        // faults and breaks the sharing; reads go on without a fault. One call per run of
        // consecutive frames. (Should the copy fail below, a lowered mapping of a frame still
        // ours alone only takes one write fault to be writable again.)
        let mut frames: Vec<Frame> = ds.pages.iter().map(|p| p.1).collect();
        frames.sort_unstable();
        let mut with_pins = 0;
        for run in frames.chunk_by(|a, b| b.wrapping_sub(*a) == 1) {
            with_pins += b.write_protect(run[0], run.len() as u32);
        }
        // A frame a device may be writing is not shared (its mappings were left writable): the
        // copy gets its own page now (the device's write then lands in this dataspace only).
        // Which ones is asked frame by frame, and only if there are any; a frame whose pins went
        // meanwhile is lowered by that same call, as shared frames must be.
        let pinned: Vec<(u64, Frame)> = if with_pins == 0 {
            Vec::new()
        } else {
            ds.pages
                .iter()
                .filter(|p| b.write_protect(p.1, 1) > 0)
                .collect()
        };
        let mut copied = ds.pages.try_clone()?;
        self.reclaim(b);
        let mut own = Vec::with_capacity(pinned.len());
        for _ in 0..pinned.len() {
            match self.frames.alloc() {
                Some(nf) => own.push(nf),
                None => {
                    for &nf in &own {
                        self.frames.decref(nf);
                    }
                    return Err(MemErr::NoMemory);
                }
            }
        }
        for (&(p, f), &nf) in pinned.iter().zip(&own) {
            b.copy(f, nf);
            // Replacing a present page needs no memory.
            let _ = copied.insert(p, nf);
        }
        if let Err(e) = self.charge(owner, n) {
            for &nf in &own {
                self.frames.decref(nf);
            }
            return Err(e);
        }
        let new = match self.new_ds(Ds {
            owner,
            size,
            pages: copied,
            contig: false,
            cow: true,
            acct: 0,
        }) {
            Ok(x) => x,
            Err(e) => {
                for &nf in &own {
                    self.frames.decref(nf);
                }
                self.uncharge(owner, n);
                return Err(e);
            }
        };
        // The mappings of the now shared frames were lowered to read-only above.
        let d = self.ds[id].as_mut().unwrap();
        for (p, f) in d.pages.iter() {
            if pinned.iter().all(|x| x.0 != p) {
                self.frames.incref(f);
            }
        }
        d.cow = true;
        Ok(new)
    }

    /// Physical address of page `page` of a contiguous dataspace.
    pub fn phys(&self, id: usize, page: u64) -> Result<u64, MemErr> {
        let ds = self.get(id).ok_or(MemErr::Gone)?;
        if !ds.contig {
            return Err(MemErr::Unsupported);
        }
        let f = ds.pages.get(page).ok_or(MemErr::Invalid)?;
        Ok(self.frames.paddr(f))
    }

    /// Lets go of the frames a dataspace held.
    fn drop_pages(&mut self, b: &mut impl Backend, frames: impl IntoIterator<Item = Frame>) {
        let mut last = Vec::new();
        for f in frames {
            if self.frames.refs(f) > 1 {
                // Another dataspace keeps it. Our mappings of it are read-only, as every mapping
                // of a shared frame, and its bytes cannot change before its holder's write
                // fault, which revokes them: they may stay until then (a process ending frees
                // its copies while its task still maps them; revoking each frame here cost an
                // `unmap` a page and took the sharer's mappings with them).
                self.frames.decref(f);
                self.frames.set_stale(f, true);
            } else {
                last.push(f);
            }
        }
        // Every mapping of a frame whose last holder we were goes, in every task, before it can
        // be reused: one call per run of consecutive frames.
        last.sort_unstable();
        for run in last.chunk_by(|a, b| b.wrapping_sub(*a) == 1) {
            let pinned = b.revoke_run(run[0], run.len() as u32);
            for &f in run {
                self.frames.set_stale(f, false);
                // Nobody can pin it any more (pins need a mapping), so its pins only go down
                // from here: the frame waits them out in quarantine.
                if pinned > 0 && b.pinned(f) {
                    self.frames.quarantine.push(f);
                } else {
                    self.frames.decref(f);
                }
            }
        }
    }

    /// Returns the quarantined frames whose pins are gone to the pool. Every allocation runs it
    /// first (a non-empty quarantine is rare: a frame freed while its DMA was in flight).
    pub fn reclaim(&mut self, b: &mut impl Backend) {
        if self.frames.quarantine.is_empty() {
            return;
        }
        let mut q = core::mem::take(&mut self.frames.quarantine);
        q.retain(|&f| {
            if b.pinned(f) {
                true
            } else {
                self.frames.decref(f);
                false
            }
        });
        self.frames.quarantine = q;
    }

    /// Grows or shrinks an anonymous dataspace to `bytes`.
    pub fn resize(&mut self, b: &mut impl Backend, id: usize, bytes: u64) -> Result<(), MemErr> {
        let size = self.pages_of(bytes)?;
        let ds = self.get(id).ok_or(MemErr::Gone)?;
        if ds.contig {
            return Err(MemErr::Unsupported);
        }
        let acct = ds.acct;
        let d = self.ds[id].as_mut().unwrap();
        d.size = size;
        let gone = d.pages.truncate(size);
        self.drop_pages(b, gone.iter().copied());
        self.uncharge_at(acct, gone.len() as u64);
        Ok(())
    }

    /// Ends a dataspace; its pages go back to the pool and its owner's quota.
    pub fn free(&mut self, b: &mut impl Backend, id: usize) -> Result<(), MemErr> {
        let ds = self
            .ds
            .get_mut(id)
            .and_then(|d| d.take())
            .ok_or(MemErr::Gone)?;
        self.drop_pages(b, ds.pages.iter().map(|p| p.1));
        self.uncharge_at(ds.acct, ds.pages.len());
        let a = self.acct(ds.acct);
        a.dataspaces = a.dataspaces.saturating_sub(1);
        Ok(())
    }

    /// Frees every dataspace `client` owns; returns their ids (the server revokes their
    /// capabilities).
    pub fn client_gone(&mut self, b: &mut impl Backend, client: u64) -> Vec<usize> {
        let ids: Vec<usize> = self
            .ids()
            .filter(|&i| self.get(i).unwrap().owner == client)
            .collect();
        for &i in &ids {
            let _ = self.free(b, i);
        }
        // Its dataspaces are gone, so no `Ds::acct` names the slot any more.
        if let Some(i) = self.account_of.remove(&client) {
            self.accounts[i] = None;
        }
        ids
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_dma;
