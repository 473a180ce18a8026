//! Shared helpers for the scenario programs: a deterministic random generator and checks that
//! print `PASS`/`FAIL` lines the scenario files look for.
#![no_std]

/// The value of a `key=value` argument from the manifest.
pub fn arg_value(key: &str) -> Option<&'static str> {
    sawmill_rt::env::args().find_map(|a| a.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The endpoint a test client or server uses: `ep=NAME` if given, else `default`.
pub fn endpoint(default: &str) -> u64 {
    let name = arg_value("ep").unwrap_or(default);
    match sawmill_rt::env::cap(name) {
        Some(s) => s,
        None => {
            sawmill_rt::println!(
                "{}: FAIL no endpoint named {}",
                sawmill_rt::env::name(),
                name
            );
            sawmill_rt::exit(1)
        }
    }
}

/// The seeded generator of the test programs: the hostile client's (xorshift64*).
pub use sawmill_hostile::Rng;

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
