/* SPDX-License-Identifier: MIT */
/*
 * dirty.h - the coalescing dirty set: which virtual files changed, bounded,
 * never blocking nor allocating.  A pure data structure (no lock, no I/O):
 * its owner (notify.c, toucher.c) guards it.  Files are named by bitmasks
 * over the file tables (vfiles.h): the top-level files, the per-VF files
 * of every VF, up to NOTIFY_MAX_QUEUED_VFS (VF, bitmask) entries, the
 * per-GPU files (gpus/PF/) of every GPU and up to NOTIFY_MAX_QUEUED_GPUS
 * (GPU, bitmask) entries; when the entries of a kind are full they collapse
 * into "these files of every VF" (of every GPU), losing nothing.  Inodes
 * are queued by number besides, up to NOTIFY_MAX_QUEUED_INODES.
 * Unit-tested alone: tests/fs/test-dirty.c.
 */
#ifndef VFHEALTH_FS_DIRTY_H
#define VFHEALTH_FS_DIRTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/limits.h"

/* At most this many distinct VFs are queued; beyond it the set collapses
 * into "every file of every VF", which the notifier expands from the store. */
#define NOTIFY_MAX_QUEUED_VFS 1024
/* At most this many distinct parent GPUs are queued (a host has a few);
 * beyond it the set collapses into "these files of every GPU". */
#define NOTIFY_MAX_QUEUED_GPUS 64
/* Inodes queued by number (notifier_invalidate_inode). */
#define NOTIFY_MAX_QUEUED_INODES 256

struct dirty_vf {
	char vf[VF_ADDR_BUFSZ];
	uint64_t id;    /* the store's id of vf (its inodes); 0 unknown */
	unsigned files; /* bitmask over enum vf_file_index */
};

struct dirty_gpu {
	char gpu[VF_ADDR_BUFSZ];
	unsigned files; /* bitmask over enum gpu_file_index */
};

struct dirty_set {
	unsigned top;     /* bitmask over enum top_file_index */
	unsigned all_vfs; /* bitmask over enum vf_file_index, for every VF */
	struct dirty_vf vfs[NOTIFY_MAX_QUEUED_VFS];
	size_t count;
	unsigned all_gpus; /* bitmask over enum gpu_file_index, for every GPU */
	struct dirty_gpu gpus[NOTIFY_MAX_QUEUED_GPUS];
	size_t n_gpus;
	uint64_t inodes[NOTIFY_MAX_QUEUED_INODES]; /* fuse_ino_t, by number */
	size_t n_inodes;
};

/* Add the top-level files top, the files of vf (NULL or "": none), whose
 * store id is id (0 unknown; the latest known is kept), and the files
 * all_vfs of every VF. */
void dirty_add_vf(struct dirty_set *d, unsigned top, const char *vf, uint64_t id, unsigned files,
		  unsigned all_vfs);
/* The same without an id: a set that names files by path alone (the
 * toucher's). */
void dirty_add(struct dirty_set *d, unsigned top, const char *vf, unsigned files, unsigned all_vfs);
/* Add the files of gpu's directory; gpu NULL or "": of every GPU. */
void dirty_add_gpu(struct dirty_set *d, const char *gpu, unsigned files);
/* Add an inode: 0 when added, -EEXIST when already in the set, -ENOSPC when
 * the set holds NOTIFY_MAX_QUEUED_INODES already. */
int dirty_add_inode(struct dirty_set *d, uint64_t ino);
bool dirty_empty(const struct dirty_set *d);
/* Move src into dst, emptying src. */
void dirty_take(struct dirty_set *dst, struct dirty_set *src);

#endif
