//! mem-stackds: a stacked dataspace manager. It serves one dataspace (`dataspace` interface)
//! whose pages it gets from mem: it attaches an anonymous mem dataspace in its own address space
//! (its own region manager faults the pages in from mem) and maps those pages on to its clients.
//! Every mapping its clients hold is derived from mem's, so revoking at mem revokes them too.
//!
//! Label 0x100 on its endpoint hands out the dataspace capability; label 0x101 frees the backing
//! dataspace (the revocation test).
#![no_std]
#![no_main]
use sawmill_abi::rights;
use sawmill_interfaces::rpc::{self, IpcResult, Map, Next, Reply};
use sawmill_interfaces::{dataspace, DsError, DsFlags, MapFlags};
use sawmill_rm as rm;
use sawmill_rt::{env, println, sys, thread, utcb};

sawmill_rt::entry!(main);

const PAGES: u64 = 8;
const BADGE: u64 = 1 << 63 | 1;

struct Stacked {
    base: u64,
    backing: u64,
    served: u64,
    /// The dataspace capability label 0x100 hands out.
    dscap: u64,
}

impl rpc::Serve for Stacked {
    #[inline(always)]
    fn handle(&mut self, m: &IpcResult, next: Next) -> IpcResult {
        if m.badge == BADGE {
            return dataspace::handle(self, m, next);
        }
        let r = match m.tag.label() {
            0x100 => {
                utcb().caps_out[0] = self.dscap;
                Reply {
                    tag: sawmill_abi::MsgTag::new(0, 0).with_caps(1),
                    w: [0; 4],
                }
            }
            0x101 => Reply::label(if dataspace::Client::new(self.backing).free().is_ok() {
                0
            } else {
                1
            }),
            _ => Reply::label(rpc::proto::BAD_OPCODE),
        };
        next.reply(self, r)
    }
}

impl dataspace::Server for Stacked {
    fn info(&mut self, _: u64) -> Result<dataspace::InfoOut, DsError> {
        Ok(dataspace::InfoOut {
            size: PAGES * 4096,
            flags: DsFlags::EMPTY,
        })
    }
    fn map(
        &mut self,
        badge: u64,
        offset: u64,
        dst: u64,
        pages: u64,
        flags: MapFlags,
    ) -> Result<Map, DsError> {
        if badge != BADGE
            || !offset.is_multiple_of(4096)
            || offset >= PAGES * 4096
            || !dst.is_multiple_of(4096)
            || pages == 0
        {
            return Err(DsError::Invalid);
        }
        if flags.intersects(MapFlags::NEED_WRITE | MapFlags::WRITE) {
            return Err(DsError::Denied);
        }
        // Our own copy of the page, from mem via our region manager.
        let src = self.base + offset;
        rm::populate(src, 4096, false).map_err(|_| DsError::NoMemory)?;
        self.served += 1;
        if self.served <= 2 {
            println!(
                "mem-stackds: page {} served from our mem-backed region",
                offset / 4096
            );
        }
        Ok(Map {
            src,
            dst,
            pages: 1,
            flags: 1,
        })
    }
    fn copy(&mut self, _: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn phys(&mut self, _: u64, _: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn read_only(&mut self, _: u64) -> Result<u64, DsError> {
        Err(DsError::Unsupported)
    }
    fn resize(&mut self, _: u64, _: u64) -> Result<(), DsError> {
        Err(DsError::Unsupported)
    }
    fn free(&mut self, _: u64) -> Result<(), DsError> {
        Err(DsError::Unsupported)
    }
}

fn main() {
    rm::init().expect("rm init");
    let mem = rm::mem().expect("mem");
    let ep = env::cap("stackds").expect("stackds endpoint");
    let backing = mem
        .alloc(PAGES * 4096, 0, thread::alloc_slot())
        .expect("alloc");
    let base = rm::attach(backing, 0, PAGES * 4096, None, rm::READ | rm::WRITE).unwrap();
    for i in 0..PAGES {
        // SAFETY: attached read-write; faults go to our region manager.
        unsafe { core::ptr::write_volatile((base + i * 4096) as *mut u64, 0xab00 + i) };
    }
    let dscap = thread::alloc_slot();
    sys::cap_mint(ep, dscap, BADGE, rights::SEND).expect("mint");
    let mut srv = Stacked {
        base,
        backing,
        served: 0,
        dscap,
    };
    let _ = rpc::serve(ep, &mut srv);
}
