//! The heap: talc, behind a small cache of freed small blocks.
//!
//! talc spends ~120 instructions on a `malloc` and ~60 on a `free` (its bins, tags and
//! coalescing); a process start allocates and frees a few hundred small blocks, most of them
//! short-lived (buffers grown and dropped, decoded records). Every request of at most
//! [`MAX_SMALL`] bytes (alignment at most [`SMALL_ALIGN`]) is rounded up to a size class and
//! taken from talc at that size, so any freed block of a class serves any later request of the
//! class: freed blocks go on the class's list (at most [`KEEP_BYTES`] of them, the rest back to
//! talc) and the next request of the class pops one. A block on a list is still a talc
//! allocation: nothing is carved, and when talc runs out the lists are handed back and the
//! request tried again, so what the lists hold never makes a request fail.
//!
//! A program whose process is short-lived and starts afresh each time (the Linux personality's
//! library: every fork child and exec'd image) finds its lists empty: most of its requests are
//! first ones. [`carve_small_blocks`] switches it to carving: a class with nothing kept cuts its
//! block from a [`CARVE_CHUNK`] taken from talc (a few instructions instead of talc's ~120), and
//! freed blocks are all kept on their lists (a carved block is not talc's to take back). The
//! lists then hold at most what the program had in use at once, per class. Lives in its own
//! task's memory only.
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::null_mut;

/// The size classes; a request takes the first that holds it.
const CLASS_SIZE: [usize; CLASSES] = [16, 32, 48, 64, 96, 128, 192, 256, 384, 512];
const CLASSES: usize = 10;
/// Largest request the cache serves.
pub const MAX_SMALL: usize = 512;
/// Every class block is allocated with this alignment, so a block serves any request of its
/// class with alignment up to it.
pub const SMALL_ALIGN: usize = 16;
/// Most bytes of freed blocks a class keeps (unless carving: then all): a server that makes
/// and drops a thousand small names in one request (a directory listing) should find them again.
pub const KEEP_BYTES: usize = 16 * 1024;
/// Most freed blocks each class keeps.
const KEEP: [u16; CLASSES] = {
    let mut k = [0u16; CLASSES];
    let mut c = 0;
    while c < CLASSES {
        k[c] = (KEEP_BYTES / CLASS_SIZE[c]) as u16;
        c += 1;
    }
    k
};
/// What carving takes from talc at a time.
pub const CARVE_CHUNK: usize = 4096;

/// The class of a request of `size` bytes (1..=[`MAX_SMALL`]).
#[inline]
pub fn class(size: usize) -> usize {
    if size <= 64 {
        size.max(1).div_ceil(16) - 1
    } else {
        // size in (2^(b-1), 2^b]: two classes, 3 * 2^(b-2) and 2^b.
        let b = (usize::BITS - (size - 1).leading_zeros()) as usize;
        let lower_half = size <= 3 << (b - 2);
        4 + (b - 7) * 2 + usize::from(!lower_half)
    }
}

/// Whether the cache serves `layout`.
#[inline]
fn small(layout: Layout) -> bool {
    layout.size() <= MAX_SMALL && layout.align() <= SMALL_ALIGN
}

/// The layout a block of class `c` has at talc.
#[inline]
fn class_layout(c: usize) -> Layout {
    // SAFETY: the sizes are nonzero multiples of 16 and the alignment a power of two.
    unsafe { Layout::from_size_align_unchecked(CLASS_SIZE[c], SMALL_ALIGN) }
}

/// The layout of a carving chunk at talc.
const CARVE_LAYOUT: Layout = match Layout::from_size_align(CARVE_CHUNK, SMALL_ALIGN) {
    Ok(l) => l,
    Err(_) => panic!("carving chunk layout"),
};

/// A freed block on a class list: its first word links to the next.
pub struct Free {
    next: *mut Free,
}

/// The freed blocks of each class.
pub struct Lists {
    head: [*mut Free; CLASSES],
    len: [u16; CLASSES],
    /// Carving: the unused rest of the current chunk, `[carve, carve_end)`; both null when not
    /// carving (see the module's text).
    carving: bool,
    carve: *mut u8,
    carve_end: *mut u8,
}

// SAFETY: the lists hold pointers to blocks nobody else uses; the mutex around them serialises
// every access.
unsafe impl Send for Lists {}

impl Lists {
    pub const fn new() -> Lists {
        Lists {
            head: [null_mut(); CLASSES],
            len: [0; CLASSES],
            carving: false,
            carve: null_mut(),
            carve_end: null_mut(),
        }
    }

    /// A block of class `c` cut from the current chunk, or null if the chunk has too little left.
    #[inline]
    fn cut(&mut self, c: usize) -> *mut u8 {
        let size = CLASS_SIZE[c];
        if (self.carve_end as usize) - (self.carve as usize) < size {
            return null_mut();
        }
        let block = self.carve;
        // SAFETY: `size` bytes lie between `carve` and `carve_end`, in one chunk.
        self.carve = unsafe { block.add(size) };
        block
    }

    /// A freed block of class `c`, if there is one.
    #[inline]
    pub fn pop(&mut self, c: usize) -> *mut u8 {
        let block = self.head[c];
        if !block.is_null() {
            // SAFETY: a block on a list is a live talc allocation of at least 16 bytes that
            // only the list refers to; its first word is the link `push` wrote.
            self.head[c] = unsafe { (*block).next };
            self.len[c] -= 1;
        }
        block.cast()
    }

    /// Keeps `block` of class `c`; false if the class keeps enough already.
    ///
    /// # Safety
    /// `block` is a talc allocation of class `c`'s layout that nobody uses any more.
    #[inline]
    pub unsafe fn push(&mut self, c: usize, block: *mut u8) -> bool {
        if self.len[c] >= KEEP[c] && !self.carving {
            return false;
        }
        let block = block.cast::<Free>();
        // SAFETY: the caller's promise: the block is ours, 16-byte aligned, 16 bytes or more.
        unsafe { block.write(Free { next: self.head[c] }) };
        self.head[c] = block;
        self.len[c] = self.len[c].saturating_add(1);
        true
    }

    /// Takes every kept block of class `c` out (for handing back to talc).
    pub fn take(&mut self, c: usize) -> *mut Free {
        self.len[c] = 0;
        core::mem::replace(&mut self.head[c], null_mut())
    }
}

impl Default for Lists {
    fn default() -> Lists {
        Lists::new()
    }
}

/// talc's out-of-memory handler: claims the span set aside for it ([`crate::heap_reserve`])
/// the first time the heap runs out, and fails after that. A demand-paged heap is claimed only
/// if it is needed: claiming writes its first and last words, a page of it each (two calls to
/// its dataspace at the start of every Linux process, most of which never grow past the heap
/// proc maps for them).
pub struct Reserve {
    pub(crate) span: Option<(usize, usize)>,
}

impl talc::OomHandler for Reserve {
    fn handle_oom(talc: &mut talc::Talc<Self>, _layout: Layout) -> Result<(), ()> {
        let (base, size) = talc.oom_handler.span.take().ok_or(())?;
        // SAFETY: `heap_reserve`'s caller promised the span is ours alone, mapped read-write,
        // for good.
        unsafe { talc.claim(talc::Span::from_base_size(base as *mut u8, size)) }.map(|_| ())
    }
}

/// The global allocator: talc and the class lists in front of it.
pub struct Heap {
    pub talc: talc::Talck<spin::Mutex<()>, Reserve>,
    lists: spin::Mutex<Lists>,
}

impl Heap {
    pub const fn new() -> Heap {
        Heap {
            talc: talc::Talc::new(Reserve { span: None }).lock(),
            lists: spin::Mutex::new(Lists::new()),
        }
    }

    /// Switches this program's heap to carving small blocks (see the module's text); for a
    /// program that starts afresh each time. Call once, early.
    pub fn carve_small_blocks(&self) {
        self.lists.lock().carving = true;
    }

    /// Hands every kept block back to talc (so that it can coalesce them); true if there were any.
    /// Not when carving: kept blocks may be carved ones, which are not talc's.
    fn flush(&self) -> bool {
        if self.lists.lock().carving {
            return false;
        }
        let mut any = false;
        for c in 0..CLASSES {
            let mut block = self.lists.lock().take(c);
            while !block.is_null() {
                // SAFETY: taken off the list: a talc allocation of class `c`'s layout, ours.
                let next = unsafe { (*block).next };
                // SAFETY: as above.
                unsafe { self.talc.dealloc(block.cast(), class_layout(c)) };
                block = next;
                any = true;
            }
        }
        any
    }

    /// talc's allocation of `layout`, the kept blocks handed back first if it has no room.
    fn talc_alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `layout` has a nonzero size (GlobalAlloc's contract, or a class's).
        let p = unsafe { self.talc.alloc(layout) };
        if p.is_null() && self.flush() {
            // SAFETY: as above.
            return unsafe { self.talc.alloc(layout) };
        }
        p
    }
}

impl Default for Heap {
    fn default() -> Heap {
        Heap::new()
    }
}

// SAFETY: small blocks come whole from talc at their class's layout and go back to it (or to a
// list that only hands them out again for the same class); the rest is talc's own.
unsafe impl GlobalAlloc for Heap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if small(layout) {
            let c = class(layout.size());
            let mut lists = self.lists.lock();
            let block = lists.pop(c);
            if !block.is_null() {
                return block;
            }
            if lists.carving {
                let block = lists.cut(c);
                if !block.is_null() {
                    return block;
                }
                // SAFETY: a valid nonzero layout.
                let chunk = unsafe { self.talc.alloc(CARVE_LAYOUT) };
                if chunk.is_null() {
                    return chunk;
                }
                lists.carve = chunk;
                // SAFETY: the chunk is CARVE_CHUNK bytes.
                lists.carve_end = unsafe { chunk.add(CARVE_CHUNK) };
                return lists.cut(c);
            }
            drop(lists);
            return self.talc_alloc(class_layout(c));
        }
        self.talc_alloc(layout)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if small(layout) {
            let c = class(layout.size());
            // SAFETY: the caller's promise: `ptr` came from `alloc` with `layout`, so it is a
            // talc block of class `c`'s layout, and nobody uses it any more.
            if unsafe { self.lists.lock().push(c, ptr) } {
                return;
            }
            // SAFETY: as above; `push` keeps every block when carving, so this one is talc's.
            return unsafe { self.talc.dealloc(ptr, class_layout(c)) };
        }
        // SAFETY: the caller's promise: a talc block of `layout`.
        unsafe { self.talc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_small = small(layout);
        // SAFETY: GlobalAlloc's contract: `new_size` is nonzero and rounds to a valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let new_small = small(new);
        if old_small && new_small && class(layout.size()) == class(new_size) {
            return ptr; // the block already holds the class's size
        }
        if !old_small && !new_small {
            // SAFETY: the caller's promise: a talc block of `layout`.
            let p = unsafe { self.talc.realloc(ptr, layout, new_size) };
            if p.is_null() && self.flush() {
                // SAFETY: as above; a failed realloc left the block as it was.
                return unsafe { self.talc.realloc(ptr, layout, new_size) };
            }
            return p;
        }
        // Between a class block and a talc block of another kind: move the bytes.
        // SAFETY: `new` is a valid nonzero layout.
        let p = unsafe { self.alloc(new) };
        if !p.is_null() {
            // SAFETY: both blocks hold at least the smaller size and do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size)) };
            // SAFETY: the caller's promise: `ptr` came from `alloc` with `layout`.
            unsafe { self.dealloc(ptr, layout) };
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_small_size_fits_its_class_and_not_the_one_below() {
        for size in 1..=MAX_SMALL {
            let c = class(size);
            assert!(CLASS_SIZE[c] >= size, "size {size} class {c}");
            assert!(c == 0 || CLASS_SIZE[c - 1] < size, "size {size} class {c}");
        }
    }

    #[test]
    fn lists_keep_at_most_keep_and_give_back_in_reverse() {
        let keep1 = KEEP[1] as usize;
        let mut blocks = std::vec![[0u128; 2]; keep1 + 1];
        let mut lists = Lists::new();
        for (i, b) in blocks.iter_mut().enumerate() {
            let p = b.as_mut_ptr().cast::<u8>();
            // SAFETY: each test block is 32 bytes, 16-byte aligned, used by nothing else.
            let kept = unsafe { lists.push(1, p) };
            assert_eq!(kept, i < keep1);
        }
        assert_eq!(lists.len[1] as usize, keep1);
        assert!(lists.pop(0).is_null());
        let last = blocks[keep1 - 1].as_mut_ptr().cast::<u8>();
        assert_eq!(lists.pop(1), last);
        assert_eq!(lists.len[1] as usize, keep1 - 1);
        assert!(!lists.take(1).is_null());
        assert!(lists.pop(1).is_null());
    }

    #[test]
    fn carving_cuts_blocks_from_the_chunk_and_keeps_every_freed_one() {
        let mut chunk = std::vec![0u128; 8]; // 128 bytes
        let base = chunk.as_mut_ptr().cast::<u8>();
        let mut lists = Lists::new();
        lists.carving = true;
        lists.carve = base;
        // SAFETY: the chunk is 128 bytes.
        lists.carve_end = unsafe { base.add(128) };
        let a = lists.cut(class(100)); // 128
        assert_eq!(a, base);
        assert!(lists.cut(0).is_null(), "nothing left");
        let mut blocks = std::vec![[0u128; 1]; KEEP[0] as usize + 5];
        for b in blocks.iter_mut() {
            // SAFETY: 16-byte blocks used by nothing else.
            assert!(unsafe { lists.push(0, b.as_mut_ptr().cast()) });
        }
        assert_eq!(lists.len[0] as usize, KEEP[0] as usize + 5);
    }

    #[test]
    fn the_reserve_is_claimed_once_the_heap_runs_out() {
        #[repr(align(64))]
        struct Arena([u8; 8192]);
        let mut first = std::boxed::Box::new(Arena([0; 8192]));
        let mut reserve = std::boxed::Box::new(Arena([0; 8192]));
        let (first_at, reserve_at) = (first.0.as_mut_ptr(), reserve.0.as_mut_ptr());
        let mut talc = talc::Talc::new(Reserve {
            span: Some((reserve_at as usize, 8192)),
        });
        // SAFETY: the arena is ours and outlives the allocator.
        unsafe { talc.claim(talc::Span::from_base_size(first_at, 8192)) }.unwrap();
        let layout = Layout::from_size_align(3000, 16).unwrap();
        let inside = |p: *mut u8, base: *mut u8| {
            (base as usize..base as usize + 8192).contains(&(p as usize))
        };
        // The first arena serves while it can, the reserve untouched.
        // SAFETY (each malloc): a valid nonzero layout.
        let a = unsafe { talc.malloc(layout) }.unwrap().as_ptr();
        let b = unsafe { talc.malloc(layout) }.unwrap().as_ptr();
        assert!(inside(a, first_at) && inside(b, first_at));
        assert!(talc.oom_handler.span.is_some());
        // Then the reserve is claimed, once.
        let c = unsafe { talc.malloc(layout) }.unwrap().as_ptr();
        assert!(inside(c, reserve_at));
        assert!(talc.oom_handler.span.is_none());
        let d = unsafe { talc.malloc(layout) }.unwrap().as_ptr();
        assert!(inside(d, reserve_at));
        // And when both are full the allocation fails (no loop, no other memory).
        assert!(unsafe { talc.malloc(layout) }.is_err());
    }
}
