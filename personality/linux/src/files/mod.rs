//! The file layer of the Linux personality: a process's descriptors, open file descriptions,
//! working directory and umask, and the Linux file system calls over them (`open` to `sendfile`,
//! the list in issue 13), with Linux's flags, structures and errno values.
//!
//! It is plain logic over a [`Backend`] (the file system by absolute path and open handle, the
//! console, random bytes) and the program's memory through a [`User`]; it touches nothing else.
//! The guest implements the backend over `lib/fsclient` and the console server
//! (`src/files_guest.rs`); the host tests over an in-memory tree.
//!
//! - Paths: [`path`] makes every path absolute (working directory, directory descriptors).
//! - Descriptors and descriptions: [`table`] (and how descriptions will be shared after fork).
//! - Devices: `/dev/null`, `/dev/zero`, `/dev/random`, `/dev/urandom` are served here, `/dev/tty`
//!   and `/dev/console` go to the console; recognised by a device inode's number when the file
//!   system reports one, and by their path under `/dev` (so they work on an image without
//!   device inodes).

pub mod abi;
pub mod backend;
pub mod path;
pub mod pipe;
pub mod poll;
pub mod socket;
pub mod table;
pub mod unix;

#[cfg(test)]
mod mock;
#[cfg(test)]
mod pipe_tests;
#[cfg(test)]
mod socket_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unix_tests;

use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::errno::*;
use crate::{handoff, nr, Errno, SysResult, User};

use abi::*;
pub use backend::Backend;
use backend::{major_minor, makedev, OpenHow, Opened, Stat, Termios, TimeSet, Timespec};
use path::Base;
use table::{Description, Device, Object, Shared, Table, MAX_FDS};

/// The most one `read` or `write` moves (Linux's `MAX_RW_COUNT`).
const MAX_RW: u64 = 0x7fff_f000;
/// How much of a transfer goes through the library's memory at once.
const CHUNK: usize = 64 << 10;
/// Most `iovec`s in one `readv`/`writev` (`IOV_MAX`).
const IOV_MAX: u64 = 1024;
/// The link `/proc/self/exe` (what glibc's start-up reads).
const PROC_SELF_EXE: &[u8] = b"/proc/self/exe";
/// The link to the process's own /proc directory.
const PROC_SELF: &[u8] = b"/proc/self";
const PROC_SELF_FD: &[u8] = b"/proc/self/fd/";

/// The devices known by path, with their numbers.
const DEVICES: [(&[u8], Device, u32, u32); 6] = [
    (b"/dev/null", Device::Null, 1, 3),
    (b"/dev/zero", Device::Zero, 1, 5),
    (b"/dev/random", Device::Random, 1, 8),
    (b"/dev/urandom", Device::Random, 1, 9),
    (b"/dev/tty", Device::Console, 5, 0),
    (b"/dev/console", Device::Console, 5, 1),
];

/// The device a device number names; `None` for one the library does not serve.
fn device_of(rdev: u64) -> Option<Device> {
    match major_minor(rdev) {
        (1, 3) => Some(Device::Null),
        (1, 5) => Some(Device::Zero),
        (1, 8) | (1, 9) => Some(Device::Random),
        (5, 0) | (5, 1) | (4, _) => Some(Device::Console),
        _ => None,
    }
}

/// The attributes the library reports for a device it serves by path.
fn device_stat(dev: Device, rdev: u64) -> Stat {
    let perm = if dev == Device::Console { 0o620 } else { 0o666 };
    Stat {
        dev: makedev(0, 5),
        ino: rdev,
        mode: S_IFCHR | perm,
        nlink: 1,
        rdev,
        blocks: Some(0),
        ..Stat::default()
    }
}

fn fd_arg(a: u64) -> i32 {
    a as u32 as i32
}

/// A process's file state.
pub struct Files<B: Backend> {
    pub backend: B,
    table: Table,
    /// The working directory: absolute and canonical.
    cwd: Vec<u8>,
    umask: u32,
    /// The program's path (`/proc/self/exe`).
    exe: Vec<u8>,
    /// The process's pid (`/proc/self`; 0: not known).
    pub pid: u32,
    /// Who the process is (for `access`).
    pub uid: u32,
    pub gid: u32,
}

impl<B: Backend> Files<B> {
    /// A process with descriptors 0, 1 and 2 on the console, in directory `/`.
    pub fn new(backend: B, exe: &[u8]) -> Files<B> {
        let mut f = Files {
            backend,
            table: Table::new(),
            cwd: b"/".to_vec(),
            umask: 0o022,
            exe: exe.to_vec(),
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let console = Rc::new(RefCell::new(Description {
            object: Object::Device(Device::Console),
            offset: 0,
            flags: O_RDWR | O_LARGEFILE,
        }));
        for fd in 0..3 {
            f.table.set(fd, console.clone(), false);
        }
        f
    }

    /// Starts in `dir` (it must be a directory).
    pub fn set_cwd(&mut self, dir: &[u8]) -> Result<(), Errno> {
        let p = self.path_at(AT_FDCWD, dir)?;
        self.cwd = path::canonical_dir(&mut self.backend, &p)?;
        Ok(())
    }

    pub fn cwd(&self) -> &[u8] {
        &self.cwd
    }

    /// Closes the descriptors marked close-on-exec (what `execve` does).
    pub fn exec_closes(&mut self) {
        for d in self.table.take_cloexec() {
            self.release(d);
        }
    }

    /// The umask (for the state a `fork` or `execve` hands on).
    pub fn umask(&self) -> u32 {
        self.umask
    }

    /// The descriptors a `fork` (every one) or an `execve` (those without close-on-exec) hands
    /// on, and their descriptions, each once (descriptors sharing one keep sharing it). A file's
    /// `file` field is its backend handle here: the caller turns it into a capability index.
    pub fn export(&self, exec: bool) -> (Vec<handoff::Description>, Vec<handoff::Descriptor>) {
        let mut shared: Vec<Shared> = Vec::new();
        let mut descs = Vec::new();
        let mut fds = Vec::new();
        for fd in self.table.fds() {
            let cloexec = self.table.cloexec(fd).unwrap_or(false);
            if exec && cloexec {
                continue;
            }
            let Ok(d) = self.table.get(fd) else {
                continue;
            };
            let i = match shared.iter().position(|s| Rc::ptr_eq(s, &d)) {
                Some(i) => i,
                None => {
                    let b = d.borrow();
                    let object = match &b.object {
                        Object::File {
                            handle, path, mode, ..
                        } => handoff::Object::File {
                            file: *handle as u32,
                            open_flags: 0,
                            path: path.clone(),
                            mode: *mode,
                            // Filled in with the open flags (the caller asks the file client).
                            reopen: [0; 3],
                        },
                        Object::Path { path, mode } => handoff::Object::Path {
                            path: path.clone(),
                            mode: *mode,
                        },
                        Object::Device(dev) => handoff::Object::Device(*dev as u8),
                        Object::Pipe { handle, end, .. } => handoff::Object::Pipe {
                            end: *handle as u32,
                            write: *end == sawmill_pipe_api::End::Write,
                        },
                        Object::Socket(socket::Sock { unix: Some(x), .. }) => {
                            let slot = |e: Option<(u64, sawmill_pipe_api::Ring)>| {
                                e.map_or(handoff::NONE, |(h, _)| h as u32)
                            };
                            handoff::Object::Unix {
                                rx: slot(x.rx),
                                tx: slot(x.tx),
                                listener: x.listener.map_or(handoff::NONE, |l| l as u32),
                                kind: x.kind as u8,
                                listening: x.listening,
                                name: x.name.clone(),
                                peer: x.peer.clone(),
                                peer_cred: x.peer_cred,
                            }
                        }
                        Object::Socket(s) => handoff::Object::Socket {
                            sock: s.handle as u32,
                            udp: s.udp,
                            listening: s.listening,
                            bound: s.bound,
                            fused: s.fused.as_ref().and_then(|x| match (x.rx, x.tx) {
                                (Some((r, _)), Some((w, _))) => Some((r as u32, w as u32)),
                                _ => None,
                            }),
                        },
                    };
                    descs.push(handoff::Description {
                        object,
                        offset: b.offset,
                        flags: b.flags,
                        cell: handoff::NONE,
                    });
                    drop(b);
                    shared.push(d.clone());
                    shared.len() - 1
                }
            };
            fds.push(handoff::Descriptor {
                fd,
                cloexec: if exec { false } else { cloexec },
                description: i as u32,
            });
        }
        (descs, fds)
    }

    /// Replaces the descriptor table, working directory and umask with those handed on by a
    /// `fork` or `execve`. `handle` gives the backend handle of a file description (`None`: the
    /// file could not be taken over; its descriptors stay closed). Returns the descriptions
    /// made, in the state's order.
    pub fn adopt(
        &mut self,
        st: &handoff::State,
        handle: &mut dyn FnMut(&mut B, &handoff::Object) -> Option<u64>,
    ) -> Vec<Option<Shared>> {
        for fd in self.table.fds().collect::<Vec<_>>() {
            if let Ok(d) = self.table.remove(fd) {
                self.release(d);
            }
        }
        let backend = &mut self.backend;
        let made: Vec<Option<Shared>> = st
            .descriptions
            .iter()
            .map(|d| {
                let object = match &d.object {
                    handoff::Object::File { path, mode, .. } => Object::File {
                        handle: handle(backend, &d.object)?,
                        path: path.clone(),
                        mode: *mode,
                        entries: None,
                    },
                    handoff::Object::Path { path, mode } => Object::Path {
                        path: path.clone(),
                        mode: *mode,
                    },
                    handoff::Object::Device(n) => Object::Device(Device::from_u8(*n)?),
                    handoff::Object::Pipe { write, .. } => {
                        let handle = handle(backend, &d.object)?;
                        Object::Pipe {
                            handle,
                            end: if *write {
                                sawmill_pipe_api::End::Write
                            } else {
                                sawmill_pipe_api::End::Read
                            },
                            ring: backend.pipe_ring(handle)?,
                        }
                    }
                    handoff::Object::Socket {
                        udp,
                        listening,
                        bound,
                        fused,
                        ..
                    } => Object::Socket(socket::Sock {
                        handle: handle(backend, &d.object)?,
                        udp: *udp,
                        listening: *listening,
                        bound: *bound,
                        // A fused connection's ends were adopted by the caller (the indices
                        // are handles now, as for a local socket's).
                        fused: match fused {
                            Some((r, w)) => Some(Rc::new(unix::Unix {
                                kind: match udp {
                                    true => socket::SOCK_DGRAM,
                                    false => socket::SOCK_STREAM,
                                },
                                rx: Some((*r as u64, backend.pipe_ring(*r as u64)?)),
                                tx: Some((*w as u64, backend.pipe_ring(*w as u64)?)),
                                ..unix::Unix::default()
                            })),
                            None => None,
                        },
                        ..socket::Sock::default()
                    }),
                    // Its capabilities are this image's already (the caller adopted them: the
                    // indices are handles now).
                    handoff::Object::Unix {
                        rx,
                        tx,
                        listener,
                        kind,
                        listening,
                        name,
                        peer,
                        peer_cred,
                    } => {
                        let mut end = |h: u32| {
                            if h == handoff::NONE {
                                return Some(None);
                            }
                            let ring = backend.pipe_ring(h as u64)?;
                            Some(Some((h as u64, ring)))
                        };
                        Object::Socket(socket::Sock {
                            unix: Some(unix::Unix {
                                kind: *kind as u32,
                                rx: end(*rx)?,
                                tx: end(*tx)?,
                                listener: (*listener != handoff::NONE).then_some(*listener as u64),
                                listening: *listening,
                                name: name.clone(),
                                peer: peer.clone(),
                                peer_cred: *peer_cred,
                            }),
                            ..socket::Sock::default()
                        })
                    }
                };
                Some(Rc::new(RefCell::new(Description {
                    object,
                    offset: d.offset,
                    flags: d.flags,
                })))
            })
            .collect();
        for fd in &st.descriptors {
            if let Some(Some(d)) = made.get(fd.description as usize) {
                if (fd.fd as usize) < MAX_FDS {
                    self.table.set(fd.fd as usize, d.clone(), fd.cloexec);
                }
            }
        }
        if !st.cwd.is_empty() {
            self.cwd = st.cwd.clone();
        }
        self.umask = st.umask & 0o777;
        made
    }

    /// The description behind `fd`, if it is open.
    pub fn description(&self, fd: i32) -> Option<Shared> {
        self.table.peek(fd).cloned()
    }

    /// The file-system handle behind `fd` for `mmap`: (handle, readable, writable, size).
    /// `EBADF` for a descriptor not open or `O_PATH`, `ENODEV` for one that is not a file (the
    /// core maps `/dev/zero` as anonymous memory itself), `EACCES` for one not open for reading.
    pub fn map_handle(&mut self, fd: i32) -> Result<(u64, bool, bool, u64), Errno> {
        let d = self.table.get(fd)?;
        let d = d.borrow();
        let handle = match d.object {
            Object::File { handle, .. } => handle,
            Object::Path { .. } => return Err(EBADF),
            Object::Device(_) | Object::Pipe { .. } | Object::Socket(_) => return Err(ENODEV),
        };
        let acc = d.flags & O_ACCMODE;
        if acc == O_WRONLY {
            return Err(EACCES);
        }
        let s = self.backend.fstat(handle)?;
        if s.mode & S_IFMT != S_IFREG {
            return Err(ENODEV);
        }
        Ok((handle, true, acc == O_RDWR, s.size))
    }

    /// Serves `nr` if it is a file call; `None` otherwise.
    pub fn dispatch(&mut self, nr: u64, a: [u64; 6], u: &dyn User) -> Option<SysResult> {
        let fd0 = fd_arg(a[0]);
        Some(match nr {
            nr::READ => self.read(fd0, a[1], a[2], None, u),
            nr::WRITE => self.write(fd0, a[1], a[2], None, u),
            nr::PREAD64 => self.pread(fd0, a[1], a[2], a[3] as i64, u, false),
            nr::PWRITE64 => self.pread(fd0, a[1], a[2], a[3] as i64, u, true),
            nr::READV => self.readv(fd0, a[1], a[2], u, false),
            nr::WRITEV => self.readv(fd0, a[1], a[2], u, true),
            nr::OPEN => self.openat(AT_FDCWD, a[0], a[1] as u32, a[2] as u32, u),
            nr::OPENAT => self.openat(fd_arg(a[0]), a[1], a[2] as u32, a[3] as u32, u),
            nr::CLOSE => self.close(fd0),
            nr::LSEEK => self.lseek(fd0, a[1] as i64, a[2] as u32),
            nr::FSTAT => self.fstatat(fd0, 0, a[1], AT_EMPTY_PATH, u, true),
            nr::STAT => self.fstatat(AT_FDCWD, a[0], a[1], 0, u, false),
            nr::LSTAT => self.fstatat(AT_FDCWD, a[0], a[1], AT_SYMLINK_NOFOLLOW, u, false),
            nr::NEWFSTATAT => self.fstatat(fd0, a[1], a[2], a[3] as u32, u, false),
            nr::STATX => self.statx(fd0, a[1], a[2] as u32, a[3] as u32, a[4], u),
            nr::GETDENTS64 => self.getdents64(fd0, a[1], a[2], u),
            nr::READLINK => self.readlinkat(AT_FDCWD, a[0], a[1], a[2] as i32, u),
            nr::READLINKAT => self.readlinkat(fd0, a[1], a[2], a[3] as i32, u),
            nr::ACCESS => self.faccessat(AT_FDCWD, a[0], a[1] as u32, 0, u),
            nr::FACCESSAT => self.faccessat(fd0, a[1], a[2] as u32, 0, u),
            nr::FACCESSAT2 => self.faccessat(fd0, a[1], a[2] as u32, a[3] as u32, u),
            nr::MKDIR => self.mkdirat(AT_FDCWD, a[0], a[1] as u32, u),
            nr::MKDIRAT => self.mkdirat(fd0, a[1], a[2] as u32, u),
            nr::RMDIR => self.unlinkat(AT_FDCWD, a[0], AT_REMOVEDIR, u),
            nr::UNLINK => self.unlinkat(AT_FDCWD, a[0], 0, u),
            nr::UNLINKAT => self.unlinkat(fd0, a[1], a[2] as u32, u),
            nr::RENAME => self.renameat2(AT_FDCWD, a[0], AT_FDCWD, a[1], 0, u),
            nr::RENAMEAT => self.renameat2(fd0, a[1], fd_arg(a[2]), a[3], 0, u),
            nr::RENAMEAT2 => self.renameat2(fd0, a[1], fd_arg(a[2]), a[3], a[4] as u32, u),
            nr::LINK => self.linkat(AT_FDCWD, a[0], AT_FDCWD, a[1], 0, u),
            nr::LINKAT => self.linkat(fd0, a[1], fd_arg(a[2]), a[3], a[4] as u32, u),
            nr::SYMLINK => self.symlinkat(a[0], AT_FDCWD, a[1], u),
            nr::SYMLINKAT => self.symlinkat(a[0], fd_arg(a[1]), a[2], u),
            nr::CHMOD => self.fchmodat(AT_FDCWD, a[0], a[1] as u32, u),
            nr::FCHMOD => self.fchmod(fd0, a[1] as u32),
            nr::FCHMODAT => self.fchmodat(fd0, a[1], a[2] as u32, u),
            nr::CHOWN => self.fchownat(AT_FDCWD, a[0], a[1] as u32, a[2] as u32, 0, u),
            nr::LCHOWN => self.fchownat(
                AT_FDCWD,
                a[0],
                a[1] as u32,
                a[2] as u32,
                AT_SYMLINK_NOFOLLOW,
                u,
            ),
            nr::FCHOWN => self.fchown(fd0, a[1] as u32, a[2] as u32),
            nr::FCHOWNAT => self.fchownat(fd0, a[1], a[2] as u32, a[3] as u32, a[4] as u32, u),
            nr::UTIMENSAT => self.utimensat(fd0, a[1], a[2], a[3] as u32, u),
            nr::TRUNCATE => self.truncate(a[0], a[1] as i64, u),
            nr::FTRUNCATE => self.ftruncate(fd0, a[1] as i64),
            nr::FSYNC | nr::FDATASYNC => self.fsync(fd0),
            nr::SYNC => {
                let _ = self.backend.sync();
                Ok(0)
            }
            nr::STATFS => self.statfs(None, a[0], a[1], u),
            nr::FSTATFS => self.statfs(Some(fd0), 0, a[1], u),
            nr::CHDIR => self.chdir(a[0], u),
            nr::FCHDIR => self.fchdir(fd0),
            nr::GETCWD => self.getcwd(a[0], a[1], u),
            nr::UMASK => {
                let old = self.umask;
                self.umask = a[0] as u32 & 0o777;
                Ok(old as u64)
            }
            nr::DUP => self.dup(fd0, 0, false),
            nr::DUP2 => self.dup3(fd0, fd_arg(a[1]), 0, true),
            nr::DUP3 => self.dup3(fd0, fd_arg(a[1]), a[2] as u32, false),
            nr::FCNTL => self.fcntl(fd0, a[1] as u32, a[2], u),
            nr::IOCTL => self.ioctl(fd0, a[1] as u32, a[2], u),
            nr::SENDFILE => self.sendfile(fd0, fd_arg(a[1]), a[2], a[3], u),
            nr::PIPE => self.pipe2(a[0], 0, u),
            nr::PIPE2 => self.pipe2(a[0], a[1] as u32, u),
            nr::POLL => self.poll(a[0], a[1], a[2] as i32, u),
            nr::PPOLL => self.ppoll(a[0], a[1], a[2], a[3], a[4], u),
            nr::SELECT => self.select(a[0] as i32, [a[1], a[2], a[3]], a[4], false, u),
            nr::PSELECT6 => self.pselect6(a[0] as i32, [a[1], a[2], a[3]], a[4], a[5], u),
            nr::SOCKET => self.socket(a[0] as u32, a[1] as u32, a[2] as u32),
            nr::SOCKETPAIR => self.socketpair(a[0] as u32, a[1] as u32, a[2] as u32, a[3], u),
            nr::BIND => self.bind(fd0, a[1], a[2], u),
            nr::LISTEN => self.listen(fd0, a[1] as i32),
            nr::ACCEPT => self.accept4(fd0, a[1], a[2], 0, u),
            nr::ACCEPT4 => self.accept4(fd0, a[1], a[2], a[3] as u32, u),
            nr::CONNECT => self.connect(fd0, a[1], a[2], u),
            nr::SHUTDOWN => self.shutdown(fd0, a[1] as u32),
            nr::GETSOCKNAME => self.sockname(fd0, a[1], a[2], false, u),
            nr::GETPEERNAME => self.sockname(fd0, a[1], a[2], true, u),
            nr::SETSOCKOPT => self.setsockopt(fd0, a[1] as u32, a[2] as u32, a[3], a[4], u),
            nr::GETSOCKOPT => self.getsockopt(fd0, a[1] as u32, a[2] as u32, a[3], a[4], u),
            nr::SENDTO => self.sendto(a, u),
            nr::RECVFROM => self.recvfrom(a, u),
            nr::SENDMSG => self.sendmsg(fd0, a[1], a[2] as u32, u),
            nr::SENDMMSG => self.sendmmsg(fd0, a[1], a[2] as u32, a[3] as u32, u),
            nr::RECVMSG => self.recvmsg(fd0, a[1], a[2] as u32, u),
            _ => return None,
        })
    }

    // ---- paths ----

    /// The absolute path for `path` relative to `dirfd`, `/proc/self` made `/proc/PID`.
    fn path_at(&mut self, dirfd: i32, path: &[u8]) -> Result<Vec<u8>, Errno> {
        let p = self.path_at_as_given(dirfd, path)?;
        Ok(path::proc_self(p, self.pid))
    }

    /// The absolute path for `path` relative to `dirfd`.
    fn path_at_as_given(&mut self, dirfd: i32, path: &[u8]) -> Result<Vec<u8>, Errno> {
        if path.first() == Some(&b'/') || dirfd == AT_FDCWD {
            let base = Base {
                path: &self.cwd,
                canonical: true,
            };
            return path::resolve(base, path);
        }
        let d = self.table.get(dirfd)?;
        if matches!(d.borrow().object, Object::Device(_)) || self.mode_of(&d)? & S_IFMT != S_IFDIR {
            return Err(ENOTDIR);
        }
        let d = d.borrow();
        match &d.object {
            Object::File { path: p, .. } | Object::Path { path: p, .. } => path::resolve(
                Base {
                    path: p,
                    canonical: false,
                },
                path,
            ),
            Object::Device(_) | Object::Pipe { .. } | Object::Socket(_) => Err(ENOTDIR),
        }
    }

    /// As [`Self::path_at`] for a path the caller owns: a plain absolute one is kept as it is.
    fn path_at_owned(&mut self, dirfd: i32, path: Vec<u8>) -> Result<Vec<u8>, Errno> {
        if path::is_plain_absolute(&path) {
            return Ok(path::proc_self(path, self.pid));
        }
        self.path_at(dirfd, &path)
    }

    /// Reads the path argument and makes it absolute against `dirfd`.
    fn user_path(&mut self, dirfd: i32, addr: u64, u: &dyn User) -> Result<Vec<u8>, Errno> {
        let p = u.cstr(addr, path::PATH_MAX + 1)?;
        self.path_at_owned(dirfd, p)
    }

    /// The device served at absolute path `p`, if any.
    fn device_path(p: &[u8]) -> Option<(Device, u64)> {
        DEVICES
            .iter()
            .find(|d| d.0 == p)
            .map(|d| (d.1, makedev(d.2, d.3)))
    }

    // ---- descriptions ----

    /// Drops one reference to a description, closing its file when it was the last.
    fn release(&mut self, d: Shared) {
        if let Ok(cell) = Rc::try_unwrap(d) {
            match cell.into_inner().object {
                Object::File { handle, .. } => self.backend.close(handle),
                Object::Pipe { handle, .. } => self.backend.pipe_close(handle),
                Object::Socket(s) if s.unix.is_some() => self.unix_release(&s, s.unix.as_ref()),
                Object::Socket(s) => {
                    if let Some(x) = &s.fused {
                        self.fused_release(x);
                    }
                    self.backend.sock_close(s.handle)
                }
                _ => {}
            }
        }
    }

    /// The mode of a description's object, asking the file system once if needed.
    fn mode_of(&mut self, d: &Shared) -> Result<u32, Errno> {
        let mut d = d.borrow_mut();
        match &mut d.object {
            Object::File { mode: Some(m), .. } => Ok(*m),
            Object::File { handle, mode, .. } => {
                let m = self.backend.fstat(*handle)?.mode;
                *mode = Some(m);
                Ok(m)
            }
            Object::Path { mode, .. } => Ok(*mode),
            Object::Device(_) => Ok(S_IFCHR),
            Object::Pipe { .. } => Ok(S_IFIFO),
            Object::Socket(_) => Ok(socket::S_IFSOCK),
        }
    }

    /// The attributes of a description's object.
    fn stat_of(&mut self, d: &Shared) -> Result<Stat, Errno> {
        let d = d.borrow();
        let mut s = match &d.object {
            Object::File { handle, .. } => self.backend.fstat(*handle)?,
            Object::Path { path, .. } => self.backend.stat(path, true)?,
            Object::Pipe { handle, .. } => self.pipe_stat(*handle),
            Object::Socket(s) => self.sock_stat(s),
            Object::Device(dev) => {
                let rdev = DEVICES
                    .iter()
                    .find(|x| x.1 == *dev)
                    .map_or(0, |x| makedev(x.2, x.3));
                let rdev = if *dev == Device::Console {
                    makedev(5, 1)
                } else {
                    rdev
                };
                device_stat(*dev, rdev)
            }
        };
        if s.dev == 0 {
            s.dev = ROOT_DEV;
        }
        Ok(s)
    }

    /// The attributes at an absolute path; a device the library serves by path has them even
    /// when the file system has no inode for it.
    fn stat_path(&mut self, p: &[u8], follow: bool) -> Result<Stat, Errno> {
        match self.backend.stat(p, follow) {
            Ok(mut s) => {
                if s.dev == 0 {
                    s.dev = ROOT_DEV;
                }
                Ok(s)
            }
            Err(e) if e == ENOENT => match Self::device_path(p) {
                Some((dev, rdev)) => Ok(device_stat(dev, rdev)),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    // ---- open and close ----

    fn openat(&mut self, dirfd: i32, addr: u64, flags: u32, mode: u32, u: &dyn User) -> SysResult {
        // Linux checks the flags before it reads the path (`build_open_flags`): O_TMPFILE
        // needs O_DIRECTORY, no O_CREAT, and write access.
        let tmpfile_bit = O_TMPFILE & !O_DIRECTORY;
        if flags & tmpfile_bit != 0 {
            if flags & (O_TMPFILE | O_CREAT) != O_TMPFILE || flags & O_ACCMODE == O_RDONLY {
                return Err(EINVAL);
            }
        } else if flags & (O_CREAT | O_DIRECTORY) == O_CREAT | O_DIRECTORY {
            return Err(EINVAL);
        }
        let given = u.cstr(addr, path::PATH_MAX + 1)?;
        if flags & O_TMPFILE == O_TMPFILE {
            return Err(EOPNOTSUPP);
        }
        let p = self.path_at_owned(dirfd, given)?;
        let fd = self.table.lowest_free(0)?;
        let cloexec = flags & O_CLOEXEC != 0;
        let mut kept = flags & STATUS_KEPT | O_LARGEFILE;
        let acc = flags & O_ACCMODE;
        let desc = if flags & O_PATH != 0 {
            kept = O_PATH | O_LARGEFILE;
            let s = self.stat_path(&p, flags & O_NOFOLLOW == 0)?;
            if flags & O_DIRECTORY != 0 && s.mode & S_IFMT != S_IFDIR {
                return Err(ENOTDIR);
            }
            Object::Path {
                path: p,
                mode: s.mode,
            }
        } else {
            // The type when a check below asked for it (then the description knows it).
            let mut known = None;
            if flags & (O_NOFOLLOW | O_DIRECTORY) != 0 {
                let r = self.stat_path(&p, flags & O_NOFOLLOW == 0);
                known = r.as_ref().ok().map(|s| s.mode);
                match r {
                    Ok(s) if flags & O_NOFOLLOW != 0 && s.mode & S_IFMT == S_IFLNK => {
                        return Err(ELOOP)
                    }
                    Ok(s) if flags & O_DIRECTORY != 0 && s.mode & S_IFMT != S_IFDIR => {
                        return Err(ENOTDIR)
                    }
                    Ok(_) => {}
                    Err(e) if e == ENOENT && flags & O_CREAT != 0 => {}
                    Err(e) => return Err(e),
                }
            }
            let how = OpenHow {
                read: acc != O_WRONLY,
                write: acc != O_RDONLY,
                create: flags & O_CREAT != 0,
                excl: flags & O_EXCL != 0,
                trunc: flags & O_TRUNC != 0,
                mode: mode & 0o7777 & !self.umask,
            };
            // A device node is served by its numbers (`Opened::Device`); a device path with no
            // node at all (a root image without /dev) by the path, as a devtmpfs would have it.
            let opened = match self.backend.open(&p, how) {
                Err(e) if e == ENOENT => match Self::device_path(&p) {
                    Some(_) if flags & O_DIRECTORY != 0 => return Err(ENOTDIR),
                    Some((_, rdev)) => Opened::Device { rdev },
                    None => return Err(e),
                },
                r => r?,
            };
            match opened {
                Opened::File { handle, mode } => {
                    if flags & O_DIRECTORY != 0 && mode.is_some_and(|m| m & S_IFMT != S_IFDIR) {
                        self.backend.close(handle);
                        return Err(ENOTDIR);
                    }
                    Object::File {
                        handle,
                        path: p,
                        mode: mode.or(known),
                        entries: None,
                    }
                }
                Opened::Device { rdev } => match device_of(rdev) {
                    Some(dev) => Object::Device(dev),
                    None => return Err(ENXIO),
                },
            }
        };
        let d = Rc::new(RefCell::new(Description {
            object: desc,
            offset: 0,
            flags: kept,
        }));
        self.table.set(fd, d, cloexec);
        Ok(fd as u64)
    }

    fn close(&mut self, fd: i32) -> SysResult {
        let d = self.table.remove(fd)?;
        self.release(d);
        Ok(0)
    }

    // ---- reading and writing ----

    /// Checks that a description may be read (`write` false) or written.
    fn check_access(d: &Shared, write: bool) -> Result<(), Errno> {
        let d = d.borrow();
        let acc = d.flags & O_ACCMODE;
        let ok = if write {
            acc == O_WRONLY || acc == O_RDWR
        } else {
            acc == O_RDONLY || acc == O_RDWR
        };
        if d.flags & O_PATH != 0 || !ok {
            return Err(EBADF);
        }
        Ok(())
    }

    /// Reads up to `count` bytes into the program's `buf`: at `at`, or at (and advancing) the
    /// description's offset.
    fn read_desc(
        &mut self,
        d: &Shared,
        buf: u64,
        count: u64,
        at: Option<u64>,
        u: &dyn User,
    ) -> SysResult {
        if Self::pipe_of(d).is_some() {
            return self.pipe_read(d, buf, count, u);
        }
        if Self::sock_of(d).is_some() {
            return self.sock_recv_user(d, buf, count, 0, u).map(|r| r.0);
        }
        let count = count.min(MAX_RW);
        let dev = match &d.borrow().object {
            Object::Device(dev) => Some(*dev),
            _ => None,
        };
        match dev {
            Some(Device::Null) => return Ok(0),
            Some(Device::Zero) | Some(Device::Random) => {
                let mut done = 0u64;
                while done < count {
                    let n = ((count - done) as usize).min(CHUNK);
                    let mut tmp = vec![0u8; n];
                    if dev == Some(Device::Random) {
                        self.backend.random(&mut tmp);
                    }
                    if let Err(e) = u.write(buf + done, &tmp) {
                        return if done == 0 { Err(e) } else { Ok(done) };
                    }
                    done += n as u64;
                }
                return Ok(done);
            }
            Some(Device::Console) => {
                if count == 0 {
                    return Ok(0);
                }
                let backend = &mut self.backend;
                let want = (count as usize).min(CHUNK);
                let nonblock = d.borrow().flags & O_NONBLOCK != 0;
                return u
                    .with_out(buf, want, &mut |dst| backend.console_read(dst, nonblock))
                    .map(|n| n as u64);
            }
            None => {}
        }
        if self.mode_of(d)? & S_IFMT == S_IFDIR {
            return Err(EISDIR);
        }
        let handle = match d.borrow().object {
            Object::File { handle, .. } => handle,
            _ => return Err(EBADF),
        };
        let start = at.unwrap_or(d.borrow().offset);
        let mut done = 0u64;
        while done < count {
            let want = ((count - done) as usize).min(CHUNK);
            let pos = start + done;
            let backend = &mut self.backend;
            let r = u.with_out(buf + done, want, &mut |dst| backend.pread(handle, dst, pos));
            let n = match r {
                Ok(n) => n,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            };
            done += n as u64;
            if n < want {
                break;
            }
        }
        if at.is_none() {
            d.borrow_mut().offset = start + done;
        }
        Ok(done)
    }

    /// Writes up to `count` bytes from the program's `buf`: at `at`, or at (and advancing) the
    /// description's offset; `O_APPEND` writes at the end.
    fn write_desc(
        &mut self,
        d: &Shared,
        buf: u64,
        count: u64,
        at: Option<u64>,
        u: &dyn User,
    ) -> SysResult {
        if Self::pipe_of(d).is_some() {
            return self.pipe_write(d, buf, count, u);
        }
        if Self::sock_of(d).is_some() {
            return self.sock_send_user(d, buf, count, None, 0, u);
        }
        let count = count.min(MAX_RW);
        let (dev, handle, append) = {
            let d = d.borrow();
            let handle = match d.object {
                Object::File { handle, .. } => Some(handle),
                _ => None,
            };
            let dev = match d.object {
                Object::Device(dev) => Some(dev),
                _ => None,
            };
            (dev, handle, d.flags & O_APPEND != 0)
        };
        match dev {
            Some(Device::Null) | Some(Device::Zero) | Some(Device::Random) => return Ok(count),
            Some(Device::Console) => {
                self.tostop_check()?;
                let mut done = 0u64;
                while done < count {
                    let want = ((count - done) as usize).min(CHUNK);
                    let backend = &mut self.backend;
                    let r = u.with_in(buf + done, want, &mut |src| {
                        let mut sent = 0;
                        while sent < src.len() {
                            sent += backend.console_write(&src[sent..])?;
                        }
                        Ok(sent)
                    });
                    match r {
                        Ok(n) => done += n as u64,
                        Err(e) if done == 0 => return Err(e),
                        Err(_) => break,
                    }
                }
                return Ok(done);
            }
            None => {}
        }
        let handle = handle.ok_or(EBADF)?;
        let mut start = at.unwrap_or(d.borrow().offset);
        if append {
            start = self.backend.fstat(handle)?.size;
        }
        if count > 0 && start.checked_add(count).is_none_or(|e| e > i64::MAX as u64) {
            return Err(EFBIG);
        }
        let mut done = 0u64;
        while done < count {
            let want = ((count - done) as usize).min(CHUNK);
            let pos = start + done;
            let backend = &mut self.backend;
            match u.with_in(buf + done, want, &mut |src| {
                backend.pwrite(handle, src, pos)
            }) {
                Ok(n) => {
                    done += n as u64;
                    if n < want {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        if at.is_none() || append {
            d.borrow_mut().offset = start + done;
        }
        Ok(done)
    }

    /// The common `read`: a regular file open for reading whose type is already known, at most
    /// one chunk. The same result as the general path, with one borrow of the description and
    /// no reference taken; anything else is `None` (the general path serves it). Generic over
    /// the memory access so that the guest's fast path (`files_guest::read_fast`) has the range
    /// check and the copy inlined, with no dynamic call.
    #[inline]
    pub fn read_file<U: User + ?Sized>(
        &mut self,
        fd: i32,
        buf: u64,
        count: u64,
        u: &U,
    ) -> Option<SysResult> {
        let mut d = self.table.peek(fd)?.try_borrow_mut().ok()?;
        let acc = d.flags & O_ACCMODE;
        if d.flags & O_PATH != 0 || !(acc == O_RDONLY || acc == O_RDWR) || count > CHUNK as u64 {
            return None;
        }
        let Object::File {
            handle,
            mode: Some(mode),
            ..
        } = d.object
        else {
            return None;
        };
        if mode & S_IFMT != S_IFREG {
            return None;
        }
        let pos = d.offset;
        let backend = &mut self.backend;
        let r = u.with_out(buf, count as usize, &mut |dst| {
            backend.pread(handle, dst, pos)
        });
        Some(r.map(|n| {
            d.offset = pos + n as u64;
            n as u64
        }))
    }

    /// The common `pwrite64`: at most one chunk (and at least a byte) into a file open for
    /// writing without `O_APPEND`, at an offset that cannot overflow. The same result as the
    /// general path (`pread` then `write_desc`), with one borrow of the description and no
    /// reference taken; anything else is `None` (the general path serves it, errors included).
    #[inline]
    pub fn pwrite_file<U: User + ?Sized>(
        &mut self,
        fd: i32,
        buf: u64,
        count: u64,
        off: i64,
        u: &U,
    ) -> Option<SysResult> {
        let d = self.table.peek(fd)?.try_borrow().ok()?;
        let acc = d.flags & O_ACCMODE;
        if d.flags & (O_PATH | O_APPEND) != 0
            || !(acc == O_WRONLY || acc == O_RDWR)
            || count == 0
            || count > CHUNK as u64
            || off < 0
            || (off as u64).checked_add(count)? > i64::MAX as u64
        {
            return None;
        }
        let Object::File { handle, .. } = d.object else {
            return None;
        };
        drop(d);
        let backend = &mut self.backend;
        Some(
            u.with_in(buf, count as usize, &mut |src| {
                backend.pwrite(handle, src, off as u64)
            })
            .map(|n| n as u64),
        )
    }

    fn read(&mut self, fd: i32, buf: u64, count: u64, at: Option<u64>, u: &dyn User) -> SysResult {
        if at.is_none() {
            if let Some(r) = self.read_file(fd, buf, count, u) {
                return r;
            }
        }
        let d = self.table.get(fd)?;
        Self::check_access(&d, false)?;
        if Self::pipe_of(&d).is_some() {
            return self.pipe_read(&d, buf, count, u);
        }
        self.read_desc(&d, buf, count, at, u)
    }

    fn write(&mut self, fd: i32, buf: u64, count: u64, at: Option<u64>, u: &dyn User) -> SysResult {
        let d = self.table.get(fd)?;
        Self::check_access(&d, true)?;
        if Self::pipe_of(&d).is_some() {
            return self.pipe_write(&d, buf, count, u);
        }
        self.write_desc(&d, buf, count, at, u)
    }

    /// `pread64` / `pwrite64`: at an offset, on seekable objects only.
    fn pread(
        &mut self,
        fd: i32,
        buf: u64,
        count: u64,
        off: i64,
        u: &dyn User,
        write: bool,
    ) -> SysResult {
        let d = self.table.get(fd)?;
        Self::check_access(&d, write)?;
        if off < 0 {
            return Err(EINVAL);
        }
        if matches!(
            d.borrow().object,
            Object::Device(Device::Console) | Object::Pipe { .. } | Object::Socket(_)
        ) {
            return Err(ESPIPE);
        }
        if write {
            self.write_desc(&d, buf, count, Some(off as u64), u)
        } else {
            self.read_desc(&d, buf, count, Some(off as u64), u)
        }
    }

    /// `readv` / `writev`: one transfer per `iovec` until one comes up short.
    fn readv(&mut self, fd: i32, iov: u64, cnt: u64, u: &dyn User, write: bool) -> SysResult {
        let d = self.table.get(fd)?;
        Self::check_access(&d, write)?;
        if cnt > IOV_MAX {
            return Err(EINVAL);
        }
        let mut raw = vec![0u8; cnt as usize * 16];
        u.read(iov, &mut raw)?;
        let vecs: Vec<(u64, u64)> = raw
            .chunks(16)
            .map(|c| {
                (
                    u64::from_le_bytes(c[..8].try_into().unwrap()),
                    u64::from_le_bytes(c[8..].try_into().unwrap()),
                )
            })
            .collect();
        let mut total = 0u64;
        for &(_, len) in &vecs {
            total = total
                .checked_add(len)
                .filter(|&t| t <= i64::MAX as u64)
                .ok_or(EINVAL)?;
        }
        if Self::pipe_of(&d).is_some() {
            return self.pipe_vectored(&d, &vecs, write, u);
        }
        let mut done = 0u64;
        for (base, len) in vecs {
            if len == 0 {
                continue;
            }
            let r = if write {
                self.write_desc(&d, base, len, None, u)
            } else {
                self.read_desc(&d, base, len, None, u)
            };
            match r {
                Ok(n) => {
                    done += n;
                    if n < len {
                        break;
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    fn lseek(&mut self, fd: i32, off: i64, whence: u32) -> SysResult {
        let d = self.table.get(fd)?;
        let (handle, is_path) = match &d.borrow().object {
            Object::Device(Device::Console) | Object::Pipe { .. } | Object::Socket(_) => {
                return Err(ESPIPE)
            }
            Object::Device(_) => return Ok(0),
            Object::Path { .. } => (0, true),
            Object::File { handle, .. } => (*handle, false),
        };
        if is_path {
            return Err(EBADF);
        }
        let is_dir = self.mode_of(&d)? & S_IFMT == S_IFDIR;
        let cur = d.borrow().offset as i64;
        let new = match whence {
            SEEK_SET => off,
            SEEK_CUR => cur.checked_add(off).ok_or(EOVERFLOW)?,
            SEEK_END | SEEK_DATA | SEEK_HOLE if is_dir => return Err(EINVAL),
            SEEK_END => {
                let size = self.backend.fstat(handle)?.size as i64;
                size.checked_add(off).ok_or(EOVERFLOW)?
            }
            SEEK_DATA | SEEK_HOLE => {
                // The whole file is data as far as the library knows; the end is the one hole.
                let size = self.backend.fstat(handle)?.size as i64;
                if off < 0 || off >= size {
                    return Err(ENXIO);
                }
                if whence == SEEK_DATA {
                    off
                } else {
                    size
                }
            }
            _ => return Err(EINVAL),
        };
        if new < 0 {
            return Err(EINVAL);
        }
        let mut d = d.borrow_mut();
        d.offset = new as u64;
        if is_dir && new == 0 {
            // Rewinding a directory reads it afresh.
            if let Object::File { entries, .. } = &mut d.object {
                *entries = None;
            }
        }
        Ok(new as u64)
    }

    // ---- attributes ----

    /// The attributes for a (`dirfd`, path, flags) triple of the `*at` calls: `AT_EMPTY_PATH`
    /// with an empty path means `dirfd` itself.
    fn stat_at(
        &mut self,
        dirfd: i32,
        addr: u64,
        flags: u32,
        u: &dyn User,
        no_path: bool,
    ) -> Result<Stat, Errno> {
        if no_path {
            let d = self.table.get(dirfd)?;
            return self.stat_of(&d);
        }
        let given = u.cstr(addr, path::PATH_MAX + 1)?;
        if given.is_empty() && flags & AT_EMPTY_PATH != 0 {
            if dirfd == AT_FDCWD {
                let cwd = self.cwd.clone();
                return self.stat_path(&cwd, true);
            }
            let d = self.table.get(dirfd)?;
            return self.stat_of(&d);
        }
        let p = self.path_at(dirfd, &given)?;
        self.stat_path(&p, flags & AT_SYMLINK_NOFOLLOW == 0)
    }

    fn fstatat(
        &mut self,
        dirfd: i32,
        addr: u64,
        buf: u64,
        flags: u32,
        u: &dyn User,
        no_path: bool,
    ) -> SysResult {
        if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT) != 0 {
            return Err(EINVAL);
        }
        let s = self.stat_at(dirfd, addr, flags, u, no_path)?;
        u.write(buf, &pack_stat(&s))?;
        Ok(0)
    }

    fn statx(
        &mut self,
        dirfd: i32,
        addr: u64,
        flags: u32,
        mask: u32,
        buf: u64,
        u: &dyn User,
    ) -> SysResult {
        let known = AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE;
        if flags & !known != 0 || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE {
            return Err(EINVAL);
        }
        if mask & STATX_RESERVED != 0 {
            return Err(EINVAL);
        }
        let s = self.stat_at(dirfd, addr, flags, u, false)?;
        u.write(buf, &pack_statx(&s))?;
        Ok(0)
    }

    /// `statfs` (a path) or `fstatfs` (`fd` given).
    fn statfs(&mut self, fd: Option<i32>, addr: u64, buf: u64, u: &dyn User) -> SysResult {
        let s = if let Some(fd) = fd {
            let d = self.table.get(fd)?;
            let (handle, p) = match &d.borrow().object {
                Object::File { handle, path, .. } => (Some(*handle), path.clone()),
                Object::Path { path, .. } => (None, path.clone()),
                Object::Device(_) | Object::Pipe { .. } | Object::Socket(_) => {
                    (None, b"/".to_vec())
                }
            };
            match handle.map(|h| self.backend.fstatfs(h)) {
                Some(Err(e)) if e != ENOSYS => return Err(e),
                Some(Ok(s)) => s,
                _ => self.backend.statfs(&p)?,
            }
        } else {
            let p = self.user_path(AT_FDCWD, addr, u)?;
            self.backend.statfs(&p)?
        };
        u.write(buf, &pack_statfs(&s))?;
        Ok(0)
    }

    fn getdents64(&mut self, fd: i32, buf: u64, count: u64, u: &dyn User) -> SysResult {
        let d = self.table.get(fd)?;
        if d.borrow().flags & O_PATH != 0 {
            return Err(EBADF);
        }
        if self.mode_of(&d)? & S_IFMT != S_IFDIR {
            return Err(ENOTDIR);
        }
        let mut db = d.borrow_mut();
        let start = db.offset;
        let Object::File { path, entries, .. } = &mut db.object else {
            return Err(ENOTDIR);
        };
        if entries.is_none() {
            *entries = Some(self.backend.read_dir(path)?);
        }
        let list = entries.as_ref().unwrap();
        let count = count.min(MAX_RW) as usize;
        let mut out = Vec::new();
        let mut i = start as usize;
        while let Some(e) = list.get(i) {
            if out.len() + dirent64_len(e.name.len()) > count {
                break;
            }
            pack_dirent64(&mut out, e.ino, i as u64 + 1, e.kind, &e.name);
            i += 1;
        }
        if out.is_empty() && i < list.len() {
            return Err(EINVAL);
        }
        u.write(buf, &out)?;
        db.offset = i as u64;
        Ok(out.len() as u64)
    }

    fn readlinkat(
        &mut self,
        dirfd: i32,
        addr: u64,
        buf: u64,
        size: i32,
        u: &dyn User,
    ) -> SysResult {
        let given = u.cstr(addr, path::PATH_MAX + 1)?;
        if size <= 0 {
            return Err(EINVAL);
        }
        let p = self.path_at_as_given(dirfd, &given)?;
        if p == PROC_SELF && self.pid != 0 {
            // The link to the own directory: its pid, as Linux's `self` reads.
            let target = alloc::format!("{}", self.pid).into_bytes();
            let n = target.len().min(size as usize);
            u.write(buf, &target[..n])?;
            return Ok(n as u64);
        }
        // The own /proc directory's links are answered here, from the library's own state.
        let own = path::proc_self(PROC_SELF.to_vec(), self.pid);
        let p = path::proc_self(p, self.pid);
        let mine = p.strip_prefix(&own[..]);
        let target = if p == PROC_SELF_EXE || mine == Some(&b"/exe"[..]) {
            self.exe.clone()
        } else if let Some(n) = p
            .strip_prefix(PROC_SELF_FD)
            .or_else(|| mine.and_then(|r| r.strip_prefix(&b"/fd/"[..])))
        {
            let fd = core::str::from_utf8(n)
                .ok()
                .and_then(|s| s.parse::<i32>().ok())
                .ok_or(ENOENT)?;
            let d = self.table.get(fd).map_err(|_| ENOENT)?;
            let d = d.borrow();
            match &d.object {
                Object::File { path, .. } | Object::Path { path, .. } => path.clone(),
                Object::Device(Device::Console) => b"/dev/console".to_vec(),
                Object::Pipe { handle, .. } => alloc::format!("pipe:[{}]", handle).into_bytes(),
                Object::Socket(s) => alloc::format!("socket:[{}]", s.handle).into_bytes(),
                Object::Device(dev) => DEVICES
                    .iter()
                    .find(|x| x.1 == *dev)
                    .map_or(Vec::new(), |x| x.0.to_vec()),
            }
        } else {
            self.backend.readlink(&p)?
        };
        let n = target.len().min(size as usize);
        u.write(buf, &target[..n])?;
        Ok(n as u64)
    }

    fn faccessat(
        &mut self,
        dirfd: i32,
        addr: u64,
        mode: u32,
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        if mode & !(R_OK | W_OK | X_OK) != 0 {
            return Err(EINVAL);
        }
        if flags & !(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
            return Err(EINVAL);
        }
        let s = self.stat_at(dirfd, addr, flags, u, false)?;
        if mode == F_OK {
            return Ok(0);
        }
        // R_OK, W_OK and X_OK are the rwx bits `may` asks for.
        let attr = sawmill_path::Attr {
            mode: s.mode,
            uid: s.uid,
            gid: s.gid,
        };
        let cred = sawmill_path::Cred {
            uid: self.uid,
            gid: self.gid,
        };
        if sawmill_path::may(attr, cred, mode) {
            Ok(0)
        } else {
            Err(EACCES)
        }
    }

    // ---- the name space ----

    fn mkdirat(&mut self, dirfd: i32, addr: u64, mode: u32, u: &dyn User) -> SysResult {
        let p = self.user_path(dirfd, addr, u)?;
        if Self::device_path(&p).is_some() {
            return Err(EEXIST);
        }
        let p = strip_slash(p);
        self.backend.mkdir(&p, mode & 0o1777 & !self.umask)?;
        Ok(0)
    }

    fn unlinkat(&mut self, dirfd: i32, addr: u64, flags: u32, u: &dyn User) -> SysResult {
        if flags & !AT_REMOVEDIR != 0 {
            return Err(EINVAL);
        }
        let given = u.cstr(addr, path::PATH_MAX + 1)?;
        let p = self.path_at(dirfd, &given)?;
        if flags & AT_REMOVEDIR != 0 {
            match last_name(&given) {
                b"." => return Err(EINVAL),
                b".." => return Err(ENOTEMPTY),
                _ => {}
            }
            self.backend.rmdir(&strip_slash(p))?;
        } else {
            if p.ends_with(b"/") {
                // `unlink("x/")`: a directory is EISDIR, anything else is not a directory.
                let s = self.stat_path(&p, true)?;
                return Err(if s.mode & S_IFMT == S_IFDIR {
                    EISDIR
                } else {
                    ENOTDIR
                });
            }
            self.backend.unlink(&p)?;
        }
        Ok(0)
    }

    fn renameat2(
        &mut self,
        ofd: i32,
        old: u64,
        nfd: i32,
        new: u64,
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        let og = u.cstr(old, path::PATH_MAX + 1)?;
        let ng = u.cstr(new, path::PATH_MAX + 1)?;
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) != 0
            || flags & (RENAME_NOREPLACE | RENAME_EXCHANGE) == RENAME_NOREPLACE | RENAME_EXCHANGE
            || flags & RENAME_WHITEOUT != 0
        {
            return Err(EINVAL);
        }
        let op = self.path_at(ofd, &og)?;
        let np = self.path_at(nfd, &ng)?;
        for g in [&og, &ng] {
            if matches!(last_name(g), b"." | b"..") {
                return Err(EBUSY);
            }
        }
        if op.ends_with(b"/") && self.stat_path(&op, false)?.mode & S_IFMT != S_IFDIR {
            return Err(ENOTDIR);
        }
        self.backend
            .rename(&strip_slash(op), &strip_slash(np), flags)?;
        Ok(0)
    }

    fn linkat(
        &mut self,
        ofd: i32,
        old: u64,
        nfd: i32,
        new: u64,
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        if flags & !(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH) != 0 {
            return Err(EINVAL);
        }
        let og = u.cstr(old, path::PATH_MAX + 1)?;
        let np = self.user_path(nfd, new, u)?;
        let op = if og.is_empty() && flags & AT_EMPTY_PATH != 0 {
            match &self.table.get(ofd)?.borrow().object {
                Object::File { path, .. } | Object::Path { path, .. } => path.clone(),
                Object::Device(_) | Object::Pipe { .. } | Object::Socket(_) => return Err(EXDEV),
            }
        } else {
            self.path_at(ofd, &og)?
        };
        if np.ends_with(b"/") || op.ends_with(b"/") {
            // A hard link never names a directory.
            let s = self.stat_path(&op, false)?;
            return Err(if s.mode & S_IFMT == S_IFDIR {
                EPERM
            } else {
                ENOENT
            });
        }
        self.backend.link(&op, &np)?;
        Ok(0)
    }

    fn symlinkat(&mut self, target: u64, dirfd: i32, addr: u64, u: &dyn User) -> SysResult {
        let t = u.cstr(target, path::PATH_MAX + 1)?;
        let p = self.user_path(dirfd, addr, u)?;
        if t.is_empty() {
            return Err(ENOENT);
        }
        if Self::device_path(&p).is_some() {
            return Err(EEXIST);
        }
        self.backend.symlink(&t, &p)?;
        Ok(0)
    }

    fn fchmodat(&mut self, dirfd: i32, addr: u64, mode: u32, u: &dyn User) -> SysResult {
        let p = self.user_path(dirfd, addr, u)?;
        self.backend.chmod(&p, mode & 0o7777)?;
        Ok(0)
    }

    /// The path a call by descriptor falls back to when the file system answers such calls only
    /// by path.
    fn fallback_path(&mut self, d: &Shared) -> Result<Vec<u8>, Errno> {
        match &d.borrow().object {
            Object::File { path, .. } | Object::Path { path, .. } => Ok(path.clone()),
            Object::Device(_) | Object::Pipe { .. } | Object::Socket(_) => Err(EPERM),
        }
    }

    fn handle_of(d: &Shared) -> Result<Option<u64>, Errno> {
        let d = d.borrow();
        if d.flags & O_PATH != 0 {
            return Err(EBADF);
        }
        Ok(match d.object {
            Object::File { handle, .. } => Some(handle),
            _ => None,
        })
    }

    fn fchmod(&mut self, fd: i32, mode: u32) -> SysResult {
        let d = self.table.get(fd)?;
        if let Some(h) = Self::handle_of(&d)? {
            match self.backend.fchmod(h, mode & 0o7777) {
                Err(e) if e == ENOSYS => {}
                r => return r.map(|_| 0),
            }
        }
        let p = self.fallback_path(&d)?;
        self.backend.chmod(&p, mode & 0o7777)?;
        Ok(0)
    }

    fn fchownat(
        &mut self,
        dirfd: i32,
        addr: u64,
        uid: u32,
        gid: u32,
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
            return Err(EINVAL);
        }
        let given = u.cstr(addr, path::PATH_MAX + 1)?;
        if given.is_empty() && flags & AT_EMPTY_PATH != 0 && dirfd != AT_FDCWD {
            return self.fchown(dirfd, uid, gid);
        }
        let p = self.path_at(dirfd, &given)?;
        self.backend
            .chown(&p, uid, gid, flags & AT_SYMLINK_NOFOLLOW == 0)?;
        Ok(0)
    }

    fn fchown(&mut self, fd: i32, uid: u32, gid: u32) -> SysResult {
        let d = self.table.get(fd)?;
        if let Some(h) = Self::handle_of(&d)? {
            match self.backend.fchown(h, uid, gid) {
                Err(e) if e == ENOSYS => {}
                r => return r.map(|_| 0),
            }
        }
        let p = self.fallback_path(&d)?;
        self.backend.chown(&p, uid, gid, true)?;
        Ok(0)
    }

    fn utimensat(
        &mut self,
        dirfd: i32,
        addr: u64,
        times: u64,
        flags: u32,
        u: &dyn User,
    ) -> SysResult {
        if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
            return Err(EINVAL);
        }
        let set = if times == 0 {
            [TimeSet::Now, TimeSet::Now]
        } else {
            let mut raw = [0u8; 32];
            u.read(times, &mut raw)?;
            let mut set = [TimeSet::Omit; 2];
            for (i, s) in set.iter_mut().enumerate() {
                let sec = i64::from_le_bytes(raw[i * 16..i * 16 + 8].try_into().unwrap());
                let nsec = i64::from_le_bytes(raw[i * 16 + 8..i * 16 + 16].try_into().unwrap());
                *s = match nsec {
                    UTIME_NOW => TimeSet::Now,
                    UTIME_OMIT => TimeSet::Omit,
                    0..=999_999_999 => TimeSet::At(Timespec {
                        sec,
                        nsec: nsec as u32,
                    }),
                    _ => return Err(EINVAL),
                };
            }
            set
        };
        // A null path means the descriptor itself (futimens).
        let given = if addr == 0 {
            Vec::new()
        } else {
            u.cstr(addr, path::PATH_MAX + 1)?
        };
        if addr == 0 || (given.is_empty() && flags & AT_EMPTY_PATH != 0) {
            if dirfd == AT_FDCWD {
                return Err(EFAULT);
            }
            let d = self.table.get(dirfd)?;
            if set == [TimeSet::Omit; 2] {
                return Ok(0);
            }
            if let Some(h) = Self::handle_of(&d)? {
                match self.backend.futimens(h, set) {
                    Err(e) if e == ENOSYS => {}
                    r => return r.map(|_| 0),
                }
            }
            let p = self.fallback_path(&d)?;
            self.backend.utimens(&p, set, true)?;
            return Ok(0);
        }
        let p = self.path_at(dirfd, &given)?;
        if set == [TimeSet::Omit; 2] {
            self.stat_path(&p, flags & AT_SYMLINK_NOFOLLOW == 0)?;
            return Ok(0);
        }
        self.backend
            .utimens(&p, set, flags & AT_SYMLINK_NOFOLLOW == 0)?;
        Ok(0)
    }

    fn truncate(&mut self, addr: u64, len: i64, u: &dyn User) -> SysResult {
        let p = self.user_path(AT_FDCWD, addr, u)?;
        if len < 0 {
            return Err(EINVAL);
        }
        let s = self.stat_path(&p, true)?;
        match s.mode & S_IFMT {
            S_IFDIR => return Err(EISDIR),
            S_IFREG => {}
            _ => return Err(EINVAL),
        }
        self.backend.truncate(&p, len as u64)?;
        Ok(0)
    }

    fn ftruncate(&mut self, fd: i32, len: i64) -> SysResult {
        let d = self.table.get(fd)?;
        if len < 0 {
            return Err(EINVAL);
        }
        let h = Self::handle_of(&d)?.ok_or(EINVAL)?;
        let acc = d.borrow().flags & O_ACCMODE;
        if acc == O_RDONLY || self.mode_of(&d)? & S_IFMT != S_IFREG {
            return Err(EINVAL);
        }
        self.backend.ftruncate(h, len as u64)?;
        Ok(0)
    }

    fn fsync(&mut self, fd: i32) -> SysResult {
        let d = self.table.get(fd)?;
        match Self::handle_of(&d)? {
            Some(h) => self.backend.fsync(h).map(|_| 0),
            None => Err(EINVAL),
        }
    }

    // ---- working directory ----

    fn chdir(&mut self, addr: u64, u: &dyn User) -> SysResult {
        let p = self.user_path(AT_FDCWD, addr, u)?;
        self.cwd = path::canonical_dir(&mut self.backend, &p)?;
        Ok(0)
    }

    fn fchdir(&mut self, fd: i32) -> SysResult {
        let d = self.table.get(fd)?;
        if self.mode_of(&d)? & S_IFMT != S_IFDIR {
            return Err(ENOTDIR);
        }
        let p = self.fallback_path(&d).map_err(|_| ENOTDIR)?;
        self.cwd = path::canonical_dir(&mut self.backend, &p)?;
        Ok(0)
    }

    fn getcwd(&mut self, buf: u64, size: u64, u: &dyn User) -> SysResult {
        let mut out = self.cwd.clone();
        out.push(0);
        if (size as usize) < out.len() {
            return Err(ERANGE);
        }
        u.write(buf, &out)?;
        Ok(out.len() as u64)
    }

    // ---- descriptors ----

    fn dup(&mut self, fd: i32, min: usize, cloexec: bool) -> SysResult {
        let d = self.table.get(fd)?;
        Ok(self.table.insert(min, d, cloexec)? as u64)
    }

    fn dup3(&mut self, old: i32, new: i32, flags: u32, dup2: bool) -> SysResult {
        if !dup2 && flags & !O_CLOEXEC != 0 {
            return Err(EINVAL);
        }
        let d = self.table.get(old)?;
        if old == new {
            return if dup2 { Ok(new as u64) } else { Err(EINVAL) };
        }
        let slot = usize::try_from(new)
            .ok()
            .filter(|&n| n < MAX_FDS)
            .ok_or(EBADF)?;
        if let Some(prev) = self.table.set(slot, d, flags & O_CLOEXEC != 0) {
            self.release(prev);
        }
        Ok(new as u64)
    }

    fn fcntl(&mut self, fd: i32, cmd: u32, arg: u64, u: &dyn User) -> SysResult {
        let d = self.table.get(fd)?;
        let is_path = d.borrow().flags & O_PATH != 0;
        match cmd {
            F_DUPFD | F_DUPFD_CLOEXEC => {
                let min = usize::try_from(arg as u32 as i32)
                    .ok()
                    .filter(|&m| m < MAX_FDS)
                    .ok_or(EINVAL)?;
                self.dup(fd, min, cmd == F_DUPFD_CLOEXEC)
            }
            F_GETFD => Ok(if self.table.cloexec(fd)? {
                FD_CLOEXEC
            } else {
                0
            }),
            F_SETFD => {
                self.table.set_cloexec(fd, arg & FD_CLOEXEC != 0)?;
                Ok(0)
            }
            F_GETFL => Ok(d.borrow().flags as u64),
            pipe::F_GETPIPE_SZ if Self::pipe_of(&d).is_some() => Ok(pipe::CAPACITY as u64),
            F_SETFL if is_path => Err(EBADF),
            F_SETFL => {
                let mut d = d.borrow_mut();
                d.flags = (d.flags & !SETFL_MASK) | (arg as u32 & SETFL_MASK);
                Ok(0)
            }
            F_GETLK | F_SETLK | F_SETLKW if is_path => Err(EBADF),
            F_GETLK => {
                // No other process holds a lock: report the region unlocked.
                let mut raw = [0u8; 32];
                u.read(arg, &mut raw)?;
                raw[0..2].copy_from_slice(&F_UNLCK.to_le_bytes());
                u.write(arg, &raw)?;
                Ok(0)
            }
            F_SETLK | F_SETLKW => {
                let mut raw = [0u8; 32];
                u.read(arg, &mut raw)?;
                Ok(0)
            }
            _ => Err(EINVAL),
        }
    }

    fn ioctl(&mut self, fd: i32, req: u32, arg: u64, u: &dyn User) -> SysResult {
        let d = self.table.get(fd)?;
        if d.borrow().flags & O_PATH != 0 {
            return Err(EBADF);
        }
        let console = matches!(d.borrow().object, Object::Device(Device::Console));
        match req {
            FIOCLEX | FIONCLEX => {
                self.table.set_cloexec(fd, req == FIOCLEX)?;
                return Ok(0);
            }
            FIONBIO => {
                let mut v = [0u8; 4];
                u.read(arg, &mut v)?;
                let mut d = d.borrow_mut();
                if u32::from_le_bytes(v) != 0 {
                    d.flags |= O_NONBLOCK;
                } else {
                    d.flags &= !O_NONBLOCK;
                }
                return Ok(0);
            }
            _ => {}
        }
        if let Some(p) = Self::pipe_of(&d) {
            if req != FIONREAD {
                return Err(ENOTTY);
            }
            let n = Self::pipe_unread(p.ring);
            u.write(arg, &n.to_le_bytes())?;
            return Ok(0);
        }
        if !console {
            if let (FIONREAD, Some(x)) = (req, Self::unix_of(&d)) {
                u.write(arg, &Self::unix_unread(&x).to_le_bytes())?;
                return Ok(0);
            }
            if req == FIONREAD {
                if let Some(h) = Self::handle_of(&d)? {
                    if self.mode_of(&d)? & S_IFMT == S_IFREG {
                        let size = self.backend.fstat(h)?.size;
                        let n = size.saturating_sub(d.borrow().offset).min(i32::MAX as u64);
                        u.write(arg, &(n as u32).to_le_bytes())?;
                        return Ok(0);
                    }
                }
            }
            return Err(ENOTTY);
        }
        match req {
            TCGETS => {
                let t = self.backend.console_tcgets()?;
                u.write(arg, &t.to_bytes())?;
                Ok(0)
            }
            // Output is on the line when a write returns, so TCSETSW has nothing to wait for.
            TCSETS | TCSETSW | TCSETSF => {
                self.backend.tty_may_change()?;
                let mut t = [0u8; TERMIOS_SIZE];
                u.read(arg, &mut t)?;
                self.backend
                    .console_tcsets(&Termios::from_bytes(&t), req == TCSETSF)?;
                Ok(0)
            }
            // Job control: the session and foreground group are proc's.
            TIOCSCTTY | TIOCNOTTY => self.backend.tty_job(req, arg as u32).map(|_| 0),
            TIOCGPGRP | TIOCGSID => {
                let v = self.backend.tty_job(req, 0)?;
                u.write(arg, &v.to_le_bytes())?;
                Ok(0)
            }
            TIOCSPGRP => {
                let mut v = [0u8; 4];
                u.read(arg, &mut v)?;
                let pgrp = i32::from_le_bytes(v);
                if pgrp < 0 {
                    return Err(EINVAL);
                }
                self.backend.tty_job(req, pgrp as u32).map(|_| 0)
            }
            TIOCGWINSZ => {
                let (rows, cols) = self.backend.console_winsize()?;
                u.write(arg, &pack_winsize(rows, cols))?;
                Ok(0)
            }
            TIOCSWINSZ => {
                let mut w = [0u8; WINSIZE_SIZE];
                u.read(arg, &mut w)?;
                let (rows, cols) = unpack_winsize(&w);
                self.backend.console_set_winsize(rows, cols)?;
                Ok(0)
            }
            FIONREAD => {
                let n = self.backend.console_pending()?.min(i32::MAX as usize);
                u.write(arg, &(n as u32).to_le_bytes())?;
                Ok(0)
            }
            // tcdrain (argument 1) and breaks (0): output is on the line when a write returns,
            // and a break is not sent.
            TCSBRK => Ok(0),
            TCFLSH => match arg {
                TCIFLUSH | TCIOFLUSH => {
                    let t = self.backend.console_tcgets()?;
                    self.backend.console_tcsets(&t, true)?;
                    Ok(0)
                }
                TCOFLUSH => Ok(0),
                _ => Err(EINVAL),
            },
            _ => Err(ENOTTY),
        }
    }

    fn sendfile(
        &mut self,
        out_fd: i32,
        in_fd: i32,
        off_ptr: u64,
        count: u64,
        u: &dyn User,
    ) -> SysResult {
        let din = self.table.get(in_fd)?;
        let dout = self.table.get(out_fd)?;
        Self::check_access(&din, false)?;
        Self::check_access(&dout, true)?;
        if dout.borrow().flags & O_APPEND != 0 {
            return Err(EINVAL);
        }
        let mut at = if off_ptr != 0 {
            let mut raw = [0u8; 8];
            u.read(off_ptr, &mut raw)?;
            let off = i64::from_le_bytes(raw);
            if off < 0 {
                return Err(EINVAL);
            }
            Some(off as u64)
        } else {
            None
        };
        let in_handle = match din.borrow().object {
            Object::File { handle, .. } => handle,
            _ => return Err(EINVAL),
        };
        if self.mode_of(&din)? & S_IFMT == S_IFDIR {
            return Err(EINVAL);
        }
        let count = count.min(MAX_RW);
        let mut done = 0u64;
        while done < count {
            let pos = at.unwrap_or(din.borrow().offset);
            let mut tmp = vec![0u8; ((count - done) as usize).min(CHUNK)];
            let n = match self.backend.pread(in_handle, &mut tmp, pos) {
                Ok(n) => n,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            };
            if n == 0 {
                break;
            }
            let w = match self.write_bytes(&dout, &tmp[..n]) {
                Ok(w) => w,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            };
            done += w as u64;
            match &mut at {
                Some(a) => *a += w as u64,
                None => din.borrow_mut().offset += w as u64,
            }
            if w < n {
                break;
            }
        }
        if let Some(a) = at {
            u.write(off_ptr, &a.to_le_bytes())?;
        }
        Ok(done)
    }

    /// Before a write to the terminal: with `TOSTOP` set, a background process group gets
    /// SIGTTOU (the call restarts after it), unless it ignores or blocks it (Linux's
    /// `tty_check_change` from `n_tty_write`).
    fn tostop_check(&mut self) -> Result<(), Errno> {
        if self.backend.console_tcgets()?.lflag & sawmill_console_api::termios::TOSTOP != 0 {
            self.backend.tty_may_change()?;
        }
        Ok(())
    }

    /// Writes library bytes to a description at its offset (for `sendfile`).
    fn write_bytes(&mut self, d: &Shared, data: &[u8]) -> Result<usize, Errno> {
        if Self::pipe_of(d).is_some() {
            return self.pipe_write_bytes(d, data);
        }
        if let Some(s) = Self::sock_of(d) {
            return self.sock_send_bytes(d, &s, data, 0);
        }
        let (handle, dev, off) = {
            let d = d.borrow();
            match d.object {
                Object::File { handle, .. } => (Some(handle), None, d.offset),
                Object::Device(dev) => (None, Some(dev), 0),
                Object::Path { .. } => return Err(EBADF),
                Object::Pipe { .. } | Object::Socket(_) => return Err(EBADF),
            }
        };
        match (handle, dev) {
            (Some(h), _) => {
                let n = self.backend.pwrite(h, data, off)?;
                d.borrow_mut().offset = off + n as u64;
                Ok(n)
            }
            (_, Some(Device::Console)) => {
                self.tostop_check()?;
                let mut done = 0;
                while done < data.len() {
                    done += self.backend.console_write(&data[done..])?;
                }
                Ok(done)
            }
            _ => Ok(data.len()),
        }
    }
}

/// The path without its trailing slashes (but `/` stays).
fn strip_slash(mut p: Vec<u8>) -> Vec<u8> {
    while p.len() > 1 && p.ends_with(b"/") {
        p.pop();
    }
    p
}

/// The last name of a path as the program gave it (`.` for `a/.`, `..` for `..`).
fn last_name(p: &[u8]) -> &[u8] {
    let t = {
        let mut e = p.len();
        while e > 1 && p[e - 1] == b'/' {
            e -= 1;
        }
        &p[..e]
    };
    match t.iter().rposition(|&c| c == b'/') {
        Some(i) if t.len() > 1 => &t[i + 1..],
        _ => t,
    }
}
