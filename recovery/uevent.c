/* SPDX-License-Identifier: MIT */
/*
 * uevent.c - the kernel's word that a PCI device came or went
 * (recovery-internal.h): a NETLINK_KOBJECT_UEVENT socket on the kernel's
 * group.  An operator's `echo N > sriov_numvfs` adds or removes a device
 * per VF and changes the physical function, each a uevent of the pci
 * subsystem.  A message is only a hint to look at sysfs again: nothing in
 * its text is used, so whoever may send one (root in vfhealthd's network
 * namespace) can only cause a rescan.  inotify sees nothing of sysfs.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "recovery/recovery-internal.h"

#define UEVENT_KERNEL_GROUP 1 /* the kernel's; udev's re-sends are group 2 */
#define UEVENT_BUFSZ 8192     /* the kernel's UEVENT_BUFFER_SIZE is 2048 */

int uevent_open(int *ret)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK, .nl_groups = UEVENT_KERNEL_GROUP };
	_cleanup_close_ int fd = -1;
	int size = 1 << 20;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
	if (fd < 0)
		return -errno;
	/* a burst (16 VFs added at once) fits; an overrun is seen (ENOBUFS) */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return -errno;
	*ret = move_fd(fd);
	return 0;
}

bool uevent_is_pci(const char *msg, size_t len)
{
	/* "ACTION@DEVPATH\0KEY=VALUE\0...": the fields after the header */
	size_t i = strnlen(msg, len) + 1;

	while (i < len) {
		size_t field = strnlen(msg + i, len - i);
		if (field == sizeof("SUBSYSTEM=pci") - 1 &&
		    memcmp(msg + i, "SUBSYSTEM=pci", field) == 0)
			return true;
		i += field + 1;
	}
	return false;
}

int uevent_drain(int fd, bool *pci)
{
	char buf[UEVENT_BUFSZ];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0 && errno == ENOBUFS) {
			*pci = true; /* some were lost: one may have been about a GPU */
			continue;
		}
		if (n < 0)
			return -errno;
		if (uevent_is_pci(buf, (size_t)n))
			*pci = true;
	}
}
