//! Where a modern virtio-pci device keeps its register blocks: the walk of its PCI capability
//! list (virtio 1.x, 4.1.4) that blk-virtio's modern transport does through pci's
//! `config_read`. Pure: it reads configuration space through the closure it is given and
//! checks what it finds, so the checks are tested on the host against crafted lists.

/// Vendor-specific PCI capability (virtio structures).
const CAP_VENDOR: u32 = 0x09;
/// `cfg_type` values.
pub const COMMON: u8 = 1;
pub const NOTIFY: u8 = 2;
pub const ISR: u8 = 3;
pub const DEVICE: u8 = 4;
/// The common structure's size in virtio 1.0 (every field up to `queue_device`).
pub const COMMON_LEN: u32 = 0x38;

/// One register block: its byte range in the BAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub offset: u32,
    pub len: u32,
}

/// The four blocks, all in BAR `bar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub bar: u8,
    pub common: Block,
    pub notify: Block,
    pub isr: Block,
    pub device: Block,
    /// Queue `q`'s doorbell is at `notify.offset + queue_notify_off(q) * notify_mult`.
    pub notify_mult: u32,
}

/// Walks the capability list. `read(reg)` returns the configuration dword at `reg` (a multiple
/// of 4 below 256), None if it cannot be read; `bar_size` is the size of the BAR the blocks must
/// lie in. The first capability of each kind counts. Refused: no capability list, a kind
/// missing, blocks in different BARs, a block too short or reaching past the BAR.
pub fn find(
    read: &mut dyn FnMut(u32) -> Option<u32>,
    bar_size: u64,
) -> Result<Layout, &'static str> {
    let mut rd = |reg: u32| read(reg).ok_or("configuration space could not be read");
    if rd(0x04)? >> 16 & 0x10 == 0 {
        return Err("no PCI capability list");
    }
    let mut found: [Option<(u8, Block)>; 5] = [None; 5];
    let mut notify_mult = 0;
    let mut at = rd(0x34)? & 0xfc;
    // At most 48 capabilities fit in the 192 bytes after the header: more means a loop.
    for _ in 0..48 {
        if at < 0x40 {
            break;
        }
        let head = rd(at)?;
        let kind = (head >> 24) as u8;
        if head & 0xff == CAP_VENDOR
            && (COMMON..=DEVICE).contains(&kind)
            && found[kind as usize].is_none()
        {
            let bar = rd(at + 4)? as u8;
            let block = Block {
                offset: rd(at + 8)?,
                len: rd(at + 12)?,
            };
            found[kind as usize] = Some((bar, block));
            if kind == NOTIFY {
                notify_mult = rd(at + 16)?;
            }
        }
        at = head >> 8 & 0xfc;
    }
    let mut bar = None;
    let mut block = |kind: u8, min_len: u32| -> Result<Block, &'static str> {
        let (which, b) = found[kind as usize].ok_or("a virtio capability is missing")?;
        if *bar.get_or_insert(which) != which {
            return Err("virtio blocks in more than one BAR");
        }
        if b.len < min_len || b.offset as u64 + b.len as u64 > bar_size {
            return Err("a virtio block is too short or reaches past its BAR");
        }
        Ok(b)
    };
    let common = block(COMMON, COMMON_LEN)?;
    let notify = block(NOTIFY, 2)?;
    let isr = block(ISR, 1)?;
    let device = block(DEVICE, 8)?;
    Ok(Layout {
        bar: bar.unwrap_or(0),
        common,
        notify,
        isr,
        device,
        notify_mult,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration space with QEMU's layout for a modern virtio-blk device (BAR 4, blocks of
    /// 4 KiB: common, ISR, device, notify), capabilities from 0x40 on.
    fn qemu() -> [u32; 64] {
        let mut c = [0u32; 64];
        c[1] = 0x0010_0000; // status: capability list
        c[0x34 / 4] = 0x40;
        let caps: [(u8, u32, u32); 4] = [
            (COMMON, 0x0000, 0x1000),
            (ISR, 0x1000, 0x1000),
            (DEVICE, 0x2000, 0x1000),
            (NOTIFY, 0x3000, 0x1000),
        ];
        let mut at = 0x40;
        for (i, (kind, off, len)) in caps.iter().enumerate() {
            let next = if i + 1 < caps.len() { at + 0x14 } else { 0 };
            c[at / 4] = (*kind as u32) << 24 | 0x14 << 16 | (next as u32) << 8 | CAP_VENDOR;
            c[at / 4 + 1] = 4;
            c[at / 4 + 2] = *off;
            c[at / 4 + 3] = *len;
            c[at / 4 + 4] = 4; // notify_off_multiplier (read for NOTIFY only)
            at += 0x14;
        }
        c
    }

    fn walk(c: &[u32; 64], bar_size: u64) -> Result<Layout, &'static str> {
        find(&mut |r| c.get(r as usize / 4).copied(), bar_size)
    }

    #[test]
    fn finds_qemus_blocks() {
        let l = walk(&qemu(), 0x4000).unwrap();
        assert_eq!(l.bar, 4);
        assert_eq!(
            l.common,
            Block {
                offset: 0,
                len: 0x1000
            }
        );
        assert_eq!(l.isr.offset, 0x1000);
        assert_eq!(l.device.offset, 0x2000);
        assert_eq!(l.notify.offset, 0x3000);
        assert_eq!(l.notify_mult, 4);
    }

    #[test]
    fn refuses_blocks_past_the_bar() {
        assert!(walk(&qemu(), 0x3000).is_err());
    }

    #[test]
    fn refuses_a_missing_block_and_no_list() {
        let mut c = qemu();
        c[(0x40 + 0x14 * 2) / 4] &= !0xff; // the device block's capability is not virtio's
        assert!(walk(&c, 0x4000).is_err());
        let mut c = qemu();
        c[1] = 0;
        assert_eq!(walk(&c, 0x4000), Err("no PCI capability list"));
    }

    #[test]
    fn refuses_two_bars_and_a_short_common_block() {
        let mut c = qemu();
        c[(0x40 + 0x14) / 4 + 1] = 2; // the ISR block in BAR 2
        assert_eq!(walk(&c, 0x4000), Err("virtio blocks in more than one BAR"));
        let mut c = qemu();
        c[0x40 / 4 + 3] = 0x10;
        assert!(walk(&c, 0x4000).is_err());
    }

    #[test]
    fn a_looping_list_ends() {
        let mut c = qemu();
        c[(0x40 + 0x14 * 3) / 4] |= 0x40 << 8; // the last capability points back to the first
        assert!(walk(&c, 0x4000).is_ok());
        c[0x40 / 4] = c[0x40 / 4] & !0xff00 | 0x40 << 8; // the first points to itself
        assert!(walk(&c, 0x4000).is_err());
    }
}
