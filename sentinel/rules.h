/* SPDX-License-Identifier: MIT */
/*
 * rules.h - the sentinel's decisions as pure functions, so that each rule has
 * a unit test that would fail if the rule were wrong (tests/sentinel/).
 *
 *  classify      agent_query()'s return code and answer -> one check result;
 *  assignment    the text of <vf>/assignments/<id> -> a claim;
 *  revalidate    the claim captured when a poll started vs. the VF's claim
 *                re-read just before reporting -> report or drop;
 *  report        the one-line command written to <vf>/report, and the
 *                outcome read back from it;
 *  liveness      the evidence about a claim's VMM -> dead / alive / uncertain.
 *
 * Nothing here does I/O except sentinel_proc_starttime() and
 * sentinel_control_state(), which gather liveness evidence and take every
 * path as a parameter so tests can point them at a fake tree.
 * Conventions: 0 or -errno; outputs are written only on success.
 */
#ifndef VFHEALTH_SENTINEL_RULES_H
#define VFHEALTH_SENTINEL_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/client.h"
#include "proto/parse.h"

/* ---- limits on what the file interface hands us ------------------------- */

#define SENTINEL_VF_BUFSZ 13          /* "0000:41:00.4" + NUL */
/* The file interface accepts endpoints and control paths that fit a
 * sockaddr_un (108 bytes) plus a prefix; these bounds keep a claim small
 * enough that the largest listing (SENTINEL_MAX_TARGETS claims) stays in tens
 * of MiB. */
#define SENTINEL_AGENT_MAX 255        /* agent endpoint string, bytes */
#define SENTINEL_CONTROL_MAX 255      /* control socket path, bytes */
#define SENTINEL_ASSIGNMENT_MAX 4096  /* an assignment file larger than this is refused */
#define SENTINEL_MESSAGE_MAX 1024     /* NVRM message bytes put into a report */
/* "failed " + id + " " + timestamp + " " + message + NUL */
#define SENTINEL_REPORT_MAX (7 + INSTANCE_ID_MAX + 1 + RFC3339_NANO_LEN + 1 + SENTINEL_MESSAGE_MAX + 1)
#define SENTINEL_OUTCOME_MAX 256      /* what we read back from <vf>/report */

/* ---- classify ------------------------------------------------------------ */

enum check_result {
	CHECK_OK,
	CHECK_FAILED,
	CHECK_UNKNOWN,
	CHECK_RPC_ERROR,         /* connect, handshake, timeout, framing, garbage */
	CHECK_UNSUPPORTED_AGENT, /* the agent answered "unimplemented" */
	CHECK_LIST_ERROR,        /* listing the assignments failed (counted per poll) */
	CHECK_RESULT_COUNT,
};

/* "ok", "failed", "unknown", "rpc_error", "unsupported_agent", "list_error" */
const char *check_result_name(enum check_result r);

/* query_rc and status as agent_query() returned them.  -EOPNOTSUPP is an old
 * agent; every other error, and an answer with a state outside the enum, is
 * rpc_error (a guest we cannot read is not a guest we may judge). */
enum check_result sentinel_classify(int query_rc, const struct agent_status *status);

/* ---- assignments ---------------------------------------------------------- */

bool sentinel_vf_address_valid(const char *s); /* ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ */

struct assignment {
	char vf[SENTINEL_VF_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ];          /* canonical, "" when unset */
	char agent[SENTINEL_AGENT_MAX + 1];      /* "" when unset */
	char control[SENTINEL_CONTROL_MAX + 1];  /* "" when unset */
	int64_t pid;                             /* 0 when unset */
	uint64_t pid_starttime;                  /* 0 unless the file shows pid_starttime= */
};

/* Parse the content of <vf>/assignments/<instance_id> (key=value lines:
 * claimed_at, agent, control, pid, and optionally pid_starttime; keys this
 * version does not know are ignored so a newer daemon can add some).
 * vf and instance_id come from the path and are validated.  -EINVAL for a
 * bad vf/instance, a line without '=', a repeated key, a malformed value;
 * -E2BIG when len exceeds SENTINEL_ASSIGNMENT_MAX or a value its limit. */
int assignment_parse(const char *vf, const char *instance_id, const char *text, size_t len,
		     struct assignment *ret);

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

/* ---- report commands -------------------------------------------------------- */

/* "failed INSTANCE CLAIMED_AT MESSAGE" ("-" for an empty claimed_at).  The
 * message is cut to SENTINEL_MESSAGE_MAX bytes (never inside a UTF-8
 * sequence), control characters (a newline would end the command) become
 * spaces and trailing spaces are dropped.  Returns the length, or -EINVAL for
 * a bad instance id / claimed_at, -ENOBUFS when size is too small. */
int report_format_failed(char *buf, size_t size, const char *instance_id, const char *claimed_at,
			 const char *message);
/* "ok INSTANCE CLAIMED_AT". */
int report_format_ok(char *buf, size_t size, const char *instance_id, const char *claimed_at);

enum report_kind {
	REPORT_RECORDED,
	REPORT_QUARANTINED,
	REPORT_UNCHANGED,
	REPORT_CLEARED, /* the answer to an ok report */
};

struct report_outcome {
	enum report_kind kind;
	unsigned failures;     /* failed reports: the tally after the report */
	unsigned threshold;
	bool breaker_engaged;  /* the breaker held a quarantine back */
	unsigned cleared;      /* ok reports */
	bool rescinded;
};

/* Parse what <vf>/report reads back after a write:
 *   "recorded failures=N threshold=M[ breaker=engaged]\n", "quarantined ...",
 *   "unchanged ...", "cleared=N rescinded=0|1\n".  -EINVAL otherwise. */
int report_outcome_parse(const char *text, size_t len, struct report_outcome *ret);

/* ---- liveness ----------------------------------------------------------------- */

enum liveness {
	LIVENESS_ALIVE,     /* keep */
	LIVENESS_DEAD,      /* release: the VMM is certainly gone */
	LIVENESS_UNCERTAIN, /* keep, warn, count vfhealth_liveness_uncertain_total */
	LIVENESS_UNMANAGED, /* no control path: nothing to judge by, keep silently */
};

const char *liveness_name(enum liveness l);

struct liveness_evidence {
	bool control_given;          /* the claim names a control socket */
	int control_rc;              /* sentinel_control_state(): 0, -ENOENT or another -errno */
	int64_t pid;                 /* 0: none given */
	int proc_rc;                 /* sentinel_proc_starttime() on pid: 0, -ENOENT, other */
	uint64_t starttime_now;      /* when proc_rc == 0 */
	uint64_t starttime_claimed;  /* recorded at claim time (or first sight), 0 unknown */
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

/* Field 22 (starttime, clock ticks since boot) of PROC_ROOT/PID/stat.
 * -ENOENT (or -ESRCH) when the process does not exist; -EBADMSG when the
 * file cannot be parsed; another -errno when it cannot be read. */
int sentinel_proc_starttime(const char *proc_root, int64_t pid, uint64_t *ret);

/* Parse the text of a /proc/PID/stat file (comm may contain spaces and
 * parentheses: fields are counted after the last ')'). -EBADMSG. */
int proc_stat_parse_starttime(const char *text, size_t len, uint64_t *ret);

#endif
