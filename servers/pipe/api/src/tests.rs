//! The ring on the host: data, capacity, end of file, broken pipes, garbage from a peer, the
//! wakeup protocol and the locks (with real threads for the last two).

extern crate std;

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::vec;
use std::vec::Vec;

/// A ring in host memory, with guard bytes after it that must never change.
struct Mem {
    buf: Vec<u64>,
}

const GUARD: usize = 4096;

impl Mem {
    fn new() -> Mem {
        let mut buf = vec![0u64; (RING_BYTES + GUARD) / 8];
        for w in &mut buf[RING_BYTES / 8..] {
            *w = 0xa5a5_a5a5_a5a5_a5a5;
        }
        Mem { buf }
    }
    fn ring(&mut self) -> Ring {
        // SAFETY: the buffer holds RING_BYTES (and the guard) for as long as the test runs.
        unsafe { Ring::new(self.buf.as_mut_ptr() as *mut u8) }
    }
    fn ctl(&mut self) -> &Control {
        // SAFETY: the buffer starts with a Control's worth of u32 words.
        unsafe { &*(self.buf.as_ptr() as *const Control) }
    }
    fn guard_intact(&self) -> bool {
        self.buf[RING_BYTES / 8..]
            .iter()
            .all(|&w| w == 0xa5a5_a5a5_a5a5_a5a5)
    }
}

#[test]
fn bytes_come_out_in_order_across_the_wrap() {
    let mut m = Mem::new();
    let r = m.ring();
    let mut next_in = 0u8;
    let mut next_out = 0u8;
    for round in 0..200 {
        let len = 1 + (round * 7919) % 9000;
        let src: Vec<u8> = (0..len)
            .map(|_| {
                next_in = next_in.wrapping_add(1);
                next_in
            })
            .collect();
        assert_eq!(r.write(&src, false), Step::Moved(len));
        let mut dst = vec![0u8; len];
        assert_eq!(r.read(&mut dst), Step::Moved(len));
        for b in dst {
            next_out = next_out.wrapping_add(1);
            assert_eq!(b, next_out);
        }
        assert_eq!(r.read(&mut [0u8; 4]), Step::Wait);
    }
    assert!(m.guard_intact());
}

#[test]
fn capacity_is_64_kib_and_atomic_writes_are_all_or_nothing() {
    let mut m = Mem::new();
    let r = m.ring();
    let big = vec![7u8; CAPACITY + 100];
    assert_eq!(r.write(&big, false), Step::Moved(CAPACITY));
    assert_eq!(r.write(&[1], true), Step::Wait);
    assert_eq!(r.write(&[1], false), Step::Wait);
    assert_eq!(r.used(), Some(CAPACITY));
    let mut out = vec![0u8; 10];
    assert_eq!(r.read(&mut out), Step::Moved(10));
    // 10 bytes free: an atomic write of 11 waits, a plain one takes 10.
    assert_eq!(r.write(&[2u8; 11], true), Step::Wait);
    assert_eq!(r.write(&[2u8; 11], false), Step::Moved(10));
    assert!(!r.ready(End::Write).ready);
    assert!(r.ready(End::Read).ready);
}

#[test]
fn end_of_file_only_once_the_data_is_read() {
    let mut m = Mem::new();
    let r = m.ring();
    assert_eq!(r.write(b"abc", true), Step::Moved(3));
    r.set_gone(End::Write);
    let ready = r.ready(End::Read);
    assert!(ready.ready && ready.gone);
    let mut out = [0u8; 2];
    assert_eq!(r.read(&mut out), Step::Moved(2));
    assert_eq!(r.read(&mut out), Step::Moved(1));
    assert_eq!(r.read(&mut out), Step::Eof);
    assert_eq!(
        r.ready(End::Read),
        Ready {
            ready: false,
            gone: true
        }
    );
    assert!(r.can_go(End::Read, 1));
}

#[test]
fn a_write_without_readers_is_broken() {
    let mut m = Mem::new();
    let r = m.ring();
    r.set_gone(End::Read);
    assert_eq!(r.write(b"x", true), Step::Broken);
    assert!(r.ready(End::Write).gone);
    assert!(r.can_go(End::Write, PIPE_BUF));
}

#[test]
fn positions_near_the_top_of_u32_wrap_cleanly() {
    let mut m = Mem::new();
    m.ctl().head.store(u32::MAX - 5, SeqCst);
    m.ctl().tail.store(u32::MAX - 5, SeqCst);
    let r = m.ring();
    let src: Vec<u8> = (0..100u8).collect();
    assert_eq!(r.write(&src, true), Step::Moved(100));
    let mut out = vec![0u8; 100];
    assert_eq!(r.read(&mut out), Step::Moved(100));
    assert_eq!(out, src);
    assert!(m.guard_intact());
}

#[test]
fn garbage_positions_never_reach_outside_the_ring() {
    let mut m = Mem::new();
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    };
    let mut corrupt = 0;
    for _ in 0..20_000 {
        let (h, t) = (rnd(), rnd());
        // Half the time a plausible pair, half garbage.
        let t = if h & 1 == 0 {
            h.wrapping_sub(t % (CAPACITY as u32 + 1))
        } else {
            t
        };
        m.ctl().head.store(h, SeqCst);
        m.ctl().tail.store(t, SeqCst);
        m.ctl().readers_waiting.store(rnd(), SeqCst);
        let r = m.ring();
        let n = (rnd() as usize) % (2 * CAPACITY);
        let mut buf = vec![0u8; n];
        let a = r.read(&mut buf);
        let b = r.write(&buf, rnd() & 1 == 0);
        if a == Step::Corrupt || b == Step::Corrupt {
            corrupt += 1;
        }
        let _ = r.ready(End::Read);
        let _ = r.ready(End::Write);
        r.end_wait(End::Read);
    }
    assert!(corrupt > 0, "garbage was reported as Corrupt");
    assert!(m.guard_intact());
}

#[test]
fn a_waiting_count_never_goes_below_zero() {
    let mut m = Mem::new();
    let r = m.ring();
    r.end_wait(End::Write);
    assert!(!r.peer_waiting(End::Read));
    r.begin_wait(End::Write);
    assert!(r.peer_waiting(End::Read));
    r.end_wait(End::Write);
    assert!(!r.peer_waiting(End::Read));
}

/// Every order of the writer's two steps (publish, look for waiters) and the waiter's two
/// (count in, look at the ring): if the waiter goes to sleep, the writer wakes it.
#[test]
fn no_wakeup_is_lost_in_any_order() {
    // Steps: 0 = writer publishes, 1 = writer looks, 2 = waiter counts in, 3 = waiter looks.
    let orders = [
        [0, 1, 2, 3],
        [0, 2, 1, 3],
        [0, 2, 3, 1],
        [2, 0, 1, 3],
        [2, 0, 3, 1],
        [2, 3, 0, 1],
    ];
    for order in orders {
        let mut m = Mem::new();
        let r = m.ring();
        let (mut sleeps, mut wakes) = (false, false);
        for step in order {
            match step {
                0 => assert_eq!(r.write(b"x", true), Step::Moved(1)),
                1 => wakes = r.peer_waiting(End::Write),
                2 => r.begin_wait(End::Read),
                _ => sleeps = !r.can_go(End::Read, 1),
            }
        }
        assert!(!sleeps || wakes, "order {:?} loses the wakeup", order);
    }
}

/// A notification as the kernel has it: a word of bits and one waiter.
struct Notify(AtomicU64);
impl Notify {
    fn signal(&self) {
        self.0.fetch_or(1, Ordering::SeqCst);
    }
    fn wait(&self) {
        let mut spins = 0u64;
        while self.0.swap(0, Ordering::SeqCst) == 0 {
            std::thread::yield_now();
            spins += 1;
            assert!(spins < 50_000_000, "a wakeup was lost");
        }
    }
}

/// A reader and a writer thread moving a million bytes through the ring with blocking on both
/// sides, each waking the other only when it finds it counted in.
#[test]
fn threads_move_data_with_blocking_and_wakeups() {
    let mem = Arc::new(std::sync::Mutex::new(Mem::new()));
    let base = mem.lock().unwrap().buf.as_mut_ptr() as usize;
    let wake_reader = Arc::new(Notify(AtomicU64::new(0)));
    let wake_writer = Arc::new(Notify(AtomicU64::new(0)));
    const TOTAL: usize = 1 << 20;
    let (wr, ww) = (wake_reader.clone(), wake_writer.clone());
    let writer = std::thread::spawn(move || {
        // SAFETY: the Mem outlives both threads (joined below).
        let r = unsafe { Ring::new(base as *mut u8) };
        let mut sent = 0usize;
        let mut k = 0usize;
        while sent < TOTAL {
            let len = (1 + k * 31 % 5000).min(TOTAL - sent);
            k += 1;
            let src: Vec<u8> = (sent..sent + len).map(|i| (i % 251) as u8).collect();
            let mut off = 0;
            while off < len {
                match r.write(&src[off..], len <= PIPE_BUF) {
                    Step::Moved(n) => {
                        off += n;
                        if r.peer_waiting(End::Write) {
                            wr.signal();
                        }
                    }
                    Step::Wait => {
                        r.begin_wait(End::Write);
                        if !r.can_go(End::Write, len - off) {
                            ww.wait();
                        }
                        r.end_wait(End::Write);
                    }
                    s => panic!("writer: {:?}", s),
                }
            }
            sent += len;
        }
    });
    let (wr, ww) = (wake_reader.clone(), wake_writer.clone());
    let reader = std::thread::spawn(move || {
        // SAFETY: as above.
        let r = unsafe { Ring::new(base as *mut u8) };
        let mut got = 0usize;
        let mut buf = vec![0u8; 3000];
        while got < TOTAL {
            match r.read(&mut buf) {
                Step::Moved(n) => {
                    for (i, &b) in buf[..n].iter().enumerate() {
                        assert_eq!(b, ((got + i) % 251) as u8);
                    }
                    got += n;
                    if r.peer_waiting(End::Read) {
                        ww.signal();
                    }
                }
                Step::Wait => {
                    r.begin_wait(End::Read);
                    if !r.can_go(End::Read, 1) {
                        wr.wait();
                    }
                    r.end_wait(End::Read);
                }
                s => panic!("reader: {:?}", s),
            }
        }
    });
    writer.join().unwrap();
    reader.join().unwrap();
    assert!(mem.lock().unwrap().guard_intact());
}

/// Four writers, each writing 4096-byte records of its own byte under the lock: every record
/// the reader gets is whole.
#[test]
fn writes_of_pipe_buf_stay_whole_with_several_writers() {
    let mem = Arc::new(std::sync::Mutex::new(Mem::new()));
    let base = mem.lock().unwrap().buf.as_mut_ptr() as usize;
    const RECORDS: usize = 200;
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (1..=4u8)
        .map(|id| {
            std::thread::spawn(move || {
                // SAFETY: the Mem outlives the threads.
                let r = unsafe { Ring::new(base as *mut u8) };
                let rec = vec![id; PIPE_BUF];
                for _ in 0..RECORDS {
                    loop {
                        r.lock(End::Write, id as u32, &mut |_| {
                            std::thread::yield_now();
                            true
                        });
                        let s = r.write(&rec, true);
                        r.unlock(End::Write, id as u32);
                        match s {
                            Step::Moved(n) => {
                                assert_eq!(n, PIPE_BUF);
                                break;
                            }
                            Step::Wait => std::thread::yield_now(),
                            s => panic!("{:?}", s),
                        }
                    }
                }
            })
        })
        .collect();
    let d = done.clone();
    let reader = std::thread::spawn(move || {
        // SAFETY: as above.
        let r = unsafe { Ring::new(base as *mut u8) };
        let mut rec = vec![0u8; PIPE_BUF];
        let mut have = 0;
        let mut records = 0;
        while records < 4 * RECORDS {
            match r.read(&mut rec[have..]) {
                Step::Moved(n) => {
                    have += n;
                    if have == PIPE_BUF {
                        assert!(rec.iter().all(|&b| b == rec[0]), "a record was split");
                        records += 1;
                        have = 0;
                    }
                }
                Step::Wait => std::thread::yield_now(),
                s => panic!("{:?}", s),
            }
        }
        d.store(true, Ordering::SeqCst);
    });
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
}

#[test]
fn a_dead_holders_lock_is_broken_after_the_callers_bound() {
    let mut m = Mem::new();
    let r = m.ring();
    r.lock(End::Write, 7, &mut |_| panic!("free lock"));
    // Holder 7 "died". Holder 9 waits three rounds, then breaks it.
    let mut rounds = 0;
    r.lock(End::Write, 9, &mut |n| {
        rounds = n;
        n < 3
    });
    assert_eq!(rounds, 3);
    assert_eq!(m.ctl().write_lock.load(SeqCst), 9);
    // The old holder's late unlock does not free the new holder's lock.
    r.unlock(End::Write, 7);
    assert_eq!(m.ctl().write_lock.load(SeqCst), 9);
    r.unlock(End::Write, 9);
    assert_eq!(m.ctl().write_lock.load(SeqCst), 0);
    // The read lock is separate.
    r.lock(End::Read, 9, &mut |_| panic!("free lock"));
    r.lock(End::Write, 9, &mut |_| panic!("free lock"));
}

#[test]
fn peek_and_discard_leave_and_take_bytes() {
    let mut m = Mem::new();
    let r = m.ring();
    // Across the wrap: start near the end of the data area.
    let mut sink = vec![0u8; CAPACITY - 3];
    assert_eq!(r.write(&sink, false), Step::Moved(CAPACITY - 3));
    assert_eq!(r.read(&mut sink), Step::Moved(CAPACITY - 3));
    assert_eq!(r.write(b"abcdefgh", false), Step::Moved(8));
    let mut b = [0u8; 4];
    assert_eq!(r.peek(&mut b, 2), Some(4));
    assert_eq!(&b, b"cdef");
    assert_eq!(r.used(), Some(8));
    r.discard(3);
    assert_eq!(r.peek(&mut b, 0), Some(4));
    assert_eq!(&b, b"defg");
    // Past what is held: nothing copied, nothing taken beyond it.
    assert_eq!(r.peek(&mut b, 10), Some(0));
    r.discard(100);
    assert_eq!(r.used(), Some(0));
    assert!(!r.gone(End::Write));
    r.set_gone(End::Write);
    assert!(r.gone(End::Write));
}
