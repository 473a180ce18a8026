//! Turns the kernel ELF plus a boot archive into one bootable file.
//!
//! Why an extra PT_LOAD segment instead of multiboot modules: QEMU's `-kernel` path (PVH for a
//! 64-bit ELF) loads no modules, but every ELF loader (QEMU, GRUB) loads all PT_LOAD segments. So the
//! archive rides along as a read-only segment placed on the next 2 MiB boundary after the kernel,
//! and the kernel learns where it is from its `SAWMILL_BOOTMODS` descriptor, patched in the file:
//! `[u64; 4]` = [`b"BOOTMODS"` magic, archive physical address, archive length, reserved].
//!
//! Only the handful of ELF64 headers this needs are parsed, with every read bounds-checked.

use crate::archive::align_up;

pub const KERNEL_VBASE: u64 = 0xffff_ffff_8000_0000;
pub const DESCRIPTOR_SYMBOL: &str = "SAWMILL_BOOTMODS";
pub const DESCRIPTOR_MAGIC: u64 = u64::from_le_bytes(*b"BOOTMODS");
const TWO_MIB: u64 = 2 << 20;
const PAGE: u64 = 4096;

const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;
const PT_NULL: u32 = 0;
const PF_R: u32 = 4;
const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: usize = 24;

/// Where the archive ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub paddr: u64,
    pub vaddr: u64,
    pub file_offset: u64,
    pub len: u64,
}

fn rd<const N: usize>(b: &[u8], off: u64) -> Result<[u8; N], String> {
    let o = usize::try_from(off).map_err(|_| "offset overflow".to_string())?;
    b.get(o..o.checked_add(N).ok_or("offset overflow")?)
        .map(|s| s.try_into().unwrap())
        .ok_or_else(|| format!("kernel ELF truncated (read of {N} bytes at {off:#x})"))
}
fn u16_at(b: &[u8], off: u64) -> Result<u16, String> {
    Ok(u16::from_le_bytes(rd(b, off)?))
}
fn u32_at(b: &[u8], off: u64) -> Result<u32, String> {
    Ok(u32::from_le_bytes(rd(b, off)?))
}
fn u64_at(b: &[u8], off: u64) -> Result<u64, String> {
    Ok(u64::from_le_bytes(rd(b, off)?))
}

#[derive(Debug, Clone, Copy)]
struct Phdr {
    p_type: u32,
    p_paddr: u64,
    p_memsz: u64,
}

#[derive(Debug, Clone, Copy)]
struct Shdr {
    sh_type: u32,
    sh_addr: u64,
    sh_offset: u64,
    sh_size: u64,
    sh_link: u32,
}

fn check_header(elf: &[u8]) -> Result<(), String> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" {
        return Err("kernel is not an ELF file".into());
    }
    if elf[4] != 2 || elf[5] != 1 {
        return Err("kernel is not a little-endian ELF64 file".into());
    }
    if u16_at(elf, 0x12)? != 62 {
        return Err("kernel ELF is not for x86-64".into());
    }
    Ok(())
}

fn program_headers(elf: &[u8]) -> Result<Vec<(Phdr, [u8; PHDR_SIZE])>, String> {
    let phoff = u64_at(elf, 0x20)?;
    let entsize = u16_at(elf, 0x36)? as u64;
    let num = u16_at(elf, 0x38)? as u64;
    if num > 0 && entsize != PHDR_SIZE as u64 {
        return Err(format!(
            "kernel ELF program header size {entsize}, expected 56"
        ));
    }
    (0..num)
        .map(|i| {
            let at = phoff + i * PHDR_SIZE as u64;
            let raw: [u8; PHDR_SIZE] = rd(elf, at)?;
            let p = Phdr {
                p_type: u32_at(&raw, 0)?,
                p_paddr: u64_at(&raw, 0x18)?,
                p_memsz: u64_at(&raw, 0x28)?,
            };
            Ok((p, raw))
        })
        .collect()
}

fn section_headers(elf: &[u8]) -> Result<Vec<Shdr>, String> {
    let shoff = u64_at(elf, 0x28)?;
    let entsize = u16_at(elf, 0x3a)? as u64;
    let num = u16_at(elf, 0x3c)? as u64;
    if num > 0 && entsize != SHDR_SIZE as u64 {
        return Err(format!(
            "kernel ELF section header size {entsize}, expected 64"
        ));
    }
    (0..num)
        .map(|i| {
            let at = shoff + i * SHDR_SIZE as u64;
            Ok(Shdr {
                sh_type: u32_at(elf, at + 4)?,
                sh_addr: u64_at(elf, at + 0x10)?,
                sh_offset: u64_at(elf, at + 0x18)?,
                sh_size: u64_at(elf, at + 0x20)?,
                sh_link: u32_at(elf, at + 0x28)?,
            })
        })
        .collect()
}

/// File offset of the bytes of symbol `name`, via `.symtab`; the symbol's size must be `size`.
fn symbol_file_offset(elf: &[u8], name: &str, size: u64) -> Result<u64, String> {
    let shdrs = section_headers(elf)?;
    let symtab = shdrs
        .iter()
        .find(|s| s.sh_type == SHT_SYMTAB)
        .ok_or("kernel ELF has no symbol table (.symtab); it must not be stripped")?;
    let strtab = shdrs
        .get(symtab.sh_link as usize)
        .ok_or("kernel .symtab links to a missing string table")?;
    let count = symtab.sh_size / SYM_SIZE as u64;
    for i in 0..count {
        let at = symtab.sh_offset + i * SYM_SIZE as u64;
        let st_name = u32_at(elf, at)? as u64;
        if st_name >= strtab.sh_size {
            continue;
        }
        let start = strtab.sh_offset + st_name;
        let matches = elf
            .get(start as usize..)
            .and_then(|s| s.get(..name.len() + 1))
            .is_some_and(|s| &s[..name.len()] == name.as_bytes() && s[name.len()] == 0);
        if !matches {
            continue;
        }
        let shndx = u16_at(elf, at + 6)? as usize;
        let value = u64_at(elf, at + 8)?;
        let st_size = u64_at(elf, at + 16)?;
        if st_size != size {
            return Err(format!(
                "kernel symbol {name} has size {st_size}, expected {size}"
            ));
        }
        let sec = shdrs
            .get(shndx)
            .filter(|_| shndx != 0 && shndx < 0xff00)
            .ok_or_else(|| format!("kernel symbol {name} is not defined in a section"))?;
        if sec.sh_type == SHT_NOBITS {
            return Err(format!(
                "kernel symbol {name} lives in .bss; give it a non-zero initialiser so it is in the file"
            ));
        }
        let rel = value
            .checked_sub(sec.sh_addr)
            .filter(|r| r + size <= sec.sh_size)
            .ok_or_else(|| format!("kernel symbol {name} lies outside its section"))?;
        return Ok(sec.sh_offset + rel);
    }
    Err(format!("kernel ELF has no symbol {name}"))
}

/// Appends `archive` to `kernel` as a new PT_LOAD segment and patches the kernel's descriptor.
pub fn build_image(kernel: &[u8], archive: &[u8]) -> Result<(Vec<u8>, Placement), String> {
    check_header(kernel)?;
    let phdrs = program_headers(kernel)?;
    let load_end = phdrs
        .iter()
        .filter(|(p, _)| p.p_type == PT_LOAD)
        .map(|(p, _)| {
            p.p_paddr
                .checked_add(p.p_memsz)
                .ok_or("kernel PT_LOAD overflows")
        })
        .try_fold(None::<u64>, |m, e| {
            e.map(|e| Some(m.map_or(e, |m: u64| m.max(e))))
        })?
        .ok_or("kernel ELF has no PT_LOAD segment")?;
    let paddr = align_up(load_end, TWO_MIB);
    let vaddr = KERNEL_VBASE
        .checked_add(paddr)
        .ok_or("archive address overflows")?;
    let len = archive.len() as u64;

    let desc = symbol_file_offset(kernel, DESCRIPTOR_SYMBOL, 32)?;
    let magic = u64_at(kernel, desc)?;
    if magic != DESCRIPTOR_MAGIC {
        return Err(format!(
            "kernel {DESCRIPTOR_SYMBOL} word 0 is {magic:#x}, expected the magic b\"BOOTMODS\""
        ));
    }

    let mut out = kernel.to_vec();
    out.resize(align_up(out.len() as u64, PAGE) as usize, 0);
    let file_offset = out.len() as u64;
    out.extend_from_slice(archive);

    let mut ph = [0u8; PHDR_SIZE];
    ph[0..4].copy_from_slice(&PT_LOAD.to_le_bytes());
    ph[4..8].copy_from_slice(&PF_R.to_le_bytes());
    ph[8..16].copy_from_slice(&file_offset.to_le_bytes());
    ph[16..24].copy_from_slice(&vaddr.to_le_bytes());
    ph[24..32].copy_from_slice(&paddr.to_le_bytes());
    ph[32..40].copy_from_slice(&len.to_le_bytes());
    ph[40..48].copy_from_slice(&len.to_le_bytes());
    ph[48..56].copy_from_slice(&PAGE.to_le_bytes());

    // The kernel reserves a PT_NULL entry in its program-header table (kernel/linker.ld): the
    // archive's segment goes there, so the table stays at the start of the file, where GRUB's
    // multiboot loader insists on finding it. Without a spare entry the table moves to the end
    // (fine for QEMU's loader, not for GRUB).
    let spare = phdrs.iter().position(|(p, _)| p.p_type == PT_NULL);
    if let Some(i) = spare {
        let at = (u64_at(kernel, 0x20)? + i as u64 * PHDR_SIZE as u64) as usize;
        out[at..at + PHDR_SIZE].copy_from_slice(&ph);
    } else {
        out.resize(align_up(out.len() as u64, 8) as usize, 0);
        let phoff = out.len() as u64;
        let mut n = 0u64;
        for (p, raw) in &phdrs {
            // The table moves out of every loaded segment, so a PT_PHDR would now be a lie.
            if p.p_type == PT_PHDR {
                continue;
            }
            out.extend_from_slice(raw);
            n += 1;
        }
        out.extend_from_slice(&ph);
        n += 1;
        if n >= 0xffff {
            return Err("kernel ELF has too many program headers".into());
        }
        out[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
        out[0x38..0x3a].copy_from_slice(&(n as u16).to_le_bytes());
    }

    let d = desc as usize;
    out[d + 8..d + 16].copy_from_slice(&paddr.to_le_bytes());
    out[d + 16..d + 24].copy_from_slice(&len.to_le_bytes());
    Ok((
        out,
        Placement {
            paddr,
            vaddr,
            file_offset,
            len,
        },
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal x86-64 kernel-shaped ELF: a PT_PHDR, two PT_LOADs (text at 1 MiB, data ending
    /// at 0x3f_f000 physical), and a .data section holding the descriptor named in .symtab.
    pub(crate) fn synthetic_kernel(magic: u64, desc_in_bss: bool) -> Vec<u8> {
        let mut f = vec![0u8; 0x2000];
        let data_off = 0x1000u64;
        let data_addr = KERNEL_VBASE + 0x30_0000;
        // Descriptor 16 bytes into .data, behind some other variable.
        let desc_off = data_off + 16;
        f[desc_off as usize..desc_off as usize + 8].copy_from_slice(&magic.to_le_bytes());
        f[desc_off as usize + 24..desc_off as usize + 32].copy_from_slice(&0x77u64.to_le_bytes());

        // .strtab, then .symtab (null symbol + ours).
        let strtab_off = f.len() as u64;
        let strtab = b"\0other\0SAWMILL_BOOTMODS\0";
        f.extend_from_slice(strtab);
        while !f.len().is_multiple_of(8) {
            f.push(0);
        }
        let symtab_off = f.len() as u64;
        f.extend_from_slice(&[0u8; SYM_SIZE]);
        for (name, value, size) in [(1u32, data_addr, 8u64), (7, data_addr + 16, 32)] {
            let mut s = [0u8; SYM_SIZE];
            s[0..4].copy_from_slice(&name.to_le_bytes());
            s[4] = 0x11; // global object
            s[6..8].copy_from_slice(&1u16.to_le_bytes());
            s[8..16].copy_from_slice(&value.to_le_bytes());
            s[16..24].copy_from_slice(&size.to_le_bytes());
            f.extend_from_slice(&s);
        }
        let symtab_size = f.len() as u64 - symtab_off;

        let shoff = f.len() as u64;
        let shdr = |t: u32, addr: u64, off: u64, size: u64, link: u32| {
            let mut s = [0u8; SHDR_SIZE];
            s[4..8].copy_from_slice(&t.to_le_bytes());
            s[0x10..0x18].copy_from_slice(&addr.to_le_bytes());
            s[0x18..0x20].copy_from_slice(&off.to_le_bytes());
            s[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            s[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
            s
        };
        f.extend_from_slice(&[0u8; SHDR_SIZE]);
        let data_type = if desc_in_bss { SHT_NOBITS } else { 1 };
        f.extend_from_slice(&shdr(data_type, data_addr, data_off, 0x1000, 0));
        f.extend_from_slice(&shdr(SHT_SYMTAB, 0, symtab_off, symtab_size, 3));
        f.extend_from_slice(&shdr(3, 0, strtab_off, strtab.len() as u64, 0));

        // ELF header.
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[6] = 1;
        f[0x10..0x12].copy_from_slice(&2u16.to_le_bytes());
        f[0x12..0x14].copy_from_slice(&62u16.to_le_bytes());
        f[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        f[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        f[0x34..0x36].copy_from_slice(&64u16.to_le_bytes());
        f[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        f[0x38..0x3a].copy_from_slice(&3u16.to_le_bytes());
        f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        f[0x3c..0x3e].copy_from_slice(&4u16.to_le_bytes());
        let ph = |t: u32, off: u64, paddr: u64, filesz: u64, memsz: u64| {
            let mut p = [0u8; PHDR_SIZE];
            p[0..4].copy_from_slice(&t.to_le_bytes());
            p[4..8].copy_from_slice(&6u32.to_le_bytes());
            p[8..16].copy_from_slice(&off.to_le_bytes());
            p[16..24].copy_from_slice(&(KERNEL_VBASE + paddr).to_le_bytes());
            p[24..32].copy_from_slice(&paddr.to_le_bytes());
            p[32..40].copy_from_slice(&filesz.to_le_bytes());
            p[40..48].copy_from_slice(&memsz.to_le_bytes());
            p[48..56].copy_from_slice(&PAGE.to_le_bytes());
            p
        };
        let phdrs = [
            ph(PT_PHDR, 64, 0x10_0040, 3 * 56, 3 * 56),
            ph(PT_LOAD, 0, 0x10_0000, 0x1000, 0x1000),
            // .data plus a large .bss: ends at 0x3f_f000, so the archive goes to 4 MiB.
            ph(PT_LOAD, data_off, 0x30_0000, 0x1000, 0xf_f000),
        ];
        for (i, p) in phdrs.iter().enumerate() {
            f[64 + i * 56..64 + (i + 1) * 56].copy_from_slice(p);
        }
        f
    }

    #[test]
    fn fills_a_spare_entry_in_place() {
        // Turn the synthetic kernel's PT_PHDR (entry 0) into the spare PT_NULL the real kernel's
        // linker script reserves.
        let mut kernel = synthetic_kernel(DESCRIPTOR_MAGIC, false);
        let phoff = u64_at(&kernel, 0x20).unwrap() as usize;
        kernel[phoff..phoff + 4].copy_from_slice(&PT_NULL.to_le_bytes());
        let archive = vec![0xabu8; 5000];
        let (img, pl) = build_image(&kernel, &archive).unwrap();
        // The table stays where it was (GRUB reads it from the start of the file) ...
        assert_eq!(u64_at(&img, 0x20).unwrap() as usize, phoff);
        assert_eq!(u16_at(&img, 0x38).unwrap(), u16_at(&kernel, 0x38).unwrap());
        // ... and its spare entry now loads the archive.
        let phdrs = program_headers(&img).unwrap();
        let (p, _) = phdrs[0];
        assert_eq!((p.p_type, p.p_paddr, p.p_memsz), (PT_LOAD, pl.paddr, 5000));
        assert_eq!(&img[pl.file_offset as usize..][..5000], &archive[..]);
        assert!(phdrs.iter().all(|(p, _)| p.p_type != PT_NULL));
    }

    #[test]
    fn appends_segment_and_patches_descriptor() {
        let kernel = synthetic_kernel(DESCRIPTOR_MAGIC, false);
        let archive: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let (img, pl) = build_image(&kernel, &archive).unwrap();
        assert_eq!(pl.paddr, 0x40_0000);
        assert_eq!(pl.vaddr, KERNEL_VBASE + 0x40_0000);
        assert_eq!(pl.len, 10_000);
        assert_eq!(pl.file_offset % 4096, 0);
        assert!(pl.file_offset >= kernel.len() as u64);
        // The original bytes are untouched apart from e_phoff/e_phnum and the descriptor.
        assert_eq!(&img[0x1000..0x1010], &kernel[0x1000..0x1010]);
        let f = pl.file_offset as usize;
        assert_eq!(&img[f..f + archive.len()], &archive[..]);

        let phdrs = program_headers(&img).unwrap();
        assert_eq!(phdrs.len(), 3, "PT_PHDR dropped, one PT_LOAD added");
        assert!(phdrs.iter().all(|(p, _)| p.p_type == PT_LOAD));
        let (_, raw) = phdrs[2];
        assert_eq!(u32_at(&raw, 4).unwrap(), PF_R);
        assert_eq!(u64_at(&raw, 8).unwrap(), pl.file_offset);
        assert_eq!(u64_at(&raw, 16).unwrap(), pl.vaddr);
        assert_eq!(u64_at(&raw, 24).unwrap(), pl.paddr);
        assert_eq!(u64_at(&raw, 32).unwrap(), 10_000);
        assert_eq!(u64_at(&raw, 40).unwrap(), 10_000);
        assert_eq!(u64_at(&raw, 48).unwrap(), 4096);
        // The table itself is in the file, after the archive.
        let phoff = u64_at(&img, 0x20).unwrap();
        assert!(phoff >= pl.file_offset + pl.len && phoff as usize + 3 * 56 == img.len());

        let d = 0x1010;
        assert_eq!(u64_at(&img, d).unwrap(), DESCRIPTOR_MAGIC);
        assert_eq!(u64_at(&img, d + 8).unwrap(), 0x40_0000);
        assert_eq!(u64_at(&img, d + 16).unwrap(), 10_000);
        assert_eq!(
            u64_at(&img, d + 24).unwrap(),
            0x77,
            "reserved word untouched"
        );
    }

    #[test]
    fn refuses_bad_kernels() {
        let e = build_image(&synthetic_kernel(0, false), b"x").unwrap_err();
        assert!(e.contains("expected the magic"), "{e}");
        let e = build_image(&synthetic_kernel(DESCRIPTOR_MAGIC, true), b"x").unwrap_err();
        assert!(e.contains(".bss"), "{e}");
        assert!(build_image(b"not an elf", b"x").is_err());
        let mut k = synthetic_kernel(DESCRIPTOR_MAGIC, false);
        let idx = k
            .windows(16)
            .position(|w| w == b"SAWMILL_BOOTMODS")
            .unwrap();
        k[idx] = b'X';
        let e = build_image(&k, b"x").unwrap_err();
        assert!(e.contains("no symbol"), "{e}");
        // Truncation anywhere must be an error, not a panic.
        let k = synthetic_kernel(DESCRIPTOR_MAGIC, false);
        for n in (0..k.len()).step_by(7) {
            let _ = build_image(&k[..n], b"x");
        }
    }
}
