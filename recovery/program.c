/* SPDX-License-Identifier: MIT */
/*
 * program.c - run one program under a deadline, its output captured
 * (recovery-internal.h, program_run).
 *
 * Design notes
 * ============
 *
 * Process group.  The child makes itself the leader of a new process group
 * (and the parent does the same for it, so that neither order of the two
 * calls leaves a window): at the deadline SIGTERM, and SIGKILL after the
 * grace, go to the whole group, so a shell script's own children (a
 * sriov-manage it started) end with it.  A child that left the group
 * (setsid) is its own business.
 *
 * Between fork and exec the child calls only async-signal-safe functions,
 * with everything built before the fork.  PR_SET_PDEATHSIG(SIGKILL) ends
 * the program if the thread that forked it ends (the recovery thread lives
 * until recovery_stop, which kills and reaps first) or vfhealthd dies.
 * Every descriptor above 2 is closed: the program must not inherit
 * /dev/fuse or the store's flock'd files.  A close-on-exec pipe reports a
 * failed exec's errno, so "could not start" is told apart from "exited 127".
 *
 * Waiting.  One poll(2) on a pidfd (the exit), the output pipe and the stop
 * descriptor, with the next deadline as its timeout: no sleeping, no
 * SIGCHLD (where pidfd_open(2) is missing, a look every NO_PIDFD_POLL_MS).  The output is read until the program exits; what a leftover
 * grandchild writes after that is not waited for.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/parse.h"
#include "recovery/recovery-internal.h"

/* Without pidfd_open(2) (kernels before 5.3, valgrind), the exit is looked
 * for this often. */
#define NO_PIDFD_POLL_MS 10

/* The child, between fork and exec: async-signal-safe calls only. */
static _Noreturn void child_exec(const struct program_run *p, int null_fd, int out_fd, int err_fd,
				 pid_t parent, const sigset_t *mask)
{
	int err;

	if (setpgid(0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		goto fail;
	if (getppid() != parent)
		_exit(127); /* vfhealthd is gone already */
	if (dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
		goto fail;
	/* the error pipe moves to 3, everything above it goes */
	if (dup3(err_fd, 3, O_CLOEXEC) < 0 || close_range(4, ~0U, 0) < 0)
		goto fail;
	if (sigprocmask(SIG_SETMASK, mask, NULL) < 0)
		goto fail;
	execve(p->argv[0], p->argv, p->envp);
fail:
	err = errno;
	if (write(3, &err, sizeof(err)) < 0 && write(err_fd, &err, sizeof(err)) < 0) {
		/* nothing left to tell */
	}
	_exit(127);
}

struct output {
	const struct program_run *p;
	struct program_result *res;
	char buf[PROGRAM_LINE_MAX + 1];
	size_t len;
	bool cut; /* dropping the rest of a line longer than PROGRAM_LINE_MAX */
	size_t lines;
};

static void output_line(struct output *o)
{
	o->buf[o->len] = '\0';
	o->len = 0;
	memcpy(o->res->last_line, o->buf, sizeof(o->res->last_line));
	if (o->lines++ >= PROGRAM_LINES_MAX) {
		o->res->dropped++;
		return;
	}
	if (o->p->line)
		o->p->line(o->p->userdata, o->buf);
}

enum read_result {
	READ_EOF,  /* EOF or an error: the pipe is done */
	READ_DATA, /* read some */
	READ_NONE, /* nothing there now */
};

static enum read_result output_read(struct output *o, int fd)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return READ_NONE;
	if (n <= 0) {
		if (o->len && !o->cut)
			output_line(o);
		return READ_EOF;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (chunk[i] == '\n') {
			if (!o->cut)
				output_line(o);
			o->cut = false;
			o->len = 0;
		} else if (!o->cut) {
			o->buf[o->len++] = chunk[i];
			if (o->len == PROGRAM_LINE_MAX) {
				output_line(o);
				o->cut = true;
			}
		}
	}
	return READ_DATA;
}

int program_run(const struct program_run *p, struct program_result *ret)
{
	_cleanup_close_ int null_fd = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1,
			    pidfd = -1;
	struct output o = { .p = p, .res = ret };
	pid_t parent = getpid(), pid;
	int fds[2], err = 0;
	sigset_t mask;
	ssize_t n;

	if (!p || !ret || !p->argv || !p->argv[0] || p->argv[0][0] != '/' || !p->envp)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	sigemptyset(&mask);
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0)
		return -errno;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	out_r = fds[0];
	out_w = fds[1];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	err_r = fds[0];
	err_w = fds[1];

	int64_t start = monotonic_ns();
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child_exec(p, null_fd, out_w, err_w, parent, &mask);
	(void)setpgid(pid, pid); /* EACCES once it exec'd: it did it itself */
	close(move_fd(out_w));
	close(move_fd(err_w));
	do
		n = read(err_r, &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	if (n != 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return n == (ssize_t)sizeof(err) && err > 0 ? -err : -EIO;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno != ENOSYS) {
		int r = -errno;
		kill(-pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return r;
	}
	(void)fcntl(out_r, F_SETFL, O_NONBLOCK);

	int64_t deadline = start + p->timeout_ns;
	int64_t grace = p->kill_grace_ns < p->timeout_ns ? p->kill_grace_ns : p->timeout_ns;
	bool output_open = true, termed = false, killed = false;
	ret->end = PROGRAM_EXITED;
	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = pidfd, .events = POLLIN },
			{ .fd = output_open ? out_r : -1, .events = POLLIN },
			{ .fd = termed ? -1 : p->stop_fd, .events = POLLIN },
		};
		int64_t now = monotonic_ns();

		if (now >= deadline && !killed) {
			if (!termed) {
				kill(-pid, SIGTERM);
				termed = true;
				deadline = now + grace;
				if (ret->end == PROGRAM_EXITED)
					ret->end = PROGRAM_TIMED_OUT;
			} else {
				kill(-pid, SIGKILL);
				killed = true;
			}
			continue;
		}
		int64_t left_ms = killed ? -1 : (deadline - now + 999999) / 1000000;
		if (pidfd < 0 && (left_ms < 0 || left_ms > NO_PIDFD_POLL_MS))
			left_ms = NO_PIDFD_POLL_MS;
		int k = poll(pfd, 3, left_ms > INT32_MAX ? INT32_MAX : (int)left_ms);
		if (k < 0 && errno != EINTR)
			return -errno; /* cannot happen with valid descriptors */
		siginfo_t info = { 0 };
		bool exited = false;
		if (pidfd < 0) {
			/* no pidfd: look, reaping it if it exited */
			if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG) == 0 && info.si_pid)
				exited = true;
		} else if (k > 0 && pfd[0].revents) {
			if (waitid(P_PID, (id_t)pid, &info, WEXITED) < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			exited = true;
		}
		if (k <= 0 && !exited)
			continue;
		if (k > 0 && pfd[1].revents)
			output_open = output_read(&o, out_r) != READ_EOF;
		if (k > 0 && pfd[2].revents && !termed && !exited) {
			ret->end = PROGRAM_STOPPED;
			deadline = monotonic_ns(); /* SIGTERM now, SIGKILL after the grace */
			continue;
		}
		if (exited) {
			/* what it wrote before it exited; not what a leftover writes */
			enum read_result rr = READ_DATA;
			while (output_open && rr == READ_DATA)
				rr = output_read(&o, out_r);
			if (rr == READ_NONE && o.len && !o.cut)
				output_line(&o);
			if (termed || killed)
				kill(-pid, SIGKILL); /* what is left of its group */
			if (ret->end == PROGRAM_EXITED)
				ret->end = info.si_code == CLD_EXITED ? PROGRAM_EXITED :
									PROGRAM_SIGNALED;
			ret->status = info.si_status;
			break;
		}
	}
	ret->elapsed_ns = monotonic_ns() - start;
	return 0;
}
