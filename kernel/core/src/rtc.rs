//! The wall clock's arithmetic: the CMOS real-time clock's registers (read once by the kernel
//! at boot) turned into seconds since 1970, and the time-stamp counter's rate from two
//! readings a known number of timer ticks apart. User space keeps time from these
//! (`kinfo::BOOT_EPOCH`, `BOOT_TSC`, `TSC_KHZ`; `sawmill_rt::clock`).

/// Raw CMOS RTC registers as read (0x00 seconds, 0x02 minutes, 0x04 hours, 0x07 day of month,
/// 0x08 month, 0x09 year, 0x32 century, 0x0b status B).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rtc {
    pub sec: u8,
    pub min: u8,
    pub hour: u8,
    pub day: u8,
    pub month: u8,
    pub year: u8,
    pub century: u8,
    pub status_b: u8,
}

/// Status B: values are binary, not BCD.
const BINARY: u8 = 1 << 2;
/// Status B: hours run 0..24 (else 1..12 with bit 7 = PM).
const HOURS_24: u8 = 1 << 1;

fn from_bcd(v: u8) -> u8 {
    (v >> 4) * 10 + (v & 0xf)
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl Rtc {
    /// Seconds since 1970-01-01 00:00:00 UTC (the RTC keeps UTC, as QEMU's does by default), or
    /// None if the registers hold no valid date.
    pub fn unix_time(&self) -> Option<u64> {
        let conv = |v: u8| {
            if self.status_b & BINARY != 0 {
                v
            } else {
                from_bcd(v)
            }
        };
        let pm = self.status_b & HOURS_24 == 0 && self.hour & 0x80 != 0;
        let mut hour = conv(self.hour & 0x7f);
        if self.status_b & HOURS_24 == 0 {
            hour %= 12;
            if pm {
                hour += 12;
            }
        }
        let (sec, min, day, month) = (
            conv(self.sec),
            conv(self.min),
            conv(self.day),
            conv(self.month),
        );
        let century = match conv(self.century) {
            c @ 19..=99 => c as i64,
            _ => 20,
        };
        let year = century * 100 + conv(self.year) as i64;
        if sec > 59
            || min > 59
            || hour > 23
            || !(1..=31).contains(&day)
            || !(1..=12).contains(&month)
        {
            return None;
        }
        let days = days_from_civil(year, month as u32, day as u32);
        let t = days * 86_400 + hour as i64 * 3600 + min as i64 * 60 + sec as i64;
        u64::try_from(t).ok()
    }
}

/// The time-stamp counter's rate in kHz from two readings `ticks` timer ticks of `tick_us`
/// microseconds apart.
pub fn tsc_khz(tsc_delta: u64, ticks: u64, tick_us: u64) -> u64 {
    let us = ticks.saturating_mul(tick_us);
    if us == 0 {
        return 0;
    }
    (tsc_delta as u128 * 1000 / us as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn bcd_and_binary_registers() {
        // 2026-11-25 02:48:54 UTC, BCD, 24-hour: `date -u -d '2026-11-25 02:48:54' +%s`.
        let r = Rtc {
            sec: 0x54,
            min: 0x48,
            hour: 0x02,
            day: 0x25,
            month: 0x11,
            year: 0x26,
            century: 0x20,
            status_b: HOURS_24,
        };
        assert_eq!(r.unix_time(), Some(1_795_574_934));
        let b = Rtc {
            sec: 54,
            min: 48,
            hour: 2,
            day: 25,
            month: 11,
            year: 26,
            century: 20,
            status_b: HOURS_24 | BINARY,
        };
        assert_eq!(b.unix_time(), Some(1_795_574_934));
        // 12-hour mode: 2 PM is 14:00; 12 AM is 0:00. No century register: the 2000s.
        let pm = Rtc {
            hour: 0x82,
            status_b: 0,
            century: 0,
            ..r
        };
        assert_eq!(pm.unix_time(), Some(1_795_574_934 + 12 * 3600));
        let midnight = Rtc {
            hour: 0x12,
            status_b: 0,
            ..r
        };
        assert_eq!(midnight.unix_time(), Some(1_795_574_934 - 2 * 3600));
        // Garbage is refused.
        assert_eq!(Rtc { month: 0x13, ..r }.unix_time(), None);
        assert_eq!(Rtc { sec: 0x60, ..r }.unix_time(), None);
        assert_eq!(Rtc { day: 0, ..r }.unix_time(), None);
    }

    #[test]
    fn tsc_rate() {
        assert_eq!(tsc_khz(50_000_000, 5, 10_000), 1_000_000);
        assert_eq!(tsc_khz(1, 0, 10_000), 0);
    }
}
