//! Write operations on mke2fs-made images: after each step our own check must be clean (the
//! counters exact), at the end (and, for one geometry, after every step) `e2fsck -fn` must be
//! clean, and debugfs must read back what we wrote.
mod common;
use common::*;
use sawmill_ext2::{Error, FileKind, Fs, MemDevice, SetAttr};
use std::path::Path;

const CONFIGS: &[(&str, &[&str])] = &[
    (
        "w1k",
        &["-b", "1024", "-I", "128", "-g", "1024", "-N", "512"],
    ),
    ("w2k", &["-b", "2048", "-I", "256"]),
    ("w4k", &["-b", "4096", "-I", "256"]),
    (
        "wnofeat",
        &[
            "-b",
            "1024",
            "-O",
            "^sparse_super,^resize_inode,^filetype,^dir_index,^large_file",
        ],
    ),
    ("wrev0", &["-r", "0", "-b", "1024"]),
];

struct Env<'a> {
    fs: Fs<MemDevice>,
    img: &'a Path,
    fsck_each: bool,
    step: u32,
}

impl Env<'_> {
    /// Runs after every operation: our check must be clean, and e2fsck too when asked.
    fn verify(&mut self, what: &str) {
        self.step += 1;
        let rep = self.fs.check().unwrap();
        assert!(
            rep.is_clean(),
            "our check after step {} ({what}): {:#?}",
            self.step,
            rep.problems
        );
        if self.fsck_each {
            // The disk is whole after a flush: a file a rename replaced is released only then
            // (`Fs::flush`), until when it is an unnamed inode.
            self.fs.flush().unwrap();
            std::fs::write(self.img, &self.fs.device().0).unwrap();
            assert_fsck_clean(self.img, what);
        }
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 10) as u8)
        .collect()
}

fn exercise(tag: &str, opts: &[&str], fsck_each: bool) {
    let s = Scratch::new(tag);
    let img = s.path("img");
    mkfs(&img, 8 * 1024, opts, None);
    let mut fs = load(&img);
    fs.set_time(1_700_000_000);
    let mut e = Env {
        fs,
        img: &img,
        fsck_each,
        step: 0,
    };
    let root = 2;
    let rev0 = opts.contains(&"-r");

    let a = e.fs.mkdir(root, b"a", 0o755, 1000, 100).unwrap();
    e.verify("mkdir a");
    let b = e.fs.mkdir(a, b"b", 0o700, 0, 0).unwrap();
    e.verify("mkdir a/b");
    let small = e.fs.create(a, b"small", 0o644, 1000, 100).unwrap();
    e.fs.write(small, 0, b"hello world\n").unwrap();
    e.verify("small file");
    // Direct + indirect + double indirect at 1 KiB blocks.
    let big = e.fs.create(root, b"big", 0o600, 0, 0).unwrap();
    let big_data = pattern(300 * 1024 + 17, 7);
    for chunk in big_data.chunks(4096).enumerate() {
        e.fs.write(big, (chunk.0 * 4096) as u64, chunk.1).unwrap();
    }
    e.verify("big file");
    // Overwrite across a block boundary in the middle.
    e.fs.write(big, 5000, &[0xAB; 3000]).unwrap();
    let mut expect_big = big_data.clone();
    expect_big[5000..8000].fill(0xAB);
    e.verify("overwrite");
    // Sparse, far out (triple indirect at 1 KiB blocks).
    let sparse = e.fs.create(root, b"sparse", 0o644, 0, 0).unwrap();
    e.fs.write(sparse, 0, b"head").unwrap();
    e.fs.write(sparse, 70 * 1024 * 1024 + 3, b"tail").unwrap();
    e.verify("sparse file");
    // Truncate down into the middle of the indirect range, then up again (a hole).
    e.fs.truncate(big, 20_000).unwrap();
    e.verify("truncate down");
    e.fs.truncate(big, 50_000).unwrap();
    e.verify("truncate up");
    expect_big.truncate(20_000);
    expect_big.resize(50_000, 0);
    e.fs.truncate(sparse, 10).unwrap();
    e.verify("truncate sparse");
    e.fs.write(sparse, 100, b"x").unwrap();
    e.verify("extend after truncate");

    e.fs.symlink(root, b"fast", b"a/small", 0, 0).unwrap();
    let slow_target: Vec<u8> = format!("{}/end", "s".repeat(200)).into_bytes();
    e.fs.symlink(a, b"slow", &slow_target, 0, 0).unwrap();
    e.verify("symlinks");
    e.fs.link(small, b, b"hard").unwrap();
    e.fs.link(small, root, b"hard2").unwrap();
    e.verify("hard links");
    let sp = e.fs.mkdir(root, b"special", 0o755, 0, 0).unwrap();
    e.fs.mknod(sp, b"fifo", FileKind::Fifo, 0o644, 0, 0, (0, 0))
        .unwrap();
    e.fs.mknod(sp, b"sock", FileKind::Socket, 0o755, 0, 0, (0, 0))
        .unwrap();
    e.fs.mknod(sp, b"null", FileKind::CharDev, 0o666, 0, 0, (1, 3))
        .unwrap();
    e.fs.mknod(sp, b"sda1", FileKind::BlockDev, 0o660, 0, 6, (8, 1))
        .unwrap();
    e.fs.mknod(sp, b"big", FileKind::CharDev, 0o600, 0, 0, (300, 70000))
        .unwrap();
    e.verify("device nodes");

    // Many entries: the directory grows past one block.
    let many = e.fs.mkdir(root, b"many", 0o755, 0, 0).unwrap();
    for i in 0..200 {
        e.fs.create(
            many,
            format!("file-with-a-longish-name-{i:04}").as_bytes(),
            0o644,
            0,
            0,
        )
        .unwrap();
    }
    e.verify("many entries");
    for i in (0..200).step_by(3) {
        e.fs.unlink(many, format!("file-with-a-longish-name-{i:04}").as_bytes())
            .unwrap();
    }
    e.verify("unlink many");
    e.fs.create(many, "ünïcødé-😀".as_bytes(), 0o644, 0, 0)
        .unwrap();
    e.fs.create(many, &[b'L'; 255], 0o644, 0, 0).unwrap();
    e.verify("long and utf-8 names");

    // Renames: plain, over an existing file, across directories (a directory, so '..'
    // moves), a directory over an empty directory, and within a directory.
    e.fs.rename(root, b"hard2", root, b"renamed").unwrap();
    e.verify("rename");
    let victim = e.fs.create(a, b"victim", 0o644, 0, 0).unwrap();
    e.fs.write(victim, 0, &pattern(5000, 1)).unwrap();
    e.fs.rename(root, b"renamed", a, b"victim").unwrap();
    e.verify("rename over file");
    e.fs.rename(a, b"b", root, b"moved").unwrap();
    e.verify("rename dir across");
    assert_eq!(e.fs.lookup(b, b"..").unwrap(), root);
    e.fs.mkdir(root, b"emptydir", 0o755, 0, 0).unwrap();
    e.fs.rename(root, b"moved", root, b"emptydir").unwrap();
    e.verify("rename dir over empty dir");
    let c = e.fs.mkdir(a, b"c", 0o755, 0, 0).unwrap();
    e.fs.mkdir(root, b"target", 0o755, 0, 0).unwrap();
    e.fs.rename(a, b"c", root, b"target").unwrap();
    e.verify("rename dir over empty dir across");
    assert_eq!(e.fs.lookup(c, b"..").unwrap(), root);

    // Errors leave the file system unchanged.
    assert_eq!(e.fs.rmdir(root, b"a"), Err(Error::NotEmpty));
    assert_eq!(e.fs.unlink(root, b"a"), Err(Error::IsDir));
    assert_eq!(e.fs.rmdir(root, b"big"), Err(Error::NotDir));
    assert_eq!(e.fs.create(root, b"big", 0o644, 0, 0), Err(Error::Exists));
    assert_eq!(e.fs.mkdir(big, b"x", 0o755, 0, 0), Err(Error::NotDir));
    assert_eq!(e.fs.lookup(root, b"nope"), Err(Error::NotFound));
    assert_eq!(
        e.fs.create(root, &[b'n'; 256], 0o644, 0, 0),
        Err(Error::NameTooLong)
    );
    assert!(matches!(
        e.fs.rename(root, b"a", a, b"inside"),
        Err(Error::Invalid(_))
    ));
    assert_eq!(
        e.fs.rename(root, b"target", root, b"a"),
        Err(Error::NotEmpty)
    );
    assert_eq!(e.fs.rename(root, b"big", root, b"a"), Err(Error::IsDir));
    assert_eq!(e.fs.link(a, root, b"dirlink"), Err(Error::IsDir));
    e.verify("errors");

    let tmp = e.fs.mkdir(root, b"tmp", 0o755, 0, 0).unwrap();
    e.fs.create(tmp, b"f", 0o644, 0, 0).unwrap();
    e.fs.unlink(tmp, b"f").unwrap();
    e.fs.rmdir(root, b"tmp").unwrap();
    e.verify("rmdir");

    e.fs.set_attr(
        small,
        &SetAttr {
            perm: Some(0o4751),
            uid: Some(70000),
            gid: Some(12),
            atime: Some(5),
            mtime: Some(1234567),
        },
    )
    .unwrap();
    e.verify("chmod/chown/utimes");

    // Reading back through our engine.
    assert_eq!(e.fs.read_all(big).unwrap(), expect_big);
    let mut buf = [0u8; 4];
    e.fs.read(sparse, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"head");
    assert_eq!(e.fs.stat(sparse).unwrap().size, 101);
    let st = e.fs.stat(small).unwrap();
    assert_eq!(
        (st.mode, st.uid, st.gid, st.atime, st.mtime, st.nlink),
        (0o104751, 70000, 12, 5, 1234567, 3)
    );
    let sf = e.fs.statfs();
    assert!(sf.free_blocks < sf.blocks && sf.free_inodes < sf.inodes);

    e.fs.flush().unwrap();
    std::fs::write(&img, &e.fs.device().0).unwrap();
    assert_fsck_clean(&img, "all operations");

    // debugfs reads back exactly what we wrote.
    let dump = s.path("dump");
    std::fs::create_dir(&dump).unwrap();
    debugfs(&img, &format!("rdump / {}", dump.display()));
    compare_dump(&mut e.fs, root, &dump, &[]);
    let out = debugfs(&img, "stat /special/big");
    assert!(
        out.contains("Device major/minor number: 300:70000"),
        "{out}"
    );
    let out = debugfs(&img, "stat /special/sda1");
    assert!(
        out.contains("block special") && out.contains("Group:     6"),
        "{out}"
    );
    let out = debugfs(&img, "stat /a/small");
    assert!(
        out.contains("Mode:  04751") && out.contains("Links: 3") && out.contains("User: 70000"),
        "{out}"
    );
    let out = debugfs(&img, "stat /special/fifo");
    assert!(out.contains("Type: FIFO"), "{out}");
    let out = debugfs(&img, "stat /special/sock");
    assert!(out.contains("Type: socket"), "{out}");
    assert!(debugfs(&img, "cat /a/small").contains("hello world"));
    assert!(debugfs(&img, "stat /fast").contains("Fast link dest: \"a/small\""));
    if !rev0 {
        assert!(debugfs(&img, "stat /sparse").contains("Size: 101"));
    }
}

#[test]
fn write_ops_1k_e2fsck_after_every_step() {
    exercise(CONFIGS[0].0, CONFIGS[0].1, true);
}

#[test]
fn write_ops_other_geometries() {
    for (tag, opts) in &CONFIGS[1..] {
        exercise(tag, opts, false);
    }
}

#[test]
fn sequential_writes_are_contiguous_and_near_the_inode() {
    let s = Scratch::new("contig");
    let img = s.path("img");
    mkfs(&img, 16 * 1024, &["-b", "1024", "-g", "2048"], None);
    let mut fs = load(&img);
    let d = fs.mkdir(2, b"d", 0o755, 0, 0).unwrap();
    let f = fs.create(d, b"f", 0o644, 0, 0).unwrap();
    for i in 0..64u64 {
        fs.write(f, i * 1000, &[i as u8; 1000]).unwrap();
    }
    let blocks: Vec<u32> = (0..12).map(|l| fs.block_of(f, l).unwrap()).collect();
    for w in blocks.windows(2) {
        assert_eq!(w[1], w[0] + 1, "direct blocks not contiguous: {blocks:?}");
    }
    let group = |b: u32| (b - 1) / 2048;
    let ipg = (fs.statfs().inodes / 8) as u32;
    assert_eq!(
        group(blocks[0]),
        (f - 1) / ipg,
        "data should start in the inode's group"
    );
    let last = fs.block_of(f, 62).unwrap();
    assert!(
        last > blocks[11] && last - blocks[11] <= 52,
        "indirect range far away: {last} vs {}",
        blocks[11]
    );
    store(fs, &img);
    assert_fsck_clean(&img, "sequential writes");
}

#[test]
fn file_over_4gib_on_a_small_image() {
    let s = Scratch::new("huge");
    let img = s.path("img");
    mkfs(&img, 16 * 1024, &["-b", "1024", "-O", "^large_file"], None);
    let mut fs = load(&img);
    let free0 = fs.statfs().free_blocks;
    let f = fs.create(2, b"huge", 0o644, 0, 0).unwrap();
    let off = 5u64 << 30;
    fs.write(f, 0, b"begin").unwrap();
    fs.write(f, off, b"the end").unwrap();
    assert_eq!(fs.stat(f).unwrap().size, off + 7);
    let mut buf = [1u8; 16];
    assert_eq!(fs.read(f, off - 9, &mut buf).unwrap(), 16);
    assert_eq!(&buf, b"\0\0\0\0\0\0\0\0\0the end");
    store(fs, &img);
    assert_fsck_clean(&img, "5 GiB sparse file (large_file turned on)");
    assert!(debugfs(&img, "stat /huge").contains(&format!("Size: {}", off + 7)));
    assert!(debugfs(&img, "stats").contains("large_file"));
    let mut fs = load(&img);
    fs.truncate(f, 3).unwrap();
    assert_eq!(
        fs.statfs().free_blocks,
        free0 - 1,
        "only one data block should remain"
    );
    store(fs, &img);
    assert_fsck_clean(&img, "truncating the 5 GiB file");
}

#[test]
fn filling_the_disk_reports_no_space_and_stays_consistent() {
    let s = Scratch::new("full");
    let img = s.path("img");
    mkfs(&img, 2 * 1024, &["-b", "1024", "-N", "64"], None);
    let mut fs = load(&img);
    let f = fs.create(2, b"fill", 0o644, 0, 0).unwrap();
    let chunk = vec![0x5a; 64 * 1024];
    let mut off = 0u64;
    let err = loop {
        match fs.write(f, off, &chunk) {
            Ok(n) => off += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(err, Error::NoSpace);
    assert_eq!(fs.statfs().free_blocks, 0);
    let written = fs.stat(f).unwrap().size;
    assert!(written > 1024 * 1024);
    let mut i = 0;
    let err = loop {
        match fs.create(2, format!("e{i}").as_bytes(), 0o644, 0, 0) {
            Ok(_) => i += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err, Error::NoSpace);
    assert!(fs.check().unwrap().is_clean());
    store(fs, &img);
    assert_fsck_clean(&img, "filling the disk");
    let mut fs = load(&img);
    fs.unlink(2, b"fill").unwrap();
    assert!(fs.check().unwrap().is_clean());
    store(fs, &img);
    assert_fsck_clean(&img, "freeing the full disk");
}

#[test]
fn modifying_htree_directories_keeps_e2fsck_clean() {
    let s = Scratch::new("htree");
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("big")).unwrap();
    for i in 0..400 {
        std::fs::write(
            tree.join("big")
                .join(format!("name-{i:05}-padding-padding")),
            b"x",
        )
        .unwrap();
    }
    std::fs::create_dir(tree.join("big/sub")).unwrap();
    let img = s.path("img");
    mkfs(&img, 8 * 1024, &["-b", "1024"], Some(&tree));
    fsck_index_dirs(&img);
    let mut fs = load(&img);
    let big = fs.resolve(b"/big").unwrap();
    assert_ne!(
        fs.stat(big).unwrap().flags & 0x1000,
        0,
        "expected an indexed directory"
    );
    for i in 0..400 {
        assert!(fs
            .lookup(big, format!("name-{i:05}-padding-padding").as_bytes())
            .is_ok());
    }
    fs.create(big, b"newcomer", 0o644, 0, 0).unwrap();
    fs.unlink(big, b"name-00007-padding-padding").unwrap();
    fs.rename(big, b"sub", 2, b"sub-moved").unwrap();
    assert!(fs.check().unwrap().is_clean());
    store(fs, &img);
    assert_fsck_clean(&img, "modifying an htree directory");
    assert!(debugfs(&img, "ls /big").contains("newcomer"));
}

#[test]
fn inode_cache_never_shows_stale_inodes() {
    // Every change must be visible at once and on disk: attribute changes (written through),
    // a freed inode number handed out again (its record rewritten whole), and more inodes than
    // the cache has entries (entries replaced).
    let s = Scratch::new("icache");
    let img = s.path("img");
    mkfs(&img, 8 * 1024, &["-b", "1024", "-N", "512"], None);
    let mut fs = load(&img);
    let f = fs.create(2, b"f", 0o644, 0, 0).unwrap();
    assert_eq!(fs.stat(f).unwrap().mode & 0o7777, 0o644);
    fs.set_attr(
        f,
        &SetAttr {
            perm: Some(0o600),
            uid: Some(7),
            gid: None,
            atime: None,
            mtime: None,
        },
    )
    .unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!((st.mode & 0o7777, st.uid), (0o600, 7));
    fs.write(f, 0, b"hello").unwrap();
    assert_eq!(fs.stat(f).unwrap().size, 5);
    fs.unlink(2, b"f").unwrap();
    // The number comes back for a new file, which must look new.
    let g = fs.create(2, b"g", 0o640, 3, 4).unwrap();
    let st = fs.stat(g).unwrap();
    assert_eq!(
        (st.size, st.mode & 0o7777, st.uid, st.gid, st.nlink),
        (0, 0o640, 3, 4, 1)
    );
    // Far more inodes than cache entries, each read back right.
    let mut made = Vec::new();
    for i in 0..200u32 {
        let n = fs
            .create(2, format!("n{i}").as_bytes(), 0o600, i, 0)
            .unwrap();
        made.push((n, i));
    }
    for &(n, i) in made.iter().rev() {
        assert_eq!(fs.stat(n).unwrap().uid, i);
    }
    // And a fresh mount of what was written agrees (the cache never hid a missed write).
    let dev = fs.into_device();
    let mut again = Fs::open(dev).unwrap();
    for &(n, i) in &made {
        assert_eq!(again.stat(n).unwrap().uid, i);
    }
    assert_eq!(again.stat(g).unwrap().mode & 0o7777, 0o640);
}

#[test]
fn name_cache_never_shows_removed_or_renamed_names() {
    // Every lookup below first fills the name cache; each namespace change must be seen by the
    // next lookup: unlink, rename over a name, rename of a directory (its `..`), rmdir and a
    // directory made again with the freed inode, and more names than the cache has entries.
    let s = Scratch::new("ncache");
    let img = s.path("img");
    mkfs(&img, 8 * 1024, &["-b", "1024", "-N", "512"], None);
    let mut fs = load(&img);
    let a = fs.create(2, b"a", 0o644, 0, 0).unwrap();
    let b = fs.create(2, b"b", 0o644, 0, 0).unwrap();
    assert_eq!(fs.lookup(2, b"a").unwrap(), a);
    assert_eq!(fs.lookup(2, b"b").unwrap(), b);
    fs.rename(2, b"a", 2, b"b").unwrap();
    assert!(matches!(fs.lookup(2, b"a"), Err(Error::NotFound)));
    assert_eq!(fs.lookup(2, b"b").unwrap(), a);
    fs.unlink(2, b"b").unwrap();
    assert!(matches!(fs.lookup(2, b"b"), Err(Error::NotFound)));
    let d1 = fs.mkdir(2, b"d1", 0o755, 0, 0).unwrap();
    let d2 = fs.mkdir(2, b"d2", 0o755, 0, 0).unwrap();
    let sub = fs.mkdir(d1, b"sub", 0o755, 0, 0).unwrap();
    assert_eq!(fs.lookup(sub, b"..").unwrap(), d1);
    fs.rename(d1, b"sub", d2, b"sub").unwrap();
    assert_eq!(fs.lookup(sub, b"..").unwrap(), d2);
    assert!(matches!(fs.lookup(d1, b"sub"), Err(Error::NotFound)));
    assert_eq!(fs.lookup(d2, b"sub").unwrap(), sub);
    let inner = fs.create(sub, b"x", 0o644, 0, 0).unwrap();
    assert_eq!(fs.lookup(sub, b"x").unwrap(), inner);
    fs.unlink(sub, b"x").unwrap();
    fs.rmdir(d2, b"sub").unwrap();
    // The freed directory inode comes back as a new, empty directory elsewhere.
    let again = fs.mkdir(d1, b"new", 0o755, 0, 0).unwrap();
    assert!(matches!(fs.lookup(again, b"x"), Err(Error::NotFound)));
    assert_eq!(fs.lookup(again, b"..").unwrap(), d1);
    // More names than entries: each still found right.
    let made: Vec<(Vec<u8>, u32)> = (0..200u32)
        .map(|i| {
            let n = format!("name{i}").into_bytes();
            (n.clone(), fs.create(2, &n, 0o600, 0, 0).unwrap())
        })
        .collect();
    for _ in 0..2 {
        for (n, ino) in &made {
            assert_eq!(fs.lookup(2, n).unwrap(), *ino);
        }
    }
    let long = vec![b'l'; 200];
    let l = fs.create(2, &long, 0o600, 0, 0).unwrap();
    assert_eq!(fs.lookup(2, &long).unwrap(), l);
    assert!(fs.check().unwrap().is_clean());
}

/// Lists `dir` with `readdir_at`, one entry per call.
fn list_at(fs: &mut Fs<MemDevice>, dir: u32) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let mut one = None;
        let next = fs
            .readdir_at(dir, pos, |ino, _, name| {
                if one.is_some() {
                    return false;
                }
                one = Some((ino, name.to_vec()));
                true
            })
            .unwrap();
        out.extend(one);
        match next {
            Some(n) => {
                assert!(n > pos, "positions only grow");
                pos = n;
            }
            None => return out,
        }
    }
}

#[test]
fn readdir_at_lists_what_readdir_lists_across_changes() {
    // Over several directory blocks (1 KiB blocks, 300 names), with free gaps from unlinks, and
    // with the directory changed in the middle of a listing: every name listed once, in order.
    let s = Scratch::new("readdir_at");
    let img = s.path("img");
    mkfs(
        &img,
        8 * 1024,
        &["-b", "1024", "-N", "512", "-O", "^dir_index"],
        None,
    );
    let mut fs = load(&img);
    let d = fs.mkdir(2, b"d", 0o755, 0, 0).unwrap();
    for i in 0..300u32 {
        fs.create(d, format!("entry{i:03}").as_bytes(), 0o644, 0, 0)
            .unwrap();
    }
    for i in (0..300u32).step_by(7) {
        fs.unlink(d, format!("entry{i:03}").as_bytes()).unwrap();
    }
    let whole: Vec<(u32, Vec<u8>)> = fs
        .readdir(d)
        .unwrap()
        .into_iter()
        .map(|e| (e.ino, e.name))
        .collect();
    assert_eq!(list_at(&mut fs, d), whole);
    // All in one call; in calls of 10 (each refusing the 11th, where the next starts).
    let mut all = Vec::new();
    let end = fs
        .readdir_at(d, 0, |ino, _, n| {
            all.push((ino, n.to_vec()));
            true
        })
        .unwrap();
    assert_eq!((end, &all), (None, &whole));
    let (mut tens, mut pos) = (Vec::new(), Some(0));
    while let Some(p) = pos {
        let mut k = 0;
        pos = fs
            .readdir_at(d, p, |ino, _, n| {
                k += 1;
                (k <= 10).then(|| tens.push((ino, n.to_vec()))).is_some()
            })
            .unwrap();
    }
    assert_eq!(tens, whole);
    // A change between two calls: the next call looks for its position from the block's
    // start, so a position inside a merged record still gives the entries after it.
    let mut seen = Vec::new();
    let pos = fs
        .readdir_at(d, 0, |_, _, n| {
            seen.push(n.to_vec());
            seen.len() <= 100
        })
        .unwrap()
        .unwrap();
    seen.pop(); // the refused one
    let last = seen.last().unwrap().clone();
    fs.unlink(d, &last).unwrap();
    let next_name = whole
        .iter()
        .map(|(_, n)| n.clone())
        .skip_while(|n| *n != last)
        .nth(1)
        .unwrap();
    let mut got = None;
    fs.readdir_at(d, pos, |_, _, n| {
        got = Some(n.to_vec());
        false
    })
    .unwrap();
    assert_eq!(got.unwrap(), next_name);
    // Positions a client made up: past the end is the end; inside a record, the next entry.
    assert_eq!(fs.readdir_at(d, u64::MAX, |_, _, _| true).unwrap(), None);
    assert_eq!(fs.readdir_at(d, 1 << 40, |_, _, _| true).unwrap(), None);
    let mut first = None;
    fs.readdir_at(d, 3, |_, _, n| {
        first = Some(n.to_vec());
        false
    })
    .unwrap();
    assert_eq!(first.unwrap(), b"..".to_vec());
    assert!(matches!(
        fs.readdir_at(whole[2].0, 0, |_, _, _| true),
        Err(Error::NotDir)
    ));
    assert!(fs.check().unwrap().is_clean());
}

/// Crash consistency (`./sawmill crash` found it): a file `rename` replaces stays allocated and
/// whole until the flush that puts the new entry on the disk, so no write-back cut between the
/// inode table and the directory block can leave the name on a freed inode (neither file under
/// it after e2fsck). It is released then, and flushed again.
#[test]
fn a_file_replaced_by_rename_is_released_after_the_flush() {
    let s = Scratch::new("replaced");
    let img = s.path("img");
    mkfs(&img, 1024, &["-b", "1024"], None);
    let mut fs = load(&img);
    let old = fs.create(2, b"cfg", 0o644, 0, 0).unwrap();
    fs.write(old, 0, &pattern(3000, 1)).unwrap();
    let new = fs.create(2, b"cfg.tmp", 0o644, 0, 0).unwrap();
    fs.write(new, 0, &pattern(5000, 2)).unwrap();
    fs.flush().unwrap();
    let before = fs.statfs();
    fs.rename(2, b"cfg.tmp", 2, b"cfg").unwrap();
    assert_eq!(fs.lookup(2, b"cfg").unwrap(), new);
    assert!(fs.lookup(2, b"cfg.tmp").is_err());
    let st = fs.stat(old).unwrap();
    assert_eq!((st.nlink, st.size), (1, 3000));
    assert_eq!(fs.read_all(old).unwrap(), pattern(3000, 1));
    assert_eq!(fs.statfs().free_inodes, before.free_inodes);
    assert!(fs.check().unwrap().is_clean());
    fs.flush().unwrap();
    let after = fs.statfs();
    assert_eq!(after.free_inodes, before.free_inodes + 1);
    assert!(after.free_blocks > before.free_blocks);
    assert!(fs.check().unwrap().is_clean());
    std::fs::write(&img, &fs.device().0).unwrap();
    assert_fsck_clean(&img, "rename over a file, flushed");
}
