/* SPDX-License-Identifier: MIT */
/*
 * vffs.h - libvffs: the /run/vfhealth filesystem (vfhealth(5)) over the
 * health store.  vfhealthd (daemon/main.c) opens the store and hands it in.
 *
 * Life cycle, in this order:
 *
 *   vffs_new()      parse FUSE options (-EINVAL: libfuse refuses one, a bad
 *                   command line), resolve the group; nothing mounted
 *   vffs_mount()    create the mountpoint, refuse to mount over a live
 *                   vfhealth mount (-EBUSY), detach a stale mount left by a
 *                   crashed instance (ENOTCONN), mount (allow_other,
 *                   default_permissions)
 *   [fuse_daemonize() here when not in the foreground: before any thread]
 *   [the caller opens the store here and subscribes vffs_store_changed]
 *   vffs_start()    serve the caller's store: fork the notifier's helper
 *                   process (so: call it while this process has no other
 *                   thread), start the notifier thread and the
 *                   multi-threaded FUSE loop on its own thread; from here
 *                   on the mount serves requests
 *   ... clients of the mount (the sentinel) run here ...
 *   vffs_stop()     stop the notifier (while the mount still serves), leave
 *                   the FUSE loop, unmount, detach from the store
 *   [the caller unsubscribes vffs_store_changed here]
 *   [the caller closes the store here]
 *   vffs_free()
 *
 * The caller blocks SIGTERM, SIGINT and SIGHUP in every thread (before
 * vffs_start) and waits for them itself; if the session ends on its own
 * (someone unmounted it) the FUSE loop thread raises SIGTERM so the caller's
 * wait ends too, and vffs_unmounted_outside() says so.
 *
 * vffs_mount() never stacks a mount over a live vfhealth mount: a
 * fuse.vfhealth mount at the mountpoint that answers is live (-EBUSY, and
 * the log names it); only a dead one (ENOTCONN) is detached.
 *
 * All functions return 0 or a negative errno and log why they failed.
 */
#ifndef VFHEALTH_VFFS_H
#define VFHEALTH_VFFS_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/sockdir.h"

#define VFFS_DEFAULT_MOUNTPOINT "/run/vfhealth"
#define VFFS_MAX_WORKERS_DEFAULT 32
#define VFFS_MAX_WORKERS_MAX 256

struct vffs;
struct store;
struct store_change;
struct metrics;

struct vffs_options {
	const char *mountpoint;   /* NULL: VFFS_DEFAULT_MOUNTPOINT */
	gid_t group;              /* group owning the writable files and directories */
	struct metrics *metrics;  /* extra series of `metrics` (fs/metrics.h), owned by the
				  * caller and kept until vffs_free; NULL for none */
	const char *fuse_options; /* extra -o options, comma separated; NULL for none */
	bool debug;               /* FUSE request tracing on stderr */
	unsigned max_workers;     /* FUSE worker threads at most, for the requests that
				   * may wait (one more thread reads and serves the rest:
				   * loop.c), 1..VFFS_MAX_WORKERS_MAX;
				   * 0: VFFS_MAX_WORKERS_DEFAULT */
	/* Where the socket paths of claims may point (common/sockdir.h): a claim
	 * write naming one elsewhere gets EACCES.  NULL: the defaults. */
	const struct sockdirs *socket_dirs;
	/* Where sysfs is (fs/physfn.h): a VF registered here gets its parent
	 * GPU from its physfn link.  NULL: /sys. */
	const char *sysfs_root;
	/* Runs GPU cycles (recovery/recovery.h), owned by the caller and kept
	 * until vffs_free: gpus/PF/recover hands it the request (the store
	 * tells it of changes itself: the caller subscribes it).  NULL: the
	 * recover file refuses. */
	struct recovery *recovery;
};

int vffs_new(const struct vffs_options *opt, struct vffs **ret);
int vffs_mount(struct vffs *fs);
/* store: open (store/store.h), owned by the caller, closed only after vffs_stop. */
int vffs_start(struct vffs *fs, struct store *store);
/* The filesystem's subscriber to the store's changes (store_subscribe,
 * userdata the vffs): its notifier, which makes each change visible in the
 * order docs/architecture.md sets.  The caller subscribes it before
 * vffs_start (a change before then reaches nobody: nothing is served yet)
 * and unsubscribes it after vffs_stop, before vffs_free. */
void vffs_store_changed(void *userdata, const struct store_change *change);
void vffs_stop(struct vffs *fs);
void vffs_free(struct vffs *fs);

/* true when the session ended without vffs_stop(): the mount was unmounted
 * from outside (umount, fusermount3 -u). */
bool vffs_unmounted_outside(const struct vffs *fs);

/* The absolute mountpoint (valid until vffs_free). */
const char *vffs_mountpoint(const struct vffs *fs);

#endif
