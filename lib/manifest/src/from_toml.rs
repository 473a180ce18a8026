//! The human-written TOML form (host only). Parsed by hand from a `toml::Table` rather than via
//! serde derive so every error can name the server and key it concerns.

use crate::{IoRange, Server, System, Use, DEFAULT_HEAP_KB, DEFAULT_PRIORITY};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use toml::{Table, Value};

const SERVER_KEYS: &[&str] = &[
    "name", "module", "priority", "args", "wait", "kmem_kb", "heap_kb", "provides", "uses", "irqs",
    "ioports", "pager", "ram_kb", "huge_pages", "io_window", "irq_lines", "console",
];

/// Parses a manifest. A top-level `[test]` table (scenario settings, read by the host tool) is
/// ignored; any other unknown key, at the top level or in a `[[server]]`, is an error naming it.
/// The result is not yet `validate`d.
pub fn from_toml(text: &str) -> Result<System, String> {
    let top: Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut name = None;
    let mut servers = Vec::new();
    for (k, v) in &top {
        match k.as_str() {
            "name" => name = Some(string(v, "name", "")?),
            "server" => {
                let arr = v
                    .as_array()
                    .ok_or("`server` must be an array of tables ([[server]])")?;
                for (i, s) in arr.iter().enumerate() {
                    let t = s
                        .as_table()
                        .ok_or_else(|| format!("server #{}: not a table", i + 1))?;
                    servers.push(server(t, i)?);
                }
            }
            "test" => {}
            other => return Err(format!("unknown top-level key `{other}`")),
        }
    }
    let name = name.ok_or("missing top-level `name`")?;
    Ok(System { name, servers })
}

fn server(t: &Table, index: usize) -> Result<Server, String> {
    let name = match t.get("name") {
        Some(v) => string(v, "name", &format!("server #{}", index + 1))?,
        None => return Err(format!("server #{}: missing `name`", index + 1)),
    };
    let ctx = format!("server `{name}`");
    let unknown: Vec<&str> = t
        .keys()
        .map(|k| k.as_str())
        .filter(|k| !SERVER_KEYS.contains(k))
        .collect();
    if !unknown.is_empty() {
        let list: Vec<String> = unknown.iter().map(|k| format!("`{k}`")).collect();
        return Err(format!("{ctx}: unknown key(s) {}", list.join(", ")));
    }
    let mut s = Server {
        module: name.clone(),
        name,
        ..Server::default()
    };
    if let Some(v) = t.get("module") {
        s.module = string(v, "module", &ctx)?;
    }
    s.priority = match t.get("priority") {
        Some(v) => int(v, "priority", &ctx, 0, 255)? as u8,
        None => DEFAULT_PRIORITY,
    };
    if let Some(v) = t.get("args") {
        s.args = strings(v, "args", &ctx)?;
    }
    if let Some(v) = t.get("console") {
        s.console = v
            .as_bool()
            .ok_or_else(|| format!("{ctx}: `console` must be true or false"))?;
    }
    if let Some(v) = t.get("wait") {
        s.wait = v
            .as_bool()
            .ok_or_else(|| format!("{ctx}: `wait` must be true or false"))?;
    }
    if let Some(v) = t.get("kmem_kb") {
        s.kmem_kb = int(v, "kmem_kb", &ctx, 0, u32::MAX as i64)? as u32;
    }
    s.heap_kb = match t.get("heap_kb") {
        Some(v) => int(v, "heap_kb", &ctx, 0, u32::MAX as i64)? as u32,
        None => DEFAULT_HEAP_KB,
    };
    if let Some(v) = t.get("provides") {
        s.provides = strings(v, "provides", &ctx)?;
    }
    if let Some(v) = t.get("uses") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `uses` must be an array"))?;
        for u in arr {
            s.uses.push(use_item(u, &ctx)?);
        }
    }
    if let Some(v) = t.get("irqs") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `irqs` must be an array"))?;
        for x in arr {
            s.irqs.push(int(x, "irqs", &ctx, 0, 255)? as u8);
        }
    }
    if let Some(v) = t.get("ioports") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `ioports` must be an array"))?;
        for x in arr {
            s.ioports.push(io_range(x, "ioports", &ctx)?);
        }
    }
    if let Some(v) = t.get("io_window") {
        s.io_window = Some(io_range(v, "io_window", &ctx)?);
    }
    if let Some(v) = t.get("irq_lines") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `irq_lines` must be an array"))?;
        for x in arr {
            s.irq_lines.push(int(x, "irq_lines", &ctx, 0, 255)? as u8);
        }
    }
    if let Some(v) = t.get("pager") {
        s.pager = Some(string(v, "pager", &ctx)?);
    }
    if let Some(v) = t.get("huge_pages") {
        s.huge_pages = int(v, "huge_pages", &ctx, 0, u32::MAX as i64)? as u32;
    }
    if let Some(v) = t.get("ram_kb") {
        s.ram_kb = int(v, "ram_kb", &ctx, 0, u32::MAX as i64)? as u32;
    }
    Ok(s)
}

/// `{ base = ..., count = ... }` (an `ioports` entry or an `io_window`).
fn io_range(x: &Value, key: &str, ctx: &str) -> Result<IoRange, String> {
    let r = x
        .as_table()
        .ok_or_else(|| format!("{ctx}: `{key}` entries must be {{ base = ..., count = ... }}"))?;
    for k in r.keys() {
        if k != "base" && k != "count" {
            return Err(format!("{ctx}: unknown key `{k}` in an `{key}` entry"));
        }
    }
    let base = r
        .get("base")
        .ok_or_else(|| format!("{ctx}: {key} entry lacks `base`"))?;
    let count = r
        .get("count")
        .ok_or_else(|| format!("{ctx}: {key} entry lacks `count`"))?;
    Ok(IoRange {
        base: int(base, &format!("{key}.base"), ctx, 0, 0xffff)? as u16,
        count: int(count, &format!("{key}.count"), ctx, 0, 0xffff)? as u16,
    })
}

/// A `uses` entry: `{ endpoint = "x", badge = 1 }`, or a bare endpoint name meaning badge 0.
fn use_item(v: &Value, ctx: &str) -> Result<Use, String> {
    if let Some(e) = v.as_str() {
        return Ok(Use {
            endpoint: e.to_string(),
            badge: 0,
        });
    }
    let t = v.as_table().ok_or_else(|| {
        format!("{ctx}: `uses` entries must be {{ endpoint = ..., badge = ... }}")
    })?;
    for k in t.keys() {
        if k != "endpoint" && k != "badge" {
            return Err(format!("{ctx}: unknown key `{k}` in a `uses` entry"));
        }
    }
    let endpoint = match t.get("endpoint") {
        Some(e) => string(e, "uses.endpoint", ctx)?,
        None => return Err(format!("{ctx}: a `uses` entry lacks `endpoint`")),
    };
    // TOML integers are i64; badges above i64::MAX are not expressible, which is no loss.
    let badge = match t.get("badge") {
        Some(b) => int(b, "uses.badge", ctx, 0, i64::MAX)? as u64,
        None => 0,
    };
    Ok(Use { endpoint, badge })
}

fn string(v: &Value, key: &str, ctx: &str) -> Result<String, String> {
    v.as_str()
        .map(|s| s.to_string())
        .ok_or_else(|| prefixed(ctx, format!("`{key}` must be a string")))
}

fn strings(v: &Value, key: &str, ctx: &str) -> Result<Vec<String>, String> {
    let arr = v
        .as_array()
        .ok_or_else(|| prefixed(ctx, format!("`{key}` must be an array")))?;
    arr.iter().map(|x| string(x, key, ctx)).collect()
}

fn int(v: &Value, key: &str, ctx: &str, min: i64, max: i64) -> Result<i64, String> {
    let i = v
        .as_integer()
        .ok_or_else(|| prefixed(ctx, format!("`{key}` must be an integer")))?;
    if i < min || i > max {
        return Err(prefixed(
            ctx,
            format!("`{key}` = {i} is outside {min}..={max}"),
        ));
    }
    Ok(i)
}

fn prefixed(ctx: &str, msg: String) -> String {
    if ctx.is_empty() {
        msg
    } else {
        format!("{ctx}: {msg}")
    }
}
