//! `./sawmill lint`: the format and lint gate `make test` and CI run.
//!
//! Three checks, each a pass or a failure of its own: `cargo fmt --check` over the workspace
//! (settings in `rustfmt.toml`), clippy with `-D warnings` over the host crates (the workspace's
//! default members, all targets, tests included), and clippy with `-D warnings` over the guest
//! crates for `x86_64-unknown-none` (the crates marked `[package.metadata.sawmill] guest =
//! true`, which do not build for the host, and the libraries they use).

use crate::guest::guest_packages;
use crate::repo::{Repo, GUEST_TARGET};
use std::process::{Command, Stdio};

/// One lint check: its name and the cargo arguments that run it.
struct Check {
    name: &'static str,
    args: Vec<String>,
}

fn checks(repo: &Repo) -> Result<Vec<Check>, String> {
    let guests = guest_packages(repo)?;
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // The workspace's default members are the crates that build for the host (what `cargo
    // test` runs); clippy lints every workspace crate it compiles, so the guest run below covers
    // the guest-only libraries (rt, fsclient, rm, interfaces) through the programs using them.
    let host = strs(&["clippy", "--all-targets", "--", "-D", "warnings"]);
    let mut guest = strs(&["clippy", "--release", "--target", GUEST_TARGET]);
    for g in &guests {
        guest.extend(["-p".to_string(), g.clone()]);
    }
    guest.extend(strs(&["--", "-D", "warnings"]));
    Ok(vec![
        Check {
            name: "rustfmt",
            args: strs(&["fmt", "--all", "--", "--check"]),
        },
        Check {
            name: "clippy (host crates)",
            args: host,
        },
        Check {
            name: "clippy (guest crates)",
            args: guest,
        },
    ])
}

/// Runs every check, printing `PASS lint: NAME` or `FAIL lint: NAME` with the tail of its
/// output; returns (passed, failed).
pub fn run(repo: &Repo) -> (u64, u64) {
    let checks = match checks(repo) {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL lint: {e}");
            return (0, 1);
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for c in checks {
        let out = Command::new("cargo")
            .args(&c.args)
            .current_dir(&repo.root)
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                println!("PASS lint: {}", c.name);
                passed += 1;
            }
            Ok(o) => {
                println!("FAIL lint: {} (cargo {})", c.name, c.args.join(" "));
                let text = String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr);
                for l in crate::scenario::tail(&text, 40) {
                    println!("    | {l}");
                }
                failed += 1;
            }
            Err(e) => {
                println!("FAIL lint: {}: cannot run cargo: {e}", c.name);
                failed += 1;
            }
        }
    }
    (passed, failed)
}
