/* A write after mprotect(PROT_READ) faults: the process dies by SIGSEGV. */
#include <stdio.h>
#include <sys/mman.h>

int main(void) {
    char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p[0] = 1;
    mprotect(p, 4096, PROT_READ);
    printf("segv: writing to a read-only page\n");
    fflush(stdout);
    ((volatile char *)p)[0] = 2;
    printf("segv: FAIL the write went through\n");
    return 0;
}
