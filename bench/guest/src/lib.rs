//! Shared pieces of the benchmark programs: the reference (hand-written, assembly) client and
//! server loops whose instruction counts are known exactly, so that generated stubs can be
//! measured against them under `qemu -icount shift=0`.
#![no_std]

/// Tag of a request: label 1, two words.
pub const REQ: u64 = 0x2_0001;
/// Tag of a reply: label 0, one word.
pub const REP: u64 = 0x1_0000;

core::arch::global_asm!(
    r#"
.global bench_raw_calls
// bench_raw_calls(ep, n): n calls of ep with words (7, 8). Per call, besides the syscall:
// 5 instructions of message setup and 2 of loop.
bench_raw_calls:
    push r12
    push r13
    mov r13, rdi
    mov r12, rsi
1:
    mov rdi, r13
    mov esi, 0x20001
    mov edx, 7
    mov r10d, 8
    mov eax, 1
    syscall
    dec r12
    jnz 1b
    pop r13
    pop r12
    ret

.global bench_raw_server
// bench_raw_server(ep): serves `add` forever. Per request, besides the syscall: the handler's
// add, 3 instructions of reply setup, 1 jump.
bench_raw_server:
    mov r12, rdi
    mov rdi, r12
    xor esi, esi
    mov eax, 4
    syscall
2:
    add rdx, r10
    mov rdi, r12
    mov esi, 0x10000
    mov eax, 2
    syscall
    jmp 2b
"#
);

extern "C" {
    pub fn bench_raw_calls(ep: u64, n: u64);
    pub fn bench_raw_server(ep: u64) -> !;
}

/// Instructions per call in `bench_raw_calls` outside the kernel: message setup (5) + loop (2).
pub const RAW_CLIENT_SETUP: u64 = 5;
pub const RAW_CLIENT_LOOP: u64 = 2;
/// Instructions per request in `bench_raw_server` outside the kernel, without the handler's add:
/// reply setup (3) + jump (1).
pub const RAW_SERVER: u64 = 4;
