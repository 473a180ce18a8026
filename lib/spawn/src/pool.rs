//! A page pool a task starts programs from: an anonymous `mem` dataspace attached read, write
//! and execute through the region manager (copied text pages must stay executable in the child,
//! and a child's mapping has at most the caller's rights) and populated at once, since the
//! child's mappings are derived from the caller's. Capability slots given back are reused (the
//! runtime's allocator never reuses one, and programs come and go).

use crate::plan::{dirty_page, SpawnError, PAGE};
use crate::run::Resources;
use alloc::vec::Vec;
use sawmill_rt::thread;

pub struct MemPool {
    base: u64,
    pages: u64,
    next: u64,
    free: Vec<u64>,
    /// Runs given back, by length: (pages, [(address, dirty pages)]). A run goes back to its own
    /// length's list (a caller asks for the same few lengths again and again: a library's heap
    /// and stack). Its mask ([`dirty_page`]) says which pages are to be zeroed before the run is
    /// handed out again: a library leaves a few of its pages untouched, and zeroing a page is
    /// ~520 instructions.
    free_runs: Vec<(u64, Vec<(u64, u64)>)>,
    free_slots: Vec<u64>,
}

/// Why a pool could not be made.
#[derive(Debug)]
pub enum PoolError {
    /// The task has no `mem` capability.
    NoMem,
    Alloc(sawmill_interfaces::rpc::Error<sawmill_interfaces::MemError>),
    Rm(sawmill_rm::RmError),
}

impl MemPool {
    /// A pool of `bytes` (whole pages) from the memory server.
    pub fn new(bytes: u64) -> Result<MemPool, PoolError> {
        let bytes = bytes.div_ceil(PAGE) * PAGE;
        let mem = sawmill_rm::mem().ok_or(PoolError::NoMem)?;
        let ds = mem
            .alloc(bytes, 0, thread::alloc_slot())
            .map_err(PoolError::Alloc)?;
        let rwx = sawmill_rm::READ | sawmill_rm::WRITE | sawmill_rm::EXEC;
        let base = sawmill_rm::attach(ds, 0, bytes, None, rwx).map_err(PoolError::Rm)?;
        sawmill_rm::populate(base, bytes, true).map_err(PoolError::Rm)?;
        Ok(MemPool {
            base,
            pages: bytes / PAGE,
            next: 0,
            free: Vec::new(),
            free_runs: Vec::new(),
            free_slots: Vec::new(),
        })
    }

    /// Pages neither handed out nor yet ever handed out, or given back.
    pub fn available(&self) -> u64 {
        self.pages - self.in_use()
    }

    /// Pages handed out and not yet given back.
    pub fn in_use(&self) -> u64 {
        let in_runs: u64 = self.free_runs.iter().map(|(n, v)| n * v.len() as u64).sum();
        self.next - self.free.len() as u64 - in_runs
    }
}

impl Resources for MemPool {
    fn slot(&mut self) -> Result<u64, SpawnError> {
        Ok(self.free_slots.pop().unwrap_or_else(thread::alloc_slot))
    }
    fn free_slot(&mut self, slot: u64) {
        self.free_slots.push(slot);
    }
    fn page(&mut self) -> Result<u64, SpawnError> {
        let a = match self.free.pop() {
            Some(a) => a,
            None if self.next < self.pages => {
                self.next += 1;
                self.base + (self.next - 1) * PAGE
            }
            // The rest is in runs: one is broken up into pages.
            None => {
                let (n, v) = self
                    .free_runs
                    .iter_mut()
                    .find(|(_, v)| !v.is_empty())
                    .ok_or(SpawnError::NoMemory)?;
                let (a, _) = v.pop().unwrap_or_default();
                self.free.extend((1..*n).map(|i| a + i * PAGE));
                a
            }
        };
        // SAFETY: a page of our pool, mapped read-write (populated at start) and handed to no
        // one else now.
        unsafe { core::ptr::write_bytes(a as *mut u8, 0, PAGE as usize) };
        Ok(a)
    }
    fn free_page(&mut self, addr: u64) {
        self.free.push(addr);
    }
    fn run(&mut self, pages: u64) -> Option<u64> {
        let reused = self
            .free_runs
            .iter_mut()
            .find(|(n, _)| *n == pages)
            .and_then(|(_, v)| v.pop());
        let (a, dirty) = match reused {
            Some(r) => r,
            None if pages <= self.pages - self.next => {
                self.next += pages;
                (self.base + (self.next - pages) * PAGE, u64::MAX)
            }
            None => return None,
        };
        for i in 0..pages {
            if dirty_page(dirty, i) {
                // SAFETY: a page of our pool, mapped read-write (populated at start) and handed
                // to no one else now.
                unsafe { core::ptr::write_bytes((a + i * PAGE) as *mut u8, 0, PAGE as usize) };
            }
        }
        Some(a)
    }
    fn free_run(&mut self, addr: u64, pages: u64) {
        self.free_run_dirty(addr, pages, u64::MAX);
    }
    fn free_run_dirty(&mut self, addr: u64, pages: u64, dirty: u64) {
        let entry = (addr, dirty);
        match self.free_runs.iter_mut().find(|(n, _)| *n == pages) {
            Some((_, v)) => v.push(entry),
            None => self.free_runs.push((pages, alloc::vec![entry])),
        }
    }
}
