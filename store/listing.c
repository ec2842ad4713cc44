/* SPDX-License-Identifier: MIT */
/*
 * listing.c - the store's listing connection: store_failure_list() reads
 * reported_at, instance id, assigned_at and message from SQLite (the mirror
 * keeps no messages), and store_history_list() a VF's claims and failures,
 * live and past (the mirror keeps neither), through a second, read-only
 * connection on the same VFS (read_db).
 *
 * Design notes
 * ============
 *
 * WAL gives this connection the last committed state without waiting for
 * the writer's fsync, also while a failed commit has latched the store; when
 * the database could not be opened at all (`loaded` false) it fails with
 * -EIO like the other reads.  read_lock guards read_db and is a leaf: taken
 * with no other store lock held and never held while taking one (the
 * generation that tells it to reopen is an atomic), so a listing can neither
 * wait for nor block a commit, beyond SQLite's own WAL reader marks.  Lock
 * order: store-internal.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store-internal.h"

/* An SQLite result code as an errno: -ENOMEM for SQLITE_NOMEM, else -EIO. */
static int listing_errno(int rc)
{
	return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
}

/* How a listing's statement ended: 0 when it ran to SQLITE_DONE and found
 * its VF, -ENOENT when it found none, else listing_errno(). */
static int listing_end(int rc, bool found)
{
	return rc != SQLITE_DONE ? listing_errno(rc) : found ? 0 : -ENOENT;
}

/* read_lock held.  The listing connection, (re)opened when the writer's
 * connection was (re)opened since (a repaired open may be a new file). */
static int read_db_ready(struct store *s)
{
	unsigned generation = atomic_load(&s->db_generation);

	if (s->read_db && s->read_db_generation == generation)
		return 0;
	sqlite3_close_v2(s->read_db);
	s->read_db = NULL;
	int rc = sqlite3_open_v2(s->path, &s->read_db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
				 s->vfs_name);
	if (rc != SQLITE_OK) {
		sqlite3_close_v2(s->read_db);
		s->read_db = NULL;
		return listing_errno(rc);
	}
	sqlite3_busy_timeout(s->read_db, STORE_BUSY_TIMEOUT_MS);
	s->read_db_generation = generation;
	return 0;
}

/* read_lock held.  sql on the listing connection, ?1 bound to key (a VF's
 * or a GPU's address) and ?2, when the statement has it, to max.  An
 * SQLite result code. */
static int listing_prepare(struct store *s, const char *sql, const char *key, size_t max,
			   sqlite3_stmt **st)
{
	int rc = sqlite3_prepare_v2(s->read_db, sql, -1, st, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(*st, 1, key, -1, SQLITE_STATIC);
	if (rc == SQLITE_OK && sqlite3_bind_parameter_count(*st) >= 2)
		rc = sqlite3_bind_int64(*st, 2, (int64_t)MIN(max, (size_t)INT64_MAX));
	return rc;
}

/* read_lock held.  One statement, so one read transaction: the VF's
 * existence and its failures come from the same committed state.  Zero rows:
 * no such VF; one row with a NULL id: a VF without failures. */
static int read_failures(struct store *s, const char *vf, struct store_failure **ret, size_t *count)
{
	_cleanup_free_ struct store_failure *list = NULL;
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	size_t n = 0, cap = 0;
	bool found = false;
	int rc;

	rc = listing_prepare(s,
			     "SELECT f.id, f.reported_at, f.instance_id, f.assigned_at, f.message"
			     " FROM vfs v LEFT JOIN failures f ON f.vf_id = v.id AND f." FAILURE_LIVE
			     " WHERE v.address = ?1 ORDER BY f.id",
			     vf, 0, &st);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		found = true;
		rc = SQLITE_OK;
		if (sqlite3_column_type(st, 0) == SQLITE_NULL)
			continue;
		if (n == cap) {
			size_t new_cap = cap ? 2 * cap : 16;
			struct store_failure *grown = reallocarray(list, new_cap, sizeof(*list));
			if (!grown)
				return -ENOMEM;
			list = grown;
			cap = new_cap;
		}
		struct store_failure *f = &list[n++];
		copy_string(f->reported_at, sizeof(f->reported_at), db_col_text(st, 1));
		copy_string(f->instance_id, sizeof(f->instance_id), db_col_text(st, 2));
		copy_string(f->assigned_at, sizeof(f->assigned_at), db_col_text(st, 3));
		copy_string(f->message, sizeof(f->message), db_col_text(st, 4));
	}
	if ((rc = listing_end(rc, found)) < 0)
		return rc;
	if (!list && !(list = calloc(1, sizeof(*list))))
		return -ENOMEM; /* callers free() *ret even when count is 0 */
	*ret = move_ptr(list);
	*count = n;
	return 0;
}

/* read_lock held.  One statement, so one read transaction: the newest max
 * entries of the VF's history and how many there are in all (a window over
 * the whole history), oldest first.  Zero rows: no such VF; one row with a
 * NULL kind: a VF without history. */
static int read_history(struct store *s, const char *vf, size_t max,
			struct store_history_entry **ret, size_t *count, size_t *dropped)
{
	_cleanup_free_ struct store_history_entry *list = NULL;
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	size_t n = 0, total = 0;
	bool found = false;
	int rc;

	list = calloc(MAX(max, (size_t)1), sizeof(*list));
	if (!list)
		return -ENOMEM;
	rc = listing_prepare(
		s,
		"WITH v AS (SELECT id FROM vfs WHERE address = ?1),"
		" h AS (SELECT 0 AS kind, c.id AS rid, c.claimed_at AS at, c.instance_id AS inst,"
		"  '' AS assigned, c.released_at AS ended, c.ended AS how, c.released_by AS by,"
		"  '' AS msg, NULL AS sb FROM claims c JOIN v ON c.vf_id = v.id"
		"  UNION ALL SELECT 1, f.id, f.reported_at, f.instance_id, f.assigned_at,"
		"  f.cleared_at, f.cleared_why, f.cleared_by, f.message, NULL"
		"  FROM failures f JOIN v ON f.vf_id = v.id"
		"  UNION ALL SELECT 2, o.id, o.held_at, '', '', o.cleared_at,"
		"  CASE WHEN o.cleared_at IS NOT NULL THEN 'operator' END, o.cleared_by, '',"
		"  o.held_by FROM holds o JOIN v ON o.vf_id = v.id"
		"  UNION ALL SELECT 3, u.id, u.since, u.instance_id, u.claimed_at,"
		"  u.cleared_at, u.cleared_why, NULL, u.died_at, NULL"
		"  FROM suspects u JOIN v ON u.vf_id = v.id"
		"  UNION ALL SELECT 4, p.id, p.since, '', '', p.cleared_at, p.cleared_why, NULL,"
		"  '', NULL FROM probations p JOIN v ON p.vf_id = v.id),"
		" r AS (SELECT h.*, COUNT(*) OVER () AS total FROM h"
		"  ORDER BY at DESC, kind DESC, rid DESC LIMIT ?2)"
		" SELECT r.kind, r.at, r.inst, r.assigned, r.ended, r.how, r.by, r.msg, r.total,"
		" r.sb"
		" FROM v LEFT JOIN r ON 1 ORDER BY r.at, r.kind, r.rid",
		vf, max, &st);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		found = true;
		rc = SQLITE_OK;
		if (sqlite3_column_type(st, 0) == SQLITE_NULL || n == max)
			continue;
		struct store_history_entry *e = &list[n++];
		static const enum store_history_kind kinds[] = {
			STORE_HISTORY_CLAIM, STORE_HISTORY_FAILURE, STORE_HISTORY_HOLD,
			STORE_HISTORY_SUSPECT, STORE_HISTORY_PROBATION
		};
		int kind = sqlite3_column_int(st, 0);
		e->kind = kind >= 0 && kind < (int)ARRAY_SIZE(kinds) ? kinds[kind] :
								       STORE_HISTORY_CLAIM;
		copy_string(e->at, sizeof(e->at), db_col_text(st, 1));
		copy_string(e->instance_id, sizeof(e->instance_id), db_col_text(st, 2));
		copy_string(e->assigned_at, sizeof(e->assigned_at), db_col_text(st, 3));
		copy_string(e->ended_at, sizeof(e->ended_at), db_col_text(st, 4));
		copy_string(e->how, sizeof(e->how), db_col_text(st, 5));
		e->by = sqlite3_column_type(st, 6) == SQLITE_NULL ? -1 :
								    sqlite3_column_int64(st, 6);
		if (e->kind == STORE_HISTORY_SUSPECT) {
			int64_t claimed_ns, died_ns;
			copy_string(e->died_at, sizeof(e->died_at), db_col_text(st, 7));
			if (rfc3339_to_ns(e->assigned_at, &claimed_ns) == 0 &&
			    rfc3339_to_ns(e->died_at, &died_ns) == 0)
				e->died_after_ms = (died_ns - claimed_ns) / 1000000;
		} else {
			copy_string(e->message, sizeof(e->message), db_col_text(st, 7));
		}
		e->started_by = sqlite3_column_type(st, 9) == SQLITE_NULL ?
					-1 :
					sqlite3_column_int64(st, 9);
		total = (size_t)sqlite3_column_int64(st, 8);
	}
	if ((rc = listing_end(rc, found)) < 0)
		return rc;
	*ret = move_ptr(list);
	*count = n;
	*dropped = total > n ? total - n : 0;
	return 0;
}

/* read_lock held.  A GPU's events, like read_history(). */
static int read_gpu_history(struct store *s, const char *parent, size_t max,
			    struct store_gpu_event **ret, size_t *count, size_t *dropped)
{
	_cleanup_free_ struct store_gpu_event *list = NULL;
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	size_t n = 0, total = 0;
	int rc;

	list = calloc(MAX(max, (size_t)1), sizeof(*list));
	if (!list)
		return -ENOMEM;
	rc = listing_prepare(
		s,
		"SELECT at, event, by, total, detail FROM (SELECT id, at, event, by, detail,"
		" COUNT(*) OVER () AS total FROM gpu_history WHERE parent = ?1"
		" ORDER BY id DESC LIMIT ?2) ORDER BY id",
		parent, max, &st);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		if (n == max)
			continue;
		struct store_gpu_event *e = &list[n++];
		copy_string(e->at, sizeof(e->at), db_col_text(st, 0));
		copy_string(e->event, sizeof(e->event), db_col_text(st, 1));
		e->by = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 :
								    sqlite3_column_int64(st, 2);
		total = (size_t)sqlite3_column_int64(st, 3);
		copy_string(e->detail, sizeof(e->detail), db_col_text(st, 4));
	}
	if (rc != SQLITE_DONE)
		return listing_errno(rc);
	*ret = move_ptr(list);
	*count = n;
	*dropped = total - n;
	return 0;
}

/* What a listing reads, for listing_run(). */
struct listing {
	const char *vf;
	size_t max;
	struct store_failure **failures;
	struct store_history_entry **history;
	struct store_gpu_event **gpu_history; /* vf names the GPU */
	size_t *count, *dropped;
};

/* Not served from the mirror (it keeps no messages): read from SQLite
 * through the listing connection, which WAL lets read while the writer
 * commits, so a listing never waits behind an fsync, and which still
 * serves the committed rows while a failed commit has latched the store.
 * An error says the caller's errno; the caller logs it. */
static int listing_run(struct store *s, const struct listing *l)
{
	if (!vf_address_valid(l->vf) || !l->count ||
	    ((l->history || l->gpu_history) && !l->dropped))
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO; /* the database could not be opened */
	pthread_mutex_lock(&s->read_lock);
	int r = read_db_ready(s);
	if (r == 0)
		r = l->failures ? read_failures(s, l->vf, l->failures, l->count) :
		    l->gpu_history ?
				  read_gpu_history(s, l->vf, l->max, l->gpu_history, l->count,
						   l->dropped) :
				  read_history(s, l->vf, l->max, l->history, l->count, l->dropped);
	if (r == -EIO) {
		/* start afresh next time (the file may have been replaced) */
		sqlite3_close_v2(s->read_db);
		s->read_db = NULL;
	}
	pthread_mutex_unlock(&s->read_lock);
	return r;
}

int store_history_list(struct store *s, const char *vf, size_t max,
		       struct store_history_entry **ret, size_t *count, size_t *dropped)
{
	if (!ret)
		return -EINVAL;
	return listing_run(s, &(struct listing){ .vf = vf,
						 .max = max,
						 .history = ret,
						 .count = count,
						 .dropped = dropped });
}

int store_gpu_history(struct store *s, const char *parent, size_t max, struct store_gpu_event **ret,
		      size_t *count, size_t *dropped)
{
	if (!ret)
		return -EINVAL;
	return listing_run(s, &(struct listing){ .vf = parent,
						 .max = max,
						 .gpu_history = ret,
						 .count = count,
						 .dropped = dropped });
}

int store_failure_list(struct store *s, const char *vf, struct store_failure **ret, size_t *count)
{
	if (!ret)
		return -EINVAL;
	return listing_run(s, &(struct listing){ .vf = vf, .failures = ret, .count = count });
}
