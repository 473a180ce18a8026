//! System-call dispatch. Every argument is checked here or in the function it is handed to; a
//! bad argument is an error code in `rax`, never a kernel fault.
use crate::arch::Frame;
use crate::ipc;
use crate::mem::{self, phys, phys_to_virt, PAGE};
use crate::obj::{self, k, Cap, Notification, Obj, State, Task, Thread};
use crate::paging;
use crate::sched;
use sawmill_abi::{
    kinfo, layout, map, rights, Error, ForeignFrame, ObjKind, Sys, Utcb, FOREIGN_REDZONE,
    NOTIFY_NONBLOCK, SYS_COUNT,
};

type R = Result<(), Error>;

fn cap_of(t: *mut Task, slot: u64, need: u64) -> Result<Cap, Error> {
    let c = obj::lookup(t, slot)?;
    if !obj::has(&c, need) {
        return Err(Error::NoRights);
    }
    Ok(c)
}

fn task_cap(t: *mut Task, slot: u64) -> Result<*mut Task, Error> {
    match cap_of(t, slot, rights::CONTROL)?.obj {
        Obj::Task(p) => {
            // SAFETY: capabilities point at live objects.
            if unsafe { (*p).dead } {
                return Err(Error::PeerGone);
            }
            Ok(p)
        }
        _ => Err(Error::WrongKind),
    }
}

fn thread_cap(t: *mut Task, slot: u64) -> Result<*mut Thread, Error> {
    match cap_of(t, slot, rights::CONTROL)?.obj {
        Obj::Thread(p) => Ok(p),
        _ => Err(Error::WrongKind),
    }
}

fn endpoint_cap_opt(t: *mut Task, slot: u64) -> Result<Option<Cap>, Error> {
    if slot == u64::MAX {
        return Ok(None);
    }
    let c = cap_of(t, slot, rights::SEND)?;
    match c.obj {
        Obj::Endpoint(_) => Ok(Some(c)),
        _ => Err(Error::WrongKind),
    }
}

/// Signals a notification, waking its waiter.
pub fn signal(n: *mut Notification, bits: u64) {
    // SAFETY: live notification (held by a capability or an IRQ binding).
    let n = unsafe { &mut *n };
    n.bits |= bits;
    let w = n.waiter;
    if !w.is_null() && n.bits != 0 {
        n.waiter = core::ptr::null_mut();
        // SAFETY: the waiter is live (kill clears the binding).
        let wt = unsafe { &mut *w };
        wt.notif = core::ptr::null_mut();
        wt.frame.rdi = n.bits;
        n.bits = 0;
        sched::wake_with(w, 0);
    }
}

#[no_mangle]
extern "C" fn syscall_dispatch() -> ! {
    let cur = k().current;
    // SAFETY: the current thread is live; its frame was just saved by the entry stub.
    let t = unsafe { &*cur };
    // `call` and `reply_recv` of a native thread try the IPC fast path first, here, where no
    // value lives across a call, so that the compiler need not save registers on this path.
    if t.foreign.is_none() {
        match t.frame.rax {
            1 => ipc::fast_call(cur),
            2 => ipc::fast_reply_recv(cur),
            _ => {}
        }
    }
    dispatch_rest()
}

/// Everything `syscall_dispatch` does not finish: reflection of foreign threads' system calls,
/// the fast `send`, and the general path.
#[inline(never)]
fn dispatch_rest() -> ! {
    let cur = k().current;
    // SAFETY: as in syscall_dispatch.
    let t = unsafe { &*cur };
    if let Some((entry, lo, hi)) = t.foreign {
        let rip = t.frame.rip;
        if rip < lo || rip >= hi {
            reflect(cur, entry);
            sched::finish();
        }
        // A foreign thread calling from inside its native range is treated as native.
        match t.frame.rax {
            1 => ipc::fast_call(cur),
            2 => ipc::fast_reply_recv(cur),
            _ => {}
        }
    }
    if t.frame.rax == 3 {
        ipc::fast_send(cur);
    }
    slow(cur)
}

/// Every system call but the IPC fast path (part of `dispatch_rest`, already out of line).
#[inline(always)]
fn slow(cur: *mut Thread) -> ! {
    let r = dispatch(cur);
    // SAFETY: the thread may have died during the call; only touch it if it is still current.
    if k().current == cur {
        if let Err(e) = r {
            unsafe { (*cur).frame.rax = e as u64 };
        }
    }
    sched::finish()
}

/// `debug_write`: the 4 KiB bounce buffer lives only in this call's frame.
#[inline(never)]
fn debug_write(task: *mut Task, ptr: u64, len: u64) -> R {
    if len > 4096 {
        return Err(Error::Invalid);
    }
    let mut buf = [0u8; 4096];
    // SAFETY: live task.
    let pml4 = unsafe { (*task).pml4 };
    if !paging::copy_from_user(pml4, ptr, &mut buf[..len as usize]) {
        return Err(Error::Fault);
    }
    crate::serial::write(&buf[..len as usize]);
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

/// K42-style trap reflection: hand the foreign system call to the emulation entry point in the
/// same task, with all registers saved in the UTCB.
fn reflect(cur: *mut Thread, entry: u64) {
    // SAFETY: live current thread with a UTCB.
    let t = unsafe { &mut *cur };
    let f = &mut t.frame;
    let ff = foreign_frame(f);
    ipc::utcb(cur).foreign = ff;
    f.rip = entry;
    f.rsp = (f.rsp.wrapping_sub(FOREIGN_REDZONE)) & !15;
    f.rdi = t.utcb_va + core::mem::offset_of!(Utcb, foreign) as u64;
}

fn ok(cur: *mut Thread) -> R {
    // SAFETY: live current thread.
    unsafe { (*cur).frame.rax = 0 };
    Ok(())
}

fn dispatch(cur: *mut Thread) -> R {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let task = t.task;
    let f = &t.frame;
    let (a0, a1, a2, a3, a4, a5) = (f.rdi, f.rsi, f.rdx, f.r10, f.r8, f.r9);
    if f.rax >= SYS_COUNT {
        return Err(Error::NoSys);
    }
    // SAFETY: checked against SYS_COUNT, and Sys is a dense repr(u64) enum.
    let sys: Sys = unsafe { core::mem::transmute(f.rax) };
    let t = unsafe { &mut *cur };
    match sys {
        Sys::Null => ok(cur),
        Sys::Call => Ok(ipc::sys_call(cur)),
        Sys::ReplyRecv => Ok(ipc::sys_reply_recv(cur)),
        Sys::Send => Ok(ipc::sys_send(cur)),
        Sys::Recv => Ok(ipc::sys_recv(cur)),
        Sys::Yield => {
            t.slice = sched::SLICE;
            t.frame.rax = 0;
            sched::enqueue(cur);
            k().current = core::ptr::null_mut();
            Ok(())
        }
        Sys::DebugWrite => {
            // The console is a capability like everything else: no task prints by default.
            if obj::lookup(task, a0)?.obj != Obj::Console {
                return Err(Error::WrongKind);
            }
            debug_write(task, a1, a2)?;
            ok(cur)
        }
        Sys::CapCopy => {
            obj::derive(task, a0, task, a1, None, rights::ALL)?;
            ok(cur)
        }
        Sys::CapMint => {
            obj::derive(
                task,
                a0,
                task,
                a1,
                if a2 != 0 { Some(a2) } else { None },
                a3,
            )?;
            ok(cur)
        }
        Sys::CapDelete => {
            obj::delete(task, a0)?;
            ok(cur)
        }
        Sys::CapRevoke => {
            obj::revoke(task, a0)?;
            ok(cur)
        }
        Sys::FactoryCreate => {
            let c = cap_of(task, a0, rights::CONTROL)?;
            let Obj::Factory(fac) = c.obj else {
                return Err(Error::WrongKind);
            };
            let dst = obj::slot(task, a2)?;
            if !obj::cs(k().cspace.is_free(dst))? {
                return Err(Error::SlotFull);
            }
            let o = match a1 {
                x if x == ObjKind::Task as u64 => {
                    // arg: slots in bits 0..32, the new task's priority ceiling in bits 32..40
                    // (0 = ours); never above our own ceiling.
                    // SAFETY: live task.
                    let mine = unsafe { (*task).max_prio };
                    let want = ((a3 >> 32) & 0xff) as u8;
                    let mp = if want == 0 { mine } else { want.min(mine) };
                    if a3 >> 40 != 0 {
                        return Err(Error::Invalid);
                    }
                    Obj::Task(obj::new_task(fac, a3 & 0xffff_ffff, mp)?)
                }
                x if x == ObjKind::Thread as u64 => Obj::Thread(obj::new_thread(fac)?),
                x if x == ObjKind::Endpoint as u64 => Obj::Endpoint(obj::new_endpoint(fac)?),
                x if x == ObjKind::Notification as u64 => {
                    Obj::Notification(obj::new_notification(fac)?)
                }
                x if x == ObjKind::Factory as u64 => {
                    if a3 > (1 << 40) {
                        return Err(Error::Invalid);
                    }
                    Obj::Factory(obj::new_factory(fac, a3)?)
                }
                _ => return Err(Error::Invalid),
            };
            obj::insert_root(
                task,
                a2,
                Cap {
                    obj: o,
                    rights: rights::ALL,
                    badge: 0,
                },
            )?;
            ok(cur)
        }
        Sys::TaskCapPut => {
            let tt = task_cap(task, a0)?;
            obj::derive(task, a1, tt, a2, None, rights::ALL)?;
            ok(cur)
        }
        Sys::TaskMap => {
            let tt = task_cap(task, a0)?;
            ipc::map_pages(task, a1, tt, a2, a3, a4)?;
            ok(cur)
        }
        Sys::Unmap => {
            if a1 > (1 << 20) || a0 & 0xfff != 0 || !paging::user_range_ok(a0, a1 * PAGE) {
                return Err(Error::Invalid);
            }
            // SAFETY: live task.
            let id = unsafe { (*task).id };
            let mut gone = alloc::vec::Vec::new();
            for i in 0..a1 {
                k().mapdb.revoke(
                    id,
                    a0 + i * PAGE,
                    a2 & sawmill_abi::UNMAP_SELF != 0,
                    &mut gone,
                );
            }
            obj::unmap_removed(&gone);
            ok(cur)
        }
        Sys::ThreadConfig => thread_config(cur, a0, a1, a2, a3, a4, a5),
        Sys::ThreadStart => {
            let th = thread_cap(task, a0)?;
            // SAFETY: live thread.
            let x = unsafe { &mut *th };
            if x.task.is_null() || x.state != State::Inactive {
                return Err(Error::Busy);
            }
            if !paging::user_range_ok(a1, 1) || !paging::user_range_ok(a2, 0) {
                return Err(Error::Invalid);
            }
            x.frame = Frame::default();
            x.frame.rip = a1;
            x.frame.rsp = a2;
            x.frame.rdi = a3;
            x.frame.cs = crate::arch::UCODE as u64;
            x.frame.ss = crate::arch::UDATA as u64;
            x.frame.rflags = 0x202;
            x.started = true;
            t.frame.rax = 0;
            sched::make_ready(th);
            Ok(())
        }
        Sys::IrqGet => {
            let c = obj::lookup(task, a0)?;
            if c.obj != Obj::IrqControl {
                return Err(Error::WrongKind);
            }
            if a1 >= 16 || a1 == 0 || a1 == 2 {
                return Err(Error::Invalid);
            }
            // A minted IRQ-control capability names the lines it may hand out (badge bit n).
            if c.badge != 0 && c.badge & (1 << a1) == 0 {
                return Err(Error::NoRights);
            }
            obj::insert_root(
                task,
                a2,
                Cap {
                    obj: Obj::Irq(a1 as u8),
                    rights: rights::ALL,
                    badge: 0,
                },
            )?;
            ok(cur)
        }
        Sys::IrqBind => {
            let c = obj::lookup(task, a0)?;
            let Obj::Irq(line) = c.obj else {
                return Err(Error::WrongKind);
            };
            let n = cap_of(task, a1, rights::SEND)?;
            let Obj::Notification(np) = n.obj else {
                return Err(Error::WrongKind);
            };
            obj::incref(n.obj);
            let old = k().irqs[line as usize].notif;
            if !old.is_null() {
                obj::release(Cap {
                    obj: Obj::Notification(old),
                    rights: 0,
                    badge: 0,
                });
            }
            let l = &mut k().irqs[line as usize];
            l.notif = np;
            l.bits = a2;
            crate::trap::pic_unmask(line);
            ok(cur)
        }
        Sys::IrqAck => {
            let c = obj::lookup(task, a0)?;
            let Obj::Irq(line) = c.obj else {
                return Err(Error::WrongKind);
            };
            crate::trap::pic_unmask(line);
            ok(cur)
        }
        Sys::NotifySignal => {
            let c = cap_of(task, a0, rights::SEND)?;
            let Obj::Notification(n) = c.obj else {
                return Err(Error::WrongKind);
            };
            t.frame.rax = 0;
            signal(n, a1);
            Ok(())
        }
        Sys::NotifyWait => {
            let c = cap_of(task, a0, rights::RECV)?;
            let Obj::Notification(np) = c.obj else {
                return Err(Error::WrongKind);
            };
            // SAFETY: live notification.
            let n = unsafe { &mut *np };
            if n.bits != 0 {
                t.frame.rdi = n.bits;
                n.bits = 0;
                return ok(cur);
            }
            if a1 & NOTIFY_NONBLOCK != 0 {
                return Err(Error::WouldBlock);
            }
            if !n.waiter.is_null() {
                return Err(Error::Busy);
            }
            n.waiter = cur;
            t.notif = np;
            t.state = State::Notify;
            Ok(())
        }
        Sys::IoPortGive => {
            let c = obj::lookup(task, a0)?;
            if c.obj != Obj::IoControl {
                return Err(Error::WrongKind);
            }
            let tt = task_cap(task, a1)?;
            if a2 >= 65536 || a3 == 0 || a2 + a3 > 65536 {
                return Err(Error::Invalid);
            }
            // A minted I/O-control capability covers only its port window (see abi::io_window).
            if c.badge != 0 {
                let (lo, n) = sawmill_abi::io_window(c.badge);
                if a2 < lo || a2 + a3 > lo + n {
                    return Err(Error::NoRights);
                }
            }
            // SAFETY: live task.
            let tk = unsafe { &mut *tt };
            if tk.io.is_none() {
                obj::charge(tk.hdr.factory, 8192)?;
                tk.io = Some(alloc::boxed::Box::new([0xff; 8192]));
            }
            let bm = tk.io.as_mut().unwrap();
            for p in a2..a2 + a3 {
                bm[(p / 8) as usize] &= !(1 << (p % 8));
            }
            if k().io_loaded == tt {
                sched::clear_io();
            }
            sched::reload();
            ok(cur)
        }
        Sys::Shutdown => {
            let c = obj::lookup(task, a0)?;
            if c.obj != Obj::Control {
                return Err(Error::WrongKind);
            }
            crate::shutdown((a1 & 0xf) as u8)
        }
        Sys::KernelInfo => {
            t.frame.rdi = match a0 {
                kinfo::KMEM_FREE => mem::kmem_free(),
                kinfo::TICKS => k().ticks,
                kinfo::USER_FRAMES => phys().user_frames,
                x if (kinfo::USER_RANGES..kinfo::USER_RANGES + 2 * mem::MAX_RANGES as u64)
                    .contains(&x) =>
                {
                    let i = ((x - kinfo::USER_RANGES) / 2) as usize;
                    let r = if i < phys().nuser {
                        phys().user[i]
                    } else {
                        mem::Range { start: 0, end: 0 }
                    };
                    if (x - kinfo::USER_RANGES) % 2 == 0 {
                        r.start
                    } else {
                        r.end
                    }
                }
                _ => return Err(Error::Invalid),
            };
            ok(cur)
        }
        Sys::ThreadExit => {
            ipc::exit_thread(cur, a0);
            Ok(())
        }
        Sys::SetTls => {
            if a0 >= layout::USER_END || a1 >= layout::USER_END {
                return Err(Error::Invalid);
            }
            t.fs_base = a0;
            t.gs_base = a1;
            sched::reload();
            ok(cur)
        }
        Sys::ThreadForeign => {
            let th = thread_cap(task, a0)?;
            if !paging::user_range_ok(a1, 1) || a2 > a3 || !paging::user_range_ok(a2, a3 - a2) {
                return Err(Error::Invalid);
            }
            // SAFETY: live thread.
            let x = unsafe { &mut *th };
            if x.task != task || x.utcb_pa == 0 {
                return Err(Error::Invalid);
            }
            x.foreign = Some((a1, a2, a3));
            ok(cur)
        }
        Sys::MapPhys => {
            let c = obj::lookup(task, a0)?;
            if c.obj != Obj::Control {
                return Err(Error::WrongKind);
            }
            if a1 & 0xfff != 0
                || a2 & 0xfff != 0
                || a3 == 0
                || a3 > 65536
                || a1 >= (1 << 46)
                || !paging::user_range_ok(a2, a3 * PAGE)
            {
                return Err(Error::Invalid);
            }
            for i in 0..a3 {
                let pa = a1 + i * PAGE;
                let kk = k();
                if kk.ram[..kk.nram]
                    .iter()
                    .any(|r| pa >= r.start && pa < r.end)
                {
                    return Err(Error::Invalid);
                }
            }
            for i in 0..a3 {
                ipc::map_root(
                    task,
                    a2 + i * PAGE,
                    a1 + i * PAGE,
                    map::READ | map::WRITE | map::UNCACHED,
                )?;
            }
            ok(cur)
        }
        Sys::FactoryInfo => {
            let c = obj::lookup(task, a0)?;
            let Obj::Factory(fp) = c.obj else {
                return Err(Error::WrongKind);
            };
            // SAFETY: live factory.
            let fa = unsafe { &*fp };
            t.frame.rdi = fa.used;
            t.frame.rsi = fa.limit;
            ok(cur)
        }
        Sys::TaskKill => {
            let tt = task_cap(task, a0)?;
            t.frame.rax = 0;
            obj::kill_task(tt);
            Ok(())
        }
        Sys::ThreadRegs => {
            let th = thread_cap(task, a0)?;
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
            if !paging::copy_to_user(unsafe { (*task).pml4 }, a1, bytes) {
                return Err(Error::Fault);
            }
            ok(cur)
        }
        Sys::Translate => {
            // SAFETY: live task.
            let pml4 = unsafe { (*task).pml4 };
            if !paging::user_range_ok(a0, 1) {
                return Err(Error::Invalid);
            }
            match paging::translate(pml4, a0) {
                Some((pa, _)) => {
                    t.frame.rdi = pa;
                    ok(cur)
                }
                None => Err(Error::Fault),
            }
        }
    }
}

fn thread_config(
    cur: *mut Thread,
    th_slot: u64,
    task_slot: u64,
    utcb_va: u64,
    pager: u64,
    exc: u64,
    prio: u64,
) -> R {
    // SAFETY: live current thread.
    let me = unsafe { &mut *cur };
    let task = me.task;
    let th = thread_cap(task, th_slot)?;
    let pg = endpoint_cap_opt(task, pager)?;
    let ex = endpoint_cap_opt(task, exc)?;
    // SAFETY: live task.
    let maxp = unsafe { (*task).max_prio } as u64;
    if prio > 255 {
        return Err(Error::Invalid);
    }
    // SAFETY: live thread.
    let x = unsafe { &mut *th };
    if x.state == State::Dead {
        return Err(Error::PeerGone);
    }
    if task_slot != u64::MAX {
        if !x.task.is_null() {
            return Err(Error::Busy);
        }
        let tt = task_cap(task, task_slot)?;
        if utcb_va & 0xfff != 0 || !paging::user_range_ok(utcb_va, PAGE) {
            return Err(Error::Invalid);
        }
        // SAFETY: live task.
        let tk = unsafe { &mut *tt };
        if k().mapdb.overlaps(tk.id, utcb_va, PAGE) || paging::translate(tk.pml4, utcb_va).is_some()
        {
            return Err(Error::Busy);
        }
        obj::charge(tk.hdr.factory, PAGE)?;
        let Some(pa) = phys().alloc_frame() else {
            obj::uncharge(tk.hdr.factory, PAGE);
            return Err(Error::NoMemory);
        };
        let mut alloc = || obj::pt_alloc(tt);
        if !paging::map(
            tk.pml4,
            utcb_va,
            pa,
            paging::pte_flags(map::READ | map::WRITE, false),
            false,
            &mut alloc,
        ) {
            phys().free_frame(pa);
            obj::uncharge(tk.hdr.factory, PAGE);
            return Err(Error::NoMemory);
        }
        // SAFETY: fresh zeroed frame in the direct map.
        unsafe { (*(phys_to_virt(pa) as *mut Utcb)).user[0] = utcb_va };
        x.utcb_pa = pa;
        x.utcb_va = utcb_va;
        x.gs_base = utcb_va;
        x.task = tt;
        tk.threads.push(th);
    } else if x.task.is_null() {
        return Err(Error::Invalid);
    }
    if let Some(c) = pg {
        obj::incref(c.obj);
        if let Some(o) = x.pager.replace(c) {
            obj::release(o);
        }
    }
    if let Some(c) = ex {
        obj::incref(c.obj);
        if let Some(o) = x.exc.replace(c) {
            obj::release(o);
        }
    }
    // Re-queue under the new priority if it is waiting to run.
    sched::dequeue_any(th);
    x.prio = prio.min(maxp) as u8;
    if x.state == State::Ready && th != k().current {
        sched::enqueue(th);
    }
    ok(cur)
}
