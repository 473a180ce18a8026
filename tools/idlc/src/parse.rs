//! Lexer and recursive-descent parser for the interface language (grammar in `docs/idl.md`).
use crate::ast::*;
use crate::Diag;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Int(u64),
    Punct(&'static str),
    Eof,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("number `{v}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of file".to_string(),
        }
    }
}

const PUNCTS: &[&str] = &[
    "->", "{", "}", "(", ")", "[", "]", "<", ">", ";", ",", ":", "=",
];

fn lex(file: &str, src: &str) -> Result<Vec<(Tok, Pos)>, Diag> {
    let mut out = Vec::new();
    let b = src.as_bytes();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    while i < b.len() {
        let pos = Pos { line, col };
        let c = b[i];
        if c == b'\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c == b' ' || c == b'\t' || c == b'\r' {
            i += 1;
            col += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            col += (i - s) as u32;
            out.push((Tok::Ident(src[s..i].to_string()), pos));
            continue;
        }
        if c.is_ascii_digit() {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            col += (i - s) as u32;
            let text: String = src[s..i].chars().filter(|&c| c != '_').collect();
            let v = if let Some(h) = text.strip_prefix("0x") {
                u64::from_str_radix(h, 16)
            } else if let Some(o) = text.strip_prefix("0o") {
                u64::from_str_radix(o, 8)
            } else {
                text.parse::<u64>()
            };
            match v {
                Ok(v) => out.push((Tok::Int(v), pos)),
                Err(_) => {
                    return Err(Diag::new(
                        file,
                        pos,
                        format!(
                            "expected a number (decimal, 0x hex or 0o octal, at most 2^64-1), found `{}`",
                            &src[s..i]
                        ),
                    ))
                }
            }
            continue;
        }
        if let Some(p) = PUNCTS.iter().find(|p| src[i..].starts_with(**p)) {
            i += p.len();
            col += p.len() as u32;
            out.push((Tok::Punct(p), pos));
            continue;
        }
        let ch = src[i..].chars().next().unwrap_or('?');
        return Err(Diag::new(file, pos, format!("unexpected character `{ch}`")));
    }
    out.push((Tok::Eof, Pos { line, col }));
    Ok(out)
}

/// Highest opcode a method may have; labels above are protocol errors and kernel labels.
pub const MAX_OPCODE: u64 = 0xefff;
/// Highest application error code.
pub const MAX_ERROR_CODE: u64 = 0xefff;

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "union",
];

/// Names the generated code uses at module level or in every method.
const RESERVED: &[&str] = &[
    "badge", "op", "Client", "Server", "dispatch", "serve", "NAME", "AppError",
];

struct Parser<'a> {
    file: &'a str,
    toks: Vec<(Tok, Pos)>,
    at: usize,
    /// The declarations so far (types and constants must be declared before they are used).
    f: File,
}

fn empty_file() -> File {
    File {
        errors: Vec::new(),
        consts: Vec::new(),
        flags: Vec::new(),
        enums: Vec::new(),
        interfaces: Vec::new(),
    }
}

/// `NEED_WRITE`, `O2`: upper-case letters, digits and underscores, starting with a letter.
fn is_upper_snake(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

type R<T> = Result<T, Diag>;

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].0
    }
    fn pos(&self) -> Pos {
        self.toks[self.at].1
    }
    fn bump(&mut self) -> (Tok, Pos) {
        let t = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        t
    }
    fn err<T>(&self, what: &str) -> R<T> {
        Err(Diag::new(
            self.file,
            self.pos(),
            format!("expected {what}, found {}", self.peek().describe()),
        ))
    }
    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }
    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == w)
    }
    fn punct(&mut self, p: &str, ctx: &str) -> R<Pos> {
        if self.is_punct(p) {
            Ok(self.bump().1)
        } else {
            self.err(&format!("`{p}` {ctx}"))
        }
    }
    fn ident(&mut self, what: &str) -> R<(String, Pos)> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let pos = self.pos();
                if RUST_KEYWORDS.contains(&s.as_str()) || s.starts_with("__") {
                    return Err(Diag::new(
                        self.file,
                        pos,
                        format!("expected {what}, found reserved word `{s}`"),
                    ));
                }
                self.bump();
                Ok((s, pos))
            }
            _ => self.err(what),
        }
    }
    fn int(&mut self, what: &str, max: u64) -> R<(u64, Pos)> {
        match *self.peek() {
            Tok::Int(v) => {
                let pos = self.pos();
                if v > max {
                    return Err(Diag::new(
                        self.file,
                        pos,
                        format!("expected {what} (at most {max}), found {v}"),
                    ));
                }
                self.bump();
                Ok((v, pos))
            }
            _ => self.err(what),
        }
    }

    fn attrs(&mut self, allowed: &[&str]) -> R<Attrs> {
        let mut a = Attrs::default();
        while self.is_punct("[") {
            self.bump();
            loop {
                let pos = self.pos();
                let (name, _) = match self.peek().clone() {
                    Tok::Ident(s) if allowed.contains(&s.as_str()) => {
                        self.bump();
                        (s, pos)
                    }
                    _ => {
                        let list: Vec<String> = allowed.iter().map(|s| format!("`{s}`")).collect();
                        return self.err(&format!("attribute ({})", list.join(" or ")));
                    }
                };
                let flag = match name.as_str() {
                    "trusted" => &mut a.trusted,
                    "oneway" => &mut a.oneway,
                    _ => &mut a.invalid,
                };
                if *flag {
                    return Err(Diag::new(
                        self.file,
                        pos,
                        format!("attribute `{name}` given twice"),
                    ));
                }
                *flag = true;
                if self.is_punct(",") {
                    self.bump();
                    continue;
                }
                self.punct("]", "to close the attribute list")?;
                break;
            }
        }
        Ok(a)
    }

    fn file(&mut self) -> R<File> {
        loop {
            if *self.peek() == Tok::Eof {
                break;
            }
            let attr_pos = self.pos();
            let attrs = self.attrs(&["trusted"])?;
            if self.is_word("interface") {
                self.bump();
                let it = self.interface(attrs)?;
                self.f.interfaces.push(it);
                continue;
            }
            let kw = match self.peek() {
                Tok::Ident(w) if ["error", "const", "flags", "enum"].contains(&w.as_str()) => {
                    w.clone()
                }
                _ => return self.err("`interface`, `error`, `const`, `flags` or `enum`"),
            };
            if attrs != Attrs::default() {
                return Err(Diag::new(
                    self.file,
                    attr_pos,
                    format!("attributes are not allowed on `{kw}`"),
                ));
            }
            self.bump();
            match kw.as_str() {
                "error" => {
                    let e = self.error_decl()?;
                    self.f.errors.push(e);
                }
                "const" => {
                    let c = self.const_decl()?;
                    self.fresh_top(&c.name, c.pos)?;
                    self.f.consts.push(c);
                }
                "flags" => {
                    let d = self.flags_decl()?;
                    self.f.flags.push(d);
                }
                _ => {
                    let d = self.enum_decl()?;
                    self.f.enums.push(d);
                }
            }
        }
        Ok(std::mem::replace(&mut self.f, empty_file()))
    }

    /// Fails if a file-level declaration already has the name `name`.
    fn fresh_top(&self, name: &str, pos: Pos) -> R<()> {
        let f = &self.f;
        let prev = f
            .errors
            .iter()
            .map(|e| (&e.name, e.pos))
            .chain(f.consts.iter().map(|e| (&e.name, e.pos)))
            .chain(f.flags.iter().map(|e| (&e.name, e.pos)))
            .chain(f.enums.iter().map(|e| (&e.name, e.pos)))
            .find(|(n, _)| *n == name);
        match prev {
            Some((_, p)) => Err(Diag::new(
                self.file,
                pos,
                format!("`{name}` already declared at line {}", p.line),
            )),
            None => Ok(()),
        }
    }

    /// `NAME: T = value;` after `const`. Constants are unsigned values of an integer type.
    fn const_decl(&mut self) -> R<Const> {
        let (name, pos) = self.ident("a constant name")?;
        if !is_upper_snake(&name) {
            return Err(Diag::new(
                self.file,
                pos,
                format!("expected a constant name in UPPER_SNAKE_CASE, found `{name}`"),
            ));
        }
        self.punct(":", "and a type after the constant name")?;
        let ty = self.scalar("a constant type (u8..u64, i8..i64)")?;
        if ty == Scalar::Bool {
            return self.err_at(pos, "a constant type (u8..u64, i8..i64), found `bool`");
        }
        self.punct("=", "and a value after the constant type")?;
        let max = match ty.unsigned_max() {
            Some(m) => m,
            // Signed: the non-negative part of the type.
            None => (1u64 << (ty.size() * 8 - 1)) - 1,
        };
        let (value, _) = self.int(&format!("a value of type {}", ty.rust()), max)?;
        self.punct(";", "after the constant")?;
        Ok(Const {
            name,
            pos,
            ty,
            value,
        })
    }

    fn err_at<T>(&self, pos: Pos, what: &str) -> R<T> {
        Err(Diag::new(self.file, pos, format!("expected {what}")))
    }

    /// `Name: uN {` of a flag set or enum: the name (CamelCase, not yet declared) and base type.
    fn typedef_head(&mut self, kw: &str) -> R<(String, Pos, Scalar)> {
        let (name, pos) = self.ident(&format!("a {kw} type name"))?;
        if !name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err(Diag::new(
                self.file,
                pos,
                format!("expected a {kw} type name in CamelCase, found `{name}`"),
            ));
        }
        self.fresh_top(&name, pos)?;
        self.punct(":", &format!("and a base type after the {kw} name"))?;
        let bpos = self.pos();
        let base = self.scalar("a base type (u8, u16, u32, u64)")?;
        if base.unsigned_max().is_none() {
            return self.err_at(
                bpos,
                &format!("a base type (u8, u16, u32, u64), found `{}`", base.rust()),
            );
        }
        self.punct("{", &format!("to open the {kw} members"))?;
        Ok((name, pos, base))
    }

    /// `NAME = value` members up to `}`; `upper`: names in UPPER_SNAKE_CASE (flags), else
    /// CamelCase (enum variants).
    fn members(&mut self, kw: &str, base: Scalar, upper: bool) -> R<Vec<Member>> {
        let mut ms: Vec<Member> = Vec::new();
        let max = base.unsigned_max().unwrap_or(u64::MAX);
        while !self.is_punct("}") {
            let (name, pos) = self.ident(&format!("a {kw} member name or `}}`"))?;
            if upper && !is_upper_snake(&name) {
                return Err(Diag::new(
                    self.file,
                    pos,
                    format!("expected a flag name in UPPER_SNAKE_CASE, found `{name}`"),
                ));
            }
            if upper && (name == "EMPTY" || name == "ALL") {
                return Err(Diag::new(
                    self.file,
                    pos,
                    format!("expected a flag name, found reserved name `{name}`"),
                ));
            }
            if !upper && !name.starts_with(|c: char| c.is_ascii_uppercase()) {
                return Err(Diag::new(
                    self.file,
                    pos,
                    format!("expected a variant name in CamelCase, found `{name}`"),
                ));
            }
            if ms.iter().any(|m| m.name == name) {
                return Err(Diag::new(
                    self.file,
                    pos,
                    format!("member `{name}` declared twice"),
                ));
            }
            self.punct("=", "and a value after the member name")?;
            let (value, vpos) = self.int(&format!("a value of type {}", base.rust()), max)?;
            if upper && value == 0 {
                return Err(Diag::new(
                    self.file,
                    vpos,
                    "expected a flag value with at least one bit set, found 0".into(),
                ));
            }
            if !upper {
                if let Some(m) = ms.iter().find(|m| m.value == value) {
                    return Err(Diag::new(
                        self.file,
                        vpos,
                        format!("value {value} already used by `{}`", m.name),
                    ));
                }
            }
            ms.push(Member { name, value, pos });
            if self.is_punct(",") {
                self.bump();
            } else if !self.is_punct("}") {
                return self.err(&format!("`,` or `}}` after the {kw} member"));
            }
        }
        Ok(ms)
    }

    fn flags_decl(&mut self) -> R<FlagsDecl> {
        let (name, pos, base) = self.typedef_head("flags")?;
        let members = self.members("flags", base, true)?;
        self.bump();
        if members.is_empty() {
            return Err(Diag::new(
                self.file,
                pos,
                format!("flag set `{name}` has no flags"),
            ));
        }
        Ok(FlagsDecl {
            name,
            pos,
            base,
            members,
        })
    }

    fn enum_decl(&mut self) -> R<EnumDecl> {
        let (name, pos, base) = self.typedef_head("enum")?;
        let variants = self.members("enum", base, false)?;
        self.bump();
        if variants.is_empty() {
            return Err(Diag::new(
                self.file,
                pos,
                format!("enum `{name}` has no variants"),
            ));
        }
        Ok(EnumDecl {
            name,
            pos,
            base,
            variants,
        })
    }

    fn error_decl(&mut self) -> R<ErrorDecl> {
        let (name, pos) = self.ident("an error type name")?;
        if !name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err(Diag::new(
                self.file,
                pos,
                format!("expected an error type name in CamelCase, found `{name}`"),
            ));
        }
        self.fresh_top(&name, pos)?;
        self.punct("{", "to open the error variants")?;
        let mut variants: Vec<Variant> = Vec::new();
        let mut invalid: Option<usize> = None;
        while !self.is_punct("}") {
            let apos = self.pos();
            if self.attrs(&["invalid"])?.invalid {
                if let Some(i) = invalid {
                    return Err(Diag::new(
                        self.file,
                        apos,
                        format!(
                            "`{}` is already the `invalid` variant of `{name}`",
                            variants[i].name
                        ),
                    ));
                }
                invalid = Some(variants.len());
            }
            let (vname, vpos) = self.ident("an error variant name or `}`")?;
            if !vname.starts_with(|c: char| c.is_ascii_uppercase()) {
                return Err(Diag::new(
                    self.file,
                    vpos,
                    format!("expected a variant name in CamelCase, found `{vname}`"),
                ));
            }
            self.punct("=", "and an error code after the variant name")?;
            let (code, cpos) = self.int("an error code 1..=0xefff", MAX_ERROR_CODE)?;
            if code == 0 {
                return Err(Diag::new(
                    self.file,
                    cpos,
                    "expected an error code 1..=0xefff, found 0 (0 means ok)".into(),
                ));
            }
            if variants.iter().any(|v| v.name == vname) {
                return Err(Diag::new(
                    self.file,
                    vpos,
                    format!("variant `{vname}` declared twice"),
                ));
            }
            if let Some(v) = variants.iter().find(|v| v.code as u64 == code) {
                return Err(Diag::new(
                    self.file,
                    cpos,
                    format!("error code {code} already used by `{}`", v.name),
                ));
            }
            variants.push(Variant {
                name: vname,
                code: code as u16,
                pos: vpos,
            });
            if self.is_punct(",") {
                self.bump();
            } else if !self.is_punct("}") {
                return self.err("`,` or `}` after the error variant");
            }
        }
        self.bump();
        if variants.is_empty() {
            return Err(Diag::new(
                self.file,
                pos,
                format!("error type `{name}` has no variants"),
            ));
        }
        Ok(ErrorDecl {
            name,
            pos,
            variants,
            invalid,
        })
    }

    fn interface(&mut self, attrs: Attrs) -> R<Interface> {
        let (name, pos) = self.ident("an interface name")?;
        if !name.starts_with(|c: char| c.is_ascii_lowercase())
            || name.chars().any(|c| c.is_ascii_uppercase())
        {
            return Err(Diag::new(
                self.file,
                pos,
                format!("expected an interface name in snake_case, found `{name}`"),
            ));
        }
        let raises = if self.is_word("raises") {
            self.bump();
            Some(self.ident("an error type name after `raises`")?)
        } else {
            None
        };
        self.punct("{", "to open the interface body")?;
        let mut methods: Vec<Method> = Vec::new();
        let mut consts: Vec<Const> = Vec::new();
        let mut next: u64 = 1;
        while !self.is_punct("}") {
            if self.is_word("const") {
                self.bump();
                let c = self.const_decl()?;
                if c.name == "NAME" {
                    return Err(Diag::new(
                        self.file,
                        c.pos,
                        "expected a constant name, found reserved name `NAME`".into(),
                    ));
                }
                if let Some(o) = consts.iter().find(|o| o.name == c.name) {
                    return Err(Diag::new(
                        self.file,
                        c.pos,
                        format!("`{}` already declared at line {}", c.name, o.pos.line),
                    ));
                }
                consts.push(c);
                continue;
            }
            let m = self.method(next)?;
            if let Some(o) = methods.iter().find(|o| o.name == m.name) {
                return Err(Diag::new(
                    self.file,
                    m.pos,
                    format!(
                        "method `{}` already declared at line {}",
                        o.name, o.pos.line
                    ),
                ));
            }
            if let Some(o) = methods.iter().find(|o| o.opcode == m.opcode) {
                return Err(Diag::new(
                    self.file,
                    m.pos,
                    format!(
                        "opcode {} of `{}` already used by `{}`",
                        m.opcode, m.name, o.name
                    ),
                ));
            }
            next = m.opcode as u64 + 1;
            methods.push(m);
        }
        self.bump();
        Ok(Interface {
            name,
            pos,
            attrs,
            raises: raises.map(|r| r.0),
            consts,
            methods,
        })
    }

    fn method(&mut self, auto: u64) -> R<Method> {
        let attrs = self.attrs(&["trusted", "oneway"])?;
        if !self.is_word("fn") {
            return self.err("`fn`, `const`, an attribute list or `}`");
        }
        self.bump();
        let (name, pos) = self.ident("a method name")?;
        if name.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(Diag::new(
                self.file,
                pos,
                format!("expected a method name in snake_case, found `{name}`"),
            ));
        }
        let ins = self.params()?;
        let mut outs = Vec::new();
        if self.is_punct("->") {
            let arrow = self.bump().1;
            if attrs.oneway {
                return Err(Diag::new(
                    self.file,
                    arrow,
                    format!("expected `;` or `=`: oneway method `{name}` has no reply"),
                ));
            }
            outs = self.params()?;
        }
        let opcode = if self.is_punct("=") {
            self.bump();
            let (v, p) = self.int("an opcode 1..=0xefff", MAX_OPCODE)?;
            if v == 0 {
                return Err(Diag::new(
                    self.file,
                    p,
                    "expected an opcode 1..=0xefff, found 0".into(),
                ));
            }
            v
        } else {
            if auto > MAX_OPCODE {
                return Err(Diag::new(
                    self.file,
                    pos,
                    "automatic opcode exceeds 0xefff".into(),
                ));
            }
            auto
        };
        self.punct(";", "after the method declaration")?;
        Ok(Method {
            name,
            pos,
            opcode: opcode as u16,
            attrs,
            ins,
            outs,
        })
    }

    fn params(&mut self) -> R<Vec<Param>> {
        self.punct("(", "to open the parameter list")?;
        let mut ps: Vec<Param> = Vec::new();
        while !self.is_punct(")") {
            let (name, pos) = self.ident("a parameter name or `)`")?;
            if RESERVED.contains(&name.as_str()) || name.ends_with("_rx") {
                return Err(Diag::new(
                    self.file,
                    pos,
                    format!("expected a parameter name, found reserved name `{name}`"),
                ));
            }
            if ps.iter().any(|p| p.name == name) {
                return Err(Diag::new(
                    self.file,
                    pos,
                    format!("parameter `{name}` declared twice"),
                ));
            }
            self.punct(":", "and a type after the parameter name")?;
            let ty = self.ty()?;
            ps.push(Param { name, pos, ty });
            if self.is_punct(",") {
                self.bump();
            } else if !self.is_punct(")") {
                return self.err("`,` or `)` after the parameter");
            }
        }
        self.bump();
        Ok(ps)
    }

    fn ty(&mut self) -> R<Type> {
        const WHAT: &str = "a type (u8..u64, i8..i64, bool, [T; N], bytes<N>, cap, dataspace, map, or a flags or enum name declared above)";
        if self.is_punct("[") {
            self.bump();
            let s = self.scalar("an element type (u8..u64, i8..i64, bool)")?;
            self.punct(";", "and a length after the array element type")?;
            let (n, p) = self.size("an array length", 512)?;
            if n == 0 {
                return Err(Diag::new(
                    self.file,
                    p,
                    "expected an array length of at least 1, found 0".into(),
                ));
            }
            self.punct("]", "to close the array type")?;
            return Ok(Type::Array(s, n as u32));
        }
        match self.peek().clone() {
            Tok::Ident(w) if w == "bytes" => {
                self.bump();
                self.punct("<", "and a maximum length after `bytes`")?;
                let (n, p) = self.size("a maximum byte count", 512)?;
                if n == 0 {
                    return Err(Diag::new(
                        self.file,
                        p,
                        "expected a maximum byte count of at least 1, found 0".into(),
                    ));
                }
                self.punct(">", "to close `bytes<N>`")?;
                Ok(Type::Bytes(n as u32))
            }
            Tok::Ident(w) if w == "cap" => {
                self.bump();
                Ok(Type::Cap)
            }
            Tok::Ident(w) if w == "dataspace" => {
                self.bump();
                Ok(Type::Dataspace)
            }
            Tok::Ident(w) if w == "map" => {
                self.bump();
                Ok(Type::Map)
            }
            Tok::Ident(w) => {
                if let Some(i) = self.f.flags.iter().position(|d| d.name == w) {
                    self.bump();
                    return Ok(Type::Flags(self.f.flags[i].base, i as u16));
                }
                if let Some(i) = self.f.enums.iter().position(|d| d.name == w) {
                    self.bump();
                    return Ok(Type::Enum(self.f.enums[i].base, i as u16));
                }
                Ok(Type::Scalar(self.scalar(WHAT)?))
            }
            _ => self.err(WHAT),
        }
    }

    /// A size: a number or the name of a file-level constant declared above.
    fn size(&mut self, what: &str, max: u64) -> R<(u64, Pos)> {
        let Tok::Ident(w) = self.peek().clone() else {
            return self.int(what, max);
        };
        let pos = self.pos();
        let Some(c) = self.f.consts.iter().find(|c| c.name == w) else {
            return self.err(&format!("{what} (a number or a constant declared above)"));
        };
        if c.value > max {
            return Err(Diag::new(
                self.file,
                pos,
                format!("expected {what} (at most {max}), found `{w}` = {}", c.value),
            ));
        }
        let v = c.value;
        self.bump();
        Ok((v, pos))
    }

    fn scalar(&mut self, what: &str) -> R<Scalar> {
        match self.peek() {
            Tok::Ident(w) => match Scalar::from_name(w) {
                Some(s) => {
                    self.bump();
                    Ok(s)
                }
                None => self.err(what),
            },
            _ => self.err(what),
        }
    }
}

/// Parses and checks one file. Semantic checks (message sizes, error names) are in [`crate::check`].
pub fn parse(file: &str, src: &str) -> Result<File, Diag> {
    let toks = lex(file, src)?;
    let mut p = Parser {
        file,
        toks,
        at: 0,
        f: empty_file(),
    };
    p.file()
}
