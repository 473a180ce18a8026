//! A task with a `pci` capability but no device assigned to its badge (scenario pci-authority).
//! It asks pci for device 0 with its task capability, as a driver would: pci must refuse
//! (`NotYours`) and grant nothing. Then it touches the port named by its argument `port=0x...`
//! (the real driver's BAR 0): the access must fault, root reports it and ends this task.
#![no_std]
#![no_main]

use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{pci, PciError};
use sawmill_rt::{env, println, slots};

sawmill_rt::entry!(main);

fn main() {
    let port = env::args()
        .find_map(|a| a.strip_prefix("port=0x"))
        .and_then(|h| u16::from_str_radix(h, 16).ok())
        .expect("port=0x... argument");
    let pci_ep = env::cap("pci").expect("pci endpoint");
    let irq_rx = sawmill_rt::thread::alloc_slot();
    for index in 0..2 {
        match pci::Client::new(pci_ep).claim(index, slots::TASK, irq_rx) {
            Err(RpcError::App(PciError::NotYours)) => {}
            r => {
                println!(
                    "pci-intruder: FAIL claim of device {} answered {:?}",
                    index,
                    r.map(|c| c.io_base)
                );
                sawmill_rt::exit(1);
            }
        }
    }
    if sawmill_rt::sys::irq_ack(irq_rx).is_ok() {
        println!("pci-intruder: FAIL holds an Irq capability");
        sawmill_rt::exit(1);
    }
    println!(
        "pci-intruder: PASS claims refused (NotYours), no Irq capability; touching port {:#x}",
        port
    );
    // SAFETY: deliberately faults: pci never granted this task any port (the #GP is the test).
    unsafe { core::arch::asm!("in al, dx", in("dx") port, out("al") _) };
    println!("pci-intruder: FAIL read port {:#x} without a grant", port);
    sawmill_rt::exit(1);
}
