//! Seeded mutation fuzzing: corrupt bytes of small mke2fs-made images (mostly in the
//! metadata), then mount, read everything, run our check and a round of write operations.
//! Any outcome is acceptable except a panic (overflow, out-of-bounds, ...), which fails the
//! test with the seed to reproduce it. Hangs would show up as a test timeout.
mod common;
use common::*;
use sawmill_ext2::{FileKind, Fs, MemDevice, SetAttr};
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

fn base_image(tag: &str, opts: &[&str], size_k: u64) -> Vec<u8> {
    let s = Scratch::new(tag);
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("dir/sub")).unwrap();
    std::fs::write(tree.join("small"), b"small file").unwrap();
    std::fs::write(tree.join("dir/indirect"), vec![7u8; 20 * 1024]).unwrap();
    std::fs::write(tree.join("dir/sub/x"), b"x").unwrap();
    for i in 0..40 {
        std::fs::write(
            tree.join(format!("dir/f{i:02}-some-longer-name")),
            [i as u8; 100],
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("dir/sub/x", tree.join("fast")).unwrap();
    std::os::unix::fs::symlink("y".repeat(90), tree.join("slow")).unwrap();
    std::fs::hard_link(tree.join("small"), tree.join("dir/hard")).unwrap();
    let img = s.path("img");
    mkfs(&img, size_k, opts, Some(&tree));
    std::fs::read(&img).unwrap()
}

/// Reads the whole tree with bounded buffers; returns how many inodes were visited.
fn read_everything(fs: &mut Fs<MemDevice>) -> usize {
    let mut seen = HashSet::new();
    let mut stack = vec![2u32];
    let mut buf = vec![0u8; 16 * 1024];
    while let Some(dir) = stack.pop() {
        if !seen.insert(dir) || seen.len() > 5000 {
            continue;
        }
        let Ok(entries) = fs.readdir(dir) else {
            continue;
        };
        for e in entries {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let _ = fs.lookup(dir, &e.name);
            let Ok(st) = fs.stat(e.ino) else { continue };
            match st.kind {
                FileKind::Dir => stack.push(e.ino),
                FileKind::Regular => {
                    let mut off = 0;
                    while let Ok(n) = fs.read(e.ino, off, &mut buf) {
                        if n == 0 || off > 1 << 20 {
                            break;
                        }
                        off += n as u64;
                    }
                    let _ = fs.read(e.ino, st.size.saturating_sub(3), &mut buf[..8]);
                }
                FileKind::Symlink => {
                    let _ = fs.readlink(e.ino);
                }
                _ => {}
            }
        }
    }
    seen.len()
}

fn write_round(fs: &mut Fs<MemDevice>, rng: &mut Rng) -> usize {
    let mut ok = 0;
    let mut n = 0;
    let mut tally = |r: bool| {
        n += 1;
        if !r && std::env::var("FUZZ_DEBUG").is_ok() {
            eprintln!("op {n} failed");
        }
        ok += r as usize
    };
    let root = 2;
    let dir = fs.resolve(b"/dir").unwrap_or(root);
    if let Ok(f) = fs.create(root, b"new", 0o644, 1, 2) {
        tally(true);
        tally(fs.write(f, 0, &rng.bytes(3000)).is_ok());
        tally(fs.write(f, 300_000, b"far").is_ok());
        tally(fs.truncate(f, 1000).is_ok());
    }
    tally(fs.mkdir(dir, b"newdir", 0o755, 0, 0).is_ok());
    tally(
        fs.symlink(
            dir,
            b"newlink",
            &rng.bytes(80)
                .iter()
                .map(|b| b'a' + b % 26)
                .collect::<Vec<_>>(),
            0,
            0,
        )
        .is_ok(),
    );
    tally(fs.rename(root, b"small", dir, b"moved").is_ok());
    tally(fs.rename(dir, b"sub", root, b"sub2").is_ok());
    tally(fs.unlink(dir, b"f03-some-longer-name").is_ok());
    tally(fs.unlink(root, b"slow").is_ok());
    tally(fs.rmdir(root, b"sub2").is_ok());
    if let Ok(i) = fs.resolve(b"/dir/indirect") {
        tally(fs.truncate(i, 5000).is_ok());
        tally(fs.write(i, 100_000, b"grow").is_ok());
        tally(fs.link(i, root, b"hl").is_ok());
        tally(
            fs.set_attr(
                i,
                &SetAttr {
                    perm: Some(0o600),
                    ..Default::default()
                },
            )
            .is_ok(),
        );
    }
    tally(
        fs.mknod(root, b"fifo", FileKind::Fifo, 0o644, 0, 0, (0, 0))
            .is_ok(),
    );
    let _ = fs.statfs();
    ok
}

fn mutate(img: &mut Vec<u8>, rng: &mut Rng, bs: usize) {
    let n = 1 + rng.below(12) as usize;
    // Most mutations land in the first few dozen blocks: superblock, descriptors, bitmaps,
    // inode table and early directory blocks, where corruption is most interesting.
    let hot = (64 * bs).min(img.len());
    for _ in 0..n {
        let pos = if rng.below(10) < 8 {
            rng.below(hot as u64)
        } else {
            rng.below(img.len() as u64)
        } as usize;
        match rng.below(6) {
            5 => {
                // A whole aligned 32-bit field set to a boundary value.
                let at = pos & !3;
                let v: u32 =
                    [0, 1, 2, 0x7fff_ffff, 0x8000_0000, u32::MAX, 11, 1024][rng.below(8) as usize];
                if at + 4 <= img.len() {
                    img[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            0 => img[pos] ^= 1 << rng.below(8),
            1 => img[pos] = 0,
            2 => img[pos] = 0xff,
            _ => img[pos] = rng.next() as u8,
        }
    }
    if rng.below(40) == 0 {
        let len = rng.below(img.len() as u64) as usize;
        img.truncate(len);
    }
}

#[test]
fn mutation_fuzz_never_panics() {
    let bases = [
        (
            base_image(
                "fz1k",
                &["-b", "1024", "-I", "128", "-g", "256", "-N", "64"],
                1024,
            ),
            1024usize,
        ),
        (
            base_image("fz4k", &["-b", "4096", "-I", "256", "-N", "64"], 1024),
            4096,
        ),
        (
            base_image("fzr0", &["-r", "0", "-b", "1024", "-N", "64"], 1024),
            1024,
        ),
    ];
    let iters: u64 = std::env::var("EXT2_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10000);
    let (mut mounted, mut clean_checks, mut ops_ok, mut visited) = (0u64, 0u64, 0usize, 0usize);
    for seed in 0..iters {
        let (base, bs) = &bases[(seed % 3) as usize];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed.wrapping_mul(0x1000_0001));
        let mut img = base.clone();
        mutate(&mut img, &mut rng, *bs);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let Ok(mut fs) = Fs::open(MemDevice(img)) else {
                return None;
            };
            fs.set_time(1_700_000_000);
            let v = read_everything(&mut fs);
            let clean = fs.check().map(|r| r.is_clean()).unwrap_or(false);
            let ok = write_round(&mut fs, &mut rng);
            let _ = fs.check();
            let v2 = read_everything(&mut fs);
            Some((v + v2, clean, ok))
        }));
        match outcome {
            Ok(Some((v, clean, ok))) => {
                mounted += 1;
                clean_checks += clean as u64;
                ops_ok += ok;
                visited += v;
            }
            Ok(None) => {}
            Err(_) => panic!(
                "panic on fuzz seed {seed} (EXT2_FUZZ_ITERS={} reproduces it)",
                seed + 1
            ),
        }
    }
    // Straight to the stderr handle, which the test harness does not capture: the count is
    // meant to be seen in every `cargo test` run.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "ext2 fuzz: {iters} executions ran clean (no panic); {mounted} mounted, {clean_checks} passed our check \
         unchanged, {ops_ok} write operations succeeded, {visited} directories visited"
    );
    assert!(
        mounted > iters / 4,
        "mutations too destructive to exercise anything: {mounted} mounted"
    );
}

/// Unmutated images must be fully usable, so the fuzz loop is measuring corruption, not bugs.
#[test]
fn fuzz_bases_are_clean_and_writable() {
    for (opts, bs) in [
        (
            &["-b", "1024", "-I", "128", "-g", "256", "-N", "64"][..],
            1024,
        ),
        (&["-r", "0", "-b", "1024", "-N", "64"][..], 1024),
    ] {
        let _ = bs;
        let img = base_image("fzb", opts, 1024);
        let mut fs = Fs::open(MemDevice(img)).unwrap();
        assert!(fs.check().unwrap().is_clean());
        let mut rng = Rng(1);
        assert_eq!(
            write_round(&mut fs, &mut rng),
            15,
            "all but the rmdir of a non-empty directory should succeed"
        );
        let rep = fs.check().unwrap();
        assert!(rep.is_clean(), "{:#?}", rep.problems);
    }
}
