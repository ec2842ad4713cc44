/* SPDX-License-Identifier: MIT */
/*
 * barecommit.h - the bare SQLite loop the report figures are measured
 * against: the store's failures row, one row a transaction (BEGIN
 * IMMEDIATE ... COMMIT), WAL, synchronous=FULL.  `vfbench sqlite` times it
 * alone; `reportfloor` runs it inside a FUSE write.  Outside store/, only
 * this file includes sqlite3.h.
 */
#pragma once

struct bare_loop;

/* A fresh database at PATH (an old one is removed), warmed by WARM untimed
 * commits and a checkpoint that restarts the WAL: the commits that follow
 * overwrite WAL frames already on disk, as a long-running store's do,
 * instead of growing a new file (an fdatasync that also syncs the file's
 * size, which would make the loop slower and flatter what is measured
 * against it).  0 or -errno; the reason on stderr. */
int bare_open(const char *path, unsigned warm, struct bare_loop **ret);
/* One more row, durable when it returns.  0 or -EIO (the reason on stderr). */
int bare_commit(struct bare_loop *b);
void bare_close(struct bare_loop *b);
