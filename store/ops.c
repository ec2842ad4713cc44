/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the store's SQL operations, one per op kind, run by the commit
 * leader inside the batch transaction (commit.c) under write_lock, each in
 * its own savepoint; and each op's change list, reported to the change
 * callback once the batch is durable.  Outcomes are computed from SQL inside
 * the transaction, so a later op in a batch sees what an earlier one did;
 * the decisions themselves are the pure rules (rules.h) the mirror
 * pre-checks use too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules.h"
#include "store/store-internal.h"

/* -- change lists --------------------------------------------------------------- */

/* Append a change for an object the op has not reported yet. */
static int op_change_append(struct op *op, unsigned bits, const char *vf, const char *instance_id)
{
	if (op->n_changes == op->cap_changes) {
		size_t cap = MAX(op->cap_changes * 2, (size_t)4);
		struct store_change *grown = realloc(op->changes, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		op->changes = grown;
		op->cap_changes = cap;
	}
	struct store_change *c = &op->changes[op->n_changes++];
	memset(c, 0, sizeof(*c));
	c->bits = bits;
	copy_string(c->vf, sizeof(c->vf), vf);
	copy_string(c->instance_id, sizeof(c->instance_id), instance_id);
	/* the op's own object: its VF's parent, or a drain's GPU */
	if (strcmp(vf, op->vf) == 0)
		copy_string(c->parent, sizeof(c->parent), op->parent);
	return 0;
}

/* Record a change on an op; merged per VF so each object is reported once.
 * Ops other than a re-evaluation touch one or two objects. */
static int op_change(struct op *op, unsigned bits, const char *vf, const char *instance_id)
{
	for (size_t i = 0; i < op->n_changes; i++) {
		if (strcmp(op->changes[i].vf, vf) == 0) {
			op->changes[i].bits |= bits;
			if (instance_id)
				copy_string(op->changes[i].instance_id,
					    sizeof(op->changes[i].instance_id), instance_id);
			return 0;
		}
	}
	return op_change_append(op, bits, vf, instance_id);
}

int op_change_gpu(struct op *op)
{
	return op_change(op, STORE_CHANGE_GPU, "", NULL);
}

int op_change_global(struct op *op, unsigned bits)
{
	return op_change(op, bits, "", NULL);
}

void op_discard_changes(struct op *op)
{
	free(op->changes);
	op->changes = NULL;
	op->n_changes = op->cap_changes = 0;
}

/* -- the operations ------------------------------------------------------------ */

/* quarantined_at is the time the VF went out of service (its `since`):
 * stamped when it leaves service, kept while it stays out (a hold on a
 * quarantined VF, a quarantine lifted under a hold), cleared when it is
 * back in service. */

/* Clear the live failures of a VF that `which` (an SQL condition with one
 * integer parameter, arg) selects: they stay as history, with when, by whom
 * (uid, -1 unknown) and why; no rule sees them again. */
static int clear_failures(struct store *s, int64_t vf_id, const char *which, int64_t arg,
			  int64_t uid, const char *why)
{
	char now[RFC3339_BUFSZ], sql[256];

	rfc3339_now(now);
	snprintf(sql, sizeof(sql),
		 "UPDATE failures SET cleared_at = ?, cleared_by = NULLIF(?, -1), cleared_why = ?"
		 " WHERE vf_id = ? AND " FAILURE_LIVE " AND %s",
		 which);
	return db_exec(s, sql,
		       DB_ARGS(db_text(now), db_i64(uid), db_text(why), db_i64(vf_id),
			       db_i64(arg)));
}

/* The automatic quarantine (held: set the operator hold instead). */
static int quarantine_row(struct store *s, int64_t vf_id, bool held)
{
	char now[RFC3339_BUFSZ];

	rfc3339_now(now);
	return db_exec(s,
		       held ? "UPDATE vfs SET held = 1, quarantined_at = COALESCE(quarantined_at, ?)"
			      " WHERE id = ?" :
			      "UPDATE vfs SET quarantined = 1,"
			      " quarantined_at = COALESCE(quarantined_at, ?) WHERE id = ?",
		       DB_ARGS(db_text(now), db_i64(vf_id)));
}

/* Lift the automatic quarantine; a hold keeps the VF out (and its time). */
static int lift_row(struct store *s, int64_t vf_id)
{
	return db_exec(s,
		       "UPDATE vfs SET quarantined = 0,"
		       " quarantined_at = CASE WHEN held THEN quarantined_at END WHERE id = ?",
		       DB_ARGS(db_i64(vf_id)));
}

/* The open hold of a VF, if any, ends: when, by whom (uid, -1 unknown). */
static int close_hold(struct store *s, int64_t vf_id, int64_t uid)
{
	char now[RFC3339_BUFSZ];

	rfc3339_now(now);
	return db_exec(s,
		       "UPDATE holds SET cleared_at = ?, cleared_by = NULLIF(?, -1)"
		       " WHERE vf_id = ? AND cleared_at IS NULL",
		       DB_ARGS(db_text(now), db_i64(uid), db_i64(vf_id)));
}

/* End the VF's live suspicion, if any, saying why; *ended: there was one. */
static int end_suspicion(struct store *s, int64_t vf_id, const char *why, bool *ended)
{
	char now[RFC3339_BUFSZ];
	int r;

	rfc3339_now(now);
	r = db_exec(s,
		    "UPDATE suspects SET cleared_at = ?, cleared_why = ?"
		    " WHERE vf_id = ? AND cleared_at IS NULL",
		    DB_ARGS(db_text(now), db_text(why), db_i64(vf_id)));
	if (r < 0)
		return r;
	*ended = sqlite3_changes(s->db) > 0;
	return 0;
}

/* End the VF's live probation, if any, saying why; *ended: there was one.
 * older_than: only a probation that began before it (an assignment's
 * time), NULL for any. */
static int end_probation(struct store *s, int64_t vf_id, const char *why, const char *older_than,
			 bool *ended)
{
	char now[RFC3339_BUFSZ];
	int r;

	rfc3339_now(now);
	r = db_exec(s,
		    "UPDATE probations SET cleared_at = ?, cleared_why = ?"
		    " WHERE vf_id = ? AND cleared_at IS NULL AND (? = '' OR since < ?)",
		    DB_ARGS(db_text(now), db_text(why), db_i64(vf_id),
			    db_text(older_than ? older_than : ""),
			    db_text(older_than ? older_than : "")));
	if (r < 0)
		return r;
	*ended = sqlite3_changes(s->db) > 0;
	return 0;
}

/* Back in service: no hold, no quarantine. */
static int release_row(struct store *s, int64_t vf_id)
{
	return db_exec(
		s, "UPDATE vfs SET quarantined = 0, held = 0, quarantined_at = NULL WHERE id = ?",
		DB_ARGS(db_i64(vf_id)));
}

/* Quarantine every held-back VF (rule_held_back), oldest registration
 * first, as many as the cap allows (rule_reevaluate_take). */
static int db_reevaluate(struct store *s, struct op *op)
{
	int64_t threshold, cap, quarantined;
	int r;

	if ((r = db_setting(s, "threshold", &threshold)) < 0 ||
	    (r = db_setting(s, "max_quarantined", &cap)) < 0 ||
	    (r = db_quarantined_count(s, &quarantined)) < 0)
		return r;

	struct candidate {
		int64_t id;
		char addr[VF_ADDR_BUFSZ];
	};
	_cleanup_free_ struct candidate *candidates = NULL;
	size_t n = 0, allocated = 0;
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s,
			"SELECT v.id, v.address, v.quarantined, v.held,"
			" (SELECT COUNT(*) FROM failures f WHERE f.vf_id = v.id AND f." FAILURE_LIVE
			")"
			" FROM vfs v WHERE v.quarantined = 0 AND v.held = 0 ORDER BY v.id",
			DB_NONE);
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1) {
			if (!rule_held_back(sqlite3_column_int(st, 2) != 0,
					    sqlite3_column_int(st, 3) != 0,
					    (uint64_t)sqlite3_column_int64(st, 4), threshold))
				continue;
			if (n == allocated) {
				size_t want = MAX(allocated * 2, (size_t)16);
				struct candidate *c = realloc(candidates, want * sizeof(*c));
				if (!c)
					return -ENOMEM;
				candidates = c;
				allocated = want;
			}
			candidates[n].id = sqlite3_column_int64(st, 0);
			copy_string(candidates[n].addr, sizeof(candidates[n].addr),
				    db_col_text(st, 1));
			n++;
		}
		if (r < 0)
			return r;
	}
	n = rule_reevaluate_take(cap, (uint64_t)quarantined, n);
	for (size_t i = 0; i < n; i++) {
		if ((r = quarantine_row(s, candidates[i].id, false)) < 0)
			return r;
		/* candidates are distinct VFs: no merging (that would be quadratic) */
		r = op_change_append(op, STORE_CHANGE_QUARANTINE, candidates[i].addr, NULL);
		if (r < 0)
			return r;
	}
	return 0;
}

static int op_register(struct store *s, struct op *op)
{
	int64_t n;
	struct vf_row row;
	int r = db_int(s, &n, "SELECT COUNT(*) FROM vfs", DB_NONE);

	if (r < 0)
		return r;
	if (n >= VFS_MAX)
		return -EMLINK; /* mkdir's errno for a directory that holds all it may */
	r = db_vf_row(s, op->vf, &row);
	if (r == 0)
		return -EEXIST;
	if (r != -ENOENT)
		return r;
	r = db_exec(s, "INSERT INTO vfs (address, quarantined, held, parent) VALUES (?, 0, 0, ?)",
		    DB_ARGS(db_text(op->vf), db_text(op->parent)));
	if (r < 0)
		return r;
	return op_change(op, STORE_CHANGE_VFS, op->vf, NULL);
}

/* The VF's live failures: the mirror's count (commit.c, batch_named_before)
 * unless this batch already ran on the VF; then SQLite counts them. */
static int live_failures(struct store *s, const struct op *op, const struct vf_row *row,
			 int64_t *ret)
{
	uint64_t n;

	if (!batch_named_before(s, op) && mirror_failure_count(s, (uint64_t)row->id, &n) == 0) {
		*ret = (int64_t)n;
		return 0;
	}
	return db_failure_count(s, row->id, ret);
}

static int op_unregister(struct store *s, struct op *op, const struct vf_row *row)
{
	int64_t tally, claims;
	int r;

	if ((r = live_failures(s, op, row, &tally)) < 0)
		return r;
	r = db_int(s, &claims,
		   "SELECT COUNT(*) FROM claims WHERE vf_id = ? AND released_at IS NULL",
		   DB_ARGS(db_i64(row->id)));
	if (r < 0)
		return r;
	if ((r = rule_unregister_refusal(rule_out_of_service(row->quarantined, row->held),
					 (uint64_t)tally, claims > 0)) < 0)
		return r;
	int64_t recovering = 0;
	if (row->parent[0] &&
	    (r = db_int(s, &recovering, "SELECT COUNT(*) FROM gpus WHERE parent = ? AND phase = ?",
			DB_ARGS(db_text(row->parent), db_i64((int64_t)GPU_PHASE_RECOVERING)))) < 0)
		return r;
	if (recovering)
		return -EBUSY; /* its GPU's cycle will check it */
	/* released claims stay as history under the old vf_id, never reused */
	if ((r = db_exec(s, "DELETE FROM vfs WHERE id = ?", DB_ARGS(db_i64(row->id)))) < 0)
		return r;
	return op_change(op, STORE_CHANGE_VFS, op->vf, NULL);
}

/* The distinct instances of the VF's live failures, oldest first, into
 * res (what the caller's log line of a quarantine or a hold-back names):
 * read in the transaction that decided, so no second query follows it. */
static int failed_instances(struct store *s, int64_t vf_id, struct store_failure_result *res)
{
	_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
		s,
		"SELECT instance_id, COUNT(*) FROM failures WHERE vf_id = ? AND " FAILURE_LIVE
		" GROUP BY instance_id ORDER BY MIN(id) LIMIT ?",
		DB_ARGS(db_i64(vf_id), db_i64((int64_t)STORE_INSTANCES_SHOWN + 1)));
	int r;

	if (!st)
		return -EIO;
	res->n_instances = 0;
	while ((r = db_step(s, st)) == 1) {
		if (res->n_instances == STORE_INSTANCES_SHOWN) {
			res->more_instances = true;
			continue;
		}
		struct store_failed_instance *f = &res->instances[res->n_instances++];
		copy_string(f->instance_id, sizeof(f->instance_id), db_col_text(st, 0));
		f->assignments = (unsigned)sqlite3_column_int64(st, 1);
	}
	return r;
}

static int op_failure(struct store *s, struct op *op, const struct vf_row *row)
{
	int64_t threshold, tally, dup;
	int r;

	op->failure_row = 0;
	op->failures_cleared = false;
	if ((r = db_setting(s, "threshold", &threshold)) < 0 ||
	    (r = live_failures(s, op, row, &tally)) < 0)
		return r;
	op->failure = (struct store_failure_result){ .outcome = STORE_OUTCOME_UNCHANGED,
						     .tally = (unsigned)tally,
						     .threshold = (int)threshold };
	r = db_int(s, &dup,
		   "SELECT 1 FROM failures WHERE vf_id = ? AND instance_id = ? AND assigned_at = ?"
		   " AND " FAILURE_LIVE,
		   DB_ARGS(db_i64(row->id), db_text(op->instance_id), db_text(op->when)));
	if (r < 0)
		return r;
	if (rule_failure_unchanged(rule_out_of_service(row->quarantined, row->held), r == 1))
		return 0;
	bool first = tally == 0; /* ok -> failing */

	if (rule_failure_drops_oldest((uint64_t)tally)) {
		/* only a VF the breaker holds back gets here: keep the newest */
		r = clear_failures(s, row->id,
				   "id = (SELECT MIN(id) FROM failures WHERE vf_id = ?"
				   " AND " FAILURE_LIVE ")",
				   row->id, op->uid, "dropped");
		if (r < 0)
			return r;
		op->failures_cleared = true;
		tally--;
	}
	char now[RFC3339_BUFSZ];
	rfc3339_now(now);
	r = db_exec(s,
		    "INSERT INTO failures (vf_id, instance_id, assigned_at, reported_at, message) "
		    "VALUES (?, ?, ?, ?, ?)",
		    DB_ARGS(db_i64(row->id), db_text(op->instance_id), db_text(op->when),
			    db_text(now), db_text(op->message)));
	if (r < 0)
		return r;
	op->failure_row = sqlite3_last_insert_rowid(s->db);
	tally++;
	op->failure.tally = (unsigned)tally;
	op->failure.outcome = STORE_OUTCOME_RECORDED;
	unsigned bits = STORE_CHANGE_FAILURES | (first ? STORE_CHANGE_FAILING : 0u);

	bool probation = row->probation_since[0] != '\0';

	if (probation || rule_meets_threshold((uint64_t)tally, threshold)) {
		int64_t cap, quarantined;
		if ((r = db_setting(s, "max_quarantined", &cap)) < 0 ||
		    (r = db_quarantined_count(s, &quarantined)) < 0)
			return r;
		switch (rule_after_failure((uint64_t)tally, threshold, cap, (uint64_t)quarantined,
					   probation)) {
		case RULE_QUARANTINE:
			if ((r = quarantine_row(s, row->id, false)) < 0 ||
			    (r = end_suspicion(s, row->id, "quarantined",
					       &op->failure.suspect_confirmed)) < 0 ||
			    (r = end_probation(s, row->id, "quarantined", NULL,
					       &op->failure.probation_failed)) < 0)
				return r;
			op->failure.outcome = STORE_OUTCOME_QUARANTINED;
			bits |= STORE_CHANGE_QUARANTINE |
				(op->failure.suspect_confirmed || op->failure.probation_failed ?
					 STORE_CHANGE_SUSPECT :
					 0u);
			break;
		case RULE_HOLD_BACK:
			op->failure.breaker_engaged = true;
			op->failure.max_quarantined = (int)cap;
			break;
		case RULE_RECORD:
			break;
		}
		if ((op->failure.outcome == STORE_OUTCOME_QUARANTINED ||
		     op->failure.breaker_engaged) &&
		    (r = failed_instances(s, row->id, &op->failure)) < 0)
			return r;
	}
	return op_change(op, bits, op->vf, NULL);
}

static int op_success(struct store *s, struct op *op, const struct vf_row *row)
{
	int64_t match, remaining;
	int r;

	op->success = (struct store_success_result){ 0 };
	char why[STORE_HISTORY_WORD_MAX + 1];
	/* a guest of a later assignment than the one whose VMM died worked:
	 * the suspicion ends (an older one's success proves nothing) */
	if (row->suspect_since[0] && op->when[0]) {
		char now[RFC3339_BUFSZ];
		rfc3339_now(now);
		snprintf(why, sizeof(why), "ok:%s", op->instance_id);
		r = db_exec(s,
			    "UPDATE suspects SET cleared_at = ?, cleared_why = ?"
			    " WHERE vf_id = ? AND cleared_at IS NULL AND claimed_at < ?",
			    DB_ARGS(db_text(now), db_text(why), db_i64(row->id),
				    db_text(op->when)));
		if (r < 0)
			return r;
		op->success.suspect_cleared = sqlite3_changes(s->db) > 0;
		if (op->success.suspect_cleared &&
		    (r = op_change(op, STORE_CHANGE_SUSPECT, op->vf, NULL)) < 0)
			return r;
	}
	/* a guest assigned after the cycle worked: the cycle cured the VF */
	if (row->probation_since[0] && op->when[0]) {
		bool ended;
		snprintf(why, sizeof(why), "ok:%s", op->instance_id);
		if ((r = end_probation(s, row->id, why, op->when, &ended)) < 0 ||
		    (ended && (r = op_change(op, STORE_CHANGE_SUSPECT, op->vf, NULL)) < 0))
			return r;
		op->success.probation_ended = ended;
	}
	r = db_int(s, &match,
		   "SELECT id FROM failures WHERE vf_id = ? AND instance_id = ? AND assigned_at = ?"
		   " AND " FAILURE_LIVE,
		   DB_ARGS(db_i64(row->id), db_text(op->instance_id), db_text(op->when)));
	if (r <= 0)
		return r;
	/* this assignment worked: it and every older failure are history */
	snprintf(why, sizeof(why), "success:%s", op->instance_id);
	if ((r = live_failures(s, op, row, &remaining)) < 0 ||
	    (r = clear_failures(s, row->id, "id <= ?", match, op->uid, why)) < 0)
		return r;
	op->success.cleared = (unsigned)sqlite3_changes(s->db);
	remaining -= op->success.cleared;
	unsigned bits = STORE_CHANGE_FAILURES | (remaining == 0 ? STORE_CHANGE_FAILING : 0u);
	if (rule_success_lifts((uint64_t)remaining, row->quarantined)) {
		if ((r = lift_row(s, row->id)) < 0)
			return r;
		op->success.rescinded = rule_success_rescinds((uint64_t)remaining, row->quarantined,
							      row->held);
		bits |= STORE_CHANGE_QUARANTINE;
	}
	return op_change(op, bits, op->vf, NULL);
}

static int op_manual(struct store *s, struct op *op, const struct vf_row *row)
{
	int r;

	char now[RFC3339_BUFSZ];

	if (rule_hold_unchanged(row->held))
		return 0;
	rfc3339_now(now);
	if ((r = quarantine_row(s, row->id, true)) < 0 ||
	    (r = db_exec(s,
			 "INSERT INTO holds (vf_id, held_at, held_by) VALUES (?, ?, NULLIF(?, -1))",
			 DB_ARGS(db_i64(row->id), db_text(now), db_i64(op->uid)))) < 0)
		return r;
	return op_change(op, STORE_CHANGE_QUARANTINE, op->vf, NULL);
}

static int op_clear(struct store *s, struct op *op, const struct vf_row *row)
{
	int64_t n;
	int r;

	if ((r = live_failures(s, op, row, &n)) < 0)
		return r;
	bool suspect = row->suspect_since[0] != '\0', probation = row->probation_since[0] != '\0';

	if (rule_clear_unchanged(row->quarantined, row->held, (uint64_t)n, suspect, probation))
		return 0;
	/* the operator vouches for the VF: its probation ends too */
	if ((r = clear_failures(s, row->id, "1 = ?", 1, op->uid, "operator")) < 0 ||
	    (r = close_hold(s, row->id, op->uid)) < 0 || (r = release_row(s, row->id)) < 0 ||
	    (r = end_suspicion(s, row->id, "operator", &suspect)) < 0 ||
	    (r = end_probation(s, row->id, "operator", NULL, &probation)) < 0)
		return r;
	return op_change(op,
			 (n ? STORE_CHANGE_FAILURES | STORE_CHANGE_FAILING : 0u) |
				 (suspect || probation ? STORE_CHANGE_SUSPECT : 0u) |
				 (rule_out_of_service(row->quarantined, row->held) ?
					  STORE_CHANGE_QUARANTINE :
					  0u),
			 op->vf, NULL);
}

int ops_recovered_vfs(struct store *s, struct op *op)
{
	_cleanup_free_ char(*addrs)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 0, cap = 0;
	int r;

	{
		_cleanup_stmt_ sqlite3_stmt *st =
			db_prepare(s, "SELECT address FROM vfs WHERE parent = ? ORDER BY address",
				   DB_ARGS(db_text(op->parent)));
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1) {
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				char(*grown)[VF_ADDR_BUFSZ] = reallocarray(addrs, cap,
									   sizeof(*addrs));
				if (!grown)
					return -ENOMEM;
				addrs = grown;
			}
			copy_string(addrs[n++], VF_ADDR_BUFSZ, db_col_text(st, 0));
		}
		if (r < 0)
			return r;
	}
	op->gpu_cleared = 0;
	for (size_t i = 0; i < n; i++) {
		struct vf_row row;
		bool suspect;
		int64_t live;

		if ((r = db_vf_row(s, addrs[i], &row)) < 0 ||
		    (r = db_failure_count(s, row.id, &live)) < 0)
			return r;
		suspect = row.suspect_since[0] != '\0';
		if (!row.quarantined && live == 0 && !suspect)
			continue;
		/* an operator hold is the operator's: the cycle keeps it */
		if ((r = clear_failures(s, row.id, "1 = ?", 1, op->uid, "recovered")) < 0 ||
		    (r = lift_row(s, row.id)) < 0 ||
		    (r = end_suspicion(s, row.id, "recovered", &suspect)) < 0)
			return r;
		/* the cycle may not have cured it: on probation until its first OK */
		if (!row.probation_since[0]) {
			char now[RFC3339_BUFSZ];
			rfc3339_now(now);
			r = db_exec(s, "INSERT INTO probations (vf_id, since) VALUES (?, ?)",
				    DB_ARGS(db_i64(row.id), db_text(now)));
			if (r < 0)
				return r;
		}
		r = op_change_append(op,
				     (live ? STORE_CHANGE_FAILURES | STORE_CHANGE_FAILING : 0u) |
					     STORE_CHANGE_SUSPECT |
					     (row.quarantined ? STORE_CHANGE_QUARANTINE : 0u),
				     addrs[i], NULL);
		if (r < 0)
			return r;
		op->gpu_cleared++;
	}
	return 0;
}

static int op_setting(struct store *s, struct op *op, const char *key, unsigned bit)
{
	int r = db_setting_put(s, key, op->value);

	if (r <= 0)
		return r;
	if ((r = op_change(op, bit, "", NULL)) < 0)
		return r;
	return db_reevaluate(s, op);
}

/* The mode changes no state: enforcement reads it at the next claim. */
static int op_mode(struct store *s, struct op *op)
{
	int r = db_setting_put(s, "mode", op->value);

	if (r <= 0)
		return r;
	return op_change(op, STORE_CHANGE_MODE, "", NULL);
}

/* A claimed_at the writer gave is later than every other claim's of the
 * VF, live or past (rule_claimed_at_refusal); `self` is the claim being
 * changed (0 for a new one). */
static int claimed_at_check(struct store *s, const struct op *op, const struct vf_row *row,
			    int64_t self)
{
	int r;

	if (!op->when_given)
		return 0;
	_cleanup_stmt_ sqlite3_stmt *st =
		db_prepare(s, "SELECT max(claimed_at) FROM claims WHERE vf_id = ? AND id != ?",
			   DB_ARGS(db_i64(row->id), db_i64(self)));
	if (!st || (r = db_step(s, st)) < 0)
		return -EIO;
	return rule_claimed_at_refusal(r == 1 ? db_col_text(st, 0) : NULL, op->when);
}

static int op_claim(struct store *s, struct op *op, const struct vf_row *row)
{
	struct store_claim *out = &op->claim_out;
	/* the current holder, if any, into out: it is overwritten below */
	int r = db_live_claim(s, row->id, op->vf, out);

	if (r < 0)
		return r;
	r = rule_commit_refusal(r == 1 ? out->a.instance_id : NULL, op->instance_id);
	if (r < 0 || (r = claimed_at_check(s, op, row, 0)) < 0)
		return r;
	*out = *op->claim_in;
	out->reserved = false;
	copy_string(out->a.vf, sizeof(out->a.vf), op->vf);
	copy_string(out->a.instance_id, sizeof(out->a.instance_id), op->instance_id);
	if (op->when[0])
		copy_string(out->a.claimed_at, sizeof(out->a.claimed_at), op->when);
	else
		rfc3339_now(out->a.claimed_at);
	/* the id is the reservation's (its creator holds the inode) */
	r = db_exec(s,
		    "INSERT INTO claims (id, vf_id, instance_id, claimed_at, agent, control, pid, "
		    "pid_starttime, boot_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		    DB_ARGS(db_i64((int64_t)out->id), db_i64(row->id), db_text(out->a.instance_id),
			    db_text(out->a.claimed_at), db_text(out->a.agent),
			    db_text(out->a.control), db_i64(out->a.pid),
			    db_i64((int64_t)out->a.pid_starttime), db_text(out->a.boot_id)));
	if (r < 0)
		return r;
	return op_change(op, STORE_CHANGE_CLAIMS, op->vf, op->instance_id);
}

static int op_claim_update(struct store *s, struct op *op, const struct vf_row *row)
{
	const struct store_claim *c = op->claim_in;
	int64_t claim_id;
	int r;

	r = db_int(
		s, &claim_id,
		"SELECT id FROM claims WHERE vf_id = ? AND instance_id = ? AND released_at IS NULL",
		DB_ARGS(db_i64(row->id), db_text(op->instance_id)));
	if (r < 0)
		return r;
	if (r == 0)
		return -ENOENT;
	if ((r = claimed_at_check(s, op, row, claim_id)) < 0)
		return r;
	r = db_exec(s,
		    "UPDATE claims SET agent = ?, control = ?, pid = ?, pid_starttime = ?, "
		    "claimed_at = CASE WHEN ? = '' THEN claimed_at ELSE ? END WHERE id = ?",
		    DB_ARGS(db_text(c->a.agent), db_text(c->a.control), db_i64(c->a.pid),
			    db_i64((int64_t)c->a.pid_starttime), db_text(op->when),
			    db_text(op->when), db_i64(claim_id)));
	if (r < 0)
		return r;
	return op_change(op, STORE_CHANGE_CLAIMS, op->vf, op->instance_id);
}

/* A claim (op->when, its claimed_at) released because its VMM died: the
 * VF becomes suspect when the death falls in the init window
 * (rule_crash_suspect) and it is not suspect already.  op->suspect_began
 * and op->died_after_ms say so. */
static int crash_suspicion(struct store *s, struct op *op, const struct vf_row *row,
			   const char *now)
{
	const char *died_at = op->died_at[0] ? op->died_at : now;
	int64_t claimed_ns, died_ns, now_ns;
	int r;

	op->suspect_began = false;
	/* store_release() refused a died_at before the claim or after its own
	 * now; this now is later still */
	if (rfc3339_to_ns(op->when, &claimed_ns) < 0 || rfc3339_to_ns(died_at, &died_ns) < 0 ||
	    rfc3339_to_ns(now, &now_ns) < 0)
		return -EINVAL;
	/* the write's own time before the claim (its writer named a time to
	 * come): no death in the window can be told; the release stands */
	if (rule_crash_time_refusal(claimed_ns, died_ns, now_ns) < 0)
		return 0;
	if (row->suspect_since[0] || !rule_crash_suspect(s->init_window_ns, claimed_ns, died_ns))
		return 0;
	r = db_exec(s,
		    "INSERT INTO suspects (vf_id, since, instance_id, claimed_at, died_at)"
		    " VALUES (?, ?, ?, ?, ?)",
		    DB_ARGS(db_i64(row->id), db_text(now), db_text(op->instance_id),
			    db_text(op->when), db_text(died_at)));
	if (r < 0)
		return r;
	op->suspect_began = true;
	op->died_after_ms = (died_ns - claimed_ns) / 1000000;
	return 0;
}

static int op_release(struct store *s, struct op *op, const struct vf_row *row)
{
	char now[RFC3339_BUFSZ];
	int64_t claim_id;
	int r;

	/* op->when: a conditional release names the claimed_at it releases */
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s,
			"SELECT id, claimed_at FROM claims WHERE vf_id = ? AND instance_id = ? AND "
			"released_at IS NULL",
			DB_ARGS(db_i64(row->id), db_text(op->instance_id)));
		if (!st || (r = db_step(s, st)) < 0)
			return -EIO;
		r = rule_release_refusal(r == 1 ? db_col_text(st, 1) : NULL, op->when);
		if (r < 0)
			return r;
		claim_id = sqlite3_column_int64(st, 0);
	}
	rfc3339_now(now);
	r = db_exec(s,
		    "UPDATE claims SET released_at = ?, ended = ?, released_by = NULLIF(?, -1)"
		    " WHERE id = ?",
		    DB_ARGS(db_text(now), db_text(op->how ? op->how : "released"), db_i64(op->uid),
			    db_i64(claim_id)));
	if (r < 0)
		return r;
	unsigned bits = STORE_CHANGE_CLAIMS;
	if (op->crashed && (r = crash_suspicion(s, op, row, now)) < 0)
		return r;
	if (op->suspect_began)
		bits |= STORE_CHANGE_SUSPECT;
	return op_change(op, bits, op->vf, op->instance_id);
}

static int op_set_parent(struct store *s, struct op *op, const struct vf_row *row)
{
	bool unchanged = strcmp(row->parent, op->parent) == 0;
	/* value 1: sysfs's physfn says so (store_gpu_adopt), over any stored one */
	int r = op->value == 1 ? 0 : rule_parent_set(op->vf, row->parent, op->parent, &unchanged);

	if (r < 0 || unchanged)
		return r;
	r = db_exec(s, "UPDATE vfs SET parent = ? WHERE id = ?",
		    DB_ARGS(db_text(op->parent), db_i64(row->id)));
	if (r < 0)
		return r;
	return op_change(op, STORE_CHANGE_PARENT, op->vf, NULL);
}

typedef int (*vf_op_fn)(struct store *s, struct op *op, const struct vf_row *row);

static const vf_op_fn vf_ops[] = {
	[OP_UNREGISTER] = op_unregister,
	[OP_FAILURE] = op_failure,
	[OP_SUCCESS] = op_success,
	[OP_MANUAL] = op_manual,
	[OP_CLEAR] = op_clear,
	[OP_CLAIM] = op_claim,
	[OP_CLAIM_UPDATE] = op_claim_update,
	[OP_RELEASE] = op_release,
	[OP_SET_PARENT] = op_set_parent,
};

int ops_exec(struct store *s, struct op *op)
{
	struct vf_row row;
	int r;

	switch (op->kind) {
	case OP_REGISTER:
		return op_register(s, op);
	case OP_THRESHOLD:
		return op_setting(s, op, "threshold", STORE_CHANGE_THRESHOLD);
	case OP_MAX_QUARANTINED:
		return op_setting(s, op, "max_quarantined", STORE_CHANGE_MAX_QUARANTINED);
	case OP_MODE:
		return op_mode(s, op);
	case OP_GPU:
		return gpus_op(s, op);
	case OP_AUTO_RECOVER:
		return gpus_op_auto_recover(s, op);
	default:
		break;
	}
	/* every other op is about one registered VF: -ENOENT when unknown */
	vf_op_fn fn = (size_t)op->kind < ARRAY_SIZE(vf_ops) ? vf_ops[op->kind] : NULL;
	if (!fn)
		return -EINVAL;
	if ((r = db_vf_row(s, op->vf, &row)) < 0)
		return r;
	if (op->kind != OP_SET_PARENT)
		copy_string(op->parent, sizeof(op->parent), row.parent);
	return fn(s, op, &row);
}
