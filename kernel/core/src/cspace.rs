//! Capability tables and the capability derivation tree (CDT).
//!
//! Every task owns a table of slots. A capability copied or minted from another becomes its
//! child in the CDT, across tables, so that `revoke` can find and delete everything derived from
//! a capability, wherever it went. Deleting a capability re-parents its children to its parent,
//! so revoking an ancestor still reaches them.
//!
//! The payload type `C` is whatever the kernel stores in a slot; operations that remove payloads
//! hand them back so the caller can drop object references.
use alloc::vec::Vec;

/// Names one slot: which table, which index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotId {
    pub table: u32,
    pub index: u32,
}

/// One link of the derivation tree: a slot, or none, in one word. (As `Option<SlotId>`, 12
/// bytes and a tag, a slot's links were copied and tested field by field on every capability
/// transfer and deletion; no table numbered `u32::MAX` exists to be confused with none.)
#[derive(Clone, Copy, PartialEq, Eq)]
struct Link(u64);

impl Link {
    const NONE: Link = Link(u64::MAX);

    #[inline(always)]
    fn to(s: SlotId) -> Link {
        Link((s.table as u64) << 32 | s.index as u64)
    }

    #[inline(always)]
    fn get(self) -> Option<SlotId> {
        (self != Link::NONE).then_some(SlotId {
            table: (self.0 >> 32) as u32,
            index: self.0 as u32,
        })
    }
}

#[derive(Clone, Copy)]
struct Links {
    parent: Link,
    first_child: Link,
    next: Link,
    prev: Link,
}

const NO_LINKS: Links = Links {
    parent: Link::NONE,
    first_child: Link::NONE,
    next: Link::NONE,
    prev: Link::NONE,
};

struct Slot<C> {
    cap: Option<C>,
    links: Links,
}

/// Direct access to one table's slots, for the lookup on every system call: a task keeps the
/// view of its own table so that a lookup is one bounds check, not a walk through the table
/// directory. A table's memory never moves, so the view stays valid until `destroy_table`; it
/// covers the slots made so far (see [`CSpace::create_table`]), so whoever holds one takes it
/// again after a capability went into the table.
pub struct TableView<C> {
    slots: *const Slot<C>,
    len: usize,
}

impl<C> Clone for TableView<C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C> Copy for TableView<C> {}

impl<C> TableView<C> {
    /// A view of no slots (every lookup fails).
    pub const EMPTY: Self = TableView {
        slots: core::ptr::null(),
        len: 0,
    };

    /// The capability at `index`, if any.
    ///
    /// # Safety
    /// The table the view was taken of must not have been destroyed, and no `&mut` to the
    /// `CSpace` may be live while the result is used.
    #[inline(always)]
    pub unsafe fn cap_at<'a>(self, index: u64) -> Option<&'a C> {
        if index >= self.len as u64 {
            return None;
        }
        // SAFETY: in bounds of a live table (the caller's promise).
        unsafe { (*self.slots.add(index as usize)).cap.as_ref() }
    }
}

/// Slots a table makes at a time (at its creation, and when a slot past those made is first
/// used).
pub const SLOTS_MADE_AT_ONCE: usize = 64;

/// Makes empty slots at the end of `t` up to `n` (within its reserved capacity: the memory does
/// not move).
fn make_slots<C>(t: &mut Vec<Slot<C>>, n: usize) {
    while t.len() < n {
        t.push(Slot {
            cap: None,
            links: NO_LINKS,
        });
    }
}

/// Errors of capability-space operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsError {
    /// No such table or index.
    BadSlot,
    /// The source slot is empty.
    Empty,
    /// The destination slot is occupied.
    Full,
}

/// All capability tables of the system.
pub struct CSpace<C> {
    /// Each table's slots, its whole size reserved up front but made (initialized) as they are
    /// first used, [`SLOTS_MADE_AT_ONCE`] at a time: a Linux process's 1,024-slot table
    /// (~88 bytes a slot) took ~14,000 instructions to fill at each process's start and it
    /// uses a few dozen slots.
    tables: Vec<Option<Vec<Slot<C>>>>,
    /// Each table's size in slots (what its capacity holds; slots beyond the made ones are
    /// empty).
    sizes: Vec<u32>,
    /// Per table: one past the highest slot that ever held a capability, so that destroying a
    /// table visits only the slots a task used (a Linux process's 1,024-slot table holds a few
    /// dozen, all low: deleting every slot was ~50,000 instructions of each process's end).
    high: Vec<u32>,
    free_ids: Vec<u32>,
    limit: usize,
}

impl<C: Clone> Default for CSpace<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clone> CSpace<C> {
    pub const fn new() -> Self {
        CSpace {
            tables: Vec::new(),
            sizes: Vec::new(),
            high: Vec::new(),
            free_ids: Vec::new(),
            limit: usize::MAX,
        }
    }

    /// Room for `n` tables without growing (the kernel fixes its bookkeeping size at boot).
    pub fn with_capacity(n: usize) -> Self {
        CSpace {
            tables: Vec::with_capacity(n),
            sizes: Vec::with_capacity(n),
            high: Vec::with_capacity(n),
            free_ids: Vec::with_capacity(n),
            limit: n,
        }
    }

    /// Whether another table fits without growing.
    pub fn has_room(&self) -> bool {
        !self.free_ids.is_empty() || self.tables.len() < self.limit
    }

    /// Bytes a table of `slots` slots costs, for quota charging.
    pub fn table_bytes(slots: usize) -> usize {
        slots * core::mem::size_of::<Slot<C>>()
    }

    /// Creates an empty table of `slots` slots (the memory of all of them, the first
    /// [`SLOTS_MADE_AT_ONCE`] made).
    pub fn create_table(&mut self, slots: usize) -> u32 {
        let mut t = Vec::with_capacity(slots);
        make_slots(&mut t, slots.min(SLOTS_MADE_AT_ONCE));
        if let Some(id) = self.free_ids.pop() {
            self.tables[id as usize] = Some(t);
            self.sizes[id as usize] = slots as u32;
            self.high[id as usize] = 0;
            id
        } else {
            self.tables.push(Some(t));
            self.sizes.push(slots as u32);
            self.high.push(0);
            (self.tables.len() - 1) as u32
        }
    }

    /// Deletes every capability in the table, then the table. Returns the payloads removed.
    pub fn destroy_table(&mut self, table: u32) -> Vec<C> {
        let out = self.clear_table(table);
        if let Some(Some(_)) = self.tables.get(table as usize) {
            self.tables[table as usize] = None;
            self.free_ids.push(table);
        }
        out
    }

    /// Deletes every capability in the table, which stays, empty, with its slots (a task
    /// emptied for another program: `task_reset`). Returns the payloads removed.
    pub fn clear_table(&mut self, table: u32) -> Vec<C> {
        let mut out = Vec::new();
        let n = match self.tables.get(table as usize) {
            Some(Some(t)) => t.len().min(self.high[table as usize] as usize),
            _ => return out,
        };
        for i in 0..n {
            if self.tables[table as usize].as_ref().unwrap()[i]
                .cap
                .is_none()
            {
                continue;
            }
            if let Ok(c) = self.delete(SlotId {
                table,
                index: i as u32,
            }) {
                out.push(c);
            }
        }
        self.high[table as usize] = 0;
        out
    }

    pub fn table_len(&self, table: u32) -> usize {
        match self.tables.get(table as usize) {
            Some(Some(_)) => self.sizes[table as usize] as usize,
            _ => 0,
        }
    }

    /// Whether `s` is a slot of a table, made yet or not.
    fn exists(&self, s: SlotId) -> bool {
        (s.index as usize) < self.table_len(s.table)
    }

    fn slot(&self, s: SlotId) -> Option<&Slot<C>> {
        self.tables
            .get(s.table as usize)?
            .as_ref()?
            .get(s.index as usize)
    }

    /// The slot, made first (with those before it) if it was not yet.
    fn slot_mut(&mut self, s: SlotId) -> Option<&mut Slot<C>> {
        let size = *self.sizes.get(s.table as usize)? as usize;
        let t = self.tables.get_mut(s.table as usize)?.as_mut()?;
        let i = s.index as usize;
        if i >= t.len() && i < size {
            let want = (i / SLOTS_MADE_AT_ONCE + 1) * SLOTS_MADE_AT_ONCE;
            make_slots(t, want.min(size));
        }
        t.get_mut(i)
    }

    fn links(&self, s: SlotId) -> Links {
        self.slot(s).map(|x| x.links).unwrap_or(NO_LINKS)
    }

    fn set_links(&mut self, s: SlotId, l: Links) {
        if let Some(x) = self.slot_mut(s) {
            x.links = l;
        }
    }

    /// A direct view of `table`'s slots (see [`TableView`]); empty if there is no such table.
    pub fn view(&self, table: u32) -> TableView<C> {
        match self.tables.get(table as usize) {
            Some(Some(t)) => TableView {
                slots: t.as_ptr(),
                len: t.len(),
            },
            _ => TableView::EMPTY,
        }
    }

    /// The capability in a slot.
    pub fn get(&self, s: SlotId) -> Result<&C, CsError> {
        match self.slot(s) {
            Some(x) => x.cap.as_ref().ok_or(CsError::Empty),
            None if self.exists(s) => Err(CsError::Empty),
            None => Err(CsError::BadSlot),
        }
    }

    pub fn get_mut(&mut self, s: SlotId) -> Result<&mut C, CsError> {
        if self.slot(s).is_none() {
            return Err(if self.exists(s) {
                CsError::Empty
            } else {
                CsError::BadSlot
            });
        }
        self.slot_mut(s)
            .ok_or(CsError::BadSlot)?
            .cap
            .as_mut()
            .ok_or(CsError::Empty)
    }

    /// Whether the slot exists and is empty.
    pub fn is_free(&self, s: SlotId) -> Result<bool, CsError> {
        match self.slot(s) {
            Some(x) => Ok(x.cap.is_none()),
            None if self.exists(s) => Ok(true),
            None => Err(CsError::BadSlot),
        }
    }

    /// Slot `s` (which exists) now holds a capability: it counts for `destroy_table`.
    fn used(&mut self, s: SlotId) {
        let h = &mut self.high[s.table as usize];
        *h = (*h).max(s.index + 1);
    }

    /// Puts an original capability (a CDT root) into an empty slot.
    pub fn insert_root(&mut self, s: SlotId, cap: C) -> Result<(), CsError> {
        let slot = self.slot_mut(s).ok_or(CsError::BadSlot)?;
        if slot.cap.is_some() {
            return Err(CsError::Full);
        }
        slot.cap = Some(cap);
        slot.links = NO_LINKS;
        self.used(s);
        Ok(())
    }

    /// The links of `s`, changed in place (nothing if there is no such slot).
    fn with_links(&mut self, s: SlotId, f: impl FnOnce(&mut Links)) {
        if let Some(x) = self.slot_mut(s) {
            f(&mut x.links);
        }
    }

    /// Puts `cap` into empty slot `dst` as a child of `parent` (which must hold a capability).
    /// (Each link is changed in place: this runs on every mint and capability transfer.)
    pub fn insert_child(&mut self, parent: SlotId, dst: SlotId, cap: C) -> Result<(), CsError> {
        let old_first = {
            let p = self.slot(parent).ok_or(CsError::BadSlot)?;
            if p.cap.is_none() {
                return Err(CsError::Empty);
            }
            p.links.first_child
        };
        let d = self.slot_mut(dst).ok_or(CsError::BadSlot)?;
        if d.cap.is_some() {
            return Err(CsError::Full);
        }
        d.cap = Some(cap);
        d.links = Links {
            parent: Link::to(parent),
            first_child: Link::NONE,
            next: old_first,
            prev: Link::NONE,
        };
        self.used(dst);
        // Both hold capabilities, so both are made: no slot to make on the way.
        if let Some(f) = old_first.get() {
            self.with_made_links(f, |l| l.prev = Link::to(dst));
        }
        self.with_made_links(parent, |l| l.first_child = Link::to(dst));
        Ok(())
    }

    /// Derives a copy of `src` into `dst`, transformed by `f` (badge, reduced rights).
    pub fn derive(
        &mut self,
        src: SlotId,
        dst: SlotId,
        f: impl FnOnce(&C) -> C,
    ) -> Result<(), CsError> {
        let c = f(self.get(src)?);
        self.insert_child(src, dst, c)
    }

    /// Deletes the capability in `s`. Its children move up to its parent (or become roots).
    /// (The slot is looked up once and its neighbours once each: this runs for every capability
    /// of every task that ends.)
    pub fn delete(&mut self, s: SlotId) -> Result<C, CsError> {
        let taken = self.made_mut(s).map(|x| {
            x.cap
                .take()
                .map(|c| (c, core::mem::replace(&mut x.links, NO_LINKS)))
        });
        let (cap, l) = match taken {
            Some(Some(taken)) => taken,
            Some(None) => return Err(CsError::Empty),
            None if self.exists(s) => return Err(CsError::Empty),
            None => return Err(CsError::BadSlot),
        };
        // Off the sibling list (or the parent's first child).
        match l.prev.get() {
            Some(p) => self.with_made_links(p, |pl| pl.next = l.next),
            None => {
                if let Some(par) = l.parent.get() {
                    self.with_made_links(par, |pl| pl.first_child = l.next);
                }
            }
        }
        if let Some(n) = l.next.get() {
            self.with_made_links(n, |nl| nl.prev = l.prev);
        }
        // Re-parent children: each child is inserted into the parent's child list.
        let mut child = l.first_child.get();
        while let Some(c) = child {
            let cl = self.links(c);
            child = cl.next.get();
            match l.parent.get() {
                Some(p) => {
                    let pfirst = self.links(p).first_child;
                    if let Some(f) = pfirst.get() {
                        self.with_links(f, |fl| fl.prev = Link::to(c));
                    }
                    self.with_links(c, |x| {
                        *x = Links {
                            parent: Link::to(p),
                            first_child: cl.first_child,
                            next: pfirst,
                            prev: Link::NONE,
                        }
                    });
                    self.with_links(p, |pl| pl.first_child = Link::to(c));
                }
                None => {
                    self.with_links(c, |x| {
                        *x = Links {
                            parent: Link::NONE,
                            first_child: cl.first_child,
                            next: Link::NONE,
                            prev: Link::NONE,
                        }
                    });
                }
            }
        }
        Ok(cap)
    }

    /// A slot already made (every slot that holds or held a capability, and its links' targets).
    #[inline]
    fn made_mut(&mut self, s: SlotId) -> Option<&mut Slot<C>> {
        self.tables
            .get_mut(s.table as usize)?
            .as_mut()?
            .get_mut(s.index as usize)
    }

    /// [`Self::with_links`] for a slot a link names (made, since it holds a capability).
    #[inline]
    fn with_made_links(&mut self, s: SlotId, f: impl FnOnce(&mut Links)) {
        if let Some(x) = self.made_mut(s) {
            f(&mut x.links);
        }
    }

    /// Deletes every capability derived (transitively) from `s`; `s` itself stays.
    /// Iterative, so a deep derivation chain cannot overflow the kernel stack.
    pub fn revoke(&mut self, s: SlotId) -> Result<Vec<C>, CsError> {
        self.get(s)?;
        let mut out = Vec::new();
        // Post-order walk: descend to a leaf, delete it, continue from its parent. Each node is
        // visited a bounded number of times, so the cost is linear in the subtree.
        let mut cur = match self.links(s).first_child.get() {
            Some(c) => c,
            None => return Ok(out),
        };
        loop {
            while let Some(c) = self.links(cur).first_child.get() {
                cur = c;
            }
            let parent = self.links(cur).parent.get();
            out.push(self.delete(cur)?);
            match parent {
                Some(p) if p == s => match self.links(s).first_child.get() {
                    Some(c) => cur = c,
                    None => return Ok(out),
                },
                Some(p) => cur = p,
                None => return Ok(out),
            }
        }
    }

    /// Moves a capability between slots keeping its place in the CDT (used for grant).
    pub fn move_cap(&mut self, src: SlotId, dst: SlotId) -> Result<(), CsError> {
        self.get(src)?;
        if !self.is_free(dst)? {
            return Err(CsError::Full);
        }
        let l = self.links(src);
        let cap = self.slot_mut(src).unwrap().cap.take();
        self.set_links(src, NO_LINKS);
        self.slot_mut(dst).unwrap().cap = cap;
        self.set_links(dst, l);
        self.used(dst);
        if let Some(p) = l.prev.get() {
            let mut pl = self.links(p);
            pl.next = Link::to(dst);
            self.set_links(p, pl);
        } else if let Some(par) = l.parent.get() {
            let mut pl = self.links(par);
            pl.first_child = Link::to(dst);
            self.set_links(par, pl);
        }
        if let Some(n) = l.next.get() {
            let mut nl = self.links(n);
            nl.prev = Link::to(dst);
            self.set_links(n, nl);
        }
        let mut child = l.first_child.get();
        while let Some(c) = child {
            let mut cl = self.links(c);
            cl.parent = Link::to(dst);
            child = cl.next.get();
            self.set_links(c, cl);
        }
        Ok(())
    }

    /// Number of capabilities derived (transitively) from `s` — for tests and diagnostics.
    pub fn descendants(&self, s: SlotId) -> usize {
        let mut n = 0;
        let mut stack: Vec<SlotId> = Vec::new();
        if let Some(c) = self.links(s).first_child.get() {
            stack.push(c);
        }
        while let Some(c) = stack.pop() {
            n += 1;
            let l = self.links(c);
            if let Some(x) = l.first_child.get() {
                stack.push(x);
            }
            if let Some(x) = l.next.get() {
                stack.push(x);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    fn s(t: u32, i: u32) -> SlotId {
        SlotId { table: t, index: i }
    }

    #[test]
    fn table_view_sees_the_table() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(4);
        cs.insert_root(s(a, 2), 7).unwrap();
        let v = cs.view(a);
        // SAFETY: the table is live and no mutable borrow is held while the view is used.
        unsafe {
            assert_eq!(v.cap_at(2), Some(&7));
            assert_eq!(v.cap_at(1), None);
            assert_eq!(v.cap_at(4), None);
            assert_eq!(v.cap_at(u64::MAX), None);
        }
        cs.delete(s(a, 2)).unwrap();
        // SAFETY: as above; the view reflects later changes of the same table.
        unsafe { assert_eq!(cs.view(a).cap_at(2), None) };
        // SAFETY: an empty view touches nothing.
        unsafe { assert_eq!(cs.view(99).cap_at(0), None) };
    }

    #[test]
    fn slots_are_made_as_first_used_and_the_memory_stays() {
        let mut cs: CSpace<u32> = CSpace::new();
        let n = 3 * SLOTS_MADE_AT_ONCE + 5;
        let a = cs.create_table(n);
        assert_eq!(cs.table_len(a), n);
        let before = cs.view(a);
        // A slot far past those made: empty, free, and usable.
        let far = s(a, (n - 1) as u32);
        assert_eq!(cs.get(far), Err(CsError::Empty));
        assert_eq!(cs.is_free(far), Ok(true));
        assert_eq!(cs.delete(far), Err(CsError::Empty));
        assert_eq!(cs.get(s(a, n as u32)), Err(CsError::BadSlot));
        assert_eq!(cs.is_free(s(a, n as u32)), Err(CsError::BadSlot));
        // SAFETY: live table, no mutable borrow while the view is used.
        unsafe { assert_eq!(before.cap_at(far.index as u64), None) };
        cs.insert_root(s(a, 0), 1).unwrap();
        cs.derive(s(a, 0), far, |c| c + 1).unwrap();
        assert_eq!(cs.get(far), Ok(&2));
        let after = cs.view(a);
        // SAFETY: as above. The view taken again sees it, at the same memory.
        unsafe {
            assert_eq!(after.cap_at(far.index as u64), Some(&2));
            assert_eq!(after.cap_at(0), Some(&1));
            assert_eq!(before.cap_at(0), Some(&1));
        }
        // Moved into another unmade slot of another table; revoked from the root.
        let b = cs.create_table(n);
        cs.move_cap(far, s(b, (n - 2) as u32)).unwrap();
        assert_eq!(cs.revoke(s(a, 0)).unwrap(), std::vec![2]);
        assert_eq!(cs.destroy_table(a), std::vec![1]);
        assert!(cs.destroy_table(b).is_empty());
    }

    #[test]
    fn copy_and_revoke_across_tables() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(8);
        let b = cs.create_table(8);
        cs.insert_root(s(a, 0), 7).unwrap();
        cs.derive(s(a, 0), s(a, 1), |c| c + 1).unwrap();
        cs.derive(s(a, 1), s(b, 0), |c| c + 1).unwrap();
        cs.derive(s(a, 0), s(b, 1), |c| *c).unwrap();
        assert_eq!(cs.descendants(s(a, 0)), 3);
        assert_eq!(*cs.get(s(b, 0)).unwrap(), 9);
        let mut gone = cs.revoke(s(a, 0)).unwrap();
        gone.sort();
        assert_eq!(gone, std::vec![7, 8, 9]);
        assert_eq!(cs.get(s(a, 0)), Ok(&7));
        assert_eq!(cs.get(s(b, 0)), Err(CsError::Empty));
        assert_eq!(cs.descendants(s(a, 0)), 0);
    }

    #[test]
    fn delete_reparents_children() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(8);
        cs.insert_root(s(a, 0), 1).unwrap();
        cs.derive(s(a, 0), s(a, 1), |_| 2).unwrap();
        cs.derive(s(a, 1), s(a, 2), |_| 3).unwrap();
        cs.derive(s(a, 1), s(a, 3), |_| 4).unwrap();
        assert_eq!(cs.delete(s(a, 1)), Ok(2));
        assert_eq!(cs.descendants(s(a, 0)), 2);
        assert_eq!(cs.revoke(s(a, 0)).unwrap().len(), 2);
        assert!(cs.is_free(s(a, 2)).unwrap() && cs.is_free(s(a, 3)).unwrap());
    }

    #[test]
    fn errors() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(2);
        assert_eq!(cs.insert_root(s(a, 2), 1), Err(CsError::BadSlot));
        assert_eq!(cs.insert_root(s(9, 0), 1), Err(CsError::BadSlot));
        cs.insert_root(s(a, 0), 1).unwrap();
        assert_eq!(cs.insert_root(s(a, 0), 1), Err(CsError::Full));
        assert_eq!(cs.derive(s(a, 1), s(a, 0), |c| *c), Err(CsError::Empty));
        assert_eq!(cs.derive(s(a, 0), s(a, 0), |c| *c), Err(CsError::Full));
        assert_eq!(cs.delete(s(a, 1)), Err(CsError::Empty));
    }

    #[test]
    fn move_keeps_tree_and_destroy_table_releases() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(4);
        let b = cs.create_table(4);
        cs.insert_root(s(a, 0), 1).unwrap();
        cs.derive(s(a, 0), s(a, 1), |_| 2).unwrap();
        cs.derive(s(a, 1), s(a, 2), |_| 3).unwrap();
        cs.move_cap(s(a, 1), s(b, 3)).unwrap();
        assert_eq!(cs.descendants(s(a, 0)), 2);
        assert_eq!(cs.descendants(s(b, 3)), 1);
        let mut r = cs.destroy_table(b);
        r.sort();
        assert_eq!(r, std::vec![2]);
        // The grandchild moved up to the root.
        assert_eq!(cs.descendants(s(a, 0)), 1);
        assert_eq!(cs.revoke(s(a, 0)).unwrap(), std::vec![3]);
        // Table ids are reused.
        assert_eq!(cs.create_table(1), b);
    }

    #[test]
    fn destroy_table_releases_up_to_the_highest_slot_ever_used() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(64);
        let b = cs.create_table(64);
        cs.insert_root(s(a, 0), 1).unwrap();
        // A root, a copy moved to a high slot, a child placed by derive: all released.
        cs.insert_root(s(a, 40), 2).unwrap();
        cs.derive(s(a, 0), s(a, 5), |_| 3).unwrap();
        cs.derive(s(a, 0), s(b, 0), |_| 4).unwrap();
        cs.move_cap(s(a, 5), s(a, 50)).unwrap();
        cs.delete(s(a, 40)).unwrap();
        let mut r = cs.destroy_table(a);
        r.sort();
        assert_eq!(r, std::vec![1, 3]);
        // Its copy in the other table went with its parent's deletion up to a root.
        assert_eq!(cs.descendants(s(b, 0)), 0);
        assert_eq!(cs.get(s(b, 0)), Ok(&4));
        // A table made again in the same place starts with no used slot, and a later slot is
        // still found.
        let c = cs.create_table(64);
        assert_eq!(c, a);
        cs.insert_root(s(c, 63), 9).unwrap();
        assert_eq!(cs.destroy_table(c), std::vec![9]);
    }

    #[test]
    fn clear_table_empties_every_slot_and_keeps_the_table() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(128);
        let b = cs.create_table(64);
        cs.insert_root(s(a, 0), 1).unwrap();
        cs.insert_root(s(a, 100), 2).unwrap();
        cs.derive(s(a, 0), s(b, 3), |_| 3).unwrap();
        cs.derive(s(b, 3), s(a, 7), |_| 4).unwrap();
        let mut r = cs.clear_table(a);
        r.sort();
        assert_eq!(r, std::vec![1, 2, 4]);
        for i in [0, 7, 100] {
            assert_eq!(cs.is_free(s(a, i)), Ok(true));
        }
        // The other table's copy is its own root now; the cleared table takes capabilities again
        // (at any slot) and clears again to exactly those.
        assert_eq!(cs.get(s(b, 3)), Ok(&3));
        assert_eq!(cs.table_len(a), 128);
        cs.insert_root(s(a, 127), 9).unwrap();
        assert_eq!(cs.clear_table(a), std::vec![9]);
        assert!(cs.clear_table(a).is_empty());
        assert_eq!(cs.destroy_table(b), std::vec![3]);
    }

    #[test]
    fn long_chain_revoke_is_iterative() {
        let mut cs: CSpace<u32> = CSpace::new();
        let a = cs.create_table(20001);
        cs.insert_root(s(a, 0), 0).unwrap();
        for i in 1..20001 {
            cs.derive(s(a, i - 1), s(a, i), |_| i).unwrap();
        }
        assert_eq!(cs.revoke(s(a, 0)).unwrap().len(), 20000);
    }

    #[test]
    fn random_ops_keep_tree_consistent() {
        // Seeded random operations; after each, every capability must be reachable from a root
        // exactly once (no cycles, no lost nodes).
        let mut cs: CSpace<u32> = CSpace::new();
        let t = [cs.create_table(16), cs.create_table(16)];
        let mut seed = 12345u64;
        let mut rnd = |n: u32| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % n as u64) as u32
        };
        for step in 0..5000 {
            let a = s(t[rnd(2) as usize], rnd(16));
            let b = s(t[rnd(2) as usize], rnd(16));
            match rnd(5) {
                0 => {
                    let _ = cs.insert_root(a, step);
                }
                1 => {
                    let _ = cs.derive(a, b, |c| *c);
                }
                2 => {
                    let _ = cs.delete(a);
                }
                3 => {
                    let _ = cs.revoke(a);
                }
                _ => {
                    let _ = cs.move_cap(a, b);
                }
            }
            let mut total = 0;
            let mut reach = 0;
            for &tb in &t {
                for i in 0..16 {
                    let id = s(tb, i);
                    if cs.get(id).is_ok() {
                        total += 1;
                        if cs.links(id).parent.get().is_none() {
                            reach += 1 + cs.descendants(id);
                        }
                    }
                }
            }
            assert_eq!(total, reach, "step {step}");
        }
    }
}
