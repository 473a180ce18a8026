//! The template server: a complete sawmill server to copy when adding one. It serves
//! `template` (interfaces/template.idl), a running total that callers add to.
//!
//! It touches only its own state and the endpoint the manifest names `template`.
//! To add a server, follow "How to add a server" in docs/ARCHITECTURE.md.
#![no_std]
#![no_main]

use sawmill_interfaces::rpc::{self, AfterReply, IpcResult, Next};
use sawmill_interfaces::{template, TemplateError};
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

/// The server's state: everything its handlers share.
struct Template {
    total: u64,
    /// Work for after the reply (capabilities handed over, pages lent); unused here.
    after: AfterReply,
}

/// One method per operation of the interface; `badge` names the caller's capability.
impl template::Server for Template {
    fn add(&mut self, _badge: u64, n: u64) -> Result<u64, TemplateError> {
        self.total = self.total.checked_add(n).ok_or(TemplateError::Overflow)?;
        Ok(self.total)
    }
}

/// How the runtime's loop reaches the server: which interface a message is for, and its
/// post-reply list. (A server with one interface and no post-reply work can call
/// `template::serve(ep, &mut state)` instead.)
impl rpc::Serve for Template {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        template::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

fn main() {
    let Some(ep) = env::cap(template::NAME) else {
        println!("template: FAIL no `{}` endpoint", template::NAME);
        return;
    };
    let mut state = Template {
        total: 0,
        after: AfterReply::new(),
    };
    println!("template: serving");
    let _ = rpc::serve(ep, &mut state);
}
