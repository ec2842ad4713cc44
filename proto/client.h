/* SPDX-License-Identifier: MIT */
/*
 * client.h - the host side of GetGPUInitStatus: one blocking call with a
 * deadline, safe to run from many threads at once (the sentinel runs up to
 * --concurrency of them).  Every step (connect, the hybrid-vsock CONNECT
 * handshake, write, read) is bounded by the one deadline; a peer that
 * trickles bytes, sends a huge length or garbage cannot hold the caller past
 * it or make it allocate more than one frame's budget.
 */
#ifndef VFHEALTH_CLIENT_H
#define VFHEALTH_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/endpoint.h"
#include "common/sockdir.h"

#define AGENT_MESSAGE_MAX 1024 /* failure_message bytes kept; longer is cut */
/* A failure rule's text (the agent's rules file, failure_rule on the wire):
 * longer rules are refused by the agent, longer answers cut by the host. */
#define AGENT_RULE_MAX 200
/* The agent's version in its telemetry: longer is cut by the host. */
#define AGENT_VERSION_MAX 64

enum gpu_init_state {
	GPU_INIT_UNKNOWN = 0,
	GPU_INIT_OK = 1,
	GPU_INIT_FAILED = 2,
};

/* Why an answer is UNKNOWN (guest.proto's UnknownReason), one row each:
 * enum constant, name (--query, the sentinel's metrics label).  The wire
 * value is the row's position. */
#define AGENT_UNKNOWN_REASONS(X)                   \
	X(AGENT_REASON_UNSPECIFIED, "unspecified") \
	X(AGENT_REASON_NO_DEVICE, "no_device")     \
	X(AGENT_REASON_NO_PROBE, "no_probe")       \
	X(AGENT_REASON_PROBING, "probing")         \
	X(AGENT_REASON_BACKING_OFF, "backing_off") \
	X(AGENT_REASON_STOPPED, "stopped")

enum agent_unknown_reason {
#define AGENT_REASON_ENUM(id, name) id,
	AGENT_UNKNOWN_REASONS(AGENT_REASON_ENUM)
#undef AGENT_REASON_ENUM
	AGENT_REASON_COUNT,
};

struct agent_status {
	enum gpu_init_state state;
	enum agent_unknown_reason reason;    /* when UNKNOWN; UNSPECIFIED from old agents */
	char message[AGENT_MESSAGE_MAX + 1]; /* the NVRM line when FAILED, else "" */
	char rule[AGENT_RULE_MAX + 1];       /* the rule that matched when FAILED, else "" */
	struct agent_telemetry {
		bool present;                        /* false from agents older than telemetry */
		char version[AGENT_VERSION_MAX + 1]; /* only [0-9A-Za-z.+~_-] */
		uint64_t kmsg_records_lost; /* sequence gaps (an overrun's loss included) */
		uint64_t kmsg_overruns;     /* reads that found the ring overwritten (EPIPE) */
		uint64_t probe_attempts;
		uint64_t probe_timeouts;
		int32_t probe_last_exit_status; /* -1: no attempt has ended */
	} telemetry;
};

const char *gpu_init_state_name(enum gpu_init_state s); /* "unknown", "ok", "failed" */
/* The row's name; "unspecified" for anything outside the table. */
const char *agent_unknown_reason_name(enum agent_unknown_reason r);

/* Ask the agent at ep for its GPU init state.  timeout_ns bounds the whole
 * call.  cancel_fd, when >= 0, aborts the call with -ECANCELED as soon as it
 * becomes readable (the sentinel's shutdown eventfd).
 *
 * Returns 0 with *ret filled, or:
 *   -EOPNOTSUPP  the agent answered "unimplemented" (an older agent)
 *   -ETIMEDOUT   the deadline passed
 *   -EPROTO      bad handshake, bad frame, garbage, a response of the wrong type
 *   -ECANCELED   cancel_fd fired
 *   other -errno from connect (-ECONNREFUSED, -ENOENT, -ECONNRESET, ...) */
int agent_query(const struct endpoint *ep, int64_t timeout_ns, int cancel_fd,
		struct agent_status *ret);

/* agent_query(), reaching a unix: or hvsock: socket only through the
 * descriptor sockdirs_open(dirs, path) gives (common/sockdir.h), checked at
 * each call: nothing outside dirs is connected to, no symlink below them is
 * followed, and hvsock's CONNECT goes only to a socket inside them.
 * -EACCES (or -ENOENT, -ENOTDIR) from that check; -ENOTSOCK when the path is
 * not a socket.  vsock endpoints are unaffected.  dirs NULL: agent_query(). */
int agent_query_confined(const struct endpoint *ep, const struct sockdirs *dirs, int64_t timeout_ns,
			 int cancel_fd, struct agent_status *ret);

#endif
