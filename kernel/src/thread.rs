//! Threads: creation, binding to a task (`thread_config`), start, the foreign-thread mode, and
//! their end (exit, kill, a fault verdict), after which the exception handler gets an EXIT
//! message.
use crate::arch::Frame;
use crate::cap;
use crate::endpoint;
use crate::error::SysResult;
use crate::factory::{self, charge, hdr};
use crate::mem::{phys, phys_to_virt, PAGE};
use crate::obj::{utcb, Factory, FxArea, Notification, State, Task, Thread, EXIT_KILLED};
use crate::paging;
use crate::sched;
use crate::state::kernel;
use alloc::boxed::Box;
use sawmill_abi::{layout, map, thread_state, Error, ForeignFrame, Utcb, FOREIGN_REDZONE};

pub fn new_thread(f: *mut Factory) -> Result<*mut Thread, Error> {
    let size = core::mem::size_of::<Thread>() as u64;
    charge(f, size)?;
    let mut fx = FxArea([0; 512]);
    // Default x87 control word and MXCSR (all exceptions masked), as after FNINIT.
    fx.0[0] = 0x7f;
    fx.0[1] = 0x03;
    fx.0[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    Ok(Box::into_raw(Box::new(Thread {
        frame: Frame::default(),
        fx,
        hdr: hdr(f, size),
        task: core::ptr::null_mut(),
        state: State::Inactive,
        prio: 0,
        run_ticks: 0,
        slice: sched::SLICE,
        utcb_pa: 0,
        utcb_va: 0,
        pager: None,
        exc: None,
        next: core::ptr::null_mut(),
        prev: core::ptr::null_mut(),
        ep: core::ptr::null_mut(),
        send_badge: 0,
        send_grant: false,
        send_call: false,
        kmsg: None,
        caller: core::ptr::null_mut(),
        server: core::ptr::null_mut(),
        notif: core::ptr::null_mut(),
        deadline: 0,
        timer: None,
        fs_base: 0,
        gs_base: 0,
        foreign: None,
        interrupt: None,
        started: false,
        zombie: false,
    })))
}

/// Stops a thread for good: out of every queue, partners told, UTCB unmapped and freed. Its
/// exception handler then receives an EXIT message with `status`, so whoever supervises the
/// thread learns of its end however it came about (exit, fault verdict, its task killed).
pub fn kill_thread(p: *mut Thread) {
    end_thread(p, EXIT_KILLED, true)
}

/// Ends a thread without telling its handler (the object itself is being freed).
pub fn kill_thread_silently(p: *mut Thread) {
    end_thread(p, EXIT_KILLED, false)
}

pub fn end_thread(p: *mut Thread, status: u64, notify: bool) {
    // SAFETY: p is a live thread object.
    let t = unsafe { &mut *p };
    if t.zombie {
        // Already ended; only its pending EXIT message remains. Drop it.
        endpoint::detach(p);
        t.zombie = false;
        t.state = State::Dead;
        return;
    }
    if t.state == State::Dead {
        return;
    }
    sched::dequeue_any(p);
    endpoint::detach(p);
    t.state = State::Dead;
    if kernel().fpu_owner == p {
        kernel().fpu_owner = core::ptr::null_mut();
    }
    if let Some(c) = t.pager.take() {
        cap::release(c);
    }
    unbind_interrupt(p);
    let exc = t.exc.take();
    if !t.task.is_null() {
        // SAFETY: the task outlives the binding (kill_task kills threads first).
        let task = unsafe { &mut *t.task };
        task.threads.retain(|&x| x != p);
        if t.utcb_pa != 0 {
            if !task.dead {
                paging::unmap(task.pml4, t.utcb_va, false);
                if kernel().loaded_cr3 == task.pml4 {
                    crate::arch::invlpg(t.utcb_va);
                }
            }
            phys().free_frame(t.utcb_pa);
            factory::uncharge(task.hdr.factory, PAGE);
            t.utcb_pa = 0;
        }
        t.task = core::ptr::null_mut();
    }
    if let Some(c) = exc {
        if notify && t.started {
            endpoint::send_exit(p, c, status);
        }
        cap::release(c);
    }
}

/// The thread ends itself.
pub fn exit(t: *mut Thread, status: u64) {
    end_thread(t, status, true);
}

/// `thread_start`: the bound, not yet started thread `th` runs at `rip` with `rsp`, `rdi` =
/// `arg`.
pub fn start(th: *mut Thread, rip: u64, rsp: u64, arg: u64) -> SysResult {
    // SAFETY: live thread (a capability holds it).
    let x = unsafe { &mut *th };
    if x.task.is_null() || x.state != State::Inactive {
        return Err(reject!(Error::Busy, "thread unbound or already started"));
    }
    if !paging::user_range_ok(rip, 1) || !paging::user_range_ok(rsp, 0) {
        return Err(reject!(Error::Invalid, "rip or rsp outside user space"));
    }
    x.frame = Frame::default();
    x.frame.rip = rip;
    x.frame.rsp = rsp;
    x.frame.rdi = arg;
    x.frame.cs = crate::arch::UCODE as u64;
    x.frame.ss = crate::arch::UDATA as u64;
    x.frame.rflags = 0x202;
    x.started = true;
    sched::make_ready(th);
    Ok(())
}

/// `set_tls` for the calling thread.
pub fn set_tls(cur: *mut Thread, fs: u64, gs: u64) -> SysResult {
    if fs >= layout::USER_END || gs >= layout::USER_END {
        return Err(reject!(Error::Invalid, "FS or GS base outside user space"));
    }
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    t.fs_base = fs;
    t.gs_base = gs;
    sched::reload();
    Ok(())
}

/// `thread_foreign`: thread `th` of task `task` runs foreign code outside `[lo, hi)`.
pub fn set_foreign(task: *mut Task, th: *mut Thread, entry: u64, lo: u64, hi: u64) -> SysResult {
    if !paging::user_range_ok(entry, 1) || lo > hi || !paging::user_range_ok(lo, hi - lo) {
        return Err(reject!(
            Error::Invalid,
            "entry or native range outside user space",
        ));
    }
    // SAFETY: live thread.
    let x = unsafe { &mut *th };
    if x.task != task || x.utcb_pa == 0 {
        return Err(reject!(
            Error::Invalid,
            "thread not bound to the caller's task",
        ));
    }
    x.foreign = Some((entry, lo, hi));
    Ok(())
}

/// Drops thread `t`'s interrupt binding, on both sides.
fn unbind_interrupt(t: *mut Thread) {
    // SAFETY: live thread; a bound notification is live (its destruction unbinds first).
    unsafe {
        if let Some((n, _)) = (*t).interrupt.take() {
            (*n).interrupt = core::ptr::null_mut();
        }
    }
}

/// `thread_interrupt`: a signal of notification `n` interrupts thread `th` (of `task`) in its
/// foreign code, which then continues at `entry` (0: unbind).
pub fn bind_interrupt(
    task: *mut Task,
    th: *mut Thread,
    n: *mut Notification,
    entry: u64,
) -> SysResult {
    // SAFETY: live thread and notification (the caller holds capabilities).
    let (x, nn) = unsafe { (&mut *th, &mut *n) };
    if x.task != task || x.utcb_pa == 0 {
        return Err(reject!(
            Error::Invalid,
            "thread not bound to the caller's task"
        ));
    }
    if entry != 0 && !paging::user_range_ok(entry, 1) {
        return Err(reject!(Error::Invalid, "entry outside user space"));
    }
    unbind_interrupt(th);
    if entry == 0 {
        return Ok(());
    }
    if !nn.interrupt.is_null() {
        unbind_interrupt(nn.interrupt);
    }
    nn.interrupt = th;
    x.interrupt = Some((n, entry));
    Ok(())
}

/// The notification bound to `t` was signalled: if `t` is ready but not running, stopped in
/// its foreign code by an interrupt (not in its native code, not in a system call, not waiting
/// for a page), it continues at its interrupt entry with its registers in `Utcb::foreign`.
pub fn interrupt(t: *mut Thread) {
    // SAFETY: a bound thread is live (its end unbinds).
    let x = unsafe { &mut *t };
    let (Some((_, entry)), Some((_, lo, hi))) = (x.interrupt, x.foreign) else {
        return;
    };
    if t == kernel().current
        || x.state != State::Ready
        || x.frame.vector == crate::arch::SYSCALL_VECTOR
        || (lo..hi).contains(&x.frame.rip)
        || x.utcb_pa == 0
    {
        return;
    }
    utcb(t).foreign = foreign_frame(&x.frame);
    let f = &mut x.frame;
    f.rip = entry;
    f.rsp = (f.rsp.wrapping_sub(FOREIGN_REDZONE)) & !15;
    f.rdi = x.utcb_va + core::mem::offset_of!(Utcb, foreign) as u64;
    f.rsi = 0;
    f.rdx = 0;
}

/// `thread_info`: how long thread `th` has run since it last waited (timer ticks) and its state
/// (`sawmill_abi::thread_state`).
pub fn info(th: *mut Thread) -> (u64, u64) {
    // SAFETY: live thread (the capability holds it).
    let x = unsafe { &*th };
    let state = match x.state {
        State::Inactive => thread_state::INACTIVE,
        State::Ready => thread_state::READY,
        State::Sending => thread_state::SENDING,
        State::Receiving => thread_state::RECEIVING,
        State::AwaitReply => thread_state::AWAIT_REPLY,
        State::Notify => thread_state::NOTIFY,
        State::Dead => thread_state::DEAD,
    };
    (x.run_ticks as u64, state)
}

/// `thread_regs`: copies thread `th`'s registers to `out` in `task`.
pub fn regs(task: *mut Task, th: *mut Thread, out: u64) -> SysResult {
    // SAFETY: live thread.
    let x = unsafe { &*th };
    let ff = foreign_frame(&x.frame);
    // SAFETY: ForeignFrame is plain old data.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            &ff as *const _ as *const u8,
            core::mem::size_of::<ForeignFrame>(),
        )
    };
    // SAFETY: live task.
    if !paging::copy_to_user(unsafe { (*task).pml4 }, out, bytes) {
        return Err(reject!(Error::Fault, "output buffer not mapped writable"));
    }
    Ok(())
}

/// A thread's user registers as the ABI hands them out.
fn foreign_frame(f: &Frame) -> ForeignFrame {
    let (rcx, r11) = f.user_rcx_r11();
    ForeignFrame {
        rax: f.rax,
        rbx: f.rbx,
        rcx,
        rdx: f.rdx,
        rsi: f.rsi,
        rdi: f.rdi,
        rbp: f.rbp,
        rsp: f.rsp,
        r8: f.r8,
        r9: f.r9,
        r10: f.r10,
        r11,
        r12: f.r12,
        r13: f.r13,
        r14: f.r14,
        r15: f.r15,
        rip: f.rip,
        rflags: f.rflags,
    }
}

/// [`foreign_frame`] stored straight into `dst` (the UTCB's frame), register by register: the
/// path of every reflected system call, where building the value first spilled half of it to
/// the stack (two references, so the compiler knows the frames do not overlap).
#[inline(always)]
fn store_foreign(dst: &mut ForeignFrame, f: &Frame) {
    let (rcx, r11) = f.user_rcx_r11();
    dst.rax = f.rax;
    dst.rbx = f.rbx;
    dst.rcx = rcx;
    dst.rdx = f.rdx;
    dst.rsi = f.rsi;
    dst.rdi = f.rdi;
    dst.rbp = f.rbp;
    dst.rsp = f.rsp;
    dst.r8 = f.r8;
    dst.r9 = f.r9;
    dst.r10 = f.r10;
    dst.r11 = r11;
    dst.r12 = f.r12;
    dst.r13 = f.r13;
    dst.r14 = f.r14;
    dst.r15 = f.r15;
    dst.rip = f.rip;
    dst.rflags = f.rflags;
}

/// K42-style trap reflection: hand the foreign system call to the emulation entry point in the
/// same task, with all registers saved in the UTCB.
pub fn reflect(cur: *mut Thread, entry: u64) {
    // SAFETY: live current thread with a UTCB.
    let t = unsafe { &mut *cur };
    let f = &mut t.frame;
    store_foreign(&mut utcb(cur).foreign, f);
    f.rip = entry;
    f.rsp = (f.rsp.wrapping_sub(FOREIGN_REDZONE)) & !15;
    f.rdi = t.utcb_va + core::mem::offset_of!(Utcb, foreign) as u64;
}

/// A fault handler's `DIVERT` verdict: the faulting thread `t` continues at `entry` in its own
/// task with all its registers saved in `Utcb::foreign` (rcx and r11 its own, not a system
/// call's), `rdi` = that frame, `rsi` = `a1`, `rdx` = `a2`, `rsp` below the red zone: a Linux
/// library turns the fault into a signal there. False (the thread then ends) if `entry` is
/// not a user address or the thread has no UTCB.
pub fn divert(t: *mut Thread, entry: u64, a1: u64, a2: u64) -> bool {
    // SAFETY: live thread (it was waiting for this verdict).
    let x = unsafe { &mut *t };
    if x.utcb_pa == 0 || !paging::user_range_ok(entry, 1) {
        return false;
    }
    utcb(t).foreign = foreign_frame(&x.frame);
    let f = &mut x.frame;
    f.rip = entry;
    f.rsp = (f.rsp.wrapping_sub(FOREIGN_REDZONE)) & !15;
    f.rdi = x.utcb_va + core::mem::offset_of!(Utcb, foreign) as u64;
    f.rsi = a1;
    f.rdx = a2;
    x.state = State::Ready;
    true
}

pub fn config(
    cur: *mut Thread,
    th_slot: u64,
    task_slot: u64,
    utcb_va: u64,
    pager: u64,
    exc: u64,
    prio: u64,
) -> SysResult {
    // SAFETY: live current thread.
    let me = unsafe { &mut *cur };
    let task = me.task;
    let th = cap::thread_cap(task, th_slot)?;
    let pg = cap::endpoint_cap_opt(task, pager)?;
    let ex = cap::endpoint_cap_opt(task, exc)?;
    // SAFETY: live task.
    let maxp = unsafe { (*task).max_prio } as u64;
    if prio > 255 {
        return Err(reject!(Error::Invalid, "priority above 255"));
    }
    // SAFETY: live thread.
    let x = unsafe { &mut *th };
    if x.state == State::Dead {
        return Err(reject!(Error::PeerGone, "thread has ended"));
    }
    if task_slot != u64::MAX {
        if !x.task.is_null() {
            return Err(reject!(Error::Busy, "thread already bound to a task"));
        }
        let tt = cap::task_cap(task, task_slot)?;
        if utcb_va & 0xfff != 0 || !paging::user_range_ok(utcb_va, PAGE) {
            return Err(reject!(
                Error::Invalid,
                "UTCB address unaligned or outside user space",
            ));
        }
        // SAFETY: live task.
        let tk = unsafe { &mut *tt };
        if kernel().mapdb.overlaps(tk.id, utcb_va, PAGE)
            || paging::translate(tk.pml4, utcb_va).is_some()
        {
            return Err(reject!(Error::Busy, "UTCB address already mapped"));
        }
        charge(tk.hdr.factory, PAGE)?;
        let Some(pa) = phys().alloc_frame() else {
            factory::uncharge(tk.hdr.factory, PAGE);
            return Err(Error::NoMemory.into());
        };
        let mut alloc = || factory::pt_alloc(tt);
        if !paging::map(
            tk.pml4,
            utcb_va,
            pa,
            paging::pte_flags(map::READ | map::WRITE, false),
            false,
            &mut alloc,
        ) {
            phys().free_frame(pa);
            factory::uncharge(tk.hdr.factory, PAGE);
            return Err(Error::NoMemory.into());
        }
        // SAFETY: fresh zeroed frame in the direct map.
        unsafe { (*(phys_to_virt(pa) as *mut Utcb)).user[0] = utcb_va };
        x.utcb_pa = pa;
        x.utcb_va = utcb_va;
        x.gs_base = utcb_va;
        x.task = tt;
        tk.threads.push(th);
    } else if x.task.is_null() {
        return Err(reject!(Error::Invalid, "thread bound to no task"));
    }
    if let Some(c) = pg {
        cap::hold(&c);
        if let Some(o) = x.pager.replace(c) {
            cap::release(o);
        }
    }
    if let Some(c) = ex {
        cap::hold(&c);
        if let Some(o) = x.exc.replace(c) {
            cap::release(o);
        }
    }
    // Re-queue under the new priority if it is waiting to run.
    sched::dequeue_any(th);
    x.prio = prio.min(maxp) as u8;
    if x.state == State::Ready && th != kernel().current {
        sched::enqueue(th);
    }
    Ok(())
}
