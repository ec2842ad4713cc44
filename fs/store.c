/* SPDX-License-Identifier: MIT */
/*
 * store.c - the health store (contract and rules: fs/store.h).
 *
 * Design notes
 * ============
 *
 * Threads.  The store has no thread of its own.  Callers are FUSE workers and
 * sentinel workers.  A mutation is queued as an `op` and the first caller to
 * find no commit leader becomes the leader: it takes every queued op (up to
 * BATCH_MAX), runs them in one SQLite transaction (BEGIN IMMEDIATE, one
 * SAVEPOINT per op so a logical error such as -EBUSY rolls back only that
 * op), COMMITs once (one fsync of the WAL: group commit), applies the result
 * to the in-memory mirror, calls the change callback and only then marks the
 * ops done.  Outcomes are computed by SQL inside the transaction, so a later
 * op in a batch sees what an earlier one did.  If anything in SQLite fails,
 * or COMMIT fails, the transaction is rolled back, every op of the batch
 * fails with -EIO, the mirror is untouched and the store latches unavailable
 * with sqlite3_errmsg() as the reason.
 *
 * Locks, outermost first (a thread never takes an earlier one while holding
 * a later one):
 *   1. write_lock (mutex): whoever talks to SQLite holds it: the leader for
 *      its whole batch, store_repair(), open.  Also guards batch_failed /
 *      batch_error.
 *   2. index_lock (rwlock): the VF index (by_addr, by_id arrays and the
 *      vf_entry objects' lifetime).  Its write side is taken only when VFs
 *      are registered or unregistered (and when the whole mirror is loaded).
 *   3. mirror_lock (rwlock): everything inside the entries (quarantine bits,
 *      failures, claims), the settings, the counts and the reason.  Readers
 *      take the read side; the leader takes the write side only to apply a
 *      committed batch (memory only, never across an fsync).
 *   4. queue_lock (mutex): the op queue and the leader flag; a leaf.
 *   read_lock (mutex): the listing connection read_db (store_failure_list
 *      only).  Outside the order above: it is a leaf, never held while
 *      taking another store lock, and taken with no other store lock held
 *      (store_failure_list takes nothing else; the generation that tells it
 *      to reopen is an atomic).  So a listing can neither wait for nor block
 *      a commit, beyond SQLite's own WAL reader marks.
 * The success fast path takes only index_lock's read side and reads the
 * entry's atomic failure_count, so a healthy poll never waits for a commit,
 * a claim or a failure report, and works while the store is unavailable.
 *
 * Reads are served from the mirror, which is written only after a
 * successful COMMIT (or loaded whole at open/repair), except the failure
 * listing.  The mirror keeps per failure only what decisions need (row id,
 * instance id, assigned_at as seconds + nanoseconds: struct failure_key,
 * about 24 bytes plus the id), loaded from a covering index without the
 * messages; store_failure_list() reads reported_at, instance id, assigned_at
 * and message from SQLite through a second, read-only connection on the
 * same VFS (read_db).  WAL gives that connection the last committed state
 * without waiting for the writer's fsync, also while a failed commit has
 * latched the store; when the database could not be opened at all
 * (`loaded` false) it fails with -EIO like the other reads.
 * No-op calls (duplicate report, report on a quarantined VF, success with
 * nothing to clear, manual quarantine of a quarantined VF, clearing a clean
 * VF, setting a setting to its value) are decided from the mirror and take
 * no transaction; this is linearizable because the mirror is a committed
 * state and queued ops are not yet acknowledged.
 *
 * Breaker.  A VF is "held back" when it is not quarantined and its tally
 * meets the threshold (only the cap can cause that).  stats.breaker_engaged
 * = max_quarantined > 0 && quarantined >= max_quarantined && a held-back VF
 * exists; it is derived from the mirror, so it needs no persisted state and
 * survives a restart.  Setting max_quarantined re-evaluates every VF like
 * setting the threshold does (raising or removing the cap quarantines
 * held-back VFs, oldest registration first, up to the new cap).  Lifting a
 * quarantine does not by itself quarantine a held-back VF (its next failure
 * report, or a re-evaluation, does).  Manual quarantines ignore the cap.
 * A VF holds at most STORE_MAX_FAILURES_PER_VF failures: when the breaker
 * holds one back and it keeps failing, the oldest record is dropped.
 *
 * Change callback.  Called by the leader after COMMIT and the mirror update,
 * with no store lock held (the callback may read the store), but before the
 * batch's callers are released: it must not block and must not call a
 * mutating store function (the leader would wait for itself).
 *
 * Ambiguous commits.  When the WAL's fsync fails the frames may still be on
 * disk and reappear after a crash; the call reported -EIO and never claimed
 * success.  store_repair() reloads the mirror from the database, so the
 * mirror always follows what SQLite holds.
 *
 * Shutdown.  store_close() expects no concurrent callers (the daemon stops
 * its workers first); every acknowledged change is already durable.
 *
 * Exclusivity.  store_open() takes flock(LOCK_EX|LOCK_NB) on PATH "-lock"
 * (a separate file: opening and closing the database file itself would drop
 * SQLite's POSIX locks), so a second daemon gets -EBUSY.
 */
#include "fs/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "proto/cleanup.h"
#include "proto/log.h"
#include "proto/parse.h"

#define STORE_APPLICATION_ID 0x56464831 /* 'VFH1' */
#define STORE_SCHEMA_VERSION 1
#define STORE_BUSY_TIMEOUT_MS 5000
#define BATCH_MAX 256 /* ops per transaction: bounds one commit's work */

DEFINE_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize)
#define _cleanup_stmt_ _cleanup_(sqlite3_finalizep)

/* -- the mirror ------------------------------------------------------------ */

/* A failure as the mirror keeps it: only what the decisions need (dedupe
 * and the success rule).  reported_at, the message and the text of
 * assigned_at stay in SQLite; store_failure_list() reads them there.  A
 * VF's keys, oldest first, and their NUL-terminated instance ids share one
 * malloc'd block (failure_block_finish()), so a record costs 24 bytes plus
 * its id instead of a struct store_failure's ~1.2 KiB. */
struct failure_key {
	int64_t row_id;         /* failures.id: insertion order */
	int64_t assigned_sec;   /* assigned_at: seconds since the epoch ... */
	uint32_t assigned_nsec; /* ... and nanoseconds, or ASSIGNED_UNKNOWN/FOREIGN */
	uint32_t instance_off;  /* the instance id: byte offset into the ids */
};

#define ASSIGNED_UNKNOWN UINT32_MAX       /* "" (never a nanosecond count) */
#define ASSIGNED_FOREIGN (UINT32_MAX - 1) /* not canonical text: matches nothing */

struct vf_entry {
	char addr[STORE_VF_BUFSZ];
	uint64_t id;
	atomic_uint failure_count; /* == n_failures; read without mirror_lock */
	bool quarantined;
	bool manual;
	struct failure_key *failures; /* oldest first; one block with failure_ids */
	const char *failure_ids;      /* inside the failures block; not freed alone */
	size_t n_failures;
	struct store_claim *claim; /* the live claim, NULL when none */
};

/* A VF's committed state, read inside the transaction before COMMIT and
 * applied to the mirror after it. */
struct vf_snapshot {
	char addr[STORE_VF_BUFSZ];
	bool exists;
	uint64_t id;
	bool quarantined;
	bool manual;
	struct failure_key *failures;
	const char *failure_ids;
	size_t n_failures;
	struct store_claim *claim;
};

enum op_kind {
	OP_REGISTER,
	OP_UNREGISTER,
	OP_FAILURE,
	OP_SUCCESS,
	OP_MANUAL,
	OP_CLEAR,
	OP_THRESHOLD,
	OP_MAX_QUARANTINED,
	OP_CLAIM,
	OP_CLAIM_UPDATE,
	OP_RELEASE,
};

struct op {
	enum op_kind kind;
	char vf[STORE_VF_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char when[RFC3339_BUFSZ]; /* assigned_at, or claimed_at ("" = none) */
	const char *message;      /* sanitized, owned by the caller */
	const struct store_claim *claim_in;
	int value; /* threshold or max_quarantined */

	int rc;
	struct store_failure_result failure;
	struct store_success_result success;
	struct store_claim claim_out;

	struct store_change *changes; /* malloc'd, for the callback */
	size_t n_changes;
	size_t cap_changes;

	bool done; /* under queue_lock */
	struct op *next;
};

struct store {
	/* set at open, then constant */
	char *path;
	char *lock_path;
	char *vfs_name;
	int cfg_threshold;
	int cfg_max_quarantined;

	pthread_mutex_t write_lock;
	int lock_fd; /* flock'd; -1 while not held */
	sqlite3 *db;
	bool batch_failed;
	char batch_error[STORE_REASON_MAX];

	pthread_rwlock_t index_lock;
	struct vf_entry **by_addr; /* sorted by address */
	struct vf_entry **by_id;   /* sorted by id */
	size_t n_vfs;
	size_t cap_vfs;
	atomic_bool loaded; /* the mirror holds the database's state */

	pthread_rwlock_t mirror_lock;
	atomic_bool available;
	char reason[STORE_REASON_MAX];
	int threshold;
	int max_quarantined;
	size_t n_quarantined;
	size_t n_claimed;
	size_t n_held_back;

	pthread_mutex_t queue_lock;
	pthread_cond_t queue_cond;
	struct op *queue_head;
	struct op **queue_tail;
	bool leader_active;

	/* the listing connection (store_failure_list): read-only, a leaf lock */
	pthread_mutex_t read_lock;
	sqlite3 *read_db;            /* NULL until first used */
	unsigned read_db_generation; /* the db_generation read_db was opened at */
	atomic_uint db_generation;   /* bumped by every successful open of db */

	store_change_fn change_fn;
	void *change_userdata;

	atomic_uint_fast64_t failed_reports[3];
	atomic_uint_fast64_t ok_reports_cleared;
	atomic_uint_fast64_t ok_reports_noop;
	atomic_uint_fast64_t commits;
	atomic_uint_fast64_t commit_failures;
};

/* -- small helpers --------------------------------------------------------- */

bool store_vf_address_valid(const char *vf)
{
	static const char pattern[] = "xxxx:xx:xx.o";

	if (!vf || strnlen(vf, STORE_VF_BUFSZ) != STORE_VF_ADDR_LEN)
		return false;
	for (size_t i = 0; i < STORE_VF_ADDR_LEN; i++) {
		char c = vf[i];
		switch (pattern[i]) {
		case 'x':
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				return false;
			break;
		case 'o':
			if (c < '0' || c > '7')
				return false;
			break;
		default:
			if (c != pattern[i])
				return false;
		}
	}
	return true;
}

const char *store_outcome_name(enum store_outcome o)
{
	switch (o) {
	case STORE_OUTCOME_UNCHANGED:
		return "unchanged";
	case STORE_OUTCOME_RECORDED:
		return "recorded";
	case STORE_OUTCOME_QUARANTINED:
		return "quarantined";
	}
	return "unknown";
}

/* "" or NULL -> ""; else the canonical form, -EINVAL when unparseable. */
static int normalize_optional_time(const char *in, char out[static RFC3339_BUFSZ])
{
	if (!in || !*in) {
		out[0] = '\0';
		return 0;
	}
	return rfc3339_normalize(in, out);
}

/* Truncate to STORE_MESSAGE_MAX bytes (not inside a UTF-8 sequence) and
 * replace control characters by spaces, so a message is one safe line. */
static void sanitize_message(const char *in, char out[static STORE_MESSAGE_MAX + 1])
{
	size_t n = in ? strnlen(in, STORE_MESSAGE_MAX + 1) : 0;

	if (n > STORE_MESSAGE_MAX) {
		n = STORE_MESSAGE_MAX;
		/* back off over continuation bytes to the start of the cut sequence */
		while (n > 0 && ((unsigned char)in[n] & 0xC0) == 0x80)
			n--;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		out[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	out[n] = '\0';
}

static void copy_string(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

/* -- compact failure keys ----------------------------------------------------- */

static bool leap_year(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to the given proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = y / 400; /* y >= 1969 here: no negative division */
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* assigned_at text -> its key.  "" is ASSIGNED_UNKNOWN.  Canonical text
 * (rfc3339_normalize's output, fixed width, so one instant has exactly one
 * spelling) maps one-to-one onto (seconds, nanoseconds): comparing keys is
 * comparing the text, as SQL's "assigned_at = ?" does.  Anything else (a
 * hand-edited row) is ASSIGNED_FOREIGN, which matches nothing, as SQL would
 * never match it against canonical input either. */
static void assigned_key(const char *text, int64_t *sec, uint32_t *nsec)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddddddddZ";
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int64_t v[7] = { 0 }; /* Y M D h m s ns */
	size_t field = 0;

	_Static_assert(sizeof(shape) - 1 == RFC3339_NANO_LEN, "canonical width");
	*sec = 0;
	if (!*text) {
		*nsec = ASSIGNED_UNKNOWN;
		return;
	}
	*nsec = ASSIGNED_FOREIGN;
	if (strlen(text) != RFC3339_NANO_LEN)
		return;
	for (size_t i = 0; i < RFC3339_NANO_LEN; i++) {
		if (shape[i] == 'd') {
			if (text[i] < '0' || text[i] > '9')
				return;
			v[field] = v[field] * 10 + (text[i] - '0');
		} else if (text[i] != shape[i]) {
			return;
		} else {
			field++;
		}
	}
	if (v[0] < 1970 || v[1] < 1 || v[1] > 12 || v[2] < 1 ||
	    v[2] > mdays[v[1] - 1] + (v[1] == 2 && leap_year(v[0])) || v[3] > 23 || v[4] > 59 ||
	    v[5] > 59)
		return;
	*sec = days_from_civil(v[0], v[1], v[2]) * 86400 + v[3] * 3600 + v[4] * 60 + v[5];
	*nsec = (uint32_t)v[6];
}

static bool failure_key_matches(const struct failure_key *k, const char *ids,
				const char *instance_id, int64_t sec, uint32_t nsec)
{
	return k->assigned_nsec != ASSIGNED_FOREIGN && k->assigned_nsec == nsec &&
	       k->assigned_sec == sec && strcmp(ids + k->instance_off, instance_id) == 0;
}

/* Collects one VF's keys (in any order) and ids in growable scratch buffers;
 * failure_block_finish() packs them, oldest first, into one exact block. */
struct failure_builder {
	struct failure_key *keys;
	size_t n, cap;
	char *ids;
	size_t used, ids_cap;
};

static int failure_builder_push(struct failure_builder *b, int64_t row_id, const char *instance_id,
				size_t instance_len, const char *assigned_at)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		struct failure_key *keys = reallocarray(b->keys, cap, sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		b->keys = keys;
		b->cap = cap;
	}
	if (b->used > UINT32_MAX - instance_len - 1)
		return -EOVERFLOW; /* 4 GiB of ids for one VF: not what this code writes */
	if (b->ids_cap - b->used < instance_len + 1) {
		size_t cap = MAX(b->ids_cap ? 2 * b->ids_cap : 1024, b->used + instance_len + 1);
		char *ids = realloc(b->ids, cap);
		if (!ids)
			return -ENOMEM;
		b->ids = ids;
		b->ids_cap = cap;
	}
	struct failure_key *k = &b->keys[b->n++];
	k->row_id = row_id;
	assigned_key(assigned_at, &k->assigned_sec, &k->assigned_nsec);
	k->instance_off = (uint32_t)b->used;
	memcpy(b->ids + b->used, instance_id, instance_len);
	b->ids[b->used + instance_len] = '\0';
	b->used += instance_len + 1;
	return 0;
}

static int compare_row_id(const void *a, const void *b)
{
	const struct failure_key *x = a, *y = b;

	return x->row_id < y->row_id ? -1 : x->row_id > y->row_id;
}

/* Pack the collected keys into one block (NULL when none) and empty the
 * builder for the next VF, keeping its buffers. */
static int failure_block_finish(struct failure_builder *b, struct failure_key **ret,
				const char **ret_ids, size_t *ret_n)
{
	*ret = NULL;
	*ret_ids = NULL;
	*ret_n = 0;
	if (b->n == 0)
		return 0;
	qsort(b->keys, b->n, sizeof(*b->keys), compare_row_id);
	struct failure_key *block = malloc(b->n * sizeof(*block) + b->used);
	if (!block)
		return -ENOMEM;
	memcpy(block, b->keys, b->n * sizeof(*block));
	memcpy((char *)(block + b->n), b->ids, b->used);
	*ret = block;
	*ret_ids = (const char *)(block + b->n);
	*ret_n = b->n;
	b->n = b->used = 0;
	return 0;
}

static void failure_builder_free(struct failure_builder *b)
{
	free(b->keys);
	free(b->ids);
	memset(b, 0, sizeof(*b));
}

/* -- mirror lookups (callers hold index_lock) ------------------------------- */

static struct vf_entry *find_vf(struct store *s, const char *addr)
{
	size_t lo = 0, hi = s->n_vfs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(s->by_addr[mid]->addr, addr);
		if (cmp == 0)
			return s->by_addr[mid];
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static size_t addr_insert_pos(struct store *s, const char *addr)
{
	size_t lo = 0, hi = s->n_vfs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(s->by_addr[mid]->addr, addr) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t id_insert_pos(struct store *s, uint64_t id)
{
	size_t lo = 0, hi = s->n_vfs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->by_id[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct vf_entry *find_vf_by_id(struct store *s, uint64_t id)
{
	size_t pos = id_insert_pos(s, id);

	return pos < s->n_vfs && s->by_id[pos]->id == id ? s->by_id[pos] : NULL;
}

static void vf_entry_free(struct vf_entry *e)
{
	if (!e)
		return;
	free(e->failures);
	free(e->claim);
	free(e);
}

static bool entry_held_back(const struct store *s, const struct vf_entry *e)
{
	return !e->quarantined && e->n_failures >= (size_t)s->threshold;
}

/* Counts follow the entries: subtract before changing one, add after. */
static void counts_sub(struct store *s, const struct vf_entry *e)
{
	s->n_quarantined -= e->quarantined;
	s->n_claimed -= e->claim != NULL;
	s->n_held_back -= entry_held_back(s, e);
}

static void counts_add(struct store *s, const struct vf_entry *e)
{
	s->n_quarantined += e->quarantined;
	s->n_claimed += e->claim != NULL;
	s->n_held_back += entry_held_back(s, e);
}

static void counts_recompute(struct store *s)
{
	s->n_quarantined = s->n_claimed = s->n_held_back = 0;
	for (size_t i = 0; i < s->n_vfs; i++)
		counts_add(s, s->by_addr[i]);
}

static bool breaker_engaged_locked(const struct store *s)
{
	return s->max_quarantined > 0 && s->n_quarantined >= (size_t)s->max_quarantined &&
	       s->n_held_back > 0;
}

static void index_clear(struct store *s)
{
	for (size_t i = 0; i < s->n_vfs; i++)
		vf_entry_free(s->by_addr[i]);
	free(s->by_addr);
	free(s->by_id);
	s->by_addr = s->by_id = NULL;
	s->n_vfs = s->cap_vfs = 0;
}

static int index_reserve(struct store *s, size_t want)
{
	if (want <= s->cap_vfs)
		return 0;
	size_t cap = MAX(want, MAX(s->cap_vfs * 2, (size_t)16));
	struct vf_entry **a = realloc(s->by_addr, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->by_addr = a;
	struct vf_entry **b = realloc(s->by_id, cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	s->by_id = b;
	s->cap_vfs = cap;
	return 0;
}

/* Insert a new entry; the caller reserved room. */
static void index_insert(struct store *s, struct vf_entry *e)
{
	size_t pa = addr_insert_pos(s, e->addr), pi = id_insert_pos(s, e->id);

	memmove(&s->by_addr[pa + 1], &s->by_addr[pa], (s->n_vfs - pa) * sizeof(*s->by_addr));
	s->by_addr[pa] = e;
	memmove(&s->by_id[pi + 1], &s->by_id[pi], (s->n_vfs - pi) * sizeof(*s->by_id));
	s->by_id[pi] = e;
	s->n_vfs++;
}

static void index_remove(struct store *s, struct vf_entry *e)
{
	size_t pa = addr_insert_pos(s, e->addr), pi = id_insert_pos(s, e->id);

	memmove(&s->by_addr[pa], &s->by_addr[pa + 1], (s->n_vfs - pa - 1) * sizeof(*s->by_addr));
	memmove(&s->by_id[pi], &s->by_id[pi + 1], (s->n_vfs - pi - 1) * sizeof(*s->by_id));
	s->n_vfs--;
}

/* -- change notification ---------------------------------------------------- */

void store_set_change_callback(struct store *s, store_change_fn fn, void *userdata)
{
	s->change_fn = fn;
	s->change_userdata = userdata;
}

static void notify(struct store *s, unsigned bits, const char *vf, const char *instance_id)
{
	struct store_change change = { .bits = bits };

	if (!s->change_fn)
		return;
	copy_string(change.vf, sizeof(change.vf), vf);
	copy_string(change.instance_id, sizeof(change.instance_id), instance_id);
	s->change_fn(s->change_userdata, &change);
}

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

/* -- SQLite helpers (callers hold write_lock) ------------------------------- */

/* Remember the first SQLite error of a batch or an open; its message becomes
 * the reason the store is unavailable. */
static int db_fail(struct store *s, const char *what)
{
	if (!s->batch_failed) {
		s->batch_failed = true;
		snprintf(s->batch_error, sizeof(s->batch_error), "%s: %s", what,
			 s->db ? sqlite3_errmsg(s->db) : "no database");
	}
	return -EIO;
}

/* Prepare sql and bind its parameters, typed by letters: 't' const char *,
 * 'i' int64_t.  The strings must outlive the statement (SQLITE_STATIC). */
static sqlite3_stmt *db_vprepare(struct store *s, const char *sql, const char *types, va_list ap)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
		db_fail(s, "database error");
		sqlite3_finalize(st);
		return NULL;
	}
	for (int i = 0; types[i]; i++) {
		int rc = SQLITE_MISUSE;
		if (types[i] == 't')
			rc = sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_STATIC);
		else if (types[i] == 'i')
			rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
		if (rc != SQLITE_OK) {
			db_fail(s, "database error");
			sqlite3_finalize(st);
			return NULL;
		}
	}
	return st;
}

static sqlite3_stmt *db_prepare(struct store *s, const char *sql, const char *types, ...)
{
	va_list ap;

	va_start(ap, types);
	sqlite3_stmt *st = db_vprepare(s, sql, types, ap);
	va_end(ap);
	return st;
}

/* Step a statement: 1 for a row, 0 when done, -EIO on error. */
static int db_step(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return db_fail(s, "database error");
}

/* Run a statement that returns no rows. */
static int db_exec(struct store *s, const char *sql, const char *types, ...)
{
	va_list ap;

	va_start(ap, types);
	_cleanup_stmt_ sqlite3_stmt *st = db_vprepare(s, sql, types, ap);
	va_end(ap);
	if (!st)
		return -EIO;
	int r;
	while ((r = db_step(s, st)) == 1)
		;
	return r;
}

/* The first column of the first row as an integer: 1 row, 0 none, -EIO. */
static int db_int(struct store *s, int64_t *ret, const char *sql, const char *types, ...)
{
	va_list ap;

	va_start(ap, types);
	_cleanup_stmt_ sqlite3_stmt *st = db_vprepare(s, sql, types, ap);
	va_end(ap);
	if (!st)
		return -EIO;
	int r = db_step(s, st);
	if (r == 1)
		*ret = sqlite3_column_int64(st, 0);
	return r;
}

static const char *col_text(sqlite3_stmt *st, int col)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	return t ? (const char *)t : "";
}

/* Add the row's (id, instance_id, assigned_at) at col.. to a builder. */
static int read_failure_key(sqlite3_stmt *st, int col, struct failure_builder *b)
{
	const char *instance_id = col_text(st, col + 1);

	return failure_builder_push(b, sqlite3_column_int64(st, col), instance_id,
				    strlen(instance_id), col_text(st, col + 2));
}

/* What the mirror needs: the unique index (vf_id, instance_id, assigned_at)
 * holds all of it (id is its rowid), so no table page, no message, is read. */
#define FAILURE_KEY_COLUMNS "id, instance_id, assigned_at"
#define CLAIM_COLUMNS "id, instance_id, claimed_at, agent, control, pid, pid_starttime"

static void read_claim(sqlite3_stmt *st, int col, const char *vf, struct store_claim *c)
{
	memset(c, 0, sizeof(*c));
	copy_string(c->vf, sizeof(c->vf), vf);
	c->id = (uint64_t)sqlite3_column_int64(st, col);
	copy_string(c->instance_id, sizeof(c->instance_id), col_text(st, col + 1));
	copy_string(c->claimed_at, sizeof(c->claimed_at), col_text(st, col + 2));
	copy_string(c->agent, sizeof(c->agent), col_text(st, col + 3));
	copy_string(c->control, sizeof(c->control), col_text(st, col + 4));
	c->pid = sqlite3_column_int64(st, col + 5);
	c->pid_starttime = (uint64_t)sqlite3_column_int64(st, col + 6);
}

struct vf_row {
	int64_t id;
	bool quarantined;
	bool manual;
};

static int db_vf_row(struct store *s, const char *addr, struct vf_row *row)
{
	_cleanup_stmt_ sqlite3_stmt *st =
		db_prepare(s, "SELECT id, quarantined, manual FROM vfs WHERE address = ?", "t", addr);
	if (!st)
		return -EIO;
	int r = db_step(s, st);
	if (r < 0)
		return r;
	if (r == 0)
		return -ENOENT;
	row->id = sqlite3_column_int64(st, 0);
	row->quarantined = sqlite3_column_int(st, 1) != 0;
	row->manual = sqlite3_column_int(st, 2) != 0;
	return 0;
}

static int db_setting(struct store *s, const char *key, int64_t *ret)
{
	int r = db_int(s, ret, "SELECT value FROM meta WHERE key = ?", "t", key);

	if (r == 0) {
		/* a missing setting row means a damaged database */
		snprintf(s->batch_error, sizeof(s->batch_error), "setting '%s' missing", key);
		s->batch_failed = true;
		return -EIO;
	}
	return r < 0 ? r : 0;
}

static int db_failure_count(struct store *s, int64_t vf_id, int64_t *ret)
{
	int r = db_int(s, ret, "SELECT COUNT(*) FROM failures WHERE vf_id = ?", "i", vf_id);

	return r < 0 ? r : 0;
}

static int db_quarantined_count(struct store *s, int64_t *ret)
{
	int r = db_int(s, ret, "SELECT COUNT(*) FROM vfs WHERE quarantined = 1", "");

	return r < 0 ? r : 0;
}

/* Read one VF's committed-to-be state into a snapshot. */
static int db_snapshot(struct store *s, const char *addr, struct vf_snapshot *snap)
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
	snap->manual = row.manual;

	{
		struct failure_builder b = { 0 };
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s, "SELECT " FAILURE_KEY_COLUMNS " FROM failures WHERE vf_id = ?", "i", row.id);
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1 && (r = read_failure_key(st, 0, &b)) == 0)
			;
		if (r == 0)
			r = failure_block_finish(&b, &snap->failures, &snap->failure_ids,
						 &snap->n_failures);
		failure_builder_free(&b);
		if (r < 0)
			return r;
	}

	_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
		s, "SELECT " CLAIM_COLUMNS " FROM claims WHERE vf_id = ? AND released_at IS NULL",
		"i", row.id);
	if (!st)
		return -EIO;
	r = db_step(s, st);
	if (r < 0)
		return r;
	if (r == 1) {
		snap->claim = malloc(sizeof(*snap->claim));
		if (!snap->claim)
			return -ENOMEM;
		read_claim(st, 0, addr, snap->claim);
	}
	return 0;
}

static void snapshot_release(struct vf_snapshot *snap)
{
	free(snap->failures);
	free(snap->claim);
	snap->failures = NULL;
	snap->failure_ids = NULL;
	snap->claim = NULL;
}

/* -- availability ----------------------------------------------------------- */

/* Caller holds write_lock. */
static void latch_unavailable(struct store *s, const char *reason)
{
	pthread_rwlock_wrlock(&s->mirror_lock);
	copy_string(s->reason, sizeof(s->reason), reason);
	for (char *p = s->reason; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' '; /* one line: it is shown in a status file and logs */
	atomic_store(&s->available, false);
	pthread_rwlock_unlock(&s->mirror_lock);
	log_err("store: unavailable: %s", s->reason);
}

bool store_status(struct store *s, char *reason, size_t reason_size)
{
	pthread_rwlock_rdlock(&s->mirror_lock);
	bool available = atomic_load(&s->available);
	if (!available && reason && reason_size > 0)
		copy_string(reason, reason_size, s->reason);
	pthread_rwlock_unlock(&s->mirror_lock);
	return available;
}

/* -- ops, run inside the batch transaction ----------------------------------- */

static int quarantine_row(struct store *s, int64_t vf_id, bool manual)
{
	char now[RFC3339_BUFSZ];

	rfc3339_now(now);
	return db_exec(s, "UPDATE vfs SET quarantined = 1, manual = ?, quarantined_at = ? WHERE id = ?",
		       "iti", (int64_t)manual, now, vf_id);
}

static int lift_row(struct store *s, int64_t vf_id)
{
	return db_exec(s,
		       "UPDATE vfs SET quarantined = 0, manual = 0, quarantined_at = NULL WHERE id = ?",
		       "i", vf_id);
}

/* Quarantine every VF whose tally meets the threshold, oldest registration
 * first, up to the cap. */
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
		char addr[STORE_VF_BUFSZ];
	};
	_cleanup_free_ struct candidate *candidates = NULL;
	size_t n = 0, allocated = 0;
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s,
			"SELECT v.id, v.address FROM vfs v WHERE v.quarantined = 0 AND "
			"(SELECT COUNT(*) FROM failures f WHERE f.vf_id = v.id) >= ? ORDER BY v.id",
			"i", threshold);
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1) {
			if (n == allocated) {
				size_t want = MAX(allocated * 2, (size_t)16);
				struct candidate *c = realloc(candidates, want * sizeof(*c));
				if (!c)
					return -ENOMEM;
				candidates = c;
				allocated = want;
			}
			candidates[n].id = sqlite3_column_int64(st, 0);
			copy_string(candidates[n].addr, sizeof(candidates[n].addr), col_text(st, 1));
			n++;
		}
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < n; i++) {
		if (cap > 0 && quarantined >= cap)
			break; /* the rest stay held back: the breaker is engaged */
		if ((r = quarantine_row(s, candidates[i].id, false)) < 0)
			return r;
		quarantined++;
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
	int r = db_int(s, &n, "SELECT COUNT(*) FROM vfs", "");

	if (r < 0)
		return r;
	if (n >= STORE_MAX_VFS)
		return -ENOSPC;
	r = db_vf_row(s, op->vf, &row);
	if (r == 0)
		return -EEXIST;
	if (r != -ENOENT)
		return r;
	r = db_exec(s, "INSERT INTO vfs (address, quarantined, manual) VALUES (?, 0, 0)", "t", op->vf);
	if (r < 0)
		return r;
	return op_change(op, STORE_CHANGE_VFS, op->vf, NULL);
}

static int op_unregister(struct store *s, struct op *op)
{
	struct vf_row row;
	int64_t n;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	if (row.quarantined)
		return -EBUSY;
	if ((r = db_failure_count(s, row.id, &n)) < 0)
		return r;
	if (n > 0)
		return -EBUSY;
	r = db_int(s, &n, "SELECT COUNT(*) FROM claims WHERE vf_id = ? AND released_at IS NULL", "i",
		   row.id);
	if (r < 0)
		return r;
	if (n > 0)
		return -EBUSY;
	/* released claims stay as history under the old vf_id, never reused */
	if ((r = db_exec(s, "DELETE FROM vfs WHERE id = ?", "i", row.id)) < 0)
		return r;
	return op_change(op, STORE_CHANGE_VFS, op->vf, NULL);
}

static int op_failure(struct store *s, struct op *op)
{
	struct vf_row row;
	int64_t threshold, tally, dup;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	if ((r = db_setting(s, "threshold", &threshold)) < 0 ||
	    (r = db_failure_count(s, row.id, &tally)) < 0)
		return r;
	op->failure = (struct store_failure_result){ .outcome = STORE_OUTCOME_UNCHANGED,
						     .tally = (unsigned)tally,
						     .threshold = (int)threshold };
	if (row.quarantined)
		return 0;
	r = db_int(s, &dup,
		   "SELECT 1 FROM failures WHERE vf_id = ? AND instance_id = ? AND assigned_at = ?",
		   "itt", row.id, op->instance_id, op->when);
	if (r < 0)
		return r;
	if (r == 1)
		return 0;

	if (tally >= STORE_MAX_FAILURES_PER_VF) {
		/* only a VF the breaker holds back gets here: keep the newest */
		r = db_exec(s,
			    "DELETE FROM failures WHERE id = "
			    "(SELECT MIN(id) FROM failures WHERE vf_id = ?)",
			    "i", row.id);
		if (r < 0)
			return r;
		tally--;
	}
	char now[RFC3339_BUFSZ];
	rfc3339_now(now);
	r = db_exec(s,
		    "INSERT INTO failures (vf_id, instance_id, assigned_at, reported_at, message) "
		    "VALUES (?, ?, ?, ?, ?)",
		    "ittt"
		    "t",
		    row.id, op->instance_id, op->when, now, op->message);
	if (r < 0)
		return r;
	tally++;
	op->failure.tally = (unsigned)tally;
	op->failure.outcome = STORE_OUTCOME_RECORDED;
	unsigned bits = STORE_CHANGE_FAILURES;

	if (tally >= threshold) {
		int64_t cap, quarantined;
		if ((r = db_setting(s, "max_quarantined", &cap)) < 0 ||
		    (r = db_quarantined_count(s, &quarantined)) < 0)
			return r;
		if (cap == 0 || quarantined < cap) {
			if ((r = quarantine_row(s, row.id, false)) < 0)
				return r;
			op->failure.outcome = STORE_OUTCOME_QUARANTINED;
			bits |= STORE_CHANGE_QUARANTINE;
		} else {
			op->failure.breaker_engaged = true;
		}
	}
	return op_change(op, bits, op->vf, NULL);
}

static int op_success(struct store *s, struct op *op)
{
	struct vf_row row;
	int64_t match, remaining;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	op->success = (struct store_success_result){ 0 };
	r = db_int(s, &match,
		   "SELECT id FROM failures WHERE vf_id = ? AND instance_id = ? AND assigned_at = ?",
		   "itt", row.id, op->instance_id, op->when);
	if (r <= 0)
		return r;
	/* this assignment worked: it and every older failure are history */
	r = db_exec(s, "DELETE FROM failures WHERE vf_id = ? AND id <= ?", "ii", row.id, match);
	if (r < 0)
		return r;
	op->success.cleared = (unsigned)sqlite3_changes(s->db);
	if ((r = db_failure_count(s, row.id, &remaining)) < 0)
		return r;
	unsigned bits = STORE_CHANGE_FAILURES;
	if (remaining == 0 && row.quarantined && !row.manual) {
		if ((r = lift_row(s, row.id)) < 0)
			return r;
		op->success.rescinded = true;
		bits |= STORE_CHANGE_QUARANTINE;
	}
	return op_change(op, bits, op->vf, NULL);
}

static int op_manual(struct store *s, struct op *op)
{
	struct vf_row row;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	if (row.quarantined)
		return 0;
	if ((r = quarantine_row(s, row.id, true)) < 0)
		return r;
	return op_change(op, STORE_CHANGE_QUARANTINE, op->vf, NULL);
}

static int op_clear(struct store *s, struct op *op)
{
	struct vf_row row;
	int64_t n;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	if ((r = db_failure_count(s, row.id, &n)) < 0)
		return r;
	if (!row.quarantined && n == 0)
		return 0;
	if ((r = db_exec(s, "DELETE FROM failures WHERE vf_id = ?", "i", row.id)) < 0 ||
	    (r = lift_row(s, row.id)) < 0)
		return r;
	return op_change(op, (n ? STORE_CHANGE_FAILURES : 0u) |
				     (row.quarantined ? STORE_CHANGE_QUARANTINE : 0u),
			 op->vf, NULL);
}

static int op_setting(struct store *s, struct op *op, const char *key, unsigned bit)
{
	int64_t current;
	int r = db_setting(s, key, &current);

	if (r < 0)
		return r;
	if (current == op->value)
		return 0;
	r = db_exec(s, "UPDATE meta SET value = ? WHERE key = ?", "it", (int64_t)op->value, key);
	if (r < 0)
		return r;
	if ((r = op_change(op, bit, "", NULL)) < 0)
		return r;
	return db_reevaluate(s, op);
}

static int op_claim(struct store *s, struct op *op)
{
	const struct store_claim *c = op->claim_in;
	struct vf_row row;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	if (row.quarantined)
		return -EBUSY;
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s, "SELECT instance_id FROM claims WHERE vf_id = ? AND released_at IS NULL",
			"i", row.id);
		if (!st)
			return -EIO;
		r = db_step(s, st);
		if (r < 0)
			return r;
		if (r == 1)
			return strcmp(col_text(st, 0), op->instance_id) == 0 ? -EEXIST : -EBUSY;
	}
	struct store_claim *out = &op->claim_out;
	*out = *c;
	copy_string(out->vf, sizeof(out->vf), op->vf);
	copy_string(out->instance_id, sizeof(out->instance_id), op->instance_id);
	if (op->when[0])
		copy_string(out->claimed_at, sizeof(out->claimed_at), op->when);
	else
		rfc3339_now(out->claimed_at);
	r = db_exec(s,
		    "INSERT INTO claims (vf_id, instance_id, claimed_at, agent, control, pid, "
		    "pid_starttime) VALUES (?, ?, ?, ?, ?, ?, ?)",
		    "itttt"
		    "ii",
		    row.id, out->instance_id, out->claimed_at, out->agent, out->control, out->pid,
		    (int64_t)out->pid_starttime);
	if (r < 0)
		return r;
	out->id = (uint64_t)sqlite3_last_insert_rowid(s->db);
	return op_change(op, STORE_CHANGE_CLAIMS, op->vf, op->instance_id);
}

static int op_claim_update(struct store *s, struct op *op)
{
	const struct store_claim *c = op->claim_in;
	struct vf_row row;
	int64_t claim_id;
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	r = db_int(s, &claim_id,
		   "SELECT id FROM claims WHERE vf_id = ? AND instance_id = ? AND released_at IS NULL",
		   "it", row.id, op->instance_id);
	if (r < 0)
		return r;
	if (r == 0)
		return -ENOENT;
	r = db_exec(s,
		    "UPDATE claims SET agent = ?, control = ?, pid = ?, pid_starttime = ?, "
		    "claimed_at = CASE WHEN ? = '' THEN claimed_at ELSE ? END WHERE id = ?",
		    "ttiitti", c->agent, c->control, c->pid, (int64_t)c->pid_starttime, op->when,
		    op->when, claim_id);
	if (r < 0)
		return r;
	return op_change(op, STORE_CHANGE_CLAIMS, op->vf, op->instance_id);
}

static int op_release(struct store *s, struct op *op)
{
	struct vf_row row;
	char now[RFC3339_BUFSZ];
	int r = db_vf_row(s, op->vf, &row);

	if (r < 0)
		return r;
	rfc3339_now(now);
	r = db_exec(s,
		    "UPDATE claims SET released_at = ? WHERE vf_id = ? AND instance_id = ? AND "
		    "released_at IS NULL",
		    "tit", now, row.id, op->instance_id);
	if (r < 0)
		return r;
	if (sqlite3_changes(s->db) == 0)
		return -ENOENT;
	return op_change(op, STORE_CHANGE_CLAIMS, op->vf, op->instance_id);
}

static int op_exec(struct store *s, struct op *op)
{
	switch (op->kind) {
	case OP_REGISTER:
		return op_register(s, op);
	case OP_UNREGISTER:
		return op_unregister(s, op);
	case OP_FAILURE:
		return op_failure(s, op);
	case OP_SUCCESS:
		return op_success(s, op);
	case OP_MANUAL:
		return op_manual(s, op);
	case OP_CLEAR:
		return op_clear(s, op);
	case OP_THRESHOLD:
		return op_setting(s, op, "threshold", STORE_CHANGE_THRESHOLD);
	case OP_MAX_QUARANTINED:
		return op_setting(s, op, "max_quarantined", STORE_CHANGE_MAX_QUARANTINED);
	case OP_CLAIM:
		return op_claim(s, op);
	case OP_CLAIM_UPDATE:
		return op_claim_update(s, op);
	case OP_RELEASE:
		return op_release(s, op);
	}
	return -EINVAL;
}

/* -- group commit ------------------------------------------------------------ */

static int compare_addr(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The distinct VFs a batch changed, sorted. */
static int batch_dirty_vfs(struct op *batch, char (**ret)[STORE_VF_BUFSZ], size_t *count)
{
	size_t n = 0;

	for (struct op *op = batch; op; op = op->next)
		for (size_t i = 0; i < op->n_changes; i++)
			n += op->changes[i].vf[0] != '\0';
	_cleanup_free_ char(*addrs)[STORE_VF_BUFSZ] = calloc(MAX(n, (size_t)1), sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	n = 0;
	for (struct op *op = batch; op; op = op->next)
		for (size_t i = 0; i < op->n_changes; i++)
			if (op->changes[i].vf[0])
				memcpy(addrs[n++], op->changes[i].vf, STORE_VF_BUFSZ);
	qsort(addrs, n, sizeof(*addrs), compare_addr);
	size_t unique = 0;
	for (size_t i = 0; i < n; i++)
		if (unique == 0 || strcmp(addrs[unique - 1], addrs[i]) != 0)
			memmove(addrs[unique++], addrs[i], STORE_VF_BUFSZ);
	*ret = addrs;
	addrs = NULL; /* ownership to the caller (move_ptr is not -Wpedantic clean) */
	*count = unique;
	return 0;
}

static void op_discard_changes(struct op *op)
{
	free(op->changes);
	op->changes = NULL;
	op->n_changes = op->cap_changes = 0;
}

struct batch_state {
	struct vf_snapshot *snaps;
	struct vf_entry **spares; /* preallocated entries for VFs that may be new */
	size_t n;
	int threshold;
	int max_quarantined;
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

/* Everything the mirror update will need is read and allocated here, inside
 * the transaction, so that applying after COMMIT cannot fail. */
static int batch_prepare(struct store *s, struct op *batch, size_t registered,
			 struct batch_state *b)
{
	_cleanup_free_ char(*addrs)[STORE_VF_BUFSZ] = NULL;
	size_t n;
	int64_t threshold, max_quarantined;
	int r = batch_dirty_vfs(batch, &addrs, &n);

	if (r < 0)
		return r;
	b->snaps = calloc(MAX(n, (size_t)1), sizeof(*b->snaps));
	b->spares = calloc(MAX(n, (size_t)1), sizeof(*b->spares));
	if (!b->snaps || !b->spares)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		b->n = i + 1;
		if ((r = db_snapshot(s, addrs[i], &b->snaps[i])) < 0)
			return r;
		if (b->snaps[i].exists && !(b->spares[i] = calloc(1, sizeof(struct vf_entry))))
			return -ENOMEM;
	}
	if ((r = db_setting(s, "threshold", &threshold)) < 0 ||
	    (r = db_setting(s, "max_quarantined", &max_quarantined)) < 0)
		return r;
	b->threshold = (int)threshold;
	b->max_quarantined = (int)max_quarantined;

	if (registered == 0)
		return 0;
	/* room in the index for the new VFs: a brief write lock, taken only for
	 * registrations and never across the fsync */
	pthread_rwlock_wrlock(&s->index_lock);
	r = index_reserve(s, s->n_vfs + registered);
	pthread_rwlock_unlock(&s->index_lock);
	return r;
}

/* Apply a committed batch to the mirror.  Returns whether the breaker state
 * changed. */
static bool batch_apply(struct store *s, struct batch_state *b, bool structural)
{
	if (structural)
		pthread_rwlock_wrlock(&s->index_lock);
	else
		pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	bool breaker_before = breaker_engaged_locked(s);

	for (size_t i = 0; i < b->n; i++) {
		struct vf_snapshot *snap = &b->snaps[i];
		struct vf_entry *e = find_vf(s, snap->addr);
		if (!snap->exists) {
			if (e) {
				counts_sub(s, e);
				index_remove(s, e);
				vf_entry_free(e);
			}
			continue;
		}
		if (!e) {
			e = b->spares[i];
			b->spares[i] = NULL;
			copy_string(e->addr, sizeof(e->addr), snap->addr);
			e->id = snap->id;
			index_insert(s, e);
		} else {
			counts_sub(s, e);
			free(e->failures);
			free(e->claim);
		}
		e->quarantined = snap->quarantined;
		e->manual = snap->manual;
		e->failures = snap->failures;
		e->failure_ids = snap->failure_ids;
		e->n_failures = snap->n_failures;
		e->claim = snap->claim;
		snap->failures = NULL;
		snap->claim = NULL;
		atomic_store(&e->failure_count, (unsigned)e->n_failures);
		counts_add(s, e);
	}
	bool threshold_changed = s->threshold != b->threshold;
	s->threshold = b->threshold;
	s->max_quarantined = b->max_quarantined;
	if (threshold_changed)
		counts_recompute(s);
	bool breaker_changed = breaker_before != breaker_engaged_locked(s);

	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	return breaker_changed;
}

/* Run a batch as one transaction.  Called by the leader only. */
static void run_batch(struct store *s, struct op *batch)
{
	struct batch_state b = { 0 };
	bool structural = false, breaker_changed = false, latched = false;
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
	r = db_exec(s, "BEGIN IMMEDIATE", "");
	for (struct op *op = batch; op && r == 0; op = op->next) {
		if ((r = db_exec(s, "SAVEPOINT op", "")) < 0)
			break;
		op->rc = op_exec(s, op);
		if (s->batch_failed)
			break;
		if (op->rc < 0) {
			/* a refused op (e.g. -EBUSY) leaves no trace; the others go on */
			op_discard_changes(op);
			r = db_exec(s, "ROLLBACK TO op", "");
		}
		if (r == 0)
			r = db_exec(s, "RELEASE op", "");
		structural |= op->rc == 0 && (op->kind == OP_REGISTER || op->kind == OP_UNREGISTER);
		registered += op->rc == 0 && op->kind == OP_REGISTER;
	}
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
		breaker_changed = batch_apply(s, &b, structural);
	}
	batch_state_release(&b);
	pthread_mutex_unlock(&s->write_lock);

	/* durable and mirrored: tell the filesystem, with no store lock held */
	for (struct op *op = batch; op; op = op->next) {
		for (size_t i = 0; i < op->n_changes; i++)
			notify(s, op->changes[i].bits, op->changes[i].vf, op->changes[i].instance_id);
		op_discard_changes(op);
	}
	if (breaker_changed)
		notify(s, STORE_CHANGE_BREAKER, "", NULL);
	if (latched)
		notify(s, STORE_CHANGE_STATUS, "", NULL);
}

/* Queue ops and wait until all of them are durable (or failed).  The first
 * caller to find no leader runs the batch for everyone queued. */
static void submit_ops(struct store *s, struct op **ops, size_t n)
{
	pthread_mutex_lock(&s->queue_lock);
	for (size_t i = 0; i < n; i++) {
		ops[i]->done = false;
		ops[i]->next = NULL;
		*s->queue_tail = ops[i];
		s->queue_tail = &ops[i]->next;
	}
	for (;;) {
		bool all_done = true;
		for (size_t i = 0; i < n; i++)
			all_done &= ops[i]->done;
		if (all_done)
			break;
		if (s->leader_active) {
			pthread_cond_wait(&s->queue_cond, &s->queue_lock);
			continue;
		}
		s->leader_active = true;
		struct op *batch = s->queue_head, **last = &s->queue_head;
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
			next = op->next; /* the owner may return as soon as done is set */
			op->done = true;
		}
		s->leader_active = false;
		pthread_cond_broadcast(&s->queue_cond);
	}
	pthread_mutex_unlock(&s->queue_lock);
}

static int submit(struct store *s, struct op *op)
{
	submit_ops(s, &op, 1);
	return op->rc;
}

/* -- open, load, repair, close ------------------------------------------------ */

static int mkdir_parents(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);

	if (!dir)
		return -ENOMEM;
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return negative_errno();
		*p = '/';
	}
	return 0;
}

static int compare_entry_id(const void *a, const void *b)
{
	const struct vf_entry *x = *(struct vf_entry *const *)a, *y = *(struct vf_entry *const *)b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static struct vf_entry *lookup_id(struct vf_entry **by_id, size_t n, uint64_t id)
{
	struct vf_entry key = { .id = id }, *k = &key;
	struct vf_entry **found = bsearch(&k, by_id, n, sizeof(*by_id), compare_entry_id);

	return found ? *found : NULL;
}

struct loaded_index {
	struct vf_entry **by_addr;
	struct vf_entry **by_id;
	size_t n;
};

static void loaded_index_free(struct loaded_index *li)
{
	for (size_t i = 0; li->by_addr && i < li->n; i++)
		vf_entry_free(li->by_addr[i]);
	free(li->by_addr);
	free(li->by_id);
}

/* Load every VF's failure keys: only the compact columns, from the covering
 * index, so rows arrive grouped by VF and no message is read (this is most
 * of the startup time with many failures). */
static int db_load_failures(struct store *s, struct loaded_index *li)
{
	struct failure_builder b = { 0 };
	struct vf_entry *e = NULL;
	int64_t current = 0;
	bool started = false;
	int r;
	_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
		s, "SELECT vf_id, " FAILURE_KEY_COLUMNS " FROM failures ORDER BY vf_id", "");

	if (!st)
		return -EIO;
	for (;;) {
		int row = db_step(s, st);
		if (row < 0) {
			r = row;
			break;
		}
		int64_t vf_id = row ? sqlite3_column_int64(st, 0) : 0;
		if (!row || !started || vf_id != current) {
			/* the previous VF is complete */
			if (e && (r = failure_block_finish(&b, &e->failures, &e->failure_ids,
							  &e->n_failures)) < 0)
				break;
			if (!row) {
				r = 0;
				break;
			}
			started = true;
			current = vf_id;
			e = lookup_id(li->by_id, li->n, (uint64_t)vf_id);
		}
		/* no entry: the history of an unregistered VF */
		if (e && (r = read_failure_key(st, 1, &b)) < 0)
			break;
	}
	failure_builder_free(&b);
	for (size_t i = 0; i < li->n; i++)
		atomic_store(&li->by_addr[i]->failure_count, (unsigned)li->by_addr[i]->n_failures);
	return r;
}

/* Read the whole database.  Returns 0, -EIO (batch_error says why: the
 * content is not what this code writes), or -ENOMEM. */
static int db_load(struct store *s, struct loaded_index *li, int64_t *threshold,
		   int64_t *max_quarantined)
{
	int64_t n;
	int r;

	if ((r = db_setting(s, "threshold", threshold)) < 0 ||
	    (r = db_setting(s, "max_quarantined", max_quarantined)) < 0 ||
	    (r = db_int(s, &n, "SELECT COUNT(*) FROM vfs", "")) < 0)
		return r;
	if (*threshold < STORE_THRESHOLD_MIN || *threshold > STORE_THRESHOLD_MAX ||
	    *max_quarantined < 0 || *max_quarantined > STORE_MAX_VFS || n > STORE_MAX_VFS) {
		s->batch_failed = true;
		snprintf(s->batch_error, sizeof(s->batch_error),
			 "database content invalid: threshold %lld, max_quarantined %lld, %lld VFs",
			 (long long)*threshold, (long long)*max_quarantined, (long long)n);
		return -EIO;
	}
	li->by_addr = calloc(MAX((size_t)n, (size_t)1), sizeof(*li->by_addr));
	li->by_id = calloc(MAX((size_t)n, (size_t)1), sizeof(*li->by_id));
	if (!li->by_addr || !li->by_id)
		return -ENOMEM;
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s, "SELECT id, address, quarantined, manual FROM vfs ORDER BY address", "");
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1 && li->n < (size_t)n) {
			struct vf_entry *e = calloc(1, sizeof(*e));
			if (!e)
				return -ENOMEM;
			li->by_addr[li->n++] = e;
			e->id = (uint64_t)sqlite3_column_int64(st, 0);
			copy_string(e->addr, sizeof(e->addr), col_text(st, 1));
			e->quarantined = sqlite3_column_int(st, 2) != 0;
			e->manual = sqlite3_column_int(st, 3) != 0;
			if (!store_vf_address_valid(e->addr)) {
				s->batch_failed = true;
				snprintf(s->batch_error, sizeof(s->batch_error),
					 "database content invalid: VF address '%s'", e->addr);
				return -EIO;
			}
		}
		if (r < 0)
			return r;
	}
	memcpy(li->by_id, li->by_addr, li->n * sizeof(*li->by_id));
	qsort(li->by_id, li->n, sizeof(*li->by_id), compare_entry_id);

	r = db_load_failures(s, li);
	if (r < 0)
		return r;
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s, "SELECT vf_id, " CLAIM_COLUMNS " FROM claims WHERE released_at IS NULL", "");
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1) {
			struct vf_entry *e = lookup_id(li->by_id, li->n,
						       (uint64_t)sqlite3_column_int64(st, 0));
			if (!e || e->claim)
				continue;
			e->claim = malloc(sizeof(*e->claim));
			if (!e->claim)
				return -ENOMEM;
			read_claim(st, 1, e->addr, e->claim);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Load the database into the mirror (replacing it) and mark available. */
static int mirror_reload(struct store *s)
{
	struct loaded_index li = { 0 };
	int64_t threshold, max_quarantined;
	int r = db_load(s, &li, &threshold, &max_quarantined);

	if (r < 0) {
		loaded_index_free(&li);
		if (!s->batch_failed) {
			s->batch_failed = true;
			snprintf(s->batch_error, sizeof(s->batch_error), "loading failed: %s",
				 strerror(-r));
		}
		return r;
	}
	pthread_rwlock_wrlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	index_clear(s);
	s->by_addr = li.by_addr;
	s->by_id = li.by_id;
	s->n_vfs = s->cap_vfs = li.n;
	s->threshold = (int)threshold;
	s->max_quarantined = (int)max_quarantined;
	counts_recompute(s);
	s->reason[0] = '\0';
	atomic_store(&s->loaded, true);
	atomic_store(&s->available, true);
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	return 0;
}

#define SCHEMA_SQL                                                                         \
	"BEGIN IMMEDIATE;"                                                                 \
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"                \
	"CREATE TABLE vfs (id INTEGER PRIMARY KEY AUTOINCREMENT,"                          \
	" address TEXT NOT NULL UNIQUE, quarantined INTEGER NOT NULL DEFAULT 0,"           \
	" manual INTEGER NOT NULL DEFAULT 0, quarantined_at TEXT);"                        \
	"CREATE TABLE failures (id INTEGER PRIMARY KEY AUTOINCREMENT,"                     \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, assigned_at TEXT NOT NULL,"   \
	" reported_at TEXT NOT NULL, message TEXT NOT NULL,"                               \
	" UNIQUE (vf_id, instance_id, assigned_at));"                                      \
	"CREATE TABLE claims (id INTEGER PRIMARY KEY AUTOINCREMENT,"                       \
	" vf_id INTEGER NOT NULL, instance_id TEXT NOT NULL, claimed_at TEXT NOT NULL,"    \
	" agent TEXT NOT NULL, control TEXT NOT NULL, pid INTEGER NOT NULL,"               \
	" pid_starttime INTEGER NOT NULL, released_at TEXT);"                              \
	"CREATE UNIQUE INDEX claims_live ON claims (vf_id) WHERE released_at IS NULL;"     \
	"INSERT INTO meta (key, value) VALUES ('threshold', 2), ('max_quarantined', 0);"   \
	"PRAGMA application_id = 1447446577;" /* STORE_APPLICATION_ID */                   \
	"PRAGMA user_version = 1;"            /* STORE_SCHEMA_VERSION */                   \
	"COMMIT;"

_Static_assert(STORE_APPLICATION_ID == 1447446577, "SCHEMA_SQL names the application id");
_Static_assert(STORE_THRESHOLD_DEFAULT == 2, "SCHEMA_SQL names the default threshold");

/* Open the database, check that it is ours, and load it.  Nothing is
 * written before the checks pass, so a foreign or damaged file is never
 * altered.  Returns 0 (opened), 1 (unusable: reason set), -EBUSY, -ENOMEM. */
static int db_open(struct store *s, char *reason, size_t reason_size)
{
	int64_t app_id, version, tables;
	int r;

	if (s->lock_fd < 0) {
		if ((r = mkdir_parents(s->path)) < 0) {
			snprintf(reason, reason_size, "cannot create the parent of %s: %s", s->path,
				 strerror(-r));
			return r == -ENOMEM ? r : 1;
		}
		int fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			snprintf(reason, reason_size, "cannot open %s: %s", s->lock_path,
				 strerror(errno));
			return 1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int err = errno;
			close(fd);
			snprintf(reason, reason_size, "cannot lock %s: %s", s->lock_path,
				 err == EWOULDBLOCK ? "held by another process" : strerror(err));
			return err == EWOULDBLOCK ? -EBUSY : 1;
		}
		s->lock_fd = fd;
	}
	/* create it with our mode; SQLite gives -wal and -shm the same mode */
	int fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(reason, reason_size, "cannot open %s: %s", s->path, strerror(errno));
		return 1;
	}
	close(fd);

	r = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
			    s->vfs_name);
	if (r != SQLITE_OK) {
		snprintf(reason, reason_size, "cannot open database: %s",
			 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(r));
		return r == SQLITE_NOMEM ? -ENOMEM : 1;
	}
	sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
	s->batch_failed = false;
	if (db_int(s, &app_id, "PRAGMA application_id", "") < 0 ||
	    db_int(s, &version, "PRAGMA user_version", "") < 0 ||
	    db_int(s, &tables, "SELECT COUNT(*) FROM sqlite_master", "") < 0) {
		snprintf(reason, reason_size, "cannot read database %s: %s", s->path,
			 sqlite3_errmsg(s->db));
		return 1;
	}
	bool fresh = app_id == 0 && version == 0 && tables == 0;
	if (!fresh && app_id != STORE_APPLICATION_ID) {
		snprintf(reason, reason_size,
			 "%s is not a vfhealth database (application_id 0x%08llx, expected 0x%08x)",
			 s->path, (unsigned long long)(uint32_t)app_id, STORE_APPLICATION_ID);
		return 1;
	}
	if (!fresh && version != STORE_SCHEMA_VERSION) {
		snprintf(reason, reason_size,
			 "%s has schema version %lld; this vfhealthd supports version %d%s", s->path,
			 (long long)version, STORE_SCHEMA_VERSION,
			 version > STORE_SCHEMA_VERSION ? " (written by a newer vfhealthd)" : "");
		return 1;
	}
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s, "PRAGMA quick_check", "");
		if (!st || db_step(s, st) != 1) {
			snprintf(reason, reason_size, "quick_check of %s failed: %s", s->path,
				 sqlite3_errmsg(s->db));
			return 1;
		}
		if (strcmp(col_text(st, 0), "ok") != 0) {
			snprintf(reason, reason_size, "quick_check of %s failed: %s", s->path,
				 col_text(st, 0));
			return 1;
		}
	}
	/* checks passed: from here on we may write */
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s, "PRAGMA journal_mode = WAL", "");
		if (!st || db_step(s, st) != 1 || strcmp(col_text(st, 0), "wal") != 0) {
			snprintf(reason, reason_size, "cannot enable WAL on %s: %s", s->path,
				 sqlite3_errmsg(s->db));
			return 1;
		}
	}
	if (sqlite3_exec(s->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(reason, reason_size, "cannot set synchronous: %s", sqlite3_errmsg(s->db));
		return 1;
	}
	if (fresh && sqlite3_exec(s->db, SCHEMA_SQL, NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(reason, reason_size, "cannot create the schema in %s: %s", s->path,
			 sqlite3_errmsg(s->db));
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return 1;
	}
	if (mirror_reload(s) < 0) {
		snprintf(reason, reason_size, "%s", s->batch_error);
		return 1;
	}
	return 0;
}

/* write_lock held.  0 available, 1 unavailable (latched with the reason),
 * or -EBUSY / -ENOMEM. */
static int open_locked(struct store *s)
{
	char reason[STORE_REASON_MAX] = "";
	int r = db_open(s, reason, sizeof(reason));

	if (r == 0) {
		atomic_fetch_add(&s->db_generation, 1); /* the listing connection reopens */
		log_info("store: opened %s", s->path);
		return 0;
	}
	sqlite3_close_v2(s->db);
	s->db = NULL;
	latch_unavailable(s, reason);
	return r;
}

static void apply_config(struct store *s)
{
	struct op threshold_op = { .kind = OP_THRESHOLD, .value = s->cfg_threshold };
	struct op cap_op = { .kind = OP_MAX_QUARANTINED, .value = s->cfg_max_quarantined };
	struct op *ops[2];
	size_t n = 0;

	pthread_rwlock_rdlock(&s->mirror_lock);
	if (s->cfg_threshold != 0 && s->cfg_threshold != s->threshold)
		ops[n++] = &threshold_op;
	if (s->cfg_max_quarantined >= 0 && s->cfg_max_quarantined != s->max_quarantined)
		ops[n++] = &cap_op;
	pthread_rwlock_unlock(&s->mirror_lock);
	if (n == 0)
		return;
	submit_ops(s, ops, n); /* one transaction: the new settings and the re-evaluation */
	for (size_t i = 0; i < n; i++)
		if (ops[i]->rc < 0)
			log_err("store: applying the configured %s failed: %s",
				ops[i] == &threshold_op ? "threshold" : "max_quarantined",
				strerror(-ops[i]->rc));
}

/* Tell the filesystem that everything may have changed (after a reload). */
static void notify_all(struct store *s)
{
	_cleanup_free_ char(*addrs)[STORE_VF_BUFSZ] = NULL;
	size_t n = 0;

	if (!s->change_fn)
		return;
	pthread_rwlock_rdlock(&s->index_lock);
	addrs = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*addrs));
	for (size_t i = 0; addrs && i < s->n_vfs; i++)
		memcpy(addrs[n++], s->by_addr[i]->addr, STORE_VF_BUFSZ);
	pthread_rwlock_unlock(&s->index_lock);
	notify(s, STORE_CHANGE_STATUS | STORE_CHANGE_VFS | STORE_CHANGE_THRESHOLD |
			  STORE_CHANGE_MAX_QUARANTINED | STORE_CHANGE_BREAKER,
	       "", NULL);
	for (size_t i = 0; i < n; i++)
		notify(s, STORE_CHANGE_FAILURES | STORE_CHANGE_QUARANTINE | STORE_CHANGE_CLAIMS,
		       addrs[i], NULL);
}

int store_repair(struct store *s)
{
	bool recovered = false;

	pthread_mutex_lock(&s->write_lock);
	if (!atomic_load(&s->available)) {
		if (!atomic_load(&s->loaded) || !s->db) {
			open_locked(s);
		} else {
			/* prove that a write commits, then trust only what is on disk */
			s->batch_failed = false;
			if (db_exec(s, "BEGIN IMMEDIATE", "") == 0 &&
			    db_exec(s,
				    "INSERT INTO meta (key, value) VALUES ('repairs', 1) "
				    "ON CONFLICT (key) DO UPDATE SET value = value + 1",
				    "") == 0 &&
			    sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
				db_fail(s, "repair failed");
			if (!s->batch_failed)
				mirror_reload(s);
			if (s->batch_failed) {
				if (!sqlite3_get_autocommit(s->db))
					sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
				latch_unavailable(s, s->batch_error);
			} else {
				atomic_fetch_add(&s->commits, 1);
			}
		}
		recovered = atomic_load(&s->available);
	}
	pthread_mutex_unlock(&s->write_lock);
	if (recovered) {
		log_info("store: available again");
		apply_config(s);
		notify_all(s);
	}
	return atomic_load(&s->available) ? 0 : -EIO;
}

int store_open(const struct store_options *opt, struct store **ret)
{
	if (!opt || !ret || !opt->path || !*opt->path || strlen(opt->path) >= PATH_MAX - 8)
		return -EINVAL;
	if (opt->threshold != 0 &&
	    (opt->threshold < STORE_THRESHOLD_MIN || opt->threshold > STORE_THRESHOLD_MAX))
		return -EINVAL;
	if (opt->max_quarantined < -1 || opt->max_quarantined > STORE_MAX_VFS)
		return -EINVAL;
	if (opt->vfs_name && !sqlite3_vfs_find(opt->vfs_name))
		return -EINVAL;

	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = -1;
	s->queue_tail = &s->queue_head;
	s->cfg_threshold = opt->threshold;
	s->cfg_max_quarantined = opt->max_quarantined;
	pthread_mutex_init(&s->write_lock, NULL);
	pthread_rwlock_init(&s->index_lock, NULL);
	pthread_rwlock_init(&s->mirror_lock, NULL);
	pthread_mutex_init(&s->queue_lock, NULL);
	pthread_cond_init(&s->queue_cond, NULL);
	pthread_mutex_init(&s->read_lock, NULL);
	s->path = strdup(opt->path);
	if (asprintf(&s->lock_path, "%s-lock", opt->path) < 0)
		s->lock_path = NULL;
	s->vfs_name = opt->vfs_name ? strdup(opt->vfs_name) : NULL;
	if (!s->path || !s->lock_path || (opt->vfs_name && !s->vfs_name)) {
		store_close(s);
		return -ENOMEM;
	}

	pthread_mutex_lock(&s->write_lock);
	int r = open_locked(s);
	pthread_mutex_unlock(&s->write_lock);
	if (r < 0) {
		store_close(s);
		return r;
	}
	if (r == 0)
		apply_config(s);
	*ret = s;
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	/* the reader first: the writer, closing last, checkpoints the WAL */
	sqlite3_close_v2(s->read_db);
	if (s->db)
		sqlite3_close_v2(s->db);
	if (s->lock_fd >= 0)
		close(s->lock_fd); /* drops the flock */
	index_clear(s);
	pthread_mutex_destroy(&s->read_lock);
	pthread_cond_destroy(&s->queue_cond);
	pthread_mutex_destroy(&s->queue_lock);
	pthread_rwlock_destroy(&s->mirror_lock);
	pthread_rwlock_destroy(&s->index_lock);
	pthread_mutex_destroy(&s->write_lock);
	free(s->path);
	free(s->lock_path);
	free(s->vfs_name);
	free(s);
}

/* -- public API: checks, no-op detection, then the queue ---------------------- */

/* Placement-facing reads: a latched store retries once, then -EIO. */
static int ensure_available(struct store *s)
{
	if (atomic_load(&s->available))
		return 0;
	return store_repair(s) == 0 ? 0 : -EIO;
}

/* Mutations that would change state need a loaded, available store. */
static int ensure_writable(struct store *s)
{
	return atomic_load(&s->loaded) && atomic_load(&s->available) ? 0 : -EIO;
}

static void fill_info(const struct vf_entry *e, struct store_vf_info *info)
{
	memset(info, 0, sizeof(*info));
	copy_string(info->vf, sizeof(info->vf), e->addr);
	info->id = e->id;
	info->tally = (unsigned)e->n_failures;
	info->quarantined = e->quarantined;
	info->manual = e->quarantined && e->manual;
	info->claimed = e->claim != NULL;
}

static void mirror_rdlock(struct store *s)
{
	pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_rdlock(&s->mirror_lock);
}

static void mirror_unlock(struct store *s)
{
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
}

int store_vf_register(struct store *s, const char *vf)
{
	struct op op = { .kind = OP_REGISTER };

	if (!store_vf_address_valid(vf))
		return -EINVAL;
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), vf);
	return submit(s, &op);
}

int store_vf_unregister(struct store *s, const char *vf)
{
	struct op op = { .kind = OP_UNREGISTER };

	if (!store_vf_address_valid(vf))
		return -EINVAL;
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), vf);
	return submit(s, &op);
}

int store_vf_get(struct store *s, const char *vf, struct store_vf_info *ret)
{
	if (!store_vf_address_valid(vf) || !ret)
		return -EINVAL;
	if (ensure_available(s) < 0)
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, vf);
	if (e)
		fill_info(e, ret);
	mirror_unlock(s);
	return e ? 0 : -ENOENT;
}

int store_vf_get_by_id(struct store *s, uint64_t id, struct store_vf_info *ret)
{
	if (!ret)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *e = find_vf_by_id(s, id);
	if (e)
		fill_info(e, ret);
	mirror_unlock(s);
	return e ? 0 : -ENOENT;
}

int store_vf_list(struct store *s, struct store_vf_info **ret, size_t *count)
{
	if (!ret || !count)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct store_vf_info *list = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*list));
	size_t n = list ? s->n_vfs : 0;
	for (size_t i = 0; i < n; i++)
		fill_info(s->by_addr[i], &list[i]);
	mirror_unlock(s);
	if (!list)
		return -ENOMEM;
	*ret = list;
	*count = n;
	return 0;
}

int store_quarantined_list(struct store *s, char (**ret)[STORE_VF_BUFSZ], size_t *count)
{
	if (!ret || !count)
		return -EINVAL;
	if (ensure_available(s) < 0)
		return -EIO;
	mirror_rdlock(s);
	char(*list)[STORE_VF_BUFSZ] = calloc(MAX(s->n_quarantined, (size_t)1), sizeof(*list));
	size_t n = 0;
	for (size_t i = 0; list && i < s->n_vfs; i++)
		if (s->by_addr[i]->quarantined)
			memcpy(list[n++], s->by_addr[i]->addr, STORE_VF_BUFSZ);
	mirror_unlock(s);
	if (!list)
		return -ENOMEM;
	*ret = list;
	*count = n;
	return 0;
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
		log_warn("store: cannot open %s for reading: %s", s->path,
			 s->read_db ? sqlite3_errmsg(s->read_db) : sqlite3_errstr(rc));
		sqlite3_close_v2(s->read_db);
		s->read_db = NULL;
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	}
	sqlite3_busy_timeout(s->read_db, STORE_BUSY_TIMEOUT_MS);
	s->read_db_generation = generation;
	return 0;
}

/* read_lock held.  One statement, so one read transaction: the VF's
 * existence and its failures come from the same committed state.  Zero rows:
 * no such VF; one row with a NULL id: a VF without failures. */
static int read_failures(struct store *s, const char *vf, struct store_failure **ret,
			 size_t *count)
{
	_cleanup_free_ struct store_failure *list = NULL;
	_cleanup_stmt_ sqlite3_stmt *st = NULL;
	size_t n = 0, cap = 0;
	bool found = false;
	int rc;

	rc = sqlite3_prepare_v2(s->read_db,
				"SELECT f.id, f.reported_at, f.instance_id, f.assigned_at, f.message"
				" FROM vfs v LEFT JOIN failures f ON f.vf_id = v.id"
				" WHERE v.address = ? ORDER BY f.id",
				-1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(st, 1, vf, -1, SQLITE_STATIC);
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
		copy_string(f->reported_at, sizeof(f->reported_at), col_text(st, 1));
		copy_string(f->instance_id, sizeof(f->instance_id), col_text(st, 2));
		copy_string(f->assigned_at, sizeof(f->assigned_at), col_text(st, 3));
		copy_string(f->message, sizeof(f->message), col_text(st, 4));
	}
	if (rc != SQLITE_DONE) {
		log_warn("store: listing the failures of %s failed: %s", vf,
			 sqlite3_errmsg(s->read_db));
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	}
	if (!found)
		return -ENOENT;
	if (!list && !(list = calloc(1, sizeof(*list))))
		return -ENOMEM; /* callers free() *ret even when count is 0 */
	*ret = list;
	list = NULL; /* ownership to the caller */
	*count = n;
	return 0;
}

/* Not served from the mirror (it keeps no messages): read from SQLite
 * through the listing connection, which WAL lets read while the writer
 * commits, so a listing never waits behind an fsync, and which still
 * serves the committed rows while a failed commit has latched the store. */
int store_failure_list(struct store *s, const char *vf, struct store_failure **ret, size_t *count)
{
	if (!store_vf_address_valid(vf) || !ret || !count)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO; /* the database could not be opened */
	pthread_mutex_lock(&s->read_lock);
	int r = read_db_ready(s);
	if (r == 0)
		r = read_failures(s, vf, ret, count);
	if (r == -EIO) {
		/* start afresh next time (the file may have been replaced) */
		sqlite3_close_v2(s->read_db);
		s->read_db = NULL;
	}
	pthread_mutex_unlock(&s->read_lock);
	return r;
}

/* -- settings -- */

static int setting_get(struct store *s, const int *field)
{
	if (!atomic_load(&s->loaded))
		return -EIO;
	pthread_rwlock_rdlock(&s->mirror_lock);
	int v = *field;
	pthread_rwlock_unlock(&s->mirror_lock);
	return v;
}

static int setting_set(struct store *s, enum op_kind kind, const int *field, int value)
{
	struct op op = { .kind = kind, .value = value };

	if (!atomic_load(&s->loaded))
		return -EIO;
	pthread_rwlock_rdlock(&s->mirror_lock);
	bool same = *field == value;
	pthread_rwlock_unlock(&s->mirror_lock);
	if (same)
		return 0;
	if (ensure_writable(s) < 0)
		return -EIO;
	return submit(s, &op);
}

int store_threshold_get(struct store *s)
{
	return setting_get(s, &s->threshold);
}

int store_threshold_set(struct store *s, int threshold)
{
	if (threshold < STORE_THRESHOLD_MIN || threshold > STORE_THRESHOLD_MAX)
		return -EINVAL;
	return setting_set(s, OP_THRESHOLD, &s->threshold, threshold);
}

int store_max_quarantined_get(struct store *s)
{
	return setting_get(s, &s->max_quarantined);
}

int store_max_quarantined_set(struct store *s, int max_quarantined)
{
	if (max_quarantined < 0 || max_quarantined > STORE_MAX_VFS)
		return -EINVAL;
	return setting_set(s, OP_MAX_QUARANTINED, &s->max_quarantined, max_quarantined);
}

/* -- reports -- */

/* assigned_at is canonical or "" (normalize_optional_time). */
static bool failure_recorded(const struct vf_entry *e, const char *instance_id,
			     const char *assigned_at)
{
	int64_t sec;
	uint32_t nsec;

	assigned_key(assigned_at, &sec, &nsec);
	for (size_t i = 0; i < e->n_failures; i++)
		if (failure_key_matches(&e->failures[i], e->failure_ids, instance_id, sec, nsec))
			return true;
	return false;
}

int store_report_failure(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, const char *message,
			 struct store_failure_result *ret)
{
	struct op op = { .kind = OP_FAILURE };
	char clean_message[STORE_MESSAGE_MAX + 1];
	struct store_failure_result result = { .outcome = STORE_OUTCOME_UNCHANGED };
	int r;

	if (!store_vf_address_valid(vf) || !instance_id_valid(instance_id) ||
	    normalize_optional_time(assigned_at, op.when) < 0)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), vf);
	copy_string(op.instance_id, sizeof(op.instance_id), instance_id);

	/* no-ops are answered from the committed state, even while latched */
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, vf);
	bool noop = e && (e->quarantined || failure_recorded(e, op.instance_id, op.when));
	if (e) {
		result.tally = (unsigned)e->n_failures;
		result.threshold = s->threshold;
	}
	mirror_unlock(s);
	if (!e)
		return -ENOENT;
	if (!noop) {
		if (ensure_writable(s) < 0)
			return -EIO;
		sanitize_message(message, clean_message);
		op.message = clean_message;
		if ((r = submit(s, &op)) < 0)
			return r;
		result = op.failure;
	}
	atomic_fetch_add(&s->failed_reports[result.outcome], 1);
	if (ret)
		*ret = result;
	return 0;
}

int store_report_success(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, struct store_success_result *ret)
{
	struct op op = { .kind = OP_SUCCESS };
	int r;

	if (!store_vf_address_valid(vf) || !instance_id_valid(instance_id) ||
	    normalize_optional_time(assigned_at, op.when) < 0)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;

	/* fast path: the index's read side and one atomic load; no lock a
	 * commit, claim or failure report holds, no SQLite */
	pthread_rwlock_rdlock(&s->index_lock);
	struct vf_entry *e = find_vf(s, vf);
	unsigned failures = e ? atomic_load(&e->failure_count) : 0;
	pthread_rwlock_unlock(&s->index_lock);
	if (!e)
		return -ENOENT;
	bool noop = failures == 0;

	if (!noop) {
		mirror_rdlock(s);
		e = find_vf(s, vf);
		noop = !e || !failure_recorded(e, instance_id, op.when);
		mirror_unlock(s);
		if (!e)
			return -ENOENT;
	}
	if (noop) {
		atomic_fetch_add(&s->ok_reports_noop, 1);
		if (ret)
			*ret = (struct store_success_result){ 0 };
		return 0;
	}
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), vf);
	copy_string(op.instance_id, sizeof(op.instance_id), instance_id);
	if ((r = submit(s, &op)) < 0)
		return r;
	if (op.success.cleared)
		atomic_fetch_add(&s->ok_reports_cleared, 1);
	else
		atomic_fetch_add(&s->ok_reports_noop, 1);
	if (ret)
		*ret = op.success;
	return 0;
}

/* -- operator actions -- */

static int operator_action(struct store *s, enum op_kind kind, const char *vf)
{
	struct op op = { .kind = kind };

	if (!store_vf_address_valid(vf))
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, vf);
	bool noop = e && (kind == OP_MANUAL ? e->quarantined
					    : !e->quarantined && e->n_failures == 0);
	mirror_unlock(s);
	if (!e)
		return -ENOENT;
	if (noop)
		return 0;
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), vf);
	return submit(s, &op);
}

int store_quarantine_manual(struct store *s, const char *vf)
{
	return operator_action(s, OP_MANUAL, vf);
}

int store_clear(struct store *s, const char *vf)
{
	return operator_action(s, OP_CLEAR, vf);
}

/* -- claims -- */

static int claim_check(const struct store_claim *c, char when[static RFC3339_BUFSZ])
{
	if (!c || !store_vf_address_valid(c->vf) || !instance_id_valid(c->instance_id))
		return -EINVAL;
	if (strnlen(c->claimed_at, sizeof(c->claimed_at)) >= sizeof(c->claimed_at) ||
	    normalize_optional_time(c->claimed_at, when) < 0)
		return -EINVAL;
	if (strnlen(c->agent, sizeof(c->agent)) > STORE_ENDPOINT_MAX ||
	    strnlen(c->control, sizeof(c->control)) > STORE_ENDPOINT_MAX)
		return -ENAMETOOLONG;
	if (c->pid < 0 || c->pid > INT32_MAX)
		return -EINVAL;
	return 0;
}

int store_claim(struct store *s, const struct store_claim *c, struct store_claim *ret)
{
	struct op op = { .kind = OP_CLAIM, .claim_in = c };
	int r;

	if ((r = claim_check(c, op.when)) < 0)
		return r;
	if (!atomic_load(&s->loaded))
		return -EIO;
	/* refusals are answered from the committed state, even while latched */
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, c->vf);
	r = !e ? -ENOENT
	       : e->quarantined ? -EBUSY
	       : !e->claim ? 0
	       : strcmp(e->claim->instance_id, c->instance_id) == 0 ? -EEXIST : -EBUSY;
	mirror_unlock(s);
	if (r < 0)
		return r;
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), c->vf);
	copy_string(op.instance_id, sizeof(op.instance_id), c->instance_id);
	if ((r = submit(s, &op)) < 0)
		return r;
	if (ret)
		*ret = op.claim_out;
	return 0;
}

int store_claim_update(struct store *s, const struct store_claim *c)
{
	struct op op = { .kind = OP_CLAIM_UPDATE, .claim_in = c };
	int r;

	if ((r = claim_check(c, op.when)) < 0)
		return r;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, c->vf);
	const struct store_claim *live = e ? e->claim : NULL;
	bool held = live && strcmp(live->instance_id, c->instance_id) == 0;
	bool noop = held && strcmp(live->agent, c->agent) == 0 &&
		    strcmp(live->control, c->control) == 0 && live->pid == c->pid &&
		    live->pid_starttime == c->pid_starttime &&
		    (!op.when[0] || strcmp(live->claimed_at, op.when) == 0);
	mirror_unlock(s);
	if (!held)
		return -ENOENT;
	if (noop)
		return 0;
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), c->vf);
	copy_string(op.instance_id, sizeof(op.instance_id), c->instance_id);
	return submit(s, &op);
}

int store_release(struct store *s, const char *vf, const char *instance_id)
{
	struct op op = { .kind = OP_RELEASE };

	if (!store_vf_address_valid(vf) || !instance_id_valid(instance_id))
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, vf);
	bool held = e && e->claim && strcmp(e->claim->instance_id, instance_id) == 0;
	mirror_unlock(s);
	if (!held)
		return -ENOENT;
	if (ensure_writable(s) < 0)
		return -EIO;
	copy_string(op.vf, sizeof(op.vf), vf);
	copy_string(op.instance_id, sizeof(op.instance_id), instance_id);
	return submit(s, &op);
}

int store_claim_get(struct store *s, const char *vf, const char *instance_id,
		    struct store_claim *ret)
{
	if (!store_vf_address_valid(vf) || !instance_id_valid(instance_id) || !ret)
		return -EINVAL;
	if (ensure_available(s) < 0)
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *e = find_vf(s, vf);
	bool held = e && e->claim && strcmp(e->claim->instance_id, instance_id) == 0;
	if (held)
		*ret = *e->claim;
	mirror_unlock(s);
	return held ? 0 : -ENOENT;
}

int store_claim_get_by_id(struct store *s, uint64_t id, struct store_claim *ret)
{
	bool found = false;

	if (!ret)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	/* live claims are few (one per VF); a scan keeps no second index */
	for (size_t i = 0; i < s->n_vfs && !found; i++) {
		const struct store_claim *c = s->by_addr[i]->claim;
		if (c && c->id == id) {
			*ret = *c;
			found = true;
		}
	}
	mirror_unlock(s);
	return found ? 0 : -ENOENT;
}

int store_claim_list(struct store *s, const char *vf, struct store_claim **ret, size_t *count)
{
	if ((vf && !store_vf_address_valid(vf)) || !ret || !count)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *one = vf ? find_vf(s, vf) : NULL;
	size_t n = vf ? (one && one->claim) : s->n_claimed;
	struct store_claim *list = calloc(MAX(n, (size_t)1), sizeof(*list));
	size_t filled = 0;
	for (size_t i = 0; list && i < s->n_vfs && filled < n; i++) {
		const struct vf_entry *e = s->by_addr[i];
		if (e->claim && (!vf || e == one))
			list[filled++] = *e->claim;
	}
	mirror_unlock(s);
	if (vf && !one) {
		free(list);
		return -ENOENT;
	}
	if (!list)
		return -ENOMEM;
	*ret = list;
	*count = filled;
	return 0;
}

/* -- counters -- */

void store_get_stats(struct store *s, struct store_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	mirror_rdlock(s);
	size_t both = 0;
	for (size_t i = 0; i < s->n_vfs; i++)
		both += s->by_addr[i]->quarantined && s->by_addr[i]->claim;
	ret->vfs = s->n_vfs;
	ret->quarantined = s->n_quarantined;
	ret->claimed = s->n_claimed;
	ret->available = atomic_load(&s->available);
	ret->allocatable = ret->available ? s->n_vfs - s->n_quarantined - s->n_claimed + both : 0;
	ret->breaker_engaged = breaker_engaged_locked(s);
	mirror_unlock(s);
	for (size_t i = 0; i < ARRAY_SIZE(ret->failed_reports); i++)
		ret->failed_reports[i] = atomic_load(&s->failed_reports[i]);
	ret->ok_reports_cleared = atomic_load(&s->ok_reports_cleared);
	ret->ok_reports_noop = atomic_load(&s->ok_reports_noop);
	ret->commits = atomic_load(&s->commits);
	ret->commit_failures = atomic_load(&s->commit_failures);
}
