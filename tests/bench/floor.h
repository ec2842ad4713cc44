/* SPDX-License-Identifier: MIT */
/*
 * floor.h - what the FUSE floors share (fusefloor.c, reportfloor.c): a
 * server mounted the way vfhealthd mounts (the same mount options and
 * capabilities, attributes and entries cached as long) whose root holds a
 * fixed table of files, served by libfuse's multi-threaded loop or from
 * one thread.  Each floor brings its files and its open, read, write and
 * release; lookups, attributes and the loop are here.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include <fuse_lowlevel.h>

#define FLOOR_WORKERS 32 /* vfhealthd's default --fuse-workers */

/* The root's files: the i-th has inode i + 2. */
struct floor_file {
	const char *name;
	mode_t mode; /* permission bits */
	off_t size;
};

/* Answer a READ of SIZE bytes at OFF of the LEN bytes of TEXT. */
void floor_reply_window(fuse_req_t req, const char *text, size_t len, size_t size, off_t off);

/* Serve until unmounted or SIGTERM: `PROGRAM MOUNTPOINT ARG [WORKERS]`,
 * WORKERS threads at most of libfuse's multi-threaded loop (default
 * FLOOR_WORKERS), 0 from one thread.  setup(ARG) runs first and fails the
 * start with a nonzero return; ops' init, lookup and getattr are set here.
 * The exit status for main(). */
int floor_main(int argc, char **argv, const char *usage, const struct floor_file *files,
	       size_t n_files, struct fuse_lowlevel_ops *ops, int (*setup)(const char *arg));
