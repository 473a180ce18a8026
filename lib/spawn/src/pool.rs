//! A page pool a task starts programs from: an anonymous `mem` dataspace attached read, write
//! and execute through the region manager (copied text pages must stay executable in the child,
//! and a child's mapping has at most the caller's rights) and populated at once, since the
//! child's mappings are derived from the caller's. Capability slots given back are reused (the
//! runtime's allocator never reuses one, and programs come and go).

use crate::plan::{SpawnError, PAGE};
use crate::run::Resources;
use alloc::vec::Vec;
use sawmill_rt::thread;

pub struct MemPool {
    base: u64,
    pages: u64,
    next: u64,
    free: Vec<u64>,
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
            free_slots: Vec::new(),
        })
    }

    /// Pages handed out and not yet given back.
    pub fn in_use(&self) -> u64 {
        self.next - self.free.len() as u64
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
            None => return Err(SpawnError::NoMemory),
        };
        // SAFETY: a page of our pool, mapped read-write (populated at start) and handed to no
        // one else now.
        unsafe { core::ptr::write_bytes(a as *mut u8, 0, PAGE as usize) };
        Ok(a)
    }
    fn free_page(&mut self, addr: u64) {
        self.free.push(addr);
    }
}
