//! Why a system call was refused: the ABI error code for `rax` and a reason for the trace of
//! rejected calls (`trace`). Handlers return [`SysResult`]; `syscall` turns it into `rax` in
//! one place. Lower layers return plain [`Error`]s, which `?` turns into a [`Rejected`] whose
//! reason is the error's own description.
use sawmill_abi::Error;

#[derive(Clone, Copy, Debug)]
pub struct Rejected {
    pub err: Error,
    /// Why, for the trace; empty when the error code says it all.
    pub why: &'static str,
}

impl From<Error> for Rejected {
    fn from(err: Error) -> Rejected {
        Rejected { err, why: "" }
    }
}

/// A refusal with its reason.
#[cold]
pub fn reject(err: Error, why: &'static str) -> Rejected {
    Rejected { err, why }
}

/// What a system-call handler returns: success (`rax` = 0; results are in other registers) or
/// why the call was refused.
pub type SysResult = Result<(), Rejected>;
