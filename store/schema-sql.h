/* SPDX-License-Identifier: MIT */
/*
 * schema-sql.h - the database's schema as SQL text, apart from the code
 * that opens, checks and migrates it (schema.c, its only includer): every
 * table, the schema of a fresh database (SCHEMA_SQL, at
 * STORE_SCHEMA_VERSION), and one step per older version
 * (MIGRATE_VN_VN+1_SQL, each one transaction).  A new version adds its
 * table text here, to SCHEMA_SQL and as a step, and bumps the version.
 */
#ifndef VFHEALTH_STORE_SCHEMA_SQL_H
#define VFHEALTH_STORE_SCHEMA_SQL_H

#define STORE_APPLICATION_ID 0x56464831 /* 'VFH1' */
#define STORE_SCHEMA_VERSION 9

/* A failure cleared by a success, the operator or the FAILURES_PER_VF_MAX
 * cap stays as history: cleared_at (when), cleared_by (the writer's uid,
 * NULL when unknown), cleared_why.  Only live failures (FAILURE_LIVE) are
 * unique per assignment, so a cleared assignment that fails again is new.
 * A new row's rowid is one more than the largest in the table, so every
 * failure's id is larger than those of the failures before it (a success
 * clears by id); AUTOINCREMENT would only keep a deleted row's id from
 * coming back, none is ever deleted, and its sqlite_sequence page would be
 * one more page in every report's commit. */
#define FAILURES_TABLE_SQL(name)                                                         \
	"CREATE TABLE " name " (id INTEGER PRIMARY KEY,"                                 \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, assigned_at TEXT NOT NULL," \
	" reported_at TEXT NOT NULL, message TEXT NOT NULL,"                             \
	" cleared_at TEXT, cleared_by INTEGER, cleared_why TEXT);"
#define FAILURES_INDEX_SQL                                                                \
	"CREATE UNIQUE INDEX failures_live ON failures (vf_id, instance_id, assigned_at)" \
	" WHERE " FAILURE_LIVE ";"                                                        \
	"CREATE INDEX failures_vf ON failures (vf_id);"

/* An operator hold, kept as history: when and by whom (uid, NULL when
 * unknown) it was set and cleared; at most one open (cleared_at NULL) per
 * VF, the hold `vfs.held` says is in force. */
#define HOLDS_TABLE_SQL                                                           \
	"CREATE TABLE IF NOT EXISTS holds (id INTEGER PRIMARY KEY AUTOINCREMENT," \
	" vf_id INTEGER NOT NULL, held_at TEXT NOT NULL, held_by INTEGER,"        \
	" cleared_at TEXT, cleared_by INTEGER);"                                  \
	"CREATE INDEX IF NOT EXISTS holds_vf ON holds (vf_id);"

/* A parent GPU that is not serving has a row in gpus (its phase, enum
 * gpu_phase); every start and end of a drain is a row of gpu_history with
 * who asked (NULL when unknown). */
#define GPUS_TABLES_SQL                                                              \
	"CREATE TABLE gpus (parent TEXT PRIMARY KEY, phase INTEGER NOT NULL);"       \
	"CREATE TABLE gpu_history (id INTEGER PRIMARY KEY AUTOINCREMENT,"            \
	" parent TEXT NOT NULL, at TEXT NOT NULL, event TEXT NOT NULL, by INTEGER);" \
	"CREATE INDEX gpu_history_parent ON gpu_history (parent);"

/* v7: a GPU event's detail (a cycle's outcome in a few words, "" for the
 * others), and the auto_recover setting (0: off; else how many VFs of one
 * GPU out of service by automatic quarantine start its recovery). */
#define GPU_HISTORY_DETAIL_SQL "ALTER TABLE gpu_history ADD COLUMN detail TEXT NOT NULL DEFAULT '';"
#define AUTO_RECOVER_SQL "INSERT OR IGNORE INTO meta (key, value) VALUES ('auto_recover', 0);"

/* A VF's suspicions (store.h, Suspect): since (when it became suspect),
 * the claim whose VMM died (instance_id, claimed_at) and when it was known
 * dead; cleared_at/cleared_why when it ended (`ok:INSTANCE`, `operator`,
 * `quarantined`).  At most one live (cleared_at NULL) per VF. */
#define SUSPECTS_TABLE_SQL                                                         \
	"CREATE TABLE suspects (id INTEGER PRIMARY KEY AUTOINCREMENT,"             \
	" vf_id INTEGER NOT NULL, since TEXT NOT NULL, instance_id TEXT NOT NULL," \
	" claimed_at TEXT NOT NULL, died_at TEXT NOT NULL, cleared_at TEXT,"       \
	" cleared_why TEXT);"                                                      \
	"CREATE UNIQUE INDEX suspects_live ON suspects (vf_id) WHERE cleared_at IS NULL;"

/* A VF's probations (store.h, Probation): since (when the GPU's SR-IOV
 * cycle that cleared it ended); cleared_at/cleared_why when it ended
 * (`ok:INSTANCE`, `operator`, `quarantined`).  At most one live
 * (cleared_at NULL) per VF. */
#define PROBATIONS_TABLE_SQL                                             \
	"CREATE TABLE probations (id INTEGER PRIMARY KEY AUTOINCREMENT," \
	" vf_id INTEGER NOT NULL, since TEXT NOT NULL, cleared_at TEXT," \
	" cleared_why TEXT);"                                            \
	"CREATE UNIQUE INDEX probations_live ON probations (vf_id) WHERE cleared_at IS NULL;"

#define SCHEMA_SQL                                                                               \
	"BEGIN IMMEDIATE;"                                                                       \
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"                      \
	"CREATE TABLE vfs (id INTEGER PRIMARY KEY AUTOINCREMENT,"                                \
	" address TEXT NOT NULL UNIQUE, quarantined INTEGER NOT NULL DEFAULT 0,"                 \
	" quarantined_at TEXT, held INTEGER NOT NULL DEFAULT 0,"                                 \
	" parent TEXT NOT NULL DEFAULT '');" FAILURES_TABLE_SQL("failures") FAILURES_INDEX_SQL   \
		"CREATE TABLE claims (id INTEGER PRIMARY KEY AUTOINCREMENT,"                     \
		" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, claimed_at TEXT NOT NULL,"  \
		" agent TEXT NOT NULL, control TEXT NOT NULL, pid INTEGER NOT NULL,"             \
		" pid_starttime INTEGER NOT NULL, released_at TEXT,"                             \
		" boot_id TEXT NOT NULL DEFAULT '', ended TEXT, released_by INTEGER);"           \
		"CREATE UNIQUE INDEX claims_live ON claims (vf_id) WHERE released_at IS NULL;"   \
		"CREATE INDEX claims_vf ON claims (vf_id);" HOLDS_TABLE_SQL GPUS_TABLES_SQL      \
			GPU_HISTORY_DETAIL_SQL SUSPECTS_TABLE_SQL AUTO_RECOVER_SQL               \
				PROBATIONS_TABLE_SQL                                             \
		"INSERT INTO meta (key, value) VALUES ('threshold', 2), ('max_quarantined', 0)," \
		" ('mode', 0);"                                                                  \
		"PRAGMA application_id = 1447446577;" /* STORE_APPLICATION_ID */                 \
		"PRAGMA user_version = 9;"            /* STORE_SCHEMA_VERSION */                 \
		"COMMIT;"

_Static_assert(STORE_APPLICATION_ID == 1447446577, "SCHEMA_SQL names the application id");
_Static_assert(THRESHOLD_DEFAULT == 2, "SCHEMA_SQL names the default threshold");
_Static_assert(STORE_SCHEMA_VERSION == 9, "SCHEMA_SQL and the migrations name the version");
_Static_assert(STORE_MODE_ENFORCE == 0, "SCHEMA_SQL names the default mode");

/* Schema migrations, one transaction each, run at open once the checks
 * passed; each keeps every row.  quarantined_at is the time a VF went out of
 * service (the `since` of a quarantine or a hold).
 *
 * v1 -> v2: the operator hold is its own column, `held`, so that no success
 * lifts it and the breaker's cap counts automatic quarantines only.  A v1
 * manual quarantine (the `manual` flag, or a quarantine with no failure
 * behind it) becomes a hold, and `manual` goes. */
#define MIGRATE_V1_V2_SQL                                                                \
	"BEGIN IMMEDIATE;"                                                               \
	"ALTER TABLE vfs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;"                    \
	"UPDATE vfs SET held = 1, quarantined = 0 WHERE quarantined = 1 AND (manual = 1" \
	" OR NOT EXISTS (SELECT 1 FROM failures f WHERE f.vf_id = vfs.id));"             \
	"ALTER TABLE vfs DROP COLUMN manual;"                                            \
	"ALTER TABLE claims ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';"                \
	"PRAGMA user_version = 2;"                                                       \
	"COMMIT;"

/* v2 -> v3: each VF's parent GPU (its physical function's address), ""
 * while unknown: a v2 database never knew it.  Cleared failures stay as
 * history (the table is rebuilt: its UNIQUE constraint becomes a partial
 * index over the live ones); claims say how they ended and who ended them
 * (unknown for those released before); the mode (enforce) is a setting.
 * Every ALTER of version 3 goes here. */
#define MIGRATE_V2_V3_SQL                                                                                            \
	"BEGIN IMMEDIATE;"                                                                                           \
	"ALTER TABLE vfs ADD COLUMN parent TEXT NOT NULL DEFAULT '';" FAILURES_TABLE_SQL(                            \
		"failures_v3") "INSERT INTO failures_v3 (id, vf_id, instance_id, assigned_at, reported_at, message)" \
			       " SELECT id, vf_id, instance_id, assigned_at, reported_at, message FROM failures;"    \
			       "DROP TABLE failures;"                                                                \
			       "ALTER TABLE failures_v3 RENAME TO failures;" FAILURES_INDEX_SQL                      \
			       "ALTER TABLE claims ADD COLUMN ended TEXT;"                                           \
			       "ALTER TABLE claims ADD COLUMN released_by INTEGER;"                                  \
			       "CREATE INDEX claims_vf ON claims (vf_id);"                                           \
			       "INSERT INTO meta (key, value) VALUES ('mode', 0);"                                   \
			       "PRAGMA user_version = 3;"                                                            \
			       "COMMIT;"

/* v3 -> v4: operator holds are history too (who held, who cleared); a hold
 * in force becomes an open one, since its quarantined_at, by an unknown uid. */
#define MIGRATE_V3_V4_SQL                                                             \
	"BEGIN IMMEDIATE;" HOLDS_TABLE_SQL                                            \
	"INSERT INTO holds (vf_id, held_at) SELECT id, COALESCE(quarantined_at, '-')" \
	" FROM vfs WHERE held = 1 AND NOT EXISTS (SELECT 1 FROM holds o"              \
	" WHERE o.vf_id = vfs.id AND o.cleared_at IS NULL);"                          \
	"PRAGMA user_version = 4;"                                                    \
	"COMMIT;"

/* v4 -> v5: parent GPUs' drains and their history; every GPU of a v4
 * database serves (it had no drain). */
#define MIGRATE_V4_V5_SQL                                             \
	"BEGIN IMMEDIATE;" GPUS_TABLES_SQL "PRAGMA user_version = 5;" \
	"COMMIT;"

/* v5 -> v6: suspect VFs (store.h, Suspect), a table of their own; a v5
 * database never had one. */
#define MIGRATE_V5_V6_SQL                                                \
	"BEGIN IMMEDIATE;" SUSPECTS_TABLE_SQL "PRAGMA user_version = 6;" \
	"COMMIT;"

/* v6 -> v7: GPU events' details and the auto_recover setting (off). */
#define MIGRATE_V6_V7_SQL                                                                     \
	"BEGIN IMMEDIATE;" GPU_HISTORY_DETAIL_SQL AUTO_RECOVER_SQL "PRAGMA user_version = 7;" \
	"COMMIT;"

/* v7 -> v8: VFs on probation after their GPU's cycle (store.h,
 * Probation), a table of their own; a v7 database never had one. */
#define MIGRATE_V7_V8_SQL                                                  \
	"BEGIN IMMEDIATE;" PROBATIONS_TABLE_SQL "PRAGMA user_version = 8;" \
	"COMMIT;"

/* v8 -> v9: failures without AUTOINCREMENT (FAILURES_TABLE_SQL), one page
 * fewer in every report's commit; each row keeps its id, and dropping the
 * old table drops its sqlite_sequence row. */
#define MIGRATE_V8_V9_SQL                                                                                            \
	"BEGIN IMMEDIATE;" FAILURES_TABLE_SQL(                                                                       \
		"failures_v9") "INSERT INTO failures_v9 (id, vf_id, instance_id, assigned_at, reported_at, message," \
			       " cleared_at, cleared_by, cleared_why) SELECT id, vf_id, instance_id, assigned_at,"   \
			       " reported_at, message, cleared_at, cleared_by, cleared_why FROM failures;"           \
			       "DROP TABLE failures;"                                                                \
			       "ALTER TABLE failures_v9 RENAME TO failures;" FAILURES_INDEX_SQL                      \
			       "PRAGMA user_version = 9;"                                                            \
			       "COMMIT;"

#endif
