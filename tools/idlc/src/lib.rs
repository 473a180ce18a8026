//! `sawmill-idlc`: the interface compiler. Parses `interfaces/*.idl` (language in `docs/idl.md`) and
//! generates `no_std` Rust client stubs and server dispatch code.
pub mod ast;
pub mod check;
pub mod gen;
pub mod parse;

use std::fmt;
use std::path::Path;

pub use gen::Options;

/// A diagnostic at a source position: `file:line:column: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    pub file: String,
    pub pos: ast::Pos,
    pub msg: String,
}

impl Diag {
    pub fn new(file: &str, pos: ast::Pos, msg: String) -> Diag {
        Diag {
            file: file.to_string(),
            pos,
            msg,
        }
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.pos.line, self.pos.col, self.msg
        )
    }
}

impl std::error::Error for Diag {}

/// Parses and checks `src` (named `file` in diagnostics).
pub fn parse(file: &str, src: &str) -> Result<ast::File, Diag> {
    let f = parse::parse(file, src)?;
    check::check(file, &f)?;
    Ok(f)
}

/// Parses, checks and generates Rust source.
pub fn compile_str(file: &str, src: &str, opts: &Options) -> Result<String, Diag> {
    Ok(gen::generate(&parse(file, src)?, opts))
}

/// Compiles every `*.idl` in `dir` (sorted by name) into one Rust source, for `include!` at a
/// crate root. Returns the source and the files read (for `cargo:rerun-if-changed`).
pub fn compile_dir(
    dir: &Path,
    opts: &Options,
) -> Result<(String, Vec<std::path::PathBuf>), String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "idl"))
        .collect();
    files.sort();
    let mut out = String::new();
    // Every file's declarations share the crate root: a name may be declared in one file only.
    let mut seen: Vec<(String, String)> = Vec::new();
    for f in &files {
        let name = f.display().to_string();
        let src = std::fs::read_to_string(f).map_err(|e| format!("{name}: {e}"))?;
        let ast = parse(&name, &src).map_err(|d| d.to_string())?;
        for (n, pos) in top_level_names(&ast) {
            if let Some((_, other)) = seen.iter().find(|(s, _)| *s == n) {
                return Err(
                    Diag::new(&name, pos, format!("`{n}` is already declared in {other}"))
                        .to_string(),
                );
            }
            seen.push((n, name.clone()));
        }
        out += &gen::generate(&ast, opts);
    }
    Ok((out, files))
}

/// The names a file declares at the crate root, with their positions.
fn top_level_names(f: &ast::File) -> Vec<(String, ast::Pos)> {
    let mut v: Vec<(String, ast::Pos)> = Vec::new();
    v.extend(f.errors.iter().map(|d| (d.name.clone(), d.pos)));
    v.extend(f.consts.iter().map(|d| (d.name.clone(), d.pos)));
    v.extend(f.flags.iter().map(|d| (d.name.clone(), d.pos)));
    v.extend(f.enums.iter().map(|d| (d.name.clone(), d.pos)));
    v.extend(f.interfaces.iter().map(|d| (d.name.clone(), d.pos)));
    v
}
