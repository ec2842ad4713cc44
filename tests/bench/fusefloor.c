/* SPDX-License-Identifier: MIT */
/*
 * fusefloor.c - the floor of a read through FUSE on this machine: a FUSE
 * server that does nothing but answer, mounted the way vfhealthd mounts
 * (floor.h), with no store, no handle, no budget: each request is one
 * reply.  Two files in the root:
 *   quarantined  "0\n", opened keep_cache, as VF/quarantined is
 *   list         the content of LIST_FILE (at most 4 KiB, read at start),
 *                size 0 and opened direct_io, as a top-level list is
 * What vfhealthd costs above this is its own; what this costs above tmpfs is
 * the kernel's round trip to a server (run-benchmarks.sh prints both).
 * WORKERS (default 32) is libfuse's multi-threaded loop's threads at most;
 * 0 serves from one thread (fuse_session_loop), as vfhealthd's loop serves
 * a read (fs/loop.c): how much of the round trip is the multi-threaded
 * loop's (its idle threads are woken in turn, the one that waited longest
 * first, so a lone reader's requests land on a thread that is cold, often
 * on the other CPU).
 *
 *   fusefloor MOUNTPOINT LIST_FILE [WORKERS]   serve until unmounted or SIGTERM
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "floor.h"

#define FLOOR_INO 2
#define FLOOR_TEXT "0\n"
#define LIST_INO 3

static const struct floor_file files[] = {
	{ "quarantined", 0444, sizeof(FLOOR_TEXT) - 1 },
	{ "list", 0444, 0 },
};
static char list_text[4096];
static size_t list_len;

static int read_list(const char *path)
{
	FILE *list = fopen(path, "re");

	if (!list) {
		perror(path);
		return 1;
	}
	list_len = fread(list_text, 1, sizeof(list_text), list);
	fclose(list);
	return 0;
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->keep_cache = ino == FLOOR_INO;
	fi->direct_io = ino == LIST_INO;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const char *text = ino == FLOOR_INO ? FLOOR_TEXT : list_text;
	size_t len = ino == FLOOR_INO ? strlen(FLOOR_TEXT) : list_len;

	(void)fi;
	floor_reply_window(req, text, len, size, off);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

int main(int argc, char **argv)
{
	struct fuse_lowlevel_ops ops = {
		.open = floor_open,
		.read = floor_read,
		.release = floor_release,
	};

	return floor_main(argc, argv, "fusefloor MOUNTPOINT LIST_FILE [WORKERS]", files,
			  sizeof(files) / sizeof(files[0]), &ops, read_list);
}
