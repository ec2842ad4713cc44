/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the coalescing dirty set (fs/dirty.h) alone: coalescing,
 * the VF's store id carried with its entry (the inodes the notifier
 * invalidates, never looked up by address), the collapse when its VF or GPU slots are full (nothing lost), the
 * inodes by number and their bound, and take (move and empty).
 *
 * Design notes: each test runs in its own forked process (Check's default);
 * no thread, no lock: the set is a pure data structure.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/dirty.h"
#include "tests/common/check-main.h"

static struct dirty_set *set_new(void)
{
	struct dirty_set *d = calloc(1, sizeof(*d));

	ck_assert_ptr_nonnull(d);
	return d;
}

static void vf_name(size_t i, char out[VF_ADDR_BUFSZ])
{
	snprintf(out, VF_ADDR_BUFSZ, "0000:%02zx:%02zx.%zu", (i / 64) & 0xff, (i / 8) % 8, i % 8);
}

START_TEST(test_coalesce)
{
	struct dirty_set *d = set_new();

	ck_assert(dirty_empty(d));
	dirty_add(d, 0x1, "0000:01:00.1", 0x2, 0);
	dirty_add(d, 0x4, "0000:01:00.1", 0x8, 0);
	dirty_add(d, 0, "0000:01:00.2", 0x1, 0x10);
	ck_assert(!dirty_empty(d));
	ck_assert_uint_eq(d->top, 0x5);
	ck_assert_uint_eq(d->all_vfs, 0x10);
	ck_assert_uint_eq(d->count, 2); /* one entry per VF, however often it changed */
	ck_assert_str_eq(d->vfs[0].vf, "0000:01:00.1");
	ck_assert_uint_eq(d->vfs[0].files, 0xa);
	ck_assert_str_eq(d->vfs[1].vf, "0000:01:00.2");
	ck_assert_uint_eq(d->vfs[1].files, 0x1);
	/* files without a VF name no VF: only top and all_vfs count */
	dirty_add(d, 0, NULL, 0x40, 0);
	dirty_add(d, 0, "", 0x40, 0);
	ck_assert_uint_eq(d->count, 2);
	free(d);
}
END_TEST

/* The store's change names the VF's id; the entry keeps the latest one
 * known (an addition by path alone, the toucher's, keeps it), and a VF
 * registered again under a new id is invalidated under that one. */
START_TEST(test_vf_id)
{
	struct dirty_set *d = set_new(), *taken = set_new();

	dirty_add_vf(d, 0, "0000:01:00.1", 7, 0x1, 0);
	dirty_add(d, 0, "0000:01:00.1", 0x2, 0);
	dirty_add_vf(d, 0, "0000:01:00.2", 0, 0x1, 0);
	ck_assert_uint_eq(d->count, 2);
	ck_assert_uint_eq(d->vfs[0].id, 7);
	ck_assert_uint_eq(d->vfs[0].files, 0x3);
	ck_assert_uint_eq(d->vfs[1].id, 0); /* unknown: nothing to invalidate */
	dirty_add_vf(d, 0, "0000:01:00.2", 9, 0x4, 0);
	ck_assert_uint_eq(d->vfs[1].id, 9);
	dirty_add_vf(d, 0, "0000:01:00.1", 8, 0x4, 0); /* registered again */
	ck_assert_uint_eq(d->vfs[0].id, 8);
	dirty_take(taken, d);
	ck_assert_uint_eq(taken->vfs[0].id, 8);
	ck_assert_uint_eq(taken->vfs[1].id, 9);
	free(taken);
	free(d);
}
END_TEST

START_TEST(test_collapse_loses_nothing)
{
	struct dirty_set *d = set_new();
	char vf[VF_ADDR_BUFSZ];

	for (size_t i = 0; i < NOTIFY_MAX_QUEUED_VFS; i++) {
		vf_name(i, vf);
		dirty_add(d, 0, vf, 1u << (i % 4), 0);
	}
	ck_assert_uint_eq(d->count, NOTIFY_MAX_QUEUED_VFS);
	ck_assert_uint_eq(d->all_vfs, 0);
	/* a VF already in the set still coalesces when it is full */
	vf_name(0, vf);
	dirty_add(d, 0, vf, 0x100, 0);
	ck_assert_uint_eq(d->count, NOTIFY_MAX_QUEUED_VFS);
	/* one more: every file any VF had dirty becomes dirty for every VF */
	vf_name(NOTIFY_MAX_QUEUED_VFS, vf);
	dirty_add(d, 0, vf, 0x20, 0);
	ck_assert_uint_eq(d->count, 0);
	ck_assert_uint_eq(d->all_vfs, 0x1 | 0x2 | 0x4 | 0x8 | 0x100 | 0x20);
	ck_assert(!dirty_empty(d));
	free(d);
}
END_TEST

START_TEST(test_gpus_coalesce_apart_from_vfs)
{
	struct dirty_set *d = set_new();

	dirty_add_gpu(d, "0000:41:00.0", 0x2);
	dirty_add_gpu(d, "0000:41:00.0", 0x4);
	dirty_add_gpu(d, "0000:42:00.0", 0x1);
	dirty_add_gpu(d, "0000:43:00.0", 0); /* no file: nothing */
	ck_assert(!dirty_empty(d));
	ck_assert_uint_eq(d->n_gpus, 2);
	ck_assert_str_eq(d->gpus[0].gpu, "0000:41:00.0");
	ck_assert_uint_eq(d->gpus[0].files, 0x6);
	ck_assert_str_eq(d->gpus[1].gpu, "0000:42:00.0");
	ck_assert_uint_eq(d->gpus[1].files, 0x1);
	/* a GPU's files are no VF's, nor the reverse */
	ck_assert_uint_eq(d->count, 0);
	ck_assert_uint_eq(d->all_vfs, 0);
	dirty_add(d, 0, "0000:41:00.0", 0x8, 0);
	ck_assert_uint_eq(d->n_gpus, 2);
	ck_assert_uint_eq(d->gpus[0].files, 0x6);
	/* no GPU named: every GPU's */
	dirty_add_gpu(d, "", 0x8);
	dirty_add_gpu(d, NULL, 0x1);
	ck_assert_uint_eq(d->all_gpus, 0x9);
	ck_assert_uint_eq(d->n_gpus, 2);
	free(d);

	d = set_new();
	dirty_add_gpu(d, "", 0x2);
	ck_assert(!dirty_empty(d)); /* every GPU's files alone are a change */
	free(d);
}
END_TEST

START_TEST(test_gpus_collapse_loses_nothing)
{
	struct dirty_set *d = set_new();
	char gpu[VF_ADDR_BUFSZ];

	for (size_t i = 0; i < NOTIFY_MAX_QUEUED_GPUS; i++) {
		snprintf(gpu, sizeof(gpu), "0000:%02zx:00.0", i);
		dirty_add_gpu(d, gpu, 1u << (i % 3));
	}
	ck_assert_uint_eq(d->n_gpus, NOTIFY_MAX_QUEUED_GPUS);
	ck_assert_uint_eq(d->all_gpus, 0);
	dirty_add_gpu(d, "0000:00:00.0", 0x10); /* queued: coalesces, no collapse */
	ck_assert_uint_eq(d->n_gpus, NOTIFY_MAX_QUEUED_GPUS);
	dirty_add_gpu(d, "0000:ff:00.0", 0x20);
	ck_assert_uint_eq(d->n_gpus, 0);
	ck_assert_uint_eq(d->all_gpus, 0x1 | 0x2 | 0x4 | 0x10 | 0x20);
	ck_assert(!dirty_empty(d));
	ck_assert_uint_eq(d->count, 0); /* the VFs' part is untouched */
	free(d);
}
END_TEST

START_TEST(test_inodes)
{
	struct dirty_set *d = set_new();

	ck_assert_int_eq(dirty_add_inode(d, 1), 0);
	ck_assert(!dirty_empty(d));
	ck_assert_int_eq(dirty_add_inode(d, 1), -EEXIST);
	for (uint64_t ino = 2; ino <= NOTIFY_MAX_QUEUED_INODES; ino++)
		ck_assert_int_eq(dirty_add_inode(d, ino), 0);
	ck_assert_uint_eq(d->n_inodes, NOTIFY_MAX_QUEUED_INODES);
	ck_assert_int_eq(dirty_add_inode(d, NOTIFY_MAX_QUEUED_INODES + 1), -ENOSPC);
	ck_assert_int_eq(dirty_add_inode(d, 7), -EEXIST); /* queued: not "full" */
	ck_assert_uint_eq(d->n_inodes, NOTIFY_MAX_QUEUED_INODES);
	free(d);
}
END_TEST

START_TEST(test_take)
{
	struct dirty_set *src = set_new(), *dst = set_new();

	dirty_add(src, 0x3, "0000:01:00.1", 0x2, 0x4);
	dirty_add_gpu(src, "0000:01:00.0", 0x2);
	dirty_add_gpu(src, "", 0x1);
	ck_assert_int_eq(dirty_add_inode(src, 99), 0);
	/* what dst held before is replaced, not merged */
	dirty_add(dst, 0x80, "0000:02:00.1", 0x80, 0x80);
	dirty_add_gpu(dst, "0000:02:00.0", 0x8);
	dirty_add_gpu(dst, "", 0x4);
	dirty_take(dst, src);
	ck_assert(dirty_empty(src));
	ck_assert_uint_eq(dst->top, 0x3);
	ck_assert_uint_eq(dst->all_vfs, 0x4);
	ck_assert_uint_eq(dst->count, 1);
	ck_assert_str_eq(dst->vfs[0].vf, "0000:01:00.1");
	ck_assert_uint_eq(dst->vfs[0].files, 0x2);
	ck_assert_uint_eq(dst->all_gpus, 0x1);
	ck_assert_uint_eq(dst->n_gpus, 1);
	ck_assert_str_eq(dst->gpus[0].gpu, "0000:01:00.0");
	ck_assert_uint_eq(dst->gpus[0].files, 0x2);
	ck_assert_uint_eq(dst->n_inodes, 1);
	ck_assert_uint_eq(dst->inodes[0], 99);
	/* an emptied set takes new changes from scratch */
	dirty_add(src, 0, "0000:03:00.1", 0x1, 0);
	ck_assert_uint_eq(src->count, 1);
	ck_assert_str_eq(src->vfs[0].vf, "0000:03:00.1");
	free(src);
	free(dst);
}
END_TEST

static Suite *dirty_suite(void)
{
	Suite *s = suite_create("dirty");
	TCase *tc = check_tcase("dirty", 30);

	tcase_add_test(tc, test_coalesce);
	tcase_add_test(tc, test_vf_id);
	tcase_add_test(tc, test_collapse_loses_nothing);
	tcase_add_test(tc, test_gpus_coalesce_apart_from_vfs);
	tcase_add_test(tc, test_gpus_collapse_loses_nothing);
	tcase_add_test(tc, test_inodes);
	tcase_add_test(tc, test_take);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(dirty_suite)
