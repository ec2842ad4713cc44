/* SPDX-License-Identifier: MIT */
/*
 * test-store.c - the store's rules (store/store.h), one Check test case per rule,
 * against real SQLite files in a fresh mkdtemp directory under /tmp.  Faults
 * are injected with the faultvfs shim.  The case names are listed once, in
 * meson.build's store_cases, which registers each as its own test
 * (CK_RUN_CASE) and generates store-cases.h, the list store_suite() runs.
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
#include "store-cases.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

/* store_release() of the claim with this claimed_at, by an unknown uid */
#define RELEASE_IF(at) (&(struct store_release_opts){ .claimed_at = (at), .uid = -1 })
#define VF_A "0000:41:00.1"
#define VF_B "0000:41:00.2"
#define VF_C "0000:41:00.3"
#define VF_D "0000:41:00.4"
#define T1 "2026-11-29T07:00:01.000000000Z"
#define T2 "2026-11-29T07:00:02.000000000Z"
#define T3 "2026-11-29T07:00:03.000000000Z"
#define BOOT_ID "0123abcd-4567-89ef-0123-456789abcdef"

static char tmpdir[64];
static char db_path[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/vfstore-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	/* nested: store_open creates the parents */
	snprintf(db_path, sizeof(db_path), "%s/var/lib/vfhealth/health.db", tmpdir);
	ck_assert_int_eq(faultvfs_register(), SQLITE_OK);
	faultvfs_fail_writes(SQLITE_OK);
	faultvfs_fail_syncs(SQLITE_OK);
	faultvfs_block_syncs(false);
}

static void teardown(void)
{
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static struct store *open_with(int threshold, int max_quarantined, const char *vfs)
{
	struct store_options opt = { .path = db_path,
				     .threshold = threshold,
				     .max_quarantined = max_quarantined,
				     .vfs_name = vfs };
	struct store *s = NULL;

	ck_assert_int_eq(store_open(&opt, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* keep the stored settings; through the fault shim so any case can inject */
static struct store *open_store(void)
{
	return open_with(0, -1, FAULTVFS_NAME);
}

static struct store *reopen(struct store *s)
{
	store_close(s);
	return open_store();
}

static void reg(struct store *s, const char *vf)
{
	ck_assert_int_eq(store_vf_register(s, vf, NULL), 0);
}

static enum store_outcome report_fail(struct store *s, const char *vf, const char *inst,
				      const char *at)
{
	struct store_failure_result r;

	ck_assert_int_eq(store_report_failure(s, vf, inst, at, "NVRM: RmInitAdapter failed!", &r),
			 0);
	return r.outcome;
}

static struct store_success_result ok(struct store *s, const char *vf, const char *inst,
				      const char *at)
{
	struct store_success_result r = { .cleared = 99, .rescinded = true };

	ck_assert_int_eq(store_report_success(s, vf, inst, at, -1, &r), 0);
	return r;
}

static struct store_vf_info info(struct store *s, const char *vf)
{
	struct store_vf_info i;

	ck_assert_int_eq(store_vf_get(s, vf, STORE_READ_RETRY, &i), 0);
	return i;
}

static uint64_t commits(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.commits;
}

/* One integer from the database file, read with SQLite directly. */
static long long db_query(const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	long long v = -1;

	ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
		      sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void db_write(const char *sql)
{
	sqlite3 *db = NULL;
	char *err = NULL;

	ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK, "%s: %s", sql,
		      err ? err : "?");
	sqlite3_close(db);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	char *buf = malloc(1 << 20);
	ck_assert_ptr_nonnull(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

/* -- VFs ------------------------------------------------------------------ */

START_TEST(vf_address_validation)
{
	static const char *const good[] = { "0000:41:00.4", "ffff:ff:1f.7", "0000:00:00.0" };
	static const char *const bad[] = { "0000:41:00.8",
					   "0000:41:00.",
					   "0000:41:0.4",
					   "0000:41:00.44",
					   "0000:4G:00.4",
					   "0000:41:00-4",
					   "00000:41:00.4",
					   "0000:41:00.4\n",
					   " 0000:41:00.4",
					   "0000:41:00,4",
					   "",
					   NULL };
	static const char upper[] = "0000:4A:00.4";
	struct store *s = open_store();

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		ck_assert_msg(vf_address_valid(good[i]), "%s", good[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		ck_assert_msg(!vf_address_valid(bad[i]), "%s", bad[i] ? bad[i] : "NULL");
		ck_assert_int_eq(store_vf_register(s, bad[i], NULL), -EINVAL);
	}
	ck_assert(!vf_address_valid(upper));
	ck_assert_int_eq(store_vf_register(s, upper, NULL), -EINVAL);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.vfs, 0);
	ck_assert_uint_eq(st.commits, 0);
	store_close(s);
}
END_TEST

START_TEST(vf_register_unregister)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_C, .a.instance_id = "i-1" };

	reg(s, VF_A);
	ck_assert_int_eq(store_vf_register(s, VF_A, NULL), -EEXIST);
	ck_assert_int_eq(store_vf_unregister(s, VF_B), -ENOENT);
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(s, VF_B, STORE_READ_RETRY, &i), -ENOENT);
	uint64_t id_a = info(s, VF_A).id;

	/* busy: quarantined, has failures, holds a live claim */
	reg(s, VF_B);
	reg(s, VF_C);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	ck_assert_int_eq(store_vf_unregister(s, VF_A), -EBUSY);
	report_fail(s, VF_B, "i-1", T1);
	ck_assert_int_eq(store_vf_unregister(s, VF_B), -EBUSY);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	ck_assert_int_eq(store_vf_unregister(s, VF_C), -EBUSY);
	ck_assert_uint_eq(info(s, VF_A).quarantined, 1);
	ck_assert_uint_eq(info(s, VF_B).tally, 1);

	/* once idle each can go; a re-registered VF gets a new id */
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), 0);
	ck_assert_int_eq(store_vf_unregister(s, VF_A), 0);
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_RETRY, &i), -ENOENT);
	ck_assert_int_eq(store_vf_get_by_id(s, id_a, &i), -ENOENT);
	reg(s, VF_A);
	ck_assert_uint_gt(info(s, VF_A).id, info(s, VF_C).id);
	ck_assert_int_eq(store_release(s, VF_C, "i-1", NULL), 0);
	ck_assert_int_eq(store_vf_unregister(s, VF_C), 0);

	struct store_vf_info *list;
	size_t n;
	ck_assert_int_eq(store_vf_list(s, &list, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0].vf, VF_A);
	ck_assert_str_eq(list[1].vf, VF_B);
	free(list);

	s = reopen(s);
	ck_assert_int_eq(store_vf_get(s, VF_C, STORE_READ_RETRY, &i), -ENOENT);
	ck_assert_uint_eq(info(s, VF_B).tally, 1);
	store_close(s);
}
END_TEST

START_TEST(vf_limit)
{
	struct store *s = open_store();
	store_close(s);
	/* fill the table to the limit directly: 65536 commits would take minutes */
	db_write("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 65535)"
		 " INSERT INTO vfs (address) SELECT printf('%04x:00:00.0', i) FROM n");
	s = open_store();
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.vfs, VFS_MAX);
	ck_assert_int_eq(store_vf_register(s, VF_A, NULL), -EMLINK);
	ck_assert_int_eq(store_vf_unregister(s, "0000:00:00.0"), 0);
	reg(s, VF_A);
	ck_assert_int_eq(store_vf_register(s, VF_B, NULL), -EMLINK);
	store_close(s);
}
END_TEST

/* -- threshold ------------------------------------------------------------- */

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

/* -- failure reports -------------------------------------------------------- */

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

/* -- success reports --------------------------------------------------------- */

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
	struct store_failure *f;
	size_t n;
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(f[0].instance_id, "i2");
	free(f);

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
	struct store_failure *f;
	size_t n;
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(f[0].instance_id, "d");
	free(f);
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

/* -- operator --------------------------------------------------------------- */

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

/* Issue 11.5: state and since through the lifecycle, persisted. */
START_TEST(state_and_since)
{
	struct store *s = open_with(2, 1, FAULTVFS_NAME);

	reg(s, VF_A);
	reg(s, VF_B);
	struct store_vf_info i = info(s, VF_A);
	ck_assert_int_eq(i.state, STORE_VF_OK);
	ck_assert_str_eq(store_vf_state_name(i.state), "ok");
	ck_assert_str_eq(i.since, "");
	report_fail(s, VF_A, "i-1", T1);
	i = info(s, VF_A);
	ck_assert_int_eq(i.state, STORE_VF_FAILING);
	ck_assert_str_eq(i.since, ""); /* failing is in service */

	/* hold: out of service from now, canonical RFC 3339 */
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, NULL), 0);
	i = info(s, VF_B);
	ck_assert_int_eq(i.state, STORE_VF_HELD);
	char canon[RFC3339_BUFSZ];
	ck_assert_int_eq(rfc3339_normalize(i.since, canon), 0);
	ck_assert_str_eq(canon, i.since);
	char since_b[RFC3339_BUFSZ];
	strcpy(since_b, i.since);

	/* the hold does not use the cap: A quarantines */
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	i = info(s, VF_A);
	ck_assert_int_eq(i.state, STORE_VF_QUARANTINED);
	ck_assert_str_eq(store_vf_state_name(i.state), "quarantined");
	ck_assert_uint_ne(strlen(i.since), 0);
	ck_assert_str_ge(i.since, since_b);

	s = reopen(s);
	ck_assert_str_eq(info(s, VF_B).since, since_b);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_QUARANTINED);

	/* rescinded by a success: back in service, since empty */
	struct store_success_result r = ok(s, VF_A, "i-2", T2);
	ck_assert(r.rescinded);
	i = info(s, VF_A);
	ck_assert_int_eq(i.state, STORE_VF_OK);
	ck_assert_str_eq(i.since, "");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_HELD), "held");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_HELD_BACK), "held-back");
	ck_assert_str_eq(store_vf_state_name(STORE_VF_FAILING), "failing");

	/* state and since are placement-facing: they fail closed */
	struct store_vf_info *all;
	size_t n;
	ck_assert_int_eq(store_vf_list(s, &all, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(all[1].state, STORE_VF_HELD);
	free(all);
	faultvfs_fail_writes(SQLITE_IOERR);
	ck_assert_int_eq(store_clear(s, VF_B, -1, NULL), -EIO);
	ck_assert_int_eq(store_vf_get(s, VF_B, STORE_READ_RETRY, &i), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	/* Read-triggered retries are rate-limited (read_retries_rate_limited):
	 * the operator's repair brings it back. */
	ck_assert_int_eq(store_repair(s), 0);
	ck_assert_int_eq(store_vf_get(s, VF_B, STORE_READ_RETRY, &i), 0);
	ck_assert_int_eq(i.state, STORE_VF_HELD);
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

/* A version 1 database is migrated at open, keeping its data: a manual
 * quarantine becomes a hold. */
#define V1_SCHEMA                                                                        \
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"              \
	"CREATE TABLE vfs (id INTEGER PRIMARY KEY AUTOINCREMENT,"                        \
	" address TEXT NOT NULL UNIQUE, quarantined INTEGER NOT NULL DEFAULT 0,"         \
	" manual INTEGER NOT NULL DEFAULT 0, quarantined_at TEXT);"                      \
	"CREATE TABLE failures (id INTEGER PRIMARY KEY AUTOINCREMENT,"                   \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, assigned_at TEXT NOT NULL," \
	" reported_at TEXT NOT NULL, message TEXT NOT NULL,"                             \
	" UNIQUE (vf_id, instance_id, assigned_at));"                                    \
	"CREATE TABLE claims (id INTEGER PRIMARY KEY AUTOINCREMENT,"                     \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, claimed_at TEXT NOT NULL,"  \
	" agent TEXT NOT NULL, control TEXT NOT NULL, pid INTEGER NOT NULL,"             \
	" pid_starttime INTEGER NOT NULL, released_at TEXT);"                            \
	"CREATE UNIQUE INDEX claims_live ON claims (vf_id) WHERE released_at IS NULL;"   \
	"INSERT INTO meta (key, value) VALUES ('threshold', 2), ('max_quarantined', 1);" \
	"PRAGMA application_id = 1447446577;"                                            \
	"PRAGMA user_version = 1;"

#define Q_AT "2026-11-01T00:00:00.000000000Z"

static void write_v1_database(void)
{
	char dir[256];

	snprintf(dir, sizeof(dir), "%s/var", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/var/lib", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/var/lib/vfhealth", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	sqlite3 *db = NULL;
	ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	sqlite3_close(db);
	db_write(V1_SCHEMA
		 /* A: manual; B: manual on top of a failure; C: automatic;
		  * D: quarantined with no failure behind it (manual in v1);
		  * E: clean and claimed */
		 "INSERT INTO vfs (address, quarantined, manual, quarantined_at) VALUES"
		 " ('" VF_A "', 1, 1, '" Q_AT "'), ('" VF_B "', 1, 1, '" Q_AT "'),"
		 " ('" VF_C "', 1, 0, '" Q_AT "'), ('0000:41:00.4', 1, 0, '" Q_AT "'),"
		 " ('0000:41:00.5', 0, 0, NULL);"
		 "INSERT INTO failures (vf_id, instance_id, assigned_at, reported_at, message)"
		 " VALUES (2, 'i-b', '" T1 "', '" T1 "', 'mb'), (3, 'i-c1', '" T1 "', '" T1
		 "', 'm1'),"
		 " (3, 'i-c2', '" T2 "', '" T2 "', 'm2');"
		 "INSERT INTO claims (vf_id, instance_id, claimed_at, agent, control, pid,"
		 " pid_starttime) VALUES (5, 'i-e', '" T3 "', 'vsock:3:5000', '', 7, 8);");
}

START_TEST(migrate_v1_to_v2)
{
	write_v1_database();
	struct store *s = open_store();
	char reason[STORE_REASON_MAX];

	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	struct store_vf_info a = info(s, VF_A), b = info(s, VF_B), c = info(s, VF_C),
			     d = info(s, "0000:41:00.4"), e = info(s, "0000:41:00.5");
	ck_assert(a.held && !a.auto_quarantined && a.quarantined);
	ck_assert(b.held && !b.auto_quarantined);
	ck_assert_uint_eq(b.tally, 1);
	ck_assert(!c.held && c.auto_quarantined);
	ck_assert_uint_eq(c.tally, 2);
	ck_assert(d.held && !d.auto_quarantined);
	ck_assert(!e.quarantined && e.claimed);
	ck_assert_str_eq(a.since, Q_AT);
	ck_assert_str_eq(c.since, Q_AT);
	ck_assert_str_eq(e.since, "");
	ck_assert_int_eq(store_threshold_get(s), 2);
	ck_assert_int_eq(store_max_quarantined_get(s), 1);
	struct store_claim got;
	ck_assert_int_eq(store_claim_get(s, "0000:41:00.5", "i-e", STORE_READ_RETRY, &got), 0);
	ck_assert_str_eq(got.a.agent, "vsock:3:5000");
	ck_assert_int_eq(got.a.pid_starttime, 8);
	/* the cap of 1 is C's; the holds do not count */
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.held, 3);
	ck_assert_uint_eq(st.quarantined, 4);
	/* a success still lifts C's automatic quarantine, never B's hold */
	ck_assert(ok(s, VF_C, "i-c2", T2).rescinded);
	ck_assert(!ok(s, VF_B, "i-b", T1).rescinded);
	ck_assert(info(s, VF_B).held);
	/* and on to version 3: enforce mode; the failures are kept, live ones
	 * until a success clears them */
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_ENFORCE);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM pragma_table_info('vfs')"
				  " WHERE name = 'manual'"),
			 0);
	/* both successes cleared: no live failure, all three kept as history */
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_at IS NULL"), 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures"), 3);
	ck_assert_int_eq(
		db_query("SELECT COUNT(*) FROM failures WHERE cleared_why = 'success:i-c2'"), 2);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 1);

	/* opened again: nothing to migrate, the same state */
	s = open_store();
	ck_assert(info(s, VF_A).held);
	ck_assert_str_eq(info(s, VF_A).since, Q_AT);
	store_close(s);
}
END_TEST

/* A migration that fails rolls back: the file keeps version 1 and its rows,
 * and the store is unavailable with the reason. */
START_TEST(migrate_failure_rolls_back)
{
	write_v1_database();
	/* a column the migration adds already exists: ALTER TABLE fails */
	db_write("ALTER TABLE vfs ADD COLUMN held INTEGER");
	struct store *s = open_store();
	char reason[STORE_REASON_MAX];

	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "cannot migrate") && strstr(reason, "schema version 1"), "%s",
		      reason);
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_RETRY, &i), -EIO);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM vfs WHERE manual = 1"), 2);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM vfs WHERE quarantined = 1"), 4);
}
END_TEST

/* -- claims ------------------------------------------------------------------- */

/* Observe mode: every rule runs (the VF is quarantined, listed, counted) but
 * a claim is not refused for it; one live claim per VF still holds; the mode
 * persists; back in enforce mode the same claim is refused, the live one
 * stays.  Bad modes change nothing. */
START_TEST(mode_observe_claims)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1" };
	struct store_claim other = { .a.vf = VF_A, .a.instance_id = "i-2" };

	reg(s, VF_A);
	reg(s, VF_B);
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_ENFORCE);
	ck_assert_int_eq(store_mode_set(s, (enum store_mode)2), -EINVAL);
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_ENFORCE);
	ck_assert_int_eq(store_mode_set(s, STORE_MODE_OBSERVE), 0);
	report_fail(s, VF_A, "i-x", T1);
	ck_assert_int_eq(report_fail(s, VF_A, "i-y", T2), STORE_OUTCOME_QUARANTINED);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_QUARANTINED);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY);
	ck_assert_int_eq(store_claim(s, &c, NULL), -EEXIST);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.quarantined, 1);
	ck_assert_uint_eq(st.allocatable, 1); /* what enforcement would allow: B */

	s = reopen(s);
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_OBSERVE);
	ck_assert_int_eq(store_mode_set(s, STORE_MODE_ENFORCE), 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &c),
			 0); /* the live claim stays */
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY); /* refused from now on */
	s = reopen(s);
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_ENFORCE);
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY);
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
	struct store_failure *f;
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(f);

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

START_TEST(claims_one_live_per_vf)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1", .a.pid = 42 }, got;

	reg(s, VF_A);
	reg(s, VF_B);
	ck_assert_int_eq(store_claim(s, &c, &got), 0);
	ck_assert_int_eq(store_claim(s, &c, NULL), -EEXIST);
	struct store_claim other = { .a.vf = VF_A, .a.instance_id = "i-2" };
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-2", STORE_READ_RETRY, &got), -ENOENT);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_int_eq(got.a.pid, 42);

	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, NULL), 0);
	other.a.vf[0] = '\0';
	strcpy(other.a.vf, VF_B);
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY);
	struct store_claim nobody = { .a.vf = VF_C, .a.instance_id = "i-3" };
	ck_assert_int_eq(store_claim(s, &nobody, NULL), -ENOENT);

	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.claimed, 1);
	ck_assert_uint_eq(st.quarantined, 1);
	ck_assert_uint_eq(st.allocatable, 0);

	ck_assert_int_eq(store_release(s, VF_A, "i-2", NULL), -ENOENT);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), -ENOENT);
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY); /* B still quarantined */
	strcpy(other.a.vf, VF_A);
	ck_assert_int_eq(store_claim(s, &other, NULL), 0);
	store_close(s);
}
END_TEST

START_TEST(claims_stamp_normalize_history)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1" }, got, again;
	char before[RFC3339_BUFSZ], after[RFC3339_BUFSZ];

	reg(s, VF_A);
	rfc3339_now(before);
	ck_assert_int_eq(store_claim(s, &c, &got), 0);
	rfc3339_now(after);
	ck_assert_uint_eq(strlen(got.a.claimed_at), RFC3339_NANO_LEN);
	ck_assert_str_ge(got.a.claimed_at, before);
	ck_assert_str_le(got.a.claimed_at, after);
	ck_assert_uint_gt(got.id, 0);
	ck_assert_int_eq(store_claim_get_by_id(s, 0, got.id, &again), 0);
	ck_assert_str_eq(again.a.claimed_at, got.a.claimed_at);

	/* the first write may name the VMM's own time: normalized */
	struct store_claim upd = got;
	strcpy(upd.a.claimed_at, "2026-11-29t07:44:51.5z");
	strcpy(upd.a.agent, "vsock:42:9999");
	strcpy(upd.a.control, "/run/vmm/i-1.sock");
	upd.a.pid = 1234;
	upd.a.pid_starttime = 987654321;
	ck_assert_int_eq(store_claim_update(s, &upd), 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &again), 0);
	ck_assert_str_eq(again.a.claimed_at, "2026-11-29T07:44:51.500000000Z");
	ck_assert_str_eq(again.a.agent, "vsock:42:9999");
	ck_assert_uint_eq(again.a.pid_starttime, 987654321);
	ck_assert_uint_eq(again.id, got.id);
	/* an empty claimed_at keeps the identity */
	upd.a.claimed_at[0] = '\0';
	upd.a.pid = 99;
	ck_assert_int_eq(store_claim_update(s, &upd), 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &again), 0);
	ck_assert_str_eq(again.a.claimed_at, "2026-11-29T07:44:51.500000000Z");
	ck_assert_int_eq(again.a.pid, 99);

	struct store_claim bad = c;
	strcpy(bad.a.claimed_at, "2026-11-29 07:44:51Z");
	ck_assert_int_eq(store_claim_update(s, &bad), -EINVAL);
	memset(bad.a.agent, 'a', sizeof(bad.a.agent)); /* no terminator within the limit */
	bad.a.claimed_at[0] = '\0';
	ck_assert_int_eq(store_claim(s, &bad, NULL), -ENAMETOOLONG);
	struct store_claim stranger = { .a.vf = VF_A, .a.instance_id = "i-9" };
	ck_assert_int_eq(store_claim_update(s, &stranger), -ENOENT);

	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	struct store_claim c2 = { .a.vf = VF_A, .a.instance_id = "i-2" };
	strcpy(c2.a.claimed_at, "2026-11-29T08:00:00Z");
	ck_assert_int_eq(store_claim(s, &c2, &got), 0);
	ck_assert_str_eq(got.a.claimed_at, "2026-11-29T08:00:00.000000000Z");
	store_close(s);

	/* history: the released claim is a row with released_at set */
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 2);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE released_at IS NOT NULL AND "
				  "instance_id = 'i-1' AND pid = 99"),
			 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE released_at IS NULL AND "
				  "instance_id = 'i-2'"),
			 1);
}
END_TEST

/* -- breaker ------------------------------------------------------------------ */

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

/* -- persistence ---------------------------------------------------------------- */

START_TEST(persistence_all_state)
{
	struct store *s = open_with(3, 5, NULL);
	struct store_claim c = {
		.a.vf = VF_C, .a.instance_id = "i-c", .a.pid = 7, .a.pid_starttime = 8
	};
	struct store_claim got;

	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, VF_C);
	reg(s, "0000:41:00.4");
	report_fail(s, VF_A, "i-1", T1);
	report_fail(s, VF_A, "i-2", T2);
	report_fail(s, VF_A, "i-3", T3); /* quarantined */
	report_fail(s, VF_B, "i-4", T1);
	ck_assert_int_eq(store_quarantine_manual(s, "0000:41:00.4", -1, NULL), 0);
	strcpy(c.a.agent, "vsock:3:5000");
	strcpy(c.a.control, "/run/c.sock");
	strcpy(c.a.boot_id, BOOT_ID);
	ck_assert_int_eq(store_claim(s, &c, &got), 0);
	struct store_claim old = { .a.vf = VF_B, .a.instance_id = "i-old" };
	ck_assert_int_eq(store_claim(s, &old, NULL), 0);
	ck_assert_int_eq(store_release(s, VF_B, "i-old", NULL), 0);
	struct store_vf_info *before, *after;
	size_t nb, na;
	ck_assert_int_eq(store_vf_list(s, &before, &nb), 0);

	s = reopen(s);
	ck_assert_int_eq(store_vf_list(s, &after, &na), 0);
	ck_assert_uint_eq(na, nb);
	ck_assert_mem_eq(before, after, nb * sizeof(*before));
	ck_assert_int_eq(store_threshold_get(s), 3);
	ck_assert_int_eq(store_max_quarantined_get(s), 5);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(!info(s, VF_A).held);
	ck_assert(info(s, "0000:41:00.4").held);
	ck_assert_uint_eq(info(s, VF_B).tally, 1);
	struct store_claim now;
	ck_assert_int_eq(store_claim_get(s, VF_C, "i-c", STORE_READ_RETRY, &now), 0);
	ck_assert_mem_eq(&now, &got, sizeof(now));
	struct store_claim *live;
	size_t nl;
	ck_assert_int_eq(store_claim_list(s, NULL, &live, &nl), 0);
	ck_assert_uint_eq(nl, 1);
	free(live);
	char(*q)[VF_ADDR_BUFSZ];
	size_t nq;
	ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &q, &nq), 0);
	ck_assert_uint_eq(nq, 2);
	ck_assert_str_eq(q[0], VF_A);
	ck_assert_str_eq(q[1], "0000:41:00.4");
	free(q);
	struct store_failure *f;
	size_t nf;
	ck_assert_int_eq(store_failure_list(s, VF_A, &f, &nf), 0);
	ck_assert_uint_eq(nf, 3);
	ck_assert_str_eq(f[2].instance_id, "i-3");
	free(f);
	/* the file is what this code writes */
	ck_assert_int_eq(db_query("PRAGMA application_id"), 0x56464831);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
	store_close(s);
	struct stat st;
	ck_assert_int_eq(stat(db_path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	free(before);
	free(after);
}
END_TEST

/* store_open() in another process; its return code.  The child reports
 * through a pipe and ends with SIGKILL: its heap is the parent's copy (the
 * open store included), which no exit-time leak check may judge as its own
 * (valgrind runs the suites with CK_FORK=no). */
static int store_open_in_child(const struct store_options *opt)
{
	int fds[2], rc = 0, status;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct store *child = NULL;
		int r = store_open(opt, &child);

		if (write(fds[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(1);
		raise(SIGKILL);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &rc, sizeof(rc)), (ssize_t)sizeof(rc));
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	return rc;
}

START_TEST(exclusive_lock)
{
	struct store *s = open_store(), *second = NULL;
	struct store_options opt = { .path = db_path, .max_quarantined = -1 };

	ck_assert_int_eq(store_open(&opt, &second), -EBUSY);
	/* a second process likewise */
	ck_assert_int_eq(store_open_in_child(&opt), -EBUSY);
	store_close(s);
	ck_assert_int_eq(store_open(&opt, &second), 0);
	store_close(second);

	char parent[256];
	snprintf(parent, sizeof(parent), "%s/var/lib/vfhealth", tmpdir);
	struct stat st;
	ck_assert_int_eq(stat(parent, &st), 0);
	mode_t mask = umask(0);
	umask(mask);
	ck_assert_int_eq(st.st_mode & 0777, 0700 & ~mask); /* root's alone */
	opt.path = "";
	ck_assert_int_eq(store_open(&opt, &second), -EINVAL);
	opt.path = db_path;
	opt.vfs_name = "no-such-vfs";
	ck_assert_int_eq(store_open(&opt, &second), -EINVAL);
}
END_TEST

/* -- refusing databases that are not ours ---------------------------------------- */

START_TEST(newer_schema_refused)
{
	struct store *s = open_store();
	char reason[STORE_REASON_MAX];

	reg(s, VF_A);
	store_close(s);
	db_write("PRAGMA user_version = 99"); /* newer than this code */
	size_t len_before, len_after;
	_cleanup_free_ char *bytes_before = read_file(db_path, &len_before);

	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "newer") && strstr(reason, "schema version 99"), "%s", reason);
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_RETRY, &i), -EIO);
	ck_assert_int_eq(store_vf_register(s, VF_B, NULL), -EIO);
	ck_assert_int_eq(store_repair(s), -EIO);
	store_close(s);
	_cleanup_free_ char *bytes_after = read_file(db_path, &len_after);
	ck_assert_uint_eq(len_before, len_after);
	ck_assert_mem_eq(bytes_before, bytes_after, len_before);

	db_write("PRAGMA user_version = 2; PRAGMA application_id = 1234");
	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "not a vfhealth database"), "%s", reason);
	store_close(s);
}
END_TEST

START_TEST(corrupt_file_never_overwritten)
{
	char dir[256], moved[300], reason[STORE_REASON_MAX];
	unsigned char garbage[8192];

	static const char *const parts[] = { "var", "var/lib", "var/lib/vfhealth" };
	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		snprintf(dir, sizeof(dir), "%s/%s", tmpdir, parts[i]);
		ck_assert_int_eq(mkdir(dir, 0755), 0);
	}
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)(i * 131 + 7);
	FILE *f = fopen(db_path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(garbage, 1, sizeof(garbage), f), sizeof(garbage));
	fclose(f);

	struct store *s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "not a database"), "%s", reason);
	ck_assert_int_eq(store_vf_register(s, VF_A, NULL), -EIO);
	char(*q)[VF_ADDR_BUFSZ];
	size_t n;
	ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &q, &n), -EIO);
	struct store_vf_info i; /* nothing in memory to look up */
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_MEMORY, &i), -EIO);
	struct store_claim c;
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_MEMORY, &c), -EIO);
	ck_assert_int_eq(store_repair(s), -EIO);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert(!st.available);
	ck_assert_uint_eq(st.allocatable, 0);

	size_t len;
	_cleanup_free_ char *bytes = read_file(db_path, &len);
	ck_assert_uint_eq(len, sizeof(garbage));
	ck_assert_mem_eq(bytes, garbage, sizeof(garbage));

	/* the operator moves it aside; repair starts afresh */
	snprintf(moved, sizeof(moved), "%s.corrupt", db_path);
	ck_assert_int_eq(rename(db_path, moved), 0);
	ck_assert_int_eq(store_repair(s), 0);
	ck_assert(store_status(s, NULL, 0));
	reg(s, VF_A);
	ck_assert_int_eq(store_threshold_get(s), 2);
	store_close(s);
	_cleanup_free_ char *moved_bytes = read_file(moved, &len);
	ck_assert_uint_eq(len, sizeof(garbage));
	ck_assert_mem_eq(moved_bytes, garbage, sizeof(garbage));
}
END_TEST

START_TEST(damaged_pages_fail_quick_check)
{
	char reason[STORE_REASON_MAX];
	struct store *s = open_store();

	store_close(s);
	/* enough rows for a multi-page b-tree; closing checkpoints into the file */
	db_write("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 3999)"
		 " INSERT INTO vfs (address) SELECT printf('%04x:01:00.0', i) FROM n");
	long long page_size = db_query("PRAGMA page_size");
	long long pages = db_query("PRAGMA page_count");
	ck_assert_int_gt(pages, 8);
	/* scribble over the middle of the file, leaving the header page intact */
	int fd = open(db_path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	char junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 7 + 3);
	for (long long p = pages / 2; p < pages / 2 + 3; p++)
		ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), (off_t)(p * page_size)),
				 (ssize_t)sizeof(junk));
	close(fd);
	size_t len_before, len_after;
	_cleanup_free_ char *before = read_file(db_path, &len_before);

	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "quick_check") || strstr(reason, "malformed"), "%s", reason);
	ck_assert_ptr_null(strchr(reason, '\n')); /* one line for the status file */
	ck_assert_int_eq(store_repair(s), -EIO);
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(s, "0000:01:00.0", STORE_READ_RETRY, &i), -EIO);
	ck_assert_int_eq(store_vf_register(s, VF_A, NULL), -EIO);
	store_close(s);
	_cleanup_free_ char *after = read_file(db_path, &len_after);
	ck_assert_uint_eq(len_before, len_after);
	ck_assert_mem_eq(before, after, len_before);
}
END_TEST

/* -- fail closed ------------------------------------------------------------------ */

/* A store with VF_A quarantined (i-1, i-2), VF_B with one failure (i-3),
 * VF_C clean and claimed by i-c. */
static struct store *populated(void)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_C, .a.instance_id = "i-c" };

	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, VF_C);
	report_fail(s, VF_A, "i-1", T1);
	report_fail(s, VF_A, "i-2", T2);
	report_fail(s, VF_B, "i-3", T1);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	return s;
}

static void assert_populated_state(struct store *s)
{
	ck_assert(info(s, VF_A).quarantined);
	ck_assert_uint_eq(info(s, VF_A).tally, 2);
	ck_assert(!info(s, VF_B).quarantined);
	ck_assert_uint_eq(info(s, VF_B).tally, 1);
	ck_assert(info(s, VF_C).claimed);
	ck_assert_uint_eq(info(s, VF_C).tally, 0);
}

static void check_latched(int sqlite_rc, const char *expected_reason)
{
	struct store *s = populated();
	struct store_failure_result r;
	char reason[STORE_REASON_MAX];

	if (sqlite_rc == SQLITE_FULL)
		faultvfs_fail_writes(SQLITE_FULL);
	else
		faultvfs_fail_syncs(sqlite_rc);
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-4", T2, "m", &r), -EIO);
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, expected_reason), "%s", reason);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.commit_failures, 1);
	ck_assert(!st.available);
	ck_assert_uint_eq(st.allocatable, 0);

	/* mutations fail ... */
	ck_assert_int_eq(store_vf_register(s, "0000:41:00.5", NULL), -EIO);
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-5", T3, "m", &r), -EIO);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), -EIO);
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, NULL), -EIO);
	ck_assert_int_eq(store_threshold_set(s, 5), -EIO);
	ck_assert_int_eq(store_release(s, VF_C, "i-c", NULL), -EIO);
	ck_assert_int_eq(store_report_success(s, VF_B, "i-3", T1, -1, NULL), -EIO);
	/* ... no-ops succeed ... */
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-3", T1, "m", &r), 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_UNCHANGED);
	ck_assert_int_eq(store_report_failure(s, VF_A, "i-9", T3, "m", &r), 0);
	ck_assert_int_eq(r.outcome, STORE_OUTCOME_UNCHANGED);
	struct store_success_result o;
	ck_assert_int_eq(store_report_success(s, VF_B, "i-9", T3, -1, &o), 0);
	ck_assert_uint_eq(o.cleared, 0);
	ck_assert_int_eq(store_report_success(s, VF_C, "i-c", T3, -1, &o), 0); /* fast path */
	ck_assert_int_eq(store_clear(s, VF_C, -1, NULL), 0); /* nothing to clear */
	/* a hold on a quarantined VF is a change, so it fails */
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), -EIO);
	ck_assert_int_eq(store_threshold_set(s, 2), 0);
	/* refusals are still refusals; a claim that would succeed is -EIO */
	struct store_claim want = { .a.vf = VF_A, .a.instance_id = "i-new" };
	ck_assert_int_eq(store_claim(s, &want, NULL), -EBUSY);
	strcpy(want.a.vf, VF_C);
	ck_assert_int_eq(store_claim(s, &want, NULL), -EBUSY);
	ck_assert_int_eq(store_release(s, VF_C, "i-new", NULL), -ENOENT);
	strcpy(want.a.vf, VF_B);
	ck_assert_int_eq(store_claim(s, &want, NULL), -EIO);
	/* ... placement-facing reads retry once, then fail ... */
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_RETRY, &i), -EIO);
	char(*q)[VF_ADDR_BUFSZ];
	size_t n;
	ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &q, &n), -EIO);
	ck_assert_int_eq(store_held_back_list(s, STORE_READ_RETRY, &q, &n), -EIO);
	struct store_claim c;
	ck_assert_int_eq(store_claim_get(s, VF_C, "i-c", STORE_READ_RETRY, &c), -EIO);
	/* ... the rest is still served */
	struct store_vf_info *list;
	ck_assert_int_eq(store_vf_list(s, &list, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(list[1].vf, VF_B);
	ck_assert_uint_eq(list[1].tally, 1); /* the refused report left no trace */
	free(list);
	ck_assert_int_eq(store_vf_get_by_id(s, 1, &i), 0);
	struct store_failure *fl;
	ck_assert_int_eq(store_failure_list(s, VF_B, &fl, &n), 0);
	ck_assert_uint_eq(n, 1);
	free(fl);

	/* nothing acknowledged is lost and nothing refused appears */
	store_close(s);
	faultvfs_fail_writes(SQLITE_OK);
	faultvfs_fail_syncs(SQLITE_OK);
	s = open_store();
	ck_assert(store_status(s, NULL, 0));
	assert_populated_state(s);
	struct store_failure *f;
	ck_assert_int_eq(store_failure_list(s, VF_B, &f, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(f[0].instance_id, "i-3");
	free(f);
	store_close(s);
}

START_TEST(fail_closed_disk_full)
{
	check_latched(SQLITE_FULL, "database or disk is full");
}
END_TEST

START_TEST(fail_closed_io_error)
{
	check_latched(SQLITE_IOERR_FSYNC, "disk I/O error");
}
END_TEST

/* Name lookups are not placement-facing: answered from memory while the
 * store is latched, never retrying (the latch outlives the fault until a
 * placement-facing read or store_repair() retries). */
START_TEST(lookups_served_while_unavailable)
{
	struct store *s = populated();
	struct store_vf_info i;
	struct store_claim c;

	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), -EIO);
	ck_assert(!store_status(s, NULL, 0));
	faultvfs_fail_writes(SQLITE_OK); /* a retry would now succeed */
	uint64_t before = commits(s);

	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_MEMORY, &i), 0);
	ck_assert_str_eq(i.vf, VF_A);
	ck_assert(i.quarantined);
	ck_assert_uint_eq(i.tally, 2);
	ck_assert_int_eq(store_vf_get(s, "0000:41:00.5", STORE_READ_MEMORY, &i), -ENOENT);
	ck_assert_int_eq(store_vf_get(s, "0000:41:00.8", STORE_READ_MEMORY, &i), -EINVAL);
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_MEMORY, NULL), -EINVAL);
	ck_assert_int_eq(store_claim_get(s, VF_C, "i-c", STORE_READ_MEMORY, &c), 0);
	ck_assert_str_eq(c.a.vf, VF_C);
	ck_assert_str_eq(c.a.instance_id, "i-c");
	struct store_claim by_id;
	ck_assert_int_eq(store_claim_get_by_id(s, 0, c.id, &by_id), 0);
	ck_assert_str_eq(by_id.a.instance_id, "i-c");
	ck_assert_int_eq(store_claim_get(s, VF_C, "i-other", STORE_READ_MEMORY, &c), -ENOENT);
	ck_assert_int_eq(store_claim_get(s, VF_B, "i-c", STORE_READ_MEMORY, &c), -ENOENT);
	ck_assert_int_eq(store_claim_get(s, VF_C, "bad id", STORE_READ_MEMORY, &c), -EINVAL);
	ck_assert_int_eq(store_claim_get(s, "bad", "i-c", STORE_READ_MEMORY, &c), -EINVAL);

	/* none of that retried: still latched, nothing committed */
	ck_assert(!store_status(s, NULL, 0));
	ck_assert_uint_eq(commits(s), before);
	/* a placement-facing read does retry, and now repairs */
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_RETRY, &i), 0);
	ck_assert(store_status(s, NULL, 0));
	store_close(s);
}
END_TEST

START_TEST(repair_clears_latch)
{
	struct store *s = populated();
	char reason[STORE_REASON_MAX];
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_vf_register(s, "0000:41:00.5", NULL), -EIO);
	ck_assert_int_eq(store_repair(s), -EIO); /* still failing */
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "database or disk is full"), "%s", reason);

	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(store_repair(s), 0);
	ck_assert(store_status(s, NULL, 0));
	assert_populated_state(s);
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(s, "0000:41:00.5", STORE_READ_RETRY, &i), -ENOENT);
	reg(s, "0000:41:00.5");
	ck_assert_int_eq(report_fail(s, VF_B, "i-4", T2), STORE_OUTCOME_QUARANTINED);

	/* a placement read on a latched store repairs by itself once writes work */
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(store_status(s, NULL, 0));

	s = reopen(s);
	ck_assert(info(s, VF_B).quarantined);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert_int_eq(store_vf_get(s, "0000:41:00.5", STORE_READ_RETRY, &i), 0);
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

/* -- concurrency ------------------------------------------------------------------- */

struct report_job {
	struct store *s;
	bool claim; /* claim vf instead of reporting a failure */
	char vf[VF_ADDR_BUFSZ];
	char instance[32];
	int rc;
	struct store_failure_result result;
	struct store_success_result success;
	atomic_int *entered;
};

static void *failure_thread(void *arg)
{
	struct report_job *j = arg;

	if (j->entered)
		atomic_fetch_add(j->entered, 1);
	if (j->claim) {
		struct store_claim c = { 0 };
		strcpy(c.a.vf, j->vf);
		strcpy(c.a.instance_id, j->instance);
		j->rc = store_claim(j->s, &c, NULL);
	} else {
		j->rc = store_report_failure(j->s, j->vf, j->instance, T1, "m", &j->result);
	}
	return NULL;
}

static void *success_thread(void *arg)
{
	struct report_job *j = arg;

	j->rc = store_report_success(j->s, j->vf, j->instance, T1, -1, &j->success);
	return NULL;
}

static bool join_within(pthread_t t, int seconds)
{
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += seconds;
	return pthread_timedjoin_np(t, NULL, &deadline) == 0;
}

START_TEST(fast_path_does_not_wait_for_commit)
{
	struct store *s = open_store();
	pthread_t writer, poller;
	struct report_job w = { .s = s, .vf = VF_A, .instance = "i-w" };
	struct report_job p = { .s = s, .vf = VF_B, .instance = "i-p", .rc = 1 };

	reg(s, VF_A);
	reg(s, VF_B);
	faultvfs_block_syncs(true);
	ck_assert_int_eq(pthread_create(&writer, NULL, failure_thread, &w), 0);
	/* the writer is inside its commit's fsync, holding the write lock */
	ck_assert(faultvfs_wait_blocked(1, 10000));

	ck_assert_int_eq(pthread_create(&poller, NULL, success_thread, &p), 0);
	bool returned = join_within(poller, 10);
	bool writer_still_blocked = faultvfs_wait_blocked(1, 0);
	faultvfs_block_syncs(false);
	ck_assert(join_within(writer, 30));
	if (!returned)
		ck_assert(join_within(poller, 30));
	ck_assert_msg(returned, "the success fast path waited for a commit");
	ck_assert(writer_still_blocked);
	ck_assert_int_eq(p.rc, 0);
	ck_assert_uint_eq(p.success.cleared, 0);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_int_eq(w.result.outcome, STORE_OUTCOME_RECORDED);
	store_close(s);
}
END_TEST

#define GROUP_THREADS 32
#define CLAIM_THREADS 6

/* Start jobs while the first commit is held in fsync, so that the others
 * queue up behind it; release it once every job has started. */
static void run_queued(struct report_job *jobs, pthread_t *threads, size_t n, atomic_int *entered,
		       int sync_failure)
{
	faultvfs_block_syncs(true);
	ck_assert_int_eq(pthread_create(&threads[0], NULL, failure_thread, &jobs[0]), 0);
	ck_assert(faultvfs_wait_blocked(1, 10000));
	for (size_t i = 1; i < n; i++)
		ck_assert_int_eq(pthread_create(&threads[i], NULL, failure_thread, &jobs[i]), 0);
	for (int tries = 0; atomic_load(entered) < (int)n && tries < 100000; tries++)
		sched_yield();
	for (int i = 0; i < 1000; i++)
		sched_yield(); /* give the last ones time to queue; correctness does not depend on it */
	faultvfs_fail_syncs(sync_failure);
	faultvfs_block_syncs(false);
	for (size_t i = 0; i < n; i++)
		ck_assert(join_within(threads[i], 60));
	faultvfs_fail_syncs(SQLITE_OK);
}

START_TEST(group_commit)
{
	struct store *s = open_store();
	static struct report_job jobs[GROUP_THREADS + 2 + CLAIM_THREADS];
	pthread_t threads[ARRAY_SIZE(jobs)];
	atomic_int entered = 0;
	size_t n = 0;

	for (int i = 0; i < GROUP_THREADS; i++, n++) {
		jobs[n] = (struct report_job){ .s = s, .entered = &entered, .rc = 1 };
		snprintf(jobs[n].vf, sizeof(jobs[n].vf), "0000:42:%02x.%d", i / 8, i % 8);
		snprintf(jobs[n].instance, sizeof(jobs[n].instance), "i-%d", i);
		reg(s, jobs[n].vf);
	}
	/* contention inside one batch: two failures on one VF (threshold 2), and
	 * several instances claiming one VF; each op sees the ones before it */
	reg(s, VF_A);
	reg(s, VF_B);
	for (int i = 0; i < 2; i++, n++) {
		jobs[n] = (struct report_job){ .s = s, .entered = &entered, .rc = 1, .vf = VF_A };
		snprintf(jobs[n].instance, sizeof(jobs[n].instance), "twice-%d", i);
	}
	for (int i = 0; i < CLAIM_THREADS; i++, n++) {
		jobs[n] = (struct report_job){
			.s = s, .entered = &entered, .rc = 1, .vf = VF_B, .claim = true
		};
		snprintf(jobs[n].instance, sizeof(jobs[n].instance), "claimer-%d", i);
	}
	uint64_t before = commits(s);
	run_queued(jobs, threads, n, &entered, SQLITE_OK);

	for (int i = 0; i < GROUP_THREADS; i++) {
		ck_assert_int_eq(jobs[i].rc, 0);
		ck_assert_int_eq(jobs[i].result.outcome, STORE_OUTCOME_RECORDED);
	}
	ck_assert_int_eq(jobs[GROUP_THREADS].rc, 0);
	ck_assert_int_eq(jobs[GROUP_THREADS + 1].rc, 0);
	ck_assert_int_eq(jobs[GROUP_THREADS].result.outcome +
				 jobs[GROUP_THREADS + 1].result.outcome,
			 STORE_OUTCOME_RECORDED + STORE_OUTCOME_QUARANTINED);
	int claimed = 0, busy = 0;
	for (size_t i = GROUP_THREADS + 2; i < n; i++) {
		claimed += jobs[i].rc == 0;
		busy += jobs[i].rc == -EBUSY;
	}
	ck_assert_int_eq(claimed, 1);
	ck_assert_int_eq(busy, CLAIM_THREADS - 1);

	uint64_t used = commits(s) - before;
	printf("group_commit: %zu ops acknowledged in %llu commits\n", n, (unsigned long long)used);
	ck_assert_uint_lt(used, GROUP_THREADS);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.failed_reports[STORE_OUTCOME_RECORDED], GROUP_THREADS + 1);
	ck_assert_uint_eq(st.failed_reports[STORE_OUTCOME_QUARANTINED], 1);

	/* The memory each batch built by appending its keys to the VF's
	 * (commit.c, batch_appended_rows) agrees with the disk: the tallies,
	 * and a success, which finds what it clears by those keys. */
	for (int i = 0; i < GROUP_THREADS; i++)
		ck_assert_uint_eq(info(s, jobs[i].vf).tally, 1);
	ck_assert_uint_eq(info(s, VF_A).tally, 2);
	ck_assert_uint_eq(ok(s, jobs[0].vf, jobs[0].instance, T1).cleared, 1);
	/* the one that quarantined came second: its success clears both */
	const char *newer = jobs[GROUP_THREADS].result.outcome == STORE_OUTCOME_QUARANTINED ?
				    jobs[GROUP_THREADS].instance :
				    jobs[GROUP_THREADS + 1].instance;
	ck_assert_uint_eq(ok(s, VF_A, newer, T1).cleared, 2);
	ck_assert(!info(s, VF_A).quarantined);

	s = reopen(s);
	ck_assert_uint_eq(info(s, jobs[0].vf).tally, 0);
	for (int i = 1; i < GROUP_THREADS; i++)
		ck_assert_uint_eq(info(s, jobs[i].vf).tally, 1);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert(info(s, VF_B).claimed);
	store_close(s);
	/* cleared failures stay as history */
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures"), GROUP_THREADS + 2);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_at IS NULL"),
			 GROUP_THREADS - 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 1);
}
END_TEST

START_TEST(batch_fails_as_a_whole)
{
	struct store *s = open_store();
	static struct report_job jobs[8];
	pthread_t threads[ARRAY_SIZE(jobs)];
	atomic_int entered = 0;

	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		jobs[i] = (struct report_job){ .s = s, .entered = &entered, .rc = 1 };
		snprintf(jobs[i].vf, sizeof(jobs[i].vf), "0000:43:00.%zu", i);
		snprintf(jobs[i].instance, sizeof(jobs[i].instance), "i-%zu", i);
		reg(s, jobs[i].vf);
	}
	/* the held commit fails: its batch and everything queued behind it fail */
	run_queued(jobs, threads, ARRAY_SIZE(jobs), &entered, SQLITE_IOERR_FSYNC);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++)
		ck_assert_int_eq(jobs[i].rc, -EIO);
	ck_assert(!store_status(s, NULL, 0));
	struct store_vf_info *list;
	size_t n;
	ck_assert_int_eq(store_vf_list(s, &list, &n), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(list[i].tally, 0);
	free(list);
	ck_assert_int_eq(store_repair(s), 0);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++)
		ck_assert_uint_eq(info(s, jobs[i].vf).tally, 0);
	store_close(s);
}
END_TEST

/* -- change subscribers ---------------------------------------------------------- */

#define SEEN_MAX 16

struct seen {
	struct store *s;
	unsigned bits[SEEN_MAX];
	char vf[SEEN_MAX][VF_ADDR_BUFSZ];
	char instance[SEEN_MAX][INSTANCE_ID_MAX + 1];
	bool quarantined_when_notified[SEEN_MAX];
	int n;
};

static void on_change(void *userdata, const struct store_change *c)
{
	struct seen *seen = userdata;

	if (seen->n >= SEEN_MAX)
		return;
	seen->bits[seen->n] = c->bits;
	strcpy(seen->vf[seen->n], c->vf);
	strcpy(seen->instance[seen->n], c->instance_id);
	/* no store lock is held: reading back works and shows the new state */
	struct store_vf_info i;
	if (c->vf[0] && store_vf_get(seen->s, c->vf, STORE_READ_RETRY, &i) == 0)
		seen->quarantined_when_notified[seen->n] = i.quarantined;
	seen->n++;
}

START_TEST(change_callback)
{
	struct store *s = open_store();
	struct seen seen = { .s = s };
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1" };

	ck_assert_int_eq(store_subscribe(s, on_change, &seen), 0);
	reg(s, VF_A);
	ck_assert_int_eq(seen.n, 1);
	ck_assert_uint_eq(seen.bits[0], STORE_CHANGE_VFS);
	ck_assert_str_eq(seen.vf[0], VF_A);
	report_fail(s, VF_A, "i-1", T1);
	ck_assert_int_eq(seen.n, 2);
	ck_assert_uint_eq(seen.bits[1],
			  STORE_CHANGE_FAILURES | STORE_CHANGE_FAILING); /* ok -> failing */
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	ck_assert_int_eq(seen.n, 3);
	ck_assert_uint_eq(seen.bits[2], STORE_CHANGE_CLAIMS);
	ck_assert_str_eq(seen.instance[2], "i-1");
	report_fail(s, VF_A, "i-2", T2);
	ck_assert_int_eq(seen.n, 4);
	ck_assert_uint_eq(seen.bits[3], STORE_CHANGE_FAILURES | STORE_CHANGE_QUARANTINE);
	ck_assert(seen.quarantined_when_notified[3]);
	report_fail(s, VF_A, "i-2", T2); /* no change, no call */
	ck_assert_int_eq(seen.n, 4);
	ck_assert_int_eq(store_threshold_set(s, 4), 0);
	ck_assert_int_eq(seen.n, 5);
	ck_assert_uint_eq(seen.bits[4], STORE_CHANGE_THRESHOLD);
	ck_assert_str_eq(seen.vf[4], "");
	/* STORE_CHANGE_FAILING only between no failure and some (the VF's
	 * state, ok <-> failing, changes only then) */
	reg(s, VF_B);
	report_fail(s, VF_B, "i-5", T1);
	report_fail(s, VF_B, "i-6", T2);
	ck_assert_uint_eq(ok(s, VF_B, "i-5", T1).cleared, 1);
	ck_assert_uint_eq(ok(s, VF_B, "i-6", T2).cleared, 1);
	ck_assert_int_eq(seen.n, 10);
	ck_assert_uint_eq(seen.bits[6], STORE_CHANGE_FAILURES | STORE_CHANGE_FAILING);
	ck_assert_uint_eq(seen.bits[7], STORE_CHANGE_FAILURES);
	ck_assert_uint_eq(seen.bits[8], STORE_CHANGE_FAILURES);
	ck_assert_uint_eq(seen.bits[9], STORE_CHANGE_FAILURES | STORE_CHANGE_FAILING);
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(seen.n, 11);
	ck_assert_uint_eq(seen.bits[10], STORE_CHANGE_STATUS);
	store_close(s);
}
END_TEST

/* The subscribers (store.h, store_subscribe): each change goes to every
 * one, in the order they subscribed, naming the VF by address and by the id
 * that names its inodes (0 once it is gone), from every path that announces
 * (a commit, an absence, a cancelled reservation); a full list, a second
 * subscription of the same pair and an unsubscribed one are refused or
 * silent. */
struct heard {
	int who[SEEN_MAX];
	unsigned bits[SEEN_MAX];
	char vf[SEEN_MAX][VF_ADDR_BUFSZ];
	uint64_t vf_id[SEEN_MAX];
	int n;
};

struct listener {
	int tag;
	struct heard *heard;
};

static void hear(void *userdata, const struct store_change *c)
{
	struct listener *l = userdata;
	struct heard *h = l->heard;

	if (h->n >= SEEN_MAX)
		return;
	h->who[h->n] = l->tag;
	h->bits[h->n] = c->bits;
	strcpy(h->vf[h->n], c->vf);
	h->vf_id[h->n] = c->vf_id;
	h->n++;
}

/* The last two entries came from listeners 1 then 2 and say the same. */
static void heard_pair(const struct heard *h, unsigned bits, const char *vf, uint64_t vf_id)
{
	ck_assert_int_ge(h->n, 2);
	for (int i = h->n - 2; i < h->n; i++) {
		ck_assert_int_eq(h->who[i], 1 + (i - (h->n - 2)));
		ck_assert_uint_eq(h->bits[i] & bits, bits);
		ck_assert_str_eq(h->vf[i], vf);
		ck_assert_uint_eq(h->vf_id[i], vf_id);
	}
}

START_TEST(change_subscribers)
{
	struct store *s = open_store();
	struct heard h = { 0 };
	struct listener one = { 1, &h }, two = { 2, &h }, three = { 3, &h }, four = { 4, &h },
			five = { 5, &h };
	struct store_claim want = { .a.vf = VF_A, .a.instance_id = "i-1" }, res;

	ck_assert_int_eq(store_subscribe(NULL, hear, &one), -EINVAL);
	ck_assert_int_eq(store_subscribe(s, NULL, &one), -EINVAL);
	ck_assert_int_eq(store_subscribe(s, hear, &one), 0);
	ck_assert_int_eq(store_subscribe(s, hear, &two), 0);
	ck_assert_int_eq(store_subscribe(s, hear, &one), -EEXIST);
	ck_assert_int_eq(store_subscribe(s, hear, &three), 0);
	ck_assert_int_eq(store_subscribe(s, hear, &four), 0);
	ck_assert_int_eq(STORE_SUBSCRIBERS_MAX, 4);
	ck_assert_int_eq(store_subscribe(s, hear, &five), -ENOSPC);
	store_unsubscribe(s, hear, &three);
	store_unsubscribe(s, hear, &four);
	store_unsubscribe(s, hear, &five); /* none: nothing */
	store_unsubscribe(NULL, hear, &one);

	reg(s, VF_A);
	ck_assert_int_eq(h.n, 2);
	uint64_t id = info(s, VF_A).id;
	ck_assert_uint_gt(id, 0);
	heard_pair(&h, STORE_CHANGE_VFS, VF_A, id);
	reg(s, VF_B);
	heard_pair(&h, STORE_CHANGE_VFS, VF_B, info(s, VF_B).id);
	ck_assert_uint_ne(info(s, VF_B).id, id);
	report_fail(s, VF_A, "i-1", T1);
	ck_assert_int_eq(h.n, 6);
	heard_pair(&h, STORE_CHANGE_FAILURES, VF_A, id);
	ck_assert_int_eq(store_vf_set_absent(s, VF_A, true, NULL), 0);
	ck_assert_int_eq(h.n, 8);
	heard_pair(&h, STORE_CHANGE_VFS, VF_A, id);
	ck_assert_int_eq(store_vf_set_absent(s, VF_A, false, NULL), 0);
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	store_claim_cancel(s, VF_A, res.id);
	ck_assert_int_eq(h.n, 12);
	heard_pair(&h, STORE_CHANGE_RESERVATION, VF_A, id);
	ck_assert_int_eq(store_threshold_set(s, 4), 0);
	ck_assert_int_eq(h.n, 14);
	heard_pair(&h, STORE_CHANGE_THRESHOLD, "", 0);

	/* gone: no id (ids are never reused, and a new one names new inodes) */
	uint64_t id_b = info(s, VF_B).id;
	store_unsubscribe(s, hear, &one);
	ck_assert_int_eq(store_vf_unregister(s, VF_B), 0);
	ck_assert_int_eq(h.n, 15);
	ck_assert_int_eq(h.who[14], 2);
	ck_assert_str_eq(h.vf[14], VF_B);
	ck_assert_uint_eq(h.vf_id[14], 0);
	reg(s, VF_B);
	ck_assert_int_eq(h.n, 16);
	ck_assert_uint_eq(h.vf_id[15], info(s, VF_B).id);
	ck_assert_uint_ne(h.vf_id[15], id_b);
	store_close(s);
}
END_TEST

/* A reservation (store.h, Reservations): refuses like a claim at once, counts
 * as claimed for placement, is visible by name (reserved set), leaves
 * nothing durable and announces nothing until committed, is committed once
 * (a second commit is -EALREADY), and is forgotten by a cancel, a release
 * or a restart. */
START_TEST(claims_reservation)
{
	struct store *s = open_store();
	struct seen seen = { .s = s };
	struct store_claim want = { .a.vf = VF_A, .a.instance_id = "i-1", .a.pid = 5 }, res, got;
	struct store_claim other = { .a.vf = VF_A, .a.instance_id = "i-2" }, tmp;
	struct store_stats st;

	reg(s, VF_A);
	reg(s, VF_B);
	ck_assert_int_eq(store_subscribe(s, on_change, &seen), 0);
	strcpy(want.a.boot_id, BOOT_ID);
	uint64_t commits_before = commits(s);
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	ck_assert_uint_gt(res.id, 0);
	ck_assert_uint_eq(strlen(res.a.claimed_at), RFC3339_NANO_LEN);
	/* refused at once, like a claim */
	ck_assert_int_eq(store_claim_reserve(s, &want, &tmp), -EEXIST);
	ck_assert_int_eq(store_claim_reserve(s, &other, &tmp), -EBUSY);
	ck_assert_int_eq(store_claim(s, &other, NULL), -EBUSY);
	ck_assert_int_eq(store_claim(s, &want, NULL), -EEXIST);
	ck_assert_int_eq(store_vf_unregister(s, VF_A), -EBUSY);
	/* placement sees it taken (fail closed) ... */
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.claimed, 1);
	ck_assert_uint_eq(st.allocatable, 1);
	ck_assert(info(s, VF_A).claimed);
	/* ... and so do names, marked reserved, with the stamped claimed_at */
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert(got.reserved);
	ck_assert_str_eq(got.a.claimed_at, res.a.claimed_at);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_MEMORY, &got), 0);
	ck_assert_uint_eq(got.id, res.id);
	struct store_claim *live;
	size_t n;
	ck_assert_int_eq(store_claim_list(s, VF_A, &live, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(live[0].reserved);
	free(live);
	ck_assert_int_eq(store_claim_get_by_id(s, 0, res.id, &got), 0);
	ck_assert_str_eq(got.a.instance_id, "i-1");
	ck_assert(got.reserved);
	/* nothing durable, nothing announced */
	ck_assert_uint_eq(commits(s), commits_before);
	ck_assert_int_eq(seen.n, 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 0);

	/* cancelled: nothing is left, and the id is never used again */
	store_claim_cancel(s, VF_A, res.id);
	store_claim_cancel(s, VF_A, res.id); /* a no-op now */
	ck_assert_int_eq(store_claim_get_by_id(s, 0, res.id, &got), -ENOENT);
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.claimed, 0);
	ck_assert(!info(s, VF_A).claimed);
	ck_assert_int_eq(store_claim_commit(s, &res), -ENOENT);
	/* the cancel is announced once (the VF is free again), not durable */
	ck_assert_int_eq(seen.n, 1);
	ck_assert_uint_eq(seen.bits[0], STORE_CHANGE_RESERVATION);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 0);
	uint64_t dropped = res.id;

	/* committed with the first write's attributes and time: one change, one row */
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	ck_assert_uint_gt(res.id, dropped);
	strcpy(res.a.agent, "vsock:3:2222");
	strcpy(res.a.claimed_at, "2026-11-29t07:00:01z");
	struct store_claim wrong = res;
	strcpy(wrong.a.instance_id, "i-2");
	ck_assert_int_eq(store_claim_commit(s, &wrong), -ENOENT);
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	uint64_t committed = res.id;
	/* a second commit (a write racing the creator's close) changes nothing */
	ck_assert_int_eq(store_claim_commit(s, &res), -EALREADY);
	ck_assert_int_eq(seen.n, 2);
	ck_assert_uint_eq(seen.bits[1], STORE_CHANGE_CLAIMS);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_uint_eq(got.id, res.id); /* the inode its creator holds */
	ck_assert_str_eq(got.a.claimed_at, T1);
	ck_assert_str_eq(got.a.agent, "vsock:3:2222");
	ck_assert_str_eq(got.a.boot_id, BOOT_ID);
	ck_assert_int_eq(got.a.pid, 5);
	ck_assert(!got.reserved);
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.claimed, 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE boot_id = '" BOOT_ID "'"), 1);

	/* held meanwhile: the reservation is a claim, and a hold ends no claim:
	 * the commit goes through (rule_commit_refusal) */
	struct store_claim on_b = { .a.vf = VF_B, .a.instance_id = "i-5" };
	ck_assert_int_eq(store_claim_reserve(s, &on_b, &res), 0);
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, NULL), 0);
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	ck_assert_int_eq(store_claim_get_by_id(s, 0, res.id, &got), 0);
	ck_assert(!got.reserved);
	ck_assert_int_eq(store_release(s, VF_B, "i-5", NULL), 0);
	strcpy(on_b.a.instance_id, "i-3");
	ck_assert_int_eq(store_clear(s, VF_B, -1, NULL), 0);
	ck_assert_int_eq(store_claim_reserve(s, &on_b, &res), 0); /* in service again */

	/* released by name (rm, release=) before any commit: cancelled (and
	 * announced), nothing is left, and a later commit finds nothing */
	int changes = seen.n;
	uint64_t before_release = commits(s);
	ck_assert_int_eq(store_release(s, VF_B, "i-3", RELEASE_IF(T2)), -ESTALE);
	ck_assert_int_eq(store_claim_get_by_id(s, 0, res.id, &got), 0);
	ck_assert_int_eq(store_release(s, VF_B, "i-3", RELEASE_IF(res.a.claimed_at)), 0);
	ck_assert_int_eq(store_claim_get_by_id(s, 0, res.id, &got), -ENOENT);
	ck_assert_int_eq(store_claim_commit(s, &res), -ENOENT);
	ck_assert_int_eq(store_claim_reserve(s, &on_b, &res), 0);
	ck_assert_int_eq(store_release(s, VF_B, "i-3", NULL), 0);
	ck_assert_int_eq(store_claim_commit(s, &res), -ENOENT);
	ck_assert_int_eq(store_release(s, VF_B, "i-3", NULL), -ENOENT);
	ck_assert(!info(s, VF_B).claimed);
	ck_assert_uint_eq(commits(s), before_release);
	ck_assert_int_eq(seen.n, changes + 2); /* two cancels announced, nothing durable */
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE instance_id = 'i-3'"), 0);
	ck_assert_int_eq(store_claim_reserve(s, &on_b, &res), 0);

	/* a restart forgets a reservation (its inode died with the mount); ids
	 * keep growing past every committed one */
	s = reopen(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE instance_id = 'i-3'"), 0);
	ck_assert(!info(s, VF_B).claimed);
	struct store_claim after = { .a.vf = VF_B, .a.instance_id = "i-4" };
	ck_assert_int_eq(store_claim(s, &after, &got), 0);
	ck_assert_uint_gt(got.id, committed);
	/* while unavailable: refused with EIO at once */
	ck_assert_int_eq(store_release(s, VF_B, "i-4", NULL), 0);
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), 0); /* clean: a no-op, no commit */
	ck_assert_int_eq(store_threshold_set(s, 7), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(store_claim_reserve(s, &after, &res), -EIO);
	store_close(s);
}
END_TEST

/* A claim's identity is never reused on a VF: a claimed_at the writer
 * gives must be later than every other claim's of the VF, live or past
 * (rule_claimed_at_refusal); the store's own stamp is not judged. */
START_TEST(claims_identity_never_reused)
{
	struct store *s = open_store();
	struct store_claim want = { .a.vf = VF_A, .a.instance_id = "i-1" }, res, got;

	reg(s, VF_A);
	reg(s, VF_B);
	/* a first claim at T2, released: history */
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	strcpy(res.a.claimed_at, T2);
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	/* the same instance again, with the same or an earlier claimed_at: refused,
	 * and the reservation stays for its creator to cancel */
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	strcpy(res.a.claimed_at, T2);
	ck_assert_int_eq(store_claim_commit(s, &res), -EINVAL);
	strcpy(res.a.claimed_at, T1);
	ck_assert_int_eq(store_claim_commit(s, &res), -EINVAL);
	ck_assert_int_eq(store_claim_get_by_id(s, 0, res.id, &got), 0);
	ck_assert(got.reserved);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE vf_id = (SELECT id FROM vfs "
				  "WHERE address = '" VF_A "')"),
			 1);
	/* another VF's history is not this one's */
	struct store_claim on_b = { .a.vf = VF_B, .a.instance_id = "i-1" }, res_b;
	ck_assert_int_eq(store_claim_reserve(s, &on_b, &res_b), 0);
	strcpy(res_b.a.claimed_at, T1);
	ck_assert_int_eq(store_claim_commit(s, &res_b), 0);
	/* later: accepted; an update may not move it back to an earlier one */
	strcpy(res.a.claimed_at, "2026-11-29T07:00:02.000000001Z");
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	got = res;
	strcpy(got.a.claimed_at, T2);
	ck_assert_int_eq(store_claim_update(s, &got), -EINVAL);
	/* the stamp (no claimed_at given) is the store's */
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	store_close(s);
}
END_TEST

/* agent= without pid= and without control= is refused (the sentinel would
 * dial a guest with no liveness evidence); no agent= is accepted. */
START_TEST(claims_watch_rule)
{
	struct store *s = open_store();
	struct store_claim want = { .a.vf = VF_A, .a.instance_id = "i-1" }, res, next;

	reg(s, VF_A);
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	next = res;
	strcpy(next.a.agent, "vsock:3:2222");
	ck_assert_int_eq(store_claim_commit(s, &next), -EINVAL);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 0);
	next.a.pid = 7;
	ck_assert_int_eq(store_claim_commit(s, &next), 0);
	/* an update may not drop the liveness evidence */
	next.a.pid = 0;
	ck_assert_int_eq(store_claim_update(s, &next), -EINVAL);
	strcpy(next.a.control, "/run/vmm/a.ctl");
	ck_assert_int_eq(store_claim_update(s, &next), 0);
	/* no agent: exclusion only */
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	ck_assert_int_eq(store_claim(s, &want, NULL), 0);
	ck_assert(rule_claim_watched("vsock:3:2222"));
	ck_assert(!rule_claim_watched(""));
	store_close(s);
}
END_TEST

/* A bare claim whose creator is gone while the store cannot commit stays a
 * reservation, excluding its VF, and is committed once the store is
 * available again (store_claim_abandon). */
START_TEST(claims_bare_kept_while_unavailable)
{
	struct store *s = open_store();
	struct store_claim want = { .a.vf = VF_A, .a.instance_id = "i-1" }, res, got;
	struct store_stats st;
	bool kept = false;

	reg(s, VF_A);
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_claim_abandon(s, &res, &kept), 0);
	ck_assert(kept);
	ck_assert(!store_status(s, NULL, 0));
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_MEMORY, &got), 0);
	ck_assert(got.reserved);
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.claimed, 1);
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(store_repair(s), 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_MEMORY, &got), 0);
	ck_assert(!got.reserved);
	ck_assert_str_eq(got.a.claimed_at, res.a.claimed_at);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE released_at IS NULL"), 1);
	/* available: committed at once */
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	ck_assert_int_eq(store_claim_reserve(s, &want, &res), 0);
	ck_assert_int_eq(store_claim_abandon(s, &res, &kept), 0);
	ck_assert(!kept);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE released_at IS NULL"), 1);
	store_close(s);
}
END_TEST

/* release=CLAIMED_AT: only the claim it names; a newer one is -ESTALE. */
/* rm's release: only while the claim names the VMM judged gone. */
START_TEST(claims_release_if_vmm)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1", .a.claimed_at = T1 }, judged,
			   got;

	reg(s, VF_A);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &judged), 0);
	/* a pid written after the claim was judged bare */
	got = judged;
	got.a.pid = 4242;
	got.a.pid_starttime = 17;
	ck_assert_int_eq(store_claim_update(s, &got), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-1",
				       &(struct store_release_opts){ .uid = -1,
								     .if_vmm = &judged }),
			 -EBUSY);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-1",
				       &(struct store_release_opts){ .uid = -1, .if_vmm = &got }),
			 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), -ENOENT);
	store_close(s);
}
END_TEST

START_TEST(claims_conditional_release)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1", .a.claimed_at = T1 }, got;

	reg(s, VF_A);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF(T1)), -ENOENT);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF(T2)), -ESTALE);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF("")), -EINVAL);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF("yesterday")), -EINVAL);
	ck_assert_int_eq(store_release(s, VF_A, "i-2", RELEASE_IF(T1)), -ENOENT);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	/* another spelling of the same instant */
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF("2026-11-29t07:00:01.000z")), 0);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), -ENOENT);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF(T1)), -ENOENT);

	/* released and claimed again meanwhile: the old identity releases nothing */
	strcpy(c.a.claimed_at, T2);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	uint64_t before = commits(s);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF(T1)), -ESTALE);
	ck_assert_uint_eq(commits(s), before); /* decided without a transaction */
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_str_eq(got.a.claimed_at, T2);
	s = reopen(s);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", RELEASE_IF(T2)), 0);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims WHERE released_at IS NULL"), 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM claims"), 2);
}
END_TEST

/* What a version 2 vfhealthd wrote, made from a current database: no
 * parents, no mode, no history of cleared failures or of how claims ended
 * (the v3 failures table had a UNIQUE constraint of its own). */
/* A version 6 database taken back to version 5: no suspects table; then to
 * version 4: no GPU drains. */
#define V8_TO_V7_SQL "DROP INDEX probations_live; DROP TABLE probations; PRAGMA user_version = 7;"
#define V7_TO_V6_SQL                                                                               \
	V8_TO_V7_SQL                                                                               \
	"ALTER TABLE gpu_history DROP COLUMN detail; DELETE FROM meta WHERE key = 'auto_recover';" \
	"PRAGMA user_version = 6;"
#define V6_TO_V5_SQL \
	V7_TO_V6_SQL "DROP INDEX suspects_live; DROP TABLE suspects; PRAGMA user_version = 5;"
#define V5_TO_V4_SQL \
	V6_TO_V5_SQL "DROP TABLE gpus; DROP TABLE gpu_history; PRAGMA user_version = 4;"
#define V3_TO_V2_SQL                                                                        \
	V5_TO_V4_SQL                                                                        \
	"DROP INDEX claims_vf;"                                                             \
	"ALTER TABLE claims DROP COLUMN ended; ALTER TABLE claims DROP COLUMN released_by;" \
	"DELETE FROM meta WHERE key = 'mode';"                                              \
	"CREATE TABLE failures_v2 (id INTEGER PRIMARY KEY AUTOINCREMENT,"                   \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, assigned_at TEXT NOT NULL,"    \
	" reported_at TEXT NOT NULL, message TEXT NOT NULL,"                                \
	" UNIQUE (vf_id, instance_id, assigned_at));"                                       \
	"INSERT INTO failures_v2 SELECT id, vf_id, instance_id, assigned_at, reported_at,"  \
	" message FROM failures WHERE cleared_at IS NULL;"                                  \
	"DROP TABLE failures; ALTER TABLE failures_v2 RENAME TO failures;"                  \
	"ALTER TABLE vfs DROP COLUMN parent;"                                               \
	"PRAGMA user_version = 2;"

/* A version 1 database is migrated in place: its claims stay, boot_id "". */
START_TEST(schema_v1_migrated)
{
	struct store *s = open_store();
	struct store_claim c = { .a.vf = VF_A, .a.instance_id = "i-1", .a.claimed_at = T1 }, got;

	reg(s, VF_A);
	report_fail(s, VF_A, "i-0", T1);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	store_close(s);
	/* what a version 1 vfhealthd left */
	db_write(V3_TO_V2_SQL
		 "ALTER TABLE claims DROP COLUMN boot_id; ALTER TABLE vfs DROP COLUMN held;"
		 " ALTER TABLE vfs ADD COLUMN manual INTEGER NOT NULL DEFAULT 0;"
		 " PRAGMA user_version = 1");
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_str_eq(got.a.claimed_at, T1);
	ck_assert_str_eq(got.a.boot_id, "");
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	ck_assert_int_eq(store_release(s, VF_A, "i-1", NULL), 0);
	strcpy(c.a.boot_id, BOOT_ID);
	ck_assert_int_eq(store_claim(s, &c, &got), 0);
	s = reopen(s);
	ck_assert_int_eq(store_claim_get(s, VF_A, "i-1", STORE_READ_RETRY, &got), 0);
	ck_assert_str_eq(got.a.boot_id, BOOT_ID);
	store_close(s);
}
END_TEST

/* -- a lost database, one writer per file ----------------------------------------- */

static uint64_t repairs(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.repairs;
}

/* Rule 9: an emptied or missing database is never taken for a new one. */
START_TEST(lost_database_never_new)
{
	char mark[300], reason[STORE_REASON_MAX];
	struct stat st;
	size_t len;
	struct store *s = open_store();

	snprintf(mark, sizeof(mark), "%s.created", db_path);
	/* creation wrote the mark: the creation time */
	_cleanup_free_ char *when = read_file(mark, &len);
	ck_assert_ptr_nonnull(when);
	ck_assert_uint_ge(len, 20);
	ck_assert_int_eq(stat(mark, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	reg(s, VF_A);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	store_close(s);

	/* emptied: refused, and left empty */
	ck_assert_int_eq(truncate(db_path, 0), 0);
	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "empty") && strstr(reason, db_path), "%s", reason);
	char(*q)[VF_ADDR_BUFSZ];
	size_t n;
	ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &q, &n), -EIO);
	ck_assert_int_eq(store_vf_register(s, VF_B, NULL), -EIO);
	ck_assert_int_eq(store_repair(s), -EIO);
	store_close(s);
	ck_assert_int_eq(stat(db_path, &st), 0);
	ck_assert_int_eq(st.st_size, 0);

	/* missing, with the mark: refused, naming both files */
	ck_assert_int_eq(unlink(db_path), 0);
	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, db_path) && strstr(reason, mark), "%s", reason);
	ck_assert_int_eq(store_repair(s), -EIO);
	ck_assert_int_eq(stat(db_path, &st), -1);
	ck_assert_int_eq(errno, ENOENT);

	/* the operator starts afresh on purpose: removes the mark */
	ck_assert_int_eq(unlink(mark), 0);
	ck_assert_int_eq(store_repair(s), 0);
	ck_assert(store_status(s, NULL, 0));
	ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &q, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(q);
	ck_assert_int_eq(stat(mark, &st), 0);
	reg(s, VF_B);
	store_close(s);

	/* a database that predates marks adopts one */
	ck_assert_int_eq(unlink(mark), 0);
	s = open_store();
	ck_assert(store_status(s, NULL, 0));
	ck_assert_int_eq(stat(mark, &st), 0);
	ck_assert(!info(s, VF_B).quarantined);
	store_close(s);
}
END_TEST

/* Rule 10: the database file is locked itself, whatever name opens it. */
START_TEST(one_writer_per_file)
{
	char dir[300], link_path[320], reason[STORE_REASON_MAX];
	struct store *s = open_store(), *second = NULL;

	reg(s, VF_A);
	snprintf(dir, sizeof(dir), "%s/other", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(link_path, sizeof(link_path), "%s/linked.db", dir);
	ck_assert_int_eq(link(db_path, link_path), 0);
	struct store_options opt = { .path = link_path, .max_quarantined = -1 };

	ck_assert_int_eq(store_open(&opt, &second), -EBUSY);
	ck_assert_int_eq(store_open_in_child(&opt), -EBUSY);
	/* the first writer is unaffected */
	reg(s, VF_B);
	ck_assert(store_status(s, reason, sizeof(reason)));
	store_close(s);
	/* once it is gone, the link opens: the same database */
	ck_assert_int_eq(store_open(&opt, &second), 0);
	struct store_vf_info i;
	ck_assert_int_eq(store_vf_get(second, VF_B, STORE_READ_RETRY, &i), 0);
	store_close(second);
}
END_TEST

/* Rule 7: reads retry a latched store at most once a second, and never for
 * a reader who may not write (STORE_READ_NORETRY). */
START_TEST(read_retries_rate_limited)
{
	struct store *s = populated();
	struct store_vf_info i;
	struct store_claim c;
	char(*q)[VF_ADDR_BUFSZ];
	size_t n;

	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_clear(s, VF_A, -1, NULL), -EIO);
	ck_assert(!store_status(s, NULL, 0));
	uint64_t before = repairs(s);
	for (int k = 0; k < 300; k++) {
		ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_NORETRY, &i), -EIO);
		ck_assert_int_eq(store_quarantined_list(s, STORE_READ_NORETRY, &q, &n), -EIO);
		ck_assert_int_eq(store_claim_get(s, VF_C, "i-c", STORE_READ_NORETRY, &c), -EIO);
	}
	ck_assert_uint_eq(repairs(s), before);
	int64_t start = monotonic_ns();
	for (int k = 0; k < 300; k++) {
		ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_RETRY, &i), -EIO);
		ck_assert_int_eq(store_quarantined_list(s, STORE_READ_RETRY, &q, &n), -EIO);
	}
	int64_t seconds = (monotonic_ns() - start) / 1000000000 + 1;
	ck_assert_uint_ge(repairs(s), before + 1);
	ck_assert_uint_le(repairs(s), before + (uint64_t)seconds);

	/* writes work again: a reader who may not write still gets -EIO ... */
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_NORETRY, &i), -EIO);
	ck_assert(!store_status(s, NULL, 0));
	/* ... and one who may repairs once the second has passed */
	int64_t deadline = monotonic_ns() + 5000000000LL;
	while (store_vf_get(s, VF_A, STORE_READ_RETRY, &i) != 0)
		ck_assert_int_lt(monotonic_ns(), deadline);
	ck_assert(i.quarantined);
	ck_assert(store_status(s, NULL, 0));
	ck_assert_int_eq(store_vf_get(s, VF_A, STORE_READ_NORETRY, &i), 0);
	store_close(s);
}
END_TEST

/* -- parent GPUs and placement ------------------------------------------------ */

#define PF_1 "0000:40:00.0"
#define PF_2 "0000:50:00.0"

/* A VF's parent: given at registration or set once; the same value again
 * changes nothing, another is busy; bad input changes nothing; persisted. */
START_TEST(parent_set_once_persisted)
{
	struct store *s = open_store();
	struct store_vf_info i;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	reg(s, VF_B);
	ck_assert_str_eq(info(s, VF_A).parent, PF_1);
	ck_assert_str_eq(info(s, VF_B).parent, "");
	/* bad input: -EINVAL, nothing registered */
	ck_assert_int_eq(store_vf_register(s, VF_C, "0000:40:00"), -EINVAL);
	ck_assert_int_eq(store_vf_register(s, VF_C, VF_C), -EINVAL);
	ck_assert_int_eq(store_vf_get(s, VF_C, STORE_READ_RETRY, &i), -ENOENT);
	ck_assert_int_eq(store_vf_register(s, VF_A, PF_2), -EEXIST);

	uint64_t before = commits(s);
	bool unchanged = false;
	ck_assert_int_eq(store_vf_set_parent(s, VF_A, PF_1, &unchanged), 0); /* its own: a no-op */
	ck_assert(unchanged);
	ck_assert_uint_eq(commits(s), before);
	ck_assert_int_eq(store_vf_set_parent(s, VF_A, PF_2, NULL), -EBUSY);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, "", NULL), -EINVAL);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, NULL, NULL), -EINVAL);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, "0000:50:00.0x", NULL), -EINVAL);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, VF_B, NULL), -EINVAL);
	ck_assert_int_eq(store_vf_set_parent(s, VF_C, PF_2, NULL), -ENOENT);
	ck_assert_str_eq(info(s, VF_B).parent, "");
	ck_assert_uint_eq(commits(s), before);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, PF_2, &unchanged), 0);
	ck_assert(!unchanged);
	ck_assert_str_eq(info(s, VF_B).parent, PF_2);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, PF_1, NULL), -EBUSY);

	/* persisted; and still set once after a restart */
	s = reopen(s);
	ck_assert_str_eq(info(s, VF_A).parent, PF_1);
	ck_assert_str_eq(info(s, VF_B).parent, PF_2);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, PF_1, NULL), -EBUSY);
	ck_assert_int_eq(store_vf_get(s, VF_B, STORE_READ_MEMORY, &i), 0);
	ck_assert_str_eq(i.parent, PF_2);

	/* a change that would be one fails closed while unavailable; a no-op
	 * still answers */
	reg(s, VF_C);
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_vf_set_parent(s, VF_C, PF_1, NULL), -EIO);
	ck_assert_int_eq(store_vf_set_parent(s, VF_A, PF_1, NULL), 0);
	faultvfs_fail_writes(SQLITE_OK);
	store_close(s);
	/* a damaged parent column is refused at open, never served */
	db_write("UPDATE vfs SET parent = 'gpu0' WHERE address = '" VF_A "'");
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "invalid"), "%s", reason);
	store_close(s);
}
END_TEST

/* The allocatable list: in service and unclaimed only, by the VF's
 * evidence (clean, failing, held back), then by how many VFs its parent
 * has out of service (an unknown parent after a clean one), by address
 * among equals; changes follow holds, claims, parents, reports; fails
 * closed. */
/* store_allocatable_list() draws the order among equals: check that the
 * (group, parent rank) come in order, then sort equals by address to
 * compare. */
static int allocatable_sorted(struct store *s, enum store_read how, struct store_placement **p,
			      size_t *n)
{
	int r = store_allocatable_list(s, how, p, n);

	if (r < 0)
		return r;
	for (size_t i = 1; i < *n; i++) {
		ck_assert_int_le((*p)[i - 1].group, (*p)[i].group);
		if ((*p)[i - 1].group == (*p)[i].group)
			ck_assert_uint_le((*p)[i - 1].parent_rank, (*p)[i].parent_rank);
	}
	for (size_t i = 1; i < *n; i++)
		for (size_t j = i; j > 0 && (*p)[j - 1].group == (*p)[j].group &&
				   (*p)[j - 1].parent_rank == (*p)[j].parent_rank &&
				   strcmp((*p)[j - 1].vf, (*p)[j].vf) > 0;
		     j--) {
			struct store_placement t = (*p)[j];
			(*p)[j] = (*p)[j - 1];
			(*p)[j - 1] = t;
		}
	return 0;
}

START_TEST(allocatable_order)
{
	struct store *s = open_with(2, 1, FAULTVFS_NAME);
	static const char *const vfs[] = { "0000:40:00.4", "0000:40:00.5", "0000:40:00.6",
					   "0000:50:00.4", "0000:50:00.5", "0000:60:00.4",
					   "0000:60:00.5" };
	static const char *const parents[] = { PF_1, PF_1, PF_1, PF_2, PF_2, "", "" };
	struct store_placement *p = NULL;
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(vfs); i++)
		ck_assert_int_eq(store_vf_register(s, vfs[i], parents[i]), 0);
	/* all clean: known clean parents, then the unknown ones */
	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_RETRY, &p, &n), 0);
	ck_assert_uint_eq(n, ARRAY_SIZE(vfs));
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(p[i].vf, vfs[i]);
		ck_assert_int_eq(p[i].group, STORE_PLACE_CLEAN);
		ck_assert_uint_eq(p[i].parent_rank, parents[i][0] ? 0 : 1);
	}
	free(p);

	/* PF_1 gets a VF out of service (a hold), PF_2 a claimed VF (still
	 * clean), 60:00.4 is quarantined (no parent known: nobody else is
	 * degraded by it), 60:00.5 held back by the cap of 1 */
	ck_assert_int_eq(store_quarantine_manual(s, "0000:40:00.6", -1, NULL), 0);
	struct store_claim c = { .a.vf = "0000:50:00.5", .a.instance_id = "i-1" };
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	report_fail(s, "0000:60:00.4", "i-2", T1);
	ck_assert_int_eq(report_fail(s, "0000:60:00.4", "i-3", T2), STORE_OUTCOME_QUARANTINED);
	report_fail(s, "0000:60:00.5", "i-4", T1);
	ck_assert_int_eq(report_fail(s, "0000:60:00.5", "i-5", T2), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(info(s, "0000:60:00.5").state, STORE_VF_HELD_BACK);

	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_RETRY, &p, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(p[0].vf, "0000:50:00.4");
	ck_assert_int_eq(p[0].group, STORE_PLACE_CLEAN);
	ck_assert_uint_eq(p[0].parent_rank, 0);
	ck_assert_str_eq(p[1].vf, "0000:40:00.4");
	ck_assert_int_eq(p[1].group, STORE_PLACE_CLEAN);
	ck_assert_uint_eq(p[1].parent_rank, 2);
	ck_assert_str_eq(p[2].vf, "0000:40:00.5");
	ck_assert_uint_eq(p[2].parent_rank, 2);
	ck_assert_str_eq(p[3].vf, "0000:60:00.5");
	ck_assert_int_eq(p[3].group, STORE_PLACE_HELD_BACK);
	free(p);
	/* the count agrees with the stats */
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.allocatable, 4);

	/* learning a parent moves a VF: 60:00.4 (quarantined) is PF_2's, so
	 * 50:00.4 ranks with PF_1's (one out each), by address */
	ck_assert_int_eq(store_vf_set_parent(s, "0000:60:00.4", PF_2, NULL), 0);
	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_NORETRY, &p, &n), 0);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(p[0].vf, "0000:40:00.4");
	ck_assert_str_eq(p[2].vf, "0000:50:00.4");
	ck_assert_uint_eq(p[2].parent_rank, 2);
	free(p);
	/* back in service: PF_1 is clean again */
	ck_assert_int_eq(store_clear(s, "0000:40:00.6", -1, NULL), 0);
	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_RETRY, &p, &n), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(p[0].vf, "0000:40:00.4");
	ck_assert_uint_eq(p[2].parent_rank, 0);
	ck_assert_str_eq(p[2].vf, "0000:40:00.6");
	ck_assert_str_eq(p[3].vf, "0000:50:00.4");
	ck_assert_uint_eq(p[3].parent_rank, 2);
	free(p);
	/* one failed assignment on record (below the threshold of 2): after
	 * every clean VF, whatever its parent, before the held-back */
	ck_assert_int_eq(report_fail(s, "0000:40:00.5", "i-9", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(info(s, "0000:40:00.5").state, STORE_VF_FAILING);
	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_RETRY, &p, &n), 0);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(p[0].vf, "0000:40:00.4");
	ck_assert_str_eq(p[1].vf, "0000:40:00.6");
	ck_assert_str_eq(p[2].vf, "0000:50:00.4");
	ck_assert_int_eq(p[2].group, STORE_PLACE_CLEAN);
	ck_assert_str_eq(p[3].vf, "0000:40:00.5");
	ck_assert_int_eq(p[3].group, STORE_PLACE_FAILING);
	ck_assert_str_eq(p[4].vf, "0000:60:00.5");
	ck_assert_int_eq(p[4].group, STORE_PLACE_HELD_BACK);
	free(p);

	/* fail closed: -EIO while latched (the retry fails too while the
	 * fault lasts; STORE_READ_NORETRY does not try) */
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_clear(s, "0000:60:00.4", -1, NULL), -EIO);
	p = NULL;
	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_NORETRY, &p, &n), -EIO);
	ck_assert_int_eq(allocatable_sorted(s, STORE_READ_RETRY, &p, &n), -EIO);
	ck_assert_ptr_null(p);
	faultvfs_fail_writes(SQLITE_OK);
	store_close(s);
}
END_TEST

/* A version 2 database gains the parent column, unknown for every VF, the
 * mode (enforce) and the history columns, and keeps its rows. */
START_TEST(migrate_v2_to_v3)
{
	struct store *s = open_store();

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_quarantine_manual(s, VF_A, -1, NULL), 0);
	reg(s, VF_B);
	store_close(s);
	db_write(V3_TO_V2_SQL);
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	struct store_vf_info a = info(s, VF_A);
	ck_assert(a.held);
	ck_assert_str_eq(a.parent, "");
	ck_assert_str_eq(info(s, VF_B).parent, "");
	ck_assert_int_eq(store_vf_set_parent(s, VF_A, PF_2, NULL), 0);
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_ENFORCE);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM pragma_table_info('failures')"
				  " WHERE name = 'cleared_at'"),
			 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM vfs WHERE parent = '" PF_2 "'"), 1);
	/* v4: the hold in force is an open hold of an unknown writer */
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM holds WHERE cleared_at IS NULL"
				  " AND held_by IS NULL"),
			 1);
}
END_TEST

/* -- GPUs (store.h, "GPUs") ------------------------------------------------- */

static enum store_gpu_state gpu_state(struct store *s, const char *parent)
{
	struct store_gpu_info g;

	ck_assert_int_eq(store_gpu_get(s, parent, STORE_READ_RETRY, &g), 0);
	return g.state;
}

static bool allocatable_has(struct store *s, const char *vf)
{
	_cleanup_free_ struct store_placement *p = NULL;
	size_t n = 0;
	bool found = false;

	ck_assert_int_eq(store_allocatable_list(s, STORE_READ_RETRY, &p, &n), 0);
	for (size_t i = 0; i < n; i++)
		found |= strcmp(p[i].vf, vf) == 0;
	return found;
}

static struct store_claim gpu_claim(const char *vf, const char *inst)
{
	struct store_claim c = { 0 };

	snprintf(c.a.vf, sizeof(c.a.vf), "%s", vf);
	snprintf(c.a.instance_id, sizeof(c.a.instance_id), "%s", inst);
	return c;
}

struct parents_seen {
	unsigned bits[SEEN_MAX];
	char vf[SEEN_MAX][VF_ADDR_BUFSZ];
	char parent[SEEN_MAX][VF_ADDR_BUFSZ];
	int n;
};

static void collect_parents(void *userdata, const struct store_change *c)
{
	struct parents_seen *seen = userdata;

	if (seen->n >= SEEN_MAX)
		return;
	seen->bits[seen->n] = c->bits;
	strcpy(seen->vf[seen->n], c->vf);
	strcpy(seen->parent[seen->n], c->parent);
	seen->n++;
}

/* A change names the parent GPU it is about (store_change.parent): its VF's
 * (the new one when it is set), a drain's GPU; "" for a VF with none. */
START_TEST(change_names_parent)
{
	struct store *s = open_store();
	struct parents_seen seen = { 0 };
	struct store_claim a = gpu_claim(VF_A, "i-a");

	ck_assert_int_eq(store_subscribe(s, collect_parents, &seen), 0);
	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, NULL), 0);
	ck_assert_int_eq(store_vf_set_parent(s, VF_B, PF_2, NULL), 0);
	ck_assert_int_eq(store_claim(s, &a, NULL), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_release(s, VF_A, "i-a", NULL), 0);
	ck_assert_int_eq(store_vf_register(s, VF_C, NULL), 0);
	ck_assert_int_eq(store_vf_unregister(s, VF_B), 0);
	ck_assert_int_eq(seen.n, 8);
	const char *want[][3] = {
		{ VF_A, PF_1, "register" },
		{ VF_B, "", "register, no parent" },
		{ VF_B, PF_2, "parent set" },
		{ VF_A, PF_1, "claim" },
		{ "", PF_1, "drain" },
		{ VF_A, PF_1, "release" },
		{ VF_C, "", "register, no parent" },
		{ VF_B, PF_2, "unregister" },
	};
	for (int i = 0; i < seen.n; i++) {
		ck_assert_msg(strcmp(seen.vf[i], want[i][0]) == 0, "%s: vf %s", want[i][2],
			      seen.vf[i]);
		ck_assert_msg(strcmp(seen.parent[i], want[i][1]) == 0, "%s: parent '%s'",
			      want[i][2], seen.parent[i]);
	}
	ck_assert_uint_eq(seen.bits[4], STORE_CHANGE_GPU);
	store_close(s);
}
END_TEST

/* A drain refuses every new claim and reservation of the GPU's VFs and
 * takes them out of placement at once; live claims and reservations stay
 * (draining) until they end (drained); other GPUs serve; no quarantine;
 * ending it serves again. */
START_TEST(gpu_drain_refuses_claims)
{
	struct store *s = open_store();
	struct store_gpu_info g;
	struct store_stats st;
	bool unchanged = true;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_C, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, "0000:50:00.4", PF_2), 0);
	ck_assert_int_eq(store_gpu_get(s, PF_1, STORE_READ_RETRY, &g), 0);
	ck_assert_uint_eq(g.vfs, 3);
	ck_assert_int_eq(g.state, STORE_GPU_SERVING);
	ck_assert_int_eq(store_gpu_get(s, "0000:60:00.0", STORE_READ_RETRY, &g), -ENOENT);
	ck_assert_int_eq(store_gpu_get(s, "gpu0", STORE_READ_RETRY, &g), -EINVAL);
	ck_assert_int_eq(store_gpu_drain(s, "0000:60:00.0", true, 0, NULL, NULL), -ENOENT);
	ck_assert_int_eq(store_gpu_drain(s, "0000:40:00", true, 0, NULL, NULL), -EINVAL);

	/* a live claim and a live reservation before the drain */
	struct store_claim a = gpu_claim(VF_A, "i-a"), b = gpu_claim(VF_B, "i-b"), res, refused;
	ck_assert_int_eq(store_claim(s, &a, NULL), 0);
	ck_assert_int_eq(store_claim_reserve(s, &b, &res), 0);
	ck_assert(allocatable_has(s, VF_C));
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 1000, NULL, &unchanged), 0);
	ck_assert(!unchanged);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINING);
	ck_assert_int_eq(gpu_state(s, PF_2), STORE_GPU_SERVING);
	/* at once: no new claim, no reservation, out of placement, in any mode */
	struct store_claim c = gpu_claim(VF_C, "i-c");
	ck_assert_int_eq(store_claim(s, &c, NULL), -EBUSY);
	ck_assert_int_eq(store_claim_reserve(s, &c, &refused), -EBUSY);
	ck_assert(!allocatable_has(s, VF_C));
	ck_assert(allocatable_has(s, "0000:50:00.4"));
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.allocatable, 1);
	ck_assert_uint_eq(st.quarantined, 0); /* a drain is no quarantine */
	ck_assert(!info(s, VF_C).quarantined);
	ck_assert_int_eq(store_mode_set(s, STORE_MODE_OBSERVE), 0);
	ck_assert_int_eq(store_claim(s, &c, NULL), -EBUSY);
	ck_assert(!allocatable_has(s, VF_C));
	ck_assert_int_eq(store_mode_set(s, STORE_MODE_ENFORCE), 0);
	/* the reservation made before commits (it is a claim); a drain again is a no-op */
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	uint64_t before = commits(s);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 1000, NULL, &unchanged), 0);
	ck_assert(unchanged);
	ck_assert_uint_eq(commits(s), before);
	/* draining while any claim lives, drained once none does */
	ck_assert_int_eq(store_release(s, VF_A, "i-a", NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINING);
	ck_assert_int_eq(store_release(s, VF_B, "i-b", NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINED);
	ck_assert_int_eq(store_claim(s, &a, NULL), -EBUSY);
	/* ending it serves again */
	ck_assert_int_eq(store_gpu_drain(s, PF_1, false, 0, NULL, &unchanged), 0);
	ck_assert(!unchanged);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_SERVING);
	ck_assert(allocatable_has(s, VF_C));
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.allocatable, 3);

	/* the history says who asked */
	_cleanup_free_ struct store_gpu_event *h = NULL;
	size_t n, dropped;
	ck_assert_int_eq(store_gpu_history(s, PF_1, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_str_eq(h[0].event, "drain");
	ck_assert_int_eq(h[0].by, 1000);
	ck_assert_str_eq(h[1].event, "undrain");
	ck_assert_int_eq(h[1].by, 0);
	free(h);
	h = NULL;
	ck_assert_int_eq(store_gpu_history(s, PF_1, 1, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(dropped, 1);
	ck_assert_str_eq(h[0].event, "undrain");

	/* fails closed while unavailable: no drain is lost unsaid */
	faultvfs_fail_writes(SQLITE_FULL);
	ck_assert_int_eq(store_gpu_drain(s, PF_2, true, 0, NULL, NULL), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(store_gpu_get(s, PF_2, STORE_READ_NORETRY, &g), -EIO);
	store_close(s);
}
END_TEST

/* A claim racing the drain: each either holds its VF before the drain is
 * applied (and lives: the GPU is draining) or is refused; none is accepted
 * after the drain returned. */
struct drain_race {
	struct store *s;
	atomic_bool go;
	int rc[4];
	bool after[4];
	atomic_bool drained;
};

static void *drain_race_claimer(void *arg)
{
	struct drain_race *d = arg;
	static const char *const vfs[] = { VF_A, VF_B, VF_C, "0000:41:00.4" };
	static atomic_int next;
	int i = atomic_fetch_add(&next, 1);

	while (!atomic_load(&d->go))
		;
	struct store_claim c = gpu_claim(vfs[i], "i-race");
	bool was_drained = atomic_load(&d->drained);
	d->rc[i] = store_claim(d->s, &c, NULL);
	d->after[i] = was_drained;
	return NULL;
}

START_TEST(gpu_drain_claim_race)
{
	struct drain_race d = { .s = open_store() };
	static const char *const vfs[] = { VF_A, VF_B, VF_C, "0000:41:00.4" };
	pthread_t t[4];

	for (size_t i = 0; i < 4; i++)
		ck_assert_int_eq(store_vf_register(d.s, vfs[i], PF_1), 0);
	for (size_t i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, drain_race_claimer, &d), 0);
	atomic_store(&d.go, true);
	ck_assert_int_eq(store_gpu_drain(d.s, PF_1, true, 0, NULL, NULL), 0);
	atomic_store(&d.drained, true);
	for (size_t i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	size_t live = 0;
	for (size_t i = 0; i < 4; i++) {
		ck_assert_msg(d.rc[i] == 0 || d.rc[i] == -EBUSY, "claim %zu: %d", i, d.rc[i]);
		ck_assert_msg(!(d.after[i] && d.rc[i] == 0), "claim %zu accepted after the drain",
			      i);
		live += d.rc[i] == 0;
		ck_assert(!allocatable_has(d.s, vfs[i]));
	}
	ck_assert_int_eq(gpu_state(d.s, PF_1), live ? STORE_GPU_DRAINING : STORE_GPU_DRAINED);
	store_close(d.s);
}
END_TEST

/* A drain survives a restart; a phase this code does not write fails the
 * open closed (unavailable), never serves. */
START_TEST(gpu_drain_persisted)
{
	struct store *s = open_store();
	struct store_claim c = gpu_claim(VF_B, "i-b");

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, PF_1), 0);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 7, NULL, NULL), 0);
	s = reopen(s);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINING);
	ck_assert(!allocatable_has(s, VF_A));
	struct store_claim a = gpu_claim(VF_A, "i-a");
	ck_assert_int_eq(store_claim(s, &a, NULL), -EBUSY);
	ck_assert_int_eq(store_release(s, VF_B, "i-b", NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINED);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT phase FROM gpus WHERE parent = '" PF_1 "'"), 1);
}
END_TEST

START_TEST(gpu_drain_unknown_phase_fails_closed)
{
	struct store *s = open_store();
	char reason[STORE_REASON_MAX];

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	store_close(s);
	db_write("INSERT INTO gpus (parent, phase) VALUES ('" PF_1 "', 9)");
	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "invalid"), "%s", reason);
	_cleanup_free_ struct store_placement *p = NULL;
	size_t n;
	ck_assert_int_eq(store_allocatable_list(s, STORE_READ_RETRY, &p, &n), -EIO);
	struct store_claim a = gpu_claim(VF_A, "i-a");
	ck_assert_int_ne(store_claim(s, &a, NULL), 0);
	store_close(s);
	/* a serving phase is never stored: a row saying so is as unknown */
	db_write("UPDATE gpus SET phase = 0");
	s = open_store();
	ck_assert(!store_status(s, reason, sizeof(reason)));
	store_close(s);
}
END_TEST

/* v4 -> v5: every GPU serves, the data stays, drains work after. */
START_TEST(migrate_v4_to_v5)
{
	struct store *s = open_store();

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	store_close(s);
	db_write(V5_TO_V4_SQL);
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_SERVING);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINED);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
}
END_TEST

/* A store with an init window of window_s seconds. */
static struct store *open_window(int64_t window_s)
{
	struct store_options opt = { .path = db_path,
				     .max_quarantined = -1,
				     .vfs_name = FAULTVFS_NAME,
				     .init_window_ns = window_s * 1000000000 };
	struct store *s = NULL;

	ck_assert_int_eq(store_open(&opt, &s), 0);
	return s;
}

static void claim_at(struct store *s, const char *vf, const char *inst, const char *at)
{
	struct store_claim c = { .a.instance_id = "", .a.claimed_at = "" };

	strcpy(c.a.vf, vf);
	strcpy(c.a.instance_id, inst);
	strcpy(c.a.claimed_at, at);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
}

/* Release inst's claim at claimed_at, its VMM dead at died_at (NULL: now):
 * whether the VF became suspect (-errno on a refusal). */
static int crash(struct store *s, const char *vf, const char *inst, const char *claimed_at,
		 const char *died_at, int64_t *after_ms)
{
	bool began = false;
	int r = store_release(s, vf, inst,
			      &(struct store_release_opts){ .claimed_at = claimed_at,
							    .crashed = true,
							    .died_at = died_at,
							    .uid = -1,
							    .suspect_began = &began,
							    .died_after_ms = after_ms });
	return r < 0 ? r : began;
}

#define T1_PLUS_1S "2026-11-29T07:00:02.000000000Z"
#define T1_PLUS_61S "2026-11-29T07:01:02.000000000Z"

/* A VMM that dies within the init window makes its VF suspect: claimable,
 * ranked after every clean VF and before the held-back ones, persisted; a
 * death after the window, a plain release, a window of 0 do not; bad death
 * times change nothing. */
START_TEST(suspect_lifecycle)
{
	struct store *s = open_window(60);
	struct store_placement *p;
	int64_t after = -1;
	size_t n;

	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, VF_C);
	claim_at(s, VF_A, "i-1", T1);
	/* refused: a death before the claim, in the future, without ended=crash */
	ck_assert_int_eq(crash(s, VF_A, "i-1", T1, "2026-11-29T07:00:00Z", NULL), -EINVAL);
	ck_assert_int_eq(crash(s, VF_A, "i-1", T1, "2999-01-01T00:00:00Z", NULL), -EINVAL);
	ck_assert_int_eq(store_release(s, VF_A, "i-1",
				       &(struct store_release_opts){ .claimed_at = T1,
								     .died_at = T1_PLUS_1S,
								     .uid = -1 }),
			 -EINVAL);
	ck_assert_int_eq(store_release(s, VF_A, "i-1",
				       &(struct store_release_opts){ .crashed = true, .uid = -1 }),
			 -EINVAL);
	ck_assert(info(s, VF_A).claimed);
	/* dead 1 s after its claim: suspect */
	ck_assert_int_eq(crash(s, VF_A, "i-1", T1, T1_PLUS_1S, &after), 1);
	ck_assert_int_eq(after, 1000);
	struct store_vf_info a = info(s, VF_A);
	ck_assert_int_eq(a.state, STORE_VF_SUSPECT);
	ck_assert(a.suspect);
	ck_assert(!a.quarantined);
	ck_assert(!a.claimed);
	ck_assert_str_ne(a.since, "");
	ck_assert_uint_eq(a.tally, 0);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.suspect, 1);
	ck_assert_uint_eq(st.quarantined, 0);
	ck_assert_uint_eq(st.allocatable, 3);
	/* ranked last among the clean VFs, every read */
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(store_allocatable_list(s, STORE_READ_RETRY, &p, &n), 0);
		ck_assert_uint_eq(n, 3);
		ck_assert_str_eq(p[2].vf, VF_A);
		ck_assert_int_eq(p[2].group, STORE_PLACE_SUSPECT);
		ck_assert_int_eq(p[0].group, STORE_PLACE_CLEAN);
		free(p);
	}
	/* the history says which claim and how long after it its VMM died */
	struct store_history_entry *h;
	size_t dropped;
	ck_assert_int_eq(store_history_list(s, VF_A, 100, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(h[0].kind, STORE_HISTORY_CLAIM);
	ck_assert_str_eq(h[0].how, "crashed");
	ck_assert_int_eq(h[1].kind, STORE_HISTORY_SUSPECT);
	ck_assert_str_eq(h[1].instance_id, "i-1");
	ck_assert_str_eq(h[1].assigned_at, T1);
	ck_assert_str_eq(h[1].died_at, T1_PLUS_1S);
	ck_assert_int_eq(h[1].died_after_ms, 1000);
	ck_assert_str_eq(h[1].ended_at, "");
	free(h);
	/* a restart keeps it */
	char since[RFC3339_BUFSZ];
	strcpy(since, a.since);
	store_close(s);
	s = open_window(60);
	a = info(s, VF_A);
	ck_assert_int_eq(a.state, STORE_VF_SUSPECT);
	ck_assert_str_eq(a.since, since);
	/* claimable; a second crash while suspect changes nothing */
	claim_at(s, VF_A, "i-2", T2);
	ck_assert_int_eq(crash(s, VF_A, "i-2", T2, NULL, NULL), 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM suspects"), 1);

	/* dead at the window's end: suspect; a second after it: not */
	claim_at(s, VF_B, "i-3", T1);
	ck_assert_int_eq(crash(s, VF_B, "i-3", T1, T1_PLUS_61S, NULL), 0);
	ck_assert_int_eq(info(s, VF_B).state, STORE_VF_OK);
	claim_at(s, VF_B, "i-4", T2);
	ck_assert_int_eq(crash(s, VF_B, "i-4", T2, "2026-11-29T07:01:02.000000000Z", NULL), 1);
	/* a plain release, conditional or not, never */
	claim_at(s, VF_C, "i-5", T1);
	ck_assert_int_eq(store_release(s, VF_C, "i-5", RELEASE_IF(T1)), 0);
	claim_at(s, VF_C, "i-6", T2);
	ck_assert_int_eq(store_release(s, VF_C, "i-6", NULL), 0);
	ck_assert_int_eq(info(s, VF_C).state, STORE_VF_OK);
	store_close(s);

	/* a window of 0 is off */
	s = open_window(0);
	claim_at(s, VF_C, "i-7", T3);
	ck_assert_int_eq(crash(s, VF_C, "i-7", T3, NULL, NULL), 0);
	ck_assert(!info(s, VF_C).suspect);
	store_close(s);
	struct store_options bad = { .path = db_path, .max_quarantined = -1, .init_window_ns = -1 };
	ck_assert_int_eq(store_open(&bad, &s), -EINVAL);
	bad.init_window_ns = (INIT_WINDOW_MAX_S + 1) * 1000000000LL;
	ck_assert_int_eq(store_open(&bad, &s), -EINVAL);
}
END_TEST

/* A suspicion ends with the next success of a later assignment (not an
 * older one's), with the operator's clear, or with a quarantine (confirmed);
 * failures on a suspect VF count as usual. */
START_TEST(suspect_ends)
{
	struct store *s = open_window(60);
	struct store_stats st;
	struct store_success_result ok_r;
	struct store_operator_result op_r;
	struct store_history_entry *h;
	size_t n, dropped;

	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, VF_C);
	claim_at(s, VF_A, "i-1", T1);
	ck_assert_int_eq(crash(s, VF_A, "i-1", T1, T1_PLUS_1S, NULL), 1);
	/* an older assignment's success proves nothing */
	ck_assert_int_eq(store_report_success(s, VF_A, "i-0", "2026-11-29T06:00:00Z", -1, &ok_r),
			 0);
	ck_assert(!ok_r.suspect_cleared);
	ck_assert_int_eq(store_report_success(s, VF_A, "i-1", T1, -1, &ok_r), 0);
	ck_assert(!ok_r.suspect_cleared);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_SUSPECT);
	/* the next guest's does */
	ck_assert_int_eq(store_report_success(s, VF_A, "i-2", T2, -1, &ok_r), 0);
	ck_assert(ok_r.suspect_cleared);
	ck_assert_uint_eq(ok_r.cleared, 0);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_OK);
	ck_assert_str_eq(info(s, VF_A).since, "");
	ck_assert_int_eq(store_history_list(s, VF_A, 100, &h, &n, &dropped), 0);
	ck_assert_int_eq(h[n - 1].kind, STORE_HISTORY_SUSPECT);
	ck_assert_str_eq(h[n - 1].how, "ok:i-2");
	ck_assert_str_ne(h[n - 1].ended_at, "");
	free(h);

	/* failures count as usual: one is below the threshold (still suspect,
	 * ranked as such), the second quarantines and confirms it */
	claim_at(s, VF_B, "i-3", T1);
	ck_assert_int_eq(crash(s, VF_B, "i-3", T1, T1_PLUS_1S, NULL), 1);
	ck_assert_int_eq(report_fail(s, VF_B, "i-4", T2), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(info(s, VF_B).state, STORE_VF_SUSPECT);
	ck_assert_uint_eq(info(s, VF_B).tally, 1);
	struct store_failure_result fr;
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-5", T3, "NVRM: RmInitAdapter failed!",
					      &fr),
			 0);
	ck_assert_int_eq(fr.outcome, STORE_OUTCOME_QUARANTINED);
	ck_assert(fr.suspect_confirmed);
	ck_assert_int_eq(info(s, VF_B).state, STORE_VF_QUARANTINED);
	ck_assert(!info(s, VF_B).suspect);

	/* the operator's clear ends it, on a VF with nothing else to clear */
	claim_at(s, VF_C, "i-6", T1);
	ck_assert_int_eq(crash(s, VF_C, "i-6", T1, T1_PLUS_1S, NULL), 1);
	ck_assert_int_eq(store_clear(s, VF_C, 0, &op_r), 0);
	ck_assert(!op_r.unchanged);
	ck_assert(op_r.suspect);
	ck_assert_int_eq(info(s, VF_C).state, STORE_VF_OK);
	ck_assert_int_eq(store_clear(s, VF_C, 0, &op_r), 0);
	ck_assert(op_r.unchanged);

	store_get_stats(s, &st);
	ck_assert_uint_eq(st.suspect, 0);
	ck_assert_uint_eq(st.suspect_confirmed, 1);
	ck_assert_uint_eq(st.suspect_cleared, 2);
	s = reopen(s);
	ck_assert(!info(s, VF_A).suspect);
	ck_assert(!info(s, VF_C).suspect);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM suspects WHERE cleared_at IS NULL"), 0);
	ck_assert_int_eq(db_query(
				 "SELECT COUNT(*) FROM suspects WHERE cleared_why = 'quarantined'"),
			 1);
}
END_TEST

/* A version 5 database gains the suspects table, keeps its rows, and its
 * VFs are not suspect. */
START_TEST(migrate_v5_to_v6)
{
	struct store *s = open_window(60);

	reg(s, VF_A);
	claim_at(s, VF_A, "i-1", T1);
	store_close(s);
	db_write(V6_TO_V5_SQL);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM sqlite_master WHERE name = 'suspects'"), 0);
	s = open_window(60);
	char reason[STORE_REASON_MAX];
	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_OK);
	ck_assert(info(s, VF_A).claimed);
	ck_assert_int_eq(crash(s, VF_A, "i-1", T1, T1_PLUS_1S, NULL), 1);
	s = reopen(s);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_SUSPECT);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
}
END_TEST

/* sysfs's word is the store's: store_gpu_adopt makes every registered VF
 * it is given the GPU's, over an unknown or a different stored parent (a
 * writer's set-once rule stays), skips unregistered ones, and persists;
 * the adopted VF is then drained with the GPU.  store_vfs_in_use counts
 * claims and reservations over a list. */
START_TEST(gpu_adopt_sysfs)
{
	struct store *s = open_store();
	char vfs[4][VF_ADDR_BUFSZ] = { VF_A, VF_B, VF_C, "0000:41:00.4" };
	char first[VF_ADDR_BUFSZ];
	size_t adopted = 99, in_use = 99;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, ""), 0);
	ck_assert_int_eq(store_vf_register(s, VF_C, PF_2), 0);
	struct store_claim b = gpu_claim(VF_B, "i-b");
	ck_assert_int_eq(store_claim(s, &b, NULL), 0);
	ck_assert_int_eq(store_vfs_in_use(s, vfs, 4, &in_use, first), 0);
	ck_assert_uint_eq(in_use, 1);
	ck_assert_str_eq(first, VF_B);
	ck_assert_int_eq(store_gpu_adopt(s, PF_1, vfs, 4, &adopted), 0);
	ck_assert_uint_eq(adopted, 2);
	ck_assert_str_eq(info(s, VF_B).parent, PF_1);
	ck_assert_str_eq(info(s, VF_C).parent, PF_1);
	ck_assert_int_eq(store_vf_set_parent(s, VF_C, PF_2, NULL), -EBUSY);
	ck_assert_int_eq(store_gpu_adopt(s, PF_1, vfs, 4, &adopted), 0);
	ck_assert_uint_eq(adopted, 0);
	ck_assert_int_eq(store_gpu_adopt(s, VF_A, vfs, 1, NULL), -EINVAL);
	/* the claim on the adopted VF keeps the GPU draining */
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINING);
	ck_assert(!allocatable_has(s, VF_C));
	s = reopen(s);
	ck_assert_str_eq(info(s, VF_B).parent, PF_1);
	ck_assert_str_eq(info(s, VF_C).parent, PF_1);
	store_close(s);
}
END_TEST

/* A VF sysfs no longer shows (store_vf_set_absent): out of allocatable and
 * store_stats.allocatable, new claims and reservations refused, a live
 * claim kept and, released, leaving the VF absent; memory only, yet kept
 * across a repair's reload of the mirror; back, it is allocatable again. */
START_TEST(vf_absent)
{
	struct store *s = open_store();
	struct store_claim a = gpu_claim(VF_A, "i-a"), b = gpu_claim(VF_B, "i-b"), got;
	struct store_stats st;
	bool changed = false;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, PF_1), 0);
	ck_assert_int_eq(store_claim(s, &b, NULL), 0);
	ck_assert_int_eq(store_vf_set_absent(s, VF_A, true, &changed), 0);
	ck_assert(changed);
	ck_assert_int_eq(store_vf_set_absent(s, VF_A, true, &changed), 0);
	ck_assert(!changed);
	ck_assert_int_eq(store_vf_set_absent(s, VF_B, true, NULL), 0);
	ck_assert_int_eq(store_vf_set_absent(s, VF_C, true, NULL), -ENOENT);
	ck_assert_int_eq(store_vf_set_absent(s, "0000:41:00", true, NULL), -EINVAL);
	ck_assert(!allocatable_has(s, VF_A));
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.allocatable, 0);
	ck_assert_int_eq(store_claim(s, &a, NULL), -EBUSY);
	ck_assert_int_eq(store_claim_reserve(s, &a, &got), -EBUSY);
	ck_assert_int_eq(store_claim_get(s, VF_B, "i-b", STORE_READ_MEMORY, &got), 0);
	ck_assert_int_eq(store_release(s, VF_B, "i-b", NULL), 0);
	ck_assert(!allocatable_has(s, VF_B));
	/* a failed commit, then a repair reloads the mirror from the file */
	faultvfs_fail_writes(SQLITE_IOERR);
	ck_assert_int_eq(store_quarantine_manual(s, VF_B, -1, NULL), -EIO);
	faultvfs_fail_writes(SQLITE_OK);
	ck_assert_int_eq(store_repair(s), 0);
	ck_assert(!allocatable_has(s, VF_A));
	ck_assert(!allocatable_has(s, VF_B));
	ck_assert_int_eq(store_claim(s, &a, NULL), -EBUSY);
	ck_assert_int_eq(store_vf_set_absent(s, VF_A, false, &changed), 0);
	ck_assert(changed);
	ck_assert(allocatable_has(s, VF_A));
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.allocatable, 1);
	ck_assert_int_eq(store_claim(s, &a, NULL), 0);
	store_close(s);
}
END_TEST

/* A cycle: refused unless drained; recovering refuses claims and undrain;
 * recovered clears every VF's failures, quarantine and suspicion (a hold
 * stays) and serves; the history keeps each step with its detail. */
START_TEST(gpu_recover_cycle)
{
	struct store *s = open_store();
	struct store_gpu_refusal why;
	size_t cleared = 99;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_C, PF_1), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	ck_assert_int_eq(report_fail(s, VF_B, "i-3", T3), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(store_quarantine_manual(s, VF_C, 0, NULL), 0);

	/* serving: no cycle */
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, &why), -EBUSY);
	ck_assert_int_eq(why.state, STORE_GPU_SERVING);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "", NULL), -EINVAL);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 5, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 5, &why), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_RECOVERING);
	/* recovering: no claim, no undrain, no second cycle, out of placement */
	struct store_claim b = gpu_claim(VF_B, "i-b");
	ck_assert_int_eq(store_claim(s, &b, NULL), -EBUSY);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, false, 5, NULL, NULL), -EBUSY);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 5, &why), -EBUSY);
	ck_assert_int_eq(why.state, STORE_GPU_RECOVERING);
	ck_assert(!allocatable_has(s, VF_B));

	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "0.1 s", &cleared), 0);
	ck_assert_uint_eq(cleared, 2);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_SERVING);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert_uint_eq(info(s, VF_A).tally, 0);
	ck_assert_uint_eq(info(s, VF_B).tally, 0);
	ck_assert(info(s, VF_C).held); /* the operator's hold stays */
	ck_assert(allocatable_has(s, VF_A));
	ck_assert(allocatable_has(s, VF_B));
	ck_assert(!allocatable_has(s, VF_C));

	_cleanup_free_ struct store_gpu_event *h = NULL;
	size_t n, dropped;
	ck_assert_int_eq(store_gpu_history(s, PF_1, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(h[0].event, "drain");
	ck_assert_str_eq(h[1].event, "recover");
	ck_assert_int_eq(h[1].by, 5);
	ck_assert_str_eq(h[2].event, "recovered");
	ck_assert_str_eq(h[2].detail, "0.1 s");
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE cleared_why = 'recovered'"),
			 3);
}
END_TEST

/* A claim or reservation on the GPU refuses the cycle (and says so); a
 * failed cycle keeps the VFs out, a drain leaves it failed, an undrain
 * serves; a failed GPU may be cycled again by hand. */
START_TEST(gpu_recover_refused)
{
	struct store *s = open_store();
	struct store_gpu_refusal why;
	bool unchanged;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, PF_1), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	struct store_claim b = gpu_claim(VF_B, "i-b"), res;
	ck_assert_int_eq(store_claim_reserve(s, &b, &res), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, &why), -EBUSY);
	ck_assert_int_eq(why.state, STORE_GPU_DRAINING);
	ck_assert_uint_eq(why.claimed, 1);
	ck_assert_int_eq(store_claim_commit(s, &res), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, &why), -EBUSY);
	ck_assert_int_eq(store_release(s, VF_B, "i-b", NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, &why), 0);

	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, false, "timeout after 1 s", NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_FAILED);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(!allocatable_has(s, VF_B));
	ck_assert_int_eq(store_claim(s, &b, NULL), -EBUSY);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, &unchanged), 0);
	ck_assert(unchanged);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_FAILED);
	s = reopen(s);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_FAILED);
	/* by hand, again */
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, &why), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, false, "exit 1", NULL), 0);
	/* an undrain after a manual fix: serving, the quarantine stays */
	ck_assert_int_eq(store_gpu_drain(s, PF_1, false, 0, NULL, &unchanged), 0);
	ck_assert(!unchanged);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_SERVING);
	ck_assert(info(s, VF_A).quarantined);
	ck_assert(allocatable_has(s, VF_B));

	_cleanup_free_ struct store_gpu_event *h = NULL;
	size_t n, dropped;
	ck_assert_int_eq(store_gpu_history(s, PF_1, 10, &h, &n, &dropped), 0);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(h[2].event, "recover-failed");
	ck_assert_str_eq(h[2].detail, "timeout after 1 s");
	ck_assert_str_eq(h[5].event, "undrain");
	store_close(s);
}
END_TEST

/* One GPU of the host recovers at a time; the second is refused and told
 * which one recovers. */
START_TEST(gpu_recover_one_at_a_time)
{
	struct store *s = open_store();
	struct store_gpu_refusal why;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, "0000:50:00.4", PF_2), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_2, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, &why), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_2, 0, &why), -EBUSY);
	ck_assert_str_eq(why.recovering, PF_1);
	ck_assert_int_eq(why.state, STORE_GPU_DRAINED);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "", NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_2, 0, &why), 0);
	ck_assert_int_eq(gpu_state(s, PF_2), STORE_GPU_RECOVERING);
	store_close(s);
}
END_TEST

/* A restart during a cycle: still recovering (out of placement) until
 * store_gpu_fail_interrupted makes it failed; nothing resumes it. */
START_TEST(gpu_recover_interrupted)
{
	struct store *s = open_store();
	char(*parents)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 99;

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, "0000:50:00.4", PF_2), 0);
	ck_assert_int_eq(store_gpu_fail_interrupted(s, &parents, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(parents);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_2, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	s = reopen(s);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_RECOVERING);
	ck_assert(!allocatable_has(s, VF_A));
	ck_assert_int_eq(store_gpu_fail_interrupted(s, &parents, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(parents[0], PF_1);
	free(parents);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_FAILED);
	ck_assert_int_eq(gpu_state(s, PF_2), STORE_GPU_DRAINED);
	s = reopen(s);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_FAILED);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM gpu_history WHERE event ="
				  " 'recover-failed' AND detail LIKE 'interrupted%'"),
			 1);
}
END_TEST

/* auto_recover: off by default, bounded, persisted. */
START_TEST(auto_recover_setting)
{
	struct store *s = open_store();

	ck_assert_int_eq(store_auto_recover_get(s), 0);
	ck_assert_int_eq(store_auto_recover_set(s, -1), -EINVAL);
	ck_assert_int_eq(store_auto_recover_set(s, AUTO_RECOVER_MAX + 1), -EINVAL);
	ck_assert_int_eq(store_auto_recover_set(s, 2), 0);
	ck_assert_int_eq(store_auto_recover_get(s), 2);
	s = reopen(s);
	ck_assert_int_eq(store_auto_recover_get(s), 2);
	store_close(s);
	db_write("UPDATE meta SET value = 999 WHERE key = 'auto_recover'");
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert(!store_status(s, reason, sizeof(reason)));
	store_close(s);
}
END_TEST

/* A version 6 database gains the history's detail and auto_recover (off). */
START_TEST(migrate_v6_to_v7)
{
	struct store *s = open_store();

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 3, NULL, NULL), 0);
	store_close(s);
	db_write(V7_TO_V6_SQL);
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	ck_assert_int_eq(store_auto_recover_get(s), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINED);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, false, "exit 1", NULL), 0);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM gpu_history WHERE detail = 'exit 1'"), 1);
}
END_TEST

/* Assignments made after the cycle (later than any time the clock gives
 * a probation's start). */
#define T_LATE1 "2099-01-01T00:00:01.000000000Z"
#define T_LATE2 "2099-01-01T00:00:02.000000000Z"

static size_t probation_stat(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.probation;
}

static enum store_placement_group group_of(struct store *s, const char *vf)
{
	_cleanup_free_ struct store_placement *p = NULL;
	size_t n = 0;

	ck_assert_int_eq(store_allocatable_list(s, STORE_READ_RETRY, &p, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (strcmp(p[i].vf, vf) == 0)
			return p[i].group;
	return STORE_PLACE_NONE;
}

/* The why of the VF's newest probation in its history, "" when none. */
static const char *probation_why(struct store *s, const char *vf, char *buf, size_t size)
{
	_cleanup_free_ struct store_history_entry *h = NULL;
	size_t n, dropped;

	buf[0] = '\0';
	ck_assert_int_eq(store_history_list(s, vf, 50, &h, &n, &dropped), 0);
	for (size_t i = 0; i < n; i++)
		if (h[i].kind == STORE_HISTORY_PROBATION)
			snprintf(buf, size, "%s", h[i].how[0] ? h[i].how : "live");
	return buf;
}

/* The VFs a successful cycle cleared are on probation, across a reopen:
 * ranked with the suspect VFs; a success of an assignment made before it
 * began proves nothing, one made after ends it; so does the operator's
 * clear; the first failure on probation quarantines whatever the
 * threshold, and the next failure after probation counts as usual. */
START_TEST(probation_lifecycle)
{
	struct store *s = open_store();
	char why[STORE_HISTORY_WORD_MAX + 1];

	ck_assert_int_eq(store_threshold_set(s, 2), 0);
	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_B, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_C, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, VF_D, PF_1), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	ck_assert_int_eq(report_fail(s, VF_B, "i-3", T3), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_D, "i-3", T3), STORE_OUTCOME_RECORDED);
	ck_assert_uint_eq(probation_stat(s), 0);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "0.1 s", NULL), 0);

	/* the cleared VFs, not the clean one; kept across a reopen */
	s = reopen(s);
	ck_assert(info(s, VF_A).probation);
	ck_assert(info(s, VF_B).probation);
	ck_assert(info(s, VF_D).probation);
	ck_assert(!info(s, VF_C).probation);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_PROBATION);
	ck_assert_str_ne(info(s, VF_A).since, "");
	ck_assert_int_eq(info(s, VF_C).state, STORE_VF_OK);
	ck_assert_uint_eq(probation_stat(s), 3);
	ck_assert_str_eq(probation_why(s, VF_A, why, sizeof(why)), "live");
	ck_assert_int_eq(group_of(s, VF_C), STORE_PLACE_CLEAN);
	ck_assert_int_eq(group_of(s, VF_A), STORE_PLACE_SUSPECT);
	ck_assert_int_eq(group_of(s, VF_B), STORE_PLACE_SUSPECT);

	/* an OK of an assignment before the cycle proves nothing */
	ck_assert(!ok(s, VF_A, "i-2", T2).probation_ended);
	ck_assert(info(s, VF_A).probation);
	/* the first OK after it ends it */
	ck_assert(ok(s, VF_A, "i-4", T_LATE1).probation_ended);
	ck_assert(!info(s, VF_A).probation);
	ck_assert_int_eq(group_of(s, VF_A), STORE_PLACE_CLEAN);
	ck_assert_str_eq(probation_why(s, VF_A, why, sizeof(why)), "ok:i-4");
	/* ... and the threshold counts again */
	ck_assert_int_eq(report_fail(s, VF_A, "i-5", T_LATE2), STORE_OUTCOME_RECORDED);

	/* the first failure on probation quarantines below the threshold */
	struct store_failure_result fr;
	ck_assert_int_eq(store_report_failure(s, VF_B, "i-6", T_LATE1, "NVRM: again", &fr), 0);
	ck_assert_int_eq(fr.outcome, STORE_OUTCOME_QUARANTINED);
	ck_assert(fr.probation_failed);
	ck_assert(info(s, VF_B).auto_quarantined);
	ck_assert(!info(s, VF_B).probation);
	ck_assert_str_eq(probation_why(s, VF_B, why, sizeof(why)), "quarantined");

	/* the operator vouches for a VF: echo 0 ends it */
	struct store_operator_result before;
	ck_assert_int_eq(store_clear(s, VF_D, 0, &before), 0);
	ck_assert(before.probation);
	ck_assert(!info(s, VF_D).probation);
	ck_assert_str_eq(probation_why(s, VF_D, why, sizeof(why)), "operator");
	ck_assert_uint_eq(probation_stat(s), 0);
	s = reopen(s);
	ck_assert_uint_eq(probation_stat(s), 0);
	store_close(s);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM probations WHERE cleared_at IS NULL"), 0);
}
END_TEST

/* At the max_quarantined cap a failure on probation is recorded and the VF
 * stays in service, still on probation: the cap outranks probation as it
 * outranks the threshold. */
START_TEST(probation_at_cap)
{
	struct store *s = open_store();
	struct store_failure_result fr;

	ck_assert_int_eq(store_threshold_set(s, 2), 0);
	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(store_vf_register(s, "0000:50:00.4", PF_2), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "", NULL), 0);
	ck_assert(info(s, VF_A).probation);
	ck_assert_int_eq(store_max_quarantined_set(s, 1), 0);
	ck_assert_int_eq(report_fail(s, "0000:50:00.4", "i-2", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, "0000:50:00.4", "i-3", T2), STORE_OUTCOME_QUARANTINED);

	ck_assert_int_eq(store_report_failure(s, VF_A, "i-4", T_LATE1, "NVRM: again", &fr), 0);
	ck_assert_int_eq(fr.outcome, STORE_OUTCOME_RECORDED);
	ck_assert(fr.breaker_engaged);
	ck_assert(!fr.probation_failed);
	ck_assert(!info(s, VF_A).quarantined);
	ck_assert(info(s, VF_A).probation);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_PROBATION);
	ck_assert(allocatable_has(s, VF_A));
	store_close(s);
}
END_TEST

/* A version 7 database gains the probations table: a cycle marks its VFs. */
START_TEST(migrate_v7_to_v8)
{
	struct store *s = open_store();

	ck_assert_int_eq(store_vf_register(s, VF_A, PF_1), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	store_close(s);
	db_write(V8_TO_V7_SQL);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 7);
	s = open_store();
	char reason[STORE_REASON_MAX];
	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	ck_assert(!info(s, VF_A).probation);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "", NULL), 0);
	ck_assert(info(s, VF_A).probation);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 8);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM probations"), 1);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *suite = suite_create("store");
	const struct {
		const char *name;
		const TTest *test;
	} cases[] = {
#define X(name) { #name, name },
		STORE_CASES(X)
#undef X
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		TCase *tc = check_tcase(cases[i].name, 60);
		tcase_add_checked_fixture(tc, setup, teardown);
		_tcase_add_test(tc, cases[i].test, 0, 0, 0, 1);
		suite_add_tcase(suite, tc);
	}
	return suite;
}

CHECK_MAIN(store_suite)
