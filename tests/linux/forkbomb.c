/* A fork bomb, contained (scenario proc-forkbomb; never run it on the host). As the first
 * process it starts a bomber: every process forks as fast as it can, each child doing the same,
 * until its fork fails; a process whose fork fails with EAGAIN exits with 11 (any other error:
 * 12), and every process stops after 30 forks so the storm ends. The first process reaps
 * everything (orphans come to it), counts how the processes ended, then checks that the system
 * still works: a fork, an exec of itself, a wait. Prints `forkbomb: PASS ...` lines.
 *
 * Built with musl-gcc -static -O2. `forkbomb child N` exits with N (the exec check). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void bomber(void)
{
    for (int i = 0; i < 30; i++) {
        pid_t p = fork();
        if (p < 0)
            _exit(errno == EAGAIN ? 11 : 12);
        /* Parent and child both go on forking. */
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, 0, _IONBF, 0);
    if (argc == 3 && !strcmp(argv[1], "child"))
        return atoi(argv[2]);
    pid_t b = fork();
    if (b == 0)
        bomber();
    if (b < 0) {
        printf("forkbomb: FAIL the first fork: %s\n", strerror(errno));
        return 1;
    }
    long reaped = 0, again = 0, other = 0, clean = 0;
    int st;
    pid_t w;
    while ((w = wait(&st)) > 0) {
        reaped++;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 11)
            again++;
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            clean++;
        else
            other++;
    }
    int e = errno;
    printf("forkbomb: reaped %ld processes: %ld saw EAGAIN, %ld ended cleanly, %ld otherwise\n",
           reaped, again, clean, other);
    if (e != ECHILD)
        printf("forkbomb: FAIL wait ended with %s\n", strerror(e));
    if (again > 0 && other == 0)
        printf("forkbomb: PASS the bomb was stopped with EAGAIN\n");
    else
        printf("forkbomb: FAIL no EAGAIN, or processes ended otherwise\n");
    /* The system still works. */
    pid_t c = fork();
    if (c == 0) {
        execl("/proc/self/exe", "forkbomb", "child", "42", (char *)0);
        _exit(99);
    }
    if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 42)
        printf("forkbomb: PASS fork, exec and wait work afterwards\n");
    else
        printf("forkbomb: FAIL fork, exec or wait afterwards\n");
    return 0;
}
