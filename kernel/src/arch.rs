//! x86-64 mechanics: port I/O, MSRs, GDT/TSS/IDT, the trap and `syscall` entry stubs and the
//! return to user mode. Nothing here makes policy decisions.
use core::arch::{asm, global_asm};
use core::mem::size_of;

pub const KCODE: u16 = 0x08;
pub const UDATA: u16 = 0x18 | 3;
pub const UCODE: u16 = 0x20 | 3;
pub const TSS_SEL: u16 = 0x28;

// A frame that entered through `syscall` records vector 0x100 (see `syscall_entry`).

/// Registers of a thread as saved on kernel entry. The layout is fixed by the entry stubs.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Frame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    pub vector: u64,
    pub error: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

impl Frame {
    /// The thread's rcx and r11 as user code sees them: after a `syscall` the CPU has put rip
    /// and rflags there, and the entry path saves them only in those slots.
    pub fn user_rcx_r11(&self) -> (u64, u64) {
        if self.vector == SYSCALL_VECTOR {
            (self.rip, self.rflags)
        } else {
            (self.rcx, self.r11)
        }
    }
}

#[inline(always)]
pub fn outb(port: u16, v: u8) {
    // SAFETY: port I/O has no memory effects; callers choose ports the kernel owns.
    unsafe {
        asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack, preserves_flags))
    }
}

#[inline(always)]
pub fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as for outb.
    unsafe {
        asm!("in al, dx", in("dx") port, out("al") v, options(nomem, nostack, preserves_flags))
    }
    v
}

#[inline(always)]
pub fn wrmsr(msr: u32, v: u64) {
    // SAFETY: only called with architectural MSRs during setup or for FS/GS base.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32, options(nostack))
    }
}

#[inline(always)]
pub fn write_cr3(v: u64) {
    // SAFETY: v is the physical address of a valid PML4 whose upper half maps the kernel.
    unsafe { asm!("mov cr3, {}", in(reg) v, options(nostack)) }
}

#[inline(always)]
pub fn read_cr2() -> u64 {
    let v: u64;
    // SAFETY: reading CR2 has no side effects.
    unsafe { asm!("mov {}, cr2", out(reg) v, options(nostack, nomem)) }
    v
}

#[inline(always)]
pub fn invlpg(va: u64) {
    // SAFETY: invalidating a TLB entry is always safe.
    unsafe { asm!("invlpg [{}]", in(reg) va, options(nostack)) }
}

/// Sets or clears CR0.TS: with it set, the next FPU/SSE instruction raises #NM.
pub fn set_cr0_ts(on: bool) {
    let mut cr0: u64;
    // SAFETY: reading CR0 has no side effects.
    unsafe { asm!("mov {}, cr0", out(reg) cr0, options(nostack, nomem)) };
    let want = if on { cr0 | 8 } else { cr0 & !8 };
    // SAFETY: toggling TS only changes when #NM is raised.
    unsafe { asm!("mov cr0, {}", in(reg) want, options(nostack)) };
}

/// Saves the FPU/SSE state into `area`.
///
/// # Safety
/// `area` points at a 16-byte aligned, writable 512-byte buffer.
pub unsafe fn fxsave(area: *mut u8) {
    // SAFETY: the caller's promise.
    unsafe { asm!("fxsave64 [{}]", in(reg) area, options(nostack)) }
}

/// Loads the FPU/SSE state from `area`.
///
/// # Safety
/// `area` points at a 16-byte aligned 512-byte buffer holding a valid FXSAVE image.
pub unsafe fn fxrstor(area: *const u8) {
    // SAFETY: the caller's promise.
    unsafe { asm!("fxrstor64 [{}]", in(reg) area, options(nostack)) }
}

pub const MSR_FS_BASE: u32 = 0xc000_0100;
pub const MSR_GS_BASE: u32 = 0xc000_0101;
const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_FMASK: u32 = 0xc000_0084;

/// The task-state segment with a full I/O permission bitmap behind it.
#[repr(C, packed)]
pub struct Tss {
    _r0: u32,
    pub rsp0: u64,
    _rsp1: u64,
    _rsp2: u64,
    _r1: u64,
    pub ist: [u64; 7],
    _r2: u64,
    _r3: u16,
    pub iomap_base: u16,
    /// One bit per port; a set bit forbids the port. One extra byte of ones ends the map.
    pub iomap: [u8; 8193],
}

#[repr(C, align(16))]
struct Gdt([u64; 7]);

static mut GDT: Gdt = Gdt([0; 7]);
pub static mut TSS: Tss = Tss {
    _r0: 0,
    rsp0: 0,
    _rsp1: 0,
    _rsp2: 0,
    _r1: 0,
    ist: [0; 7],
    _r2: 0,
    _r3: 0,
    iomap_base: 0,
    iomap: [0xff; 8193],
};

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct IdtEntry {
    off_lo: u16,
    sel: u16,
    ist: u8,
    attr: u8,
    off_mid: u16,
    off_hi: u32,
    _r: u32,
}

static mut IDT: [IdtEntry; 256] = [IdtEntry {
    off_lo: 0,
    sel: 0,
    ist: 0,
    attr: 0,
    off_mid: 0,
    off_hi: 0,
    _r: 0,
}; 256];

/// Top of the kernel stack used while handling any entry from user mode.
#[no_mangle]
pub static mut KSTACK_TOP: u64 = 0;
#[no_mangle]
static mut USER_RSP_SCRATCH: u64 = 0;

#[repr(C, align(16))]
struct KStack([u8; 65536]);
static mut KSTACK: KStack = KStack([0; 65536]);
static mut DFSTACK: KStack = KStack([0; 65536]);
static mut NMISTACK: KStack = KStack([0; 65536]);

extern "C" {
    static trap_stubs: [u64; 256];
    fn syscall_entry();
}

/// Loads GDT, TSS, IDT and the `syscall` MSRs.
pub fn init() {
    // SAFETY: single CPU, interrupts off, called once during boot before any user code runs.
    unsafe {
        let tss_addr = core::ptr::addr_of!(TSS) as u64;
        let tss_lim = (size_of::<Tss>() - 1) as u64;
        let g = &mut *core::ptr::addr_of_mut!(GDT);
        g.0[1] = 0x00209a0000000000; // kernel code
        g.0[2] = 0x0000920000000000; // kernel data
        g.0[3] = 0x0000f20000000000; // user data
        g.0[4] = 0x0020fa0000000000; // user code
        g.0[5] = (tss_lim & 0xffff)
            | (tss_addr & 0xff_ffff) << 16
            | 0x89 << 40
            | ((tss_lim >> 16) & 0xf) << 48
            | ((tss_addr >> 24) & 0xff) << 56;
        g.0[6] = tss_addr >> 32;
        let ptr: [u16; 5] = {
            let base = g as *const Gdt as u64;
            [
                (size_of::<Gdt>() - 1) as u16,
                base as u16,
                (base >> 16) as u16,
                (base >> 32) as u16,
                (base >> 48) as u16,
            ]
        };
        asm!("lgdt [{}]", in(reg) &ptr, options(nostack));
        asm!(
            "push 0x08",
            "lea {t}, [rip + 2f]",
            "push {t}",
            "retfq",
            "2:",
            "mov ax, 0x10",
            "mov ds, ax", "mov es, ax", "mov ss, ax",
            t = out(reg) _, out("ax") _,
        );
        let tss = &mut *core::ptr::addr_of_mut!(TSS);
        tss.iomap_base = (size_of::<Tss>() - 8193) as u16;
        KSTACK_TOP = core::ptr::addr_of!(KSTACK) as u64 + 65536;
        tss.ist[0] = core::ptr::addr_of!(DFSTACK) as u64 + 65536;
        // NMIs get their own stack: between restoring the user rsp and `sysretq` the kernel
        // briefly runs on the user's stack.
        tss.ist[1] = core::ptr::addr_of!(NMISTACK) as u64 + 65536;
        asm!("ltr {0:x}", in(reg) TSS_SEL, options(nostack));

        let idt = &mut *core::ptr::addr_of_mut!(IDT);
        for (i, e) in idt.iter_mut().enumerate() {
            let a = trap_stubs[i];
            *e = IdtEntry {
                off_lo: a as u16,
                sel: KCODE,
                ist: match i {
                    8 => 1,
                    2 => 2,
                    _ => 0,
                },
                // Interrupt gate; only the breakpoint vector may be raised from user mode with
                // `int3`. Other `int n` from user mode get #GP, which we report as an exception.
                attr: if i == 3 { 0xee } else { 0x8e },
                off_mid: (a >> 16) as u16,
                off_hi: (a >> 32) as u32,
                _r: 0,
            };
        }
        let iptr: [u16; 5] = {
            let base = idt.as_ptr() as u64;
            [
                (256 * 16 - 1) as u16,
                base as u16,
                (base >> 16) as u16,
                (base >> 32) as u16,
                (base >> 48) as u16,
            ]
        };
        asm!("lidt [{}]", in(reg) &iptr, options(nostack));

        wrmsr(MSR_STAR, (KCODE as u64) << 32 | (0x10u64) << 48);
        wrmsr(MSR_LSTAR, syscall_entry as *const () as u64);
        // Clear TF, IF, DF, NT and AC on entry: the kernel runs with interrupts off, string
        // instructions forward, and no nested-task flag (with NT set, the kernel's own iretq would
        // fault: a user could otherwise crash the kernel by setting NT before `syscall`).
        wrmsr(MSR_FMASK, 0x4_4700);
    }
}

/// Points the CPU's kernel-entry stacks at the end of `frame`, the current thread's save area:
/// TSS.rsp0 serves interrupts and exceptions (hardware) and `syscall` entry (which reads it).
#[inline(always)]
pub fn set_current_frame(frame: *mut Frame) {
    let end = frame as u64 + size_of::<Frame>() as u64;
    // SAFETY: single CPU; the TSS field is only read by hardware on the next entry.
    unsafe {
        core::ptr::write_unaligned(core::ptr::addr_of_mut!(TSS.rsp0), end);
    }
}

extern "C" {
    /// Restores `frame` and returns to the mode it came from (user mode, or the idle loop).
    fn return_iret(frame: *const Frame) -> !;
    /// Restores `frame` of a thread that entered through `syscall` and returns with `sysretq`
    /// (rcx and r11 get rip and rflags, as the `syscall` ABI allows).
    fn return_sysret(frame: *const Frame) -> !;
}

/// End of the canonical lower half: no return instruction can go to a rip at or above it.
pub const CANONICAL_END: u64 = 0x0000_8000_0000_0000;

/// The vector a frame saved by `syscall` entry records.
pub const SYSCALL_VECTOR: u64 = 0x100;

/// Returns with `sysretq` to the thread of `frame` (which entered through `syscall`),
/// delivering the register message of `from` on the way: rax 0, rdi `badge`, rsi the tag
/// (kernel bits cleared), rdx, r10, r8, r9 the words. The IPC fast path uses it instead of
/// copying the words into `frame` and loading them from there.
///
/// # Safety
/// `frame` is a live thread's `syscall` frame whose rip is below the end of the user half, and
/// that thread's state is loaded; `from` is a live frame.
#[inline(always)]
pub unsafe fn return_sysret_msg_to(frame: *const Frame, from: *const Frame, badge: u64) -> ! {
    // A jump, not a call: nothing comes back, and the caller then needs no stack alignment.
    // SAFETY: the caller's promise.
    unsafe {
        core::arch::asm!("jmp return_sysret_msg", in("rdi") frame, in("rsi") from, in("rdx") badge, options(noreturn))
    }
}

/// Returns to user mode with the thread's saved registers: `sysretq` after a `syscall` entry,
/// `iretq` otherwise (a preempted or faulted thread keeps every register). The caller has made
/// sure rip is below the end of the user half: a `syscall` executed at its very top leaves a
/// non-canonical rip, on which `sysretq` and `iretq` fault in ring 0 (the classic sysret bug).
#[inline(always)]
pub fn return_to_user(frame: *const Frame) -> ! {
    // SAFETY: the frame holds a valid user context saved by an entry stub or built by the
    // kernel with user selectors, and a rip the caller checked.
    unsafe {
        if (*frame).vector == SYSCALL_VECTOR {
            return_sysret(frame)
        }
        return_iret(frame)
    }
}

global_asm!(
    r#"
.section .text
.global syscall_entry
syscall_entry:
    // Saves the thread's registers into its frame (TSS.rsp0 is the frame's end). Only what a
    // return by sysretq needs: the cs, ss and error slots stay as they were (a `syscall` frame
    // never goes back through iretq), and rcx and r11, which the CPU has just overwritten with
    // rip and rflags, are kept only in those slots (readers of a `syscall` frame take them from
    // there, see Frame::user_rcx). Offsets as in return_sysret below.
    mov [rip + USER_RSP_SCRATCH], rsp
    mov rsp, [rip + {tss} + 4]
    sub rsp, 176
    mov [rsp], r15
    mov [rsp + 8], r14
    mov [rsp + 16], r13
    mov [rsp + 24], r12
    mov [rsp + 40], r10
    mov [rsp + 48], r9
    mov [rsp + 56], r8
    mov [rsp + 64], rbp
    mov [rsp + 72], rdi
    mov [rsp + 80], rsi
    mov [rsp + 88], rdx
    mov [rsp + 104], rbx
    mov [rsp + 112], rax
    mov qword ptr [rsp + 120], 0x100
    mov [rsp + 136], rcx
    mov [rsp + 152], r11
    mov rax, [rip + USER_RSP_SCRATCH]
    mov [rsp + 160], rax
    mov rsp, [rip + KSTACK_TOP]
    call syscall_dispatch
    ud2

trap_common:
    push rax
    push rbx
    push rcx
    push rdx
    push rsi
    push rdi
    push rbp
    push r8
    push r9
    push r10
    push r11
    push r12
    push r13
    push r14
    push r15
    mov rdi, rsp
    // The interrupted code may have set DF; the kernel's code assumes it clear.
    cld
    test qword ptr [rsp + 18*8], 3
    jz 1f
    mov rsp, [rip + KSTACK_TOP]
    call trap_from_user
    ud2
1:
    call trap_from_kernel
    // Back to the idle loop through the same restore sequence (iretq to ring 0).
    mov rdi, rsp
    jmp return_iret

.global return_sysret
return_sysret:
    // Frame offsets: r15 0, r14 8, r13 16, r12 24, r11 32, r10 40, r9 48, r8 56, rbp 64,
    // rdi 72, rsi 80, rdx 88, rcx 96, rbx 104, rax 112, rip 136, rflags 152, rsp 160.
    // rcx and r11 take rip and rflags; rdi goes last.
    mov r15, [rdi]
    mov r14, [rdi + 8]
    mov r13, [rdi + 16]
    mov r12, [rdi + 24]
    mov r10, [rdi + 40]
    mov r9, [rdi + 48]
    mov r8, [rdi + 56]
    mov rbp, [rdi + 64]
    mov rsi, [rdi + 80]
    mov rdx, [rdi + 88]
    mov rbx, [rdi + 104]
    mov rax, [rdi + 112]
    mov rcx, [rdi + 136]
    mov r11, [rdi + 152]
    mov rsp, [rdi + 160]
    mov rdi, [rdi + 72]
    sysretq

.global return_sysret_msg
return_sysret_msg:
    // rdi: the receiver's frame (callee-saved registers, rip, rflags, rsp), rsi: the sender's
    // (message words), rdx: the badge. Same offsets as above.
    mov r15, [rdi]
    mov r14, [rdi + 8]
    mov r13, [rdi + 16]
    mov r12, [rdi + 24]
    mov rbp, [rdi + 64]
    mov rbx, [rdi + 104]
    mov rcx, [rdi + 136]
    mov r11, [rdi + 152]
    mov rsp, [rdi + 160]
    mov rdi, rdx
    mov r10, [rsi + 40]
    mov r9, [rsi + 48]
    mov r8, [rsi + 56]
    mov rdx, [rsi + 88]
    mov rsi, [rsi + 80]
    and esi, 0x7fffff
    xor eax, eax
    sysretq

.global return_iret
return_iret:
    mov rsp, rdi
    pop r15
    pop r14
    pop r13
    pop r12
    pop r11
    pop r10
    pop r9
    pop r8
    pop rbp
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rbx
    pop rax
    add rsp, 16
    iretq

.altmacro
.macro stub n
trap_stub_\n:
.if (\n == 8) || (\n == 10) || (\n == 11) || (\n == 12) || (\n == 13) || (\n == 14) || (\n == 17) || (\n == 21) || (\n == 29) || (\n == 30)
.else
    push 0
.endif
    push \n
    jmp trap_common
.endm
.set i, 0
.rept 256
    stub %i
    .set i, i + 1
.endr

.section .rodata
.align 8
.global trap_stubs
trap_stubs:
.macro stubaddr n
    .quad trap_stub_\n
.endm
.set i, 0
.rept 256
    stubaddr %i
    .set i, i + 1
.endr
"#,
    tss = sym TSS,
);
