//! The manifest endpoint of a physical file system once it serves (issue 16): what every PFS's
//! second thread runs after the VFS's first `connect`. It answers two calls, both the VFS's
//! (only the VFS holds the manifest endpoint):
//!
//! - `pfs.watch` is never answered: the kernel answers it (PeerGone) when the PFS dies, which
//!   is how the VFS learns of the death. The thread then receives again; the waiting watcher
//!   stays blocked on it (its reply is owed by this thread until it dies).
//! - `pfs.reconnect`, from a restarted VFS: a VFS_BADGE capability to the endpoint the PFS
//!   serves, which outlives the dead VFS (the PFS and its clients hold it), so open files and
//!   sessions go on untouched.
//!
//! Anything else is refused with `Invalid`. May touch: the manifest endpoint and the served one.
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
