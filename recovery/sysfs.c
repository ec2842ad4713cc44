/* SPDX-License-Identifier: MIT */
/*
 * sysfs.c - the VFs a physical function's virtfnN links name
 * (recovery-internal.h): what a cycle must bring back.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "grammar/vf.h"
#include "recovery/recovery-internal.h"

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
