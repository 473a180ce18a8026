//! COM1 serial console: the kernel's log and the debug output of user programs.
use crate::arch::{inb, outb};
use core::fmt;

const COM1: u16 = 0x3f8;

pub fn init() {
    outb(COM1 + 1, 0x00); // no interrupts
    outb(COM1 + 3, 0x80); // DLAB
    outb(COM1, 0x01); // 115200 baud
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03); // 8N1
    outb(COM1 + 2, 0xc7); // FIFO
    outb(COM1 + 4, 0x03);
}

pub fn putb(b: u8) {
    // Under emulation the transmitter is always ready; the bound keeps real hardware from
    // hanging the kernel if the UART is absent.
    let mut n = 0;
    while inb(COM1 + 5) & 0x20 == 0 && n < 100_000 {
        n += 1;
    }
    outb(COM1, b);
}

pub fn write(bytes: &[u8]) {
    for &b in bytes {
        if b == b'\n' {
            putb(b'\r');
        }
        putb(b);
    }
}

pub struct Serial;

impl fmt::Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write(s.as_bytes());
        Ok(())
    }
}

#[macro_export]
macro_rules! kprintln {
    ($($t:tt)*) => {{
        use core::fmt::Write;
        let _ = writeln!($crate::serial::Serial, $($t)*);
    }};
}
