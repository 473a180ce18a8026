//! Our own consistency check (`./sawmill ext2 check`): every in-use inode's block map, the
//! directory tree and link counts, against the bitmaps and the group and superblock
//! counters. It reports, never repairs. Memory is a few bits per block and inode.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::fs::{FileKind, Fs};
use crate::layout::*;
use crate::{BlockDevice, Error, Result};

#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    pub problems: Vec<String>,
    pub inodes_used: u64,
    pub dirs: u64,
    pub blocks_used: u64,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Stop collecting after this many problems: a wrecked image would otherwise list millions.
const MAX_PROBLEMS: usize = 200;

struct Bits(Vec<u8>);
impl Bits {
    fn new(n: u64) -> Self {
        Bits(vec![0; n.div_ceil(8) as usize])
    }
    fn get(&self, i: u64) -> bool {
        self.0
            .get((i / 8) as usize)
            .is_some_and(|b| b & 1 << (i % 8) != 0)
    }
    /// Sets bit `i`; returns its previous value.
    fn set(&mut self, i: u64) -> bool {
        let old = self.get(i);
        if let Some(b) = self.0.get_mut((i / 8) as usize) {
            *b |= 1 << (i % 8);
        }
        old
    }
}

impl<D: BlockDevice> Fs<D> {
    pub fn check(&mut self) -> Result<CheckReport> {
        let mut rep = CheckReport::default();
        let note = |rep: &mut CheckReport, s: String| {
            if rep.problems.len() < MAX_PROBLEMS {
                rep.problems.push(s);
            }
        };
        let nblocks = self.blocks_count as u64;
        let mut used = Bits::new(nblocks);
        // Fixed metadata. Reserved GDT blocks belong to the resize inode when there is one.
        for g in 0..self.groups {
            let first = self.group_first(g);
            if self.has_super(g) {
                let extra = if self.sb_get(S_FEATURE_COMPAT) & COMPAT_RESIZE_INODE != 0 {
                    0
                } else {
                    self.reserved_gdt
                };
                for b in first..=first + self.gdt_blocks + extra {
                    used.set(b as u64);
                }
            }
            for b in [self.gd32(g, G_BLOCK_BITMAP), self.gd32(g, G_INODE_BITMAP)] {
                if used.set(b as u64) {
                    note(&mut rep, format!("group {g}: bitmap block {b} used twice"));
                }
            }
            let it = self.gd32(g, G_INODE_TABLE);
            for b in it..it + self.itable_blocks {
                if used.set(b as u64) {
                    note(
                        &mut rep,
                        format!("group {g}: inode table block {b} used twice"),
                    );
                }
            }
        }

        // Pass 1: inodes.
        let n_ino = self.inodes_count as u64;
        let mut in_use = Bits::new(n_ino + 1);
        let mut is_dir = Bits::new(n_ino + 1);
        let mut links: Vec<u16> = vec![0; n_ino as usize + 1];
        let mut xattr_blocks = Bits::new(nblocks);
        let mut dirs_per_group = vec![0u32; self.groups as usize];
        for ino in 1..=self.inodes_count {
            let r = self.read_inode(ino)?;
            let reserved = ino < self.first_ino && ino != ROOT_INO;
            let live = if reserved {
                r.sectors() != 0 || ino == 1
            } else {
                r.links() > 0
            };
            if !live {
                continue;
            }
            in_use.set(ino as u64);
            links[ino as usize] = r.links();
            if !reserved {
                rep.inodes_used += 1;
                if FileKind::from_mode(r.mode()) == FileKind::Unknown {
                    note(&mut rep, format!("inode {ino}: bad mode {:o}", r.mode()));
                    continue;
                }
                if r.time(I_DTIME) != 0 {
                    note(
                        &mut rep,
                        format!("inode {ino}: in use but has a deletion time"),
                    );
                }
            }
            if r.is_dir() {
                is_dir.set(ino as u64);
                rep.dirs += 1;
                dirs_per_group[((ino - 1) / self.ipg) as usize] += 1;
            }
            let mut count = 0u64;
            let acl = r.file_acl();
            if acl != 0 {
                if self.check_blk(acl).is_err() {
                    note(
                        &mut rep,
                        format!("inode {ino}: xattr block {acl} out of range"),
                    );
                } else {
                    count += 1;
                    if !xattr_blocks.set(acl as u64) && used.set(acl as u64) {
                        note(
                            &mut rep,
                            format!("inode {ino}: xattr block {acl} also used elsewhere"),
                        );
                    }
                }
            }
            if self.has_block_map(&r) || (reserved && r.sectors() != 0) {
                let mut last: Option<u64> = None;
                let mut holes = false;
                let res = self.walk_map(&r, &mut |lblk, b, data| {
                    count += 1;
                    if used.set(b as u64) {
                        return Err(Error::Corrupt("block used twice"));
                    }
                    if data {
                        if last.is_some_and(|l| l + 1 != lblk) || (last.is_none() && lblk != 0) {
                            holes = true;
                        }
                        last = Some(lblk);
                    }
                    Ok(())
                });
                if let Err(e) = res {
                    note(&mut rep, format!("inode {ino}: block map: {e}"));
                    continue;
                }
                let want = count * (self.bs as u64 / 512);
                if want != r.sectors() as u64 {
                    note(
                        &mut rep,
                        format!("inode {ino}: i_blocks is {}, should be {want}", r.sectors()),
                    );
                }
                if !reserved {
                    let size_blocks = r.size().div_ceil(self.bs as u64);
                    if last.is_some_and(|l| l >= size_blocks) {
                        note(
                            &mut rep,
                            format!("inode {ino}: blocks beyond i_size {}", r.size()),
                        );
                    }
                    if r.is_dir() && (holes || r.size() % self.bs as u64 != 0 || r.size() == 0) {
                        note(&mut rep, format!("directory {ino}: size or holes wrong"));
                    }
                }
            } else if r.is_symlink() && r.size() >= 60 {
                note(
                    &mut rep,
                    format!("inode {ino}: fast symlink of size {}", r.size()),
                );
            }
        }

        // Pass 2: directory entries and link counts.
        let mut refs: Vec<u32> = vec![0; n_ino as usize + 1];
        let mut parent_of: Vec<u32> = vec![0; n_ino as usize + 1];
        for ino in 1..=self.inodes_count {
            if !is_dir.get(ino as u64) {
                continue;
            }
            let r = self.read_inode(ino)?;
            let mut entries: Vec<(u32, Vec<u8>, u8)> = Vec::new();
            let res = self.scan_dir(&r, |s, buf| {
                if s.ino != 0 {
                    entries.push((
                        s.ino,
                        buf[s.off + 8..s.off + 8 + s.name_len].to_vec(),
                        s.ftype,
                    ));
                }
                None::<()>
            });
            if let Err(e) = res {
                note(&mut rep, format!("directory {ino}: {e}"));
                continue;
            }
            for (i, (child, name, ftype)) in entries.iter().enumerate() {
                let child = *child;
                if !in_use.get(child as u64) {
                    note(
                        &mut rep,
                        format!(
                            "directory {ino}: entry '{}' points to unused inode {child}",
                            lossy(name)
                        ),
                    );
                    continue;
                }
                refs[child as usize] += 1;
                if i == 0 && (name.as_slice() != b"." || child != ino) {
                    note(&mut rep, format!("directory {ino}: first entry is not '.'"));
                }
                if i == 1 && name.as_slice() != b".." {
                    note(
                        &mut rep,
                        format!("directory {ino}: second entry is not '..'"),
                    );
                }
                if name.as_slice() == b"." || name.as_slice() == b".." {
                    continue;
                }
                if is_dir.get(child as u64) {
                    if parent_of[child as usize] != 0 {
                        note(&mut rep, format!("directory {child} has two parents"));
                    }
                    parent_of[child as usize] = ino;
                }
                if self.filetype {
                    let cr = self.read_inode(child)?;
                    let want = FileKind::from_mode(cr.mode());
                    if *ftype != dirent_type(want) {
                        note(
                            &mut rep,
                            format!(
                                "directory {ino}: entry '{}' has the wrong file type",
                                lossy(name)
                            ),
                        );
                    }
                }
            }
            if let Some((dd, _, _)) = entries.get(1) {
                if ino != ROOT_INO && parent_of[ino as usize] != 0 && *dd != parent_of[ino as usize]
                {
                    note(
                        &mut rep,
                        format!(
                            "directory {ino}: '..' is {dd}, parent is {}",
                            parent_of[ino as usize]
                        ),
                    );
                }
            }
        }
        for ino in 1..=self.inodes_count {
            if !in_use.get(ino as u64) || (ino < self.first_ino && ino != ROOT_INO) {
                continue;
            }
            let have = links[ino as usize] as u32;
            let want = refs[ino as usize];
            // A file a rename replaced is released at the next flush (`Fs::replaced`).
            if want == 0 && self.replaced.contains(&ino) {
                continue;
            }
            if want == 0 {
                note(
                    &mut rep,
                    format!("inode {ino}: in use but not in any directory"),
                );
            } else if have != want {
                note(
                    &mut rep,
                    format!("inode {ino}: link count {have}, should be {want}"),
                );
            }
        }
        // Directory ".." of a moved directory is checked above once its parent is known; a
        // second pass catches parents seen after the child.
        for ino in 1..=self.inodes_count {
            if ino == ROOT_INO || !is_dir.get(ino as u64) || parent_of[ino as usize] == 0 {
                continue;
            }
            if let Ok(dd) = self.lookup(ino, b"..") {
                if dd != parent_of[ino as usize] {
                    note(
                        &mut rep,
                        format!(
                            "directory {ino}: '..' is {dd}, parent is {}",
                            parent_of[ino as usize]
                        ),
                    );
                }
            }
        }

        // Pass 3: bitmaps and counters.
        let mut total_free_b = 0u64;
        let mut total_free_i = 0u64;
        let mut bm = vec![0u8; self.bs as usize];
        for g in 0..self.groups {
            let first = self.group_first(g);
            let n = self.group_nblocks(g);
            self.read_block(self.gd32(g, G_BLOCK_BITMAP), &mut bm)?;
            let mut free = 0u32;
            let mut reported = 0;
            for i in 0..n {
                let b = (first + i) as u64;
                let on_disk = bm[(i / 8) as usize] & 1 << (i % 8) != 0;
                if !on_disk {
                    free += 1;
                }
                if on_disk != used.get(b) && reported < 5 {
                    reported += 1;
                    let what = if on_disk {
                        "marked used but unused"
                    } else {
                        "used but marked free"
                    };
                    note(&mut rep, format!("block {b}: {what}"));
                }
            }
            if free != self.gd16(g, G_FREE_BLOCKS) as u32 {
                note(
                    &mut rep,
                    format!(
                        "group {g}: free blocks {}, counted {free}",
                        self.gd16(g, G_FREE_BLOCKS)
                    ),
                );
            }
            total_free_b += free as u64;
            rep.blocks_used += (n - free) as u64;

            self.read_block(self.gd32(g, G_INODE_BITMAP), &mut bm)?;
            let mut freei = 0u32;
            let mut reported = 0;
            for i in 0..self.ipg {
                let ino = (g * self.ipg + i + 1) as u64;
                let on_disk = bm[(i / 8) as usize] & 1 << (i % 8) != 0;
                if !on_disk {
                    freei += 1;
                }
                let want = in_use.get(ino) || ino < self.first_ino as u64;
                if on_disk != want && reported < 5 {
                    reported += 1;
                    let what = if on_disk {
                        "marked used but unused"
                    } else {
                        "used but marked free"
                    };
                    note(&mut rep, format!("inode {ino}: {what}"));
                }
            }
            if freei != self.gd16(g, G_FREE_INODES) as u32 {
                note(
                    &mut rep,
                    format!(
                        "group {g}: free inodes {}, counted {freei}",
                        self.gd16(g, G_FREE_INODES)
                    ),
                );
            }
            if dirs_per_group[g as usize] != self.gd16(g, G_USED_DIRS) as u32 {
                note(
                    &mut rep,
                    format!(
                        "group {g}: directories {}, counted {}",
                        self.gd16(g, G_USED_DIRS),
                        dirs_per_group[g as usize]
                    ),
                );
            }
            total_free_i += freei as u64;
        }
        if total_free_b != self.sb_get(S_FREE_BLOCKS) as u64 {
            note(
                &mut rep,
                format!(
                    "superblock: free blocks {}, counted {total_free_b}",
                    self.sb_get(S_FREE_BLOCKS)
                ),
            );
        }
        if total_free_i != self.sb_get(S_FREE_INODES) as u64 {
            note(
                &mut rep,
                format!(
                    "superblock: free inodes {}, counted {total_free_i}",
                    self.sb_get(S_FREE_INODES)
                ),
            );
        }
        Ok(rep)
    }

    /// Calls `f(lblk, block, is_data)` for every mapped block of `r`, indirect ones included
    /// (their `lblk` is the first logical block they map).
    fn walk_map(
        &mut self,
        r: &RawInode,
        f: &mut dyn FnMut(u64, u32, bool) -> Result<()>,
    ) -> Result<()> {
        for i in 0..12 {
            let b = r.block(i);
            if b != 0 {
                self.check_blk(b)?;
                f(i as u64, b, true)?;
            }
        }
        let p = self.ptrs();
        let mut base = 12u64;
        let mut cover = p;
        for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
            let b = r.block(slot);
            if b != 0 {
                self.walk_tree(b, level, base, f)?;
            }
            base += cover;
            cover *= p;
        }
        Ok(())
    }

    fn walk_tree(
        &mut self,
        b: u32,
        level: u32,
        base: u64,
        f: &mut dyn FnMut(u64, u32, bool) -> Result<()>,
    ) -> Result<()> {
        self.check_blk(b)?;
        f(base, b, false)?;
        let p = self.ptrs();
        let span = p.pow(level - 1);
        let mut buf = vec![0u8; self.bs as usize];
        self.read_block(b, &mut buf)?;
        for j in 0..p {
            let c = le32(&buf, j as usize * 4);
            if c == 0 {
                continue;
            }
            if level == 1 {
                self.check_blk(c)?;
                f(base + j, c, true)?;
            } else {
                self.walk_tree(c, level - 1, base + j * span, f)?;
            }
        }
        Ok(())
    }
}

fn dirent_type(k: FileKind) -> u8 {
    match k {
        FileKind::Regular => 1,
        FileKind::Dir => 2,
        FileKind::CharDev => 3,
        FileKind::BlockDev => 4,
        FileKind::Fifo => 5,
        FileKind::Socket => 6,
        FileKind::Symlink => 7,
        FileKind::Unknown => 0,
    }
}

fn lossy(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}
