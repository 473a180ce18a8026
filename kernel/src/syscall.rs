//! System calls: the top layer. Decodes the number and arguments, checks the capabilities each
//! call names, and invokes the object modules below; imported by no other module. Every
//! handler returns a [`SysResult`], which [`slow`] turns into `rax` in one place (tracing it
//! when refused, see `trace`); a bad argument is an error code, never a kernel fault. The IPC
//! fast path runs first, in [`syscall_dispatch`], and never fails: what it cannot finish goes
//! the general way.
use crate::cap::{self, cap_of, task_cap, thread_cap};
use crate::endpoint::{self, Replied};
use crate::error::SysResult;
use crate::mem::{self, phys};
use crate::obj::{Obj, Thread};
use crate::state::kernel;
use crate::{
    factory, iommu, irq, notification, object, paging, pin, sched, senders, task, thread, trace,
    trap, vm,
};
use sawmill_abi::{kinfo, mint, rights, Error, Sys};

/// `rax` of the calls `syscall_dispatch` tries on the fast path.
const CALL: u64 = Sys::Call as u64;
const REPLY_RECV: u64 = Sys::ReplyRecv as u64;
const SEND: u64 = Sys::Send as u64;

#[no_mangle]
extern "C" fn syscall_dispatch() -> ! {
    let cur = kernel().current;
    // SAFETY: the current thread is live; its frame was just saved by the entry stub.
    let t = unsafe { &*cur };
    // `call` and `reply_recv` of a native thread try the IPC fast path first, here, where no
    // value lives across a call, so that the compiler need not save registers on this path;
    // a foreign thread's system call (every Linux call) is reflected from here too.
    match t.foreign {
        None => match t.frame.rax {
            CALL => endpoint::fast_call(cur),
            REPLY_RECV => endpoint::fast_reply_recv(cur),
            _ => {}
        },
        Some((entry, lo, hi)) => {
            let rip = t.frame.rip;
            if rip < lo || rip >= hi {
                // A jump, not a call (as `arch::return_sysret_msg_to`): nothing comes back,
                // and the call cost the IPC fast path above two instructions a round trip.
                // SAFETY: `reflect` is an `extern "C"` function of this signature that never
                // returns; the stack below is this function's frame (it may leave `reflect`'s
                // stack 8 bytes off the ABI's 16-byte alignment, which the kernel, built
                // without SSE, never relies on).
                unsafe {
                    core::arch::asm!(
                        "jmp {f}",
                        f = sym reflect,
                        in("rdi") cur,
                        in("rsi") entry,
                        options(noreturn)
                    )
                }
            }
        }
    }
    dispatch_rest()
}

/// A foreign thread's system call: handed to its emulation entry (thread::reflect), and back.
extern "C" fn reflect(cur: *mut Thread, entry: u64) -> ! {
    thread::reflect(cur, entry);
    trap::resume_current(cur)
}

/// Everything `syscall_dispatch` does not finish: the IPC fast path of a foreign thread's
/// native calls, the fast `send`, and the general path.
#[inline(never)]
fn dispatch_rest() -> ! {
    let cur = kernel().current;
    // SAFETY: as in syscall_dispatch.
    let t = unsafe { &*cur };
    if t.foreign.is_some() {
        // A foreign thread calling from inside its native range (`syscall_dispatch` reflected
        // the others) is treated as native.
        match t.frame.rax {
            CALL => endpoint::fast_call(cur),
            REPLY_RECV => endpoint::fast_reply_recv(cur),
            _ => {}
        }
    }
    if t.frame.rax == SEND {
        endpoint::fast_send(cur);
    }
    slow(cur)
}

/// Every system call but the IPC fast path (part of `dispatch_rest`, already out of line): the
/// one place a handler's result becomes `rax`. The calling thread's object lives at least until
/// `trap::leave` reaps, even if the call ended it, so its frame may be written here.
#[inline(always)]
fn slow(cur: *mut Thread) -> ! {
    // SAFETY: live current thread.
    let n = unsafe { (*cur).frame.rax };
    let r = match Sys::try_from(n) {
        Ok(sys) => dispatch(cur, sys),
        Err(_) => Err(reject!(Error::NoSys, "unknown system call number")),
    };
    let rax = match r {
        Ok(()) => 0,
        Err(e) => {
            trace::rejected(cur, n, e);
            e.err as u64
        }
    };
    // SAFETY: as above; a call that blocked gets its real result written again when it is
    // woken (the message, or the error that woke it).
    unsafe { (*cur).frame.rax = rax };
    trap::leave()
}

/// `debug_write`: out of line (the device and debugging calls leave `dispatch` as it was).
#[inline(never)]
fn debug_write(cur: *mut Thread, console: u64, ptr: u64, len: u64) -> SysResult {
    // SAFETY: live current thread, bound to a live task.
    let task = unsafe { (*cur).task };
    // The console is a capability like everything else: no task prints by default.
    if cap::lookup(task, console)?.obj != Obj::Console {
        return Err(reject!(Error::WrongKind, "not the console capability"));
    }
    if len > 4096 {
        return Err(reject!(Error::Invalid, "more than 4096 bytes"));
    }
    // SAFETY: live task.
    let pml4 = unsafe { (*task).pml4 };
    // Straight from the user's pages (a bounce buffer of a page, zeroed at every call, cost more
    // than a line's output; every process start logs one), after a first pass has checked every
    // byte, so that a bad buffer prints nothing. The kernel runs with interrupts off on one
    // CPU: the bytes cannot change between the passes.
    if !paging::read_user(pml4, ptr, len as usize, |_| {}) {
        return Err(reject!(Error::Fault, "buffer not mapped readable"));
    }
    paging::read_user(pml4, ptr, len as usize, crate::serial::write);
    Ok(())
}

/// `reply_recv` on the general path: the reply goes out even if the endpoint is bad, so the
/// caller does not hang because we misnamed our endpoint.
fn reply_recv(cur: *mut Thread) -> SysResult {
    endpoint::reply_recv_direct(cur);
    let woken = match endpoint::reply(cur) {
        Replied::NoCaller => None,
        Replied::Woken(c) => Some(c),
        Replied::Refused(c) => {
            thread::kill_thread(c);
            None
        }
        Replied::Diverted(c, [entry, a1, a2]) => {
            if thread::divert(c, entry, a1, a2) {
                Some(c)
            } else {
                thread::kill_thread(c);
                None
            }
        }
    };
    endpoint::recv_after_reply(cur, woken)
}

/// `kernel_info`: one figure about the kernel, by number.
fn kernel_info(which: u64) -> Result<u64, Error> {
    Ok(match which {
        kinfo::KMEM_FREE => mem::kmem_free(),
        kinfo::TICKS => kernel().ticks,
        kinfo::USER_FRAMES => phys().user_frames,
        kinfo::BOOT_EPOCH => kernel().boot_epoch,
        kinfo::BOOT_TSC => kernel().boot_tsc,
        kinfo::TSC_KHZ => kernel().tsc_khz,
        x if (kinfo::USER_RANGES..kinfo::USER_RANGES + 2 * mem::MAX_RANGES as u64).contains(&x) => {
            let i = ((x - kinfo::USER_RANGES) / 2) as usize;
            let r = if i < phys().nuser {
                phys().user[i]
            } else {
                mem::Range { start: 0, end: 0 }
            };
            if (x - kinfo::USER_RANGES).is_multiple_of(2) {
                r.start
            } else {
                r.end
            }
        }
        _ => return Err(Error::Invalid),
    })
}

/// Decodes the arguments of `sys` and invokes it.
fn dispatch(cur: *mut Thread, sys: Sys) -> SysResult {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let task = t.task;
    let f = &t.frame;
    let (a0, a1, a2, a3, a4, a5) = (f.rdi, f.rsi, f.rdx, f.r10, f.r8, f.r9);
    // The calls that wait (or receive, or give up the CPU) start the thread's run count again,
    // whether or not they block (see `Thread::run_ticks`): one store in each of their arms
    // rather than a test on every system call's path.
    match sys {
        Sys::Null => Ok(()),
        Sys::Call => {
            t.run_ticks = 0;
            endpoint::sys_send(cur, true)
        }
        Sys::ReplyRecv => {
            t.run_ticks = 0;
            reply_recv(cur)
        }
        Sys::Send => {
            t.run_ticks = 0;
            endpoint::sys_send(cur, false)
        }
        Sys::Recv => {
            t.run_ticks = 0;
            endpoint::sys_recv(cur)
        }
        Sys::Yield => {
            t.run_ticks = 0;
            t.slice = sched::SLICE;
            sched::enqueue(cur);
            kernel().current = core::ptr::null_mut();
            Ok(())
        }
        Sys::DebugWrite => debug_write(cur, a0, a1, a2),
        Sys::CapCopy => Ok(cap::derive(task, a0, task, a1, None, rights::ALL)?),
        Sys::CapMint => {
            if a4 & !mint::ALL != 0 {
                return Err(reject!(Error::Invalid, "unknown mint flags"));
            }
            if a4 & mint::NO_SENDERS != 0 {
                return senders::mint(task, a0, a1, a2, a3, a5);
            }
            let badge = if a2 != 0 { Some(a2) } else { None };
            cap::derive(task, a0, task, a1, badge, a3).map_err(|e| match e {
                Error::Invalid => {
                    reject!(Error::Invalid, "the source capability has a badge already")
                }
                e => e.into(),
            })
        }
        Sys::CapDelete if a1 == 0 => Ok(cap::delete(task, a0)?),
        Sys::CapDelete => cap_delete_many(cur, a1, a2),
        Sys::CapRevoke => Ok(cap::revoke(task, a0)?),
        Sys::FactoryCreate => {
            let Obj::Factory(fac) = cap_of(task, a0, rights::CONTROL)?.obj else {
                return Err(reject!(Error::WrongKind, "not a factory"));
            };
            object::create(task, fac, a1, a2, a3)
        }
        Sys::TaskCapPut if a3 == 0 => {
            let tt = task_cap(task, a0)?;
            Ok(cap::derive(task, a1, tt, a2, None, rights::ALL)?)
        }
        Sys::TaskCapPut => task_cap_put_many(cur, a0, a3),
        Sys::TaskMap => {
            let tt = task_cap(task, a0)?;
            vm::map_pages(task, a1, tt, a2, a3, a4).map_err(|e| match e {
                Error::Fault => reject!(Error::Fault, "source page not mapped"),
                Error::Invalid => {
                    reject!(Error::Invalid, "bad address, size, alignment or overlap")
                }
                e => e.into(),
            })
        }
        Sys::TaskLink => crate::task::link(task_cap(task, a0)?, task_cap(task, a1)?, a2),
        Sys::TaskDirty => {
            let tt = task_cap(task, a0)?;
            t.frame.rdi = vm::dirty_mask(task, a1, tt, a2, a3)
                .map_err(|_| reject!(Error::Invalid, "bad address, alignment or page count"))?;
            Ok(())
        }
        Sys::TaskReset => task_reset(cur, a0, a1, a2),
        Sys::Reserved42 => Err(reject!(Error::NoSys, "call 42 is not in this kernel")),
        Sys::Unmap => {
            t.frame.rdi = vm::unmap_range(task, a0, a1, a2).map_err(|_| {
                reject!(
                    Error::Invalid,
                    "range unaligned or outside user space, or unknown flags"
                )
            })?;
            Ok(())
        }
        Sys::ThreadConfig => thread::config(cur, a0, a1, a2, a3, a4, a5),
        Sys::ThreadStart => thread::start(thread_cap(task, a0)?, a1, a2, a3),
        Sys::IrqGet => irq::get(task, cap::lookup(task, a0)?, a1, a2),
        Sys::IrqBind => {
            let Obj::Irq(line) = cap::lookup(task, a0)?.obj else {
                return Err(reject!(Error::WrongKind, "not an IRQ capability"));
            };
            irq::bind(line, cap_of(task, a1, rights::SEND)?, a2)
        }
        Sys::IrqAck => {
            let Obj::Irq(line) = cap::lookup(task, a0)?.obj else {
                return Err(reject!(Error::WrongKind, "not an IRQ capability"));
            };
            irq::pic_unmask(line);
            Ok(())
        }
        Sys::NotifySignal => {
            let c = cap_of(task, a0, rights::SEND)?;
            let Obj::Notification(n) = c.obj else {
                return Err(reject!(Error::WrongKind, "not a notification"));
            };
            // A badged (minted) notification capability signals only the bits of its badge: a
            // holder can be given a way to wake a waiter without a way to fake its other bits.
            let bits = if c.badge != 0 { a1 & c.badge } else { a1 };
            notification::signal(n, bits);
            if let Some(t) = notification::interrupt_target(n) {
                thread::interrupt(t);
            }
            Ok(())
        }
        Sys::NotifyWait => {
            t.run_ticks = 0;
            let Obj::Notification(n) = cap_of(task, a0, rights::RECV)?.obj else {
                return Err(reject!(Error::WrongKind, "not a notification"));
            };
            notification::wait(cur, n, a1, a2)
        }
        Sys::IoPortGive => {
            let io = cap::lookup(task, a0)?;
            if io.obj != Obj::IoControl {
                return Err(reject!(Error::WrongKind, "not the I/O-control capability"));
            }
            task::io_port_give(io, task_cap(task, a1)?, a2, a3)
        }
        Sys::Shutdown => {
            let c = cap::lookup(task, a0)?;
            if c.obj != Obj::Control {
                return Err(reject!(Error::WrongKind, "not the control capability"));
            }
            // A minted (badged) Control is device authority only (the pci server's).
            if c.badge != 0 {
                return Err(reject!(Error::NoRights, "device control cannot shut down"));
            }
            crate::shutdown((a1 & 0xf) as u8)
        }
        Sys::KernelInfo => {
            t.frame.rdi = kernel_info(a0).map_err(|_| reject!(Error::Invalid, "no such figure"))?;
            Ok(())
        }
        Sys::ThreadExit => {
            thread::exit(cur, a0);
            Ok(())
        }
        Sys::SetTls => thread::set_tls(cur, a0, a1),
        Sys::ThreadForeign => thread::set_foreign(task, thread_cap(task, a0)?, a1, a2, a3),
        Sys::ThreadInterrupt => {
            let Obj::Notification(n) = cap_of(task, a1, rights::RECV)?.obj else {
                return Err(reject!(Error::WrongKind, "not a notification"));
            };
            thread::bind_interrupt(task, thread_cap(task, a0)?, n, a2)
        }
        Sys::MapPhys => {
            if cap::lookup(task, a0)?.obj != Obj::Control {
                return Err(reject!(Error::WrongKind, "not the control capability"));
            }
            vm::map_device(task, a1, a2, a3).map_err(|e| match e {
                Error::Invalid => {
                    reject!(Error::Invalid, "bad range, or RAM named as device memory")
                }
                e => e.into(),
            })
        }
        Sys::FactoryInfo => {
            let Obj::Factory(fp) = cap::lookup(task, a0)?.obj else {
                return Err(reject!(Error::WrongKind, "not a factory"));
            };
            (t.frame.rdi, t.frame.rsi) = factory::info(fp);
            Ok(())
        }
        Sys::TaskKill => {
            task::kill_task(task_cap(task, a0)?);
            Ok(())
        }
        Sys::ThreadRegs => thread::regs(task, thread_cap(task, a0)?, a1),
        Sys::ThreadInfo => {
            (t.frame.rdi, t.frame.rsi) = thread::info(thread_cap(task, a0)?);
            Ok(())
        }
        Sys::PageCopy => {
            // SAFETY: live task.
            let pml4 = unsafe { (*task).pml4 };
            let page = crate::mem::PAGE;
            if (a0 | a1) & (page - 1) != 0
                || !paging::user_range_ok(a0, page)
                || !paging::user_range_ok(a1, page)
            {
                return Err(reject!(
                    Error::Invalid,
                    "page copy: unaligned or outside user space"
                ));
            }
            // RAM only (the direct map): a device page is no file's page.
            let ram = |pa: u64| pa + page <= crate::mem::DIRECT_MAP_SIZE;
            let Some((src, _)) =
                paging::translate(pml4, a0).filter(|&(pa, pte)| ram(pa) && pte & paging::U != 0)
            else {
                return Err(reject!(Error::Fault, "page copy: source not mapped"));
            };
            let Some((dst, _)) = paging::translate(pml4, a1)
                .filter(|&(pa, pte)| ram(pa) && pte & paging::W != 0 && pte & paging::U != 0)
            else {
                return Err(reject!(
                    Error::Fault,
                    "page copy: destination not mapped writable"
                ));
            };
            paging::mark_dirty(pml4, a1);
            // SAFETY: both are whole RAM frames mapped in the caller (checked above), reached
            // through the direct map; one CPU with interrupts off: nothing unmaps them meanwhile.
            unsafe {
                core::ptr::copy(
                    crate::mem::phys_to_virt(src),
                    crate::mem::phys_to_virt(dst),
                    page as usize,
                )
            };
            Ok(())
        }
        Sys::Translate => {
            // SAFETY: live task.
            let pml4 = unsafe { (*task).pml4 };
            if !paging::user_range_ok(a0, 1) {
                return Err(reject!(Error::Invalid, "address outside user space"));
            }
            if a1 & !sawmill_abi::pin::TRANSLATE_PINS != 0 {
                return Err(reject!(Error::Invalid, "unknown translate flags"));
            }
            let Some((pa, _)) = paging::translate(pml4, a0) else {
                return Err(reject!(Error::Fault, "address not mapped"));
            };
            t.frame.rdi = pa;
            if a1 != 0 {
                t.frame.rsi = pin::count(pa);
            }
            Ok(())
        }
        Sys::Pin => pin::pin(cur, a0, a1, a2),
        Sys::Unpin => pin::unpin(cur, a0, a1),
        Sys::DmaBind => dma_bind(cur, a0, a1, a2),
        Sys::DmaMap => {
            t.frame.rdi = iommu::map(task, a0, a1)?;
            Ok(())
        }
    }
}

/// `task_reset`: out of line (as `dma_bind`), so that `dispatch`'s code stays as it was.
#[inline(never)]
fn task_reset(cur: *mut Thread, task_slot: u64, lender_slot: u64, n: u64) -> SysResult {
    // SAFETY: the current thread is live and bound to a live task.
    let (t, task) = unsafe { (&mut *cur, (*cur).task) };
    let tt = task_cap(task, task_slot)?;
    let lender = if lender_slot == u64::MAX {
        None
    } else {
        Some(task_cap(task, lender_slot)?)
    };
    // One run past the limit is read, so that too many are refused rather than cut short.
    let n = n.min(sawmill_abi::RESET_RUNS as u64 + 1) as usize;
    let mut runs = [sawmill_kcore::reset::Run {
        src: 0,
        dst: 0,
        pages: 0,
    }; sawmill_abi::RESET_RUNS + 1];
    let mr = &crate::obj::utcb(cur).mr;
    for (i, r) in runs.iter_mut().enumerate().take(n) {
        (r.src, r.dst, r.pages) = (mr[3 * i], mr[3 * i + 1], mr[3 * i + 2]);
    }
    t.frame.rdi = task::reset_task(task, tt, lender, &runs[..n])?;
    Ok(())
}

/// `task_cap_put` of `n` pairs from the caller's message words (`Sys::TaskCapPut`): `rdi` is
/// how many were placed, or on an error the index of the pair that failed.
/// An error that is no pair's (the task capability, the count) leaves `rdi` = `u64::MAX`.
#[inline(never)]
fn task_cap_put_many(cur: *mut Thread, task_slot: u64, n: u64) -> SysResult {
    // SAFETY: the current thread is live and bound to a live task.
    let (t, task) = unsafe { (&mut *cur, (*cur).task) };
    t.frame.rdi = u64::MAX;
    let tt = task_cap(task, task_slot)?;
    if n > sawmill_abi::CAP_PUT_MAX as u64 {
        return Err(reject!(Error::Invalid, "too many capabilities in one put"));
    }
    for i in 0..n as usize {
        let w = crate::obj::utcb(cur).mr[i];
        t.frame.rdi = i as u64;
        cap::derive(task, w & 0xffff_ffff, tt, w >> 32, None, rights::ALL)?;
    }
    t.frame.rdi = n;
    Ok(())
}

/// `cap_delete` of `n` slots from the caller's message words (`Sys::CapDelete`), each revoked
/// first with `CAP_DELETE_REVOKE`: `rdi` is how many were deleted (empty ones are passed over).
#[inline(never)]
fn cap_delete_many(cur: *mut Thread, n: u64, flags: u64) -> SysResult {
    if n > sawmill_abi::CAP_PUT_MAX as u64 || flags & !sawmill_abi::CAP_DELETE_REVOKE != 0 {
        return Err(reject!(Error::Invalid, "too many slots or unknown flags"));
    }
    // SAFETY: the current thread is live and bound to a live task.
    let (t, task) = unsafe { (&mut *cur, (*cur).task) };
    let mut done = 0;
    for i in 0..n as usize {
        let slot = crate::obj::utcb(cur).mr[i];
        if flags & sawmill_abi::CAP_DELETE_REVOKE != 0 {
            // An empty slot has nothing to revoke; its delete below fails too.
            let _ = cap::revoke(task, slot);
        }
        if cap::delete(task, slot).is_ok() {
            done += 1;
        }
    }
    t.frame.rdi = done;
    Ok(())
}

/// `dma_bind`: out of line, so that the device calls leave the code of `dispatch` as it was.
#[inline(never)]
fn dma_bind(cur: *mut Thread, control: u64, bdf: u64, task_slot: u64) -> SysResult {
    // SAFETY: the current thread is live and bound to a live task.
    let (t, task) = unsafe { (&mut *cur, (*cur).task) };
    if cap::lookup(task, control)?.obj != Obj::Control {
        return Err(reject!(Error::WrongKind, "not the control capability"));
    }
    t.frame.rdi = iommu::bind(bdf, task_cap(task, task_slot)?)? as u64;
    Ok(())
}
