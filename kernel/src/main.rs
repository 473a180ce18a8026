//! The sawmill microkernel.
//!
//! Owns the CPU's privileged state and nothing else: address spaces, threads, capability
//! tables, IPC, interrupts-as-messages. Everything else (memory policy, drivers, file systems)
//! runs in user-level servers started by the root task. See docs/ARCHITECTURE.md.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

// Layers, lowest first; a module uses only modules of lower layers (docs/ARCHITECTURE.md 3).
// Hardware and memory:
mod arch;
mod boot;
mod clock;
mod mem;
mod paging;
mod serial;
// State and the error path:
#[macro_use]
mod error;
mod obj;
mod state;
mod trace;
// Capabilities, quotas, scheduling, mapping:
mod cap;
mod factory;
mod iommu;
mod pin;
mod sched;
mod timeout;
mod vm;
// One module per kernel object; each may use those above it in this list:
mod endpoint;
mod irq;
mod notification;
mod senders;
mod task;
mod thread;
// Lifetimes across kinds, then the entries and exits:
mod object;
mod syscall;
mod trap;

use mem::{phys, phys_to_virt, Range, PAGE};
use obj::{Cap, Obj};
use sawmill_abi::{layout, map, rights, root_slots};
use sawmill_kcore::multiboot2;
use state::kernel;

extern "C" {
    static __kernel_end: u8;
}

const KVB: u64 = 0xffff_ffff_8000_0000;

/// Writes the exit code to QEMU's isa-debug-exit device and stops.
pub fn shutdown(code: u8) -> ! {
    kprintln!("kernel: shutdown, code {}", code);
    arch::outb(sawmill_abi::DEBUG_EXIT_PORT, 0x10 | (code & 0xf));
    loop {
        // SAFETY: halting with interrupts off ends execution on real hardware.
        unsafe { core::arch::asm!("cli; hlt") };
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    kprintln!("KERNEL PANIC: {}", info);
    shutdown(0x0f)
}

fn rd<T: Copy>(p: u64) -> T {
    // SAFETY: reads loader-provided boot structures through the direct map.
    unsafe { core::ptr::read_unaligned(phys_to_virt(p) as *const T) }
}

/// Usable RAM from the loader's memory map.
fn memory_map(out: &mut [Range; 64]) -> usize {
    let mut n = 0;
    let mut add = |start: u64, len: u64| {
        if n < out.len() {
            out[n] = Range {
                start,
                end: start + len,
            };
            n += 1;
        }
    };
    // SAFETY: written once by the boot code.
    let (kind, info) = unsafe { (boot::BOOT_KIND, boot::BOOT_INFO as u64) };
    if kind == 1 {
        let magic: u32 = rd(info);
        let version: u32 = rd(info + 4);
        if magic != 0x336e_c578 || version < 1 {
            panic!("PVH start info without a memory map");
        }
        let mm: u64 = rd(info + 40);
        let cnt: u32 = rd(info + 48);
        for i in 0..cnt as u64 {
            let e = mm + i * 24;
            let (a, l, t): (u64, u64, u32) = (rd(e), rd(e + 8), rd(e + 16));
            if t == 1 {
                add(a, l);
            }
        }
    } else if let Some(mbi) = mem::multiboot2_info() {
        for (kind, payload) in multiboot2::tags(mbi) {
            if kind == multiboot2::TAG_MEMORY_MAP {
                for (base, len, ty) in multiboot2::memory_map(payload) {
                    if ty == 1 {
                        add(base, len);
                    }
                }
            }
        }
    } else {
        panic!("unknown boot protocol");
    }
    n
}

/// The kernel command line from the loader (QEMU's `-append`), up to 255 bytes; empty if none.
fn cmdline() -> [u8; 256] {
    let mut out = [0u8; 256];
    // SAFETY: written once by the boot code.
    let (kind, info) = unsafe { (boot::BOOT_KIND, boot::BOOT_INFO as u64) };
    let mut at = 0;
    if kind == 1 {
        // PVH start info: cmdline_paddr at offset 24 (0 = none).
        at = rd::<u64>(info + 24);
    } else if let Some(mbi) = mem::multiboot2_info() {
        // Multiboot2: the command-line tag holds the string itself.
        if let Some((_, cmd)) = multiboot2::tags(mbi).find(|t| t.0 == multiboot2::TAG_CMDLINE) {
            let n = cmd.len().min(255);
            out[..n].copy_from_slice(&cmd[..n]);
            return out;
        }
    }
    if at != 0 && at + 256 <= mem::DIRECT_MAP_SIZE {
        out = rd(at);
        out[255] = 0;
    }
    out
}

/// Removes `[s, e)` from the ranges.
fn carve(r: &mut [Range; 64], n: &mut usize, s: u64, e: u64) {
    let mut out = [Range { start: 0, end: 0 }; 64];
    let mut m = 0;
    for x in &r[..*n] {
        if x.end <= s || x.start >= e {
            out[m] = *x;
            m += 1;
        } else {
            if x.start < s {
                out[m] = Range {
                    start: x.start,
                    end: s,
                };
                m += 1;
            }
            if x.end > e && m < 64 {
                out[m] = Range {
                    start: e,
                    end: x.end,
                };
                m += 1;
            }
        }
    }
    *r = out;
    *n = m;
}

struct Archive {
    pa: u64,
    len: u64,
}

impl Archive {
    fn find(&self, name: &str) -> Option<(u64, u64)> {
        if self.len < 16 || rd::<[u8; 8]>(self.pa) != *b"SAWMARCH" {
            return None;
        }
        let count: u32 = rd(self.pa + 12);
        for i in 0..count.min(1024) as u64 {
            let e = self.pa + 16 + i * 64;
            if e + 64 > self.pa + self.len {
                return None;
            }
            let nm: [u8; 48] = rd(e);
            let l = nm.iter().position(|&b| b == 0).unwrap_or(48);
            if &nm[..l] == name.as_bytes() {
                let (off, size): (u64, u64) = (rd(e + 48), rd(e + 56));
                if off.checked_add(size).is_none_or(|x| x > self.len) {
                    return None;
                }
                return Some((self.pa + off, size));
            }
        }
        None
    }
}

/// Loads the root task's ELF image into fresh pool frames.
fn load_root_elf(t: *mut obj::Task, pa: u64, size: u64) -> u64 {
    let hdr: [u8; 64] = rd(pa);
    if size < 64 || &hdr[0..4] != b"\x7fELF" || hdr[4] != 2 {
        panic!("root module is not an ELF64 image");
    }
    let entry = u64::from_le_bytes(hdr[24..32].try_into().unwrap());
    let phoff = u64::from_le_bytes(hdr[32..40].try_into().unwrap());
    let phnum = u16::from_le_bytes(hdr[56..58].try_into().unwrap()) as u64;
    for i in 0..phnum {
        let ph = pa + phoff + i * 56;
        let (ty, flags): (u32, u32) = (rd(ph), rd(ph + 4));
        if ty != 1 {
            continue;
        }
        let (off, va, filesz, memsz): (u64, u64, u64, u64) =
            (rd(ph + 8), rd(ph + 16), rd(ph + 32), rd(ph + 40));
        if off + filesz > size {
            panic!("root ELF segment outside the image");
        }
        let mut r = map::READ;
        if flags & 2 != 0 {
            r |= map::WRITE;
        }
        if flags & 1 != 0 {
            r |= map::EXEC;
        }
        let mut page = va & !0xfff;
        while page < va + memsz {
            // SAFETY: live task.
            let pml4 = unsafe { (*t).pml4 };
            let frame = match paging::translate(pml4, page) {
                Some((f, _)) => f,
                None => {
                    let f = phys().alloc_frame().expect("out of memory loading root");
                    vm::map_root(t, page, f, r | map::WRITE).expect("mapping root image");
                    f
                }
            };
            // Copy the part of the file image that falls into this page.
            let lo = page.max(va);
            let hi = (page + PAGE).min(va + filesz);
            if lo < hi {
                // SAFETY: source is inside the archive, destination inside a fresh frame.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        phys_to_virt(pa + off + (lo - va)),
                        phys_to_virt(frame + (lo - page)),
                        (hi - lo) as usize,
                    );
                }
            }
            page += PAGE;
        }
    }
    entry
}

#[no_mangle]
extern "C" fn kmain() -> ! {
    serial::init();
    kprintln!("sawmill kernel: booting");
    // Uncached direct-map pages for the IOAPIC/LAPIC region; drop the boot identity map.
    // SAFETY: boot page tables are ours; interrupts are off.
    unsafe {
        let pml4 = phys_to_virt(paging::kernel_pml4()) as *mut u64;
        let pdpt_low = *pml4.add(256) & paging::ADDR;
        let pd3 = (*(phys_to_virt(pdpt_low) as *mut u64).add(3)) & paging::ADDR;
        let pd3 = phys_to_virt(pd3) as *mut u64;
        *pd3.add(502) |= paging::PCD | paging::PWT;
        *pd3.add(503) |= paging::PCD | paging::PWT;
        *pml4 = 0;
        arch::write_cr3(paging::kernel_pml4());
    }
    let mut ranges = [Range { start: 0, end: 0 }; 64];
    let mut n = memory_map(&mut ranges);
    // Read before the frame pool may reuse the loader's memory.
    let cmdline = cmdline();
    let all_ram = ranges;
    let nall = n;
    // SAFETY: linker symbol.
    let kend = unsafe { &__kernel_end as *const u8 as u64 } - KVB;
    // SAFETY: patched into the image by the host tool before boot.
    let bm = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(boot::SAWMILL_BOOTMODS)) };
    let arch_ = Archive {
        pa: bm[1],
        len: bm[2],
    };
    carve(&mut ranges, &mut n, 0, 0x10_0000);
    carve(&mut ranges, &mut n, 0x10_0000, (kend + 0xfff) & !0xfff);
    carve(
        &mut ranges,
        &mut n,
        bm[1] & !0xfff,
        (bm[1] + bm[2] + 0xfff) & !0xfff,
    );
    carve(&mut ranges, &mut n, mem::DIRECT_MAP_SIZE, u64::MAX);
    for r in ranges[..n].iter_mut() {
        r.start = (r.start + 0xfff) & !0xfff;
        r.end &= !0xfff;
    }
    phys().init(&ranges[..n]);
    let pool = phys().pool_frames;
    mem::heap_init((pool / 2) as usize);
    arch::init();
    state::init();
    trace::init(&cmdline);
    clock::init();
    {
        let kk = kernel();
        for (i, r) in all_ram[..nall.min(mem::MAX_RANGES)].iter().enumerate() {
            kk.ram[i] = *r;
        }
        kk.nram = nall.min(mem::MAX_RANGES);
        kk.loaded_cr3 = paging::kernel_pml4();
    }
    trap::init_interrupts();
    kprintln!(
        "sawmill kernel: {} MiB kernel pool, {} MiB user RAM, boot archive {} KiB",
        (pool * PAGE) >> 20,
        (phys().user_frames * PAGE) >> 20,
        bm[2] >> 10
    );
    iommu::init();
    if bm[0] != u64::from_le_bytes(*b"BOOTMODS") || bm[2] == 0 {
        panic!("no boot archive: build the image with `sawmill image`");
    }
    start_root(&arch_);
    trap::leave()
}

fn start_root(a: &Archive) {
    let Some((rpa, rsize)) = a.find("root") else {
        panic!("boot archive has no `root` module")
    };
    // Root's factory holds what the kernel pool has left, minus a reserve for the kernel's own
    // bookkeeping (mapping nodes of root's window, heap fragmentation).
    let reserve = 2 << 20;
    let limit = mem::kmem_free().saturating_sub(reserve);
    let fac = factory::new_factory(core::ptr::null_mut(), limit).expect("root factory");
    let task = task::new_task(fac, 1024, 255).expect("root task");
    kernel().root_task = task;
    let thread = thread::new_thread(fac).expect("root thread");
    let c = |o| Cap::new(o, rights::ALL, 0);
    cap::insert_root(task, root_slots::TASK, c(Obj::Task(task))).unwrap();
    cap::insert_root(task, root_slots::THREAD, c(Obj::Thread(thread))).unwrap();
    cap::insert_root(task, root_slots::FACTORY, c(Obj::Factory(fac))).unwrap();
    cap::insert_root(task, root_slots::IRQ_CONTROL, c(Obj::IrqControl)).unwrap();
    cap::insert_root(task, root_slots::IO_CONTROL, c(Obj::IoControl)).unwrap();
    cap::insert_root(task, root_slots::CONTROL, c(Obj::Control)).unwrap();
    cap::insert_root(task, root_slots::CONSOLE, c(Obj::Console)).unwrap();
    let entry = load_root_elf(task, rpa, rsize);
    // The boot archive, read-only: root maps server images straight out of it.
    let mut off = 0;
    while off < a.len {
        vm::map_root(
            task,
            layout::BOOT_ARCHIVE + off,
            (a.pa & !0xfff) + off,
            map::READ | map::EXEC,
        )
        .expect("mapping boot archive");
        off += PAGE;
    }
    // All user RAM, in root's physical-memory window: 2 MiB pages where possible. Root hands out
    // pages from here and derives every user mapping in the system from these.
    let wr = map::READ | map::WRITE | map::EXEC;
    for i in 0..phys().nuser {
        let r = phys().user[i];
        let mut p = r.start;
        while p < r.end {
            if p & 0x1f_ffff == 0 && p + 0x20_0000 <= r.end {
                vm::map_root_sized(task, layout::PHYS_WINDOW + p, p, wr, true)
                    .expect("root window");
                p += 0x20_0000;
            } else {
                vm::map_root(task, layout::PHYS_WINDOW + p, p, wr).expect("root window");
                p += PAGE;
            }
        }
    }
    // Stack: 64 KiB.
    for i in 1..=16 {
        let f = phys().alloc_frame().expect("root stack");
        vm::map_root(
            task,
            layout::ROOT_STACK_TOP - i * PAGE,
            f,
            map::READ | map::WRITE,
        )
        .expect("root stack");
    }
    // SAFETY: the thread is fresh; configure it directly (no capability checks for the kernel).
    let t = unsafe { &mut *thread };
    let pa = phys().alloc_frame().expect("root utcb");
    // SAFETY: live task.
    let tk = unsafe { &mut *task };
    let mut alloc = || factory::pt_alloc(task);
    assert!(paging::map(
        tk.pml4,
        layout::ROOT_UTCB,
        pa,
        paging::pte_flags(map::READ | map::WRITE, false),
        false,
        &mut alloc
    ));
    // SAFETY: fresh frame.
    unsafe { (*(phys_to_virt(pa) as *mut sawmill_abi::Utcb)).user[0] = layout::ROOT_UTCB };
    t.utcb_pa = pa;
    t.utcb_va = layout::ROOT_UTCB;
    t.gs_base = layout::ROOT_UTCB;
    t.task = task;
    tk.threads.push(thread);
    t.prio = sawmill_abi::ROOT_PRIORITY;
    t.frame.rip = entry;
    t.frame.rsp = layout::ROOT_STACK_TOP - 8;
    t.frame.rdi = 0;
    t.frame.cs = arch::UCODE as u64;
    t.frame.ss = arch::UDATA as u64;
    t.frame.rflags = 0x202;
    t.started = true;
    sched::make_ready(thread);
}
