//! The page-table frames of one address space, listed as they are made, so that ending a task
//! frees exactly those instead of walking every entry of its PML4, PDPTs and page directories
//! (a Linux process's 17 tables took ~27,000 instructions to find that way). Room for a fixed
//! number of frames inside the task object; a space with more is marked and freed by the walk.

/// Frames listed before a space falls back to the walk (a Linux process has about 20).
pub const PT_LIST_MAX: usize = 32;

#[derive(Clone, Copy)]
pub struct PtList {
    frames: [u64; PT_LIST_MAX],
    len: u8,
    /// More frames were made than fit: the list is incomplete.
    overflow: bool,
}

impl Default for PtList {
    fn default() -> Self {
        Self::new()
    }
}

impl PtList {
    pub const fn new() -> Self {
        PtList {
            frames: [0; PT_LIST_MAX],
            len: 0,
            overflow: false,
        }
    }

    /// A page-table frame was made for the space.
    pub fn add(&mut self, frame: u64) {
        if self.overflow {
            return;
        }
        if (self.len as usize) < PT_LIST_MAX {
            self.frames[self.len as usize] = frame;
            self.len += 1;
        } else {
            self.overflow = true;
        }
    }

    /// A page-table frame was taken out of the space (and freed by the caller).
    pub fn remove(&mut self, frame: u64) {
        let n = self.len as usize;
        if let Some(i) = self.frames[..n].iter().position(|&f| f == frame) {
            self.frames[i] = self.frames[n - 1];
            self.len -= 1;
        }
    }

    /// Every page-table frame of the space, or None if the list is incomplete.
    pub fn all(&self) -> Option<&[u64]> {
        if self.overflow {
            None
        } else {
            Some(&self.frames[..self.len as usize])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_adds_and_removals_until_it_overflows() {
        let mut l = PtList::new();
        assert_eq!(l.all(), Some(&[][..]));
        l.add(0x1000);
        l.add(0x2000);
        l.add(0x3000);
        l.remove(0x1000);
        l.remove(0x9000); // not listed: nothing changes
        let mut v = l.all().unwrap().to_vec();
        v.sort();
        assert_eq!(v, [0x2000, 0x3000]);
        for i in 0..PT_LIST_MAX as u64 {
            l.add(0x10_0000 + i * 0x1000);
        }
        assert_eq!(
            l.all(),
            None,
            "a frame that did not fit makes the list incomplete"
        );
        l.remove(0x2000);
        assert_eq!(l.all(), None);
    }
}
