//! Semantic checks and the wire layout of each message.
use crate::ast::*;
use crate::Diag;

/// Words a message may have (`sawmill_abi::MAX_WORDS`).
pub const MAX_WORDS: u32 = 64;
/// Register words (`sawmill_abi::REG_WORDS`).
pub const REG_WORDS: u32 = 4;
/// Capability items per message (`sawmill_abi::MAX_ITEMS`).
pub const MAX_CAPS: u32 = 4;

/// Where each parameter of one message travels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Per parameter: first fixed word (if it has any) and capability item index (if any).
    pub slots: Vec<(Option<u32>, Option<u32>)>,
    /// Words of the fixed part.
    pub fixed: u32,
    /// First word of the variable (bytes) part: `max(fixed, 4)`; only meaningful with buffers.
    pub data_base: u32,
    /// Largest possible word count.
    pub max_words: u32,
    pub caps: u32,
    /// Map items (at most one: see `check`).
    pub maps: u32,
    pub has_bytes: bool,
}

impl Layout {
    pub fn of(ps: &[Param]) -> Layout {
        let mut slots = Vec::new();
        let (mut w, mut c) = (0u32, 0u32);
        let mut data = 0u32;
        for p in ps {
            let fw = p.ty.fixed_words();
            let word = if fw > 0 { Some(w) } else { None };
            let cap = if p.ty.caps() > 0 { Some(c) } else { None };
            w += fw;
            c += p.ty.caps();
            if let Type::Bytes(n) = p.ty {
                data += n.div_ceil(8);
            }
            slots.push((word, cap));
        }
        let has_bytes = ps.iter().any(|p| matches!(p.ty, Type::Bytes(_)));
        let data_base = w.max(REG_WORDS);
        let max_words = if has_bytes { data_base + data } else { w };
        Layout {
            slots,
            fixed: w,
            data_base,
            max_words,
            caps: c,
            maps: ps.iter().map(|p| p.ty.maps()).sum(),
            has_bytes,
        }
    }
}

pub fn check(file: &str, f: &File) -> Result<(), Diag> {
    for (i, e) in f.errors.iter().enumerate() {
        if f.errors[..i].iter().any(|o| o.name == e.name) {
            return Err(Diag::new(
                file,
                e.pos,
                format!("error type `{}` declared twice", e.name),
            ));
        }
    }
    for (i, it) in f.interfaces.iter().enumerate() {
        if f.interfaces[..i].iter().any(|o| o.name == it.name) {
            return Err(Diag::new(
                file,
                it.pos,
                format!("interface `{}` declared twice", it.name),
            ));
        }
        if let Some(r) = &it.raises {
            if !f.errors.iter().any(|e| &e.name == r) {
                return Err(Diag::new(
                    file,
                    it.pos,
                    format!(
                        "interface `{}` raises `{r}`, which is not declared in this file",
                        it.name
                    ),
                ));
            }
        }
        for m in &it.methods {
            for (dir, ps) in [("request", &m.ins), ("reply", &m.outs)] {
                let l = Layout::of(ps);
                if l.max_words > MAX_WORDS {
                    return Err(Diag::new(
                        file,
                        m.pos,
                        format!("the {dir} of `{}` needs up to {} words; a message holds at most {MAX_WORDS}", m.name, l.max_words),
                    ));
                }
                if l.maps > 1 {
                    let (what, who) = if dir == "request" {
                        ("parameters", "a request")
                    } else {
                        ("results", "a reply")
                    };
                    return Err(Diag::new(
                        file,
                        m.pos,
                        format!("the {dir} of `{}` has {} `map` {what}; {who} has one receive window, so at most one", m.name, l.maps),
                    ));
                }
                if l.caps > MAX_CAPS {
                    return Err(Diag::new(
                        file,
                        m.pos,
                        format!("the {dir} of `{}` carries {} capabilities; a message holds at most {MAX_CAPS}", m.name, l.caps),
                    ));
                }
            }
        }
    }
    Ok(())
}
