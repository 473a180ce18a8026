//! The RPC runtime of generated stubs, bound to the real system calls of `sawmill-rt`.
pub use sawmill_rt::ipc::{call, recv, reply_recv, send, IpcResult};
pub use sawmill_rt::utcb;

#[path = "wire.rs"]
mod wire;
pub use wire::*;

/// `cap_delete(slot)`; returns the raw error code (0 = deleted).
#[inline]
pub fn cap_delete(slot: u64) -> u64 {
    match sawmill_rt::sys::cap_delete(slot) {
        Ok(()) => 0,
        Err(e) => e as u64,
    }
}
