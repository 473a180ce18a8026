//! The pure part of starting a program: where each part of the new address space goes, which
//! image pages map straight from the source and which are copied, and the checks that keep the
//! parts apart and inside user space. No system calls; host-tested.

use alloc::vec::Vec;
use core::fmt;
use sawmill_abi::Error;
use sawmill_loader::{LoadError, PagePlan};

pub const PAGE: u64 = 4096;
pub const HUGE_PAGE: u64 = 0x20_0000;

/// Fixed addresses of the new address space (for sawmill programs: `Layout::standard()`, the
/// runtime's layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The environment page.
    pub env: u64,
    /// Start of the heap.
    pub heap: u64,
    /// Top of the main thread's stack (the stack grows down from here).
    pub stack_top: u64,
    /// The main thread's UTCB page.
    pub utcb: u64,
    /// Where 2 MiB pages go (2 MiB aligned).
    pub huge: u64,
    /// End of user space: nothing may reach past it.
    pub user_end: u64,
}

/// Sizes of the parts the caller chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// Rounded up to whole pages; 0 = no heap.
    pub heap_bytes: u64,
    /// Rounded up to whole pages; must not be 0.
    pub stack_bytes: u64,
    /// 2 MiB pages mapped at `Layout::huge`.
    pub huge_pages: u64,
}

/// A range `[start, start + len)` of the new address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub what: &'static str,
    pub start: u64,
    pub len: u64,
}

impl Region {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
    fn overlaps(&self, o: &Region) -> bool {
        self.start < o.end() && o.start < self.end()
    }
    pub fn pages(&self) -> u64 {
        self.len / PAGE
    }
}

/// Everything `prepare` will build, decided before any object exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub entry: u64,
    /// How each page of the image comes about.
    pub image: Vec<PagePlan>,
    pub env: Region,
    pub heap: Region,
    pub stack: Region,
    pub utcb: Region,
    pub huge: Region,
    /// The main thread's first stack pointer (as after a `call`: 8 below a 16-byte boundary).
    pub sp: u64,
}

impl Plan {
    /// Image pages mapped straight from the source, and pages copied.
    pub fn counts(&self) -> (usize, usize) {
        let direct = self
            .image
            .iter()
            .filter(|p| matches!(p, PagePlan::Direct { .. }))
            .count();
        (direct, self.image.len() - direct)
    }

    /// The 2 MiB windows (their addresses, ascending) whose pages are all read-only (mapped
    /// straight, or copied and never written: the same in every program) and hold nothing else
    /// of the plan: one task can hold them and lend each program its page tables (`task_link`)
    /// instead of each program mapping them page by page.
    pub fn shareable_windows(&self) -> Vec<u64> {
        let window = |va: u64| va & !(HUGE_PAGE - 1);
        let mut direct: Vec<u64> = Vec::new();
        let mut other: Vec<u64> = Vec::new();
        for p in &self.image {
            match *p {
                PagePlan::Direct { vaddr, .. } => direct.push(window(vaddr)),
                PagePlan::Fresh { vaddr, rights, .. } if rights & sawmill_loader::W == 0 => {
                    direct.push(window(vaddr))
                }
                PagePlan::Fresh { vaddr, .. } => other.push(window(vaddr)),
            }
        }
        for r in [&self.env, &self.heap, &self.stack, &self.utcb, &self.huge] {
            if r.len > 0 {
                let mut w = window(r.start);
                while w < r.end() {
                    other.push(w);
                    w += HUGE_PAGE;
                }
            }
        }
        direct.sort_unstable();
        direct.dedup();
        direct.retain(|w| !other.contains(w));
        direct
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// The image is not an ELF64 little-endian executable.
    NotElf,
    /// Program headers or a segment lie outside the file or outside user space.
    BadSegment,
    /// The entry point lies in no executable segment.
    BadEntry,
    /// A part of the address space is misaligned, empty where it may not be, wraps, or leaves
    /// user space.
    BadRegion(&'static str),
    /// Two parts of the new address space overlap.
    Overlap(&'static str, &'static str),
    /// The environment records do not fit in the page.
    EnvFull,
    /// More capabilities than the task has slots, or two in one slot.
    BadSlot,
    /// The image source could not provide a page.
    Image(&'static str),
    /// The caller ran out of pages or slots.
    NoMemory,
    /// A system call failed: what was being done, and the kernel's answer.
    Sys(&'static str, Error),
}

impl From<LoadError> for SpawnError {
    fn from(e: LoadError) -> SpawnError {
        match e {
            LoadError::NotElf => SpawnError::NotElf,
            LoadError::BadSegment => SpawnError::BadSegment,
            LoadError::Backend(s) => SpawnError::Image(s),
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::NotElf => write!(f, "not an ELF64 little-endian image"),
            SpawnError::BadSegment => write!(f, "bad segment"),
            SpawnError::BadEntry => write!(f, "entry point outside every executable segment"),
            SpawnError::BadRegion(w) => write!(f, "bad {w} region"),
            SpawnError::Overlap(a, b) => write!(f, "{a} overlaps {b}"),
            SpawnError::EnvFull => write!(f, "the environment does not fit in its page"),
            SpawnError::BadSlot => write!(f, "bad capability slot"),
            SpawnError::Image(w) => write!(f, "image: {w}"),
            SpawnError::NoMemory => write!(f, "out of memory"),
            SpawnError::Sys(w, e) => write!(f, "{w}: {}", e.name()),
        }
    }
}

fn pages_of(bytes: u64) -> Option<u64> {
    bytes.checked_add(PAGE - 1).map(|b| b / PAGE * PAGE)
}

fn check(r: &Region, user_end: u64) -> Result<(), SpawnError> {
    let ok = r.start.is_multiple_of(PAGE)
        && r.len.is_multiple_of(PAGE)
        && r.start >= PAGE
        && r.start.checked_add(r.len).is_some_and(|e| e <= user_end);
    if ok {
        Ok(())
    } else {
        Err(SpawnError::BadRegion(r.what))
    }
}

/// Plans a program: `image` is the ELF, whose byte 0 the source shows at an address
/// `image_base` (modulo a page: pages can map straight only where file offset and address agree;
/// None: the source's pages cannot be mapped into the task, every page is copied); `extra` are
/// further ranges the caller maps into the new task (they must not collide either).
pub fn plan(
    image: &[u8],
    image_base: Option<u64>,
    layout: &Layout,
    sizes: &Sizes,
    extra: &[Region],
) -> Result<Plan, SpawnError> {
    let heap_len = pages_of(sizes.heap_bytes).ok_or(SpawnError::BadRegion("heap"))?;
    let stack_len = pages_of(sizes.stack_bytes)
        .filter(|&l| l > 0)
        .ok_or(SpawnError::BadRegion("stack"))?;
    let huge_len = sizes
        .huge_pages
        .checked_mul(HUGE_PAGE)
        .ok_or(SpawnError::BadRegion("huge pages"))?;
    if sizes.huge_pages > 0 && !layout.huge.is_multiple_of(HUGE_PAGE) {
        return Err(SpawnError::BadRegion("huge pages"));
    }
    let stack_base = layout
        .stack_top
        .checked_sub(stack_len)
        .ok_or(SpawnError::BadRegion("stack"))?;
    let env = Region {
        what: "environment",
        start: layout.env,
        len: PAGE,
    };
    let heap = Region {
        what: "heap",
        start: layout.heap,
        len: heap_len,
    };
    let stack = Region {
        what: "stack",
        start: stack_base,
        len: stack_len,
    };
    let utcb = Region {
        what: "UTCB",
        start: layout.utcb,
        len: PAGE,
    };
    let huge = Region {
        what: "huge pages",
        start: layout.huge,
        len: huge_len,
    };
    let mut regions: Vec<Region> = [env, heap, stack, utcb, huge]
        .into_iter()
        .chain(extra.iter().copied())
        .filter(|r| r.len > 0)
        .collect();
    for r in &regions {
        check(r, layout.user_end)?;
    }
    let (entry, segs) = sawmill_loader::segments(image, layout.user_end)?;
    if !segs
        .iter()
        .any(|s| s.rights & sawmill_loader::X != 0 && s.vaddr <= entry && entry < s.vaddr + s.memsz)
    {
        return Err(SpawnError::BadEntry);
    }
    for s in &segs {
        let start = s.vaddr & !(PAGE - 1);
        // `segments` checked vaddr + memsz <= user_end, so rounding up cannot wrap.
        let end = (s.vaddr + s.memsz).div_ceil(PAGE) * PAGE;
        if start < PAGE {
            return Err(SpawnError::BadSegment);
        }
        regions.push(Region {
            what: "image",
            start,
            len: end - start,
        });
    }
    for (i, a) in regions.iter().enumerate() {
        for b in &regions[i + 1..] {
            // Segments may share pages with each other (the loader copies such pages once).
            if a.overlaps(b) && !(a.what == "image" && b.what == "image") {
                return Err(SpawnError::Overlap(b.what, a.what));
            }
        }
    }
    let mut image = sawmill_loader::plan(&segs, image_base.unwrap_or(0) % PAGE);
    if image_base.is_none() {
        for p in &mut image {
            if let PagePlan::Direct {
                vaddr,
                file_off,
                rights,
            } = *p
            {
                *p = PagePlan::Fresh {
                    vaddr,
                    rights,
                    copies: alloc::vec![(0, file_off, PAGE)],
                };
            }
        }
    }
    Ok(Plan {
        entry,
        image,
        env,
        heap,
        stack,
        utcb,
        huge,
        sp: layout.stack_top - 8,
    })
}

/// The slot of each capability to place: its fixed slot, or the next free one from `first`
/// (in order). Fails if a slot is taken twice or lies outside the task's `slots`.
/// (The fixed slots are sorted once and passed over as the free ones advance: searching the list
/// for every slot was ~3k instructions a process for its ~25 capabilities.)
pub fn assign_slots(fixed: &[Option<u64>], first: u64, slots: u64) -> Result<Vec<u64>, SpawnError> {
    let mut taken: Vec<u64> = fixed.iter().flatten().copied().collect();
    taken.sort_unstable();
    if taken.windows(2).any(|w| w[0] == w[1]) {
        return Err(SpawnError::BadSlot);
    }
    let mut out: Vec<u64> = Vec::with_capacity(fixed.len());
    let mut next = first;
    // `taken[skip..]` are the fixed slots not yet passed by `next`.
    let mut skip = 0;
    for f in fixed {
        let s = match *f {
            Some(s) => s,
            None => {
                while skip < taken.len() && taken[skip] <= next {
                    if taken[skip] == next {
                        next += 1;
                    }
                    skip += 1;
                }
                next += 1;
                next - 1
            }
        };
        if s >= slots {
            return Err(SpawnError::BadSlot);
        }
        out.push(s);
    }
    Ok(out)
}

/// Whether page `i` of a run with mask `dirty` (bit i for page i) is to be zeroed: a page past
/// the mask's 64 always.
pub fn dirty_page(dirty: u64, i: u64) -> bool {
    i >= 64 || dirty & (1 << i) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read-only windows are shared (copied read-only pages too); one with a writable page, or
    /// with a region of the layout, is not.
    #[test]
    fn shareable_windows_are_the_straight_ones() {
        let direct = |vaddr| PagePlan::Direct {
            vaddr,
            file_off: 0,
            rights: 1,
        };
        let fresh = |vaddr| PagePlan::Fresh {
            vaddr,
            rights: 3,
            copies: Vec::new(),
        };
        let region = |start, len| Region {
            what: "r",
            start,
            len,
        };
        let pl = Plan {
            entry: 0,
            image: alloc::vec![
                direct(0x6000_0000),
                direct(0x6000_1000),
                direct(0x6020_d000),
                PagePlan::Fresh {
                    vaddr: 0x6020_e000,
                    rights: 5,
                    copies: Vec::new(),
                },
                direct(0x6040_0000),
                fresh(0x6040_1000),
                direct(0x6060_0000),
            ],
            env: region(0x6060_0000 + HUGE_PAGE - PAGE, PAGE),
            heap: region(0x7000_0000, 0x10000),
            stack: region(0, 0),
            utcb: region(0x7100_0000, PAGE),
            huge: region(0, 0),
            sp: 0,
        };
        assert_eq!(pl.shareable_windows(), [0x6000_0000, 0x6020_0000]);
    }

    const LAYOUT: Layout = Layout {
        env: 0x1000_0000,
        heap: 0x2000_0000,
        stack_top: 0x7000_0000,
        utcb: 0x7100_0000,
        huge: 0x4000_0000,
        user_end: 0x7fff_ffff_f000,
    };
    const SIZES: Sizes = Sizes {
        heap_bytes: 0x10000,
        stack_bytes: 0x10000,
        huge_pages: 0,
    };

    use sawmill_loader::testing::elf;

    /// Text (2 pages, R X) and data (R W, part file, part bss), as a linker lays out a program.
    fn program() -> Vec<u8> {
        elf(
            0x201000,
            &[
                (1, 5, 0x1000, 0x201000, 0x2000, 0x2000),
                (1, 6, 0x3000, 0x203000, 0x800, 0x1800),
            ],
            0x4000,
        )
    }

    #[test]
    fn plans_every_part() {
        let p = plan(&program(), Some(0), &LAYOUT, &SIZES, &[]).unwrap();
        assert_eq!(p.entry, 0x201000);
        assert_eq!(
            p.counts(),
            (2, 2),
            "text maps straight, data and bss are copied"
        );
        assert_eq!(
            p.heap,
            Region {
                what: "heap",
                start: 0x2000_0000,
                len: 0x10000
            }
        );
        assert_eq!(
            p.stack,
            Region {
                what: "stack",
                start: 0x7000_0000 - 0x10000,
                len: 0x10000
            }
        );
        assert_eq!(
            (p.env.start, p.utcb.start, p.sp),
            (0x1000_0000, 0x7100_0000, 0x7000_0000 - 8)
        );
        assert_eq!(p.huge.len, 0);
        // Sizes round up to pages; an image shown at an odd address can map nothing straight.
        let p = plan(
            &program(),
            Some(0x800),
            &LAYOUT,
            &Sizes {
                heap_bytes: 1,
                stack_bytes: 4097,
                huge_pages: 2,
            },
            &[],
        )
        .unwrap();
        assert_eq!(
            (p.heap.len, p.stack.len, p.huge.len),
            (PAGE, 2 * PAGE, 2 * HUGE_PAGE)
        );
        assert_eq!(p.counts(), (0, 4));
        // A source that cannot lend its pages: all copied, whole pages from the file.
        let p = plan(&program(), None, &LAYOUT, &SIZES, &[]).unwrap();
        assert_eq!(p.counts(), (0, 4));
        assert!(p.image.contains(&PagePlan::Fresh {
            vaddr: 0x202000,
            rights: sawmill_loader::R | sawmill_loader::X,
            copies: vec![(0, 0x2000, PAGE)]
        }));
    }

    #[test]
    fn parts_may_not_overlap() {
        // A segment reaching into the environment page.
        let img = elf(
            0x0fff_f000,
            &[(1, 5, 0x1000, 0x0fff_f000, 0x1000, 0x2000)],
            0x2000,
        );
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::Overlap("image", "environment"))
        );
        // A heap that runs into the 2 MiB pages.
        let s = Sizes {
            heap_bytes: 0x2000_0001,
            huge_pages: 1,
            ..SIZES
        };
        assert_eq!(
            plan(&program(), Some(0), &LAYOUT, &s, &[]).err(),
            Some(SpawnError::Overlap("huge pages", "heap"))
        );
        // A stack so big it reaches down over the heap.
        let s = Sizes {
            stack_bytes: 0x5000_0000,
            ..SIZES
        };
        assert_eq!(
            plan(&program(), Some(0), &LAYOUT, &s, &[]).err(),
            Some(SpawnError::Overlap("stack", "heap"))
        );
        // A caller's extra range over the stack.
        let pool = Region {
            what: "pool",
            start: 0x6fff_0000,
            len: 0x2000,
        };
        assert_eq!(
            plan(&program(), Some(0), &LAYOUT, &SIZES, &[pool]).err(),
            Some(SpawnError::Overlap("pool", "stack"))
        );
        // A UTCB inside the stack.
        let l = Layout {
            utcb: 0x6fff_f000,
            ..LAYOUT
        };
        assert_eq!(
            plan(&program(), Some(0), &l, &SIZES, &[]).err(),
            Some(SpawnError::Overlap("UTCB", "stack"))
        );
        // Segments sharing a page are fine (the loader copies it once).
        let img = elf(
            0x200000,
            &[
                (1, 5, 0, 0x200000, 0x800, 0x800),
                (1, 4, 0x800, 0x200800, 0x900, 0x900),
            ],
            0x2000,
        );
        assert!(plan(&img, Some(0), &LAYOUT, &SIZES, &[]).is_ok());
    }

    #[test]
    fn bounds_and_alignment() {
        assert_eq!(
            plan(
                &program(),
                Some(0),
                &LAYOUT,
                &Sizes {
                    stack_bytes: 0,
                    ..SIZES
                },
                &[]
            )
            .err(),
            Some(SpawnError::BadRegion("stack"))
        );
        let s = Sizes {
            heap_bytes: u64::MAX,
            ..SIZES
        };
        assert_eq!(
            plan(&program(), Some(0), &LAYOUT, &s, &[]).err(),
            Some(SpawnError::BadRegion("heap"))
        );
        let s = Sizes {
            huge_pages: u64::MAX / 2,
            ..SIZES
        };
        assert_eq!(
            plan(&program(), Some(0), &LAYOUT, &s, &[]).err(),
            Some(SpawnError::BadRegion("huge pages"))
        );
        let l = Layout {
            huge: 0x4000_1000,
            ..LAYOUT
        };
        assert_eq!(
            plan(
                &program(),
                Some(0),
                &l,
                &Sizes {
                    huge_pages: 1,
                    ..SIZES
                },
                &[]
            )
            .err(),
            Some(SpawnError::BadRegion("huge pages"))
        );
        let l = Layout {
            env: 0x1000_0800,
            ..LAYOUT
        };
        assert_eq!(
            plan(&program(), Some(0), &l, &SIZES, &[]).err(),
            Some(SpawnError::BadRegion("environment"))
        );
        let l = Layout {
            stack_top: 0x8000,
            ..LAYOUT
        };
        assert_eq!(
            plan(&program(), Some(0), &l, &SIZES, &[]).err(),
            Some(SpawnError::BadRegion("stack"))
        );
        let l = Layout {
            utcb: LAYOUT.user_end,
            ..LAYOUT
        };
        assert_eq!(
            plan(&program(), Some(0), &l, &SIZES, &[]).err(),
            Some(SpawnError::BadRegion("UTCB"))
        );
        let far = Region {
            what: "pool",
            start: LAYOUT.user_end - PAGE,
            len: 2 * PAGE,
        };
        assert_eq!(
            plan(&program(), Some(0), &LAYOUT, &SIZES, &[far]).err(),
            Some(SpawnError::BadRegion("pool"))
        );
    }

    #[test]
    fn malformed_images() {
        assert_eq!(
            plan(b"\x7fELF", Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::NotElf)
        );
        assert_eq!(
            plan(&[0u8; 4096], Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::NotElf)
        );
        let mut img = program();
        img[4] = 1; // 32-bit
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::NotElf)
        );
        // Truncated: the text segment's bytes are cut off.
        assert_eq!(
            plan(&program()[..0x2000], Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadSegment)
        );
        // Program headers past the end of the file.
        let mut img = program();
        img[32..40].copy_from_slice(&0x3fe0u64.to_le_bytes());
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadSegment)
        );
        // A segment past user space, and one wrapping around.
        let img = elf(
            0x201000,
            &[(1, 5, 0, LAYOUT.user_end - PAGE, 0x1000, 0x2000)],
            0x2000,
        );
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadSegment)
        );
        let img = elf(
            0x201000,
            &[(1, 5, 0, u64::MAX - 0xfff, 0x1000, 0x1000)],
            0x2000,
        );
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadSegment)
        );
        // A segment on page 0.
        let img = elf(0x10, &[(1, 5, 0, 0, 0x1000, 0x1000)], 0x2000);
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadSegment)
        );
        // The entry in data, past every segment, or with no segment at all.
        let img = elf(
            0x203000,
            &[
                (1, 5, 0x1000, 0x201000, 0x2000, 0x2000),
                (1, 6, 0x3000, 0x203000, 0x800, 0x1800),
            ],
            0x4000,
        );
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadEntry)
        );
        let img = elf(
            0x900000,
            &[(1, 5, 0x1000, 0x201000, 0x2000, 0x2000)],
            0x4000,
        );
        assert_eq!(
            plan(&img, Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadEntry)
        );
        assert_eq!(
            plan(&elf(0x201000, &[], 64), Some(0), &LAYOUT, &SIZES, &[]).err(),
            Some(SpawnError::BadEntry)
        );
    }

    #[test]
    fn slots_fixed_then_in_order() {
        assert_eq!(
            assign_slots(&[Some(6), None, Some(8), None], 8, 1024),
            Ok(vec![6, 9, 8, 10])
        );
        assert_eq!(assign_slots(&[None, None], 8, 1024), Ok(vec![8, 9]));
        // Fixed slots in any order are skipped by the free ones, runs of them too.
        assert_eq!(
            assign_slots(
                &[None, Some(10), None, Some(9), None, Some(3), None],
                8,
                1024
            ),
            Ok(vec![8, 10, 11, 9, 12, 3, 13])
        );
        assert_eq!(
            assign_slots(&[Some(8), Some(9), None, Some(11), None], 8, 1024),
            Ok(vec![8, 9, 10, 11, 12])
        );
        assert_eq!(
            assign_slots(&[Some(6), Some(6)], 8, 1024),
            Err(SpawnError::BadSlot)
        );
        assert_eq!(assign_slots(&[None, None], 8, 9), Err(SpawnError::BadSlot));
        assert_eq!(
            assign_slots(&[Some(1024)], 8, 1024),
            Err(SpawnError::BadSlot)
        );
    }

    #[test]
    fn only_the_marked_pages_are_zeroed() {
        let mask = 0b101 | 1 << 63;
        assert!(dirty_page(mask, 0));
        assert!(!dirty_page(mask, 1));
        assert!(dirty_page(mask, 2));
        assert!(!dirty_page(mask, 62));
        assert!(dirty_page(mask, 63));
        // Past the mask: not known clean.
        assert!(dirty_page(mask, 64));
        assert!(dirty_page(0, 100));
        assert!(dirty_page(u64::MAX, 5));
    }
}
