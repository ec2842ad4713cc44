/* SPDX-License-Identifier: MIT */
/*
 * limits.h - EVERY limit of the /run/vfhealth file interface, in one place.
 *
 * The filesystem (fs/), the store and the sentinel (sentinel/) include this
 * header instead of keeping their own copies; docs/limits.md names each
 * macro with its value and tests/grammar/test-grammar.c fails when the two
 * disagree.  One value per limit, the tightest that every test accepts:
 *
 *  VF_ADDR_LEN            12: "0000:41:00.4" (grammar/vf.h has the rule);
 *                         VF_ADDR_BUFSZ holds one with its NUL.
 *  INSTANCE_ID_MAX        128 characters (the rule lives in common/parse.h,
 *                         re-exported here so this header lists every limit).
 *  FAILURE_MESSAGE_MAX    1024 bytes of an NVRM message kept per failure; longer
 *                         ones are cut (never inside a UTF-8 sequence).
 *  AGENT_ENDPOINT_MAX     139 bytes: what endpoint_parse() accepts (shorter
 *                         than sun_path + 32); a canonical endpoint is at most
 *                         "hvsock:" + 107-byte path + ":" + 10 digits.
 *  CONTROL_PATH_MAX       107 bytes: a VMM's control socket is a Unix socket
 *                         path, so it must fit sun_path with its NUL.
 *  PID_VALUE_MAX          4194304: Linux's PID_MAX_LIMIT.
 *  BOOT_ID_LEN            36: a boot id, a lowercase UUID (common/procfs.h has
 *                         the rule); BOOT_ID_BUFSZ holds one with its NUL.
 *  ASSIGNMENT_FILE_MAX    4096 bytes: a larger assignment file is refused by
 *                         its readers (what the daemon renders is < 400).
 *  WRITE_COMMAND_MAX      4096 bytes: the longest command one write(2) to any
 *                         file of the interface may carry.
 *  REPORT_COMMAND_MAX     "failed " ID " " CLAIMED_AT " " MESSAGE at their
 *                         limits (1191 bytes); fits WRITE_COMMAND_MAX.
 *  OUTCOME_LINE_MAX       127 bytes, with its newline, for the line <vf>/report
 *                         reads back ("quarantined failures=4294967295
 *                         threshold=4294967295 breaker=engaged" is 68);
 *                         OUTCOME_LINE_BUFSZ holds one with its NUL.
 *  THRESHOLD_MIN/MAX/DEFAULT  1 / 1000 / 2 recorded failures quarantine a VF.
 *  VFS_MAX                65536 registered VFs (also the max_quarantined cap).
 *  FAILURES_PER_VF_MAX    1000 failures kept per VF (== THRESHOLD_MAX: a VF is
 *                         quarantined before it could hold more, unless the
 *                         breaker holds it back; then the oldest is dropped).
 *  HISTORY_MAX            1000 entries of <vf>/history (claims and failures, live
 *                         and past): the newest; a first line counts the older.
 *  READER_BUDGET_PER_UID  32 MiB: what the open files of one uid may hold in
 *                         the daemon (fs/budget.h); past it ENOBUFS.
 *  READER_BUDGET_TOTAL    128 MiB: the same, summed over every uid but root
 *                         (root has its own READER_BUDGET_PER_UID).
 */
#ifndef VFHEALTH_GRAMMAR_LIMITS_H
#define VFHEALTH_GRAMMAR_LIMITS_H

#include <sys/un.h>

#include "common/endpoint.h"
#include "common/parse.h"  /* INSTANCE_ID_MAX, RFC3339_NANO_LEN */
#include "common/procfs.h" /* PROC_BOOT_ID_LEN */

#define VF_ADDR_LEN 12
#define VF_ADDR_BUFSZ (VF_ADDR_LEN + 1)
#define FAILURE_MESSAGE_MAX 1024
#define AGENT_ENDPOINT_MAX 139
#define CONTROL_PATH_MAX 107
#define PID_VALUE_MAX 4194304
#define BOOT_ID_LEN PROC_BOOT_ID_LEN
#define BOOT_ID_BUFSZ (BOOT_ID_LEN + 1)
#define ASSIGNMENT_FILE_MAX 4096
#define WRITE_COMMAND_MAX 4096
#define REPORT_COMMAND_MAX \
	(sizeof("failed ") - 1 + INSTANCE_ID_MAX + 1 + RFC3339_NANO_LEN + 1 + FAILURE_MESSAGE_MAX)
#define REPORT_COMMAND_BUFSZ (REPORT_COMMAND_MAX + 1)
#define OUTCOME_LINE_MAX 127
#define OUTCOME_LINE_BUFSZ (OUTCOME_LINE_MAX + 1)
#define THRESHOLD_MIN 1
#define THRESHOLD_MAX 1000
#define THRESHOLD_DEFAULT 2
#define VFS_MAX 65536
#define FAILURES_PER_VF_MAX 1000
#define HISTORY_MAX 1000
#define READER_BUDGET_PER_UID 33554432
#define READER_BUDGET_TOTAL 134217728

/* Every limit above, for the test that checks docs/limits.md. */
#define GRAMMAR_LIMITS(X)        \
	X(VF_ADDR_LEN)           \
	X(INSTANCE_ID_MAX)       \
	X(FAILURE_MESSAGE_MAX)   \
	X(AGENT_ENDPOINT_MAX)    \
	X(CONTROL_PATH_MAX)      \
	X(PID_VALUE_MAX)         \
	X(BOOT_ID_LEN)           \
	X(ASSIGNMENT_FILE_MAX)   \
	X(WRITE_COMMAND_MAX)     \
	X(REPORT_COMMAND_MAX)    \
	X(OUTCOME_LINE_MAX)      \
	X(THRESHOLD_MIN)         \
	X(THRESHOLD_MAX)         \
	X(THRESHOLD_DEFAULT)     \
	X(VFS_MAX)               \
	X(FAILURES_PER_VF_MAX)   \
	X(HISTORY_MAX)           \
	X(READER_BUDGET_PER_UID) \
	X(READER_BUDGET_TOTAL)

/* The values are chosen, not derived; these say why they fit together. */
_Static_assert(AGENT_ENDPOINT_MAX == ENDPOINT_STRING_MAX - 1,
	       "agent= takes exactly what endpoint_parse() takes");
_Static_assert(CONTROL_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path) - 1,
	       "control= fits sun_path with its NUL");
_Static_assert(REPORT_COMMAND_MAX <= WRITE_COMMAND_MAX, "a report fits one write");
_Static_assert(FAILURES_PER_VF_MAX == THRESHOLD_MAX, "quarantined before it holds more");
/* A VF's whole failures file (its lines at their longest) fits one uid's budget. */
_Static_assert((size_t)FAILURES_PER_VF_MAX *(2 * RFC3339_NANO_LEN + INSTANCE_ID_MAX +
					     FAILURE_MESSAGE_MAX + 4) < READER_BUDGET_PER_UID / 2,
	       "a reader can hold two failures files at once");
/* A VF's whole history file (its lines at their longest) fits one uid's budget. */
_Static_assert((size_t)HISTORY_MAX *(3 * RFC3339_NANO_LEN + 2 * INSTANCE_ID_MAX +
				     FAILURE_MESSAGE_MAX + 96) < READER_BUDGET_PER_UID / 2,
	       "a reader can hold two history files at once");
_Static_assert(READER_BUDGET_PER_UID <= READER_BUDGET_TOTAL, "one uid fits the total");
_Static_assert(THRESHOLD_MIN <= THRESHOLD_DEFAULT && THRESHOLD_DEFAULT <= THRESHOLD_MAX,
	       "the default threshold is a valid one");
/* Every key of an assignment file at its longest, with "key=" and "\n". */
_Static_assert(11 + RFC3339_NANO_LEN + 1 + 6 + AGENT_ENDPOINT_MAX + 1 + 8 + CONTROL_PATH_MAX + 1 +
			       4 + 7 + 1 + 14 + 20 + 1 + 8 + BOOT_ID_LEN + 1 <=
		       ASSIGNMENT_FILE_MAX,
	       "what the daemon renders, its readers accept");

#endif
