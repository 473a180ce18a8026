//! The terminal's job control for a Linux process: the `ioctl`s `TIOCSCTTY`, `TIOCNOTTY`,
//! `TIOCGPGRP`, `TIOCSPGRP`, `TIOCGSID`, and the check before a terminal read (SIGTTIN) or a
//! change of its settings (SIGTTOU) from a background process group. The session and
//! foreground group are proc's (`servers/proc/src/tty.rs`); whether the caller ignores or
//! blocks the signal is the signals layer's, so the library tells proc. It touches only the
//! `proc` capability.

use sawmill_interfaces::rpc::Error as RpcError;
use sawmill_interfaces::{proc, ProcError};
use sawmill_linux::errno::{self, Errno};
use sawmill_linux::files::abi::{TIOCGPGRP, TIOCGSID, TIOCNOTTY, TIOCSCTTY, TIOCSPGRP};
use sawmill_linux::signal::{self as sig, ERESTARTSYS};

fn client() -> Result<proc::Client, Errno> {
    crate::guest::proc_cap()
        .map(proc::Client::new)
        .ok_or(errno::ENOTTY)
}

/// proc's answer as Linux's errno; `Background` means proc sent the caller's group the
/// signal: it is fetched now, so the call's return delivers it and restarts the call after.
fn tty_errno(e: RpcError<ProcError>) -> Errno {
    match e {
        RpcError::App(ProcError::NotTty) => errno::ENOTTY,
        RpcError::App(ProcError::NotPermitted) => errno::EPERM,
        RpcError::App(ProcError::NoSuchProcess) => errno::ESRCH,
        RpcError::App(ProcError::Io) => errno::EIO,
        RpcError::App(ProcError::Background) => {
            crate::signal_guest::fetch_now();
            ERESTARTSYS
        }
        _ => errno::EINVAL,
    }
}

/// Before a read (`signo` SIGTTIN) or a change of the settings (SIGTTOU) of the terminal.
pub fn check(signo: u32) -> Result<(), Errno> {
    let Ok(p) = client() else {
        return Ok(());
    };
    p.tty_check(signo, crate::signal_guest::ignores_or_blocks(signo))
        .map_err(tty_errno)
}

/// The job-control `ioctl` `req` with its integer argument: the value it reports.
pub fn job(req: u32, arg: u32) -> Result<u32, Errno> {
    let p = client()?;
    match req {
        TIOCSCTTY => p.tty_set_ctty(arg == 1).map(|_| 0),
        TIOCNOTTY => p.tty_drop_ctty().map(|_| 0),
        TIOCGPGRP => p.tty_get().map(|t| t.pgrp),
        TIOCGSID => p.tty_get().map(|t| t.sid),
        TIOCSPGRP => p
            .tty_set_pgrp(arg, crate::signal_guest::ignores_or_blocks(sig::SIGTTOU))
            .map(|_| 0),
        _ => return Err(errno::ENOTTY),
    }
    .map_err(tty_errno)
}
