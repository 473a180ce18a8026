//! A stand-in for the Linux personality library in the proc scenarios: proc starts it exactly as
//! it starts the library (the Linux layout, the capabilities and environment records of the
//! contract), and it checks what it got, then ends the way its second argument says:
//! - `check`: checks the environment, capabilities and layout and proc's refusals of bad calls,
//!   then `proc.exit(7)`;
//! - `ud2`: an invalid instruction (proc: SIGILL);
//! - `segv`: a write to an unmapped address (proc: SIGSEGV);
//! - `abort`: `proc.killed(6)` (SIGABRT);
//! - `vanish`: ends its only thread without telling proc (proc: SIGKILL);
//! - `exec`: checks that bad exec requests are refused and leave it running, then execs itself
//!   in `check` mode (found through the new environment's `PATH`).
#![no_std]
#![no_main]

use sawmill_abi::MsgTag;
use sawmill_interfaces::{proc, ProcError};
use sawmill_linux::layout;
use sawmill_rt::{env, ipc, println, slots, utcb};

sawmill_rt::entry!(main);

fn check(ok: bool, what: core::fmt::Arguments) {
    if ok {
        println!("proc-standin: PASS {}", what);
    } else {
        println!("proc-standin: FAIL {}", what);
    }
}

fn bytes(kind: u64) -> &'static [u8] {
    env::find_all(kind).next().map_or(&[][..], |r| r.1)
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    b.get(i * 4..i * 4 + 4)
        .map_or(u32::MAX, |w| u32::from_le_bytes(w.try_into().unwrap()))
}

fn checks(p: &proc::Client) {
    let argv: alloc::vec::Vec<&str> = env::args().collect();
    check(
        argv == ["/bin/standin", "check", "two words"],
        format_args!("argv {:?}", argv),
    );
    let exec = bytes(env::KIND_LINUX_EXEC);
    check(
        exec == b"/bin/standin",
        format_args!("program path {:?}", core::str::from_utf8(exec)),
    );
    let envs: alloc::vec::Vec<&[u8]> = env::find_all(env::KIND_LINUX_ENV).map(|r| r.1).collect();
    check(
        envs == [&b"HOME=/root"[..], &b"PATH=/bin"[..]],
        format_args!("environment ({} strings)", envs.len()),
    );
    let ids = bytes(env::KIND_LINUX_IDS);
    check(
        env::value(env::KIND_LINUX_IDS) == Some(1)
            && (0..5).all(|i| u32_at(ids, i) == 0)
            && ids.len() == 20,
        format_args!(
            "pid {:?}, parent and credentials {:?}",
            env::value(env::KIND_LINUX_IDS),
            ids
        ),
    );
    let clock = bytes(env::KIND_LINUX_CLOCK);
    let unix = env::value(env::KIND_LINUX_CLOCK).unwrap_or(0);
    let khz = clock
        .get(8..16)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
    // The RTC reads the host's time: after 2020 and before 2100.
    check(
        (1_577_836_800..4_102_444_800).contains(&unix) && khz > 0,
        format_args!("clock from the RTC ({} s, TSC {} kHz)", unix, khz),
    );
    let seed = bytes(env::KIND_LINUX_SEED);
    check(
        seed.len() == 32 && seed.iter().any(|&b| b != 0),
        format_args!("a 32-byte seed"),
    );
    check(
        bytes(env::KIND_LINUX_CWD) == b"/" && env::value(env::KIND_LINUX_TRACE) == Some(0),
        format_args!("working directory / and tracing off"),
    );
    let caps = ["vfs", "mem", "proc", "sys:factory"];
    check(
        caps.iter().all(|c| env::cap(c).is_some()),
        format_args!("capabilities {:?}", caps),
    );
    handoff_checks();
    check(
        utcb() as *const _ as u64 == layout::LIB_UTCB
            && env::heap().0 == layout::LIB_HEAP
            && env::heap().1 > 0,
        format_args!("the Linux layout (UTCB and heap in the library's zone)"),
    );
    // The factory is ours to use: a thread of its own.
    let t = sawmill_rt::thread::create(sawmill_abi::ObjKind::Endpoint, 0);
    check(t.is_ok(), format_args!("an own factory ({:?})", t.err()));
    // Bad calls are refused, and the caller keeps running.
    check(
        p.exit(256) == Err(sawmill_interfaces::rpc::Error::App(ProcError::Invalid)),
        format_args!("exit(256) refused"),
    );
    check(
        p.killed(0) == Err(sawmill_interfaces::rpc::Error::App(ProcError::Invalid))
            && p.killed(65) == Err(sawmill_interfaces::rpc::Error::App(ProcError::Invalid)),
        format_args!("killed(0) and killed(65) refused"),
    );
    // Only the console passes typed signals on; a process's own stop needs a stop signal.
    check(
        p.tty_signal(2) == Err(sawmill_interfaces::rpc::Error::App(ProcError::NotPermitted))
            && p.stop(15) == Err(sawmill_interfaces::rpc::Error::App(ProcError::Invalid)),
        format_args!("tty_signal from a process and stop(SIGTERM) refused"),
    );
    let proc_ep = env::cap("proc").unwrap_or(0);
    let r = ipc::call(proc_ep, MsgTag::new(77, 1), [1, 2, 3, 4]);
    check(
        r.err == 0 && r.tag.label() != 0,
        format_args!("an unknown operation refused (label {:#x})", r.tag.label()),
    );
}

extern crate alloc;

/// After `exec` mode's exec: two capabilities were handed on and the second revoked before the
/// exec; the handoff counts both, only the first is placed (`hand0`), and it is the endpoint.
fn handoff_checks() {
    let Some(count) = env::value(env::KIND_LINUX_HANDOFF) else {
        return;
    };
    let name = |i: usize| alloc::format!("{}{}", sawmill_proc_api::HANDOFF_CAP_PREFIX, i);
    let kept = env::cap(&name(0));
    check(
        count == 2 && env::cap(&name(1)).is_none() && kept.is_some(),
        format_args!(
            "a handoff of {}: the revoked capability left out ({:?})",
            count, kept
        ),
    );
}

fn send_request(
    p: &proc::Client,
    bytes: &[u8],
) -> Result<(), sawmill_interfaces::rpc::Error<ProcError>> {
    for chunk in bytes.chunks(480) {
        p.exec_data(chunk)?;
    }
    p.exec()
}

fn exec_mode(p: &proc::Client) {
    use alloc::string::String;
    use alloc::vec;
    use sawmill_interfaces::rpc::Error::App;
    let r = send_request(p, b"garbage");
    check(
        r == Err(App(ProcError::Invalid)),
        format_args!("a malformed exec request refused ({:?})", r),
    );
    let req = |program: &str| sawmill_proc_api::ExecRequest {
        program: String::from(program),
        cwd: String::from("/"),
        argv: vec![
            String::from("/bin/standin"),
            String::from("check"),
            String::from("two words"),
        ],
        env: vec![String::from("HOME=/root"), String::from("PATH=/bin")],
    };
    let r = send_request(p, &req("/bin/nope").encode());
    check(
        r == Err(App(ProcError::NotFound)),
        format_args!(
            "exec of a missing program refused, the caller runs on ({:?})",
            r
        ),
    );
    let r = send_request(p, &req("/").encode());
    check(
        r == Err(App(ProcError::Denied)),
        format_args!("exec of a directory refused ({:?})", r),
    );
    let big = vec![0u8; sawmill_proc_api::MAX_EXEC_REQUEST + 1];
    let r = send_request(p, &big);
    check(
        r == Err(App(ProcError::TooBig)) || r == Err(App(ProcError::Invalid)),
        format_args!("an oversized exec request refused ({:?})", r),
    );
    // Issue 16: a capability handed on for the new image whose object was revoked meanwhile
    // (a server that died, as root revokes a dead incarnation's endpoints) is left out; the
    // exec goes on. The new image checks it got one and not the other (`handoff_checks`).
    let kept = sawmill_rt::thread::create(sawmill_abi::ObjKind::Endpoint, 0);
    let revoked = sawmill_rt::thread::create(sawmill_abi::ObjKind::Endpoint, 0);
    if let (Ok(kept), Ok(revoked)) = (kept, revoked) {
        let r = p
            .handoff(kept, true)
            .and_then(|()| p.handoff(revoked, false));
        check(
            r.is_ok(),
            format_args!("two capabilities handed off ({:?})", r),
        );
        let r = sawmill_rt::sys::cap_revoke(revoked);
        check(r.is_ok(), format_args!("the second revoked ({:?})", r));
    } else {
        println!("proc-standin: FAIL endpoints to hand off");
    }
    println!("proc-standin: exec standin");
    let r = send_request(p, &req("standin").encode());
    println!("proc-standin: FAIL exec returned {:?}", r);
}

fn main() {
    let Some(ep) = env::cap("proc") else {
        println!("proc-standin: FAIL no proc capability");
        return;
    };
    let p = proc::Client::new(ep);
    match env::arg(1).unwrap_or("") {
        "check" => {
            checks(&p);
            println!("proc-standin: exiting with 7");
            let r = p.exit(7);
            println!("proc-standin: FAIL exit returned {:?}", r);
        }
        "ud2" => {
            // SAFETY: deliberately raises #UD; proc ends the process.
            unsafe { core::arch::asm!("ud2") };
        }
        "segv" => {
            // SAFETY: deliberately writes to an unmapped page; proc ends the process.
            unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
        }
        "abort" => {
            let r = p.killed(6);
            println!("proc-standin: FAIL killed returned {:?}", r);
        }
        "exec" => exec_mode(&p),
        "vanish" => {
            let _ = slots::TASK;
            sawmill_rt::exit(3);
        }
        m => println!("proc-standin: FAIL unknown mode {:?}", m),
    }
}
