//! On-disk constants and little-endian field access.

pub const SB_OFFSET: u64 = 1024;
pub const SB_SIZE: usize = 1024;
pub const MAGIC: u16 = 0xEF53;
pub const ROOT_INO: u32 = 2;
pub const GOOD_OLD_FIRST_INO: u32 = 11;
pub const GOOD_OLD_INODE_SIZE: u32 = 128;
pub const DESC_SIZE: usize = 32;
/// Linux's ext2 limit on i_links_count.
pub const LINK_MAX: u16 = 32000;
pub const NAME_MAX: usize = 255;

// Superblock field offsets.
pub const S_INODES_COUNT: usize = 0;
pub const S_BLOCKS_COUNT: usize = 4;
pub const S_R_BLOCKS_COUNT: usize = 8;
pub const S_FREE_BLOCKS: usize = 12;
pub const S_FREE_INODES: usize = 16;
pub const S_FIRST_DATA_BLOCK: usize = 20;
pub const S_LOG_BLOCK_SIZE: usize = 24;
pub const S_BLOCKS_PER_GROUP: usize = 32;
pub const S_INODES_PER_GROUP: usize = 40;
pub const S_MAGIC: usize = 56;
pub const S_REV_LEVEL: usize = 76;
pub const S_FIRST_INO: usize = 84;
pub const S_INODE_SIZE: usize = 88;
pub const S_FEATURE_COMPAT: usize = 92;
pub const S_FEATURE_INCOMPAT: usize = 96;
pub const S_FEATURE_RO_COMPAT: usize = 100;
pub const S_RESERVED_GDT: usize = 206;

pub const COMPAT_RESIZE_INODE: u32 = 0x10;
pub const INCOMPAT_FILETYPE: u32 = 0x2;
pub const RO_COMPAT_SPARSE_SUPER: u32 = 0x1;
pub const RO_COMPAT_LARGE_FILE: u32 = 0x2;
pub const RO_COMPAT_BTREE_DIR: u32 = 0x4;
pub const RO_COMPAT_SUPPORTED: u32 =
    RO_COMPAT_SPARSE_SUPER | RO_COMPAT_LARGE_FILE | RO_COMPAT_BTREE_DIR;
pub const INCOMPAT_SUPPORTED: u32 = INCOMPAT_FILETYPE;

// Group descriptor field offsets.
pub const G_BLOCK_BITMAP: usize = 0;
pub const G_INODE_BITMAP: usize = 4;
pub const G_INODE_TABLE: usize = 8;
pub const G_FREE_BLOCKS: usize = 12;
pub const G_FREE_INODES: usize = 14;
pub const G_USED_DIRS: usize = 16;

// Inode field offsets.
pub const I_MODE: usize = 0;
pub const I_UID: usize = 2;
pub const I_SIZE: usize = 4;
pub const I_ATIME: usize = 8;
pub const I_CTIME: usize = 12;
pub const I_MTIME: usize = 16;
pub const I_DTIME: usize = 20;
pub const I_GID: usize = 24;
pub const I_LINKS: usize = 26;
pub const I_BLOCKS: usize = 28;
pub const I_FLAGS: usize = 32;
pub const I_BLOCK: usize = 40;
pub const I_GENERATION: usize = 100;
pub const I_FILE_ACL: usize = 104;
pub const I_SIZE_HIGH: usize = 108;
pub const I_UID_HIGH: usize = 120;
pub const I_GID_HIGH: usize = 122;
pub const I_EXTRA_ISIZE: usize = 128;
/// The large inode's extra time fields (nanoseconds << 2 | epoch bits), present when
/// i_extra_isize reaches past them ([`EXTRA_TIMES_END`]).
pub const I_CTIME_EXTRA: usize = 0x84;
pub const I_MTIME_EXTRA: usize = 0x88;
pub const I_ATIME_EXTRA: usize = 0x8c;
pub const EXTRA_TIMES_END: usize = 0x90;

pub const INDEX_FL: u32 = 0x1000;
pub const HUGE_FILE_FL: u32 = 0x40000;
pub const EXTENTS_FL: u32 = 0x80000;
pub const INLINE_DATA_FL: u32 = 0x1000_0000;

pub const S_IFMT: u16 = 0o170000;
pub const S_IFSOCK: u16 = 0o140000;
pub const S_IFLNK: u16 = 0o120000;
pub const S_IFREG: u16 = 0o100000;
pub const S_IFBLK: u16 = 0o060000;
pub const S_IFDIR: u16 = 0o040000;
pub const S_IFCHR: u16 = 0o020000;
pub const S_IFIFO: u16 = 0o010000;

pub const XATTR_MAGIC: u32 = 0xEA02_0000;

#[inline]
pub fn le16(b: &[u8], off: usize) -> u16 {
    match b.get(off..off + 2) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}
#[inline]
pub fn le32(b: &[u8], off: usize) -> u32 {
    match b.get(off..off + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}
#[inline]
pub fn put16(b: &mut [u8], off: usize, v: u16) {
    if let Some(s) = b.get_mut(off..off + 2) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}
#[inline]
pub fn put32(b: &mut [u8], off: usize, v: u32) {
    if let Some(s) = b.get_mut(off..off + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Size a directory entry with a name of `name_len` bytes needs.
#[inline]
pub fn rec_len_for(name_len: usize) -> usize {
    (8 + name_len + 3) & !3
}

/// The first 128 bytes of an inode: everything ext2 itself uses. The accessors are `#[inline]`:
/// a path walk reads a dozen fields per name, each a call into this crate otherwise.
#[derive(Clone)]
pub struct RawInode(pub [u8; 128]);

impl RawInode {
    #[inline]
    pub fn mode(&self) -> u16 {
        le16(&self.0, I_MODE)
    }
    #[inline]
    pub fn kind_bits(&self) -> u16 {
        self.mode() & S_IFMT
    }
    #[inline]
    pub fn is_dir(&self) -> bool {
        self.kind_bits() == S_IFDIR
    }
    #[inline]
    pub fn is_symlink(&self) -> bool {
        self.kind_bits() == S_IFLNK
    }
    #[inline]
    pub fn uid(&self) -> u32 {
        le16(&self.0, I_UID) as u32 | (le16(&self.0, I_UID_HIGH) as u32) << 16
    }
    #[inline]
    pub fn gid(&self) -> u32 {
        le16(&self.0, I_GID) as u32 | (le16(&self.0, I_GID_HIGH) as u32) << 16
    }
    #[inline]
    pub fn set_uid(&mut self, v: u32) {
        put16(&mut self.0, I_UID, v as u16);
        put16(&mut self.0, I_UID_HIGH, (v >> 16) as u16);
    }
    #[inline]
    pub fn set_gid(&mut self, v: u32) {
        put16(&mut self.0, I_GID, v as u16);
        put16(&mut self.0, I_GID_HIGH, (v >> 16) as u16);
    }
    /// Directories keep only 32 bits of size (the high word is i_dir_acl in ext2).
    #[inline]
    pub fn size(&self) -> u64 {
        let lo = le32(&self.0, I_SIZE) as u64;
        if self.is_dir() {
            lo
        } else {
            lo | (le32(&self.0, I_SIZE_HIGH) as u64) << 32
        }
    }
    #[inline]
    pub fn set_size(&mut self, v: u64) {
        put32(&mut self.0, I_SIZE, v as u32);
        if !self.is_dir() {
            put32(&mut self.0, I_SIZE_HIGH, (v >> 32) as u32);
        }
    }
    #[inline]
    pub fn links(&self) -> u16 {
        le16(&self.0, I_LINKS)
    }
    #[inline]
    pub fn set_links(&mut self, v: u16) {
        put16(&mut self.0, I_LINKS, v)
    }
    /// i_blocks in 512-byte sectors.
    #[inline]
    pub fn sectors(&self) -> u32 {
        le32(&self.0, I_BLOCKS)
    }
    #[inline]
    pub fn set_sectors(&mut self, v: u32) {
        put32(&mut self.0, I_BLOCKS, v)
    }
    #[inline]
    pub fn flags(&self) -> u32 {
        le32(&self.0, I_FLAGS)
    }
    #[inline]
    pub fn set_flags(&mut self, v: u32) {
        put32(&mut self.0, I_FLAGS, v)
    }
    #[inline]
    pub fn block(&self, i: usize) -> u32 {
        le32(&self.0, I_BLOCK + 4 * i)
    }
    #[inline]
    pub fn set_block(&mut self, i: usize, v: u32) {
        put32(&mut self.0, I_BLOCK + 4 * i, v)
    }
    #[inline]
    pub fn file_acl(&self) -> u32 {
        le32(&self.0, I_FILE_ACL)
    }
    #[inline]
    pub fn time(&self, off: usize) -> u32 {
        le32(&self.0, off)
    }
    #[inline]
    pub fn set_time(&mut self, off: usize, v: u32) {
        put32(&mut self.0, off, v)
    }
}
