//! The client of the template server (servers/template, systems/tests/template.toml): adds to
//! the running total through the generated stub, checks the answers, an overflow refused with
//! the interface's error, and a malformed request answered with a protocol error.
#![no_std]
#![no_main]

use sawmill_abi::MsgTag;
use sawmill_idltest::{check, Checker};
use sawmill_interfaces::rpc::{proto, Error};
use sawmill_interfaces::{template, TemplateError};
use sawmill_rt::{env, ipc, println};

sawmill_rt::entry!(main);

fn main() {
    let mut c = Checker::new("template-client");
    let Some(ep) = env::cap(template::NAME) else {
        println!("template-client: FAIL no `{}` endpoint", template::NAME);
        sawmill_rt::exit(1)
    };
    let t = template::Client::new(ep);
    check!(c, t.add(2), Ok(2));
    check!(c, t.add(40), Ok(42));
    // Past u64::MAX: the interface's error, and the total is unchanged.
    check!(c, t.add(u64::MAX), Err(Error::App(TemplateError::Overflow)));
    check!(c, t.add(0), Ok(42));
    // An opcode the interface does not have, and `add` with a wrong word count.
    let r = ipc::call(ep, MsgTag::new(0x77, 0), [0; 4]);
    check!(c, (r.err, r.tag.label()), (0, proto::BAD_OPCODE));
    let r = ipc::call(ep, MsgTag::new(template::op::ADD, 3), [1, 2, 3, 0]);
    check!(c, (r.err, r.tag.label()), (0, proto::BAD_SHAPE));
    check!(c, t.add(1), Ok(43));
    c.finish()
}
