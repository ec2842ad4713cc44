/* SPDX-License-Identifier: MIT */
/*
 * commit.c - the store's group commit: the op queue, the leader that runs a
 * batch as one transaction, and its subscribers.  Locks: store-internal.h.
 *
 * Design notes
 * ============
 *
 * A mutation is queued as an `op` and the first caller to find no commit
 * leader becomes the leader: it takes every queued op (up to BATCH_MAX),
 * runs them in one SQLite transaction (BEGIN IMMEDIATE, one SAVEPOINT per
 * op so a logical error such as -EBUSY rolls back only that op), COMMITs
 * once (one fsync of the WAL: group commit), applies the result to the
 * in-memory mirror, calls the subscribers and only then marks the ops
 * done.  If anything in SQLite fails, or COMMIT fails, the transaction is
 * rolled back, every op of the batch fails with -EIO, the mirror is
 * untouched and the store latches unavailable with sqlite3_errmsg() as the
 * reason.
 *
 * Subscribers (store_subscribe).  Called by the leader after COMMIT and the
 * mirror update, with no store lock held (a subscriber may read the store),
 * but before the batch's callers are released: none may block or call a
 * mutating store function (the leader would wait for itself).  Each change
 * carries its VF's id, read from the index while write_lock still orders
 * the batch before any other, so no subscriber asks for it by address.
 *
 * Vanished files.  The leader checks, before BEGIN and after COMMIT, that
 * the database file and its WAL are still linked and are the files at
 * their paths (files_check, schema.c): a commit into an unlinked WAL would
 * be acknowledged and then lost.  When not, the batch fails with -EIO and
 * the store latches (files_lost).  A check is one poll(2) while inotify and
 * the mount table show that nothing the two paths resolve through changed
 * (files-watch.c), else one stat(2) per file (what the held descriptors are
 * is taken once, when they are opened), which decides.
 *
 * Ambiguous commits.  When the WAL's fsync fails the frames may still be on
 * disk and reappear after a crash; the call reported -EIO and never claimed
 * success.  store_repair() reloads the mirror from the database, so the
 * mirror always follows what SQLite holds.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/futex.h"
#include "store/store-internal.h"

#define BATCH_MAX 256 /* ops per transaction: bounds one commit's work */

/* -- change notification ---------------------------------------------------- */

int store_subscribe(struct store *s, store_change_fn fn, void *userdata)
{
	if (!s || !fn)
		return -EINVAL;
	for (size_t i = 0; i < s->n_subscribers; i++)
		if (s->subscribers[i].fn == fn && s->subscribers[i].userdata == userdata)
			return -EEXIST;
	if (s->n_subscribers == STORE_SUBSCRIBERS_MAX)
		return -ENOSPC;
	s->subscribers[s->n_subscribers++] = (struct store_subscriber){ fn, userdata };
	return 0;
}

void store_unsubscribe(struct store *s, store_change_fn fn, void *userdata)
{
	for (size_t i = 0; s && i < s->n_subscribers; i++)
		if (s->subscribers[i].fn == fn && s->subscribers[i].userdata == userdata) {
			memmove(&s->subscribers[i], &s->subscribers[i + 1],
				(s->n_subscribers - i - 1) * sizeof(s->subscribers[0]));
			s->n_subscribers--;
			return;
		}
}

void commit_publish(struct store *s, const struct store_change *change)
{
	for (size_t i = 0; i < s->n_subscribers; i++)
		s->subscribers[i].fn(s->subscribers[i].userdata, change);
}

uint64_t commit_vf_id(struct store *s, const char *vf)
{
	uint64_t id = 0;

	if (!vf || !vf[0])
		return 0;
	pthread_rwlock_rdlock(&s->index_lock);
	struct vf_entry *e = mirror_find(s, vf);
	if (e)
		id = e->id;
	pthread_rwlock_unlock(&s->index_lock);
	return id;
}

void commit_notify(struct store *s, unsigned bits, const char *vf, const char *instance_id)
{
	struct store_change change = { .bits = bits, .vf_id = commit_vf_id(s, vf) };

	copy_string(change.vf, sizeof(change.vf), vf);
	copy_string(change.instance_id, sizeof(change.instance_id), instance_id);
	commit_publish(s, &change);
}

/* -- group commit ------------------------------------------------------------ */

static int compare_addr(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The distinct VFs a batch changed, sorted. */
static int batch_dirty_vfs(struct op *batch, char (**ret)[VF_ADDR_BUFSZ], size_t *count)
{
	size_t n = 0;

	for (struct op *op = batch; op; op = op->next)
		for (size_t i = 0; i < op->n_changes; i++)
			n += op->changes[i].vf[0] != '\0';
	_cleanup_free_ char(*addrs)[VF_ADDR_BUFSZ] = calloc(MAX(n, (size_t)1), sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	n = 0;
	for (struct op *op = batch; op; op = op->next)
		for (size_t i = 0; i < op->n_changes; i++)
			if (op->changes[i].vf[0])
				memcpy(addrs[n++], op->changes[i].vf, VF_ADDR_BUFSZ);
	qsort(addrs, n, sizeof(*addrs), compare_addr);
	size_t unique = 0;
	for (size_t i = 0; i < n; i++)
		if (unique == 0 || strcmp(addrs[unique - 1], addrs[i]) != 0)
			memmove(addrs[unique++], addrs[i], VF_ADDR_BUFSZ);
	*ret = addrs;
	addrs = NULL; /* ownership to the caller (move_ptr is not -Wpedantic clean) */
	*count = unique;
	return 0;
}

struct batch_state {
	struct vf_snapshot *snaps;
	struct vf_entry **spares; /* preallocated entries for VFs that may be new */
	size_t n;
	int threshold;
	int max_quarantined;
	int mode;
};

static void batch_state_release(struct batch_state *b)
{
	for (size_t i = 0; i < b->n; i++) {
		snapshot_release(&b->snaps[i]);
		free(b->spares ? b->spares[i] : NULL);
	}
	free(b->snaps);
	free(b->spares);
	memset(b, 0, sizeof(*b));
}

/* Whether op changed a VF other than its own (a store-wide op: a threshold
 * that quarantines, a load): one look at its first such change. */
static bool op_changes_others(const struct op *op)
{
	for (size_t i = 0; i < op->n_changes; i++)
		if (strcmp(op->changes[i].vf, op->vf) != 0)
			return true;
	return false;
}

/* Whether any op of the batch that took effect changed VFs other than its
 * own: then a VF's rows cannot be told from the ops' own VFs. */
static bool batch_store_wide(const struct op *batch)
{
	for (const struct op *op = batch; op; op = op->next)
		if (op->rc == 0 && op_changes_others(op))
			return true;
	return false;
}

/* The failure rows the batch inserted for vf into rows[] (*n of them), or
 * false when anything else in the batch changed the VF's failures (or its
 * existence): then its keys are read again whole.  A report that only
 * appended a row is the common case: its VF's other keys are the mirror's
 * (no commit re-reads all of a VF's failures).  The batch
 * has no store-wide op (batch_store_wide()), so an op changed only its own
 * VF: one look at each op, not at each change (a threshold write changes
 * every VF). */
static bool batch_appended_rows(struct op *batch, const char *vf, struct op **rows, size_t max,
				size_t *n)
{
	*n = 0;
	for (struct op *op = batch; op; op = op->next) {
		if (strcmp(op->vf, vf) != 0 || (op->rc == 0 && op->n_changes == 0))
			continue; /* not about vf, or a no-op */
		if (op->rc < 0)
			continue; /* rolled back: left no trace */
		if (op->kind != OP_FAILURE || op->failures_cleared || !op->failure_row || *n == max)
			return false;
		rows[(*n)++] = op;
	}
	return *n > 0;
}

/* Until COMMIT only the running batch changes what SQLite holds, and the
 * mirror holds what is committed: for a VF no earlier op of the batch ran
 * on (and after no store-wide op), the mirror's state is SQLite's, and an
 * op may read it there instead of counting rows. */
bool batch_named_before(const struct store *s, const struct op *op)
{
	for (const struct op *o = s->batch; o && o != op; o = o->next)
		if (strcmp(o->vf, op->vf) == 0 || op_changes_others(o))
			return true;
	return false;
}

/* Everything the mirror update will need is read and allocated here, inside
 * the transaction, so that applying after COMMIT cannot fail. */
static int batch_prepare(struct store *s, struct op *batch, size_t registered,
			 struct batch_state *b)
{
	_cleanup_free_ char(*addrs)[VF_ADDR_BUFSZ] = NULL;
	size_t n;
	int64_t threshold, max_quarantined, mode;
	int r = batch_dirty_vfs(batch, &addrs, &n);

	if (r < 0)
		return r;
	b->snaps = calloc(MAX(n, (size_t)1), sizeof(*b->snaps));
	b->spares = calloc(MAX(n, (size_t)1), sizeof(*b->spares));
	if (!b->snaps || !b->spares)
		return -ENOMEM;
	_cleanup_free_ struct op **rows = calloc(BATCH_MAX, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	bool store_wide = batch_store_wide(batch);
	for (size_t i = 0; i < n; i++) {
		size_t n_rows;

		b->n = i + 1;
		r = -ENOENT;
		if (!store_wide && batch_appended_rows(batch, addrs[i], rows, BATCH_MAX, &n_rows))
			r = db_snapshot_appended(s, addrs[i], rows, n_rows, &b->snaps[i]);
		if (r == -ENOENT)
			r = db_snapshot(s, addrs[i], &b->snaps[i]);
		if (r < 0)
			return r;
		if (b->snaps[i].exists && !(b->spares[i] = calloc(1, sizeof(struct vf_entry))))
			return -ENOMEM;
	}
	if ((r = db_setting(s, "threshold", &threshold)) < 0 ||
	    (r = db_setting(s, "max_quarantined", &max_quarantined)) < 0 ||
	    (r = db_setting(s, "mode", &mode)) < 0)
		return r;
	b->threshold = (int)threshold;
	b->max_quarantined = (int)max_quarantined;
	b->mode = (int)mode;

	if (registered == 0)
		return 0;
	/* room in the index for the new VFs: a brief write lock, taken only for
	 * registrations and never across the fsync */
	pthread_rwlock_wrlock(&s->index_lock);
	r = mirror_reserve(s, s->n_vfs + registered);
	pthread_rwlock_unlock(&s->index_lock);
	return r;
}

/* Run a batch as one transaction.  Called by the leader only. */
static void run_batch(struct store *s, struct op *batch)
{
	struct batch_state b = { 0 };
	bool structural = false, latched = false;
	char lost[STORE_REASON_MAX];
	unsigned store_wide = 0; /* STORE_CHANGE_BREAKER, STORE_CHANGE_HELD_BACK */
	size_t registered = 0;
	int r = 0;

	pthread_mutex_lock(&s->write_lock);
	if (!s->db || !atomic_load(&s->available)) {
		for (struct op *op = batch; op; op = op->next)
			op->rc = -EIO;
		pthread_mutex_unlock(&s->write_lock);
		return;
	}
	s->batch_failed = false;
	/* A commit into a file nobody will read again is no commit: the
	 * database file and its WAL must still be the files at their paths. */
	if (files_check(s, lost, sizeof(lost)) != 0) {
		files_lost(s, lost);
		pthread_mutex_unlock(&s->write_lock);
		for (struct op *op = batch; op; op = op->next) {
			op->rc = -EIO;
			op_discard_changes(op);
		}
		commit_notify(s, STORE_CHANGE_STATUS, "", NULL);
		return;
	}
	s->batch = batch;
	r = db_exec(s, "BEGIN IMMEDIATE", DB_NONE);
	for (struct op *op = batch; op && r == 0; op = op->next) {
		if ((r = db_exec(s, "SAVEPOINT op", DB_NONE)) < 0)
			break;
		op->rc = ops_exec(s, op);
		if (s->batch_failed)
			break;
		if (op->rc < 0) {
			/* a refused op (e.g. -EBUSY) leaves no trace; the others go on */
			op_discard_changes(op);
			r = db_exec(s, "ROLLBACK TO op", DB_NONE);
		}
		if (r == 0)
			r = db_exec(s, "RELEASE op", DB_NONE);
		structural |= op->rc == 0 && (op->kind == OP_REGISTER || op->kind == OP_UNREGISTER);
		registered += op->rc == 0 && op->kind == OP_REGISTER;
	}
	s->batch = NULL;
	if (!s->batch_failed) {
		r = batch_prepare(s, batch, registered, &b);
		if (r < 0 && !s->batch_failed) {
			snprintf(s->batch_error, sizeof(s->batch_error), "commit failed: %s",
				 strerror(-r));
			s->batch_failed = true;
		}
	}
	if (!s->batch_failed && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		db_fail(s, "commit failed");
	/* ... and still were when it was made durable (else it is not
	 * acknowledged: -EIO, and files_lost saves what it can) */
	if (!s->batch_failed && files_check(s, lost, sizeof(lost)) != 0) {
		files_lost(s, lost);
		copy_string(s->batch_error, sizeof(s->batch_error), lost);
		s->batch_failed = true;
	}

	if (s->batch_failed) {
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		atomic_fetch_add(&s->commit_failures, 1);
		latch_unavailable(s, s->batch_error);
		latched = true;
		for (struct op *op = batch; op; op = op->next) {
			op->rc = -EIO;
			op_discard_changes(op);
		}
	} else {
		atomic_fetch_add(&s->commits, 1);
		store_wide = mirror_apply(s, b.snaps, b.spares, b.n, b.threshold, b.max_quarantined,
					  structural);
		atomic_store(&s->mode, b.mode);
	}
	gpus_apply_batch(s, batch, !s->batch_failed);
	batch_state_release(&b);
	/* each change names its VF's id as applied, before another batch may
	 * unregister it (a discarded change list is empty) */
	for (struct op *op = batch; op; op = op->next)
		for (size_t i = 0; i < op->n_changes; i++)
			op->changes[i].vf_id = commit_vf_id(s, op->changes[i].vf);
	pthread_mutex_unlock(&s->write_lock);

	/* durable and mirrored: tell the subscribers, with no store lock held */
	for (struct op *op = batch; op; op = op->next) {
		for (size_t i = 0; i < op->n_changes; i++)
			commit_publish(s, &op->changes[i]);
		op_discard_changes(op);
	}
	if (store_wide)
		commit_notify(s, store_wide, "", NULL);
	if (latched)
		commit_notify(s, STORE_CHANGE_STATUS, "", NULL);
}

/* A caller of commit_submit() waiting, on a futex word of its own
 * (struct commit_waiter, store-internal.h): the word is bumped under
 * queue_lock when a batch holding one of its ops ends and when it is to
 * lead the next batch, and the waiter reads it under queue_lock with what
 * it decides on, so no bump is missed; the wake-up itself (common/futex.h)
 * comes after the lock is let go, and the caller returns only once no
 * wake of its word is under way.  So a batch's end wakes its callers and
 * one more, not every thread waiting, and none of them wakes only to wait
 * for queue_lock.
 *
 * Ops nobody waits for (commit_join): a FUSE worker queues a report behind
 * the batch under way and goes on to its next request, instead of
 * sleeping through the commit and being woken to answer it.  The store has
 * two threads for them, started with the first op that joins: the
 * committer, the waiter of every such op, leads each batch whose first op
 * is one, and keeps the lead while the next is one too; the answerer
 * answers them (op->answer: the reply to the writer), in order, after
 * their batch, with no lock held, while the committer runs the next
 * batch.  Whoever leads wakes the answerer once per batch.  A caller of
 * commit_submit() leads only until its own ops are done: however many
 * reports come, no caller leads for them.  A lone writer's report joins
 * nothing and is committed and answered on its own thread, with no
 * hand-off. */
static bool ops_done(struct op **ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!ops[i]->done)
			return false;
	return true;
}

/* queue_lock held, leader_active set by the caller, self the waiter it
 * leads as.  Run the next batch, mark its ops done, and wake whom it
 * concerns: the callers whose ops it ran, the answerer for the ops nobody
 * waits for, and the waiter of the next queued op, to lead the next batch.
 * The committer (keep not NULL) keeps the lead when the next op is one it
 * waits for (*keep).  queue_lock is let go meanwhile and held again on
 * return. */
static void lead_batch(struct store *s, struct commit_waiter *self, bool *keep)
{
	struct commit_waiter *wake[BATCH_MAX + 2];
	struct op *batch = s->queue_head, **last = &s->queue_head;
	size_t n_wake = 0;
	bool answers = false;

	for (size_t taken = 0; *last && taken < BATCH_MAX; taken++)
		last = &(*last)->next;
	s->queue_head = *last;
	*last = NULL;
	if (!s->queue_head)
		s->queue_tail = &s->queue_head;
	pthread_mutex_unlock(&s->queue_lock);

	run_batch(s, batch);

	pthread_mutex_lock(&s->queue_lock);
	for (struct op *op = batch, *next; op; op = next) {
		next = op->next;
		if (op->answer) {
			op->next = NULL;
			*s->answers_tail = op;
			s->answers_tail = &op->next;
			answers = true;
			continue;
		}
		op->done = true;
		/* once per waiter: its ops are queued together, so adjacent */
		if (op->waiter != self && (n_wake == 0 || wake[n_wake - 1] != op->waiter)) {
			futex_post(&op->waiter->f);
			wake[n_wake++] = op->waiter;
		}
	}
	if (answers) {
		futex_post(&s->answerer_wake.f);
		wake[n_wake++] = &s->answerer_wake;
	}
	bool kept = keep && s->queue_head && s->queue_head->waiter == self;
	atomic_store(&s->leader_active, kept);
	if (keep)
		*keep = kept;
	if (s->queue_head && s->queue_head->waiter != self &&
	    (n_wake == 0 || wake[n_wake - 1] != s->queue_head->waiter)) {
		futex_post(&s->queue_head->waiter->f);
		wake[n_wake++] = s->queue_head->waiter;
	}
	pthread_mutex_unlock(&s->queue_lock);
	for (size_t i = 0; i < n_wake; i++)
		futex_post_wake(&wake[i]->f);
	pthread_mutex_lock(&s->queue_lock);
}

/* queue_lock held.  Sleep until w's word changes (a post: its op is done,
 * it is to lead, or it has ops to answer), with queue_lock let go; held
 * again on return. */
static void queue_wait(struct store *s, struct commit_waiter *w)
{
	unsigned seen = atomic_load(&w->f.word);

	pthread_mutex_unlock(&s->queue_lock);
	futex_sleep(&w->f, seen);
	pthread_mutex_lock(&s->queue_lock);
}

/* Queue ops and wait until all of them are durable (or failed).  The first
 * caller to find no leader runs the batch for everyone queued; at its end
 * it wakes the callers whose ops it ran, and the waiter of the next queued
 * op, to lead the next batch (or find its ops done by someone else's). */
void commit_submit(struct store *s, struct op **ops, size_t n)
{
	struct commit_waiter self = { 0 };

	pthread_mutex_lock(&s->queue_lock);
	for (size_t i = 0; i < n; i++) {
		ops[i]->done = false;
		ops[i]->waiter = &self;
		ops[i]->answer = NULL;
		ops[i]->next = NULL;
		*s->queue_tail = ops[i];
		s->queue_tail = &ops[i]->next;
	}
	while (!ops_done(ops, n)) {
		if (atomic_load(&s->leader_active)) {
			queue_wait(s, &self);
			continue;
		}
		atomic_store(&s->leader_active, true);
		lead_batch(s, &self, NULL);
	}
	pthread_mutex_unlock(&s->queue_lock);
	futex_leave(&self.f); /* self is on this stack */
}

static void *committer_main(void *arg)
{
	struct store *s = arg;
	struct commit_waiter *self = &s->committer_wake;
	bool leading = false; /* holds the lead, kept from the last batch */

	pthread_mutex_lock(&s->queue_lock);
	for (;;) {
		if (!leading && s->queue_head && s->queue_head->waiter == self &&
		    !atomic_load(&s->leader_active)) {
			atomic_store(&s->leader_active, true);
			leading = true;
		}
		if (leading) {
			lead_batch(s, self, &leading);
			continue;
		}
		if (s->threads_stop && !s->queue_head)
			break;
		queue_wait(s, self);
	}
	pthread_mutex_unlock(&s->queue_lock);
	return NULL;
}

static void *answerer_main(void *arg)
{
	struct store *s = arg;
	struct commit_waiter *self = &s->answerer_wake;

	pthread_mutex_lock(&s->queue_lock);
	for (;;) {
		struct op *answers = s->answers;

		s->answers = NULL;
		s->answers_tail = &s->answers;
		if (answers) {
			size_t n = 0;

			pthread_mutex_unlock(&s->queue_lock);
			for (struct op *op = answers, *next; op; op = next, n++) {
				next = op->next;
				op->answer(s, op); /* frees op */
			}
			pthread_mutex_lock(&s->queue_lock);
			s->joined -= n;
			continue;
		}
		if (s->threads_stop && s->committer_done)
			break;
		queue_wait(s, self);
	}
	pthread_mutex_unlock(&s->queue_lock);
	return NULL;
}

/* queue_lock held.  Both threads, or neither. */
static int threads_start(struct store *s)
{
	sigset_t all, old;
	int r;

	if (s->threads_started)
		return 0;
	if (s->threads_stop)
		return -ESHUTDOWN;
	/* born with every signal blocked: the process's are its callers' */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(&s->answerer, NULL, answerer_main, s);
	if (r == 0) {
		r = pthread_create(&s->committer, NULL, committer_main, s);
		if (r) {
			/* nothing was queued for it: it ends at once */
			s->threads_stop = s->committer_done = true;
			futex_post(&s->answerer_wake.f);
			futex_post_wake(&s->answerer_wake.f);
			pthread_mutex_unlock(&s->queue_lock);
			pthread_join(s->answerer, NULL);
			pthread_mutex_lock(&s->queue_lock);
			s->threads_stop = s->committer_done = false;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r)
		return -r;
	s->threads_started = true;
	return 0;
}

bool store_commit_under_way(struct store *s)
{
	return s && atomic_load_explicit(&s->leader_active, memory_order_relaxed);
}

int commit_join(struct store *s, struct op *op)
{
	int r;

	pthread_mutex_lock(&s->queue_lock);
	/* past the bound the caller commits itself, and waits, as before any
	 * op joined: how many requests wait in memory stays bounded by the
	 * FUSE loop's queue and workers */
	if (!atomic_load(&s->leader_active) || s->joined >= STORE_JOINED_MAX)
		r = -EAGAIN;
	else
		r = threads_start(s) < 0 ? -EAGAIN : 0; /* the caller commits itself */
	if (r == 0) {
		s->joined++;
		op->done = false;
		op->waiter = &s->committer_wake;
		op->next = NULL;
		*s->queue_tail = op;
		s->queue_tail = &op->next;
	}
	pthread_mutex_unlock(&s->queue_lock);
	return r;
}

void commit_stop(struct store *s)
{
	pthread_mutex_lock(&s->queue_lock);
	s->threads_stop = true;
	bool started = s->threads_started;
	if (started)
		futex_post(&s->committer_wake.f);
	pthread_mutex_unlock(&s->queue_lock);
	if (!started)
		return;
	/* the committer first: what it commits, the answerer answers */
	futex_post_wake(&s->committer_wake.f);
	pthread_join(s->committer, NULL);
	pthread_mutex_lock(&s->queue_lock);
	s->committer_done = true;
	futex_post(&s->answerer_wake.f);
	pthread_mutex_unlock(&s->queue_lock);
	futex_post_wake(&s->answerer_wake.f);
	pthread_join(s->answerer, NULL);
}
