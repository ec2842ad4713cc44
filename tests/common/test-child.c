/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/child.c: real children, real signals.  What a child
 * checks of itself it reports as its exit status (a bit a failure), since
 * between fork and exit it may call only async-signal-safe functions.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/parse.h"
#include "tests/common/check-main.h"

#define MS 1000000LL

static int term_pipe = -1;

static void on_term(int sig)
{
	(void)sig;
	if (write(term_pipe, "T", 1) < 0) {
		/* the test sees no T */
	}
}

static int read_byte(int fd, char *c)
{
	ssize_t n;

	do
		n = read(fd, c, 1);
	while (n < 0 && errno == EINTR);
	return (int)n;
}

/* A child that survives SIGTERM is SIGKILLed after the grace; SIGTERM came
 * first.  One that dies of SIGTERM is not SIGKILLed. */
START_TEST(test_term_ignored)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	int p[2], ready[2];
	char b;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	const int fds[] = { CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL, p[1], ready[1] };
	struct child_opts o = { .fds = fds, .n_fds = 5, .new_pgroup = true };
	if (child_fork(&o, &c) == 0) {
		struct sigaction sa = { .sa_handler = on_term };

		term_pipe = 3;
		sigaction(SIGTERM, &sa, NULL);
		if (write(4, "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	close(ready[1]);
	ck_assert_int_gt(c.pid, 0);
	ck_assert(c.group);
	ck_assert_int_eq(read_byte(ready[0], &b), 1);
	ck_assert_int_eq(child_try_wait(&c, &st), 0); /* runs */
	ck_assert_int_eq(child_wait(&c, 50 * MS, 200 * MS, &st), 0);
	ck_assert_int_eq(st.end, CHILD_SIGNALED);
	ck_assert_int_eq(st.code, SIGKILL);
	ck_assert(st.timed_out);
	ck_assert_int_eq(c.pid, 0);
	ck_assert_int_eq(c.pidfd, -1);
	ck_assert_int_eq(read_byte(p[0], &b), 1);
	ck_assert_int_eq(b, 'T');
	close(p[0]);
	close(ready[0]);

	/* dies of SIGTERM */
	if (child_fork(&(struct child_opts){ 0 }, &c) == 0) {
		for (;;)
			pause();
	}
	ck_assert_int_eq(child_wait(&c, 10 * MS, 60000 * MS, &st), 0);
	ck_assert_int_eq(st.end, CHILD_SIGNALED);
	ck_assert_int_eq(st.code, SIGTERM);
	ck_assert(st.timed_out);
}
END_TEST

/* A child that ends at once is not waited out: neither deadline nor grace. */
START_TEST(test_early_exit)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	int64_t start = monotonic_ns();

	if (child_fork(&(struct child_opts){ 0 }, &c) == 0)
		_exit(0);
	ck_assert_int_eq(child_wait(&c, 60000 * MS, 60000 * MS, &st), 0);
	ck_assert_int_lt(monotonic_ns() - start, 30000 * MS);
	ck_assert_int_eq(st.end, CHILD_EXITED);
	ck_assert_int_eq(st.code, 0);
	ck_assert(!st.timed_out);
	ck_assert_int_eq(child_wait(&c, 0, 0, &st), -ECHILD); /* reaped */
}
END_TEST

/* Exit codes and signals, from waitid and from a wait status. */
START_TEST(test_status)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	int wstatus;
	pid_t pid;

	if (child_fork(&(struct child_opts){ 0 }, &c) == 0)
		_exit(3);
	ck_assert_int_eq(child_wait(&c, -1, 0, &st), 0);
	ck_assert_int_eq(st.end, CHILD_EXITED);
	ck_assert_int_eq(st.code, 3);
	ck_assert(!st.timed_out);

	if (child_fork(&(struct child_opts){ 0 }, &c) == 0) {
		kill(getpid(), SIGUSR1);
		_exit(0);
	}
	ck_assert_int_eq(child_wait(&c, -1, 0, &st), 0);
	ck_assert_int_eq(st.end, CHILD_SIGNALED);
	ck_assert_int_eq(st.code, SIGUSR1);
	ck_assert(!st.timed_out);

	pid = fork();
	if (pid == 0)
		_exit(200);
	ck_assert_int_eq(waitpid(pid, &wstatus, 0), pid);
	child_status_decode(wstatus, &st);
	ck_assert_int_eq(st.end, CHILD_EXITED);
	ck_assert_int_eq(st.code, 200);
	pid = fork();
	if (pid == 0) {
		signal(SIGHUP, SIG_DFL);
		raise(SIGHUP);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &wstatus, 0), pid);
	child_status_decode(wstatus, &st);
	ck_assert_int_eq(st.end, CHILD_SIGNALED);
	ck_assert_int_eq(st.code, SIGHUP);
}
END_TEST

/* The child holds what it was given, at the numbers given, across exec, and
 * nothing else: not a descriptor of ours without close-on-exec. */
START_TEST(test_fds)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	struct stat null_st, pipe_st;
	int p[2], leak = fcntl(0, F_DUPFD, 20); /* no close-on-exec on purpose */

	ck_assert_int_ge(leak, 20);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(stat("/dev/null", &null_st), 0);
	ck_assert_int_eq(fstat(p[1], &pipe_st), 0);
	const int fds[] = { CHILD_FD_NULL, CHILD_FD_CLOSED, 2, p[1] };
	struct child_opts o = { .fds = fds, .n_fds = 4 };
	if (child_fork(&o, &c) == 0) {
		struct stat s;
		int bad = 0;

		if (fstat(0, &s) < 0 || s.st_rdev != null_st.st_rdev)
			bad |= 1;
		if (fcntl(1, F_GETFD) >= 0 || errno != EBADF)
			bad |= 2;
		if (fstat(3, &s) < 0 || s.st_ino != pipe_st.st_ino)
			bad |= 4;
		if (fcntl(3, F_GETFD) != 0 || fcntl(0, F_GETFD) != 0)
			bad |= 8; /* close-on-exec */
		for (int fd = 4; fd < 64; fd++)
			if (fcntl(fd, F_GETFD) >= 0)
				bad |= 16;
		_exit(bad);
	}
	ck_assert_int_eq(child_wait(&c, -1, 0, &st), 0);
	ck_assert_int_eq(st.end, CHILD_EXITED);
	ck_assert_int_eq(st.code, 0);

	/* across exec: 3 kept, the leak and the exec report pipe gone */
	char script[128];
	snprintf(script, sizeof(script),
		 "for f in 3 4 5 %d; do [ -e /proc/$$/fd/$f ] && echo $f; done; echo end", leak);
	char *argv[] = { (char *)"sh", (char *)"-c", script, NULL };
	struct child_exec e = { .path = "/bin/sh", .argv = argv };
	const int out_fds[] = { CHILD_FD_NULL, p[1], 2, p[1] };
	o.fds = out_fds;
	ck_assert_int_eq(child_spawn(&o, &e, &c), 0);
	close(p[1]);
	ck_assert_int_eq(child_wait(&c, -1, 0, &st), 0);
	ck_assert_int_eq(st.code, 0);
	char out[64] = "";
	ssize_t n = read(p[0], out, sizeof(out) - 1);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
	ck_assert_str_eq(out, "3\nend\n");
	close(p[0]);
	close(leak);
}
END_TEST

/* An exec that fails is its errno, not a program that exits 127. */
START_TEST(test_spawn_failure)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	char *argv[] = { (char *)"null", NULL };
	struct child_exec e = { .path = "/dev/null", .argv = argv };
	struct child_opts o = { 0 };

	ck_assert_int_eq(child_spawn(&o, &e, &c), -EACCES);
	ck_assert_int_eq(c.pid, 0);
	e.path = "/nonexistent/vfhealth";
	ck_assert_int_eq(child_spawn(&o, &e, &c), -ENOENT);

	char *sh[] = { (char *)"sh", (char *)"-c", (char *)"exit 127", NULL };
	e = (struct child_exec){ .path = "/bin/sh", .argv = sh };
	ck_assert_int_eq(child_spawn(&o, &e, &c), 0);
	ck_assert_int_eq(child_wait(&c, -1, 0, &st), 0);
	ck_assert_int_eq(st.end, CHILD_EXITED);
	ck_assert_int_eq(st.code, 127);
}
END_TEST

/* Dispositions back to default and the mask as asked, whatever ours are. */
START_TEST(test_signals)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	sigset_t usr2, old;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	sigprocmask(SIG_BLOCK, &usr2, &old);
	for (int with_mask = 0; with_mask < 2; with_mask++) {
		struct child_opts o = { .sigmask = with_mask ? &usr2 : NULL };

		if (child_fork(&o, &c) == 0) {
			struct sigaction sa;
			sigset_t now;
			int bad = 0;

			if (sigaction(SIGPIPE, NULL, &sa) < 0 || sa.sa_handler != SIG_DFL)
				bad |= 1;
			if (sigprocmask(SIG_SETMASK, NULL, &now) < 0 ||
			    sigismember(&now, SIGUSR2) != with_mask)
				bad |= 2;
			_exit(bad);
		}
		ck_assert_int_eq(child_wait(&c, -1, 0, &st), 0);
		ck_assert_int_eq(st.end, CHILD_EXITED);
		ck_assert_int_eq(st.code, 0);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	signal(SIGPIPE, SIG_DFL);
}
END_TEST

/* Read a pid the other end wrote. */
static pid_t read_pid(int fd)
{
	pid_t pid = 0;
	ssize_t n;

	do
		n = read(fd, &pid, sizeof(pid));
	while (n < 0 && errno == EINTR);
	ck_assert_int_eq(n, (ssize_t)sizeof(pid));
	return pid;
}

/* The child's parent-death signal: its parent dies, it is SIGKILLed.  And a
 * child's group: what it started dies with it.  This process is the
 * subreaper that reaps the orphans. */
START_TEST(test_pdeathsig_and_group)
{
	struct child c = CHILD_NONE;
	struct child_status st;
	int p[2], q[2], wstatus;
	pid_t middle, grandchild;

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(q, O_CLOEXEC), 0);
	middle = fork();
	if (middle == 0) {
		const int fds[] = { 0, 1, 2, p[1], q[1] };
		struct child_opts o = { .fds = fds, .n_fds = 5, .pdeathsig = SIGKILL };
		struct child g;

		if (child_fork(&o, &g) == 0) {
			pid_t self = getpid();
			if (write(3, &self, sizeof(self)) != sizeof(self) ||
			    write(4, &self, sizeof(self)) != sizeof(self))
				_exit(1);
			for (;;)
				pause();
		}
		/* Once its child is armed (before, it would leave at once:
		 * its parent gone), it leaves it behind. */
		close(q[1]);
		_exit(read_pid(q[0]) == g.pid ? 0 : 1);
	}
	close(q[1]);
	grandchild = read_pid(p[0]);
	ck_assert_int_eq(waitpid(middle, &wstatus, 0), middle);
	ck_assert(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
	close(q[0]);
	ck_assert_int_eq(waitpid(grandchild, &wstatus, 0), grandchild);
	ck_assert(WIFSIGNALED(wstatus));
	ck_assert_int_eq(WTERMSIG(wstatus), SIGKILL);

	/* a group: the child's own child is killed with it */
	const int fds[] = { 0, 1, 2, p[1] };
	struct child_opts o = { .fds = fds, .n_fds = 4, .new_pgroup = true };
	if (child_fork(&o, &c) == 0) {
		const int kept[] = { 0, 1, 2, 3 }; /* where this child has them */
		struct child_opts inner = { .fds = kept, .n_fds = 4 };
		struct child g;
		int r = child_fork(&inner, &g);

		if (r == 0) {
			pid_t self = getpid();
			if (write(3, &self, sizeof(self)) != sizeof(self))
				_exit(1);
		}
		for (;;)
			pause();
	}
	grandchild = read_pid(p[0]);
	ck_assert_int_eq(child_wait(&c, 0, 0, &st), 0);
	ck_assert_int_eq(st.code, SIGKILL);
	ck_assert_int_eq(waitpid(grandchild, &wstatus, 0), grandchild);
	ck_assert(WIFSIGNALED(wstatus));
	ck_assert_int_eq(WTERMSIG(wstatus), SIGKILL);
	close(p[0]);
	close(p[1]);
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}
END_TEST

static const struct check_case child_case = {
	.suite = "child",
	.tcase = "child",
	.timeout = 60,
};
CHECK_CASE_MAIN(child_case, test_term_ignored, test_early_exit, test_status, test_fds,
		test_spawn_failure, test_signals, test_pdeathsig_and_group)
