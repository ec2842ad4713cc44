/* SPDX-License-Identifier: MIT */
/*
 * procfs.h - the one reader of /proc/PID/stat's field 22 (starttime, clock
 * ticks since boot).  A pid and its start time name one process even after
 * the pid is reused: vfhealthd records it when a claim names a pid
 * (fs/vfiles.c), the sentinel compares it before it releases a claim whose
 * VMM looks dead (sentinel/rules.c).  Tests: tests/sentinel/test-rules.c
 * (a fake /proc tree and the real one).
 */
#ifndef VFHEALTH_PROCFS_H
#define VFHEALTH_PROCFS_H

#include <stddef.h>
#include <stdint.h>

/* Parse the text of a /proc/PID/stat file: comm (field 2) may contain spaces
 * and parentheses, so fields are counted after the last ')'.  -EBADMSG when
 * it is not such a file (or longer than 1023 bytes); *ret untouched then. */
int proc_stat_parse_starttime(const char *text, size_t len, uint64_t *ret);

/* Field 22 of PROC_ROOT/PID/stat (proc_root NULL: "/proc").  -EINVAL for
 * pid <= 0; -ENOENT when the process does not exist (also ESRCH: it exited
 * between open and read); -EBADMSG when the file cannot be parsed; another
 * -errno when it cannot be read. */
int proc_pid_starttime(const char *proc_root, int64_t pid, uint64_t *ret);

#endif
