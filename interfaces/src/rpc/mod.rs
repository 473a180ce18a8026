//! The RPC runtime of generated stubs and of the server loop, bound to the real system calls of
//! `sawmill-rt`.
pub use sawmill_rt::ipc::{call, recv, reply_recv, send, IpcResult};
pub use sawmill_rt::utcb;

#[path = "wire.rs"]
mod wire;
pub use wire::*;

#[path = "serve.rs"]
mod serve;
pub use serve::*;

/// `cap_delete(slot)`; returns the raw error code (0 = deleted).
#[inline]
pub fn cap_delete(slot: u64) -> u64 {
    match sawmill_rt::sys::cap_delete(slot) {
        Ok(()) => 0,
        Err(e) => e as u64,
    }
}

/// `unmap(addr, pages, flags)`; returns the raw error code (0 = done).
#[inline]
pub fn unmap(addr: u64, pages: u64, flags: u64) -> u64 {
    match sawmill_rt::sys::unmap(addr, pages, flags) {
        Ok(()) => 0,
        Err(e) => e as u64,
    }
}
