//! mem-bench: guest-instruction counts (rdtsc under `-icount shift=0`) of
//! - `mem.fault.anon`: the first touch of an anonymous page: fault -> region manager thread ->
//!   `dataspace.map` at mem -> map item -> resume;
//! - `mem.cow_fault`: the first write to a page of a `copy` of a dataspace (shared read-only
//!   until then): the same path, with mem copying the page;
//! - `mem.cow_fault.rm`: the first write to a page of a private copy-on-write region (the region
//!   manager copies into its own anonymous page).
//!
//! Each figure is the median of per-page measurements, printed as `BENCH <name> <value> insn`.
#![no_std]
#![no_main]
extern crate alloc;
use alloc::vec::Vec;
use sawmill_interfaces::dataspace;
use sawmill_rm as rm;
use sawmill_rt::{println, sys, thread};

sawmill_rt::entry!(main);

const N: u64 = 256;
const P: u64 = 4096;

fn touch(a: u64) -> u64 {
    let t0 = sys::rdtsc();
    // SAFETY: `a` is in an attached writable region; the write faults (what is measured).
    unsafe { core::ptr::write_volatile(a as *mut u64, 1) };
    sys::rdtsc() - t0
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    rm::init().expect("rm init");
    let mem = rm::mem().expect("mem");
    let ds = mem.alloc(N * P, 0, thread::alloc_slot()).expect("alloc");
    let a = rm::attach(ds, 0, N * P, None, rm::READ | rm::WRITE).unwrap();
    let anon: Vec<u64> = (0..N).map(|i| touch(a + i * P)).collect();
    // Touching a mapped page, for reference (the measurement overhead).
    let base = median((0..N).map(|i| touch(a + i * P)).collect());
    let copy = dataspace::Client::new(ds)
        .copy(thread::alloc_slot())
        .expect("copy");
    let c = rm::attach(copy, 0, N * P, None, rm::READ | rm::WRITE).unwrap();
    let cow: Vec<u64> = (0..N).map(|i| touch(c + i * P)).collect();
    let r = rm::attach(ds, 0, N * P, None, rm::READ | rm::WRITE | rm::COW).unwrap();
    // The first write to a page of the region creates the region's private dataspace: skip it.
    touch(r);
    let rmcow: Vec<u64> = (1..N).map(|i| touch(r + i * P)).collect();
    println!(
        "mem-bench: {} pages each; a write to a mapped page costs {} insn",
        N, base
    );
    println!("BENCH mem.fault.anon {} insn", median(anon));
    println!("BENCH mem.cow_fault {} insn", median(cow));
    println!("BENCH mem.cow_fault.rm {} insn", median(rmcow));
    println!("mem-bench: done");
}
