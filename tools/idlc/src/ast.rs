//! The parsed form of an `.idl` file.

/// A 1-based source position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    pub errors: Vec<ErrorDecl>,
    /// File-level constants (crate root).
    pub consts: Vec<Const>,
    pub flags: Vec<FlagsDecl>,
    pub enums: Vec<EnumDecl>,
    pub interfaces: Vec<Interface>,
}

/// `const NAME: T = value;`: a protocol constant (an unsigned value of an integer type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Const {
    pub name: String,
    pub pos: Pos,
    pub ty: Scalar,
    pub value: u64,
}

/// One named value of a flag set or enum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub value: u64,
    pub pos: Pos,
}

/// `flags Name: uN { A = 1, B = 2, ... }`: a set of bits; a value with a bit no member has is
/// invalid on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagsDecl {
    pub name: String,
    pub pos: Pos,
    pub base: Scalar,
    pub members: Vec<Member>,
}

impl FlagsDecl {
    /// Every bit some member has.
    pub fn all(&self) -> u64 {
        self.members.iter().fold(0, |a, m| a | m.value)
    }
}

/// `enum Name: uN { A = 1, B = 7, ... }`: one of a closed set of values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnumDecl {
    pub name: String,
    pub pos: Pos,
    pub base: Scalar,
    pub variants: Vec<Member>,
}

/// `error Name { Variant = code, ... }`: a typed error result shared by the interfaces of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorDecl {
    pub name: String,
    pub pos: Pos,
    pub variants: Vec<Variant>,
    /// The variant marked `[invalid]`, if any (index into `variants`): what dispatch answers
    /// when a flag-set or enum argument has a value its type does not declare.
    pub invalid: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    pub code: u16,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Attrs {
    pub trusted: bool,
    pub oneway: bool,
    /// On an error variant: the interface's invalid-argument error.
    pub invalid: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub pos: Pos,
    pub attrs: Attrs,
    /// The error type its methods return, if any.
    pub raises: Option<String>,
    /// Constants of the interface (in its module).
    pub consts: Vec<Const>,
    pub methods: Vec<Method>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Method {
    pub name: String,
    pub pos: Pos,
    /// The request label (1..=MAX_OPCODE).
    pub opcode: u16,
    pub attrs: Attrs,
    pub ins: Vec<Param>,
    pub outs: Vec<Param>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub pos: Pos,
    pub ty: Type,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    Bool,
}

impl Scalar {
    pub fn from_name(s: &str) -> Option<Scalar> {
        Some(match s {
            "u8" => Scalar::U8,
            "u16" => Scalar::U16,
            "u32" => Scalar::U32,
            "u64" => Scalar::U64,
            "i8" => Scalar::I8,
            "i16" => Scalar::I16,
            "i32" => Scalar::I32,
            "i64" => Scalar::I64,
            "bool" => Scalar::Bool,
            _ => return None,
        })
    }
    /// Largest value of an unsigned type (`None` for signed types and `bool`).
    pub fn unsigned_max(self) -> Option<u64> {
        match self {
            Scalar::U8 => Some(u8::MAX as u64),
            Scalar::U16 => Some(u16::MAX as u64),
            Scalar::U32 => Some(u32::MAX as u64),
            Scalar::U64 => Some(u64::MAX),
            _ => None,
        }
    }
    pub fn rust(self) -> &'static str {
        match self {
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::Bool => "bool",
        }
    }
    /// Bytes one element occupies when packed in an array.
    pub fn size(self) -> u32 {
        match self {
            Scalar::U8 | Scalar::I8 | Scalar::Bool => 1,
            Scalar::U16 | Scalar::I16 => 2,
            Scalar::U32 | Scalar::I32 => 4,
            Scalar::U64 | Scalar::I64 => 8,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// One message word.
    Scalar(Scalar),
    /// `[T; N]`: elements packed little-endian, `ceil(N*size/8)` words.
    Array(Scalar, u32),
    /// `bytes<MAX>`: a length word plus the data in the UTCB.
    Bytes(u32),
    /// One capability item.
    Cap,
    /// A capability item plus offset and size words.
    Dataspace,
    /// A flag set declared in the file (`File::flags[index]`), one word of its base type.
    Flags(Scalar, u16),
    /// An enum declared in the file (`File::enums[index]`), one word of its base type.
    Enum(Scalar, u16),
    /// A map item (at most one per message): pages of the sender's address space mapped into the
    /// receiver's receive window, plus its destination, page count and rights as three words so
    /// the receiver learns what arrived.
    Map,
}

impl Type {
    /// Words in the fixed part of the message.
    pub fn fixed_words(self) -> u32 {
        match self {
            Type::Scalar(_) | Type::Flags(..) | Type::Enum(..) => 1,
            Type::Array(s, n) => (n * s.size()).div_ceil(8),
            Type::Bytes(_) => 1,
            Type::Cap => 0,
            Type::Dataspace => 2,
            Type::Map => 3,
        }
    }
    pub fn caps(self) -> u32 {
        match self {
            Type::Cap | Type::Dataspace => 1,
            _ => 0,
        }
    }
    /// Map items.
    pub fn maps(self) -> u32 {
        match self {
            Type::Map => 1,
            _ => 0,
        }
    }
}
