/* stamp: prints `BENCH <name> <tsc> insn`, the guest's time-stamp counter now.
 *
 * The boot benchmark (boot.to_prompt, tools/sawmill/src/bench/boot.rs) runs it from the login
 * shell's /etc/profile as the last command before the first prompt, on sawmill and on Linux
 * alike. Under QEMU `-icount shift=0` the counter starts at 0 at reset and advances by one per
 * guest instruction (and by one per nanosecond of virtual time while the CPU idles), so the
 * figure is the boot's cost from reset to here. Static (musl), no C library start-up beyond the
 * minimum: the few thousand instructions of its own exec are part of the figure on both sides.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t tsc_now(void)
{
    uint32_t lo, hi;
    /* lfence keeps the read in program order (qemu64 has no rdtscp). */
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
}

int main(int argc, char **argv)
{
    uint64_t t = tsc_now();
    if (argc != 2 || argv[1][0] == '\0' || strchr(argv[1], ' ') != NULL) {
        fprintf(stderr, "usage: stamp NAME (prints BENCH NAME <tsc> insn)\n");
        return 2;
    }
    printf("BENCH %s %llu insn\n", argv[1], (unsigned long long)t);
    return 0;
}
