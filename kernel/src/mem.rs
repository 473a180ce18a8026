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

/// The multiboot2 loader's information block (through the direct map), if a multiboot2 loader
/// entered; bounded by its own size word and 64 KiB.
pub fn multiboot2_info() -> Option<&'static [u8]> {
    // SAFETY: written once by the boot code, before anything reads them.
    let (kind, info) = unsafe { (crate::boot::BOOT_KIND, crate::boot::BOOT_INFO as u64) };
    if kind != 2 || info + 8 > DIRECT_MAP_SIZE {
        return None;
    }
    // SAFETY: the block's first word, inside the direct map; read unaligned, only read.
    let total = unsafe { core::ptr::read_unaligned(phys_to_virt(info) as *const u32) } as u64;
    let len = total.min(64 * 1024).min(DIRECT_MAP_SIZE - info);
    // SAFETY: the loader's block, inside the direct map, never written after boot.
    Some(unsafe { core::slice::from_raw_parts(phys_to_virt(info), len as usize) })
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
                self.user[self.nuser] = Range {
                    start: p,
                    end: r.end,
                };
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
}

/// The kernel heap: objects are allocated here; see `sawmill_kcore::heap`.
pub struct KernelAlloc;

// SAFETY: single CPU, interrupts off in the kernel: the heap is never used concurrently.
unsafe impl Sync for KernelAlloc {}

pub static mut HEAP: sawmill_kcore::heap::Heap = sawmill_kcore::heap::Heap::new();

fn heap() -> &'static mut sawmill_kcore::heap::Heap {
    // SAFETY: single CPU, interrupts off in the kernel.
    unsafe { &mut *core::ptr::addr_of_mut!(HEAP) }
}

// SAFETY: the heap hands out disjoint blocks of memory it owns, aligned as asked.
unsafe impl GlobalAlloc for KernelAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the heap's regions are pool frames given to it for good (`heap_init`).
        unsafe { heap().alloc(l) }
    }
    // SAFETY (of the call): as for `alloc`.
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` with this layout (GlobalAlloc's contract).
        unsafe { heap().dealloc(p, l) }
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
        // SAFETY: the frame is pool memory given to the heap for good.
        unsafe { heap().add(phys_to_virt(f), PAGE as usize) };
        added += 1;
    }
}
