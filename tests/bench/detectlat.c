/* SPDX-License-Identifier: MIT */
/*
 * detectlat.c - one sample of detection latency, timed in one process so
 * that no fork or exec sits between the timestamps (detect-latency.sh runs
 * it once per sample):
 *
 *   detectlat kmsg FIFO WATCHED DELAY TIMEOUT LINE
 *       watch WATCHED (a VF's `quarantined`) with inotify, check it reads
 *       0, open FIFO (a guest agent's kernel log) for writing, sleep DELAY
 *       seconds, then write LINE and a newline (t0) and wait for the first
 *       IN_MODIFY or IN_CLOSE_WRITE after which WATCHED reads 1 (t1, taken
 *       when the event is read, before the file is read again).
 *       Prints t1 - t0 in nanoseconds.
 *   detectlat report REPORT WATCHED TIMEOUT TEXT
 *       the same watch, but t0 is just before TEXT is written to REPORT
 *       (open, write, pread the outcome, close, as the sentinel reports):
 *       prints the report's own time (to its close), t1 - t0 and the
 *       outcome's first line.
 *
 * Exit 0 with the figures; 1 with a message when WATCHED is not 0 at the
 * start, the write fails, or no change to 1 comes within TIMEOUT seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/parse.h"

/* The first byte of FILE, read afresh ('?' when it cannot be read). */
static char read_flag(const char *file)
{
	_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
	char c = '?';

	if (fd < 0 || read(fd, &c, 1) != 1)
		return '?';
	return c;
}

static int watch(const char *file, int *ret)
{
	_cleanup_close_ int fd = inotify_init1(IN_CLOEXEC);
	char c;

	if (fd < 0 || inotify_add_watch(fd, file, IN_MODIFY | IN_CLOSE_WRITE) < 0) {
		fprintf(stderr, "detectlat: watch %s: %s\n", file, strerror(errno));
		return -1;
	}
	/* Watched first, read after: a change between the two is not lost. */
	c = read_flag(file);
	if (c != '0') {
		fprintf(stderr, "detectlat: %s reads '%c' before the sample, want 0\n", file, c);
		return -1;
	}
	*ret = fd;
	fd = -1;
	return 0;
}

/* Wait for the event after which file reads 1; its time in *t1. */
static int wait_flag(int ifd, const char *file, double timeout_s, int64_t *t1)
{
	int64_t deadline = monotonic_ns() + (int64_t)(timeout_s * 1e9);
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		int64_t left = deadline - monotonic_ns();
		struct pollfd p = { .fd = ifd, .events = POLLIN };
		int k;

		if (left <= 0) {
			fprintf(stderr, "detectlat: %s did not turn 1 within %g s\n", file,
				timeout_s);
			return -1;
		}
		k = poll(&p, 1, (int)(left / 1000000 + 1));
		if (k < 0 && errno != EINTR) {
			fprintf(stderr, "detectlat: poll: %s\n", strerror(errno));
			return -1;
		}
		if (k <= 0)
			continue;
		if (read(ifd, buf, sizeof(buf)) < 0 && errno != EINTR) {
			fprintf(stderr, "detectlat: inotify read: %s\n", strerror(errno));
			return -1;
		}
		*t1 = monotonic_ns();
		if (read_flag(file) == '1')
			return 0;
	}
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s,
			       .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static int cmd_kmsg(const char *fifo, const char *file, double delay, double timeout,
		    const char *line)
{
	_cleanup_close_ int ifd = -1;
	_cleanup_close_ int kfd = -1;
	_cleanup_free_ char *rec = NULL;
	int64_t t0, t1;
	size_t len;

	if (watch(file, &ifd) < 0)
		return 1;
	/* The agent holds its FIFO open: this open does not wait. */
	kfd = open(fifo, O_WRONLY | O_CLOEXEC);
	if (kfd < 0) {
		fprintf(stderr, "detectlat: open %s: %s\n", fifo, strerror(errno));
		return 1;
	}
	if (asprintf(&rec, "%s\n", line) < 0)
		return 1;
	len = strlen(rec);
	sleep_s(delay);
	t0 = monotonic_ns();
	if (write(kfd, rec, len) != (ssize_t)len) {
		fprintf(stderr, "detectlat: write %s: %s\n", fifo, strerror(errno));
		return 1;
	}
	if (wait_flag(ifd, file, timeout, &t1) < 0)
		return 1;
	printf("%" PRId64 "\n", t1 - t0);
	return 0;
}

static int cmd_report(const char *report, const char *file, double timeout, const char *text)
{
	_cleanup_close_ int ifd = -1;
	char out[256];
	int64_t t0, tw, t1;
	ssize_t n;
	int fd;

	if (watch(file, &ifd) < 0)
		return 1;
	t0 = monotonic_ns();
	fd = open(report, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "detectlat: open %s: %s\n", report, strerror(errno));
		return 1;
	}
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    (n = pread(fd, out, sizeof(out) - 1, 0)) < 0) {
		fprintf(stderr, "detectlat: report %s: %s\n", report, strerror(errno));
		close(fd);
		return 1;
	}
	if (close(fd) < 0) {
		fprintf(stderr, "detectlat: close %s: %s\n", report, strerror(errno));
		return 1;
	}
	tw = monotonic_ns();
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (wait_flag(ifd, file, timeout, &t1) < 0)
		return 1;
	printf("%" PRId64 " %" PRId64 " %s\n", tw - t0, t1 - t0, out[0] ? out : "-");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "kmsg") == 0)
		return cmd_kmsg(argv[2], argv[3], atof(argv[4]), atof(argv[5]), argv[6]);
	if (argc == 6 && strcmp(argv[1], "report") == 0)
		return cmd_report(argv[2], argv[3], atof(argv[4]), argv[5]);
	fprintf(stderr, "usage: detectlat kmsg FIFO WATCHED DELAY TIMEOUT LINE\n"
			"       detectlat report REPORT WATCHED TIMEOUT TEXT\n");
	return 2;
}
