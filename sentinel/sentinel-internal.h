/* SPDX-License-Identifier: MIT */
/*
 * sentinel-internal.h - what the poller's files share: the sentinel object,
 * a poll's targets, the memory of past claims, and each file's entry points.
 * The public API is sentinel.h; nothing outside sentinel/ includes this.
 *
 *   sentinel.c      the scheduler, start and stop (the design notes: threads,
 *                   locks, shutdown)
 *   mount-client.c  every file operation on the mount
 *   worker.c        the worker pool and one target's check
 *   memory.c        the memory of past claims
 *   poll.c          a poll: who is watched how, the targets, the telemetry
 *   reconcile.c     a reconcile: dead claims released
 *   counters.c      the counter table and its rendering (libvfcounters)
 */
#ifndef VFHEALTH_SENTINEL_INTERNAL_H
#define VFHEALTH_SENTINEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/assignment.h"
#include "proto/client.h"
#include "common/endpoint.h"
#include "sentinel/liveness.h"
#include "sentinel/sentinel.h"
#include "sentinel/verdict.h"

/* One claim of a poll, with what its worker learned for the scheduler. */
struct target {
	struct assignment claim;
	struct endpoint agent;
	bool answered; /* result is set */
	enum check_result result;
	const char *why;     /* rpc_error: the error's text; unknown: the agent's reason */
	int64_t answered_ns; /* Unix time of the answer */
	struct agent_telemetry telemetry; /* .present when the answer had some */
};

/* What the sentinel knows about a claim (an assignment: vf, instance,
 * claimed_at) across scans (scheduler thread only). */
struct claim_memory {
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ];
	bool dead;                    /* judged dead (by a poll or a reconcile): never polled again,
			 * unless a reconcile finds it alive (its VMM was starting) */
	bool seen_dead;               /* the previous reconcile found it dead */
	char alive_at[RFC3339_BUFSZ]; /* the last alive verdict, "" when none */
	char dead_at[RFC3339_BUFSZ];  /* the first dead verdict of this death, "" when none */
	const char *uncertain_why;    /* the reason of the last uncertain verdict (static
				    * text), NULL when the last was not uncertain:
				    * warned once per change */
	bool noted_no_evidence;       /* said once that it is never polled */
	/* the startup grace (--control-grace): a socket was seen listening on
	 * its control path; when it was claimed (CLOCK_BOOTTIME, estimated at
	 * its first sighting: sentinel_claim_boot_ns); said once that it waits */
	bool control_seen;
	int64_t claim_boot_ns;
	bool noted_starting;
	/* agent-unreachable: since when (monotonic ns, 0: not now) its answers
	 * have been rpc_error or unknown, and the result and reason last
	 * logged (NULL: not logged in this streak): logged once per change */
	int64_t unanswered_since_ns;
	enum check_result unreachable_result;
	const char *unreachable_why;
	/* detection latency: timed = first listed after this process's first
	 * listing (an older claim's "first" answer would time our restart, not
	 * the guest); seen_*: its first failed / ok answer was observed */
	bool timed;
	bool seen_failed;
	bool seen_ok;
};

/* The claims a listing found. */
struct claim_list {
	struct assignment *items;
	size_t count;
	size_t capacity;
	bool error; /* part of the listing failed (counted once in list_errors) */
};

struct sentinel {
	char *mountpoint;
	struct sentinel_options opt;
	char *proc_root;
	char *metrics_path;
	int cancel_fd; /* cancels agent queries in flight (agent_query's cancel_fd) */

	pthread_t scheduler;
	bool scheduler_started;
	pthread_t *workers;
	unsigned workers_started;

	pthread_mutex_t scan_lock; /* S1 (docs/architecture.md, the lock table) */
	pthread_cond_t work_cond;  /* workers wait here for a scan or the stop */
	pthread_cond_t done_cond;  /* the scheduler waits here (CLOCK_MONOTONIC): the
				    * end of a scan, the next pass, or the stop */
	struct target *targets;
	size_t target_count;
	size_t next_target;
	unsigned active_workers;
	bool stopping;
	atomic_bool stopping_fast; /* the same flag, readable without the lock */
	bool stopped;              /* sentinel_stop() has joined everything */

	struct claim_memory *memory; /* sorted by claim memory's order */
	size_t memory_count;
	bool listed_once; /* claim_memory_update() ran: later claims are new */

	struct sentinel_counters *counters; /* own_counters, or shared with a parent */
	struct sentinel_counters own_counters;
};

/* ---- mount-client.c: every file operation on the mount ------------------------- */

/* <vf>/assignments/<instance_id>.  0, -ENOENT, or -errno. */
int read_assignment(const struct sentinel *s, const char *vf, const char *instance_id,
		    struct assignment *ret);
/* The live claim of vf now: the captured instance's if it still holds it,
 * else whichever instance holds it, else -ENOENT. */
int read_current_claim(const struct sentinel *s, const char *vf, const char *instance_id,
		       struct assignment *ret);
/* Every live claim under the mount (l->error: part of it could not be
 * read); -ECANCELED when stopping. */
int list_claims(const struct sentinel *s, struct claim_list *l);
void claim_list_free(struct claim_list *l);
/* Write c's report and count and log what the store made of it. */
void report(struct sentinel *s, const struct assignment *c, enum check_result result,
	    const char *message);
/* The poll's one repair attempt when `status` says the store is unavailable. */
void repair_if_unavailable(struct sentinel *s);
/* Release exactly the assignment c names (`release=CLAIMED_AT`): 0,
 * -ESTALE (released and made again since), -ENOENT, or -errno. */
/* died_at: NULL, or the death time to name (sentinel_death_time). */
int release_claim(const struct sentinel *s, const struct assignment *c, const char *died_at);

/* ---- memory.c: the memory of past claims (scheduler thread) -------------------- */

struct claim_memory *claim_memory_find(struct sentinel *s, const struct assignment *c);
/* Carry each listed claim's memory over to the next scan. */
void claim_memory_update(struct sentinel *s, const struct claim_list *l);
/* The first dead verdict on a claim: from now on it is not polled. */
void mark_dead(struct claim_memory *m, const struct assignment *c, const char *reason);
/* Gather the evidence about c's VMM and judge it (liveness_verdict), with
 * what m remembers: whether its control socket was ever seen listening,
 * and its startup grace.  m may be NULL (no memory: the grace counts from
 * claimed_at alone). */
enum liveness judge_claim(struct sentinel *s, struct liveness_pass *pass, struct claim_memory *m,
			  const struct assignment *c, const char **reason);
/* A starting verdict: said once per claim, at info. */
void note_starting(const struct sentinel *s, struct claim_memory *m, const struct assignment *c);
/* A claim judged alive: when, for the death time of a later release. */
void note_alive(struct claim_memory *m);
/* An uncertain verdict: warned once per change of reason. */
void note_uncertain(struct claim_memory *m, const struct assignment *c, const char *reason);
/* Claims whose agents have answered only rpc_error or unknown for longer
 * than the agent grace (--agent-grace): logged once per claim per change
 * of result or reason, and once when they answer again. */
void note_reachability(struct sentinel *s, const struct target *targets, size_t count);
/* The first failed and first ok answer of each timed assignment, into the
 * detection latency histograms. */
void observe_latencies(struct sentinel *s, const struct target *targets, size_t count);

/* ---- worker.c: the worker pool ------------------------------------------------- */

void *worker_main(void *userdata);
/* Hand targets to the workers and wait until every one is checked (or the
 * sentinel stops). */
void run_scan(struct sentinel *s, struct target *targets, size_t count);

/* ---- poll.c, reconcile.c: the scheduler's two passes --------------------------- */

/* Whether c's socket paths are confined (common/sockdir.h); counts and logs
 * a claim that is not. */
bool claim_confined(struct sentinel *s, const struct assignment *c);
void run_poll(struct sentinel *s);
void run_reconcile(struct sentinel *s);

/* ---- sentinel.c ------------------------------------------------------------------ */

/* Standalone: replace the metrics file (options.metrics_path), if any. */
void write_metrics_file(struct sentinel *s);

#endif
