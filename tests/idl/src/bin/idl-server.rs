//! Serves `idltest` (interfaces/idltest.idl) through the runtime's loop (`rpc::serve`), with its
//! receive slots in an `AfterReply` the loop re-arms before every receive.
#![no_std]
#![no_main]

use sawmill_idltest::free_slot;
use sawmill_interfaces::idltest::{self, ArraysOut, DsOut, EchoOut, NotesOut, ScalarsOut};
use sawmill_interfaces::rpc::{self, AfterReply, Bytes, Dataspace, IpcResult, Next};
use sawmill_interfaces::TestError;
use sawmill_rt::{println, sys};

sawmill_rt::entry!(main);

struct Srv {
    notes: u64,
    note_sum: u64,
    hostile_done: bool,
    /// Where `take_cap` keeps the capability it was given (and `give_cap` returns it from), one
    /// per caller: [0] for idl-client (badge 1 in the manifest), [1] for anyone else, so that
    /// idl-hostile's random calls (which may form a valid `take_cap`) never change what
    /// idl-client gets back, whatever order the two run in.
    keep: [u64; 2],
    have_keep: [bool; 2],
    keep_ds: u64,
    after: AfterReply,
}

/// Which of [`Srv::keep`] belongs to the caller with `badge`.
fn caller(badge: u64) -> usize {
    usize::from(badge != 1)
}

impl idltest::Server for Srv {
    fn add(&mut self, _badge: u64, a: u64, b: u64) -> Result<u64, TestError> {
        Ok(a.wrapping_add(b))
    }

    fn scalars(
        &mut self,
        _badge: u64,
        a: u8,
        b: u16,
        c: u32,
        d: u64,
        e: i8,
        f: i16,
        g: i32,
        h: i64,
        t: bool,
    ) -> Result<ScalarsOut, TestError> {
        Ok(ScalarsOut {
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
        _badge: u64,
        mut x: [u16; 5],
        y: [i8; 3],
        z: [bool; 2],
    ) -> Result<ArraysOut, TestError> {
        x.reverse();
        let total =
            y.iter().map(|&v| v as i64).sum::<i64>() + z.iter().filter(|&&b| b).count() as i64;
        Ok(ArraysOut { x, total })
    }

    fn echo(&mut self, _badge: u64, head: &[u8], tail: &[u8]) -> Result<EchoOut, TestError> {
        let mut both = Bytes::<140>::new();
        let buf = both.buf_mut();
        let mut n = 0;
        for (d, s) in buf.iter_mut().zip(head.iter().chain(tail)) {
            *d = s.to_ascii_uppercase();
            n += 1;
        }
        both.set_len(n);
        Ok(EchoOut {
            both,
            len: n as u32,
        })
    }

    fn even(&mut self, _badge: u64, n: u64) -> Result<(), TestError> {
        if n % 2 == 1 {
            Err(TestError::Odd)
        } else {
            Ok(())
        }
    }

    fn take_cap(&mut self, badge: u64, c: u64, probe: u64) -> Result<u64, TestError> {
        let k = caller(badge);
        // The received capability is deleted after we return: keep a copy.
        let _ = sys::cap_delete(self.keep[k]);
        self.have_keep[k] = sys::cap_copy(c, self.keep[k]).is_ok();
        if !self.have_keep[k] {
            return Err(TestError::NoCap);
        }
        Ok(probe + 1)
    }

    fn give_cap(&mut self, badge: u64) -> Result<u64, TestError> {
        let k = caller(badge);
        if self.have_keep[k] {
            Ok(self.keep[k])
        } else {
            Err(TestError::NoCap)
        }
    }

    fn ds(&mut self, _badge: u64, d: Dataspace) -> Result<DsOut, TestError> {
        if d.size > 1 << 20 {
            return Err(TestError::TooBig);
        }
        let _ = sys::cap_delete(self.keep_ds);
        if sys::cap_copy(d.cap, self.keep_ds).is_err() {
            return Err(TestError::NoCap);
        }
        Ok(DsOut {
            d: Dataspace {
                cap: self.keep_ds,
                offset: d.offset + 1,
                size: d.size * 2,
            },
            sum: d.offset + d.size,
        })
    }

    fn note(&mut self, badge: u64, v: u32) {
        if badge == 2 {
            self.hostile_done = true;
        } else {
            self.notes += 1;
            self.note_sum += v as u64;
        }
    }

    fn notes(&mut self, _badge: u64) -> Result<NotesOut, TestError> {
        Ok(NotesOut {
            count: self.notes,
            sum: self.note_sum,
            hostile_done: self.hostile_done,
        })
    }
}

impl rpc::Serve for Srv {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        idltest::handle(self, m, next)
    }
    fn after_reply(&mut self) -> Option<&mut AfterReply> {
        Some(&mut self.after)
    }
}

fn main() {
    let Some(ep) = sawmill_rt::env::cap(idltest::NAME) else {
        println!("idl-server: FAIL: no `{}` endpoint", idltest::NAME);
        sawmill_rt::exit(1)
    };
    let mut srv = Srv {
        notes: 0,
        note_sum: 0,
        hostile_done: false,
        keep: [free_slot(4), free_slot(6)],
        have_keep: [false; 2],
        keep_ds: free_slot(5),
        after: AfterReply::new(),
    };
    // Empty slots where capabilities sent to us land.
    srv.after
        .receive_into(&[free_slot(0), free_slot(1), free_slot(2), free_slot(3)]);
    println!("idl-server: serving on slot {ep}");
    let _ = rpc::serve(ep, &mut srv);
}
