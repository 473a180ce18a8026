/* /proc as Linux's parsers read it: one line per check, printing only what is the same on any
 * Linux machine (so the host's run is the expected output: tests/linux/programs.txt), each
 * check failing with a line saying what was read. The figures themselves (memory, uptime) differ
 * between machines: their format is what is checked, with the parsers' own calls (sscanf as
 * busybox's, getmntent as `mount` and `df` use).
 * Built with musl-gcc -static -O2.
 *
 * Usage: procfs                 the checks
 *        procfs exec ARGS...    the checks, then exec /bin/busybox ARGS (scenario procfs) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

static int failed;

static void ok(int cond, const char *what, const char *got)
{
    if (cond) {
        printf("ok %s\n", what);
    } else {
        printf("FAIL %s (read: %s)\n", what, got);
        failed = 1;
    }
}

/* The whole of a /proc file (they report size 0: read to the end). */
static int slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += r;
    }
    close(fd);
    buf[n] = 0;
    return (int)n;
}

/* The value of `Key:\t...` in a status-like text. */
static const char *field(const char *text, const char *key)
{
    static char v[256];
    size_t k = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : 0) {
        if (!strncmp(l, key, k) && l[k] == ':') {
            const char *s = l + k + 1;
            while (*s == '\t' || *s == ' ')
                s++;
            size_t n = strcspn(s, "\n");
            if (n >= sizeof v)
                n = sizeof v - 1;
            memcpy(v, s, n);
            v[n] = 0;
            return v;
        }
    }
    return "";
}

static char buf[65536];

int main(int argc, char **argv)
{
    char want[256], got[256], path[64];
    int pid = getpid();

    /* /proc/self/stat: the 52 fields of proc(5); pid, state and parent as the process knows. */
    int n = slurp("/proc/self/stat", buf, sizeof buf);
    int spid = 0, sppid = 0, spgrp = 0, ssid = 0;
    char comm[64] = "", state = 0;
    int fields = 0;
    if (n > 0) {
        char *close_paren = strrchr(buf, ')');
        char *open_paren = strchr(buf, '(');
        if (open_paren && close_paren && close_paren > open_paren) {
            snprintf(comm, sizeof comm, "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
            sscanf(buf, "%d", &spid);
            sscanf(close_paren + 2, "%c %d %d %d", &state, &sppid, &spgrp, &ssid);
            fields = 2;
            for (char *t = strtok(close_paren + 2, " \n"); t; t = strtok(0, " \n"))
                fields++;
        }
    }
    snprintf(got, sizeof got, "%d (%s) %c %d, %d fields", spid, comm, state, sppid, fields);
    ok(spid == pid && state == 'R' && sppid == getppid() && fields == 52,
       "/proc/self/stat: own pid, running, parent, 52 fields", got);
    printf("comm %s\n", comm);

    /* /proc/self/status: the same facts in Name:\tvalue lines. */
    slurp("/proc/self/status", buf, sizeof buf);
    snprintf(want, sizeof want, "%d", pid);
    ok(!strcmp(field(buf, "Pid"), want) && !strcmp(field(buf, "Tgid"), want),
       "/proc/self/status: Pid and Tgid", field(buf, "Pid"));
    snprintf(want, sizeof want, "%d", getppid());
    ok(!strcmp(field(buf, "PPid"), want), "/proc/self/status: PPid", field(buf, "PPid"));
    ok(!strcmp(field(buf, "State"), "R (running)"), "/proc/self/status: State",
       field(buf, "State"));
    snprintf(want, sizeof want, "%u\t%u\t%u\t%u", getuid(), geteuid(), geteuid(), geteuid());
    ok(!strcmp(field(buf, "Uid"), want), "/proc/self/status: Uid", field(buf, "Uid"));
    ok(!strcmp(field(buf, "Name"), comm), "/proc/self/status: Name is comm", field(buf, "Name"));
    slurp("/proc/self/comm", buf, sizeof buf);
    snprintf(want, sizeof want, "%s\n", comm);
    ok(!strcmp(buf, want), "/proc/self/comm", buf);

    /* /proc/self/cmdline: argv, each string NUL-terminated. */
    n = slurp("/proc/self/cmdline", buf, sizeof buf);
    int pos = 0, same = 1;
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]) + 1;
        if (pos + (int)l > n || memcmp(buf + pos, argv[i], l))
            same = 0;
        pos += l;
    }
    ok(same && pos == n, "/proc/self/cmdline is argv", "(bytes differ)");

    /* The links: self is the pid; exe is the program, the same through /proc/PID. */
    ssize_t l = readlink("/proc/self", got, sizeof got - 1);
    got[l > 0 ? l : 0] = 0;
    snprintf(want, sizeof want, "%d", pid);
    ok(!strcmp(got, want), "readlink /proc/self is the pid", got);
    char exe1[256], exe2[256];
    l = readlink("/proc/self/exe", exe1, sizeof exe1 - 1);
    exe1[l > 0 ? l : 0] = 0;
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    l = readlink(path, exe2, sizeof exe2 - 1);
    exe2[l > 0 ? l : 0] = 0;
    ok(exe1[0] == '/' && !strcmp(exe1, exe2), "/proc/self/exe and /proc/PID/exe", exe2);

    /* Attributes: files r--r--r-- of size 0, directories r-x, owned by the process. */
    struct stat st;
    int r = stat("/proc/self/stat", &st);
    snprintf(got, sizeof got, "%d %o %lld", r, st.st_mode, (long long)st.st_size);
    ok(r == 0 && st.st_mode == (S_IFREG | 0444) && st.st_size == 0,
       "stat /proc/self/stat: regular, 0444, size 0", got);
    snprintf(path, sizeof path, "/proc/%d", pid);
    r = stat(path, &st);
    snprintf(got, sizeof got, "%d %o %u", r, st.st_mode, st.st_uid);
    ok(r == 0 && st.st_mode == (S_IFDIR | 0555) && st.st_uid == geteuid(),
       "stat /proc/PID: directory, 0555, owned by the process", got);
    r = lstat("/proc/self/exe", &st);
    ok(r == 0 && S_ISLNK(st.st_mode), "lstat /proc/self/exe: a link", "");
    r = stat("/proc/meminfo", &st);
    ok(r == 0 && st.st_mode == (S_IFREG | 0444) && st.st_size == 0,
       "stat /proc/meminfo: regular, 0444, size 0", "");
    errno = 0;
    r = stat("/proc/999999999", &st);
    printf("stat /proc/999999999: %d %s\n", r, errno == ENOENT ? "ENOENT" : "other");

    /* The listing: the own pid (a directory), self (a link), the system files. */
    DIR *d = opendir("/proc");
    int seen_pid = 0, seen_self = 0, seen_meminfo = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, want) && e->d_type == DT_DIR)
            seen_pid = 1;
        if (!strcmp(e->d_name, "self") && e->d_type == DT_LNK)
            seen_self = 1;
        if (!strcmp(e->d_name, "meminfo") && e->d_type == DT_REG)
            seen_meminfo = 1;
    }
    if (d)
        closedir(d);
    ok(seen_pid && seen_self && seen_meminfo, "readdir /proc: the own pid, self, meminfo", "");

    /* /proc/meminfo as free and top parse it: `Name: N kB`. */
    slurp("/proc/meminfo", buf, sizeof buf);
    unsigned long total = 0, free_kb = 0, avail = 0;
    char *m = strstr(buf, "MemTotal:");
    int got_total = m && sscanf(m, "MemTotal: %lu kB", &total) == 1;
    m = strstr(buf, "MemFree:");
    int got_free = m && sscanf(m, "MemFree: %lu kB", &free_kb) == 1;
    m = strstr(buf, "MemAvailable:");
    int got_avail = m && sscanf(m, "MemAvailable: %lu kB", &avail) == 1;
    snprintf(got, sizeof got, "%lu %lu %lu", total, free_kb, avail);
    ok(got_total && got_free && got_avail && total > 0 && free_kb <= total && avail <= total &&
           !strncmp(buf, "MemTotal:", 9),
       "/proc/meminfo: MemTotal first, MemFree and MemAvailable within it", got);

    /* /proc/uptime and /proc/loadavg as uptime and top parse them. */
    slurp("/proc/uptime", buf, sizeof buf);
    double up = -1, idle = -1;
    ok(sscanf(buf, "%lf %lf", &up, &idle) == 2 && up > 0 && idle >= 0,
       "/proc/uptime: two figures in seconds", buf);
    slurp("/proc/loadavg", buf, sizeof buf);
    double la[3];
    int running = 0, all = 0, last = 0;
    ok(sscanf(buf, "%lf %lf %lf %d/%d %d", &la[0], &la[1], &la[2], &running, &all, &last) == 6 &&
           running >= 1 && all >= running && last >= 1,
       "/proc/loadavg: three loads, running/all, last pid", buf);
    slurp("/proc/stat", buf, sizeof buf);
    unsigned long long cpu[4];
    ok(sscanf(buf, "cpu %llu %llu %llu %llu", &cpu[0], &cpu[1], &cpu[2], &cpu[3]) == 4 &&
           strstr(buf, "\nbtime ") && strstr(buf, "\nprocs_running "),
       "/proc/stat: cpu times, btime, procs_running", "");

    /* /proc/mounts as mount and df read it. */
    FILE *mf = setmntent("/proc/mounts", "r");
    int root = 0, proc = 0;
    struct mntent *me;
    while (mf && (me = getmntent(mf))) {
        if (!strcmp(me->mnt_dir, "/"))
            root = 1;
        if (!strcmp(me->mnt_dir, "/proc") && !strcmp(me->mnt_type, "proc"))
            proc = 1;
    }
    if (mf)
        endmntent(mf);
    ok(root && proc, "/proc/mounts: / and /proc (type proc)", "");
    struct statfs sf;
    ok(statfs("/", &sf) == 0 && sf.f_blocks > 0 && sf.f_bfree <= sf.f_blocks,
       "statfs /: blocks, free within them", "");

    /* /proc/cpuinfo: one block per processor, numbered from 0. */
    slurp("/proc/cpuinfo", buf, sizeof buf);
    int cpus = 0, named = 0;
    for (char *p = buf; (p = strstr(p, "processor\t: ")); p++) {
        if (atoi(p + 12) == cpus)
            cpus++;
    }
    for (char *p = buf; (p = strstr(p, "\nmodel name\t: ")); p++)
        named++;
    snprintf(got, sizeof got, "%d processors, %d names", cpus, named);
    ok(cpus >= 1 && named == cpus && strstr(buf, "\nflags\t\t: "),
       "/proc/cpuinfo: processors from 0, each with a model name and flags", got);

    if (argc > 2 && !strcmp(argv[1], "exec")) {
        fflush(stdout);
        argv[1] = "busybox";
        execv("/bin/busybox", argv + 1);
        printf("FAIL exec /bin/busybox: %d\n", errno);
        return 1;
    }
    return failed;
}
