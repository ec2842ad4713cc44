/* SPDX-License-Identifier: MIT */
/* pci.c - vendor scan under sysfs.  Contract in pci.h. */
#include "guest-agent/pci.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"

int pci_parse_vendor(const char *text, uint16_t *ret)
{
	unsigned v = 0;
	int digits = 0;
	const char *p = text;

	if (strncmp(p, "0x", 2) != 0)
		return -EINVAL;
	for (p += 2; *p && *p != '\n'; p++, digits++) {
		int d;
		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return -EINVAL;
		if (digits >= 4)
			return -EINVAL;
		v = v << 4 | (unsigned)d;
	}
	if (digits == 0 || (*p == '\n' && p[1]))
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

static int read_vendor(int dir_fd, const char *name, uint16_t *ret)
{
	char path[300], text[16];
	_cleanup_close_ int fd = -1;
	ssize_t n;

	if (snprintf(path, sizeof(path), "%s/vendor", name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	n = read(fd, text, sizeof(text) - 1);
	if (n < 0)
		return negative_errno();
	text[n] = '\0';
	return pci_parse_vendor(text, ret);
}

int pci_has_vendor(const char *sysfs_root, uint16_t vendor, bool *ret)
{
	char path[4096];
	_cleanup_closedir_ DIR *dir = NULL;
	struct dirent *de;
	unsigned seen = 0;

	if (snprintf(path, sizeof(path), "%s/bus/pci/devices", sysfs_root) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir) {
		if (errno == ENOENT) {
			*ret = false;
			return 0;
		}
		return negative_errno();
	}
	while ((de = readdir(dir)) && seen < PCI_DEVICES_MAX) {
		uint16_t v;

		if (de->d_name[0] == '.')
			continue;
		seen++;
		if (read_vendor(dirfd(dir), de->d_name, &v) == 0 && v == vendor) {
			*ret = true;
			return 0;
		}
	}
	*ret = false;
	return 0;
}
