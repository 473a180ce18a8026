//! Starts a program from the file system with lib/spawn, the way a process server will: reads
//! the ELF `/bin/spawn-child` through the file-system client (the open file's dataspace attached
//! read-only and executable, so its whole read-only pages map straight from the PFS's cache),
//! takes fresh pages from a mem dataspace of its own, serves as the child's pager and exception
//! handler, and checks that the child's quota returns once it is destroyed. First it checks the
//! refusals: a file that is not an ELF, and every quota too small (each fails at some step of
//! building the child), leave nothing behind.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::{label, rights, ObjKind};
use sawmill_fsclient::{Files, O_READ};
use sawmill_rt::{env, ipc, println, slots, sys, thread};
use sawmill_spawn::{prepare, Cap, MappedImage, MemPool, Program, Sizes, SpawnError};

sawmill_rt::entry!(main);

const PAGE: u64 = 4096;
/// Fresh pages for children: a mem dataspace of this size.
const POOL: u64 = 1 << 20;
/// The child's kernel-memory quota.
const CHILD_KMEM: u64 = 256 * 1024;

/// The running child's task slot: a failure kills it (its own table holds its task capability,
/// so only a kill frees it; root's leak check would report it).
static CHILD_TASK: AtomicU64 = AtomicU64::new(u64::MAX);

fn fail(what: core::fmt::Arguments) -> ! {
    println!("spawn-exec: FAIL {}", what);
    let t = CHILD_TASK.load(Ordering::Relaxed);
    if t != u64::MAX {
        let _ = sys::task_kill(t);
    }
    sawmill_rt::exit(1)
}

fn used() -> u64 {
    sys::factory_info(slots::FACTORY)
        .map(|u| u.0)
        .unwrap_or_else(|e| fail(format_args!("factory_info: {}", e.name())))
}

/// Opens `path` and attaches it read-only and executable: (fd, address, size).
fn attach(fs: &mut Files, path: &str) -> (usize, u64, u64) {
    let fd = fs
        .open(path, O_READ, 0)
        .unwrap_or_else(|e| fail(format_args!("open {}: {:?}", path, e)));
    let size = fs
        .fstat(fd)
        .unwrap_or_else(|e| fail(format_args!("fstat {}: {:?}", path, e)))
        .size;
    let cap = fs
        .file_cap(fd)
        .unwrap_or_else(|e| fail(format_args!("file_cap: {:?}", e)));
    let len = size.div_ceil(PAGE) * PAGE;
    let at = sawmill_rm::attach(cap, 0, len, None, sawmill_rm::READ | sawmill_rm::EXEC)
        .unwrap_or_else(|e| fail(format_args!("attach {}: {:?}", path, e)));
    // Our own mappings of the file cost page tables and mapping nodes from our quota: make them
    // all now, so that what `prepare` charges stands out.
    sawmill_rm::populate(at, len, false)
        .unwrap_or_else(|e| fail(format_args!("populate {}: {:?}", path, e)));
    (fd, at, size)
}

fn program(kmem: u64, handler: u64) -> Program<'static> {
    let mut p = Program::new("spawn-child", slots::FACTORY, kmem, 100);
    p.args.push("spawn-exec".into());
    p.sizes = Sizes {
        heap_bytes: 64 * 1024,
        ..p.sizes
    };
    p.caps
        .push(Cap::at("sys:console", slots::CONSOLE, slots::CONSOLE));
    p.pager = handler;
    p.exception_handler = handler;
    p
}

fn main() {
    sawmill_rm::init().unwrap_or_else(|e| fail(format_args!("rm init: {:?}", e)));
    let mut fs = Files::new(env::cap("vfs").unwrap_or_else(|| fail(format_args!("no vfs"))));
    let mut pool = MemPool::new(POOL).unwrap_or_else(|e| fail(format_args!("page pool: {:?}", e)));
    // The child's faults, exceptions and exit come here.
    let ep = thread::create(ObjKind::Endpoint, 0)
        .unwrap_or_else(|e| fail(format_args!("endpoint: {}", e.name())));
    let handler = thread::alloc_slot();
    sys::cap_mint(ep, handler, 1, rights::SEND)
        .unwrap_or_else(|e| fail(format_args!("mint: {}", e.name())));

    // Refusals: nothing may stay behind (quota, pages, slots' objects).
    let (fd, at, size) = attach(&mut fs, "/bin/not-elf");
    // SAFETY: attached readable above; detached only after the image is no longer used.
    let img = unsafe { MappedImage::on_demand(at, size) };
    let used0 = used();
    match prepare(&program(CHILD_KMEM, handler), &img, &mut pool) {
        Err(SpawnError::NotElf) if used() == used0 && pool.in_use() == 0 => {
            println!("spawn-exec: PASS a file that is not an ELF is refused, nothing kept")
        }
        r => fail(format_args!(
            "not an ELF: {:?}, {} bytes used (was {}), {} pages kept",
            r.map(|_| ()),
            used(),
            used0,
            pool.in_use()
        )),
    }
    let _ = sawmill_rm::detach(at);
    let _ = fs.close(fd);

    let (fd, at, size) = attach(&mut fs, "/bin/spawn-child");
    // SAFETY: attached readable above; detached only after the child is destroyed.
    let img = unsafe { MappedImage::on_demand(at, size) };
    // Every quota from one page up until one fits: each fails at some step (creating an object,
    // a page table or mapping node for some mapping) and must leave nothing behind.
    let mut steps: Vec<&'static str> = Vec::new();
    let mut kmem = PAGE;
    let fits = loop {
        let used0 = used();
        match prepare(&program(kmem, handler), &img, &mut pool) {
            Ok(c) => break c,
            Err(SpawnError::Sys(what, _)) if used() == used0 && pool.in_use() == 0 => {
                if !steps.contains(&what) {
                    steps.push(what);
                }
            }
            r => fail(format_args!(
                "quota {}: {:?}, {} bytes used (was {}), {} pages kept",
                kmem,
                r.map(|_| ()),
                used(),
                used0,
                pool.in_use()
            )),
        }
        kmem += PAGE;
        if kmem > CHILD_KMEM {
            fail(format_args!("no quota up to {} fits", CHILD_KMEM));
        }
    };
    if steps.len() < 3 {
        fail(format_args!("quotas too small failed only at {:?}", steps));
    }
    fits.destroy(&mut pool);
    println!(
        "spawn-exec: PASS a quota too small is refused at every step, nothing kept ({} KiB fits; {})",
        kmem / 1024,
        steps.join(", ")
    );

    let used0 = used();
    let child = prepare(&program(CHILD_KMEM, handler), &img, &mut pool)
        .unwrap_or_else(|e| fail(format_args!("prepare: {}", e)));
    CHILD_TASK.store(child.task, Ordering::Relaxed);
    if child.direct_pages == 0 {
        fail(format_args!(
            "no page mapped straight from the file ({} copied)",
            child.copied_pages
        ));
    }
    println!(
        "spawn-exec: {} image pages mapped from the file, {} copied",
        child.direct_pages, child.copied_pages
    );
    child
        .start()
        .unwrap_or_else(|e| fail(format_args!("start: {}", e)));
    let m = ipc::recv(ep, 0);
    match m.tag.label() {
        _ if m.err != 0 => fail(format_args!("recv: {}", m.err)),
        label::EXIT if m.w[0] == 0x5a => println!(
            "spawn-exec: PASS the child ran and exited with status {:#x}",
            m.w[0]
        ),
        label::EXIT => fail(format_args!("child exited with status {:#x}", m.w[0])),
        label::PAGE_FAULT => fail(format_args!(
            "child page fault at {:#x}, rip {:#x}",
            m.w[0], m.w[2]
        )),
        l => fail(format_args!(
            "child: message {} ({:#x} {:#x} {:#x})",
            l, m.w[0], m.w[1], m.w[2]
        )),
    }
    child.destroy(&mut pool);
    CHILD_TASK.store(u64::MAX, Ordering::Relaxed);
    if used() != used0 || pool.in_use() != 0 {
        fail(format_args!(
            "after the child: {} bytes used (was {}), {} pages kept",
            used(),
            used0,
            pool.in_use()
        ));
    }
    println!("spawn-exec: PASS the child's quota and pages returned");
    let _ = sawmill_rm::detach(at);
    let _ = fs.close(fd);
}
