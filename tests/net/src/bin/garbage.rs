//! net-garbage: a hostile network stack against the virtio-net driver (scenario `net-hostile`).
//! It attaches a session, then puts garbage on the rings (slots out of range, frame lengths out
//! of range, a slot offered twice, a producer index far ahead), kicks the driver and checks that
//! an honest frame still goes out and its answer comes back (an ARP request for QEMU's gateway).
//! Then it frees the session memory under the driver and kicks it: the driver faults on it, ends
//! that session only, and serves a new session over fresh memory (the same ARP exchange).
//! Between the two, an attach of one page only is refused. Last, a session whose memory simply
//! disappears (as when its stack dies) gives way to the next attach.
#![no_std]
#![no_main]

use sawmill_abi::ObjKind;
use sawmill_interfaces::rpc::Map;
use sawmill_interfaces::{dataspace, mem, net, MapFlags};
use sawmill_net_virtio_api::session::{
    Ring, Shared, StackSide, SESSION_BYTES, SESSION_PAGES, SLOTS,
};
use sawmill_rt::{env, println, sys, thread};

sawmill_rt::entry!(main);

/// Where a session's memory is mapped here (the second one after the first).
const SESSION_AT: u64 = 0x5000_0000;
const OUR_IP: [u8; 4] = [10, 0, 2, 15];
const GATEWAY: [u8; 4] = [10, 0, 2, 2];
/// The send slot the honest frame goes out of (receive slots are 0..8).
const TX_SLOT: u16 = 64;

struct Ctx {
    nic: net::Client,
    mem: mem::Client,
    notif: u64,
    ticks_per_ms: u64,
    mac: [u8; 6],
}

/// A fresh session memory at `at`: its dataspace and the shared view.
fn memory(c: &Ctx, at: u64) -> Option<(u64, Shared)> {
    let ds = c
        .mem
        .alloc(SESSION_BYTES as u64, 0, thread::alloc_slot())
        .ok()?;
    let d = dataspace::Client::new(ds);
    let rw = MapFlags::READ | MapFlags::WRITE | MapFlags::NEED_WRITE;
    let mut done = 0;
    while done < SESSION_PAGES as u64 {
        let va = at + done * 4096;
        let left = SESSION_PAGES as u64 - done;
        done += d
            .map(done * 4096, va, left, rw, [va, left * 4096])
            .ok()?
            .pages
            .max(1);
    }
    // SAFETY: SESSION_BYTES mapped at `at` just now.
    Some((ds, unsafe { Shared::new(at as *mut u8) }))
}

/// Our session memory at `at`, mapped at the driver's window (which moves with each session).
fn region(c: &Ctx, at: u64) -> Map {
    Map {
        src: at,
        dst: c.nic.info().map_or(0, |i| i.window),
        pages: SESSION_PAGES as u64,
        flags: sawmill_abi::map::READ | sawmill_abi::map::WRITE,
    }
}

/// Sends an ARP request for the gateway from `TX_SLOT` (one kick) and waits (up to 5 s) for the
/// reply in one of the receive slots, which only the device's interrupt can bring.
fn arp(c: &Ctx, m: &Shared, side: &mut StackSide, kick: u64) -> bool {
    let mut f = [0u8; 42];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&c.mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&c.mac);
    f[28..32].copy_from_slice(&OUR_IP);
    f[38..42].copy_from_slice(&GATEWAY);
    // SAFETY: a send slot of our session memory, not in the driver's hands.
    unsafe { core::ptr::copy_nonoverlapping(f.as_ptr(), m.slot_ptr(TX_SLOT), f.len()) };
    side.submit_tx(m, TX_SLOT, f.len() as u16);
    let _ = sys::notify_signal(kick, u64::MAX);
    let end = sys::rdtsc() + 5000 * c.ticks_per_ms;
    while sys::rdtsc() < end {
        while let Some(d) = side.reap_rx(m) {
            // SAFETY: a receive slot the driver gave back, its length checked by StackSide.
            let r = unsafe { core::slice::from_raw_parts(m.slot_ptr(d.slot), d.len as usize) };
            let reply = r.len() >= 42
                && r[12..14] == [0x08, 0x06]
                && r[20..22] == [0, 2]
                && r[28..32] == GATEWAY;
            side.submit_rx(m, d.slot);
            if reply {
                return true;
            }
        }
        // No more kicks: the reply comes in by the device's interrupt alone.
        let _ = sys::notify_wait_until(c.notif, sys::rdtsc() + 100 * c.ticks_per_ms);
    }
    false
}

fn main() {
    let (Some(nic), Some(mem_ep)) = (env::cap("net0"), env::cap("mem")) else {
        println!("net-garbage: FAIL needs `net0` and `mem`");
        return;
    };
    let notif = thread::create(ObjKind::Notification, 0).expect("notification (kmem_kb)");
    let nic = net::Client::new(nic);
    let info = nic.info().expect("info");
    let mac = info.mac.to_le_bytes();
    let c = Ctx {
        nic,
        mem: mem::Client::new(mem_ep),
        notif,
        ticks_per_ms: sawmill_rt::clock::Wall::get().khz,
        mac: [mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]],
    };
    let Some((ds, m)) = memory(&c, SESSION_AT) else {
        println!("net-garbage: FAIL session memory");
        return;
    };
    let mut side = StackSide::new(&m);
    for slot in 0..8 {
        side.submit_rx(&m, slot);
    }
    let kick = match c.nic.attach(
        region(&c, SESSION_AT),
        notif,
        1,
        notif,
        thread::alloc_slot(),
    ) {
        Ok(k) => k,
        Err(e) => {
            println!("net-garbage: FAIL attach: {:?}", e);
            return;
        }
    };
    // A second attach while the first session lives is refused.
    let busy = c.nic.attach(
        region(&c, SESSION_AT),
        notif,
        1,
        notif,
        thread::alloc_slot(),
    );
    // (Its memory does not even arrive: the driver's window is closed while a session lives.)
    println!(
        "net-garbage: second attach {}",
        if busy.is_err() { "refused" } else { "ACCEPTED" }
    );
    // Garbage: a slot beyond the session, lengths too short and too long, a receive slot the
    // device already holds offered again, then a producer index far past the ring.
    side.submit_tx(&m, SLOTS as u16 + 900, 60);
    side.submit_tx(&m, TX_SLOT + 1, 3);
    side.submit_tx(&m, TX_SLOT + 2, 9000);
    side.submit_rx(&m, 3);
    let _ = sys::notify_signal(kick, u64::MAX);
    let _ = sys::notify_wait_until(notif, sys::rdtsc() + 200 * c.ticks_per_ms);
    let honest = m.prod_now(Ring::TxSubmit);
    m.forge_prod(Ring::TxSubmit, honest.wrapping_add(1000));
    let _ = sys::notify_signal(kick, u64::MAX);
    let _ = sys::notify_wait_until(notif, sys::rdtsc() + 200 * c.ticks_per_ms);
    m.forge_prod(Ring::TxSubmit, honest);
    if arp(&c, &m, &mut side, kick) {
        println!("net-garbage: PASS the driver refused the garbage and still sends and receives");
    } else {
        println!("net-garbage: FAIL no ARP reply after the garbage");
        return;
    }
    // Free the memory under the driver, and make it look.
    if let Err(e) = dataspace::Client::new(ds).free() {
        println!("net-garbage: FAIL free: {:?}", e);
        return;
    }
    let _ = sys::notify_signal(kick, u64::MAX);
    let _ = sys::notify_wait_until(notif, sys::rdtsc() + 500 * c.ticks_per_ms);
    let at = SESSION_AT + SESSION_BYTES as u64 + 0x10_0000;
    let Some((_ds2, m2)) = memory(&c, at) else {
        println!("net-garbage: FAIL second session memory");
        return;
    };
    let mut side2 = StackSide::new(&m2);
    for slot in 0..8 {
        side2.submit_rx(&m2, slot);
    }
    let mut one_page = region(&c, at);
    one_page.pages = 1;
    let short = c
        .nic
        .attach(one_page, notif, 1, notif, thread::alloc_slot());
    println!("net-garbage: attach of one page: {:?}", short.map(|_| ()));
    let kick2 = match c
        .nic
        .attach(region(&c, at), notif, 1, notif, thread::alloc_slot())
    {
        Ok(k) => k,
        Err(e) => {
            println!(
                "net-garbage: FAIL attach after the revoked session: {:?}",
                e
            );
            return;
        }
    };
    if arp(&c, &m2, &mut side2, kick2) {
        println!("net-garbage: PASS a new session works after the revoked one");
    } else {
        println!("net-garbage: FAIL no ARP reply in the new session");
        return;
    }
    // A stack that vanishes without a word: its memory goes from the driver (we revoke what was
    // derived from our mapping, as mem does when a task dies) and nobody kicks. The next attach
    // finds the old session's memory gone, ends it, and is served.
    let _ = sys::unmap(at, SESSION_PAGES as u64, 0);
    let at3 = at + SESSION_BYTES as u64 + 0x10_0000;
    let Some((_ds3, m3)) = memory(&c, at3) else {
        println!("net-garbage: FAIL third session memory");
        return;
    };
    let mut side3 = StackSide::new(&m3);
    for slot in 0..8 {
        side3.submit_rx(&m3, slot);
    }
    let kick3 = match c
        .nic
        .attach(region(&c, at3), notif, 1, notif, thread::alloc_slot())
    {
        Ok(k) => k,
        Err(e) => {
            println!("net-garbage: FAIL attach after a vanished session: {:?}", e);
            return;
        }
    };
    if arp(&c, &m3, &mut side3, kick3) {
        println!("net-garbage: PASS a session after a vanished one works");
    } else {
        println!("net-garbage: FAIL no ARP reply after a vanished session");
        return;
    }
    match c.nic.detach() {
        Ok(()) => println!("net-garbage: detached"),
        Err(e) => println!("net-garbage: FAIL detach: {:?}", e),
    }
}
