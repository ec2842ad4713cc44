/* SPDX-License-Identifier: MIT */
/*
 * test-store-gpus.c - the store's rules (store/store.h) of GPUs;
 * parents, drains, recovery cycles, suspects, probation.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-gpus.h, the list this suite runs.
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
#include "store-cases-gpus.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

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

/* A cycle: refused unless drained; recovering refuses claims and undrain;
 * recovered clears every VF's failures, quarantine and suspicion (a hold
 * stays) and serves; the history keeps each step with its detail. */
/* PF_1's last ten events, asserted to be N. */
static struct store_gpu_event *pf1_history(struct store *s, size_t n)
{
	struct store_gpu_event *h = NULL;
	size_t got, dropped;

	ck_assert_int_eq(store_gpu_history(s, PF_1, 10, &h, &got, &dropped), 0);
	ck_assert_uint_eq(got, n);
	return h;
}

/* The GPU PF_1 with VF_A quarantined (two failures), VF_B failing once, and
 * the rest of VFS (VF_C, VF_D ...) registered and serving. */
static void pf1_one_quarantined_one_failing(struct store *s, size_t nvfs, const char *const vfs[])
{
	for (size_t i = 0; i < nvfs; i++)
		ck_assert_int_eq(store_vf_register(s, vfs[i], PF_1), 0);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-2", T2), STORE_OUTCOME_QUARANTINED);
	ck_assert_int_eq(report_fail(s, VF_B, "i-3", T3), STORE_OUTCOME_RECORDED);
}

START_TEST(gpu_recover_cycle)
{
	struct store *s = open_store();
	struct store_gpu_refusal why;
	size_t cleared = 99;
	static const char *const vfs[] = { VF_A, VF_B, VF_C };

	pf1_one_quarantined_one_failing(s, 3, vfs);
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

	_cleanup_free_ struct store_gpu_event *h = pf1_history(s, 3);
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

	_cleanup_free_ struct store_gpu_event *h = pf1_history(s, 6);
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
	static const char *const vfs[] = { VF_A, VF_B, VF_C, VF_D };

	ck_assert_int_eq(store_threshold_set(s, 2), 0);
	pf1_one_quarantined_one_failing(s, 4, vfs);
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

STORE_SUITE_MAIN("store-gpus")
