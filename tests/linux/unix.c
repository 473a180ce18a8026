/* Local (AF_UNIX) sockets, compared with Linux: socketpair of each type (stream both ways,
 * MSG_PEEK, MSG_DONTWAIT, shutdown and end of file, EPIPE with and without SIGPIPE, datagram
 * and seqpacket boundaries and truncation), a listener bound to a path (the inode is a socket,
 * EADDRINUSE, getsockname/getpeername) with clients in forked processes, ENOENT and
 * ECONNREFUSED, abstract names, bound datagram sockets with the sender's name, poll on a
 * listener and on a connection (readable, hung up), non-blocking accept and read, 1 MiB through
 * a connection to a forked child with a checksum, SO_TYPE, and SO_PEERCRED (socketpair,
 * connect and accept, none; printed relative to this process's pid and ids). Names are relative to the
 * working directory (a fresh copy of the tree); abstract names carry the pid, which is never
 * printed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void result(const char *what, long r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %ld\n", what, r);
}

static int sigpipes;
static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/* A sockaddr_un for a path (or, with a leading '@', an abstract name); its length in *len. */
static struct sockaddr_un addr_of(const char *name, socklen_t *len)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if (name[0] == '@') {
		size_t n = strlen(name);
		memcpy(a.sun_path + 1, name + 1, n - 1);
		*len = offsetof(struct sockaddr_un, sun_path) + n;
	} else {
		strcpy(a.sun_path, name);
		*len = offsetof(struct sockaddr_un, sun_path) + strlen(name) + 1;
	}
	return a;
}

static void show_addr(const char *what, struct sockaddr_un *a, socklen_t l)
{
	size_t off = offsetof(struct sockaddr_un, sun_path);
	if (l <= off)
		printf("%s: unnamed (len %u)\n", what, (unsigned)l);
	else if (a->sun_path[0] == 0)
		printf("%s: abstract\n", what); /* its length has the pid in it */
	else
		printf("%s: %s (len %u)\n", what, a->sun_path, (unsigned)l);
}

static void pairs(void)
{
	int sv[2];
	char buf[64];
	result("socketpair stream", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	result("write a", write(sv[0], "hello", 5));
	result("peek b", recv(sv[1], buf, sizeof buf, MSG_PEEK));
	int n = 0;
	result("FIONREAD b", ioctl(sv[1], FIONREAD, &n));
	printf("unread: %d\n", n);
	result("read b", read(sv[1], buf, sizeof buf));
	printf("got: %.5s\n", buf);
	result("write b", write(sv[1], "back", 4));
	result("read a", read(sv[0], buf, sizeof buf));
	result("empty dontwait", recv(sv[0], buf, sizeof buf, MSG_DONTWAIT));
	result("shutdown a WR", shutdown(sv[0], SHUT_WR));
	result("read b after shutdown", read(sv[1], buf, sizeof buf));
	result("write b still", write(sv[1], "x", 1));
	result("read a still", read(sv[0], buf, sizeof buf));
	result("close b", close(sv[1]));
	result("send nosignal", send(sv[0], "x", 1, MSG_NOSIGNAL));
	signal(SIGPIPE, on_sigpipe);
	result("write to closed", write(sv[0], "x", 1));
	printf("sigpipes: %d\n", sigpipes);
	signal(SIGPIPE, SIG_DFL);
	close(sv[0]);

	result("socketpair dgram", socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
	write(sv[0], "one", 3);
	write(sv[0], "two!", 4);
	write(sv[0], "", 0);
	result("dgram cut", read(sv[1], buf, 2));
	result("dgram peek", recv(sv[1], buf, sizeof buf, MSG_PEEK));
	result("dgram next", read(sv[1], buf, sizeof buf));
	printf("got: %.4s\n", buf);
	result("dgram empty one", read(sv[1], buf, sizeof buf));
	result("dgram none", recv(sv[1], buf, sizeof buf, MSG_DONTWAIT));
	write(sv[1], "abcdef", 6);
	result("dgram trunc", recv(sv[0], buf, 3, MSG_TRUNC));
	close(sv[0]);
	close(sv[1]);

	result("socketpair seqpacket", socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	write(sv[0], "first", 5);
	write(sv[0], "second", 6);
	result("seq 1", read(sv[1], buf, sizeof buf));
	result("seq 2", read(sv[1], buf, sizeof buf));
	close(sv[0]);
	result("seq eof", read(sv[1], buf, sizeof buf));
	close(sv[1]);

	result("socketpair inet", socketpair(AF_INET, SOCK_STREAM, 0, sv));
	result("socketpair proto", socketpair(AF_UNIX, SOCK_STREAM, 6, sv));
	result("socketpair nonblock", socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
	result("nonblock read", read(sv[0], buf, sizeof buf));
	int ty = 0;
	socklen_t tl = sizeof ty;
	result("SO_TYPE", getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &ty, &tl));
	printf("type: %d\n", ty);
	close(sv[0]);
	close(sv[1]);
}

/* A stream server on `name` serving `clients` forked clients: each sends its number, gets it
 * back doubled. */
static void listener(const char *name, int clients)
{
	socklen_t len;
	struct sockaddr_un a = addr_of(name, &len);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	result("bind", bind(l, (struct sockaddr *)&a, len));
	if (name[0] != '@') {
		struct stat st;
		result("stat", stat(name, &st));
		printf("is socket: %d\n", S_ISSOCK(st.st_mode));
	}
	int again = socket(AF_UNIX, SOCK_STREAM, 0);
	result("bind again", bind(again, (struct sockaddr *)&a, len));
	close(again);
	struct sockaddr_un got;
	socklen_t gl = sizeof got;
	result("getsockname", getsockname(l, (struct sockaddr *)&got, &gl));
	show_addr("bound", &got, gl);
	result("listen", listen(l, 8));
	struct pollfd p = {l, POLLIN, 0};
	result("poll idle listener", poll(&p, 1, 0));
	for (int i = 0; i < clients; i++) {
		if (fork() == 0) {
			int c = socket(AF_UNIX, SOCK_STREAM, 0);
			if (connect(c, (struct sockaddr *)&a, len) < 0) {
				printf("child connect: %s\n", strerror(errno));
				_exit(1);
			}
			struct sockaddr_un pa;
			socklen_t pl = sizeof pa;
			getpeername(c, (struct sockaddr *)&pa, &pl);
			int v = i + 1, back = 0;
			write(c, &v, sizeof v);
			read(c, &back, sizeof back);
			_exit(back == 2 * v && pl == len ? 0 : 2);
		}
	}
	int sum = 0;
	for (int i = 0; i < clients; i++) {
		struct sockaddr_un pa;
		socklen_t pl = sizeof pa;
		int s = accept(l, (struct sockaddr *)&pa, &pl);
		if (s < 0) {
			printf("accept: %s\n", strerror(errno));
			break;
		}
		if (i == 0)
			show_addr("accepted peer", &pa, pl);
		int v = 0;
		read(s, &v, sizeof v);
		sum += v;
		v *= 2;
		write(s, &v, sizeof v);
		close(s);
	}
	printf("sum: %d\n", sum);
	int ok = 0, st;
	while (wait(&st) > 0)
		ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("clients ok: %d\n", ok);

	/* One more, connected before accept: poll sees it. */
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	result("connect", connect(c, (struct sockaddr *)&a, len));
	result("poll listener", poll(&p, 1, 1000));
	printf("revents: %#x\n", p.revents);
	int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	result("accept4", s >= 0 ? 0 : -1);
	struct pollfd q = {s, POLLIN | POLLOUT, 0};
	result("poll fresh", poll(&q, 1, 0));
	printf("revents: %#x\n", q.revents);
	write(c, "z", 1);
	result("poll data", poll(&q, 1, 0));
	printf("revents: %#x\n", q.revents);
	close(c);
	char buf[8];
	read(s, buf, sizeof buf);
	result("poll closed peer", poll(&q, 1, 0));
	printf("revents: %#x\n", q.revents);
	result("read closed peer", read(s, buf, sizeof buf));
	close(s);

	fcntl(l, F_SETFL, O_NONBLOCK);
	result("accept nonblock", accept(l, NULL, NULL));
	close(l);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	result("connect after close", connect(c, (struct sockaddr *)&a, len));
	close(c);
	if (name[0] != '@')
		unlink(name);
}

static void names(void)
{
	socklen_t len;
	struct sockaddr_un a = addr_of("no-such.sock", &len);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	result("connect missing", connect(c, (struct sockaddr *)&a, len));
	result("getpeername unconnected", getpeername(c, (struct sockaddr *)&a, &len));
	struct sockaddr_un got;
	socklen_t gl = sizeof got;
	result("getsockname unbound", getsockname(c, (struct sockaddr *)&got, &gl));
	show_addr("unbound", &got, gl);
	result("listen unbound", listen(c, 1));
	close(c);
	/* A name that is a plain file. */
	int f = open("plain.file", O_CREAT | O_WRONLY, 0644);
	close(f);
	a = addr_of("plain.file", &len);
	c = socket(AF_UNIX, SOCK_STREAM, 0);
	result("bind over file", bind(c, (struct sockaddr *)&a, len));
	result("connect to file", connect(c, (struct sockaddr *)&a, len));
	close(c);
	unlink("plain.file");
}

static void datagrams(void)
{
	socklen_t sl, cl;
	struct sockaddr_un sa = addr_of("d.sock", &sl), ca = addr_of("c.sock", &cl);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	result("dgram bind", bind(s, (struct sockaddr *)&sa, sl));
	int c = socket(AF_UNIX, SOCK_DGRAM, 0);
	result("sendto unnamed", sendto(c, "ping", 4, 0, (struct sockaddr *)&sa, sl));
	char buf[64];
	struct sockaddr_un from;
	socklen_t fl = sizeof from;
	result("recvfrom", recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl));
	show_addr("from", &from, fl);
	result("bind client", bind(c, (struct sockaddr *)&ca, cl));
	result("sendto named", sendto(c, "pong", 4, 0, (struct sockaddr *)&sa, sl));
	fl = sizeof from;
	result("recvfrom", recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl));
	show_addr("from", &from, fl);
	result("reply", sendto(s, "back", 4, 0, (struct sockaddr *)&from, fl));
	result("client recv", recv(c, buf, sizeof buf, 0));
	result("connect dgram", connect(c, (struct sockaddr *)&sa, sl));
	result("send connected", send(c, "more", 4, 0));
	struct msghdr m;
	struct iovec v[2] = {{buf, 2}, {buf + 2, 10}};
	memset(&m, 0, sizeof m);
	m.msg_name = &from;
	m.msg_namelen = sizeof from;
	m.msg_iov = v;
	m.msg_iovlen = 2;
	result("recvmsg", recvmsg(s, &m, 0));
	show_addr("msg from", &from, m.msg_namelen);
	printf("got: %.4s\n", buf);
	close(s);
	result("send to gone", send(c, "x", 1, 0));
	struct sockaddr_un missing = addr_of("nobody.sock", &sl);
	result("sendto missing", sendto(c, "x", 1, 0, (struct sockaddr *)&missing, sl));
	close(c);
	unlink("d.sock");
	unlink("c.sock");
}

static void bulk(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	const int total = 1 << 20;
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		char *b = malloc(total);
		for (int i = 0; i < total; i++)
			b[i] = (char)(i * 7 + (i >> 11));
		int off = 0;
		while (off < total) {
			ssize_t n = write(sv[1], b + off, total - off);
			if (n <= 0)
				_exit(1);
			off += n;
		}
		_exit(0);
	}
	close(sv[1]);
	unsigned long sum = 0, got = 0;
	char buf[8192];
	for (;;) {
		ssize_t n = read(sv[0], buf, sizeof buf);
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			sum = sum * 31 + (unsigned char)buf[i];
		got += n;
	}
	int st;
	waitpid(pid, &st, 0);
	printf("bulk: %lu bytes, sum %lx, child %d\n", got, sum, WEXITSTATUS(st));
	close(sv[0]);
}

/* SO_PEERCRED of `fd`, printed relative to `pid` and this process's ids (pids vary). */
static void show_cred(const char *what, int fd, pid_t pid)
{
	struct ucred c;
	socklen_t l = sizeof c;
	memset(&c, 0x55, sizeof c);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &l) < 0) {
		printf("%s: -1 %s\n", what, strerror(errno));
		return;
	}
	printf("%s: len %u pid %d uid %d gid %d\n", what, (unsigned)l, c.pid == pid,
	       c.uid == geteuid(), c.gid == getegid());
}

/* SO_PEERCRED: a socketpair's ends both have their creator's credentials (also in a forked
 * child that inherits them); a connection's sides have each other's, as of listen and connect;
 * a socket with no peer has none (pid 0, uid and gid -1); a short buffer takes what fits. */
static void peercred(void)
{
	int types[] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
	const char *names[] = {"stream", "seqpacket", "dgram"};
	for (int i = 0; i < 3; i++) {
		int sv[2];
		char what[64];
		socketpair(AF_UNIX, types[i], 0, sv);
		snprintf(what, sizeof what, "peercred %s pair", names[i]);
		show_cred(what, sv[0], getpid());
		show_cred(what, sv[1], getpid());
		if (i == 0) {
			pid_t parent = getpid();
			if (fork() == 0) {
				show_cred("peercred pair in a child", sv[1], parent);
				_exit(0);
			}
			wait(NULL);
		}
		close(sv[0]);
		close(sv[1]);
	}
	int lone = socket(AF_UNIX, SOCK_STREAM, 0);
	struct ucred c;
	socklen_t l = sizeof c;
	result("peercred unconnected", getsockopt(lone, SOL_SOCKET, SO_PEERCRED, &c, &l));
	printf("peercred unconnected: len %u pid %d uid %d gid %d\n", (unsigned)l, c.pid, (int)c.uid,
	       (int)c.gid);
	int pid_only = 0;
	l = sizeof pid_only;
	result("peercred short", getsockopt(lone, SOL_SOCKET, SO_PEERCRED, &pid_only, &l));
	printf("peercred short: len %u\n", (unsigned)l);
	close(lone);

	char name[64];
	snprintf(name, sizeof name, "@sawmill-cred-%d", (int)getpid());
	socklen_t len;
	struct sockaddr_un a = addr_of(name, &len);
	int ls = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	bind(ls, (struct sockaddr *)&a, len);
	listen(ls, 4);
	pid_t parent = getpid();
	pid_t child = fork();
	if (child == 0) {
		int cs = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (connect(cs, (struct sockaddr *)&a, len) < 0)
			_exit(1);
		show_cred("peercred connected: the listener's", cs, parent);
		write(cs, "x", 1); /* after the line above: the output's order is fixed */
		_exit(0);
	}
	int s = accept(ls, NULL, NULL);
	char b;
	read(s, &b, 1);
	show_cred("peercred accepted: the client's", s, child);
	waitpid(child, NULL, 0);
	close(s);
	close(ls);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	pairs();
	listener("l.sock", 3);
	char abs[64];
	snprintf(abs, sizeof abs, "@sawmill-unix-test-%d", (int)getpid());
	listener(abs, 2);
	names();
	datagrams();
	bulk();
	peercred();
	return 0;
}
