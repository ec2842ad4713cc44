/* SPDX-License-Identifier: MIT */
/*
 * notify.c - change notification for the virtual files (notify.h).
 *
 * Design notes
 * ------------
 * Threads and processes.  Two threads, the notifier and its feeder, and
 * one single-threaded helper process (the "toucher") that writes through
 * the mount.  The store calls notifier_store_change() from whichever thread
 * committed (usually a FUSE worker handling a write); FUSE workers call
 * notifier_reply_write() and the watch/poll/seen/mtime functions.
 *
 * Why a process: a daemon thread blocked in open() on its own mount cannot
 * die.  If vfhealthd is SIGKILLed after a worker has taken that request, the
 * thread waits uninterruptibly for a reply nobody will send, and as it keeps
 * the process's file table (so the /dev/fuse descriptor) alive, the kernel
 * never aborts the connection: the process never finishes dying and every
 * client of the mount hangs.  The toucher holds no /dev/fuse descriptor
 * (it closes every inherited one), so the daemon always dies, the
 * connection aborts, and a toucher caught in a request gets ENOTCONN and
 * dies of its PR_SET_PDEATHSIG.  It is forked in notifier_start(), before
 * the threads and the FUSE loop exist, reads one path per line from a
 * socket pair, and exits at EOF or when the daemon dies.
 *
 * Locks: rows 7, 8 and 8b of the lock table in docs/architecture.md; none
 * is held across any call into the store or the mount.
 *  - files_lock guards the file table: per file (VF address + table index)
 *    the content generation, the mtime, and the list of open-file watches
 *    that hold a pending fuse_pollhandle (a watch with none is in no list:
 *    opening and closing a file costs O(1) however many hold it open).
 *    Held for a few pointer operations; waking pollers takes it once per
 *    batch of WAKE_BATCH handles.
 *  - queue_lock (a leaf) guards the dirty set, the queued write replies and
 *    the two counts of page-cached invalidations (queued, done).  The set
 *    is a bitmask of top-level files, a bitmask of per-VF files dirty for
 *    every VF, up to NOTIFY_MAX_QUEUED_VFS (VF, bitmask) entries (when full
 *    it collapses into "every notified file of every VF") and up to
 *    NOTIFY_MAX_QUEUED_INODES inodes by number.  Enqueueing never blocks.
 *  - touch_lock (a leaf) guards the feeder's set of files to touch.
 *
 * Two ways for a change (the ordering rule of docs/architecture.md):
 *  - it changed a file readers have in the page cache (vfile_page_cached:
 *    VF/quarantined), or is store-wide, or the VFs (the root's listing,
 *    which the kernel keeps): it is queued.  The notifier drains the whole
 *    set, records the files' mtimes, invalidates the page-cached inodes
 *    (fuse_lowlevel_notify_inval_inode, which waits for reads in flight on
 *    those pages), marks the count done, answers the writes queued before
 *    the drain, bumps the files' generations and sends their pending poll
 *    notifications (a write to /dev/fuse that waits for nobody), and hands
 *    the files to the feeder.
 *  - it changed only files every read of which reaches us (direct_io: the
 *    routine report): the committing thread announces it at once, mtime,
 *    pollers, feeder (announce_now()), and the notifier is not woken.
 * A write is answered by its own worker when no page-cached invalidation
 * is queued or in flight (the counts are equal, read under queue_lock after
 * its change was queued), else by the notifier after the drain that took
 * its change; no worker ever waits for the notifier.
 *
 * The feeder sends each file of its set to the toucher, which opens it
 * through the mount, writes one byte and closes it: the kernel turns that
 * into IN_MODIFY and IN_CLOSE_WRITE for watchers of the file and of its
 * directory, and drops the file's cached mtime (the kernel does after every
 * write), so a watcher's stat shows the change.  The open and write reach
 * our own FUSE handlers, which see the toucher's pid
 * (notifier_writer_pid()) and change nothing.  The feeder is paced: a batch
 * at most every NOTIFY_TOUCH_PACE_MS, the first change after a quiet spell
 * at once, and whatever changes meanwhile joins the next batch, so a file
 * changing 1000 times a second costs about 100 touches, not 1000, and the
 * last change is always followed by one.  The socket to the toucher may
 * fill up: then the feeder waits, holding no lock; the notifier never
 * does.
 *
 * Shutdown.  notifier_stop() sets `stop`, signals the condition, joins the
 * thread, closes the socket, kills the toucher and waits for it to exit.  It
 * has to run while the session still serves requests, because the toucher
 * may be inside an open() or write() on the mount.  What is still queued is
 * dropped: the thread checks `abandon` between files, so a store-wide change
 * at 65,536 VFs (hundreds of thousands of files, each touched through the
 * mount) does not hold up a SIGTERM, and the touches still in the socket
 * would only tell watchers of a mount that is about to go away.  Pending poll handles are
 * destroyed when their watch is removed or in notifier_free().
 *
 * Memory.  File entries are created when a file is opened or changes and
 * are kept (keyed by VF address, so re-registering a VF reuses them); they
 * number at most the files of every VF address ever used (a store-wide
 * change creates one for every notified file of every VF: about 40 MB at
 * 65,536 VFs).  The table doubles its buckets past two entries a bucket.
 */
#include "fs/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs/vfiles.h"
#include "common/cleanup.h"
#include "common/log.h"

#define FILE_BUCKETS_MIN 256 /* the file table grows by doubling past 2 files a bucket */
#define TOUCH_BATCH_MAX 256 /* distinct paths the toucher coalesces at once */

struct watched_file {
	struct notify_key key;
	uint64_t generation;
	struct timespec mtime;
	bool changed;
	struct notify_watch *pending; /* the watches holding a poll handle, doubly linked */
	size_t n_pending;
	struct watched_file *next;
};

/* Under files_lock: a watch's pending handle joins or leaves its file's list. */
static void pending_link(struct watched_file *f, struct notify_watch *w)
{
	w->prev = NULL;
	w->next = f->pending;
	if (w->next)
		w->next->prev = w;
	f->pending = w;
	f->n_pending++;
}

static void pending_unlink(struct watched_file *f, struct notify_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		f->pending = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
	f->n_pending--;
}

struct dirty_vf {
	char vf[VF_ADDR_BUFSZ];
	unsigned files; /* bitmask over enum vf_file_index */
};

/* A bounded coalescing set of files: enqueueing never blocks nor allocates;
 * when its VF slots are full it collapses into "these files of every VF". */
struct dirty_set {
	unsigned top;     /* bitmask over enum top_file_index */
	unsigned all_vfs; /* bitmask over enum vf_file_index, for every VF */
	struct dirty_vf vfs[NOTIFY_MAX_QUEUED_VFS];
	size_t count;
	fuse_ino_t inodes[NOTIFY_MAX_QUEUED_INODES]; /* by number (notifier_invalidate_inode) */
	size_t n_inodes;
};

/* A write whose reply waits for the invalidation of what it changed. */
struct pending_reply {
	fuse_req_t req;
	size_t size;
	struct pending_reply *next;
};

struct notifier {
	struct fuse_session *se;
	struct store *store;
	char *mountpoint;
	notify_inode_fn inode_of; /* NULL: nothing is invalidated (no session) */
	void *inode_userdata;

	pthread_mutex_t files_lock;
	struct watched_file **buckets;
	size_t n_buckets, n_files;

	/* queue_lock (a leaf): what changed, and the writes waiting for it */
	pthread_mutex_t queue_lock;
	pthread_cond_t queue_cond;
	struct dirty_set dirty;
	struct pending_reply *replies, **replies_tail;
	/* Page-cached invalidations queued (changes of a page-cached file,
	 * inodes by number) and done: equal when no page can be stale, and
	 * only then may a write be answered by its worker. */
	uint64_t cached_queued, cached_done;
	bool stop;
	atomic_bool abandon; /* notifier_stop(): drop the rest of the drained set */

	/* touch_lock (a leaf): what the feeder hands to the toucher */
	pthread_mutex_t touch_lock;
	pthread_cond_t touch_cond;
	struct dirty_set touch;
	bool touch_stop;
	/* each thread's copy of the set it drained (no allocation: a drained
	 * set is never dropped, or a write could be answered uninvalidated) */
	struct dirty_set drained, fed;

	pthread_t thread, feeder;
	bool running, feeder_running;
	int touch_fd;          /* our end of the socket pair to the toucher */
	atomic_int writer_pid; /* the toucher */
	bool touch_failed;     /* logged once */
};

static size_t key_hash(const struct notify_key *key, size_t n_buckets)
{
	unsigned h = 2166136261u;

	for (const char *p = key->vf; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ (unsigned)key->index) * 16777619u;
	return h % n_buckets;
}

/* Under files_lock.  Keeps lookups short however many files changed (a
 * store-wide change at 65,536 VFs names every VF's files); without memory
 * the table stays as it is, only slower. */
static void files_grow(struct notifier *n)
{
	size_t want = n->n_buckets * 2;
	struct watched_file **b = calloc(want, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < n->n_buckets; i++)
		while (n->buckets[i]) {
			struct watched_file *f = n->buckets[i];
			size_t h = key_hash(&f->key, want);
			n->buckets[i] = f->next;
			f->next = b[h];
			b[h] = f;
		}
	free(n->buckets);
	n->buckets = b;
	n->n_buckets = want;
}

static bool key_equal(const struct notify_key *a, const struct notify_key *b)
{
	return a->index == b->index && strcmp(a->vf, b->vf) == 0;
}

/* Under files_lock. */
static struct watched_file *file_find(struct notifier *n, const struct notify_key *key,
				      bool create)
{
	size_t h = key_hash(key, n->n_buckets);
	struct watched_file *f;

	for (f = n->buckets[h]; f; f = f->next)
		if (key_equal(&f->key, key))
			return f;
	if (!create)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->key = *key;
	f->next = n->buckets[h];
	n->buckets[h] = f;
	if (++n->n_files > 2 * n->n_buckets)
		files_grow(n);
	return f;
}

int notifier_new(struct fuse_session *se, const char *mountpoint, struct store *store,
		 struct notifier **ret)
{
	struct notifier *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->mountpoint = strdup(mountpoint);
	if (!n->mountpoint) {
		free(n);
		return -ENOMEM;
	}
	n->n_buckets = FILE_BUCKETS_MIN;
	n->buckets = calloc(n->n_buckets, sizeof(*n->buckets));
	if (!n->buckets) {
		free(n->mountpoint);
		free(n);
		return -ENOMEM;
	}
	n->se = se;
	n->store = store;
	n->touch_fd = -1;
	pthread_mutex_init(&n->files_lock, NULL);
	pthread_mutex_init(&n->queue_lock, NULL);
	pthread_cond_init(&n->queue_cond, NULL);
	pthread_mutex_init(&n->touch_lock, NULL);
	pthread_condattr_t monotonic;
	pthread_condattr_init(&monotonic);
	pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	pthread_cond_init(&n->touch_cond, &monotonic);
	pthread_condattr_destroy(&monotonic);
	n->replies_tail = &n->replies;
	*ret = n;
	return 0;
}

void notifier_free(struct notifier *n)
{
	if (!n)
		return;
	notifier_stop(n);
	for (size_t b = 0; b < n->n_buckets; b++) {
		struct watched_file *f = n->buckets[b];
		while (f) {
			struct watched_file *next = f->next;
			while (f->pending) {
				struct notify_watch *w = f->pending;
				pending_unlink(f, w);
				fuse_pollhandle_destroy(w->pending);
				w->pending = NULL;
				w->file = NULL;
			}
			free(f);
			f = next;
		}
	}
	pthread_cond_destroy(&n->touch_cond);
	pthread_mutex_destroy(&n->touch_lock);
	pthread_cond_destroy(&n->queue_cond);
	pthread_mutex_destroy(&n->queue_lock);
	pthread_mutex_destroy(&n->files_lock);
	free(n->buckets);
	free(n->mountpoint);
	free(n);
}

pid_t notifier_writer_pid(const struct notifier *n)
{
	return (pid_t)atomic_load(&((struct notifier *)n)->writer_pid);
}

/* -- the dirty set -------------------------------------------------------------- */

/* Under the set's lock. */
static void dirty_add(struct dirty_set *d, unsigned top, const char *vf, unsigned files,
		      unsigned all_vfs)
{
	d->top |= top;
	d->all_vfs |= all_vfs;
	if (!files || !vf || !*vf)
		return;
	for (size_t i = 0; i < d->count; i++)
		if (strcmp(d->vfs[i].vf, vf) == 0) {
			d->vfs[i].files |= files;
			return;
		}
	if (d->count == NOTIFY_MAX_QUEUED_VFS) {
		/* Full: merge everything into "all files of all VFs"; nothing is lost. */
		unsigned all = 0;
		for (size_t i = 0; i < d->count; i++)
			all |= d->vfs[i].files;
		d->all_vfs |= all | files;
		d->count = 0;
		return;
	}
	snprintf(d->vfs[d->count].vf, VF_ADDR_BUFSZ, "%s", vf);
	d->vfs[d->count].files = files;
	d->count++;
}

static bool dirty_empty(const struct dirty_set *d)
{
	return !d->top && !d->all_vfs && !d->count && !d->n_inodes;
}

/* Move src (under its lock) into the caller's dst, emptying src. */
static void dirty_take(struct dirty_set *dst, struct dirty_set *src)
{
	dst->top = src->top;
	dst->all_vfs = src->all_vfs;
	dst->count = src->count;
	memcpy(dst->vfs, src->vfs, src->count * sizeof(*src->vfs));
	dst->n_inodes = src->n_inodes;
	memcpy(dst->inodes, src->inodes, src->n_inodes * sizeof(*src->inodes));
	src->top = src->all_vfs = 0;
	src->count = src->n_inodes = 0;
}

static void enqueue(struct notifier *n, unsigned top, const char *vf, unsigned vf_mask,
		    unsigned all_vfs, bool page_cached)
{
	if (!top && !all_vfs && (!vf_mask || !vf || !*vf))
		return;
	pthread_mutex_lock(&n->queue_lock);
	dirty_add(&n->dirty, top, vf, vf_mask, all_vfs);
	n->cached_queued += page_cached;
	pthread_cond_signal(&n->queue_cond);
	pthread_mutex_unlock(&n->queue_lock);
}

/* The files of table[count] that a change with these bits dirties: the
 * table's `changes` column (vfiles.h) is the one map from store changes to
 * files. */
static unsigned dirtied_files(const struct vfile *table, int count, unsigned bits)
{
	unsigned mask = 0;

	for (int i = 0; i < count; i++)
		if ((table[i].flags & VFILE_NOTIFY) && (table[i].changes & bits))
			mask |= 1u << i;
	return mask;
}

/* The files of table[count] in mask that readers have in the page cache. */
static bool any_page_cached(const struct vfile *table, int count, unsigned mask)
{
	for (int i = 0; i < count; i++)
		if ((mask & (1u << i)) && vfile_page_cached(&table[i]))
			return true;
	return false;
}

static void mark_changed(struct notifier *n, const struct notify_key *key);
static void wake_pollers(struct notifier *n, const struct notify_key *key);
static void touch_add(struct notifier *n, unsigned top, const char *vf, unsigned files,
		      unsigned all_vfs);

/* A change of one VF's files (and top-level files) none of which the kernel
 * caches: every read of them reaches us and renders what is committed, so
 * it is announced at once, from the committing thread (nothing here
 * blocks: a poll notification waits for nobody, the toucher's set is a
 * leaf), and the notifier thread is not woken at all. */
static void announce_now(struct notifier *n, unsigned top, const char *vf, unsigned vf_mask)
{
	struct notify_key key = { 0 };

	for (int i = 0; i < TOP_FILE_COUNT; i++)
		if (top & (1u << i)) {
			key.index = i;
			mark_changed(n, &key);
			wake_pollers(n, &key);
		}
	snprintf(key.vf, sizeof(key.vf), "%s", vf);
	for (int i = 0; i < VF_FILE_COUNT; i++)
		if (vf_mask & (1u << i)) {
			key.index = i;
			mark_changed(n, &key);
			wake_pollers(n, &key);
		}
	touch_add(n, top, vf, vf_mask, 0);
}

void notifier_store_change(void *userdata, const struct store_change *change)
{
	struct notifier *n = userdata;
	unsigned top = dirtied_files(top_files, TOP_FILE_COUNT, change->bits);
	unsigned vf = dirtied_files(vf_files, VF_FILE_COUNT, change->bits);
	bool page_cached = any_page_cached(top_files, TOP_FILE_COUNT, top) ||
			   any_page_cached(vf_files, VF_FILE_COUNT, vf);

	/* The root's listing, which the kernel keeps (vffs.c), names the VFs. */
	if (change->bits & STORE_CHANGE_VFS)
		notifier_invalidate_inode(n, FUSE_ROOT_ID);
	/* A change that names no VF is store-wide: its per-VF files change
	 * for every VF (vfiles.h). */
	if (change->vf[0] && !page_cached)
		announce_now(n, top, change->vf, vf);
	else if (change->vf[0])
		enqueue(n, top, change->vf, vf, 0, page_cached);
	else
		enqueue(n, top, NULL, 0, vf, page_cached);
}

/* -- the notifier thread ---------------------------------------------------------- */

/* Record when the file changed (its mtime; before the invalidation, so that
 * the attributes the kernel asks for next show it). */
static void mark_changed(struct notifier *n, const struct notify_key *key)
{
	struct watched_file *f;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, key, true);
	if (f) {
		clock_gettime(CLOCK_REALTIME, &f->mtime);
		f->changed = true;
	}
	pthread_mutex_unlock(&n->files_lock);
}

/* Bump the file's generation and wake its pollers: after the invalidation,
 * so that a woken reader can only read the new content.  The pending
 * handles are taken in batches, each sent with files_lock released (a poll
 * notification waits for nobody, but the lock is everyone's); only the
 * pollers waiting when the generation moved are taken, so pollers that come
 * back meanwhile cannot keep this going.  Nothing is allocated. */
#define WAKE_BATCH 64
static void wake_pollers(struct notifier *n, const struct notify_key *key)
{
	struct fuse_pollhandle *batch[WAKE_BATCH];
	struct watched_file *f;
	size_t left = 0, count;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, key, true);
	if (f) {
		f->generation++;
		left = f->n_pending;
	}
	for (;;) {
		for (count = 0; left > 0 && count < WAKE_BATCH && f->pending; left--) {
			struct notify_watch *w = f->pending;
			pending_unlink(f, w);
			batch[count++] = w->pending;
			w->pending = NULL;
		}
		pthread_mutex_unlock(&n->files_lock);
		for (size_t i = 0; i < count; i++) {
			int r = fuse_lowlevel_notify_poll(batch[i]);
			if (r < 0 && r != -ENOENT)
				log_debug("notifier: poll notification failed: %s", strerror(-r));
			fuse_pollhandle_destroy(batch[i]);
		}
		if (count < WAKE_BATCH || left == 0)
			break;
		pthread_mutex_lock(&n->files_lock);
	}
	if (!f)
		log_warn("notifier: out of memory; pollers of %s%s%s miss a change", key->vf,
			 key->vf[0] ? "/" : "", key->vf[0] ? vf_files[key->index].name
							  : top_files[key->index].name);
}

/* Drop what the kernel caches of a page-cached file: its attributes and its
 * pages.  Waits for reads in flight on those pages (served by the FUSE
 * workers, none of which ever waits for this thread).  -ENOENT: the kernel
 * has no such inode cached, nothing to drop.  Every other file reads
 * through to us at every read; its cached attributes change only in the
 * mtime, which the toucher's write drops (the kernel does so after every
 * write), before it emits the file's IN_MODIFY. */
static void invalidate(struct notifier *n, const struct notify_key *key)
{
	fuse_ino_t ino;
	int r;

	if (!n->se || !n->inode_of ||
	    !vfile_page_cached(key->vf[0] ? &vf_files[key->index] : &top_files[key->index]))
		return;
	ino = n->inode_of(n->inode_userdata, key);
	if (!ino)
		return;
	r = fuse_lowlevel_notify_inval_inode(n->se, ino, 0, 0);
	if (r < 0 && r != -ENOENT)
		log_debug("notifier: invalidating %s%s%s failed: %s", key->vf, key->vf[0] ? "/" : "",
			  key->vf[0] ? vf_files[key->index].name : top_files[key->index].name,
			  strerror(-r));
}

/* Make the kernel emit IN_MODIFY and IN_CLOSE_WRITE: have the toucher write
 * one byte through the mount.  Our write handler recognizes it and ignores it. */
static void touch_through_mount(struct notifier *n, const struct notify_key *key)
{
	char line[PATH_MAX];
	int len;

	if (key->vf[0])
		len = snprintf(line, sizeof(line), "%s/%s/%s\n", n->mountpoint, key->vf,
			       vf_files[key->index].name);
	else
		len = snprintf(line, sizeof(line), "%s/%s\n", n->mountpoint,
			       top_files[key->index].name);
	if (len <= 0 || (size_t)len >= sizeof(line) || n->touch_fd < 0)
		return;
	for (size_t sent = 0; sent < (size_t)len;) {
		/* MSG_NOSIGNAL: a dead helper is an error here, not a SIGPIPE. */
		ssize_t w = send(n->touch_fd, line + sent, (size_t)len - sent, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!n->touch_failed)
				log_warn("notifier: the inotify helper is gone (%s); inotify watchers miss changes",
					 strerror(errno));
			n->touch_failed = true;
			return;
		}
		sent += (size_t)w;
	}
}

/* Open each path O_WRONLY, write a byte, close. */
static void touch_paths(const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int fd = open(paths[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);

		/* ENOENT: the VF went away meanwhile; nobody can watch it any more. */
		if (fd >= 0) {
			if (write(fd, "\n", 1) < 0) {
				/* nothing to do: the watchers miss this one */
			}
			close(fd);
		}
	}
}

/* The toucher: one path per line; each distinct path of what has arrived is
 * touched once. */
static _Noreturn void toucher_main(int in_fd)
{
	char buf[2 * PATH_MAX];
	size_t len = 0;

	for (;;) {
		ssize_t n = read(in_fd, buf + len, sizeof(buf) - len);
		char *start = buf, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* EOF: the notifier stopped (or died) */
		len += (size_t)n;
		/* Coalesce: every path queued by now is touched once, however
		 * often it was sent (one IN_MODIFY tells a watcher to re-read;
		 * a second would only cost the mount four more requests). */
		const char *paths[TOUCH_BATCH_MAX];
		size_t n_paths = 0;

		while ((nl = memchr(start, '\n', len - (size_t)(start - buf)))) {
			bool seen = false;

			*nl = '\0';
			for (size_t i = 0; i < n_paths && !seen; i++)
				seen = strcmp(paths[i], start) == 0;
			if (!seen && n_paths == TOUCH_BATCH_MAX) {
				touch_paths(paths, n_paths);
				n_paths = 0;
			}
			if (!seen)
				paths[n_paths++] = start;
			start = nl + 1;
		}
		touch_paths(paths, n_paths);
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
		if (len == sizeof(buf))
			len = 0; /* no newline in a full buffer: cannot be ours */
	}
}

/* Fork the toucher.  Called before any thread of ours exists. */
static int toucher_start(struct notifier *n)
{
	int fds[2];
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
		return negative_errno();
	pid = fork();
	if (pid < 0) {
		int r = negative_errno();
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0) {
		int in_fd = fds[0];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		/* Above all the /dev/fuse descriptor must go (see the notes). */
		if (in_fd > 3)
			close_range(3, (unsigned)in_fd - 1, 0);
		close_range((unsigned)in_fd + 1, ~0U, 0);
		toucher_main(in_fd);
	}
	close(fds[0]);
	n->touch_fd = fds[1];
	atomic_store(&n->writer_pid, (int)pid);
	return 0;
}

static void toucher_stop(struct notifier *n)
{
	pid_t pid = (pid_t)atomic_load(&n->writer_pid);

	if (n->touch_fd >= 0) {
		close(n->touch_fd);
		n->touch_fd = -1;
	}
	if (pid > 0) {
		/* Not left to drain the socket: its paths name files of a mount
		 * about to go away.  Killed inside a request, it just abandons it. */
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		atomic_store(&n->writer_pid, 0);
	}
}

/* Apply fn to every file of the set; every VF's files (d->all_vfs) come
 * from the store's list, taken once. */
static void dirty_for_each(struct notifier *n, const struct dirty_set *d,
			   const struct store_vf_info *list, size_t count, bool stoppable,
			   void (*fn)(struct notifier *n, const struct notify_key *key))
{
	struct notify_key key;

	for (int i = 0; i < TOP_FILE_COUNT; i++)
		if (d->top & (1u << i)) {
			key = (struct notify_key){ .index = i };
			fn(n, &key);
		}
	for (size_t v = 0; d->all_vfs && v < count; v++) {
		if (stoppable && atomic_load(&n->abandon))
			return;
		snprintf(key.vf, sizeof(key.vf), "%s", list[v].vf);
		for (int i = 0; i < VF_FILE_COUNT; i++)
			if (d->all_vfs & (1u << i)) {
				key.index = i;
				fn(n, &key);
			}
	}
	for (size_t v = 0; v < d->count; v++) {
		if (stoppable && atomic_load(&n->abandon))
			return;
		snprintf(key.vf, sizeof(key.vf), "%s", d->vfs[v].vf);
		for (int i = 0; i < VF_FILE_COUNT; i++)
			if (d->vfs[v].files & ~d->all_vfs & (1u << i)) {
				key.index = i;
				fn(n, &key);
			}
	}
}

/* Into the feeder's set: only the first file of a batch wakes it (it waits
 * for a first file, then for its pace). */
static void touch_add(struct notifier *n, unsigned top, const char *vf, unsigned files,
		      unsigned all_vfs)
{
	pthread_mutex_lock(&n->touch_lock);
	if (dirty_empty(&n->touch))
		pthread_cond_signal(&n->touch_cond);
	dirty_add(&n->touch, top, vf, files, all_vfs);
	pthread_mutex_unlock(&n->touch_lock);
}

static void hand_to_feeder(struct notifier *n, const struct dirty_set *d)
{
	touch_add(n, d->top, NULL, 0, d->all_vfs);
	for (size_t v = 0; v < d->count; v++)
		touch_add(n, 0, d->vfs[v].vf, d->vfs[v].files & ~d->all_vfs, 0);
}

/* The threads of the notifier take no signal: the daemon's main thread
 * waits for them (sigtimedwait). */
static void block_signals(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
}

/* Every registered VF into *list when d names every VF's files (*count 0
 * otherwise, or when the store was never loaded: then no VF has cached
 * pages).  must_list: a listing that fails for memory is tried again until
 * it succeeds or the notifier stops; the notifier needs it (no reply goes
 * out over pages it could not invalidate, the writers wait), the feeder,
 * which only touches, does not. */
static void dirty_list_vfs(struct notifier *n, const struct dirty_set *d, bool must_list,
			   struct store_vf_info **list, size_t *count)
{
	*count = 0;
	while (d->all_vfs && store_vf_list(n->store, list, count) == -ENOMEM && must_list &&
	       !atomic_load(&n->abandon)) {
		struct timespec pause = { .tv_nsec = 10 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	}
}

/* The ordering rule (docs/architecture.md): a change is committed (and in
 * the store's memory) before it is queued here; then this thread
 * invalidates every page-cached file it affects, then replies to the writes
 * queued with it, then wakes pollers, then hands the files to the toucher's
 * feeder, never blocking on it.  While an invalidation is queued or in
 * flight only this thread replies to writes, so no acknowledged write can
 * leave a stale page behind (tests/fs/test-freshness.sh). */
static void *notifier_main(void *arg)
{
	struct notifier *n = arg;
	struct dirty_set *d = &n->drained;

	block_signals();
	for (;;) {
		_cleanup_free_ struct store_vf_info *list = NULL;
		struct pending_reply *replies;
		size_t count = 0;
		uint64_t cached_taken;
		bool stopping;

		pthread_mutex_lock(&n->queue_lock);
		while (!n->stop && dirty_empty(&n->dirty) && !n->replies)
			pthread_cond_wait(&n->queue_cond, &n->queue_lock);
		stopping = n->stop;
		dirty_take(d, &n->dirty);
		cached_taken = n->cached_queued;
		replies = n->replies;
		n->replies = NULL;
		n->replies_tail = &n->replies;
		pthread_mutex_unlock(&n->queue_lock);

		dirty_list_vfs(n, d, true, &list, &count);
		dirty_for_each(n, d, list, count, false, mark_changed);
		dirty_for_each(n, d, list, count, false, invalidate);
		for (size_t i = 0; n->se && i < d->n_inodes; i++)
			fuse_lowlevel_notify_inval_inode(n->se, d->inodes[i], 0, 0);
		pthread_mutex_lock(&n->queue_lock);
		n->cached_done = cached_taken;
		pthread_mutex_unlock(&n->queue_lock);
		while (replies) {
			struct pending_reply *next = replies->next;
			fuse_reply_write(replies->req, replies->size);
			free(replies);
			replies = next;
		}
		if (stopping)
			break;
		dirty_for_each(n, d, list, count, true, wake_pollers);
		hand_to_feeder(n, d);
	}
	return NULL;
}

/* The feeder: sends what changed to the toucher, one path a line, each file
 * of the set once; blocks on the socket (the toucher may be slow), so that
 * the notifier never does. */
static void *feeder_main(void *arg)
{
	struct notifier *n = arg;
	struct dirty_set *d = &n->fed;

	struct timespec next_batch = { 0 };

	block_signals();
	for (;;) {
		_cleanup_free_ struct store_vf_info *list = NULL;
		size_t count = 0;

		pthread_mutex_lock(&n->touch_lock);
		while (!n->touch_stop && dirty_empty(&n->touch))
			pthread_cond_wait(&n->touch_cond, &n->touch_lock);
		/* Paced: what changes before the next batch is due joins it, so
		 * a file changing 1000 times a second costs a touch a pace. */
		while (!n->touch_stop &&
		       pthread_cond_timedwait(&n->touch_cond, &n->touch_lock, &next_batch) != ETIMEDOUT)
			;
		if (n->touch_stop) {
			pthread_mutex_unlock(&n->touch_lock);
			break;
		}
		dirty_take(d, &n->touch);
		pthread_mutex_unlock(&n->touch_lock);
		clock_gettime(CLOCK_MONOTONIC, &next_batch);
		next_batch.tv_nsec += NOTIFY_TOUCH_PACE_MS * 1000000L;
		if (next_batch.tv_nsec >= 1000000000L) {
			next_batch.tv_sec++;
			next_batch.tv_nsec -= 1000000000L;
		}
		dirty_list_vfs(n, d, false, &list, &count);
		dirty_for_each(n, d, list, count, true, touch_through_mount);
	}
	return NULL;
}

int notifier_start(struct notifier *n)
{
	int r;

	if (n->running)
		return 0;
	n->stop = false;
	n->touch_stop = false;
	atomic_store(&n->abandon, false);
	n->touch_failed = false;
	r = toucher_start(n);
	if (r < 0) {
		log_err("notifier: cannot start the inotify helper: %s", strerror(-r));
		return r;
	}
	r = pthread_create(&n->feeder, NULL, feeder_main, n);
	if (r) {
		toucher_stop(n);
		return -r;
	}
	n->feeder_running = true;
	r = pthread_create(&n->thread, NULL, notifier_main, n);
	if (r) {
		notifier_stop(n);
		return -r;
	}
	n->running = true;
	return 0;
}

/* Set a thread's stop flag under the lock its condition waits with, wake
 * it, and wait for it to end. */
static void stop_thread(pthread_t thread, pthread_mutex_t *lock, pthread_cond_t *cond,
			bool *stop)
{
	pthread_mutex_lock(lock);
	*stop = true;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(lock);
	pthread_join(thread, NULL);
}

void notifier_stop(struct notifier *n)
{
	if (!n->running && !n->feeder_running)
		return;
	atomic_store(&n->abandon, true);
	if (n->running) {
		/* its last pass still invalidates and answers every queued write */
		stop_thread(n->thread, &n->queue_lock, &n->queue_cond, &n->stop);
		n->running = false;
	}
	stop_thread(n->feeder, &n->touch_lock, &n->touch_cond, &n->touch_stop);
	n->feeder_running = false;
	toucher_stop(n);
}

void notifier_invalidate_inode(struct notifier *n, fuse_ino_t ino)
{
	bool queued = false, full;

	pthread_mutex_lock(&n->queue_lock);
	for (size_t i = 0; i < n->dirty.n_inodes && !queued; i++)
		queued = n->dirty.inodes[i] == ino; /* the root, once per drain */
	full = !queued && n->dirty.n_inodes == NOTIFY_MAX_QUEUED_INODES;
	if (!queued && !full) {
		n->dirty.inodes[n->dirty.n_inodes++] = ino;
		n->cached_queued++;
	}
	pthread_cond_signal(&n->queue_cond);
	pthread_mutex_unlock(&n->queue_lock);
	if (full)
		log_warn("notifier: too many inodes queued; a descriptor held open on an "
			 "unregistered VF's file may read its last content");
}
void notifier_set_inode_fn(struct notifier *n, notify_inode_fn fn, void *userdata)
{
	n->inode_of = fn;
	n->inode_userdata = userdata;
}

void notifier_reply_write(struct notifier *n, fuse_req_t req, size_t size)
{
	_cleanup_free_ struct pending_reply *p = malloc(sizeof(*p));
	int err = EIO;

	pthread_mutex_lock(&n->queue_lock);
	if (n->running && !n->stop && n->cached_done == n->cached_queued) {
		/* No page-cached file waits for invalidation, so neither does
		 * this write's change (queued before this call): answer now. */
		err = 0;
	} else if (n->running && !n->stop && p) {
		*p = (struct pending_reply){ .req = req, .size = size };
		*n->replies_tail = p;
		n->replies_tail = &p->next;
		p = NULL; /* the notifier's now */
		pthread_cond_signal(&n->queue_cond);
		pthread_mutex_unlock(&n->queue_lock);
		return;
	} else if (n->running && !n->stop) {
		err = ENOMEM;
	}
	pthread_mutex_unlock(&n->queue_lock);
	/* Stopping: nobody can invalidate what it changed before the reply;
	 * the change is durable, but the writer must not take it as seen
	 * (fail closed). */
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

/* -- watches and poll ---------------------------------------------------------------- */

/* O(1): a watch is linked into its file only while it holds a poll
 * handle (notify.h), so neither add nor remove walks the file's watches. */
int notifier_watch_add(struct notifier *n, struct notify_watch *w)
{
	struct watched_file *f;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, &w->key, true);
	w->file = f;
	w->pending = NULL;
	w->prev = w->next = NULL;
	if (f)
		w->seen_generation = f->generation;
	pthread_mutex_unlock(&n->files_lock);
	return f ? 0 : -ENOMEM;
}

void notifier_watch_remove(struct notifier *n, struct notify_watch *w)
{
	struct fuse_pollhandle *pending;

	pthread_mutex_lock(&n->files_lock);
	pending = w->pending;
	if (pending)
		pending_unlink(w->file, w);
	w->pending = NULL;
	w->file = NULL;
	pthread_mutex_unlock(&n->files_lock);
	if (pending)
		fuse_pollhandle_destroy(pending);
}

void notifier_seen(struct notifier *n, struct notify_watch *w)
{
	pthread_mutex_lock(&n->files_lock);
	w->seen_generation = w->file ? w->file->generation : 0;
	pthread_mutex_unlock(&n->files_lock);
}

unsigned notifier_poll(struct notifier *n, struct notify_watch *w, struct fuse_pollhandle *ph,
		       bool consume)
{
	struct fuse_pollhandle *drop = NULL;
	struct watched_file *f;
	unsigned revents = POLLIN | POLLRDNORM;

	pthread_mutex_lock(&n->files_lock);
	f = w->file;
	if (f && f->generation != w->seen_generation) {
		revents |= POLLPRI | POLLERR;
		if (consume)
			w->seen_generation = f->generation;
		drop = ph; /* nothing to wait for */
	} else if (ph && f) {
		/* One pending handle per open file: the kernel's latest one. */
		drop = w->pending;
		if (!drop)
			pending_link(f, w);
		w->pending = ph;
	} else {
		drop = ph;
	}
	pthread_mutex_unlock(&n->files_lock);
	if (drop)
		fuse_pollhandle_destroy(drop);
	return revents;
}

bool notifier_mtime(struct notifier *n, const struct notify_key *key, struct timespec *ret)
{
	struct watched_file *f;
	bool changed = false;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, key, false);
	if (f && f->changed) {
		*ret = f->mtime;
		changed = true;
	}
	pthread_mutex_unlock(&n->files_lock);
	return changed;
}
