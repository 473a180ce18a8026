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
#include <sys/statfs.h>
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

/* Paths longer than one message of the file-system protocol (400 bytes; 240 for rename and
 * link): 12 directories of 50-byte names, a file at the bottom made, renamed, linked and
 * removed through the whole path. */
static void long_paths(void)
{
    static char p[1024], q[1100];
    size_t len = 0;
    for (int i = 0; i < 12; i++) {
        len += snprintf(p + len, sizeof p - len, "%sedge.long-%02d-%038d", i ? "/" : "", i, 0);
        if (mkdir(p, 0755) < 0) {
            check("mkdir(long path)", -1);
            return;
        }
    }
    printf("long path of %zu bytes\n", len);
    snprintf(q, sizeof q, "%s/file", p);
    int fd = open(q, O_CREAT | O_WRONLY | O_EXCL, 0644);
    check("open(long path)", fd >= 0 ? 0 : -1);
    check("write(long path)", write(fd, "deep", 4));
    close(fd);
    struct stat st;
    check("stat(long path)", stat(q, &st));
    printf("size %lld\n", (long long)st.st_size);
    char r[1100];
    snprintf(r, sizeof r, "%s/renamed", p);
    check("rename(long paths)", rename(q, r));
    check("link(long paths)", link(r, q));
    check("stat(linked)", stat(r, &st));
    printf("nlink %ld\n", (long)st.st_nlink);
    check("unlink(long path)", unlink(q));
    check("unlink(long path 2)", unlink(r));
    for (int i = 11; i >= 0; i--) {
        if (rmdir(p) < 0)
            check("rmdir(long path)", -1);
        char *slash = strrchr(p, '/');
        if (slash)
            *slash = 0;
    }
}

/* Hard links, renameat2's NOREPLACE, explicit and omitted times, ownership, statfs. */
static void links_and_times(void)
{
    int fd = open("edge.h", O_CREAT | O_RDWR | O_TRUNC, 0644);
    write(fd, "hard", 4);
    struct stat st;
    check("link", link("edge.h", "edge.h2"));
    SYS("link(onto a name)", SYS_link, "edge.h", "edge.h2");
    SYS("link(a directory)", SYS_link, ".", "edge.hd");
    SYS("link(missing)", SYS_link, "edge.none", "edge.h3");
    fstat(fd, &st);
    printf("nlink after link %ld\n", (long)st.st_nlink);
    SYS("renameat2(NOREPLACE, taken)", SYS_renameat2, AT_FDCWD, "edge.h", AT_FDCWD, "edge.h2", 1);
    SYS("renameat2(NOREPLACE, free)", SYS_renameat2, AT_FDCWD, "edge.h2", AT_FDCWD, "edge.h3", 1);
    SYS("renameat2(bad flags)", SYS_renameat2, AT_FDCWD, "edge.h3", AT_FDCWD, "edge.h4", 8);
    SYS("unlink(second name)", SYS_unlink, "edge.h3");
    fstat(fd, &st);
    printf("nlink after unlink %ld\n", (long)st.st_nlink);
    struct timespec ts[2] = {{1000000000, 0}, {1234567890, 0}};
    check("utimensat", utimensat(AT_FDCWD, "edge.h", ts, 0));
    stat("edge.h", &st);
    printf("atime %lld mtime %lld\n", (long long)st.st_atime, (long long)st.st_mtime);
    struct timespec omit[2] = {{0, UTIME_OMIT}, {1500000000, 0}};
    check("futimens(omit atime)", futimens(fd, omit));
    fstat(fd, &st);
    printf("atime %lld mtime %lld\n", (long long)st.st_atime, (long long)st.st_mtime);
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    check("utimensat(bad nsec)", utimensat(AT_FDCWD, "edge.h", bad, 0));
    check("fchmod", fchmod(fd, 0600));
    fstat(fd, &st);
    printf("mode %o\n", st.st_mode & 07777);
    check("fchown(-1, -1)", fchown(fd, -1, -1));
    check("lchown(missing)", lchown("edge.none", 0, 0));
    struct statfs sf;
    check("statfs", statfs(".", &sf));
    printf("f_type %lx namelen %ld\n", (unsigned long)sf.f_type, (long)sf.f_namelen);
    check("fstatfs", fstatfs(fd, &sf));
    printf("f_type %lx\n", (unsigned long)sf.f_type);
    SYS("statfs(missing)", SYS_statfs, "edge.none", &sf);
    close(fd);
    unlink("edge.h");
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
    long_paths();
    links_and_times();
    printf("edge: done\n");
    return 0;
}
