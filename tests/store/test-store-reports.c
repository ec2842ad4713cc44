/* SPDX-License-Identifier: MIT */
/*
 * test-store-reports.c - the store's rules (store/store.h) of failure and success reports;
 * the threshold, dedupe, rescind, holds, the breaker, the failures kept.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-reports.h, the list this suite runs.
 *
 * Design notes: the concurrency cases start threads that only call the store
 * and are joined before the case ends; waiting is on conditions (the shim's
 * blocked-sync count, thread joins with deadlines), never on sleeps.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>
#include "faultvfs.h"
#include "store-cases-reports.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

START_TEST(threshold_default_bounds_persist)
{
	struct store *s = open_store();
	struct store_options bad = { .path = db_path, .threshold = 1001, .max_quarantined = -1 };
	struct store *other = NULL;

	ck_assert_int_eq(store_threshold_get(s), THRESHOLD_DEFAULT);
	ck_assert_int_eq(store_threshold_set(s, 0), -EINVAL);
	ck_assert_int_eq(store_threshold_set(s, 1001), -EINVAL);
	ck_assert_int_eq(store_threshold_set(s, -3), -EINVAL);
	ck_assert_int_eq(store_threshold_get(s), 2);
	ck_assert_int_eq(store_open(&bad, &other), -EINVAL);
	bad.threshold = -1;
	ck_assert_int_eq(store_open(&bad, &other), -EINVAL);
	ck_assert_int_eq(store_threshold_set(s, 1000), 0);
	ck_assert_int_eq(store_threshold_set(s, 7), 0);
	ck_assert_int_eq(store_threshold_get(s), 7);
	s = reopen(s);
	ck_assert_int_eq(store_threshold_get(s), 7);
	ck_assert_int_eq(db_query("SELECT value FROM meta WHERE key = 'threshold'"), 7);
	store_close(s);
}
END_TEST

START_TEST(threshold_reevaluate_on_set)
{
	struct store *s = open_store();

	ck_assert_int_eq(store_threshold_set(s, 3), 0);
	reg(s, VF_A);
	reg(s, VF_B);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_B, "i-3", T3), STORE_OUTCOME_RECORDED);
	ck_assert(!info(s, VF_A).quarantined);

	ck_assert_int_eq(store_threshold_set(s, 2), 0);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(info(s, VF_A).auto_quarantined);
	ck_assert(!info(s, VF_A).held);
	ck_assert(!info(s, VF_B).quarantined);
	/* raising never lifts */
	ck_assert_int_eq(store_threshold_set(s, 10), 0);
	ck_assert(info(s, VF_A).quarantined);
	s = reopen(s);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(!info(s, VF_B).quarantined);
	ck_assert_int_eq(store_threshold_get(s), 10);
	store_close(s);
}
END_TEST

START_TEST(threshold_reevaluate_on_open)
{
	struct store *s = open_with(5, -1, NULL);

	reg(s, VF_A);
	reg(s, VF_B);
	report_fail(s, VF_A, "i-1", T1);
	report_fail(s, VF_A, "i-2", T2);
	report_fail(s, VF_B, "i-3", T3);
	ck_assert(!info(s, VF_A).quarantined);
	store_close(s);

	s = open_with(2, -1, NULL); /* a lower configured value */
	ck_assert_int_eq(store_threshold_get(s), 2);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(!info(s, VF_B).quarantined);
	ck_assert_uint_ge(commits(s), 1);
	ck_assert_int_eq(db_query("SELECT quarantined FROM vfs WHERE address = '" VF_A "'"), 1);
	store_close(s);
}
END_TEST

START_TEST(threshold_reopen_same_value_changes_nothing)
{
	struct store *s = open_with(3, -1, NULL);

	reg(s, VF_A);
	report_fail(s, VF_A, "i-1", T1);
	report_fail(s, VF_A, "i-2", T2);
	store_close(s);
	/* an older build lowered the stored threshold without re-evaluating */
	db_write("UPDATE meta SET value = 2 WHERE key = 'threshold'");

	s = open_with(2, -1, NULL); /* same as stored: no re-evaluation */
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_uint_eq(info(s, VF_A).tally, 2);
	ck_assert_uint_eq(commits(s), 0);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT quarantined FROM vfs"), 0);

	s = open_with(0, -1, NULL); /* keep: likewise */
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_uint_eq(commits(s), 0);
	store_close(s);

	s = open_with(1, -1, NULL); /* different: re-evaluates */
	ck_assert(info(s, VF_A).quarantined);
	store_close(s);
}
END_TEST

START_TEST(failure_dedupe)
{
	struct store *s = open_with(3, -1, NULL);
	struct store_failure_result r;

	reg(s, VF_A);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-1", "2026-11-29T07:00:01.5Z", "m", &r),
			 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_RECORDED);
	ck_assert_uint_eq(r.tally, 1);
	ck_assert_int_eq(r.threshold, 3);
	/* the same assignment spelled differently is the same identity */
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-1", "2026-11-29t07:00:01.500000000z", "m",
					      &r),
			 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_UNCHANGED);
	ck_assert_uint_eq(r.tally, 1);
	/* the same identity on another VF is another failure */
	reg(s, VF_B);
	ck_assert_int_eq(report_fail(s, VF_B, "i-1", "2026-11-29T07:00:01.5Z"),
			 STORE_OUTCOME_RECORDED);
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	/* another assignment of the same instance, or unknown assigned_at, counts */
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T2), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-2", NULL, "m", &r), 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_QUARANTINED);
	ck_assert_uint_eq(r.tally, 3);
	/* the decision names the instances behind it, oldest first */
	ck_assert_uint_eq(r.n_instances, 2);
	ck_assert(!r.more_instances);
	ck_assert_str_eq(r.instances[0].instance_id, "i-1");
	ck_assert_uint_eq(r.instances[0].assignments, 2);
	ck_assert_str_eq(r.instances[1].instance_id, "i-2");
	ck_assert_uint_eq(r.instances[1].assignments, 1);
	s = reopen(s);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", ""), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", NULL), STORE_OUTCOME_UNCHANGED);
	s = reopen(s);
	/* polling is idempotent across restarts */
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", ""), STORE_OUTCOME_UNCHANGED);
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.failed_reports[STORE_OUTCOME_UNCHANGED], 1);
	store_close(s);
}
END_TEST

START_TEST(failure_on_quarantined_unchanged)
{
	struct store *s = open_store();
	struct store_failure_result r;

	reg(s, VF_A);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	uint64_t before = commits(s);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-3", T3, "m", &r), 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_UNCHANGED);
	ck_assert_uint_eq(r.tally, 2);
	ck_assert_uint_eq(info(s, VF_A).tally, 2);
	ck_assert_uint_eq(commits(s), before);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures"), 2);
	store_close(s);
}
END_TEST

START_TEST(failure_message_and_stamp)
{
	struct store *s = open_with(10, -1, NULL);
	char before[RFC3339_BUFSZ], after[RFC3339_BUFSZ];
	char long_message[3000];
	struct store_failure *f;
	size_t n;

	reg(s, VF_A);
	memset(long_message, 'x', sizeof(long_message) - 1);
	long_message[sizeof(long_message) - 1] = '\0';
	rfc3339_now(before);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-1", T1, "a\nb\tc\x1b[31m\x7f", NULL), 0);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-2", T2, long_message, NULL), 0);
	rfc3339_now(after);
	s = reopen(s);
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(f[0].message, "a b c [31m ");
	ck_assert_str_eq(f[0].instance_id, "i-1");
	ck_assert_str_eq(f[0].assigned_at, T1);
	ck_assert_uint_eq(strlen(f[1].message), FAILURE_MESSAGE_MAX);
	ck_assert_uint_eq(strlen(f[0].reported_at), RFC3339_NANO_LEN);
	ck_assert_str_ge(f[0].reported_at, before);
	ck_assert_str_le(f[1].reported_at, after);
	free(f);
	store_close(s);
}
END_TEST

/* The listing is read from SQLite and the mirror's keys are loaded from an
 * index ordered by instance id, not by insertion: after a reopen every
 * message and reported_at must still be there, oldest first, and dedupe and
 * the success rule must still decide by exactly (instance_id, assigned_at)
 * ("" distinct from any time, 1 ns apart distinct).  A store that could not
 * open the database lists nothing. */
START_TEST(failure_listing_survives_reopen)
{
	static const struct {
		const char *vf, *instance_id, *assigned_at;
	} reports[] = {
		{ VF_A, "zz-first", T3 },
		{ VF_B, "b-1", T1 },
		{ VF_A, "mm-second", "" },
		{ VF_A, "aa-third", T1 },
		{ VF_B, "b-2", "" },
		{ VF_A, "mm-second", T2 },
		{ VF_A, "aa-third", "2026-11-29T07:00:01.000000001Z" },
	};
	static const size_t vf_a[] = { 0, 2, 3, 5, 6 }; /* reports[] of VF_A, oldest first */
	struct store *s = open_with(100, -1, FAULTVFS_NAME);
	struct store_failure_result r;
	struct store_failure *before, *f;
	size_t n_before, n;
	char message[64];

	reg(s, VF_A);
	reg(s, VF_B);
	for (size_t i = 0; i < ARRAY_SIZE(reports); i++) {
		snprintf(message, sizeof(message), "message %zu of %s", i, reports[i].vf);
		ck_assert_int_eq(store_report_failure(s, reports[i].vf, reports[i].instance_id,
						      reports[i].assigned_at, message, &r),
				 0);
		ck_assert_int_eq(r.outcome, STORE_OUTCOME_RECORDED);
	}
	ck_assert_int_eq(store_failure_list(s, VF_A, &before, &n_before), 0);
	ck_assert_uint_eq(n_before, ARRAY_SIZE(vf_a));

	s = reopen(s);
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), 0);
	ck_assert_uint_eq(n, ARRAY_SIZE(vf_a));
	for (size_t j = 0; j < n; j++) {
		const size_t i = vf_a[j];
		snprintf(message, sizeof(message), "message %zu of %s", i, VF_A);
		ck_assert_str_eq(f[j].message, message);
		ck_assert_str_eq(f[j].instance_id, reports[i].instance_id);
		ck_assert_str_eq(f[j].assigned_at, reports[i].assigned_at);
		ck_assert_uint_eq(strlen(f[j].reported_at), RFC3339_NANO_LEN);
		ck_assert_str_eq(f[j].reported_at, before[j].reported_at);
		if (j > 0)
			ck_assert_str_le(f[j - 1].reported_at, f[j].reported_at);
	}
	free(f);
	ck_assert_int_eq(store_failure_list(s, VF_B, &f, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(f[0].message, "message 1 of " VF_B);
	ck_assert_str_eq(f[1].message, "message 4 of " VF_B);
	ck_assert_str_eq(f[1].assigned_at, "");
	free(f);

	/* the reloaded keys: every recorded report is a duplicate ... */
	for (size_t i = 0; i < ARRAY_SIZE(reports); i++)
		ck_assert_int_eq(report_fail(s, reports[i].vf, reports[i].instance_id,
					     reports[i].assigned_at),
				 STORE_OUTCOME_UNCHANGED);
	ck_assert_uint_eq(info(s, VF_A).tally, ARRAY_SIZE(vf_a));
	/* ... the success rule clears the match and everything older ... */
	struct store_success_result o = ok(s, VF_A, "aa-third", T1);
	ck_assert_uint_eq(o.cleared, 3);
	ck_assert(!o.rescinded);
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(f[0].message, "message 5 of " VF_A);
	ck_assert_str_eq(f[0].reported_at, before[3].reported_at);
	ck_assert_str_eq(f[1].message, "message 6 of " VF_A);
	ck_assert_str_eq(f[1].reported_at, before[4].reported_at);
	free(f);
	free(before);
	/* ... and a near miss is a new failure */
	ck_assert_int_eq(report_fail(s, VF_A, "aa-third", T2), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "mm-second", ""), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "mm-second", "2026-11-29T07:00:02.000000001Z"),
			 STORE_OUTCOME_RECORDED);
	ck_assert_uint_eq(ok(s, VF_A, "aa-third", "2026-11-29T07:00:02.000000001Z").cleared, 0);
	ck_assert_uint_eq(info(s, VF_A).tally, 5);

	/* a store whose database could not be opened lists nothing */
	store_close(s);
	db_write("PRAGMA user_version = 99"); /* newer than this code */
	s = open_store();
	ck_assert(!store_status(s, NULL, 0));
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), -EIO);
	store_close(s);
}
END_TEST

START_TEST(report_bad_input_changes_nothing)
{
	struct store *s = open_store();
	struct store_failure_result r;
	struct store_success_result o;
	char long_id[INSTANCE_ID_MAX + 2];

	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	reg(s, VF_A);
	uint64_t before = commits(s);
	ck_assert_int_eq(store_report_failure(s, "0000:41:00.9", "i-1", T1, "m", &r), -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_A, "", T1, "m", &r), -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_A, ".hidden", T1, "m", &r), -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i/1", T1, "m", &r), -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_A, long_id, T1, "m", &r), -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-1", "yesterday", "m", &r), -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-1", "2026-02-30T00:00:00Z", "m", &r),
			 -EINVAL);
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-1", T1, "m", &r), -ENOENT);
	ck_assert_int_eq(store_report_success(s, VF_A, "i 1", T1, -1, &o), -EINVAL);
	ck_assert_int_eq(store_report_success(s, VF_A, "i-1", "now", -1, &o), -EINVAL);
	ck_assert_int_eq(store_report_success(s, VF_B, "i-1", T1, -1, &o), -ENOENT);
	ck_assert_uint_eq(commits(s), before);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	store_close(s);
}
END_TEST

START_TEST(success_rescind_example)
{
	struct store *s = open_store();

	reg(s, VF_A);
	report_fail(s, VF_A, "i1", T1);
	ck_assert_int_eq(report_fail(s, VF_A, "i2", T2), STORE_OUTCOME_QUARANTINED);

	struct store_success_result r = ok(s, VF_A, "i1", T1);
	ck_assert_uint_eq(r.cleared, 1);
	ck_assert(!r.rescinded);
	struct store_vf_info i = info(s, VF_A);
	ck_assert(i.quarantined);
	ck_assert_uint_eq(i.tally, 1);
	assert_failures(s, VF_A, 1, "i2");

	r = ok(s, VF_A, "i2", T2);
	ck_assert_uint_eq(r.cleared, 1);
	ck_assert(r.rescinded);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	s = reopen(s);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_at IS NULL"), 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures"), 2); /* kept as history */
	store_close(s);
}
END_TEST

START_TEST(success_removes_older_failures)
{
	struct store *s = open_with(10, -1, NULL);

	reg(s, VF_A);
	report_fail(s, VF_A, "a", T1);
	report_fail(s, VF_A, "b", T2);
	report_fail(s, VF_A, "c", T3);
	report_fail(s, VF_A, "d", "");
	/* no exact match (other assigned_at): nothing */
	struct store_success_result r = ok(s, VF_A, "b", T1);
	ck_assert_uint_eq(r.cleared, 0);
	ck_assert_uint_eq(info(s, VF_A).tally, 4);

	r = ok(s, VF_A, "c", T3);
	ck_assert_uint_eq(r.cleared, 3);
	ck_assert(!r.rescinded);
	assert_failures(s, VF_A, 1, "d");
	s = reopen(s);
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	r = ok(s, VF_A, "d", NULL);
	ck_assert_uint_eq(r.cleared, 1);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.ok_reports_cleared, 1);
	store_close(s);
}
END_TEST

START_TEST(success_fast_path_clean_vf)
{
	struct store *s = open_store();

	reg(s, VF_A);
	uint64_t before = commits(s);
	struct store_success_result r = ok(s, VF_A, "i-1", T1);
	ck_assert_uint_eq(r.cleared, 0);
	ck_assert(!r.rescinded);
	ck_assert_uint_eq(commits(s), before);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.ok_reports_noop, 1);
	store_close(s);
}
END_TEST

START_TEST(manual_quarantine_not_lifted_by_success)
{
	struct store *s = open_with(5, -1, NULL);

	reg(s, VF_A);
	reg(s, VF_B);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(info(s, VF_A).held);
	ck_assert(!info(s, VF_A).auto_quarantined);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	uint64_t before = commits(s);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0); /* no-op */
	ck_assert_uint_eq(commits(s), before);
	struct store_success_result r = ok(s, VF_A, "i-1", T1);
	ck_assert(!r.rescinded);

	/* manual on top of recorded failures: clearing them does not lift it */
	report_fail(s, VF_B, "i-1", T1);
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, NULL), 0);
	r = ok(s, VF_B, "i-1", T1);
	ck_assert_uint_eq(r.cleared, 1);
	ck_assert(!r.rescinded);
	ck_assert(info(s, VF_B).quarantined);
	s = reopen(s);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(info(s, VF_A).held);
	ck_assert(info(s, VF_B).quarantined);
	store_close(s);
}
END_TEST

START_TEST(operator_clear)
{
	struct store *s = open_store();

	reg(s, VF_A);
	reg(s, VF_B);
	report_fail(s, VF_A, "i-1", T1);
	report_fail(s, VF_A, "i-2", T2);
	ck_assert(info(s, VF_A).quarantined);
	struct store_operator_result o;
	ck_assert_int_eq(store_clear(s, VF_A, -1, &o), 0);
	ck_assert(!o.unchanged && o.auto_quarantined && !o.held && o.quarantined);
	ck_assert_uint_eq(o.tally, 2);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	uint64_t before = commits(s);
	ck_assert_int_eq(store_clear(s, VF_B, -1, &o), 0); /* clean: no-op */
	ck_assert(o.unchanged);
	ck_assert_uint_eq(commits(s), before);
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, &o), 0);
	ck_assert(!o.unchanged && !o.held);
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, &o), 0);
	ck_assert(o.unchanged && o.held);
	ck_assert_uint_eq(commits(s), before + 1);
	ck_assert_int_eq(store_clear(s, VF_B, -1, NULL), 0);
	ck_assert_int_eq(store_clear(s, VF_C, -1, NULL), -ENOENT);
	s = reopen(s);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_at IS NULL"), 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_why = 'operator'"),
			 2); /* kept as history */
	/* the old identities count afresh */
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	store_close(s);
}
END_TEST

/* Issue 11.5: `echo 1` sets a hold, also on an automatically quarantined VF;
 * no success lifts it; `echo 0` lifts hold, quarantine and failures. */
START_TEST(hold_sticky_over_quarantine)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-9" };

	reg(s, VF_A);
	report_fail(s, VF_A, "i-1", T1);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	struct store_vf_info q = info(s, VF_A);
	ck_assert_int_eq(q.state, STORE_VF_QUARANTINED);
	ck_assert_uint_ne(strlen(q.since), 0);

	/* the hold goes on top of the quarantine: a change, not a no-op */
	uint64_t before = commits(s);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	ck_assert_uint_eq(commits(s), before + 1);
	struct store_vf_info h = info(s, VF_A);
	ck_assert(h.held && h.auto_quarantined && h.quarantined);
	ck_assert_int_eq(h.state, STORE_VF_HELD);
	ck_assert_str_eq(h.since, q.since); /* out of service since the quarantine */

	/* the triggering assignment succeeds: failures go, the hold stays */
	struct store_success_result r = ok(s, VF_A, "i-2", T2);
	ck_assert_uint_eq(r.cleared, 2);
	ck_assert(!r.rescinded);
	h = info(s, VF_A);
	ck_assert(h.quarantined && h.held && !h.auto_quarantined);
	ck_assert_uint_eq(h.tally, 0);
	ck_assert_int_eq(h.state, STORE_VF_HELD);
	ck_assert_str_eq(h.since, q.since);
	ck_assert_int_eq(store_claim(s, &c, NULL), -EBUSY);
	/* a failure on a held VF changes nothing */
	ck_assert_int_eq(report_fail(s, VF_A, "i-3", T3), STORE_OUTCOME_UNCHANGED);
	s = reopen(s);
	h = info(s, VF_A);
	ck_assert(h.quarantined && h.held);
	ck_assert_str_eq(h.since, q.since);
	char(*list)[VF_ADDR_BUFSZ];
	size_t n;
	ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &list, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(list[0], VF_A);
	free(list);

	/* echo 0 lifts everything */
	report_fail(s, VF_A, "i-4", T3); /* unchanged: held */
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), 0);
	h = info(s, VF_A);
	ck_assert(!h.quarantined && !h.held && !h.auto_quarantined);
	ck_assert_int_eq(h.state, STORE_VF_OK);
	ck_assert_str_eq(h.since, "");
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);

	/* a hold on a VF with failures, quarantined on top of nothing: clear
	 * drops both the hold and the failures */
	ck_assert_int_eq(store_release(s, VF_A, "i-9", NULL), 0);
	report_fail(s, VF_A, "i-5", T1);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_FAILING);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), 0);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_OK);
	s = reopen(s);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_OK);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM vfs WHERE held = 1 OR quarantined = 1"
				  " OR quarantined_at IS NOT NULL"),
			 0);
	store_close(s);
}
END_TEST

/* Issue 11.6: the cap counts automatic quarantines only; the held-back VFs
 * are listed and notified. */
static void collect_change_bits(void *userdata, const struct store_change *c)
{
	*(unsigned *)userdata |= c->bits;
}

START_TEST(breaker_counts_automatic_only)
{
	struct store *s = open_with(2, 1, FAULTVFS_NAME);
	char(*list)[VF_ADDR_BUFSZ];
	size_t n;
	struct store_stats st;
	unsigned bits = 0;

	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, VF_C);
	/* a hold (drained for maintenance) does not use the cap of 1 */
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	report_fail(s, VF_B, "i-1", T1);
	ck_assert_int_eq(report_fail(s, VF_B, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	/* the cap is now reached by B's automatic quarantine: C is held back */
	report_fail(s, VF_C, "i-3", T1);
	ck_assert_int_eq(store_subscribe(s, collect_change_bits, &bits), 0);
	struct store_failure_result r;
	ck_assert_int_eq(store_report_failure(s, VF_C, "i-4", T2, "m", &r), 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_RECORDED);
	ck_assert(r.breaker_engaged);
	ck_assert(bits & STORE_CHANGE_HELD_BACK);
	ck_assert_int_eq(info(s, VF_C).state, STORE_VF_HELD_BACK);
	ck_assert_str_eq(info(s, VF_C).since, ""); /* in service */
	ck_assert_int_eq(store_held_back_list(s, STORE_READ_RETRY, &list, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(list[0], VF_C);
	free(list);
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.quarantined, 2); /* out of service: A held, B quarantined */
	ck_assert_uint_eq(st.held, 1);
	ck_assert_uint_eq(st.held_back, 1);
	ck_assert(st.breaker_engaged);
	ck_assert_uint_eq(st.allocatable, 1); /* C: held back, still in service */

	s = reopen(s); /* derived: survives */
	ck_assert_int_eq(store_held_back_list(s, STORE_READ_RETRY, &list, &n), 0);
	ck_assert_uint_eq(n, 1);
	free(list);

	/* a hold on the held-back VF takes it out of the set */
	bits = 0;
	ck_assert_int_eq(store_subscribe(s, collect_change_bits, &bits), 0);
	ck_assert_int_eq(store_quarantine_manual(s, VF_C, -1, NULL), 0);
	ck_assert(bits & STORE_CHANGE_HELD_BACK);
	ck_assert(bits & STORE_CHANGE_BREAKER);
	ck_assert_int_eq(store_held_back_list(s, STORE_READ_RETRY, &list, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(list);
	store_get_stats(s, &st);
	ck_assert(!st.breaker_engaged);
	/* lifting the hold drops C's failures: nothing comes back */
	ck_assert_int_eq(store_clear(s, VF_C, -1, NULL), 0);
	ck_assert_int_eq(info(s, VF_C).state, STORE_VF_OK);

	/* raising the cap re-evaluates automatic candidates only: A stays held,
	 * and is never auto-quarantined by it */
	ck_assert_int_eq(store_max_quarantined_set(s, 0), 0);
	ck_assert(!info(s, VF_A).auto_quarantined);
	ck_assert(info(s, VF_A).held);

	/* the held-back list fails closed */
	faultvfs_fail_writes(SQLITE_IOERR);
	ck_assert_int_eq(store_quarantine_manual(s, VF_C, -1, NULL), -EIO);
	ck_assert_int_eq(store_held_back_list(s, STORE_READ_RETRY, &list, &n), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	store_close(s);
}
END_TEST

/* Cleared failures are kept (soft delete) with when, by whom and why, and no
 * rule sees them: the tally, the mirror after a reopen, dedupe (a cleared
 * assignment that fails again is recorded anew), unregistering.  The
 * history lists claims (how they ended, by whom) and failures, oldest
 * first, the newest `max` with the number dropped. */
START_TEST(failures_soft_deleted_history)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1" }, got;
	struct store_history_entry *h;
	size_t n, dropped;

	reg(s, VF_A);
	ck_assert_int_eq(store_history_list(s, VF_B, 10, &h, &n, &dropped), -ENOENT);
	ck_assert_int_eq(store_history_list(s, VF_A, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 0);
	free(h);
	ck_assert_int_eq(store_claim(s, &c, &got), 0); /* stamped now: before the reports */
	struct store_release_opts by_nobody = { .claimed_at = got.a.claimed_at,
						.how = "released-if",
						.uid = 65534 };
	ck_assert_int_eq(store_release(s, VF_A, "i-1", &by_nobody), 0);
	report_fail(s, VF_A, "i-1", T1);
	report_fail(s, VF_A, "i-2", T2);
	ck_assert(info(s, VF_A).quarantined);
	struct store_success_result r;
	ck_assert_int_eq(store_report_success(s, VF_A, "i-2", T2, 7, &r), 0);
	ck_assert_uint_eq(r.cleared, 2);
	ck_assert(r.rescinded);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	/* cleared: the same assignment failing again is new */
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_RECORDED);
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	ck_assert_int_eq(store_clear(s, VF_A, 0, NULL), 0);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	assert_failures(s, VF_A, 0, NULL);

	s = reopen(s);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_int_eq(store_history_list(s, VF_A, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_int_eq(h[0].kind, STORE_HISTORY_CLAIM);
	ck_assert_str_eq(h[0].at, got.a.claimed_at);
	ck_assert_str_eq(h[0].how, "released-if");
	ck_assert_int_eq(h[0].by, 65534);
	ck_assert_str_ne(h[0].ended_at, "");
	for (size_t i = 1; i < 4; i++) {
		ck_assert_int_eq(h[i].kind, STORE_HISTORY_FAILURE);
		ck_assert_str_ne(h[i].ended_at, "");
		ck_assert(strcmp(h[i - 1].at, h[i].at) <= 0); /* oldest first */
	}
	ck_assert_str_eq(h[1].instance_id, "i-1");
	ck_assert_str_eq(h[1].how, "success:i-2");
	ck_assert_int_eq(h[1].by, 7);
	ck_assert_str_eq(h[3].instance_id, "i-2");
	ck_assert_str_eq(h[3].how, "operator");
	ck_assert_int_eq(h[3].by, 0);
	ck_assert_str_eq(h[3].message, "NVRM: RmInitAdapter failed!");
	free(h);
	/* bounded: the newest two, two dropped */
	ck_assert_int_eq(store_history_list(s, VF_A, 2, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(dropped, 2);
	ck_assert_str_eq(h[1].how, "operator");
	free(h);
	/* no live failure, no claim: unregistering works; the rows stay */
	ck_assert_int_eq(store_vf_unregister(s, VF_A), 0);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures"), 3);
}
END_TEST

/* Operator holds are history too: who held (uid), when, who cleared; a
 * repeated hold adds nothing; a hold in force is an open entry; it
 * survives a reopen. */
START_TEST(holds_in_history)
{
	struct store *s = open_store();
	struct store_history_entry *h;
	size_t n, dropped;

	reg(s, VF_A);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, 1000, NULL), 0);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, 1001, NULL), 0); /* already held */
	ck_assert_int_eq(store_history_list(s, VF_A, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(h[0].kind, STORE_HISTORY_HOLD);
	ck_assert_int_eq(h[0].started_by, 1000);
	ck_assert_str_eq(h[0].ended_at, "");
	ck_assert_int_eq(h[0].by, -1);
	free(h);
	s = reopen(s);
	ck_assert_int_eq(store_clear(s, VF_A, 1002, NULL), 0);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0); /* a writer unknown */
	ck_assert_int_eq(store_history_list(s, VF_A, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(h[0].kind, STORE_HISTORY_HOLD);
	ck_assert_int_eq(h[0].started_by, 1000);
	ck_assert_str_ne(h[0].ended_at, "");
	ck_assert_str_eq(h[0].how, "operator");
	ck_assert_int_eq(h[0].by, 1002);
	ck_assert_int_eq(h[1].kind, STORE_HISTORY_HOLD);
	ck_assert_int_eq(h[1].started_by, -1);
	ck_assert_str_eq(h[1].ended_at, "");
	free(h);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM holds WHERE cleared_at IS NULL"), 1);
}
END_TEST

static void collect_bits(void *userdata, const struct store_change *c)
{
	*(unsigned *)userdata |= c->bits;
}

START_TEST(breaker)
{
	struct store *s = open_with(2, 1, NULL);
	struct store_failure_result r;
	struct store_stats st;
	unsigned bits = 0;

	ck_assert_int_eq(store_max_quarantined_get(s), 1);
	ck_assert_int_eq(store_max_quarantined_set(s, -1), -EINVAL);
	ck_assert_int_eq(store_max_quarantined_set(s, VFS_MAX + 1), -EINVAL);
	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, VF_C);
	report_fail(s, VF_A, "i-1", T1);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	store_get_stats(s, &st);
	ck_assert(!st.breaker_engaged); /* cap reached, nothing held back */

	report_fail(s, VF_B, "i-3", T1);
	ck_assert_int_eq(store_subscribe(s, collect_bits, &bits), 0);
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-4", T2, "m", &r), 0);
	ck_assert_uint_eq(bits,
			  STORE_CHANGE_FAILURES | STORE_CHANGE_BREAKER | STORE_CHANGE_HELD_BACK);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_RECORDED);
	ck_assert(r.breaker_engaged);
	ck_assert_int_gt(r.max_quarantined, 0);
	ck_assert_uint_gt(r.n_instances, 0);
	ck_assert_uint_eq(r.tally, 2);
	ck_assert(!info(s, VF_B).quarantined);
	store_get_stats(s, &st);
	ck_assert(st.breaker_engaged);
	ck_assert_uint_eq(st.quarantined, 1);

	s = reopen(s); /* the engaged state is derived, so it survives */
	store_get_stats(s, &st);
	ck_assert(st.breaker_engaged);
	ck_assert_int_eq(store_max_quarantined_get(s), 1);

	/* lowering the threshold re-evaluates, still within the cap */
	report_fail(s, VF_C, "i-5", T1);
	ck_assert_int_eq(store_threshold_set(s, 1), 0);
	ck_assert(!info(s, VF_B).quarantined);
	ck_assert(!info(s, VF_C).quarantined);

	/* raising the cap quarantines held-back VFs up to it */
	ck_assert_int_eq(store_max_quarantined_set(s, 2), 0);
	ck_assert(info(s, VF_B).quarantined);
	ck_assert(!info(s, VF_C).quarantined);
	store_get_stats(s, &st);
	ck_assert(st.breaker_engaged);
	ck_assert_int_eq(store_max_quarantined_set(s, 0), 0); /* no cap */
	ck_assert(info(s, VF_C).quarantined);
	store_get_stats(s, &st);
	ck_assert(!st.breaker_engaged);
	ck_assert_uint_eq(st.quarantined, 3);
	store_close(s);
}
END_TEST

START_TEST(failures_per_vf_bounded)
{
	struct store *s = open_with(THRESHOLD_MAX, 1, NULL);
	struct store_failure_result r;

	reg(s, VF_A);
	reg(s, VF_B);
	store_close(s);
	/* the cap is reached (by an automatic quarantine: holds do not count) */
	db_write("UPDATE vfs SET quarantined = 1 WHERE address = '" VF_A "'");
	db_write("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)"
		 " INSERT INTO failures (vf_id, instance_id, assigned_at, reported_at, message)"
		 " SELECT (SELECT id FROM vfs WHERE address = '" VF_B "'), 'old-' || i, '',"
		 " '2026-01-01T00:00:00.000000000Z', '' FROM n");
	s = open_store();
	ck_assert_uint_eq(info(s, VF_B).tally, FAILURES_PER_VF_MAX);
	ck_assert_int_eq(store_report_failure(s, VF_B, "new", T1, "m", &r), 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_RECORDED);
	ck_assert(r.breaker_engaged);
	ck_assert_uint_eq(r.tally, FAILURES_PER_VF_MAX);
	struct store_failure *f;
	size_t n;
	ck_assert_int_eq(store_failure_list(s, VF_B, &f, &n), 0);
	ck_assert_uint_eq(n, FAILURES_PER_VF_MAX);
	ck_assert_str_eq(f[0].instance_id, "old-2"); /* the oldest went */
	ck_assert_str_eq(f[n - 1].instance_id, "new");
	free(f);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_at IS NULL"),
			 FAILURES_PER_VF_MAX);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_why = 'dropped'"),
			 1);
}
END_TEST

STORE_SUITE_MAIN("store-reports")
