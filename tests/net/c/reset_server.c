/*
 * A TCP server whose connection is reset under it (issue 16): listens on the port of argv[1],
 * accepts one connection, reads until a call fails or ends, and prints what each call on the
 * dead connection gives (read, read again, write, poll), then accepts a second connection on the
 * same listening socket and answers it. tools/sawmill/tests/linux_net_restart.rs runs it on the
 * host, where the client resets the connection (SO_LINGER 0), and in the guest, where the
 * network stack is killed under it; the two outputs must be equal.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *name(int e)
{
	switch (e) {
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case ENOTCONN: return "ENOTCONN";
	case ENETDOWN: return "ENETDOWN";
	default: return strerror(e);
	}
}

static void result(const char *what, long r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, name(errno));
	else
		printf("%s: %ld\n", what, r);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return 2;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])) };
	if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4)) {
		perror("bind/listen");
		return 1;
	}
	printf("listening\n");
	int c = accept(l, NULL, NULL);
	if (c < 0) {
		perror("accept");
		return 1;
	}
	char b[256];
	long n;
	size_t got = 0;
	while ((n = read(c, b, sizeof b)) > 0)
		got += n;
	printf("read %zu bytes before\n", got);
	result("read", n);
	result("read again", read(c, b, sizeof b));
	result("write", write(c, "x", 1));
	struct pollfd p = { .fd = c, .events = POLLIN | POLLOUT };
	int r = poll(&p, 1, 5000);
	printf("poll: %d in %d hup %d\n", r, !!(p.revents & POLLIN), !!(p.revents & POLLHUP));
	close(c);
	/* The listening socket goes on. */
	c = accept(l, NULL, NULL);
	if (c < 0) {
		result("accept again", -1);
		return 1;
	}
	n = read(c, b, sizeof b);
	printf("second connection read %ld\n", n);
	result("second write", write(c, "bye\n", 4));
	close(c);
	close(l);
	return 0;
}
