/* SPDX-License-Identifier: MIT */
/*
 * preload.h - what the tests' LD_PRELOAD shims share (tests/crash/faultio.c,
 * tests/fs/stallsync.c): finding the function they stand in front of, and
 * telling whether a descriptor is a file under the directory the test named.
 * Header only: a shim is one file, built without the sanitizer runtime and
 * linked with nothing of the project.
 */
#pragma once

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Declare real_NAME of TYPE and look the next definition of NAME up once
 * (a benign race: every thread stores the same value).  dlsym's void * to a
 * function pointer goes through memcpy: ISO C has no cast between the two. */
#define PRELOAD_REAL(name, type)                         \
	static type real_##name;                         \
	if (!real_##name) {                              \
		void *sym = dlsym(RTLD_NEXT, #name);     \
		memcpy(&real_##name, &sym, sizeof(sym)); \
	}

/* Whether fd is open on a file whose path starts with dir (false for a
 * NULL or empty dir, or a descriptor /proc cannot name). */
static inline bool preload_fd_under(int fd, const char *dir)
{
	char link[64], path[PATH_MAX];
	ssize_t n;

	if (!dir || !*dir)
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return false;
	path[n] = '\0';
	return strncmp(path, dir, strlen(dir)) == 0;
}
