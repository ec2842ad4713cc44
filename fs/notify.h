/* SPDX-License-Identifier: MIT */
/*
 * notify.h - the one module that tells the kernel (and so inotify and poll
 * watchers) that a virtual file's content changed.
 *
 * Contract:
 *  - notifier_store_change() takes each store change (the filesystem's
 *    store subscriber, vffs_store_changed, hands it on).  It maps a
 *    store_change to the files whose content it changes (the `changes`
 *    column of the vfiles.h tables, the one home of that map) and never
 *    blocks on anything but leaf mutexes.  A change of files the kernel
 *    caches (vfile_page_cached(), the root's listing for VF changes) or of
 *    every VF goes into a bounded coalescing set for the notifier thread
 *    (when full it collapses into "all files dirty": merged, never lost).
 *    A change of one VF's read-through files only (a routine report) is
 *    announced from the calling thread at once: mtime, pollers, toucher.
 *  - Announcing a file: record its mtime, bump its content generation,
 *    call fuse_lowlevel_notify_poll() on its pending poll handles, and hand
 *    it to the feeder thread, which has a helper process open the file
 *    through the mount O_WRONLY, write one byte and close it, so that the
 *    kernel emits IN_MODIFY and IN_CLOSE_WRITE (FUSE sends no inotify
 *    events for changes a daemon makes itself), paced: a file is touched at
 *    most every NOTIFY_TOUCH_PACE_MS, and its last change always gets one.
 *    The filesystem's open and write handlers recognize the helper
 *    (fuse_req_ctx()->pid == notifier_writer_pid()) and change nothing.  A
 *    process, not a thread: see toucher.c.
 *  - Poll is sysfs-style: a watch (one per open file) remembers the content
 *    generation it has seen; notifier_poll() reports POLLPRI|POLLERR (plus
 *    POLLIN|POLLRDNORM) once the file's generation moved past it, and
 *    notifier_seen() (called by a read at offset 0) catches up.
 *  - Files are named by a notify_key: its table (top level, a VF's, a
 *    parent GPU's gpus/PF/), the VF's or GPU's address and the index in
 *    that vfiles.h table.  A VF's key also carries the id the store's
 *    change (or its list of VFs) named, which names the VF's inodes: the
 *    notifier never asks the store for it (tests/fs/test-freshness.sh
 *    finds stale reads without it).  A change reaches a GPU's files through the
 *    parent it names (store_change.parent); one that names neither a VF
 *    nor a parent reaches every GPU's.  The notifier thread renders each
 *    GPU file a change dirtied and announces it only when its text differs
 *    from the one it last announced (a claim on a serving GPU's VF leaves
 *    its state as it was): GPU files are few, and their renders read
 *    memory, or SQLite for history.
 *  - Invalidation and write replies: the ordering rule of
 *    docs/architecture.md, applied by notifier_reply_write() and the
 *    notifier thread (notify.c).  No FUSE worker ever waits for this
 *    thread: a worker that did could hold the only worker a read needs
 *    while the thread waits for that read's page.
 *  - notifier_start() forks the helper: call it before the process has
 *    other threads.  notifier_stop() must run while the mount is still
 *    served: the helper may be inside an open() on the mount.  It drops
 *    what is still queued (it is called to take the mount away), so it
 *    returns within one file's notification, however many are dirty.
 *
 * All functions return 0 or a negative errno unless stated otherwise.
 */
#ifndef VFHEALTH_NOTIFY_H
#define VFHEALTH_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/dirty.h"
#include "store/store.h"

/* The toucher's pace: inotify events for a file follow its changes at most
 * every NOTIFY_TOUCH_PACE_MS, and while the changes keep coming, at most
 * every NOTIFY_TOUCH_PACE_MAX_MS (the first change after a quiet spell at
 * once, the last one always); vfhealth(5), CHANGE NOTIFICATION. */
#define NOTIFY_TOUCH_PACE_MS 10
#define NOTIFY_TOUCH_PACE_MAX_MS 100

struct notifier;
struct watched_file;

enum notify_scope {
	NOTIFY_TOP, /* a top-level file (the zero value) */
	NOTIFY_VF,  /* a file of a VF's directory */
	NOTIFY_GPU, /* a file of a parent GPU's directory, gpus/PF/ */
};

struct notify_key {
	enum notify_scope scope;
	char addr[VF_ADDR_BUFSZ]; /* the VF's or the GPU's address; "" for a top-level file */
	int index;                /* index in top_files[], vf_files[] or gpu_files[] */
	/* NOTIFY_VF: the VF's store id, which names its inodes, as the store's
	 * change or list gave it (0 unknown: nothing to invalidate); not part
	 * of the key's identity */
	uint64_t vf_id;
};

/* One per open file that can be polled; embedded in the open-file state.
 * Adding and removing one costs O(1) whatever the file's other watches: a
 * watch is linked into its file only while it holds a pending poll handle,
 * so waking a file's pollers costs what its waiting pollers cost. */
struct notify_watch {
	struct notify_key key;
	uint64_t seen_generation;
	struct fuse_pollhandle *pending; /* owned; destroyed on notify or removal */
	struct watched_file *file; /* set by notifier_watch_add; never freed before the notifier */
	struct notify_watch *prev, *next; /* in the file's list of pending watches */
};

int notifier_new(struct fuse_session *se, const char *mountpoint, struct store *store,
		 struct notifier **ret);
/* Stops the thread if running and frees everything, pending poll handles too. */
void notifier_free(struct notifier *n);

int notifier_start(struct notifier *n);
void notifier_stop(struct notifier *n);

/* The pid of the process whose writes through the mount are the notifier's
 * (single-threaded, so also its thread id); 0 when not running. */
pid_t notifier_writer_pid(const struct notifier *n);

/* The inode of a file in the mount, 0 when it has none (its VF is gone);
 * called by the notifier thread, may read the store. */
typedef fuse_ino_t (*notify_inode_fn)(void *userdata, const struct notify_key *key);
/* Before notifier_start(); without it (or without a session) nothing is
 * invalidated. */
void notifier_set_inode_fn(struct notifier *n, notify_inode_fn fn, void *userdata);

/* Reply fuse_reply_write(req, size) once every page-cached inode a change
 * queued before this call affects is invalidated: at once, from the
 * caller, when none waits for invalidation (the routine report), else from
 * the notifier thread after it invalidated them.  The caller (a FUSE
 * worker) returns at once and must not touch req again.  When the notifier
 * is not running (stopping) the write is answered EIO at once: its change
 * is durable but cannot be shown fresh. */
void notifier_reply_write(struct notifier *n, fuse_req_t req, size_t size);

/* Have the notifier thread invalidate inode ino (a file whose name no
 * longer leads to it: an unregistered VF's), as it does a changed file's.
 * Never blocks; at most NOTIFY_MAX_QUEUED_INODES wait at once (more are
 * logged and dropped). */
void notifier_invalidate_inode(struct notifier *n, fuse_ino_t ino);

/* The store callback; userdata is the struct notifier. */
void notifier_store_change(void *userdata, const struct store_change *change);

/* Register a watch for an open file; it starts as having seen the current
 * content.  -ENOMEM only. */
int notifier_watch_add(struct notifier *n, struct notify_watch *w);
void notifier_watch_remove(struct notifier *n, struct notify_watch *w);
/* The reader is about to render the file afresh. */
void notifier_seen(struct notifier *n, struct notify_watch *w);
/* The poll handler: returns the revents; keeps ph (or destroys it) either way.
 * consume: report a change once (the watch has seen it from then on), for
 * page-cached files, whose re-read at offset 0 may never reach the daemon
 * (notifier_seen); else POLLPRI until the reader re-reads. */
unsigned notifier_poll(struct notifier *n, struct notify_watch *w, struct fuse_pollhandle *ph,
		       bool consume);

/* When the file last changed; false when it has not changed since start. */
bool notifier_mtime(struct notifier *n, const struct notify_key *key, struct timespec *ret);

#endif
