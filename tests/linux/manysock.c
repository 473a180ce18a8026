/* Hundreds of sockets open at once (issue 15): 200 UDP sockets bound on 127.0.0.1, each sent a
 * datagram it answers (poll sees all 200 readable together), and 100 TCP connections made to
 * one listener with a backlog of 128 before any is accepted, then accepted, with a message each
 * way on each. All 302 descriptors stay open until the end; then everything is closed and the
 * same number opened again (the stack gave the sockets back). The output is compared with
 * Linux's: it names counts and failures, never ports. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UDPS 200
#define CONNS 100

static int udp[UDPS], client[CONNS], server[CONNS];
static unsigned short udp_port[UDPS];

static void die(const char *what)
{
    printf("FAIL %s: %s\n", what, strerror(errno));
    exit(1);
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

static int bound(int type, unsigned short *port)
{
    int s = socket(AF_INET, type, 0);
    if (s < 0)
        die("socket");
    struct sockaddr_in a = loopback(0);
    socklen_t l = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (getsockname(s, (struct sockaddr *)&a, &l) < 0)
        die("getsockname");
    *port = ntohs(a.sin_port);
    return s;
}

/* Reads exactly n bytes (TCP may split them). */
static void read_all(int fd, char *buf, size_t n, const char *what)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            die(what);
        got += r;
    }
}

static int round_trip_udp(void)
{
    unsigned short sp;
    int s = bound(SOCK_DGRAM, &sp);
    for (int i = 0; i < UDPS; i++)
        udp[i] = bound(SOCK_DGRAM, &udp_port[i]);
    printf("udp: %d sockets bound\n", UDPS);
    char msg[16];
    for (int i = 0; i < UDPS; i++) {
        struct sockaddr_in to = loopback(udp_port[i]);
        int n = snprintf(msg, sizeof msg, "u%03d", i);
        if (sendto(s, msg, n, 0, (struct sockaddr *)&to, sizeof to) != n)
            die("sendto");
    }
    /* Every one of them readable at once. */
    static struct pollfd p[UDPS];
    int ready = 0;
    for (int tries = 0; tries < 100 && ready < UDPS; tries++) {
        for (int i = 0; i < UDPS; i++)
            p[i] = (struct pollfd){.fd = udp[i], .events = POLLIN};
        ready = poll(p, UDPS, 100);
        if (ready < 0)
            die("poll");
    }
    printf("udp: poll says %d of %d readable\n", ready, UDPS);
    int good = 0;
    for (int i = 0; i < UDPS; i++) {
        char in[16], want[16], back[16];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(udp[i], in, sizeof in, 0, (struct sockaddr *)&from, &fl);
        int wn = snprintf(want, sizeof want, "u%03d", i);
        if (n != wn || memcmp(in, want, wn) != 0 || ntohs(from.sin_port) != sp) {
            printf("udp: socket %d got the wrong datagram\n", i);
            continue;
        }
        in[0] = 'r';
        if (sendto(udp[i], in, n, 0, (struct sockaddr *)&from, fl) != n)
            die("sendto back");
        n = recv(s, back, sizeof back, 0);
        if (n == wn && back[0] == 'r' && memcmp(back + 1, want + 1, wn - 1) == 0)
            good++;
    }
    printf("udp: %d datagrams each way\n", good);
    return s;
}

static int connections(void)
{
    unsigned short lp;
    int l = bound(SOCK_STREAM, &lp);
    if (listen(l, 128) < 0)
        die("listen");
    /* All connected before any is accepted: the backlog holds them. */
    for (int i = 0; i < CONNS; i++) {
        client[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (client[i] < 0)
            die("socket");
        struct sockaddr_in a = loopback(lp);
        if (connect(client[i], (struct sockaddr *)&a, sizeof a) < 0)
            die("connect");
    }
    printf("tcp: %d connected to one listener\n", CONNS);
    for (int i = 0; i < CONNS; i++) {
        server[i] = accept(l, NULL, NULL);
        if (server[i] < 0)
            die("accept");
    }
    printf("tcp: %d accepted\n", CONNS);
    /* Each accepted socket echoes what its client wrote, whichever it is. */
    int good = 0;
    for (int i = 0; i < CONNS; i++) {
        char msg[8];
        snprintf(msg, sizeof msg, "c%03d", i);
        if (write(client[i], msg, 4) != 4)
            die("write");
    }
    for (int i = 0; i < CONNS; i++) {
        char in[8];
        read_all(server[i], in, 4, "read at the server");
        in[0] = 's';
        if (write(server[i], in, 4) != 4)
            die("write back");
    }
    for (int i = 0; i < CONNS; i++) {
        char in[8], want[8];
        read_all(client[i], in, 4, "read at the client");
        snprintf(want, sizeof want, "s%03d", i);
        if (memcmp(in, want, 4) == 0)
            good++;
    }
    printf("tcp: %d messages each way\n", good);
    return l;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    int s = round_trip_udp();
    int l = connections();
    /* Everything is still open: the UDP sockets still answer. */
    char c = 'x', in[4];
    struct sockaddr_in to = loopback(udp_port[UDPS - 1]);
    if (sendto(s, &c, 1, 0, (struct sockaddr *)&to, sizeof to) != 1 ||
        recv(udp[UDPS - 1], in, sizeof in, 0) != 1)
        die("the last UDP socket with everything open");
    printf("open at once: %d sockets\n", UDPS + 2 * CONNS + 2);
    for (int i = 0; i < UDPS; i++)
        close(udp[i]);
    for (int i = 0; i < CONNS; i++) {
        close(client[i]);
        close(server[i]);
    }
    close(l);
    close(s);
    /* Given back: as many again. */
    static int again[UDPS + 2 * CONNS + 2];
    int n = sizeof again / sizeof again[0];
    for (int i = 0; i < n; i++) {
        unsigned short p;
        again[i] = bound(SOCK_DGRAM, &p);
    }
    for (int i = 0; i < n; i++)
        close(again[i]);
    printf("closed, then %d opened again\n", n);
    return 0;
}
