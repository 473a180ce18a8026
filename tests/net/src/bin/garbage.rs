#![no_std]
#![no_main]
sawmill_rt::entry!(main);
fn main() {}
