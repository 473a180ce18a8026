/* Job control compared with Linux (the harness starts both sides as a session leader whose
 * controlling terminal is fd 0): TIOCGPGRP, TIOCGSID, TIOCSCTTY, TIOCNOTTY, TIOCSPGRP with
 * their errors (ENOTTY, EPERM, ESRCH, EINVAL); tcsetpgrp and a read from a background group
 * (SIGTTOU, SIGTTIN: a handler's EINTR, EIO when ignored, a stop by default); SIGSTOP,
 * SIGTSTP and SIGCONT seen by waitpid (WUNTRACED, WCONTINUED) and waitid (CLD_STOPPED,
 * CLD_CONTINUED), SIGCHLD for them unless SA_NOCLDSTOP, a SIGTERM held while stopped; a
 * terminal read interrupted by a caught signal (EINTR). Pids differ between the two sides,
 * so only relations between them are printed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static void result(const char *what, int r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %d\n", what, r);
	fflush(stdout);
}

static void nap(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

static volatile sig_atomic_t caught, stopped_reports, continued_reports;

static void on_signal(int s)
{
	(void)s;
	caught++;
}

static void on_chld(int s, siginfo_t *si, void *uc)
{
	(void)s;
	(void)uc;
	if (si->si_code == CLD_STOPPED)
		stopped_reports++;
	if (si->si_code == CLD_CONTINUED)
		continued_reports++;
}

static void handle(int sig, void (*h)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigaction(sig, &sa, NULL);
}

/* Runs `body` in a child and reports how it ended. */
static void child(const char *what, void (*body)(void))
{
	pid_t c = fork();
	if (c == 0) {
		body();
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(c, &st, WUNTRACED);
	if (WIFSTOPPED(st)) {
		printf("%s: stopped by %d\n", what, WSTOPSIG(st));
		kill(c, SIGKILL);
		waitpid(c, &st, 0);
	}
	printf("%s: %s %d\n", what, WIFEXITED(st) ? "exit" : "signal",
	       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	fflush(stdout);
}

static void member(void)
{
	/* A member of the session: the same terminal, but it may not take one. */
	printf("member's foreground is the leader's group: %d\n", tcgetpgrp(0) == getpgid(getppid()));
	result("member TIOCSCTTY", ioctl(0, TIOCSCTTY, 0));
	result("member TIOCNOTTY", ioctl(0, TIOCNOTTY));
}

static void new_session(void)
{
	setsid();
	result("new session's tcgetpgrp", tcgetpgrp(0));
	result("new session's TIOCGSID", ioctl(0, TIOCGSID, &(pid_t){ 0 }));
	result("new session's TIOCSCTTY (held by another)", ioctl(0, TIOCSCTTY, 0));
	result("new session's TIOCNOTTY", ioctl(0, TIOCNOTTY));
}

static void background(void)
{
	setpgid(0, 0);
	char c;
	/* A handler: the call ends with EINTR after it ran. */
	handle(SIGTTOU, on_signal);
	handle(SIGTTIN, on_signal);
	result("background tcsetpgrp, SIGTTOU caught", tcsetpgrp(0, getpgrp()));
	result("background read, SIGTTIN caught", (int)read(0, &c, 1));
	printf("handler ran: %d\n", caught);
	/* Ignored: a read is EIO, a tcsetattr goes through. */
	handle(SIGTTIN, SIG_IGN);
	result("background read, SIGTTIN ignored", (int)read(0, &c, 1));
	struct termios t;
	tcgetattr(0, &t);
	result("background tcsetattr, SIGTTOU caught", tcsetattr(0, TCSANOW, &t));
	handle(SIGTTOU, SIG_IGN);
	result("background tcsetattr, SIGTTOU ignored", tcsetattr(0, TCSANOW, &t));
	/* Ignored SIGTTOU: tcsetpgrp goes through; the group is the foreground now. */
	result("background tcsetpgrp, SIGTTOU ignored", tcsetpgrp(0, getpgrp()));
	printf("foreground is ours: %d\n", tcgetpgrp(0) == getpgrp());
	/* Back to the parent's group (we are the foreground: no signal). */
	handle(SIGTTOU, SIG_DFL);
	result("give the terminal back", tcsetpgrp(0, getpgid(getppid())));
	/* Background again, default SIGTTIN: the read stops us. */
	handle(SIGTTIN, SIG_DFL);
	read(0, &c, 1);
	printf("not reached\n");
}

static void spin(void)
{
	for (;;)
		pause();
}

int main(void)
{
	pid_t me = getpid();
	result("leader", getsid(0) == me);
	printf("tcgetpgrp is own group: %d\n", tcgetpgrp(0) == getpgrp());
	pid_t sid = -1;
	result("TIOCGSID", ioctl(0, TIOCGSID, &sid));
	printf("TIOCGSID is own session: %d\n", sid == getsid(0));
	result("TIOCSCTTY again", ioctl(0, TIOCSCTTY, 0));
	int p[2];
	pipe(p);
	result("TIOCGPGRP on a pipe", ioctl(p[0], TIOCGPGRP, &sid));
	int null = open("/dev/null", O_RDWR);
	result("TIOCGPGRP on /dev/null", ioctl(null, TIOCGPGRP, &sid));
	result("TIOCSCTTY on /dev/null", ioctl(null, TIOCSCTTY, 0));
	result("tcsetpgrp -1", tcsetpgrp(0, -1));
	result("tcsetpgrp to no group", tcsetpgrp(0, 4000000));
	result("tcsetpgrp to own group", tcsetpgrp(0, getpgrp()));
	child("member", member);
	child("new session", new_session);

	/* A group of another session cannot be the foreground. */
	int sync[2];
	pipe(sync);
	pid_t other = fork();
	if (other == 0) {
		setsid();
		write(sync[1], "x", 1);
		spin();
	}
	char x;
	read(sync[0], &x, 1);
	result("tcsetpgrp to another session's group", tcsetpgrp(0, other));
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);

	child("background", background);
	printf("foreground is the leader's again: %d\n", tcgetpgrp(0) == getpgrp());

	/* Stop and continue, seen by wait and SIGCHLD. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	/* In a group of its own whose parent is in the session: not an orphaned group (Linux
	 * discards SIGTSTP for those). */
	pid_t c = fork();
	if (c == 0) {
		setpgid(0, 0);
		spin();
	}
	setpgid(c, c);
	int st;
	kill(c, SIGSTOP);
	result("waitpid WUNTRACED", waitpid(c, &st, WUNTRACED) == c);
	printf("stopped %d by %d, status %#x\n", WIFSTOPPED(st), WSTOPSIG(st), st);
	result("waitpid WUNTRACED|WNOHANG again", waitpid(c, &st, WUNTRACED | WNOHANG));
	kill(c, SIGCONT);
	result("waitpid WCONTINUED", waitpid(c, &st, WCONTINUED) == c);
	printf("continued %d, status %#x\n", WIFCONTINUED(st), st);
	kill(c, SIGTSTP);
	siginfo_t si;
	memset(&si, 0, sizeof si);
	result("waitid WSTOPPED", waitid(P_PID, c, &si, WSTOPPED));
	printf("waitid: code %d (CLD_STOPPED %d) status %d pid ok %d\n", si.si_code, CLD_STOPPED,
	       si.si_status, si.si_pid == c);
	kill(c, SIGCONT);
	memset(&si, 0, sizeof si);
	result("waitid WCONTINUED", waitid(P_PID, c, &si, WCONTINUED));
	printf("waitid: code %d (CLD_CONTINUED %d) status %d\n", si.si_code, CLD_CONTINUED,
	       si.si_status);
	nap(100);
	/* Two of each were sent; a second may merge with one still pending. */
	int stops = stopped_reports, conts = continued_reports;
	printf("SIGCHLD reports: stopped %d continued %d\n", stops > 0, conts > 0);

	/* SA_NOCLDSTOP: no SIGCHLD for a stop or continue. */
	sa.sa_flags |= SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	kill(c, SIGSTOP);
	waitpid(c, &st, WUNTRACED);
	kill(c, SIGCONT);
	waitpid(c, &st, WCONTINUED);
	nap(100);
	printf("SIGCHLD reports with SA_NOCLDSTOP: none %d\n",
	       stops == stopped_reports && conts == continued_reports);

	/* A SIGTERM sent while stopped waits for the SIGCONT, then kills. */
	kill(c, SIGSTOP);
	waitpid(c, &st, WUNTRACED);
	kill(c, SIGTERM);
	nap(100);
	result("stopped child after SIGTERM (WNOHANG)", waitpid(c, &st, WNOHANG));
	kill(c, SIGCONT);
	result("after SIGCONT", waitpid(c, &st, 0) == c);
	printf("signaled %d by %d\n", WIFSIGNALED(st), WTERMSIG(st));

	/* A read of the terminal (after the input's end of file) waits; a caught signal ends
	 * it with EINTR. */
	char buf[16];
	result("read to end of input", (int)read(0, buf, sizeof buf));
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGALRM, &sa, NULL);
	caught = 0;
	alarm(1);
	result("blocked terminal read, SIGALRM caught", (int)read(0, buf, sizeof buf));
	printf("handler ran: %d\n", caught);
	return 0;
}
