/* Linux signals, one line per check. Run on the host, its output is the expected output of
 * the same binary in sawmill (tests/linux/programs.txt). Built with musl-gcc -static -O2.
 * Values that differ between systems by design (pids, addresses) are printed as comparisons.
 *
 * Usage: signals          all checks
 *        signals term     raise(SIGTERM) with the default action: dies by SIGTERM
 *        signals abort    abort(): dies by SIGABRT (a core signal)
 *        signals segv     a write to address 0 without a handler: dies by SIGSEGV
 *        signals alarm    alarm(1) then spin in system calls: dies by SIGALRM
 *        signals spin     alarm(1) then spin without system calls: dies by SIGALRM
 *        signals ignore   SIG_IGN for SIGTERM, SIGCHLD's default: both survive a raise
 *        signals exec     what execve keeps of the signal state (runs itself again) */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *ename(int e)
{
    switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EFAULT: return "EFAULT";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    default: return "E?";
    }
}

static long check(const char *name, long r)
{
    int e = r < 0 ? errno : 0;
    printf("%-34s = %ld %s\n", name, r < 0 ? -1L : r, ename(e));
    return r;
}

#define SYS(name, ...) check(name, syscall(__VA_ARGS__))

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void on(int sig, void (*h)(int, siginfo_t *, void *), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, 0) != 0)
        printf("sigaction %d failed\n", sig);
}

static void dfl(int sig)
{
    signal(sig, SIG_DFL);
}

/* ---- SA_SIGINFO fields ---- */

static volatile int got, depth, maxdepth, runs, order[8], norder;
static siginfo_t last;

static void record(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    got = sig;
    last = *si;
    if (norder < 8)
        order[norder++] = sig;
}

static void info_fields(void)
{
    on(SIGUSR1, record, 0);
    got = 0;
    kill(getpid(), SIGUSR1);
    printf("kill self: got %d signo %d code %d pid_ok %d uid_ok %d\n", got, last.si_signo,
           last.si_code, last.si_pid == getpid(), last.si_uid == getuid());
    got = 0;
    raise(SIGUSR1);
    printf("raise: got %d code %d (SI_TKILL %d) pid_ok %d\n", got, last.si_code, SI_TKILL,
           last.si_pid == getpid());
    got = 0;
    syscall(SYS_tgkill, getpid(), getpid(), SIGUSR1);
    printf("tgkill: got %d code %d\n", got, last.si_code);
    /* To the process group (this process leads its own, on the host through the harness's
     * setsid): in sawmill through proc and back by the wake notification. */
    got = 0;
    kill(0, SIGUSR1);
    printf("kill group 0: got %d code %d pid_ok %d\n", got, last.si_code,
           last.si_pid == getpid());
    dfl(SIGUSR1);
}

/* ---- masks, pending, order of delivery ---- */

static void masks(void)
{
    sigset_t s, old, pend;
    on(SIGUSR1, record, 0);
    on(SIGUSR2, record, 0);
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGUSR2);
    sigaddset(&s, SIGKILL);
    sigaddset(&s, SIGSTOP);
    sigprocmask(SIG_BLOCK, &s, &old);
    sigprocmask(SIG_BLOCK, 0, &s);
    printf("blocked: usr1 %d usr2 %d kill %d stop %d\n", sigismember(&s, SIGUSR1),
           sigismember(&s, SIGUSR2), sigismember(&s, SIGKILL), sigismember(&s, SIGSTOP));
    got = 0;
    norder = 0;
    kill(getpid(), SIGUSR2);
    kill(getpid(), SIGUSR1);
    kill(getpid(), SIGUSR1);
    sigpending(&pend);
    printf("pending while blocked: usr1 %d usr2 %d term %d, got %d\n",
           sigismember(&pend, SIGUSR1), sigismember(&pend, SIGUSR2),
           sigismember(&pend, SIGTERM), got);
    sigprocmask(SIG_SETMASK, &old, 0);
    printf("after unblock: %d handlers ran, first %d then %d\n", norder, order[0], order[1]);
    sigpending(&pend);
    printf("pending after: usr1 %d usr2 %d\n", sigismember(&pend, SIGUSR1),
           sigismember(&pend, SIGUSR2));
    dfl(SIGUSR1);
    dfl(SIGUSR2);
    /* Errors. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    SYS("rt_sigaction(SIGKILL, ign)", SYS_rt_sigaction, SIGKILL, &sa, 0, 8);
    SYS("rt_sigaction(SIGSTOP, ign)", SYS_rt_sigaction, SIGSTOP, &sa, 0, 8);
    SYS("rt_sigaction(0)", SYS_rt_sigaction, 0, 0, 0, 8);
    SYS("rt_sigaction(65)", SYS_rt_sigaction, 65, 0, 0, 8);
    SYS("rt_sigaction(size 4)", SYS_rt_sigaction, SIGUSR1, 0, 0, 4);
    SYS("rt_sigaction(bad act)", SYS_rt_sigaction, SIGUSR1, (void *)8, 0, 8);
    SYS("rt_sigaction(SIGKILL, query)", SYS_rt_sigaction, SIGKILL, 0, &sa, 8);
    SYS("rt_sigprocmask(how 7)", SYS_rt_sigprocmask, 7, &s, 0, 8);
    SYS("rt_sigprocmask(how 7, no set)", SYS_rt_sigprocmask, 7, 0, &s, 8);
    SYS("rt_sigprocmask(size 16)", SYS_rt_sigprocmask, SIG_BLOCK, 0, &s, 16);
    SYS("rt_sigprocmask(bad set)", SYS_rt_sigprocmask, SIG_BLOCK, (void *)8, 0, 8);
    SYS("rt_sigpending(size 9)", SYS_rt_sigpending, &s, 9);
    SYS("kill(self, 0)", SYS_kill, getpid(), 0);
    SYS("kill(self, 65)", SYS_kill, getpid(), 65);
    SYS("kill(no such pid, 0)", SYS_kill, 0x3fffffff, 0);
    SYS("tgkill(0, 1, 0)", SYS_tgkill, 0, 1, 0);
    SYS("tkill(-1, 0)", SYS_tkill, -1, 0);
}

/* ---- sigsuspend ---- */

static void suspend(void)
{
    sigset_t s, old, wait, after;
    on(SIGUSR1, record, 0);
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_BLOCK, &s, &old);
    got = 0;
    kill(getpid(), SIGUSR1);
    sigemptyset(&wait);
    int r = sigsuspend(&wait);
    int e = errno;
    sigprocmask(SIG_BLOCK, 0, &after);
    printf("sigsuspend = %d %s, got %d, usr1 blocked again %d\n", r, ename(e), got,
           sigismember(&after, SIGUSR1));
    sigprocmask(SIG_SETMASK, &old, 0);
    dfl(SIGUSR1);
}

/* ---- SA_RESETHAND, SA_NODEFER, nesting ---- */

static void reenter(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    depth++;
    if (depth > maxdepth)
        maxdepth = depth;
    /* Only the first run sends again: with the signal deferred, the second run comes after
     * the first returns (depth 1 again). */
    if (runs++ == 0)
        kill(getpid(), sig);
    depth--;
}

static void outer(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    order[norder++] = 1;
    kill(getpid(), SIGUSR2);
    order[norder++] = 3;
}

static void inner(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    order[norder++] = 2;
}

static void flags(void)
{
    struct sigaction q;
    on(SIGUSR1, record, SA_RESETHAND);
    got = 0;
    kill(getpid(), SIGUSR1);
    sigaction(SIGUSR1, 0, &q);
    printf("SA_RESETHAND: got %d, now default %d\n", got, q.sa_handler == SIG_DFL);

    depth = maxdepth = runs = 0;
    on(SIGUSR1, reenter, 0);
    kill(getpid(), SIGUSR1);
    printf("deferred: runs %d, max depth %d\n", runs, maxdepth);
    depth = maxdepth = runs = 0;
    on(SIGUSR1, reenter, SA_NODEFER);
    kill(getpid(), SIGUSR1);
    printf("SA_NODEFER: runs %d, max depth %d\n", runs, maxdepth);

    norder = 0;
    on(SIGUSR1, outer, 0);
    on(SIGUSR2, inner, 0);
    kill(getpid(), SIGUSR1);
    printf("nested: %d %d %d\n", order[0], order[1], order[2]);
    dfl(SIGUSR1);
    dfl(SIGUSR2);
}

/* ---- sigaltstack ---- */

static char altmem[65536];
static volatile int on_alt, alt_flags;

static void alt_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    stack_t cur;
    char here;
    on_alt = &here >= altmem && &here < altmem + sizeof altmem;
    sigaltstack(0, &cur);
    alt_flags = cur.ss_flags;
    ucontext_t *u = uc;
    printf("uc_stack: sp_ok %d size %ld flags %d\n", u->uc_stack.ss_sp == altmem,
           (long)u->uc_stack.ss_size, u->uc_stack.ss_flags);
}

static void altstack(void)
{
    stack_t ss, old;
    ss.ss_sp = altmem;
    ss.ss_size = sizeof altmem;
    ss.ss_flags = 0;
    check("sigaltstack(set)", sigaltstack(&ss, &old));
    printf("old: flags %d size %ld\n", old.ss_flags, (long)old.ss_size);
    on(SIGUSR1, alt_handler, SA_ONSTACK);
    kill(getpid(), SIGUSR1);
    printf("handler on the alternate stack %d, ss_flags there %d\n", on_alt, alt_flags);
    on(SIGUSR1, alt_handler, 0);
    kill(getpid(), SIGUSR1);
    printf("without SA_ONSTACK: on it %d\n", on_alt);
    ss.ss_size = 1024;
    check("sigaltstack(too small)", sigaltstack(&ss, 0));
    ss.ss_flags = 99;
    ss.ss_size = sizeof altmem;
    check("sigaltstack(bad flags)", sigaltstack(&ss, 0));
    ss.ss_flags = SS_DISABLE;
    check("sigaltstack(disable)", sigaltstack(&ss, 0));
    sigaltstack(0, &old);
    printf("after disable: flags %d\n", old.ss_flags);
    dfl(SIGUSR1);
}

/* ---- faults: SIGSEGV, SIGFPE, SIGILL, SIGTRAP ---- */

static sigjmp_buf jb;
static volatile void *fault_addr;
static volatile int fault_code, fault_sig;

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    fault_sig = sig;
    fault_code = si->si_code;
    fault_addr = si->si_addr;
    siglongjmp(jb, 1);
}

extern char ud2_here[], int3_after[];

/* Deep recursion that defeats tail calls: each level keeps a page of its own. */
static long recurse(long n)
{
    volatile char pad[4096];
    if (n > (1L << 30)) /* never: the stack ends long before */
        return n;
    pad[0] = (char)n;
    pad[4095] = (char)n;
    return recurse(n + 1) + pad[0] + pad[4095];
}

static void faults(void)
{
    on(SIGSEGV, fault_handler, 0);
    on(SIGFPE, fault_handler, 0);
    on(SIGILL, fault_handler, 0);
    on(SIGTRAP, fault_handler, 0);
    if (!sigsetjmp(jb, 1)) {
        *(volatile int *)0 = 1;
        printf("no fault?\n");
    }
    printf("null write: sig %d code %d addr %p\n", fault_sig, fault_code, fault_addr);
    char *p = mmap(0, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!sigsetjmp(jb, 1)) {
        p[10] = 1;
        printf("no fault?\n");
    }
    printf("read-only write: sig %d code %d addr_ok %d\n", fault_sig, fault_code,
           fault_addr == p + 10);
    /* The mask after siglongjmp(.., 1) is the one at sigsetjmp: SIGSEGV not blocked. */
    sigset_t s;
    sigprocmask(SIG_BLOCK, 0, &s);
    printf("segv blocked after longjmp %d\n", sigismember(&s, SIGSEGV));
    if (!sigsetjmp(jb, 1)) {
        volatile int zero = 0;
        volatile int x = 7 / zero;
        (void)x;
        printf("no fault?\n");
    }
    printf("divide by zero: sig %d code %d\n", fault_sig, fault_code);
    if (!sigsetjmp(jb, 1)) {
        __asm__ volatile(".globl ud2_here\nud2_here: ud2");
    }
    printf("ud2: sig %d code %d addr_ok %d\n", fault_sig, fault_code,
           fault_addr == (void *)ud2_here);
    if (!sigsetjmp(jb, 1)) {
        __asm__ volatile("int3\n.globl int3_after\nint3_after: nop");
    }
    printf("int3: sig %d code %d\n", fault_sig, fault_code);
    /* A stack overflow: the handler can only run on the alternate stack. */
    static char ovf_stack[65536];
    stack_t ss = {.ss_sp = ovf_stack, .ss_size = sizeof ovf_stack, .ss_flags = 0};
    sigaltstack(&ss, 0);
    on(SIGSEGV, fault_handler, SA_ONSTACK);
    if (!sigsetjmp(jb, 1))
        printf("recursed %ld\n", recurse(1));
    printf("stack overflow: sig %d code %d, handled on the alternate stack\n", fault_sig,
           fault_code);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, 0);
    dfl(SIGSEGV);
    dfl(SIGFPE);
    dfl(SIGILL);
    dfl(SIGTRAP);
}

/* ---- the FPU/SSE state across a handler ---- */

static void clobber(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    unsigned mx = 0x7f80; /* round toward zero, all masked */
    __asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n"
                     "movdqa %%xmm0, %%xmm1\n movdqa %%xmm0, %%xmm2\n movdqa %%xmm0, %%xmm3\n"
                     "movdqa %%xmm0, %%xmm4\n movdqa %%xmm0, %%xmm5\n movdqa %%xmm0, %%xmm6\n"
                     "movdqa %%xmm0, %%xmm7\n movdqa %%xmm0, %%xmm8\n movdqa %%xmm0, %%xmm9\n"
                     "movdqa %%xmm0, %%xmm10\n movdqa %%xmm0, %%xmm11\n"
                     "movdqa %%xmm0, %%xmm12\n movdqa %%xmm0, %%xmm13\n"
                     "movdqa %%xmm0, %%xmm14\n movdqa %%xmm0, %%xmm15\n"
                     "ldmxcsr %0" ::"m"(mx)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

static void sse(void)
{
    static uint64_t in[32] __attribute__((aligned(16))), out[32] __attribute__((aligned(16)));
    unsigned mx_before = 0x1f80 | (1 << 13) /* round down */, mx_after = 0;
    for (int i = 0; i < 32; i++)
        in[i] = 0x0101010101010101ull * (i + 1);
    on(SIGUSR1, clobber, 0);
    long pid = getpid();
    /* Load every xmm register and MXCSR, make the kill system call (the signal is delivered
     * on its return), read them back: nothing in between the compiler could touch. */
    __asm__ volatile("ldmxcsr %3\n"
                     "movdqa 0(%0), %%xmm0\n movdqa 16(%0), %%xmm1\n movdqa 32(%0), %%xmm2\n"
                     "movdqa 48(%0), %%xmm3\n movdqa 64(%0), %%xmm4\n movdqa 80(%0), %%xmm5\n"
                     "movdqa 96(%0), %%xmm6\n movdqa 112(%0), %%xmm7\n"
                     "movdqa 128(%0), %%xmm8\n movdqa 144(%0), %%xmm9\n"
                     "movdqa 160(%0), %%xmm10\n movdqa 176(%0), %%xmm11\n"
                     "movdqa 192(%0), %%xmm12\n movdqa 208(%0), %%xmm13\n"
                     "movdqa 224(%0), %%xmm14\n movdqa 240(%0), %%xmm15\n"
                     "mov $62, %%eax\n mov %2, %%rdi\n mov $10, %%esi\n syscall\n"
                     "movdqa %%xmm0, 0(%1)\n movdqa %%xmm1, 16(%1)\n movdqa %%xmm2, 32(%1)\n"
                     "movdqa %%xmm3, 48(%1)\n movdqa %%xmm4, 64(%1)\n movdqa %%xmm5, 80(%1)\n"
                     "movdqa %%xmm6, 96(%1)\n movdqa %%xmm7, 112(%1)\n"
                     "movdqa %%xmm8, 128(%1)\n movdqa %%xmm9, 144(%1)\n"
                     "movdqa %%xmm10, 160(%1)\n movdqa %%xmm11, 176(%1)\n"
                     "movdqa %%xmm12, 192(%1)\n movdqa %%xmm13, 208(%1)\n"
                     "movdqa %%xmm14, 224(%1)\n movdqa %%xmm15, 240(%1)\n"
                     "stmxcsr %4\n"
                     "mov $0x1f80, %%eax\n push %%rax\n ldmxcsr (%%rsp)\n pop %%rax\n"
                     :
                     : "r"(in), "r"(out), "r"(pid), "m"(mx_before), "m"(mx_after)
                     : "rax", "rcx", "rdx", "rsi", "rdi", "r11", "memory", "xmm0", "xmm1",
                       "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                       "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    int same = memcmp(in, out, sizeof in) == 0;
    printf("xmm0..15 kept across a handler that clobbers them: %d; mxcsr kept: %d\n", same,
           mx_after == mx_before);
    dfl(SIGUSR1);
}

/* ---- timers: alarm + pause, nanosleep EINTR, setitimer ---- */

static volatile int alarms;

static void on_alarm(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    alarms++;
    last = *si;
}

static void timers(void)
{
    on(SIGALRM, on_alarm, 0);
    printf("alarm(5) = %u\n", alarm(5));
    printf("alarm(1) = %u\n", alarm(1));
    double t0 = now();
    alarms = 0;
    int r = pause();
    int e = errno;
    double dt = now() - t0;
    printf("pause = %d %s after alarm(1): alarms %d code %d, took about 1 s: %d\n", r,
           ename(e), alarms, last.si_code, dt > 0.8 && dt < 3.0);
    printf("alarm(0) = %u\n", alarm(0));

    struct timespec full = {0, 300000000};
    t0 = now();
    r = nanosleep(&full, 0);
    dt = now() - t0;
    printf("nanosleep(0.3 s) = %d, took 0.3 to 1 s: %d\n", r, dt >= 0.3 && dt < 1.0);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 200000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, 0);
    struct timespec after;
    clock_gettime(CLOCK_MONOTONIC, &after);
    printf("clock_nanosleep(abs) = %d, woke after the deadline: %d\n", r,
           after.tv_sec > until.tv_sec ||
               (after.tv_sec == until.tv_sec && after.tv_nsec >= until.tv_nsec));

    struct itimerval it = {{0, 0}, {0, 200000}}, cur;
    setitimer(ITIMER_REAL, &it, 0);
    struct timespec req = {5, 0}, rem = {0, 0};
    t0 = now();
    r = nanosleep(&req, &rem);
    e = errno;
    dt = now() - t0;
    printf("nanosleep(5 s) = %d %s after 0.2 s: rem %ld s, short: %d\n", r, ename(e),
           (long)rem.tv_sec, dt < 1.5);

    struct itimerval per = {{0, 50000}, {0, 50000}};
    check("setitimer(50 ms periodic)", setitimer(ITIMER_REAL, &per, 0));
    getitimer(ITIMER_REAL, &cur);
    printf("getitimer: interval %ld us, value within it %d\n", (long)cur.it_interval.tv_usec,
           cur.it_value.tv_usec > 0 && cur.it_value.tv_usec <= 50000);
    alarms = 0;
    while (alarms < 3)
        pause();
    printf("periodic: %d alarms\n", alarms);
    memset(&per, 0, sizeof per);
    setitimer(ITIMER_REAL, &per, &cur);
    printf("old interval %ld us\n", (long)cur.it_interval.tv_usec);
    /* A loop without a single system call is interrupted too. */
    alarms = 0;
    struct itimerval once = {{0, 0}, {0, 100000}};
    setitimer(ITIMER_REAL, &once, 0);
    while (alarms == 0)
        ;
    printf("a loop without system calls got SIGALRM: code %d\n", last.si_code);
    SYS("setitimer(which 5)", SYS_setitimer, 5, &per, 0);
    per.it_value.tv_usec = 2000000;
    SYS("setitimer(usec 2000000)", SYS_setitimer, ITIMER_REAL, &per, 0);
    struct timespec bad = {0, 1000000000};
    SYS("nanosleep(nsec 1e9)", SYS_nanosleep, &bad, 0);
    SYS("nanosleep(bad pointer)", SYS_nanosleep, (void *)8, 0);
    dfl(SIGALRM);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, 0, _IOLBF, 0);
    if (argc > 1 && !strcmp(argv[1], "term")) {
        printf("raising SIGTERM\n");
        raise(SIGTERM);
        printf("survived?\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "abort")) {
        printf("abort\n");
        abort();
    }
    if (argc > 1 && !strcmp(argv[1], "segv")) {
        printf("writing to 0\n");
        *(volatile int *)0 = 1;
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "alarm")) {
        printf("alarm(1), then getppid in a loop\n");
        alarm(1);
        for (;;)
            getppid();
    }
    if (argc > 1 && !strcmp(argv[1], "spin")) {
        printf("alarm(1), then a loop without system calls\n");
        alarm(1);
        for (;;)
            __asm__ volatile("");
    }
    if (argc > 1 && !strcmp(argv[1], "exec")) {
        /* What execve keeps: ignored stays ignored, caught returns to the default, the mask
         * stays. */
        sigset_t s;
        signal(SIGINT, SIG_IGN);
        on(SIGUSR1, record, 0);
        sigemptyset(&s);
        sigaddset(&s, SIGUSR2);
        sigprocmask(SIG_BLOCK, &s, 0);
        printf("exec: SIGINT ignored, SIGUSR1 caught, SIGUSR2 blocked\n");
        execl(argv[0], argv[0], "after-exec", (char *)0);
        printf("execl failed\n");
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "after-exec")) {
        struct sigaction q;
        sigset_t s;
        sigaction(SIGINT, 0, &q);
        printf("after exec: SIGINT ignored %d", q.sa_handler == SIG_IGN);
        sigaction(SIGUSR1, 0, &q);
        printf(", SIGUSR1 default %d", q.sa_handler == SIG_DFL);
        sigprocmask(SIG_BLOCK, 0, &s);
        printf(", SIGUSR2 blocked %d, SIGINT blocked %d\n", sigismember(&s, SIGUSR2),
               sigismember(&s, SIGINT));
        raise(SIGINT);
        printf("survived an ignored SIGINT\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "ignore")) {
        signal(SIGTERM, SIG_IGN);
        raise(SIGTERM);
        raise(SIGCHLD);
        raise(SIGWINCH);
        printf("survived SIGTERM ignored, SIGCHLD and SIGWINCH by default\n");
        return 3;
    }
    info_fields();
    masks();
    suspend();
    flags();
    altstack();
    faults();
    sse();
    timers();
    printf("done\n");
    return 0;
}
