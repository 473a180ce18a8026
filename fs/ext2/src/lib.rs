//! sawmill's ext2 engine: a `no_std` + `alloc` library over a tiny byte-addressed
//! [`BlockDevice`] trait, so the same code runs in the PFS server and in host tests.
//!
//! Coverage: revision 0 and 1, block sizes 1024–4096, any power-of-two inode size,
//! sparse_super, large_file, filetype, resize_inode (left intact), htree directories (read
//! linearly; the index flag is cleared when we modify one), direct to triple-indirect blocks,
//! sparse files, fast/slow symlinks, device nodes, FIFOs and sockets.
//!
//! Robustness rule: every value read from the image is untrusted. All arithmetic on it is
//! checked, every loop is bounded by the geometry (itself checked against the device size), and
//! a bad image yields [`Error::Corrupt`] rather than a panic.
//!
//! Crash ordering: allocations are recorded in the bitmaps and counters before anything points
//! at them, data before the pointers to it, and directory entries are removed before the inode
//! and blocks are released, so a crash between writes leaves only leaks or link-count excesses
//! that e2fsck repairs.
#![no_std]
extern crate alloc;

mod check;
mod fs;
mod layout;

pub use check::CheckReport;
pub use fs::{DirEntry, FileKind, Fs, SetAttr, Stat, StatFs, StatMore};

use core::fmt;

/// Error reported by a [`BlockDevice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevError;

/// Byte-addressed storage under the file system. Reads beyond `size()` must fail.
pub trait BlockDevice {
    /// Size of the device in bytes.
    fn size(&self) -> u64;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> core::result::Result<(), DevError>;
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> core::result::Result<(), DevError>;
    fn flush(&mut self) -> core::result::Result<(), DevError> {
        Ok(())
    }
    /// Hands `f` the `len` bytes at `offset`. By default they are read into `scratch` (at least
    /// `len` long); a device that holds the data in memory (the PFS's cache) may lend them in
    /// place, which spares a copy on every directory scan.
    fn read_with(
        &mut self,
        offset: u64,
        len: usize,
        scratch: &mut [u8],
        f: &mut dyn FnMut(&[u8]),
    ) -> core::result::Result<(), DevError> {
        let b = scratch.get_mut(..len).ok_or(DevError)?;
        self.read_at(offset, b)?;
        f(b);
        Ok(())
    }
}

/// A device held in memory (tests, and images loaded whole).
pub struct MemDevice(pub alloc::vec::Vec<u8>);

impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> core::result::Result<(), DevError> {
        let start = usize::try_from(offset).map_err(|_| DevError)?;
        let end = start.checked_add(buf.len()).ok_or(DevError)?;
        buf.copy_from_slice(self.0.get(start..end).ok_or(DevError)?);
        Ok(())
    }
    /// In memory: lent in place (the host tests cover this path and, through the tool's file
    /// device, the copying default).
    fn read_with(
        &mut self,
        offset: u64,
        len: usize,
        _scratch: &mut [u8],
        f: &mut dyn FnMut(&[u8]),
    ) -> core::result::Result<(), DevError> {
        let start = usize::try_from(offset).map_err(|_| DevError)?;
        let end = start.checked_add(len).ok_or(DevError)?;
        f(self.0.get(start..end).ok_or(DevError)?);
        Ok(())
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> core::result::Result<(), DevError> {
        let start = usize::try_from(offset).map_err(|_| DevError)?;
        let end = start.checked_add(buf.len()).ok_or(DevError)?;
        self.0
            .get_mut(start..end)
            .ok_or(DevError)?
            .copy_from_slice(buf);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Io,
    NotFound,
    NotDir,
    IsDir,
    Exists,
    NotEmpty,
    NoSpace,
    NameTooLong,
    TooManyLinks,
    FileTooLarge,
    /// Too many symbolic links, or a directory cycle.
    Loop,
    ReadOnly,
    Invalid(&'static str),
    Corrupt(&'static str),
    Unsupported(&'static str),
}

impl From<DevError> for Error {
    fn from(_: DevError) -> Self {
        Error::Io
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io => f.write_str("I/O error"),
            Error::NotFound => f.write_str("no such file or directory"),
            Error::NotDir => f.write_str("not a directory"),
            Error::IsDir => f.write_str("is a directory"),
            Error::Exists => f.write_str("file exists"),
            Error::NotEmpty => f.write_str("directory not empty"),
            Error::NoSpace => f.write_str("no space left on device"),
            Error::NameTooLong => f.write_str("name too long"),
            Error::TooManyLinks => f.write_str("too many links"),
            Error::FileTooLarge => f.write_str("file too large"),
            Error::Loop => f.write_str("too many levels of symbolic links or a directory cycle"),
            Error::ReadOnly => f.write_str("file system is read-only (unsupported features)"),
            Error::Invalid(s) => write!(f, "invalid argument: {s}"),
            Error::Corrupt(s) => write!(f, "corrupt file system: {s}"),
            Error::Unsupported(s) => write!(f, "unsupported: {s}"),
        }
    }
}

pub type Result<T> = core::result::Result<T, Error>;
