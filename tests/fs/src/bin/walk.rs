//! Scenario fs-walk: the path walker's limits through every way a path is resolved: the VFS's
//! own walk (stat, absolute symlinks), the VFS handing an open to the PFS, the library's
//! protocol option 3, and `open_path` called on a PFS session directly.
//!
//! - 40 symlinks in one resolution resolve, the 41st is `Loop`;
//! - a 255-byte name is fine, a 256-byte name is `NameTooLong`;
//! - a path that outgrows 4096 bytes by symlink expansion is `NameTooLong`;
//! - a trailing slash after a file is `NotDir`;
//! - `file.reopen` (the library's reuse of closed files) acts only on a closed file of a live
//!   session, never creates, stays in its file system, and gives the file asked for.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use sawmill_fsclient::{Error, Files, Protocol, O_CREATE, O_READ, O_WRITE};
use sawmill_fstests::{check, files, ok, read_file};
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{file, pfs, vfs, FsError, OpenFlags};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

const CONTENT: &[u8] = b"at the end of the chain\n";
/// Symlinks one resolution may follow (Linux MAXSYMLINKS).
const LINKS: u32 = 40;

/// `open_path` on a PFS session directly (protocol option 3 without the library).
struct Session(u64);

impl Session {
    /// A session to the PFS of mount `i` for our credentials, from the VFS.
    fn new(i: u32) -> Session {
        let vfs = env::cap("vfs").expect("vfs endpoint");
        let rx = thread::alloc_slot();
        match vfs::Client::new(vfs).mount(i, rx) {
            Ok(m) => Session(m.s),
            Err(e) => {
                println!("{}: FAIL session of mount {}: {:?}", env::name(), i, e);
                sawmill_rt::exit(1)
            }
        }
    }

    /// Opens `path` (relative to the PFS's root) for reading, closes it, and says how it went.
    fn open(&self, path: &str) -> Result<u64, FsError> {
        let rx = thread::alloc_slot();
        match pfs::Client::new(self.0).open_path(path.as_bytes(), OpenFlags::READ, 0, rx) {
            Ok(o) => {
                let _ = file::Client::new(o.file).close();
                let _ = sys::cap_delete(o.file);
                Ok(o.size)
            }
            Err(RpcError::App(e)) => Err(e),
            Err(e) => {
                println!("{}: FAIL open_path {}: {:?}", env::name(), path, e);
                sawmill_rt::exit(1)
            }
        }
    }
}

fn open_close(f: &mut Files, path: &str) -> Result<(), Error> {
    let fd = f.open(path, O_READ, 0)?;
    f.close(fd)
}

/// Opens `path` with both protocols (option 2: the VFS; option 3: the library at the PFS).
fn open_both(f: &mut Files, path: &str) -> [Result<(), Error>; 2] {
    let mut r = [Ok(()), Ok(())];
    for (i, proto) in [Protocol::Vfs, Protocol::Direct].into_iter().enumerate() {
        f.protocol = proto;
        r[i] = open_close(f, path);
    }
    f.protocol = Protocol::Vfs;
    r
}

/// Chains /data/w/{prefix}1 -> {prefix}2 -> ... -> {prefix}41 -> f; `absolute` targets start
/// with /data/w/, which a PFS hands back to the VFS.
fn chain(f: &mut Files, prefix: &str, absolute: bool) {
    for i in 1..=LINKS + 1 {
        let next = if i == LINKS + 1 {
            String::from("f")
        } else {
            format!("{}{}", prefix, i + 1)
        };
        let target = if absolute {
            format!("/data/w/{}", next)
        } else {
            next
        };
        ok(
            f.symlink(&target, &format!("/data/w/{}{}", prefix, i)),
            "symlink",
        );
    }
}

fn links(f: &mut Files, s: &Session) {
    // Relative links: the PFS walks the whole chain itself (option 3, and the VFS's open).
    chain(f, "l", false);
    for p in ["/data/w/l2", "/data/w/l41", "/data/w/f"] {
        check!(
            open_both(f, p) == [Ok(()), Ok(())],
            "{}: 40 links or fewer did not open",
            p
        );
    }
    f.protocol = Protocol::Direct;
    check!(
        ok(read_file(f, "/data/w/l2"), "read through 40 links") == CONTENT,
        "content through 40 links"
    );
    f.protocol = Protocol::Vfs;
    check!(
        open_both(f, "/data/w/l1") == [Err(Error::Loop), Err(Error::Loop)],
        "41 links opened"
    );
    check!(
        s.open("/w/l2") == Ok(CONTENT.len() as u64),
        "open_path through 40 links"
    );
    check!(
        s.open("/w/l1") == Err(FsError::Loop),
        "open_path through 41 links"
    );
    // The VFS's own walk: stat resolves there, component by component.
    check!(
        ok(f.stat("/data/w/l2"), "stat through 40 links").size == CONTENT.len() as u64,
        "stat size through 40 links"
    );
    check!(
        f.stat("/data/w/l1").map(|_| ()) == Err(Error::Loop),
        "stat through 41 links"
    );
    check!(
        f.lstat("/data/w/l1").is_ok(),
        "lstat of the 41st link follows nothing"
    );
    // Absolute links: the PFS hands the walk back at the first one, the VFS follows them all.
    chain(f, "a", true);
    check!(
        s.open("/w/a2") == Err(FsError::Xdev),
        "open_path of an absolute link"
    );
    check!(
        open_both(f, "/data/w/a2") == [Ok(()), Ok(())],
        "40 absolute links did not open"
    );
    check!(
        open_both(f, "/data/w/a1") == [Err(Error::Loop), Err(Error::Loop)],
        "41 absolute links opened"
    );
    // The count is per resolution: 20 links from / to /data/w/l22 (which has 20 more).
    ok(f.symlink("/data/w/l22", "/m1"), "symlink m1");
    for i in 2..=20 {
        ok(
            f.symlink(&format!("m{}", i - 1), &format!("/m{}", i)),
            "symlink m",
        );
    }
    check!(
        open_both(f, "/m20") == [Ok(()), Ok(())],
        "20 + 20 links did not open"
    );
    ok(f.symlink("m20", "/m21"), "symlink m21");
    check!(
        open_both(f, "/m21") == [Err(Error::Loop), Err(Error::Loop)],
        "21 + 20 links opened"
    );
}

fn names(f: &mut Files, s: &Session) {
    let long = "n".repeat(255);
    let path = format!("/data/w/{}", long);
    let fd = ok(
        f.open(&path, O_WRITE | O_CREATE, 0o644),
        "create a 255-byte name",
    );
    ok(f.close(fd), "close");
    check!(
        open_both(f, &path) == [Ok(()), Ok(())],
        "a 255-byte name did not open"
    );
    check!(
        s.open(&format!("/w/{}", long)) == Ok(0),
        "open_path of a 255-byte name"
    );
    let too = format!("/data/w/{}", "n".repeat(256));
    check!(
        open_both(f, &too) == [Err(Error::NameTooLong), Err(Error::NameTooLong)],
        "a 256-byte name"
    );
    check!(
        f.open(&too, O_WRITE | O_CREATE, 0o644) == Err(Error::NameTooLong),
        "created a 256-byte name"
    );
    check!(
        f.stat(&too).map(|_| ()) == Err(Error::NameTooLong),
        "stat of a 256-byte name"
    );
    check!(
        s.open(&format!("/w/{}", "n".repeat(256))) == Err(FsError::NameTooLong),
        "open_path of a 256-byte name"
    );
    // Every link adds 204 bytes to what is left of the path: past 4096 bytes long before 40
    // links. Messages carry at most 400 bytes of path; expansion is the walker's to limit.
    let pad = "p".repeat(200);
    for i in 0..24 {
        ok(
            f.symlink(&format!("k{}/{}", i + 1, pad), &format!("/data/w/k{}", i)),
            "symlink k",
        );
    }
    check!(
        open_both(f, "/data/w/k0") == [Err(Error::NameTooLong), Err(Error::NameTooLong)],
        "a path of over 4096 bytes after expansion"
    );
    check!(
        s.open("/w/k0") == Err(FsError::NameTooLong),
        "open_path of over 4096 bytes after expansion"
    );
    check!(
        f.stat("/data/w/k0").map(|_| ()) == Err(Error::NameTooLong),
        "stat of over 4096 bytes after expansion"
    );
    // A trailing slash must name a directory.
    check!(
        open_both(f, "/data/w/f/") == [Err(Error::NotDir), Err(Error::NotDir)],
        "a file with a trailing slash"
    );
    check!(
        f.stat("/data/w/f/").map(|_| ()) == Err(Error::NotDir),
        "stat of a file with a trailing slash"
    );
    check!(
        f.stat("/data/w/").map(|s| s.is_dir()) == Ok(true),
        "a directory with a trailing slash"
    );
}

/// An RPC result as the file system's error (a transport error is a failure of the test).
fn app<T>(r: Result<T, RpcError<FsError>>, what: &str) -> Result<T, FsError> {
    r.map_err(|e| match e {
        RpcError::App(x) => x,
        e => {
            println!("{}: FAIL {}: {:?}", env::name(), what, e);
            sawmill_rt::exit(1)
        }
    })
}

fn reopen(s: &Session) {
    let rx = thread::alloc_slot();
    let o = ok(
        app(
            pfs::Client::new(s.0).open_path(b"/w/f", OpenFlags::READ, 0, rx),
            "open_path",
        ),
        "open_path /w/f",
    );
    let c = file::Client::new(o.file);
    check!(
        app(c.reopen(b"/w/f", OpenFlags::READ, 0), "reopen") == Err(FsError::BadFile),
        "reopened a file still open"
    );
    ok(app(c.close(), "close"), "close");
    check!(
        app(
            c.reopen(b"/w/new", OpenFlags::READ | OpenFlags::CREATE, 0o644),
            "reopen"
        ) == Err(FsError::Invalid),
        "reopen created a file"
    );
    check!(
        app(c.reopen(b"/w/none", OpenFlags::READ, 0), "reopen") == Err(FsError::NotFound),
        "reopened a name that does not exist"
    );
    check!(
        app(c.reopen(b"/w/a2", OpenFlags::READ, 0), "reopen") == Err(FsError::Xdev),
        "reopen followed an absolute link"
    );
    check!(
        app(c.reopen(b"/w/f", OpenFlags::READ, 0), "reopen").map(|o| o.size)
            == Ok(CONTENT.len() as u64),
        "reopen of /w/f"
    );
    let got = ok(app(c.read(0, 480), "read"), "read reopened");
    check!(got.as_slice() == CONTENT, "the reopened file's content");
    ok(app(c.close(), "close"), "close");
    let _ = sys::cap_delete(o.file);
    // A file the VFS opened for us is charged to our session at the PFS (the VFS holds a copy
    // of it): reopened with our credentials alike, and only when closed.
    let vfs = vfs::Client::new(env::cap("vfs").expect("vfs endpoint"));
    let o = ok(
        app(vfs.open(b"/data/w/f", OpenFlags::READ, 0, rx), "vfs open"),
        "vfs open",
    );
    let c = file::Client::new(o.file);
    check!(
        app(c.reopen(b"/w/f", OpenFlags::READ, 0), "reopen") == Err(FsError::BadFile),
        "reopened a file the VFS opened, still open"
    );
    ok(app(c.close(), "close"), "close");
    check!(
        app(c.reopen(b"/w/f", OpenFlags::READ, 0), "reopen").map(|o| o.size)
            == Ok(CONTENT.len() as u64),
        "reopen of a closed file the VFS opened"
    );
    let _ = sys::cap_delete(o.file);
}

fn main() {
    let mut f = files();
    f.protocol = Protocol::Vfs;
    ok(f.mkdir("/data/w", 0o755), "mkdir /data/w");
    let fd = ok(
        f.open("/data/w/f", O_WRITE | O_CREATE, 0o644),
        "create /data/w/f",
    );
    check!(
        ok(f.write(fd, CONTENT), "write") == CONTENT.len(),
        "short write"
    );
    ok(f.close(fd), "close");
    let s = Session::new(1);
    links(&mut f, &s);
    names(&mut f, &s);
    reopen(&s);
    println!("walk: PASS limits hold through the VFS and at the PFS");
}
