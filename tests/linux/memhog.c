/* A process that allocates without end, compared with Linux: it gets ENOMEM (malloc returns
 * NULL) and ends alone; its parent, a sibling that holds memory meanwhile, and processes made
 * afterwards keep running and can allocate (and touch) memory again, as often as a hog comes.
 * Both allocation paths of malloc: large blocks (mmap) and small ones (brk). On the host the
 * hog's address space is bounded (RLIMIT_AS) so that it cannot take the machine's memory;
 * sawmill bounds it by what memory is left for everyone. Counts of what a hog got differ by
 * design: only that it got some and then ENOMEM is printed. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1L << 20)

/* Allocates `block` bytes at a time, touching every page, until malloc fails: exit 3 if it got
 * at least 8 MiB first, 4 if less. */
static void hog(long block)
{
	struct rlimit lim = { 256 * MiB, 256 * MiB };
	setrlimit(RLIMIT_AS, &lim);
	long got = 0;
	for (;;) {
		char *p = malloc(block);
		if (!p)
			_exit(got >= 8 * MiB ? 3 : 4);
		memset(p, 1, block);
		got += block;
	}
}

static int run(void (*f)(long), long arg)
{
	pid_t c = fork();
	if (c == 0) {
		f(arg);
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Allocates and touches `bytes`; exit 0 if it could. */
static void use(long bytes)
{
	char *p = malloc(bytes);
	if (!p)
		_exit(1);
	memset(p, 2, bytes);
	for (long i = 0; i < bytes; i += 4096)
		if (p[i] != 2)
			_exit(2);
	free(p);
	_exit(0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	/* A sibling holds 8 MiB, touched, across the hogs; it checks it at the end. */
	int go[2];
	pipe(go);
	pid_t keeper = fork();
	if (keeper == 0) {
		char *p = malloc(8 * MiB);
		if (!p)
			_exit(1);
		memset(p, 5, 8 * MiB);
		char x;
		read(go[0], &x, 1);
		for (long i = 0; i < 8 * MiB; i += 4096)
			if (p[i] != 5)
				_exit(2);
		_exit(0);
	}
	for (int round = 1; round <= 2; round++) {
		printf("round %d: a hog of 1 MiB blocks ends with %d\n", round, run(hog, MiB));
		printf("round %d: a hog of 16 KiB blocks ends with %d\n", round, run(hog, 16 * 1024));
		printf("round %d: a new process allocates 8 MiB: %d\n", round, run(use, 8 * MiB));
	}
	char *mine = malloc(8 * MiB);
	if (mine)
		memset(mine, 3, 8 * MiB);
	printf("the parent allocates 8 MiB: %s\n", mine ? "yes" : "no");
	write(go[1], "x", 1);
	int st = 0;
	waitpid(keeper, &st, 0);
	printf("the keeper's memory survived: %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "yes" : "no");
	return 0;
}
