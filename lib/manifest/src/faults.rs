//! The fault-injection campaign's shared vocabulary (issue 16; docs/ARCHITECTURE.md §4.1, "Fault
//! injection"): the kinds of fault, the request a controller sends root to inject one, and the
//! seeded plan that says which fault comes when. The guest controller (`tests/fs`'s
//! `fault-campaign`) computes the plan; the host tool (`./sawmill faults`) only names the seed,
//! so a plan is the same wherever it is computed. Plain data and arithmetic: host-tested.

/// The label of a request on `sys:pager` asking root to inject a fault: words 0 and 1 the target
/// server's name (up to 16 bytes, zero-padded), word 2 the [`Kind`], word 3 an argument the fault
/// uses (its random garbage: where a wild write lands, what a corrupted reply says). Allowed only
/// for servers the caller's `may_inject` names. Root answers 0 (armed, or killed) or 1 (refused).
pub const INJECT_LABEL: u16 = 0x5002;

/// A kind of fault. The number is what [`INJECT_LABEL`] carries and what root writes into the
/// target's fault word (every kind but [`Kind::Kill`], which root carries out itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u64)]
pub enum Kind {
    /// Root kills the server at once (whatever it is doing: the moment is the controller's).
    Kill = 1,
    /// The server panics at its next request (the fault point in its server loop).
    Panic = 2,
    /// The server's next request is not carried out and its reply is garbage (an error label no
    /// protocol has, garbage words).
    Corrupt = 3,
    /// The server writes a garbage word somewhere in its own heap, then goes on.
    Wild = 4,
    /// The server spins forever at its next request (found only by hang detection).
    Loop = 5,
    /// A block driver's next disk request is never completed by the "device" (the driver's
    /// request deadline must notice).
    Drop = 6,
    /// A block driver's next disk request fails as the device's `EIO`.
    Eio = 7,
}

/// Every kind, in number order.
pub const ALL: [Kind; 7] = [
    Kind::Kill,
    Kind::Panic,
    Kind::Corrupt,
    Kind::Wild,
    Kind::Loop,
    Kind::Drop,
    Kind::Eio,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Kill => "kill",
            Kind::Panic => "panic",
            Kind::Corrupt => "corrupt",
            Kind::Wild => "wild",
            Kind::Loop => "loop",
            Kind::Drop => "drop",
            Kind::Eio => "eio",
        }
    }
    pub fn from_name(n: &str) -> Option<Kind> {
        ALL.into_iter().find(|k| k.name() == n)
    }
    pub fn from_u64(v: u64) -> Option<Kind> {
        ALL.into_iter().find(|k| *k as u64 == v)
    }
    /// Only a block driver has it (a disk request to drop or fail).
    pub fn disk_only(self) -> bool {
        matches!(self, Kind::Drop | Kind::Eio)
    }
}

/// Points in the controller's workload round (write a file in two halves, fsync it, read files
/// back) where a fault is injected.
pub const MOMENTS: u32 = 4;

/// One planned fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    pub kind: Kind,
    /// Index into the campaign's target list.
    pub target: usize,
    /// Where in the workload's round (0..[`MOMENTS`]).
    pub moment: u32,
    /// The fault's argument (word 3 of the request).
    pub arg: u64,
}

/// A target of the campaign: its name and whether it is a block driver (may get disk faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    pub name: &'a str,
    pub disk: bool,
}

/// SplitMix64: one well-mixed word per (seed, index), so fault `i` of a plan is computed without
/// the ones before it (a campaign that reboots resumes in the middle).
pub fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fault `i` of the plan for `seed` over `targets` with `kinds`: the kind first (uniform), then a
/// target that can take it (a disk kind only goes to a block driver; when no target can take a
/// kind the next kind in the list is tried). `None` when no kind fits any target.
pub fn planned(seed: u64, i: u64, targets: &[Target], kinds: &[Kind]) -> Option<Planned> {
    if targets.is_empty() || kinds.is_empty() {
        return None;
    }
    let r = mix(seed, i);
    let first = (r % kinds.len() as u64) as usize;
    for k in 0..kinds.len() {
        let kind = kinds[(first + k) % kinds.len()];
        let fit = targets
            .iter()
            .filter(|t| t.disk || !kind.disk_only())
            .count();
        if fit == 0 {
            continue;
        }
        let pick = ((r >> 16) % fit as u64) as usize;
        let target = targets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.disk || !kind.disk_only())
            .nth(pick)
            .map(|(n, _)| n)?;
        return Some(Planned {
            kind,
            target,
            moment: ((r >> 32) % MOMENTS as u64) as u32,
            arg: mix(seed ^ 0x5eed, i),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: [Target; 2] = [
        Target {
            name: "blk0",
            disk: true,
        },
        Target {
            name: "pfs0",
            disk: false,
        },
    ];

    #[test]
    fn names_round_trip() {
        for k in ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
            assert_eq!(Kind::from_u64(k as u64), Some(k));
        }
        assert_eq!(Kind::from_name("nap"), None);
        assert_eq!(Kind::from_u64(0), None);
    }

    #[test]
    fn a_plan_is_its_seed() {
        let a: Vec<_> = (0..200).map(|i| planned(7, i, &T, &ALL)).collect();
        let b: Vec<_> = (0..200).map(|i| planned(7, i, &T, &ALL)).collect();
        let c: Vec<_> = (0..200).map(|i| planned(8, i, &T, &ALL)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn every_kind_target_and_moment_comes_up_and_disk_kinds_go_to_drivers() {
        let mut seen_kind = [0u32; 8];
        let mut seen_target = [0u32; 2];
        let mut seen_moment = [0u32; MOMENTS as usize];
        for i in 0..2000 {
            let p = planned(1, i, &T, &ALL).unwrap();
            seen_kind[p.kind as usize] += 1;
            seen_target[p.target] += 1;
            seen_moment[p.moment as usize] += 1;
            if p.kind.disk_only() {
                assert!(T[p.target].disk, "{p:?}");
            }
        }
        for k in ALL {
            // Uniform over 7 kinds: about 285 each.
            assert!(seen_kind[k as usize] > 200, "{k:?}: {seen_kind:?}");
        }
        assert!(seen_target.iter().all(|&n| n > 500), "{seen_target:?}");
        assert!(seen_moment.iter().all(|&n| n > 350), "{seen_moment:?}");
    }

    #[test]
    fn kinds_without_a_fitting_target_are_skipped() {
        let pfs_only = [T[1]];
        for i in 0..100 {
            let p = planned(3, i, &pfs_only, &ALL).unwrap();
            assert!(!p.kind.disk_only());
            assert_eq!(p.target, 0);
        }
        assert_eq!(planned(3, 0, &pfs_only, &[Kind::Drop, Kind::Eio]), None);
        assert_eq!(planned(3, 0, &[], &ALL), None);
        assert_eq!(planned(3, 0, &T, &[]), None);
        let only = planned(3, 5, &T, &[Kind::Panic]).unwrap();
        assert_eq!(only.kind, Kind::Panic);
    }
}
