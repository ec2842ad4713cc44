/* SPDX-License-Identifier: MIT */
/*
 * physfn.c - a VF's parent GPU from its sysfs `physfn` link (physfn.h).
 */
#include "fs/physfn.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "grammar/vf.h"
#include "common/cleanup.h"

int physfn_read(const char *sysfs_root, const char *vf, char parent[static VF_ADDR_BUFSZ])
{
	char path[PATH_MAX], target[PATH_MAX];
	ssize_t n;

	parent[0] = '\0';
	if (!vf_address_valid(vf))
		return -EINVAL;
	n = snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/physfn",
		     sysfs_root ? sysfs_root : PHYSFN_DEFAULT_SYSFS_ROOT, vf);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return errno == EINVAL ? -ENOENT : -errno; /* not a link: no physfn */
	target[n] = '\0';
	const char *base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (!vf_address_valid(base) || strcmp(base, vf) == 0)
		return -EINVAL;
	memcpy(parent, base, VF_ADDR_BUFSZ);
	return 0;
}
