//! Crash consistency (issue 16: "kill QEMU, not a server"): `./sawmill crash` boots the Linux
//! system with tests/crash/workload.c as its first process (new files, appends, overwrites, an
//! atomic replace by rename, a move, an unlink, a directory of several entries, a file past the
//! direct blocks, every change fsync'd), QEMU's `blklogwrites` recording every write and flush
//! of the disk; then replays the log to every flush and to points between flushes, and checks
//! each: `e2fsck -fy` repairs it (exit 0 or 1), `e2fsck -fn` is clean afterwards, and every state
//! an fsync acknowledged is there. The rule and the log format are unit-tested in
//! tools/sawmill/src/crash.rs; this is the whole thing on the real system.
use std::process::Command;

mod common;
use common::repo;

#[test]
fn every_crash_point_keeps_what_fsync_acknowledged() {
    let out = Command::new(repo().join("sawmill"))
        .args(["crash"])
        .output()
        .expect("running ./sawmill crash");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text
        .lines()
        .rfind(|l| l.starts_with("crash: ") && l.contains("points checked"))
        .unwrap_or_else(|| panic!("no summary line:\n{text}\n{out:?}"));
    println!("{summary}");
    assert!(out.status.success(), "{text}\n{out:?}");
    assert!(
        summary.ends_with(", 0 lost, 0 unrepairable"),
        "{summary}\n{text}"
    );
    // Every fsync of the workload (41) is a flush point, and every write between flushes is
    // a point (some 100).
    let n = |after: &str| -> usize {
        let i = summary.find(after).unwrap() + after.len();
        summary[i..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (at_flush, between) = (n("checked ("), n(" at flushes, "));
    assert!(at_flush >= 41, "{summary}");
    assert!(between >= 60, "{summary}");
}
