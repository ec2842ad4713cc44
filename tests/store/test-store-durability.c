/* SPDX-License-Identifier: MIT */
/*
 * test-store-durability.c - the store's rules (store/store.h) of durability;
 * persistence, one writer per file, corrupt and lost databases, failing closed and the repair.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-durability.h, the list this suite runs.
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
#include "store-cases-durability.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

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
	assert_failures(s, VF_A, 3, "i-3");
	/* the file is what this code writes */
	ck_assert_int_eq(db_query("PRAGMA application_id"), 0x56464831);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
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
	assert_failures(s, VF_B, 1, "i-3");
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

/* Its files: the check is skipped while nothing the paths resolve through
 * changed (store/files-watch.c), yet it sees the directory above the
 * database's moved away, and a repair while it is away commits nothing.
 * Another directory put there with links to the same files is the store's
 * again; the watch then follows the directories there now, so a WAL moved
 * away from the new one is seen too. */
START_TEST(files_moved_then_repaired)
{
	char var[300], old[320], new_dir[320], link_path[400], wal[300], wal_moved[320];
	static const char *const dirs[] = { "", "/lib", "/lib/vfhealth" };
	char reason[STORE_REASON_MAX];
	struct store_vf_info i;
	struct store *s = open_store();

	snprintf(var, sizeof(var), "%s/var", tmpdir);
	snprintf(old, sizeof(old), "%s.old", var);
	snprintf(new_dir, sizeof(new_dir), "%s.new", var);
	snprintf(wal, sizeof(wal), "%s-wal", db_path);
	snprintf(wal_moved, sizeof(wal_moved), "%s.moved", wal);
	reg(s, VF_A);
	reg(s, VF_B);
	/* var.new/lib/vfhealth holds links to the database file and its WAL */
	for (size_t k = 0; k < ARRAY_SIZE(dirs); k++) {
		snprintf(link_path, sizeof(link_path), "%s%s", new_dir, dirs[k]);
		ck_assert_int_eq(mkdir(link_path, 0700), 0);
	}
	snprintf(link_path, sizeof(link_path), "%s/lib/vfhealth/health.db", new_dir);
	ck_assert_int_eq(link(db_path, link_path), 0);
	snprintf(link_path, sizeof(link_path), "%s/lib/vfhealth/health.db-wal", new_dir);
	ck_assert_int_eq(link(wal, link_path), 0);

	ck_assert_int_eq(rename(var, old), 0);
	ck_assert_int_eq(store_vf_register(s, VF_C, NULL), -EIO);
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "database file") && strstr(reason, "was moved away"), "%s",
		      reason);
	ck_assert_int_eq(store_repair(s), -EIO);
	ck_assert_int_eq(rename(new_dir, var), 0);
	ck_assert_int_eq(store_repair(s), 0);
	reg(s, VF_C);
	reg(s, VF_D);
	ck_assert_int_eq(rename(wal, wal_moved), 0);
	ck_assert_int_eq(store_vf_register(s, "0000:41:00.5", NULL), -EIO);
	ck_assert(!store_status(s, reason, sizeof(reason)));
	ck_assert_msg(strstr(reason, "write-ahead log") && strstr(reason, "was moved away"), "%s",
		      reason);
	ck_assert_int_eq(rename(wal_moved, wal), 0);
	store_close(s);
	s = open_store();
	ck_assert_int_eq(store_vf_get(s, VF_D, STORE_READ_RETRY, &i), 0);
	ck_assert_int_eq(store_vf_get(s, "0000:41:00.5", STORE_READ_RETRY, &i), -ENOENT);
	store_close(s);
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

STORE_SUITE_MAIN("store-durability")
