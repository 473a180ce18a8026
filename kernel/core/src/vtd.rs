//! Intel VT-d DMA remapping, as pure logic: register layout, capability decoding, root- and
//! context-table entries (legacy mode), second-level page tables and fault records.
//!
//! Nothing here touches hardware. Page-table frames are reached through [`Frames`] (the kernel's
//! direct map and frame pool; a map of vectors in the host tests), so the table walks that
//! decide what a device can reach are tested on the host. The kernel's `iommu` module does the
//! register accesses. Reference: Intel VT-d specification, chapters 9 (translation structure
//! formats), 10 (register descriptions) and 7 (fault reporting).

/// Register offsets in a unit's 4 KiB register page.
pub mod reg {
    pub const VER: u64 = 0x00;
    pub const CAP: u64 = 0x08;
    pub const ECAP: u64 = 0x10;
    pub const GCMD: u64 = 0x18;
    pub const GSTS: u64 = 0x1c;
    pub const RTADDR: u64 = 0x20;
    pub const CCMD: u64 = 0x28;
    pub const FSTS: u64 = 0x34;
    pub const FECTL: u64 = 0x38;
}

/// Bits of the global command and status registers.
pub mod gcmd {
    /// Translation enable (status: TES).
    pub const TE: u32 = 1 << 31;
    /// Set root table pointer (status: RTPS).
    pub const SRTP: u32 = 1 << 30;
    /// Write-buffer flush (status: WBFS, clear when done).
    pub const WBF: u32 = 1 << 27;
    /// Status bits that are persistent enables, to be written back with any new command (the
    /// one-shot bits SRTP, SFL, WBF, SIRTP must not be repeated).
    pub const PERSISTENT: u32 = 0x96ff_ffff;
}

/// Bits of the fault status register.
pub mod fsts {
    /// Primary fault overflow (write 1 to clear).
    pub const PFO: u32 = 1 << 0;
    /// Primary pending fault: some fault record holds a fault.
    pub const PPF: u32 = 1 << 1;
}

/// Context-command register: global context-cache invalidation (ICC | CIRG = global).
pub const CCMD_GLOBAL: u64 = 1 << 63 | 1 << 61;
/// IOTLB invalidate register: global invalidation (IVT | IIRG = global), draining reads and writes.
pub const IOTLB_GLOBAL: u64 = 1 << 63 | 1 << 60 | 1 << 49 | 1 << 48;
/// The busy bit of both invalidation registers (cleared by hardware when done).
pub const INVAL_BUSY: u64 = 1 << 63;

/// What a unit's capability registers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Page-table levels we use (3 = 39-bit, 4 = 48-bit input addresses).
    pub levels: u32,
    /// Number of domain ids.
    pub domains: u32,
    /// Offset of the first fault-recording register and how many there are.
    pub fault_offset: u64,
    pub fault_records: u32,
    /// Offset of the IOTLB invalidate register.
    pub iotlb_offset: u64,
    /// Writes must be flushed from the unit's write buffer (GCMD.WBF) after table updates.
    pub write_buffer_flush: bool,
    /// The unit caches not-present entries too (caching mode): adding an entry needs an
    /// invalidation as well.
    pub caching_mode: bool,
    /// The unit snoops the CPU caches on page walks; if not, updated entries must be flushed
    /// from the CPU cache (`clflush`).
    pub coherent: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapError {
    /// The unit supports neither 3- nor 4-level second-level tables.
    NoUsableWidth,
    /// Fault records or IOTLB register outside the unit's register page.
    BadOffsets,
}

/// Decodes CAP_REG and ECAP_REG.
pub fn decode_caps(cap: u64, ecap: u64) -> Result<Caps, CapError> {
    let sagaw = (cap >> 8) & 0x1f;
    // Prefer 3 levels (every user address we hand out as an IOVA is below 2^39 in practice,
    // and a shorter walk); 4 if that is all the unit offers.
    let levels = if sagaw & 0b010 != 0 {
        3
    } else if sagaw & 0b100 != 0 {
        4
    } else {
        return Err(CapError::NoUsableWidth);
    };
    let nd = (cap & 7) as u32;
    let fault_offset = ((cap >> 24) & 0x3ff) * 16;
    let fault_records = ((cap >> 40) & 0xff) as u32 + 1;
    let iotlb_offset = ((ecap >> 8) & 0x3ff) * 16 + 8;
    if fault_offset < 0x40
        || fault_offset + fault_records as u64 * 16 > 0x1000
        || iotlb_offset < 0x40
        || iotlb_offset + 8 > 0x1000
    {
        return Err(CapError::BadOffsets);
    }
    Ok(Caps {
        levels,
        domains: 1 << (4 + 2 * nd.min(6)),
        fault_offset,
        fault_records,
        iotlb_offset,
        write_buffer_flush: cap & (1 << 4) != 0,
        caching_mode: cap & (1 << 7) != 0,
        coherent: ecap & 1 != 0,
    })
}

/// Highest input address + 1 a table of `levels` levels translates.
pub fn iova_limit(levels: u32) -> u64 {
    1 << (12 + 9 * levels)
}

/// A root-table entry (16 bytes: low, high) pointing at a context table.
pub fn root_entry(context_table: u64) -> [u64; 2] {
    [context_table & !0xfff | 1, 0]
}

/// A context entry (16 bytes) that translates a device's DMA through the second-level table at
/// `table` with `levels` levels, tagged with domain id `did`. Faults are recorded (FPD clear).
pub fn context_entry(table: u64, levels: u32, did: u16) -> [u64; 2] {
    let aw = (levels - 2) as u64; // 1: 39-bit (3 levels), 2: 48-bit (4 levels)
    [table & !0xfff | 1, aw | (did as u64) << 8]
}

/// Second-level page-table entry bits.
pub mod sl {
    pub const READ: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    pub const ADDR: u64 = 0x000f_ffff_ffff_f000;
}

/// The index into the table at `level` (1 = last) for `iova`.
pub fn sl_index(iova: u64, level: u32) -> usize {
    ((iova >> (12 + 9 * (level - 1))) & 511) as usize
}

/// Page-table frames: how table walks reach memory.
pub trait Frames {
    fn get(&self, frame: u64, index: usize) -> u64;
    fn set(&mut self, frame: u64, index: usize, value: u64);
    /// A zeroed frame, or None when out of memory (or quota).
    fn alloc(&mut self) -> Option<u64>;
    fn free(&mut self, frame: u64);
}

/// Maps the 4 KiB page at `iova` to `pa` in the table rooted at `top`, readable, and writable if
/// `write`. An existing entry is replaced. Returns false if a table frame could not be had.
pub fn sl_map(f: &mut dyn Frames, top: u64, levels: u32, iova: u64, pa: u64, write: bool) -> bool {
    let mut t = top;
    for level in (2..=levels).rev() {
        let i = sl_index(iova, level);
        let e = f.get(t, i);
        t = if e & (sl::READ | sl::WRITE) == 0 {
            let Some(n) = f.alloc() else { return false };
            // Intermediate entries allow both; the leaf decides.
            f.set(t, i, n | sl::READ | sl::WRITE);
            n
        } else {
            e & sl::ADDR
        };
    }
    let leaf = pa & sl::ADDR | sl::READ | if write { sl::WRITE } else { 0 };
    f.set(t, sl_index(iova, 1), leaf);
    true
}

/// Removes the mapping of the 4 KiB page at `iova`; returns whether there was one. Emptied
/// intermediate tables stay (they are freed with the whole table).
pub fn sl_unmap(f: &mut dyn Frames, top: u64, levels: u32, iova: u64) -> bool {
    let mut t = top;
    for level in (2..=levels).rev() {
        let e = f.get(t, sl_index(iova, level));
        if e & (sl::READ | sl::WRITE) == 0 {
            return false;
        }
        t = e & sl::ADDR;
    }
    let i = sl_index(iova, 1);
    let was = f.get(t, i) & (sl::READ | sl::WRITE) != 0;
    f.set(t, i, 0);
    was
}

/// What the table says for `iova`: (physical address, writable).
pub fn sl_translate(f: &dyn Frames, top: u64, levels: u32, iova: u64) -> Option<(u64, bool)> {
    let mut t = top;
    for level in (1..=levels).rev() {
        let e = f.get(t, sl_index(iova, level));
        if e & (sl::READ | sl::WRITE) == 0 {
            return None;
        }
        if level == 1 {
            return Some(((e & sl::ADDR) | (iova & 0xfff), e & sl::WRITE != 0));
        }
        t = e & sl::ADDR;
    }
    None
}

/// Frees every frame of the table rooted at `top`, the top included. Returns how many.
pub fn sl_free(f: &mut dyn Frames, top: u64, levels: u32) -> u64 {
    let mut n = 1;
    if levels > 1 {
        for i in 0..512 {
            let e = f.get(top, i);
            if e & (sl::READ | sl::WRITE) != 0 {
                n += sl_free(f, e & sl::ADDR, levels - 1);
            }
        }
    }
    f.free(top);
    n
}

/// A decoded primary fault record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Requester: bus << 8 | dev << 3 | fn.
    pub source: u16,
    /// The page the device tried to reach.
    pub addr: u64,
    pub write: bool,
    pub reason: u8,
}

/// Decodes a 128-bit fault-recording register (low, high); None if its F bit is clear.
pub fn decode_fault(lo: u64, hi: u64) -> Option<Fault> {
    if hi & (1 << 63) == 0 {
        return None;
    }
    Some(Fault {
        source: hi as u16,
        addr: lo & !0xfff,
        // T: 1 = read request, 0 = write request.
        write: hi & (1 << 62) == 0,
        reason: (hi >> 32) as u8,
    })
}

/// What a fault reason code means (VT-d spec, appendix A, non-recoverable fault reasons).
pub fn reason_text(r: u8) -> &'static str {
    match r {
        1 => "root entry not present (device blocked)",
        2 => "context entry not present (device blocked)",
        3 => "invalid context entry",
        4 => "address beyond the domain's width",
        5 => "page not writable by the device or not shared with it",
        6 => "page not readable by the device or not shared with it",
        7 => "page-table access failed",
        8 => "root-table access failed",
        9 => "context-table access failed",
        10 => "reserved bits in a root entry",
        11 => "reserved bits in a context entry",
        12 => "reserved bits in a page-table entry",
        13 => "translation type blocked",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::collections::BTreeMap;
    use std::vec;
    use std::vec::Vec;

    /// Frames in a map, with an allocation limit, counting live frames.
    struct Mem {
        frames: BTreeMap<u64, Vec<u64>>,
        next: u64,
        limit: usize,
    }
    impl Mem {
        fn new(limit: usize) -> Mem {
            Mem {
                frames: BTreeMap::new(),
                next: 0x10_0000,
                limit,
            }
        }
    }
    impl Frames for Mem {
        fn get(&self, frame: u64, index: usize) -> u64 {
            self.frames[&frame][index]
        }
        fn set(&mut self, frame: u64, index: usize, value: u64) {
            self.frames.get_mut(&frame).unwrap()[index] = value;
        }
        fn alloc(&mut self) -> Option<u64> {
            if self.frames.len() >= self.limit {
                return None;
            }
            let f = self.next;
            self.next += 0x1000;
            self.frames.insert(f, vec![0; 512]);
            Some(f)
        }
        fn free(&mut self, frame: u64) {
            assert!(
                self.frames.remove(&frame).is_some(),
                "double free {frame:#x}"
            );
        }
    }

    #[test]
    fn caps_like_qemu() {
        // QEMU 7.2, aw-bits=39: ND=6, SAGAW=39-bit, FRO=0x22 (offset 0x220), NFR=0, IRO=0xf (IOTLB at 0xf8).
        let cap = 6 | 0b010 << 8 | 0x22 << 24 | 38 << 16;
        let ecap = 0xf << 8;
        let c = decode_caps(cap, ecap).unwrap();
        assert_eq!(c.levels, 3);
        assert_eq!(c.domains, 65536);
        assert_eq!(c.fault_offset, 0x220);
        assert_eq!(c.fault_records, 1);
        assert_eq!(c.iotlb_offset, 0xf8);
        assert!(!c.caching_mode && !c.write_buffer_flush && !c.coherent);
        // 48-bit only units get 4 levels.
        assert_eq!(
            decode_caps(0b100 << 8 | 0x22 << 24, ecap).unwrap().levels,
            4
        );
        assert_eq!(
            decode_caps(0b001 << 8 | 0x22 << 24, ecap),
            Err(CapError::NoUsableWidth)
        );
        // Fault records running off the register page; IOTLB register inside the fixed ones.
        assert_eq!(
            decode_caps(0b010 << 8 | 0xff << 24 | 0xff << 40, ecap),
            Err(CapError::BadOffsets)
        );
        assert_eq!(
            decode_caps(0b010 << 8 | 0x22 << 24, 0),
            Err(CapError::BadOffsets)
        );
        assert_eq!(iova_limit(3), 1 << 39);
        assert_eq!(iova_limit(4), 1 << 48);
    }

    #[test]
    fn entries_encode_as_the_spec_says() {
        assert_eq!(root_entry(0x12_3000), [0x12_3001, 0]);
        assert_eq!(context_entry(0x45_6000, 3, 7), [0x45_6001, 1 | 7 << 8]);
        assert_eq!(
            context_entry(0x45_6000, 4, 0x1ff),
            [0x45_6001, 2 | 0x1ff << 8]
        );
    }

    #[test]
    fn map_translate_unmap_free() {
        for levels in [3, 4] {
            let mut m = Mem::new(64);
            let top = m.alloc().unwrap();
            assert!(sl_map(&mut m, top, levels, 0x2000_0000, 0x7_7000, true));
            assert!(sl_map(&mut m, top, levels, 0x2000_1000, 0x9_9000, false));
            assert_eq!(
                sl_translate(&m, top, levels, 0x2000_0123),
                Some((0x7_7123, true))
            );
            assert_eq!(
                sl_translate(&m, top, levels, 0x2000_1fff),
                Some((0x9_9fff, false))
            );
            assert_eq!(sl_translate(&m, top, levels, 0x2000_2000), None);
            assert_eq!(sl_translate(&m, top, levels, 0), None);
            // Neighbouring pages share tables: top + one table per lower level.
            assert_eq!(m.frames.len(), levels as usize);
            // Replacing keeps one entry.
            assert!(sl_map(&mut m, top, levels, 0x2000_0000, 0x8_8000, false));
            assert_eq!(
                sl_translate(&m, top, levels, 0x2000_0000),
                Some((0x8_8000, false))
            );
            assert!(sl_unmap(&mut m, top, levels, 0x2000_0000));
            assert!(!sl_unmap(&mut m, top, levels, 0x2000_0000));
            assert!(!sl_unmap(&mut m, top, levels, 0x40_0000_0000 - 0x1000));
            assert_eq!(sl_translate(&m, top, levels, 0x2000_0000), None);
            assert_eq!(
                sl_translate(&m, top, levels, 0x2000_1000),
                Some((0x9_9000, false))
            );
            // A far address needs a separate path.
            assert!(sl_map(&mut m, top, levels, 0x7f_ffff_f000, 0x1000, true));
            let live = m.frames.len() as u64;
            assert_eq!(sl_free(&mut m, top, levels), live);
            assert!(m.frames.is_empty());
        }
    }

    #[test]
    fn map_fails_cleanly_without_frames() {
        let mut m = Mem::new(2);
        let top = m.alloc().unwrap();
        assert!(!sl_map(&mut m, top, 3, 0x1000, 0x5000, true));
        assert_eq!(sl_translate(&m, top, 3, 0x1000), None);
        // What was allocated before the failure is still reachable and freed with the table.
        assert_eq!(sl_free(&mut m, top, 3), 2);
        assert!(m.frames.is_empty());
    }

    #[test]
    fn fault_records() {
        // QEMU: a write by 00:03.0 to 0x1234_5000, reason 5.
        let hi = 1 << 63 | 5 << 32 | 0x18;
        let f = decode_fault(0x1234_5000, hi).unwrap();
        assert_eq!(
            f,
            Fault {
                source: 0x18,
                addr: 0x1234_5000,
                write: true,
                reason: 5
            }
        );
        let r = decode_fault(0x1234_5678, hi | 1 << 62).unwrap();
        assert!(!r.write);
        assert_eq!(r.addr, 0x1234_5000);
        assert_eq!(decode_fault(0x1234_5000, hi & !(1 << 63)), None);
        assert!(reason_text(2).contains("blocked"));
        assert_eq!(reason_text(200), "other");
    }
}
