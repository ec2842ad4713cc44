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
 * locks of its own (tests/lib/preload.h).
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

#include "tests/lib/preload.h"

typedef int (*sync_fn)(int);

static void hold(int fd)
{
	const char *fifo = getenv("VFHEALTH_STALL_FIFO");
	struct stat st;
	char byte;
	int gate;

	if (!fifo || stat(fifo, &st) != 0 || !S_ISFIFO(st.st_mode) ||
	    !preload_fd_under(fd, getenv("VFHEALTH_STALL_DIR")))
		return;
	gate = open(fifo, O_RDONLY | O_CLOEXEC);
	if (gate < 0)
		return;
	while (read(gate, &byte, 1) < 0)
		;
	close(gate);
}

int fsync(int fd)
{
	PRELOAD_REAL(fsync, sync_fn);
	hold(fd);
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	PRELOAD_REAL(fdatasync, sync_fn);
	hold(fd);
	return real_fdatasync(fd);
}
