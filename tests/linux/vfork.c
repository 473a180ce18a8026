/* vfork's child runs in its parent's memory until it execs or ends, compared with Linux: its
 * writes to globals (.data and .bss), the heap and a private anonymous mapping are the
 * parent's afterwards; the same for clone(CLONE_VM | CLONE_VFORK) on a stack of the parent's
 * (musl's posix_spawn); clone(CLONE_VFORK) without CLONE_VM gets a copy (its writes are its
 * own), and so does a fork by a vfork child; posix_spawn of a missing program reports
 * ENOENT, of a real one runs it; a signal that comes while the parent waits for its vfork
 * child (caught, with or without SA_RESTART) neither fails nor repeats the vfork: it is
 * delivered once vfork has returned the child's pid. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile int in_data = 1;
static volatile int in_bss;

static volatile int caught;
static void on_usr1(int s)
{
	(void)s;
	caught++;
}

/* The child of a vfork signals its waiting parent, then lets time pass before it ends. */
static void vfork_signalled(const char *what, int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	caught = 0;
	static volatile int runs;
	runs = 0;
	pid_t c = vfork();
	if (c == 0) {
		runs++;
		kill(getppid(), SIGUSR1);
		struct timespec t = { 0, 100 * 1000 * 1000 };
		nanosleep(&t, NULL);
		_exit(0);
	}
	int e = errno;
	int w;
	while ((w = waitpid(-1, NULL, 0)) < 0 && errno == EINTR)
		;
	printf("vfork with a signal meanwhile (%s): %s, child ran %d time(s), handler ran %d\n", what,
	       c > 0 ? "pid" : strerror(e), runs, caught);
	signal(SIGUSR1, SIG_DFL);
}

static int clone_child(void *arg)
{
	in_data = 30;
	in_bss = 31;
	*(volatile int *)arg = 32;
	_exit(0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	volatile int *heap = malloc(64 * sizeof(int));
	volatile int *anon = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	heap[0] = 0;
	anon[0] = 0;

	pid_t c = vfork();
	if (c == 0) {
		in_data = 10;
		in_bss = 11;
		heap[0] = 12;
		anon[0] = 13;
		_exit(0);
	}
	waitpid(c, NULL, 0);
	printf("vfork child's writes: data %d bss %d heap %d anon %d\n", in_data, in_bss, heap[0], anon[0]);

	/* A fork by the vfork child copies the memory it borrows: the grandchild's write is its
	 * own, the vfork child's the parent's. */
	c = vfork();
	if (c == 0) {
		in_data = 40;
		pid_t g = fork();
		if (g == 0) {
			in_data = 41;
			_exit(0);
		}
		waitpid(g, NULL, 0);
		_exit(in_data == 40 ? 0 : 1);
	}
	int st0;
	waitpid(c, &st0, 0);
	printf("vfork child's fork: data %d, the vfork child saw its own %s\n", in_data,
	       WEXITSTATUS(st0) == 0 ? "yes" : "no");

	/* After exec the child is another program: the parent's memory is its own again. */
	c = vfork();
	if (c == 0) {
		in_data = 20;
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(c, &st, 0);
	printf("vfork then exec: data %d, status %d\n", in_data, WEXITSTATUS(st));

	vfork_signalled("no SA_RESTART", 0);
	vfork_signalled("SA_RESTART", SA_RESTART);

	/* clone(CLONE_VM | CLONE_VFORK) on a stack of the parent's. */
	static char stack[64 * 1024];
	volatile int on_stack = 0;
	c = clone(clone_child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)&on_stack);
	waitpid(c, NULL, 0);
	printf("clone VM|VFORK: data %d bss %d arg %d\n", in_data, in_bss, on_stack);

	/* CLONE_VFORK alone: a copy. */
	in_data = 1;
	c = clone(clone_child, stack + sizeof stack, CLONE_VFORK | SIGCHLD, (void *)&on_stack);
	waitpid(c, NULL, 0);
	printf("clone VFORK without VM: data %d\n", in_data);

	/* posix_spawn (musl: CLONE_VM | CLONE_VFORK, the exec's failure through a pipe). */
	pid_t p;
	char *argv_missing[] = { "missing", NULL };
	int e = posix_spawn(&p, "/nonexistent/missing", NULL, NULL, argv_missing, environ);
	printf("posix_spawn of a missing program: %s\n", e == ENOENT ? "ENOENT" : strerror(e));
	char *argv_echo[] = { "echo", "spawned", NULL };
	e = posix_spawn(&p, "/bin/echo", NULL, NULL, argv_echo, environ);
	if (e == 0) {
		waitpid(p, &st, 0);
		printf("posix_spawn of echo: status %d\n", WEXITSTATUS(st));
	} else {
		printf("posix_spawn of echo: %s\n", strerror(e));
	}
	return 0;
}
