//! Typed wrappers for every system call. Each returns `Err(Error)` for a non-zero `rax`.
use core::arch::asm;
use sawmill_abi::{Error, ObjKind, Sys};

/// Raw system call with up to six arguments; returns (rax, rdi, rsi).
#[inline(always)]
pub fn raw(n: Sys, a: [u64; 6]) -> (u64, u64, u64) {
    raw_any(n as u64, a)
}

/// A raw call with an arbitrary number (for tests of the kernel's checking); returns rax.
#[inline(always)]
pub fn raw_num(n: u64, a: [u64; 6]) -> u64 {
    raw_any(n, a).0
}

#[inline(always)]
fn raw_any(n: u64, a: [u64; 6]) -> (u64, u64, u64) {
    let (r, o1, o2);
    // SAFETY: system calls only read the argument registers and write the documented results;
    // rcx and r11 are clobbered by `syscall`; the kernel rejects unknown numbers.
    unsafe {
        asm!("syscall",
            inlateout("rax") n => r,
            inlateout("rdi") a[0] => o1,
            inlateout("rsi") a[1] => o2,
            inlateout("rdx") a[2] => _,
            inlateout("r10") a[3] => _,
            inlateout("r8") a[4] => _,
            inlateout("r9") a[5] => _,
            lateout("rcx") _, lateout("r11") _,
            options(nostack));
    }
    (r, o1, o2)
}

#[inline(always)]
fn res(r: u64) -> Result<(), Error> {
    if r == 0 {
        Ok(())
    } else {
        Err(Error::from_raw(r))
    }
}

#[inline(always)]
fn call(n: Sys, a: [u64; 6]) -> Result<(), Error> {
    res(raw(n, a).0)
}

pub fn null() -> u64 {
    raw(Sys::Null, [0; 6]).0
}
pub fn yield_now() {
    let _ = raw(Sys::Yield, [0; 6]);
}
/// Writes to the kernel debug console through the console capability in `slots::CONSOLE`.
pub fn debug_write(b: &[u8]) -> Result<(), Error> {
    call(
        Sys::DebugWrite,
        [
            crate::slots::CONSOLE,
            b.as_ptr() as u64,
            b.len() as u64,
            0,
            0,
            0,
        ],
    )
}
pub fn cap_copy(src: u64, dst: u64) -> Result<(), Error> {
    call(Sys::CapCopy, [src, dst, 0, 0, 0, 0])
}
pub fn cap_mint(src: u64, dst: u64, badge: u64, rights: u64) -> Result<(), Error> {
    call(Sys::CapMint, [src, dst, badge, rights, 0, 0])
}
/// `cap_mint` under a watch: when the last capability carrying `badge` is gone, a
/// `label::NO_SENDERS` message (word 0 = `badge`) arrives on the endpoint in slot `notice`.
pub fn cap_mint_watched(
    src: u64,
    dst: u64,
    badge: u64,
    rights: u64,
    notice: u64,
) -> Result<(), Error> {
    let flags = sawmill_abi::mint::NO_SENDERS;
    call(Sys::CapMint, [src, dst, badge, rights, flags, notice])
}
pub fn cap_delete(slot: u64) -> Result<(), Error> {
    call(Sys::CapDelete, [slot, 0, 0, 0, 0, 0])
}
/// Deletes every slot of `slots` ([`sawmill_abi::CAP_PUT_MAX`] a call), each revoked first if
/// `revoke`; empty ones are passed over. Returns how many were deleted.
pub fn cap_delete_many(slots: &[u64], revoke: bool) -> Result<u64, Error> {
    let flags = if revoke {
        sawmill_abi::CAP_DELETE_REVOKE
    } else {
        0
    };
    let mut done = 0;
    for chunk in slots.chunks(sawmill_abi::CAP_PUT_MAX) {
        crate::utcb().mr[..chunk.len()].copy_from_slice(chunk);
        let (r, n, _) = raw(Sys::CapDelete, [0, chunk.len() as u64, flags, 0, 0, 0]);
        res(r)?;
        done += n;
    }
    Ok(done)
}
pub fn cap_revoke(slot: u64) -> Result<(), Error> {
    call(Sys::CapRevoke, [slot, 0, 0, 0, 0, 0])
}
pub fn factory_create(factory: u64, kind: ObjKind, dst: u64, arg: u64) -> Result<(), Error> {
    call(Sys::FactoryCreate, [factory, kind as u64, dst, arg, 0, 0])
}
pub fn task_cap_put(task: u64, src: u64, dst: u64) -> Result<(), Error> {
    call(Sys::TaskCapPut, [task, src, dst, 0, 0, 0])
}
/// [`task_cap_put`] of every `(src, dst)` pair in order, [`sawmill_abi::CAP_PUT_MAX`] a call.
/// On an error, the index of the pair that failed (those before it are placed) and the error;
/// an error of the task capability itself comes as the first pair's of the call.
pub fn task_cap_put_many(task: u64, pairs: &[(u64, u64)]) -> Result<(), (usize, Error)> {
    for (c, chunk) in pairs.chunks(sawmill_abi::CAP_PUT_MAX).enumerate() {
        let base = c * sawmill_abi::CAP_PUT_MAX;
        let mr = &mut crate::utcb().mr;
        for (i, &(src, dst)) in chunk.iter().enumerate() {
            if src >> 32 != 0 || dst >> 32 != 0 {
                return Err((base + i, Error::Invalid));
            }
            mr[i] = src | dst << 32;
        }
        let (r, at, _) = raw(Sys::TaskCapPut, [task, 0, 0, chunk.len() as u64, 0, 0]);
        // An error of no pair (the task capability) counts as the first pair's.
        let at = if at == u64::MAX { 0 } else { at as usize };
        res(r).map_err(|e| (base + at.min(chunk.len()), e))?;
    }
    Ok(())
}
pub fn task_map(task: u64, src: u64, dst: u64, pages: u64, flags: u64) -> Result<(), Error> {
    call(Sys::TaskMap, [task, src, dst, pages, flags, 0])
}
/// Task `task` borrows `source`'s page table of the 2 MiB window at `vaddr` (see
/// `Sys::TaskLink`).
pub fn task_link(task: u64, source: u64, vaddr: u64) -> Result<(), Error> {
    call(Sys::TaskLink, [task, source, vaddr, 0, 0, 0])
}
pub fn unmap(vaddr: u64, pages: u64, flags: u64) -> Result<(), Error> {
    call(Sys::Unmap, [vaddr, pages, flags, 0, 0, 0])
}
/// Revokes every mapping derived from ours of `pages` pages at `vaddr`; returns how many of the
/// pages' frames have DMA pins (`Sys::Unmap` with `UNMAP_PINS`).
pub fn unmap_counting_pins(vaddr: u64, pages: u64) -> Result<u64, Error> {
    let (r, pinned, _) = raw(Sys::Unmap, [vaddr, pages, sawmill_abi::UNMAP_PINS, 0, 0, 0]);
    res(r).map(|_| pinned)
}
/// Lowers every mapping derived from ours of `pages` pages at `vaddr` to read-only, keeping
/// them, except those of frames with DMA pins; returns how many pages were left for their pins
/// (`Sys::Unmap` with `UNMAP_WRITE`).
pub fn write_protect(vaddr: u64, pages: u64) -> Result<u64, Error> {
    let (r, pinned, _) = raw(
        Sys::Unmap,
        [vaddr, pages, sawmill_abi::UNMAP_WRITE, 0, 0, 0],
    );
    res(r).map(|_| pinned)
}
/// `task` = u64::MAX to reconfigure an already bound thread; pager/exc = u64::MAX for none.
pub fn thread_config(
    thread: u64,
    task: u64,
    utcb: u64,
    pager: u64,
    exc: u64,
    prio: u64,
) -> Result<(), Error> {
    call(Sys::ThreadConfig, [thread, task, utcb, pager, exc, prio])
}
pub fn thread_start(thread: u64, rip: u64, rsp: u64, arg: u64) -> Result<(), Error> {
    call(Sys::ThreadStart, [thread, rip, rsp, arg, 0, 0])
}
pub fn irq_get(ctl: u64, line: u64, dst: u64) -> Result<(), Error> {
    call(Sys::IrqGet, [ctl, line, dst, 0, 0, 0])
}
pub fn irq_bind(irq: u64, notif: u64, bits: u64) -> Result<(), Error> {
    call(Sys::IrqBind, [irq, notif, bits, 0, 0, 0])
}
pub fn irq_ack(irq: u64) -> Result<(), Error> {
    call(Sys::IrqAck, [irq, 0, 0, 0, 0, 0])
}
pub fn notify_signal(n: u64, bits: u64) -> Result<(), Error> {
    call(Sys::NotifySignal, [n, bits, 0, 0, 0, 0])
}
pub fn notify_wait(n: u64, flags: u64) -> Result<u64, Error> {
    let (r, bits, _) = raw(Sys::NotifyWait, [n, flags, 0, 0, 0, 0]);
    res(r).map(|_| bits)
}
/// Waits on notification `n` until a bit comes (its bits) or the time-stamp counter reaches
/// `deadline` (`WouldBlock`).
pub fn notify_wait_until(n: u64, deadline: u64) -> Result<u64, Error> {
    let (r, bits, _) = raw(
        Sys::NotifyWait,
        [n, sawmill_abi::NOTIFY_DEADLINE, deadline, 0, 0, 0],
    );
    res(r).map(|_| bits)
}
pub fn ioport_give(io: u64, task: u64, base: u64, count: u64) -> Result<(), Error> {
    call(Sys::IoPortGive, [io, task, base, count, 0, 0])
}
pub fn shutdown(control: u64, code: u64) -> Result<(), Error> {
    call(Sys::Shutdown, [control, code, 0, 0, 0, 0])
}
pub fn kernel_info(which: u64) -> Result<u64, Error> {
    let (r, v, _) = raw(Sys::KernelInfo, [which, 0, 0, 0, 0, 0]);
    res(r).map(|_| v)
}
pub fn thread_exit(status: u64) -> ! {
    let _ = raw(Sys::ThreadExit, [status, 0, 0, 0, 0, 0]);
    loop {
        core::hint::spin_loop();
    }
}
pub fn set_tls(fs: u64, gs: u64) -> Result<(), Error> {
    call(Sys::SetTls, [fs, gs, 0, 0, 0, 0])
}
pub fn thread_foreign(thread: u64, entry: u64, lo: u64, hi: u64) -> Result<(), Error> {
    call(Sys::ThreadForeign, [thread, entry, lo, hi, 0, 0])
}
/// A signal of `notification` interrupts foreign `thread` in its foreign code: it continues at
/// `entry` (see `Sys::ThreadInterrupt`); entry 0 unbinds.
pub fn thread_interrupt(thread: u64, notification: u64, entry: u64) -> Result<(), Error> {
    call(Sys::ThreadInterrupt, [thread, notification, entry, 0, 0, 0])
}
pub fn map_phys(control: u64, paddr: u64, vaddr: u64, pages: u64, flags: u64) -> Result<(), Error> {
    call(Sys::MapPhys, [control, paddr, vaddr, pages, flags, 0])
}
pub fn factory_info(f: u64) -> Result<(u64, u64), Error> {
    let (r, used, limit) = raw(Sys::FactoryInfo, [f, 0, 0, 0, 0, 0]);
    res(r).map(|_| (used, limit))
}
pub fn task_kill(task: u64) -> Result<(), Error> {
    call(Sys::TaskKill, [task, 0, 0, 0, 0, 0])
}
pub fn thread_regs(thread: u64, out: &mut sawmill_abi::ForeignFrame) -> Result<(), Error> {
    call(Sys::ThreadRegs, [thread, out as *mut _ as u64, 0, 0, 0, 0])
}
/// `Sys::ThreadInfo`: (timer ticks the thread has run since it last waited, its state).
pub fn thread_info(thread: u64) -> Result<(u64, u64), Error> {
    let (r, ticks, state) = raw(Sys::ThreadInfo, [thread, 0, 0, 0, 0, 0]);
    res(r).map(|()| (ticks, state))
}

pub fn translate(vaddr: u64) -> Result<u64, Error> {
    let (r, pa, _) = raw(Sys::Translate, [vaddr, 0, 0, 0, 0, 0]);
    res(r).map(|_| pa)
}
/// Copies the page at `src` to the page at `dst` (both ours, page-aligned) in the kernel: a
/// source revoked before the copy gives `Fault`, never a page fault (`Sys::PageCopy`).
pub fn page_copy(src: u64, dst: u64) -> Result<(), Error> {
    call(Sys::PageCopy, [src, dst, 0, 0, 0, 0])
}
/// Which of `pages` (at most 64) pages `task` has at `dst`, lent from ours at `src`, may hold
/// data: bit i for page i (`Sys::TaskDirty`).
pub fn task_dirty(task: u64, src: u64, dst: u64, pages: u64) -> Result<u64, Error> {
    let (r, mask, _) = raw(Sys::TaskDirty, [task, src, dst, pages, 0, 0]);
    res(r).map(|_| mask)
}
/// Empties `task` for another program, keeping the pages of `runs` (src, dst, pages) lent from
/// ours where they are (at most `sawmill_abi::RESET_RUNS`; `lender`: the task whose windows it
/// keeps borrowing, `u64::MAX` none). Returns the pages kept (`Sys::TaskReset`).
pub fn task_reset(task: u64, lender: u64, runs: &[(u64, u64, u64)]) -> Result<u64, Error> {
    if runs.len() > sawmill_abi::RESET_RUNS {
        return Err(Error::Invalid);
    }
    let mr = &mut crate::utcb().mr;
    for (i, &(src, dst, pages)) in runs.iter().enumerate() {
        mr[3 * i..3 * i + 3].copy_from_slice(&[src, dst, pages]);
    }
    let (r, kept, _) = raw(Sys::TaskReset, [task, lender, runs.len() as u64, 0, 0, 0]);
    res(r).map(|_| kept)
}
/// The physical address behind `vaddr` and the number of DMA pins on its frame.
pub fn translate_pins(vaddr: u64) -> Result<(u64, u64), Error> {
    let flags = sawmill_abi::pin::TRANSLATE_PINS;
    let (r, pa, pins) = raw(Sys::Translate, [vaddr, flags, 0, 0, 0, 0]);
    res(r).map(|_| (pa, pins))
}
/// Pins `pages` pages from `vaddr` for DMA (`sawmill_abi::pin`); returns the first page's
/// physical address; page i's is in `utcb().mr[i]`.
pub fn pin(vaddr: u64, pages: u64, flags: u64) -> Result<u64, Error> {
    let (r, pa, _) = raw(Sys::Pin, [vaddr, pages, flags, 0, 0, 0]);
    res(r).map(|_| pa)
}
/// Releases one pin on the frame at `paddr`.
pub fn unpin(paddr: u64) -> Result<(), Error> {
    call(Sys::Unpin, [paddr, 0, 0, 0, 0, 0])
}
/// Releases every pin this task holds; returns how many.
pub fn unpin_all() -> Result<u64, Error> {
    let (r, n, _) = raw(Sys::Unpin, [0, sawmill_abi::pin::UNPIN_ALL, 0, 0, 0, 0]);
    res(r).map(|_| n)
}
/// Binds PCI device `bdf` to `task`'s DMA domain; true if an IOMMU confines it.
pub fn dma_bind(control: u64, bdf: u64, task: u64) -> Result<bool, Error> {
    let (r, confined, _) = raw(Sys::DmaBind, [control, bdf, task, 0, 0, 0]);
    res(r).map(|_| confined != 0)
}
/// Shares `pages` of the caller's pages at `vaddr` with its devices; returns the device address.
pub fn dma_map(vaddr: u64, pages: u64) -> Result<u64, Error> {
    let (r, dev, _) = raw(Sys::DmaMap, [vaddr, pages, 0, 0, 0, 0]);
    res(r).map(|_| dev)
}

/// The time-stamp counter after `lfence` (under QEMU `-icount` it counts guest instructions).
#[inline(always)]
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: rdtsc is allowed in user mode and has no side effects.
    unsafe { asm!("lfence", "rdtsc", out("eax") lo, out("edx") hi, options(nostack, nomem)) };
    (hi as u64) << 32 | lo as u64
}
