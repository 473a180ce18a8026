//! A correct client of `idltest`: every parameter kind end to end through the generated stubs.
//! Prints `idl-client: PASS` after the hostile client is done and the server still answers.
#![no_std]
#![no_main]

use sawmill_idltest::{check, free_slot, idl_bench_client_add, Checker};
use sawmill_interfaces::idltest::{self, ArraysOut, Client, DsOut, ScalarsOut};
use sawmill_interfaces::rpc::{Dataspace, Error};
use sawmill_interfaces::TestError;
use sawmill_rt::{println, sys};

sawmill_rt::entry!(main);

fn main() {
    let mut c = Checker::new("idl-client");
    let Some(ep) = sawmill_rt::env::cap(idltest::NAME) else {
        println!("idl-client: FAIL: no `{}` endpoint", idltest::NAME);
        sawmill_rt::exit(1)
    };
    let s = Client::new(ep);

    // Scalars in registers.
    check!(c, s.add(40, 2), Ok(42));
    check!(c, s.add(u64::MAX, 2), Ok(1));
    check!(c, idl_bench_client_add(ep, 7, 8), 15);

    // Every scalar type, some words in the UTCB, boundary values both ways.
    check!(
        c,
        s.scalars(1, 2, 3, 4, -5, -6, -7, i64::MIN + 1, true),
        Ok(ScalarsOut {
            a: !1,
            b: !2,
            c: !3,
            d: !4,
            e: 5,
            f: 6,
            g: 7,
            h: i64::MAX,
            t: false
        })
    );
    check!(
        c,
        s.scalars(
            u8::MAX,
            u16::MAX,
            u32::MAX,
            u64::MAX,
            i8::MIN,
            i16::MIN,
            i32::MIN,
            i64::MIN,
            false
        ),
        Ok(ScalarsOut {
            a: 0,
            b: 0,
            c: 0,
            d: 0,
            e: i8::MIN,
            f: i16::MIN,
            g: i32::MIN,
            h: i64::MIN,
            t: true
        })
    );

    // Packed arrays.
    check!(
        c,
        s.arrays([1, 2, 3, 0xffff, 5], [-1, -2, 127], [true, false]),
        Ok(ArraysOut {
            x: [5, 0xffff, 3, 2, 1],
            total: 125
        })
    );

    // Byte buffers: empty, odd sizes, both at their maxima; too long is refused locally.
    let r = s.echo(b"hello, ", b"world").map(|r| (r.len, r.both));
    check!(
        c,
        r.as_ref().map(|r| (r.0, r.1.as_slice())),
        Ok((12, &b"HELLO, WORLD"[..]))
    );
    check!(
        c,
        s.echo(b"", b"").map(|r| (r.len, r.both.len())),
        Ok((0, 0))
    );
    let mut tail = [0u8; 100];
    for (i, b) in tail.iter_mut().enumerate() {
        *b = b'a' + (i % 26) as u8;
    }
    match s.echo(&[b'x'; 40], &tail) {
        Ok(r) => {
            check!(c, r.len, 140);
            check!(c, &r.both[..40], &[b'X'; 40][..]);
            check!(
                c,
                r.both[40..]
                    .iter()
                    .zip(&tail)
                    .all(|(a, b)| *a == b.to_ascii_uppercase()),
                true
            );
        }
        Err(e) => check!(c, Err::<(), _>(e), Ok(())),
    }
    check!(c, s.echo(&[0; 41], b"").map(|_| ()), Err(Error::TooLong));
    check!(c, s.echo(b"", &[0; 101]).map(|_| ()), Err(Error::TooLong));

    // Application errors.
    check!(c, s.even(4), Ok(()));
    check!(c, s.even(5), Err(Error::App(TestError::Odd)));

    // Capabilities both ways: send our endpoint capability, get it back in a fresh slot and call
    // the server through it.
    check!(
        c,
        s.give_cap(free_slot(0)),
        Err(Error::App(TestError::NoCap))
    );
    check!(c, s.take_cap(ep, 9), Ok(10));
    let rx = free_slot(0);
    check!(c, s.give_cap(rx), Ok(rx));
    check!(c, Client::new(rx).add(20, 3), Ok(23));
    // Dataspace references (any capability will do for the transport).
    let rx2 = free_slot(1);
    check!(
        c,
        s.ds(
            Dataspace {
                cap: ep,
                offset: 4096,
                size: 8192
            },
            rx2
        ),
        Ok(DsOut {
            d: Dataspace {
                cap: rx2,
                offset: 4097,
                size: 16384
            },
            sum: 12288
        })
    );
    check!(c, Client::new(rx2).add(1, 1), Ok(2));
    let _ = sys::cap_delete(rx2);
    check!(
        c,
        s.ds(
            Dataspace {
                cap: ep,
                offset: 0,
                size: 1 << 30
            },
            rx2
        )
        .map(|_| ()),
        Err(Error::App(TestError::TooBig))
    );
    let _ = sys::cap_delete(rx2);

    // One-way messages.
    check!(c, s.note(5), Ok(()));
    check!(c, s.note(7), Ok(()));
    let n = s.notes();
    check!(c, n.map(|n| (n.count, n.sum)), Ok((2, 12)));

    // Wait for the hostile client, then make sure the server still serves us correctly.
    let mut spins = 0u64;
    loop {
        match s.notes() {
            Ok(n) if n.hostile_done => break,
            Ok(_) if spins < 10_000_000 => {
                spins += 1;
                sys::yield_now();
            }
            other => {
                check!(c, other.map(|n| n.hostile_done), Ok(true));
                break;
            }
        }
    }
    check!(c, s.add(1, 2), Ok(3));
    check!(
        c,
        s.echo(b"ab", b"c").map(|r| r.both),
        Ok(sawmill_interfaces::rpc::Bytes::<140>::from_slice(b"ABC").unwrap())
    );
    check!(c, s.take_cap(ep, 1), Ok(2));
    c.finish()
}
