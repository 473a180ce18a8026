//! The portable part of the RPC runtime used by generated stubs: message shapes, the protocol
//! error codes, the client error type, scalar encoding, packed arrays and byte buffers.
//!
//! This file is included by `rpc/mod.rs` (guest: real system calls) and by the host tests of
//! `sawmill-idlc` (a loop-back mock kernel). It expects the including module to provide
//! `IpcResult`, `utcb()` and `cap_delete(slot)`.
//!
//! Nothing here allocates or panics: every access to message arrays is bounds-checked by hand.

use super::{cap_delete, utcb};
pub use sawmill_abi::MsgTag;

/// Tag bits of the label.
pub const LABEL: u64 = 0xffff;
/// Tag bits of the word count.
pub const WORDS: u64 = 0x7f << 16;
/// Tag bits of the capability and map item counts.
pub const ITEMS: u64 = 0x3f << 24;
/// Everything that describes a message: label, words, cap and map items.
pub const SHAPE: u64 = LABEL | WORDS | ITEMS;
/// The shape without the label.
pub const SHAPE_NOLABEL: u64 = WORDS | ITEMS;

/// Reply labels a dispatcher uses for messages it cannot accept. They lie above every opcode and
/// application error code (both at most 0xefff) and below the kernel's labels (0xfff0..).
pub mod proto {
    /// First protocol error label.
    pub const FIRST: u16 = 0xffe0;
    /// Last protocol error label.
    pub const LAST: u16 = 0xffef;
    /// The label names no operation of the interface.
    pub const BAD_OPCODE: u16 = 0xffe0;
    /// Wrong number of words, capability items or map items for the operation.
    pub const BAD_SHAPE: u16 = 0xffe1;
    /// A byte buffer's length exceeds its maximum (or its data does not fit the message).
    pub const BAD_LENGTH: u16 = 0xffe2;
    /// A scalar does not fit its type (a bool other than 0/1, an u8 above 255, ...).
    pub const BAD_VALUE: u16 = 0xffe3;
    /// The receive itself failed (never seen by a client: there is no caller).
    pub const RECV_FAILED: u16 = 0xffe4;
}

/// What a client call can fail with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error<E> {
    /// The IPC system call failed ([`sawmill_abi::Error`] code).
    Ipc(u64),
    /// The server went away (kernel label `GONE`).
    Gone,
    /// The server rejected the request as malformed ([`proto`] label).
    Protocol(u16),
    /// The reply did not have the shape or values the interface promises.
    BadReply,
    /// A byte-buffer argument is longer than the interface allows (nothing was sent).
    TooLong,
    /// The operation's own error.
    App(E),
}

impl<E> Error<E> {
    /// Whether this failure proves the server itself is gone: the kernel answered for a destroyed
    /// server (`GONE`) or woke the caller because its partner went away (`PeerGone`). A refusal by
    /// the stub (`TooLong`), a protocol label, a malformed reply or any other IPC error says
    /// nothing of the kind, so a caller must never take a peer for dead on those: whoever can
    /// provoke them would take the peer away from everyone (issue 12, hole 1).
    pub fn peer_died(&self) -> bool {
        match self {
            Error::Gone => true,
            Error::Ipc(code) => *code == sawmill_abi::Error::PeerGone as u64,
            _ => false,
        }
    }

    /// [`Self::peer_died`], or our capability to the server is gone (`BadCap`): root revokes a
    /// dead incarnation's endpoints (issue 16), which empties every copy of a capability to
    /// it, possibly before a call of ours finds it dead. Only a revocation empties a slot a
    /// caller holds, so this too is proof, not a guess.
    pub fn server_gone(&self) -> bool {
        self.peer_died()
            || matches!(self, Error::Ipc(code) if *code == sawmill_abi::Error::BadCap as u64)
    }
}

/// An interface's error type: codes 1..=0xefff.
pub trait AppError: Sized {
    fn code(&self) -> u16;
    fn from_code(c: u16) -> Option<Self>;
}

impl AppError for core::convert::Infallible {
    fn code(&self) -> u16 {
        match *self {}
    }
    fn from_code(_: u16) -> Option<Self> {
        None
    }
}

/// Classifies a reply that failed the fast check. Out of line: the fast path stays short.
#[cold]
#[inline(never)]
pub fn fail<E: AppError>(err: u64, tag: MsgTag) -> Error<E> {
    if err != 0 {
        return Error::Ipc(err);
    }
    let l = tag.label();
    if l == 0 {
        Error::BadReply
    } else if l == sawmill_abi::label::GONE {
        Error::Gone
    } else if (proto::FIRST..=proto::LAST).contains(&l) {
        Error::Protocol(l)
    } else {
        match E::from_code(l) {
            Some(e) => Error::App(e),
            None => Error::BadReply,
        }
    }
}

/// A reply: tag and register words; words 4.. and capability items are already in the UTCB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub tag: MsgTag,
    pub w: [u64; 4],
}

impl Reply {
    /// Label 0, no words.
    pub const EMPTY: Reply = Reply {
        tag: MsgTag(0),
        w: [0; 4],
    };

    #[inline(always)]
    pub const fn label(l: u16) -> Reply {
        Reply {
            tag: MsgTag(l as u64),
            w: [0; 4],
        }
    }

    #[inline(always)]
    pub fn error<E: AppError>(e: &E) -> Reply {
        Reply::label(e.code())
    }
}

/// Deletes the `n` capabilities that arrived in `caps_in[0..n]`.
#[inline]
pub fn drop_caps(n: usize) {
    let u = utcb();
    let slots = u.caps_in;
    for s in slots.iter().take(n) {
        let _ = cap_delete(*s);
    }
}

/// Rejects a malformed request: deletes whatever capabilities came with it and answers with a
/// [`proto`] label.
#[cold]
#[inline(never)]
pub fn reject(err: u64, tag: MsgTag, code: u16) -> Reply {
    if err == 0 && tag.caps() != 0 {
        drop_caps(tag.caps());
    }
    Reply::label(code)
}

/// Scalars as message words and as packed array lanes.
pub trait Wire: Copy {
    /// Bytes of one packed lane.
    const SIZE: usize;
    const ZERO: Self;
    /// As a message word (signed values sign-extended).
    fn enc(self) -> u64;
    /// From a message word, rejecting values outside the type.
    fn dec(w: u64) -> Option<Self>;
    /// From a message word, truncating (for trusted peers; still memory-safe).
    fn dec_trusted(w: u64) -> Self;
    /// As a zero-extended lane of SIZE bytes.
    fn lane(self) -> u64;
    /// From a lane (already masked to SIZE bytes).
    fn from_lane(l: u64) -> Option<Self>;
}

macro_rules! wire_int {
    ($t:ty, $u:ty, $size:expr) => {
        impl Wire for $t {
            const SIZE: usize = $size;
            const ZERO: Self = 0;
            #[inline(always)]
            fn enc(self) -> u64 {
                self as i128 as u64
            }
            #[inline(always)]
            fn dec(w: u64) -> Option<Self> {
                let v = w as $t;
                if v as i128 as u64 == w {
                    Some(v)
                } else {
                    None
                }
            }
            #[inline(always)]
            fn dec_trusted(w: u64) -> Self {
                w as $t
            }
            #[inline(always)]
            fn lane(self) -> u64 {
                self as $u as u64
            }
            #[inline(always)]
            fn from_lane(l: u64) -> Option<Self> {
                Some(l as $u as $t)
            }
        }
    };
}

wire_int!(u8, u8, 1);
wire_int!(u16, u16, 2);
wire_int!(u32, u32, 4);
wire_int!(u64, u64, 8);
wire_int!(i8, u8, 1);
wire_int!(i16, u16, 2);
wire_int!(i32, u32, 4);
wire_int!(i64, u64, 8);

impl Wire for bool {
    const SIZE: usize = 1;
    const ZERO: Self = false;
    #[inline(always)]
    fn enc(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn dec(w: u64) -> Option<Self> {
        match w {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    #[inline(always)]
    fn dec_trusted(w: u64) -> Self {
        w != 0
    }
    #[inline(always)]
    fn lane(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn from_lane(l: u64) -> Option<Self> {
        Self::dec(l)
    }
}

/// Packs an array into words, little-endian lanes of `T::SIZE` bytes. `out` starts zeroed.
#[inline(always)]
pub fn pack<T: Wire, const N: usize>(a: &[T; N], out: &mut [u64]) {
    let per = 8 / T::SIZE;
    for (i, v) in a.iter().enumerate() {
        if let Some(w) = out.get_mut(i / per) {
            *w |= v.lane() << ((i % per) * T::SIZE * 8);
        }
    }
}

/// Unpacks an array from words; `None` if a lane is not a valid `T` or words are missing.
#[inline(always)]
pub fn unpack<T: Wire, const N: usize>(w: &[u64]) -> Option<[T; N]> {
    let per = 8 / T::SIZE;
    let mask = if T::SIZE == 8 {
        !0u64
    } else {
        (1u64 << (T::SIZE * 8)) - 1
    };
    let mut a = [T::ZERO; N];
    for (i, v) in a.iter_mut().enumerate() {
        let word = *w.get(i / per)?;
        *v = T::from_lane((word >> ((i % per) * T::SIZE * 8)) & mask)?;
    }
    Some(a)
}

/// Words `len` bytes occupy.
#[inline(always)]
pub const fn words_for(len: u64) -> usize {
    len.div_ceil(8) as usize
}

/// Copies `data` into `mr` from word `word` on (zero-padding the last word); returns the words
/// used, or copies nothing and returns 0 if it would not fit (callers bound lengths first).
#[inline]
pub fn put_bytes(mr: &mut [u64; 64], word: usize, data: &[u8]) -> usize {
    let n = words_for(data.len() as u64);
    let Some(dst) = mr.get_mut(word..word.saturating_add(n)) else {
        return 0;
    };
    if let Some(last) = dst.last_mut() {
        *last = 0;
    }
    // SAFETY: `dst` is `n` words, at least `data.len()` bytes, and does not overlap `data` (the
    // caller's); on a little-endian machine a word's bytes in memory are its `to_le_bytes`, the
    // message's byte order. One copy instead of a loop per byte (an inner loop the compiler may
    // not inline into a large server loop).
    unsafe {
        core::ptr::copy_nonoverlapping(data.as_ptr(), dst.as_mut_ptr().cast::<u8>(), data.len())
    };
    n
}

// The byte copies above and in `Bytes::fill` rely on it.
const _: () = assert!(cfg!(target_endian = "little"));

/// A byte buffer of at most `N` bytes (a `bytes<N>` result).
#[derive(Clone, Copy)]
pub struct Bytes<const N: usize> {
    len: usize,
    buf: [u8; N],
}

impl<const N: usize> Bytes<N> {
    #[inline(always)]
    pub const fn new() -> Self {
        Bytes {
            len: 0,
            buf: [0; N],
        }
    }
    /// `None` if `s` is longer than `N`.
    #[inline]
    pub fn from_slice(s: &[u8]) -> Option<Self> {
        let mut b = Self::new();
        if b.set(s) {
            Some(b)
        } else {
            None
        }
    }
    /// Replaces the contents; false (and unchanged) if `s` is longer than `N`.
    #[inline]
    pub fn set(&mut self, s: &[u8]) -> bool {
        match self.buf.get_mut(..s.len()) {
            Some(d) => {
                d.copy_from_slice(s);
                self.len = s.len();
                true
            }
            None => false,
        }
    }
    /// The whole backing array, for filling in place before [`Bytes::set_len`].
    #[inline(always)]
    pub fn buf_mut(&mut self) -> &mut [u8; N] {
        &mut self.buf
    }
    /// False (and unchanged) if `n > N`.
    #[inline(always)]
    pub fn set_len(&mut self, n: usize) -> bool {
        if n <= N {
            self.len = n;
            true
        } else {
            false
        }
    }
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    pub fn as_slice(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
    /// Fills from message words `mr[word..]`; false if `len > N` or the data would run past the
    /// message registers.
    #[inline]
    pub fn fill(&mut self, mr: &[u64; 64], word: usize, len: usize) -> bool {
        if len > N {
            return false;
        }
        let Some(src) = mr.get(word..word.saturating_add(words_for(len as u64))) else {
            return false;
        };
        let Some(dst) = self.buf.get_mut(..len) else {
            return false;
        };
        // SAFETY: `src` is at least `len` bytes of words (checked above) and is not `dst`; the
        // words' bytes in memory are the message's bytes in order (little-endian, see
        // `put_bytes`).
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr().cast::<u8>(), dst.as_mut_ptr(), len) };
        self.len = len;
        true
    }
}

impl<const N: usize> Default for Bytes<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::ops::Deref for Bytes<N> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl<const N: usize> PartialEq for Bytes<N> {
    fn eq(&self, o: &Self) -> bool {
        self.as_slice() == o.as_slice()
    }
}
impl<const N: usize> Eq for Bytes<N> {}

impl<const N: usize> core::fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Bytes<{N}>({:?})", self.as_slice())
    }
}

/// A map item of a reply (IDL type `map`): `pages` pages at the sender's `src` mapped to the
/// receiver's `dst` with rights `flags` (`sawmill_abi::map`). The receiver sees `src` as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Map {
    pub src: u64,
    pub dst: u64,
    pub pages: u64,
    pub flags: u64,
}

impl Map {
    /// The kernel's form, for the UTCB.
    #[inline(always)]
    pub fn item(&self) -> sawmill_abi::MapItem {
        sawmill_abi::MapItem {
            src: self.src,
            dst: self.dst,
            pages: self.pages,
            flags: self.flags,
        }
    }
}

/// A reference to bulk data: a dataspace capability and a range in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dataspace {
    pub cap: u64,
    pub offset: u64,
    pub size: u64,
}
