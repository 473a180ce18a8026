/* 200 concurrent processes (issue 14): the parent forks N children (default 200) that each block
 * reading a pipe, so all of them exist at once; when every child has said it is ready (one byte
 * each on a second pipe), the parent closes the write end, every child reads end of file and
 * exits with its index modulo 100, and the parent reaps them all and checks each status.
 * Compared with the host (tests/linux/programs.txt: `@prog many`).
 *
 * Built with musl-gcc -static -O2. `many N` forks N children instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHILDREN 1000

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    if (n < 1 || n > MAX_CHILDREN) {
        printf("many: bad count %d\n", n);
        return 2;
    }
    static pid_t pids[MAX_CHILDREN];
    int gate[2], ready[2];
    if (pipe(gate) || pipe(ready)) {
        printf("many: pipe: %s\n", strerror(errno));
        return 1;
    }
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) {
            printf("many: fork %d failed: %s\n", i, strerror(errno));
            close(gate[1]);
            while (wait(0) > 0)
                ;
            return 1;
        }
        if (p == 0) {
            close(gate[1]);
            close(ready[0]);
            char c = 'r';
            if (write(ready[1], &c, 1) != 1)
                _exit(101);
            close(ready[1]);
            /* Blocks until the parent closes the gate: end of file. */
            ssize_t r = read(gate[0], &c, 1);
            _exit(r == 0 ? i % 100 : r < 0 ? 150 + errno % 100 : 103);
        }
        pids[i] = p;
    }
    close(gate[0]);
    close(ready[1]);
    int got = 0;
    char buf[64];
    ssize_t r;
    while (got < n && (r = read(ready[0], buf, sizeof buf)) > 0)
        got += (int)r;
    printf("many: %d children forked, %d ready and waiting at once\n", n, got);
    close(gate[1]);
    int bad = 0, reaped = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i]) {
            printf("many: waitpid %d: %s\n", i, strerror(errno));
            bad++;
            continue;
        }
        reaped++;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != i % 100) {
            if (bad < 5)
                printf("many: child %d: status %#x\n", i, st);
            bad++;
        }
    }
    printf("many: %d reaped, %d with a wrong status\n", reaped, bad);
    if (wait(0) != -1 || errno != ECHILD)
        bad++;
    printf("many: %s\n", bad ? "FAIL" : "all done");
    return bad != 0;
}
