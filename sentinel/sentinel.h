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
 *      uncertain (liveness_verdict() in rules.h, evidence from
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
 *      still holding the VF (sentinel_revalidate() in rules.h);
 *   6. log: recorded failure -> warning, quarantine -> error, rescind -> info,
 *      unchanged -> nothing.
 * Every reconcile_interval (and once at start, when enabled) every claim is
 * judged; one judged dead is no longer polled, and released (conditional
 * release, `release=CLAIMED_AT`) when the next pass judges it dead again;
 * uncertain ones are kept, counted, and warned about once per change.
 * Without polls (options.poll false: vfhealthd --no-sentinel) only the
 * reconcile runs.
 *
 * Thread-safety: sentinel_start/sentinel_stop/sentinel_free from one thread;
 * sentinel_render_metrics from any thread at any time between start and free.
 */
#ifndef VFHEALTH_SENTINEL_H
#define VFHEALTH_SENTINEL_H

#include <getopt.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "grammar/limits.h"
#include "proto/client.h"
#include "common/parse.h"
#include "common/sockdir.h"

#define SENTINEL_NS_PER_S INT64_C(1000000000)
#define SENTINEL_DEFAULT_POLL_INTERVAL_NS (5 * SENTINEL_NS_PER_S)
#define SENTINEL_DEFAULT_POLL_TIMEOUT_NS (5 * SENTINEL_NS_PER_S)
#define SENTINEL_DEFAULT_RECONCILE_INTERVAL_NS (60 * SENTINEL_NS_PER_S)
#define SENTINEL_DEFAULT_CONCURRENCY 64
#define SENTINEL_CONCURRENCY_MIN 1
#define SENTINEL_CONCURRENCY_MAX 1024
#define SENTINEL_DURATION_MAX_NS (86400 * SENTINEL_NS_PER_S) /* any duration option: <= 1 day */
#define SENTINEL_MAX_TARGETS 65536 /* claims looked at per poll (the store's VF cap) */

struct sentinel_options {
	bool enabled;                  /* vfhealthd: false with --no-sentinel */
	bool poll;                     /* false with vfhealth-sentinel --reconcile-only */
	int64_t poll_interval_ns;      /* --poll-interval S */
	int64_t poll_timeout_ns;       /* --poll-timeout S: each agent query's deadline */
	unsigned concurrency;          /* --concurrency N: queries in flight, 1..1024 */
	bool reconcile;                /* false with --no-reconcile */
	int64_t reconcile_interval_ns; /* --reconcile-interval S */
	const char *proc_root;         /* where /proc is; tests point it at a fake tree */
	const char *metrics_path;      /* standalone: after every poll and reconcile, replace
					* this file (write + rename) with the metrics; NULL: none */
	/* --socket-dir DIR (repeatable): where the socket paths of claims may
	 * point (common/sockdir.h).  The defaults until the first --socket-dir,
	 * which replaces them.  vfhealthd confines claim writes by the same. */
	struct sockdirs socket_dirs;
	bool socket_dirs_given;
};

/* The defaults above; enabled, poll and reconcile on, proc_root "/proc",
 * the default socket directories. */
void sentinel_options_init(struct sentinel_options *o);

/* getopt_long(3) entries shared by vfhealthd and vfhealth-sentinel: put
 * SENTINEL_GETOPT_OPTIONS inside a struct option array and hand every
 * returned value v with SENTINEL_OPT_FIRST <= v < SENTINEL_OPT_END to
 * sentinel_options_apply().  SENTINEL_OPTIONS_HELP lists exactly them;
 * --no-sentinel is vfhealthd's alone (SENTINEL_NO_SENTINEL_OPTION and its
 * help line), as the sentinel program cannot do without itself. */
enum {
	SENTINEL_OPT_FIRST = 0x5e00,
	SENTINEL_OPT_NO_SENTINEL = SENTINEL_OPT_FIRST,
	SENTINEL_OPT_POLL_INTERVAL,
	SENTINEL_OPT_POLL_TIMEOUT,
	SENTINEL_OPT_CONCURRENCY,
	SENTINEL_OPT_NO_RECONCILE,
	SENTINEL_OPT_RECONCILE_INTERVAL,
	SENTINEL_OPT_PROC_ROOT,
	SENTINEL_OPT_SOCKET_DIR,
	SENTINEL_OPT_END,
};

#define SENTINEL_NO_SENTINEL_OPTION { "no-sentinel", no_argument, NULL, SENTINEL_OPT_NO_SENTINEL }
#define SENTINEL_NO_SENTINEL_HELP \
	"      --no-sentinel            do not poll guest agents (stale claims are still\n" \
	"                               released unless --no-reconcile)\n"

#define SENTINEL_GETOPT_OPTIONS                                                          \
	{ "poll-interval", required_argument, NULL, SENTINEL_OPT_POLL_INTERVAL },        \
	{ "poll-timeout", required_argument, NULL, SENTINEL_OPT_POLL_TIMEOUT },          \
	{ "concurrency", required_argument, NULL, SENTINEL_OPT_CONCURRENCY },            \
	{ "no-reconcile", no_argument, NULL, SENTINEL_OPT_NO_RECONCILE },                \
	{ "reconcile-interval", required_argument, NULL, SENTINEL_OPT_RECONCILE_INTERVAL }, \
	{ "proc-root", required_argument, NULL, SENTINEL_OPT_PROC_ROOT },                \
	{ "socket-dir", required_argument, NULL, SENTINEL_OPT_SOCKET_DIR }

#define SENTINEL_OPTIONS_HELP                                                                   \
	"Sentinel (polls guest agents and reports to the store):\n"                             \
	"      --poll-interval S        seconds between polls (default 5; fractions allowed)\n"  \
	"      --poll-timeout S         deadline of each agent query (default 5)\n"              \
	"      --concurrency N          agent queries in flight, 1..1024 (default 64)\n"         \
	"      --no-reconcile           never release claims whose VMM is dead\n"                \
	"      --reconcile-interval S   seconds between stale-claim scans (default 60)\n"        \
	"      --proc-root DIR          where to read PID/stat from (default /proc; tests)\n"  \
	"      --socket-dir DIR         claims' socket paths must lie under DIR, reached\n"     \
	"                               without symlinks (repeatable, up to 16; default:\n"    \
	"                               /run/vfhealth-vmm /run/libvirt/qemu\n"                 \
	"                               /var/lib/libvirt/qemu /run/cloud-hypervisor\n"         \
	"                               /run/firecracker /srv/jailer /run/vc)\n"

/* Apply one option (opt = getopt_long's return value, arg = optarg).  Logs a
 * clear message and returns -EINVAL (bad syntax) or -ERANGE (out of range)
 * on bad input, leaving o unchanged; -ENOENT for an opt that is not ours. */
int sentinel_options_apply(struct sentinel_options *o, int opt, const char *arg);

struct sentinel;

/* Start the scheduler and the worker pool against the file interface at
 * mountpoint (which must already be mounted and served).  The first poll
 * runs one poll_interval after start; the first reconcile (when enabled)
 * right away.  -EINVAL for bad options, -ENOMEM, or -errno from thread or
 * eventfd creation (nothing is left running on failure). */
int sentinel_start(const char *mountpoint, const struct sentinel_options *o,
		   struct sentinel **ret);

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

/* How a poll watched each live claim (vfhealth_sentinel_claims{watch=...}),
 * each claim in exactly one: */
#define SENTINEL_WATCHES(X)                                                                  \
	X(POLLED, "polled")           /* its VMM is alive: its agent is asked */             \
	X(UNCERTAIN, "uncertain")     /* its VMM's liveness cannot be told: asked, kept */   \
	X(DEAD, "dead")               /* its VMM is dead: never asked again, released by */  \
				      /* the next reconcile that agrees */                   \
	X(NO_AGENT, "no_agent")       /* no agent= (exclusion only): never asked */          \
	X(NO_EVIDENCE, "no_evidence") /* agent= but neither pid= nor control=: never */      \
				      /* asked, as its CID may belong to anyone by now */    \
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
#define SENTINEL_SCALAR_COUNTERS(X)                                                          \
	X(init_failures, "vfhealth_sentinel_init_failures_total",                            \
	  "Failed GPU initializations the sentinel reported that the store recorded or "     \
	  "quarantined on.")                                                                 \
	X(quarantines, "vfhealth_sentinel_quarantines_total",                                \
	  "VFs quarantined by a sentinel report.")                                           \
	X(liveness_uncertain, "vfhealth_sentinel_liveness_uncertain_total",                  \
	  "Stale-claim checks that kept a claim because its VMM's liveness could not be "    \
	  "determined.")                                                                     \
	X(claims_released, "vfhealth_sentinel_claims_released_total",                        \
	  "Claims released because their VMM was dead.")                                     \
	X(reports_dropped, "vfhealth_sentinel_reports_dropped_total",                        \
	  "Answers not reported because the claim they are about could not be told.")                 \
	X(polls, "vfhealth_sentinel_polls_total", "Completed polls.")                         \
	X(reconciles, "vfhealth_sentinel_reconciles_total",                                  \
	  "Completed stale-claim reconcile passes.")                                \
	X(claims_unconfined, "vfhealth_sentinel_claims_unconfined_total",                    \
	  "Claims skipped (per poll or reconcile) because a socket path lies outside the "   \
	  "socket directories or resolves through a symlink.")                              \
	X(list_errors, "vfhealth_sentinel_list_errors_total",                                \
	  "Polls whose listing of the claims failed, in whole or in part (its claims "       \
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

/* One polled claim's agent telemetry, as its last answer told it. */
struct sentinel_agent_slot {
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	struct agent_telemetry telemetry;
};

/* The counters, kept apart from the poller so that they can live in memory
 * shared with vfhealthd, which runs the sentinel program as its child and
 * passes them as a memfd (--counters-fd, daemon/sentinel-process.h).  The
 * size of this struct is the table's version: the program refuses a memfd
 * of any other size.  Lock-free atomics: safe across processes. */
struct sentinel_counters {
	atomic_uint_fast64_t checks[5]; /* indexed by enum check_result (rules.h) */
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
	/* The agents' telemetry from the last poll, one slot per claim whose
	 * agent answered with some (so at most SENTINEL_MAX_TARGETS series
	 * sets, one per live polled claim).  A sequence lock: agents_seq is odd
	 * while the scheduler rewrites agents_count and the slots; a reader
	 * copies them and keeps the copy only if agents_seq was even and
	 * unchanged.  Pages are touched only for slots in use. */
	atomic_uint_fast64_t agents_seq;
	atomic_uint_fast64_t agents_count;
	struct sentinel_agent_slot agents[SENTINEL_MAX_TARGETS];
};

/* sentinel_start(), counting into counters (zeroed by the caller) instead
 * of the sentinel's own. */
int sentinel_start_counting(const char *mountpoint, const struct sentinel_options *o,
			    struct sentinel_counters *counters, struct sentinel **ret);

/* Render counters (a struct sentinel_counters *) like sentinel_render_metrics. */
void sentinel_counters_render(void *counters, FILE *out);

/* A snapshot of the counters, for tests and the standalone binary. */
struct sentinel_stats {
	uint64_t checks[5]; /* indexed by enum check_result (rules.h) */
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
void sentinel_get_stats(struct sentinel *s, struct sentinel_stats *ret);
void sentinel_counters_get(const struct sentinel_counters *c, struct sentinel_stats *ret);

#endif
