/* SPDX-License-Identifier: MIT */
/*
 * notify-internal.h - what the files of the notifier share (notify.h is
 * the public side).  One file per mechanism:
 *   notify.c   the notifier thread and the ordering gate: what a store
 *              change dirties, the queue, invalidation before the reply
 *   watch.c    the file table: generations, mtimes, watches and poll,
 *              the text each GPU file last announced (its hash)
 *   toucher.c  the toucher process and the paced feeder thread
 *   dirty.c    the coalescing dirty set both threads queue into (pure)
 * Locks: the rows of `files_lock`, `dirty_lock`, `touch_lock` and their
 * condition variables in docs/architecture.md's lock table; none is held
 * across any call into the store or the mount.
 */
#ifndef VFHEALTH_FS_NOTIFY_INTERNAL_H
#define VFHEALTH_FS_NOTIFY_INTERNAL_H

#include "fs/notify.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "fs/dirty.h"

#define FILE_BUCKETS_MIN 256 /* the file table grows by doubling past 2 files a bucket */

struct watched_file {
	struct notify_key key;
	uint64_t generation;
	struct timespec mtime;
	bool changed;
	bool rendered;                /* a GPU file: content_hash holds its last announced text */
	uint64_t content_hash;        /* ... hashed with its render's result */
	struct notify_watch *pending; /* the watches holding a poll handle, doubly linked */
	size_t n_pending;
	struct watched_file *next;
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

	/* dirty_lock (a leaf): what changed, and the writes waiting for it */
	pthread_mutex_t dirty_lock;
	pthread_cond_t dirty_cond;
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
	bool touch_pacing; /* the feeder waits for its next batch: a change needs no wake */
	/* each thread's copy of the set it drained (no allocation: a drained
	 * set is never dropped, or a write could be answered uninvalidated) */
	struct dirty_set drained, fed;

	pthread_t thread, feeder;
	bool running, feeder_running;
	int touch_fd;          /* our end of the socket pair to the toucher */
	atomic_int writer_pid; /* the toucher */
	bool touch_failed;     /* logged once */
};

/* watch.c */
/* The table entry of the key's file. */
const struct vfile *key_vfile(const struct notify_key *key);
/* The file's path under the mount ("VF/name", "gpus/PF/name", "name");
 * the snprintf length. */
int key_path(const struct notify_key *key, char *buf, size_t size);
/* Whether a GPU file's text (its hash) differs from the one last announced,
 * which it becomes; true when none was, or when hash is NULL (it could not
 * be rendered: then none is kept, so the next change is announced too). */
bool content_changed(struct notifier *n, const struct notify_key *key, const uint64_t *hash);
/* Free the file table and every pending poll handle in it. */
void files_free(struct notifier *n);
void mark_changed(struct notifier *n, const struct notify_key *key);
void wake_pollers(struct notifier *n, const struct notify_key *key);

/* notify.c */
/* What a dirty set's "every VF" and "every GPU" expand to: the store's
 * lists, taken once per set (empty when the set names no such file). */
struct dirty_lists {
	struct store_vf_info *vfs;
	size_t n_vfs;
	struct store_gpu_info *gpus;
	size_t n_gpus;
};
void each_dirty_file(struct notifier *n, const struct dirty_set *d, const struct dirty_lists *l,
		     bool stoppable, void (*fn)(struct notifier *n, const struct notify_key *key));
void block_signals(void);
/* must_list: a listing that fails for memory is tried again until it
 * succeeds or the notifier stops.  dirty_lists_free() frees them. */
void list_dirty(struct notifier *n, const struct dirty_set *d, bool must_list,
		struct dirty_lists *l);
void dirty_lists_free(struct dirty_lists *l);

/* toucher.c */
int toucher_start(struct notifier *n);
void toucher_stop(struct notifier *n);
void touch_add(struct notifier *n, unsigned top, const char *vf, unsigned files, unsigned all_vfs);
void touch_add_gpu(struct notifier *n, const char *gpu, unsigned files);
void hand_to_feeder(struct notifier *n, const struct dirty_set *d);
void *feeder_main(void *arg);

#endif
