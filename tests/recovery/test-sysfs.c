/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for recovery/sysfs.c over a fake sysfs in a temporary
 * directory: the virtfn listing (only virtfnN links count, sorted by
 * address) and the check that a device is an NVIDIA GPU with SR-IOV.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* write name=content in dir (content NULL: remove name) */
static void put_file(const char *dir, const char *name, const char *content)
{
	char path[512];

	ck_assert_int_lt(snprintf(path, sizeof(path), "%s/%s", dir, name), (int)sizeof(path));
	if (!content) {
		ck_assert_int_eq(unlink(path), 0);
		return;
	}
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(content, f);
	ck_assert_int_eq(fclose(f), 0);
}

/* Only a device whose vendor reads 0x10de and that has sriov_totalvfs is a
 * GPU root may act on; every other answer is -EPERM with a reason. */
START_TEST(test_gpu_check)
{
	char root[] = "/tmp/vfsysfs-XXXXXX", dev[512], cmd[600];
	const char *why = NULL;

	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(sysfs_gpu_check(root, "0000:41:00.0", &why), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "no such PCI device"));
	ck_assert_int_eq(sysfs_gpu_check(root, "../../etc", &why), -EINVAL);
	static const char *const dirs[] = { "bus", "bus/pci", "bus/pci/devices",
					    "bus/pci/devices/0000:41:00.0" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(dev, sizeof(dev), "%s/%s", root, dirs[i]);
		ck_assert_int_eq(mkdir(dev, 0755), 0);
	}
	ck_assert_int_eq(sysfs_gpu_check(root, "0000:41:00.0", &why), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "no vendor"));
	put_file(dev, "sriov_totalvfs", "16\n");
	static const char *const vendors[] = { "0x8086\n", "0x10de0\n", "10de\n", "" };
	for (size_t i = 0; i < sizeof(vendors) / sizeof(vendors[0]); i++) {
		put_file(dev, "vendor", vendors[i]);
		ck_assert_int_eq(sysfs_gpu_check(root, "0000:41:00.0", &why), -EPERM);
		ck_assert_ptr_nonnull(strstr(why, "not 0x10de"));
	}
	put_file(dev, "vendor", "0x10de\n");
	ck_assert_int_eq(sysfs_gpu_check(root, "0000:41:00.0", &why), 0);
	put_file(dev, "sriov_totalvfs", NULL);
	ck_assert_int_eq(sysfs_gpu_check(root, "0000:41:00.0", &why), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "sriov_totalvfs"));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Only a SUBSYSTEM=pci field makes a uevent a PCI device's: not the
 * header's path, not another field's value, not a field cut short. */
START_TEST(test_uevent_pci)
{
	static const char pci[] =
		"add@/devices/pci0000:40/0000:41:00.1\0ACTION=add\0"
		"DEVPATH=/devices/pci0000:40/0000:41:00.1\0SUBSYSTEM=pci\0SEQNUM=7";
	static const char net[] = "add@/devices/pci0000:40/0000:41:00.1/net/eth0\0ACTION=add\0"
				  "SUBSYSTEM=net\0DRIVER=SUBSYSTEM=pci";
	static const char header[] = "change@SUBSYSTEM=pci\0ACTION=change";
	static const char prefix[] = "add@/x\0SUBSYSTEM=pcie_port";

	ck_assert(uevent_is_pci(pci, sizeof(pci)));
	ck_assert(!uevent_is_pci(net, sizeof(net)));
	ck_assert(!uevent_is_pci(header, sizeof(header)));
	ck_assert(!uevent_is_pci(prefix, sizeof(prefix)));
	/* a message cut inside the field reads "SUBSYSTEM=pc" */
	const char *field = memmem(pci, sizeof(pci), "SUBSYSTEM=pci", 13);
	ck_assert_ptr_nonnull(field);
	ck_assert(!uevent_is_pci(pci, (size_t)(field - pci) + 12));
	ck_assert(uevent_is_pci(pci, (size_t)(field - pci) + 13));
	ck_assert(!uevent_is_pci("", 0));
}
END_TEST

static const struct check_case sysfs_case = { .suite = "recovery-sysfs",
					      .tcase = "sysfs",
					      .timeout = 30 };
CHECK_CASE_MAIN(sysfs_case, test_virtfns, test_gpu_check, test_uevent_pci)
