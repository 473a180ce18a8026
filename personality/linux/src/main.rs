//! The Linux personality's guest binary: the library of `src/lib.rs` as mapped into a Linux
//! process. It starts the program (reads its environment, starts the region manager, loads the
//! ELF and builds the initial stack, marks the main thread foreign and jumps in) and then serves
//! every `syscall` the program makes, entered by the kernel's trap reflection.
//!
//! The library is soft-float (`x86_64-unknown-none`): it never touches SSE or x87 registers, so
//! the program's floating-point and vector state passes through a system call untouched without
//! being saved (scenario `linux-core`, program `sse`, checks xmm0..xmm15 across calls).
//!
//! It touches the program's memory only through [`GuestUser`] (every range checked against the
//! region manager's map first), its own task's address space through the region manager, and
//! servers through the capabilities of its environment (`vfs`, `mem`, `proc`, `console`).
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod files_guest;
#[cfg(target_os = "none")]
mod fork_guest;
#[cfg(target_os = "none")]
mod guest;
#[cfg(target_os = "none")]
mod pipe_guest;
#[cfg(target_os = "none")]
mod signal_guest;
#[cfg(target_os = "none")]
mod socket_guest;
#[cfg(target_os = "none")]
mod thread_guest;
#[cfg(target_os = "none")]
mod tty_guest;
#[cfg(target_os = "none")]
mod unix_guest;

#[cfg(target_os = "none")]
sawmill_rt::entry!(main);

#[cfg(target_os = "none")]
fn main() {
    // Every fork child and exec'd image starts this library afresh: small blocks cut from
    // chunks rather than each asked of talc (lib/rt heap).
    sawmill_rt::heap_carve_small_blocks();
    guest::start()
}

#[cfg(not(target_os = "none"))]
fn main() {}
