/* SPDX-License-Identifier: MIT */
/*
 * test-store-schema.c - the store's rules (store/store.h) of the schema;
 * each migration, its rollback, a newer schema refused.
 * One Check test case per rule, against real SQLite files in a fresh
 * mkdtemp directory under /tmp (store-fixture.h); faults are injected with
 * the faultvfs shim.  The case names are listed once, in meson.build's
 * store_cases, which registers each as its own test (CK_RUN_CASE) and
 * generates store-cases-schema.h, the list this suite runs.
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
#include "store-cases-schema.h"
#include "store/rules.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"
#include "tests/store/store-fixture.h"

/* A START_TEST missing from meson.build's store_cases is never registered:
 * let the compiler say so, whatever the build's werror setting. */
#pragma GCC diagnostic error "-Wunused-variable"

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

/* SQL counting TABLE's columns named COLUMN (0 or 1). */
#define COLUMNS_NAMED(table, column) \
	"SELECT COUNT(*) FROM pragma_table_info('" table "') WHERE name = '" column "'"

/* A store opened on a database of an older version: migrated and
 * available, else its reason fails the test. */
static void assert_migrated(struct store *s)
{
	char reason[STORE_REASON_MAX];

	ck_assert_msg(store_status(s, reason, sizeof(reason)), "%s", reason);
}

START_TEST(migrate_v1_to_v2)
{
	write_v1_database();
	struct store *s = open_store();

	assert_migrated(s);
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
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
	ck_assert_int_eq(db_query(COLUMNS_NAMED("vfs", "manual")), 0);
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

/* Older databases, made from a current one taken back a version at a
 * time.  Version 8: failures with AUTOINCREMENT, their sqlite_sequence row
 * at the largest id. */
#define V9_TO_V8_SQL                                                                      \
	"CREATE TABLE failures_v8 (id INTEGER PRIMARY KEY AUTOINCREMENT,"                 \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, assigned_at TEXT NOT NULL,"  \
	" reported_at TEXT NOT NULL, message TEXT NOT NULL,"                              \
	" cleared_at TEXT, cleared_by INTEGER, cleared_why TEXT);"                        \
	"INSERT INTO failures_v8 SELECT * FROM failures;"                                 \
	"DROP TABLE failures; ALTER TABLE failures_v8 RENAME TO failures;"                \
	"CREATE UNIQUE INDEX failures_live ON failures (vf_id, instance_id, assigned_at)" \
	" WHERE cleared_at IS NULL;"                                                      \
	"CREATE INDEX failures_vf ON failures (vf_id);"                                   \
	"PRAGMA user_version = 8;"

/* Version 7: no probations. */
#define V8_TO_V7_SQL \
	V9_TO_V8_SQL \
	"DROP INDEX probations_live; DROP TABLE probations; PRAGMA user_version = 7;"

/* Version 6: no GPU event details, no auto_recover. */
#define V7_TO_V6_SQL                                                                               \
	V8_TO_V7_SQL                                                                               \
	"ALTER TABLE gpu_history DROP COLUMN detail; DELETE FROM meta WHERE key = 'auto_recover';" \
	"PRAGMA user_version = 6;"

/* Version 5: no suspects table. */
#define V6_TO_V5_SQL \
	V7_TO_V6_SQL "DROP INDEX suspects_live; DROP TABLE suspects; PRAGMA user_version = 5;"

/* Version 4: no GPU drains. */
#define V5_TO_V4_SQL \
	V6_TO_V5_SQL "DROP TABLE gpus; DROP TABLE gpu_history; PRAGMA user_version = 4;"

/* What a version 2 vfhealthd wrote: no parents, no mode, no history of
 * cleared failures or of how claims ended (the v3 failures table had a
 * UNIQUE constraint of its own). */
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
	assert_migrated(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
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
	assert_migrated(s);
	struct store_vf_info a = info(s, VF_A);
	ck_assert(a.held);
	ck_assert_str_eq(a.parent, "");
	ck_assert_str_eq(info(s, VF_B).parent, "");
	ck_assert_int_eq(store_vf_set_parent(s, VF_A, PF_2, NULL), 0);
	ck_assert_int_eq(store_mode_get(s), STORE_MODE_ENFORCE);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
	ck_assert_int_eq(db_query(COLUMNS_NAMED("failures", "cleared_at")), 1);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM vfs WHERE parent = '" PF_2 "'"), 1);
	/* v4: the hold in force is an open hold of an unknown writer */
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM holds WHERE cleared_at IS NULL"
				  " AND held_by IS NULL"),
			 1);
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
	assert_migrated(s);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_SERVING);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINED);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
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
	assert_migrated(s);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_OK);
	ck_assert(info(s, VF_A).claimed);
	ck_assert_int_eq(crash(s, VF_A, "i-1", T1, T1_PLUS_1S, NULL), 1);
	s = reopen(s);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_SUSPECT);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
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
	assert_migrated(s);
	ck_assert_int_eq(store_auto_recover_get(s), 0);
	ck_assert_int_eq(gpu_state(s, PF_1), STORE_GPU_DRAINED);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, false, "exit 1", NULL), 0);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM gpu_history WHERE detail = 'exit 1'"), 1);
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
	assert_migrated(s);
	ck_assert_uint_eq(info(s, VF_A).tally, 1);
	ck_assert(!info(s, VF_A).probation);
	ck_assert_int_eq(store_gpu_drain(s, PF_1, true, 0, NULL, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_begin(s, PF_1, 0, NULL), 0);
	ck_assert_int_eq(store_gpu_recover_end(s, PF_1, true, "", NULL), 0);
	ck_assert(info(s, VF_A).probation);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM probations"), 1);
}
END_TEST

/* A version 8 database's failures lose AUTOINCREMENT and keep their ids:
 * a report after the migration takes the next id and writes no
 * sqlite_sequence row, and a success still clears by id. */
START_TEST(migrate_v8_to_v9)
{
	struct store *s = open_store();

	reg(s, VF_A);
	reg(s, VF_B);
	ck_assert_int_eq(report_fail(s, VF_A, "i-1", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_B, "i-2", T1), STORE_OUTCOME_RECORDED);
	ck_assert_int_eq(report_fail(s, VF_A, "i-3", T2), STORE_OUTCOME_QUARANTINED);
	store_close(s);
	db_write(V9_TO_V8_SQL);
	ck_assert_int_eq(db_query("SELECT seq FROM sqlite_sequence WHERE name = 'failures'"), 3);
	s = open_store();
	assert_migrated(s);
	ck_assert_uint_eq(info(s, VF_A).tally, 2);
	ck_assert_int_eq(info(s, VF_A).state, STORE_VF_QUARANTINED);
	ck_assert_int_eq(report_fail(s, VF_B, "i-4", T2), STORE_OUTCOME_QUARANTINED);
	/* i-3's success clears both of VF_A's failures (id <= 3) */
	ck_assert_uint_eq(ok(s, VF_A, "i-3", T2).cleared, 2);
	store_close(s);
	ck_assert_int_eq(db_query("PRAGMA user_version"), 9);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM sqlite_master WHERE name = 'failures'"
				  " AND sql LIKE '%AUTOINCREMENT%'"),
			 0);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'failures'"),
			 0);
	ck_assert_int_eq(db_query("SELECT id FROM failures WHERE instance_id = 'i-4'"), 4);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM failures WHERE id IN (1, 2, 3)"
				  " AND instance_id IN ('i-1', 'i-2', 'i-3')"),
			 3);
	ck_assert_int_eq(db_query("SELECT COUNT(*) FROM sqlite_master WHERE name IN"
				  " ('failures_live', 'failures_vf')"),
			 2);
}
END_TEST

STORE_SUITE_MAIN("store-schema")
