/* SPDX-License-Identifier: MIT */
/*
 * test-store-commit.c - the store's rules (store/store.h) of the group commit;
 * the fast path, batches, the change callback.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-commit.h, the list this suite runs.
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
#include "store-cases-commit.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

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

/* What store_report_failure_submit's answers saw, under a lock the test
 * waits on. */
struct answers {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned count;
	pthread_t caller; /* the thread that submitted: never the one answering */
	bool on_caller;
};

struct answer {
	struct answers *all;
	unsigned calls;
	int rc;
	struct store_failure_result result;
};

/* for this thread: its lock and condition need no destroy */
#define ANSWERS_INIT                                                                 \
	{                                                                            \
		.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, \
		.caller = pthread_self()                                             \
	}

static void answered(void *userdata, int r, const struct store_failure_result *res)
{
	struct answer *a = userdata;

	pthread_mutex_lock(&a->all->lock);
	a->calls++;
	a->rc = r;
	if (r == 0)
		a->result = *res;
	a->all->on_caller |= pthread_equal(pthread_self(), a->all->caller);
	a->all->count++;
	pthread_cond_signal(&a->all->cond);
	pthread_mutex_unlock(&a->all->lock);
}

static unsigned answers_count(struct answers *all)
{
	pthread_mutex_lock(&all->lock);
	unsigned n = all->count;
	pthread_mutex_unlock(&all->lock);
	return n;
}

static bool answers_wait(struct answers *all, unsigned n, int seconds)
{
	struct timespec deadline;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += seconds;
	pthread_mutex_lock(&all->lock);
	while (all->count < n && r == 0)
		r = pthread_cond_timedwait(&all->cond, &all->lock, &deadline);
	bool done = all->count >= n;
	pthread_mutex_unlock(&all->lock);
	return done;
}

#define JOINED 8

/* Submit a failure of instance PREFIX-i on vf[i] for i from first to
 * JOINED - 1, each to join the commit under way. */
static void join_reports(struct store *s, char (*vf)[VF_ADDR_BUFSZ], struct answer *a, int first,
			 const char *prefix)
{
	for (int i = first; i < JOINED; i++) {
		char id[16];
		snprintf(id, sizeof(id), "%s-%d", prefix, i);
		ck_assert_int_eq(store_report_failure_submit(s, vf[i], id, T1, "m", answered,
							     &a[i]),
				 0);
	}
}

/* Reports queued behind a held commit return at once and are answered
 * once each, after their commit, by another thread, in fewer commits than
 * reports; what cannot join is said at once; a caller queued behind them
 * is not stranded; store_close() answers what is left. */
START_TEST(reports_join_the_commit_under_way)
{
	struct store *s = open_store();
	static struct answer a[JOINED];
	struct answers all = ANSWERS_INIT;
	struct report_job lead = { .s = s, .vf = VF_A, .instance = "i-lead", .rc = 1 };
	struct report_job claimer = {
		.s = s, .vf = VF_B, .instance = "i-claim", .rc = 1, .claim = true
	};
	pthread_t leader, claim;
	char vf[JOINED][VF_ADDR_BUFSZ];

	reg(s, VF_A);
	reg(s, VF_B);
	for (int i = 0; i < JOINED; i++) {
		snprintf(vf[i], sizeof(vf[i]), "0000:44:00.%d", i);
		reg(s, vf[i]);
		a[i] = (struct answer){ .all = &all, .rc = 1 };
	}
	/* nothing under way: the caller commits it itself */
	ck_assert(!store_commit_under_way(s));
	ck_assert_int_eq(store_report_failure_submit(s, vf[0], "i-0", T1, "m", answered, &a[0]),
			 -EAGAIN);

	uint64_t before = commits(s);
	faultvfs_block_syncs(true);
	ck_assert_int_eq(pthread_create(&leader, NULL, failure_thread, &lead), 0);
	ck_assert(faultvfs_wait_blocked(1, 10000));
	ck_assert(store_commit_under_way(s));
	join_reports(s, vf, a, 0, "i");
	/* refused at once, as store_report_failure() would refuse them */
	ck_assert_int_eq(store_report_failure_submit(s, "0000:45:00.0", "i-x", T1, "m", answered,
						     &a[0]),
			 -ENOENT);
	ck_assert_int_eq(store_report_failure_submit(s, "nonsense", "i-x", T1, "m", answered,
						     &a[0]),
			 -EINVAL);
	/* a caller queued behind the joined reports waits for its own */
	ck_assert_int_eq(pthread_create(&claim, NULL, failure_thread, &claimer), 0);
	for (int i = 0; i < 1000; i++)
		sched_yield(); /* the claim's place in the queue does not matter */
	ck_assert_msg(answers_count(&all) == 0, "answered before the commit was durable");
	faultvfs_block_syncs(false);

	ck_assert(join_within(leader, 60));
	ck_assert(join_within(claim, 60));
	ck_assert(answers_wait(&all, JOINED, 60));
	ck_assert_int_eq(lead.rc, 0);
	ck_assert_int_eq(claimer.rc, 0);
	ck_assert(!all.on_caller);
	for (int i = 0; i < JOINED; i++) {
		ck_assert_uint_eq(a[i].calls, 1);
		ck_assert_int_eq(a[i].rc, 0);
		ck_assert_int_eq(a[i].result.outcome, STORE_OUTCOME_RECORDED);
		ck_assert_uint_eq(a[i].result.tally, 1);
		ck_assert_uint_eq(info(s, vf[i]).tally, 1);
	}
	uint64_t used = commits(s) - before;
	printf("reports_join_the_commit_under_way: %d reports and a claim in %llu commits\n",
	       JOINED + 1, (unsigned long long)used);
	ck_assert_uint_lt(used, JOINED + 2);
	struct store_stats st;
	store_get_stats(s, &st);
	ck_assert_uint_eq(st.failed_reports[STORE_OUTCOME_RECORDED], JOINED + 1);
	ck_assert_uint_eq(st.reports_joined, JOINED);

	/* A repeat is answered from the state, on the caller's thread. */
	faultvfs_block_syncs(true);
	lead = (struct report_job){ .s = s, .vf = VF_A, .instance = "i-lead2", .rc = 1 };
	ck_assert_int_eq(pthread_create(&leader, NULL, failure_thread, &lead), 0);
	ck_assert(faultvfs_wait_blocked(1, 10000));
	ck_assert_int_eq(store_report_failure_submit(s, vf[0], "i-0", T1, "m", answered, &a[0]),
			 -EAGAIN);
	/* The close answers what is queued: the answers come before it returns. */
	join_reports(s, vf, a, 1, "j");
	faultvfs_block_syncs(false);
	ck_assert(join_within(leader, 60));
	store_close(s);
	ck_assert_uint_eq(answers_count(&all), JOINED + JOINED - 1);
	for (int i = 1; i < JOINED; i++) {
		ck_assert_uint_eq(a[i].calls, 2);
		ck_assert_int_eq(a[i].rc, 0);
		ck_assert_uint_eq(a[i].result.tally, 2);
	}
}
END_TEST

/* A joined report whose batch fails is answered -EIO, and changed nothing. */
START_TEST(joined_reports_fail_with_their_batch)
{
	struct store *s = open_store();
	static struct answer a[JOINED];
	struct answers all = ANSWERS_INIT;
	struct report_job lead = { .s = s, .vf = VF_A, .instance = "i-lead", .rc = 1 };
	pthread_t leader;
	char vf[JOINED][VF_ADDR_BUFSZ];

	reg(s, VF_A);
	for (int i = 0; i < JOINED; i++) {
		snprintf(vf[i], sizeof(vf[i]), "0000:44:00.%d", i);
		reg(s, vf[i]);
		a[i] = (struct answer){ .all = &all, .rc = 1 };
	}
	faultvfs_block_syncs(true);
	ck_assert_int_eq(pthread_create(&leader, NULL, failure_thread, &lead), 0);
	ck_assert(faultvfs_wait_blocked(1, 10000));
	for (int i = 0; i < JOINED; i++)
		ck_assert_int_eq(store_report_failure_submit(s, vf[i], "i", T1, "m", answered,
							     &a[i]),
				 0);
	faultvfs_fail_syncs(SQLITE_IOERR_FSYNC);
	faultvfs_block_syncs(false);
	ck_assert(join_within(leader, 60));
	ck_assert(answers_wait(&all, JOINED, 60));
	faultvfs_fail_syncs(SQLITE_OK);
	ck_assert_int_eq(lead.rc, -EIO);
	for (int i = 0; i < JOINED; i++) {
		ck_assert_uint_eq(a[i].calls, 1);
		ck_assert_int_eq(a[i].rc, -EIO);
	}
	ck_assert(!store_status(s, NULL, 0));
	ck_assert_int_eq(store_repair(s), 0);
	for (int i = 0; i < JOINED; i++)
		ck_assert_uint_eq(info(s, vf[i]).tally, 0);
	store_close(s);
}
END_TEST

/* A caller of its own that leads a batch holding a joined report (it was
 * queued first, and led the batch after the one under way) hands the
 * report to the answerer, which answers it, though nothing else woke it. */
START_TEST(a_caller_hands_joined_reports_on)
{
	struct store *s = open_store();
	static struct answer a;
	struct answers all = ANSWERS_INIT;
	struct report_job lead = { .s = s, .vf = VF_A, .instance = "i-lead", .rc = 1 };
	atomic_int entered = 0;
	struct report_job claimer = { .s = s,
				      .vf = VF_B,
				      .instance = "i-claim",
				      .rc = 1,
				      .claim = true,
				      .entered = &entered };
	pthread_t leader, claim;

	a = (struct answer){ .all = &all, .rc = 1 };
	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, "0000:44:00.0");
	faultvfs_block_syncs(true);
	ck_assert_int_eq(pthread_create(&leader, NULL, failure_thread, &lead), 0);
	ck_assert(faultvfs_wait_blocked(1, 10000));
	/* the claim queued first, so that it leads the next batch, the
	 * report's; were the report first, the committer would lead */
	ck_assert_int_eq(pthread_create(&claim, NULL, failure_thread, &claimer), 0);
	for (int tries = 0; atomic_load(&entered) < 1 && tries < 100000; tries++)
		sched_yield();
	for (int i = 0; i < 1000; i++)
		sched_yield(); /* time to queue; correctness does not depend on it */
	ck_assert_int_eq(store_report_failure_submit(s, "0000:44:00.0", "i-0", T1, "m", answered,
						     &a),
			 0);
	faultvfs_block_syncs(false);
	ck_assert(join_within(leader, 60));
	ck_assert(join_within(claim, 60));
	ck_assert_msg(answers_wait(&all, 1, 30), "a joined report was never answered");
	ck_assert_int_eq(a.rc, 0);
	ck_assert_int_eq(claimer.rc, 0);
	store_close(s);
	ck_assert_uint_eq(a.calls, 1);
}
END_TEST

/* At most STORE_JOINED_MAX reports wait for their answer at once: past
 * it a submit says -EAGAIN, and once they are answered they may join again. */
START_TEST(joined_reports_are_bounded)
{
	struct store *s = open_store();
	static struct answer a[STORE_JOINED_MAX + 1];
	struct answers all = ANSWERS_INIT;
	struct report_job lead = { .s = s, .vf = VF_A, .instance = "i-lead", .rc = 1 };
	pthread_t leader;
	char id[32];

	reg(s, VF_A);
	reg(s, VF_B);
	reg(s, "0000:44:00.0");
	for (int round = 0; round < 2; round++) {
		/* the first round quarantines its VF: the second reports on another */
		const char *vf = round == 0 ? VF_B : "0000:44:00.0";

		faultvfs_block_syncs(true);
		ck_assert_int_eq(pthread_create(&leader, NULL, failure_thread, &lead), 0);
		ck_assert(faultvfs_wait_blocked(1, 10000));
		int n = round == 0 ? STORE_JOINED_MAX : 1;
		for (int i = 0; i < n; i++) {
			a[i] = (struct answer){ .all = &all, .rc = 1 };
			snprintf(id, sizeof(id), "r%d-%d", round, i);
			ck_assert_int_eq(store_report_failure_submit(s, vf, id, T1, "m", answered,
								     &a[i]),
					 0);
		}
		if (round == 0) {
			snprintf(id, sizeof(id), "r%d-over", round);
			ck_assert_int_eq(store_report_failure_submit(s, vf, id, T1, "m", answered,
								     &a[n]),
					 -EAGAIN);
		}
		faultvfs_block_syncs(false);
		ck_assert(join_within(leader, 60));
		ck_assert(answers_wait(&all, round == 0 ? STORE_JOINED_MAX : STORE_JOINED_MAX + 1,
				       60));
		for (int i = 0; i < n; i++)
			ck_assert_int_eq(a[i].rc, 0);
		lead.instance[0] = 'j'; /* a new failure next round */
		lead.rc = 1;
	}
	ck_assert_uint_eq(a[STORE_JOINED_MAX].calls, 0);
	store_close(s);
}
END_TEST

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

/* A change names the parent GPU it is about (store_change.parent): its VF's
 * (the new one when it is set), a drain's GPU; "" for a VF with none. */
START_TEST(change_names_parent)
{
	struct store *s = open_store();
	struct seen seen = { .s = s };
	struct store_claim a = gpu_claim(VF_A, "i-a");

	ck_assert_int_eq(store_subscribe(s, on_change, &seen), 0);
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

STORE_SUITE_MAIN("store-commit")
