//! Turning a program's path into the absolute path the file system resolves: relative paths
//! start at the working directory or at a directory descriptor's path, `.` and repeated slashes
//! go, `..` is resolved here only where it is exact (against a base known to be free of
//! symlinks, such as the working directory, which `chdir` canonicalizes); every other `..` is
//! left for the file system, which resolves it physically after symlinks, as Linux does. A path
//! that must name a directory (it ends in `/`, `.` or `..`) keeps a trailing `/`, so the file
//! system refuses a non-directory with `ENOTDIR`.

use alloc::vec::Vec;

use crate::errno::{ELOOP, ENAMETOOLONG, ENOENT, ENOTDIR};
use crate::Errno;

use super::abi::{S_IFDIR, S_IFLNK, S_IFMT};
use super::backend::Backend;

/// The longest path a program may pass: Linux's `PATH_MAX` counts the C string's NUL, so one
/// byte less than the file system's limit (`sawmill_path::PATH_MAX`, which counts path bytes).
pub const PATH_MAX: usize = sawmill_path::PATH_MAX - 1;
pub use sawmill_path::{MAX_LINKS, NAME_MAX};

/// A directory the path starts from: its absolute path, and whether that path is canonical (no
/// symlinks, no `..`), which makes a leading `..` exact to resolve here.
#[derive(Clone, Copy)]
pub struct Base<'a> {
    pub path: &'a [u8],
    pub canonical: bool,
}

/// The absolute path for `path` given relative to `base`. `ENOENT` for an empty path,
/// `ENAMETOOLONG` for a name over 255 bytes or a path over 4095.
pub fn resolve(base: Base, path: &[u8]) -> Result<Vec<u8>, Errno> {
    if path.is_empty() {
        return Err(ENOENT);
    }
    if path.len() > PATH_MAX {
        return Err(ENAMETOOLONG);
    }
    if is_plain_absolute(path) {
        return Ok(path.to_vec());
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    // How many of `parts` come from a canonical base (those a `..` may remove).
    let mut exact = 0;
    if path[0] != b'/' {
        parts.extend(base.path.split(|&c| c == b'/').filter(|c| !c.is_empty()));
        if base.canonical {
            exact = parts.len();
        }
    }
    let mut dir_only = false;
    for name in path.split(|&c| c == b'/') {
        dir_only = false;
        match name {
            b"" => dir_only = true,
            b"." => dir_only = true,
            b".." => {
                dir_only = true;
                if parts.is_empty() {
                    // `/..` is `/`.
                } else if exact == parts.len() {
                    parts.pop();
                    exact -= 1;
                } else {
                    parts.push(name);
                }
            }
            _ if name.len() > NAME_MAX => return Err(ENAMETOOLONG),
            _ => parts.push(name),
        }
    }
    let mut out = Vec::with_capacity(path.len() + base.path.len() + 1);
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() || dir_only {
        out.push(b'/');
    }
    if out.len() > PATH_MAX {
        return Err(ENAMETOOLONG);
    }
    Ok(out)
}

/// Whether `path` is already what [`resolve`] makes of it whatever the base: absolute, with no
/// empty, `.` or `..` name (so no repeated or trailing slash) and no name over `NAME_MAX`. The
/// common case (a program's absolute path), answered without taking the path apart.
pub fn is_plain_absolute(path: &[u8]) -> bool {
    path.len() > 1
        && path.len() <= PATH_MAX
        && path[0] == b'/'
        && path[1..]
            .split(|&c| c == b'/')
            .all(|n| !n.is_empty() && n != b"." && n != b".." && n.len() <= NAME_MAX)
}

/// The canonical absolute path of the directory `path` names (every symlink replaced by its
/// target, no `.` or `..`), asking the file system about each name: what `chdir` keeps, so that
/// `getcwd` reports it as Linux does. `ENOTDIR` if it is not a directory.
pub fn canonical_dir<B: Backend>(fs: &mut B, path: &[u8]) -> Result<Vec<u8>, Errno> {
    // Names still to walk, last first; the canonical path walked so far.
    let mut todo: Vec<Vec<u8>> = Vec::new();
    push_names(&mut todo, path);
    let mut done: Vec<u8> = Vec::new();
    let mut links = 0;
    while let Some(name) = todo.pop() {
        match &name[..] {
            b"." => continue,
            b".." => {
                let cut = done.iter().rposition(|&c| c == b'/').unwrap_or(0);
                done.truncate(cut);
                continue;
            }
            _ => {}
        }
        let at = done.len();
        done.push(b'/');
        done.extend_from_slice(&name);
        let s = fs.stat(&done, false)?;
        match s.mode & S_IFMT {
            S_IFLNK => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(ELOOP);
                }
                let target = fs.readlink(&done)?;
                if target.is_empty() {
                    return Err(ENOENT);
                }
                done.truncate(at);
                if target[0] == b'/' {
                    done.clear();
                }
                push_names(&mut todo, &target);
            }
            S_IFDIR => {}
            _ => return Err(ENOTDIR),
        }
        if done.len() > PATH_MAX {
            return Err(ENAMETOOLONG);
        }
    }
    if done.is_empty() {
        done.push(b'/');
    }
    Ok(done)
}

/// `/proc/self` names the reader's own /proc directory, which only the process itself knows (the
/// /proc server is asked through the VFS on behalf of everyone): `/proc/self` and paths under it
/// become `/proc/PID`. `pid` 0 (not known) leaves every path alone.
pub fn proc_self(path: Vec<u8>, pid: u32) -> Vec<u8> {
    const SELF: &[u8] = b"/proc/self";
    match path.strip_prefix(SELF) {
        Some(rest) if pid != 0 && (rest.is_empty() || rest[0] == b'/') => {
            let mut out = alloc::format!("/proc/{}", pid).into_bytes();
            out.extend_from_slice(rest);
            out
        }
        _ => path,
    }
}

/// Pushes the names of `path` on `todo` so that the first name is popped first.
fn push_names(todo: &mut Vec<Vec<u8>>, path: &[u8]) {
    for name in path.rsplit(|&c| c == b'/').filter(|c| !c.is_empty()) {
        todo.push(name.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CWD: Base = Base {
        path: b"/home",
        canonical: true,
    };

    #[test]
    fn plain_absolute_paths_come_back_unchanged() {
        for p in [
            &b"/bench/small"[..],
            b"/a",
            b"/a.b/..c/.d",
            b"/.../a..",
            b"/x/.a/b.",
        ] {
            assert!(is_plain_absolute(p));
            assert_eq!(resolve(CWD, p).unwrap(), p);
        }
    }

    #[test]
    fn proc_self_is_the_own_directory() {
        let r = |p: &[u8], pid| proc_self(p.to_vec(), pid);
        assert_eq!(r(b"/proc/self", 7), b"/proc/7");
        assert_eq!(r(b"/proc/self/", 7), b"/proc/7/");
        assert_eq!(r(b"/proc/self/status", 42), b"/proc/42/status");
        for other in [
            &b"/proc/selfish"[..],
            b"/proc/1/self",
            b"/proc",
            b"/x/proc/self",
        ] {
            assert_eq!(r(other, 7), other);
        }
        assert_eq!(r(b"/proc/self/stat", 0), b"/proc/self/stat");
    }

    #[test]
    fn other_paths_take_the_general_way() {
        for p in [
            &b"/"[..],
            b"a",
            b"/a/",
            b"/a//b",
            b"/a/./b",
            b"/a/..",
            b"//a",
            b"/.",
            b"/a/.",
            b"/../a",
            b"/a/../b",
        ] {
            assert!(!is_plain_absolute(p));
        }
        assert_eq!(resolve(CWD, b"/a//b/.").unwrap(), b"/a/b/");
        assert_eq!(resolve(CWD, b"x").unwrap(), b"/home/x");
        assert_eq!(resolve(CWD, b"/").unwrap(), b"/");
        let long = [b'n'; NAME_MAX + 1];
        let mut p = b"/".to_vec();
        p.extend_from_slice(&long);
        assert!(!is_plain_absolute(&p));
        assert_eq!(resolve(CWD, &p), Err(ENAMETOOLONG));
    }
}
