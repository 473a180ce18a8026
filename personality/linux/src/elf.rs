//! ELF program images and the Linux initial stack, planned without touching memory: which
//! segments go where with which rights and what the stack holds at the program's entry. The
//! guest carries the plan out (attaching segments through the region manager, writing the stack
//! through a `User`). Pure logic, tested on the host with well-formed and malformed images.

use crate::errno::{self, Errno};
use alloc::vec::Vec;

pub const PAGE: u64 = 4096;

const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_PHDR: u32 = 6;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const EM_X86_64: u16 = 62;
/// Segment permission bits (`p_flags`).
pub const PF_X: u32 = 1;
pub const PF_W: u32 = 2;
pub const PF_R: u32 = 4;
/// Where a static PIE (`ET_DYN`) is loaded (Linux's `ELF_ET_DYN_BASE` is 2/3 of the address
/// space; any page-aligned base below the library zone works for a static PIE).
pub const PIE_BASE: u64 = 0x0000_1555_5555_4000;

/// One `PT_LOAD` segment, placed (the PIE base already added).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Page-aligned start of the mapping and the file offset of that page.
    pub map_start: u64,
    pub file_page: u64,
    /// Bytes of file content in the mapping from `map_start` (up to the end of the file part;
    /// the rest of that page is zeroed when the segment is writable).
    pub file_end: u64,
    /// End of the memory image (`vaddr + memsz`) and of its last page.
    pub mem_end: u64,
    pub flags: u32,
}

impl Segment {
    /// The end of the pages holding file content (page-aligned).
    pub fn file_pages_end(&self) -> u64 {
        self.file_end.div_ceil(PAGE) * PAGE
    }
    /// The end of the whole mapping (page-aligned).
    pub fn map_end(&self) -> u64 {
        self.mem_end.div_ceil(PAGE) * PAGE
    }
}

/// A checked program image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub entry: u64,
    /// Load bias (0 for `ET_EXEC`).
    pub base: u64,
    /// Where the program headers are in memory (`AT_PHDR`), their size and count.
    pub phdr: u64,
    pub phent: u64,
    pub phnum: u64,
    pub segments: Vec<Segment>,
    /// End of the highest segment (where `brk` starts, page-aligned).
    pub brk: u64,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Why a file is not a program this system runs (a static x86-64 Linux executable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not an ELF file at all (no magic).
    NotElf,
    /// An ELF file of another kind: what it is.
    WrongKind(&'static str),
    /// Dynamically linked: the interpreter it names (bytes up to its NUL, `?` if unreadable).
    Dynamic(Vec<u8>),
}

impl Refusal {
    /// The errno: `ENOEXEC`, or `ELIBBAD` for a program that needs a dynamic loader.
    pub fn errno(&self) -> Errno {
        match self {
            Refusal::Dynamic(_) => errno::ELIBBAD,
            _ => errno::ENOEXEC,
        }
    }
}

/// Checks the ELF header and program headers at the start of a file (`head`: its first bytes,
/// holding the program headers, as a linker puts them right after the header): ELF64,
/// little-endian, x86-64, `ET_EXEC` or (static PIE) `ET_DYN`, without `PT_INTERP`. Both the
/// process server (before it starts anything) and the library (before it maps anything) ask.
pub fn check(head: &[u8]) -> Result<(), Refusal> {
    if head.len() < 4 || head[..4] != *b"\x7fELF" {
        return Err(Refusal::NotElf);
    }
    if head.len() < 64 {
        return Err(Refusal::WrongKind("truncated ELF header"));
    }
    if head[4] != 2 {
        return Err(Refusal::WrongKind("not a 64-bit ELF file"));
    }
    if head[5] != 1 {
        return Err(Refusal::WrongKind("not little-endian"));
    }
    if u16_at(head, 18) != EM_X86_64 {
        return Err(Refusal::WrongKind("not an x86-64 program"));
    }
    if !matches!(u16_at(head, 16), ET_EXEC | ET_DYN) {
        return Err(Refusal::WrongKind(
            "not an executable (object or core file)",
        ));
    }
    let phoff = u64_at(head, 32);
    let phent = u16_at(head, 54) as u64;
    let phnum = u16_at(head, 56) as u64;
    if phent != 56 || phnum == 0 || phnum > 64 {
        return Err(Refusal::WrongKind("no usable program headers"));
    }
    phoff
        .checked_add(phent * phnum)
        .filter(|&e| e <= head.len() as u64)
        .ok_or(Refusal::WrongKind(
            "program headers beyond the start of the file",
        ))?;
    for i in 0..phnum {
        let ph = (phoff + i * phent) as usize;
        if u32_at(head, ph) == PT_INTERP {
            let (off, size) = (u64_at(head, ph + 8), u64_at(head, ph + 32));
            let name = off
                .checked_add(size)
                .filter(|&e| e <= head.len() as u64)
                .map(|e| &head[off as usize..e as usize])
                .map(|b| b.split(|&c| c == 0).next().unwrap_or(b).to_vec())
                .unwrap_or_else(|| b"?".to_vec());
            return Err(Refusal::Dynamic(name));
        }
    }
    Ok(())
}

/// Checks and places the image whose first bytes (at least the ELF header and the program
/// headers) are `head`; `file_size` is the whole file's size. Everything must lie in
/// `[lo, hi)`. `ENOEXEC` for anything that is not a static x86-64 executable; a program that
/// needs a dynamic loader (`PT_INTERP`) is refused with `ELIBBAD`.
pub fn parse(head: &[u8], file_size: u64, lo: u64, hi: u64) -> Result<Image, Errno> {
    check(head).map_err(|r| r.errno())?;
    let base = if u16_at(head, 16) == ET_DYN {
        PIE_BASE
    } else {
        0
    };
    let phoff = u64_at(head, 32);
    let phent = u16_at(head, 54) as u64;
    let phnum = u16_at(head, 56) as u64;
    let ph_end = phoff
        .checked_add(phent * phnum)
        .filter(|&e| e <= head.len() as u64 && e <= file_size)
        .ok_or(errno::ENOEXEC)?;
    let mut segments: Vec<Segment> = Vec::new();
    let mut phdr = None;
    let mut brk = 0;
    for i in 0..phnum {
        let o = (phoff + i * phent) as usize;
        let ty = u32_at(head, o);
        let flags = u32_at(head, o + 4);
        let off = u64_at(head, o + 8);
        let vaddr = u64_at(head, o + 16);
        let filesz = u64_at(head, o + 32);
        let memsz = u64_at(head, o + 40);
        match ty {
            PT_INTERP => return Err(errno::ELIBBAD),
            PT_PHDR => phdr = Some(vaddr.checked_add(base).ok_or(errno::ENOEXEC)?),
            PT_LOAD => {
                if filesz > memsz
                    || off.checked_add(filesz).is_none_or(|e| e > file_size)
                    || off % PAGE != vaddr % PAGE
                    || memsz == 0
                {
                    return Err(errno::ENOEXEC);
                }
                let v = vaddr.checked_add(base).ok_or(errno::ENOEXEC)?;
                let mem_end = v
                    .checked_add(memsz)
                    .filter(|&e| e <= hi)
                    .ok_or(errno::ENOEXEC)?;
                let s = Segment {
                    map_start: v & !(PAGE - 1),
                    file_page: off & !(PAGE - 1),
                    file_end: v + filesz,
                    mem_end,
                    flags: flags & (PF_R | PF_W | PF_X),
                };
                let lib = crate::layout::LIB_BASE..crate::layout::LIB_END;
                if s.map_start < lo
                    || s.map_end() > hi
                    || (s.map_start < lib.end && lib.start < s.map_end())
                {
                    return Err(errno::ENOEXEC);
                }
                // In order, not overlapping (page granularity).
                if segments.last().is_some_and(|p| p.map_end() > s.map_start) {
                    return Err(errno::ENOEXEC);
                }
                brk = s.map_end();
                // Where the headers are if there is no PT_PHDR: inside the first segment's file
                // part.
                if phdr.is_none() && off <= phoff && ph_end <= off + filesz {
                    phdr = Some(v + (phoff - off));
                }
                segments.push(s);
            }
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err(errno::ENOEXEC);
    }
    let entry = u64_at(head, 24).checked_add(base).ok_or(errno::ENOEXEC)?;
    if !segments
        .iter()
        .any(|s| s.flags & PF_X != 0 && entry >= s.map_start && entry < s.mem_end)
    {
        return Err(errno::ENOEXEC);
    }
    Ok(Image {
        entry,
        base,
        phdr: phdr.unwrap_or(0),
        phent,
        phnum,
        segments,
        brk,
    })
}

/// Auxiliary vector keys (`<elf.h>`).
pub mod at {
    pub const NULL: u64 = 0;
    pub const PHDR: u64 = 3;
    pub const PHENT: u64 = 4;
    pub const PHNUM: u64 = 5;
    pub const PAGESZ: u64 = 6;
    pub const BASE: u64 = 7;
    pub const FLAGS: u64 = 8;
    pub const ENTRY: u64 = 9;
    pub const UID: u64 = 11;
    pub const EUID: u64 = 12;
    pub const GID: u64 = 13;
    pub const EGID: u64 = 14;
    pub const PLATFORM: u64 = 15;
    pub const HWCAP: u64 = 16;
    pub const CLKTCK: u64 = 17;
    pub const SECURE: u64 = 23;
    pub const RANDOM: u64 = 25;
    pub const EXECFN: u64 = 31;
}

/// What the initial stack says besides the strings.
pub struct StackInfo<'a> {
    pub argv: &'a [&'a [u8]],
    pub envp: &'a [&'a [u8]],
    pub execfn: &'a [u8],
    pub random: [u8; 16],
    pub image: &'a Image,
    /// uid, euid, gid, egid.
    pub ids: [u32; 4],
    pub hwcap: u64,
}

/// The initial stack: its bytes, to be written at `sp`, and `sp` (16-byte aligned, pointing at
/// `argc`, as the x86-64 ABI says for the process entry).
pub struct Stack {
    pub sp: u64,
    pub bytes: Vec<u8>,
}

/// Plans the stack below `top`: strings (argv, envp, the exec name, "x86_64") and the 16
/// random bytes at the top, then (16-byte aligned) argc, argv[], NULL, envp[], NULL, auxv.
/// `E2BIG` if it would need more than `max` bytes.
pub fn plan_stack(top: u64, info: &StackInfo, max: u64) -> Result<Stack, Errno> {
    const PLATFORM: &[u8] = b"x86_64";
    // The strings area's size first, so that the stack is built in one buffer of its final
    // size (prepending each string to the area copied it whole every time: ~7k instructions of
    // every exec'd image's start with a shell's environment).
    let with_nul = |s: &[&[u8]]| s.iter().map(|x| x.len() + 1).sum::<usize>();
    let strings_len = info.random.len()
        + PLATFORM.len()
        + 1
        + info.execfn.len()
        + 1
        + with_nul(info.envp)
        + with_nul(info.argv);
    // The auxiliary vector's entries (pairs), `AT_NULL` included.
    const AUX_LEN: usize = 18;
    let words = 1 + info.argv.len() + 1 + info.envp.len() + 1 + AUX_LEN * 2;
    let room = (strings_len as u64).saturating_add(words as u64 * 8);
    if room > max || room > top {
        return Err(errno::E2BIG);
    }
    let strings_lo = top - strings_len as u64;
    let sp = (strings_lo - words as u64 * 8) & !15;
    if top - sp > max {
        return Err(errno::E2BIG);
    }
    let mut bytes = alloc::vec![0u8; (top - sp) as usize];
    // Strings, upwards from `strings_lo`: the arguments, the environment, the exec name, the
    // platform, the random bytes at the top; each one's address is recorded as it is placed.
    let mut at = (strings_lo - sp) as usize;
    let mut put = |bytes: &mut [u8], s: &[u8], nul: bool| -> u64 {
        let addr = sp + at as u64;
        bytes[at..at + s.len()].copy_from_slice(s);
        at += s.len() + nul as usize;
        addr
    };
    // The pointer table, upwards from `sp`.
    let mut word_at = 0usize;
    let mut w = |bytes: &mut [u8], v: u64| {
        bytes[word_at..word_at + 8].copy_from_slice(&v.to_le_bytes());
        word_at += 8;
    };
    w(&mut bytes, info.argv.len() as u64);
    for a in info.argv {
        let addr = put(&mut bytes, a, true);
        w(&mut bytes, addr);
    }
    w(&mut bytes, 0);
    for e in info.envp {
        let addr = put(&mut bytes, e, true);
        w(&mut bytes, addr);
    }
    w(&mut bytes, 0);
    let execfn = put(&mut bytes, info.execfn, true);
    let platform = put(&mut bytes, PLATFORM, true);
    let random = put(&mut bytes, &info.random, false);
    let img = info.image;
    let aux: [(u64, u64); AUX_LEN] = [
        (at::PHDR, img.phdr),
        (at::PHENT, img.phent),
        (at::PHNUM, img.phnum),
        (at::PAGESZ, PAGE),
        (at::BASE, 0),
        (at::FLAGS, 0),
        (at::ENTRY, img.entry),
        (at::UID, info.ids[0] as u64),
        (at::EUID, info.ids[1] as u64),
        (at::GID, info.ids[2] as u64),
        (at::EGID, info.ids[3] as u64),
        (at::SECURE, 0),
        (at::HWCAP, info.hwcap),
        (at::CLKTCK, 100),
        (at::RANDOM, random),
        (at::EXECFN, execfn),
        (at::PLATFORM, platform),
        (at::NULL, 0),
    ];
    for (k, v) in aux {
        w(&mut bytes, k);
        w(&mut bytes, v);
    }
    Ok(Stack { sp, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF: header, `n` program headers from `phs` (type, flags, off, vaddr, filesz,
    /// memsz), padded to `size`.
    fn elf(kind: u16, entry: u64, phs: &[(u32, u32, u64, u64, u64, u64)], size: usize) -> Vec<u8> {
        let mut b = alloc::vec![0u8; size.max(64 + 56 * phs.len())];
        b[0..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&kind.to_le_bytes());
        b[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        b[24..32].copy_from_slice(&entry.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&(phs.len() as u16).to_le_bytes());
        for (i, p) in phs.iter().enumerate() {
            let o = 64 + i * 56;
            b[o..o + 4].copy_from_slice(&p.0.to_le_bytes());
            b[o + 4..o + 8].copy_from_slice(&p.1.to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&p.2.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&p.3.to_le_bytes());
            b[o + 32..o + 40].copy_from_slice(&p.4.to_le_bytes());
            b[o + 40..o + 48].copy_from_slice(&p.5.to_le_bytes());
        }
        b
    }

    const LO: u64 = 0x1_0000;
    const HI: u64 = crate::layout::MMAP_TOP;

    fn static_exe() -> Vec<u8> {
        elf(
            ET_EXEC,
            0x401000,
            &[
                (PT_LOAD, PF_R, 0, 0x400000, 0x200, 0x200),
                (PT_LOAD, PF_R | PF_X, 0x1000, 0x401000, 0x800, 0x800),
                (PT_LOAD, PF_R | PF_W, 0x2e00, 0x403e00, 0x300, 0x1400),
            ],
            0x4000,
        )
    }

    #[test]
    fn static_executable() {
        let b = static_exe();
        let img = parse(&b, b.len() as u64, LO, HI).unwrap();
        assert_eq!(img.entry, 0x401000);
        assert_eq!(img.base, 0);
        assert_eq!((img.phdr, img.phent, img.phnum), (0x400040, 56, 3));
        let d = &img.segments[2];
        assert_eq!((d.map_start, d.file_page), (0x403000, 0x2000));
        assert_eq!((d.file_end, d.mem_end), (0x404100, 0x405200));
        assert_eq!((d.file_pages_end(), d.map_end()), (0x405000, 0x406000));
        assert_eq!(img.brk, 0x406000);
    }

    #[test]
    fn static_pie_is_placed_at_the_base() {
        let mut b = static_exe();
        b[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
        let img = parse(&b, b.len() as u64, LO, HI).unwrap();
        assert_eq!(img.base, PIE_BASE);
        assert_eq!(img.entry, PIE_BASE + 0x401000);
        assert_eq!(img.segments[0].map_start, PIE_BASE + 0x400000);
    }

    #[test]
    fn malformed_images_are_refused() {
        let good = static_exe();
        let n = good.len() as u64;
        let mut b = good.clone();
        b[0] = 0;
        assert_eq!(parse(&b, n, LO, HI), Err(errno::ENOEXEC));
        let mut b = good.clone();
        b[18] = 3; // i386
        assert_eq!(parse(&b, n, LO, HI), Err(errno::ENOEXEC));
        let mut b = good.clone();
        b[16] = 1; // ET_REL
        assert_eq!(parse(&b, n, LO, HI), Err(errno::ENOEXEC));
        // Truncated: headers beyond the bytes given, or a segment beyond the file.
        assert_eq!(parse(&good[..100], n, LO, HI), Err(errno::ENOEXEC));
        assert_eq!(parse(&good, 0x3000, LO, HI), Err(errno::ENOEXEC));
        let mut b = good.clone();
        b[56] = 0xff; // 255 headers
        assert_eq!(parse(&b, n, LO, HI), Err(errno::ENOEXEC));
        // A dynamic program names its loader.
        let dynamic = elf(
            ET_EXEC,
            0x401000,
            &[
                (PT_INTERP, PF_R, 0x100, 0x400100, 0x10, 0x10),
                (PT_LOAD, PF_R | PF_X, 0, 0x400000, 0x2000, 0x2000),
            ],
            0x2000,
        );
        assert_eq!(parse(&dynamic, 0x2000, LO, HI), Err(errno::ELIBBAD));
        let check = |phs: &[(u32, u32, u64, u64, u64, u64)], entry| {
            let b = elf(ET_EXEC, entry, phs, 0x3000);
            parse(&b, 0x3000, LO, HI)
        };
        // filesz > memsz; misaligned offset; overlapping; into the library zone; wrapping;
        // entry outside executable code; no segment.
        let x = PF_R | PF_X;
        assert!(check(&[(PT_LOAD, x, 0, 0x400000, 0x200, 0x100)], 0x400000).is_err());
        assert!(check(&[(PT_LOAD, x, 0x10, 0x400000, 0x200, 0x200)], 0x400000).is_err());
        assert!(check(
            &[
                (PT_LOAD, x, 0, 0x400000, 0x2000, 0x2000),
                (PT_LOAD, PF_R, 0x1000, 0x401000, 0x100, 0x100)
            ],
            0x400000
        )
        .is_err());
        assert!(check(&[(PT_LOAD, x, 0, 0x6000_0000, 0x200, 0x200)], 0x6000_0000).is_err());
        assert!(check(&[(PT_LOAD, x, 0, u64::MAX - 0xfff, 0x200, 0x200)], 0).is_err());
        assert!(check(&[(PT_LOAD, PF_R, 0, 0x400000, 0x200, 0x200)], 0x400000).is_err());
        assert!(check(&[], 0x400000).is_err());
    }

    fn word(b: &[u8], i: usize) -> u64 {
        u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
    }

    #[test]
    fn initial_stack() {
        let b = static_exe();
        let img = parse(&b, b.len() as u64, LO, HI).unwrap();
        let top = 0x7fff_f000;
        let info = StackInfo {
            argv: &[b"/bin/hello", b"one"],
            envp: &[b"HOME=/"],
            execfn: b"/bin/hello",
            random: [7; 16],
            image: &img,
            ids: [1, 2, 3, 4],
            hwcap: 0x178bfbff,
        };
        let s = plan_stack(top, &info, 1 << 20).unwrap();
        assert_eq!(s.sp % 16, 0);
        assert_eq!(s.sp + s.bytes.len() as u64, top);
        let b = &s.bytes;
        let at_addr = |a: u64| &b[(a - s.sp) as usize..];
        let cstr = |a: u64| {
            let t = at_addr(a);
            &t[..t.iter().position(|&c| c == 0).unwrap()]
        };
        assert_eq!(word(b, 0), 2);
        assert_eq!(cstr(word(b, 1)), b"/bin/hello");
        assert_eq!(cstr(word(b, 2)), b"one");
        assert_eq!(word(b, 3), 0);
        assert_eq!(cstr(word(b, 4)), b"HOME=/");
        assert_eq!(word(b, 5), 0);
        let mut aux = alloc::collections::BTreeMap::new();
        let mut i = 6;
        loop {
            let (k, v) = (word(b, i), word(b, i + 1));
            if k == at::NULL {
                break;
            }
            aux.insert(k, v);
            i += 2;
        }
        assert_eq!(aux[&at::PHDR], 0x400040);
        assert_eq!(aux[&at::PHNUM], 3);
        assert_eq!(aux[&at::PAGESZ], 4096);
        assert_eq!(aux[&at::ENTRY], 0x401000);
        assert_eq!(
            (aux[&at::UID], aux[&at::EUID], aux[&at::GID], aux[&at::EGID]),
            (1, 2, 3, 4)
        );
        assert_eq!(aux[&at::SECURE], 0);
        assert_eq!(cstr(aux[&at::PLATFORM]), b"x86_64");
        assert_eq!(cstr(aux[&at::EXECFN]), b"/bin/hello");
        assert_eq!(&at_addr(aux[&at::RANDOM])[..16], &[7; 16]);
        assert!(aux.contains_key(&at::HWCAP) && aux.contains_key(&at::CLKTCK));
        assert!(aux.contains_key(&at::BASE) && aux.contains_key(&at::FLAGS));
        // Too big for the room given.
        assert_eq!(plan_stack(top, &info, 64).err(), Some(errno::E2BIG));
    }

    /// The strings sit packed from the end of the pointer table's alignment padding to the
    /// top: the arguments, the environment, the exec name, the platform, the random bytes last.
    #[test]
    fn initial_stack_strings_packed() {
        let b = static_exe();
        let img = parse(&b, b.len() as u64, LO, HI).unwrap();
        let top = 0x7fff_f000;
        let info = StackInfo {
            argv: &[b"sh", b"-c", b""],
            envp: &[b"A=1", b"PATH=/bin"],
            execfn: b"/bin/sh",
            random: [9; 16],
            image: &img,
            ids: [0; 4],
            hwcap: 0,
        };
        let s = plan_stack(top, &info, 1 << 20).unwrap();
        let b = &s.bytes;
        let strings = b"sh\0-c\0\0A=1\0PATH=/bin\0/bin/sh\0x86_64\0";
        let lo = top - 16 - strings.len() as u64;
        assert_eq!(&b[(lo - s.sp) as usize..b.len() - 16], strings);
        assert_eq!(&b[b.len() - 16..], &[9; 16]);
        assert_eq!((word(b, 1), word(b, 2), word(b, 3)), (lo, lo + 3, lo + 6));
        assert_eq!((word(b, 5), word(b, 6)), (lo + 7, lo + 11));
        // Strings larger than the space below the top: refused, not wrapped around.
        assert_eq!(plan_stack(64, &info, 1 << 20).err(), Some(errno::E2BIG));
    }
}
