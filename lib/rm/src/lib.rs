//! The region manager (RM), a library linked into every task that wants demand-paged memory.
//!
//! It keeps the task's region map (which dataspace is attached where, read-only, writable or
//! private copy-on-write) and runs a pager thread inside the task: the task's threads fault to
//! it, it asks the dataspace's manager (`dataspace.map`, interfaces/dataspace.idl) to map the page
//! straight at the faulting address, and resumes the thread. It also provides a heap backed by a
//! lazily populated anonymous dataspace of the memory server.
//!
//! It touches only its own task: its region map, the address ranges it manages, capability slots
//! it allocates, and the threads it is asked to page. See docs/memory.md.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod regions;

#[cfg(target_os = "none")]
mod pager;
#[cfg(target_os = "none")]
pub use pager::*;
