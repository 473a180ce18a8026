//! The memory a network stack shares with a network driver (one session, `interfaces/net.idl`),
//! and both sides' logic over it. Pure: it touches only the memory it is given, so each side's
//! checks are tested on the host against memory a test scribbles on.
//!
//! The stack allocates the session's dataspace ([`SESSION_BYTES`]) and hands it to the driver
//! (`net.attach`). Page 0 holds four single-producer rings of descriptors; the rest are
//! [`SLOTS`] packet slots of [`SLOT_SIZE`] bytes, a frame starting at a slot's first byte (the
//! driver keeps the device's own headers in its private memory, so the stack parses frames in
//! place):
//!
//! | ring | producer | entry |
//! |---|---|---|
//! | `TxSubmit` | stack | a slot holding a frame to send, and the frame's length |
//! | `TxComplete` | driver | a slot the device has sent (the stack may reuse it) |
//! | `RxSubmit` | stack | an empty slot the device may receive a frame into |
//! | `RxComplete` | driver | a slot holding a received frame, and its length |
//!
//! A ring is `prod: u32` (written by its producer), `cons: u32` (written by its consumer) and
//! [`RING_ENTRIES`] entries of `slot | len << 16`; both indices run freely (wrapping) and entry
//! `i` lives at `i % RING_ENTRIES`.
//!
//! The driver trusts nothing in this memory ([`DriverSide`]): it reads each index and entry once
//! into its own memory, keeps its own copies of the indices it advances, refuses an index that
//! claims more entries than a ring holds, an entry naming a slot out of range or one the device
//! already holds, and a frame length out of range. It never takes an address from here: slots
//! are indices, which it turns into device addresses from its own table. It takes a descriptor
//! only while the completion ring has room for its completion, so completions never wait.
use core::sync::atomic::{AtomicU32, Ordering};

pub const PAGE: usize = 4096;
/// Entries per ring (a power of two).
pub const RING_ENTRIES: u32 = 64;
/// Bytes of one packet slot: a whole Ethernet frame fits.
pub const SLOT_SIZE: usize = 2048;
/// Packet slots in a session.
pub const SLOTS: usize = 128;
/// Where slot 0 starts: the page after the rings.
pub const SLOTS_OFFSET: usize = PAGE;
/// The session's size: what the stack allocates and the driver maps.
pub const SESSION_BYTES: usize = SLOTS_OFFSET + SLOTS * SLOT_SIZE;
pub const SESSION_PAGES: usize = SESSION_BYTES / PAGE;
/// The shortest frame a stack may send (an Ethernet header) and the longest (header + 1500).
pub const MIN_FRAME: usize = 14;
pub const MAX_FRAME: usize = 1514;

/// Bytes of page 0 each ring takes: `prod` at 0, `cons` at 4, entries from [`ENTRIES_AT`].
const RING_BYTES: usize = 1024;
const ENTRIES_AT: usize = 64;
/// The stack's "waiting for a send slot" word: in `TxComplete`'s header, after `prod` and
/// `cons` ([`Shared::set_tx_wait`]).
const TX_WAIT_AT: usize = Ring::TxComplete as usize * RING_BYTES + 8;

/// The four rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ring {
    TxSubmit = 0,
    TxComplete = 1,
    RxSubmit = 2,
    RxComplete = 3,
}

/// One ring entry: a slot index and a length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub slot: u16,
    pub len: u16,
}

impl Desc {
    fn encode(self) -> u32 {
        self.slot as u32 | (self.len as u32) << 16
    }
    fn decode(v: u32) -> Desc {
        Desc {
            slot: v as u16,
            len: (v >> 16) as u16,
        }
    }
}

/// What the driver refused, for its one log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// A ring index claims more entries than the ring holds (`seen` against the driver's own
    /// `mine`): nothing is taken from that ring until it is sane again.
    Index { ring: Ring, seen: u32, mine: u32 },
    /// An entry names a slot beyond [`SLOTS`] (skipped).
    Slot { ring: Ring, slot: u16 },
    /// A frame to send is shorter than [`MIN_FRAME`] or longer than [`MAX_FRAME`] (skipped).
    Length { slot: u16, len: u16 },
    /// An entry names a slot the device already holds (skipped).
    Busy { ring: Ring, slot: u16 },
}

impl core::fmt::Display for Bad {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Bad::Index { ring, seen, mine } => write!(
                f,
                "{:?} index {} is more than {} entries from {}",
                ring, seen, RING_ENTRIES, mine
            ),
            Bad::Slot { ring, slot } => {
                write!(f, "{:?} names slot {} of {}", ring, slot, SLOTS)
            }
            Bad::Length { slot, len } => write!(
                f,
                "slot {} to send has length {} (not {}..={})",
                slot, len, MIN_FRAME, MAX_FRAME
            ),
            Bad::Busy { ring, slot } => {
                write!(f, "{:?} names slot {}, which the device holds", ring, slot)
            }
        }
    }
}

/// The session memory as one side sees it.
#[derive(Clone, Copy)]
pub struct Shared {
    base: *mut u8,
}

// SAFETY: the memory is only reached through atomics and raw slot pointers; a `Shared` is an
// address, which may move between the threads of its task.
unsafe impl Send for Shared {}

impl Shared {
    /// # Safety
    /// `base` is 4-byte aligned and [`SESSION_BYTES`] bytes from it stay mapped (or, in the
    /// driver, any fault on them is caught) while this `Shared` is used.
    pub unsafe fn new(base: *mut u8) -> Shared {
        Shared { base }
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= PAGE && off.is_multiple_of(4));
        // SAFETY: inside page 0 of the session memory `new`'s caller vouched for, aligned.
        unsafe { AtomicU32::from_ptr(self.base.add(off) as *mut u32) }
    }
    fn prod(&self, r: Ring) -> &AtomicU32 {
        self.word(r as usize * RING_BYTES)
    }
    fn cons(&self, r: Ring) -> &AtomicU32 {
        self.word(r as usize * RING_BYTES + 4)
    }
    fn entry(&self, r: Ring, i: u32) -> &AtomicU32 {
        self.word(r as usize * RING_BYTES + ENTRIES_AT + 4 * (i % RING_ENTRIES) as usize)
    }

    /// Publishes entry `d` at index `i` of ring `r` (its producer only) and moves `prod` past it.
    fn push(&self, r: Ring, i: u32, d: Desc) -> u32 {
        self.entry(r, i).store(d.encode(), Ordering::Relaxed);
        let next = i.wrapping_add(1);
        self.prod(r).store(next, Ordering::Release);
        next
    }

    /// Overwrites ring `r`'s producer index: what a hostile stack does (the driver's tests).
    pub fn forge_prod(&self, r: Ring, v: u32) {
        self.prod(r).store(v, Ordering::Release);
    }

    /// Ring `r`'s producer index as it stands.
    pub fn prod_now(&self, r: Ring) -> u32 {
        self.prod(r).load(Ordering::Acquire)
    }

    /// The stack says whether it waits for a send completion (it found no free send slot). The
    /// driver wakes the stack for send completions only then (receive completions always): a
    /// send's completion is otherwise reaped by the stack's next send, without a wake. Written
    /// by the stack only; the driver just reads it, so a hostile value costs only that stack's
    /// own wakes. A full barrier: the stack looks at `TxComplete` again after setting it.
    pub fn set_tx_wait(&self, waiting: bool) {
        self.word(TX_WAIT_AT)
            .store(u32::from(waiting), Ordering::SeqCst);
    }

    /// Whether the stack waits for a send completion (the driver's side; a full barrier first,
    /// so the completions just published are ordered before the look).
    pub fn tx_wait(&self) -> bool {
        core::sync::atomic::fence(Ordering::SeqCst);
        self.word(TX_WAIT_AT).load(Ordering::SeqCst) != 0
    }

    /// Where slot `slot` (< [`SLOTS`]) starts.
    pub fn slot_ptr(&self, slot: u16) -> *mut u8 {
        assert!((slot as usize) < SLOTS);
        // SAFETY: inside the session memory.
        unsafe { self.base.add(SLOTS_OFFSET + slot as usize * SLOT_SIZE) }
    }

    /// Byte offset of slot `slot` in the session (where the driver's table has its address).
    pub fn slot_offset(slot: u16) -> usize {
        SLOTS_OFFSET + slot as usize * SLOT_SIZE
    }
}

/// The driver's side: its private copies of the indices it advances and which slots the
/// device holds.
pub struct DriverSide {
    tx_cons: u32,
    rx_cons: u32,
    txc_prod: u32,
    rxc_prod: u32,
    tx_held: u32,
    rx_held: u32,
    held: [u64; SLOTS / 64],
}

impl Default for DriverSide {
    fn default() -> Self {
        Self::new()
    }
}

impl DriverSide {
    pub fn new() -> DriverSide {
        DriverSide {
            tx_cons: 0,
            rx_cons: 0,
            txc_prod: 0,
            rxc_prod: 0,
            tx_held: 0,
            rx_held: 0,
            held: [0; SLOTS / 64],
        }
    }

    /// Whether the device holds `slot`.
    pub fn holds(&self, slot: u16) -> bool {
        (slot as usize) < SLOTS && self.held[slot as usize / 64] & 1 << (slot % 64) != 0
    }

    /// Slots the device holds in each direction.
    pub fn held(&self) -> (u32, u32) {
        (self.tx_held, self.rx_held)
    }

    /// The next frame to send, if any and its completion has room. `Err` says what was refused:
    /// a bad entry is skipped (the next call goes on after it), a bad index leaves the ring.
    pub fn take_tx(&mut self, m: &Shared) -> Result<Option<Desc>, Bad> {
        let Some(d) = self.take(m, Ring::TxSubmit)? else {
            return Ok(None);
        };
        if !(MIN_FRAME..=MAX_FRAME).contains(&(d.len as usize)) {
            return Err(Bad::Length {
                slot: d.slot,
                len: d.len,
            });
        }
        self.hold(d.slot);
        self.tx_held += 1;
        Ok(Some(d))
    }

    /// The next empty slot to receive into, if any and its completion has room.
    pub fn take_rx(&mut self, m: &Shared) -> Result<Option<u16>, Bad> {
        let Some(d) = self.take(m, Ring::RxSubmit)? else {
            return Ok(None);
        };
        self.hold(d.slot);
        self.rx_held += 1;
        Ok(Some(d.slot))
    }

    fn take(&mut self, m: &Shared, r: Ring) -> Result<Option<Desc>, Bad> {
        let (done, mine, held) = match r {
            Ring::TxSubmit => (Ring::TxComplete, self.tx_cons, self.tx_held),
            _ => (Ring::RxComplete, self.rx_cons, self.rx_held),
        };
        // Room for the completion: completions the stack has not taken, plus those the device
        // still owes, stay below the ring's size.
        let produced = match done {
            Ring::TxComplete => self.txc_prod,
            _ => self.rxc_prod,
        };
        let seen = m.cons(done).load(Ordering::Acquire);
        let waiting = produced.wrapping_sub(seen);
        if waiting > RING_ENTRIES {
            return Err(Bad::Index {
                ring: done,
                seen,
                mine: produced,
            });
        }
        if waiting + held >= RING_ENTRIES {
            return Ok(None);
        }
        let prod = m.prod(r).load(Ordering::Acquire);
        let ready = prod.wrapping_sub(mine);
        if ready > RING_ENTRIES {
            return Err(Bad::Index {
                ring: r,
                seen: prod,
                mine,
            });
        }
        if ready == 0 {
            return Ok(None);
        }
        // One read of the entry into our memory; everything after looks at the copy.
        let d = Desc::decode(m.entry(r, mine).load(Ordering::Relaxed));
        let next = mine.wrapping_add(1);
        match r {
            Ring::TxSubmit => self.tx_cons = next,
            _ => self.rx_cons = next,
        }
        m.cons(r).store(next, Ordering::Release);
        if d.slot as usize >= SLOTS {
            return Err(Bad::Slot {
                ring: r,
                slot: d.slot,
            });
        }
        if self.holds(d.slot) {
            return Err(Bad::Busy {
                ring: r,
                slot: d.slot,
            });
        }
        Ok(Some(d))
    }

    fn hold(&mut self, slot: u16) {
        self.held[slot as usize / 64] |= 1 << (slot % 64);
    }
    fn release(&mut self, slot: u16) -> bool {
        if !self.holds(slot) {
            return false;
        }
        self.held[slot as usize / 64] &= !(1 << (slot % 64));
        true
    }

    /// The device has sent `slot`: give it back to the stack.
    pub fn complete_tx(&mut self, m: &Shared, slot: u16) {
        if self.release(slot) {
            self.tx_held -= 1;
            self.txc_prod = m.push(Ring::TxComplete, self.txc_prod, Desc { slot, len: 0 });
        }
    }

    /// The device has received a frame of `len` bytes into `slot`.
    pub fn complete_rx(&mut self, m: &Shared, slot: u16, len: u16) {
        if self.release(slot) {
            self.rx_held -= 1;
            self.rxc_prod = m.push(Ring::RxComplete, self.rxc_prod, Desc { slot, len });
        }
    }

    /// Every slot the device held, forgotten (the device was reset; the session ends).
    pub fn forget(&mut self) {
        self.held = [0; SLOTS / 64];
        self.tx_held = 0;
        self.rx_held = 0;
    }
}

/// The stack's side: its copies of the indices it advances. It checks what the driver gives
/// back too (a slot out of range or a length beyond a slot is skipped).
#[derive(Default)]
pub struct StackSide {
    tx_prod: u32,
    rx_prod: u32,
    txc_cons: u32,
    rxc_cons: u32,
}

impl StackSide {
    /// A fresh session: the rings of `m` emptied.
    pub fn new(m: &Shared) -> StackSide {
        for r in [
            Ring::TxSubmit,
            Ring::TxComplete,
            Ring::RxSubmit,
            Ring::RxComplete,
        ] {
            m.prod(r).store(0, Ordering::Relaxed);
            m.cons(r).store(0, Ordering::Relaxed);
        }
        StackSide::default()
    }

    fn room(&self, m: &Shared, r: Ring, prod: u32) -> bool {
        prod.wrapping_sub(m.cons(r).load(Ordering::Acquire)) < RING_ENTRIES
    }

    /// Queues the frame of `len` bytes in `slot` for sending; false if the ring is full.
    pub fn submit_tx(&mut self, m: &Shared, slot: u16, len: u16) -> bool {
        if !self.room(m, Ring::TxSubmit, self.tx_prod) {
            return false;
        }
        self.tx_prod = m.push(Ring::TxSubmit, self.tx_prod, Desc { slot, len });
        true
    }

    /// Gives the driver the empty `slot` to receive into; false if the ring is full.
    pub fn submit_rx(&mut self, m: &Shared, slot: u16) -> bool {
        if !self.room(m, Ring::RxSubmit, self.rx_prod) {
            return false;
        }
        self.rx_prod = m.push(
            Ring::RxSubmit,
            self.rx_prod,
            Desc {
                slot,
                len: SLOT_SIZE as u16,
            },
        );
        true
    }

    fn reap(&mut self, m: &Shared, r: Ring) -> Option<Desc> {
        loop {
            let mine = match r {
                Ring::TxComplete => self.txc_cons,
                _ => self.rxc_cons,
            };
            let prod = m.prod(r).load(Ordering::Acquire);
            let ready = prod.wrapping_sub(mine);
            if ready == 0 || ready > RING_ENTRIES {
                return None;
            }
            let d = Desc::decode(m.entry(r, mine).load(Ordering::Relaxed));
            let next = mine.wrapping_add(1);
            match r {
                Ring::TxComplete => self.txc_cons = next,
                _ => self.rxc_cons = next,
            }
            m.cons(r).store(next, Ordering::Release);
            if (d.slot as usize) < SLOTS && d.len as usize <= SLOT_SIZE {
                return Some(d);
            }
        }
    }

    /// A slot the driver has sent, free again.
    pub fn reap_tx(&mut self, m: &Shared) -> Option<u16> {
        self.reap(m, Ring::TxComplete).map(|d| d.slot)
    }

    /// A received frame: its slot and length.
    pub fn reap_rx(&mut self, m: &Shared) -> Option<Desc> {
        self.reap(m, Ring::RxComplete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn memory() -> (Vec<u64>, Shared) {
        let mut v = std::vec![0u64; SESSION_BYTES / 8];
        // SAFETY: the vector is SESSION_BYTES long, 8-aligned, and outlives the test's Shared.
        let m = unsafe { Shared::new(v.as_mut_ptr() as *mut u8) };
        (v, m)
    }

    #[test]
    fn frames_go_round() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        let mut d = DriverSide::new();
        assert!(s.submit_tx(&m, 3, 60));
        assert!(s.submit_rx(&m, 7));
        assert_eq!(d.take_tx(&m), Ok(Some(Desc { slot: 3, len: 60 })));
        assert_eq!(d.take_tx(&m), Ok(None));
        assert_eq!(d.take_rx(&m), Ok(Some(7)));
        assert!(d.holds(3) && d.holds(7));
        assert_eq!(s.reap_tx(&m), None);
        d.complete_tx(&m, 3);
        d.complete_rx(&m, 7, 98);
        assert_eq!(s.reap_tx(&m), Some(3));
        assert_eq!(s.reap_rx(&m), Some(Desc { slot: 7, len: 98 }));
        assert_eq!(d.held(), (0, 0));
    }

    #[test]
    fn tx_wait_word_is_apart_from_the_rings() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        let mut d = DriverSide::new();
        assert!(!m.tx_wait());
        m.set_tx_wait(true);
        assert!(m.tx_wait());
        // The rings work as before around it, and emptying them for a new session leaves it.
        assert!(s.submit_tx(&m, 3, 60));
        assert_eq!(d.take_tx(&m), Ok(Some(Desc { slot: 3, len: 60 })));
        d.complete_tx(&m, 3);
        assert_eq!(s.reap_tx(&m), Some(3));
        assert_eq!(s.reap_tx(&m), None);
        assert!(m.tx_wait());
        let _ = StackSide::new(&m);
        assert!(m.tx_wait());
        m.set_tx_wait(false);
        assert!(!m.tx_wait());
    }

    #[test]
    fn indices_wrap() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        let mut d = DriverSide::new();
        for i in 0..1000u32 {
            let slot = (i % SLOTS as u32) as u16;
            assert!(s.submit_tx(&m, slot, 100));
            assert_eq!(d.take_tx(&m), Ok(Some(Desc { slot, len: 100 })));
            d.complete_tx(&m, slot);
            assert_eq!(s.reap_tx(&m), Some(slot));
        }
    }

    #[test]
    fn bad_entries_are_skipped() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        let mut d = DriverSide::new();
        s.submit_tx(&m, 500, 60);
        s.submit_tx(&m, 1, 5);
        s.submit_tx(&m, 1, 4000);
        s.submit_tx(&m, 2, 60);
        s.submit_tx(&m, 2, 60);
        s.submit_tx(&m, 4, 1514);
        assert_eq!(
            d.take_tx(&m),
            Err(Bad::Slot {
                ring: Ring::TxSubmit,
                slot: 500
            })
        );
        assert_eq!(d.take_tx(&m), Err(Bad::Length { slot: 1, len: 5 }));
        assert_eq!(d.take_tx(&m), Err(Bad::Length { slot: 1, len: 4000 }));
        assert_eq!(d.take_tx(&m), Ok(Some(Desc { slot: 2, len: 60 })));
        assert_eq!(
            d.take_tx(&m),
            Err(Bad::Busy {
                ring: Ring::TxSubmit,
                slot: 2
            })
        );
        assert_eq!(d.take_tx(&m), Ok(Some(Desc { slot: 4, len: 1514 })));
        assert_eq!(d.held(), (2, 0));
        // A slot both sent and offered for receiving is refused the second time.
        s.submit_rx(&m, 4);
        assert!(matches!(d.take_rx(&m), Err(Bad::Busy { .. })));
    }

    #[test]
    fn a_lying_index_takes_nothing_until_sane() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        let mut d = DriverSide::new();
        m.prod(Ring::TxSubmit).store(1000, Ordering::Relaxed);
        assert!(matches!(
            d.take_tx(&m),
            Err(Bad::Index {
                ring: Ring::TxSubmit,
                ..
            })
        ));
        assert_eq!(d.held(), (0, 0));
        // The completion ring's consumer index lying: nothing is taken either.
        m.prod(Ring::TxSubmit).store(0, Ordering::Relaxed);
        m.cons(Ring::TxComplete)
            .store(0x8000_0000, Ordering::Relaxed);
        s.submit_tx(&m, 1, 60);
        assert!(matches!(d.take_tx(&m), Err(Bad::Index { .. })));
        m.cons(Ring::TxComplete).store(0, Ordering::Relaxed);
        assert_eq!(d.take_tx(&m), Ok(Some(Desc { slot: 1, len: 60 })));
    }

    #[test]
    fn completions_never_overrun() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        let mut d = DriverSide::new();
        // The stack offers every slot and never reaps: the driver takes only what it can
        // complete without overwriting a completion the stack has not read.
        let mut taken = 0;
        for slot in 0..SLOTS as u16 {
            if s.submit_rx(&m, slot) {
                while let Ok(Some(got)) = d.take_rx(&m) {
                    d.complete_rx(&m, got, 60);
                    taken += 1;
                }
            }
        }
        assert_eq!(taken, RING_ENTRIES);
        let mut reaped = 0;
        while s.reap_rx(&m).is_some() {
            reaped += 1;
        }
        assert_eq!(reaped, taken);
    }

    #[test]
    fn the_stack_skips_a_lying_driver() {
        let (_v, m) = memory();
        let mut s = StackSide::new(&m);
        m.push(Ring::RxComplete, 0, Desc { slot: 900, len: 60 });
        m.push(Ring::RxComplete, 1, Desc { slot: 1, len: 9000 });
        m.push(Ring::RxComplete, 2, Desc { slot: 2, len: 60 });
        assert_eq!(s.reap_rx(&m), Some(Desc { slot: 2, len: 60 }));
        m.prod(Ring::TxComplete).store(12345, Ordering::Relaxed);
        assert_eq!(s.reap_tx(&m), None);
    }
}
