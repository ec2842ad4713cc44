/* SPDX-License-Identifier: MIT */
/*
 * mount.c - mount handling: creating the mountpoint, whether this process
 * may mount, reading /proc/self/mountinfo, probing a mountpoint with a
 * forked statfs (a dead FUSE mount can hang the caller), and detaching a
 * stale mount left by a daemon that died.
 */
#include "fs/vffs-internal.h"

#include "common/child.h"
#include "common/parse.h"
#include "common/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

int mkdir_p(const char *path, mode_t mode)
{
	int r = path_mkdir_parents(path, mode);

	if (r < 0)
		return r;
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

/* Whether this process may mount: CAP_SYS_ADMIN in its effective set. */
bool can_mount(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (syscall(SYS_capget, &hdr, data) < 0)
		return geteuid() == 0;
	return data[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32));
}

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void mountinfo_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* The file system type of the topmost mount at path (/proc/self/mountinfo),
 * "" when nothing is mounted there. */
static int mounted_type(const char *path, char *type, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;

	type[0] = '\0';
	if (!f)
		return negative_errno();
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE ... */
		char *save = NULL, *mountpoint = NULL, *fstype = NULL;
		int i = 0;

		for (char *w = strtok_r(line, " \n", &save); w;
		     w = strtok_r(NULL, " \n", &save), i++) {
			if (i == 4)
				mountpoint = w;
			if (i >= 6 && strcmp(w, "-") == 0) {
				fstype = strtok_r(NULL, " \n", &save);
				break;
			}
		}
		if (!mountpoint || !fstype)
			continue;
		mountinfo_unescape(mountpoint);
		if (strcmp(mountpoint, path) == 0)
			snprintf(type, size, "%s", fstype); /* later lines are mounted on top */
	}
	return 0;
}

/* Does the mount at path answer?  0 yes, -ENOTCONN dead (its daemon is
 * gone), -ETIMEDOUT no answer within the deadline (a daemon alive but
 * stuck), else the errno statfs gave.  Asked from a child process, which a
 * stuck daemon cannot hang: it is killed at the deadline. */
#define PROBE_TIMEOUT_NS (5 * NSEC_PER_SEC)
static int probe_mount(const char *path)
{
	_cleanup_close_ int rd = -1, wr = -1;
	struct child c = CHILD_NONE;
	struct child_status st;
	int pipefd[2], err = ETIMEDOUT, r;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return negative_errno();
	rd = pipefd[0];
	wr = pipefd[1];
	const int fds[] = { CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL, wr };
	const struct child_opts o = { .fds = fds, .n_fds = 4 };
	r = child_fork(&o, &c);
	if (r < 0)
		return r;
	if (r == 0) {
		struct statfs sf;
		int e = statfs(path, &sf) < 0 ? errno : 0;

		_exit(write(3, &e, sizeof(e)) == sizeof(e) ? 0 : 1);
	}
	closep(&wr);
	/* SIGKILL at the deadline, no SIGTERM first: FUSE requests are killable */
	r = child_wait(&c, PROBE_TIMEOUT_NS, 0, &st);
	if (r < 0)
		child_release(&c); /* it does not die: it is left */
	if (r < 0 || st.timed_out || read(rd, &err, sizeof(err)) != sizeof(err))
		err = ETIMEDOUT;
	return -err;
}

/* Never mount over a live vfhealth mount (placement would see this new,
 * empty one and the old one's state would be hidden: fail open); detach a
 * dead FUSE mount (a crashed instance leaves its mount behind: every access
 * fails with ENOTCONN until it is detached).  Anything else mounted there is
 * mounted over, as mount(8) would. */
int clear_mountpoint(struct vffs *fs)
{
	for (int round = 0; round < 8; round++) {
		char type[64];
		int r = mounted_type(fs->mountpoint, type, sizeof(type));

		if (r < 0) {
			log_err("cannot read /proc/self/mountinfo: %s", strerror(-r));
			return r;
		}
		if (strncmp(type, "fuse", 4) != 0)
			return 0; /* nothing, or no FUSE mount: nothing can be dead */
		r = probe_mount(fs->mountpoint);
		if (r != -ENOTCONN) {
			if (strcmp(type, "fuse.vfhealth") != 0)
				return 0; /* another file system's live mount */
			log_err("refusing to mount on %s: a live vfhealth mount is there (%s); "
				"another vfhealthd serves it",
				fs->mountpoint,
				r == 0          ? "it answers" :
				r == -ETIMEDOUT ? "it does not answer" :
						  strerror(-r));
			return -EBUSY;
		}
		if (umount2(fs->mountpoint, MNT_DETACH) < 0) {
			r = negative_errno();
			log_err("cannot detach the stale mount on %s: %s", fs->mountpoint,
				strerror(-r));
			return r;
		}
		log_warn("detached a stale mount on %s (%s, not connected) left by a previous "
			 "instance",
			 fs->mountpoint, type);
	}
	log_err("refusing to mount on %s: too many stale mounts stacked there", fs->mountpoint);
	return -EBUSY;
}
