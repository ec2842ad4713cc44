/* SPDX-License-Identifier: MIT */
/* path.c - path helpers (path.h). */
#include "proto/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/cleanup.h"

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
