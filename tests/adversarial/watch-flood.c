/* SPDX-License-Identifier: MIT */
/*
 * watch-flood.c - an unprivileged user's flood of open handles of one
 * notified file, for watch-flood.sh (docs/security.md).
 *
 *   watch-flood FILE PROCS
 *
 * Forks PROCS children (one process's descriptor limit is lower than what
 * the reader budget allows), each opening FILE read-only until the daemon
 * refuses (ENOBUFS: the uid's budget is spent) or its descriptor limit is
 * reached; prints "opened N" (the total) and waits for a line on stdin;
 * then every child exits at once, closing all its descriptors in one
 * burst, and it prints "closed" once they are gone.  Exits 1 on an error
 * of its own (message on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCS_MAX 64

/* A child: open until refused, report the count, exit when told. */
static _Noreturn void child(const char *file, int report_fd, int go_fd)
{
	struct rlimit rl;
	long opened = 0;
	char byte;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (;;) {
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOBUFS && errno != EMFILE && errno != ENFILE) {
				perror("watch-flood: open");
				_exit(1);
			}
			break;
		}
		opened++;
	}
	if (write(report_fd, &opened, sizeof(opened)) != (ssize_t)sizeof(opened))
		_exit(1);
	while (read(go_fd, &byte, 1) < 0 && errno == EINTR)
		;
	_exit(0); /* every descriptor closes at once */
}

int main(int argc, char **argv)
{
	int report[2], go[2], procs;
	pid_t pids[PROCS_MAX];
	long total = 0;
	char line[64];

	if (argc != 3 || (procs = atoi(argv[2])) < 1 || procs > PROCS_MAX) {
		fprintf(stderr, "usage: watch-flood FILE PROCS (1..%d)\n", PROCS_MAX);
		return 2;
	}
	if (pipe(report) < 0 || pipe(go) < 0) {
		perror("watch-flood: pipe");
		return 1;
	}
	for (int i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("watch-flood: fork");
			return 1;
		}
		if (pids[i] == 0) {
			close(report[0]);
			close(go[1]);
			child(argv[1], report[1], go[0]);
		}
	}
	close(report[1]);
	close(go[0]);
	for (int i = 0; i < procs; i++) {
		long n;
		if (read(report[0], &n, sizeof(n)) != (ssize_t)sizeof(n)) {
			fprintf(stderr, "watch-flood: a child failed\n");
			return 1;
		}
		total += n;
	}
	printf("opened %ld\n", total);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	close(go[1]); /* EOF: every child exits */
	for (int i = 0; i < procs; i++)
		while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
			;
	printf("closed\n");
	fflush(stdout);
	return 0;
}
