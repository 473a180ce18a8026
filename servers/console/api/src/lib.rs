//! What the console server (`console`, the user-level driver of COM2) and the rest of the system
//! agree on: the schema of its manifest `config` table, and the line discipline ([`ldisc`]),
//! which is plain logic (bytes in, lines out) tested on the host. It touches nothing.
//!
//! ```toml
//! [[server]]
//! name = "console"
//! provides = ["console", "console-in"]
//! irqs = [3]
//! ioports = [{ base = 0x2f8, count = 8 }]
//! kmem_kb = 64
//! config = { echo = false }
//! ```
//! All keys are optional (the table too):
//! These set the terminal's settings at start (a Linux serial tty's by default, see
//! [`Config::termios`]); programs change them at run time (`console.idl`'s `tcsets`).
//! - `echo` (default true): echo typed characters back to the line, as a terminal expects. Off
//!   for tests that feed input from a file and compare the output.
//! - `onlcr` (default true): `\n` written becomes `\r\n` on the line, what a Linux tty does by
//!   default.
//! - `canonical` (default true): line mode (a read returns at most one line; erase and Ctrl-D
//!   act); false: raw bytes, a read returns whatever has arrived.
//! - `rows`, `cols` (default 24, 80): what `winsize` reports.
#![no_std]

extern crate alloc;

pub mod ldisc;
pub mod termios;

use sawmill_manifest::config::{Peer, Peers};
use serde::{Deserialize, Serialize};

/// The console's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "yes")]
    pub echo: bool,
    #[serde(default = "yes")]
    pub onlcr: bool,
    #[serde(default = "yes")]
    pub canonical: bool,
    #[serde(default = "default_rows")]
    pub rows: u16,
    #[serde(default = "default_cols")]
    pub cols: u16,
}

fn yes() -> bool {
    true
}
fn default_rows() -> u16 {
    24
}
fn default_cols() -> u16 {
    80
}

impl Default for Config {
    fn default() -> Self {
        Config {
            echo: true,
            onlcr: true,
            canonical: true,
            rows: default_rows(),
            cols: default_cols(),
        }
    }
}

impl Config {
    /// The terminal settings the console starts with: a Linux serial tty's, with the echo
    /// bits cleared for `echo = false` (as `stty -echo -echoe -echok -echonl -echoctl`),
    /// ONLCR for `onlcr = false`, ICANON for `canonical = false`.
    pub fn termios(&self) -> termios::Termios {
        let mut t = termios::Termios::default();
        if !self.echo {
            t.lflag &= !termios::Termios::ECHO_BITS;
        }
        if !self.onlcr {
            t.oflag &= !termios::ONLCR;
        }
        if !self.canonical {
            t.lflag &= !termios::ICANON;
        }
        t
    }
}

impl Peers for Config {
    fn peers(&mut self, _f: &mut dyn FnMut(Peer<'_>)) {}
}
