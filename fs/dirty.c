/* SPDX-License-Identifier: MIT */
/*
 * dirty.c - the coalescing dirty set (dirty.h).
 */
#include "fs/dirty.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void dirty_add_vf(struct dirty_set *d, unsigned top, const char *vf, uint64_t id, unsigned files,
		  unsigned all_vfs)
{
	d->top |= top;
	d->all_vfs |= all_vfs;
	if (!files || !vf || !*vf)
		return;
	for (size_t i = 0; i < d->count; i++)
		if (strcmp(d->vfs[i].vf, vf) == 0) {
			d->vfs[i].files |= files;
			if (id)
				d->vfs[i].id = id;
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
	d->vfs[d->count].id = id;
	d->vfs[d->count].files = files;
	d->count++;
}

void dirty_add(struct dirty_set *d, unsigned top, const char *vf, unsigned files, unsigned all_vfs)
{
	dirty_add_vf(d, top, vf, 0, files, all_vfs);
}

void dirty_add_gpu(struct dirty_set *d, const char *gpu, unsigned files)
{
	if (!files)
		return;
	if (!gpu || !*gpu) {
		d->all_gpus |= files;
		return;
	}
	for (size_t i = 0; i < d->n_gpus; i++)
		if (strcmp(d->gpus[i].gpu, gpu) == 0) {
			d->gpus[i].files |= files;
			return;
		}
	if (d->n_gpus == NOTIFY_MAX_QUEUED_GPUS) {
		/* Full: merge into "these files of every GPU"; nothing is lost. */
		for (size_t i = 0; i < d->n_gpus; i++)
			d->all_gpus |= d->gpus[i].files;
		d->all_gpus |= files;
		d->n_gpus = 0;
		return;
	}
	snprintf(d->gpus[d->n_gpus].gpu, VF_ADDR_BUFSZ, "%s", gpu);
	d->gpus[d->n_gpus].files = files;
	d->n_gpus++;
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
	return !d->top && !d->all_vfs && !d->count && !d->all_gpus && !d->n_gpus && !d->n_inodes;
}

void dirty_take(struct dirty_set *dst, struct dirty_set *src)
{
	dst->top = src->top;
	dst->all_vfs = src->all_vfs;
	dst->count = src->count;
	memcpy(dst->vfs, src->vfs, src->count * sizeof(*src->vfs));
	dst->all_gpus = src->all_gpus;
	dst->n_gpus = src->n_gpus;
	memcpy(dst->gpus, src->gpus, src->n_gpus * sizeof(*src->gpus));
	dst->n_inodes = src->n_inodes;
	memcpy(dst->inodes, src->inodes, src->n_inodes * sizeof(*src->inodes));
	src->top = src->all_vfs = src->all_gpus = 0;
	src->count = src->n_gpus = src->n_inodes = 0;
}
