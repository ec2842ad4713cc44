/* SPDX-License-Identifier: MIT */
/*
 * liveness.h - gathers the evidence that liveness_verdict() (verdict.h) judges
 * a claim's VMM by: its pid's state and start time (common/procfs.h), the
 * host's boot id, and whether a Unix socket bound to the very file its
 * control path names is LISTENING in its network namespace.
 *
 * Identity, not text.  A control socket counts when the kernel's socket
 * diagnostics (NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY for AF_UNIX with
 * UDIAG_SHOW_VFS, state filter LISTEN) list a listening socket whose bound
 * file has the device and inode number that stat(2) of the control path
 * gives.  No name is compared, so no socket name can forge it, abstract
 * sockets never match (they have no file), and a VMM that bound the same
 * file through another path (a jailer's chroot, its own mount namespace)
 * is found.  A socket file outlives a VMM killed with SIGKILL, but nothing
 * listens on it any more.  The control path is never connect()ed: a
 * connection would reach whoever listens there now.
 *
 * One socket-table read per pass and network namespace: a pass
 * (struct liveness_pass) reads the sentinel's own namespace's table when a
 * claim first needs it, and another namespace's (a VMM's own, named by
 * /proc/PID/ns/net) through a netlink socket created inside it by a
 * short-lived thread that setns(2)es there; claims are grouped by the
 * namespace's inode.  Process facts are read under a proc root, so tests
 * can point them at a fake tree; namespaces and sockets are always the
 * kernel's.
 *
 * Another user's VMM.  /proc/PID/ns/net of a process of another uid opens
 * only with CAP_SYS_PTRACE, which vfhealthd's unit does not give (libvirt's
 * QEMU runs as libvirt-qemu).  Without it, whether that VMM shares the
 * sentinel's own namespace is still a kernel fact: procfs gives each
 * namespace's PID/net/unix an inode number of its own, and PID/net/ is
 * readable whoever runs PID.  Equal numbers: the sentinel's own table
 * decides, by identity as above.  A VMM of another user in a namespace of
 * its own stays uncertain (its table cannot be read).  Tests:
 * tests/sentinel/test-verdict.c (test_gather_other_user: both, without
 * CAP_SYS_PTRACE), test-liveness-unit.sh (vfhealthd under the unit's
 * bounding set, a VMM of uid 65534).
 *
 * Conventions: 0 or -errno; outputs are written only on success.
 * Thread-safety: a pass belongs to one thread.
 */
#ifndef VFHEALTH_SENTINEL_LIVENESS_H
#define VFHEALTH_SENTINEL_LIVENESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "grammar/assignment.h"
#include "grammar/limits.h"
#include "sentinel/verdict.h"

/* The file a listening Unix socket is bound to: the device as stat(2)
 * spells st_dev, and the inode number's low 32 bits (all the socket
 * diagnostics carry). */
struct bound_file {
	uint64_t dev;
	uint32_t ino;
};

/* The listening, path-bound Unix sockets of one network namespace, sorted. */
struct unix_listeners {
	struct bound_file *files;
	size_t count;
};

/* Read them from the kernel through a NETLINK_SOCK_DIAG socket of the
 * namespace netns_fd names (-1: the caller's own).  -EPERM when that
 * namespace cannot be entered; another -errno on a failed or malformed
 * dump. */
int unix_listeners_read(int netns_fd, struct unix_listeners *ret);

/* Whether a socket bound to the file st describes listens among l. */
bool unix_listeners_has(const struct unix_listeners *l, dev_t dev, ino_t ino);

void unix_listeners_free(struct unix_listeners *l);

/* The kernel's internal device number (the socket diagnostics' udiag_vfs_dev:
 * major << 20 | minor) as stat(2)'s st_dev. */
uint64_t kernel_dev_to_user(uint32_t kdev);

/* One pass over the claims: the boot id read once, each network
 * namespace's table read at most once. */
struct liveness_netns {
	uint64_t dev, ino; /* the namespace (stat of /proc/PID/ns/net) */
	int rc;            /* reading its table: 0 or -errno */
	struct unix_listeners listeners;
};

struct liveness_pass {
	const char *proc_root;
	int boot_rc;
	char boot_id[BOOT_ID_BUFSZ];
	struct liveness_netns own; /* the sentinel's namespace; rc -EAGAIN until read */
	int own_unix_rc;           /* stat of its net/unix (another user's VMM: in_own_netns) */
	uint64_t own_unix_dev, own_unix_ino;
	struct liveness_netns *others;
	size_t other_count;
	size_t tables_read; /* socket tables read this pass (tests, debug log) */
};

void liveness_pass_begin(struct liveness_pass *p, const char *proc_root);
void liveness_pass_end(struct liveness_pass *p);

/* Every piece of evidence about c's VMM. */
void liveness_gather(struct liveness_pass *p, const struct assignment *c,
		     struct liveness_evidence *ev);

#endif
