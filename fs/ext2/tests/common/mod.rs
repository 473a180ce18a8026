//! Shared helpers for the host tests: scratch directories, mkfs/e2fsck/debugfs wrappers, a
//! generated host tree with every file type, and a tree comparison.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use sawmill_ext2::{FileKind, Fs, MemDevice};

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*: deterministic and good enough for test data.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);
impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("sawmill-ext2-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn run(cmd: &mut Command) -> (i32, String) {
    let out = cmd.output().expect("run e2fsprogs tool");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), s)
}

/// mke2fs -t ext2 with extra options; `size_k` in KiB.
pub fn mkfs(img: &Path, size_k: u64, opts: &[&str], root: Option<&Path>) {
    let mut c = Command::new("mke2fs");
    c.args(["-q", "-F", "-t", "ext2", "-E", "root_owner=0:0"])
        .args(opts);
    if let Some(r) = root {
        c.arg("-d").arg(r);
    }
    c.arg(img).arg(format!("{size_k}k"));
    let (code, out) = run(&mut c);
    assert_eq!(code, 0, "mke2fs {opts:?} failed: {out}");
}

/// `e2fsck -fn`: returns (clean, output).
pub fn fsck(img: &Path) -> (bool, String) {
    let (code, out) = run(Command::new("e2fsck").args(["-fn"]).arg(img));
    (code == 0, out)
}

pub fn assert_fsck_clean(img: &Path, what: &str) {
    let (ok, out) = fsck(img);
    assert!(ok, "e2fsck -fn not clean after {what}:\n{out}");
}

/// Rebuilds directory indexes (htree) for every directory that spans more than a block.
pub fn fsck_index_dirs(img: &Path) {
    let (code, out) = run(Command::new("e2fsck").args(["-fyD"]).arg(img));
    assert!(code == 0 || code == 1, "e2fsck -fyD failed ({code}): {out}");
}

pub fn debugfs(img: &Path, req: &str) -> String {
    let (_, out) = run(Command::new("debugfs").arg("-R").arg(req).arg(img));
    out
}

pub fn load(img: &Path) -> Fs<MemDevice> {
    Fs::open(MemDevice(fs::read(img).unwrap())).expect("open image")
}

pub fn store(fs: Fs<MemDevice>, img: &Path) {
    fs::write(img, fs.into_device().0).unwrap();
}

fn set_mtime(p: &Path, t: u64) {
    let f = fs::File::open(p).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(t))
        .unwrap();
}

/// Builds a host tree exercising everything the engine must read: empty, small, indirect,
/// double-indirect and sparse (triple-indirect at 1 KiB blocks) files, deep nesting, a
/// many-entry directory, 255-byte and UTF-8 names, fast and slow symlinks, hard links,
/// FIFOs, sockets and device nodes, assorted modes and mtimes.
pub fn gen_tree(root: &Path, seed: u64, big: bool) {
    let mut rng = Rng(seed | 1);
    fs::create_dir_all(root).unwrap();
    let w = |p: &Path, data: &[u8]| fs::write(p, data).unwrap();
    w(&root.join("empty"), b"");
    w(&root.join("small.txt"), b"hello, sawmill\n");
    w(&root.join("indirect.bin"), &rng.bytes(13 * 1024 + 77));
    let dsize = if big { 300 * 1024 + 5 } else { 40 * 1024 };
    w(&root.join("double.bin"), &rng.bytes(dsize));
    // Sparse: data at the start, in the middle and past 70 MiB (triple indirect at 1 KiB).
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = fs::File::create(root.join("sparse.bin")).unwrap();
        f.write_all(b"start").unwrap();
        f.seek(SeekFrom::Start(5 * 1024 * 1024 + 3)).unwrap();
        f.write_all(&rng.bytes(3000)).unwrap();
        f.seek(SeekFrom::Start(70 * 1024 * 1024 + 1)).unwrap();
        f.write_all(b"far away").unwrap();
        f.set_len(72 * 1024 * 1024).unwrap();
    }
    let mut deep = root.join("deep");
    for i in 0..20 {
        deep = deep.join(format!("level{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    w(&deep.join("bottom"), b"at the bottom\n");
    let many = root.join("many");
    fs::create_dir(&many).unwrap();
    let n = if big { 600 } else { 150 };
    for i in 0..n {
        w(
            &many.join(format!("entry-{i:04}-{}", "x".repeat(i % 40))),
            format!("{i}\n").as_bytes(),
        );
    }
    let names = root.join("names");
    fs::create_dir(&names).unwrap();
    w(&names.join("n".repeat(255)), b"long name");
    w(&names.join("ünïcødé-名前-😀"), b"utf8");
    w(&names.join("with space & symbols!#"), b"sym");
    std::os::unix::fs::symlink("small.txt", root.join("fastlink")).unwrap();
    let long_target = format!("{}/target", "d".repeat(120));
    std::os::unix::fs::symlink(&long_target, root.join("slowlink")).unwrap();
    std::os::unix::fs::symlink("deep/level0/level1", root.join("dirlink")).unwrap();
    fs::hard_link(root.join("small.txt"), root.join("hardlink")).unwrap();
    fs::hard_link(root.join("small.txt"), names.join("another-hardlink")).unwrap();
    let special = root.join("special");
    fs::create_dir(&special).unwrap();
    let st = Command::new("mkfifo")
        .arg(special.join("fifo"))
        .status()
        .unwrap();
    assert!(st.success());
    let _sock = std::os::unix::net::UnixListener::bind(special.join("socket")).unwrap();
    let _ = Command::new("mknod")
        .arg(special.join("chr"))
        .args(["c", "1", "3"])
        .status();
    let _ = Command::new("mknod")
        .arg(special.join("blk"))
        .args(["b", "8", "1"])
        .status();
    let _ = Command::new("mknod")
        .arg(special.join("bigdev"))
        .args(["c", "300", "70000"])
        .status();
    fs::set_permissions(root.join("small.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::set_permissions(
        root.join("indirect.bin"),
        fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    fs::set_permissions(&special, fs::Permissions::from_mode(0o1777)).unwrap();
    for (i, p) in ["empty", "small.txt", "double.bin", "many", "names", "deep"]
        .iter()
        .enumerate()
    {
        set_mtime(&root.join(p), 1_000_000_000 + i as u64 * 12345);
    }
}

fn kind_of(md: &fs::Metadata) -> FileKind {
    use std::os::unix::fs::FileTypeExt;
    let t = md.file_type();
    if t.is_file() {
        FileKind::Regular
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_char_device() {
        FileKind::CharDev
    } else if t.is_block_device() {
        FileKind::BlockDev
    } else if t.is_fifo() {
        FileKind::Fifo
    } else {
        FileKind::Socket
    }
}

/// Asserts the image tree under `img_dir` reproduces the host tree under `host` byte for
/// byte: names, types, modes, owners, sizes, contents, link targets, device numbers, mtimes
/// and hard-link structure. `skip_root` names root entries only the image has.
pub fn compare_tree(fs: &mut Fs<MemDevice>, img_dir: u32, host: &Path, skip: &[&str]) {
    let mut links: HashMap<(u64, u64), u32> = HashMap::new();
    compare_dir(fs, img_dir, host, skip, &mut links, true);
}

/// Like [`compare_tree`] against a `debugfs rdump` of the image, which copies hard links
/// separately and skips FIFOs, sockets and device nodes.
pub fn compare_dump(fs: &mut Fs<MemDevice>, img_dir: u32, host: &Path, skip: &[&str]) {
    let mut links: HashMap<(u64, u64), u32> = HashMap::new();
    compare_dir(fs, img_dir, host, skip, &mut links, false);
}

fn compare_dir(
    fs: &mut Fs<MemDevice>,
    dir: u32,
    host: &Path,
    skip: &[&str],
    links: &mut HashMap<(u64, u64), u32>,
    strict: bool,
) {
    let mut host_names: Vec<Vec<u8>> = fs::read_dir(host)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_encoded_bytes())
        .collect();
    host_names.sort();
    let mut img_names: Vec<Vec<u8>> = fs
        .readdir(dir)
        .unwrap()
        .into_iter()
        .filter(|e| {
            strict
                || !matches!(
                    fs.stat(e.ino).unwrap().kind,
                    FileKind::Fifo | FileKind::Socket | FileKind::CharDev | FileKind::BlockDev
                )
        })
        .map(|e| e.name)
        .filter(|n| n != b"." && n != b".." && !skip.iter().any(|s| s.as_bytes() == n.as_slice()))
        .collect();
    img_names.sort();
    assert_eq!(img_names, host_names, "entries of {}", host.display());
    for name in host_names {
        let hp = host.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&name));
        let md = fs::symlink_metadata(&hp).unwrap();
        let ino = fs.lookup(dir, &name).unwrap();
        let st = fs.stat(ino).unwrap();
        let what = hp.display();
        assert_eq!(st.kind, kind_of(&md), "kind of {what}");
        let mask = if strict { 0o177777 } else { 0o170777 }; // debugfs rdump drops set-id and sticky bits
        assert_eq!(st.mode as u32 & mask, md.mode() & mask, "mode of {what}");
        assert_eq!((st.uid, st.gid), (md.uid(), md.gid()), "owner of {what}");
        if st.kind != FileKind::Dir && strict {
            assert_eq!(st.nlink as u64, md.nlink(), "links of {what}");
            if let Some(&prev) = links.get(&(md.dev(), md.ino())) {
                assert_eq!(prev, ino, "hard link structure at {what}");
            }
            links.insert((md.dev(), md.ino()), ino);
        }
        if st.kind != FileKind::Symlink {
            assert_eq!(st.mtime as i64, md.mtime(), "mtime of {what}");
        }
        match st.kind {
            FileKind::Regular => {
                assert_eq!(st.size, md.len(), "size of {what}");
                let data = fs.read_all(ino).unwrap();
                assert!(data == fs::read(&hp).unwrap(), "contents of {what}");
            }
            FileKind::Symlink => {
                let t = fs::read_link(&hp)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes();
                assert_eq!(fs.readlink(ino).unwrap(), t, "target of {what}");
            }
            FileKind::Dir => compare_dir(fs, ino, &hp, &[], links, strict),
            FileKind::CharDev | FileKind::BlockDev => {
                let rdev = md.rdev();
                let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
                let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
                assert_eq!(st.rdev, (major as u32, minor as u32), "rdev of {what}");
            }
            _ => {}
        }
    }
}
