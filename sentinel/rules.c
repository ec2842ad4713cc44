/* SPDX-License-Identifier: MIT */
/* rules.c - the sentinel's pure decisions (rules.h). */
#include "sentinel/rules.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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

enum revalidate_verdict sentinel_revalidate(const struct assignment *captured, int current_rc,
					    const struct assignment *current)
{
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

enum liveness liveness_verdict(const struct liveness_evidence *ev, const char **reason)
{
	const char *why;
	enum liveness l;

	if (!ev->control_given) {
		l = LIVENESS_UNMANAGED;
		why = "no control socket recorded";
	} else if (ev->control_rc == 0) {
		l = LIVENESS_ALIVE;
		why = "control socket exists";
	} else if (ev->control_rc != -ENOENT) {
		l = LIVENESS_UNCERTAIN;
		why = "control socket path cannot be checked";
	} else if (ev->pid <= 0) {
		l = LIVENESS_DEAD;
		why = "control socket gone, no pid recorded";
	} else if (ev->proc_rc == -ENOENT || ev->proc_rc == -ESRCH) {
		l = LIVENESS_DEAD;
		why = "control socket gone, process gone";
	} else if (ev->proc_rc < 0) {
		l = LIVENESS_UNCERTAIN;
		why = "control socket gone, process cannot be checked";
	} else if (ev->starttime_claimed != 0 && ev->starttime_now != ev->starttime_claimed) {
		l = LIVENESS_DEAD;
		why = "control socket gone, pid reused by another process";
	} else {
		l = LIVENESS_ALIVE;
		why = "control socket gone but the process runs";
	}
	if (reason)
		*reason = why;
	return l;
}

int sentinel_control_state(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0)
		return 0;
	if (errno == ENOENT || errno == ENOTDIR)
		return -ENOENT;
	return negative_errno();
}
