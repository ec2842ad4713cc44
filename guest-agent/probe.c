/* SPDX-License-Identifier: MIT */
/* probe.c - probe attempts (device nodes, nvidia-smi -L).  Contract in probe.h. */
#include "guest-agent/probe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"

extern char **environ;

/* The exit status of an attempt whose nodes did not open and that has no
 * nvidia-smi to run, or whose exec failed (as a shell reports it). */
#define PROBE_CHILD_FAILED 127

int probe_init(struct probe *p, const char *nvidia_smi, int64_t interval_ns, int64_t window_ns,
	       int64_t timeout_ns, int64_t now_ns)
{
	memset(p, 0, sizeof(*p));
	if (nvidia_smi) {
		p->path = strdup(nvidia_smi);
		if (!p->path)
			return -ENOMEM;
	}
	p->interval_ns = interval_ns;
	p->window_ns = window_ns;
	p->timeout_ns = timeout_ns;
	p->last_exit_status = -1;
	p->window_end_ns = now_ns + window_ns;
	p->next_attempt_ns = now_ns;
	return 0;
}

int probe_set_device_dir(struct probe *p, const char *dev_dir)
{
	char *copy = strdup(dev_dir);

	if (!copy)
		return -ENOMEM;
	free(p->dev_dir);
	p->dev_dir = copy;
	return 0;
}

void probe_set_backoff(struct probe *p, int64_t max_ns)
{
	p->backoff_max_ns = max_ns;
}

void probe_halt(struct probe *p)
{
	probe_stop(p);
	p->finished = true;
}

void probe_free(struct probe *p)
{
	probe_stop(p);
	free(p->path);
	free(p->dev_dir);
	p->path = p->dev_dir = NULL;
}

int64_t probe_next_wakeup(const struct probe *p)
{
	if (p->finished)
		return INT64_MAX;
	if (p->pid > 0)
		return p->killed ? INT64_MAX : p->attempt_deadline_ns;
	return p->next_attempt_ns;
}

/* "nvidia" followed by decimal digits only: a GPU's node (not nvidiactl,
 * nvidia-uvm, nvidia-modeset, ...). */
static bool is_gpu_node(const char *name)
{
	const char *d = name + strlen("nvidia");

	if (strncmp(name, "nvidia", strlen("nvidia")) != 0 || !*d || strlen(d) > 3)
		return false;
	for (; *d; d++)
		if (*d < '0' || *d > '9')
			return false;
	return true;
}

static void free_nodes(char **nodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(nodes[i]);
	free(nodes);
}

/* The nodes one attempt opens: DIR/nvidiactl, then every DIR/nvidiaN.  Built
 * in the parent (the child only opens).  *ret_n is 0 when no nvidiaN exists. */
static int list_device_nodes(const char *dev_dir, char ***ret, size_t *ret_n)
{
	_cleanup_closedir_ DIR *d = opendir(dev_dir);
	char **nodes = NULL;
	size_t n = 0, gpus = 0;
	struct dirent *de;
	int k = 0;

	*ret = NULL;
	*ret_n = 0;
	if (!d)
		return errno == ENOENT ? 0 : negative_errno();
	nodes = calloc(PROBE_DEVICE_NODES_MAX + 2, sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	if (asprintf(&nodes[n++], "%s/nvidiactl", dev_dir) < 0) {
		free(nodes);
		return -ENOMEM;
	}
	while ((de = readdir(d)) && gpus < PROBE_DEVICE_NODES_MAX) {
		if (!is_gpu_node(de->d_name))
			continue;
		if (asprintf(&nodes[n], "%s/%s", dev_dir, de->d_name) < 0) {
			k = -ENOMEM;
			break;
		}
		n++;
		gpus++;
	}
	if (k < 0 || gpus == 0) {
		free_nodes(nodes, n);
		return k;
	}
	*ret = nodes;
	*ret_n = n;
	return 0;
}

/* In the child: open every node; 0 when all opened.  Character devices
 * read-write like the driver's clients; stand-ins (FIFO, file) read-only. */
static int open_nodes(char *const *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		int flags = O_CLOEXEC | O_NOCTTY;
		int fd;

		flags |= (stat(nodes[i], &st) == 0 && S_ISCHR(st.st_mode)) ? O_RDWR : O_RDONLY;
		fd = open(nodes[i], flags);
		if (fd < 0)
			return -1;
		close(fd); /* the driver keeps the adapter up while any client holds it: not us */
	}
	return 0;
}

/* The child of one attempt (common/child.h set it up: a fresh process
 * group, default dispositions, an empty mask, stdio on /dev/null and no
 * other descriptor): the nodes, then nvidia-smi.  Never returns. */
_Noreturn static void attempt_child(const struct probe *p, char *const *nodes, size_t n)
{
	char *const argv[] = { p->path, (char *)"-L", NULL };

	if (n > 0 && open_nodes(nodes, n) == 0)
		_exit(0);
	if (p->path)
		execve(p->path, argv, environ);
	_exit(PROBE_CHILD_FAILED);
}

/* The attempt's child, signalled as its group: a script's children must
 * not outlive it. */
static struct child attempt(const struct probe *p)
{
	return (struct child){ .pid = p->pid, .pidfd = -1, .group = true };
}

static int spawn_attempt(struct probe *p, int64_t now_ns)
{
	const int stdio[] = { CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL };
	const struct child_opts o = { .fds = stdio, .n_fds = 3, .new_pgroup = true };
	struct child c = CHILD_NONE;
	char **nodes = NULL;
	size_t n = 0;
	pid_t pid;
	int k;

	if (p->dev_dir) {
		k = list_device_nodes(p->dev_dir, &nodes, &n);
		if (k == -ENOMEM)
			return k;
		if (k < 0)
			log_debug("probe: %s: %s", p->dev_dir, strerror(-k));
	}
	if (n == 0 && !p->path) {
		/* nothing to run: a failed attempt without a child */
		p->attempts++;
		p->failures++;
		p->last_exit_status = PROBE_CHILD_FAILED; /* as the child would have */
		log_debug("probe: attempt %u: no device nodes under %s", p->attempts, p->dev_dir);
		return 0;
	}
	k = child_fork(&o, &c);
	if (k == 0)
		attempt_child(p, nodes, n);
	free_nodes(nodes, n);
	if (k < 0)
		return k;
	pid = c.pid;
	child_release(&c); /* the pid is kept; probe_step reaps it */
	p->pid = pid;
	p->killed = false;
	p->attempts++;
	p->attempt_deadline_ns = now_ns + p->timeout_ns;
	log_debug("probe: attempt %u (pid %d): %s%s%s", p->attempts, (int)pid,
		  n ? "device nodes" : "", n && p->path ? ", then " : "", p->path ? p->path : "");
	return 0;
}

/* Reap the child if it is gone.  1 when it exited 0. */
static int reap(struct probe *p, int64_t now_ns)
{
	struct child c = attempt(p);
	struct child_status st;
	int r = child_try_wait(&c, &st);

	(void)now_ns;
	if (r == 0)
		return 0; /* still running */
	if (r < 0) {
		/* ECHILD: someone else reaped it (cannot happen in the agent). */
		log_warn("probe: waitpid(%d): %s", (int)p->pid, strerror(-r));
		p->pid = 0;
		return 0;
	}
	p->pid = 0;
	p->last_exit_status = st.end == CHILD_EXITED ? st.code : 128 + st.code;
	if (p->killed) {
		p->timeouts++;
		log_warn("probe: attempt %u did not finish in %.1fs; killed", p->attempts,
			 (double)p->timeout_ns / NSEC_PER_SEC);
		return 0;
	}
	if (st.end == CHILD_EXITED && st.code == 0) {
		log_info("probe: attempt %u succeeded", p->attempts);
		return 1;
	}
	p->failures++;
	if (st.end == CHILD_EXITED)
		log_debug("probe: attempt %u exited %d", p->attempts, st.code);
	else
		log_debug("probe: attempt %u killed by signal %d", p->attempts, st.code);
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
				struct child c = attempt(p);

				(void)child_signal(&c, SIGKILL);
				p->killed = true;
			}
			return 0; /* wait for SIGCHLD to reap */
		}
	}
	if (now_ns >= p->window_end_ns && !p->backing_off) {
		if (p->backoff_max_ns <= 0) {
			p->finished = true;
			log_warn("probe: no successful attempt within %.1fs; stopped probing",
				 (double)p->window_ns / NSEC_PER_SEC);
			return 0;
		}
		p->backing_off = true;
		p->backoff_ns = MIN(2 * p->interval_ns, p->backoff_max_ns);
		log_warn("probe: no successful attempt within %.1fs; backing off up to %.1fs",
			 (double)p->window_ns / NSEC_PER_SEC,
			 (double)p->backoff_max_ns / NSEC_PER_SEC);
	}
	if (now_ns < p->next_attempt_ns)
		return 0;
	/* The next start: one interval on inside the window, the current delay
	 * (doubled for the one after) once backing off. */
	if (p->backing_off) {
		p->next_attempt_ns = now_ns + p->backoff_ns;
		p->backoff_ns = MIN(p->backoff_ns * 2, p->backoff_max_ns);
	} else
		p->next_attempt_ns = now_ns + p->interval_ns;
	k = spawn_attempt(p, now_ns);
	if (k < 0)
		log_warn("probe: cannot start an attempt: %s", strerror(-k));
	return 0;
}

void probe_stop(struct probe *p)
{
	struct child c = attempt(p);

	if (p->pid <= 0)
		return;
	/* SIGKILL waits for the child to leave the kernel; a probe stuck in
	 * the driver may never.  Do not hang. */
	if (child_wait(&c, 0, 0, NULL) == -ETIMEDOUT) {
		log_warn("probe: pid %d did not die within %.1fs; leaving it", (int)p->pid,
			 (double)PROBE_STOP_WAIT_NS / NSEC_PER_SEC);
	}
	child_release(&c);
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
	copy = strdup(path_env && *path_env ?
			      path_env :
			      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
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
