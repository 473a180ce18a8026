/* Hostile Linux system calls: COUNT calls (default 100,000) with random numbers and random
 * arguments from a seeded generator, then a summary, then proof that the process server and
 * the file system still answer. Built with musl-gcc -static -O2; run only in sawmill (the
 * harness's `@survive`), never on a host: random calls as root could harm the machine.
 *
 * Usage: hostile [COUNT [SEED]]
 *
 * Not called, because they would end the test itself or wait forever (the test is that the
 * system survives and the program gets errors, so the program must live to report):
 *   ending it:   exit, exit_group, kill/tkill/tgkill/rt_sigqueueinfo/rt_tgsigqueueinfo (a
 *                signal to itself), rt_sigreturn (jumps to a random frame), execve/execveat
 *                (would replace it), fork/vfork/clone/clone3 (children running random code
 *                are the next issue's), munmap/mremap/mprotect/madvise/brk/shmdt/arch_prctl/
 *                set_tid_address/rseq/prctl/rt_sigaction/sigaltstack/seccomp/personality/
 *                modify_ldt (would pull the program's own memory, TLS or handlers away:
 *                it would die of its own fault, not the system's), reboot.
 *   waiting:     pause, rt_sigsuspend, rt_sigtimedwait, nanosleep, clock_nanosleep,
 *                select/pselect6/poll/ppoll/epoll_wait/epoll_pwait/epoll_pwait2 (random or
 *                infinite timeouts), futex/futex_waitv (a matching word waits forever), wait4/
 *                waitid, flock, msgrcv/msgsnd/semop/semtimedop, io_getevents,
 *                the socket calls accept/accept4/recvfrom/recvmsg/recvmmsg/connect, and
 *                read/readv/pread64/preadv/preadv2 on the terminal (fd 0 is /dev/null instead).
 * Everything else, including numbers no Linux has, is fair game.
 *
 * Arguments are drawn from: 0, small numbers (file descriptors 0..63, never the one kept for
 * the report), -1, random 64-bit values, a pointer into a 1 MiB scratch buffer (random
 * content), a pointer to a valid path string, a kernel-half address, an unmapped address.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <errno.h>

#define REPORT_FD 900
#define SCRATCH (1 << 20)

static uint64_t state;

static uint64_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static char scratch[SCRATCH];
static const char *paths[] = {".", "/", "/tmp", "/tmp/hostile", "/etc/passwd", "/dev/null",
                              "x", "/nonexistent/y", "", "/proc/self/exe"};

static const long skipped[] = {
    SYS_exit, SYS_exit_group, SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo,
    SYS_rt_tgsigqueueinfo, SYS_rt_sigreturn, SYS_execve, SYS_execveat, SYS_fork, SYS_vfork,
    SYS_clone, 435 /* clone3 */, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_madvise, SYS_brk,
    SYS_shmdt, SYS_arch_prctl, SYS_set_tid_address, 334 /* rseq */, SYS_prctl,
    SYS_rt_sigaction, SYS_sigaltstack, SYS_seccomp, SYS_personality, SYS_modify_ldt,
    SYS_reboot, SYS_pause, SYS_rt_sigsuspend, SYS_rt_sigtimedwait, SYS_nanosleep,
    SYS_clock_nanosleep, SYS_select, SYS_pselect6, SYS_poll, SYS_ppoll, SYS_epoll_wait,
    SYS_epoll_pwait, 441 /* epoll_pwait2 */, SYS_futex, 449 /* futex_waitv */, SYS_wait4,
    SYS_waitid, SYS_flock, SYS_msgrcv, SYS_msgsnd, SYS_semop, SYS_semtimedop,
    SYS_io_getevents, SYS_accept, SYS_accept4, SYS_recvfrom, SYS_recvmsg, SYS_recvmmsg,
    SYS_connect, SYS_alarm, SYS_setitimer,
};

static int is_skipped(long nr)
{
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        if (skipped[i] == nr)
            return 1;
    return 0;
}

static long arg(void)
{
    switch (next() % 8) {
    case 0: return 0;
    case 1: {
        long fd = next() % 64;
        return fd == REPORT_FD ? fd + 1 : fd;
    }
    case 2: return -1;
    case 3: return (long)next();
    case 4: return (long)(scratch + next() % SCRATCH);
    case 5: return (long)paths[next() % (sizeof paths / sizeof paths[0])];
    case 6: return (long)(0xffff800000000000ull + (next() & 0xffffffffff));
    default: return (long)(0x7e0000000000ull + (next() & 0xfffffff000));
    }
}

static void say(const char *s)
{
    write(REPORT_FD, s, strlen(s));
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 100000;
    state = argc > 2 ? strtoull(argv[2], 0, 0) : 1;
    state = state * 0x9e3779b97f4a7c15ull | 1;
    /* The report goes to a private copy of the terminal; fd 0 becomes /dev/null so no read
     * waits for typing. */
    if (dup2(1, REPORT_FD) != REPORT_FD)
        return 2;
    int null = open("/dev/null", O_RDWR);
    if (null >= 0 && null != 0) {
        dup2(null, 0);
        close(null);
    } else if (null < 0) {
        close(0);
    }
    for (size_t i = 0; i < SCRATCH; i++)
        scratch[i] = (char)next();
    long ok = 0, failed = 0, enosys = 0, efault = 0, ebadf = 0, einval = 0;
    for (long i = 0; i < count; i++) {
        long nr;
        uint64_t pick = next() % 16;
        if (pick == 0)
            nr = (long)next(); /* numbers no Linux has, negative ones too */
        else if (pick == 1)
            nr = 400 + next() % 200;
        else
            nr = next() % 335;
        if (is_skipped(nr))
            continue;
        /* Reads from the terminal would wait for typing (fd 0 is /dev/null, but 1 and 2 are
         * still the terminal). */
        long a0 = arg();
        if ((nr == SYS_read || nr == SYS_readv || nr == SYS_pread64 || nr == SYS_preadv ||
             nr == SYS_preadv2) &&
            (a0 == 1 || a0 == 2))
            a0 = 0;
        long r = syscall(nr, a0, arg(), arg(), arg(), arg(), arg());
        if (r >= 0 || r < -4095) {
            ok++;
            continue;
        }
        failed++;
        switch (errno) {
        case ENOSYS: enosys++; break;
        case EFAULT: efault++; break;
        case EBADF: ebadf++; break;
        case EINVAL: einval++; break;
        }
    }
    char line[256];
    snprintf(line, sizeof line,
             "\nhostile: %ld calls: %ld succeeded, %ld failed (ENOSYS %ld, EFAULT %ld, EBADF %ld, "
             "EINVAL %ld)\n",
             ok + failed, ok, failed, enosys, efault, ebadf, einval);
    say(line);
    /* Still answering: the process server (getpid through the library), the file system. */
    long pid = syscall(SYS_getpid);
    int fd = open("/etc/passwd", O_RDONLY);
    char buf[5] = {0};
    long n = fd >= 0 ? read(fd, buf, 4) : -1;
    snprintf(line, sizeof line, "hostile: after: pid %ld, /etc/passwd starts \"%s\" (%ld)\n", pid,
             buf, n);
    say(line);
    say(n == 4 && !memcmp(buf, "root", 4) ? "hostile: survived\n" : "hostile: FAIL\n");
    return 0;
}
