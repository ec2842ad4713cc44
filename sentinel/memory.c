/* SPDX-License-Identifier: MIT */
/*
 * memory.c - what the sentinel remembers about each claim across passes
 * (struct claim_memory): judged dead, found dead by the last reconcile,
 * the last uncertain reason warned about, whether its first answers were
 * timed.  A sorted array, rebuilt from every listing; it belongs to the
 * scheduler thread alone (polls and reconciles both run there), so it
 * takes no lock.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "sentinel/sentinel-internal.h"

/* CLOCK_BOOTTIME: monotonic, and it counts a suspended host's sleep, as the
 * wall clock that stamped claimed_at does. */
static int64_t boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static int claim_memory_cmp(const void *a_, const void *b_)
{
	const struct claim_memory *a = a_, *b = b_;
	int r;

	if ((r = strcmp(a->vf, b->vf)))
		return r;
	if ((r = strcmp(a->instance_id, b->instance_id)))
		return r;
	return strcmp(a->claimed_at, b->claimed_at);
}

static void claim_memory_key(const struct assignment *c, struct claim_memory *key)
{
	memset(key, 0, sizeof(*key));
	memcpy(key->vf, c->vf, sizeof(key->vf));
	memcpy(key->instance_id, c->instance_id, sizeof(key->instance_id));
	memcpy(key->claimed_at, c->claimed_at, sizeof(key->claimed_at));
}

struct claim_memory *claim_memory_find(struct sentinel *s, const struct assignment *c)
{
	struct claim_memory key;

	if (!s->memory)
		return NULL;
	claim_memory_key(c, &key);
	return bsearch(&key, s->memory, s->memory_count, sizeof(key), claim_memory_cmp);
}

/* Carry each listed claim's memory (dead, seen_dead) over to the next scan.
 * Claims no longer listed are forgotten, unless the listing was incomplete. */
void claim_memory_update(struct sentinel *s, const struct claim_list *l)
{
	_cleanup_free_ struct claim_memory *next = NULL;
	size_t count = 0, capacity = l->count + (l->error ? s->memory_count : 0);

	if (capacity == 0) {
		free(s->memory);
		s->memory = NULL;
		s->memory_count = 0;
		return;
	}
	next = calloc(capacity, sizeof(*next));
	if (!next)
		return; /* keep the old memory; the next scan tries again */
	for (size_t i = 0; i < l->count; i++) {
		const struct assignment *c = &l->items[i];
		struct claim_memory *old = claim_memory_find(s, c);
		struct claim_memory *m = &next[count++];

		if (old) {
			*m = *old;
		} else {
			claim_memory_key(c, m);
			m->timed = s->listed_once;
			m->claim_boot_ns = sentinel_claim_boot_ns(c->claimed_at, realtime_ns(),
								  boottime_ns());
		}
	}
	if (l->error)
		for (size_t i = 0; i < s->memory_count; i++)
			next[count++] = s->memory[i];
	qsort(next, count, sizeof(*next), claim_memory_cmp);
	/* Duplicates come only from merging an incomplete listing: keep the first. */
	size_t unique = 0;
	for (size_t i = 0; i < count; i++)
		if (unique == 0 || claim_memory_cmp(&next[unique - 1], &next[i]) != 0)
			next[unique++] = next[i];
	free(s->memory);
	s->memory = next;
	next = NULL;
	s->memory_count = unique;
	s->listed_once = true;
}

enum liveness judge_claim(struct sentinel *s, struct liveness_pass *pass, struct claim_memory *m,
			  const struct assignment *c, const char **reason)
{
	struct liveness_evidence ev;
	int64_t now = boottime_ns();

	liveness_gather(pass, c, &ev);
	if (ev.control_given && ev.sockets_rc == 0 && ev.listening && m)
		m->control_seen = true;
	ev.control_grace = !(m && m->control_seen) &&
			   sentinel_control_grace(m ? m->claim_boot_ns :
						      sentinel_claim_boot_ns(c->claimed_at,
									     realtime_ns(), now),
						  now, s->opt.control_grace_ns);
	return liveness_verdict(&ev, reason);
}

void note_starting(const struct sentinel *s, struct claim_memory *m, const struct assignment *c)
{
	if (m && m->noted_starting)
		return;
	log_info("vf %s: the control socket of %s (claimed %s) is not listening yet: kept, not "
		 "polled, until it listens or the startup grace of %g s after the claim is over "
		 "(--control-grace)",
		 c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-",
		 (double)s->opt.control_grace_ns / NSEC_PER_SEC);
	if (m)
		m->noted_starting = true;
}

/* The first failed and the first ok answer of each timed assignment, into
 * the detection latency histograms (scheduler thread, after a scan). */
void observe_latencies(struct sentinel *s, const struct target *targets, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct target *t = &targets[i];
		struct claim_memory *m;
		enum sentinel_latency_kind kind;
		bool *seen;
		int64_t ns;

		if (!t->answered || (t->result != CHECK_FAILED && t->result != CHECK_OK))
			continue;
		m = claim_memory_find(s, &t->claim);
		if (!m || !m->timed)
			continue;
		kind = t->result == CHECK_FAILED ? SENTINEL_LATENCY_FAILED : SENTINEL_LATENCY_OK;
		seen = kind == SENTINEL_LATENCY_FAILED ? &m->seen_failed : &m->seen_ok;
		if (*seen)
			continue;
		*seen = true;
		if (sentinel_latency_ns(t->claim.claimed_at, t->answered_ns, &ns) < 0)
			continue; /* no claimed_at: nothing to time from */
		atomic_fetch_add(&s->counters->latency[kind].buckets[sentinel_latency_bucket(ns)],
				 1);
		atomic_fetch_add(&s->counters->latency[kind].sum_ns, (uint64_t)ns);
		atomic_fetch_add(&s->counters->latency[kind].count, 1);
	}
}

void note_reachability(struct sentinel *s, const struct target *targets, size_t count)
{
	int64_t now = monotonic_ns();

	for (size_t i = 0; i < count; i++) {
		const struct target *t = &targets[i];
		const struct assignment *c = &t->claim;
		struct log_fields f = { .vf = c->vf,
					.instance = c->instance_id,
					.claimed_at = c->claimed_at };
		struct claim_memory *m;

		if (!t->answered || !(m = claim_memory_find(s, c)))
			continue;
		switch (t->result) {
		case CHECK_RPC_ERROR:
		case CHECK_UNKNOWN:
			break;
		case CHECK_OK:
		case CHECK_FAILED:
			if (m->unreachable_why) {
				f.result = check_result_name(t->result);
				log_event(LOG_NOTICE, LOG_EVENT_AGENT_ANSWERING, &f,
					  "vf %s: the agent of %s (claimed %s) answers again: %s",
					  c->vf, c->instance_id,
					  c->claimed_at[0] ? c->claimed_at : "-",
					  check_result_name(t->result));
			}
			m->unanswered_since_ns = 0;
			m->unreachable_why = NULL;
			continue;
		default:
			continue; /* unsupported_agent: counted, neither answer nor silence */
		}
		if (!m->unanswered_since_ns)
			m->unanswered_since_ns = now;
		if (now - m->unanswered_since_ns < s->opt.agent_grace_ns)
			continue;
		if (m->unreachable_why && m->unreachable_result == t->result &&
		    strcmp(m->unreachable_why, t->why ? t->why : "") == 0)
			continue;
		m->unreachable_result = t->result;
		/* static text (agent_unknown_reason_name, strerror's table) */
		m->unreachable_why = t->why ? t->why : "";
		f.result = check_result_name(t->result);
		f.reason = m->unreachable_why;
		log_event(LOG_WARNING, LOG_EVENT_AGENT_UNREACHABLE, &f,
			  "vf %s: the agent of %s (claimed %s) has not answered for %" PRId64
			  " s: %s (%s); its VF's health is not known",
			  c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-",
			  (now - m->unanswered_since_ns) / NSEC_PER_SEC,
			  check_result_name(t->result), m->unreachable_why);
	}
}

/* The first dead verdict on a claim: from now on it is not polled (its
 * vsock CID may belong to another guest by now). */
void mark_dead(struct claim_memory *m, const struct assignment *c, const char *reason)
{
	if (!m || m->dead)
		return;
	m->dead = true;
	rfc3339_now(m->dead_at);
	log_event(LOG_INFO, LOG_EVENT_VMM_DEAD,
		  &(struct log_fields){ .vf = c->vf,
					.instance = c->instance_id,
					.claimed_at = c->claimed_at,
					.reason = reason },
		  "vf %s: the VMM of %s (claimed %s) looks dead (%s): no longer polled; released "
		  "when the next reconcile finds it dead too",
		  c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-", reason);
}

void note_alive(struct claim_memory *m)
{
	if (m)
		rfc3339_now(m->alive_at);
}

/* A claim judged uncertain: warned once per change of reason (a claim of a
 * VMM that binds its control socket where we cannot see would warn every
 * pass otherwise); counted by the caller. */
void note_uncertain(struct claim_memory *m, const struct assignment *c, const char *reason)
{
	if (m && m->uncertain_why == reason)
		return;
	log_warn("vf %s: keeping the claim of %s (claimed %s): %s (pid %" PRId64 ", control %s)",
		 c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-", reason, c->pid,
		 c->control[0] ? c->control : "-");
	if (m)
		m->uncertain_why = reason;
}
