//! Scenario 4: does one bad thing, chosen by its argument. Root must report it and end only this
//! task.
#![no_std]
#![no_main]
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

static RODATA: [u64; 4] = [1, 2, 3, 4];

// A `syscall` instruction in the last two bytes of a code page, to be aliased to the last page
// of the user half.
core::arch::global_asm!(
    ".section .text.edge, \"ax\"",
    ".balign 4096",
    ".global edge_page",
    "edge_page:",
    ".skip 4094, 0x90",
    "syscall",
    ".text",
);

extern "C" {
    static edge_page: u8;
}

fn main() {
    let what = env::arg(0).unwrap_or("");
    println!("faulter: about to {}", what);
    // SAFETY: none of this is safe; each arm deliberately faults so the kernel reports it.
    unsafe {
        match what {
            "null" => {
                let v = core::ptr::read_volatile(core::ptr::null::<u64>());
                println!("faulter: read {}", v);
            }
            "ud" => core::arch::asm!("ud2"),
            "div" => {
                core::arch::asm!("xor edx, edx", "xor ecx, ecx", "mov eax, 1", "div ecx", out("eax") _, out("edx") _, out("ecx") _)
            }
            "ro" => core::ptr::write_volatile(RODATA.as_ptr() as *mut u64, 9),
            "kernel" => {
                let v = core::ptr::read_volatile(0xffff_8000_0000_0000u64 as *const u64);
                println!("faulter: read {}", v);
            }
            "ioport" => core::arch::asm!("in al, dx", in("dx") 0x64u16, out("al") _),
            "priv" => core::arch::asm!("cli"),
            "edge" => {
                // The last page of the user half cannot be mapped...
                let last = sawmill_abi::layout::USER_END;
                let r = sawmill_rt::sys::task_map(
                    sawmill_rt::slots::TASK,
                    &edge_page as *const u8 as u64,
                    last,
                    1,
                    sawmill_abi::map::READ | sawmill_abi::map::EXEC,
                );
                println!("faulter: mapping the last user page: {:?}", r);
                // ...so a syscall at the very end of the highest page that can be returns to an
                // address that is canonical but unmapped: an ordinary page fault of the task,
                // never a fault of the kernel's return instruction.
                let page = &edge_page as *const u8 as u64;
                let top = sawmill_abi::layout::USER_END - 4096;
                sawmill_rt::sys::task_map(
                    sawmill_rt::slots::TASK,
                    page,
                    top,
                    1,
                    sawmill_abi::map::READ | sawmill_abi::map::EXEC,
                )
                .expect("alias the edge page");
                core::arch::asm!("jmp rcx", in("rcx") top + 4094, in("eax") 0, options(noreturn));
            }
            _ => {}
        }
    }
    println!("faulter: FAIL survived {}", what);
}
