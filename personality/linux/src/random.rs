//! The process's random numbers (`getrandom`, `AT_RANDOM`): xoshiro256** seeded from the 32
//! seed bytes the process server gives each process (`KIND_LINUX_SEED`), and the checks of
//! `getrandom`'s flags.

use crate::errno::{self, Errno};

pub const GRND_NONBLOCK: u64 = 1;
pub const GRND_RANDOM: u64 = 2;
pub const GRND_INSECURE: u64 = 4;

/// Checks `getrandom`'s flags as Linux does (unknown bits, or RANDOM with INSECURE: EINVAL).
pub fn check_flags(flags: u64) -> Result<(), Errno> {
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == GRND_RANDOM | GRND_INSECURE
    {
        return Err(errno::EINVAL);
    }
    Ok(())
}

/// xoshiro256** (Blackman and Vigna), a fast generator with a 256-bit state.
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// From 32 seed bytes; an all-zero state (which would stay zero) is replaced.
    pub fn new(seed: &[u8]) -> Rng {
        let mut s = [0u64; 4];
        for (i, c) in seed.chunks(8).take(4).enumerate() {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            s[i] = u64::from_le_bytes(w);
        }
        if s == [0; 4] {
            s = [
                0x9e37_79b9_7f4a_7c15,
                0xbf58_476d_1ce4_e5b9,
                0x94d0_49bb_1331_11eb,
                1,
            ];
        }
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert_eq!(check_flags(0), Ok(()));
        assert_eq!(check_flags(GRND_NONBLOCK | GRND_RANDOM), Ok(()));
        assert_eq!(check_flags(GRND_RANDOM | GRND_INSECURE), Err(errno::EINVAL));
        assert_eq!(check_flags(8), Err(errno::EINVAL));
    }

    #[test]
    fn seeded_streams_differ_and_repeat() {
        let (mut a, mut b, mut c) = (Rng::new(&[1; 32]), Rng::new(&[1; 32]), Rng::new(&[2; 32]));
        let (mut x, mut y, mut z) = ([0u8; 37], [0u8; 37], [0u8; 37]);
        a.fill(&mut x);
        b.fill(&mut y);
        c.fill(&mut z);
        assert_eq!(x, y);
        assert_ne!(x, z);
        // Not degenerate: bits of every kind appear.
        let ones: u32 = x.iter().map(|b| b.count_ones()).sum();
        assert!(ones > 100 && ones < 200);
        let mut zero = Rng::new(&[0; 32]);
        assert_ne!(zero.next_u64(), 0);
    }
}
