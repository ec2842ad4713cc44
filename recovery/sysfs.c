/* SPDX-License-Identifier: MIT */
/*
 * sysfs.c - what sysfs says of a physical function (recovery-internal.h,
 * recovery.h): whether it is an NVIDIA GPU with SR-IOV, and the VFs its
 * virtfnN links name (what a drain covers, what a cycle must bring back).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "grammar/vf.h"
#include "recovery/recovery-internal.h"
#include "recovery/recovery.h"

static int compare_addr(const void *a, const void *b)
{
	return strcmp(a, b);
}

int sysfs_virtfns(const char *sysfs_root, const char *pf, char (**ret)[VF_ADDR_BUFSZ],
		  size_t *count)
{
	_cleanup_free_ char(*list)[VF_ADDR_BUFSZ] = NULL;
	_cleanup_closedir_ DIR *dir = NULL;
	char path[PATH_MAX];
	size_t n = 0, cap = 0;
	struct dirent *d;

	if (!vf_address_valid(pf) || !ret || !count)
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root ? sysfs_root : "/sys",
		     pf) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((errno = 0, d = readdir(dir))) {
		char target[PATH_MAX];
		ssize_t len;

		if (strncmp(d->d_name, "virtfn", 6) != 0 || !d->d_name[6] ||
		    strspn(d->d_name + 6, "0123456789") != strlen(d->d_name + 6))
			continue;
		len = readlinkat(dirfd(dir), d->d_name, target, sizeof(target) - 1);
		if (len < 0)
			continue; /* not a link: not one of the kernel's */
		target[len] = '\0';
		const char *base = strrchr(target, '/');
		base = base ? base + 1 : target;
		if (!vf_address_valid(base))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			char(*grown)[VF_ADDR_BUFSZ] = reallocarray(list, cap, sizeof(*list));
			if (!grown)
				return -ENOMEM;
			list = grown;
		}
		memcpy(list[n++], base, VF_ADDR_BUFSZ);
	}
	if (errno)
		return -errno;
	if (n)
		qsort(list, n, sizeof(*list), compare_addr);
	*ret = n ? move_ptr(list) : NULL;
	*count = n;
	return 0;
}

#define NVIDIA_VENDOR "0x10de"

int sysfs_gpu_check(const char *sysfs_root, const char *pf, const char **why)
{
	_cleanup_close_ int dir = -1, fd = -1;
	char path[PATH_MAX], vendor[16];
	ssize_t len;

	*why = "not a PCI address";
	if (!vf_address_valid(pf))
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root ? sysfs_root : "/sys",
		     pf) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		*why = "sysfs shows no such PCI device";
		return errno == ENOENT ? -EPERM : -errno;
	}
	fd = openat(dir, "vendor", O_RDONLY | O_CLOEXEC);
	len = fd < 0 ? -1 : read(fd, vendor, sizeof(vendor) - 1);
	if (len < 0) {
		*why = "not an NVIDIA GPU: sysfs shows no vendor for it";
		return -EPERM;
	}
	vendor[len] = '\0';
	vendor[strcspn(vendor, "\n")] = '\0';
	if (strcmp(vendor, NVIDIA_VENDOR) != 0) {
		*why = "not an NVIDIA GPU: its sysfs vendor is not 0x10de";
		return -EPERM;
	}
	if (faccessat(dir, "sriov_totalvfs", F_OK, 0) < 0) {
		*why = "not an SR-IOV GPU: sysfs shows no sriov_totalvfs for it";
		return -EPERM;
	}
	return 0;
}

int recovery_gpu_target(const char *sysfs_root, struct store *s, const char *pf,
			char (**vfs)[VF_ADDR_BUFSZ], size_t *n, const char **why)
{
	_cleanup_free_ char(*list)[VF_ADDR_BUFSZ] = NULL;
	size_t count = 0;
	int k;

	if (!s || !vfs || !n || !why)
		return -EINVAL;
	if ((k = sysfs_gpu_check(sysfs_root, pf, why)) < 0)
		return k;
	if ((k = sysfs_virtfns(sysfs_root, pf, &list, &count)) < 0) {
		*why = "cannot read its virtfn links in sysfs";
		return k;
	}
	if ((k = store_gpu_adopt(s, pf, list, count, NULL)) < 0) {
		*why = "cannot record its VFs' parent";
		return k;
	}
	*vfs = move_ptr(list);
	*n = count;
	return 0;
}
