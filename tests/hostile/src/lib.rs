//! The hostile client's generator: seeded, reproducible malformed messages for any interface.
//!
//! Pure logic, host-tested (`cargo test -p sawmill-hostile`): it makes no system calls and touches
//! no memory but its own. The guest programs (`src/bin/`) turn a [`Msg`] into a real call and
//! feed the answer back ([`Learned::note`]), so the generator learns, per label, which message
//! shapes a server accepts and sends more of those: malformed words then reach the server's
//! handlers instead of stopping at the dispatcher's shape check. Works for any interface given
//! its opcodes, including servers added later.
//!
//! What a message may carry: a label (an opcode, a neighbour of one, a protocol or kernel label,
//! or noise), 0..=127 words in the tag (the kernel refuses more than 64), 0..=7 capability and map
//! items (more than 4 is refused by the kernel), the non-blocking bit, and words biased to edge
//! values (0, 1, lengths just over a limit, page sizes, u32/u64 maxima, huge offsets, kernel
//! addresses) or to hints the caller knows are meaningful (inode numbers, sector counts, ...).
//! A byte-buffer payload (a path) may be placed the way generated stubs place it: its length in
//! word 0, its bytes from word 4.
#![cfg_attr(not(test), no_std)]

use core::fmt;

/// Protocol reply labels of `interfaces/src/rpc/wire.rs` that mean "this shape is not accepted".
/// (The guest program checks at compile time that they still match.)
pub const BAD_OPCODE: u16 = 0xffe0;
pub const BAD_SHAPE: u16 = 0xffe1;

/// A xorshift64* generator: small, fast, and the same sequence for the same seed everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Any seed works (0 included): it is mixed first, so nearby seeds give unrelated streams.
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    /// Starts from `state` as it is (made odd, so never the stuck state 0), for a stream that
    /// must stay the same as a seed's raw state always gave.
    pub fn from_state(state: u64) -> Rng {
        Rng(state | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n` = 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with `percent` % probability.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of a non-empty slice (the default for an empty one).
    pub fn pick<T: Copy + Default>(&mut self, s: &[T]) -> T {
        if s.is_empty() {
            T::default()
        } else {
            s[self.below(s.len() as u64) as usize]
        }
    }
}

/// Values that break careless range checks: around byte-buffer limits of our interfaces (255,
/// 400, 480), pages, 32-bit edges, user/kernel address boundaries, and the all-ones word.
pub const EDGES: [u64; 40] = [
    0,
    1,
    2,
    3,
    7,
    8,
    16,
    63,
    64,
    65,
    255,
    256,
    257,
    258,
    399,
    400,
    401,
    480,
    481,
    511,
    512,
    4095,
    4096,
    4097,
    16384,
    16385,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    1 << 40,
    0x7fff_ffff_f000,
    0x8000_0000_0000,
    0xffff_8000_0000_0000,
    1 << 62,
    1 << 63,
    u64::MAX - 4095,
    u64::MAX - 1,
    u64::MAX,
    0x0000_0010_0000_0000,
];

/// A word: an edge value, a caller's hint (exact or off by one), a small number, or noise.
pub fn word(rng: &mut Rng, hints: &[u64]) -> u64 {
    match rng.below(100) {
        0..=34 => rng.pick(&EDGES),
        35..=59 if !hints.is_empty() => {
            let h = rng.pick(hints);
            match rng.below(4) {
                0 => h.wrapping_add(1),
                1 => h.wrapping_sub(1),
                _ => h,
            }
        }
        35..=79 => rng.below(33),
        _ => rng.next_u64(),
    }
}

/// The shape of a message in its tag: words, capability items, map items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub words: u8,
    pub caps: u8,
    pub maps: u8,
}

/// How many labels, and shapes per label, [`Learned`] remembers.
const LEARN_LABELS: usize = 64;
const LEARN_SHAPES: usize = 4;

/// Shapes a server was seen to accept (its reply was neither "bad opcode" nor "bad shape"),
/// per label. Fixed size: the first 64 labels and 4 shapes each are kept.
#[derive(Clone, Debug)]
pub struct Learned {
    labels: [u16; LEARN_LABELS],
    shapes: [[Shape; LEARN_SHAPES]; LEARN_LABELS],
    counts: [u8; LEARN_LABELS],
    used: usize,
}

impl Default for Learned {
    fn default() -> Self {
        Self::new()
    }
}

impl Learned {
    pub const fn new() -> Learned {
        Learned {
            labels: [0; LEARN_LABELS],
            shapes: [[Shape {
                words: 0,
                caps: 0,
                maps: 0,
            }; LEARN_SHAPES]; LEARN_LABELS],
            counts: [0; LEARN_LABELS],
            used: 0,
        }
    }

    /// Records the server's verdict on `shape` for `label` (its reply label).
    pub fn note(&mut self, label: u16, shape: Shape, reply_label: u16) {
        if reply_label == BAD_OPCODE || reply_label == BAD_SHAPE {
            return;
        }
        let i = match self.labels[..self.used].iter().position(|&l| l == label) {
            Some(i) => i,
            None if self.used < LEARN_LABELS => {
                self.labels[self.used] = label;
                self.used += 1;
                self.used - 1
            }
            None => return,
        };
        let n = self.counts[i] as usize;
        if self.shapes[i][..n].contains(&shape) || n >= LEARN_SHAPES {
            return;
        }
        self.shapes[i][n] = shape;
        self.counts[i] += 1;
    }

    /// One accepted shape of `label`, if any is known.
    pub fn get(&self, rng: &mut Rng, label: u16) -> Option<Shape> {
        let i = self.labels[..self.used].iter().position(|&l| l == label)?;
        let n = self.counts[i] as u64;
        (n > 0).then(|| self.shapes[i][rng.below(n) as usize])
    }

    /// How many labels have at least one accepted shape.
    pub fn labels_known(&self) -> usize {
        self.used
    }
}

/// Labels that are not any interface's opcode but that a dispatcher might mishandle: protocol
/// error labels, the kernel's own labels (page fault, exception, exit, gone), the block driver's
/// raw SHARE, the dataspace opcodes, and the extremes.
pub const SPECIAL_LABELS: [u16; 16] = [
    0, 0xffe0, 0xffe1, 0xffe4, 0xffef, 0xfff0, 0xfff1, 0xfff2, 0xfff3, 0xffff, 0x7f00, 0xd01,
    0xd02, 0xd07, 0xefff, 0xf000,
];

/// One generated message.
#[derive(Clone, Debug)]
pub struct Msg {
    pub label: u16,
    pub shape: Shape,
    pub nonblock: bool,
    /// Words 0..; only the first `shape.words` (at most 64) are sent.
    pub w: [u64; 64],
}

impl Msg {
    /// The tag: label, words (7 bits), caps (3 bits), maps (3 bits), non-blocking bit.
    pub fn tag(&self) -> u64 {
        let mut t = self.label as u64
            | (self.shape.words as u64 & 0x7f) << 16
            | (self.shape.caps as u64 & 7) << 24
            | (self.shape.maps as u64 & 7) << 27;
        if self.nonblock {
            t |= 1 << 32;
        }
        t
    }
}

/// What the caller tells the generator about one target.
pub struct Target<'a> {
    /// The interface's opcodes (from the generated `op::` constants).
    pub ops: &'a [u16],
    /// Meaningful word values (inode numbers, sizes, sector counts, our own addresses).
    pub hints: &'a [u64],
    /// Byte strings a buffer argument might hold (paths); empty if the interface has none.
    pub payloads: &'a [&'a [u8]],
}

/// Makes one message for `t`, using and mutating the shapes learned so far.
pub fn message(rng: &mut Rng, t: &Target, learned: &Learned) -> Msg {
    let label = match rng.below(100) {
        0..=69 if !t.ops.is_empty() => rng.pick(t.ops),
        70..=77 if !t.ops.is_empty() => {
            let op = rng.pick(t.ops);
            match rng.below(3) {
                0 => op.wrapping_add(1),
                1 => op.wrapping_sub(1),
                _ => op ^ 0x100,
            }
        }
        0..=87 => rng.pick(&SPECIAL_LABELS),
        _ => rng.next_u64() as u16,
    };
    let mut shape = match learned.get(rng, label) {
        Some(s) if rng.chance(75) => s,
        _ => Shape {
            words: match rng.below(10) {
                0..=4 => rng.below(9) as u8,
                5..=7 => rng.below(65) as u8,
                8 => rng.pick(&[4u8, 5, 8, 63, 64]),
                _ => rng.pick(&[65u8, 100, 127]),
            },
            caps: items(rng, 75),
            maps: items(rng, 85),
        },
    };
    // A learned shape, slightly off: one word too many or too few.
    if rng.chance(8) {
        shape.words = if rng.chance(50) {
            shape.words.saturating_add(1).min(127)
        } else {
            shape.words.saturating_sub(1)
        };
    }
    let mut w = [0u64; 64];
    for x in w.iter_mut() {
        *x = word(rng, t.hints);
    }
    if !t.payloads.is_empty() && rng.chance(40) {
        let data = rng_payload(rng, t.payloads);
        let len = place_payload(rng, &mut w, data);
        // Usually the word count the stubs would send; sometimes what was learned or random.
        if rng.chance(70) {
            shape.words = (4 + len.div_ceil(8)).min(64) as u8;
        }
    }
    Msg {
        label,
        shape,
        nonblock: rng.chance(10),
        w,
    }
}

/// An item count: none with `none_percent` %, else 1..=4, rarely 5..=7 (refused by the kernel).
fn items(rng: &mut Rng, none_percent: u64) -> u8 {
    if rng.chance(none_percent) {
        return 0;
    }
    let most = if rng.chance(90) { 4 } else { 7 };
    1 + rng.below(most) as u8
}

fn rng_payload<'a>(rng: &mut Rng, p: &[&'a [u8]]) -> &'a [u8] {
    p[rng.below(p.len() as u64) as usize]
}

/// Puts `data` (at most 480 bytes are kept) from word 4 on, with its length in word 0 the way
/// generated stubs do, sometimes lying about the length. Returns the bytes placed.
pub fn place_payload(rng: &mut Rng, w: &mut [u64; 64], data: &[u8]) -> usize {
    let data = &data[..data.len().min(480)];
    for (i, chunk) in data.chunks(8).enumerate() {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        w[4 + i] = u64::from_le_bytes(b);
    }
    let len = data.len() as u64;
    w[0] = match rng.below(10) {
        0 => len + 1,
        1 => len.saturating_sub(1),
        2 => rng.pick(&EDGES),
        _ => len,
    };
    data.len()
}

/// Counts of one hostile run against one server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Messages sent (including the misuse patterns' calls).
    pub sent: u64,
    /// Calls the kernel refused (bad capability, bad tag, would block, ...).
    pub ipc_errors: u64,
    /// Replies with a protocol error label.
    pub protocol: u64,
    /// Replies with label 0 (success) or an application error.
    pub answered: u64,
    /// Health checks made, and wrong answers they saw.
    pub checks: u64,
    pub wrong: u64,
    /// Calls that did not come back within the watchdog's limit.
    pub hangs: u64,
}

impl Tally {
    /// Counts one call's outcome: `err` of the system call and the reply label.
    pub fn count(&mut self, err: u64, reply_label: u16) {
        self.sent += 1;
        if err != 0 {
            self.ipc_errors += 1;
        } else if (0xffe0..=0xffef).contains(&reply_label) {
            self.protocol += 1;
        } else {
            self.answered += 1;
        }
    }
}

/// The report line scenarios check: `hostile: SERVER alive=yes wrong=0 hangs=0 sent=N ...`.
pub struct Summary<'a> {
    pub server: &'a str,
    pub tally: &'a Tally,
    pub alive: bool,
    pub seed: u64,
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.tally;
        write!(
            f,
            "hostile: {} alive={} wrong={} hangs={} sent={} checks={} answered={} protocol={} refused={} seed={}",
            self.server,
            if self.alive { "yes" } else { "no" },
            t.wrong,
            t.hangs,
            t.sent,
            t.checks,
            t.answered,
            t.protocol,
            t.ipc_errors,
            self.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_bounds_hold() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = Rng::new(0);
        assert_ne!(c.next_u64(), 0);
        for n in [1u64, 2, 7, 1000] {
            assert!((0..1000).all(|_| c.below(n) < n));
        }
        assert_eq!(c.below(0), 0);
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn learned_shapes_are_remembered_and_rejections_ignored() {
        let mut l = Learned::new();
        let s = Shape {
            words: 3,
            caps: 1,
            maps: 0,
        };
        l.note(5, s, BAD_SHAPE);
        l.note(6, s, BAD_OPCODE);
        assert_eq!(l.labels_known(), 0);
        l.note(5, s, 0);
        l.note(5, s, 17);
        let mut r = Rng::new(1);
        assert_eq!(l.get(&mut r, 5), Some(s));
        assert_eq!(l.get(&mut r, 6), None);
        for w in 0..10 {
            l.note(
                5,
                Shape {
                    words: w,
                    caps: 0,
                    maps: 0,
                },
                0,
            );
        }
        assert!((0..100).all(|_| l.get(&mut r, 5).is_some()));
        for label in 100..300 {
            l.note(label, s, 0);
        }
        assert_eq!(l.labels_known(), 64);
    }

    #[test]
    fn messages_cover_the_edges_and_use_what_was_learned() {
        let mut r = Rng::new(7);
        let mut l = Learned::new();
        let ops = [1u16, 2, 3];
        let paths: [&[u8]; 2] = [b"/hello.txt", b"/docs"];
        let t = Target {
            ops: &ops,
            hints: &[11, 12],
            payloads: &paths,
        };
        let (mut op_labels, mut over64, mut caps, mut maps, mut nb, mut payload) =
            (0, 0, 0, 0, 0, 0);
        for _ in 0..10_000 {
            let m = message(&mut r, &t, &l);
            assert!(m.shape.words <= 127 && m.shape.caps <= 7 && m.shape.maps <= 7);
            let tag = m.tag();
            assert_eq!(tag & 0xffff, m.label as u64);
            assert_eq!((tag >> 16) & 0x7f, m.shape.words as u64);
            op_labels += ops.contains(&m.label) as u32;
            over64 += (m.shape.words > 64) as u32;
            caps += (m.shape.caps > 0) as u32;
            maps += (m.shape.maps > 0) as u32;
            nb += m.nonblock as u32;
            payload += (m.w[4] == u64::from_le_bytes(*b"/hello.t")) as u32;
        }
        assert!(op_labels > 6000, "{op_labels}");
        assert!(over64 > 0 && caps > 1000 && maps > 500 && nb > 500 && payload > 500);
        // Once a shape is known, most messages with that label use it.
        let s = Shape {
            words: 6,
            caps: 0,
            maps: 0,
        };
        l.note(2, s, 0);
        let t = Target {
            ops: &[2],
            hints: &[],
            payloads: &[],
        };
        let same = (0..1000)
            .filter(|_| message(&mut r, &t, &l).shape == s)
            .count();
        assert!(same > 400, "{same}");
    }

    #[test]
    fn payload_sits_where_stubs_put_it() {
        let mut r = Rng::new(3);
        let mut w = [0u64; 64];
        let long = [b'a'; 600];
        assert_eq!(place_payload(&mut r, &mut w, &long), 480);
        assert_eq!(w[4], u64::from_le_bytes(*b"aaaaaaaa"));
        let n = place_payload(&mut r, &mut w, b"/x");
        assert_eq!(n, 2);
        assert_eq!(w[4], u64::from_le_bytes([b'/', b'x', 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn tally_and_summary_line() {
        let mut t = Tally::default();
        t.count(2, 0);
        t.count(0, 0xffe1);
        t.count(0, 0);
        t.count(0, 7);
        assert_eq!((t.sent, t.ipc_errors, t.protocol, t.answered), (4, 1, 1, 2));
        let s = Summary {
            server: "vfs",
            tally: &t,
            alive: true,
            seed: 9,
        };
        let line = format!("{s}");
        assert!(
            line.starts_with("hostile: vfs alive=yes wrong=0 hangs=0 sent=4 "),
            "{line}"
        );
        assert!(line.ends_with("seed=9"));
    }
}
