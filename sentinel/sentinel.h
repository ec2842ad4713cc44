/* SPDX-License-Identifier: MIT */
/*
 * sentinel.h - the poller that carries what guest agents know to the store.
 *
 * The sentinel is a client of the file interface (vfhealth(5)) mounted at a
 * mountpoint, and of nothing else: every read and every change it makes is a
 * documented file operation through that mount (list <vf>/assignments/,
 * read an assignment, write "failed ..."/"ok ..." to <vf>/report and read
 * the outcome back on the same open file, write "repair" to status, write
 * "release=CLAIMED_AT" to an assignment to release a dead claim).  So the sentinel vfhealthd runs
 * produces the same inotify and poll notifications as an external writer;
 * it is always the vfhealth-sentinel program (main.c), whether vfhealthd
 * runs it as its child or an operator runs it against a mount.
 *
 * Every poll_interval (the first one interval after start):
 *   1. if `status` says unavailable (or cannot be read: EIO), write `repair`
 *      once: the poll's one repair attempt; the poll goes on either way;
 *   2. list targets: claims with an agent endpoint whose VMM is alive or
 *      uncertain (liveness_verdict() in verdict.h, evidence from
 *      sentinel/liveness.h: one socket-table read per network namespace)
 *      and was never judged dead (a dead VM's claim is never polled: its
 *      stale vsock CID may belong to another guest by now), and count every
 *      claim by how it is watched (vfhealth_sentinel_claims{watch=...});
 *      a listing failure counts vfhealth_sentinel_list_errors_total once per poll;
 *   3. query every target's agent (GetGPUInitStatus) with at most
 *      `concurrency` in flight, each bounded by poll_timeout;
 *   4. classify and count (vfhealth_sentinel_checks_total{result=...});
 *   5. report FAILED against the captured (instance, claimed_at), even if
 *      the VF was released or re-claimed meanwhile (the store records by
 *      assignment); report OK only if a re-read finds that same assignment
 *      still holding the VF (sentinel_revalidate() in verdict.h);
 *   6. log: recorded failure -> warning, quarantine -> error, rescind -> info,
 *      unchanged -> nothing.
 * Every reconcile_interval (and once at start, when enabled) every claim is
 * judged; one judged dead is no longer polled, and released (conditional
 * release, `release=CLAIMED_AT`) when the next pass judges it dead again;
 * uncertain ones are kept, counted, and warned about once per change;
 * starting ones (a control socket never seen listening, within
 * control_grace after the claim: verdict.h) are kept, not polled, noted
 * once.
 * Without polls (options.poll false: vfhealthd --no-sentinel) only the
 * reconcile runs.
 *
 * Thread-safety: sentinel_start/sentinel_stop/sentinel_free from one thread;
 * sentinel_render_metrics from any thread at any time between start and free.
 */
#ifndef VFHEALTH_SENTINEL_H
#define VFHEALTH_SENTINEL_H

#include <stdio.h>

#include "sentinel/counters.h"
#include "sentinel/options.h"

struct sentinel;

/* Start the scheduler and the worker pool against the file interface at
 * mountpoint (which must already be mounted and served).  The first poll
 * runs one poll_interval after start; the first reconcile (when enabled)
 * right away.  -EINVAL for bad options, -ENOMEM, or -errno from thread or
 * eventfd creation (nothing is left running on failure). */
int sentinel_start(const char *mountpoint, const struct sentinel_options *o, struct sentinel **ret);

/* Stop within one poll_timeout: every in-flight agent connection is closed
 * (agent_query's cancel_fd fires), no new report is started, a report
 * already written is read back, then every thread is joined.  The counters
 * stay readable (sentinel_render_metrics) until sentinel_free().  Calling it
 * again, or with NULL, is a no-op.
 *
 * In-process, call it while the mount is still served, or after the FUSE
 * connection is gone (fuse_session_unmount): a thread blocked in a file
 * operation on a mount whose loop has stopped but whose connection is
 * still open would never return. */
void sentinel_stop(struct sentinel *s);

/* Stop (if still running) and free.  In vfhealthd, after the mount is gone:
 * the metrics provider may render the counters until then.  NULL: no-op. */
void sentinel_free(struct sentinel *s);

/* Render the sentinel's counters in Prometheus text format (HELP and TYPE
 * lines, every check result present), e.g. for --metrics-file. */
void sentinel_render_metrics(void *sentinel, FILE *out);

/* sentinel_start(), counting into counters (a stamped table:
 * sentinel_counters_map(), counters.h) instead of the sentinel's own. */
int sentinel_start_counting(const char *mountpoint, const struct sentinel_options *o,
			    struct sentinel_counters *counters, struct sentinel **ret);

/* A snapshot of the counters it counts into. */
void sentinel_get_stats(struct sentinel *s, struct sentinel_stats *ret);

#endif
