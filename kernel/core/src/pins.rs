//! DMA pins: the frames of user RAM that some task has told a device to read or write.
//!
//! A driver pins the pages of a request before it gives their physical addresses to its device
//! and unpins them when the device has finished (`Sys::Pin`, `Sys::Unpin`). The kernel keeps a
//! count per frame of user RAM ([`PinTable`], sized once at boot) and, per task, the list of pins
//! it holds ([`PinList`], bounded by [`PINS_PER_TASK`]; the kernel charges it to the task's
//! factory). The memory server asks the count (through `translate`) before a freed frame goes
//! back to its pool: a frame with pins waits in quarantine, so a device never writes into a frame
//! that has changed hands (docs/memory.md, "DMA and frame reuse").
//!
//! Pure bookkeeping on physical addresses: no memory is touched, so it is tested on the host.
//! What "mapped", "writable" and "charged" mean is the kernel's business (`kernel/src/pin.rs`).
use alloc::vec::Vec;

/// Most pins one task may hold at once (all pages of a full batch of the block driver: 16
/// requests of up to 9 pages each, with room to spare).
pub const PINS_PER_TASK: usize = 256;

const PAGE: u64 = 4096;

/// Why a pin or unpin was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinError {
    /// The address is not in user RAM (device memory, the kernel's own frames).
    NotRam,
    /// The task holds [`PINS_PER_TASK`] pins already.
    ListFull,
    /// The task holds no pin on that frame.
    NotPinned,
}

/// Pin counts of every frame of user RAM.
pub struct PinTable {
    /// (start, end, index of the first frame) of each user RAM range, page aligned.
    ranges: Vec<(u64, u64, usize)>,
    counts: Vec<u32>,
}

/// The pins one task holds: physical frame addresses, one entry per pin (a frame pinned twice
/// is listed twice).
pub struct PinList {
    frames: [u64; PINS_PER_TASK],
    n: usize,
}

impl Default for PinList {
    fn default() -> Self {
        Self::new()
    }
}

impl PinList {
    pub const fn new() -> PinList {
        PinList {
            frames: [0; PINS_PER_TASK],
            n: 0,
        }
    }
    /// Pins held.
    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

impl PinTable {
    /// A table for the user RAM `ranges` (start, end); partial pages at the edges are left out.
    pub fn new(ranges: &[(u64, u64)]) -> PinTable {
        let mut v = Vec::with_capacity(ranges.len());
        let mut n = 0;
        for &(s, e) in ranges {
            let (s, e) = (s.next_multiple_of(PAGE), e & !(PAGE - 1));
            if s < e {
                v.push((s, e, n));
                n += ((e - s) / PAGE) as usize;
            }
        }
        PinTable {
            ranges: v,
            counts: alloc::vec![0; n],
        }
    }

    /// The table's index of the frame holding `pa`, if it is user RAM.
    fn index(&self, pa: u64) -> Option<usize> {
        self.ranges
            .iter()
            .find(|r| pa >= r.0 && pa < r.1)
            .map(|r| r.2 + ((pa - r.0) / PAGE) as usize)
    }

    /// Whether `pa` lies in a whole page of user RAM (a frame that can be pinned).
    pub fn is_ram(&self, pa: u64) -> bool {
        self.index(pa).is_some()
    }

    /// Pins on the frame holding `pa` (0 for anything that is not user RAM).
    pub fn count(&self, pa: u64) -> u32 {
        self.index(pa).map_or(0, |i| self.counts[i])
    }

    /// Frames with at least one pin (for checks).
    pub fn pinned_frames(&self) -> usize {
        self.counts.iter().filter(|&&c| c > 0).count()
    }

    /// Adds one pin of `list`'s task on the frame holding `pa`.
    pub fn pin(&mut self, list: &mut PinList, pa: u64) -> Result<(), PinError> {
        let i = self.index(pa).ok_or(PinError::NotRam)?;
        if list.n == PINS_PER_TASK {
            return Err(PinError::ListFull);
        }
        list.frames[list.n] = pa & !(PAGE - 1);
        list.n += 1;
        // Cannot overflow: every pin is in some task's list, and there are fewer than 2^32.
        self.counts[i] += 1;
        Ok(())
    }

    /// Removes one pin of `list`'s task on the frame holding `pa`.
    pub fn unpin(&mut self, list: &mut PinList, pa: u64) -> Result<(), PinError> {
        let f = pa & !(PAGE - 1);
        let at = list.frames[..list.n]
            .iter()
            .position(|&x| x == f)
            .ok_or(PinError::NotPinned)?;
        list.n -= 1;
        list.frames[at] = list.frames[list.n];
        if let Some(i) = self.index(f) {
            self.counts[i] -= 1;
        }
        Ok(())
    }

    /// Removes the pins `list`'s task took after it held `len` (a call that took some and then
    /// failed gives them back).
    pub fn truncate(&mut self, list: &mut PinList, len: usize) {
        while list.n > len {
            list.n -= 1;
            if let Some(i) = self.index(list.frames[list.n]) {
                self.counts[i] -= 1;
            }
        }
    }

    /// Removes every pin of `list`'s task (it unpins all, or it died); returns how many.
    pub fn release_all(&mut self, list: &mut PinList) -> usize {
        let n = list.n;
        for k in 0..n {
            if let Some(i) = self.index(list.frames[k]) {
                self.counts[i] -= 1;
            }
        }
        list.n = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn table() -> PinTable {
        // Two ranges, the first with ragged edges.
        PinTable::new(&[(0x10_0800, 0x10_4800), (0x80_0000, 0x80_2000)])
    }

    #[test]
    fn only_whole_pages_of_user_ram() {
        let mut t = table();
        let mut l = PinList::new();
        assert_eq!(t.pin(&mut l, 0x10_0000), Err(PinError::NotRam));
        assert_eq!(
            t.pin(&mut l, 0x10_0900),
            Err(PinError::NotRam),
            "partial first page"
        );
        assert_eq!(
            t.pin(&mut l, 0x10_4000),
            Err(PinError::NotRam),
            "partial last page"
        );
        assert_eq!(t.pin(&mut l, 0x80_2000), Err(PinError::NotRam));
        assert_eq!(
            t.pin(&mut l, 0xfee0_0000),
            Err(PinError::NotRam),
            "device memory"
        );
        assert!(l.is_empty());
        t.pin(&mut l, 0x10_3fff).unwrap();
        t.pin(&mut l, 0x80_1000).unwrap();
        assert_eq!(t.count(0x10_3000), 1);
        assert_eq!(t.count(0x80_1abc), 1);
        assert_eq!(t.count(0x80_0000), 0);
        assert_eq!(t.count(0x1234_5000), 0);
        assert_eq!(t.pinned_frames(), 2);
    }

    #[test]
    fn counts_follow_pins_of_several_tasks() {
        let mut t = table();
        let (mut a, mut b) = (PinList::new(), PinList::new());
        t.pin(&mut a, 0x80_0000).unwrap();
        t.pin(&mut a, 0x80_0010).unwrap();
        t.pin(&mut b, 0x80_0000).unwrap();
        assert_eq!(t.count(0x80_0000), 3);
        // b cannot drop a's pins, and nobody can drop a pin that is not there.
        t.unpin(&mut b, 0x80_0000).unwrap();
        assert_eq!(t.unpin(&mut b, 0x80_0000), Err(PinError::NotPinned));
        assert_eq!(t.unpin(&mut a, 0x80_1000), Err(PinError::NotPinned));
        assert_eq!(t.unpin(&mut a, 0xfee0_0000), Err(PinError::NotPinned));
        assert_eq!(t.count(0x80_0000), 2);
        t.unpin(&mut a, 0x80_0fff).unwrap();
        assert_eq!(t.count(0x80_0000), 1);
        assert_eq!(t.release_all(&mut a), 1);
        assert_eq!(t.count(0x80_0000), 0);
        assert_eq!(t.release_all(&mut a), 0);
        assert_eq!(t.pinned_frames(), 0);
    }

    #[test]
    fn a_task_list_is_bounded() {
        let mut t = table();
        let mut l = PinList::new();
        for k in 0..PINS_PER_TASK as u64 {
            t.pin(&mut l, 0x10_1000 + (k % 3) * PAGE).unwrap();
        }
        assert_eq!(t.pin(&mut l, 0x10_1000), Err(PinError::ListFull));
        assert_eq!(l.len(), PINS_PER_TASK);
        let total: u32 = (0..3).map(|k| t.count(0x10_1000 + k * PAGE)).sum();
        assert_eq!(total as usize, PINS_PER_TASK);
        // A failed call gives back what it took, and nothing before it.
        t.truncate(&mut l, PINS_PER_TASK - 2);
        assert_eq!(l.len(), PINS_PER_TASK - 2);
        let total: u32 = (0..3).map(|k| t.count(0x10_1000 + k * PAGE)).sum();
        assert_eq!(total as usize, PINS_PER_TASK - 2);
        t.truncate(&mut l, PINS_PER_TASK);
        assert_eq!(l.len(), PINS_PER_TASK - 2);
        // A death releases everything, whatever the order of the pins.
        assert_eq!(t.release_all(&mut l), PINS_PER_TASK - 2);
        assert_eq!(t.pinned_frames(), 0);
        t.pin(&mut l, 0x10_1000).unwrap();
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn random_pins_match_a_model() {
        // Counts always equal the number of list entries naming each frame.
        let mut t = table();
        let mut lists = [PinList::new(), PinList::new(), PinList::new()];
        let frames = [
            0x10_1000u64,
            0x10_2000,
            0x10_3000,
            0x80_0000,
            0x80_1000,
            0x5000,
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let l = &mut lists[(x % 3) as usize];
            let f = frames[((x >> 8) % 6) as usize];
            match (x >> 16) % 7 {
                0..=2 => {
                    let full = l.len() == PINS_PER_TASK;
                    let want = if f == 0x5000 {
                        Err(PinError::NotRam)
                    } else if full {
                        Err(PinError::ListFull)
                    } else {
                        Ok(())
                    };
                    assert_eq!(t.pin(l, f), want);
                }
                3..=5 => {
                    let _ = t.unpin(l, f);
                }
                _ => {
                    t.release_all(l);
                }
            }
            for &f in &frames {
                let listed: usize = lists
                    .iter()
                    .map(|l| l.frames[..l.n].iter().filter(|&&g| g == f).count())
                    .sum();
                assert_eq!(t.count(f) as usize, listed);
            }
        }
    }
}
