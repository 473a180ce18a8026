//! Scenario 9: K42-style trap reflection. The main thread is marked foreign and jumps into a
//! small hand-written "Linux" program (in its own section, outside the native code range). Its
//! `syscall` instructions (write, getpid, exit with Linux numbers) are reflected by the kernel to
//! a handler in this same task, which serves them and returns to the foreign code.
#![no_std]
#![no_main]
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::ForeignFrame;
use sawmill_rt::{println, slots, sys};

sawmill_rt::entry!(main);

extern "C" {
    static foreign_start: u8;
    static foreign_end: u8;
    fn foreign_return(f: *const ForeignFrame) -> !;
    fn foreign_entry();
}

/// Proof that the handler runs in the same address space as `main`.
static MARK: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

core::arch::global_asm!(
    r#"
.section .foreign_text, "ax"
.global foreign_start
foreign_start:
    mov rbx, 0x1111
    mov rbp, 0x2222
    mov r12, 0x3333
    mov r13, 0x4444
    mov r14, 0x5555
    mov r15, 0x6666
    mov eax, 1
    mov edi, 1
    lea rsi, [rip + foreign_msg]
    mov edx, 24
    syscall
    cmp rax, 24
    jne 1f
    cmp rbx, 0x1111
    jne 1f
    cmp rbp, 0x2222
    jne 1f
    cmp r12, 0x3333
    jne 1f
    cmp r13, 0x4444
    jne 1f
    cmp r14, 0x5555
    jne 1f
    cmp r15, 0x6666
    jne 1f
    mov eax, 39
    syscall
    cmp rax, 4242
    jne 1f
    mov eax, 60
    mov edi, 42
    syscall
1:
    mov eax, 60
    mov edi, 1
    syscall
    ud2
foreign_msg:
    .ascii "hello from foreign code\n"
.global foreign_end
foreign_end:

.section .text
.global foreign_entry
foreign_entry:
    call {handler}
    ud2

.global foreign_return
foreign_return:
    push qword ptr [rdi + 17*8]
    popfq
    mov rbx, [rdi + 1*8]
    mov rdx, [rdi + 3*8]
    mov rsi, [rdi + 4*8]
    mov rbp, [rdi + 6*8]
    mov r8, [rdi + 8*8]
    mov r9, [rdi + 9*8]
    mov r10, [rdi + 10*8]
    mov r12, [rdi + 12*8]
    mov r13, [rdi + 13*8]
    mov r14, [rdi + 14*8]
    mov r15, [rdi + 15*8]
    mov rax, [rdi + 0*8]
    mov rcx, [rdi + 16*8]
    mov r11, [rdi + 17*8]
    mov rsp, [rdi + 7*8]
    mov rdi, [rdi + 5*8]
    jmp rcx
"#,
    handler = sym handler
);

extern "C" fn handler(f: &mut ForeignFrame) -> ! {
    let native = MARK.load(Ordering::Relaxed) == 0x5a5a;
    match f.rax {
        1 => {
            // write(fd, buf, len): the buffer is foreign memory of this same task.
            // SAFETY: the foreign program passes a pointer into its own code section.
            let b = unsafe { core::slice::from_raw_parts(f.rsi as *const u8, f.rdx as usize) };
            sawmill_rt::write_bytes(b"foreign: ");
            sawmill_rt::write_bytes(b);
            WRITES.fetch_add(1, Ordering::Relaxed);
            f.rax = f.rdx;
        }
        39 => f.rax = 4242,
        60 => {
            if f.rdi == 42 && native && WRITES.load(Ordering::Relaxed) == 1 {
                println!("foreign: PASS exit(42) after write and getpid; registers preserved, same address space");
                sawmill_rt::exit(0);
            }
            println!("foreign: FAIL exit({}) native={}", f.rdi, native);
            sawmill_rt::exit(1);
        }
        n => {
            println!("foreign: unknown system call {}", n);
            f.rax = (-38i64) as u64;
        }
    }
    // SAFETY: f holds the registers of the foreign code at its syscall.
    unsafe { foreign_return(f) }
}

fn main() {
    MARK.store(0x5a5a, Ordering::Relaxed);
    // SAFETY: taking the address of a linker symbol.
    let start = unsafe { &foreign_start as *const u8 as u64 };
    // SAFETY: as above.
    let end = unsafe { &foreign_end as *const u8 as u64 };
    // The linker puts the foreign section first (build.rs); all native code lies above it.
    if (foreign_entry as *const () as u64) < end {
        println!("foreign: FAIL native code below the foreign section");
        sawmill_rt::exit(1);
    }
    sys::thread_foreign(
        slots::THREAD,
        foreign_entry as *const () as u64,
        end,
        0x1000_0000,
    )
    .expect("mark foreign");
    // A Linux-native `syscall` from native code must still be a sawmill call.
    let s = sys::null();
    if s != 0 {
        println!("foreign: FAIL native system call reflected");
        sawmill_rt::exit(1);
    }
    println!("foreign: entering foreign code at {:#x}", start);
    // SAFETY: jumping to the foreign program; it never returns here.
    unsafe { core::arch::asm!("jmp {}", in(reg) start, options(noreturn)) }
}
