//! `task_reset`'s choice of the mappings an emptied task keeps: the pages its builder lent it
//! that the next program gets again (proc's library data, heap, stack and environment pages).
//! A mapping stays only where the builder put it: derived from the builder's own page at the
//! run's matching address, 4 KiB on both sides. One the program moved (a grant within its own
//! space), or put in a vacated place, goes like every other.

use crate::mapdb::Mapping;

/// Most runs one `task_reset` keeps (the message words holding them).
pub const MAX_RUNS: usize = sawmill_abi::RESET_RUNS;
/// Most pages of one run.
pub const MAX_RUN_PAGES: u64 = sawmill_abi::RESET_RUN_PAGES;
const PAGE: u64 = 4096;

/// Pages `[dst, dst + pages * 4 KiB)` of the task, lent from the builder's `[src, ...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub src: u64,
    pub dst: u64,
    pub pages: u64,
}

/// Why a list of runs is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    TooMany,
    /// Unaligned, empty, longer than [`MAX_RUN_PAGES`], or not inside `in_range`.
    Bad,
    /// Two runs share a task page.
    Overlap,
}

/// Checks `runs` (each range must satisfy `in_range(start, len)`, the user-space test); returns
/// the number of pages they name.
pub fn check(runs: &[Run], in_range: impl Fn(u64, u64) -> bool) -> Result<u64, RunError> {
    if runs.len() > MAX_RUNS {
        return Err(RunError::TooMany);
    }
    let mut total = 0;
    for (i, r) in runs.iter().enumerate() {
        if r.pages == 0
            || r.pages > MAX_RUN_PAGES
            || (r.src | r.dst) & (PAGE - 1) != 0
            || !in_range(r.src, r.pages * PAGE)
            || !in_range(r.dst, r.pages * PAGE)
        {
            return Err(RunError::Bad);
        }
        let end = r.dst + r.pages * PAGE;
        if runs[..i]
            .iter()
            .any(|o| o.dst < end && r.dst < o.dst + o.pages * PAGE)
        {
            return Err(RunError::Overlap);
        }
        total += r.pages;
    }
    Ok(total)
}

/// Whether mapping `m` of the task being emptied stays: derived from `parent`, the builder's
/// (space `builder`) page at the address one of `runs` pairs with `m`'s.
pub fn keeps(runs: &[Run], builder: u32, m: &Mapping, parent: Option<&Mapping>) -> bool {
    let Some(p) = parent else {
        return false;
    };
    if m.huge || p.huge || p.space != builder {
        return false;
    }
    runs.iter().any(|r| {
        m.vaddr >= r.dst && m.vaddr < r.dst + r.pages * PAGE && p.vaddr == r.src + (m.vaddr - r.dst)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(space: u32, vaddr: u64) -> Mapping {
        Mapping {
            space,
            vaddr,
            paddr: 0,
            huge: false,
            rights: 3,
        }
    }
    const USER: fn(u64, u64) -> bool = |a, len| a.checked_add(len).is_some_and(|e| e <= 1 << 47);

    #[test]
    fn runs_are_checked_before_anything_is_emptied() {
        let r = |src, dst, pages| Run { src, dst, pages };
        assert_eq!(check(&[], USER), Ok(0));
        assert_eq!(
            check(
                &[r(0x1000, 0x7000_0000, 1), r(0x2000, 0x7010_0000, 16)],
                USER
            ),
            Ok(17)
        );
        assert_eq!(
            check(&[r(0x1000, 0x7000_0000, 0)], USER),
            Err(RunError::Bad)
        );
        assert_eq!(
            check(&[r(0x1000, 0x7000_0000, 65)], USER),
            Err(RunError::Bad)
        );
        assert_eq!(
            check(&[r(0x1001, 0x7000_0000, 1)], USER),
            Err(RunError::Bad)
        );
        assert_eq!(
            check(&[r(0x1000, 0x7000_0800, 1)], USER),
            Err(RunError::Bad)
        );
        assert_eq!(check(&[r(0x1000, 1 << 47, 1)], USER), Err(RunError::Bad));
        assert_eq!(
            check(
                &[r(0x1000, 0x7000_0000, 2), r(0x9000, 0x7000_1000, 1)],
                USER
            ),
            Err(RunError::Overlap)
        );
        assert_eq!(
            check(&[r(0x1000, 0x7000_0000, 1); MAX_RUNS + 1], USER),
            Err(RunError::TooMany)
        );
    }

    #[test]
    fn only_the_builders_page_at_the_paired_address_stays() {
        let runs = [Run {
            src: 0x10_0000,
            dst: 0x7010_0000,
            pages: 4,
        }];
        let at = |v| m(1, v);
        // In place: stays.
        assert!(keeps(&runs, 0, &at(0x7010_2000), Some(&m(0, 0x10_2000))));
        // The builder's page, moved to another page of the run (a grant within the task).
        assert!(!keeps(&runs, 0, &at(0x7010_2000), Some(&m(0, 0x10_1000))));
        // Outside every run, another space's page, or a root of the task's own.
        assert!(!keeps(&runs, 0, &at(0x7010_4000), Some(&m(0, 0x10_4000))));
        assert!(!keeps(&runs, 0, &at(0x7010_2000), Some(&m(5, 0x10_2000))));
        assert!(!keeps(&runs, 0, &at(0x7010_2000), None));
        // 2 MiB on either side.
        let mut big = m(0, 0x10_2000);
        big.huge = true;
        assert!(!keeps(&runs, 0, &at(0x7010_2000), Some(&big)));
        assert!(!keeps(&[], 0, &at(0x7010_2000), Some(&m(0, 0x10_2000))));
    }
}
