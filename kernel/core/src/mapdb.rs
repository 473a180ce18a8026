//! The mapping database: which page mappings were derived from which.
//!
//! Every user mapping is a node `(space, vaddr)`. A mapping made by `map` (or a map item) from an
//! existing one is its child; `unmap` removes the subtree below a mapping, so revocation reaches
//! every address space the page travelled to. Root nodes are the mappings the kernel itself made
//! (root's physical-memory window, the initial image). 2 MiB mappings are nodes too; a 4 KiB
//! mapping can be derived from part of a 2 MiB one.
use alloc::vec;
use alloc::vec::Vec;

/// The index from `(space, page)` to node: open addressing with linear probing and
/// backward-shift deletion, so a lookup is a hash and a few probes — no allocation, no tree walk
/// (the tree it replaced cost hundreds of instructions per page fault). Sized up front for the
/// kernel (load at most 1/2); grows only for unbounded databases (host tests).
struct Index {
    keys: Vec<u64>,
    vals: Vec<u32>,
    len: usize,
    fixed: bool,
    /// Counts changes (insertions and removals), so a [`Vacant`] can tell it is still true.
    gen: u64,
}

/// What [`MapDb::vacant`] found: `[vaddr, vaddr+len)` of `space` overlapped no mapping when the
/// database was at generation `gen`. [`MapDb::insert_child_into`] trusts it only while nothing
/// has changed since, which spares the IPC map path a second overlap probe.
#[derive(Clone, Copy, Debug)]
pub struct Vacant {
    space: u32,
    vaddr: u64,
    len: u64,
    gen: u64,
}

const EMPTY: u64 = u64::MAX;

fn key(space: u32, vaddr: u64) -> u64 {
    // User addresses are below 2^47, so the page number needs 35 bits.
    (space as u64) << 36 | (vaddr >> 12)
}

impl Index {
    fn new(slots: usize, fixed: bool) -> Index {
        let n = slots.next_power_of_two().max(16);
        Index {
            keys: vec![EMPTY; n],
            vals: vec![0; n],
            len: 0,
            fixed,
            gen: 0,
        }
    }

    fn slot(&self, k: u64) -> usize {
        (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & (self.keys.len() - 1)
    }

    fn get(&self, k: u64) -> Option<u32> {
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        loop {
            let x = self.keys[i];
            if x == k {
                return Some(self.vals[i]);
            }
            if x == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Makes room for one more key (an unbounded index doubles at half load).
    fn reserve_one(&mut self) {
        if !self.fixed && (self.len + 1) * 2 > self.keys.len() {
            let mut bigger = Index::new(self.keys.len() * 2, false);
            for (i, &x) in self.keys.iter().enumerate() {
                if x != EMPTY {
                    bigger.insert(x, self.vals[i]);
                }
            }
            bigger.gen = self.gen;
            *self = bigger;
        }
    }

    /// The slot key `k` would take (the first empty one of its probe run), or None if `k` is
    /// there already: one probe answers both "is the place free" and "where does it go".
    fn vacant_slot(&mut self, k: u64) -> Option<usize> {
        self.reserve_one();
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        loop {
            let x = self.keys[i];
            if x == k {
                return None;
            }
            if x == EMPTY {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Puts `k` into slot `i`, which [`Self::vacant_slot`] gave with nothing changed since.
    fn fill(&mut self, i: usize, k: u64, v: u32) {
        self.gen += 1;
        self.len += 1;
        self.keys[i] = k;
        self.vals[i] = v;
    }

    fn insert(&mut self, k: u64, v: u32) {
        self.gen += 1;
        self.reserve_one();
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        while self.keys[i] != EMPTY && self.keys[i] != k {
            i = (i + 1) & mask;
        }
        if self.keys[i] == EMPTY {
            self.len += 1;
        }
        self.keys[i] = k;
        self.vals[i] = v;
    }

    fn remove(&mut self, k: u64) {
        self.gen += 1;
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        loop {
            if self.keys[i] == EMPTY {
                return;
            }
            if self.keys[i] == k {
                break;
            }
            i = (i + 1) & mask;
        }
        self.len -= 1;
        // Backward shift: pull later entries of the run into the hole when their home slot
        // is not between the hole and them, so lookups never stop early.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let x = self.keys[j];
            if x == EMPTY {
                break;
            }
            let home = self.slot(x);
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.keys[hole] = x;
                self.vals[hole] = self.vals[j];
                hole = j;
            }
        }
        self.keys[hole] = EMPTY;
    }
}

/// Size of a node, for quota charging.
pub const NODE_BYTES: usize = core::mem::size_of::<Node>() + 48; // plus the index entry

/// One mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub space: u32,
    pub vaddr: u64,
    pub paddr: u64,
    pub huge: bool,
    /// Access rights (the kernel's READ/WRITE/EXEC bits).
    pub rights: u64,
}

#[derive(Clone, Copy)]
struct Node {
    m: Mapping,
    parent: u32,
    first_child: u32,
    next: u32,
    prev: u32,
    /// The list of every mapping of the same space (so that ending a task visits its own
    /// mappings, not the whole arena).
    space_next: u32,
    space_prev: u32,
    live: bool,
}

const NIL: u32 = u32::MAX;
/// Space lists [`MapDb::with_capacity`] makes room for up front (the kernel's tasks are fewer),
/// so that recording a mapping does not allocate.
const SPACES_RESERVED: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MdbError {
    /// No mapping at the source address.
    NotMapped,
    /// The destination already has a mapping.
    Exists,
    /// The database is at its fixed capacity.
    Full,
}

/// The database.
pub struct MapDb {
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// The first node of each space's list (indexed by space; NIL: none).
    space_head: Vec<u32>,
    /// How many 2 MiB mappings each space has (indexed by space): a 4 KiB probe of a space with
    /// none needs no look for one around it (one hash probe less on every fault and map).
    space_huge: Vec<u32>,
    index: Index,
    limit: usize,
}

impl Default for MapDb {
    fn default() -> Self {
        Self::new()
    }
}

impl MapDb {
    pub const fn new() -> Self {
        MapDb {
            nodes: Vec::new(),
            free: Vec::new(),
            space_head: Vec::new(),
            space_huge: Vec::new(),
            index: Index {
                keys: Vec::new(),
                vals: Vec::new(),
                len: 0,
                fixed: false,
                gen: 0,
            },
            limit: usize::MAX,
        }
    }

    /// A database that never grows its arrays beyond `n` nodes, so its memory use is fixed up
    /// front (the kernel's free-memory figure then only moves with real allocations).
    pub fn with_capacity(n: usize) -> Self {
        MapDb {
            nodes: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            space_head: Vec::with_capacity(SPACES_RESERVED),
            space_huge: Vec::with_capacity(SPACES_RESERVED),
            index: Index::new(2 * n, true),
            limit: n,
        }
    }

    /// Whether another node can be added without growing the arrays.
    pub fn has_room(&self) -> bool {
        !self.free.is_empty() || self.nodes.len() < self.limit
    }

    fn alloc(&mut self, m: Mapping, parent: u32) -> u32 {
        let id = self.alloc_node(m, parent);
        if self.index.keys.is_empty() {
            self.index = Index::new(16, false);
        }
        self.index.insert(key(m.space, m.vaddr), id);
        id
    }

    /// A node for `m` under `parent`, on its space's list; not yet in the index.
    #[inline(always)]
    fn alloc_node(&mut self, m: Mapping, parent: u32) -> u32 {
        let n = Node {
            m,
            parent,
            first_child: NIL,
            next: NIL,
            prev: NIL,
            space_next: NIL,
            space_prev: NIL,
            live: true,
        };
        let id = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = n;
                i
            }
            None => {
                self.nodes.push(n);
                (self.nodes.len() - 1) as u32
            }
        };
        if parent != NIL {
            let f = self.nodes[parent as usize].first_child;
            self.nodes[id as usize].next = f;
            if f != NIL {
                self.nodes[f as usize].prev = id;
            }
            self.nodes[parent as usize].first_child = id;
        }
        self.link_space(id);
        id
    }

    /// The mapping covering `vaddr` in `space` (a 4 KiB one, or the 2 MiB one around it).
    pub fn lookup(&self, space: u32, vaddr: u64) -> Option<Mapping> {
        self.find(space, vaddr).map(|i| self.nodes[i as usize].m)
    }

    fn find(&self, space: u32, vaddr: u64) -> Option<u32> {
        let v4 = vaddr & !0xfff;
        if let Some(i) = self.idx(space, v4) {
            return Some(i);
        }
        let v2 = vaddr & !0x1f_ffff;
        if v2 == v4 || self.space_huge.get(space as usize).is_none_or(|&n| n == 0) {
            return None;
        }
        match self.idx(space, v2) {
            Some(i) if self.nodes[i as usize].m.huge => Some(i),
            _ => None,
        }
    }

    fn idx(&self, space: u32, vaddr: u64) -> Option<u32> {
        if self.index.keys.is_empty() {
            return None;
        }
        self.index.get(key(space, vaddr))
    }

    /// Whether anything in `space` overlaps `[vaddr, vaddr+len)` (page-aligned): a mapping
    /// starting on one of its pages, or a 2 MiB mapping starting before it that reaches into it.
    /// One probe per page of the range (at most 512, for a 2 MiB range), no scan of neighbours.
    pub fn overlaps(&self, space: u32, vaddr: u64, len: u64) -> bool {
        let end = vaddr.saturating_add(len);
        let mut a = vaddr & !0xfff;
        while a < end {
            if self.idx(space, a).is_some() {
                return true;
            }
            a += 0x1000;
        }
        let h = vaddr & !0x1f_ffff;
        if h < vaddr && self.space_huge.get(space as usize).is_some_and(|&n| n > 0) {
            if let Some(i) = self.idx(space, h) {
                return self.nodes[i as usize].m.huge;
            }
        }
        false
    }

    /// The node of the mapping covering `(space, vaddr)`, for `get` and `insert_child_of`.
    pub fn find_id(&self, space: u32, vaddr: u64) -> Option<u32> {
        self.find(space, vaddr)
    }

    /// The mapping of a node from `find_id`.
    pub fn get(&self, id: u32) -> Mapping {
        self.nodes[id as usize].m
    }

    /// Records `child` as derived from node `parent` (from `find_id`, still live).
    pub fn insert_child_of(&mut self, parent: u32, child: Mapping) -> Result<(), MdbError> {
        if !self.nodes.get(parent as usize).is_some_and(|n| n.live) {
            return Err(MdbError::NotMapped);
        }
        self.insert_vacant(child, parent)
    }

    /// Records `m` under `parent` (NIL: a root) if nothing in its space overlaps it. A 4 KiB
    /// mapping in a space without 2 MiB ones (every page a map item brings) is looked up once:
    /// the probe that finds where its index entry goes tells whether the place is taken. (An
    /// overlap probe first and the insertion's own after it were ~90 instructions a page.)
    #[inline(always)]
    fn insert_vacant(&mut self, m: Mapping, parent: u32) -> Result<(), MdbError> {
        if !self.has_room() {
            return Err(MdbError::Full);
        }
        // A 2 MiB mapping around the place is found by no probe of the place's own key.
        let huge_around = m.huge
            || self
                .space_huge
                .get(m.space as usize)
                .is_some_and(|&n| n > 0);
        if huge_around || self.index.keys.is_empty() {
            let len = if m.huge { 0x20_0000 } else { 0x1000 };
            if self.overlaps(m.space, m.vaddr, len) {
                return Err(MdbError::Exists);
            }
            self.alloc(m, parent);
            return Ok(());
        }
        let k = key(m.space, m.vaddr);
        let slot = self.index.vacant_slot(k).ok_or(MdbError::Exists)?;
        let id = self.alloc_node(m, parent);
        self.index.fill(slot, k, id);
        Ok(())
    }

    /// A [`Vacant`] if nothing in `space` overlaps `[vaddr, vaddr+len)` (see [`Self::overlaps`]).
    pub fn vacant(&self, space: u32, vaddr: u64, len: u64) -> Option<Vacant> {
        if self.overlaps(space, vaddr, len) {
            return None;
        }
        Some(Vacant {
            space,
            vaddr,
            len,
            gen: self.index.gen,
        })
    }

    /// [`Self::insert_child_of`] for a place `v` said was vacant: the overlap probe is skipped
    /// if `v` is about exactly this place and nothing changed since (and made again otherwise).
    pub fn insert_child_into(
        &mut self,
        parent: u32,
        child: Mapping,
        v: Vacant,
    ) -> Result<(), MdbError> {
        let len = if child.huge { 0x20_0000 } else { 0x1000 };
        let fresh = v.gen == self.index.gen
            && v.space == child.space
            && v.vaddr == child.vaddr
            && v.len == len;
        if !fresh {
            return self.insert_child_of(parent, child);
        }
        if !self.nodes.get(parent as usize).is_some_and(|n| n.live) {
            return Err(MdbError::NotMapped);
        }
        if !self.has_room() {
            return Err(MdbError::Full);
        }
        self.alloc(child, parent);
        Ok(())
    }

    /// Records a kernel-made (root) mapping.
    pub fn insert_root(&mut self, m: Mapping) -> Result<(), MdbError> {
        self.insert_vacant(m, NIL)
    }

    /// Records `child` as derived from the mapping covering `(src_space, src_vaddr)`.
    pub fn insert_child(
        &mut self,
        src_space: u32,
        src_vaddr: u64,
        child: Mapping,
    ) -> Result<(), MdbError> {
        let p = self.find(src_space, src_vaddr).ok_or(MdbError::NotMapped)?;
        self.insert_child_of(p, child)
    }

    /// Puts node `i` first on its space's list.
    #[inline(always)]
    fn link_space(&mut self, i: u32) {
        let space = self.nodes[i as usize].m.space as usize;
        if self.space_head.len() <= space {
            self.space_head.resize(space + 1, NIL);
            self.space_huge.resize(space + 1, 0);
        }
        if self.nodes[i as usize].m.huge {
            self.space_huge[space] += 1;
        }
        let h = self.space_head[space];
        self.nodes[i as usize].space_prev = NIL;
        self.nodes[i as usize].space_next = h;
        if h != NIL {
            self.nodes[h as usize].space_prev = i;
        }
        self.space_head[space] = i;
    }

    /// Takes node `i` off its space's list.
    fn unlink_space(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        if n.m.huge {
            self.space_huge[n.m.space as usize] -= 1;
        }
        if n.space_prev != NIL {
            self.nodes[n.space_prev as usize].space_next = n.space_next;
        } else {
            self.space_head[n.m.space as usize] = n.space_next;
        }
        if n.space_next != NIL {
            self.nodes[n.space_next as usize].space_prev = n.space_prev;
        }
    }

    fn unlink_free(&mut self, i: u32) {
        self.unlink_space(i);
        let n = self.nodes[i as usize];
        if n.prev != NIL {
            self.nodes[n.prev as usize].next = n.next;
        } else if n.parent != NIL {
            self.nodes[n.parent as usize].first_child = n.next;
        }
        if n.next != NIL {
            self.nodes[n.next as usize].prev = n.prev;
        }
        self.index.remove(key(n.m.space, n.m.vaddr));
        self.nodes[i as usize].live = false;
        self.free.push(i);
    }

    /// Removes every mapping derived from the one covering `(space, vaddr)` and, if `with_self`,
    /// that mapping too. Returns the removed mappings so the caller clears page-table entries.
    pub fn revoke(&mut self, space: u32, vaddr: u64, with_self: bool, out: &mut Vec<Mapping>) {
        if let Some(top) = self.find(space, vaddr) {
            self.revoke_node(top, with_self, out);
        }
    }

    /// [`Self::revoke`] of node `top` (from `find_id`, still live).
    pub fn revoke_node(&mut self, top: u32, with_self: bool, out: &mut Vec<Mapping>) {
        // Post-order walk, resuming at the parent of each removed leaf: linear in the subtree.
        let mut cur = self.nodes[top as usize].first_child;
        while cur != NIL {
            while self.nodes[cur as usize].first_child != NIL {
                cur = self.nodes[cur as usize].first_child;
            }
            let parent = self.nodes[cur as usize].parent;
            out.push(self.nodes[cur as usize].m);
            self.unlink_free(cur);
            cur = if parent == top {
                self.nodes[top as usize].first_child
            } else {
                parent
            };
        }
        if with_self {
            out.push(self.nodes[top as usize].m);
            self.unlink_free(top);
        }
    }

    /// Takes the rights `clear` away from every mapping derived from the one covering
    /// `(space, vaddr)` and, if `with_self`, from that mapping too. The mappings stay, with their
    /// place in the tree (a later `revoke` still finds them), and a mapping derived from a
    /// lowered one later gets no more than its rights. Appends each mapping that lost a right
    /// (with its new rights) to `out`, so the caller updates its page-table entry.
    pub fn protect(
        &mut self,
        space: u32,
        vaddr: u64,
        with_self: bool,
        clear: u64,
        out: &mut Vec<Mapping>,
    ) {
        if let Some(top) = self.find(space, vaddr) {
            self.protect_node(top, with_self, clear, out);
        }
    }

    /// [`Self::protect`] of node `top` (from `find_id`, still live).
    pub fn protect_node(&mut self, top: u32, with_self: bool, clear: u64, out: &mut Vec<Mapping>) {
        if with_self {
            self.lower(top, clear, out);
        }
        // Pre-order walk of the subtree by its links: no stack, nothing removed.
        let mut cur = self.nodes[top as usize].first_child;
        while cur != NIL {
            self.lower(cur, clear, out);
            let n = &self.nodes[cur as usize];
            if n.first_child != NIL {
                cur = n.first_child;
                continue;
            }
            // Up until a node with a next sibling, never above `top`.
            let mut up = cur;
            cur = NIL;
            while up != top {
                let n = &self.nodes[up as usize];
                if n.next != NIL {
                    cur = n.next;
                    break;
                }
                up = n.parent;
            }
        }
    }

    /// Clears `clear` from node `i`'s rights; records it in `out` if it had any of them.
    fn lower(&mut self, i: u32, clear: u64, out: &mut Vec<Mapping>) {
        let m = &mut self.nodes[i as usize].m;
        if m.rights & clear != 0 {
            m.rights &= !clear;
            out.push(*m);
        }
    }

    /// Moves a mapping to another place keeping its position in the tree (grant).
    pub fn move_mapping(
        &mut self,
        space: u32,
        vaddr: u64,
        to_space: u32,
        to_vaddr: u64,
    ) -> Result<(), MdbError> {
        let i = self.find(space, vaddr).ok_or(MdbError::NotMapped)?;
        let m = self.nodes[i as usize].m;
        if self.overlaps(to_space, to_vaddr, if m.huge { 0x20_0000 } else { 0x1000 }) {
            return Err(MdbError::Exists);
        }
        self.index.remove(key(m.space, m.vaddr));
        self.unlink_space(i);
        self.nodes[i as usize].m.space = to_space;
        self.nodes[i as usize].m.vaddr = to_vaddr;
        self.link_space(i);
        self.index.insert(key(to_space, to_vaddr), i);
        Ok(())
    }

    /// Removes every mapping of `space` and everything derived from them.
    pub fn remove_space(&mut self, space: u32, out: &mut Vec<Mapping>) {
        self.remove_space_with(space, None, out);
    }

    /// [`Self::remove_space`] for a space that is gone with its page tables (a task's end):
    /// its own mappings nothing was derived from are not listed in `out`, only counted (their
    /// entries go with the tables; listing each cost ~60 instructions of every page a process
    /// ever mapped). Returns that count; `out` gets every other removed mapping.
    pub fn remove_dead_space(&mut self, space: u32, out: &mut Vec<Mapping>) -> usize {
        self.remove_space_with(space, Some(&mut |_| {}), out)
    }

    /// [`Self::remove_space`], the mappings of `space` nothing was derived from (most of a
    /// task's) handed to `own` as they go, if given, instead of appended to `out` (the caller
    /// clears their entries at once, or not at all). Returns how many went to `own`.
    fn remove_space_with(
        &mut self,
        space: u32,
        mut own: Option<&mut dyn FnMut(&Mapping)>,
        out: &mut Vec<Mapping>,
    ) -> usize {
        let mut unlisted = 0;
        // Along the space's own list: each revoke removes at least its first node. (A pass over
        // the whole arena, tens of thousands of nodes with the memory server's pool, was half
        // of a Linux `fork` + `wait`, which ends a task.)
        // Straight from the list's head, no index lookup (the head is always live).
        while let Some(&h) = self.space_head.get(space as usize) {
            if h == NIL {
                break;
            }
            let n = &self.nodes[h as usize];
            if n.first_child != NIL {
                self.revoke_node(h, true, out);
                continue;
            }
            // A mapping nothing was derived from (most of a task's): off the lists at once. It
            // heads its space's list, so that unlink is the head's.
            let (m, next, prev, parent, space_next) = (n.m, n.next, n.prev, n.parent, n.space_next);
            match own.as_mut() {
                Some(own) => {
                    own(&m);
                    unlisted += 1;
                }
                None => out.push(m),
            }
            if m.huge {
                self.space_huge[space as usize] -= 1;
            }
            self.space_head[space as usize] = space_next;
            if space_next != NIL {
                self.nodes[space_next as usize].space_prev = NIL;
            }
            if prev != NIL {
                self.nodes[prev as usize].next = next;
            } else if parent != NIL {
                self.nodes[parent as usize].first_child = next;
            }
            if next != NIL {
                self.nodes[next as usize].prev = prev;
            }
            self.index.remove(key(m.space, m.vaddr));
            self.nodes[h as usize].live = false;
            self.free.push(h);
        }
        unlisted
    }

    /// Empties `space` for another program (`task_reset`): every mapping of it goes, with
    /// everything derived from it, but those `keep` accepts (given the mapping and the one it
    /// was derived from, if any): they stay, with their place in the tree, and only what was
    /// derived from them goes. Appends every removed mapping to `out`; returns how many stayed.
    pub fn retain_space(
        &mut self,
        space: u32,
        keep: impl FnMut(&Mapping, Option<&Mapping>) -> bool,
        out: &mut Vec<Mapping>,
    ) -> usize {
        self.retain_space_with(space, keep, None, out).0
    }

    /// [`Self::retain_space`], the removed mappings of `space` nothing was derived from handed
    /// to `own` (if given) instead of appended to `out`, as [`Self::remove_space_with`] does.
    /// Returns how many stayed and how many went to `own`.
    pub fn retain_space_with(
        &mut self,
        space: u32,
        mut keep: impl FnMut(&Mapping, Option<&Mapping>) -> bool,
        own: Option<&mut dyn FnMut(&Mapping)>,
        out: &mut Vec<Mapping>,
    ) -> (usize, usize) {
        // The kept ones leave the space's list for a chain of their own (through the same
        // links), the rest go as at a task's end, then the kept ones come back. No allocation:
        // the kernel heap's first-fit search made a list of the nodes cost more than the rest.
        let mut kept_head = NIL;
        let mut kept = 0;
        let mut cur = self.space_head.get(space as usize).copied().unwrap_or(NIL);
        while cur != NIL {
            let n = &self.nodes[cur as usize];
            let next = n.space_next;
            let parent = (n.parent != NIL).then(|| self.nodes[n.parent as usize].m);
            if keep(&n.m, parent.as_ref()) {
                self.unlink_space(cur);
                self.nodes[cur as usize].space_next = kept_head;
                kept_head = cur;
                kept += 1;
            }
            cur = next;
        }
        let handed = self.remove_space_with(space, own, out);
        // What was derived from a kept one goes (nothing of the space: those went above).
        while kept_head != NIL {
            let k = kept_head;
            kept_head = self.nodes[k as usize].space_next;
            self.revoke_node(k, false, out);
            self.link_space(k);
        }
        (kept, handed)
    }

    /// Number of live mappings (for tests and accounting checks).
    pub fn len(&self) -> usize {
        self.index.len
    }

    pub fn is_empty(&self) -> bool {
        self.index.len == 0
    }

    /// Mappings of one space, in address order.
    pub fn count_space(&self, space: u32) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.live && n.m.space == space)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    fn m(space: u32, vaddr: u64, paddr: u64) -> Mapping {
        Mapping {
            space,
            vaddr,
            paddr,
            huge: false,
            rights: 3,
        }
    }

    #[test]
    fn revoke_reaches_grandchildren() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(1, 0x2000, 0x5000)).unwrap();
        db.insert_child(1, 0x2000, m(2, 0x3000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(3, 0x4000, 0x5000)).unwrap();
        let mut out = std::vec::Vec::new();
        db.revoke(0, 0x1000, false, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(db.len(), 1);
        assert!(db.lookup(2, 0x3000).is_none());
        assert!(db.lookup(0, 0x1abc).is_some());
    }

    #[test]
    fn vacant_is_trusted_only_while_nothing_changed() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        let p = db.find_id(0, 0x1000).unwrap();
        // Fresh: inserted without a second probe.
        let v = db.vacant(1, 0x2000, 0x1000).unwrap();
        db.insert_child_into(p, m(1, 0x2000, 0x5000), v).unwrap();
        assert!(db.lookup(1, 0x2000).is_some());
        // Occupied now: no token.
        assert!(db.vacant(1, 0x2000, 0x1000).is_none());
        // A token taken before a change is checked again: the place was filled meanwhile.
        let v = db.vacant(2, 0x3000, 0x1000).unwrap();
        db.insert_child(0, 0x1000, m(2, 0x3000, 0x5000)).unwrap();
        assert_eq!(
            db.insert_child_into(p, m(2, 0x3000, 0x5000), v),
            Err(MdbError::Exists)
        );
        // A token for another place is checked too.
        let v = db.vacant(3, 0x4000, 0x1000).unwrap();
        assert_eq!(
            db.insert_child_into(p, m(1, 0x2000, 0x5000), v),
            Err(MdbError::Exists)
        );
        // And the parent must still be live.
        let v = db.vacant(3, 0x4000, 0x1000).unwrap();
        let mut out = std::vec::Vec::new();
        db.revoke(0, 0x1000, true, &mut out);
        assert_eq!(
            db.insert_child_into(p, m(3, 0x4000, 0x5000), v),
            Err(MdbError::NotMapped)
        );
    }

    #[test]
    fn huge_parent_and_overlap() {
        let mut db = MapDb::new();
        db.insert_root(Mapping {
            space: 0,
            vaddr: 0x20_0000,
            paddr: 0x40_0000,
            huge: true,
            rights: 3,
        })
        .unwrap();
        assert_eq!(db.insert_root(m(0, 0x20_1000, 0)), Err(MdbError::Exists));
        db.insert_child(0, 0x20_3000, m(1, 0x1000, 0x40_3000))
            .unwrap();
        assert_eq!(
            db.insert_child(0, 0x9000, m(1, 0x5000, 0)),
            Err(MdbError::NotMapped)
        );
        assert_eq!(
            db.insert_child(0, 0x20_3000, m(1, 0x1000, 0)),
            Err(MdbError::Exists)
        );
        let mut out = std::vec::Vec::new();
        db.remove_space(0, &mut out);
        assert_eq!(out.len(), 2);
        assert!(db.is_empty());
    }

    #[test]
    fn space_lists_follow_inserts_moves_and_revokes() {
        let mut db = MapDb::with_capacity(4096);
        // Walks each space's list and checks it against a scan of the arena.
        fn check(db: &MapDb) {
            for space in 0..6u32 {
                let mut n = 0;
                let mut i = db.space_head.get(space as usize).copied().unwrap_or(NIL);
                let mut prev = NIL;
                while i != NIL {
                    let node = &db.nodes[i as usize];
                    assert!(node.live && node.m.space == space);
                    assert_eq!(node.space_prev, prev);
                    prev = i;
                    i = node.space_next;
                    n += 1;
                }
                assert_eq!(n, db.count_space(space), "space {space}");
            }
        }
        for k in 0..64u64 {
            let space = (k % 3) as u32;
            db.insert_root(m(space, 0x1000 * (k + 1), 0x100_0000 + 0x1000 * k))
                .unwrap();
        }
        // Children in other spaces and in the same space.
        for k in 0..64u64 {
            let space = (k % 3) as u32;
            db.insert_child(space, 0x1000 * (k + 1), m(4, 0x1000 * (k + 1), 0))
                .unwrap();
            db.insert_child(
                space,
                0x1000 * (k + 1),
                m(space, 0x100_0000 + 0x1000 * k, 0),
            )
            .unwrap();
        }
        check(&db);
        db.move_mapping(4, 0x1000, 5, 0x9000).unwrap();
        db.move_mapping(0, 0x1000, 5, 0xa000).unwrap();
        check(&db);
        let mut out = std::vec::Vec::new();
        db.revoke(1, 0x2000, true, &mut out);
        db.revoke(2, 0x3000, false, &mut out);
        check(&db);
        db.remove_space(0, &mut out);
        check(&db);
        assert_eq!(db.count_space(0), 0);
        db.remove_space(4, &mut out);
        db.remove_space(9, &mut out);
        check(&db);
        assert_eq!(db.count_space(4), 0);
        // Slots freed by the removals are reused with correct lists.
        for k in 0..32u64 {
            db.insert_root(m(3, 0x1000 * (k + 1), 0)).unwrap();
        }
        check(&db);
    }

    #[test]
    fn remove_space_takes_every_mapping_of_the_space_and_their_children_only() {
        let mut db = MapDb::new();
        // Interleaved roots of spaces 1 and 2; space 1's pages shared into space 3.
        for k in 0..20u64 {
            let space = 1 + (k % 2) as u32;
            db.insert_root(m(space, 0x1000 * (k + 1), 0x10_0000 + 0x1000 * k))
                .unwrap();
            if space == 1 {
                db.insert_child(1, 0x1000 * (k + 1), m(3, 0x1000 * (k + 1), 0))
                    .unwrap();
            }
        }
        let mut out = std::vec::Vec::new();
        db.remove_space(1, &mut out);
        assert_eq!(out.len(), 20); // 10 of space 1, 10 children in space 3
        assert_eq!(db.count_space(1), 0);
        assert_eq!(db.count_space(3), 0);
        assert_eq!(db.count_space(2), 10);
    }

    #[test]
    fn retain_space_keeps_what_it_is_told_and_drops_what_was_derived_from_it() {
        let mut db = MapDb::new();
        // Space 0 (the builder) lends pages 0x1000.. to space 1 at 0x10_0000..; space 1 has a
        // root page of its own, shared into space 2, and maps a kept page on into space 2 and
        // into itself.
        for k in 0..4u64 {
            db.insert_root(m(0, 0x1000 * (k + 1), 0x50_0000 + 0x1000 * k))
                .unwrap();
            db.insert_child(0, 0x1000 * (k + 1), m(1, 0x10_0000 + 0x1000 * k, 0))
                .unwrap();
        }
        db.insert_root(m(1, 0x40_0000, 0x90_0000)).unwrap();
        db.insert_child(1, 0x40_0000, m(2, 0x1000, 0x90_0000))
            .unwrap();
        db.insert_child(1, 0x10_0000, m(2, 0x2000, 0)).unwrap();
        db.insert_child(1, 0x10_1000, m(1, 0x30_0000, 0)).unwrap();
        let mut out = std::vec::Vec::new();
        // Keep space 1's pages lent by space 0, but the last one.
        let kept = db.retain_space(
            1,
            |m, parent| parent.is_some_and(|p| p.space == 0) && m.vaddr < 0x10_3000,
            &mut out,
        );
        assert_eq!(kept, 3);
        assert_eq!(db.count_space(1), 3);
        // Space 2's copies went: of the root page, and of the kept page.
        assert_eq!(db.count_space(2), 0);
        assert!(db.lookup(1, 0x30_0000).is_none());
        assert!(db.lookup(1, 0x40_0000).is_none());
        assert!(db.lookup(1, 0x10_3000).is_none());
        // The builder's own stay, the kept ones still derived from them (a revoke reaches them).
        assert_eq!(db.count_space(0), 4);
        assert_eq!(out.len(), 5);
        let mut out = std::vec::Vec::new();
        db.revoke(0, 0x1000, false, &mut out);
        assert_eq!(out.len(), 1);
        assert!(db.lookup(1, 0x10_0000).is_none());
        // An empty space, or one never seen, keeps nothing.
        assert_eq!(db.retain_space(7, |_, _| true, &mut out), 0);
    }

    #[test]
    fn a_space_without_2m_mappings_is_probed_once_and_counts_follow_moves() {
        let mut db = MapDb::new();
        let big = |space: u32, vaddr: u64| Mapping {
            space,
            vaddr,
            paddr: 0,
            huge: true,
            rights: 3,
        };
        db.insert_root(m(1, 0x1000, 0)).unwrap();
        assert!(db.lookup(1, 0x1_0000).is_none());
        assert!(!db.overlaps(1, 0x3000, 0x1000));
        db.insert_root(big(1, 0x40_0000)).unwrap();
        assert_eq!(db.space_huge[1], 1);
        assert!(db.overlaps(1, 0x41_0000, 0x1000));
        assert_eq!(db.lookup(1, 0x41_0abc).unwrap().vaddr, 0x40_0000);
        // Moved to another space (grant): the count goes with it.
        db.move_mapping(1, 0x40_0000, 2, 0x60_0000).unwrap();
        assert_eq!((db.space_huge[1], db.space_huge[2]), (0, 1));
        assert!(!db.overlaps(1, 0x41_0000, 0x1000));
        assert!(db.overlaps(2, 0x7f_f000, 0x1000));
        db.insert_child(2, 0x60_0000, m(1, 0x9000, 0)).unwrap();
        let mut out = std::vec::Vec::new();
        db.remove_space(2, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(db.space_huge[2], 0);
        assert!(db.lookup(2, 0x61_0000).is_none());
    }

    #[test]
    fn grant_moves_and_keeps_children() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(1, 0x2000, 0x5000)).unwrap();
        db.insert_child(1, 0x2000, m(2, 0x3000, 0x5000)).unwrap();
        db.move_mapping(1, 0x2000, 4, 0x8000).unwrap();
        assert!(db.lookup(1, 0x2000).is_none());
        let mut out = std::vec::Vec::new();
        db.revoke(4, 0x8000, true, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(db.len(), 1);
    }

    #[test]
    fn overlaps_finds_neighbours_without_scanning() {
        let mut db = MapDb::new();
        for p in 0..600u64 {
            db.insert_root(m(0, 0x4000_0000 + p * 0x1000, 0)).unwrap();
        }
        assert!(db.overlaps(0, 0x4000_0000 + 599 * 0x1000, 0x1000));
        assert!(!db.overlaps(0, 0x4000_0000 + 600 * 0x1000, 0x1000));
        assert!(db.overlaps(0, 0x3fff_f000, 0x2000));
        db.insert_root(Mapping {
            space: 1,
            vaddr: 0x20_0000,
            paddr: 0,
            huge: true,
            rights: 3,
        })
        .unwrap();
        assert!(db.overlaps(1, 0x3f_f000, 0x1000));
        assert!(!db.overlaps(1, 0x40_0000, 0x1000));
        assert!(db.overlaps(1, 0x1f_f000, 0x2000));
        assert!(!db.overlaps(1, 0x1f_f000, 0x1000));
        let id = db.find_id(1, 0x21_0000).unwrap();
        assert!(db.get(id).huge);
        db.insert_child_of(id, m(2, 0x1000, 0x1_0000)).unwrap();
        assert_eq!(
            db.insert_child_of(id, m(2, 0x1000, 0)),
            Err(MdbError::Exists)
        );
    }

    #[test]
    fn index_matches_a_model_under_random_operations() {
        // Differential test of the hash index (with deletions that shift runs) against a plain
        // map, through the database's public operations.
        use std::collections::BTreeMap;
        let mut db = MapDb::with_capacity(4096);
        let mut model: BTreeMap<(u32, u64), bool> = BTreeMap::new();
        let mut seed = 7u64;
        let mut rnd = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..40_000 {
            let space = rnd(3) as u32;
            let v = rnd(64) * 0x1000;
            match rnd(3) {
                0 | 1 => {
                    let r = db.insert_root(m(space, v, 0));
                    assert_eq!(r.is_ok(), !model.contains_key(&(space, v)));
                    model.insert((space, v), true);
                }
                _ => {
                    let mut out = std::vec::Vec::new();
                    db.revoke(space, v, true, &mut out);
                    assert_eq!(out.len(), model.remove(&(space, v)).map_or(0, |_| 1));
                }
            }
            assert_eq!(db.len(), model.len());
        }
        for s in 0..3 {
            for p in 0..64u64 {
                assert_eq!(
                    db.lookup(s, p * 0x1000).is_some(),
                    model.contains_key(&(s, p * 0x1000))
                );
            }
        }
    }

    #[test]
    fn fixed_capacity_is_respected() {
        let mut db = MapDb::with_capacity(2);
        db.insert_root(m(0, 0x1000, 0)).unwrap();
        db.insert_child(0, 0x1000, m(1, 0x1000, 0)).unwrap();
        assert_eq!(
            db.insert_child(0, 0x1000, m(2, 0x1000, 0)),
            Err(MdbError::Full)
        );
        let mut out = std::vec::Vec::new();
        db.revoke(0, 0x1000, false, &mut out);
        db.insert_child(0, 0x1000, m(2, 0x1000, 0)).unwrap();
    }

    #[test]
    fn wide_tree_revoke() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0, 0)).unwrap();
        for s in 1..2000u32 {
            db.insert_child(s - 1, 0, m(s, 0, 0)).unwrap();
        }
        let mut out = std::vec::Vec::new();
        db.revoke(0, 0, true, &mut out);
        assert_eq!(out.len(), 2000);
        assert!(db.is_empty());
    }

    #[test]
    fn protect_lowers_the_subtree_and_keeps_it() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(1, 0x2000, 0x5000)).unwrap();
        db.insert_child(1, 0x2000, m(2, 0x3000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(3, 0x4000, 0x5000)).unwrap();
        // A read-only child: nothing to lower, so not reported.
        db.insert_child(
            0,
            0x1000,
            Mapping {
                rights: 1,
                ..m(4, 0x4000, 0x5000)
            },
        )
        .unwrap();
        // Another frame's mappings are not touched.
        db.insert_root(m(0, 0x9000, 0x6000)).unwrap();
        db.insert_child(0, 0x9000, m(1, 0x9000, 0x6000)).unwrap();
        let mut out = std::vec::Vec::new();
        db.protect(0, 0x1000, false, 2, &mut out);
        let mut lowered: std::vec::Vec<u32> = out.iter().map(|x| x.space).collect();
        lowered.sort();
        assert_eq!(lowered, [1, 2, 3]);
        assert!(out.iter().all(|x| x.rights == 1));
        assert_eq!(db.len(), 7, "every mapping stays");
        assert_eq!(
            db.lookup(0, 0x1000).unwrap().rights,
            3,
            "ours keeps its rights"
        );
        for (s, a) in [(1, 0x2000), (2, 0x3000), (3, 0x4000), (4, 0x4000)] {
            assert_eq!(db.lookup(s, a).unwrap().rights, 1);
        }
        assert_eq!(db.lookup(1, 0x9000).unwrap().rights, 3);
        // Done again, nothing is left to lower.
        out.clear();
        db.protect(0, 0x1000, false, 2, &mut out);
        assert!(out.is_empty());
        // With `with_self`, ours too.
        db.protect(0, 0x1000, true, 2, &mut out);
        assert_eq!(
            out,
            [Mapping {
                rights: 1,
                ..m(0, 0x1000, 0x5000)
            }]
        );
        // The lowered mappings keep their derivation: revoking finds all four.
        out.clear();
        db.revoke(0, 0x1000, false, &mut out);
        assert_eq!(out.len(), 4);
        assert_eq!(db.len(), 3);
    }

    #[test]
    fn protect_of_a_subtree_stays_inside_it() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(1, 0x1000, 0x5000)).unwrap();
        db.insert_child(1, 0x1000, m(2, 0x1000, 0x5000)).unwrap();
        db.insert_child(0, 0x1000, m(3, 0x1000, 0x5000)).unwrap();
        let mut out = std::vec::Vec::new();
        db.protect(1, 0x1000, false, 2, &mut out);
        assert_eq!(
            out,
            [Mapping {
                rights: 1,
                ..m(2, 0x1000, 0x5000)
            }]
        );
        assert_eq!(db.lookup(1, 0x1000).unwrap().rights, 3);
        assert_eq!(
            db.lookup(3, 0x1000).unwrap().rights,
            3,
            "a sibling is not below"
        );
        // Nothing mapped there: nothing happens.
        out.clear();
        db.protect(7, 0x1000, true, 2, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn protect_walks_deep_and_wide_trees() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0, 0)).unwrap();
        for s in 1..2000u32 {
            db.insert_child(s - 1, 0, m(s, 0, 0)).unwrap();
        }
        for s in 2000..2100u32 {
            db.insert_child(0, 0, m(s, 0, 0)).unwrap();
        }
        let mut out = std::vec::Vec::new();
        db.protect(0, 0, false, 2, &mut out);
        assert_eq!(out.len(), 2099);
        assert_eq!(db.len(), 2100);
    }

    #[test]
    fn an_insertion_probed_once_finds_what_is_there() {
        let mut db = MapDb::new();
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        let p = db.find_id(0, 0x1000).unwrap();
        db.insert_child_of(p, m(1, 0x2000, 0x5000)).unwrap();
        assert_eq!(db.lookup(1, 0x2000).map(|x| x.paddr), Some(0x5000));
        // The place is taken now: refused, nothing changed.
        assert_eq!(
            db.insert_child_of(p, m(1, 0x2000, 0x5000)),
            Err(MdbError::Exists)
        );
        assert_eq!(db.len(), 2);
        // A 2 MiB mapping around the place is found too (the general probe).
        let big = Mapping {
            space: 2,
            vaddr: 0x20_0000,
            paddr: 0x40_0000,
            huge: true,
            rights: 3,
        };
        db.insert_root(big).unwrap();
        assert_eq!(
            db.insert_child_of(p, m(2, 0x20_1000, 0x5000)),
            Err(MdbError::Exists)
        );
        // A parent that went is refused.
        let mut out = std::vec::Vec::new();
        db.revoke(0, 0x1000, true, &mut out);
        assert_eq!(
            db.insert_child_of(p, m(3, 0x1000, 0x5000)),
            Err(MdbError::NotMapped)
        );
        // Each insertion is in the space's list: removing the space finds it.
        db.insert_root(m(0, 0x1000, 0x5000)).unwrap();
        let p = db.find_id(0, 0x1000).unwrap();
        for k in 0..40u64 {
            db.insert_child_of(p, m(4, 0x1000 * (k + 1), 0x5000))
                .unwrap();
        }
        assert_eq!(db.count_space(4), 40);
        db.remove_space(4, &mut out);
        assert_eq!(db.count_space(4), 0);
    }

    #[test]
    fn own_mappings_go_to_the_callback_and_derived_ones_to_the_list() {
        let mut db = MapDb::new();
        // Space 1: three pages of its own (one shared on into space 2) and one lent by space 0.
        for k in 0..3u64 {
            db.insert_root(m(1, 0x1000 * (k + 1), 0x10_0000 + 0x1000 * k))
                .unwrap();
        }
        db.insert_child(1, 0x1000, m(2, 0x9000, 0x10_0000)).unwrap();
        db.insert_root(m(0, 0x1000, 0x50_0000)).unwrap();
        db.insert_child(0, 0x1000, m(1, 0x8000, 0x50_0000)).unwrap();
        let mut out = std::vec::Vec::new();
        let mut own = std::vec::Vec::new();
        let (kept, handed) = db.retain_space_with(
            1,
            |_, parent| parent.is_some_and(|p| p.space == 0),
            Some(&mut |x: &Mapping| own.push(x.vaddr)),
            &mut out,
        );
        assert_eq!(kept, 1);
        // The two pages nothing was derived from went to the callback; the shared one and its
        // copy in space 2 to the list.
        own.sort();
        assert_eq!(own, [0x2000, 0x3000]);
        assert_eq!(handed, 2);
        let mut listed: std::vec::Vec<(u32, u64)> =
            out.iter().map(|x| (x.space, x.vaddr)).collect();
        listed.sort();
        assert_eq!(listed, [(1, 0x1000), (2, 0x9000)]);
        assert_eq!(db.count_space(1), 1);
        // At a task's end its own leaves are only counted.
        let mut out = std::vec::Vec::new();
        db.insert_root(m(1, 0x4000, 0x20_0000)).unwrap();
        db.insert_child(1, 0x4000, m(2, 0xa000, 0x20_0000)).unwrap();
        assert_eq!(db.remove_dead_space(1, &mut out), 1);
        let listed: std::vec::Vec<(u32, u64)> = out.iter().map(|x| (x.space, x.vaddr)).collect();
        assert_eq!(listed, [(2, 0xa000), (1, 0x4000)]);
        assert_eq!(db.count_space(1), 0);
        assert_eq!(db.count_space(2), 0);
    }
}
