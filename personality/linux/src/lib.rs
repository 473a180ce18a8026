//! The Linux personality as a library: everything about serving Linux system calls that can be
//! decided without the kernel (numbers and names, errno values, the user-memory contract, the
//! descriptor table and file layer, ELF and initial-stack planning), tested on the host. The
//! guest binary (`src/main.rs`) is this library plus the entry from trap reflection and the
//! calls to servers.
//!
//! It touches nothing but its own data: the program's memory only through a [`User`].
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod elf;
pub mod errno;
pub mod files;
pub mod futex;
pub mod handoff;
pub mod layout;
pub mod mm;
pub mod nr;
pub mod procs;
pub mod random;
pub mod signal;
pub mod trace;

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
    /// Lets `fill` write up to `len` bytes meant for the program's address `addr` and returns
    /// how many it wrote (a `read` straight into the program's buffer). An implementation that
    /// has checked the range may lend the program's memory itself; this default goes through a
    /// buffer. `EFAULT` if the range is not writable: before `fill` runs where the implementation
    /// can tell (this default finds out after).
    fn with_out(
        &self,
        addr: u64,
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let mut buf = alloc::vec![0u8; len];
        let n = fill(&mut buf)?.min(len);
        self.write(addr, &buf[..n])?;
        Ok(n)
    }
    /// Lets `take` read the program's `len` bytes at `addr` and returns what it returns (a
    /// `write` straight from the program's buffer); the default copies them first. `EFAULT`
    /// before `take` runs if the range is not readable.
    fn with_in(
        &self,
        addr: u64,
        len: usize,
        take: &mut dyn FnMut(&[u8]) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let mut buf = alloc::vec![0u8; len];
        self.read(addr, &mut buf)?;
        take(&buf)
    }
}
