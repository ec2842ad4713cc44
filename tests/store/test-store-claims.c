/* SPDX-License-Identifier: MIT */
/*
 * test-store-claims.c - the store's rules (store/store.h) of claims;
 * one live claim a VF, reservations, conditional release, identity, observe mode, the placement order.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-claims.h, the list this suite runs.
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
#include "store-cases-claims.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

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

STORE_SUITE_MAIN("store-claims")
