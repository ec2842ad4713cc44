/* SPDX-License-Identifier: MIT */
/* safefile.c - atomic, link-safe replacement of a file (safefile.h). */
#include "common/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

#define TEMP_ATTEMPTS 16

/* Create ".NAME.XXXXXXXXXXXXXXXX" in dir_fd with O_EXCL: never a link. */
static int create_temp(int dir_fd, const char *name, char *tmp, size_t tmp_size)
{
	for (int i = 0; i < TEMP_ATTEMPTS; i++) {
		uint64_t nonce;
		int fd;

		if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
			return negative_errno();
		if ((size_t)snprintf(tmp, tmp_size, ".%s.%016llx", name,
				     (unsigned long long)nonce) >= tmp_size)
			return -ENAMETOOLONG;
		fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return negative_errno();
	}
	return -EEXIST;
}

int safefile_replace(const char *path, mode_t mode, safefile_render_fn render, void *userdata)
{
	_cleanup_free_ char *dir_copy = strdup(path), *name_copy = strdup(path);
	_cleanup_close_ int dir_fd = -1;
	_cleanup_fclose_ FILE *out = NULL;
	char tmp[NAME_MAX + 1];
	const char *name;
	int fd, r;

	if (!dir_copy || !name_copy)
		return -ENOMEM;
	name = basename(name_copy);
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "/") == 0)
		return -EINVAL;
	dir_fd = open(dirname(dir_copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return negative_errno();
	fd = create_temp(dir_fd, name, tmp, sizeof(tmp));
	if (fd < 0)
		return fd;
	out = fdopen(fd, "w");
	if (!out) {
		r = negative_errno();
		close(fd);
		goto fail;
	}
	r = render(userdata, out);
	if (r == 0 && (fflush(out) != 0 || ferror(out)))
		r = errno ? negative_errno() : -EIO;
	if (r == 0 && fchmod(fileno(out), mode) < 0)
		r = negative_errno();
	if (r == 0 && fsync(fileno(out)) < 0)
		r = negative_errno();
	if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = negative_errno();
	if (r < 0)
		goto fail;
	(void)fsync(dir_fd); /* the rename itself; the content is durable already */
	return 0;
fail:
	(void)unlinkat(dir_fd, tmp, 0);
	return r;
}

int safefile_open(const char *path, mode_t mode)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		      mode);

	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0) {
		int r = negative_errno();
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	/* O_NONBLOCK only kept a planted FIFO from blocking the open */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		int r = negative_errno();
		close(fd);
		return r;
	}
	return fd;
}

int safefile_dir_private(const char *path)
{
	_cleanup_free_ char *dir_copy = strdup(path);
	struct stat st;

	if (!dir_copy)
		return -ENOMEM;
	if (stat(dirname(dir_copy), &st) < 0)
		return negative_errno();
	return (st.st_mode & (S_IWGRP | S_IWOTH)) ? -EPERM : 0;
}
