/* SPDX-License-Identifier: MIT */
/*
 * sentinel-process.c - the sentinel program as a child of vfhealthd
 * (sentinel-process.h).
 *
 * Design notes
 * ------------
 * Processes.  sentinel_process_spawn() starts the program through
 * common/child.h (child_spawn): everything it needs (argv, the signal
 * mask) is built before the fork, so the daemon may spawn it whether or not
 * it has threads; PR_SET_PDEATHSIG(SIGKILL) with the getppid() check ends
 * it with the daemon.  PR_SET_PDEATHSIG fires when the forking *thread*
 * ends: the daemon spawns from its main thread, which lives until exit.
 *
 * Memory.  The counters live in a sealed memfd (sentinel/counters.h: the
 * layout, its stamp, why it is safe across processes).  The child gets it
 * as descriptor 3 (--counters-fd 3) and refuses another layout's; the
 * daemon's metrics renderer checks the stamp too.
 *
 * Descriptors.  The child keeps 0, 1, 2 and the memfd: above all the
 * /dev/fuse descriptor goes (see sentinel-process.h), and the store's
 * database and lock files (a child holding the flock'd descriptor would
 * keep a restarted daemon out).  child_spawn reports a failed exec, so the
 * daemon learns synchronously whether the program runs.
 *
 * Shutdown.  sentinel_process_stop() sends SIGTERM and waits on a pidfd for
 * at most stop_timeout_ns (the daemon passes one poll timeout plus a
 * grace period: the sentinel stops within one poll timeout), then SIGKILLs
 * and reaps (child_wait).
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

#include "common/child.h"
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
	struct child child; /* pid 0 once reaped */
	pid_t pid;
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

static void log_child_end(pid_t pid, const struct child_status *st)
{
	if (st->end == CHILD_EXITED && st->code == 0)
		log_info("sentinel: process %d exited", (int)pid);
	else if (st->end == CHILD_EXITED)
		log_err("sentinel: process %d exited with status %d", (int)pid, st->code);
	else
		log_err("sentinel: process %d killed by signal %s", (int)pid,
			sigabbrev_np(st->code) ? sigabbrev_np(st->code) : "?");
}

int sentinel_process_spawn(const char *program, const char *const *args, const char *mountpoint,
			   int64_t stop_timeout_ns, struct sentinel_process **ret)
{
	_cleanup_free_ struct sentinel_process *p = NULL;
	_cleanup_free_ char **argv = NULL;
	_cleanup_close_ int memfd = -1;
	size_t nargs = 0, i = 0;
	sigset_t mask;
	int r;

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
	/* 0, 1, 2 and the counters: above all the /dev/fuse descriptor goes */
	const int fds[] = { 0, 1, 2, memfd };
	const struct child_opts o = { .fds = fds,
				      .n_fds = SENTINEL_COUNTERS_FD + 1,
				      .pdeathsig = SIGKILL,
				      .sigmask = &mask };
	const struct child_exec e = { .path = program, .argv = argv };
	r = child_spawn(&o, &e, &p->child);
	if (r < 0)
		goto fail;
	p->pid = p->child.pid;
	p->stop_timeout_ns = stop_timeout_ns;
	log_debug("sentinel: process %d runs %s", (int)p->pid, program);
	*ret = move_ptr(p);
	return 0;

fail:
	sentinel_counters_unmap(p->counters);
	return r;
}

void sentinel_process_stop(struct sentinel_process *p)
{
	struct child_status st;
	int r;

	if (!p || p->child.pid <= 0)
		return;
	/* SIGTERM now; SIGKILL when it has not stopped within stop_timeout_ns */
	r = child_wait(&p->child, 0, p->stop_timeout_ns, &st);
	if (r == -ETIMEDOUT) {
		log_err("sentinel: process %d does not die (stuck on the mount?)", (int)p->pid);
		child_release(&p->child);
	} else if (r < 0) {
		child_release(&p->child); /* -ECHILD: reaped already */
	} else {
		if (st.end == CHILD_SIGNALED && st.code == SIGKILL)
			log_warn("sentinel: process %d did not stop in time; killed it",
				 (int)p->pid);
		log_child_end(p->pid, &st);
	}
}

bool sentinel_process_exited(struct sentinel_process *p)
{
	struct child_status st;
	int r;

	if (!p)
		return false;
	if (p->child.pid <= 0)
		return true;
	r = child_try_wait(&p->child, &st);
	if (r == 1)
		log_child_end(p->pid, &st);
	return r == 1;
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
		out[i].claim = checks[i].claim;
		out[i].result = check_result_name(checks[i].result);
	}
	*ret = out;
	return n;
}
