/* SPDX-License-Identifier: MIT */
/*
 * worker.c - the worker pool: the scheduler publishes a scan's targets
 * under scan_lock, each worker takes the next index, checks that target
 * (one agent query, its classification, a re-read of the claim when the
 * answer needs one, the report) and takes the next.  So N unreachable
 * guests cost ceil(N / concurrency) deadlines, never N.  The threads, the
 * lock and the stop are sentinel.c's design notes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "sentinel/sentinel-internal.h"

/* One target: ask its agent, count the answer, re-read the claim when the
 * answer needs it (verdict.h), report. */
static void check_target(struct sentinel *s, struct target *t)
{
	struct agent_status status = { 0 };
	_cleanup_free_ struct assignment *current = NULL;
	enum check_result result;
	int rc;

	/* Checked again at the connect itself (common/sockdir.h): a socket
	 * swapped for a symlink since the listing is not followed. */
	rc = agent_query_confined(&t->agent, &s->opt.socket_dirs, s->opt.poll_timeout_ns,
				  s->cancel_fd, &status);
	if (rc == -ECANCELED || atomic_load(&s->stopping_fast))
		return; /* shutting down: neither counted nor reported */
	result = sentinel_classify(rc, &status);
	t->result = result;
	if (result == CHECK_RPC_ERROR)
		t->why = rc < 0 && strerrordesc_np(-rc) ? strerrordesc_np(-rc) :
							  "an answer outside the protocol";
	else if (result == CHECK_UNKNOWN)
		t->why = agent_unknown_reason_name(status.reason);
	t->answered_ns = realtime_ns();
	t->answered = true;
	if (rc == 0)
		t->telemetry = status.telemetry;
	atomic_fetch_add(&s->counters->checks[result], 1);
	if (result == CHECK_UNKNOWN) {
		unsigned why = (unsigned)status.reason; /* the client keeps it in the table */

		atomic_fetch_add(&s->counters->unknown[why < AGENT_REASON_COUNT ? why : 0], 1);
	}
	switch (result) {
	case CHECK_OK:
	case CHECK_FAILED:
		break;
	case CHECK_RPC_ERROR:
		log_debug("vf %s: agent %s of %s: %s", t->claim.vf, t->claim.agent,
			  t->claim.instance_id, rc < 0 ? strerror(-rc) : "unknown state");
		return;
	case CHECK_UNSUPPORTED_AGENT:
		log_debug("vf %s: agent %s of %s does not implement GetGPUInitStatus", t->claim.vf,
			  t->claim.agent, t->claim.instance_id);
		return;
	default:
		return;
	}

	/* The report names the assignment asked about; an OK only while that
	 * assignment still holds the VF (verdict.h says why). */
	if (sentinel_revalidate_needed(&t->claim, result)) {
		current = malloc(sizeof(*current));
		if (!current)
			return;
		rc = result == CHECK_OK ?
			     read_assignment(s, t->claim.vf, t->claim.instance_id, current) :
			     read_current_claim(s, t->claim.vf, t->claim.instance_id, current);
	}
	if (sentinel_revalidate(&t->claim, result, rc, current) == REVALIDATE_DROP) {
		atomic_fetch_add(&s->counters->reports_dropped, 1);
		if (rc == -ENOENT)
			log_info("vf %s: the claim of %s (claimed %s) was released during the poll; "
				 "%s answer dropped",
				 t->claim.vf, t->claim.instance_id,
				 t->claim.claimed_at[0] ? t->claim.claimed_at : "-",
				 check_result_name(result));
		else if (rc < 0)
			/* EIO while the store is unavailable, typically: the next poll asks again. */
			log_info("vf %s: cannot re-read the claim of %s: %s; %s answer dropped",
				 t->claim.vf, t->claim.instance_id, strerror(-rc),
				 check_result_name(result));
		else
			log_info("vf %s: claim changed during the poll (was %s claimed %s, now %s "
				 "claimed %s); %s answer dropped",
				 t->claim.vf, t->claim.instance_id,
				 t->claim.claimed_at[0] ? t->claim.claimed_at : "-",
				 current->instance_id,
				 current->claimed_at[0] ? current->claimed_at : "-",
				 check_result_name(result));
		return;
	}
	if (atomic_load(&s->stopping_fast))
		return;
	report(s, &t->claim, result, status.message);
}

void *worker_main(void *userdata)
{
	struct sentinel *s = userdata;

	pthread_mutex_lock(&s->scan_lock);
	for (;;) {
		struct target *t;

		while (!s->stopping && s->next_target >= s->target_count)
			pthread_cond_wait(&s->work_cond, &s->scan_lock);
		if (s->stopping)
			break;
		t = &s->targets[s->next_target++];
		s->active_workers++;
		pthread_mutex_unlock(&s->scan_lock);

		check_target(s, t);

		pthread_mutex_lock(&s->scan_lock);
		s->active_workers--;
		if (s->active_workers == 0 && (s->next_target >= s->target_count || s->stopping))
			pthread_cond_signal(&s->done_cond);
	}
	pthread_mutex_unlock(&s->scan_lock);
	return NULL;
}

void run_scan(struct sentinel *s, struct target *targets, size_t count)
{
	pthread_mutex_lock(&s->scan_lock);
	if (!s->stopping) {
		s->targets = targets;
		s->target_count = count;
		s->next_target = 0;
		pthread_cond_broadcast(&s->work_cond);
		while (s->active_workers > 0 || (!s->stopping && s->next_target < s->target_count))
			pthread_cond_wait(&s->done_cond, &s->scan_lock);
		s->targets = NULL;
		s->target_count = 0;
		s->next_target = 0;
	}
	pthread_mutex_unlock(&s->scan_lock);
}
