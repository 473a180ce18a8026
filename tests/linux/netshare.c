/* One process that holds every socket it may have does not deny another process sockets
 * (issue 15: a client that floods). A hoarder opens UDP sockets until socket() refuses; on
 * Linux that is its descriptor limit (RLIMIT_NOFILE, set to 1024 here), in sawmill its share of
 * the network stack's sockets (the manifest's `process_sockets`, below proc's share): EMFILE
 * either way. Holding them all, it lets another process open sockets and move a datagram and
 * a TCP message over 127.0.0.1; once the hoarder has ended, a third process opens 400 sockets
 * (the stack gave the hoarder's back; it may take a moment to see them closed). The output
 * names no counts that differ between the systems. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRIES 4000
#define AGAIN 400

static void die(const char *who, const char *what)
{
    printf("%s: FAIL %s: %s\n", who, what, strerror(errno));
    fflush(stdout);
    _exit(1);
}

static struct sockaddr_in loopback(unsigned short port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static unsigned short port_of(int s)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(s, (struct sockaddr *)&a, &len) < 0)
        die("other", "getsockname");
    return ntohs(a.sin_port);
}

static void hoard(int ready, int go)
{
    struct rlimit r = { 1024, 1024 };
    setrlimit(RLIMIT_NOFILE, &r);
    int n = 0;
    while (n < TRIES && socket(AF_INET, SOCK_DGRAM, 0) >= 0)
        n++;
    int e = errno;
    printf("hoarder: socket refused after %s sockets: %s\n",
           n >= 400 ? "at least 400" : "fewer than 400",
           n == TRIES ? "never" : strerror(e));
    fflush(stdout);
    char c = 'x';
    if (write(ready, &c, 1) != 1 || read(go, &c, 1) != 1)
        die("hoarder", "pipe");
    _exit(0);
}

static void other(void)
{
    int s[20];
    for (int i = 0; i < 20; i++)
        if ((s[i] = socket(AF_INET, SOCK_DGRAM, 0)) < 0)
            die("other", "socket");
    struct sockaddr_in a = loopback(0);
    if (bind(s[0], (struct sockaddr *)&a, sizeof a) < 0)
        die("other", "bind");
    a = loopback(port_of(s[0]));
    if (sendto(s[1], "hello", 5, 0, (struct sockaddr *)&a, sizeof a) != 5)
        die("other", "sendto");
    char buf[16] = { 0 };
    if (recv(s[0], buf, sizeof buf - 1, 0) != 5)
        die("other", "recv");
    printf("other: 20 sockets, a datagram over 127.0.0.1: %s\n", buf);

    int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || c < 0)
        die("other", "TCP socket");
    a = loopback(0);
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0)
        die("other", "listen");
    a = loopback(port_of(l));
    if (connect(c, (struct sockaddr *)&a, sizeof a) < 0)
        die("other", "connect");
    int d = accept(l, NULL, NULL);
    if (d < 0)
        die("other", "accept");
    memset(buf, 0, sizeof buf);
    if (write(c, "world", 5) != 5 || read(d, buf, sizeof buf - 1) != 5)
        die("other", "TCP transfer");
    printf("other: a TCP connection over 127.0.0.1: %s\n", buf);
    fflush(stdout);
    _exit(0);
}

static void again(void)
{
    int s[AGAIN], n = 0;
    for (int round = 0; round < 50 && n < AGAIN; round++) {
        while (n < AGAIN && (s[n] = socket(AF_INET, SOCK_DGRAM, 0)) >= 0)
            n++;
        if (n < AGAIN) {
            struct timespec t = { 0, 100 * 1000 * 1000 };
            nanosleep(&t, NULL);
        }
    }
    if (n < AGAIN)
        die("again", "socket");
    printf("again: %d sockets after the hoarder ended\n", n);
    fflush(stdout);
    _exit(0);
}

static void reap(pid_t pid, const char *who)
{
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        printf("%s did not end well\n", who);
}

int main(void)
{
    int ready[2], go[2];
    if (pipe(ready) < 0 || pipe(go) < 0)
        die("main", "pipe");
    fflush(stdout);
    pid_t h = fork();
    if (h == 0)
        hoard(ready[1], go[0]);
    char c;
    if (read(ready[0], &c, 1) != 1)
        die("main", "hoarder's word");
    pid_t o = fork();
    if (o == 0)
        other();
    reap(o, "other");
    if (write(go[1], "x", 1) != 1)
        die("main", "go");
    reap(h, "hoarder");
    pid_t a = fork();
    if (a == 0)
        again();
    reap(a, "again");
    printf("done\n");
    return 0;
}
