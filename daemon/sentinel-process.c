/* SPDX-License-Identifier: MIT */
/*
 * sentinel-process.c - the sentinel program as a child of vfhealthd
 * (sentinel-process.h).
 *
 * Design notes
 * ------------
 * Processes.  sentinel_process_spawn() forks and the child execs the
 * program at once.  Between fork and exec the child calls only
 * async-signal-safe functions (prctl, getppid, fcntl, dup2, close_range,
 * sigprocmask, execv, write, _exit), and everything it needs (argv, the
 * signal mask) is built before the fork, so the daemon may spawn it whether
 * or not it has threads.  Parent death: PR_SET_PDEATHSIG(SIGKILL) is set in
 * the child before exec (it survives exec for an ordinary binary); if the
 * daemon died before prctl() took effect, getppid() no longer names it and
 * the child leaves.  PR_SET_PDEATHSIG fires when the forking *thread* ends:
 * the daemon spawns from its main thread, which lives until exit.
 *
 * Memory.  The counters live in a sealed memfd (sentinel/counters.h: the
 * layout, its stamp, why it is safe across processes).  The child gets it
 * as descriptor 3 (--counters-fd 3) and refuses another layout's; the
 * daemon's metrics renderer checks the stamp too.
 *
 * Descriptors.  The child keeps 0, 1, 2 and the memfd: above all the
 * /dev/fuse descriptor goes (see sentinel-process.h), and the store's
 * database and lock files (a child holding the flock'd descriptor would
 * keep a restarted daemon out).  A close-on-exec pipe reports a failed exec
 * to the parent, which so learns synchronously whether the program runs.
 *
 * Shutdown.  sentinel_process_stop() sends SIGTERM and waits on a pidfd for
 * at most stop_timeout_ns (the daemon passes one poll timeout plus a
 * grace period: the sentinel stops within one poll timeout), then SIGKILLs
 * and reaps.
 */
#include "daemon/sentinel-process.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/path.h"
#include "common/parse.h"
#include "fs/metrics.h"
#include "sentinel/counters.h"

#define PROGRAM_NAME "vfhealth-sentinel"
#define STR(x) #x
#define XSTR(x) STR(x)

struct sentinel_process {
	pid_t pid;
	bool reaped;
	int64_t stop_timeout_ns;
	struct sentinel_counters *counters; /* shared mapping of the memfd */
};

static bool executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int sentinel_program_find(const char *explicit, char **ret)
{
	char exe[PATH_MAX];
	char *path = NULL;
	ssize_t n;

	if (explicit) {
		path = path_absolute(explicit);
		if (!path)
			return -ENOMEM;
		if (!executable_file(path)) {
			log_err("--sentinel-program: %s is not an executable file", path);
			free(path);
			return -ENOENT;
		}
		*ret = path;
		return 0;
	}
	/* Beside this program: the installed pair, or the build tree's. */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if (asprintf(&path, "%s/" PROGRAM_NAME, dirname(exe)) < 0)
			return -ENOMEM;
		if (executable_file(path)) {
			*ret = path;
			return 0;
		}
		free(path);
	}
	path = strdup(VFHEALTH_SBINDIR "/" PROGRAM_NAME);
	if (!path)
		return -ENOMEM;
	if (executable_file(path)) {
		*ret = path;
		return 0;
	}
	free(path);
	log_err("cannot find " PROGRAM_NAME " beside this program or in " VFHEALTH_SBINDIR
		"; name it with --sentinel-program, or run with --no-sentinel --no-reconcile");
	return -ENOENT;
}

static void log_child_end(pid_t pid, int code, int status)
{
	if (code == CLD_EXITED && status == 0)
		log_info("sentinel: process %d exited", (int)pid);
	else if (code == CLD_EXITED)
		log_err("sentinel: process %d exited with status %d", (int)pid, status);
	else
		log_err("sentinel: process %d killed by signal %s", (int)pid,
			sigabbrev_np(status) ? sigabbrev_np(status) : "?");
}

/* The child, between fork and exec: async-signal-safe calls only. */
static _Noreturn void child_exec(const char *program, char *const *argv, int memfd, int err_fd,
				 pid_t parent, const sigset_t *mask)
{
	int err, fd;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		goto fail;
	if (getppid() != parent)
		_exit(127); /* the daemon is gone already */
	/* The error pipe above the counters' number, so neither clobbers the other. */
	fd = fcntl(err_fd, F_DUPFD_CLOEXEC, SENTINEL_COUNTERS_FD + 1);
	if (fd < 0)
		goto fail;
	err_fd = fd;
	if (memfd == SENTINEL_COUNTERS_FD) {
		if (fcntl(memfd, F_SETFD, 0) < 0) /* keep it across exec */
			goto fail;
	} else if (dup2(memfd, SENTINEL_COUNTERS_FD) < 0) {
		goto fail;
	}
	if (err_fd > SENTINEL_COUNTERS_FD + 1 &&
	    close_range(SENTINEL_COUNTERS_FD + 1, (unsigned)err_fd - 1, 0) < 0)
		goto fail;
	if (close_range((unsigned)err_fd + 1, ~0U, 0) < 0)
		goto fail;
	if (sigprocmask(SIG_SETMASK, mask, NULL) < 0)
		goto fail;
	execv(program, argv);
fail:
	err = errno;
	if (write(err_fd, &err, sizeof(err)) < 0) {
		/* nothing left to tell */
	}
	_exit(127);
}

int sentinel_process_spawn(const char *program, const char *const *args, const char *mountpoint,
			   int64_t stop_timeout_ns, struct sentinel_process **ret)
{
	_cleanup_free_ struct sentinel_process *p = NULL;
	_cleanup_free_ char **argv = NULL;
	_cleanup_close_ int memfd = -1, err_r = -1, err_w = -1;
	pid_t parent = getpid(), pid;
	size_t nargs = 0, i = 0;
	sigset_t mask;
	int pipefd[2], err = 0, r;
	ssize_t n;

	if (!program || !mountpoint || mountpoint[0] != '/' || !ret)
		return -EINVAL;
	while (args && args[nargs])
		nargs++;
	p = calloc(1, sizeof(*p));
	argv = calloc(nargs + 6, sizeof(*argv));
	if (!p || !argv)
		return -ENOMEM;
	argv[i++] = (char *)program;
	for (size_t k = 0; k < nargs; k++)
		argv[i++] = (char *)args[k];
	argv[i++] = (char *)"--counters-fd";
	argv[i++] = (char *)XSTR(SENTINEL_COUNTERS_FD);
	argv[i++] = (char *)"--";
	argv[i++] = (char *)mountpoint;
	argv[i] = NULL;

	/* The program takes these with sigwaitinfo(); every other one is
	 * unblocked, whatever the daemon blocks for its own sigwait(). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);

	r = sentinel_counters_create(&memfd, &p->counters);
	if (r < 0)
		return r;
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		r = negative_errno();
		goto fail;
	}
	err_r = pipefd[0];
	err_w = pipefd[1];
	pid = fork();
	if (pid < 0) {
		r = negative_errno();
		goto fail;
	}
	if (pid == 0)
		child_exec(program, argv, memfd, err_w, parent, &mask);

	close(move_fd(err_w));
	/* EOF: the exec succeeded (the pipe closed on exec); else its errno. */
	do
		n = read(err_r, &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	if (n != 0) {
		r = n == (ssize_t)sizeof(err) && err > 0 ? -err : -EIO;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto fail;
	}
	p->pid = pid;
	p->stop_timeout_ns = stop_timeout_ns;
	log_debug("sentinel: process %d runs %s", (int)pid, program);
	*ret = move_ptr(p);
	return 0;

fail:
	sentinel_counters_unmap(p->counters);
	return r;
}

/* Wait up to timeout_ns for the child to exit; true when it did (reaped). */
static bool wait_child(struct sentinel_process *p, int64_t timeout_ns)
{
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	siginfo_t info = { 0 };
	int64_t deadline = monotonic_ns() + timeout_ns;

	for (;;) {
		info.si_pid = 0;
		if (waitid(P_PID, (id_t)p->pid, &info, WEXITED | WNOHANG) == 0 && info.si_pid) {
			p->reaped = true;
			log_child_end(p->pid, info.si_code, info.si_status);
			return true;
		}
		if (errno == ECHILD) {
			p->reaped = true;
			return true;
		}
		int64_t left = deadline - monotonic_ns();
		if (left <= 0 || pidfd < 0)
			return false;
		struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
		struct timespec ts = { .tv_sec = left / NSEC_PER_SEC,
				       .tv_nsec = left % NSEC_PER_SEC };
		if (ppoll(&pfd, 1, &ts, NULL) < 0 && errno != EINTR)
			return false;
	}
}

void sentinel_process_stop(struct sentinel_process *p)
{
	if (!p || p->reaped)
		return;
	if (kill(p->pid, SIGTERM) < 0 && errno != ESRCH)
		log_warn("sentinel: cannot signal process %d: %s", (int)p->pid, strerror(errno));
	if (wait_child(p, p->stop_timeout_ns))
		return;
	log_warn("sentinel: process %d did not stop in time; killing it", (int)p->pid);
	kill(p->pid, SIGKILL);
	if (!wait_child(p, 2 * NSEC_PER_SEC))
		log_err("sentinel: process %d does not die (stuck on the mount?)", (int)p->pid);
}

bool sentinel_process_exited(struct sentinel_process *p)
{
	siginfo_t info = { 0 };

	if (!p)
		return false;
	if (p->reaped)
		return true;
	if (waitid(P_PID, (id_t)p->pid, &info, WEXITED | WNOHANG) < 0 || !info.si_pid)
		return false;
	p->reaped = true;
	log_child_end(p->pid, info.si_code, info.si_status);
	return true;
}

void sentinel_process_free(struct sentinel_process *p)
{
	if (!p)
		return;
	sentinel_process_stop(p);
	sentinel_counters_unmap(p->counters);
	free(p);
}

pid_t sentinel_process_pid(const struct sentinel_process *p)
{
	return p ? p->pid : -1;
}

void sentinel_process_render_metrics(void *process, FILE *out)
{
	struct sentinel_process *p = process;

	if (p)
		sentinel_counters_render(p->counters, out);
}

size_t sentinel_process_last_checks(void *process, struct metrics_source_check **ret)
{
	struct sentinel_process *p = process;
	_cleanup_free_ struct sentinel_last_check *checks = NULL;
	struct metrics_source_check *out;
	size_t n;

	*ret = NULL;
	if (!p || sentinel_counters_check(p->counters) < 0)
		return 0;
	n = sentinel_counters_last_checks(p->counters, &checks);
	if (n == 0 || !(out = calloc(n, sizeof(*out))))
		return 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(out[i].vf, checks[i].vf, sizeof(out[i].vf));
		memcpy(out[i].instance_id, checks[i].instance_id, sizeof(out[i].instance_id));
		memcpy(out[i].claimed_at, checks[i].claimed_at, sizeof(out[i].claimed_at));
		out[i].result = check_result_name(checks[i].result);
	}
	*ret = out;
	return n;
}
