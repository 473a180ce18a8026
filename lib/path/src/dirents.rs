//! The packed directory entries of `pfs.readdir_many` and `vfs.readdir_many` (issue 17: a
//! listing in a few calls rather than one call per entry). Each entry is its inode number (u32,
//! little-endian), its kind (the IDL's `EntryKind` as its u8; checked by the caller), the length
//! of its name (u8, 1..=255) and the name's bytes, entries back to back. The file-system servers
//! pack, the VFS passes the bytes through, clients unpack; a malformed buffer (a lying server)
//! is an error, never a panic. Here (not in the interfaces crate) to be host-tested.

/// Bytes before an entry's name.
pub const HEADER: usize = 6;

/// Appends one entry at the start of `out`; the bytes it took, or None when it does not fit
/// (or the name is empty or longer than 255 bytes).
pub fn put(out: &mut [u8], ino: u32, kind: u8, name: &[u8]) -> Option<usize> {
    let n = HEADER + name.len();
    if name.is_empty() || name.len() > 255 || n > out.len() {
        return None;
    }
    out[..4].copy_from_slice(&ino.to_le_bytes());
    out[4] = kind;
    out[5] = name.len() as u8;
    out[HEADER..n].copy_from_slice(name);
    Some(n)
}

/// One unpacked entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub ino: u32,
    pub kind: u8,
    pub name: &'a [u8],
}

/// A packed buffer that does not follow the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// The entries of `packed`, in order; after a malformed one, nothing more.
pub fn entries(packed: &[u8]) -> Entries<'_> {
    Entries { rest: packed }
}

pub struct Entries<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, Malformed>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.rest;
        let parsed = (|| {
            let head = r.get(..HEADER)?;
            let len = head[5] as usize;
            let name = r.get(HEADER..HEADER + len).filter(|n| !n.is_empty())?;
            let kind = head[4];
            let ino = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            Some((Entry { ino, kind, name }, HEADER + len))
        })();
        match parsed {
            Some((e, used)) => {
                self.rest = &r[used..];
                Some(Ok(e))
            }
            None => {
                self.rest = &[];
                Some(Err(Malformed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn round_trip_until_full() {
        let mut buf = [0u8; 40];
        let mut used = 0;
        let names: [&[u8]; 4] = [b".", b"..", b"a-longer-name", b"x"];
        let mut packed = 0;
        for (i, n) in names.iter().enumerate() {
            match put(&mut buf[used..], 10 + i as u32, 1, n) {
                Some(k) => {
                    used += k;
                    packed += 1;
                }
                None => break,
            }
        }
        // 7 + 8 + 19 = 34 bytes; "x" (7) does not fit in the 6 left.
        assert_eq!((packed, used), (3, 34));
        let got: Vec<Entry> = entries(&buf[..used]).map(|e| e.unwrap()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].name, b"a-longer-name");
        assert_eq!(got[1].ino, 11);
        assert_eq!(got[0].kind, 1);
        assert_eq!(put(&mut buf, 1, 2, b""), None);
        assert_eq!(put(&mut [0u8; 300], 1, 2, &[b'n'; 256]), None);
    }

    #[test]
    fn malformed_buffers_end_in_one_error() {
        let mut buf = [0u8; 16];
        let n = put(&mut buf, 5, 2, b"ok").unwrap();
        // A name running past the end.
        let mut bad = buf;
        bad[n + 5] = 200;
        let v: Vec<_> = entries(&bad).collect();
        assert_eq!(v[0].unwrap().name, b"ok");
        assert_eq!(v[1], Err(Malformed));
        assert_eq!(v.len(), 2);
        // A zero-length name; a short header.
        assert_eq!(entries(&[1, 0, 0, 0, 1, 0]).next(), Some(Err(Malformed)));
        assert_eq!(entries(&[1, 0, 0]).next(), Some(Err(Malformed)));
        assert_eq!(entries(&[]).next(), None);
    }
}
