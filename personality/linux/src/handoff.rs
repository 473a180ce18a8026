//! The state one image of a process hands to the next: to a `fork` child (everything the
//! library knows of the process: registers, memory regions, descriptors, working directory) or
//! to the image an `execve` starts (descriptors without close-on-exec, working directory,
//! umask). The library writes it into a dataspace it hands to proc as its first capability
//! (`proc.handoff`), followed by the capabilities the state names by index (dataspaces, open
//! files); proc gives them to the new image in that order, which decodes the state here and
//! adopts it. A state that fits the new image's environment goes to proc in messages instead
//! (`proc.handoff_state`) and reaches the image in its environment; index 0 is then none. Plain data, host-tested; [`State::decode`] is total: any bytes give a state or
//! `None`.

use alloc::vec::Vec;

/// A capability named by index into the handed-off list; `NONE` for none.
pub type CapIndex = u32;
pub const NONE: CapIndex = u32::MAX;

/// One region of the program's memory (lib/rm's region map).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Region {
    pub start: u64,
    pub size: u64,
    /// The source dataspace and the offset in it of `start`.
    pub ds: CapIndex,
    pub offset: u64,
    /// lib/rm region flags.
    pub flags: u32,
    /// A copy-on-write region's private pages: their dataspace (or NONE), the offset in it of
    /// `start`, which pages live there.
    pub shadow: CapIndex,
    pub shadow_offset: u64,
    pub private: Vec<u64>,
    /// A mapped file's (VFS mount index, inode, generation), by which the child's region
    /// manager opens it again if its file system restarts (issue 16; lib/rm `set_reopen`);
    /// inode 0: none.
    pub reopen: [u32; 3],
}

/// What a description is open on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Object {
    /// A file of the file system: its open file (a capability), the file client's open flags,
    /// the path it was opened by and its mode when known, and what the new image reopens it by
    /// if its file system restarts: (VFS mount index, inode, generation), inode 0 for nothing
    /// (issue 16; lib/fsclient `reopen_of`). Encoded as the inode alone when it is 0.
    File {
        file: CapIndex,
        open_flags: u32,
        path: Vec<u8>,
        mode: Option<u32>,
        reopen: [u32; 3],
    },
    /// `O_PATH`.
    Path { path: Vec<u8>, mode: u32 },
    /// A device the library serves (`files::table::Device` as a number).
    Device(u8),
    /// One end of a pipe: its capability (also its ring's dataspace) and which end it is.
    Pipe { end: CapIndex, write: bool },
    /// A socket: its capability (a copy the network stack counts), its kind, whether it
    /// listens and the address it was bound to; a fused loopback connection's pipe ends
    /// (read, write: docs/net.md, "Loopback fusion").
    Socket {
        sock: CapIndex,
        udp: bool,
        listening: bool,
        bound: Option<u32>,
        fused: Option<(CapIndex, CapIndex)>,
    },
    /// A local (AF_UNIX) socket: the capabilities of its pipe ends and listener (each NONE
    /// when it has none), its type, whether it listens, its name and its peer's.
    Unix {
        rx: CapIndex,
        tx: CapIndex,
        listener: CapIndex,
        kind: u8,
        listening: bool,
        name: Vec<u8>,
        peer: Vec<u8>,
        /// The peer's credentials (pid, uid, gid), once connected (`SO_PEERCRED`).
        peer_cred: Option<[u32; 3]>,
    },
}

/// An open file description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub object: Object,
    pub offset: u64,
    pub flags: u32,
    /// The description's cell in the shared offset page (`State::offsets`), where every process
    /// holding it keeps its offset; NONE for one not shared.
    pub cell: u32,
}

/// A descriptor: its number, close-on-exec, its description (index into `descriptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub fd: i32,
    pub cloexec: bool,
    pub description: u32,
}

/// What `fork` adds to what `execve` keeps.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ForkState {
    /// The program's registers at its `fork` (`sawmill_abi::ForeignFrame` as words; the child
    /// returns with rax = 0).
    pub frame: Vec<u64>,
    pub fs_base: u64,
    /// `mm::Brk`: start, current break, mapped end.
    pub brk: [u64; 3],
    /// The thread's name (`prctl(PR_SET_NAME)`).
    pub name: [u8; 16],
    pub regions: Vec<Region>,
    /// A vfork child runs on this stack (`clone`'s stack argument; 0 = the parent's).
    pub stack: u64,
    /// `CLONE_CHILD_SETTID`: where the child writes its pid (0 = nowhere).
    pub child_tid: u64,
    /// The signal state the child inherits (`signal::Signals::encode_for_fork`).
    pub signals: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct State {
    /// Present for a fork child; absent for the image after `execve`.
    pub fork: Option<ForkState>,
    pub cwd: Vec<u8>,
    pub umask: u32,
    pub descriptions: Vec<Description>,
    pub descriptors: Vec<Descriptor>,
    /// The shared offset page (a dataspace every process of the family maps), or NONE.
    pub offsets: CapIndex,
}

const MAGIC: u32 = 0x5346_4f48; // "HOFS"
const PAGE: u64 = 4096;
/// Most bytes of signal state a fork hands on (the library's is 2,080).
const MAX_SIGNAL_BYTES: usize = 8192;

/// The encoder's first allocation (bytes): more than a usual fork's state.
const ENCODE_ROOM: usize = 4096;

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    fn words(&mut self, w: &[u64]) {
        self.u32(w.len() as u32);
        for &x in w {
            self.u64(x);
        }
    }
    /// Bytes that are mostly zero (the signal actions: 64 of 32 bytes, most of them the
    /// default's zeros), by their nonzero 8-byte words: the length, the words as [`Self::sparse`]
    /// writes them, the bytes after the last whole word.
    fn sparse_bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        // Read in place, not gathered into a vector of words first (a fork's 2 KiB of signal
        // state: the vector's allocation and copy cost more than the encoding).
        self.sparse_words(
            b.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
        );
        self.0.extend_from_slice(&b[b.len() / 8 * 8..]);
    }
    /// A bitmap by its nonzero words only (index, word): a region's private pages are few, its
    /// bitmap long (an 8 MiB stack's is 32 words), and a fork's whole state should fit the
    /// child's environment page.
    fn sparse(&mut self, w: &[u64]) {
        self.sparse_words(w.iter().copied());
    }
    /// [`Self::sparse`] of the words `w` yields, in one walk: the count goes first, written
    /// once the words are (walking the 2 KiB of signal state twice was half of a fork's
    /// encoding).
    fn sparse_words(&mut self, w: impl Iterator<Item = u64>) {
        let at = self.0.len();
        self.u32(0);
        let mut nonzero = 0u32;
        for (i, x) in w.enumerate().filter(|&(_, x)| x != 0) {
            self.u32(i as u32);
            self.u64(x);
            nonzero += 1;
        }
        self.0[at..at + 4].copy_from_slice(&nonzero.to_le_bytes());
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A count of items each at least `min` bytes long: bounded by what is left.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n <= (self.b.len() - self.pos) / min.max(1)).then_some(n)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.count(1)?;
        Some(self.take(n)?.to_vec())
    }
    fn words(&mut self) -> Option<Vec<u64>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.u64()).collect()
    }
    /// What [`Writer::sparse_bytes`] wrote, at most `max` bytes.
    fn sparse_bytes(&mut self, max: usize) -> Option<Vec<u8>> {
        let len = self.u32()? as usize;
        if len > max {
            return None;
        }
        let mut out = alloc::vec![0u8; len];
        // Each nonzero word straight into its place (a vector of all the words up to the last
        // nonzero one, then copied, cost ~4k a fork child).
        let n = self.count(12)?;
        for _ in 0..n {
            let i = self.u32()? as usize;
            let x = self.u64()?;
            out.get_mut(i.checked_mul(8)?..)
                .and_then(|o| o.get_mut(..8))?
                .copy_from_slice(&x.to_le_bytes());
        }
        let tail = self.take(len % 8)?;
        out[len / 8 * 8..].copy_from_slice(tail);
        Some(out)
    }
    /// What [`Writer::sparse`] wrote, for a bitmap of at most `max` words: the words up to the
    /// last nonzero one (the rest are zero).
    fn sparse(&mut self, max: u64) -> Option<Vec<u64>> {
        let n = self.count(12)?;
        let mut out = Vec::new();
        for _ in 0..n {
            let i = self.u32()? as u64;
            let x = self.u64()?;
            if i >= max {
                return None;
            }
            if out.len() <= i as usize {
                out.resize(i as usize + 1, 0);
            }
            out[i as usize] = x;
        }
        Some(out)
    }
}

impl State {
    pub fn encode(&self) -> Vec<u8> {
        // Room for a usual fork's state at once: grown from empty, the buffer was reallocated
        // and copied at every doubling.
        let mut w = Writer(Vec::with_capacity(ENCODE_ROOM));
        w.u32(MAGIC);
        match &self.fork {
            None => w.u8(0),
            Some(f) => {
                w.u8(1);
                w.words(&f.frame);
                w.u64(f.fs_base);
                for v in f.brk {
                    w.u64(v);
                }
                w.0.extend_from_slice(&f.name);
                w.u64(f.stack);
                w.u64(f.child_tid);
                w.sparse_bytes(&f.signals);
                w.u32(f.regions.len() as u32);
                for r in &f.regions {
                    w.u64(r.start);
                    w.u64(r.size);
                    w.u32(r.ds);
                    w.u64(r.offset);
                    w.u32(r.flags);
                    w.u32(r.shadow);
                    w.u64(r.shadow_offset);
                    w.sparse(&r.private);
                    // Most regions are no file's: one byte says so (a fork writes and
                    // reads every region).
                    if r.reopen[1] == 0 {
                        w.u8(0);
                    } else {
                        w.u8(1);
                        for v in r.reopen {
                            w.u32(v);
                        }
                    }
                }
            }
        }
        w.bytes(&self.cwd);
        w.u32(self.umask);
        w.u32(self.descriptions.len() as u32);
        for d in &self.descriptions {
            match &d.object {
                Object::File {
                    file,
                    open_flags,
                    path,
                    mode,
                    reopen,
                } => {
                    w.u8(0);
                    w.u32(*file);
                    w.u32(*open_flags);
                    w.bytes(path);
                    w.u8(mode.is_some() as u8);
                    w.u32(mode.unwrap_or(0));
                    let [mount, ino, generation] = *reopen;
                    w.u32(ino);
                    if ino != 0 {
                        w.u32(mount);
                        w.u32(generation);
                    }
                }
                Object::Path { path, mode } => {
                    w.u8(1);
                    w.bytes(path);
                    w.u32(*mode);
                }
                Object::Device(n) => {
                    w.u8(2);
                    w.u8(*n);
                }
                Object::Pipe { end, write } => {
                    w.u8(3);
                    w.u32(*end);
                    w.u8(*write as u8);
                }
                Object::Socket {
                    sock,
                    udp,
                    listening,
                    bound,
                    fused,
                } => {
                    w.u8(4);
                    w.u32(*sock);
                    w.u8(*udp as u8
                        | (*listening as u8) << 1
                        | (bound.is_some() as u8) << 2
                        | (fused.is_some() as u8) << 3);
                    w.u32(bound.unwrap_or(0));
                    if let Some((rx, tx)) = fused {
                        w.u32(*rx);
                        w.u32(*tx);
                    }
                }
                Object::Unix {
                    rx,
                    tx,
                    listener,
                    kind,
                    listening,
                    name,
                    peer,
                    peer_cred,
                } => {
                    w.u8(5);
                    w.u32(*rx);
                    w.u32(*tx);
                    w.u32(*listener);
                    w.u8(*kind);
                    w.u8(*listening as u8);
                    w.bytes(name);
                    w.bytes(peer);
                    w.u8(peer_cred.is_some() as u8);
                    for id in peer_cred.unwrap_or_default() {
                        w.u32(id);
                    }
                }
            }
            w.u64(d.offset);
            w.u32(d.flags);
            w.u32(d.cell);
        }
        w.u32(self.offsets);
        w.u32(self.descriptors.len() as u32);
        for d in &self.descriptors {
            w.u32(d.fd as u32);
            w.u8(d.cloexec as u8);
            w.u32(d.description);
        }
        w.0
    }

    pub fn decode(b: &[u8]) -> Option<State> {
        let mut r = Reader { b, pos: 0 };
        if r.u32()? != MAGIC {
            return None;
        }
        let fork = match r.u8()? {
            0 => None,
            1 => {
                let frame = r.words()?;
                let fs_base = r.u64()?;
                let brk = [r.u64()?, r.u64()?, r.u64()?];
                let name: [u8; 16] = r.take(16)?.try_into().ok()?;
                let stack = r.u64()?;
                let child_tid = r.u64()?;
                let signals = r.sparse_bytes(MAX_SIGNAL_BYTES)?;
                let n = r.count(45)?;
                let mut regions = Vec::with_capacity(n);
                for _ in 0..n {
                    let start = r.u64()?;
                    let size = r.u64()?;
                    let (ds, offset, flags, shadow, shadow_offset) =
                        (r.u32()?, r.u64()?, r.u32()?, r.u32()?, r.u64()?);
                    regions.push(Region {
                        start,
                        size,
                        ds,
                        offset,
                        flags,
                        shadow,
                        shadow_offset,
                        private: r.sparse((size / PAGE).div_ceil(64))?,
                        reopen: match r.u8()? {
                            0 => [0; 3],
                            1 => [r.u32()?, r.u32()?, r.u32()?],
                            _ => return None,
                        },
                    });
                }
                Some(ForkState {
                    frame,
                    fs_base,
                    brk,
                    name,
                    regions,
                    stack,
                    child_tid,
                    signals,
                })
            }
            _ => return None,
        };
        let cwd = r.bytes()?;
        let umask = r.u32()?;
        let n = r.count(17)?;
        let mut descriptions = Vec::with_capacity(n);
        for _ in 0..n {
            let object = match r.u8()? {
                0 => Object::File {
                    file: r.u32()?,
                    open_flags: r.u32()?,
                    path: r.bytes()?,
                    mode: {
                        let some = r.u8()?;
                        let m = r.u32()?;
                        match some {
                            0 => None,
                            1 => Some(m),
                            _ => return None,
                        }
                    },
                    reopen: match r.u32()? {
                        0 => [0; 3],
                        ino => {
                            let mount = r.u32()?;
                            [mount, ino, r.u32()?]
                        }
                    },
                },
                1 => Object::Path {
                    path: r.bytes()?,
                    mode: r.u32()?,
                },
                2 => Object::Device(r.u8()?),
                3 => Object::Pipe {
                    end: r.u32()?,
                    write: match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return None,
                    },
                },
                4 => {
                    let sock = r.u32()?;
                    let bits = r.u8()?;
                    let addr = r.u32()?;
                    if bits > 15 {
                        return None;
                    }
                    let fused = if bits & 8 != 0 {
                        Some((r.u32()?, r.u32()?))
                    } else {
                        None
                    };
                    Object::Socket {
                        sock,
                        udp: bits & 1 != 0,
                        listening: bits & 2 != 0,
                        bound: (bits & 4 != 0).then_some(addr),
                        fused,
                    }
                }
                5 => Object::Unix {
                    rx: r.u32()?,
                    tx: r.u32()?,
                    listener: r.u32()?,
                    kind: r.u8()?,
                    listening: match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return None,
                    },
                    name: r.bytes()?,
                    peer: r.bytes()?,
                    peer_cred: {
                        let has = match r.u8()? {
                            0 => false,
                            1 => true,
                            _ => return None,
                        };
                        let c = [r.u32()?, r.u32()?, r.u32()?];
                        has.then_some(c)
                    },
                },
                _ => return None,
            };
            descriptions.push(Description {
                object,
                offset: r.u64()?,
                flags: r.u32()?,
                cell: r.u32()?,
            });
        }
        let offsets = r.u32()?;
        let n = r.count(9)?;
        let mut descriptors = Vec::with_capacity(n);
        for _ in 0..n {
            let fd = r.u32()? as i32;
            let cloexec = match r.u8()? {
                0 => false,
                1 => true,
                _ => return None,
            };
            let description = r.u32()?;
            if description as usize >= descriptions.len() || fd < 0 {
                return None;
            }
            descriptors.push(Descriptor {
                fd,
                cloexec,
                description,
            });
        }
        if r.pos != b.len() {
            return None;
        }
        Some(State {
            fork,
            cwd,
            umask,
            descriptions,
            descriptors,
            offsets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            fork: Some(ForkState {
                frame: (0..18).collect(),
                fs_base: 0x4000_1000,
                brk: [0x60_0000, 0x60_1234, 0x60_2000],
                name: *b"busybox\0\0\0\0\0\0\0\0\0",
                regions: alloc::vec![
                    Region {
                        start: 0x40_0000,
                        size: 0x2000,
                        ds: 1,
                        offset: 0,
                        flags: 13,
                        shadow: 2,
                        shadow_offset: 0x1000,
                        private: alloc::vec![2],
                        reopen: [0, 12, 7],
                    },
                    Region {
                        start: 0x7000_0000,
                        size: 0x1000,
                        ds: 3,
                        flags: 3,
                        shadow: NONE,
                        ..Region::default()
                    },
                ],
                stack: 0,
                child_tid: 0x7fff_0000,
                signals: alloc::vec![7; 40],
            }),
            cwd: b"/tmp".to_vec(),
            umask: 0o022,
            descriptions: alloc::vec![
                Description {
                    object: Object::Device(3),
                    offset: 0,
                    flags: 2,
                    cell: NONE,
                },
                Description {
                    object: Object::File {
                        file: 4,
                        open_flags: 3,
                        path: b"/tmp/x".to_vec(),
                        mode: Some(0o100644),
                        reopen: [0, 12, 0x8000_0001],
                    },
                    offset: 77,
                    flags: 0o2001,
                    cell: 3,
                },
                Description {
                    object: Object::File {
                        file: 5,
                        open_flags: 1,
                        path: b"/proc/self/stat".to_vec(),
                        mode: None,
                        reopen: [0; 3],
                    },
                    offset: 0,
                    flags: 0,
                    cell: NONE,
                },
                Description {
                    object: Object::Path {
                        path: b"/".to_vec(),
                        mode: 0o40755,
                    },
                    offset: 0,
                    flags: 0,
                    cell: NONE,
                },
                Description {
                    object: Object::Socket {
                        sock: 6,
                        udp: false,
                        listening: true,
                        bound: Some(0x7f00_0001),
                        fused: None,
                    },
                    offset: 0,
                    flags: 0o4002,
                    cell: NONE,
                },
                Description {
                    object: Object::Socket {
                        sock: 9,
                        udp: false,
                        listening: false,
                        bound: None,
                        fused: Some((10, 11)),
                    },
                    offset: 0,
                    flags: 0o4002,
                    cell: NONE,
                },
                Description {
                    object: Object::Unix {
                        rx: 7,
                        tx: 8,
                        listener: NONE,
                        kind: 1,
                        listening: false,
                        name: b"\0abstract".to_vec(),
                        peer: b"/tmp/sock".to_vec(),
                        peer_cred: Some([42, 1000, 100]),
                    },
                    offset: 0,
                    flags: 2,
                    cell: NONE,
                },
            ],
            descriptors: alloc::vec![
                Descriptor {
                    fd: 0,
                    cloexec: false,
                    description: 0
                },
                Descriptor {
                    fd: 1,
                    cloexec: false,
                    description: 0
                },
                Descriptor {
                    fd: 10,
                    cloexec: true,
                    description: 1
                },
                Descriptor {
                    fd: 11,
                    cloexec: false,
                    description: 2
                },
            ],
            offsets: 5,
        }
    }

    #[test]
    fn private_bitmaps_go_by_their_nonzero_words() {
        let mut s = sample();
        let f = s.fork.as_mut().unwrap();
        // An 8 MiB stack with two private pages near its top: 32 words, two of them set.
        let mut bits = alloc::vec![0u64; 32];
        bits[30] = 1 << 5;
        bits[31] = 1 << 63;
        f.regions[1].size = 8 << 20;
        f.regions[1].private = bits.clone();
        let b = s.encode();
        assert_eq!(
            b.len(),
            sample().encode().len() + 2 * 12,
            "12 bytes a set word"
        );
        let back = State::decode(&b).unwrap();
        assert_eq!(back.fork.as_ref().unwrap().regions[1].private, bits);
        // Trailing zero words are not carried (the region manager's fresh bitmap is zero).
        bits[31] = 0;
        s.fork.as_mut().unwrap().regions[1].private = bits.clone();
        let back = State::decode(&s.encode()).unwrap();
        assert_eq!(back.fork.as_ref().unwrap().regions[1].private, &bits[..31]);
        // A word past the region's pages is refused.
        let f = s.fork.as_mut().unwrap();
        f.regions[1].size = 30 * 64 * PAGE;
        assert_eq!(State::decode(&s.encode()), None);
    }

    #[test]
    fn a_region_that_is_no_file_spends_one_byte_on_it() {
        let mut s = sample();
        let f = s.fork.as_mut().unwrap();
        // Only regions of no file, and as many as a process has: the count's bound holds.
        f.regions.retain(|r| r.reopen == [0; 3]);
        let one = f.regions[0].clone();
        f.regions = alloc::vec![one; 64];
        let b = s.encode();
        assert_eq!(State::decode(&b), Some(s.clone()));
        let f = s.fork.as_mut().unwrap();
        f.regions[0].reopen = [1, 2, 3];
        assert_eq!(s.encode().len(), b.len() + 12, "12 bytes a file");
        assert_eq!(State::decode(&s.encode()), Some(s.clone()));
    }

    #[test]
    fn signal_state_goes_by_its_nonzero_words() {
        let mut s = sample();
        let mut sig = alloc::vec![0u8; 2083];
        sig[40] = 9; // one word of an action
        sig[2082] = 1; // the tail after the last whole word
        s.fork.as_mut().unwrap().signals = sig.clone();
        let b = s.encode();
        assert_eq!(State::decode(&b).unwrap().fork.unwrap().signals, sig);
        let mut dense = sample();
        dense.fork.as_mut().unwrap().signals = alloc::vec![7; 2083];
        assert!(b.len() + 1000 < dense.encode().len());
        // More than a library's signal state could be: refused, not allocated.
        dense.fork.as_mut().unwrap().signals = alloc::vec![0; MAX_SIGNAL_BYTES + 1];
        assert_eq!(State::decode(&dense.encode()), None);
    }

    #[test]
    fn a_signal_word_outside_the_state_is_refused() {
        let mut s = sample();
        let mut sig = alloc::vec![0u8; 2083];
        sig[5 * 8] = 9;
        s.fork.as_mut().unwrap().signals = sig;
        let b = s.encode();
        // The signal state's length, its one nonzero word's entry: index 5.
        let head: Vec<u8> = [2083u32, 1, 5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let at = b.windows(12).position(|w| w == &head[..]).unwrap() + 8;
        assert!(State::decode(&b).is_some());
        // The last whole word is 259 (2,080 bytes); 260 would reach into the 3-byte tail.
        for (index, ok) in [(259u32, true), (260, false), (u32::MAX, false)] {
            let mut bad = b.clone();
            bad[at..at + 4].copy_from_slice(&index.to_le_bytes());
            assert_eq!(State::decode(&bad).is_some(), ok, "index {}", index);
        }
    }

    #[test]
    fn states_round_trip_and_garbage_is_refused() {
        for s in [
            sample(),
            State {
                fork: None,
                ..sample()
            },
            State::default(),
        ] {
            let b = s.encode();
            assert_eq!(State::decode(&b), Some(s.clone()));
            for n in 0..b.len() {
                assert_eq!(State::decode(&b[..n]), None, "truncated at {n}");
            }
            let mut long = b.clone();
            long.push(0);
            assert_eq!(State::decode(&long), None);
        }
        // A descriptor naming a description that is not there.
        let mut s = sample();
        s.descriptors[0].description = 9;
        assert_eq!(State::decode(&s.encode()), None);
        // Random bytes never panic.
        let mut x: u64 = 7;
        for _ in 0..2000 {
            let mut b = sample().encode();
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) as usize % b.len();
            b[i] = (x >> 17) as u8;
            let _ = State::decode(&b);
        }
    }
}
