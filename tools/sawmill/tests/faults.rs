//! The short fault-injection campaign of `make test` (issue 16): `./sawmill faults` injects a few
//! hundred seeded faults of every kind it injects by default into the campaign system's
//! restartable servers while the workload writes, fsyncs and reads back files, and must meet
//! every goal: no kernel or root crash, no hang, no fsync'd byte lost, `e2fsck -fn` clean, and
//! the share of faults the workload never noticed (99% for a block driver, 90% for a PFS). The
//! tool's exit status says the same; the summary line is checked here on its own too.
use std::process::Command;

mod common;
use common::repo;

/// A few hundred faults: about 15 s of wall time under TCG on a quiet machine.
const COUNT: &str = "300";

#[test]
fn a_short_campaign_meets_every_goal() {
    let out = Command::new(repo().join("sawmill"))
        .args(["faults", "--seed", "16", "--count", COUNT])
        .output()
        .expect("running ./sawmill faults");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text
        .lines()
        .find(|l| l.starts_with("faults: ") && l.contains(" acknowledged bytes lost"))
        .unwrap_or_else(|| panic!("no summary line:\n{text}\n{out:?}"));
    let words: Vec<&str> = summary.split(' ').collect();
    assert_eq!(words[1], COUNT, "{summary}");
    for (what, at) in [
        ("kernel/root crashes", 3),
        ("hung", 13),
        ("acknowledged bytes lost", 15),
    ] {
        assert_eq!(words[at], "0", "{what}: {summary}\n{text}");
    }
    assert!(summary.ends_with("fsck clean"), "{summary}\n{text}");
    for kind in ["kill", "panic", "corrupt", "wild", "drop", "eio"] {
        assert!(
            text.contains(&format!("faults: {kind}: ")),
            "no `{kind}` fault injected:\n{text}"
        );
    }
    assert!(out.status.success(), "a goal is missed:\n{text}");
}
