/*
 * The crash-consistency workload (issue 16, `./sawmill crash`, docs/filesystem.md "Crash
 * consistency"). A static musl program run as the Linux system's first process on a disk whose
 * every write and flush QEMU records (blklogwrites). It creates, appends to, overwrites and
 * renames files under /data and fsyncs after every change, and prints a record the host checks
 * each replayed crash point against:
 *
 *   crash: fsync N PATH               fsync call N (0, 1, ...) on PATH returned 0
 *   crash: durable N PATH LEN HASH    once fsync N returned, PATH holds LEN bytes, FNV-1a 64 HASH
 *   crash: absent N PATH              once fsync N returned, PATH does not exist
 *   crash: done N                     N fsync calls in all
 *
 * A `durable` line is printed only when POSIX says the state must survive a crash: the file's
 * own fsync, and for a new name (create, rename) its directory's fsync too. The contents are what
 * this program wrote (kept here), never read back, so a file system that returned the wrong bytes
 * could not vouch for itself.
 *
 * Before fsync call N the program writes the block "SAWMILL-CRASH-FSYNC N" over the one block of
 * /data/marks: the host finds in the write log the first flush after that block reached the
 * disk, which is the flush that acknowledged fsync N (the PFS writes back every dirty block on an
 * fsync). Counting flushes instead cannot work: QEMU drops a flush that follows no write, and an
 * fsync with nothing to write is one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 32
#define MAX_SIZE (320 * 1024)

struct file {
    char path[64];
    unsigned char *data;
    size_t len;
};

static struct file files[MAX_FILES];
static int nfiles;
static int fsyncs;

static void die(const char *what, const char *path)
{
    printf("crash: error %s %s: %s\n", what, path, strerror(errno));
    fflush(stdout);
    exit(1);
}

static uint64_t fnv64(const unsigned char *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Deterministic bytes, different for every (seed, position): an xorshift stream. */
static void fill(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (unsigned char)x;
    }
}

static struct file *model(const char *path)
{
    for (int i = 0; i < nfiles; i++)
        if (strcmp(files[i].path, path) == 0)
            return &files[i];
    if (nfiles == MAX_FILES) {
        errno = ENOSPC;
        die("model", path);
    }
    struct file *f = &files[nfiles++];
    snprintf(f->path, sizeof f->path, "%s", path);
    f->data = calloc(1, MAX_SIZE);
    if (!f->data)
        die("calloc", path);
    f->len = 0;
    return f;
}

#define MARKS "/data/marks"
static int marks_fd = -1;

static void do_fsync(int fd, const char *path)
{
    char mark[4096];
    memset(mark, 0, sizeof mark);
    snprintf(mark, sizeof mark, "SAWMILL-CRASH-FSYNC %d\n", fsyncs);
    if (marks_fd < 0)
        marks_fd = open(MARKS, O_WRONLY | O_CREAT, 0644);
    if (marks_fd < 0)
        die("open", MARKS);
    if (pwrite(marks_fd, mark, sizeof mark, 0) != (ssize_t)sizeof mark)
        die("pwrite", MARKS);
    if (fsync(fd) != 0)
        die("fsync", path);
    printf("crash: fsync %d %s\n", fsyncs, path);
    fflush(stdout);
    fsyncs++;
}

static void sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        die("open", path);
    do_fsync(fd, path);
    close(fd);
}

static void durable(const char *path)
{
    struct file *f = model(path);
    printf("crash: durable %d %s %zu %016llx\n", fsyncs - 1, path, f->len,
           (unsigned long long)fnv64(f->data, f->len));
    fflush(stdout);
}

static void absent(const char *path)
{
    printf("crash: absent %d %s\n", fsyncs - 1, path);
    fflush(stdout);
}

/* Writes `n` new bytes (seeded) at `off` of `path` (created if missing), then fsyncs it. */
static void write_file(const char *path, size_t off, size_t n, uint64_t seed)
{
    struct file *f = model(path);
    if (off + n > MAX_SIZE) {
        errno = EFBIG;
        die("model", path);
    }
    fill(f->data + off, n, seed);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        die("open", path);
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, f->data + off + done, n - done, (off_t)(off + done));
        if (w <= 0)
            die("pwrite", path);
        done += (size_t)w;
    }
    if (off + n > f->len)
        f->len = off + n;
    do_fsync(fd, path);
    close(fd);
}

static void forget(const char *path)
{
    struct file *f = model(path);
    f->len = 0;
}

static void rename_file(const char *from, const char *to)
{
    struct file *a = model(from), *b = model(to);
    if (rename(from, to) != 0)
        die("rename", from);
    memcpy(b->data, a->data, a->len);
    b->len = a->len;
    a->len = 0;
}

int main(void)
{
    char name[64];
    if (mkdir("/data", 0755) != 0 && errno != EEXIST)
        die("mkdir", "/data");

    write_file("/data/begin", 0, 4096, 1);
    sync_dir("/data");
    sync_dir("/");
    durable("/data/begin");

    /* A new file, then appends (within a block, across blocks), then overwrites inside: each
     * overwrite stays in one block, so a crash leaves it whole or not at all (a torn overwrite
     * of unacknowledged bytes is allowed, but the host could not tell it from a lost one). */
    write_file("/data/a", 0, 3000, 2);
    sync_dir("/data");
    durable("/data/a");
    write_file("/data/a", 3000, 700, 3);
    durable("/data/a");
    write_file("/data/a", 3700, 9000, 4);
    durable("/data/a");
    write_file("/data/a", 4096, 4096, 5);
    durable("/data/a");
    write_file("/data/a", 100, 200, 6);
    durable("/data/a");

    /* A directory with several entries of several sizes (0 bytes to past the direct blocks). */
    if (mkdir("/data/dir", 0755) != 0)
        die("mkdir", "/data/dir");
    sync_dir("/data");
    static const size_t sizes[] = {0, 1, 100, 4096, 4097, 20000, 49152, 60000};
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "/data/dir/f%d", i);
        write_file(name, 0, sizes[i], 10 + i);
    }
    sync_dir("/data/dir");
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "/data/dir/f%d", i);
        durable(name);
    }

    /* The atomic replace: write a temporary, fsync it, rename it over the old, fsync the dir. */
    write_file("/data/cfg", 0, 5000, 20);
    sync_dir("/data");
    durable("/data/cfg");
    write_file("/data/cfg.tmp", 0, 6500, 21);
    rename_file("/data/cfg.tmp", "/data/cfg");
    sync_dir("/data");
    durable("/data/cfg");
    absent("/data/cfg.tmp");

    /* A move between directories, and an unlink. */
    rename_file("/data/dir/f5", "/data/moved");
    sync_dir("/data/dir");
    sync_dir("/data");
    durable("/data/moved");
    absent("/data/dir/f5");
    if (unlink("/data/dir/f2") != 0)
        die("unlink", "/data/dir/f2");
    forget("/data/dir/f2");
    sync_dir("/data/dir");
    absent("/data/dir/f2");

    /* A log: small appends, each fsync'd. */
    for (int i = 0; i < 8; i++) {
        struct file *f = model("/data/log");
        write_file("/data/log", f->len, 300 + 97 * (size_t)i, 30 + i);
        if (i == 0)
            sync_dir("/data");
        durable("/data/log");
    }

    /* A file past the direct blocks, written in 64 KiB pieces with an fsync after each. */
    for (int i = 0; i < 5; i++) {
        write_file("/data/big", (size_t)i * 65536, 65536, 40 + i);
        if (i == 0)
            sync_dir("/data");
        durable("/data/big");
    }

    printf("crash: done %d\n", fsyncs);
    fflush(stdout);
    return 0;
}
