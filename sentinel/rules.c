/* SPDX-License-Identifier: MIT */
/* rules.c - the sentinel's pure decisions (rules.h). */
#include "sentinel/rules.h"

#include <errno.h>
#include <string.h>

#include "proto/cleanup.h"

static const char *const check_result_names[CHECK_RESULT_COUNT] = {
	[CHECK_OK] = "ok",
	[CHECK_FAILED] = "failed",
	[CHECK_UNKNOWN] = "unknown",
	[CHECK_RPC_ERROR] = "rpc_error",
	[CHECK_UNSUPPORTED_AGENT] = "unsupported_agent",
};

const char *check_result_name(enum check_result r)
{
	if ((unsigned)r >= CHECK_RESULT_COUNT)
		return "invalid";
	return check_result_names[r];
}

enum check_result sentinel_classify(int query_rc, const struct agent_status *status)
{
	if (query_rc == -EOPNOTSUPP)
		return CHECK_UNSUPPORTED_AGENT;
	if (query_rc != 0 || !status)
		return CHECK_RPC_ERROR;
	switch (status->state) {
	case GPU_INIT_OK:
		return CHECK_OK;
	case GPU_INIT_FAILED:
		return CHECK_FAILED;
	case GPU_INIT_UNKNOWN:
		return CHECK_UNKNOWN;
	}
	/* A state this host does not know: the agent spoke, but not sense. */
	return CHECK_RPC_ERROR;
}

/* ---- revalidate --------------------------------------------------------------- */

bool sentinel_revalidate_needed(const struct assignment *captured)
{
	return captured->claimed_at[0] == '\0';
}

enum revalidate_verdict sentinel_revalidate(const struct assignment *captured, int current_rc,
					    const struct assignment *current)
{
	if (!sentinel_revalidate_needed(captured))
		return REVALIDATE_REPORT;
	if (current_rc == -ENOENT)
		return REVALIDATE_REPORT;
	if (current_rc < 0 || !current)
		return REVALIDATE_DROP;
	if (strcmp(captured->vf, current->vf) != 0)
		return REVALIDATE_DROP;
	if (strcmp(captured->instance_id, current->instance_id) != 0)
		return REVALIDATE_DROP;
	if (strcmp(captured->claimed_at, current->claimed_at) != 0)
		return REVALIDATE_DROP;
	return REVALIDATE_REPORT;
}

/* ---- liveness ----------------------------------------------------------------------- */

static const char *const liveness_names[] = {
	[LIVENESS_ALIVE] = "alive",
	[LIVENESS_DEAD] = "dead",
	[LIVENESS_UNCERTAIN] = "uncertain",
	[LIVENESS_UNMANAGED] = "unmanaged",
};

const char *liveness_name(enum liveness l)
{
	if ((unsigned)l >= ARRAY_SIZE(liveness_names))
		return "invalid";
	return liveness_names[l];
}

static enum liveness judge(const struct liveness_evidence *ev, const char **why)
{
	const bool pid_given = ev->pid > 0;

	/* Dead: one fact no live VMM of this claim could show is enough. */
	if (ev->boot_id_given && ev->boot_rc == 0 && !ev->boot_id_same)
		return *why = "the host booted since the claim", LIVENESS_DEAD;
	if (pid_given && (ev->proc_rc == -ENOENT || ev->proc_rc == -ESRCH))
		return *why = "process gone", LIVENESS_DEAD;
	if (pid_given && ev->proc_rc == 0 && ev->starttime_claimed != 0 &&
	    ev->starttime_now != ev->starttime_claimed)
		return *why = "pid reused by another process (start time differs)", LIVENESS_DEAD;
	if (ev->control_given && ev->sockets_rc == 0 && !ev->listening)
		return *why = "no socket listening on the control path", LIVENESS_DEAD;

	/* Uncertain: a fact we could not read (counts as alive). */
	if (ev->boot_id_given && ev->boot_rc < 0)
		return *why = "the host's boot id cannot be read", LIVENESS_UNCERTAIN;
	if (pid_given && ev->proc_rc < 0)
		return *why = "process cannot be checked", LIVENESS_UNCERTAIN;
	if (ev->control_given && ev->sockets_rc < 0)
		return *why = "socket table cannot be read", LIVENESS_UNCERTAIN;

	if (!pid_given && !ev->control_given)
		return *why = "no pid or control socket recorded", LIVENESS_UNMANAGED;
	if (ev->control_given)
		return *why = "control socket listening", LIVENESS_ALIVE;
	return *why = "process runs", LIVENESS_ALIVE;
}

enum liveness liveness_verdict(const struct liveness_evidence *ev, const char **reason)
{
	const char *why;
	enum liveness l = judge(ev, &why);

	if (reason)
		*reason = why;
	return l;
}
