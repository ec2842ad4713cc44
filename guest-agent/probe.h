/* SPDX-License-Identifier: MIT */
/*
 * probe.h - "did the GPU come up?": run `nvidia-smi -L` at start, then every
 * interval, until one run exits 0 or the window (counted from probe_init)
 * is over.  An attempt that runs past the timeout is killed with SIGKILL
 * (its whole process group, so a helper it started dies too) and reaped
 * before the next attempt starts: a probe stuck in the driver never piles up
 * processes.  At most one child exists at any time.
 *
 * The probe owns no thread and no signal handling.  The caller runs an event
 * loop: it blocks SIGCHLD and watches it (signalfd), and calls probe_step
 * when SIGCHLD arrives or when probe_next_wakeup has passed.  Children start
 * with an empty signal mask, default dispositions, stdin/stdout/stderr on
 * /dev/null, in a process group of their own.
 */
#ifndef VFHEALTH_AGENT_PROBE_H
#define VFHEALTH_AGENT_PROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PROBE_DEFAULT_INTERVAL_NS (15 * 1000000000LL)
#define PROBE_DEFAULT_WINDOW_NS (600 * 1000000000LL)
#define PROBE_DEFAULT_TIMEOUT_NS (30 * 1000000000LL)
/* probe_stop waits this long for a killed attempt to be reaped. */
#define PROBE_STOP_WAIT_NS (2 * 1000000000LL)

struct probe {
	char *path; /* nvidia-smi */
	int64_t interval_ns, window_ns, timeout_ns;
	int64_t window_end_ns;
	int64_t next_attempt_ns;     /* when the next attempt may start */
	int64_t attempt_deadline_ns; /* kill the running attempt then */
	pid_t pid;                   /* > 0 while a child exists (not yet reaped) */
	bool killed;                 /* SIGKILL sent to pid, waiting to reap */
	bool succeeded;
	bool finished; /* succeeded, or the window is over with no child left */
	unsigned attempts, failures, timeouts;
};

/* 0 or -ENOMEM.  Nothing runs until the first probe_step. */
int probe_init(struct probe *p, const char *nvidia_smi, int64_t interval_ns, int64_t window_ns,
	       int64_t timeout_ns, int64_t now_ns);
void probe_free(struct probe *p);

/* When probe_step must next run without a SIGCHLD: the next attempt's start
 * or the running attempt's kill time.  INT64_MAX when only a child's exit can
 * move the probe on, or when it is finished. */
int64_t probe_next_wakeup(const struct probe *p);

/* Reap the child if it exited (never blocks), kill it if past its timeout,
 * start the next attempt when due and inside the window.  Returns 1 when an
 * attempt just exited 0, else 0.  A spawn failure is logged and retried at
 * the next interval. */
int probe_step(struct probe *p, int64_t now_ns);

/* Kill and reap a running attempt (shutdown).  Blocks until it is reaped,
 * at most PROBE_STOP_WAIT_NS: a child stuck in the kernel cannot die, and
 * shutdown must not hang on it. */
void probe_stop(struct probe *p);

/* Find nvidia-smi: `override` when given (must be executable), else the
 * first executable "nvidia-smi" on $PATH.  0 with a new string, -ENOENT when
 * there is none, -EACCES when override is not executable. */
int probe_find_nvidia_smi(const char *override, char **ret_path);

#endif
