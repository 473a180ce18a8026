//! Capability-slot allocation and threads within the own task.
use crate::{env, layout, slots, sys};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::{Error, ObjKind};

static NEXT_SLOT: AtomicU64 = AtomicU64::new(0);
static NEXT_UTCB: AtomicU64 = AtomicU64::new(1);
/// UTCB of thread `i` of this task is at `UTCB_BASE + i * 4096`, thread 0 being the main
/// thread: the standard layout's [`layout::UTCB_BASE`], or wherever the spawner put the main
/// thread's UTCB (a program started with another layout).
static UTCB_BASE: AtomicU64 = AtomicU64::new(layout::UTCB_BASE);

pub(crate) fn init_main() {
    NEXT_SLOT.store(
        env::last_slot().max(slots::FIRST_NAMED + 16) + 1,
        Ordering::Relaxed,
    );
    if env::present() {
        UTCB_BASE.store(crate::utcb() as *const _ as u64, Ordering::Relaxed);
    }
}

/// A fresh capability slot of this task (slots are not reused: tasks have 1024).
pub fn alloc_slot() -> u64 {
    NEXT_SLOT.fetch_add(1, Ordering::Relaxed)
}

/// Creates a kernel object from our factory into a fresh slot.
pub fn create(kind: ObjKind, arg: u64) -> Result<u64, Error> {
    let s = alloc_slot();
    sys::factory_create(slots::FACTORY, kind, s, arg)?;
    Ok(s)
}

/// The address for the UTCB of one more thread of this task (NoMemory past `UTCB_MAX`). The
/// runtime never hands an address out twice; a caller that ends threads of its own may keep
/// their addresses for new ones (the kernel frees a UTCB page when its thread ends).
pub fn next_utcb() -> Result<u64, Error> {
    let idx = NEXT_UTCB.fetch_add(1, Ordering::Relaxed);
    if idx >= layout::UTCB_MAX {
        return Err(Error::NoMemory);
    }
    Ok(UTCB_BASE.load(Ordering::Relaxed) + idx * 4096)
}

struct Start {
    f: Box<dyn FnOnce() + Send>,
}

extern "C" fn thread_entry(arg: u64) -> ! {
    // SAFETY: `arg` is the Box leaked by `spawn` for exactly this thread.
    let s = unsafe { Box::from_raw(arg as *mut Start) };
    (s.f)();
    crate::exit(0)
}

/// Starts a thread in this task running `f`, at priority `prio` (capped at ours by the kernel),
/// paged by root like the main thread. Returns the thread's capability slot.
pub fn spawn(prio: u64, stack: usize, f: impl FnOnce() + Send + 'static) -> Result<u64, Error> {
    spawn_paged(prio, stack, slots::PAGER, f)
}

/// As [`spawn`], with the thread's page faults sent to the endpoint in slot `pager` (a thread of
/// the same task that catches faults on memory another task may revoke, e.g. a driver's).
pub fn spawn_paged(
    prio: u64,
    stack: usize,
    pager: u64,
    f: impl FnOnce() + Send + 'static,
) -> Result<u64, Error> {
    let th = create(ObjKind::Thread, 0)?;
    sys::thread_config(
        th,
        slots::TASK,
        next_utcb()?,
        pager,
        slots::THREAD_HANDLER,
        prio,
    )?;
    // Not zeroed: nothing reads a stack before writing it, and zeroing wrote every page of it
    // (a Linux process's pager thread: 16 KiB, ~2k instructions and four pages its builder
    // zeroes again when the task is reused).
    let size = stack.max(4096);
    let mut memory: Vec<u8> = Vec::with_capacity(size);
    let base = memory.as_mut_ptr() as u64;
    core::mem::forget(memory);
    let top = (base + size as u64) & !15;
    let arg = Box::into_raw(Box::new(Start { f: Box::new(f) })) as u64;
    sys::thread_start(th, thread_entry as *const () as u64, top - 8, arg)?;
    Ok(th)
}
