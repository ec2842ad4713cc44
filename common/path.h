/* SPDX-License-Identifier: MIT */
/* path.h - path helpers every program shares.  Tested by tests/common/test-parse.c. */
#ifndef VFHEALTH_PATH_H
#define VFHEALTH_PATH_H

#include <stddef.h>
#include <sys/types.h>

/* A malloc'd absolute copy of path: as given when it starts with '/', else
 * relative to the current directory (taken now: a daemon that changes its
 * directory later keeps meaning the same file).  NULL with errno set. */
char *path_absolute(const char *path);

/* The whole content of the file at path (a regular file, or one of the
 * mount's, which report size 0), read to EOF into a malloc'd NUL-terminated
 * buffer: 0, -E2BIG when it holds more than max bytes, or -errno. */
int path_read(const char *path, size_t max, char **ret, size_t *ret_len);

/* Make the directories missing above path (not path itself), each with
 * mode: 0 or -errno of the first mkdir that failed other than EEXIST. */
int path_mkdir_parents(const char *path, mode_t mode);

#endif
