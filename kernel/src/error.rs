//! Why a system call was refused: the ABI error code for `rax` and a reason for the trace of
//! rejected calls (`trace`). Handlers return [`SysResult`]; `syscall` turns it into `rax` in
//! one place. A refusal is a reference to a constant ([`reject!`] makes one at the call site),
//! so the result fits one register and the error path costs no more than a bare error code.
//! Lower layers return plain [`Error`]s, which `?` turns into the refusal whose reason is the
//! error's own description.
use sawmill_abi::Error;

#[derive(Debug)]
pub struct Rejected {
    pub err: Error,
    /// Why, for the trace; empty when the error code says it all.
    pub why: &'static str,
}

/// A refusal: `Error`, reason.
pub type Rejection = &'static Rejected;

/// A [`Rejection`] with its reason, as a constant: `reject!(Error::Invalid, "why")`.
macro_rules! reject {
    ($err:expr, $why:expr $(,)?) => {
        &$crate::error::Rejected {
            err: $err,
            why: $why,
        }
    };
}

const fn bare(err: Error) -> Rejected {
    Rejected { err, why: "" }
}

/// The refusal for each error code without a reason of its own, by code.
static BARE: [Rejected; 13] = [
    bare(Error::Ok),
    bare(Error::NoSys),
    bare(Error::BadCap),
    bare(Error::WrongKind),
    bare(Error::NoRights),
    bare(Error::Invalid),
    bare(Error::SlotFull),
    bare(Error::NoMemory),
    bare(Error::WouldBlock),
    bare(Error::PeerGone),
    bare(Error::Fault),
    bare(Error::Busy),
    bare(Error::NoCaller),
];

impl From<Error> for Rejection {
    fn from(err: Error) -> Rejection {
        BARE.get(err as usize)
            .unwrap_or(&BARE[Error::Invalid as usize])
    }
}

/// What a system-call handler returns: success (`rax` = 0; results are in other registers) or
/// why the call was refused.
pub type SysResult = Result<(), Rejection>;
