//! Helpers shared by the file-system test programs.
#![no_std]

extern crate alloc;

/// Checks a condition; on failure prints `NAME: FAIL ...` (the scenarios reject FAIL) and ends
/// the program with a non-zero status.
#[macro_export]
macro_rules! check {
    ($c:expr, $($t:tt)*) => {
        if !$c {
            sawmill_rt::println!("{}: FAIL {}", sawmill_rt::env::name(), format_args!($($t)*));
            sawmill_rt::exit(1);
        }
    };
}

/// The client library over the `vfs` capability the manifest gave us.
pub fn files() -> sawmill_fsclient::Files {
    let vfs = sawmill_rt::env::cap("vfs").expect("vfs endpoint");
    sawmill_fsclient::Files::new(vfs)
}

/// Reads a whole file through the library.
pub fn read_file(
    f: &mut sawmill_fsclient::Files,
    path: &str,
) -> Result<alloc::vec::Vec<u8>, sawmill_fsclient::Error> {
    let fd = f.open(path, sawmill_fsclient::O_READ, 0)?;
    let mut out = alloc::vec::Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = f.read(fd, &mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    f.close(fd)?;
    Ok(out)
}

/// The value of a file-system call that must succeed; on failure prints `NAME: FAIL what: error`
/// and ends the program with a non-zero status.
pub fn ok<T>(r: Result<T, sawmill_fsclient::Error>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            sawmill_rt::println!("{}: FAIL {}: {:?}", sawmill_rt::env::name(), what, e);
            sawmill_rt::exit(1)
        }
    }
}

/// Sleeps `ms` milliseconds on notification `timer` (nothing signals it: only the deadline ends
/// the wait).
pub fn sleep_ms(timer: u64, ms: u64) {
    let khz = sawmill_rt::clock::Wall::get().khz;
    let deadline = sawmill_rt::sys::rdtsc() + ms * khz;
    while sawmill_rt::sys::rdtsc() < deadline {
        if sawmill_rt::sys::notify_wait_until(timer, deadline).is_err() {
            break;
        }
    }
}

/// Asks root to kill server `name` (manifest `may_kill`): true if it did (and restarted it, by
/// its policy, before answering).
pub fn kill_server(name: &str) -> bool {
    let r = sawmill_rt::ipc::call(
        sawmill_rt::slots::PAGER,
        sawmill_abi::MsgTag::new(sawmill_manifest::KILL_LABEL, 4),
        sawmill_manifest::name_words(name),
    );
    r.err == 0 && r.tag.label() == 0
}
