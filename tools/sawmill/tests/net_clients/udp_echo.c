/* UDP echo for tools/sawmill/tests/net_clients.rs (the guest side; busybox has no UDP echo):
 * binds 0.0.0.0:PORT, sends every datagram back to its sender, and exits 0 after echoing the
 * datagram "quit". With a second argument N it first binds N more UDP sockets (on 0.0.0.0, ports
 * the stack picks) and keeps them open: the host's datagrams then reach the stack with that many
 * other sockets there. Build: musl-gcc -static -O2 -o udp_echo udp_echo.c */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: udp_echo PORT [OTHER_SOCKETS]\n");
		return 2;
	}
	int others = argc == 3 ? atoi(argv[2]) : 0;
	for (int i = 0; i < others; i++) {
		int o = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in any;
		memset(&any, 0, sizeof any);
		any.sin_family = AF_INET;
		if (o < 0 || bind(o, (struct sockaddr *)&any, sizeof any) < 0) {
			perror("udp_echo: another socket");
			return 1;
		}
	}
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("udp_echo: bind");
		return 1;
	}
	printf("udp_echo: listening on %s beside %d other sockets\n", argv[1], others);
	fflush(stdout);
	for (;;) {
		char buf[2048];
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
		if (n < 0) {
			perror("udp_echo: recvfrom");
			return 1;
		}
		if (sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, fl) != n) {
			perror("udp_echo: sendto");
			return 1;
		}
		if (n == 4 && memcmp(buf, "quit", 4) == 0)
			return 0;
	}
}
