//! IRQ lines: the legacy PICs' device interrupts, handed to user space as capabilities. An
//! interrupt masks its line and signals the bound notification; the driver acknowledges with
//! `irq_ack`, which unmasks it. When the last capability to a line goes, the line is masked and
//! unbound.
use crate::arch::{inb, outb};
use crate::cap;
use crate::error::SysResult;
use crate::notification;
use crate::obj::{Cap, Obj, Task};
use crate::state::kernel;
use sawmill_abi::{rights, Error};

pub fn pic_unmask(line: u8) {
    let (port, bit) = if line < 8 {
        (0x21, line)
    } else {
        (0xa1, line - 8)
    };
    outb(port, inb(port) & !(1 << bit));
}

pub fn pic_mask(line: u8) {
    let (port, bit) = if line < 8 {
        (0x21, line)
    } else {
        (0xa1, line - 8)
    };
    outb(port, inb(port) | (1 << bit));
}

/// Handles a device interrupt: mask the line, acknowledge it, signal the bound notification.
pub fn device_irq(line: u8) {
    pic_mask(line);
    if line >= 8 {
        outb(0xa0, 0x20);
    }
    outb(0x20, 0x20);
    let l = kernel().irqs[line as usize];
    if !l.notif.is_null() {
        notification::signal(l.notif, l.bits);
    }
}

/// `irq_get`: a capability for `line` from the IRQ-control capability `ctl`, into slot `dst`.
pub fn get(task: *mut Task, ctl: Cap, line: u64, dst: u64) -> SysResult {
    if ctl.obj != Obj::IrqControl {
        return Err(reject!(Error::WrongKind, "not the IRQ-control capability"));
    }
    if line >= 16 || line == 0 || line == 2 {
        return Err(reject!(
            Error::Invalid,
            "no such line (timer and cascade stay the kernel's)",
        ));
    }
    // A minted IRQ-control capability names the lines it may hand out (badge bit n).
    if ctl.badge != 0 && ctl.badge & (1 << line) == 0 {
        return Err(reject!(
            Error::NoRights,
            "line outside the IRQ-control capability's set",
        ));
    }
    cap::insert_root(task, dst, Cap::new(Obj::Irq(line as u8), rights::ALL, 0))?;
    Ok(())
}

/// `irq_bind`: the line signals `bits` on notification `n` from now on; unmasks it.
pub fn bind(line: u8, n: Cap, bits: u64) -> SysResult {
    let Obj::Notification(np) = n.obj else {
        return Err(reject!(Error::WrongKind, "not a notification"));
    };
    cap::hold(&n);
    let old = kernel().irqs[line as usize].notif;
    if !old.is_null() {
        cap::release(Cap::new(Obj::Notification(old), 0, 0));
    }
    let l = &mut kernel().irqs[line as usize];
    l.notif = np;
    l.bits = bits;
    pic_unmask(line);
    Ok(())
}

/// A capability to `line` went away: the last one masks and unbinds the line.
pub fn cap_gone(line: u8) {
    let l = &mut kernel().irqs[line as usize];
    l.caps -= 1;
    if l.caps == 0 {
        pic_mask(line);
        let n = core::mem::replace(&mut l.notif, core::ptr::null_mut());
        if !n.is_null() {
            cap::release(Cap::new(Obj::Notification(n), 0, 0));
        }
    }
}
