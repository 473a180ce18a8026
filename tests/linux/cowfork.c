/* Copy-on-write across fork, compared with Linux: pages both sides read after a fork, then
 * written in varied orders (the parent first, the child first, both, one side twice, read then
 * write, after the other side ended), in private anonymous memory, initialised and
 * uninitialised data, the heap and the stack, across a fork of a fork (three sharers), and
 * MAP_SHARED pages that stay shared and writable in both. Each side checks every page it can
 * see against what it must hold and says so through its exit status or a pipe; only the parent
 * prints. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096
#define PAGES 16

/* Initialised data (the program file's pages, private once written) and zero-initialised. */
static char data[PAGES * PAGE] = {1};
static char bss[PAGES * PAGE];

struct area {
	const char *name;
	char *p;
};

static int child_status(pid_t p)
{
	int st = 0;
	if (waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void wait_for(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1)
		_exit(90);
}

static void signal_to(int fd)
{
	if (write(fd, "x", 1) != 1)
		_exit(91);
}

/* Page i of an area holds tag + i in its first, middle and last bytes. */
static void fill(char *p, int tag)
{
	for (int i = 0; i < PAGES; i++) {
		p[i * PAGE] = (char)(tag + i);
		p[i * PAGE + PAGE / 2] = (char)(tag + i);
		p[i * PAGE + PAGE - 1] = (char)(tag + i);
	}
}

static void fill_page(char *p, int i, int tag)
{
	p[i * PAGE] = (char)(tag + i);
	p[i * PAGE + PAGE / 2] = (char)(tag + i);
	p[i * PAGE + PAGE - 1] = (char)(tag + i);
}

/* How many pages of p do not hold tag (page i: tag + i); pages in `skip` (bit i) are not
 * looked at. */
static int wrong(const char *p, int tag, unsigned skip)
{
	int bad = 0;
	for (int i = 0; i < PAGES; i++) {
		if (skip >> i & 1)
			continue;
		char want = (char)(tag + i);
		const volatile char *q = p + i * PAGE;
		if (q[0] != want || q[PAGE / 2] != want || q[PAGE - 1] != want)
			bad++;
	}
	return bad;
}

/* Reads every page (so that each is mapped before the fork). */
static long touch(const char *p)
{
	long s = 0;
	for (int i = 0; i < PAGES; i++)
		s += ((const volatile char *)p)[i * PAGE];
	return s;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	char stack[PAGES * PAGE];
	char *anon = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *heap = malloc(PAGES * PAGE + PAGE);
	heap = (char *)(((unsigned long)heap + PAGE - 1) & ~(unsigned long)(PAGE - 1));
	volatile char *shared = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED || shared == MAP_FAILED || !heap)
		return 1;
	struct area areas[] = {
		{"anonymous", anon}, {"data", data}, {"bss", bss}, {"heap", heap}, {"stack", stack},
	};
	const int n = sizeof areas / sizeof areas[0];

	/* Half of the data pages written before the fork (private), half only read (the file's). */
	for (int a = 0; a < n; a++) {
		if (areas[a].p == data) {
			for (int i = 0; i < PAGES; i += 2)
				fill_page(data, i, 10);
		} else {
			fill(areas[a].p, 10);
		}
	}
	unsigned data_file_pages = 0xaaaa; /* odd pages: never written before the first fork */
	long before = 0;
	for (int a = 0; a < n; a++)
		before += touch(areas[a].p);
	printf("sum before: %ld\n", before);

	/* 1. Both read; the parent writes every page first, then the child checks. */
	int go[2], done[2];
	if (pipe(go) || pipe(done))
		return 1;
	pid_t c = fork();
	if (c == 0) {
		for (int a = 0; a < n; a++)
			touch(areas[a].p);
		signal_to(done[1]);
		wait_for(go[0]);
		int bad = 0;
		for (int a = 0; a < n; a++)
			bad += wrong(areas[a].p, 10, areas[a].p == data ? data_file_pages : 0);
		_exit(bad ? 10 + (bad > 100 ? 100 : bad) : 0);
	}
	wait_for(done[0]);
	for (int a = 0; a < n; a++)
		touch(areas[a].p);
	for (int a = 0; a < n; a++)
		fill(areas[a].p, 20);
	signal_to(go[1]);
	printf("1. parent wrote first: child %d\n", child_status(c));
	int bad = 0;
	for (int a = 0; a < n; a++)
		bad += wrong(areas[a].p, 20, 0);
	printf("1. parent sees its own writes: %d wrong\n", bad);

	/* 2. The child writes first (even pages twice, odd pages after reading them), then the
	 * parent reads, then writes. */
	c = fork();
	if (c == 0) {
		for (int a = 0; a < n; a++) {
			for (int i = 0; i < PAGES; i += 2) {
				fill_page(areas[a].p, i, 30);
				fill_page(areas[a].p, i, 31);
			}
			touch(areas[a].p);
			for (int i = 1; i < PAGES; i += 2)
				fill_page(areas[a].p, i, 31);
		}
		int cbad = 0;
		for (int a = 0; a < n; a++)
			cbad += wrong(areas[a].p, 31, 0);
		signal_to(done[1]);
		wait_for(go[0]);
		/* The parent's writes meanwhile do not show here. */
		for (int a = 0; a < n; a++)
			cbad += wrong(areas[a].p, 31, 0);
		_exit(cbad ? 10 + (cbad > 100 ? 100 : cbad) : 0);
	}
	wait_for(done[0]);
	bad = 0;
	for (int a = 0; a < n; a++)
		bad += wrong(areas[a].p, 20, 0);
	printf("2. child wrote first: parent sees %d wrong\n", bad);
	for (int a = 0; a < n; a++)
		for (int i = PAGES - 1; i >= 0; i--)
			fill_page(areas[a].p, i, 40);
	signal_to(go[1]);
	printf("2. child: %d\n", child_status(c));
	bad = 0;
	for (int a = 0; a < n; a++)
		bad += wrong(areas[a].p, 40, 0);
	printf("2. parent sees its own writes: %d wrong\n", bad);

	/* 3. The child only reads and ends; then the parent writes some pages, reads the others, and
	 * a second child sees exactly the parent's pages. */
	c = fork();
	if (c == 0) {
		int cbad = 0;
		for (int a = 0; a < n; a++)
			cbad += wrong(areas[a].p, 40, 0);
		_exit(cbad ? 10 : 0);
	}
	printf("3. a reading child: %d\n", child_status(c));
	for (int a = 0; a < n; a++)
		for (int i = 0; i < PAGES; i += 3)
			fill_page(areas[a].p, i, 50);
	c = fork();
	if (c == 0) {
		int cbad = 0;
		for (int a = 0; a < n; a++)
			cbad += wrong(areas[a].p, 50, 0xffff & ~0x9249) + wrong(areas[a].p, 40, 0x9249);
		_exit(cbad ? 10 + (cbad > 100 ? 100 : cbad) : 0);
	}
	printf("3. the next child sees the parent's pages: %d\n", child_status(c));

	/* 4. Three sharers: the child forks a grandchild; each writes a different third of the pages
	 * after all have read them, and each sees only its own writes. */
	for (int a = 0; a < n; a++)
		fill(areas[a].p, 60);
	int go2[2], done2[2];
	if (pipe(go2) || pipe(done2))
		return 1;
	c = fork();
	if (c == 0) {
		pid_t g = fork();
		int me = g == 0 ? 2 : 1;
		for (int a = 0; a < n; a++)
			touch(areas[a].p);
		signal_to(g == 0 ? done2[1] : done[1]);
		wait_for(g == 0 ? go2[0] : go[0]);
		for (int a = 0; a < n; a++)
			for (int i = me; i < PAGES; i += 3)
				fill_page(areas[a].p, i, 60 + 10 * me);
		int cbad = 0;
		for (int a = 0; a < n; a++)
			for (int i = 0; i < PAGES; i++) {
				char want = (char)((i % 3 == me ? 60 + 10 * me : 60) + i);
				cbad += areas[a].p[i * PAGE + PAGE / 2] != want;
			}
		if (g == 0)
			_exit(cbad ? 10 : 0);
		int gs = child_status(g);
		_exit(cbad ? 10 : gs ? 20 + gs : 0);
	}
	wait_for(done[0]);
	wait_for(done2[0]);
	for (int a = 0; a < n; a++)
		touch(areas[a].p);
	signal_to(go2[1]);
	for (int a = 0; a < n; a++)
		for (int i = 0; i < PAGES; i += 3)
			fill_page(areas[a].p, i, 60);
	for (int a = 0; a < n; a++)
		for (int i = 0; i < PAGES; i += 3)
			fill_page(areas[a].p, i, 90);
	signal_to(go[1]);
	printf("4. three sharers: child and grandchild %d\n", child_status(c));
	bad = 0;
	for (int a = 0; a < n; a++)
		for (int i = 0; i < PAGES; i++) {
			char want = (char)((i % 3 == 0 ? 90 : 60) + i);
			bad += areas[a].p[i * PAGE + PAGE / 2] != want;
		}
	printf("4. parent sees its own writes: %d wrong\n", bad);

	/* 5. MAP_SHARED stays shared and writable in both, before and after private writes. */
	for (int i = 0; i < PAGES; i++)
		shared[i * PAGE] = (char)i;
	c = fork();
	if (c == 0) {
		int cbad = 0;
		for (int i = 0; i < PAGES; i++)
			cbad += shared[i * PAGE] != (char)i;
		for (int i = 0; i < PAGES; i += 2)
			shared[i * PAGE] = (char)(100 + i);
		fill(anon, 70);
		signal_to(done[1]);
		wait_for(go[0]);
		for (int i = 1; i < PAGES; i += 2)
			cbad += shared[i * PAGE] != (char)(110 + i);
		_exit(cbad ? 10 : 0);
	}
	wait_for(done[0]);
	bad = 0;
	for (int i = 0; i < PAGES; i++)
		bad += shared[i * PAGE] != (char)(i % 2 ? i : 100 + i);
	for (int i = 1; i < PAGES; i += 2)
		shared[i * PAGE] = (char)(110 + i);
	signal_to(go[1]);
	printf("5. shared: parent sees the child's writes: %d wrong; child %d\n", bad, child_status(c));
	printf("5. private stays private: %d wrong\n", wrong(anon, 60, 0x9249) + wrong(anon, 90, 0xffff & ~0x9249));

	long after = 0;
	for (int a = 0; a < n; a++)
		after += touch(areas[a].p);
	printf("sum after: %ld\n", after);
	return 0;
}
