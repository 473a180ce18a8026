//! x86 port I/O for drivers that root or `pci` granted ports to (the task's I/O bitmap).
//!
//! Safe functions: an access to a port the task was not granted raises #GP, which the kernel
//! turns into a fault of this task (a fault message to its handler), never an access to another
//! device; and port I/O touches no memory of the program. What a port write does to its device
//! is the driver's business, as with any device register.
//!
//! Not marked `nomem` on purpose: an access is a compiler barrier, so a driver's stores to DMA
//! memory (a descriptor, a ring index) are not moved past the port write that tells the device
//! to look at them.

macro_rules! port_pair {
    ($read:ident, $write:ident, $ty:ty, $reg:tt) => {
        #[doc = concat!("Reads a `", stringify!($ty), "` from I/O port `port`.")]
        pub fn $read(port: u16) -> $ty {
            let value: $ty;
            // SAFETY: port input touches no memory; an ungranted port faults this task only.
            unsafe {
                core::arch::asm!(concat!("in ", $reg, ", dx"), in("dx") port, out($reg) value,
                    options(nostack, preserves_flags))
            }
            value
        }

        #[doc = concat!("Writes a `", stringify!($ty), "` to I/O port `port`.")]
        pub fn $write(port: u16, value: $ty) {
            // SAFETY: as in the read: no memory is touched; an ungranted port faults this task.
            unsafe {
                core::arch::asm!(concat!("out dx, ", $reg), in("dx") port, in($reg) value,
                    options(nostack, preserves_flags))
            }
        }
    };
}

port_pair!(inb, outb, u8, "al");
port_pair!(inw, outw, u16, "ax");
port_pair!(inl, outl, u32, "eax");
