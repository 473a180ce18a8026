//! One hostile mode per server interface: what to aim at, what the interface's opcodes and
//! meaningful values are, which misuse patterns to run between batches and how to check health.

use crate::check::{self, ask};
use crate::engine::{Engine, Kind, SCRATCH};
use crate::Opts;
use sawmill_abi::{map, MsgTag};
use sawmill_hostile::Target;
use sawmill_interfaces::rpc::{Error as RpcError, Map};
use sawmill_interfaces::{
    blk, console, dataspace, file, mem, net, pci, pfs, pipe, sock, socket, vfs, BlkError,
    ConsoleError, DsError, MapFlags, NetError, OpenFlags, SockError, SockKind,
};
use sawmill_rt::{env, println, utcb};

const DS_OPS: [u16; 7] = [
    dataspace::op::INFO,
    dataspace::op::MAP,
    dataspace::op::COPY,
    dataspace::op::PHYS,
    dataspace::op::READ_ONLY,
    dataspace::op::RESIZE,
    dataspace::op::FREE,
];
const MEM_OPS: [u16; 4] = [
    mem::op::ALLOC,
    mem::op::ALLOC_DMA,
    mem::op::STATS,
    mem::op::CLIENT_GONE,
];
const FILE_OPS: [u16; 19] = [
    file::op::READ,
    file::op::WRITE,
    file::op::STAT,
    file::op::TRUNCATE,
    file::op::FSYNC,
    file::op::MAP,
    file::op::CLOSE,
    file::op::REOPEN,
    file::op::WRITE_BUFFER,
    file::op::WRITE_FROM_BUFFER,
    file::op::SETATTR,
    file::op::STATFS,
    dataspace::op::INFO,
    dataspace::op::MAP,
    dataspace::op::COPY,
    dataspace::op::PHYS,
    dataspace::op::READ_ONLY,
    dataspace::op::RESIZE,
    dataspace::op::FREE,
];
const VFS_OPS: [u16; 19] = [
    vfs::op::OPEN,
    vfs::op::STAT,
    vfs::op::MKDIR,
    vfs::op::RMDIR,
    vfs::op::UNLINK,
    vfs::op::RENAME,
    vfs::op::SYMLINK,
    vfs::op::READLINK,
    vfs::op::CHMOD,
    vfs::op::TRUNCATE,
    vfs::op::READDIR,
    vfs::op::SYNC,
    vfs::op::MOUNTS,
    vfs::op::MOUNT,
    vfs::op::CRASH,
    vfs::op::STAGE,
    vfs::op::LINK,
    vfs::op::SETATTR,
    vfs::op::STATFS,
];
const PFS_OPS: [u16; 22] = [
    pfs::op::WATCH,
    pfs::op::ROOT,
    pfs::op::LOOKUP,
    pfs::op::GETATTR,
    pfs::op::OPEN,
    pfs::op::CREATE,
    pfs::op::MKDIR,
    pfs::op::SYMLINK,
    pfs::op::READLINK,
    pfs::op::UNLINK,
    pfs::op::RMDIR,
    pfs::op::RENAME,
    pfs::op::SETATTR,
    pfs::op::TRUNCATE,
    pfs::op::READDIR,
    pfs::op::SYNC,
    pfs::op::SESSION,
    pfs::op::CRASH,
    pfs::op::OPEN_PATH,
    pfs::op::COVER,
    pfs::op::LINK,
    pfs::op::STATFS,
];
const BLK_OPS: [u16; 5] = [
    blk::op::INFO,
    blk::op::READ,
    blk::op::WRITE,
    blk::op::FLUSH,
    blk::op::SHARE,
];
/// Map read-write, and writable now.
const RW_NOW: MapFlags = MapFlags::from_bits_retain(0x103);
const PCI_OPS: [u16; 1] = [pci::op::CLAIM];
const CONSOLE_OPS: [u16; 9] = [
    console::op::WATCH,
    console::op::READABLE,
    console::op::WRITE,
    console::op::READ,
    console::op::WINSIZE,
    console::op::SET_WINSIZE,
    console::op::TCGETS,
    console::op::TCSETS,
    console::op::PENDING,
];

/// Paths a buffer argument may carry: real ones of tests/fs/trees/basic, escapes, loops, and
/// components just over the limits (a 256- and a 300-byte component: issue 12, hole 1).
const LONG: &[u8; 302] = &{
    let mut p = [b'a'; 302];
    p[0] = b'/';
    p[299] = b'/';
    p[300] = b'l';
    p[301] = b'x';
    p
};
const COMP256: &[u8; 257] = &{
    let mut p = [b'b'; 257];
    p[0] = b'/';
    p
};
const PATHS: [&[u8]; 24] = [
    b"/play",
    b"/play/a",
    b"/play/b",
    b"/play/a/b",
    b"/play/../play/c",
    b"play/a",
    b"play/d/e",
    b"/play/link",
    b"/hello.txt",
    b"/docs",
    b"/docs/medium.bin",
    b"/docs/deep",
    b"/link-to-hello",
    b"/zero",
    b"/",
    b"//..//../hello.txt",
    b"/nonexistent/x",
    b"/hello.txt/x",
    b"hello.txt",
    b"docs/odd-size.dat",
    b"../../etc",
    b"/docs/./deep/../medium.bin",
    LONG,
    COMP256,
];
/// Inode numbers, sizes and cookies of the basic tree.
const FS_HINTS: [u64; 12] = [
    2, 11, 12, 13, 14, 15, 16, 20000, 4097, 0o100644, 0o040755, 1000,
];

/// Where the blk mode maps the region it shares with its driver.
const BLK_AT: u64 = 0x5900_0000;
const BLK_PAGES: u64 = 16;
/// The sector the blk health check writes and reads back.
const CHECK_SECTOR: u64 = 8;

/// Runs the mode `e.server` names; returns whether the server was alive at the end.
pub fn run(e: &mut Engine, o: &Opts) -> bool {
    match e.server {
        "mem" => run_mem(e, o),
        "vfs" => run_fs(e, o, false),
        "pfs" => run_fs(e, o, true),
        "blk" => run_blk(e, o),
        "console" => run_console(e, o),
        "pipe" => run_pipe(e, o),
        "socket" => run_socket(e, o),
        "net" => run_net(e, o),
        _ => run_pci(e, o),
    }
}

/// The capability named `name` in our manifest; `ep=NAME` in the arguments renames the one the
/// mode aims at (the watchdog's own scenario aims the mem mode at a server that never answers).
fn cap(name: &str) -> u64 {
    let main = match name {
        "mem" | "vfs" | "blk" | "pci" | "console" | "pipe" | "socket" | "net" => {
            env::args().find_map(|a| a.strip_prefix("ep="))
        }
        _ => None,
    };
    let name = main.unwrap_or(name);
    match env::cap(name) {
        Some(c) => c,
        None => {
            println!("hostile: FAIL the manifest gives no `{}` endpoint", name);
            sawmill_rt::exit(1)
        }
    }
}

/// What to send to a target of some kind: its interface, and what a capability in the reply is.
type Aim = (Target<'static>, fn(u16) -> Kind);

/// The main loop every mode shares: fire at the server or at what it handed out, and every
/// batch run the misuse patterns and the health check. Returns the last check's `alive`.
fn main_loop(
    e: &mut Engine,
    o: &Opts,
    main: u64,
    aim: &dyn Fn(Option<Kind>) -> Aim,
    mut batch: impl FnMut(&mut Engine) -> bool,
) -> bool {
    let mut next = o.batch;
    let mut alive = true;
    while e.tally.sent < o.count {
        let (ep, kind) = e.pick_target(main);
        let (t, kind_of) = aim(kind);
        e.fire(ep, &t, kind_of);
        if e.tally.sent >= next {
            next = e.tally.sent + o.batch;
            alive = batch(e);
            if !alive {
                println!(
                    "hostile: {} does not answer any more after {} messages (seed {})",
                    e.server, e.tally.sent, e.seed
                );
                break;
            }
        }
    }
    alive && batch(e)
}

fn expect<T: core::fmt::Debug, E: core::fmt::Debug>(
    e: &mut Engine,
    r: Result<T, RpcError<E>>,
    ok: impl Fn(&Result<T, RpcError<E>>) -> bool,
    what: &str,
) {
    e.tally.checks += 1;
    if !ok(&r) {
        e.tally.wrong += 1;
        println!(
            "hostile: {} WRONG {}: got {:?} (seed {}, after {} messages)",
            e.server, what, r, e.seed, e.tally.sent
        );
    }
}

// ---- mem --------------------------------------------------------------------------------------

fn run_mem(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("mem");
    let m = mem::Client::new(main);
    let mut leak = o.leak;
    let aim = |k: Option<Kind>| -> Aim {
        const HINTS: [u64; 9] = [
            4096,
            8192,
            1 << 20,
            SCRATCH,
            SCRATCH + 4096,
            0x103,
            0x3,
            16,
            1 << 63,
        ];
        let ops: &'static [u16] = if k.is_some() { &DS_OPS } else { &MEM_OPS };
        (
            Target {
                ops,
                hints: &HINTS,
                payloads: &[],
            },
            |_| Kind::Ds,
        )
    };
    main_loop(e, o, main, &aim, |e| {
        // Leak: a dataspace whose capability we drop without `free` (bounded, see `Opts::leak`).
        if leak > 0 {
            let s = e.slot();
            if m.alloc(4096, 0, s).is_ok() {
                leak -= 1;
            }
            e.release(s);
        }
        // Use after free, double free.
        let s = e.slot();
        if m.alloc(8192, 0, s).is_ok() {
            let d = dataspace::Client::new(s);
            expect(e, d.free(), |r| r.is_ok(), "free of a fresh dataspace");
            // `free` revokes every capability to the dataspace: ours is gone (BadCap), or at
            // least names nothing (Gone).
            expect(e, d.info().map(|_| ()), gone, "info after free (want Gone)");
            expect(e, d.free(), gone, "second free (want Gone)");
            expect(
                e,
                d.map(0, 0x5800_0000, 1, MapFlags::READ, [0x5800_0000, 4096]),
                |r| r.is_err(),
                "map after free",
            );
        }
        e.release(s);
        // Flood: non-blocking requests back to back.
        for _ in 0..64 {
            e.call(main, MsgTag::new(mem::op::STATS, 0).nonblocking(), [0; 4]);
        }
        ask(e, check::MEM).1
    })
}

fn gone(r: &Result<(), RpcError<DsError>>) -> bool {
    matches!(r, Err(RpcError::App(DsError::Gone)) | Err(RpcError::Ipc(2)))
}

// ---- vfs and pfs ------------------------------------------------------------------------------

fn run_fs(e: &mut Engine, o: &Opts, via_session: bool) -> bool {
    let v = vfs::Client::new(cap("vfs"));
    let main = if via_session {
        // What an ordinary client gets for protocol option 3: a session of the root PFS.
        let s = e.slot();
        match v.mount(0, s) {
            Ok(m) => m.s,
            Err(err) => {
                println!("hostile: FAIL no session from vfs.mount(0): {:?}", err);
                sawmill_rt::exit(1)
            }
        }
    } else {
        v.ep
    };
    let mut leak = o.leak;
    let aim = move |k: Option<Kind>| -> Aim {
        match k {
            Some(Kind::File) => (
                Target {
                    ops: &FILE_OPS,
                    hints: &FS_HINTS,
                    payloads: &[],
                },
                |_| Kind::File,
            ),
            Some(Kind::Session) => (
                Target {
                    ops: &PFS_OPS,
                    hints: &FS_HINTS,
                    payloads: &PATHS,
                },
                pfs_kind,
            ),
            _ if via_session => (
                Target {
                    ops: &PFS_OPS,
                    hints: &FS_HINTS,
                    payloads: &PATHS,
                },
                pfs_kind,
            ),
            _ => (
                Target {
                    ops: &VFS_OPS,
                    hints: &FS_HINTS,
                    payloads: &PATHS,
                },
                vfs_kind,
            ),
        }
    };
    let health = if via_session { check::PFS } else { check::VFS };
    let alive = main_loop(e, o, main, &aim, |e| {
        let s = e.slot();
        let open = |s: u64| {
            if via_session {
                pfs::Client::new(main)
                    .open_path(b"hello.txt", OpenFlags::READ, 0, s)
                    .map(|o| o.file)
            } else {
                v.open(b"/hello.txt", OpenFlags::READ, 0, s).map(|o| o.file)
            }
        };
        // Leak: an open file whose capability we drop without `close` (bounded).
        if leak > 0 && open(s).is_ok() {
            leak -= 1;
        }
        e.release(s);
        // Use after close.
        let s = e.slot();
        if open(s).is_ok() {
            let f = file::Client::new(s);
            expect(e, f.close(), |r| r.is_ok(), "close");
            expect(e, f.read(0, 16), |r| r.is_err(), "read after close");
            expect(e, f.close(), |r| r.is_err(), "second close");
        }
        e.release(s);
        if !via_session {
            // Issue 12, hole 1: a component longer than a name may be, as a path and as a
            // readdir whose length word says 258 bytes; both must fail alone.
            expect(
                e,
                v.mkdir(LONG, 0o755),
                |r| matches!(r, Err(RpcError::App(_))),
                "mkdir of a 300-byte component",
            );
            let u = utcb();
            for (i, w) in u.mr[4..40].iter_mut().enumerate() {
                *w = if i == 0 {
                    u64::from_le_bytes(*b"/ccccccc")
                } else {
                    u64::from_le_bytes(*b"cccccccc")
                };
            }
            let r = e.call(main, MsgTag::new(vfs::op::READDIR, 40), [258, 0, 0, 0]);
            e.tally.checks += 1;
            if r.err != 0 || r.tag.label() == 0 || r.tag.label() == sawmill_abi::label::GONE {
                e.tally.wrong += 1;
                println!(
                    "hostile: vfs WRONG readdir of a 257-byte component: err {} label {:#x}",
                    r.err,
                    r.tag.label()
                );
            }
        }
        // Flood: non-blocking requests back to back.
        let (label, words) = if via_session {
            (pfs::op::ROOT, 0)
        } else {
            (vfs::op::MOUNTS, 0)
        };
        for _ in 0..64 {
            e.call(main, MsgTag::new(label, words).nonblocking(), [0; 4]);
        }
        ask(e, health).1
    });
    // What was written is on disk: the scenario checks the image with e2fsck afterwards.
    let synced = if via_session {
        pfs::Client::new(main).sync()
    } else {
        v.sync()
    };
    expect(e, synced, |r| r.is_ok(), "sync at the end");
    alive
}

fn vfs_kind(label: u16) -> Kind {
    match label {
        vfs::op::OPEN => Kind::File,
        vfs::op::MOUNT => Kind::Session,
        _ => Kind::Other,
    }
}

fn pfs_kind(label: u16) -> Kind {
    match label {
        pfs::op::OPEN | pfs::op::OPEN_PATH => Kind::File,
        pfs::op::SESSION => Kind::Session,
        _ => Kind::Other,
    }
}

// ---- blk --------------------------------------------------------------------------------------

fn run_blk(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("blk");
    let b = blk::Client::new(main);
    let m = mem::Client::new(cap("mem"));
    let info = match b.info() {
        Ok(i) => i,
        Err(err) => {
            println!("hostile: FAIL blk.info: {:?}", err);
            sawmill_rt::exit(1)
        }
    };
    // The region we share: a DMA dataspace of mem, mapped here and then into the driver.
    let ds = e.slot();
    let rw = map::READ | map::WRITE;
    let ok = m.alloc_dma(BLK_PAGES, ds).is_ok()
        && (0..BLK_PAGES).all(|i| {
            let va = BLK_AT + i * 4096;
            dataspace::Client::new(ds)
                .map(i * 4096, va, 1, RW_NOW, [va, 4096])
                .is_ok()
        });
    if !ok {
        println!("hostile: FAIL no DMA region from mem for the blk mode");
        sawmill_rt::exit(1)
    }
    if let Err(err) = b.share(Map {
        src: BLK_AT,
        dst: info.window,
        pages: BLK_PAGES,
        flags: rw,
    }) {
        println!("hostile: FAIL sharing a region with the driver: {:?}", err);
        sawmill_rt::exit(1)
    }
    let sectors = info.sectors;
    let hints: &'static [u64] = alloc::vec![
        sectors,
        sectors - 1,
        sectors - 64,
        sectors + 1,
        BLK_PAGES * 4096,
        BLK_PAGES * 4096 - 512,
        512,
        16,
        17,
        64,
        65,
        info.window
    ]
    .leak();
    let aim = move |_k: Option<Kind>| -> Aim {
        (
            Target {
                ops: &BLK_OPS,
                hints,
                payloads: &[],
            },
            |_| Kind::Other,
        )
    };
    let mut round = 0u8;
    main_loop(e, o, main, &aim, |e| {
        let one = |v: u64| {
            let mut a = [0u64; 16];
            a[0] = v;
            a
        };
        let off = |v: u32| {
            let mut a = [0u32; 16];
            a[0] = v;
            a
        };
        let cnt = |v: u16| {
            let mut a = [0u16; 16];
            a[0] = v;
            a
        };
        // Misuse: buffers outside the region, sectors past the end, too many requests, a second
        // share; each must be refused with its own error.
        let past = (BLK_PAGES * 4096) as u32;
        expect(
            e,
            b.read(1, one(0), off(past - 512), cnt(2)),
            |r| *r == Err(RpcError::App(BlkError::BadBuffer)),
            "read past the region",
        );
        expect(
            e,
            b.read(1, one(sectors - 1), off(0), cnt(2)),
            |r| *r == Err(RpcError::App(BlkError::OutOfRange)),
            "read past the disk",
        );
        expect(
            e,
            b.write(17, one(0), off(0), cnt(1)),
            |r| *r == Err(RpcError::App(BlkError::TooMany)),
            "17 requests",
        );
        expect(
            e,
            b.read(1, one(u64::MAX), off(0), cnt(1)),
            |r| *r == Err(RpcError::App(BlkError::OutOfRange)),
            "sector u64::MAX",
        );
        let again = b.share(Map {
            src: BLK_AT,
            dst: info.window,
            pages: 1,
            flags: map::READ,
        });
        // Refused: NotShared, or the map item fell outside the driver's window (which has moved
        // past our region) and the request lacks it.
        expect(
            e,
            again,
            |r| {
                matches!(
                    r,
                    Err(RpcError::App(BlkError::NotShared)) | Err(RpcError::Protocol(_))
                )
            },
            "a second share",
        );
        // Health: what we write to a sector comes back.
        round = round.wrapping_add(1);
        let page0 = BLK_AT as *mut u8;
        let page1 = (BLK_AT + 4096) as *mut u8;
        // SAFETY: pages 0 and 1 of our shared region, mapped writable at BLK_AT for the whole run.
        unsafe {
            for i in 0..512 {
                page0
                    .add(i)
                    .write_volatile((i as u8).wrapping_mul(7) ^ round);
                page1.add(i).write_volatile(0);
            }
        }
        let w = b.write(1, one(CHECK_SECTOR), off(0), cnt(1));
        let rd = b.read(1, one(CHECK_SECTOR), off(4096), cnt(1));
        // SAFETY: as above; the driver's DMA has completed when `read` returned.
        let same = (0..512)
            .all(|i| unsafe { page1.add(i).read_volatile() == (i as u8).wrapping_mul(7) ^ round });
        e.tally.checks += 1;
        let alive = w.is_ok() && rd.is_ok();
        if !alive || !same || b.info().map(|i| i.sectors) != Ok(sectors) {
            e.tally.wrong += 1;
            println!("hostile: blk WRONG sector {} did not read back what was written: {:?} {:?} same={} (seed {})", CHECK_SECTOR, w, rd, same, e.seed);
        }
        alive
    })
}

// ---- pci --------------------------------------------------------------------------------------

fn run_pci(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("pci");
    let p = pci::Client::new(main);
    let aim = |_k: Option<Kind>| -> Aim {
        (
            Target {
                ops: &PCI_OPS,
                hints: &[0, 1, 2, 31, 255],
                payloads: &[],
            },
            |_| Kind::Other,
        )
    };
    main_loop(e, o, main, &aim, |e| {
        let s = e.slot();
        expect(
            e,
            p.claim(0, sawmill_rt::slots::TASK, s),
            |r| r.is_err(),
            "claim by a badge without devices",
        );
        e.release(s);
        // A claim without a task capability, and with one that is not a task.
        let r = e.call(main, MsgTag::new(pci::op::CLAIM, 1), [0; 4]);
        e.tally.checks += 1;
        if r.err != 0 || r.tag.label() == 0 {
            e.tally.wrong += 1;
            println!(
                "hostile: pci WRONG a claim without a task capability: err {} label {:#x}",
                r.err,
                r.tag.label()
            );
        }
        ask(e, check::PCI).1
    })
}

// ---- console ----------------------------------------------------------------------------------

fn run_console(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("console");
    let aim = |_k: Option<Kind>| -> Aim {
        (
            Target {
                ops: &CONSOLE_OPS,
                hints: &[0, 1, 19, 480, 481, 0xffff_ffff],
                payloads: &[b"hostile\n", b"\x1b[2J\x04\x7f\r"],
            },
            |_| Kind::Other,
        )
    };
    main_loop(e, o, main, &aim, |e| {
        // A read on the output endpoint is refused, never waits.
        expect(
            e,
            console::Client::new(main).read(1).map(|d| d.len()),
            |r| matches!(r, Err(RpcError::App(ConsoleError::WrongEndpoint))),
            "read on the console endpoint (want WrongEndpoint)",
        );
        ask(e, check::CONSOLE).1
    })
}

// ---- pipe -------------------------------------------------------------------------------------

const PIPE_OPS: [u16; 10] = [
    pipe::op::CREATE,
    pipe::op::REGISTER,
    pipe::op::POKE,
    pipe::op::SYNC,
    pipe::op::LISTEN,
    pipe::op::CONNECT,
    pipe::op::ACCEPT,
    pipe::op::PENDING,
    pipe::op::MAILBOX,
    pipe::op::DELIVER_TO,
];
/// What an end is asked: the pipe calls and the dataspace calls (only `info` and `map` allowed).
const PIPE_END_OPS: [u16; 15] = [
    pipe::op::CREATE,
    pipe::op::REGISTER,
    pipe::op::POKE,
    pipe::op::SYNC,
    pipe::op::ACCEPT,
    pipe::op::PENDING,
    pipe::op::LISTEN,
    pipe::op::CONNECT,
    dataspace::op::INFO,
    dataspace::op::MAP,
    dataspace::op::COPY,
    dataspace::op::PHYS,
    dataspace::op::READ_ONLY,
    dataspace::op::RESIZE,
    dataspace::op::FREE,
];

fn run_pipe(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("pipe");
    let aim = |k: Option<Kind>| -> Aim {
        let ops: &'static [u16] = if k.is_some() {
            &PIPE_END_OPS
        } else {
            &PIPE_OPS
        };
        (
            Target {
                ops,
                hints: &[
                    0,
                    4,
                    4096,
                    69632,
                    65536,
                    SCRATCH,
                    SCRATCH + 4096,
                    0x103,
                    1 << 40,
                ],
                payloads: &[],
            },
            // Ends: aimed at, and simply dropped (the server learns it from the kernel).
            |_| Kind::Session,
        )
    };
    main_loop(e, o, main, &aim, |e| {
        // A pipe created and both ends dropped at once, many times: the server gives it back.
        let p = pipe::Client::new(main);
        for _ in 0..8 {
            let (a, b) = (e.slot(), e.slot());
            let _ = p.create(a, b);
            e.release(a);
            e.release(b);
        }
        // An end must not let itself be freed or resized.
        let (a, b) = (e.slot(), e.slot());
        if let Ok(ends) = p.create(a, b) {
            expect(
                e,
                dataspace::Client::new(ends.write).free(),
                |r| matches!(r, Err(RpcError::App(DsError::Unsupported))),
                "free of a pipe end (want Unsupported)",
            );
        }
        e.release(a);
        e.release(b);
        // Local sockets: listeners until the server has no more names, every backlog filled,
        // then all of it dropped; the server frees names and waiting connections.
        let mut held = alloc::vec::Vec::new();
        for k in 0..80u8 {
            let l = e.slot();
            match p.listen(&[0, b'h', k], 1000, l) {
                Ok(l) => {
                    for _ in 0..20 {
                        let (r, w) = (e.slot(), e.slot());
                        let ok = p.connect(&[0, b'h', k], r, w).is_ok();
                        e.release(r);
                        e.release(w);
                        if !ok {
                            break;
                        }
                    }
                    held.push(l);
                }
                Err(_) => {
                    e.release(l);
                    break;
                }
            }
        }
        for l in held {
            e.release(l);
        }
        ask(e, check::PIPE).1
    })
}

// ---- socket (netstack) ------------------------------------------------------------------------

/// The stack's endpoint: `socket` calls. A socket capability: `sock` calls.
const SOCKET_OPS: [u16; 2] = [socket::op::CREATE, socket::op::CONFIG];
const SOCK_OPS: [u16; 17] = [
    sock::op::REGISTER,
    sock::op::BIND,
    sock::op::LISTEN,
    sock::op::ACCEPT,
    sock::op::CONNECT,
    sock::op::SEND,
    sock::op::RECV,
    sock::op::SEND_TO,
    sock::op::RECV_FROM,
    sock::op::READY,
    sock::op::NAME,
    sock::op::SHUTDOWN,
    sock::op::CHANNEL,
    sock::op::SEND_BUF,
    sock::op::RECV_BUF,
    sock::op::SEND_TO_BUF,
    sock::op::RECV_FROM_BUF,
];
/// Kinds, ports (privileged, echo, ephemeral) and addresses (ours, QEMU's gateway, loopback,
/// broadcast), lengths at the limit.
const SOCKET_HINTS: [u64; 18] = [
    0,
    1,
    2,
    3,
    7,
    80,
    1023,
    7777,
    49152,
    65535,
    0x0a00_020f,
    0x0a00_0202,
    0x7f00_0001,
    0xffff_ffff,
    448,
    449,
    32768,
    32769,
];

fn run_socket(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("socket");
    let sk = socket::Client::new(main);
    let aim = |k: Option<Kind>| -> Aim {
        let ops: &'static [u16] = if k.is_some() { &SOCK_OPS } else { &SOCKET_OPS };
        (
            Target {
                ops,
                hints: &SOCKET_HINTS,
                payloads: &[],
            },
            // Sockets: aimed at, and simply dropped (the stack learns it from the kernel).
            |_| Kind::Session,
        )
    };
    main_loop(e, o, main, &aim, |e| {
        // Sockets until the stack says no more, then every one dropped.
        let mut held = [0u64; 100];
        let mut n = 0;
        while n < held.len() {
            let s = e.slot();
            let kind = if n % 2 == 0 {
                SockKind::Tcp
            } else {
                SockKind::Udp
            };
            match sk.create(kind, s) {
                Ok(c) => {
                    held[n] = c;
                    n += 1;
                }
                Err(_) => {
                    e.release(s);
                    break;
                }
            }
        }
        let s = e.slot();
        expect(
            e,
            sk.create(SockKind::Udp, s),
            |r| matches!(r, Err(RpcError::App(SockError::NoSpace))),
            "create past the client's limit (want NoSpace)",
        );
        e.release(s);
        for &c in &held[..n] {
            e.release(c);
        }
        // A privileged port, a huge backlog, sending on a listener, connects to nowhere.
        let s = e.slot();
        if let Ok(t) = sk.create(SockKind::Tcp, s) {
            let t = sock::Client::new(t);
            expect(
                e,
                t.bind(0, 80),
                |r| matches!(r, Err(RpcError::App(SockError::Denied))),
                "bind to port 80 (want Denied)",
            );
            let _ = t.listen(u32::MAX);
            expect(
                e,
                t.send(b"nobody"),
                |r| r.is_err(),
                "send on a listening socket",
            );
        }
        e.release(s);
        let s = e.slot();
        if let Ok(t) = sk.create(SockKind::Tcp, s) {
            let t = sock::Client::new(t);
            let _ = t.connect(0, 0);
            let _ = t.connect(0xffff_ffff, 9);
        }
        e.release(s);
        // A channel's offsets and lengths past its buffer, its calls on the socket itself, a map
        // past its end.
        let s = e.slot();
        if let Ok(u) = sk.create(SockKind::Udp, s) {
            let u = sock::Client::new(u);
            let c = e.slot();
            if let Ok(chv) = u.channel(c) {
                let ch = sock::Client::new(chv);
                let _ = u.connect(0x7f00_0001, 7);
                for (off, len) in [
                    (32000u32, 1000u32),
                    (u32::MAX, 2),
                    (0, u32::MAX),
                    (32768, 1),
                ] {
                    expect(
                        e,
                        ch.send_buf(off, len, false),
                        |r| matches!(r, Err(RpcError::App(SockError::Invalid))),
                        "send_buf past the channel's buffer (want Invalid)",
                    );
                    expect(
                        e,
                        ch.recv_from_buf(off, len),
                        |r| matches!(r, Err(RpcError::App(SockError::Invalid))),
                        "recv_from_buf past the channel's buffer (want Invalid)",
                    );
                }
                expect(
                    e,
                    u.send_buf(0, 16, false),
                    |r| matches!(r, Err(RpcError::App(SockError::BadSocket))),
                    "send_buf on the socket, not its channel (want BadSocket)",
                );
                let c2 = e.slot();
                expect(e, ch.channel(c2), |r| r.is_err(), "a channel of a channel");
                e.release(c2);
                expect(
                    e,
                    dataspace::Client::new(chv).map(
                        32768,
                        SCRATCH,
                        1,
                        MapFlags::READ,
                        [SCRATCH, 4096],
                    ),
                    |r| r.is_err(),
                    "map past the channel's buffer",
                );
            }
            e.release(c);
        }
        e.release(s);
        // A socket call on the stack's endpoint, which is no socket.
        expect(
            e,
            sock::Client::new(main).ready(),
            |r| r.is_err(),
            "ready asked on the stack's endpoint",
        );
        // Channels hoarded on one socket: the stack gives one client at most a quarter of them
        // (8), and the checker, another client, still gets one while these are held.
        let s = e.slot();
        let mut hoard = alloc::vec::Vec::new();
        if let Ok(u) = sk.create(SockKind::Udp, s) {
            let u = sock::Client::new(u);
            for _ in 0..40 {
                let c = e.slot();
                match u.channel(c) {
                    Ok(_) => hoard.push(c),
                    Err(_) => {
                        e.release(c);
                        break;
                    }
                }
            }
        }
        let held = hoard.len();
        expect(
            e,
            Ok::<usize, RpcError<SockError>>(held),
            |r| matches!(r, Ok(n) if *n <= 8),
            "channels one client holds (want at most 8)",
        );
        let checked = ask(e, check::SOCKET).1;
        for c in hoard {
            e.release(c);
        }
        e.release(s);
        checked
    })
}

// ---- net (a network driver's session protocol) ------------------------------------------------

const NET_OPS: [u16; 3] = [net::op::INFO, net::op::ATTACH, net::op::DETACH];

fn run_net(e: &mut Engine, o: &Opts) -> bool {
    let main = cap("net0");
    let nic = net::Client::new(main);
    let aim = |_k: Option<Kind>| -> Aim {
        (
            Target {
                ops: &NET_OPS,
                hints: &[0, 1, 2, 4096, 266240, 1 << 32, u64::MAX],
                payloads: &[],
            },
            |_| Kind::Other,
        )
    };
    main_loop(e, o, main, &aim, |e| {
        // Sessions over memory we do not have, or one page of it, are refused.
        let window = nic.info().map_or(0, |i| i.window);
        for (src, pages) in [(0x7000_0000_0000u64, 65), (SCRATCH, 1)] {
            let b = e.slot();
            let region = Map {
                src,
                dst: window,
                pages,
                flags: map::READ | map::WRITE,
            };
            expect(
                e,
                nic.attach(
                    region,
                    sawmill_rt::slots::TASK,
                    1,
                    sawmill_rt::slots::TASK,
                    b,
                ),
                |r| r.is_err(),
                "attach without the session's memory",
            );
            e.release(b);
        }
        expect(
            e,
            nic.detach(),
            |r| matches!(r, Err(RpcError::App(NetError::NoSession))),
            "detach without a session (want NoSession)",
        );
        expect(
            e,
            nic.info(),
            |r| matches!(r, Ok(i) if i.mac != 0 && i.mtu == 1500),
            "info",
        );
        true
    })
}
