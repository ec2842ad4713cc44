/* SPDX-License-Identifier: MIT */
/*
 * poll.c - one poll (scheduler thread): the repair attempt, the listing,
 * how each claim is watched (polled, uncertain, starting, dead, no_agent,
 * no_evidence, unconfined), the targets handed to the worker pool, and
 * then the latencies and the agents' telemetry published into the counters.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "sentinel/sentinel-internal.h"

/* Whether every socket path of c lies in the socket directories, reached
 * without a symlink (common/sockdir.h), checked before anything else looks
 * at them: a claim that does not is neither stat'ed nor polled, only
 * counted (and kept by reconcile as uncertain).  The daemon refuses such
 * writes; this catches claims stored before the directories changed and
 * paths swapped for symlinks since. */
bool claim_confined(struct sentinel *s, const struct assignment *c)
{
	struct endpoint ep;
	const char *key, *path;
	int r;

	r = sockdirs_check_claim(&s->opt.socket_dirs, c->control,
				 c->agent[0] && endpoint_parse(c->agent, &ep) == 0 ? &ep : NULL,
				 &key, &path);
	if (r == 0)
		return true;
	atomic_fetch_add(&s->counters->claims_unconfined, 1);
	log_debug("vf %s: claim of %s skipped: its %s socket path %s", c->vf, c->instance_id, key,
		  r == -EACCES ? "is outside the socket directories or crosses a symlink" :
				 strerror(-r));
	return false;
}

/* This poll's checks (each result, and the telemetry of answers that had
 * some) replace the last poll's (scheduler thread): claims gone drop out. */
static void publish_agents(struct sentinel *s, const struct target *targets, size_t count)
{
	struct sentinel_counters *c = s->counters;
	size_t n = 0;

	atomic_fetch_add(&c->agents_seq, 1); /* odd: being rewritten */
	atomic_thread_fence(memory_order_release);
	for (size_t i = 0; i < count && n < SENTINEL_MAX_TARGETS; i++) {
		const struct target *t = &targets[i];
		if (!t->answered)
			continue;
		struct sentinel_agent_slot *slot = &c->agents[n++];
		memcpy(slot->vf, t->claim.vf, sizeof(slot->vf));
		memcpy(slot->instance_id, t->claim.instance_id, sizeof(slot->instance_id));
		memcpy(slot->claimed_at, t->claim.claimed_at, sizeof(slot->claimed_at));
		slot->result = (uint32_t)t->result;
		slot->telemetry = t->telemetry; /* .present false when it had none */
	}
	atomic_store(&c->agents_count, n);
	atomic_fetch_add(&c->agents_seq, 1); /* even: consistent */
}

/* How this poll watches claim c: whether its agent is dialled, and if not
 * why (sentinel.h, enum sentinel_watch). */
static enum sentinel_watch watch_claim(struct sentinel *s, struct liveness_pass *pass,
				       const struct assignment *c)
{
	struct claim_memory *m;
	const char *reason;
	enum liveness l;

	if (!claim_confined(s, c))
		return SENTINEL_WATCH_UNCONFINED;
	if (!c->agent[0])
		return SENTINEL_WATCH_NO_AGENT;
	m = claim_memory_find(s, c);
	if (m && m->dead)
		return SENTINEL_WATCH_DEAD;
	l = judge_claim(s, pass, m, c, &reason);
	switch (l) {
	case LIVENESS_DEAD:
		mark_dead(m, c, reason);
		return SENTINEL_WATCH_DEAD;
	case LIVENESS_UNMANAGED:
		/* No VMM to judge by, so nothing says the CID is still its:
		 * never dialled. */
		if (!m || !m->noted_no_evidence)
			log_notice("vf %s: the claim of %s names an agent but neither pid= nor "
				   "control=: never polled",
				   c->vf, c->instance_id);
		if (m)
			m->noted_no_evidence = true;
		return SENTINEL_WATCH_NO_EVIDENCE;
	case LIVENESS_UNCERTAIN:
		note_uncertain(m, c, reason);
		return SENTINEL_WATCH_UNCERTAIN;
	case LIVENESS_STARTING:
		note_starting(s, m, c);
		return SENTINEL_WATCH_STARTING;
	case LIVENESS_ALIVE:
		note_alive(m);
		if (m)
			m->uncertain_why = NULL;
		break;
	}
	return SENTINEL_WATCH_POLLED;
}

void run_poll(struct sentinel *s)
{
	_cleanup_free_ struct target *targets = NULL;
	struct claim_list claims;
	struct liveness_pass pass;
	uint64_t watched[SENTINEL_WATCH_COUNT] = { 0 };
	int64_t started = monotonic_ns();
	size_t count = 0;
	bool claims_error;

	repair_if_unavailable(s); /* the one repair attempt of this poll */

	if (list_claims(s, &claims) == -ECANCELED) {
		claim_list_free(&claims);
		return;
	}
	claims_error = claims.error;
	if (claims.error)
		atomic_fetch_add(&s->counters->list_errors, 1);
	claim_memory_update(s, &claims);

	targets = calloc(claims.count ? claims.count : 1, sizeof(*targets));
	if (!targets) {
		claim_list_free(&claims);
		log_warn("sentinel: out of memory for %zu targets", claims.count);
		return;
	}
	liveness_pass_begin(&pass, s->proc_root);
	for (size_t i = 0; i < claims.count; i++) {
		struct target *t = &targets[count];
		enum sentinel_watch w = watch_claim(s, &pass, &claims.items[i]);
		int r;

		watched[w]++;
		if (w != SENTINEL_WATCH_POLLED && w != SENTINEL_WATCH_UNCERTAIN)
			continue;
		r = endpoint_parse(claims.items[i].agent, &t->agent);
		if (r < 0) {
			/* The daemon validated it; count it like any unreachable guest. */
			atomic_fetch_add(&s->counters->checks[CHECK_RPC_ERROR], 1);
			log_warn("vf %s: claim %s names an agent endpoint we cannot parse: %s",
				 claims.items[i].vf, claims.items[i].instance_id, strerror(-r));
			continue;
		}
		t->claim = claims.items[i];
		count++;
	}
	log_debug("sentinel: %zu socket table(s) read for %zu claim(s)", pass.tables_read,
		  claims.count);
	liveness_pass_end(&pass);
	claim_list_free(&claims);
	/* Not after a listing that failed in part: the figures would miss the
	 * claims it could not read. */
	for (int w = 0; !claims_error && w < SENTINEL_WATCH_COUNT; w++)
		atomic_store(&s->counters->claims_watched[w], watched[w]);

	run_scan(s, targets, count);
	if (atomic_load(&s->stopping_fast))
		return;
	observe_latencies(s, targets, count);
	note_reachability(s, targets, count);
	publish_agents(s, targets, count);

	int64_t duration = monotonic_ns() - started;
	atomic_store(&s->counters->last_poll_duration_ns, duration);
	atomic_fetch_add(&s->counters->polls, 1);
	log_debug("sentinel: poll of %zu target(s) took %" PRId64 ".%03" PRId64 " s", count,
		  duration / NSEC_PER_SEC, duration % NSEC_PER_SEC / 1000000);
	write_metrics_file(s);
}
