//! Hand-crafted bad images: each must give a clear error, never a panic or a hang.
mod common;
use common::*;
use sawmill_ext2::{Error, Fs, MemDevice};

#[path = "../../../tools/sawmill/src/ext2cmd.rs"]
#[allow(dead_code)]
mod ext2cmd;

fn small_image(tag: &str) -> (Scratch, std::path::PathBuf) {
    let s = Scratch::new(tag);
    let img = s.path("img");
    mkfs(&img, 2048, &["-b", "1024"], None);
    (s, img)
}

#[test]
fn truncated_and_bad_superblocks_are_errors() {
    let (_s, img) = small_image("crsb");
    let data = std::fs::read(&img).unwrap();
    for cut in [0, 1000, 2047, 4096, data.len() / 2, data.len() - 1] {
        let r = Fs::open(MemDevice(data[..cut].to_vec()));
        assert!(
            matches!(r, Err(Error::Corrupt(_))),
            "cut at {cut}: {:?}",
            r.err()
        );
    }
    let mut bad = data.clone();
    bad[1024 + 56] = 0; // magic
    assert!(matches!(Fs::open(MemDevice(bad)), Err(Error::Corrupt(_))));
    let mut bad = data.clone();
    bad[1024 + 24] = 9; // log block size
    assert!(matches!(
        Fs::open(MemDevice(bad)),
        Err(Error::Unsupported(_))
    ));
    let mut bad = data.clone();
    bad[1024 + 96] |= 0x40; // extents: not ext2
    assert!(matches!(
        Fs::open(MemDevice(bad)),
        Err(Error::Unsupported(_))
    ));
    let mut bad = data.clone();
    bad[1024 + 32..1024 + 36].copy_from_slice(&0u32.to_le_bytes()); // blocks per group
    assert!(matches!(Fs::open(MemDevice(bad)), Err(Error::Corrupt(_))));
    // Group descriptor pointing the inode table past the end.
    let mut bad = data.clone();
    bad[2048 + 8..2048 + 12].copy_from_slice(&0xFFFF_0000u32.to_le_bytes());
    assert!(matches!(Fs::open(MemDevice(bad)), Err(Error::Corrupt(_))));
    // Unknown ro_compat features: readable, but writes are refused.
    let mut ro = data.clone();
    ro[1024 + 100] |= 0x80;
    let mut fs = Fs::open(MemDevice(ro)).unwrap();
    assert!(fs.readdir(2).is_ok());
    assert_eq!(fs.mkdir(2, b"x", 0o755, 0, 0), Err(Error::ReadOnly));
}

#[test]
fn symlink_loops_are_reported() {
    let (_s, img) = small_image("crloop");
    let mut fs = load(&img);
    fs.symlink(2, b"a", b"b", 0, 0).unwrap();
    fs.symlink(2, b"b", b"/a", 0, 0).unwrap();
    fs.symlink(2, b"self", b"self/x", 0, 0).unwrap();
    assert_eq!(fs.resolve_path(b"/a/x", true), Err(Error::Loop));
    assert_eq!(fs.resolve_path(b"/a", true), Err(Error::Loop));
    assert_eq!(fs.resolve_path(b"/self/y", true), Err(Error::Loop));
    assert!(
        fs.resolve(b"/a").is_ok(),
        "the link itself is reachable without following"
    );
}

#[test]
fn resolve_path_has_linux_limits() {
    let (_s, img) = small_image("crlimits");
    let mut fs = load(&img);
    let f = fs.create(2, b"f", 0o644, 0, 0).unwrap();
    // /l1 -> l2 -> ... -> l41 -> f: 40 links from /l2, 41 from /l1.
    for i in 1..=41 {
        let next = if i == 41 {
            "f".to_string()
        } else {
            format!("l{}", i + 1)
        };
        fs.symlink(2, format!("l{i}").as_bytes(), next.as_bytes(), 0, 0)
            .unwrap();
    }
    assert_eq!(fs.resolve_path(b"/l2", true), Ok(f));
    assert_eq!(fs.resolve_path(b"/l1", true), Err(Error::Loop));
    let long = vec![b'n'; 255];
    let n = fs.create(2, &long, 0o644, 0, 0).unwrap();
    assert_eq!(fs.resolve_path(&[b"/", &long[..]].concat(), true), Ok(n));
    assert_eq!(
        fs.resolve_path(&[b"/", &long[..], b"n"].concat(), true),
        Err(Error::NameTooLong)
    );
    assert_eq!(fs.resolve_path(b"/f/", true), Err(Error::NotDir));
    assert_eq!(fs.resolve_path(b"/f/..", true), Err(Error::NotDir));
}

#[test]
fn directory_cycles_are_reported_not_followed() {
    let (_s, img) = small_image("crcycle");
    let mut fs = load(&img);
    let a = fs.mkdir(2, b"a", 0o755, 0, 0).unwrap();
    fs.mkdir(a, b"b", 0o755, 0, 0).unwrap();
    store(fs, &img);
    // debugfs will link a directory into its own subtree; our engine refuses to.
    debugfs_w(&img, "link /a /a/b/up");
    let mut fs = load(&img);
    let rep = fs.check().unwrap();
    assert!(!rep.is_clean());
    assert!(
        rep.problems
            .iter()
            .any(|p| p.contains("two parents") || p.contains("link count")),
        "{:#?}",
        rep.problems
    );
    let i = img.to_str().unwrap();
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    assert_ne!(ext2cmd::run_to(&args(&["ls", "-R", i]), &mut out), 0);
    let dest = img.with_extension("out");
    assert_ne!(
        ext2cmd::run_to(&args(&["export", i, dest.to_str().unwrap()]), &mut out),
        0
    );
    assert_ne!(ext2cmd::run_to(&args(&["check", i]), &mut out), 0);
    let _ = std::fs::remove_dir_all(dest);
}

#[test]
fn corrupt_directory_blocks_and_pointers_are_errors() {
    let (_s, img) = small_image("crdir");
    let mut fs = load(&img);
    let d = fs.mkdir(2, b"d", 0o755, 0, 0).unwrap();
    let f = fs.create(d, b"f", 0o644, 0, 0).unwrap();
    fs.write(f, 0, &vec![1u8; 20 * 1024]).unwrap();
    let dblk = fs.block_of(d, 0).unwrap() as usize;
    let ind = {
        // The indirect block sits right after the 12 direct blocks of a fresh file.
        fs.block_of(f, 12).unwrap() as usize - 1
    };
    let data = fs.into_device().0;
    // rec_len of '.' zeroed: would loop forever if trusted.
    let mut bad = data.clone();
    bad[dblk * 1024 + 4] = 0;
    bad[dblk * 1024 + 5] = 0;
    let mut fs = Fs::open(MemDevice(bad)).unwrap();
    assert!(matches!(fs.readdir(d), Err(Error::Corrupt(_))));
    assert!(matches!(fs.lookup(d, b"f"), Err(Error::Corrupt(_))));
    assert!(matches!(
        fs.create(d, b"g", 0o644, 0, 0),
        Err(Error::Corrupt(_))
    ));
    // Indirect pointer far outside the file system.
    let mut bad = data.clone();
    bad[ind * 1024..ind * 1024 + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let mut fs = Fs::open(MemDevice(bad)).unwrap();
    let mut buf = vec![0u8; 20 * 1024];
    assert!(matches!(fs.read(f, 0, &mut buf), Err(Error::Corrupt(_))));
    assert!(matches!(fs.unlink(d, b"f"), Err(Error::Corrupt(_))));
    // Huge i_size on a small file: reads stop at the block-map limit, no giant allocation.
    let mut bad = data;
    let mut fs = Fs::open(MemDevice(bad.clone())).unwrap();
    let st = fs.stat(f).unwrap();
    assert_eq!(st.size, 20 * 1024);
    drop(fs);
    let itable = inode_offset(&bad, f);
    bad[itable + 108..itable + 112].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut fs = Fs::open(MemDevice(bad)).unwrap();
    assert!(matches!(fs.read(f, 0, &mut buf), Err(Error::Corrupt(_))));
    assert!(fs.read_all(f).is_err());
}

/// Byte offset of inode `ino` in a 1 KiB-block image (from the group descriptors).
fn inode_offset(img: &[u8], ino: u32) -> usize {
    let le32 = |o: usize| u32::from_le_bytes(img[o..o + 4].try_into().unwrap()) as usize;
    let le16 = |o: usize| u16::from_le_bytes(img[o..o + 2].try_into().unwrap()) as usize;
    let ipg = le32(1024 + 40);
    let isz = le16(1024 + 88);
    let g = (ino as usize - 1) / ipg;
    let table = le32(2048 + g * 32 + 8);
    table * 1024 + ((ino as usize - 1) % ipg) * isz
}

fn debugfs_w(img: &std::path::Path, req: &str) {
    let st = std::process::Command::new("debugfs")
        .arg("-w")
        .arg("-R")
        .arg(req)
        .arg(img)
        .output()
        .unwrap();
    assert!(st.status.success());
}

#[test]
fn our_check_reports_wrong_counters() {
    let (_s, img) = small_image("crcount");
    let mut data = std::fs::read(&img).unwrap();
    assert!(Fs::open(MemDevice(data.clone()))
        .unwrap()
        .check()
        .unwrap()
        .is_clean());
    let free = u32::from_le_bytes(data[1024 + 12..1024 + 16].try_into().unwrap());
    data[1024 + 12..1024 + 16].copy_from_slice(&(free - 1).to_le_bytes());
    data[2048 + 14] ^= 1; // group 0 free inodes
    let rep = Fs::open(MemDevice(data)).unwrap().check().unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.starts_with("superblock: free blocks")),
        "{:#?}",
        rep.problems
    );
    assert!(
        rep.problems
            .iter()
            .any(|p| p.starts_with("group 0: free inodes")),
        "{:#?}",
        rep.problems
    );
}
