//! The boot archive: the manifest, the root task and every server binary, packed so the kernel
//! and root can find them by name without a file system.
//!
//! Layout (all integers little endian):
//! `b"SAWMARCH"` | u32 version = 1 | u32 count | count × 64-byte entries | data.
//! An entry is `name: [u8; 48]` (UTF-8, NUL-padded, at most 47 bytes so it stays NUL-terminated),
//! `offset: u64` from the archive start, `size: u64`. Every entry's data starts on a 4096-byte
//! boundary so root can map modules page by page instead of copying them.

pub const MAGIC: &[u8; 8] = b"SAWMARCH";
pub const VERSION: u32 = 1;
pub const ENTRY_SIZE: usize = 64;
pub const NAME_LEN: usize = 48;
pub const ALIGN: usize = 4096;

pub fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Packs `(name, data)` pairs in order. The archive ends with the last byte of the last entry
/// (no trailing padding), so its length is exactly what the kernel needs to map.
pub fn build(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in entries {
        if name.is_empty() || name.len() > NAME_LEN - 1 || name.contains('\0') {
            return Err(format!(
                "archive entry name `{name}` must be 1-47 bytes without NUL"
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(format!("archive entry `{name}` appears twice"));
        }
    }
    let header = 16 + ENTRY_SIZE * entries.len();
    let mut out = vec![0u8; header];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    for (i, (name, data)) in entries.iter().enumerate() {
        let offset = align_up(out.len() as u64, ALIGN as u64) as usize;
        out.resize(offset, 0);
        out.extend_from_slice(data);
        let e = 16 + i * ENTRY_SIZE;
        out[e..e + name.len()].copy_from_slice(name.as_bytes());
        out[e + NAME_LEN..e + NAME_LEN + 8].copy_from_slice(&(offset as u64).to_le_bytes());
        out[e + NAME_LEN + 8..e + ENTRY_SIZE].copy_from_slice(&(data.len() as u64).to_le_bytes());
    }
    Ok(out)
}

/// Reads an archive back (used by tests and `image` sanity checks): `(name, offset, size)`.
pub fn list(bytes: &[u8]) -> Result<Vec<(String, u64, u64)>, String> {
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err("not a boot archive".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(format!("archive version {version}, expected {VERSION}"));
    }
    let count = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let end = count
        .checked_mul(ENTRY_SIZE)
        .and_then(|n| n.checked_add(16));
    if end.is_none_or(|e| e > bytes.len()) {
        return Err("archive entry table is truncated".into());
    }
    let mut out = Vec::new();
    for i in 0..count {
        let e = &bytes[16 + i * ENTRY_SIZE..16 + (i + 1) * ENTRY_SIZE];
        let nlen = e[..NAME_LEN]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(NAME_LEN);
        let name = String::from_utf8_lossy(&e[..nlen]).into_owned();
        let off = u64::from_le_bytes(e[NAME_LEN..NAME_LEN + 8].try_into().unwrap());
        let size = u64::from_le_bytes(e[NAME_LEN + 8..].try_into().unwrap());
        if off
            .checked_add(size)
            .is_none_or(|end| end > bytes.len() as u64)
        {
            return Err(format!("archive entry `{name}` runs past the end"));
        }
        out.push((name, off, size));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_aligned_and_readable() {
        let entries = vec![
            ("manifest".to_string(), vec![1u8; 10]),
            ("root".to_string(), vec![2u8; 5000]),
            ("test-ping".to_string(), vec![]),
            ("x".repeat(47), vec![3u8; 1]),
        ];
        let a = build(&entries).unwrap();
        assert_eq!(&a[..8], b"SAWMARCH");
        assert_eq!(u32::from_le_bytes(a[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(a[12..16].try_into().unwrap()), 4);
        let l = list(&a).unwrap();
        assert_eq!(l.len(), 4);
        for ((name, off, size), (ename, data)) in l.iter().zip(&entries) {
            assert_eq!(name, ename);
            assert_eq!(off % 4096, 0);
            assert_eq!(*size as usize, data.len());
            assert_eq!(&a[*off as usize..(*off + *size) as usize], &data[..]);
        }
        assert_eq!(l[0].1, 4096);
        assert_eq!(l[1].1, 8192);
        assert_eq!(l[2].1, 16384);
        // Names are NUL-terminated even at maximum length.
        assert_eq!(a[16 + 3 * 64 + 47], 0);
        // No trailing padding.
        assert_eq!(a.len() as u64, l[3].1 + 1);
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(build(&[("x".repeat(48), vec![])]).is_err());
        assert!(build(&[(String::new(), vec![])]).is_err());
        assert!(build(&[("a".into(), vec![]), ("a".into(), vec![])]).is_err());
    }
}
