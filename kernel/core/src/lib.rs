//! Kernel data structures that are pure logic: the capability space with its derivation tree
//! ([`cspace`]), the count of a watched badge's holders ([`senders`]), the mapping database
//! ([`mapdb`]), the heap allocator ([`heap`]), the reading of the kernel command line
//! ([`cmdline`]), the tags of a multiboot2 boot information block ([`multiboot2`]), the DMA pin
//! counts ([`pins`]), the list of a space's page-table frames ([`ptlist`]), which mappings a
//! task emptied for reuse keeps ([`reset`]), the timer queue ([`timers`]), the wall clock's
//! arithmetic ([`rtc`]), ACPI/DMAR parsing ([`acpi`]) and VT-d table logic ([`vtd`]). They know
//! nothing of hardware or of what a capability points to, so they run and are tested on the
//! host; the kernel instantiates them (with the ABI's limits, `sawmill_abi`).
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]
extern crate alloc;

pub mod acpi;
pub mod cmdline;
pub mod cspace;
pub mod heap;
pub mod mapdb;
pub mod multiboot2;
pub mod pins;
pub mod ptlist;
pub mod reset;
pub mod rtc;
pub mod senders;
pub mod timers;
pub mod vtd;
