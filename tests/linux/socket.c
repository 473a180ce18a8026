/* Sockets over loopback (127.0.0.1), compared with Linux: socket's flags (SOCK_CLOEXEC,
 * SOCK_NONBLOCK, bad families and types), bind to port 0 and getsockname, EADDRINUSE, fstat (a
 * socket), options set and read back (SO_REUSEADDR, SO_KEEPALIVE, TCP_NODELAY, SO_TYPE), a TCP
 * server and a client in two processes (fork: 100 KB in one write, half-close, a reply, the
 * peer's address), EAGAIN on a non-blocking read, EPIPE after shutdown(SHUT_WR), UDP both ways
 * with the sender's address, ECONNREFUSED from a closed port (blocking, and non-blocking with
 * poll and SO_ERROR), a non-blocking connect that poll sees complete, and MSG_PEEK on TCP and
 * UDP (the bytes stay for the next read; a peeked datagram keeps its source). Port numbers vary
 * from run to run: only facts about them are printed. Then ECONNRESET from a peer that closed with
 * data it never read (the error once, then end of file), and a reset after the peer's FIN (end of
 * file). Then what loopback fusion (docs/net.md) must keep: a forking server's connection (2 MiB
 * with checksums, poll, non-blocking reads, half-close), the end of a connection (FIONREAD, which
 * on sawmill only a fused connection answers; the first write after the peer's close, EPIPE), EINTR, a pair of connected UDP sockets in two processes.
 * With the argument `privileged`: only a port below 1024 bound as root. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void result(const char *what, long r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %ld\n", what, r);
}

static struct sockaddr_in loop_addr(unsigned short port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A TCP listener on 127.0.0.1 (a free port); its port in *port. */
static int listener(unsigned short *port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loop_addr(0);
	socklen_t l = sizeof a;
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 8) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) < 0) {
		printf("listener: %s\n", strerror(errno));
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return s;
}

/* A port nobody listens on: bound once, then closed. */
static unsigned short closed_port(void)
{
	unsigned short p;
	int s = listener(&p);
	close(s);
	return p;
}

static char big[100000];

static unsigned sum(const char *b, size_t n)
{
	unsigned h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)b[i]) * 16777619u;
	return h;
}

/* The client process: connects, sends `big` in one write, half-closes, reads the reply. Its
 * exit status says how far it got (0: all of it). */
static int client(unsigned short port)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loop_addr(port);
	if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
		return 2;
	if (write(c, big, sizeof big) != (ssize_t)sizeof big)
		return 3;
	if (shutdown(c, SHUT_WR) < 0)
		return 4;
	char reply[64];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(c, reply + got, sizeof reply - 1 - got);
		if (n < 0)
			return 5;
		if (n == 0)
			break;
		got += n;
	}
	reply[got] = 0;
	if (strcmp(reply, "got it") != 0)
		return 6;
	close(c);
	return 0;
}

static void tcp_two_processes(void)
{
	unsigned short port;
	int l = listener(&port);
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 7 + i / 251);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(client(port));
	struct sockaddr_in peer;
	socklen_t pl = sizeof peer;
	int c = accept(l, (struct sockaddr *)&peer, &pl);
	result("accept", c < 0 ? -1 : 0);
	printf("accept: peer %s, length %u\n", inet_ntoa(peer.sin_addr), (unsigned)pl);
	struct sockaddr_in me, them;
	socklen_t ml = sizeof me, tl = sizeof them;
	getsockname(c, (struct sockaddr *)&me, &ml);
	getpeername(c, (struct sockaddr *)&them, &tl);
	printf("conn: local %s same port %d, peer %s same port %d\n", inet_ntoa(me.sin_addr),
	       ntohs(me.sin_port) == port, inet_ntoa(them.sin_addr),
	       them.sin_port == peer.sin_port);
	static char in[sizeof big + 10];
	/* MSG_PEEK leaves the bytes for the reads below (which must still see all of them). */
	ssize_t pk = recv(c, in, 16, MSG_PEEK);
	printf("tcp peek: some %d, the first bytes %d\n", pk > 0, pk > 0 && memcmp(in, big, pk) == 0);
	size_t got = 0;
	for (;;) {
		ssize_t n = read(c, in + got, sizeof in - got);
		if (n <= 0) {
			if (n < 0)
				printf("read: %s\n", strerror(errno));
			break;
		}
		got += n;
	}
	printf("server read %zu bytes, equal %d\n", got,
	       got == sizeof big && sum(in, got) == sum(big, sizeof big));
	result("write reply", write(c, "got it", 6));
	close(c);
	int st;
	waitpid(pid, &st, 0);
	printf("client: exited %d status %d\n", WIFEXITED(st), WEXITSTATUS(st));
	close(l);
}

static void options_and_errors(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	result("F_GETFD cloexec", fcntl(s, F_GETFD));
	result("F_GETFL nonblock", fcntl(s, F_GETFL) & O_NONBLOCK ? 1 : 0);
	struct stat st;
	fstat(s, &st);
	printf("fstat: socket %d\n", S_ISSOCK(st.st_mode));
	int on = 1, v = -1;
	socklen_t vl = sizeof v;
	result("SO_REUSEADDR set", setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
	getsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, &vl);
	printf("SO_REUSEADDR: %d\n", v);
	result("SO_KEEPALIVE set", setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on));
	vl = sizeof v;
	getsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, &vl);
	printf("SO_KEEPALIVE: %d\n", v);
	result("TCP_NODELAY set", setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on));
	vl = sizeof v;
	getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &vl);
	printf("TCP_NODELAY: %d\n", v != 0);
	/* SO_LINGER: off at first, then what was set; buffer sizes are taken. */
	struct linger lg = {9, 9};
	socklen_t ll = sizeof lg;
	result("SO_LINGER get", getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &ll));
	printf("SO_LINGER: %d %d len %u\n", lg.l_onoff, lg.l_linger, (unsigned)ll);
	lg.l_onoff = 1;
	lg.l_linger = 5;
	result("SO_LINGER set", setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
	lg.l_onoff = lg.l_linger = 9;
	getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &ll);
	printf("SO_LINGER: %d %d\n", lg.l_onoff, lg.l_linger);
	result("SO_LINGER short", setsockopt(s, SOL_SOCKET, SO_LINGER, &on, sizeof on));
	int size = 65536;
	result("SO_RCVBUF set", setsockopt(s, SOL_SOCKET, SO_RCVBUF, &size, sizeof size));
	result("SO_SNDBUF set", setsockopt(s, SOL_SOCKET, SO_SNDBUF, &size, sizeof size));
	vl = sizeof v;
	getsockopt(s, SOL_SOCKET, SO_TYPE, &v, &vl);
	printf("SO_TYPE: %d length %u\n", v, (unsigned)vl);
	vl = sizeof v;
	result("SO_ERROR", getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &vl));
	printf("SO_ERROR: %d\n", v);
	close(s);

	s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	result("dgram F_GETFL nonblock", fcntl(s, F_GETFL) & O_NONBLOCK ? 1 : 0);
	close(s);
	result("socket bad family", socket(12345, SOCK_STREAM, 0));
	result("socket bad type", socket(AF_INET, 77, 0));
	result("socket bad protocol", socket(AF_INET, SOCK_STREAM, IPPROTO_UDP));
	result("bind a non-socket", bind(1, NULL, 0));
	result("listen bad fd", listen(99, 1));

	unsigned short port;
	int l = listener(&port);
	struct sockaddr_in a;
	socklen_t al = sizeof a;
	getsockname(l, (struct sockaddr *)&a, &al);
	printf("getsockname: family %d addr %s port>0 %d length %u\n", a.sin_family,
	       inet_ntoa(a.sin_addr), port > 0, (unsigned)al);
	int s2 = socket(AF_INET, SOCK_STREAM, 0);
	a = loop_addr(port);
	result("bind in use", bind(s2, (struct sockaddr *)&a, sizeof a));
	close(s2);

	/* Blocking connect to a closed port. */
	int c = socket(AF_INET, SOCK_STREAM, 0);
	a = loop_addr(closed_port());
	result("connect closed port", connect(c, (struct sockaddr *)&a, sizeof a));
	close(c);

	/* Non-blocking connect to the listener: poll sees it writable, SO_ERROR 0. */
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	a = loop_addr(port);
	int r = connect(c, (struct sockaddr *)&a, sizeof a);
	printf("nonblocking connect: %s\n",
	       r == 0 || errno == EINPROGRESS ? "started" : strerror(errno));
	struct pollfd p = { .fd = c, .events = POLLOUT };
	r = poll(&p, 1, 10000);
	printf("poll: %d out %d err %d\n", r, !!(p.revents & POLLOUT), !!(p.revents & POLLERR));
	vl = sizeof v;
	getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl);
	printf("SO_ERROR after connect: %d\n", v);
	int acc = accept(l, NULL, NULL);
	result("accept without address", acc < 0 ? -1 : 0);
	/* Nothing sent yet: a non-blocking read has nothing. */
	char b[16];
	result("nonblocking read", read(c, b, sizeof b));
	result("recv MSG_DONTWAIT", recv(acc, b, sizeof b, MSG_DONTWAIT));
	result("send", send(c, "ping", 4, 0));
	p = (struct pollfd){ .fd = acc, .events = POLLIN };
	r = poll(&p, 1, 10000);
	printf("poll accepted: %d in %d\n", r, !!(p.revents & POLLIN));
	result("recv", recv(acc, b, sizeof b, 0));
	result("shutdown SHUT_WR", shutdown(c, SHUT_WR));
	signal(SIGPIPE, SIG_IGN);
	result("write after SHUT_WR", write(c, "x", 1));
	result("read end of stream", read(acc, b, sizeof b));
	close(acc);
	close(c);

	/* Non-blocking connect to a closed port: poll sees the error, SO_ERROR says it. */
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	a = loop_addr(closed_port());
	r = connect(c, (struct sockaddr *)&a, sizeof a);
	printf("nonblocking connect closed: %s\n",
	       r < 0 && (errno == EINPROGRESS || errno == ECONNREFUSED) ? "refused or started"
								       : strerror(errno));
	if (r < 0 && errno == EINPROGRESS) {
		p = (struct pollfd){ .fd = c, .events = POLLOUT };
		r = poll(&p, 1, 10000);
		printf("poll refused: %d err %d\n", r, !!(p.revents & POLLERR));
		vl = sizeof v;
		getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl);
		printf("SO_ERROR refused: %s\n", strerror(v));
	} else {
		printf("poll refused: 1 err 1\nSO_ERROR refused: %s\n", strerror(ECONNREFUSED));
	}
	close(c);
	close(l);
}

static void udp_both_ways(void)
{
	int u1 = socket(AF_INET, SOCK_DGRAM, 0), u2 = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a1 = loop_addr(0), a2 = loop_addr(0), from;
	socklen_t l = sizeof a1;
	bind(u1, (struct sockaddr *)&a1, sizeof a1);
	bind(u2, (struct sockaddr *)&a2, sizeof a2);
	getsockname(u1, (struct sockaddr *)&a1, &l);
	l = sizeof a2;
	getsockname(u2, (struct sockaddr *)&a2, &l);
	printf("udp getsockname: %s\n", inet_ntoa(a2.sin_addr));
	result("sendto", sendto(u1, "datagram one", 12, 0, (struct sockaddr *)&a2, sizeof a2));
	char b[64];
	l = sizeof from;
	ssize_t n = recvfrom(u2, b, sizeof b, 0, (struct sockaddr *)&from, &l);
	printf("recvfrom: %zd '%.*s' from %s, the sender's port %d\n", n, (int)(n > 0 ? n : 0), b,
	       inet_ntoa(from.sin_addr), from.sin_port == a1.sin_port);
	result("sendto back", sendto(u2, "and back", 8, 0, (struct sockaddr *)&from, l));
	n = recv(u1, b, sizeof b, 0);
	printf("recv: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), b);
	/* connect sets the default destination: send and read. */
	result("udp connect", connect(u1, (struct sockaddr *)&a2, sizeof a2));
	result("udp write", write(u1, "third", 5));
	n = read(u2, b, sizeof b);
	printf("read: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), b);
	result("udp nonblocking recv", recv(u2, b, sizeof b, MSG_DONTWAIT));
	/* MSG_PEEK: the datagram stays, with its source. */
	sendto(u1, "peeked", 6, 0, (struct sockaddr *)&a2, sizeof a2);
	l = sizeof from;
	n = recvfrom(u2, b, 4, MSG_PEEK, (struct sockaddr *)&from, &l);
	printf("udp peek: %zd '%.*s' sender's port %d\n", n, (int)(n > 0 ? n : 0), b,
	       from.sin_port == a1.sin_port);
	n = recv(u2, b, sizeof b, 0);
	printf("udp after peek: %zd '%.*s'\n", n, (int)(n > 0 ? n : 0), b);
	close(u1);
	close(u2);
}

/* Ports below 1024 for root: the guest's processes run as root, so proc hands them the network
 * manager's stack capability with the privileged-ports right (scenario `netmgr` shows a client
 * without it refused). */
static void privileged_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loop_addr(999);
	printf("root: %d\n", geteuid() == 0);
	result("bind port 999 as root", bind(s, (struct sockaddr *)&a, sizeof a));
	close(s);
}

/* A peer that closes with data it never read resets the connection (Linux sends RST): the
 * other side's poll says readable, its read fails with ECONNRESET, a send after that with EPIPE. */
static void reset_by_peer(void)
{
	unsigned short port;
	int l = listener(&port);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loop_addr(port);
	result("reset: connect", connect(c, (struct sockaddr *)&a, sizeof a));
	int s = accept(l, NULL, NULL);
	result("reset: accept", s < 0 ? -1 : 0);
	result("reset: write what the peer never reads", write(c, "unread", 6));
	struct pollfd ps = { s, POLLIN, 0 };
	result("reset: the peer sees it", poll(&ps, 1, 5000));
	close(s);
	struct pollfd pc = { c, POLLIN, 0 };
	result("reset: poll", poll(&pc, 1, 5000));
	printf("reset: readable %d\n", (pc.revents & POLLIN) != 0);
	char b[16];
	result("reset: read", read(c, b, sizeof b));
	result("reset: send after", send(c, "x", 1, MSG_NOSIGNAL));
	/* The error was taken: later reads are the end of the stream. */
	result("reset: read again", read(c, b, sizeof b));
	result("reset: and again", read(c, b, sizeof b));
	close(c);
	close(l);
}

/* A reset that follows the peer's FIN: the peer shuts its sending side (FIN), then closes with
 * data it never read (RST). The stream had ended before the reset: reads are end of file. */
static void reset_after_fin(void)
{
	unsigned short port;
	int l = listener(&port);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loop_addr(port);
	result("fin+reset: connect", connect(c, (struct sockaddr *)&a, sizeof a));
	int s = accept(l, NULL, NULL);
	result("fin+reset: accept", s < 0 ? -1 : 0);
	result("fin+reset: peer shuts its side", shutdown(s, SHUT_WR));
	struct pollfd pc = { c, POLLIN, 0 };
	result("fin+reset: the end arrives", poll(&pc, 1, 5000));
	result("fin+reset: write what the peer never reads", write(c, "unread", 6));
	struct pollfd ps = { s, POLLIN, 0 };
	result("fin+reset: the peer sees it", poll(&ps, 1, 5000));
	close(s);
	/* The reset travels: give it time to arrive (poll is readable already, from the FIN). */
	usleep(200000);
	char b[16];
	result("fin+reset: read", read(c, b, sizeof b));
	result("fin+reset: read again", read(c, b, sizeof b));
	close(c);
	close(l);
}

/* The handler's side of `loopback_fork`: reads to the end of the stream (poll first, then a
 * non-blocking read until EAGAIN, then blocking), answers the sum and the length. */
static int fused_handler(int s)
{
	static char buf[65536];
	unsigned h = 2166136261u;
	size_t total = 0;
	struct pollfd p = { s, POLLIN, 0 };
	if (poll(&p, 1, 10000) != 1 || !(p.revents & POLLIN))
		return 10;
	int fl = fcntl(s, F_GETFL);
	fcntl(s, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		ssize_t n = read(s, buf, sizeof buf);
		if (n < 0 && errno == EAGAIN) {
			fcntl(s, F_SETFL, fl);
			continue;
		}
		if (n < 0)
			return 11;
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ (unsigned char)buf[i]) * 16777619u;
		total += n;
	}
	char reply[64];
	int len = snprintf(reply, sizeof reply, "%zu %08x", total, h);
	if (write(s, reply, len) != len)
		return 12;
	close(s);
	return 0;
}

static void alarm_handler(int sig)
{
	(void)sig;
}

/* Loopback TCP as a forking server runs it (busybox httpd): the connection accepted, a child
 * forked to handle it, the parent closing its copy at once. 2 MiB in 64 KiB writes, a
 * half-close, the reply read to the end; both sides' checksums compared. Then the end of a
 * connection: poll after the peer's close, the first write after it, EPIPE after that; a
 * blocking read a signal interrupts (EINTR). */
static void loopback_fork(void)
{
	unsigned short port;
	int l = listener(&port);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = loop_addr(port);
		if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
			_exit(2);
		static char chunk[65536];
		unsigned h = 2166136261u;
		for (int k = 0; k < 32; k++) {
			for (size_t i = 0; i < sizeof chunk; i++)
				chunk[i] = (char)(i * 13 + k * 101 + i / 509);
			for (size_t i = 0; i < sizeof chunk; i++)
				h = (h ^ (unsigned char)chunk[i]) * 16777619u;
			if (write(c, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
				_exit(3);
		}
		if (shutdown(c, SHUT_WR) < 0)
			_exit(4);
		char reply[64], want[64];
		size_t got = 0;
		for (;;) {
			ssize_t n = read(c, reply + got, sizeof reply - 1 - got);
			if (n < 0)
				_exit(5);
			if (n == 0)
				break;
			got += n;
		}
		reply[got] = 0;
		snprintf(want, sizeof want, "%zu %08x", (size_t)32 * sizeof chunk, h);
		_exit(strcmp(reply, want) == 0 ? 0 : 6);
	}
	int s = accept(l, NULL, NULL);
	result("fork: accept", s < 0 ? -1 : 0);
	pid_t handler = fork();
	if (handler == 0) {
		close(l);
		_exit(fused_handler(s));
	}
	close(s);
	int st;
	waitpid(handler, &st, 0);
	printf("fork: handler exit %d\n", WEXITSTATUS(st));
	waitpid(pid, &st, 0);
	printf("fork: client exit %d\n", WEXITSTATUS(st));

	/* The end of a connection whose peer closed. */
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loop_addr(port);
	result("end: connect", connect(c, (struct sockaddr *)&a, sizeof a));
	s = accept(l, NULL, NULL);
	result("end: accept", s < 0 ? -1 : 0);
	result("end: send", send(s, "bye", 3, 0));
	close(s);
	struct pollfd p = { c, POLLIN, 0 };
	result("end: poll", poll(&p, 1, 5000));
	printf("end: readable %d\n", (p.revents & POLLIN) != 0);
	/* What is there to read (Linux's SIOCINQ; on sawmill only a fused connection answers). */
	int inq = -1;
	result("end: FIONREAD", ioctl(c, FIONREAD, &inq));
	printf("end: FIONREAD says %d\n", inq);
	char b[16];
	result("end: read", read(c, b, sizeof b));
	result("end: read at the end", read(c, b, sizeof b));
	result("end: first write", send(c, "x", 1, MSG_NOSIGNAL));
	usleep(100000);
	result("end: write after", send(c, "x", 1, MSG_NOSIGNAL));
	close(c);

	/* A blocking read on a quiet connection, interrupted by a signal without SA_RESTART. */
	c = socket(AF_INET, SOCK_STREAM, 0);
	result("eintr: connect", connect(c, (struct sockaddr *)&a, sizeof a));
	s = accept(l, NULL, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = alarm_handler;
	sigaction(SIGALRM, &sa, NULL);
	alarm(1);
	result("eintr: read", read(c, b, sizeof b));
	result("eintr: then data", send(s, "ok", 2, 0));
	result("eintr: read again", read(c, b, sizeof b));
	close(s);
	close(c);
	close(l);
}

/* A UDP socket bound to 127.0.0.1 (a free port); its port in *port. */
static int udp_bound(unsigned short *port)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = loop_addr(0);
	socklen_t l = sizeof a;
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) < 0) {
		printf("udp_bound: %s\n", strerror(errno));
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return s;
}

/* Two UDP sockets connected to each other (what loopback fusion joins), used by two processes:
 * datagram boundaries and sizes, the source, MSG_PEEK, poll, a non-blocking receive. */
static void udp_pair_fork(void)
{
	unsigned short pa, pb;
	int a = udp_bound(&pa), b = udp_bound(&pb);
	struct sockaddr_in to_a = loop_addr(pa), to_b = loop_addr(pb);
	result("pair: connect a", connect(a, (struct sockaddr *)&to_b, sizeof to_b));
	result("pair: connect b", connect(b, (struct sockaddr *)&to_a, sizeof to_a));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(a);
		static char buf[2000];
		for (int i = 0; i < 4; i++) {
			ssize_t n = recv(b, buf, sizeof buf, 0);
			if (n < 0 || send(b, buf, n, 0) != n)
				_exit(1);
		}
		_exit(0);
	}
	close(b);
	char buf[2000];
	result("pair: nothing yet", recv(a, buf, sizeof buf, MSG_DONTWAIT));
	size_t sizes[4] = { 1, 0, 1000, 1472 };
	for (int i = 0; i < 4; i++) {
		memset(buf, 'a' + i, sizes[i]);
		result("pair: send", send(a, buf, sizes[i], 0));
		struct pollfd p = { a, POLLIN, 0 };
		result("pair: poll", poll(&p, 1, 5000));
		if (i == 2)
			result("pair: peek", recv(a, buf, sizeof buf, MSG_PEEK));
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		memset(buf, 0, sizeof buf);
		ssize_t n = recvfrom(a, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
		result("pair: recvfrom", n);
		printf("pair: from b %d, bytes right %d\n", ntohs(from.sin_port) == pb,
		       n == 0 || (buf[0] == 'a' + i && buf[n - 1] == 'a' + i));
	}
	int st;
	waitpid(pid, &st, 0);
	printf("pair: echo exit %d\n", WEXITSTATUS(st));
	/* The peer is gone (its last holder exited): nothing to read and no end of stream, as a
	 * UDP socket whose peer closed (fused, the ring's end must not read as 0 bytes). */
	struct pollfd p = { a, POLLIN, 0 };
	result("pair: poll, peer gone", poll(&p, 1, 0));
	printf("pair: revents %#x\n", p.revents);
	result("pair: recv, peer gone", recv(a, buf, sizeof buf, MSG_DONTWAIT));
	result("pair: send, peer gone", send(a, "x", 1, 0));
	close(a);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* `socket privileged` (an @root case: a host that is not root is refused the port). */
	if (argc > 1 && strcmp(argv[1], "privileged") == 0) {
		privileged_port();
		return 0;
	}
	options_and_errors();
	udp_both_ways();
	tcp_two_processes();
	reset_by_peer();
	reset_after_fin();
	loopback_fork();
	udp_pair_fork();
	return 0;
}
