/* SPDX-License-Identifier: MIT */
/*
 * rules.h - the sentinel's decisions as pure functions, so that each rule has
 * a unit test that would fail if the rule were wrong (tests/sentinel/).
 *
 *  classify      agent_query()'s return code and answer -> one check result;
 *  revalidate    the claim captured when a poll started vs. the VF's claim
 *                re-read just before reporting -> report or drop;
 *  liveness      the evidence about a claim's VMM -> dead / alive / uncertain.
 *
 * The file interface's grammar (assignment files, report commands and their
 * outcomes, VF addresses, limits) is grammar/'s, shared with the daemon.
 * Nothing here does I/O except sentinel_control_state(), which gathers
 * liveness evidence (with proc_pid_starttime() of proto/procfs.h).
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
	REVALIDATE_REPORT, /* the answer still belongs to the captured assignment */
	REVALIDATE_DROP,   /* the VF changed hands (or we cannot tell): say nothing */
};

/* captured: the claim the poll queried.  current_rc/current: the VF's claim
 * re-read just before reporting: -ENOENT when the VF has no live claim (it was
 * released during the poll: the answer is still about the captured
 * assignment, so report it), 0 with current filled, or another -errno (we
 * cannot tell: drop, the next poll retries).  A live claim by another
 * instance, or by the same instance with another claimed_at (released and
 * re-claimed), drops the report. */
enum revalidate_verdict sentinel_revalidate(const struct assignment *captured, int current_rc,
					    const struct assignment *current);

/* ---- liveness ----------------------------------------------------------------- */

enum liveness {
	LIVENESS_ALIVE,     /* keep */
	LIVENESS_DEAD,      /* release: the VMM is certainly gone */
	LIVENESS_UNCERTAIN, /* keep, warn, count vfhealth_sentinel_liveness_uncertain_total */
	LIVENESS_UNMANAGED, /* no control path: nothing to judge by, keep silently */
};

const char *liveness_name(enum liveness l);

struct liveness_evidence {
	bool control_given;          /* the claim names a control socket */
	int control_rc;              /* sentinel_control_state(): 0, -ENOENT or another -errno */
	int64_t pid;                 /* 0: none given */
	int proc_rc;                 /* proc_pid_starttime() on pid: 0, -ENOENT, other */
	uint64_t starttime_now;      /* when proc_rc == 0 */
	uint64_t starttime_claimed;  /* the claim's pid_starttime=, 0 unknown */
};

/* Dead: the control path is gone and (no pid, or the pid is gone, or it now
 * names a process with another start time).  Alive: the control path exists,
 * or the pid exists with the recorded start time (or none was recorded).
 * Anything we could not read is uncertain.  *reason (static) says why. */
enum liveness liveness_verdict(const struct liveness_evidence *ev, const char **reason);

/* stat(2) the control path: 0 when it exists, -ENOENT when it certainly does
 * not (ENOENT, or ENOTDIR: a path component is not a directory), any other
 * -errno (EACCES, ELOOP, EIO, ...) when we cannot tell. */
int sentinel_control_state(const char *path);

#endif
