//! Where things live in a Linux process's address space.
//!
//! The program (its ELF, `brk`, its `mmap`s and its stack) gets everything below
//! [`PROGRAM_END`] except the library's code zone `[LIB_BASE, LIB_END)`. Guest code is built
//! for the `kernel` code model (`x86_64-unknown-none`, whose precompiled `core` uses 32-bit
//! sign-extended addresses), so the library's image, environment page, heap, stacks and UTCBs
//! must sit below 2 GiB: they take the top quarter of it, far above a static binary's load
//! address (0x400000) and its `brk`. The region manager's own attachments (file windows,
//! buffers) are data, reached through pointers, and go high, above the program's range. The
//! program's `mmap(MAP_FIXED)`, `brk` and `mremap` into either library range are refused. The
//! process server starts the library with these addresses (`lib/spawn` `Layout`), and the
//! kernel reflects every `syscall` executed outside `[LIB_BASE, LIB_END)` to the library.

/// End of the program's part of the address space (64 TiB, far above anything a static binary
/// needs; Linux's own limit is 128 TiB).
pub const PROGRAM_END: u64 = 0x0000_4000_0000_0000;
/// Lowest address the program may map (Linux's default `vm.mmap_min_addr`).
pub const PROGRAM_MIN: u64 = 0x1_0000;
/// Top of the program's main stack (a guard page above it stays unmapped).
pub const STACK_TOP: u64 = PROGRAM_END - 0x1000;
/// Most the main stack grows (Linux's default `RLIMIT_STACK`).
pub const STACK_MAX: u64 = 8 << 20;
/// `mmap` without an address places mappings top-down from here.
pub const MMAP_TOP: u64 = STACK_TOP - STACK_MAX - (1 << 30);

/// The library's code zone (below 2 GiB: see above). `brk` stops below it.
pub const LIB_BASE: u64 = 0x6000_0000;
pub const LIB_END: u64 = 0x8000_0000;
/// The library's image is linked here (`build.rs`).
pub const LIB_IMAGE: u64 = LIB_BASE;
/// The library's environment page, heap, stack top, UTCBs and 2 MiB pages (`lib/spawn`
/// `Layout`).
pub const LIB_ENV: u64 = 0x7000_0000;
/// The process information page proc maps (`sawmill_proc_api::INFO_PPID`...).
pub const LIB_INFO: u64 = 0x7008_0000;
pub const LIB_HEAP: u64 = 0x7010_0000;
pub const LIB_STACK_TOP: u64 = 0x7800_0000;
/// The library's stack below [`LIB_STACK_TOP`], mapped before it starts (proc, `lib/spawn`
/// `Sizes::stack_bytes`) and kept with the task when proc makes it again for another process
/// (only its written pages are zeroed): the start's part on top, then the main thread's stack
/// for the program's system calls.
pub const LIB_STACK_BYTES: u64 = LIB_START_STACK + LIB_SYSCALL_STACK;
/// What the library's start runs on (the deepest seen over the Linux tests: 13 KiB, a fork
/// child's; 5.5 KiB a new program's).
pub const LIB_START_STACK: u64 = 32 * 1024;
/// The main thread's stack for serving the program's system calls. Taken from the heap, as
/// other threads' are, it did not fit the small heap proc maps: it came from the demand-paged
/// one, two page faults (~5k instructions) of every process.
pub const LIB_SYSCALL_STACK: u64 = 64 * 1024;
/// Top of that stack (it grows down from here), below the start's part: the start is still
/// running on its own when the thread turns foreign and the stack is named.
pub const LIB_SYSCALL_STACK_TOP: u64 = LIB_STACK_TOP - LIB_START_STACK;
pub const LIB_UTCB: u64 = 0x7810_0000;
pub const LIB_HUGE: u64 = 0x7a00_0000;
/// Most the library's demand-paged heap grows (`lib/rm` `init_heap`, placed among the region
/// manager's own attachments); proc maps only a small heap to start with (`lib_heap_kb`).
pub const LIB_HEAP_DEMAND: u64 = 64 << 20;
/// The least of it the library settles for (halving from [`LIB_HEAP_DEMAND`] on a small system).
pub const LIB_HEAP_DEMAND_MIN: u64 = 4 << 20;
/// The region manager places the library's own attachments (buffers, the program's ELF while
/// loading) here, up to the file client's windows.
pub const LIB_RM_BASE: u64 = 0x0000_5000_0000_0000;
pub const LIB_RM_END: u64 = 0x0000_6000_0000_0000;
/// The shared offset page of a family of processes (file offsets that `fork` shares), between
/// the program's range and the region manager's own attachments.
pub const LIB_OFFSETS: u64 = PROGRAM_END + 0x1000_0000;
/// lib/fsclient's per-file windows (cache pages mapped for `read`) and write buffers, in
/// `[LIB_FILE_WINDOWS, LIB_RM_END)` (`sawmill_fsclient::WINDOWS_SPAN` of it).
pub const LIB_FILE_WINDOWS: u64 = 0x0000_5f00_0000_0000;

const _: () = assert!(STACK_TOP < PROGRAM_END && MMAP_TOP > LIB_END);
const _: () = assert!(PROGRAM_END <= LIB_RM_BASE && LIB_END <= 0x8000_0000);
const _: () = assert!(LIB_RM_BASE < LIB_FILE_WINDOWS && LIB_FILE_WINDOWS < LIB_RM_END);
const _: () = assert!(LIB_OFFSETS >= PROGRAM_END && LIB_OFFSETS + 0x1000 <= LIB_RM_BASE);
const _: () = assert!(LIB_ENV > LIB_IMAGE && LIB_HEAP > LIB_ENV && LIB_STACK_TOP > LIB_HEAP);
const _: () = assert!(LIB_STACK_TOP - LIB_STACK_BYTES > LIB_HEAP + (64 << 20));
const _: () = assert!(LIB_INFO > LIB_ENV && LIB_INFO < LIB_HEAP);
const _: () = assert!(LIB_UTCB > LIB_STACK_TOP && LIB_HUGE > LIB_UTCB && LIB_HUGE < LIB_END);
