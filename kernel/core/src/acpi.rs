//! ACPI table discovery and the DMAR table (Intel VT-d DMA remapping reporting), as pure parsing.
//!
//! The kernel reads firmware memory through [`PhysRead`] (its direct map); host tests give a
//! fake memory. Nothing here trusts the firmware: every length, offset and checksum is checked,
//! and a malformed table is an [`AcpiError`], never a panic or an out-of-bounds read. Only what
//! the kernel needs is decoded: the RSDP, the RSDT/XSDT to find a table by signature, and the
//! DMAR's hardware units (DRHD) with their device scopes. Reserved-memory regions (RMRR) are
//! counted but not used: the kernel gives no device an identity mapping (see
//! docs/ARCHITECTURE.md, "IOMMU").

/// Reads physical memory (firmware tables). Returns false if `[pa, pa + buf.len())` cannot be
/// read.
pub trait PhysRead {
    fn read(&self, pa: u64, buf: &mut [u8]) -> bool;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcpiError {
    /// A structure does not fit in the memory or table that should hold it.
    Truncated,
    /// A checksum does not sum to zero.
    Checksum,
    /// A signature or revision is not what it must be.
    BadSignature,
    /// A length field is impossible (smaller than its header, or beyond the limit we read).
    BadLength,
    /// Memory the tables point at could not be read.
    Unreadable,
}

/// The largest table we read (the DMAR of a big server is a few KiB).
pub const MAX_TABLE: usize = 64 * 1024;
/// Size of the common system description table header.
pub const SDT_HEADER: usize = 36;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn sums_to_zero(b: &[u8]) -> bool {
    b.iter().fold(0u8, |a, &x| a.wrapping_add(x)) == 0
}

/// Where the table of tables is: an XSDT (64-bit entries) or, for ACPI 1.0, an RSDT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootTable {
    pub addr: u64,
    pub xsdt: bool,
}

/// Decodes a Root System Description Pointer (20 bytes for revision 0, 36 for 2 and later).
pub fn parse_rsdp(b: &[u8]) -> Result<RootTable, AcpiError> {
    if b.len() < 20 {
        return Err(AcpiError::Truncated);
    }
    if &b[..8] != b"RSD PTR " {
        return Err(AcpiError::BadSignature);
    }
    if !sums_to_zero(&b[..20]) {
        return Err(AcpiError::Checksum);
    }
    let rev = b[15];
    if rev >= 2 {
        let len = u32_at(b, 20).ok_or(AcpiError::Truncated)? as usize;
        if len < 36 {
            return Err(AcpiError::BadLength);
        }
        let ext = b.get(..len).ok_or(AcpiError::Truncated)?;
        if !sums_to_zero(ext) {
            return Err(AcpiError::Checksum);
        }
        let x = u64_at(b, 24).ok_or(AcpiError::Truncated)?;
        if x != 0 {
            return Ok(RootTable {
                addr: x,
                xsdt: true,
            });
        }
    }
    let r = u32_at(b, 16).ok_or(AcpiError::Truncated)? as u64;
    if r == 0 {
        return Err(AcpiError::BadLength);
    }
    Ok(RootTable {
        addr: r,
        xsdt: false,
    })
}

/// Finds an RSDP by scanning `area` (firmware memory starting at physical `base`) on 16-byte
/// boundaries, as firmware places it in the BIOS area 0xE0000..0x100000. Returns its address.
pub fn scan_rsdp(area: &[u8], base: u64) -> Option<u64> {
    (0..area.len().saturating_sub(19))
        .step_by(16)
        .find(|&i| parse_rsdp(&area[i..(i + 36).min(area.len())]).is_ok())
        .map(|i| base + i as u64)
}

/// The RSDP a multiboot2 loader copied into its information block `mbi` (the whole block, from
/// its `total_size` word): tag 15 (ACPI 2.0 RSDP) is preferred to tag 14 (ACPI 1.0).
pub fn multiboot2_rsdp(mbi: &[u8]) -> Option<RootTable> {
    use crate::multiboot2::{tags, TAG_ACPI_NEW, TAG_ACPI_OLD};
    let mut best = None;
    for (kind, payload) in tags(mbi) {
        if kind == TAG_ACPI_OLD || kind == TAG_ACPI_NEW {
            if let Ok(r) = parse_rsdp(payload) {
                if kind == TAG_ACPI_NEW || best.is_none() {
                    best = Some(r);
                }
            }
        }
    }
    best
}

/// Reads the whole table at `pa` into `buf`, checking its header, length and checksum. Returns
/// the table's length.
pub fn read_table(mem: &dyn PhysRead, pa: u64, buf: &mut [u8]) -> Result<usize, AcpiError> {
    if buf.len() < SDT_HEADER || !mem.read(pa, &mut buf[..SDT_HEADER]) {
        return Err(AcpiError::Unreadable);
    }
    let len = u32_at(buf, 4).ok_or(AcpiError::Truncated)? as usize;
    if len < SDT_HEADER || len > buf.len() {
        return Err(AcpiError::BadLength);
    }
    if !mem.read(pa, &mut buf[..len]) {
        return Err(AcpiError::Unreadable);
    }
    if !sums_to_zero(&buf[..len]) {
        return Err(AcpiError::Checksum);
    }
    Ok(len)
}

/// Finds the table with signature `sig` through the root table; reads it into `buf` and returns
/// its length, or `Ok(None)` if the firmware has no such table. `buf` is also used to hold the
/// root table while it is searched.
pub fn find_table(
    mem: &dyn PhysRead,
    root: RootTable,
    sig: &[u8; 4],
    buf: &mut [u8],
) -> Result<Option<usize>, AcpiError> {
    let len = read_table(mem, root.addr, buf)?;
    let want: &[u8] = if root.xsdt { b"XSDT" } else { b"RSDT" };
    if &buf[..4] != want {
        return Err(AcpiError::BadSignature);
    }
    let width = if root.xsdt { 8 } else { 4 };
    let n = (len - SDT_HEADER) / width;
    for i in 0..n {
        // The root table is re-read for each entry: `buf` is reused for the candidate tables.
        let mut e = [0u8; 8];
        if !mem.read(root.addr + (SDT_HEADER + i * width) as u64, &mut e[..width]) {
            return Err(AcpiError::Unreadable);
        }
        let pa = u64::from_le_bytes(e);
        let mut sig_here = [0u8; 4];
        if pa == 0 || !mem.read(pa, &mut sig_here) {
            continue;
        }
        if &sig_here == sig {
            return read_table(mem, pa, buf).map(Some);
        }
    }
    Ok(None)
}

/// How many hardware units and device scopes per unit we keep.
pub const MAX_UNITS: usize = 4;
pub const MAX_SCOPES: usize = 8;

/// One device a DRHD names explicitly: a PCI endpoint or bridge at `bus:dev.fn` (only the
/// first hop of a path is kept: a deeper path is behind a bridge and is covered by it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// 1 = PCI endpoint, 2 = PCI sub-hierarchy, 3 = I/O APIC, 4 = HPET, 5 = ACPI namespace device.
    pub kind: u8,
    pub bus: u8,
    pub devfn: u8,
}

/// A DMA-remapping hardware unit (DRHD structure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unit {
    /// Physical address of its 4 KiB register page.
    pub base: u64,
    pub segment: u16,
    /// The unit covers every PCI device of its segment not claimed by another unit.
    pub include_all: bool,
    pub scopes: [Scope; MAX_SCOPES],
    pub nscopes: usize,
}

/// What the DMAR table says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dmar {
    /// Host address width in bits.
    pub haw: u8,
    /// bit 0: interrupt remapping supported; bit 1: x2APIC opt-out; bit 2: DMA control opt-in.
    pub flags: u8,
    pub units: [Unit; MAX_UNITS],
    pub nunits: usize,
    /// Reserved-memory region reports (RMRR), counted only.
    pub rmrrs: usize,
}

/// Decodes a DMAR table (the whole table, header included).
pub fn parse_dmar(t: &[u8]) -> Result<Dmar, AcpiError> {
    if t.len() < 48 {
        return Err(AcpiError::Truncated);
    }
    if &t[..4] != b"DMAR" {
        return Err(AcpiError::BadSignature);
    }
    let len = u32_at(t, 4).ok_or(AcpiError::Truncated)? as usize;
    if len < 48 || len > t.len() {
        return Err(AcpiError::BadLength);
    }
    if !sums_to_zero(&t[..len]) {
        return Err(AcpiError::Checksum);
    }
    let mut d = Dmar {
        haw: t[36].saturating_add(1),
        flags: t[37],
        ..Dmar::default()
    };
    let mut off = 48;
    while off < len {
        let kind = u16_at(t, off).ok_or(AcpiError::Truncated)?;
        let slen = u16_at(t, off + 2).ok_or(AcpiError::Truncated)? as usize;
        if slen < 4 || off + slen > len {
            return Err(AcpiError::BadLength);
        }
        let s = &t[off..off + slen];
        match kind {
            0 => {
                if slen < 16 {
                    return Err(AcpiError::BadLength);
                }
                let mut u = Unit {
                    base: u64_at(s, 8).ok_or(AcpiError::Truncated)?,
                    segment: u16_at(s, 6).ok_or(AcpiError::Truncated)?,
                    include_all: s[4] & 1 != 0,
                    ..Unit::default()
                };
                if u.base & 0xfff != 0 || u.base == 0 {
                    return Err(AcpiError::BadLength);
                }
                parse_scopes(&s[16..], &mut u)?;
                if d.nunits < MAX_UNITS {
                    d.units[d.nunits] = u;
                    d.nunits += 1;
                }
            }
            1 => d.rmrrs += 1,
            _ => {}
        }
        off += slen;
    }
    Ok(d)
}

fn parse_scopes(mut b: &[u8], u: &mut Unit) -> Result<(), AcpiError> {
    while !b.is_empty() {
        if b.len() < 6 {
            return Err(AcpiError::Truncated);
        }
        let slen = b[1] as usize;
        if slen < 6 || slen > b.len() || slen & 1 != 0 {
            return Err(AcpiError::BadLength);
        }
        if slen >= 8 && u.nscopes < MAX_SCOPES {
            u.scopes[u.nscopes] = Scope {
                kind: b[0],
                bus: b[5],
                devfn: b[6] << 3 | (b[7] & 7),
            };
            u.nscopes += 1;
        }
        b = &b[slen..];
    }
    Ok(())
}

impl Dmar {
    /// The unit that translates DMA of PCI device `bus:devfn` on segment 0: one that names it
    /// (or a bridge on its bus) in a scope, else the segment's catch-all unit.
    pub fn unit_for(&self, bus: u8, devfn: u8) -> Option<usize> {
        let units = &self.units[..self.nunits];
        let named = units.iter().position(|u| {
            u.segment == 0
                && u.scopes[..u.nscopes]
                    .iter()
                    .any(|s| (s.kind == 1 || s.kind == 2) && s.bus == bus && s.devfn == devfn)
        });
        named.or_else(|| units.iter().position(|u| u.segment == 0 && u.include_all))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    fn fix(t: &mut [u8], at: usize) {
        t[at] = 0;
        let s = t.iter().fold(0u8, |a, &x| a.wrapping_add(x));
        t[at] = 0u8.wrapping_sub(s);
    }

    fn rsdp_v2(xsdt: u64) -> Vec<u8> {
        let mut b = vec![0u8; 36];
        b[..8].copy_from_slice(b"RSD PTR ");
        b[15] = 2;
        b[16..20].copy_from_slice(&0x1234u32.to_le_bytes());
        b[20..24].copy_from_slice(&36u32.to_le_bytes());
        b[24..32].copy_from_slice(&xsdt.to_le_bytes());
        let s = b[..20].iter().fold(0u8, |a, &x| a.wrapping_add(x));
        b[8] = 0u8.wrapping_sub(s);
        fix(&mut b[..], 32);
        b
    }

    fn sdt(sig: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; SDT_HEADER];
        t[..4].copy_from_slice(sig);
        t.extend_from_slice(body);
        let len = t.len() as u32;
        t[4..8].copy_from_slice(&len.to_le_bytes());
        fix(&mut t, 9);
        t
    }

    fn drhd(flags: u8, base: u64, scopes: &[[u8; 8]]) -> Vec<u8> {
        let mut s = vec![0u8; 16];
        s[0..2].copy_from_slice(&0u16.to_le_bytes());
        s[4] = flags;
        s[8..16].copy_from_slice(&base.to_le_bytes());
        for sc in scopes {
            s.extend_from_slice(sc);
        }
        let l = s.len() as u16;
        s[2..4].copy_from_slice(&l.to_le_bytes());
        s
    }

    fn dmar(structs: &[Vec<u8>]) -> Vec<u8> {
        let mut body = vec![0u8; 12];
        body[0] = 38; // host address width 39
        body[1] = 1;
        for s in structs {
            body.extend_from_slice(s);
        }
        sdt(b"DMAR", &body)
    }

    /// Physical memory made of (address, bytes) pieces.
    struct Mem(Vec<(u64, Vec<u8>)>);
    impl PhysRead for Mem {
        fn read(&self, pa: u64, buf: &mut [u8]) -> bool {
            for (a, b) in &self.0 {
                if pa >= *a && pa + buf.len() as u64 <= *a + b.len() as u64 {
                    let o = (pa - a) as usize;
                    buf.copy_from_slice(&b[o..o + buf.len()]);
                    return true;
                }
            }
            false
        }
    }

    #[test]
    fn rsdp_versions_and_checks() {
        let b = rsdp_v2(0x7fe_0000);
        assert_eq!(
            parse_rsdp(&b),
            Ok(RootTable {
                addr: 0x7fe_0000,
                xsdt: true
            })
        );
        // Revision 2 with a zero XSDT address falls back to the RSDT.
        let b0 = rsdp_v2(0);
        assert_eq!(
            parse_rsdp(&b0),
            Ok(RootTable {
                addr: 0x1234,
                xsdt: false
            })
        );
        let mut bad = b.clone();
        bad[10] ^= 1;
        assert_eq!(parse_rsdp(&bad), Err(AcpiError::Checksum));
        let mut sig = b.clone();
        sig[0] = b'X';
        assert_eq!(parse_rsdp(&sig), Err(AcpiError::BadSignature));
        assert_eq!(parse_rsdp(&b[..19]), Err(AcpiError::Truncated));
        // Revision 2 claiming more bytes than there are.
        let mut long = b.clone();
        long[20..24].copy_from_slice(&4096u32.to_le_bytes());
        let s = long[..20].iter().fold(0u8, |a, &x| a.wrapping_add(x));
        long[8] = long[8].wrapping_sub(s);
        assert_eq!(parse_rsdp(&long), Err(AcpiError::Truncated));
    }

    #[test]
    fn rsdp_scan_finds_aligned_copy_only() {
        let mut area = vec![0u8; 0x200];
        let r = rsdp_v2(0x5000);
        area[0x105..0x105 + 36].copy_from_slice(&r);
        assert_eq!(
            scan_rsdp(&area, 0xe0000),
            None,
            "unaligned copies are not RSDPs"
        );
        area[0x140..0x140 + 36].copy_from_slice(&r);
        assert_eq!(scan_rsdp(&area, 0xe0000), Some(0xe0140));
    }

    fn mb_tag(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&kind.to_le_bytes());
        t.extend_from_slice(&(8 + body.len() as u32).to_le_bytes());
        t.extend_from_slice(body);
        while t.len() % 8 != 0 {
            t.push(0);
        }
        t
    }

    fn mbi(tags: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![0u8; 8];
        for t in tags {
            b.extend_from_slice(t);
        }
        b.extend_from_slice(&mb_tag(0, &[]));
        let n = b.len() as u32;
        b[..4].copy_from_slice(&n.to_le_bytes());
        b
    }

    #[test]
    fn multiboot2_acpi_tags() {
        let v2 = rsdp_v2(0x7fe_1000);
        let mut v1 = rsdp_v2(0);
        v1.truncate(20);
        v1[15] = 0;
        let s = v1[..20].iter().fold(0u8, |a, &x| a.wrapping_add(x));
        v1[8] = v1[8].wrapping_sub(s);
        let cmdline = mb_tag(1, b"trace=rejected\0");
        // Tag 15 wins whatever the order; tag 14 alone is used; neither: none.
        let b = mbi(&[cmdline.clone(), mb_tag(14, &v1), mb_tag(15, &v2)]);
        assert_eq!(multiboot2_rsdp(&b).map(|r| r.addr), Some(0x7fe_1000));
        let b = mbi(&[mb_tag(15, &v2), mb_tag(14, &v1)]);
        assert_eq!(multiboot2_rsdp(&b).map(|r| r.addr), Some(0x7fe_1000));
        let b = mbi(&[mb_tag(14, &v1)]);
        assert_eq!(
            multiboot2_rsdp(&b),
            Some(RootTable {
                addr: 0x1234,
                xsdt: false
            })
        );
        assert_eq!(multiboot2_rsdp(&mbi(&[cmdline])), None);
        // A corrupt copy is skipped; a tag running past the block or of size 0 ends the walk.
        let mut bad = v2.clone();
        bad[3] ^= 1;
        assert_eq!(multiboot2_rsdp(&mbi(&[mb_tag(15, &bad)])), None);
        let mut long = mbi(&[mb_tag(15, &v2)]);
        long[12..16].copy_from_slice(&4000u32.to_le_bytes());
        assert_eq!(multiboot2_rsdp(&long), None);
        let mut zero = mbi(&[mb_tag(15, &v2)]);
        zero[12..16].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(multiboot2_rsdp(&zero), None);
        assert_eq!(multiboot2_rsdp(&[1, 2]), None);
        // total_size larger than the bytes given is clamped.
        let mut big = mbi(&[mb_tag(15, &v2)]);
        big[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(multiboot2_rsdp(&big).map(|r| r.addr), Some(0x7fe_1000));
    }

    #[test]
    fn finds_dmar_through_xsdt_and_rsdt() {
        let d = dmar(&[drhd(1, 0xfed9_0000, &[])]);
        let facp = sdt(b"FACP", &[0; 20]);
        let mut xb = Vec::new();
        xb.extend_from_slice(&0x9000u64.to_le_bytes());
        xb.extend_from_slice(&0xa000u64.to_le_bytes());
        let xsdt = sdt(b"XSDT", &xb);
        let mut rb = Vec::new();
        rb.extend_from_slice(&0x9000u32.to_le_bytes());
        rb.extend_from_slice(&0xa000u32.to_le_bytes());
        let rsdt = sdt(b"RSDT", &rb);
        let mem = Mem(vec![
            (0x8000, xsdt),
            (0x8800, rsdt),
            (0x9000, facp),
            (0xa000, d.clone()),
        ]);
        let mut buf = vec![0u8; MAX_TABLE];
        for root in [
            RootTable {
                addr: 0x8000,
                xsdt: true,
            },
            RootTable {
                addr: 0x8800,
                xsdt: false,
            },
        ] {
            let n = find_table(&mem, root, b"DMAR", &mut buf).unwrap().unwrap();
            assert_eq!(&buf[..n], &d[..]);
            assert_eq!(find_table(&mem, root, b"HPET", &mut buf), Ok(None));
        }
        // An RSDT where an XSDT was promised.
        let wrong = RootTable {
            addr: 0x8800,
            xsdt: true,
        };
        assert_eq!(
            find_table(&mem, wrong, b"DMAR", &mut buf),
            Err(AcpiError::BadSignature)
        );
        // A root table pointing nowhere.
        let nowhere = RootTable {
            addr: 0x100_0000,
            xsdt: true,
        };
        assert_eq!(
            find_table(&mem, nowhere, b"DMAR", &mut buf),
            Err(AcpiError::Unreadable)
        );
    }

    #[test]
    fn table_length_beyond_buffer_or_memory_is_refused() {
        let mut t = sdt(b"DMAR", &[0; 12]);
        t[4..8].copy_from_slice(&0x10_0000u32.to_le_bytes());
        let mem = Mem(vec![(0x1000, t)]);
        let mut buf = vec![0u8; 4096];
        assert_eq!(
            read_table(&mem, 0x1000, &mut buf),
            Err(AcpiError::BadLength)
        );
        let mut t2 = sdt(b"DMAR", &[0; 12]);
        t2[4..8].copy_from_slice(&100u32.to_le_bytes());
        let mem2 = Mem(vec![(0x1000, t2)]);
        assert_eq!(
            read_table(&mem2, 0x1000, &mut buf),
            Err(AcpiError::Unreadable)
        );
        let mut t3 = sdt(b"DMAR", &[0; 12]);
        t3[4..8].copy_from_slice(&10u32.to_le_bytes());
        let mem3 = Mem(vec![(0x1000, t3)]);
        assert_eq!(
            read_table(&mem3, 0x1000, &mut buf),
            Err(AcpiError::BadLength)
        );
    }

    #[test]
    fn dmar_like_qemu() {
        // QEMU's intel-iommu: one catch-all unit (plus an I/O APIC scope).
        let ioapic = [3, 8, 0, 0, 0, 0xff, 0, 0];
        let t = dmar(&[drhd(1, 0xfed9_0000, &[ioapic])]);
        let d = parse_dmar(&t).unwrap();
        assert_eq!(d.haw, 39);
        assert_eq!(d.nunits, 1);
        assert_eq!(d.units[0].base, 0xfed9_0000);
        assert!(d.units[0].include_all);
        assert_eq!(d.units[0].nscopes, 1);
        assert_eq!(d.units[0].scopes[0].kind, 3);
        assert_eq!(d.unit_for(0, 3 << 3), Some(0));
    }

    #[test]
    fn dmar_named_device_prefers_its_unit() {
        let gpu = [1, 8, 0, 0, 0, 0, 2, 0]; // 00:02.0
        let t = dmar(&[drhd(0, 0xfed9_1000, &[gpu]), drhd(1, 0xfed9_0000, &[])]);
        let d = parse_dmar(&t).unwrap();
        assert_eq!(d.nunits, 2);
        assert_eq!(d.unit_for(0, 2 << 3), Some(0));
        assert_eq!(d.unit_for(0, 3 << 3), Some(1));
        assert_eq!(d.unit_for(1, 0), Some(1));
        let only_named = parse_dmar(&dmar(&[drhd(0, 0xfed9_1000, &[gpu])])).unwrap();
        assert_eq!(only_named.unit_for(0, 3 << 3), None);
    }

    #[test]
    fn malformed_dmar_tables_are_errors() {
        let good = dmar(&[drhd(1, 0xfed9_0000, &[])]);
        assert!(parse_dmar(&good).is_ok());
        // Checksum.
        let mut c = good.clone();
        c[40] ^= 0x55;
        assert_eq!(parse_dmar(&c), Err(AcpiError::Checksum));
        // Too short to hold the header.
        assert_eq!(parse_dmar(&good[..40]), Err(AcpiError::Truncated));
        // Structure length 0 (would loop forever) and beyond the table.
        for bad_len in [0u16, 2, 200] {
            let mut t = good.clone();
            t[48 + 2..48 + 4].copy_from_slice(&bad_len.to_le_bytes());
            fix(&mut t, 9);
            assert_eq!(
                parse_dmar(&t),
                Err(AcpiError::BadLength),
                "length {bad_len}"
            );
        }
        // A DRHD too short for its register base.
        let mut short = drhd(1, 0xfed9_0000, &[]);
        short.truncate(12);
        short[2..4].copy_from_slice(&12u16.to_le_bytes());
        assert_eq!(parse_dmar(&dmar(&[short])), Err(AcpiError::BadLength));
        // Unaligned or zero register base.
        assert_eq!(
            parse_dmar(&dmar(&[drhd(1, 0xfed9_0010, &[])])),
            Err(AcpiError::BadLength)
        );
        assert_eq!(
            parse_dmar(&dmar(&[drhd(1, 0, &[])])),
            Err(AcpiError::BadLength)
        );
        // A device scope with length 0, odd path length, or running past its DRHD.
        for sc in [
            [1u8, 0, 0, 0, 0, 0, 0, 0],
            [1, 7, 0, 0, 0, 0, 0, 0],
            [1, 40, 0, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(
                parse_dmar(&dmar(&[drhd(1, 0xfed9_0000, &[sc])])),
                Err(AcpiError::BadLength),
                "{sc:?}"
            );
        }
        // Length field larger than the bytes we have.
        let mut l = good.clone();
        l[4..8].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(parse_dmar(&l), Err(AcpiError::BadLength));
        // Unknown structure types are skipped; RMRRs counted.
        let mut rmrr = vec![0u8; 24];
        rmrr[0] = 1;
        rmrr[2] = 24;
        let mut other = vec![0u8; 8];
        other[0] = 9;
        other[2] = 8;
        let d = parse_dmar(&dmar(&[rmrr, other, drhd(1, 0xfed9_0000, &[])])).unwrap();
        assert_eq!((d.rmrrs, d.nunits), (1, 1));
    }

    #[test]
    fn many_units_keep_the_first_ones() {
        let v: Vec<Vec<u8>> = (0..6u64)
            .map(|i| drhd(0, 0xfed0_0000 + i * 0x1000, &[]))
            .collect();
        let d = parse_dmar(&dmar(&v)).unwrap();
        assert_eq!(d.nunits, MAX_UNITS);
        assert_eq!(d.units[3].base, 0xfed0_3000);
    }
}
