/* The signal mask of ppoll and pselect6, compared with Linux: the mask given replaces the
 * process's for the wait only; a pending signal it unblocks ends the wait with EINTR and its
 * handler runs (seeing the handler's mask, the old one restored at its return); a wait that
 * ends ready or timed out leaves a signal only the old mask blocks pending and undelivered;
 * a bad set size is EINVAL; a signal sent by another process during the wait interrupts it;
 * SA_RESTART does not restart these waits. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int handled;
static volatile int usr1_blocked_in_handler;

static void on_usr1(int sig)
{
	sigset_t now;
	(void)sig;
	handled++;
	sigprocmask(SIG_BLOCK, NULL, &now);
	usr1_blocked_in_handler = sigismember(&now, SIGUSR1);
}

static void result(const char *what, long r)
{
	if (r < 0)
		printf("%-40s -1 %s\n", what, strerror(errno));
	else
		printf("%-40s %ld\n", what, r);
}

/* What the process's mask says of SIGUSR1 and whether it is pending. */
static void state(const char *when)
{
	sigset_t now, pend;
	sigprocmask(SIG_BLOCK, NULL, &now);
	sigpending(&pend);
	printf("%-40s blocked %d pending %d handled %d in-handler-blocked %d\n", when,
	       sigismember(&now, SIGUSR1), sigismember(&pend, SIGUSR1), handled,
	       usr1_blocked_in_handler);
}

static void handler(int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = flags;
	sigaction(SIGUSR1, &sa, NULL);
}

int main(void)
{
	int p[2];
	sigset_t usr1, none;
	struct pollfd pf;
	fd_set rs;
	struct timespec zero = { 0, 0 }, short_ = { 0, 20000000 };

	setvbuf(stdout, NULL, _IONBF, 0);
	pipe(p);
	sigemptyset(&none);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	handler(0);
	sigprocmask(SIG_BLOCK, &usr1, NULL);

	/* Pending and blocked; ppoll's empty mask unblocks it: EINTR, the handler ran. */
	raise(SIGUSR1);
	state("before");
	pf = (struct pollfd){ .fd = p[0], .events = POLLIN };
	result("ppoll empty mask, pending", ppoll(&pf, 1, NULL, &none));
	state("after ppoll EINTR");

	/* Ready at once: no EINTR, the signal stays pending under the old mask. */
	write(p[1], "x", 1);
	raise(SIGUSR1);
	result("ppoll ready, pending", ppoll(&pf, 1, NULL, &none));
	state("after ppoll ready");
	/* A zero timeout with the signal pending: Linux looks at signals before the timeout. */
	char c;
	read(p[0], &c, 1);
	result("ppoll zero timeout, pending", ppoll(&pf, 1, &zero, &none));
	state("after ppoll zero");

	/* The mask given blocks it: the wait times out, it stays pending. */
	raise(SIGUSR1);
	sigprocmask(SIG_UNBLOCK, &usr1, NULL);
	state("unblocked (delivered)");
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	raise(SIGUSR1);
	result("ppoll mask blocks it, 20 ms", ppoll(&pf, 1, &short_, &usr1));
	state("after ppoll timeout");
	/* A null mask: the process's own (blocked): times out too. */
	result("ppoll null mask, 20 ms", ppoll(&pf, 1, &short_, NULL));
	state("after ppoll null mask");

	/* pselect6 the same way. */
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	result("pselect empty mask, pending", pselect(p[0] + 1, &rs, NULL, NULL, NULL, &none));
	state("after pselect EINTR");
	raise(SIGUSR1);
	write(p[1], "x", 1);
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	result("pselect ready, pending", pselect(p[0] + 1, &rs, NULL, NULL, NULL, &none));
	state("after pselect ready");
	read(p[0], &c, 1);
	FD_ZERO(&rs);
	FD_SET(p[0], &rs);
	result("pselect zero timeout, pending", pselect(p[0] + 1, &rs, NULL, NULL, &zero, &none));
	state("after pselect zero");

	/* Bad sizes of the set. */
	result("ppoll set size 4", syscall(SYS_ppoll, &pf, 1, &zero, &none, 4));
	struct {
		void *set;
		size_t size;
	} arg = { &none, 4 };
	FD_ZERO(&rs);
	result("pselect6 set size 4", syscall(SYS_pselect6, 1, &rs, NULL, NULL, &zero, &arg));
	arg.set = NULL;
	result("pselect6 null set, size 4", syscall(SYS_pselect6, 1, &rs, NULL, NULL, &zero, &arg));

	/* Sent by another process during the wait (blocked outside it), under SA_RESTART: the
	 * wait still ends with EINTR. */
	handler(SA_RESTART);
	pid_t child = fork();
	if (child == 0) {
		struct timespec t = { 0, 50000000 };
		nanosleep(&t, NULL);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	pf = (struct pollfd){ .fd = p[0], .events = POLLIN };
	result("ppoll, SIGUSR1 from a child", ppoll(&pf, 1, NULL, &none));
	state("after the child's signal");
	waitpid(child, NULL, 0);

	/* poll and select are not restarted under SA_RESTART either (the mask is the process's). */
	sigprocmask(SIG_UNBLOCK, &usr1, NULL);
	child = fork();
	if (child == 0) {
		struct timespec t = { 0, 50000000 };
		nanosleep(&t, NULL);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	result("poll, SIGUSR1 from a child", poll(&pf, 1, -1));
	waitpid(child, NULL, 0);
	state("end");
	return 0;
}
