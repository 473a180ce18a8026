/* Memory calls: brk grows and shrinks (zeroed again after a shrink), anonymous mmap (private
 * and shared) with placement, MAP_FIXED over part of a mapping, MAP_FIXED_NOREPLACE, munmap
 * of a middle page (its neighbours stay), mprotect to none and back, mremap grow/shrink/move
 * keeping contents, madvise(DONTNEED) zeroing, and malloc of large blocks. Each check prints
 * one line; the expected lines come from running this on Linux. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fails;
static void check(const char *what, int ok) {
    printf("mem: %s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) fails++;
}

int main(void) {
    long pg = 4096;
    /* The raw call: musl's brk() wrapper always fails (it leaves the break to the kernel). */
    char *b0 = (char *)syscall(SYS_brk, 0);
    check("brk grows", syscall(SYS_brk, b0 + 3 * pg) == (long)(b0 + 3 * pg));
    memset(b0, 0x5a, 3 * pg);
    check("brk shrinks", syscall(SYS_brk, b0 + pg) == (long)(b0 + pg));
    check("brk regrows zeroed", syscall(SYS_brk, b0 + 3 * pg) == (long)(b0 + 3 * pg) && b0[2 * pg + 10] == 0 && b0[10] == 0x5a);
    check("brk below start refused", syscall(SYS_brk, 0x1000) == (long)(b0 + 3 * pg));

    char *a = mmap(0, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check("mmap anonymous", a != MAP_FAILED && a[0] == 0 && a[4 * pg - 1] == 0);
    memset(a, 1, 4 * pg);
    char *f = mmap(a + pg, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    check("MAP_FIXED replaces", f == a + pg && f[0] == 0 && a[0] == 1 && a[2 * pg] == 1);
    char *n = mmap(a, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    check("MAP_FIXED_NOREPLACE refuses", n == MAP_FAILED && errno == EEXIST);
    check("munmap middle", munmap(a + 2 * pg, pg) == 0 && a[3 * pg] == 1 && a[pg] == 0);
    check("mprotect on a hole fails", mprotect(a + 2 * pg, pg, PROT_READ) != 0 && errno == ENOMEM);
    check("mprotect none and back", mprotect(a, pg, PROT_NONE) == 0 &&
                                        mprotect(a, pg, PROT_READ | PROT_WRITE) == 0 && a[0] == 1);
    check("write(2) from a PROT_NONE page fails", mprotect(a, pg, PROT_NONE) == 0 &&
                                                       write(1, a, 1) == -1 && errno == EFAULT);
    check("bad munmap", munmap(a + 1, pg) == -1 && errno == EINVAL);

    char *s = mmap(0, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    check("mmap shared anonymous", s != MAP_FAILED && (s[5] = 9, s[5] == 9));

    char *r = mmap(0, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(r, 3, 2 * pg);
    char *r2 = mremap(r, 2 * pg, pg, 0);
    check("mremap shrink", r2 == r && r[0] == 3);
    /* Block the place after it, so growing must move. */
    char *blk = mmap(r + pg, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    check("mremap without MAYMOVE cannot grow", blk == r + pg && mremap(r, pg, 3 * pg, 0) == MAP_FAILED && errno == ENOMEM);
    char *r3 = mremap(r, pg, 3 * pg, MREMAP_MAYMOVE);
    check("mremap moves keeping contents", r3 != MAP_FAILED && r3 != r && r3[0] == 3 && r3[pg - 1] == 3 && r3[2 * pg] == 0);
    r3[3 * pg - 1] = 4;
    check("madvise DONTNEED zeroes", madvise(r3, 3 * pg, MADV_DONTNEED) == 0 && r3[0] == 0 && r3[3 * pg - 1] == 0);

    char *big = malloc(1 << 20);
    memset(big, 7, 1 << 20);
    char *big2 = realloc(big, 3 << 20);
    check("malloc and realloc large", big2 && big2[(1 << 20) - 1] == 7);
    free(big2);
    printf("mem: %s\n", fails ? "FAIL" : "all passed");
    return fails;
}
