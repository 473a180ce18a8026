//! The human-written TOML form (host only). The server entries are parsed by hand from a
//! `toml::Table` rather than via serde derive so every error can name the server and key it
//! concerns; each server's `config` table is deserialized with its module's schema
//! ([`Schemas`]). Errors carry the position in the text (`FILE:LINE:COL: message`), found through
//! `toml_edit`'s spans for the hand-parsed keys and through the TOML deserializer's spans for
//! configuration and peer names.

use crate::config::{Peer, Peers, MAX_CONFIG_BYTES};
use crate::{IoRange, Server, System, Use, DEFAULT_HEAP_KB, DEFAULT_PRIORITY};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::fmt;
use core::ops::Range;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

const SERVER_KEYS: &[&str] = &[
    "name",
    "module",
    "priority",
    "args",
    "wait",
    "kmem_kb",
    "heap_kb",
    "provides",
    "uses",
    "irqs",
    "ioports",
    "pager",
    "ram_kb",
    "huge_pages",
    "cap_slots",
    "io_window",
    "irq_lines",
    "console",
    "config",
    "modules",
    "restart",
    "max_restarts",
    "backoff_ms",
    "may_kill",
    "hang_ms",
    "fault_log",
    "may_inject",
];

/// The configuration schemas the host tool knows: module name → the `Config` type of its
/// `*-api` crate. A module without one may not have a `config` table.
pub trait Schemas {
    /// Whether servers running `module` have a configuration schema.
    fn has(&self, module: &str) -> bool;
    /// Deserializes the `config` of a server running `module` (only asked when `has(module)`);
    /// [`schema`] does it for a given type.
    fn decode<'de, D: Deserializer<'de>>(
        &self,
        module: &str,
        d: D,
    ) -> Result<Box<dyn HostConfig>, D::Error>;
}

/// No module has a configuration schema.
pub struct NoSchemas;

impl Schemas for NoSchemas {
    fn has(&self, _: &str) -> bool {
        false
    }
    fn decode<'de, D: Deserializer<'de>>(
        &self,
        m: &str,
        _: D,
    ) -> Result<Box<dyn HostConfig>, D::Error> {
        Err(serde::de::Error::custom(format!(
            "module `{m}` has no configuration schema"
        )))
    }
}

/// A deserialized configuration, as the host handles it before encoding.
pub trait HostConfig {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>));
    /// The binary form the server decodes (postcard).
    fn encode(&self) -> Vec<u8>;
}

impl<T: Peers + Serialize> HostConfig for T {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
        Peers::peers(self, f)
    }
    fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a configuration always encodes")
    }
}

/// `Schemas::decode` for the schema type `T`.
pub fn schema<'de, T, D>(d: D) -> Result<Box<dyn HostConfig>, D::Error>
where
    T: Deserialize<'de> + Peers + Serialize + 'static,
    D: Deserializer<'de>,
{
    Ok(Box::new(T::deserialize(d)?))
}

/// Parses a manifest without configuration schemas (any `config` table is an error).
pub fn from_toml(text: &str) -> Result<System, String> {
    from_toml_file("", text, &NoSchemas)
}

/// A problem and, if known, where in the text it is.
struct Located {
    at: Option<Range<usize>>,
    msg: String,
}

impl Located {
    fn new(at: Option<Range<usize>>, msg: String) -> Located {
        Located { at, msg }
    }

    /// `FILE:LINE:COL: message` (the parts that are known).
    fn render(self, path: &str, text: &str) -> String {
        let pos = self.at.map(|r| line_col(text, r.start));
        match (path.is_empty(), pos) {
            (true, None) => self.msg,
            (true, Some((l, c))) => format!("{l}:{c}: {}", self.msg),
            (false, None) => format!("{path}: {}", self.msg),
            (false, Some((l, c))) => format!("{path}:{l}:{c}: {}", self.msg),
        }
    }
}

/// 1-based line and column (in characters) of byte `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Key positions of the document, for errors found in the hand-parsed table.
struct Spans {
    doc: Option<toml_edit::ImDocument<String>>,
}

impl Spans {
    fn top(&self, key: &str) -> Option<Range<usize>> {
        self.doc.as_ref()?.as_table().key(key)?.span()
    }

    /// The position of `key` in server entry `i`, or of the entry itself.
    fn server(&self, i: usize, key: Option<&str>) -> Option<Range<usize>> {
        let item = self.doc.as_ref()?.as_table().get("server")?;
        let key_at = |k: &str| -> Option<Range<usize>> {
            match item {
                toml_edit::Item::ArrayOfTables(a) => a.get(i)?.key(k)?.span(),
                toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
                    a.get(i)?.as_inline_table()?.key(k)?.span()
                }
                _ => None,
            }
        };
        key.and_then(key_at)
            .or_else(|| key_at("name"))
            .or_else(|| match item {
                toml_edit::Item::ArrayOfTables(a) => a.get(i)?.span(),
                _ => item.span(),
            })
    }
}

/// Where server `name`'s entry stands in `text` (line and column of its `name` key, 1-based):
/// for placing the errors of `validate`, which name the server they concern.
pub fn server_position(text: &str, name: &str) -> Option<(usize, usize)> {
    let top: Table = text.parse().ok()?;
    let i = top
        .get("server")?
        .as_array()?
        .iter()
        .position(|s| s.get("name").and_then(|n| n.as_str()) == Some(name))?;
    let spans = Spans {
        doc: toml_edit::ImDocument::parse(String::from(text)).ok(),
    };
    spans
        .server(i, Some("name"))
        .map(|r| line_col(text, r.start))
}

/// Parses a manifest, deserializing each server's `config` with the schema of its module and
/// resolving the peers it names. `path` prefixes error positions (may be empty). A top-level
/// `[test]` table (scenario settings, read by the host tool) is ignored; any other unknown key,
/// at the top level, in a `[[server]]` or in a `config`, is an error naming it. The result is not
/// yet `validate`d.
pub fn from_toml_file<S: Schemas>(path: &str, text: &str, schemas: &S) -> Result<System, String> {
    parse(text, schemas).map_err(|e| e.render(path, text))
}

fn parse<S: Schemas>(text: &str, schemas: &S) -> Result<System, Located> {
    let top: Table = text
        .parse()
        .map_err(|e: toml::de::Error| Located::new(e.span(), e.message().to_string()))?;
    let spans = Spans {
        doc: toml_edit::ImDocument::parse(String::from(text)).ok(),
    };
    let mut name = None;
    let mut servers = Vec::new();
    // (server, use) indices of `uses` entries without a badge.
    let mut implicit: Vec<(usize, usize)> = Vec::new();
    for (k, v) in &top {
        match k.as_str() {
            "name" => {
                name = Some(string(v, "name", "").map_err(|m| Located::new(spans.top("name"), m))?)
            }
            "server" => {
                let arr = v.as_array().ok_or_else(|| {
                    Located::new(
                        spans.top("server"),
                        "`server` must be an array of tables ([[server]])".into(),
                    )
                })?;
                for (i, s) in arr.iter().enumerate() {
                    let t = s.as_table().ok_or_else(|| {
                        Located::new(
                            spans.server(i, None),
                            format!("server #{}: not a table", i + 1),
                        )
                    })?;
                    let (s, imp) = server(t, i)
                        .map_err(|(k, m)| Located::new(spans.server(i, k.as_deref()), m))?;
                    if t.contains_key("config") && !schemas.has(&s.module) {
                        return Err(Located::new(
                            spans.server(i, Some("config")),
                            format!(
                                "server `{}`: module `{}` has no configuration schema, so it takes no `config` table",
                                s.name, s.module
                            ),
                        ));
                    }
                    implicit.extend(imp.into_iter().map(|u| (i, u)));
                    servers.push(s);
                }
            }
            "test" => {}
            other => {
                return Err(Located::new(
                    spans.top(other),
                    format!("unknown top-level key `{other}`"),
                ))
            }
        }
    }
    let name = name.ok_or_else(|| Located::new(None, "missing top-level `name`".into()))?;
    assign_badges(&mut servers, &implicit);
    let mut sys = System { name, servers };
    configure(text, &mut sys, schemas, &spans)?;
    Ok(sys)
}

/// Gives each `uses` entry without a badge the smallest badge from 1 that no other user of that
/// endpoint has, so the server tells those clients apart.
fn assign_badges(servers: &mut [Server], implicit: &[(usize, usize)]) {
    let mut taken: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (i, s) in servers.iter().enumerate() {
        for (j, u) in s.uses.iter().enumerate() {
            if !implicit.contains(&(i, j)) {
                taken.entry(u.endpoint.clone()).or_default().push(u.badge);
            }
        }
    }
    for &(i, j) in implicit {
        let t = taken
            .entry(servers[i].uses[j].endpoint.clone())
            .or_default();
        let b = (1..).find(|b| !t.contains(b)).unwrap_or(1);
        t.push(b);
        servers[i].uses[j].badge = b;
    }
}

/// Deserializes every server's `config` with its module's schema (a server of a module with a
/// schema but no `config` table gets the schema's defaults, or an error for a missing field),
/// checks and resolves the peers it names, and stores the encoding in `Server::config`.
fn configure<S: Schemas>(
    text: &str,
    sys: &mut System,
    schemas: &S,
    spans: &Spans,
) -> Result<(), Located> {
    let owned: Vec<Option<String>> = sys
        .servers
        .iter()
        .map(|s| schemas.has(&s.module).then(|| s.module.clone()))
        .collect();
    let modules: Vec<Option<&str>> = owned.iter().map(|m| m.as_deref()).collect();
    let names: Vec<String> = sys.servers.iter().map(|s| s.name.clone()).collect();
    if modules.iter().all(|m| m.is_none()) {
        return Ok(());
    }
    let current = Cell::new(0usize);
    let found = RefCell::new(Vec::new());
    let seed = DocSeed {
        schemas,
        modules: &modules,
        current: &current,
        found: &found,
    };
    let in_server = |i: usize, m: &str| format!("server `{}`: config: {m}", names[i]);
    seed.deserialize(toml::Deserializer::new(text))
        .map_err(|e: toml::de::Error| {
            Located::new(e.span(), in_server(current.get(), e.message()))
        })?;
    let mut configs: Vec<Option<Box<dyn HostConfig>>> = sys.servers.iter().map(|_| None).collect();
    for (i, c) in found.into_inner() {
        configs[i] = Some(c);
    }
    for (i, m) in modules.iter().enumerate() {
        let Some(m) = m else { continue };
        if configs[i].is_none() {
            let empty = Value::Table(Table::new());
            let c = schemas.decode(m, empty).map_err(|e: toml::de::Error| {
                Located::new(spans.server(i, None), in_server(i, e.message()))
            })?;
            configs[i] = Some(c);
        }
    }
    for (i, c) in configs.iter_mut().enumerate() {
        let Some(c) = c else { continue };
        let mut err = None;
        c.peers(&mut |p| {
            if err.is_none() {
                err = resolve(sys, i, p).err();
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        let bytes = c.encode();
        if bytes.len() > MAX_CONFIG_BYTES {
            return Err(Located::new(
                spans.server(i, Some("config")),
                in_server(
                    i,
                    &format!("encodes to {} bytes, above {MAX_CONFIG_BYTES}", bytes.len()),
                ),
            ));
        }
        sys.servers[i].config = bytes;
    }
    Ok(())
}

/// Checks one peer name of server `i`'s configuration and fills in a client's badge.
fn resolve(sys: &System, i: usize, p: Peer<'_>) -> Result<(), Located> {
    let me = &sys.servers[i];
    let err = |span: &Range<usize>, m: String| {
        let at = (span.end > span.start).then(|| span.clone());
        Located::new(at, format!("server `{}`: config: {m}", me.name))
    };
    match p {
        Peer::Endpoint(e) => {
            if !me.uses.iter().any(|u| u.endpoint == e.name) {
                return Err(err(
                    &e.span,
                    format!("`{}` is not an endpoint this server `uses`", e.name),
                ));
            }
        }
        Peer::Client(c) => {
            let Some(client) = sys.servers.iter().find(|s| s.name == c.name) else {
                return Err(err(
                    &c.span,
                    format!("`{}` is not a server of this system", c.name),
                ));
            };
            let Some(u) = client
                .uses
                .iter()
                .find(|u| me.provides.contains(&u.endpoint))
            else {
                return Err(err(
                    &c.span,
                    format!(
                        "server `{}` does not use an endpoint of `{}` (add it to its `uses`)",
                        c.name, me.name
                    ),
                ));
            };
            // The badge is how the server tells this client apart: it must be this client's.
            if let Some(o) = sys.servers.iter().find(|s| {
                s.name != client.name
                    && s.uses
                        .iter()
                        .any(|v| v.endpoint == u.endpoint && v.badge == u.badge)
            }) {
                return Err(err(
                    &c.span,
                    format!(
                        "server `{}` shares badge {} on `{}` with server `{}`, so `{}` cannot tell them apart",
                        c.name, u.badge, u.endpoint, o.name, me.name
                    ),
                ));
            }
            c.badge = u.badge;
        }
    }
    Ok(())
}

/// Walks the document and deserializes the `config` value of each `[[server]]` whose module has a
/// schema, through the TOML deserializer itself so that its errors carry positions.
struct DocSeed<'a, S> {
    schemas: &'a S,
    modules: &'a [Option<&'a str>],
    /// The server being read (for error messages).
    current: &'a Cell<usize>,
    found: &'a RefCell<Vec<(usize, Box<dyn HostConfig>)>>,
}

impl<S> Clone for DocSeed<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for DocSeed<'_, S> {}

impl<'de, S: Schemas> DeserializeSeed<'de> for DocSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: Schemas> Visitor<'de> for DocSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a manifest")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        while let Some(k) = a.next_key::<String>()? {
            if k == "server" {
                a.next_value_seed(Servers(self))?;
            } else {
                a.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The `server` array.
struct Servers<'a, S>(DocSeed<'a, S>);

impl<'de, S: Schemas> DeserializeSeed<'de> for Servers<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S: Schemas> Visitor<'de> for Servers<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of servers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            self.0.current.set(i);
            if a.next_element_seed(OneServer(self.0, i))?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
}

/// One `[[server]]` entry: only its `config` is read.
struct OneServer<'a, S>(DocSeed<'a, S>, usize);

impl<'de, S: Schemas> DeserializeSeed<'de> for OneServer<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: Schemas> Visitor<'de> for OneServer<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a server table")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        let OneServer(doc, i) = self;
        let module = doc.modules.get(i).copied().flatten();
        while let Some(k) = a.next_key::<String>()? {
            match module {
                Some(m) if k == "config" => {
                    let c = a.next_value_seed(OneConfig(doc.schemas, m))?;
                    doc.found.borrow_mut().push((i, c));
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct OneConfig<'a, S>(&'a S, &'a str);

impl<'de, S: Schemas> DeserializeSeed<'de> for OneConfig<'_, S> {
    type Value = Box<dyn HostConfig>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.decode(self.1, d)
    }
}

/// One `[[server]]` entry, without its `config`. An error names the key it concerns (for its
/// position); `uses` entries without a badge are returned by index.
fn server(t: &Table, index: usize) -> Result<(Server, Vec<usize>), (Option<String>, String)> {
    let name = match t.get("name") {
        Some(v) => string(v, "name", &format!("server #{}", index + 1))
            .map_err(|m| (Some(String::from("name")), m))?,
        None => return Err((None, format!("server #{}: missing `name`", index + 1))),
    };
    let ctx = format!("server `{name}`");
    let unknown: Vec<&str> = t
        .keys()
        .map(|k| k.as_str())
        .filter(|k| !SERVER_KEYS.contains(k))
        .collect();
    if !unknown.is_empty() {
        let list: Vec<String> = unknown.iter().map(|k| format!("`{k}`")).collect();
        return Err((
            Some(String::from(unknown[0])),
            format!("{ctx}: unknown key(s) {}", list.join(", ")),
        ));
    }
    let mut s = Server {
        module: name.clone(),
        name,
        ..Server::default()
    };
    let mut implicit = Vec::new();
    let at = |k: &'static str| move |m: String| (Some(String::from(k)), m);
    if let Some(v) = t.get("module") {
        s.module = string(v, "module", &ctx).map_err(at("module"))?;
    }
    s.priority = match t.get("priority") {
        Some(v) => int(v, "priority", &ctx, 0, 255).map_err(at("priority"))? as u8,
        None => DEFAULT_PRIORITY,
    };
    if let Some(v) = t.get("args") {
        s.args = strings(v, "args", &ctx).map_err(at("args"))?;
    }
    if let Some(v) = t.get("console") {
        s.console = v
            .as_bool()
            .ok_or_else(|| format!("{ctx}: `console` must be true or false"))
            .map_err(at("console"))?;
    }
    if let Some(v) = t.get("wait") {
        s.wait = v
            .as_bool()
            .ok_or_else(|| format!("{ctx}: `wait` must be true or false"))
            .map_err(at("wait"))?;
    }
    if let Some(v) = t.get("kmem_kb") {
        s.kmem_kb = int(v, "kmem_kb", &ctx, 0, u32::MAX as i64).map_err(at("kmem_kb"))? as u32;
    }
    s.heap_kb = match t.get("heap_kb") {
        Some(v) => int(v, "heap_kb", &ctx, 0, u32::MAX as i64).map_err(at("heap_kb"))? as u32,
        None => DEFAULT_HEAP_KB,
    };
    if let Some(v) = t.get("provides") {
        s.provides = strings(v, "provides", &ctx).map_err(at("provides"))?;
    }
    if let Some(v) = t.get("uses") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `uses` must be an array"))
            .map_err(at("uses"))?;
        for u in arr {
            let (u, explicit) = use_item(u, &ctx).map_err(at("uses"))?;
            if !explicit {
                implicit.push(s.uses.len());
            }
            s.uses.push(u);
        }
    }
    if let Some(v) = t.get("irqs") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `irqs` must be an array"))
            .map_err(at("irqs"))?;
        for x in arr {
            s.irqs
                .push(int(x, "irqs", &ctx, 0, 255).map_err(at("irqs"))? as u8);
        }
    }
    if let Some(v) = t.get("ioports") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `ioports` must be an array"))
            .map_err(at("ioports"))?;
        for x in arr {
            s.ioports
                .push(io_range(x, "ioports", &ctx).map_err(at("ioports"))?);
        }
    }
    if let Some(v) = t.get("io_window") {
        s.io_window = Some(io_range(v, "io_window", &ctx).map_err(at("io_window"))?);
    }
    if let Some(v) = t.get("irq_lines") {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("{ctx}: `irq_lines` must be an array"))
            .map_err(at("irq_lines"))?;
        for x in arr {
            s.irq_lines
                .push(int(x, "irq_lines", &ctx, 0, 255).map_err(at("irq_lines"))? as u8);
        }
    }
    if let Some(v) = t.get("modules") {
        s.modules = strings(v, "modules", &ctx).map_err(at("modules"))?;
    }
    if let Some(v) = t.get("pager") {
        s.pager = Some(string(v, "pager", &ctx).map_err(at("pager"))?);
    }
    if let Some(v) = t.get("huge_pages") {
        s.huge_pages =
            int(v, "huge_pages", &ctx, 0, u32::MAX as i64).map_err(at("huge_pages"))? as u32;
    }
    if let Some(v) = t.get("cap_slots") {
        s.cap_slots =
            int(v, "cap_slots", &ctx, 0, u32::MAX as i64).map_err(at("cap_slots"))? as u32;
    }
    if let Some(v) = t.get("restart") {
        let name = string(v, "restart", &ctx).map_err(at("restart"))?;
        s.restart = crate::Restart::from_name(&name)
            .ok_or_else(|| {
                format!("{ctx}: `restart` must be \"restart\", \"reset\", \"hold\" or \"reboot\"")
            })
            .map_err(at("restart"))?;
    }
    if let Some(v) = t.get("max_restarts") {
        s.max_restarts =
            int(v, "max_restarts", &ctx, 0, u32::MAX as i64).map_err(at("max_restarts"))? as u32;
    }
    if let Some(v) = t.get("backoff_ms") {
        s.backoff_ms =
            int(v, "backoff_ms", &ctx, 0, u32::MAX as i64).map_err(at("backoff_ms"))? as u32;
    }
    if let Some(v) = t.get("may_kill") {
        s.may_kill = strings(v, "may_kill", &ctx).map_err(at("may_kill"))?;
    }
    if let Some(v) = t.get("hang_ms") {
        s.hang_ms = int(v, "hang_ms", &ctx, 0, u32::MAX as i64).map_err(at("hang_ms"))? as u32;
    }
    if let Some(v) = t.get("fault_log") {
        s.fault_log = v
            .as_bool()
            .ok_or_else(|| format!("{ctx}: `fault_log` must be true or false"))
            .map_err(at("fault_log"))?;
    }
    if let Some(v) = t.get("may_inject") {
        s.may_inject = strings(v, "may_inject", &ctx).map_err(at("may_inject"))?;
    }
    if let Some(v) = t.get("ram_kb") {
        s.ram_kb = int(v, "ram_kb", &ctx, 0, u32::MAX as i64).map_err(at("ram_kb"))? as u32;
    }
    Ok((s, implicit))
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

/// A `uses` entry: `{ endpoint = "x", badge = 1 }`, or a bare endpoint name (or an entry
/// without `badge`) whose badge is assigned later (`assign_badges`); the flag says whether the
/// badge was given.
fn use_item(v: &Value, ctx: &str) -> Result<(Use, bool), String> {
    if let Some(e) = v.as_str() {
        let u = Use {
            endpoint: e.to_string(),
            badge: 0,
        };
        return Ok((u, false));
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
    match t.get("badge") {
        Some(b) => {
            let badge = int(b, "uses.badge", ctx, 0, i64::MAX)? as u64;
            Ok((Use { endpoint, badge }, true))
        }
        None => Ok((Use { endpoint, badge: 0 }, false)),
    }
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
