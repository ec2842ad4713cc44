/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the program runner (recovery/program.c) with real
 * processes: exit status and signal, the output lines and their bounds,
 * the clean environment, stdin and descriptors, the deadline (SIGTERM to
 * the group, SIGKILL after the grace, everything reaped) and the stop.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "recovery/recovery-internal.h"
#include "tests/common/check-main.h"

#define MS INT64_C(1000000)

struct lines {
	char text[8][PROGRAM_LINE_MAX + 1];
	size_t n;
};

static void keep_line(void *userdata, const char *line)
{
	struct lines *l = userdata;

	if (l->n < 8)
		snprintf(l->text[l->n], sizeof(l->text[0]), "%s", line);
	l->n++;
}

static int run_sh(const char *script, int64_t timeout_ns, int64_t grace_ns, int stop_fd,
		  struct lines *l, struct program_result *res)
{
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)script, NULL };
	char *envp[] = { (char *)"FOO=bar", (char *)"PATH=/usr/bin:/bin", NULL };
	struct program_run p = { .argv = argv,
				 .envp = envp,
				 .timeout_ns = timeout_ns,
				 .kill_grace_ns = grace_ns,
				 .stop_fd = stop_fd,
				 .line = keep_line,
				 .userdata = l };

	memset(l, 0, sizeof(*l));
	return program_run(&p, res);
}

/* Whether pid ends within 10 s (a pidfd is readable once it exited, also
 * as a zombie nobody reaps: an orphan in a container whose init does not
 * reap).  The group's SIGKILL is delivered asynchronously. */
static bool gone(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0 && errno == ENOSYS) {
		/* no pidfd (valgrind): look at its state for as long */
		char path[64], state = 0;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		for (int i = 0; i < 1000; i++) {
			FILE *f = fopen(path, "re");
			if (!f)
				return true;
			if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
				state = 0;
			fclose(f);
			if (state == 'Z')
				return true;
			usleep(10000);
		}
		return false;
	}
	if (fd < 0)
		return errno == ESRCH;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int k = poll(&p, 1, 10000);
	close(fd);
	return k == 1;
}

START_TEST(test_exit_and_output)
{
	struct program_result res;
	struct lines l;

	ck_assert_int_eq(run_sh("echo one; echo two >&2; echo \"$FOO:$HOME\"; exit 3", 5000 * MS,
				100 * MS, -1, &l, &res),
			 0);
	ck_assert_int_eq(res.end, PROGRAM_EXITED);
	ck_assert_int_eq(res.status, 3);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.text[0], "one");
	ck_assert_str_eq(l.text[1], "two");
	ck_assert_str_eq(l.text[2], "bar:"); /* its environment is envp alone */
	ck_assert_str_eq(res.last_line, "bar:");
	ck_assert_int_eq(run_sh("printf 'no newline'", 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.status, 0);
	ck_assert_str_eq(res.last_line, "no newline");
	ck_assert_int_eq(run_sh("kill -KILL $$", 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_SIGNALED);
	ck_assert_int_eq(res.status, SIGKILL);
}
END_TEST

/* A long line is cut, the rest of it dropped; lines past the bound are
 * counted, not handed on. */
START_TEST(test_output_bounds)
{
	struct program_result res;
	struct lines l;

	ck_assert_int_eq(run_sh("head -c 1000 /dev/zero | tr '\\0' x; echo; echo short", 5000 * MS,
				100 * MS, -1, &l, &res),
			 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_uint_eq(strlen(l.text[0]), PROGRAM_LINE_MAX);
	ck_assert_str_eq(l.text[1], "short");
	ck_assert_int_eq(run_sh("seq 1 1500", 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_uint_eq(l.n, PROGRAM_LINES_MAX);
	ck_assert_uint_eq(res.dropped, 500);
	ck_assert_str_eq(res.last_line, "1500");
}
END_TEST

/* stdin is /dev/null; no descriptor of ours but 0, 1, 2 is inherited. */
START_TEST(test_stdin_and_descriptors)
{
	struct program_result res;
	struct lines l;
	char script[128];
	int fd = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */

	ck_assert_int_ge(fd, 3);
	snprintf(script, sizeof(script),
		 "cat; if [ -e /proc/self/fd/%d ]; then echo open; else echo closed; fi", fd);
	ck_assert_int_eq(run_sh(script, 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.status, 0);
	ck_assert_str_eq(res.last_line, "closed");
	close(fd);
}
END_TEST

START_TEST(test_exec_failure)
{
	char *argv[] = { (char *)"/nonexistent/program", NULL };
	char *envp[] = { NULL };
	struct program_run p = { .argv = argv, .envp = envp, .timeout_ns = MS, .stop_fd = -1 };
	struct program_result res;

	ck_assert_int_eq(program_run(&p, &res), -ENOENT);
	argv[0] = (char *)"relative";
	ck_assert_int_eq(program_run(&p, &res), -EINVAL);
}
END_TEST

/* The deadline: SIGTERM to the whole group; a group that ignores it is
 * SIGKILLed after the grace; nothing of it is left. */
/* The child a script started (its pid its first line) is gone; a script
 * the deadline ended before it printed started none. */
static bool started_child_gone(const struct lines *l)
{
	return l->n == 0 || gone((pid_t)atoi(l->text[0]));
}

START_TEST(test_deadline)
{
	struct program_result res;
	struct lines l;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;

	ck_assert_int_eq(run_sh("sleep 100 & echo $!; wait", 200 * MS, 5000 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_TIMED_OUT);
	ck_assert_int_eq(res.status, SIGTERM); /* SIGTERM sufficed */
	ck_assert_int_lt(res.elapsed_ns, 4000 * MS);
	ck_assert(started_child_gone(&l));

	/* A program that ignores SIGTERM from its first instruction (inherited
	 * across fork and exec; a shell's own `trap '' TERM` may come after a
	 * deadline that a loaded machine reaches first): only the SIGKILL, at
	 * the deadline plus the grace (at most the deadline), ends it, never
	 * anything earlier. */
	ck_assert_int_eq(sigaction(SIGTERM, &ign, &old), 0);
	int r = run_sh("sleep 100 & echo $!; wait; wait", 1000 * MS, 3000 * MS, -1, &l, &res);
	ck_assert_int_eq(sigaction(SIGTERM, &old, NULL), 0);
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(res.end, PROGRAM_TIMED_OUT);
	ck_assert_int_eq(res.status, SIGKILL);
	ck_assert_int_ge(res.elapsed_ns, 2000 * MS);
	ck_assert(started_child_gone(&l));
}
END_TEST

/* A stop ends the run as the deadline would, at once. */
START_TEST(test_stop)
{
	struct program_result res;
	struct lines l;
	int efd = eventfd(1, EFD_CLOEXEC); /* readable from the start */

	ck_assert_int_ge(efd, 0);
	ck_assert_int_eq(run_sh("sleep 100", 60000 * MS, 5000 * MS, efd, &l, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_STOPPED);
	ck_assert_int_lt(res.elapsed_ns, 4000 * MS);
	close(efd);
}
END_TEST

static const struct check_case program_case = { .suite = "recovery-program",
						.tcase = "program",
						.timeout = 60 };
CHECK_CASE_MAIN(program_case, test_exit_and_output, test_output_bounds, test_stdin_and_descriptors,
		test_exec_failure, test_deadline, test_stop)
