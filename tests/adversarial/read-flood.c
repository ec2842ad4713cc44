/* SPDX-License-Identifier: MIT */
/*
 * read-flood.c - an unprivileged user's flood of rendered reads, and the
 * writer's claims it must not slow down, for read-flood.sh
 * (docs/security.md).
 *
 *   read-flood read FILE THREADS
 *
 * THREADS threads, each with a descriptor of FILE of its own, read one byte
 * at offset 0 (each read renders the whole file afresh) in a loop; prints
 * "reading N" (reads done so far) once every thread has read once, then,
 * at the first line or EOF on stdin, stops them and prints "read N errors
 * E" (reads done in all, reads failed) and exits.
 *
 *   read-flood claims DIR FIRST COUNT SECONDS
 *
 * COUNT claim creations DIR/vm-FIRST ... (open with O_CREAT, close: what a
 * VM manager does), each timed alone and printed in microseconds, one a
 * line; each claim is removed (unlink) untimed before the next is made.
 * Fewer once SECONDS have passed (at least one): a stalled daemon fails the
 * test in bounded time.
 *
 * Exits 1 on an error of its own (message on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS_MAX 256

static const char *file;
static atomic_bool stop;
static atomic_long reads, errors;
static pthread_mutex_t started_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t started_cond = PTHREAD_COND_INITIALIZER;
static int started; /* threads that read once (or failed): under started_lock */

static void mark_started(void)
{
	pthread_mutex_lock(&started_lock);
	started++;
	pthread_cond_signal(&started_cond);
	pthread_mutex_unlock(&started_lock);
}

static void *reader(void *arg)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	bool first = true;
	char byte;

	(void)arg;
	if (fd < 0) {
		perror("read-flood: open");
		atomic_fetch_add(&errors, 1);
		mark_started();
		return NULL;
	}
	while (!atomic_load(&stop)) {
		if (pread(fd, &byte, 1, 0) == 1)
			atomic_fetch_add(&reads, 1);
		else
			atomic_fetch_add(&errors, 1);
		if (first) {
			first = false;
			mark_started();
		}
	}
	close(fd);
	return NULL;
}

static int cmd_read(int threads)
{
	pthread_t t[THREADS_MAX];
	char line[64];

	for (int i = 0; i < threads; i++) {
		int r = pthread_create(&t[i], NULL, reader, NULL);
		if (r) {
			fprintf(stderr, "read-flood: pthread_create: %s\n", strerror(r));
			return 1;
		}
	}
	pthread_mutex_lock(&started_lock);
	while (started < threads)
		pthread_cond_wait(&started_cond, &started_lock);
	pthread_mutex_unlock(&started_lock);
	printf("reading %ld\n", atomic_load(&reads));
	fflush(stdout);
	(void)!fgets(line, sizeof(line), stdin); /* a line or EOF: stop */
	atomic_store(&stop, true);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("read %ld errors %ld\n", atomic_load(&reads), atomic_load(&errors));
	fflush(stdout);
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmd_claims(const char *dir, long first, long count, long seconds)
{
	int64_t until = now_ns() + (int64_t)seconds * 1000000000;
	char path[4096];

	for (long i = first; i < first + count && (i == first || now_ns() < until); i++) {
		snprintf(path, sizeof(path), "%s/vm-%ld", dir, i);
		int64_t t0 = now_ns();
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 || close(fd) < 0) {
			fprintf(stderr, "read-flood: claim %s: %s\n", path, strerror(errno));
			return 1;
		}
		int64_t t1 = now_ns();
		printf("%lld\n", (long long)((t1 - t0) / 1000));
		if (unlink(path) < 0) {
			fprintf(stderr, "read-flood: unlink %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "read") == 0) {
		int threads = atoi(argv[3]);
		if (threads >= 1 && threads <= THREADS_MAX) {
			file = argv[2];
			return cmd_read(threads);
		}
	}
	if (argc == 6 && strcmp(argv[1], "claims") == 0) {
		long first = atol(argv[3]), count = atol(argv[4]), seconds = atol(argv[5]);
		if (first >= 0 && count >= 1 && seconds >= 1)
			return cmd_claims(argv[2], first, count, seconds);
	}
	fprintf(stderr,
		"usage: read-flood read FILE THREADS (1..%d)\n"
		"       read-flood claims DIR FIRST COUNT SECONDS\n",
		THREADS_MAX);
	return 2;
}
