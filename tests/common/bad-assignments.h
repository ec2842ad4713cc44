/* SPDX-License-Identifier: MIT */
/*
 * bad-assignments.h - assignment lines every parser of an update must
 * refuse (-EINVAL, nothing changed): grammar's assignment_parse_update()
 * (tests/grammar/test-grammar.c) and the claim file's parser over it
 * (tests/fs/test-vfiles.c).  Each test adds the lines only its layer sees.
 */
#ifndef VFHEALTH_TESTS_BAD_ASSIGNMENTS_H
#define VFHEALTH_TESTS_BAD_ASSIGNMENTS_H

#define BAD_ASSIGNMENT_LINES                                                                      \
	"agent=tcp:1.2.3.4", "agent=vsock:", "agent=unix:rel", "control=rel", "control=/a\tb",    \
		"pid=0", "pid=-1", "pid=4194305", "pid=1x", "nokey", "=v", "bogus=1",             \
		"agent=vsock:3\nagent=vsock:4", "claimed_at=", "claimed_at=2026-02-30T00:00:00Z", \
		"Agent=vsock:3"

#endif
