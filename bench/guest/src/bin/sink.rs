//! Receiver of one-way messages: waits, takes a message, waits again.
#![no_std]
#![no_main]
use sawmill_rt::{env, ipc};

sawmill_rt::entry!(main);

fn main() {
    let ep = env::cap("sink").expect("sink endpoint");
    loop {
        let _ = ipc::recv(ep, 0);
    }
}
