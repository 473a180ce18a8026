//! The console server: the user-level driver of the second serial line (COM2, a 16550 UART at
//! I/O ports 0x2f8..0x2ff, IRQ 3), the Linux programs' terminal. It serves
//! `interfaces/console.idl` on two endpoints: `console` (write, winsize, pending: never waits) and
//! `console-in` (read: waits for input, one read at a time).
//!
//! Three threads share one [`Shared`] state under a lock held only for bounded work:
//! - the main thread serves `console`: output goes through the line discipline's output
//!   processing and is sent by polling the UART (see [`uart::send`] for why polling);
//! - the reader thread serves `console-in`: a read that finds nothing waits on the `wake`
//!   notification inside its handler, so reads queue at the endpoint while writes go on;
//! - the interrupt thread takes IRQ 3: it moves received bytes through the line discipline
//!   (which echoes and edits lines as they are typed, reader or not) and wakes the reader.
//!   When the discipline is full it stops the UART's receive interrupt and leaves bytes in the
//!   UART (QEMU holds the rest); the reader, having made room, signals it to resume.
//!
//! The terminal's settings (a termios, read and changed through `tcgets`/`tcsets`) and its size
//! live in [`Shared`] too: one terminal, whichever endpoint a program asks on. Its session and
//! foreground process group are the process server's (`proc`, optional): a typed Ctrl-C,
//! Ctrl-\ or Ctrl-Z becomes `proc.tty_signal`, which signals the foreground group. A Linux
//! process reads with `try_read` (never waits here) and waits on its own wake notification
//! (`watch`), so that a signal can end its wait; `console-in`'s waiting `read` stays for
//! clients without one.
//!
//! Start settings: the optional `config` table (`sawmill_console_api::Config`: echo, onlcr,
//! canonical, rows, cols). It touches only ports 0x2f8..0x2ff, IRQ 3, its endpoints and the
//! `proc` capability (only for `tty_signal`).
#![no_std]
#![no_main]

extern crate alloc;

mod uart;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_abi::ObjKind;
use sawmill_console_api::ldisc::{self, Input, LineDiscipline};
use sawmill_console_api::termios::{Termios, NCCS};
use sawmill_console_api::Config;
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, IpcResult, Next};
use sawmill_interfaces::{console, proc, ConsoleError};
use sawmill_rt::{env, println, slots, sys, thread};

sawmill_rt::entry!(main);

/// The name of the input endpoint (the output endpoint is `console::NAME`).
const INPUT_ENDPOINT: &str = "console-in";
/// COM2's interrupt line; root binds it to bit `1 << IRQ_LINE` of our IRQ notification.
const IRQ_LINE: u64 = 3;
/// Bit of the IRQ notification the reader signals when it made room after the interrupt
/// thread stopped taking input (a bit no interrupt line of ours uses).
const RESUME_BIT: u64 = 1 << 0;
/// Largest read or write (the interface's `bytes<480>`).
const MAX_TRANSFER: usize = 480;
/// Most bytes the interrupt thread takes from the UART under one hold of the lock, so that a
/// flood of input does not keep writers waiting long.
const RX_BATCH: usize = 64;
/// Stack of each extra thread.
const THREAD_STACK: usize = 16 * 1024;

/// What all threads share.
struct Shared {
    ldisc: LineDiscipline,
    /// The interrupt thread stopped the receive interrupt because the discipline was full.
    rx_stopped: bool,
    /// Whether the debug console was told of the first stop (once: a diagnostic, not a log).
    stop_reported: bool,
    /// Scratch for output processing and echo (kept to avoid allocating per request).
    out: Vec<u8>,
    /// The terminal's size (rows, columns).
    winsize: (u16, u16),
    /// Signals typed (ISIG's characters, bit = signal number) not yet passed on to the
    /// foreground process group.
    raised: u32,
    /// Notifications to signal once input is readable (`watch`): (slot, bits).
    watchers: Vec<(u64, u64)>,
    /// Capability slots free for reuse by `watch`.
    free_slots: Vec<u64>,
}

/// Most registrations of `watch` held at once; one more wakes them all (a waiter woken for
/// nothing looks again and registers anew), so none is lost.
const MAX_WATCHERS: usize = 16;

impl Shared {
    /// Input is readable: every registered waiter is signalled, once.
    fn wake_watchers(&mut self) {
        for (slot, bits) in self.watchers.drain(..) {
            let _ = sys::notify_signal(slot, bits);
            let _ = sys::cap_delete(slot);
            self.free_slots.push(slot);
        }
    }
}

/// The lock around [`Shared`]: held for bounded work only, never across a wait.
static SHARED: spin::Mutex<Option<Shared>> = spin::Mutex::new(None);
/// The notification the interrupt thread signals when input became readable.
static WAKE: AtomicU64 = AtomicU64::new(0);

/// Runs `f` on the shared state. Threads of equal priority share the CPU by preemption, so a
/// waiter yields instead of spinning out its time slice.
fn with_shared<R>(f: impl FnOnce(&mut Shared) -> R) -> R {
    loop {
        if let Some(mut guard) = SHARED.try_lock() {
            // Set before any thread starts (main), never taken away.
            let s = guard
                .as_mut()
                .expect("console state set before the threads start");
            return f(s);
        }
        sys::yield_now();
    }
}

/// One endpoint's server: `input` says whether it is `console-in`.
struct Endpoint {
    input: bool,
    /// Post-reply work: the receive slot for `watch`'s capability.
    after: AfterReply,
}

impl rpc::Serve for Endpoint {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        console::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

impl console::Server for Endpoint {
    fn write(&mut self, _badge: u64, data: &[u8]) -> Result<u32, ConsoleError> {
        with_shared(|s| {
            s.out.clear();
            ldisc::output(s.ldisc.termios(), data, &mut s.out);
            uart::send(&s.out);
        });
        Ok(data.len() as u32)
    }

    fn read(&mut self, _badge: u64, max: u32) -> Result<Bytes<MAX_TRANSFER>, ConsoleError> {
        if !self.input {
            return Err(ConsoleError::WrongEndpoint);
        }
        let max = max as usize;
        if max == 0 || max > MAX_TRANSFER {
            return Err(ConsoleError::Invalid);
        }
        let mut reply = Bytes::<MAX_TRANSFER>::new();
        loop {
            let got = with_shared(|s| {
                let n = s.ldisc.read(&mut reply.buf_mut()[..max])?;
                if s.rx_stopped && s.ldisc.has_room() {
                    s.rx_stopped = false;
                    let _ = sys::notify_signal(slots::IRQ_NOTIFY, RESUME_BIT);
                }
                Some(n)
            });
            if let Some(n) = got {
                reply.set_len(n);
                return Ok(reply);
            }
            // Nothing yet: the interrupt thread signals once input is readable. A signal that
            // came between the check and here stays pending, so none is lost.
            let _ = sys::notify_wait(WAKE.load(Ordering::Relaxed), 0);
        }
    }

    fn try_read(&mut self, _badge: u64, max: u32) -> Result<console::TryReadOut, ConsoleError> {
        let max = max as usize;
        if max == 0 || max > MAX_TRANSFER {
            return Err(ConsoleError::Invalid);
        }
        let mut data = Bytes::<MAX_TRANSFER>::new();
        let got = with_shared(|s| {
            let n = s.ldisc.read(&mut data.buf_mut()[..max])?;
            if s.rx_stopped && s.ldisc.has_room() {
                s.rx_stopped = false;
                let _ = sys::notify_signal(slots::IRQ_NOTIFY, RESUME_BIT);
            }
            Some(n)
        });
        data.set_len(got.unwrap_or(0));
        Ok(console::TryReadOut {
            data,
            done: got.is_some(),
        })
    }

    fn pending(&mut self, _badge: u64) -> Result<u32, ConsoleError> {
        Ok(with_shared(|s| s.ldisc.pending()) as u32)
    }

    fn readable(&mut self, _badge: u64) -> Result<bool, ConsoleError> {
        Ok(with_shared(|s| s.ldisc.readable()))
    }

    fn watch(&mut self, _badge: u64, wake: u64, bits: u64) -> Result<(), ConsoleError> {
        with_shared(|s| {
            if s.ldisc.readable() {
                let _ = sys::notify_signal(wake, bits);
                return Ok(());
            }
            if s.watchers.len() >= MAX_WATCHERS {
                s.wake_watchers();
            }
            let slot = s.free_slots.pop().unwrap_or_else(thread::alloc_slot);
            if sys::cap_copy(wake, slot).is_err() {
                s.free_slots.push(slot);
                return Err(ConsoleError::Invalid);
            }
            s.watchers.push((slot, bits));
            Ok(())
        })
    }

    fn winsize(&mut self, _badge: u64) -> Result<console::WinsizeOut, ConsoleError> {
        let (rows, cols) = with_shared(|s| s.winsize);
        Ok(console::WinsizeOut { rows, cols })
    }

    fn set_winsize(&mut self, _badge: u64, rows: u16, cols: u16) -> Result<(), ConsoleError> {
        with_shared(|s| s.winsize = (rows, cols));
        Ok(())
    }

    fn tcgets(&mut self, _badge: u64) -> Result<console::TcgetsOut, ConsoleError> {
        let t = with_shared(|s| *s.ldisc.termios());
        Ok(console::TcgetsOut {
            iflag: t.iflag,
            oflag: t.oflag,
            cflag: t.cflag,
            lflag: t.lflag,
            line: t.line,
            cc: t.cc,
        })
    }

    fn tcsets(
        &mut self,
        _badge: u64,
        iflag: u32,
        oflag: u32,
        cflag: u32,
        lflag: u32,
        line: u8,
        cc: [u8; NCCS],
        flush: bool,
    ) -> Result<(), ConsoleError> {
        let t = Termios {
            iflag,
            oflag,
            cflag,
            lflag,
            line,
            cc,
        };
        with_shared(|s| {
            s.ldisc.set_termios(t, flush);
            if s.rx_stopped && s.ldisc.has_room() {
                s.rx_stopped = false;
                let _ = sys::notify_signal(slots::IRQ_NOTIFY, RESUME_BIT);
            }
            // A waiting reader may be served now (a partial line became readable, or VMIN
            // went down): it looks again.
            let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), 1);
            if s.ldisc.readable() {
                s.wake_watchers();
            }
        });
        Ok(())
    }
}

/// Moves what the UART holds into the line discipline (at most [`RX_BATCH`] bytes), sends the
/// echo, and wakes the reader if a read can complete. Returns whether more bytes wait in the
/// UART that the discipline could take now.
fn take_input() -> bool {
    with_shared(|s| {
        s.out.clear();
        let mut taken = 0;
        while taken < RX_BATCH && uart::received() {
            if !s.ldisc.has_room() {
                // Full: leave the bytes in the UART until a read makes room.
                uart::receive_interrupt(false);
                s.rx_stopped = true;
                if !s.stop_reported {
                    s.stop_reported = true;
                    println!("console: input buffer full, further input waits in the UART");
                }
                break;
            }
            let byte = uart::receive();
            if let Input::Signal(sig) = s.ldisc.input(byte, &mut s.out) {
                s.raised |= 1 << sig;
            }
            taken += 1;
        }
        if !s.out.is_empty() {
            uart::send(&s.out);
        }
        if s.ldisc.readable() {
            let _ = sys::notify_signal(WAKE.load(Ordering::Relaxed), 1);
            s.wake_watchers();
        }
        !s.rx_stopped && uart::received()
    })
}

/// The interrupt thread: waits for IRQ 3 (or the reader's resume signal) and takes input.
fn interrupts(irq: u64) -> ! {
    loop {
        let bits = sys::notify_wait(slots::IRQ_NOTIFY, 0).unwrap_or(0);
        if bits & RESUME_BIT != 0 {
            with_shared(|_| uart::receive_interrupt(true));
        }
        while take_input() {}
        if bits & (1 << IRQ_LINE) != 0 {
            let _ = sys::irq_ack(irq);
            // A byte that arrived after the last check but before the ack may have raised
            // the (edge-triggered) line while it was masked: look once more.
            while take_input() {}
        }
        let raised = with_shared(|s| core::mem::take(&mut s.raised));
        if raised != 0 {
            raise(raised);
        }
    }
}

/// The process server's capability (`proc`, badged `CONSOLE_BADGE`), 0 without one.
static PROC: AtomicU64 = AtomicU64::new(0);

/// Passes typed signals (bit = signal number) on to the foreground process group through the
/// process server, which keeps the terminal's session and foreground group; outside the lock.
fn raise(signals: u32) {
    let p = PROC.load(Ordering::Relaxed);
    if p == 0 {
        println!(
            "console: signal characters typed ({:#x}); no process server to pass them to",
            signals
        );
        return;
    }
    let client = proc::Client::new(p);
    for sig in 1..32 {
        if signals & (1 << sig) != 0 {
            if let Err(e) = client.tty_signal(sig) {
                println!("console: proc refused signal {}: {:?}", sig, e);
            }
        }
    }
}

fn main() {
    let cfg: Config = match env::config() {
        Ok(c) => c,
        Err(env::ConfigError::Missing) => Config::default(),
        Err(e) => {
            println!("console: FAIL config: {}", e);
            return;
        }
    };
    let (Some(out_ep), Some(in_ep), Some(irq)) = (
        env::cap(console::NAME),
        env::cap(INPUT_ENDPOINT),
        env::cap("irq:3"),
    ) else {
        println!(
            "console: FAIL needs endpoints `{}` and `{}` provided and irqs = [{}]",
            console::NAME,
            INPUT_ENDPOINT,
            IRQ_LINE
        );
        return;
    };
    let wake = match thread::create(ObjKind::Notification, 0) {
        Ok(n) => n,
        Err(e) => {
            println!("console: FAIL notification (kmem_kb?): {}", e.name());
            return;
        }
    };
    WAKE.store(wake, Ordering::Relaxed);
    PROC.store(env::cap("proc").unwrap_or(0), Ordering::Relaxed);
    uart::init();
    *SHARED.lock() = Some(Shared {
        ldisc: LineDiscipline::new(cfg.termios()),
        rx_stopped: false,
        stop_reported: false,
        out: Vec::with_capacity(2 * MAX_TRANSFER),
        winsize: (cfg.rows, cfg.cols),
        raised: 0,
        watchers: Vec::new(),
        free_slots: Vec::new(),
    });
    if let Err(e) = thread::spawn(255, THREAD_STACK, move || interrupts(irq)) {
        println!("console: FAIL interrupt thread: {}", e.name());
        return;
    }
    if let Err(e) = thread::spawn(255, THREAD_STACK, move || {
        console::serve(
            in_ep,
            &mut Endpoint {
                input: true,
                after: AfterReply::new(),
            },
        )
    }) {
        println!("console: FAIL reader thread: {}", e.name());
        return;
    }
    // A byte that was waiting before the receive interrupt was on raised no edge: take it.
    while take_input() {}
    println!(
        "console: serving COM2 (echo {}, onlcr {}, {} mode)",
        if cfg.echo { "on" } else { "off" },
        if cfg.onlcr { "on" } else { "off" },
        if cfg.canonical { "line" } else { "raw" }
    );
    let mut out = Endpoint {
        input: false,
        after: AfterReply::new(),
    };
    // `watch` brings a capability: it lands here (and is deleted after each call).
    out.after.receive_into(&[thread::alloc_slot()]);
    let _ = rpc::serve(out_ep, &mut out);
}
