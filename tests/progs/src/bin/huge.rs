//! 2 MiB pages, derived mappings and grant: root maps two 2 MiB pages at `layout::HUGE`. We
//! alias one as a whole 2 MiB page and one 4 KiB piece of it elsewhere in our own space, check
//! that all three addresses see the same memory, revoke the aliases by unmapping what was
//! derived from the original, and move (grant) a 2 MiB alias so it leaves its old address.
#![no_std]
#![no_main]
use sawmill_abi::{map, Error};
use sawmill_rt::{layout, println, slots, sys};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

const ALIAS: u64 = 0x8000_0000;
const PIECE: u64 = 0x9000_0000;
const MOVED: u64 = 0xa000_0000;

fn rd(a: u64) -> u64 {
    // SAFETY: callers only read addresses they checked are mapped.
    unsafe { core::ptr::read_volatile(a as *const u64) }
}

fn main() {
    let h = layout::HUGE;
    let rw = map::READ | map::WRITE;
    let pa = sys::translate(h).expect("huge page mapped");
    check!(
        pa.is_multiple_of(0x20_0000),
        "2 MiB page at physical {:#x}",
        pa
    );
    check!(
        sys::translate(h + 0x1f_f000) == Ok(pa + 0x1f_f000),
        "not one contiguous 2 MiB page"
    );
    // SAFETY: the 2 MiB page is ours, read-write.
    unsafe { core::ptr::write_volatile((h + 0x5008) as *mut u64, 0xfeed_f00d) };

    sys::task_map(slots::TASK, h, ALIAS, 1, rw | map::HUGE).expect("2 MiB alias");
    sys::task_map(slots::TASK, h + 0x5000, PIECE, 1, rw).expect("4 KiB piece of a 2 MiB page");
    check!(
        rd(ALIAS + 0x5008) == 0xfeed_f00d && rd(PIECE + 8) == 0xfeed_f00d,
        "aliases do not share memory"
    );
    check!(
        sys::translate(PIECE) == Ok(pa + 0x5000),
        "piece maps the wrong frame"
    );
    // A 2 MiB mapping needs 2 MiB alignment and a 2 MiB source.
    check!(
        sys::task_map(slots::TASK, h + 0x1000, 0xb000_0000, 1, rw | map::HUGE)
            == Err(Error::Invalid),
        "unaligned 2 MiB map accepted"
    );
    check!(
        sys::task_map(slots::TASK, PIECE, 0xb000_0000, 1, rw | map::HUGE) == Err(Error::Invalid),
        "2 MiB map from a 4 KiB source accepted"
    );
    println!("huge: PASS 2 MiB page aliased whole and in part");

    // Revoke everything derived from the original page: both aliases go, the original stays.
    sys::unmap(h, 1, 0).expect("unmap children");
    check!(
        sys::translate(ALIAS) == Err(Error::Fault) && sys::translate(PIECE) == Err(Error::Fault),
        "aliases survived revocation"
    );
    check!(
        rd(h + 0x5008) == 0xfeed_f00d,
        "the original lost its contents"
    );
    println!("huge: PASS unmap revoked the derived 2 MiB and 4 KiB mappings");

    // Grant: the mapping moves to a new address; the old one is empty afterwards.
    sys::task_map(slots::TASK, h, ALIAS, 1, rw | map::HUGE).expect("alias again");
    sys::task_map(slots::TASK, ALIAS, MOVED, 1, rw | map::HUGE | map::GRANT).expect("grant");
    check!(
        sys::translate(ALIAS) == Err(Error::Fault),
        "granted mapping still at its old address"
    );
    check!(
        sys::translate(MOVED) == Ok(pa) && rd(MOVED + 0x5008) == 0xfeed_f00d,
        "granted mapping not at its new address"
    );
    // The moved mapping is still derived from the original: revoking the original removes it.
    sys::unmap(h, 1, 0).expect("unmap children");
    check!(
        sys::translate(MOVED) == Err(Error::Fault),
        "granted mapping escaped revocation"
    );
    println!("huge: PASS grant moved the mapping and kept it under the original");

    // Replacing a 4 KiB mapping touches nothing else: neighbours at the 2 MiB boundary below
    // stay (a regression: the replacement once revoked the mapping at the boundary too).
    const WIN: u64 = 0xc000_0000;
    sys::task_map(slots::TASK, h + 0x1000, WIN, 1, rw).expect("piece A");
    sys::task_map(slots::TASK, h + 0x2000, WIN + 0x1000, 1, rw).expect("piece B");
    sys::task_map(slots::TASK, h + 0x3000, WIN + 0x1000, 1, rw).expect("replace piece B");
    check!(
        sys::translate(WIN) == Ok(pa + 0x1000),
        "replacing a neighbour removed the page at {:#x}",
        WIN
    );
    check!(
        sys::translate(WIN + 0x1000) == Ok(pa + 0x3000),
        "replacement did not take"
    );
    // And a 2 MiB mapping replaces every 4 KiB mapping inside it.
    let r = sys::task_map(slots::TASK, h, WIN, 1, rw | map::HUGE);
    check!(r.is_ok(), "2 MiB over 4 KiB pieces: {:?}", r);
    check!(
        sys::translate(WIN + 0x1000) == Ok(pa + 0x1000),
        "2 MiB mapping did not replace the pieces"
    );
    println!("huge: PASS replacing a mapping leaves its neighbours alone");
}
