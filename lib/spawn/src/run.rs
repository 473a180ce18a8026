//! The mechanics of starting a program: the system calls that carry out a [`Plan`].

use crate::plan::{self, Layout, Plan, Region, Sizes, SpawnError, HUGE_PAGE, PAGE};
use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use sawmill_abi::{map, ObjKind};
use sawmill_loader::PagePlan;
use sawmill_rt::{env, slots, sys};

/// Names under which the environment lists the capabilities `prepare` places itself.
pub const CAP_TASK: &str = "sys:task";
pub const CAP_THREAD: &str = "sys:thread";
pub const CAP_FACTORY: &str = "sys:factory";

impl Layout {
    /// The runtime's layout (`sawmill_rt::layout`), which every sawmill program expects.
    pub fn standard() -> Layout {
        use sawmill_rt::layout as l;
        Layout {
            env: l::ENV,
            heap: l::HEAP,
            stack_top: l::STACK_TOP,
            utcb: l::UTCB_BASE,
            huge: l::HUGE,
            user_end: sawmill_abi::layout::USER_END,
        }
    }
}

/// Where the ELF image comes from: readable in the caller's address space, and able to make any
/// of its pages present there so that a mapping into the new task can be derived from it.
pub trait ImageSource {
    /// The whole image.
    fn bytes(&self) -> &[u8];
    /// The caller's address of the image's byte 0.
    fn base(&self) -> u64;
    /// Makes the page at `off` (page aligned, inside the image) present in the caller and
    /// returns its address.
    fn page(&self, off: u64) -> Result<u64, SpawnError>;
    /// Whether the source's pages may be mapped into the new task. A mapping has at most the
    /// rights of the caller's, so a source whose pages are not executable for the caller
    /// (e.g. the ext2 PFS's shadow pages of a 1 KiB-block file system) must say false: then
    /// every page is copied.
    fn maps_straight(&self) -> bool {
        true
    }
}

/// An image visible at a fixed place of the caller: resident (root's boot archive) or paged in on
/// first touch (a file's dataspace attached through the region manager, read-only and, for its
/// text to map straight, executable).
pub struct MappedImage {
    addr: u64,
    len: u64,
    demand: bool,
    /// Set by [`MappedImage::copied`].
    copy: bool,
}

impl MappedImage {
    /// # Safety
    /// `[addr, addr + len)` is mapped readable in this task and stays so while the image is used.
    pub unsafe fn resident(addr: u64, len: u64) -> MappedImage {
        MappedImage {
            addr,
            len,
            demand: false,
            copy: false,
        }
    }

    /// # Safety
    /// `[addr, addr + len)` is attached readable in this task (its pages fault in on touch) and
    /// stays so while the image is used.
    pub unsafe fn on_demand(addr: u64, len: u64) -> MappedImage {
        MappedImage {
            addr,
            len,
            demand: true,
            copy: false,
        }
    }

    /// The same image, every page of it copied rather than mapped.
    pub fn copied(self) -> MappedImage {
        MappedImage { copy: true, ..self }
    }
}

impl ImageSource for MappedImage {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the constructor's contract: the range is readable for as long as `self` lives.
        unsafe { core::slice::from_raw_parts(self.addr as *const u8, self.len as usize) }
    }
    fn base(&self) -> u64 {
        self.addr
    }
    fn maps_straight(&self) -> bool {
        !self.copy
    }
    fn page(&self, off: u64) -> Result<u64, SpawnError> {
        if !off.is_multiple_of(PAGE) || off >= self.len {
            return Err(SpawnError::Image("page outside the image"));
        }
        let a = self.addr + off;
        if self.demand {
            // SAFETY: inside the readable range (constructor's contract); the read faults the
            // page in through this task's pager.
            unsafe { core::ptr::read_volatile(a as *const u8) };
        }
        Ok(a)
    }
}

/// The caller's resources the new program is built from.
pub trait Resources {
    /// An empty capability slot of the caller.
    fn slot(&mut self) -> Result<u64, SpawnError>;
    /// A slot `slot` gave is empty again.
    fn free_slot(&mut self, _slot: u64) {}
    /// A zeroed page, mapped read-write (and executable, for copied text) in the caller; its
    /// address.
    fn page(&mut self) -> Result<u64, SpawnError>;
    /// A page `page` gave is no longer used by the program (the program's task is gone).
    fn free_page(&mut self, addr: u64);
    /// `pages` zeroed pages at consecutive addresses of the caller, mapped read-write there
    /// (one `task_map` places them all); None if the caller has no such run (the pages are then
    /// taken one by one).
    fn run(&mut self, _pages: u64) -> Option<u64> {
        None
    }
    /// A run `run` gave is no longer used by the program.
    fn free_run(&mut self, _addr: u64, _pages: u64) {}
    /// As [`Self::free_run`], knowing which pages may hold data: bit i of `dirty` for page i
    /// (pages past the 64th always; the others are still as `run` gave them: zero).
    fn free_run_dirty(&mut self, addr: u64, pages: u64, _dirty: u64) {
        self.free_run(addr, pages)
    }
    /// A zeroed, 2 MiB-aligned 2 MiB page mapped read-write with a 2 MiB mapping in the caller.
    fn huge_page(&mut self) -> Result<u64, SpawnError> {
        Err(SpawnError::NoMemory)
    }
    fn free_huge_page(&mut self, _addr: u64) {}
}

/// A capability to place in the new task: the caller's slot `src`, copied to slot `slot` (or the
/// next free one from `slots::FIRST_NAMED`) and listed in the environment as `name` (unless empty).
#[derive(Clone, Debug)]
pub struct Cap {
    /// Its name in the environment: most are constants, borrowed rather than copied (a
    /// process's ~20 allocated and freed were ~2k of each of proc's builds).
    pub name: Cow<'static, str>,
    pub src: u64,
    pub slot: Option<u64>,
    /// The environment record that names it: `env::KIND_CAP`, or `env::KIND_PROVIDES` for an
    /// endpoint the program serves.
    pub kind: u64,
    /// It may be gone by the time it is placed (a capability a process handed on, of a server
    /// that died since: its slot was emptied by the revocation). An empty one is left out, its
    /// record with it (counted in [`Child::caps_gone`]), where a required one fails the spawn.
    pub optional: bool,
}

impl Cap {
    pub fn named(name: impl Into<Cow<'static, str>>, src: u64) -> Cap {
        Cap {
            name: name.into(),
            src,
            slot: None,
            kind: env::KIND_CAP,
            optional: false,
        }
    }
    pub fn at(name: impl Into<Cow<'static, str>>, src: u64, slot: u64) -> Cap {
        Cap {
            slot: Some(slot),
            ..Cap::named(name, src)
        }
    }
    /// An endpoint the program serves (found with `env::served` as well as `env::cap`).
    pub fn provided(name: impl Into<Cow<'static, str>>, src: u64) -> Cap {
        Cap {
            kind: env::KIND_PROVIDES,
            ..Cap::named(name, src)
        }
    }
}

/// A further environment record (`sawmill_rt::env`). An `optional` one that no longer fits is
/// left out (counted in [`Child::env_dropped`]); a required one that does not fit is an error.
#[derive(Clone, Debug)]
pub struct Record<'a> {
    pub kind: u64,
    pub value: u64,
    /// Borrowed from the caller where it can be (proc's records of every process: its
    /// environment strings, path, state), not copied.
    pub bytes: Cow<'a, [u8]>,
    pub optional: bool,
}

/// A range of the caller's memory mapped into the new task as it is (e.g. root's RAM pool for the
/// memory server). The pages stay the caller's.
#[derive(Clone, Copy, Debug)]
pub struct Map {
    pub what: &'static str,
    pub src: u64,
    pub dst: u64,
    pub pages: u64,
    /// `sawmill_abi::map` flags.
    pub flags: u64,
}

/// What to start (its arguments and records borrowed from the caller for `'a`).
#[derive(Clone, Debug)]
pub struct Program<'a> {
    /// The name in its environment (`sawmill_rt::env::name`).
    pub name: String,
    pub args: Vec<Cow<'a, str>>,
    /// The caller's factory the new one is made from, and the new one's quota in bytes (for the
    /// task's page tables, UTCBs and mapping nodes, and anything the program creates itself).
    pub factory: u64,
    pub kmem: u64,
    /// Give the program its factory (slot `slots::FACTORY`, `sys:factory`).
    pub give_factory: bool,
    /// The task's priority ceiling and the main thread's priority.
    pub priority: u8,
    /// Size of its capability table.
    pub cap_slots: u64,
    pub layout: Layout,
    pub sizes: Sizes,
    pub caps: Vec<Cap>,
    pub records: Vec<Record<'a>>,
    pub maps: Vec<Map>,
    /// The caller's endpoint slots the main thread's page faults and its exceptions and exit go
    /// to (`u64::MAX` = none).
    pub pager: u64,
    pub exception_handler: u64,
    /// The image's read-only windows, lent by a task that holds them ([`share_image`]) instead
    /// of mapped page by page.
    pub shared: Option<SharedImage>,
}

/// An image's windows held by a task of their own, to lend each program started from the image
/// ([`share_image`]).
#[derive(Clone, Debug)]
pub struct SharedImage {
    /// The caller's slots of the holding task's factory and of the task.
    pub factory: u64,
    pub task: u64,
    /// The 2 MiB windows it holds ([`Plan::shareable_windows`]).
    pub windows: Vec<u64>,
    /// The plan's other image pages, which each program maps or copies itself.
    pub rest: Vec<PagePlan>,
}

/// Makes a task (from `p.factory`, with `kmem` bytes of quota for its tables) holding the pages of
/// `pl`'s shareable windows, mapped from `image` as each program would have them, so that programs
/// started with `Program::shared` borrow its page tables (`task_link`). None if the plan has no
/// such window. The task lives as long as the caller keeps its capability.
pub fn share_image(
    p: &Program,
    pl: &Plan,
    image: &impl ImageSource,
    kmem: u64,
    res: &mut impl Resources,
) -> Result<Option<SharedImage>, SpawnError> {
    let windows = pl.shareable_windows();
    if windows.is_empty() || !image.maps_straight() {
        return Ok(None);
    }
    let mut holder = Child {
        factory: u64::MAX,
        task: u64::MAX,
        thread: u64::MAX,
        entry: 0,
        direct_pages: 0,
        copied_pages: 0,
        env_dropped: 0,
        caps_gone: 0,
        sp: 0,
        env: 0,
        slots: Vec::new(),
        pages: Vec::new(),
        runs: Vec::new(),
        huge: Vec::new(),
        keep: None,
        env_page: 0,
        copied_at: 0,
        lender: u64::MAX,
        factory_used: 0,
    };
    let r = (|| {
        let fac = create(
            p.factory,
            ObjKind::Factory,
            kmem,
            res,
            &mut holder,
            "a factory",
        )?;
        let task = create(fac, ObjKind::Task, 1, res, &mut holder, "a holding task")?;
        holder.task = task;
        for pg in &pl.image {
            let (vaddr, rights) = (pg.vaddr(), pg.rights());
            if !windows.contains(&(vaddr & !(HUGE_PAGE - 1))) {
                continue;
            }
            let a = match pg {
                PagePlan::Direct { file_off, .. } => image.page(*file_off)?,
                PagePlan::Fresh { copies, .. } => {
                    // Never written (the window is read-only): one copy for every program. The
                    // page stays the caller's for as long as the holder lives.
                    let a = res.page()?;
                    // SAFETY: a fresh page of the caller, mapped read-write there, ours alone.
                    let page =
                        unsafe { core::slice::from_raw_parts_mut(a as *mut u8, PAGE as usize) };
                    let bytes = image.bytes();
                    for &(at, off, len) in copies {
                        let src = bytes
                            .get(off as usize..(off + len) as usize)
                            .ok_or(SpawnError::BadSegment)?;
                        page.get_mut(at as usize..(at + len) as usize)
                            .ok_or(SpawnError::BadSegment)?
                            .copy_from_slice(src);
                    }
                    a
                }
            };
            sys::task_map(task, a, vaddr, 1, rights)
                .map_err(sys_err("mapping a shared image page"))?;
        }
        Ok(task)
    })();
    match r {
        Ok(task) => Ok(Some(SharedImage {
            factory: holder.slots[0],
            task,
            rest: pl
                .image
                .iter()
                .filter(|pg| !windows.contains(&(pg.vaddr() & !(HUGE_PAGE - 1))))
                .cloned()
                .collect(),
            windows,
        })),
        Err(e) => {
            holder.destroy(res);
            Err(e)
        }
    }
}

impl Program<'_> {
    /// A program with the standard layout, a 64 KiB stack, no heap, and nothing placed.
    pub fn new<'a>(name: &str, factory: u64, kmem: u64, priority: u8) -> Program<'a> {
        Program {
            name: String::from(name),
            args: Vec::new(),
            factory,
            kmem,
            give_factory: false,
            priority,
            cap_slots: 1024,
            layout: Layout::standard(),
            sizes: Sizes {
                heap_bytes: 0,
                stack_bytes: sawmill_rt::layout::STACK_SIZE,
                huge_pages: 0,
            },
            caps: Vec::new(),
            records: Vec::new(),
            maps: Vec::new(),
            pager: u64::MAX,
            exception_handler: u64::MAX,
            shared: None,
        }
    }
}

/// A prepared (then started) program. The caller keeps it while the program runs and calls
/// [`Child::destroy`] when it is done with it.
#[derive(Debug)]
pub struct Child {
    /// The caller's slots of the program's factory, task and main thread.
    pub factory: u64,
    pub task: u64,
    pub thread: u64,
    pub entry: u64,
    /// Image pages mapped straight from the source, and copied.
    pub direct_pages: usize,
    pub copied_pages: usize,
    /// Optional environment records left out for want of room.
    pub env_dropped: usize,
    /// Optional capabilities left out because their slot was empty ([`Cap::optional`]).
    pub caps_gone: usize,
    sp: u64,
    env: u64,
    /// Caller slots made for the program (factory, task, thread), in creation order.
    slots: Vec<u64>,
    pages: Vec<u64>,
    /// Runs of pages from [`Resources::run`]: (address, pages, the program's address of a run
    /// only the program writes, 0 for one we wrote into).
    runs: Vec<(u64, u64, u64)>,
    huge: Vec<u64>,
    /// Every mapping of the build as runs (our address, the program's, pages), for keeping them
    /// through a `task_reset` ([`Child::recycle`]); None if the build made one that cannot be
    /// kept so (a page taken alone, a 2 MiB page, more runs than a reset keeps).
    keep: Option<Vec<(u64, u64, u64)>>,
    /// The environment page (ours) and the run the image's copied pages came from (0: none).
    env_page: u64,
    copied_at: u64,
    /// The caller's slot of the task whose windows the program borrows (`u64::MAX`: none).
    lender: u64,
    /// The factory's use once the task was built (its quota charges, [`Child::recycle`]).
    factory_used: u64,
}

/// How much more of its factory's quota an emptied task may hold than when it was first built
/// and still be built into again ([`Child::recycle`]): the page tables the program that ran
/// left (its other mappings' tables stay with the task). Past it, or with objects of the program
/// still charged to the factory (alive elsewhere), the next program would start short of quota.
pub const RECYCLE_SLACK: u64 = 16 * PAGE;

impl Child {
    /// Starts the main thread at the entry point with the environment's address as argument.
    pub fn start(&self) -> Result<(), SpawnError> {
        sys::thread_start(self.thread, self.entry, self.sp, self.env)
            .map_err(|e| SpawnError::Sys("starting the thread", e))
    }

    /// Ends the program if it still runs and releases everything made for it: its objects (the
    /// factory's quota returns to the caller's factory once no capability to it is left), the
    /// caller's slots and pages.
    pub fn destroy(self, res: &mut impl Resources) {
        self.destroy_masked(res, None)
    }

    /// [`Self::destroy`], with the dirty masks of `runs` known already (taken before a reset,
    /// which clears the bits).
    fn destroy_masked(self, res: &mut impl Resources, masks: Option<&[u64]>) {
        let live = !self.slots.is_empty() && self.task != u64::MAX;
        for (i, &(a, n, dst)) in self.runs.iter().enumerate() {
            // Before the task goes: which pages of a run only it wrote into it did write (the
            // rest go back still zero, and need no zeroing before the next program gets them).
            let dirty = match masks {
                Some(m) => m.get(i).copied().filter(|_| dst != 0),
                None => (live && dst != 0)
                    .then(|| run_dirty(self.task, a, dst, n))
                    .flatten(),
            };
            match dirty {
                Some(d) => res.free_run_dirty(a, n, d),
                None => res.free_run(a, n),
            }
        }
        if live {
            // Its own capability table holds capabilities to the task, thread and factory:
            // killing the task empties it, so ours are the last references.
            let _ = sys::task_kill(self.task);
        }
        for &s in self.slots.iter().rev() {
            let _ = sys::cap_delete(s);
            res.free_slot(s);
        }
        for &p in &self.pages {
            res.free_page(p);
        }
        for &h in &self.huge {
            res.free_huge_page(h);
        }
    }

    /// Ends the program and empties its task for another of the same plan
    /// ([`prepare_planned_into`]) instead of destroying it: `task_reset` ends its threads and
    /// deletes its capabilities and every mapping but our pages where we put them; the pages it
    /// wrote of its heap and stack are zeroed here; its thread goes, and every copy of its task
    /// and factory capabilities held elsewhere is revoked (a holder would reach the next
    /// program). None (the task destroyed as by [`Self::destroy`]) if the build cannot be kept
    /// so, the reset does not keep every page, or the factory holds more than the empty task
    /// did ([`RECYCLE_SLACK`]).
    pub fn recycle(mut self, res: &mut impl Resources) -> Option<Child> {
        let Some(keep) = self.keep.take() else {
            self.destroy(res);
            return None;
        };
        if self.slots.len() != 3 || self.task == u64::MAX {
            self.destroy(res);
            return None;
        }
        // Which pages of the heap and stack the program wrote: after the reset the bits are
        // clear.
        let masks: Vec<u64> = self
            .runs
            .iter()
            .map(|&(a, n, dst)| match dst {
                0 => 0,
                _ => run_dirty(self.task, a, dst, n).unwrap_or(u64::MAX),
            })
            .collect();
        let pages: u64 = keep.iter().map(|r| r.2).sum();
        match sys::task_reset(self.task, self.lender, &keep) {
            Ok(kept) if kept == pages => {}
            _ => {
                self.destroy_masked(res, Some(&masks));
                return None;
            }
        }
        for (&(a, n, dst), &mask) in self.runs.iter().zip(&masks) {
            if dst != 0 {
                zero_dirty(a, n, mask);
            }
        }
        let clean = alloc::vec![0; masks.len()];
        let thread = self.slots.pop().unwrap_or(u64::MAX);
        let _ = sys::cap_delete(thread);
        res.free_slot(thread);
        self.thread = u64::MAX;
        let revoked = sys::cap_revoke(self.task).is_ok() && sys::cap_revoke(self.factory).is_ok();
        let within = sys::factory_info(self.factory)
            .is_ok_and(|(used, _)| used <= self.factory_used.saturating_add(RECYCLE_SLACK));
        if !revoked || !within {
            self.destroy_masked(res, Some(&clean));
            return None;
        }
        self.keep = Some(keep);
        self.env_dropped = 0;
        self.caps_gone = 0;
        Some(self)
    }
}

/// Zeroes the pages of our run `[a, a + pages)` that `mask` marks ([`dirty_page`]).
fn zero_dirty(a: u64, pages: u64, mask: u64) {
    for i in 0..pages {
        if plan::dirty_page(mask, i) {
            // SAFETY: a page of a run of ours, mapped read-write here; the task it is lent to
            // runs no thread (just reset).
            unsafe { core::ptr::write_bytes((a + i * PAGE) as *mut u8, 0, PAGE as usize) };
        }
    }
}

/// Builds the program described by `p` from `image`: every object, mapping and capability, the
/// environment and the thread's configuration; it is not started yet (the caller may add what
/// only it can, such as I/O ports, then calls [`Child::start`]). On an error everything made so
/// far is released.
pub fn prepare(
    p: &Program,
    image: &impl ImageSource,
    res: &mut impl Resources,
) -> Result<Child, SpawnError> {
    let pl = plan_program(p, image)?;
    prepare_planned(p, &pl, image, res)
}

/// The plan `prepare` makes of `p` from `image`: a caller starting the same image the same way
/// again and again (proc: the personality library) keeps it and calls [`prepare_planned`]
/// (planning the library's 78 pages was ~16,000 instructions of every fork).
pub fn plan_program(p: &Program, image: &impl ImageSource) -> Result<Plan, SpawnError> {
    let extra: Vec<Region> = p
        .maps
        .iter()
        .map(|m| {
            let unit = if m.flags & map::HUGE != 0 {
                HUGE_PAGE
            } else {
                PAGE
            };
            Region {
                what: m.what,
                start: m.dst,
                len: m.pages.saturating_mul(unit),
            }
        })
        .collect();
    let base = if image.maps_straight() {
        Some(image.base())
    } else {
        None
    };
    plan::plan(image.bytes(), base, &p.layout, &p.sizes, &extra)
}

/// [`prepare`] with a plan [`plan_program`] made of the same image, layout, sizes and maps as
/// `p` has (what differs between two calls, the capabilities, records and arguments, is not
/// in the plan).
pub fn prepare_planned(
    p: &Program,
    pl: &Plan,
    image: &impl ImageSource,
    res: &mut impl Resources,
) -> Result<Child, SpawnError> {
    let mut fixed = Vec::with_capacity(3 + p.caps.len());
    fixed.extend([Some(slots::TASK), Some(slots::THREAD)]);
    if p.give_factory {
        fixed.push(Some(slots::FACTORY));
    }
    fixed.extend(p.caps.iter().map(|c| c.slot));
    let placed = plan::assign_slots(&fixed, slots::FIRST_NAMED, p.cap_slots)?;
    let (direct_pages, copied_pages) = pl.counts();
    let mut child = Child {
        factory: u64::MAX,
        task: u64::MAX,
        thread: u64::MAX,
        entry: pl.entry,
        direct_pages,
        copied_pages,
        env_dropped: 0,
        caps_gone: 0,
        sp: pl.sp,
        env: pl.env.start,
        slots: Vec::new(),
        pages: Vec::new(),
        runs: Vec::new(),
        huge: Vec::new(),
        keep: Some(Vec::new()),
        env_page: 0,
        copied_at: 0,
        lender: p.shared.as_ref().map_or(u64::MAX, |sh| sh.task),
        factory_used: 0,
    };
    match build(p, pl, &placed, image, res, &mut child, false) {
        Ok(()) => {
            // What one reset keeps (sawmill_kcore::reset: 8 runs of at most 64 pages).
            if child.keep.as_ref().is_some_and(|k| {
                k.len() > sawmill_abi::RESET_RUNS
                    || k.iter().any(|r| r.2 > sawmill_abi::RESET_RUN_PAGES)
            }) {
                child.keep = None;
            }
            if child.keep.is_some() {
                match sys::factory_info(child.factory) {
                    Ok((used, _)) => child.factory_used = used,
                    Err(_) => child.keep = None,
                }
            }
            Ok(child)
        }
        Err(e) => {
            child.destroy(res);
            Err(e)
        }
    }
}

/// [`prepare_planned`] into the task of `child`, a program of the same plan and program shape
/// (`p`'s layout, sizes, maps and shared image as when it was built) emptied by
/// [`Child::recycle`]: the kept pages are not mapped again, the image's copied pages are
/// written again in place, the environment page rewritten; a new thread, every capability and
/// the maps are placed as in a new build. On an error the task is destroyed.
pub fn prepare_planned_into(
    p: &Program,
    pl: &Plan,
    image: &impl ImageSource,
    res: &mut impl Resources,
    mut child: Child,
) -> Result<Child, SpawnError> {
    let lender = p.shared.as_ref().map_or(u64::MAX, |sh| sh.task);
    let mut fixed = Vec::with_capacity(3 + p.caps.len());
    fixed.extend([Some(slots::TASK), Some(slots::THREAD)]);
    if p.give_factory {
        fixed.push(Some(slots::FACTORY));
    }
    fixed.extend(p.caps.iter().map(|c| c.slot));
    let placed = match plan::assign_slots(&fixed, slots::FIRST_NAMED, p.cap_slots) {
        Ok(placed) if child.keep.is_some() && child.lender == lender => placed,
        Ok(_) => {
            child.destroy(res);
            return Err(SpawnError::Image("a recycled task of another build"));
        }
        Err(e) => {
            child.destroy(res);
            return Err(e);
        }
    };
    match build(p, pl, &placed, image, res, &mut child, true) {
        Ok(()) => Ok(child),
        Err(e) => {
            child.destroy(res);
            Err(e)
        }
    }
}

fn sys_err(what: &'static str) -> impl Fn(sawmill_abi::Error) -> SpawnError {
    move |e| SpawnError::Sys(what, e)
}

/// Creates an object from `fac` into a fresh caller slot recorded in `child` (recorded first, so
/// that a failed creation still gives the slot back).
fn create(
    fac: u64,
    kind: ObjKind,
    arg: u64,
    res: &mut impl Resources,
    child: &mut Child,
    what: &'static str,
) -> Result<u64, SpawnError> {
    let s = res.slot()?;
    child.slots.push(s);
    sys::factory_create(fac, kind, s, arg).map_err(sys_err(what))?;
    Ok(s)
}

/// A fresh page of the caller (recorded in `child`) mapped at `va` of the task.
fn fresh(
    task: u64,
    va: u64,
    flags: u64,
    res: &mut impl Resources,
    child: &mut Child,
    what: &'static str,
) -> Result<u64, SpawnError> {
    let a = res.page()?;
    child.pages.push(a);
    sys::task_map(task, a, va, 1, flags).map_err(sys_err(what))?;
    Ok(a)
}

/// The dirty mask of the first 64 pages of run `[a, a + pages)` of ours lent to `task` at `dst`
/// (`sys::task_dirty`); None if the kernel cannot tell.
fn run_dirty(task: u64, a: u64, dst: u64, pages: u64) -> Option<u64> {
    sys::task_dirty(task, a, dst, pages.min(64)).ok()
}

/// Fresh pages of the caller (recorded in `child`) mapped over region `r` of the task: one run
/// in one `task_map` if the caller has one, else page by page.
fn fresh_region(
    task: u64,
    r: &Region,
    flags: u64,
    res: &mut impl Resources,
    child: &mut Child,
    what: &'static str,
) -> Result<(), SpawnError> {
    let n = r.pages();
    if n == 0 {
        return Ok(());
    }
    if let Some(a) = res.run(n) {
        child.runs.push((a, n, r.start));
        if let Some(k) = child.keep.as_mut() {
            k.push((a, r.start, n));
        }
        return sys::task_map(task, a, r.start, n, flags).map_err(sys_err(what));
    }
    child.keep = None;
    for i in 0..n {
        fresh(task, r.start + i * PAGE, flags, res, child, what)?;
    }
    Ok(())
}

/// `reuse`: into the emptied task of `child` ([`prepare_planned_into`]).
fn build(
    p: &Program,
    pl: &Plan,
    placed: &[u64],
    image: &impl ImageSource,
    res: &mut impl Resources,
    child: &mut Child,
    reuse: bool,
) -> Result<(), SpawnError> {
    if !reuse {
        let fac = create(
            p.factory,
            ObjKind::Factory,
            p.kmem,
            res,
            child,
            "creating the factory",
        )?;
        child.factory = fac;
        child.task = create(
            fac,
            ObjKind::Task,
            p.cap_slots | (p.priority as u64) << 32,
            res,
            child,
            "creating the task",
        )?;
    }
    let (fac, task) = (child.factory, child.task);
    child.thread = create(fac, ObjKind::Thread, 0, res, child, "creating the thread")?;

    let pages = p.shared.as_ref().map_or(&pl.image[..], |sh| &sh.rest[..]);
    if reuse {
        rewrite_image(pages, image, child)?;
    } else {
        load_image(task, pages, image, res, child)?;
        if let Some(sh) = &p.shared {
            for &w in &sh.windows {
                sys::task_link(task, sh.task, w).map_err(sys_err("borrowing the image's pages"))?;
            }
        }
        let rw = map::READ | map::WRITE;
        fresh_region(task, &pl.heap, rw, res, child, "mapping the heap")?;
        fresh_region(task, &pl.stack, rw, res, child, "mapping the stack")?;
    }
    let rw = map::READ | map::WRITE;
    if pl.huge.len >= HUGE_PAGE {
        child.keep = None;
    }
    for i in 0..pl.huge.len / HUGE_PAGE {
        let a = res.huge_page()?;
        child.huge.push(a);
        sys::task_map(task, a, pl.huge.start + i * HUGE_PAGE, 1, rw | map::HUGE)
            .map_err(sys_err("mapping a 2 MiB page"))?;
    }
    for m in &p.maps {
        sys::task_map(task, m.src, m.dst, m.pages, m.flags).map_err(sys_err(m.what))?;
    }

    // Capabilities: ours first (task, thread, factory), then the caller's, in `placed` order,
    // all in one call (a call each was ~18 system calls a Linux process).
    let own = if p.give_factory { 3 } else { 2 };
    let mut pairs = Vec::with_capacity(own + p.caps.len());
    pairs.extend([(task, placed[0]), (child.thread, placed[1])]);
    if p.give_factory {
        pairs.push((fac, placed[2]));
    }
    pairs.extend(
        p.caps
            .iter()
            .zip(&placed[own..])
            .map(|(c, &slot)| (c.src, slot)),
    );
    // Which of the caller's were placed: an optional one found empty is left out (and not
    // named below), and the put goes on after it.
    let mut present = alloc::vec![true; p.caps.len()];
    let mut from = 0;
    while from < pairs.len() {
        let Err((i, e)) = sys::task_cap_put_many(task, &pairs[from..]) else {
            break;
        };
        let at = from + i;
        match at.checked_sub(own).and_then(|k| p.caps.get(k)) {
            Some(c) if c.optional && e == sawmill_abi::Error::BadCap => {
                child.caps_gone += 1;
                present[at - own] = false;
                from = at + 1;
            }
            _ => return Err(SpawnError::Sys("placing a capability", e)),
        }
    }

    // The environment: name and arguments, every placed capability by name, then the caller's
    // records.
    let env_page = if reuse {
        // SAFETY: our environment page of the task (mapped read-only there), read-write here.
        unsafe { core::ptr::write_bytes(child.env_page as *mut u8, 0, PAGE as usize) };
        child.env_page
    } else {
        let a = res.page()?;
        child.pages.push(a);
        child.env_page = a;
        a
    };
    // SAFETY: a zeroed page of the caller, mapped read-write there and used by nothing else.
    let buf = unsafe { core::slice::from_raw_parts_mut(env_page as *mut u8, PAGE as usize) };
    let mut w = env::Writer::new(buf, pl.heap.start, pl.heap.len);
    let mut ok = w.add(env::KIND_NAME, 0, p.name.as_bytes());
    for a in &p.args {
        ok &= w.add(env::KIND_ARG, 0, a.as_bytes());
    }
    let ours: &[&str] = if p.give_factory {
        &[CAP_TASK, CAP_THREAD, CAP_FACTORY]
    } else {
        &[CAP_TASK, CAP_THREAD]
    };
    let names = ours.iter().map(|n| (env::KIND_CAP, n.as_bytes())).chain(
        p.caps
            .iter()
            .zip(&present)
            .map(|(c, &there)| (c.kind, if there { c.name.as_bytes() } else { &[][..] })),
    );
    for ((kind, name), &slot) in names.zip(placed) {
        if !name.is_empty() {
            ok &= w.add(kind, slot, name);
        }
    }
    for r in &p.records {
        if !w.add(r.kind, r.value, &r.bytes) {
            if !r.optional {
                ok = false;
            }
            child.env_dropped += 1;
        }
    }
    if !ok {
        return Err(SpawnError::EnvFull);
    }
    if !reuse {
        sys::task_map(task, env_page, pl.env.start, 1, map::READ)
            .map_err(sys_err("mapping the environment"))?;
        if let Some(k) = child.keep.as_mut() {
            k.push((env_page, pl.env.start, 1));
        }
    }

    sys::thread_config(
        child.thread,
        task,
        pl.utcb.start,
        p.pager,
        p.exception_handler,
        p.priority as u64,
    )
    .map_err(sys_err("configuring the thread"))
}

/// Maps and copies `pages` (a plan's image pages) as planned.
fn load_image(
    task: u64,
    pages: &[PagePlan],
    image: &impl ImageSource,
    res: &mut impl Resources,
    child: &mut Child,
) -> Result<(), SpawnError> {
    struct Loader<'a, I, R> {
        task: u64,
        image: &'a I,
        res: &'a mut R,
        child: &'a mut Child,
        cur: u64,
        /// The full reason of a backend failure (the loader passes on only a text).
        err: Option<SpawnError>,
        /// Image pages not yet mapped: (caller address, task address, pages, rights).
        /// Consecutive pages go in one `task_map` (a library image is ~70 of them straight,
        /// and its copied pages come from one run of the caller's).
        run: Option<(u64, u64, u64, u64)>,
        /// The caller's run the copied pages come from: (next address, pages left).
        fresh_run: (u64, u64),
    }
    impl<I: ImageSource, R: Resources> Loader<'_, I, R> {
        /// Caller page `a` goes to task address `va`: with the pending run if it follows it.
        fn map(&mut self, a: u64, va: u64, r: u64) -> Result<(), &'static str> {
            if let Some((ra, rva, n, rr)) = self.run.as_mut() {
                if *ra + *n * PAGE == a && *rva + *n * PAGE == va && *rr == r {
                    *n += 1;
                    return Ok(());
                }
            }
            self.flush()?;
            self.run = Some((a, va, 1, r));
            Ok(())
        }
        fn fail(&mut self, e: SpawnError) -> &'static str {
            self.err = Some(e);
            "backend"
        }
        fn flush(&mut self) -> Result<(), &'static str> {
            if let Some((a, va, n, r)) = self.run.take() {
                sys::task_map(self.task, a, va, n, r)
                    .map_err(|e| self.fail(SpawnError::Sys("mapping image pages", e)))?;
                if let Some(k) = self.child.keep.as_mut() {
                    k.push((a, va, n));
                }
            }
            Ok(())
        }
    }
    impl<I: ImageSource, R: Resources> sawmill_loader::Backend for Loader<'_, I, R> {
        fn map_image(&mut self, off: u64, va: u64, r: u64) -> Result<(), &'static str> {
            let a = self.image.page(off).map_err(|e| self.fail(e))?;
            self.map(a, va, r)
        }
        fn fresh(&mut self) -> Result<&mut [u8], &'static str> {
            let a = match self.fresh_run {
                (a, left) if left > 0 => {
                    self.fresh_run = (a + PAGE, left - 1);
                    a
                }
                _ => {
                    let a = self.res.page().map_err(|e| self.fail(e))?;
                    self.child.pages.push(a);
                    // Not from one run: a rebuild would not find it again.
                    self.child.keep = None;
                    a
                }
            };
            self.cur = a;
            // SAFETY: a fresh zeroed page of the caller, mapped read-write there, ours alone.
            Ok(unsafe { core::slice::from_raw_parts_mut(a as *mut u8, PAGE as usize) })
        }
        fn map_fresh(&mut self, va: u64, r: u64) -> Result<(), &'static str> {
            self.map(self.cur, va, r)
        }
    }
    // The copied pages in one run of the caller's, so that neighbours map together.
    let copied = pages
        .iter()
        .filter(|p| matches!(p, PagePlan::Fresh { .. }))
        .count() as u64;
    let fresh_run = match (copied > 1).then(|| res.run(copied)).flatten() {
        Some(a) => {
            child.runs.push((a, copied, 0));
            child.copied_at = a;
            (a, copied)
        }
        None => (0, 0),
    };
    let mut l = Loader {
        task,
        image,
        res,
        child,
        cur: 0,
        err: None,
        run: None,
        fresh_run,
    };
    match sawmill_loader::apply(image.bytes(), pages, &mut l)
        .and_then(|()| l.flush().map_err(sawmill_loader::LoadError::Backend))
    {
        Ok(()) => Ok(()),
        Err(e) => Err(l.err.take().unwrap_or(SpawnError::from(e))),
    }
}

/// Writes the image's copied pages of `pages` again into the run they came from when `child`
/// was built (their mappings were kept through the task's reset, their contents are the last
/// program's): the loader's plan runs again, every page it copies taken from that run in the
/// same order, zeroed first, and nothing mapped.
fn rewrite_image(
    pages: &[PagePlan],
    image: &impl ImageSource,
    child: &Child,
) -> Result<(), SpawnError> {
    struct Rewriter {
        next: u64,
        end: u64,
    }
    impl sawmill_loader::Backend for Rewriter {
        fn map_image(&mut self, _off: u64, _va: u64, _r: u64) -> Result<(), &'static str> {
            Ok(())
        }
        fn fresh(&mut self) -> Result<&mut [u8], &'static str> {
            if self.next >= self.end {
                return Err("more copied pages than when the task was built");
            }
            let a = self.next;
            self.next += PAGE;
            // SAFETY: a page of the run of ours the task's copied pages came from, mapped
            // read-write here; the task runs no thread (just reset).
            let page = unsafe { core::slice::from_raw_parts_mut(a as *mut u8, PAGE as usize) };
            page.fill(0);
            Ok(page)
        }
        fn map_fresh(&mut self, _va: u64, _r: u64) -> Result<(), &'static str> {
            Ok(())
        }
    }
    let copied = pages
        .iter()
        .filter(|p| matches!(p, PagePlan::Fresh { .. }))
        .count() as u64;
    if copied == 0 {
        return Ok(());
    }
    if child.copied_at == 0 {
        return Err(SpawnError::Image(
            "a recycled task without its copied pages' run",
        ));
    }
    let mut w = Rewriter {
        next: child.copied_at,
        end: child.copied_at + copied * PAGE,
    };
    sawmill_loader::apply(image.bytes(), pages, &mut w).map_err(SpawnError::from)
}
