//! The `./sawmill ext2` host command, driven in-process (the same source file the sawmill
//! tool compiles), checked against e2fsck and debugfs.
mod common;
use common::*;
use std::path::Path;

#[path = "../../../tools/sawmill/src/ext2cmd.rs"]
#[allow(dead_code)]
mod ext2cmd;

/// Runs `sawmill ext2 ARGS...`; returns (exit code, stdout).
fn sawmill(args: &[&str]) -> (i32, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    let code = ext2cmd::run_to(&args, &mut out);
    (code, String::from_utf8_lossy(&out).into_owned())
}

fn ok(args: &[&str]) -> String {
    let (code, out) = sawmill(args);
    assert_eq!(code, 0, "sawmill ext2 {args:?} failed: {out}");
    out
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn cli_basic_commands() {
    let s = Scratch::new("cli");
    let img = s.path("img");
    mkfs(&img, 4096, &["-b", "1024"], None);
    let i = p(&img);
    let host = s.path("hello.txt");
    std::fs::write(&host, b"hello from the host\n").unwrap();
    ok(&["mkdir", i, "/docs"]);
    ok(&["put", i, p(&host), "/docs"]);
    assert_eq!(ok(&["cat", i, "/docs/hello.txt"]), "hello from the host\n");
    ok(&["ln", "-s", i, "docs/hello.txt", "/link"]);
    assert_eq!(ok(&["cat", i, "/link"]), "hello from the host\n");
    ok(&["ln", i, "/docs/hello.txt", "/hard"]);
    let ls = ok(&["ls", i, "/"]);
    assert!(
        ls.contains("link -> docs/hello.txt") && ls.contains("lost+found"),
        "{ls}"
    );
    assert!(
        ls.lines()
            .any(|l| l.starts_with("-rw") && l.contains("   2 ") && l.ends_with(" hard")),
        "{ls}"
    );
    let lsr = ok(&["ls", "-R", i]);
    assert!(lsr.contains("/docs:") && lsr.contains("hello.txt"), "{lsr}");
    let st = ok(&["stat", i, "/docs/hello.txt"]);
    assert!(st.contains("Size: 20") && st.contains("Links: 2"), "{st}");
    ok(&["mv", i, "/hard", "/docs"]);
    ok(&["mv", i, "/docs/hard", "/docs/renamed"]);
    let (code, _) = sawmill(&["rm", i, "/docs"]);
    assert_ne!(code, 0, "rm of a directory without -r must fail");
    assert!(ok(&["check", i]).contains("clean"));
    assert_fsck_clean(&img, "cli edits");
    assert!(debugfs(&img, "cat /docs/renamed").contains("hello from the host"));
    ok(&["rm", "-r", i, "/docs"]);
    ok(&["rm", i, "/link"]);
    assert_fsck_clean(&img, "cli rm");
    // Errors: non-zero exit, nothing printed to stdout.
    for bad in [
        vec!["cat", i, "/nope"],
        vec!["mkdir", i, "/lost+found"],
        vec!["ls", "/definitely/not/an/image"],
        vec!["frobnicate"],
        vec!["put", i, "/no/such/host/file", "/x"],
    ] {
        let (code, out) = sawmill(&bad);
        assert_ne!(code, 0, "{bad:?} should fail");
        assert!(out.is_empty());
    }
    let garbage = s.path("garbage");
    std::fs::write(&garbage, vec![0x55u8; 8192]).unwrap();
    assert_ne!(sawmill(&["check", p(&garbage)]).0, 0);
}

#[test]
fn cli_import_then_export_reproduces_the_tree() {
    let s = Scratch::new("cliio");
    let tree = s.path("tree");
    gen_tree(&tree, 42, false);
    // An mtime long past, so an import that left the root's own attributes unset (its mtime
    // would be the time of the import) fails the check below whatever the timing.
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    std::fs::File::open(&tree)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    let img = s.path("img");
    mkfs(&img, 16 * 1024, &["-b", "1024", "-I", "256"], None);
    ok(&["import", p(&tree), p(&img)]);
    assert_fsck_clean(&img, "import");
    assert!(ok(&["check", p(&img)]).contains("clean"));
    let mut fs = load(&img);
    compare_tree(&mut fs, 2, &tree, &["lost+found"]);
    let root = fs.stat(2).unwrap();
    let host_root = std::fs::metadata(&tree).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (root.mode as u32, root.mtime as i64),
        (host_root.mode(), host_root.mtime())
    );
    // Importing again merges: same result, still clean; a changed file is replaced.
    std::fs::write(tree.join("small.txt"), b"changed\n").unwrap();
    ok(&["import", p(&tree), p(&img)]);
    assert_fsck_clean(&img, "second import");
    let mut fs = load(&img);
    compare_tree(&mut fs, 2, &tree, &["lost+found"]);
    // debugfs sees the same files.
    let dump = s.path("dump");
    std::fs::create_dir(&dump).unwrap();
    debugfs(&img, &format!("rdump / {}", dump.display()));
    compare_dump(&mut fs, 2, &dump, &[]);
    // Export into a fresh host tree: identical to the source (sockets aside, which tar skips too).
    let out = s.path("out");
    ok(&["export", p(&img), p(&out)]);
    std::fs::remove_dir_all(out.join("lost+found")).unwrap();
    std::fs::remove_file(tree.join("special/socket")).unwrap();
    set_dir_mtime_like(&tree, &out);
    let img2 = s.path("img2");
    mkfs(&img2, 16 * 1024, &["-b", "1024"], Some(&out));
    let mut fs2 = load(&img2);
    compare_tree(&mut fs2, 2, &tree, &["lost+found"]);
}

/// Removing the socket changed `special`'s mtime in the source; copy it over so the
/// comparison checks everything else.
fn set_dir_mtime_like(src: &Path, dst: &Path) {
    let m = std::fs::metadata(dst.join("special"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::File::open(src.join("special"))
        .unwrap()
        .set_modified(m)
        .unwrap();
}

#[test]
fn cli_export_of_mkfs_image_matches_host_tree() {
    let s = Scratch::new("cliexp");
    let tree = s.path("tree");
    gen_tree(&tree, 7, false);
    let img = s.path("img");
    mkfs(&img, 16 * 1024, &["-b", "4096"], Some(&tree));
    let out = s.path("out");
    ok(&["export", p(&img), p(&out)]);
    // Export and source must agree: read both back through a fresh image made from `out`.
    std::fs::remove_dir_all(out.join("lost+found")).unwrap();
    std::fs::remove_file(tree.join("special/socket")).unwrap();
    set_dir_mtime_like(&tree, &out);
    let img2 = s.path("img2");
    mkfs(&img2, 16 * 1024, &["-b", "1024"], Some(&out));
    let mut fs2 = load(&img2);
    compare_tree(&mut fs2, 2, &tree, &["lost+found"]);
}
