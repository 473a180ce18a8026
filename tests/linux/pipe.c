/* Pipes and waiting, compared with Linux: pipe2's flags (O_CLOEXEC, O_NONBLOCK, bad flags),
 * write/read, FIONREAD, fstat (a FIFO), lseek (ESPIPE), F_GETPIPE_SZ, F_SETFL O_NONBLOCK,
 * EAGAIN on an empty and on a full (64 KiB) pipe, end of file once the last writer is gone
 * (with a dup), EPIPE once the last reader is gone (SIGPIPE ignored), and poll / ppoll /
 * select / pselect readiness of pipe ends, a regular file, standard output and bad
 * descriptors, with zero and finite timeouts. One process: nothing here may block. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static void result(const char *what, long r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %ld\n", what, r);
}

static void poll1(const char *what, int fd, short events, int timeout)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r = poll(&p, 1, timeout);
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %d revents %#x\n", what, r, p.revents);
}

static char big[65536 + 4096];

int main(void)
{
	int fds[2], p2[2];
	char buf[256];
	int n;

	result("pipe2 bad flags", pipe2(fds, 0x1));
	result("pipe2", pipe2(fds, O_CLOEXEC | O_NONBLOCK));
	/* (Descriptor numbers are not printed: the host's harness may hold some open.) */
	printf("fds differ %d\n", fds[0] != fds[1]);
	for (int i = 0; i < 2; i++)
		printf("end %d: fd flags %d, status %#x\n", i, fcntl(fds[i], F_GETFD),
		       fcntl(fds[i], F_GETFL) & (O_ACCMODE | O_NONBLOCK));
	result("F_GETPIPE_SZ", fcntl(fds[0], F_GETPIPE_SZ));

	/* Empty, non-blocking. */
	result("read empty", read(fds[0], buf, sizeof buf));
	poll1("poll read end, empty", fds[0], POLLIN, 0);
	poll1("poll write end", fds[1], POLLOUT | POLLIN, 0);

	result("write hello", write(fds[1], "hello", 5));
	ioctl(fds[0], FIONREAD, &n);
	printf("FIONREAD %d\n", n);
	poll1("poll read end, data", fds[0], POLLIN | POLLRDNORM, 0);
	n = read(fds[0], buf, 3);
	printf("read %d: %.*s\n", n, n > 0 ? n : 0, buf);
	n = read(fds[0], buf, sizeof buf);
	printf("read %d: %.*s\n", n, n > 0 ? n : 0, buf);
	result("write to the read end", write(fds[0], "x", 1));
	result("read from the write end", read(fds[1], buf, 1));
	result("lseek", lseek(fds[0], 0, SEEK_SET));
	result("pread", pread(fds[0], buf, 1, 0));

	struct stat st;
	if (fstat(fds[0], &st) == 0)
		printf("fstat: fifo %d, perm %o, nlink %ld\n", S_ISFIFO(st.st_mode),
		       st.st_mode & 07777, (long)st.st_nlink);

	/* Full: 64 KiB in page-sized writes, then nothing more fits. */
	long total = 0;
	memset(big, 'b', sizeof big);
	for (;;) {
		long w = write(fds[1], big, 4096);
		if (w < 0) {
			printf("filling stopped: %s\n", strerror(errno));
			break;
		}
		total += w;
	}
	printf("pipe holds %ld\n", total);
	result("write 1 to a full pipe", write(fds[1], "x", 1));
	poll1("poll write end, full", fds[1], POLLOUT, 0);
	poll1("poll write end, full, 30 ms", fds[1], POLLOUT, 30);
	result("read 4096", read(fds[0], big, 4096));
	poll1("poll write end, a page free", fds[1], POLLOUT, 0);
	result("write 4096 again", write(fds[1], big, 4096));
	total = 0;
	for (;;) {
		long r = read(fds[0], big, sizeof big);
		if (r <= 0)
			break;
		total += r;
	}
	printf("drained %ld\n", total);

	/* F_SETFL: blocking and back. */
	result("F_SETFL 0", fcntl(fds[1], F_SETFL, 0));
	printf("status %#x\n", fcntl(fds[1], F_GETFL) & (O_ACCMODE | O_NONBLOCK));
	result("F_SETFL O_NONBLOCK", fcntl(fds[1], F_SETFL, O_NONBLOCK));
	printf("status %#x\n", fcntl(fds[1], F_GETFL) & (O_ACCMODE | O_NONBLOCK));

	/* End of file once every writer is gone, a dup included. */
	int w2 = dup(fds[1]);
	printf("dup cloexec %d\n", fcntl(w2, F_GETFD));
	result("write abc", write(fds[1], "abc", 3));
	close(fds[1]);
	result("write via the dup", write(w2, "de", 2));
	poll1("poll read end, writer left", fds[0], POLLIN, 0);
	close(w2);
	poll1("poll read end, data and no writer", fds[0], POLLIN, 0);
	n = read(fds[0], buf, sizeof buf);
	printf("read %d: %.*s\n", n, n > 0 ? n : 0, buf);
	result("read at end of file", read(fds[0], buf, sizeof buf));
	poll1("poll read end, end of file", fds[0], POLLIN, 0);
	close(fds[0]);

	/* EPIPE once every reader is gone. */
	signal(SIGPIPE, SIG_IGN);
	result("pipe", pipe(p2));
	close(p2[0]);
	result("write without a reader", write(p2[1], "x", 1));
	poll1("poll write end, no reader", p2[1], POLLOUT, 0);
	close(p2[1]);

	/* readv returns what is there (not waiting for a later vector); writev is one write. */
	result("pipe", pipe(p2));
	{
		char a[5], b[100];
		struct iovec out[2] = { { "ab", 2 }, { "cde", 3 } };
		struct iovec in[2] = { { a, 3 }, { b, sizeof b } };
		result("writev", writev(p2[1], out, 2));
		n = readv(p2[0], in, 2);
		printf("readv %d: %.3s %.2s\n", n, a, b);
		in[0].iov_len = 5;
		write(p2[1], "xyz", 3);
		result("readv", readv(p2[0], in, 2));
	}
	close(p2[0]);
	close(p2[1]);

	/* poll and select over pipes, a file, standard output, bad descriptors. */
	result("pipe", pipe(p2));
	int file = open("pipe-test.tmp", O_CREAT | O_RDWR | O_TRUNC, 0644);
	unlink("pipe-test.tmp");
	poll1("poll a regular file", file, POLLIN | POLLOUT, 0);
	poll1("poll standard output", 1, POLLOUT, 0);
	poll1("poll a closed descriptor", 99, POLLIN, 0);
	poll1("poll fd -1", -1, POLLIN, 0);
	poll1("poll empty pipe, 20 ms", p2[0], POLLIN, 20);
	{
		struct pollfd ps[3] = { { p2[0], POLLIN, 0 }, { p2[1], POLLOUT, 0 }, { 99, 0, 0 } };
		result("poll three", poll(ps, 3, 0));
		printf("revents %#x %#x %#x\n", ps[0].revents, ps[1].revents, ps[2].revents);
		struct timespec ts = { 0, 10000000 };
		result("ppoll 10 ms", ppoll(ps, 1, &ts, NULL));
	}
	fd_set r, w;
	struct timeval tv = { 0, 0 };
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(p2[0], &r);
	FD_SET(p2[1], &w);
	result("select empty", select(p2[1] + 1, &r, &w, NULL, &tv));
	printf("set: read %d write %d\n", FD_ISSET(p2[0], &r), FD_ISSET(p2[1], &w));
	write(p2[1], "z", 1);
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(p2[0], &r);
	FD_SET(p2[1], &w);
	FD_SET(file, &r);
	tv.tv_usec = 0;
	result("select data", select(file + 1, &r, &w, NULL, &tv));
	printf("set: read %d write %d file %d\n", FD_ISSET(p2[0], &r), FD_ISSET(p2[1], &w),
	       FD_ISSET(file, &r));
	/* Linux ignores descriptors beyond its table's current size (64 until it grows), so the
	 * closed descriptor stays below 64 for the answer not to depend on the host's table. */
	FD_ZERO(&r);
	FD_SET(50, &r);
	tv.tv_usec = 0;
	result("select a closed descriptor", select(51, &r, NULL, NULL, &tv));
	result("select nfds -1", select(-1, NULL, NULL, NULL, &tv));
	tv.tv_sec = 0;
	tv.tv_usec = 20000;
	FD_ZERO(&r);
	read(p2[0], buf, 1);
	FD_SET(p2[0], &r);
	result("select empty, 20 ms", select(p2[0] + 1, &r, NULL, NULL, &tv));
	printf("timeval left %ld.%06ld\n", (long)tv.tv_sec, (long)tv.tv_usec);
	struct timespec ts0 = { 0, 0 };
	FD_SET(p2[0], &r);
	result("pselect empty", pselect(p2[0] + 1, &r, NULL, NULL, &ts0, NULL));
	ts0.tv_nsec = -1;
	result("pselect bad timespec", pselect(p2[0] + 1, &r, NULL, NULL, &ts0, NULL));
	return 0;
}
