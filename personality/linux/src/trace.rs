//! The system-call tracer's lines, as strace prints them: `name(arg, ...) = result`, with an
//! error shown as `-1 ENAME`. Arguments are shown as numbers (hex for what looks like an
//! address), as many as the call takes.

use crate::errno::Errno;
use crate::nr;
use alloc::format;
use alloc::string::String;

/// How many arguments a call takes (6 for those not listed).
pub fn arg_count(n: u64) -> usize {
    match n {
        nr::GETPID
        | nr::GETPPID
        | nr::GETTID
        | nr::GETUID
        | nr::GETEUID
        | nr::GETGID
        | nr::GETEGID
        | nr::SCHED_YIELD => 0,
        nr::BRK
        | nr::CLOSE
        | nr::EXIT
        | nr::EXIT_GROUP
        | nr::UNAME
        | nr::SET_TID_ADDRESS
        | nr::TIME
        | nr::SYSINFO => 1,
        nr::ARCH_PRCTL
        | nr::MUNMAP
        | nr::CLOCK_GETTIME
        | nr::CLOCK_GETRES
        | nr::GETTIMEOFDAY
        | nr::NANOSLEEP
        | nr::SET_ROBUST_LIST
        | nr::GETRLIMIT
        | nr::GETGROUPS => 2,
        nr::WRITE
        | nr::READ
        | nr::WRITEV
        | nr::READV
        | nr::MPROTECT
        | nr::MADVISE
        | nr::GETRANDOM
        | nr::IOCTL
        | nr::LSEEK
        | nr::OPEN => 3,
        nr::RSEQ | nr::PRLIMIT64 | nr::CLOCK_NANOSLEEP => 4,
        nr::MREMAP | nr::PRCTL => 5,
        _ => 6,
    }
}

fn arg(v: u64) -> String {
    let s = v as i64;
    if (-4096..=4096).contains(&s) {
        format!("{}", s)
    } else {
        format!("{:#x}", v)
    }
}

/// One line (without the newline).
pub fn line(n: u64, args: &[u64; 6], result: Result<u64, Errno>) -> String {
    let mut s = String::new();
    match nr::name(n) {
        Some(name) => s.push_str(name),
        None => s.push_str(&format!("syscall_{}", n)),
    }
    s.push('(');
    for (i, &a) in args.iter().take(arg_count(n)).enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&arg(a));
    }
    s.push_str(") = ");
    match result {
        Ok(v) => s.push_str(&arg(v)),
        Err(e) => s.push_str(&format!("-1 {}", e.name())),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno;

    #[test]
    fn lines() {
        assert_eq!(
            line(nr::WRITE, &[1, 0x40_2000, 13, 9, 9, 9], Ok(13)),
            "write(1, 0x402000, 13) = 13"
        );
        assert_eq!(line(nr::GETPID, &[0; 6], Ok(1)), "getpid() = 1");
        assert_eq!(
            line(nr::BRK, &[0, 0, 0, 0, 0, 0], Ok(0x40_6000)),
            "brk(0) = 0x406000"
        );
        assert_eq!(
            line(
                nr::UNAME,
                &[0xffff_ffff_ffff_fff0, 0, 0, 0, 0, 0],
                Err(errno::EFAULT)
            ),
            "uname(-16) = -1 EFAULT"
        );
        assert!(line(9999, &[0; 6], Err(errno::ENOSYS)).starts_with("syscall_9999(0, 0"));
    }
}
