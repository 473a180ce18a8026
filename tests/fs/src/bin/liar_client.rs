//! Scenario vfs-liar (issue 12, hole 1): a protocol error from a live file-system server must
//! fail one request, not the mount. `liar-pfs` answers every `lookup` with a malformed reply; a
//! `stat` through the VFS that needs a lookup must fail with an error other than `Gone`, and the
//! mount must still answer afterwards (`stat("/")`, served by `getattr`), again and again. Before
//! the fix the first malformed reply made the VFS print "lost its file system" and answer `Gone`
//! to every client from then on.
#![no_std]
#![no_main]

use sawmill_fstests::check;
use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{vfs, FsError};
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

fn main() {
    let v = vfs::Client::new(env::cap("vfs").expect("vfs endpoint"));
    if env::arg(0) == Some("revive") {
        return revive(&v, env::arg(1).unwrap_or("liar"));
    }
    for round in 0..3 {
        let st = v.stat(b"/", true);
        check!(
            matches!(&st, Ok(s) if s.mode & 0o170000 == 0o040000),
            "round {}: stat of / through a live mount: {:?}",
            round,
            st.map(|s| s.mode)
        );
        let bad = v.stat(b"/x", true);
        check!(
            matches!(bad, Err(RpcError::App(e)) if e != FsError::Gone),
            "round {}: a malformed reply of a live PFS must fail that request only, got {:?}",
            round,
            bad.map(|s| s.mode)
        );
    }
    println!(
        "liar-client: PASS a live PFS's malformed replies fail their requests, the mount stays"
    );
}

/// Scenario vfs-revive-dies: `stat("/")` answers, root kills the PFS, and the next
/// `stat("/")` answers too, though the VFS's first reconnects meet incarnations that die in the
/// middle (`liar-pfs dies-in-root`). Before the fix the VFS gave up at the first ("its file
/// system did not come back") and the mount stayed dead.
fn revive(v: &vfs::Client, pfs: &str) {
    let is_dir = |st: &Result<vfs::StatOut, RpcError<FsError>>| matches!(st, Ok(s) if s.mode & 0o170000 == 0o040000);
    let st = v.stat(b"/", true);
    check!(
        is_dir(&st),
        "stat of / before the kill: {:?}",
        st.map(|s| s.mode)
    );
    check!(
        sawmill_fstests::kill_server(pfs),
        "root refused to kill {}",
        pfs
    );
    let st = v.stat(b"/", true);
    check!(
        is_dir(&st),
        "stat of / after the kill (its next incarnations die in a reconnect): {:?}",
        st.map(|s| s.mode)
    );
    println!("liar-client: PASS the mount came back past incarnations that died reconnecting");
}
