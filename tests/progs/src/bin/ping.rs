//! Client of `pong`: makes calls and checks each answer carries its own badge.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rt::{env, ipc, println};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn main() {
    let ep = sawmill_testprogs::endpoint("pong");
    let badge: u64 = env::arg(0).and_then(|a| a.parse().ok()).unwrap_or(0);
    // A program whose manifest entry has no `config` is told so, not handed a guess.
    let none = env::config::<u32>();
    check!(
        none == Err(env::ConfigError::Missing),
        "config without a config table: {:?}",
        none
    );
    for i in 0..1000u64 {
        let r = ipc::call(ep, MsgTag::new(1, 2), [i, 2 * i, 0, 0]);
        check!(r.err == 0, "call {} failed: {}", i, r.err);
        check!(
            r.w[0] == 3 * i + badge,
            "call {}: got {} want {}",
            i,
            r.w[0],
            3 * i + badge
        );
    }
    println!(
        "{}: PASS 1000 calls answered for badge {}",
        env::name(),
        badge
    );
}
