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
 * Locks.
 *  - each open file (struct vhandle) has a mutex serializing reads and
 *    writes on that one open file (the snapshot, the write outcome).  It is
 *    taken before any store call and never while taking another handle's.
 *  - notify.c's locks (file table, then queue) are leaves for this file.
 *
 * Inodes are computed from store ids, stable and never reused, so forget is
 * a no-op and nothing maps inodes in memory:
 *   1                     the root
 *   16 + i                top_files[i]
 *   1<<60 | id<<8 | 0     the directory of the VF with store id `id`
 *   1<<60 | id<<8 | 1+i   vf_files[i] of that VF (assignments/ included)
 *   2<<60 | claim id      an assignment file
 * Every file is opened with direct_io, so every read reaches us: a read at
 * offset 0 renders the file afresh (sysfs style) into the handle's snapshot,
 * later offsets are served from that snapshot so one `cat` is consistent.
 * Attributes are not cached (timeout 0), entries for 1 s, negative entries
 * never.
 *
 * Claims (vfhealth(5)).  create on assignments/ makes a reservation in the
 * store (nothing durable, nothing notified) and answers EBUSY/EEXIST at
 * once; the first write through the creating handle commits it with what it
 * says, a refused one cancels it, so nothing is left.  A creating handle
 * released without a write commits a bare claim (touch, `exec 3>f`).  The
 * release comes after close(2) has returned, so a setattr of the reserved
 * inode (only its creator resolves it: touch's futimens) commits it too: a
 * claim made by touch(1) exists when touch exits.  Not flush: it comes with
 * every close(), also the one a shell makes after dup2() of a redirection,
 * before the write.  A handle's `reserved` is rechecked against the store
 * (a setattr may have committed it).  Entries of claims are not cached
 * (timeout 0): a claim's name can vanish without an unlink the kernel sees
 * (release=, a cancelled reservation), and a stale dentry would turn the
 * next create of that name into an open of a dead inode.
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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/notify.h"
#include "store/store.h"
#include "fs/vfiles.h"
#include "grammar/assignment.h"
#include "proto/cleanup.h"
#include "proto/log.h"
#include "proto/parse.h"
#include "proto/procfs.h"

#define INO_ROOT 1
#define INO_TOP_BASE 16
#define INO_KIND_SHIFT 60
#define INO_KIND_VF 1ULL
#define INO_KIND_CLAIM 2ULL
#define INO_ID_MASK ((1ULL << INO_KIND_SHIFT) - 1)
#define VF_SLOT_DIR 0
#define GENERATION 1
#define ENTRY_TIMEOUT_S 1.0
#define FILE_SIZE 4096 /* like sysfs: a nonzero size; reads are not bound by it */
#define MAX_WORKER_THREADS 16

struct vffs {
	char *mountpoint;
	gid_t group;
	struct metrics *metrics; /* the caller's; passed to the `metrics` renderer */
	struct fuse_args args;
	struct fuse_session *se;
	bool mounted;
	struct store *store; /* the caller's, from vffs_start to vffs_stop */
	struct notifier *notifier;
	struct timespec start_time;

	pthread_t loop_thread;
	bool loop_running;
	atomic_bool stopping;

};

enum vnode_kind { VN_ROOT, VN_TOP, VN_VF_DIR, VN_VF_ENTRY, VN_CLAIM };

/* What an inode number names, resolved against the store. */
struct vnode {
	enum vnode_kind kind;
	int index;                 /* VN_TOP, VN_VF_ENTRY */
	struct store_vf_info vf;   /* VN_VF_DIR, VN_VF_ENTRY */
	struct store_claim claim;  /* VN_CLAIM */
};

/* One open file. */
struct vhandle {
	pthread_mutex_t lock;
	enum vnode_kind kind;
	int index;
	char vf[VF_ADDR_BUFSZ];
	uint64_t vf_id;
	char instance_id[INSTANCE_ID_MAX + 1];
	uint64_t claim_id;
	bool created_claim; /* this open created the claim ... */
	bool wrote_claim;   /* ... and has written to it since */
	bool reserved;      /* ... which is still a reservation (not committed) */
	char *snapshot;
	size_t snapshot_len;
	bool rendered;
	bool append;        /* opened O_APPEND: the kernel picks the offset */
	char outcome[VFILE_OUTCOME_MAX];
	bool watched;
	struct notify_watch watch;
};

/* One open directory: the listing rendered by the readdir at offset 0. */
struct dirhandle {
	pthread_mutex_t lock;
	char *buf;
	size_t size;
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

/* -- inodes ------------------------------------------------------------------------- */

static fuse_ino_t ino_vf(uint64_t id, int slot)
{
	return (INO_KIND_VF << INO_KIND_SHIFT) | (id << 8) | (unsigned)slot;
}

static fuse_ino_t ino_claim(uint64_t id)
{
	return (INO_KIND_CLAIM << INO_KIND_SHIFT) | (id & INO_ID_MASK);
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
		r = store_claim_get_by_id(fs->store, ino & INO_ID_MASK, &n->claim);
		if (r < 0)
			return r;
		n->kind = VN_CLAIM;
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

static void vnode_stat(struct vffs *fs, fuse_ino_t ino, const struct vnode *n, struct stat *st)
{
	struct notify_key key;
	struct timespec t = fs->start_time;
	const struct vfile *f = NULL;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = 0;
	st->st_gid = fs->group;
	st->st_blksize = FILE_SIZE;
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
		st->st_size = FILE_SIZE;
	}
	if (vnode_key(n, &key))
		notifier_mtime(fs->notifier, &key, &t);
	st->st_atim = st->st_mtim = st->st_ctim = t;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, const struct vnode *n)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = GENERATION;
	e.attr_timeout = 0;
	e.entry_timeout = n->kind == VN_CLAIM ? 0 : ENTRY_TIMEOUT_S; /* see Claims */
	vnode_stat(req_fs(req), ino, n, &e.attr);
	fuse_reply_entry(req, &e);
}

/* -- names: resolved from the store's memory, also while it is unavailable ------------ */

/* A VF directory's name (a path lookup, not a placement decision: see
 * store_vf_lookup); a name that is no VF address is simply absent. */
static int lookup_vf(struct vffs *fs, const char *vf, struct store_vf_info *ret)
{
	return vf_address_valid(vf) ? store_vf_lookup(fs->store, vf, ret) : -ENOENT;
}

/* An assignment file's name under a VF's assignments/. */
static int lookup_claim(struct vffs *fs, const char *vf, const char *instance_id,
			struct store_claim *ret)
{
	return instance_id_valid(instance_id) ? store_claim_lookup(fs->store, vf, instance_id, ret)
					      : -ENOENT;
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
	/* Content is generated: never let the kernel cache pages or attributes. */
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA);
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
		ino = ino_claim(child.claim.id);
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
	fuse_reply_attr(req, &st, 0);
}

/* Whether c (by id) is still a reservation: not a claim by its name. */
static bool claim_is_reservation(struct vffs *fs, const struct store_claim *c)
{
	struct store_claim named;

	return store_claim_lookup(fs->store, c->vf, c->instance_id, &named) < 0 || named.id != c->id;
}

/* Whether the handle still holds an uncommitted reservation: a setattr may
 * have committed it, or a failed one cancelled it. */
static bool handle_reserved(struct vffs *fs, struct vhandle *h)
{
	struct store_claim c;

	if (h->reserved && (store_claim_get_by_id(fs->store, h->claim_id, &c) < 0 ||
			    !claim_is_reservation(fs, &c)))
		h->reserved = false;
	return h->reserved;
}

/* Truncation is accepted and ignored so that `echo X > file` (O_TRUNC) works;
 * times are not settable but `touch` must not fail; ownership and modes are
 * fixed.  Through a creating handle not written yet (touch's futimens), it
 * commits the bare claim: touch(1) leaves a claim when it exits. */
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
	vnode_stat(fs, ino, &n, &st);
	if ((to_set & FUSE_SET_ATTR_SIZE) && S_ISDIR(st.st_mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* n.claim came by id: a reservation resolves for its creator only */
	if (n.kind == VN_CLAIM && claim_is_reservation(fs, &n.claim)) {
		int r = store_claim_commit(fs->store, &n.claim);

		if (r < 0) {
			store_claim_cancel(fs->store, n.claim.vf, n.claim.id);
			fuse_reply_err(req, -r);
			return;
		}
		log_info("%s: claimed by instance %s at %s", n.claim.vf, n.claim.instance_id,
			 n.claim.claimed_at);
	}
	fuse_reply_attr(req, &st, 0);
}

/* -- directories ------------------------------------------------------------------------- */

struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size;
	int error;
};

static void dirbuf_add(struct dirbuf *b, const char *name, fuse_ino_t ino, mode_t mode)
{
	struct stat st = { .st_ino = ino, .st_mode = mode };
	size_t old = b->size, len;
	char *grown;

	if (b->error)
		return;
	len = fuse_add_direntry(b->req, NULL, 0, name, NULL, 0);
	grown = realloc(b->buf, old + len);
	if (!grown) {
		b->error = -ENOMEM;
		return;
	}
	b->buf = grown;
	b->size = old + len;
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
		dirbuf_add(b, ".", ino, S_IFDIR);
		dirbuf_add(b, "..", INO_ROOT, S_IFDIR);
		for (int i = 0; i < TOP_FILE_COUNT; i++)
			dirbuf_add(b, top_files[i].name, INO_TOP_BASE + (fuse_ino_t)i, S_IFREG);
		for (size_t i = 0; i < count; i++)
			dirbuf_add(b, vfs[i].vf, ino_vf(vfs[i].id, VF_SLOT_DIR), S_IFDIR);
		return b->error;
	}
	case VN_VF_DIR:
		dirbuf_add(b, ".", ino, S_IFDIR);
		dirbuf_add(b, "..", INO_ROOT, S_IFDIR);
		for (int i = 0; i < VF_FILE_COUNT; i++)
			dirbuf_add(b, vf_files[i].name, ino_vf(n->vf.id, 1 + i),
				   (vf_files[i].flags & VFILE_DIR) ? S_IFDIR : S_IFREG);
		return b->error;
	case VN_VF_ENTRY: {
		_cleanup_free_ struct store_claim *claims = NULL;
		size_t count = 0;

		if (!vnode_is_claim_dir(n))
			return -ENOTDIR;
		r = store_claim_list(fs->store, n->vf.vf, &claims, &count);
		if (r < 0)
			return r;
		dirbuf_add(b, ".", ino, S_IFDIR);
		dirbuf_add(b, "..", ino_vf(n->vf.id, VF_SLOT_DIR), S_IFDIR);
		for (size_t i = 0; i < count; i++)
			dirbuf_add(b, claims[i].instance_id, ino_claim(claims[i].id), S_IFREG);
		return b->error;
	}
	default:
		return -ENOTDIR;
	}
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vnode n;
	struct dirhandle *d;

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	if (n.kind == VN_TOP || n.kind == VN_CLAIM ||
	    (n.kind == VN_VF_ENTRY && !vnode_is_claim_dir(&n))) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	d = calloc(1, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) < 0) {
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *reply = NULL;
	size_t len = 0;

	pthread_mutex_lock(&d->lock);
	if (off == 0 || !d->buf) {
		/* A listing from the start: take it afresh. */
		struct vnode n = { 0 };
		struct dirbuf b = { .req = req };
		int r = vnode_resolve(fs, ino, &n);

		if (r == 0)
			r = list_directory(fs, ino, &n, &b);
		if (r < 0) {
			free(b.buf);
			pthread_mutex_unlock(&d->lock);
			fuse_reply_err(req, -r);
			return;
		}
		free(d->buf);
		d->buf = b.buf;
		d->size = b.size;
	}
	int r = copy_window(d->buf, d->size, off, size, &reply, &len);
	pthread_mutex_unlock(&d->lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, reply, len);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;

	if (d) {
		pthread_mutex_destroy(&d->lock);
		free(d->buf);
		free(d);
	}
	fuse_reply_err(req, 0);
}

/* -- files ------------------------------------------------------------------------------- */

static void handle_free(struct vffs *fs, struct vhandle *h)
{
	if (!h)
		return;
	if (h->watched)
		notifier_watch_remove(fs->notifier, &h->watch);
	pthread_mutex_destroy(&h->lock);
	free(h->snapshot);
	free(h);
}

static struct vhandle *handle_new(struct vffs *fs, const struct vnode *n)
{
	struct vhandle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	h->kind = n->kind;
	h->index = n->index;
	if (n->kind == VN_CLAIM) {
		snprintf(h->vf, sizeof(h->vf), "%s", n->claim.vf);
		snprintf(h->instance_id, sizeof(h->instance_id), "%s", n->claim.instance_id);
		h->claim_id = n->claim.id;
	} else if (n->kind == VN_VF_ENTRY) {
		snprintf(h->vf, sizeof(h->vf), "%s", n->vf.vf);
		h->vf_id = n->vf.id;
	}
	if (vnode_key(n, &h->watch.key)) {
		const struct vfile *f = n->kind == VN_TOP ? &top_files[n->index]
							  : &vf_files[n->index];
		if ((f->flags & VFILE_NOTIFY) && notifier_watch_add(fs->notifier, &h->watch) == 0)
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

	if (!vnode_get_or_reply(req, ino, &n))
		return;
	if (n.kind == VN_TOP)
		f = &top_files[n.index];
	else if (n.kind == VN_VF_ENTRY)
		f = &vf_files[n.index];
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
	h = handle_new(fs, &n);
	h->append = (fi->flags & O_APPEND) != 0;
	fi->fh = (uintptr_t)h;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (fuse_reply_open(req, fi) < 0)
		handle_free(fs, h); /* interrupted: no release will come */
}

/* Render the handle's file into its snapshot. */
static int handle_render(struct vffs *fs, struct vhandle *h)
{
	_cleanup_free_ char *buf = NULL;
	struct store_claim claim;
	size_t len = 0;
	FILE *out;
	int r = 0;
	struct vfile_call call = {
		.store = fs->store, .metrics = fs->metrics, .vf = h->vf, .vf_id = h->vf_id,
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
		/* From memory, also while the store is unavailable: not a
		 * placement decision, and the sentinel lists claims from here.
		 * A reservation is seen only by its creator, by id. */
		r = handle_reserved(fs, h) ? store_claim_get_by_id(fs->store, h->claim_id, &claim)
				: store_claim_lookup(fs->store, h->vf, h->instance_id, &claim);
		if (r == 0)
			claim_render(&claim, out);
		break;
	default:
		r = -EISDIR;
	}
	if (fclose(out) != 0 && r == 0)
		r = -ENOMEM;
	if (r < 0)
		return r;
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
	if (off == 0 || !h->rendered)
		r = handle_render(fs, h);
	if (r == 0)
		r = copy_window(h->snapshot, h->snapshot_len, off, size, &reply, &len);
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_buf(req, reply, len);
}

/* Drop the handle's reservation: a refused first write leaves nothing. */
static void claim_cancel(struct vffs *fs, struct vhandle *h)
{
	store_claim_cancel(fs->store, h->vf, h->claim_id);
	h->reserved = false;
}

/* Commit the handle's reservation as c (a failure cancels it). */
static int claim_commit(struct vffs *fs, struct vhandle *h, const struct store_claim *c)
{
	int r = store_claim_commit(fs->store, c);

	if (r < 0) {
		if (r == -EBUSY || r == -EIO)
			log_warn("%s: claim by instance %s refused: %s", h->vf, h->instance_id,
				 strerror(-r));
		claim_cancel(fs, h);
		return r;
	}
	h->reserved = false;
	log_info("%s: claimed by instance %s at %s", h->vf, h->instance_id, c->claimed_at);
	return 0;
}

/* The creating handle closes without having written: a bare claim. */
static int claim_commit_bare(struct vffs *fs, struct vhandle *h)
{
	struct store_claim res;
	int r = store_claim_get_by_id(fs->store, h->claim_id, &res);

	if (r < 0) {
		h->reserved = false;
		return r;
	}
	return claim_commit(fs, h, &res);
}

/* release=CLAIMED_AT: by name and identity, whatever claim the handle was
 * opened on (it may have been released and made again since). */
static int claim_release(struct vffs *fs, struct vhandle *h, const char *claimed_at)
{
	int r;

	if (h->reserved) {
		claim_cancel(fs, h); /* no claim to release: nothing is left */
		return -ENOENT;
	}
	r = store_release_if(fs->store, h->vf, h->instance_id, claimed_at);
	if (r == 0)
		log_info("%s: released by instance %s (claimed at %s)", h->vf, h->instance_id,
			 claimed_at);
	return r;
}

static int claim_write(struct vffs *fs, struct vhandle *h, char *command)
{
	struct store_claim current = { 0 };
	struct store_claim next = { 0 };
	char release_at[RFC3339_BUFSZ];
	int r;

	handle_reserved(fs, h);
	r = assignment_parse_release(command, release_at);
	if (r != 0) {
		if (r < 0 && h->reserved)
			claim_cancel(fs, h);
		return r < 0 ? r : claim_release(fs, h, release_at);
	}
	r = store_claim_get_by_id(fs->store, h->claim_id, &current);
	if (r == 0)
		r = claim_parse_update(&current, command, h->created_claim && !h->wrote_claim,
				       &next);
	if (r < 0) {
		if (h->reserved)
			claim_cancel(fs, h);
		return r;
	}
	if (h->reserved) {
		/* the first write: the claim exists from now on, as it says */
		r = claim_commit(fs, h, &next);
		if (r == 0)
			h->wrote_claim = true;
		return r;
	}
	r = store_claim_update(fs->store, &next);
	if (r < 0)
		return r;
	h->wrote_claim = true;
	log_info("%s: claim of instance %s updated: agent=%s control=%s pid=%lld", h->vf,
		 h->instance_id, next.agent, next.control, (long long)next.pid);
	return 0;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;
	_cleanup_free_ char *command = NULL;
	size_t len = size;
	int r = -EINVAL;

	if (from_notifier(fs, req)) {
		/* The notifier's byte: it only makes the kernel emit inotify events. */
		fuse_reply_write(req, size);
		return;
	}
	/* One write(2) at offset 0 is one whole command.  `echo X >> file`
	 * (O_APPEND) cannot choose its offset: there every write is one. */
	if ((off != 0 && !h->append) || size == 0 || size > VFILE_COMMAND_MAX ||
	    memchr(buf, '\0', size)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	command = malloc(size + 1);
	memcpy(command, buf, size);
	command[size] = '\0';
	strip_trailing_newline(command, &len);

	pthread_mutex_lock(&h->lock);
	struct vfile_call call = {
		.store = fs->store, .metrics = fs->metrics, .vf = h->vf, .vf_id = h->vf_id,
		.outcome = h->outcome,
	};
	switch (h->kind) {
	case VN_TOP:
		if (top_files[h->index].write)
			r = top_files[h->index].write(&call, command);
		else
			r = -EACCES;
		break;
	case VN_VF_ENTRY:
		h->outcome[0] = '\0';
		if (vf_files[h->index].write)
			r = vf_files[h->index].write(&call, command);
		else
			r = -EACCES;
		break;
	case VN_CLAIM:
		r = claim_write(fs, h, command);
		break;
	default:
		r = -EISDIR;
	}
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, size);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vhandle *h = (struct vhandle *)(uintptr_t)fi->fh;

	/* the creating handle closed without a write: a bare claim */
	if (handle_reserved(req_fs(req), h))
		claim_commit_bare(req_fs(req), h);
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
	fuse_reply_poll(req, notifier_poll(fs->notifier, &h->watch, ph));
}

/* -- creating and removing ---------------------------------------------------------------- */

/* Claim <vf>/assignments/<name>, or only reserve it (create: the first
 * write commits).  Only assignments/ takes new files. */
static int make_claim(struct vffs *fs, fuse_ino_t parent, const char *name, bool reserve,
		      struct vnode *child)
{
	struct vnode p = { 0 };
	struct store_claim want = { 0 };
	int r;

	r = vnode_resolve(fs, parent, &p);
	if (r < 0)
		return r;
	if (!vnode_is_claim_dir(&p))
		return -EACCES;
	if (!instance_id_valid(name))
		return -EINVAL;
	snprintf(want.vf, sizeof(want.vf), "%s", p.vf.vf);
	snprintf(want.instance_id, sizeof(want.instance_id), "%s", name);
	/* liveness evidence recorded by the daemon, not the writer; unknown ("")
	 * when it cannot be read */
	if (proc_boot_id(NULL, want.boot_id) < 0)
		want.boot_id[0] = '\0';
	/* claimed_at "": the store stamps the current time. */
	r = reserve ? store_claim_reserve(fs->store, &want, &child->claim)
		    : store_claim(fs->store, &want, &child->claim);
	if (r < 0) {
		if (r == -EBUSY || r == -EIO)
			log_warn("%s: claim by instance %s refused: %s", want.vf, name,
				 strerror(-r));
		return r;
	}
	memset(child, 0, offsetof(struct vnode, claim));
	child->kind = VN_CLAIM;
	if (!reserve)
		log_info("%s: claimed by instance %s at %s", child->claim.vf, name,
			 child->claim.claimed_at);
	return 0;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct vffs *fs = req_fs(req);
	struct vnode child = { 0 };
	struct fuse_entry_param e;
	struct vhandle *h;
	int r;

	r = make_claim(fs, parent, name, true, &child);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	h = handle_new(fs, &child);
	if (!h) {
		/* The caller sees a failure: do not leave the reservation behind. */
		store_claim_cancel(fs->store, child.claim.vf, child.claim.id);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->created_claim = true;
	h->reserved = true;
	memset(&e, 0, sizeof(e));
	e.ino = ino_claim(child.claim.id);
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
	struct vffs *fs = req_fs(req);
	struct vnode child = { 0 };
	int r;

	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	r = make_claim(fs, parent, name, false, &child);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	reply_entry(req, ino_claim(child.claim.id), &child);
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
		r = store_release(fs->store, p.vf.vf, name);
		if (r == 0)
			log_info("%s: released by instance %s", p.vf.vf, name);
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
	r = store_vf_register(fs->store, name);
	if (r == 0)
		r = store_vf_lookup(fs->store, name, &child.vf);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
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
	r = store_vf_unregister(fs->store, name);
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
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
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

/* An absolute copy of path (daemonizing changes the working directory). */
static char *absolute_path(const char *path)
{
	_cleanup_free_ char *cwd = NULL;
	char *abs = NULL;

	if (path[0] == '/')
		return strdup(path);
	cwd = getcwd(NULL, 0);
	if (!cwd || asprintf(&abs, "%s/%s", cwd, path) < 0)
		return NULL;
	return abs;
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
	clock_gettime(CLOCK_REALTIME, &fs->start_time);
	fs->group = opt->group;
	fs->metrics = opt->metrics;
	fs->mountpoint = absolute_path(opt->mountpoint ? opt->mountpoint : VFFS_DEFAULT_MOUNTPOINT);
	if (!fs->mountpoint)
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

int vffs_mount(struct vffs *fs)
{
	struct stat st;
	int r;

	/* A crashed instance leaves its mount behind: every access fails with
	 * ENOTCONN until it is detached. */
	if (stat(fs->mountpoint, &st) < 0 && errno == ENOTCONN) {
		if (umount2(fs->mountpoint, MNT_DETACH) < 0) {
			r = negative_errno();
			log_err("cannot detach the stale mount on %s: %s", fs->mountpoint, strerror(-r));
			return r;
		}
		log_warn("detached a stale mount on %s left by a previous instance", fs->mountpoint);
	}
	r = mkdir_p(fs->mountpoint, 0755);
	if (r < 0) {
		log_err("cannot create mountpoint %s: %s", fs->mountpoint, strerror(-r));
		return r;
	}
	if (fuse_session_mount(fs->se, fs->mountpoint) != 0) {
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
	fuse_loop_cfg_set_max_threads(cfg, MAX_WORKER_THREADS);
	r = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	if (!atomic_load(&fs->stopping)) {
		/* Unmounted from outside (fusermount -u): end the daemon too. */
		log_warn("the FUSE session ended (%d); shutting down", r);
		kill(getpid(), SIGTERM);
	}
	return NULL;
}

int vffs_start(struct vffs *fs, struct store *store)
{
	struct sigaction sa = { .sa_handler = wake_signal_handler };
	int r;

	if (!store)
		return -EINVAL;
	fs->store = store;
	r = notifier_new(fs->se, fs->mountpoint, fs->store, &fs->notifier);
	if (r < 0)
		return r;
	store_set_change_callback(fs->store, notifier_store_change, fs->notifier);
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
	}
}

void vffs_free(struct vffs *fs)
{
	if (!fs)
		return;
	vffs_stop(fs);
	notifier_free(fs->notifier);
	if (fs->se)
		fuse_session_destroy(fs->se);
	fuse_opt_free_args(&fs->args);
	free(fs->mountpoint);
	free(fs);
}
