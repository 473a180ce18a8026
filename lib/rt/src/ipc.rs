//! IPC primitives: thin, always-inlined wrappers around the four IPC system calls.
//!
//! Register-only messages (up to [`REG_WORDS`] words) never touch memory; longer messages put
//! words 4.. in the calling thread's UTCB (see [`crate::utcb`]).
use core::arch::asm;
use sawmill_abi::{MsgTag, Sys};

/// What an IPC system call returned.
#[derive(Clone, Copy, Debug)]
pub struct IpcResult {
    /// [`sawmill_abi::Error`] as a raw number; 0 = success.
    pub err: u64,
    /// Badge of the capability the sender used (receive side), or of the replier.
    pub badge: u64,
    /// Tag of the received message.
    pub tag: MsgTag,
    /// Words 0..4 of the received message.
    pub w: [u64; 4],
}

#[inline(always)]
fn ipc(sys: Sys, ep: u64, tag: MsgTag, w: [u64; 4]) -> IpcResult {
    let (err, badge, tag_out, w0, w1, w2, w3);
    // SAFETY: the IPC system calls only read/write the registers named here and the UTCB; rcx
    // and r11 are clobbered by `syscall`.
    unsafe {
        asm!("syscall",
            inlateout("rax") sys as u64 => err,
            inlateout("rdi") ep => badge,
            inlateout("rsi") tag.0 => tag_out,
            inlateout("rdx") w[0] => w0,
            inlateout("r10") w[1] => w1,
            inlateout("r8") w[2] => w2,
            inlateout("r9") w[3] => w3,
            lateout("rcx") _, lateout("r11") _,
            options(nostack));
    }
    IpcResult {
        err,
        badge,
        tag: MsgTag(tag_out),
        w: [w0, w1, w2, w3],
    }
}

/// Send a request on endpoint slot `ep` and wait for the reply.
#[inline(always)]
pub fn call(ep: u64, tag: MsgTag, w: [u64; 4]) -> IpcResult {
    ipc(Sys::Call, ep, tag, w)
}

/// Reply to the caller being served (if any), then wait for the next message on `ep`.
#[inline(always)]
pub fn reply_recv(ep: u64, tag: MsgTag, w: [u64; 4]) -> IpcResult {
    ipc(Sys::ReplyRecv, ep, tag, w)
}

/// Send without waiting for a reply. With a non-blocking tag, fails with WouldBlock when no
/// receiver is waiting.
#[inline(always)]
pub fn send(ep: u64, tag: MsgTag, w: [u64; 4]) -> u64 {
    ipc(Sys::Send, ep, tag, w).err
}

/// Wait for a message on `ep` (`flags` may carry [`MsgTag::NONBLOCK`]).
#[inline(always)]
pub fn recv(ep: u64, flags: u64) -> IpcResult {
    ipc(Sys::Recv, ep, MsgTag(flags), [0; 4])
}
