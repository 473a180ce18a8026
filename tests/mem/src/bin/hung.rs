//! mem-hung: attaches mem-hang's dataspace and touches it: its fault waits forever for the
//! manager, and only this task is stuck.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_rm as rm;
use sawmill_rt::{env, ipc, println, thread, utcb};

sawmill_rt::entry!(main);

fn main() {
    rm::init().expect("rm init");
    let hang = env::cap("hang").expect("hang");
    let slot = thread::alloc_slot();
    utcb().caps_in[0] = slot;
    let r = ipc::call(hang, MsgTag::new(0x100, 0), [0; 4]);
    if r.err != 0 || r.tag.caps() != 1 {
        println!("mem-hung: FAIL no dataspace");
        return;
    }
    let a = rm::attach(slot, 0, 4096, None, rm::READ).expect("attach");
    println!("mem-hung: touching a page of a manager that never answers");
    // SAFETY: attached; the fault blocks this thread (the test).
    let v = unsafe { core::ptr::read_volatile(a as *const u64) };
    println!("mem-hung: FAIL the fault returned {}", v);
}
