/* SPDX-License-Identifier: MIT */
/*
 * store-internal.h - what the store's files share, and nothing outside
 * store/ includes: struct store (settings, locks, the mirror's index, the op
 * queue, the listing connection, counters), the mirror's entries, an op
 * (one queued mutation with its change list), and what each file offers the
 * others.  The contract is store.h; the decisions are rules.h.
 *
 *   api.c      the public entry points: validate, decide from the mirror,
 *              submit (one shape for all of them), and the reads
 *   claims.c   the claim entry points: reservations, commits, releases
 *   rules.c    the decisions as pure functions
 *   placement.c the placement order (placement.h): groups, and the draw
 *              within each group
 *   mirror.c   the in-memory mirror: index, failure keys, counts, applying
 *   db.c       SQLite helpers and row readers (callers hold write_lock)
 *   ops.c      the SQL operations, run inside the batch transaction, and
 *              their change lists
 *   commit.c   group commit: the queue, the leader, savepoints, one fsync,
 *              the subscribers
 *   schema.c   open, load, migrate, repair, close; the unavailable latch
 *              (the SQL text of the schema and its steps: schema-sql.h)
 *   listing.c  the read-only listing connection (store_failure_list,
 *              store_history_list, store_gpu_history)
 *   gpus.c     a parent GPU's drain: its phase, the claims it refuses
 *   files-watch.c the proof that lets the files check skip its stat(2)s
 *
 * Design notes
 * ============
 *
 * Threads.  The store has no thread of its own.  Callers are FUSE workers and
 * sentinel workers.  A mutation is queued as an `op` and the first caller to
 * find no commit leader becomes the leader and runs the batch (commit.c).
 *
 * Locks: rows 1b-6 of the lock table in docs/architecture.md (the one
 * statement of the order).  Local detail: write_lock also guards
 * batch_failed / batch_error, the running batch and the statement cache
 * (db.c); index_lock's write side is also taken when the
 * whole mirror is loaded; mirror_lock covers everything inside the entries
 * (quarantine bits, failures, claims), the settings, the counts and the
 * reason, and the leader takes its write side only to apply a committed batch.
 * The success fast path takes only index_lock's read side and reads the
 * entry's atomic failure_count, so a healthy poll never waits for a commit,
 * a claim or a failure report, and works while the store is unavailable.
 *
 * Inside the batch, an op on a VF no earlier op of the batch ran on reads
 * the VF's live failure count from the mirror (batch_named_before(),
 * commit.c) and its keys are the mirror's plus what the batch appended:
 * no commit re-reads or re-counts all of a VF's failures
 * (tests/store/test-store-commit.c, group_commit, checks the memory against the
 * disk).
 *
 * Reads are served from the mirror, which is written only after a
 * successful COMMIT (or loaded whole at open/repair), except the failure
 * listing (listing.c).  No-op calls (duplicate report, report on a
 * quarantined VF, success with nothing to clear, manual quarantine of a
 * quarantined VF, clearing a clean VF, setting a setting to its value) are
 * decided from the mirror and take no transaction; this is linearizable
 * because the mirror is a committed state and queued ops are not yet
 * acknowledged.
 *
 * Shutdown.  store_close() expects no concurrent callers (the daemon stops
 * its workers first); every acknowledged change is already durable.
 */
#ifndef VFHEALTH_STORE_INTERNAL_H
#define VFHEALTH_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <sqlite3.h>

#include "common/cleanup.h"
#include "common/futex.h"
#include "common/parse.h"
#include "store/rules.h"
#include "store/store.h"

#define STORE_BUSY_TIMEOUT_MS 5000
#define DB_STMT_CACHE_MAX 48 /* distinct SQL texts the operations run */

DEFINE_CLEANUP_FUNC(sqlite3_stmt, sqlite3_finalize)
#define _cleanup_stmt_ _cleanup_(sqlite3_finalizep)

static inline void copy_string(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

/* -- the mirror (mirror.c) --------------------------------------------------- */

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
	char addr[VF_ADDR_BUFSZ];
	uint64_t id;
	atomic_uint failure_count;         /* == n_failures; read without mirror_lock */
	atomic_bool suspect;               /* == suspect_since[0] != 0; read without mirror_lock */
	atomic_bool probation;             /* == probation_since[0] != 0; likewise */
	bool quarantined;                  /* automatically, by failures */
	bool held;                         /* by the operator */
	char since[RFC3339_BUFSZ];         /* out of service since; "" while in service */
	char parent[VF_ADDR_BUFSZ];        /* the physical function; "" when unknown */
	char suspect_since[RFC3339_BUFSZ]; /* "" when not suspect (store.h, Suspect) */
	char probation_since[RFC3339_BUFSZ]; /* "" when not on probation (store.h, Probation) */
	struct failure_key *failures;        /* oldest first; one block with failure_ids */
	const char *failure_ids;             /* inside the failures block; not freed alone */
	size_t n_failures;
	struct store_claim *claim; /* the live claim, NULL when none */
	/* a reservation (store.h): never with a claim, memory only; NULL exactly
	 * when reservation_state is RESERVATION_NONE.  Its states and
	 * transitions: rule_reservation_next() (rules.h); mirror_reservation_set()
	 * is the one place they are applied. */
	struct store_claim *reservation;
	enum reservation_state reservation_state;
	/* sysfs no longer shows it (store_vf_set_absent): memory only */
	bool absent;
};

/* A VF's committed state, read inside the transaction before COMMIT and
 * applied to the mirror after it. */
struct vf_snapshot {
	char addr[VF_ADDR_BUFSZ];
	bool exists;
	uint64_t id;
	bool quarantined;
	bool held;
	char since[RFC3339_BUFSZ];
	char parent[VF_ADDR_BUFSZ];
	char suspect_since[RFC3339_BUFSZ];
	char probation_since[RFC3339_BUFSZ];
	struct failure_key *failures;
	const char *failure_ids;
	size_t n_failures;
	struct store_claim *claim;
};

/* Collects one VF's keys (in any order) and ids in growable scratch buffers;
 * failure_block_finish() packs them, oldest first, into one exact block. */
struct failure_builder {
	struct failure_key *keys;
	size_t n, cap;
	char *ids;
	size_t used, ids_cap;
};

/* -- GPUs (gpus.c) ------------------------------------------------------------- */

struct gpu_entry {
	char parent[VF_ADDR_BUFSZ];
	enum gpu_phase phase;
};

/* -- ops (ops.c) and the queue (commit.c) -------------------------------------- */

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
	OP_SET_PARENT,
	OP_MODE,
	OP_GPU, /* a GPU's step: op->value is its enum gpu_event */
	OP_AUTO_RECOVER,
};

struct op {
	enum op_kind kind;
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char when[RFC3339_BUFSZ];   /* assigned_at, or claimed_at ("" = none) */
	char parent[VF_ADDR_BUFSZ]; /* OP_REGISTER, OP_SET_PARENT ("" = unknown); OP_GPU;
				     * every other op on one VF: its parent (ops_exec) */
	const char *message;        /* sanitized, owned by the caller */
	const struct store_claim *claim_in;
	int value;   /* threshold, max_quarantined, mode, auto_recover or (OP_GPU) enum gpu_event */
	int64_t uid; /* the writer, for the history: -1 unknown */
	const char *how;                  /* OP_RELEASE: how the claim ended */
	const struct store_claim *if_vmm; /* OP_RELEASE: only while it names this VMM */
	bool gpu_applied;                 /* OP_GPU: changed the GPU's phase (gpus_apply_batch) */
	enum gpu_phase gpu_next;          /* OP_GPU: the phase it changed to */
	struct store_gpu_refusal gpu_why; /* OP_GPU: why it was refused (-EBUSY) */
	size_t gpu_cleared;               /* OP_GPU, recovered: the VFs that changed */
	bool crashed;                     /* OP_RELEASE: its VMM died ("Suspect") */
	char died_at[RFC3339_BUFSZ];      /* OP_RELEASE, crashed: "" = now */
	bool suspect_began;               /* OP_RELEASE: the VF became suspect */
	int64_t died_after_ms;            /* ... its VMM dead this long after the claim */
	bool when_given;                  /* OP_CLAIM, OP_CLAIM_UPDATE: the writer set claimed_at
			    (rule_claimed_at_refusal), it is not the store's stamp */

	bool noop; /* the decision: nothing to change (answered from the mirror) */
	int rc;
	/* OP_FAILURE: the row it inserted (0 when none), and whether it also
	 * cleared failures (the breaker's drop of the oldest): batch_prepare
	 * (commit.c) appends inserted rows to the mirror's keys instead of
	 * reading all of a VF's keys again, unless anything else touched them */
	int64_t failure_row;
	bool failures_cleared;
	struct store_failure_result failure;
	struct store_success_result success;
	struct store_operator_result operator; /* OP_MANUAL, OP_CLEAR: what decide found */
	struct store_claim claim_out;

	struct store_change *changes; /* malloc'd, for the callback */
	size_t n_changes;
	size_t cap_changes;

	struct commit_waiter *waiter; /* its caller's; the committer's for commit_join's */
	/* An op nobody waits for (commit_join): called once, on the answerer
	 * thread with no lock held, after its batch; frees the op. */
	void (*answer)(struct store *s, struct op *op);
	bool done; /* under queue_lock */
	struct op *next;
};

/* What files-watch.c watches so that the files check may skip its stat(2)s. */
struct files_watched {
	int wd;
	const char *name; /* the child that matters there (in names) */
};
struct files_watch {
	int inotify_fd; /* -1: not armed */
	int mounts_fd;  /* /proc/self/mountinfo */
	bool proven;    /* a stat check passed since the last readiness */
	bool given_up;  /* arming cannot work: every check stats */
	char *names;    /* the path's components and the WAL's name */
	struct files_watched *watched;
	size_t n_watched;
};

struct store {
	/* set at open, then constant */
	char *path;
	char *lock_path;
	char *mark_path; /* PATH ".created": a database was created here */
	char *wal_path;  /* PATH "-wal" */
	char *vfs_name;
	int cfg_threshold;
	int cfg_max_quarantined;
	int64_t init_window_ns; /* store.h, Suspect; 0: off */

	pthread_mutex_t write_lock;
	int lock_fd; /* flock'd; -1 while not held */
	int db_fd;   /* the database file itself, flock'd; -1 while not held */
	int wal_fd;  /* its WAL, to tell whether it is still the file at its path; -1: none yet */
	struct file_id {
		dev_t dev;
		ino_t ino;
	} db_id, wal_id;          /* what db_fd and wal_fd are: fixed while they are open */
	struct files_watch watch; /* files-watch.c */
	atomic_int_fast64_t files_checked_ns; /* monotonic time of the last idle files_check */
	sqlite3 *db;
	struct op *batch; /* the batch the leader is running (commit.c) */
	/* db's statements that run per operation, prepared once (db.c) */
	struct db_cached_stmt {
		sqlite3_stmt *st;
		bool busy; /* handed out: a nested use of the same SQL prepares another */
	} stmts[DB_STMT_CACHE_MAX];
	size_t n_stmts;
	bool batch_failed;
	char batch_error[STORE_REASON_MAX];

	/* orders a reservation's commit with its cancel and with other commits
	 * of it (claims.c); taken before any other lock, never by the committer */
	pthread_mutex_t reservation_lock;

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
	atomic_int mode;      /* enum store_mode: read without mirror_lock */
	size_t n_quarantined; /* automatically: what the breaker's cap counts */
	size_t n_held;
	size_t n_out_of_service; /* quarantined or held */
	size_t n_claimed;        /* VFs with a claim or a reservation */
	uint64_t next_claim_id;  /* a reservation's id: above every claims.id ever used */
	size_t n_held_back;
	/* the GPUs not serving (gpus.c), unsorted: few */
	struct gpu_entry *gpus;
	size_t n_gpus, cap_gpus;
	size_t gpus_pending;     /* OP_GPUs of the running batch (under write_lock too) */
	atomic_int auto_recover; /* store_auto_recover_get: read without mirror_lock */
	size_t n_suspect;
	size_t n_probation;

	pthread_mutex_t queue_lock;
	struct op *queue_head;
	struct op **queue_tail;
	atomic_bool leader_active; /* written under queue_lock; commit_join() peeks */
	/* the store's two threads (commit.c), started with the first op that
	 * joins a batch under way: the committer leads the batches whose first
	 * op nobody waits for, the answerer answers the ops nobody waits for */
	struct commit_waiter {
		struct futex_word f; /* commit.c */
	} committer_wake, answerer_wake;
	pthread_t committer, answerer;
	bool threads_started, threads_stop, committer_done;
	struct op *answers, **answers_tail; /* run, to be answered, in order */
	size_t joined;                      /* ops joined and not yet answered */

	/* the listing connection (store_failure_list): read-only, a leaf lock */
	pthread_mutex_t read_lock;
	sqlite3 *read_db;            /* NULL until first used */
	unsigned read_db_generation; /* the db_generation read_db was opened at */
	atomic_uint db_generation;   /* bumped by every successful open of db */

	struct store_subscriber {
		store_change_fn fn;
		void *userdata;
	} subscribers[STORE_SUBSCRIBERS_MAX]; /* store_subscribe(), in order */
	size_t n_subscribers;

	atomic_uint_fast64_t failed_reports[3];
	atomic_uint_fast64_t ok_reports_cleared;
	atomic_uint_fast64_t ok_reports_noop;
	atomic_uint_fast64_t suspect_confirmed;
	atomic_uint_fast64_t suspect_cleared;
	atomic_uint_fast64_t commits;
	atomic_uint_fast64_t commit_failures;
	atomic_uint_fast64_t reports_joined;
	atomic_uint_fast64_t repairs;       /* store_repair() attempts on an unavailable store */
	atomic_int_fast64_t read_repair_ns; /* monotonic time of the last read-triggered retry */
};

/* Reads retry a latched store at most this often (store_retry_for_read). */
#define STORE_READ_REPAIR_INTERVAL_NS NSEC_PER_SEC
/* While no commit runs, reads check the store's files at most this often. */
#define STORE_FILES_CHECK_INTERVAL_NS NSEC_PER_SEC

/* -- mirror.c ------------------------------------------------------------------ */

int failure_builder_push(struct failure_builder *b, int64_t row_id, const char *instance_id,
			 size_t instance_len, const char *assigned_at);
/* A key the mirror already holds (mirror_copy_failures). */
int failure_builder_push_key(struct failure_builder *b, const struct failure_key *k,
			     const char *instance_id);
int failure_block_finish(struct failure_builder *b, struct failure_key **ret, const char **ret_ids,
			 size_t *ret_n);
void failure_builder_free(struct failure_builder *b);

void mirror_rdlock(struct store *s); /* index_lock, then mirror_lock: read sides */
void mirror_unlock(struct store *s);
/* callers hold index_lock */
struct vf_entry *mirror_find(struct store *s, const char *addr);
/* The VF's live failures as committed; -ENOENT when it has no entry.  Takes
 * index_lock's read side. */
int mirror_failure_count(struct store *s, uint64_t id, uint64_t *ret);
struct vf_entry *mirror_find_by_id(struct store *s, uint64_t id);
/* callers hold mirror_lock too: assigned_at canonical or "" */
bool mirror_failure_recorded(const struct vf_entry *e, const char *instance_id,
			     const char *assigned_at);
void mirror_fill_info(const struct store *s, const struct vf_entry *e, struct store_vf_info *info);
const char *mirror_holder(const struct vf_entry *e);
bool mirror_breaker_engaged(const struct store *s);

/* The keys of the mirror's entry for addr with that id into b (takes the
 * locks): -ENOENT when the mirror has no such entry.  Only the commit leader
 * calls it, under write_lock, so the entry cannot change meanwhile. */
int mirror_copy_failures(struct store *s, const char *addr, uint64_t id, struct failure_builder *b);
void vf_entry_free(struct vf_entry *e);
void snapshot_release(struct vf_snapshot *snap);
/* Reservations (store.h; they take the locks): add res (malloc'd, owned by
 * the mirror on success; its id is set) or refuse as a claim would; drop
 * the reservation `id` of vf if it is still one. */
int mirror_reservation_add(struct store *s, struct store_claim *res);
/* Cancel vf's reservation `id`; true when there was one (parent: the VF's
 * parent, for the change the caller publishes once no lock is held). */
bool mirror_reservation_drop(struct store *s, const char *vf, uint64_t id,
			     char parent[static VF_ADDR_BUFSZ]);
/* Mark the reservation `id` of vf orphaned: 0, or -ENOENT when it is no
 * longer one. */
int mirror_reservation_orphan(struct store *s, const char *vf, uint64_t id);
/* Commit every orphaned reservation (store_claim_abandon); store_repair()
 * calls it once the store is available again. */
void claims_commit_orphaned(struct store *s);

/* -- api.c, for claims.c ---------------------------------------------------- */

/* Decide an op from the committed mirror (mirror_rdlock held): e is the
 * entry of op->vf, NULL when unknown or when the op names no VF.  Returns 0
 * (op->noop set when there is nothing to change) or a negative errno (a
 * refusal). */
typedef int (*decide_fn)(const struct store *s, const struct vf_entry *e, struct op *op);
/* Loaded -> decide -> writable -> submit.  decide NULL: always submit.
 * Returns 0 (committed, or op->noop: nothing to change; op holds the
 * results) or -errno. */
int mutate(struct store *s, struct op *op, decide_fn decide);
/* The settings kept in atomics, read without mirror_lock (mode,
 * auto_recover): the value, -EIO before the load. */
int atomic_setting_get(struct store *s, const atomic_int *field);
/* decide_fn of OP_MODE and OP_AUTO_RECOVER: a noop when the value holds. */
int decide_atomic_setting(const struct store *s, const struct vf_entry *e, struct op *op);
/* The check every read makes before it copies from the mirror (enum
 * store_read). */
int read_ready(struct store *s, enum store_read how);
/* index_lock's write side held */
int mirror_reserve(struct store *s, size_t want);
void mirror_clear(struct store *s);
/* Apply committed snapshots (takes the locks; cannot fail: spares are
 * preallocated).  Returns the store-wide changes it caused:
 * STORE_CHANGE_BREAKER when the breaker state changed, STORE_CHANGE_HELD_BACK
 * when the set of held-back VFs did. */
unsigned mirror_apply(struct store *s, struct vf_snapshot *snaps, struct vf_entry **spares,
		      size_t n, int threshold, int max_quarantined, bool structural);
/* Replace the whole mirror with a loaded one (takes the locks) and mark the
 * store loaded and available.  Reservations of VFs that still exist carry
 * over; next_claim_id only grows. */
void mirror_replace(struct store *s, struct vf_entry **by_addr, struct vf_entry **by_id, size_t n,
		    int threshold, int max_quarantined, uint64_t next_claim_id);

/* -- db.c (callers hold write_lock) ---------------------------------------------- */

/* What the mirror needs: the unique index (vf_id, instance_id, assigned_at)
 * holds all of it (id is its rowid), so no table page, no message, is read. */
#define FAILURE_KEY_COLUMNS "id, instance_id, assigned_at"
/* Failures no rule sees any more stay as history (cleared_at set): every
 * query of the live ones says so. */
#define FAILURE_LIVE "cleared_at IS NULL"
#define CLAIM_COLUMNS "id, instance_id, claimed_at, agent, control, pid, pid_starttime, boot_id"

/* A statement's parameters, bound in order, each by its type: db_text()
 * for a string (NULL binds SQL NULL; it must outlive the statement's use),
 * db_i64() for an integer.  A value of the wrong type is a compile error
 * (tests/store/meson.build compiles one), and a count that differs from the
 * statement's parameters fails the statement:
 *     db_exec(s, "DELETE FROM vfs WHERE id = ?", DB_ARGS(db_i64(id)));
 *     db_exec(s, "BEGIN IMMEDIATE", DB_NONE); */
enum db_type {
	DB_TEXT = 1,
	DB_INT64,
};

struct db_value {
	enum db_type type;
	union {
		const char *text;
		int64_t i64;
	};
};

struct db_args {
	const struct db_value *v;
	size_t n;
};

static inline struct db_value db_text(const char *text)
{
	return (struct db_value){ .type = DB_TEXT, .text = text };
}

static inline struct db_value db_i64(int64_t i64)
{
	return (struct db_value){ .type = DB_INT64, .i64 = i64 };
}

#define DB_ARGS(...)                                                               \
	((struct db_args){ .v = (const struct db_value[]){ __VA_ARGS__ },          \
			   .n = sizeof((const struct db_value[]){ __VA_ARGS__ }) / \
				sizeof(struct db_value) })
#define DB_NONE ((struct db_args){ .v = NULL, .n = 0 })

int db_fail(struct store *s, const char *what);
/* Finalize the cached statements: before db is closed. */
void db_stmt_cache_clear(struct store *s);
sqlite3_stmt *db_prepare(struct store *s, const char *sql, struct db_args args);
int db_step(struct store *s, sqlite3_stmt *st);
int db_exec(struct store *s, const char *sql, struct db_args args);
int db_int(struct store *s, int64_t *ret, const char *sql, struct db_args args);
const char *db_col_text(sqlite3_stmt *st, int col);
int db_read_failure_key(sqlite3_stmt *st, int col, struct failure_builder *b);
void db_read_claim(sqlite3_stmt *st, int col, const char *vf, struct store_claim *c);

struct vf_row {
	int64_t id;
	bool quarantined; /* automatically */
	bool held;
	char since[RFC3339_BUFSZ];           /* "" while in service */
	char parent[VF_ADDR_BUFSZ];          /* "" when unknown */
	char suspect_since[RFC3339_BUFSZ];   /* "" when not suspect */
	char probation_since[RFC3339_BUFSZ]; /* "" when not on probation */
};

/* The VF's live suspicion's since, NULL when none: a column of a SELECT
 * FROM vfs. */
#define SUSPECT_SINCE_SQL "(SELECT since FROM suspects WHERE vf_id = vfs.id AND cleared_at IS NULL)"

/* The VF's live probation's since, NULL when none: a column of a SELECT
 * FROM vfs. */
#define PROBATION_SINCE_SQL \
	"(SELECT since FROM probations WHERE vf_id = vfs.id AND cleared_at IS NULL)"

int db_vf_row(struct store *s, const char *addr, struct vf_row *row);

int db_setting(struct store *s, const char *key, int64_t *ret);
/* Set meta's integer setting key to value: 1 when that changed it, 0 when
 * it already held value, -errno. */
int db_setting_put(struct store *s, const char *key, int64_t value);
int db_failure_count(struct store *s, int64_t vf_id, int64_t *ret);
int db_quarantined_count(struct store *s, int64_t *ret);
int db_snapshot(struct store *s, const char *addr, struct vf_snapshot *snap);
/* The same, with the failure keys taken from the mirror plus the rows the
 * batch inserted (rows[n]; nothing else in the batch touched the VF's
 * failures): what db_snapshot would read, without reading every key.
 * -ENOENT when the mirror does not hold the VF (the caller reads it all). */
int db_snapshot_appended(struct store *s, const char *addr, struct op *const *rows, size_t n,
			 struct vf_snapshot *snap);
/* The live claim on a VF into *ret: 1, or 0 when none, or -EIO. */
int db_live_claim(struct store *s, int64_t vf_id, const char *vf, struct store_claim *ret);

/* -- ops.c (inside the batch transaction) ------------------------------------------ */

int ops_exec(struct store *s, struct op *op);
/* Whether an op of the running batch before op ran on op's VF or made a
 * store-wide change (commit.c). */
bool batch_named_before(const struct store *s, const struct op *op);
void op_discard_changes(struct op *op);

/* -- gpus.c ---------------------------------------------------------------------- */

/* mirror_lock held: parent's phase (SERVING for "" or a GPU without a row);
 * whether it refuses new claims and leaves placement. */
enum gpu_phase gpu_phase_locked(const struct store *s, const char *parent);
bool gpu_refuses_claims_locked(const struct store *s, const char *parent);
/* OP_GPU, OP_AUTO_RECOVER inside the batch. */
int gpus_op(struct store *s, struct op *op);
int gpus_op_auto_recover(struct store *s, struct op *op);
/* ops.c, OP_GPU recovered: every VF of op->parent back in service as far
 * as failures go (store.h, store_gpu_recover_end); op->gpu_cleared. */
int ops_recovered_vfs(struct store *s, struct op *op);
/* After the batch (write_lock held): apply its committed drains to the
 * mirror (cannot fail: the ops reserved the room). */
void gpus_apply_batch(struct store *s, struct op *batch, bool committed);
/* write_lock held: load the `gpus` table into the mirror; -EIO with
 * batch_error set for a row this code does not write. */
int gpus_load(struct store *s);
/* ops.c: record a GPU change on the op (store-wide: it names no VF). */
int op_change_gpu(struct op *op);
/* ops.c: record a store-wide change of `bits` on the op. */
int op_change_global(struct op *op, unsigned bits);

/* -- commit.c ------------------------------------------------------------------ */

/* Queue ops and wait until all are durable (or failed); op->rc says. */
void commit_submit(struct store *s, struct op **ops, size_t n);
/* Queue op (heap-allocated, op->answer set) behind the batch under way and
 * return 0: the answerer thread answers it.  -EAGAIN, and nothing queued,
 * when no batch is under way or the committer cannot start: the caller
 * commits with commit_submit(). */
int commit_join(struct store *s, struct op *op);
/* store_close(): commit and answer what is queued, and stop the threads. */
void commit_stop(struct store *s);
/* Call the subscribers (no store lock held). */
void commit_notify(struct store *s, unsigned bits, const char *vf, const char *instance_id);
/* vf's id in the index (takes index_lock's read side); 0 for "" or a VF
 * not registered. */
uint64_t commit_vf_id(struct store *s, const char *vf);
void commit_publish(struct store *s, const struct store_change *change);

/* -- schema.c ------------------------------------------------------------------ */

/* Caller holds write_lock. */
void latch_unavailable(struct store *s, const char *reason);

/* Caller holds write_lock.  0 when the database file and its WAL are still
 * linked and are the files at their paths; else 1 with the reason. */
int files_check(struct store *s, char *reason, size_t reason_size);
/* Caller holds write_lock; files_check() failed with reason: latch, and when
 * only the WAL is gone (the database file is still ours), copy what the WAL
 * holds, every acknowledged commit, into the database file (a checkpoint
 * through the descriptors SQLite still has). */
void files_lost(struct store *s, const char *reason);
/* From the read paths: files_check() at most once per
 * STORE_FILES_CHECK_INTERVAL_NS, and only when no commit holds write_lock
 * (a commit checks them itself); a failure latches and is announced. */
void files_check_due(struct store *s);

/* -- files-watch.c ------------------------------------------------------------- */

/* Callers hold write_lock. */
void files_watch_init(struct files_watch *w);
/* true: nothing resolving path or wal_path depends on changed since the
 * last files_watch_proven(), so the stat check may be skipped (one poll(2)).
 * false: run it; the watch was drained, and (re)armed where it can be. */
bool files_watch_quiet(struct files_watch *w, const char *path, const char *wal_path);
/* The stat check passed after files_watch_quiet() said false. */
void files_watch_proven(struct files_watch *w);
/* The files were (re)opened, or the store closes: forget the watch. */
void files_watch_disarm(struct files_watch *w);

#endif
