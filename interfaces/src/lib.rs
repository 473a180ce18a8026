//! Every sawmill interface, generated at build time from `interfaces/*.idl` by `sawmill-idlc`
//! (see `docs/idl.md`): one module per interface with a `Client`, a `Server` trait, `dispatch`
//! and `serve`, plus the error types the files declare. Nothing generated is checked in.
#![no_std]

pub mod rpc;

include!(concat!(env!("OUT_DIR"), "/interfaces.rs"));

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
