/* SPDX-License-Identifier: MIT */
/*
 * notify.c - change notification for the virtual files (notify.h): the
 * notifier thread and the ordering gate, which answers no write before what
 * it changed in the page cache is invalidated (the ordering rule:
 * docs/architecture.md).  The other parts: notify-internal.h.
 *
 * Threads and processes.  Two threads, the notifier and its feeder
 * (toucher.c), and one single-threaded helper process, the toucher
 * (toucher.c), that writes through the mount.  The store calls
 * notifier_store_change() from whichever thread committed (usually a FUSE
 * worker handling a write); FUSE workers call notifier_reply_write() and
 * the watch/poll/seen/mtime functions (watch.c).
 *
 * dirty_lock (a leaf) guards the dirty set (dirty.h), the queued write
 * replies and the two counts of page-cached invalidations (queued, done).
 * Enqueueing never blocks.
 *
 * Two ways for a change:
 *  - it changed a file readers have in the page cache (vfile_page_cached:
 *    VF/quarantined), or is store-wide, or the VFs (the root's listing,
 *    which the kernel keeps), or a parent GPU's files: it is queued.  A
 *    GPU's files are announced only when their text changed (notify.h),
 *    which takes rendering them, a store read: the notifier thread's.  The notifier drains the whole
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
 * is queued or in flight (the counts are equal, read under dirty_lock after
 * its change was queued), else by the notifier after the drain that took
 * its change; no worker ever waits for the notifier.
 *
 * Shutdown.  notifier_stop() stops the notifier thread, then the feeder
 * (stop_thread(), the one way a thread of ours stops: docs/architecture.md),
 * then the toucher.  It has to run while the session still serves
 * requests, because the toucher may be inside an open() or write() on the
 * mount.  What is still queued is dropped: the threads check `abandon`
 * between files, so a store-wide change at 65,536 VFs (hundreds of
 * thousands of files, each touched through the mount) does not hold up a
 * SIGTERM, and the touches still in the socket would only tell watchers of
 * a mount that is about to go away.
 */
#include "fs/notify-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/vfiles.h"
#include "common/cleanup.h"
#include "common/log.h"

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
	pthread_mutex_init(&n->dirty_lock, NULL);
	pthread_cond_init(&n->dirty_cond, NULL);
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
	files_free(n);
	pthread_cond_destroy(&n->touch_cond);
	pthread_mutex_destroy(&n->touch_lock);
	pthread_cond_destroy(&n->dirty_cond);
	pthread_mutex_destroy(&n->dirty_lock);
	pthread_mutex_destroy(&n->files_lock);
	free(n->mountpoint);
	free(n);
}

pid_t notifier_writer_pid(const struct notifier *n)
{
	return (pid_t)atomic_load(&((struct notifier *)n)->writer_pid);
}

static void enqueue(struct notifier *n, unsigned top, const char *vf, uint64_t vf_id,
		    unsigned vf_mask, unsigned all_vfs, const char *gpu, unsigned gpu_mask,
		    bool page_cached)
{
	if (!top && !all_vfs && (!vf_mask || !vf || !*vf) && !gpu_mask)
		return;
	pthread_mutex_lock(&n->dirty_lock);
	dirty_add_vf(&n->dirty, top, vf, vf_id, vf_mask, all_vfs);
	dirty_add_gpu(&n->dirty, gpu, gpu_mask);
	n->cached_queued += page_cached;
	pthread_cond_signal(&n->dirty_cond);
	pthread_mutex_unlock(&n->dirty_lock);
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

/* A change of one VF's files (and top-level files) none of which the kernel
 * caches: every read of them reaches us and renders what is committed, so
 * it is announced at once, from the committing thread (nothing here
 * blocks: a poll notification waits for nobody, the toucher's set is a
 * leaf), and the notifier thread is not woken at all. */
static void announce_now(struct notifier *n, unsigned top, const char *vf, unsigned vf_mask)
{
	struct notify_key key = { .scope = NOTIFY_TOP };

	for (int i = 0; i < TOP_FILE_COUNT; i++)
		if (top & (1u << i)) {
			key.index = i;
			mark_changed(n, &key);
			wake_pollers(n, &key);
		}
	key.scope = NOTIFY_VF;
	snprintf(key.addr, sizeof(key.addr), "%s", vf);
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
	/* A VF's change reaches its parent's files (none when it has no
	 * parent); a GPU's, that GPU's; one that names neither, every GPU's
	 * ("" below). */
	unsigned gpu = change->vf[0] && !change->parent[0] ?
			       0 :
			       dirtied_files(gpu_files, GPU_FILE_COUNT, change->bits);
	bool page_cached = any_page_cached(top_files, TOP_FILE_COUNT, top) ||
			   any_page_cached(vf_files, VF_FILE_COUNT, vf) ||
			   any_page_cached(gpu_files, GPU_FILE_COUNT, gpu);

	/* The root's listing, which the kernel keeps (listing.c), names the VFs. */
	if (change->bits & STORE_CHANGE_VFS)
		notifier_invalidate_inode(n, FUSE_ROOT_ID);
	/* A change that names no VF is store-wide: its per-VF files change
	 * for every VF (vfiles.h). */
	if (change->vf[0] && !page_cached) {
		announce_now(n, top, change->vf, vf);
		enqueue(n, 0, NULL, 0, 0, 0, change->parent, gpu, false);
	} else if (change->vf[0]) {
		enqueue(n, top, change->vf, change->vf_id, vf, 0, change->parent, gpu, page_cached);
	} else {
		enqueue(n, top, NULL, 0, 0, vf, change->parent, gpu, page_cached);
	}
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

	if (!n->se || !n->inode_of || !vfile_page_cached(key_vfile(key)))
		return;
	ino = n->inode_of(n->inode_userdata, key);
	if (!ino)
		return;
	r = fuse_lowlevel_notify_inval_inode(n->se, ino, 0, 0);
	if (r < 0 && r != -ENOENT) {
		char path[VF_ADDR_BUFSZ + 64];
		key_path(key, path, sizeof(path));
		log_debug("notifier: invalidating %s failed: %s", path, strerror(-r));
	}
}

/* Apply fn to each file of gpu's directory in files. */
static void each_gpu_file(struct notifier *n, const char *gpu, unsigned files,
			  void (*fn)(struct notifier *n, const struct notify_key *key))
{
	struct notify_key key = { .scope = NOTIFY_GPU };

	snprintf(key.addr, sizeof(key.addr), "%s", gpu);
	for (int i = 0; i < GPU_FILE_COUNT; i++)
		if (files & (1u << i)) {
			key.index = i;
			fn(n, &key);
		}
}

/* Apply fn to every file of the set; every VF's files (d->all_vfs) and
 * every GPU's (d->all_gpus) come from the store's lists, taken once. */
void each_dirty_file(struct notifier *n, const struct dirty_set *d, const struct dirty_lists *l,
		     bool stoppable, void (*fn)(struct notifier *n, const struct notify_key *key))
{
	struct notify_key key;

	for (int i = 0; i < TOP_FILE_COUNT; i++)
		if (d->top & (1u << i)) {
			key = (struct notify_key){ .scope = NOTIFY_TOP, .index = i };
			fn(n, &key);
		}
	for (size_t g = 0; d->all_gpus && g < l->n_gpus; g++)
		each_gpu_file(n, l->gpus[g].parent, d->all_gpus, fn);
	for (size_t g = 0; g < d->n_gpus; g++)
		each_gpu_file(n, d->gpus[g].gpu, d->gpus[g].files & ~d->all_gpus, fn);
	key.scope = NOTIFY_VF;
	for (size_t v = 0; d->all_vfs && v < l->n_vfs; v++) {
		if (stoppable && atomic_load(&n->abandon))
			return;
		snprintf(key.addr, sizeof(key.addr), "%s", l->vfs[v].vf);
		key.vf_id = l->vfs[v].id;
		for (int i = 0; i < VF_FILE_COUNT; i++)
			if (d->all_vfs & (1u << i)) {
				key.index = i;
				fn(n, &key);
			}
	}
	for (size_t v = 0; v < d->count; v++) {
		if (stoppable && atomic_load(&n->abandon))
			return;
		snprintf(key.addr, sizeof(key.addr), "%s", d->vfs[v].vf);
		key.vf_id = d->vfs[v].id;
		for (int i = 0; i < VF_FILE_COUNT; i++)
			if (d->vfs[v].files & ~d->all_vfs & (1u << i)) {
				key.index = i;
				fn(n, &key);
			}
	}
}

/* The threads of the notifier take no signal: the daemon's main thread
 * waits for them (sigtimedwait). */
void block_signals(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
}

static void list_pause(void)
{
	struct timespec pause = { .tv_nsec = 10L * 1000 * 1000 };
	nanosleep(&pause, NULL);
}

/* Every registered VF when d names every VF's files, every GPU when it
 * names every GPU's (none otherwise, or when the store was never loaded:
 * then no VF has cached pages).  must_list: a listing that fails for
 * memory is tried again until it succeeds or the notifier stops; the
 * notifier needs it (no reply goes out over pages it could not
 * invalidate, the writers wait), the feeder, which only touches, does not. */
void list_dirty(struct notifier *n, const struct dirty_set *d, bool must_list,
		struct dirty_lists *l)
{
	*l = (struct dirty_lists){ 0 };
	while (d->all_vfs && store_vf_list(n->store, &l->vfs, &l->n_vfs) == -ENOMEM && must_list &&
	       !atomic_load(&n->abandon))
		list_pause();
	while (d->all_gpus && store_gpu_list(n->store, &l->gpus, &l->n_gpus) == -ENOMEM &&
	       must_list && !atomic_load(&n->abandon))
		list_pause();
}

void dirty_lists_free(struct dirty_lists *l)
{
	free(l->vfs);
	free(l->gpus);
	*l = (struct dirty_lists){ 0 };
}

/* The hash of what a render of gpu's file f says now (its text and its
 * result); false when it could not be rendered. */
static bool render_hash(struct notifier *n, const char *gpu, const struct vfile *f, uint64_t *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	/* read: STORE_READ_NORETRY, as any reader's that may not repair */
	struct vfile_call call = { .store = n->store, .vf = gpu };
	FILE *out = open_memstream(&buf, &len);
	uint64_t h = 14695981039346656037ULL;
	int r;

	if (!out)
		return false;
	r = f->render ? f->render(&call, out) : 0;
	if (fclose(out) != 0 || r == -ENOMEM)
		return false;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
	*ret = (h ^ (uint64_t)(uint32_t)r) * 1099511628211ULL;
	return true;
}

/* The files of mask of gpu's directory whose text differs from the one last
 * announced. */
static unsigned gpu_files_changed(struct notifier *n, const char *gpu, unsigned mask)
{
	struct notify_key key = { .scope = NOTIFY_GPU };
	unsigned changed = 0;
	uint64_t hash;

	snprintf(key.addr, sizeof(key.addr), "%s", gpu);
	for (int i = 0; i < GPU_FILE_COUNT; i++) {
		if (!(mask & (1u << i)))
			continue;
		key.index = i;
		if (content_changed(n, &key,
				    render_hash(n, gpu, &gpu_files[i], &hash) ? &hash : NULL))
			changed |= 1u << i;
	}
	return changed;
}

/* Keep in d only the GPU files whose text changed (notify.h).  At most
 * NOTIFY_MAX_QUEUED_GPUS were named, so they cannot collapse into every
 * GPU's unless every GPU's were dirty, and then l lists them. */
static void keep_changed_gpu_files(struct notifier *n, struct dirty_set *d,
				   const struct dirty_lists *l)
{
	struct dirty_gpu named[NOTIFY_MAX_QUEUED_GPUS];
	size_t n_named = d->n_gpus;
	unsigned all = d->all_gpus;

	memcpy(named, d->gpus, n_named * sizeof(*named));
	d->n_gpus = 0;
	d->all_gpus = 0;
	for (size_t i = 0; i < n_named; i++)
		dirty_add_gpu(d, named[i].gpu,
			      gpu_files_changed(n, named[i].gpu, named[i].files | all));
	for (size_t g = 0; all && g < l->n_gpus; g++) {
		bool seen = false;
		for (size_t i = 0; i < n_named && !seen; i++)
			seen = strcmp(named[i].gpu, l->gpus[g].parent) == 0;
		if (!seen)
			dirty_add_gpu(d, l->gpus[g].parent,
				      gpu_files_changed(n, l->gpus[g].parent, all));
	}
}

/* The notifier thread: each drained set in the order the ordering rule
 * (docs/architecture.md) sets, then pollers, then the feeder, on which it
 * never blocks (tests/fs/test-freshness.sh). */
static void *notifier_main(void *arg)
{
	struct notifier *n = arg;
	struct dirty_set *d = &n->drained;

	block_signals();
	for (;;) {
		struct dirty_lists lists;
		struct pending_reply *replies;
		uint64_t cached_taken;
		bool stopping;

		pthread_mutex_lock(&n->dirty_lock);
		while (!n->stop && dirty_empty(&n->dirty) && !n->replies)
			pthread_cond_wait(&n->dirty_cond, &n->dirty_lock);
		stopping = n->stop;
		dirty_take(d, &n->dirty);
		cached_taken = n->cached_queued;
		replies = n->replies;
		n->replies = NULL;
		n->replies_tail = &n->replies;
		pthread_mutex_unlock(&n->dirty_lock);

		list_dirty(n, d, true, &lists);
		if (!atomic_load(&n->abandon))
			keep_changed_gpu_files(n, d, &lists);
		each_dirty_file(n, d, &lists, false, mark_changed);
		each_dirty_file(n, d, &lists, false, invalidate);
		for (size_t i = 0; n->se && i < d->n_inodes; i++)
			fuse_lowlevel_notify_inval_inode(n->se, d->inodes[i], 0, 0);
		pthread_mutex_lock(&n->dirty_lock);
		n->cached_done = cached_taken;
		pthread_mutex_unlock(&n->dirty_lock);
		while (replies) {
			struct pending_reply *next = replies->next;
			fuse_reply_write(replies->req, replies->size);
			free(replies);
			replies = next;
		}
		if (stopping) {
			dirty_lists_free(&lists);
			break;
		}
		each_dirty_file(n, d, &lists, true, wake_pollers);
		hand_to_feeder(n, d);
		dirty_lists_free(&lists);
	}
	return NULL;
}

/* What every GPU's files say when the notifier starts, as if announced:
 * before the mount is served nobody can have read anything else, and so
 * only what changes from then on is announced.  A GPU that appears later
 * has its files' first change announced, whatever it is. */
static void gpu_files_seen_at_start(struct notifier *n)
{
	_cleanup_free_ struct store_gpu_info *gpus = NULL;
	size_t count = 0;
	unsigned notified = 0;

	for (int i = 0; i < GPU_FILE_COUNT; i++)
		if (gpu_files[i].flags & VFILE_NOTIFY)
			notified |= 1u << i;
	if (!n->store || store_gpu_list(n->store, &gpus, &count) < 0)
		return; /* not loaded: every first change is announced */
	for (size_t g = 0; g < count; g++)
		gpu_files_changed(n, gpus[g].parent, notified);
}

int notifier_start(struct notifier *n)
{
	int r;

	if (n->running)
		return 0;
	gpu_files_seen_at_start(n);
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
static void stop_thread(pthread_t thread, pthread_mutex_t *lock, pthread_cond_t *cond, bool *stop)
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
		stop_thread(n->thread, &n->dirty_lock, &n->dirty_cond, &n->stop);
		n->running = false;
	}
	stop_thread(n->feeder, &n->touch_lock, &n->touch_cond, &n->touch_stop);
	n->feeder_running = false;
	toucher_stop(n);
}

void notifier_invalidate_inode(struct notifier *n, fuse_ino_t ino)
{
	int r;

	pthread_mutex_lock(&n->dirty_lock);
	r = dirty_add_inode(&n->dirty, ino); /* -EEXIST: the root, once per drain */
	if (r == 0)
		n->cached_queued++;
	pthread_cond_signal(&n->dirty_cond);
	pthread_mutex_unlock(&n->dirty_lock);
	if (r == -ENOSPC)
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

	pthread_mutex_lock(&n->dirty_lock);
	if (n->running && !n->stop && n->cached_done == n->cached_queued) {
		/* No page-cached file waits for invalidation, so neither does
		 * this write's change (queued before this call): answer now. */
		err = 0;
	} else if (n->running && !n->stop && p) {
		*p = (struct pending_reply){ .req = req, .size = size };
		*n->replies_tail = p;
		n->replies_tail = &p->next;
		p = NULL; /* the notifier's now */
		pthread_cond_signal(&n->dirty_cond);
		pthread_mutex_unlock(&n->dirty_lock);
		return;
	} else if (n->running && !n->stop) {
		err = ENOMEM;
	}
	pthread_mutex_unlock(&n->dirty_lock);
	/* Stopping: nobody can invalidate what it changed before the reply;
	 * the change is durable, but the writer must not take it as seen
	 * (fail closed). */
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}
