/* SPDX-License-Identifier: MIT */
/*
 * vfio.c - one file-system operation on the mount, with its errno spelled
 * out, for shell tests that must tell EIO from EINVAL from success (a shell
 * redirection cannot).  Prints "ok" (plus what was read) or the errno name
 * ("EIO") on stdout and exits 0; exits 2 on bad usage.
 *
 *   vfio read PATH              the whole content, after "ok\n"
 *   vfio write PATH TEXT        one write(2) of TEXT (no newline added)
 *   vfio report PATH TEXT       write, then read the outcome back on the same fd
 *   vfio create PATH            open(O_CREAT|O_WRONLY), close
 *   vfio unlink|mkdir|rmdir PATH
 *
 * (The shell tests wait for READY=1 with tests/lib/vftool notify-listen.)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

static int fail(void)
{
	const char *name = strerrorname_np(errno);

	printf("%s\n", name ? name : "EUNKNOWN");
	return 0;
}

static int do_read(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char buf[65536];
	size_t have = 0;

	if (fd < 0)
		return fail();
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n < 0)
			return fail();
		if (n == 0 || have + (size_t)n == sizeof(buf)) {
			have += (size_t)n;
			break;
		}
		have += (size_t)n;
	}
	printf("ok\n%.*s", (int)have, buf);
	return 0;
}

static int do_write(const char *path, const char *text, bool outcome)
{
	_cleanup_close_ int fd = open(path, (outcome ? O_RDWR : O_WRONLY) | O_CLOEXEC);
	size_t len = strlen(text);
	char buf[4096];
	ssize_t n;

	if (fd < 0)
		return fail();
	n = write(fd, text, len);
	if (n < 0)
		return fail();
	if ((size_t)n != len) {
		printf("short write %zd of %zu\n", n, len);
		return 0;
	}
	if (!outcome) {
		printf("ok\n");
		return 0;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return fail();
	buf[n] = '\0';
	printf("ok %.*s\n", (int)strcspn(buf, "\n"), buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		goto usage;
	const char *op = argv[1], *path = argv[2];

	if (strcmp(op, "read") == 0 && argc == 3)
		return do_read(path);
	if (strcmp(op, "write") == 0 && argc == 4)
		return do_write(path, argv[3], false);
	if (strcmp(op, "report") == 0 && argc == 4)
		return do_write(path, argv[3], true);
	if (strcmp(op, "create") == 0 && argc == 3) {
		int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			return fail();
		if (close(fd) < 0)
			return fail();
		printf("ok\n");
		return 0;
	}
	if (argc == 3 &&
	    (strcmp(op, "unlink") == 0 || strcmp(op, "mkdir") == 0 || strcmp(op, "rmdir") == 0)) {
		int r = op[0] == 'u' ? unlink(path) :
			op[0] == 'm' ? mkdir(path, 0755) :
				       rmdir(path);
		if (r < 0)
			return fail();
		printf("ok\n");
		return 0;
	}
usage:
	fprintf(stderr, "usage: vfio read|write|report|create|unlink|mkdir|rmdir PATH [TEXT]\n");
	return 2;
}
