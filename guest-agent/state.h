/* SPDX-License-Identifier: MIT */
/*
 * state.h - what the agent answers: UNKNOWN until something happens, FAILED
 * with the latest matching NVRM line, OK once a probe succeeded.  OK is
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
 * AGENT_MESSAGE_MAX bytes kept).  Returns true when the answer changed. */
bool agent_state_on_failure(struct agent_state *s, const char *line, size_t len);

/* nvidia-smi -L exited 0.  Returns true when the answer changed. */
bool agent_state_on_probe_success(struct agent_state *s);

#endif
