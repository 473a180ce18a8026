/* Bad pointers to system calls give EFAULT and the program keeps running. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static int fails;
static void check(const char *what, long r) {
    int ok = r == -1 && errno == EFAULT;
    printf("efault: %s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) fails++;
}

int main(void) {
    void *bad = (void *)0x10;
    void *kernel = (void *)0xffff800000001000UL;
    void *lib = (void *)0x60001000UL; /* another process's idea of free space */
    check("write from NULL+16", syscall(SYS_write, 1, bad, 5));
    check("write from a kernel address", syscall(SYS_write, 1, kernel, 5));
    check("uname to NULL+16", syscall(SYS_uname, bad));
    check("clock_gettime to a kernel address", syscall(SYS_clock_gettime, CLOCK_REALTIME, kernel));
    check("getrandom to NULL+16", syscall(SYS_getrandom, bad, 8, 0));
    check("uname to an unmapped address", syscall(SYS_uname, lib));
    check("nanosleep from NULL+16", syscall(SYS_nanosleep, bad, 0));
    check("writev with a bad vector", syscall(SYS_writev, 1, bad, 1));
    printf("efault: %s\n", fails ? "FAIL" : "all passed, still running");
    return fails;
}
