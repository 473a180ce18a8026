//! The ext2 PFS cache's read-ahead policy (servers/ext2/src/cache.rs does the reading): which
//! device pages to read on a miss, and when to start reading the next window without waiting,
//! as Linux's read-ahead does with its marker page. Pure bookkeeping over device page numbers,
//! kept here so that it is host-tested; it touches nothing but itself.
//!
//! - A **miss** reads a window synchronously, the missed page first: [`Readahead::min`] pages,
//!   or, where the miss is at the page after the last window (a sequential reader that ran out),
//!   twice the last window, up to [`Readahead::max`].
//! - The page after a missed one becomes the **marker**: a reader that goes on to it is
//!   sequential, and its first access starts the next window (twice the last, up to the most)
//!   *asynchronously*, from where the last window ended. The first page of that new window is
//!   the next marker, so while the reader consumes one window the next is on its way from the
//!   disk, and a steady reader waits only where the disk is slower than its own work.
//! - Each window reports how many pages it really got ([`Readahead::read`],
//!   [`Readahead::started`]): fewer than asked where a page was cached already, the device ended
//!   or no cache slot was free. An empty asynchronous window disarms the marker: the reader's
//!   next miss starts over.
//! - Every window stops at the **end** of the file being read (the device page after its last
//!   block, passed with each miss): read-ahead never brings in blocks past a file's end, as
//!   Linux's (which reads ahead by file offset) never does. The stream is the file's: a miss
//!   with another end is a new reader and starts from the smallest window, even where the new
//!   file's blocks follow the last window on the disk.

/// No page: the marker when none is armed, and where no window has ended yet.
pub const NONE: u64 = u64::MAX;

/// One cache's read-ahead state (a single stream: a second reader that interleaves only makes
/// the first's next miss start from the smallest window again).
pub struct Readahead {
    min: usize,
    max: usize,
    /// The page after the last window (synchronous or not): a miss there is a sequential
    /// reader's.
    next: u64,
    /// The last window's size as asked.
    window: usize,
    /// The page whose access starts the next window asynchronously.
    marker: u64,
    /// The end (exclusive device page) of the file the stream reads: no window reaches it.
    end: u64,
}

/// What a hit on the marker starts: `pages` pages from `start`, not waited for.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Window {
    pub start: u64,
    pub pages: usize,
}

impl Readahead {
    /// Windows of `min` pages at first, doubling to at most `max` (both at least 1).
    pub const fn new(min: usize, max: usize) -> Readahead {
        let min = if min == 0 { 1 } else { min };
        Readahead {
            min,
            max: if max < min { min } else { max },
            next: NONE,
            window: min,
            marker: NONE,
            end: NONE,
        }
    }

    pub fn min(&self) -> usize {
        self.min
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// The armed marker ([`NONE`] if none).
    pub fn marker(&self) -> u64 {
        self.marker
    }

    /// A miss at page `p` of a file whose blocks end before device page `end` (the page after
    /// its last block; [`NONE`]: no end): how many pages to read now, `p` first — at least 1,
    /// never reaching `end`.
    pub fn miss(&mut self, p: u64, end: u64) -> usize {
        self.window = if p == self.next && end == self.end {
            self.window.saturating_mul(2).min(self.max)
        } else {
            self.min
        };
        self.end = end;
        clip(p, self.window, end)
    }

    /// The window of the miss at `p` covered `pages` pages (at least `p` itself; read, or found
    /// cached): the next window starts after them, and the page after `p` is the marker if the
    /// window holds it.
    pub fn read(&mut self, p: u64, pages: usize) {
        self.next = p.saturating_add(pages as u64);
        self.marker = if pages > 1 { p + 1 } else { NONE };
    }

    /// A hit on page `p`: the window to start now without waiting, if `p` is the marker (the
    /// marker is then used up until [`Readahead::started`] arms the next).
    #[inline(always)]
    pub fn hit(&mut self, p: u64) -> Option<Window> {
        if p != self.marker {
            return None;
        }
        self.marker = NONE;
        if self.next == NONE {
            return None;
        }
        self.window = self.window.saturating_mul(2).min(self.max);
        if self.next >= self.end {
            // The last window reached the file's end: nothing more to read ahead.
            return None;
        }
        Some(Window {
            start: self.next,
            pages: clip(self.next, self.window, self.end),
        })
    }

    /// The window [`Readahead::hit`] asked for covered `pages` pages from its start (read, or
    /// found cached; 0: nothing was started, the marker stays disarmed).
    pub fn started(&mut self, w: Window, pages: usize) {
        if pages == 0 {
            return;
        }
        self.next = w.start.saturating_add(pages as u64);
        self.marker = w.start;
    }

    /// The reader reached the marker `p` while the last window was still being read (the one
    /// asynchronous window in flight is busy): the page after it becomes the marker, so the next
    /// window starts from the reader's first access once the last one is in, rather than never.
    pub fn defer(&mut self, p: u64) {
        if p == self.marker && p.saturating_add(1) < self.next {
            self.marker = p + 1;
        }
    }

    /// An asynchronous window could not be read (the driver failed it or went away): its pages
    /// are read again on demand, and the reader's next miss starts from the smallest window.
    pub fn failed(&mut self) {
        self.marker = NONE;
        self.next = NONE;
        self.window = self.min;
    }
}

/// `pages` pages from `p`, but none at or past `end` (at least `p` itself).
fn clip(p: u64, pages: usize, end: u64) -> usize {
    let room = end.saturating_sub(p).max(1);
    usize::try_from(room).map_or(pages, |room| pages.min(room))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use alloc::string::String;
    use alloc::vec::Vec;

    /// A sequential reader of `pages` pages over a cache that holds everything: how each page
    /// is served (`M` miss, `h` plain hit, `A` hit that starts an asynchronous window), with the
    /// windows read. Pages of a started window count as present.
    fn stream(ra: &mut Readahead, first: u64, pages: u64) -> (String, Vec<(u64, usize)>) {
        stream_of_file(
            ra,
            first,
            pages,
            NONE,
            &mut std::collections::BTreeSet::new(),
        )
    }

    /// `stream` of a file whose blocks end before device page `end`, over the pages `present`.
    fn stream_of_file(
        ra: &mut Readahead,
        first: u64,
        pages: u64,
        end: u64,
        present: &mut std::collections::BTreeSet<u64>,
    ) -> (String, Vec<(u64, usize)>) {
        let (mut how, mut windows) = (String::new(), Vec::new());
        for p in first..first + pages {
            if present.contains(&p) {
                match ra.hit(p) {
                    Some(w) => {
                        how.push('A');
                        present.extend(w.start..w.start + w.pages as u64);
                        ra.started(w, w.pages);
                        windows.push((w.start, w.pages));
                    }
                    None => how.push('h'),
                }
            } else {
                how.push('M');
                let n = ra.miss(p, end);
                present.extend(p..p + n as u64);
                ra.read(p, n);
                windows.push((p, n));
            }
        }
        (how, windows)
    }

    #[test]
    fn a_sequential_reader_misses_once_then_reads_ahead_asynchronously() {
        let mut ra = Readahead::new(4, 16);
        let (how, windows) = stream(&mut ra, 100, 60);
        // One miss; the next page starts the first asynchronous window (8 pages after the 4
        // read), whose first page starts the next (16, the most), and so on.
        assert_eq!(
            windows,
            [
                (100, 4),
                (104, 8),
                (112, 16),
                (128, 16),
                (144, 16),
                (160, 16)
            ]
        );
        assert!(how.starts_with("MAhhAhhhhhhhA"), "{how}");
        assert_eq!(how.matches('M').count(), 1);
        assert_eq!(ra.marker(), 160);
    }

    #[test]
    fn no_window_reaches_the_files_end() {
        // A 64-page file at 100 (the bench's 256 KiB cold file), the next file right after it.
        let (mut ra, mut present) = (Readahead::new(32, 256), std::collections::BTreeSet::new());
        let (how, windows) = stream_of_file(&mut ra, 100, 64, 164, &mut present);
        // The first window (32), then the rest of the file (32 of the 64 asked), nothing after.
        assert_eq!(windows, [(100, 32), (132, 32)]);
        assert_eq!(how.matches('M').count(), 1, "{how}");
        assert_eq!(present.last(), Some(&163));
        // The marker of the last window starts nothing: the file has ended.
        assert_eq!(ra.hit(132), None);
    }

    #[test]
    fn a_small_file_is_read_whole_and_no_further() {
        let mut ra = Readahead::new(32, 256);
        assert_eq!(ra.miss(50, 53), 3);
        ra.read(50, 3);
        assert_eq!(ra.hit(51), None);
        // A page at or past the end (a caller that knows no better) is still read alone.
        assert_eq!(ra.miss(60, 53), 1);
    }

    #[test]
    fn the_next_file_on_the_disk_starts_a_new_stream() {
        let (mut ra, mut present) = (Readahead::new(4, 64), std::collections::BTreeSet::new());
        stream_of_file(&mut ra, 0, 40, 40, &mut present);
        // The next file's blocks follow on the disk: its first miss is not the last stream's
        // sequel, so it reads the smallest window, not a doubled one.
        assert_eq!(ra.miss(40, 100), 4);
        // The same file's next miss after its window is sequential again.
        ra.read(40, 4);
        assert_eq!(ra.miss(44, 100), 8);
    }

    #[test]
    fn a_contiguous_file_still_reads_in_the_big_windows() {
        let (mut ra, mut present) = (Readahead::new(32, 256), std::collections::BTreeSet::new());
        let (_, windows) = stream_of_file(&mut ra, 1000, 4096, 1000 + 4096, &mut present);
        assert_eq!(
            &windows[..4],
            [(1000, 32), (1032, 64), (1096, 128), (1224, 256)]
        );
        assert_eq!(windows.iter().filter(|w| w.1 == 256).count(), 15);
        assert_eq!(windows.last(), Some(&(5064, 32)));
        assert_eq!(present.last(), Some(&(1000 + 4095)));
    }

    #[test]
    fn a_marker_reached_while_a_window_is_in_flight_moves_on() {
        let mut ra = Readahead::new(4, 16);
        ra.miss(0, NONE);
        ra.read(0, 4);
        let w = ra.hit(1).unwrap();
        ra.started(w, w.pages);
        // The reader reaches the new window's first page before its read is done.
        assert_eq!(ra.marker(), 4);
        ra.defer(4);
        assert_eq!(ra.marker(), 5);
        assert_eq!(
            ra.hit(5),
            Some(Window {
                start: 12,
                pages: 16
            })
        );
        // Never past the last window's end.
        let mut ra = Readahead::new(4, 16);
        ra.miss(0, NONE);
        ra.read(0, 2);
        ra.defer(1);
        assert_eq!(ra.marker(), 1);
        // Only the marker moves.
        ra.defer(0);
        assert_eq!(ra.marker(), 1);
    }

    #[test]
    fn a_window_is_started_only_from_the_marker() {
        let mut ra = Readahead::new(4, 16);
        assert_eq!(ra.miss(10, NONE), 4);
        ra.read(10, 4);
        // Pages other than the marker start nothing, and do not use it up.
        assert_eq!(ra.hit(10), None);
        assert_eq!(ra.hit(12), None);
        assert_eq!(
            ra.hit(11),
            Some(Window {
                start: 14,
                pages: 8
            })
        );
        // Used up: a second hit on it starts nothing more.
        assert_eq!(ra.hit(11), None);
    }

    #[test]
    fn a_miss_elsewhere_starts_over_from_the_smallest_window() {
        let mut ra = Readahead::new(4, 64);
        assert_eq!(ra.miss(0, NONE), 4);
        ra.read(0, 4);
        assert_eq!(ra.miss(4, NONE), 8); // sequential: doubles
        ra.read(4, 8);
        assert_eq!(ra.miss(12, NONE), 16);
        ra.read(12, 16);
        assert_eq!(ra.miss(500, NONE), 4); // elsewhere: the smallest again
        ra.read(500, 4);
        assert_eq!(ra.marker(), 501);
    }

    #[test]
    fn windows_never_exceed_the_most() {
        let mut ra = Readahead::new(8, 20);
        let (_, windows) = stream(&mut ra, 0, 400);
        assert!(windows.iter().all(|&(_, n)| n <= 20), "{windows:?}");
        assert!(windows.iter().any(|&(_, n)| n == 20));
    }

    #[test]
    fn a_short_window_moves_the_next_start_and_an_empty_one_disarms() {
        let mut ra = Readahead::new(4, 16);
        ra.miss(0, NONE);
        // Only 2 of 4 pages were read (page 2 was cached).
        ra.read(0, 2);
        let w = ra.hit(1).unwrap();
        assert_eq!(w.start, 2);
        // Page 2 is cached already: the window got nothing, nothing is armed.
        ra.started(w, 0);
        assert_eq!(ra.marker(), NONE);
        assert_eq!(ra.hit(2), None);
        // A window of one page arms no marker (there is no page after it in the window).
        ra.miss(40, NONE);
        ra.read(40, 1);
        assert_eq!(ra.marker(), NONE);
    }

    #[test]
    fn a_failed_window_disarms_and_restarts_small() {
        let mut ra = Readahead::new(4, 16);
        let (_, windows) = stream(&mut ra, 0, 20);
        let &(last, n) = windows.last().unwrap();
        ra.failed();
        assert_eq!(ra.marker(), NONE);
        // The failed window's pages are missed again: from the smallest window, not doubled.
        assert_eq!(ra.miss(last + n as u64, NONE), 4);
        assert_eq!(ra.miss(last, NONE), 4);
    }

    #[test]
    fn degenerate_sizes_are_at_least_one_page() {
        let mut ra = Readahead::new(0, 0);
        assert_eq!((ra.min(), ra.max()), (1, 1));
        assert_eq!(ra.miss(0, NONE), 1);
        ra.read(0, 1);
        assert_eq!(ra.marker(), NONE);
        let ra = Readahead::new(4, 2);
        assert_eq!(ra.max(), 4);
    }

    #[test]
    fn the_device_end_saturates() {
        let mut ra = Readahead::new(4, 16);
        ra.miss(u64::MAX - 2, NONE);
        ra.read(u64::MAX - 2, 4);
        // next saturates at NONE: a marker hit then starts nothing.
        assert_eq!(ra.hit(u64::MAX - 1), None);
    }
}
