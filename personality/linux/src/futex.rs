//! Linux `futex(2)` as the library keeps it: the operation's decoding (its errors as Linux
//! gives them) and the table of waiting threads, by address. Process-private only: every
//! thread of a process shares the one address space, so an address names a futex. Plain data,
//! host-tested; the guest (`thread_guest`) reads the futex word, sleeps and wakes threads.
//!
//! It touches nothing but its own table: the caller holds the library lock around every use.

use crate::errno::{self, Errno};
use alloc::vec::Vec;

pub const FUTEX_WAIT: u32 = 0;
pub const FUTEX_WAKE: u32 = 1;
pub const FUTEX_REQUEUE: u32 = 3;
pub const FUTEX_CMP_REQUEUE: u32 = 4;
pub const FUTEX_WAIT_BITSET: u32 = 9;
pub const FUTEX_WAKE_BITSET: u32 = 10;
pub const FUTEX_PRIVATE_FLAG: u32 = 128;
pub const FUTEX_CLOCK_REALTIME: u32 = 256;
/// The bitset of plain `FUTEX_WAIT`/`FUTEX_WAKE`: every bit.
pub const BITSET_MATCH_ANY: u32 = u32::MAX;

/// A decoded `futex` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Sleep while the word holds `val`; `absolute`: the timeout is a point in time (BITSET),
    /// else an interval; `realtime`: on CLOCK_REALTIME, else CLOCK_MONOTONIC.
    Wait {
        bitset: u32,
        absolute: bool,
        realtime: bool,
    },
    /// Wake up to `val` waiters whose bitset meets `bitset`.
    Wake { bitset: u32 },
    /// Wake up to `val`, move up to `val2` more to `uaddr2`; `compare`: only if the word
    /// still holds `val3` (EAGAIN otherwise).
    Requeue { compare: bool },
}

/// Decodes `futex_op` and `val3` as Linux does: an unknown command is ENOSYS,
/// `FUTEX_CLOCK_REALTIME` with a command other than a wait ENOSYS, an empty bitset EINVAL.
pub fn decode(futex_op: u32, val3: u32) -> Result<Op, Errno> {
    let realtime = futex_op & FUTEX_CLOCK_REALTIME != 0;
    let cmd = futex_op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
    let op = match cmd {
        FUTEX_WAIT => Op::Wait {
            bitset: BITSET_MATCH_ANY,
            absolute: false,
            realtime,
        },
        FUTEX_WAIT_BITSET => Op::Wait {
            bitset: val3,
            absolute: true,
            realtime,
        },
        FUTEX_WAKE => Op::Wake {
            bitset: BITSET_MATCH_ANY,
        },
        FUTEX_WAKE_BITSET => Op::Wake { bitset: val3 },
        FUTEX_REQUEUE => Op::Requeue { compare: false },
        FUTEX_CMP_REQUEUE => Op::Requeue { compare: true },
        _ => return Err(errno::ENOSYS),
    };
    if realtime && !matches!(op, Op::Wait { .. }) {
        return Err(errno::ENOSYS);
    }
    match op {
        Op::Wait { bitset: 0, .. } | Op::Wake { bitset: 0 } => Err(errno::EINVAL),
        op => Ok(op),
    }
}

/// A `struct timespec` as a number of ns; EINVAL for a negative or malformed one.
pub fn timespec_ns(sec: i64, nsec: i64) -> Result<u64, Errno> {
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(errno::EINVAL);
    }
    Ok((sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(nsec as u64))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiter {
    addr: u64,
    tid: u32,
    bitset: u32,
}

/// The threads sleeping on futex words, in the order they came (a wake takes the oldest).
#[derive(Default, Debug)]
pub struct Futexes {
    waiters: Vec<Waiter>,
}

impl Futexes {
    pub const fn new() -> Futexes {
        Futexes {
            waiters: Vec::new(),
        }
    }

    /// Thread `tid` sleeps on `addr` (it checked the word's value under the same lock).
    pub fn wait(&mut self, addr: u64, tid: u32, bitset: u32) {
        self.waiters.push(Waiter { addr, tid, bitset });
    }

    /// Whether `tid` still sleeps (no wake took it out).
    pub fn queued(&self, tid: u32) -> bool {
        self.waiters.iter().any(|w| w.tid == tid)
    }

    /// `tid` stops sleeping by itself (a timeout, a signal, its end): true if it was still
    /// queued, false if a wake took it out first (it was woken).
    pub fn cancel(&mut self, tid: u32) -> bool {
        let before = self.waiters.len();
        self.waiters.retain(|w| w.tid != tid);
        self.waiters.len() != before
    }

    /// Takes up to `n` waiters on `addr` whose bitset meets `bitset` out of the table, oldest
    /// first: the threads to wake.
    pub fn wake(&mut self, addr: u64, n: u32, bitset: u32) -> Vec<u32> {
        let mut woken = Vec::new();
        self.waiters.retain(|w| {
            if woken.len() < n as usize && w.addr == addr && w.bitset & bitset != 0 {
                woken.push(w.tid);
                false
            } else {
                true
            }
        });
        woken
    }

    /// `FUTEX_REQUEUE`: wakes up to `n_wake` waiters of `from` and moves up to `n_move` more
    /// to `to`, where a wake of `to` finds them. The threads to wake and how many moved.
    pub fn requeue(&mut self, from: u64, n_wake: u32, to: u64, n_move: u32) -> (Vec<u32>, u32) {
        let woken = self.wake(from, n_wake, BITSET_MATCH_ANY);
        let mut moved = 0;
        for w in self.waiters.iter_mut() {
            if moved >= n_move {
                break;
            }
            if w.addr == from {
                w.addr = to;
                moved += 1;
            }
        }
        (woken, moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_follows_linux() {
        assert_eq!(
            decode(FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0),
            Ok(Op::Wait {
                bitset: BITSET_MATCH_ANY,
                absolute: false,
                realtime: false
            })
        );
        assert_eq!(
            decode(FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME, 5),
            Ok(Op::Wait {
                bitset: 5,
                absolute: true,
                realtime: true
            })
        );
        assert_eq!(decode(FUTEX_WAKE_BITSET, 0), Err(errno::EINVAL));
        assert_eq!(decode(FUTEX_WAIT_BITSET, 0), Err(errno::EINVAL));
        assert_eq!(
            decode(FUTEX_WAKE | FUTEX_CLOCK_REALTIME, 0),
            Err(errno::ENOSYS)
        );
        assert_eq!(decode(99, 0), Err(errno::ENOSYS));
        assert_eq!(decode(2, 0), Err(errno::ENOSYS));
        assert_eq!(
            decode(FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG, 0),
            Ok(Op::Requeue { compare: true })
        );
        assert_eq!(timespec_ns(1, 5), Ok(1_000_000_005));
        assert_eq!(timespec_ns(-1, 0), Err(errno::EINVAL));
        assert_eq!(timespec_ns(0, 1_000_000_000), Err(errno::EINVAL));
    }

    #[test]
    fn wake_takes_the_oldest_matching_waiters() {
        let mut f = Futexes::new();
        f.wait(0x1000, 1, BITSET_MATCH_ANY);
        f.wait(0x2000, 2, BITSET_MATCH_ANY);
        f.wait(0x1000, 3, 0b10);
        f.wait(0x1000, 4, 0b01);
        assert_eq!(f.wake(0x1000, 1, BITSET_MATCH_ANY), [1]);
        // The bitset picks: 3 waits for bit 1 only.
        assert_eq!(f.wake(0x1000, 5, 0b01), [4]);
        assert!(f.queued(3));
        assert_eq!(f.wake(0x1000, 5, BITSET_MATCH_ANY), [3]);
        assert_eq!(f.wake(0x1000, 5, BITSET_MATCH_ANY), Vec::<u32>::new());
        assert!(f.queued(2));
    }

    #[test]
    fn a_cancelled_waiter_was_not_woken_and_a_woken_one_cannot_cancel() {
        let mut f = Futexes::new();
        f.wait(0x1000, 1, BITSET_MATCH_ANY);
        f.wait(0x1000, 2, BITSET_MATCH_ANY);
        assert!(f.cancel(1));
        assert_eq!(f.wake(0x1000, 1, BITSET_MATCH_ANY), [2]);
        // Woken before its timeout took it out: the wait succeeded.
        assert!(!f.cancel(2));
        assert!(!f.queued(2));
    }

    #[test]
    fn requeue_wakes_some_and_moves_the_rest() {
        let mut f = Futexes::new();
        for tid in 1..=5 {
            f.wait(0x1000, tid, BITSET_MATCH_ANY);
        }
        let (woken, moved) = f.requeue(0x1000, 1, 0x2000, 2);
        assert_eq!(woken, [1]);
        assert_eq!(moved, 2);
        assert_eq!(f.wake(0x2000, 10, BITSET_MATCH_ANY), [2, 3]);
        assert_eq!(f.wake(0x1000, 10, BITSET_MATCH_ANY), [4, 5]);
    }
}
