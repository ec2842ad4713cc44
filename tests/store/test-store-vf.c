/* SPDX-License-Identifier: MIT */
/*
 * test-store-vf.c - the store's rules (store/store.h) of the VF index;
 * addresses, registration, the limit, a VF gone from sysfs, state and since.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-vf.h, the list this suite runs.
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
#include "store-cases-vf.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

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

STORE_SUITE_MAIN("store-vf")
