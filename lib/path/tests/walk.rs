//! The walker against an in-memory tree: limits at their edges, trailing slashes, `..` at the
//! root, symlinks (relative, absolute, loops), permissions on the way, and the two hand-over
//! points a mounted file system uses.

use sawmill_path::{
    may, Attr, Cred, Error, Tree, Walked, Walker, MAX_LINKS, MAY_EXEC, MAY_READ, MAY_WRITE,
    NAME_MAX, PATH_MAX, S_IFDIR, S_IFLNK,
};
use std::collections::HashMap;

const S_IFREG: u32 = 0o100000;

struct Inode {
    attr: Attr,
    entries: HashMap<Vec<u8>, usize>,
    target: Vec<u8>,
}

/// A tree of inodes numbered from 0 (the root). `mounted` makes it behave as a file system
/// mounted under another: `..` at its root and absolute symlinks are handed back (`Xdev`).
struct Mem {
    nodes: Vec<Inode>,
    mounted: bool,
    /// Whether the walk tracks canonical paths; `seen` has every `at` it reported.
    track: bool,
    seen: Vec<Vec<u8>>,
    /// A canonical path at which lookups answer another tree's root (a mount point), as a node.
    mount_at: Option<(Vec<u8>, usize)>,
    lookups: usize,
}

#[derive(Debug, PartialEq, Eq)]
enum E {
    Walk(Error),
    Xdev,
}

impl Tree for Mem {
    type Node = usize;
    type Error = E;
    fn error(e: Error) -> E {
        E::Walk(e)
    }
    fn attr(&self, n: &usize) -> Attr {
        self.nodes[*n].attr
    }
    fn lookup(&mut self, dir: &usize, name: &[u8], at: &[u8]) -> Result<Option<usize>, E> {
        self.lookups += 1;
        self.seen.push(at.to_vec());
        if let Some((p, n)) = &self.mount_at {
            if p == at {
                return Ok(Some(*n));
            }
        }
        Ok(self.nodes[*dir].entries.get(name).copied())
    }
    fn read_link(&mut self, link: &usize, target: &mut Vec<u8>) -> Result<(), E> {
        target.extend_from_slice(&self.nodes[*link].target);
        Ok(())
    }
    fn above_root(&mut self) -> Result<(), E> {
        if self.mounted {
            Err(E::Xdev)
        } else {
            Ok(())
        }
    }
    fn absolute_link(&mut self) -> Result<(), E> {
        self.above_root()
    }
    fn track_path(&self) -> bool {
        self.track
    }
}

impl Mem {
    fn new() -> Mem {
        let root = Inode {
            attr: Attr {
                mode: S_IFDIR | 0o755,
                uid: 0,
                gid: 0,
            },
            entries: HashMap::new(),
            target: Vec::new(),
        };
        Mem {
            nodes: vec![root],
            mounted: false,
            track: false,
            seen: Vec::new(),
            mount_at: None,
            lookups: 0,
        }
    }
    fn add(&mut self, dir: usize, name: &[u8], mode: u32, target: &[u8]) -> usize {
        let n = self.nodes.len();
        self.nodes.push(Inode {
            attr: Attr {
                mode,
                uid: 0,
                gid: 0,
            },
            entries: HashMap::new(),
            target: target.to_vec(),
        });
        self.nodes[dir].entries.insert(name.to_vec(), n);
        n
    }
    fn dir(&mut self, dir: usize, name: &str) -> usize {
        self.add(dir, name.as_bytes(), S_IFDIR | 0o755, b"")
    }
    fn file(&mut self, dir: usize, name: &str) -> usize {
        self.add(dir, name.as_bytes(), S_IFREG | 0o644, b"")
    }
    fn link(&mut self, dir: usize, name: &str, target: &str) -> usize {
        self.add(dir, name.as_bytes(), S_IFLNK | 0o777, target.as_bytes())
    }
    fn own(&mut self, n: usize, mode: u32, uid: u32, gid: u32) {
        let a = &mut self.nodes[n].attr;
        a.mode = a.mode & 0o170000 | mode;
        a.uid = uid;
        a.gid = gid;
    }
}

fn walk(t: &mut Mem, path: &str, follow: bool) -> Result<Walked<usize>, E> {
    Walker::new().walk(t, 0, path.as_bytes(), follow, None)
}

/// The node `path` names (following a last symlink).
fn node(t: &mut Mem, path: &str) -> Result<Option<usize>, E> {
    walk(t, path, true).map(|w| w.node)
}

/// /a/b/f, /a/g, /top
fn sample() -> (Mem, usize, usize, usize) {
    let mut t = Mem::new();
    let a = t.dir(0, "a");
    let b = t.dir(a, "b");
    let f = t.file(b, "f");
    t.file(a, "g");
    t.file(0, "top");
    (t, a, b, f)
}

#[test]
fn plain_paths_and_dots() {
    let (mut t, a, b, f) = sample();
    assert_eq!(node(&mut t, "/a/b/f"), Ok(Some(f)));
    assert_eq!(
        node(&mut t, "a//b/./f"),
        Ok(Some(f)),
        "leading slash optional, empty names and . skipped"
    );
    assert_eq!(node(&mut t, "/a/b/../b/f"), Ok(Some(f)));
    assert_eq!(node(&mut t, "/"), Ok(Some(0)));
    assert_eq!(node(&mut t, ""), Ok(Some(0)));
    let mut w = Walker::new();
    let r = w.walk(&mut t, 0, b"/a/b/f", false, None).unwrap();
    assert_eq!(
        (r.parent, r.node, r.dir_only, w.name()),
        (b, Some(f), false, &b"f"[..])
    );
    // Ending in `.` or `..` names a directory but no entry in its parent.
    let r = w.walk(&mut t, 0, b"/a/b/.", false, None).unwrap();
    assert_eq!((r.parent, r.node, w.name()), (a, Some(b), &b""[..]));
    let r = w.walk(&mut t, 0, b"/a/b/..", false, None).unwrap();
    assert_eq!((r.parent, r.node, w.name()), (0, Some(a), &b""[..]));
    let r = w.walk(&mut t, 0, b"/", false, None).unwrap();
    assert_eq!((r.parent, r.node, w.name()), (0, Some(0), &b""[..]));
}

#[test]
fn missing_names() {
    let (mut t, _a, b, _f) = sample();
    let mut w = Walker::new();
    let r = w.walk(&mut t, 0, b"/a/b/new", true, None).unwrap();
    assert_eq!((r.parent, r.node, w.name()), (b, None, &b"new"[..]));
    assert_eq!(
        walk(&mut t, "/a/nope/new", true),
        Err(E::Walk(Error::NotFound))
    );
    assert_eq!(
        walk(&mut t, "/a/g/x", true),
        Err(E::Walk(Error::NotDir)),
        "a file on the way"
    );
    assert_eq!(walk(&mut t, "/a/g/.", true), Err(E::Walk(Error::NotDir)));
    assert_eq!(walk(&mut t, "/a/g/..", true), Err(E::Walk(Error::NotDir)));
}

#[test]
fn trailing_slash_must_name_a_directory() {
    let (mut t, a, b, _f) = sample();
    t.link(a, "lb", "b");
    t.link(a, "lg", "g");
    assert_eq!(walk(&mut t, "/a/g/", true), Err(E::Walk(Error::NotDir)));
    assert_eq!(walk(&mut t, "/a/g//", false), Err(E::Walk(Error::NotDir)));
    let r = walk(&mut t, "/a/b/", false).unwrap();
    assert_eq!((r.node, r.dir_only), (Some(b), true));
    // A symlink before a trailing slash is followed even without `follow`.
    let r = walk(&mut t, "/a/lb/", false).unwrap();
    assert_eq!((r.node, r.dir_only), (Some(b), true));
    assert_eq!(
        walk(&mut t, "/a/lb", false).unwrap().node,
        Some(t.nodes[a].entries[&b"lb"[..]])
    );
    assert_eq!(walk(&mut t, "/a/lg/", false), Err(E::Walk(Error::NotDir)));
    // A missing last name with a slash: may only become a directory.
    let r = walk(&mut t, "/a/new/", true).unwrap();
    assert_eq!((r.parent, r.node, r.dir_only), (a, None, true));
}

#[test]
fn dotdot_at_the_root() {
    let (mut t, a, _b, f) = sample();
    assert_eq!(node(&mut t, "/../../a/b/f"), Ok(Some(f)), "/.. is /");
    assert_eq!(node(&mut t, "/a/../.."), Ok(Some(0)));
    t.mounted = true;
    assert_eq!(
        walk(&mut t, "/..", true),
        Err(E::Xdev),
        "a mounted file system hands `..` at its root back"
    );
    assert_eq!(walk(&mut t, "/a/../../x", true), Err(E::Xdev));
    assert_eq!(
        node(&mut t, "/a/.."),
        Ok(Some(0)),
        "`..` below the root stays inside"
    );
    assert_eq!(node(&mut t, "/a/b/../../a"), Ok(Some(a)));
}

#[test]
fn symlinks_relative_and_absolute() {
    let (mut t, a, b, f) = sample();
    let l = t.link(b, "rel", "../g");
    t.link(b, "abs", "/a/b/f");
    t.link(0, "tob", "a/b");
    t.link(b, "up", "..");
    let g = t.nodes[a].entries[&b"g"[..]];
    assert_eq!(
        node(&mut t, "/a/b/rel"),
        Ok(Some(g)),
        "relative to the link's directory"
    );
    assert_eq!(
        walk(&mut t, "/a/b/rel", false).unwrap().node,
        Some(l),
        "last link not followed"
    );
    assert_eq!(node(&mut t, "/a/b/abs"), Ok(Some(f)));
    assert_eq!(
        node(&mut t, "/tob/f"),
        Ok(Some(f)),
        "a link in the middle is always followed"
    );
    assert_eq!(node(&mut t, "/tob/up/b/f"), Ok(Some(f)));
    assert_eq!(
        node(&mut t, "/tob/../g"),
        Ok(Some(g)),
        "`..` after a link goes up from its target"
    );
    let mut w = Walker::new();
    let r = w.walk(&mut t, 0, b"/tob/new", true, None).unwrap();
    assert_eq!((r.parent, r.node, w.name()), (b, None, &b"new"[..]));
    // Absolute targets: a mounted file system hands them back.
    t.mounted = true;
    assert_eq!(walk(&mut t, "/a/b/abs", true), Err(E::Xdev));
    assert_eq!(node(&mut t, "/a/b/rel"), Ok(Some(g)));
    // An empty target names nothing.
    t.link(0, "empty", "");
    assert_eq!(walk(&mut t, "/empty", true), Err(E::Walk(Error::NotFound)));
}

/// A chain of `n` links /l1 -> l2 -> ... -> ln -> f.
fn chain(t: &mut Mem, n: u32, absolute: bool) {
    t.file(0, "f");
    for i in 1..=n {
        let next = if i == n {
            "f".to_string()
        } else {
            format!("l{}", i + 1)
        };
        let target = if absolute { format!("/{}", next) } else { next };
        t.link(0, &format!("l{}", i), &target);
    }
}

#[test]
fn forty_links_resolve_and_the_forty_first_is_a_loop() {
    assert_eq!(MAX_LINKS, 40);
    for absolute in [false, true] {
        let mut t = Mem::new();
        chain(&mut t, 41, absolute);
        let f = t.nodes[0].entries[&b"f"[..]];
        // From l2 the chain has 40 links; from l1, 41.
        assert_eq!(node(&mut t, "/l2"), Ok(Some(f)));
        assert_eq!(walk(&mut t, "/l1", true), Err(E::Walk(Error::Loop)));
        assert_eq!(walk(&mut t, "/l1/", false), Err(E::Walk(Error::Loop)));
        // Not following the last one: nothing followed at all.
        assert!(walk(&mut t, "/l1", false).is_ok());
    }
    // The count is per resolution: links met in the middle and at the end add up.
    let mut t = Mem::new();
    let d = t.dir(0, "d");
    t.file(d, "x");
    t.link(0, "m1", "d");
    for i in 2..=20 {
        t.link(0, &format!("m{}", i), &format!("m{}", i - 1));
    }
    chain(&mut t, 20, false);
    let f = t.nodes[0].entries[&b"f"[..]];
    // /m20/../l1: 20 links to reach d, then 20 more: 40.
    assert_eq!(node(&mut t, "/m20/../l1"), Ok(Some(f)));
    t.link(0, "m21", "m20");
    assert_eq!(walk(&mut t, "/m21/../l1", true), Err(E::Walk(Error::Loop)));
}

#[test]
fn symlink_loops() {
    let mut t = Mem::new();
    t.link(0, "a", "b");
    t.link(0, "b", "/a");
    t.link(0, "self", "self/x");
    t.link(0, "dot", "./dot");
    for p in ["/a", "/a/x", "/self", "/self/y", "/dot"] {
        assert_eq!(walk(&mut t, p, true), Err(E::Walk(Error::Loop)), "{}", p);
    }
    assert!(
        walk(&mut t, "/a", false).is_ok(),
        "the link itself is reachable without following"
    );
}

#[test]
fn name_length_limit() {
    let mut t = Mem::new();
    let long = "n".repeat(NAME_MAX);
    let n = t.file(0, &long);
    assert_eq!(node(&mut t, &format!("/{}", long)), Ok(Some(n)));
    let too = "n".repeat(NAME_MAX + 1);
    assert_eq!(
        walk(&mut t, &format!("/{}", too), true),
        Err(E::Walk(Error::NameTooLong))
    );
    assert_eq!(
        walk(&mut t, &format!("/{}/x", too), true),
        Err(E::Walk(Error::NameTooLong)),
        "in the middle too"
    );
    assert_eq!(t.lookups, 1, "a long name is refused before any lookup");
    // A missing 255-byte name may be created.
    let r = walk(&mut t, &format!("/{}", "m".repeat(NAME_MAX)), true).unwrap();
    assert_eq!(r.node, None);
}

#[test]
fn path_length_limit() {
    let mut t = Mem::new();
    let d = t.dir(0, "d");
    t.file(d, "f");
    // "/d/" then `.` and `/` up to exactly PATH_MAX, then "f".
    let mut p = String::from("/d/");
    while p.len() < PATH_MAX - 1 {
        p.push_str(if p.len() % 2 == 0 { "/" } else { "." });
    }
    p.push('f');
    assert_eq!(p.len(), PATH_MAX);
    assert!(
        node(&mut t, &p).unwrap().is_some(),
        "a {}-byte path",
        PATH_MAX
    );
    let p = format!("/{}", p);
    assert_eq!(
        walk(&mut t, &p, true),
        Err(E::Walk(Error::NameTooLong)),
        "a {}-byte path",
        PATH_MAX + 1
    );
}

#[test]
fn path_length_limit_after_symlinks() {
    // /s -> "d/<pad>" where the pad brings the spliced path to exactly PATH_MAX with what follows.
    let mut t = Mem::new();
    let d = t.dir(0, "d");
    let f = t.file(d, "f");
    let rest = "/f"; // what follows the link in the walked path
    let mut target = String::from("d");
    while target.len() < PATH_MAX - rest.len() {
        target.push_str(if target.len() % 2 == 1 { "/" } else { "." });
    }
    assert_eq!(target.len() + rest.len(), PATH_MAX);
    t.link(0, "s", &target);
    assert_eq!(node(&mut t, "/s/f"), Ok(Some(f)));
    let mut t2 = Mem::new();
    let d = t2.dir(0, "d");
    t2.file(d, "f");
    t2.link(0, "s", &format!("{}/", target));
    assert_eq!(
        walk(&mut t2, "/s/f", true),
        Err(E::Walk(Error::NameTooLong))
    );
    // Expansion grows with every link whose target has more after it: 17 links each adding
    // 250 bytes outgrow 4096 bytes long before 40 links.
    let mut t3 = Mem::new();
    let pad = "p".repeat(240);
    t3.link(0, "k0", &format!("k1/{}", pad));
    for i in 1..20 {
        t3.link(0, &format!("k{}", i), &format!("k{}/{}", i + 1, pad));
    }
    assert_eq!(walk(&mut t3, "/k0", true), Err(E::Walk(Error::NameTooLong)));
}

#[test]
fn search_permission_on_the_way() {
    let (mut t, a, b, f) = sample();
    let user = Cred {
        uid: 1000,
        gid: 1000,
    };
    let root = Cred { uid: 0, gid: 0 };
    t.own(b, 0o700, 0, 0);
    let mut w = Walker::new();
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/f", true, Some(user)),
        Err(E::Walk(Error::Denied))
    );
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/.", true, Some(user)),
        Err(E::Walk(Error::Denied)),
        "even `.` needs search"
    );
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/f", true, Some(root)).unwrap().node,
        Some(f)
    );
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b", true, Some(user)).unwrap().node,
        Some(b),
        "naming it needs search on its parent only"
    );
    // Group members pass by the group bits; `None` checks nothing.
    t.own(b, 0o710, 0, 1000);
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/f", true, Some(user)).unwrap().node,
        Some(f)
    );
    t.own(a, 0o600, 1000, 1000);
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/f", true, Some(user)),
        Err(E::Walk(Error::Denied)),
        "the owner's bits decide for the owner"
    );
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/f", true, None).unwrap().node,
        Some(f)
    );
    assert_eq!(
        w.walk(&mut t, 0, b"/a/b/f", true, Some(root)).unwrap().node,
        Some(f),
        "root searches any directory"
    );
}

#[test]
fn permission_matrix() {
    let file = |mode: u32| Attr {
        mode: S_IFREG | mode,
        uid: 10,
        gid: 20,
    };
    let owner = Cred { uid: 10, gid: 99 };
    let member = Cred { uid: 11, gid: 20 };
    let other = Cred { uid: 12, gid: 21 };
    let root = Cred { uid: 0, gid: 0 };
    for want in [MAY_READ, MAY_WRITE, MAY_EXEC] {
        // Owner bits for the owner, group bits for the group, other bits for the rest.
        assert!(may(file(want << 6), owner, want));
        assert!(
            !may(file(want << 3 | want), owner, want),
            "the owner does not fall back to group or other bits"
        );
        assert!(may(file(want << 3), member, want));
        assert!(
            !may(file(want << 6 | want), member, want),
            "a member does not fall back to other bits"
        );
        assert!(may(file(want), other, want));
        assert!(!may(file(want << 6 | want << 3), other, want));
    }
    assert!(may(file(0o640), owner, MAY_READ | MAY_WRITE));
    assert!(
        !may(file(0o440), owner, MAY_READ | MAY_WRITE),
        "every bit asked must be granted"
    );
    assert!(may(file(0o640), member, MAY_READ));
    assert!(!may(file(0o640), other, MAY_READ));
    // Root reads and writes anything, executes only what some x bit allows, searches any dir.
    assert!(may(file(0), root, MAY_READ | MAY_WRITE));
    assert!(!may(file(0o666), root, MAY_EXEC));
    for x in [0o100, 0o010, 0o001] {
        assert!(may(file(x), root, MAY_EXEC));
    }
    assert!(may(
        Attr {
            mode: S_IFDIR,
            uid: 10,
            gid: 20
        },
        root,
        MAY_EXEC | MAY_READ | MAY_WRITE
    ));
    assert!(!may(
        Attr {
            mode: S_IFDIR,
            uid: 10,
            gid: 20
        },
        other,
        MAY_EXEC
    ));
    assert!(may(
        Attr {
            mode: S_IFDIR | 0o001,
            uid: 10,
            gid: 20
        },
        other,
        MAY_EXEC
    ));
}

#[test]
fn canonical_paths_and_mount_points() {
    let (mut t, a, _b, _f) = sample();
    // Another tree's root answered at "a/m" (a mount point need not exist below).
    let other = t.dir(0, "elsewhere");
    let x = t.file(other, "x");
    t.mount_at = Some((b"a/m".to_vec(), other));
    t.track = true;
    t.link(0, "tom", "a/b/../m");
    assert_eq!(node(&mut t, "/a/m/x"), Ok(Some(x)));
    assert_eq!(
        t.seen,
        vec![b"a".to_vec(), b"a/m".to_vec(), b"a/m/x".to_vec()]
    );
    t.seen.clear();
    assert_eq!(node(&mut t, "/tom/x"), Ok(Some(x)));
    assert_eq!(
        t.seen,
        vec![
            b"tom".to_vec(),
            b"a".to_vec(),
            b"a/b".to_vec(),
            b"a/m".to_vec(),
            b"a/m/x".to_vec()
        ]
    );
    // `..` from the mounted root comes back to the mount point's parent.
    assert_eq!(node(&mut t, "/a/m/.."), Ok(Some(a)));
    // Untracked walks report no paths (so no mount point is seen).
    t.track = false;
    t.seen.clear();
    assert_eq!(walk(&mut t, "/a/m/x", true), Err(E::Walk(Error::NotFound)));
    assert_eq!(t.seen, vec![Vec::new(), Vec::new()]);
}

#[test]
fn a_walker_is_reused_across_walks() {
    let (mut t, _a, _b, f) = sample();
    t.link(0, "l", "a/b/f");
    let mut w = Walker::new();
    for _ in 0..3 {
        assert_eq!(w.walk(&mut t, 0, b"/l", true, None).unwrap().node, Some(f));
        assert_eq!(
            w.walk(&mut t, 0, b"/a/b/f", true, None).unwrap().node,
            Some(f)
        );
    }
}
