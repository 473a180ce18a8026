//! The memory server: serves `mem` (interfaces/mem.idl) to its clients and `dataspace`
//! (interfaces/dataspace.idl) for every dataspace it made, all on its one endpoint.
//!
//! It touches only its own task: the RAM pool root mapped at `POOL_BASE` (frames are zeroed,
//! copied and revoked there), its own capability table (one minted capability per dataspace,
//! plus one for its read-only variant) and the endpoint. Badges tell callers apart:
//! - bit 63 set: a dataspace (`DS_BIT | [RO_BIT] | id`), minted here;
//! - `mem::ROOT_BADGE` (`u64::MAX`, interfaces/mem.idl): root (may call `client_gone`);
//! - anything else: a client, as the manifest's `uses` entry says; its pages are charged to it.
//!
//! Settings: the `config` table (`sawmill_mem_api::Config`): a default quota and per-client ones.
extern crate alloc;

use alloc::vec::Vec;
use sawmill_abi::{layout, map, rights};
use sawmill_interfaces::mem::ROOT_BADGE;
use sawmill_interfaces::rpc::{self, IpcResult, Map, Next};
use sawmill_interfaces::{dataspace, mem, DsError, DsFlags, MapFlags, MemError};
use sawmill_mem::{Backend, Frame, Frames, Limits, Mem, MemErr, PAGE};
use sawmill_mem_api::{Config, POOL_BASE};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

const DS_BIT: u64 = 1 << 63;
const RO_BIT: u64 = 1 << 62;

fn frame_va(f: Frame) -> u64 {
    POOL_BASE + f as u64 * PAGE
}

/// Real memory operations on the pool.
struct Pool;

impl Backend for Pool {
    fn zero(&mut self, f: Frame) {
        // SAFETY: the frame lies in the pool root mapped read-write for us alone.
        unsafe { core::ptr::write_bytes(frame_va(f) as *mut u8, 0, PAGE as usize) };
    }
    fn copy(&mut self, from: Frame, to: Frame) {
        // SAFETY: two distinct frames of the pool.
        unsafe {
            core::ptr::copy_nonoverlapping(
                frame_va(from) as *const u8,
                frame_va(to) as *mut u8,
                PAGE as usize,
            )
        };
    }
    fn revoke(&mut self, f: Frame) {
        // Our own mapping stays; everything derived from it (in every task) goes.
        let _ = sys::unmap(frame_va(f), 1, 0);
    }
    fn revoke_run(&mut self, first: Frame, n: u32) -> u32 {
        match sys::unmap_counting_pins(frame_va(first), n as u64) {
            Ok(pinned) => pinned as u32,
            // Frame by frame, as `Backend` would; every frame is then asked about its pins.
            Err(_) => {
                for f in first..first + n {
                    self.revoke(f);
                }
                n
            }
        }
    }
    fn write_protect(&mut self, first: Frame, n: u32) -> u32 {
        // As `revoke`: our own mappings stay writable. Should the kernel refuse, every frame
        // counts as pinned: `copy` then gives the copy its own pages, sharing nothing.
        sys::write_protect(frame_va(first), n as u64).map_or(n, |pinned| pinned as u32)
    }
    fn pinned(&mut self, f: Frame) -> bool {
        // The kernel counts DMA pins per frame; our own pool mapping names the frame.
        sys::translate_pins(frame_va(f)).is_ok_and(|(_, pins)| pins > 0)
    }
}

/// The capabilities of one dataspace.
#[derive(Clone, Copy, Default)]
struct Caps {
    rw: u64,
    ro: u64,
}

struct Srv {
    mem: Mem,
    pool: Pool,
    ep: u64,
    caps: Vec<Caps>,
    free_slots: Vec<u64>,
}

fn ds_err(e: MemErr) -> DsError {
    match e {
        MemErr::Invalid => DsError::Invalid,
        MemErr::Quota | MemErr::NoMemory => DsError::NoMemory,
        MemErr::Gone => DsError::Gone,
        MemErr::Unsupported => DsError::Unsupported,
    }
}

fn mem_err(e: MemErr) -> MemError {
    match e {
        MemErr::Quota => MemError::Quota,
        MemErr::NoMemory => MemError::NoMemory,
        _ => MemError::Invalid,
    }
}

impl Srv {
    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// Mints the capability naming dataspace `id` (read-only if `ro`).
    fn mint(&mut self, id: usize, ro: bool) -> Result<u64, MemErr> {
        let s = self.slot();
        let badge = DS_BIT | if ro { RO_BIT } else { 0 } | id as u64;
        if sys::cap_mint(self.ep, s, badge, rights::SEND).is_err() {
            self.free_slots.push(s);
            return Err(MemErr::NoMemory);
        }
        if self.caps.len() <= id {
            self.caps.resize(id + 1, Caps::default());
        }
        if ro {
            self.caps[id].ro = s;
        } else {
            self.caps[id].rw = s;
        }
        Ok(s)
    }

    /// Revokes every capability to dataspace `id` (in every task) and recycles the slots.
    fn unmint(&mut self, id: usize) {
        let c = core::mem::take(&mut self.caps[id]);
        for s in [c.rw, c.ro] {
            if s != 0 {
                let _ = sys::cap_revoke(s);
                let _ = sys::cap_delete(s);
                self.free_slots.push(s);
            }
        }
    }

    /// A new dataspace's capability, or the dataspace undone if none can be made.
    fn publish(&mut self, id: usize) -> Result<u64, MemErr> {
        match self.mint(id, false) {
            Ok(s) => Ok(s),
            Err(e) => {
                let _ = self.mem.free(&mut self.pool, id);
                Err(e)
            }
        }
    }

    /// The dataspace a badge names, if it is one and still exists.
    fn ds(&self, badge: u64) -> Result<usize, DsError> {
        if badge & DS_BIT == 0 || badge == ROOT_BADGE {
            return Err(DsError::Invalid);
        }
        let id = (badge & 0xffff_ffff) as usize;
        match self.mem.get(id) {
            Some(_) => Ok(id),
            None => Err(DsError::Gone),
        }
    }
}

impl mem::Server for Srv {
    fn alloc(&mut self, badge: u64, size: u64, flags: u64) -> Result<u64, MemError> {
        if flags != 0 {
            return Err(MemError::Invalid);
        }
        let id = self.mem.alloc(badge, size).map_err(mem_err)?;
        self.publish(id).map_err(mem_err)
    }

    fn alloc_dma(&mut self, badge: u64, pages: u64) -> Result<mem::AllocDmaOut, MemError> {
        let (id, paddr) = self
            .mem
            .alloc_dma(&mut self.pool, badge, pages)
            .map_err(mem_err)?;
        let ds = self.publish(id).map_err(mem_err)?;
        Ok(mem::AllocDmaOut { ds, paddr })
    }

    fn stats(&mut self, badge: u64) -> Result<mem::StatsOut, MemError> {
        self.mem.reclaim(&mut self.pool);
        let free = self.mem.frames.free() as u64;
        let a = self.mem.account(badge);
        Ok(mem::StatsOut {
            used: a.used,
            quota: a.quota,
            free,
        })
    }

    fn client_gone(&mut self, badge: u64, client: u64) -> Result<u64, MemError> {
        if badge != ROOT_BADGE {
            return Err(MemError::Denied);
        }
        let ids = self.mem.client_gone(&mut self.pool, client);
        for &id in &ids {
            self.unmint(id);
        }
        Ok(ids.len() as u64)
    }
}

impl dataspace::Server for Srv {
    fn info(&mut self, badge: u64) -> Result<dataspace::InfoOut, DsError> {
        let id = self.ds(badge)?;
        let d = self.mem.get(id).unwrap();
        let mut flags = DsFlags::EMPTY;
        for (yes, f) in [
            (badge & RO_BIT == 0, DsFlags::WRITABLE),
            (d.contig, DsFlags::CONTIGUOUS),
            (d.cow, DsFlags::COPY_ON_WRITE),
        ] {
            if yes {
                flags |= f;
            }
        }
        Ok(dataspace::InfoOut {
            size: d.size * PAGE,
            flags,
        })
    }

    fn map(
        &mut self,
        badge: u64,
        offset: u64,
        dst: u64,
        pages: u64,
        flags: MapFlags,
    ) -> Result<Map, DsError> {
        let id = self.ds(badge)?;
        if !offset.is_multiple_of(PAGE)
            || !dst.is_multiple_of(PAGE)
            || pages == 0
            || dst >= layout::USER_END
        {
            return Err(DsError::Invalid);
        }
        let ro = badge & RO_BIT != 0;
        let need_write = flags.contains(MapFlags::NEED_WRITE);
        if ro && need_write {
            return Err(DsError::Denied);
        }
        let (f, writable) = self
            .mem
            .fault(&mut self.pool, id, offset / PAGE, need_write)
            .map_err(ds_err)?;
        let mut r = map::READ | flags.bits() & map::EXEC;
        if writable && !ro && flags.contains(MapFlags::WRITE) {
            r |= map::WRITE;
        }
        Ok(Map {
            src: frame_va(f),
            dst,
            pages: 1,
            flags: r,
        })
    }

    fn copy(&mut self, badge: u64) -> Result<u64, DsError> {
        let id = self.ds(badge)?;
        let new = self.mem.copy(&mut self.pool, id).map_err(ds_err)?;
        self.publish(new).map_err(ds_err)
    }

    fn phys(&mut self, badge: u64, offset: u64) -> Result<u64, DsError> {
        let id = self.ds(badge)?;
        if !offset.is_multiple_of(PAGE) {
            return Err(DsError::Invalid);
        }
        self.mem.phys(id, offset / PAGE).map_err(ds_err)
    }

    fn read_only(&mut self, badge: u64) -> Result<u64, DsError> {
        let id = self.ds(badge)?;
        match self.caps[id].ro {
            0 => self.mint(id, true).map_err(ds_err),
            s => Ok(s),
        }
    }

    fn resize(&mut self, badge: u64, size: u64) -> Result<(), DsError> {
        let id = self.ds(badge)?;
        if badge & RO_BIT != 0 {
            return Err(DsError::Denied);
        }
        self.mem.resize(&mut self.pool, id, size).map_err(ds_err)
    }

    fn free(&mut self, badge: u64) -> Result<(), DsError> {
        let id = self.ds(badge)?;
        if badge & RO_BIT != 0 {
            return Err(DsError::Denied);
        }
        self.mem.free(&mut self.pool, id).map_err(ds_err)?;
        self.unmint(id);
        Ok(())
    }
}

/// One endpoint, two interfaces: a dataspace capability's badge says which.
impl rpc::Serve for Srv {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.badge & DS_BIT != 0 && m.badge != ROOT_BADGE {
            dataspace::handle(self, m, next)
        } else {
            mem::handle(self, m, next)
        }
    }
}

fn main() {
    let ep = env::cap("mem").expect("mem endpoint");
    let mut ranges = Vec::new();
    let mut expect = POOL_BASE;
    for (va, b) in env::find_all(env::KIND_RAM) {
        if b.len() != 16 {
            continue;
        }
        let pa = u64::from_le_bytes(b[..8].try_into().unwrap());
        let n = u64::from_le_bytes(b[8..].try_into().unwrap());
        // Frames are numbered by pool address, so the ranges must follow each other.
        if va != expect {
            println!(
                "mem: pool range at {:#x} out of order; ignored from here",
                va
            );
            break;
        }
        ranges.push((pa, n));
        expect += n * PAGE;
    }
    let frames = Frames::new(&ranges);
    let cfg: Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("mem: FAIL config: {}", e);
            return;
        }
    };
    // 1 GiB: no limit unless the manifest sets one.
    let default_quota = cfg.default_quota_kb.unwrap_or(1024 * 1024) as u64 / 4;
    let quotas: Vec<(u64, u64)> = cfg
        .quota
        .iter()
        .map(|q| (q.client.badge, q.kb as u64 / 4))
        .collect();
    println!(
        "mem: {} KiB of RAM in {} ranges, default quota {} KiB",
        frames.total() as u64 * 4,
        ranges.len(),
        default_quota * 4
    );
    let mut m = Mem::new(
        frames,
        Limits {
            default_quota,
            ds_per_client: cfg
                .dataspaces_per_client
                .unwrap_or(sawmill_mem_api::DEFAULT_DATASPACES_PER_CLIENT),
            ds_total: cfg
                .dataspaces
                .unwrap_or(sawmill_mem_api::DEFAULT_DATASPACES) as usize,
        },
    );
    for (b, q) in quotas {
        m.set_quota(b, q);
    }
    let mut srv = Srv {
        mem: m,
        pool: Pool,
        ep,
        caps: Vec::new(),
        free_slots: Vec::new(),
    };
    let _ = rpc::serve(ep, &mut srv);
}
