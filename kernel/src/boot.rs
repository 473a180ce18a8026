//! The first instructions: entry from a PVH loader (QEMU `-kernel`) or from a multiboot2 loader
//! (GRUB), both in 32-bit protected mode with paging off. We build boot page tables (identity and
//! direct map of the first 4 GiB, the kernel image at -2 GiB), enter long mode and jump to
//! `kmain` in the higher half.
use core::arch::global_asm;

/// How the loader entered: 1 = PVH (`BOOT_INFO` = hvm_start_info), 2 = multiboot2 (MBI).
#[no_mangle]
pub static mut BOOT_KIND: u32 = 0;
#[no_mangle]
pub static mut BOOT_INFO: u32 = 0;

/// The boot archive descriptor, patched into the image by `sawmill image`:
/// magic, physical address, length, reserved.
#[no_mangle]
#[used]
#[link_section = ".bootmods"]
pub static mut SAWMILL_BOOTMODS: [u64; 4] = [u64::from_le_bytes(*b"BOOTMODS"), 0, 0, 0];

global_asm!(
    r#"
.set KVB, 0xffffffff80000000

.section .multiboot2, "a"
.align 8
mb2_header:
    .long 0xe85250d6
    .long 0
    .long mb2_header_end - mb2_header
    .long 0x100000000 - (0xe85250d6 + (mb2_header_end - mb2_header))
    .align 8
    .short 3
    .short 0
    .long 12
    .long mb2_entry - KVB
    .align 8
    .short 0
    .short 0
    .long 8
mb2_header_end:

.section .note.pvh, "a"
.align 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .long pvh_entry - KVB

.section .boot32, "ax"
.code32
.global pvh_entry
pvh_entry:
    mov dword ptr [BOOT_KIND - KVB], 1
    mov dword ptr [BOOT_INFO - KVB], ebx
    jmp common32
mb2_entry:
    mov dword ptr [BOOT_KIND - KVB], 2
    mov dword ptr [BOOT_INFO - KVB], ebx
common32:
    cli
    mov esp, offset boot_stack_top - KVB
    /* PML4: [0] and [256] -> pdpt_low, [511] -> pdpt_high */
    mov eax, offset boot_pdpt_low - KVB
    or eax, 3
    mov dword ptr [boot_pml4 - KVB], eax
    mov dword ptr [boot_pml4 - KVB + 256*8], eax
    mov eax, offset boot_pdpt_high - KVB
    or eax, 3
    mov dword ptr [boot_pml4 - KVB + 511*8], eax
    /* pdpt_low[0..4] -> pd[0..4]; pdpt_high[510] -> pd[0] */
    mov ecx, 0
1:
    mov eax, ecx
    shl eax, 12
    add eax, offset boot_pd - KVB
    or eax, 3
    mov dword ptr [boot_pdpt_low - KVB + ecx*8], eax
    inc ecx
    cmp ecx, 4
    jne 1b
    mov eax, offset boot_pd - KVB
    or eax, 3
    mov dword ptr [boot_pdpt_high - KVB + 510*8], eax
    /* 2048 2 MiB pages covering 0..4 GiB */
    mov ecx, 0
2:
    mov eax, ecx
    shl eax, 21
    or eax, 0x83
    mov dword ptr [boot_pd - KVB + ecx*8], eax
    mov eax, ecx
    shr eax, 11
    mov dword ptr [boot_pd - KVB + ecx*8 + 4], eax
    inc ecx
    cmp ecx, 2048
    jne 2b
    mov eax, offset boot_pml4 - KVB
    mov cr3, eax
    /* CR4: PAE, OSFXSR, OSXMMEXCPT */
    mov eax, cr4
    or eax, (1 << 5) | (1 << 9) | (1 << 10)
    mov cr4, eax
    /* EFER: SCE, LME, NXE */
    mov ecx, 0xc0000080
    rdmsr
    or eax, (1 << 0) | (1 << 8) | (1 << 11)
    wrmsr
    /* CR0: PG, WP, MP; clear EM */
    mov eax, cr0
    and eax, ~(1 << 2)
    or eax, (1 << 31) | (1 << 16) | (1 << 1)
    mov cr0, eax
    lgdt [boot_gdt_ptr - KVB]
    mov eax, 0x08
    push eax
    mov eax, offset long_entry - KVB
    push eax
    retf

.code64
long_entry:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor ax, ax
    mov fs, ax
    mov gs, ax
    movabs rax, offset high_entry
    jmp rax

.section .text
high_entry:
    movabs rsp, offset boot_stack_top
    xor rbp, rbp
    call kmain
3:
    hlt
    jmp 3b

.section .rodata
.align 16
boot_gdt:
    .quad 0
    .quad 0x00209a0000000000
    .quad 0x0000920000000000
boot_gdt_end:
boot_gdt_ptr:
    .short boot_gdt_end - boot_gdt - 1
    .long boot_gdt - KVB

.section .bss
.align 4096
.global boot_pml4
boot_pml4: .skip 4096
boot_pdpt_low: .skip 4096
boot_pdpt_high: .skip 4096
boot_pd: .skip 4096 * 4
.global boot_stack_top
boot_stack: .skip 65536
boot_stack_top:
"#
);
