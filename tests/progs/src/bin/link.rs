//! Borrowed page tables (`task_link`): we borrow a page table of a task we make (the lender)
//! and check that its pages show in our space at no mapping of ours, that what it maps and
//! unmaps there later shows too (no stale translation), that nothing can be mapped into the
//! borrowed window, the refusals, and that the lender's end takes the table out of our space
//! (the window is ours to map again). Root then checks every byte of kernel memory came back.
#![no_std]
#![no_main]
use sawmill_abi::{map, Error, ObjKind};
use sawmill_rt::{println, slots, sys, thread};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

/// The window we borrow (2 MiB aligned, free in our layout).
const WINDOW: u64 = 0x9000_0000;
const WINDOW_SIZE: u64 = 0x20_0000;

/// Two pages of ours the lender maps.
#[repr(C, align(4096))]
struct Pages([[u64; 512]; 2]);
static mut PAGES: Pages = Pages([[0; 512]; 2]);

fn page(i: usize) -> u64 {
    // SAFETY: only the address is taken.
    unsafe { core::ptr::addr_of!(PAGES.0[i]) as u64 }
}

fn write(a: u64, v: u64) {
    // SAFETY: `a` is one of our own pages, mapped read-write.
    unsafe { core::ptr::write_volatile(a as *mut u64, v) }
}

fn read(a: u64) -> u64 {
    // SAFETY: callers read only addresses they checked are mapped.
    unsafe { core::ptr::read_volatile(a as *const u64) }
}

fn main() {
    let lender = thread::alloc_slot();
    sys::factory_create(slots::FACTORY, ObjKind::Task, lender, 1).expect("the lender");
    write(page(0), 0x1111);
    write(page(1), 0x2222);
    sys::task_map(lender, page(0), WINDOW, 1, map::READ).expect("lender maps page 0");

    // Refusals first: nothing changes.
    check!(
        sys::task_link(slots::TASK, lender, WINDOW + 0x1000) == Err(Error::Invalid),
        "an unaligned window was lent"
    );
    check!(
        sys::task_link(lender, lender, WINDOW) == Err(Error::Invalid),
        "a task borrowed from itself"
    );
    check!(
        sys::task_link(slots::TASK, lender, WINDOW + WINDOW_SIZE) == Err(Error::Fault),
        "a window without the lender's page table was lent"
    );
    check!(
        sys::task_link(slots::TASK, lender, 0x8000_0000_0000) == Err(Error::Invalid),
        "a window outside user space was lent"
    );

    sys::task_link(slots::TASK, lender, WINDOW).expect("borrowing the window");
    check!(
        sys::translate(WINDOW) == sys::translate(page(0)) && read(WINDOW) == 0x1111,
        "the lender's page does not show in the borrower"
    );
    write(page(0), 0x1112);
    check!(read(WINDOW) == 0x1112, "the borrower sees another frame");
    println!("link: PASS the lender's pages show in the borrower's space");

    check!(
        sys::task_link(slots::TASK, lender, WINDOW) == Err(Error::Busy),
        "a window was borrowed twice"
    );
    check!(
        sys::task_map(slots::TASK, page(1), WINDOW + 0x1000, 1, map::READ) == Err(Error::NoMemory),
        "the borrower mapped into the borrowed window"
    );
    check!(
        sys::task_map(slots::TASK, page(1), WINDOW, 1, map::READ | map::HUGE)
            == Err(Error::Invalid),
        "the borrower mapped a 2 MiB page over the borrowed window"
    );
    check!(
        read(WINDOW) == 0x1112,
        "a refused mapping changed the borrowed window"
    );
    println!("link: PASS nothing maps into a borrowed window");

    // The lender maps and unmaps later: the borrower sees it at once (our space is loaded,
    // the lender's is not: a stale translation would read page 0 after the revocation).
    sys::task_map(lender, page(1), WINDOW + 0x1000, 1, map::READ).expect("lender maps page 1");
    check!(
        read(WINDOW + 0x1000) == 0x2222,
        "a page the lender mapped later does not show"
    );
    sys::unmap(page(0), 1, 0).expect("revoking what came from page 0");
    check!(
        sys::translate(WINDOW) == Err(Error::Fault),
        "a revoked page is still in the borrowed window"
    );
    sys::task_map(lender, page(1), WINDOW, 1, map::READ).expect("lender maps page 1 again");
    check!(
        read(WINDOW) == 0x2222,
        "a stale translation of the revoked page was used"
    );
    println!("link: PASS the lender's later mappings and revocations show at once");

    // The lender ends: its table leaves our space, and the window is ours again.
    sys::task_kill(lender).expect("ending the lender");
    check!(
        sys::translate(WINDOW) == Err(Error::Fault)
            && sys::translate(WINDOW + 0x1000) == Err(Error::Fault),
        "the ended lender's pages still show"
    );
    sys::task_map(slots::TASK, page(1), WINDOW, 1, map::READ).expect("the window is ours again");
    check!(read(WINDOW) == 0x2222, "our own mapping in the window");
    sys::unmap(WINDOW, 1, sawmill_abi::UNMAP_SELF).expect("unmapping it");
    let _ = sys::cap_delete(lender);
    println!("link: PASS the lender's end takes its page table out of the borrower");
}
