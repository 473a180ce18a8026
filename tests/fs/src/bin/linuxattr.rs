//! Scenario fs-linuxattr: what Linux programs need of the file-system stack beyond reading and
//! writing, through the booted stack (fsclient → VFS → ext2 PFS → engine):
//!
//! - full attributes: blocks in 512-byte units, times, device inodes' rdev in the old and the
//!   new encoding (made by the host's `debugfs mknod`, so Linux's tools wrote them), and `open`
//!   of a device inode refused with `Device`;
//! - timestamps: a write sets mtime and ctime, a new entry sets its directory's, `utimens` with
//!   explicit times, UTIME_NOW and UTIME_OMIT;
//! - hard links (nlink, `Exists`, `NotPermitted` for a directory, `Xdev` across mounts), chown
//!   by path and by fd, fchmod, statfs and fstatfs, rename with NOREPLACE and EXCHANGE;
//! - paths longer than one message (staged at the VFS) up to PATH_MAX, and `NameTooLong` past it.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec;
use sawmill_fsclient::{Error, RenameFlags, TimeSet, O_CREATE, O_READ, O_WRITE};
use sawmill_fstests::{check, files, ok, read_file};
use sawmill_rt::println;

sawmill_rt::entry!(main);

/// The PFS's clock (servers/ext2: the system has no wall clock yet).
/// Whether `t` is "now": at or after the test started, and not in the future (the PFS stamps
/// changes with the kernel's wall clock, `sawmill_rt::clock`).
fn is_now(t: u32) -> bool {
    let now = sawmill_rt::clock::Wall::get().now_secs() as u32;
    t >= START.load(core::sync::atomic::Ordering::Relaxed) && t <= now
}
static START: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
const S_IFMT: u32 = 0o170000;
const S_IFCHR: u32 = 0o020000;
const S_IFBLK: u32 = 0o060000;

fn main() {
    START.store(
        sawmill_rt::clock::Wall::get().now_secs() as u32,
        core::sync::atomic::Ordering::Relaxed,
    );
    let mut f = files();

    // Device inodes made by debugfs on the host (the manifest's disk): old and new encoding.
    let null = ok(f.stat("/null"), "stat /null");
    check!(
        null.mode & S_IFMT == S_IFCHR && null.rdev == (1, 3),
        "char device: mode {:o} rdev {:?}",
        null.mode,
        null.rdev
    );
    let big = ok(f.stat("/bigdev"), "stat /bigdev");
    check!(
        big.mode & S_IFMT == S_IFBLK && big.rdev == (259, 300),
        "block device (new encoding): mode {:o} rdev {:?}",
        big.mode,
        big.rdev
    );
    check!(
        f.open("/null", O_READ, 0) == Err(Error::Device),
        "open of a device inode is not Device"
    );
    println!("linuxattr: device inodes ok");

    // Data, blocks and times.
    ok(f.mkdir("/t", 0o755), "mkdir /t");
    ok(
        f.utimens("/t", TimeSet::At(5), TimeSet::At(6), true),
        "utimens /t",
    );
    let fd = ok(f.open("/t/a", O_CREATE | O_WRITE | O_READ, 0o644), "create");
    ok(f.write(fd, &vec![7u8; 5000]), "write");
    let st = ok(f.fstat(fd), "fstat");
    // 5 blocks of 1024 bytes = 10 sectors (no indirect block yet).
    check!(
        st.size == 5000 && st.blocks == 10 && st.nlink == 1,
        "size/blocks/nlink {} {} {}",
        st.size,
        st.blocks,
        st.nlink
    );
    check!(
        is_now(st.mtime.0) && is_now(st.ctime.0) && st.mtime.1 == 0,
        "write times {:?} {:?}",
        st.mtime,
        st.ctime
    );
    let dir = ok(f.stat("/t"), "stat /t");
    check!(
        is_now(dir.mtime.0) && is_now(dir.ctime.0) && dir.atime.0 == 5,
        "directory times after a new entry {:?} {:?} {:?}",
        dir.atime,
        dir.mtime,
        dir.ctime
    );
    ok(
        f.utimens("/t/a", TimeSet::At(1000), TimeSet::At(2000), true),
        "utimens",
    );
    let st = ok(f.stat("/t/a"), "stat after utimens");
    check!(
        st.atime.0 == 1000 && st.mtime.0 == 2000 && is_now(st.ctime.0),
        "utimens times {:?} {:?} {:?}",
        st.atime,
        st.mtime,
        st.ctime
    );
    ok(
        f.futimens(fd, TimeSet::Omit, TimeSet::Now),
        "futimens omit/now",
    );
    let st = ok(f.stat("/t/a"), "stat after futimens");
    check!(
        st.atime.0 == 1000 && is_now(st.mtime.0),
        "UTIME_OMIT/UTIME_NOW {:?} {:?}",
        st.atime,
        st.mtime
    );
    println!("linuxattr: times ok");

    // Hard links.
    ok(f.link("/t/a", "/t/b"), "link");
    let a = ok(f.stat("/t/a"), "stat a");
    let b = ok(f.stat("/t/b"), "stat b");
    check!(
        a.ino == b.ino && a.nlink == 2 && b.nlink == 2,
        "link count {} {}",
        a.nlink,
        b.nlink
    );
    check!(
        f.link("/t/a", "/t/b") == Err(Error::Exists),
        "link onto a name"
    );
    check!(
        f.link("/t", "/t2") == Err(Error::NotPermitted),
        "link of a directory"
    );
    check!(
        f.link("/t/a", "/data/a") == Err(Error::Xdev),
        "link across mounts"
    );
    check!(
        f.link("/t/none", "/t/c") == Err(Error::NotFound),
        "link of nothing"
    );
    ok(f.unlink("/t/b"), "unlink b");
    check!(
        ok(f.stat("/t/a"), "stat a").nlink == 1,
        "nlink after unlink"
    );
    println!("linuxattr: links ok");

    // Owners and modes.
    ok(f.chown("/t/a", Some(5), Some(6), true), "chown");
    let st = ok(f.stat("/t/a"), "stat after chown");
    check!(
        st.uid == 5 && st.gid == 6,
        "chown gave {}:{}",
        st.uid,
        st.gid
    );
    ok(f.fchown(fd, None, Some(7)), "fchown gid only");
    ok(f.fchmod(fd, 0o4711), "fchmod");
    let st = ok(f.fstat(fd), "fstat after fchown");
    check!(
        st.uid == 5 && st.gid == 7 && st.mode & 0o7777 == 0o4711,
        "fchown/fchmod gave {}:{} {:o}",
        st.uid,
        st.gid,
        st.mode
    );
    println!("linuxattr: owners ok");

    // statfs.
    let s = ok(f.statfs("/"), "statfs");
    check!(
        s.bsize == 1024 && s.blocks == 8192 && s.namelen == 255,
        "statfs {:?}",
        s
    );
    check!(
        s.bfree <= s.blocks && s.bavail <= s.bfree && s.ffree < s.files && s.files > 0,
        "statfs counts {:?}",
        s
    );
    let d = ok(f.statfs("/data/"), "statfs /data");
    check!(d.bsize == 4096, "statfs of the second mount {:?}", d);
    let fs = ok(f.fstatfs(fd), "fstatfs");
    check!(fs.blocks == s.blocks, "fstatfs {:?}", fs);
    ok(f.close(fd), "close");
    println!("linuxattr: statfs ok");

    // Rename flags and overwrite rules.
    let fd = ok(f.open("/t/b", O_CREATE | O_WRITE, 0o644), "create b");
    ok(f.close(fd), "close b");
    check!(
        f.rename_flags("/t/a", "/t/b", RenameFlags::NOREPLACE) == Err(Error::Exists),
        "NOREPLACE onto a file"
    );
    check!(
        f.rename_flags("/t/a", "/t/b", RenameFlags::EXCHANGE) == Err(Error::Invalid),
        "EXCHANGE"
    );
    ok(
        f.rename_flags("/t/a", "/t/c", RenameFlags::NOREPLACE),
        "NOREPLACE onto nothing",
    );
    ok(f.mkdir("/t/d", 0o755), "mkdir d");
    ok(f.mkdir("/t/e", 0o755), "mkdir e");
    ok(f.mkdir("/t/e/x", 0o755), "mkdir e/x");
    check!(
        f.rename("/t/d", "/t/c") == Err(Error::NotDir),
        "dir over file"
    );
    check!(
        f.rename("/t/c", "/t/d") == Err(Error::IsDir),
        "file over dir"
    );
    check!(
        f.rename("/t/d", "/t/e") == Err(Error::NotEmpty),
        "dir over full dir"
    );
    ok(f.rmdir("/t/e/x"), "rmdir e/x");
    ok(f.rename("/t/d", "/t/e"), "dir over empty dir");
    println!("linuxattr: rename ok");

    // Long paths: 15 directories of 200-byte names (> 3000 bytes), a file at the bottom.
    let mut p = String::from("/t");
    for i in 0..15 {
        p.push('/');
        for _ in 0..199 {
            p.push('d');
        }
        p.push((b'a' + i) as char);
        ok(f.mkdir(&p, 0o755), "mkdir long");
    }
    let file = alloc::format!("{p}/file");
    check!(file.len() > 3000, "long path only {} bytes", file.len());
    let fd = ok(
        f.open(&file, O_CREATE | O_WRITE, 0o644),
        "create at a long path",
    );
    ok(f.write(fd, b"deep\n"), "write deep");
    ok(f.close(fd), "close deep");
    check!(
        ok(read_file(&mut f, &file), "read at a long path") == b"deep\n",
        "long path content"
    );
    check!(ok(f.stat(&file), "stat long").size == 5, "long stat");
    let other = alloc::format!("{p}/moved");
    ok(f.rename(&file, &other), "rename long");
    ok(f.link(&other, &file), "link long");
    ok(f.unlink(&other), "unlink long");
    let mut too = p.clone();
    while too.len() < 4096 {
        too.push_str("/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    }
    check!(
        f.stat(&too).map(|_| ()) == Err(Error::NameTooLong),
        "a path over PATH_MAX"
    );
    ok(f.unlink(&file), "unlink deep");
    for _ in 0..15 {
        ok(f.rmdir(&p), "rmdir long");
        let cut = p.rfind('/').unwrap_or(0);
        p.truncate(cut);
    }
    println!("linuxattr: long paths ok");
    ok(f.sync(), "sync");
    println!("linuxattr: PASS Linux attributes through the stack");
}
