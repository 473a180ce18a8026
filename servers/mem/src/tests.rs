//! Host tests of the memory server's bookkeeping with an array-backed pool.
use super::*;
use std::collections::HashSet;

/// Frames as real byte pages, and a log of revocations and write protections.
struct Fake {
    mem: Vec<[u8; 64]>,
    revoked: Vec<Frame>,
    protected: Vec<Frame>,
}

impl Fake {
    fn new(n: usize) -> Fake {
        Fake {
            mem: vec![[0xaa; 64]; n],
            revoked: Vec::new(),
            protected: Vec::new(),
        }
    }
}

impl Backend for Fake {
    fn zero(&mut self, f: Frame) {
        self.mem[f as usize] = [0; 64];
    }
    fn copy(&mut self, from: Frame, to: Frame) {
        self.mem[to as usize] = self.mem[from as usize];
    }
    fn revoke(&mut self, f: Frame) {
        self.revoked.push(f);
    }
    fn write_protect(&mut self, first: Frame, n: u32) -> u32 {
        self.protected.extend(first..first + n);
        0
    }
}

fn mem(pages: u64) -> (Mem, Fake) {
    let frames = Frames::new(&[(0x10_0000, pages / 2), (0x80_0000, pages - pages / 2)]);
    let m = Mem::new(
        frames,
        Limits {
            default_quota: 16,
            ds_per_client: 4,
            ds_total: 8,
        },
    );
    (m, Fake::new(pages as usize))
}

#[test]
fn frames_contiguous_within_a_range() {
    let mut f = Frames::new(&[(0x1000, 3), (0x10_0000, 4)]);
    assert_eq!(f.total(), 7);
    // 4 contiguous fit only in the second range.
    let s = f.alloc_contig(4).unwrap();
    assert_eq!(s, 3);
    assert_eq!(f.paddr(s), 0x10_0000);
    assert_eq!(f.paddr(s + 3), 0x10_3000);
    assert_eq!(f.alloc_contig(4), None);
    assert_eq!(f.free(), 3);
    let mut seen = HashSet::new();
    while let Some(x) = f.alloc() {
        assert!(seen.insert(x));
    }
    assert_eq!(seen.len(), 3);
    assert!(f.decref(1));
    assert_eq!(f.alloc(), Some(1));
}

#[test]
fn anonymous_pages_on_first_touch_and_quota() {
    let (mut m, mut b) = mem(64);
    let d = m.alloc(7, 20 * PAGE).unwrap();
    assert_eq!(m.account(7).used, 0);
    for p in 0..16 {
        let (f, w) = m.fault(&mut b, d, p, false).unwrap();
        assert!(w);
        assert_eq!(b.mem[f as usize], [0; 64], "zeroed");
    }
    assert_eq!(m.account(7).used, 16);
    // The quota (16) is reached: a clear error, nothing allocated.
    let free = m.frames.free();
    assert_eq!(m.fault(&mut b, d, 16, false), Err(MemErr::Quota));
    assert_eq!(m.frames.free(), free);
    // Touching a present page again costs nothing.
    assert!(m.fault(&mut b, d, 3, true).is_ok());
    // Beyond the end.
    assert_eq!(m.fault(&mut b, d, 20, false), Err(MemErr::Invalid));
    // Another client is unaffected.
    let e = m.alloc(8, PAGE).unwrap();
    assert!(m.fault(&mut b, e, 0, true).is_ok());
    m.free(&mut b, d).unwrap();
    assert_eq!(m.account(7).used, 0);
    assert_eq!(m.frames.free(), 63);
    assert_eq!(m.fault(&mut b, d, 0, false), Err(MemErr::Gone));
}

#[test]
fn bad_sizes() {
    let (mut m, mut b) = mem(64);
    assert_eq!(m.alloc(1, 0), Err(MemErr::Invalid));
    assert_eq!(m.alloc(1, u64::MAX), Err(MemErr::Invalid));
    assert_eq!(m.alloc(1, 65 * PAGE), Err(MemErr::Invalid));
    assert_eq!(
        m.alloc_dma(&mut b, 1, u64::MAX / 2).err(),
        Some(MemErr::Invalid)
    );
    assert_eq!(m.alloc_dma(&mut b, 1, 0).err(), Some(MemErr::Invalid));
    let d = m.alloc(1, PAGE).unwrap();
    assert_eq!(m.resize(&mut b, d, 0), Err(MemErr::Invalid));
    assert_eq!(m.phys(d, 0), Err(MemErr::Unsupported));
    assert_eq!(m.free(&mut b, 99), Err(MemErr::Gone));
}

#[test]
fn dataspace_tables_are_bounded() {
    let (mut m, _b) = mem(64);
    for _ in 0..4 {
        m.alloc(1, PAGE).unwrap();
    }
    assert_eq!(m.alloc(1, PAGE), Err(MemErr::NoMemory), "per client");
    for _ in 0..4 {
        m.alloc(2, PAGE).unwrap();
    }
    assert_eq!(m.alloc(3, PAGE), Err(MemErr::NoMemory), "in all");
}

#[test]
fn dma_is_contiguous_charged_at_once_and_fixed() {
    let (mut m, mut b) = mem(64);
    let (d, pa) = m.alloc_dma(&mut b, 3, 8).unwrap();
    assert_eq!(m.account(3).used, 8);
    assert_eq!(m.phys(d, 0), Ok(pa));
    assert_eq!(m.phys(d, 7), Ok(pa + 7 * PAGE));
    assert_eq!(m.phys(d, 8), Err(MemErr::Invalid));
    assert_eq!(m.resize(&mut b, d, PAGE), Err(MemErr::Unsupported));
    assert_eq!(m.copy(&mut b, d), Err(MemErr::Unsupported));
    // Over quota (16): refused, nothing held.
    assert_eq!(m.alloc_dma(&mut b, 3, 9).err(), Some(MemErr::Quota));
    assert_eq!(m.frames.free(), 56);
    m.free(&mut b, d).unwrap();
    assert_eq!(m.frames.free(), 64);
    assert_eq!(m.account(3).used, 0);
}

#[test]
fn copy_on_write_both_ways() {
    let (mut m, mut b) = mem(64);
    let a = m.alloc(1, 4 * PAGE).unwrap();
    let (fa, _) = m.fault(&mut b, a, 0, true).unwrap();
    b.mem[fa as usize][0] = 1;
    let c = m.copy(&mut b, a).unwrap();
    assert_eq!(
        m.account(1).used,
        2,
        "the copy is charged for its present page"
    );
    assert!(
        b.protected.contains(&fa) && !b.revoked.contains(&fa),
        "mappings of the shared page are lowered to read-only, not revoked"
    );
    // Both read the shared frame, read-only.
    assert_eq!(m.fault(&mut b, a, 0, false).unwrap(), (fa, false));
    assert_eq!(m.fault(&mut b, c, 0, false).unwrap(), (fa, false));
    // A write in the copy gets a private frame with the old contents.
    let (fc, w) = m.fault(&mut b, c, 0, true).unwrap();
    assert!(w && fc != fa);
    b.mem[fc as usize][0] = 2;
    assert_eq!(
        b.mem[fa as usize][0], 1,
        "the original does not see the copy's write"
    );
    // The original is now alone on its frame: writable without copying.
    assert_eq!(m.fault(&mut b, a, 0, true).unwrap(), (fa, true));
    b.mem[fa as usize][0] = 3;
    assert_eq!(
        b.mem[fc as usize][0], 2,
        "the copy does not see the original's write"
    );
    // Other direction: copy again, the original writes first.
    let c2 = m.copy(&mut b, a).unwrap();
    let (fa2, _) = m.fault(&mut b, a, 0, true).unwrap();
    assert_ne!(fa2, fa);
    assert_eq!(m.fault(&mut b, c2, 0, false).unwrap().0, fa);
    // Untouched pages of a copy are separate zero pages.
    let (z1, _) = m.fault(&mut b, a, 1, false).unwrap();
    let (z2, _) = m.fault(&mut b, c2, 1, false).unwrap();
    assert_ne!(z1, z2);
    for d in [a, c, c2] {
        m.free(&mut b, d).unwrap();
    }
    assert_eq!(m.frames.free(), 64);
    assert_eq!(m.account(1).used, 0);
}

#[test]
fn resize_frees_the_tail() {
    let (mut m, mut b) = mem(64);
    let d = m.alloc(1, 8 * PAGE).unwrap();
    for p in 0..8 {
        m.fault(&mut b, d, p, true).unwrap();
    }
    b.revoked.clear();
    m.resize(&mut b, d, 3 * PAGE).unwrap();
    assert_eq!(m.account(1).used, 3);
    assert_eq!(
        b.revoked.len(),
        5,
        "the dropped pages are unmapped everywhere"
    );
    assert_eq!(m.fault(&mut b, d, 3, false), Err(MemErr::Invalid));
    m.resize(&mut b, d, 10 * PAGE).unwrap();
    assert!(m.fault(&mut b, d, 9, false).is_ok());
}

#[test]
fn a_dead_client_returns_everything() {
    let (mut m, mut b) = mem(64);
    let free0 = m.frames.free();
    let other = m.alloc(2, PAGE).unwrap();
    m.fault(&mut b, other, 0, true).unwrap();
    let d = m.alloc(1, 8 * PAGE).unwrap();
    for p in 0..5 {
        m.fault(&mut b, d, p, true).unwrap();
    }
    let c = m.copy(&mut b, d).unwrap();
    m.fault(&mut b, c, 0, true).unwrap();
    m.alloc_dma(&mut b, 1, 4).unwrap();
    let gone = m.client_gone(&mut b, 1);
    assert_eq!(gone.len(), 3);
    assert_eq!(m.frames.free(), free0 - 1);
    assert!(m.get(other).is_some());
    assert_eq!(m.account(1).used, 0);
}

#[test]
fn random_operations_keep_the_books_balanced() {
    let (m, b) = mem(48);
    books_balance(m, b, 12, 20_000);
}

/// As above over dataspaces of up to 1,100 pages, so their page maps go dense and shrink across
/// chunk boundaries (pagemap.rs), with a quota that is reached now and then.
#[test]
fn random_operations_on_large_dataspaces_keep_the_books_balanced() {
    let pages = 2048;
    let frames = Frames::new(&[(0x10_0000, pages)]);
    let m = Mem::new(
        frames,
        Limits {
            default_quota: 900,
            ds_per_client: 4,
            ds_total: 8,
        },
    );
    books_balance(m, Fake::new(pages as usize), 1100, 6_000);
}

/// Random allocations, frees, copies, resizes, faults and dead clients (3 clients, dataspaces
/// of up to `span` pages); after each step every charge equals the present pages of its owner
/// and every frame's reference count its uses.
fn books_balance(mut m: Mem, mut b: Fake, span: u64, steps: usize) {
    let total = m.frames.total() as usize;
    let quota = m.limits.default_quota;
    let mut x: u64 = 0x1234_5678;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut live: Vec<usize> = Vec::new();
    for _ in 0..steps {
        let client = rnd(3);
        match rnd(7) {
            0 => {
                if let Ok(d) = m.alloc(client, (rnd(span) + 1) * PAGE) {
                    live.push(d);
                }
            }
            1 if !live.is_empty() => {
                let d = live.swap_remove(rnd(live.len() as u64) as usize);
                m.free(&mut b, d).unwrap();
            }
            2 if !live.is_empty() => {
                if let Ok(c) = m.copy(&mut b, live[rnd(live.len() as u64) as usize]) {
                    live.push(c);
                }
            }
            3 if !live.is_empty() => {
                let d = live[rnd(live.len() as u64) as usize];
                let _ = m.resize(&mut b, d, (rnd(span) + 1) * PAGE);
            }
            4 => {
                for d in m.client_gone(&mut b, client) {
                    live.retain(|&l| l != d);
                }
            }
            _ if !live.is_empty() => {
                // A run of pages in order (as a program touches them), or one anywhere.
                let d = live[rnd(live.len() as u64) as usize];
                let (from, n) = if span > 64 && rnd(2) == 0 {
                    (rnd(span), 1 + rnd(200))
                } else {
                    (rnd(span), 1)
                };
                let write = rnd(2) == 0;
                for p in from..from + n {
                    let _ = m.fault(&mut b, d, p, write);
                }
            }
            _ => {}
        }
        // Invariants: charges equal present pages per owner; references equal uses.
        let mut per_owner = std::collections::HashMap::new();
        let mut uses = vec![0u16; total];
        for i in m.ids().collect::<Vec<_>>() {
            let ds = m.get(i).unwrap();
            *per_owner.entry(ds.owner).or_insert(0u64) += ds.pages.len();
            for (_, f) in ds.pages.iter() {
                uses[f as usize] += 1;
            }
        }
        for c in 0..3 {
            assert_eq!(m.account(c).used, *per_owner.get(&c).unwrap_or(&0));
            assert!(m.account(c).used <= quota);
        }
        for f in 0..total as Frame {
            assert_eq!(m.frames.refs(f), uses[f as usize]);
        }
        assert_eq!(
            m.frames.free() as usize,
            uses.iter().filter(|&&u| u == 0).count()
        );
    }
}

#[test]
fn copy_protects_and_free_revokes_runs_of_frames_in_one_call_each() {
    let (mut m, mut b) = mem(64);
    let a = m.alloc(1, 8 * PAGE).unwrap();
    // Pages touched out of order: their frames still make one run.
    for p in [5, 0, 6, 1, 7] {
        m.fault(&mut b, a, p, true).unwrap();
    }
    struct Calls(Fake, Vec<(Frame, u32)>, Vec<(Frame, u32)>);
    impl Backend for Calls {
        fn revoke_run(&mut self, first: Frame, n: u32) -> u32 {
            self.2.push((first, n));
            0
        }
        fn zero(&mut self, f: Frame) {
            self.0.zero(f)
        }
        fn copy(&mut self, from: Frame, to: Frame) {
            self.0.copy(from, to)
        }
        fn revoke(&mut self, f: Frame) {
            self.0.revoke(f)
        }
        fn write_protect(&mut self, first: Frame, n: u32) -> u32 {
            self.1.push((first, n));
            0
        }
    }
    let mut c = Calls(b, Vec::new(), Vec::new());
    let copy = m.copy(&mut c, a).unwrap();
    assert_eq!(c.1.len(), 1, "one call for the run: {:?}", c.1);
    assert_eq!(c.1[0].1, 5);
    assert!(
        c.0.revoked.is_empty() && c.2.is_empty(),
        "nothing is revoked by a copy"
    );
    // The copy's end revokes nothing (a holds every frame still); a's end revokes the run at once.
    m.free(&mut c, copy).unwrap();
    assert!(c.2.is_empty());
    m.free(&mut c, a).unwrap();
    assert_eq!(c.2, [(c.1[0].0, 5)]);
    assert_eq!(m.frames.free(), 64);
}

#[test]
fn a_dropped_shared_frame_keeps_its_mappings_until_its_holder_writes() {
    let (mut m, mut b) = mem(64);
    let a = m.alloc(1, PAGE).unwrap();
    let (f, _) = m.fault(&mut b, a, 0, true).unwrap();
    let c = m.copy(&mut b, a).unwrap();
    assert_eq!(m.fault(&mut b, c, 0, false).unwrap(), (f, false));
    // The copy goes (its process ended): the frame is a's alone, nothing revoked yet.
    m.free(&mut b, c).unwrap();
    assert!(b.revoked.is_empty());
    assert_eq!(m.frames.refs(f), 1);
    // Reading it is still read-only; the first write revokes every other mapping first.
    assert_eq!(m.fault(&mut b, a, 0, false).unwrap(), (f, false));
    assert_eq!(m.fault(&mut b, a, 0, true).unwrap(), (f, true));
    assert_eq!(b.revoked, [f]);
    // Then it is writable as any private frame, with no more revokes.
    assert_eq!(m.fault(&mut b, a, 0, false).unwrap(), (f, true));
    assert_eq!(b.revoked.len(), 1);
    m.free(&mut b, a).unwrap();
    assert_eq!(m.frames.free(), 64);
}

/// The mappings of every task, as the kernel would hold them: (dataspace, page, frame,
/// writable). Revoking removes a frame's; write-protecting lowers them.
struct Mapped {
    fake: Fake,
    maps: Vec<(usize, u64, Frame, bool)>,
}

impl Backend for Mapped {
    fn zero(&mut self, f: Frame) {
        self.fake.zero(f)
    }
    fn copy(&mut self, from: Frame, to: Frame) {
        self.fake.copy(from, to)
    }
    fn revoke(&mut self, f: Frame) {
        self.maps.retain(|x| x.2 != f);
    }
    fn write_protect(&mut self, first: Frame, n: u32) -> u32 {
        for x in self.maps.iter_mut() {
            if (first..first + n).contains(&x.2) {
                x.3 = false;
            }
        }
        0
    }
}

/// Dataspaces copied, written, read, resized and freed at random, each access through a mapping
/// as a task would make it (kept while the kernel keeps it, also after its dataspace is gone):
/// a write never reaches a frame anyone else maps, and a live dataspace's mapping is always its
/// own page's frame.
#[test]
fn copy_on_write_never_shows_a_write_to_another_mapping() {
    let (mut m, fake) = mem(64);
    m.limits.ds_per_client = 16;
    m.limits.ds_total = 16;
    m.set_quota(1, 64);
    let mut b = Mapped {
        fake,
        maps: Vec::new(),
    };
    let mut x: u64 = 0x2545_f491;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut live: Vec<usize> = vec![m.alloc(1, 4 * PAGE).unwrap()];
    // A freed dataspace's id may be given out again: its stale mappings are told apart by an
    // incarnation number.
    let mut incarnation: Vec<usize> = vec![0; 64];
    let tag = |id: usize, inc: &Vec<usize>| id * 1000 + inc[id];
    let (mut writes, mut stale_seen) = (0, 0);
    for _ in 0..20_000 {
        match rnd(10) {
            0 if live.len() < 8 => {
                let d = live[rnd(live.len() as u64) as usize];
                if let Ok(c) = m.copy(&mut b, d) {
                    live.push(c);
                }
            }
            1 if live.len() > 1 => {
                let d = live.swap_remove(rnd(live.len() as u64) as usize);
                m.free(&mut b, d).unwrap();
                incarnation[d] += 1;
            }
            2 => {
                let d = live[rnd(live.len() as u64) as usize];
                let size = rnd(4) + 1;
                m.resize(&mut b, d, size * PAGE).unwrap();
                // Mappings past the end are the task's no more (the region manager unmaps them).
                let t = tag(d, &incarnation);
                for x in b.maps.iter_mut() {
                    if x.0 == t && x.1 >= size {
                        x.0 = usize::MAX;
                    }
                }
            }
            _ => {
                let d = live[rnd(live.len() as u64) as usize];
                let size = m.get(d).unwrap().size;
                let page = rnd(size);
                let write = rnd(2) == 0;
                let t = tag(d, &incarnation);
                let have = b.maps.iter().position(|x| x.0 == t && x.1 == page);
                let usable = have.filter(|&i| !write || b.maps[i].3);
                let i = match usable {
                    Some(i) => i,
                    None => {
                        let Ok((f, w)) = m.fault(&mut b, d, page, write) else {
                            continue;
                        };
                        // A map replaces what the task had there.
                        b.maps.retain(|x| !(x.0 == t && x.1 == page));
                        b.maps.push((t, page, f, w));
                        b.maps.len() - 1
                    }
                };
                let (_, _, f, w) = b.maps[i];
                assert_eq!(
                    m.get(d).unwrap().pages.get(page),
                    Some(f),
                    "a live dataspace's mapping is its own page"
                );
                if write {
                    assert!(w, "a write fault gives a writable mapping");
                    let others = b.maps.iter().filter(|x| x.2 == f).count();
                    assert_eq!(others, 1, "a written frame is mapped by the writer alone");
                    assert_eq!(m.frames.refs(f), 1);
                    b.fake.mem[f as usize][0] = b.fake.mem[f as usize][0].wrapping_add(1);
                    writes += 1;
                }
            }
        }
        stale_seen += b
            .maps
            .iter()
            .filter(|x| x.0 != usize::MAX && !live.iter().any(|&d| x.0 == tag(d, &incarnation)))
            .count()
            .min(1);
    }
    assert!(
        writes > 1000 && stale_seen > 100,
        "{} {}",
        writes,
        stale_seen
    );
    for d in live {
        m.free(&mut b, d).unwrap();
    }
    assert_eq!(m.frames.free(), 64);
    assert!(
        b.maps.is_empty(),
        "the last holder's free revokes every mapping"
    );
}
