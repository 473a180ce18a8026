//! The library at run time: starting the program, the entry from trap reflection, the system
//! call table and the calls served here (memory, process, time). File and descriptor calls go
//! to `files_guest`. Decisions are made by the host-tested modules of the library crate
//! (`elf`, `mm`, `random`, `trace`); this module carries them out.
//!
//! The process state below is used by one thread at a time: a single-threaded process's one
//! thread (the reflection entry, or the start), or, once the program made threads, whichever
//! thread holds the library lock (`thread_guest`: taken on entry, released on return and
//! around every sleep, never with a borrow of this state alive across it). A `fork` child
//! starts here too: it adopts the state its parent handed on (`fork_guest`) and returns to the
//! program from the parent's `fork` with rax = 0.

use crate::files_guest;
use crate::fork_guest;
use crate::signal_guest;
use crate::thread_guest;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::{ForeignFrame, Utcb};
use sawmill_fsclient::O_READ;
use sawmill_interfaces::proc;
use sawmill_linux::elf::{self, StackInfo, PF_W, PF_X};
use sawmill_linux::errno::{self, Errno};
use sawmill_linux::handoff;
use sawmill_linux::mm::{self, BrkStep, Place};
use sawmill_linux::procs;
use sawmill_linux::random::{self, Rng};
use sawmill_linux::{layout, nr, trace, SysResult, User};
use sawmill_proc_api::{RequestWriter, MAX_EXEC_REQUEST};
use sawmill_rm as rm;
use sawmill_rt::{env, println, slots, sys, thread};

const PAGE: u64 = 4096;
/// The library's own stack for serving a thread's system calls.
const SYSCALL_STACK: usize = layout::LIB_SYSCALL_STACK as usize;

/// A fresh library stack for a new thread's system calls (the main thread's is mapped with the
/// library: `layout::LIB_SYSCALL_STACK_TOP`), kept for good; its top. Not
/// zeroed (a stack needs no contents): its pages, demand-zero heap, come in only as deep as the
/// calls go, where zeroing all 64 KiB cost ~50k instructions a thread.
pub(crate) fn syscall_stack_top() -> u64 {
    let layout = core::alloc::Layout::from_size_align(SYSCALL_STACK, 16).unwrap();
    // SAFETY: the layout's size is not zero; the block is never freed.
    let p = unsafe { alloc::alloc::alloc(layout) };
    if p.is_null() {
        alloc::alloc::handle_alloc_error(layout);
    }
    (p as u64 + SYSCALL_STACK as u64) & !15
}
/// The exit status of a program that could not be started (as a shell reports "not found" or
/// "cannot execute").
const EXIT_CANNOT_EXEC: u32 = 126;

/// State used by one thread at a time (see the module header: the one thread, or the holder
/// of `thread_guest`'s library lock).
pub(crate) struct Single<T>(pub(crate) UnsafeCell<T>);
// SAFETY: one thread at a time uses it (the module header says why).
unsafe impl<T> Sync for Single<T> {}
impl<T> Single<T> {
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn get(&self) -> &mut T {
        // SAFETY: see the `Sync` impl: no two references are live at once, because each system
        // call takes it once at its start, the library is not re-entered, and a threaded
        // process's threads take turns under the library lock, which a sleep releases only
        // with no reference taken from here alive across it.
        unsafe { &mut *self.0.get() }
    }
}

/// The process as the library knows it.
struct Process {
    pid: u64,
    ppid: u64,
    /// uid, euid, gid, egid.
    ids: [u32; 4],
    trace: bool,
    brk: mm::Brk,
    rng: Rng,
    /// Real-time clock at boot (s), the TSC then and its rate (kHz).
    clock: (u64, u64, u64),
    fs_base: u64,
    name: [u8; 16],
    /// Unknown system calls already logged (one bit per number).
    logged: [u64; 8],
}

static PROCESS: Single<Option<Process>> = Single(UnsafeCell::new(None));
/// Where the program starts (read by the jump into it).
static PROGRAM_ENTRY: AtomicU64 = AtomicU64::new(0);

fn process() -> &'static mut Process {
    PROCESS.get().as_mut().expect("process state set at start")
}

/// proc's endpoint, looked up once: the environment stays as it is while the image runs, and
/// a lookup by name walks every record (~1.2k instructions; every fork, wait, exit and fetch
/// of signals asks).
pub(crate) fn proc_cap() -> Option<u64> {
    match PROC_CAP.load(Ordering::Relaxed) {
        0 => {
            let found = env::cap(proc::NAME);
            PROC_CAP.store(found.unwrap_or(u64::MAX), Ordering::Relaxed);
            found
        }
        u64::MAX => None,
        cap => Some(cap),
    }
}

/// [`proc_cap`]'s slot: 0: not looked up yet; `u64::MAX`: the environment names none.
static PROC_CAP: AtomicU64 = AtomicU64::new(0);

/// Ends the process with `status` through the process server; without one (a test launcher
/// that serves none), by ending the thread.
pub(crate) fn exit_process(status: u32) -> ! {
    // The program's memory goes back to mem now (proc ends the task, but the dataspaces are
    // charged to proc's account and would outlive it).
    let _ = rm::detach_range_ending(
        layout::PROGRAM_MIN,
        layout::PROGRAM_END - layout::PROGRAM_MIN,
    );
    if let Some(p) = proc_cap() {
        let _ = proc::Client::new(p).exit(status & 0xff);
    }
    println!("linux: exit status {} (no process server)", status & 0xff);
    sawmill_rt::exit(status as u64 & 0xff)
}

/// Ends the process by a signal's default action: `status` is the signal, with 0x80 if it
/// dumps core (`proc.killed`). The program's memory goes back first.
pub(crate) fn kill_process(status: u32) -> ! {
    let _ = rm::detach_range_ending(
        layout::PROGRAM_MIN,
        layout::PROGRAM_END - layout::PROGRAM_MIN,
    );
    if let Some(p) = proc_cap() {
        let _ = proc::Client::new(p).killed(status);
    }
    println!(
        "linux: killed by signal {} (no process server)",
        status & 0x7f
    );
    sawmill_rt::exit(128 + (status & 0x7f) as u64)
}

/// The process's credentials as `SO_PEERCRED` reports them: pid, effective uid and gid.
pub(crate) fn cred() -> [u32; 3] {
    let p = process();
    [p.pid as u32, p.ids[1], p.ids[3]]
}

/// The process's pid and uid.
pub(crate) fn ids() -> (u64, u32) {
    let p = process();
    (p.pid, p.ids[0])
}

fn cannot_start(path: &str, why: &str, e: Errno) -> ! {
    println!("linux: cannot run {}: {} ({})", path, why, e.name());
    exit_process(EXIT_CANNOT_EXEC)
}

fn rm_errno(e: rm::RmError) -> Errno {
    match e {
        rm::RmError::Busy => errno::EEXIST,
        rm::RmError::NotFound => errno::ENOMEM,
        rm::RmError::Invalid => errno::EINVAL,
        _ => errno::ENOMEM,
    }
}

/// A fresh anonymous dataspace of `len` bytes (zero-filled, paged in as used).
fn anonymous(len: u64) -> Result<u64, Errno> {
    let m = rm::mem().ok_or(errno::ENOMEM)?;
    m.alloc(len, 0, thread::alloc_slot())
        .map_err(|_| errno::ENOMEM)
}

/// Attaches fresh anonymous memory at `at` (owned by the region manager: freed with its last
/// region).
fn attach_anonymous(at: u64, len: u64, fl: u32) -> Result<(), Errno> {
    let ds = anonymous(len)?;
    rm::attach(ds, 0, len, Some(at), fl | rm::OWNED)
        .map(|_| ())
        .map_err(|e| {
            let _ = sawmill_interfaces::dataspace::Client::new(ds).free();
            let _ = sys::cap_delete(ds);
            rm_errno(e)
        })
}

/// New anonymous memory of `len` bytes for the program (`mmap`, `brk`, `mremap`): ENOMEM if
/// the process's own kernel memory could not map it (`mm::kmem_admit`), or mem could not give
/// it while keeping its reserve for every other process (`mm::anon_admit`).
/// Asked of mem only once the program's growth since the last answer passes a threshold (small
/// allocations are not worth a call each).
fn anon_room(len: u64) -> Result<(), Errno> {
    /// Growth (bytes) that makes the next allocation ask mem.
    const ASK_EVERY: u64 = 1 << 20;
    static GROWN: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    let grown = GROWN.fetch_add(len, Ordering::Relaxed) + len;
    if grown < ASK_EVERY {
        return Ok(());
    }
    let pages = len.div_ceil(PAGE);
    // The process's own bound: the kernel memory its mappings take.
    let kmem_ok = sys::factory_info(slots::FACTORY)
        .map_or(true, |(used, limit)| mm::kmem_admit(pages, used, limit));
    // Everyone's bound: mem's pages.
    let mem_ok = rm::mem()
        .and_then(|m| m.stats().ok())
        .is_none_or(|s| mm::anon_admit(pages, s.used, s.quota, s.free));
    if !(kmem_ok && mem_ok) {
        GROWN.store(ASK_EVERY, Ordering::Relaxed);
        return Err(errno::ENOMEM);
    }
    GROWN.store(0, Ordering::Relaxed);
    Ok(())
}

/// Fresh anonymous memory shared with the children this process forks (`MAP_SHARED |
/// MAP_ANONYMOUS`): a dataspace one page larger, whose first page counts the processes using it
/// (lib/rm's `SHARED`), attached from its second page. Returns the dataspace and the flags and
/// offset to attach it with.
fn shared_anonymous(len: u64, rights: u32) -> Result<(u64, u32, u64), Errno> {
    let ds = anonymous(len.checked_add(PAGE).ok_or(errno::ENOMEM)?)?;
    if rm::share(ds, 1).is_err() {
        let _ = sawmill_interfaces::dataspace::Client::new(ds).free();
        let _ = sys::cap_delete(ds);
        return Err(errno::ENOMEM);
    }
    Ok((ds, rights | rm::SHARED, PAGE))
}

fn rm_rights(prot: u64) -> u32 {
    let (r, w, x) = mm::rights(prot);
    (if r { rm::READ } else { 0 })
        | (if w { rm::WRITE } else { 0 })
        | (if x { rm::EXEC } else { 0 })
}

// ---------------------------------------------------------------------------------------------
// Start.

/// Reads the environment, loads the program and enters it. Never returns.
pub fn start() {
    // The records the start reads, in one pass over the environment (a lookup by kind each
    // walks every record: ~1.2k instructions apiece); the first of each kind counts.
    let mut found: [Option<(u64, &'static [u8])>; 5] = [None; 5];
    const START_KINDS: [u64; 5] = [
        env::KIND_LINUX_EXEC,
        env::KIND_LINUX_IDS,
        env::KIND_LINUX_CLOCK,
        env::KIND_LINUX_SEED,
        env::KIND_LINUX_TRACE,
    ];
    // The library heap's dataspace (proc's `HEAP_CAP`) in the same pass: `env::cap` walked
    // the records once more.
    // So are the handoff's records, the signals layer's and the file layer's (each walked them
    // again).
    let mut heap_cap = None;
    let mut handed = fork_guest::Handed::default();
    let mut signal_records = signal_guest::StartRecords::default();
    let mut file_records = files_guest::FileRecords::default();
    // An exec'd image's arguments and environment strings (a fork child has none): gathered
    // here too, for the initial stack (a second walk cost ~2.5k).
    let (mut argv, mut envp): (Vec<&[u8]>, Vec<&[u8]>) = (Vec::new(), Vec::new());
    // proc's and mem's endpoints and the fault word: each looked up by name later walked the
    // records again (~1.2k each).
    let (mut proc_rec, mut mem_rec, mut fault_word_rec) = (None, None, None);
    for (kind, value, bytes) in env::all() {
        if kind == env::KIND_CAP || kind == env::KIND_PROVIDES {
            if bytes == proc::NAME.as_bytes() {
                proc_rec.get_or_insert(value);
            } else if bytes == sawmill_interfaces::mem::NAME.as_bytes() {
                mem_rec.get_or_insert(value);
            }
        } else if kind == env::KIND_FAULT_WORD {
            fault_word_rec.get_or_insert(value);
        }
        match kind {
            env::KIND_ARG => {
                argv.push(bytes);
                continue;
            }
            env::KIND_LINUX_ENV => {
                envp.push(bytes);
                continue;
            }
            _ => {}
        }
        // The file layer's too; it shares some (ids, seed, the wake notification).
        file_records.note(kind, value, bytes);
        if let Some(i) = START_KINDS.iter().position(|&k| k == kind) {
            found[i].get_or_insert((value, bytes));
        } else if kind == env::KIND_CAP && bytes == sawmill_proc_api::HEAP_CAP.as_bytes() {
            heap_cap.get_or_insert(value);
        } else if !handed.note(kind, value, bytes) {
            signal_records.note(kind, value, bytes);
        }
    }
    PROC_CAP.store(proc_rec.unwrap_or(u64::MAX), Ordering::Relaxed);
    rm::note_mem(mem_rec);
    sawmill_interfaces::rpc::note_fault_word(fault_word_rec);
    let [exe_rec, ids_rec, clock_rec, seed_rec, trace_rec] = found;
    let exe = exe_rec
        .and_then(|(_, b)| core::str::from_utf8(b).ok())
        .unwrap_or("");
    let mut ids = [0u32; 4];
    let (pid, ppid) = match ids_rec {
        Some((pid, b)) if b.len() >= 20 => {
            let w = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
            ids = [w(1), w(2), w(3), w(4)];
            (pid, w(0) as u64)
        }
        _ => (1, 0),
    };
    let clock = match clock_rec {
        Some((secs, b)) if b.len() >= 16 => (
            secs,
            u64::from_le_bytes(b[0..8].try_into().unwrap()),
            u64::from_le_bytes(b[8..16].try_into().unwrap()).max(1),
        ),
        _ => (0, 0, 1_000_000),
    };
    let seed = seed_rec.map(|(_, b)| b).unwrap_or(&[]);
    let mut rng = Rng::new(seed);
    let trace = trace_rec.map(|(v, _)| v) == Some(1);

    // The region manager: everything of the program's part is its to manage; its own
    // attachments (file windows, buffers) go above the program.
    if let Err(e) = rm::configure(
        layout::PROGRAM_MIN,
        layout::LIB_RM_END,
        layout::LIB_RM_BASE + PAGE,
        layout::LIB_FILE_WINDOWS,
        layout::LIB_RM_BASE,
    )
    .and_then(|_| rm::init())
    {
        println!("linux: region manager: {:?}", e);
        exit_process(EXIT_CANNOT_EXEC);
    }
    // The library's heap beyond the small one proc maps before it starts: demand-zero pages of
    // mem, touched only as the library grows (most processes use a few dozen pages of it), so a
    // process costs proc's pool and kernel memory little and 200 of them fit.
    // A memory server with less RAM than that refuses so large a dataspace: then less.
    // proc allocates it (`HEAP_CAP`) and frees it once the task is gone: the library cannot
    // free the heap it runs on, and a heap left charged to proc outlived every process (a
    // shell's long loop ran mem out). A test launcher gives none: then mem directly.
    if let Some(ds) = heap_cap {
        if let Err(e) = rm::init_heap_from(ds) {
            println!("linux: the library's heap: {:?}", e);
            exit_process(EXIT_CANNOT_EXEC);
        }
    } else {
        let mut heap = layout::LIB_HEAP_DEMAND;
        while let Err(e) = rm::init_heap(heap) {
            if heap <= layout::LIB_HEAP_DEMAND_MIN {
                println!("linux: the library's heap: {:?}", e);
                exit_process(EXIT_CANNOT_EXEC);
            }
            heap /= 2;
        }
    }
    rm::set_unresolved_hook(signal_guest::unresolved_fault);
    // proc maps the information page before the library starts; a test launcher does not.
    HAS_INFO.store(sys::translate(layout::LIB_INFO).is_ok(), Ordering::Relaxed);
    let received = fork_guest::received(handed);
    if let Some((mut st, caps)) = received {
        if let Some(f) = st.fork.take() {
            files_guest::adopt(exe, &st, &caps, file_records);
            start_forked(
                exe,
                f,
                &caps,
                (pid, ppid, ids, clock, rng, trace),
                signal_records,
            );
        }
        files_guest::adopt(exe, &st, &caps, file_records);
    } else {
        files_guest::init(exe, file_records);
    }

    let image = load(exe);
    let brk = mm::Brk::new(image.brk);

    // The stack: anonymous, up to STACK_MAX below STACK_TOP, with the Linux initial stack.
    let stack_lo = layout::STACK_TOP - layout::STACK_MAX;
    if let Err(e) = attach_anonymous(stack_lo, layout::STACK_MAX, rm::READ | rm::WRITE) {
        cannot_start(exe, "no stack", e);
    }
    let mut random_bytes = [0u8; 16];
    rng.fill(&mut random_bytes);
    let info = StackInfo {
        argv: &argv,
        envp: &envp,
        execfn: exe.as_bytes(),
        random: random_bytes,
        image: &image,
        ids,
        hwcap: cpuid_edx(),
    };
    let stack = match elf::plan_stack(layout::STACK_TOP, &info, layout::STACK_MAX / 4) {
        Ok(s) => s,
        Err(e) => cannot_start(exe, "arguments too long", e),
    };
    // The initial stack's pages, resolved before they are written (a call to mem each) rather
    // than each by a page fault (~500 instructions less a page). Best effort: a page left out
    // faults in as it is written. Pages below it are left to fault: resolving 3 more cost ~3k
    // each at an `exec` of lbench, which never touched them.
    let first = stack.sp & !(PAGE - 1);
    let _ = rm::populate(first, layout::STACK_TOP - first, true);
    if let Err(e) = GuestUser.write(stack.sp, &stack.bytes) {
        cannot_start(exe, "writing the stack", e);
    }

    let name = published_name().unwrap_or_else(|| base_name(exe.as_bytes()));
    publish_name(&name);
    *PROCESS.get() = Some(Process {
        pid,
        ppid,
        ids,
        trace,
        brk,
        rng,
        clock,
        fs_base: 0,
        name,
        logged: [0; 8],
    });

    signal_guest::init(signal_records);
    // This thread's library stack for the system calls to come, found through its UTCB: the
    // part of the stack proc mapped that is set aside for them.
    sawmill_rt::utcb().user[SYSCALL_STACK_WORD] = layout::LIB_SYSCALL_STACK_TOP;

    // SAFETY: taking the address of the entry stub.
    let entry = linux_syscall_entry as *const () as u64;
    if let Err(e) = sys::thread_foreign(slots::THREAD, entry, layout::LIB_BASE, layout::LIB_END) {
        println!("linux: cannot mark the thread foreign: {}", e.name());
        exit_process(EXIT_CANNOT_EXEC);
    }
    PROGRAM_ENTRY.store(image.entry, Ordering::Release);
    // SAFETY: the stack and the program's image are mapped; the program runs from here on with
    // a clean register state (rdx = 0: no function for atexit), rt's GS base kept.
    unsafe {
        core::arch::asm!(
            "mov rsp, {sp}",
            "xor eax, eax",
            "xor ebx, ebx",
            "xor ecx, ecx",
            "xor edx, edx",
            "xor esi, esi",
            "xor edi, edi",
            "xor ebp, ebp",
            "xor r8d, r8d",
            "xor r9d, r9d",
            "xor r10d, r10d",
            "xor r11d, r11d",
            "xor r12d, r12d",
            "xor r13d, r13d",
            "xor r14d, r14d",
            "xor r15d, r15d",
            "jmp qword ptr [rip + {entry}]",
            sp = in(reg) stack.sp,
            entry = sym PROGRAM_ENTRY,
            options(noreturn)
        )
    }
}

/// Whether proc maps the process information page (`layout::LIB_INFO`): a test launcher does
/// not.
static HAS_INFO: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// A `fork` child: takes over the parent's memory regions, break, thread pointer and registers,
/// and returns to the program from its `fork` with rax = 0. Never returns.
fn start_forked(
    exe: &str,
    f: handoff::ForkState,
    caps: &[u64],
    (pid, ppid, ids, clock, rng, trace): (u64, u64, [u32; 4], (u64, u64, u64), Rng, bool),
    signal_records: signal_guest::StartRecords,
) -> ! {
    let cap = |i: u32| caps.get(i as usize).copied().unwrap_or(0);
    for r in &f.regions {
        let snap = rm::RegionSnap {
            start: r.start,
            size: r.size,
            ds: cap(r.ds),
            offset: r.offset,
            flags: r.flags,
            shadow: if r.shadow == handoff::NONE {
                0
            } else {
                cap(r.shadow)
            },
            shadow_offset: r.shadow_offset,
            private: r.private.clone(),
        };
        if let Err(e) = rm::adopt(&snap) {
            println!("linux: fork child: region {:#x}: {:?}", r.start, e);
            kill_process(9);
        }
        // A mapped file: reopened by the child's own region manager through its own VFS
        // capability if the file system restarts (issue 16). That capability (`vfs` 0) is
        // looked up in the environment only then: a walk of it per fork costs more than the
        // rest of the registration.
        let [mount, ino, generation] = r.reopen;
        if ino != 0 {
            rm::set_reopen(
                snap.ds,
                rm::Reopen {
                    vfs: 0,
                    mount,
                    ino,
                    generation,
                },
            );
        }
    }
    let mut name = f.name;
    name[15] = 0;
    publish_name(&name);
    *PROCESS.get() = Some(Process {
        pid,
        ppid,
        ids,
        trace,
        brk: mm::Brk {
            start: f.brk[0],
            cur: f.brk[1],
            mapped: f.brk[2],
        },
        rng,
        clock,
        fs_base: f.fs_base,
        name,
        logged: [0; 8],
    });
    let _ = exe;
    signal_guest::init(signal_records);
    signal_guest::adopt_fork(&f.signals);
    if f.fs_base != 0 {
        let gs = sawmill_rt::utcb() as *const Utcb as u64;
        let _ = sys::set_tls(f.fs_base, gs);
    }
    let top = layout::LIB_SYSCALL_STACK_TOP;
    sawmill_rt::utcb().user[SYSCALL_STACK_WORD] = top;
    let entry = linux_syscall_entry as *const () as u64;
    if let Err(e) = sys::thread_foreign(slots::THREAD, entry, layout::LIB_BASE, layout::LIB_END) {
        println!("linux: cannot mark the thread foreign: {}", e.name());
        exit_process(EXIT_CANNOT_EXEC);
    }
    if f.child_tid != 0 {
        let _ = GuestUser.write(f.child_tid, &(pid as u32).to_le_bytes());
    }
    let fr = &mut sawmill_rt::utcb().foreign;
    let w = |i: usize| f.frame.get(i).copied().unwrap_or(0);
    *fr = ForeignFrame {
        rax: 0,
        rbx: w(1),
        rcx: w(2),
        rdx: w(3),
        rsi: w(4),
        rdi: w(5),
        rbp: w(6),
        rsp: if f.stack != 0 { f.stack } else { w(7) },
        r8: w(8),
        r9: w(9),
        r10: w(10),
        r11: w(11),
        r12: w(12),
        r13: w(13),
        r14: w(14),
        r15: w(15),
        rip: w(16),
        rflags: w(17),
    };
    let frame = fr as *mut ForeignFrame as u64;
    // SAFETY: the frame holds the parent's registers at its `fork` (rax = 0), every region of
    // the program is attached, and the return path of the entry stub restores them all and
    // jumps to the program, as after any system call; it runs on this thread's library stack.
    unsafe {
        core::arch::asm!(
            "mov rsp, {sp}",
            "jmp linux_syscall_return",
            sp = in(reg) top,
            in("rax") frame,
            options(noreturn)
        )
    }
}

/// The parent's pid: from the process information page proc keeps (it changes when the parent
/// ends), or what the process started with.
fn parent_pid() -> u64 {
    if HAS_INFO.load(Ordering::Relaxed) {
        // SAFETY: proc maps the information page at LIB_INFO before the library starts, for
        // the whole life of the task; a u32 at INFO_PPID.
        unsafe {
            core::ptr::read_volatile(
                (layout::LIB_INFO as usize + sawmill_proc_api::INFO_PPID) as *const u32,
            ) as u64
        }
    } else {
        process().ppid
    }
}

/// Tells proc (through the process information page) whether the program's thread sleeps in a
/// wait now: /proc's `S` or `R`.
pub(crate) fn set_sleeping(sleeping: bool) {
    if HAS_INFO.load(Ordering::Relaxed) {
        // SAFETY: proc maps the information page read-write at LIB_INFO before the library
        // starts, for the whole life of the task; INFO_SLEEPING is a u32 the library owns.
        unsafe {
            core::ptr::write_volatile(
                (layout::LIB_INFO as usize + sawmill_proc_api::INFO_SLEEPING) as *mut u32,
                sleeping as u32,
            )
        }
    }
}

/// The name an `execve` left in the process information page (the base name of the path it
/// was given, as Linux's `comm` after exec: `exe` for `/proc/self/exe`), if any.
fn published_name() -> Option<[u8; 16]> {
    if !HAS_INFO.load(Ordering::Relaxed) {
        return None;
    }
    let at = layout::LIB_INFO as usize + sawmill_proc_api::INFO_COMM;
    let mut name = [0u8; 16];
    for (i, b) in name[..15].iter_mut().enumerate() {
        // SAFETY: as in publish_name.
        *b = unsafe { core::ptr::read_volatile((at + i) as *const u8) };
    }
    (name[0] != 0).then_some(name)
}

/// Tells proc (through the process information page) the program's name (`comm`) for /proc.
fn publish_name(name: &[u8; 16]) {
    if HAS_INFO.load(Ordering::Relaxed) {
        let at = layout::LIB_INFO as usize + sawmill_proc_api::INFO_COMM;
        for (i, &b) in name[..sawmill_proc_api::INFO_COMM_LEN].iter().enumerate() {
            // SAFETY: proc maps the information page read-write at LIB_INFO before the library
            // starts, for the whole life of the task; INFO_COMM's 16 bytes are the library's.
            unsafe { core::ptr::write_volatile((at + i) as *mut u8, b) }
        }
    }
}

/// What a fork child takes over of the library's process state: the thread pointer, the break
/// (start, current, mapped end) and the name.
pub(crate) fn fork_fields() -> (u64, [u64; 3], [u8; 16]) {
    let p = process();
    (p.fs_base, [p.brk.start, p.brk.cur, p.brk.mapped], p.name)
}

/// The calling thread's thread pointer (a threaded process swaps each thread's in:
/// `thread_guest`).
pub(crate) fn fs_base_mut() -> &'static mut u64 {
    &mut process().fs_base
}

/// The real user id.
pub(crate) fn uid() -> u32 {
    process().ids[0]
}

/// `AT_HWCAP` on x86-64 is CPUID leaf 1's EDX.
fn cpuid_edx() -> u64 {
    core::arch::x86_64::__cpuid(1).edx as u64
}

/// Opens the program, checks it and attaches its segments. Returns the placed image.
fn load(path: &str) -> elf::Image {
    // The file stays open in the process's file client (not among the program's descriptors)
    // for as long as the process runs: its segments are mapped from it.
    let opened = files_guest::with_fs(|fs| {
        // Through the VFS: the mount table is fetched only if the program opens a file itself
        // (~5k less at every start).
        let fd = fs.open_sparing_mounts(path, O_READ, 0)?;
        // The size the open reported (an `fstat` asked the file system again: ~1k).
        let size = fs.known_size(fd)?;
        let file = fs.file_cap(fd).map_err(|_| sawmill_fsclient::Error::Io)?;
        Ok((fd, size, file))
    });
    let (fd, size, file) = match opened {
        Ok(x) => x,
        Err(e) => cannot_start(path, fs_why(e), errno::ENOENT),
    };
    if size == 0 {
        cannot_start(path, "empty file", errno::ENOEXEC);
    }
    // The headers: the file's first page (a static program's headers follow the ELF header),
    // and only if that does not give a program that runs, its first 4 pages, so that every
    // refusal is the same.
    let mut parsed = parse_head(path, fd, size, PAGE);
    if parsed.is_err() && size > PAGE {
        parsed = parse_head(path, fd, size, HEAD_MAX);
    }
    let image = match parsed {
        Ok(i) => i,
        Err(e) if e == errno::ELIBBAD => {
            cannot_start(path, "dynamically linked (needs a program interpreter)", e)
        }
        Err(e) => cannot_start(path, "not a static x86-64 executable", e),
    };
    for s in &image.segments {
        let x = if s.flags & PF_X != 0 { rm::EXEC } else { 0 };
        let w = if s.flags & PF_W != 0 { rm::WRITE } else { 0 };
        // File pages: private copy-on-write (read-only segments too, so that an mprotect to
        // writable never writes the file).
        let file_end = s.file_pages_end().min(s.map_end());
        if file_end > s.map_start {
            if let Err(e) = rm::attach(
                file,
                s.file_page,
                file_end - s.map_start,
                Some(s.map_start),
                rm::READ | w | x | rm::COW,
            ) {
                cannot_start(path, "attaching a segment", rm_errno(e));
            }
            // The rest of the last file page belongs to the bss: zero it.
            if w != 0 && s.file_end < file_end && s.mem_end > s.file_end {
                let zeros = alloc::vec![0u8; (file_end.min(s.mem_end) - s.file_end) as usize];
                // Its private copy made by a call rather than by a write fault through the
                // pager thread (best effort: a page left out faults in as it is written).
                let _ = rm::populate(s.file_end, zeros.len() as u64, true);
                if let Err(e) = GuestUser.write(s.file_end, &zeros) {
                    cannot_start(path, "zeroing the bss", e);
                }
            }
        }
        let anon_from = file_end.max(s.map_start);
        if s.map_end() > anon_from {
            if let Err(e) = attach_anonymous(anon_from, s.map_end() - anon_from, rm::READ | w | x) {
                cannot_start(path, "attaching the bss", e);
            }
        }
    }
    image
}

/// Most of a program's first bytes `load` reads for its headers.
const HEAD_MAX: u64 = 4 * PAGE;

/// The file's first `len` bytes (at most its size), read through the file client (the file
/// system maps its pages into the client's window for the file: attaching them with the region
/// manager, faulting them in and detaching them again cost ~2.6k more), parsed as a program.
fn parse_head(path: &str, fd: usize, size: u64, len: u64) -> Result<elf::Image, Errno> {
    let mut head = alloc::vec![0u8; size.min(len) as usize];
    match files_guest::with_fs(|fs| fs.pread(fd, &mut head, 0)) {
        // Shorter than its size said (truncated meanwhile): what there is.
        Ok(n) => head.truncate(n),
        Err(_) => cannot_start(path, "reading the headers", errno::EIO),
    }
    elf::parse(&head, size, layout::PROGRAM_MIN, layout::MMAP_TOP)
}

fn fs_why(e: sawmill_fsclient::Error) -> &'static str {
    match e {
        sawmill_fsclient::Error::NotFound => "no such file",
        sawmill_fsclient::Error::Denied => "permission denied",
        _ => "cannot open",
    }
}

// ---------------------------------------------------------------------------------------------
// Entry from trap reflection.

/// `Utcb::user` word holding the thread's library stack top; the entry stub reads it at
/// `frame - 8`, so it must be the last word before `Utcb::foreign`.
pub(crate) const SYSCALL_STACK_WORD: usize = 15;
const _: () = assert!(
    core::mem::offset_of!(Utcb, foreign) - core::mem::offset_of!(Utcb, user)
        == (SYSCALL_STACK_WORD + 1) * 8
);

extern "C" {
    fn linux_syscall_entry();
}

// The kernel resumes the thread here with rdi = &Utcb::foreign (the program's registers at its
// `syscall`) and rsp below the program's red zone. We switch to the library's own stack at
// once (nothing is written on the program's), serve the call, and return by restoring the
// registers from the frame except rcx and r11, which `syscall` clobbers (rcx = rip, r11 =
// rflags, as Linux leaves them), rflags restored too. After `serve` (an `extern "C"`
// function) rbx, rbp and r12-r15 still hold the program's values, and a call that changes
// them in the frame (a handler entered, `rt_sigreturn`) resumes through `linux_resume_full`
// instead: so this return loads only the others. `linux_syscall_return` (a frame built
// elsewhere: a fork child, a new thread, the threaded entry) restores every register.
core::arch::global_asm!(
    r#"
.section .text.linux_syscall_entry, "ax"
.global linux_syscall_entry
linux_syscall_entry:
    mov rsp, [rdi - 8]
    cld
    call {serve}
    mov rdi, rax
    push qword ptr [rdi + 17*8]
    popfq
    mov rdx, [rdi + 3*8]
    mov rsi, [rdi + 4*8]
    mov r8, [rdi + 8*8]
    mov r9, [rdi + 9*8]
    mov r10, [rdi + 10*8]
    mov rax, [rdi + 0*8]
    mov rcx, [rdi + 16*8]
    mov r11, [rdi + 17*8]
    mov rsp, [rdi + 7*8]
    mov rdi, [rdi + 5*8]
    jmp rcx
.global linux_syscall_return
linux_syscall_return:
    mov rdi, rax
    push qword ptr [rdi + 17*8]
    popfq
    mov rbx, [rdi + 1*8]
    mov rdx, [rdi + 3*8]
    mov rsi, [rdi + 4*8]
    mov rbp, [rdi + 6*8]
    mov r8, [rdi + 8*8]
    mov r9, [rdi + 9*8]
    mov r10, [rdi + 10*8]
    mov r12, [rdi + 12*8]
    mov r13, [rdi + 13*8]
    mov r14, [rdi + 14*8]
    mov r15, [rdi + 15*8]
    mov rax, [rdi + 0*8]
    mov rcx, [rdi + 16*8]
    mov r11, [rdi + 17*8]
    mov rsp, [rdi + 7*8]
    mov rdi, [rdi + 5*8]
    jmp rcx
"#,
    serve = sym serve_reflected
);

/// Serves one reflected system call; returns the frame to resume from (its `rax` set). Every
/// return is a delivery point for signals (`signal_guest::on_return`, which resumes the
/// program itself when a handler is entered or `rt_sigreturn` ran).
pub(crate) extern "C" fn serve_reflected(frame: *mut ForeignFrame) -> *mut ForeignFrame {
    // SAFETY: the kernel passes this thread's UTCB frame, valid while the thread lives; only
    // the number and the six argument registers are read (not the whole frame: this is the
    // path of every call), before the call can touch the UTCB.
    let (n, args) = unsafe {
        let f = &*frame;
        (f.rax, [f.rdi, f.rsi, f.rdx, f.r10, f.r8, f.r9])
    };
    let rax = match syscall(n, args, frame) {
        Ok(v) => v,
        Err(e) => e.ret() as u64,
    };
    if signal_guest::attention() {
        signal_guest::on_return(frame, n, rax);
    } else {
        // SAFETY: as above.
        unsafe { (*frame).rax = rax };
    }
    frame
}

// ---------------------------------------------------------------------------------------------
// The dispatcher.

fn syscall(n: u64, a: [u64; 6], frame: *mut ForeignFrame) -> SysResult {
    if process().trace {
        return syscall_traced(n, a, frame);
    }
    serve_call(n, a, frame)
}

/// The call itself: the core's calls, then the files layer's, then the signal calls.
#[inline(always)]
fn serve_call(n: u64, a: [u64; 6], frame: *mut ForeignFrame) -> SysResult {
    match core_call(n, a) {
        Some(r) => r,
        None => files_guest::dispatch(n, a, &GuestUser)
            .or_else(|| signal_guest::dispatch(n, a, frame))
            .unwrap_or_else(|| {
                unknown(n);
                Err(errno::ENOSYS)
            }),
    }
}

/// A call with tracing on (out of the common path: every call pays only the flag test).
#[inline(never)]
#[cold]
fn syscall_traced(n: u64, a: [u64; 6], frame: *mut ForeignFrame) -> SysResult {
    let pid = process().pid;
    if n == nr::EXIT || n == nr::EXIT_GROUP {
        println!(
            "[{}] {}({}) = ?",
            pid,
            nr::name(n).unwrap_or("exit"),
            a[0] as i32
        );
    }
    let r = serve_call(n, a, frame);
    println!("[{}] {}", pid, trace::line(n, &a, r));
    r
}

/// Logs a call no one serves, once per number, by name.
fn unknown(n: u64) {
    let p = process();
    let (w, b) = ((n / 64) as usize, n % 64);
    if w < p.logged.len() {
        if p.logged[w] >> b & 1 != 0 {
            return;
        }
        p.logged[w] |= 1 << b;
    }
    match nr::name(n) {
        Some(name) => println!("linux: unimplemented system call {} ({}): ENOSYS", name, n),
        None => println!("linux: unknown system call {}: ENOSYS", n),
    }
}

/// The calls the core serves (memory, process, time); None for the others.
#[inline(always)]
fn core_call(n: u64, a: [u64; 6]) -> Option<SysResult> {
    let p = process();
    let u = &GuestUser;
    Some(match n {
        // The hot file calls' common cases, with the memory access inlined (None: the file
        // layer's general path serves them).
        nr::READ => return files_guest::read_fast(a[0], a[1], a[2], u),
        nr::WRITE => return files_guest::write_fast(a[0], a[1], a[2], u),
        nr::PWRITE64 => return files_guest::pwrite_fast(a[0], a[1], a[2], a[3], u),
        // The calls that change the program's mappings drop the range check's cached region.
        nr::BRK => {
            forget_region();
            Ok(sys_brk(a[0]))
        }
        nr::MMAP => {
            forget_region();
            sys_mmap(a)
        }
        nr::MUNMAP => {
            forget_region();
            mm::range_args(a[0], a[1])
                .and_then(|len| rm::detach_range(a[0], len).map_err(rm_errno))
                .map(|_| 0)
        }
        nr::MPROTECT => {
            forget_region();
            sys_mprotect(a[0], a[1], a[2])
        }
        nr::MREMAP => {
            forget_region();
            sys_mremap(a)
        }
        nr::MADVISE => {
            forget_region();
            sys_madvise(a[0], a[1], a[2])
        }
        nr::ARCH_PRCTL => sys_arch_prctl(a[0], a[1]),
        nr::SET_TID_ADDRESS => thread_guest::set_tid_address(a[0]),
        nr::SET_ROBUST_LIST => {
            if a[1] == 24 {
                Ok(0)
            } else {
                Err(errno::EINVAL)
            }
        }
        // glibc and musl run without restartable sequences when the kernel has none.
        nr::RSEQ => Err(errno::ENOSYS),
        nr::PRLIMIT64 => {
            if a[0] != 0 && a[0] != p.pid {
                Err(errno::ESRCH)
            } else {
                rlimit(a[1], a[3])
            }
        }
        nr::GETRLIMIT => rlimit(a[0], a[1]),
        nr::GETRANDOM => sys_getrandom(a[0], a[1], a[2]),
        nr::GETPID => Ok(p.pid),
        nr::GETTID => thread_guest::gettid(),
        nr::FUTEX => thread_guest::sys_futex(a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::SCHED_GETAFFINITY => thread_guest::sched_getaffinity(a[0], a[1], a[2]),
        nr::GET_ROBUST_LIST => thread_guest::get_robust_list(a[0], a[1], a[2]),
        nr::GETPPID => Ok(parent_pid()),
        nr::GETUID => Ok(p.ids[0] as u64),
        nr::GETEUID => Ok(p.ids[1] as u64),
        nr::GETGID => Ok(p.ids[2] as u64),
        nr::GETEGID => Ok(p.ids[3] as u64),
        nr::GETGROUPS => {
            if (a[0] as i32) < 0 {
                Err(errno::EINVAL)
            } else {
                Ok(0)
            }
        }
        nr::UNAME => sys_uname(a[0]),
        nr::SYSINFO => sys_sysinfo(a[0]),
        nr::CLOCK_GETTIME => clock_now(a[0]).and_then(|ns| put_timespec(a[1], ns)),
        nr::CLOCK_GETRES => clock_now(a[0]).and_then(|_| {
            if a[1] != 0 {
                put_timespec(a[1], 1)
            } else {
                Ok(0)
            }
        }),
        nr::GETTIMEOFDAY => {
            let ns = realtime_ns();
            if a[0] != 0 {
                let mut b = [0u8; 16];
                b[0..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
                b[8..16].copy_from_slice(&((ns % 1_000_000_000) / 1000).to_le_bytes());
                if let Err(e) = u.write(a[0], &b) {
                    return Some(Err(e));
                }
            }
            if a[1] != 0 {
                if let Err(e) = u.write(a[1], &[0u8; 8]) {
                    return Some(Err(e));
                }
            }
            Ok(0)
        }
        nr::TIME => {
            let s = realtime_ns() / 1_000_000_000;
            if a[0] != 0 {
                if let Err(e) = u.write(a[0], &s.to_le_bytes()) {
                    return Some(Err(e));
                }
            }
            Ok(s)
        }
        nr::NANOSLEEP => sleep(CLOCK_MONOTONIC, 0, a[0], a[1]),
        nr::CLOCK_NANOSLEEP => sleep(a[0], a[1], a[2], a[3]),
        nr::SCHED_YIELD => thread_guest::sched_yield(),
        nr::PRCTL => sys_prctl(a[0], a[1]),
        nr::EXIT => thread_guest::exit_thread(a[0] as u32),
        nr::EXIT_GROUP => exit_process(a[0] as u32),
        nr::EXECVE => sys_execve(a[0], a[1], a[2]),
        nr::FORK => fork_guest::fork(procs::CloneKind::Fork, 0, 0, 0, 0),
        nr::VFORK => fork_guest::fork(
            procs::CloneKind::Vfork,
            procs::CLONE_VM | procs::CLONE_VFORK,
            0,
            0,
            0,
        ),
        // clone(flags, stack, parent_tid, child_tid, tls)
        nr::CLONE => match procs::clone_kind(a[0]) {
            Ok(procs::CloneKind::Thread) => {
                thread_guest::clone_thread(a[0], a[1], a[2], a[3], a[4])
            }
            Ok(k) => fork_guest::fork(k, a[0], a[1], a[2], a[3]),
            Err(e) => {
                unknown(n);
                Err(e)
            }
        },
        nr::CLONE3 => Err(errno::ENOSYS),
        nr::WAIT4 => fork_guest::wait4(a[0], a[1], a[2], a[3]),
        nr::WAITID => fork_guest::waitid(a[0], a[1], a[2], a[3], a[4]),
        nr::SETPGID => fork_guest::setpgid(a[0], a[1]),
        nr::GETPGID => fork_guest::getpgid(a[0]),
        nr::GETPGRP => fork_guest::getpgid(0),
        nr::SETSID => fork_guest::setsid(),
        nr::GETSID => fork_guest::getsid(a[0]),
        nr::REBOOT => sys_reboot(p.ids[1], a[0], a[1], a[2]),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Memory.

fn sys_brk(want: u64) -> u64 {
    let p = process();
    let Some((step, next)) = p.brk.plan(want) else {
        return p.brk.cur;
    };
    let ok = match step {
        BrkStep::Nothing => true,
        BrkStep::Grow { from, to } => {
            anon_room(to - from).is_ok()
                && attach_anonymous(from, to - from, rm::READ | rm::WRITE).is_ok()
        }
        BrkStep::Shrink { from, to } => rm::detach_range(from, to - from).is_ok(),
    };
    if ok {
        p.brk = next;
    }
    p.brk.cur
}

/// The program's used ranges, for placement: every region (the file client's windows lie above
/// the program's range, `layout::LIB_FILE_WINDOWS`).
fn used_ranges() -> Vec<(u64, u64)> {
    rm::ranges()
}

fn sys_mmap(a: [u64; 6]) -> SysResult {
    let req = mm::mmap_args(a[0], a[1], a[2], a[3], a[4], a[5])?;
    let len = req.len;
    let at = match req.place {
        Place::Replace(at) => at,
        Place::NoReplace(at) => {
            if used_ranges().iter().any(|&(s, e)| at < e && s < at + len) {
                return Err(errno::EEXIST);
            }
            at
        }
        Place::Anywhere(hint) => mm::place(
            &used_ranges(),
            len,
            hint,
            layout::PROGRAM_MIN,
            layout::MMAP_TOP,
        )
        .ok_or(errno::ENOMEM)?,
    };
    let rights = rm_rights(req.prot);
    // A reservation without access (PROT_NONE) promises no memory.
    if req.fd.is_none() && req.prot != 0 {
        anon_room(len)?;
    }
    let (ds, fl, offset) = match req.fd {
        None if req.shared => shared_anonymous(len, rights)?,
        None => (anonymous(len)?, rights | rm::OWNED, 0),
        Some(fd) => {
            let src = files_guest::mmap_source(fd)?;
            if !src.readable || (req.shared && req.prot & mm::PROT_WRITE != 0 && !src.writable) {
                return Err(errno::EACCES);
            }
            let cow = if req.shared { 0 } else { rm::COW };
            (src.dataspace, rights | cow, req.offset)
        }
    };
    if let Place::Replace(at) = req.place {
        rm::detach_range(at, len).map_err(rm_errno)?;
    }
    match rm::attach(ds, offset, len, Some(at), fl) {
        Ok(a) => {
            if req.populate {
                let _ = rm::populate(a, len, false);
            }
            Ok(a)
        }
        Err(e) => {
            if fl & (rm::OWNED | rm::SHARED) != 0 {
                let _ = sawmill_interfaces::dataspace::Client::new(ds).free();
                let _ = sys::cap_delete(ds);
            }
            Err(rm_errno(e))
        }
    }
}

fn sys_mprotect(addr: u64, len: u64, prot: u64) -> SysResult {
    if prot & !(mm::PROT_READ | mm::PROT_WRITE | mm::PROT_EXEC) != 0 {
        return Err(errno::EINVAL);
    }
    let len = mm::range_args(addr, len)?;
    rm::protect(addr, len, rm_rights(prot))
        .map(|_| 0)
        .map_err(|e| match e {
            rm::RmError::NotFound => errno::ENOMEM,
            e => rm_errno(e),
        })
}

const MREMAP_DONTUNMAP: u64 = 4;

fn sys_mremap(a: [u64; 6]) -> SysResult {
    let (old, old_len, new_len, flags, new_addr) = (a[0], a[1], a[2], a[3], a[4]);
    if !old.is_multiple_of(PAGE)
        || flags & !(mm::MREMAP_MAYMOVE | mm::MREMAP_FIXED | MREMAP_DONTUNMAP) != 0
        || (flags & mm::MREMAP_FIXED != 0 && flags & mm::MREMAP_MAYMOVE == 0)
    {
        return Err(errno::EINVAL);
    }
    if flags & (mm::MREMAP_FIXED | MREMAP_DONTUNMAP) != 0 {
        // Not yet: moving to a chosen address, keeping the old mapping.
        let _ = new_addr;
        return Err(errno::EINVAL);
    }
    let old_len = mm::page_up(old_len).ok_or(errno::EINVAL)?;
    let new_len = mm::page_up(new_len).ok_or(errno::EINVAL)?;
    if new_len == 0 || old_len == 0 {
        return Err(errno::EINVAL);
    }
    if !mm::program_range(old, old_len) || !rm::covered(old, old_len, 0) {
        return Err(errno::EFAULT);
    }
    if new_len <= old_len {
        if new_len < old_len {
            rm::detach_range(old + new_len, old_len - new_len).map_err(rm_errno)?;
        }
        return Ok(old);
    }
    let extra = new_len - old_len;
    // Growth of anonymous memory is promised before anything moves.
    let grows = rm::region_info(old + old_len - 1).ok_or(errno::EFAULT)?;
    if grows.flags & (rm::OWNED | rm::SHARED) != 0 && grows.flags & rm::RIGHTS != 0 {
        anon_room(extra)?;
    }
    let tail_free = |at: u64| {
        mm::program_range(at + old_len, extra)
            && !used_ranges()
                .iter()
                .any(|&(s, e)| at + old_len < e && s < at + new_len)
    };
    let at = if tail_free(old) {
        old
    } else if flags & mm::MREMAP_MAYMOVE != 0 {
        let to = mm::place(
            &used_ranges(),
            new_len,
            0,
            layout::PROGRAM_MIN,
            layout::MMAP_TOP,
        )
        .ok_or(errno::ENOMEM)?;
        rm::relocate(old, old_len, to).map_err(rm_errno)?;
        to
    } else {
        return Err(errno::ENOMEM);
    };
    // Grow: the same source further on for a file mapping, fresh memory for anonymous.
    let last = rm::region_info(at + old_len - 1).ok_or(errno::EFAULT)?;
    let fl = last.flags;
    if fl & rm::OWNED != 0 {
        attach_anonymous(at + old_len, extra, fl & rm::RIGHTS)?;
    } else if fl & rm::SHARED != 0 {
        // Shared anonymous memory grows by memory of its own (shared with the children
        // forked from now on, not with those that share the first part).
        let (ds, sfl, off) = shared_anonymous(extra, fl & rm::RIGHTS)?;
        if let Err(e) = rm::attach(ds, off, extra, Some(at + old_len), sfl) {
            let _ = sawmill_interfaces::dataspace::Client::new(ds).free();
            let _ = sys::cap_delete(ds);
            return Err(rm_errno(e));
        }
    } else {
        let off = last.offset + (at + old_len - last.start);
        rm::attach(last.ds, off, extra, Some(at + old_len), fl).map_err(rm_errno)?;
    }
    Ok(at)
}

const MADV_DONTNEED: u64 = 4;

fn sys_madvise(addr: u64, len: u64, advice: u64) -> SysResult {
    if !addr.is_multiple_of(PAGE) {
        return Err(errno::EINVAL);
    }
    let len = mm::page_up(len).ok_or(errno::EINVAL)?;
    if len == 0 {
        return Ok(0);
    }
    if !mm::program_range(addr, len) {
        return Err(errno::EINVAL);
    }
    if advice != MADV_DONTNEED {
        return Ok(0);
    }
    if !rm::covered(addr, len, 0) {
        return Err(errno::ENOMEM);
    }
    // Private anonymous pages are discarded: the range gets fresh zero-filled memory.
    let mut p = addr;
    while p < addr + len {
        let r = rm::region_info(p).ok_or(errno::ENOMEM)?;
        let end = r.end.min(addr + len);
        if r.flags & rm::OWNED != 0 {
            rm::detach_range(p, end - p).map_err(rm_errno)?;
            attach_anonymous(p, end - p, r.flags & rm::RIGHTS)?;
        }
        p = end;
    }
    Ok(0)
}

// ---------------------------------------------------------------------------------------------
// Process.

const ARCH_SET_GS: u64 = 0x1001;
const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;

fn sys_arch_prctl(code: u64, addr: u64) -> SysResult {
    let p = process();
    match code {
        ARCH_SET_FS => {
            if addr >= layout::PROGRAM_END {
                return Err(errno::EPERM);
            }
            // GS stays the runtime's (it points at the thread's UTCB).
            let gs = sawmill_rt::utcb() as *const Utcb as u64;
            sys::set_tls(addr, gs).map_err(|_| errno::EPERM)?;
            p.fs_base = addr;
            Ok(0)
        }
        ARCH_GET_FS => GuestUser.write(addr, &p.fs_base.to_le_bytes()).map(|_| 0),
        ARCH_GET_GS => GuestUser.write(addr, &0u64.to_le_bytes()).map(|_| 0),
        // The program's GS base is the library's (the runtime's UTCB pointer).
        ARCH_SET_GS => Err(errno::EPERM),
        _ => Err(errno::EINVAL),
    }
}

const RLIM_INFINITY: u64 = u64::MAX;
const RLIMIT_STACK: u64 = 3;
const RLIMIT_NOFILE: u64 = 7;
const RLIM_NLIMITS: u64 = 16;

fn rlimit(resource: u64, old: u64) -> SysResult {
    if resource >= RLIM_NLIMITS {
        return Err(errno::EINVAL);
    }
    if old != 0 {
        let (cur, max) = match resource {
            RLIMIT_STACK => (layout::STACK_MAX, RLIM_INFINITY),
            RLIMIT_NOFILE => (1024, 4096),
            _ => (RLIM_INFINITY, RLIM_INFINITY),
        };
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&cur.to_le_bytes());
        b[8..16].copy_from_slice(&max.to_le_bytes());
        GuestUser.write(old, &b)?;
    }
    Ok(0)
}

fn sys_getrandom(buf: u64, len: u64, flags: u64) -> SysResult {
    random::check_flags(flags)?;
    let len = len.min(1 << 25);
    let mut chunk = [0u8; 256];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(256) as usize;
        process().rng.fill(&mut chunk[..n]);
        GuestUser.write(buf + done, &chunk[..n])?;
        done += n as u64;
    }
    Ok(len)
}

fn sys_uname(addr: u64) -> SysResult {
    let mut b = [0u8; 65 * 6];
    for (i, f) in [
        &b"Linux"[..],
        b"sawmill",
        b"6.1.0-sawmill",
        b"#1 SMP sawmill",
        b"x86_64",
        b"(none)",
    ]
    .iter()
    .enumerate()
    {
        b[i * 65..i * 65 + f.len()].copy_from_slice(f);
    }
    GuestUser.write(addr, &b).map(|_| 0)
}

/// `reboot(2)`: privilege (EPERM), then the magic numbers and the command; halt, power off
/// and restart go to proc, which stops the machine (this call does not return then).
fn sys_reboot(euid: u32, magic: u64, magic2: u64, cmd: u64) -> SysResult {
    if euid != 0 {
        return Err(errno::EPERM);
    }
    match procs::reboot_args(magic, magic2, cmd)? {
        procs::Reboot::CtrlAltDel => Ok(0),
        _ => ask_power_off(cmd),
    }
}

fn ask_power_off(cmd: u64) -> SysResult {
    let p = proc_cap().ok_or(errno::ENOSYS)?;
    proc::Client::new(p)
        .reboot(cmd as u32)
        .map(|_| 0)
        .map_err(|e| match e {
            sawmill_interfaces::rpc::Error::App(sawmill_interfaces::ProcError::NotPermitted) => {
                errno::EPERM
            }
            _ => errno::EIO,
        })
}

/// Pid 1 stops the machine for busybox's `poweroff`/`halt`/`reboot` signal
/// (`procs::init_power_command`); returns only if proc refused.
pub(crate) fn power_off(cmd: u64) {
    let _ = ask_power_off(cmd);
}

fn sys_sysinfo(addr: u64) -> SysResult {
    let mut b = [0u8; 112];
    let up = monotonic_ns() / 1_000_000_000;
    b[0..8].copy_from_slice(&up.to_le_bytes());
    // The machine's figures, in pages, as /proc/meminfo reports them (servers/procfs): all of
    // user RAM, and what the memory server has free.
    let free = rm::mem().and_then(|m| m.stats().ok()).map_or(0, |s| s.free);
    let total = sys::kernel_info(sawmill_abi::kinfo::USER_FRAMES)
        .unwrap_or(0)
        .max(free);
    b[32..40].copy_from_slice(&total.to_le_bytes());
    b[40..48].copy_from_slice(&free.to_le_bytes());
    b[80..82].copy_from_slice(&1u16.to_le_bytes());
    // mem_unit: the figures count pages.
    b[104..108].copy_from_slice(&(PAGE as u32).to_le_bytes());
    GuestUser.write(addr, &b).map(|_| 0)
}

const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;

fn sys_prctl(op: u64, arg: u64) -> SysResult {
    let p = process();
    match op {
        PR_SET_NAME => {
            let mut n = [0u8; 16];
            let s = GuestUser.cstr(arg, 4096).or_else(|e| {
                // Linux copies at most 16 bytes; a longer string is cut, not refused.
                if e == errno::ENAMETOOLONG {
                    Ok(Vec::new())
                } else {
                    Err(e)
                }
            })?;
            let k = s.len().min(15);
            n[..k].copy_from_slice(&s[..k]);
            p.name = n;
            publish_name(&n);
            Ok(0)
        }
        PR_GET_NAME => GuestUser.write(arg, &p.name).map(|_| 0),
        _ => Err(errno::EINVAL),
    }
}

// ---------------------------------------------------------------------------------------------
// Time.

const CLOCK_REALTIME: u64 = 0;
const CLOCK_MONOTONIC: u64 = 1;
const TIMER_ABSTIME: u64 = 1;

fn tsc_ns(ticks: u64) -> u64 {
    let khz = process().clock.2;
    ((ticks as u128) * 1_000_000 / khz as u128) as u64
}

/// TSC ticks in `ns` nanoseconds.
pub(crate) fn ns_to_tsc(ns: u64) -> u64 {
    let khz = process().clock.2;
    ((ns as u128) * khz as u128 / 1_000_000) as u64
}

pub(crate) fn monotonic_ns() -> u64 {
    let t0 = process().clock.1;
    tsc_ns(sys::rdtsc().saturating_sub(t0))
}

fn realtime_ns() -> u64 {
    process().clock.0 * 1_000_000_000 + monotonic_ns()
}

/// The clock `id` now, in ns.
pub(crate) fn clock_ns(id: u64) -> u64 {
    clock_now(id).unwrap_or(0)
}

/// The clock `id` now, in ns.
fn clock_now(id: u64) -> Result<u64, Errno> {
    match id {
        // realtime, realtime_coarse
        CLOCK_REALTIME | 5 => Ok(realtime_ns()),
        // monotonic, process/thread cputime, monotonic_raw, monotonic_coarse, boottime
        1..=4 | 6 | 7 => Ok(monotonic_ns()),
        _ => Err(errno::EINVAL),
    }
}

fn put_timespec(addr: u64, ns: u64) -> SysResult {
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&(ns / 1_000_000_000).to_le_bytes());
    b[8..16].copy_from_slice(&(ns % 1_000_000_000).to_le_bytes());
    GuestUser.write(addr, &b).map(|_| 0)
}

/// Sleeps on clock `id` for (or, with TIMER_ABSTIME, until) the timespec at `req`: a timed
/// wait on the process's wake notification, ended early by a signal (then the time left goes
/// to `rem` for a relative sleep, and the call is interrupted: EINTR when a handler runs).
fn sleep(id: u64, flags: u64, req: u64, rem: u64) -> SysResult {
    let mut b = [0u8; 16];
    GuestUser.read(req, &mut b)?;
    let sec = i64::from_le_bytes(b[0..8].try_into().unwrap());
    let nsec = i64::from_le_bytes(b[8..16].try_into().unwrap());
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(errno::EINVAL);
    }
    if flags & !TIMER_ABSTIME != 0 {
        return Err(errno::EINVAL);
    }
    let want = (sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(nsec as u64);
    let now = clock_now(id)?;
    let deadline = if flags & TIMER_ABSTIME != 0 {
        want
    } else {
        now.saturating_add(want)
    };
    let tsc_deadline = sys::rdtsc().saturating_add(ns_to_tsc(deadline.saturating_sub(now)));
    match signal_guest::sleep_until(tsc_deadline) {
        Ok(()) => Ok(0),
        Err(e) => {
            if rem != 0 && flags & TIMER_ABSTIME == 0 {
                let left = deadline.saturating_sub(clock_now(id)?);
                put_timespec(rem, left)?;
            }
            Err(e)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// execve: proc builds the new image (a fresh task with a fresh library for the same pid).

/// Most bytes of a path `execve` reads (Linux's `PATH_MAX`).
const PATH_MAX: usize = 4096;
/// Most pointers of an `argv` or `envp` array read (the request's size limit bounds them anyway).
const MAX_EXEC_STRINGS: usize = 8192;

/// The NUL-terminated array of string pointers at `addr` (none if `addr` is 0, as Linux
/// accepts) as the request's next list, each string copied from the program's memory straight
/// into the request and checked to be UTF-8 there (the request carries strings); the whole
/// request stays within [`MAX_EXEC_REQUEST`] (E2BIG). Returns the list's length.
fn exec_strings(w: &mut RequestWriter, addr: u64) -> Result<usize, Errno> {
    let u = &GuestUser;
    w.begin_list();
    if addr == 0 {
        w.end_list();
        return Ok(0);
    }
    loop {
        let n = w.list_len();
        if n >= MAX_EXEC_STRINGS {
            return Err(errno::E2BIG);
        }
        let mut ptr = [0u8; 8];
        u.read(addr + 8 * n as u64, &mut ptr)?;
        let p = u64::from_le_bytes(ptr);
        if p == 0 {
            w.end_list();
            return Ok(n);
        }
        // Its 4-byte length is in the request already.
        let room = MAX_EXEC_REQUEST.saturating_sub(w.len() + 4);
        w.string(|out| u.cstr_into(p, room, out))
            .map_err(|e| match e {
                Some(errno::ENAMETOOLONG) => errno::E2BIG,
                Some(e) => e,
                None => errno::EINVAL,
            })?;
    }
}

/// `execve(path, argv, envp)`: the request goes to proc in message-sized pieces; on success
/// proc ends this task and the call never returns.
fn sys_execve(path: u64, argv: u64, envp: u64) -> SysResult {
    let u = &GuestUser;
    let mut program = String::from_utf8(u.cstr(path, PATH_MAX)?).map_err(|_| errno::ENOENT)?;
    if program.is_empty() {
        return Err(errno::ENOENT);
    }
    // Linux names the new program after the path given (before this rewrite).
    let new_name = base_name(program.as_bytes());
    if program == "/proc/self/exe" {
        // The program this process runs (busybox runs its applets so).
        program = env::find_all(env::KIND_LINUX_EXEC)
            .next()
            .and_then(|(_, b)| core::str::from_utf8(b).ok())
            .map(String::from)
            .unwrap_or(program);
    }
    let cwd = String::from_utf8(files_guest::cwd()).map_err(|_| errno::ENOENT)?;
    let mut w = RequestWriter::new(&program, &cwd);
    let strings = exec_strings(&mut w, argv)? + exec_strings(&mut w, envp)?;
    let bytes = w.finish();
    if bytes.len() > MAX_EXEC_REQUEST {
        return Err(errno::E2BIG);
    }
    let proc = proc::Client::new(proc_cap().ok_or(errno::ENOSYS)?);
    for chunk in bytes.chunks(EXEC_CHUNK) {
        proc.exec_data(chunk).map_err(proc_errno)?;
    }
    // Everything that can refuse the program is checked first, while this image can go on.
    proc.exec_check().map_err(proc_errno)?;
    // The ignored signals and the mask go to the new image (Linux's execve keeps them).
    signal_guest::before_exec(&proc);
    // The descriptors without close-on-exec, the working directory and umask go to the new
    // image.
    fork_guest::exec_handoff(fork_guest::inline_room(bytes.len(), strings))?;
    // The point of no return: the program's memory goes back to mem (the new image needs it;
    // proc ends this task once the new one runs). Should proc fail from here on, it ends this
    // process, as Linux does.
    forget_region();
    let _ = rm::detach_range_ending(
        layout::PROGRAM_MIN,
        layout::PROGRAM_END - layout::PROGRAM_MIN,
    );
    // The new image takes its name from the information page (published_name).
    publish_name(&new_name);
    if let Err(e) = proc.exec() {
        publish_name(&process().name);
        fork_guest::exec_failed();
        return Err(proc_errno(e));
    }
    Ok(0)
}

/// Linux's `comm` of a program run from `path`: its last component, at most 15 bytes.
fn base_name(path: &[u8]) -> [u8; 16] {
    let base = path.rsplit(|&c| c == b'/').next().unwrap_or(b"");
    let mut name = [0u8; 16];
    let n = base.len().min(15);
    name[..n].copy_from_slice(&base[..n]);
    name
}

/// The piece of an exec request one `proc.exec_data` message carries (its `bytes<480>`).
const EXEC_CHUNK: usize = 480;

fn proc_errno(e: sawmill_interfaces::rpc::Error<sawmill_interfaces::ProcError>) -> Errno {
    use sawmill_interfaces::rpc::Error as E;
    use sawmill_interfaces::ProcError as P;
    match e {
        E::App(P::NotFound) => errno::ENOENT,
        E::App(P::Denied) => errno::EACCES,
        E::App(P::NoExec) => errno::ENOEXEC,
        E::App(P::TooBig) => errno::E2BIG,
        E::App(P::NoMemory) => errno::ENOMEM,
        E::App(P::Io) => errno::EIO,
        _ => errno::EINVAL,
    }
}

// ---------------------------------------------------------------------------------------------
// The program's memory.

/// The program's memory, every range checked against the region manager's map (attached, with
/// the rights needed) before the library touches it: a bad pointer is EFAULT, never a fault in
/// the library.
pub struct GuestUser;

/// The program region the last range check found, `(start, end, flags)`: most calls touch
/// the same buffer again, and the check then costs a few comparisons instead of a search of
/// the region manager's map. Forgotten ([`forget_region`]) by every call that changes the
/// program's mappings.
static LAST_REGION: Single<(u64, u64, u32)> = Single(UnsafeCell::new((0, 0, 0)));

/// Drops the cached region (the mappings are about to change).
pub(crate) fn forget_region() {
    *LAST_REGION.get() = (0, 0, 0);
}

impl GuestUser {
    /// Appends the NUL-terminated string at `addr` (without its NUL) to `out`; `ENAMETOOLONG`
    /// if there is no NUL in the first `max` bytes. Scanned in place, a page at a time (the
    /// next page may not be mapped): only the string's own bytes are copied, never a
    /// page-sized buffer zeroed and scanned.
    fn cstr_into(&self, addr: u64, max: usize, out: &mut Vec<u8>) -> Result<(), Errno> {
        let mut a = addr;
        let mut left = max;
        while left > 0 {
            let n = ((PAGE - a % PAGE) as usize).min(left);
            Self::check(a, n as u64, rm::READ)?;
            // SAFETY: the range is attached readable (checked above), in the program's part of
            // the address space; the program's thread is stopped in this call.
            let src = unsafe { core::slice::from_raw_parts(a as *const u8, n) };
            if let Some(z) = src.iter().position(|&c| c == 0) {
                out.extend_from_slice(&src[..z]);
                return Ok(());
            }
            out.extend_from_slice(src);
            a += n as u64;
            left -= n;
        }
        Err(errno::ENAMETOOLONG)
    }

    #[inline(always)]
    fn check(addr: u64, len: u64, need: u32) -> Result<(), Errno> {
        if len == 0 {
            return Ok(());
        }
        if !mm::program_range(addr, len) {
            return Err(errno::EFAULT);
        }
        let end = addr + len; // no overflow: program_range checked it
        let last = LAST_REGION.get();
        if addr >= last.0 && end <= last.1 && last.2 & need == need {
            return Ok(());
        }
        match rm::region_info(addr) {
            Some(r) if end <= r.end && r.flags & need == need => {
                *last = (r.start, r.end, r.flags);
                Ok(())
            }
            // Across regions: the full check.
            Some(_) if rm::covered(addr, len, need) => Ok(()),
            _ => Err(errno::EFAULT),
        }
    }
}

impl User for GuestUser {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        Self::check(addr, buf.len() as u64, rm::READ)?;
        // SAFETY: the range is attached readable in this address space (checked above); the
        // region manager pages it in on touch.
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        Self::check(addr, data.len() as u64, rm::READ | rm::WRITE)?;
        // SAFETY: the range is attached writable (checked above).
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        Ok(())
    }

    #[inline(always)]
    fn with_out(
        &self,
        addr: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        if len == 0 {
            return fill(&mut []);
        }
        Self::check(addr, len as u64, rm::READ | rm::WRITE)?;
        // SAFETY: the range is attached writable (checked above) and lies in the program's part
        // of the address space, never the library's own memory; the program's thread is stopped
        // in this call, so nothing else uses the bytes while `fill` holds them (a read lands
        // straight in the program's buffer, no copy through the library).
        let dst = unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len) };
        Ok(fill(dst)?.min(len))
    }

    #[inline(always)]
    fn with_in(
        &self,
        addr: u64,
        len: usize,
        take: &mut dyn FnMut(&[u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        if len == 0 {
            return take(&[]);
        }
        Self::check(addr, len as u64, rm::READ)?;
        // SAFETY: the range is attached readable (checked above), in the program's part of the
        // address space; as for `with_out`, the program is stopped in this call.
        let src = unsafe { core::slice::from_raw_parts(addr as *const u8, len) };
        take(src)
    }

    fn cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
        let mut out = Vec::new();
        self.cstr_into(addr, max, &mut out)?;
        Ok(out)
    }
}
