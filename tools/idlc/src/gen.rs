//! Rust code generation. The emitted code is `no_std`, allocation-free and panic-free: every index
//! is a constant within the message arrays or goes through the checked helpers of the runtime.
use crate::ast::*;
use crate::check::Layout;
use std::fmt::Write;

/// Generator options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Path of the RPC runtime module the generated code uses (see `docs/idl.md`).
    pub runtime: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            runtime: "crate::rpc".to_string(),
        }
    }
}

/// `get_info` -> `GetInfo`.
fn camel(s: &str) -> String {
    s.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The Rust type of a parameter, as named inside an interface module.
fn in_ty(f: &File, t: Type) -> String {
    match t {
        Type::Scalar(s) => s.rust().to_string(),
        Type::Flags(_, i) => format!("super::{}", f.flags[i as usize].name),
        Type::Enum(_, i) => format!("super::{}", f.enums[i as usize].name),
        Type::Array(s, n) => format!("[{}; {n}]", s.rust()),
        Type::Bytes(_) => "&[u8]".to_string(),
        Type::Cap => "u64".to_string(),
        Type::Dataspace => "__rt::Dataspace".to_string(),
        Type::Map => "__rt::Map".to_string(),
    }
}

fn out_ty(f: &File, t: Type) -> String {
    match t {
        Type::Bytes(n) => format!("__rt::Bytes<{n}>"),
        _ => in_ty(f, t),
    }
}

fn out_type(f: &File, m: &Method) -> String {
    match m.outs.len() {
        0 => "()".to_string(),
        1 => out_ty(f, m.outs[0].ty),
        _ => format!("{}Out", camel(&m.name)),
    }
}

/// Expression reading message word `i` (registers for 0..4, else the UTCB).
fn word(i: u32) -> String {
    if i < 4 {
        format!("__m.w[{i}]")
    } else {
        format!("__u.mr[{i}]")
    }
}

/// Code that encodes `ps` (values in locals named like the parameters) into a message: statements
/// writing the UTCB, the four register expressions and an expression for the word count. Byte
/// buffers must have been length-checked before.
struct Encoded {
    stmts: String,
    regs: [String; 4],
    words: String,
    caps: u32,
    maps: u32,
}

fn encode(ps: &[Param], l: &Layout, ind: &str) -> Encoded {
    let mut st = String::new();
    let mut regs: [String; 4] = Default::default();
    for r in regs.iter_mut() {
        *r = "0".to_string();
    }
    let needs_utcb = l.max_words > 4 || l.caps > 0 || l.maps > 0;
    if needs_utcb {
        let _ = writeln!(st, "{ind}let __u = __rt::utcb();");
    }
    let mut put = |st: &mut String, i: u32, e: String| {
        if i < 4 {
            regs[i as usize] = e;
        } else {
            let _ = writeln!(st, "{ind}__u.mr[{i}] = {e};");
        }
    };
    for (p, &(w, c)) in ps.iter().zip(&l.slots) {
        let n = &p.name;
        match p.ty {
            Type::Scalar(_) => put(&mut st, w.unwrap(), format!("__rt::Wire::enc({n})")),
            Type::Flags(..) => put(&mut st, w.unwrap(), format!("__rt::Wire::enc({n}.bits())")),
            Type::Enum(b, _) => put(
                &mut st,
                w.unwrap(),
                format!("__rt::Wire::enc({n} as {})", b.rust()),
            ),
            Type::Array(_, _) => {
                let nw = p.ty.fixed_words();
                let _ = writeln!(st, "{ind}let mut __a_{n} = [0u64; {nw}];");
                let _ = writeln!(st, "{ind}__rt::pack(&{n}, &mut __a_{n});");
                for k in 0..nw {
                    put(&mut st, w.unwrap() + k, format!("__a_{n}[{k}]"));
                }
            }
            Type::Bytes(_) => put(&mut st, w.unwrap(), format!("{n}.len() as u64")),
            Type::Cap => {
                let _ = writeln!(st, "{ind}__u.caps_out[{}] = {n};", c.unwrap());
            }
            Type::Dataspace => {
                let _ = writeln!(st, "{ind}__u.caps_out[{}] = {n}.cap;", c.unwrap());
                put(&mut st, w.unwrap(), format!("{n}.offset"));
                put(&mut st, w.unwrap() + 1, format!("{n}.size"));
            }
            Type::Map => {
                // The item itself, and what it maps as words (at most one per message: checked).
                let _ = writeln!(st, "{ind}__u.map_items[0] = {n}.item();");
                put(&mut st, w.unwrap(), format!("{n}.dst"));
                put(&mut st, w.unwrap() + 1, format!("{n}.pages"));
                put(&mut st, w.unwrap() + 2, format!("{n}.flags"));
            }
        }
    }
    let words = if l.has_bytes {
        let _ = writeln!(st, "{ind}let mut __off: usize = {};", l.data_base);
        for p in ps {
            if let Type::Bytes(_) = p.ty {
                let _ = writeln!(
                    st,
                    "{ind}__off += __rt::put_bytes(&mut __u.mr, __off, &{}[..]);",
                    p.name
                );
            }
        }
        "(__off as u64)".to_string()
    } else {
        l.fixed.to_string()
    };
    Encoded {
        stmts: st,
        regs,
        words,
        caps: l.caps,
        maps: l.maps,
    }
}

/// Code that decodes `ps` from the received message `__m` into locals named like the parameters.
/// `bad(code)` yields the statement that rejects the message. `caps_from(k, name)` is where the
/// k-th received capability is. The caller has already checked the cap/map counts (and, without
/// buffers, the word count).
// The eight inputs are the message shape and the three ways a value can be refused; bundling
// them would only rename the arguments.
#[allow(clippy::too_many_arguments)]
fn decode(
    f: &File,
    ps: &[Param],
    l: &Layout,
    ind: &str,
    trusted: bool,
    invalid: &str,
    bad: &dyn Fn(&str) -> String,
    caps_from: &dyn Fn(u32, &str) -> String,
) -> String {
    let mut st = String::new();
    if l.max_words > 4 || l.has_bytes {
        let _ = writeln!(st, "{ind}let __u = __rt::utcb();");
    }
    for (p, &(w, c)) in ps.iter().zip(&l.slots) {
        let n = &p.name;
        match p.ty {
            Type::Scalar(s) => {
                let x = word(w.unwrap());
                if trusted || matches!(s, Scalar::U64 | Scalar::I64) {
                    let _ = writeln!(
                        st,
                        "{ind}let {n} = <{} as __rt::Wire>::dec_trusted({x});",
                        s.rust()
                    );
                } else {
                    let _ = writeln!(
                        st,
                        "{ind}let {n} = match <{} as __rt::Wire>::dec({x}) {{ Some(v) => v, None => {{ {} }} }};",
                        s.rust(),
                        bad("__rt::proto::BAD_VALUE")
                    );
                }
            }
            Type::Flags(b, i) => {
                let x = word(w.unwrap());
                let name = &f.flags[i as usize].name;
                if trusted {
                    let _ = writeln!(
                        st,
                        "{ind}let {n} = super::{name}::from_bits_truncate(<{} as __rt::Wire>::dec_trusted({x}));",
                        b.rust()
                    );
                } else {
                    let _ = writeln!(
                        st,
                        "{ind}let {n} = match <{} as __rt::Wire>::dec({x}).and_then(super::{name}::from_bits) {{ Some(v) => v, None => {{ {} }} }};",
                        b.rust(),
                        bad(invalid)
                    );
                }
            }
            Type::Enum(b, i) => {
                // Checked even from a trusted peer: an enum with an undeclared value cannot exist.
                let x = word(w.unwrap());
                let name = &f.enums[i as usize].name;
                let _ = writeln!(
                    st,
                    "{ind}let {n} = match <{} as __rt::Wire>::dec({x}).and_then(super::{name}::from_repr) {{ Some(v) => v, None => {{ {} }} }};",
                    b.rust(),
                    bad(invalid)
                );
            }
            Type::Array(s, len) => {
                let nw = p.ty.fixed_words();
                let ws: Vec<String> = (0..nw).map(|k| word(w.unwrap() + k)).collect();
                let _ = writeln!(
                    st,
                    "{ind}let {n}: [{}; {len}] = match __rt::unpack(&[{}]) {{ Some(v) => v, None => {{ {} }} }};",
                    s.rust(),
                    ws.join(", "),
                    bad("__rt::proto::BAD_VALUE")
                );
            }
            Type::Bytes(max) => {
                let _ = writeln!(st, "{ind}let __len_{n} = {};", word(w.unwrap()));
                let _ = writeln!(
                    st,
                    "{ind}if __len_{n} > {max} {{ {} }}",
                    bad("__rt::proto::BAD_LENGTH")
                );
            }
            Type::Cap => {
                let _ = writeln!(st, "{ind}let {n}: u64 = {};", caps_from(c.unwrap(), n));
            }
            Type::Dataspace => {
                let _ = writeln!(
                    st,
                    "{ind}let {n} = __rt::Dataspace {{ cap: {}, offset: {}, size: {} }};",
                    caps_from(c.unwrap(), n),
                    word(w.unwrap()),
                    word(w.unwrap() + 1)
                );
            }
            Type::Map => {
                // The sender's address is not the receiver's business.
                let _ = writeln!(
                    st,
                    "{ind}let {n} = __rt::Map {{ src: 0, dst: {}, pages: {}, flags: {} }};",
                    word(w.unwrap()),
                    word(w.unwrap() + 1),
                    word(w.unwrap() + 2)
                );
            }
        }
    }
    if l.has_bytes {
        // The word count must be exactly what the (now bounded) lengths imply.
        let mut sum = format!("{}", l.data_base);
        for p in ps {
            if let Type::Bytes(_) = p.ty {
                sum += &format!(" + __rt::words_for(__len_{})", p.name);
            }
        }
        if !trusted {
            let _ = writeln!(
                st,
                "{ind}if __m.tag.words() != {sum} {{ {} }}",
                bad("__rt::proto::BAD_SHAPE")
            );
        }
        let _ = writeln!(st, "{ind}let mut __off: usize = {};", l.data_base);
        for p in ps {
            if let Type::Bytes(max) = p.ty {
                let n = &p.name;
                let _ = writeln!(st, "{ind}let mut {n} = __rt::Bytes::<{max}>::new();");
                let _ = writeln!(
                    st,
                    "{ind}if !{n}.fill(&__u.mr, __off, __len_{n} as usize) {{ {} }}",
                    bad("__rt::proto::BAD_LENGTH")
                );
                let _ = writeln!(st, "{ind}__off += __rt::words_for(__len_{n});");
            }
        }
        let _ = writeln!(st, "{ind}let _ = __off;");
    }
    st
}

/// Generates the Rust source for one parsed and checked file.
pub fn generate(f: &File, opts: &Options) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "// Generated by sawmill-idlc. Do not edit.\n");
    for c in &f.consts {
        gen_const(&mut o, c, "");
    }
    if !f.consts.is_empty() {
        o.push('\n');
    }
    for d in &f.flags {
        gen_flags(&mut o, d);
    }
    for d in &f.enums {
        gen_enum(&mut o, d);
    }
    for e in &f.errors {
        gen_error(&mut o, e, &opts.runtime);
    }
    for it in &f.interfaces {
        gen_interface(&mut o, f, it, &opts.runtime);
    }
    o
}

fn gen_const(o: &mut String, c: &Const, ind: &str) {
    let _ = writeln!(o, "{ind}/// Protocol constant (generated).");
    let _ = writeln!(
        o,
        "{ind}pub const {}: {} = {:#x};",
        c.name,
        c.ty.rust(),
        c.value
    );
}

fn gen_flags(o: &mut String, d: &FlagsDecl) {
    let (n, b) = (&d.name, d.base.rust());
    let _ = writeln!(
        o,
        "/// Flag set `{n}` (generated): bits of a `{b}`; a value with other bits is invalid."
    );
    let _ = writeln!(
        o,
        "#[repr(transparent)]\n#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]\npub struct {n}({b});\n"
    );
    let _ = writeln!(o, "#[allow(dead_code)]\nimpl {n} {{");
    for m in &d.members {
        let _ = writeln!(o, "    pub const {}: {n} = {n}({:#x});", m.name, m.value);
    }
    let _ = writeln!(o, "    /// No flags.\n    pub const EMPTY: {n} = {n}(0);");
    let _ = writeln!(
        o,
        "    /// Every flag.\n    pub const ALL: {n} = {n}({:#x});",
        d.all()
    );
    let _ = writeln!(
        o,
        "    #[inline(always)]\n    pub const fn bits(self) -> {b} {{\n        self.0\n    }}"
    );
    let _ = writeln!(o, "    /// `None` if `bits` has a bit no flag has.");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn from_bits(bits: {b}) -> Option<{n}> {{\n        if bits & !Self::ALL.0 == 0 {{ Some({n}(bits)) }} else {{ None }}\n    }}");
    let _ = writeln!(
        o,
        "    /// `bits` as they are, unknown bits included (raw values, tests of hostile input):"
    );
    let _ = writeln!(o, "    /// a receiver still rejects unknown bits.");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn from_bits_retain(bits: {b}) -> {n} {{\n        {n}(bits)\n    }}");
    let _ = writeln!(o, "    /// `bits` without the bits no flag has.");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn from_bits_truncate(bits: {b}) -> {n} {{\n        {n}(bits & Self::ALL.0)\n    }}");
    let _ = writeln!(o, "    /// Whether every bit of `other` is set in `self`.");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn contains(self, other: {n}) -> bool {{\n        self.0 & other.0 == other.0\n    }}");
    let _ = writeln!(
        o,
        "    /// Whether `self` and `other` have a bit in common."
    );
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn intersects(self, other: {n}) -> bool {{\n        self.0 & other.0 != 0\n    }}");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn is_empty(self) -> bool {{\n        self.0 == 0\n    }}");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn union(self, other: {n}) -> {n} {{\n        {n}(self.0 | other.0)\n    }}");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn intersection(self, other: {n}) -> {n} {{\n        {n}(self.0 & other.0)\n    }}");
    let _ = writeln!(o, "    /// `self` without the bits of `other`.");
    let _ = writeln!(o, "    #[inline(always)]\n    pub const fn difference(self, other: {n}) -> {n} {{\n        {n}(self.0 & !other.0)\n    }}");
    let _ = writeln!(o, "}}\n");
    for (tr, f, e, assign) in [
        ("BitOr", "bitor", "self.0 | o.0", "self.0 |= o.0"),
        ("BitAnd", "bitand", "self.0 & o.0", "self.0 &= o.0"),
        ("Sub", "sub", "self.0 & !o.0", "self.0 &= !o.0"),
    ] {
        let _ = writeln!(o, "impl core::ops::{tr} for {n} {{\n    type Output = {n};\n    #[inline(always)]\n    fn {f}(self, o: {n}) -> {n} {{\n        {n}({e})\n    }}\n}}\n");
        let _ = writeln!(o, "impl core::ops::{tr}Assign for {n} {{\n    #[inline(always)]\n    fn {f}_assign(&mut self, o: {n}) {{\n        {assign};\n    }}\n}}\n");
    }
    let _ = writeln!(o, "impl core::fmt::Debug for {n} {{");
    let _ = writeln!(
        o,
        "    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {{"
    );
    let _ = writeln!(
        o,
        "        f.write_str(\"{n}(\")?;\n        let mut sep = \"\";"
    );
    for m in &d.members {
        let _ = writeln!(o, "        if self.contains({n}::{0}) {{\n            f.write_str(sep)?;\n            f.write_str(\"{0}\")?;\n            sep = \" | \";\n        }}", m.name);
    }
    let _ = writeln!(o, "        if self.0 & !{n}::ALL.0 != 0 {{\n            write!(f, \"{{sep}}{{:#x}}\", self.0 & !{n}::ALL.0)?;\n        }}");
    let _ = writeln!(o, "        f.write_str(\")\")\n    }}\n}}\n");
}

fn gen_enum(o: &mut String, d: &EnumDecl) {
    let (n, b) = (&d.name, d.base.rust());
    let _ = writeln!(
        o,
        "/// Enum `{n}` (generated): one `{b}`; other values are invalid."
    );
    let _ = writeln!(
        o,
        "#[repr({b})]\n#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\npub enum {n} {{"
    );
    for v in &d.variants {
        let _ = writeln!(o, "    {} = {:#x},", v.name, v.value);
    }
    let _ = writeln!(o, "}}\n");
    let _ = writeln!(o, "#[allow(dead_code)]\nimpl {n} {{");
    let _ = writeln!(o, "    /// `None` if no variant has the value `v`.");
    let _ = writeln!(
        o,
        "    #[inline]\n    pub const fn from_repr(v: {b}) -> Option<{n}> {{\n        match v {{"
    );
    for v in &d.variants {
        let _ = writeln!(o, "            {:#x} => Some({n}::{}),", v.value, v.name);
    }
    let _ = writeln!(o, "            _ => None,\n        }}\n    }}");
    let _ = writeln!(
        o,
        "    #[inline(always)]\n    pub const fn repr(self) -> {b} {{\n        self as {b}\n    }}\n}}\n"
    );
    let _ = writeln!(o, "impl core::convert::TryFrom<{b}> for {n} {{\n    type Error = {b};\n    /// The value back as the error if no variant has it.\n    #[inline]\n    fn try_from(v: {b}) -> Result<{n}, {b}> {{\n        match {n}::from_repr(v) {{\n            Some(x) => Ok(x),\n            None => Err(v),\n        }}\n    }}\n}}\n");
    let _ = writeln!(o, "impl From<{n}> for {b} {{\n    #[inline(always)]\n    fn from(v: {n}) -> {b} {{\n        v as {b}\n    }}\n}}\n");
}

fn gen_error(o: &mut String, e: &ErrorDecl, rt: &str) {
    let _ = writeln!(
        o,
        "#[repr(u16)]\n#[derive(Clone, Copy, Debug, PartialEq, Eq)]\npub enum {} {{",
        e.name
    );
    for v in &e.variants {
        let _ = writeln!(o, "    {} = {},", v.name, v.code);
    }
    let _ = writeln!(o, "}}\n");
    let _ = writeln!(o, "impl {rt}::AppError for {} {{", e.name);
    let _ = writeln!(
        o,
        "    #[inline(always)]\n    fn code(&self) -> u16 {{ *self as u16 }}"
    );
    let _ = writeln!(
        o,
        "    #[inline]\n    fn from_code(c: u16) -> Option<Self> {{\n        match c {{"
    );
    for v in &e.variants {
        let _ = writeln!(o, "            {} => Some({}::{}),", v.code, e.name, v.name);
    }
    let _ = writeln!(o, "            _ => None,\n        }}\n    }}\n}}\n");
}

fn gen_interface(o: &mut String, f: &File, it: &Interface, rt: &str) {
    let _ = writeln!(o, "/// Interface `{}` (generated).", it.name);
    let _ = writeln!(o, "#[allow(unused_imports, unused_variables, unused_mut, unused_assignments, unreachable_code, clippy::all)]");
    let _ = writeln!(o, "pub mod {} {{", it.name);
    let _ = writeln!(o, "    use {rt} as __rt;\n");
    let _ = writeln!(
        o,
        "    /// The interface name (the endpoint name in system manifests)."
    );
    let _ = writeln!(o, "    pub const NAME: &str = \"{}\";", it.name);
    for c in &it.consts {
        gen_const(o, c, "    ");
    }
    match &it.raises {
        Some(r) => {
            let _ = writeln!(
                o,
                "    /// The interface's error type.\n    pub type AppError = super::{r};"
            );
        }
        None => {
            let _ = writeln!(o, "    /// The interface raises no errors of its own.\n    pub type AppError = core::convert::Infallible;");
        }
    }
    let _ = writeln!(o, "    /// What a client call returns.\n    pub type Result<T> = core::result::Result<T, __rt::Error<AppError>>;\n");
    let _ = writeln!(o, "    /// Request labels.\n    pub mod op {{");
    for m in &it.methods {
        let _ = writeln!(
            o,
            "        pub const {}: u16 = {};",
            m.name.to_ascii_uppercase(),
            m.opcode
        );
    }
    let _ = writeln!(o, "    }}\n");
    for m in &it.methods {
        if m.outs.len() > 1 {
            let _ = writeln!(o, "    /// Results of `{}`.\n    #[derive(Clone, Copy, Debug, PartialEq, Eq)]\n    pub struct {}Out {{", m.name, camel(&m.name));
            for p in &m.outs {
                let _ = writeln!(o, "        pub {}: {},", p.name, out_ty(f, p.ty));
            }
            let _ = writeln!(o, "    }}\n");
        }
    }
    gen_client(o, f, it);
    gen_server(o, f, it);
    let _ = writeln!(o, "}}\n");
}

fn gen_client(o: &mut String, f: &File, it: &Interface) {
    let _ = writeln!(o, "    /// Client handle: an endpoint capability slot.");
    let _ = writeln!(o, "    #[derive(Clone, Copy, Debug, PartialEq, Eq)]\n    pub struct Client {{\n        pub ep: u64,\n    }}\n");
    let _ = writeln!(o, "    impl Client {{");
    let _ = writeln!(o, "        #[inline(always)]\n        pub const fn new(ep: u64) -> Client {{\n            Client {{ ep }}\n        }}\n");
    for m in &it.methods {
        let trusted = it.attrs.trusted || m.attrs.trusted;
        let li = Layout::of(&m.ins);
        let lo = Layout::of(&m.outs);
        let mut args: Vec<String> = m
            .ins
            .iter()
            .map(|p| format!("{}: {}", p.name, in_ty(f, p.ty)))
            .collect();
        for p in &m.outs {
            if p.ty.caps() > 0 {
                args.push(format!("{}_rx: u64", p.name));
            }
            if p.ty.maps() > 0 {
                args.push(format!("{}_rx: [u64; 2]", p.name));
            }
        }
        let ret = if m.attrs.oneway {
            "()".to_string()
        } else {
            out_type(f, m)
        };
        let _ = writeln!(
            o,
            "        /// `{}` (opcode {}{}{}).",
            m.name,
            m.opcode,
            if m.attrs.oneway { ", oneway" } else { "" },
            if trusted { ", trusted" } else { "" }
        );
        if m.outs.iter().any(|p| p.ty.caps() > 0) {
            let _ = writeln!(
                o,
                "        /// `*_rx`: empty slots where the returned capabilities land."
            );
        }
        if m.outs.iter().any(|p| p.ty.maps() > 0) {
            let _ = writeln!(
                o,
                "        /// `<map>_rx`: the receive window `[base, size]` the returned mapping may land in"
            );
            let _ = writeln!(o, "        /// (open only during the call).");
        }
        let _ = writeln!(o, "        #[inline(always)]");
        let sep = if args.is_empty() { "" } else { ", " };
        let _ = writeln!(
            o,
            "        pub fn {}(&self{sep}{}) -> Result<{ret}> {{",
            m.name,
            args.join(", ")
        );
        let ind = "            ";
        for p in &m.ins {
            if let Type::Bytes(max) = p.ty {
                let _ = writeln!(
                    o,
                    "{ind}if {}.len() > {max} {{ return Err(__rt::Error::TooLong); }}",
                    p.name
                );
            }
        }
        let enc = encode(&m.ins, &li, ind);
        o.push_str(&enc.stmts);
        for (k, p) in m.outs.iter().filter(|p| p.ty.caps() > 0).enumerate() {
            if k == 0 && enc.caps == 0 && !enc.stmts.contains("let __u") {
                let _ = writeln!(o, "{ind}let __u = __rt::utcb();");
            }
            let _ = writeln!(o, "{ind}__u.caps_in[{k}] = {}_rx;", p.name);
        }
        let map_out = m.outs.iter().find(|p| p.ty.maps() > 0);
        if let Some(p) = map_out {
            if !enc.stmts.contains("let __u") && !m.outs.iter().any(|p| p.ty.caps() > 0) {
                let _ = writeln!(o, "{ind}let __u = __rt::utcb();");
            }
            let _ = writeln!(o, "{ind}__u.map_window = {}_rx;", p.name);
        }
        let maps = if enc.maps > 0 {
            format!(" | {} << 27", enc.maps)
        } else {
            String::new()
        };
        let tag = format!(
            "__rt::MsgTag(op::{} as u64 | {} << 16 | {} << 24{maps})",
            m.name.to_ascii_uppercase(),
            enc.words,
            enc.caps
        );
        let regs = enc.regs.join(", ");
        if m.attrs.oneway {
            let _ = writeln!(o, "{ind}let __e = __rt::send(self.ep, {tag}, [{regs}]);");
            let _ = writeln!(o, "{ind}if __e != 0 {{ return Err(__rt::Error::Ipc(__e)); }}\n{ind}Ok(())\n        }}\n");
            continue;
        }
        let _ = writeln!(o, "{ind}let __m = __rt::call(self.ep, {tag}, [{regs}]);");
        if map_out.is_some() {
            // Closed again at once: nobody else may map into us through a later message.
            let _ = writeln!(o, "{ind}__u.map_window = [0, 0];");
        }
        if trusted {
            let _ = writeln!(o, "{ind}if (__m.err | __m.tag.0 & __rt::LABEL) != 0 {{ return Err(__rt::fail(__m.err, __m.tag)); }}");
        } else if lo.has_bytes {
            let _ = writeln!(o, "{ind}if (__m.err | (__m.tag.0 & (__rt::LABEL | __rt::ITEMS) ^ ({} << 24 | {} << 27))) != 0 {{ return Err(__rt::fail(__m.err, __m.tag)); }}", lo.caps, lo.maps);
        } else if lo.maps > 0 {
            let _ = writeln!(o, "{ind}if (__m.err | (__m.tag.0 & __rt::SHAPE ^ ({} << 16 | {} << 24 | {} << 27))) != 0 {{ return Err(__rt::fail(__m.err, __m.tag)); }}", lo.fixed, lo.caps, lo.maps);
        } else {
            let _ = writeln!(o, "{ind}if (__m.err | (__m.tag.0 & __rt::SHAPE ^ ({} << 16 | {} << 24))) != 0 {{ return Err(__rt::fail(__m.err, __m.tag)); }}", lo.fixed, lo.caps);
        }
        let bad = |_: &str| "return Err(__rt::Error::BadReply);".to_string();
        let capf = |_: u32, n: &str| format!("{n}_rx");
        o.push_str(&decode(f, &m.outs, &lo, ind, trusted, "", &bad, &capf));
        match m.outs.len() {
            0 => {
                let _ = writeln!(o, "{ind}Ok(())");
            }
            1 => {
                let _ = writeln!(o, "{ind}Ok({})", m.outs[0].name);
            }
            _ => {
                let names: Vec<&str> = m.outs.iter().map(|p| p.name.as_str()).collect();
                let _ = writeln!(
                    o,
                    "{ind}Ok({}Out {{ {} }})",
                    camel(&m.name),
                    names.join(", ")
                );
            }
        }
        let _ = writeln!(o, "        }}\n");
    }
    let _ = writeln!(o, "    }}\n");
}

fn gen_server(o: &mut String, f: &File, it: &Interface) {
    // A flag-set or enum argument with an undeclared value: the interface's `[invalid]` error if
    // its error type has one, else the protocol's BAD_VALUE.
    let invalid = it
        .raises
        .as_ref()
        .and_then(|r| f.errors.iter().find(|e| &e.name == r))
        .and_then(|e| {
            e.invalid
                .map(|i| format!("super::{}::{} as u16", e.name, e.variants[i].name))
        })
        .unwrap_or_else(|| "__rt::proto::BAD_VALUE".to_string());
    let _ = writeln!(o, "    /// Server side: one handler per operation; `badge` identifies the caller's capability.");
    let _ = writeln!(o, "    /// Received capabilities are valid during the handler only (dispatch deletes them after");
    let _ = writeln!(o, "    /// it returns); copy them to keep them.");
    let _ = writeln!(o, "    pub trait Server {{");
    for m in &it.methods {
        let mut args = vec!["badge: u64".to_string()];
        args.extend(
            m.ins
                .iter()
                .map(|p| format!("{}: {}", p.name, in_ty(f, p.ty))),
        );
        let ret = if m.attrs.oneway {
            String::new()
        } else {
            format!(" -> core::result::Result<{}, AppError>", out_type(f, m))
        };
        let _ = writeln!(
            o,
            "        fn {}(&mut self, {}){ret};",
            m.name,
            args.join(", ")
        );
    }
    let _ = writeln!(o, "    }}\n");

    let _ = writeln!(
        o,
        "    /// Decodes and checks one received message, calls the handler and encodes the reply."
    );
    let _ = writeln!(
        o,
        "    /// Malformed messages get a `__rt::proto` error label; nothing here can panic."
    );
    let _ = writeln!(o, "    #[inline]");
    let _ = writeln!(o, "    pub fn dispatch<S: Server + ?Sized>(srv: &mut S, m: &__rt::IpcResult) -> __rt::Reply {{");
    let _ = writeln!(
        o,
        "        dispatch_then(srv, m, |_: &mut S, r: __rt::Reply| r)\n    }}\n"
    );
    let _ = writeln!(o, "    /// [`dispatch`] handing the server and the reply to `__k` in each arm (`__rt::Answer`), so");
    let _ = writeln!(o, "    /// the loop's `__rt::Next` issues the reply system call with the reply's registers computed");
    let _ = writeln!(
        o,
        "    /// in place, after the handler's post-reply work is known."
    );
    let _ = writeln!(o, "    #[inline(always)]");
    let _ = writeln!(o, "    pub fn dispatch_then<S: Server + ?Sized, K: __rt::Answer<S>>(__srv: &mut S, __m: &__rt::IpcResult, __k: K) -> K::Out {{");
    let _ = writeln!(o, "        if __m.err != 0 {{ return __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::RECV_FAILED)); }}");
    // Methods whose message has a fixed shape are matched on opcode and shape in one compare;
    // those carrying byte buffers (a variable number of words) by opcode, then their items.
    let (fixed, varying): (Vec<&Method>, Vec<&Method>) = it
        .methods
        .iter()
        .partition(|m| !Layout::of(&m.ins).has_bytes);
    for m in &fixed {
        let li = Layout::of(&m.ins);
        let maps = if li.maps > 0 {
            format!(" | {} << 27", li.maps)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "        const __T_{0}: u64 = op::{0} as u64 | {1} << 16 | {2} << 24{maps};",
            m.name.to_ascii_uppercase(),
            li.fixed,
            li.caps
        );
    }
    let arm = |m: &Method| -> String {
        let mut o = String::new();
        let li = Layout::of(&m.ins);
        let lo = Layout::of(&m.outs);
        let ind = "                ";
        if li.has_bytes {
            let _ = writeln!(o, "{ind}if __m.tag.0 & __rt::ITEMS != ({} << 24 | {} << 27) {{ return __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_SHAPE)); }}", li.caps, li.maps);
        }
        let bad =
            |c: &str| format!("return __k.answer(__srv, __rt::reject(__m.err, __m.tag, {c}));");
        let capf = |k: u32, _: &str| format!("__u.caps_in[{k}]");
        let mut dec = decode(f, &m.ins, &li, ind, false, &invalid, &bad, &capf);
        if li.caps > 0 && !dec.contains("let __u") {
            dec = format!("{ind}let __u = __rt::utcb();\n{dec}");
        }
        o.push_str(&dec);
        let args: Vec<String> = m
            .ins
            .iter()
            .map(|p| match p.ty {
                Type::Bytes(_) => format!("{}.as_slice()", p.name),
                _ => p.name.clone(),
            })
            .collect();
        let sep = if args.is_empty() { "" } else { ", " };
        let _ = writeln!(
            o,
            "{ind}let __r = __srv.{}(__m.badge{sep}{});",
            m.name,
            args.join(", ")
        );
        // The received capabilities were the handler's to use (or copy): delete them, by the slots
        // they landed in (a client call in the handler may have re-pointed `caps_in`).
        for p in &m.ins {
            match p.ty {
                Type::Cap => {
                    let _ = writeln!(o, "{ind}let _ = __rt::cap_delete({});", p.name);
                }
                Type::Dataspace => {
                    let _ = writeln!(o, "{ind}let _ = __rt::cap_delete({}.cap);", p.name);
                }
                _ => {}
            }
        }
        if m.attrs.oneway {
            let _ = writeln!(
                o,
                "{ind}let () = __r;\n{ind}__k.answer(__srv, __rt::Reply::EMPTY)\n            }}"
            );
            return o;
        }
        let _ = writeln!(o, "{ind}match __r {{");
        let ind2 = "                        ";
        match m.outs.len() {
            0 => {
                let _ = writeln!(o, "{ind}    Ok(()) => {{");
            }
            1 => {
                let _ = writeln!(o, "{ind}    Ok({}) => {{", m.outs[0].name);
            }
            _ => {
                let names: Vec<&str> = m.outs.iter().map(|p| p.name.as_str()).collect();
                let _ = writeln!(
                    o,
                    "{ind}    Ok({}Out {{ {} }}) => {{",
                    camel(&m.name),
                    names.join(", ")
                );
            }
        }
        let enc = encode(&m.outs, &lo, ind2);
        o.push_str(&enc.stmts);
        if enc.maps > 0 {
            let _ = writeln!(
                o,
                "{ind2}__k.answer(__srv, __rt::Reply {{ tag: __rt::MsgTag({} << 16 | {} << 24 | {} << 27), w: [{}] }})",
                enc.words,
                enc.caps,
                enc.maps,
                enc.regs.join(", ")
            );
        } else {
            let _ = writeln!(
                o,
                "{ind2}__k.answer(__srv, __rt::Reply {{ tag: __rt::MsgTag({} << 16 | {} << 24), w: [{}] }})",
                enc.words,
                enc.caps,
                enc.regs.join(", ")
            );
        }
        let _ = writeln!(o, "{ind}    }}");
        let _ = writeln!(
            o,
            "{ind}    Err(e) => __k.answer(__srv, __rt::Reply::error(&e)),"
        );
        let _ = writeln!(o, "{ind}}}\n            }}");
        o
    };
    let _ = writeln!(o, "        match __m.tag.0 & __rt::SHAPE {{");
    for m in &fixed {
        let _ = writeln!(o, "            __T_{} => {{", m.name.to_ascii_uppercase());
        o.push_str(&arm(m));
    }
    let _ = writeln!(o, "            _ => match __m.tag.label() {{");
    for m in &varying {
        let _ = writeln!(o, "            op::{} => {{", m.name.to_ascii_uppercase());
        o.push_str(&arm(m));
    }
    if !fixed.is_empty() {
        let labels: Vec<String> = fixed
            .iter()
            .map(|m| format!("op::{}", m.name.to_ascii_uppercase()))
            .collect();
        let _ = writeln!(
            o,
            "            {} => __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_SHAPE)),",
            labels.join(" | ")
        );
    }
    let _ = writeln!(o, "            _ => __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_OPCODE)),\n            }},\n        }}\n    }}\n");

    let _ = writeln!(o, "    /// Dispatches one message to `srv` and answers through `next` (see `__rt::Serve::handle`):");
    let _ = writeln!(
        o,
        "    /// what a server's `handle` calls for the messages of this interface."
    );
    let _ = writeln!(o, "    #[inline(always)]");
    let _ = writeln!(o, "    pub fn handle<S: Server + __rt::Serve + ?Sized>(srv: &mut S, m: &__rt::IpcResult, next: __rt::Next) -> __rt::IpcResult {{");
    let _ = writeln!(o, "        dispatch_then(srv, m, next)\n    }}\n");
    let _ = writeln!(
        o,
        "    /// A server of this interface alone, without post-reply work."
    );
    let _ = writeln!(o, "    struct Only<'a, S: ?Sized>(&'a mut S);\n");
    let _ = writeln!(
        o,
        "    impl<S: Server + ?Sized> __rt::Serve for Only<'_, S> {{"
    );
    let _ = writeln!(o, "        #[inline(always)]");
    let _ = writeln!(
        o,
        "        fn handle(&mut self, m: &__rt::IpcResult, next: __rt::Next) -> __rt::IpcResult {{"
    );
    let _ = writeln!(
        o,
        "            dispatch_then(&mut *self.0, m, next.plain())\n        }}\n    }}\n"
    );
    let _ = writeln!(o, "    /// Serves `ep` with `srv` forever through the runtime's loop (`__rt::serve`). A server");
    let _ = writeln!(o, "    /// with several interfaces or post-reply work implements `__rt::Serve` itself instead.");
    let _ = writeln!(
        o,
        "    pub fn serve<S: Server + ?Sized>(ep: u64, srv: &mut S) -> ! {{"
    );
    let _ = writeln!(o, "        loop {{\n            let _ = __rt::serve(ep, &mut Only(&mut *srv));\n        }}\n    }}");
}
