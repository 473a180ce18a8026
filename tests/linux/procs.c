/* Processes, one line per check: fork, vfork, clone (vfork-like), wait4/waitpid/waitid, exit
 * statuses and death by signal, getppid and reparenting, process groups and sessions, execve
 * (of /proc/self/exe, failures that leave the caller intact, close-on-exec). Pids differ
 * between systems, so lines print relations (equal, non-zero), never pids. Run on the host,
 * its output is the expected output of the same binary in sawmill (tests/linux/programs.txt).
 * Built with musl-gcc -static -O2.
 *
 * Usage: procs               every check (makes and removes procs.* in the current directory)
 *        procs exit N        exits with status N (what the exec checks run)
 *        procs fds A B       prints whether descriptors A and B are open (after an exec) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *ename(int e)
{
    switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case ECHILD: return "ECHILD";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case ENOEXEC: return "ENOEXEC";
    default: return "other";
    }
}

static void status(const char *what, int st)
{
    if (WIFEXITED(st))
        printf("%s: exited %d\n", what, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("%s: killed by signal %d\n", what, WTERMSIG(st));
    else
        printf("%s: other status %#x\n", what, st);
}

static void nap(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&t, 0);
}

static int shared_counter = 1;
static char clone_stack[64 * 1024] __attribute__((aligned(16)));

static int clone_child(void *arg)
{
    (void)arg;
    return 6;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, 0, _IONBF, 0);
    if (argc == 3 && !strcmp(argv[1], "exit"))
        return atoi(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "fds")) {
        for (int i = 2; i < 4; i++) {
            int r = fcntl(atoi(argv[i]), F_GETFD);
            printf("after exec, descriptor %s: %s\n", i == 2 ? "with close-on-exec" : "without",
                   r < 0 ? ename(errno) : "open");
        }
        return 0;
    }

    int st = 0;
    pid_t me = getpid();

    /* fork: the child's exit status, its parent, its own copy of memory. */
    pid_t c = fork();
    if (c == 0) {
        shared_counter = 2;
        _exit(getppid() == me ? 7 : 1);
    }
    pid_t w = waitpid(c, &st, 0);
    printf("fork: child pid non-zero %d, waitpid returns it %d\n", c > 0, w == c);
    status("fork child (7 if its parent is us)", st);
    printf("fork: the child's write is not ours: %d\n", shared_counter);

    /* Only the low 8 bits of an exit status. */
    if ((c = fork()) == 0)
        _exit(256 + 3);
    waitpid(c, &st, 0);
    status("exit(259)", st);

    /* Death by signal. */
    if ((c = fork()) == 0) {
        *(volatile int *)0 = 1;
        _exit(0);
    }
    waitpid(c, &st, 0);
    status("null write", st);

    /* WNOHANG while the child runs, then a blocking wait; then no children. */
    if ((c = fork()) == 0) {
        nap(300);
        _exit(0);
    }
    w = waitpid(c, &st, WNOHANG);
    printf("WNOHANG on a running child: %d\n", w);
    w = waitpid(-1, &st, 0);
    printf("wait for any: the child %d\n", w == c);
    errno = 0;
    w = waitpid(-1, &st, 0);
    printf("wait without children: %d %s\n", w, ename(errno));
    errno = 0;
    w = waitpid(me + 100000, &st, WNOHANG);
    printf("wait for a stranger: %d %s\n", w, ename(errno));

    /* wait4 with rusage, waitid's siginfo. */
    if ((c = fork()) == 0)
        _exit(9);
    struct rusage ru;
    w = wait4(c, &st, 0, &ru);
    printf("wait4: the child %d\n", w == c);
    status("wait4", st);
    if ((c = fork()) == 0)
        _exit(11);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int r = waitid(P_PID, c, &si, WEXITED);
    printf("waitid: %d signo %d code %d status %d pid matches %d\n", r, si.si_signo, si.si_code,
           si.si_status, si.si_pid == c);
    errno = 0;
    r = waitid(P_ALL, 0, &si, 0);
    printf("waitid without WEXITED: %d %s\n", r, ename(errno));

    /* Reparenting: a grandchild whose parent ended gets another parent. */
    unlink("procs.orphan");
    if ((c = fork()) == 0) {
        pid_t a = getpid();
        if (fork() == 0) {
            for (int i = 0; i < 200 && getppid() == a; i++)
                nap(20);
            int fd = open("procs.orphan", O_CREAT | O_WRONLY | O_TRUNC, 0644);
            const char *m = getppid() != a ? "reparented\n" : "not reparented\n";
            write(fd, m, strlen(m));
            close(fd);
            _exit(0);
        }
        _exit(0);
    }
    waitpid(c, &st, 0);
    char buf[64] = { 0 };
    for (int i = 0; i < 300; i++) {
        int fd = open("procs.orphan", O_RDONLY);
        if (fd >= 0) {
            int n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = 0;
                break;
            }
        }
        nap(20);
    }
    printf("orphan: %s", buf[0] ? buf : "no answer\n");
    unlink("procs.orphan");

    /* Process groups and sessions. */
    if ((c = fork()) == 0) {
        int ok = setpgid(0, 0) == 0 && getpgrp() == getpid();
        errno = 0;
        int r2 = setsid();
        int e2 = errno;
        /* A group leader cannot start a session. */
        _exit(ok * 10 + (r2 < 0 && e2 == EPERM));
    }
    waitpid(c, &st, 0);
    status("setpgid(0,0) then setsid in the new group's leader (11)", st);
    if ((c = fork()) == 0) {
        pid_t s = setsid();
        _exit((s == getpid()) * 10 + (getsid(0) == getpid() && getpgid(0) == getpid()));
    }
    waitpid(c, &st, 0);
    status("setsid in a child (11)", st);
    if ((c = fork()) == 0) {
        nap(300);
        _exit(0);
    }
    r = setpgid(c, c);
    printf("setpgid of a child: %d, its group is itself %d\n", r, getpgid(c) == c);
    printf("our session unchanged: %d\n", getsid(0) == getsid(c));
    errno = 0;
    r = setpgid(me + 100000, 0);
    printf("setpgid of a stranger: %d %s\n", r, ename(errno));
    errno = 0;
    r = getpgid(me + 100000);
    printf("getpgid of a stranger: %d %s\n", r, ename(errno));
    waitpid(c, &st, 0);

    /* vfork, and the exec of /proc/self/exe from its child. */
    if ((c = vfork()) == 0)
        _exit(4);
    waitpid(c, &st, 0);
    status("vfork", st);
    if ((c = vfork()) == 0) {
        execl("/proc/self/exe", "procs", "exit", "5", (char *)0);
        _exit(99);
    }
    waitpid(c, &st, 0);
    status("vfork + exec /proc/self/exe exit 5", st);

    /* clone with CLONE_VM | CLONE_VFORK and its own stack (what musl's posix_spawn does). */
    c = clone(clone_child, clone_stack + sizeof clone_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, 0);
    w = waitpid(c, &st, 0);
    printf("clone vfork: waited %d\n", w == c && c > 0);
    status("clone vfork child", st);
    /* A thread without its signal handlers shared is refused by Linux too. */
    errno = 0;
    r = syscall(SYS_clone, CLONE_THREAD | SIGCHLD, 0, 0, 0, 0);
    printf("clone(CLONE_THREAD) alone: %d %s\n", r, ename(errno));
    if (r == 0)
        _exit(0);

    /* Failed execs leave the caller as it was. */
    errno = 0;
    r = execl("/nonexistent/prog", "x", (char *)0);
    printf("exec of a missing program: %d %s\n", r, ename(errno));
    errno = 0;
    r = execl("/", "x", (char *)0);
    printf("exec of a directory: %d %s\n", r, ename(errno));
    printf("still here: %d\n", getpid() == me);

    /* Descriptors across fork (one file, appended by both) and close-on-exec across exec. */
    int fd = open("procs.out", O_CREAT | O_WRONLY | O_TRUNC | O_APPEND, 0644);
    if ((c = fork()) == 0) {
        write(fd, "child\n", 6);
        _exit(0);
    }
    waitpid(c, &st, 0);
    write(fd, "parent\n", 7);
    close(fd);
    fd = open("procs.out", O_RDONLY);
    memset(buf, 0, sizeof buf);
    r = read(fd, buf, sizeof buf - 1);
    close(fd);
    printf("both wrote: %s", buf);
    /* One offset for both: without O_APPEND the parent writes after the child, and a read in
     * the child moves the parent's offset. */
    fd = open("procs.out", O_WRONLY | O_TRUNC);
    if ((c = fork()) == 0) {
        write(fd, "child2\n", 7);
        _exit(0);
    }
    waitpid(c, &st, 0);
    write(fd, "parent2\n", 8);
    close(fd);
    fd = open("procs.out", O_RDONLY);
    memset(buf, 0, sizeof buf);
    if ((c = fork()) == 0) {
        char x[3];
        _exit(read(fd, x, 3));
    }
    waitpid(c, &st, 0);
    printf("the child read %d, our offset is now %ld\n", WEXITSTATUS(st), (long)lseek(fd, 0, SEEK_CUR));
    r = read(fd, buf, sizeof buf - 1);
    close(fd);
    printf("shared offset: %s", buf);
    unlink("procs.out");
    int a = open("procs.c1", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    int b = open("procs.c2", O_CREAT | O_WRONLY, 0644);
    if ((c = fork()) == 0) {
        char as[16], bs[16];
        snprintf(as, sizeof as, "%d", a);
        snprintf(bs, sizeof bs, "%d", b);
        execl("/proc/self/exe", "procs", "fds", as, bs, (char *)0);
        _exit(99);
    }
    waitpid(c, &st, 0);
    status("exec with descriptors", st);
    unlink("procs.c1");
    unlink("procs.c2");
    return 0;
}
