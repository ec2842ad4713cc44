/* SPDX-License-Identifier: MIT */
/*
 * sentinel-process.h - run the sentinel program (vfhealth-sentinel, built
 * from sentinel/main.c) as a child of vfhealthd.
 *
 * Why a process and not threads of the daemon: the sentinel is a client of
 * the daemon's own mount, and such a client must never be a thread of the
 * process that serves it (docs/architecture.md, "Processes, threads and
 * locks", says why).  A child caught in a request when the daemon dies gets
 * ENOTCONN and dies of its PR_SET_PDEATHSIG.
 *
 * Why exec and not a bare fork: the child shares nothing with the daemon
 * but what is passed on purpose (its options, the mountpoint, and the
 * counter table in a sealed memfd, --counters-fd 3), runs the same program
 * an operator can run standalone, and may be started at any time.  The
 * daemon maps the same memfd and renders the counters in its `metrics`.
 */
#ifndef VFHEALTH_DAEMON_SENTINEL_PROCESS_H
#define VFHEALTH_DAEMON_SENTINEL_PROCESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The descriptor the counter table has in the child (--counters-fd). */
#define SENTINEL_COUNTERS_FD 3

struct sentinel_process;

/* The program to run: `explicit` when not NULL (made absolute), else the
 * vfhealth-sentinel beside /proc/self/exe, else the one in the configured
 * sbindir.  The file must be executable.  -ENOENT when none is (logged). */
int sentinel_program_find(const char *explicit, char **ret);

/* Start `program args... --counters-fd 3 -- mountpoint`.  args is a
 * NULL-terminated list of the sentinel's own options (as its command line
 * spells them).  The child has the parent-death signal SIGKILL, only
 * descriptors 0, 1, 2 and the counters, SIGTERM and SIGINT blocked (the
 * program takes them with sigwaitinfo) and every other signal unblocked.
 * stop_timeout_ns bounds sentinel_process_stop()'s wait before SIGKILL.
 * Returns once the program runs (exec succeeded): -errno of the exec, or of
 * the setup, on failure (nothing is left). */
int sentinel_process_spawn(const char *program, const char *const *args, const char *mountpoint,
			   int64_t stop_timeout_ns, struct sentinel_process **ret);

/* SIGTERM the child and reap it; SIGKILL it if it has not exited
 * stop_timeout_ns later.  Call while the mount is still served.
 * NULL or already stopped: no-op. */
void sentinel_process_stop(struct sentinel_process *p);

/* Stop (if needed) and free.  After the mount is gone (metrics may render
 * the counters until then).  NULL: no-op. */
void sentinel_process_free(struct sentinel_process *p);

pid_t sentinel_process_pid(const struct sentinel_process *p);

/* Whether the child has exited on its own (without sentinel_process_stop),
 * reaping it if so; logs how it ended.  For the daemon's SIGCHLD handling. */
bool sentinel_process_exited(struct sentinel_process *p);

struct metrics_source_check;
/* The child's last check of each claim it polled (a metrics_checks_fn,
 * fs/metrics.h: every result, for vfhealth_vf_last_check). */
size_t sentinel_process_last_checks(void *process, struct metrics_source_check **ret);

/* Render the child's counters (a metrics_render_fn, fs/metrics.h). */
void sentinel_process_render_metrics(void *process, FILE *out);

#endif
