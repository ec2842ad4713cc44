/* SPDX-License-Identifier: MIT */
/* child.c - child processes: fork, exec, deadline, reaping.  Contract in child.h. */
#include "common/child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/parse.h"

extern char **environ;

/* A process as fork(2) would make it but without the handlers fork(3)
 * runs.  Every architecture vGPU hosts run (x86-64, arm64) takes clone's
 * flags first. */
static pid_t raw_clone(unsigned long flags)
{
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

/* -- in the child: async-signal-safe calls only ---------------------------- */

/* fds[i] to descriptor i, *report (when >= 0) to n_fds close-on-exec, every
 * other descriptor closed.  The sources move above every target first, so
 * that no dup overwrites a source still to be placed. */
static int place_fds(const struct child_opts *o, int *report)
{
	int tmp[CHILD_FDS_MAX], min = (int)o->n_fds + 1, rep = -1;
	unsigned n = o->n_fds;

	for (unsigned i = 0; i < n; i++)
		if (o->fds[i] >= min)
			min = o->fds[i] + 1;
	if (*report >= min)
		min = *report + 1;
	if (*report >= 0) {
		rep = fcntl(*report, F_DUPFD_CLOEXEC, min);
		if (rep < 0)
			return -errno;
		*report = rep;
	}
	for (unsigned i = 0; i < n; i++) {
		tmp[i] = -1;
		if (o->fds[i] >= 0)
			tmp[i] = fcntl(o->fds[i], F_DUPFD_CLOEXEC, min);
		else if (o->fds[i] == CHILD_FD_NULL)
			tmp[i] = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
		else
			continue;
		if (tmp[i] < 0)
			return -errno;
		/* dup3 could not take it with a target above min: keep clear */
		if (tmp[i] < min) {
			int moved = fcntl(tmp[i], F_DUPFD_CLOEXEC, min);
			if (moved < 0)
				return -errno;
			tmp[i] = moved;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		if (tmp[i] < 0)
			(void)close((int)i);
		else if (dup3(tmp[i], (int)i, 0) < 0)
			return -errno;
	}
	if (rep >= 0) {
		if (dup3(rep, (int)n, O_CLOEXEC) < 0)
			return -errno;
		*report = (int)n;
		n++;
	}
	if (close_range(n, ~0U, 0) < 0)
		return -errno;
	return 0;
}

static int setup(const struct child_opts *o, pid_t parent, int *report)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;
	int r;

	/* Some numbers are the C library's or valgrind's: they refuse, and
	 * keep nothing of ours. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &dfl, NULL);
	if (o->new_pgroup && setpgid(0, 0) < 0)
		return -errno;
	if (o->pdeathsig) {
		if (prctl(PR_SET_PDEATHSIG, o->pdeathsig) < 0)
			return -errno;
		if (!o->new_pid_ns && getppid() != parent)
			_exit(CHILD_SETUP_FAILED); /* the parent is gone already */
	}
	r = place_fds(o, report);
	if (r < 0)
		return r;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, o->sigmask ? o->sigmask : &none, NULL) < 0)
		return -errno;
	return 0;
}

static _Noreturn void fail(int report, int err)
{
	if (report >= 0 && write(report, &err, sizeof(err)) < 0) {
		/* nothing left to tell */
	}
	_exit(CHILD_SETUP_FAILED);
}

/* -- in the parent ---------------------------------------------------------- */

static int fork_reporting(const struct child_opts *o, int *report, struct child *ret)
{
	unsigned long flags = o->new_pid_ns ? CLONE_NEWPID : 0;
	pid_t parent = getpid(), pid;
	sigset_t all, old;
	int r, err;

	if (o->n_fds > CHILD_FDS_MAX || (o->n_fds && !o->fds))
		return -EINVAL;
	sigfillset(&all);
	r = pthread_sigmask(SIG_SETMASK, &all, &old);
	if (r)
		return -r;
	pid = raw_clone(flags);
	if (pid == 0) {
		r = setup(o, parent, report);
		if (r < 0)
			fail(*report, -r);
		*ret = CHILD_NONE;
		return 0;
	}
	err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
		return -err;
	if (o->new_pgroup)
		(void)setpgid(pid, pid); /* EACCES once it exec'd: it did it itself */
	ret->pid = pid;
	ret->group = o->new_pgroup;
	/* pidfd_open has no fallback to fear: the pid cannot be reused before
	 * we reap it */
	ret->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	return 1;
}

int child_fork(const struct child_opts *o, struct child *ret)
{
	int report = -1;

	return fork_reporting(o, &report, ret);
}

static void reap_blocking(struct child *c)
{
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
	child_release(c);
}

int child_spawn(const struct child_opts *o, const struct child_exec *e, struct child *ret)
{
	int pipefd[2], err = 0, r;
	ssize_t n;

	if (!e || !e->argv || !e->argv[0])
		return -EINVAL;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	r = fork_reporting(o, &pipefd[1], ret);
	if (r == 0) {
		char *const *envp = e->envp ? e->envp : environ;

		if (e->path)
			execve(e->path, e->argv, envp);
		else
			fexecve(e->fd, e->argv, envp);
		fail(pipefd[1], errno);
	}
	close(pipefd[1]);
	if (r < 0) {
		close(pipefd[0]);
		return r;
	}
	/* EOF: the exec succeeded (the pipe closed on exec); else its errno */
	do
		n = read(pipefd[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	if (n == 0)
		return 0;
	reap_blocking(ret);
	return n == (ssize_t)sizeof(err) && err > 0 ? -err : -EIO;
}

int child_signal(const struct child *c, int sig)
{
	if (c->pid <= 0)
		return -ESRCH;
	/* the group, and the child itself should it have left it */
	if (c->group && kill(-c->pid, sig) == 0)
		return 0;
	return kill(c->pid, sig) < 0 ? -errno : 0;
}

void child_status_decode(int wstatus, struct child_status *ret)
{
	ret->timed_out = false;
	if (WIFEXITED(wstatus)) {
		ret->end = CHILD_EXITED;
		ret->code = WEXITSTATUS(wstatus);
	} else {
		ret->end = CHILD_SIGNALED;
		ret->code = WTERMSIG(wstatus);
	}
}

int child_try_wait(struct child *c, struct child_status *ret)
{
	siginfo_t info = { 0 };

	if (c->pid <= 0)
		return -ECHILD;
	while (waitid(P_PID, (id_t)c->pid, &info, WEXITED | WNOHANG) < 0)
		if (errno != EINTR)
			return -errno;
	if (!info.si_pid)
		return 0;
	if (ret) {
		ret->timed_out = false;
		ret->end = info.si_code == CLD_EXITED ? CHILD_EXITED : CHILD_SIGNALED;
		ret->code = info.si_status;
	}
	child_release(c);
	return 1;
}

/* 1 once reaped, 0 when the deadline (monotonic, < 0: none) passed. */
static int wait_until(struct child *c, int64_t deadline, struct child_status *ret)
{
	for (;;) {
		int r = child_try_wait(c, ret);
		int64_t now = monotonic_ns();
		int64_t ms = deadline < 0 ? -1 : (deadline - now + 999999) / 1000000;

		if (r != 0)
			return r;
		if (deadline >= 0 && now >= deadline)
			return 0;
		if (c->pidfd < 0 && (ms < 0 || ms > CHILD_NO_PIDFD_POLL_MS))
			ms = CHILD_NO_PIDFD_POLL_MS;
		struct pollfd pfd = { .fd = c->pidfd, .events = POLLIN };
		if (poll(&pfd, c->pidfd < 0 ? 0 : 1, ms > INT32_MAX ? INT32_MAX : (int)ms) < 0 &&
		    errno != EINTR)
			return -errno;
	}
}

int child_wait(struct child *c, int64_t timeout_ns, int64_t grace_ns, struct child_status *ret)
{
	struct child_status st;
	pid_t pid = c->pid;
	bool group = c->group, signalled = false;
	int64_t now = monotonic_ns();
	int r;

	if (pid <= 0)
		return -ECHILD;
	if (c->pidfd < 0)
		c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	r = wait_until(c, timeout_ns < 0 ? -1 : now + timeout_ns, &st);
	if (r == 0 && grace_ns > 0) {
		(void)child_signal(c, SIGTERM);
		signalled = true;
		r = wait_until(c, monotonic_ns() + grace_ns, &st);
	}
	if (r == 0) {
		(void)child_signal(c, SIGKILL);
		signalled = true;
		r = wait_until(c, monotonic_ns() + CHILD_KILL_WAIT_NS, &st);
		if (r == 0)
			return -ETIMEDOUT;
	}
	if (r < 0)
		return r;
	if (signalled && group)
		(void)kill(-pid, SIGKILL); /* what is left of its group */
	st.timed_out = signalled;
	if (ret)
		*ret = st;
	return 0;
}

void child_release(struct child *c)
{
	if (c->pidfd >= 0)
		close(c->pidfd);
	*c = CHILD_NONE;
}
