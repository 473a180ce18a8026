//! The PCI platform server.
//!
//! Holds the configuration-space ports 0xCF8-0xCFF (mechanism #1) and nothing else. At start it
//! enumerates bus 0 and prints what it finds. Its arguments assign devices to drivers:
//! `assign=BADGE:VENDOR:DEVICE:N:IOBASE` gives the N-th device with that vendor/device id to the
//! caller holding badge BADGE on the `pci` endpoint, and moves its I/O BAR 0 to IOBASE. Root
//! delegates exactly those ports and the device's interrupt line to the same driver (the
//! manifest names both; only root holds the I/O-port and IRQ control capabilities), so the
//! driver can drive its device and no other. Only the assigned badge may `claim` a device; only
//! then are its I/O decoding and bus mastering switched on, so an unclaimed device never DMAs.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_interfaces::pci::{self, ClaimOut};
use sawmill_interfaces::PciError;
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

fn outl(port: u16, v: u32) {
    // SAFETY: root delegated 0xCF8-0xCFF to this task; config-space access has no memory effects.
    unsafe { core::arch::asm!("out dx, eax", in("dx") port, in("eax") v, options(nostack)) }
}
fn inl(port: u16) -> u32 {
    let v: u32;
    // SAFETY: as in `outl`.
    unsafe { core::arch::asm!("in eax, dx", in("dx") port, out("eax") v, options(nostack)) }
    v
}

fn cfg_addr(bdf: u32, reg: u32) -> u32 {
    0x8000_0000 | bdf << 8 | (reg & 0xfc)
}
fn cfg_read(bdf: u32, reg: u32) -> u32 {
    outl(0xcf8, cfg_addr(bdf, reg));
    inl(0xcfc)
}
fn cfg_write(bdf: u32, reg: u32, v: u32) {
    outl(0xcf8, cfg_addr(bdf, reg));
    outl(0xcfc, v);
}

struct Dev {
    bdf: u32,
    vendor: u16,
    device: u16,
    irq: u8,
}

struct Assign {
    badge: u64,
    dev: usize,
    io_base: u32,
    io_size: u32,
    claimed: bool,
}

struct Pci {
    devs: Vec<Dev>,
    assigned: Vec<Assign>,
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Size of an I/O BAR: write all ones, read back the writable bits, restore.
fn io_bar_size(bdf: u32) -> u32 {
    let old = cfg_read(bdf, 0x10);
    cfg_write(bdf, 0x10, 0xffff_ffff);
    let v = cfg_read(bdf, 0x10);
    cfg_write(bdf, 0x10, old);
    (!(v & 0xffff_fffc)).wrapping_add(1) & 0xffff
}

impl pci::Server for Pci {
    fn claim(&mut self, badge: u64, index: u32) -> Result<ClaimOut, PciError> {
        let a = self
            .assigned
            .iter_mut()
            .filter(|a| a.badge == badge)
            .nth(index as usize)
            .ok_or(PciError::NotYours)?;
        let d = &self.devs[a.dev];
        // I/O space and bus master on (memory space stays off: the driver has no BAR mappings).
        let cmd = cfg_read(d.bdf, 0x04) & 0xffff;
        cfg_write(d.bdf, 0x04, (cmd & !0x2) | 0x1 | 0x4);
        a.claimed = true;
        println!("pci: {:02x}:{:02x}.{} {:04x}:{:04x} claimed by badge {}", d.bdf >> 8, d.bdf >> 3 & 31, d.bdf & 7, d.vendor, d.device, badge);
        Ok(ClaimOut { vendor: d.vendor, device: d.device, bdf: d.bdf, io_base: a.io_base, io_size: a.io_size, irq: d.irq })
    }
}

fn main() {
    let mut devs = Vec::new();
    for dev in 0..32u32 {
        for f in 0..8u32 {
            let bdf = dev << 3 | f;
            let id = cfg_read(bdf, 0);
            if id & 0xffff == 0xffff {
                if f == 0 {
                    break;
                }
                continue;
            }
            let irq = cfg_read(bdf, 0x3c) as u8;
            let class = cfg_read(bdf, 0x08) >> 8;
            println!("pci: 00:{:02x}.{} {:04x}:{:04x} class {:06x} irq {}", dev, f, id & 0xffff, id >> 16, class, irq);
            devs.push(Dev { bdf, vendor: id as u16, device: (id >> 16) as u16, irq });
            // Single-function devices answer for every function number: stop at function 0.
            if f == 0 && cfg_read(bdf, 0x0c) >> 16 & 0x80 == 0 {
                break;
            }
        }
    }
    let mut assigned = Vec::new();
    for a in env::args() {
        let Some(spec) = a.strip_prefix("assign=") else { continue };
        let p: Vec<u64> = spec.split(':').filter_map(num).collect();
        if p.len() != 5 {
            println!("pci: FAIL bad argument `{}`", a);
            continue;
        }
        let (badge, ven, did, n, base) = (p[0], p[1] as u16, p[2] as u16, p[3] as usize, p[4] as u32);
        let Some(i) = (0..devs.len()).filter(|&i| devs[i].vendor == ven && devs[i].device == did).nth(n) else {
            println!("pci: no device {:04x}:{:04x} #{} for badge {}", ven, did, n, badge);
            continue;
        };
        let bdf = devs[i].bdf;
        if cfg_read(bdf, 0x10) & 1 == 0 {
            println!("pci: FAIL {:04x}:{:04x} BAR 0 is not an I/O BAR", ven, did);
            continue;
        }
        // Decoding off while the BAR moves, and until the driver claims the device.
        let cmd = cfg_read(bdf, 0x04) & 0xffff;
        cfg_write(bdf, 0x04, cmd & !0x7);
        let size = io_bar_size(bdf);
        cfg_write(bdf, 0x10, base | 1);
        assigned.push(Assign { badge, dev: i, io_base: base, io_size: size, claimed: false });
    }
    let ep = env::cap("pci").expect("pci endpoint");
    println!("pci: {} devices, {} assigned to drivers", devs.len(), assigned.len());
    let mut srv = Pci { devs, assigned };
    pci::serve(ep, &mut srv)
}
