/* SPDX-License-Identifier: MIT */
/*
 * db.c - the store's SQLite helpers: prepare-and-bind, step, exec, one
 * integer, and the row readers the operations, the batch and the load share
 * (a VF's row, a setting, counts, a failure key, a claim, a VF's whole
 * committed state).  Callers hold write_lock (store-internal.h); the first
 * error of a batch or an open is remembered as the reason the store is
 * unavailable.  The statements an operation runs are prepared once per
 * connection (the statement cache below): parsing SQL costs more than
 * running them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "store/store-internal.h"

/* Remember the first SQLite error of a batch or an open; its message becomes
 * the reason the store is unavailable. */
int db_fail(struct store *s, const char *what)
{
	if (!s->batch_failed) {
		s->batch_failed = true;
		snprintf(s->batch_error, sizeof(s->batch_error), "%s: %s", what,
			 s->db ? sqlite3_errmsg(s->db) : "no database");
	}
	return -EIO;
}

/* Bind sql's parameters (store-internal.h's db_args), each by its type.
 * A count other than the statement's is a caller's mistake that SQLite
 * would take for NULLs: the statement fails instead. */
static int db_bind(struct store *s, sqlite3_stmt *st, struct db_args args)
{
	if ((size_t)sqlite3_bind_parameter_count(st) != args.n)
		return db_fail(s, "database error: parameter count");
	for (size_t i = 0; i < args.n; i++) {
		const struct db_value *v = &args.v[i];
		int rc = SQLITE_MISUSE;
		switch (v->type) {
		case DB_TEXT:
			rc = sqlite3_bind_text(st, (int)i + 1, v->text, -1, SQLITE_STATIC);
			break;
		case DB_INT64:
			rc = sqlite3_bind_int64(st, (int)i + 1, v->i64);
			break;
		}
		if (rc != SQLITE_OK)
			return db_fail(s, "database error");
	}
	return 0;
}

static void db_uncache(struct store *s, sqlite3_stmt *st);

/* The statement cache.  Parsing SQL costs more than running these
 * statements (a report runs a dozen), so the ones that run per operation
 * (db_int, db_exec and the row readers) are prepared once per connection
 * and reset after each use.  A statement is handed out once at a time (a
 * nested use of the same SQL gets its own, finalized after use); the cache
 * is emptied before the connection closes (db_stmt_cache_clear). */
static sqlite3_stmt *db_cached(struct store *s, const char *sql, struct db_args args)
{
	struct db_cached_stmt *slot = NULL;
	sqlite3_stmt *st = NULL;

	for (size_t i = 0; i < s->n_stmts && !slot; i++)
		if (!s->stmts[i].busy && strcmp(sqlite3_sql(s->stmts[i].st), sql) == 0)
			slot = &s->stmts[i];
	if (slot) {
		st = slot->st;
	} else {
		bool keep = s->n_stmts < DB_STMT_CACHE_MAX;
		if (sqlite3_prepare_v3(s->db, sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0, &st,
				       NULL) != SQLITE_OK) {
			db_fail(s, "database error");
			sqlite3_finalize(st);
			return NULL;
		}
		if (keep) {
			slot = &s->stmts[s->n_stmts++];
			slot->st = st;
		}
	}
	if (slot)
		slot->busy = true;
	if (db_bind(s, st, args) < 0) {
		db_uncache(s, st);
		return NULL;
	}
	return st;
}

/* Give back what db_cached() handed out. */
static void db_uncache(struct store *s, sqlite3_stmt *st)
{
	for (size_t i = 0; st && i < s->n_stmts; i++)
		if (s->stmts[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			s->stmts[i].busy = false;
			return;
		}
	sqlite3_finalize(st);
}

void db_stmt_cache_clear(struct store *s)
{
	for (size_t i = 0; i < s->n_stmts; i++)
		sqlite3_finalize(s->stmts[i].st);
	s->n_stmts = 0;
}

/* Prepare sql (not cached: statements that run once per open or load) and
 * bind its parameters (db_bind). */
sqlite3_stmt *db_prepare(struct store *s, const char *sql, struct db_args args)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
		db_fail(s, "database error");
		sqlite3_finalize(st);
		return NULL;
	}
	if (db_bind(s, st, args) < 0) {
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

/* Step a statement: 1 for a row, 0 when done, -EIO on error. */
int db_step(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return db_fail(s, "database error");
}

/* Prepare, bind and run: with ret NULL every row is stepped over (0 when
 * done); else the first column of the first row lands in *ret (1 row, 0
 * none).  -EIO on error. */
static int db_run(struct store *s, int64_t *ret, const char *sql, struct db_args args)
{
	sqlite3_stmt *st = db_cached(s, sql, args);
	int r;

	if (!st)
		return -EIO;
	if (!ret) {
		while ((r = db_step(s, st)) == 1)
			;
	} else {
		r = db_step(s, st);
		if (r == 1)
			*ret = sqlite3_column_int64(st, 0);
	}
	db_uncache(s, st);
	return r;
}

/* Run a statement that returns no rows. */
int db_exec(struct store *s, const char *sql, struct db_args args)
{
	return db_run(s, NULL, sql, args);
}

/* The first column of the first row as an integer: 1 row, 0 none, -EIO. */
int db_int(struct store *s, int64_t *ret, const char *sql, struct db_args args)
{
	return db_run(s, ret, sql, args);
}

const char *db_col_text(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	return t ? (const char *)t : "";
}

/* Add the row's (id, instance_id, assigned_at) at col.. to a builder. */
int db_read_failure_key(sqlite3_stmt *st, int col, struct failure_builder *b)
{
	const char *instance_id = db_col_text(st, col + 1);

	return failure_builder_push(b, sqlite3_column_int64(st, col), instance_id,
				    strlen(instance_id), db_col_text(st, col + 2));
}

void db_read_claim(sqlite3_stmt *st, int col, const char *vf, struct store_claim *c)
{
	memset(c, 0, sizeof(*c));
	copy_string(c->a.vf, sizeof(c->a.vf), vf);
	c->id = (uint64_t)sqlite3_column_int64(st, col);
	copy_string(c->a.instance_id, sizeof(c->a.instance_id), db_col_text(st, col + 1));
	copy_string(c->a.claimed_at, sizeof(c->a.claimed_at), db_col_text(st, col + 2));
	copy_string(c->a.agent, sizeof(c->a.agent), db_col_text(st, col + 3));
	copy_string(c->a.control, sizeof(c->a.control), db_col_text(st, col + 4));
	c->a.pid = sqlite3_column_int64(st, col + 5);
	c->a.pid_starttime = (uint64_t)sqlite3_column_int64(st, col + 6);
	copy_string(c->a.boot_id, sizeof(c->a.boot_id), db_col_text(st, col + 7));
}

int db_vf_row(struct store *s, const char *addr, struct vf_row *row)
{
	sqlite3_stmt *st =
		db_cached(s,
			  "SELECT id, quarantined, held, quarantined_at, parent, " SUSPECT_SINCE_SQL
			  ", " PROBATION_SINCE_SQL " FROM vfs WHERE address = ?",
			  DB_ARGS(db_text(addr)));
	if (!st)
		return -EIO;
	int r = db_step(s, st);
	if (r == 1) {
		row->id = sqlite3_column_int64(st, 0);
		row->quarantined = sqlite3_column_int(st, 1) != 0;
		row->held = sqlite3_column_int(st, 2) != 0;
		copy_string(row->since, sizeof(row->since), db_col_text(st, 3));
		copy_string(row->parent, sizeof(row->parent), db_col_text(st, 4));
		copy_string(row->suspect_since, sizeof(row->suspect_since), db_col_text(st, 5));
		copy_string(row->probation_since, sizeof(row->probation_since), db_col_text(st, 6));
	}
	db_uncache(s, st);
	return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

int db_setting(struct store *s, const char *key, int64_t *ret)
{
	int r = db_int(s, ret, "SELECT value FROM meta WHERE key = ?", DB_ARGS(db_text(key)));

	if (r == 0) {
		/* a missing setting row means a damaged database */
		snprintf(s->batch_error, sizeof(s->batch_error), "setting '%s' missing", key);
		s->batch_failed = true;
		return -EIO;
	}
	return r < 0 ? r : 0;
}

int db_setting_put(struct store *s, const char *key, int64_t value)
{
	int64_t current;
	int r = db_setting(s, key, &current);

	if (r < 0)
		return r;
	if (current == value)
		return 0;
	r = db_exec(s, "UPDATE meta SET value = ? WHERE key = ?",
		    DB_ARGS(db_i64(value), db_text(key)));
	return r < 0 ? r : 1;
}

int db_failure_count(struct store *s, int64_t vf_id, int64_t *ret)
{
	int r = db_int(s, ret, "SELECT COUNT(*) FROM failures WHERE vf_id = ? AND " FAILURE_LIVE,
		       DB_ARGS(db_i64(vf_id)));

	return r < 0 ? r : 0;
}

/* Automatic quarantines: what the breaker's cap counts (holds are not). */
int db_quarantined_count(struct store *s, int64_t *ret)
{
	int r = db_int(s, ret, "SELECT COUNT(*) FROM vfs WHERE quarantined = 1", DB_NONE);

	return r < 0 ? r : 0;
}

/* Read one VF's committed-to-be state into a snapshot. */
/* The row, the failure keys (from fill: SQLite or the mirror) and the live
 * claim of addr. */
static int snapshot_with(struct store *s, const char *addr, struct vf_snapshot *snap,
			 int (*fill)(struct store *s, const struct vf_row *row,
				     struct failure_builder *b, void *arg),
			 void *arg)
{
	struct vf_row row;

	memset(snap, 0, sizeof(*snap));
	copy_string(snap->addr, sizeof(snap->addr), addr);
	int r = db_vf_row(s, addr, &row);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	snap->exists = true;
	snap->id = (uint64_t)row.id;
	snap->quarantined = row.quarantined;
	snap->held = row.held;
	memcpy(snap->since, row.since, sizeof(snap->since));
	memcpy(snap->parent, row.parent, sizeof(snap->parent));
	memcpy(snap->suspect_since, row.suspect_since, sizeof(snap->suspect_since));
	memcpy(snap->probation_since, row.probation_since, sizeof(snap->probation_since));

	{
		struct failure_builder b = { 0 };

		r = fill(s, &row, &b, arg);
		if (r == 0)
			r = failure_block_finish(&b, &snap->failures, &snap->failure_ids,
						 &snap->n_failures);
		failure_builder_free(&b);
		if (r < 0)
			return r;
	}

	snap->claim = malloc(sizeof(*snap->claim));
	if (!snap->claim)
		return -ENOMEM;
	r = db_live_claim(s, row.id, addr, snap->claim);
	if (r <= 0) {
		free(snap->claim); /* none (or an error: snapshot_release frees the rest) */
		snap->claim = NULL;
	}
	return r < 0 ? r : 0;
}

static int fill_from_db(struct store *s, const struct vf_row *row, struct failure_builder *b,
			void *arg)
{
	_cleanup_stmt_ sqlite3_stmt *st =
		db_prepare(s,
			   "SELECT " FAILURE_KEY_COLUMNS
			   " FROM failures WHERE vf_id = ? AND " FAILURE_LIVE,
			   DB_ARGS(db_i64(row->id)));
	int r;

	if (!st)
		return -EIO;
	while ((r = db_step(s, st)) == 1 && (r = db_read_failure_key(st, 0, b)) == 0)
		;
	return r;
}

int db_snapshot(struct store *s, const char *addr, struct vf_snapshot *snap)
{
	return snapshot_with(s, addr, snap, fill_from_db, NULL);
}

struct appended {
	struct op *const *rows;
	size_t n;
};

static int fill_appended(struct store *s, const struct vf_row *row, struct failure_builder *b,
			 void *arg)
{
	const struct appended *a = arg;
	int r = mirror_copy_failures(s, a->rows[0]->vf, (uint64_t)row->id, b);

	for (size_t i = 0; r == 0 && i < a->n; i++)
		r = failure_builder_push(b, a->rows[i]->failure_row, a->rows[i]->instance_id,
					 strlen(a->rows[i]->instance_id), a->rows[i]->when);
	return r;
}

int db_snapshot_appended(struct store *s, const char *addr, struct op *const *rows, size_t n,
			 struct vf_snapshot *snap)
{
	struct appended a = { rows, n };
	int r;

	if (n == 0)
		return -ENOENT;
	r = snapshot_with(s, addr, snap, fill_appended, &a);
	if (r < 0)
		snapshot_release(snap);
	return r;
}

int db_live_claim(struct store *s, int64_t vf_id, const char *vf, struct store_claim *ret)
{
	sqlite3_stmt *st = db_cached(s,
				     "SELECT " CLAIM_COLUMNS
				     " FROM claims WHERE vf_id = ? AND released_at IS NULL",
				     DB_ARGS(db_i64(vf_id)));
	if (!st)
		return -EIO;
	int r = db_step(s, st);
	if (r == 1)
		db_read_claim(st, 0, vf, ret);
	db_uncache(s, st);
	return r;
}
