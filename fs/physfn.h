/* SPDX-License-Identifier: MIT */
/*
 * physfn.h - a VF's parent GPU as sysfs tells it: the VF's `physfn` link,
 * SYSFS_ROOT/bus/pci/devices/VF/physfn -> ../PF (the kernel's SR-IOV
 * layout; tests point SYSFS_ROOT at a tree of their own).  The filesystem
 * reads it when a VF is registered, and a write of VF/parent records only
 * what it says (vfhealth(5), VF/parent; tests/fs/test-recover-target.sh).
 */
#ifndef VFHEALTH_FS_PHYSFN_H
#define VFHEALTH_FS_PHYSFN_H

#include "grammar/limits.h"

#define PHYSFN_DEFAULT_SYSFS_ROOT "/sys"

/* The physical function of vf (a valid VF address) under sysfs_root (NULL:
 * PHYSFN_DEFAULT_SYSFS_ROOT) into parent: 0; -ENOENT when the VF has no
 * physfn link (not a VF, or not on this host); -EINVAL when the link does
 * not end in a PCI address; another -errno when it cannot be read.  parent
 * is "" on every error. */
int physfn_read(const char *sysfs_root, const char *vf, char parent[static VF_ADDR_BUFSZ]);

#endif
