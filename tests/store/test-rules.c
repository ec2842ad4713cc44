/* SPDX-License-Identifier: MIT */
/*
 * test-rules.c - the store's decision rules (store/rules.h) as pure
 * functions: each rule's boundaries, so a change to one shows here before it
 * shows in the store's behaviour (tests/store/test-store-*.c); and the
 * placement order (store/placement.h), pure but for its seed.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>

#include "common/cleanup.h"
#include <string.h>

#include "store/placement.h"
#include "store/rules.h"
#include "store/store.h"
#include "tests/common/check-main.h"

START_TEST(threshold_cap_and_breaker)
{
	/* threshold is met at equality */
	ck_assert(!rule_meets_threshold(0, 1));
	ck_assert(rule_meets_threshold(1, 1));
	ck_assert(!rule_meets_threshold(1, 2));
	ck_assert(rule_meets_threshold(2, 2));
	ck_assert(rule_meets_threshold(3, 2));
	ck_assert(rule_meets_threshold(THRESHOLD_MAX, THRESHOLD_MAX));

	/* cap zero means no cap */
	ck_assert(rule_cap_allows(0, 0));
	ck_assert(rule_cap_allows(0, VFS_MAX));
	ck_assert(rule_cap_allows(2, 1));
	ck_assert(!rule_cap_allows(2, 2));
	ck_assert(!rule_cap_allows(2, 3)); /* over it: the threshold or cap was changed */

	/* held back only when in service: neither quarantined nor held */
	ck_assert(rule_held_back(false, false, 2, 2));
	ck_assert(!rule_held_back(true, false, 2, 2));
	ck_assert(!rule_held_back(false, true, 2, 2));
	ck_assert(!rule_held_back(true, true, 2, 2));
	ck_assert(!rule_held_back(false, false, 1, 2));

	/* breaker needs cap reached and a held back vf */
	ck_assert(!rule_breaker_engaged(0, 5, 1)); /* no cap */
	ck_assert(!rule_breaker_engaged(2, 1, 1)); /* cap not reached */
	ck_assert(!rule_breaker_engaged(2, 2, 0)); /* reached, nothing held back */
	ck_assert(rule_breaker_engaged(2, 2, 1));
	ck_assert(rule_breaker_engaged(2, 3, 4));
}
END_TEST

START_TEST(failure_reports)
{
	/* out of service: quarantined or held, either alone */
	ck_assert(!rule_out_of_service(false, false));
	ck_assert(rule_out_of_service(true, false));
	ck_assert(rule_out_of_service(false, true));
	ck_assert(rule_out_of_service(true, true));

	/* failure unchanged when out of service or duplicate */
	ck_assert(rule_failure_unchanged(true, false));
	ck_assert(rule_failure_unchanged(false, true));
	ck_assert(rule_failure_unchanged(true, true));
	ck_assert(!rule_failure_unchanged(false, false));

	/* failure bound drops the oldest */
	ck_assert(!rule_failure_drops_oldest(0));
	ck_assert(!rule_failure_drops_oldest(FAILURES_PER_VF_MAX - 1));
	ck_assert(rule_failure_drops_oldest(FAILURES_PER_VF_MAX));

	/* after failure record quarantine or hold back */
	/* below the threshold: recorded whatever the cap */
	ck_assert_int_eq(rule_after_failure(1, 2, 0, 0, false), RULE_RECORD);
	ck_assert_int_eq(rule_after_failure(1, 2, 1, 5, false), RULE_RECORD);
	/* meets it: quarantined while the cap allows */
	ck_assert_int_eq(rule_after_failure(2, 2, 0, 100, false), RULE_QUARANTINE);
	ck_assert_int_eq(rule_after_failure(2, 2, 3, 2, false), RULE_QUARANTINE);
	ck_assert_int_eq(rule_after_failure(5, 2, 3, 2, false), RULE_QUARANTINE);
	/* the cap is reached: held back, the breaker engages */
	ck_assert_int_eq(rule_after_failure(2, 2, 3, 3, false), RULE_HOLD_BACK);
	ck_assert_int_eq(rule_after_failure(1, 1, 1, 1, false), RULE_HOLD_BACK);
	/* on probation the first failure meets any threshold; the cap holds */
	ck_assert_int_eq(rule_after_failure(1, 2, 0, 0, true), RULE_QUARANTINE);
	ck_assert_int_eq(rule_after_failure(1, 10, 3, 2, true), RULE_QUARANTINE);
	ck_assert_int_eq(rule_after_failure(1, 10, 3, 3, true), RULE_HOLD_BACK);
}
END_TEST

START_TEST(success_and_reevaluation)
{
	/* success lifts an automatic quarantine with nothing left, also under
	 * a hold ... */
	ck_assert(rule_success_lifts(0, true));
	ck_assert(!rule_success_lifts(1, true));  /* older failures remain */
	ck_assert(!rule_success_lifts(0, false)); /* nothing to lift */
	/* ... and rescinds (back in service) only with no hold: no success
	 * ever lifts a hold */
	ck_assert(rule_success_rescinds(0, true, false));
	ck_assert(!rule_success_rescinds(1, true, false)); /* older failures remain */
	ck_assert(!rule_success_rescinds(0, true, true));  /* held: never by a success */
	ck_assert(!rule_success_rescinds(0, false, true));
	ck_assert(!rule_success_rescinds(0, false, false)); /* nothing to lift */

	/* reevaluate takes up to the cap */
	ck_assert_uint_eq(rule_reevaluate_take(0, 7, 5), 5); /* no cap: all */
	ck_assert_uint_eq(rule_reevaluate_take(10, 7, 5), 3);
	ck_assert_uint_eq(rule_reevaluate_take(10, 2, 5), 5);
	ck_assert_uint_eq(rule_reevaluate_take(3, 3, 5), 0);
	ck_assert_uint_eq(rule_reevaluate_take(3, 4, 5), 0); /* over the cap */
	ck_assert_uint_eq(rule_reevaluate_take(3, 0, 0), 0);
}
END_TEST

START_TEST(refusals)
{
	/* claim refusals */
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_ENFORCE, false, NULL, "vm-a"), 0);
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_ENFORCE, true, NULL, "vm-a"), -EBUSY);
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_ENFORCE, false, "vm-a", "vm-a"), -EEXIST);
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_ENFORCE, false, "vm-b", "vm-a"), -EBUSY);
	/* a quarantined VF is refused before the holder is compared */
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_ENFORCE, true, "vm-a", "vm-a"), -EBUSY);
	/* observe mode: out of service refuses nothing, one live claim per VF still */
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_OBSERVE, true, NULL, "vm-a"), 0);
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_OBSERVE, false, NULL, "vm-a"), 0);
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_OBSERVE, true, "vm-b", "vm-a"), -EBUSY);
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_OBSERVE, true, "vm-a", "vm-a"), -EEXIST);

	/* a reservation's commit: out of service refuses nothing (it was a
	 * claim from its create on), one live claim per VF still */
	ck_assert_int_eq(rule_commit_refusal(NULL, "vm-a"), 0);
	ck_assert_int_eq(rule_commit_refusal("vm-b", "vm-a"), -EBUSY);
	ck_assert_int_eq(rule_commit_refusal("vm-a", "vm-a"), -EEXIST);

	/* claimed_at given by a writer: later than every earlier claim's */
	ck_assert_int_eq(rule_claimed_at_refusal(NULL, "2026-11-29T07:00:01.000000000Z"), 0);
	ck_assert_int_eq(rule_claimed_at_refusal("", "2026-11-29T07:00:01.000000000Z"), 0);
	ck_assert_int_eq(rule_claimed_at_refusal("2026-11-29T07:00:01.000000000Z",
						 "2026-11-29T07:00:01.000000000Z"),
			 -EINVAL);
	ck_assert_int_eq(rule_claimed_at_refusal("2026-11-29T07:00:01.000000000Z",
						 "2026-11-29T07:00:00.999999999Z"),
			 -EINVAL);
	ck_assert_int_eq(rule_claimed_at_refusal("2026-11-29T07:00:01.000000000Z",
						 "2026-11-29T07:00:01.000000001Z"),
			 0);

	/* watched: agent with pid and/or control; agent alone refused */
	ck_assert_int_eq(rule_claim_watch_refusal("vsock:3:2222", "", 0), -EINVAL);
	ck_assert_int_eq(rule_claim_watch_refusal("vsock:3:2222", "", 7), 0);
	ck_assert_int_eq(rule_claim_watch_refusal("vsock:3:2222", "/run/vmm/a.ctl", 0), 0);
	ck_assert_int_eq(rule_claim_watch_refusal("", "", 0), 0);
	ck_assert(rule_claim_watched("vsock:3:2222"));
	ck_assert(!rule_claim_watched(""));

	/* release refusals: unconditional (want "" or NULL) and conditional */
	ck_assert_int_eq(rule_release_refusal(NULL, NULL), -ENOENT);
	ck_assert_int_eq(rule_release_refusal(NULL, "2026-11-29T07:00:01.000000000Z"), -ENOENT);
	ck_assert_int_eq(rule_release_refusal("2026-11-29T07:00:01.000000000Z", ""), 0);
	ck_assert_int_eq(rule_release_refusal("2026-11-29T07:00:01.000000000Z",
					      "2026-11-29T07:00:01.000000000Z"),
			 0);
	ck_assert_int_eq(rule_release_refusal("2026-11-29T07:00:02.000000000Z",
					      "2026-11-29T07:00:01.000000000Z"),
			 -ESTALE);

	/* unregister refusals */
	ck_assert_int_eq(rule_unregister_refusal(false, 0, false), 0);
	ck_assert_int_eq(rule_unregister_refusal(true, 0, false), -EBUSY);
	ck_assert_int_eq(rule_unregister_refusal(false, 1, false), -EBUSY);
	ck_assert_int_eq(rule_unregister_refusal(false, 0, true), -EBUSY);

	/* a held VF is refused like a quarantined one */
	ck_assert_int_eq(rule_claim_refusal(STORE_MODE_ENFORCE, rule_out_of_service(false, true),
					    NULL, "vm-a"),
			 -EBUSY);
	ck_assert_int_eq(rule_unregister_refusal(rule_out_of_service(false, true), 0, false),
			 -EBUSY);

	/* operator actions that change nothing: a hold only on a held VF (an
	 * automatically quarantined one gets the hold) */
	ck_assert(rule_hold_unchanged(true));
	ck_assert(!rule_hold_unchanged(false));
	ck_assert(rule_clear_unchanged(false, false, 0, false, false));
	ck_assert(!rule_clear_unchanged(true, false, 0, false, false));
	ck_assert(!rule_clear_unchanged(false, true, 0, false, false));
	ck_assert(!rule_clear_unchanged(false, false, 1, false,
					false)); /* held back or below the threshold */
	ck_assert(
		!rule_clear_unchanged(false, false, 0, true, false)); /* suspect: echo 0 ends it */
	ck_assert(!rule_clear_unchanged(false, false, 0, false, true)); /* so is probation */
}
END_TEST

START_TEST(vf_state)
{
	/* held wins over everything */
	ck_assert_int_eq(rule_vf_state(true, true, 5, 2, false, false), STORE_VF_HELD);
	ck_assert_int_eq(rule_vf_state(false, true, 0, 2, false, false), STORE_VF_HELD);
	ck_assert_int_eq(rule_vf_state(false, true, 3, 2, false, false),
			 STORE_VF_HELD); /* not held-back */
	/* then the automatic quarantine */
	ck_assert_int_eq(rule_vf_state(true, false, 2, 2, false, false), STORE_VF_QUARANTINED);
	ck_assert_int_eq(rule_vf_state(true, false, 0, 2, false, false), STORE_VF_QUARANTINED);
	/* in service: held back when the tally meets the threshold */
	ck_assert_int_eq(rule_vf_state(false, false, 2, 2, false, false), STORE_VF_HELD_BACK);
	ck_assert_int_eq(rule_vf_state(false, false, 9, 2, false, false), STORE_VF_HELD_BACK);
	/* failing below it, ok with nothing on record */
	ck_assert_int_eq(rule_vf_state(false, false, 1, 2, false, false), STORE_VF_FAILING);
	ck_assert_int_eq(rule_vf_state(false, false, 0, 2, false, false), STORE_VF_OK);
	ck_assert_int_eq(rule_vf_state(false, false, 0, 1, false, false), STORE_VF_OK);
	/* suspect: below held-back, above failing and ok */
	ck_assert_int_eq(rule_vf_state(false, false, 0, 2, true, false), STORE_VF_SUSPECT);
	ck_assert_int_eq(rule_vf_state(false, false, 1, 2, true, false), STORE_VF_SUSPECT);
	ck_assert_int_eq(rule_vf_state(false, false, 2, 2, true, false), STORE_VF_HELD_BACK);
	ck_assert_int_eq(rule_vf_state(true, false, 2, 2, true, false), STORE_VF_QUARANTINED);
	ck_assert_int_eq(rule_vf_state(false, true, 0, 2, true, false), STORE_VF_HELD);
	/* probation: below suspect and held-back, above failing and ok */
	ck_assert_int_eq(rule_vf_state(false, false, 0, 2, false, true), STORE_VF_PROBATION);
	ck_assert_int_eq(rule_vf_state(false, false, 1, 2, false, true), STORE_VF_PROBATION);
	ck_assert_int_eq(rule_vf_state(false, false, 0, 2, true, true), STORE_VF_SUSPECT);
	ck_assert_int_eq(rule_vf_state(false, false, 2, 2, false, true), STORE_VF_HELD_BACK);
	ck_assert_int_eq(rule_vf_state(true, false, 2, 2, false, true), STORE_VF_QUARANTINED);

	/* the names the state file shows */
	ck_assert_str_eq(store_vf_state_name(STORE_VF_OK), "ok");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_FAILING), "failing");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_QUARANTINED), "quarantined");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_HELD), "held");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_HELD_BACK), "held-back");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_SUSPECT), "suspect");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_PROBATION), "probation");
	ck_assert_str_eq(store_vf_state_name((enum store_vf_state)99), "unknown");
}
END_TEST

START_TEST(parent_and_placement)
{
	/* a parent is set once: the same again changes nothing, another is busy */
	bool unchanged = true;
	ck_assert_int_eq(rule_parent_set("0000:41:00.4", "", "0000:41:00.0", &unchanged), 0);
	ck_assert(!unchanged);
	ck_assert_int_eq(rule_parent_set("0000:41:00.4", "0000:41:00.0", "0000:41:00.0",
					 &unchanged),
			 0);
	ck_assert(unchanged);
	ck_assert_int_eq(rule_parent_set("0000:41:00.4", "0000:41:00.0", "0000:42:00.0",
					 &unchanged),
			 -EBUSY);
	/* a VF is not its own parent */
	ck_assert_int_eq(rule_parent_set("0000:41:00.4", "", "0000:41:00.4", &unchanged), -EINVAL);

	/* out of service or claimed: not allocatable, whatever else */
	for (int hb = 0; hb < 2; hb++)
		for (int ev = 0; ev < 4; ev++) {
			bool suspect = ev & 1, failing = ev & 2;
			ck_assert_int_eq(rule_placement_group(STORE_MODE_ENFORCE, true, false, hb,
							      suspect, failing, false),
					 STORE_PLACE_NONE);
			ck_assert_int_eq(rule_placement_group(STORE_MODE_ENFORCE, false, true, hb,
							      suspect, failing, false),
					 STORE_PLACE_NONE);
			ck_assert_int_eq(rule_placement_group(STORE_MODE_OBSERVE, true, true, hb,
							      suspect, failing, false),
					 STORE_PLACE_NONE);
			/* held back: last, whatever its evidence */
			ck_assert_int_eq(rule_placement_group(STORE_MODE_ENFORCE, false, false,
							      true, suspect, failing, false),
					 STORE_PLACE_HELD_BACK);
			/* observe mode: out of service is allocatable, last */
			ck_assert_int_eq(rule_placement_group(STORE_MODE_OBSERVE, true, false, hb,
							      suspect, failing, false),
					 STORE_PLACE_HELD_BACK);
		}
	/* the VF's own evidence: clean, suspect, failing (the stronger
	 * evidence when both) */
	for (int m = 0; m < 2; m++) {
		enum store_mode mode = m ? STORE_MODE_OBSERVE : STORE_MODE_ENFORCE;
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, false, false,
						      false),
				 STORE_PLACE_CLEAN);
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, true, false,
						      false),
				 STORE_PLACE_SUSPECT);
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, false, true,
						      false),
				 STORE_PLACE_FAILING);
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, true, true, false),
				 STORE_PLACE_FAILING);
		/* on probation: with the suspect ones, whatever else */
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, false, false,
						      true),
				 STORE_PLACE_SUSPECT);
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, true, false, true),
				 STORE_PLACE_SUSPECT);
		ck_assert_int_eq(rule_placement_group(mode, false, false, false, false, true, true),
				 STORE_PLACE_FAILING);
		ck_assert_int_eq(rule_placement_group(mode, false, false, true, false, false, true),
				 STORE_PLACE_HELD_BACK);
	}
	/* the groups' order is the placement order */
	ck_assert_int_lt(STORE_PLACE_CLEAN, STORE_PLACE_SUSPECT);
	ck_assert_int_lt(STORE_PLACE_SUSPECT, STORE_PLACE_FAILING);
	ck_assert_int_lt(STORE_PLACE_FAILING, STORE_PLACE_HELD_BACK);

	/* the parent's rank: none out, then unknown, then 1, 2, ... out */
	ck_assert_uint_eq(rule_placement_parent_rank(true, 0), 0);
	ck_assert_uint_eq(rule_placement_parent_rank(false, 0), 1);
	ck_assert_uint_eq(rule_placement_parent_rank(true, 1), 2);
	ck_assert_uint_eq(rule_placement_parent_rank(true, 3), 4);
	ck_assert_uint_eq(rule_placement_parent_rank(true, SIZE_MAX), UINT_MAX);
}
END_TEST

/* The init window: a death from the claim to window after it, inclusive;
 * a window of 0 is off; a death time before the claim or in the future is
 * refused. */
START_TEST(crash_suspect)
{
	const int64_t s = 1000000000, claimed = 1764000000 * s, window = 60 * s;

	ck_assert(rule_crash_suspect(window, claimed, claimed));
	ck_assert(rule_crash_suspect(window, claimed, claimed + s));
	ck_assert(rule_crash_suspect(window, claimed, claimed + window));
	ck_assert(!rule_crash_suspect(window, claimed, claimed + window + 1));
	ck_assert(!rule_crash_suspect(window, claimed, claimed - 1));
	ck_assert(!rule_crash_suspect(0, claimed, claimed + s));
	ck_assert(!rule_crash_suspect(-1, claimed, claimed));
	ck_assert_int_eq(rule_crash_time_refusal(claimed, claimed, claimed), 0);
	ck_assert_int_eq(rule_crash_time_refusal(claimed, claimed + s, claimed + 2 * s), 0);
	ck_assert_int_eq(rule_crash_time_refusal(claimed, claimed - 1, claimed + s), -EINVAL);
	ck_assert_int_eq(rule_crash_time_refusal(claimed, claimed + 2 * s, claimed + s), -EINVAL);
}
END_TEST

/* VFs: 40:00.x of PF 41 (one out of service: .6), 50:00.x of PF 51 (one
 * claimed: .5, claims do not count), 60:00.x of PF 61 (three out of
 * service), 70:00.x of unknown parents; a held-back VF, a suspect and a
 * failing one (one failed report) on the clean PF 51. */
static const struct placement_vf placement_vfs[] = {
	/* vf, parent, out_of_service, claimed, held_back, suspect, failing */
	{ "0000:40:00.4", "0000:41:00.0", false, false, false, false, false, false },
	{ "0000:40:00.5", "0000:41:00.0", false, false, false, false, false, false },
	{ "0000:40:00.6", "0000:41:00.0", true, false, false, false, false, false },
	{ "0000:50:00.1", "0000:51:00.0", false, false, false, false, false, false },
	{ "0000:50:00.2", "0000:51:00.0", false, false, false, true, false, false },
	{ "0000:50:00.3", "0000:51:00.0", false, false, false, false, true, false },
	{ "0000:50:00.4", "0000:51:00.0", false, false, false, false, false, false },
	{ "0000:50:00.5", "0000:51:00.0", false, true, false, false, false, false },
	{ "0000:50:00.6", "0000:51:00.0", false, false, true, false, true, false },
	{ "0000:60:00.1", "0000:61:00.0", true, false, false, false, false, false },
	{ "0000:60:00.2", "0000:61:00.0", true, false, false, false, false, false },
	{ "0000:60:00.3", "0000:61:00.0", true, false, false, false, false, false },
	{ "0000:60:00.4", "0000:61:00.0", false, false, false, false, false, false },
	{ "0000:70:00.4", "", false, false, false, false, false, false },
	{ "0000:70:00.5", "", false, false, false, false, false, false },
};

/* where: the place of vf in out[0..n), or n */
static size_t where(const struct store_placement *out, size_t n, const char *vf)
{
	size_t i = 0;

	while (i < n && strcmp(out[i].vf, vf) != 0)
		i++;
	return i;
}

/* In enforce mode: clean VFs (PF 51's two, then the unknown parents' two,
 * then PF 41's two with one out, then PF 61's one with three out), then the
 * suspect, the failing, the held-back VF; whatever the draw. */
START_TEST(placement_groups)
{
	struct store_placement out[ARRAY_SIZE(placement_vfs)];
	static const struct {
		const char *vf[2];
		enum store_placement_group group;
		unsigned parent_rank;
	} want[] = {
		{ { "0000:50:00.1", "0000:50:00.4" }, STORE_PLACE_CLEAN, 0 },
		{ { "0000:70:00.4", "0000:70:00.5" }, STORE_PLACE_CLEAN, 1 },
		{ { "0000:40:00.4", "0000:40:00.5" }, STORE_PLACE_CLEAN, 2 },
		{ { "0000:60:00.4", NULL }, STORE_PLACE_CLEAN, 4 },
		{ { "0000:50:00.2", NULL }, STORE_PLACE_SUSPECT, 0 },
		{ { "0000:50:00.3", NULL }, STORE_PLACE_FAILING, 0 },
		{ { "0000:50:00.6", NULL }, STORE_PLACE_HELD_BACK, 0 },
	};

	for (uint64_t seed = 0; seed < 50; seed++) {
		size_t n = 99, at = 0;
		ck_assert_int_eq(placement_order(STORE_MODE_ENFORCE, placement_vfs,
						 ARRAY_SIZE(placement_vfs), seed, out, &n),
				 0);
		/* out of service and claimed are not allocatable */
		ck_assert_uint_eq(n, 10);
		for (size_t w = 0; w < ARRAY_SIZE(want); w++) {
			size_t k = want[w].vf[1] ? 2 : 1;
			for (size_t j = 0; j < k; j++) {
				size_t i = where(out, n, want[w].vf[j]);
				ck_assert_msg(i >= at && i < at + k, "%s at %zu, want %zu..%zu",
					      want[w].vf[j], i, at, at + k - 1);
				ck_assert_int_eq(out[i].group, want[w].group);
				ck_assert_uint_eq(out[i].parent_rank, want[w].parent_rank);
			}
			at += k;
		}
	}
	/* observe mode: the VFs enforcement refuses rank with the held-back,
	 * by their parent: 40:00.6 (PF 41, one out) before PF 61's three */
	size_t n = 0;
	ck_assert_int_eq(placement_order(STORE_MODE_OBSERVE, placement_vfs,
					 ARRAY_SIZE(placement_vfs), 42, out, &n),
			 0);
	ck_assert_uint_eq(n, 14);
	ck_assert_str_eq(out[9].vf, "0000:50:00.6");
	ck_assert_str_eq(out[10].vf, "0000:40:00.6");
	for (size_t i = 9; i < n; i++)
		ck_assert_int_eq(out[i].group, STORE_PLACE_HELD_BACK);
	for (size_t i = 11; i < n; i++)
		ck_assert(strncmp(out[i].vf, "0000:60:00.", 11) == 0);
}
END_TEST

/* Cards ranked by how many of their VFs are out: three GPUs with 1, 2 and
 * 3 VFs out (claims and the VFs' own evidence do not count) come out in
 * that order, whatever the draw. */
START_TEST(placement_parents)
{
	static const struct placement_vf vfs[] = {
		{ "0000:41:00.1", "0000:41:00.0", true, false, false, false, false, false },
		{ "0000:41:00.2", "0000:41:00.0", true, false, false, false, false, false },
		{ "0000:41:00.3", "0000:41:00.0", true, false, false, false, false, false },
		{ "0000:41:00.4", "0000:41:00.0", false, false, false, false, false, false },
		{ "0000:42:00.1", "0000:42:00.0", true, false, false, false, false, false },
		{ "0000:42:00.2", "0000:42:00.0", false, true, false, false, false, false },
		{ "0000:42:00.3", "0000:42:00.0", false, false, false, false, false, false },
		{ "0000:43:00.1", "0000:43:00.0", true, false, false, false, false, false },
		{ "0000:43:00.2", "0000:43:00.0", true, false, false, false, false, false },
		{ "0000:43:00.3", "0000:43:00.0", false, false, false, true, false, false },
		{ "0000:43:00.4", "0000:43:00.0", false, false, false, false, false, false },
	};
	struct store_placement out[ARRAY_SIZE(vfs)];

	for (uint64_t seed = 0; seed < 50; seed++) {
		size_t n = 0;
		ck_assert_int_eq(placement_order(STORE_MODE_ENFORCE, vfs, ARRAY_SIZE(vfs), seed,
						 out, &n),
				 0);
		ck_assert_uint_eq(n, 4);
		ck_assert_str_eq(out[0].vf, "0000:42:00.3"); /* 1 out */
		ck_assert_uint_eq(out[0].parent_rank, 2);
		ck_assert_str_eq(out[1].vf, "0000:43:00.4"); /* 2 out */
		ck_assert_uint_eq(out[1].parent_rank, 3);
		ck_assert_str_eq(out[2].vf, "0000:41:00.4"); /* 3 out */
		ck_assert_uint_eq(out[2].parent_rank, 4);
		ck_assert_str_eq(out[3].vf, "0000:43:00.3"); /* suspect: after every clean VF */
		ck_assert_int_eq(out[3].group, STORE_PLACE_SUSPECT);
	}
}
END_TEST

/* The draw: one seed, one order; the seeds give every order of three
 * equals, and nothing moves across groups. */
START_TEST(placement_shuffle)
{
	static const struct placement_vf vfs[] = {
		{ "0000:50:00.1", "0000:51:00.0", false, false, false, false, false, false },
		{ "0000:50:00.2", "0000:51:00.0", false, false, false, false, false, false },
		{ "0000:50:00.3", "0000:51:00.0", false, false, false, false, false, false },
		{ "0000:50:00.4", "0000:51:00.0", false, false, false, true, false, false },
		{ "0000:70:00.4", "", false, false, false, false, false, false },
	};
	struct store_placement a[ARRAY_SIZE(vfs)], b[ARRAY_SIZE(vfs)];
	size_t n = 0, m = 0;
	bool seen[3][3] = { { false } };

	ck_assert_int_eq(placement_order(STORE_MODE_ENFORCE, vfs, ARRAY_SIZE(vfs), 7, a, &n), 0);
	ck_assert_int_eq(placement_order(STORE_MODE_ENFORCE, vfs, ARRAY_SIZE(vfs), 7, b, &m), 0);
	ck_assert_uint_eq(n, m);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(a[i].vf, b[i].vf);
		ck_assert_int_eq(a[i].group, b[i].group);
	}
	for (uint64_t seed = 0; seed < 200; seed++) {
		ck_assert_int_eq(placement_order(STORE_MODE_ENFORCE, vfs, ARRAY_SIZE(vfs), seed, a,
						 &n),
				 0);
		ck_assert_str_eq(a[3].vf, "0000:70:00.4");
		ck_assert_str_eq(a[4].vf, "0000:50:00.4");
		/* which of the three equals comes at which of their places */
		for (size_t i = 0; i < 3; i++)
			for (size_t j = 0; j < 3; j++)
				if (strcmp(a[i].vf, vfs[j].vf) == 0)
					seen[i][j] = true;
	}
	for (size_t i = 0; i < 3; i++)
		for (size_t j = 0; j < 3; j++)
			ck_assert_msg(seen[i][j], "%s never drawn at place %zu", vfs[j].vf, i);
	uint64_t seed = 0;
	ck_assert_int_eq(placement_seed(&seed), 0);
}
END_TEST

/* Every (state, event) pair of a reservation: the table in rules.h, no
 * other transition. */
START_TEST(reservation_transitions)
{
	static const struct {
		enum reservation_state from;
		enum reservation_event ev;
		int to; /* -EINVAL: no transition */
	} table[] = {
		{ RESERVATION_NONE, RESERVATION_MADE, RESERVATION_HELD },
		{ RESERVATION_NONE, RESERVATION_ABANDONED, -EINVAL },
		{ RESERVATION_NONE, RESERVATION_COMMITTED, -EINVAL },
		{ RESERVATION_NONE, RESERVATION_CANCELLED, -EINVAL },
		{ RESERVATION_HELD, RESERVATION_MADE, -EINVAL },
		{ RESERVATION_HELD, RESERVATION_ABANDONED, RESERVATION_KEPT },
		{ RESERVATION_HELD, RESERVATION_COMMITTED, RESERVATION_NONE },
		{ RESERVATION_HELD, RESERVATION_CANCELLED, RESERVATION_NONE },
		{ RESERVATION_KEPT, RESERVATION_MADE, -EINVAL },
		{ RESERVATION_KEPT, RESERVATION_ABANDONED, -EINVAL },
		{ RESERVATION_KEPT, RESERVATION_COMMITTED, RESERVATION_NONE },
		{ RESERVATION_KEPT, RESERVATION_CANCELLED, RESERVATION_NONE },
	};

	for (size_t i = 0; i < ARRAY_SIZE(table); i++)
		ck_assert_msg(rule_reservation_next(table[i].from, table[i].ev) == table[i].to,
			      "row %zu: %d, want %d", i,
			      rule_reservation_next(table[i].from, table[i].ev), table[i].to);
}
END_TEST

/* Every (phase, event) pair of a GPU, with and without claims and another
 * GPU recovering: the table in rules.h, no other transition. */
START_TEST(gpu_transitions)
{
	enum {
		S = GPU_PHASE_SERVING,
		D = GPU_PHASE_DRAIN,
		R = GPU_PHASE_RECOVERING,
		F = GPU_PHASE_FAILED,
		B = -EBUSY,
		I = -EINVAL
	};
	/* [phase][event]: free (no claim, no other cycle) */
	static const int free_[4][6] = {
		/* drain undrain recover recovered failed interrupted */
		[S] = { D, S, B, I, I, I },
		[D] = { D, S, R, I, I, I },
		[R] = { R, B, B, S, F, F },
		[F] = { F, S, R, I, I, I },
	};

	for (int p = 0; p < GPU_PHASE_COUNT; p++)
		for (int ev = 0; ev <= GPU_EV_INTERRUPTED; ev++) {
			int want = free_[p][ev];
			ck_assert_msg(rule_gpu_next(p, ev, false, false) == want,
				      "phase %d event %d: %d, want %d", p, ev,
				      rule_gpu_next(p, ev, false, false), want);
			/* a claim or another cycle refuses only the start of a cycle */
			int busy = ev == GPU_EV_RECOVER ? B : want;
			ck_assert_int_eq(rule_gpu_next(p, ev, true, false), busy);
			ck_assert_int_eq(rule_gpu_next(p, ev, false, true), busy);
		}
	ck_assert_int_eq(rule_gpu_next(GPU_PHASE_COUNT, GPU_EV_DRAIN, false, false), -EINVAL);
}
END_TEST

static Suite *rules_suite(void)
{
	const TTest *tests[] = { threshold_cap_and_breaker,
				 failure_reports,
				 success_and_reevaluation,
				 refusals,
				 vf_state,
				 parent_and_placement,
				 placement_groups,
				 placement_parents,
				 placement_shuffle,
				 reservation_transitions,
				 gpu_transitions,
				 crash_suspect };
	Suite *suite = suite_create("store-rules");
	TCase *tc = check_tcase("rules", 30);

	for (size_t i = 0; i < ARRAY_SIZE(tests); i++)
		_tcase_add_test(tc, tests[i], 0, 0, 0, 1);
	suite_add_tcase(suite, tc);
	return suite;
}

CHECK_MAIN(rules_suite)
