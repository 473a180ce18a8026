//! The PFS's page cache: device pages (4 KiB) in an anonymous dataspace of the memory server,
//! charged to this PFS under its own quota (no other PFS can read or evict it), shared with the
//! block driver so the device DMAs straight into it. Write-back: writes dirty pages; `sync` writes them out in
//! batches (several requests in flight) and flushes the device.
//!
//! Pages mapped into clients are pinned while an open file holds them; a page that was ever
//! mapped has its client mappings revoked before it is reused.
//!
//! The block driver may be restarted by root (manifest `restart`, docs/ARCHITECTURE.md,
//! "Supervision"): a call that finds its incarnation gone (the endpoint revoked: `PeerGone`,
//! `GONE` or an emptied slot) waits for the new incarnation in the same slot (root puts it
//! there), shares the cache with it again and resubmits the call. Calls go one after the other
//! and each is resubmitted before the next is sent, so writes still precede the flush that
//! covers them; reads and writes of whole pages are idempotent, so resubmitting one the dead
//! driver had partly done is harmless (the new incarnation resets the device first, which ends
//! whatever the old one left in flight).
//!
//! Read-ahead (policy in `sawmill_ext2_api::readahead`, host-tested): a miss reads a window of
//! pages and waits for it; a sequential reader's next windows are read *asynchronously* by a
//! thread of this PFS (the read-ahead thread, started on first use: it makes the blocking driver
//! calls while the main thread serves from the pages already present, so the disk works while
//! the reader copies). A page of a window in flight is not in the index and its slot holds the
//! `READING` mark (never a device page) and is pinned: no lookup can find it, and any `get` of it
//! (read, or a write that replaces it whole) misses, finds it in the window and first waits until
//! the driver call holding it has finished, so no page is handed out before it is filled and no
//! write is overwritten by a late read. A window the driver fails (or a driver that is restarted
//! meanwhile) leaves its unread pages out of the cache: they are read again on demand, through
//! the resubmitting path above. The two threads share one `Window` (atomics and one
//! notification each way) and nothing else: the cache's state is the main thread's alone.
//!
//! Windows stop at the end of the file being read: the server names that file's blocks
//! ([`Cache::set_file`], device pages `lo..hi`, `hi` the page after its last block) around each
//! read of file data, and a miss inside them reads ahead no further than `hi`, synchronously or
//! not. Any other miss (inode tables, directories, bitmaps, indirect blocks outside a file
//! read) reads [`META_READAHEAD`] pages and leaves the file stream's state alone.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::hash::{BuildHasherDefault, Hasher};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use sawmill_ext2::{BlockDevice, DevError};
use sawmill_ext2_api::readahead::Readahead;
use sawmill_interfaces::rpc::{self, Map};
use sawmill_interfaces::{blk, dataspace, mem, BlkError, MapFlags};
use sawmill_rt::sys;

pub const PAGE: usize = 4096;
const FREE: u64 = u64::MAX;
/// `page_of` of a slot the read-ahead thread is filling (its page is in the window in flight).
const READING: u64 = u64::MAX - 1;
/// Pages read at once on a miss (the page and the uncached ones after it): 128 KiB, Linux's
/// default read-ahead window, so a cold sequential read waits for the disk once per 128 KiB
/// (issue 17: with 8 pages `fs.read4k.cold` waited 8 times per 256 KiB file). At most an
/// eighth of the cache, so a small cache is not flushed by one miss.
const READAHEAD: usize = 32;
/// The window a sequential reader grows to (doubling from READAHEAD with each window): 1 MiB,
/// read while the reader consumes the window before it (issue 17, `fs.seqread.cold`; Linux grows
/// its window the same way). Still at most an eighth of the cache.
const READAHEAD_MAX: usize = 256;
/// Pages read at once on a miss that is no file's data (metadata): inode table and directory
/// blocks often sit together, but a window must not run on into the files after them.
const META_READAHEAD: usize = 8;
/// Sectors one driver request may move (blk.idl: 1..=64): consecutive device pages in
/// consecutive cache slots go in one request up to this.
const REQUEST_SECTORS: u16 = 64;
/// Requests per driver call (the arrays of `blk.read` and `blk.write`).
const REQUESTS_PER_CALL: usize = 16;
/// Where the cache dataspace is mapped in the PFS (above the runtime's stack and UTCBs).
pub const CACHE_AT: u64 = 0x8000_0000;
/// Where the cache is mapped a second time, for the driver alone: the region shared with the
/// driver derives from these mappings, so revoking the client mappings of a cache page (`unmap`
/// of its page at `CACHE_AT`, children only) leaves the driver's, which it looks up per request
/// (servers/blk-virtio: no physical address outlives a request). The driver's window is at
/// most 256 MiB, so the two ranges never meet.
const DMA_ALIAS_AT: u64 = CACHE_AT + 0x1000_0000;
/// How long a call waits for a restarted driver's new incarnation before failing with `EIO`.
const DRIVER_RESTART_WAIT_MS: u64 = 3000;
/// Restarts one call rides out (a driver that dies on every request is not waited for forever).
const MAX_RESUBMITS: u32 = 8;
/// How often the slot is looked at while waiting for the new incarnation.
const RESTART_POLL_MS: u64 = 2;
/// Driver calls one asynchronous window may take (a request per page at worst).
const CALLS_PER_WINDOW: usize = READAHEAD_MAX.div_ceil(REQUESTS_PER_CALL);
/// The read-ahead thread's stack (it makes driver calls and nothing else).
const READER_STACK: usize = 8192;

/// Whether a driver call failed because its incarnation is gone (root revoked its endpoint), or
/// reached a new incarnation that has not seen our region yet (`NotShared`: the region is
/// shared once, before the first transfer, so only a new incarnation says so).
/// A call the driver answered with a device error (`Io`) or a reply no driver sends (a corrupted
/// reply): resubmitted, like one that found the driver restarted and within the same
/// `MAX_RESUBMITS` (whole-page reads and writes, and flushes, are idempotent), since a fault
/// injected into the driver or a transient device error must not reach the file system's clients.
fn retry_once(e: &rpc::Error<BlkError>) -> bool {
    matches!(
        e,
        rpc::Error::App(BlkError::Io) | rpc::Error::BadReply | rpc::Error::Protocol(_)
    )
}

fn driver_gone(e: &rpc::Error<BlkError>) -> bool {
    e.peer_died()
        || matches!(e, rpc::Error::Ipc(c) if *c == sawmill_abi::Error::BadCap as u64)
        || *e == rpc::Error::App(BlkError::NotShared)
}

/// Hashes device page numbers for the cache index (Fibonacci hashing: page numbers are dense,
/// nobody chooses them to collide, and one multiply spreads them well).
#[derive(Default)]
pub struct PageHash(u64);

impl Hasher for PageHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub struct Cache {
    blk: blk::Client,
    /// The cache's region as shared with the driver (shared again with a new incarnation).
    region: Map,
    /// A notification to wait on (with a deadline) for a restarted driver; made when needed.
    timer: Option<u64>,
    /// Driver restarts ridden out.
    pub driver_restarts: u64,
    base: *mut u8,
    npages: usize,
    pub dev_pages: u64,
    /// Calls of `write_at` so far: every change of the file system's bytes comes through it,
    /// so what was read from them (a file's size, where its pages lie) holds while this stays.
    pub writes: u64,
    page_of: Vec<u64>,
    /// Pages written and not yet on the disk: a bit per slot, so `sync` finds them by word (an
    /// fsync in a 24 MiB cache looked at 6,144 flags one by one).
    dirty: SlotBits,
    refd: Vec<bool>,
    pub pinned: Vec<u32>,
    pub ever_mapped: Vec<bool>,
    index: hashbrown::HashMap<u64, usize, BuildHasherDefault<PageHash>>,
    /// The slot of the last lookup (checked against `page_of`, so never stale).
    last: usize,
    /// Which pages to read on a miss, and when to start the next window without waiting.
    ra: Readahead,
    /// The read-ahead thread and its window in flight (None until the first window; `reader_off`
    /// if the thread could not be made: every read is then a waited-for miss).
    reader: Option<Reader>,
    reader_off: bool,
    hand: usize,
    /// The device pages `lo..hi` of the file whose data is being read (`set_file`; empty: none).
    file: (u64, u64),
    /// Hits, misses, pages read, pages written.
    pub stats: [u64; 4],
    /// The pages the last miss read (and waited for).
    pub last_window: usize,
}

impl Cache {
    /// Gets `npages` of cache as an anonymous dataspace of the memory server `mem_ep` (charged to
    /// this PFS's account there, under its quota; mem frees it if the PFS dies), maps all of it
    /// at [`CACHE_AT`] (`exec`: executable too) and shares it with the driver.
    pub fn new(blk_ep: u64, mem_ep: u64, npages: usize, exec: bool) -> Result<Cache, &'static str> {
        let blk = blk::Client::new(blk_ep);
        let info = blk.info().map_err(|_| "driver info")?;
        if npages == 0 || (npages * PAGE) as u64 > info.window_size {
            return Err("cache empty or larger than the driver's window");
        }
        let slot = sawmill_rt::thread::alloc_slot();
        let ds = mem::Client::new(mem_ep)
            .alloc((npages * PAGE) as u64, 0, slot)
            .map_err(|_| "no cache memory from mem (its quota for us, or its pool)")?;
        let ds = dataspace::Client::new(ds);
        // A client's mapping of a file page has at most our rights: for a program started from
        // a file to map its text straight from these pages (lib/spawn), they must be executable.
        let mut rw = MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE;
        if exec {
            rw |= MapFlags::EXEC;
        }
        for i in 0..npages as u64 {
            // The PFS is paged by root and has no region manager: every page is mapped now
            // (NEED_WRITE: writable, allocated and charged), so the cache never faults.
            let va = CACHE_AT + i * PAGE as u64;
            ds.map(i * PAGE as u64, va, 1, rw, [va, PAGE as u64])
                .map_err(|_| "no cache memory from mem (its quota for us, or its pool)")?;
            let alias = DMA_ALIAS_AT + i * PAGE as u64;
            ds.map(
                i * PAGE as u64,
                alias,
                1,
                MapFlags::READ | MapFlags::WRITE,
                [alias, PAGE as u64],
            )
            .map_err(|_| "mapping the cache for the driver")?;
        }
        let base = CACHE_AT as *mut u8;
        let region = Map {
            src: DMA_ALIAS_AT,
            dst: info.window,
            pages: npages as u64,
            flags: sawmill_abi::map::READ | sawmill_abi::map::WRITE,
        };
        blk.share(region)
            .map_err(|_| "sharing the cache with the driver")?;
        Ok(Cache {
            blk,
            region,
            timer: None,
            driver_restarts: 0,
            base,
            npages,
            dev_pages: info.sectors / 8,
            page_of: vec![FREE; npages],
            dirty: SlotBits::new(npages),
            refd: vec![false; npages],
            pinned: vec![0; npages],
            ever_mapped: vec![false; npages],
            index: hashbrown::HashMap::with_capacity_and_hasher(npages, Default::default()),
            last: 0,
            ra: {
                // At most an eighth of the cache per window.
                let most = (npages / 8).max(1);
                Readahead::new(READAHEAD.min(most), READAHEAD_MAX.min(most))
            },
            reader: None,
            reader_off: false,
            hand: 0,
            file: (0, 0),
            stats: [0; 4],
            last_window: 0,
            writes: 0,
        })
    }

    /// Whether slot `slot` holds device page `p` now (read in: a slot being read ahead holds
    /// the `READING` mark). Nothing else is done: no hit counted, no read-ahead started.
    #[inline(always)]
    pub fn holds(&self, slot: usize, p: u64) -> bool {
        self.page_of.get(slot) == Some(&p)
    }

    pub fn addr(&self, slot: usize) -> u64 {
        self.base as u64 + (slot * PAGE) as u64
    }

    fn page(&mut self, slot: usize) -> &mut [u8] {
        // SAFETY: slot < npages; the region is ours for good.
        unsafe { core::slice::from_raw_parts_mut(self.base.add(slot * PAGE), PAGE) }
    }

    /// A slot to reuse: clock over clean, unpinned pages; if there is none, takes in the
    /// read-ahead window (whose pages are pinned until then; waiting for it if in flight) and
    /// writes back the dirty pages, and looks again.
    fn victim(&mut self) -> Result<usize, DevError> {
        for round in 0..2 {
            for _ in 0..2 * self.npages {
                let s = self.hand;
                self.hand = (self.hand + 1) % self.npages;
                if self.page_of[s] == FREE {
                    return Ok(s);
                }
                if self.pinned[s] > 0 || self.dirty.get(s) {
                    continue;
                }
                if self.refd[s] {
                    self.refd[s] = false;
                    continue;
                }
                self.drop_slot(s);
                return Ok(s);
            }
            if round == 0 {
                self.settle(Some(usize::MAX));
                self.write_back()?;
            }
        }
        Err(DevError)
    }

    fn drop_slot(&mut self, s: usize) {
        self.index.remove(&self.page_of[s]);
        self.page_of[s] = FREE;
        if self.ever_mapped[s] {
            // Clients may still map the old contents: take them back before reuse.
            let _ = sys::unmap(self.addr(s), 1, 0);
            self.ever_mapped[s] = false;
        }
    }

    /// Names the file whose data the next `get`s read: its blocks lie in device pages `lo..hi`
    /// (`hi` the page after its last block), so read-ahead stops at `hi`. `None`: no file (the
    /// reads are metadata).
    #[inline(always)]
    pub fn set_file(&mut self, pages: Option<(u64, u64)>) {
        self.file = pages.unwrap_or((0, 0));
    }

    /// The slot holding device page `p`, reading it (and the uncached pages after it, all in
    /// flight at once: the read-ahead window) unless `overwrite` says the caller replaces it whole.
    /// A page still being read ahead is waited for first.
    pub fn get(&mut self, p: u64, overwrite: bool) -> Result<usize, DevError> {
        match self.lookup(p) {
            Some(s) => Ok(s),
            None => self.miss(p, overwrite),
        }
    }

    /// The slot holding device page `p` if it is cached (a hit, as `get` counts it; on the
    /// read-ahead marker it starts the next window), else None and nothing done.
    #[inline(always)]
    pub fn lookup(&mut self, p: u64) -> Option<usize> {
        // Consecutive accesses often hit the same page (an inode table block, a directory):
        // `page_of` says whether the slot of the last hit still holds it.
        let ls = self.last;
        if self.page_of[ls] == p {
            self.refd[ls] = true;
            self.stats[0] += 1;
            return Some(ls);
        }
        let s = *self.index.get(&p)?;
        Some(self.hit(p, s))
    }

    /// Counts a hit on page `p` in slot `s` found by a look-up (on the read-ahead marker it
    /// starts the next window) and returns `s`.
    #[inline(always)]
    fn hit(&mut self, p: u64, s: usize) -> usize {
        self.refd[s] = true;
        self.stats[0] += 1;
        self.last = s;
        if p == self.ra.marker() {
            self.start_window(p, s);
        }
        s
    }

    /// [`Self::lookup`], slot `hint` (where the caller found `p` before) tried first.
    #[inline(always)]
    pub fn lookup_at(&mut self, p: u64, hint: usize) -> Option<usize> {
        if self.page_of.get(hint) != Some(&p) {
            return self.lookup(p);
        }
        Some(self.hit(p, hint))
    }

    /// `get` of a page not in the cache: a slot for it, and unless `overwrite`, its read-ahead
    /// window read from the disk (waited for).
    #[inline(never)]
    fn miss(&mut self, p: u64, overwrite: bool) -> Result<usize, DevError> {
        // A finished window's pages become ordinary (unpinned) cache pages now, even if the
        // reader never comes to them (a reader that stops early).
        self.settle(None);
        if self.index.contains_key(&p) {
            // Read ahead and taken in just now: a hit (a second slot for it would leave the
            // first holding the page outside the index, and its later reuse would drop the
            // second's entry).
            return self.get(p, overwrite);
        }
        if let Some(i) = self.reading(p) {
            // Being read ahead: once its call has finished it is in the index (or, if the window
            // failed, an ordinary miss).
            self.settle(Some(i));
            return self.get(p, overwrite);
        }
        if p >= self.dev_pages {
            return Err(DevError);
        }
        self.stats[1] += 1;
        let s = self.victim()?;
        self.page_of[s] = p;
        self.index.insert(p, s);
        self.refd[s] = true;
        if overwrite {
            return Ok(s);
        }
        // Pages of the batch are pinned until read so choosing the next victim cannot take them.
        self.pinned[s] += 1;
        let mut batch = vec![(p, s)];
        let mut q = p + 1;
        let (lo, hi) = self.file;
        let data = (lo..hi).contains(&p);
        let ahead = if data {
            self.ra.miss(p, hi)
        } else {
            META_READAHEAD.min(self.ra.min())
        };
        // A file's window reads past pages it finds cached (the file's indirect block, read as
        // metadata just before, sits among its data); metadata's window stops at the first.
        while q < p + ahead as u64 && q < self.dev_pages {
            if self.index.contains_key(&q) || self.reading(q).is_some() {
                if !data {
                    break;
                }
                q += 1;
                continue;
            }
            let Ok(t) = self.victim() else { break };
            self.page_of[t] = q;
            self.index.insert(q, t);
            self.pinned[t] += 1;
            batch.push((q, t));
            q += 1;
        }
        if data {
            self.ra.read(p, (q - p) as usize);
        }
        self.last_window = batch.len();
        let r = self.transfer(false, &batch);
        for &(_, t) in &batch {
            self.pinned[t] -= 1;
        }
        if let Err(e) = r {
            for &(q, t) in &batch {
                self.index.remove(&q);
                self.page_of[t] = FREE;
            }
            return Err(e);
        }
        Ok(s)
    }

    /// Where device page `p` is in the window in flight, if the read-ahead thread is reading
    /// it (not yet settled).
    fn reading(&self, p: u64) -> Option<usize> {
        let r = self.reader.as_ref()?;
        // In device order, with gaps where the window found pages cached.
        let unsettled = r.pages.get(r.settled..)?;
        let i = unsettled.binary_search_by_key(&p, |&(q, _)| q).ok()?;
        Some(r.settled + i)
    }

    /// The reader reached the marker `p` (in slot `s`, which stays its own): reads its next
    /// window asynchronously, unless a window is still in flight (then the marker moves on to
    /// the next page).
    #[inline(never)]
    fn start_window(&mut self, p: u64, s: usize) {
        self.settle(None);
        if self.reader_off {
            return;
        }
        if self.reader.as_ref().is_some_and(|r| !r.pages.is_empty()) {
            // The last window is still being read (the reader waited for its first pages to get
            // here): try again at the reader's next page.
            self.ra.defer(p);
            return;
        }
        let Some(w) = self.ra.hit(p) else { return };
        if self.reader.is_none() {
            match Reader::start(self.blk.ep) {
                Ok(r) => self.reader = Some(r),
                Err(()) => {
                    sawmill_rt::println!("ext2: no read-ahead thread: reading on demand only");
                    self.reader_off = true;
                    return;
                }
            }
        }
        let mut pages = core::mem::take(&mut self.reader.as_mut().expect("made above").pages);
        let mut q = w.start;
        // The caller's page is pinned while victims are chosen, so none of them is it.
        self.pinned[s] += 1;
        // Pages found cached (an indirect block read as metadata among the file's data) are
        // passed over, so the stream goes on past them.
        let end = (w.start + w.pages as u64).min(self.dev_pages);
        while q < end {
            if !self.index.contains_key(&q) {
                let Ok(t) = self.victim() else { break };
                self.page_of[t] = READING;
                self.pinned[t] += 1;
                pages.push((q, t));
            }
            q += 1;
        }
        self.pinned[s] -= 1;
        self.ra.started(w, (q - w.start) as usize);
        if pages.is_empty() {
            self.reader.as_mut().expect("made above").pages = pages;
            return;
        }
        let reqs = requests(&pages);
        let r = self.reader.as_mut().expect("made above");
        r.pages = pages;
        r.settled = 0;
        r.post(&reqs);
    }

    /// Takes in what the read-ahead thread has finished: the pages of its completed calls are
    /// cache pages like any other from now on. With `need` (an index into the window's pages),
    /// first waits until that page is read or the window has ended. A window that ended short
    /// (a call failed) leaves its unread pages out of the cache.
    fn settle(&mut self, need: Option<usize>) {
        let Some(r) = self.reader.as_mut() else {
            return;
        };
        loop {
            if r.pages.is_empty() {
                return;
            }
            let finished = r.job.state.load(Ordering::Acquire) == FINISHED;
            let calls = r.job.calls_done.load(Ordering::Acquire);
            let upto = if calls == 0 { 0 } else { r.call_end[calls - 1] };
            for &(q, t) in &r.pages[r.settled..upto] {
                self.page_of[t] = q;
                self.index.insert(q, t);
                self.pinned[t] -= 1;
            }
            self.stats[2] += (upto - r.settled) as u64;
            r.settled = upto;
            if finished {
                for &(_, t) in &r.pages[upto..] {
                    self.page_of[t] = FREE;
                    self.pinned[t] -= 1;
                }
                if upto < r.pages.len() {
                    sawmill_rt::println!(
                        "ext2: read-ahead of {} pages stopped (driver call failed): read on demand",
                        r.pages.len() - upto
                    );
                    self.ra.failed();
                }
                r.pages.clear();
                r.settled = 0;
                r.job.state.store(IDLE, Ordering::Relaxed);
                return;
            }
            match need {
                Some(i) if i >= upto => {
                    let _ = sys::notify_wait(r.job.done, 0);
                }
                _ => return,
            }
        }
    }

    /// Moves `pages` ((device page, slot) pairs) between the device and the cache: a run of
    /// consecutive device pages in consecutive slots is one request (up to `REQUEST_SECTORS`),
    /// and up to `REQUESTS_PER_CALL` requests go in one call, all in flight at once.
    fn transfer(&mut self, write: bool, pages: &[(u64, usize)]) -> Result<(), DevError> {
        let reqs = requests(pages);
        for chunk in reqs.chunks(REQUESTS_PER_CALL) {
            let c = Call::of(chunk);
            let mut resubmits = 0;
            loop {
                let r = if write {
                    self.blk.write(c.n, c.sector, c.off, c.count)
                } else {
                    self.blk.read(c.n, c.sector, c.off, c.count)
                };
                match r {
                    Ok(()) => break,
                    Err(e) if driver_gone(&e) && resubmits < MAX_RESUBMITS => {
                        resubmits += 1;
                        self.reconnect()?;
                    }
                    Err(e) if retry_once(&e) && resubmits < MAX_RESUBMITS => resubmits += 1,
                    Err(e) => {
                        sawmill_rt::println!("ext2: block driver call failed: {:?}", e);
                        return Err(DevError);
                    }
                }
            }
        }
        self.stats[if write { 3 } else { 2 }] += pages.len() as u64;
        Ok(())
    }

    /// Writes every dirty page (in device order, 16 requests per call).
    pub fn write_back(&mut self) -> Result<(), DevError> {
        let mut d: Vec<(u64, usize)> = self.dirty.ones().map(|s| (self.page_of[s], s)).collect();
        d.sort_unstable();
        self.transfer(true, &d)?;
        for (_, s) in d {
            self.dirty.clear(s);
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<(), DevError> {
        self.write_back()?;
        let mut resubmits = 0;
        loop {
            match self.blk.flush() {
                Ok(()) => return Ok(()),
                Err(e) if driver_gone(&e) && resubmits < MAX_RESUBMITS => {
                    resubmits += 1;
                    self.reconnect()?;
                }
                Err(e) if retry_once(&e) && resubmits < MAX_RESUBMITS => resubmits += 1,
                Err(e) => {
                    sawmill_rt::println!("ext2: block driver flush failed: {:?}", e);
                    return Err(DevError);
                }
            }
        }
    }

    /// The driver's incarnation is gone: waits for root to put the new one's endpoint in the
    /// same slot, checks it is the same device and shares the cache with it again.
    fn reconnect(&mut self) -> Result<(), DevError> {
        // The counter's rate (waits for the kernel to have measured it, early after boot).
        let khz = sawmill_rt::clock::Wall::get().khz;
        let deadline = sys::rdtsc() + DRIVER_RESTART_WAIT_MS * khz;
        let timer = match self.timer {
            Some(t) => t,
            None => {
                let t = sawmill_rt::thread::create(sawmill_abi::ObjKind::Notification, 0)
                    .map_err(|_| DevError)?;
                self.timer = Some(t);
                t
            }
        };
        loop {
            match self.blk.info() {
                Ok(info) => {
                    if info.sectors / 8 != self.dev_pages {
                        sawmill_rt::println!("ext2: FAIL the restarted driver has another disk");
                        return Err(DevError);
                    }
                    match self.blk.share(self.region) {
                        Ok(()) => {
                            self.driver_restarts += 1;
                            sawmill_rt::println!(
                                "ext2: block driver restarted ({} so far): resubmitting",
                                self.driver_restarts
                            );
                            return Ok(());
                        }
                        Err(e) if driver_gone(&e) => {}
                        Err(e) => {
                            sawmill_rt::println!("ext2: sharing with the new driver: {:?}", e);
                            return Err(DevError);
                        }
                    }
                }
                Err(e) if driver_gone(&e) => {}
                Err(e) => {
                    sawmill_rt::println!("ext2: the new driver's info: {:?}", e);
                    return Err(DevError);
                }
            }
            let now = sys::rdtsc();
            if now >= deadline {
                sawmill_rt::println!("ext2: the block driver did not come back");
                return Err(DevError);
            }
            let _ = sys::notify_wait_until(timer, (now + RESTART_POLL_MS * khz).min(deadline));
        }
    }

    pub fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Result<(), DevError> {
        let mut done = 0;
        while done < buf.len() {
            let pos = off + done as u64;
            let (p, o) = (pos / PAGE as u64, (pos % PAGE as u64) as usize);
            let n = (PAGE - o).min(buf.len() - done);
            let s = self.get(p, false)?;
            buf[done..done + n].copy_from_slice(&self.page(s)[o..o + n]);
            done += n;
        }
        Ok(())
    }

    pub fn write_at(&mut self, off: u64, buf: &[u8]) -> Result<(), DevError> {
        self.writes += 1;
        let mut done = 0;
        while done < buf.len() {
            let pos = off + done as u64;
            let (p, o) = (pos / PAGE as u64, (pos % PAGE as u64) as usize);
            let n = (PAGE - o).min(buf.len() - done);
            let s = self.get(p, n == PAGE)?;
            self.page(s)[o..o + n].copy_from_slice(&buf[done..done + n]);
            self.dirty.set(s);
            done += n;
        }
        Ok(())
    }
}

/// One bit per cache slot.
struct SlotBits(Vec<u64>);

impl SlotBits {
    fn new(slots: usize) -> SlotBits {
        SlotBits(vec![0; slots.div_ceil(64)])
    }
    fn get(&self, s: usize) -> bool {
        self.0[s / 64] & (1 << (s % 64)) != 0
    }
    fn set(&mut self, s: usize) {
        self.0[s / 64] |= 1 << (s % 64);
    }
    fn clear(&mut self, s: usize) {
        self.0[s / 64] &= !(1 << (s % 64));
    }
    /// The slots whose bit is set, in order.
    fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            core::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + b
                })
            })
        })
    }
}

/// Driver requests for `pages` ((device page, slot) pairs): a run of consecutive device pages
/// in consecutive slots is one request (up to `REQUEST_SECTORS`), as (sector, region offset,
/// sectors).
fn requests(pages: &[(u64, usize)]) -> Vec<(u64, u32, u16)> {
    let per_page = (PAGE / 512) as u16;
    let mut reqs: Vec<(u64, u32, u16)> = Vec::with_capacity(pages.len());
    for &(p, s) in pages {
        if let Some(last) = reqs.last_mut() {
            let pages_in = (last.2 / per_page) as u64;
            if last.2 + per_page <= REQUEST_SECTORS
                && last.0 + pages_in * per_page as u64 == p * per_page as u64
                && last.1 as u64 + pages_in * PAGE as u64 == (s * PAGE) as u64
            {
                last.2 += per_page;
                continue;
            }
        }
        reqs.push((p * per_page as u64, (s * PAGE) as u32, per_page));
    }
    reqs
}

/// One driver call's arguments (`blk.read`/`blk.write`).
#[derive(Clone, Copy)]
struct Call {
    n: u32,
    sector: [u64; REQUESTS_PER_CALL],
    off: [u32; REQUESTS_PER_CALL],
    count: [u16; REQUESTS_PER_CALL],
}

impl Call {
    const EMPTY: Call = Call {
        n: 0,
        sector: [0; REQUESTS_PER_CALL],
        off: [0; REQUESTS_PER_CALL],
        count: [0; REQUESTS_PER_CALL],
    };

    /// The call of up to `REQUESTS_PER_CALL` requests.
    fn of(reqs: &[(u64, u32, u16)]) -> Call {
        let mut c = Call::EMPTY;
        for (i, &(sec, o, n)) in reqs.iter().enumerate() {
            c.sector[i] = sec;
            c.off[i] = o;
            c.count[i] = n;
        }
        c.n = reqs.len() as u32;
        c
    }
}

/// `Window::state`: no window (the calls are the main thread's to fill)...
const IDLE: u32 = 0;
/// ...a window posted (its calls are the read-ahead thread's until FINISHED)...
const QUEUED: u32 = 1;
/// ...and the thread is done with it (every call made, or one failed).
const FINISHED: u32 = 2;

/// What the main thread and the read-ahead thread share: one window's driver calls and how far
/// the thread has got with them. Lives for the PFS's lifetime (leaked at `Reader::start`).
struct Window {
    /// The read-ahead thread waits on `go` for a window; the main thread on `done` for its
    /// pages (signalled after each call).
    go: u64,
    done: u64,
    /// The driver's endpoint slot (the same as the main thread's: root puts a restarted
    /// driver's endpoint there).
    blk: u64,
    state: AtomicU32,
    ncalls: AtomicUsize,
    /// Calls finished without error, in order.
    calls_done: AtomicUsize,
    calls: UnsafeCell<[Call; CALLS_PER_WINDOW]>,
}

// SAFETY: `calls` is written by the main thread only while `state` is IDLE and read by the
// read-ahead thread only while it is QUEUED (the stores that change it are Release, the loads
// that look at it Acquire); everything else is atomic or never changes.
unsafe impl Sync for Window {}

/// The main thread's side of asynchronous read-ahead: the shared window and its pages.
struct Reader {
    job: &'static Window,
    /// The window in flight: its (device page, slot) pairs in device order (empty: none), how
    /// many of them are settled (in the index), and how many pages the calls up to each
    /// one cover.
    pages: Vec<(u64, usize)>,
    settled: usize,
    call_end: [usize; CALLS_PER_WINDOW],
}

impl Reader {
    /// Makes the shared window, its two notifications and the read-ahead thread (at our
    /// priority: the kernel caps it there).
    fn start(blk: u64) -> Result<Reader, ()> {
        let note = || sawmill_rt::thread::create(sawmill_abi::ObjKind::Notification, 0);
        let (go, done) = (note().map_err(|_| ())?, note().map_err(|_| ())?);
        let job: &'static Window = Box::leak(Box::new(Window {
            go,
            done,
            blk,
            state: AtomicU32::new(IDLE),
            ncalls: AtomicUsize::new(0),
            calls_done: AtomicUsize::new(0),
            calls: UnsafeCell::new([Call::EMPTY; CALLS_PER_WINDOW]),
        }));
        sawmill_rt::thread::spawn(255, READER_STACK, move || read_ahead(job)).map_err(|_| ())?;
        Ok(Reader {
            job,
            pages: Vec::with_capacity(READAHEAD_MAX),
            settled: 0,
            call_end: [0; CALLS_PER_WINDOW],
        })
    }

    /// Hands the window's requests to the read-ahead thread and lets it run until it waits for
    /// the driver (it is at our priority: without the yield it would start only when we wait).
    fn post(&mut self, reqs: &[(u64, u32, u16)]) {
        debug_assert_eq!(self.job.state.load(Ordering::Relaxed), IDLE);
        // SAFETY: IDLE: the read-ahead thread does not look at the calls (see `Window`).
        let calls = unsafe { &mut *self.job.calls.get() };
        let mut covered = 0;
        let mut n = 0;
        for (i, chunk) in reqs.chunks(REQUESTS_PER_CALL).enumerate() {
            calls[i] = Call::of(chunk);
            covered += chunk
                .iter()
                .map(|r| r.2 as usize / (PAGE / 512))
                .sum::<usize>();
            self.call_end[i] = covered;
            n = i + 1;
        }
        self.job.ncalls.store(n, Ordering::Relaxed);
        self.job.calls_done.store(0, Ordering::Relaxed);
        self.job.state.store(QUEUED, Ordering::Release);
        let _ = sys::notify_signal(self.job.go, 1);
        sys::yield_now();
    }
}

/// The read-ahead thread: makes each posted window's driver calls in order (waiting for the
/// driver as a synchronous caller does), says after each how far it got, and stops a window at
/// its first failed call (the main thread reads the rest on demand, resubmitting to a restarted
/// driver there). Touches nothing but the shared `Window`.
fn read_ahead(job: &'static Window) {
    let blk = blk::Client::new(job.blk);
    loop {
        let _ = sys::notify_wait(job.go, 0);
        if job.state.load(Ordering::Acquire) != QUEUED {
            continue;
        }
        // SAFETY: QUEUED: the calls are ours until we store FINISHED (see `Window`).
        let calls = unsafe { &*job.calls.get() };
        let n = job.ncalls.load(Ordering::Relaxed);
        for (i, c) in calls[..n].iter().enumerate() {
            if blk.read(c.n, c.sector, c.off, c.count).is_err() {
                break;
            }
            job.calls_done.store(i + 1, Ordering::Release);
            if i + 1 < n {
                let _ = sys::notify_signal(job.done, 1);
            }
        }
        job.state.store(FINISHED, Ordering::Release);
        let _ = sys::notify_signal(job.done, 1);
    }
}

/// The engine's view of the device: the cache, shared with the server (single-threaded).
pub struct Dev(pub alloc::rc::Rc<core::cell::RefCell<Cache>>);

impl BlockDevice for Dev {
    fn size(&self) -> u64 {
        self.0.borrow().dev_pages * PAGE as u64
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), DevError> {
        self.0.borrow_mut().read_at(offset, buf)
    }
    /// A range inside one cache page is lent in place (directory scans read blocks this way);
    /// anything else is copied into `scratch`.
    fn read_with(
        &mut self,
        offset: u64,
        len: usize,
        scratch: &mut [u8],
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), DevError> {
        let (p, o) = (offset / PAGE as u64, (offset % PAGE as u64) as usize);
        if o + len <= PAGE {
            let mut c = self.0.borrow_mut();
            let s = c.get(p, false)?;
            f(&c.page(s)[o..o + len]);
            return Ok(());
        }
        let b = scratch.get_mut(..len).ok_or(DevError)?;
        self.read_at(offset, b)?;
        f(b);
        Ok(())
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), DevError> {
        self.0.borrow_mut().write_at(offset, buf)
    }
    fn flush(&mut self) -> Result<(), DevError> {
        self.0.borrow_mut().sync()
    }
}
