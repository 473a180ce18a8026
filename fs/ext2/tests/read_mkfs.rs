//! Images made by mke2fs (several block sizes, inode sizes, revisions and feature sets) and
//! populated with `mke2fs -d` from a generated host tree must read back byte for byte.
mod common;
use common::*;

fn roundtrip(tag: &str, opts: &[&str], size_k: u64, big: bool, index: bool) {
    let s = Scratch::new(tag);
    let tree = s.path("tree");
    gen_tree(&tree, 0x1234_5678 ^ size_k, big);
    let img = s.path("img");
    mkfs(&img, size_k, opts, Some(&tree));
    if index {
        fsck_index_dirs(&img);
    }
    assert_fsck_clean(&img, "mke2fs -d");
    let mut fs = load(&img);
    if index {
        let many = fs.resolve(b"/many").unwrap();
        assert_ne!(
            fs.stat(many).unwrap().flags & 0x1000,
            0,
            "{tag}: /many should be htree-indexed"
        );
    }
    compare_tree(&mut fs, 2, &tree, &["lost+found"]);
    let rep = fs.check().unwrap();
    assert!(
        rep.is_clean(),
        "{tag}: our check found problems on a clean image: {:#?}",
        rep.problems
    );
}

#[test]
fn read_1k_blocks_128_inodes_many_groups() {
    roundtrip(
        "r1k",
        &["-b", "1024", "-I", "128", "-g", "1024", "-N", "2048"],
        24 * 1024,
        true,
        true,
    );
}

#[test]
fn read_2k_blocks_256_inodes() {
    roundtrip("r2k", &["-b", "2048", "-I", "256"], 24 * 1024, false, true);
}

#[test]
fn read_4k_blocks() {
    roundtrip(
        "r4k",
        &["-b", "4096", "-I", "256", "-g", "2048"],
        32 * 1024,
        false,
        true,
    );
}

#[test]
fn read_without_sparse_super_filetype_resize_inode() {
    roundtrip(
        "rnofeat",
        &[
            "-b",
            "1024",
            "-g",
            "2048",
            "-O",
            "^sparse_super,^resize_inode,^filetype,^dir_index,^ext_attr",
        ],
        16 * 1024,
        false,
        false,
    );
}

#[test]
fn read_revision_0() {
    roundtrip("rrev0", &["-r", "0", "-b", "1024"], 16 * 1024, false, false);
}
