/* SPDX-License-Identifier: MIT */
/*
 * test_rules.c - the store's decision rules (store/rules.h) as pure
 * functions: each rule's boundaries, so a change to one shows here before it
 * shows in the store's behaviour (tests/store/test_store.c).
 */
#include <check.h>
#include <errno.h>

#include "proto/cleanup.h"
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
	ck_assert(!rule_cap_allows(2, 3)); /* manual quarantines ignore the cap */

	/* held back only when not quarantined */
	ck_assert(rule_held_back(false, 2, 2));
	ck_assert(!rule_held_back(true, 2, 2));
	ck_assert(!rule_held_back(false, 1, 2));

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
	/* failure unchanged when quarantined or duplicate */
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
	ck_assert_int_eq(rule_after_failure(1, 2, 0, 0), RULE_RECORD);
	ck_assert_int_eq(rule_after_failure(1, 2, 1, 5), RULE_RECORD);
	/* meets it: quarantined while the cap allows */
	ck_assert_int_eq(rule_after_failure(2, 2, 0, 100), RULE_QUARANTINE);
	ck_assert_int_eq(rule_after_failure(2, 2, 3, 2), RULE_QUARANTINE);
	ck_assert_int_eq(rule_after_failure(5, 2, 3, 2), RULE_QUARANTINE);
	/* the cap is reached: held back, the breaker engages */
	ck_assert_int_eq(rule_after_failure(2, 2, 3, 3), RULE_HOLD_BACK);
	ck_assert_int_eq(rule_after_failure(1, 1, 1, 1), RULE_HOLD_BACK);
}
END_TEST

START_TEST(success_and_reevaluation)
{
	/* success rescinds only an automatic quarantine with nothing left */
	ck_assert(rule_success_rescinds(0, true, false));
	ck_assert(!rule_success_rescinds(1, true, false)); /* older failures remain */
	ck_assert(!rule_success_rescinds(0, true, true));  /* manual: never by a success */
	ck_assert(!rule_success_rescinds(0, false, false)); /* nothing to lift */

	/* reevaluate takes up to the cap */
	ck_assert_uint_eq(rule_reevaluate_take(0, 7, 5), 5); /* no cap: all */
	ck_assert_uint_eq(rule_reevaluate_take(10, 7, 5), 3);
	ck_assert_uint_eq(rule_reevaluate_take(10, 2, 5), 5);
	ck_assert_uint_eq(rule_reevaluate_take(3, 3, 5), 0);
	ck_assert_uint_eq(rule_reevaluate_take(3, 4, 5), 0); /* over the cap (manual) */
	ck_assert_uint_eq(rule_reevaluate_take(3, 0, 0), 0);
}
END_TEST

START_TEST(refusals)
{
	/* claim refusals */
	ck_assert_int_eq(rule_claim_refusal(false, NULL, "vm-a"), 0);
	ck_assert_int_eq(rule_claim_refusal(true, NULL, "vm-a"), -EBUSY);
	ck_assert_int_eq(rule_claim_refusal(false, "vm-a", "vm-a"), -EEXIST);
	ck_assert_int_eq(rule_claim_refusal(false, "vm-b", "vm-a"), -EBUSY);
	/* a quarantined VF is refused before the holder is compared */
	ck_assert_int_eq(rule_claim_refusal(true, "vm-a", "vm-a"), -EBUSY);

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

	/* operator actions that change nothing */
	ck_assert(rule_manual_unchanged(true));
	ck_assert(!rule_manual_unchanged(false));
	ck_assert(rule_clear_unchanged(false, 0));
	ck_assert(!rule_clear_unchanged(true, 0));
	ck_assert(!rule_clear_unchanged(false, 1)); /* held back or below the threshold */
}
END_TEST

static Suite *rules_suite(void)
{
	const TTest *tests[] = { threshold_cap_and_breaker, failure_reports,
				 success_and_reevaluation, refusals };
	Suite *suite = suite_create("store-rules");
	TCase *tc = tcase_create("rules");

	for (size_t i = 0; i < ARRAY_SIZE(tests); i++)
		_tcase_add_test(tc, tests[i], 0, 0, 0, 1);
	suite_add_tcase(suite, tc);
	return suite;
}

CHECK_MAIN(rules_suite)
