//! Reference server: the hand-written `add` loop of bench_raw_server.
#![no_std]
#![no_main]
use sawmill_rt::env;

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("echo").expect("echo endpoint");
    // SAFETY: the loop only makes IPC system calls on our own endpoint.
    unsafe { sawmill_benchprogs::bench_raw_server(ep) }
}
