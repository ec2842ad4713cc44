/* SPDX-License-Identifier: MIT */
/* barecommit.c - the bare SQLite loop (barecommit.h). */
#include "barecommit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/parse.h"

struct bare_loop {
	sqlite3 *db;
	sqlite3_stmt *ins;
	unsigned n;
};

static int bare_fail(struct bare_loop *b)
{
	fprintf(stderr, "bare loop: %s\n", sqlite3_errmsg(b->db));
	return -EIO;
}

int bare_commit(struct bare_loop *b)
{
	char at[RFC3339_BUFSZ], id[64];
	unsigned i = b->n++;

	snprintf(id, sizeof(id), "bench-0-%u", i);
	rfc3339_now(at);
	if (sqlite3_exec(b->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return bare_fail(b);
	sqlite3_bind_int64(b->ins, 1, i % 64 + 1);
	sqlite3_bind_text(b->ins, 2, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(b->ins, 3, at, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(b->ins, 4, at, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(b->ins, 5, "NVRM: RmInitAdapter failed! (0x22:0x65:884)", -1,
			  SQLITE_STATIC);
	int rc = sqlite3_step(b->ins);
	sqlite3_reset(b->ins);
	if (rc != SQLITE_DONE) {
		int r = bare_fail(b);
		sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	if (sqlite3_exec(b->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		return bare_fail(b);
	return 0;
}

void bare_close(struct bare_loop *b)
{
	if (!b)
		return;
	sqlite3_finalize(b->ins);
	sqlite3_close(b->db);
	free(b);
}

int bare_open(const char *path, unsigned warm, struct bare_loop **ret)
{
	struct bare_loop *b = calloc(1, sizeof(*b));
	int r = 0;

	if (!b)
		return -ENOMEM;
	unlink(path);
	if (sqlite3_open(path, &b->db) != SQLITE_OK ||
	    sqlite3_exec(b->db,
			 "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
			 "CREATE TABLE failures (id INTEGER PRIMARY KEY AUTOINCREMENT,"
			 " vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL,"
			 " assigned_at TEXT NOT NULL, reported_at TEXT NOT NULL,"
			 " message TEXT NOT NULL, UNIQUE (vf_id, instance_id, assigned_at));",
			 NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(b->db,
			       "INSERT INTO failures (vf_id, instance_id, assigned_at, reported_at, "
			       "message) VALUES (?, ?, ?, ?, ?)",
			       -1, &b->ins, NULL) != SQLITE_OK)
		r = b->db ? bare_fail(b) : -ENOMEM;
	for (unsigned i = 0; r == 0 && i < warm; i++)
		r = bare_commit(b);
	if (r == 0 && sqlite3_wal_checkpoint_v2(b->db, NULL, SQLITE_CHECKPOINT_RESTART, NULL,
						NULL) != SQLITE_OK)
		r = bare_fail(b);
	if (r < 0) {
		bare_close(b);
		return r;
	}
	*ret = b;
	return 0;
}
