/* SPDX-License-Identifier: MIT */
/*
 * status.h - what an agent answers, in memory: its states, the reasons an
 * answer is UNKNOWN, the limits on what it sends and the names they go by.
 * No protobuf here (libvfproto-status): vfhealthd renders the sentinel's
 * counters, which name these, and links no protobuf-c
 * (tests/ops/daemon-links.sh).
 */
#ifndef VFHEALTH_PROTO_STATUS_H
#define VFHEALTH_PROTO_STATUS_H

#include <stdbool.h>
#include <stdint.h>

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

/* Copy at most AGENT_VERSION_MAX bytes of in into out, each byte outside
 * [0-9A-Za-z.+~_-] replaced by '_': a version fit for a metric label. */
void wire_sanitize_version(const char *in, char out[static AGENT_VERSION_MAX + 1]);

#endif
