/* SPDX-License-Identifier: MIT */
/* verdict.c - the sentinel's pure judgements (verdict.h). */
#include "sentinel/verdict.h"

#include <errno.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/parse.h"

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

bool sentinel_revalidate_needed(const struct assignment *captured, enum check_result result)
{
	return result == CHECK_OK || captured->claimed_at[0] == '\0';
}

static bool same_assignment(const struct assignment *a, const struct assignment *b)
{
	return strcmp(a->vf, b->vf) == 0 && strcmp(a->instance_id, b->instance_id) == 0 &&
	       strcmp(a->claimed_at, b->claimed_at) == 0;
}

enum revalidate_verdict sentinel_revalidate(const struct assignment *captured,
					    enum check_result result, int current_rc,
					    const struct assignment *current)
{
	if (!sentinel_revalidate_needed(captured, result))
		return REVALIDATE_REPORT;
	if (result == CHECK_OK)
		return current_rc == 0 && current && same_assignment(captured, current) ?
			       REVALIDATE_REPORT :
			       REVALIDATE_DROP;
	if (current_rc == -ENOENT)
		return REVALIDATE_REPORT;
	if (current_rc < 0 || !current)
		return REVALIDATE_DROP;
	return same_assignment(captured, current) ? REVALIDATE_REPORT : REVALIDATE_DROP;
}

/* ---- liveness ----------------------------------------------------------------------- */

static const char *const liveness_names[] = {
	[LIVENESS_ALIVE] = "alive",         [LIVENESS_DEAD] = "dead",
	[LIVENESS_UNCERTAIN] = "uncertain", [LIVENESS_UNMANAGED] = "unmanaged",
	[LIVENESS_STARTING] = "starting",
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
	const bool boot_known = ev->boot_id_given && ev->boot_rc == 0;

	/* Dead: one fact no live VMM of this claim could show is enough. */
	if (boot_known && !ev->boot_id_same)
		return *why = "the host booted since the claim", LIVENESS_DEAD;
	if (pid_given && (ev->proc_rc == -ENOENT || ev->proc_rc == -ESRCH))
		return *why = "process gone", LIVENESS_DEAD;
	if (pid_given && ev->proc_rc == 0 && ev->ended)
		return *why = "process ended (a zombie)", LIVENESS_DEAD;
	if (pid_given && ev->proc_rc == 0 && ev->starttime_claimed != 0 &&
	    ev->starttime_now != ev->starttime_claimed)
		return *why = "pid reused by another process (start time differs)", LIVENESS_DEAD;

	/* Uncertain: a fact we could not read (counts as alive). */
	if (ev->boot_id_given && ev->boot_rc < 0)
		return *why = "the host's boot id cannot be read", LIVENESS_UNCERTAIN;
	if (pid_given && ev->proc_rc < 0)
		return *why = "process cannot be checked", LIVENESS_UNCERTAIN;

	if (ev->control_given && ev->sockets_rc == 0 && ev->listening)
		return *why = "control socket listening", LIVENESS_ALIVE;
	if (!pid_given) {
		if (!ev->control_given)
			return *why = "no pid or control socket recorded", LIVENESS_UNMANAGED;
		if (ev->sockets_rc < 0)
			return *why = "control socket cannot be checked", LIVENESS_UNCERTAIN;
		if (ev->control_grace)
			return *why = "control socket not listening yet", LIVENESS_STARTING;
		return *why = "no socket listening on the control path", LIVENESS_DEAD;
	}
	/* The pid runs and is not a zombie: never dead from here on. */
	if (ev->starttime_claimed == 0 || !ev->boot_id_given)
		return *why = "process runs, but its start time or boot id was not recorded",
		       LIVENESS_UNCERTAIN;
	if (ev->control_given && ev->sockets_rc == 0 && ev->control_grace)
		return *why = "process runs; its control socket not listening yet",
		       LIVENESS_STARTING;
	if (ev->control_given)
		return *why = ev->sockets_rc < 0 ? "process runs; its control socket cannot be "
						   "checked" :
						   "process runs, but no socket listens on its "
						   "control path",
		       LIVENESS_UNCERTAIN;
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

/* ---- the startup grace ------------------------------------------------------- */

int64_t sentinel_claim_boot_ns(const char *claimed_at, int64_t now_wall_ns, int64_t now_boot_ns)
{
	int64_t age;

	if (sentinel_latency_ns(claimed_at, now_wall_ns, &age) < 0)
		age = 0;
	if (now_boot_ns < 0)
		now_boot_ns = 0;
	return now_boot_ns - (age < now_boot_ns ? age : now_boot_ns);
}

bool sentinel_control_grace(int64_t claim_boot_ns, int64_t now_boot_ns, int64_t grace_ns)
{
	return now_boot_ns - claim_boot_ns < grace_ns;
}

/* ---- detection latency ------------------------------------------------------ */

int sentinel_latency_ns(const char *claimed_at, int64_t answered_ns, int64_t *ret_ns)
{
	int64_t claimed_ns;

	if (rfc3339_to_ns(claimed_at, &claimed_ns) < 0)
		return -EINVAL;
	*ret_ns = answered_ns > claimed_ns ? answered_ns - claimed_ns : 0;
	return 0;
}

size_t sentinel_latency_bucket(int64_t latency_ns)
{
#define LATENCY_BOUND(le) (int64_t)(le) * NSEC_PER_SEC,
	static const int64_t bounds_ns[] = { SENTINEL_LATENCY_BUCKETS(LATENCY_BOUND) };
#undef LATENCY_BOUND
	size_t i = 0;

	_Static_assert(sizeof(bounds_ns) / sizeof(bounds_ns[0]) == SENTINEL_LATENCY_BUCKET_COUNT,
		       "one bound per bucket");
	while (i < SENTINEL_LATENCY_BUCKET_COUNT && latency_ns > bounds_ns[i])
		i++;
	return i;
}

const char *sentinel_death_time(const char *claimed_at, const char *alive_at,
				bool watched_from_claim, const char *dead_at, const char *now)
{
	const char *t = alive_at[0] ? alive_at : watched_from_claim ? claimed_at : dead_at;

	/* canonical: text order is time order */
	if (!claimed_at[0] || !t[0] || strcmp(claimed_at, now) > 0)
		return NULL;
	if (strcmp(t, claimed_at) < 0)
		t = claimed_at;
	return strcmp(t, now) > 0 ? now : t;
}
