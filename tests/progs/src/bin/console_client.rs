//! Scenarios `console-uart`, `console-flow` and `console-raw`: clients of the console server
//! (servers/console).
//!
//! With argument `reader`: checks the refusals (a read on `console`, read sizes 0 and 481,
//! malformed messages) and the window size, then reads `console-in` until end of file, printing
//! each read on the debug console, with reads of 5 bytes for the line after "ac\n" (a line
//! longer than the read comes in pieces). Then it writes a greeting through `console`, tells
//! the `writer` (through `console-sync`) that it is about to block, and reads again, forever.
//!
//! With argument `writer`: waits for the reader's word, lets it block in its read, writes
//! through `console` and reports that the write was not held up.
//!
//! With argument `raw` (scenario `console-raw`; the console starts non-canonical without
//! echo): checks the settings it reads, reads the typed bytes with VMIN = their count (erase,
//! kill and `\r` arrive as bytes, ICRNL applied), polls with VMIN 0 / VTIME 0, then switches the
//! terminal at run time (canonical, OPOST off) and writes lines that must reach the line
//! without `\r`, and sets and reads back the window size.
//!
//! With arguments `slow N` (scenario `console-flow`): reads nothing until the console's line
//! discipline is full, then reads N typed lines and checks each, then the end of file.
#![no_std]
#![no_main]
extern crate alloc;

use alloc::string::{String, ToString};
use core::fmt::Write;
use sawmill_abi::MsgTag;
use sawmill_console_api::ldisc;
use sawmill_console_api::termios::{self, Termios};
use sawmill_interfaces::rpc::{proto, Error};
use sawmill_interfaces::{console, ConsoleError};
use sawmill_rt::{env, ipc, println, sys};
use sawmill_testprogs::{check, endpoint};

sawmill_rt::entry!(main);

const GREETING: &[u8] = b"reader: hello from the console client\n";
const WRITER_LINE: &[u8] = b"writer: not held up by the blocked reader\n";
/// Yields the writer makes after the reader's word, so that the reader is blocked in its read.
const LET_READER_BLOCK: usize = 200;

fn reader() {
    let out = console::Client::new(endpoint("console"));
    let input = console::Client::new(endpoint("console-in"));
    let sync = endpoint("console-sync");
    check!(
        out.read(16) == Err(Error::App(ConsoleError::WrongEndpoint)),
        "a read on `console` was not refused"
    );
    for bad in [0, 481, u32::MAX] {
        check!(
            input.read(bad) == Err(Error::App(ConsoleError::Invalid)),
            "read of {} bytes was not refused",
            bad
        );
    }
    // Malformed messages get protocol refusals: a write claiming more bytes than the interface
    // allows (and than the message carries), an unknown opcode.
    let m = ipc::call(out.ep, MsgTag::new(console::op::WRITE, 4), [4096, 0, 0, 0]);
    check!(
        m.err == 0 && m.tag.label() == proto::BAD_LENGTH,
        "oversized write: err {} label {:#x}",
        m.err,
        m.tag.label()
    );
    let m = ipc::call(input.ep, MsgTag::new(99, 0), [0; 4]);
    check!(
        m.err == 0 && m.tag.label() == proto::BAD_OPCODE,
        "unknown opcode: err {} label {:#x}",
        m.err,
        m.tag.label()
    );
    let ws = out.winsize();
    check!(
        ws == Ok(console::WinsizeOut { rows: 24, cols: 80 }),
        "winsize {:?}",
        ws
    );
    let mut max = 480;
    loop {
        let got = match input.read(max) {
            Ok(b) => b,
            Err(e) => {
                println!("console-reader: FAIL read: {:?}", e);
                return;
            }
        };
        let data = got.as_slice();
        if data.is_empty() {
            println!("console-reader: end of file");
            break;
        }
        let text = core::str::from_utf8(data).unwrap_or("<not UTF-8>");
        println!("console-reader: read {:?}", text);
        // The line after "ac\n" ("split-me\n") is read 5 bytes at a time, then whole again.
        max = if text == "ac\n" || text == "split" {
            5
        } else {
            480
        };
    }
    // Written after the end of file, when all typed input has been echoed, so that the order
    // on the line is fixed.
    check!(
        out.write(GREETING) == Ok(GREETING.len() as u32),
        "write through console"
    );
    let _ = ipc::send(sync, MsgTag::new(1, 0), [0; 4]);
    println!("console-reader: blocking in a read with no input to come");
    let r = input.read(480);
    println!(
        "console-reader: FAIL read returned {:?}",
        r.map(|b| b.len())
    );
}

fn writer() {
    let out = console::Client::new(endpoint("console"));
    let sync = endpoint("console-sync");
    let m = ipc::recv(sync, 0);
    check!(m.err == 0, "waiting for the reader: {}", m.err);
    for _ in 0..LET_READER_BLOCK {
        sys::yield_now();
    }
    check!(
        out.write(WRITER_LINE) == Ok(WRITER_LINE.len() as u32),
        "write while the reader is blocked"
    );
    println!("console-writer: PASS wrote while the reader was blocked in read");
}

/// Length of the filler of every line the `console-flow` scenario types: the letters `a..z`
/// repeated, making lines of 128 bytes (32 of them fill the console's line discipline).
const FILLER_LEN: usize = 118;
/// Yields of the `slow` client between seeing the discipline full and reading.
const LET_DRIVER_STOP: usize = 1000;
/// Most polls of `pending` before the `slow` client gives up on the discipline filling.
const FILL_POLLS: u32 = 10_000_000;

/// Reads `lines` typed lines (`line NN: ` and the filler) only once the console's line
/// discipline is full, and checks each is intact and in order.
fn slow(lines: usize) {
    let out = console::Client::new(endpoint("console"));
    let input = console::Client::new(endpoint("console-in"));
    // The discipline holds only finished lines when its capacity is a whole number of them.
    let mut polls = 0;
    loop {
        match input.pending() {
            Ok(n) if n as usize == ldisc::CAPACITY => break,
            Ok(n) if polls < FILL_POLLS => {
                polls += 1;
                check!((n as usize) < ldisc::CAPACITY, "pending {}", n);
                sys::yield_now();
            }
            other => {
                println!(
                    "console-slow: FAIL the discipline did not fill: {:?}",
                    other
                );
                return;
            }
        }
    }
    println!(
        "console-slow: the line discipline is full ({} bytes pending)",
        ldisc::CAPACITY
    );
    // Usually long enough for the next byte to reach the driver, which then stops the receive
    // interrupt (its path back is resumed by the first read); not needed for the checks.
    for _ in 0..LET_DRIVER_STOP {
        sys::yield_now();
    }
    let mut want = String::new();
    for i in 0..lines {
        want.clear();
        let _ = write!(want, "line {:02}: ", i);
        want.extend((0..FILLER_LEN).map(|j| (b'a' + (j % 26) as u8) as char));
        want.push('\n');
        let got = input.read(480);
        check!(
            got.as_ref().map(|b| b.as_slice()) == Ok(want.as_bytes()),
            "line {}: read {:?}",
            i,
            got.map(|b| String::from_utf8_lossy(b.as_slice()).into_owned())
        );
    }
    let eof = input.read(480);
    check!(
        eof.map(|b| b.len()) == Ok(0),
        "no end of file after the lines"
    );
    check!(out.write(b"slow: done\n") == Ok(11), "write");
    println!(
        "console-slow: PASS {} lines of {} bytes arrived intact after the input buffer filled",
        lines,
        want.len()
    );
}

/// What the `raw` client expects to read: the scenario's `com2_input` as bytes, `\r` made `\n`.
const RAW_TYPED: &[u8] = b"ab\x7f\x15c\nd";
/// What it writes with OPOST off (the scenario expects it on COM2 as is).
const RAW_WRITTEN: &[u8] = b"raw: no cr\nraw: after\n";

fn settings(c: &console::Client) -> Option<Termios> {
    let t = c.tcgets().ok()?;
    Some(Termios {
        iflag: t.iflag,
        oflag: t.oflag,
        cflag: t.cflag,
        lflag: t.lflag,
        line: t.line,
        cc: t.cc,
    })
}

fn set(c: &console::Client, t: &Termios) -> bool {
    c.tcsets(t.iflag, t.oflag, t.cflag, t.lflag, t.line, t.cc, false)
        .is_ok()
}

fn raw() {
    let out = console::Client::new(endpoint("console"));
    let input = console::Client::new(endpoint("console-in"));
    let Some(mut t) = settings(&out) else {
        println!("console-raw: FAIL tcgets");
        return;
    };
    check!(
        t.lflag & (termios::ICANON | termios::ECHO) == 0 && t.cc[termios::VMIN] == 1,
        "start settings {:?}",
        t
    );
    // The whole input in one read: VMIN makes it wait for all of it.
    t.cc[termios::VMIN] = RAW_TYPED.len() as u8;
    check!(set(&out, &t), "tcsets VMIN");
    let got = input.read(480);
    check!(
        got.as_ref().map(|b| b.as_slice()) == Ok(RAW_TYPED),
        "raw read {:?}",
        got.map(|b| b.as_slice().escape_ascii().to_string())
    );
    println!("console-raw: read the typed bytes unedited in one read (VMIN)");
    t.cc[termios::VMIN] = 0;
    check!(set(&out, &t), "tcsets VMIN 0");
    let got = input.read(480).map(|b| b.len());
    check!(got == Ok(0), "poll read {:?}", got);
    println!("console-raw: VMIN 0, VTIME 0: a read with nothing typed returns at once");
    // At run time: canonical again, and output without processing.
    t.lflag |= termios::ICANON;
    t.oflag &= !termios::OPOST;
    check!(set(&out, &t), "tcsets canonical");
    check!(settings(&out) == Some(t), "tcgets after tcsets");
    check!(
        out.write(RAW_WRITTEN) == Ok(RAW_WRITTEN.len() as u32),
        "write"
    );
    check!(out.set_winsize(50, 132).is_ok(), "set_winsize");
    let ws = out.winsize();
    check!(
        ws == Ok(console::WinsizeOut {
            rows: 50,
            cols: 132
        }),
        "winsize {:?}",
        ws
    );
    println!("console-raw: PASS");
}

fn main() {
    match env::arg(0) {
        Some("reader") => reader(),
        Some("writer") => writer(),
        Some("raw") => raw(),
        Some("slow") => slow(env::arg(1).and_then(|n| n.parse().ok()).unwrap_or(0)),
        other => println!("console-client: FAIL unknown role {:?}", other),
    }
}
