/* SPDX-License-Identifier: MIT */
/*
 * liveness.h - gathers the evidence that liveness_verdict() (rules.h) judges
 * a claim's VMM by: its pid's start time (proto/procfs.h), the host's boot
 * id, and whether a socket bound to its control path is LISTENING in its
 * network namespace.  Every read is under a proc root, so tests point them at
 * a fake tree (tests/sentinel/test-rules.c, test-liveness-*.sh).
 *
 * The control path itself is never stat()ed nor connect()ed: a socket file
 * outlives a VMM killed with SIGKILL, and a connection would reach whoever
 * listens there now.  The kernel's socket table (PROC/PID/net/unix) lists
 * only sockets that are bound and alive.
 * Conventions: 0 or -errno; outputs are written only on success.
 */
#ifndef VFHEALTH_SENTINEL_LIVENESS_H
#define VFHEALTH_SENTINEL_LIVENESS_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/assignment.h"
#include "sentinel/rules.h"

/* Flags bit of a listening socket in /proc/net/unix (__SO_ACCEPTCON), and
 * the St column of an unconnected one (SS_UNCONNECTED). */
#define UNIX_FLAG_ACCEPTCON 0x00010000UL
#define UNIX_STATE_UNCONNECTED 1

/* One line of /proc/net/unix ("Num RefCount Protocol Flags Type St Inode
 * Path", len bytes without the newline): true when it is a socket listening
 * (Flags has UNIX_FLAG_ACCEPTCON, St 01) bound to exactly path.  The header,
 * other sockets and malformed lines are false. */
bool unix_line_listens_on(const char *line, size_t len, const char *path);

/* Whether a socket bound to path listens in the network namespace of pid
 * (PROC_ROOT/PID/net/unix; pid 0: PROC_ROOT/self/net/unix, the sentinel's
 * own): 1 yes, 0 no, -errno when the table cannot be read (-ENOENT too: the
 * process may have exited between two reads; the caller judges that). */
int unix_socket_listening(const char *proc_root, int64_t pid, const char *path);

/* Every piece of evidence about c's VMM.  boot_rc and boot_id_now are
 * proc_boot_id()'s (proto/procfs.h), read once per pass. */
void liveness_gather(const char *proc_root, const struct assignment *c, int boot_rc,
		     const char *boot_id_now, struct liveness_evidence *ev);

#endif
