//! Every sawmill interface, generated at build time from `interfaces/*.idl` by `sawmill-idlc`
//! (see `docs/idl.md`): one module per interface with a `Client`, a `Server` trait, `dispatch`
//! and `serve`, plus the error types the files declare. Nothing generated is checked in.
#![no_std]

pub mod rpc;

include!(concat!(env!("OUT_DIR"), "/interfaces.rs"));

/// Whether a caller with `cred` (None: the VFS, which checked) may make the attribute change
/// `which` (with the new `uid`, `gid`) to an inode with `attr`: the one rule of `setattr` for
/// every file-system server, Linux's without supplementary groups. Root may do anything; uid
/// changes need root (setting the same uid is allowed); gid changes need the owner, to the
/// owner's own group or the current one; mode and explicit times need the owner; both times
/// set to now also write permission.
pub fn may_setattr(
    attr: sawmill_path::Attr,
    cred: Option<sawmill_path::Cred>,
    which: SetAttrFields,
    uid: u32,
    gid: u32,
) -> Result<(), FsError> {
    let Some(c) = cred else { return Ok(()) };
    if c.uid == 0 {
        return Ok(());
    }
    let owner = c.uid == attr.uid;
    if which.contains(SetAttrFields::UID) && uid != attr.uid {
        return Err(FsError::NotPermitted);
    }
    if which.contains(SetAttrFields::GID) && (!owner || (gid != attr.gid && gid != c.gid)) {
        return Err(FsError::NotPermitted);
    }
    if which.intersects(SetAttrFields::MODE | SetAttrFields::ATIME | SetAttrFields::MTIME) && !owner
    {
        return Err(FsError::NotPermitted);
    }
    if which.intersects(SetAttrFields::ATIME_NOW | SetAttrFields::MTIME_NOW)
        && !owner
        && !sawmill_path::may(attr, c, sawmill_path::MAY_WRITE)
    {
        return Err(FsError::Denied);
    }
    Ok(())
}

/// A path walk's refusal (`lib/path`, the walker every file-system server uses) as the file-system
/// protocol's error.
impl From<sawmill_path::Error> for FsError {
    fn from(e: sawmill_path::Error) -> FsError {
        match e {
            sawmill_path::Error::NotFound => FsError::NotFound,
            sawmill_path::Error::Denied => FsError::Denied,
            sawmill_path::Error::NotDir => FsError::NotDir,
            sawmill_path::Error::NameTooLong => FsError::NameTooLong,
            sawmill_path::Error::Loop => FsError::Loop,
        }
    }
}

// `dataspace.map`'s rights are the kernel's map rights (interfaces/dataspace.idl): a manager
// passes them on to the kernel's map item as they are.
const _: () = assert!(
    MapFlags::READ.bits() == sawmill_abi::map::READ
        && MapFlags::WRITE.bits() == sawmill_abi::map::WRITE
        && MapFlags::EXEC.bits() == sawmill_abi::map::EXEC
);

pub mod pfs_manifest;
