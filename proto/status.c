/* SPDX-License-Identifier: MIT */
/* status.c - the names of an agent's answers.  Contract in status.h. */
#include "proto/status.h"

#include <string.h>

#include "common/cleanup.h"

const char *agent_unknown_reason_name(enum agent_unknown_reason r)
{
	static const char *const names[] = {
#define AGENT_REASON_NAME(id, name) [id] = name,
		AGENT_UNKNOWN_REASONS(AGENT_REASON_NAME)
#undef AGENT_REASON_NAME
	};

	return (unsigned)r < ARRAY_SIZE(names) ? names[r] : names[AGENT_REASON_UNSPECIFIED];
}

const char *gpu_init_state_name(enum gpu_init_state s)
{
	switch (s) {
	case GPU_INIT_OK:
		return "ok";
	case GPU_INIT_FAILED:
		return "failed";
	case GPU_INIT_UNKNOWN:
	default:
		return "unknown";
	}
}

void wire_sanitize_version(const char *in, char out[static AGENT_VERSION_MAX + 1])
{
	size_t n = 0;

	for (; in && in[n] && n < AGENT_VERSION_MAX; n++) {
		char c = in[n];
		out[n] = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
					 (c >= 'a' && c <= 'z') || strchr(".+~_-", c) ?
				 c :
				 '_';
	}
	out[n] = '\0';
}
