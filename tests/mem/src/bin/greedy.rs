//! mem-greedy: asks for more memory than its quota allows. It gets a clear error at the limit,
//! gives the memory back and goes on.
#![no_std]
#![no_main]
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{dataspace, DsError, MapFlags, MemError};
use sawmill_memtest::check;
use sawmill_rm as rm;
use sawmill_rt::{println, thread};

sawmill_rt::entry!(main);

fn main() {
    rm::init().expect("rm init");
    let mem = rm::mem().expect("mem");
    let st = mem.stats().unwrap();
    check!(st.quota == 64, "quota {:?}", st);
    // A region bigger than the quota: populating it fails at page 64 with a clear error.
    let ds = mem
        .alloc(256 * 4096, 0, thread::alloc_slot())
        .expect("alloc");
    let a = rm::attach(ds, 0, 256 * 4096, None, rm::READ | rm::WRITE).unwrap();
    let mut n = 0;
    let d = dataspace::Client::new(ds);
    loop {
        let p = a + n * 4096;
        match d.map(n * 4096, p, 1, MapFlags::READ | MapFlags::WRITE, [p, 4096]) {
            Ok(_) => n += 1,
            Err(e) => {
                check!(
                    e == RpcError::App(DsError::NoMemory),
                    "error at the limit: {:?}",
                    e
                );
                break;
            }
        }
        check!(n <= 64, "more than the quota mapped");
    }
    check!(n == 64, "refused after {} pages", n);
    check!(
        mem.alloc_dma(1, thread::alloc_slot()) == Err(RpcError::App(MemError::Quota)),
        "dma past the quota"
    );
    println!("mem-greedy: PASS refused after {} pages (quota 256 KiB)", n);
    // Giving back makes room again.
    d.resize(32 * 4096).unwrap();
    let p = a + 40 * 4096;
    check!(
        d.map(40 * 4096, p, 1, MapFlags::READ | MapFlags::WRITE, [p, 4096])
            == Err(RpcError::App(DsError::Invalid)),
        "past the new end"
    );
    let ds2 = mem.alloc(4096, 0, thread::alloc_slot()).unwrap();
    let b = rm::attach(ds2, 0, 4096, None, rm::READ | rm::WRITE).unwrap();
    // SAFETY: attached read-write; the quota has room again.
    unsafe { core::ptr::write_volatile(b as *mut u64, 5) };
    check!(mem.stats().unwrap().used == 33, "used {:?}", mem.stats());
    println!("mem-greedy: PASS memory returned by resize is usable again");
}
