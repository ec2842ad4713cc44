/* SPDX-License-Identifier: MIT */
/*
 * rules.h - the store's decisions as pure functions: the threshold, the
 * breaker (the cap on quarantined VFs), failure-report and claim refusals,
 * rescind on success, re-evaluation after a setting changes, and when an
 * operator action or unregistration is refused.  Each rule is written here
 * once and used both by the mirror pre-checks (api.c: answer no-ops and
 * refusals without a transaction) and by the SQL operations (ops.c: decide
 * inside the transaction), so the two cannot drift.  No locks, no I/O; the
 * rules text is in store.h, the unit tests in tests/store/test_rules.c.
 */
#ifndef VFHEALTH_STORE_RULES_H
#define VFHEALTH_STORE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A tally meets the threshold: the VF should be quarantined. */
bool rule_meets_threshold(uint64_t tally, int64_t threshold);

/* The cap (0 = none) leaves room for one more quarantine. */
bool rule_cap_allows(int64_t cap, uint64_t quarantined);

/* Not quarantined although the tally meets the threshold (only the cap
 * causes that). */
bool rule_held_back(bool quarantined, uint64_t tally, int64_t threshold);

/* The breaker is engaged while the cap is reached and a VF is held back. */
bool rule_breaker_engaged(int64_t cap, uint64_t quarantined, uint64_t held_back);

/* A failure report changes nothing on a quarantined VF or for an
 * assignment already recorded (duplicate). */
bool rule_failure_unchanged(bool quarantined, bool duplicate);

/* A newly recorded failure would exceed FAILURES_PER_VF_MAX: the
 * oldest record goes first (only a VF the breaker holds back gets here). */
bool rule_failure_drops_oldest(uint64_t tally);

enum rule_verdict {
	RULE_RECORD,     /* recorded; the tally is below the threshold */
	RULE_QUARANTINE, /* recorded and quarantined */
	RULE_HOLD_BACK,  /* recorded, meets the threshold, the cap refuses */
};

/* What a failure just recorded (tally now counts it) does to a VF that was
 * not quarantined, with `quarantined` VFs quarantined before it. */
enum rule_verdict rule_after_failure(uint64_t tally, int64_t threshold, int64_t cap,
				     uint64_t quarantined);

/* A success that cleared failures lifts the quarantine when none remain,
 * unless the quarantine is manual (no failure behind it). */
bool rule_success_rescinds(uint64_t remaining, bool quarantined, bool manual);

/* Re-evaluation: of `candidates` held-back VFs (oldest registration first),
 * how many get quarantined with `quarantined` already quarantined. */
size_t rule_reevaluate_take(int64_t cap, uint64_t quarantined, size_t candidates);

/* Claiming: 0, -EBUSY (quarantined, or another instance holds it) or
 * -EEXIST (this instance holds it).  holder: the instance id of the live
 * claim or of the reservation, NULL when the VF has neither. */
int rule_claim_refusal(bool quarantined, const char *holder, const char *instance_id);

/* Releasing the claim of an instance: 0, -ENOENT (it holds no live claim:
 * live_claimed_at NULL) or -ESTALE (a conditional release, want non-empty,
 * names another claimed_at: the claim was released and made again). */
int rule_release_refusal(const char *live_claimed_at, const char *want);

/* Unregistering: 0 or -EBUSY (quarantined, has failures or a live claim). */
int rule_unregister_refusal(bool quarantined, uint64_t tally, bool claimed);

/* Operator actions that change nothing: a manual quarantine of a
 * quarantined VF, clearing a clean VF. */
bool rule_manual_unchanged(bool quarantined);
bool rule_clear_unchanged(bool quarantined, uint64_t tally);

#endif
