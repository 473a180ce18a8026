//! Shared pieces of the IDL test programs: free capability slots, the check macro and the
//! never-inlined wrappers the stub benchmarks disassemble (`docs/idl.md` §4).
#![no_std]

use sawmill_interfaces::idltest;

/// The `n`-th capability slot above those root filled (empty at start).
pub fn free_slot(n: u64) -> u64 {
    sawmill_rt::env::last_slot() + 1 + n
}

/// Counts failed checks; prints each with its line.
pub struct Checker {
    pub who: &'static str,
    pub failed: u32,
    pub passed: u32,
}

impl Checker {
    pub const fn new(who: &'static str) -> Checker {
        Checker {
            who,
            failed: 0,
            passed: 0,
        }
    }
    /// Prints the verdict; true if every check passed.
    pub fn report(&self) -> bool {
        if self.failed == 0 {
            sawmill_rt::println!("{}: PASS ({} checks)", self.who, self.passed);
            true
        } else {
            sawmill_rt::println!(
                "{}: {} of {} checks FAILED",
                self.who,
                self.failed,
                self.failed + self.passed
            );
            false
        }
    }
    /// Prints the verdict and exits (status 0 on success).
    pub fn finish(&self) -> ! {
        let ok = self.report();
        sawmill_rt::exit(if ok { 0 } else { 1 })
    }
}

/// `check!(c, value, expected)`: counts, and prints both on a mismatch.
#[macro_export]
macro_rules! check {
    ($c:expr, $a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        if a == b {
            $c.passed += 1;
        } else {
            $c.failed += 1;
            sawmill_rt::println!(
                "{}: FAIL line {}: {} = {:?}, expected {:?}",
                $c.who,
                line!(),
                stringify!($a),
                a,
                b
            );
        }
    }};
}

/// The client stub of the `idl.client_stub.insn` benchmark: two scalars in, one out.
#[no_mangle]
#[inline(never)]
pub fn idl_bench_client_add(ep: u64, a: u64, b: u64) -> u64 {
    idltest::Client::new(ep).add(a, b).unwrap_or(u64::MAX)
}
