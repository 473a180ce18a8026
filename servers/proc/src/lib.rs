//! The process server's logic, host-tested: the process table ([`table`]), what makes a file
//! runnable and how a program name is found ([`exec`]), what /proc is told ([`info`]) and how a CPU exception becomes a signal
//! ([`signal`]), the terminal's session and foreground group and job control ([`tty`]). The binary (`src/main.rs`)
//! adds the system calls, the file system and the server loop.
//!
//! It touches nothing but its own data.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod exec;
pub mod info;
pub mod signal;
pub mod table;
pub mod tty;
