//! The kernel heap's allocator: an address-ordered first-fit free list with coalescing, over
//! memory handed to it. Exact: it reports the bytes in use, so a test can see that destroying
//! objects gave back everything. Pure logic over raw memory, so it is tested on the host.
use core::alloc::Layout;

/// Every block and allocation is a multiple of this and aligned to it, so a split never leaves
/// a fragment too small to hold a free-list node: accounting stays exact.
pub const GRAIN: usize = 32;

struct FreeBlock {
    size: usize,
    next: *mut FreeBlock,
}

pub struct Heap {
    head: *mut FreeBlock,
    pub used: usize,
    pub size: usize,
}

// SAFETY: the heap is only used behind the kernel's single-CPU discipline (or a test's &mut).
unsafe impl Send for Heap {}

impl Heap {
    pub const fn new() -> Heap {
        Heap {
            head: core::ptr::null_mut(),
            used: 0,
            size: 0,
        }
    }

    /// Adds a region to the heap.
    ///
    /// # Safety
    /// `[start, start+size)` must be writable memory used for nothing else, for as long as the
    /// heap is used.
    pub unsafe fn add(&mut self, start: *mut u8, size: usize) {
        // SAFETY: the caller's promise: the region is ours alone and stays valid.
        unsafe {
            let a = (start as usize + GRAIN - 1) & !(GRAIN - 1);
            if size < (a - start as usize) + GRAIN {
                return;
            }
            let size = (size - (a - start as usize)) & !(GRAIN - 1);
            self.insert(a as *mut FreeBlock, size);
            self.size += size;
        }
    }

    /// Links free block `b` into the address-ordered list, merging neighbours.
    ///
    /// # Safety
    /// `b` is `size` bytes of the heap's regions, `GRAIN`-aligned, used by nothing else.
    unsafe fn insert(&mut self, b: *mut FreeBlock, size: usize) {
        // SAFETY: `b` is a free, unlinked block of `size` bytes inside the heap's regions (the caller's promise); list nodes are free blocks there.
        unsafe {
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
    }

    fn round(l: Layout) -> (usize, usize) {
        (
            (l.size().max(1) + GRAIN - 1) & !(GRAIN - 1),
            l.align().max(GRAIN),
        )
    }

    /// Allocates; null when nothing fits.
    ///
    /// # Safety
    /// The heap's regions must still be valid (see `add`).
    pub unsafe fn alloc(&mut self, l: Layout) -> *mut u8 {
        // SAFETY: list nodes are free blocks inside the heap's regions, valid by the caller's promise.
        unsafe {
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
    }

    /// Frees a block from `alloc` with the same layout.
    ///
    /// # Safety
    /// `p` must come from `alloc(l)` on this heap and not be freed yet.
    pub unsafe fn dealloc(&mut self, p: *mut u8, l: Layout) {
        // SAFETY: `p` is an allocated block of this layout (the caller's promise), free to become a list node.
        unsafe {
            let (size, _) = Self::round(l);
            self.used -= size;
            self.insert(p as *mut FreeBlock, size);
        }
    }

    /// Number of free blocks (for tests: a fully freed heap over one region is one block).
    pub fn free_blocks(&self) -> usize {
        let mut n = 0;
        let mut c = self.head;
        while !c.is_null() {
            n += 1;
            // SAFETY: list nodes live in the heap's regions.
            c = unsafe { (*c).next };
        }
        n
    }
}

impl Default for Heap {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn arena(size: usize) -> (Vec<u8>, Heap) {
        let mut v = std::vec![0u8; size + 64];
        let mut h = Heap::new();
        // SAFETY: the vector outlives the heap in each test and is used for nothing else.
        unsafe { h.add(v.as_mut_ptr(), v.len()) };
        (v, h)
    }

    #[test]
    fn random_alloc_free_is_exact_and_coalesces() {
        let (_mem, mut h) = arena(1 << 20);
        let total = h.size;
        let mut live: Vec<(usize, Layout)> = Vec::new();
        let mut seed = 99u64;
        for step in 0..20_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let r = (seed >> 33) as usize;
            if !r.is_multiple_of(3) || live.is_empty() {
                let size = 1 + r % 3000;
                let align = 1 << (r % 8);
                let l = Layout::from_size_align(size, align).unwrap();
                // SAFETY: valid heap.
                let p = unsafe { h.alloc(l) };
                if p.is_null() {
                    continue;
                }
                assert_eq!(p as usize % align.max(GRAIN), 0);
                // No overlap with any live block.
                for &(q, ql) in &live {
                    let (a, b) = (p as usize, p as usize + l.size());
                    let (c, d) = (q, q + ql.size());
                    assert!(b <= c || d <= a, "step {step}: overlap");
                }
                // SAFETY: fresh block of l.size() bytes.
                unsafe { core::ptr::write_bytes(p, 0xa5, l.size()) };
                live.push((p as usize, l));
            } else {
                let (p, l) = live.swap_remove(r % live.len());
                // SAFETY: from alloc with the same layout.
                unsafe { h.dealloc(p as *mut u8, l) };
            }
        }
        for (p, l) in live.drain(..) {
            // SAFETY: as above.
            unsafe { h.dealloc(p as *mut u8, l) };
        }
        assert_eq!(h.used, 0);
        assert_eq!(h.size, total);
        assert_eq!(
            h.free_blocks(),
            1,
            "everything coalesced back into one block"
        );
    }

    #[test]
    fn exhaustion_returns_null() {
        let (_mem, mut h) = arena(4096);
        let l = Layout::from_size_align(1024, 8).unwrap();
        let mut n = 0;
        // SAFETY: valid heap.
        while !unsafe { h.alloc(l) }.is_null() {
            n += 1;
        }
        assert!((3..=4).contains(&n));
        let big = Layout::from_size_align(1 << 20, 8).unwrap();
        // SAFETY: valid heap.
        assert!(unsafe { h.alloc(big) }.is_null());
    }
}
