/* SPDX-License-Identifier: MIT */
/* probe.c - nvidia-smi -L attempts.  Contract in probe.h. */
#include "guest-agent/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/cleanup.h"
#include "proto/log.h"
#include "proto/parse.h"

extern char **environ;

int probe_init(struct probe *p, const char *nvidia_smi, int64_t interval_ns, int64_t window_ns,
	       int64_t timeout_ns, int64_t now_ns)
{
	memset(p, 0, sizeof(*p));
	p->path = strdup(nvidia_smi);
	if (!p->path)
		return -ENOMEM;
	p->interval_ns = interval_ns;
	p->window_ns = window_ns;
	p->timeout_ns = timeout_ns;
	p->window_end_ns = now_ns + window_ns;
	p->next_attempt_ns = now_ns;
	return 0;
}

void probe_free(struct probe *p)
{
	probe_stop(p);
	free(p->path);
	p->path = NULL;
}

int64_t probe_next_wakeup(const struct probe *p)
{
	if (p->finished)
		return INT64_MAX;
	if (p->pid > 0)
		return p->killed ? INT64_MAX : p->attempt_deadline_ns;
	return p->next_attempt_ns;
}

static void posix_spawnattr_destroyp(posix_spawnattr_t **a)
{
	if (*a)
		posix_spawnattr_destroy(*a);
}

static void posix_spawn_file_actions_destroyp(posix_spawn_file_actions_t **fa)
{
	if (*fa)
		posix_spawn_file_actions_destroy(*fa);
}

static int spawn_attempt(struct probe *p, int64_t now_ns)
{
	posix_spawnattr_t attr_storage;
	posix_spawn_file_actions_t fa_storage;
	_cleanup_(posix_spawnattr_destroyp) posix_spawnattr_t *attr = NULL;
	_cleanup_(posix_spawn_file_actions_destroyp) posix_spawn_file_actions_t *fa = NULL;
	char *const argv[] = { p->path, (char *)"-L", NULL };
	sigset_t empty, defaults;
	pid_t pid;
	int k;

	if (posix_spawnattr_init(&attr_storage) != 0)
		return -ENOMEM;
	attr = &attr_storage;
	if (posix_spawn_file_actions_init(&fa_storage) != 0)
		return -ENOMEM;
	fa = &fa_storage;

	/* The agent blocks the signals it reads from a signalfd; the child must
	 * not inherit that, or SIGKILL aside it could not be stopped. */
	sigemptyset(&empty);
	sigemptyset(&defaults);
	sigaddset(&defaults, SIGCHLD);
	sigaddset(&defaults, SIGPIPE);
	sigaddset(&defaults, SIGTERM);
	sigaddset(&defaults, SIGINT);
	sigaddset(&defaults, SIGHUP);
	k = posix_spawnattr_setsigmask(attr, &empty);
	if (!k)
		k = posix_spawnattr_setsigdefault(attr, &defaults);
	if (!k)
		k = posix_spawnattr_setpgroup(attr, 0); /* own group: kill helpers too */
	if (!k)
		k = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						   POSIX_SPAWN_SETPGROUP);
	if (!k)
		k = posix_spawn_file_actions_addopen(fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (!k)
		k = posix_spawn_file_actions_addopen(fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	if (!k)
		k = posix_spawn_file_actions_adddup2(fa, STDOUT_FILENO, STDERR_FILENO);
	if (k)
		return -k;

	k = posix_spawn(&pid, p->path, fa, attr, argv, environ);
	if (k)
		return -k;
	p->pid = pid;
	p->killed = false;
	p->attempts++;
	p->attempt_deadline_ns = now_ns + p->timeout_ns;
	p->next_attempt_ns = now_ns + p->interval_ns;
	log_debug("probe: attempt %u: %s -L (pid %d)", p->attempts, p->path, (int)pid);
	return 0;
}

/* Reap the child if it is gone.  1 when it exited 0. */
static int reap(struct probe *p, int64_t now_ns)
{
	int status;
	pid_t r;

	do
		r = waitpid(p->pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0; /* still running */
	if (r < 0) {
		/* ECHILD: someone else reaped it (cannot happen in the agent). */
		log_warn("probe: waitpid(%d): %s", (int)p->pid, strerror(errno));
		p->pid = 0;
		return 0;
	}
	p->pid = 0;
	if (p->killed) {
		p->timeouts++;
		log_warn("probe: %s -L did not finish in %.1fs; killed", p->path,
			 (double)p->timeout_ns / 1e9);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		log_info("probe: %s -L succeeded (attempt %u)", p->path, p->attempts);
		return 1;
	}
	p->failures++;
	if (WIFEXITED(status))
		log_debug("probe: %s -L exited %d", p->path, WEXITSTATUS(status));
	else
		log_debug("probe: %s -L killed by signal %d", p->path, WTERMSIG(status));
	return 0;
}

int probe_step(struct probe *p, int64_t now_ns)
{
	int k;

	if (p->finished)
		return 0;
	if (p->pid > 0) {
		if (reap(p, now_ns) == 1) {
			p->succeeded = p->finished = true;
			return 1;
		}
		if (p->pid > 0) {
			if (!p->killed && now_ns >= p->attempt_deadline_ns) {
				/* The whole group: a script's children must not outlive it. */
				kill(-p->pid, SIGKILL);
				kill(p->pid, SIGKILL);
				p->killed = true;
			}
			return 0; /* wait for SIGCHLD to reap */
		}
	}
	if (now_ns >= p->window_end_ns) {
		p->finished = true;
		log_warn("probe: no successful %s -L within %.1fs; stopped probing", p->path,
			 (double)p->window_ns / 1e9);
		return 0;
	}
	if (now_ns < p->next_attempt_ns)
		return 0;
	k = spawn_attempt(p, now_ns);
	if (k < 0) {
		log_warn("probe: cannot run %s: %s", p->path, strerror(-k));
		p->next_attempt_ns = now_ns + p->interval_ns;
	}
	return 0;
}

void probe_stop(struct probe *p)
{
	int64_t end = monotonic_ns() + PROBE_STOP_WAIT_NS;
	sigset_t chld, old;
	pid_t r;

	if (p->pid <= 0)
		return;
	/* Wait for SIGCHLD rather than polling; blocking it first means one
	 * that arrives between waitpid and sigtimedwait is not lost. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
	while ((r = waitpid(p->pid, NULL, WNOHANG)) == 0 || (r < 0 && errno == EINTR)) {
		int64_t left = end - monotonic_ns();
		struct timespec ts = { .tv_sec = left / 1000000000, .tv_nsec = left % 1000000000 };

		if (left <= 0) {
			/* SIGKILL waits for the child to leave the kernel; a
			 * probe stuck in the driver may never.  Do not hang. */
			log_warn("probe: pid %d did not die within %.1fs; leaving it", (int)p->pid,
				 (double)PROBE_STOP_WAIT_NS / 1e9);
			break;
		}
		sigtimedwait(&chld, NULL, &ts);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	p->pid = 0;
	p->killed = false;
}

int probe_find_nvidia_smi(const char *override, char **ret_path)
{
	const char *path_env = getenv("PATH");
	_cleanup_free_ char *copy = NULL;
	char *save = NULL;

	if (override) {
		if (access(override, X_OK) < 0)
			return -EACCES;
		*ret_path = strdup(override);
		return *ret_path ? 0 : -ENOMEM;
	}
	copy = strdup(path_env && *path_env ? path_env : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	if (!copy)
		return -ENOMEM;
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		_cleanup_free_ char *candidate = NULL;

		if (dir[0] != '/')
			continue; /* a relative PATH entry would depend on our cwd */
		if (asprintf(&candidate, "%s/nvidia-smi", dir) < 0)
			return -ENOMEM;
		if (access(candidate, X_OK) == 0) {
			*ret_path = move_ptr(candidate);
			return 0;
		}
	}
	return -ENOENT;
}
