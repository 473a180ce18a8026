//! An in-memory file system for the host tests: directories, files, symlinks, with a walk that
//! resolves `..` physically and follows symlinks as Linux does, and a console that records what
//! was written.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::errno::*;
use crate::Errno;

use super::abi::*;
use super::backend::*;

pub struct Node {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub data: Vec<u8>,
    pub children: BTreeMap<Vec<u8>, u64>,
    pub parent: u64,
    pub nlink: u32,
}

pub struct Mock {
    pub nodes: BTreeMap<u64, Node>,
    next_ino: u64,
    handles: BTreeMap<u64, (u64, bool, bool)>,
    next_handle: u64,
    pub console_out: Vec<u8>,
    pub console_in: Vec<u8>,
    /// The terminal's settings and size.
    pub termios: Termios,
    pub winsize: (u16, u16),
    /// How many calls reached the file system (to check what the library serves alone).
    pub calls: usize,
    /// Pipes' rings and the clock (`pipe_tests.rs`).
    pub pipes: super::pipe_tests::MockPipes,
    /// A network stack's side of sockets (`socket_tests.rs`).
    pub net: super::socket_tests::FakeNet,
    /// The process is in a background group of the terminal's session: a change of the
    /// terminal (or a write under TOSTOP) gets SIGTTOU (ERESTARTSYS).
    pub background: bool,
}

const ROOT: u64 = 2;

struct Walked {
    parent: u64,
    node: Option<u64>,
    name: Vec<u8>,
}

impl Mock {
    pub fn new() -> Mock {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            ROOT,
            Node {
                mode: S_IFDIR | 0o755,
                uid: 0,
                gid: 0,
                data: Vec::new(),
                children: BTreeMap::new(),
                parent: ROOT,
                nlink: 2,
            },
        );
        Mock {
            nodes,
            next_ino: 11,
            handles: BTreeMap::new(),
            next_handle: 100,
            console_out: Vec::new(),
            console_in: Vec::new(),
            termios: Termios::default(),
            winsize: (24, 80),
            calls: 0,
            pipes: Default::default(),
            net: Default::default(),
            background: false,
        }
    }

    pub fn open_handles(&self) -> usize {
        self.handles.len()
    }

    fn add(&mut self, parent: u64, name: &[u8], mode: u32, data: &[u8]) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                mode,
                uid: 0,
                gid: 0,
                data: data.to_vec(),
                children: BTreeMap::new(),
                parent,
                nlink: if mode & S_IFMT == S_IFDIR { 2 } else { 1 },
            },
        );
        self.nodes
            .get_mut(&parent)
            .unwrap()
            .children
            .insert(name.to_vec(), ino);
        ino
    }

    fn is_dir(&self, ino: u64) -> bool {
        self.nodes[&ino].mode & S_IFMT == S_IFDIR
    }

    fn walk(&self, path: &[u8], follow: bool) -> Result<Walked, Errno> {
        let mut todo: Vec<Vec<u8>> = path
            .rsplit(|&c| c == b'/')
            .filter(|c| !c.is_empty())
            .map(|c| c.to_vec())
            .collect();
        let dir_only = path.ends_with(b"/");
        let mut cur = ROOT;
        let mut links = 0;
        let mut last = Walked {
            parent: ROOT,
            node: Some(ROOT),
            name: Vec::new(),
        };
        while let Some(name) = todo.pop() {
            if !self.is_dir(cur) {
                return Err(ENOTDIR);
            }
            if name.len() > 255 {
                return Err(ENAMETOOLONG);
            }
            let next = match &name[..] {
                b"." => Some(cur),
                b".." => Some(self.nodes[&cur].parent),
                _ => self.nodes[&cur].children.get(&name).copied(),
            };
            let Some(next) = next else {
                if todo.is_empty() {
                    return Ok(Walked {
                        parent: cur,
                        node: None,
                        name,
                    });
                }
                return Err(ENOENT);
            };
            let n = &self.nodes[&next];
            if n.mode & S_IFMT == S_IFLNK && (!todo.is_empty() || follow || dir_only) {
                links += 1;
                if links > 40 {
                    return Err(ELOOP);
                }
                if n.data.first() == Some(&b'/') {
                    cur = ROOT;
                }
                todo.extend(
                    n.data
                        .rsplit(|&c| c == b'/')
                        .filter(|c| !c.is_empty())
                        .map(|c| c.to_vec()),
                );
                last = Walked {
                    parent: cur,
                    node: Some(cur),
                    name: Vec::new(),
                };
                continue;
            }
            last = Walked {
                parent: cur,
                node: Some(next),
                name,
            };
            cur = next;
        }
        if dir_only && last.node.is_some_and(|n| !self.is_dir(n)) {
            return Err(ENOTDIR);
        }
        Ok(last)
    }

    fn existing(&self, path: &[u8], follow: bool) -> Result<u64, Errno> {
        self.walk(path, follow)?.node.ok_or(ENOENT)
    }

    fn stat_ino(&self, ino: u64) -> Stat {
        let n = &self.nodes[&ino];
        Stat {
            ino,
            mode: n.mode,
            nlink: n.nlink,
            uid: n.uid,
            gid: n.gid,
            size: n.data.len() as u64,
            ..Stat::default()
        }
    }

    /// Creates what is missing of `path` (a test's fixture): directories for names ending in
    /// `/`, else a file with `data`.
    pub fn put(&mut self, path: &str, data: &[u8]) {
        let mut cur = ROOT;
        let names: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for (i, name) in names.iter().enumerate() {
            let last = i + 1 == names.len();
            let mode = if last && !path.ends_with('/') {
                S_IFREG | 0o644
            } else {
                S_IFDIR | 0o755
            };
            cur = match self.nodes[&cur].children.get(name.as_bytes()) {
                Some(&c) => c,
                None => self.add(cur, name.as_bytes(), mode, if last { data } else { b"" }),
            };
        }
    }

    pub fn put_link(&mut self, path: &str, target: &str) {
        let w = self.walk(path.as_bytes(), false).unwrap();
        self.add(w.parent, &w.name, S_IFLNK | 0o777, target.as_bytes());
    }

    pub fn data(&self, path: &str) -> Vec<u8> {
        let ino = self.existing(path.as_bytes(), true).unwrap();
        self.nodes[&ino].data.clone()
    }

    fn handle(&self, h: u64) -> Result<(u64, bool, bool), Errno> {
        self.handles.get(&h).copied().ok_or(EBADF)
    }

    fn remove(&mut self, path: &[u8], dir: bool) -> Result<(), Errno> {
        let w = self.walk(path, false)?;
        let ino = w.node.ok_or(ENOENT)?;
        if w.name.is_empty() {
            return Err(EBUSY);
        }
        match (dir, self.is_dir(ino)) {
            (true, false) => return Err(ENOTDIR),
            (false, true) => return Err(EISDIR),
            (true, true) if !self.nodes[&ino].children.is_empty() => return Err(ENOTEMPTY),
            _ => {}
        }
        self.nodes
            .get_mut(&w.parent)
            .unwrap()
            .children
            .remove(&w.name);
        Ok(())
    }
}

impl Backend for Mock {
    fn open(&mut self, path: &[u8], how: OpenHow) -> Result<Opened, Errno> {
        self.calls += 1;
        let w = self.walk(path, true)?;
        let ino = match w.node {
            Some(_) if how.create && how.excl => return Err(EEXIST),
            Some(i) => i,
            None if how.create => {
                if path.ends_with(b"/") {
                    return Err(EISDIR);
                }
                self.add(w.parent, &w.name, S_IFREG | how.mode, b"")
            }
            None => return Err(ENOENT),
        };
        if self.is_dir(ino) && (how.write || how.trunc) {
            return Err(EISDIR);
        }
        if how.trunc {
            self.nodes.get_mut(&ino).unwrap().data.clear();
        }
        let h = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(h, (ino, how.read, how.write));
        Ok(Opened::File {
            handle: h,
            mode: None,
        })
    }
    fn close(&mut self, handle: u64) {
        self.handles.remove(&handle);
    }
    fn pread(&mut self, handle: u64, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        self.calls += 1;
        let (ino, r, _) = self.handle(handle)?;
        if !r {
            return Err(EBADF);
        }
        let d = &self.nodes[&ino].data;
        let start = (off as usize).min(d.len());
        let n = buf.len().min(d.len() - start);
        buf[..n].copy_from_slice(&d[start..start + n]);
        Ok(n)
    }
    fn pwrite(&mut self, handle: u64, data: &[u8], off: u64) -> Result<usize, Errno> {
        self.calls += 1;
        let (ino, _, w) = self.handle(handle)?;
        if !w {
            return Err(EBADF);
        }
        let d = &mut self.nodes.get_mut(&ino).unwrap().data;
        let end = off as usize + data.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(data);
        Ok(data.len())
    }
    fn fstat(&mut self, handle: u64) -> Result<Stat, Errno> {
        self.calls += 1;
        let (ino, _, _) = self.handle(handle)?;
        Ok(self.stat_ino(ino))
    }
    fn ftruncate(&mut self, handle: u64, size: u64) -> Result<(), Errno> {
        let (ino, _, _) = self.handle(handle)?;
        self.nodes
            .get_mut(&ino)
            .unwrap()
            .data
            .resize(size as usize, 0);
        Ok(())
    }
    fn fsync(&mut self, handle: u64) -> Result<(), Errno> {
        self.handle(handle).map(|_| ())
    }
    fn fchmod(&mut self, _: u64, _: u32) -> Result<(), Errno> {
        Err(ENOSYS)
    }
    fn fchown(&mut self, _: u64, _: u32, _: u32) -> Result<(), Errno> {
        Err(ENOSYS)
    }
    fn futimens(&mut self, _: u64, _: [TimeSet; 2]) -> Result<(), Errno> {
        Err(ENOSYS)
    }
    fn fstatfs(&mut self, _: u64) -> Result<StatFs, Errno> {
        Err(ENOSYS)
    }
    fn stat(&mut self, path: &[u8], follow: bool) -> Result<Stat, Errno> {
        self.calls += 1;
        let ino = self.existing(path, follow)?;
        Ok(self.stat_ino(ino))
    }
    fn truncate(&mut self, path: &[u8], size: u64) -> Result<(), Errno> {
        let ino = self.existing(path, true)?;
        self.nodes
            .get_mut(&ino)
            .unwrap()
            .data
            .resize(size as usize, 0);
        Ok(())
    }
    fn mkdir(&mut self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let w = self.walk(path, false)?;
        if w.node.is_some() {
            return Err(EEXIST);
        }
        self.add(w.parent, &w.name, S_IFDIR | mode, b"");
        Ok(())
    }
    fn rmdir(&mut self, path: &[u8]) -> Result<(), Errno> {
        self.remove(path, true)
    }
    fn unlink(&mut self, path: &[u8]) -> Result<(), Errno> {
        self.remove(path, false)
    }
    fn rename(&mut self, from: &[u8], to: &[u8], flags: u32) -> Result<(), Errno> {
        let f = self.walk(from, false)?;
        let ino = f.node.ok_or(ENOENT)?;
        let t = self.walk(to, false)?;
        if t.node.is_some() && flags & RENAME_NOREPLACE != 0 {
            return Err(EEXIST);
        }
        self.nodes
            .get_mut(&f.parent)
            .unwrap()
            .children
            .remove(&f.name);
        self.nodes
            .get_mut(&t.parent)
            .unwrap()
            .children
            .insert(t.name, ino);
        self.nodes.get_mut(&ino).unwrap().parent = t.parent;
        Ok(())
    }
    fn link(&mut self, _: &[u8], _: &[u8]) -> Result<(), Errno> {
        Err(ENOSYS)
    }
    fn symlink(&mut self, target: &[u8], path: &[u8]) -> Result<(), Errno> {
        let w = self.walk(path, false)?;
        if w.node.is_some() {
            return Err(EEXIST);
        }
        self.add(w.parent, &w.name, S_IFLNK | 0o777, target);
        Ok(())
    }
    fn readlink(&mut self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        let ino = self.existing(path, false)?;
        let n = &self.nodes[&ino];
        if n.mode & S_IFMT != S_IFLNK {
            return Err(EINVAL);
        }
        Ok(n.data.clone())
    }
    fn chmod(&mut self, path: &[u8], mode: u32) -> Result<(), Errno> {
        let ino = self.existing(path, true)?;
        let n = self.nodes.get_mut(&ino).unwrap();
        n.mode = (n.mode & S_IFMT) | mode;
        Ok(())
    }
    fn chown(&mut self, path: &[u8], uid: u32, gid: u32, follow: bool) -> Result<(), Errno> {
        let ino = self.existing(path, follow)?;
        let n = self.nodes.get_mut(&ino).unwrap();
        if uid != u32::MAX {
            n.uid = uid;
        }
        if gid != u32::MAX {
            n.gid = gid;
        }
        Ok(())
    }
    fn utimens(&mut self, path: &[u8], _: [TimeSet; 2], follow: bool) -> Result<(), Errno> {
        self.existing(path, follow).map(|_| ())
    }
    fn statfs(&mut self, path: &[u8]) -> Result<StatFs, Errno> {
        self.existing(path, true)?;
        Ok(StatFs {
            fs_type: 0xef53,
            block_size: 1024,
            name_max: 255,
            ..StatFs::default()
        })
    }
    fn read_dir(&mut self, path: &[u8]) -> Result<Vec<DirEntry>, Errno> {
        self.calls += 1;
        let ino = self.existing(path, true)?;
        if !self.is_dir(ino) {
            return Err(ENOTDIR);
        }
        let n = &self.nodes[&ino];
        let mut out = Vec::new();
        out.push(DirEntry {
            ino,
            kind: DT_DIR,
            name: b".".to_vec(),
        });
        out.push(DirEntry {
            ino: n.parent,
            kind: DT_DIR,
            name: b"..".to_vec(),
        });
        for (name, &c) in &n.children {
            out.push(DirEntry {
                ino: c,
                kind: dt_of_mode(self.nodes[&c].mode),
                name: name.clone(),
            });
        }
        Ok(out)
    }
    fn sync(&mut self) -> Result<(), Errno> {
        Ok(())
    }
    fn console_write(&mut self, data: &[u8]) -> Result<usize, Errno> {
        let n = data.len().min(480);
        self.console_out.extend_from_slice(&data[..n]);
        Ok(n)
    }
    fn console_read(&mut self, buf: &mut [u8], _nonblock: bool) -> Result<usize, Errno> {
        let line = self
            .console_in
            .iter()
            .position(|&c| c == b'\n')
            .map_or(self.console_in.len(), |i| i + 1);
        let n = buf.len().min(line);
        buf[..n].copy_from_slice(&self.console_in[..n]);
        self.console_in.drain(..n);
        Ok(n)
    }
    fn console_winsize(&mut self) -> Result<(u16, u16), Errno> {
        Ok(self.winsize)
    }
    fn console_pending(&mut self) -> Result<usize, Errno> {
        Ok(self.console_in.len())
    }
    fn console_set_winsize(&mut self, rows: u16, cols: u16) -> Result<(), Errno> {
        self.winsize = (rows, cols);
        Ok(())
    }
    fn tty_may_change(&mut self) -> Result<(), Errno> {
        if self.background {
            Err(crate::signal::ERESTARTSYS)
        } else {
            Ok(())
        }
    }
    fn console_tcgets(&mut self) -> Result<Termios, Errno> {
        Ok(self.termios)
    }
    fn console_tcsets(&mut self, t: &Termios, flush: bool) -> Result<(), Errno> {
        self.termios = *t;
        if flush {
            self.console_in.clear();
        }
        Ok(())
    }
    fn random(&mut self, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(7);
        }
    }
}
