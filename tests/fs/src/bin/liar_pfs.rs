//! A file system server that is alive but breaks its protocol (issue 12, hole 1): it mounts
//! like an ext2 PFS (`reconnect`, `root`, `getattr` of a one-directory file system), then answers
//! every `lookup` with a malformed reply — label 0 ("ok") with one word where `lookup` returns
//! four — so the VFS's stub sees a protocol error from a server that has not died. The VFS must
//! fail that one request and keep the mount for everyone (scenario `vfs-liar`).
//!
//! With the argument `dies-in-root N` it lies differently: its incarnations 2..=N+1 (root
//! restarts it) accept the VFS's `reconnect`, then die when asked `root`, the next call of a
//! reconnect: the VFS must try the next incarnation, not leave the mount dead (scenario
//! `vfs-revive-dies`).
#![no_std]
#![no_main]

use sawmill_abi::MsgTag;
use sawmill_interfaces::pfs::{
    self, GetattrOut, LookupOut, OpenOut, OpenPathOut, ReaddirOut, StatfsOut,
};
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, IpcResult, Next, Reply};
use sawmill_interfaces::{FsError, OpenFlags, RenameFlags, SetAttrFields};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

/// The only inode: the root directory.
const ROOT: u32 = 2;

struct Liar {
    lies: u64,
    /// Dies when asked `root` (`dies-in-root`, an incarnation in the range).
    dies_in_root: bool,
    after: AfterReply,
}

macro_rules! refuse {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {
        $(fn $name(&mut self, _badge: u64, $($a: $t),*) -> Result<$r, FsError> {
            $(let _ = $a;)*
            Err(FsError::Invalid)
        })*
    };
}

impl pfs::Server for Liar {
    fn root(&mut self, _badge: u64) -> Result<u32, FsError> {
        if self.dies_in_root {
            println!("liar-pfs: dying in root");
            sawmill_rt::exit(0x98)
        }
        Ok(ROOT)
    }
    fn getattr(&mut self, _badge: u64, ino: u32) -> Result<GetattrOut, FsError> {
        if ino != ROOT {
            return Err(FsError::NotFound);
        }
        Ok(GetattrOut {
            mode: 0o040755,
            nlink: 2,
            uid: 0,
            gid: 0,
            size: 4096,
            blocks: 8,
            rdev_major: 0,
            rdev_minor: 0,
            atime: 0,
            mtime: 0,
            ctime: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            generation: 0,
        })
    }
    refuse! {
        watch() -> ();
        reconnect() -> u64;
        lookup(dir: u32, name: &[u8]) -> LookupOut;
        open(ino: u32, flags: OpenFlags) -> OpenOut;
        create(dir: u32, name: &[u8], mode: u32, uid: u32, gid: u32) -> u32;
        mkdir(dir: u32, name: &[u8], mode: u32, uid: u32, gid: u32) -> u32;
        symlink(dir: u32, name: &[u8], target: &[u8], uid: u32, gid: u32) -> u32;
        readlink(ino: u32) -> Bytes<256>;
        unlink(dir: u32, name: &[u8]) -> ();
        rmdir(dir: u32, name: &[u8]) -> ();
        rename(dirs: [u32; 2], sname: &[u8], dname: &[u8], flags: RenameFlags) -> ();
        setattr(ino: u32, mode: u32, uid: u32, gid: u32, atime: u32, mtime: u32, which: SetAttrFields) -> ();
        truncate(ino: u32, size: u64) -> ();
        readdir(dir: u32, cookie: u64) -> ReaddirOut;
        sync() -> ();
        session(uid: u32, gid: u32) -> u64;
        crash() -> ();
        open_path(path: &[u8], flags: OpenFlags, mode: u32) -> OpenPathOut;
        cover(path: &[u8]) -> ();
        link(ino: u32, dir: u32, name: &[u8]) -> ();
        statfs() -> StatfsOut;
        readdir_many(dir: u32, cookie: u64) -> pfs::ReaddirManyOut;
        stat_path(path: &[u8], follow: bool) -> pfs::StatPathOut;
        open_inode(ino: u32, generation: u32, flags: OpenFlags) -> pfs::OpenInodeOut;
    }
}

impl rpc::Serve for Liar {
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.tag.label() == pfs::op::LOOKUP {
            self.lies += 1;
            println!(
                "liar-pfs: lookup answered with a malformed reply ({})",
                self.lies
            );
            return next.reply_plain(Reply {
                tag: MsgTag::new(0, 1),
                w: [7, 0, 0, 0],
            });
        }
        pfs::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

fn main() {
    let Some((manifest_ep, _)) = env::served() else {
        println!("liar-pfs: FAIL no endpoint to serve");
        return;
    };
    // Like ext2: we serve an endpoint root made for us; the manifest thread hands the VFS a
    // capability to it and leaves its `watch` unanswered (we are alive).
    let Some(ep) = sawmill_interfaces::pfs_manifest::own_endpoint() else {
        println!("liar-pfs: FAIL root gave us no endpoint");
        return;
    };
    if thread::spawn(254, 8192, move || {
        sawmill_interfaces::pfs_manifest::serve_manifest(manifest_ep, ep)
    })
    .is_err()
    {
        println!("liar-pfs: FAIL no manifest thread");
        return;
    }
    let incarnation = env::value(env::KIND_INCARNATION).unwrap_or(1);
    let dying = match (env::arg(0), env::arg(1).and_then(|n| n.parse::<u64>().ok())) {
        (Some("dies-in-root"), Some(n)) => n,
        _ => 0,
    };
    let mut liar = Liar {
        lies: 0,
        dies_in_root: (2..=dying + 1).contains(&incarnation),
        after: AfterReply::new(),
    };
    let _ = rpc::serve(ep, &mut liar);
}
