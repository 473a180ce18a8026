//! End-to-end tests of generated code through the loop-back mock kernel (`rpc/mod.rs`).
use crate::idltest::{self, op, Client, Server};
use crate::rpc::{self, proto, Bytes, Dataspace, Error, MsgTag, Reply};
use crate::TestError;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Default)]
struct Srv {
    notes: u64,
    note_sum: u64,
    last_badge: u64,
    last_cap: u64,
    hostile_done: bool,
}

impl Server for Srv {
    fn add(&mut self, badge: u64, a: u64, b: u64) -> Result<u64, TestError> {
        self.last_badge = badge;
        Ok(a.wrapping_add(b))
    }
    fn scalars(
        &mut self,
        _: u64,
        a: u8,
        b: u16,
        c: u32,
        d: u64,
        e: i8,
        f: i16,
        g: i32,
        h: i64,
        t: bool,
    ) -> Result<idltest::ScalarsOut, TestError> {
        Ok(idltest::ScalarsOut {
            a: !a,
            b: !b,
            c: !c,
            d: !d,
            e: e.wrapping_neg(),
            f: f.wrapping_neg(),
            g: g.wrapping_neg(),
            h: h.wrapping_neg(),
            t: !t,
        })
    }
    fn arrays(
        &mut self,
        _: u64,
        mut x: [u16; 5],
        y: [i8; 3],
        z: [bool; 2],
    ) -> Result<idltest::ArraysOut, TestError> {
        x.reverse();
        let total =
            y.iter().map(|&v| v as i64).sum::<i64>() + z.iter().filter(|&&b| b).count() as i64;
        Ok(idltest::ArraysOut { x, total })
    }
    fn echo(&mut self, _: u64, head: &[u8], tail: &[u8]) -> Result<idltest::EchoOut, TestError> {
        let mut both = Bytes::<140>::new();
        let n = head.len() + tail.len();
        let buf = both.buf_mut();
        for (i, c) in head.iter().chain(tail).enumerate() {
            buf[i] = c.to_ascii_uppercase();
        }
        assert!(both.set_len(n));
        Ok(idltest::EchoOut {
            both,
            len: n as u32,
        })
    }
    fn even(&mut self, _: u64, n: u64) -> Result<(), TestError> {
        if n % 2 == 1 {
            Err(TestError::Odd)
        } else {
            Ok(())
        }
    }
    fn take_cap(&mut self, _: u64, c: u64, probe: u64) -> Result<u64, TestError> {
        self.last_cap = c;
        Ok(c * 1000 + probe)
    }
    fn give_cap(&mut self, _: u64) -> Result<u64, TestError> {
        Ok(77)
    }
    fn ds(&mut self, _: u64, d: Dataspace) -> Result<idltest::DsOut, TestError> {
        if d.size > 1 << 20 {
            return Err(TestError::TooBig);
        }
        Ok(idltest::DsOut {
            d: Dataspace {
                cap: 78,
                offset: d.offset + 1,
                size: d.size * 2,
            },
            sum: d.offset + d.size,
        })
    }
    fn note(&mut self, badge: u64, v: u32) {
        if badge == 2 {
            self.hostile_done = true;
            return;
        }
        self.notes += 1;
        self.note_sum += v as u64;
    }
    fn notes(&mut self, _: u64) -> Result<idltest::NotesOut, TestError> {
        Ok(idltest::NotesOut {
            count: self.notes,
            sum: self.note_sum,
            hostile_done: self.hostile_done,
        })
    }
}

fn install() -> Rc<RefCell<Srv>> {
    let s = Rc::new(RefCell::new(Srv::default()));
    let s2 = s.clone();
    rpc::set_server(7, move |m| idltest::dispatch(&mut *s2.borrow_mut(), m));
    s
}

fn deleted() -> Vec<u64> {
    rpc::K.with(|k| k.borrow().deleted.clone())
}

/// A raw request, as a hostile client would send it: returns the reply label.
fn raw(label: u16, words: &[u64], caps: usize, maps: usize) -> u16 {
    let u = rpc::utcb();
    for (i, w) in words.iter().enumerate().skip(4).take(60) {
        u.mr[i] = *w;
    }
    u.caps_out = [50, 51, 52, 53];
    let mut w = [0; 4];
    for (i, x) in words.iter().take(4).enumerate() {
        w[i] = *x;
    }
    let tag = MsgTag(
        label as u64 | (words.len() as u64) << 16 | (caps as u64) << 24 | (maps as u64) << 27,
    );
    rpc::call(1, tag, w).tag.label()
}

#[test]
fn every_kind_round_trips() {
    let s = install();
    let c = Client::new(5);
    assert_eq!(c.add(40, 2), Ok(42));
    assert_eq!(c.add(u64::MAX, 2), Ok(1));
    assert_eq!(s.borrow().last_badge, 7);

    let r = c
        .scalars(1, 2, 3, 4, -5, -6, -7, i64::MIN + 1, true)
        .unwrap();
    assert_eq!(
        r,
        idltest::ScalarsOut {
            a: !1,
            b: !2,
            c: !3,
            d: !4,
            e: 5,
            f: 6,
            g: 7,
            h: i64::MAX,
            t: false
        }
    );
    let r = c
        .scalars(
            255,
            65535,
            u32::MAX,
            u64::MAX,
            i8::MIN,
            i16::MIN,
            i32::MIN,
            i64::MIN,
            false,
        )
        .unwrap();
    assert_eq!(
        (r.a, r.e, r.f, r.g, r.h, r.t),
        (0, i8::MIN, i16::MIN, i32::MIN, i64::MIN, true)
    );

    let r = c
        .arrays([1, 2, 3, 0xffff, 5], [-1, -2, 127], [true, false])
        .unwrap();
    assert_eq!(r.x, [5, 0xffff, 3, 2, 1]);
    assert_eq!(r.total, 124 + 1);

    let r = c.echo(b"hello, ", b"world").unwrap();
    assert_eq!(r.both.as_slice(), b"HELLO, WORLD");
    assert_eq!(r.len, 12);
    let r = c.echo(b"", b"").unwrap();
    assert_eq!((r.both.len(), r.len), (0, 0));
    let long = [b'x'; 100];
    let r = c.echo(&[b'a'; 40], &long).unwrap();
    assert_eq!(r.both.len(), 140);
    assert_eq!(c.echo(&[0; 41], b""), Err(Error::TooLong));
    assert_eq!(c.echo(b"", &[0; 101]), Err(Error::TooLong));

    assert_eq!(c.even(4), Ok(()));
    assert_eq!(c.even(5), Err(Error::App(TestError::Odd)));

    assert_eq!(c.take_cap(33, 9), Ok(100 * 1000 + 9));
    assert_eq!(rpc::K.with(|k| k.borrow().sent.clone()), vec![(33, 100)]);
    assert_eq!(
        deleted(),
        vec![100],
        "dispatch deletes received caps after the handler"
    );

    assert_eq!(c.give_cap(250), Ok(250));
    assert_eq!(
        rpc::K.with(|k| k.borrow().returned.clone()),
        vec![(77, 250)]
    );

    let r = c
        .ds(
            Dataspace {
                cap: 34,
                offset: 4096,
                size: 8192,
            },
            251,
        )
        .unwrap();
    assert_eq!(
        r,
        idltest::DsOut {
            d: Dataspace {
                cap: 251,
                offset: 4097,
                size: 16384
            },
            sum: 12288
        }
    );
    assert_eq!(
        c.ds(
            Dataspace {
                cap: 34,
                offset: 0,
                size: 1 << 30
            },
            251
        )
        .unwrap_err(),
        Error::App(TestError::TooBig)
    );

    c.note(5).unwrap();
    c.note(u32::MAX).unwrap();
    assert_eq!(
        c.notes(),
        Ok(idltest::NotesOut {
            count: 2,
            sum: 5 + u32::MAX as u64,
            hostile_done: false,
        })
    );
}

#[test]
fn hostile_requests_get_protocol_errors() {
    let s = install();
    // Unknown opcodes, including 0 and kernel labels.
    for l in [0u16, 4, 9, 17, 0xefff, 0xffe0, 0xfff0, 0xffff] {
        assert_eq!(raw(l, &[1, 2], 0, 0), proto::BAD_OPCODE, "label {l:#x}");
    }
    // Wrong word counts.
    assert_eq!(raw(op::ADD, &[1], 0, 0), proto::BAD_SHAPE);
    assert_eq!(raw(op::ADD, &[1, 2, 3], 0, 0), proto::BAD_SHAPE);
    assert_eq!(raw(op::ADD, &[], 0, 0), proto::BAD_SHAPE);
    // Map items where none belong.
    assert_eq!(raw(op::ADD, &[1, 2], 0, 1), proto::BAD_SHAPE);
    // Extra capability: rejected, and the capability that arrived is deleted.
    assert_eq!(raw(op::ADD, &[1, 2], 1, 0), proto::BAD_SHAPE);
    assert_eq!(deleted(), vec![100]);
    assert_eq!(raw(op::TAKE_CAP, &[1], 2, 0), proto::BAD_SHAPE);
    assert_eq!(deleted(), vec![100, 100, 101]);
    // Missing capability.
    assert_eq!(raw(op::TAKE_CAP, &[1], 0, 0), proto::BAD_SHAPE);
    assert_eq!(raw(op::DS, &[0, 4096], 0, 0), proto::BAD_SHAPE);
    // Values that do not fit their types.
    let ok = [1u64, 2, 3, 4, 5, 6, 7, 8, 1];
    assert_eq!(raw(op::SCALARS, &ok, 0, 0), 0);
    for (i, bad) in [
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
        w[i] = bad;
        assert_eq!(
            raw(op::SCALARS, &w, 0, 0),
            proto::BAD_VALUE,
            "word {i} = {bad:#x}"
        );
    }
    // A bool lane of an array that is neither 0 nor 1.
    assert_eq!(raw(op::ARRAYS, &[0, 0, 0, 0x0101], 0, 0), 0);
    assert_eq!(raw(op::ARRAYS, &[0, 0, 0, 0x0201], 0, 0), proto::BAD_VALUE);
    // Buffers: length above the maximum, lengths that disagree with the word count.
    let mut w = vec![3u64, 9, 0, 0, 0, 0, 0];
    assert_eq!(raw(op::ECHO, &w, 0, 0), 0);
    w[0] = 41;
    assert_eq!(raw(op::ECHO, &w, 0, 0), proto::BAD_LENGTH);
    w[0] = u64::MAX;
    assert_eq!(raw(op::ECHO, &w, 0, 0), proto::BAD_LENGTH);
    w[0] = 3;
    w[1] = 101;
    assert_eq!(raw(op::ECHO, &w, 0, 0), proto::BAD_LENGTH);
    w[1] = 17;
    assert_eq!(raw(op::ECHO, &w, 0, 0), proto::BAD_SHAPE);
    w[1] = 9;
    w.push(0);
    assert_eq!(raw(op::ECHO, &w, 0, 0), proto::BAD_SHAPE);
    assert_eq!(raw(op::ECHO, &[40, 100], 0, 0), proto::BAD_SHAPE);
    // A word count beyond MAX_WORDS (the tag has room for 127).
    let big = vec![0u64; 127];
    assert_eq!(raw(op::ECHO, &big, 0, 0), proto::BAD_SHAPE);
    assert_eq!(raw(op::SCALARS, &big, 0, 0), proto::BAD_SHAPE);
    // The server still serves a correct client.
    let c = Client::new(5);
    assert_eq!(c.add(1, 2), Ok(3));
    assert_eq!(c.echo(b"ab", b"c").unwrap().both.as_slice(), b"ABC");
    drop(s);
}

#[test]
fn garbage_never_panics() {
    let _s = install();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut answered = 0;
    for _ in 0..20000 {
        let r = next();
        let label = if r & 1 == 0 {
            (r >> 8) as u16 % 20
        } else {
            (r >> 8) as u16
        };
        let words: Vec<u64> = (0..(r >> 32) % 70)
            .map(|_| {
                if next() & 3 == 0 {
                    next()
                } else {
                    next() % 300
                }
            })
            .collect();
        let l = raw(
            label,
            &words,
            ((r >> 40) % 5) as usize,
            ((r >> 44) % 2) as usize,
        );
        assert!(
            l == 0
                || l == TestError::Odd as u16
                || l == TestError::TooBig as u16
                || (proto::FIRST..=proto::LAST).contains(&l),
            "label {l:#x}"
        );
        answered += 1;
    }
    assert_eq!(answered, 20000);
    assert_eq!(Client::new(5).add(2, 2), Ok(4));
}

#[test]
fn client_checks_replies() {
    let c = Client::new(5);
    let reply = Rc::new(RefCell::new(Reply::EMPTY));
    let r2 = reply.clone();
    rpc::set_server(1, move |_| *r2.borrow());
    let set = |tag: u64, w: [u64; 4]| {
        *reply.borrow_mut() = Reply {
            tag: MsgTag(tag),
            w,
        }
    };
    set(1 << 16, [5, 0, 0, 0]);
    assert_eq!(c.add(1, 1), Ok(5));
    set(2 << 16, [5, 0, 0, 0]);
    assert_eq!(c.add(1, 1), Err(Error::BadReply), "too many words");
    set(0, [5, 0, 0, 0]);
    assert_eq!(c.add(1, 1), Err(Error::BadReply), "too few words");
    set(1 << 16 | 1 << 24, [5, 0, 0, 0]);
    assert_eq!(c.add(1, 1), Err(Error::BadReply), "unexpected cap");
    set(proto::BAD_SHAPE as u64, [0; 4]);
    assert_eq!(c.add(1, 1), Err(Error::Protocol(proto::BAD_SHAPE)));
    set(sawmill_abi::label::GONE as u64, [0; 4]);
    assert_eq!(c.add(1, 1), Err(Error::Gone));
    set(2, [0; 4]);
    assert_eq!(c.even(1), Err(Error::App(TestError::TooBig)));
    set(999, [0; 4]);
    assert_eq!(c.even(1), Err(Error::BadReply), "unknown error code");
    // Narrow results out of range; a bool that is 2.
    set(9 << 16, [256, 0, 0, 0]);
    assert_eq!(
        c.scalars(0, 0, 0, 0, 0, 0, 0, 0, false),
        Err(Error::BadReply)
    );
    // Buffer length beyond the maximum, or disagreeing with the word count.
    set(4 << 16, [141, 0, 0, 0]);
    assert_eq!(c.echo(b"", b"").unwrap_err(), Error::BadReply);
    set(5 << 16, [9, 0, 0, 0]);
    assert_eq!(c.echo(b"", b"").unwrap_err(), Error::BadReply);
    set(6 << 16, [9, 9, 0, 0]);
    assert_eq!(c.echo(b"", b"").unwrap().len, 9);
    // Kernel error.
    rpc::K.with(|k| k.borrow_mut().fail_next = 2);
    assert_eq!(c.add(1, 1), Err(Error::Ipc(2)));
}

#[test]
fn only_a_real_peer_death_says_the_server_died() {
    type E = Error<TestError>;
    assert!(E::Gone.peer_died());
    assert!(E::Ipc(sawmill_abi::Error::PeerGone as u64).peer_died());
    for e in [E::TooLong, E::BadReply, E::Protocol(proto::BAD_LENGTH), E::Ipc(2), E::Ipc(8), E::App(TestError::Odd)] {
        assert!(!e.peer_died(), "{e:?}");
    }
    // A buffer the stub refuses never reaches the server and proves nothing about it.
    assert_eq!(Client::new(5).echo(&[0; 41], b"").unwrap_err(), E::TooLong);
}

#[test]
fn trusted_and_plain_interfaces() {
    use crate::{fast, plain};
    struct F;
    impl fast::Server for F {
        fn add(&mut self, _: u64, a: u64, b: u64) -> Result<u64, core::convert::Infallible> {
            Ok(a + b)
        }
        fn small(&mut self, _: u64, a: u8) -> Result<fast::SmallOut, core::convert::Infallible> {
            Ok(fast::SmallOut {
                b: a / 2,
                t: a % 2 == 1,
            })
        }
    }
    rpc::set_server(1, |m| fast::dispatch(&mut F, m));
    let c = fast::Client::new(1);
    assert_eq!(c.add(2, 3), Ok(5));
    assert_eq!(c.small(7), Ok(fast::SmallOut { b: 3, t: true }));
    // A trusted client truncates instead of rejecting, but the server still checks.
    assert_eq!(raw(fast::op::SMALL, &[256], 0, 0), proto::BAD_VALUE);

    struct P(u64);
    impl plain::Server for P {
        fn nothing(&mut self, _: u64) -> Result<(), core::convert::Infallible> {
            Ok(())
        }
        fn caps4(
            &mut self,
            _: u64,
            a: u64,
            b: u64,
            c: u64,
            d: u64,
        ) -> Result<u64, core::convert::Infallible> {
            Ok(a + b + c + d)
        }
        fn big(
            &mut self,
            _: u64,
            mut x: [u64; 60],
        ) -> Result<[u64; 60], core::convert::Infallible> {
            x.reverse();
            Ok(x)
        }
        fn maxbuf(&mut self, _: u64, b: &[u8]) -> Result<Bytes<480>, core::convert::Infallible> {
            Ok(Bytes::from_slice(b).unwrap_or_default())
        }
        fn poke(&mut self, _: u64) {
            self.0 += 1;
        }
    }
    rpc::set_server(1, |m| plain::dispatch(&mut P(0), m));
    let c = plain::Client::new(1);
    assert_eq!(c.nothing(), Ok(()));
    assert_eq!(c.caps4(1, 2, 3, 4), Ok(100 + 101 + 102 + 103));
    assert_eq!(deleted(), vec![100, 101, 102, 103]);
    let x: [u64; 60] = core::array::from_fn(|i| i as u64 * 3);
    let mut y = x;
    y.reverse();
    assert_eq!(c.big(x), Ok(y));
    let data: Vec<u8> = (0..480).map(|i| i as u8).collect();
    assert_eq!(c.maxbuf(&data).unwrap().as_slice(), &data[..]);
    assert_eq!(c.maxbuf(&data[..479]).unwrap().as_slice(), &data[..479]);
    assert_eq!(c.poke(), Ok(()));
}

#[test]
fn constants_flags_enums_and_request_maps() {
    use crate::typed::{self, Client, Server};
    use crate::{Perm, Shape, TypedError, LIMIT};
    use core::convert::TryFrom;
    struct T {
        calls: u64,
    }
    impl Server for T {
        fn flip(
            &mut self,
            _: u64,
            p: Perm,
            s: Shape,
            name: &[u8],
        ) -> Result<typed::FlipOut, TypedError> {
            self.calls += 1;
            if name == b"no" {
                return Err(TypedError::Nope);
            }
            let next = match s {
                Shape::Dot => Shape::Line,
                Shape::Line => Shape::Box,
                Shape::Box => Shape::Dot,
            };
            let p = if p.contains(Perm::W) {
                p - Perm::W
            } else {
                p | Perm::W
            };
            Ok(typed::FlipOut {
                p,
                s: next,
                n: name.len() as u32,
            })
        }
        fn share(&mut self, _: u64, r: rpc::Map, tag: u64) -> Result<typed::ShareOut, TypedError> {
            self.calls += 1;
            assert_eq!(
                (r.src, r.flags, tag),
                (0, 3, 77),
                "the sender's address is not sent"
            );
            Ok(typed::ShareOut {
                pages: r.pages,
                dst: r.dst,
            })
        }
        fn loose(&mut self, _: u64) -> Result<Perm, TypedError> {
            Ok(Perm::ALL)
        }
    }
    // The generated types.
    assert_eq!(LIMIT, 24);
    assert_eq!(typed::TRUSTED_BADGE, 1 << 63 | 1);
    assert_eq!(Perm::ALL.bits(), 0x8007);
    assert_eq!(Perm::from_bits(0x8001), Some(Perm::R | Perm::HIGH));
    assert_eq!(Perm::from_bits(8), None);
    assert_eq!(Perm::from_bits_truncate(0xffff), Perm::ALL);
    assert!(Perm::RW.contains(Perm::R) && !Perm::R.contains(Perm::RW));
    assert!(Perm::RW.intersects(Perm::W) && !Perm::R.intersects(Perm::X));
    assert!(Perm::EMPTY.is_empty() && Perm::default().is_empty());
    let mut p = Perm::R;
    p |= Perm::X;
    p &= Perm::X | Perm::W;
    assert_eq!(p, Perm::X);
    p -= Perm::X;
    assert_eq!(p, Perm::EMPTY);
    assert_eq!(format!("{:?}", Perm::R | Perm::X), "Perm(R | X)");
    assert_eq!(format!("{:?}", Perm::RW), "Perm(R | W | RW)");
    assert_eq!(format!("{:?}", Perm::EMPTY), "Perm()");
    assert_eq!(
        format!("{:?}", Perm::from_bits_retain(0x11)),
        "Perm(R | 0x10)"
    );
    assert_eq!(Perm::from_bits_retain(0x11).bits(), 0x11);
    assert_eq!(Shape::try_from(0xffu8), Ok(Shape::Box));
    assert_eq!(Shape::try_from(1u8), Err(1));
    assert_eq!(u8::from(Shape::Line), 2);
    assert_eq!(Shape::from_repr(0), Some(Shape::Dot));

    let srv = Rc::new(RefCell::new(T { calls: 0 }));
    let s2 = srv.clone();
    rpc::set_server(1, move |m| typed::dispatch(&mut *s2.borrow_mut(), m));
    let c = Client::new(1);
    let r = c.flip(Perm::R | Perm::HIGH, Shape::Box, b"abc").unwrap();
    assert_eq!(
        r,
        typed::FlipOut {
            p: Perm::R | Perm::W | Perm::HIGH,
            s: Shape::Dot,
            n: 3
        }
    );
    assert_eq!(c.flip(Perm::RW, Shape::Dot, b"").unwrap().p, Perm::R);
    assert_eq!(
        c.flip(Perm::EMPTY, Shape::Line, b"no"),
        Err(Error::App(TypedError::Nope))
    );
    // Map item in the request: the item goes in the UTCB, what it maps in the words.
    let m = rpc::Map {
        src: 0x5000,
        dst: 0x4000_0000,
        pages: 6,
        flags: 3,
    };
    assert_eq!(
        c.share(m, 77),
        Ok(typed::ShareOut {
            pages: 6,
            dst: 0x4000_0000
        })
    );
    let item = rpc::K.with(|k| unsafe { (*k.borrow().client).map_items[0] });
    assert_eq!(
        (item.src, item.dst, item.pages, item.flags),
        (0x5000, 0x4000_0000, 6, 3)
    );
    assert_eq!(srv.borrow().calls, 4);

    // Hostile requests: unknown flag bits, undeclared enum values, values beyond the base type
    // (the interface's `[invalid]` error), a share without its map item, or with two. The handler
    // never runs.
    let before = srv.borrow().calls;
    let bad = TypedError::Bad as u16;
    assert_eq!(raw(typed::op::FLIP, &[8, 0, 0, 0], 0, 0), bad);
    assert_eq!(raw(typed::op::FLIP, &[0x1_0001, 0, 0, 0], 0, 0), bad);
    assert_eq!(raw(typed::op::FLIP, &[1, 1, 0, 0], 0, 0), bad);
    assert_eq!(raw(typed::op::FLIP, &[1, 0x1ff, 0, 0], 0, 0), bad);
    assert_eq!(
        c.flip(Perm::from_bits_retain(0x10), Shape::Dot, b""),
        Err(Error::App(TypedError::Bad))
    );
    assert_eq!(
        raw(typed::op::FLIP, &[1, 0, 25, 0], 0, 0),
        proto::BAD_LENGTH
    );
    assert_eq!(raw(typed::op::FLIP, &[1, 0, 0, 0], 0, 1), proto::BAD_SHAPE);
    assert_eq!(
        raw(typed::op::SHARE, &[0x4000_0000, 1, 3, 77], 0, 0),
        proto::BAD_SHAPE
    );
    assert_eq!(
        raw(typed::op::SHARE, &[0x4000_0000, 1, 3, 77], 0, 2),
        proto::BAD_SHAPE
    );
    assert_eq!(
        raw(typed::op::SHARE, &[0x4000_0000, 1, 3], 0, 1),
        proto::BAD_SHAPE
    );
    assert_eq!(srv.borrow().calls, before);
    // Valid raw values still work.
    assert_eq!(raw(typed::op::FLIP, &[0x8004, 0xff, 0, 0], 0, 0), 0);
    assert_eq!(raw(typed::op::SHARE, &[0x4000_0000, 1, 3, 77], 0, 1), 0);

    // The client checks replies: an enum or flag value outside the type is a bad reply, except
    // that a trusted reply drops unknown flag bits.
    let set = |tag: u64, w: [u64; 4]| {
        rpc::set_server(1, move |_| Reply {
            tag: MsgTag(tag),
            w,
        });
    };
    set(3 << 16, [0x10, 0, 0, 0]);
    assert_eq!(c.flip(Perm::R, Shape::Dot, b""), Err(Error::BadReply));
    set(3 << 16, [1, 3, 0, 0]);
    assert_eq!(c.flip(Perm::R, Shape::Dot, b""), Err(Error::BadReply));
    set(3 << 16, [1, 2, 0, 0]);
    assert_eq!(c.flip(Perm::R, Shape::Dot, b"").unwrap().s, Shape::Line);
    set(1 << 16, [0xffff, 0, 0, 0]);
    assert_eq!(c.loose(), Ok(Perm::ALL));
}


// ---- the server loop (`rpc::serve`, serve.rs) ---------------------------------------------------

use crate::plain;
use crate::rpc::{AfterReply, Ev, IpcResult, Next, Serve};
use sawmill_abi::MapItem;

/// Raw labels of the loop test: what the handler does besides `plain`'s methods.
const STOP: u16 = 0x7000;
const SKIP: u16 = 0x7001;
const HAND_OFF: u16 = 0x7002;
/// Attaches a map item, then fails: the item must not go out.
const MAP_THEN_FAIL: u16 = 0x7003;
/// Re-points `caps_in[0]` as a client stub called from a handler would.
const CLOBBER: u16 = 0x7004;

const ITEM: MapItem = MapItem {
    src: 0x5000,
    dst: 0x9000,
    pages: 1,
    flags: 1,
};

struct Looper {
    after: AfterReply,
    freed: Vec<u64>,
}

impl plain::Server for Looper {
    fn nothing(&mut self, _: u64) -> Result<(), core::convert::Infallible> {
        // A capability handed over, a page lent, a map item beside the generated reply.
        assert!(self.after.delete(500));
        assert!(self.after.unmap(0x1000, 2, 0));
        assert!(self.after.map(ITEM));
        Ok(())
    }
    fn caps4(
        &mut self,
        _: u64,
        a: u64,
        b: u64,
        c: u64,
        d: u64,
    ) -> Result<u64, core::convert::Infallible> {
        Ok(a + b + c + d)
    }
    fn big(&mut self, _: u64, x: [u64; 60]) -> Result<[u64; 60], core::convert::Infallible> {
        Ok(x)
    }
    fn maxbuf(&mut self, _: u64, b: &[u8]) -> Result<Bytes<480>, core::convert::Infallible> {
        Ok(Bytes::from_slice(b).unwrap_or_default())
    }
    fn poke(&mut self, _: u64) {}
}

impl Serve for Looper {
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        match m.tag.label() {
            STOP => next.stop(),
            SKIP => next.skip(self),
            HAND_OFF => next.hand_off(self, 99, Reply::label(0)),
            MAP_THEN_FAIL => {
                assert!(self.after.map(ITEM));
                next.reply(self, Reply::label(9))
            }
            CLOBBER => {
                rpc::utcb().caps_in[0] = 777;
                next.reply(self, Reply::EMPTY)
            }
            _ => plain::handle(self, m, next),
        }
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn slot_freed(&mut self, slot: u64) {
        self.freed.push(slot);
    }
}

fn msg(label: u16) -> IpcResult {
    IpcResult {
        err: 0,
        badge: 3,
        tag: MsgTag::new(label, 0),
        w: [0; 4],
    }
}

fn looper() -> Looper {
    let mut l = Looper {
        after: AfterReply::new(),
        freed: vec![],
    };
    assert!(l.after.receive_into(&[200, 201]));
    l.after.receive_window(0x4000_0000, 0x1000);
    l
}

#[test]
fn loop_replies_then_runs_the_post_reply_step() {
    let mut l = looper();
    let failed = IpcResult { err: 5, ..msg(0) };
    let script = vec![
        failed,
        msg(plain::op::NOTHING),
        msg(plain::op::NOTHING),
        msg(STOP),
    ];
    let (r, log) = rpc::run_loop(script, || rpc::serve(8, &mut l));
    assert!(r.is_none(), "stopped, nothing handed off");
    let armed = |ev: &Ev| match ev {
        Ev::Recv {
            caps_in, window, ..
        }
        | Ev::Reply {
            caps_in, window, ..
        } => caps_in[..2] == [200, 201] && *window == [0x4000_0000, 0x1000],
        _ => true,
    };
    assert!(
        log.iter().all(armed),
        "receive slots and window armed before every receive: {log:?}"
    );
    let ok = |ev: &Ev| match ev {
        Ev::Reply {
            ep: 8, tag, maps, ..
        } => {
            tag.label() == 0
                && tag.maps() == 1
                && maps[0] == [ITEM.src, ITEM.dst, ITEM.pages, ITEM.flags]
        }
        _ => false,
    };
    // First receive; the failed one is not answered (a second receive); then each request is
    // answered with the map item, and only then are the capability deleted and the page unmapped.
    assert!(matches!(log[0], Ev::Recv { ep: 8, .. }));
    assert!(matches!(log[1], Ev::Recv { ep: 8, .. }));
    assert!(ok(&log[2]), "{:?}", log[2]);
    assert_eq!(log[3], Ev::Unmap(0x1000, 2, 0));
    assert_eq!(log[4], Ev::Delete(500));
    assert!(
        ok(&log[5]),
        "the list was emptied and filled again: {:?}",
        log[5]
    );
    assert_eq!(log[6], Ev::Unmap(0x1000, 2, 0));
    assert_eq!(log[7], Ev::Delete(500));
    // The stop answers nothing.
    assert_eq!(log.len(), 8, "{log:?}");
    assert_eq!(l.freed, vec![500, 500]);
}

#[test]
fn an_idle_loop_runs_the_post_reply_step_before_it_waits() {
    // A reply with post-reply work staged receives without blocking: when nothing is waiting
    // (WouldBlock), the capability handed over is deleted and the page unmapped before the loop
    // blocks, not once the next message comes (a client dropping its copy must free it now).
    let mut l = looper();
    let nothing_waiting = IpcResult {
        err: sawmill_abi::Error::WouldBlock as u64,
        ..msg(0)
    };
    let script = vec![msg(plain::op::NOTHING), nothing_waiting, msg(STOP)];
    let (r, log) = rpc::run_loop(script, || rpc::serve(8, &mut l));
    assert!(r.is_none(), "stopped, nothing handed off");
    assert!(matches!(log[0], Ev::Recv { ep: 8, .. }));
    assert!(
        matches!(log[1], Ev::Reply { ep: 8, tag, .. } if tag.is_nonblocking() && tag.maps() == 1),
        "{:?}",
        log[1]
    );
    assert_eq!(log[2], Ev::Unmap(0x1000, 2, 0));
    assert_eq!(log[3], Ev::Delete(500));
    assert!(
        matches!(log[4], Ev::Recv { ep: 8, caps_in, .. } if caps_in[..2] == [200, 201]),
        "then a blocking receive, slots armed: {:?}",
        log[4]
    );
    assert_eq!(log.len(), 5, "{log:?}");
    assert_eq!(l.freed, vec![500]);
}

#[test]
fn loop_rearms_drops_maps_of_failed_replies_skips_and_hands_off() {
    let mut l = looper();
    let mut after = msg(plain::op::NOTHING);
    after.badge = 42;
    let script = vec![
        msg(MAP_THEN_FAIL),
        msg(CLOBBER),
        msg(SKIP),
        msg(HAND_OFF),
        after,
    ];
    let (r, log) = rpc::run_loop(script, || rpc::serve(8, &mut l));
    let replies: Vec<&Ev> = log
        .iter()
        .filter(|e| matches!(e, Ev::Reply { .. }))
        .collect();
    // The failed reply carries no map item, and the item does not linger for the next reply.
    assert!(
        matches!(replies[0], Ev::Reply { tag, maps, .. } if tag.label() == 9 && maps.is_empty())
    );
    assert!(
        matches!(replies[1], Ev::Reply { tag, maps, caps_in, .. } if tag.maps() == 0 && maps.is_empty() && caps_in[0] == 200),
        "caps_in re-armed after a handler re-pointed it: {:?}",
        replies[1]
    );
    // SKIP: a receive without a reply.
    assert!(
        matches!(log[log.len() - 2], Ev::Recv { ep: 8, .. }),
        "{log:?}"
    );
    // HAND_OFF: the reply goes out and the next message is received on endpoint 99, returned.
    assert!(
        matches!(log[log.len() - 1], Ev::Reply { ep: 99, .. }),
        "{log:?}"
    );
    let m = r.expect("handed off");
    assert_eq!((m.err, m.badge, m.tag.label()), (0, 42, plain::op::NOTHING));
    // The next loop starts with that message.
    let (r, log) = rpc::run_loop(vec![msg(STOP)], || rpc::serve_from(99, m, &mut l));
    assert!(r.is_none());
    assert!(matches!(&log[0], Ev::Reply { ep: 99, maps, .. } if maps.len() == 1));
}

#[test]
fn after_reply_lists_are_bounded() {
    let mut a = AfterReply::new();
    assert!(!a.receive_into(&[1, 2, 3, 4, 5]), "at most 4 receive slots");
    assert!(a.receive_into(&[1, 2, 3, 4]));
    for i in 0..4 {
        assert!(a.delete(i) && a.unmap(i, 1, 0) && a.map(ITEM));
    }
    assert!(!a.delete(9), "a reply hands over at most 4 capabilities");
    assert!(!a.unmap(9, 1, 0));
    assert!(!a.map(ITEM), "a reply carries at most 4 map items");
    assert!(a.pending());
    assert_eq!(a.maps_pending(), 4);
    // A reply that carries a map item of its own (a `map` result) gets none of the staged ones.
    let r = a.prepare(Reply {
        tag: MsgTag::new(0, 0).with_maps(1),
        w: [0; 4],
    });
    assert_eq!(r.tag.maps(), 1);
    assert_eq!(a.maps_pending(), 0);
    // Staged items go out with a plain success reply.
    assert!(a.map(ITEM));
    assert_eq!(a.prepare(Reply::EMPTY).tag.maps(), 1);
}

/// A server that hands out watched badges: the loop gives it the kernel's notices.
struct Watching {
    after: AfterReply,
    gone: Vec<u64>,
}

impl Serve for Watching {
    const NOTICES: bool = true;
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        match m.tag.label() {
            STOP => next.stop(),
            _ => next.reply(self, Reply::label(0x55)),
        }
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
    fn notice_badge(&self) -> u64 {
        0x5e4d
    }
    fn no_senders(&mut self, badge: u64) {
        self.gone.push(badge);
        // What the badge held: our copy of a capability, deleted at once (no reply to wait for).
        assert!(self.after.delete(600));
    }
}

#[test]
fn loop_takes_notices_with_the_reserved_badge_only() {
    let mut w = Watching {
        after: AfterReply::new(),
        gone: vec![],
    };
    let notice = |badge: u64, watched: u64| IpcResult {
        err: 0,
        badge,
        tag: MsgTag::new(sawmill_abi::label::NO_SENDERS, 1),
        w: [watched, 0, 0, 0],
    };
    // A real notice, a client's forgery (its own badge), another real one, then stop.
    let script = vec![
        notice(0x5e4d, 0x1_0000_0007),
        notice(3, 0x1_0000_0009),
        notice(0x5e4d, 0x1_0000_0008),
        msg(STOP),
    ];
    let (r, log) = rpc::run_loop(script, || rpc::serve(8, &mut w));
    assert!(r.is_none());
    assert_eq!(w.gone, vec![0x1_0000_0007, 0x1_0000_0008]);
    // Notices are not answered; their post-reply work runs before the next receive; the forgery
    // is an ordinary request and gets the handler's answer.
    let kinds: Vec<&str> = log
        .iter()
        .map(|e| match e {
            Ev::Recv { .. } => "recv",
            Ev::Reply { tag, .. } if tag.label() == 0x55 => "answer",
            Ev::Reply { .. } => "other reply",
            Ev::Delete(600) => "delete",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        vec!["recv", "delete", "recv", "answer", "delete", "recv"],
        "{log:?}"
    );
}
