/* SPDX-License-Identifier: MIT */
/*
 * process.h - run the sentinel in a child process of vfhealthd.
 *
 * Why a process and not threads of the daemon: the sentinel is a client of
 * the daemon's own mount.  A thread blocked in a file operation on its own
 * FUSE mount cannot die: if vfhealthd is SIGKILLed (or crashes) after one of
 * its workers has taken that request, the thread waits uninterruptibly for
 * a reply nobody will send, and since it keeps the process's file table and
 * so the /dev/fuse descriptor alive, the kernel never aborts the connection.
 * The daemon never finishes dying, its database lock is never dropped, and
 * every reader of the mount hangs.  A child that holds no /dev/fuse
 * descriptor avoids all of that: the daemon always dies, the connection
 * aborts, and a child caught in a request gets ENOTCONN and dies of its
 * PR_SET_PDEATHSIG.
 *
 * The child runs sentinel_start_counting() with its counters in a shared
 * anonymous mapping, so the daemon's `metrics` file renders them as before.
 */
#ifndef VFHEALTH_SENTINEL_PROCESS_H
#define VFHEALTH_SENTINEL_PROCESS_H

#include <stdio.h>
#include <sys/types.h>

#include "sentinel/sentinel.h"

struct sentinel_process;

/* Fork the child.  Must be called before the caller creates any thread (the
 * child runs ordinary code after fork()).  The child closes every inherited
 * descriptor but stdin/stdout/stderr, dies with the caller, and stops on
 * SIGTERM within one poll timeout.  -errno on failure (nothing is left). */
int sentinel_process_spawn(const char *mountpoint, const struct sentinel_options *o,
			   struct sentinel_process **ret);

/* SIGTERM the child and reap it; SIGKILL it if it has not exited one poll
 * timeout plus a grace period later.  Call while the mount is still served.
 * NULL or already stopped: no-op. */
void sentinel_process_stop(struct sentinel_process *p);

/* Stop (if needed) and free.  After the mount is gone (metrics may render
 * the counters until then).  NULL: no-op. */
void sentinel_process_free(struct sentinel_process *p);

pid_t sentinel_process_pid(const struct sentinel_process *p);

/* Whether the child has exited on its own (without sentinel_process_stop),
 * reaping it if so; logs how it ended.  For the daemon's SIGCHLD handling. */
bool sentinel_process_exited(struct sentinel_process *p);

/* Render the child's counters (for vffs_add_metrics_provider). */
void sentinel_process_render_metrics(void *process, FILE *out);

#endif
