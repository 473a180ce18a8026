//! Test launcher for the Linux personality (scenario `linux-core`), standing in for the process
//! server until it exists: for each argument (`[trace:]PATH [ARG...]`, space-separated) it
//! starts `linux-personality` (read from `/sbin/linux-personality` on the file system) with the
//! Linux process layout (`sawmill_linux::layout`), the environment records and capabilities of
//! the contract (`vfs`, `mem`, `proc`, `console`, `sys:factory`), serves `proc.exit` and
//! `proc.killed` for it, and prints how the program ended:
//! `linux-launcher: PATH exited with status N` or `linux-launcher: PATH killed by signal S`.
//! Anything else that reaches it (an unresolved fault, an exception, the thread's end) is a
//! failure of the library and printed as such.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_abi::{label, rights, ObjKind};
use sawmill_fsclient::{Files, O_READ};
use sawmill_interfaces::proc;
use sawmill_linux::layout as lx;
use sawmill_rt::{env, ipc, println, slots, sys, thread};
use sawmill_spawn::{prepare, Cap, Layout, MappedImage, MemPool, Program, Record, Sizes};

sawmill_rt::entry!(main);

const PAGE: u64 = 4096;
/// Fresh pages for the library's image, environment, heap, stack and UTCBs.
const POOL: u64 = 4 << 20;
/// The library's kernel-memory quota (its page tables, threads, endpoints, mapping nodes).
const KMEM: u64 = 1 << 20;
const HEAP: u64 = 1 << 20;
const PERSONALITY: &str = "/sbin/linux-personality";
/// Badges on our endpoint: the library's main thread's pager and exception handler, and its
/// `proc` capability.
const BADGE_THREAD: u64 = 1;
const BADGE_PROC: u64 = 2;

fn fail(what: core::fmt::Arguments) -> ! {
    println!("linux-launcher: FAIL {}", what);
    sawmill_rt::exit(1)
}

fn linux_layout() -> Layout {
    Layout {
        env: lx::LIB_ENV,
        heap: lx::LIB_HEAP,
        stack_top: lx::LIB_STACK_TOP,
        utcb: lx::LIB_UTCB,
        huge: lx::LIB_HUGE,
        user_end: lx::LIB_END,
    }
}

fn record(kind: u64, value: u64, bytes: &[u8]) -> Record<'static> {
    Record {
        kind,
        value,
        bytes: bytes.to_vec().into(),
        optional: false,
    }
}

fn program(index: u64, spec: &str, handler: u64, proc_cap: u64) -> (Program<'static>, String) {
    let (trace, spec) = match spec.strip_prefix("trace:") {
        Some(s) => (true, s),
        None => (false, spec),
    };
    let argv: Vec<&str> = spec.split(' ').filter(|s| !s.is_empty()).collect();
    let path = String::from(argv.first().copied().unwrap_or(""));
    let mut p = Program::new("linux", slots::FACTORY, KMEM, 100);
    p.layout = linux_layout();
    p.sizes = Sizes {
        heap_bytes: HEAP,
        stack_bytes: lx::LIB_STACK_BYTES,
        huge_pages: 0,
    };
    p.give_factory = true;
    p.args = argv.iter().map(|s| String::from(*s).into()).collect();
    for name in ["vfs", "mem"] {
        let c = env::cap(name).unwrap_or_else(|| fail(format_args!("no {} capability", name)));
        p.caps.push(Cap::named(name, c));
    }
    p.caps.push(Cap::named("proc", proc_cap));
    p.caps
        .push(Cap::at("sys:console", slots::CONSOLE, slots::CONSOLE));
    // Where the library's threads report faults it cannot resolve itself (as root's servers do).
    p.caps.push(Cap::at("sys:pager", handler, slots::PAGER));
    p.caps.push(Cap::at(
        "sys:thread-handler",
        handler,
        slots::THREAD_HANDLER,
    ));
    let pid = 100 + index;
    let mut ids = Vec::new();
    for v in [1u32, 0, 0, 0, 0] {
        ids.extend_from_slice(&v.to_le_bytes());
    }
    let tsc = sys::rdtsc();
    let mut clock = Vec::new();
    clock.extend_from_slice(&tsc.to_le_bytes());
    // The TSC rate is not known here; 1 GHz is close enough for a test launcher.
    clock.extend_from_slice(&1_000_000u64.to_le_bytes());
    let mut seed = [0u8; 32];
    for (i, c) in seed.chunks_mut(8).enumerate() {
        c.copy_from_slice(&(tsc.rotate_left(i as u32 * 13) ^ (pid << 32)).to_le_bytes());
    }
    p.records
        .push(record(env::KIND_LINUX_EXEC, 0, path.as_bytes()));
    p.records.push(record(env::KIND_LINUX_IDS, pid, &ids));
    // 2026-01-01 00:00:00 UTC: a fixed wall clock for the test launcher.
    p.records
        .push(record(env::KIND_LINUX_CLOCK, 1_767_225_600, &clock));
    p.records.push(record(env::KIND_LINUX_SEED, 0, &seed));
    p.records.push(record(env::KIND_LINUX_CWD, 0, b"/"));
    for e in ["HOME=/", "PATH=/bin", "TERM=dumb"] {
        p.records.push(record(env::KIND_LINUX_ENV, 0, e.as_bytes()));
    }
    if trace {
        p.records.push(record(env::KIND_LINUX_TRACE, 1, &[]));
    }
    p.pager = handler;
    p.exception_handler = handler;
    (p, path)
}

fn main() {
    sawmill_rm::init().unwrap_or_else(|e| fail(format_args!("rm init: {:?}", e)));
    let mut fs = Files::new(env::cap("vfs").unwrap_or_else(|| fail(format_args!("no vfs"))));
    let mut pool = MemPool::new(POOL).unwrap_or_else(|e| fail(format_args!("page pool: {:?}", e)));
    let ep = thread::create(ObjKind::Endpoint, 0)
        .unwrap_or_else(|e| fail(format_args!("endpoint: {}", e.name())));
    let handler = thread::alloc_slot();
    let proc_cap = thread::alloc_slot();
    sys::cap_mint(ep, handler, BADGE_THREAD, rights::SEND)
        .and_then(|_| sys::cap_mint(ep, proc_cap, BADGE_PROC, rights::SEND))
        .unwrap_or_else(|e| fail(format_args!("mint: {}", e.name())));

    let fd = fs
        .open(PERSONALITY, O_READ, 0)
        .unwrap_or_else(|e| fail(format_args!("open {}: {:?}", PERSONALITY, e)));
    let size = fs
        .fstat(fd)
        .unwrap_or_else(|e| fail(format_args!("fstat: {:?}", e)))
        .size;
    let cap = fs
        .file_cap(fd)
        .unwrap_or_else(|e| fail(format_args!("file_cap: {:?}", e)));
    let len = size.div_ceil(PAGE) * PAGE;
    let at = sawmill_rm::attach(cap, 0, len, None, sawmill_rm::READ | sawmill_rm::EXEC)
        .unwrap_or_else(|e| fail(format_args!("attach: {:?}", e)));
    // SAFETY: attached readable above and never detached; its pages fault in on touch.
    let bytes = unsafe { core::slice::from_raw_parts(at as *const u8, size as usize) };
    // Only the loadable part is made resident: the file's debug information behind it (most of
    // its size) is never read, and need not fit the PFS's cache.
    let (_, segments) = sawmill_loader::segments(bytes, u64::MAX)
        .unwrap_or_else(|e| fail(format_args!("{}: {}", PERSONALITY, e.text())));
    let loaded = segments
        .iter()
        .map(|s| s.offset + s.filesz)
        .max()
        .unwrap_or(0);
    sawmill_rm::populate(at, loaded.div_ceil(PAGE) * PAGE, false)
        .unwrap_or_else(|e| fail(format_args!("populate: {:?}", e)));
    // SAFETY: attached readable above and never detached.
    let img = unsafe { MappedImage::on_demand(at, size) };

    let specs: Vec<&str> = env::args().collect();
    for (i, spec) in specs.iter().enumerate() {
        let (p, path) = program(i as u64, spec, handler, proc_cap);
        let child = prepare(&p, &img, &mut pool)
            .unwrap_or_else(|e| fail(format_args!("prepare {}: {}", path, e)));
        child
            .start()
            .unwrap_or_else(|e| fail(format_args!("start: {}", e)));
        let m = ipc::recv(ep, 0);
        let _ = sys::task_kill(child.task);
        match (m.badge, m.tag.label()) {
            _ if m.err != 0 => fail(format_args!("recv: {}", m.err)),
            (BADGE_PROC, proc::op::EXIT) => println!(
                "linux-launcher: {} exited with status {}",
                path, m.w[0] as u32
            ),
            // The signal, without the core-dump flag (0x80).
            (BADGE_PROC, proc::op::KILLED) => println!(
                "linux-launcher: {} killed by signal {}",
                path,
                m.w[0] as u32 & 0x7f
            ),
            (_, label::PAGE_FAULT) => println!(
                "linux-launcher: FAIL {}: unresolved page fault at {:#x}, rip {:#x}",
                path, m.w[0], m.w[2]
            ),
            (_, label::EXCEPTION) => println!(
                "linux-launcher: FAIL {}: exception {} at rip {:#x}",
                path, m.w[0], m.w[1]
            ),
            (_, label::EXIT) => println!(
                "linux-launcher: {} library ended with status {}",
                path, m.w[0]
            ),
            (b, l) => println!(
                "linux-launcher: FAIL {}: message {} with badge {}",
                path, l, b
            ),
        }
        child.destroy(&mut pool);
    }
    println!("linux-launcher: all programs done");
}
