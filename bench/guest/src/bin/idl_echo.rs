//! The same `add` server through the IDL-generated dispatch and serve loop.
#![no_std]
#![no_main]
use sawmill_interfaces::bench;
use sawmill_interfaces::BenchError;
use sawmill_rt::env;

sawmill_rt::entry!(main);

struct Srv;

impl bench::Server for Srv {
    fn add(&mut self, _badge: u64, a: u64, b: u64) -> Result<u64, BenchError> {
        Ok(a.wrapping_add(b))
    }
}

fn main() {
    let ep = env::cap("echo-idl").expect("echo-idl endpoint");
    bench::serve(ep, &mut Srv)
}
