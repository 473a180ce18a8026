//! Scenario settings (`[test]` in a manifest) and judging a finished run against them.

use crate::qemu::Outcome;

#[derive(Debug, Clone, PartialEq)]
pub struct TestSpec {
    /// Wall-clock seconds before QEMU is killed.
    pub timeout: u64,
    /// Must all appear in the serial log, in this order.
    pub expect: Vec<String>,
    /// Must not appear anywhere in the serial log.
    pub reject: Vec<String>,
    /// Expected guest exit code.
    pub exit: u8,
    pub memory: String,
    pub qemu_args: Vec<String>,
}

pub const DEFAULT_TIMEOUT: u64 = 120;

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            timeout: DEFAULT_TIMEOUT,
            expect: Vec::new(),
            reject: vec!["PANIC".into(), "FAIL".into()],
            exit: 0,
            memory: "256M".into(),
            qemu_args: Vec::new(),
        }
    }
}

const KEYS: &[&str] = &["timeout", "expect", "reject", "exit", "memory", "qemu_args"];

/// Reads a `[test]` table; unknown keys are errors so a typo cannot silently weaken a test.
pub fn parse(table: Option<&toml::Table>) -> Result<TestSpec, String> {
    let mut s = TestSpec::default();
    let Some(t) = table else { return Ok(s) };
    for k in t.keys() {
        if !KEYS.contains(&k.as_str()) {
            return Err(format!(
                "[test]: unknown key `{k}` (known: {})",
                KEYS.join(", ")
            ));
        }
    }
    let strings = |k: &str| -> Result<Option<Vec<String>>, String> {
        match t.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
                .map(Some)
                .ok_or_else(|| format!("[test]: `{k}` must be an array of strings")),
        }
    };
    if let Some(v) = t.get("timeout") {
        s.timeout = v
            .as_integer()
            .filter(|&n| n > 0)
            .ok_or("[test]: `timeout` must be a positive number of seconds")?
            as u64;
    }
    if let Some(v) = strings("expect")? {
        s.expect = v;
    }
    if let Some(v) = strings("reject")? {
        s.reject = v;
    }
    if let Some(v) = t.get("exit") {
        s.exit = v
            .as_integer()
            .filter(|n| (0..=15).contains(n))
            .ok_or("[test]: `exit` must be a guest exit code 0..=15")? as u8;
    }
    if let Some(v) = t.get("memory") {
        s.memory = v
            .as_str()
            .ok_or("[test]: `memory` must be a string like \"256M\"")?
            .into();
    }
    if let Some(v) = strings("qemu_args")? {
        s.qemu_args = v;
    }
    Ok(s)
}

/// The first reject string present in `log`, if any.
pub fn rejected<'a>(spec: &'a TestSpec, log: &str) -> Option<&'a str> {
    spec.reject
        .iter()
        .find(|r| !r.is_empty() && log.contains(r.as_str()))
        .map(|s| s.as_str())
}

/// Every way the run fell short, most telling first; empty means PASS.
pub fn judge(spec: &TestSpec, log: &str, outcome: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(r) = rejected(spec, log) {
        problems.push(format!("reject string `{r}` seen in the log"));
    }
    match outcome {
        Outcome::Guest(c) if *c == spec.exit => {}
        Outcome::Guest(c) => problems.push(format!("guest exit code {c}, expected {}", spec.exit)),
        Outcome::Stopped(_) => {} // Already reported as the reject string.
        other => problems.push(other.describe()),
    }
    let mut at = 0;
    for e in &spec.expect {
        match log[at..].find(e.as_str()) {
            Some(i) => at += i + e.len(),
            None => {
                let anywhere = log.contains(e.as_str());
                problems.push(if anywhere {
                    format!("expected `{e}` appears, but out of order")
                } else {
                    format!("missing expected `{e}`")
                });
                break; // Later expectations are judged relative to this one; stop here.
            }
        }
    }
    problems
}

/// The last `n` lines of a log, for failure reports.
pub fn tail(log: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        let t: toml::Table = r#"
            timeout = 60
            expect = ["pong: badge 1", "PASS pingpong"]
            exit = 0
        "#
        .parse()
        .unwrap();
        parse(Some(&t)).unwrap()
    }

    #[test]
    fn parses_with_defaults() {
        let s = spec();
        assert_eq!(s.timeout, 60);
        assert_eq!(s.reject, vec!["PANIC", "FAIL"]);
        assert_eq!(s.memory, "256M");
        assert_eq!(parse(None).unwrap(), TestSpec::default());
        let bad: toml::Table = "expekt = []".parse().unwrap();
        assert!(parse(Some(&bad)).unwrap_err().contains("`expekt`"));
        let bad: toml::Table = "exit = 300".parse().unwrap();
        assert!(parse(Some(&bad)).is_err());
        let bad: toml::Table = "expect = [1]".parse().unwrap();
        assert!(parse(Some(&bad)).is_err());
    }

    #[test]
    fn judging() {
        let s = spec();
        let good = "boot\npong: badge 1\nping done\nPASS pingpong\n";
        assert!(judge(&s, good, &Outcome::Guest(0)).is_empty());
        let p = judge(&s, good, &Outcome::Guest(1));
        assert_eq!(p, vec!["guest exit code 1, expected 0"]);
        let p = judge(&s, "PASS pingpong\npong: badge 1\n", &Outcome::Guest(0));
        assert_eq!(
            p,
            vec!["expected `PASS pingpong` appears, but out of order"]
        );
        let p = judge(&s, "pong: badge 1\n", &Outcome::Timeout(60));
        assert_eq!(p[0], "timed out after 60s (QEMU killed)");
        assert_eq!(p[1], "missing expected `PASS pingpong`");
        let p = judge(
            &s,
            "pong: badge 1\nKERNEL PANIC: x\n",
            &Outcome::Stopped("x".into()),
        );
        assert_eq!(p[0], "reject string `PANIC` seen in the log");
        let p = judge(&s, good, &Outcome::Qemu(0));
        assert!(p[0].contains("without a guest exit code"));
    }

    #[test]
    fn tails() {
        assert_eq!(tail("a\nb\nc\n", 2), vec!["b", "c"]);
        assert_eq!(tail("a", 5), vec!["a"]);
    }
}
