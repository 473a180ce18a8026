//! The guest side of local (AF_UNIX) sockets: [`UnixHost`] for the process's backend over the
//! pipe server's names (`interfaces/pipe.idl`: `listen`, `connect`, `mailbox`, `deliver_to` on
//! the `pipe` capability every Linux process holds; `accept`, `pending`, `register` on a
//! listener). The pipe ends a connection or receiver hands out become the process's pipe ends
//! (`pipe_guest.rs`: ring attached, slot reused), so their data path is the pipes'.
//!
//! A listener's handle is the capability slot it lives in; closing drops the capability (the
//! server frees the name once every copy, in every process, is gone). It touches the `pipe`
//! capability, `proc:wake` and the capabilities it holds.

use alloc::collections::BTreeSet;
use core::cell::UnsafeCell;

use sawmill_interfaces::rpc::Error;
use sawmill_interfaces::{pipe, PipeError};
use sawmill_linux::errno::*;
use sawmill_linux::files::unix::{Cred, UnixHost};
use sawmill_linux::Errno;
use sawmill_proc_api::WAKE_IO;
use sawmill_rt::sys;

use crate::files_guest::Guest;
use crate::guest::Single;

/// Listeners this image registered its wake notification with (a new image starts
/// unregistered).
static WATCHED: Single<BTreeSet<u64>> = Single(UnsafeCell::new(BTreeSet::new()));

fn errno_of(e: Error<PipeError>) -> Errno {
    match e {
        Error::App(e) => match e {
            PipeError::Invalid => EINVAL,
            PipeError::NoSpace => ENFILE,
            PipeError::NoMemory => ENOMEM,
            PipeError::NotOne => EINVAL,
            PipeError::Busy => EADDRINUSE,
            PipeError::NotFound => ECONNREFUSED,
            PipeError::Empty => EAGAIN,
        },
        Error::TooLong => ENAMETOOLONG,
        _ => ENFILE,
    }
}

impl Guest {
    fn pipe_server(&self) -> Result<pipe::Client, Errno> {
        self.pipes.server.ok_or(EAFNOSUPPORT)
    }

    /// Takes over two ends a call just placed in slots `r` and `w`; both are the process's
    /// pipe ends after.
    fn adopt_pair(&mut self, r: u64, w: u64) -> Result<(u64, u64), Errno> {
        let p = &mut self.pipes;
        if let Err(e) = p.adopt(r) {
            p.drop_end(r);
            p.drop_end(w);
            return Err(e);
        }
        if let Err(e) = p.adopt(w) {
            p.drop_end(r);
            p.drop_end(w);
            return Err(e);
        }
        Ok((r, w))
    }
}

impl UnixHost for Guest {
    fn unix_listen(&mut self, name: &[u8], backlog: u32) -> Result<u64, Errno> {
        let server = self.pipe_server()?;
        let slot = self.pipes.slot();
        match server.listen_as(name, backlog, crate::guest::cred(), slot) {
            Ok(l) => Ok(l),
            Err(e) => {
                self.pipes.free_slots.push(slot);
                Err(errno_of(e))
            }
        }
    }

    fn unix_connect(&mut self, name: &[u8]) -> Result<(u64, u64, Cred), Errno> {
        let server = self.pipe_server()?;
        let (r, w) = (self.pipes.slot(), self.pipes.slot());
        match server.connect_as(name, crate::guest::cred(), r, w) {
            Ok(o) => self
                .adopt_pair(o.read, o.write)
                .map(|(r, w)| (r, w, o.peer)),
            Err(e) => {
                self.pipes.free_slots.extend([r, w]);
                Err(errno_of(e))
            }
        }
    }

    fn unix_accept(&mut self, l: u64) -> Result<(u64, u64, Cred), Errno> {
        let (r, w) = (self.pipes.slot(), self.pipes.slot());
        match pipe::Client::new(l).accept_as(r, w) {
            Ok(o) => self
                .adopt_pair(o.read, o.write)
                .map(|(r, w)| (r, w, o.peer)),
            Err(e) => {
                self.pipes.free_slots.extend([r, w]);
                Err(errno_of(e))
            }
        }
    }

    fn unix_cred(&mut self) -> Cred {
        crate::guest::cred()
    }

    fn unix_pending(&mut self, l: u64) -> usize {
        pipe::Client::new(l).pending().unwrap_or(0) as usize
    }

    fn unix_watch(&mut self, l: u64) -> Result<(), Errno> {
        let Some(wake) = self.pipes.wake else {
            return Ok(());
        };
        let watched = WATCHED.get();
        if !watched.contains(&l) {
            pipe::Client::new(l)
                .register(wake, WAKE_IO)
                .map_err(|_| ENOMEM)?;
            watched.insert(l);
        }
        Ok(())
    }

    fn unix_close(&mut self, l: u64) {
        WATCHED.get().remove(&l);
        let _ = sys::cap_delete(l);
        self.pipes.free_slots.push(l);
        // Once the server answers, it has taken the notice the deletion may have caused: a
        // `connect` right after finds the name free (ECONNREFUSED), as on Linux.
        if let Some(s) = self.pipes.server {
            let _ = s.sync();
        }
    }

    fn unix_mailbox(&mut self, name: &[u8]) -> Result<u64, Errno> {
        let server = self.pipe_server()?;
        let slot = self.pipes.slot();
        match server.mailbox(name, slot) {
            Ok(r) => {
                if let Err(e) = self.pipes.adopt(r) {
                    self.pipes.drop_end(r);
                    return Err(e);
                }
                Ok(r)
            }
            Err(e) => {
                self.pipes.free_slots.push(slot);
                Err(errno_of(e))
            }
        }
    }

    fn unix_deliver_to(&mut self, name: &[u8]) -> Result<u64, Errno> {
        let server = self.pipe_server()?;
        let slot = self.pipes.slot();
        match server.deliver_to(name, slot) {
            Ok(w) => {
                if let Err(e) = self.pipes.adopt(w) {
                    self.pipes.drop_end(w);
                    return Err(e);
                }
                Ok(w)
            }
            Err(e) => {
                self.pipes.free_slots.push(slot);
                Err(errno_of(e))
            }
        }
    }
}
