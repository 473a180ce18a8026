//! Shared helpers for the scenario programs: a deterministic random generator and checks that
//! print `PASS`/`FAIL` lines the scenario files look for.
#![no_std]

/// xorshift64*: seeded, reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// Prints a FAIL line and ends the program with status 1 unless `ok`.
#[macro_export]
macro_rules! check {
    ($ok:expr, $($t:tt)*) => {
        if !$ok {
            sawmill_rt::println!("{}: FAIL {}", sawmill_rt::env::name(), format_args!($($t)*));
            sawmill_rt::exit(1);
        }
    };
}
