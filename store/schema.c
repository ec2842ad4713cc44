/* SPDX-License-Identifier: MIT */
/*
 * schema.c - the store's lifecycle: open (exclusivity, checks, schema),
 * loading the database into the mirror, applying the configured settings,
 * repair, close; and the unavailable latch.  Runs under write_lock
 * (store-internal.h).
 *
 * Design notes
 * ============
 *
 * Exclusivity.  store_open() takes flock(LOCK_EX|LOCK_NB) on PATH "-lock",
 * so a second daemon gets -EBUSY, and also on a descriptor of the database
 * file itself (db_fd), which names the inode: a second daemon given another
 * name or a hard link of the same file gets -EBUSY too.  db_fd stays open
 * until SQLite has closed the file (closing a descriptor of the file would
 * drop SQLite's POSIX locks; flock and POSIX locks do not interact).
 *
 * A lost database is never a new one.  A database is created only when its
 * path does not exist and no mark PATH ".created" says one was created
 * before; the mark (the creation time, fsync'd, and its directory) is
 * written once the schema is committed, and adopted by an unmarked database
 * that opens.  A missing database with a mark, an empty file or a file that
 * is not ours are refused: the store opens unavailable with the reason.
 *
 * A file that is not ours, has a newer schema or fails PRAGMA quick_check is
 * never written: nothing is written before the checks pass.
 *
 * Schema versions.  A new database is created at the current version
 * (SCHEMA_SQL); an older one is brought up by db_migrate(), one transaction
 * per version step (tests/store: migrate_v1_to_v2).  The load reads
 * only the compact failure columns from the covering index (most of the
 * startup time with many failures).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/parse.h"
#include "common/path.h"
#include "common/safefile.h"
#include "store/rules.h"
#include "store/store-internal.h"
/* after store-internal.h: the SQL names its columns and limits */
#include "store/schema-sql.h"

/* -- availability ----------------------------------------------------------- */

void latch_unavailable(struct store *s, const char *reason)
{
	pthread_rwlock_wrlock(&s->mirror_lock);
	copy_string(s->reason, sizeof(s->reason), reason);
	for (char *p = s->reason; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' '; /* one line: it is shown in a status file and logs */
	bool was_available = atomic_exchange(&s->available, false);
	pthread_rwlock_unlock(&s->mirror_lock);
	/* Once per transition: a failed retry keeps the store unavailable
	 * (the open's own failure is the caller's to report). */
	if (was_available)
		log_event(LOG_ERR, LOG_EVENT_STORE_UNAVAILABLE,
			  &(struct log_fields){ .reason = s->reason }, "store: unavailable: %s",
			  s->reason);
}

/* -- the store's files -------------------------------------------------------- */

/* fd, which is held, is what we opened as path: is it still the file there
 * (and so still linked)?  One stat(2) of the path: what fd is was taken
 * when it was opened, and only a file found gone looks at fd again, to say
 * whether it was deleted or moved away.  It fails only when resolving the
 * path gives ENOENT, another inode or an error: what files-watch.c watches
 * to skip it while nothing could have changed. */
static int file_at_path(int fd, const struct file_id *held, const char *path, const char *what,
			char *reason, size_t reason_size)
{
	struct stat now, st;
	bool gone = stat(path, &now) < 0;

	if (gone && errno != ENOENT) {
		snprintf(reason, reason_size, "cannot check the %s %s: %s", what, path,
			 strerror(errno));
		return 1;
	}
	if (!gone && now.st_dev == held->dev && now.st_ino == held->ino)
		return 0;
	bool deleted = gone && fstat(fd, &st) == 0 && st.st_nlink == 0;
	snprintf(reason, reason_size, "the %s %s was %s under the running daemon", what, path,
		 !gone   ? "replaced by another file" :
		 deleted ? "deleted" :
			   "moved away");
	return 1;
}

/* The WAL opened, with what it is (s->wal_id); -1 while there is none. */
static int wal_open(struct store *s)
{
	struct stat st;
	int fd = open(s->wal_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);

	if (fd >= 0 && fstat(fd, &st) < 0) {
		close(fd);
		return -1;
	}
	if (fd >= 0)
		s->wal_id = (struct file_id){ .dev = st.st_dev, .ino = st.st_ino };
	return fd;
}

/* Twice per commit (commit.c): one poll(2) while the watch proves that
 * nothing changed, else the stat(2) of each file, which decides. */
int files_check(struct store *s, char *reason, size_t reason_size)
{
	static const char advice[] = "; nothing more is written to it: restart vfhealthd";
	int r;

	if (s->db_fd < 0)
		return 0; /* not open: the open checks */
	if (files_watch_quiet(&s->watch, s->path, s->wal_path))
		return 0;
	r = file_at_path(s->db_fd, &s->db_id, s->path, "database file", reason, reason_size);
	if (r == 0 && s->wal_fd < 0)
		s->wal_fd = wal_open(s); /* SQLite made it since the open */
	if (r == 0 && s->wal_fd >= 0) {
		r = file_at_path(s->wal_fd, &s->wal_id, s->wal_path, "write-ahead log", reason,
				 reason_size);
		if (r == 0)
			files_watch_proven(&s->watch); /* both files checked */
	}
	if (r)
		strncat(reason, advice, reason_size - strlen(reason) - 1);
	return r;
}

void files_lost(struct store *s, const char *reason)
{
	char ignored[STORE_REASON_MAX];

	latch_unavailable(s, reason);
	if (!s->db || s->db_fd < 0 ||
	    file_at_path(s->db_fd, &s->db_id, s->path, "database file", ignored, sizeof(ignored)) !=
		    0)
		return; /* the database file itself is gone: its WAL stays as it is */
	if (sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL) ==
		    SQLITE_OK &&
	    fdatasync(s->db_fd) == 0)
		log_warn("store: what the write-ahead log held is now in %s", s->path);
	else
		log_err("store: cannot copy the write-ahead log into %s: %s", s->path,
			sqlite3_errmsg(s->db));
}

void files_check_due(struct store *s)
{
	int64_t now = monotonic_ns(), last = atomic_load(&s->files_checked_ns);
	char reason[STORE_REASON_MAX];
	bool lost = false;

	if ((last != 0 && now - last < STORE_FILES_CHECK_INTERVAL_NS) ||
	    !atomic_compare_exchange_strong(&s->files_checked_ns, &last, now))
		return;
	if (pthread_mutex_trylock(&s->write_lock) != 0)
		return; /* a commit runs, and checks them itself */
	if (atomic_load(&s->available) && files_check(s, reason, sizeof(reason)) != 0) {
		files_lost(s, reason);
		lost = true;
	}
	pthread_mutex_unlock(&s->write_lock);
	if (lost)
		commit_notify(s, STORE_CHANGE_STATUS, "", NULL);
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
	_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s,
						     "SELECT vf_id, " FAILURE_KEY_COLUMNS
						     " FROM failures WHERE " FAILURE_LIVE
						     " ORDER BY vf_id",
						     DB_NONE);

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
		if (e && (r = db_read_failure_key(st, 1, &b)) < 0)
			break;
	}
	failure_builder_free(&b);
	for (size_t i = 0; i < li->n; i++) {
		atomic_store(&li->by_addr[i]->failure_count, (unsigned)li->by_addr[i]->n_failures);
		atomic_store(&li->by_addr[i]->suspect, li->by_addr[i]->suspect_since[0] != '\0');
		atomic_store(&li->by_addr[i]->probation,
			     li->by_addr[i]->probation_since[0] != '\0');
	}
	return r;
}

/* Read the whole database.  Returns 0, -EIO (batch_error says why: the
 * content is not what this code writes), or -ENOMEM. */
static int db_load(struct store *s, struct loaded_index *li, int64_t *threshold,
		   int64_t *max_quarantined, int64_t *mode, int64_t *next_claim_id)
{
	int64_t n;
	int r;

	if ((r = db_setting(s, "threshold", threshold)) < 0 ||
	    (r = db_setting(s, "max_quarantined", max_quarantined)) < 0 ||
	    (r = db_setting(s, "mode", mode)) < 0 ||
	    (r = db_int(s, &n, "SELECT COUNT(*) FROM vfs", DB_NONE)) < 0)
		return r;
	/* reservations take their ids ahead of the INSERT: above every id used */
	r = db_int(
		s, next_claim_id,
		"SELECT MAX(COALESCE((SELECT MAX(seq) FROM sqlite_sequence WHERE name = 'claims'), 0),"
		" COALESCE((SELECT MAX(id) FROM claims), 0)) + 1",
		DB_NONE);
	if (r < 0)
		return r;
	if (*threshold < THRESHOLD_MIN || *threshold > THRESHOLD_MAX || *max_quarantined < 0 ||
	    *max_quarantined > VFS_MAX || n > VFS_MAX ||
	    (*mode != STORE_MODE_ENFORCE && *mode != STORE_MODE_OBSERVE)) {
		s->batch_failed = true;
		snprintf(s->batch_error, sizeof(s->batch_error),
			 "database content invalid: threshold %lld, max_quarantined %lld, mode %lld,"
			 " %lld VFs",
			 (long long)*threshold, (long long)*max_quarantined, (long long)*mode,
			 (long long)n);
		return -EIO;
	}
	li->by_addr = calloc(MAX((size_t)n, (size_t)1), sizeof(*li->by_addr));
	li->by_id = calloc(MAX((size_t)n, (size_t)1), sizeof(*li->by_id));
	if (!li->by_addr || !li->by_id)
		return -ENOMEM;
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(
			s,
			"SELECT id, address, quarantined, held, quarantined_at, parent, " SUSPECT_SINCE_SQL
			", " PROBATION_SINCE_SQL " FROM vfs ORDER BY address",
			DB_NONE);
		if (!st)
			return -EIO;
		while ((r = db_step(s, st)) == 1 && li->n < (size_t)n) {
			struct vf_entry *e = calloc(1, sizeof(*e));
			if (!e)
				return -ENOMEM;
			li->by_addr[li->n++] = e;
			e->id = (uint64_t)sqlite3_column_int64(st, 0);
			copy_string(e->addr, sizeof(e->addr), db_col_text(st, 1));
			e->quarantined = sqlite3_column_int(st, 2) != 0;
			e->held = sqlite3_column_int(st, 3) != 0;
			copy_string(e->since, sizeof(e->since), db_col_text(st, 4));
			copy_string(e->suspect_since, sizeof(e->suspect_since), db_col_text(st, 6));
			copy_string(e->probation_since, sizeof(e->probation_since),
				    db_col_text(st, 7));
			const char *parent = db_col_text(st, 5);
			if (!vf_address_valid(e->addr) ||
			    (parent[0] &&
			     (!vf_address_valid(parent) ||
			      rule_parent_set(e->addr, "", parent, &(bool){ false }) < 0))) {
				s->batch_failed = true;
				snprintf(
					s->batch_error, sizeof(s->batch_error),
					"database content invalid: VF address '%s' (parent '%.16s')",
					e->addr, parent);
				return -EIO;
			}
			copy_string(e->parent, sizeof(e->parent), parent);
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
		_cleanup_stmt_ sqlite3_stmt *st =
			db_prepare(s,
				   "SELECT vf_id, " CLAIM_COLUMNS
				   " FROM claims WHERE released_at IS NULL",
				   DB_NONE);
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
			db_read_claim(st, 1, e->addr, e->claim);
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
	int64_t threshold, max_quarantined, mode, next_claim_id = 1;
	int r = db_load(s, &li, &threshold, &max_quarantined, &mode, &next_claim_id);

	if (r == 0)
		r = gpus_load(s);
	if (r < 0) {
		loaded_index_free(&li);
		if (!s->batch_failed) {
			s->batch_failed = true;
			snprintf(s->batch_error, sizeof(s->batch_error), "loading failed: %s",
				 strerror(-r));
		}
		return r;
	}
	mirror_replace(s, li.by_addr, li.by_id, li.n, (int)threshold, (int)max_quarantined,
		       (uint64_t)next_claim_id);
	atomic_store(&s->mode, (int)mode);
	return 0;
}

static const char *const migrations[] = {
	[1] = MIGRATE_V1_V2_SQL, [2] = MIGRATE_V2_V3_SQL, [3] = MIGRATE_V3_V4_SQL,
	[4] = MIGRATE_V4_V5_SQL, [5] = MIGRATE_V5_V6_SQL, [6] = MIGRATE_V6_V7_SQL,
	[7] = MIGRATE_V7_V8_SQL, [8] = MIGRATE_V8_V9_SQL,
};
_Static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "one migration per version");

/* Bring a database of an older version up to STORE_SCHEMA_VERSION, one
 * version (one transaction) at a time.  0, or 1 with the reason set (the
 * failed step rolled back: the file is at the version before it). */
static int db_migrate(struct store *s, int64_t version, char *reason, size_t reason_size)
{
	if (version >= STORE_SCHEMA_VERSION)
		return 0;
	for (int64_t v = version; v < STORE_SCHEMA_VERSION; v++) {
		if (sqlite3_exec(s->db, migrations[v], NULL, NULL, NULL) == SQLITE_OK)
			continue;
		snprintf(reason, reason_size, "cannot migrate %s from schema version %lld: %s",
			 s->path, (long long)v, sqlite3_errmsg(s->db));
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return 1;
	}
	log_info("store: migrated %s from schema version %lld to %d", s->path, (long long)version,
		 STORE_SCHEMA_VERSION);
	return 0;
}

static int render_mark(void *userdata, FILE *out)
{
	char now[RFC3339_BUFSZ];

	rfc3339_now(now);
	fprintf(out, "%s\n", now);
	return 0;
}

/* The mark's first line (the creation time), for a reason; "" if unreadable. */
static void read_mark(const struct store *s, char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen(s->mark_path, "re");

	buf[0] = '\0';
	if (f && fgets(buf, (int)size, f))
		buf[strcspn(buf, "\r\n")] = '\0';
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/* Open and flock the database file, creating it only when neither it nor
 * the mark of an earlier database exists (*created then says so).  Keeps
 * the locked descriptor in s->db_fd; a file already held (same inode) is
 * not opened again.  Returns 0, 1 (refused: reason set) or -EBUSY. */
static int db_file_open(struct store *s, bool *created, char *reason, size_t reason_size)
{
	struct stat st, held;
	int fd;

	*created = false;
	if (stat(s->path, &st) == 0 && s->db_fd >= 0 && fstat(s->db_fd, &held) == 0 &&
	    st.st_dev == held.st_dev && st.st_ino == held.st_ino) {
		fd = s->db_fd; /* still ours and locked */
	} else {
		fd = open(s->path, O_RDWR | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			bool marked = access(s->mark_path, F_OK) == 0;
			if (!marked && errno != ENOENT) {
				snprintf(reason, reason_size, "cannot check %s: %s", s->mark_path,
					 strerror(errno));
				return 1;
			}
			if (marked) {
				char mark[64];

				read_mark(s, mark, sizeof(mark));
				snprintf(reason, reason_size,
					 "the database %s is missing but %s says one was created%s%s;"
					 " refusing to start an empty one (restore the database,"
					 " or remove %s to start afresh)",
					 s->path, s->mark_path, mark[0] ? " at " : "", mark,
					 s->mark_path);
				return 1;
			}
			fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			*created = fd >= 0;
		}
		if (fd < 0) {
			snprintf(reason, reason_size, "cannot open %s: %s", s->path,
				 strerror(errno));
			return 1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int err = errno;
			close(fd);
			snprintf(reason, reason_size, "cannot lock %s: %s", s->path,
				 err == EWOULDBLOCK ?
					 "the file (under this name or another"
					 " name or hard link) is held by another process" :
					 strerror(err));
			return err == EWOULDBLOCK ? -EBUSY : 1;
		}
		/* SQLite is closed here (open_locked), so no lock of it is dropped */
		if (s->db_fd >= 0)
			close(s->db_fd);
		s->db_fd = fd;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		s->db_id = (struct file_id){ 0 };
		snprintf(reason, reason_size, "%s is not a regular file", s->path);
		return 1;
	}
	s->db_id = (struct file_id){ .dev = st.st_dev, .ino = st.st_ino };
	if (!*created && st.st_size == 0) {
		snprintf(reason, reason_size,
			 "%s is empty (0 bytes): not a vfhealth database, and never taken for a new"
			 " one",
			 s->path);
		return 1;
	}
	return 0;
}

/* Undo a creation that did not complete: the file holds nothing of value. */
static void db_file_uncreate(struct store *s)
{
	static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
	struct stat st, held;

	if (s->db_fd < 0 || fstat(s->db_fd, &held) < 0 || stat(s->path, &st) < 0 ||
	    st.st_dev != held.st_dev || st.st_ino != held.st_ino)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
		_cleanup_free_ char *p = NULL;
		if (asprintf(&p, "%s%s", s->path, suffixes[i]) >= 0)
			(void)unlink(p);
	}
}

/* Open the database, check that it is ours, and load it.  Nothing is
 * written before the checks pass, so a foreign or damaged file is never
 * altered.  Returns 0 (opened), 1 (unusable: reason set), -EBUSY, -ENOMEM. */
static int db_open_file(struct store *s, bool created, char *reason, size_t reason_size);

static int db_open(struct store *s, char *reason, size_t reason_size)
{
	bool created;
	int r;

	if (s->lock_fd < 0) {
		/* the directories missing above the database, 0700: the
		 * database is reached only through the daemon */
		if ((r = path_mkdir_parents(s->path, 0700)) < 0) {
			snprintf(reason, reason_size, "cannot create the parent of %s: %s", s->path,
				 strerror(-r));
			return r == -ENOMEM ? r : 1;
		}
		/* Root creates files here (the lock, the mark, SQLite's -wal and
		 * -shm): nobody else may be able to plant names in it. */
		if ((r = safefile_dir_private(s->path)) < 0) {
			snprintf(reason, reason_size,
				 r == -EPERM ?
					 "the directory of %s is writable by group or others, who"
					 " could plant links there; make it writable by its owner"
					 " alone (chmod go-w) or keep the database in a directory"
					 " of its own" :
					 "cannot check the directory of %s: %s",
				 s->path, strerror(-r));
			return r == -ENOMEM ? r : 1;
		}
		int fd = safefile_open(s->lock_path, 0600);
		if (fd < 0) {
			snprintf(reason, reason_size, "cannot open %s: %s%s", s->lock_path,
				 strerror(-fd),
				 fd == -ELOOP  ? " (it is a symbolic link: remove it)" :
				 fd == -EINVAL ? " (not a regular file: remove it)" :
						 "");
			return fd == -ENOMEM ? fd : 1;
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
	/* created with our mode; SQLite gives -wal and -shm the same mode */
	r = db_file_open(s, &created, reason, reason_size);
	if (r != 0)
		return r;
	r = db_open_file(s, created, reason, reason_size);
	if (r != 0 && created) {
		db_stmt_cache_clear(s);
		sqlite3_close_v2(s->db);
		s->db = NULL;
		db_file_uncreate(s);
	}
	return r;
}

/* db_open() once the file is open and locked: created says it is new. */
static int db_open_file(struct store *s, bool created, char *reason, size_t reason_size)
{
	int64_t app_id, version, tables;
	int r;

	r = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
			    s->vfs_name);
	if (r != SQLITE_OK) {
		snprintf(reason, reason_size, "cannot open database: %s",
			 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(r));
		return r == SQLITE_NOMEM ? -ENOMEM : 1;
	}
	sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
	s->batch_failed = false;
	if (db_int(s, &app_id, "PRAGMA application_id", DB_NONE) < 0 ||
	    db_int(s, &version, "PRAGMA user_version", DB_NONE) < 0 ||
	    db_int(s, &tables, "SELECT COUNT(*) FROM sqlite_master", DB_NONE) < 0) {
		snprintf(reason, reason_size, "cannot read database %s: %s", s->path,
			 sqlite3_errmsg(s->db));
		return 1;
	}
	/* only a file this call created is new: anything else must be ours */
	bool fresh = created;
	if (!fresh && app_id != STORE_APPLICATION_ID) {
		snprintf(reason, reason_size,
			 "%s is not a vfhealth database (application_id 0x%08llx, expected 0x%08x)",
			 s->path, (unsigned long long)(uint32_t)app_id, STORE_APPLICATION_ID);
		return 1;
	}
	if (!fresh && (version < 1 || version > STORE_SCHEMA_VERSION)) {
		snprintf(reason, reason_size,
			 "%s has schema version %lld; this vfhealthd supports versions 1 to %d%s",
			 s->path, (long long)version, STORE_SCHEMA_VERSION,
			 version > STORE_SCHEMA_VERSION ? " (written by a newer vfhealthd)" : "");
		return 1;
	}
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s, "PRAGMA quick_check", DB_NONE);
		if (!st || db_step(s, st) != 1) {
			snprintf(reason, reason_size, "quick_check of %s failed: %s", s->path,
				 sqlite3_errmsg(s->db));
			return 1;
		}
		if (strcmp(db_col_text(st, 0), "ok") != 0) {
			snprintf(reason, reason_size, "quick_check of %s failed: %s", s->path,
				 db_col_text(st, 0));
			return 1;
		}
	}
	/* checks passed: from here on we may write */
	{
		_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s, "PRAGMA journal_mode = WAL",
							     DB_NONE);
		if (!st || db_step(s, st) != 1 || strcmp(db_col_text(st, 0), "wal") != 0) {
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
	if (!fresh && db_migrate(s, version, reason, reason_size) != 0)
		return 1;
	/* The mark that this path holds a database: written once the schema is
	 * durable, and adopted by a database created before marks existed. */
	if (created || access(s->mark_path, F_OK) < 0) {
		r = safefile_replace(s->mark_path, 0600, render_mark, NULL);
		if (r < 0 && created) {
			snprintf(reason, reason_size, "cannot write %s: %s", s->mark_path,
				 strerror(-r));
			return 1;
		}
		if (r < 0)
			log_warn("store: cannot write %s: %s", s->mark_path, strerror(-r));
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
		if (s->wal_fd >= 0)
			close(s->wal_fd);
		s->wal_fd = wal_open(s);       /* -1 until SQLite makes it: files_check() retries */
		files_watch_disarm(&s->watch); /* the next check stats the files it holds now */
		atomic_fetch_add(&s->db_generation, 1); /* the listing connection reopens */
		log_info("store: opened %s", s->path);
		return 0;
	}
	db_stmt_cache_clear(s);
	sqlite3_close_v2(s->db);
	s->db = NULL;
	latch_unavailable(s, reason);
	if (r < 0)
		log_err("store: %s", reason); /* store_open() fails: the reason goes nowhere else */
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
	commit_submit(s, ops, n); /* one transaction: the new settings and the re-evaluation */
	for (size_t i = 0; i < n; i++)
		if (ops[i]->rc < 0)
			log_err("store: applying the configured %s failed: %s",
				ops[i] == &threshold_op ? "threshold" : "max_quarantined",
				strerror(-ops[i]->rc));
}

/* Tell the filesystem that everything may have changed (after a reload). */
static void notify_all(struct store *s)
{
	_cleanup_free_ char(*addrs)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 0;

	if (!s->n_subscribers)
		return;
	pthread_rwlock_rdlock(&s->index_lock);
	addrs = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*addrs));
	for (size_t i = 0; addrs && i < s->n_vfs; i++)
		memcpy(addrs[n++], s->by_addr[i]->addr, VF_ADDR_BUFSZ);
	pthread_rwlock_unlock(&s->index_lock);
	commit_notify(s,
		      STORE_CHANGE_STATUS | STORE_CHANGE_VFS | STORE_CHANGE_THRESHOLD |
			      STORE_CHANGE_MAX_QUARANTINED | STORE_CHANGE_BREAKER |
			      STORE_CHANGE_HELD_BACK,
		      "", NULL);
	for (size_t i = 0; i < n; i++)
		commit_notify(s,
			      STORE_CHANGE_FAILURES | STORE_CHANGE_FAILING |
				      STORE_CHANGE_QUARANTINE | STORE_CHANGE_CLAIMS,
			      addrs[i], NULL);
}

int store_repair(struct store *s)
{
	bool recovered = false;

	pthread_mutex_lock(&s->write_lock);
	if (!atomic_load(&s->available)) {
		atomic_fetch_add(&s->repairs, 1);
		if (!atomic_load(&s->loaded) || !s->db) {
			open_locked(s);
		} else {
			/* prove that a write commits, then trust only what is on disk */
			char lost[STORE_REASON_MAX];
			s->batch_failed = false;
			if (files_check(s, lost, sizeof(lost)) != 0) {
				copy_string(s->batch_error, sizeof(s->batch_error), lost);
				s->batch_failed =
					true; /* a commit would go to a file nobody reads */
			} else if (db_exec(s, "BEGIN IMMEDIATE", DB_NONE) == 0 &&
				   db_exec(s,
					   "INSERT INTO meta (key, value) VALUES ('repairs', 1) "
					   "ON CONFLICT (key) DO UPDATE SET value = value + 1",
					   DB_NONE) == 0 &&
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
		log_event(LOG_NOTICE, LOG_EVENT_STORE_AVAILABLE, NULL, "store: available again");
		apply_config(s);
		notify_all(s);
		claims_commit_orphaned(s);
	}
	return atomic_load(&s->available) ? 0 : -EIO;
}

int store_open(const struct store_options *opt, struct store **ret)
{
	if (!opt || !ret || !opt->path || !*opt->path || strlen(opt->path) >= PATH_MAX - 8 ||
	    opt->init_window_ns < 0 ||
	    opt->init_window_ns > (int64_t)INIT_WINDOW_MAX_S * NSEC_PER_SEC)
		return -EINVAL;
	if (opt->threshold != 0 &&
	    (opt->threshold < THRESHOLD_MIN || opt->threshold > THRESHOLD_MAX))
		return -EINVAL;
	if (opt->max_quarantined < -1 || opt->max_quarantined > VFS_MAX)
		return -EINVAL;
	if (opt->vfs_name && !sqlite3_vfs_find(opt->vfs_name))
		return -EINVAL;

	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = -1;
	s->db_fd = -1;
	s->wal_fd = -1;
	files_watch_init(&s->watch);
	s->queue_tail = &s->queue_head;
	s->answers_tail = &s->answers;
	s->cfg_threshold = opt->threshold;
	s->cfg_max_quarantined = opt->max_quarantined;
	s->init_window_ns = opt->init_window_ns;
	pthread_mutex_init(&s->write_lock, NULL);
	pthread_mutex_init(&s->reservation_lock, NULL);
	pthread_rwlock_init(&s->index_lock, NULL);
	pthread_rwlock_init(&s->mirror_lock, NULL);
	pthread_mutex_init(&s->queue_lock, NULL);
	pthread_mutex_init(&s->read_lock, NULL);
	s->path = strdup(opt->path);
	if (asprintf(&s->lock_path, "%s-lock", opt->path) < 0)
		s->lock_path = NULL;
	if (asprintf(&s->mark_path, "%s.created", opt->path) < 0)
		s->mark_path = NULL;
	if (asprintf(&s->wal_path, "%s-wal", opt->path) < 0)
		s->wal_path = NULL;
	s->vfs_name = opt->vfs_name ? strdup(opt->vfs_name) : NULL;
	if (!s->path || !s->lock_path || !s->mark_path || !s->wal_path ||
	    (opt->vfs_name && !s->vfs_name)) {
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
	commit_stop(s);
	/* the reader first: the writer, closing last, checkpoints the WAL */
	sqlite3_close_v2(s->read_db);
	db_stmt_cache_clear(s);
	if (s->db)
		sqlite3_close_v2(s->db);
	if (s->db_fd >= 0)
		close(s->db_fd); /* after SQLite: drops the file's flock */
	if (s->wal_fd >= 0)
		close(s->wal_fd);
	files_watch_disarm(&s->watch);
	if (s->lock_fd >= 0)
		close(s->lock_fd); /* drops the flock */
	mirror_clear(s);
	pthread_mutex_destroy(&s->read_lock);
	pthread_mutex_destroy(&s->queue_lock);
	pthread_rwlock_destroy(&s->mirror_lock);
	pthread_rwlock_destroy(&s->index_lock);
	pthread_mutex_destroy(&s->reservation_lock);
	pthread_mutex_destroy(&s->write_lock);
	free(s->gpus);
	free(s->path);
	free(s->lock_path);
	free(s->mark_path);
	free(s->wal_path);
	free(s->vfs_name);
	free(s);
}

const char *store_engine_version(void)
{
	return sqlite3_libversion();
}
