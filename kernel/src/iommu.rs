//! The IOMMU: Intel VT-d DMA remapping, programmed by the kernel so that a device reaches only
//! the pages its driver shared with it.
//!
//! At boot, `init` finds the ACPI DMAR table; with remapping units present it gives them one
//! root table and one context table for bus 0 (kernel pool frames, the kernel's own) and turns
//! translation on with every context entry empty: every device's DMA is blocked and faults.
//! Without a DMAR it says so and does nothing else (device DMA is then not confined).
//!
//! A **domain** belongs to a driver task: a second-level page table whose frames are charged to
//! the task's factory. `bind` (system call `DmaBind`, device authority) points a device's context
//! entry at the task's domain; `map` (`DmaMap`, by the task itself) copies the task's own
//! mappings of some pages into the domain at IOVA = the task's virtual address. The domain
//! follows the mapping database: `revoked` (every unmap) and `unmapped` (a grant moving a page
//! away) clear the IOVA and invalidate the IOTLB before the kernel returns, so a frame the task
//! lost is out of its devices' reach before its owner can reuse it. `task_gone` puts the task's
//! devices back to blocked and frees the domain. `poll_faults` (every timer tick) logs and
//! clears the fault records.
//!
//! Touches: the units' register pages (uncached, through the direct map), kernel pool frames
//! for the root and context tables, pool frames charged to driver tasks for domain tables.
use crate::factory;
use crate::mem::{phys, phys_to_virt, DIRECT_MAP_SIZE, PAGE};
use crate::obj;
use crate::state::kernel;
use crate::{kprintln, paging};
use sawmill_abi::{map, Error};
use sawmill_kcore::acpi::{self, PhysRead};
use sawmill_kcore::vtd::{self, reg, Frames};

const MAX_UNITS: usize = acpi::MAX_UNITS;
/// Devices that can be bound at once, and domains (driver tasks with a bound device).
const MAX_BOUND: usize = 32;
const BITS: usize = crate::state::MAX_TASKS / 64;

#[derive(Clone, Copy)]
struct Unit {
    regs: u64,
    caps: vtd::Caps,
}

#[derive(Clone, Copy)]
struct Binding {
    /// Requester id: bus << 8 | devfn.
    sid: u16,
    task: u32,
}

#[derive(Clone, Copy)]
struct Domain {
    task: u32,
    /// Top frame of its second-level table.
    top: u64,
    factory: *mut obj::Factory,
}

struct Iommu {
    on: bool,
    units: [Option<Unit>; MAX_UNITS],
    levels: u32,
    coherent: bool,
    domains_max: u32,
    context0: u64,
    /// Register pages, refused to `map_phys`.
    reg_pages: [u64; MAX_UNITS],
    bound: [Option<Binding>; MAX_BOUND],
    domains: [Option<Domain>; MAX_BOUND],
    /// Task ids that have a domain: the one test the unmap paths make.
    has_domain: [u64; BITS],
    /// DMA faults seen; only the first `LOGGED_FAULTS` are logged (a device kept faulting by
    /// its driver must not flood the console).
    faults: u64,
}

const LOGGED_FAULTS: u64 = 256;

static mut IOMMU: Iommu = Iommu {
    on: false,
    units: [None; MAX_UNITS],
    levels: 0,
    coherent: true,
    domains_max: 0,
    context0: 0,
    reg_pages: [0; MAX_UNITS],
    bound: [None; MAX_BOUND],
    domains: [None; MAX_BOUND],
    has_domain: [0; BITS],
    faults: 0,
};

fn st() -> &'static mut Iommu {
    // SAFETY: single CPU, interrupts off in the kernel (as for `obj::k`).
    unsafe { &mut *core::ptr::addr_of_mut!(IOMMU) }
}

fn rd32(u: &Unit, off: u64) -> u32 {
    // SAFETY: inside the unit's register page, mapped uncached in the direct map.
    unsafe { core::ptr::read_volatile((u.regs + off) as *const u32) }
}
fn wr32(u: &Unit, off: u64, v: u32) {
    // SAFETY: as in `rd32`.
    unsafe { core::ptr::write_volatile((u.regs + off) as *mut u32, v) }
}
fn rd64(u: &Unit, off: u64) -> u64 {
    // SAFETY: as in `rd32`.
    unsafe { core::ptr::read_volatile((u.regs + off) as *const u64) }
}
fn wr64(u: &Unit, off: u64, v: u64) {
    // SAFETY: as in `rd32`.
    unsafe { core::ptr::write_volatile((u.regs + off) as *mut u64, v) }
}

/// Waits (bounded) until `done` holds; false on timeout (broken hardware).
fn wait(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..10_000_000 {
        if done() {
            return true;
        }
        core::hint::spin_loop();
    }
    false
}

/// Issues a one-shot or enable command and waits for the status bit.
fn command(u: &Unit, bit: u32, want_set: bool) -> bool {
    let keep = rd32(u, reg::GSTS) & vtd::gcmd::PERSISTENT;
    wr32(u, reg::GCMD, keep | bit);
    wait(|| (rd32(u, reg::GSTS) & bit != 0) == want_set)
}

/// Physical memory below the direct map's end, for the ACPI parser.
struct Firmware;
impl PhysRead for Firmware {
    fn read(&self, pa: u64, buf: &mut [u8]) -> bool {
        if pa
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > DIRECT_MAP_SIZE)
        {
            return false;
        }
        // SAFETY: inside the direct map; firmware tables are plain memory.
        unsafe { core::ptr::copy_nonoverlapping(phys_to_virt(pa), buf.as_mut_ptr(), buf.len()) };
        true
    }
}

/// The RSDP: from the loader (PVH start info, multiboot2 ACPI tags), else by scanning the BIOS
/// area as firmware places it.
fn find_rsdp() -> Option<acpi::RootTable> {
    let fw = Firmware;
    let mut b = [0u8; 36];
    // SAFETY: written once by the boot code.
    let (kind, info) = unsafe { (crate::boot::BOOT_KIND, crate::boot::BOOT_INFO as u64) };
    if kind == 1 {
        let mut p = [0u8; 8];
        if fw.read(info + 32, &mut p) {
            let pa = u64::from_le_bytes(p);
            if pa != 0 && fw.read(pa, &mut b) {
                if let Ok(r) = acpi::parse_rsdp(&b) {
                    return Some(r);
                }
            }
        }
    } else if let Some(mbi) = crate::mem::multiboot2_info() {
        if let Some(r) = acpi::multiboot2_rsdp(mbi) {
            return Some(r);
        }
    }
    // SAFETY: the BIOS area 0xE0000..0x100000 lies in the direct map and is only read.
    let area = unsafe { core::slice::from_raw_parts(phys_to_virt(0xe_0000), 0x2_0000) };
    let pa = acpi::scan_rsdp(area, 0xe_0000)?;
    fw.read(pa, &mut b);
    acpi::parse_rsdp(&b).ok()
}

/// Makes the 2 MiB direct-map page holding `pa` uncached (register pages).
fn uncache(pa: u64) {
    let pml4 = phys_to_virt(paging::kernel_pml4()) as *const u64;
    // SAFETY: the kernel's boot page tables: the direct map is PML4 slot 256 → one PDPT → PDs of
    // 2 MiB pages (built by boot.rs); entries are changed only here and in kmain, at boot.
    unsafe {
        let pdpt = *pml4.add(256) & paging::ADDR;
        let pd = *(phys_to_virt(pdpt) as *const u64).add((pa >> 30) as usize) & paging::ADDR;
        let e = (phys_to_virt(pd) as *mut u64).add(((pa >> 21) & 511) as usize);
        *e |= paging::PCD | paging::PWT;
    }
    crate::arch::write_cr3(kernel().loaded_cr3);
}

/// Where `init` reads ACPI tables.
static mut TABLE_BUF: [u8; 16 * 1024] = [0; 16 * 1024];

/// Finds the IOMMU and turns DMA remapping on with every device blocked. Called once at boot,
/// before root starts.
pub fn init() {
    let Some(root) = find_rsdp() else {
        kprintln!("iommu: none (no ACPI tables found), device DMA is not confined");
        return;
    };
    // A static buffer, not the heap: with or without an IOMMU, the kernel heap is left exactly as
    // it was (its layout shows in the instruction counts of the benchmarks).
    // SAFETY: used only here, once, at boot.
    let buf = unsafe { &mut *core::ptr::addr_of_mut!(TABLE_BUF) };
    let dmar = match acpi::find_table(&Firmware, root, b"DMAR", buf) {
        Ok(Some(n)) => acpi::parse_dmar(&buf[..n]),
        Ok(None) => {
            kprintln!("iommu: none, device DMA is not confined");
            return;
        }
        Err(e) => Err(e),
    };
    let d = match dmar {
        Ok(d) if d.nunits > 0 => d,
        Ok(_) => {
            kprintln!("iommu: DMAR lists no remapping unit, device DMA is not confined");
            return;
        }
        Err(e) => {
            kprintln!(
                "iommu: unusable DMAR table ({:?}), device DMA is not confined",
                e
            );
            return;
        }
    };
    let s = st();
    let mut levels = 0;
    for (i, u) in d.units[..d.nunits].iter().enumerate() {
        if u.base + PAGE > DIRECT_MAP_SIZE {
            kprintln!(
                "iommu: unit at {:#x} beyond the direct map, left off",
                u.base
            );
            continue;
        }
        uncache(u.base);
        let regs = phys_to_virt(u.base) as u64;
        let probe = Unit {
            regs,
            caps: vtd::Caps {
                levels: 0,
                domains: 0,
                fault_offset: 0,
                fault_records: 0,
                iotlb_offset: 0,
                write_buffer_flush: false,
                caching_mode: false,
                coherent: true,
            },
        };
        let caps = match vtd::decode_caps(rd64(&probe, reg::CAP), rd64(&probe, reg::ECAP)) {
            Ok(c) => c,
            Err(e) => {
                kprintln!("iommu: unit at {:#x} unusable ({:?}), left off", u.base, e);
                continue;
            }
        };
        if levels == 0 {
            levels = caps.levels;
        } else if caps.levels != levels {
            kprintln!(
                "iommu: unit at {:#x} needs other table levels, left off",
                u.base
            );
            continue;
        }
        s.coherent &= caps.coherent;
        s.domains_max = if s.domains_max == 0 {
            caps.domains
        } else {
            s.domains_max.min(caps.domains)
        };
        s.units[i] = Some(Unit { regs, caps });
        s.reg_pages[i] = u.base;
    }
    if levels == 0 {
        kprintln!("iommu: no usable unit, device DMA is not confined");
        return;
    }
    s.levels = levels;
    let (Some(root_table), Some(ctx)) = (phys().alloc_frame(), phys().alloc_frame()) else {
        panic!("iommu: no memory for the root table");
    };
    s.context0 = ctx;
    let re = vtd::root_entry(ctx);
    write_entry(root_table, 0, re);
    for u in s.units.iter().flatten() {
        // Fault events are polled on the timer tick: keep the interrupt masked.
        wr32(u, reg::FECTL, 1 << 31);
        wr64(u, reg::RTADDR, root_table);
        let ok = command(u, vtd::gcmd::SRTP, true) && invalidate_unit(u, true) && {
            command(u, vtd::gcmd::TE, true)
        };
        if !ok {
            panic!("iommu: unit does not respond");
        }
    }
    s.on = true;
    for (i, u) in s.units.iter().enumerate() {
        if u.is_some() {
            kprintln!(
                "iommu: VT-d at {:#x}, DMA remapping on ({}-level tables, every device blocked until bound)",
                s.reg_pages[i],
                levels
            );
        }
    }
}

/// Writes a 128-bit root or context entry, the present half last.
fn write_entry(table: u64, index: usize, e: [u64; 2]) {
    let p = phys_to_virt(table + index as u64 * 16) as *mut u64;
    // SAFETY: a kernel pool frame holding a root or context table.
    unsafe {
        core::ptr::write_volatile(p.add(1), e[1]);
        core::ptr::write_volatile(p, e[0]);
    }
    flush_line(p as u64);
}

fn flush_line(va: u64) {
    if !st().coherent {
        // SAFETY: clflush of a mapped kernel address has no other effect.
        unsafe { core::arch::asm!("clflush [{}]", in(reg) va, options(nostack)) };
    }
}

/// Invalidates a unit's context cache (if `context`) and its IOTLB, waiting for completion.
fn invalidate_unit(u: &Unit, context: bool) -> bool {
    if u.caps.write_buffer_flush && !command(u, vtd::gcmd::WBF, false) {
        return false;
    }
    if context {
        wr64(u, reg::CCMD, vtd::CCMD_GLOBAL);
        if !wait(|| rd64(u, reg::CCMD) & vtd::INVAL_BUSY == 0) {
            return false;
        }
    }
    wr64(u, u.caps.iotlb_offset, vtd::IOTLB_GLOBAL);
    wait(|| rd64(u, u.caps.iotlb_offset) & vtd::INVAL_BUSY == 0)
}

fn invalidate(context: bool) {
    for u in st().units.iter().flatten() {
        if !invalidate_unit(u, context) {
            panic!("iommu: invalidation does not complete");
        }
    }
}

/// Domain table frames: pool frames charged to the driver task's factory.
struct DomainFrames(*mut obj::Factory);
impl Frames for DomainFrames {
    fn get(&self, frame: u64, index: usize) -> u64 {
        // SAFETY: a pool frame of a domain table.
        unsafe { core::ptr::read_volatile((phys_to_virt(frame) as *const u64).add(index)) }
    }
    fn set(&mut self, frame: u64, index: usize, value: u64) {
        let p = phys_to_virt(frame) as u64 + index as u64 * 8;
        // SAFETY: as in `get`.
        unsafe { core::ptr::write_volatile(p as *mut u64, value) };
        flush_line(p);
    }
    fn alloc(&mut self) -> Option<u64> {
        factory::charge(self.0, PAGE).ok()?;
        let f = phys().alloc_frame();
        if f.is_none() {
            factory::uncharge(self.0, PAGE);
        }
        f
    }
    fn free(&mut self, frame: u64) {
        phys().free_frame(frame);
        factory::uncharge(self.0, PAGE);
    }
}

fn has_domain(task: u32) -> bool {
    st().has_domain[task as usize / 64] & 1 << (task % 64) != 0
}

fn domain_of(task: u32) -> Option<&'static mut Domain> {
    st().domains.iter_mut().flatten().find(|d| d.task == task)
}

/// Whether `pa` is a page of the IOMMU's registers (no task may map it).
pub fn owns(pa: u64) -> bool {
    let s = st();
    s.on && s.reg_pages.iter().any(|&r| r != 0 && pa & !0xfff == r)
}

/// `DmaBind`: puts PCI device `bdf` (bus 0) into `task`'s domain. Returns whether the IOMMU
/// confines it (false: there is none).
pub fn bind(bdf: u64, task: *mut obj::Task) -> Result<bool, Error> {
    if bdf > 0xffff {
        return Err(Error::Invalid);
    }
    let s = st();
    if !s.on {
        return Ok(false);
    }
    if bdf >> 8 != 0 {
        // Only bus 0 has a context table (the pci server enumerates bus 0 only).
        return Err(Error::Invalid);
    }
    // SAFETY: live task (the caller checked its capability).
    let t = unsafe { &*task };
    let sid = bdf as u16;
    if let Some(b) = s.bound.iter().flatten().find(|b| b.sid == sid) {
        return if b.task == t.id {
            Ok(true)
        } else {
            Err(Error::Busy)
        };
    }
    let did = t.id + 1;
    if did >= s.domains_max {
        return Err(Error::NoMemory);
    }
    let slot = s
        .bound
        .iter()
        .position(|b| b.is_none())
        .ok_or(Error::NoMemory)?;
    let top = match domain_of(t.id) {
        Some(d) => d.top,
        None => {
            let dslot = s
                .domains
                .iter()
                .position(|d| d.is_none())
                .ok_or(Error::NoMemory)?;
            let top = DomainFrames(t.hdr.factory).alloc().ok_or(Error::NoMemory)?;
            s.domains[dslot] = Some(Domain {
                task: t.id,
                top,
                factory: t.hdr.factory,
            });
            s.has_domain[t.id as usize / 64] |= 1 << (t.id % 64);
            top
        }
    };
    s.bound[slot] = Some(Binding { sid, task: t.id });
    write_entry(
        s.context0,
        (sid & 0xff) as usize,
        vtd::context_entry(top, s.levels, did as u16),
    );
    invalidate(true);
    Ok(true)
}

#[inline(never)]
/// `DmaMap`: lets the caller's devices reach `pages` of its pages at `vaddr`. Returns the
/// device address of `vaddr`.
pub fn map(task: *mut obj::Task, vaddr: u64, pages: u64) -> Result<u64, Error> {
    if vaddr & 0xfff != 0
        || pages == 0
        || pages > 1 << 16
        || !paging::user_range_ok(vaddr, pages * PAGE)
    {
        return Err(Error::Invalid);
    }
    // SAFETY: live task (the caller's own).
    let t = unsafe { &*task };
    let s = st();
    if !s.on {
        // Nothing confines DMA: the device address is the physical one.
        return paging::translate(t.pml4, vaddr)
            .map(|(pa, _)| pa)
            .ok_or(Error::Fault);
    }
    let d = domain_of(t.id).ok_or(Error::Invalid)?;
    if vaddr + pages * PAGE > vtd::iova_limit(s.levels) {
        return Err(Error::Invalid);
    }
    let mut f = DomainFrames(d.factory);
    let mut r = Ok(vaddr);
    for i in 0..pages {
        let va = vaddr + i * PAGE;
        // Only mappings of the database: UTCBs (kernel-owned, freed without an unmap) and
        // device memory are never shared with a device.
        let Some(id) = kernel().mapdb.find_id(t.id, va) else {
            r = Err(Error::Fault);
            break;
        };
        let m = kernel().mapdb.get(id);
        if m.rights & map::UNCACHED != 0 {
            r = Err(Error::Invalid);
            break;
        }
        let pa = m.paddr + (va - m.vaddr);
        if !vtd::sl_map(&mut f, d.top, s.levels, va, pa, m.rights & map::WRITE != 0) {
            r = Err(Error::NoMemory);
            break;
        }
    }
    // An entry may have been replaced: drop what the IOTLB cached of it.
    invalidate(false);
    r
}

// The hooks below sit on the unmap, grant, task-end and timer paths: each tests one flag inline
// and keeps its work out of line, so that without an IOMMU those paths are what they were.

/// The mappings `v` were removed from their address spaces: take them from the domains too.
#[inline(always)]
pub fn revoked(v: &[sawmill_kcore::mapdb::Mapping]) {
    if st().on {
        revoked_on(v);
    }
}

#[inline(never)]
fn revoked_on(v: &[sawmill_kcore::mapdb::Mapping]) {
    let mut any = false;
    for m in v {
        any |= unmap_domain(m.space, m.vaddr, m.huge);
    }
    if any {
        invalidate(false);
    }
}

/// A mapping moved away from `task` (grant): its devices lose it.
#[cold]
#[inline(never)]
pub fn unmapped(task: u32, vaddr: u64, huge: bool) {
    if st().on {
        unmapped_on(task, vaddr, huge);
    }
}

#[inline(never)]
fn unmapped_on(task: u32, vaddr: u64, huge: bool) {
    if unmap_domain(task, vaddr, huge) {
        invalidate(false);
    }
}

fn unmap_domain(task: u32, vaddr: u64, huge: bool) -> bool {
    if !has_domain(task) {
        return false;
    }
    let s = st();
    let Some(d) = domain_of(task) else {
        return false;
    };
    if vaddr >= vtd::iova_limit(s.levels) {
        return false;
    }
    let mut f = DomainFrames(d.factory);
    let n = if huge { 512 } else { 1 };
    let mut any = false;
    for i in 0..n {
        any |= vtd::sl_unmap(&mut f, d.top, s.levels, vaddr + i * PAGE);
    }
    any
}

/// The task is ending: its devices go back to blocked, its domain is freed.
#[inline(always)]
pub fn task_gone(task: u32) {
    if st().on {
        task_gone_on(task);
    }
}

#[inline(never)]
fn task_gone_on(task: u32) {
    let s = st();
    if !has_domain(task) {
        return;
    }
    for b in s.bound.iter_mut() {
        if let Some(x) = *b {
            if x.task == task {
                write_entry(s.context0, (x.sid & 0xff) as usize, [0, 0]);
                *b = None;
            }
        }
    }
    invalidate(true);
    for d in s.domains.iter_mut() {
        if let Some(x) = *d {
            if x.task == task {
                vtd::sl_free(&mut DomainFrames(x.factory), x.top, s.levels);
                *d = None;
            }
        }
    }
    s.has_domain[task as usize / 64] &= !(1 << (task % 64));
}

/// Reports and clears the units' fault records (on every timer tick).
#[inline(never)]
pub fn poll_faults() {
    if st().on {
        poll_faults_on();
    }
}

#[inline(never)]
fn poll_faults_on() {
    let s = st();
    for u in s.units.iter().flatten() {
        let fs = rd32(u, reg::FSTS);
        if fs & (vtd::fsts::PPF | vtd::fsts::PFO) == 0 {
            continue;
        }
        for i in 0..u.caps.fault_records as u64 {
            let off = u.caps.fault_offset + i * 16;
            let Some(f) = vtd::decode_fault(rd64(u, off), rd64(u, off + 8)) else {
                continue;
            };
            // The F bit is write-1-to-clear.
            wr64(u, off + 8, 1 << 63);
            s.faults += 1;
            if s.faults > LOGGED_FAULTS {
                continue;
            }
            if s.faults == LOGGED_FAULTS {
                kprintln!(
                    "iommu: {} DMA faults logged; later ones are not",
                    LOGGED_FAULTS
                );
            }
            let owner = s.bound.iter().flatten().find(|b| b.sid == f.source);
            kprintln!(
                "iommu: DMA fault: device {:02x}:{:02x}.{} ({} {}) {} at {:#x} refused: {}",
                f.source >> 8,
                (f.source >> 3) & 31,
                f.source & 7,
                if owner.is_some() {
                    "bound to task"
                } else {
                    "not bound"
                },
                owner.map_or(0, |b| b.task),
                if f.write { "write" } else { "read" },
                f.addr,
                vtd::reason_text(f.reason)
            );
        }
        if fs & vtd::fsts::PFO != 0 {
            if s.faults < LOGGED_FAULTS {
                kprintln!("iommu: fault records overflowed, some DMA faults were not recorded");
            }
            wr32(u, reg::FSTS, vtd::fsts::PFO);
        }
    }
}
