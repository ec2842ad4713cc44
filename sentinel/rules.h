/* SPDX-License-Identifier: MIT */
/*
 * rules.h - the sentinel's decisions as pure functions, so that each rule has
 * a unit test that would fail if the rule were wrong (tests/sentinel/).
 *
 *  classify      agent_query()'s return code and answer -> one check result;
 *  revalidate    which assignment an answer is reported against;
 *  liveness      the evidence about a claim's VMM -> dead / alive / uncertain.
 *
 * The file interface's grammar (assignment files, report commands and their
 * outcomes, VF addresses, limits) is grammar/'s, shared with the daemon.
 * Nothing here does I/O: sentinel/liveness.c gathers the liveness evidence.
 * Conventions: 0 or -errno; outputs are written only on success.
 */
#ifndef VFHEALTH_SENTINEL_RULES_H
#define VFHEALTH_SENTINEL_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/assignment.h"
#include "grammar/report.h"
#include "grammar/vf.h"
#include "proto/client.h"
#include "proto/parse.h"

/* ---- classify ------------------------------------------------------------ */

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

/* query_rc and status as agent_query() returned them.  -EOPNOTSUPP is an old
 * agent; every other error, and an answer with a state outside the enum, is
 * rpc_error (a guest we cannot read is not a guest we may judge). */
enum check_result sentinel_classify(int query_rc, const struct agent_status *status);

/* ---- revalidate ------------------------------------------------------------ */

enum revalidate_verdict {
	REVALIDATE_REPORT, /* report against the captured assignment */
	REVALIDATE_DROP,   /* we cannot tell which assignment it is about: say nothing */
};

/* Whether the claim must be re-read before an answer is reported: only when
 * the captured claim has no claimed_at (no assignment identity to report
 * against).  With one, the report names (instance, claimed_at) and the store
 * records a FAILED answer against that assignment even if the VF was
 * released or re-claimed meanwhile, and applies its rescind rule to an OK
 * answer (issue 11.4). */
bool sentinel_revalidate_needed(const struct assignment *captured);

/* captured: the claim the poll queried.  With a claimed_at: REPORT, whatever
 * the VF holds now.  Without one: current_rc/current is the VF's claim
 * re-read just before reporting: -ENOENT (released during the poll: the
 * answer is about the captured claim) or the same instance still without a
 * claimed_at reports; another claim, or another -errno (we cannot tell),
 * drops. */
enum revalidate_verdict sentinel_revalidate(const struct assignment *captured, int current_rc,
					    const struct assignment *current);

/* ---- liveness ----------------------------------------------------------------- */

enum liveness {
	LIVENESS_ALIVE,     /* keep, poll */
	LIVENESS_DEAD,      /* stop polling now; release when the next reconcile agrees */
	LIVENESS_UNCERTAIN, /* keep, poll, warn, count vfhealth_sentinel_liveness_uncertain_total */
	LIVENESS_UNMANAGED, /* no pid and no control path: nothing to judge by, keep silently */
};

const char *liveness_name(enum liveness l);

/* What sentinel/liveness.c gathered about a claim's VMM. */
struct liveness_evidence {
	int64_t pid;                 /* the claim's pid=, 0: none given */
	int proc_rc;                 /* proc_pid_starttime() on pid: 0, -ENOENT, other */
	uint64_t starttime_now;      /* when proc_rc == 0 */
	uint64_t starttime_claimed;  /* the claim's pid_starttime=, 0 unknown */
	bool boot_id_given;          /* the claim's boot_id= is set */
	int boot_rc;                 /* reading the host's boot id now: 0 or -errno */
	bool boot_id_same;           /* when boot_rc == 0 */
	bool control_given;          /* the claim names a control socket */
	int sockets_rc;              /* reading the VMM's socket table: 0 or -errno */
	bool listening;              /* when sockets_rc == 0: a socket bound to the control
				      * path is listening there */
};

/* Dead when one fact shows it: the boot id differs (the host rebooted), the
 * pid is gone, the pid names a process with another start time, or the
 * control path is given and no socket bound to it listens in the VMM's
 * network namespace.  Otherwise uncertain when a fact could not be read;
 * unmanaged with neither pid nor control path; else alive.  *reason
 * (static) says why. */
enum liveness liveness_verdict(const struct liveness_evidence *ev, const char **reason);

/* ---- detection latency ------------------------------------------------------ */

/* The latency of an answer seen at answered_ns (Unix time, ns) for an
 * assignment claimed at claimed_at (RFC 3339): 0 and *ret_ns (>= 0: a clock
 * stepped back counts as 0), or -EINVAL when claimed_at is "" or malformed. */
int sentinel_latency_ns(const char *claimed_at, int64_t answered_ns, int64_t *ret_ns);

/* The histogram bucket of a latency: the index of the first bound of
 * SENTINEL_LATENCY_BUCKETS (sentinel.h) it does not exceed, or
 * SENTINEL_LATENCY_BUCKET_COUNT (+Inf). */
size_t sentinel_latency_bucket(int64_t latency_ns);

#endif
