/* Linux edge cases, one line per check: what the call returned and errno's name. Run on the
 * host, its output is the expected output of the same binary in sawmill (the Linux harness,
 * tests/linux/programs.txt, compares them). Built with musl-gcc -static -O2.
 *
 * Usage: edge            all checks, in the current directory (makes and removes edge.*)
 *        edge segv       mprotect a page read-only, then write to it: must die by SIGSEGV
 *
 * Raw system calls (syscall()) where libc would check arguments itself, so the kernel's (or
 * the personality's) answer is what is printed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *ename(int e)
{
    switch (e) {
    case 0: return "0";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EBADF: return "EBADF";
    case EFAULT: return "EFAULT";
    case EINVAL: return "EINVAL";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ELOOP: return "ELOOP";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ESPIPE: return "ESPIPE";
    case EACCES: return "EACCES";
    case ENOTTY: return "ENOTTY";
    case ENOSYS: return "ENOSYS";
    case ERANGE: return "ERANGE";
    default: return "E?";
    }
}

/* Prints `name = value errno` for a raw syscall result. */
static long check(const char *name, long r)
{
    int e = r < 0 ? errno : 0;
    printf("%-28s = %ld %s\n", name, r < 0 ? -1L : r, ename(e));
    return r;
}

#define SYS(name, ...) check(name, syscall(__VA_ARGS__))

static void errno_basics(void)
{
    char buf[16];
    SYS("read(bad fd)", SYS_read, 999, buf, 1);
    SYS("write(-1)", SYS_write, -1, buf, 1);
    SYS("close(bad fd)", SYS_close, 12345);
    SYS("open(bad pointer)", SYS_open, (char *)8, O_RDONLY);
    SYS("stat(bad buffer)", SYS_stat, ".", (void *)16);
    int fd = open("edge.f", O_CREAT | O_RDWR | O_TRUNC, 0644);
    check("open(edge.f)", fd >= 0 ? 3 : fd);
    SYS("lseek(bad whence)", SYS_lseek, fd, 0, 99);
    SYS("write(bad buffer)", SYS_write, fd, (void *)8, 10);
    write(fd, "data", 4);
    lseek(fd, 0, SEEK_SET);
    SYS("read(bad buffer)", SYS_read, fd, (void *)8, 10);
    SYS("openat(bad flags)", SYS_openat, AT_FDCWD, "edge.f", O_RDONLY | 0x80000000u | O_TMPFILE);
    SYS("fcntl(bad cmd)", SYS_fcntl, fd, 9999);
    SYS("dup3(same fd)", SYS_dup3, fd, fd, 0);
    SYS("dup3(bad flags)", SYS_dup3, fd, fd + 1, 1);
    SYS("ioctl(file, TCGETS)", SYS_ioctl, fd, 0x5401, buf);
    SYS("mmap(len 0)", SYS_mmap, 0, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    SYS("mmap(no share type)", SYS_mmap, 0, 4096, PROT_READ, MAP_ANONYMOUS, -1, 0);
    SYS("munmap(unaligned)", SYS_munmap, 1, 4096);
    SYS("lseek(negative)", SYS_lseek, fd, (long)-1, SEEK_SET);
    close(fd);
    SYS("unlink(missing)", SYS_unlink, "edge.missing");
    SYS("rmdir(.)", SYS_rmdir, ".");
    SYS("mkdir(existing)", SYS_mkdir, ".", 0755);
    SYS("open(file/x)", SYS_open, "edge.f/x", O_RDONLY);
    SYS("unlink(edge.f)", SYS_unlink, "edge.f");
}

static void open_flags(void)
{
    char buf[64];
    int fd = open("edge.a", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "hello", 5);
    close(fd);
    fd = open("edge.a", O_WRONLY | O_APPEND);
    lseek(fd, 0, SEEK_SET);
    check("append write", write(fd, " world", 6));
    check("append offset", lseek(fd, 0, SEEK_CUR));
    close(fd);
    fd = open("edge.a", O_RDONLY);
    long n = read(fd, buf, sizeof buf);
    close(fd);
    printf("after append: %.*s\n", (int)n, buf);
    check("O_EXCL on existing", open("edge.a", O_CREAT | O_EXCL | O_WRONLY, 0644));
    fd = open("edge.a", O_WRONLY | O_TRUNC);
    struct stat st;
    fstat(fd, &st);
    close(fd);
    check("size after O_TRUNC", st.st_size);
    check("O_DIRECTORY on file", open("edge.a", O_RDONLY | O_DIRECTORY));
    fd = open(".", O_RDONLY | O_DIRECTORY);
    check("O_DIRECTORY on dir", fd >= 0 ? 1 : fd);
    check("read(directory)", read(fd, buf, 1));
    close(fd);
    check("open(dir, O_WRONLY)", open(".", O_WRONLY));
    check("O_CREAT|O_EXCL new", open("edge.b", O_CREAT | O_EXCL | O_WRONLY, 0600) >= 0);
    stat("edge.b", &st);
    printf("edge.b mode %o\n", st.st_mode & 07777);
    unlink("edge.a");
    unlink("edge.b");
}

static void sparse(void)
{
    int fd = open("edge.s", O_CREAT | O_RDWR | O_TRUNC, 0644);
    check("lseek past end", lseek(fd, 100000, SEEK_SET));
    check("read at hole end", read(fd, (char[4]){0}, 4));
    check("write past end", write(fd, "end", 3));
    struct stat st;
    fstat(fd, &st);
    check("sparse size", st.st_size);
    char buf[8192];
    memset(buf, 'x', sizeof buf);
    check("pread in hole", pread(fd, buf, sizeof buf, 50000));
    int zero = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        zero &= buf[i] == 0;
    printf("hole reads zeros: %d\n", zero);
    check("pread across end", pread(fd, buf, sizeof buf, 99999));
    printf("tail bytes: %d %.3s\n", buf[0], buf + 1);
    check("lseek SEEK_END", lseek(fd, 0, SEEK_END));
    check("lseek negative", lseek(fd, -200000, SEEK_CUR));
    close(fd);
    unlink("edge.s");
}

/* 2,000 entries, read back with small buffers: count and a checksum of the names. */
static void big_directory(void)
{
    mkdir("edge.d", 0755);
    char name[64];
    for (int i = 0; i < 2000; i++) {
        snprintf(name, sizeof name, "edge.d/entry-%04d-%s", i, i % 3 ? "long-name-padding" : "s");
        close(open(name, O_CREAT | O_WRONLY, 0644));
    }
    int fd = open("edge.d", O_RDONLY | O_DIRECTORY);
    char buf[200];
    long count = 0, calls = 0;
    uint64_t sum = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) {
            check("getdents64 end", n);
            break;
        }
        calls++;
        /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name. */
        for (long off = 0; off < n;) {
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            if (strcmp(name, ".") && strcmp(name, "..")) {
                count++;
                uint64_t h = 1469598103934665603ull;
                for (const char *p = name; *p; p++)
                    h = (h ^ (unsigned char)*p) * 1099511628211ull;
                sum += h; /* order independent */
            }
            if (reclen == 0)
                break;
            off += reclen;
        }
    }
    printf("getdents64: %ld entries, checksum %016llx, more than 100 calls: %d\n", count,
           (unsigned long long)sum, calls > 100);
    check("lseek(dir, 0)", lseek(fd, 0, SEEK_SET));
    check("getdents64 tiny buffer", syscall(SYS_getdents64, fd, buf, 8));
    check("getdents64 bad buffer", syscall(SYS_getdents64, fd, (void *)8, 4096));
    close(fd);
    check("rmdir nonempty", syscall(SYS_rmdir, "edge.d"));
    for (int i = 0; i < 2000; i++) {
        snprintf(name, sizeof name, "edge.d/entry-%04d-%s", i, i % 3 ? "long-name-padding" : "s");
        unlink(name);
    }
    check("rmdir emptied", syscall(SYS_rmdir, "edge.d"));
}

static void memory(void)
{
    int fd = open("edge.m", O_CREAT | O_RDWR | O_TRUNC, 0644);
    char text[10000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = 'a' + i % 26;
    write(fd, text, sizeof text);
    char *p = mmap(0, sizeof text, PROT_READ, MAP_PRIVATE, fd, 0);
    check("mmap file", p == MAP_FAILED ? -1 : 0);
    if (p != MAP_FAILED) {
        printf("mapped matches: %d, byte 9999 %c\n", memcmp(p, text, sizeof text) == 0, p[9999]);
        munmap(p, sizeof text);
    }
    p = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 8192);
    check("mmap file offset", p == MAP_FAILED ? -1 : 0);
    if (p != MAP_FAILED) {
        printf("offset 8192 maps %.5s, past EOF zero: %d\n", p, p[4095] == 0);
        munmap(p, 4096);
    }
    check("mmap unaligned offset",
          (long)mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 100) == -1 ? -1 : 0);
    close(fd);
    unlink("edge.m");
    int *shared = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    check("mmap shared anon", shared == MAP_FAILED ? -1 : 0);
    if (shared != MAP_FAILED) {
        int zero = shared[0] == 0 && shared[2047] == 0;
        shared[0] = 42;
        shared[2047] = 7;
        printf("shared anon zeroed %d, holds %d %d\n", zero, shared[0], shared[2047]);
        check("munmap shared", munmap(shared, 8192));
    }
    char *q = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    q[0] = 'q';
    check("mprotect read-only", mprotect(q, 4096, PROT_READ));
    printf("still readable: %c\n", q[0]);
    SYS("mprotect unaligned", SYS_mprotect, q + 1, 4096, PROT_READ);
    SYS("mprotect bad prot", SYS_mprotect, q, 4096, 0x100);
}

static void paths(void)
{
    char longname[300];
    memset(longname, 'n', 256);
    longname[256] = 0;
    SYS("open(256-byte name)", SYS_open, longname, O_RDONLY);
    static char longpath[5000];
    memset(longpath, 0, sizeof longpath);
    for (int i = 0; i < 4200; i += 2)
        memcpy(longpath + i, "a/", 2);
    SYS("stat(4200-byte path)", SYS_stat, longpath, (char[256]){0});
    SYS("mkdir(4200-byte path)", SYS_mkdir, longpath, 0755);
    symlink("edge.loop2", "edge.loop1");
    symlink("edge.loop1", "edge.loop2");
    SYS("open(symlink loop)", SYS_open, "edge.loop1", O_RDONLY);
    SYS("stat(symlink loop)", SYS_stat, "edge.loop1/x", (char[256]){0});
    SYS("lstat(loop itself)", SYS_lstat, "edge.loop1", (char[256]){0});
    SYS("open(NOFOLLOW link)", SYS_open, "edge.loop1", O_RDONLY | O_NOFOLLOW);
    char target[64];
    long n = syscall(SYS_readlink, "edge.loop1", target, sizeof target);
    check("readlink", n);
    printf("link target %.*s\n", (int)(n > 0 ? n : 0), target);
    SYS("readlink(not a link)", SYS_readlink, ".", target, sizeof target);
    unlink("edge.loop1");
    unlink("edge.loop2");
    SYS("chdir(missing)", SYS_chdir, "edge.nowhere");
    SYS("getcwd(tiny buffer)", SYS_getcwd, target, 1);
}

static void segv(void)
{
    char *q = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    q[0] = 1;
    mprotect(q, 4096, PROT_READ);
    printf("writing to a read-only page\n");
    fflush(stdout);
    *(volatile char *)q = 2;
    printf("FAIL: the write did not fault\n");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, 0, _IOLBF, 0);
    if (argc > 1 && !strcmp(argv[1], "segv")) {
        segv();
        return 1;
    }
    errno_basics();
    open_flags();
    sparse();
    big_directory();
    memory();
    paths();
    printf("edge: done\n");
    return 0;
}
