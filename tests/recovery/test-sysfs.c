/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the virtfn listing (recovery/sysfs.c) over a fake sysfs
 * in a temporary directory: only virtfnN links count, sorted by address.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recovery/recovery-internal.h"
#include "tests/common/check-main.h"

START_TEST(test_virtfns)
{
	char root[] = "/tmp/vfsysfs-XXXXXX", path[512];
	char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 99;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(sysfs_virtfns(root, "0000:41:00.0", &vfs, &n), -ENOENT);
	ck_assert_int_eq(sysfs_virtfns(root, "gpu0", &vfs, &n), -EINVAL);
	/* the PF's directory, one level at a time */
	static const char *const dirs[] = { "bus", "bus/pci", "bus/pci/devices",
					    "bus/pci/devices/0000:41:00.0" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	ck_assert_int_eq(sysfs_virtfns(root, "0000:41:00.0", &vfs, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(vfs);
	static const char *const links[][2] = {
		{ "virtfn1", "../0000:41:00.2" },  { "virtfn0", "../0000:41:00.1" },
		{ "virtfn10", "../0000:41:01.3" }, { "virtfnx", "../0000:41:00.7" },
		{ "physfn", "../0000:40:00.0" },   { "virtfn2", "not-an-address" },
	};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:41:00.0/%s", root,
			 links[i][0]);
		ck_assert_int_eq(symlink(links[i][1], path), 0);
	}
	snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:41:00.0/virtfn3", root);
	ck_assert_int_eq(mkdir(path, 0755), 0); /* not a link */
	ck_assert_int_eq(sysfs_virtfns(root, "0000:41:00.0", &vfs, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(vfs[0], "0000:41:00.1");
	ck_assert_str_eq(vfs[1], "0000:41:00.2");
	ck_assert_str_eq(vfs[2], "0000:41:01.3");
	free(vfs);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static const struct check_case sysfs_case = { .suite = "recovery-sysfs",
					      .tcase = "sysfs",
					      .timeout = 30 };
CHECK_CASE_MAIN(sysfs_case, test_virtfns)
