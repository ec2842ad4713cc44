/* SPDX-License-Identifier: MIT */
/*
 * test_rules.c - the store's decision rules (store/rules.h) as pure
 * functions: each rule's boundaries, so a change to one shows here before it
 * shows in the store's behaviour (tests/store/test_store.c).
 */
#include <check.h>
#include <errno.h>

#include "store/rules.h"
#include "store/store.h"
#include "tests/common/check-main.h"

START_TEST(threshold_is_met_at_equality)
{
	ck_assert(!rule_meets_threshold(0, 1));
	ck_assert(rule_meets_threshold(1, 1));
	ck_assert(!rule_meets_threshold(1, 2));
	ck_assert(rule_meets_threshold(2, 2));
	ck_assert(rule_meets_threshold(3, 2));
	ck_assert(rule_meets_threshold(STORE_THRESHOLD_MAX, STORE_THRESHOLD_MAX));
}
END_TEST

START_TEST(cap_zero_means_no_cap)
{
	ck_assert(rule_cap_allows(0, 0));
	ck_assert(rule_cap_allows(0, STORE_MAX_VFS));
	ck_assert(rule_cap_allows(2, 1));
	ck_assert(!rule_cap_allows(2, 2));
	ck_assert(!rule_cap_allows(2, 3)); /* manual quarantines ignore the cap */
}
END_TEST

START_TEST(held_back_only_when_not_quarantined)
{
	ck_assert(rule_held_back(false, 2, 2));
	ck_assert(!rule_held_back(true, 2, 2));
	ck_assert(!rule_held_back(false, 1, 2));
}
END_TEST

START_TEST(breaker_needs_cap_reached_and_a_held_back_vf)
{
	ck_assert(!rule_breaker_engaged(0, 5, 1)); /* no cap */
	ck_assert(!rule_breaker_engaged(2, 1, 1)); /* cap not reached */
	ck_assert(!rule_breaker_engaged(2, 2, 0)); /* reached, nothing held back */
	ck_assert(rule_breaker_engaged(2, 2, 1));
	ck_assert(rule_breaker_engaged(2, 3, 4));
}
END_TEST

START_TEST(failure_unchanged_when_quarantined_or_duplicate)
{
	ck_assert(rule_failure_unchanged(true, false));
	ck_assert(rule_failure_unchanged(false, true));
	ck_assert(rule_failure_unchanged(true, true));
	ck_assert(!rule_failure_unchanged(false, false));
}
END_TEST

START_TEST(failure_bound_drops_the_oldest)
{
	ck_assert(!rule_failure_drops_oldest(0));
	ck_assert(!rule_failure_drops_oldest(STORE_MAX_FAILURES_PER_VF - 1));
	ck_assert(rule_failure_drops_oldest(STORE_MAX_FAILURES_PER_VF));
}
END_TEST

START_TEST(after_failure_record_quarantine_or_hold_back)
{
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

START_TEST(success_rescinds_only_an_automatic_quarantine_with_nothing_left)
{
	ck_assert(rule_success_rescinds(0, true, false));
	ck_assert(!rule_success_rescinds(1, true, false)); /* older failures remain */
	ck_assert(!rule_success_rescinds(0, true, true));  /* manual: never by a success */
	ck_assert(!rule_success_rescinds(0, false, false)); /* nothing to lift */
}
END_TEST

START_TEST(reevaluate_takes_up_to_the_cap)
{
	ck_assert_uint_eq(rule_reevaluate_take(0, 7, 5), 5); /* no cap: all */
	ck_assert_uint_eq(rule_reevaluate_take(10, 7, 5), 3);
	ck_assert_uint_eq(rule_reevaluate_take(10, 2, 5), 5);
	ck_assert_uint_eq(rule_reevaluate_take(3, 3, 5), 0);
	ck_assert_uint_eq(rule_reevaluate_take(3, 4, 5), 0); /* over the cap (manual) */
	ck_assert_uint_eq(rule_reevaluate_take(3, 0, 0), 0);
}
END_TEST

START_TEST(claim_refusals)
{
	ck_assert_int_eq(rule_claim_refusal(false, NULL, "vm-a"), 0);
	ck_assert_int_eq(rule_claim_refusal(true, NULL, "vm-a"), -EBUSY);
	ck_assert_int_eq(rule_claim_refusal(false, "vm-a", "vm-a"), -EEXIST);
	ck_assert_int_eq(rule_claim_refusal(false, "vm-b", "vm-a"), -EBUSY);
	/* a quarantined VF is refused before the holder is compared */
	ck_assert_int_eq(rule_claim_refusal(true, "vm-a", "vm-a"), -EBUSY);
}
END_TEST

START_TEST(unregister_refusals)
{
	ck_assert_int_eq(rule_unregister_refusal(false, 0, false), 0);
	ck_assert_int_eq(rule_unregister_refusal(true, 0, false), -EBUSY);
	ck_assert_int_eq(rule_unregister_refusal(false, 1, false), -EBUSY);
	ck_assert_int_eq(rule_unregister_refusal(false, 0, true), -EBUSY);
}
END_TEST

START_TEST(operator_actions_that_change_nothing)
{
	ck_assert(rule_manual_unchanged(true));
	ck_assert(!rule_manual_unchanged(false));
	ck_assert(rule_clear_unchanged(false, 0));
	ck_assert(!rule_clear_unchanged(true, 0));
	ck_assert(!rule_clear_unchanged(false, 1)); /* held back or below the threshold */
}
END_TEST

static Suite *rules_suite(void)
{
	Suite *suite = suite_create("store-rules");
	TCase *tc = tcase_create("rules");

	tcase_add_test(tc, threshold_is_met_at_equality);
	tcase_add_test(tc, cap_zero_means_no_cap);
	tcase_add_test(tc, held_back_only_when_not_quarantined);
	tcase_add_test(tc, breaker_needs_cap_reached_and_a_held_back_vf);
	tcase_add_test(tc, failure_unchanged_when_quarantined_or_duplicate);
	tcase_add_test(tc, failure_bound_drops_the_oldest);
	tcase_add_test(tc, after_failure_record_quarantine_or_hold_back);
	tcase_add_test(tc, success_rescinds_only_an_automatic_quarantine_with_nothing_left);
	tcase_add_test(tc, reevaluate_takes_up_to_the_cap);
	tcase_add_test(tc, claim_refusals);
	tcase_add_test(tc, unregister_refusals);
	tcase_add_test(tc, operator_actions_that_change_nothing);
	suite_add_tcase(suite, tc);
	return suite;
}

CHECK_MAIN(rules_suite)
