//! Host tests of the DMA rule: a frame with pins is never reused (quarantine), and a
//! copy-on-write copy never shares a pinned frame.
use super::*;
use std::collections::HashSet;

/// Frames as bytes, plus the set of pinned frames the kernel would report.
struct Pins {
    mem: Vec<[u8; 64]>,
    pinned: HashSet<Frame>,
    revoked: Vec<Frame>,
}

impl Backend for Pins {
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
        (first..first + n)
            .filter(|f| self.pinned.contains(f))
            .count() as u32
    }
    fn pinned(&mut self, f: Frame) -> bool {
        self.pinned.contains(&f)
    }
}

fn setup(pages: u64) -> (Mem, Pins) {
    let frames = Frames::new(&[(0x10_0000, pages)]);
    let m = Mem::new(
        frames,
        Limits {
            default_quota: 1000,
            ds_per_client: 8,
            ds_total: 16,
        },
    );
    let b = Pins {
        mem: vec![[0xaa; 64]; pages as usize],
        pinned: HashSet::new(),
        revoked: Vec::new(),
    };
    (m, b)
}

/// Touches every free frame through one new dataspace; returns the frames it got.
fn take_all(m: &mut Mem, b: &mut Pins, client: u64) -> (usize, Vec<Frame>) {
    let n = m.frames.free() as u64;
    let d = m.alloc(client, n.max(1) * PAGE).unwrap();
    let got = (0..n).map(|p| m.fault(b, d, p, true).unwrap().0).collect();
    (d, got)
}

#[test]
fn a_pinned_frame_freed_waits_in_quarantine_until_unpinned() {
    let (mut m, mut b) = setup(8);
    let d = m.alloc(1, PAGE).unwrap();
    let (f, _) = m.fault(&mut b, d, 0, true).unwrap();
    b.pinned.insert(f);
    let free0 = m.frames.free();
    m.free(&mut b, d).unwrap();
    assert!(b.revoked.contains(&f), "the driver's mapping goes at once");
    assert_eq!(m.frames.quarantined(), &[f]);
    assert_eq!(m.frames.free(), free0, "not back in the pool");
    assert_eq!(m.account(1).used, 0, "the owner no longer pays for it");
    // Every other frame can be handed out, never this one.
    let (d2, got) = take_all(&mut m, &mut b, 2);
    assert!(!got.contains(&f));
    let more = m.alloc(2, PAGE).unwrap();
    assert_eq!(m.fault(&mut b, more, 0, true), Err(MemErr::NoMemory));
    m.free(&mut b, more).unwrap();
    // The device is done: the next allocation finds it again, zeroed.
    b.pinned.remove(&f);
    b.mem[f as usize] = [0x77; 64];
    m.free(&mut b, d2).unwrap();
    let (_, got) = take_all(&mut m, &mut b, 3);
    assert!(got.contains(&f));
    assert!(m.frames.quarantined().is_empty());
    assert_eq!(b.mem[f as usize], [0; 64]);
}

#[test]
fn shrinking_and_dead_clients_quarantine_too() {
    let (mut m, mut b) = setup(8);
    let d = m.alloc(1, 3 * PAGE).unwrap();
    let fs: Vec<Frame> = (0..3)
        .map(|p| m.fault(&mut b, d, p, true).unwrap().0)
        .collect();
    b.pinned.insert(fs[2]);
    m.resize(&mut b, d, PAGE).unwrap();
    assert_eq!(m.frames.quarantined(), &[fs[2]]);
    assert_eq!(m.frames.free(), 8 - 2);
    b.pinned.insert(fs[0]);
    assert_eq!(m.client_gone(&mut b, 1), vec![d]);
    assert_eq!(m.frames.quarantined().len(), 2);
    assert_eq!(m.frames.free(), 8 - 2);
    b.pinned.clear();
    m.reclaim(&mut b);
    assert_eq!(m.frames.free(), 8);
}

#[test]
fn a_frame_shared_copy_on_write_is_held_only_by_its_last_owner() {
    let (mut m, mut b) = setup(8);
    let d = m.alloc(1, PAGE).unwrap();
    let (f, _) = m.fault(&mut b, d, 0, true).unwrap();
    let c = m.copy(&mut b, d).unwrap();
    // Pinned for a device read (a block write): sharing it is harmless, freeing one side too.
    b.pinned.insert(f);
    m.free(&mut b, d).unwrap();
    assert!(m.frames.quarantined().is_empty());
    assert_eq!(m.frames.refs(f), 1);
    m.free(&mut b, c).unwrap();
    assert_eq!(m.frames.quarantined(), &[f]);
}

#[test]
fn copy_gives_pinned_pages_a_private_frame() {
    let (mut m, mut b) = setup(8);
    let d = m.alloc(1, 2 * PAGE).unwrap();
    let (f0, _) = m.fault(&mut b, d, 0, true).unwrap();
    let (f1, _) = m.fault(&mut b, d, 1, true).unwrap();
    b.mem[f0 as usize] = [1; 64];
    b.mem[f1 as usize] = [2; 64];
    b.pinned.insert(f1);
    let c = m.copy(&mut b, d).unwrap();
    let cp = &m.get(c).unwrap().pages;
    assert_eq!(cp.get(0), Some(f0), "unpinned pages are shared");
    let c1 = cp.get(1).unwrap();
    assert_ne!(c1, f1, "the pinned page is not");
    assert_eq!(b.mem[c1 as usize], [2; 64], "but its contents are copied");
    assert_eq!(m.frames.refs(f1), 1);
    assert_eq!(m.frames.refs(f0), 2);
    // The device writes f1 (only d sees it); a write fault in d needs no copy.
    assert_eq!(m.fault(&mut b, d, 1, true), Ok((f1, true)));
    assert_eq!(m.account(1).used, 4);
}

#[test]
fn copy_of_pinned_pages_without_free_frames_changes_nothing() {
    let (mut m, mut b) = setup(4);
    let d = m.alloc(1, 2 * PAGE).unwrap();
    let (f0, _) = m.fault(&mut b, d, 0, true).unwrap();
    let (f1, _) = m.fault(&mut b, d, 1, true).unwrap();
    let (_filler, _) = take_all(&mut m, &mut b, 2);
    b.pinned.insert(f0);
    b.pinned.insert(f1);
    assert_eq!(m.copy(&mut b, d), Err(MemErr::NoMemory));
    assert_eq!(m.frames.refs(f0), 1);
    assert_eq!(m.frames.refs(f1), 1);
    assert_eq!(m.account(1).used, 2);
    assert_eq!(m.ids().count(), 2);
}

#[test]
fn random_operations_with_pins_never_reuse_a_pinned_frame() {
    let (mut m, mut b) = setup(32);
    let mut x: u64 = 0x9e37_79b9;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut live: Vec<usize> = Vec::new();
    // Which dataspace page each pinned frame was pinned through (a device works for it).
    let mut pinned_for: Vec<(Frame, usize, u64)> = Vec::new();
    for _ in 0..20_000 {
        let client = rnd(3);
        match rnd(9) {
            0 => {
                if let Ok(d) = m.alloc(client, (rnd(6) + 1) * PAGE) {
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
                let _ = m.resize(&mut b, d, (rnd(6) + 1) * PAGE);
            }
            4 => {
                for d in m.client_gone(&mut b, client) {
                    live.retain(|&l| l != d);
                }
            }
            5 if !live.is_empty() => {
                // A driver pins a present, private page (a writable mapping of it exists).
                let d = live[rnd(live.len() as u64) as usize];
                let p = rnd(6);
                if let Ok((f, true)) = m.fault(&mut b, d, p, true) {
                    b.pinned.insert(f);
                    pinned_for.push((f, d, p));
                }
            }
            6 if !pinned_for.is_empty() => {
                let (f, _, _) = pinned_for.swap_remove(rnd(pinned_for.len() as u64) as usize);
                if !pinned_for.iter().any(|x| x.0 == f) {
                    b.pinned.remove(&f);
                }
            }
            _ if !live.is_empty() => {
                let d = live[rnd(live.len() as u64) as usize];
                let _ = m.fault(&mut b, d, rnd(6), rnd(2) == 0);
            }
            _ => {}
        }
        // A pinned frame belongs to the dataspace page it was pinned through, or to nobody
        // (quarantine): never to another dataspace or page.
        for &(f, d, p) in &pinned_for {
            for i in m.ids().collect::<Vec<_>>() {
                for (q, g) in m.get(i).unwrap().pages.iter() {
                    if g == f {
                        assert!(i == d && q == p, "pinned frame {} reused by {}:{}", f, i, q);
                    }
                }
            }
        }
        // References: uses by dataspaces plus one per quarantined frame; free = refs 0.
        let mut uses = [0u16; 32];
        for i in m.ids().collect::<Vec<_>>() {
            for (_, f) in m.get(i).unwrap().pages.iter() {
                uses[f as usize] += 1;
            }
        }
        for &f in m.frames.quarantined() {
            assert_eq!(uses[f as usize], 0);
            uses[f as usize] += 1;
        }
        for f in 0..32 {
            assert_eq!(m.frames.refs(f), uses[f as usize]);
        }
        assert_eq!(
            m.frames.free() as usize,
            uses.iter().filter(|&&u| u == 0).count()
        );
    }
}
