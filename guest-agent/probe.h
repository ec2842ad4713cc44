/* SPDX-License-Identifier: MIT */
/*
 * probe.h - "did the GPU come up?": one attempt at start, then every
 * interval, until one attempt succeeds.  An attempt is one child process:
 *
 *   1. the device nodes (when a device directory is set): open DIR/nvidiactl
 *      and every DIR/nvidiaN.  The driver runs RmInitAdapter on a GPU's first
 *      open and fails the open when init fails, so opening all of them proves
 *      the adapters came up.  Character devices are opened read-write (as
 *      the driver's clients do), anything else read-only: tests stand in for
 *      the driver with a file (opens), a FIFO (blocks) or a missing node.
 *      At least one DIR/nvidiaN must exist.  Success: the child exits 0.
 *   2. otherwise, when nvidia-smi was found, the child execs `nvidia-smi -L`
 *      and its exit status decides.
 *
 * The window: inside it (counted from probe_init) attempts start every
 * interval.  After it, probing goes on with a capped exponential back-off
 * (the delay between attempt starts doubles from 2 x interval up to
 * backoff_max), unless backoff_max is 0: then probing stops at the window's
 * end (the old cliff; probe_init's default, the agent sets its own).
 * probe_halt stops it early (the agent does so once the kernel reported a
 * failure and the window has passed).
 *
 * An attempt that runs past the timeout is killed with SIGKILL (its whole
 * process group, so a helper it started dies too) and reaped before the next
 * attempt starts: a probe stuck in the driver never piles up processes.  At
 * most one child exists at any time.
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
#include "common/child.h"
#include "common/parse.h"

#define PROBE_DEFAULT_INTERVAL_NS (15 * NSEC_PER_SEC)
#define PROBE_DEFAULT_WINDOW_NS (600 * NSEC_PER_SEC)
#define PROBE_DEFAULT_TIMEOUT_NS (30 * NSEC_PER_SEC)
/* probe_stop waits this long for a killed attempt to be reaped. */
#define PROBE_STOP_WAIT_NS CHILD_KILL_WAIT_NS
/* The agent's cap on the back-off after the window. */
#define PROBE_DEFAULT_BACKOFF_MAX_NS (300 * NSEC_PER_SEC)
/* DIR/nvidiaN nodes one attempt opens at most (N is a minor number < 256). */
#define PROBE_DEVICE_NODES_MAX 256

struct probe {
	char *path;    /* nvidia-smi; NULL: none */
	char *dev_dir; /* device nodes; NULL: no device probe */
	int64_t interval_ns, window_ns, timeout_ns;
	int64_t backoff_max_ns; /* 0: stop at the window's end */
	int64_t backoff_ns;     /* the current delay once backing off */
	bool backing_off;       /* the window has passed; still probing */
	int64_t window_end_ns;
	int64_t next_attempt_ns;     /* when the next attempt may start */
	int64_t attempt_deadline_ns; /* kill the running attempt then */
	pid_t pid;                   /* > 0 while a child exists (not yet reaped) */
	bool killed;                 /* SIGKILL sent to pid, waiting to reap */
	bool succeeded;
	bool finished; /* succeeded, halted, or the window is over (no back-off) */
	unsigned attempts, failures, timeouts;
	int last_exit_status; /* of the last ended attempt, 128+N for signal N; -1: none */
};

/* 0 or -ENOMEM.  Nothing runs until the first probe_step.  nvidia_smi and
 * dev_dir may each be NULL (not both: -EINVAL).  No back-off: see
 * probe_set_backoff. */
int probe_init(struct probe *p, const char *nvidia_smi, int64_t interval_ns, int64_t window_ns,
	       int64_t timeout_ns, int64_t now_ns);
/* Also open the device nodes under dev_dir in every attempt.  0 or -ENOMEM. */
int probe_set_device_dir(struct probe *p, const char *dev_dir);
/* Keep probing after the window, backing off up to max_ns (0: stop). */
void probe_set_backoff(struct probe *p, int64_t max_ns);
/* Stop probing: a running attempt is killed and reaped by later steps. */
void probe_halt(struct probe *p);
void probe_free(struct probe *p);

/* When probe_step must next run without a SIGCHLD: the next attempt's start
 * or the running attempt's kill time.  INT64_MAX when only a child's exit can
 * move the probe on, or when it is finished. */
int64_t probe_next_wakeup(const struct probe *p);

/* Reap the child if it exited (never blocks), kill it if past its timeout,
 * start the next attempt when due (inside the window, or backing off).  Returns 1 when an
 * attempt just exited 0, else 0.  A spawn failure is logged and retried at
 * the next interval (or back-off delay). */
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
