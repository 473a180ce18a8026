//! The present pages of one dataspace: page number -> frame. Pure data structure (heap memory
//! only), tested on the host.
//!
//! Why not a `BTreeMap`: a first touch looks a page up and inserts it, and a B-tree's linear
//! search inside its nodes made that cost grow with the dataspace (300 to 700 instructions per
//! fault over a 4 MiB mapping). Here pages are grouped in chunks of [`CHUNK`] pages, one slot of
//! a directory each. A chunk holding few pages is a short sorted list (a sparse dataspace costs
//! about what a tree would: 8 bytes a page); one that fills up becomes an array indexed by page,
//! so the common case, a dataspace touched page after page, finds and records a page in a few
//! instructions. The dense form costs 2 KiB for at least [`FEW`] + 1 pages (at most ~32 bytes a
//! page), which keeps the worst case of mem's heap per charged page close to the tree's.
//!
//! Every allocation is fallible: a full heap is an error for the caller (`NoMemory`), never a
//! crash of the memory server.
use crate::{Frame, MemErr};
use alloc::vec::Vec;

/// Pages per chunk (a 2 MiB stretch of the dataspace).
pub const CHUNK: u64 = 512;
/// A chunk with more pages than this becomes dense.
pub const FEW: usize = 64;

#[derive(Debug)]
enum Chunk {
    /// At most [`FEW`] pages: (page within the chunk, frame), sorted by page.
    Few(Vec<(u16, Frame)>),
    /// [`CHUNK`] entries, frame + 1 per page (0: not present).
    Dense(Vec<u32>),
}

/// Page number -> frame, for pages below 2^41 (dataspaces are smaller than the pool).
#[derive(Debug, Default)]
pub struct PageMap {
    chunks: Vec<Chunk>,
    len: u64,
}

fn no_memory<E>(_: E) -> MemErr {
    MemErr::NoMemory
}

fn split(page: u64) -> (usize, usize) {
    ((page / CHUNK) as usize, (page % CHUNK) as usize)
}

impl PageMap {
    pub const fn new() -> PageMap {
        PageMap {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Pages present.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The frame of `page`, if present.
    #[inline]
    pub fn get(&self, page: u64) -> Option<Frame> {
        let (c, o) = split(page);
        match self.chunks.get(c)? {
            Chunk::Dense(v) => v[o].checked_sub(1),
            Chunk::Few(v) => match v.last() {
                // Touching in order asks for the page after the last one: no search.
                Some(&(last, _)) if (last as usize) < o => None,
                _ => v
                    .binary_search_by_key(&(o as u16), |e| e.0)
                    .ok()
                    .map(|i| v[i].1),
            },
        }
    }

    /// Records `f` at `page`; returns the frame it replaces, if any. On `NoMemory` nothing
    /// changed.
    #[inline]
    pub fn insert(&mut self, page: u64, f: Frame) -> Result<Option<Frame>, MemErr> {
        let (c, o) = split(page);
        if c >= self.chunks.len() {
            self.chunks
                .try_reserve(c + 1 - self.chunks.len())
                .map_err(no_memory)?;
            self.chunks.resize_with(c + 1, || Chunk::Few(Vec::new()));
        }
        let old = match &mut self.chunks[c] {
            Chunk::Dense(v) => core::mem::replace(&mut v[o], f + 1).checked_sub(1),
            Chunk::Few(v) => {
                // Touching in order (the common case) appends.
                let at = match v.last() {
                    Some(&(last, _)) if (last as usize) < o => Err(v.len()),
                    None => Err(0),
                    _ => v.binary_search_by_key(&(o as u16), |e| e.0),
                };
                match at {
                    Ok(i) => Some(core::mem::replace(&mut v[i].1, f)),
                    Err(i) if v.len() < FEW => {
                        v.try_reserve(1).map_err(no_memory)?;
                        v.insert(i, (o as u16, f));
                        None
                    }
                    Err(_) => {
                        let mut d: Vec<u32> = Vec::new();
                        d.try_reserve_exact(CHUNK as usize).map_err(no_memory)?;
                        d.resize(CHUNK as usize, 0);
                        for &(k, g) in v.iter() {
                            d[k as usize] = g + 1;
                        }
                        d[o] = f + 1;
                        self.chunks[c] = Chunk::Dense(d);
                        None
                    }
                }
            }
        };
        if old.is_none() {
            self.len += 1;
        }
        Ok(old)
    }

    /// Removes every page at or above `from`; returns their frames in page order.
    pub fn truncate(&mut self, from: u64) -> Vec<Frame> {
        let mut gone = Vec::new();
        let (c, o) = split(from);
        if c < self.chunks.len() {
            match &mut self.chunks[c] {
                Chunk::Few(v) => {
                    let i = v.partition_point(|e| (e.0 as usize) < o);
                    gone.extend(v.drain(i..).map(|e| e.1));
                }
                Chunk::Dense(v) => {
                    for x in v[o..].iter_mut() {
                        if *x != 0 {
                            gone.push(*x - 1);
                            *x = 0;
                        }
                    }
                }
            }
            for ch in self.chunks.drain(c + 1..) {
                match ch {
                    Chunk::Few(v) => gone.extend(v.iter().map(|e| e.1)),
                    Chunk::Dense(v) => gone.extend(v.iter().filter(|&&x| x != 0).map(|x| x - 1)),
                }
            }
        }
        self.len -= gone.len() as u64;
        gone
    }

    /// (page, frame) of every present page, in page order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            chunks: &self.chunks,
            c: 0,
            i: 0,
        }
    }

    /// A copy, or `NoMemory`.
    pub fn try_clone(&self) -> Result<PageMap, MemErr> {
        let mut chunks = Vec::new();
        chunks
            .try_reserve_exact(self.chunks.len())
            .map_err(no_memory)?;
        for ch in &self.chunks {
            chunks.push(match ch {
                Chunk::Few(v) => {
                    let mut w = Vec::new();
                    w.try_reserve_exact(v.len()).map_err(no_memory)?;
                    w.extend_from_slice(v);
                    Chunk::Few(w)
                }
                Chunk::Dense(v) => {
                    let mut w = Vec::new();
                    w.try_reserve_exact(v.len()).map_err(no_memory)?;
                    w.extend_from_slice(v);
                    Chunk::Dense(w)
                }
            });
        }
        Ok(PageMap {
            chunks,
            len: self.len,
        })
    }
}

/// See [`PageMap::iter`].
pub struct Iter<'a> {
    chunks: &'a [Chunk],
    c: usize,
    i: usize,
}

impl Iterator for Iter<'_> {
    type Item = (u64, Frame);
    fn next(&mut self) -> Option<(u64, Frame)> {
        loop {
            let base = self.c as u64 * CHUNK;
            match self.chunks.get(self.c)? {
                Chunk::Few(v) => {
                    if let Some(&(o, f)) = v.get(self.i) {
                        self.i += 1;
                        return Some((base + o as u64, f));
                    }
                }
                Chunk::Dense(v) => {
                    while let Some(&x) = v.get(self.i) {
                        self.i += 1;
                        if x != 0 {
                            return Some((base + self.i as u64 - 1, x - 1));
                        }
                    }
                }
            }
            self.c += 1;
            self.i = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn same(m: &PageMap, model: &BTreeMap<u64, Frame>) {
        assert_eq!(m.len(), model.len() as u64);
        let got: Vec<(u64, Frame)> = m.iter().collect();
        let want: Vec<(u64, Frame)> = model.iter().map(|(&p, &f)| (p, f)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn in_order_touches_go_dense_and_stay_exact() {
        let mut m = PageMap::new();
        for p in 0..1024 {
            assert_eq!(m.get(p), None);
            assert_eq!(m.insert(p, p as Frame + 7), Ok(None));
            assert_eq!(m.get(p), Some(p as Frame + 7));
        }
        assert_eq!(m.len(), 1024);
        assert!(m.chunks.iter().all(|c| matches!(c, Chunk::Dense(_))));
        assert_eq!(
            m.insert(600, 3),
            Ok(Some(607)),
            "a replacement returns the old frame"
        );
        assert_eq!(m.len(), 1024);
        assert_eq!(m.get(600), Some(3));
        // Frame 0 is a frame like any other (stored as 1).
        assert_eq!(m.insert(601, 0), Ok(Some(608)));
        assert_eq!(m.get(601), Some(0));
        let gone = m.truncate(1000);
        assert_eq!(
            gone,
            (1000..1024).map(|p| p as Frame + 7).collect::<Vec<_>>()
        );
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get(1000), None);
        assert_eq!(m.get(999), Some(1006));
        assert_eq!(m.truncate(0).len(), 1000);
        assert!(m.is_empty() && m.iter().next().is_none());
    }

    #[test]
    fn sparse_pages_stay_few() {
        let mut m = PageMap::new();
        for k in 0..40u64 {
            m.insert(k * 513 + 5, k as Frame).unwrap();
        }
        assert!(m.chunks.iter().all(|c| matches!(c, Chunk::Few(_))));
        assert_eq!(m.get(5), Some(0));
        assert_eq!(m.get(513 + 5), Some(1));
        assert_eq!(m.get(513 + 6), None);
        assert_eq!(m.get(1 << 30), None, "beyond the directory");
    }

    #[test]
    fn random_operations_match_a_tree() {
        let mut x: u64 = 0x9e37_79b9;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut m = PageMap::new();
        let mut model = BTreeMap::new();
        for step in 0..30_000 {
            // Mostly a window of ~3 chunks, so chunks fill up and go dense; sometimes far away.
            let span = if rnd(10) == 0 { 40 * CHUNK } else { 3 * CHUNK };
            let p = rnd(span);
            match rnd(20) {
                0 => {
                    let cut = rnd(span);
                    let gone = m.truncate(cut);
                    let want: Vec<Frame> = model.split_off(&cut).into_values().collect();
                    assert_eq!(gone, want);
                }
                1 => {
                    let c = m.try_clone().unwrap();
                    same(&c, &model);
                }
                2..=9 => assert_eq!(m.get(p), model.get(&p).copied()),
                _ => {
                    let f = rnd(1 << 20) as Frame;
                    assert_eq!(m.insert(p, f), Ok(model.insert(p, f)));
                }
            }
            if step % 500 == 0 {
                same(&m, &model);
            }
        }
        same(&m, &model);
    }
}
