//! Counting the holders of a watched badge ("no more senders").
//!
//! A server may mint a badged capability asking to be told when the last capability carrying
//! that badge is gone. The kernel then keeps one [`SenderCount`] for the badge: every
//! capability derived from the minted one (in any table) and every kernel reference made from
//! such a capability is a holder; a holder goes when its capability is deleted, revoked, or
//! destroyed with its table. The moment the last holder goes is reported exactly once, after
//! which the count accepts no new holders (nothing can derive from a capability that no longer
//! exists, so none can arrive).
//!
//! Pure logic with no knowledge of what is counted; the kernel embeds it in its watch object.
//! Touches nothing but itself.

/// The number of holders of one watched badge.
#[derive(Debug)]
pub struct SenderCount {
    holders: u32,
    reported: bool,
}

/// What dropping a holder meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Others remain.
    Held,
    /// That was the last holder: notify (reported once, never again).
    Last,
}

impl SenderCount {
    /// The count of a fresh mint: the minted capability is the one holder.
    pub const fn minted() -> Self {
        SenderCount {
            holders: 1,
            reported: false,
        }
    }

    /// Holders at the moment.
    pub fn holders(&self) -> u32 {
        self.holders
    }

    /// Whether the last holder went (and was reported).
    pub fn is_reported(&self) -> bool {
        self.reported
    }

    /// One more holder (a capability derived from a holder, or a kernel reference made from
    /// one). A holder exists to derive from, so the count is never zero here.
    pub fn add(&mut self) {
        debug_assert!(self.holders > 0 && !self.reported);
        self.holders += 1;
    }

    /// One holder went.
    pub fn drop_one(&mut self) -> Dropped {
        debug_assert!(self.holders > 0);
        self.holders -= 1;
        if self.holders == 0 && !self.reported {
            self.reported = true;
            Dropped::Last
        } else {
            Dropped::Held
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cspace::{CSpace, SlotId};
    extern crate std;
    use std::vec::Vec;

    /// A capability as the kernel keeps it, reduced to what counting needs: which watch it
    /// carries, if any.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct TestCap {
        watch: Option<usize>,
    }

    /// The kernel's rules around the capability space: a payload entering a slot by
    /// derivation is a new holder; every payload the space hands back is a holder gone.
    struct Model {
        cs: CSpace<TestCap>,
        counts: Vec<SenderCount>,
        notices: Vec<usize>,
    }

    impl Model {
        fn gone(&mut self, caps: Vec<TestCap>) {
            for c in caps {
                if let Some(w) = c.watch {
                    if self.counts[w].drop_one() == Dropped::Last {
                        self.notices.push(w);
                    }
                }
            }
        }
        fn derive(&mut self, src: SlotId, dst: SlotId) {
            if self.cs.derive(src, dst, |c| *c).is_ok() {
                if let Some(w) = self.cs.get(dst).unwrap().watch {
                    self.counts[w].add();
                }
            }
        }
        fn mint(&mut self, src: SlotId, dst: SlotId) -> Option<usize> {
            let w = self.counts.len();
            self.cs
                .derive(src, dst, |_| TestCap { watch: Some(w) })
                .ok()?;
            self.counts.push(SenderCount::minted());
            Some(w)
        }
        fn delete(&mut self, s: SlotId) {
            if let Ok(c) = self.cs.delete(s) {
                self.gone(std::vec![c]);
            }
        }
        fn revoke(&mut self, s: SlotId) {
            if let Ok(v) = self.cs.revoke(s) {
                self.gone(v);
            }
        }
        fn destroy(&mut self, t: u32) {
            let v = self.cs.destroy_table(t);
            self.gone(v);
        }
        /// Capabilities in the space carrying each watch.
        fn live(&self, tables: &[u32]) -> Vec<u32> {
            let mut n = std::vec![0; self.counts.len()];
            for &t in tables {
                for i in 0..self.cs.table_len(t) {
                    let id = SlotId {
                        table: t,
                        index: i as u32,
                    };
                    if let Ok(TestCap { watch: Some(w) }) = self.cs.get(id) {
                        n[*w] += 1;
                    }
                }
            }
            n
        }
    }

    fn s(t: u32, i: u32) -> SlotId {
        SlotId { table: t, index: i }
    }

    fn model() -> Model {
        Model {
            cs: CSpace::new(),
            counts: Vec::new(),
            notices: Vec::new(),
        }
    }

    #[test]
    fn one_notice_after_the_last_copy_in_any_table() {
        let mut m = model();
        let server = m.cs.create_table(8);
        let a = m.cs.create_table(8);
        let b = m.cs.create_table(8);
        m.cs.insert_root(s(server, 0), TestCap { watch: None })
            .unwrap();
        let w = m.mint(s(server, 0), s(server, 1)).unwrap();
        // Handed to two clients; the server drops its own copy.
        m.derive(s(server, 1), s(a, 0));
        m.derive(s(server, 1), s(b, 0));
        m.derive(s(a, 0), s(a, 1));
        m.delete(s(server, 1));
        assert_eq!(m.counts[w].holders(), 3);
        m.delete(s(a, 0));
        m.delete(s(a, 1));
        assert!(m.notices.is_empty(), "a holder remains in b");
        // b's death: its table goes.
        m.destroy(b);
        assert_eq!(m.notices, std::vec![w]);
        assert!(m.counts[w].is_reported());
    }

    #[test]
    fn revoke_of_the_ancestor_reports() {
        let mut m = model();
        let server = m.cs.create_table(4);
        let a = m.cs.create_table(4);
        m.cs.insert_root(s(server, 0), TestCap { watch: None })
            .unwrap();
        let w = m.mint(s(server, 0), s(server, 1)).unwrap();
        m.derive(s(server, 1), s(a, 0));
        m.derive(s(a, 0), s(a, 1));
        // Revoking the unwatched parent takes the minted capability and all its copies.
        m.revoke(s(server, 0));
        assert_eq!(m.notices, std::vec![w]);
        assert_eq!(m.counts[w].holders(), 0);
    }

    #[test]
    fn separate_badges_separate_notices() {
        let mut m = model();
        let server = m.cs.create_table(8);
        m.cs.insert_root(s(server, 0), TestCap { watch: None })
            .unwrap();
        let w1 = m.mint(s(server, 0), s(server, 1)).unwrap();
        let w2 = m.mint(s(server, 0), s(server, 2)).unwrap();
        m.derive(s(server, 2), s(server, 3));
        m.delete(s(server, 2));
        m.delete(s(server, 1));
        assert_eq!(m.notices, std::vec![w1]);
        m.delete(s(server, 3));
        assert_eq!(m.notices, std::vec![w1, w2]);
    }

    #[test]
    fn random_operations_report_exactly_when_the_last_goes() {
        // Seeded random mints, copies, moves, deletes, revokes and table deaths across three
        // tables; after every step each watch is reported iff no capability carrying it is
        // left, and never twice.
        let mut m = model();
        let mut tables = std::vec![m.cs.create_table(12), m.cs.create_table(12)];
        let root = m.cs.create_table(2);
        m.cs.insert_root(s(root, 0), TestCap { watch: None })
            .unwrap();
        tables.push(root);
        let mut seed = 0x5eed_u64;
        let mut rnd = |n: u32| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % n as u64) as u32
        };
        for step in 0..20000 {
            let ti = rnd(3) as usize;
            let a = s(tables[ti], rnd(12));
            let b = s(tables[rnd(2) as usize], rnd(12));
            match rnd(16) {
                0..=2 => {
                    let _ = m.mint(s(root, 0), b);
                }
                3..=8 => m.derive(a, b),
                9 => {
                    let _ = m.cs.move_cap(a, b);
                }
                10..=12 => m.delete(a),
                13 => m.revoke(a),
                14 if ti < 2 && rnd(20) == 0 => {
                    m.destroy(tables[ti]);
                    tables[ti] = m.cs.create_table(12);
                }
                _ => {}
            }
            // The server's own unwatched capability comes back if a step deleted it.
            if m.cs.is_free(s(root, 0)) == Ok(true) {
                m.cs.insert_root(s(root, 0), TestCap { watch: None })
                    .unwrap();
            }
            let live = m.live(&tables);
            let mut reported = std::vec![0; m.counts.len()];
            for &w in &m.notices {
                reported[w] += 1;
            }
            for (w, &live) in live.iter().enumerate() {
                assert_eq!(m.counts[w].holders(), live, "step {step} watch {w}");
                assert_eq!(reported[w], u32::from(live == 0), "step {step} watch {w}");
            }
        }
        assert!(m.notices.len() > 100, "the walk reports often");
    }
}
