//! The Linux personality as a library: everything about serving Linux system calls that can be
//! decided without the kernel (numbers and names, errno values, the user-memory contract, the
//! descriptor table and file layer, ELF and initial-stack planning), tested on the host. The
//! guest binary (`src/main.rs`) is this library plus the entry from trap reflection and the
//! calls to servers.
//!
//! It touches nothing but its own data: the program's memory only through a [`User`].
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod errno;
pub mod files;
pub mod layout;
pub mod nr;

pub use errno::Errno;

/// The result of a system call inside the library: a value for `rax`, or an error number.
pub type SysResult = Result<u64, Errno>;

/// The program's memory as the library may touch it. The library never dereferences a pointer
/// it got from the program: every access goes through this, and an address range that is not
/// mapped with the needed rights gives `EFAULT` instead of a fault in the library.
pub trait User {
    /// Copies `buf.len()` bytes from the program's address `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno>;
    /// Copies `data` to the program's address `addr`.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno>;
    /// The NUL-terminated string at `addr`, without its NUL; `ENAMETOOLONG` if there is no NUL
    /// in the first `max` bytes.
    fn cstr(&self, addr: u64, max: usize) -> Result<alloc::vec::Vec<u8>, Errno>;
}
