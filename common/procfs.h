/* SPDX-License-Identifier: MIT */
/*
 * procfs.h - the one reader of /proc/PID/stat's field 22 (starttime, clock
 * ticks since boot), its state (field 3), and of the host's boot id.  A pid and its start time name one process even after
 * the pid is reused: vfhealthd records it when a claim names a pid
 * (fs/vfiles.c), the sentinel compares it, and the state (a zombie is no
 * VMM), before it judges a claim's VMM (sentinel/verdict.c).  Tests: tests/sentinel/test-verdict.c
 * (a fake /proc tree and the real one).
 */
#ifndef VFHEALTH_PROCFS_H
#define VFHEALTH_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the sentinel reads of one process: field 3 (state: 'R', 'S', 'Z' a
 * zombie, 'X' dead, ...) and field 22 (starttime). */
struct proc_stat {
	char state;
	uint64_t starttime;
};

/* Parse the text of a /proc/PID/stat file: comm (field 2) may contain spaces
 * and parentheses, so fields are counted after the last ')'.  -EBADMSG when
 * it is not such a file (or longer than 1023 bytes); *ret untouched then. */
int proc_stat_parse(const char *text, size_t len, struct proc_stat *ret);
int proc_stat_parse_starttime(const char *text, size_t len, uint64_t *ret);

/* Whether a process in this state has ended (a zombie not yet reaped, or
 * dead): it holds its pid and start time, but is no VMM any more. */
bool proc_state_ended(char state);

/* Field 22 of PROC_ROOT/PID/stat (proc_root NULL: "/proc").  -EINVAL for
 * pid <= 0; -ENOENT when the process does not exist (also ESRCH: it exited
 * between open and read); -EACCES when a proc mounted hidepid= hides a
 * process the kernel says runs (tests/sentinel/test-liveness-unit.sh);
 * -EBADMSG when the file cannot be parsed; another -errno when it cannot be
 * read. */
int proc_pid_starttime(const char *proc_root, int64_t pid, uint64_t *ret);

/* PROC_ROOT/PID/stat's state and start time; errors as proc_pid_starttime. */
int proc_pid_stat(const char *proc_root, int64_t pid, struct proc_stat *ret);

/* A boot id: a lowercase UUID, 8-4-4-4-12 hex digits (grammar/limits.h
 * re-exports the length as BOOT_ID_LEN). */
#define PROC_BOOT_ID_LEN 36

/* Whether text is a boot id in that form. */
bool proc_boot_id_valid(const char *text);

/* PROC_ROOT/sys/kernel/random/boot_id (proc_root NULL: "/proc") into ret,
 * without its newline: with a pid's start time it names one process across
 * reboots (a claim records it).  -EBADMSG when it is not a boot id; another
 * -errno when it cannot be read. */
int proc_boot_id(const char *proc_root, char ret[static PROC_BOOT_ID_LEN + 1]);

#endif
