//! The root task (sigma0 and init in one).
//!
//! The kernel starts it holding every capability that exists at boot (its task and thread, the
//! factory with all kernel memory, IRQ, I/O-port and machine control) and all user RAM mapped at
//! `PHYS_WINDOW`. It reads the system manifest from the boot archive and, for each server,
//! creates a task with its own kernel-memory quota, maps the server's image, environment, heap
//! and stack, and hands it exactly the capabilities the manifest names — nothing else. Then it
//! serves as pager and exception handler: it reports faults and exits, reclaims what a dead
//! server held, and shuts the machine down once every `wait` server has finished, checking that
//! the kernel got all of its memory back.
//!
//! Supervision (docs/ARCHITECTURE.md, "Supervision"): a server whose manifest policy restarts
//! it comes back after it dies as a new incarnation (generation) from the same module,
//! configuration and capabilities. Its endpoints are new objects: every capability to the dead
//! incarnation was revoked with it (callers get an error at once, and a stale capability never
//! reaches the new one); root puts a capability to the new endpoint into each client's slot of
//! the old one, so a client that sees its server gone finds the new incarnation where its
//! environment named the old. Root's own capabilities for a server carry its generation in the
//! badge, so late messages about a dead incarnation are never taken for the new one's.
//!
//! Hangs: a second thread of root (the watchdog) wakes every `HANG_CHECK_MS` and calls root's
//! own fault endpoint; the main thread then asks the kernel how long each watched server's main
//! thread has run since it last waited (`thread_info`) and treats one past its deadline as dead
//! (reason `hung`). Root never calls a server to find out. Every death goes into the fault log,
//! which servers the manifest allows (`fault_log`) read line by line (`FAULT_LOG_LABEL`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_abi::{kinfo, label, layout, map, rights, root_slots, MsgTag, ObjKind};
use sawmill_interfaces::rpc::{self, IpcResult, Next, Reply};
use sawmill_manifest::faultlog::{self, FaultLog};
use sawmill_manifest::{Restart, Server, System};
use sawmill_rt::{env, println, slots as sslots, sys};
use sawmill_spawn::{
    self as spawn, Cap, Child, Map, MappedImage, Program, Record, Resources, SpawnError,
};

sawmill_rt::entry!(main);

/// Badge bit of the handler capability for threads a server starts itself.
const SECONDARY: u64 = 1 << 63;
/// Root's badges for a server: its manifest position + 1 in the low bits, its generation
/// (incarnation, from 1) from this bit up (below `SECONDARY`).
const GENERATION_SHIFT: u32 = 32;
const INDEX_MASK: u64 = (1 << GENERATION_SHIFT) - 1;

/// The badge of the watchdog thread's capability to root's fault endpoint: index 0 names no
/// server, so no server's message can pass for it.
const WATCHDOG_BADGE: u64 = SECONDARY;
/// The label of the watchdog's call: time to look for hung servers.
const HANG_CHECK_LABEL: u16 = 0x5003;
/// Where the watchdog's UTCB goes: the page after root's own.
const WATCHDOG_UTCB: u64 = layout::ROOT_UTCB + 0x1000;
const WATCHDOG_STACK: usize = 16 * 1024;
/// `Running::status` of a server found hung.
const STATUS_HUNG: u64 = 0x200;

/// Kernel memory each server's factory gets for its own bookkeeping (page tables, UTCBs,
/// mapping nodes), on top of the manifest's `kmem_kb` for objects it creates itself.
const BASE_KMEM: u64 = 256 * 1024;

/// Kernel memory per page of a RAM pool (its mapping node, with room to spare) and for the page
/// tables of the pool's window.
const POOL_KMEM_PER_PAGE: u64 = 160;

/// Where root maps a server's further boot modules (manifest `modules`), one after the other:
/// between the memory server's pool (64 GiB) and the region manager's range (1 TiB).
const MODULES_BASE: u64 = 0x0000_0080_0000_0000;

/// Where root maps the fault-word page into a server some controller may inject faults into
/// (manifest `may_inject`): below the heap, clear of the environment page.
const FAULT_PAGE_VA: u64 = 0x1ff0_0000;

// The badge of root's own capability to the memory server (no manifest badge has bit 63).
use sawmill_interfaces::mem::ROOT_BADGE as ROOT_MEM_BADGE;

struct Pages {
    /// Fixed-size: read before the heap exists.
    ranges: [(u64, u64); 32],
    nranges: usize,
    next: usize,
    cur: u64,
    free: Vec<u64>,
}

impl Pages {
    fn new() -> Pages {
        let mut ranges = [(0, 0); 32];
        let mut n = 0;
        for i in 0..32 {
            let s = sys::kernel_info(kinfo::USER_RANGES + 2 * i).unwrap_or(0);
            let e = sys::kernel_info(kinfo::USER_RANGES + 2 * i + 1).unwrap_or(0);
            if e <= s {
                break;
            }
            ranges[n] = (s, e);
            n += 1;
        }
        Pages {
            ranges,
            nranges: n,
            next: 0,
            cur: ranges[0].0,
            free: Vec::new(),
        }
    }

    fn range(&self, i: usize) -> Option<(u64, u64)> {
        if i < self.nranges {
            Some(self.ranges[i])
        } else {
            None
        }
    }

    /// A zeroed page of user RAM (physical address).
    fn alloc(&mut self) -> Option<u64> {
        let p = match self.free.pop() {
            Some(p) => p,
            None => loop {
                let (_, e) = self.range(self.next)?;
                if self.cur + 4096 <= e {
                    self.cur += 4096;
                    break self.cur - 4096;
                }
                self.next += 1;
                self.cur = self.range(self.next)?.0;
            },
        };
        // SAFETY: the page is user RAM in our window and owned by no one else now.
        unsafe { core::ptr::write_bytes((layout::PHYS_WINDOW + p) as *mut u8, 0, 4096) };
        Some(p)
    }

    /// `n` pages (not zeroed) as few physically contiguous runs as the bump region allows, then
    /// single pages from the free list: (physical address, pages) per run.
    /// A zeroed, 2 MiB-aligned run of 512 pages (root's window maps such runs with 2 MiB pages).
    /// Pages skipped to reach the alignment go to the free list.
    fn alloc_huge(&mut self) -> Option<u64> {
        loop {
            let (_, e) = self.range(self.next)?;
            let a = (self.cur + 0x1f_ffff) & !0x1f_ffff;
            if a + 0x20_0000 <= e {
                let mut p = self.cur;
                while p < a {
                    self.free.push(p);
                    p += 4096;
                }
                self.cur = a + 0x20_0000;
                // SAFETY: the run is user RAM in our window, owned by no one else now.
                unsafe { core::ptr::write_bytes(win(a) as *mut u8, 0, 0x20_0000) };
                return Some(a);
            }
            self.next += 1;
            self.cur = self.range(self.next)?.0;
        }
    }

    fn alloc_runs(&mut self, mut n: u64) -> Option<Vec<(u64, u64)>> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        while n > 0 {
            match self.range(self.next) {
                Some((_, e)) if self.cur < e => {
                    let k = n.min((e - self.cur) / 4096);
                    if k == 0 {
                        self.next += 1;
                        self.cur = self.range(self.next).map_or(0, |r| r.0);
                        continue;
                    }
                    runs.push((self.cur, k));
                    self.cur += k * 4096;
                    n -= k;
                }
                Some(_) => {
                    self.next += 1;
                    self.cur = self.range(self.next).map_or(0, |r| r.0);
                }
                None => {
                    let p = self.free.pop()?;
                    runs.push((p, 1));
                    n -= 1;
                }
            }
        }
        Some(runs)
    }

    /// A run of contiguous pages from the bump region (for root's own heap).
    fn alloc_run(&mut self, n: u64) -> Option<u64> {
        let (_, e) = self.range(self.next)?;
        if self.cur + n * 4096 > e {
            return None;
        }
        self.cur += n * 4096;
        Some(self.cur - n * 4096)
    }
}

fn win(p: u64) -> u64 {
    layout::PHYS_WINDOW + p
}

struct Archive {
    base: u64,
}

impl Archive {
    fn entries(&self) -> Vec<(String, u64, u64)> {
        let mut v = Vec::new();
        // SAFETY: the kernel maps the boot archive read-only at BOOT_ARCHIVE.
        let hdr = unsafe { core::slice::from_raw_parts(self.base as *const u8, 16) };
        if &hdr[0..8] != b"SAWMARCH" {
            return v;
        }
        let count = u32::from_le_bytes(hdr[12..16].try_into().unwrap()) as u64;
        for i in 0..count.min(256) {
            // SAFETY: entries follow the header inside the archive.
            let e =
                unsafe { core::slice::from_raw_parts((self.base + 16 + i * 64) as *const u8, 64) };
            let l = e[..48].iter().position(|&b| b == 0).unwrap_or(48);
            let name = String::from(core::str::from_utf8(&e[..l]).unwrap_or("?"));
            let off = u64::from_le_bytes(e[48..56].try_into().unwrap());
            let size = u64::from_le_bytes(e[56..64].try_into().unwrap());
            v.push((name, self.base + off, size));
        }
        v
    }

    fn find(&self, name: &str) -> Option<(u64, u64)> {
        self.entries()
            .into_iter()
            .find(|e| e.0 == name)
            .map(|e| (e.1, e.2))
    }
}

/// What lib/spawn builds servers from: root's slots, and pages of user RAM through the window.
struct RootResources<'a> {
    pages: &'a mut Pages,
    slots: &'a mut Slots,
}

impl Resources for RootResources<'_> {
    fn slot(&mut self) -> Result<u64, SpawnError> {
        Ok(self.slots.next())
    }
    fn free_slot(&mut self, slot: u64) {
        self.slots.free(slot);
    }
    fn page(&mut self) -> Result<u64, SpawnError> {
        self.pages.alloc().map(win).ok_or(SpawnError::NoMemory)
    }
    fn free_page(&mut self, addr: u64) {
        self.pages.free.push(addr - layout::PHYS_WINDOW);
    }
    fn huge_page(&mut self) -> Result<u64, SpawnError> {
        self.pages.alloc_huge().map(win).ok_or(SpawnError::NoMemory)
    }
    fn free_huge_page(&mut self, addr: u64) {
        let pa = addr - layout::PHYS_WINDOW;
        self.pages.free.extend((0..512).map(|k| pa + k * 4096));
    }
}

/// Root's capability slots: fresh ones from a counter, and those a reaped incarnation left
/// empty again (a server restarted thousands of times must not use up root's table).
struct Slots(u64, Vec<u64>);
impl Slots {
    fn next(&mut self) -> u64 {
        if let Some(s) = self.1.pop() {
            return s;
        }
        self.0 += 1;
        self.0 - 1
    }
    /// `slot` is empty (deleted) and may be reused.
    fn free(&mut self, slot: u64) {
        self.1.push(slot);
    }
}

/// What root keeps about a running server.
struct Running {
    name: String,
    wait: bool,
    task: u64,
    /// Its task, thread, factory and the pages lib/spawn built it from (released when it ends).
    child: Option<Child>,
    /// Root's own capability slots made for this server (deleted when it ends).
    caps: Vec<u64>,
    /// Its RAM pool (physical addresses).
    pages: Vec<u64>,
    alive: bool,
    status: u64,
    /// Its badge on the memory server's endpoint, if it uses the memory server.
    mem_badge: Option<u64>,
    /// It is the memory server (the one with a RAM pool).
    is_mem: bool,
    /// Endpoints it serves (revoked when it ends).
    provides: Vec<String>,
    /// Its incarnation: 1 for the first start, one more for each restart.
    generation: u64,
    /// When this incarnation started (time-stamp counter).
    started_tsc: u64,
    /// Restarts in a row so far (reset when an incarnation lives `STABLE_MS`).
    tries: u32,
    /// The endpoints it uses: (endpoint, badge, the slot in its own table holding it), so that
    /// a restarted provider's new endpoint goes where the client looks for the old one.
    /// And root's own capability it copied there (in `caps`; revoked with the provider).
    use_slots: Vec<(String, u64, u64, u64)>,
    /// The page holding its fault word (physical), if a controller may inject faults into it.
    fault_page: Option<u64>,
    /// A controller injected a fault into this incarnation: its death is the campaign's doing,
    /// not a crash loop, so it does not count as one more restart in a row.
    injected: bool,
    /// Endpoints it asked for (`OWN_ENDPOINT_LABEL`): root's origins, revoked when it ends.
    own_endpoints: Vec<u64>,
}

struct Root {
    pages: Pages,
    slots: Slots,
    fault_ep: u64,
    /// Endpoint name -> root slot of the original capability.
    endpoints: Vec<(String, u64)>,
    servers: Vec<Running>,
    /// Root's capability to the memory server (badge ROOT_MEM_BADGE), once one runs.
    mem_cap: Option<u64>,
    /// The memory server's endpoint: the one the server with a RAM pool (`ram_kb`) provides.
    mem_endpoint: Option<String>,
    /// Time-stamp counter ticks per millisecond, and the count at boot (the fault log's times).
    tsc_khz: u64,
    boot_tsc: u64,
    /// A notification root waits on (with a deadline) for restart back-off.
    timer: u64,
    /// Every death of a server, for readers in the running system.
    log: FaultLog,
    /// Servers some manifest `may_inject` names: each gets a fault-word page.
    injectable: Vec<String>,
}

fn fail(what: &str, e: sawmill_abi::Error) -> ! {
    println!("root: FAIL {}: {}", what, e.name());
    let _ = sys::shutdown(root_slots::CONTROL, 1);
    sawmill_rt::exit(1)
}

impl Root {
    fn create(&mut self, fac: u64, kind: ObjKind, arg: u64) -> Result<u64, sawmill_abi::Error> {
        let s = self.slots.next();
        sys::factory_create(fac, kind, s, arg)?;
        Ok(s)
    }

    /// Mints a capability to `src` with `badge` and `r` into a fresh slot recorded in `caps`.
    fn mint(&mut self, src: u64, badge: u64, r: u64, caps: &mut Vec<u64>) -> u64 {
        let m = self.slots.next();
        sys::cap_mint(src, m, badge, r).unwrap_or_else(|e| fail("minting", e));
        caps.push(m);
        m
    }

    /// Starts server `idx` of the manifest: decides what it gets (quota, capabilities,
    /// environment records, RAM pool) and has lib/spawn build it from the boot archive.
    fn start(&mut self, idx: usize, s: &Server, arch: &Archive, generation: u64) {
        let name = s.name.as_str();
        let badge = (idx as u64 + 1) | generation << GENERATION_SHIFT;
        let Some((img, size)) = arch.find(&s.module) else {
            println!(
                "root: FAIL {}: module {} not in the boot archive",
                name, s.module
            );
            return;
        };
        // Root's own capabilities made for this server (deleted when it ends).
        let mut caps = Vec::new();
        let ram_pages = s.ram_kb as u64 / 4;
        // Further boot modules: mapped read-only and executable (the server may map their text
        // on into programs it starts), listed with address, length and name.
        let mut modules = Vec::new();
        let mut module_va = MODULES_BASE;
        for m in &s.modules {
            let Some((at, len)) = arch.find(m) else {
                println!("root: FAIL {}: module {} not in the boot archive", name, m);
                return;
            };
            let pages = len.div_ceil(4096);
            modules.push((m, at, len, module_va, pages));
            module_va += pages.max(1) * 4096;
        }
        let module_pages = (module_va - MODULES_BASE) / 4096;
        let kmem = BASE_KMEM
            + s.kmem_kb as u64 * 1024
            + (ram_pages + module_pages) * POOL_KMEM_PER_PAGE
            + (ram_pages / 512 + 8) * 4096;
        // The task's priority ceiling is the manifest priority: nothing it creates can outrank it.
        let mut p = Program::new(name, root_slots::FACTORY, kmem, s.priority);
        p.args = s.args.iter().map(|a| a.as_str().into()).collect();
        p.give_factory = s.kmem_kb > 0;
        p.sizes.heap_bytes = s.heap_kb as u64 * 1024;
        p.sizes.huge_pages = s.huge_pages as u64;
        p.cap_slots = s.cap_slots as u64;

        // Fixed slots carry a `sys:` prefix so they never clash with manifest endpoint names.
        let pager_cap = self.mint(self.fault_ep, badge, rights::SEND, &mut caps);
        p.caps.push(Cap::at("sys:pager", pager_cap, sslots::PAGER));
        // Threads the server starts itself report here: their faults end the server like the
        // main thread's, but their normal exit does not.
        let helper_cap = self.mint(self.fault_ep, badge | SECONDARY, rights::SEND, &mut caps);
        p.caps.push(Cap::at(
            "sys:thread-handler",
            helper_cap,
            sslots::THREAD_HANDLER,
        ));
        // The debug console is a capability too: only servers the manifest lets print get it.
        if s.console {
            p.caps
                .push(Cap::at("sys:console", root_slots::CONSOLE, sslots::CONSOLE));
        }
        // The typed configuration, checked and encoded by the host tool: passed on unread.
        if !s.config.is_empty() {
            p.records.push(Record {
                kind: env::KIND_CONFIG,
                value: 0,
                bytes: s.config.clone().into(),
                optional: false,
            });
        }
        for &(m, at, len, va, pages) in &modules {
            if pages > 0 {
                p.maps.push(Map {
                    what: "boot module",
                    src: at,
                    dst: va,
                    pages,
                    flags: map::READ | map::EXEC,
                });
            }
            let mut b = Vec::with_capacity(8 + m.len());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(m.as_bytes());
            p.records.push(Record {
                kind: env::KIND_MODULE,
                value: va,
                bytes: b.into(),
                optional: false,
            });
        }
        for e in &s.provides {
            let ep = self.endpoint(e);
            p.caps.push(Cap::provided(String::from(e), ep));
        }
        let first_use = p.caps.len();
        let mut use_mints = Vec::new();
        for u in &s.uses {
            let ep = self.endpoint(&u.endpoint);
            let m = self.mint(ep, u.badge, rights::SEND | rights::GRANT, &mut caps);
            p.caps.push(Cap::named(u.endpoint.clone(), m));
            use_mints.push(m);
        }
        if !s.irqs.is_empty() {
            let n = self
                .create(root_slots::FACTORY, ObjKind::Notification, 0)
                .unwrap_or_else(|e| fail("notification", e));
            caps.push(n);
            p.caps
                .push(Cap::at("sys:irq-notify", n, sslots::IRQ_NOTIFY));
            for &line in &s.irqs {
                let irq = self.slots.next();
                sys::irq_get(root_slots::IRQ_CONTROL, line as u64, irq)
                    .unwrap_or_else(|e| fail("irq", e));
                sys::irq_bind(irq, n, 1 << line).unwrap_or_else(|e| fail("irq bind", e));
                caps.push(irq);
                let mut nm = String::from("irq:");
                push_num(&mut nm, line as u64);
                p.caps.push(Cap::named(nm, irq));
            }
        }
        // Restricted device authority (a platform server such as pci): I/O control limited to a
        // port window, IRQ control limited to some lines. The badge is what restricts them, so
        // an empty window or line set (badge 0 = unrestricted) is never minted (the manifest
        // validator refuses an empty window; an empty line list mints nothing).
        if let Some(r) = s.io_window {
            let b = sawmill_abi::io_badge(r.base, r.count as u32);
            let m = self.mint(root_slots::IO_CONTROL, b, rights::ALL, &mut caps);
            p.caps.push(Cap::named("sys:io-control", m));
            p.records.push(Record {
                kind: env::KIND_IO_WINDOW,
                value: b,
                bytes: b"io-window".to_vec().into(),
                optional: false,
            });
            // With it, restricted device control: a Control minted with a badge may map device
            // memory (never RAM) and bind devices' DMA (dma_bind), but not shut down.
            let m = self.mint(root_slots::CONTROL, 1, rights::ALL, &mut caps);
            p.caps.push(Cap::named("sys:device-control", m));
        }
        let lines = s.irq_lines.iter().fold(0u64, |m, &l| m | 1 << l);
        if lines != 0 {
            let m = self.mint(root_slots::IRQ_CONTROL, lines, rights::ALL, &mut caps);
            p.caps.push(Cap::named("sys:irq-control", m));
            p.records.push(Record {
                kind: env::KIND_IRQ_LINES,
                value: lines,
                bytes: b"irq-lines".to_vec().into(),
                optional: false,
            });
        }
        // The RAM pool: mapped at POOL_BASE, its physical ranges listed in the environment
        // (last, and optional: what does not fit stays unused by mem).
        let mut pool = Vec::new();
        if ram_pages > 0 {
            let Some(runs) = self.pages.alloc_runs(ram_pages) else {
                fail("RAM pool", sawmill_abi::Error::NoMemory)
            };
            let mut va = sawmill_mem_api::POOL_BASE;
            for &(pa, n) in &runs {
                pool.extend((0..n).map(|k| pa + k * 4096));
                // Executable too, so that mem can hand out executable memory (a program loaded
                // into a dataspace): a mapping derived from the pool has at most these rights.
                p.maps.push(Map {
                    what: "RAM pool",
                    src: win(pa),
                    dst: va,
                    pages: n,
                    flags: map::READ | map::WRITE | map::EXEC,
                });
                let mut b = Vec::with_capacity(16);
                b.extend_from_slice(&pa.to_le_bytes());
                b.extend_from_slice(&n.to_le_bytes());
                p.records.push(Record {
                    kind: env::KIND_RAM,
                    value: va,
                    bytes: b.into(),
                    optional: true,
                });
                va += n * 4096;
            }
        }
        p.pager = match &s.pager {
            Some(e) => {
                // Another server's pager knows it by its manifest position, whatever its
                // incarnation.
                let ep = self.endpoint(e);
                self.mint(ep, idx as u64 + 1, rights::SEND, &mut caps)
            }
            None => pager_cap,
        };
        p.exception_handler = pager_cap;
        // The fault word (fault injection): a zeroed page of ours the server maps read-write.
        let fault_page = if self.injectable.contains(&s.name) {
            let Some(pa) = self.pages.alloc() else {
                fail("fault page", sawmill_abi::Error::NoMemory)
            };
            p.maps.push(Map {
                what: "fault word",
                src: win(pa),
                dst: FAULT_PAGE_VA,
                pages: 1,
                flags: map::READ | map::WRITE,
            });
            p.records.push(Record {
                kind: env::KIND_FAULT_WORD,
                value: FAULT_PAGE_VA,
                bytes: Vec::new().into(),
                optional: false,
            });
            pool.push(pa);
            Some(pa)
        } else {
            None
        };
        // Which incarnation this is: a server may do more on a restart than at boot (the ext2
        // PFS checks its file system).
        p.records.push(Record {
            kind: env::KIND_INCARNATION,
            value: generation,
            bytes: Vec::new().into(),
            optional: false,
        });
        // Where lib/spawn puts the used endpoints in the server's table (the rule it applies).
        let mut fixed = alloc::vec![Some(sslots::TASK), Some(sslots::THREAD)];
        if p.give_factory {
            fixed.push(Some(sslots::FACTORY));
        }
        let first_cap = fixed.len();
        fixed.extend(p.caps.iter().map(|c| c.slot));
        let placed =
            spawn::plan::assign_slots(&fixed, sslots::FIRST_NAMED, p.cap_slots).unwrap_or_default();
        let use_slots = s
            .uses
            .iter()
            .enumerate()
            .filter_map(|(k, u)| {
                let at = *placed.get(first_cap + first_use + k)?;
                Some((u.endpoint.clone(), u.badge, at, use_mints[k]))
            })
            .collect();

        // SAFETY: the module lies inside the read-only boot archive mapping, which stays.
        let image = unsafe { MappedImage::resident(img, size) };
        let mut res = RootResources {
            pages: &mut self.pages,
            slots: &mut self.slots,
        };
        let started = spawn::prepare(&p, &image, &mut res).and_then(|child| {
            for r in &s.ioports {
                if let Err(e) = sys::ioport_give(
                    root_slots::IO_CONTROL,
                    child.task,
                    r.base as u64,
                    r.count as u64,
                ) {
                    child.destroy(&mut res);
                    return Err(SpawnError::Sys("giving I/O ports", e));
                }
            }
            match child.start() {
                Ok(()) => Ok(child),
                Err(e) => {
                    child.destroy(&mut res);
                    Err(e)
                }
            }
        });
        let child = match started {
            Ok(c) => c,
            Err(e) => {
                println!("root: FAIL {}: {}", name, e);
                for &c in caps.iter().rev() {
                    let _ = sys::cap_delete(c);
                }
                self.pages.free.extend(pool);
                return;
            }
        };
        if child.env_dropped > 0 {
            println!(
                "root: {}: only part of the RAM pool fits in the environment",
                name
            );
        }
        let mem_ep = self.mem_endpoint.clone();
        let mem_badge = s
            .uses
            .iter()
            .find(|u| Some(&u.endpoint) == mem_ep.as_ref())
            .map(|u| u.badge);
        let is_mem = s.ram_kb > 0;
        if let (true, None, Some(mem_ep)) = (is_mem, self.mem_cap, &mem_ep) {
            let ep = self.endpoint(mem_ep);
            let m = self.slots.next();
            sys::cap_mint(ep, m, ROOT_MEM_BADGE, rights::SEND)
                .unwrap_or_else(|e| fail("minting", e));
            self.mem_cap = Some(m);
        }
        let running = Running {
            generation,
            started_tsc: sys::rdtsc(),
            tries: 0,
            use_slots,
            fault_page,
            injected: false,
            own_endpoints: Vec::new(),
            name: String::from(name),
            wait: s.wait,
            task: child.task,
            child: Some(child),
            caps,
            pages: pool,
            alive: true,
            status: 0,
            mem_badge,
            is_mem,
            provides: s.provides.clone(),
        };
        if idx < self.servers.len() {
            let tries = self.servers[idx].tries;
            self.servers[idx] = running;
            self.servers[idx].tries = tries;
        } else {
            self.servers.push(running);
        }
    }

    /// Time-stamp counter ticks per millisecond, once the kernel has measured the rate (during
    /// the first tenth of a second after boot: asked until it knows).
    fn khz(&mut self) -> Option<u64> {
        if self.tsc_khz == 0 {
            self.tsc_khz = sys::kernel_info(kinfo::TSC_KHZ).unwrap_or(0);
        }
        (self.tsc_khz != 0).then_some(self.tsc_khz)
    }

    /// Milliseconds since boot at time-stamp count `tsc` (0 while the rate is unknown).
    fn ms(&mut self, tsc: u64) -> u64 {
        self.khz()
            .map_or(0, |k| tsc.saturating_sub(self.boot_tsc) / k)
    }

    fn sleep_ms(&mut self, ms: u64) {
        // Before the rate is known, a millisecond is taken as 10^6 ticks (a 1 GHz counter).
        let deadline = sys::rdtsc() + ms * self.khz().unwrap_or(1_000_000);
        while sys::rdtsc() < deadline {
            if sys::notify_wait_until(self.timer, deadline).is_err() {
                // WouldBlock: the deadline passed.
                break;
            }
        }
    }

    /// Server `i` died (`reason`): logs the fault, reaps it, then applies its manifest policy.
    /// Returns false if the machine must go down.
    fn died(&mut self, i: usize, reason: &str, sys_: &System, arch: &Archive) -> bool {
        let now = sys::rdtsc();
        let (gen, started) = (self.servers[i].generation, self.servers[i].started_tsc);
        let s = &sys_.servers[i];
        // The fault log (a clean exit of a server left to end is no fault).
        if reason != "exited" || s.restart != Restart::Hold {
            let at = self.ms(now);
            let line = FaultLog::line(&s.name, gen, reason, at, s.restart.name());
            println!("root: fault: {}", line);
            self.log.push(line);
        }
        self.reap(i);
        match s.restart {
            Restart::Hold => return true,
            Restart::Reboot => {
                println!("root: {} may not run without it: rebooting", s.name);
                return false;
            }
            Restart::Restart | Restart::Reset => {}
        }
        // An incarnation whose life cannot be measured yet (no rate) counts as a short one.
        let lived = self.ms(now).saturating_sub(self.ms(started).max(1));
        let r = &mut self.servers[i];
        r.tries = if lived >= sawmill_manifest::STABLE_MS || r.injected {
            1
        } else {
            r.tries + 1
        };
        if r.tries > s.max_restarts {
            println!(
                "root: {} held after {} restarts in a row (last: incarnation {}, {})",
                s.name, s.max_restarts, gen, reason
            );
            return true;
        }
        let tries = r.tries;
        let pause = (s.backoff_ms as u64) << (tries - 1).min(10);
        self.sleep_ms(pause.min(sawmill_manifest::MAX_BACKOFF_MS as u64));
        self.start(i, s, arch, gen + 1);
        if !self.servers[i].alive || self.servers[i].generation != gen + 1 {
            println!("root: {} could not be restarted: held", s.name);
            return true;
        }
        // Its clients find the new endpoints where they kept the old ones (revoked with it).
        for c in 0..self.servers.len() {
            if !self.servers[c].alive || c == i {
                continue;
            }
            let task = self.servers[c].task;
            let wanted: Vec<(usize, u64, u64, u64, u64)> = self.servers[c]
                .use_slots
                .iter()
                .enumerate()
                .filter(|(_, u)| s.provides.contains(&u.0))
                .map(|(k, u)| (k, self.endpoint_of(&u.0), u.1, u.2, u.3))
                .collect();
            for (k, ep, badge, slot, old) in wanted {
                let mut caps = core::mem::take(&mut self.servers[c].caps);
                // The copy to the dead incarnation went with its endpoint: its slot is free.
                caps.retain(|&x| x != old);
                let _ = sys::cap_delete(old);
                self.slots.free(old);
                let m = self.mint(ep, badge, rights::SEND | rights::GRANT, &mut caps);
                self.servers[c].caps = caps;
                self.servers[c].use_slots[k].3 = m;
                if let Err(e) = sys::task_cap_put(task, m, slot) {
                    println!(
                        "root: {} keeps no capability to the new {}: {}",
                        self.servers[c].name,
                        s.name,
                        e.name()
                    );
                }
            }
        }
        println!(
            "root: {} restarted: incarnation {} ({} in a row)",
            s.name,
            gen + 1,
            tries
        );
        true
    }

    fn endpoint_of(&self, name: &str) -> u64 {
        self.endpoints
            .iter()
            .find(|e| e.0 == name)
            .map_or(u64::MAX, |e| e.1)
    }

    fn endpoint(&mut self, name: &str) -> u64 {
        if let Some(e) = self.endpoints.iter().find(|e| e.0 == name) {
            return e.1;
        }
        let ep = self
            .create(root_slots::FACTORY, ObjKind::Endpoint, 0)
            .unwrap_or_else(|e| fail("endpoint", e));
        self.endpoints.push((String::from(name), ep));
        ep
    }

    /// Ends a server and takes back everything it held.
    fn reap(&mut self, i: usize) {
        let r = &mut self.servers[i];
        if !r.alive {
            return;
        }
        r.alive = false;
        let _ = sys::task_kill(r.task);
        // Its endpoints go too: every copy handed out is revoked and the endpoint destroyed, so
        // a client calling it (or queued on it) gets an error at once instead of waiting forever.
        for name in core::mem::take(&mut r.provides) {
            if let Some(pos) = self.endpoints.iter().position(|e| e.0 == name) {
                let (_, ep) = self.endpoints.remove(pos);
                let _ = sys::cap_revoke(ep);
                let _ = sys::cap_delete(ep);
                self.slots.free(ep);
            }
        }
        // And those it asked for: its clients' copies and whatever was minted from them go.
        for ep in core::mem::take(&mut self.servers[i].own_endpoints) {
            let _ = sys::cap_revoke(ep);
            let _ = sys::cap_delete(ep);
            self.slots.free(ep);
        }
        let r = &mut self.servers[i];
        for &c in r.caps.iter().rev() {
            let _ = sys::cap_delete(c);
            self.slots.free(c);
        }
        r.caps.clear();
        let child = r.child.take();
        let pages = core::mem::take(&mut r.pages);
        let mem_badge = r.mem_badge;
        if let Some(c) = child {
            c.destroy(&mut RootResources {
                pages: &mut self.pages,
                slots: &mut self.slots,
            });
        }
        self.pages.free.extend(pages);
        // Its dataspaces go back to the memory server's pool. Root trusts mem to answer (mem is
        // never paged on demand, so it cannot be waiting for root).
        if let (Some(b), Some(cap)) = (mem_badge, self.mem_cap) {
            if self.servers.iter().any(|s| s.is_mem && s.alive) {
                let r = sawmill_interfaces::mem::Client::new(cap).client_gone(b);
                if let Err(e) = r {
                    println!(
                        "root: mem did not take back {}'s memory: {:?}",
                        self.servers[i].name, e
                    );
                }
            }
        }
    }
}

fn push_num(s: &mut String, mut v: u64) {
    let mut d = [0u8; 20];
    let mut n = 0;
    loop {
        d[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in (0..n).rev() {
        s.push(d[i] as char);
    }
}

/// Checks the kernel's device-memory path once per boot: the VGA text buffer (device memory) can
/// be mapped and written, RAM cannot be mapped as a device.
fn check_device_memory(ram: u64) -> bool {
    const AT: u64 = 0x0000_2000_0000_0000;
    if sys::map_phys(root_slots::CONTROL, 0xb8000, AT, 1, map::UNCACHED).is_err() {
        return false;
    }
    // SAFETY: AT now maps the VGA text buffer, device memory owned by nothing else.
    let ok = unsafe {
        let p = AT as *mut u16;
        let old = core::ptr::read_volatile(p);
        core::ptr::write_volatile(p, 0x0753);
        let v = core::ptr::read_volatile(p);
        core::ptr::write_volatile(p, old);
        v == 0x0753
    };
    let _ = sys::unmap(AT, 1, sawmill_abi::UNMAP_SELF);
    ok && sys::map_phys(root_slots::CONTROL, ram, AT, 1, 0) == Err(sawmill_abi::Error::Invalid)
}

/// Root's fault endpoint as the runtime's loop serves it: the kernel's messages about the
/// servers (faults, exceptions, exits; the badge names the server). Ends the loop once every
/// `wait` server is done.
struct Supervisor<'a> {
    root: &'a mut Root,
    waiting: usize,
    failed: bool,
    system: &'a System,
    arch: &'a Archive,
    /// Kill requests refused so far.
    refusals: u64,
}

impl Supervisor<'_> {
    /// A fault-injection request (`KILL_LABEL`) from server `i`: kills the server named in the
    /// words if `i`'s manifest `may_kill` lists it. Reply label 0 done, 1 refused.
    fn kill_request(&mut self, i: usize, m: &IpcResult) -> u16 {
        let mut name = [0u8; 32];
        let Some(target) = sawmill_manifest::words_name(&m.w, &mut name) else {
            return 1;
        };
        let asker = &self.system.servers[i];
        if !asker.may_kill.iter().any(|k| k == target) {
            // The first refusals are logged, then every 1000th: nobody floods the console
            // through root.
            self.refusals += 1;
            if self.refusals <= 8 || self.refusals.is_multiple_of(1000) {
                println!(
                    "root: {} may not kill `{}`: refused ({} refusals)",
                    asker.name, target, self.refusals
                );
            }
            return 1;
        }
        let Some(t) = self.system.servers.iter().position(|s| s.name == target) else {
            return 1;
        };
        if !self.root.servers.get(t).is_some_and(|r| r.alive) {
            return 1;
        }
        let _ = sys::task_kill(self.root.servers[t].task);
        let mut reason = String::from("killed-by-");
        reason.push_str(&asker.name);
        self.end(t, &reason);
        0
    }

    /// An endpoint for server `i` that dies with this incarnation (`OWN_ENDPOINT_LABEL`): root
    /// keeps the origin (revoked in `reap`), the server gets a copy with every right, held in
    /// root's `caps` until it ends. None past `MAX_OWN_ENDPOINTS` or without kernel memory
    /// (charged to the server's own factory, so asking costs root nothing).
    fn own_endpoint(&mut self, i: usize) -> Option<u64> {
        let r = &self.root.servers[i];
        if r.own_endpoints.len() >= sawmill_manifest::MAX_OWN_ENDPOINTS {
            println!("root: {} asked for too many endpoints: refused", r.name);
            return None;
        }
        let factory = r.child.as_ref()?.factory;
        let ep = match self.root.create(factory, ObjKind::Endpoint, 0) {
            Ok(ep) => ep,
            Err(e) => {
                let name = &self.root.servers[i].name;
                println!("root: no endpoint for {}: {}", name, e.name());
                return None;
            }
        };
        let copy = self.root.slots.next();
        if sys::cap_copy(ep, copy).is_err() {
            let _ = sys::cap_delete(ep);
            self.root.slots.free(ep);
            self.root.slots.free(copy);
            return None;
        }
        let r = &mut self.root.servers[i];
        r.own_endpoints.push(ep);
        r.caps.push(copy);
        Some(copy)
    }

    /// The watchdog's tick: every watched server (one that provides an endpoint and has a
    /// deadline) whose main thread has run past its deadline without waiting is killed and ends
    /// as `hung`. The kernel's count (`thread_info`) is reset by every receive, call, send,
    /// notification wait and yield, so a server idle in its receive, blocked on another server
    /// or on its device, or replying later to a long read is never taken for hung; only one
    /// that keeps the CPU is. Root asks no server anything.
    fn check_hangs(&mut self) {
        for i in 0..self.root.servers.len() {
            let Some(s) = self.system.servers.get(i) else {
                break;
            };
            let r = &self.root.servers[i];
            if !r.alive || s.provides.is_empty() || s.hang_ms == 0 {
                continue;
            }
            let Some(thread) = r.child.as_ref().map(|c| c.thread) else {
                continue;
            };
            let Ok((ticks, _)) = sys::thread_info(thread) else {
                continue;
            };
            if !faultlog::hung(ticks, sawmill_abi::TICK_MS, s.hang_ms) {
                continue;
            }
            println!(
                "root: {} hung: ran {} ms without waiting (deadline {} ms)",
                s.name,
                ticks * sawmill_abi::TICK_MS,
                s.hang_ms
            );
            let _ = sys::task_kill(r.task);
            self.root.servers[i].status = STATUS_HUNG;
            self.end(i, "hung");
        }
    }

    /// A request for a line of the fault log (`FAULT_LOG_LABEL`, word 0 the sequence number)
    /// from server `i`: label 0 with the line (`faultlog::encode_line`), 1 when there is none
    /// that new yet, 2 when the manifest does not let `i` read the log.
    fn fault_log_request(&mut self, i: usize, m: &IpcResult, next: Next) -> IpcResult {
        if !self.system.servers.get(i).is_some_and(|s| s.fault_log) {
            return next.reply(self, Reply::label(2));
        }
        let Some((seq, text)) = self.root.log.get(m.w[0]) else {
            return next.reply(self, Reply::label(1));
        };
        let mut words = [0u64; 64];
        let n = faultlog::encode_line(seq, text, &mut words);
        // Words 4.. travel in the UTCB's message registers.
        sawmill_rt::utcb().mr[4..n.max(4)].copy_from_slice(&words[4..n.max(4)]);
        let r = Reply {
            tag: MsgTag::new(0, n as u8),
            w: [words[0], words[1], words[2], words[3]],
        };
        next.reply(self, r)
    }

    /// A fault-injection request (`faults::INJECT_LABEL`) from server `i`: words 0-1 the target's
    /// name, 2 the kind, 3 its argument. Allowed for the targets `i`'s `may_inject` names. A kill
    /// is carried out at once; any other kind is armed in the target's fault word, where its
    /// next request meets it (root never waits for the target). Reply label 0 done, 1 refused.
    fn inject_request(&mut self, i: usize, m: &IpcResult) -> u16 {
        use sawmill_manifest::faults::Kind;
        let mut name = [0u8; 16];
        name[..8].copy_from_slice(&m.w[0].to_le_bytes());
        name[8..].copy_from_slice(&m.w[1].to_le_bytes());
        let len = name.iter().position(|&b| b == 0).unwrap_or(16);
        let (Ok(target), Some(kind)) = (core::str::from_utf8(&name[..len]), Kind::from_u64(m.w[2]))
        else {
            return 1;
        };
        let asker = &self.system.servers[i];
        if !asker.may_inject.iter().any(|k| k == target) {
            self.refusals += 1;
            if self.refusals <= 8 || self.refusals.is_multiple_of(1000) {
                println!(
                    "root: {} may not inject faults into `{}`: refused ({} refusals)",
                    asker.name, target, self.refusals
                );
            }
            return 1;
        }
        let Some(t) = self.system.servers.iter().position(|s| s.name == target) else {
            return 1;
        };
        let Some(r) = self.root.servers.get(t).filter(|r| r.alive) else {
            return 1;
        };
        let task = r.task;
        self.root.servers[t].injected = true;
        let r = &self.root.servers[t];
        if kind == Kind::Kill {
            let _ = sys::task_kill(task);
            let mut reason = String::from("killed-by-");
            reason.push_str(&asker.name);
            self.end(t, &reason);
            return 0;
        }
        let Some(pa) = r.fault_page else { return 1 };
        // SAFETY: the target's fault-word page, root's own RAM in the window (the target maps
        // it too); both words are only accessed atomically, the argument before the kind.
        unsafe {
            let w = win(pa) as *const core::sync::atomic::AtomicU64;
            (*w.add(1)).store(m.w[3], core::sync::atomic::Ordering::Relaxed);
            (*w).store(kind as u64, core::sync::atomic::Ordering::Release);
        }
        0
    }

    /// Server `i` has died: waited-for bookkeeping, then its policy.
    fn end(&mut self, i: usize, reason: &str) {
        let root = &mut *self.root;
        if root.servers[i].wait {
            self.waiting -= 1;
            if root.servers[i].status != 0 {
                self.failed = true;
            }
        }
        if !root.died(i, reason, self.system, self.arch) {
            let _ = sys::shutdown(root_slots::CONTROL, 1);
        }
    }
}

impl rpc::Serve for Supervisor<'_> {
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.badge == WATCHDOG_BADGE {
            if m.tag.label() == HANG_CHECK_LABEL {
                self.check_hangs();
            }
            return if self.waiting == 0 {
                next.stop()
            } else {
                next.reply(self, Reply::label(0))
            };
        }
        let root = &mut *self.root;
        let secondary = m.badge & SECONDARY != 0;
        let idx = (m.badge & INDEX_MASK) as usize;
        let generation = (m.badge & !SECONDARY) >> GENERATION_SHIFT;
        if idx == 0 || idx > root.servers.len() || root.servers[idx - 1].generation != generation {
            // Nobody, or an incarnation that is gone.
            return next.skip(self);
        }
        if m.tag.label() == sawmill_manifest::KILL_LABEL {
            if !root.servers[idx - 1].alive {
                return next.skip(self);
            }
            let r = self.kill_request(idx - 1, m);
            return next.reply(self, Reply::label(r));
        }
        if m.tag.label() == sawmill_manifest::FAULT_LOG_LABEL {
            if !root.servers[idx - 1].alive {
                return next.skip(self);
            }
            return self.fault_log_request(idx - 1, m, next);
        }
        if m.tag.label() == sawmill_manifest::OWN_ENDPOINT_LABEL {
            if !root.servers[idx - 1].alive {
                return next.skip(self);
            }
            return match self.own_endpoint(idx - 1) {
                Some(slot) => {
                    rpc::utcb().caps_out[0] = slot;
                    next.reply(
                        self,
                        Reply {
                            tag: MsgTag::new(0, 0).with_caps(1),
                            w: [0; 4],
                        },
                    )
                }
                None => next.reply(self, Reply::label(1)),
            };
        }
        if m.tag.label() == sawmill_manifest::faults::INJECT_LABEL {
            if !root.servers[idx - 1].alive {
                return next.skip(self);
            }
            let r = self.inject_request(idx - 1, m);
            if self.waiting == 0 {
                return next.stop();
            }
            return next.reply(self, Reply::label(r));
        }
        if secondary && m.tag.label() == label::EXIT && m.w[0] != u64::MAX {
            // A thread the server started ended by itself: the server goes on.
            return next.skip(self);
        }
        let i = idx - 1;
        if !root.servers[i].alive {
            // Late messages of a server already reaped (the EXIT of each of its threads).
            return next.skip(self);
        }
        let name = root.servers[i].name.clone();
        let reason;
        match m.tag.label() {
            label::EXIT => {
                if m.w[0] == u64::MAX {
                    println!("root: {} was killed", name);
                    reason = "killed";
                } else if m.w[0] != 0 {
                    println!("root: {} exited with status {:#x}", name, m.w[0]);
                    reason = "failed";
                } else {
                    println!("root: {} exited", name);
                    reason = "exited";
                }
                root.servers[i].status = m.w[0];
            }
            label::EXCEPTION => {
                let v = m.w[0];
                println!(
                    "root: {} killed: {} at rip {:#x}",
                    name,
                    sawmill_abi::exception_name(v),
                    m.w[2]
                );
                root.servers[i].status = 0x100 + v;
                reason = sawmill_abi::exception_name(v);
            }
            label::PAGE_FAULT => {
                let what = sawmill_abi::fault::access(m.w[1]);
                println!(
                    "root: {} killed: page fault ({}) at {:#x}, rip {:#x}",
                    name, what, m.w[0], m.w[2]
                );
                root.servers[i].status = 0x10e;
                reason = "page-fault";
            }
            _ => return next.reply(self, Reply::label(0xffff)),
        }
        // No reply: killing the task ends the faulting thread anyway.
        self.end(i, reason);
        if self.waiting == 0 {
            next.stop()
        } else {
            next.skip(self)
        }
    }
}

/// Starts root's watchdog thread (before the servers, so that its objects count as root's own
/// in the kernel-memory check): it sleeps `HANG_CHECK_MS` on a notification of its own, then
/// calls the fault endpoint with `HANG_CHECK_LABEL`, which the main thread answers after
/// looking at the servers (`Supervisor::check_hangs`). A second thread keeps the main thread's
/// loop a plain receive, and every decision in the one thread that owns root's state.
fn start_watchdog(root: &mut Root) {
    let thread = root
        .create(root_slots::FACTORY, ObjKind::Thread, 0)
        .unwrap_or_else(|e| fail("watchdog thread", e));
    let timer = root
        .create(root_slots::FACTORY, ObjKind::Notification, 0)
        .unwrap_or_else(|e| fail("watchdog notification", e));
    let ep = root.slots.next();
    sys::cap_mint(root.fault_ep, ep, WATCHDOG_BADGE, rights::SEND)
        .unwrap_or_else(|e| fail("watchdog capability", e));
    // No pager or handler: root's memory is all mapped, and a fault would be root's own bug.
    sys::thread_config(
        thread,
        root_slots::TASK,
        WATCHDOG_UTCB,
        u64::MAX,
        u64::MAX,
        sawmill_abi::ROOT_PRIORITY as u64,
    )
    .unwrap_or_else(|e| fail("watchdog thread", e));
    let stack = alloc::vec![0u8; WATCHDOG_STACK].leak();
    let top = (stack.as_ptr() as u64 + stack.len() as u64) & !15;
    sys::thread_start(
        thread,
        watchdog as *const () as u64,
        top - 8,
        timer | ep << 32,
    )
    .unwrap_or_else(|e| fail("watchdog thread", e));
}

/// The watchdog thread: `arg` holds its notification's slot (low half) and its capability to
/// the fault endpoint (high half).
extern "C" fn watchdog(arg: u64) -> ! {
    let (timer, ep) = (arg & 0xffff_ffff, arg >> 32);
    loop {
        // Before the kernel knows the counter's rate, a millisecond is taken as 10^6 ticks.
        let khz = match sys::kernel_info(kinfo::TSC_KHZ) {
            Ok(k) if k != 0 => k,
            _ => 1_000_000,
        };
        let deadline = sys::rdtsc() + sawmill_manifest::HANG_CHECK_MS * khz;
        while sys::rdtsc() < deadline {
            if sys::notify_wait_until(timer, deadline).is_err() {
                break;
            }
        }
        let r = sawmill_rt::ipc::call(ep, MsgTag::new(HANG_CHECK_LABEL, 0), [0; 4]);
        if r.err != 0 {
            sys::thread_exit(0);
        }
    }
}

fn main() {
    let mut pages = Pages::new();
    let first_ram = pages.ranges[0].0;
    // Root's heap: 4 MiB of contiguous user RAM from the window.
    let heap = pages.alloc_run(1024).expect("root heap");
    // SAFETY: this RAM is ours alone and mapped read-write in the window.
    unsafe { sawmill_rt::heap_add(win(heap), 1024 * 4096) };
    let arch = Archive {
        base: layout::BOOT_ARCHIVE,
    };
    let Some((mpa, msize)) = arch.find("manifest") else {
        fail("boot archive", sawmill_abi::Error::Invalid)
    };
    // SAFETY: inside the read-only archive mapping.
    let mbytes = unsafe { core::slice::from_raw_parts(mpa as *const u8, msize as usize) };
    let sys_: System = match sawmill_manifest::decode(mbytes) {
        Ok(s) => s,
        Err(_) => fail("manifest", sawmill_abi::Error::Invalid),
    };
    if let Err(e) = sawmill_manifest::validate(&sys_) {
        println!("root: FAIL manifest: {}", e);
        let _ = sys::shutdown(root_slots::CONTROL, 1);
    }
    println!(
        "root: starting system '{}' ({} servers)",
        sys_.name,
        sys_.servers.len()
    );
    if check_device_memory(first_ram) {
        println!("root: device memory maps, RAM is refused as device memory");
    } else {
        println!("root: FAIL device memory check");
    }
    let mut root = Root {
        pages,
        slots: Slots(root_slots::FIRST_FREE, Vec::new()),
        fault_ep: 0,
        endpoints: Vec::new(),
        servers: Vec::new(),
        mem_cap: None,
        mem_endpoint: None,
        tsc_khz: 0,
        boot_tsc: sys::kernel_info(kinfo::BOOT_TSC).unwrap_or(0),
        timer: 0,
        log: FaultLog::new(),
        injectable: sys_
            .servers
            .iter()
            .flat_map(|s| s.may_inject.iter().cloned())
            .collect(),
    };
    // The memory server is the one the manifest gives a RAM pool; it serves one endpoint.
    root.mem_endpoint = sys_
        .servers
        .iter()
        .find(|s| s.ram_kb > 0)
        .and_then(|s| s.provides.first())
        .cloned();
    root.fault_ep = root
        .create(root_slots::FACTORY, ObjKind::Endpoint, 0)
        .unwrap_or_else(|e| fail("endpoint", e));
    root.timer = root
        .create(root_slots::FACTORY, ObjKind::Notification, 0)
        .unwrap_or_else(|e| fail("notification", e));
    start_watchdog(&mut root);
    // Kernel memory before any server exists; compared at shutdown.
    let kmem0 = sys::kernel_info(kinfo::KMEM_FREE).unwrap_or(0);
    for (i, s) in sys_.servers.iter().enumerate() {
        root.start(i, s, &arch, 1);
    }
    let waiting = root.servers.iter().filter(|r| r.wait).count();
    if waiting == 0 {
        println!("root: no server to wait for; idling");
    }
    let mut sup = Supervisor {
        root: &mut root,
        waiting,
        failed: false,
        system: &sys_,
        arch: &arch,
        refusals: 0,
    };
    if waiting != 0 || sup.root.servers.is_empty() {
        let ep = sup.root.fault_ep;
        let _ = rpc::serve(ep, &mut sup);
    }
    let mut failed = sup.failed;
    // Every waited-for server is done: end the rest and check that the kernel got back every
    // byte the servers' objects, page tables and mappings used.
    for i in 0..root.servers.len() {
        root.reap(i);
    }
    if let Some(m) = root.mem_cap.take() {
        let _ = sys::cap_delete(m);
    }
    for (_, ep) in core::mem::take(&mut root.endpoints) {
        let _ = sys::cap_delete(ep);
    }
    let kmem1 = sys::kernel_info(kinfo::KMEM_FREE).unwrap_or(0);
    if kmem1 != kmem0 {
        println!(
            "root: FAIL kernel memory not returned: {} bytes free before the servers, {} after",
            kmem0, kmem1
        );
        failed = true;
    } else {
        println!("root: kernel memory returned ({} KiB free)", kmem1 / 1024);
    }
    println!(
        "root: all done, {}",
        if failed { "with failures" } else { "success" }
    );
    let _ = sys::shutdown(root_slots::CONTROL, if failed { 1 } else { 0 });
}
