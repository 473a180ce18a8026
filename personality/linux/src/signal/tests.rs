use super::*;

fn handler(h: u64, flags: u64, mask: u64) -> Action {
    Action {
        handler: h,
        flags: flags | SA_RESTORER,
        restorer: 0x40_1000,
        mask,
    }
}

#[test]
fn default_actions_follow_signal_7() {
    assert_eq!(default_action(SIGSEGV), Default::Core);
    assert_eq!(default_action(SIGABRT), Default::Core);
    assert_eq!(default_action(SIGTERM), Default::Terminate);
    assert_eq!(default_action(SIGALRM), Default::Terminate);
    assert_eq!(default_action(SIGCHLD), Default::Ignore);
    assert_eq!(default_action(SIGWINCH), Default::Ignore);
    assert_eq!(default_action(SIGTSTP), Default::Stop);
    assert_eq!(default_action(SIGCONT), Default::Continue);
    assert_eq!(default_action(40), Default::Terminate);
}

#[test]
fn sigaction_refuses_kill_stop_and_bad_numbers() {
    let mut s = Signals::new();
    let a = handler(0x40_2000, SA_SIGINFO, 0);
    assert_eq!(s.sigaction(SIGKILL, Some(a)), Err(errno::EINVAL));
    assert_eq!(s.sigaction(SIGSTOP, Some(a)), Err(errno::EINVAL));
    assert_eq!(s.sigaction(0, None), Err(errno::EINVAL));
    assert_eq!(s.sigaction(65, None), Err(errno::EINVAL));
    // Reading the action of SIGKILL is allowed.
    assert_eq!(s.sigaction(SIGKILL, None), Ok(Action::default()));
    assert_eq!(s.sigaction(SIGUSR1, Some(a)), Ok(Action::default()));
    assert_eq!(s.sigaction(SIGUSR1, None), Ok(a));
    // The mask of an action never holds SIGKILL/SIGSTOP.
    s.sigaction(SIGUSR2, Some(handler(1 << 20, 0, u64::MAX)))
        .unwrap();
    assert_eq!(s.action(SIGUSR2).mask, !UNBLOCKABLE);
}

#[test]
fn masks_never_block_kill_or_stop_and_how_is_checked() {
    let mut s = Signals::new();
    assert_eq!(s.sigprocmask(SIG_BLOCK, Some(u64::MAX)), Ok(0));
    assert_eq!(s.blocked, !UNBLOCKABLE);
    assert_eq!(
        s.sigprocmask(SIG_UNBLOCK, Some(bit(SIGINT))),
        Ok(!UNBLOCKABLE)
    );
    assert_eq!(s.blocked & bit(SIGINT), 0);
    assert!(s.sigprocmask(SIG_SETMASK, Some(bit(SIGTERM))).is_ok());
    assert_eq!(s.blocked, bit(SIGTERM));
    assert_eq!(s.sigprocmask(7, Some(0)), Err(errno::EINVAL));
    assert_eq!(s.sigprocmask(7, None), Ok(bit(SIGTERM)));
    assert_eq!(s.sigprocmask(SIG_BLOCK, None), Ok(bit(SIGTERM)));
}

#[test]
fn ignored_signals_are_dropped_unless_blocked() {
    let mut s = Signals::new();
    s.raise(Info::kernel(SIGCHLD));
    assert_eq!(s.pending(), 0);
    s.sigaction(SIGUSR1, Some(handler(SIG_IGN, 0, 0))).unwrap();
    s.raise(Info::kernel(SIGUSR1));
    assert_eq!(s.pending(), 0);
    s.sigprocmask(SIG_BLOCK, Some(bit(SIGUSR1))).unwrap();
    s.raise(Info::kernel(SIGUSR1));
    assert_eq!(s.pending(), bit(SIGUSR1));
    assert!(!s.deliverable());
    // Setting SIG_IGN again discards it only once it would be ignored: still blocked, kept.
    s.sigaction(SIGUSR1, Some(handler(SIG_IGN, 0, 0))).unwrap();
    assert_eq!(s.pending(), bit(SIGUSR1));
    s.sigprocmask(SIG_UNBLOCK, Some(bit(SIGUSR1))).unwrap();
    assert_eq!(s.take().map(|t| t.1), Some(Disposition::Ignore));
}

#[test]
fn take_prefers_faults_then_low_numbers_and_keeps_the_first_info() {
    let mut s = Signals::new();
    s.raise(Info::from_process(SIGTERM, SI_USER, 7, 0));
    s.raise(Info::from_process(SIGUSR1, SI_USER, 8, 0));
    s.raise(Info::from_process(SIGUSR1, SI_USER, 9, 0));
    s.force(Info::fault(SIGSEGV, SEGV_MAPERR, 0x10));
    let (i, d) = s.take().unwrap();
    assert_eq!(
        (i.signo, d),
        (SIGSEGV, Disposition::Terminate { core: true })
    );
    let (i, _) = s.take().unwrap();
    assert_eq!((i.signo, i.word0), (SIGUSR1, 8));
    let (i, d) = s.take().unwrap();
    assert_eq!(
        (i.signo, d),
        (SIGTERM, Disposition::Terminate { core: false })
    );
    assert!(s.take().is_none());
}

#[test]
fn forced_faults_override_blocking_and_ignoring() {
    let mut s = Signals::new();
    s.sigaction(SIGFPE, Some(handler(SIG_IGN, 0, 0))).unwrap();
    s.sigprocmask(SIG_BLOCK, Some(bit(SIGFPE))).unwrap();
    s.force(Info::fault(SIGFPE, FPE_INTDIV, 0x40_0000));
    assert_eq!(s.blocked & bit(SIGFPE), 0);
    assert_eq!(
        s.take().map(|t| t.1),
        Some(Disposition::Terminate { core: true })
    );
}

#[test]
fn handler_masks_nodefer_and_resethand() {
    let mut s = Signals::new();
    let a = handler(0x40_2000, SA_RESETHAND | SA_SIGINFO, bit(SIGINT));
    s.sigaction(SIGUSR1, Some(a)).unwrap();
    s.raise(Info::kernel(SIGUSR1));
    let (_, d) = s.take().unwrap();
    assert_eq!(d, Disposition::Handle(a));
    assert_eq!(s.action(SIGUSR1).handler, SIG_DFL);
    let old = s.enter_handler(SIGUSR1, &a);
    assert_eq!(old, 0);
    assert_eq!(s.blocked, bit(SIGINT) | bit(SIGUSR1));
    let b = handler(0x40_2000, SA_NODEFER, 0);
    s.blocked = 0;
    s.enter_handler(SIGUSR2, &b);
    assert_eq!(s.blocked, 0);
    // rt_sigsuspend's saved mask is what the handler gives back.
    s.saved_mask = Some(bit(SIGTERM));
    s.blocked = 0;
    assert_eq!(s.enter_handler(SIGUSR2, &a), bit(SIGTERM));
    assert_eq!(s.saved_mask, None);
}

#[test]
fn sigaltstack_rules() {
    let mut s = Signals::new();
    let old = s.sigaltstack(None, 0x7000_0000).unwrap();
    assert_eq!(AltStack::parse(&old), (0, SS_DISABLE, 0));
    assert_eq!(
        s.sigaltstack(Some((0x1000, 0, 1024)), 0x7000_0000),
        Err(errno::ENOMEM)
    );
    assert_eq!(
        s.sigaltstack(Some((0x1000, 7, 8192)), 0x7000_0000),
        Err(errno::EINVAL)
    );
    s.sigaltstack(Some((0x10_0000, 0, 0x4000)), 0x7000_0000)
        .unwrap();
    // On it: reported SS_ONSTACK, and it cannot change.
    let on = s.sigaltstack(None, 0x10_2000).unwrap();
    assert_eq!(AltStack::parse(&on), (0x10_0000, SS_ONSTACK, 0x4000));
    assert_eq!(
        s.sigaltstack(Some((0, SS_DISABLE, 0)), 0x10_2000),
        Err(errno::EPERM)
    );
    s.sigaltstack(Some((0, SS_DISABLE, 0)), 0x7000_0000)
        .unwrap();
    assert_eq!(AltStack::parse(&s.altstack.to_bytes(0)), (0, SS_DISABLE, 0));
}

fn regs() -> Regs {
    let mut r = [0u64; 18];
    for (i, v) in r.iter_mut().enumerate() {
        *v = 0x1000 + i as u64;
    }
    r[RSP] = 0x7fff_0000_0f38;
    r[RIP] = 0x40_1234;
    r[RFLAGS] = 0x246 | 0x400;
    r
}

#[test]
fn frame_layout_is_linuxs() {
    let r = regs();
    let a = handler(0x40_5000, SA_SIGINFO, 0);
    let info = Info::from_process(SIGUSR1, SI_USER, 42, 1000);
    let trap = Trap {
        err: 4,
        trapno: 14,
        cr2: 0xdead,
    };
    let f = build_frame(&r, &trap, &info, &a, 0x55, &AltStack::default()).unwrap();
    // Below the red zone, the FPU area 64-byte aligned, the handler entered as after a call.
    assert!(f.fpstate + FPSTATE_SIZE <= r[RSP] - 128);
    assert_eq!(f.fpstate % 64, 0);
    assert_eq!((f.addr + 8) % 16, 0);
    assert!(f.addr + FRAME_SIZE <= f.fpstate);
    let w = |at: usize| u64::from_le_bytes(f.bytes[at..at + 8].try_into().unwrap());
    assert_eq!(w(0), a.restorer);
    // glibc's ucontext_t: gregs at 40 (REG_R8 = 0 .. REG_CR2 = 22), fpregs at 224, the mask
    // at 296; siginfo after the ucontext.
    let greg = |i: usize| w(8 + 40 + i * 8);
    assert_eq!(greg(0), r[R8]);
    assert_eq!(greg(8), r[RDI]);
    assert_eq!(greg(13), r[RAX]);
    assert_eq!(greg(15), r[RSP]);
    assert_eq!(greg(16), r[RIP]);
    assert_eq!(greg(17), r[RFLAGS]);
    assert_eq!(greg(19), 4);
    assert_eq!(greg(20), 14);
    assert_eq!(greg(21), 0x55);
    assert_eq!(greg(22), 0xdead);
    assert_eq!(w(8 + 224), f.fpstate);
    assert_eq!(w(8 + 296), 0x55);
    let info_at = INFO_OFFSET as usize;
    assert_eq!(&f.bytes[info_at..info_at + 4], &SIGUSR1.to_le_bytes());
    assert_eq!(w(info_at + 16), 42 | 1000 << 32);
    // The handler's registers.
    assert_eq!(f.regs[RIP], a.handler);
    assert_eq!(f.regs[RDI], SIGUSR1 as u64);
    assert_eq!(f.regs[RSI], f.addr + INFO_OFFSET);
    assert_eq!(f.regs[RDX], f.addr + UC_OFFSET);
    assert_eq!(f.regs[RFLAGS] & 0x400, 0);
    // rt_sigreturn gives everything back.
    let uc: [u8; UCONTEXT_LEN] = f.bytes[8..8 + UCONTEXT_LEN].try_into().unwrap();
    let back = restore(&uc, &f.regs);
    assert_eq!(back.regs, r);
    assert_eq!(back.mask, 0x55);
    assert_eq!(back.fpstate, f.fpstate);
}

#[test]
fn frame_goes_on_the_alternate_stack_once() {
    let r = regs();
    let a = handler(0x40_5000, SA_ONSTACK, 0);
    let alt = AltStack {
        sp: 0x20_0000,
        size: 0x4000,
        flags: 0,
    };
    let f = build_frame(&r, &Trap::default(), &Info::kernel(SIGSEGV), &a, 0, &alt).unwrap();
    assert!(f.addr >= alt.sp && f.fpstate + FPSTATE_SIZE <= alt.sp + alt.size);
    let (_, flags, _) = AltStack::parse(&f.bytes[24..48].try_into().unwrap());
    assert_eq!(flags, 0);
    // A nested signal while on it stays on it, below the red zone.
    let mut r2 = r;
    r2[RSP] = f.addr;
    let g = build_frame(&r2, &Trap::default(), &Info::kernel(SIGSEGV), &a, 0, &alt).unwrap();
    assert!(g.fpstate + FPSTATE_SIZE <= f.addr - 128);
    let (_, flags, _) = AltStack::parse(&g.bytes[24..48].try_into().unwrap());
    assert_eq!(flags, SS_ONSTACK);
    // Without SA_ONSTACK the normal stack.
    let b = handler(0x40_5000, 0, 0);
    let h = build_frame(&r, &Trap::default(), &Info::kernel(SIGSEGV), &b, 0, &alt).unwrap();
    assert!(h.addr > 0x7fff_0000_0000);
    // A stack pointer near 0 does not wrap.
    let mut low = r;
    low[RSP] = 100;
    assert!(build_frame(&low, &Trap::default(), &Info::kernel(1), &b, 0, &alt).is_none());
}

#[test]
fn sigreturn_keeps_privileged_flags() {
    let r = regs();
    let f = build_frame(
        &r,
        &Trap::default(),
        &Info::kernel(SIGALRM),
        &handler(0x40_5000, 0, 0),
        0,
        &AltStack::default(),
    )
    .unwrap();
    let mut uc: [u8; UCONTEXT_LEN] = f.bytes[8..8 + UCONTEXT_LEN].try_into().unwrap();
    // IOPL and IF bits asked for are not taken.
    uc[40 + 136..40 + 144].copy_from_slice(&(0x3000u64 | 0x200 | 0x1).to_le_bytes());
    let now = {
        let mut n = f.regs;
        n[RFLAGS] = 0x202;
        n
    };
    assert_eq!(restore(&uc, &now).regs[RFLAGS], 0x203);
}

#[test]
fn fpstate_sanitised_for_fxrstor() {
    let mut fx = [0u8; 512];
    fx[24..28].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
    sanitize_fpstate(&mut fx, 0xffbf);
    assert_eq!(u32::from_le_bytes(fx[24..28].try_into().unwrap()), 0xffbf);
}

#[test]
fn itimers_fire_reload_and_report() {
    let mut t = Itimer::default();
    assert_eq!(t.set(1000, 5000, 0), (0, 0));
    assert_eq!(t.get(2000), (4000, 0));
    assert!(!t.fire(5999));
    assert!(t.fire(6000));
    assert!(!t.fire(7000));
    assert_eq!(t.get(7000), (0, 0));
    t.set(0, 100_000, 50_000);
    assert!(t.fire(100_000));
    assert_eq!(t.deadline, 150_000);
    // Missed expiries merge.
    assert!(t.fire(420_000));
    assert_eq!(t.deadline, 450_000);
    assert_eq!(t.set(420_000, 0, 50_000), (30_000, 50_000));
    assert_eq!(t.get(0), (0, 0));
    assert_eq!(alarm_seconds(0), 0);
    assert_eq!(alarm_seconds(1), 1);
    assert_eq!(alarm_seconds(2_400_000_000), 2);
    assert_eq!(alarm_seconds(2_600_000_000), 3);
    assert_eq!(kill_status(SIGSEGV, true), 0x8b);
}

#[test]
fn exec_keeps_ignored_and_mask_fork_keeps_everything_but_pending() {
    let mut s = Signals::new();
    s.sigaction(SIGINT, Some(handler(SIG_IGN, 0, 0))).unwrap();
    s.sigaction(SIGUSR1, Some(handler(0x40_2000, SA_SIGINFO, bit(SIGTERM))))
        .unwrap();
    s.sigprocmask(SIG_BLOCK, Some(bit(SIGHUP))).unwrap();
    s.sigaltstack(Some((0x10_0000, 0, 0x4000)), 0).unwrap();
    s.raise(Info::kernel(SIGHUP));
    let (ign, blk) = s.exec_state();
    assert_eq!((ign, blk), (bit(SIGINT), bit(SIGHUP)));
    let e = Signals::after_exec(ign | bit(SIGKILL), blk | bit(SIGSTOP));
    assert_eq!(e.action(SIGINT).handler, SIG_IGN);
    assert_eq!(e.action(SIGUSR1).handler, SIG_DFL);
    assert_eq!(e.action(SIGKILL).handler, SIG_DFL);
    assert_eq!(e.blocked, bit(SIGHUP));
    let b = s.encode_for_fork();
    assert_eq!(b.len(), FORK_STATE_LEN);
    let f = Signals::decode_fork(&b).unwrap();
    assert_eq!(f.action(SIGUSR1), s.action(SIGUSR1));
    assert_eq!(f.blocked, s.blocked);
    assert_eq!(f.altstack, s.altstack);
    assert_eq!(f.pending(), 0);
    assert!(Signals::decode_fork(&b[1..]).is_none());
}

#[test]
fn stop_and_continue_cancel_each_other() {
    let mut s = Signals::new();
    s.raise(Info::kernel(SIGTSTP));
    s.raise(Info::kernel(SIGTTIN));
    assert_eq!(s.pending(), bit(SIGTSTP) | bit(SIGTTIN));
    s.raise(Info::kernel(SIGCONT));
    assert_eq!(s.pending(), bit(SIGCONT));
    s.raise(Info::kernel(SIGSTOP));
    assert_eq!(s.pending(), bit(SIGSTOP));
    assert_eq!(s.take().map(|(_, d)| d), Some(Disposition::Stop));
    // Ignored, SIGCONT still discards the stops.
    s.sigaction(
        SIGCONT,
        Some(Action {
            handler: SIG_IGN,
            ..Action::default()
        }),
    )
    .unwrap();
    s.raise(Info::kernel(SIGTTOU));
    s.raise(Info::kernel(SIGCONT));
    assert_eq!(s.pending(), 0);
}

#[test]
fn nocldstop_drops_stop_and_continue_reports() {
    let mut s = Signals::new();
    s.sigaction(
        SIGCHLD,
        Some(Action {
            handler: 0x1000,
            flags: SA_NOCLDSTOP,
            ..Action::default()
        }),
    )
    .unwrap();
    let mut i = Info::kernel(SIGCHLD);
    i.code = CLD_STOPPED;
    s.raise(i);
    i.code = CLD_CONTINUED;
    s.raise(i);
    assert_eq!(s.pending(), 0);
    i.code = 1; // CLD_EXITED
    s.raise(i);
    assert_eq!(s.pending(), bit(SIGCHLD));
}

#[test]
fn a_signal_to_one_thread_stays_with_it_and_the_mask_is_per_thread() {
    let mut s = Signals::new();
    s.sigaction(SIGUSR1, Some(handler(0x40_2000, 0, 0)))
        .unwrap();
    // Thread A (in `s`) blocks SIGUSR1; thread B (`b`) does not.
    s.blocked = bit(SIGUSR1);
    let mut b = ThreadSignals::new(0);
    s.raise_other(&mut b, Info::from_process(SIGUSR1, SI_TKILL, 1, 0));
    assert!(!s.deliverable());
    assert!(b.deliverable());
    // A process-directed one goes to a thread that lets it through.
    s.raise(Info::from_process(SIGUSR1, SI_USER, 1, 0));
    assert!(!s.deliverable());
    assert!(s.deliverable_to(&b));
    // B takes its turn: its own signal first, then the process's.
    s.swap_thread(&mut b);
    assert_eq!(s.blocked, 0);
    assert_eq!(b.blocked, bit(SIGUSR1));
    let (i, _) = s.take().unwrap();
    assert_eq!(i.code, SI_TKILL);
    let (i, _) = s.take().unwrap();
    assert_eq!(i.code, SI_USER);
    assert!(s.take().is_none());
    // A's part is as it left it.
    s.swap_thread(&mut b);
    assert_eq!(s.blocked, bit(SIGUSR1));
    assert!(!b.deliverable());
}

#[test]
fn a_thread_signal_that_is_ignored_is_dropped() {
    let mut s = Signals::new();
    let mut b = ThreadSignals::new(0);
    s.raise_other(&mut b, Info::from_process(SIGCHLD, SI_TKILL, 1, 0));
    assert!(!b.deliverable());
    s.raise_thread(Info::from_process(SIGWINCH, SI_TKILL, 1, 0));
    assert!(!s.deliverable());
}
