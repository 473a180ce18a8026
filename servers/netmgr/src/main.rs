//! The network manager (issue 15; docs/net.md): knows the network stacks and the devices each is
//! bound to from its manifest, holds the access rules (who may bind ports below 1024, who may
//! open raw sockets), and hands a client a capability straight to its stack with the client's
//! rights in the badge (`netmgr.open`; the file system's protocol option 2: after that the client
//! talks to the stack alone, and the stack enforces the rights). The rule itself is host-tested
//! in its api crate (`Config::decide`).
//!
//! It touches only its own endpoint (`netmgr`) and the stacks' endpoints its configuration names
//! (each stack's configuration names netmgr its `manager`, the one caller of `socket.grant`).
//! A restarted driver is re-bound by the stack itself (docs/net.md, "Driver restart"); a restarted
//! stack needs nothing of netmgr (no per-client state: root refreshes its slot).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_interfaces::netmgr::{self, InfoOut};
use sawmill_interfaces::rpc::{self, AfterReply, IpcResult, Next};
use sawmill_interfaces::{socket, NetmgrError};
use sawmill_netmgr_api::{Config, Refusal};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

// The rights bits are socket.idl's; the api crate repeats them for the host.
const _: () = assert!(
    sawmill_netmgr_api::RIGHT_PRIVILEGED_PORTS == sawmill_interfaces::RIGHT_PRIVILEGED_PORTS
);
const _: () = assert!(sawmill_netmgr_api::RIGHT_RAW == sawmill_interfaces::RIGHT_RAW);

struct Netmgr {
    cfg: Config,
    /// Each configured stack's endpoint (our capability), by index; None if it is missing.
    stacks: Vec<Option<u64>>,
    /// Capabilities handed over are deleted once the reply is sent.
    after: AfterReply,
    /// Slots a failed grant left empty.
    free_slots: Vec<u64>,
}

impl netmgr::Server for Netmgr {
    fn open(&mut self, badge: u64, stack: u32, rights: u32) -> Result<u64, NetmgrError> {
        let i = self.cfg.decide(badge, stack, rights).map_err(|r| match r {
            Refusal::NoStack => NetmgrError::NoStack,
            Refusal::Denied => NetmgrError::Denied,
        })?;
        let ep = self.stacks[i].ok_or(NetmgrError::NoStack)?;
        // Manifest badges are small numbers: one that does not fit cannot name a client.
        let client = u32::try_from(badge).map_err(|_| NetmgrError::Invalid)?;
        let slot = self.free_slots.pop().unwrap_or_else(thread::alloc_slot);
        if socket::Client::new(ep).grant(client, rights, slot).is_err() {
            self.free_slots.push(slot);
            return Err(NetmgrError::StackFailed);
        }
        self.after.delete(slot);
        Ok(slot)
    }

    fn info(&mut self, badge: u64) -> Result<InfoOut, NetmgrError> {
        Ok(InfoOut {
            stacks: self.cfg.stacks.len() as u32,
            rights: self.cfg.allowed(badge),
        })
    }
}

impl rpc::Serve for Netmgr {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        netmgr::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

fn main() {
    let Some(ep) = env::cap(netmgr::NAME) else {
        println!("netmgr: FAIL no `{}` endpoint", netmgr::NAME);
        return;
    };
    let cfg: Config = match env::config() {
        Ok(c) => c,
        Err(e) => {
            println!("netmgr: FAIL bad configuration: {:?}", e);
            return;
        }
    };
    let stacks: Vec<Option<u64>> = cfg
        .stacks
        .iter()
        .map(|s| {
            let c = env::cap(&s.stack.name);
            if c.is_none() {
                println!("netmgr: no capability for stack `{}`", s.stack.name);
            }
            c
        })
        .collect();
    println!(
        "netmgr: serving {} stack(s), {} rule(s)",
        stacks.len(),
        cfg.rules.len()
    );
    let mut state = Netmgr {
        cfg,
        stacks,
        after: AfterReply::new(),
        free_slots: Vec::new(),
    };
    let _ = rpc::serve(ep, &mut state);
}
