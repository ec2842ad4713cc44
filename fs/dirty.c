/* SPDX-License-Identifier: MIT */
/*
 * dirty.c - the coalescing dirty set (dirty.h).
 */
#include "fs/dirty.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void dirty_add(struct dirty_set *d, unsigned top, const char *vf, unsigned files, unsigned all_vfs)
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

int dirty_add_inode(struct dirty_set *d, uint64_t ino)
{
	for (size_t i = 0; i < d->n_inodes; i++)
		if (d->inodes[i] == ino)
			return -EEXIST;
	if (d->n_inodes == NOTIFY_MAX_QUEUED_INODES)
		return -ENOSPC;
	d->inodes[d->n_inodes++] = ino;
	return 0;
}

bool dirty_empty(const struct dirty_set *d)
{
	return !d->top && !d->all_vfs && !d->count && !d->n_inodes;
}

void dirty_take(struct dirty_set *dst, struct dirty_set *src)
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
