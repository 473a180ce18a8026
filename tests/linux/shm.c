/* Shared memory across fork, compared with Linux: MAP_SHARED|MAP_ANONYMOUS memory is the same
 * memory in parent and child (each sees the other's writes; a counter both increment with
 * atomics ends at the sum), also after one of them unmaps it or ends; MAP_SHARED of a file is
 * shared too (the file's changes show in both); MAP_PRIVATE stays private (copy-on-write). Only
 * the parent prints. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 20000

static int child_status(pid_t p)
{
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);

	/* Shared anonymous: both ways. */
	volatile int *sh = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	sh[0] = 11;
	sh[1024] = 12;
	pid_t c = fork();
	if (c == 0) {
		int ok = sh[0] == 11 && sh[1024] == 12;
		sh[0] = 21;
		sh[1024] = 22;
		_exit(ok ? 0 : 1);
	}
	printf("child saw the parent's writes: %s\n", child_status(c) == 0 ? "yes" : "no");
	printf("parent sees the child's writes: %d %d\n", sh[0], sh[1024]);

	/* A counter both increment at once. */
	volatile long *counter = (volatile long *)(sh + 16);
	*counter = 0;
	c = fork();
	for (int i = 0; i < ROUNDS; i++)
		__atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
	if (c == 0)
		_exit(0);
	child_status(c);
	printf("counter: %ld\n", *counter);

	/* The parent unmaps; the child still has it and writes; a grandchild of the child too. */
	int go[2], back[2];
	pipe(go);
	pipe(back);
	volatile int *sh2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	sh2[0] = 1;
	c = fork();
	if (c == 0) {
		char x;
		read(go[0], &x, 1);
		int seen = sh2[0];
		sh2[0] = 3;
		pid_t g = fork();
		if (g == 0) {
			sh2[1] = sh2[0] + 1;
			_exit(0);
		}
		waitpid(g, NULL, 0);
		int v[3] = { seen, sh2[0], sh2[1] };
		write(back[1], v, sizeof v);
		_exit(0);
	}
	sh2[0] = 2;
	munmap((void *)sh2, 4096);
	write(go[1], "x", 1);
	int v[3] = { 0, 0, 0 };
	read(back[0], v, sizeof v);
	child_status(c);
	printf("after the parent's munmap the child saw %d, wrote %d, its child wrote %d\n", v[0], v[1], v[2]);

	/* The child ends first; the parent's memory stays. */
	volatile int *sh3 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	c = fork();
	if (c == 0) {
		sh3[5] = 55;
		munmap((void *)sh3, 4096);
		_exit(0);
	}
	child_status(c);
	sh3[6] = 66;
	printf("after the child's end: %d %d\n", sh3[5], sh3[6]);

	/* Private anonymous stays private. */
	volatile int *pr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pr[0] = 7;
	c = fork();
	if (c == 0) {
		pr[0] = 8;
		_exit(pr[0] == 8 ? 0 : 1);
	}
	printf("private: child wrote its own copy: %s, parent still has %d\n",
	       child_status(c) == 0 ? "yes" : "no", pr[0]);

	/* A file mapped shared (read-only: the file servers do not take writes through a
	 * mapping yet): what the child writes to the file shows in the parent's mapping, and what
	 * the parent writes in the child's. */
	int fd = open("shm-file", O_RDWR | O_CREAT | O_TRUNC, 0644);
	pwrite(fd, "parent", 7, 0);
	ftruncate(fd, 4096);
	const char *f = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	c = fork();
	if (c == 0) {
		int ok = strcmp(f, "parent") == 0;
		pwrite(fd, "child", 6, 100);
		char x;
		read(go[0], &x, 1);
		ok = ok && strcmp(f + 200, "later") == 0;
		_exit(ok ? 0 : 1);
	}
	/* The child's write is there once it waits for the parent's. */
	while (f[100] == 0)
		usleep(1000);
	pwrite(fd, "later", 6, 200);
	write(go[1], "x", 1);
	printf("file: the child saw the parent's writes: %s; parent sees \"%s\"\n",
	       child_status(c) == 0 ? "yes" : "no", f + 100);
	/* A file mapped private: the child's write is its own. */
	char *fp = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	strcpy(fp, "parent");
	c = fork();
	if (c == 0) {
		strcpy(fp, "mine");
		_exit(0);
	}
	child_status(c);
	printf("file private: parent sees \"%.6s\"\n", fp);
	close(fd);
	unlink("shm-file");
	return 0;
}
