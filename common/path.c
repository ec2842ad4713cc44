/* SPDX-License-Identifier: MIT */
/* path.c - path helpers (path.h). */
#include "common/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

char *path_absolute(const char *path)
{
	_cleanup_free_ char *cwd = NULL;
	char *abs = NULL;

	if (path[0] == '/')
		return strdup(path);
	cwd = getcwd(NULL, 0);
	if (!cwd || asprintf(&abs, "%s/%s", cwd, path) < 0)
		return NULL;
	return abs;
}

int path_read(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, capacity = 0;

	if (fd < 0)
		return negative_errno();
	for (;;) {
		if (len + 1 >= capacity) {
			size_t grown_capacity = capacity ? 2 * capacity : 4096;
			char *grown = realloc(buf, grown_capacity);
			if (!grown)
				return -ENOMEM;
			buf = grown;
			capacity = grown_capacity;
		}
		ssize_t n = read(fd, buf + len, capacity - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return -E2BIG; /* never grows past twice max */
	}
	buf[len] = '\0';
	*ret = move_ptr(buf);
	*ret_len = len;
	return 0;
}

int path_mkdir_parents(const char *path, mode_t mode)
{
	_cleanup_free_ char *dir = strdup(path);

	if (!dir)
		return -ENOMEM;
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, mode) < 0 && errno != EEXIST)
			return negative_errno();
		*p = '/';
	}
	return 0;
}
