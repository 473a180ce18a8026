//! The wall clock in user space: the kernel's figures from boot (`kinfo::BOOT_EPOCH`,
//! `BOOT_TSC`, `TSC_KHZ`) and `rdtsc`, so that reading the time costs no system call.

use crate::sys;
use sawmill_abi::kinfo;

/// The clock's figures, read once.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wall {
    /// Seconds since 1970 when the time-stamp counter read `tsc`.
    pub epoch: u64,
    pub tsc: u64,
    /// Time-stamp counter ticks per millisecond.
    pub khz: u64,
}

impl Wall {
    /// The kernel's figures, waiting (yielding) for the rate if the kernel is still measuring
    /// it (the first tenth of a second after boot).
    pub fn get() -> Wall {
        let info = |w| sys::kernel_info(w).unwrap_or(0);
        let mut khz = info(kinfo::TSC_KHZ);
        while khz == 0 {
            sys::yield_now();
            khz = info(kinfo::TSC_KHZ);
        }
        Wall {
            epoch: info(kinfo::BOOT_EPOCH),
            tsc: info(kinfo::BOOT_TSC),
            khz,
        }
    }

    /// Nanoseconds since 1970 at time-stamp count `tsc`.
    pub fn nanos_at(&self, tsc: u64) -> u64 {
        let ticks = tsc.saturating_sub(self.tsc) as u128;
        let ns = ticks * 1_000_000 / self.khz.max(1) as u128;
        self.epoch.saturating_mul(1_000_000_000) + ns as u64
    }

    /// Seconds since 1970, now: one 64-bit division (servers stamp every change with it, so it
    /// avoids the 128-bit arithmetic of [`Wall::nanos_at`]).
    pub fn now_secs(&self) -> u64 {
        let ticks = sys::rdtsc().saturating_sub(self.tsc);
        self.epoch + ticks / self.khz.max(1).saturating_mul(1000)
    }
}
