/* SPDX-License-Identifier: MIT */
/*
 * vftool - small helpers the shell tests need and the shell lacks (the
 * harness, tests/lib/harness.sh, waits for READY=1 with notify-listen):
 *
 *   vftool poll FILE TIMEOUT_MS [EXPECTED]
 *       open FILE, read it from offset 0, print "armed", then poll() for
 *       POLLPRI; when woken re-read from offset 0 and, if EXPECTED is given
 *       and the content (less one trailing newline) differs, poll again, as
 *       a real watcher would; else print "woken" with the revents and the
 *       content, exit 0.  On timeout print "timeout" and exit 1.  (sysfs
 *       style: a change after a read wakes the poll even if it happened
 *       before poll() was called.)
 *   vftool write-read FILE TEXT
 *       open FILE read-write, write TEXT with one write(2), then pread() from
 *       offset 0 on the same open file and print what it says.  A failing
 *       write prints strerror and exits 1.
 *   vftool write-reads [--append] FILE TEXT...
 *       open FILE read-write once (O_APPEND with --append, as `>>` opens);
 *       for each TEXT, one write(2) at the descriptor's offset, then a
 *       pread() from offset 0, and one line: "ok" or the write's strerror,
 *       ": ", and what the read says without its newline.
 *   vftool pread-fd FD
 *       what a pread() from offset 0 on the inherited descriptor FD reads
 *       (pread takes no file position lock, so it reaches the file while a
 *       write(2) through the same open file is under way); strerror and
 *       exit 1 when it fails.
 *   vftool write-at FILE OFFSET TEXT
 *       one pwrite(2) at OFFSET; prints strerror and exits 1 on failure.
 *   vftool notify-listen SOCKET TIMEOUT_MS [LOG]
 *       bind a Unix datagram socket (what systemd's $NOTIFY_SOCKET is), print
 *       "bound", then wait for a datagram containing READY=1: print
 *       "ready MAINPID" (0 when the message has none), then "status TEXT"
 *       for its STATUS=TEXT if any, exit 0; on timeout print "timeout" and
 *       exit 1.  With LOG, every STATUS= line also goes to LOG as
 *       "status TEXT", and after READY=1 it closes stdout and keeps
 *       listening (until killed), so LOG shows every STATUS= sent later.
 *   vftool hold FILE COUNT
 *       open FILE COUNT times read-only and read one byte from each, keeping
 *       every descriptor open (a reader that holds the daemon's memory);
 *       stop at the first open or read that fails.  Print "held N", then
 *       "error STRERROR" if one failed, then "holding", and keep them until
 *       stdin ends.  Raises its descriptor limit to the hard limit.
 *   vftool uevent ACTION DEVPATH SUBSYSTEM
 *       send a uevent as the kernel words one (ACTION@DEVPATH, then
 *       ACTION=, DEVPATH=, SUBSYSTEM=) to the kernel's uevent group of this
 *       network namespace (root; a test runs in a namespace of its own, so
 *       that nothing else on the host hears it); strerror and exit 1 on
 *       failure.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/netlink.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/parse.h"

static int read_all(int fd, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n = 0;

	/* Offset 0 first (re-render), then the rest of that snapshot. */
	while (len + 1 < size && (n = pread(fd, buf + len, size - 1 - len, (off_t)len)) > 0)
		len += (size_t)n;
	if (n < 0)
		return -errno;
	buf[len] = '\0';
	return (int)len;
}

static int timeout_arg(const char *s, int *ret)
{
	uint64_t v;

	if (parse_uint64(s, 1, 600000, &v) < 0) {
		fprintf(stderr, "bad timeout '%s'\n", s);
		return -EINVAL;
	}
	*ret = (int)v;
	return 0;
}

static bool content_is(const char *buf, const char *expected)
{
	size_t n = strlen(buf);

	if (n && buf[n - 1] == '\n')
		n--;
	return strlen(expected) == n && strncmp(buf, expected, n) == 0;
}

static int cmd_poll(const char *path, const char *timeout, const char *expected)
{
	static char buf[1 << 16];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	int64_t deadline;
	int ms, r;

	if (fd < 0 || timeout_arg(timeout, &ms) < 0) {
		perror(path);
		return 2;
	}
	r = read_all(fd, buf, sizeof(buf));
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		return 2;
	}
	printf("armed\n");
	fflush(stdout);
	deadline = monotonic_ns() + (int64_t)ms * 1000000;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLPRI };
		int64_t left_ms = (deadline - monotonic_ns()) / 1000000;

		r = left_ms > 0 ? poll(&pfd, 1, (int)left_ms) : 0;
		if (r < 0) {
			perror("poll");
			return 2;
		}
		if (r == 0) {
			printf("timeout\n");
			return 1;
		}
		r = read_all(fd, buf, sizeof(buf));
		if (r < 0) {
			fprintf(stderr, "%s: %s\n", path, strerror(-r));
			return 2;
		}
		if (expected && !content_is(buf, expected))
			continue; /* an earlier change; keep watching */
		printf("woken%s%s\n%s", (pfd.revents & POLLPRI) ? " POLLPRI" : "",
		       (pfd.revents & POLLERR) ? " POLLERR" : "", buf);
		return 0;
	}
}

static int cmd_write_read(const char *path, const char *text)
{
	static char buf[1 << 16];
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	ssize_t n;
	int r;

	if (fd < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	n = write(fd, text, strlen(text));
	if (n < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	r = read_all(fd, buf, sizeof(buf));
	if (r < 0) {
		printf("%s\n", strerror(-r));
		return 1;
	}
	fputs(buf, stdout);
	return 0;
}

static int cmd_write_reads(const char *path, bool append, char **texts, size_t n)
{
	static char buf[1 << 16];
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | (append ? O_APPEND : 0));

	if (fd < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		ssize_t w = write(fd, texts[i], strlen(texts[i]));
		const char *said = w < 0 ? strerror(errno) : "ok";
		int r = read_all(fd, buf, sizeof(buf));
		if (r < 0) {
			printf("read: %s\n", strerror(-r));
			return 1;
		}
		buf[strcspn(buf, "\n")] = '\0';
		printf("%s: %s\n", said, buf);
	}
	return 0;
}

static int cmd_pread_fd(const char *fd_arg)
{
	static char buf[1 << 16];
	uint64_t fd;
	int r;

	if (parse_uint64(fd_arg, 0, INT32_MAX, &fd) < 0) {
		fprintf(stderr, "bad descriptor '%s'\n", fd_arg);
		return 2;
	}
	r = read_all((int)fd, buf, sizeof(buf));
	if (r < 0) {
		printf("%s\n", strerror(-r));
		return 1;
	}
	fputs(buf, stdout);
	return 0;
}

static int cmd_write_at(const char *path, const char *offset, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	uint64_t off;

	if (fd < 0 || parse_uint64(offset, 0, 1 << 20, &off) < 0) {
		printf("%s\n", strerror(errno ? errno : EINVAL));
		return 1;
	}
	if (pwrite(fd, text, strlen(text), (off_t)off) < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/* The value of the line "KEY=..." in a notification message, up to its
 * newline (cut there: msg is modified), or NULL. */
static const char *message_field(char *msg, const char *key)
{
	size_t klen = strlen(key);

	for (char *line = msg; line && *line;) {
		char *next = strchr(line, '\n');
		if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
			if (next)
				*next = '\0';
			return line + klen + 1;
		}
		line = next ? next + 1 : NULL;
	}
	return NULL;
}

static int cmd_notify_listen(const char *path, const char *timeout, const char *log_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	_cleanup_fclose_ FILE *log = NULL;
	bool ready = false;
	char msg[4096];
	int ms;

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path) || timeout_arg(timeout, &ms) < 0)
		return 2;
	if (log_path) {
		log = fopen(log_path, "ae");
		if (!log) {
			perror(log_path);
			return 2;
		}
		setvbuf(log, NULL, _IOLBF, 0);
	}
	strcpy(sa.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bind");
		return 2;
	}
	printf("bound\n");
	fflush(stdout);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int r = poll(&pfd, 1, ready ? -1 : ms);

		if (r <= 0) {
			printf("timeout\n");
			return 1;
		}
		n = recv(fd, msg, sizeof(msg) - 1, 0);
		if (n < 0)
			return 2;
		msg[n] = '\0';
		bool is_ready = strstr(msg, "READY=1") != NULL;
		const char *pid = strstr(msg, "MAINPID=");
		int mainpid = pid ? atoi(pid + 8) : 0;
		const char *status = message_field(msg, "STATUS");

		if (status && log)
			fprintf(log, "status %s\n", status);
		if (!is_ready || ready)
			continue;
		ready = true;
		printf("ready %d\n", mainpid);
		if (status)
			printf("status %s\n", status);
		if (!log)
			return 0;
		fclose(stdout); /* the reader sees the end; LOG gets the rest */
	}
}

static int cmd_hold(const char *path, const char *count_arg)
{
	struct rlimit rl;
	uint64_t count, held = 0;
	int err = 0;
	char byte, line[64];

	if (parse_uint64(count_arg, 1, 1000000, &count) < 0) {
		fprintf(stderr, "bad count '%s'\n", count_arg);
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* The descriptors stay open until exit: that is the point. */
	for (; held < count; held++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || pread(fd, &byte, 1, 0) < 0) {
			err = errno;
			break;
		}
	}
	printf("held %" PRIu64 "\n", held);
	if (err)
		printf("error %s\n", strerror(err));
	printf("holding\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}

static int cmd_uevent(const char *action, const char *devpath, const char *subsystem)
{
	struct sockaddr_nl to = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	char msg[1024];
	int len, fd;

	len = snprintf(msg, sizeof(msg), "%s@%s%cACTION=%s%cDEVPATH=%s%cSUBSYSTEM=%s%cSEQNUM=1",
		       action, devpath, 0, action, 0, devpath, 0, subsystem, 0);
	if (len < 0 || (size_t)len >= sizeof(msg)) {
		fprintf(stderr, "uevent too long\n");
		return 2;
	}
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
	if (fd < 0 || sendto(fd, msg, (size_t)len + 1, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "poll") == 0)
		return cmd_poll(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (argc == 4 && strcmp(argv[1], "write-read") == 0)
		return cmd_write_read(argv[2], argv[3]);
	if (argc >= 5 && strcmp(argv[1], "write-reads") == 0 && strcmp(argv[2], "--append") == 0)
		return cmd_write_reads(argv[3], true, argv + 4, (size_t)argc - 4);
	if (argc >= 4 && strcmp(argv[1], "write-reads") == 0)
		return cmd_write_reads(argv[2], false, argv + 3, (size_t)argc - 3);
	if (argc == 3 && strcmp(argv[1], "pread-fd") == 0)
		return cmd_pread_fd(argv[2]);
	if (argc == 5 && strcmp(argv[1], "write-at") == 0)
		return cmd_write_at(argv[2], argv[3], argv[4]);
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "notify-listen") == 0)
		return cmd_notify_listen(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	if (argc == 4 && strcmp(argv[1], "hold") == 0)
		return cmd_hold(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "uevent") == 0)
		return cmd_uevent(argv[2], argv[3], argv[4]);
	fprintf(stderr,
		"usage: vftool poll FILE TIMEOUT_MS [EXPECTED] | write-read FILE TEXT |\n"
		"       write-reads [--append] FILE TEXT... | pread-fd FD |\n"
		"       write-at FILE OFFSET TEXT | notify-listen SOCKET TIMEOUT_MS [LOG] |\n"
		"       hold FILE COUNT | uevent ACTION DEVPATH SUBSYSTEM\n");
	return 2;
}
