/* File mappings read page by page, compared with Linux: what fault-around may map beside a
 * faulting page (lib/rm, the ext2 PFS's `map`) must be the file's bytes and nothing else. A
 * file of 40 pages and a half (each page its own pattern) is read in full by a child first
 * (so its pages count as used and the PFS maps them around later faults), then the parent
 * checks every page of a read-only mapping, a private writable mapping whose written pages
 * stay its own while it reads their neighbours, the half page at the end (zeros past the
 * file), and a mapping made after the file grew and one of its pages was rewritten. Only the
 * parent prints. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096
#define PAGES 40
#define NAME "mapfile.data"

static unsigned char pattern(int page, int i)
{
	return (unsigned char)(page * 7 + 1 + (i % 13));
}

/* How the bytes of page `p` at `m` differ from the file's pattern: 0 if not at all. */
static long page_diff(const unsigned char *m, int p, int len)
{
	long bad = 0;
	for (int i = 0; i < len; i++)
		bad += m[i] != pattern(p, i);
	return bad;
}

static unsigned long sum(const unsigned char *m, long len)
{
	unsigned long s = 0;
	for (long i = 0; i < len; i++)
		s = s * 31 + m[i];
	return s;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	unlink(NAME);
	int fd = open(NAME, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	unsigned char buf[PAGE];
	for (int p = 0; p <= PAGES; p++) {
		for (int i = 0; i < PAGE; i++)
			buf[i] = pattern(p, i);
		/* The last page is half a page. */
		if (write(fd, buf, p == PAGES ? PAGE / 2 : PAGE) < 0) {
			perror("write");
			return 1;
		}
	}
	long size = (long)PAGES * PAGE + PAGE / 2;
	long len = (long)(PAGES + 1) * PAGE;

	/* A child reads every page: the PFS learns them as used. */
	pid_t c = fork();
	if (c == 0) {
		unsigned char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED)
			_exit(2);
		unsigned long s = 0;
		for (int p = 0; p <= PAGES; p++)
			s += m[(long)p * PAGE];
		_exit(s ? 0 : 3);
	}
	int st = 0;
	waitpid(c, &st, 0);
	printf("child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));

	/* Read-only: every page is the file's, in an order that faults in the middle of runs. */
	const unsigned char *r = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	long bad = 0;
	int order[] = {3, 0, 20, 19, 1, 39, 2, 21, 38};
	for (unsigned k = 0; k < sizeof order / sizeof order[0]; k++)
		bad += page_diff(r + (long)order[k] * PAGE, order[k], PAGE);
	for (int p = 0; p < PAGES; p++)
		bad += page_diff(r + (long)p * PAGE, p, PAGE);
	bad += page_diff(r + (long)PAGES * PAGE, PAGES, PAGE / 2);
	long tail = 0;
	for (int i = PAGE / 2; i < PAGE; i++)
		tail += r[(long)PAGES * PAGE + i];
	printf("read-only: %ld bytes differ, past the end %ld, sum %lx\n", bad, tail, sum(r, size));

	/* Private and writable: written pages stay private while their neighbours are read. */
	unsigned char *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (w == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(w + 5L * PAGE, 0xaa, PAGE);
	memset(w + 9L * PAGE, 0xbb, 100);
	/* A fork: parent and child hold the written pages as private copies not mapped yet (the
	 * fork took the mappings), and each read of a page before one maps around it. */
	c = fork();
	if (c == 0) {
		long wrong = page_diff(w + 4L * PAGE, 4, PAGE) + page_diff(w + 8L * PAGE, 8, PAGE);
		for (int i = 0; i < PAGE; i++)
			wrong += w[5L * PAGE + i] != 0xaa;
		for (int i = 0; i < 100; i++)
			wrong += w[9L * PAGE + i] != 0xbb;
		_exit(wrong ? 1 : 0);
	}
	waitpid(c, &st, 0);
	printf("private, the child: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	bad = 0;
	for (int p = 0; p < PAGES; p++) {
		if (p == 5 || p == 9)
			continue;
		bad += page_diff(w + (long)p * PAGE, p, PAGE);
	}
	long five = 0, nine = 0;
	for (int i = 0; i < PAGE; i++)
		five += w[5L * PAGE + i] == 0xaa;
	for (int i = 0; i < 100; i++)
		nine += w[9L * PAGE + i] == 0xbb;
	long rest = 0;
	for (int i = 100; i < PAGE; i++)
		rest += w[9L * PAGE + i] != pattern(9, i);
	printf("private: %ld bytes differ elsewhere, page 5 %ld of %d written, page 9 %ld written "
	       "and %ld differ after, the file %s\n",
	       bad, five, PAGE, nine, rest, page_diff(r + 5L * PAGE, 5, PAGE) ? "changed" : "unchanged");
	munmap(w, len);
	munmap((void *)r, len);

	/* The file grows by a page and page 20 is rewritten: a new mapping shows both. */
	for (int i = 0; i < PAGE; i++)
		buf[i] = 0x5a;
	if (pwrite(fd, buf, PAGE, 20L * PAGE) != PAGE || pwrite(fd, buf, PAGE, size) != PAGE) {
		perror("pwrite");
		return 1;
	}
	long len2 = len + PAGE;
	r = mmap(NULL, len2, PROT_READ, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	long new20 = 0, grown = 0;
	(void)r[19L * PAGE];
	for (int i = 0; i < PAGE; i++)
		new20 += r[20L * PAGE + i] == 0x5a;
	for (long i = size; i < size + PAGE; i++)
		grown += r[i] == 0x5a;
	printf("after writes: page 20 %ld new bytes, %ld bytes grown, sum %lx\n", new20, grown,
	       sum(r, size + PAGE));
	munmap((void *)r, len2);
	close(fd);
	unlink(NAME);
	return 0;
}
