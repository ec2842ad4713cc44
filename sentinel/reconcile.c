/* SPDX-License-Identifier: MIT */
/*
 * reconcile.c - one reconcile (scheduler thread): every confined claim's
 * VMM judged (verdict.h, evidence from liveness.h); a claim judged dead by
 * two passes in a row, unchanged, is released through the mount; one
 * judged alive again is polled again; uncertain ones are kept and counted;
 * starting ones (a control socket not listening yet, within the startup
 * grace) are kept and not counted uncertain: a VMM that starts is no
 * failure to verify.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "sentinel/sentinel-internal.h"

/* Release c, judged dead twice (release_claim(): that assignment and
 * nothing newer). */
static void release_dead_claim(struct sentinel *s, const struct claim_memory *m,
			       const struct assignment *c, const char *reason)
{
	char now[RFC3339_BUFSZ];

	rfc3339_now(now);
	int r = release_claim(s, c,
			      sentinel_death_time(c->claimed_at, m->alive_at, m->timed, m->dead_at,
						  now));

	if (r == -ESTALE) {
		log_info("vf %s: the claim of %s was released and made again since %s: kept", c->vf,
			 c->instance_id, c->claimed_at);
		return;
	}
	if (r < 0) {
		if (r != -ENOENT)
			log_warn("vf %s: cannot release the stale claim of %s: %s", c->vf,
				 c->instance_id, strerror(-r));
		return;
	}
	atomic_fetch_add(&s->counters->claims_released, 1);
	log_event(LOG_INFO, LOG_EVENT_RELEASED,
		  &(struct log_fields){ .vf = c->vf,
					.instance = c->instance_id,
					.claimed_at = c->claimed_at,
					.reason = reason },
		  "vf %s: released the claim of %s (claimed %s): VMM dead (%s)", c->vf,
		  c->instance_id, c->claimed_at[0] ? c->claimed_at : "-", reason);
}

/* Judge one listed claim c.  A claim the previous pass found dead is
 * re-read first and judged as it is now (same assignment, same pid and
 * control), then released if still dead. */
static void reconcile_claim(struct sentinel *s, struct liveness_pass *pass,
			    const struct assignment *c, struct assignment *fresh)
{
	struct claim_memory *m = claim_memory_find(s, c);
	const struct assignment *judged = c;
	const char *reason;
	enum liveness verdict;
	int r;

	if (m && m->seen_dead) {
		r = read_assignment(s, c->vf, c->instance_id, fresh);
		if (r < 0) {
			if (r != -ENOENT)
				log_debug("vf %s: cannot re-read the claim of %s: %s", c->vf,
					  c->instance_id, strerror(-r));
			return; /* gone, or we cannot tell: the next pass looks again */
		}
		if (strcmp(fresh->claimed_at, c->claimed_at) != 0)
			return; /* another assignment now, with a memory of its own */
		log_debug(
			"vf %s: the claim of %s looked dead at the last reconcile; judging it again",
			c->vf, c->instance_id);
		judged = fresh;
	}
	verdict = judge_claim(s, pass, m, judged, &reason);

	switch (verdict) {
	case LIVENESS_DEAD:
		/* Dead twice in a row: a VMM that claimed its VF a moment
		 * before it bound its control socket is not dead. */
		if (m && m->seen_dead && judged->pid == c->pid &&
		    strcmp(judged->control, c->control) == 0)
			release_dead_claim(s, m, judged, reason);
		else
			mark_dead(m, judged, reason);
		break;
	case LIVENESS_UNCERTAIN:
		atomic_fetch_add(&s->counters->liveness_uncertain, 1);
		note_uncertain(m, judged, reason);
		break;
	case LIVENESS_ALIVE:
		note_alive(m);
		if (m)
			m->uncertain_why = NULL;
		if (m && m->dead) {
			m->dead = false;
			m->dead_at[0] = '\0';
			log_info("vf %s: the VMM of %s (claimed %s) is alive (%s): polled again",
				 c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-",
				 reason);
		}
		break;
	case LIVENESS_STARTING:
		note_starting(s, m, judged);
		break;
	case LIVENESS_UNMANAGED:
		break;
	}
	if (m)
		m->seen_dead = verdict == LIVENESS_DEAD;
}

void run_reconcile(struct sentinel *s)
{
	_cleanup_free_ struct assignment *fresh = NULL;
	struct claim_list claims;
	struct liveness_pass pass;

	if (list_claims(s, &claims) == -ECANCELED) {
		claim_list_free(&claims);
		return;
	}
	claim_memory_update(s, &claims);
	fresh = malloc(sizeof(*fresh));

	liveness_pass_begin(&pass, s->proc_root);
	for (size_t i = 0; fresh && i < claims.count && !atomic_load(&s->stopping_fast); i++)
		if (claim_confined(s, &claims.items[i]))
			reconcile_claim(s, &pass, &claims.items[i], fresh);
	liveness_pass_end(&pass);
	claim_list_free(&claims);
	if (!atomic_load(&s->stopping_fast))
		atomic_fetch_add(&s->counters->reconciles, 1);
	write_metrics_file(s);
}
