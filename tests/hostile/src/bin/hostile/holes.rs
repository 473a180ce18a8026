//! Reproducers of the three protection holes of issue 12, each as a mode of this program. Each
//! prints `hostile: hole-NAME PASS ...` when the property holds and `... FAIL ...` when the hole
//! is open, and uses only what an ordinary client's manifest gives it.
//!
//! - `hole-mount` (vfs): a `mkdir` of `"/" + 300 × 'a' + "/l"` and a `readdir` whose length word
//!   says 258 bytes must fail alone; the mount must still serve `/hello.txt` afterwards.
//! - `hole-exhaust` (vfs, check): open `hello.txt` 1,200 times through a PFS session and drop each
//!   capability without `close`; another client (the checker) must still open and read it, through
//!   the VFS and through its own session.
//! - `hole-dma` (mem, blk, victim): share a DMA page of mem with the block driver, free it, let
//!   another task (`hole-victim`) get that physical frame from mem and fill it; a `blk` read into
//!   the freed shared region must not change the victim's page.
//! - `hole-victim` (mem): serves the `victim` endpoint for `hole-dma`.

use crate::check::{self, ask};
use crate::engine::Engine;
use sawmill_abi::{map, MsgTag};
use sawmill_interfaces::rpc::Map;
use sawmill_interfaces::{blk, dataspace, file, mem, pfs, vfs, MapFlags, OpenFlags};
use sawmill_rt::{env, ipc, println, sys, thread, utcb};

const HELLO: &[u8] = b"hello, sawmill\n";
const PAGE: u64 = 4096;
/// Map read-write, and writable now.
const RW_NOW: MapFlags = MapFlags::from_bits_retain(0x103);

fn cap(name: &str) -> u64 {
    env::cap(name).unwrap_or_else(|| {
        println!("hostile: FAIL the manifest gives no `{}` endpoint", name);
        sawmill_rt::exit(1)
    })
}

fn verdict(name: &str, ok: bool, what: core::fmt::Arguments) {
    println!(
        "hostile: {} {} {}",
        name,
        if ok { "PASS" } else { "FAIL" },
        what
    );
}

/// Opens and reads /hello.txt through the VFS; true if the bytes are right.
fn hello_via_vfs(v: &vfs::Client) -> bool {
    let s = thread::alloc_slot();
    let ok = match v.open(b"/hello.txt", OpenFlags::READ, 0, s) {
        Ok(o) => {
            let f = file::Client::new(o.file);
            let r = f.read(0, 64);
            let _ = f.close();
            matches!(r, Ok(b) if &b[..] == HELLO)
        }
        Err(e) => {
            println!("hostile: hole-mount: open /hello.txt: {:?}", e);
            false
        }
    };
    let _ = sys::cap_delete(s);
    ok
}

pub fn mount() {
    let v = vfs::Client::new(cap("vfs"));
    let before = hello_via_vfs(&v);
    let mut long = [b'a'; 303];
    long[0] = b'/';
    long[301] = b'/';
    long[302] = b'l';
    let r = v.mkdir(&long, 0o755);
    println!(
        "hostile: hole-mount: mkdir of a 300-byte component: {:?}",
        r
    );
    let after_mkdir = hello_via_vfs(&v);
    // readdir with a 258-byte path: "/" and a 257-byte component.
    let u = utcb();
    for (i, w) in u.mr[4..37].iter_mut().enumerate() {
        *w = if i == 0 {
            u64::from_le_bytes(*b"/ccccccc")
        } else {
            u64::from_le_bytes(*b"cccccccc")
        };
    }
    let r = ipc::call(v.ep, MsgTag::new(vfs::op::READDIR, 37), [258, 0, 0, 0]);
    println!(
        "hostile: hole-mount: readdir of a 257-byte component: err {} label {:#x}",
        r.err,
        r.tag.label()
    );
    let after_readdir = hello_via_vfs(&v);
    verdict(
        "hole-mount",
        before && after_mkdir && after_readdir,
        format_args!("a bad path fails alone: /hello.txt readable before {}, after the mkdir {}, after the readdir {}", before, after_mkdir, after_readdir),
    );
}

pub fn exhaust(e: &mut Engine) {
    let v = vfs::Client::new(cap("vfs"));
    let s = thread::alloc_slot();
    let session = match v.mount(0, s) {
        Ok(m) => m.s,
        Err(err) => {
            println!("hostile: hole-exhaust FAIL no session: {:?}", err);
            return;
        }
    };
    let p = pfs::Client::new(session);
    let slot = thread::alloc_slot();
    let (mut opened, mut refused, mut first_refusal) = (0u32, 0u32, None);
    for i in 0..1200u32 {
        match p.open_path(b"hello.txt", OpenFlags::READ, 0, slot) {
            Ok(_) => opened += 1,
            Err(err) => {
                refused += 1;
                first_refusal.get_or_insert((i, err));
            }
        }
        // Dropped without `close`: the PFS is never told.
        let _ = sys::cap_delete(slot);
    }
    println!(
        "hostile: hole-exhaust: {} opens dropped without close, {} refused (first: {:?})",
        opened, refused, first_refusal
    );
    let (vw, _) = ask(e, check::VFS);
    let (pw, _) = ask(e, check::PFS);
    verdict("hole-exhaust", vw == 0 && pw == 0, format_args!("another client still opens files: wrong answers through the VFS {}, through a session {}", vw, pw));
}

/// Where the DMA page is mapped (in the attacker and in the victim).
const AT: u64 = 0x5a00_0000;

pub fn dma() {
    let m = mem::Client::new(cap("mem"));
    let b = blk::Client::new(cap("blk"));
    let victim = cap("victim");
    let info = match b.info() {
        Ok(i) => i,
        Err(err) => {
            println!("hostile: hole-dma FAIL blk.info: {:?}", err);
            return;
        }
    };
    let ds = thread::alloc_slot();
    let Ok(a) = m.alloc_dma(1, ds) else {
        println!("hostile: hole-dma FAIL no DMA page from mem");
        return;
    };
    let d = dataspace::Client::new(ds);
    if d.map(0, AT, 1, RW_NOW, [AT, PAGE]).is_err() {
        println!("hostile: hole-dma FAIL mapping the DMA page");
        return;
    }
    if let Err(err) = b.share(Map {
        src: AT,
        dst: info.window,
        pages: 1,
        flags: map::READ | map::WRITE,
    }) {
        println!("hostile: hole-dma FAIL sharing the page: {:?}", err);
        return;
    }
    // Share, then free: mem takes the frame back while the driver still knows its address.
    let freed = d.free();
    let _ = sys::cap_delete(ds);
    println!(
        "hostile: hole-dma: shared page at {:#x} freed ({:?})",
        a.paddr, freed
    );
    // The victim allocates until mem gives it that frame, and fills it.
    let r = ipc::call(victim, MsgTag::new(1, 1), [a.paddr, 0, 0, 0]);
    if r.err != 0 || r.w[0] == 0 {
        verdict(
            "hole-dma",
            true,
            format_args!(
                "mem did not hand the frame to anyone else within {} allocations",
                r.w[1]
            ),
        );
        return;
    }
    println!(
        "hostile: hole-dma: the victim got frame {:#x} after {} allocations",
        a.paddr, r.w[1]
    );
    // A read of the (blank) disk into the old shared region.
    let mut sector = [0u64; 16];
    let mut off = [0u32; 16];
    let mut count = [0u16; 16];
    sector[0] = 0;
    off[0] = 0;
    count[0] = 8;
    let rd = b.read(1, sector, off, count);
    let r = ipc::call(victim, MsgTag::new(2, 0), [0; 4]);
    let intact = r.err == 0 && r.w[0] == 0;
    verdict(
        "hole-dma",
        intact,
        format_args!(
            "a blk read into a freed shared region ({:?}) changed {} of the victim's 4096 bytes",
            rd,
            if r.err == 0 { r.w[0] } else { u64::MAX }
        ),
    );
}

/// The victim of `hole-dma`: label 1 (paddr) allocates one-page DMA dataspaces until one lies
/// at paddr (at most 64), maps and fills it with 0xab; label 2 counts bytes that are not 0xab.
pub fn victim() -> ! {
    let ep = cap("victim");
    let m = mem::Client::new(cap("mem"));
    let mut mr = ipc::recv(ep, 0);
    loop {
        let mut reply = [0u64; 4];
        if mr.err == 0 && mr.tag.label() == 1 {
            for i in 0..64 {
                let s = thread::alloc_slot();
                match m.alloc_dma(1, s) {
                    Ok(a) if a.paddr == mr.w[0] => {
                        let d = dataspace::Client::new(s);
                        if d.map(0, AT, 1, RW_NOW, [AT, PAGE]).is_ok() {
                            // SAFETY: the page was just mapped writable at AT for us alone.
                            unsafe { core::ptr::write_bytes(AT as *mut u8, 0xab, PAGE as usize) };
                            reply = [1, i + 1, 0, 0];
                        }
                        break;
                    }
                    // Not that frame: kept (so mem does not hand it out again), next one.
                    Ok(_) => {}
                    Err(_) => {
                        reply = [0, i + 1, 0, 0];
                        break;
                    }
                }
                reply = [0, i + 1, 0, 0];
            }
        } else if mr.err == 0 && mr.tag.label() == 2 {
            // SAFETY: mapped in label 1, ours until we end.
            let page = unsafe { core::slice::from_raw_parts(AT as *const u8, PAGE as usize) };
            let changed = page.iter().filter(|&&b| b != 0xab).count() as u64;
            println!("hostile-victim: {} of my 4096 bytes changed", changed);
            reply[0] = changed;
        }
        mr = ipc::reply_recv(ep, MsgTag::new(0, 2), reply);
    }
}
