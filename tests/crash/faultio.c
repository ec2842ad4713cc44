/* SPDX-License-Identifier: MIT */
/*
 * faultio.c - an LD_PRELOAD shim that turns writes and syncs under one
 * directory into EIO while a trigger file exists: the I/O-error half of the
 * fault tests, under a running vfhealthd and its unmodified SQLite.
 *
 *   VFHEALTH_FAULT_DIR=/tmp/x/db       files whose path starts with this
 *   VFHEALTH_FAULT_TRIGGER=/tmp/x/on   faults are on while this file exists
 *
 * Why not a read-only remount of the database's tmpfs, the obvious tool:
 * Linux refuses to remount a filesystem read-only while a file on it is open
 * for writing (EBUSY), and the daemon always holds its database open.
 *
 * SQLite's unix VFS reaches pwrite64/write/fsync/fdatasync/ftruncate64 through
 * libsqlite3.so's dynamic symbols, so interposing them here is enough.
 * Reads are left alone: the contract under test is what happens when
 * commits fail.  No threads or locks of its own (tests/lib/preload.h).
 */
/* Declare the plain and the 64-bit names separately (the project builds with
 * _FILE_OFFSET_BITS=64, which would alias them). */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "tests/lib/preload.h"

static bool fault_active(int fd)
{
	const char *trigger = getenv("VFHEALTH_FAULT_TRIGGER");

	return trigger && access(trigger, F_OK) == 0 &&
	       preload_fd_under(fd, getenv("VFHEALTH_FAULT_DIR"));
}

typedef ssize_t (*pwrite64_fn)(int, const void *, size_t, off64_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*sync_fn)(int);
typedef int (*ftruncate_fn)(int, off_t);
typedef int (*ftruncate64_fn)(int, off64_t);

#define FAIL_IF_FAULTED(fd, ret)        \
	do {                            \
		if (fault_active(fd)) { \
			errno = EIO;    \
			return ret;     \
		}                       \
	} while (0)

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset)
{
	PRELOAD_REAL(pwrite64, pwrite64_fn);
	FAIL_IF_FAULTED(fd, -1);
	return real_pwrite64(fd, buf, count, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	PRELOAD_REAL(pwrite, pwrite_fn);
	FAIL_IF_FAULTED(fd, -1);
	return real_pwrite(fd, buf, count, offset);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	PRELOAD_REAL(write, write_fn);
	/* stderr and the FUSE device are never under the fault dir; the
	 * readlink is only paid while the trigger exists. */
	FAIL_IF_FAULTED(fd, -1);
	return real_write(fd, buf, count);
}

int fsync(int fd)
{
	PRELOAD_REAL(fsync, sync_fn);
	FAIL_IF_FAULTED(fd, -1);
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	PRELOAD_REAL(fdatasync, sync_fn);
	FAIL_IF_FAULTED(fd, -1);
	return real_fdatasync(fd);
}

int ftruncate(int fd, off_t length)
{
	PRELOAD_REAL(ftruncate, ftruncate_fn);
	FAIL_IF_FAULTED(fd, -1);
	return real_ftruncate(fd, length);
}

int ftruncate64(int fd, off64_t length)
{
	PRELOAD_REAL(ftruncate64, ftruncate64_fn);
	FAIL_IF_FAULTED(fd, -1);
	return real_ftruncate64(fd, length);
}
