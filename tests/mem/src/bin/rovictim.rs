//! mem-rovictim: attaches a dataspace read-only and writes to it. Its region manager refuses the
//! write and reports the thread; root ends the task. Nothing else is disturbed.
#![no_std]
#![no_main]
use sawmill_rm as rm;
use sawmill_rt::{println, thread};

sawmill_rt::entry!(main);

fn main() {
    rm::init().expect("rm init");
    let mem = rm::mem().expect("mem");
    let ds = mem.alloc(4096, 0, thread::alloc_slot()).expect("alloc");
    let a = rm::attach(ds, 0, 4096, None, rm::READ).expect("attach");
    // SAFETY: attached read-only: the read is resolved, the write is refused (the test).
    let v = unsafe { core::ptr::read_volatile(a as *const u64) };
    println!(
        "mem-rovictim: read {} from the read-only region; now writing",
        v
    );
    // SAFETY: see above; this write must end the task.
    unsafe { core::ptr::write_volatile(a as *mut u64, 1) };
    println!("mem-rovictim: FAIL the write to a read-only region went through");
}
