//! A hostile client of `idltest`: unknown opcodes, wrong word counts, missing and extra
//! capabilities, map items, out-of-range values, bad buffer lengths and random garbage. Every
//! request must be answered with a protocol error (or refused by the kernel), and the server must
//! keep serving correct requests in between. Ends by telling the server it is done (a `note`
//! under its badge), which `idl-client` waits for.
#![no_std]
#![no_main]

use sawmill_abi::MsgTag;
use sawmill_idltest::{check, free_slot, Checker};
use sawmill_interfaces::idltest::{self, op, Client};
use sawmill_interfaces::rpc::proto;
use sawmill_interfaces::TestError;
use sawmill_rt::{ipc, println, utcb};

sawmill_rt::entry!(main);

/// What a raw request got back: the kernel's error, or the reply label.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Got {
    Kernel(u64),
    Label(u16),
}

/// Sends `words` (all of them, the first four in registers) with `caps` copies of our endpoint
/// capability and `maps` empty map items, under `label`; `nwords` overrides the word count.
fn raw(ep: u64, label: u16, words: &[u64], nwords: Option<usize>, caps: usize, maps: usize) -> Got {
    let u = utcb();
    for (i, w) in words.iter().enumerate().skip(4).take(60) {
        u.mr[i] = *w;
    }
    u.caps_out = [ep; 4];
    for m in u.map_items.iter_mut() {
        *m = Default::default();
    }
    let mut w = [0; 4];
    for (d, s) in w.iter_mut().zip(words) {
        *d = *s;
    }
    let n = nwords.unwrap_or(words.len()) as u64;
    let tag =
        MsgTag(label as u64 | (n & 0x7f) << 16 | (caps as u64 & 7) << 24 | (maps as u64 & 7) << 27);
    let r = ipc::call(ep, tag, w);
    // A garbage request may have been a valid `give_cap`: empty the receive slots again.
    if r.err == 0 && r.tag.caps() != 0 {
        for s in utcb().caps_in.iter().take(r.tag.caps()) {
            let _ = sawmill_rt::sys::cap_delete(*s);
        }
    }
    if r.err != 0 {
        Got::Kernel(r.err)
    } else {
        Got::Label(r.tag.label())
    }
}

fn main() {
    let mut c = Checker::new("idl-hostile");
    let Some(ep) = sawmill_rt::env::cap(idltest::NAME) else {
        println!("idl-hostile: FAIL: no `{}` endpoint", idltest::NAME);
        sawmill_rt::exit(1)
    };
    let s = Client::new(ep);
    let bad = |l: u16| Got::Label(l);
    utcb().caps_in = [free_slot(0), free_slot(1), free_slot(2), free_slot(3)];

    // Unknown opcodes.
    for l in [0u16, 4, 9, 17, 0x1234, 0xefff, 0xffe0, 0xffff] {
        check!(c, raw(ep, l, &[1, 2], None, 0, 0), bad(proto::BAD_OPCODE));
    }
    // Wrong word counts.
    check!(c, raw(ep, op::ADD, &[1], None, 0, 0), bad(proto::BAD_SHAPE));
    check!(
        c,
        raw(ep, op::ADD, &[1, 2, 3], None, 0, 0),
        bad(proto::BAD_SHAPE)
    );
    check!(c, raw(ep, op::ADD, &[], None, 0, 0), bad(proto::BAD_SHAPE));
    check!(
        c,
        raw(ep, op::SCALARS, &[0; 8], None, 0, 0),
        bad(proto::BAD_SHAPE)
    );
    // More words than a message holds: the kernel refuses or the server rejects.
    let r = raw(ep, op::ADD, &[1, 2], Some(100), 0, 0);
    println!("idl-hostile: request claiming 100 words: {r:?}");
    check!(
        c,
        matches!(r, Got::Kernel(_)) || r == bad(proto::BAD_SHAPE),
        true
    );
    // Extra capabilities: rejected, and the server's receive slots are emptied again, so a
    // correct capability transfer right after works.
    check!(
        c,
        raw(ep, op::ADD, &[1, 2], None, 1, 0),
        bad(proto::BAD_SHAPE)
    );
    check!(
        c,
        raw(ep, op::TAKE_CAP, &[1], None, 4, 0),
        bad(proto::BAD_SHAPE)
    );
    check!(
        c,
        raw(ep, op::NOTES, &[], None, 3, 0),
        bad(proto::BAD_SHAPE)
    );
    check!(c, s.take_cap(ep, 41), Ok(42));
    // Missing capabilities.
    check!(
        c,
        raw(ep, op::TAKE_CAP, &[1], None, 0, 0),
        bad(proto::BAD_SHAPE)
    );
    check!(
        c,
        raw(ep, op::DS, &[0, 4096], None, 0, 0),
        bad(proto::BAD_SHAPE)
    );
    // Map items where none belong: refused by the kernel, rejected by the server, or (when the
    // kernel drops map items the receiver has no window for, so the server never sees them)
    // answered normally. Dispatch's rejection of a tag with map items is covered by the host test.
    let r = raw(ep, op::ADD, &[1, 2], None, 0, 1);
    println!("idl-hostile: request with a map item: {r:?}");
    check!(
        c,
        matches!(r, Got::Kernel(_)) || r == bad(proto::BAD_SHAPE) || r == bad(0),
        true
    );
    // Values outside their types.
    let ok = [1u64, 2, 3, 4, 5, 6, 7, 8, 1];
    check!(c, raw(ep, op::SCALARS, &ok, None, 0, 0), bad(0));
    for (i, v) in [
        (0, 256u64),
        (1, 1 << 16),
        (2, 1 << 32),
        (4, 128),
        (4, (-129i64) as u64),
        (5, 1 << 15),
        (6, 1 << 31),
        (8, 2),
        (8, u64::MAX),
    ] {
        let mut w = ok;
        w[i] = v;
        check!(
            c,
            raw(ep, op::SCALARS, &w, None, 0, 0),
            bad(proto::BAD_VALUE)
        );
    }
    check!(
        c,
        raw(ep, op::ARRAYS, &[0, 0, 0, 0x0101], None, 0, 0),
        bad(0)
    );
    check!(
        c,
        raw(ep, op::ARRAYS, &[0, 0, 0, 0x0201], None, 0, 0),
        bad(proto::BAD_VALUE)
    );
    // Buffer lengths: above the maximum, huge, or disagreeing with the word count.
    let mut w = [3u64, 9, 0, 0, 0, 0, 0];
    check!(c, raw(ep, op::ECHO, &w, None, 0, 0), bad(0));
    for (i, v) in [(0, 41u64), (0, u64::MAX), (1, 101), (1, 1 << 40)] {
        let mut x = w;
        x[i] = v;
        check!(c, raw(ep, op::ECHO, &x, None, 0, 0), bad(proto::BAD_LENGTH));
    }
    w[1] = 17;
    check!(c, raw(ep, op::ECHO, &w, None, 0, 0), bad(proto::BAD_SHAPE));
    check!(
        c,
        raw(ep, op::ECHO, &[3, 9, 0, 0, 0, 0, 0, 0], None, 0, 0),
        bad(proto::BAD_SHAPE)
    );
    check!(
        c,
        raw(ep, op::ECHO, &[40, 100], None, 0, 0),
        bad(proto::BAD_SHAPE)
    );
    // The server still answers correctly.
    check!(c, s.add(2, 3), Ok(5));

    // Garbage: random labels (mostly near the real opcodes), words, word counts and capability
    // counts. Every answer must be ok, an application error or a protocol error.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut words = [0u64; 64];
    let (mut kernel, mut proto_err, mut other) = (0u32, 0u32, 0u32);
    for _ in 0..3000 {
        let r = next();
        let label = if r & 1 == 0 {
            ((r >> 8) % 20) as u16
        } else {
            (r >> 8) as u16
        };
        let n = ((r >> 32) % 65) as usize;
        for w in words.iter_mut().take(n) {
            let v = next();
            *w = if v & 3 == 0 { v } else { v % 300 };
        }
        let caps = ((r >> 40) % 5) as usize;
        match raw(ep, label, &words[..n], None, caps, 0) {
            Got::Kernel(_) => kernel += 1,
            Got::Label(l) if (proto::FIRST..=proto::LAST).contains(&l) => proto_err += 1,
            Got::Label(l) => {
                other += 1;
                let fine = l == 0
                    || l == TestError::Odd as u16
                    || l == TestError::TooBig as u16
                    || l == TestError::NoCap as u16;
                check!(c, (label, l, fine), (label, l, true));
            }
        }
    }
    println!("idl-hostile: garbage: {proto_err} protocol errors, {other} accepted, {kernel} refused by the kernel");
    check!(c, proto_err > 2000, true);
    check!(c, s.add(20, 22), Ok(42));
    check!(c, s.take_cap(ep, 1), Ok(2));

    let ok = c.report();
    // Tell the server (and through it idl-client) that we are done.
    let _ = s.note(0);
    sawmill_rt::exit(if ok { 0 } else { 1 })
}
