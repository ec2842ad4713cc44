/* SPDX-License-Identifier: MIT */
/* sockdir.c - the socket directories' two rules.  Contract in sockdir.h. */
#include "common/sockdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "common/cleanup.h"
#include "common/endpoint.h" /* the struct alone: nothing of libvfproto is linked */

/* openat2 may say EAGAIN when a rename races the lookup; a few retries. */
#define OPENAT2_RETRIES 8

void sockdirs_init_default(struct sockdirs *d)
{
	static const char *const defaults[] = { SOCKDIRS_DEFAULT };

	*d = (struct sockdirs){ 0 };
	for (size_t i = 0; i < ARRAY_SIZE(defaults); i++)
		(void)sockdirs_add(d, defaults[i]);
}

/* Absolute, no empty, "." or ".." component, no trailing '/' (len > 1). */
static bool normalized(const char *p, size_t len)
{
	if (len < 2 || p[0] != '/' || p[len - 1] == '/')
		return false;
	for (size_t i = 0; i < len;) {
		size_t n;

		i++; /* the '/' */
		n = strcspn(p + i, "/");
		if (i + n > len)
			n = len - i;
		if (n == 0 || (n == 1 && p[i] == '.') || (n == 2 && p[i] == '.' && p[i + 1] == '.'))
			return false;
		i += n;
	}
	return true;
}

int sockdirs_add(struct sockdirs *d, const char *dir)
{
	size_t len;

	if (!d || !dir)
		return -EINVAL;
	len = strlen(dir);
	if (len > 1 && dir[len - 1] == '/')
		len--;
	if (len > SOCKDIR_PATH_MAX)
		return -ENAMETOOLONG;
	if (!normalized(dir, len) || memchr(dir, '\n', len))
		return -EINVAL;
	for (unsigned i = 0; i < d->count; i++)
		if (strlen(d->dir[i]) == len && memcmp(d->dir[i], dir, len) == 0)
			return 0;
	if (d->count >= SOCKDIRS_MAX)
		return -E2BIG;
	memcpy(d->dir[d->count], dir, len);
	d->dir[d->count][len] = '\0';
	d->count++;
	return 0;
}

int sockdirs_find(const struct sockdirs *d, const char *path)
{
	size_t len;

	if (!d || !path)
		return -EACCES;
	len = strlen(path);
	if (!normalized(path, len))
		return -EACCES;
	for (unsigned i = 0; i < d->count; i++) {
		size_t n = strlen(d->dir[i]);

		/* DIR + "/" + at least one byte; normalized() made that a component. */
		if (len > n + 1 && memcmp(path, d->dir[i], n) == 0 && path[n] == '/')
			return (int)i;
	}
	return -EACCES;
}

int sockdirs_open_walk(int dirfd, const char *relpath)
{
	char name[NAME_MAX + 1];
	_cleanup_close_ int cur = -1;
	const char *p = relpath;
	int at = dirfd;

	for (;;) {
		size_t n = strcspn(p, "/");
		struct stat st;
		int fd;

		if (n == 0 || n > NAME_MAX)
			return n ? -ENAMETOOLONG : -EACCES;
		memcpy(name, p, n);
		name[n] = '\0';
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			return -EACCES;
		fd = openat(at, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return negative_errno();
		if (cur >= 0)
			close(cur);
		cur = fd;
		at = cur;
		if (fstat(cur, &st) < 0)
			return negative_errno();
		if (S_ISLNK(st.st_mode))
			return -EACCES; /* O_PATH|O_NOFOLLOW opened the link itself */
		p += n;
		if (!*p)
			return move_fd(cur);
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		p++;
	}
}

static int open_beneath(int dirfd, const char *relpath)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	for (int i = 0; i < OPENAT2_RETRIES; i++) {
		fd = syscall(SYS_openat2, dirfd, relpath, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		switch (errno) {
		case EAGAIN:
		case EINTR:
			continue;
		case ENOSYS:
		case EPERM: /* a seccomp filter that does not know openat2 */
			return sockdirs_open_walk(dirfd, relpath);
		case ELOOP: /* a symlink below the directory */
		case EXDEV: /* a way out of it */
			return -EACCES;
		default:
			return negative_errno();
		}
	}
	return -EAGAIN;
}

int sockdirs_open(const struct sockdirs *d, const char *path)
{
	_cleanup_close_ int root = -1;
	int i = sockdirs_find(d, path);

	if (i < 0)
		return i;
	/* The directory itself as the operator named it (symlinks and all). */
	root = open(d->dir[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return negative_errno();
	return open_beneath(root, path + strlen(d->dir[i]) + 1);
}

int sockdirs_check(const struct sockdirs *d, const char *path)
{
	int fd = sockdirs_open(d, path);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	/* Nothing there yet: nothing to follow.  The sentinel checks again. */
	if (fd == -ENOENT || fd == -ENOTDIR)
		return 0;
	return fd;
}

socklen_t sockdirs_sockaddr(int fd, struct sockaddr_un *sun)
{
	int n;

	*sun = (struct sockaddr_un){ .sun_family = AF_UNIX };
	n = snprintf(sun->sun_path, sizeof(sun->sun_path), "/proc/self/fd/%d", fd);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

int sockdirs_check_claim(const struct sockdirs *d, const char *control,
			 const struct endpoint *agent, const char **ret_key, const char **ret_path)
{
	int r;

	if (control && control[0]) {
		r = sockdirs_check(d, control);
		if (r < 0) {
			*ret_key = "control";
			*ret_path = control;
			return r;
		}
	}
	if (agent && agent->kind != ENDPOINT_VSOCK) {
		r = sockdirs_check(d, agent->path);
		if (r < 0) {
			*ret_key = "agent";
			*ret_path = agent->path;
			return r;
		}
	}
	return 0;
}
