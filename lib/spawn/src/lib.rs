//! Starting a program, as a library: root uses it for the servers of the manifest, and any task
//! holding a factory can use it to start a program of its own (scenario `spawn`).
//!
//! The caller describes the program ([`Program`]: kernel-memory quota, priority, heap and stack
//! sizes, environment, the capabilities to place by name, pager and exception handler) and
//! provides an [`ImageSource`] (the ELF, readable in the caller: root's boot archive, or a file's
//! dataspace attached through the region manager) and [`Resources`] (capability slots and fresh
//! pages of the caller). [`prepare`] then does the mechanics: a factory with the quota, the task
//! and its thread, the image (read-only pages wholly inside one segment mapped straight from the
//! source, the rest copied), the environment page, stack, heap and 2 MiB pages, the capability
//! table and the thread's UTCB, pager and handler; [`Child::start`] starts it. Errors are
//! returned; on an error everything made so far is released, so the quota returns to the
//! caller's factory.
//!
//! Which records and capabilities a program gets is the caller's decision; this crate only
//! places them. The planning (addresses, sizes, which pages map and which are copied, overlap
//! and bounds checks) is pure ([`plan`]) and host-tested.
//!
//! It touches only the caller's own task, the objects it creates from the caller's factory, and
//! the slots and pages the caller's [`Resources`] hand it.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod plan;

pub use plan::{Layout, Plan, Region, Sizes, SpawnError};

#[cfg(target_os = "none")]
mod pool;
#[cfg(target_os = "none")]
mod run;
#[cfg(target_os = "none")]
pub use pool::{MemPool, PoolError};
#[cfg(target_os = "none")]
pub use run::*;
