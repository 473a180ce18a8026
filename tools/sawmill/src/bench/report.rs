//! Benchmark report (issue 7): `results.json`, `results.md`, `reread.svg` (log axes) and, from
//! issue 17, `ratios.svg` (every `ratio.*` as a bar against the 1.0 line).
//!
//! Input: every metric of a run, sawmill's and Linux's, in any order. Ratio metrics
//! (`ratio.*`, unit `ratio`, value = sawmill / Linux) are computed by [`ratios`] from the pairs
//! in [`RULES`] and written into `results.json` after the input metrics; `write` does not return
//! them (call `ratios` for that). Works with Linux figures only (no sawmill counterparts yet).

use super::Metric;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

/// How a sawmill metric maps to its Linux counterpart.
pub struct Rule {
    /// Sawmill name, or its prefix when followed by `.<config>` (and `.<size>` when `sized`).
    pub sawmill: &'static str,
    /// Linux name; when `sized`, `<size>` is appended (`linux.reread4k.` + `64k`).
    pub linux: &'static str,
    /// Ratio name prefix; the sawmill name's suffix (`.<config>[.<size>]`) is appended.
    pub ratio: &'static str,
    /// Names carry `.<config>.<size>` (reread) rather than an optional `.<config>`.
    pub sized: bool,
    /// Shown for context (different operations); the ratio is still computed.
    pub context: bool,
    /// The same program on both systems (sawmill's Linux personality running `lbench`):
    /// `<sawmill>X` pairs with `<linux>X` and gives `<ratio>X`, for any rest `X`.
    pub mirror: bool,
}

/// The mapping from sawmill names to Linux names (also printed in `results.md`).
pub const RULES: &[Rule] = &[
    Rule {
        sawmill: "fs.reread4k",
        linux: "linux.reread4k.",
        ratio: "ratio.reread4k",
        sized: true,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "mem.fault.anon",
        linux: "linux.pagefault.anon",
        ratio: "ratio.pagefault.anon",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.open",
        linux: "linux.open",
        ratio: "ratio.open",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.write4k",
        linux: "linux.write4k",
        ratio: "ratio.write4k",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "ipc.null_rpc.roundtrip",
        linux: "linux.syscall.null",
        ratio: "ratio.null_rpc.vs_syscall",
        sized: false,
        context: true,
        mirror: false,
    },
    Rule {
        sawmill: "ipc.null_rpc.roundtrip",
        linux: "linux.pipe.roundtrip",
        ratio: "ratio.null_rpc.vs_pipe",
        sized: false,
        context: true,
        mirror: false,
    },
    Rule {
        sawmill: "boot.to_prompt",
        linux: "linux.boot.to_prompt",
        ratio: "ratio.boot.to_prompt",
        sized: false,
        context: false,
        mirror: false,
    },
    // Issue 17: cold reads and metadata, the native file-system servers against Linux's ext2.
    Rule {
        sawmill: "fs.read4k.cold",
        linux: "linux.read4k.cold",
        ratio: "ratio.read4k.cold",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.seqread.cold",
        linux: "linux.seqread.cold",
        ratio: "ratio.seqread.cold",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.stat",
        linux: "linux.stat",
        ratio: "ratio.stat",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.readdir",
        linux: "linux.readdir",
        ratio: "ratio.readdir",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.create_unlink",
        linux: "linux.create_unlink",
        ratio: "ratio.create_unlink",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.rename",
        linux: "linux.rename",
        ratio: "ratio.rename",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "fs.fsync",
        linux: "linux.fsync",
        ratio: "ratio.fsync",
        sized: false,
        context: false,
        mirror: false,
    },
    Rule {
        sawmill: "linuxabi.",
        linux: "linux.",
        ratio: "ratio.linuxabi.",
        sized: false,
        context: false,
        mirror: true,
    },
    // Issue 15: the same lbench network metrics on both systems (bench/net.rs).
    Rule {
        sawmill: "net.",
        linux: "linux.net.",
        ratio: "ratio.net.",
        sized: false,
        context: false,
        mirror: true,
    },
];

/// The issues' targets: (ratio name, or its prefix when it ends in `.`; the most the ratio may
/// be). Shown in the `goal` column of results.md; not a test.
pub const GOALS: &[(&str, f64)] = &[
    ("ratio.reread4k.multiserver.", 0.90),
    ("ratio.linuxabi.syscall.null", 0.8),
    ("ratio.linuxabi.reread4k.", 0.5),
    ("ratio.linuxabi.open", 1.0),
    ("ratio.linuxabi.write4k", 1.0),
    ("ratio.linuxabi.pagefault.anon", 1.0),
    ("ratio.linuxabi.fork_exec_wait", 1.5),
    ("ratio.linuxabi.pipe.roundtrip", 0.25),
    ("ratio.linuxabi.shell_script", 1.0),
    ("ratio.net.udp.roundtrip", 0.5),
    ("ratio.net.tcp.roundtrip", 0.5),
    ("ratio.net.tcp.bulk", 1.0),
    ("ratio.net.udp.send64", 1.0),
    ("ratio.net.udp.send1472", 1.0),
    ("ratio.read4k.cold", 1.0),
    ("ratio.seqread.cold", 1.0),
    ("ratio.stat", 1.0),
    ("ratio.readdir", 1.0),
    ("ratio.create_unlink", 1.0),
    ("ratio.rename", 1.0),
    ("ratio.fsync", 1.0),
];

/// The goal for ratio `name`, if it has one.
pub fn goal(name: &str) -> Option<f64> {
    GOALS
        .iter()
        .find(|(g, _)| {
            if g.ends_with('.') {
                name.starts_with(g)
            } else {
                name == *g
            }
        })
        .map(|&(_, v)| v)
}

/// One sawmill figure paired with its Linux counterpart.
struct Pair<'a> {
    sawmill: &'a Metric,
    linux: &'a Metric,
    ratio_name: String,
    context: bool,
}

/// For `name`, the Linux name and ratio name under `rule`, if the rule applies.
fn apply(rule: &Rule, name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(rule.sawmill)?;
    if rule.mirror {
        return (!rest.is_empty()).then(|| {
            (
                format!("{}{rest}", rule.linux),
                format!("{}{rest}", rule.ratio),
            )
        });
    }
    if rule.sized {
        // ".<config>.<size>"; the config may itself contain dots, the size never does.
        let rest = rest.strip_prefix('.')?;
        let (config, size) = rest.rsplit_once('.')?;
        if config.is_empty() || size.is_empty() {
            return None;
        }
        Some((
            format!("{}{size}", rule.linux),
            format!("{}.{config}.{size}", rule.ratio),
        ))
    } else if rest.is_empty() || (rest.starts_with('.') && rest.len() > 1) {
        Some((rule.linux.to_string(), format!("{}{rest}", rule.ratio)))
    } else {
        None
    }
}

fn find<'a>(metrics: &'a [Metric], name: &str) -> Option<&'a Metric> {
    metrics.iter().find(|m| m.name == name)
}

fn pairs(metrics: &[Metric]) -> Vec<Pair<'_>> {
    let mut out = Vec::new();
    for m in metrics {
        if m.name.starts_with("linux.") || m.name.starts_with("ratio.") {
            continue;
        }
        // First occurrence of a name wins.
        if !std::ptr::eq(find(metrics, &m.name).unwrap(), m) {
            continue;
        }
        for rule in RULES {
            let Some((linux_name, ratio_name)) = apply(rule, &m.name) else {
                continue;
            };
            let Some(l) = find(metrics, &linux_name) else {
                continue;
            };
            if l.unit != m.unit {
                continue;
            }
            out.push(Pair {
                sawmill: m,
                linux: l,
                ratio_name,
                context: rule.context,
            });
        }
    }
    out
}

/// The ratio metrics (sawmill / Linux, unit `ratio`) for every sawmill figure that has a Linux
/// counterpart under [`RULES`] with the same unit and a non-zero value. A ratio already present
/// in `metrics` under the same name is not computed again.
pub fn ratios(metrics: &[Metric]) -> Vec<Metric> {
    let mut out: Vec<Metric> = Vec::new();
    for p in pairs(metrics) {
        if p.linux.value == 0.0
            || find(metrics, &p.ratio_name).is_some()
            || out.iter().any(|m| m.name == p.ratio_name)
        {
            continue;
        }
        out.push(Metric {
            name: p.ratio_name,
            unit: "ratio".to_string(),
            value: p.sawmill.value / p.linux.value,
        });
    }
    out
}

/// Writes `results.json`, `results.md`, `reread.svg` and `ratios.svg` into `out_dir` (created if
/// needed).
/// `results.json` holds `metrics` in order followed by the computed ratio metrics.
pub fn write(out_dir: &Path, metrics: &[Metric]) -> Result<(), String> {
    fs::create_dir_all(out_dir).map_err(|e| format!("create {}: {e}", out_dir.display()))?;
    let extra = ratios(metrics);
    let mut all: Vec<&Metric> = metrics.iter().collect();
    all.extend(extra.iter());
    let put = |name: &str, text: String| {
        let p = out_dir.join(name);
        fs::write(&p, text).map_err(|e| format!("write {}: {e}", p.display()))
    };
    put("results.json", json(&all))?;
    put("results.md", markdown(metrics, &extra))?;
    put("reread.svg", svg(metrics))?;
    let ratio_figures: Vec<&Metric> = all
        .iter()
        .copied()
        .filter(|m| m.name.starts_with("ratio.") && m.unit == "ratio")
        .collect();
    put("ratios.svg", ratio_svg(&ratio_figures))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// JSON

fn json_string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A JSON number; Rust's `Display` for f64 never uses an exponent, which JSON accepts as is.
/// Non-finite values (not representable in JSON) become `null`.
fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_string()
    }
}

fn json(metrics: &[&Metric]) -> String {
    let mut o = String::from("[\n");
    for (i, m) in metrics.iter().enumerate() {
        let _ = write!(
            o,
            "  {{\"name\": {}, \"unit\": {}, \"value\": {}}}",
            json_string(&m.name),
            json_string(&m.unit),
            json_number(m.value)
        );
        o.push_str(if i + 1 < metrics.len() { ",\n" } else { "\n" });
    }
    o.push_str("]\n");
    o
}

// ---------------------------------------------------------------------------------------------
// Markdown

/// `12697.46` -> `12,697.5`; ratios get two decimals.
fn fmt_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if unit == "ratio" {
        return format!("{v:.2}");
    }
    let s = format!("{:.1}", v.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if v < 0.0 { "-" } else { "" };
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

fn markdown(metrics: &[Metric], ratios: &[Metric]) -> String {
    let mut o = String::new();
    o.push_str("# sawmill benchmark results\n\n");
    o.push_str(
        "Unit: guest instructions (QEMU icount), measured with `rdtsc` under \
         `qemu-system-x86_64 -icount shift=0 -cpu qemu64` (TCG), sawmill and Linux in the same \
         emulator configuration. Ratio = sawmill / Linux; below 1 means sawmill executes fewer \
         instructions. See `bench/README.md` for the method.\n\n",
    );

    o.push_str("## sawmill beside Linux\n\n");
    let pairs = pairs(metrics);
    if pairs.is_empty() {
        o.push_str(
            "No sawmill figure with a Linux counterpart in this run (Linux baseline only).\n\n",
        );
    } else {
        o.push_str(
            "| sawmill metric | sawmill | Linux metric | Linux | ratio | ratio metric | goal |\n",
        );
        o.push_str("|---|---:|---|---:|---:|---|---|\n");
        for p in &pairs {
            let r = (p.linux.value != 0.0).then(|| p.sawmill.value / p.linux.value);
            let ratio = r.map_or("-".to_string(), |r| fmt_value(r, "ratio"));
            let target = match (goal(&p.ratio_name), r) {
                (Some(g), Some(r)) if r <= g => format!("≤ {g:.2} (met)"),
                (Some(g), _) => format!("≤ {g:.2} (not met)"),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                o,
                "| `{}`{} | {} | `{}` | {} | {} | `{}` | {target} |",
                p.sawmill.name,
                if p.context { " (context)" } else { "" },
                fmt_value(p.sawmill.value, &p.sawmill.unit),
                p.linux.name,
                fmt_value(p.linux.value, &p.linux.unit),
                ratio,
                p.ratio_name
            );
        }
        o.push('\n');
    }

    // Reread table: the text form of reread.svg.
    let series = reread_series(metrics);
    if !series.is_empty() {
        o.push_str(
            "## Reread of a cached file, per 4 KB record (Figure 4 analogue, `reread.svg`)\n\n",
        );
        let sizes = all_sizes(&series);
        o.push_str("| file size |");
        for s in &series {
            let _ = write!(o, " {} |", s.label);
        }
        o.push_str("\n|---|");
        for _ in &series {
            o.push_str("---:|");
        }
        o.push('\n');
        for (label, _) in &sizes {
            let _ = write!(o, "| {label} |");
            for s in &series {
                match s.points.iter().find(|p| &p.0 == label) {
                    Some(p) => {
                        let _ = write!(o, " {} |", fmt_value(p.2, "insn"));
                    }
                    None => o.push_str(" - |"),
                }
            }
            o.push('\n');
        }
        o.push('\n');
    }

    let linux: Vec<&Metric> = metrics
        .iter()
        .filter(|m| m.name.starts_with("linux."))
        .collect();
    if !linux.is_empty() {
        o.push_str("## Linux baseline\n\n| metric | value | unit |\n|---|---:|---|\n");
        for m in linux {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} |",
                m.name,
                fmt_value(m.value, &m.unit),
                m.unit
            );
        }
        o.push('\n');
    }

    let paired: Vec<&str> = pairs.iter().map(|p| p.sawmill.name.as_str()).collect();
    let other: Vec<&Metric> = metrics
        .iter()
        .filter(|m| !m.name.starts_with("linux.") && !paired.contains(&m.name.as_str()))
        .collect();
    if !other.is_empty() {
        o.push_str("## Other figures (no Linux counterpart)\n\n| metric | value | unit |\n|---|---:|---|\n");
        for m in other {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} |",
                m.name,
                fmt_value(m.value, &m.unit),
                m.unit
            );
        }
        o.push('\n');
    }

    if !ratios.is_empty() {
        o.push_str(
            "## Ratios (also in results.json)\n\n| metric | sawmill / Linux |\n|---|---:|\n",
        );
        for m in ratios {
            let _ = writeln!(o, "| `{}` | {} |", m.name, fmt_value(m.value, "ratio"));
        }
        o.push('\n');
    }

    o.push_str(
        "## Name mapping\n\n| sawmill metric | Linux metric | ratio metric |\n|---|---|---|\n",
    );
    for r in RULES {
        let (s, l, q) = if r.mirror {
            (
                format!("{}<name>", r.sawmill),
                format!("{}<name>", r.linux),
                format!("{}<name>", r.ratio),
            )
        } else if r.sized {
            (
                format!("{}.<config>.<size>", r.sawmill),
                format!("{}<size>", r.linux),
                format!("{}.<config>.<size>", r.ratio),
            )
        } else {
            (
                format!("{}[.<config>]", r.sawmill),
                r.linux.to_string(),
                format!("{}[.<config>]", r.ratio),
            )
        };
        let _ = writeln!(
            o,
            "| `{s}` | `{l}`{} | `{q}` |",
            if r.context {
                " (context only: a different operation)"
            } else {
                ""
            }
        );
    }
    o
}

// ---------------------------------------------------------------------------------------------
// Reread series and SVG

struct Series {
    label: String,
    /// (size label, bytes, value)
    points: Vec<(String, u64, f64)>,
}

/// `64k` -> 65536, `1m` -> 1048576, `4096` -> 4096.
fn size_bytes(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (num, mul) = match lower.as_bytes().last()? {
        b'k' => (&lower[..lower.len() - 1], 1u64 << 10),
        b'm' => (&lower[..lower.len() - 1], 1 << 20),
        b'g' => (&lower[..lower.len() - 1], 1 << 30),
        _ => (&lower[..], 1),
    };
    num.parse::<u64>().ok().filter(|&n| n > 0).map(|n| n * mul)
}

/// Linux first, then each sawmill configuration in order of first appearance.
fn reread_series(metrics: &[Metric]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    let add = |label: String, size: &str, value: f64, out: &mut Vec<Series>| {
        let Some(bytes) = size_bytes(size) else {
            return;
        };
        let idx = match out.iter().position(|s| s.label == label) {
            Some(i) => i,
            None => {
                out.push(Series {
                    label,
                    points: Vec::new(),
                });
                out.len() - 1
            }
        };
        let s = &mut out[idx];
        if !s.points.iter().any(|p| p.1 == bytes) && value.is_finite() {
            s.points.push((size.to_string(), bytes, value));
        }
    };
    for m in metrics {
        if let Some(size) = m.name.strip_prefix("linux.reread4k.") {
            add("Linux".to_string(), size, m.value, &mut out);
        }
    }
    for m in metrics {
        if let Some(rest) = m.name.strip_prefix("fs.reread4k.") {
            if let Some((config, size)) = rest.rsplit_once('.') {
                if !config.is_empty() {
                    add(format!("sawmill {config}"), size, m.value, &mut out);
                }
            }
        }
    }
    for s in &mut out {
        s.points.sort_by_key(|p| p.1);
    }
    out.retain(|s| !s.points.is_empty());
    out
}

fn all_sizes(series: &[Series]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = Vec::new();
    for s in series {
        for p in &s.points {
            if !v.iter().any(|q| q.1 == p.1) {
                v.push((p.0.clone(), p.1));
            }
        }
    }
    v.sort_by_key(|p| p.1);
    v
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLORS: &[&str] = &[
    "#222222", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Reread cost per 4 KB record against file size, log2 x axis, one line per system.
fn svg(metrics: &[Metric]) -> String {
    let (w, h) = (720.0f64, 480.0f64);
    let (left, right, top, bottom) = (80.0, 190.0, 50.0, 60.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let series = reread_series(metrics);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(o, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(
        o,
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Reread of a cached file: \
         cost per 4 KB record</text>",
        left + pw / 2.0
    );
    if series.is_empty() {
        let _ = writeln!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no reread figures in this run</text>",
            w / 2.0,
            h / 2.0
        );
        o.push_str("</svg>\n");
        return o;
    }

    let sizes = all_sizes(&series);
    let lx = |b: u64| (b as f64).log2();
    let (xmin, xmax) = (lx(sizes[0].1), lx(sizes[sizes.len() - 1].1));
    // 4% of the width kept free at each end so the end points sit inside the frame.
    let xpos = |b: u64| {
        if xmax > xmin {
            left + pw * (0.04 + 0.92 * (lx(b) - xmin) / (xmax - xmin))
        } else {
            left + pw / 2.0
        }
    };
    // Log y axis: a line many times the others (the copy path's reread) must not flatten them.
    let values = series.iter().flat_map(|s| s.points.iter().map(|p| p.2));
    let (lo, hi) = log_bounds(values);
    let ypos = |v: f64| top + ph - log_frac(v, lo, hi) * ph;

    // Grid and y ticks (1, 2, 5 times the powers of ten in the range).
    for t in log_ticks(lo, hi) {
        let y = ypos(t);
        let _ = writeln!(
            o,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>",
            left + pw
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y + 4.0,
            tick_label(t)
        );
    }
    // X ticks at the sizes present.
    for (label, b) in &sizes {
        let x = xpos(*b);
        let _ = writeln!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#eeeeee\"/>",
            top + ph
        );
        let _ = writeln!(
            o,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + ph + 18.0,
            xml_escape(&label.to_uppercase().replace("K", " KB").replace("M", " MB"))
        );
    }
    // Axes and labels.
    let _ = writeln!(
        o,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"black\"/>"
    );
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">file size (log scale)</text>",
        left + pw / 2.0,
        h - 16.0
    );
    let _ = writeln!(
        o,
        "<text x=\"18\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1})\">\
         guest instructions (QEMU icount) per 4 KB record, log scale</text>",
        top + ph / 2.0,
        top + ph / 2.0
    );

    // Series and legend.
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", xpos(p.1), ypos(p.2)))
            .collect();
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        for p in &s.points {
            let _ = writeln!(
                o,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\"><title>{} {}: {}</title></circle>",
                xpos(p.1),
                ypos(p.2),
                xml_escape(&s.label),
                xml_escape(&p.0),
                fmt_value(p.2, "insn")
            );
        }
        let ly = top + 14.0 + i as f64 * 20.0;
        let lx0 = left + pw + 16.0;
        let _ = writeln!(
            o,
            "<line x1=\"{lx0:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-width=\"2\"/>",
            lx0 + 24.0
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            lx0 + 30.0,
            ly + 4.0,
            xml_escape(&s.label)
        );
    }
    o.push_str("</svg>\n");
    o
}

/// The 1-2-5 values (1, 2, 5 times a power of ten) from the largest one at or below `lo` to the
/// smallest one at or above `hi`, for `0 < lo <= hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return out;
    }
    let mut mag = 10f64.powf(lo.log10().floor());
    'outer: loop {
        for m in [1.0, 2.0, 5.0] {
            let t = m * mag;
            // A relative tolerance: powers of ten computed with powf are not exact.
            if t >= lo * (1.0 - 1e-9) {
                out.push(t);
            }
            if t >= hi * (1.0 - 1e-9) {
                break 'outer;
            }
        }
        mag *= 10.0;
    }
    out
}

/// The largest 1-2-5 value at or below `v` (> 0).
fn floor_125(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0, 0.5]
        .into_iter()
        .map(|m| m * mag)
        .find(|t| *t <= v * (1.0 + 1e-9))
        .unwrap_or(mag / 2.0)
}

/// The smallest 1-2-5 value at or above `v` (> 0).
fn ceil_125(v: f64) -> f64 {
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|t| *t >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag)
}

/// The ends of a log axis holding every positive finite value: the 1-2-5 values at or around
/// the smallest and the largest, at least one step apart. `(1, 10)` when there is no such value.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut vmin, mut vmax) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        vmin = vmin.min(v);
        vmax = vmax.max(v);
    }
    if vmax <= 0.0 {
        return (1.0, 10.0);
    }
    let (lo, hi) = (floor_125(vmin), ceil_125(vmax));
    if hi <= lo * (1.0 + 1e-9) {
        (floor_125(lo * 0.99), ceil_125(hi * 1.01))
    } else {
        (lo, hi)
    }
}

/// Where `v` lies between `lo` and `hi` on a log axis, 0..=1 (clamped).
fn log_frac(v: f64, lo: f64, hi: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || hi <= lo {
        return 0.0;
    }
    ((v.ln() - lo.ln()) / (hi.ln() - lo.ln())).clamp(0.0, 1.0)
}

/// A tick's text: `0.05`, `1`, `2,000`.
fn tick_label(t: f64) -> String {
    if t < 1.0 {
        let s = format!("{t:.4}");
        s.trim_end_matches('0').to_string()
    } else {
        fmt_value(t, "insn").trim_end_matches(".0").to_string()
    }
}

/// Whether ratio `name` comes from a context rule (a different operation, shown for scale).
fn is_context(name: &str) -> bool {
    RULES.iter().any(|r| r.context && name.starts_with(r.ratio))
}

/// Every ratio as a horizontal bar from the 1.0 line (log scale): to the left when sawmill
/// executes fewer instructions than Linux, to the right when more; green within its goal (1.0
/// when it has none), red beyond it, grey for context ratios; a goal other than 1.0 is marked on
/// its row.
fn ratio_svg(ratios: &[&Metric]) -> String {
    let row = 20.0f64;
    let (left, bar_w, right, top, bottom) = (300.0f64, 480.0f64, 90.0f64, 64.0f64, 56.0f64);
    let w = left + bar_w + right;
    let h = top + bottom + row * ratios.len().max(1) as f64;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(o, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">sawmill / Linux, \
         guest instructions for the same operation</text>",
        w / 2.0
    );
    if ratios.is_empty() {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no ratio figures in this run</text>",
            w / 2.0,
            top + row / 2.0
        );
        o.push_str("</svg>\n");
        return o;
    }
    let (lo, hi) = log_bounds(ratios.iter().map(|m| m.value).chain([0.5, 2.0]));
    let xpos = |v: f64| left + log_frac(v, lo, hi) * bar_w;
    let plot_h = row * ratios.len() as f64;
    // Grid, ticks at top and bottom.
    for t in log_ticks(lo, hi) {
        let x = xpos(t);
        let _ = writeln!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#dddddd\"/>",
            top + plot_h
        );
        for y in [top - 6.0, top + plot_h + 16.0] {
            let _ = writeln!(
                o,
                "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"middle\">{}</text>",
                tick_label(t)
            );
        }
    }
    for (i, m) in ratios.iter().enumerate() {
        let y = top + row * i as f64;
        let goal = goal(&m.name);
        let limit = goal.unwrap_or(1.0);
        let color = if is_context(&m.name) {
            "#999999"
        } else if m.value <= limit {
            "#2ca02c"
        } else {
            "#d62728"
        };
        let (x1, x0) = (xpos(1.0), xpos(m.value));
        let (bx, bw) = (x0.min(x1), (x0 - x1).abs().max(1.0));
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 8.0,
            y + row * 0.7,
            xml_escape(&m.name)
        );
        let _ = writeln!(
            o,
            "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{color}\">\
             <title>{}: {}{}</title></rect>",
            y + 3.0,
            row - 6.0,
            xml_escape(&m.name),
            fmt_value(m.value, "ratio"),
            goal.map_or(String::new(), |g| format!(" (goal ≤ {g:.2})"))
        );
        if let Some(g) = goal.filter(|g| *g != 1.0) {
            let gx = xpos(g);
            let _ = writeln!(
                o,
                "<line x1=\"{gx:.1}\" y1=\"{:.1}\" x2=\"{gx:.1}\" y2=\"{:.1}\" stroke=\"black\" \
                 stroke-width=\"2\" stroke-dasharray=\"3,2\"/>",
                y + 1.0,
                y + row - 1.0
            );
        }
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            left + bar_w + 6.0,
            y + row * 0.7,
            fmt_value(m.value, "ratio")
        );
    }
    // The 1.0 line over the bars, and the frame.
    let x1 = xpos(1.0);
    let _ = writeln!(
        o,
        "<line x1=\"{x1:.1}\" y1=\"{:.1}\" x2=\"{x1:.1}\" y2=\"{:.1}\" stroke=\"black\" \
         stroke-width=\"2\"/>",
        top - 2.0,
        top + plot_h + 2.0
    );
    let _ = writeln!(
        o,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{bar_w}\" height=\"{plot_h}\" fill=\"none\" \
         stroke=\"black\"/>"
    );
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">ratio (log scale): left of 1.0 \
         sawmill executes fewer instructions; green within its goal (dashed mark when not 1.0), \
         red beyond, grey for scale only</text>",
        left + bar_w / 2.0 - 60.0,
        h - 14.0
    );
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, value: f64) -> Metric {
        Metric {
            name: name.to_string(),
            unit: "insn".to_string(),
            value,
        }
    }

    fn linux() -> Vec<Metric> {
        vec![
            m("linux.reread4k.64k", 2000.0),
            m("linux.reread4k.128k", 2010.0),
            m("linux.reread4k.256k", 2020.0),
            m("linux.reread4k.1m", 2030.0),
            m("linux.reread4k.4m", 2040.0),
            m("linux.syscall.null", 360.0),
            m("linux.pipe.roundtrip", 12400.0),
            m("linux.pagefault.anon", 3300.0),
            m("linux.open", 6800.0),
        ]
    }

    fn out_dir(tag: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("sawmill-report-test-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn ratio_names_and_values() {
        let mut v = linux();
        v.push(m("fs.reread4k.multiserver.64k", 1800.0));
        v.push(m("fs.reread4k.single.task.4m", 4080.0)); // config with a dot
        v.push(m("fs.reread4k.multiserver.8k", 100.0)); // no Linux counterpart
        v.push(m("mem.fault.anon", 1650.0));
        v.push(m("fs.open.multiserver", 3400.0));
        v.push(m("ipc.null_rpc.roundtrip", 720.0));
        v.push(m("fs.openx", 1.0)); // not fs.open
        let r = ratios(&v);
        let got: Vec<(&str, f64)> = r.iter().map(|m| (m.name.as_str(), m.value)).collect();
        assert_eq!(
            got,
            vec![
                ("ratio.reread4k.multiserver.64k", 0.9),
                ("ratio.reread4k.single.task.4m", 2.0),
                ("ratio.pagefault.anon", 0.5),
                ("ratio.open.multiserver", 0.5),
                ("ratio.null_rpc.vs_syscall", 2.0),
                ("ratio.null_rpc.vs_pipe", 720.0 / 12400.0),
            ]
        );
        assert!(r.iter().all(|m| m.unit == "ratio"));
    }

    #[test]
    fn no_ratio_across_units_or_zero_or_twice() {
        let mut v = linux();
        v.push(Metric {
            name: "mem.fault.anon".into(),
            unit: "ns".into(),
            value: 5.0,
        });
        v.push(m("linux.zero", 0.0));
        v.push(m("fs.reread4k.multiserver.64k", 1800.0));
        v.push(Metric {
            name: "ratio.reread4k.multiserver.64k".into(),
            unit: "ratio".into(),
            value: 0.9,
        });
        assert!(ratios(&v).is_empty());
        assert!(ratios(&linux()).is_empty());
    }

    #[test]
    fn json_shape() {
        let d = out_dir("json");
        let mut v = vec![
            m("linux.reread4k.64k", 2000.0),
            m("fs.reread4k.multiserver.64k", 1800.5),
        ];
        v.push(Metric {
            name: "odd\"name\\".into(),
            unit: "insn".into(),
            value: f64::NAN,
        });
        write(&d, &v).unwrap();
        let j = fs::read_to_string(d.join("results.json")).unwrap();
        assert_eq!(
            j,
            "[\n  {\"name\": \"linux.reread4k.64k\", \"unit\": \"insn\", \"value\": 2000},\n  \
             {\"name\": \"fs.reread4k.multiserver.64k\", \"unit\": \"insn\", \"value\": 1800.5},\n  \
             {\"name\": \"odd\\\"name\\\\\", \"unit\": \"insn\", \"value\": null},\n  \
             {\"name\": \"ratio.reread4k.multiserver.64k\", \"unit\": \"ratio\", \"value\": 0.90025}\n]\n"
        );
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn json_empty() {
        assert_eq!(json(&[]), "[\n]\n");
    }

    #[test]
    fn linuxabi_figures_pair_with_the_same_linux_name() {
        let ms = vec![
            m("linuxabi.reread4k.64k", 1000.0),
            m("linuxabi.syscall.null", 300.0),
            m("linuxabi.exec", 10.0),
            m("linux.reread4k.64k", 2000.0),
            m("linux.syscall.null", 360.0),
        ];
        let r = ratios(&ms);
        let names: Vec<&str> = r.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            ["ratio.linuxabi.reread4k.64k", "ratio.linuxabi.syscall.null"]
        );
        assert_eq!(r[0].value, 0.5);
        assert_eq!(goal("ratio.linuxabi.reread4k.64k"), Some(0.5));
        assert_eq!(goal("ratio.linuxabi.syscall.null"), Some(0.8));
        assert_eq!(goal("ratio.linuxabi.exec"), None);
        assert_eq!(goal("ratio.net.tcp.roundtrip"), Some(0.5));
        assert_eq!(goal("ratio.net.udp.send1472"), Some(1.0));
        assert_eq!(goal("ratio.net.tcp.connect"), None);
        let md = markdown(&ms, &r);
        assert!(md.contains("≤ 0.50 (met)"), "{md}");
        assert!(md.contains("≤ 0.80 (not met)"), "{md}");
    }

    #[test]
    fn boot_to_prompt_pairs_with_linux_boot() {
        let ms = vec![
            m("boot.to_prompt", 150.0),
            m("linux.boot.to_prompt", 6000.0),
        ];
        let r = ratios(&ms);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, "ratio.boot.to_prompt");
        assert_eq!(r[0].value, 0.025);
    }

    #[test]
    fn markdown_rows() {
        let d = out_dir("md");
        let mut v = linux();
        v.push(m("fs.reread4k.multiserver.64k", 1800.0));
        v.push(m("ipc.null_rpc.roundtrip", 720.0));
        v.push(m("ipc.other", 5.0));
        write(&d, &v).unwrap();
        let md = fs::read_to_string(d.join("results.md")).unwrap();
        assert!(md.contains(
            "| `fs.reread4k.multiserver.64k` | 1,800.0 | `linux.reread4k.64k` | 2,000.0 | 0.90 | `ratio.reread4k.multiserver.64k` |"
        ), "{md}");
        assert!(md.contains(
            "| `ipc.null_rpc.roundtrip` (context) | 720.0 | `linux.syscall.null` | 360.0 | 2.00 | `ratio.null_rpc.vs_syscall` |"
        ), "{md}");
        assert!(md.contains(
            "| `ipc.null_rpc.roundtrip` (context) | 720.0 | `linux.pipe.roundtrip` | 12,400.0 | 0.06 | `ratio.null_rpc.vs_pipe` |"
        ), "{md}");
        assert!(md.contains("| 64k | 2,000.0 | 1,800.0 |"), "{md}");
        assert!(md.contains("| 4m | 2,040.0 | - |"), "{md}");
        assert!(
            md.contains("| `linux.pipe.roundtrip` | 12,400.0 | insn |"),
            "{md}"
        );
        assert!(md.contains("| `ipc.other` | 5.0 | insn |"), "{md}");
        assert!(md.contains("| `fs.reread4k.<config>.<size>` | `linux.reread4k.<size>` | `ratio.reread4k.<config>.<size>` |"), "{md}");
        let svg = fs::read_to_string(d.join("reread.svg")).unwrap();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("sawmill multiserver"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn linux_only_report() {
        let d = out_dir("linux-only");
        write(&d, &linux()).unwrap();
        let md = fs::read_to_string(d.join("results.md")).unwrap();
        assert!(md.contains("Linux baseline only"));
        assert!(md.contains("| `linux.open` | 6,800.0 | insn |"));
        assert!(!md.contains("## Ratios"));
        let j = fs::read_to_string(d.join("results.json")).unwrap();
        assert_eq!(j.matches("\"name\"").count(), 9);
        let svg = fs::read_to_string(d.join("reread.svg")).unwrap();
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn empty_report() {
        let d = out_dir("empty");
        write(&d, &[]).unwrap();
        let svg = fs::read_to_string(d.join("reread.svg")).unwrap();
        assert!(svg.contains("no reread figures"));
        let _ = fs::remove_dir_all(&d);
    }

    /// A small well-formedness check of our own SVG: one `<svg xmlns=...>` root, every element
    /// closed in order, attribute values quoted, no bare `&` or `<` in text.
    fn well_formed(svg: &str) -> Result<(), String> {
        if !svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") {
            return Err("no svg root".into());
        }
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            let text = &rest[..i];
            if text.contains('>') {
                return Err(format!("stray '>' in {text:?}"));
            }
            for (j, _) in text.match_indices('&') {
                let ent = &text[j..];
                if !["&amp;", "&lt;", "&gt;", "&quot;"]
                    .iter()
                    .any(|e| ent.starts_with(e))
                {
                    return Err(format!("bare & in {text:?}"));
                }
            }
            let end = rest[i..].find('>').ok_or("unclosed tag")? + i;
            let tag = &rest[i + 1..end];
            if !tag.matches('"').count().is_multiple_of(2) || tag.contains('<') {
                return Err(format!("bad tag <{tag}>"));
            }
            if let Some(name) = tag.strip_prefix('/') {
                if stack.pop().as_deref() != Some(name) {
                    return Err(format!("</{name}> closes the wrong element"));
                }
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().ok_or("empty tag")?;
                stack.push(name.to_string());
            }
            rest = &rest[end + 1..];
            if stack.is_empty() && !rest.trim().is_empty() {
                return Err("content after the root".into());
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    /// The y of the point of series `label` at size `size` in reread.svg.
    fn point_y(svg: &str, label: &str, size: &str) -> f64 {
        let title = format!("<title>{label} {size}:");
        let line = svg.lines().find(|l| l.contains(&title)).unwrap();
        let cy = line.split("cy=\"").nth(1).unwrap();
        cy[..cy.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn reread_plot_has_a_log_axis_that_keeps_close_lines_apart() {
        // Linux ~2,000, the mapped reread ~1,800 and the copy path 21 times more: on a linear
        // axis the first two would be a pixel or two apart.
        let mut v = linux();
        for (size, value) in [("64k", 1800.0), ("1m", 1810.0)] {
            v.push(m(&format!("fs.reread4k.multiserver.{size}"), value));
            v.push(m(&format!("fs.reread4k.ipc.{size}"), value * 23.5));
        }
        let svg = svg(&v);
        well_formed(&svg).unwrap();
        assert!(svg.contains("per 4 KB record, log scale"), "{svg}");
        for t in ["1,000", "2,000", "5,000", "10,000", "20,000", "50,000"] {
            assert!(svg.contains(&format!(">{t}</text>")), "tick {t}: {svg}");
        }
        let (linux, mapped, copy) = (
            point_y(&svg, "Linux", "64k"),
            point_y(&svg, "sawmill multiserver", "64k"),
            point_y(&svg, "sawmill ipc", "64k"),
        );
        assert!(mapped - linux > 8.0, "{linux} {mapped}");
        assert!(copy < linux - 100.0, "{linux} {copy}");
        // Equal ratios are equal distances on a log axis.
        let y = |v: f64| {
            let (lo, hi) = log_bounds([1800.0, 42300.0, 2040.0].into_iter());
            log_frac(v, lo, hi)
        };
        assert!(((y(4000.0) - y(2000.0)) - (y(20000.0) - y(10000.0))).abs() < 1e-9);
    }

    #[test]
    fn ratio_chart_has_every_ratio_against_the_one_line() {
        let d = out_dir("ratios");
        let mut v = linux();
        v.push(m("fs.reread4k.multiserver.64k", 1800.0));
        v.push(m("fs.reread4k.ipc.64k", 42000.0));
        v.push(m("mem.fault.anon", 2600.0));
        v.push(m("ipc.null_rpc.roundtrip", 720.0));
        v.push(m("fs.stat", 5000.0));
        v.push(m("linux.stat", 3600.0));
        v.push(m("fs.readdir", 1000.0));
        v.push(m("linux.readdir", 1500.0));
        v.push(m("fs.fsync", 100.0));
        v.push(m("linux.fsync", 100.0));
        write(&d, &v).unwrap();
        let svg = fs::read_to_string(d.join("ratios.svg")).unwrap();
        well_formed(&svg).unwrap();
        let r = ratios(&v);
        assert_eq!(r.len(), 8);
        for m in &r {
            assert!(
                svg.contains(&format!(
                    "<title>{}: {}",
                    m.name,
                    fmt_value(m.value, "ratio")
                )),
                "{} missing: {svg}",
                m.name
            );
        }
        assert_eq!(svg.matches("<rect x=").count(), r.len() + 1); // bars and the frame
                                                                  // Log axis: 1-2-5 ticks around 1.0 and a label saying so.
        for t in ["0.05", "0.1", "0.2", "0.5", "1", "2", "5", "20", "50"] {
            assert!(svg.contains(&format!(">{t}</text>")), "tick {t}: {svg}");
        }
        assert!(svg.contains("ratio (log scale)"));
        // Over the goal red, within it green, context grey; a goal other than 1.0 is marked.
        let bar = |name: &str| {
            svg.lines()
                .find(|l| l.contains(&format!("<title>{name}:")))
                .unwrap()
                .to_string()
        };
        assert!(bar("ratio.stat").contains("#d62728"));
        assert!(bar("ratio.readdir").contains("#2ca02c"));
        assert!(bar("ratio.fsync").contains("#2ca02c"));
        assert!(bar("ratio.reread4k.ipc.64k").contains("#d62728"));
        assert!(bar("ratio.null_rpc.vs_syscall").contains("#999999"));
        assert!(bar("ratio.reread4k.multiserver.64k").contains("goal ≤ 0.90"));
        assert_eq!(svg.matches("stroke-dasharray").count(), 1); // reread4k.multiserver: 0.90
        let empty = ratio_svg(&[]);
        well_formed(&empty).unwrap();
        assert!(empty.contains("no ratio figures"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn issue_17_pairs_and_goals() {
        let mut v = Vec::new();
        for n in [
            "read4k.cold",
            "seqread.cold",
            "stat",
            "readdir",
            "create_unlink",
            "rename",
            "fsync",
        ] {
            v.push(m(&format!("fs.{n}"), 50.0));
            v.push(m(&format!("linux.{n}"), 100.0));
        }
        v.push(m("fs.statfs", 1.0)); // not fs.stat
        let r = ratios(&v);
        assert_eq!(r.len(), 7);
        for x in &r {
            assert_eq!(x.value, 0.5);
            assert_eq!(goal(&x.name), Some(1.0), "{}", x.name);
        }
        assert_eq!(r[0].name, "ratio.read4k.cold");
        assert_eq!(r[6].name, "ratio.fsync");
    }

    #[test]
    fn log_axis_helpers() {
        assert_eq!(
            log_ticks(1000.0, 50000.0),
            [1000.0, 2000.0, 5000.0, 10000.0, 20000.0, 50000.0]
        );
        assert_eq!(log_bounds([1800.0, 42300.0].into_iter()), (1000.0, 50000.0));
        assert_eq!(log_bounds([2000.0].into_iter()), (1000.0, 5000.0));
        assert_eq!(log_bounds(std::iter::empty()), (1.0, 10.0));
        assert_eq!(log_bounds([0.024, 3.3].into_iter()), (0.02, 5.0));
        assert_eq!(tick_label(0.05), "0.05");
        assert_eq!(tick_label(20000.0), "20,000");
        assert_eq!(log_frac(10.0, 1.0, 100.0), 0.5);
        assert_eq!(log_frac(0.0, 1.0, 100.0), 0.0);
    }

    #[test]
    fn helpers() {
        assert_eq!(size_bytes("64k"), Some(65536));
        assert_eq!(size_bytes("4M"), Some(4 << 20));
        assert_eq!(size_bytes("512"), Some(512));
        assert_eq!(size_bytes("k"), None);
        assert_eq!(fmt_value(12697.46, "insn"), "12,697.5");
        assert_eq!(fmt_value(359.1, "insn"), "359.1");
        assert_eq!(fmt_value(1000000.0, "insn"), "1,000,000.0");
        assert_eq!(fmt_value(0.904, "ratio"), "0.90");
    }
}
