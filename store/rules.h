/* SPDX-License-Identifier: MIT */
/*
 * rules.h - the store's decisions as pure functions: the threshold, the
 * breaker (the cap on automatic quarantines), failure-report and claim
 * refusals, rescind on success, re-evaluation after a setting changes, when
 * an operator action or unregistration is refused, a VF's state, setting a
 * parent GPU once, and a VF's placement group.  Each rule is written here
 * once and used both by the mirror pre-checks (api.c: answer no-ops and
 * refusals without a transaction) and by the SQL operations (ops.c: decide
 * inside the transaction), so the two cannot drift.  No locks, no I/O; the
 * rules text is in store.h, the unit tests in tests/store/test-rules.c.
 */
#ifndef VFHEALTH_STORE_RULES_H
#define VFHEALTH_STORE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h" /* enum store_vf_state */

/* A VF's reservation (store.h, Reservations), in memory only:
 *
 *   NONE --made--> HELD          store_claim_reserve(): its creator holds it
 *   HELD --abandoned--> KEPT     the creator closed it while the store could
 *                                not commit it: kept, excluding the VF, and
 *                                committed once the store is available
 *   HELD, KEPT --committed--> NONE   it is the VF's claim now
 *   HELD, KEPT --cancelled--> NONE   dropped, nothing left
 *
 * Every other pair is no transition: -EINVAL, and the caller changes
 * nothing.  Tests: tests/store/test-rules.c (reservation_transitions). */
enum reservation_state {
	RESERVATION_NONE,
	RESERVATION_HELD,
	RESERVATION_KEPT
};
enum reservation_event {
	RESERVATION_MADE,
	RESERVATION_ABANDONED,
	RESERVATION_COMMITTED,
	RESERVATION_CANCELLED,
};
/* The state after ev in state s (>= 0), or -EINVAL. */
int rule_reservation_next(enum reservation_state s, enum reservation_event ev);

/* A parent GPU's phase (store.h, "GPUs"), as the `gpus` table stores it
 * (the integer is on disk: never renumber):
 *
 *   SERVING --drain--> DRAIN             its VFs take no new claim
 *   DRAIN --undrain--> SERVING
 *   DRAIN, FAILED --recover--> RECOVERING  only with no claim or reservation
 *                                        on the GPU and no other GPU of the
 *                                        host recovering (-EBUSY otherwise)
 *   RECOVERING --recovered--> SERVING    the cycle brought every VF back
 *   RECOVERING --failed--> FAILED        the program failed, timed out, or a
 *                                        VF did not come back
 *   RECOVERING --interrupted--> FAILED   vfhealthd restarted during a cycle:
 *                                        nothing re-runs it by itself
 *   FAILED --undrain--> SERVING          an operator's manual fix
 *
 * A drain of a GPU that is not serving changes nothing (a failed GPU stays
 * failed), an undrain of a serving GPU neither; an undrain during a cycle
 * and a recover of a serving or recovering GPU are -EBUSY; every other pair
 * is no transition (-EINVAL).  Tests: tests/store/test-rules.c
 * (gpu_transitions). */
enum gpu_phase {
	GPU_PHASE_SERVING = 0, /* never stored: a GPU without a row serves */
	GPU_PHASE_DRAIN = 1,   /* drained or draining */
	GPU_PHASE_RECOVERING = 2,
	GPU_PHASE_FAILED = 3,
	GPU_PHASE_COUNT,
};
enum gpu_event {
	GPU_EV_DRAIN,
	GPU_EV_UNDRAIN,
	GPU_EV_RECOVER,
	GPU_EV_RECOVERED,
	GPU_EV_RECOVER_FAILED,
	GPU_EV_INTERRUPTED,
};
/* The phase after ev in phase p (>= 0; p itself: no change), or -EBUSY /
 * -EINVAL.  claimed: a VF of the GPU has a live claim or a reservation;
 * other_recovering: another GPU of the host is recovering. */
int rule_gpu_next(enum gpu_phase p, enum gpu_event ev, bool claimed, bool other_recovering);

/* A VF is out of service (claims refused, listed as quarantined, placement
 * skips it) when it is automatically quarantined or held by the operator:
 * two separate bits, so that neither lifts the other. */
bool rule_out_of_service(bool quarantined, bool held);

/* A tally meets the threshold: the VF should be quarantined. */
bool rule_meets_threshold(uint64_t tally, int64_t threshold);

/* The cap (0 = none) leaves room for one more quarantine.  `quarantined`
 * counts automatic quarantines only: operator holds never use the cap. */
bool rule_cap_allows(int64_t cap, uint64_t quarantined);

/* In service (neither quarantined nor held) although the tally meets the
 * threshold: only the cap causes that. */
bool rule_held_back(bool quarantined, bool held, uint64_t tally, int64_t threshold);

/* The breaker is engaged while the cap is reached and a VF is held back. */
bool rule_breaker_engaged(int64_t cap, uint64_t quarantined, uint64_t held_back);

/* A failure report changes nothing on a VF out of service (quarantined or
 * held: rule_out_of_service) or for an assignment already recorded
 * (duplicate). */
bool rule_failure_unchanged(bool out_of_service, bool duplicate);

/* A newly recorded failure would exceed FAILURES_PER_VF_MAX: the
 * oldest record goes first (only a VF the breaker holds back gets here). */
bool rule_failure_drops_oldest(uint64_t tally);

enum rule_verdict {
	RULE_RECORD,     /* recorded; the tally is below the threshold */
	RULE_QUARANTINE, /* recorded and quarantined */
	RULE_HOLD_BACK,  /* recorded, meets the threshold, the cap refuses */
};

/* What a failure just recorded (tally now counts it) does to a VF that was
 * not quarantined, with `quarantined` VFs quarantined before it.  A VF on
 * probation (store.h, Probation) meets the threshold with its first failure:
 * a cycle that did not cure its wedge costs one guest; at the cap it is
 * RULE_HOLD_BACK like any other.  Tests: test-rules.c failure_reports. */
enum rule_verdict rule_after_failure(uint64_t tally, int64_t threshold, int64_t cap,
				     uint64_t quarantined, bool probation);

/* A success that cleared failures lifts the automatic quarantine when none
 * remain (also under a hold: the quarantine no longer has a failure behind
 * it, and the hold alone keeps the VF out). */
bool rule_success_lifts(uint64_t remaining, bool quarantined);

/* ... and rescinds it (the VF is back in service) only when no hold
 * remains: no success ever lifts an operator hold. */
bool rule_success_rescinds(uint64_t remaining, bool quarantined, bool held);

/* Re-evaluation: of `candidates` held-back VFs (oldest registration first),
 * how many get quarantined with `quarantined` already quarantined. */
size_t rule_reevaluate_take(int64_t cap, uint64_t quarantined, size_t candidates);

/* Claiming: 0, -EBUSY (out of service, or another instance holds it) or
 * -EEXIST (this instance holds it).  holder: the instance id of the live
 * claim or of the reservation, NULL when the VF has neither.  In observe
 * mode being out of service refuses nothing (the state still says what
 * enforcement would do); one claim per VF holds in both modes. */
int rule_claim_refusal(enum store_mode mode, bool out_of_service, const char *holder,
		       const char *instance_id);

/* Committing a reservation: 0, or -EEXIST/-EBUSY when a live claim holds
 * the VF (only a commit racing its own kind gets there).  Being out of
 * service refuses no commit, in either mode: the reservation was a claim
 * from its create on (rule_claim_refusal judged it then), and a hold, a
 * quarantine or a switch to enforce does not end a live claim either. */
int rule_commit_refusal(const char *holder, const char *instance_id);

/* A claim's identity is (instance, claimed_at) and is never reused on a VF:
 * a claimed_at the writer gives must be later than `latest`, the newest
 * claimed_at of any other claim of that VF, live or past (NULL or "" when
 * none): 0, or -EINVAL.  Both canonical (RFC 3339, nine fraction digits),
 * so that text order is time order. */
int rule_claimed_at_refusal(const char *latest, const char *given);

/* What the sentinel may watch: a claim naming an agent must name its VMM's
 * liveness (pid and/or control), so that no guest endpoint is dialled
 * without it: -EINVAL for agent without both; 0 otherwise (a claim without
 * agent excludes the VF and is not polled: rule_claim_watched). */
int rule_claim_watch_refusal(const char *agent, const char *control, int64_t pid);
#define CLAIM_WATCH_RULE "a claim naming agent= names its VMM too: pid= and/or control="

/* Whether the sentinel polls a claim (it names an agent); otherwise the
 * claim only excludes its VF. */
bool rule_claim_watched(const char *agent);

/* Releasing the claim of an instance: 0, -ENOENT (it holds no live claim:
 * live_claimed_at NULL) or -ESTALE (a conditional release, want non-empty,
 * names another claimed_at: the claim was released and made again). */
int rule_release_refusal(const char *live_claimed_at, const char *want);

/* Unregistering: 0 or -EBUSY (out of service, has failures or a live claim). */
int rule_unregister_refusal(bool out_of_service, uint64_t tally, bool claimed);

/* Operator actions that change nothing: a hold on a held VF (`echo 1` on an
 * automatically quarantined VF does set the hold), clearing a VF with no
 * hold, no quarantine and no failure. */
bool rule_hold_unchanged(bool held);
bool rule_clear_unchanged(bool quarantined, bool held, uint64_t tally, bool suspect,
			  bool probation);

/* What the VF's `state` file says: held wins over quarantined; held-back
 * (rule_held_back) over suspect, suspect over probation (store.h,
 * Probation), probation over failing (failures on record below the
 * threshold).  Placement ranks by the stronger evidence instead
 * (rule_placement_group): a failing VF after a suspect one. */
enum store_vf_state rule_vf_state(bool quarantined, bool held, uint64_t tally, int64_t threshold,
				  bool suspect, bool probation);

/* A claim whose VMM died makes its VF suspect when the death falls within
 * the init window after the claim (store.h, "Suspect"): window_ns > 0 and
 * claimed_ns <= died_ns <= claimed_ns + window_ns (nanoseconds since the
 * epoch).  A death before the claim is a writer's error the caller refuses
 * (rule_crash_time_refusal); here it is no suspicion. */
bool rule_crash_suspect(int64_t window_ns, int64_t claimed_ns, int64_t died_ns);

/* A death time a writer gives: 0, or -EINVAL before claimed_ns or after
 * now_ns (a VMM does not die before its claim nor in the future). */
int rule_crash_time_refusal(int64_t claimed_ns, int64_t died_ns, int64_t now_ns);

/* Setting a VF's parent GPU: 0 (set it; *unchanged when it already is that
 * parent: nothing to do), -EINVAL (the VF itself) or -EBUSY (another parent
 * is set).  current: "" when unknown.  Addresses are valid (the caller
 * checked). */
int rule_parent_set(const char *vf, const char *current, const char *parent, bool *unchanged);

/* The placement group of a VF (store.h, "Placement"), its own evidence:
 * STORE_PLACE_NONE when claimed, or out of service in enforce mode;
 * held-back VFs last, and in observe mode the VFs enforcement would refuse
 * with them; failing (live failures below the threshold, suspect or not)
 * before them; suspect, and on probation (store.h, Probation) with them,
 * before failing; clean first.  Tests: test-rules.c placement_groups. */
enum store_placement_group rule_placement_group(enum store_mode mode, bool out_of_service,
						bool claimed, bool held_back, bool suspect,
						bool failing, bool probation);

/* The rank of a VF's parent GPU within a group, lower first: a known
 * parent with no VF out of service 0, an unknown parent 1 (no evidence
 * either way, but none that its GPU is clean), a known parent with `out`
 * VFs out of service out + 1.  Tests: test-rules.c placement_parents. */
unsigned rule_placement_parent_rank(bool known, size_t out);

#endif
