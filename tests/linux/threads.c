/* Threads and futex (issue 14), run on the host and in sawmill and compared: joins with return
 * values, a mutex under contention, a condition variable, pthread_exit and detached threads,
 * thread-local variables, a thread blocked in a pipe read, pthread_kill to a thread (running or
 * asleep), a timed wait that times out, fork from a threaded program, many threads, and the
 * futex call's errors. Nothing printed depends on a thread id or on timing.
 *
 * `threads exit`: a thread's exit(3) ends the whole process (status 3). `threads mainexit`: the
 * main thread leaves by pthread_exit and the last thread's end ends the process (status 0).
 * `threads bomb` (sawmill only, @survive): threads are made until pthread_create fails; it must
 * fail with EAGAIN and the process must still work afterwards.
 *
 * Built with musl-gcc -static -O2. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <ucontext.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *ret_square(void *arg)
{
    intptr_t i = (intptr_t)arg;
    return (void *)(i * i);
}

static void joins(void)
{
    pthread_t t[8];
    for (intptr_t i = 0; i < 8; i++)
        if (pthread_create(&t[i], 0, ret_square, (void *)i)) {
            printf("joins: create failed\n");
            return;
        }
    long sum = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        printf("joins: thread %d returned %ld\n", i, (long)(intptr_t)r);
        sum += (intptr_t)r;
    }
    printf("joins: sum %ld\n", sum);
}

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *count_up(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100000; i++) {
        pthread_mutex_lock(&counter_lock);
        counter++;
        pthread_mutex_unlock(&counter_lock);
    }
    return 0;
}

static void mutex(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], 0, count_up, 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], 0);
    printf("mutex: counter %ld\n", counter);
}

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_changed = PTHREAD_COND_INITIALIZER;
static int queue[4], queue_len;
static long consumed_sum;

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 1; i <= 1000; i++) {
        pthread_mutex_lock(&queue_lock);
        while (queue_len == 4)
            pthread_cond_wait(&queue_changed, &queue_lock);
        queue[queue_len++] = i;
        pthread_cond_broadcast(&queue_changed);
        pthread_mutex_unlock(&queue_lock);
    }
    return 0;
}

static void *consumer(void *arg)
{
    (void)arg;
    long n = 0;
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&queue_lock);
        while (queue_len == 0)
            pthread_cond_wait(&queue_changed, &queue_lock);
        consumed_sum += queue[--queue_len];
        n++;
        pthread_cond_broadcast(&queue_changed);
        pthread_mutex_unlock(&queue_lock);
    }
    return (void *)n;
}

static void condvar(void)
{
    pthread_t p, c;
    void *n;
    pthread_create(&c, 0, consumer, 0);
    pthread_create(&p, 0, producer, 0);
    pthread_join(p, 0);
    pthread_join(c, &n);
    printf("condvar: consumed %ld items, sum %ld\n", (long)(intptr_t)n, consumed_sum);
}

/* pthread_exit from a function the thread's start routine called. */
__attribute__((noinline)) static void leave_early(void)
{
    pthread_exit((void *)42);
}

static void *exits_early(void *arg)
{
    (void)arg;
    leave_early();
    return (void *)1;
}

static sem_t detached_done;
static int detached_ran[4];

static void *detached(void *arg)
{
    detached_ran[(intptr_t)arg] = 1;
    sem_post(&detached_done);
    return 0;
}

static void exits_and_detached(void)
{
    pthread_t t;
    void *r;
    pthread_create(&t, 0, exits_early, 0);
    pthread_join(t, &r);
    printf("pthread_exit: joined with %ld\n", (long)(intptr_t)r);
    sem_init(&detached_done, 0, 0);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    for (intptr_t i = 0; i < 4; i++)
        pthread_create(&t, &a, detached, (void *)i);
    for (int i = 0; i < 4; i++)
        sem_wait(&detached_done);
    printf("detached: ran %d %d %d %d\n", detached_ran[0], detached_ran[1], detached_ran[2],
           detached_ran[3]);
}

static __thread int local = 7;
static __thread char local_name[16];

static void *use_local(void *arg)
{
    intptr_t i = (intptr_t)arg;
    char want[16];
    /* Each thread starts with the initial values, not main's. */
    int fresh = local == 7 && local_name[0] == 0;
    local = (int)i * 100;
    snprintf(local_name, sizeof local_name, "thread%ld", (long)i);
    snprintf(want, sizeof want, "thread%ld", (long)i);
    sched_yield();
    usleep(1000);
    return (void *)(intptr_t)(fresh && local == (int)i * 100 && !strcmp(local_name, want));
}

static void thread_locals(void)
{
    pthread_t t[4];
    local = 1;
    for (intptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], 0, use_local, (void *)i);
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ok &= (intptr_t)r == 1;
    }
    printf("__thread: each thread its own copy: %s, main's still %d\n", ok ? "yes" : "no", local);
}

static int pipe_fds[2];

static void *read_pipe(void *arg)
{
    (void)arg;
    static char buf[32];
    ssize_t n = read(pipe_fds[0], buf, sizeof buf - 1);
    if (n < 0)
        return 0;
    buf[n] = 0;
    return buf;
}

static void pipe_between_threads(void)
{
    pthread_t t;
    pipe(pipe_fds);
    pthread_create(&t, 0, read_pipe, 0);
    /* The reader is (most likely) asleep in its read by now. */
    usleep(50000);
    write(pipe_fds[1], "through the pipe", 16);
    void *r;
    pthread_join(t, &r);
    printf("pipe: the reader got \"%s\"\n", r ? (char *)r : "(error)");
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

static __thread volatile sig_atomic_t got_usr1;
static volatile int spinning, sleeping;

static void on_usr1(int s)
{
    (void)s;
    got_usr1 = 1;
}

static void *spin_until_signal(void *arg)
{
    (void)arg;
    spinning = 1;
    while (!got_usr1)
        ;
    return (void *)1;
}

static void *pause_until_signal(void *arg)
{
    (void)arg;
    sleeping = 1;
    int r = pause();
    return (void *)(intptr_t)(r == -1 && errno == EINTR && got_usr1);
}

static void thread_kill(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, 0);
    pthread_t t;
    void *r;
    pthread_create(&t, 0, spin_until_signal, 0);
    while (!spinning)
        sched_yield();
    pthread_kill(t, SIGUSR1);
    pthread_join(t, &r);
    printf("pthread_kill: the spinning thread ran the handler: %s; main did not: %s\n",
           r ? "yes" : "no", got_usr1 ? "no" : "yes");
    pthread_create(&t, 0, pause_until_signal, 0);
    while (!sleeping)
        sched_yield();
    usleep(20000);
    pthread_kill(t, SIGUSR1);
    pthread_join(t, &r);
    printf("pthread_kill: pause in the thread ended with EINTR after the handler: %s\n",
           r ? "yes" : "no");
    printf("pthread_kill: signal 0 to a live thread: %d\n", pthread_kill(pthread_self(), 0));
}

static __thread volatile sig_atomic_t got_usr2;
static volatile int worker_ready;

static void on_usr2(int s)
{
    (void)s;
    got_usr2 = 1;
}

static void *take_usr2(void *arg)
{
    (void)arg;
    worker_ready = 1;
    while (!got_usr2)
        ;
    return (void *)1;
}

/* A signal for the process goes to a thread that does not block it. */
static void process_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, 0);
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_t t;
    pthread_create(&t, 0, take_usr2, 0);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    while (!worker_ready)
        sched_yield();
    kill(getpid(), SIGUSR2);
    void *r;
    pthread_join(t, &r);
    sigset_t pending;
    sigpending(&pending);
    printf("kill: the thread that does not block it took it: %s; the main thread did not: %s; "
           "nothing left pending: %s\n",
           r ? "yes" : "no", got_usr2 ? "no" : "yes", sigismember(&pending, SIGUSR2) ? "no" : "yes");
    pthread_sigmask(SIG_SETMASK, &old, 0);
}

static void timed_wait(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    struct timespec until, after;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&m);
    int r = pthread_cond_timedwait(&c, &m, &until);
    pthread_mutex_unlock(&m);
    clock_gettime(CLOCK_REALTIME, &after);
    int late_enough = after.tv_sec > until.tv_sec ||
                      (after.tv_sec == until.tv_sec && after.tv_nsec >= until.tv_nsec);
    printf("pthread_cond_timedwait: %s, not before the deadline: %s\n",
           r == ETIMEDOUT ? "ETIMEDOUT" : strerror(r), late_enough ? "yes" : "no");
}

static void *sleeper(void *arg)
{
    usleep(100000);
    return arg;
}

static void *fork_here(void *arg)
{
    (void)arg;
    pid_t p = fork();
    if (p == 0) {
        printf("fork: the child of a thread runs with the thread's stack and TLS: %d\n", local);
        _exit(9);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return (void *)(intptr_t)WEXITSTATUS(st);
}

static void fork_threaded(void)
{
    pthread_t t;
    pthread_create(&t, 0, sleeper, (void *)5);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        /* Only the forking thread is in the child. */
        printf("fork: the child of a threaded process runs\n");
        fflush(stdout);
        _exit(7);
    }
    int st;
    waitpid(p, &st, 0);
    void *r;
    pthread_join(t, &r);
    printf("fork: child exited with %d; the parent's thread returned %ld\n", WEXITSTATUS(st),
           (long)(intptr_t)r);
    local = 11;
    pthread_create(&t, 0, fork_here, 0);
    pthread_join(t, &r);
    printf("fork: from a thread, the child exited with %ld\n", (long)(intptr_t)r);
    local = 1;
}

static void *ids(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)((getpid() == (pid_t)(intptr_t)arg) * 2 +
                              (syscall(SYS_gettid) != getpid()));
}

static void many(void)
{
    long sum = 0;
    for (intptr_t i = 0; i < 200; i++) {
        pthread_t t;
        void *r;
        if (pthread_create(&t, 0, ret_square, (void *)i)) {
            printf("many: create %ld failed\n", (long)i);
            return;
        }
        pthread_join(t, &r);
        sum += (intptr_t)r;
    }
    printf("many: 200 threads one after another, sum %ld\n", sum);
    pthread_t t[32];
    for (intptr_t i = 0; i < 32; i++)
        if (pthread_create(&t[i], 0, sleeper, (void *)i)) {
            printf("many: create %ld of 32 failed\n", (long)i);
            return;
        }
    sum = 0;
    for (int i = 0; i < 32; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (intptr_t)r;
    }
    printf("many: 32 threads at once, sum %ld\n", sum);
    pthread_t x;
    void *r;
    pthread_create(&x, 0, ids, (void *)(intptr_t)getpid());
    pthread_join(x, &r);
    printf("ids: getpid is the process's: %s; gettid is not the pid: %s\n",
           (intptr_t)r & 2 ? "yes" : "no", (intptr_t)r & 1 ? "yes" : "no");
}

/* linux/futex.h's numbers (musl's headers do not carry the kernel's). */
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_BITSET 10
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256
#define FUTEX_WAIT_PRIVATE (FUTEX_WAIT | FUTEX_PRIVATE_FLAG)
#define FUTEX_WAKE_PRIVATE (FUTEX_WAKE | FUTEX_PRIVATE_FLAG)
#define FUTEX_CMP_REQUEUE_PRIVATE (FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG)

/* Faults go to the faulting thread: a page fault (through the region manager) and a CPU
 * exception (ud2: through proc), each caught by a handler that runs in that thread. */
static __thread sigjmp_buf fault_jump;
static __thread volatile int faults_here;

static void on_segv(int s)
{
    (void)s;
    faults_here++;
    siglongjmp(fault_jump, 1);
}

static void on_ill(int s, siginfo_t *si, void *uc)
{
    (void)s;
    (void)si;
    faults_here++;
    ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP] += 2;
}

static void *fault_in_thread(void *arg)
{
    (void)arg;
    static volatile int *volatile unmapped = (int *)8;
    if (!sigsetjmp(fault_jump, 1))
        *unmapped = 1;
    __asm__ volatile("ud2");
    return (void *)(intptr_t)faults_here;
}

static void faults(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, 0);
    sa.sa_sigaction = on_ill;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &sa, 0);
    pthread_t t;
    void *r;
    pthread_create(&t, 0, fault_in_thread, 0);
    pthread_join(t, &r);
    printf("faults: the thread caught %ld faults itself; main caught %d\n", (long)(intptr_t)r,
           faults_here);
}

static void *exec_from_thread(void *arg)
{
    char *argv[] = {(char *)arg, "child", 0};
    execv(argv[0], argv);
    return 0;
}

static sem_t hold;

static void *held(void *arg)
{
    sem_wait(&hold);
    return arg;
}

/* /proc counts the threads (status's Threads:, stat's num_threads). */
static void proc_threads(void)
{
    pthread_t t[3];
    sem_init(&hold, 0, 0);
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], 0, held, 0);
    char buf[4096];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "Threads:", 8))
            printf("/proc/self/status: %s", buf);
    if (f)
        fclose(f);
    f = fopen("/proc/self/stat", "r");
    if (f && fgets(buf, sizeof buf, f)) {
        char *p = strrchr(buf, ')');
        int field = 2;
        long n = -1;
        for (char *q = p; q && *q; q++)
            if (*q == ' ' && ++field == 20)
                n = strtol(q + 1, 0, 10);
        printf("/proc/self/stat: num_threads %ld\n", n);
    }
    if (f)
        fclose(f);
    for (int i = 0; i < 3; i++)
        sem_post(&hold);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], 0);
}

static long futex(void *addr, int op, int val, void *timeout, void *addr2, int val3)
{
    long r = syscall(SYS_futex, addr, op, val, timeout, addr2, val3);
    return r < 0 ? -errno : r;
}

static const char *err(long r)
{
    static char b[32];
    switch (r) {
    case -EFAULT: return "EFAULT";
    case -EINVAL: return "EINVAL";
    case -ENOSYS: return "ENOSYS";
    case -EAGAIN: return "EAGAIN";
    case -ETIMEDOUT: return "ETIMEDOUT";
    }
    snprintf(b, sizeof b, "%ld", r);
    return b;
}

static void futex_errors(void)
{
    static int word = 1;
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    printf("futex: wait on an unmapped address: %s\n",
           err(futex((void *)8, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0)));
    printf("futex: wait on a changed value: %s\n",
           err(futex(&word, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0)));
    printf("futex: wait with a timeout: %s\n",
           err(futex(&word, FUTEX_WAIT_PRIVATE, 1, &ten_ms, 0, 0)));
    printf("futex: unknown op: %s\n", err(futex(&word, 99, 0, 0, 0, 0)));
    printf("futex: wake with an empty bitset: %s\n",
           err(futex(&word, FUTEX_WAKE_BITSET, 1, 0, 0, 0)));
    printf("futex: misaligned address: %s\n",
           err(futex((char *)&word + 1, FUTEX_WAKE, 1, 0, 0, 0)));
    printf("futex: wake with no waiter: %s\n", err(futex(&word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0)));
    printf("futex: cmp_requeue with a changed value: %s\n",
           err(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)1, &word, 5)));
    printf("futex: realtime clock on a wake: %s\n",
           err(futex(&word, FUTEX_WAKE | FUTEX_CLOCK_REALTIME, 1, 0, 0, 0)));
    struct timespec bad = {0, 2000000000};
    printf("futex: malformed timeout: %s\n",
           err(futex(&word, FUTEX_WAIT_PRIVATE, 1, &bad, 0, 0)));
}

static void *exit_three(void *arg)
{
    (void)arg;
    usleep(20000);
    exit(3);
}

static void *last_one(void *arg)
{
    (void)arg;
    usleep(50000);
    printf("mainexit: the last thread ends the process\n");
    return 0;
}

static void *block_forever(void *arg)
{
    (void)arg;
    while (pause() != 0 || 1)
        ;
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, 0, _IONBF, 0);
    if (argc > 1 && !strcmp(argv[1], "exit")) {
        pthread_t t;
        pthread_create(&t, 0, exit_three, 0);
        pthread_join(t, 0);
        printf("exit: not reached\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "child")) {
        char buf[256];
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(buf, sizeof buf, f))
            if (!strncmp(buf, "Threads:", 8))
                printf("execve: the new program runs with %s", buf);
        return 4;
    }
    if (argc > 1 && !strcmp(argv[1], "exec")) {
        /* execve from a thread other than the main one ends every thread of the old image. */
        pthread_t t, u;
        pthread_create(&u, 0, block_forever, 0);
        pthread_create(&t, 0, exec_from_thread, argv[0]);
        pthread_join(t, 0);
        printf("exec: not reached\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "mainexit")) {
        pthread_t t;
        pthread_create(&t, 0, last_one, 0);
        pthread_exit(0);
    }
    if (argc > 1 && !strcmp(argv[1], "bomb")) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 16384);
        int n = 0, r;
        pthread_t t;
        while ((r = pthread_create(&t, &a, block_forever, 0)) == 0 && n < 100000)
            n++;
        /* The process still works. */
        int fds[2];
        char c = 0;
        int ok = r == EAGAIN && pipe(fds) == 0 && write(fds[1], "x", 1) == 1 &&
                 read(fds[0], &c, 1) == 1 && c == 'x';
        printf(ok ? "threads: survived\n" : "threads: FAIL (%d threads, error %d)\n", n, r);
        exit(0);
    }
    if (argc > 1 && !strcmp(argv[1], "condvar")) {
        condvar();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "kill")) {
        thread_kill();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "pipe")) {
        pipe_between_threads();
        return 0;
    }
    joins();
    mutex();
    condvar();
    exits_and_detached();
    thread_locals();
    pipe_between_threads();
    thread_kill();
    process_signal();
    timed_wait();
    fork_threaded();
    many();
    proc_threads();
    faults();
    futex_errors();
    return 0;
}
