//! Scenario fs-leak (issue 12, hole 2): one client must not exhaust a shared file system.
//!
//! - `drop`: opens `/hello.txt` 2,000 times through a PFS session and 2,000 times through the
//!   VFS, dropping each capability without `close` (the PFS learns from the kernel and takes
//!   every one back); then holds files until refused: exactly its bound (`files_per_session`),
//!   after which it alone gets `NoSpace`, through the session and through the VFS alike. While it
//!   is at its bound it lets `other` work, then drops everything and holds its bound again.
//! - `die`: holds its bound and ends without closing anything. The PFS's total (`files`) leaves
//!   no room for `drop`'s bound unless what `die` held came back when it died.
//! - `other`: while `drop` is at its bound, opens and reads `/hello.txt` both ways.
#![no_std]
#![no_main]

use sawmill_fsclient::{Error, Protocol, O_CREATE, O_WRITE};
use sawmill_fstests::{check, files, read_file};
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{pfs, vfs, FsError, OpenFlags};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

const HELLO: &[u8] = b"hello, sawmill\n";
/// The PFS's `files_per_session` in the scenario.
const BOUND: usize = 64;
/// Created by `drop` while it is at its bound; removed by `other` when it is done.
const FULL: &str = "/leak-full";
/// Opens each way that drop their capability without closing.
const LEAKS: usize = 2000;

fn vfs() -> vfs::Client {
    vfs::Client::new(env::cap("vfs").expect("vfs endpoint"))
}

/// A session to the root file system's PFS, from the VFS (protocol option 3).
fn session() -> u64 {
    match vfs().mount(0, thread::alloc_slot()) {
        Ok(m) => m.s,
        Err(e) => {
            println!("{}: FAIL session: {:?}", env::name(), e);
            sawmill_rt::exit(1)
        }
    }
}

fn app<T>(r: Result<T, RpcError<FsError>>, what: &str) -> Result<T, FsError> {
    match r {
        Ok(v) => Ok(v),
        Err(RpcError::App(e)) => Err(e),
        Err(e) => {
            println!("{}: FAIL {}: {:?}", env::name(), what, e);
            sawmill_rt::exit(1)
        }
    }
}

/// Opens `/hello.txt` for reading into `rx`: through the session `s`, or the VFS (`None`).
fn open(s: Option<u64>, rx: u64) -> Result<(), FsError> {
    match s {
        Some(s) => app(
            pfs::Client::new(s).open_path(b"hello.txt", OpenFlags::READ, 0, rx),
            "open_path",
        )
        .map(|_| ()),
        None => app(
            vfs().open(b"/hello.txt", OpenFlags::READ, 0, rx),
            "vfs open",
        )
        .map(|_| ()),
    }
}

/// Opens through the session into fresh slots until refused; returns the slots and the error.
fn hold(s: u64) -> (alloc_free::Held, FsError) {
    let mut held = alloc_free::Held::new();
    loop {
        let rx = thread::alloc_slot();
        match open(Some(s), rx) {
            Ok(()) => held.push(rx),
            Err(e) => return (held, e),
        }
        if held.len() > 4 * BOUND {
            return (held, FsError::Invalid);
        }
    }
}

/// A fixed list of held capability slots (no allocator needed).
mod alloc_free {
    pub struct Held {
        slots: [u64; 256],
        n: usize,
    }
    impl Held {
        pub fn new() -> Held {
            Held {
                slots: [0; 256],
                n: 0,
            }
        }
        pub fn push(&mut self, s: u64) {
            self.slots[self.n] = s;
            self.n += 1;
        }
        pub fn len(&self) -> usize {
            self.n
        }
        /// Deletes every held capability (no `close`: the PFS learns from the kernel).
        pub fn drop_all(&mut self) {
            for &s in &self.slots[..self.n] {
                let _ = sawmill_rt::sys::cap_delete(s);
            }
            self.n = 0;
        }
    }
}

/// Waits (yielding) until `/leak-full` exists (`want`) or not.
fn wait_for(f: &mut sawmill_fsclient::Files, want: bool) {
    for _ in 0..200_000 {
        let exists = f.stat(FULL).is_ok();
        if exists == want {
            return;
        }
        sys::yield_now();
    }
    println!("{}: FAIL waited too long for {}", env::name(), FULL);
    sawmill_rt::exit(1)
}

fn leak_and_drop() {
    let name = env::name();
    let s = session();
    let rx = thread::alloc_slot();
    for (way, via) in [("a PFS session", Some(s)), ("the VFS", None)] {
        for i in 0..LEAKS {
            let r = open(via, rx);
            check!(r.is_ok(), "open {} through {} refused: {:?}", i, way, r);
            check!(sys::cap_delete(rx).is_ok(), "no capability from open {}", i);
        }
        println!(
            "{}: PASS {} opens through {} dropped without close, none refused",
            name, LEAKS, way
        );
    }
    read_buffers(s, rx);
    let (mut held, e) = hold(s);
    check!(
        held.len() == BOUND && e == FsError::NoSpace,
        "held {} then {:?} (want {} then NoSpace; fewer: a dead client's files were not taken back)",
        held.len(),
        e,
        BOUND
    );
    let r = open(None, rx);
    check!(
        r == Err(FsError::NoSpace),
        "at the bound the VFS still opened: {:?}",
        r
    );
    println!(
        "{}: PASS held {} files, then NoSpace through the session and the VFS",
        name, BOUND
    );
    let mut f = files();
    let fd = f.open(FULL, O_CREATE | O_WRITE, 0o666);
    check!(fd.is_ok(), "create {}: {:?}", FULL, fd);
    let _ = f.close(fd.unwrap_or(0));
    wait_for(&mut f, false);
    held.drop_all();
    let (mut again, e) = hold(s);
    check!(
        again.len() == BOUND && e == FsError::NoSpace,
        "after dropping everything held {} then {:?}",
        again.len(),
        e
    );
    again.drop_all();
    println!(
        "{}: PASS after dropping its files its share came back",
        name
    );
}

/// The copy path's read buffers go with their files: [`LEAKS`] opens through the session `s`
/// (into `rx`), each mapping its file's read buffer (20 KiB of the PFS's heap, which holds 2 MiB:
/// a buffer kept past its file would run the heap out within about a hundred), filling it and
/// checking its bytes, then dropping the capability without `close`.
fn read_buffers(s: u64, rx: u64) {
    use sawmill_ext2_api::read_buffer::{Header, DATA, PAGES};
    use sawmill_interfaces::file;
    // Past the file library's windows, which this task does not use yet.
    let at = sawmill_fsclient::WINDOWS + sawmill_fsclient::WINDOWS_SPAN;
    for i in 0..LEAKS {
        let r = open(Some(s), rx);
        check!(r.is_ok(), "open {} for its read buffer refused: {:?}", i, r);
        let c = file::Client::new(rx);
        let m = app(c.read_buffer(at, [at, PAGES * 4096]), "read_buffer");
        check!(m.is_ok(), "read buffer {} refused: {:?}", i, m.map(|_| ()));
        let n = app(c.read_to_buffer(0, DATA as u32), "read_to_buffer");
        check!(n == Ok(HELLO.len() as u32), "read_to_buffer {}: {:?}", i, n);
        check!(sys::translate(at).is_ok(), "read buffer {} not mapped", i);
        // SAFETY: the PFS mapped PAGES pages at `at` read-only (checked above); they stay until
        // the capability goes.
        let (data, header) = unsafe {
            (
                core::slice::from_raw_parts(at as *const u8, HELLO.len()),
                Header::at(at),
            )
        };
        check!(
            data == HELLO && header.find(0, HELLO.len() as u64).is_some(),
            "read buffer {} holds other bytes",
            i
        );
        check!(sys::cap_delete(rx).is_ok(), "no capability from open {}", i);
    }
    println!(
        "{}: PASS {} read buffers filled and dropped with their files",
        env::name(),
        LEAKS
    );
}

fn hold_and_die() {
    let (held, e) = hold(session());
    check!(
        held.len() == BOUND && e == FsError::NoSpace,
        "held {} then {:?}",
        held.len(),
        e
    );
    println!(
        "{}: PASS holding {} files, ending without closing",
        env::name(),
        BOUND
    );
}

fn other() {
    let name = env::name();
    let mut f = files();
    wait_for(&mut f, true);
    for i in 0..10 {
        f.protocol = if i % 2 == 0 {
            Protocol::Vfs
        } else {
            Protocol::Direct
        };
        let r: Result<_, Error> = read_file(&mut f, "/hello.txt");
        check!(
            r.as_deref() == Ok(HELLO),
            "read {} while another client is at its bound: {:?}",
            i,
            r.map(|v| v.len())
        );
    }
    f.protocol = Protocol::Vfs;
    check!(f.unlink(FULL).is_ok(), "unlink {}", FULL);
    println!(
        "{}: PASS open and read work while another client is at its bound",
        name
    );
}

fn main() {
    match env::args().find_map(|a| a.strip_prefix("role=")) {
        Some("drop") => leak_and_drop(),
        Some("die") => hold_and_die(),
        Some("other") => other(),
        r => {
            println!("{}: FAIL unknown role {:?}", env::name(), r);
            sawmill_rt::exit(1)
        }
    }
}
