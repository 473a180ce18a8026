//! Linux's process calls as the library decides them, host-tested: which `clone` flag sets it
//! serves (fork and vfork, not threads), the options `wait4` and `waitid` accept and what they
//! write (`wstatus`, the `siginfo_t` of `waitid`).

use crate::errno::{self, Errno};

pub const CLONE_VM: u64 = 0x100;
pub const CLONE_FS: u64 = 0x200;
pub const CLONE_FILES: u64 = 0x400;
pub const CLONE_SIGHAND: u64 = 0x800;
pub const CLONE_VFORK: u64 = 0x4000;
pub const CLONE_PARENT: u64 = 0x8000;
pub const CLONE_THREAD: u64 = 0x10000;
pub const CLONE_SETTLS: u64 = 0x80000;
pub const CLONE_PARENT_SETTID: u64 = 0x10_0000;
pub const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
pub const CLONE_CHILD_SETTID: u64 = 0x100_0000;
/// The low byte: the signal the parent gets when the child ends.
pub const CSIGNAL: u64 = 0xff;
/// Flags that change nothing for a process that is not a thread (or that are ignored by Linux).
const HARMLESS: u64 = CSIGNAL
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_SETTID
    | CLONE_CHILD_CLEARTID
    | 0x40_0000 // CLONE_DETACHED
    | 0x80_0000 // CLONE_UNTRACED
    | 0x4_0000; // CLONE_SYSVSEM

/// What a `clone` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloneKind {
    /// A new process with a copy of the caller's memory (`fork`).
    Fork,
    /// `vfork` (and `posix_spawn`'s CLONE_VM|CLONE_VFORK): a new process; the parent waits
    /// until it runs a new program or ends. With `CLONE_VM` the child borrows the parent's
    /// memory (its writes are the parent's; docs/proc.md), without it a copy.
    Vfork,
    /// A thread of the caller's process (`CLONE_THREAD` with the memory, files, working
    /// directory and signal actions shared: what glibc's and musl's `pthread_create` ask).
    Thread,
}

/// What a thread must share with its process (a thread with a descriptor table or working
/// directory of its own is not served).
pub const THREAD_SHARES: u64 = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD;

/// The kind of `clone(flags, ...)`; `EINVAL` for a thread that does not share all of
/// [`THREAD_SHARES`], for `CLONE_VM` without `CLONE_VFORK` or `CLONE_THREAD`, and for the rest.
pub fn clone_kind(flags: u64) -> Result<CloneKind, Errno> {
    if flags & CLONE_THREAD != 0 {
        let rest = flags & !(HARMLESS | THREAD_SHARES | CLONE_SETTLS);
        return if flags & THREAD_SHARES == THREAD_SHARES && rest == 0 {
            Ok(CloneKind::Thread)
        } else {
            Err(errno::EINVAL)
        };
    }
    let vfork = flags & (CLONE_VM | CLONE_VFORK) == CLONE_VM | CLONE_VFORK;
    let rest = flags & !HARMLESS;
    if vfork && rest & !(CLONE_VM | CLONE_VFORK) == 0 {
        return Ok(CloneKind::Vfork);
    }
    if rest == 0 {
        return Ok(CloneKind::Fork);
    }
    if flags & CLONE_VFORK != 0 && rest & !CLONE_VFORK == 0 {
        return Ok(CloneKind::Vfork);
    }
    Err(errno::EINVAL)
}

pub const WNOHANG: u64 = 1;
pub const WUNTRACED: u64 = 2;
pub const WSTOPPED: u64 = 2;
pub const WEXITED: u64 = 4;
pub const WCONTINUED: u64 = 8;
pub const WNOWAIT: u64 = 0x0100_0000;
const WNOTHREAD: u64 = 0x2000_0000;
const WALL: u64 = 0x4000_0000;
const WCLONE: u64 = 0x8000_0000;

/// `wait4`'s options: EINVAL for unknown bits.
pub fn wait4_options(o: u64) -> Result<(), Errno> {
    if o & !(WNOHANG | WUNTRACED | WCONTINUED | WNOTHREAD | WALL | WCLONE) != 0 {
        return Err(errno::EINVAL);
    }
    Ok(())
}

pub const P_ALL: u64 = 0;
pub const P_PID: u64 = 1;
pub const P_PGID: u64 = 2;

/// `waitid(idtype, id, _, options)` as `wait4`'s pid argument; EINVAL for what Linux refuses
/// (unknown bits, no state asked for, an unknown id type). `WNOWAIT` is refused too (it would
/// need a wait that does not reap).
pub fn waitid_target(idtype: u64, id: u64, options: u64) -> Result<i32, Errno> {
    if options & !(WNOHANG | WSTOPPED | WEXITED | WCONTINUED | WNOWAIT | WNOTHREAD | WALL | WCLONE)
        != 0
        || options & (WEXITED | WSTOPPED | WCONTINUED) == 0
    {
        return Err(errno::EINVAL);
    }
    if options & WNOWAIT != 0 {
        return Err(errno::EINVAL);
    }
    match idtype {
        P_ALL => Ok(-1),
        P_PID if id as i32 > 0 => Ok(id as i32),
        // 0: the caller's group (Linux 5.4 and later).
        P_PGID if (id as i32) >= 0 => Ok(-(id as i32)),
        _ => Err(errno::EINVAL),
    }
}

use crate::signal::SIGCHLD;
const CLD_EXITED: i32 = 1;
const CLD_KILLED: i32 = 2;
const CLD_STOPPED: i32 = 5;
const CLD_CONTINUED: i32 = 6;
const SIGCONT: u32 = 18;

/// The `siginfo_t` (128 bytes) `waitid` writes for child `pid` that ended with `wstatus`, or
/// all zeros (`pid` 0: WNOHANG and nothing ended).
pub fn waitid_info(pid: u32, wstatus: u32, uid: u32) -> [u8; 128] {
    let mut b = [0u8; 128];
    if pid == 0 {
        return b;
    }
    let (code, status) = if wstatus == 0xffff {
        (CLD_CONTINUED, SIGCONT as i32)
    } else if wstatus & 0xff == 0x7f {
        (CLD_STOPPED, ((wstatus >> 8) & 0xff) as i32)
    } else if wstatus & 0x7f == 0 {
        (CLD_EXITED, ((wstatus >> 8) & 0xff) as i32)
    } else {
        (CLD_KILLED, (wstatus & 0x7f) as i32)
    };
    b[0..4].copy_from_slice(&SIGCHLD.to_le_bytes());
    b[8..12].copy_from_slice(&code.to_le_bytes());
    b[16..20].copy_from_slice(&pid.to_le_bytes());
    b[20..24].copy_from_slice(&uid.to_le_bytes());
    b[24..28].copy_from_slice(&status.to_le_bytes());
    b
}

/// What `reboot(2)` asks of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reboot {
    /// `LINUX_REBOOT_CMD_CAD_ON`/`_OFF`: only a setting (what Ctrl-Alt-Del does); nothing happens.
    CtrlAltDel,
    Halt,
    PowerOff,
    Restart,
}

/// `reboot(magic, magic2, cmd, arg)`'s checks, as Linux makes them: both magic numbers
/// (`EINVAL`), then the command (`EINVAL` for commands sawmill has no machine for: `RESTART2`,
/// `KEXEC`, `SW_SUSPEND`). The caller's privilege (`EPERM`) is checked first, by the caller.
pub fn reboot_args(magic: u64, magic2: u64, cmd: u64) -> Result<Reboot, Errno> {
    const MAGIC1: u32 = 0xfee1_dead;
    const MAGIC2: [u32; 4] = [672_274_793, 85_072_278, 369_367_448, 537_993_216];
    if magic as u32 != MAGIC1 || !MAGIC2.contains(&(magic2 as u32)) {
        return Err(crate::errno::EINVAL);
    }
    match cmd as u32 {
        0x89ab_cdef | 0 => Ok(Reboot::CtrlAltDel),
        0xcdef_0123 => Ok(Reboot::Halt),
        0x4321_fedc => Ok(Reboot::PowerOff),
        0x0123_4567 => Ok(Reboot::Restart),
        _ => Err(crate::errno::EINVAL),
    }
}

/// Busybox's `poweroff`, `halt` and `reboot` (without `-f`) ask init by a signal: SIGUSR2,
/// SIGUSR1, SIGTERM. sawmill's pid 1 is the first program (a shell), not an init that catches
/// them, so when one of them would end pid 1 by its default action and came from another
/// process, the library stops the machine as that init would: the `reboot(2)` command to use.
pub fn init_power_command(pid: u64, info: &crate::signal::Info) -> Option<u64> {
    use crate::signal::{SIGTERM, SIGUSR1, SIGUSR2, SI_USER};
    let sender = info.word0 as u32;
    if pid != 1 || info.code != SI_USER || sender == 1 {
        return None;
    }
    match info.signo {
        SIGUSR1 => Some(0xcdef_0123),
        SIGUSR2 => Some(0x4321_fedc),
        SIGTERM => Some(0x0123_4567),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_init_power_signals_from_others_stop_the_machine() {
        use crate::signal::{Info, SIGHUP, SIGTERM, SIGUSR2, SI_USER};
        let from = |signo, pid| Info::from_process(signo, SI_USER, pid, 0);
        assert_eq!(init_power_command(1, &from(SIGUSR2, 7)), Some(0x4321_fedc));
        assert_eq!(init_power_command(1, &from(SIGTERM, 7)), Some(0x0123_4567));
        // Sent by itself (`kill -TERM $$`), to another pid, or another signal: the default.
        assert_eq!(init_power_command(1, &from(SIGTERM, 1)), None);
        assert_eq!(init_power_command(2, &from(SIGUSR2, 7)), None);
        assert_eq!(init_power_command(1, &from(SIGHUP, 7)), None);
    }

    #[test]
    fn reboot_checks_magic_and_command() {
        let m = 0xfee1_dead;
        assert_eq!(
            reboot_args(m, 672_274_793, 0x4321_fedc),
            Ok(Reboot::PowerOff)
        );
        assert_eq!(
            reboot_args(m, 537_993_216, 0x0123_4567),
            Ok(Reboot::Restart)
        );
        assert_eq!(reboot_args(m, 85_072_278, 0xcdef_0123), Ok(Reboot::Halt));
        assert_eq!(reboot_args(m, 369_367_448, 0), Ok(Reboot::CtrlAltDel));
        assert_eq!(reboot_args(m, 1, 0x4321_fedc), Err(crate::errno::EINVAL));
        assert_eq!(
            reboot_args(0, 672_274_793, 0x4321_fedc),
            Err(crate::errno::EINVAL)
        );
        assert_eq!(
            reboot_args(m, 672_274_793, 0xa1b2_c3d4),
            Err(crate::errno::EINVAL)
        );
    }

    #[test]
    fn clone_flag_sets() {
        // glibc's fork, musl's fork, plain SIGCHLD.
        let glibc_fork = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | 17;
        assert_eq!(clone_kind(glibc_fork), Ok(CloneKind::Fork));
        assert_eq!(clone_kind(17), Ok(CloneKind::Fork));
        assert_eq!(clone_kind(0), Ok(CloneKind::Fork));
        // musl's posix_spawn and glibc's vfork through clone.
        assert_eq!(
            clone_kind(CLONE_VM | CLONE_VFORK | 17),
            Ok(CloneKind::Vfork)
        );
        assert_eq!(clone_kind(CLONE_VFORK | 17), Ok(CloneKind::Vfork));
        // Threads.
        let pthread = CLONE_VM
            | CLONE_FS
            | CLONE_FILES
            | CLONE_SIGHAND
            | CLONE_THREAD
            | 0x40000
            | CLONE_SETTLS
            | CLONE_PARENT_SETTID
            | CLONE_CHILD_CLEARTID;
        assert_eq!(clone_kind(pthread), Ok(CloneKind::Thread));
        // A thread must share the descriptor table and working directory.
        assert_eq!(clone_kind(pthread & !CLONE_FILES), Err(errno::EINVAL));
        assert_eq!(clone_kind(CLONE_THREAD | CLONE_SIGHAND), Err(errno::EINVAL));
        assert_eq!(clone_kind(CLONE_VM | 17), Err(errno::EINVAL));
        assert_eq!(clone_kind(CLONE_PARENT | 17), Err(errno::EINVAL));
    }

    #[test]
    fn wait_options() {
        assert_eq!(wait4_options(WNOHANG | WUNTRACED | WCONTINUED), Ok(()));
        assert_eq!(wait4_options(0x10), Err(errno::EINVAL));
        assert_eq!(waitid_target(P_ALL, 0, WEXITED), Ok(-1));
        assert_eq!(waitid_target(P_PID, 5, WEXITED | WNOHANG), Ok(5));
        assert_eq!(waitid_target(P_PGID, 7, WEXITED), Ok(-7));
        assert_eq!(waitid_target(P_PGID, 0, WEXITED), Ok(0));
        assert_eq!(waitid_target(P_PID, 0, WEXITED), Err(errno::EINVAL));
        assert_eq!(waitid_target(P_ALL, 0, WNOHANG), Err(errno::EINVAL));
        assert_eq!(waitid_target(9, 0, WEXITED), Err(errno::EINVAL));
    }

    #[test]
    fn waitid_siginfo() {
        let b = waitid_info(42, 3 << 8, 0);
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 17);
        assert_eq!(i32::from_le_bytes(b[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[16..20].try_into().unwrap()), 42);
        assert_eq!(i32::from_le_bytes(b[24..28].try_into().unwrap()), 3);
        let k = waitid_info(42, 9, 0);
        assert_eq!(i32::from_le_bytes(k[8..12].try_into().unwrap()), 2);
        assert_eq!(i32::from_le_bytes(k[24..28].try_into().unwrap()), 9);
        assert_eq!(waitid_info(0, 0, 0), [0u8; 128]);
        // A stop (WIFSTOPPED, SIGTSTP) and a continue (WIFCONTINUED).
        let s = waitid_info(42, 0x147f, 0);
        assert_eq!(
            i32::from_le_bytes(s[8..12].try_into().unwrap()),
            CLD_STOPPED
        );
        assert_eq!(i32::from_le_bytes(s[24..28].try_into().unwrap()), 20);
        let c = waitid_info(42, 0xffff, 0);
        assert_eq!(
            i32::from_le_bytes(c[8..12].try_into().unwrap()),
            CLD_CONTINUED
        );
        assert_eq!(i32::from_le_bytes(c[24..28].try_into().unwrap()), 18);
    }
}
