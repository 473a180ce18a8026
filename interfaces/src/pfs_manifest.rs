//! The manifest endpoint of a physical file system (issue 16): what every PFS's second thread
//! runs from its start. It answers two calls, both the VFS's (only the VFS holds the manifest
//! endpoint):
//!
//! - `pfs.watch` is never answered: the kernel answers it (PeerGone) when the PFS dies, which
//!   is how the VFS learns of the death. The thread then receives again; the waiting watcher
//!   stays blocked on it (its reply is owed by this thread until it dies).
//! - `pfs.reconnect`, from the VFS at boot and from a restarted one: a VFS_BADGE capability to
//!   the endpoint the PFS serves, which outlives a dead VFS, so open files and sessions go on
//!   untouched.
//!
//! Anything else (`connect` too: the VFS's own endpoint is no longer wanted) is refused with
//! `Invalid`. May touch: the manifest endpoint and the served one.
//!
//! The served endpoint is the PFS's own ([`own_endpoint`]): root made it for this incarnation
//! and destroys it when the PFS dies, so every capability the PFS handed out (open files,
//! sessions, the VFS's) fails at once then, after any sequence of VFS and PFS restarts. (It
//! once was the VFS's, made at `connect`: a restarted VFS held no origin of it, so nobody could
//! revoke it when the PFS died later, and a call on a dead PFS's file blocked.)
use crate::pfs;
use crate::rpc::{self, AfterReply, IpcResult, Next, Reply};
use crate::FsError;
use sawmill_abi::rights;
use sawmill_rt::{sys, thread};

struct Manifest {
    /// The endpoint the PFS serves (the capability it kept from `connect`).
    served: u64,
    after: AfterReply,
    /// A slot the post-reply step emptied (one reconnect at a time: one is enough).
    spare: Option<u64>,
}

impl rpc::Serve for Manifest {
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        match m.tag.label() {
            // Owed until we die: the watcher's reply is the kernel's.
            pfs::op::WATCH => next.skip(self),
            pfs::op::RECONNECT => {
                let s = self.spare.take().unwrap_or_else(thread::alloc_slot);
                if sys::cap_mint(self.served, s, pfs::VFS_BADGE, rights::SEND | rights::GRANT)
                    .is_err()
                {
                    return next.reply(self, Reply::error(&FsError::NoSpace));
                }
                rpc::utcb().caps_out[0] = s;
                // Handed over in the reply; our copy goes once it is delivered.
                self.after.delete(s);
                next.reply(
                    self,
                    Reply {
                        tag: sawmill_abi::MsgTag(1 << 24),
                        w: [0; 4],
                    },
                )
            }
            _ => next.reply(self, Reply::error(&FsError::Invalid)),
        }
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn slot_freed(&mut self, slot: u64) {
        self.spare = Some(slot);
    }
}

/// An endpoint that dies with this incarnation (root's `OWN_ENDPOINT_LABEL`), in a fresh slot;
/// None if root refused.
pub fn own_endpoint() -> Option<u64> {
    let slot = thread::alloc_slot();
    rpc::utcb().caps_in[0] = slot;
    let r = sawmill_rt::ipc::call(
        sawmill_rt::slots::PAGER,
        sawmill_abi::MsgTag::new(sawmill_manifest::OWN_ENDPOINT_LABEL, 0),
        [0; 4],
    );
    (r.err == 0 && r.tag.label() == 0 && r.tag.caps() == 1).then_some(slot)
}

/// Serves `manifest_ep` for good (see the module header); `served` is the endpoint the PFS
/// serves, which a restarted VFS gets a capability to.
pub fn serve_manifest(manifest_ep: u64, served: u64) {
    let mut m = Manifest {
        served,
        after: AfterReply::new(),
        spare: None,
    };
    let _ = rpc::serve(manifest_ep, &mut m);
}
