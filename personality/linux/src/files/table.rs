//! The descriptor table and open file descriptions.
//!
//! A descriptor (a small integer) names an open file description and carries one flag of its
//! own, close-on-exec. The description is what `open` made and `dup` shares: the object (a file
//! of the file system, a device the library serves, the console), the offset and the status
//! flags (access mode, `O_APPEND`, `O_NONBLOCK`...), so descriptors duplicated from one another
//! move one offset together, as Linux's do.
//!
//! Inside one process a description is reference-counted ([`Shared`]); the object is released
//! (the file system's handle closed) when the last descriptor naming it goes. After `fork` (the
//! next issue) two processes must share a description: its state is exactly [`Description`]
//! (object, offset, flags), so sharing means moving that state out of the library into a server
//! both processes reach (the offset and flags next to the file system's open file, which is
//! already a capability both can hold), and making [`Shared`] a handle to it. Nothing outside
//! this module and the system-call logic touches the offset or the flags, so that change stays
//! here.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::errno::{EBADF, EMFILE};
use crate::Errno;

use super::backend::DirEntry;

/// A device the library serves itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// `/dev/null` (1,3): reads end at once, writes vanish.
    Null,
    /// `/dev/zero` (1,5): reads give zeros.
    Zero,
    /// `/dev/random` (1,8) and `/dev/urandom` (1,9).
    Random,
    /// The terminal: `/dev/console` (5,1), `/dev/tty` (5,0) and descriptors 0, 1, 2 at start.
    Console,
}

impl Device {
    /// The device a number of `Device as u8` names (the state handed to a new image).
    pub fn from_u8(n: u8) -> Option<Device> {
        [Device::Null, Device::Zero, Device::Random, Device::Console]
            .into_iter()
            .find(|d| *d as u8 == n)
    }
}

/// What a description is open on.
#[derive(Debug)]
pub enum Object {
    /// A file (or directory) of the file system.
    File {
        handle: u64,
        /// The absolute path it was opened by (for the `*at` calls, `getdents64`, `fchdir`, and
        /// the calls by descriptor the file system answers only by path).
        path: Vec<u8>,
        /// The mode when known (from the open, or the first `fstat`).
        mode: Option<u32>,
        /// A directory's entries, read at the first `getdents64` (offset = index).
        entries: Option<Vec<DirEntry>>,
    },
    /// `O_PATH`: only a name (for `*at`, `fstat`, `fchdir`); nothing is open at the file system.
    Path {
        path: Vec<u8>,
        mode: u32,
    },
    Device(Device),
    /// One end of a pipe (`pipe.rs`): the host's handle for it.
    Pipe {
        handle: u64,
        end: sawmill_pipe_api::End,
        /// Its ring, as the host mapped it (kept here: no lookup on a read or write).
        ring: sawmill_pipe_api::Ring,
    },
    /// A socket (`socket.rs`): the host's handle and what Linux keeps beside it.
    Socket(super::socket::Sock),
}

/// An open file description.
#[derive(Debug)]
pub struct Description {
    pub object: Object,
    pub offset: u64,
    /// The status flags (`abi::STATUS_KEPT` bits).
    pub flags: u32,
}

/// A description as the descriptors of one process share it.
pub type Shared = Rc<RefCell<Description>>;

struct Slot {
    desc: Shared,
    cloexec: bool,
}

/// Descriptors of one process.
#[derive(Default)]
pub struct Table {
    slots: Vec<Option<Slot>>,
}

/// How many descriptors a process may have (Linux's default `RLIMIT_NOFILE`).
pub const MAX_FDS: usize = 1024;

impl Table {
    pub fn new() -> Table {
        Table { slots: Vec::new() }
    }

    /// The description of `fd`; `EBADF` if it is not open.
    pub fn get(&self, fd: i32) -> Result<Shared, Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        self.slots
            .get(i)
            .and_then(|s| s.as_ref())
            .map(|s| s.desc.clone())
            .ok_or(EBADF)
    }

    /// The description of `fd` without taking a reference (for a call that is done with it
    /// before the table can change).
    pub fn peek(&self, fd: i32) -> Option<&Shared> {
        self.slots
            .get(usize::try_from(fd).ok()?)?
            .as_ref()
            .map(|s| &s.desc)
    }

    /// The lowest free descriptor at or above `min`; `EMFILE` if none is left.
    pub fn lowest_free(&self, min: usize) -> Result<usize, Errno> {
        (min..MAX_FDS)
            .find(|&i| self.slots.get(i).is_none_or(|s| s.is_none()))
            .ok_or(EMFILE)
    }

    /// Puts `desc` at the lowest free descriptor at or above `min`.
    pub fn insert(&mut self, min: usize, desc: Shared, cloexec: bool) -> Result<i32, Errno> {
        let fd = self.lowest_free(min)?;
        self.set(fd, desc, cloexec);
        Ok(fd as i32)
    }

    /// Puts `desc` at `fd` (below [`MAX_FDS`]), returning what was there.
    pub fn set(&mut self, fd: usize, desc: Shared, cloexec: bool) -> Option<Shared> {
        if self.slots.len() <= fd {
            self.slots.resize_with(fd + 1, || None);
        }
        self.slots[fd]
            .replace(Slot { desc, cloexec })
            .map(|s| s.desc)
    }

    /// Takes `fd` out; `EBADF` if it is not open.
    pub fn remove(&mut self, fd: i32) -> Result<Shared, Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        let s = self.slots.get_mut(i).and_then(|s| s.take()).ok_or(EBADF)?;
        while self.slots.last().is_some_and(|s| s.is_none()) {
            self.slots.pop();
        }
        Ok(s.desc)
    }

    pub fn cloexec(&self, fd: i32) -> Result<bool, Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        self.slots
            .get(i)
            .and_then(|s| s.as_ref())
            .map(|s| s.cloexec)
            .ok_or(EBADF)
    }

    pub fn set_cloexec(&mut self, fd: i32, on: bool) -> Result<(), Errno> {
        let i = usize::try_from(fd).map_err(|_| EBADF)?;
        let s = self
            .slots
            .get_mut(i)
            .and_then(|s| s.as_mut())
            .ok_or(EBADF)?;
        s.cloexec = on;
        Ok(())
    }

    /// The descriptors marked close-on-exec, taken out (what `execve` drops).
    pub fn take_cloexec(&mut self) -> Vec<Shared> {
        let mut out = Vec::new();
        for s in self.slots.iter_mut() {
            if s.as_ref().is_some_and(|s| s.cloexec) {
                out.extend(s.take().map(|s| s.desc));
            }
        }
        out
    }

    /// Every open descriptor, lowest first.
    pub fn fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i as i32)
    }
}
