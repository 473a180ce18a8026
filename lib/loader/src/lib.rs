//! The task loader: reads an ELF64 executable and builds a task's image from it through a
//! [`Backend`] that owns the actual memory. Read-only segment pages that are whole pages of the
//! file map straight from the image (zero copy: for an image in a dataspace, the pages of that
//! dataspace); everything else (writable data, the partial pages at segment edges, .bss) goes to
//! fresh zeroed pages the backend provides, filled from the file here.
//!
//! Used by lib/spawn, which starts programs for root (backend: root's physical-memory window and
//! the boot archive) and for any other task (e.g. the image attached read-only through its region
//! manager, fresh pages from an anonymous mem dataspace). Stack, environment and thread start are
//! lib/spawn's.
//!
//! Pure logic, no system calls: it touches only the image bytes and the pages the backend gives
//! it. Host-tested.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;

pub const PAGE: u64 = 4096;
/// Rights bits (the values of `sawmill_abi::map`).
pub const R: u64 = 1;
pub const W: u64 = 2;
pub const X: u64 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadError {
    NotElf,
    /// Program headers or a segment outside the file, or a segment outside `limit`.
    BadSegment,
    /// The backend failed (no memory, mapping refused).
    Backend(&'static str),
}

impl LoadError {
    pub fn text(&self) -> &'static str {
        match self {
            LoadError::NotElf => "not an ELF64 little-endian image",
            LoadError::BadSegment => "bad segment",
            LoadError::Backend(s) => s,
        }
    }
}

/// A loadable segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub memsz: u64,
    pub offset: u64,
    pub filesz: u64,
    /// R | W | X
    pub rights: u64,
}

/// How one page of the new task comes about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PagePlan {
    /// Map page `file_off` (page aligned) of the image straight at `vaddr`.
    Direct {
        vaddr: u64,
        file_off: u64,
        rights: u64,
    },
    /// A fresh zeroed page at `vaddr` with `copies` (page offset, file offset, length) filled in.
    Fresh {
        vaddr: u64,
        rights: u64,
        copies: Vec<(u64, u64, u64)>,
    },
}

impl PagePlan {
    /// The page's address in the new task.
    pub fn vaddr(&self) -> u64 {
        match *self {
            PagePlan::Direct { vaddr, .. } | PagePlan::Fresh { vaddr, .. } => vaddr,
        }
    }
    /// Its rights (R | W | X).
    pub fn rights(&self) -> u64 {
        match *self {
            PagePlan::Direct { rights, .. } | PagePlan::Fresh { rights, .. } => rights,
        }
    }
}

/// The checked header: entry point and loadable segments.
pub fn segments(b: &[u8], limit: u64) -> Result<(u64, Vec<Segment>), LoadError> {
    if b.len() < 64 || &b[0..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Err(LoadError::NotElf);
    }
    let rd64 = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let entry = rd64(24);
    let phoff = rd64(32) as usize;
    let phnum = u16::from_le_bytes(b[56..58].try_into().unwrap()) as usize;
    if phoff.checked_add(phnum * 56).is_none_or(|e| e > b.len()) {
        return Err(LoadError::BadSegment);
    }
    let mut v = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * 56;
        let ty = u32::from_le_bytes(b[ph..ph + 4].try_into().unwrap());
        let fl = u32::from_le_bytes(b[ph + 4..ph + 8].try_into().unwrap());
        if ty != 1 {
            continue;
        }
        let (offset, vaddr, filesz, memsz) =
            (rd64(ph + 8), rd64(ph + 16), rd64(ph + 32), rd64(ph + 40));
        if offset
            .checked_add(filesz)
            .is_none_or(|e| e > b.len() as u64)
            || filesz > memsz
            || vaddr.checked_add(memsz).is_none_or(|e| e > limit)
        {
            return Err(LoadError::BadSegment);
        }
        let mut rights = R;
        if fl & 1 != 0 {
            rights |= X;
        }
        if fl & 2 != 0 {
            rights |= W;
        }
        v.push(Segment {
            vaddr,
            memsz,
            offset,
            filesz,
            rights,
        });
    }
    Ok((entry, v))
}

/// Plans every page of the image. `image_align`: the address of the image's byte 0 modulo a
/// page as the backend will map it (a page can only be mapped straight if the file offset and
/// the address agree modulo the page size). A page two segments share is planned once, fresh,
/// with the union of their rights.
pub fn plan(segs: &[Segment], image_align: u64) -> Vec<PagePlan> {
    let mut out: Vec<PagePlan> = Vec::new();
    for (si, s) in segs.iter().enumerate() {
        let mut page = s.vaddr & !(PAGE - 1);
        while page < s.vaddr + s.memsz {
            let shared = segs
                .iter()
                .enumerate()
                .any(|(j, t)| j != si && page < t.vaddr + t.memsz && t.vaddr < page + PAGE);
            let aligned = (image_align + s.offset) % PAGE == s.vaddr % PAGE;
            let whole = page >= s.vaddr && page + PAGE <= s.vaddr + s.filesz;
            if s.rights & W == 0 && aligned && !shared && whole {
                out.push(PagePlan::Direct {
                    vaddr: page,
                    file_off: s.offset + (page - s.vaddr),
                    rights: s.rights,
                });
            } else {
                let lo = page.max(s.vaddr);
                let hi = (page + PAGE).min(s.vaddr + s.filesz);
                let copy = if lo < hi {
                    Some((lo - page, s.offset + (lo - s.vaddr), hi - lo))
                } else {
                    None
                };
                match out
                    .iter_mut()
                    .find(|p| matches!(p, PagePlan::Fresh { vaddr, .. } if *vaddr == page))
                {
                    Some(PagePlan::Fresh { rights, copies, .. }) => {
                        *rights |= s.rights;
                        copies.extend(copy);
                    }
                    _ => out.push(PagePlan::Fresh {
                        vaddr: page,
                        rights: s.rights,
                        copies: copy.into_iter().collect(),
                    }),
                }
            }
            page += PAGE;
        }
    }
    out
}

/// Where the memory comes from and goes to.
pub trait Backend {
    /// Maps page `file_off` of the image at `vaddr` of the new task.
    fn map_image(&mut self, file_off: u64, vaddr: u64, rights: u64) -> Result<(), &'static str>;
    /// A fresh zeroed page, writable by the loader: its contents to fill.
    fn fresh(&mut self) -> Result<&mut [u8], &'static str>;
    /// Maps the page last returned by `fresh` at `vaddr` of the new task.
    fn map_fresh(&mut self, vaddr: u64, rights: u64) -> Result<(), &'static str>;
}

/// Loads `image` (mapped by the backend with byte 0 at an address `image_align` modulo a page)
/// into the new task. Segments must lie below `limit`. Returns the entry point.
pub fn load(
    image: &[u8],
    image_align: u64,
    limit: u64,
    b: &mut impl Backend,
) -> Result<u64, LoadError> {
    let (entry, segs) = segments(image, limit)?;
    apply(image, &plan(&segs, image_align), b)?;
    Ok(entry)
}

/// Carries out a page plan made by [`plan`] for `image`: maps the direct pages and fills and maps
/// the fresh ones through the backend. A copy the plan names outside the image is refused
/// ([`LoadError::BadSegment`]) before the page is filled, so a plan for another image cannot
/// read past this one.
pub fn apply(image: &[u8], pages: &[PagePlan], b: &mut impl Backend) -> Result<(), LoadError> {
    for p in pages {
        match p {
            &PagePlan::Direct {
                vaddr,
                file_off,
                rights,
            } => b
                .map_image(file_off, vaddr, rights)
                .map_err(LoadError::Backend)?,
            PagePlan::Fresh {
                vaddr,
                rights,
                copies,
            } => {
                let fits = |&(at, off, len): &(u64, u64, u64)| {
                    at.checked_add(len).is_some_and(|e| e <= PAGE)
                        && off
                            .checked_add(len)
                            .is_some_and(|e| e <= image.len() as u64)
                };
                if !copies.iter().all(fits) {
                    return Err(LoadError::BadSegment);
                }
                let page = b.fresh().map_err(LoadError::Backend)?;
                for &(at, off, len) in copies {
                    page[at as usize..(at + len) as usize]
                        .copy_from_slice(&image[off as usize..(off + len) as usize]);
                }
                b.map_fresh(*vaddr, *rights).map_err(LoadError::Backend)?;
            }
        }
    }
    Ok(())
}

/// Building ELF images for host tests (this crate's and lib/spawn's: feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use alloc::vec;
    use alloc::vec::Vec;

    /// An ELF64 image of at least `size` bytes entering at `entry`, with the given program
    /// headers `(type, flags, offset, vaddr, filesz, memsz)` right after the ELF header.
    pub fn elf(entry: u64, phs: &[(u32, u32, u64, u64, u64, u64)], size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size.max(64 + 56 * phs.len())];
        b[0..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[24..32].copy_from_slice(&entry.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[56..58].copy_from_slice(&(phs.len() as u16).to_le_bytes());
        for (i, p) in phs.iter().enumerate() {
            let o = 64 + i * 56;
            b[o..o + 4].copy_from_slice(&p.0.to_le_bytes());
            b[o + 4..o + 8].copy_from_slice(&p.1.to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&p.2.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&p.3.to_le_bytes());
            b[o + 32..o + 40].copy_from_slice(&p.4.to_le_bytes());
            b[o + 40..o + 48].copy_from_slice(&p.5.to_le_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF entering at 0x201000 with the given program headers.
    fn elf(phs: &[(u32, u32, u64, u64, u64, u64)], size: usize) -> Vec<u8> {
        crate::testing::elf(0x201000, phs, size)
    }

    struct Fake {
        direct: Vec<(u64, u64, u64)>,
        fresh: Vec<(u64, u64, Vec<u8>)>,
        cur: Vec<u8>,
    }
    impl Backend for Fake {
        fn map_image(&mut self, off: u64, va: u64, r: u64) -> Result<(), &'static str> {
            self.direct.push((off, va, r));
            Ok(())
        }
        fn fresh(&mut self) -> Result<&mut [u8], &'static str> {
            self.cur = vec![0; 4096];
            Ok(&mut self.cur)
        }
        fn map_fresh(&mut self, va: u64, r: u64) -> Result<(), &'static str> {
            self.fresh.push((va, r, core::mem::take(&mut self.cur)));
            Ok(())
        }
    }

    #[test]
    fn text_maps_straight_data_is_copied() {
        // text: 2 whole pages at 0x200000 from offset 0x1000; data: 0x1800 bytes file + bss.
        let mut img = elf(
            &[
                (1, 5, 0x1000, 0x200000, 0x2000, 0x2000),
                (1, 6, 0x3000, 0x202000, 0x800, 0x1800),
            ],
            0x4000,
        );
        img[0x3000] = 0xaa;
        img[0x37ff] = 0xbb;
        let mut f = Fake {
            direct: vec![],
            fresh: vec![],
            cur: vec![],
        };
        assert_eq!(load(&img, 0, 0x1000_0000, &mut f), Ok(0x201000));
        assert_eq!(
            f.direct,
            vec![(0x1000, 0x200000, R | X), (0x2000, 0x201000, R | X)]
        );
        assert_eq!(f.fresh.len(), 2);
        assert_eq!((f.fresh[0].0, f.fresh[0].1), (0x202000, R | W));
        assert_eq!(
            (f.fresh[0].2[0], f.fresh[0].2[0x7ff], f.fresh[0].2[0x800]),
            (0xaa, 0xbb, 0)
        );
        assert_eq!(f.fresh[1].2, vec![0; 4096], "bss is zero");
    }

    #[test]
    fn shared_and_misaligned_pages_are_copied_once() {
        // Two segments sharing page 0x200000: text ends mid-page, rodata starts there.
        let img = elf(
            &[
                (1, 5, 0x0, 0x200000, 0x800, 0x800),
                (1, 4, 0x800, 0x200800, 0x900, 0x900),
            ],
            0x2000,
        );
        let p = plan(&segments(&img, 0x1000_0000).unwrap().1, 0);
        assert_eq!(p.len(), 2);
        let PagePlan::Fresh {
            vaddr,
            rights,
            copies,
        } = &p[0]
        else {
            panic!()
        };
        assert_eq!((*vaddr, *rights, copies.len()), (0x200000, R | X, 2));
        // Image mapped at an odd place: nothing can be mapped straight.
        let img = elf(&[(1, 5, 0x1000, 0x200000, 0x1000, 0x1000)], 0x2000);
        let p = plan(&segments(&img, 0x1000_0000).unwrap().1, 8);
        assert!(matches!(p[0], PagePlan::Fresh { .. }));
    }

    #[test]
    fn apply_refuses_a_plan_that_reads_past_the_image() {
        let img = elf(&[(1, 6, 0x100, 0x200100, 0x80, 0x80)], 0x200);
        let p = plan(&segments(&img, 0x1000_0000).unwrap().1, 0);
        let mut f = Fake {
            direct: vec![],
            fresh: vec![],
            cur: vec![],
        };
        assert_eq!(apply(&img, &p, &mut f), Ok(()));
        assert_eq!(f.fresh[0].2[0x100..0x180], img[0x100..0x180]);
        let mut f = Fake {
            direct: vec![],
            fresh: vec![],
            cur: vec![],
        };
        assert_eq!(apply(&img[..0x150], &p, &mut f), Err(LoadError::BadSegment));
        assert!(f.fresh.is_empty(), "nothing mapped");
    }

    #[test]
    fn bad_images() {
        assert_eq!(segments(b"nope", 1 << 30).err(), Some(LoadError::NotElf));
        let mut img = elf(&[(1, 5, 0x1000, 0x200000, 0x2000, 0x2000)], 0x2000);
        assert_eq!(
            segments(&img, 1 << 30).err(),
            Some(LoadError::BadSegment),
            "past the file"
        );
        img = elf(&[(1, 5, 0, 0x200000, 0x2000, 0x1000)], 0x2000);
        assert_eq!(
            segments(&img, 1 << 30).err(),
            Some(LoadError::BadSegment),
            "filesz > memsz"
        );
        img = elf(&[(1, 5, 0, 0x0fff_f000, 0x1000, 0x2000)], 0x2000);
        assert_eq!(
            segments(&img, 0x1000_0000).err(),
            Some(LoadError::BadSegment),
            "past the limit"
        );
        img = elf(&[(1, 5, 0, u64::MAX - 10, 0x10, 0x100)], 0x2000);
        assert_eq!(
            segments(&img, u64::MAX).err(),
            Some(LoadError::BadSegment),
            "wraps"
        );
        img = elf(&[], 64);
        img[56..58].copy_from_slice(&1000u16.to_le_bytes());
        assert_eq!(
            segments(&img, 1 << 30).err(),
            Some(LoadError::BadSegment),
            "headers past the file"
        );
        // Non-LOAD headers are skipped.
        img = elf(&[(6, 4, 0, 0, 0, 0)], 0x100);
        assert_eq!(segments(&img, 1 << 30).unwrap().1.len(), 0);
    }
}
