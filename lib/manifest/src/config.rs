//! Typed server configuration: the vocabulary a server's `config` schema uses to name its peers.
//!
//! A server's settings are a `config` table of its `[[server]]` entry. Its schema is a Rust type
//! in the server's `*-api` crate (`#[derive(Deserialize, Serialize)]`,
//! `#[serde(deny_unknown_fields)]`), which the host tool deserializes from TOML, checks and
//! encodes (postcard), and which the server decodes from its environment
//! (`sawmill_rt::env::config`). Peers are named, never numbered:
//! - [`Client`]: a server that calls this one. TOML holds its name; the host tool fills in the
//!   badge root mints for that server's use of this server's endpoint, so the server can tell the
//!   client's calls apart.
//! - [`Endpoint`]: an endpoint this server calls; the host tool checks it is in the server's
//!   `uses`, and the server finds the capability with `sawmill_rt::env::cap(&endpoint.name)`.
//!
//! Both serialize as the bare name in a human-readable format (TOML); in the binary encoding a
//! `Client` is `(name, badge)` and an `Endpoint` its name.

use alloc::string::String;
use core::fmt;
use core::ops::Range;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

/// A server that calls this one, by its manifest name, and the badge its calls carry.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub name: String,
    /// Filled in by the host tool; 0 until then.
    pub badge: u64,
    /// Where the name stands in the manifest text (host only; empty after decoding).
    pub span: Range<usize>,
}

/// An endpoint this server calls, by the name in its `uses`.
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    pub name: String,
    /// Where the name stands in the manifest text (host only; empty after decoding).
    pub span: Range<usize>,
}

// The position is bookkeeping for error messages, not part of the value.
impl PartialEq for Client {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name && self.badge == o.badge
    }
}
impl Eq for Client {}
impl PartialEq for Endpoint {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
    }
}
impl Eq for Endpoint {}

impl Client {
    /// A client known by name and badge (for code that builds configurations by hand).
    pub fn new(name: &str, badge: u64) -> Client {
        Client {
            name: String::from(name),
            badge,
            span: 0..0,
        }
    }
}

impl Endpoint {
    pub fn new(name: &str) -> Endpoint {
        Endpoint {
            name: String::from(name),
            span: 0..0,
        }
    }
}

/// A peer name in a configuration, as the host tool checks and resolves it.
pub enum Peer<'a> {
    Client(&'a mut Client),
    Endpoint(&'a Endpoint),
}

/// Lists every peer name a configuration holds. Each schema implements it by hand (a handful of
/// lines); the host tool uses it to check the names and fill in client badges.
pub trait Peers {
    fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>));
}

/// Reads a peer name. With the `toml` feature (the host tool) it is read through the TOML
/// deserializer's span support, which also records where the name stands — so there names can
/// only come from a TOML document; without it (guests) any human-readable format gives the string.
fn name_and_span<'de, D: Deserializer<'de>>(d: D) -> Result<(String, Range<usize>), D::Error> {
    #[cfg(feature = "toml")]
    {
        let s = toml::Spanned::<String>::deserialize(d)?;
        let span = s.span();
        Ok((s.into_inner(), span))
    }
    #[cfg(not(feature = "toml"))]
    {
        Ok((String::deserialize(d)?, 0..0))
    }
}

impl Serialize for Client {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return s.serialize_str(&self.name);
        }
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.badge)?;
        t.end()
    }
}

impl<'de> Deserialize<'de> for Client {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let (name, span) = name_and_span(d)?;
            return Ok(Client {
                name,
                badge: 0,
                span,
            });
        }
        struct Pair;
        impl<'de> Visitor<'de> for Pair {
            type Value = Client;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a client name and badge")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Client, A::Error> {
                let name: String = a
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let badge: u64 = a
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                Ok(Client {
                    name,
                    badge,
                    span: 0..0,
                })
            }
        }
        d.deserialize_tuple(2, Pair)
    }
}

impl Serialize for Endpoint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name)
    }
}

impl<'de> Deserialize<'de> for Endpoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let (name, span) = name_and_span(d)?;
            return Ok(Endpoint { name, span });
        }
        Ok(Endpoint::new(&String::deserialize(d)?))
    }
}

/// Most bytes a server's encoded configuration may take: it travels in the server's one-page
/// environment beside its name, arguments, capabilities and RAM ranges (mem's, the only long
/// list, are optional records). 2 KiB leaves room for the process server's first command line
/// and environment (`./sawmill run linux`).
pub const MAX_CONFIG_BYTES: usize = 2048;
