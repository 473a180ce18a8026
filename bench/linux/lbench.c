/*
 * lbench: the Linux side of the sawmill benchmark suite (issue 7).
 *
 * Runs inside a Debian kernel booted by QEMU with `-icount shift=0`, where the
 * guest time-stamp counter advances by one per executed guest instruction.
 * Every figure is therefore a count of guest instructions (QEMU icount), not
 * a time, and is deterministic from run to run.
 *
 * Output, one line per metric on stdout (the serial console):
 *
 *     BENCH <name> <value> insn
 *
 * Method, the same for every metric: some untimed warm-up passes, then PASSES
 * timed passes; each pass performs many operations and yields a per-operation
 * mean (pass total / operations). The reported value is the MINIMUM of those
 * per-pass means. Taking the minimum drops the passes that happened to absorb
 * a timer tick (HZ=250 => one tick every 4,000,000 units) or other kernel
 * housekeeping, so the figure is the steady-state cost of the operation.
 * Warm-up lengths were chosen from per-pass traces (bench/README.md): the
 * first rereads of a file still pay for page-cache LRU activation, and
 * open+close keeps getting cheaper for its first ~70,000 calls.
 *
 * Usage: lbench <directory holding the benchmark files>
 *   expects <dir>/f64k <dir>/f128k <dir>/f256k <dir>/f1m <dir>/f4m and <dir>/small
 *
 * Build: musl-gcc -static -O2 -o lbench lbench.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PASSES 9        /* timed passes per metric */
#define REREAD_WARM 2   /* untimed reread passes after the first (disk) read */
#define OPEN_WARM 40    /* untimed open+close passes (2000 calls each) */
#define WRITE_WARM 2    /* untimed write passes after the file is allocated */
#define RECORD 4096

/* lfence keeps rdtsc from being hoisted above earlier instructions; qemu64
 * has no rdtscp. Under TCG the fence costs one guest instruction. */
static inline uint64_t stamp(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}

static void die(const char *what)
{
    printf("LBENCH error: %s: %s\n", what, strerror(errno));
    fflush(stdout);
    exit(1);
}

static void emit(const char *name, double value)
{
    printf("BENCH %s %.1f insn\n", name, value);
    fflush(stdout);
}

static double min_d(double a, double b) { return a < b ? a : b; }

static char record[RECORD] __attribute__((aligned(4096)));

/* Calibration: a loop with a known instruction count. Under icount the
 * measured value must equal the number of instructions executed (plus the
 * handful in the stamp sequence); printed as evidence, not as a metric. */
static void calibrate(void)
{
    const uint64_t iters = 1000000;
    double best = 1e30;
    for (int p = 0; p < PASSES; p++) {
        uint64_t n = iters;
        uint64_t t0 = stamp();
        /* two instructions per iteration: dec, jnz */
        __asm__ volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n)::"cc");
        uint64_t t1 = stamp();
        best = min_d(best, (double)(t1 - t0));
    }
    printf("CALIB loop of %llu instructions measured %.0f units\n",
           (unsigned long long)(2 * iters), best);
    fflush(stdout);
}

/* Reread of a cached file in 4 KB records, Iozone-style: lseek to 0, then
 * read() the whole file in 4096-byte records. The lseek is inside the timed
 * region (as in Iozone's reread) and amortised over the file's records. */
static void reread(const char *dir, const char *size_name)
{
    char path[256], name[64];
    snprintf(path, sizeof path, "%s/f%s", dir, size_name);
    snprintf(name, sizeof name, "linux.reread4k.%s", size_name);

    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        die("fstat");
    long records = st.st_size / RECORD;
    if (records <= 0) {
        printf("LBENCH error: %s is smaller than one record\n", path);
        exit(1);
    }
    /* Each pass covers at least 1 MiB (256 records). */
    long reps = (256 + records - 1) / records;

    /* Warm: read the file once so it is in the page cache. */
    if (lseek(fd, 0, SEEK_SET) < 0)
        die("lseek");
    for (long r = 0; r < records; r++)
        if (read(fd, record, RECORD) != RECORD)
            die("warm read");

    double best = 1e30;
    for (int p = 0; p < REREAD_WARM + PASSES; p++) {
        uint64_t t0 = stamp();
        for (long k = 0; k < reps; k++) {
            lseek(fd, 0, SEEK_SET);
            for (long r = 0; r < records; r++)
                if (read(fd, record, RECORD) != RECORD)
                    die("read");
        }
        uint64_t t1 = stamp();
        if (p >= REREAD_WARM)
            best = min_d(best, (double)(t1 - t0) / (double)(reps * records));
    }
    close(fd);
    emit(name, best);
}

/* Null system call: getppid is never served by the vDSO and does almost no
 * work in the kernel. Loop overhead (3 instructions) is included. */
static void null_syscall(void)
{
    const long n = 20000;
    double best = 1e30;
    syscall(SYS_getppid);
    for (int p = 0; p < PASSES; p++) {
        uint64_t t0 = stamp();
        for (long i = 0; i < n; i++)
            syscall(SYS_getppid);
        uint64_t t1 = stamp();
        best = min_d(best, (double)(t1 - t0) / (double)n);
    }
    emit("linux.syscall.null", best);
}

/* Pipe ping-pong: the parent writes one byte on pipe A, the child reads it
 * and writes one byte back on pipe B, the parent reads it. One round trip =
 * 2 writes + 2 reads + 2 context switches (single CPU). */
static void pipe_roundtrip(void)
{
    const long n = 2000;
    int a[2], b[2];
    char c = 'x';
    if (pipe(a) < 0 || pipe(b) < 0)
        die("pipe");
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        close(a[1]);
        close(b[0]);
        while (read(a[0], &c, 1) == 1)
            if (write(b[1], &c, 1) != 1)
                _exit(1);
        _exit(0);
    }
    close(a[0]);
    close(b[1]);
    double best = 1e30;
    for (int p = 0; p <= PASSES; p++) { /* pass 0 is the warm-up */
        uint64_t t0 = stamp();
        for (long i = 0; i < n; i++) {
            if (write(a[1], &c, 1) != 1)
                die("pipe write");
            if (read(b[0], &c, 1) != 1)
                die("pipe read");
        }
        uint64_t t1 = stamp();
        if (p > 0)
            best = min_d(best, (double)(t1 - t0) / (double)n);
    }
    close(a[1]);
    close(b[0]);
    waitpid(child, NULL, 0);
    emit("linux.pipe.roundtrip", best);
}

/* First touch of fresh anonymous pages: mmap a region, forbid transparent
 * huge pages on it (Debian's kernel defaults THP to "always", which would
 * turn most 4 KB faults into one 2 MB fault), write one byte per page. The
 * cost per page includes the fault entry/exit, page allocation and zeroing. */
static void pagefault_anon(void)
{
    const long pages = 1024;
    const size_t len = (size_t)pages * 4096;
    double best = 1e30;
    for (int p = 0; p <= PASSES; p++) {
        volatile char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            die("mmap");
        if (madvise((void *)m, len, MADV_NOHUGEPAGE) < 0)
            die("madvise");
        uint64_t t0 = stamp();
        for (long i = 0; i < pages; i++)
            m[i * 4096] = 1;
        uint64_t t1 = stamp();
        munmap((void *)m, len);
        if (p > 0)
            best = min_d(best, (double)(t1 - t0) / (double)pages);
    }
    emit("linux.pagefault.anon", best);
}

/* open + close of an existing file (path lookup of a two-component path in a
 * warm dentry cache, file allocation, fd install, and release). */
static void open_close(const char *dir)
{
    const long n = 2000;
    char path[256];
    snprintf(path, sizeof path, "%s/small", dir);
    double best = 1e30;
    for (int p = 0; p < OPEN_WARM + PASSES; p++) {
        uint64_t t0 = stamp();
        for (long i = 0; i < n; i++) {
            int fd = open(path, O_RDONLY);
            if (fd < 0)
                die(path);
            close(fd);
        }
        uint64_t t1 = stamp();
        if (p >= OPEN_WARM)
            best = min_d(best, (double)(t1 - t0) / (double)n);
    }
    emit("linux.open", best);
}

/* Writes: 4 KB records over a 64 KiB file whose blocks are allocated and cached, rewritten in
 * place (4 times 16 records a pass): the cost of moving data into the page cache. */
static void write_cached(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/w64k", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die(path);
    memset(record, 0x5a, RECORD);
    for (int r = 0; r < 16; r++)
        if (pwrite(fd, record, RECORD, (off_t)r * RECORD) != RECORD)
            die("first write");
    double best = 1e30;
    for (int p = 0; p < WRITE_WARM + PASSES; p++) {
        uint64_t t0 = stamp();
        for (int k = 0; k < 4; k++)
            for (int r = 0; r < 16; r++)
                if (pwrite(fd, record, RECORD, (off_t)r * RECORD) != RECORD)
                    die("write");
        uint64_t t1 = stamp();
        if (p >= WRITE_WARM)
            best = min_d(best, (double)(t1 - t0) / 64.0);
    }
    close(fd);
    emit("linux.write4k", best);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/mnt";
    static const char *sizes[] = {"64k", "128k", "256k", "1m", "4m"};

    printf("LBENCH start\n");
    fflush(stdout);
    calibrate();
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        reread(dir, sizes[i]);
    null_syscall();
    pipe_roundtrip();
    pagefault_anon();
    open_close(dir);
    write_cached(dir);
    printf("LBENCH done\n");
    fflush(stdout);
    return 0;
}
