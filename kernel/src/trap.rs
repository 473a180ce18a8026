//! Entries other than `syscall`, and the way out: the timer, device interrupts (to `irq`), the
//! lazy FPU switch, user faults turned into messages to pagers and exception handlers, and
//! [`leave`], which every kernel exit but the IPC fast path goes through.
use crate::arch::{self, outb, Frame};
use crate::endpoint;
use crate::irq;
use crate::mem::phys_to_virt;
use crate::obj::{KMsg, Thread};
use crate::object;
use crate::sched;
use crate::state::kernel;
use crate::thread;
use sawmill_abi::label;

pub const VEC_TIMER: u64 = 0x20;
pub const VEC_PIC: u64 = 0x30;
pub const VEC_SPURIOUS: u64 = 0xff;

const LAPIC: u64 = 0xfee0_0000;

fn lapic_write(reg: u64, v: u32) {
    // SAFETY: the LAPIC page is in the direct map (mapped uncached at boot).
    unsafe { core::ptr::write_volatile(phys_to_virt(LAPIC + reg) as *mut u32, v) }
}

/// Local APIC (periodic timer) and the legacy PICs (device interrupts, remapped to 0x30).
pub fn init_interrupts() {
    // PICs: ICW1..4, vectors 0x30/0x38, cascade on IRQ2, all lines masked.
    outb(0x20, 0x11);
    outb(0xa0, 0x11);
    outb(0x21, VEC_PIC as u8);
    outb(0xa1, VEC_PIC as u8 + 8);
    outb(0x21, 4);
    outb(0xa1, 2);
    outb(0x21, 1);
    outb(0xa1, 1);
    outb(0x21, 0xfb);
    outb(0xa1, 0xff);
    // Enable the APIC (spurious vector), PIC interrupts through LINT0 (ExtINT), NMI on LINT1.
    lapic_write(0xf0, 0x100 | VEC_SPURIOUS as u32);
    lapic_write(0x350, 0x700);
    lapic_write(0x360, 0x400);
    // The timer: divide by 1, periodic, every TICK_MS (10 ms) at QEMU's 1 GHz APIC timer clock
    // (under -icount shift=0, 10 M instructions).
    lapic_write(0x3e0, 0xb);
    lapic_write(0x320, (1 << 17) | VEC_TIMER as u32);
    lapic_write(0x380, (sawmill_abi::TICK_MS * 1_000_000) as u32);
}

/// `#NM`: the current thread touched the FPU without owning it; swap the state.
fn fpu_switch() {
    sched::set_fpu_trap(false);
    let k = kernel();
    let (cur, owner) = (k.current, k.fpu_owner);
    // SAFETY: fx areas are 16-byte aligned 512-byte buffers inside live threads; the owner's
    // holds the state it saved or the default image.
    unsafe {
        if !owner.is_null() {
            arch::fxsave((*owner).fx.0.as_mut_ptr());
        }
        arch::fxrstor((*cur).fx.0.as_ptr());
    }
    kernel().fpu_owner = cur;
}

fn timer() {
    lapic_write(0xb0, 0);
    kernel().ticks += 1;
    crate::clock::tick();
    crate::notification::expire();
    crate::iommu::poll_faults();
}

/// Interrupt while the kernel idles (the only time interrupts are enabled in kernel mode).
#[no_mangle]
extern "C" fn trap_from_kernel(f: &mut Frame) {
    match f.vector {
        VEC_TIMER => timer(),
        v if (VEC_PIC..VEC_PIC + 16).contains(&v) => irq::device_irq((v - VEC_PIC) as u8),
        VEC_SPURIOUS => {}
        v => {
            crate::kprintln!(
                "KERNEL PANIC: exception {} in kernel at {:#x} err {:#x} cr2 {:#x}",
                v,
                f.rip,
                f.error,
                arch::read_cr2()
            );
            crate::shutdown(0x0f);
        }
    }
}

/// Entry from user mode through an interrupt or exception; the frame is the current thread's.
#[no_mangle]
extern "C" fn trap_from_user(_f: &mut Frame) -> ! {
    let cur = kernel().current;
    // SAFETY: entries from user mode always belong to the live current thread.
    let t = unsafe { &mut *cur };
    match t.frame.vector {
        VEC_TIMER => {
            timer();
            t.run_ticks = t.run_ticks.saturating_add(1);
            sched::preempt_tick();
        }
        v if (VEC_PIC..VEC_PIC + 16).contains(&v) => irq::device_irq((v - VEC_PIC) as u8),
        VEC_SPURIOUS => {}
        7 => fpu_switch(),
        14 => page_fault(cur),
        v if v < 32 => exception(cur, v),
        _ => {}
    }
    leave()
}

fn page_fault(cur: *mut Thread) {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let addr = arch::read_cr2();
    let km = KMsg {
        label: label::PAGE_FAULT,
        w: [addr, t.frame.error & 0x1f, t.frame.rip, 0],
    };
    if !endpoint::kernel_call(cur, t.pager, km) {
        report_and_kill(cur, 14, addr);
    }
}

fn exception(cur: *mut Thread, v: u64) {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let cr2 = 0;
    let km = KMsg {
        label: label::EXCEPTION,
        w: [v, t.frame.error, t.frame.rip, cr2],
    };
    if !endpoint::kernel_call(cur, t.exc, km) {
        report_and_kill(cur, v, cr2);
    }
}

fn report_and_kill(cur: *mut Thread, v: u64, addr: u64) {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let name = sawmill_abi::exception_name(v);
    // SAFETY: a running thread is bound to a live task.
    let id = unsafe { (*t.task).id };
    crate::kprintln!(
        "kernel: task {} thread ended: {} at rip {:#x} addr {:#x} (no handler)",
        id,
        name,
        t.frame.rip,
        addr
    );
    if t.task == kernel().root_task {
        crate::kprintln!("KERNEL PANIC: root task died");
        crate::shutdown(0x0e);
    }
    thread::kill_thread(cur);
}

/// Leaves the kernel: accounts for dropped references, then continues the current thread if it
/// is runnable and no higher-priority thread is ready, or runs the best ready thread (idling
/// until there is one). Every exit but the IPC fast path's direct switches comes through here.
pub fn leave() -> ! {
    loop {
        object::reap();
        let t = sched::next();
        // SAFETY: `next` returns a live, runnable thread.
        if unsafe { (*t).frame.rip } < arch::CANONICAL_END {
            sched::switch_to(t)
        }
        off_the_end(t);
    }
}

/// Leaves the kernel back to `cur`, the current thread, which entered by `syscall`, did not
/// block, and whose rip the kernel set to a user address (a reflected system call resumed at
/// its entry): straight back when [`leave`] would choose it anyway (nothing to reap, no
/// thread of higher priority ready), else through [`leave`]. The reflection's way out, taken
/// by every Linux system call.
#[inline(always)]
pub fn resume_current(cur: *mut Thread) -> ! {
    let k = kernel();
    // SAFETY: live current thread.
    let prio = unsafe { (*cur).prio } as usize;
    if k.release.is_empty()
        && k.loaded_thread == cur
        && (k.ready_n == 0 || sched::highest_ready().is_none_or(|p| p <= prio))
    {
        // SAFETY: `cur` is live, loaded and running; its frame is the `syscall` frame it
        // entered with, its rip a user address (checked by `thread_foreign`).
        arch::return_to_user(unsafe { &(*cur).frame })
    }
    leave()
}

/// The thread's return address is not canonical: no return instruction can resume it, so it
/// takes a general-protection fault of its own. Cannot happen while the last user page stays
/// unmapped (see layout::USER_END); kept as a second line against the sysret bug.
#[cold]
#[inline(never)]
fn off_the_end(t: *mut Thread) {
    // SAFETY: live thread; a `syscall` frame's error slot is not written on entry.
    unsafe { (*t).frame.error = 0 };
    exception(t, 13);
}
