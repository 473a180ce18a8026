//! mem-stackuser: attaches mem-stackds's dataspace (stacked on mem) and reads it; then has the
//! bottom dataspace freed at mem and sees its mappings gone.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_interfaces::dataspace;
use sawmill_memtest::check;
use sawmill_rm as rm;
use sawmill_rt::{env, ipc, println, sys, thread, utcb};

sawmill_rt::entry!(main);

fn main() {
    rm::init().expect("rm init");
    let sds = env::cap("stackds").expect("stackds");
    let slot = thread::alloc_slot();
    utcb().caps_in[0] = slot;
    let r = ipc::call(sds, MsgTag::new(0x100, 0), [0; 4]);
    check!(r.err == 0 && r.tag.caps() == 1, "no dataspace from stackds");
    let info = dataspace::Client::new(slot).info().expect("info");
    let a = rm::attach_all(slot, rm::READ).expect("attach");
    for i in 0..info.size / 4096 {
        // SAFETY: attached read-only; faults are resolved by stackds.
        let v = unsafe { core::ptr::read_volatile((a + i * 4096) as *const u64) };
        check!(v == 0xab00 + i, "page {}: {:#x}", i, v);
    }
    println!(
        "mem-stackuser: PASS {} pages served by a manager stacked on mem",
        info.size / 4096
    );
    // Freeing at the bottom (mem) revokes the mappings derived through the stacked manager.
    let r = ipc::call(sds, MsgTag::new(0x101, 0), [0; 4]);
    check!(
        r.err == 0 && r.tag.label() == 0,
        "stackds could not free its backing"
    );
    for i in 0..info.size / 4096 {
        check!(
            sys::translate(a + i * 4096).is_err(),
            "page {} still mapped after the bottom was freed",
            i
        );
    }
    println!("mem-stackuser: PASS freeing the bottom dataspace revoked every page up the stack");
}
