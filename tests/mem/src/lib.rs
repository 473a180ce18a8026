//! Helpers shared by the memory scenario programs: PASS/FAIL checks.
#![no_std]

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
