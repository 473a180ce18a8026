//! Interrupts and exceptions: the timer, device interrupts (to notifications), the lazy FPU
//! switch, and user faults turned into messages to pagers and exception handlers.
use crate::arch::{self, inb, outb, Frame};
use crate::ipc;
use crate::mem::phys_to_virt;
use crate::obj::{self, k, KMsg, Thread};
use crate::sched;
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
    lapic_write(0x3e0, 0xb); // divide by 1
    lapic_write(0x320, (1 << 17) | VEC_TIMER as u32); // periodic
                                                      // 10 ms at QEMU's 1 GHz APIC timer clock (under -icount shift=0, 10 M instructions).
    lapic_write(0x380, 10_000_000);
}

pub fn pic_unmask(line: u8) {
    let (port, bit) = if line < 8 {
        (0x21, line)
    } else {
        (0xa1, line - 8)
    };
    outb(port, inb(port) & !(1 << bit));
}

pub fn pic_mask(line: u8) {
    let (port, bit) = if line < 8 {
        (0x21, line)
    } else {
        (0xa1, line - 8)
    };
    outb(port, inb(port) | (1 << bit));
}

/// Whether CR0.TS is set (kept here so a switch need not read CR0).
static mut TS_ON: bool = false;

/// Whether CR0.TS is set now.
#[inline(always)]
pub fn fpu_trap_on() -> bool {
    // SAFETY: single CPU.
    unsafe { TS_ON }
}

pub fn set_fpu_trap(on: bool) {
    // CR0.TS makes the next FPU/SSE instruction raise #NM.
    // SAFETY: single CPU; toggling TS only affects when #NM is raised.
    unsafe {
        if TS_ON == on {
            return;
        }
        TS_ON = on;
        crate::obj::note_extra();
        let mut cr0: u64;
        core::arch::asm!("mov {}, cr0", out(reg) cr0, options(nostack, nomem));
        let want = if on { cr0 | 8 } else { cr0 & !8 };
        core::arch::asm!("mov cr0, {}", in(reg) want, options(nostack));
    }
}

fn fpu_switch() {
    let kk = k();
    let cur = kk.current;
    set_fpu_trap(false);
    // SAFETY: fx areas are 16-byte aligned 512-byte buffers inside live threads.
    unsafe {
        if !kk.fpu_owner.is_null() {
            core::arch::asm!("fxsave64 [{}]", in(reg) (*kk.fpu_owner).fx.0.as_mut_ptr(), options(nostack));
        }
        core::arch::asm!("fxrstor64 [{}]", in(reg) (*cur).fx.0.as_ptr(), options(nostack));
    }
    kk.fpu_owner = cur;
}

/// Handles a device interrupt: mask the line, acknowledge it, signal the bound notification.
fn device_irq(line: u8) {
    pic_mask(line);
    if line >= 8 {
        outb(0xa0, 0x20);
    }
    outb(0x20, 0x20);
    let l = k().irqs[line as usize];
    if !l.notif.is_null() {
        crate::syscall::signal(l.notif, l.bits);
    }
}

fn timer() {
    lapic_write(0xb0, 0);
    k().ticks += 1;
}

/// Interrupt while the kernel idles (the only time interrupts are enabled in kernel mode).
#[no_mangle]
extern "C" fn trap_from_kernel(f: &mut Frame) {
    match f.vector {
        VEC_TIMER => timer(),
        v if (VEC_PIC..VEC_PIC + 16).contains(&v) => device_irq((v - VEC_PIC) as u8),
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

const EXC_NAMES: [&str; 20] = [
    "divide error",
    "debug",
    "nmi",
    "breakpoint",
    "overflow",
    "bound range",
    "invalid opcode",
    "device not available",
    "double fault",
    "coprocessor",
    "invalid tss",
    "segment not present",
    "stack fault",
    "general protection",
    "page fault",
    "reserved",
    "x87 error",
    "alignment check",
    "machine check",
    "simd error",
];

/// Entry from user mode through an interrupt or exception; the frame is the current thread's.
#[no_mangle]
extern "C" fn trap_from_user(_f: &mut Frame) -> ! {
    let cur = k().current;
    // SAFETY: entries from user mode always belong to the live current thread.
    let t = unsafe { &mut *cur };
    match t.frame.vector {
        VEC_TIMER => {
            timer();
            sched::preempt_tick();
        }
        v if (VEC_PIC..VEC_PIC + 16).contains(&v) => device_irq((v - VEC_PIC) as u8),
        VEC_SPURIOUS => {}
        7 => fpu_switch(),
        14 => page_fault(cur),
        v if v < 32 => exception(cur, v),
        _ => {}
    }
    sched::finish()
}

fn page_fault(cur: *mut Thread) {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let addr = arch::read_cr2();
    let km = KMsg {
        label: label::PAGE_FAULT,
        w: [addr, t.frame.error & 0x1f, t.frame.rip, 0],
    };
    if !ipc::kernel_call(cur, t.pager, km) {
        report_and_kill(cur, 14, addr);
    }
}

/// Reports CPU exception `v` of the current thread to its handler (or ends the thread).
pub fn user_exception(cur: *mut Thread, v: u64) {
    exception(cur, v)
}

fn exception(cur: *mut Thread, v: u64) {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let cr2 = 0;
    let km = KMsg {
        label: label::EXCEPTION,
        w: [v, t.frame.error, t.frame.rip, cr2],
    };
    if !ipc::kernel_call(cur, t.exc, km) {
        report_and_kill(cur, v, cr2);
    }
}

fn report_and_kill(cur: *mut Thread, v: u64, addr: u64) {
    // SAFETY: live current thread.
    let t = unsafe { &mut *cur };
    let name = EXC_NAMES.get(v as usize).copied().unwrap_or("exception");
    // SAFETY: a running thread is bound to a live task.
    let id = unsafe { (*t.task).id };
    crate::kprintln!(
        "kernel: task {} thread ended: {} at rip {:#x} addr {:#x} (no handler)",
        id,
        name,
        t.frame.rip,
        addr
    );
    if t.task == k().root_task {
        crate::kprintln!("KERNEL PANIC: root task died");
        crate::shutdown(0x0e);
    }
    obj::kill_thread(cur);
}
