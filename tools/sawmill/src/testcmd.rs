//! `./sawmill test`: host unit tests, then system scenarios booted in QEMU, two at a time.
//! The last line printed is always `N passed, M failed`.

use crate::image;
use crate::qemu;
use crate::repo::{system_stem, Repo};
use crate::scenario;
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Options {
    pub names: Vec<String>,
    pub jobs: usize,
    pub host: bool,
}

#[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
}

/// Runs `run` on every item on `jobs` threads, each returning whether it passed and the lines
/// that report it; the lines of one item are printed together (under the tally's lock, so that
/// reports of parallel runs do not interleave). Returns the count.
pub fn run_parallel<T: Send>(
    jobs: usize,
    items: Vec<T>,
    run: impl Fn(&T) -> (bool, Vec<String>) + Sync,
) -> Tally {
    let queue = Mutex::new(items.into_iter().collect::<VecDeque<_>>());
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let Some(item) = queue.lock().unwrap().pop_front() else {
                    break;
                };
                let (ok, lines) = run(&item);
                let mut t = tally.lock().unwrap();
                if ok {
                    t.passed += 1;
                } else {
                    t.failed += 1;
                }
                let mut out = std::io::stdout().lock();
                for l in lines {
                    let _ = writeln!(out, "{l}");
                }
                let _ = out.flush();
            });
        }
    });
    tally.into_inner().unwrap()
}

/// Sums every `test result: ... X passed; Y failed` line of cargo test output.
pub fn parse_cargo_test(out: &str) -> Tally {
    let mut t = Tally::default();
    for line in out.lines() {
        let Some(rest) = line.trim().strip_prefix("test result:") else {
            continue;
        };
        let num_before = |word: &str| -> Option<u64> {
            let i = rest.find(word)?;
            rest[..i]
                .split_whitespace()
                .last()?
                .trim_end_matches(';')
                .parse()
                .ok()
        };
        t.passed += num_before(" passed").unwrap_or(0);
        t.failed += num_before(" failed").unwrap_or(0);
    }
    t
}

fn host_tests(repo: &Repo, logs: &Path) -> Tally {
    println!(
        "host tests: cargo test --no-fail-fast (log: {})",
        rel(repo, &logs.join("host-tests.log"))
    );
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    let log_path = logs.join("host-tests.log");
    let result = std::fs::File::create(&log_path).and_then(|f| {
        let f2 = f.try_clone()?;
        // --no-fail-fast: every test binary runs, so the counts cover the whole workspace.
        Command::new("cargo")
            .args(["test", "--no-fail-fast"])
            .current_dir(&repo.root)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .status()
    });
    let out = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut t = parse_cargo_test(&out);
    let ok = matches!(&result, Ok(st) if st.success());
    if !ok && t.failed == 0 {
        // Compile errors (or cargo not running at all) produce no result line: one failure.
        t.failed = 1;
    }
    let secs = start.elapsed().as_secs_f64();
    if ok && t.failed == 0 {
        println!("PASS host tests: {} passed ({secs:.1}s)", t.passed);
    } else {
        let why = match &result {
            Err(e) => format!("cannot run cargo: {e}"),
            Ok(_) if t.passed + t.failed == 1 && t.failed == 1 => {
                "cargo test failed to build or run".into()
            }
            Ok(_) => format!("{} passed, {} failed", t.passed, t.failed),
        };
        println!("FAIL host tests: {why}");
        let failed: Vec<&str> = out
            .lines()
            .filter_map(|l| {
                l.strip_prefix("test ")
                    .filter(|l| l.ends_with("... FAILED"))
            })
            .collect();
        for f in &failed {
            println!("    {f}");
        }
        if failed.is_empty() {
            for l in scenario::tail(&out, 30) {
                println!("    | {l}");
            }
        }
    }
    t
}

fn rel(repo: &Repo, p: &Path) -> String {
    p.strip_prefix(&repo.root)
        .unwrap_or(p)
        .display()
        .to_string()
}

/// Scenario files to run: all of systems/tests/*.toml (sorted), or the ones named.
fn scenario_paths(repo: &Repo, names: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    if names.is_empty() {
        return Ok(repo
            .list_systems("systems/tests")
            .into_iter()
            .map(|n| {
                let p = repo.root.join("systems/tests").join(format!("{n}.toml"));
                (n, p)
            })
            .collect());
    }
    names
        .iter()
        .map(|n| {
            let p = repo.root.join("systems/tests").join(format!("{n}.toml"));
            let p = if p.is_file() {
                p
            } else {
                repo.resolve_system(n)?
            };
            Ok((system_stem(&p), p))
        })
        .collect()
}

/// Boots one scenario and judges it. Returns the lines to print (first line PASS/FAIL) and
/// whether it passed.
pub fn run_scenario(repo: &Repo, name: &str, path: &Path) -> (bool, Vec<String>) {
    let start = Instant::now();
    let fail = |why: String| (false, vec![format!("FAIL {name}: {why}")]);
    let mf = match image::load(path) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let spec = match scenario::parse(mf.test.as_ref()) {
        Ok(s) => s,
        Err(e) => return fail(format!("{}: {e}", path.display())),
    };
    let img = repo.target().join("images").join(format!("{name}.img"));
    if let Err(e) = image::write_image(repo, &mf.system, &img) {
        return fail(e);
    }
    let logs = repo.target().join("test-logs");
    let log = logs.join(format!("{name}.log"));
    let qlog = logs.join(format!("{name}.qemu.log"));
    let com2_log = logs.join(format!("{name}.com2.log"));
    let _ = std::fs::remove_file(&log);
    // Scenario disks (issue 6): built fresh for every run, checked after it.
    let disks = match scenario::prepare_disks(
        &repo.root,
        &repo.target().join("disks"),
        name,
        &spec.disks,
    ) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let mut extra = scenario::disk::qemu_args(&disks);
    if disks.is_empty() {
        extra.clear();
    }
    extra.extend(spec.qemu_args.iter().cloned());
    let cfg = qemu::Config {
        image: img,
        memory: spec.memory.clone(),
        icount: false,
        extra,
        serial_log: Some(log.clone()),
        // A scenario that feeds or checks COM2 (the console server's line) gets it on a pipe.
        com2: if spec.com2_input.is_some()
            || !spec.com2_expect.is_empty()
            || !spec.com2_reject.is_empty()
        {
            qemu::Com2::Piped {
                input: spec.com2_input.clone().unwrap_or_default(),
                output: com2_log.clone(),
            }
        } else {
            qemu::Com2::None
        },
    };
    // Stop a run shortly after a reject string shows up instead of waiting for the timeout;
    // the grace period lets the rest of e.g. a panic message reach the log.
    let mut seen_at: Option<Instant> = None;
    let mut watch = || {
        let text = std::fs::read(&log).ok()?;
        let text = String::from_utf8_lossy(&text);
        if let Some(k) = spec.kill_after.as_deref().filter(|k| text.contains(k)) {
            return Some(format!("{}after `{k}`", qemu::KILL_NOW));
        }
        let r = scenario::rejected(&spec, &text)?;
        let t = *seen_at.get_or_insert_with(Instant::now);
        (t.elapsed() >= Duration::from_secs(2)).then(|| format!("`{r}` in the log"))
    };
    let outcome = match qemu::run(
        &cfg,
        Duration::from_secs(spec.timeout),
        Some(&qlog),
        Some(&mut watch),
    ) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    let mut problems = scenario::judge(&spec, &text, &outcome);
    problems.extend(scenario::post_checks(&repo.root, &spec.post, &disks));
    if !spec.com2_expect.is_empty() || !spec.com2_reject.is_empty() {
        let com2 = std::fs::read(&com2_log).unwrap_or_default();
        problems.extend(scenario::judge_com2(&spec, &com2));
    }
    let secs = start.elapsed().as_secs_f64();
    if problems.is_empty() {
        // Every run writes its boot image anew; a passing one's (tens of MiB, hundreds of
        // scenarios) is not kept, so a test run's disk use stays small. A failing one's stays
        // for replaying by hand.
        let _ = std::fs::remove_file(&cfg.image);
        return (true, vec![format!("PASS {name} ({secs:.1}s)")]);
    }
    let mut out = vec![format!("FAIL {name}: {} ({secs:.1}s)", problems.join("; "))];
    out.push(format!("    last lines of {}:", rel(repo, &log)));
    out.extend(
        scenario::tail(&text, 30)
            .iter()
            .map(|l| format!("    | {l}")),
    );
    // QEMU's note that we terminated it on timeout is noise; anything else it said matters.
    let qerr = std::fs::read_to_string(&qlog).unwrap_or_default();
    let qerr: Vec<&str> = qerr
        .lines()
        .filter(|l| !l.contains("terminating on signal"))
        .collect();
    if !qerr.is_empty() {
        out.push("    QEMU stderr:".into());
        out.extend(
            qerr[qerr.len().saturating_sub(10)..]
                .iter()
                .map(|l| format!("    ! {l}")),
        );
    }
    (false, out)
}

pub fn run(repo: &Repo, opts: &Options) -> i32 {
    let logs = repo.target().join("test-logs");
    if let Err(e) = std::fs::create_dir_all(&logs) {
        eprintln!("sawmill: {}: {e}", logs.display());
    }
    let mut total = Tally::default();
    if opts.host && opts.names.is_empty() {
        let t = host_tests(repo, &logs);
        total.passed += t.passed;
        total.failed += t.failed;
        // The format and lint gate counts as three tests of a full run.
        let (passed, failed) = crate::lint::run(repo);
        total.passed += passed;
        total.failed += failed;
    }
    let scenarios = match scenario_paths(repo, &opts.names) {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL scenarios: {e}");
            total.failed += 1;
            return finish(total);
        }
    };
    if scenarios.is_empty() {
        println!("no scenarios in systems/tests/");
        return finish(total);
    }
    println!("building guests");
    let _ = std::io::stdout().flush();
    if let Err(e) = crate::guest::build(repo) {
        for (name, _) in &scenarios {
            println!("FAIL {name}: {e}");
        }
        total.failed += scenarios.len() as u64;
        return finish(total);
    }
    let t = run_parallel(opts.jobs, scenarios, |(name, path)| {
        run_scenario(repo, name, path)
    });
    total.passed += t.passed;
    total.failed += t.failed;
    if opts.names.is_empty() {
        let t = linux_tests(repo, Vec::new(), opts.jobs, false);
        total.passed += t.passed;
        total.failed += t.failed;
    }
    finish(total)
}

/// The Linux harness (crate::linux::harness). Until the Linux system exists in this tree only
/// the host side (the oracle) runs, and counts as one test.
fn linux_tests(repo: &Repo, filters: Vec<String>, jobs: usize, host_only: bool) -> Tally {
    let mut opts = crate::linux::harness::Options {
        filters,
        jobs,
        host_only,
    };
    if !host_only {
        if let Err(why) = crate::linux::available(repo) {
            println!("SKIP linux cases in sawmill: {why}; running the host side only");
            opts.host_only = true;
            let t = crate::linux::harness::run(repo, &opts);
            let ok = t.failed == 0;
            println!(
                "{} linux oracle: {} host runs, {} failed",
                if ok { "PASS" } else { "FAIL" },
                t.passed + t.failed,
                t.failed
            );
            return Tally {
                passed: u64::from(ok),
                failed: u64::from(!ok),
            };
        }
    }
    crate::linux::harness::run(repo, &opts)
}

/// `./sawmill test-linux`: the harness alone, ending with the `N passed, M failed` line.
pub fn run_linux(repo: &Repo, filters: Vec<String>, jobs: usize, host_only: bool) -> i32 {
    if !host_only && crate::linux::available(repo).is_ok() {
        if let Err(e) = crate::guest::build(repo) {
            println!("FAIL linux: {e}");
            return finish(Tally {
                passed: 0,
                failed: 1,
            });
        }
    }
    finish(linux_tests(repo, filters, jobs, host_only))
}

fn finish(t: Tally) -> i32 {
    println!("{} passed, {} failed", t.passed, t.failed);
    if t.failed == 0 {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_cargo_test_results() {
        let out = "\
running 3 tests
test a ... ok
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

test result: FAILED. 7 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out
   Doc-tests x
test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
        assert_eq!(
            parse_cargo_test(out),
            Tally {
                passed: 10,
                failed: 2
            }
        );
        assert_eq!(
            parse_cargo_test("error[E0425]: cannot find value"),
            Tally::default()
        );
    }
}
