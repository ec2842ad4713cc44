/* SPDX-License-Identifier: MIT */
/*
 * process.c - the sentinel in a child process of vfhealthd (process.h).
 *
 * Design notes
 * ------------
 * Processes.  sentinel_process_spawn() forks once, before the daemon has any
 * thread.  The child is single-threaded until sentinel_start_counting()
 * creates the scheduler and the workers; its main thread then only waits
 * for SIGTERM/SIGINT with sigwait() (the daemon blocked those before
 * forking, so the mask is inherited and no sentinel thread takes them).
 *
 * Memory.  The counters live in one MAP_SHARED|MAP_ANONYMOUS page mapped
 * before the fork: the child increments them, the daemon's metrics renderer
 * loads them.  Both sides use lock-free 64-bit atomics, which are
 * address-free on Linux and so valid across processes.
 *
 * Descriptors.  The child closes everything but 0, 1 and 2: above all the
 * /dev/fuse descriptor (see process.h for why holding it would make the
 * daemon unkillable) and the store's database and lock files (a child
 * holding the flock'd descriptor would keep a restarted daemon out).
 *
 * Shutdown.  sentinel_process_stop() sends SIGTERM and waits on a pidfd for
 * at most one poll timeout plus STOP_GRACE_NS, then SIGKILLs and reaps.  The
 * child leaves with _exit(): it must not run the daemon's atexit handlers
 * (or LeakSanitizer over the daemon's inherited heap).
 */
#include "sentinel/process.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/cleanup.h"
#include "proto/log.h"
#include "proto/parse.h"

#define STOP_GRACE_NS (2 * SENTINEL_NS_PER_S)

struct sentinel_process {
	pid_t pid;
	bool reaped;
	int64_t stop_timeout_ns;
	struct sentinel_counters *counters; /* shared mapping */
};

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

static _Noreturn void child_main(const char *mountpoint, const struct sentinel_options *o,
				 struct sentinel_counters *counters, pid_t parent)
{
	struct sentinel *s = NULL;
	sigset_t stop_signals;
	int sig, r;

	/* Die with the daemon; if it died before prctl() took effect, go now. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	if (close_range(3, ~0U, 0) < 0)
		_exit(1);
	prctl(PR_SET_NAME, "vfhealthd-sent", 0, 0, 0);

	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

	r = sentinel_start_counting(mountpoint, o, counters, &s);
	if (r < 0) {
		log_err("sentinel: cannot start: %s", strerror(-r));
		_exit(1);
	}
	while (sigwait(&stop_signals, &sig) != 0)
		;
	sentinel_free(s); /* stops first: joins every thread */
	_exit(0);
}

int sentinel_process_spawn(const char *mountpoint, const struct sentinel_options *o,
			   struct sentinel_process **ret)
{
	_cleanup_free_ struct sentinel_process *p = NULL;
	pid_t parent = getpid(), pid;
	void *shared;

	if (!mountpoint || mountpoint[0] != '/' || !o || !ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	shared = mmap(NULL, sizeof(*p->counters), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return negative_errno();
	p->counters = shared; /* zero-filled */
	p->stop_timeout_ns = o->poll_timeout_ns + STOP_GRACE_NS;

	pid = fork();
	if (pid < 0) {
		int r = negative_errno();
		munmap(shared, sizeof(*p->counters));
		return r;
	}
	if (pid == 0)
		child_main(mountpoint, o, p->counters, parent);

	p->pid = pid;
	log_debug("sentinel: process %d started", (int)pid);
	*ret = move_ptr(p);
	return 0;
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
		struct timespec ts = { .tv_sec = left / SENTINEL_NS_PER_S,
				       .tv_nsec = left % SENTINEL_NS_PER_S };
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
	if (!wait_child(p, STOP_GRACE_NS))
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
	munmap(p->counters, sizeof(*p->counters));
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
