/* SPDX-License-Identifier: MIT */
/* path.h - path helpers every program shares.  Tested by tests/common/test-parse.c. */
#ifndef VFHEALTH_PATH_H
#define VFHEALTH_PATH_H

/* A malloc'd absolute copy of path: as given when it starts with '/', else
 * relative to the current directory (taken now: a daemon that changes its
 * directory later keeps meaning the same file).  NULL with errno set. */
char *path_absolute(const char *path);

#endif
