//! What the virtio-net driver (`net-virtio`) and a network stack agree on besides their
//! protocol (`interfaces/net.idl`): the session memory they share, in [`session`]. Plain code
//! over memory it is given; it touches nothing else. The driver has no manifest settings.
#![no_std]

#[cfg(test)]
extern crate std;

pub mod session;
