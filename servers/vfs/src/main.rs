//! The VFS server: the name space of the system.
//!
//! Settings: the `config` table (`sawmill_vfs_api::Config`): `mounts` (a PFS's manifest
//! endpoint per path, in mount order; the first must be `/`), `creds` (the credentials of a
//! client, known here by the badge its `vfs` capability carries, which the host tool filled in;
//! unknown badges are nobody, 65534:65534), `admins` (may use fault injection).
//!
//! Path resolution (`sawmill_path`'s walker, the one the PFS uses too) walks component by
//! component with `lookup` calls to the PFS that owns each directory, checking search permission
//! with the caller's credentials; a component whose canonical path is a mount point continues in
//! that mount's root, `..` pops back across it, and symbolic links (relative or absolute) are
//! spliced into the remaining path, so they work across mounts too. `open` checks read/write
//! permission and returns the capability of the PFS's open-file object itself (protocol option 2):
//! reads and writes never pass the VFS. For option 3, `mount` gives a client a session capability
//! to a PFS for its credentials.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use sawmill_abi::ObjKind;
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, Error as RpcError, IpcResult, Next};
use sawmill_interfaces::vfs::{
    self, MountOut, MountsOut, OpenOut, ReaddirOut, StatOut, StatfsOut, STAGE_MAX, STAGE_SLOTS,
};
use sawmill_interfaces::{pfs, FsError, OpenFlags, RenameFlags, SetAttrFields};
use sawmill_path::{Attr, Cred, Error as WalkError, Walker, S_IFMT, S_IFREG, S_IFSOCK};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

const MAX_MOUNTS: usize = 8;
/// Set by a mount's watch thread when its PFS died.
static DEAD: [AtomicBool; MAX_MOUNTS] = [const { AtomicBool::new(false) }; MAX_MOUNTS];
/// Per mount: our capability to the endpoint its PFS serves (the main thread sets it on
/// connecting; the watch thread takes it and deletes it when the PFS dies, and leaves the
/// emptied slot in `FREED` for the main thread to reuse).
static CONN: [AtomicU64; MAX_MOUNTS] = [const { AtomicU64::new(0) }; MAX_MOUNTS];
static FREED: [AtomicU64; MAX_MOUNTS] = [const { AtomicU64::new(0) }; MAX_MOUNTS];

/// Runs in its own thread per mount: the PFS never answers `watch`; the kernel does (GONE)
/// when the PFS dies. Root has then destroyed the endpoint the PFS served (its own, made for
/// that incarnation): every capability the PFS handed out stops working and every caller
/// blocked on it is woken with an error, so no client hangs on a dead file system; we only
/// mark the mount dead and drop our (already revoked) capability. A mount whose PFS restarts is
/// connected again by the main thread (`revive`), which signals `go`: then it watches the new
/// incarnation.
fn watch(m: usize, manifest_ep: u64, go: u64) {
    loop {
        let r = pfs::Client::new(manifest_ep).watch();
        let e = CONN[m].swap(0, Ordering::SeqCst);
        DEAD[m].store(true, Ordering::SeqCst);
        let _ = sys::cap_delete(e);
        FREED[m].store(e, Ordering::SeqCst);
        println!("vfs: the PFS of mount {} died ({:?})", m, r.err());
        if sys::notify_wait(go, 0).is_err() {
            return;
        }
    }
}

struct Mount {
    prefix: Vec<u8>,
    /// Canonical components of the prefix.
    comps: Vec<Vec<u8>>,
    pfs: pfs::Client,
    root: u32,
    root_attr: (u32, u32, u32),
    alive: bool,
    /// The PFS's manifest endpoint (where root puts a new incarnation's).
    manifest_ep: u64,
    /// Its PFS restarts (config `restarts`): a dead mount is connected again (`revive`).
    restarts: bool,
    /// A call found its PFS dead (`fail`), perhaps before the watch thread saw it: `revive`
    /// waits for the watch thread instead of answering `Gone` at once.
    lost: bool,
    /// The watch thread's notification: watch again (after `revive`).
    go: u64,
}

/// What `connect_pfs` gives: the PFS client, the root's inode and its (mode, uid, gid).
type Connected = (pfs::Client, u32, (u32, u32, u32));

/// A connection to mount `mi`'s PFS at its manifest endpoint `ep` (`pfs.reconnect`): our badged
/// capability to the endpoint it serves, the root's inode and its (mode, uid, gid). Slots come
/// from and go back to `free` (a mount that restarts connects again and again). The caller
/// then has the watch thread watch it. The endpoint is the PFS's own (root made it for that
/// incarnation and destroys it when the PFS dies), so the same call serves at boot and after a
/// restart of ours, and our death leaves the PFS's clients untouched.
fn connect_pfs(mi: usize, ep: u64, free: &mut Vec<u64>) -> Result<Connected, RpcError<FsError>> {
    let rx = free.pop().unwrap_or_else(thread::alloc_slot);
    let e = match pfs::Client::new(ep).reconnect(rx) {
        Ok(e) => e,
        Err(e) => {
            free.push(rx);
            return Err(e);
        }
    };
    CONN[mi].store(e, Ordering::SeqCst);
    DEAD[mi].store(false, Ordering::SeqCst);
    let p = pfs::Client::new(e);
    let (root, attr) = p.root().and_then(|r| p.getattr(r).map(|a| (r, a)))?;
    Ok((p, root, (attr.mode, attr.uid, attr.gid)))
}

/// After [`connect_pfs`] failed other than with an answer: if it had connected, that
/// incarnation died before answering, and its capability goes (its slot back to `free`).
fn forget_connection(mi: usize, free: &mut Vec<u64>) {
    let dead = CONN[mi].swap(0, Ordering::SeqCst);
    if dead != 0 {
        let _ = sys::cap_delete(dead);
        free.push(dead);
    }
}

/// [`connect_pfs`] as the VFS starts. A PFS that restarts may be between incarnations then (it
/// died while we restarted, or just before: its slot empty or its endpoint dead): tried again
/// every 10 ms for up to `RESTART_WAIT_MS`, as [`Vfs::revive`] waits, rather than leaving its
/// mount out (a VFS without `/` cannot serve).
fn connect_at_start(
    mi: usize,
    ep: u64,
    restarts: bool,
    free: &mut Vec<u64>,
    timer: Option<u64>,
) -> Result<Connected, RpcError<FsError>> {
    let khz = sawmill_rt::clock::Wall::get().khz.max(1);
    let deadline = sys::rdtsc() + sawmill_vfs_api::RESTART_WAIT_MS * khz;
    loop {
        let r = connect_pfs(mi, ep, free);
        match r {
            Err(RpcError::App(_)) | Ok(_) => return r,
            Err(_) if !restarts || sys::rdtsc() >= deadline => return r,
            Err(_) => {
                forget_connection(mi, free);
                if let Some(t) = timer {
                    let _ = sys::notify_wait_until(t, (sys::rdtsc() + 10 * khz).min(deadline));
                } else {
                    sys::yield_now();
                }
            }
        }
    }
}

/// A resolved position: mount, inode, and its (mode, uid, gid).
#[derive(Clone, Copy)]
struct Pos {
    m: usize,
    ino: u32,
    attr: (u32, u32, u32),
}

struct Resolved {
    parent: Pos,
    /// None: the last component does not exist (name is in `name`).
    node: Option<Pos>,
    /// Empty for `/` and for a path ending in `.` or `..`.
    name: Vec<u8>,
    /// The path ended in `/`: it names a directory (or may only create one).
    dir_only: bool,
}

struct Vfs {
    mounts: Vec<Mount>,
    /// What `revive` waits on between tries.
    timer: Option<u64>,
    creds: Vec<(u64, u32, u32)>,
    admins: Vec<u64>,
    version: u64,
    free_slots: Vec<u64>,
    /// PFS session capabilities we hold, one per client and mount: (mount, client badge, slot).
    /// Everything a client opens — through us (`open`) or with a copy it got (`mount`) — is
    /// charged to its own session at the PFS, which bounds it, so no client can use up another's
    /// share.
    sessions: Vec<(usize, u64, u64)>,
    /// The slot handed to the client in the current reply, deleted once the reply is out.
    after: AfterReply,
    /// Staged long paths (`stage`): (client badge, slot, bytes), at most [`MAX_STAGED`].
    staged: Vec<(u64, u32, Vec<u8>)>,
    /// The path inside a mount that `direct_route` builds, kept between calls.
    route: Vec<u8>,
    /// A PFS answered garbage since this was last cleared (`fail`): the request was not done.
    garbled: bool,
}

/// Staging buffers kept at most (over all clients); past it the oldest is dropped, and the
/// call that would have used it fails with `Invalid`.
const MAX_STAGED: usize = 64;

/// A path argument: the bytes sent, or, when they are `[0, slot]`, the caller's staged path in
/// that slot (taken: used once).
macro_rules! path_arg {
    ($self:ident, $badge:ident, $p:ident) => {
        let staged;
        let $p: &[u8] = if $p.first() == Some(&0) {
            staged = $self.take_staged($badge, $p)?;
            &staged
        } else {
            $p
        };
    };
}

/// At most this many sessions (mounts × clients); past it a client's opens take the
/// component-by-component way (charged to the VFS's own share at the PFS) and `mount` is
/// refused with `NoSpace`.
const MAX_SESSIONS: usize = 64;

/// Whether (uid, gid) may access an inode with attributes (mode, uid, gid) for `want`
/// (`sawmill_path::MAY_*` bits): the one permission check of the file-system servers.
fn may(attr: (u32, u32, u32), uid: u32, gid: u32, want: u32) -> bool {
    sawmill_path::may(
        Attr {
            mode: attr.0,
            uid: attr.1,
            gid: attr.2,
        },
        Cred { uid, gid },
        want,
    )
}

/// The name space as the path walker sees it (`sawmill_path::Tree`): a name whose canonical
/// path is a mount point is that mount's root (a mount point need not exist in the file system
/// below it); any other name is looked up at the PFS owning the directory. `..` above `/` stays
/// at `/`, and absolute symlinks start again at `/`, so both work across mounts.
impl sawmill_path::Tree for Vfs {
    type Node = Pos;
    type Error = FsError;
    fn error(e: WalkError) -> FsError {
        e.into()
    }
    fn attr(&self, node: &Pos) -> Attr {
        Attr {
            mode: node.attr.0,
            uid: node.attr.1,
            gid: node.attr.2,
        }
    }
    fn lookup(&mut self, dir: &Pos, name: &[u8], at: &[u8]) -> Result<Option<Pos>, FsError> {
        if let Some(m) = (0..self.mounts.len()).rev().find(|&i| {
            self.mounts[i]
                .comps
                .iter()
                .map(|c| &c[..])
                .eq(at.split(|&c| c == b'/'))
        }) {
            if !self.mounts[m].alive {
                return Err(FsError::Gone);
            }
            return Ok(Some(self.root_pos(m)));
        }
        let p = self.pfs(dir.m)?;
        match p.lookup(dir.ino, name) {
            Ok(l) => Ok(Some(Pos {
                m: dir.m,
                ino: l.ino,
                attr: (l.mode, l.uid, l.gid),
            })),
            Err(RpcError::App(FsError::NotFound)) => Ok(None),
            Err(e) => Err(self.fail(dir.m, e)),
        }
    }
    fn read_link(&mut self, link: &Pos, target: &mut Vec<u8>) -> Result<(), FsError> {
        let t = self
            .pfs(link.m)?
            .readlink(link.ino)
            .map_err(|e| self.fail(link.m, e))?;
        target.extend_from_slice(&t);
        Ok(())
    }
    /// Only a name below `/` can be a mount point.
    fn track_path(&self) -> bool {
        self.mounts.len() > 1
    }
}

impl Vfs {
    /// The staged path `[0, slot]` names (see `vfs.stage`).
    fn take_staged(&mut self, badge: u64, p: &[u8]) -> Result<Vec<u8>, FsError> {
        let [0, slot] = *p else {
            return Err(FsError::Invalid);
        };
        let i = self
            .staged
            .iter()
            .position(|s| (s.0, s.1) == (badge, slot as u32))
            .ok_or(FsError::Invalid)?;
        Ok(self.staged.swap_remove(i).2)
    }

    fn cred(&self, badge: u64) -> (u32, u32) {
        self.creds
            .iter()
            .find(|c| c.0 == badge)
            .map(|c| (c.1, c.2))
            .unwrap_or((65534, 65534))
    }

    fn slot(&mut self) -> u64 {
        self.free_slots.pop().unwrap_or_else(thread::alloc_slot)
    }

    /// What a failed call to mount `m`'s PFS means for the client. Only a real peer death (the
    /// kernel's GONE or PeerGone, our capability gone — root revokes it with the endpoint of
    /// the PFS incarnation that ended, possibly before the watch thread has run —, or the watch
    /// thread's report) marks the mount dead; anything
    /// else — a stub refusing an argument, a protocol label, a malformed reply — fails this one
    /// request, or any client could take the mount away from everyone (issue 12, hole 1).
    fn fail(&mut self, m: usize, e: RpcError<FsError>) -> FsError {
        match e {
            RpcError::App(e) => e,
            e if e.server_gone() || DEAD[m].load(Ordering::SeqCst) => {
                self.mounts[m].lost = true;
                if self.mounts[m].alive {
                    println!(
                        "vfs: mount {} lost its file system",
                        core::str::from_utf8(&self.mounts[m].prefix).unwrap_or("?")
                    );
                    self.mounts[m].alive = false;
                    self.version += 1;
                }
                FsError::Gone
            }
            RpcError::TooLong => FsError::NameTooLong,
            RpcError::Protocol(_) => FsError::Invalid,
            _ => {
                self.garbled = true;
                FsError::Io
            }
        }
    }

    fn pfs(&mut self, m: usize) -> Result<pfs::Client, FsError> {
        if DEAD[m].load(Ordering::SeqCst) && self.mounts[m].alive {
            println!(
                "vfs: mount {} lost its file system",
                core::str::from_utf8(&self.mounts[m].prefix).unwrap_or("?")
            );
            self.mounts[m].alive = false;
            self.version += 1;
        }
        // Once the watch thread has seen the death, or a call found the PFS dead (`revive`
        // then waits for the watch thread): never for a mount that could not be used from
        // the start, whose PFS lives.
        if !self.mounts[m].alive
            && self.mounts[m].restarts
            && (DEAD[m].load(Ordering::SeqCst) || self.mounts[m].lost)
        {
            self.mounts[m].lost = false;
            self.revive(m);
        }
        if self.mounts[m].alive {
            Ok(pfs::Client::new(self.mounts[m].pfs.ep))
        } else {
            Err(FsError::Gone)
        }
    }

    /// Tells mount `i`'s file system where others are mounted inside it: an option-3 walk at
    /// a PFS stops there (Xdev) and the client comes to us, who cross mounts exactly.
    fn cover_mounts(&mut self, i: usize) {
        for j in 0..self.mounts.len() {
            let (a, b) = (&self.mounts[i], &self.mounts[j]);
            if i == j
                || !a.alive
                || b.comps.len() <= a.comps.len()
                || !b.comps.starts_with(&a.comps)
            {
                continue;
            }
            let rel = b.comps[a.comps.len()..].join(&b'/');
            if let Err(e) = a.pfs.cover(&rel) {
                println!(
                    "vfs: FAIL telling mount {} about mount {}: {:?}",
                    core::str::from_utf8(&a.prefix).unwrap_or("?"),
                    core::str::from_utf8(&b.prefix).unwrap_or("?"),
                    e
                );
            }
        }
    }

    /// Mount `m`'s PFS died and restarts (issue 16): waits (up to RESTART_WAIT_MS) until the
    /// watch thread has seen the death (root destroyed the dead one's endpoint) and the new incarnation answers on the
    /// manifest slot (root put its endpoint there), then connects to it as at boot. The
    /// sessions made for clients with the dead one are gone: they ask `mount` again. The
    /// version changes, so option-3 clients refetch the table. Requests wait meanwhile: a client
    /// of a restarting file system sees a pause, not an error.
    fn revive(&mut self, m: usize) {
        let khz = sawmill_rt::clock::Wall::get().khz.max(1);
        let deadline = sys::rdtsc() + sawmill_vfs_api::RESTART_WAIT_MS * khz;
        let timer = self.timer;
        let pause = |timer: Option<u64>| {
            let now = sys::rdtsc();
            if let Some(t) = timer {
                let _ = sys::notify_wait_until(t, (now + 10 * khz).min(deadline));
            }
            sys::rdtsc() < deadline
        };
        // The watch thread first sees the death (and drops our capability to the dead
        // incarnation), so nothing of it is mistaken for the new one.
        while !DEAD[m].load(Ordering::SeqCst) {
            if !pause(timer) {
                break;
            }
        }
        let ep = self.mounts[m].manifest_ep;
        // The watch thread never reported the death: give up, as before.
        let r = if !DEAD[m].load(Ordering::SeqCst) {
            None
        } else {
            loop {
                match connect_pfs(m, ep, &mut self.free_slots) {
                    Ok(c) => break Some(c),
                    // An application error is an answer: the new incarnation is there but
                    // refuses; anything else is a slot not yet refilled or an incarnation that
                    // died again: wait.
                    Err(RpcError::App(e)) => {
                        println!("vfs: the restarted file system refuses: {:?}", e);
                        if CONN[m].load(Ordering::SeqCst) != 0 {
                            // Connected, but it will not serve: still watched, so its death is
                            // seen and the next incarnation tried.
                            let _ = sys::notify_signal(self.mounts[m].go, 1);
                        }
                        break None;
                    }
                    // No incarnation there yet, or the one we connected to died before it
                    // answered `root`/`getattr`. The watch thread waits for `go` meanwhile, so only
                    // we can see that death: its capability goes and the next incarnation is tried
                    // (once this gave up, and a PFS killed twice within a reconnect left its mount
                    // dead: `pfs-restart` under load).
                    Err(_) => {
                        forget_connection(m, &mut self.free_slots);
                        // Dead until one connects (`connect_pfs` cleared it).
                        DEAD[m].store(true, Ordering::SeqCst);
                        if !pause(timer) {
                            break None;
                        }
                    }
                }
            }
        };
        // The dead incarnation's endpoint slot, emptied by the watch thread.
        let freed = FREED[m].swap(0, Ordering::SeqCst);
        if freed != 0 {
            self.free_slots.push(freed);
        }
        let Some((p, root, attr)) = r else {
            println!(
                "vfs: mount {}: its file system did not come back",
                core::str::from_utf8(&self.mounts[m].prefix).unwrap_or("?")
            );
            return;
        };
        // The dead one's sessions: their capabilities were revoked with its endpoint.
        let mut k = 0;
        while k < self.sessions.len() {
            if self.sessions[k].0 == m {
                let (_, _, slot) = self.sessions.swap_remove(k);
                let _ = sys::cap_delete(slot);
                self.free_slots.push(slot);
            } else {
                k += 1;
            }
        }
        let old = core::mem::replace(&mut self.mounts[m].pfs, p);
        // Usually the slot the watch thread emptied (`freed`, already reused): never twice.
        if old.ep != 0 && old.ep != freed {
            let _ = sys::cap_delete(old.ep);
            self.free_slots.push(old.ep);
        }
        self.mounts[m].root = root;
        self.mounts[m].root_attr = attr;
        self.mounts[m].alive = true;
        self.version += 1;
        // The watch thread watches the new incarnation.
        let _ = sys::notify_signal(self.mounts[m].go, 1);
        self.cover_mounts(m);
        println!(
            "vfs: mount {} is back: connected to the restarted file system",
            core::str::from_utf8(&self.mounts[m].prefix).unwrap_or("?")
        );
    }

    fn root_pos(&self, m: usize) -> Pos {
        Pos {
            m,
            ino: self.mounts[m].root,
            attr: self.mounts[m].root_attr,
        }
    }

    /// The mount whose prefix is exactly `comps`, if any (the most recent one wins).
    fn mount_at(&self, comps: &[Vec<u8>]) -> Option<usize> {
        (0..self.mounts.len())
            .rev()
            .find(|&i| self.mounts[i].comps == comps)
    }

    /// Resolves an absolute path with the caller's credentials (search permission on every
    /// directory on the way), across mounts (see the `Tree` impl).
    fn resolve(&mut self, badge: u64, path: &[u8], follow: bool) -> Result<Resolved, FsError> {
        let (uid, gid) = self.cred(badge);
        if path.first() != Some(&b'/') {
            return Err(FsError::Invalid);
        }
        let mut w = Walker::new();
        let root = self.root_pos(0);
        let r = w.walk(self, root, path, follow, Some(Cred { uid, gid }))?;
        Ok(Resolved {
            parent: r.parent,
            node: r.node,
            name: w.name().to_vec(),
            dir_only: r.dir_only,
        })
    }

    /// The session capability of mount `m`'s PFS for the client `badge` (made once, then kept).
    fn session(&mut self, m: usize, badge: u64) -> Result<u64, Option<RpcError<FsError>>> {
        // A dead mount first: a restarting one is connected again (and its old sessions go).
        if DEAD[m].load(Ordering::SeqCst) || !self.mounts[m].alive {
            self.pfs(m).map_err(|_| None)?;
        }
        if let Some(s) = self.sessions.iter().find(|s| (s.0, s.1) == (m, badge)) {
            return Ok(s.2);
        }
        if self.sessions.len() >= MAX_SESSIONS {
            return Err(None);
        }
        let (uid, gid) = self.cred(badge);
        let rx = self.slot();
        let p = self.pfs(m).map_err(|_| None)?;
        match p.session(uid, gid, rx) {
            Ok(s) => {
                self.sessions.push((m, badge, s));
                Ok(s)
            }
            Err(e) => {
                self.free_slots.push(rx);
                Err(Some(e))
            }
        }
    }

    /// Opens an existing file in one call to the PFS that holds it: the PFS walks the path inside
    /// its file system with the client's credentials (`open_path`, as protocol option 3 does
    /// from the library). Anything it cannot finish alone — `..` in the path, a place where
    /// another file system is mounted, an absolute symlink, a dead mount — comes back as None,
    /// and the caller resolves exactly, component by component. Its other answers are final:
    /// it walks with the same walker and limits as `resolve` (`sawmill_path`).
    fn open_direct(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
    ) -> Option<Result<OpenOut, FsError>> {
        let (m, s, rest) = match self.direct_route(badge, path)? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let rx = self.slot();
        let r = pfs::Client::new(s).open_path(
            &rest,
            flags - (OpenFlags::CREATE | OpenFlags::EXCL),
            0,
            rx,
        );
        self.route = rest;
        match r {
            Ok(o) => {
                self.after.delete(rx);
                Some(Ok(OpenOut {
                    file: o.file,
                    size: o.size,
                    mount: m as u32,
                    ino: o.ino,
                    generation: o.generation,
                }))
            }
            Err(RpcError::App(e)) if e != FsError::Xdev => {
                self.free_slots.push(rx);
                Some(Err(e))
            }
            Err(_) => {
                self.free_slots.push(rx);
                None
            }
        }
    }

    /// Where `open_direct` sends `path`: the mount, the client's session capability to its
    /// PFS and the path inside it (in the `route` buffer, which the caller puts back). None: the
    /// path needs the exact walk (`resolve`).
    #[allow(clippy::type_complexity)]
    fn direct_route(
        &mut self,
        badge: u64,
        path: &[u8],
    ) -> Option<Result<(usize, u64, Vec<u8>), FsError>> {
        let (uid, gid) = self.cred(badge);
        if path.first() != Some(&b'/') {
            return None;
        }
        // The path's components, walked again where needed instead of collected: this runs on
        // every open, and allocations were a third of the VFS's part of one.
        let comps = || {
            path.split(|&c| c == b'/')
                .filter(|c| !c.is_empty() && *c != b".")
        };
        if comps().any(|c| c == b"..") {
            return None;
        }
        // The mount the path lies in: the longest prefix, the most recent of equal ones.
        let mut best: Option<usize> = None;
        for (i, mt) in self.mounts.iter().enumerate() {
            let mut it = comps();
            let under = mt.comps.iter().all(|a| it.next() == Some(&a[..]));
            if under && best.is_none_or(|b| mt.comps.len() >= self.mounts[b].comps.len()) {
                best = Some(i);
            }
        }
        let m = best?;
        if !self.mounts[m].alive {
            return None;
        }
        // The directories passed on the way to that mount's root must be searchable: only mount
        // roots (whose attributes we keep) are handled here.
        for k in 0..self.mounts[m].comps.len() {
            let pm = self.mount_at(&self.mounts[m].comps[..k])?;
            if !may(self.mounts[pm].root_attr, uid, gid, 1) {
                return Some(Err(FsError::Denied));
            }
        }
        let s = self.session(m, badge).ok()?;
        // Into the kept buffer (the caller gives it back), so no allocation once it has grown.
        let mut rest = core::mem::take(&mut self.route);
        rest.clear();
        for c in comps().skip(self.mounts[m].comps.len()) {
            if !rest.is_empty() {
                rest.push(b'/');
            }
            rest.extend_from_slice(c);
        }
        // A trailing slash says the path must name a directory: the PFS's walk checks that.
        if path.ends_with(b"/") {
            rest.push(b'/');
        }
        Some(Ok((m, s, rest)))
    }

    fn parent_for_change(&mut self, badge: u64, path: &[u8]) -> Result<Resolved, FsError> {
        let r = self.resolve(badge, path, false)?;
        let (uid, gid) = self.cred(badge);
        if r.name.is_empty() {
            return Err(FsError::Invalid);
        }
        if !may(r.parent.attr, uid, gid, 3) {
            return Err(FsError::Denied);
        }
        Ok(r)
    }
}

impl Vfs {
    /// `vfs.open` of a path already taken from the staging buffer.
    fn open_path(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
    ) -> Result<OpenOut, FsError> {
        if !flags.contains(OpenFlags::CREATE) {
            if let Some(r) = self.open_direct(badge, path, flags) {
                return r;
            }
        }
        let (uid, gid) = self.cred(badge);
        let r = self.resolve(badge, path, true)?;
        let (pos, created) = match r.node {
            Some(n) => {
                if flags.contains(OpenFlags::CREATE | OpenFlags::EXCL) {
                    return Err(FsError::Exists);
                }
                (n, false)
            }
            // A name with a slash after it may only become a directory.
            None if flags.contains(OpenFlags::CREATE) && r.dir_only => return Err(FsError::IsDir),
            None if flags.contains(OpenFlags::CREATE) => {
                if !may(r.parent.attr, uid, gid, 3) {
                    return Err(FsError::Denied);
                }
                let p = self.pfs(r.parent.m)?;
                let ino = p
                    // A socket's type goes on (`bind` of a local socket makes its inode).
                    .create(
                        r.parent.ino,
                        &r.name,
                        mode & (0o7777 | socket_type(mode)),
                        uid,
                        gid,
                    )
                    .map_err(|e| self.fail(r.parent.m, e))?;
                (
                    Pos {
                        m: r.parent.m,
                        ino,
                        attr: (S_IFREG | (mode & 0o7777), uid, gid),
                    },
                    true,
                )
            }
            None => return Err(FsError::NotFound),
        };
        let want = if flags.contains(OpenFlags::READ) {
            4
        } else {
            0
        } | if flags.intersects(OpenFlags::WRITE | OpenFlags::TRUNC) {
            2
        } else {
            0
        };
        if !created && !may(pos.attr, uid, gid, want) {
            return Err(FsError::Denied);
        }
        // Charged to the client's own session at the PFS (which checks access with the same
        // credentials); a file we just created is opened as the VFS (its mode may deny even its
        // creator, as POSIX allows for the creating open) and charged to our share.
        let mut p = self.pfs(pos.m)?;
        if !created {
            if let Ok(s) = self.session(pos.m, badge) {
                p = pfs::Client::new(s);
            }
        }
        let rx = self.slot();
        match p.open(pos.ino, flags - (OpenFlags::CREATE | OpenFlags::EXCL), rx) {
            Ok(o) => {
                self.after.delete(rx);
                Ok(OpenOut {
                    file: o.file,
                    size: o.size,
                    mount: pos.m as u32,
                    ino: o.ino,
                    generation: o.generation,
                })
            }
            Err(e) => {
                self.free_slots.push(rx);
                Err(self.fail(pos.m, e))
            }
        }
    }
}

impl vfs::Server for Vfs {
    fn open(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
    ) -> Result<OpenOut, FsError> {
        path_arg!(self, badge, path);
        // Issue 16: a PFS that answered garbage (a fault, not a death: `fail`) did not do that
        // request; an open that is safe to repeat (not CREATE|EXCL) is tried once more, so
        // the client sees nothing.
        self.garbled = false;
        match self.open_path(badge, path, flags, mode) {
            Err(FsError::Io)
                if self.garbled && !flags.contains(OpenFlags::CREATE | OpenFlags::EXCL) =>
            {
                self.open_path(badge, path, flags, mode)
            }
            r => r,
        }
    }
    fn stat(&mut self, badge: u64, path: &[u8], follow: bool) -> Result<StatOut, FsError> {
        path_arg!(self, badge, path);
        let r = self.resolve(badge, path, follow)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        let a = self
            .pfs(n.m)?
            .getattr(n.ino)
            .map_err(|e| self.fail(n.m, e))?;
        Ok(StatOut {
            ino: n.ino,
            mode: a.mode,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            blocks: a.blocks,
            rdev_major: a.rdev_major,
            rdev_minor: a.rdev_minor,
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns,
            ctime_ns: a.ctime_ns,
            generation: a.generation,
            mount: n.m as u32,
        })
    }
    fn mkdir(&mut self, badge: u64, path: &[u8], mode: u32) -> Result<(), FsError> {
        path_arg!(self, badge, path);
        let (uid, gid) = self.cred(badge);
        let r = self.parent_for_change(badge, path)?;
        if r.node.is_some() {
            return Err(FsError::Exists);
        }
        self.pfs(r.parent.m)?
            .mkdir(r.parent.ino, &r.name, mode & 0o7777, uid, gid)
            .map(|_| ())
            .map_err(|e| self.fail(r.parent.m, e))
    }
    fn rmdir(&mut self, badge: u64, path: &[u8]) -> Result<(), FsError> {
        path_arg!(self, badge, path);
        let r = self.parent_for_change(badge, path)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        if n.m != r.parent.m {
            return Err(FsError::Invalid); // a mount point
        }
        self.pfs(r.parent.m)?
            .rmdir(r.parent.ino, &r.name)
            .map_err(|e| self.fail(r.parent.m, e))
    }
    fn unlink(&mut self, badge: u64, path: &[u8]) -> Result<(), FsError> {
        path_arg!(self, badge, path);
        let r = self.parent_for_change(badge, path)?;
        r.node.ok_or(FsError::NotFound)?;
        self.pfs(r.parent.m)?
            .unlink(r.parent.ino, &r.name)
            .map_err(|e| self.fail(r.parent.m, e))
    }
    fn rename(
        &mut self,
        badge: u64,
        from: &[u8],
        to: &[u8],
        flags: RenameFlags,
    ) -> Result<(), FsError> {
        path_arg!(self, badge, from);
        path_arg!(self, badge, to);
        let a = self.parent_for_change(badge, from)?;
        a.node.ok_or(FsError::NotFound)?;
        let b = self.parent_for_change(badge, to)?;
        if a.parent.m != b.parent.m {
            return Err(FsError::Xdev);
        }
        self.pfs(a.parent.m)?
            .rename([a.parent.ino, b.parent.ino], &a.name, &b.name, flags)
            .map_err(|e| self.fail(a.parent.m, e))
    }
    fn symlink(&mut self, badge: u64, target: &[u8], path: &[u8]) -> Result<(), FsError> {
        path_arg!(self, badge, target);
        path_arg!(self, badge, path);
        let (uid, gid) = self.cred(badge);
        let r = self.parent_for_change(badge, path)?;
        if r.node.is_some() {
            return Err(FsError::Exists);
        }
        if r.name.len() > 200 {
            return Err(FsError::NameTooLong);
        }
        self.pfs(r.parent.m)?
            .symlink(r.parent.ino, &r.name, target, uid, gid)
            .map(|_| ())
            .map_err(|e| self.fail(r.parent.m, e))
    }
    fn readlink(&mut self, badge: u64, path: &[u8]) -> Result<Bytes<256>, FsError> {
        path_arg!(self, badge, path);
        let r = self.resolve(badge, path, false)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        self.pfs(n.m)?
            .readlink(n.ino)
            .map_err(|e| self.fail(n.m, e))
    }
    fn chmod(&mut self, badge: u64, path: &[u8], mode: u32) -> Result<(), FsError> {
        self.setattr(badge, path, true, mode, 0, 0, 0, 0, SetAttrFields::MODE)
    }
    fn truncate(&mut self, badge: u64, path: &[u8], size: u64) -> Result<(), FsError> {
        path_arg!(self, badge, path);
        let (uid, gid) = self.cred(badge);
        let r = self.resolve(badge, path, true)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        if !may(n.attr, uid, gid, 2) {
            return Err(FsError::Denied);
        }
        self.pfs(n.m)?
            .truncate(n.ino, size)
            .map_err(|e| self.fail(n.m, e))
    }
    fn readdir(&mut self, badge: u64, path: &[u8], cookie: u64) -> Result<ReaddirOut, FsError> {
        path_arg!(self, badge, path);
        let (uid, gid) = self.cred(badge);
        let r = self.resolve(badge, path, true)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        if !may(n.attr, uid, gid, 4) {
            return Err(FsError::Denied);
        }
        let o = self
            .pfs(n.m)?
            .readdir(n.ino, cookie)
            .map_err(|e| self.fail(n.m, e))?;
        Ok(ReaddirOut {
            next: o.next,
            ino: o.ino,
            kind: o.kind,
            name: o.name,
        })
    }
    fn readdir_many(
        &mut self,
        badge: u64,
        path: &[u8],
        cookie: u64,
    ) -> Result<vfs::ReaddirManyOut, FsError> {
        path_arg!(self, badge, path);
        let (uid, gid) = self.cred(badge);
        let r = self.resolve(badge, path, true)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        if !may(n.attr, uid, gid, 4) {
            return Err(FsError::Denied);
        }
        // The entries pass through as the PFS packed them; the client checks them.
        let o = self
            .pfs(n.m)?
            .readdir_many(n.ino, cookie)
            .map_err(|e| self.fail(n.m, e))?;
        Ok(vfs::ReaddirManyOut {
            next: o.next,
            packed: o.packed,
        })
    }
    fn sync(&mut self, _badge: u64) -> Result<(), FsError> {
        let mut res = Ok(());
        for m in 0..self.mounts.len() {
            if let Ok(p) = self.pfs(m) {
                if let Err(e) = p.sync() {
                    res = Err(self.fail(m, e));
                }
            }
        }
        res
    }
    fn mounts(&mut self, _badge: u64) -> Result<MountsOut, FsError> {
        Ok(MountsOut {
            version: self.version,
            count: self.mounts.len() as u32,
        })
    }
    fn mount(&mut self, badge: u64, i: u32) -> Result<MountOut, FsError> {
        let m = i as usize;
        if m >= self.mounts.len() {
            return Err(FsError::NotFound);
        }
        self.pfs(m)?;
        let s = match self.session(m, badge) {
            Ok(s) => s,
            Err(Some(e)) => return Err(self.fail(m, e)),
            Err(None) => return Err(FsError::NoSpace),
        };
        // The client gets a copy of its session; ours stays for its opens through us.
        let c = self.slot();
        if sys::cap_copy(s, c).is_err() {
            self.free_slots.push(c);
            return Err(FsError::NoSpace);
        }
        self.after.delete(c);
        Ok(MountOut {
            version: self.version,
            prefix: Bytes::from_slice(&self.mounts[m].prefix).unwrap_or_default(),
            s: c,
        })
    }
    fn stage(&mut self, badge: u64, slot: u32, off: u32, chunk: &[u8]) -> Result<(), FsError> {
        let end = off as usize + chunk.len();
        if slot >= STAGE_SLOTS || end > STAGE_MAX as usize {
            return Err(FsError::NameTooLong);
        }
        let i = match self.staged.iter().position(|s| (s.0, s.1) == (badge, slot)) {
            Some(i) => i,
            None => {
                if self.staged.len() >= MAX_STAGED {
                    self.staged.remove(0);
                }
                self.staged.push((badge, slot, Vec::new()));
                self.staged.len() - 1
            }
        };
        let buf = &mut self.staged[i].2;
        if off as usize > buf.len() {
            return Err(FsError::Invalid);
        }
        buf.truncate(off as usize);
        buf.extend_from_slice(chunk);
        Ok(())
    }
    fn link(&mut self, badge: u64, from: &[u8], to: &[u8]) -> Result<(), FsError> {
        path_arg!(self, badge, from);
        path_arg!(self, badge, to);
        let a = self.resolve(badge, from, false)?;
        let src = a.node.ok_or(FsError::NotFound)?;
        let b = self.parent_for_change(badge, to)?;
        if b.node.is_some() {
            return Err(FsError::Exists);
        }
        if src.m != b.parent.m {
            return Err(FsError::Xdev);
        }
        self.pfs(src.m)?
            .link(src.ino, b.parent.ino, &b.name)
            .map_err(|e| self.fail(src.m, e))
    }
    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &mut self,
        badge: u64,
        path: &[u8],
        follow: bool,
        mode: u32,
        uid: u32,
        gid: u32,
        atime: u32,
        mtime: u32,
        which: SetAttrFields,
    ) -> Result<(), FsError> {
        path_arg!(self, badge, path);
        let (cu, cg) = self.cred(badge);
        let r = self.resolve(badge, path, follow)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        let attr = Attr {
            mode: n.attr.0,
            uid: n.attr.1,
            gid: n.attr.2,
        };
        sawmill_interfaces::may_setattr(attr, Some(Cred { uid: cu, gid: cg }), which, uid, gid)?;
        self.pfs(n.m)?
            .setattr(n.ino, mode & 0o7777, uid, gid, atime, mtime, which)
            .map_err(|e| self.fail(n.m, e))
    }
    fn statfs(&mut self, badge: u64, path: &[u8]) -> Result<StatfsOut, FsError> {
        path_arg!(self, badge, path);
        let r = self.resolve(badge, path, true)?;
        let n = r.node.ok_or(FsError::NotFound)?;
        let s = self.pfs(n.m)?.statfs().map_err(|e| self.fail(n.m, e))?;
        Ok(StatfsOut {
            bsize: s.bsize,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namelen: s.namelen,
        })
    }
    fn crash(&mut self, badge: u64, mount: u32) -> Result<(), FsError> {
        if !self.admins.contains(&badge) {
            return Err(FsError::Denied);
        }
        let m = mount as usize;
        if m >= self.mounts.len() {
            return Err(FsError::NotFound);
        }
        let p = self.pfs(m)?;
        // The PFS dies without answering: our call fails, and the mount is marked dead.
        let e = p.crash().err();
        if let Some(e) = e {
            let _ = self.fail(m, e);
        }
        Ok(())
    }
    fn reopen(
        &mut self,
        badge: u64,
        path: &[u8],
        flags: OpenFlags,
        mode: u32,
        mount: u32,
        file: u64,
    ) -> Result<vfs::ReopenOut, FsError> {
        if flags.intersects(OpenFlags::CREATE | OpenFlags::EXCL) {
            return Err(FsError::Invalid);
        }
        path_arg!(self, badge, path);
        let (m, _, rest) = match self.direct_route(badge, path) {
            Some(r) => r?,
            None => return Err(FsError::Xdev),
        };
        if m as u32 != mount {
            self.route = rest;
            return Err(FsError::Xdev);
        }
        // The capability is ours for this call only (the dispatch deletes it after us).
        let r = sawmill_interfaces::file::Client::new(file).reopen(&rest, flags, mode);
        self.route = rest;
        match r {
            Ok(o) => Ok(vfs::ReopenOut {
                size: o.size,
                ino: o.ino,
                generation: o.generation,
            }),
            Err(RpcError::App(e)) => Err(e),
            Err(_) => Err(FsError::Gone),
        }
    }
}

impl rpc::Serve for Vfs {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        vfs::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn slot_freed(&mut self, slot: u64) {
        self.free_slots.push(slot);
    }
}

fn main() {
    let mut v = Vfs {
        mounts: Vec::new(),
        timer: thread::create(ObjKind::Notification, 0).ok(),
        creds: Vec::new(),
        admins: Vec::new(),
        version: 1,
        free_slots: Vec::new(),
        sessions: Vec::new(),
        after: AfterReply::new(),
        staged: Vec::new(),
        route: Vec::new(),
        garbled: false,
    };
    let cfg: sawmill_vfs_api::Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("vfs: FAIL config: {}", e);
            return;
        }
    };
    v.creds = cfg
        .creds
        .iter()
        .map(|c| (c.client.badge, c.uid, c.gid))
        .collect();
    v.admins = cfg.admins.iter().map(|a| a.badge).collect();
    for mnt in &cfg.mounts {
        let (prefix, ep_name) = (mnt.path.as_str(), mnt.pfs.name.as_str());
        let Some(ep) = env::cap(ep_name) else {
            println!("vfs: FAIL no endpoint {}", ep_name);
            continue;
        };
        if v.mounts.len() >= MAX_MOUNTS {
            println!("vfs: FAIL too many mounts");
            break;
        }
        let mi = v.mounts.len();
        let go = thread::create(ObjKind::Notification, 0).expect("notification (kmem_kb)");
        let connected = connect_at_start(mi, ep, mnt.restarts, &mut v.free_slots, v.timer);
        if CONN[mi].load(Ordering::SeqCst) != 0 {
            thread::spawn(254, 8192, move || watch(mi, ep, go)).expect("watch thread");
        }
        let (p, root, attr, alive) = match connected {
            Ok((p, r, a)) => (p, r, a, true),
            Err(e @ RpcError::App(_)) => {
                println!("vfs: mount {} unusable: {:?}", prefix, e);
                (pfs::Client::new(0), 0, (0, 0, 0), false)
            }
            Err(e) => {
                println!("vfs: FAIL connecting to {}: {:?}", ep_name, e);
                continue;
            }
        };
        let comps = prefix
            .split('/')
            .filter(|c| !c.is_empty())
            .map(|c| c.as_bytes().to_vec())
            .collect();
        v.mounts.push(Mount {
            prefix: prefix.as_bytes().to_vec(),
            comps,
            pfs: p,
            root,
            root_attr: attr,
            alive,
            manifest_ep: ep,
            restarts: mnt.restarts,
            lost: false,
            go,
        });
        println!("vfs: mounted {} ({})", prefix, ep_name);
    }
    if v.mounts.first().is_none_or(|m| !m.comps.is_empty()) {
        println!("vfs: FAIL the first mount must be /");
        return;
    }
    for i in 0..v.mounts.len() {
        v.cover_mounts(i);
    }
    // `reopen` brings a client's file capability: it lands here, and the dispatch deletes it
    // once the call is done, so the slot is empty again for the next request.
    let file_rx = thread::alloc_slot();
    v.after.receive_into(&[file_rx]);
    let ep = env::cap("vfs").expect("vfs endpoint");
    println!("vfs: ready, {} mounts", v.mounts.len());
    let _ = rpc::serve(ep, &mut v);
}

/// `S_IFSOCK` if `mode` asks for a socket inode (the one type `create` makes besides a regular
/// file), else 0.
fn socket_type(mode: u32) -> u32 {
    if mode & S_IFMT == S_IFSOCK {
        S_IFSOCK
    } else {
        0
    }
}
