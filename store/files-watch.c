/* SPDX-License-Identifier: MIT */
/*
 * files-watch.c - the proof, one poll(2), that nothing the store's files
 * check depends on has changed since it last passed, so that the check's
 * stat(2)s (files_check, schema.c) are skipped in the common case.  Callers
 * hold write_lock.
 *
 * The stat check fails only when resolving the database's path or its WAL's
 * gives ENOENT, another inode or an error.  Resolution depends on each
 * component's entry in its directory, on the directories themselves (their
 * permissions, whether they are still linked), on the mounts, and on
 * symlinks.  So, armed: one inotify watch on every directory from "/" down
 * to the database's, noting which child name matters in each (the next
 * component; in the last, the database's and the WAL's names), and a
 * descriptor of /proc/self/mountinfo, which polls POLLPRI once per change
 * of the mount table.  Symlinks are ruled out: a path that is not its own
 * realpath(3), or a WAL that is not a regular file, is never armed (every
 * check then stats).  So are filesystems whose names can change without
 * this kernel seeing it (NFS, FUSE, ...: inotify would miss them).
 *
 * The proof holds from a stat check that passed after the watch was armed
 * and drained (files_watch_proven) until the next readiness of either
 * descriptor.  Any readiness runs the stat check; a change of the mounts, a
 * watched name, a watched directory itself or an overflowed queue also
 * rebuilds the watches from the path (the path may now resolve through
 * other directories than the ones watched).  Events of other names, and a
 * file's own attributes, only cost that one stat check.  Tests:
 * tests/adversarial/vanished-files.sh (modes dir-moved, parent-moved,
 * mounted-over, and the three of the files); files_moved_then_repaired.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/log.h"
#include "store/store-internal.h"

#define WATCH_MASK                                                                          \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | \
	 IN_MOVE_SELF | IN_UNMOUNT | IN_ONLYDIR | IN_DONT_FOLLOW)
#define DRAIN_READS_MAX 16         /* a directory busier than this is taken as changed */
#define ZFS_SUPER_MAGIC 0x2fc12fc1 /* not in linux/magic.h */

/* Local filesystems: every change of a name goes through this kernel, which
 * reports it to inotify. */
static bool fs_local(const char *dir)
{
	static const unsigned long local[] = {
		EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, BTRFS_SUPER_MAGIC,     F2FS_SUPER_MAGIC,
		TMPFS_MAGIC,      RAMFS_MAGIC,     OVERLAYFS_SUPER_MAGIC, ZFS_SUPER_MAGIC,
	};
	struct statfs st;

	if (statfs(dir, &st) < 0)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(local); i++)
		if ((unsigned long)st.f_type == local[i])
			return true;
	return false;
}

static void watch_close(struct files_watch *w)
{
	if (w->inotify_fd >= 0)
		close(w->inotify_fd);
	if (w->mounts_fd >= 0)
		close(w->mounts_fd);
	free(w->names);
	free(w->watched);
	*w = (struct files_watch){ .inotify_fd = -1, .mounts_fd = -1, .given_up = w->given_up };
}

void files_watch_init(struct files_watch *w)
{
	*w = (struct files_watch){ .inotify_fd = -1, .mounts_fd = -1 };
}

void files_watch_disarm(struct files_watch *w)
{
	watch_close(w);
	w->given_up = false; /* the files were reopened: arming may work now */
}

/* Watch every directory of path; 0 or -errno (-ELOOP: not canonical, -EXDEV:
 * a filesystem inotify cannot vouch for). */
static int watch_arm(struct files_watch *w, const char *path, const char *wal_path)
{
	_cleanup_free_ char *real = realpath(path, NULL), *names = NULL;
	_cleanup_free_ struct files_watched *watched = NULL;
	_cleanup_close_ int in = -1, mounts = -1;
	size_t depth = 0, n = 0;
	struct stat st;

	if (!real)
		return -errno;
	if (path[0] != '/' || strcmp(real, path) != 0)
		return -ELOOP;
	if (lstat(wal_path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ELOOP;
	for (const char *p = path; *p; p++)
		depth += *p == '/';
	/* the names: the path's components, then the WAL's name */
	const char *wal_base = strrchr(wal_path, '/') + 1; /* absolute: it has one */
	names = malloc(strlen(path) + 1 + strlen(wal_base) + 1);
	watched = calloc(depth + 1, sizeof(*watched));
	if (!names || !watched)
		return -ENOMEM;
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0)
		return -errno;
	mounts = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (mounts < 0)
		return -errno;
	strcpy(names, path);
	char *wal_name = names + strlen(path) + 1;
	strcpy(wal_name, wal_base);
	for (char *slash = names; slash; slash = strchr(slash + 1, '/')) {
		const char *dir = slash == names ? "/" : names;
		int wd;

		*slash = '\0'; /* names is the directory up to here */
		wd = inotify_add_watch(in, dir, WATCH_MASK);
		if (wd < 0 || !fs_local(dir)) {
			int err = wd < 0 ? errno : EXDEV;
			*slash = '/';
			return -err;
		}
		*slash = '/';
		watched[n++] = (struct files_watched){ .wd = wd, .name = slash + 1 };
	}
	watched[n] = (struct files_watched){ .wd = watched[n - 1].wd, .name = wal_name };
	n++;
	for (char *p = names; *p; p++)
		if (*p == '/')
			*p = '\0'; /* each name ends where the next component starts */
	w->inotify_fd = move_fd(in);
	w->mounts_fd = move_fd(mounts);
	w->names = move_ptr(names);
	w->watched = move_ptr(watched);
	w->n_watched = n;
	return 0;
}

/* Does e say that resolving the path may now give another answer, or that
 * the watches may no longer be on the directories it goes through? */
static bool event_matters(const struct files_watch *w, const struct inotify_event *e)
{
	bool known = false;

	if (e->mask & (IN_Q_OVERFLOW | IN_IGNORED))
		return true;
	for (size_t i = 0; i < w->n_watched; i++) {
		if (w->watched[i].wd != e->wd)
			continue;
		if (e->len == 0)
			return true; /* the directory itself */
		/* a name on the path; not its attributes: a directory's come
		 * nameless on its own watch, a file's do not resolve its path */
		if (!(e->mask & IN_ATTRIB) && strcmp(e->name, w->watched[i].name) == 0)
			return true;
		known = true;
	}
	return !known;
}

/* Read every queued event: true when one matters (or they cannot be read). */
static bool watch_drain(const struct files_watch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool matters = false;

	for (int reads = 0; reads < DRAIN_READS_MAX; reads++) {
		ssize_t n = read(w->inotify_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return matters;
		if (n <= 0)
			return true;
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *e = (const void *)(buf + off);

			matters |= event_matters(w, e);
			off += (ssize_t)(sizeof(*e) + e->len);
		}
	}
	return true;
}

bool files_watch_quiet(struct files_watch *w, const char *path, const char *wal_path)
{
	if (w->inotify_fd >= 0) {
		struct pollfd p[2] = {
			{ .fd = w->inotify_fd, .events = POLLIN },
			{ .fd = w->mounts_fd, .events = POLLPRI },
		};
		int n = poll(p, 2, 0);

		if (n == 0 && w->proven)
			return true;
		/* the mount poll fires once per change: it is taken now or never */
		if (n < 0 || p[1].revents || watch_drain(w))
			watch_close(w);
	}
	w->proven = false;
	if (w->inotify_fd < 0 && !w->given_up) {
		int r = watch_arm(w, path, wal_path);

		/* a path that does not resolve fails the stat check; later it may */
		if (r < 0 && r != -ENOENT && r != -ENOTDIR) {
			w->given_up = true;
			log_debug("store: every files check stats %s: %s", path, strerror(-r));
		}
	}
	return false;
}

void files_watch_proven(struct files_watch *w)
{
	w->proven = w->inotify_fd >= 0;
}
