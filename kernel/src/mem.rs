//! Physical memory: the memory map, the kernel's frame pool, the user RAM given to root, and the
//! kernel heap.
//!
//! Usable RAM is split once at boot. A quarter (at least 16 MiB, at most 256 MiB) becomes the
//! kernel pool: frames for page tables, UTCBs and the heap from which kernel objects are
//! allocated, all charged to factory quotas. The rest is user RAM, owned by root through its
//! physical-memory window; the kernel never allocates from it.
use core::alloc::{GlobalAlloc, Layout};

/// Virtual base of the direct map of physical memory.
pub const DIRECT_MAP: u64 = 0xffff_8000_0000_0000;
/// The direct map covers this much physical address space (built at boot).
pub const DIRECT_MAP_SIZE: u64 = 4 << 30;
pub const PAGE: u64 = 4096;

#[inline(always)]
pub fn phys_to_virt(p: u64) -> *mut u8 {
    (DIRECT_MAP + p) as *mut u8
}

#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

pub const MAX_RANGES: usize = 32;

pub struct Phys {
    /// Free frames of the kernel pool, as a stack threaded through the frames themselves.
    free_head: u64,
    pub free_frames: u64,
    pub pool_frames: u64,
    /// User RAM ranges (root's window).
    pub user: [Range; MAX_RANGES],
    pub nuser: usize,
    pub user_frames: u64,
}

pub static mut PHYS: Phys = Phys {
    free_head: 0,
    free_frames: 0,
    pool_frames: 0,
    user: [Range { start: 0, end: 0 }; MAX_RANGES],
    nuser: 0,
    user_frames: 0,
};

pub fn phys() -> &'static mut Phys {
    // SAFETY: single CPU with interrupts off in the kernel; no reentrancy.
    unsafe { &mut *core::ptr::addr_of_mut!(PHYS) }
}

impl Phys {
    /// Splits the usable ranges (already excluding the kernel image and boot archive) into the
    /// kernel pool and user RAM.
    pub fn init(&mut self, ranges: &[Range]) {
        let total: u64 = ranges.iter().map(|r| (r.end - r.start) / PAGE).sum();
        let want = (total / 4).clamp(4096, 65536).min(total / 2);
        let mut taken = 0;
        for r in ranges {
            let mut p = r.start;
            while p < r.end && taken < want && p + PAGE <= DIRECT_MAP_SIZE {
                self.free_frame(p);
                taken += 1;
                p += PAGE;
            }
            if p < r.end && self.nuser < MAX_RANGES {
                self.user[self.nuser] = Range { start: p, end: r.end };
                self.nuser += 1;
                self.user_frames += (r.end - p) / PAGE;
            }
        }
        self.pool_frames = taken;
    }

    /// A zeroed frame from the kernel pool.
    pub fn alloc_frame(&mut self) -> Option<u64> {
        if self.free_head == 0 {
            return None;
        }
        let p = self.free_head;
        // SAFETY: free frames are pool RAM inside the direct map; the first word links the list.
        unsafe {
            self.free_head = *(phys_to_virt(p) as *const u64);
            core::ptr::write_bytes(phys_to_virt(p), 0, PAGE as usize);
        }
        self.free_frames -= 1;
        Some(p)
    }

    pub fn free_frame(&mut self, p: u64) {
        // SAFETY: p is a pool frame no longer referenced by anything.
        unsafe { *(phys_to_virt(p) as *mut u64) = self.free_head };
        self.free_head = p;
        self.free_frames += 1;
    }

    pub fn is_user(&self, p: u64) -> bool {
        self.user[..self.nuser].iter().any(|r| p >= r.start && p < r.end)
    }

    pub fn is_ram(&self, p: u64, ranges_all: &[Range]) -> bool {
        ranges_all.iter().any(|r| p >= r.start && p < r.end)
    }
}

/// The kernel heap: a first-fit free list over pool frames taken at boot. Small and exact: it
/// reports how many bytes are in use so tests can see that destroyed objects return everything.
pub struct Heap {
    head: *mut FreeBlock,
    pub used: usize,
    pub size: usize,
}

struct FreeBlock {
    size: usize,
    next: *mut FreeBlock,
}

/// Every block and allocation is a multiple of this and aligned to it, so a split never leaves
/// a fragment too small to hold a free-list node: accounting stays exact.
const GRAIN: usize = 32;

unsafe impl Sync for KernelAlloc {}
pub struct KernelAlloc;

pub static mut HEAP: Heap = Heap { head: core::ptr::null_mut(), used: 0, size: 0 };

fn heap() -> &'static mut Heap {
    // SAFETY: single CPU, interrupts off in the kernel.
    unsafe { &mut *core::ptr::addr_of_mut!(HEAP) }
}

impl Heap {
    /// Adds a region to the heap.
    pub fn add(&mut self, start: *mut u8, size: usize) {
        let a = (start as usize + GRAIN - 1) & !(GRAIN - 1);
        let size = (size - (a - start as usize)) & !(GRAIN - 1);
        // SAFETY: the region is unused pool memory handed over for good.
        unsafe { self.insert(a as *mut FreeBlock, size) };
        self.size += size;
    }

    unsafe fn insert(&mut self, b: *mut FreeBlock, size: usize) {
        // Keep the list address-ordered so neighbours coalesce.
        let mut prev: *mut FreeBlock = core::ptr::null_mut();
        let mut cur = self.head;
        while !cur.is_null() && (cur as usize) < b as usize {
            prev = cur;
            cur = (*cur).next;
        }
        (*b).size = size;
        (*b).next = cur;
        if !cur.is_null() && b as usize + size == cur as usize {
            (*b).size += (*cur).size;
            (*b).next = (*cur).next;
        }
        if prev.is_null() {
            self.head = b;
        } else if prev as usize + (*prev).size == b as usize {
            (*prev).size += (*b).size;
            (*prev).next = (*b).next;
        } else {
            (*prev).next = b;
        }
    }

    fn round(l: Layout) -> (usize, usize) {
        ((l.size().max(1) + GRAIN - 1) & !(GRAIN - 1), l.align().max(GRAIN))
    }

    unsafe fn alloc(&mut self, l: Layout) -> *mut u8 {
        let (size, align) = Self::round(l);
        let mut prev: *mut FreeBlock = core::ptr::null_mut();
        let mut cur = self.head;
        while !cur.is_null() {
            let start = cur as usize;
            let end = start + (*cur).size;
            let a = (start + align - 1) & !(align - 1);
            if a + size <= end {
                let next = (*cur).next;
                if prev.is_null() {
                    self.head = next;
                } else {
                    (*prev).next = next;
                }
                if a > start {
                    self.insert(start as *mut FreeBlock, a - start);
                }
                if end > a + size {
                    self.insert((a + size) as *mut FreeBlock, end - (a + size));
                }
                self.used += size;
                return a as *mut u8;
            }
            prev = cur;
            cur = (*cur).next;
        }
        core::ptr::null_mut()
    }

    unsafe fn dealloc(&mut self, p: *mut u8, l: Layout) {
        let (size, _) = Self::round(l);
        self.used -= size;
        self.insert(p as *mut FreeBlock, size);
    }
}

unsafe impl GlobalAlloc for KernelAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        heap().alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        heap().dealloc(p, l)
    }
}

#[global_allocator]
static ALLOC: KernelAlloc = KernelAlloc;

/// Bytes of kernel memory not in use: free pool frames plus free heap.
pub fn kmem_free() -> u64 {
    phys().free_frames * PAGE + (heap().size - heap().used) as u64
}

pub fn heap_init(frames: usize) {
    // Take a contiguous run of pool frames: pop frames and keep those that are adjacent.
    let p = phys();
    let mut added = 0;
    while added < frames {
        let Some(f) = p.alloc_frame() else { break };
        heap().add(phys_to_virt(f), PAGE as usize);
        added += 1;
    }
}
