//! The PCI platform server: the authority over devices.
//!
//! Holds the configuration-space ports 0xCF8-0xCFF (mechanism #1), an I/O-control capability
//! root minted for the manifest's `io_window` (it can grant ports of that window and no others)
//! and an IRQ-control capability for the manifest's `irq_lines`. At start it enumerates bus 0 and
//! prints what it finds. Its `config` table (`sawmill_pci_api::Config`) assigns devices to
//! drivers: each `assign` entry gives the N-th device with a vendor/device id to the driver it
//! names — the caller holding that driver's badge on the `pci` endpoint, which the host tool
//! filled in — and moves its I/O BAR 0 into the window (to `bar0` if given, else to the next
//! free naturally aligned range). Decoding stays off until that badge `claim`s the device with its task capability: only then does pci grant the task
//! the BAR's ports (`ioport_give`), make the Irq capability for the device's line (`irq_get`,
//! returned as a cap item) and switch on I/O decoding and bus mastering. Any other badge is
//! refused, so the device's ports and interrupt reach its driver and no one else.
//!
//! A device whose BAR 0 is memory (`claim_mmio`; a device without BAR 0, such as a modern-only
//! virtio device, offers its first memory BAR instead) stays where firmware placed it; pci maps its
//! pages into the claiming task with the restricted device control root gives it
//! (`sys:device-control`: `map_phys` of device memory and `dma_bind`, nothing else). Every claim
//! also binds the device's DMA to the claiming task: under an IOMMU the device then reaches only
//! the pages that task shares with `dma_map`. A claimed device's driver may read (not write) its
//! configuration space (`config_read`), where modern virtio keeps its capability list.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_abi::map;
use sawmill_interfaces::pci::{self, ClaimMmioOut, ClaimOut};
use sawmill_interfaces::rpc::{self, AfterReply, IpcResult, Next};
use sawmill_interfaces::PciError;
use sawmill_pci_api::Config;
use sawmill_rt::port::{inl, outl};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

/// Claims refused so far (their console messages are rate-limited).
static REFUSALS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

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
    /// A memory BAR (0, or the first one if BAR 0 is absent): physical base and size (io_base/io_size are then 0).
    mmio: Option<(u64, u64)>,
    /// Its pages are mapped into pci (at `mmio_scratch`), the source of the driver's mapping.
    mmio_mapped: bool,
    claimed: bool,
}

/// Where pci maps memory BARs before handing them on: 16 MiB per assignment.
const MMIO_SCRATCH: u64 = 0x5000_0000;
const MAX_MMIO: u64 = 16 << 20;

fn mmio_scratch(assignment: usize) -> u64 {
    MMIO_SCRATCH + assignment as u64 * MAX_MMIO
}

/// Base and size of the memory BAR at config register `reg` (32- or 64-bit), decoding off.
fn mem_bar(bdf: u32, reg: u32) -> (u64, u64) {
    let lo = cfg_read(bdf, reg);
    let wide = (lo >> 1) & 3 == 2;
    cfg_write(bdf, reg, 0xffff_ffff);
    let v = cfg_read(bdf, reg);
    cfg_write(bdf, reg, lo);
    let size = (!(v & 0xffff_fff0)).wrapping_add(1) as u64;
    let hi = if wide {
        cfg_read(bdf, reg + 4) as u64
    } else {
        0
    };
    ((lo & 0xffff_fff0) as u64 | hi << 32, size)
}

/// The config register of the memory BAR a `claim_mmio` hands out: BAR 0, or, when the device
/// has no BAR 0 (a modern-only virtio device), its first implemented memory BAR. None if it has
/// no memory BAR. Decoding off.
fn mmio_bar_reg(bdf: u32) -> Option<u32> {
    (0x10..=0x24).step_by(4).find(|&reg| {
        let old = cfg_read(bdf, reg);
        cfg_write(bdf, reg, 0xffff_ffff);
        let v = cfg_read(bdf, reg);
        cfg_write(bdf, reg, old);
        // Unimplemented BARs read back 0; I/O BARs have bit 0 set. The first memory BAR found
        // is never the upper half of a 64-bit one (that follows its lower half).
        v != 0 && v & 1 == 0
    })
}

struct Pci {
    devs: Vec<Dev>,
    assigned: Vec<Assign>,
    /// Our restricted I/O-control and IRQ-control capabilities (0 = none).
    io_ctl: u64,
    irq_ctl: u64,
    /// An empty slot for the Irq capability a claim returns (deleted once the reply carrying it
    /// is delivered: pci keeps no copy).
    irq_slot: u64,
    /// The receive slot for a claim's task capability, and the Irq capability's deletion.
    after: AfterReply,
    /// The restricted device control (map_phys, dma_bind), 0 if root gave none.
    dev_ctl: u64,
}

impl Pci {
    /// Binds the device's DMA to the claiming task and says what that means.
    fn bind_dma(&self, d: &Dev, task: u64) -> Result<bool, PciError> {
        if self.dev_ctl == 0 {
            println!(
                "pci: {:04x}:{:04x} DMA is not confined: pci holds no device control",
                d.vendor, d.device
            );
            return Ok(false);
        }
        match sys::dma_bind(self.dev_ctl, d.bdf as u64, task) {
            Ok(true) => {
                // Transitional (legacy-capable) virtio devices do not use the platform's DMA
                // translation unless they negotiate VIRTIO_F_ACCESS_PLATFORM, which QEMU offers
                // only to modern ones: the binding does not confine them.
                let bypass = d.vendor == 0x1af4 && (0x1000..0x1040).contains(&d.device);
                println!(
                    "pci: {:04x}:{:04x} DMA bound to its driver's IOMMU domain{}",
                    d.vendor,
                    d.device,
                    if bypass {
                        " (legacy virtio: its DMA bypasses the IOMMU, not confined)"
                    } else {
                        ""
                    }
                );
                Ok(true)
            }
            Ok(false) => {
                println!(
                    "pci: {:04x}:{:04x} DMA is not confined: no IOMMU",
                    d.vendor, d.device
                );
                Ok(false)
            }
            // The claiming task ended during its claim (a driver killed as it started, issue
            // 16): nothing of ours is wrong, the claim is refused and its successor claims.
            Err(sawmill_abi::Error::PeerGone) => {
                println!(
                    "pci: claim of {:04x}:{:04x} refused: the claiming task has ended",
                    d.vendor, d.device
                );
                Err(PciError::BadTask)
            }
            Err(e) => {
                println!(
                    "pci: FAIL binding the DMA of {:04x}:{:04x}: {}",
                    d.vendor,
                    d.device,
                    e.name()
                );
                Err(PciError::BadTask)
            }
        }
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
    fn claim(&mut self, badge: u64, index: u32, task: u64) -> Result<ClaimOut, PciError> {
        let a = self
            .assigned
            .iter_mut()
            .filter(|a| a.badge == badge)
            .nth(index as usize)
            .ok_or_else(|| {
                // A client may ask as often as it likes: the console hears of the first refusals
                // and then of every 1000th, so nobody can flood it through us (issue 12).
                let n = REFUSALS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                if n < 8 || n.is_multiple_of(1000) {
                    println!("pci: claim of device {} by badge {} refused: not assigned to it ({} refusals)", index, badge, n + 1);
                }
                PciError::NotYours
            })?;
        let d = &self.devs[a.dev];
        if a.mmio.is_some() {
            return Err(PciError::WrongBar);
        }
        // The interrupt first (nothing granted yet if it fails), then the ports.
        if sys::irq_get(self.irq_ctl, d.irq as u64, self.irq_slot).is_err() {
            println!(
                "pci: FAIL line {} of {:04x}:{:04x} is not among our irq_lines",
                d.irq, d.vendor, d.device
            );
            return Err(PciError::NoIrq);
        }
        if let Err(e) = sys::ioport_give(self.io_ctl, task, a.io_base as u64, a.io_size as u64) {
            println!(
                "pci: granting ports {:#x}+{:#x} to badge {} failed: {}",
                a.io_base,
                a.io_size,
                badge,
                e.name()
            );
            let _ = sys::cap_delete(self.irq_slot);
            return Err(PciError::BadTask);
        }
        self.after.delete(self.irq_slot);
        a.claimed = true;
        let (io_base, io_size, line, dev) = (a.io_base, a.io_size, d.irq, a.dev);
        let (vendor, device, bdf) = (d.vendor, d.device, d.bdf);
        println!(
            "pci: {:02x}:{:02x}.{} {:04x}:{:04x} claimed by badge {}: ports {:#x}+{:#x}, irq {}",
            bdf >> 8,
            bdf >> 3 & 31,
            bdf & 7,
            vendor,
            device,
            badge,
            io_base,
            io_size,
            line
        );
        // Its DMA goes to the claiming task's domain before bus mastering is switched on.
        let _ = self.bind_dma(&self.devs[dev], task);
        // I/O space and bus master on (memory space stays off: the driver has no BAR mappings).
        let cmd = cfg_read(bdf, 0x04) & 0xffff;
        cfg_write(bdf, 0x04, (cmd & !0x2) | 0x1 | 0x4);
        // The task capability (`task`) is deleted by dispatch when we return: pci keeps none.
        Ok(ClaimOut {
            vendor,
            device,
            bdf,
            io_base,
            io_size,
            line,
            irq: self.irq_slot,
        })
    }

    fn claim_mmio(
        &mut self,
        badge: u64,
        index: u32,
        task: u64,
        vaddr: u64,
    ) -> Result<ClaimMmioOut, PciError> {
        let Some(ai) = (0..self.assigned.len())
            .filter(|&i| self.assigned[i].badge == badge)
            .nth(index as usize)
        else {
            println!(
                "pci: claim of device {} by badge {} refused: not assigned to it",
                index, badge
            );
            return Err(PciError::NotYours);
        };
        let a = &self.assigned[ai];
        let Some((base, size)) = a.mmio else {
            return Err(PciError::WrongBar);
        };
        if vaddr == 0 || vaddr & 0xfff != 0 || vaddr >= 0x7000_0000_0000 {
            return Err(PciError::WrongBar);
        }
        let d = &self.devs[a.dev];
        let (vendor, device, bdf) = (d.vendor, d.device, d.bdf);
        let pages = size.div_ceil(4096);
        let scratch = mmio_scratch(ai);
        if !a.mmio_mapped {
            if let Err(e) = sys::map_phys(self.dev_ctl, base, scratch, pages, map::UNCACHED) {
                println!(
                    "pci: FAIL mapping BAR 0 of {:04x}:{:04x} at {:#x}: {}",
                    vendor,
                    device,
                    base,
                    e.name()
                );
                return Err(PciError::NoMap);
            }
            self.assigned[ai].mmio_mapped = true;
        }
        if let Err(e) = sys::task_map(task, scratch, vaddr, pages, map::READ | map::WRITE) {
            println!(
                "pci: mapping BAR 0 into badge {} failed: {}",
                badge,
                e.name()
            );
            return Err(PciError::NoMap);
        }
        println!(
            "pci: {:02x}:{:02x}.{} {:04x}:{:04x} claimed by badge {}: memory {:#x}+{:#x} at {:#x}",
            bdf >> 8,
            bdf >> 3 & 31,
            bdf & 7,
            vendor,
            device,
            badge,
            base,
            size,
            vaddr
        );
        let confined = self.bind_dma(&self.devs[self.assigned[ai].dev], task)?;
        // Memory space and bus master on, I/O space off.
        let cmd = cfg_read(bdf, 0x04) & 0xffff;
        cfg_write(bdf, 0x04, (cmd & !0x1) | 0x2 | 0x4);
        self.assigned[ai].claimed = true;
        Ok(ClaimMmioOut {
            vendor,
            device,
            bdf,
            bar_size: size as u32,
            dma_confined: confined,
        })
    }

    fn config_read(&mut self, badge: u64, index: u32, reg: u32) -> Result<u32, PciError> {
        let a = self
            .assigned
            .iter()
            .filter(|a| a.badge == badge)
            .nth(index as usize)
            .filter(|a| a.claimed)
            .ok_or(PciError::NotYours)?;
        if reg >= 256 || !reg.is_multiple_of(4) {
            return Err(PciError::NoDevice);
        }
        Ok(cfg_read(self.devs[a.dev].bdf, reg))
    }
}

impl rpc::Serve for Pci {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        pci::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
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
            println!(
                "pci: 00:{:02x}.{} {:04x}:{:04x} class {:06x} irq {}",
                dev,
                f,
                id & 0xffff,
                id >> 16,
                class,
                irq
            );
            devs.push(Dev {
                bdf,
                vendor: id as u16,
                device: (id >> 16) as u16,
                irq,
            });
            // Single-function devices answer for every function number: stop at function 0.
            if f == 0 && cfg_read(bdf, 0x0c) >> 16 & 0x80 == 0 {
                break;
            }
        }
    }
    let io_ctl = env::cap("sys:io-control").unwrap_or(0);
    let irq_ctl = env::cap("sys:irq-control").unwrap_or(0);
    let dev_ctl = env::cap("sys:device-control").unwrap_or(0);
    let window = env::value(env::KIND_IO_WINDOW).map(sawmill_abi::io_window);
    let cfg: Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("pci: FAIL config: {}", e);
            return;
        }
    };
    let mut assigned = Vec::new();
    let mut next_free = window.map_or(0, |w| w.0 as u32);
    for a in &cfg.assign {
        let Some((wlo, wn)) = window else {
            println!(
                "pci: FAIL device for {}: the manifest gives pci no io_window to place BARs in",
                a.driver.name
            );
            continue;
        };
        let (badge, ven, did, n) = (a.driver.badge, a.vendor, a.device, a.index as usize);
        let Some(i) = (0..devs.len())
            .filter(|&i| devs[i].vendor == ven && devs[i].device == did)
            .nth(n)
        else {
            println!(
                "pci: no device {:04x}:{:04x} #{} for badge {}",
                ven, did, n, badge
            );
            continue;
        };
        let bdf = devs[i].bdf;
        if cfg_read(bdf, 0x10) & 1 == 0 {
            // A memory BAR stays where firmware put it; decoding off until the driver claims it.
            let cmd = cfg_read(bdf, 0x04) & 0xffff;
            cfg_write(bdf, 0x04, cmd & !0x7);
            let reg = mmio_bar_reg(bdf).unwrap_or(0x10);
            let (base, size) = mem_bar(bdf, reg);
            if base == 0
                || !(16..=MAX_MMIO).contains(&size)
                || !size.is_power_of_two()
                || dev_ctl == 0
            {
                println!("pci: FAIL {:04x}:{:04x} memory BAR {} {:#x}+{:#x}: unplaced, too large, or pci has no device control", ven, did, (reg - 0x10) / 4, base, size);
                continue;
            }
            assigned.push(Assign {
                badge,
                dev: i,
                io_base: 0,
                io_size: 0,
                mmio: Some((base, size)),
                mmio_mapped: false,
                claimed: false,
            });
            continue;
        }
        // Decoding off while the BAR moves, and until the driver claims the device.
        let cmd = cfg_read(bdf, 0x04) & 0xffff;
        cfg_write(bdf, 0x04, cmd & !0x7);
        let size = io_bar_size(bdf).max(4);
        let base = match a.bar0 {
            Some(b) => b as u32,
            None => (next_free + size - 1) & !(size - 1),
        };
        let inside = base as u64 >= wlo && base as u64 + size as u64 <= wlo + wn;
        let overlaps = assigned
            .iter()
            .any(|o: &Assign| base < o.io_base + o.io_size && o.io_base < base + size);
        if !inside || overlaps || base % size != 0 {
            println!("pci: FAIL BAR 0 of {:04x}:{:04x} at {:#x}+{:#x}: outside the window {:#x}+{:#x}, misaligned or taken", ven, did, base, size, wlo, wn);
            continue;
        }
        next_free = next_free.max(base + size);
        cfg_write(bdf, 0x10, base | 1);
        assigned.push(Assign {
            badge,
            dev: i,
            io_base: base,
            io_size: size,
            mmio: None,
            mmio_mapped: false,
            claimed: false,
        });
    }
    let ep = env::cap("pci").expect("pci endpoint");
    println!(
        "pci: {} devices, {} assigned to drivers",
        devs.len(),
        assigned.len()
    );
    // Slots above every capability root gave us: where a claim's task capability lands, and
    // where the Irq capability it returns is made.
    let rx = thread::alloc_slot();
    let mut srv = Pci {
        devs,
        assigned,
        io_ctl,
        irq_ctl,
        irq_slot: thread::alloc_slot(),
        after: AfterReply::new(),
        dev_ctl,
    };
    srv.after.receive_into(&[rx]);
    let _ = rpc::serve(ep, &mut srv);
}
