/* Issue 14, a library's pages handed on: proc builds every process's library heap and stack
 * from pool pages an earlier process had, and zeroes only those the kernel says that process
 * wrote (`task_dirty`). A child writes a marker into a page of its library's first heap and one
 * of its library stack that the library leaves untouched, then exits; the next child, built on
 * the same pages, must find the marker nowhere in its library's heap and stack. Rounds repeat
 * it. sawmill only: the addresses are the Linux personality's layout
 * (personality/linux/src/layout.rs: LIB_HEAP, LIB_STACK_TOP, LIB_STACK_BYTES: the library's
 * 96 KiB stack, the start's part above the system calls' part; the scenario's 64 KiB first
 * heap), which Linux does not map.
 *
 * proc also builds the next process into an ended one's task, emptied by `task_reset`
 * (docs/ARCHITECTURE.md §9): a child maps pages at a fixed address (a file's, an anonymous one)
 * and marks them; the next child, built into that task, must fault there (no mapping of the last
 * process left). */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL
#define LIB_HEAP 0x70100000UL
#define HEAP_PAGES 16
#define LIB_STACK_TOP 0x78000000UL
#define STACK_PAGES 24
#define ROUNDS 4

static void marker(unsigned char *m) {
    for (int i = 0; i < 64; i++) m[i] = (unsigned char)(0xa5 ^ (i * 37));
}

/* Writes the marker into heap page 13 and the lowest stack page (the library, started and
 * exiting, touches neither: its system calls use the top pages of the stack's lower part) and
 * checks it is there. */
static int write_marks(void) {
    unsigned char m[64];
    marker(m);
    unsigned char *heap = (unsigned char *)(LIB_HEAP + 13 * PAGE + 128);
    unsigned char *stack = (unsigned char *)(LIB_STACK_TOP - STACK_PAGES * PAGE + 256);
    memcpy(heap, m, sizeof m);
    memcpy(stack, m, sizeof m);
    return memcmp(heap, m, sizeof m) == 0 && memcmp(stack, m, sizeof m) == 0;
}

/* How many copies of the marker the library's heap and stack hold. */
static int count_marks(void) {
    unsigned char m[64];
    marker(m);
    int found = 0;
    const unsigned long ranges[2][2] = {
        {LIB_HEAP, HEAP_PAGES * PAGE},
        {LIB_STACK_TOP - STACK_PAGES * PAGE, STACK_PAGES * PAGE},
    };
    for (int r = 0; r < 2; r++) {
        const unsigned char *p = (const unsigned char *)ranges[r][0];
        for (unsigned long off = 0; off + sizeof m <= ranges[r][1]; off += 64) {
            if (memcmp(p + off, m, sizeof m) == 0) found++;
        }
    }
    return found;
}

/* Below the library (LIB_BASE), above any program's image. */
#define LEFT_AT 0x30000000UL

/* Maps a page at LEFT_AT, marked, and leaves it behind at its exit: an anonymous page (mem
 * takes its frame back and revokes it) and a page of a file (the file system's cache page,
 * which outlives the process: only the task's emptying takes the mapping away). */
static int leave_mapping(void) {
    unsigned char m[64];
    marker(m);
    static unsigned char page[PAGE];
    memcpy(page, m, sizeof m);
    int fd = open("/left", O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, page, PAGE) != (ssize_t)PAGE) return 0;
    void *p = mmap((void *)LEFT_AT, PAGE, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p != (void *)LEFT_AT) return 0;
    void *q = mmap((void *)(LEFT_AT + PAGE), PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (q != (void *)(LEFT_AT + PAGE)) return 0;
    memcpy(q, m, sizeof m);
    return count_marks() == 0 && memcmp(p, m, sizeof m) == 0 && memcmp(q, m, sizeof m) == 0;
}

static sigjmp_buf faulted;
static void on_segv(int sig) {
    (void)sig;
    siglongjmp(faulted, 1);
}

/* 0 if both pages at LEFT_AT fault, 1 if one reads as the marker (the last process's page),
 * 2 if one reads otherwise. */
static int find_mapping(void) {
    unsigned char m[64];
    marker(m);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, 0);
    for (int i = 0; i < 2; i++) {
        if (sigsetjmp(faulted, 1)) continue;
        volatile unsigned char *p = (volatile unsigned char *)(LEFT_AT + i * PAGE);
        unsigned char seen[64];
        for (int j = 0; j < 64; j++) seen[j] = p[j];
        return memcmp(seen, m, sizeof m) == 0 ? 1 : 2;
    }
    return 0;
}

static int child(int (*f)(void)) {
    pid_t pid = fork();
    if (pid == 0) _exit(f());
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

int main(void) {
    int fails = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int wrote = child(write_marks);
        int seen = child(count_marks);
        printf("zeroed: round %d: marks written %s, found by the next process %d\n", round,
               wrote == 1 ? "yes" : "no", seen);
        if (wrote != 1 || seen != 0) fails++;
    }
    for (int round = 0; round < ROUNDS; round++) {
        int left = child(leave_mapping);
        int found = child(find_mapping);
        printf("zeroed: task round %d: mapping left %s, the next process %s\n", round,
               left == 1 ? "yes" : "no",
               found == 0 ? "faults there" : found == 1 ? "reads its page" : "reads another page");
        if (left != 1 || found != 0) fails++;
    }
    printf("zeroed: %s\n", fails ? "FAIL" : "PASS no process saw another's library pages");
    return fails != 0;
}
