/* SPDX-License-Identifier: MIT */
/*
 * stallsync.c - an LD_PRELOAD shim that holds a sync of a file under one
 * directory until the test lets it go: a commit that takes as long as the
 * test wants, under a running vfhealthd and its unmodified SQLite.
 *
 *   VFHEALTH_STALL_DIR=/tmp/x/db     files whose path starts with this
 *   VFHEALTH_STALL_FIFO=/tmp/x/gate  while this FIFO exists, such a sync
 *                                    opens it for reading and waits for one
 *                                    byte before it syncs
 *
 * The test learns that a commit is held when its own open of the FIFO for
 * writing returns (the shim's open for reading is what completes it), and
 * lets it go by writing a byte: no sleeps on either side.  SQLite reaches
 * fsync/fdatasync through libsqlite3.so's dynamic symbols.  No threads or
 * locks of its own; the real functions are looked up once, lazily (a
 * benign race: every thread stores the same value).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*sync_fn)(int);

static bool under_dir(int fd)
{
	const char *dir = getenv("VFHEALTH_STALL_DIR");
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

static void hold(int fd)
{
	const char *fifo = getenv("VFHEALTH_STALL_FIFO");
	struct stat st;
	char byte;
	int gate;

	if (!fifo || stat(fifo, &st) != 0 || !S_ISFIFO(st.st_mode) || !under_dir(fd))
		return;
	gate = open(fifo, O_RDONLY | O_CLOEXEC);
	if (gate < 0)
		return;
	while (read(gate, &byte, 1) < 0)
		;
	close(gate);
}

static sync_fn real(const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);
	sync_fn fn;

	memcpy(&fn, &sym, sizeof(sym)); /* ISO C has no cast from void * to a function */
	return fn;
}

int fsync(int fd)
{
	static sync_fn real_fsync;

	if (!real_fsync)
		real_fsync = real("fsync");
	hold(fd);
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	static sync_fn real_fdatasync;

	if (!real_fdatasync)
		real_fdatasync = real("fdatasync");
	hold(fd);
	return real_fdatasync(fd);
}
