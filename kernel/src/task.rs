//! Tasks: an address space and a capability table, the threads bound to them, an optional I/O
//! port bitmap and a priority ceiling.
use crate::cap;
use crate::error::SysResult;
use crate::factory::{self, charge, hdr};
use crate::mem::PAGE;
use crate::obj::{Cap, Factory, Task};
use crate::paging;
use crate::sched;
use crate::state::{kernel, MAX_TASKS};
use crate::thread;
use crate::vm;
use alloc::boxed::Box;
use alloc::vec::Vec;
use sawmill_abi::Error;
use sawmill_kcore::cspace::CSpace;

pub fn new_task(f: *mut Factory, slots: u64, max_prio: u8) -> Result<*mut Task, Error> {
    if slots == 0 || slots > 4096 {
        return Err(Error::Invalid);
    }
    let size = core::mem::size_of::<Task>() as u64
        + CSpace::<Cap>::table_bytes(slots as usize) as u64
        + PAGE
        + 64;
    charge(f, size)?;
    if !kernel().cspace.has_room()
        || (kernel().tasks.len() >= MAX_TASKS && !kernel().tasks.iter().any(|t| t.is_null()))
    {
        factory::uncharge(f, size);
        return Err(Error::NoMemory);
    }
    let Some(pml4) = paging::new_space() else {
        factory::uncharge(f, size);
        return Err(Error::NoMemory);
    };
    let table = kernel().cspace.create_table(slots as usize);
    let id = match kernel().tasks.iter().position(|t| t.is_null()) {
        Some(i) => i as u32,
        None => {
            kernel().tasks.push(core::ptr::null_mut());
            (kernel().tasks.len() - 1) as u32
        }
    };
    let t = Box::into_raw(Box::new(Task {
        hdr: hdr(f, size),
        id,
        pml4,
        table,
        slots: kernel().cspace.view(table),
        threads: Vec::new(),
        io: None,
        dead: false,
        pt_frames: 0,
        pt_list: sawmill_kcore::ptlist::PtList::new(),
        nodes: 0,
        max_prio,
        pins: None,
        links: Vec::new(),
        lent: 0,
        mapped_out: false,
    }));
    kernel().tasks[id as usize] = t;
    Ok(t)
}

/// Ends a task: kills its threads, deletes its capabilities, removes its mappings (and all
/// derived from them) and frees its page tables. The object itself lives on while referenced.
pub fn kill_task(p: *mut Task) {
    // SAFETY: p is a live task.
    let task = unsafe { &mut *p };
    if task.dead {
        return;
    }
    while let Some(&th) = task.threads.last() {
        thread::kill_thread(th);
    }
    crate::pin::release_task(p);
    crate::iommu::task_gone(task.id);
    unlink_all(p);
    // Dead before its mappings go: `unmap_removed` then leaves its own page tables alone (they
    // are freed whole below, and it runs on them no more), clearing only derived mappings in
    // other tasks.
    task.dead = true;
    // Its own mappings are counted, not listed (their entries go with the page tables); what
    // was derived from them in other tasks is listed, to leave those tasks' page tables.
    let mut gone = Vec::new();
    let own = kernel().mapdb.remove_dead_space(task.id, &mut gone);
    nodes_gone(task, own);
    vm::unmap_removed(&gone);

    task.slots = sawmill_kcore::cspace::TableView::EMPTY;
    for c in kernel().cspace.destroy_table(task.table) {
        cap::release(c);
    }
    if kernel().io_loaded == p {
        sched::clear_io();
    }
    if let Some(io) = task.io.take() {
        drop(io);
        factory::uncharge(task.hdr.factory, 8192);
    }
    if kernel().loaded_cr3 == task.pml4 {
        crate::arch::write_cr3(paging::kernel_pml4());
        kernel().loaded_cr3 = paging::kernel_pml4();
    }
    let n = paging::free_space(task.pml4, task.pt_list.all());
    // The PML4 itself was part of the task's own charge.
    factory::uncharge(task.hdr.factory, (n - 1) * PAGE);
    task.pt_frames = 0;
}

/// `n` mapping nodes of `task` removed without `vm::unmap_removed`: off its count and its
/// factory's charge, as that would have taken them.
fn nodes_gone(task: &mut Task, n: usize) {
    let n = (n as u64).min(task.nodes);
    task.nodes -= n;
    factory::uncharge(
        task.hdr.factory,
        n * sawmill_kcore::mapdb::NODE_BYTES as u64,
    );
}

/// `task_link`: task `dt` borrows `st`'s page table of the 2 MiB window at `va`.
pub fn link(dt: *mut Task, st: *mut Task, va: u64) -> SysResult {
    if dt == st || va & 0x1f_ffff != 0 || !paging::user_range_ok(va, 0x20_0000) {
        return Err(reject!(
            Error::Invalid,
            "same task, or window unaligned or outside user space"
        ));
    }
    // SAFETY: both are live tasks (capabilities checked by the caller).
    let (d, s) = unsafe { (&mut *dt, &mut *st) };
    if d.links.len() >= sawmill_abi::MAX_LINKS {
        return Err(reject!(Error::Invalid, "too many borrowed page tables"));
    }
    let mut alloc = || factory::pt_alloc(dt);
    paging::link_pt(d.pml4, s.pml4, va, &mut alloc).map_err(|e| match e {
        Error::Fault => reject!(Error::Fault, "no page table of the source's own there"),
        Error::Busy => reject!(Error::Busy, "the window is not empty"),
        e => e.into(),
    })?;
    d.links.push((va, st));
    s.lent += 1;
    Ok(())
}

/// `task_reset`: empties live task `p` for another program of the caller's (`caller`), keeping
/// the windows borrowed from `lender` and the pages of `runs` (see `Sys::TaskReset`); returns the
/// pages kept. After it nothing of the program that ran is reachable from the task: no thread,
/// capability, pin, port, borrowed window of another, or mapping but the caller's own pages
/// where the caller put them, with nothing derived from them and their dirty bits clear.
pub fn reset_task(
    caller: *mut Task,
    p: *mut Task,
    lender: Option<*mut Task>,
    runs: &[sawmill_kcore::reset::Run],
) -> Result<u64, crate::error::Rejection> {
    if p == caller || lender == Some(p) {
        return Err(reject!(Error::Invalid, "task reset: the caller's own task"));
    }
    let pages = sawmill_kcore::reset::check(runs, paging::user_range_ok).map_err(|_| {
        reject!(
            Error::Invalid,
            "task reset: runs unaligned, empty, too long or many, overlapping or outside user space"
        )
    })?;
    // SAFETY: both are live tasks (capabilities checked by the caller).
    let (task, me) = unsafe { (&mut *p, &*caller) };
    while let Some(&th) = task.threads.last() {
        thread::kill_thread(th);
    }
    crate::pin::release_task(p);
    crate::iommu::task_gone(task.id);
    unlink(p, lender);
    let mut gone = Vec::new();
    let builder = me.id;
    // The task's own removed mappings leave its page table as they go (no list to walk again)
    // unless its entries may be cached (loaded) or seen elsewhere (lent tables): those go the
    // general way, through `unmap_removed`.
    let pml4 = task.pml4;
    let mut last_pt: paging::LastTable = None;
    let mut clear = |m: &sawmill_kcore::mapdb::Mapping| vm::clear_entry(pml4, m, &mut last_pt);
    let own: Option<&mut dyn FnMut(&sawmill_kcore::mapdb::Mapping)> =
        if kernel().loaded_cr3 != pml4 && task.lent == 0 {
            Some(&mut clear)
        } else {
            None
        };
    let (kept, cleared) = kernel().mapdb.retain_space_with(
        task.id,
        |m, parent| sawmill_kcore::reset::keeps(runs, builder, m, parent),
        own,
        &mut gone,
    );
    nodes_gone(task, cleared);
    vm::unmap_removed(&gone);
    // Written by the program that ran: not the next one's writes (`task_dirty`).
    for r in runs {
        paging::clear_dirty_run(task.pml4, r.dst, r.pages);
    }
    task.mapped_out = false;
    if kernel().loaded_cr3 == task.pml4 {
        // The TLB may hold a kept page's entry marked dirty: a write through it would not set
        // the bit again.
        crate::arch::write_cr3(task.pml4);
    }
    // Every capability deleted; the table stays (its memory never moves, so the view holds).
    for c in kernel().cspace.clear_table(task.table) {
        cap::release(c);
    }
    if kernel().io_loaded == p {
        sched::clear_io();
    }
    if let Some(io) = task.io.take() {
        drop(io);
        factory::uncharge(task.hdr.factory, 8192);
    }
    debug_assert!(kept as u64 <= pages);
    Ok(kept as u64)
}

/// Ends the borrowing of page tables by task `p` and from it: its own links go, and a lender's
/// page tables leave every borrower before they are freed.
fn unlink_all(p: *mut Task) {
    unlink(p, None)
}

/// [`unlink_all`], but for the windows `p` borrows from `keep`.
fn unlink(p: *mut Task, keep: Option<*mut Task>) {
    // SAFETY: p is a live task.
    let task = unsafe { &mut *p };
    let mut flush = false;
    let pml4 = task.pml4;
    task.links.retain(|&(va, lender)| {
        if Some(lender) == keep {
            return true;
        }
        paging::unlink_pt(pml4, va);
        // SAFETY: a lender outlives its links (its end unlinks them below).
        unsafe { (*lender).lent -= 1 };
        flush |= kernel().loaded_cr3 == pml4;
        false
    });
    if task.lent > 0 {
        for i in 0..kernel().tasks.len() {
            let b = kernel().tasks[i];
            if b.is_null() || b == p {
                continue;
            }
            // SAFETY: tasks[] holds only live tasks.
            let borrower = unsafe { &mut *b };
            borrower.links.retain(|&(va, lender)| {
                if lender != p {
                    return true;
                }
                paging::unlink_pt(borrower.pml4, va);
                flush |= kernel().loaded_cr3 == borrower.pml4;
                false
            });
        }
        task.lent = 0;
    }
    if flush {
        crate::arch::write_cr3(kernel().loaded_cr3);
    }
}

/// `ioport_give`: opens ports `[base, base + count)` to task `tt`, within the window of the
/// I/O-control capability `io`.
pub fn io_port_give(io: Cap, tt: *mut Task, base: u64, count: u64) -> SysResult {
    if base >= 65536 || count == 0 || base + count > 65536 {
        return Err(reject!(Error::Invalid, "port range empty or beyond 65535"));
    }
    // A minted I/O-control capability covers only its port window (see abi::io_window).
    if io.badge != 0 {
        let (lo, n) = sawmill_abi::io_window(io.badge);
        if base < lo || base + count > lo + n {
            return Err(reject!(
                Error::NoRights,
                "ports outside the I/O-control window",
            ));
        }
    }
    // SAFETY: live task.
    let tk = unsafe { &mut *tt };
    if tk.io.is_none() {
        charge(tk.hdr.factory, 8192)?;
    }
    let bm = tk.io.get_or_insert_with(|| Box::new([0xff; 8192]));
    for p in base..base + count {
        bm[(p / 8) as usize] &= !(1 << (p % 8));
    }
    if kernel().io_loaded == tt {
        sched::clear_io();
    }
    sched::reload();
    Ok(())
}
