//! Path resolution shared by every file-system server: the VFS (across mounts) and the ext2 PFS
//! (inside one file system, protocol option 3), and the ext2 engine's own `resolve_path`.
//!
//! Three pieces, each with Linux's rules and limits:
//! - [`may`]: the permission check (owner, group or other bits; root's override);
//! - the limits: a name longer than [`NAME_MAX`] bytes or a path longer than [`PATH_MAX`] bytes
//!   (also after a symlink's target is spliced in) is [`Error::NameTooLong`]; more than
//!   [`MAX_LINKS`] symlinks followed in one resolution is [`Error::Loop`];
//! - [`Walker`]: the walk itself, generic over a [`Tree`] the caller implements (look up a name,
//!   read a symlink, and what to do at the two places a file system may have to hand over: `..`
//!   at its root and an absolute symlink).
//!
//! Also [`dirents`]: the packed directory entries of `readdir_many` (issue 17), shared by the
//! servers that pack them and the client library that unpacks them.
//!
//! It touches nothing but the memory it is given: no system calls, no I/O. `no_std` + `alloc`;
//! a [`Walker`] keeps its buffers between walks, so once warm a walk allocates nothing.
#![no_std]

extern crate alloc;

pub mod dirents;

use alloc::vec::Vec;

/// The longest name of one directory entry, in bytes (Linux `NAME_MAX`).
pub const NAME_MAX: usize = 255;
/// The longest path, in bytes, given or after symlink expansion. Linux's `PATH_MAX` (4096)
/// counts the terminating NUL of a C string; our paths carry their length instead, so 4096
/// bytes of path are allowed and 4097 are not.
pub const PATH_MAX: usize = 4096;
/// How many symlinks one resolution may follow (Linux `MAXSYMLINKS`); one more is `Loop`.
pub const MAX_LINKS: u32 = 40;

/// Permission bits asked of [`may`] (as in the `rwx` triplets of a mode).
pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
/// Execute, or search for a directory.
pub const MAY_EXEC: u32 = 1;

/// The file-type bits of a mode (POSIX `st_mode`), the one definition every file-system server
/// and client uses (fs.idl carries modes in this format).
pub const S_IFMT: u32 = 0o170000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFSOCK: u32 = 0o140000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFIFO: u32 = 0o010000;

/// What a permission check needs of an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// The full mode: type and permission bits.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Attr {
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }
}

/// Who is asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
}

/// Whether `cred` may access an inode with `attr` for every bit of `want` ([`MAY_READ`],
/// [`MAY_WRITE`], [`MAY_EXEC`]). As Linux: the owner is judged by the owner bits alone, a member
/// of the group by the group bits, everyone else by the other bits. Root may read and write
/// anything and search any directory, but executes a file only if some execute bit is set.
pub fn may(attr: Attr, cred: Cred, want: u32) -> bool {
    if cred.uid == 0 {
        return want & MAY_EXEC == 0 || attr.is_dir() || attr.mode & 0o111 != 0;
    }
    let bits = if cred.uid == attr.uid {
        attr.mode >> 6
    } else if cred.gid == attr.gid {
        attr.mode >> 3
    } else {
        attr.mode
    };
    bits & want == want
}

/// Why a walk stopped on its own account (the [`Tree`] adds its own reasons, such as a lost
/// file system or "ask the VFS").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A directory on the way does not hold the next name, or a symlink's target is empty.
    NotFound,
    /// No search permission on a directory on the way.
    Denied,
    /// Something on the way (or before a trailing slash) is not a directory.
    NotDir,
    /// A name over [`NAME_MAX`] or a path over [`PATH_MAX`] bytes.
    NameTooLong,
    /// More than [`MAX_LINKS`] symlinks.
    Loop,
}

/// The name space a [`Walker`] walks: the caller's directories and how to look into them.
pub trait Tree {
    /// A position in the tree: whatever the caller needs to look further from it.
    type Node: Clone;
    type Error;
    /// The caller's error for one of the walker's own refusals.
    fn error(e: Error) -> Self::Error;
    /// The attributes of a node (from the last `lookup`, not read again).
    fn attr(&self, node: &Self::Node) -> Attr;
    /// `name` in directory `dir`; `Ok(None)` when there is no such entry. `at` is the canonical
    /// path of the entry (names from the walk's root joined by `/`, no leading `/`) when
    /// [`Tree::track_path`] says so, else empty: where a mount point is, it names it.
    fn lookup(
        &mut self,
        dir: &Self::Node,
        name: &[u8],
        at: &[u8],
    ) -> Result<Option<Self::Node>, Self::Error>;
    /// Appends the target of symlink `link` to `target`.
    fn read_link(&mut self, link: &Self::Node, target: &mut Vec<u8>) -> Result<(), Self::Error>;
    /// `..` at the walk's root. `Ok` stays there (`/..` is `/`); a file system that is mounted
    /// below another one answers its own error, and its caller resolves the path above it.
    fn above_root(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// A symlink with an absolute target. `Ok` continues at the walk's root.
    fn absolute_link(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Whether `lookup` needs `at` (kept only then, so an ordinary walk copies no names).
    fn track_path(&self) -> bool {
        false
    }
}

/// Where a walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked<N> {
    /// The directory holding the last name (the node itself for the root, or when the path ends
    /// in `.` or `..`: then [`Walker::name`] is empty).
    pub parent: N,
    /// The node the path names; `None` when only its last name is missing (a creation may make
    /// it, under `parent`, as [`Walker::name`]).
    pub node: Option<N>,
    /// The path ended in `/`: it must name a directory (`node` is one when present).
    pub dir_only: bool,
}

/// The path walker. It keeps its buffers between walks; a server keeps one.
pub struct Walker<N> {
    /// The directories from the root to where the walk is, each with the length of its
    /// canonical path in `canon`: `..` pops one.
    stack: Vec<(N, usize)>,
    /// The canonical path of the top of `stack` (only when the tree tracks paths).
    canon: Vec<u8>,
    /// The rest of the path once a symlink's target was spliced in (before that, the caller's
    /// path is read in place).
    rest: Vec<u8>,
    /// Where the next `rest` is built.
    spare: Vec<u8>,
    /// The target of the symlink being followed.
    link: Vec<u8>,
    /// The last name of the path walked last.
    name: Vec<u8>,
}

impl<N> Default for Walker<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N> Walker<N> {
    pub const fn new() -> Self {
        Walker {
            stack: Vec::new(),
            canon: Vec::new(),
            rest: Vec::new(),
            spare: Vec::new(),
            link: Vec::new(),
            name: Vec::new(),
        }
    }

    /// The last name of the path of the last walk: the name of the node (or of the missing
    /// entry); empty for the root or a path ending in `.` or `..`.
    pub fn name(&self) -> &[u8] {
        &self.name
    }
}

impl<N: Clone> Walker<N> {
    /// Resolves `path` from `root` in `tree`. Leading slashes are ignored (the walk always starts
    /// at `root`); empty names and `.` are skipped, `..` goes back one directory. Symlinks are
    /// followed where they are met, the last name's only if `follow` is set or a slash comes
    /// after it. With `cred`, search permission is checked on every directory the walk looks
    /// into (`None`: the caller has checked already).
    pub fn walk<T: Tree<Node = N>>(
        &mut self,
        tree: &mut T,
        root: N,
        path: &[u8],
        follow: bool,
        cred: Option<Cred>,
    ) -> Result<Walked<N>, T::Error> {
        self.stack.clear();
        self.canon.clear();
        self.name.clear();
        if path.len() > PATH_MAX {
            return Err(T::error(Error::NameTooLong));
        }
        let track = tree.track_path();
        self.stack.push((root, 0));
        // Until a symlink is followed the path is read where it is; after, from `self.rest`.
        let mut spliced = false;
        let mut pos = 0;
        let mut links = 0;
        loop {
            let src: &[u8] = if spliced { &self.rest } else { path };
            let mut start = pos;
            while start < src.len() && src[start] == b'/' {
                start += 1;
            }
            let top = self.stack.len() - 1;
            if start == src.len() {
                // Only the root, `.` or `..` came last.
                let node = self.stack[top].0.clone();
                let parent = if top > 0 {
                    self.stack[top - 1].0.clone()
                } else {
                    node.clone()
                };
                return Ok(Walked {
                    parent,
                    node: Some(node),
                    dir_only: false,
                });
            }
            let mut end = start;
            while end < src.len() && src[end] != b'/' {
                end += 1;
            }
            let mut after = end;
            while after < src.len() && src[after] == b'/' {
                after += 1;
            }
            let last = after == src.len();
            let trailing = last && end < src.len();
            let comp = &src[start..end];
            pos = end;
            let dir = &self.stack[top].0;
            let a = tree.attr(dir);
            if !a.is_dir() {
                return Err(T::error(Error::NotDir));
            }
            if let Some(c) = cred {
                if !may(a, c, MAY_EXEC) {
                    return Err(T::error(Error::Denied));
                }
            }
            if comp == b"." {
                continue;
            }
            if comp == b".." {
                if top > 0 {
                    self.stack.pop();
                    self.canon.truncate(self.stack[top - 1].1);
                } else {
                    tree.above_root()?;
                }
                continue;
            }
            if comp.len() > NAME_MAX {
                return Err(T::error(Error::NameTooLong));
            }
            let base = self.canon.len();
            if track {
                if base > 0 {
                    self.canon.push(b'/');
                }
                self.canon.extend_from_slice(comp);
            }
            let found = tree.lookup(
                dir,
                comp,
                &self.canon[..if track { self.canon.len() } else { 0 }],
            )?;
            let Some(node) = found else {
                if !last {
                    return Err(T::error(Error::NotFound));
                }
                self.name.extend_from_slice(comp);
                return Ok(Walked {
                    parent: dir.clone(),
                    node: None,
                    dir_only: trailing,
                });
            };
            let na = tree.attr(&node);
            if na.is_symlink() && (!last || follow || trailing) {
                links += 1;
                if links > MAX_LINKS {
                    return Err(T::error(Error::Loop));
                }
                self.canon.truncate(base);
                self.link.clear();
                tree.read_link(&node, &mut self.link)?;
                if self.link.is_empty() {
                    return Err(T::error(Error::NotFound));
                }
                // The target takes the link's place in what is left of the path.
                let rest = &src[end..];
                if self.link.len() + rest.len() > PATH_MAX {
                    return Err(T::error(Error::NameTooLong));
                }
                if self.link[0] == b'/' {
                    tree.absolute_link()?;
                    self.stack.truncate(1);
                    self.canon.clear();
                }
                self.spare.clear();
                self.spare.extend_from_slice(&self.link);
                self.spare.extend_from_slice(rest);
                core::mem::swap(&mut self.rest, &mut self.spare);
                spliced = true;
                pos = 0;
                continue;
            }
            if last {
                if trailing && !na.is_dir() {
                    return Err(T::error(Error::NotDir));
                }
                self.name.extend_from_slice(comp);
                return Ok(Walked {
                    parent: dir.clone(),
                    node: Some(node),
                    dir_only: trailing,
                });
            }
            let len = self.canon.len();
            self.stack.push((node, len));
        }
    }
}
