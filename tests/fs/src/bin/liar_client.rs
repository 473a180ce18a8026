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
