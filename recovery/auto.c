/* SPDX-License-Identifier: MIT */
/*
 * auto.c - the automatic recovery policy (recovery-internal.h, auto_next):
 * pure functions of the GPUs' states and histories, no I/O.
 */
#include <stdio.h>
#include <string.h>

#include "common/parse.h"
#include "recovery/recovery-internal.h"

/* Nanoseconds since the epoch of an RFC 3339 time (the store writes them
 * canonical); -1 when it is not one. */
static int64_t at_ns(const char *at)
{
	int64_t ns;

	return rfc3339_to_ns(at, &ns) < 0 ? -1 : ns;
}

void auto_history_read(const struct store_gpu_event *h, size_t n, struct auto_history *ret)
{
	bool drain_seen = false;

	memset(ret, 0, sizeof(*ret));
	ret->drained_at_ns = -1;
	for (size_t i = n; i-- > 0;) {
		if (!drain_seen && strcmp(h[i].event, "drain") == 0) {
			drain_seen = true;
			ret->auto_drain = strncmp(h[i].detail, "auto:", 5) == 0;
			ret->drained_at_ns = at_ns(h[i].at);
		}
		/* canonical times compare as strings */
		if ((strcmp(h[i].event, "recover") == 0 || strcmp(h[i].event, "undrain") == 0) &&
		    strcmp(h[i].at, ret->counts_after) > 0)
			snprintf(ret->counts_after, sizeof(ret->counts_after), "%s", h[i].at);
	}
}

bool auto_counts(const struct auto_history *h, const char *since)
{
	return strcmp(since, h->counts_after) > 0;
}

static bool waits(const struct auto_gpu *g)
{
	return g->auto_drained && (g->state == STORE_GPU_DRAINING || g->state == STORE_GPU_DRAINED);
}

struct auto_step auto_next(const struct auto_gpu *gpus, size_t n, const struct auto_policy *p)
{
	struct auto_step none = { .action = AUTO_NOTHING, .wait_ns = -1 };
	bool recovering = false, expired = false;
	size_t first_expired = 0;

	for (size_t i = 0; i < n; i++) {
		recovering |= gpus[i].state == STORE_GPU_RECOVERING;
		if (p->drain_timeout_ns <= 0 || !waits(&gpus[i]))
			continue;
		int64_t left = p->drain_timeout_ns -
			       (gpus[i].drained_ns > 0 ? gpus[i].drained_ns : 0);
		if (left <= 0 && !expired) {
			expired = true;
			first_expired = i;
		} else if (left > 0 && (none.wait_ns < 0 || left < none.wait_ns)) {
			none.wait_ns = left;
		}
	}
	struct auto_step act = none;
	if (p->threshold > 0 && !recovering && !p->observe)
		for (size_t i = 0; i < n; i++)
			if (gpus[i].auto_drained && gpus[i].state == STORE_GPU_DRAINED) {
				act.action = AUTO_CYCLE;
				act.index = i;
				return act;
			}
	if (expired) {
		act.action = AUTO_UNDRAIN;
		act.index = first_expired;
		return act;
	}
	if (p->threshold > 0 && !recovering)
		for (size_t i = 0; i < n; i++)
			if (gpus[i].state == STORE_GPU_SERVING &&
			    gpus[i].fresh_quarantines >= (size_t)p->threshold) {
				act.action = AUTO_DRAIN;
				act.index = i;
				return act;
			}
	return none;
}
