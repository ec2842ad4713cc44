/* SPDX-License-Identifier: MIT */
/*
 * register.c - the VFs sysfs shows, registered (recovery-internal.h,
 * register_scan): every VF of every NVIDIA GPU with SR-IOV, its parent from
 * the links, and the VFs sysfs no longer shows deregistered once nothing
 * keeps them.
 *
 * Identity is the kernel's: a physical function is a directory of
 * SYSFS_ROOT/bus/pci/devices that sysfs_gpu_check accepts (vendor 0x10de,
 * sriov_totalvfs), its VFs are its virtfnN links (sysfs_virtfns), and a
 * VF's parent is the function whose links name it.  A GPU that is
 * recovering is left alone: its cycle changes its VFs, and the scan after
 * the cycle sees what it left.
 *
 * A VF is gone when its recorded parent is a GPU this scan saw, or one
 * sysfs no longer shows at all, and it has no sysfs entry of its own: a
 * VF registered by hand for a device sysfs never showed (parent "") or
 * whose parent is another kind of device is never touched.  A gone VF is
 * deregistered, unless a claim holds it or its record does (failures, a
 * quarantine, a hold: store_vf_unregister refuses, -EBUSY): then it is
 * absent (store_vf_set_absent: out of allocatable, no new claim) until the
 * claim ends or the record is cleared, and a later scan deregisters it.
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
#include "common/log.h"
#include "grammar/vf.h"
#include "recovery/recovery-internal.h"

typedef char addr_t[VF_ADDR_BUFSZ];

static bool addr_in(addr_t *list, size_t n, const char *addr)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], addr) == 0)
			return true;
	return false;
}

static int addr_push(addr_t **list, size_t *n, size_t *cap, const char *addr)
{
	if (*n == *cap) {
		size_t grow = *cap ? 2 * *cap : 16;
		addr_t *grown = reallocarray(*list, grow, sizeof(**list));
		if (!grown)
			return -ENOMEM;
		*list = grown;
		*cap = grow;
	}
	size_t len = strlen(addr);
	if (len >= VF_ADDR_BUFSZ)
		return -ENAMETOOLONG; /* not a PCI address: no list holds it */
	memcpy((*list)[(*n)++], addr, len + 1);
	return 0;
}

/* Whether SYSFS_ROOT/bus/pci/devices/ADDR exists (-errno: cannot tell). */
static int sysfs_shows(int devices, const char *addr)
{
	if (faccessat(devices, addr, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

static bool gpu_recovering(struct store *s, const char *parent)
{
	struct store_gpu_info g;

	return store_gpu_get(s, parent, STORE_READ_MEMORY, &g) == 0 &&
	       g.state == STORE_GPU_RECOVERING;
}

/* Register pf's VFs, and log how many (one line per GPU: at the first
 * scan, and when some were new). */
static void register_gpu(struct register_state *st, struct store *s, const char *pf, addr_t *vfs,
			 size_t n, bool *retry)
{
	size_t added = 0;
	int k;

	for (size_t i = 0; i < n; i++) {
		struct store_vf_info info;
		bool changed = false;

		if (store_vf_get(s, vfs[i], STORE_READ_MEMORY, &info) == 0) {
			if (store_vf_set_absent(s, vfs[i], false, &changed) == 0 && changed)
				log_notice("VF %s is back in sysfs (GPU %s)", vfs[i], pf);
			continue;
		}
		k = store_vf_register(s, vfs[i], pf);
		if (k == 0 || k == -EEXIST) {
			added += k == 0;
			if (k == 0)
				log_debug("VF %s registered from sysfs (GPU %s)", vfs[i], pf);
			continue;
		}
		if (k == -EIO)
			*retry = true;
		else
			log_warn("VF %s of GPU %s: cannot register it: %s", vfs[i], pf,
				 strerror(-k));
	}
	/* a VF registered by hand before sysfs named its parent gets it */
	k = store_gpu_adopt(s, pf, vfs, n, NULL);
	if (k == -EIO)
		*retry = true;
	else if (k < 0)
		log_warn("GPU %s: cannot record its VFs' parent: %s", pf, strerror(-k));
	if (added || !st->scanned)
		log_info("GPU %s: %zu VF%s registered from sysfs (%zu new)", pf, n,
			 n == 1 ? "" : "s", added);
}

/* A registered VF sysfs no longer shows: deregistered, or kept absent. */
static void gone(struct register_state *st, struct store *s, const struct store_vf_info *vf,
		 bool *retry)
{
	bool changed = false;
	int k = vf->claimed ? -EBUSY : store_vf_unregister(s, vf->vf);

	if (k == 0) {
		log_notice("VF %s is gone from sysfs (GPU %s): unregistered", vf->vf, vf->parent);
		return;
	}
	if (k == -EIO) {
		*retry = true;
		return;
	}
	if (k != -EBUSY) {
		log_warn("VF %s is gone from sysfs (GPU %s): cannot unregister it: %s", vf->vf,
			 vf->parent, strerror(-k));
		return;
	}
	k = store_vf_set_absent(s, vf->vf, true, &changed);
	st->absent += k == 0;
	if (k < 0 || !changed)
		return;
	if (vf->claimed)
		log_warn("VF %s is gone from sysfs (GPU %s) while claimed: kept registered and"
			 " out of allocatable until its claim is released, then unregistered",
			 vf->vf, vf->parent);
	else
		log_warn("VF %s is gone from sysfs (GPU %s) with failures, a quarantine or a"
			 " hold on record: kept registered and out of allocatable until cleared"
			 " (echo 0 > %s/quarantined), then unregistered",
			 vf->vf, vf->parent, vf->vf);
}

int register_scan(struct register_state *st, const char *sysfs_root, struct store *s, bool *retry)
{
	_cleanup_free_ addr_t *gpus = NULL, *seen = NULL;
	_cleanup_free_ struct store_vf_info *vfs = NULL;
	_cleanup_closedir_ DIR *dir = NULL;
	size_t n_gpus = 0, cap_gpus = 0, n_seen = 0, cap_seen = 0, n_vfs = 0;
	char path[PATH_MAX];
	struct dirent *d;
	int k;

	*retry = false;
	if (snprintf(path, sizeof(path), "%s/bus/pci/devices", sysfs_root) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir) {
		log_warn("cannot read %s: no VF registered from sysfs: %s", path, strerror(errno));
		return -errno;
	}
	while ((errno = 0, d = readdir(dir))) {
		_cleanup_free_ addr_t *list = NULL;
		const char *why;
		size_t n = 0;

		if (!vf_address_valid(d->d_name) ||
		    sysfs_gpu_check(sysfs_root, d->d_name, &why) < 0)
			continue;
		if ((k = addr_push(&gpus, &n_gpus, &cap_gpus, d->d_name)) < 0)
			return k;
		if (gpu_recovering(s, d->d_name))
			continue; /* the scan after its cycle registers what it left */
		if ((k = sysfs_virtfns(sysfs_root, d->d_name, &list, &n)) < 0) {
			log_warn("GPU %s: cannot read its virtfn links: %s", d->d_name,
				 strerror(-k));
			continue;
		}
		for (size_t i = 0; i < n; i++)
			if ((k = addr_push(&seen, &n_seen, &cap_seen, list[i])) < 0)
				return k;
		register_gpu(st, s, d->d_name, list, n, retry);
	}
	if (errno)
		return -errno;
	if (n_gpus == 0 && (st->gpus != 0 || !st->scanned))
		log_notice("no NVIDIA GPU with SR-IOV (vendor 0x10de, sriov_totalvfs) in %s: no VF"
			   " is registered from sysfs; VFs registered by hand (mkdir) stay",
			   path);
	st->gpus = n_gpus;
	st->scanned = true;
	st->absent = 0;

	if ((k = store_vf_list(s, &vfs, &n_vfs)) < 0)
		return k;
	for (size_t i = 0; i < n_vfs; i++) {
		const struct store_vf_info *vf = &vfs[i];

		if (!vf->parent[0] || addr_in(seen, n_seen, vf->vf))
			continue;
		if (!addr_in(gpus, n_gpus, vf->parent) && sysfs_shows(dirfd(dir), vf->parent) != 0)
			continue; /* another kind of device's, or sysfs cannot say */
		if (gpu_recovering(s, vf->parent) || sysfs_shows(dirfd(dir), vf->vf) != 0)
			continue;
		gone(st, s, vf, retry);
	}
	return 0;
}
