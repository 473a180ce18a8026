//! Signals as proc records them: the numbers of the default actions it carries out, and the
//! signal a CPU exception means (what Linux's `arch/x86/kernel/traps.c` sends for each vector).

pub const SIGILL: u32 = 4;
pub const SIGTRAP: u32 = 5;
pub const SIGABRT: u32 = 6;
pub const SIGBUS: u32 = 7;
pub const SIGFPE: u32 = 8;
pub const SIGKILL: u32 = 9;
pub const SIGSEGV: u32 = 11;
/// Signal numbers run 1..=64 (`_NSIG`).
pub const MAX: u32 = 64;

/// The signal Linux sends for CPU exception `vector`.
pub fn for_exception(vector: u64) -> u32 {
    match vector {
        0 | 16 | 19 | 9 => SIGFPE, // #DE, #MF, #XM, coprocessor segment overrun
        1 | 3 => SIGTRAP,          // #DB, #BP
        6 => SIGILL,               // #UD
        11 | 12 | 17 => SIGBUS,    // #NP, #SS, #AC
        _ => SIGSEGV,              // #OF, #BR, #TS, #GP, #PF and anything else
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceptions_map_like_linux() {
        assert_eq!(for_exception(0), SIGFPE);
        assert_eq!(for_exception(3), SIGTRAP);
        assert_eq!(for_exception(6), SIGILL);
        assert_eq!(for_exception(13), SIGSEGV);
        assert_eq!(for_exception(14), SIGSEGV);
        assert_eq!(for_exception(17), SIGBUS);
        assert_eq!(for_exception(19), SIGFPE);
        assert_eq!(for_exception(u64::MAX), SIGSEGV);
    }
}
