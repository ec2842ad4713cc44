/* SPDX-License-Identifier: MIT */
/*
 * verdict.h - the sentinel's judgements as pure functions, so that each rule has
 * a unit test that would fail if the rule were wrong (tests/sentinel/).
 *
 *  classify      agent_query()'s return code and answer -> one check result;
 *  revalidate    whether an answer is reported against the assignment asked;
 *  liveness      the evidence about a claim's VMM -> dead / alive / uncertain /
 *                starting; and when a claim's startup grace ends;
 *  death time    what a dead VMM's release says of when it died.
 *
 * The file interface's grammar (assignment files, report commands and their
 * outcomes, VF addresses, limits) is grammar/'s, shared with the daemon.
 * Nothing here does I/O: sentinel/liveness.c gathers the liveness evidence.
 * Conventions: 0 or -errno; outputs are written only on success.
 */
#ifndef VFHEALTH_SENTINEL_VERDICT_H
#define VFHEALTH_SENTINEL_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/assignment.h"
#include "grammar/report.h"
#include "grammar/vf.h"
#include "proto/client.h"
#include "common/parse.h"
#include "sentinel/counters.h" /* enum check_result, the latency buckets */

/* ---- classify ------------------------------------------------------------ */

/* query_rc and status as agent_query() returned them.  -EOPNOTSUPP is an old
 * agent; every other error, and an answer with a state outside the enum, is
 * rpc_error (a guest we cannot read is not a guest we may judge). */
enum check_result sentinel_classify(int query_rc, const struct agent_status *status);

/* ---- revalidate ------------------------------------------------------------ */

enum revalidate_verdict {
	REVALIDATE_REPORT, /* report against the captured assignment */
	REVALIDATE_DROP,   /* not about the captured assignment for sure: say nothing */
};

/* Whether the claim must be re-read before an answer is reported: for an
 * OK answer always, for any answer of a claim without claimed_at (no
 * assignment identity to report against). */
bool sentinel_revalidate_needed(const struct assignment *captured, enum check_result result);

/* captured: the claim the poll queried; result its answer; current_rc and
 * current the VF's claim re-read after the answer (when
 * sentinel_revalidate_needed() said so).
 *  - OK is reported only when the captured instance still holds the VF
 *    with the same claimed_at: the agent endpoint of a claim released and
 *    made again may have been answered by the new boot, whose OK must
 *    never clear the old assignment's failure or rescind its quarantine.
 *    Anything else (released, re-claimed, another instance, a failed
 *    re-read) drops it.
 *  - FAILED (with a claimed_at) is reported against the captured
 *    assignment, whatever the VF holds now: the store records it there and
 *    never blames a new one.
 *  - Without a claimed_at: -ENOENT (released during the poll) or the same
 *    instance still without one reports a FAILED; another claim, or
 *    another -errno, drops. */
enum revalidate_verdict sentinel_revalidate(const struct assignment *captured,
					    enum check_result result, int current_rc,
					    const struct assignment *current);

/* ---- liveness ----------------------------------------------------------------- */

enum liveness {
	LIVENESS_ALIVE,     /* keep, poll */
	LIVENESS_DEAD,      /* stop polling now; release when the next reconcile agrees */
	LIVENESS_UNCERTAIN, /* keep, poll, warn once per change, count
			     * vfhealth_sentinel_liveness_uncertain_total */
	LIVENESS_UNMANAGED, /* no pid and no control path: nothing to judge by; kept,
			     * never dialled */
	LIVENESS_STARTING,  /* its control socket is not listening yet, within the
			     * startup grace: kept, never released, never dialled
			     * (nothing vouches for its agent yet), noted once */
};

const char *liveness_name(enum liveness l);

/* What sentinel/liveness.c gathered about a claim's VMM. */
struct liveness_evidence {
	int64_t pid;                /* the claim's pid=, 0: none given */
	int proc_rc;                /* proc_pid_stat() on pid: 0, -ENOENT, other */
	bool ended;                 /* when proc_rc == 0: a zombie (or dead) process */
	uint64_t starttime_now;     /* when proc_rc == 0 */
	uint64_t starttime_claimed; /* the claim's pid_starttime=, 0 unknown */
	bool boot_id_given;         /* the claim's boot_id= is set */
	int boot_rc;                /* reading the host's boot id now: 0 or -errno */
	bool boot_id_same;          /* when boot_rc == 0 */
	bool control_given;         /* the claim names a control socket */
	int sockets_rc;             /* finding it: 0, or -errno when the control path
				      * cannot be stat()ed or the VMM's socket table read */
	bool listening;             /* when sockets_rc == 0: a socket bound to the control
				      * path's file (device and inode) is listening in the
				      * VMM's network namespace */
	bool control_grace;         /* its control socket was never seen listening and
				      * its startup grace has not ended
				      * (sentinel_control_grace) */
};

/* The rule, in order:
 *   dead       the boot id differs (the host rebooted); the pid is gone, a
 *              zombie, or names a process with another start time; or, with
 *              no pid given, nothing listens on the control path's file;
 *   uncertain  a fact needed could not be read (boot id, the process, the
 *              socket table); or the pid runs as recorded but its control
 *              socket cannot be found (a VMM that binds where we cannot
 *              see: never released on that alone); or the pid runs but its
 *              start time or boot id was not recorded (not proven to be the
 *              claim's VMM) and no control socket vouches for it;
 *   starting   instead of dead or uncertain for the one reason that nothing
 *              listens on the control path (its file may not exist yet),
 *              while control_grace holds: a VMM binds its control socket
 *              after it claims;
 *   unmanaged  neither pid nor control path;
 *   alive      otherwise: the control socket listens, or the pid runs with
 *              the recorded start time and boot id.
 * A live VMM is never dead: a pid that runs with the recorded start time
 * and boot id makes its claim alive or uncertain.  *reason (static) says
 * why. */
enum liveness liveness_verdict(const struct liveness_evidence *ev, const char **reason);

/* ---- the startup grace ------------------------------------------------------- */

/* When a claim was made on CLOCK_BOOTTIME (ns), as first estimated at
 * now_boot_ns / now_wall_ns (CLOCK_BOOTTIME and Unix time, ns): now, less
 * the age its claimed_at says, which counts as 0 when claimed_at is empty,
 * malformed or to come, and at most the time since boot (a claim of this
 * boot is not older than it).  Estimated once, at a claim's first sighting,
 * and kept: the wall clock stepped later does not move it; a sentinel
 * started later finds the same claimed_at, so a restart neither renews the
 * grace nor lets a claimed_at to come extend it beyond one grace from the
 * first sighting.  Tests: test-verdict.c (test_control_grace), on a real
 * mount test-late-bind.sh. */
int64_t sentinel_claim_boot_ns(const char *claimed_at, int64_t now_wall_ns, int64_t now_boot_ns);

/* Whether a claim made at claim_boot_ns is still within a grace of grace_ns
 * at now_boot_ns (all CLOCK_BOOTTIME). */
bool sentinel_control_grace(int64_t claim_boot_ns, int64_t now_boot_ns, int64_t grace_ns);

/* ---- death time -------------------------------------------------------------- */

/* The died_at= a release of a claim whose VMM died names (all canonical
 * RFC 3339, "" when unknown), for the store's init-window rule.  The exit
 * time itself is unknown: the death lies between the last alive verdict
 * (alive_at) and the first dead one (dead_at), which are a poll or
 * reconcile interval apart.  The earliest time it may have died is named,
 * so that a VMM killed in its init window is never judged to have died
 * after it (a VMM that died up to one interval after the window may be
 * judged inside it: a VF that waits at the back of placement until one OK):
 * alive_at; else, for a claim first listed after this sentinel's first
 * listing (watched_from_claim), claimed_at (it was never seen alive);
 * else dead_at (a claim older than this sentinel: nothing is known).
 * Never before claimed_at.  NULL: name none (the store takes the write's
 * time), when the choice or claimed_at is unknown, or claimed_at is after
 * now (a claim whose writer named a time to come). */
const char *sentinel_death_time(const char *claimed_at, const char *alive_at,
				bool watched_from_claim, const char *dead_at, const char *now);

/* ---- detection latency ------------------------------------------------------ */

/* The latency of an answer seen at answered_ns (Unix time, ns) for an
 * assignment claimed at claimed_at (RFC 3339): 0 and *ret_ns (>= 0: a clock
 * stepped back counts as 0), or -EINVAL when claimed_at is "" or malformed. */
int sentinel_latency_ns(const char *claimed_at, int64_t answered_ns, int64_t *ret_ns);

/* The histogram bucket of a latency: the index of the first bound of
 * SENTINEL_LATENCY_BUCKETS (counters.h) it does not exceed, or
 * SENTINEL_LATENCY_BUCKET_COUNT (+Inf). */
size_t sentinel_latency_bucket(int64_t latency_ns);

#endif
