//! The read buffer of an open file (`file.read_buffer`, `file.read_to_buffer` in
//! interfaces/fs.idl): the memory both sides of the copy path share, and its one rule.
//!
//! The PFS owns [`PAGES`] pages: [`DATA`] bytes of file data, then a header page whose first
//! three words are [`Header`]. The client maps them read-only. Only the PFS writes, and only from
//! its single server thread: it fills the data for `read_to_buffer` and records which range of the
//! file the data holds, and it forgets the range (see [`Header::forget`]) whenever the file's
//! bytes change (a write by anyone, a truncate), so a client that finds its range in the header
//! reads what a call would have returned. Several tasks may share one open file (a forked child
//! adopts its parent's) and so one buffer: a fill for one of them can run while another copies
//! out, which the sequence word detects (a sequence lock: odd while the PFS changes the buffer;
//! the reader checks it is even and unchanged around its copy).
//!
//! Touches nothing but the memory it is given: host-testable.
use core::sync::atomic::{fence, AtomicU64, Ordering};

/// Bytes of file data a buffer holds: the most one `read_to_buffer` moves.
pub const DATA: usize = 16 << 10;
/// Pages of a buffer: the data, then the header page.
pub const PAGES: u64 = (DATA / 4096) as u64 + 1;

/// The header, at byte [`DATA`] of the buffer.
#[repr(C)]
pub struct Header {
    /// Odd while the PFS changes the data or the range.
    seq: AtomicU64,
    /// The file offset of the data's first byte.
    off: AtomicU64,
    /// How many bytes of the data are the file's from `off` (0: none).
    len: AtomicU64,
}

impl Header {
    /// The header of the buffer at `base` ([`PAGES`] pages, page-aligned).
    ///
    /// # Safety
    /// `base + DATA` must stay readable (and, for the PFS's calls, writable) for as long as the
    /// returned reference is used.
    pub unsafe fn at<'a>(base: u64) -> &'a Header {
        // SAFETY: the caller's contract; the header's words are atomics, so shared access from
        // another task is allowed.
        unsafe { &*((base + DATA as u64) as *const Header) }
    }

    /// (PFS) Before changing the data: readers that copy now will see the sequence move.
    pub fn begin(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s | 1, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// (PFS) After changing the data: it holds the file's bytes `[off, off + len)`.
    pub fn finish(&self, off: u64, len: u64) {
        self.off.store(off, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store((s | 1) + 1, Ordering::Release);
    }

    /// (PFS) The file's bytes changed: the data no longer stands for any range.
    pub fn forget(&self) {
        self.begin();
        self.finish(0, 0);
    }

    /// (Client) Where the file's bytes `[off, off + len)` are in the data, if all of them are
    /// there, with the sequence to confirm with [`Header::unchanged`] after copying them out.
    #[inline]
    pub fn find(&self, off: u64, len: u64) -> Option<(usize, u64)> {
        let s = self.seq.load(Ordering::Acquire);
        let (o, n) = (
            self.off.load(Ordering::Relaxed),
            self.len.load(Ordering::Relaxed),
        );
        let at = off.checked_sub(o)?;
        (s & 1 == 0 && n <= DATA as u64 && at.checked_add(len)? <= n).then_some((at as usize, s))
    }

    /// (Client) Whether a read at `off` starts where the data ends (a sequential reader's next
    /// read: worth filling the whole buffer for). A guess only, so no sequence check.
    #[inline]
    pub fn follows(&self, off: u64) -> bool {
        let (o, n) = (
            self.off.load(Ordering::Relaxed),
            self.len.load(Ordering::Relaxed),
        );
        n != 0 && o.checked_add(n) == Some(off)
    }

    /// (Client) Whether the data is still what it was when [`Header::find`] returned `seq`: if
    /// not, what was copied out may be torn and must be read again.
    #[inline]
    pub fn unchanged(&self, seq: u64) -> bool {
        fence(Ordering::Acquire);
        self.seq.load(Ordering::Relaxed) == seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            seq: AtomicU64::new(0),
            off: AtomicU64::new(0),
            len: AtomicU64::new(0),
        }
    }

    #[test]
    fn empty_buffer_holds_nothing() {
        let h = header();
        assert_eq!(h.find(0, 0), Some((0, 0)));
        assert!(!h.follows(0));
        assert_eq!(h.find(0, 1), None);
        assert_eq!(h.find(5, 1), None);
    }

    #[test]
    fn a_fill_holds_its_range_only() {
        let h = header();
        h.begin();
        h.finish(8192, 10_000);
        let (at, s) = h.find(8192, 4096).unwrap();
        assert_eq!(at, 0);
        assert!(h.unchanged(s));
        assert_eq!(h.find(8192 + 5000, 5000).map(|x| x.0), Some(5000));
        // Unaligned, ending exactly at the end of the range.
        assert_eq!(h.find(8193, 9_999).map(|x| x.0), Some(1));
        // One byte past the range, before it, or wrapping around.
        assert_eq!(h.find(8192 + 5000, 5001), None);
        assert_eq!(h.find(8191, 2), None);
        assert_eq!(h.find(u64::MAX, 2), None);
        assert_eq!(h.find(8192, u64::MAX), None);
        assert!(h.follows(18_192) && !h.follows(18_193) && !h.follows(8192));
    }

    #[test]
    fn forget_and_refill_move_the_sequence() {
        let h = header();
        h.begin();
        h.finish(0, 4096);
        let (_, s) = h.find(0, 4096).unwrap();
        h.forget();
        assert!(!h.unchanged(s));
        assert_eq!(h.find(0, 1), None);
        h.begin();
        // Mid-fill: nothing is found.
        assert_eq!(h.find(0, 0), None);
        h.finish(0, 4096);
        let (_, s2) = h.find(0, 4096).unwrap();
        assert!(s2 > s && s2 % 2 == 0);
    }

    #[test]
    fn a_header_claiming_more_than_the_buffer_is_refused() {
        // Only the PFS writes the header; a broken one must still not send a reader past the
        // data.
        let h = header();
        h.begin();
        h.finish(0, DATA as u64 + 1);
        assert_eq!(h.find(0, 1), None);
    }

    #[test]
    fn layout() {
        assert_eq!(PAGES, 5);
        assert_eq!(core::mem::size_of::<Header>(), 24);
    }
}
