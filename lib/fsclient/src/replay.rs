//! The library's side of a PFS restart that the workload should not see (issue 16,
//! docs/filesystem.md "Writes not yet fsync'd"): each descriptor's redo log (`sawmill_fsclient_redo`) is
//! filled by its writes and truncates, emptied when the file is made durable (a successful
//! `fsync`, or a `sync` while the file's PFS stayed the same incarnation), and replayed into the
//! file after `recover` reopened it at the new incarnation. A file this client created since it
//! was last made durable, which the new incarnation does not have (`Stale`), is created again by
//! its path (CREATE|EXCL through the VFS: a name now taken is never clobbered) and its log
//! replayed into it.
//!
//! May touch: the descriptor table and the file and VFS capabilities it holds.

use alloc::vec::Vec;
use sawmill_interfaces::{file, FsError, OpenFlags};
use sawmill_rt::sys;

use crate::{e, Files, Result, NO_MOUNT, O_READ, O_WRITE, PATH_FIELD};
use sawmill_fsclient_redo::Change;

/// What re-creates a file the new incarnation lost: its path as the creating `open` named it
/// and the mode it gave.
pub(crate) struct Created {
    pub path: Vec<u8>,
    pub mode: u32,
}

impl Files {
    /// Whether descriptor `fd`'s changes are logged: the log is on ([`Files::with_redo`])
    /// and the file is one `recover` can reopen (so logging for it is worth its memory).
    fn restartable(&mut self, fd: usize) -> bool {
        self.redo_on && self.fd(fd).is_ok_and(|f| f.home != NO_MOUNT && f.ino != 0)
    }

    /// After `open` made descriptor `fd` with `flags`: TRUNC emptied the file (the first change
    /// to redo), and with CREATE it may be a file we made, which a restart before it is durable
    /// loses.
    pub(crate) fn note_open(&mut self, fd: usize, path: &[u8], flags: OpenFlags, mode: u32) {
        if !self.restartable(fd) {
            return;
        }
        let mut total = self.redo_total;
        if let Ok(f) = self.fd(fd) {
            if flags.contains(OpenFlags::TRUNC) {
                f.redo.truncate(0, &mut total);
            }
            // A path the VFS must be given staged is not kept: such a file is not re-created.
            if flags.contains(OpenFlags::CREATE) && path.len() <= PATH_FIELD {
                f.created = Some(Created {
                    path: path.to_vec(),
                    mode,
                });
            }
        }
        self.redo_total = total;
    }

    /// After a write of `data` at `off` succeeded.
    pub(crate) fn note_write(&mut self, fd: usize, data: &[u8], off: u64) {
        if !self.restartable(fd) {
            return;
        }
        let mut total = self.redo_total;
        if let Ok(f) = self.fd(fd) {
            f.redo.write(off, data, &mut total);
        }
        self.redo_total = total;
    }

    /// After an ftruncate to `size` succeeded.
    pub(crate) fn note_truncate(&mut self, fd: usize, size: u64) {
        if !self.restartable(fd) {
            return;
        }
        let mut total = self.redo_total;
        if let Ok(f) = self.fd(fd) {
            f.redo.truncate(size, &mut total);
            f.unsynced = true;
        }
        self.redo_total = total;
    }

    /// Descriptor `fd`'s file is durable (its fsync succeeded: the PFS's fsync writes back its
    /// whole cache and flushes the device, so the file's directory entry is durable too), or it
    /// is closed: its log is of no more use.
    pub(crate) fn note_durable(&mut self, fd: usize) {
        let mut total = self.redo_total;
        if let Ok(f) = self.fd(fd) {
            if f.redo.is_empty() && !f.redo.overflowed() && f.created.is_none() {
                return;
            }
            f.redo.clear(&mut total);
            f.created = None;
        }
        self.redo_total = total;
    }

    /// A `sync` succeeded. It made durable what the PFSs *now* running held: a descriptor whose
    /// PFS died since its writes (its capability fails) keeps its log for the reopen to replay.
    pub(crate) fn note_synced(&mut self) {
        for fd in 0..self.fds.len() {
            let Some(f) = self.fds[fd].as_ref() else {
                continue;
            };
            if f.redo.is_empty() && f.created.is_none() {
                continue;
            }
            if file::Client::new(f.cap).stat().is_ok() {
                self.note_durable(fd);
            }
        }
    }

    /// `path` was renamed or unlinked: a file created by that name is not re-created there.
    pub(crate) fn forget_name(&mut self, path: &[u8]) {
        if !self.redo_on {
            return;
        }
        for f in self.fds.iter_mut().flatten() {
            if f.created.as_ref().is_some_and(|c| c.path == path) {
                f.created = None;
            }
        }
    }

    /// After `recover` reopened descriptor `fd` at the new incarnation: replays its log into
    /// it, oldest change first. `Gone` if the PFS died again meanwhile (the caller reopens and
    /// replays again: every change is idempotent).
    pub(crate) fn replay(&mut self, fd: usize) -> Result<()> {
        let log = match self.fd(fd) {
            Ok(f) if !f.redo.is_empty() => core::mem::take(&mut f.redo),
            _ => return Ok(()),
        };
        let r = (|| {
            for c in log.changes() {
                match c {
                    Change::Write { off, data } => {
                        let mut done = 0;
                        while done < data.len() {
                            let n = self.pwrite_once(fd, &data[done..], off + done as u64)?;
                            if n == 0 {
                                return Err(FsError::NoSpace);
                            }
                            done += n;
                        }
                    }
                    Change::Truncate(size) => {
                        let f = self.fd(fd)?;
                        file::Client::new(f.cap).truncate(*size).map_err(e)?;
                        f.mapped.clear();
                        f.size = *size;
                    }
                }
            }
            Ok(())
        })();
        if let Ok(f) = self.fd(fd) {
            f.redo = log;
        }
        r
    }

    /// `recover` found descriptor `fd`'s file gone from the new incarnation (`Stale`): if this
    /// client created it since it was last durable and its log says everything since, creates it
    /// again by its path (CREATE|EXCL through the VFS: another file by that name now is not
    /// ours, and stays: `Stale`) and points the descriptor at it; the caller then reopens it by
    /// inode as any other and replays the log. `Stale` otherwise.
    pub(crate) fn recreate(&mut self, fd: usize) -> Result<()> {
        let (path, mode, flags) = match self.fd(fd) {
            Ok(f) if !f.redo.overflowed() => match f.created.as_ref() {
                Some(c) => (c.path.clone(), c.mode, f.flags),
                None => return Err(FsError::Stale),
            },
            _ => return Err(FsError::Stale),
        };
        let access = if flags & O_READ != 0 {
            OpenFlags::READ
        } else {
            OpenFlags::from_bits_retain(0)
        } | if flags & O_WRITE != 0 {
            OpenFlags::WRITE
        } else {
            OpenFlags::from_bits_retain(0)
        };
        let rx = self.slot();
        let o = match self.vfs.open(
            &path,
            access | OpenFlags::CREATE | OpenFlags::EXCL,
            mode,
            rx,
        ) {
            Ok(o) => o,
            Err(x) => {
                self.free_slots.push(rx);
                return Err(match e(x) {
                    FsError::Exists => FsError::Stale,
                    x => x,
                });
            }
        };
        // The new file is reopened by inode on our session like any other: this capability
        // (the VFS's open of it) is not needed.
        let _ = sys::cap_delete(o.file);
        self.free_slots.push(o.file);
        let f = self.fd(fd)?;
        f.home = o.mount;
        f.ino = o.ino;
        f.generation = o.generation;
        Ok(())
    }
}
