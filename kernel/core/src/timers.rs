//! The timer queue: waiters with a deadline, earliest first, so that the timer interrupt finds
//! the ones whose time has come by looking at the front only. The queue is intrusive (its links
//! live in the waiters themselves, reached through [`TimerStore`]), so arming a timer allocates
//! nothing: a blocked thread carries its own place in the queue, as it carries its place in an
//! endpoint's queue. Pure logic; the kernel stores the links in its thread objects.

/// A waiter's place in the queue: its neighbours (None at either end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Links<Id> {
    pub prev: Option<Id>,
    pub next: Option<Id>,
}

/// Where the queue keeps each waiter's deadline and links.
pub trait TimerStore {
    type Id: Copy + PartialEq;
    fn deadline(&self, id: Self::Id) -> u64;
    /// The waiter's links, None while it is not queued.
    fn links(&self, id: Self::Id) -> Option<Links<Self::Id>>;
    fn set_links(&mut self, id: Self::Id, links: Option<Links<Self::Id>>);
}

/// Waiters sorted by deadline (equal deadlines in arrival order).
pub struct TimerQueue<Id> {
    head: Option<Id>,
}

impl<Id: Copy + PartialEq> Default for TimerQueue<Id> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Id: Copy + PartialEq> TimerQueue<Id> {
    pub const fn new() -> Self {
        TimerQueue { head: None }
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// The earliest deadline queued.
    pub fn first<S: TimerStore<Id = Id>>(&self, s: &S) -> Option<u64> {
        self.head.map(|h| s.deadline(h))
    }

    /// Queues `id` (not queued yet) at its deadline: after every waiter due no later.
    pub fn insert<S: TimerStore<Id = Id>>(&mut self, s: &mut S, id: Id) {
        debug_assert!(s.links(id).is_none());
        let d = s.deadline(id);
        let mut prev: Option<Id> = None;
        let mut cur = self.head;
        while let Some(c) = cur {
            if s.deadline(c) > d {
                break;
            }
            prev = Some(c);
            cur = s.links(c).and_then(|l| l.next);
        }
        s.set_links(id, Some(Links { prev, next: cur }));
        match prev {
            Some(p) => {
                let mut l = s.links(p).expect("queued");
                l.next = Some(id);
                s.set_links(p, Some(l));
            }
            None => self.head = Some(id),
        }
        if let Some(n) = cur {
            let mut l = s.links(n).expect("queued");
            l.prev = Some(id);
            s.set_links(n, Some(l));
        }
    }

    /// Takes `id` out if it is queued; true if it was.
    pub fn remove<S: TimerStore<Id = Id>>(&mut self, s: &mut S, id: Id) -> bool {
        let Some(l) = s.links(id) else {
            return false;
        };
        match l.prev {
            Some(p) => {
                let mut pl = s.links(p).expect("queued");
                pl.next = l.next;
                s.set_links(p, Some(pl));
            }
            None => self.head = l.next,
        }
        if let Some(n) = l.next {
            let mut nl = s.links(n).expect("queued");
            nl.prev = l.prev;
            s.set_links(n, Some(nl));
        }
        s.set_links(id, None);
        true
    }

    /// Takes out and returns the earliest waiter whose deadline is at or before `now`.
    pub fn pop_expired<S: TimerStore<Id = Id>>(&mut self, s: &mut S, now: u64) -> Option<Id> {
        let h = self.head?;
        if s.deadline(h) > now {
            return None;
        }
        self.remove(s, h);
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Waiters in a vector, by index.
    struct Slab(Vec<(u64, Option<Links<usize>>)>);

    impl TimerStore for Slab {
        type Id = usize;
        fn deadline(&self, id: usize) -> u64 {
            self.0[id].0
        }
        fn links(&self, id: usize) -> Option<Links<usize>> {
            self.0[id].1
        }
        fn set_links(&mut self, id: usize, l: Option<Links<usize>>) {
            self.0[id].1 = l;
        }
    }

    fn drain(q: &mut TimerQueue<usize>, s: &mut Slab, now: u64) -> Vec<usize> {
        let mut out = Vec::new();
        while let Some(i) = q.pop_expired(s, now) {
            out.push(i);
        }
        out
    }

    #[test]
    fn expires_in_deadline_order_and_arrival_order_for_ties() {
        let mut s = Slab([50, 10, 30, 10, 70].iter().map(|&d| (d, None)).collect());
        let mut q = TimerQueue::new();
        for i in 0..5 {
            q.insert(&mut s, i);
        }
        assert_eq!(q.first(&s), Some(10));
        assert_eq!(drain(&mut q, &mut s, 5), Vec::<usize>::new());
        assert_eq!(drain(&mut q, &mut s, 30), [1, 3, 2]);
        assert_eq!(drain(&mut q, &mut s, 1000), [0, 4]);
        assert_eq!(q.first(&s), None);
        assert!(s.0.iter().all(|w| w.1.is_none()));
    }

    #[test]
    fn removal_from_anywhere_keeps_the_rest_sorted() {
        let mut s = Slab((0..6).map(|i| (100 - i * 10, None)).collect());
        let mut q = TimerQueue::new();
        for i in 0..6 {
            q.insert(&mut s, i);
        }
        // Front (50), middle (80), back (100), and one not queued any more.
        assert!(q.remove(&mut s, 5));
        assert!(q.remove(&mut s, 2));
        assert!(q.remove(&mut s, 0));
        assert!(!q.remove(&mut s, 0));
        assert_eq!(drain(&mut q, &mut s, u64::MAX), [4, 3, 1]);
        // Re-armed after removal.
        q.insert(&mut s, 2);
        assert_eq!(drain(&mut q, &mut s, 80), [2]);
    }

    #[test]
    fn many_random_waiters_come_out_sorted() {
        let mut x: u64 = 0x1234_5678;
        let mut s = Slab(Vec::new());
        let mut q = TimerQueue::new();
        for i in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.0.push((x % 1000, None));
            q.insert(&mut s, i);
            if i % 7 == 3 {
                q.remove(&mut s, i / 2);
            }
        }
        let out = drain(&mut q, &mut s, u64::MAX);
        assert!(out.windows(2).all(|w| s.0[w[0]].0 <= s.0[w[1]].0));
        assert_eq!(out.len(), 500 - (0..500).filter(|i| i % 7 == 3).count());
    }
}
