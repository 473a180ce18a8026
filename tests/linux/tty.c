/* Terminal ioctls on the controlling terminal, compared with Linux (the harness gives both
 * sides a terminal with the console's start settings): isatty, TCGETS on a terminal and on
 * other files (ENOTTY), bad pointers (EFAULT), an unknown request, tcdrain and tcflush (a bad
 * queue: EINVAL), TCSETS / TCSETSW / TCSETSF (through tcsetattr) read back with TCGETS,
 * TIOCSWINSZ read back with TIOCGWINSZ. With argument `exec`, it then runs `busybox stty -a` in its place: the settings belong to the
 * terminal, not to the program that set them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* The kernel's c_cc entries (musl's struct has room for more). */
#define KERNEL_NCCS 19

static void show(const char *what)
{
	struct termios t;
	if (tcgetattr(0, &t) != 0) {
		printf("%s: tcgetattr: %s\n", what, strerror(errno));
		return;
	}
	printf("%s: iflag %o oflag %o cflag %o lflag %o line %d cc", what, t.c_iflag, t.c_oflag,
	       t.c_cflag, t.c_lflag, t.c_line);
	for (int i = 0; i < KERNEL_NCCS; i++)
		printf(" %x", t.c_cc[i]);
	printf(" speed %d\n", (int)cfgetospeed(&t));
}

static void result(const char *what, int r)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, strerror(errno));
	else
		printf("%s: %d\n", what, r);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("isatty 0 1 2: %d %d %d\n", isatty(0), isatty(1), isatty(2));
	int fd = open("/dev/null", O_RDWR);
	errno = 0;
	printf("isatty /dev/null: %d %s\n", isatty(fd), strerror(errno));
	struct termios t;
	struct winsize ws;
	result("TCGETS /dev/null", ioctl(fd, TCGETS, &t));
	result("TIOCGWINSZ /dev/null", ioctl(fd, TIOCGWINSZ, &ws));
	int dir = open(".", O_RDONLY);
	result("TCGETS directory", ioctl(dir, TCGETS, &t));
	result("TCGETS bad pointer", ioctl(0, TCGETS, (void *)16));
	result("TCSETS bad pointer", ioctl(0, TCSETS, (void *)16));
	result("TIOCGWINSZ bad pointer", ioctl(0, TIOCGWINSZ, (void *)16));
	result("TIOCSWINSZ bad pointer", ioctl(0, TIOCSWINSZ, (void *)16));
	result("unknown request", ioctl(0, 0x54ff, &t));
	result("TCGETS closed", ioctl(99, TCGETS, &t));
	result("tcdrain", tcdrain(1));
	result("tcflush input", tcflush(0, TCIFLUSH));
	/* Not tcflush(TCOFLUSH): on the host's pty it discards output the harness has not read yet. */
	result("tcflush bad queue", tcflush(0, 3));
	result("tcdrain /dev/null", tcdrain(fd));
	show("start");

	tcgetattr(0, &t);
	struct termios start = t;
	cfmakeraw(&t);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	result("tcsetattr raw TCSANOW", tcsetattr(0, TCSANOW, &t));
	show("raw");
	printf("raw output: a\nb\n");
	t.c_lflag |= ICANON | ECHO;
	t.c_cc[VERASE] = 8;
	t.c_cc[VKILL] = 0;
	result("tcsetattr TCSADRAIN", tcsetattr(0, TCSADRAIN, &t));
	show("icanon echo");
	result("tcsetattr TCSAFLUSH", tcsetattr(0, TCSAFLUSH, &start));
	show("back");

	ws.ws_row = 50;
	ws.ws_col = 132;
	ws.ws_xpixel = 0;
	ws.ws_ypixel = 0;
	result("TIOCSWINSZ", ioctl(1, TIOCSWINSZ, &ws));
	memset(&ws, 0, sizeof ws);
	result("TIOCGWINSZ", ioctl(2, TIOCGWINSZ, &ws));
	printf("winsize %d x %d\n", ws.ws_row, ws.ws_col);

	if (argc > 1 && strcmp(argv[1], "exec") == 0) {
		t = start;
		t.c_lflag &= ~(ICANON | ISIG);
		t.c_iflag &= ~ICRNL;
		t.c_cc[VMIN] = 4;
		t.c_cc[VTIME] = 2;
		tcsetattr(0, TCSANOW, &t);
		execl("/bin/busybox", "stty", "-a", (char *)NULL);
		printf("exec: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
