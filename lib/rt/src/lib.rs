//! The sawmill user runtime, linked into every server and test program.
//!
//! Provides the program entry, system-call wrappers ([`sys`]), IPC ([`ipc`]), the heap, printing
//! through the kernel debug console, the environment root wrote for this server (capability slots
//! by name, arguments; [`env`]) and threads ([`thread`]). It touches only its own task.
#![cfg_attr(not(test), no_std)]
// Host unit tests (the heap's classes) build the library without its entry and panic handler.
#![cfg_attr(test, allow(dead_code))]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

pub mod clock;
pub mod env;
pub mod heap;
pub mod ipc;
pub mod port;
pub mod sys;
pub mod thread;

use core::fmt;
pub use sawmill_abi as abi;

/// Fixed addresses of a server's address space, agreed between root and the runtime.
pub mod layout {
    /// The environment page (read-only).
    pub const ENV: u64 = 0x1000_0000;
    /// Start of the heap.
    pub const HEAP: u64 = 0x2000_0000;
    /// Top of the main thread's stack.
    pub const STACK_TOP: u64 = 0x7000_0000;
    pub const STACK_SIZE: u64 = 64 * 1024;
    /// UTCB of thread `i` is at `UTCB_BASE + i * 4096`; thread 0 is the main thread.
    pub const UTCB_BASE: u64 = 0x7100_0000;
    /// Where root maps the 2 MiB pages a manifest's `huge_pages` asks for.
    pub const HUGE: u64 = 0x4000_0000;
    pub const UTCB_MAX: u64 = 256;
}

/// Well-known capability slots every server finds filled: the ones the runtime itself needs
/// (system calls on its own task and thread, its factory, fault handlers, console, IRQ
/// notification). Every other capability is found by name (`env::cap`).
pub mod slots {
    pub const TASK: u64 = 0;
    pub const THREAD: u64 = 1;
    /// Kernel-memory factory (only if the manifest gives `kmem_kb`).
    pub const FACTORY: u64 = 2;
    /// Root's endpoint for faults, exceptions and exits of this server (send only, badged).
    pub const PAGER: u64 = 3;
    /// Notification that interrupt lines signal (only if the manifest gives `irqs`).
    pub const IRQ_NOTIFY: u64 = 4;
    /// Root's endpoint for faults and exceptions of threads the server starts itself (their
    /// normal exit does not end the server).
    pub const THREAD_HANDLER: u64 = 5;
    /// The kernel debug console (unless the manifest says `console = false`): `println!`.
    pub const CONSOLE: u64 = 6;
    /// First slot root fills with named capabilities. Only root and the runtime's slot allocator
    /// use the number: programs find named capabilities with `env::cap` (or `env::served`) and
    /// take fresh slots from `thread::alloc_slot`.
    pub const FIRST_NAMED: u64 = 8;
}

/// The calling thread's UTCB.
#[inline(always)]
pub fn utcb() -> &'static mut abi::Utcb {
    let p: u64;
    // SAFETY: the kernel points GS at the thread's UTCB, whose first user word holds its own
    // address; the UTCB page stays mapped for the thread's lifetime.
    unsafe {
        core::arch::asm!("mov {}, gs:[{}]", out(reg) p, const core::mem::offset_of!(abi::Utcb, user), options(nostack, readonly, preserves_flags));
        &mut *(p as *mut abi::Utcb)
    }
}

/// Writes to the kernel debug console.
pub fn write_bytes(b: &[u8]) {
    for chunk in b.chunks(4096) {
        let _ = sys::debug_write(chunk);
    }
}

/// Formats into a stack buffer so that one `println!` is one kernel call (lines of concurrent
/// programs do not interleave mid-line).
pub struct LineBuf {
    buf: [u8; 512],
    len: usize,
}

impl LineBuf {
    pub const fn new() -> Self {
        LineBuf {
            buf: [0; 512],
            len: 0,
        }
    }
    pub fn flush(&mut self) {
        write_bytes(&self.buf[..self.len]);
        self.len = 0;
    }
}

impl Default for LineBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                self.flush();
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

#[macro_export]
macro_rules! print {
    ($($t:tt)*) => {{
        use core::fmt::Write;
        let mut b = $crate::LineBuf::new();
        let _ = write!(b, $($t)*);
        b.flush();
    }};
}

#[macro_export]
macro_rules! println {
    ($($t:tt)*) => {{
        use core::fmt::Write;
        let mut b = $crate::LineBuf::new();
        let _ = writeln!(b, $($t)*);
        b.flush();
    }};
}

/// Ends the calling thread with `code`; root sees the code in the EXIT message.
pub fn exit(code: u64) -> ! {
    sys::thread_exit(code)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("PANIC in {}: {}", env::name(), info);
    exit(0xdead)
}

// ---- heap ------------------------------------------------------------------------------------

#[cfg_attr(not(test), global_allocator)]
static ALLOCATOR: heap::Heap = heap::Heap::new();

/// Switches the heap to carving small blocks: for a program that starts afresh for every
/// process (see [`heap`]).
pub fn heap_carve_small_blocks() {
    ALLOCATOR.carve_small_blocks();
}

/// Gives `[base, base+size)` to the heap.
///
/// # Safety
/// The range must be mapped read-write in this task and used for nothing else, for good.
pub unsafe fn heap_add(base: u64, size: u64) {
    if size > 0 {
        // SAFETY: the caller's promise: the range is ours alone, mapped read-write, for good.
        let _ = unsafe {
            ALLOCATOR
                .talc
                .lock()
                .claim(talc::Span::from_base_size(base as *mut u8, size as usize))
        };
    }
}

/// Sets `[base, base+size)` aside for the heap, given to it only when it runs out (see
/// [`heap::Reserve`]); a later call replaces a span not yet taken.
///
/// # Safety
/// As [`heap_add`]'s: the range must be mapped read-write in this task (it may be paged on
/// demand) and used for nothing else, for good.
pub unsafe fn heap_reserve(base: u64, size: u64) {
    if size > 0 {
        ALLOCATOR.talc.lock().oom_handler.span = Some((base as usize, size as usize));
    }
}

/// Defines the program's entry: `sawmill_rt::entry!(main);` with `fn main()`.
#[macro_export]
macro_rules! entry {
    ($f:path) => {
        #[no_mangle]
        extern "Rust" fn sawmill_main() {
            $f()
        }
    };
}

extern "Rust" {
    fn sawmill_main();
}

/// First instruction of every program: root starts the main thread here with a 16-byte aligned
/// stack.
#[cfg(not(test))]
#[no_mangle]
#[unsafe(naked)]
pub extern "C" fn _start() -> ! {
    core::arch::naked_asm!("and rsp, -16", "call {}", "ud2", sym rt_start)
}

/// `env` is the address of the environment page (root starts servers with it) or 0 for the
/// root task itself, which has none and sets up its own heap.
extern "C" fn rt_start(env: u64) -> ! {
    if env::set_present(env) {
        let (base, size) = env::heap();
        // SAFETY: root mapped the heap read-write for this task alone.
        unsafe { heap_add(base, size) };
    }
    thread::init_main();
    // SAFETY: the program defines `sawmill_main` through `entry!`.
    unsafe { sawmill_main() };
    exit(0)
}
