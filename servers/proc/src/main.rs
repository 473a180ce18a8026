//! `proc`, the process server: Linux processes' ids, parents, credentials and exit status. It
//! starts each process — the boot module of the Linux personality library (manifest `modules`),
//! mapped straight from the boot archive into a new task with the Linux layout
//! (`sawmill_linux::layout`), given the capabilities and environment records of the contract —
//! after checking that the program it is to run is a static x86-64 ELF executable. It serves
//! `proc` (interfaces/proc.idl) to the libraries, each call badged with its process's pid, and
//! receives the kernel's messages about the processes' threads (exceptions, unresolved faults,
//! exits) on the same endpoint under badges no process holds. When the first process ends it
//! prints `proc: init exited with status N` or `proc: init killed by signal S` on the debug
//! console and ends, so that root shuts the machine down.
//!
//! It touches its own task, the objects it creates from its factory (every process's factory,
//! task and thread), the pages of its pool (a `mem` dataspace processes are built from), the
//! files it checks through the VFS.
//! The bookkeeping is the library (`src/lib.rs`, host-tested).
#![cfg_attr(target_os = "none", no_std)]
#![cfg_attr(target_os = "none", no_main)]

#[cfg(target_os = "none")]
mod server;

#[cfg(not(target_os = "none"))]
fn main() {}
