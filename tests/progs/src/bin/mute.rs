//! Scenario 2 (no ambient authority), the debug console: a server the manifest does not let
//! print (`console = false`) holds no console capability, so every way it tries to write to
//! the console fails — the empty console slot, another capability in its place, and every other
//! slot it has. It cannot print its verdict either: it reports through its exit status
//! (0 = every attempt refused; 1 = one got through, which root reports as a failure).
#![no_std]
#![no_main]
use sawmill_abi::{Error, Sys};
use sawmill_rt::{slots, sys};

sawmill_rt::entry!(main);

const MSG: &[u8] = b"mute: FAIL this line reached the console\n";

fn write_through(slot: u64) -> u64 {
    sys::raw_num(
        Sys::DebugWrite as u64,
        [slot, MSG.as_ptr() as u64, MSG.len() as u64, 0, 0, 0],
    )
}

fn main() {
    // The console slot is empty.
    let empty = sys::debug_write(MSG) == Err(Error::BadCap);
    // A capability that is not the console (our own task) is refused as such.
    let wrong = write_through(slots::TASK) == Error::WrongKind as u64;
    // And no other slot holds a console.
    let none = (0..64u64).all(|s| write_through(s) != 0);
    sawmill_rt::exit(if empty && wrong && none { 0 } else { 1 })
}
