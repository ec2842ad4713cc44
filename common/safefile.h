/* SPDX-License-Identifier: MIT */
/*
 * safefile.h - replace a file in a directory root may not own, without ever
 * following a link someone else planted there (docs/security.md).
 *
 * safefile_replace(dir_fd-relative name) writes the new content to a fresh
 * file created with O_CREAT|O_EXCL under an unpredictable name in the same
 * directory (O_EXCL never follows a symlink: a planted one makes the create
 * fail, and the next random name is tried), fsyncs it, sets its mode, and
 * renames it over the target.  rename(2) replaces a symlink at the target
 * name instead of writing through it, so the only file root ever writes is
 * the one it just created.  Readers see the old content or the new one,
 * never half.
 *
 * safefile_open() opens such a file in place, never through a link, and
 * safefile_dir_private() says whether anyone but its owner may write a
 * directory.  Tested by tests/common/test-safefile.c (safefile_replace) and
 * tests/adversarial/lock-symlink.sh (the other two, as the store uses them
 * for its lock file).
 */
#ifndef VFHEALTH_SAFEFILE_H
#define VFHEALTH_SAFEFILE_H

#include <stdio.h>
#include <sys/types.h>

/* Writes the content to `out`; returns 0 or -errno. */
typedef int (*safefile_render_fn)(void *userdata, FILE *out);

/* Replace `path` (its directory is resolved once, then used by descriptor)
 * with what render writes, with permission bits `mode`.  Returns 0 or
 * -errno; on failure the target is untouched and no temporary is left. */
int safefile_replace(const char *path, mode_t mode, safefile_render_fn render, void *userdata);

/* Open (creating it with `mode` if missing) the regular file `path` for
 * reading and writing, never through a symlink at its last component
 * (O_NOFOLLOW: -ELOOP) and never a FIFO, device or directory (-EINVAL):
 * a lock file root keeps in a directory someone else may have written.
 * Returns the descriptor (close-on-exec) or -errno. */
int safefile_open(const char *path, mode_t mode);

/* 0 when the directory holding `path` is writable by its owner alone;
 * -EPERM when group or others may write it (they could plant links or
 * files there), else -errno from stat. */
int safefile_dir_private(const char *path);

#endif
