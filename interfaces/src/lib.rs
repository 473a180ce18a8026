//! Every sawmill interface, generated at build time from `interfaces/*.idl` by `sawmill-idlc`
//! (see `docs/idl.md`): one module per interface with a `Client`, a `Server` trait, `dispatch`
//! and `serve`, plus the error types the files declare. Nothing generated is checked in.
#![no_std]

pub mod rpc;

include!(concat!(env!("OUT_DIR"), "/interfaces.rs"));
