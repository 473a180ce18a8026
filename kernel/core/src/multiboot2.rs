//! The tags of a multiboot2 boot information block (the memory map, the command line and the
//! ACPI root pointers the kernel reads from a multiboot2 loader such as GRUB). Pure parsing over
//! the block's bytes, so a malformed block ends the walk instead of reading past it.

/// Tag kinds the kernel reads.
pub const TAG_CMDLINE: u32 = 1;
pub const TAG_MEMORY_MAP: u32 = 6;
pub const TAG_ACPI_OLD: u32 = 14;
pub const TAG_ACPI_NEW: u32 = 15;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// The tags of `mbi` (the whole block, from its `total_size` word) as `(kind, payload)`, the
/// payload being the tag's bytes after its 8-byte header. Ends at the end tag (kind 0), at the
/// block's size, or at the first tag whose size is too small or runs past the block.
pub fn tags(mbi: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
    let total = u32_at(mbi, 0).map_or(0, |t| (t as usize).min(mbi.len()));
    let mut off = 8;
    core::iter::from_fn(move || {
        if off + 8 > total {
            return None;
        }
        let kind = u32_at(mbi, off)?;
        let size = u32_at(mbi, off + 4)? as usize;
        if kind == 0 || size < 8 || size > total - off {
            off = total;
            return None;
        }
        let payload = &mbi[off + 8..off + size];
        off += (size + 7) & !7;
        Some((kind, payload))
    })
}

/// The memory map tag's entries as `(base, length, type)`: `payload` is the tag's payload
/// (entry size, entry version, then the entries).
pub fn memory_map(payload: &[u8]) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
    let esz = u32_at(payload, 0).map_or(0, |s| s as usize);
    let entries = payload.get(8..).unwrap_or(&[]);
    let n = if esz >= 24 { entries.len() / esz } else { 0 };
    (0..n).map(move |i| {
        let e = &entries[i * esz..i * esz + 24];
        let base = u64::from_le_bytes(e[0..8].try_into().unwrap_or([0; 8]));
        let len = u64::from_le_bytes(e[8..16].try_into().unwrap_or([0; 8]));
        (base, len, u32_at(e, 16).unwrap_or(0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn tag(b: &mut Vec<u8>, kind: u32, payload: &[u8]) {
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&(8 + payload.len() as u32).to_le_bytes());
        b.extend_from_slice(payload);
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
    }

    fn block(tags: &[(u32, &[u8])]) -> Vec<u8> {
        let mut b = alloc::vec![0u8; 8];
        for &(k, p) in tags {
            tag(&mut b, k, p);
        }
        tag(&mut b, 0, &[]);
        let n = b.len() as u32;
        b[0..4].copy_from_slice(&n.to_le_bytes());
        b
    }

    #[test]
    fn walks_tags_and_the_memory_map() {
        let mut mm = Vec::new();
        mm.extend_from_slice(&24u32.to_le_bytes());
        mm.extend_from_slice(&0u32.to_le_bytes());
        for (base, len, ty) in [
            (0u64, 0x9f000u64, 1u32),
            (0x10_0000, 0x7ef_0000, 1),
            (0xf000_0000, 0x1000, 2),
        ] {
            mm.extend_from_slice(&base.to_le_bytes());
            mm.extend_from_slice(&len.to_le_bytes());
            mm.extend_from_slice(&ty.to_le_bytes());
            mm.extend_from_slice(&0u32.to_le_bytes());
        }
        let b = block(&[(TAG_CMDLINE, b"trace=rejected\0"), (TAG_MEMORY_MAP, &mm)]);
        let t: Vec<(u32, &[u8])> = tags(&b).collect();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0], (TAG_CMDLINE, &b"trace=rejected\0"[..]));
        let m: Vec<_> = memory_map(t[1].1).collect();
        assert_eq!(
            m,
            [
                (0, 0x9f000, 1),
                (0x10_0000, 0x7ef_0000, 1),
                (0xf000_0000, 0x1000, 2)
            ]
        );
    }

    #[test]
    fn malformed_blocks_end_the_walk() {
        assert_eq!(tags(&[]).count(), 0);
        let mut b = block(&[
            (TAG_CMDLINE, b"x\0"),
            (TAG_MEMORY_MAP, &[24, 0, 0, 0, 0, 0, 0, 0]),
        ]);
        // A tag whose size runs past the block: nothing from it on.
        b[8 + 4..8 + 8].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(tags(&b).count(), 0);
        // A tag smaller than its header.
        b[8 + 4..8 + 8].copy_from_slice(&4u32.to_le_bytes());
        assert_eq!(tags(&b).count(), 0);
        // total_size larger than the bytes given: bounded by the bytes.
        let mut c = block(&[(TAG_CMDLINE, b"x\0")]);
        c[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(tags(&c).count(), 1);
        // An entry size below 24 gives no entries; a truncated entry is left out.
        assert_eq!(memory_map(&[8, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]).count(), 0);
        assert_eq!(memory_map(&[24, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]).count(), 0);
    }
}
