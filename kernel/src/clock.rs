//! The wall clock: the CMOS real-time clock read once at boot, and the time-stamp counter's
//! rate measured against the timer's first ticks. The kernel keeps no time of day itself; it
//! hands these three figures out (`kernel_info`) and user space counts from them with `rdtsc`,
//! without a system call (`sawmill_rt::clock`). The arithmetic is `sawmill_kcore::rtc`.

use crate::arch::{inb, outb};
use crate::state::kernel;
use sawmill_kcore::rtc::{tsc_khz, Rtc};

/// Ticks the rate is measured over (the timer runs at `TICK_MS` a tick).
const CALIBRATION_TICKS: u64 = 10;
const TICK_US: u64 = sawmill_abi::TICK_MS * 1000;

fn cmos(reg: u8) -> u8 {
    // Bit 7 of the index keeps NMIs masked as the firmware left them.
    outb(0x70, reg | 0x80);
    inb(0x71)
}

fn snapshot() -> Rtc {
    Rtc {
        sec: cmos(0x00),
        min: cmos(0x02),
        hour: cmos(0x04),
        day: cmos(0x07),
        month: cmos(0x08),
        year: cmos(0x09),
        century: cmos(0x32),
        status_b: cmos(0x0b),
    }
}

pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads the time-stamp counter; no memory or flags touched.
    unsafe {
        core::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    };
    (hi as u64) << 32 | lo as u64
}

/// At boot, before any task runs: reads the RTC (the same twice outside an update, as the
/// data sheet advises).
pub fn init() {
    let mut rtc = snapshot();
    for _ in 0..1_000_000 {
        // Status A bit 7: an update is in progress.
        if cmos(0x0a) & 0x80 != 0 {
            continue;
        }
        let again = snapshot();
        if again == rtc {
            break;
        }
        rtc = again;
    }
    let k = kernel();
    k.boot_tsc = rdtsc();
    k.boot_epoch = rtc.unix_time().unwrap_or(0);
    if k.boot_epoch == 0 {
        crate::kprintln!("clock: the RTC holds no valid date; the wall clock starts at 1970");
    }
}

/// On every timer tick (after `ticks` was counted): the rate, once enough ticks have passed.
#[inline(always)]
pub fn tick() {
    let k = kernel();
    if k.tsc_khz != 0 {
        return;
    }
    if k.ticks == 1 {
        k.calibration_tsc = rdtsc();
    } else if k.ticks == 1 + CALIBRATION_TICKS {
        k.tsc_khz = tsc_khz(rdtsc() - k.calibration_tsc, CALIBRATION_TICKS, TICK_US).max(1);
    }
}
