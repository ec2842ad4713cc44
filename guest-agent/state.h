/* SPDX-License-Identifier: MIT */
/*
 * state.h - what the agent answers: UNKNOWN (with why) until something
 * happens, FAILED with the latest matching NVRM line and the rule that
 * matched it, OK once a probe succeeded.  OK is
 * terminal: a later failure line never replaces it (the adapter came up; a
 * line after that is about something the host cannot act on by quarantine).
 * Pure: no I/O, no clock, no locks (the agent is single-threaded).
 */
#ifndef VFHEALTH_AGENT_STATE_H
#define VFHEALTH_AGENT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/client.h"

struct agent_state {
	struct agent_status status;
	uint64_t failure_lines; /* matching lines seen, counted even after OK */
};

void agent_state_init(struct agent_state *s);

/* A matching NVRM line (any length; trimmed and sanitized, at most
 * AGENT_MESSAGE_MAX bytes kept), matched by the built-in rule.  Returns true
 * when the answer changed. */
bool agent_state_on_failure(struct agent_state *s, const char *line, size_t len);
/* The same, matched by the failure rule whose text is `rule`. */
bool agent_state_on_rule_failure(struct agent_state *s, const char *rule, const char *line,
				 size_t len);

/* Why the answer is UNKNOWN (kept while FAILED or OK, sent only with
 * UNKNOWN).  Returns true when it changed. */
bool agent_state_set_reason(struct agent_state *s, enum agent_unknown_reason reason);

/* A probe attempt succeeded (device nodes opened, nvidia-smi -L exited 0).  Returns true when the answer changed. */
bool agent_state_on_probe_success(struct agent_state *s);

#endif
