/* SPDX-License-Identifier: MIT */
/*
 * rules.c - the store's decisions as pure functions (rules.h; the rules
 * text is in store.h).  No locks, no I/O, no struct store: callers pass the
 * committed numbers, from the mirror or from SQL.
 */
#include "store/rules.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "store/store.h"

bool rule_out_of_service(bool quarantined, bool held)
{
	return quarantined || held;
}

bool rule_meets_threshold(uint64_t tally, int64_t threshold)
{
	return threshold >= 0 && tally >= (uint64_t)threshold;
}

bool rule_cap_allows(int64_t cap, uint64_t quarantined)
{
	return cap <= 0 || quarantined < (uint64_t)cap;
}

bool rule_held_back(bool quarantined, bool held, uint64_t tally, int64_t threshold)
{
	return !rule_out_of_service(quarantined, held) && rule_meets_threshold(tally, threshold);
}

bool rule_breaker_engaged(int64_t cap, uint64_t quarantined, uint64_t held_back)
{
	return !rule_cap_allows(cap, quarantined) && held_back > 0;
}

bool rule_failure_unchanged(bool out_of_service, bool duplicate)
{
	return out_of_service || duplicate;
}

bool rule_failure_drops_oldest(uint64_t tally)
{
	return tally >= FAILURES_PER_VF_MAX;
}

enum rule_verdict rule_after_failure(uint64_t tally, int64_t threshold, int64_t cap,
				     uint64_t quarantined, bool probation)
{
	if (!probation && !rule_meets_threshold(tally, threshold))
		return RULE_RECORD;
	return rule_cap_allows(cap, quarantined) ? RULE_QUARANTINE : RULE_HOLD_BACK;
}

bool rule_success_lifts(uint64_t remaining, bool quarantined)
{
	return remaining == 0 && quarantined;
}

bool rule_success_rescinds(uint64_t remaining, bool quarantined, bool held)
{
	return rule_success_lifts(remaining, quarantined) && !held;
}

size_t rule_reevaluate_take(int64_t cap, uint64_t quarantined, size_t candidates)
{
	if (cap <= 0)
		return candidates;
	if (quarantined >= (uint64_t)cap)
		return 0; /* the rest stay held back: the breaker is engaged */
	uint64_t room = (uint64_t)cap - quarantined;
	return room < candidates ? (size_t)room : candidates;
}

int rule_claim_refusal(enum store_mode mode, bool out_of_service, const char *holder,
		       const char *instance_id)
{
	if (out_of_service && mode != STORE_MODE_OBSERVE)
		return -EBUSY;
	if (!holder)
		return 0;
	return strcmp(holder, instance_id) == 0 ? -EEXIST : -EBUSY;
}

int rule_commit_refusal(const char *holder, const char *instance_id)
{
	return rule_claim_refusal(STORE_MODE_ENFORCE, false, holder, instance_id);
}

int rule_claimed_at_refusal(const char *latest, const char *given)
{
	return latest && latest[0] && strcmp(given, latest) <= 0 ? -EINVAL : 0;
}

int rule_claim_watch_refusal(const char *agent, const char *control, int64_t pid)
{
	return agent[0] && !control[0] && pid <= 0 ? -EINVAL : 0;
}

bool rule_claim_watched(const char *agent)
{
	return agent[0] != '\0';
}

int rule_release_refusal(const char *live_claimed_at, const char *want)
{
	if (!live_claimed_at)
		return -ENOENT;
	return want && *want && strcmp(live_claimed_at, want) != 0 ? -ESTALE : 0;
}

int rule_unregister_refusal(bool out_of_service, uint64_t tally, bool claimed)
{
	return out_of_service || tally > 0 || claimed ? -EBUSY : 0;
}

bool rule_hold_unchanged(bool held)
{
	return held;
}

bool rule_clear_unchanged(bool quarantined, bool held, uint64_t tally, bool suspect, bool probation)
{
	return !quarantined && !held && tally == 0 && !suspect && !probation;
}

enum store_vf_state rule_vf_state(bool quarantined, bool held, uint64_t tally, int64_t threshold,
				  bool suspect, bool probation)
{
	if (held)
		return STORE_VF_HELD;
	if (quarantined)
		return STORE_VF_QUARANTINED;
	if (rule_held_back(quarantined, held, tally, threshold))
		return STORE_VF_HELD_BACK;
	if (suspect)
		return STORE_VF_SUSPECT;
	if (probation)
		return STORE_VF_PROBATION;
	return tally > 0 ? STORE_VF_FAILING : STORE_VF_OK;
}

bool rule_crash_suspect(int64_t window_ns, int64_t claimed_ns, int64_t died_ns)
{
	return window_ns > 0 && died_ns >= claimed_ns && died_ns - claimed_ns <= window_ns;
}

int rule_crash_time_refusal(int64_t claimed_ns, int64_t died_ns, int64_t now_ns)
{
	return died_ns < claimed_ns || died_ns > now_ns ? -EINVAL : 0;
}

int rule_parent_set(const char *vf, const char *current, const char *parent, bool *unchanged)
{
	*unchanged = false;
	if (strcmp(vf, parent) == 0)
		return -EINVAL;
	if (!current[0])
		return 0;
	if (strcmp(current, parent) != 0)
		return -EBUSY;
	*unchanged = true;
	return 0;
}

enum store_placement_group rule_placement_group(enum store_mode mode, bool out_of_service,
						bool claimed, bool held_back, bool suspect,
						bool failing, bool probation)
{
	if (claimed || (out_of_service && mode != STORE_MODE_OBSERVE))
		return STORE_PLACE_NONE;
	if (held_back || out_of_service)
		return STORE_PLACE_HELD_BACK;
	if (failing)
		return STORE_PLACE_FAILING;
	return suspect || probation ? STORE_PLACE_SUSPECT : STORE_PLACE_CLEAN;
}

unsigned rule_placement_parent_rank(bool known, size_t out)
{
	if (!known)
		return 1;
	if (out == 0)
		return 0;
	return out >= UINT_MAX - 1 ? UINT_MAX : (unsigned)out + 1;
}

int rule_gpu_next(enum gpu_phase p, enum gpu_event ev, bool claimed, bool other_recovering)
{
	if ((size_t)p >= GPU_PHASE_COUNT)
		return -EINVAL;
	switch (ev) {
	case GPU_EV_DRAIN:
		return p == GPU_PHASE_SERVING ? GPU_PHASE_DRAIN : (int)p;
	case GPU_EV_UNDRAIN:
		return p == GPU_PHASE_RECOVERING ? -EBUSY : GPU_PHASE_SERVING;
	case GPU_EV_RECOVER:
		if (p != GPU_PHASE_DRAIN && p != GPU_PHASE_FAILED)
			return -EBUSY;
		return claimed || other_recovering ? -EBUSY : GPU_PHASE_RECOVERING;
	case GPU_EV_RECOVERED:
		return p == GPU_PHASE_RECOVERING ? GPU_PHASE_SERVING : -EINVAL;
	case GPU_EV_RECOVER_FAILED:
	case GPU_EV_INTERRUPTED:
		return p == GPU_PHASE_RECOVERING ? GPU_PHASE_FAILED : -EINVAL;
	}
	return -EINVAL;
}

int rule_reservation_next(enum reservation_state s, enum reservation_event ev)
{
	switch (ev) {
	case RESERVATION_MADE:
		return s == RESERVATION_NONE ? RESERVATION_HELD : -EINVAL;
	case RESERVATION_ABANDONED:
		return s == RESERVATION_HELD ? RESERVATION_KEPT : -EINVAL;
	case RESERVATION_COMMITTED:
	case RESERVATION_CANCELLED:
		return s != RESERVATION_NONE ? RESERVATION_NONE : -EINVAL;
	}
	return -EINVAL;
}
