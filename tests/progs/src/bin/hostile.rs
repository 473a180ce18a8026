//! Scenario 7: at least 100,000 system calls with random numbers and arguments (seeded): bogus
//! pointers, kernel addresses, invalid and valid slots, huge sizes. The kernel must answer each
//! with an error or a harmless success; the task itself must stay alive (it avoids only the calls
//! that would legitimately end or block it, listed below).
#![no_std]
#![no_main]
use sawmill_abi::{MsgTag, Sys, NOTIFY_NONBLOCK, SYS_COUNT};
use sawmill_rt::{env, println, sys};
use sawmill_testprogs::Rng;

sawmill_rt::entry!(main);

fn arg(r: &mut Rng, heap: u64) -> u64 {
    match r.below(10) {
        0 => 0,
        1 => r.below(16),
        2 => r.below(1100),
        3 => 0xffff_8000_0000_0000 + r.below(1 << 30) * 8,
        4 => 0xffff_ffff_8000_0000 + r.below(1 << 20),
        5 => heap + r.below(4096) * 16,
        6 => u64::MAX - r.below(4),
        7 => 1 << r.below(64),
        8 => r.below(1 << 48),
        _ => r.next_u64(),
    }
}

/// A system call made with DF, NT and AC set in RFLAGS (restored to clear right after).
fn raw_with_flags(n: u64, a: [u64; 6]) -> u64 {
    let r;
    // SAFETY: the flags are set only around the syscall and cleared before Rust code runs again.
    unsafe {
        core::arch::asm!(
            "pushfq",
            "or qword ptr [rsp], 0x44400",
            "popfq",
            "syscall",
            "pushfq",
            "and qword ptr [rsp], ~0x44400",
            "popfq",
            inlateout("rax") n => r,
            inlateout("rdi") a[0] => _,
            inlateout("rsi") a[1] => _,
            inlateout("rdx") a[2] => _,
            inlateout("r10") a[3] => _,
            inlateout("r8") a[4] => _,
            inlateout("r9") a[5] => _,
            lateout("rcx") _, lateout("r11") _,
        );
    }
    r
}

/// Spins with DF set while timer interrupts arrive: the kernel must clear DF itself.
fn spin_backwards() {
    let t0 = sys::kernel_info(sawmill_abi::kinfo::TICKS).unwrap_or(0);
    let mut t = t0;
    while t < t0 + 5 {
        // SAFETY: DF is set only inside this block and cleared before it ends.
        unsafe {
            core::arch::asm!("std", "mov ecx, 200000", "2:", "dec ecx", "jnz 2b", "cld", out("ecx") _);
        }
        t = sys::kernel_info(sawmill_abi::kinfo::TICKS).unwrap_or(0);
    }
}

fn main() {
    let seed: u64 = env::arg(0).and_then(|s| s.parse().ok()).unwrap_or(1);
    let n: u64 = env::arg(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    // Optional: print call number `trace` before making it (to reproduce a finding).
    let trace: u64 = env::arg(2).and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
    let heap = sawmill_rt::layout::HEAP;
    let mut r = Rng::from_state(seed);
    let mut errs = [0u64; 16];
    let mut made = 0;
    while made < n {
        let num = if r.below(20) == 0 {
            r.next_u64() % 1000
        } else {
            r.below(SYS_COUNT + 2)
        };
        let mut a = [0u64; 6];
        for x in a.iter_mut() {
            *x = arg(&mut r, heap);
        }
        // Calls that would end, block or disarm this task by design (it asks for that), not
        // because the kernel failed: exiting, waiting without timeout, killing or unmapping
        // itself, re-pointing its own fault handler or foreign mode, printing its own memory.
        let blocking_ipc = [
            Sys::Call as u64,
            Sys::ReplyRecv as u64,
            Sys::Send as u64,
            Sys::Recv as u64,
        ];
        // The batched forms of `task_cap_put` and `cap_delete` read their pairs and slots from
        // the message words: hostile words too, with the same exclusions as the single forms
        // (a pair whose source is our task or thread, a slot that is the console).
        let batch = match num {
            n if n == Sys::TaskCapPut as u64 => a[3],
            n if n == Sys::CapDelete as u64 => a[1],
            _ => 0,
        };
        let mut hazard = false;
        if batch != 0 {
            let mr = &mut sawmill_rt::utcb().mr;
            for w in mr
                .iter_mut()
                .take((batch as usize).min(sawmill_abi::CAP_PUT_MAX + 1))
            {
                *w = arg(&mut r, heap);
                hazard |= if num == Sys::TaskCapPut as u64 {
                    *w & 0xffff_ffff <= 1
                } else {
                    *w == sawmill_rt::slots::CONSOLE
                };
            }
        }
        if hazard
            || num == Sys::ThreadExit as u64
            || num == Sys::Unmap as u64
            || (num == Sys::TaskMap as u64 && a[0] == 0)
            || (num == Sys::TaskKill as u64 && a[0] == 0)
            || ((num == Sys::ThreadConfig as u64 || num == Sys::ThreadForeign as u64) && a[0] == 1)
            || num == Sys::SetTls as u64
            // No copies of our own task or thread capability: through a copy, TaskKill or
            // ThreadConfig would end or re-point ourselves just as the direct slots would.
            || ((num == Sys::CapCopy as u64 || num == Sys::CapMint as u64) && a[0] <= 1)
            || (num == Sys::TaskCapPut as u64 && batch == 0 && a[1] <= 1)
            || (num == Sys::DebugWrite as u64 && a[1] < 0x8000_0000_0000)
            // Keep the console capability: the verdict is printed through it.
            || (num == Sys::CapDelete as u64 && batch == 0 && a[0] == sawmill_rt::slots::CONSOLE)
        {
            continue;
        }
        if blocking_ipc.contains(&num) {
            a[1] |= MsgTag::NONBLOCK;
        }
        if num == Sys::NotifyWait as u64 {
            a[1] |= NOTIFY_NONBLOCK;
        }
        if made == trace {
            println!("hostile: call {}: number {} args {:#x?}", made, num, a);
        }
        // Every eighth call enters with hostile flags: DF (string direction), NT (nested task)
        // and AC set; the kernel must neither misbehave nor fault on its way back.
        let e = if made % 8 == 7 {
            raw_with_flags(num, a)
        } else {
            sys::raw_num(num, a)
        };
        errs[(e as usize).min(15)] += 1;
        made += 1;
    }
    spin_backwards();
    println!(
        "hostile: {} calls made; results by error code: {:?}",
        made, errs
    );
    println!(
        "hostile: PASS still alive after {} random system calls (seed {})",
        made, seed
    );
}
