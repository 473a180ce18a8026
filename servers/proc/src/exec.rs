//! What makes a file a program proc can run, and how a program name becomes a path.
//!
//! A program is a regular file with an execute bit, holding an ELF64 little-endian x86-64
//! executable (`ET_EXEC`, or `ET_DYN` for a static position-independent one) without an
//! interpreter (`PT_INTERP`: dynamically linked programs need a loader we do not have). Each
//! refusal has its Linux errno and the status a shell reports (127: not found, 126: found but
//! cannot run).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use sawmill_linux::elf::Refusal;
use sawmill_linux::errno::{self, Errno};
use sawmill_path::{S_IFMT, S_IFREG};

/// Bytes of the file proc reads to check it: the ELF header and the program headers must lie in
/// them (a linker puts the program headers right after the header).
pub const HEAD_BYTES: usize = 4096;
/// Bytes proc reads first: one message of the file protocol (a longer read maps a read buffer
/// first, and costs twice as much). A `#!` line ([`SHEBANG_MAX`]) and a small static
/// executable's program headers (up to 7) lie in them; more program headers are read next,
/// [`headers_end`].
pub const HEAD_FIRST: usize = 480;
/// `PATH` when the environment has none (glibc's `execvp` default).
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecError {
    /// No such file (or a component of the path is missing or not a directory).
    NotFound,
    /// A directory or another non-regular file.
    NotRegular,
    /// No execute bit.
    NoPermission,
    /// Not an ELF file at all (no magic).
    NotElf,
    /// An ELF file of another kind: what it is.
    WrongKind(&'static str),
    /// Dynamically linked: the interpreter it names.
    Dynamic(String),
    /// The file system failed: what went wrong.
    Io(String),
}

impl ExecError {
    /// The errno `execve` gives.
    pub fn errno(&self) -> Errno {
        match self {
            ExecError::NotFound => errno::ENOENT,
            ExecError::NotRegular | ExecError::NoPermission => errno::EACCES,
            ExecError::NotElf | ExecError::WrongKind(_) | ExecError::Dynamic(_) => errno::ENOEXEC,
            ExecError::Io(_) => errno::EIO,
        }
    }

    /// The status a shell gives a command that could not be run.
    pub fn shell_status(&self) -> u8 {
        match self {
            ExecError::NotFound => 127,
            _ => 126,
        }
    }

    /// Why, for a person.
    pub fn describe(&self) -> String {
        match self {
            ExecError::NotFound => String::from("No such file or directory"),
            ExecError::NotRegular => String::from("Permission denied (not a regular file)"),
            ExecError::NoPermission => String::from("Permission denied (no execute bit)"),
            ExecError::NotElf => String::from("Exec format error (not an ELF file)"),
            ExecError::WrongKind(w) => format!("Exec format error ({w})"),
            ExecError::Dynamic(i) => {
                format!("dynamically linked (interpreter {i}); only static programs run here")
            }
            ExecError::Io(w) => format!("Input/output error ({w})"),
        }
    }
}

/// Any execute bit.
const ANY_EXEC: u32 = 0o111;

/// Checks the file's mode: a regular file with an execute bit (for root, as Linux: any).
pub fn check_mode(mode: u32) -> Result<(), ExecError> {
    if mode & S_IFMT != S_IFREG {
        return Err(ExecError::NotRegular);
    }
    if mode & ANY_EXEC == 0 {
        return Err(ExecError::NoPermission);
    }
    Ok(())
}

/// Checks the start of the file (`head`: its first [`HEAD_BYTES`], or all of it if shorter):
/// the personality's own check (`sawmill_linux::elf::check`), which the library repeats before
/// it maps anything.
pub fn check_elf(head: &[u8]) -> Result<(), ExecError> {
    sawmill_linux::elf::check(head).map_err(|r| match r {
        Refusal::NotElf => ExecError::NotElf,
        Refusal::WrongKind(w) => ExecError::WrongKind(w),
        Refusal::Dynamic(name) => ExecError::Dynamic(String::from_utf8_lossy(&name).into_owned()),
    })
}

/// Where the program headers of the ELF file starting with `head` end, if its header says so
/// and they end within [`HEAD_BYTES`] (a static executable linked as usual: glibc's have 10 and
/// end at byte 624). None for anything else (the whole head then decides).
pub fn headers_end(head: &[u8]) -> Option<usize> {
    if head.len() < 64 || head[..4] != *b"\x7fELF" {
        return None;
    }
    let u16_at = |at: usize| u16::from_le_bytes([head[at], head[at + 1]]) as u64;
    let phoff = u64::from_le_bytes(head[32..40].try_into().ok()?);
    let end = phoff.checked_add(u16_at(54).checked_mul(u16_at(56))?)?;
    (end <= HEAD_BYTES as u64).then_some(end as usize)
}

/// The verdict on the start of a file: a script's `#!` line, or None for a program that runs.
pub fn check_head(head: &[u8]) -> Result<Option<(String, Option<String>)>, ExecError> {
    match shebang(head) {
        Some(line) => line.map(Some),
        None => check_elf(head).map(|_| None),
    }
}

/// Most bytes of a `#!` line Linux reads (`BINPRM_BUF_SIZE`); a longer interpreter name is
/// refused with ENOEXEC.
pub const SHEBANG_MAX: usize = 256;
/// How deep scripts may name scripts as their interpreter (Linux's 4 more levels).
pub const SHEBANG_DEPTH: usize = 5;

/// A script's `#!` line, as Linux's `binfmt_script` reads it: the interpreter (up to the first
/// blank) and at most one argument (the rest of the line, blanks around it removed). `None` if
/// `head` does not start with `#!`; NotElf if the line names no interpreter or it does not fit.
pub fn shebang(head: &[u8]) -> Option<Result<(String, Option<String>), ExecError>> {
    let rest = head.strip_prefix(b"#!")?;
    let line_end = rest.iter().position(|&c| c == b'\n');
    let line = &rest[..line_end.unwrap_or(rest.len()).min(SHEBANG_MAX - 2)];
    let blank = |c: &u8| *c == b' ' || *c == b'\t';
    let line = match line.iter().position(|c| !blank(c)) {
        Some(i) => &line[i..],
        None => return Some(Err(ExecError::NotElf)),
    };
    let name_end = line.iter().position(blank).unwrap_or(line.len());
    // The interpreter's name must end inside what was read (Linux: ENOEXEC otherwise).
    if line_end.is_none_or(|e| e >= SHEBANG_MAX - 2) && name_end == line.len() {
        return Some(Err(ExecError::NotElf));
    }
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| ExecError::NotElf);
    let interp = match text(&line[..name_end]) {
        Ok(i) => i,
        Err(e) => return Some(Err(e)),
    };
    let arg = line[name_end..].trim_ascii();
    let arg = if arg.is_empty() {
        None
    } else {
        match text(arg) {
            Ok(a) => Some(a),
            Err(e) => return Some(Err(e)),
        }
    };
    Some(Ok((interp, arg)))
}

/// The `argv` a script runs with: the interpreter, its argument if any, the script's name as
/// the caller gave it, then the caller's arguments after the first.
pub fn script_argv(interp: &str, arg: Option<&str>, script: &str, argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len() + 2);
    out.push(String::from(interp));
    out.extend(arg.map(String::from));
    out.push(String::from(script));
    out.extend(argv.iter().skip(1).cloned());
    out
}

/// The `PATH` of an environment (`NAME=value` strings), or the default.
pub fn search_path(env: &[String]) -> &str {
    env.iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or(DEFAULT_PATH)
}

/// `path` made absolute against the working directory `cwd` (no `.`/`..` folding: the VFS
/// walks those).
pub fn absolute(cwd: &str, path: &str) -> String {
    if path.starts_with('/') {
        String::from(path)
    } else if cwd.ends_with('/') {
        format!("{cwd}{path}")
    } else {
        format!("{cwd}/{path}")
    }
}

/// The paths to try for program `name`, in order: `name` itself if it has a `/`, else each
/// directory of `path` (an empty entry is the working directory), as `execvp` does.
pub fn candidates(name: &str, cwd: &str, path: &str) -> Vec<String> {
    if name.is_empty() {
        return Vec::new();
    }
    if name.contains('/') {
        return alloc::vec![absolute(cwd, name)];
    }
    path.split(':')
        .map(|dir| {
            let dir = if dir.is_empty() { "." } else { dir };
            absolute(cwd, &format!("{dir}/{name}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF header with program headers right after it: (type, offset, filesz) each; the
    /// interpreter string, if any, at 0x200.
    fn elf(class: u8, machine: u16, etype: u16, phdrs: &[(u32, u64, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; 0x400];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = class;
        b[5] = 1;
        b[16..18].copy_from_slice(&etype.to_le_bytes());
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for (i, &(t, off, size)) in phdrs.iter().enumerate() {
            let p = 64 + i * 56;
            b[p..p + 4].copy_from_slice(&t.to_le_bytes());
            b[p + 8..p + 16].copy_from_slice(&off.to_le_bytes());
            b[p + 32..p + 40].copy_from_slice(&size.to_le_bytes());
        }
        b[0x200..0x21c].copy_from_slice(b"/lib64/ld-linux-x86-64.so.2\0");
        b
    }

    #[test]
    fn static_executables_pass() {
        assert_eq!(check_elf(&elf(2, 62, 2, &[(1, 0, 0x400)])), Ok(()));
        // Static PIE.
        assert_eq!(
            check_elf(&elf(2, 62, 3, &[(1, 0, 0x400), (6, 64, 56)])),
            Ok(())
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(check_elf(b"#!/bin/sh\n"), Err(ExecError::NotElf));
        assert_eq!(check_elf(b""), Err(ExecError::NotElf));
        assert!(matches!(
            check_elf(b"\x7fELF\x02"),
            Err(ExecError::WrongKind(_))
        ));
        assert!(matches!(
            check_elf(&elf(1, 62, 2, &[(1, 0, 0x400)])),
            Err(ExecError::WrongKind("not a 64-bit ELF file"))
        ));
        assert!(matches!(
            check_elf(&elf(2, 183, 2, &[(1, 0, 0x400)])),
            Err(ExecError::WrongKind("not an x86-64 program"))
        ));
        assert!(matches!(
            check_elf(&elf(2, 62, 1, &[(1, 0, 0x400)])),
            Err(ExecError::WrongKind(_))
        ));
        assert!(matches!(
            check_elf(&elf(2, 62, 2, &[])),
            Err(ExecError::WrongKind("no usable program headers"))
        ));
        assert_eq!(
            check_elf(&elf(2, 62, 3, &[(1, 0, 0x400), (3, 0x200, 28)])),
            Err(ExecError::Dynamic("/lib64/ld-linux-x86-64.so.2".into()))
        );
        // An interpreter string outside the bytes read does not crash the check.
        assert_eq!(
            check_elf(&elf(2, 62, 2, &[(3, u64::MAX, 28)])),
            Err(ExecError::Dynamic("?".into()))
        );
        // Program headers running past what was read.
        let mut b = elf(2, 62, 2, &[(1, 0, 0x400)]);
        b[56..58].copy_from_slice(&60000u16.to_le_bytes());
        assert!(matches!(check_elf(&b), Err(ExecError::WrongKind(_))));
        b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        assert!(matches!(check_elf(&b), Err(ExecError::WrongKind(_))));
    }

    #[test]
    fn shebang_lines_as_linux() {
        let ok = |h: &[u8]| shebang(h).unwrap().unwrap();
        assert_eq!(ok(b"#!/bin/sh\necho"), ("/bin/sh".into(), None));
        assert_eq!(
            ok(b"#! /bin/sh  -e -x \n"),
            ("/bin/sh".into(), Some("-e -x".into()))
        );
        assert_eq!(
            ok(b"#!/bin/busybox\tsh"),
            ("/bin/busybox".into(), Some("sh".into()))
        );
        assert!(shebang(b"\x7fELF").is_none());
        assert_eq!(shebang(b"#!\n"), Some(Err(ExecError::NotElf)));
        assert_eq!(shebang(b"#!   "), Some(Err(ExecError::NotElf)));
        let mut long = b"#!/".to_vec();
        long.extend(core::iter::repeat_n(b'a', 300));
        assert_eq!(shebang(&long), Some(Err(ExecError::NotElf)));
        let argv = vec![String::from("./s"), String::from("x")];
        assert_eq!(
            script_argv("/bin/sh", Some("-e"), "./s", &argv),
            vec!["/bin/sh", "-e", "./s", "x"]
        );
        assert_eq!(
            script_argv("/bin/sh", None, "/t/s", &[]),
            vec!["/bin/sh", "/t/s"]
        );
    }

    #[test]
    fn the_first_bytes_decide_a_program_that_runs() {
        // A static executable's headers fit in HEAD_FIRST; a `#!` line too.
        let ok = elf(2, 62, 2, &[(1, 0, 0x400)]);
        assert_eq!(check_head(&ok[..HEAD_FIRST]), Ok(None));
        let mut script = b"#!/bin/sh -e\n".to_vec();
        script.resize(HEAD_FIRST, b'x');
        assert_eq!(
            check_head(&script),
            Ok(Some(("/bin/sh".into(), Some("-e".into()))))
        );
        const _: () = assert!(SHEBANG_MAX <= HEAD_FIRST && HEAD_FIRST <= HEAD_BYTES);
        // Program headers past the first bytes: not a verdict of "runs", so proc reads the
        // whole head before it answers.
        let mut far = elf(2, 62, 2, &[(1, 0, 0x400)]);
        far.resize(HEAD_BYTES, 0);
        far[32..40].copy_from_slice(&0xc00u64.to_le_bytes());
        let ph: Vec<u8> = far[64..120].to_vec();
        far[0xc00..0xc38].copy_from_slice(&ph);
        assert!(check_head(&far[..HEAD_FIRST]).is_err());
        assert_eq!(check_head(&far), Ok(None));
        // ... and read up to where they end, which the header says.
        assert_eq!(headers_end(&far[..HEAD_FIRST]), Some(0xc38));
        assert_eq!(check_head(&far[..0xc38]), Ok(None));
    }

    #[test]
    fn more_program_headers_than_the_first_read_holds_are_read_to_their_end() {
        // glibc's static busybox: 10 program headers, to byte 624.
        let ten: Vec<(u32, u64, u64)> = (0..10).map(|_| (1, 0, 0x400)).collect();
        let mut b = elf(2, 62, 2, &ten);
        b.resize(HEAD_BYTES, 0);
        assert!(check_head(&b[..HEAD_FIRST]).is_err());
        let end = headers_end(&b[..HEAD_FIRST]).unwrap();
        assert_eq!(end, 64 + 10 * 56);
        assert_eq!(check_head(&b[..end]), Ok(None));
        // A dynamic program whose interpreter header lies past the first read: refused from
        // its headers, so proc reads the whole head and refuses it as before.
        let mut dynamic = ten.clone();
        dynamic[9] = (3, 0x200, 0x1c);
        let mut d = elf(2, 62, 2, &dynamic);
        d.resize(HEAD_BYTES, 0);
        let end = headers_end(&d[..HEAD_FIRST]).unwrap();
        assert!(check_head(&d[..end]).is_err());
        assert_eq!(
            check_head(&d),
            Err(ExecError::Dynamic("/lib64/ld-linux-x86-64.so.2".into()))
        );
        // Headers that end past the head, a count that overflows, too short, not ELF: none.
        let mut far = b.clone();
        far[32..40].copy_from_slice(&(HEAD_BYTES as u64).to_le_bytes());
        assert_eq!(headers_end(&far), None);
        far[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(headers_end(&far), None);
        assert_eq!(headers_end(&b[..63]), None);
        assert_eq!(headers_end(b"#!/bin/sh\n"), None);
    }

    #[test]
    fn modes() {
        assert_eq!(check_mode(0o100755), Ok(()));
        assert_eq!(check_mode(0o100100), Ok(()));
        assert_eq!(check_mode(0o100644), Err(ExecError::NoPermission));
        assert_eq!(check_mode(0o040755), Err(ExecError::NotRegular));
    }

    #[test]
    fn statuses_and_errnos() {
        assert_eq!(ExecError::NotFound.shell_status(), 127);
        assert_eq!(ExecError::NotElf.shell_status(), 126);
        assert_eq!(ExecError::NotFound.errno(), errno::ENOENT);
        assert_eq!(ExecError::Dynamic("x".into()).errno(), errno::ENOEXEC);
        assert_eq!(ExecError::NotRegular.errno(), errno::EACCES);
    }

    #[test]
    fn names_become_paths() {
        let env = vec![String::from("HOME=/root"), String::from("PATH=/sbin::/bin")];
        assert_eq!(search_path(&env), "/sbin::/bin");
        assert_eq!(search_path(&[]), DEFAULT_PATH);
        assert_eq!(
            candidates("ls", "/tmp", "/sbin::/bin"),
            vec!["/sbin/ls", "/tmp/./ls", "/bin/ls"]
        );
        assert_eq!(candidates("./x", "/tmp", "/bin"), vec!["/tmp/./x"]);
        assert_eq!(candidates("/bin/x", "/tmp", "/bin"), vec!["/bin/x"]);
        assert_eq!(candidates("a/b", "/", "/bin"), vec!["/a/b"]);
        assert!(candidates("", "/", "/bin").is_empty());
    }
}
