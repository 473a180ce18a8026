//! The kernel and IPC benchmarks. Prints `BENCH <name> <value> insn` lines; run under
//! `qemu -icount shift=0`, where `rdtsc` (after `lfence`) counts guest instructions.
//!
//! - `syscall.null`: the `Null` system call, kernel entry and exit.
//! - `ipc.null_rpc.roundtrip`: call + reply, register-only, measured in the client, against the
//!   hand-written server; client stub (`ipc::call`) and loop included.
//! - `ipc.null_rpc.idl`: the same through the IDL-generated client stub and server loop.
//! - `ipc.null_rpc.checked`: hand-written on both sides, with the checks the generated code
//!   makes (client: error and reply shape; server: receive error, opcode, shape, cleared reply
//!   words) — what `ipc.null_rpc.idl` is to be compared with.
//! - `ipc.oneway`: a send to a waiting higher-priority receiver, until the sender runs again.
//! - `pagefault.user_pager`: first touch of a page resolved by a pager in another task.
//! - `idl.client_stub.insn`, `idl.server_dispatch.insn`: instructions the generated stubs spend
//!   outside the kernel, from the difference against the assembly reference loops (whose counts
//!   are exact); an upper bound, as the Rust loop around the generated client adds a few.
#![no_std]
#![no_main]
use sawmill_abi::MsgTag;
use sawmill_benchprogs::*;
use sawmill_interfaces::bench;
use sawmill_rt::{env, ipc, println, sys};

sawmill_rt::entry!(main);

const N: u64 = 20_000;

fn per(n: u64, f: impl FnOnce()) -> u64 {
    let t0 = sys::rdtsc();
    f();
    let t1 = sys::rdtsc();
    (t1 - t0 + n / 2) / n
}

fn report(name: &str, v: u64) {
    println!("BENCH {} {} insn", name, v);
}

#[inline(never)]
fn idl_add(c: &bench::Client, a: u64, b: u64) -> u64 {
    c.add(a, b).unwrap_or(u64::MAX)
}

/// The hand-written twin of `idl_add`: the same call and the same reply check (no error, label 0,
/// exactly one word, no items), in the same never-inlined shape.
#[inline(never)]
fn checked_add(ep: u64, a: u64, b: u64, bad: &mut u64) -> u64 {
    let r = ipc::call(ep, MsgTag(REQ), [a, b, 0, 0]);
    if (r.err | (r.tag.0 & sawmill_interfaces::rpc::SHAPE ^ REP)) != 0 {
        *bad += 1;
        return u64::MAX;
    }
    r.w[0]
}

fn main() {
    let echo = env::cap("echo").expect("echo");
    let echo_idl = env::cap("echo-idl").expect("echo-idl");
    let echo_checked = env::cap("echo-checked").expect("echo-checked");
    let sink = env::cap("sink").expect("sink");
    // Warm up every path once (first-touch effects are not what we measure).
    let _ = ipc::call(echo, MsgTag(REQ), [1, 2, 0, 0]);
    let _ = ipc::call(echo_idl, MsgTag(REQ), [1, 2, 0, 0]);

    let null = per(N, || {
        for _ in 0..N {
            sys::null();
        }
    });
    report("syscall.null", null);

    // What a client does with each reply: check the error, use the result word. (Keeping the
    // whole seven-word result alive instead would add stores no client makes.)
    let mut failed = 0u64;
    let mut sum = 0u64;
    let rt = per(N, || {
        for i in 0..N {
            let r = ipc::call(echo, MsgTag(REQ), [i, 1, 0, 0]);
            if r.err != 0 {
                failed += 1;
            }
            sum = sum.wrapping_add(r.w[0]);
        }
    });
    // The echo server answers i + 1: the replies were real.
    if failed != 0 || sum != N * (N + 1) / 2 {
        println!(
            "bench-ipc: null RPC replies wrong ({} errors, sum {})",
            failed, sum
        );
        sys::thread_exit(1);
    }
    report("ipc.null_rpc.roundtrip", rt);

    // SAFETY: the reference loop only calls our echo endpoint.
    let raw = per(N, || unsafe { bench_raw_calls(echo, N) });
    // SAFETY: likewise, our generated-stub echo endpoint.
    let raw_idl_server = per(N, || unsafe { bench_raw_calls(echo_idl, N) });
    let c = bench::Client::new(echo_idl);
    let idl = per(N, || {
        for i in 0..N {
            core::hint::black_box(idl_add(&c, i, 1));
        }
    });
    let ce = bench::Client::new(echo);
    let idl_client_raw_server = per(N, || {
        for i in 0..N {
            core::hint::black_box(idl_add(&ce, i, 1));
        }
    });
    report("ipc.null_rpc.idl", idl);
    let _ = ipc::call(echo_checked, MsgTag(REQ), [1, 2, 0, 0]);
    let mut bad = 0u64;
    let checked = per(N, || {
        for i in 0..N {
            core::hint::black_box(checked_add(echo_checked, i, 1, &mut bad));
        }
    });
    if bad != 0 {
        println!("bench-ipc: checked null RPC failed {} times", bad);
        sys::thread_exit(1);
    }
    report("ipc.null_rpc.checked", checked);
    report("ipc.null_rpc.asm", raw);
    // Client: generated stub + its loop, minus the reference loop, plus the reference setup.
    report(
        "idl.client_stub.insn",
        (idl_client_raw_server + RAW_CLIENT_SETUP).saturating_sub(raw),
    );
    // Server: generated dispatch, minus the reference server's reply path, plus it back.
    report(
        "idl.server_dispatch.insn",
        (raw_idl_server + RAW_SERVER).saturating_sub(raw),
    );

    let ow = per(N, || {
        for i in 0..N {
            let _ = ipc::send(sink, MsgTag::new(1, 1), [i, 0, 0, 0]);
        }
    });
    report("ipc.oneway", ow);

    // Page faults resolved by the pager task: touch fresh pages of an unmapped region.
    let pages = 256u64;
    let region = 0x6000_0000u64;
    let pf = per(pages, || {
        for p in 0..pages {
            // SAFETY: the access faults; the pager maps a page there.
            unsafe { core::ptr::write_volatile((region + p * 4096) as *mut u8, 1) };
        }
    });
    report("pagefault.user_pager", pf);
    println!("bench-ipc: done");
}
