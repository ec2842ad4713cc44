/* SPDX-License-Identifier: MIT */
/*
 * vffs.h - libvffs: the /run/vfhealth filesystem (vfhealth(5)) over the
 * health store.  vfhealthd (fs/main.c) is a thin wrapper around it.
 *
 * Life cycle, in this order:
 *
 *   vffs_new()      parse FUSE options, resolve the group; nothing mounted
 *   vffs_mount()    create the mountpoint, detach a stale mount left by a
 *                   crashed instance (ENOTCONN), mount (allow_other,
 *                   default_permissions)
 *   [fuse_daemonize() here when not in the foreground: before any thread]
 *   vffs_start()    open the store (--db), fork the notifier's helper
 *                   process (so: call it while this process has no other
 *                   thread), start the notifier thread and the
 *                   multi-threaded FUSE loop on its own thread; from here
 *                   on the mount serves requests
 *   ... clients of the mount (the sentinel) run here ...
 *   vffs_stop()     stop the notifier (while the mount still serves), leave
 *                   the FUSE loop, unmount, close the store
 *   vffs_free()
 *
 * The caller blocks SIGTERM, SIGINT and SIGHUP in every thread (before
 * vffs_start) and waits for them itself; if the session ends on its own
 * (someone unmounted it) the FUSE loop thread raises SIGTERM so the caller's
 * wait ends too.  vffs uses SIGUSR1 internally to end the FUSE loop.
 *
 * All functions return 0 or a negative errno and log why they failed.
 */
#ifndef VFHEALTH_VFFS_H
#define VFHEALTH_VFFS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#define VFFS_DEFAULT_MOUNTPOINT "/run/vfhealth"
#define VFFS_DEFAULT_DB "/var/lib/vfhealth/vfhealth.db"
#define VFFS_MAX_METRICS_PROVIDERS 8

struct vffs;

struct vffs_options {
	const char *mountpoint; /* NULL: VFFS_DEFAULT_MOUNTPOINT */
	const char *db_path;    /* NULL: VFFS_DEFAULT_DB */
	int threshold;          /* 0: keep the stored threshold */
	gid_t group;            /* group owning the writable files and directories */
	const char *fuse_options; /* extra -o options, comma separated; NULL for none */
	bool debug;             /* FUSE request tracing on stderr */
};

int vffs_new(const struct vffs_options *opt, struct vffs **ret);
int vffs_mount(struct vffs *fs);
int vffs_start(struct vffs *fs);
void vffs_stop(struct vffs *fs);
void vffs_free(struct vffs *fs);

/* The absolute mountpoint (valid until vffs_free). */
const char *vffs_mountpoint(const struct vffs *fs);

/* Add lines to the `metrics` file: render() is called on every read of it,
 * from a FUSE worker, and must only print complete Prometheus series (with
 * their # HELP and # TYPE lines) to `out`; it must not block and must not
 * touch the mount.  At most VFFS_MAX_METRICS_PROVIDERS; more are ignored
 * with a logged error. */
void vffs_add_metrics_provider(struct vffs *fs, void (*render)(void *userdata, FILE *out),
			       void *userdata);

#endif
