//! COM2's 16550 UART: registers, set-up, polled transmit, receive. Touches only the I/O ports
//! `BASE..BASE + 8`, which root delegated to this server; callers serialise access (the shared
//! lock in main.rs).

use sawmill_rt::port::{inb, outb};

/// COM2's I/O base (the kernel's debug console keeps COM1 at 0x3f8).
pub const BASE: u16 = 0x2f8;

/// Receive buffer (read) and transmit holding register (write); divisor low with DLAB.
const DATA: u16 = BASE;
/// Interrupt enable; divisor high with DLAB.
const IER: u16 = BASE + 1;
/// FIFO control (write).
const FCR: u16 = BASE + 2;
/// Line control.
const LCR: u16 = BASE + 3;
/// Modem control.
const MCR: u16 = BASE + 4;
/// Line status.
const LSR: u16 = BASE + 5;

/// IER: interrupt when received data is available (or the FIFO's character timeout).
const IER_RX_AVAILABLE: u8 = 0x01;
/// LCR: divisor latch access.
const LCR_DLAB: u8 = 0x80;
/// LCR: 8 data bits, no parity, one stop bit.
const LCR_8N1: u8 = 0x03;
/// FCR: FIFOs off. Turning them on clears them, and QEMU (like a real UART) clears them on any
/// change of the enable bit: a byte that arrives while the driver starts — a test's piped input
/// is there from the first instant — would be lost however the start is ordered. With FIFOs
/// off, QEMU hands over the next byte only when the receive register is empty, so nothing is
/// ever dropped; the cost is an interrupt per byte at most, nothing for a terminal.
const FCR_FIFOS_OFF: u8 = 0x00;
/// MCR: DTR and RTS (the other side may send) and OUT2 (gates the IRQ line on a PC).
const MCR_DTR_RTS_OUT2: u8 = 0x0b;
/// LSR: a received byte waits.
const LSR_DATA_READY: u8 = 0x01;
/// LSR: the transmit holding register (and FIFO) is empty.
const LSR_THR_EMPTY: u8 = 0x20;
/// Divisor of the 115200 Hz base clock: 115200 baud.
const DIVISOR: u16 = 1;
/// How long `send` polls for THRE before dropping the rest (a UART that never drains must not
/// hold writers forever): far more than a byte time at any usual baud rate.
const TX_SPIN_LIMIT: u32 = 10_000_000;

/// Sets the UART up: 115200 baud 8N1, FIFOs off (see [`FCR_FIFOS_OFF`]), receive interrupt
/// on. A byte already received stays in the receive register for the interrupt thread.
pub fn init() {
    outb(IER, 0);
    outb(LCR, LCR_DLAB);
    outb(DATA, DIVISOR as u8);
    outb(IER, (DIVISOR >> 8) as u8);
    outb(LCR, LCR_8N1);
    outb(FCR, FCR_FIFOS_OFF);
    outb(MCR, MCR_DTR_RTS_OUT2);
    receive_interrupt(true);
}

/// Turns the receive interrupt on or off (off: the UART keeps bytes until we take them).
pub fn receive_interrupt(on: bool) {
    outb(IER, if on { IER_RX_AVAILABLE } else { 0 });
}

/// Whether a received byte waits.
pub fn received() -> bool {
    inb(LSR) & LSR_DATA_READY != 0
}

/// Takes one received byte (check [`received`] first).
pub fn receive() -> u8 {
    inb(DATA)
}

/// Sends `bytes` by polling: waits for the transmit register to empty before each byte.
///
/// Polling rather than the transmit interrupt: a write is at most 960 bytes on the line (480
/// with every byte a newline expanded), the writer's reply then means the bytes are in the
/// UART (the client is paced by the line, with no output buffer to bound or drain later), and
/// the interrupt thread stays for input only. Under QEMU the transmitter is always ready.
pub fn send(bytes: &[u8]) {
    for &b in bytes {
        let mut spins = 0;
        while inb(LSR) & LSR_THR_EMPTY == 0 {
            spins += 1;
            if spins == TX_SPIN_LIMIT {
                return;
            }
            core::hint::spin_loop();
        }
        outb(DATA, b);
    }
}
