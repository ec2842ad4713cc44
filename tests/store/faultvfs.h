/* SPDX-License-Identifier: MIT */
/*
 * faultvfs.h - a SQLite VFS for tests that wraps the default one and, on
 * request, fails or stalls the calls that make a commit durable.
 *
 * faultvfs_register() installs it (not as the default) under FAULTVFS_NAME;
 * pass that name as store_options.vfs_name.  Faults apply to every file
 * opened through it (database, WAL, journal) and take effect immediately,
 * from any thread:
 *   - faultvfs_fail_writes(rc): xWrite returns rc (e.g. SQLITE_FULL) until
 *     called again with SQLITE_OK; nothing reaches the file meanwhile.
 *   - faultvfs_fail_syncs(rc): xSync returns rc (after doing nothing).
 *   - faultvfs_block_syncs(true): every xSync waits until
 *     faultvfs_block_syncs(false); faultvfs_wait_blocked() waits (bounded)
 *     until a given number of syncs are waiting.
 * Counters: faultvfs_syncs() counts xSync calls that reached the real file.
 */
#ifndef VFHEALTH_TESTS_FAULTVFS_H
#define VFHEALTH_TESTS_FAULTVFS_H

#include <stdbool.h>

#define FAULTVFS_NAME "vfhealth-faultvfs"

/* 0 or a SQLite error code.  Safe to call more than once. */
int faultvfs_register(void);

void faultvfs_fail_writes(int sqlite_rc);
void faultvfs_fail_syncs(int sqlite_rc);
void faultvfs_block_syncs(bool block);

/* true when at least n syncs are blocked before timeout_ms passes. */
bool faultvfs_wait_blocked(unsigned n, int timeout_ms);

unsigned long faultvfs_syncs(void);

#endif
