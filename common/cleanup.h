/* SPDX-License-Identifier: MIT */
/*
 * cleanup.h - scope-bound cleanup for locals, in the style of lxcfs and systemd.
 *
 *   _cleanup_free_ char *buf = malloc(n);     freed when buf leaves scope
 *   _cleanup_close_ int fd = open(...);       closed when fd leaves scope
 *   return move_ptr(buf);                     hand ownership to the caller
 *
 * Every function in vfhealth releases its locals this way; a goto ladder is
 * kept for setup and teardown of long-lived objects only.
 */
#ifndef VFHEALTH_CLEANUP_H
#define VFHEALTH_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

static inline void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Take ownership out of a _cleanup_ variable. */
/* __extension__: statement expressions are GNU C; -Wpedantic stays quiet. */
#define move_ptr(p)                        \
	__extension__({                    \
		__typeof__(p) __tmp = (p); \
		(p) = NULL;                \
		__tmp;                     \
	})

#define move_fd(fd)               \
	__extension__({           \
		int __tmp = (fd); \
		(fd) = -1;        \
		__tmp;            \
	})

/* Define a cleanup helper for a type with a destructor that takes T*. */
#define DEFINE_CLEANUP_FUNC(type, func)      \
	static inline void func##p(type **p) \
	{                                    \
		if (*p)                      \
			func(*p);            \
	}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The struct of type holding *ptr as its member. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

/* Negative errno from the last libc failure, never 0. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}

#endif
