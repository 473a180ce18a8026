//! The /proc file system's logic, host-tested: the shape of the tree and its inode numbers
//! ([`tree`]) and each file's text in Linux's format ([`text`]). The binary (`src/main.rs`)
//! serves them as a PFS behind the VFS, with the figures it gathers from proc, mem, the kernel
//! and `cpuid`.
//!
//! It touches nothing but its own data.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod text;
pub mod tree;
