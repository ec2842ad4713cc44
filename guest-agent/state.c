/* SPDX-License-Identifier: MIT */
/* state.c - the agent's answer.  Contract in state.h. */
#include "guest-agent/state.h"

#include <string.h>

#include "guest-agent/kmsg.h"
#include "proto/frame.h"

void agent_state_init(struct agent_state *s)
{
	memset(s, 0, sizeof(*s));
	s->status.state = GPU_INIT_UNKNOWN;
}

bool agent_state_on_failure(struct agent_state *s, const char *line, size_t len)
{
	return agent_state_on_rule_failure(s, KMSG_BUILTIN_RULE, line, len);
}

bool agent_state_on_rule_failure(struct agent_state *s, const char *rule, const char *line,
				 size_t len)
{
	char message[AGENT_MESSAGE_MAX + 1];

	s->failure_lines++;
	if (s->status.state == GPU_INIT_OK)
		return false;
	kmsg_trim(&line, &len);
	wire_sanitize_message(line, len, message);
	if (s->status.state == GPU_INIT_FAILED && strcmp(message, s->status.message) == 0)
		return false;
	s->status.state = GPU_INIT_FAILED;
	memcpy(s->status.message, message, sizeof(message));
	wire_sanitize_rule(rule, strlen(rule), s->status.rule);
	return true;
}

bool agent_state_set_reason(struct agent_state *s, enum agent_unknown_reason reason)
{
	if (s->status.reason == reason)
		return false;
	s->status.reason = reason;
	return true;
}

bool agent_state_on_probe_success(struct agent_state *s)
{
	if (s->status.state == GPU_INIT_OK)
		return false;
	s->status.state = GPU_INIT_OK;
	s->status.message[0] = '\0';
	s->status.rule[0] = '\0';
	return true;
}
