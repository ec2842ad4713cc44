/* SPDX-License-Identifier: MIT */
/*
 * vffs.c - the FUSE low-level filesystem over the health store (vffs.h,
 * vfhealth(5)).
 *
 * Design notes
 * ------------
 * Threads.
 *  - FUSE workers: libfuse's multi-threaded loop (fuse_session_loop_mt) runs
 *    on its own "loop" thread, which spawns the workers.  Every handler
 *    replies exactly once, touches only the store and this file's in-memory
 *    state, and never waits on the network, a guest or the notifier.
 *  - the notifier (notify.c): sends every kernel notification; its helper
 *    process writes through the mount, so those opens and writes arrive
 *    here, are recognized by the helper's pid (fuse_req_ctx()->pid) and
 *    change nothing.
 *  - the caller's main thread waits for signals (vffs.h).
 *
 * Locks: row 1 of the lock table in docs/architecture.md (the one
 * statement of the order).  Local detail: the handle mutex serializes reads
 * and writes on one open file, so one `cat` sees one snapshot and a write's
 * outcome is read back by the same handle.  The reader budget (budget.h,
 * row 10) is a leaf.
 *
 * Inodes are computed from store ids, stable and never reused, so forget is
 * a no-op and nothing maps inodes in memory:
 *   1                     the root
 *   16 + i                top_files[i]
 *   1<<60 | id<<8 | 0     the directory of the VF with store id `id`
 *   1<<60 | id<<8 | 1+i   vf_files[i] of that VF (assignments/ included)
 *   2<<60 | vf id<<36 | claim id   an assignment file (the VF's id, so
 *                         that resolving it is a search, not a scan)
 * Caching (issue 17).  Attributes are cached long (ATTR_TIMEOUT_S; claims'
 * too: an inode's attributes never change), so default_permissions costs
 * no GETATTR, and listings are readdirplus, so a listing brings every
 * entry's attributes.  Files whose every rendering has the same length
 * (vfile.fixed_size: VF/quarantined) report that size, and a read-only
 * open of one is keep_cache: reads are served from the page cache.  Every
 * other open is direct_io, so every read reaches us: a read at offset 0
 * renders the file afresh (sysfs style) into the handle's snapshot, later
 * offsets are served from that snapshot so one `cat` is consistent (and a
 * page-cached length-varying file would tear).
 * What the kernel caches is made stale only by store changes, and the
 * notifier invalidates every affected page-cached inode (pages and
 * attributes) before the write that made the change is answered: op_write
 * hands its reply to notifier_reply_write() (notify.h), which sends it
 * after the invalidation (at once when none is pending: a read-through
 * file's cached attributes differ only in the mtime, which the toucher's
 * write drops).  No worker waits for the notifier (the notifier may wait
 * for a read a worker serves).  The listings of the root and of a VF
 * directory are cached too (cache_readdir): their entries change only by
 * mkdir and rmdir through the mount, for which the kernel drops the
 * listing itself, and when the store is first loaded, for which the
 * notifier invalidates the root.  assignments/ is listed afresh every
 * time: a claim ends by a write (release=) as well.  Directory operations
 * (mkdir, rmdir, claims) answer at once: nothing page-cached depends on
 * them, their entries are the kernel's own to update, and claims' entries
 * are never cached.
 * What a handle keeps (itself, its snapshot; a directory handle's listing)
 * is charged to the uid that opened it, whoever reads through it (budget.h):
 * past the budget, that open or read gets ENOBUFS.  Each open keeps its own snapshot: the budget bounds
 * them, and a rendered text is at most a VF's failures (about 1 MB).
 * Other regular files report size 0 (procfs): the size is known only by
 * rendering.  Entries are cached for 1 s, negative entries never.
 *
 * Claims (vfhealth(5)): claims.h.  create on assignments/ makes a
 * reservation in the store and answers EBUSY/EEXIST at once; what is written
 * through an open claim file is staged in its handle and committed at FLUSH
 * (close(2) returns the refusal), a bare claim at RELEASE.  A reservation is
 * visible by name from its create on.  Entries of claims are not cached
 * (timeout 0): a claim's name can vanish without an unlink the kernel sees
 * (release=, a cancelled reservation).
 *
 * Shutdown (vffs_stop): stop the notifier while the mount still serves,
 * then fuse_session_exit() and wake the loop thread out of its wait with
 * SIGUSR1 (repeated until it joins, since a signal may land just before the
 * wait), then unmount, which also aborts anything still in flight, then
 * detach from the store (the caller closes it).
 */
#include "fs/vffs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/budget.h"
#include "fs/claims.h"
#include "fs/notify.h"
#include "fs/physfn.h"
#include "store/store.h"
#include "fs/vfiles.h"
#include "grammar/assignment.h"
#include "grammar/message.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/path.h"
#include "common/parse.h"
#include "common/procfs.h"
#include "common/endpoint.h"
#include "common/sockdir.h"

#define INO_ROOT 1
#define INO_TOP_BASE 16
#define INO_KIND_SHIFT 60
#define INO_KIND_VF 1ULL
#define INO_KIND_CLAIM 2ULL
#define INO_ID_MASK ((1ULL << INO_KIND_SHIFT) - 1)
#define INO_CLAIM_ID_BITS 36 /* 2<<60 | vf id<<36 | claim id */
#define INO_CLAIM_VF_BITS (INO_KIND_SHIFT - INO_CLAIM_ID_BITS)
#define VF_SLOT_DIR 0
#define GENERATION 1
#define ENTRY_TIMEOUT_S 1.0
/* Attributes change only with content (mtime, notifier.c) and are
 * invalidated with it, before any write that changed them is answered. */
#define ATTR_TIMEOUT_S 86400.0
/* Regular files report size 0, as procfs does: their size is not known before
 * they are rendered, and a nonzero guess makes tail, wc -c and editors trust
 * it (direct_io reads are not bound by it). */
#define FILE_SIZE 0
#define FILE_BLOCK_SIZE 4096

/* The link every open file and directory has in vffs.open_list. */
struct open_link {
	struct open_link *prev, *next;
	void (*free)(struct vffs *fs, struct open_link *link); /* frees the owner */
};

struct vffs {
	char *mountpoint;
	gid_t group;
	struct metrics *metrics; /* the caller's; passed to the `metrics` renderer */
	struct fuse_args args;
	struct fuse_session *se;
	unsigned max_workers; /* FUSE worker threads at most */
	bool mounted;
	struct store *store; /* the caller's, from vffs_start to vffs_stop */
	struct notifier *notifier;
	struct budget *budget; /* what open files hold (budget.h) */
	/* Every open file and directory, so that those the kernel never
	 * released (the mount went away with them open) are freed at the end.
	 * open_lock is a leaf (row 1 of the lock table covers the handles). */
	pthread_mutex_t open_lock;
	struct open_link *open_list;
	struct timespec start_time;

	void (*status_changed)(void *userdata); /* the caller's status hook (vffs.h) */
	void *status_userdata;

	pthread_t loop_thread;
	bool loop_running;
	atomic_bool stopping;
	atomic_bool unmounted_outside; /* the session ended without vffs_stop() */

	struct sockdirs socket_dirs; /* where claims' socket paths may point */
	struct claims claims;        /* the assignment files (claims.h) */
	char *sysfs_root;            /* where physfn links are read (physfn.h) */
};

enum vnode_kind { VN_ROOT, VN_TOP, VN_VF_DIR, VN_VF_ENTRY, VN_CLAIM };

/* What an inode number names, resolved against the store. */
struct vnode {
	enum vnode_kind kind;
	int index;                 /* VN_TOP, VN_VF_ENTRY */
	struct store_vf_info vf;   /* VN_VF_DIR, VN_VF_ENTRY; VN_CLAIM: only its id */
	struct store_claim claim;  /* VN_CLAIM */
};

/* One open file. */
struct vhandle {
	struct open_link link; /* first: the owner is the link's address */
	pthread_mutex_t lock;
	enum vnode_kind kind;
	int index;
	char vf[VF_ADDR_BUFSZ];
	uint64_t vf_id;
	struct claim_handle claim; /* VN_CLAIM (claims.h) */
	char *snapshot;
	size_t snapshot_len;
	uid_t open_uid;     /* who opened it: charged open_charge and snapshot_len (budget.h) */
	size_t open_charge;
	bool rendered;
	bool append;        /* opened O_APPEND: the kernel picks the offset */
	bool cached;        /* opened keep_cache: reads may be served by the page cache */
	char outcome[VFILE_OUTCOME_MAX];
	bool watched;
	struct notify_watch watch;
};

/* One open directory: the listing rendered by the readdir at offset 0. */
struct dirhandle {
	struct open_link link; /* first: the owner is the link's address */
	pthread_mutex_t lock;
	char *buf;
	size_t size;
	bool plus;       /* buf holds readdirplus entries */
	uid_t open_uid;  /* who opened it: charged sizeof(struct dirhandle) and size (budget.h) */
};

static struct vffs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static bool from_notifier(struct vffs *fs, fuse_req_t req)
{
	pid_t writer = notifier_writer_pid(fs->notifier);

	return writer > 0 && fuse_req_ctx(req)->pid == writer;
}

/* Charge uid for what an open file keeps (budget.h); a spent budget is
 * logged at most once per BUDGET_LOG_INTERVAL_S. */
static int charge(struct vffs *fs, uid_t uid, size_t bytes)
{
	bool uid_spent;
	int r = budget_charge(fs->budget, uid, bytes, &uid_spent);

	if (r == -ENOBUFS && budget_log_due(fs->budget, uid_spent, monotonic_ns())) {
		if (uid_spent)
			log_warn("reader budget of uid %u spent: its open files hold %zu of %d "
				 "bytes; its opens and reads get ENOBUFS until it closes some",
				 (unsigned)uid, budget_held(fs->budget, uid), READER_BUDGET_PER_UID);
		else
			log_warn("reader budget of all users spent: open files of users other "
				 "than root hold %zu of %d bytes; opens and reads by uid %u and "
				 "other non-root users get ENOBUFS until some are closed",
				 budget_total(fs->budget), READER_BUDGET_TOTAL, (unsigned)uid);
	}
	return r;
}

/* -- inodes ------------------------------------------------------------------------- */

static fuse_ino_t ino_vf(uint64_t id, int slot)
{
	return (INO_KIND_VF << INO_KIND_SHIFT) | (id << 8) | (unsigned)slot;
}

/* A claim's VF id in its inode makes its lookup a search, not a scan; a
 * VF id beyond INO_CLAIM_VF_BITS is left out (0) and scanned for. */
static fuse_ino_t ino_claim(uint64_t vf_id, uint64_t id)
{
	if (vf_id >> INO_CLAIM_VF_BITS)
		vf_id = 0;
	return (INO_KIND_CLAIM << INO_KIND_SHIFT) | (vf_id << INO_CLAIM_ID_BITS) |
	       (id & ((1ULL << INO_CLAIM_ID_BITS) - 1));
}

static int vnode_resolve(struct vffs *fs, fuse_ino_t ino, struct vnode *n)
{
	uint64_t kind = ino >> INO_KIND_SHIFT, id;
	int r;

	memset(n, 0, offsetof(struct vnode, claim));
	if (ino == INO_ROOT) {
		n->kind = VN_ROOT;
		return 0;
	}
	if (ino >= INO_TOP_BASE && ino < INO_TOP_BASE + TOP_FILE_COUNT) {
		n->kind = VN_TOP;
		n->index = (int)(ino - INO_TOP_BASE);
		return 0;
	}
	if (kind == INO_KIND_VF) {
		unsigned slot = ino & 0xff;
		id = (ino & INO_ID_MASK) >> 8;
		if (slot > VF_FILE_COUNT)
			return -ENOENT;
		r = store_vf_get_by_id(fs->store, id, &n->vf);
		if (r < 0)
			return r;
		n->kind = slot == VF_SLOT_DIR ? VN_VF_DIR : VN_VF_ENTRY;
		n->index = (int)slot - 1;
		return 0;
	}
	if (kind == INO_KIND_CLAIM) {
		uint64_t vf_id = (ino & INO_ID_MASK) >> INO_CLAIM_ID_BITS;
		id = ino & ((1ULL << INO_CLAIM_ID_BITS) - 1);
		r = store_claim_get_by_id(fs->store, vf_id, id, &n->claim);
		if (r < 0)
			return r;
		n->kind = VN_CLAIM;
		n->vf.id = vf_id;
		return 0;
	}
	return -ENOENT;
}

/* Whether n is a VF's claim directory (assignments/): the one node that is
 * listed from, and takes create, lookup and unlink of, claims. */
static bool vnode_is_claim_dir(const struct vnode *n)
{
	return n->kind == VN_VF_ENTRY && (vf_files[n->index].flags & VFILE_CLAIM_DIR);
}

/* The notify key of a file, false for things that are not notified. */
static bool vnode_key(const struct vnode *n, struct notify_key *key)
{
	memset(key, 0, sizeof(*key));
	if (n->kind == VN_TOP) {
		key->index = n->index;
		return true;
	}
	if (n->kind == VN_VF_ENTRY) {
		snprintf(key->vf, sizeof(key->vf), "%s", n->vf.vf);
		key->index = n->index;
		return true;
	}
	return false;
}

/* The table entry (vfiles.c) of a top-level or per-VF file; NULL for the
 * root, VF directories and claims. */
static const struct vfile *vfile_of(enum vnode_kind kind, int index)
{
	return kind == VN_TOP ? &top_files[index] : kind == VN_VF_ENTRY ? &vf_files[index] : NULL;
}

static void vnode_stat(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct stat *st)
{
	struct notify_key key;
	struct timespec t = fs->start_time;
	const struct vfile *f = NULL;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = 0;
	st->st_gid = fs->group;
	st->st_blksize = FILE_BLOCK_SIZE;
	switch (n->kind) {
	case VN_ROOT:
		st->st_mode = S_IFDIR | 0775;
		st->st_nlink = 2;
		break;
	case VN_VF_DIR:
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 3;
		break;
	case VN_TOP:
		f = &top_files[n->index];
		break;
	case VN_VF_ENTRY:
		f = &vf_files[n->index];
		break;
	case VN_CLAIM:
		st->st_mode = S_IFREG | 0664;
		st->st_nlink = 1;
		st->st_size = FILE_SIZE;
		break;
	}
	if (f && (f->flags & VFILE_DIR)) {
		st->st_mode = S_IFDIR | f->mode;
		st->st_nlink = 2;
	} else if (f) {
		st->st_mode = S_IFREG | f->mode;
		st->st_nlink = 1;
		st->st_size = f->fixed_size ? (off_t)f->fixed_size : FILE_SIZE;
	}
	if (vnode_key(n, &key))
		notifier_mtime(fs->notifier, &key, &t);
	st->st_atim = st->st_mtim = st->st_ctim = t;
}

/* Every inode's attributes are fixed for its life, a claim's too (its
 * inode is the claim: a new claim is a new inode), so each is cached long:
 * an open of an assignment file, whose entry is not cached, costs no
 * GETATTR after its LOOKUP. */
static double attr_timeout(const struct vnode *n)
{
	return ATTR_TIMEOUT_S;
}

static void fill_entry(struct vffs *fs, fuse_ino_t ino, const struct vnode *n,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->generation = GENERATION;
	e->attr_timeout = attr_timeout(n);
	e->entry_timeout = n->kind == VN_CLAIM ? 0 : ENTRY_TIMEOUT_S;
	vnode_stat(fs, ino, n, &e->attr);
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, const struct vnode *n)
{
	struct fuse_entry_param e;

	fill_entry(req_fs(req), ino, n, &e);
	fuse_reply_entry(req, &e);
}

/* -- names: resolved from the store's memory, also while it is unavailable ------------ */

/* A VF directory's name (a path lookup, not a placement decision: see
 * STORE_READ_MEMORY); a name that is no VF address is simply absent. */
static int lookup_vf(struct vffs *fs, const char *vf, struct store_vf_info *ret)
{
	return vf_address_valid(vf) ? store_vf_get(fs->store, vf, STORE_READ_MEMORY, ret) : -ENOENT;
}

/* An assignment file's name under a VF's assignments/. */
static int lookup_claim(struct vffs *fs, const char *vf, const char *instance_id,
			struct store_claim *ret)
{
	if (!instance_id_valid(instance_id))
		return -ENOENT;
	return store_claim_get(fs->store, vf, instance_id, STORE_READ_MEMORY, ret);
}

/* -- lookup and attributes -------------------------------------------------------------- */

/* Resolve ino into *n, or reply with the error and return false: the one
 * place handlers that start from an inode resolve it. */
static bool vnode_get_or_reply(fuse_req_t req, fuse_ino_t ino, struct vnode *n)
{
	int r = vnode_resolve(req_fs(req), ino, n);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return false;
	}
	return true;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* Content is generated: the kernel caches pages only of fixed-size files
	 * opened keep_cache, and attributes, and never writes back; both are
	 * invalidated by the notifier before a write that changed them is
	 * answered (notify.h).  No automatic invalidation (it would trust
	 * mtimes); readdirplus always (a listing brings the attributes); no
	 * atomic O_TRUNC (the kernel would set a cached file's size to 0 at
	 * a writer's open: a SETATTR, answered with the real size, instead). */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC);
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vffs *fs = req_fs(req);
	struct vnode p = { 0 };
	struct vnode child = { 0 };
	fuse_ino_t ino;
	int r, i;

	r = vnode_resolve(fs, parent, &p);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	switch (p.kind) {
	case VN_ROOT:
		i = vfile_find(top_files, TOP_FILE_COUNT, name);
		if (i >= 0) {
			child.kind = VN_TOP;
			child.index = i;
			ino = INO_TOP_BASE + (fuse_ino_t)i;
			break;
		}
		r = lookup_vf(fs, name, &child.vf);
		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
		child.kind = VN_VF_DIR;
		ino = ino_vf(child.vf.id, VF_SLOT_DIR);
		break;
	case VN_VF_DIR:
		i = vfile_find(vf_files, VF_FILE_COUNT, name);
		if (i < 0) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		child.kind = VN_VF_ENTRY;
		child.index = i;
		child.vf = p.vf;
		ino = ino_vf(p.vf.id, 1 + i);
		break;
	case VN_VF_ENTRY:
		if (!vnode_is_claim_dir(&p)) {
			fuse_reply_err(req, ENOTDIR);
			return;
		}
		r = lookup_claim(fs, p.vf.vf, name, &child.claim);
		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
		child.kind = VN_CLAIM;
		child.vf.id = p.vf.id;
		ino = ino_claim(p.vf.id, child.claim.id);
		break;
	default:
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	reply_entry(req, ino, &child);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fuse_reply_none(req); /* inodes are computed; nothing to drop */
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode n;
	struct stat st;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	vnode_stat(fs, ino, &n, &st);
	fuse_reply_attr(req, &st, attr_timeout(&n));
}

/* Whether n is a read-only file (a table entry without a write function). */
static bool vnode_read_only(const struct vnode *n)
{
	const struct vfile *f = vfile_of(n->kind, n->index);

	return f && !(f->flags & VFILE_DIR) && !f->write;
}

/* Ownership and modes are fixed (EPERM).  On a writable file truncation is
 * accepted and ignored so that `echo X > file` (O_TRUNC) works, and times
 * are not settable but `touch` must not fail; a read-only file refuses both
 * with EACCES, even for root, as it refuses opening for writing. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode n;
	struct stat st;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (to_set && vnode_read_only(&n)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	vnode_stat(fs, ino, &n, &st);
	if ((to_set & FUSE_SET_ATTR_SIZE) && S_ISDIR(st.st_mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fuse_reply_attr(req, &st, 0);
}

/* -- directories ------------------------------------------------------------------------- */

struct dirbuf {
	fuse_req_t req;
	struct vffs *fs;
	bool plus; /* readdirplus: entries carry their attributes */
	char *buf;
	size_t size;     /* bytes of entries */
	size_t capacity; /* bytes allocated: grows geometrically, so a listing of
			  * 65,536 VFs is not 65,536 reallocs and copies */
	int error;
};

/* An entry; child: what it names, for readdirplus (NULL for . and ..,
 * which the kernel never looks up from a listing). */
static void dirbuf_add(struct dirbuf *b, const char *name, fuse_ino_t ino, mode_t mode,
		       const struct vnode *child)
{
	struct stat st = { .st_ino = ino, .st_mode = mode };
	struct fuse_entry_param e = { .attr = st };
	size_t old = b->size, len;
	char *grown;

	if (b->error)
		return;
	if (b->plus && child)
		fill_entry(b->fs, ino, child, &e);
	len = b->plus ? fuse_add_direntry_plus(b->req, NULL, 0, name, NULL, 0)
		      : fuse_add_direntry(b->req, NULL, 0, name, NULL, 0);
	if (old + len > b->capacity) {
		size_t capacity = MAX(2 * b->capacity, MAX(old + len, (size_t)4096));

		grown = realloc(b->buf, capacity);
		if (!grown) {
			b->error = -ENOMEM;
			return;
		}
		b->buf = grown;
		b->capacity = capacity;
	}
	b->size = old + len;
	if (b->plus)
		fuse_add_direntry_plus(b->req, b->buf + old, len, name, &e, (off_t)b->size);
	else
		fuse_add_direntry(b->req, b->buf + old, len, name, &st, (off_t)b->size);
}

static int list_directory(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct dirbuf *b)
{
	int r;

	switch (n->kind) {
	case VN_ROOT: {
		_cleanup_free_ struct store_vf_info *vfs = NULL;
		size_t count = 0;

		/* A store that could not even be loaded lists no VFs, but the
		 * top-level files (status says why) must still show. */
		r = store_vf_list(fs->store, &vfs, &count);
		if (r < 0 && r != -EIO)
			return r;
		dirbuf_add(b, ".", ino, S_IFDIR, NULL);
		dirbuf_add(b, "..", INO_ROOT, S_IFDIR, NULL);
		for (int i = 0; i < TOP_FILE_COUNT; i++) {
			struct vnode c = { .kind = VN_TOP, .index = i };
			dirbuf_add(b, top_files[i].name, INO_TOP_BASE + (fuse_ino_t)i, S_IFREG, &c);
		}
		for (size_t i = 0; i < count; i++) {
			struct vnode c = { .kind = VN_VF_DIR, .vf = vfs[i] };
			dirbuf_add(b, vfs[i].vf, ino_vf(vfs[i].id, VF_SLOT_DIR), S_IFDIR, &c);
		}
		return b->error;
	}
	case VN_VF_DIR:
		dirbuf_add(b, ".", ino, S_IFDIR, NULL);
		dirbuf_add(b, "..", INO_ROOT, S_IFDIR, NULL);
		for (int i = 0; i < VF_FILE_COUNT; i++) {
			struct vnode c = { .kind = VN_VF_ENTRY, .index = i, .vf = n->vf };
			dirbuf_add(b, vf_files[i].name, ino_vf(n->vf.id, 1 + i),
				   (vf_files[i].flags & VFILE_DIR) ? S_IFDIR : S_IFREG, &c);
		}
		return b->error;
	case VN_VF_ENTRY: {
		_cleanup_free_ struct store_claim *claims = NULL;
		size_t count = 0;

		if (!vnode_is_claim_dir(n))
			return -ENOTDIR;
		r = store_claim_list(fs->store, n->vf.vf, &claims, &count);
		if (r < 0)
			return r;
		dirbuf_add(b, ".", ino, S_IFDIR, NULL);
		dirbuf_add(b, "..", ino_vf(n->vf.id, VF_SLOT_DIR), S_IFDIR, NULL);
		for (size_t i = 0; i < count; i++) {
			struct vnode c = { .kind = VN_CLAIM, .claim = claims[i] };
			c.vf.id = n->vf.id;
			dirbuf_add(b, claims[i].instance_id, ino_claim(n->vf.id, claims[i].id),
				   S_IFREG, &c);
		}
		return b->error;
	}
	default:
		return -ENOTDIR;
	}
}

static void open_link_add(struct vffs *fs, struct open_link *l,
			  void (*free_fn)(struct vffs *, struct open_link *))
{
	l->free = free_fn;
	pthread_mutex_lock(&fs->open_lock);
	l->prev = NULL;
	l->next = fs->open_list;
	if (l->next)
		l->next->prev = l;
	fs->open_list = l;
	pthread_mutex_unlock(&fs->open_lock);
}

static void open_link_remove(struct vffs *fs, struct open_link *l)
{
	pthread_mutex_lock(&fs->open_lock);
	if (l->prev)
		l->prev->next = l->next;
	else if (fs->open_list == l)
		fs->open_list = l->next;
	if (l->next)
		l->next->prev = l->prev;
	l->prev = l->next = NULL;
	pthread_mutex_unlock(&fs->open_lock);
}

static void dirhandle_free(struct vffs *fs, struct dirhandle *d)
{
	if (!d)
		return;
	open_link_remove(fs, &d->link);
	budget_release(fs->budget, d->open_uid, d->size);
	budget_release(fs->budget, d->open_uid, sizeof(*d));
	pthread_mutex_destroy(&d->lock);
	free(d->buf);
	free(d);
}

static void dirhandle_free_link(struct vffs *fs, struct open_link *l)
{
	dirhandle_free(fs, (struct dirhandle *)l);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vnode n;
	struct dirhandle *d;
	uid_t uid;
	int r;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	if (n.kind == VN_TOP || n.kind == VN_CLAIM ||
	    (n.kind == VN_VF_ENTRY && !vnode_is_claim_dir(&n))) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	uid = fuse_req_ctx(req)->uid;
	r = charge(req_fs(req), uid, sizeof(*d));
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		budget_release(req_fs(req)->budget, uid, sizeof(*d));
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->open_uid = uid;
	open_link_add(req_fs(req), &d->link, dirhandle_free_link);
	fi->fh = (uintptr_t)d;
	/* The root's and a VF directory's entries change only by mkdir and
	 * rmdir through the mount (the kernel drops its cached listing for
	 * those itself) and when the store is first loaded (the notifier
	 * invalidates the root): the kernel may keep their listings.  Claims
	 * come and go by writes: assignments/ is listed afresh every time. */
	fi->cache_readdir = fi->keep_cache = n.kind == VN_ROOT || n.kind == VN_VF_DIR;
	if (fuse_reply_open(req, fi) < 0)
		dirhandle_free(req_fs(req), d);
}

/* Copy buf[off, off + size) clipped to len into a fresh allocation, so the
 * caller can reply after unlocking: a release may free buf as soon as the
 * kernel has the reply.  *ret is NULL and *ret_len 0 past the end. */
static int copy_window(const char *buf, size_t len, off_t off, size_t size, char **ret,
		       size_t *ret_len)
{
	*ret = NULL;
	*ret_len = 0;
	if (off < 0 || (size_t)off >= len)
		return 0;
	*ret_len = MIN(len - (size_t)off, size);
	*ret = malloc(*ret_len);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, buf + off, *ret_len);
	return 0;
}

/* READDIR and READDIRPLUS: the kernel uses one or the other for an open
 * directory (plus always: readdirplus is not "auto"); a listing taken for
 * one is never served to the other. */
static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct vffs *fs = req_fs(req);
	struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *reply = NULL;
	size_t len = 0;

	pthread_mutex_lock(&d->lock);
	if (off == 0 || !d->buf || d->plus != plus) {
		/* A listing from the start: take it afresh. */
		struct vnode n = { 0 };
		struct dirbuf b = { .req = req, .fs = fs, .plus = plus };
		int r = vnode_resolve(fs, ino, &n);

		if (r == 0)
			r = list_directory(fs, ino, &n, &b);
		if (r == 0)
			r = charge(fs, d->open_uid, b.size); /* the opener's, whoever reads */
		if (r < 0) {
			free(b.buf);
			pthread_mutex_unlock(&d->lock);
			fuse_reply_err(req, -r);
			return;
		}
		budget_release(fs->budget, d->open_uid, d->size);
		free(d->buf);
		d->buf = b.buf;
		d->size = b.size;
		d->plus = plus;
	}
	int r = copy_window(d->buf, d->size, off, size, &reply, &len);
	pthread_mutex_unlock(&d->lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, reply, len);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	dirhandle_free(req_fs(req), (struct dirhandle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* -- files ------------------------------------------------------------------------------- */

static void handle_free(struct vffs *fs, struct vhandle *h)
{
	if (!h)
		return;
	open_link_remove(fs, &h->link);
	if (h->kind == VN_CLAIM)
		claim_handle_free(&h->claim);
	if (h->watched)
		notifier_watch_remove(fs->notifier, &h->watch);
	budget_release(fs->budget, h->open_uid, h->snapshot_len);
	budget_release(fs->budget, h->open_uid, h->open_charge);
	pthread_mutex_destroy(&h->lock);
	free(h->snapshot);
	free(h);
}

static void handle_free_link(struct vffs *fs, struct open_link *l)
{
	handle_free(fs, (struct vhandle *)l);
}

static struct vhandle *handle_new(struct vffs *fs, const struct vnode *n, bool created,
				  const struct fuse_ctx *ctx)
{
	struct vhandle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	open_link_add(fs, &h->link, handle_free_link);
	h->kind = n->kind;
	h->index = n->index;
	if (n->kind == VN_CLAIM) {
		snprintf(h->vf, sizeof(h->vf), "%s", n->claim.vf);
		claim_handle_init(&h->claim, &n->claim, n->vf.id, created, ctx->uid, ctx->pid);
	} else if (n->kind == VN_VF_ENTRY) {
		snprintf(h->vf, sizeof(h->vf), "%s", n->vf.vf);
		h->vf_id = n->vf.id;
	}
	if (vnode_key(n, &h->watch.key)) {
		const struct vfile *f = vfile_of(n->kind, n->index);
		if (f && (f->flags & VFILE_NOTIFY) && notifier_watch_add(fs->notifier, &h->watch) == 0)
			h->watched = true;
	}
	return h;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode n;
	const struct vfile *f = NULL;
	struct vhandle *h;
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	uid_t uid = fuse_req_ctx(req)->uid;
	size_t open_charge;
	int r;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	f = vfile_of(n.kind, n.index);
	if (n.kind == VN_ROOT || n.kind == VN_VF_DIR || (f && (f->flags & VFILE_DIR))) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* Like sysfs: even root cannot open a read-only attribute for writing;
	 * only the notifier's ignored one-byte writes get through. */
	if (writing && f && !f->write && !from_notifier(fs, req)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	/* What the handle itself keeps is charged too, so that opens that never
	 * read are bounded as well; the notifier's opens are not (budget.h). */
	open_charge = from_notifier(fs, req) ? 0 : sizeof(*h);
	/* a claim open for writing may stage up to a whole claim (claims.h) */
	if (open_charge && n.kind == VN_CLAIM && writing)
		open_charge += ASSIGNMENT_FILE_MAX;
	r = charge(fs, uid, open_charge);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	h = handle_new(fs, &n, false, fuse_req_ctx(req));
	if (!h) {
		budget_release(fs->budget, uid, open_charge);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->open_uid = uid;
	h->open_charge = open_charge;
	h->append = (fi->flags & O_APPEND) != 0;
	/* A fixed-size file opened for reading only is served from the page
	 * cache, kept across opens: the notifier invalidates it before any
	 * write that changed it is answered (notify.h).  Everything else reads
	 * through to us: writers, the report outcome, claims, and files whose
	 * length varies (they would tear).  While the store is unavailable
	 * nothing is opened cached, and the open drops the cached pages (no
	 * keep_cache): the read reaches us and fails closed. */
	h->cached = !writing && f && vfile_page_cached(f) &&
		    !from_notifier(fs, req) && store_status(fs->store, NULL, 0);
	fi->fh = (uintptr_t)h;
	fi->direct_io = !h->cached;
	/* Only a claim opened for writing acts on close (claims.h): no other
	 * close costs a FLUSH round trip. */
	fi->noflush = !(n.kind == VN_CLAIM && writing);
	fi->keep_cache = h->cached;
	if (fuse_reply_open(req, fi) < 0)
		handle_free(fs, h); /* interrupted: no release will come */
}

/* Whether the requester may write the writable files (what
 * default_permissions grants on 0664 root:group files): uid 0, or the
 * writers' group as its group or a supplementary one (read from /proc). */
static bool requester_may_write(struct vffs *fs, fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[64];
	int n;

	if (ctx->uid == 0 || ctx->gid == fs->group)
		return true;
	n = fuse_req_getgroups(req, (int)ARRAY_SIZE(groups), groups);
	for (int i = 0; i < n && i < (int)ARRAY_SIZE(groups); i++)
		if (groups[i] == fs->group)
			return true;
	return false; /* also when there are more groups than we look at: fail closed */
}

/* The one place that decides whether a read may repair the store: a read
 * at offset 0 of a placement-facing file (VFILE_PLACEMENT) by a requester
 * who may write renders with STORE_READ_RETRY (an unavailable store is
 * retried: store_retry_for_read, at most once a second for the whole
 * store); every other render reads STORE_READ_NORETRY (vfiles.h), so no
 * other read, whoever makes it, ever repairs
 * (tests/adversarial/repair-rights.sh). */
static enum store_read read_may_repair(struct vffs *fs, fuse_req_t req, const struct vhandle *h)
{
	const struct vfile *f = vfile_of(h->kind, h->index);

	if (f && (f->flags & VFILE_PLACEMENT) && fs->store && !store_status(fs->store, NULL, 0) &&
	    requester_may_write(fs, req))
		return STORE_READ_RETRY;
	return STORE_READ_NORETRY;
}

/* Render the handle's file into its snapshot, charged to the uid that
 * opened the handle, whoever reads through it (budget.h): a descriptor
 * passed to another process keeps costing its opener. */
static int handle_render(struct vffs *fs, struct vhandle *h, enum store_read read)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *out;
	int r = 0;
	struct vfile_call call = {
		.store = fs->store, .metrics = fs->metrics, .vf = h->vf, .vf_id = h->vf_id,
		.read = read,
	};

	if (h->watched)
		notifier_seen(fs->notifier, &h->watch); /* before reading the state */
	out = open_memstream(&buf, &len);
	if (!out)
		return -ENOMEM;
	switch (h->kind) {
	case VN_TOP:
		r = top_files[h->index].render(&call, out);
		break;
	case VN_VF_ENTRY:
		if (vf_files[h->index].flags & VFILE_OUTCOME) {
			if (h->outcome[0])
				fprintf(out, "%s\n", h->outcome);
		} else if (vf_files[h->index].render) {
			r = vf_files[h->index].render(&call, out);
		}
		break;
	case VN_CLAIM:
		r = claims_render(&fs->claims, &h->claim, out);
		break;
	default:
		r = -EISDIR;
	}
	if (fclose(out) != 0 && r == 0)
		r = -ENOMEM;
	if (r == 0)
		r = charge(fs, h->open_uid, len);
	if (r < 0)
		return r;
	budget_release(fs->budget, h->open_uid, h->snapshot_len);
	free(h->snapshot);
	h->snapshot = move_ptr(buf);
	h->snapshot_len = len;
	h->rendered = true;
	return 0;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *reply = NULL;
	size_t len = 0;
	int r = 0;

	pthread_mutex_lock(&h->lock);
	if (off == 0 || !h->rendered) {
		r = handle_render(fs, h, read_may_repair(fs, req, h));
	}
	if (r == 0)
		r = copy_window(h->snapshot, h->snapshot_len, off, size, &reply, &len);
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, reply, len);
}

/* A refused write or claim, once, at info: what, who, and which rule it broke. */
static void log_refused(fuse_req_t req, const char *what, const char *file, const char *why)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	log_info("%s %s refused (uid %u, pid %d): %s", what, file, (unsigned)ctx->uid,
		 (int)ctx->pid, why);
}

/* A change made through the files (a write, a claim, a release), once, at
 * notice for the operator's files and info for reports and claims: who
 * (uid, pid: the writing thread as FUSE names it) and the command under
 * the message rule (message.h: one line, valid UTF-8). */
static void log_accepted_by(uid_t uid, pid_t pid, int level, const char *what,
			    const char *file, const char *command)
{
	char shown[VFILE_COMMAND_MAX + 1];
	size_t n = message_sanitize_to(command, shown, sizeof(shown));

	log_msg(level, "%s %s accepted (uid %u, pid %d)%s%s", what, file, (unsigned)uid, (int)pid,
		n ? ": " : "", shown);
}

static void log_accepted(fuse_req_t req, int level, const char *what, const char *file,
			 const char *command)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	log_accepted_by(ctx->uid, ctx->pid, level, what, file, command);
}

/* The path of h's file under the mountpoint, for the log. */
static const char *handle_path(const struct vhandle *h, char *buf, size_t size)
{
	switch (h->kind) {
	case VN_TOP:
		return top_files[h->index].name;
	case VN_VF_ENTRY:
		snprintf(buf, size, "%s/%s", h->vf, vf_files[h->index].name);
		return buf;
	case VN_CLAIM:
		snprintf(buf, size, "%s/assignments/%s", h->vf, h->claim.instance_id);
		return buf;
	default:
		return "?";
	}
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *command = NULL;
	const char *why = NULL;
	char path[VF_ADDR_BUFSZ + INSTANCE_ID_MAX + 32];
	size_t len = size;
	bool unchanged = false;
	int r = -EINVAL;

	if (from_notifier(fs, req)) {
		/* The notifier's byte: it only makes the kernel emit inotify events. */
		fuse_reply_write(req, size);
		return;
	}
	if (h->kind == VN_CLAIM) {
		/* staged whole (claims.h): committed at FLUSH, logged there */
		pthread_mutex_lock(&h->lock);
		r = claims_write(&fs->claims, &h->claim, buf, size, (uint64_t)off, h->append,
				 fuse_req_ctx(req)->uid, fuse_req_ctx(req)->pid, &why);
		pthread_mutex_unlock(&h->lock);
		if (r < 0 && why)
			log_refused(req, "write to", handle_path(h, path, sizeof(path)), why);
		if (r < 0)
			fuse_reply_err(req, -r);
		else
			notifier_reply_write(fs->notifier, req, size);
		return;
	}
	/* One write(2) at offset 0 is one whole command.  `echo X >> file`
	 * (O_APPEND) cannot choose its offset: there every write is one. */
	if ((off != 0 && !h->append) || size == 0 || size > VFILE_COMMAND_MAX ||
	    memchr(buf, '\0', size)) {
		why = size > VFILE_COMMAND_MAX ? "a command is at most " PARSE_STR(VFILE_COMMAND_MAX) " bytes"
		      : size == 0 || memchr(buf, '\0', size) ? "a command is text without NUL bytes"
							     : "a command is one write(2) at offset 0";
		r = -EINVAL;
		goto out;
	}
	command = malloc(size + 1);
	if (!command) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(command, buf, size);
	command[size] = '\0';
	strip_trailing_newline(command, &len);

	pthread_mutex_lock(&h->lock);
	struct vfile_call call = {
		.store = fs->store, .metrics = fs->metrics, .vf = h->vf, .vf_id = h->vf_id,
		.outcome = h->outcome, .why = &why, .uid = fuse_req_ctx(req)->uid,
		.unchanged = &unchanged,
	};
	switch (h->kind) {
	case VN_TOP:
	case VN_VF_ENTRY: {
		const struct vfile *f = vfile_of(h->kind, h->index);
		if (h->kind == VN_VF_ENTRY)
			h->outcome[0] = '\0'; /* a refused report leaves no outcome */
		r = f && f->write ? f->write(&call, command) : -EACCES;
		break;
	}
	default:
		r = -EISDIR;
	}
	pthread_mutex_unlock(&h->lock);
out:
	if (r < 0 && why)
		log_refused(req, "write to", handle_path(h, path, sizeof(path)), why);
	/* the operator's files at notice; reports (VFILE_OUTCOME) and claims at info */
	if (r == 0 && !unchanged)
		log_accepted(req,
			     (h->kind == VN_VF_ENTRY && (vf_files[h->index].flags & VFILE_OUTCOME))
				     ? LOG_INFO
				     : LOG_NOTICE,
			     "write to", handle_path(h, path, sizeof(path)), command);
	/* An accepted write is answered through the notifier, once what any
	 * change queued so far affects in the page cache is invalidated
	 * (notify.h; the ordering rule of docs/architecture.md;
	 * tests/fs/test-freshness.sh).  Every accepted write goes that way, so
	 * that no shortcut can skip the rule. */
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		notifier_reply_write(fs->notifier, req, size);
}

/* Every close(2) of a descriptor: a claim commits what was written through
 * it, and close(2) returns the refusal (claims.h). */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	int r = 0;

	if (h->kind == VN_CLAIM) {
		pthread_mutex_lock(&h->lock);
		r = claims_flush(&req_fs(req)->claims, &h->claim);
		pthread_mutex_unlock(&h->lock);
	}
	fuse_reply_err(req, -r);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;

	/* A bare claim (created, closed without a write) commits here, not at
	 * FLUSH, which a shell's redirection sends before it writes. */
	if (h->kind == VN_CLAIM)
		claims_release(&req_fs(req)->claims, &h->claim);
	handle_free(req_fs(req), h);
	fuse_reply_err(req, 0);
}

static void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;

	if (!h->watched) {
		/* Never changes on its own (report, assignments, metrics): always readable. */
		if (ph)
			fuse_pollhandle_destroy(ph);
		fuse_reply_poll(req, POLLIN | POLLRDNORM);
		return;
	}
	/* A page-cached handle's re-read may never reach us: report once. */
	fuse_reply_poll(req, notifier_poll(fs->notifier, &h->watch, ph, h->cached));
}

/* -- creating and removing ---------------------------------------------------------------- */

/* Claim <vf>/assignments/<name>, or only reserve it (create: see
 * claims.h).  Only assignments/ takes new files. */
static int make_claim(struct vffs *fs, fuse_ino_t parent, const char *name, bool reserve,
		      struct vnode *child)
{
	struct vnode p = { 0 };
	int r;

	r = vnode_resolve(fs, parent, &p);
	if (r < 0)
		return r;
	if (!vnode_is_claim_dir(&p))
		return -EACCES;
	r = claims_make(&fs->claims, &p.vf, name, reserve, &child->claim);
	if (r < 0)
		return r;
	memset(child, 0, offsetof(struct vnode, claim));
	child->kind = VN_CLAIM;
	child->vf.id = p.vf.id;
	return 0;
}

/* make_claim() for a create or a mknod; a refusal is answered here (and a
 * name the grammar refuses logged with its rule). */
static bool make_claim_or_reply(fuse_req_t req, fuse_ino_t parent, const char *name,
				bool reserve, struct vnode *child)
{
	int r = make_claim(req_fs(req), parent, name, reserve, child);

	if (r == -EINVAL && !instance_id_valid(name))
		log_refused(req, "claim", name, INSTANCE_ID_RULE);
	if (r < 0)
		fuse_reply_err(req, -r);
	return r == 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode child = { 0 };
	struct fuse_entry_param e;
	struct vhandle *h;

	if (!make_claim_or_reply(req, parent, name, true, &child))
		return;
	h = handle_new(fs, &child, true, fuse_req_ctx(req));
	if (!h) {
		/* The caller sees a failure: do not leave the reservation behind. */
		store_claim_cancel(fs->store, child.claim.vf, child.claim.id);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino_claim(child.vf.id, child.claim.id);
	e.generation = GENERATION;
	e.entry_timeout = 0; /* a cancelled reservation must leave no dentry */
	vnode_stat(fs, e.ino, &child, &e.attr);
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) < 0) {
		store_claim_cancel(fs->store, child.claim.vf, child.claim.id);
		handle_free(fs, h);
	}
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct vnode child = { 0 };

	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!make_claim_or_reply(req, parent, name, false, &child))
		return;
	log_accepted(req, LOG_INFO, "claim", name, NULL);
	reply_entry(req, ino_claim(child.vf.id, child.claim.id), &child);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vffs *fs = req_fs(req);
	struct vnode p = { 0 };
	int r;

	r = vnode_resolve(fs, parent, &p);
	if (r == 0 && !vnode_is_claim_dir(&p))
		r = -EPERM; /* only claims can be removed */
	if (r == 0) {
		r = store_release(fs->store, p.vf.vf, name,
				  &(struct store_release_opts){ .uid = fuse_req_ctx(req)->uid });
		if (r == 0) {
			char path[VF_ADDR_BUFSZ + INSTANCE_ID_MAX + 32];

			snprintf(path, sizeof(path), "%s/assignments/%s", p.vf.vf, name);
			log_accepted(req, LOG_INFO, "release of", path, NULL);
		}
	}
	fuse_reply_err(req, -r);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct vffs *fs = req_fs(req);
	struct vnode child = { 0 };
	int r;

	if (parent != INO_ROOT) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (vfile_find(top_files, TOP_FILE_COUNT, name) >= 0) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	/* The parent GPU, when sysfs knows it; else VF/parent is written later. */
	char gpu[VF_ADDR_BUFSZ];
	r = physfn_read(fs->sysfs_root, name, gpu);
	if (r < 0 && r != -ENOENT && vf_address_valid(name))
		log_warn("%s: parent GPU unknown: %s/bus/pci/devices/%s/physfn: %s", name,
			 fs->sysfs_root, name, strerror(-r));
	r = store_vf_register(fs->store, name, gpu);
	if (r == 0)
		r = store_vf_get(fs->store, name, STORE_READ_MEMORY, &child.vf);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (gpu[0])
		log_info("%s: registered (parent GPU %s)", name, gpu);
	else
		log_info("%s: registered", name);
	child.kind = VN_VF_DIR;
	reply_entry(req, ino_vf(child.vf.id, VF_SLOT_DIR), &child);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct vffs *fs = req_fs(req);
	int r;

	if (parent != INO_ROOT) {
		fuse_reply_err(req, EPERM); /* assignments/ belongs to its VF */
		return;
	}
	struct store_vf_info gone;
	bool known = lookup_vf(fs, name, &gone) == 0;

	r = store_vf_unregister(fs->store, name);
	if (r == 0 && known) {
		/* A descriptor held open on its files keeps their inodes, which
		 * the notifier no longer finds by name: drop their pages and
		 * attributes by number (never from this worker, see notify.h). */
		for (int i = 0; i < VF_FILE_COUNT; i++)
			if (vfile_page_cached(&vf_files[i]))
				notifier_invalidate_inode(fs->notifier, ino_vf(gone.id, 1 + i));
	}
	if (r == 0)
		log_info("%s: unregistered", name);
	else if (r == -EBUSY)
		log_warn("%s: not unregistered: quarantined, tallied or claimed", name);
	fuse_reply_err(req, -r);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EPERM);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EPERM);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops vffs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.poll = op_poll,
	.create = op_create,
	.mknod = op_mknod,
	.unlink = op_unlink,
	.mkdir = op_mkdir,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.link = op_link,
	.symlink = op_symlink,
};

/* -- life cycle ------------------------------------------------------------------------------ */

const char *vffs_mountpoint(const struct vffs *fs)
{
	return fs->mountpoint;
}

static int mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *copy = strdup(path);

	if (!copy)
		return -ENOMEM;
	for (char *p = copy + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, mode) < 0 && errno != EEXIST)
			return negative_errno();
		*p = '/';
	}
	if (mkdir(copy, mode) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

int vffs_new(const struct vffs_options *opt, struct vffs **ret)
{
	_cleanup_free_ char *mount_opts = NULL;
	struct vffs *fs;
	int r = -ENOMEM;

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	pthread_mutex_init(&fs->open_lock, NULL);
	if (budget_new(READER_BUDGET_TOTAL, READER_BUDGET_PER_UID, &fs->budget) < 0)
		goto fail;
	clock_gettime(CLOCK_REALTIME, &fs->start_time);
	fs->group = opt->group;
	fs->metrics = opt->metrics;
	fs->max_workers = opt->max_workers ? MIN(opt->max_workers, (unsigned)VFFS_MAX_WORKERS_MAX)
					   : VFFS_MAX_WORKERS_DEFAULT;
	fs->status_changed = opt->status_changed;
	fs->status_userdata = opt->status_userdata;
	fs->claims.socket_dirs = &fs->socket_dirs;
	if (opt->socket_dirs)
		fs->socket_dirs = *opt->socket_dirs;
	else
		sockdirs_init_default(&fs->socket_dirs);
	fs->mountpoint = path_absolute(opt->mountpoint ? opt->mountpoint : VFFS_DEFAULT_MOUNTPOINT);
	fs->sysfs_root = strdup(opt->sysfs_root ? opt->sysfs_root : PHYSFN_DEFAULT_SYSFS_ROOT);
	if (!fs->mountpoint || !fs->sysfs_root)
		goto fail;
	if (asprintf(&mount_opts, "allow_other,default_permissions,fsname=vfhealth,subtype=vfhealth%s%s",
		     opt->fuse_options ? "," : "", opt->fuse_options ? opt->fuse_options : "") < 0) {
		mount_opts = NULL;
		goto fail;
	}
	if (fuse_opt_add_arg(&fs->args, "vfhealthd") || fuse_opt_add_arg(&fs->args, "-o") ||
	    fuse_opt_add_arg(&fs->args, mount_opts) ||
	    (opt->debug && fuse_opt_add_arg(&fs->args, "-d")))
		goto fail;
	fs->se = fuse_session_new(&fs->args, &vffs_ops, sizeof(vffs_ops), fs);
	if (!fs->se) {
		log_err("invalid FUSE options: %s", mount_opts);
		r = -EINVAL;
		goto fail;
	}
	*ret = fs;
	return 0;

fail:
	vffs_free(fs);
	return r;
}

/* Whether this process may mount: CAP_SYS_ADMIN in its effective set. */
static bool can_mount(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (syscall(SYS_capget, &hdr, data) < 0)
		return geteuid() == 0;
	return data[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32));
}

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void mountinfo_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* The file system type of the topmost mount at path (/proc/self/mountinfo),
 * "" when nothing is mounted there. */
static int mounted_type(const char *path, char *type, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;

	type[0] = '\0';
	if (!f)
		return negative_errno();
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ... */
		char *save = NULL, *mountpoint = NULL, *fstype = NULL;
		int i = 0;

		for (char *w = strtok_r(line, " \n", &save); w; w = strtok_r(NULL, " \n", &save), i++) {
			if (i == 4)
				mountpoint = w;
			if (i >= 6 && strcmp(w, "-") == 0) {
				fstype = strtok_r(NULL, " \n", &save);
				break;
			}
		}
		if (!mountpoint || !fstype)
			continue;
		mountinfo_unescape(mountpoint);
		if (strcmp(mountpoint, path) == 0)
			snprintf(type, size, "%s", fstype); /* later lines are mounted on top */
	}
	return 0;
}

/* Does the mount at path answer?  0 yes, -ENOTCONN dead (its daemon is
 * gone), -ETIMEDOUT no answer within the deadline (a daemon alive but
 * stuck), else the errno statfs gave.  Asked from a child process, which a
 * stuck daemon cannot hang: it is killed at the deadline. */
#define PROBE_TIMEOUT_MS 5000
static int probe_mount(const char *path)
{
	int pipefd[2], err = ETIMEDOUT;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return negative_errno();
	pid = fork();
	if (pid < 0) {
		err = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return -err;
	}
	if (pid == 0) {
		struct statfs sf;
		int e = statfs(path, &sf) < 0 ? errno : 0;

		_exit(write(pipefd[1], &e, sizeof(e)) == sizeof(e) ? 0 : 1);
	}
	close(pipefd[1]);
	struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
	int n;
	do
		n = poll(&pfd, 1, PROBE_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n <= 0 || read(pipefd[0], &err, sizeof(err)) != sizeof(err))
		err = ETIMEDOUT;
	close(pipefd[0]);
	if (err == ETIMEDOUT)
		kill(pid, SIGKILL); /* FUSE requests are killable */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return -err;
}

/* Never mount over a live vfhealth mount (placement would see this new,
 * empty one and the old one's state would be hidden: fail open); detach a
 * dead FUSE mount (a crashed instance leaves its mount behind: every access
 * fails with ENOTCONN until it is detached).  Anything else mounted there is
 * mounted over, as mount(8) would. */
static int clear_mountpoint(struct vffs *fs)
{
	for (int round = 0; round < 8; round++) {
		char type[64];
		int r = mounted_type(fs->mountpoint, type, sizeof(type));

		if (r < 0) {
			log_err("cannot read /proc/self/mountinfo: %s", strerror(-r));
			return r;
		}
		if (strncmp(type, "fuse", 4) != 0)
			return 0; /* nothing, or no FUSE mount: nothing can be dead */
		r = probe_mount(fs->mountpoint);
		if (r != -ENOTCONN) {
			if (strcmp(type, "fuse.vfhealth") != 0)
				return 0; /* another file system's live mount */
			log_err("refusing to mount on %s: a live vfhealth mount is there (%s); "
				"another vfhealthd serves it",
				fs->mountpoint,
				r == 0 ? "it answers" : r == -ETIMEDOUT ? "it does not answer" : strerror(-r));
			return -EBUSY;
		}
		if (umount2(fs->mountpoint, MNT_DETACH) < 0) {
			r = negative_errno();
			log_err("cannot detach the stale mount on %s: %s", fs->mountpoint, strerror(-r));
			return r;
		}
		log_warn("detached a stale mount on %s (%s, not connected) left by a previous "
			 "instance", fs->mountpoint, type);
	}
	log_err("refusing to mount on %s: too many stale mounts stacked there", fs->mountpoint);
	return -EBUSY;
}

int vffs_mount(struct vffs *fs)
{
	int r;

	r = clear_mountpoint(fs);
	if (r < 0)
		return r;
	r = mkdir_p(fs->mountpoint, 0755);
	if (r < 0) {
		log_err("cannot create mountpoint %s: %s", fs->mountpoint, strerror(-r));
		return r;
	}
	if (fuse_session_mount(fs->se, fs->mountpoint) != 0) {
		/* libfuse said what failed (often "failed to open /dev/fuse:
		 * Permission denied"); say what to do about the usual cause. */
		if (!can_mount())
			log_err("cannot mount on %s: run vfhealthd as root (mounting needs "
				"CAP_SYS_ADMIN and access to /dev/fuse)",
				fs->mountpoint);
		else
			log_err("cannot mount on %s", fs->mountpoint);
		return -EIO;
	}
	fs->mounted = true;
	log_info("mounted on %s", fs->mountpoint);
	return 0;
}

static void wake_signal_handler(int sig)
{
	/* Only interrupts the loop thread's wait; see vffs_stop(). */
}

static void *loop_main(void *arg)
{
	struct vffs *fs = arg;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	sigset_t wake;
	int r;

	sigemptyset(&wake);
	sigaddset(&wake, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
	if (!cfg) {
		log_err("out of memory starting the FUSE loop");
		kill(getpid(), SIGTERM);
		return NULL;
	}
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	fuse_loop_cfg_set_max_threads(cfg, fs->max_workers);
	r = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	if (!atomic_load(&fs->stopping)) {
		/* Unmounted from outside (fusermount -u): end the daemon too; the
		 * caller asks vffs_unmounted_outside() and logs it. */
		log_debug("the FUSE session ended on its own (%d)", r);
		atomic_store(&fs->unmounted_outside, true);
		kill(getpid(), SIGTERM);
	}
	return NULL;
}

bool vffs_unmounted_outside(const struct vffs *fs)
{
	return fs && atomic_load(&fs->unmounted_outside);
}

/* The inode of a notified file (notify.h): the scheme atop this file. */
static fuse_ino_t notify_inode(void *userdata, const struct notify_key *key)
{
	struct vffs *fs = userdata;
	struct store_vf_info vf;

	if (!key->vf[0])
		return INO_TOP_BASE + (fuse_ino_t)key->index;
	if (store_vf_get(fs->store, key->vf, STORE_READ_MEMORY, &vf) < 0)
		return 0; /* gone: its inodes resolve to nothing any more */
	return ino_vf(vf.id, 1 + key->index);
}

/* The store's change callback: the notifier, and the caller's status hook. */
static void store_changed(void *userdata, const struct store_change *change)
{
	struct vffs *fs = userdata;

	notifier_store_change(fs->notifier, change);
	if ((change->bits & STORE_CHANGE_STATUS) && fs->status_changed)
		fs->status_changed(fs->status_userdata);
}

int vffs_start(struct vffs *fs, struct store *store)
{
	struct sigaction sa = { .sa_handler = wake_signal_handler };
	int r;

	if (!store)
		return -EINVAL;
	fs->store = store;
	fs->claims.store = store;
	r = notifier_new(fs->se, fs->mountpoint, fs->store, &fs->notifier);
	if (r < 0)
		return r;
	notifier_set_inode_fn(fs->notifier, notify_inode, fs);
	store_set_change_callback(fs->store, store_changed, fs);
	r = notifier_start(fs->notifier);
	if (r < 0) {
		log_err("cannot start the notifier: %s", strerror(-r));
		return r;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: the wait must see EINTR */
	r = pthread_create(&fs->loop_thread, NULL, loop_main, fs);
	if (r) {
		log_err("cannot start the FUSE loop: %s", strerror(r));
		return -r;
	}
	fs->loop_running = true;
	log_info("serving %s", fs->mountpoint);
	return 0;
}

void vffs_stop(struct vffs *fs)
{
	if (!fs)
		return;
	atomic_store(&fs->stopping, true);
	if (fs->notifier)
		notifier_stop(fs->notifier); /* it may be writing through the mount */
	if (fs->loop_running) {
		struct timespec deadline;
		int tries = 0;

		fuse_session_exit(fs->se);
		for (;;) {
			pthread_kill(fs->loop_thread, SIGUSR1);
			clock_gettime(CLOCK_REALTIME, &deadline);
			deadline.tv_nsec += 100 * 1000 * 1000;
			if (deadline.tv_nsec >= 1000000000) {
				deadline.tv_sec++;
				deadline.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(fs->loop_thread, NULL, &deadline) == 0)
				break;
			if (++tries == 50) {
				/* Unmounting aborts the connection, which ends the workers. */
				log_warn("the FUSE loop does not stop; unmounting under it");
				fuse_session_unmount(fs->se);
				fs->mounted = false;
				pthread_join(fs->loop_thread, NULL);
				break;
			}
		}
		fs->loop_running = false;
	}
	if (fs->mounted) {
		fuse_session_unmount(fs->se);
		fs->mounted = false;
		log_info("unmounted %s", fs->mountpoint);
	}
	if (fs->store) {
		/* The store outlives us (the caller closes it): nothing may call
		 * into the notifier once it is freed. */
		store_set_change_callback(fs->store, NULL, NULL);
		fs->store = NULL;
		fs->claims.store = NULL;
	}
}

void vffs_free(struct vffs *fs)
{
	if (!fs)
		return;
	vffs_stop(fs);
	/* No handler runs any more: what the kernel never released is ours. */
	while (fs->open_list)
		fs->open_list->free(fs, fs->open_list);
	pthread_mutex_destroy(&fs->open_lock);
	notifier_free(fs->notifier);
	if (fs->se)
		fuse_session_destroy(fs->se);
	fuse_opt_free_args(&fs->args);
	budget_free(fs->budget);
	free(fs->mountpoint);
	free(fs->sysfs_root);
	free(fs);
}
