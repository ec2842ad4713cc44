/* SPDX-License-Identifier: MIT */
/*
 * watch.c - the notifier's file table (notify-internal.h): per file (VF
 * address + table index) the content generation, the mtime, and the list
 * of open-file watches that hold a pending fuse_pollhandle (a watch with
 * none is in no list: opening and closing a file costs O(1) however many
 * hold it open, a GPU's file as a VF's); a GPU file's last announced text
 * (its hash); and the poll handler's side of it.
 *
 * files_lock guards the table.  Held for a few pointer operations; waking
 * pollers takes it once per batch of WAKE_BATCH handles.
 *
 * Memory.  File entries are created when a file is opened or changes and
 * are kept (keyed by VF or GPU address, so re-registering a VF reuses
 * them); they number at most the files of every VF and GPU address ever
 * used (a store-wide
 * change creates one for every notified file of every VF: about 40 MB at
 * 65,536 VFs).  The table doubles its buckets past two entries a bucket.
 * Pending poll handles are destroyed when their watch is removed or in
 * files_free().
 */
#include "fs/notify-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/vfiles.h"
#include "common/log.h"

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

const struct vfile *key_vfile(const struct notify_key *key)
{
	switch (key->scope) {
	case NOTIFY_VF:
		return &vf_files[key->index];
	case NOTIFY_GPU:
		return &gpu_files[key->index];
	case NOTIFY_TOP:
	default:
		return &top_files[key->index];
	}
}

int key_path(const struct notify_key *key, char *buf, size_t size)
{
	switch (key->scope) {
	case NOTIFY_VF:
		return snprintf(buf, size, "%s/%s", key->addr, vf_files[key->index].name);
	case NOTIFY_GPU:
		return snprintf(buf, size, "%s/%s/%s", top_files[TOP_GPUS].name, key->addr,
				gpu_files[key->index].name);
	case NOTIFY_TOP:
	default:
		return snprintf(buf, size, "%s", top_files[key->index].name);
	}
}

static size_t key_hash(const struct notify_key *key, size_t n_buckets)
{
	unsigned h = 2166136261u;

	for (const char *p = key->addr; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ (unsigned)key->scope) * 16777619u;
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
	return a->index == b->index && a->scope == b->scope && strcmp(a->addr, b->addr) == 0;
}

/* Under files_lock. */
static struct watched_file *file_find(struct notifier *n, const struct notify_key *key, bool create)
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

/* Record when the file changed (its mtime; before the invalidation, so that
 * the attributes the kernel asks for next show it). */
void mark_changed(struct notifier *n, const struct notify_key *key)
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
void wake_pollers(struct notifier *n, const struct notify_key *key)
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
	if (!f) {
		char path[VF_ADDR_BUFSZ + 64];
		key_path(key, path, sizeof(path));
		log_warn("notifier: out of memory; pollers of %s miss a change", path);
	}
}

bool content_changed(struct notifier *n, const struct notify_key *key, const uint64_t *hash)
{
	struct watched_file *f;
	bool changed = true;

	pthread_mutex_lock(&n->files_lock);
	f = file_find(n, key, true);
	if (f) {
		changed = !hash || !f->rendered || f->content_hash != *hash;
		f->rendered = hash != NULL;
		f->content_hash = hash ? *hash : 0;
	}
	pthread_mutex_unlock(&n->files_lock);
	return changed;
}

/* O(1): a watch is linked into its file only while it holds a poll
 * handle (notify.h), so neither add nor remove walks the file's watches. */
void files_free(struct notifier *n)
{
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
	free(n->buckets);
	n->buckets = NULL;
}

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
