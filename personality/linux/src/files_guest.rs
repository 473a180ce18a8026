//! PLACEHOLDER (being built by the files layer): the guest side of the descriptor table, over
//! lib/fsclient and the console. The core (main.rs) calls exactly these functions.
#![allow(dead_code)]

use sawmill_linux::{Errno, SysResult, User};

/// What `mmap` of a descriptor maps: a dataspace capability slot of this task and its size.
pub struct MapSource {
    pub dataspace: u64,
    pub size: u64,
    pub readable: bool,
    pub writable: bool,
}

/// Sets up the descriptor table: 0, 1 and 2 on the console; `exe` is the program's path.
pub fn init(_exe: &str) {}

/// Serves the call if it is a file-system, descriptor or device call.
pub fn dispatch(_nr: u64, _args: [u64; 6], _user: &dyn User) -> Option<SysResult> {
    None
}

/// The dataspace behind descriptor `fd`, for `mmap`.
pub fn mmap_source(_fd: i32) -> Result<MapSource, Errno> {
    Err(sawmill_linux::errno::ENODEV)
}
