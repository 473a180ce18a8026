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

use core::sync::atomic::{AtomicU64, Ordering};
pub use sawmill_manifest::faults::Kind as FaultKind;
use sawmill_manifest::faults::Kind;

/// The server's fault word (docs/ARCHITECTURE.md §4.1, "Fault injection"): kind then argument of
/// a fault root armed on a controller's request, in a page root shares with the server (its
/// environment names it); a word that stays 0 for a server nobody may inject faults into.
pub fn fault_word() -> &'static AtomicU64 {
    static NONE: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
    // The page's address, looked up once (a lookup walks every record of the environment, all
    // of them when there is none: ~1.2k instructions each time a Linux process's loops start).
    let mut at = FAULT_WORD_AT.load(Ordering::Relaxed);
    if at == FAULT_WORD_UNKNOWN {
        note_fault_word(sawmill_rt::env::value(sawmill_rt::env::KIND_FAULT_WORD));
        at = FAULT_WORD_AT.load(Ordering::Relaxed);
    }
    if at == FAULT_WORD_NONE {
        return &NONE[0];
    }
    // SAFETY: root maps the page read-write before the server starts, and it stays; the
    // words are only ever accessed atomically.
    unsafe { &*(at as *const AtomicU64) }
}

/// [`fault_word`]'s page: not looked up yet, none, or its (page-aligned, nonzero) address.
static FAULT_WORD_AT: AtomicU64 = AtomicU64::new(FAULT_WORD_UNKNOWN);
const FAULT_WORD_UNKNOWN: u64 = 0;
const FAULT_WORD_NONE: u64 = 1;

/// Records the environment's fault-word record (its value), for a program that reads every
/// record in one pass at its start: [`fault_word`] then looks nothing up.
pub fn note_fault_word(value: Option<u64>) {
    let at = match value {
        Some(a) if a != 0 && a.is_multiple_of(4096) => a,
        _ => FAULT_WORD_NONE,
    };
    FAULT_WORD_AT.store(at, Ordering::Relaxed);
}

/// Takes the armed fault if it is `kind` (a server's own fault point, e.g. a block driver's disk
/// faults): its argument, once.
pub fn take_fault(kind: Kind) -> Option<u64> {
    let w = fault_word();
    if w.load(Ordering::Relaxed) != kind as u64 {
        return None;
    }
    w.compare_exchange(kind as u64, 0, Ordering::Acquire, Ordering::Relaxed)
        .ok()?;
    // SAFETY: the argument is the word after the kind in the same page (or the static pair).
    Some(unsafe { &*(w as *const AtomicU64).add(1) }.load(Ordering::Relaxed))
}

/// The server loop's fault point, reached only while a fault is armed: carries out the kinds
/// every server has (panic, corrupted reply, wild write, endless loop). `Some(reply)`: answer the
/// request with that garbage instead of handling it; `None`: handle it as usual (a wild write
/// done, or a kind that is the server's own to take).
#[cold]
#[inline(never)]
pub fn fault_fires(w: &AtomicU64) -> Option<Reply> {
    let kind = Kind::from_u64(w.load(Ordering::Relaxed))?;
    if kind.disk_only() || kind == Kind::Kill {
        return None;
    }
    let arg = take_fault(kind)?;
    let me = sawmill_rt::env::name();
    match kind {
        Kind::Panic => panic!("injected fault: panic at the server loop's fault point"),
        Kind::Corrupt => {
            sawmill_rt::println!("rpc: {}: injected fault: corrupted reply", me);
            // An error label no protocol defines, and garbage words: the request was not done.
            Some(Reply {
                tag: MsgTag::new(0x7e00 | (arg & 0xff) as u16, 4),
                w: [arg, !arg, arg.rotate_left(17), arg ^ 0xdead_beef],
            })
        }
        Kind::Wild => {
            let (base, size) = sawmill_rt::env::heap();
            if size >= 8 {
                let at = (base + (arg >> 8) % size) & !7;
                sawmill_rt::println!("rpc: {}: injected fault: wild write at {:#x}", me, at);
                // SAFETY: deliberately none: the fault is a garbage word written somewhere in
                // our own heap (mapped read-write), as a wild pointer would.
                unsafe { core::ptr::write_volatile(at as *mut u64, arg) };
            }
            None
        }
        _ => {
            sawmill_rt::println!("rpc: {}: injected fault: endless loop", me);
            loop {
                core::hint::spin_loop();
            }
        }
    }
}

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
