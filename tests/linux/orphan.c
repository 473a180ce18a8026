/* Orphaned process groups, compared with Linux. A session leader S makes a job: M leads a new
 * group G and forks C into it; C stops itself; M sees the stop and exits. G is then orphaned
 * (no member has a parent in another group of the session) with a stopped member, so every
 * member gets SIGHUP then SIGCONT. In the orphaned group, SIGTSTP, SIGTTIN and SIGTTOU with
 * their default actions do not stop C (Linux discards them); SIGSTOP still does. C reports
 * through a pipe; only S prints. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int report_fd;

static void say(const char *s)
{
	write(report_fd, s, strlen(s));
}

static void on_hup(int sig)
{
	(void)sig;
	say("C: SIGHUP\n");
}

static void on_cont(int sig)
{
	(void)sig;
	say("C: SIGCONT\n");
}

static void pause_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&t, NULL);
}

/* C: in group G; stops itself, then (once continued by the orphaning) checks that the
 * terminal stop signals do not stop it. */
static void child(void)
{
	signal(SIGHUP, on_hup);
	signal(SIGCONT, on_cont);
	say("C: stopping\n");
	raise(SIGSTOP);
	say("C: running again\n");
	raise(SIGTSTP);
	say("C: SIGTSTP did not stop it\n");
	raise(SIGTTIN);
	raise(SIGTTOU);
	say("C: SIGTTIN and SIGTTOU did not stop it\n");
	_exit(0);
}

static void middle(void)
{
	setpgid(0, 0);
	pid_t c = fork();
	if (c == 0)
		child();
	int st;
	/* The stop of C, then M ends: G is orphaned. */
	if (waitpid(c, &st, WUNTRACED) == c && WIFSTOPPED(st))
		say("M: C stopped, exiting\n");
	_exit(0);
}

int main(void)
{
	int p[2];
	setvbuf(stdout, NULL, _IONBF, 0);
	pipe(p);
	pid_t s = fork();
	if (s == 0) {
		close(p[0]);
		report_fd = p[1];
		setsid();
		pid_t m = fork();
		if (m == 0)
			middle();
		int st;
		waitpid(m, &st, 0);
		/* C (now another's child) reports and exits; give it time. */
		pause_ms(500);
		_exit(0);
	}
	close(p[1]);
	char buf[512];
	ssize_t n;
	/* The pipe ends when S and C have both closed it (C exits). */
	while ((n = read(p[0], buf, sizeof buf)) > 0)
		fwrite(buf, 1, n, stdout);
	waitpid(s, NULL, 0);
	printf("done\n");
	return 0;
}
