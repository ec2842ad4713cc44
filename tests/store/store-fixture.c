/* SPDX-License-Identifier: MIT */
/*
 * store-fixture.c - the store suites' shared setup and helpers (store-fixture.h).
 */
#include "tests/store/store-fixture.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "faultvfs.h"
#include "store/rules.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"

char tmpdir[64];

char db_path[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

void setup(void)
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

void teardown(void)
{
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

struct store *open_with(int threshold, int max_quarantined, const char *vfs)
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
struct store *open_store(void)
{
	return open_with(0, -1, FAULTVFS_NAME);
}

struct store *reopen(struct store *s)
{
	store_close(s);
	return open_store();
}

void reg(struct store *s, const char *vf)
{
	ck_assert_int_eq(store_vf_register(s, vf, NULL), 0);
}

enum store_outcome report_fail(struct store *s, const char *vf, const char *inst, const char *at)
{
	struct store_failure_result r;

	ck_assert_int_eq(store_report_failure(s, vf, inst, at, "NVRM: RmInitAdapter failed!", &r),
			 0);
	return r.outcome;
}

struct store_success_result ok(struct store *s, const char *vf, const char *inst, const char *at)
{
	struct store_success_result r = { .cleared = 99, .rescinded = true };

	ck_assert_int_eq(store_report_success(s, vf, inst, at, -1, &r), 0);
	return r;
}

struct store_vf_info info(struct store *s, const char *vf)
{
	struct store_vf_info i;

	ck_assert_int_eq(store_vf_get(s, vf, STORE_READ_RETRY, &i), 0);
	return i;
}

uint64_t commits(struct store *s)
{
	struct store_stats st;

	store_get_stats(s, &st);
	return st.commits;
}

/* One integer from the database file, read with SQLite directly. */
long long db_query(const char *sql)
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

void db_write(const char *sql)
{
	sqlite3 *db = NULL;
	char *err = NULL;

	ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK, "%s: %s", sql,
		      err ? err : "?");
	sqlite3_close(db);
}

char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	char *buf = malloc(1 << 20);
	ck_assert_ptr_nonnull(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

void on_change(void *userdata, const struct store_change *c)
{
	struct seen *seen = userdata;

	if (seen->n >= SEEN_MAX)
		return;
	seen->bits[seen->n] = c->bits;
	strcpy(seen->vf[seen->n], c->vf);
	strcpy(seen->instance[seen->n], c->instance_id);
	strcpy(seen->parent[seen->n], c->parent);
	/* no store lock is held: reading back works and shows the new state */
	struct store_vf_info i;
	if (c->vf[0] && store_vf_get(seen->s, c->vf, STORE_READ_RETRY, &i) == 0)
		seen->quarantined_when_notified[seen->n] = i.quarantined;
	seen->n++;
}

void assert_failures(struct store *s, const char *vf, size_t n, const char *last)
{
	_cleanup_free_ struct store_failure *f = NULL;
	size_t got;

	ck_assert_int_eq(store_failure_list(s, vf, &f, &got), 0);
	ck_assert_uint_eq(got, n);
	if (n > 0)
		ck_assert_str_eq(f[n - 1].instance_id, last);
}

enum store_gpu_state gpu_state(struct store *s, const char *parent)
{
	struct store_gpu_info g;

	ck_assert_int_eq(store_gpu_get(s, parent, STORE_READ_RETRY, &g), 0);
	return g.state;
}

bool allocatable_has(struct store *s, const char *vf)
{
	_cleanup_free_ struct store_placement *p = NULL;
	size_t n = 0;
	bool found = false;

	ck_assert_int_eq(store_allocatable_list(s, STORE_READ_RETRY, &p, &n), 0);
	for (size_t i = 0; i < n; i++)
		found |= strcmp(p[i].vf, vf) == 0;
	return found;
}

struct store_claim gpu_claim(const char *vf, const char *inst)
{
	struct store_claim c = { 0 };

	snprintf(c.a.vf, sizeof(c.a.vf), "%s", vf);
	snprintf(c.a.instance_id, sizeof(c.a.instance_id), "%s", inst);
	return c;
}

/* A store with an init window of window_s seconds. */
struct store *open_window(int64_t window_s)
{
	struct store_options opt = { .path = db_path,
				     .max_quarantined = -1,
				     .vfs_name = FAULTVFS_NAME,
				     .init_window_ns = window_s * 1000000000 };
	struct store *s = NULL;

	ck_assert_int_eq(store_open(&opt, &s), 0);
	return s;
}

void claim_at(struct store *s, const char *vf, const char *inst, const char *at)
{
	struct store_claim c = { .a.instance_id = "", .a.claimed_at = "" };

	strcpy(c.a.vf, vf);
	strcpy(c.a.instance_id, inst);
	strcpy(c.a.claimed_at, at);
	ck_assert_int_eq(store_claim(s, &c, NULL), 0);
}

/* Release inst's claim at claimed_at, its VMM dead at died_at (NULL: now):
 * whether the VF became suspect (-errno on a refusal). */
int crash(struct store *s, const char *vf, const char *inst, const char *claimed_at,
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

Suite *store_cases_suite(const char *name, const struct store_case *cases, size_t n)
{
	Suite *suite = suite_create(name);

	for (size_t i = 0; i < n; i++) {
		TCase *tc = check_tcase(cases[i].name, 60);
		tcase_add_checked_fixture(tc, setup, teardown);
		_tcase_add_test(tc, cases[i].test, 0, 0, 0, 1);
		suite_add_tcase(suite, tc);
	}
	return suite;
}
