//! What Linux programs see of a file beyond its bytes: full attributes (checked against what
//! the host's e2fsprogs and the host's own `stat` report for the same inodes), timestamps kept
//! as Linux keeps them, hard links, ownership and time changes, statfs, rename's NOREPLACE.
//! Every image written is checked with `e2fsck -fn`; crafted inodes give errors, not panics.
mod common;
use common::*;
use sawmill_ext2::{Error, FileKind, SetAttr};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

fn debugfs_w(img: &Path, req: &str) {
    let st = Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg(req)
        .arg(img)
        .output()
        .unwrap();
    assert!(st.status.success(), "debugfs -w {req}");
}

/// A value debugfs prints after `key` in its `stat` output (the first number).
fn debugfs_field(img: &Path, path: &str, key: &str) -> String {
    let out = debugfs(img, &format!("stat {path}"));
    let at = out.find(key).unwrap_or_else(|| panic!("{key} in {out}"));
    out[at + key.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn attributes_match_the_host_and_e2fsprogs() {
    // A host tree with known modes, times and a hard link, copied by mke2fs -d (which keeps
    // mode, times and link structure): our stat must report what the host's stat does.
    let s = Scratch::new("lattr-host");
    let root = s.path("tree");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("small"), b"12345").unwrap();
    std::fs::write(root.join("d/big"), vec![1u8; 300 * 1024]).unwrap();
    std::fs::hard_link(root.join("small"), root.join("d/hard")).unwrap();
    for (p, t) in [("small", 1_000_000_000u64), ("d/big", 1_234_567_890)] {
        let f = std::fs::File::options()
            .write(true)
            .open(root.join(p))
            .unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(t))
            .unwrap();
    }
    let img = s.path("img");
    mkfs(&img, 4096, &["-b", "1024", "-I", "128"], Some(&root));
    let mut fs = load(&img);
    for p in ["small", "d/big", "d/hard", "d"] {
        let host = std::fs::symlink_metadata(root.join(p)).unwrap();
        let ino = fs.resolve(p.as_bytes()).unwrap();
        let st = fs.stat(ino).unwrap();
        assert_eq!(st.mode as u32, host.mode(), "{p} mode");
        // (A directory's size is its own file system's block layout.)
        if !host.is_dir() {
            assert_eq!(st.size, host.size(), "{p} size");
            assert_eq!(st.nlink as u64, host.nlink(), "{p} nlink");
            assert_eq!(st.mtime as i64, host.mtime(), "{p} mtime");
        }
        // i_blocks as e2fsprogs counts it (data plus indirect blocks, 512-byte units).
        let count: u64 = debugfs_field(&img, p, "Blockcount:").parse().unwrap();
        assert_eq!(st.sectors, count, "{p} blocks");
        let generation: u32 = debugfs_field(&img, p, "Generation:").parse().unwrap();
        assert_eq!(
            fs.stat_more(ino).unwrap().generation,
            generation,
            "{p} generation"
        );
    }
}

#[test]
fn device_numbers_decode_both_encodings_as_e2fsprogs() {
    let s = Scratch::new("lattr-dev");
    let img = s.path("img");
    mkfs(&img, 2048, &["-b", "1024"], None);
    // Old encoding (major and minor below 256) and new (either above).
    for (name, kind, major, minor) in [
        ("null", "c", 1, 3),
        ("sda", "b", 8, 0),
        ("nvme", "b", 259, 5),
        ("wide", "c", 300, 200),
        ("p", "p", 0, 0),
    ] {
        let req = if kind == "p" {
            format!("mknod {name} p")
        } else {
            format!("mknod {name} {kind} {major} {minor}")
        };
        debugfs_w(&img, &req);
    }
    let mut fs = load(&img);
    for (name, kind, rdev) in [
        ("null", FileKind::CharDev, (1, 3)),
        ("sda", FileKind::BlockDev, (8, 0)),
        ("nvme", FileKind::BlockDev, (259, 5)),
        ("wide", FileKind::CharDev, (300, 200)),
        ("p", FileKind::Fifo, (0, 0)),
    ] {
        let ino = fs.resolve(name.as_bytes()).unwrap();
        let st = fs.stat(ino).unwrap();
        assert_eq!((st.kind, st.rdev), (kind, rdev), "{name}");
    }
    // Ours round-trip through e2fsprogs too.
    let d = fs.root();
    fs.mknod(d, b"ours", FileKind::CharDev, 0o600, 0, 0, (511, 70000))
        .unwrap();
    store(fs, &img);
    assert_fsck_clean(&img, "mknod");
    assert!(debugfs(&img, "stat ours").contains("511:70000"));
}

#[test]
fn garbage_device_numbers_and_link_counts_are_not_panics() {
    let s = Scratch::new("lattr-bad");
    let img = s.path("img");
    mkfs(&img, 2048, &["-b", "1024"], None);
    debugfs_w(&img, "mknod dev c 1 3");
    debugfs_w(&img, "write /dev/null f");
    debugfs_w(&img, "sif dev block[0] 0xffffffff");
    debugfs_w(&img, "sif dev block[1] 0xffffffff");
    debugfs_w(&img, "sif f links_count 0");
    let mut fs = load(&img);
    let dev = fs.resolve(b"dev").unwrap();
    let st = fs.stat(dev).unwrap();
    assert_eq!(st.kind, FileKind::CharDev);
    assert_eq!(
        st.rdev,
        (0xff, 0xff),
        "old encoding wins when block[0] is set"
    );
    let d = fs.root();
    let f = fs.lookup(d, b"f").unwrap();
    assert!(matches!(fs.unlink(d, b"f"), Err(Error::Corrupt(_))));
    assert!(matches!(fs.link(f, d, b"g"), Err(Error::Corrupt(_))));
    let dev_ino = dev;
    // A device inode has no data to read or write.
    let mut buf = [0u8; 4];
    assert!(fs.read(dev_ino, 0, &mut buf).is_err());
    assert!(fs.write(dev_ino, 0, b"x").is_err());
    assert!(fs.truncate(dev_ino, 0).is_err());
}

#[test]
fn timestamps_links_owners_and_statfs_as_linux() {
    let s = Scratch::new("lattr-ops");
    let img = s.path("img");
    mkfs(&img, 4096, &["-b", "1024"], None);
    let mut fs = load(&img);
    let root = fs.root();
    fs.set_time(100);
    let d = fs.mkdir(root, b"d", 0o755, 0, 0).unwrap();
    let f = fs.create(d, b"f", 0o644, 0, 0).unwrap();
    // A write sets mtime and ctime; atime is never updated (noatime).
    fs.set_time(200);
    fs.write(f, 0, &[9u8; 3000]).unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!((st.atime, st.mtime, st.ctime), (100, 200, 200));
    assert_eq!(st.sectors, 6);
    let mut buf = [0u8; 16];
    fs.set_time(250);
    fs.read(f, 0, &mut buf).unwrap();
    assert_eq!(fs.stat(f).unwrap().atime, 100);
    // Truncate: mtime and ctime.
    fs.set_time(300);
    fs.truncate(f, 10).unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!((st.mtime, st.ctime, st.sectors), (300, 300, 2));
    // A hard link: the inode's ctime, the directory's mtime and ctime.
    fs.set_time(400);
    fs.link(f, root, b"hard").unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!((st.nlink, st.mtime, st.ctime), (2, 300, 400));
    let r = fs.stat(root).unwrap();
    assert_eq!((r.mtime, r.ctime), (400, 400));
    assert_eq!(fs.link(f, root, b"hard"), Err(Error::Exists));
    assert_eq!(fs.link(d, root, b"dirlink"), Err(Error::IsDir));
    // chmod/chown: ctime only; explicit times (utimens) keep the given values.
    fs.set_time(500);
    fs.set_attr(
        f,
        &SetAttr {
            perm: Some(0o4750),
            uid: Some(1000),
            gid: Some(100),
            atime: Some(11),
            mtime: Some(22),
        },
    )
    .unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!(
        (st.mode, st.uid, st.gid, st.atime, st.mtime, st.ctime),
        (0o104750, 1000, 100, 11, 22, 500)
    );
    // Unlink of one name: the inode's ctime, the directory's times.
    fs.set_time(600);
    fs.unlink(root, b"hard").unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!((st.nlink, st.ctime), (1, 600));
    assert_eq!(fs.stat(root).unwrap().mtime, 600);
    // RENAME_NOREPLACE: an existing target (even the source itself) is Exists, nothing moves.
    let g = fs.create(d, b"g", 0o644, 0, 0).unwrap();
    assert_eq!(fs.rename_with(d, b"f", d, b"g", true), Err(Error::Exists));
    assert_eq!(fs.rename_with(d, b"f", d, b"f", true), Err(Error::Exists));
    assert_eq!(fs.lookup(d, b"g"), Ok(g));
    fs.set_time(700);
    fs.rename_with(d, b"f", root, b"moved", true).unwrap();
    assert_eq!(fs.stat(f).unwrap().ctime, 700);
    assert_eq!(fs.stat(d).unwrap().mtime, 700);
    // Overwrite rules.
    let e = fs.mkdir(root, b"e", 0o755, 0, 0).unwrap();
    fs.mkdir(e, b"x", 0o755, 0, 0).unwrap();
    fs.mkdir(root, b"empty", 0o755, 0, 0).unwrap();
    assert_eq!(fs.rename(root, b"e", root, b"moved"), Err(Error::NotDir));
    assert_eq!(fs.rename(root, b"moved", root, b"e"), Err(Error::IsDir));
    assert_eq!(fs.rename(root, b"empty", root, b"e"), Err(Error::NotEmpty));
    fs.rename(root, b"e", root, b"empty").unwrap();
    // statfs agrees with the superblock as e2fsprogs reads it.
    let sf = fs.statfs();
    store(fs, &img);
    assert_fsck_clean(&img, "links, attributes and renames");
    let out = debugfs(&img, "stats");
    let field = |k: &str| -> u64 {
        let at = out.find(k).unwrap();
        out[at + k.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(sf.blocks, field("Block count:"));
    assert_eq!(sf.free_blocks, field("Free blocks:"));
    assert_eq!(
        sf.avail_blocks,
        sf.free_blocks - field("Reserved block count:")
    );
    assert_eq!(sf.inodes, field("Inode count:"));
    assert_eq!(sf.free_inodes, field("Free inodes:"));
    assert_eq!((sf.block_size, sf.name_max), (1024, 255));
}

#[test]
fn link_count_limit_is_too_many_links() {
    let s = Scratch::new("lattr-max");
    let img = s.path("img");
    mkfs(&img, 2048, &["-b", "1024"], None);
    debugfs_w(&img, "write /dev/null f");
    debugfs_w(&img, "sif f links_count 32000");
    let mut fs = load(&img);
    let root = fs.root();
    let f = fs.lookup(root, b"f").unwrap();
    assert_eq!(fs.link(f, root, b"one-more"), Err(Error::TooManyLinks));
}

#[test]
fn nanoseconds_from_large_inodes_and_cleared_with_new_seconds() {
    // mke2fs -d keeps whole seconds only: the nanoseconds are set with debugfs, whose own
    // `stat` shows them as the extra field (nanoseconds << 2).
    let s = Scratch::new("lattr-nsec");
    let img = s.path("img");
    mkfs(&img, 4096, &["-b", "1024", "-I", "256"], None);
    debugfs_w(&img, "write /dev/null f");
    let (ans, mns) = (111_222_333u32, 444_555_666u32);
    debugfs_w(&img, &format!("sif f atime_extra {:#x}", ans << 2));
    debugfs_w(&img, &format!("sif f mtime_extra {:#x}", mns << 2));
    assert!(debugfs(&img, "stat f").contains(&format!(":{:08x}", mns << 2)));
    let mut fs = load(&img);
    let ino = fs.resolve(b"f").unwrap();
    assert_eq!(fs.stat_more(ino).unwrap().nsec, [ans, mns, 0]);
    // A new mtime (whole seconds) drops mtime's and ctime's nanoseconds; atime's stay.
    fs.set_time(1_700_000_000);
    fs.set_attr(
        ino,
        &SetAttr {
            mtime: Some(1_650_000_000),
            ..SetAttr::default()
        },
    )
    .unwrap();
    let st = fs.stat(ino).unwrap();
    let nsec = fs.stat_more(ino).unwrap().nsec;
    assert_eq!((nsec, st.mtime), ([ans, 0, 0], 1_650_000_000));
    // New files have 0.
    let root = fs.root();
    let g = fs.create(root, b"g", 0o644, 0, 0).unwrap();
    fs.write(g, 0, b"data").unwrap();
    assert_eq!(fs.stat_more(g).unwrap().nsec, [0; 3]);
    store(fs, &img);
    assert_fsck_clean(&img, "time changes on large inodes");
    let out = debugfs(&img, "stat f");
    assert!(
        out.contains(&format!(":{:08x}", ans << 2)) && !out.contains(&format!(":{:08x}", mns << 2))
    );
}
