//! `./sawmill hostile`: the long run of the standing hostile client (issue 12). Boots every
//! `systems/tests/hostile-*.toml` scenario that has a message count, with it raised (default
//! 100,000 per server; the short run in `./sawmill test` sends 20,000), and prints one table row
//! per server:
//! messages sent, alive, wrong answers, hangs, seed. Touches only target/hostile/ (the rewritten
//! manifests) and what a scenario run writes.

use crate::repo::Repo;
use crate::testcmd;
use std::io::Write;

/// The short run's message count, as the scenario manifests spell it.
const SHORT: &str = "\"20000\"]";

/// A manifest of the short run rewritten for `count` messages per server (and `seed`, if given):
/// the hostile client's count argument, the expected summary prefix and the timeout.
pub fn lengthen(text: &str, count: u64, seed: Option<u64>) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut l = line.to_string();
        if l.starts_with("args = [") && l.ends_with(SHORT) {
            l = l.replace(SHORT, &format!("\"{count}\"]"));
            if let Some(s) = seed {
                // args = ["MODE", "SEED", "COUNT"]: the seed is the second string.
                let mut parts: Vec<String> = l.split('"').map(String::from).collect();
                if parts.len() == 7 {
                    parts[3] = s.to_string();
                    l = parts.join("\"");
                }
            }
        } else if l.starts_with("timeout = ") {
            // About 20,000 messages a second under TCG; generous, since hosts differ.
            l = format!("timeout = {}", 120 + count / 1000 * 3);
        }
        out.push_str(&l.replace("hangs=0 sent=20\"", "hangs=0 sent=\""));
        out.push('\n');
    }
    out
}

/// The summary lines (`hostile: NAME alive=... wrong=... hangs=... sent=... seed=...`) of a log.
pub fn summaries(log: &str) -> Vec<[String; 6]> {
    log.lines()
        .filter_map(|l| l.strip_prefix("hostile: "))
        .filter(|l| l.contains(" alive="))
        .map(|l| {
            let name = l.split(' ').next().unwrap_or("?").to_string();
            let field = |k: &str| {
                l.split(' ')
                    .find_map(|f| f.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
                    .unwrap_or("?")
                    .to_string()
            };
            [
                name,
                field("sent"),
                field("alive"),
                field("wrong"),
                field("hangs"),
                field("seed"),
            ]
        })
        .collect()
}

pub fn run(repo: &Repo, count: u64, seed: Option<u64>) -> i32 {
    let dir = repo.target().join("hostile");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("sawmill: {}: {e}", dir.display());
        return 1;
    }
    let names: Vec<String> = repo
        .list_systems("systems/tests")
        .into_iter()
        .filter(|n| n.starts_with("hostile-"))
        .filter(|n| {
            // Only the runs with a message count to raise (not e.g. the watchdog's own test).
            let p = repo.root.join("systems/tests").join(format!("{n}.toml"));
            std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l.ends_with(SHORT)))
        })
        .collect();
    println!("building guests");
    if let Err(e) = crate::guest::build(repo) {
        println!("FAIL {e}");
        return 1;
    }
    let mut rows = Vec::new();
    let mut failed = 0;
    for n in &names {
        let src = repo.root.join("systems/tests").join(format!("{n}.toml"));
        let text = match std::fs::read_to_string(&src) {
            Ok(t) => t,
            Err(e) => {
                println!("FAIL {n}: {}: {e}", src.display());
                failed += 1;
                continue;
            }
        };
        let long = dir.join(format!("{n}.toml"));
        if let Err(e) = std::fs::write(&long, lengthen(&text, count, seed)) {
            println!("FAIL {n}: {}: {e}", long.display());
            failed += 1;
            continue;
        }
        let name = format!("{n}-long");
        let (ok, lines) = testcmd::run_scenario(repo, &name, &long);
        for l in &lines {
            println!("{l}");
        }
        let _ = std::io::stdout().flush();
        failed += !ok as u32;
        let log = repo.target().join("test-logs").join(format!("{name}.log"));
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
        let found = summaries(&text);
        if found.is_empty() {
            rows.push([
                n.trim_start_matches("hostile-").to_string(),
                "-".into(),
                "no".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
        rows.extend(found);
    }
    println!();
    println!(
        "{:<8} {:>10} {:>6} {:>6} {:>6} {:>8}",
        "server", "sent", "alive", "wrong", "hangs", "seed"
    );
    for r in &rows {
        println!(
            "{:<8} {:>10} {:>6} {:>6} {:>6} {:>8}",
            r[0], r[1], r[2], r[3], r[4], r[5]
        );
    }
    println!("{} scenarios, {} failed", names.len(), failed);
    i32::from(failed != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT_MANIFEST: &str = "name = \"hostile-x\"\n[[server]]\nargs = [\"vfs\", \"1202\", \"20000\"]\nargs = [\"check\"]\n[test]\ntimeout = 120\nexpect = [\n  \"hostile: vfs alive=yes wrong=0 hangs=0 sent=20\",\n]\n";

    #[test]
    fn lengthens_count_timeout_and_expectation() {
        let l = lengthen(SHORT_MANIFEST, 100_000, None);
        assert!(l.contains("args = [\"vfs\", \"1202\", \"100000\"]"), "{l}");
        assert!(l.contains("args = [\"check\"]"));
        assert!(l.contains("timeout = 420"));
        assert!(l.contains("\"hostile: vfs alive=yes wrong=0 hangs=0 sent=\""));
        let l = lengthen(SHORT_MANIFEST, 100_000, Some(77));
        assert!(l.contains("args = [\"vfs\", \"77\", \"100000\"]"), "{l}");
    }

    #[test]
    fn reads_summary_lines() {
        let log = "hostile: vfs starting, seed=1\nhostile: vfs alive=yes wrong=0 hangs=0 sent=100011 checks=3 seed=1202\nroot: done\n";
        let s = summaries(log);
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0],
            ["vfs", "100011", "yes", "0", "0", "1202"].map(String::from)
        );
    }
}
