/* SPDX-License-Identifier: MIT */
/*
 * counters.h - the sentinel's counters (libvfcounters): the table the poller
 * counts into, its layout shared between two processes, and its rendering
 * as Prometheus text with the metric names.
 *
 * vfhealthd runs the sentinel program as its child (daemon/sentinel-process.h)
 * and hands it the table as a sealed memfd (--counters-fd); the child counts,
 * the daemon renders.  The two may come from different builds, so the table
 * opens with a magic, a version and a layout fingerprint (every field's
 * offset and size), and each side checks them before it trusts a byte: a
 * sentinel refuses a table of another layout, and a renderer prints a
 * comment that says so instead of the numbers.  Lock-free 64-bit atomics:
 * address-free on Linux, so valid across processes.
 *
 * The poller (libvfsentinel) links this to count; vfhealthd links it alone
 * to create and render the table.  Tests: tests/sentinel/test-counters.c.
 */
#ifndef VFHEALTH_SENTINEL_COUNTERS_H
#define VFHEALTH_SENTINEL_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "grammar/assignment.h"
#include "grammar/limits.h"
#include "proto/status.h"

#define SENTINEL_MAX_TARGETS 65536 /* claims looked at per poll (the store's VF cap) */

/* What one agent check came to (vfhealth_sentinel_checks_total{result=...});
 * sentinel_classify() (verdict.h) decides it. */
enum check_result {
	CHECK_OK,
	CHECK_FAILED,
	CHECK_UNKNOWN,
	CHECK_RPC_ERROR,         /* connect, handshake, timeout, framing, garbage */
	CHECK_UNSUPPORTED_AGENT, /* the agent answered "unimplemented" */
	CHECK_RESULT_COUNT,      /* (a failed listing is no check: list_errors counts it) */
};

/* "ok", "failed", "unknown", "rpc_error", "unsupported_agent" */
const char *check_result_name(enum check_result r);

/* How a poll watched each live claim (vfhealth_sentinel_claims{watch=...}),
 * each claim in exactly one: */
#define SENTINEL_WATCHES(X)                                                                 \
	X(POLLED, "polled")           /* its VMM is alive: its agent is asked */            \
	X(UNCERTAIN, "uncertain")     /* its VMM's liveness cannot be told: asked, kept */  \
	X(STARTING, "starting")       /* its control socket not listening yet, within */    \
				      /* the startup grace: never asked yet, kept */        \
	X(DEAD, "dead")               /* its VMM is dead: never asked again, released by */ \
				      /* the next reconcile that agrees */                  \
	X(NO_AGENT, "no_agent")       /* no agent= (exclusion only): never asked */         \
	X(NO_EVIDENCE, "no_evidence") /* agent= but neither pid= nor control=: never */     \
				      /* asked, as its CID may belong to anyone by now */   \
	X(UNCONFINED, "unconfined")   /* a socket path outside the socket directories: */   \
				      /* never asked, kept */

enum sentinel_watch {
#define SENTINEL_WATCH_ENUM(id, name) SENTINEL_WATCH_##id,
	SENTINEL_WATCHES(SENTINEL_WATCH_ENUM)
#undef SENTINEL_WATCH_ENUM
	SENTINEL_WATCH_COUNT,
};

/* "polled", ..., "unconfined" */
const char *sentinel_watch_name(enum sentinel_watch w);

/* The scalar counters, one row each: field, Prometheus name, HELP text.  The
 * one list drives both structs below, the snapshot and the metrics. */
#define SENTINEL_SCALAR_COUNTERS(X)                                                        \
	X(init_failures, "vfhealth_sentinel_init_failures_total",                          \
	  "Failed GPU initializations the sentinel reported that the store recorded or "   \
	  "quarantined on.")                                                               \
	X(quarantines, "vfhealth_sentinel_quarantines_total",                              \
	  "VFs quarantined by a sentinel report.")                                         \
	X(liveness_uncertain, "vfhealth_sentinel_liveness_uncertain_total",                \
	  "Stale-claim checks that kept a claim because its VMM's liveness could not be "  \
	  "determined.")                                                                   \
	X(claims_released, "vfhealth_sentinel_claims_released_total",                      \
	  "Claims released because their VMM was dead.")                                   \
	X(reports_dropped, "vfhealth_sentinel_reports_dropped_total",                      \
	  "Answers not reported because the claim they are about could not be told.")      \
	X(polls, "vfhealth_sentinel_polls_total", "Completed polls.")                      \
	X(reconciles, "vfhealth_sentinel_reconciles_total",                                \
	  "Completed stale-claim reconcile passes.")                                       \
	X(claims_unconfined, "vfhealth_sentinel_claims_unconfined_total",                  \
	  "Claims skipped (per poll or reconcile) because a socket path lies outside the " \
	  "socket directories or resolves through a symlink.")                             \
	X(list_errors, "vfhealth_sentinel_list_errors_total",                              \
	  "Polls whose listing of the claims failed, in whole or in part (its claims "     \
	  "may have gone unchecked).")

/* Detection latency: from a claim (its claimed_at) to the first failed and
 * the first ok answer the sentinel sees for that assignment, in seconds.
 * The one list of the histogram's upper bounds (le); +Inf is added. */
#define SENTINEL_LATENCY_BUCKETS(X) \
	X(1) X(2) X(5) X(10) X(15) X(30) X(60) X(120) X(300) X(600) X(1800) X(3600)
#define SENTINEL_LATENCY_PLUS_ONE(le) +1
#define SENTINEL_LATENCY_BUCKET_COUNT (0 SENTINEL_LATENCY_BUCKETS(SENTINEL_LATENCY_PLUS_ONE))

enum sentinel_latency_kind {
	SENTINEL_LATENCY_FAILED, /* kind="failed" */
	SENTINEL_LATENCY_OK,     /* kind="ok" */
	SENTINEL_LATENCY_KINDS,
};

/* One polled claim's last check: its result, and the agent's telemetry as
 * that answer told it (telemetry.present false: none). */
struct sentinel_agent_slot {
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ];
	uint32_t result; /* enum check_result */
	struct agent_telemetry telemetry;
};

/* "vfhsent\0" read as a little-endian integer. */
#define SENTINEL_COUNTERS_MAGIC UINT64_C(0x00746e6573686676)
/* Bump when a field keeps its place but changes its meaning; a moved,
 * added or resized field changes the layout fingerprint by itself. */
#define SENTINEL_COUNTERS_VERSION 2

/* The shared table.  magic, version and layout stay the first fields, at
 * these offsets, in every build. */
struct sentinel_counters {
	uint64_t magic;   /* SENTINEL_COUNTERS_MAGIC */
	uint64_t version; /* SENTINEL_COUNTERS_VERSION */
	uint64_t layout;  /* sentinel_counters_layout() of the build that made it */
	atomic_uint_fast64_t checks[CHECK_RESULT_COUNT];
	atomic_uint_fast64_t unknown[AGENT_REASON_COUNT]; /* UNKNOWN answers by reason */
#define SENTINEL_ATOMIC_FIELD(field, name, help) atomic_uint_fast64_t field;
	SENTINEL_SCALAR_COUNTERS(SENTINEL_ATOMIC_FIELD)
#undef SENTINEL_ATOMIC_FIELD
	atomic_int_fast64_t last_poll_duration_ns;
	atomic_uint_fast64_t claims_watched[SENTINEL_WATCH_COUNT]; /* gauge, set per poll */
	/* per kind: observations by bucket (not cumulative; the last is +Inf),
	 * their sum and count */
	struct {
		atomic_uint_fast64_t buckets[SENTINEL_LATENCY_BUCKET_COUNT + 1];
		atomic_uint_fast64_t sum_ns;
		atomic_uint_fast64_t count;
	} latency[SENTINEL_LATENCY_KINDS];
	/* the options in force (vfhealth_sentinel_config_info); 0 until started */
	atomic_int_fast64_t poll_interval_ns;
	atomic_int_fast64_t poll_timeout_ns;
	atomic_uint_fast64_t concurrency;
	/* The last poll's checks, one slot per claim whose check ended (so at
	 * most SENTINEL_MAX_TARGETS, one per live polled claim): its result,
	 * and its agent's telemetry when the answer had some.  A sequence lock: agents_seq is odd
	 * while the scheduler rewrites agents_count and the slots; a reader
	 * copies them and keeps the copy only if agents_seq was even and
	 * unchanged.  Pages are touched only for slots in use. */
	atomic_uint_fast64_t agents_seq;
	atomic_uint_fast64_t agents_count;
	struct sentinel_agent_slot agents[SENTINEL_MAX_TARGETS];
};

/* This build's layout fingerprint: every field's offset and size, in order. */
uint64_t sentinel_counters_layout(void);

/* Stamp a zeroed table with this build's magic, version and layout (it
 * writes the stamp alone: pages of unused slots stay untouched). */
void sentinel_counters_init(struct sentinel_counters *c);

/* 0 when c was stamped by a build of this layout; -EPROTO when not. */
int sentinel_counters_check(const struct sentinel_counters *c);

/* A memfd holding a stamped table, sealed at its size (a peer cannot make
 * the mapping fault), close-on-exec, and its MAP_SHARED mapping. */
int sentinel_counters_create(int *ret_fd, struct sentinel_counters **ret);

/* Map the table open as fd: -EINVAL when it is not a regular file of this
 * build's size, -EPROTO when its stamp is another layout's (nothing mapped). */
int sentinel_counters_map(int fd, struct sentinel_counters **ret);

/* Unmap what _create or _map mapped.  NULL: no-op. */
void sentinel_counters_unmap(struct sentinel_counters *c);

/* Render counters (a struct sentinel_counters *: a metrics_render_fn,
 * fs/metrics.h) in Prometheus text format: HELP and TYPE lines, every check
 * result present.  A table of another layout renders one comment line that
 * says so, and no series.  NULL: nothing. */
void sentinel_counters_render(void *counters, FILE *out);

/* The last poll's result for each claim it checked (every result, not
 * only the ok and failed the reports carry): vfhealth_vf_last_check. */
struct sentinel_last_check {
	struct claim_ref claim;
	enum check_result result;
};
/* A consistent copy, sorted by VF then instance (*ret: free() it; NULL and
 * 0 when none).  Entries the table holds malformed are left out. */
size_t sentinel_counters_last_checks(const struct sentinel_counters *c,
				     struct sentinel_last_check **ret);

/* A snapshot of the counters, for tests and the standalone binary. */
struct sentinel_stats {
	uint64_t checks[CHECK_RESULT_COUNT];
	uint64_t unknown[AGENT_REASON_COUNT]; /* indexed by enum agent_unknown_reason */
#define SENTINEL_PLAIN_FIELD(field, name, help) uint64_t field;
	SENTINEL_SCALAR_COUNTERS(SENTINEL_PLAIN_FIELD)
#undef SENTINEL_PLAIN_FIELD
	int64_t last_poll_duration_ns;
	uint64_t claims_watched[SENTINEL_WATCH_COUNT];
	struct {
		uint64_t buckets[SENTINEL_LATENCY_BUCKET_COUNT + 1];
		uint64_t sum_ns;
		uint64_t count;
	} latency[SENTINEL_LATENCY_KINDS];
	int64_t poll_interval_ns;
	int64_t poll_timeout_ns;
	uint64_t concurrency;
};
void sentinel_counters_get(const struct sentinel_counters *c, struct sentinel_stats *ret);

#endif
