//! Kernel data structures that are pure logic: the capability space with its derivation tree
//! ([`cspace`]), the mapping database ([`mapdb`]) and the heap allocator ([`heap`]). They know nothing of hardware or of what a
//! capability points to, so they run and are tested on the host; the kernel instantiates them.
#![no_std]
extern crate alloc;

pub mod cspace;
pub mod heap;
pub mod mapdb;
