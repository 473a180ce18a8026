//! The file system proper: mounting, inode and block I/O, allocation, directories and the
//! operations built on them.

use alloc::vec;
use alloc::vec::Vec;

use crate::layout::*;
use crate::{BlockDevice, Error, Result};
use sawmill_path::{Attr, Error as WalkError, Tree, Walker};

/// The type of an inode, from its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Dir,
    Symlink,
    CharDev,
    BlockDev,
    Fifo,
    Socket,
    Unknown,
}

impl FileKind {
    pub fn from_mode(mode: u16) -> Self {
        match mode & S_IFMT {
            S_IFREG => FileKind::Regular,
            S_IFDIR => FileKind::Dir,
            S_IFLNK => FileKind::Symlink,
            S_IFCHR => FileKind::CharDev,
            S_IFBLK => FileKind::BlockDev,
            S_IFIFO => FileKind::Fifo,
            S_IFSOCK => FileKind::Socket,
            _ => FileKind::Unknown,
        }
    }
    pub fn mode_bits(self) -> u16 {
        match self {
            FileKind::Regular => S_IFREG,
            FileKind::Dir => S_IFDIR,
            FileKind::Symlink => S_IFLNK,
            FileKind::CharDev => S_IFCHR,
            FileKind::BlockDev => S_IFBLK,
            FileKind::Fifo => S_IFIFO,
            FileKind::Socket => S_IFSOCK,
            FileKind::Unknown => 0,
        }
    }
    fn dirent_type(self) -> u8 {
        match self {
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
    fn from_dirent_type(t: u8) -> Self {
        match t {
            1 => FileKind::Regular,
            2 => FileKind::Dir,
            3 => FileKind::CharDev,
            4 => FileKind::BlockDev,
            5 => FileKind::Fifo,
            6 => FileKind::Socket,
            7 => FileKind::Symlink,
            _ => FileKind::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub ino: u32,
    pub kind: FileKind,
    /// Full i_mode (type and permission bits).
    pub mode: u16,
    pub nlink: u16,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// i_blocks: 512-byte sectors, including indirect and xattr blocks.
    pub sectors: u64,
    pub atime: u32,
    pub mtime: u32,
    pub ctime: u32,
    /// (major, minor) for device nodes.
    pub rdev: (u32, u32),
    pub flags: u32,
}

/// What [`Fs::stat_more`] adds to [`Stat`] (kept apart so `Stat`, which path walks move around
/// for every component, stays within 64 bytes, below the size LLVM stops copying inline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatMore {
    /// Nanoseconds of atime, mtime, ctime: from a large inode's extra fields when it has them,
    /// else 0 (as Linux reports). The extra fields' epoch bits (times past 2038) are ignored.
    pub nsec: [u32; 3],
    /// i_generation (NFS's file-handle generation; `FS_IOC_GETVERSION`).
    pub generation: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u32,
    pub name: Vec<u8>,
    /// From the entry's file-type byte; `Unknown` without the filetype feature.
    pub kind: FileKind,
}

/// Attribute changes for [`Fs::set_attr`]; `None` leaves a field alone. ctime is set to now.
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    /// Permission bits only (0o7777); the type is kept.
    pub perm: Option<u16>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: Option<u32>,
    pub mtime: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u32,
    pub blocks: u64,
    pub free_blocks: u64,
    /// Free blocks minus the root reservation.
    pub avail_blocks: u64,
    pub inodes: u64,
    pub free_inodes: u64,
    pub name_max: u32,
}

/// One directory entry as found on disk, with where it lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub phys: u32,
    pub off: usize,
    pub prev: Option<usize>,
    pub ino: u32,
    pub rec_len: usize,
    pub name_len: usize,
    pub ftype: u8,
}

pub struct Fs<D: BlockDevice> {
    pub(crate) dev: D,
    pub(crate) sb: Vec<u8>,
    pub(crate) gdt: Vec<u8>,
    pub(crate) bs: u32,
    pub(crate) groups: u32,
    pub(crate) bpg: u32,
    pub(crate) ipg: u32,
    pub(crate) inode_size: u32,
    pub(crate) first_ino: u32,
    pub(crate) fdb: u32,
    pub(crate) blocks_count: u32,
    pub(crate) inodes_count: u32,
    pub(crate) gdt_blocks: u32,
    pub(crate) reserved_gdt: u32,
    pub(crate) itable_blocks: u32,
    pub(crate) filetype: bool,
    pub(crate) sparse_super: bool,
    writable: bool,
    now: u32,
    generation: u32,
    /// One block of scratch space for directory scans (kept, so a scan allocates nothing).
    scratch: Vec<u8>,
    /// Recently used inodes, direct-mapped by number (`ino % ICACHE`): a path lookup reads the
    /// same few inodes several times. Written through by `write_inode` and `new_inode`, the
    /// only two writers of the inode table.
    icache: Vec<Cached>,
    /// Recent successful lookups, (directory, name) -> inode, direct-mapped by a hash of both:
    /// a path walk asks for the same names again and again, and a directory scan reads and
    /// compares every entry before the one wanted. Only found names are kept (no negative
    /// entries), and every change to any directory's entries (`dir_add`, `dir_remove`,
    /// `dir_retarget`, `set_dotdot`: the only writers of entries) empties the whole cache, so an
    /// entry can never name a removed, renamed or reused inode.
    names: Vec<NameEnt>,
    /// Bumped with every change to any directory's entries (with `names_forget`).
    dir_changes: u64,
    /// Where the last `readdir_at` stopped: (directory, byte position, `dir_changes` then). A
    /// call that continues there starts at that record; any other scans its block from the start
    /// (a position from a client is only trusted once found on a record boundary).
    readdir_next: (u32, u64, u64),
    /// Files a rename took the last name of, released only once the new entry is on the disk
    /// (`flush`): were the inode freed in the same write-back as the directory block that
    /// names its successor, a crash between the two could leave the name on a freed inode,
    /// which e2fsck removes, and neither the old file nor the new one under it (crash
    /// consistency, `./sawmill crash`). Until then it is an unnamed, still allocated inode.
    pub(crate) replaced: Vec<u32>,
}

/// An entry of the name cache (see `Fs::names`); `dir` 0 is empty.
#[derive(Clone, Copy)]
struct NameEnt {
    dir: u32,
    ino: u32,
    len: u8,
    name: [u8; NAME_CACHED_MAX],
}

const NAME_EMPTY: NameEnt = NameEnt {
    dir: 0,
    ino: 0,
    len: 0,
    name: [0; NAME_CACHED_MAX],
};

/// Entries of the name cache.
const NCACHE: usize = 64;
/// Longest name the name cache keeps (longer ones are looked up in the directory each time).
const NAME_CACHED_MAX: usize = 30;

/// An entry of the inode cache: the inode's 128-byte core and its times' nanoseconds.
#[derive(Clone)]
struct Cached {
    /// 0: empty.
    ino: u32,
    raw: RawInode,
    nsec: [u32; 3],
}

/// The three inode times and their large-inode extra fields.
const TIMES: [(usize, usize); 3] = [
    (I_ATIME, I_ATIME_EXTRA),
    (I_MTIME, I_MTIME_EXTRA),
    (I_CTIME, I_CTIME_EXTRA),
];

/// Entries of the inode cache.
const ICACHE: usize = 64;

impl<D: BlockDevice> Fs<D> {
    /// Mounts the file system on `dev`, validating the superblock and group descriptors
    /// against each other and against the device size.
    pub fn open(mut dev: D) -> Result<Self> {
        let size = dev.size();
        if size < SB_OFFSET + SB_SIZE as u64 {
            return Err(Error::Corrupt("device too small for a superblock"));
        }
        let mut sb = vec![0u8; SB_SIZE];
        dev.read_at(SB_OFFSET, &mut sb)?;
        if le16(&sb, S_MAGIC) != MAGIC {
            return Err(Error::Corrupt("bad superblock magic"));
        }
        let log = le32(&sb, S_LOG_BLOCK_SIZE);
        if log > 2 {
            return Err(Error::Unsupported("block size above 4096"));
        }
        let bs = 1024u32 << log;
        let rev = le32(&sb, S_REV_LEVEL);
        if rev > 1 {
            return Err(Error::Unsupported("revision level"));
        }
        let (first_ino, inode_size, incompat, ro_compat) = if rev == 0 {
            (GOOD_OLD_FIRST_INO, GOOD_OLD_INODE_SIZE, 0, 0)
        } else {
            (
                le32(&sb, S_FIRST_INO),
                le16(&sb, S_INODE_SIZE) as u32,
                le32(&sb, S_FEATURE_INCOMPAT),
                le32(&sb, S_FEATURE_RO_COMPAT),
            )
        };
        if incompat & !INCOMPAT_SUPPORTED != 0 {
            return Err(Error::Unsupported(
                "incompatible features (extents, 64bit, meta_bg, ...)",
            ));
        }
        if inode_size < 128 || !inode_size.is_power_of_two() || inode_size > bs {
            return Err(Error::Corrupt("inode size"));
        }
        let bpg = le32(&sb, S_BLOCKS_PER_GROUP);
        let ipg = le32(&sb, S_INODES_PER_GROUP);
        if bpg == 0 || bpg > bs * 8 || !bpg.is_multiple_of(8) {
            return Err(Error::Corrupt("blocks per group"));
        }
        if ipg == 0 || ipg > bs * 8 {
            return Err(Error::Corrupt("inodes per group"));
        }
        let fdb = le32(&sb, S_FIRST_DATA_BLOCK);
        if fdb != (bs == 1024) as u32 {
            return Err(Error::Corrupt("first data block"));
        }
        let blocks_count = le32(&sb, S_BLOCKS_COUNT);
        if blocks_count <= fdb + 2 {
            return Err(Error::Corrupt("block count"));
        }
        if blocks_count as u64 * bs as u64 > size {
            return Err(Error::Corrupt("image is shorter than the file system"));
        }
        let groups64 = (blocks_count as u64 - fdb as u64).div_ceil(bpg as u64);
        let groups = groups64 as u32;
        let inodes_count = le32(&sb, S_INODES_COUNT);
        if inodes_count as u64 != groups64 * ipg as u64 {
            return Err(Error::Corrupt("inode count does not match the groups"));
        }
        if first_ino < 3 || first_ino > inodes_count {
            return Err(Error::Corrupt("first inode"));
        }
        let gdt_blocks = (groups64 * DESC_SIZE as u64).div_ceil(bs as u64) as u32;
        let reserved_gdt = if rev >= 1 {
            le16(&sb, S_RESERVED_GDT) as u32
        } else {
            0
        };
        if fdb as u64 + 1 + gdt_blocks as u64 + reserved_gdt as u64 >= blocks_count as u64 {
            return Err(Error::Corrupt("group descriptors do not fit"));
        }
        let itable_blocks = (ipg as u64 * inode_size as u64).div_ceil(bs as u64) as u32;
        // Inode tables are disjoint in any valid image; this also bounds everything sized by
        // the inode count (the checker's tables) by the device size.
        if itable_blocks as u64 * groups64 >= blocks_count as u64 {
            return Err(Error::Corrupt("inode tables larger than the file system"));
        }
        let mut gdt = vec![0u8; groups as usize * DESC_SIZE];
        dev.read_at((fdb as u64 + 1) * bs as u64, &mut gdt)?;
        for g in 0..groups as usize {
            let d = &gdt[g * DESC_SIZE..];
            let bb = le32(d, G_BLOCK_BITMAP);
            let ib = le32(d, G_INODE_BITMAP);
            let it = le32(d, G_INODE_TABLE) as u64;
            let inr = |b: u64| b >= fdb as u64 && b < blocks_count as u64;
            if !inr(bb as u64)
                || !inr(ib as u64)
                || !inr(it)
                || it + itable_blocks as u64 > blocks_count as u64
            {
                return Err(Error::Corrupt(
                    "group descriptor points outside the file system",
                ));
            }
        }
        let compat_ok = ro_compat & !RO_COMPAT_SUPPORTED == 0;
        Ok(Fs {
            dev,
            sb,
            gdt,
            bs,
            groups,
            bpg,
            ipg,
            inode_size,
            first_ino,
            fdb,
            blocks_count,
            inodes_count,
            gdt_blocks,
            reserved_gdt,
            itable_blocks,
            filetype: incompat & INCOMPAT_FILETYPE != 0,
            sparse_super: ro_compat & RO_COMPAT_SPARSE_SUPER != 0,
            writable: compat_ok,
            now: 0,
            generation: 0x5a11_0000,
            scratch: vec![0u8; bs as usize],
            icache: vec![
                Cached {
                    ino: 0,
                    raw: RawInode([0; 128]),
                    nsec: [0; 3],
                };
                ICACHE
            ],
            names: vec![NAME_EMPTY; NCACHE],
            dir_changes: 0,
            readdir_next: (0, 0, u64::MAX),
            replaced: Vec::new(),
        })
    }

    /// Timestamp (seconds since the epoch) stamped on changes; the library has no clock.
    pub fn set_time(&mut self, now: u32) {
        self.now = now;
    }
    pub fn block_size(&self) -> u32 {
        self.bs
    }
    /// False when the image has read-only-compatible features we do not understand, or the
    /// server made it read-only ([`Self::set_read_only`]).
    pub fn is_writable(&self) -> bool {
        self.writable
    }
    /// Refuses every change from now on (`Error::ReadOnly`): a server that found the file
    /// system inconsistent serves it read-only rather than build on the damage.
    pub fn set_read_only(&mut self) {
        self.writable = false;
    }
    /// Where the generation numbers of new inodes continue from (each new inode takes the next).
    /// A server mounting the same image again (a restart) seeds it afresh, so an inode number
    /// freed and reused meanwhile does not come back with a generation a client still holds.
    pub fn seed_generation(&mut self, seed: u32) {
        self.generation = seed;
    }
    /// Whether `ino` can name a file a client opened: the root or a non-reserved inode number
    /// inside the file system (whether it is in use is another question).
    pub fn is_file_inode(&self, ino: u32) -> bool {
        ino == ROOT_INO || (ino >= self.first_ino && ino <= self.inodes_count)
    }
    pub fn device(&self) -> &D {
        &self.dev
    }
    pub fn into_device(self) -> D {
        self.dev
    }
    /// Writes everything back and flushes the device. Files a rename replaced are released
    /// after that flush (the entries naming their successors are on the disk by then), and
    /// flushed again, so what `flush` returns on is whole.
    pub fn flush(&mut self) -> Result<()> {
        self.dev.flush()?;
        if self.replaced.is_empty() {
            return Ok(());
        }
        for ino in core::mem::take(&mut self.replaced) {
            self.drop_link(ino)?;
        }
        Ok(self.dev.flush()?)
    }
    pub fn root(&self) -> u32 {
        ROOT_INO
    }

    fn writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::ReadOnly)
        }
    }

    // ---- low-level I/O -------------------------------------------------------------------

    pub(crate) fn check_blk(&self, b: u32) -> Result<()> {
        if b < self.fdb || b >= self.blocks_count {
            return Err(Error::Corrupt("block pointer out of range"));
        }
        Ok(())
    }
    fn boff(&self, b: u32) -> u64 {
        b as u64 * self.bs as u64
    }
    pub(crate) fn read_block(&mut self, b: u32, buf: &mut [u8]) -> Result<()> {
        self.check_blk(b)?;
        let off = self.boff(b);
        Ok(self.dev.read_at(off, &mut buf[..self.bs as usize])?)
    }
    fn write_block(&mut self, b: u32, buf: &[u8]) -> Result<()> {
        self.check_blk(b)?;
        let off = self.boff(b);
        Ok(self.dev.write_at(off, &buf[..self.bs as usize])?)
    }
    fn zero_block(&mut self, b: u32) -> Result<()> {
        let z = vec![0u8; self.bs as usize];
        self.write_block(b, &z)
    }

    // ---- superblock and group descriptors ------------------------------------------------

    pub(crate) fn sb_get(&self, off: usize) -> u32 {
        le32(&self.sb, off)
    }
    fn sb_set(&mut self, off: usize, v: u32) {
        put32(&mut self.sb, off, v)
    }
    fn write_sb(&mut self) -> Result<()> {
        Ok(self.dev.write_at(SB_OFFSET, &self.sb)?)
    }
    pub(crate) fn gd32(&self, g: u32, field: usize) -> u32 {
        le32(&self.gdt, g as usize * DESC_SIZE + field)
    }
    pub(crate) fn gd16(&self, g: u32, field: usize) -> u16 {
        le16(&self.gdt, g as usize * DESC_SIZE + field)
    }
    fn gd16_set(&mut self, g: u32, field: usize, v: u16) {
        put16(&mut self.gdt, g as usize * DESC_SIZE + field, v)
    }
    fn write_gd(&mut self, g: u32) -> Result<()> {
        let start = g as usize * DESC_SIZE;
        let off = (self.fdb as u64 + 1) * self.bs as u64 + start as u64;
        Ok(self
            .dev
            .write_at(off, &self.gdt[start..start + DESC_SIZE])?)
    }
    pub(crate) fn group_first(&self, g: u32) -> u32 {
        self.fdb + g * self.bpg
    }
    pub(crate) fn group_nblocks(&self, g: u32) -> u32 {
        (self.blocks_count - self.group_first(g)).min(self.bpg)
    }
    pub(crate) fn has_super(&self, g: u32) -> bool {
        if g <= 1 || !self.sparse_super {
            return true;
        }
        for p in [3u32, 5, 7] {
            let mut x = p;
            while x < g {
                x = match x.checked_mul(p) {
                    Some(v) => v,
                    None => break,
                };
            }
            if x == g {
                return true;
            }
        }
        false
    }
    /// Blocks the allocator must never hand out, whatever the bitmap says: superblock and
    /// descriptor copies (including reserved GDT blocks), bitmaps and inode tables.
    pub(crate) fn is_meta(&self, g: u32, b: u32) -> bool {
        let first = self.group_first(g);
        if self.has_super(g) && b >= first && (b - first) <= self.gdt_blocks + self.reserved_gdt {
            return true;
        }
        let it = self.gd32(g, G_INODE_TABLE);
        b == self.gd32(g, G_BLOCK_BITMAP)
            || b == self.gd32(g, G_INODE_BITMAP)
            || (b >= it && (b - it) < self.itable_blocks)
    }

    /// Adjusts a 16-bit group counter and the matching 32-bit superblock counter.
    fn adjust_counts(
        &mut self,
        g: u32,
        gfield: usize,
        sfield: Option<usize>,
        delta: i32,
    ) -> Result<()> {
        let gv = self.gd16(g, gfield) as i32 + delta;
        if !(0..=u16::MAX as i32).contains(&gv) {
            return Err(Error::Corrupt("group counter out of range"));
        }
        self.gd16_set(g, gfield, gv as u16);
        if let Some(sf) = sfield {
            let sv = self.sb_get(sf) as i64 + delta as i64;
            if !(0..=u32::MAX as i64).contains(&sv) {
                return Err(Error::Corrupt("superblock counter out of range"));
            }
            self.sb_set(sf, sv as u32);
        }
        self.write_gd(g)?;
        if sfield.is_some() {
            self.write_sb()?;
        }
        Ok(())
    }

    // ---- allocation ----------------------------------------------------------------------

    /// Allocates one block, preferring `goal` and then the blocks after it.
    fn alloc_block(&mut self, goal: u32) -> Result<u32> {
        if self.sb_get(S_FREE_BLOCKS) == 0 {
            return Err(Error::NoSpace);
        }
        let goal = if goal < self.fdb || goal >= self.blocks_count {
            self.fdb
        } else {
            goal
        };
        let g0 = (goal - self.fdb) / self.bpg;
        let mut bitmap = vec![0u8; self.bs as usize];
        for k in 0..self.groups {
            let g = (g0 + k) % self.groups;
            if self.gd16(g, G_FREE_BLOCKS) == 0 {
                continue;
            }
            let bb = self.gd32(g, G_BLOCK_BITMAP);
            self.read_block(bb, &mut bitmap)?;
            let n = self.group_nblocks(g);
            let first = self.group_first(g);
            let start = if k == 0 { goal - first } else { 0 };
            let found = find_clear(&bitmap, start, n, |i| self.is_meta(g, first + i))
                .or_else(|| find_clear(&bitmap, 0, start, |i| self.is_meta(g, first + i)));
            if let Some(i) = found {
                let byte = (i / 8) as usize;
                let v = bitmap[byte] | 1 << (i % 8);
                self.dev.write_at(self.boff(bb) + byte as u64, &[v])?;
                self.adjust_counts(g, G_FREE_BLOCKS, Some(S_FREE_BLOCKS), -1)?;
                return Ok(first + i);
            }
        }
        Err(Error::NoSpace)
    }

    fn free_block(&mut self, b: u32) -> Result<()> {
        self.check_blk(b)?;
        let g = (b - self.fdb) / self.bpg;
        let i = (b - self.fdb) % self.bpg;
        if self.is_meta(g, b) {
            return Err(Error::Corrupt("file claims a metadata block"));
        }
        let off = self.boff(self.gd32(g, G_BLOCK_BITMAP)) + (i / 8) as u64;
        let mut v = [0u8];
        self.dev.read_at(off, &mut v)?;
        if v[0] & 1 << (i % 8) == 0 {
            return Err(Error::Corrupt("freeing a block that is already free"));
        }
        v[0] &= !(1 << (i % 8));
        self.dev.write_at(off, &v)?;
        self.adjust_counts(g, G_FREE_BLOCKS, Some(S_FREE_BLOCKS), 1)
    }

    fn alloc_inode(&mut self, parent: u32, is_dir: bool) -> Result<u32> {
        if self.sb_get(S_FREE_INODES) == 0 {
            return Err(Error::NoSpace);
        }
        let pg = (parent.saturating_sub(1) / self.ipg).min(self.groups - 1);
        // Files stay with their directory; new directories go to a group with plenty of free
        // inodes and few directories, so that trees spread over the disk.
        let start = if is_dir {
            let avg = self.sb_get(S_FREE_INODES) / self.groups;
            (0..self.groups)
                .filter(|&g| self.gd16(g, G_FREE_INODES) as u32 >= avg.max(1))
                .min_by_key(|&g| (self.gd16(g, G_USED_DIRS), g))
                .unwrap_or(pg)
        } else {
            pg
        };
        let mut bitmap = vec![0u8; self.bs as usize];
        for k in 0..self.groups {
            let g = (start + k) % self.groups;
            if self.gd16(g, G_FREE_INODES) == 0 {
                continue;
            }
            let ib = self.gd32(g, G_INODE_BITMAP);
            self.read_block(ib, &mut bitmap)?;
            let base = g * self.ipg;
            let first_ino = self.first_ino;
            if let Some(i) = find_clear(&bitmap, 0, self.ipg, |i| base + i + 1 < first_ino) {
                let byte = (i / 8) as usize;
                let v = bitmap[byte] | 1 << (i % 8);
                self.dev.write_at(self.boff(ib) + byte as u64, &[v])?;
                if is_dir {
                    self.adjust_counts(g, G_USED_DIRS, None, 1)?;
                }
                self.adjust_counts(g, G_FREE_INODES, Some(S_FREE_INODES), -1)?;
                return Ok(base + i + 1);
            }
        }
        Err(Error::NoSpace)
    }

    fn free_inode_bit(&mut self, ino: u32, is_dir: bool) -> Result<()> {
        self.inode_off(ino)?;
        let g = (ino - 1) / self.ipg;
        let i = (ino - 1) % self.ipg;
        let off = self.boff(self.gd32(g, G_INODE_BITMAP)) + (i / 8) as u64;
        let mut v = [0u8];
        self.dev.read_at(off, &mut v)?;
        if v[0] & 1 << (i % 8) == 0 {
            return Err(Error::Corrupt("freeing an inode that is already free"));
        }
        v[0] &= !(1 << (i % 8));
        self.dev.write_at(off, &v)?;
        if is_dir {
            self.adjust_counts(g, G_USED_DIRS, None, -1)?;
        }
        self.adjust_counts(g, G_FREE_INODES, Some(S_FREE_INODES), 1)
    }

    // ---- inodes --------------------------------------------------------------------------

    pub(crate) fn inode_off(&self, ino: u32) -> Result<u64> {
        if ino == 0 || ino > self.inodes_count {
            return Err(Error::Corrupt("inode number out of range"));
        }
        let g = (ino - 1) / self.ipg;
        let i = (ino - 1) % self.ipg;
        Ok(self.boff(self.gd32(g, G_INODE_TABLE)) + i as u64 * self.inode_size as u64)
    }
    pub(crate) fn read_inode(&mut self, ino: u32) -> Result<RawInode> {
        Ok(self.cached_inode(ino)?.clone())
    }

    /// Inode `ino`, read into the inode cache if it is not there, borrowed from the cache (the
    /// hot paths read fields of it without copying its 128 bytes).
    #[inline]
    fn cached_inode(&mut self, ino: u32) -> Result<&RawInode> {
        let e = ino as usize % ICACHE;
        // Entry 0 being empty has `ino` 0: inode 0 always goes to `inode_off`, which refuses it.
        if ino == 0 || self.icache[e].ino != ino {
            let off = self.inode_off(ino)?;
            self.load_inode(ino, off)?;
        }
        Ok(&self.icache[e].raw)
    }

    /// Reads inode `ino` (at `off`) into the cache, with the nanoseconds of its times from a
    /// large inode's extra fields (read in the same go; 0 without them).
    #[inline(never)]
    fn load_inode(&mut self, ino: u32, off: u64) -> Result<RawInode> {
        let mut b = [0u8; EXTRA_TIMES_END];
        let len = (self.inode_size as usize).min(EXTRA_TIMES_END);
        self.dev.read_at(off, &mut b[..len])?;
        let mut r = RawInode([0; 128]);
        r.0.copy_from_slice(&b[..128]);
        // The extra fields count only when i_extra_isize reaches past them and fits the inode.
        let extra = le16(&b, I_EXTRA_ISIZE) as usize;
        let nsec = if len == EXTRA_TIMES_END
            && I_EXTRA_ISIZE + extra >= EXTRA_TIMES_END
            && extra <= self.inode_size as usize - 128
        {
            TIMES.map(|(_, x)| (le32(&b, x) >> 2).min(999_999_999))
        } else {
            [0; 3]
        };
        self.icache[ino as usize % ICACHE] = Cached {
            ino,
            raw: r.clone(),
            nsec,
        };
        Ok(r)
    }

    /// The nanoseconds of (atime, mtime, ctime) of an inode just read (so cached).
    fn cached_nsec(&self, ino: u32) -> [u32; 3] {
        let e = &self.icache[ino as usize % ICACHE];
        if e.ino == ino {
            e.nsec
        } else {
            [0; 3]
        }
    }

    fn write_inode(&mut self, ino: u32, r: &RawInode) -> Result<()> {
        let off = self.inode_off(ino)?;
        let e = ino as usize % ICACHE;
        // A time we set has whole seconds: a changed time's nanoseconds (non-zero only in a
        // large inode's extra field) are cleared with it, so a stat never pairs new seconds
        // with stale nanoseconds. Every caller read the inode just before, so it is cached.
        let mut nsec = [0u32; 3];
        if self.icache[e].ino == ino {
            nsec = self.icache[e].nsec;
            for (i, (t, x)) in TIMES.into_iter().enumerate() {
                if nsec[i] != 0 && self.icache[e].raw.time(t) != r.time(t) {
                    self.icache[e].ino = 0;
                    self.dev.write_at(off + x as u64, &[0; 4])?;
                    nsec[i] = 0;
                }
            }
        } else if (self.inode_size as usize) >= EXTRA_TIMES_END && {
            self.load_inode(ino, off)?;
            self.cached_nsec(ino) != [0; 3]
        } {
            // Not cached (callers read an inode before writing it, so not expected): which
            // times change is unknown, so all three lose their nanoseconds.
            self.icache[e].ino = 0;
            for (_, x) in TIMES {
                self.dev.write_at(off + x as u64, &[0; 4])?;
            }
        }
        // Written to the device first: if that fails, the cache must not claim otherwise.
        self.icache[e].ino = 0;
        self.dev.write_at(off, &r.0)?;
        self.icache[e] = Cached {
            ino,
            raw: r.clone(),
            nsec,
        };
        Ok(())
    }
    /// Reads an inode that a directory entry or caller refers to: it must be in use.
    fn live_inode(&mut self, ino: u32) -> Result<RawInode> {
        let r = self.read_inode(ino)?;
        if r.links() == 0 || r.mode() == 0 {
            return Err(Error::Corrupt("reference to an unused inode"));
        }
        Ok(r)
    }

    /// Inodes whose i_block holds block pointers (not a device number or a fast symlink).
    pub(crate) fn has_block_map(&self, r: &RawInode) -> bool {
        match FileKind::from_mode(r.mode()) {
            FileKind::Regular | FileKind::Dir => true,
            FileKind::Symlink => !self.is_fast_symlink(r),
            _ => false,
        }
    }
    pub(crate) fn is_fast_symlink(&self, r: &RawInode) -> bool {
        let acl = if r.file_acl() != 0 { self.bs / 512 } else { 0 };
        r.sectors() == acl
    }
    fn check_mapping(&self, r: &RawInode) -> Result<()> {
        if r.flags() & (EXTENTS_FL | INLINE_DATA_FL) != 0 {
            return Err(Error::Unsupported("extent-mapped or inline-data inode"));
        }
        if r.flags() & HUGE_FILE_FL != 0 {
            return Err(Error::Unsupported("huge_file inode"));
        }
        Ok(())
    }
    pub(crate) fn ptrs(&self) -> u64 {
        self.bs as u64 / 4
    }
    /// Largest number of logical blocks the four-level map can address.
    pub(crate) fn max_lblocks(&self) -> u64 {
        let p = self.ptrs();
        12 + p + p * p + p * p * p
    }
    fn max_size(&self) -> u64 {
        if self.sb_get(S_REV_LEVEL) == 0 {
            return (1 << 31) - 1;
        }
        // i_blocks counts 512-byte sectors in 32 bits, which bounds the file as well.
        (self.max_lblocks() * self.bs as u64).min((1u64 << 32) * 512 - self.bs as u64)
    }

    fn block_path(&self, lblk: u64) -> Result<(usize, [u32; 3], usize)> {
        let p = self.ptrs();
        if lblk < 12 {
            return Ok((lblk as usize, [0; 3], 0));
        }
        let l = lblk - 12;
        if l < p {
            return Ok((12, [l as u32, 0, 0], 1));
        }
        let l = l - p;
        if l < p * p {
            return Ok((13, [(l / p) as u32, (l % p) as u32, 0], 2));
        }
        let l = l - p * p;
        if l < p * p * p {
            return Ok((
                14,
                [(l / (p * p)) as u32, ((l / p) % p) as u32, (l % p) as u32],
                3,
            ));
        }
        Err(Error::FileTooLarge)
    }
    fn read_ptr(&mut self, b: u32, idx: u32) -> Result<u32> {
        self.check_blk(b)?;
        let mut v = [0u8; 4];
        self.dev.read_at(self.boff(b) + idx as u64 * 4, &mut v)?;
        Ok(u32::from_le_bytes(v))
    }
    fn write_ptr(&mut self, b: u32, idx: u32, v: u32) -> Result<()> {
        self.check_blk(b)?;
        Ok(self
            .dev
            .write_at(self.boff(b) + idx as u64 * 4, &v.to_le_bytes())?)
    }
    /// Physical block of logical block `lblk`, 0 for a hole.
    pub(crate) fn bmap(&mut self, r: &RawInode, lblk: u64) -> Result<u32> {
        let (slot, idx, depth) = self.block_path(lblk)?;
        let mut b = r.block(slot);
        for &i in &idx[..depth] {
            if b == 0 {
                return Ok(0);
            }
            b = self.read_ptr(b, i)?;
        }
        if b != 0 {
            self.check_blk(b)?;
        }
        Ok(b)
    }
    fn add_sectors(&self, r: &mut RawInode, blocks: i64) -> Result<()> {
        let v = r.sectors() as i64 + blocks * (self.bs / 512) as i64;
        if !(0..=u32::MAX as i64).contains(&v) {
            return Err(Error::Corrupt("i_blocks out of range"));
        }
        r.set_sectors(v as u32);
        Ok(())
    }
    /// Maps `lblk`, allocating missing blocks near `goal`. A newly allocated data block is
    /// filled with `fresh` (a whole block) before anything points at it. Returns the block
    /// and whether it was newly allocated.
    fn bmap_alloc(
        &mut self,
        r: &mut RawInode,
        lblk: u64,
        goal: u32,
        fresh: &[u8],
    ) -> Result<(u32, bool)> {
        let (slot, idx, depth) = self.block_path(lblk)?;
        let mut b = r.block(slot);
        let mut goal = goal;
        let mut new = false;
        if b == 0 {
            b = self.alloc_block(goal)?;
            self.add_sectors(r, 1)?;
            if depth > 0 {
                self.zero_block(b)?;
            } else {
                self.write_block(b, fresh)?;
            }
            r.set_block(slot, b);
            new = true;
        } else {
            self.check_blk(b)?;
        }
        for (d, &i) in idx[..depth].iter().enumerate() {
            let parent = b;
            b = self.read_ptr(parent, i)?;
            new = false;
            if b == 0 {
                goal = goal.max(parent + 1);
                b = self.alloc_block(goal)?;
                self.add_sectors(r, 1)?;
                if d + 1 < depth {
                    self.zero_block(b)?;
                } else {
                    self.write_block(b, fresh)?;
                }
                self.write_ptr(parent, i, b)?;
                new = true;
            } else {
                self.check_blk(b)?;
            }
        }
        Ok((b, new))
    }

    /// Frees every block at logical index `keep` and beyond, and any indirect block left
    /// mapping nothing.
    fn free_from(&mut self, r: &mut RawInode, keep: u64) -> Result<()> {
        for i in (keep.min(12) as usize)..12 {
            let b = r.block(i);
            if b != 0 {
                r.set_block(i, 0);
                self.free_block(b)?;
                self.add_sectors(r, -1)?;
            }
        }
        let p = self.ptrs();
        let mut base = 12u64;
        let mut cover = p;
        for (slot, level) in [(12usize, 1u32), (13, 2), (14, 3)] {
            let b = r.block(slot);
            if b != 0 && keep < base + cover && self.free_tree(r, b, level, base, keep)? {
                r.set_block(slot, 0);
            }
            base += cover;
            cover *= p;
        }
        Ok(())
    }
    /// Returns true when indirect block `b` itself was freed.
    fn free_tree(
        &mut self,
        r: &mut RawInode,
        b: u32,
        level: u32,
        base: u64,
        keep: u64,
    ) -> Result<bool> {
        let p = self.ptrs();
        let span = p.pow(level - 1);
        let mut buf = vec![0u8; self.bs as usize];
        self.read_block(b, &mut buf)?;
        let mut changed = false;
        for j in 0..p {
            let child_base = base + j * span;
            if child_base + span <= keep {
                continue;
            }
            let c = le32(&buf, j as usize * 4);
            if c == 0 {
                continue;
            }
            let freed = if level == 1 {
                self.free_block(c)?;
                self.add_sectors(r, -1)?;
                true
            } else {
                self.free_tree(r, c, level - 1, child_base, keep)?
            };
            if freed {
                put32(&mut buf, j as usize * 4, 0);
                changed = true;
            }
        }
        if base >= keep {
            self.free_block(b)?;
            self.add_sectors(r, -1)?;
            Ok(true)
        } else {
            if changed {
                self.write_block(b, &buf)?;
            }
            Ok(false)
        }
    }

    // ---- public inode operations ---------------------------------------------------------

    pub fn stat(&mut self, ino: u32) -> Result<Stat> {
        let r = self.cached_inode(ino)?;
        let kind = FileKind::from_mode(r.mode());
        let rdev = if matches!(kind, FileKind::CharDev | FileKind::BlockDev) {
            decode_rdev(r.block(0), r.block(1))
        } else {
            (0, 0)
        };
        Ok(Stat {
            ino,
            kind,
            mode: r.mode(),
            nlink: r.links(),
            uid: r.uid(),
            gid: r.gid(),
            size: r.size(),
            sectors: r.sectors() as u64,
            atime: r.time(I_ATIME),
            mtime: r.time(I_MTIME),
            ctime: r.time(I_CTIME),
            rdev,
            flags: r.flags(),
        })
    }

    /// The attributes beyond [`Stat`]: nanoseconds and generation.
    pub fn stat_more(&mut self, ino: u32) -> Result<StatMore> {
        // Borrowed, not copied: every open asks for the generation (issue 16's reopen key).
        let generation = le32(&self.cached_inode(ino)?.0, I_GENERATION);
        Ok(StatMore {
            nsec: self.cached_nsec(ino),
            generation,
        })
    }

    pub fn statfs(&self) -> StatFs {
        let free = self.sb_get(S_FREE_BLOCKS) as u64;
        StatFs {
            block_size: self.bs,
            blocks: self.blocks_count as u64,
            free_blocks: free,
            avail_blocks: free.saturating_sub(self.sb_get(S_R_BLOCKS_COUNT) as u64),
            inodes: self.inodes_count as u64,
            free_inodes: self.sb_get(S_FREE_INODES) as u64,
            name_max: NAME_MAX as u32,
        }
    }

    /// Reads file data at `off`; returns the bytes read (0 at end of file). Holes read as zeros.
    pub fn read(&mut self, ino: u32, off: u64, buf: &mut [u8]) -> Result<usize> {
        let r = self.live_inode(ino)?;
        match FileKind::from_mode(r.mode()) {
            FileKind::Regular => {}
            FileKind::Dir => return Err(Error::IsDir),
            _ => return Err(Error::Invalid("not a regular file")),
        }
        self.check_mapping(&r)?;
        let size = r.size();
        if size > self.max_size() {
            return Err(Error::Corrupt(
                "file size beyond what the block map can address",
            ));
        }
        if off >= size {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        let bs = self.bs as u64;
        let mut done = 0usize;
        while done < n {
            let pos = off + done as u64;
            let boff = (pos % bs) as usize;
            let chunk = (bs as usize - boff).min(n - done);
            let b = self.bmap(&r, pos / bs)?;
            let dst = &mut buf[done..done + chunk];
            if b == 0 {
                dst.fill(0);
            } else {
                self.dev.read_at(self.boff(b) + boff as u64, dst)?;
            }
            done += chunk;
        }
        Ok(n)
    }

    /// Physical block holding logical block `lblk` of a regular file or directory (0 = hole).
    pub fn block_of(&mut self, ino: u32, lblk: u64) -> Result<u32> {
        let r = self.live_inode(ino)?;
        if !self.has_block_map(&r) {
            return Err(Error::Invalid("inode has no block map"));
        }
        self.check_mapping(&r)?;
        self.bmap(&r, lblk)
    }

    /// Reads a whole regular file (bounded by its size, which must fit in memory).
    pub fn read_all(&mut self, ino: u32) -> Result<Vec<u8>> {
        let st = self.stat(ino)?;
        if st.size > self.dev.size().saturating_mul(64) || st.size > isize::MAX as u64 / 2 {
            return Err(Error::FileTooLarge);
        }
        let mut v = vec![0u8; st.size as usize];
        let n = self.read(ino, 0, &mut v)?;
        v.truncate(n);
        Ok(v)
    }

    fn grow_check(&mut self, new_size: u64) -> Result<()> {
        if new_size > self.max_size() {
            return Err(Error::FileTooLarge);
        }
        if new_size > i32::MAX as u64
            && self.sb_get(S_FEATURE_RO_COMPAT) & RO_COMPAT_LARGE_FILE == 0
        {
            let v = self.sb_get(S_FEATURE_RO_COMPAT) | RO_COMPAT_LARGE_FILE;
            self.sb_set(S_FEATURE_RO_COMPAT, v);
            self.write_sb()?;
        }
        Ok(())
    }

    /// Writes `data` at `off`, allocating blocks near the previous block of the file (or the
    /// inode's group) so sequential writes stay contiguous.
    pub fn write(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize> {
        self.writable()?;
        // As `live_inode`, with one copy of the inode (the hot path of every write).
        let c = self.cached_inode(ino)?;
        if c.links() == 0 || c.mode() == 0 {
            return Err(Error::Corrupt("reference to an unused inode"));
        }
        let mut r = c.clone();
        match FileKind::from_mode(r.mode()) {
            FileKind::Regular => {}
            FileKind::Dir => return Err(Error::IsDir),
            _ => return Err(Error::Invalid("not a regular file")),
        }
        self.check_mapping(&r)?;
        let end = off
            .checked_add(data.len() as u64)
            .ok_or(Error::FileTooLarge)?;
        if end > r.size() {
            self.grow_check(end)?;
        }
        let bs = self.bs as u64;
        let mut goal = self.group_first((ino - 1) / self.ipg);
        // The first contents of newly allocated blocks (made only when one is needed: a rewrite
        // of allocated blocks goes straight to the device).
        let mut fresh: Vec<u8> = Vec::new();
        let mut done = 0usize;
        // Whether a block was allocated (the inode's map and block count changed).
        let mut allocated = false;
        let result = (|| -> Result<()> {
            while done < data.len() {
                let pos = off + done as u64;
                let lblk = pos / bs;
                let boff = (pos % bs) as usize;
                let chunk = (bs as usize - boff).min(data.len() - done);
                let part = &data[done..done + chunk];
                let existing = self.bmap(&r, lblk)?;
                if existing != 0 {
                    self.dev.write_at(self.boff(existing) + boff as u64, part)?;
                    goal = existing + 1;
                    done += chunk;
                    continue;
                }
                if lblk > 0 {
                    let prev = self.bmap(&r, lblk - 1)?;
                    if prev != 0 {
                        goal = prev + 1;
                    }
                }
                if fresh.is_empty() {
                    fresh = vec![0u8; bs as usize];
                } else {
                    fresh.fill(0);
                }
                fresh[boff..boff + chunk].copy_from_slice(part);
                allocated = true;
                let (b, new) = self.bmap_alloc(&mut r, lblk, goal, &fresh)?;
                if !new {
                    self.dev.write_at(self.boff(b) + boff as u64, part)?;
                }
                goal = b + 1;
                done += chunk;
            }
            Ok(())
        })();
        // Whatever was written (even on a mid-way error such as NoSpace) is recorded.
        let written_end = off + done as u64;
        let mut changed = allocated;
        if written_end > r.size() {
            r.set_size(written_end);
            changed = true;
        }
        if done > 0 && (r.time(I_MTIME) != self.now || r.time(I_CTIME) != self.now) {
            r.set_time(I_MTIME, self.now);
            r.set_time(I_CTIME, self.now);
            changed = true;
        }
        // A rewrite of allocated blocks within the size in the second the times already say
        // changes nothing in the inode (the common case of a program rewriting its file): no
        // inode write. Times keep whole seconds here (`write_inode`), so "unchanged" is exact.
        if changed {
            self.write_inode(ino, &r)?;
        }
        result.map(|_| done)
    }

    /// Sets a regular file's size: shrinking frees blocks and zeros the tail of the last
    /// block, growing leaves a hole.
    pub fn truncate(&mut self, ino: u32, size: u64) -> Result<()> {
        self.writable()?;
        let mut r = self.live_inode(ino)?;
        match FileKind::from_mode(r.mode()) {
            FileKind::Regular => {}
            FileKind::Dir => return Err(Error::IsDir),
            _ => return Err(Error::Invalid("not a regular file")),
        }
        self.check_mapping(&r)?;
        let old = r.size();
        if size > old {
            self.grow_check(size)?;
        } else if size < old {
            let bs = self.bs as u64;
            let keep = size.div_ceil(bs);
            if !size.is_multiple_of(bs) {
                let b = self.bmap(&r, size / bs)?;
                if b != 0 {
                    let z = vec![0u8; (bs - size % bs) as usize];
                    self.dev.write_at(self.boff(b) + size % bs, &z)?;
                }
            }
            // Record the new size first: a crash then leaves only leaked blocks.
            r.set_size(size);
            self.write_inode(ino, &r)?;
            self.free_from(&mut r, keep)?;
        }
        r.set_size(size);
        r.set_time(I_MTIME, self.now);
        r.set_time(I_CTIME, self.now);
        self.write_inode(ino, &r)
    }

    pub fn set_attr(&mut self, ino: u32, a: &SetAttr) -> Result<()> {
        self.writable()?;
        let mut r = self.live_inode(ino)?;
        if let Some(p) = a.perm {
            let m = (r.mode() & S_IFMT) | (p & 0o7777);
            put16(&mut r.0, I_MODE, m);
        }
        if let Some(u) = a.uid {
            r.set_uid(u);
        }
        if let Some(g) = a.gid {
            r.set_gid(g);
        }
        if let Some(t) = a.atime {
            r.set_time(I_ATIME, t);
        }
        if let Some(t) = a.mtime {
            r.set_time(I_MTIME, t);
        }
        r.set_time(I_CTIME, self.now);
        self.write_inode(ino, &r)
    }

    pub fn readlink(&mut self, ino: u32) -> Result<Vec<u8>> {
        let r = self.live_inode(ino)?;
        if !r.is_symlink() {
            return Err(Error::Invalid("not a symbolic link"));
        }
        let size = r.size();
        if self.is_fast_symlink(&r) {
            if size > 60 {
                return Err(Error::Corrupt("fast symlink longer than i_block"));
            }
            return Ok(r.0[I_BLOCK..I_BLOCK + size as usize].to_vec());
        }
        self.check_mapping(&r)?;
        if size >= self.bs as u64 {
            return Err(Error::Corrupt("symlink longer than a block"));
        }
        let b = self.bmap(&r, 0)?;
        if b == 0 {
            return Err(Error::Corrupt("slow symlink without a block"));
        }
        let mut v = vec![0u8; size as usize];
        self.dev.read_at(self.boff(b), &mut v)?;
        Ok(v)
    }

    // ---- directories ---------------------------------------------------------------------

    fn dir_nblocks(&self, r: &RawInode) -> Result<u64> {
        let n = r.size().div_ceil(self.bs as u64);
        if n > self.blocks_count as u64 {
            return Err(Error::Corrupt("directory larger than the file system"));
        }
        Ok(n)
    }

    /// Walks every entry of directory `r` (free ones too), calling `f` with the entry and
    /// its block. `f` may modify the block and return `Some` to stop.
    pub(crate) fn scan_dir<T>(
        &mut self,
        r: &RawInode,
        mut f: impl FnMut(&Slot, &[u8]) -> Option<T>,
    ) -> Result<Option<T>> {
        if !r.is_dir() {
            return Err(Error::NotDir);
        }
        self.check_mapping(r)?;
        let n = self.dir_nblocks(r)?;
        // The scratch block is taken out for the scan (the device borrows `self` meanwhile) and
        // put back whatever the outcome.
        let mut scratch = core::mem::take(&mut self.scratch);
        let out = self.scan_blocks(r, n, &mut scratch, &mut f);
        self.scratch = scratch;
        out
    }

    fn scan_blocks<T>(
        &mut self,
        r: &RawInode,
        n: u64,
        scratch: &mut Vec<u8>,
        f: &mut impl FnMut(&Slot, &[u8]) -> Option<T>,
    ) -> Result<Option<T>> {
        let bs = self.bs as usize;
        if scratch.len() < bs {
            scratch.resize(bs, 0);
        }
        let (filetype, inodes_count) = (self.filetype, self.inodes_count);
        for lblk in 0..n {
            let phys = self.bmap(r, lblk)?;
            if phys == 0 {
                return Err(Error::Corrupt("hole in a directory"));
            }
            self.check_blk(phys)?;
            let off = self.boff(phys);
            let mut res: Result<Option<T>> = Ok(None);
            self.dev.read_with(off, bs, scratch, &mut |buf| {
                res = scan_block(buf, phys, filetype, inodes_count, f);
            })?;
            if let Some(t) = res? {
                return Ok(Some(t));
            }
        }
        Ok(None)
    }

    fn find_entry(&mut self, r: &RawInode, name: &[u8]) -> Result<Option<Slot>> {
        self.scan_dir(r, |s, buf| {
            (s.ino != 0 && &buf[s.off + 8..s.off + 8 + s.name_len] == name).then_some(*s)
        })
    }

    pub fn lookup(&mut self, dir: u32, name: &[u8]) -> Result<u32> {
        let slot = name_slot(dir, name);
        let e = &self.names[slot];
        if e.dir == dir && e.len as usize == name.len() && e.name[..name.len()] == *name {
            return Ok(e.ino);
        }
        let r = self.live_inode(dir)?;
        if !r.is_dir() {
            return Err(Error::NotDir);
        }
        match self.find_entry(&r, name)? {
            Some(s) => {
                if name.len() <= NAME_CACHED_MAX {
                    let mut e = NameEnt {
                        dir,
                        ino: s.ino,
                        len: name.len() as u8,
                        name: [0; NAME_CACHED_MAX],
                    };
                    e.name[..name.len()].copy_from_slice(name);
                    self.names[slot] = e;
                }
                Ok(s.ino)
            }
            None => Err(Error::NotFound),
        }
    }

    /// Empties the name cache: a directory's entries are about to change.
    fn names_forget(&mut self) {
        self.names.fill(NAME_EMPTY);
        self.dir_changes = self.dir_changes.wrapping_add(1);
    }

    /// Hands `f` the live entries of `dir` from byte position `pos` on (0: the start), in
    /// on-disk order, as (inode, kind, name), until it answers false: returns the position of
    /// the entry it refused (where a later call continues), or `None` when it took every entry
    /// to the end. Positions are the entries' byte offsets, as Linux's ext2 uses for `f_pos`.
    /// Each block is read once per call, so listing a directory costs its size once, not once
    /// per entry as [`Fs::readdir`] per entry would.
    pub fn readdir_at(
        &mut self,
        dir: u32,
        pos: u64,
        mut f: impl FnMut(u32, FileKind, &[u8]) -> bool,
    ) -> Result<Option<u64>> {
        let r = self.live_inode(dir)?;
        if !r.is_dir() {
            return Err(Error::NotDir);
        }
        self.check_mapping(&r)?;
        let n = self.dir_nblocks(&r)?;
        let bs = self.bs as usize;
        // Continuing where the last call stopped, with no entry changed since: `pos` is known to
        // be a record boundary, so the walk starts there; any other position is looked for from
        // its block's start (a position from a client is only trusted once found).
        let trusted = self.readdir_next == (dir, pos, self.dir_changes);
        let (filetype, inodes_count) = (self.filetype, self.inodes_count);
        let mut scratch = core::mem::take(&mut self.scratch);
        if scratch.len() < bs {
            scratch.resize(bs, 0);
        }
        let mut lblk = pos / bs as u64;
        let mut start = (pos % bs as u64) as usize;
        let mut from = if trusted { start } else { 0 };
        let out = loop {
            if lblk >= n {
                break Ok(None);
            }
            let phys = match self.bmap(&r, lblk) {
                Ok(0) => break Err(Error::Corrupt("hole in a directory")),
                Ok(p) => p,
                Err(e) => break Err(e),
            };
            if let Err(e) = self.check_blk(phys) {
                break Err(e);
            }
            let off = self.boff(phys);
            let mut refused: Result<Option<usize>> = Ok(None);
            let read = self.dev.read_with(off, bs, &mut scratch, &mut |buf| {
                refused =
                    scan_block_from(buf, from, phys, filetype, inodes_count, &mut |s, buf| {
                        let live = s.ino != 0 && s.off >= start;
                        let name = &buf[s.off + 8..s.off + 8 + s.name_len];
                        (live && !f(s.ino, FileKind::from_dirent_type(s.ftype), name))
                            .then_some(s.off)
                    });
            });
            if let Err(e) = read {
                break Err(e.into());
            }
            match refused {
                Ok(Some(at)) => break Ok(Some(lblk * bs as u64 + at as u64)),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            lblk += 1;
            start = 0;
            from = 0;
        };
        self.scratch = scratch;
        self.readdir_next = match out {
            Ok(Some(at)) => (dir, at, self.dir_changes),
            _ => (0, 0, u64::MAX),
        };
        out
    }

    /// All live entries, `.` and `..` included, in on-disk order.
    pub fn readdir(&mut self, dir: u32) -> Result<Vec<DirEntry>> {
        let r = self.live_inode(dir)?;
        let mut out = Vec::new();
        self.scan_dir(&r, |s, buf| {
            if s.ino != 0 {
                out.push(DirEntry {
                    ino: s.ino,
                    name: buf[s.off + 8..s.off + 8 + s.name_len].to_vec(),
                    kind: FileKind::from_dirent_type(s.ftype),
                });
            }
            None::<()>
        })?;
        Ok(out)
    }

    fn write_dirent(
        &self,
        buf: &mut [u8],
        off: usize,
        ino: u32,
        rec_len: usize,
        name: &[u8],
        kind: FileKind,
    ) {
        put32(buf, off, ino);
        put16(buf, off + 4, rec_len as u16);
        if self.filetype {
            buf[off + 6] = name.len() as u8;
            buf[off + 7] = kind.dirent_type();
        } else {
            put16(buf, off + 6, name.len() as u16);
        }
        buf[off + 8..off + 8 + name.len()].copy_from_slice(name);
    }

    /// Before changing a directory, drop its htree index: the directory stays valid as a
    /// linear one, which e2fsck accepts.
    fn drop_index(&mut self, dir: u32, r: &mut RawInode) -> Result<()> {
        if r.flags() & INDEX_FL != 0 {
            r.set_flags(r.flags() & !INDEX_FL);
            self.write_inode(dir, r)?;
        }
        Ok(())
    }

    fn touch_dir(&mut self, dir: u32, links_delta: i32) -> Result<()> {
        let mut r = self.read_inode(dir)?;
        if links_delta != 0 {
            let l = r.links() as i32 + links_delta;
            if !(0..=u16::MAX as i32).contains(&l) {
                return Err(Error::Corrupt("link count out of range"));
            }
            r.set_links(l as u16);
        }
        r.set_time(I_MTIME, self.now);
        r.set_time(I_CTIME, self.now);
        self.write_inode(dir, &r)
    }

    /// Adds `name -> ino` to `dir`, in the first gap big enough or in a new block.
    fn dir_add(&mut self, dir: u32, name: &[u8], ino: u32, kind: FileKind) -> Result<()> {
        self.names_forget();
        let mut r = self.live_inode(dir)?;
        self.drop_index(dir, &mut r)?;
        let need = rec_len_for(name.len());
        let found = self.scan_dir(&r, |s, _| {
            let used = if s.ino == 0 {
                0
            } else {
                rec_len_for(s.name_len)
            };
            (s.rec_len - used >= need).then_some((*s, used))
        })?;
        if let Some((s, used)) = found {
            let mut buf = vec![0u8; self.bs as usize];
            self.read_block(s.phys, &mut buf)?;
            if used == 0 {
                self.write_dirent(&mut buf, s.off, ino, s.rec_len, name, kind);
            } else {
                put16(&mut buf, s.off + 4, used as u16);
                self.write_dirent(&mut buf, s.off + used, ino, s.rec_len - used, name, kind);
            }
            self.write_block(s.phys, &buf)?;
        } else {
            let n = self.dir_nblocks(&r)?;
            let mut buf = vec![0u8; self.bs as usize];
            self.write_dirent(&mut buf, 0, ino, self.bs as usize, name, kind);
            let goal = if n > 0 {
                self.bmap(&r, n - 1)? + 1
            } else {
                self.group_first((dir - 1) / self.ipg)
            };
            self.bmap_alloc(&mut r, n, goal, &buf)?;
            r.set_size((n + 1) * self.bs as u64);
            self.write_inode(dir, &r)?;
        }
        Ok(())
    }

    /// Removes entry `name` from `dir`, merging its space into the previous entry.
    fn dir_remove(&mut self, dir: u32, name: &[u8]) -> Result<()> {
        self.names_forget();
        let mut r = self.live_inode(dir)?;
        let s = self.find_entry(&r, name)?.ok_or(Error::NotFound)?;
        self.drop_index(dir, &mut r)?;
        let mut buf = vec![0u8; self.bs as usize];
        self.read_block(s.phys, &mut buf)?;
        match s.prev {
            Some(p) => {
                let merged = le16(&buf, p + 4) as usize + s.rec_len;
                put16(&mut buf, p + 4, merged as u16);
            }
            None => put32(&mut buf, s.off, 0),
        }
        self.write_block(s.phys, &buf)
    }

    /// Points an existing entry at a different inode (rename over an existing name).
    fn dir_retarget(&mut self, dir: u32, name: &[u8], ino: u32, kind: FileKind) -> Result<()> {
        self.names_forget();
        let mut r = self.live_inode(dir)?;
        let s = self.find_entry(&r, name)?.ok_or(Error::NotFound)?;
        self.drop_index(dir, &mut r)?;
        let mut buf = vec![0u8; self.bs as usize];
        self.read_block(s.phys, &mut buf)?;
        put32(&mut buf, s.off, ino);
        if self.filetype {
            buf[s.off + 7] = kind.dirent_type();
        }
        self.write_block(s.phys, &buf)
    }

    fn set_dotdot(&mut self, dir: u32, parent: u32) -> Result<()> {
        self.names_forget();
        let r = self.live_inode(dir)?;
        let s = self
            .find_entry(&r, b"..")?
            .ok_or(Error::Corrupt("directory without '..'"))?;
        self.write_ptr_bytes(s.phys, s.off, parent)
    }
    fn write_ptr_bytes(&mut self, b: u32, off: usize, v: u32) -> Result<()> {
        self.check_blk(b)?;
        Ok(self
            .dev
            .write_at(self.boff(b) + off as u64, &v.to_le_bytes())?)
    }

    fn is_empty_dir(&mut self, r: &RawInode) -> Result<bool> {
        let other = self.scan_dir(r, |s, buf| {
            let name = &buf[s.off + 8..s.off + 8 + s.name_len];
            (s.ino != 0 && name != b"." && name != b"..").then_some(())
        })?;
        Ok(other.is_none())
    }

    // ---- namespace operations ------------------------------------------------------------

    fn check_new_name(&mut self, dir: u32, name: &[u8]) -> Result<RawInode> {
        if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
            return Err(Error::Invalid("bad file name"));
        }
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        let r = self.live_inode(dir)?;
        if !r.is_dir() {
            return Err(Error::NotDir);
        }
        if name == b"." || name == b".." || self.find_entry(&r, name)?.is_some() {
            return Err(Error::Exists);
        }
        Ok(r)
    }

    /// Allocates and initialises a new inode (whole on-disk record zeroed first).
    fn new_inode(&mut self, dir: u32, mode: u16, uid: u32, gid: u32) -> Result<(u32, RawInode)> {
        let is_dir = mode & S_IFMT == S_IFDIR;
        let ino = self.alloc_inode(dir, is_dir)?;
        let off = self.inode_off(ino)?;
        let mut whole = vec![0u8; self.inode_size as usize];
        if self.inode_size >= 160 {
            // Room for the extra timestamp fields, as mke2fs and Linux lay them out.
            put16(&mut whole, I_EXTRA_ISIZE, 32);
        }
        // The record is rewritten whole: whatever the cache held for this number is gone.
        self.icache[ino as usize % ICACHE].ino = 0;
        self.dev.write_at(off, &whole)?;
        // Cached as written (all zero, nanoseconds too), so the caller's `write_inode` needs
        // no read.
        self.icache[ino as usize % ICACHE] = Cached {
            ino,
            raw: RawInode([0; 128]),
            nsec: [0; 3],
        };
        let mut r = RawInode([0; 128]);
        put16(&mut r.0, I_MODE, mode);
        r.set_uid(uid);
        r.set_gid(gid);
        for t in [I_ATIME, I_CTIME, I_MTIME] {
            r.set_time(t, self.now);
        }
        self.generation = self.generation.wrapping_add(1);
        put32(&mut r.0, I_GENERATION, self.generation);
        r.set_links(1);
        Ok((ino, r))
    }

    /// Creates a regular file, FIFO, socket or device node.
    #[allow(clippy::too_many_arguments)]
    pub fn mknod(
        &mut self,
        dir: u32,
        name: &[u8],
        kind: FileKind,
        perm: u16,
        uid: u32,
        gid: u32,
        rdev: (u32, u32),
    ) -> Result<u32> {
        self.writable()?;
        if matches!(kind, FileKind::Dir | FileKind::Symlink | FileKind::Unknown) {
            return Err(Error::Invalid("mknod of a directory or symlink"));
        }
        self.check_new_name(dir, name)?;
        let (ino, mut r) = self.new_inode(dir, kind.mode_bits() | (perm & 0o7777), uid, gid)?;
        if matches!(kind, FileKind::CharDev | FileKind::BlockDev) {
            let (b0, b1) = encode_rdev(rdev.0, rdev.1);
            r.set_block(0, b0);
            r.set_block(1, b1);
        }
        self.write_inode(ino, &r)?;
        self.dir_add(dir, name, ino, kind)?;
        self.touch_dir(dir, 0)?;
        Ok(ino)
    }

    pub fn create(&mut self, dir: u32, name: &[u8], perm: u16, uid: u32, gid: u32) -> Result<u32> {
        self.mknod(dir, name, FileKind::Regular, perm, uid, gid, (0, 0))
    }

    pub fn mkdir(&mut self, dir: u32, name: &[u8], perm: u16, uid: u32, gid: u32) -> Result<u32> {
        self.writable()?;
        let pr = self.check_new_name(dir, name)?;
        if pr.links() >= LINK_MAX {
            return Err(Error::TooManyLinks);
        }
        let (ino, mut r) = self.new_inode(dir, S_IFDIR | (perm & 0o7777), uid, gid)?;
        let bs = self.bs as usize;
        let mut buf = vec![0u8; bs];
        self.write_dirent(&mut buf, 0, ino, 12, b".", FileKind::Dir);
        self.write_dirent(&mut buf, 12, dir, bs - 12, b"..", FileKind::Dir);
        r.set_links(2);
        r.set_size(bs as u64);
        let goal = self.group_first((ino - 1) / self.ipg);
        self.bmap_alloc(&mut r, 0, goal, &buf)?;
        self.write_inode(ino, &r)?;
        self.dir_add(dir, name, ino, FileKind::Dir)?;
        self.touch_dir(dir, 1)?;
        Ok(ino)
    }

    pub fn symlink(
        &mut self,
        dir: u32,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<u32> {
        self.writable()?;
        if target.is_empty() || target.contains(&0) {
            return Err(Error::Invalid("bad symlink target"));
        }
        if target.len() >= self.bs as usize {
            return Err(Error::NameTooLong);
        }
        self.check_new_name(dir, name)?;
        let (ino, mut r) = self.new_inode(dir, S_IFLNK | 0o777, uid, gid)?;
        r.set_size(target.len() as u64);
        if target.len() < 60 {
            r.0[I_BLOCK..I_BLOCK + target.len()].copy_from_slice(target);
        } else {
            let mut buf = vec![0u8; self.bs as usize];
            buf[..target.len()].copy_from_slice(target);
            let goal = self.group_first((ino - 1) / self.ipg);
            self.bmap_alloc(&mut r, 0, goal, &buf)?;
        }
        self.write_inode(ino, &r)?;
        self.dir_add(dir, name, ino, FileKind::Symlink)?;
        self.touch_dir(dir, 0)?;
        Ok(ino)
    }

    /// Adds a hard link `dir/name` to `ino` (not a directory).
    pub fn link(&mut self, ino: u32, dir: u32, name: &[u8]) -> Result<()> {
        self.writable()?;
        let mut r = self.live_inode(ino)?;
        if r.is_dir() {
            return Err(Error::IsDir);
        }
        if r.links() >= LINK_MAX {
            return Err(Error::TooManyLinks);
        }
        self.check_new_name(dir, name)?;
        // Count the link before the entry exists: a crash leaves a count e2fsck lowers.
        r.set_links(r.links() + 1);
        r.set_time(I_CTIME, self.now);
        self.write_inode(ino, &r)?;
        self.dir_add(dir, name, ino, FileKind::from_mode(r.mode()))?;
        self.touch_dir(dir, 0)
    }

    /// Drops one link of `ino`; at zero its blocks and the inode itself are released.
    fn drop_link(&mut self, ino: u32) -> Result<()> {
        let mut r = self.live_inode(ino)?;
        let dir = r.is_dir();
        let links = if dir { 0 } else { r.links() - 1 };
        r.set_links(links);
        r.set_time(I_CTIME, self.now);
        if links > 0 {
            return self.write_inode(ino, &r);
        }
        // A small dtime reads as an orphan-list link to e2fsck, so never store one.
        r.set_time(I_DTIME, self.now.max(self.inodes_count + 1));
        self.write_inode(ino, &r)?;
        if self.has_block_map(&r) {
            self.check_mapping(&r)?;
            self.free_from(&mut r, 0)?;
        }
        let acl = r.file_acl();
        if acl != 0 {
            put32(&mut r.0, I_FILE_ACL, 0);
            self.release_xattr_block(acl)?;
            self.add_sectors(&mut r, -1)?;
        }
        r.set_size(0);
        self.write_inode(ino, &r)?;
        self.free_inode_bit(ino, dir)
    }

    /// Extended-attribute blocks are shared by reference count.
    fn release_xattr_block(&mut self, b: u32) -> Result<()> {
        self.check_blk(b)?;
        let mut hdr = [0u8; 8];
        self.dev.read_at(self.boff(b), &mut hdr)?;
        if le32(&hdr, 0) != XATTR_MAGIC {
            return Err(Error::Corrupt("bad extended attribute block"));
        }
        let refs = le32(&hdr, 4);
        if refs > 1 {
            self.write_ptr_bytes(b, 4, refs - 1)
        } else {
            self.free_block(b)
        }
    }

    pub fn unlink(&mut self, dir: u32, name: &[u8]) -> Result<()> {
        self.writable()?;
        let ino = self.lookup(dir, name)?;
        let r = self.live_inode(ino)?;
        if r.is_dir() {
            return Err(Error::IsDir);
        }
        self.dir_remove(dir, name)?;
        self.touch_dir(dir, 0)?;
        self.drop_link(ino)
    }

    pub fn rmdir(&mut self, dir: u32, name: &[u8]) -> Result<()> {
        self.writable()?;
        if name == b"." || name == b".." {
            return Err(Error::Invalid("cannot remove '.' or '..'"));
        }
        let ino = self.lookup(dir, name)?;
        let r = self.live_inode(ino)?;
        if !r.is_dir() {
            return Err(Error::NotDir);
        }
        if !self.is_empty_dir(&r)? {
            return Err(Error::NotEmpty);
        }
        self.dir_remove(dir, name)?;
        self.touch_dir(dir, -1)?;
        self.drop_link(ino)
    }

    /// True when `anc` is `dir` or one of its ancestors (walking `..`).
    fn is_ancestor(&mut self, anc: u32, mut dir: u32) -> Result<bool> {
        for _ in 0..=self.inodes_count.min(1 << 16) {
            if dir == anc {
                return Ok(true);
            }
            if dir == ROOT_INO {
                return Ok(false);
            }
            dir = self.lookup(dir, b"..")?;
        }
        Err(Error::Loop)
    }

    /// Renames `sdir/sname` to `ddir/dname`, replacing a compatible existing target.
    pub fn rename(&mut self, sdir: u32, sname: &[u8], ddir: u32, dname: &[u8]) -> Result<()> {
        self.rename_with(sdir, sname, ddir, dname, false)
    }

    /// [`Fs::rename`]; with `noreplace` an existing target fails with `Exists` instead
    /// (renameat2's RENAME_NOREPLACE), even when it is the source itself, as on Linux.
    pub fn rename_with(
        &mut self,
        sdir: u32,
        sname: &[u8],
        ddir: u32,
        dname: &[u8],
        noreplace: bool,
    ) -> Result<()> {
        self.writable()?;
        for n in [sname, dname] {
            if n == b"." || n == b".." {
                return Err(Error::Invalid("cannot rename '.' or '..'"));
            }
        }
        let src = self.lookup(sdir, sname)?;
        let sr = self.live_inode(src)?;
        let kind = FileKind::from_mode(sr.mode());
        let is_dir = sr.is_dir();
        let existing = match self.lookup(ddir, dname) {
            Ok(i) => Some(i),
            Err(Error::NotFound) => None,
            Err(e) => return Err(e),
        };
        if noreplace && existing.is_some() {
            return Err(Error::Exists);
        }
        if existing == Some(src) {
            return Ok(());
        }
        if is_dir && self.is_ancestor(src, ddir)? {
            return Err(Error::Invalid("cannot move a directory into itself"));
        }
        match existing {
            Some(dst) => {
                let dr = self.live_inode(dst)?;
                match (is_dir, dr.is_dir()) {
                    (true, false) => return Err(Error::NotDir),
                    (false, true) => return Err(Error::IsDir),
                    (true, true) if !self.is_empty_dir(&dr)? => return Err(Error::NotEmpty),
                    _ => {}
                }
                self.dir_retarget(ddir, dname, src, kind)?;
            }
            None => {
                self.check_new_name(ddir, dname)?;
                if is_dir && sdir != ddir && self.live_inode(ddir)?.links() >= LINK_MAX {
                    return Err(Error::TooManyLinks);
                }
                self.dir_add(ddir, dname, src, kind)?;
            }
        }
        self.dir_remove(sdir, sname)?;
        let mut r = self.live_inode(src)?;
        r.set_time(I_CTIME, self.now);
        self.write_inode(src, &r)?;
        if is_dir && sdir != ddir {
            self.set_dotdot(src, ddir)?;
            self.touch_dir(sdir, -1)?;
            // Replacing a directory keeps ddir's count: one subdirectory out, one in.
            self.touch_dir(ddir, if existing.is_some() { 0 } else { 1 })?;
        } else {
            self.touch_dir(sdir, 0)?;
            if is_dir && existing.is_some() {
                // Same parent, directory replaced: the parent lost the victim's '..'.
                self.touch_dir(ddir, -1)?;
            } else if sdir != ddir {
                self.touch_dir(ddir, 0)?;
            }
        }
        if let Some(dst) = existing {
            if !is_dir && self.live_inode(dst)?.links() == 1 {
                // Its last name now names `src`: released after the next flush (`replaced`).
                self.replaced.push(dst);
            } else {
                self.drop_link(dst)?;
            }
        }
        Ok(())
    }

    // ---- paths ---------------------------------------------------------------------------

    /// Resolves an absolute path (leading `/` optional) from the root with the walker every
    /// sawmill file system shares (`sawmill_path`: Linux's limits, at most 40 symlinks). Symlinks
    /// in the middle are followed; the last component is followed only when `follow` is set
    /// (or a `/` comes after it, which also requires a directory).
    pub fn resolve_path(&mut self, path: &[u8], follow: bool) -> Result<u32> {
        let root = (ROOT_INO, attr_of(&self.live_inode(ROOT_INO)?));
        let w = Walker::new().walk(self, root, path, follow, None)?;
        w.node.map(|n| n.0).ok_or(Error::NotFound)
    }

    /// Resolves without following a final symlink (like lstat).
    pub fn resolve(&mut self, path: &[u8]) -> Result<u32> {
        self.resolve_path(path, false)
    }

    /// Splits `path` into its (resolved) parent directory and final name.
    pub fn resolve_parent<'p>(&mut self, path: &'p [u8]) -> Result<(u32, &'p [u8])> {
        let trimmed = {
            let mut p = path;
            while p.len() > 1 && p.last() == Some(&b'/') {
                p = &p[..p.len() - 1];
            }
            p
        };
        let (parent, name) = match trimmed.iter().rposition(|&c| c == b'/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (&b""[..], trimmed),
        };
        if name.is_empty() || name == b"." || name == b".." {
            return Err(Error::Invalid("path has no final name"));
        }
        let dir = self.resolve_path(parent, true)?;
        Ok((dir, name))
    }
}

/// The engine's own paths (the host tool's, `resolve_path`): inodes with their attributes, no
/// permission checks, absolute symlinks from this file system's root.
impl<D: BlockDevice> Tree for Fs<D> {
    type Node = (u32, Attr);
    type Error = Error;
    fn error(e: WalkError) -> Error {
        match e {
            WalkError::NotFound => Error::NotFound,
            WalkError::NotDir => Error::NotDir,
            WalkError::NameTooLong => Error::NameTooLong,
            WalkError::Loop => Error::Loop,
            // No credentials are given, so nothing is refused.
            WalkError::Denied => Error::Invalid("permission denied"),
        }
    }
    fn attr(&self, node: &(u32, Attr)) -> Attr {
        node.1
    }
    fn lookup(
        &mut self,
        dir: &(u32, Attr),
        name: &[u8],
        _at: &[u8],
    ) -> Result<Option<(u32, Attr)>> {
        let ino = match Fs::lookup(self, dir.0, name) {
            Ok(ino) => ino,
            Err(Error::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some((ino, attr_of(&self.live_inode(ino)?))))
    }
    fn read_link(&mut self, link: &(u32, Attr), target: &mut Vec<u8>) -> Result<()> {
        target.extend_from_slice(&self.readlink(link.0)?);
        Ok(())
    }
}

/// What a path walk needs of an inode.
fn attr_of(r: &RawInode) -> Attr {
    Attr {
        mode: r.mode() as u32,
        uid: r.uid(),
        gid: r.gid(),
    }
}

/// First clear bit in `[from, to)` for which `skip` is false.
fn find_clear(bitmap: &[u8], from: u32, to: u32, skip: impl Fn(u32) -> bool) -> Option<u32> {
    let mut i = from;
    while i < to {
        let byte = bitmap[(i / 8) as usize];
        if byte == 0xff && i.is_multiple_of(8) {
            i += 8;
            continue;
        }
        if byte & 1 << (i % 8) == 0 && !skip(i) {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn decode_rdev(b0: u32, b1: u32) -> (u32, u32) {
    if b0 != 0 {
        ((b0 >> 8) & 0xff, b0 & 0xff)
    } else {
        ((b1 & 0xfff00) >> 8, (b1 & 0xff) | ((b1 >> 12) & 0xfff00))
    }
}

fn encode_rdev(major: u32, minor: u32) -> (u32, u32) {
    if major < 256 && minor < 256 {
        (major << 8 | minor, 0)
    } else {
        (0, (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12))
    }
}

/// The entries of one directory block, checked as they are read: `f` sees each (live or not)
/// until it returns something.
fn scan_block<T>(
    buf: &[u8],
    phys: u32,
    filetype: bool,
    inodes_count: u32,
    f: &mut impl FnMut(&Slot, &[u8]) -> Option<T>,
) -> Result<Option<T>> {
    scan_block_from(buf, 0, phys, filetype, inodes_count, f)
}

/// As [`scan_block`], from the record at byte `off` of the block (a record boundary; the records
/// from there on are checked the same way, `prev` of the first is `None`).
fn scan_block_from<T>(
    buf: &[u8],
    mut off: usize,
    phys: u32,
    filetype: bool,
    inodes_count: u32,
    f: &mut impl FnMut(&Slot, &[u8]) -> Option<T>,
) -> Result<Option<T>> {
    let bs = buf.len();
    let mut prev = None;
    while off < bs {
        if off + 8 > bs {
            return Err(Error::Corrupt("directory entry crosses the block end"));
        }
        let ino = le32(buf, off);
        let rec_len = le16(buf, off + 4) as usize;
        let (name_len, ftype) = if filetype {
            (buf[off + 6] as usize, buf[off + 7])
        } else {
            (le16(buf, off + 6) as usize, 0)
        };
        if rec_len < 8 || !rec_len.is_multiple_of(4) || off + rec_len > bs {
            return Err(Error::Corrupt("bad directory entry length"));
        }
        if ino != 0 {
            if 8 + name_len > rec_len || name_len == 0 || name_len > NAME_MAX {
                return Err(Error::Corrupt("bad directory entry name length"));
            }
            if ino > inodes_count {
                return Err(Error::Corrupt("directory entry inode out of range"));
            }
        }
        let slot = Slot {
            phys,
            off,
            prev,
            ino,
            rec_len,
            name_len,
            ftype,
        };
        if let Some(t) = f(&slot, buf) {
            return Ok(Some(t));
        }
        prev = Some(off);
        off += rec_len;
    }
    Ok(None)
}

/// The name cache's slot for `name` in `dir`: a hash of the directory, the length and the
/// name's first and last bytes (cheap, and enough to spread the names of one directory).
#[inline]
fn name_slot(dir: u32, name: &[u8]) -> usize {
    let (first, last) = match name {
        [] => (0, 0),
        [a, .., b] => (*a, *b),
        [a] => (*a, *a),
    };
    let h = (dir as u64) ^ (name.len() as u64) << 20 ^ (first as u64) << 32 ^ (last as u64) << 40;
    (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % NCACHE
}
