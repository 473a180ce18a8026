//! A client of a server that crashes: its calls must end in an error (PeerGone while being
//! served or queued, BadCap once root revoked the endpoint), never a hang.
#![no_std]
#![no_main]
use sawmill_abi::{Error, MsgTag};
use sawmill_rt::{env, ipc, println};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("pong").expect("pong endpoint");
    let mut ok = 0u64;
    let mut first_err = None;
    for i in 0..100_000u64 {
        let r = ipc::call(ep, MsgTag::new(1, 2), [i, 0, 0, 0]);
        if r.err != 0 {
            first_err = Some(r.err);
            break;
        }
        ok += 1;
    }
    let Some(e) = first_err else {
        println!("{}: FAIL the server never went away", env::name());
        sawmill_rt::exit(1);
    };
    check!(
        e == Error::PeerGone as u64 || e == Error::BadCap as u64,
        "unexpected error {}",
        e
    );
    // Later calls fail at once too.
    let r = ipc::call(ep, MsgTag::new(1, 2), [0; 4]);
    check!(
        r.err == Error::BadCap as u64 || r.err == Error::PeerGone as u64,
        "later call: {}",
        r.err
    );
    println!(
        "{}: PASS {} calls answered, then error {} ({})",
        env::name(),
        ok,
        e,
        Error::from_raw(e).name()
    );
}
