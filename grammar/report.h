/* SPDX-License-Identifier: MIT */
/*
 * report.h - THE grammar of <vf>/report: the command written to it and the
 * outcome line read back from the same open file.  The sentinel formats
 * commands and parses outcomes; the filesystem parses commands and formats
 * outcomes; both call these functions.  Tests (format -> parse -> format is
 * the identity, and every rejection): tests/grammar/test-grammar.c.
 *
 * The command, one line (no '\n'), tokens separated by single spaces:
 *
 *     failed ID CLAIMED_AT|- [MESSAGE]
 *     ok ID CLAIMED_AT|-
 *
 *   ID is an instance id (common/parse.h), CLAIMED_AT an RFC 3339 UTC time
 *   ("-": unknown), written in canonical form.  After CLAIMED_AT and one
 *   space, the rest of the line, possibly empty, is the message; an ok
 *   command has nothing after that space.  Anything else is -EINVAL.
 *
 * The outcome line (without its newline here; the file shows one):
 *
 *     recorded|quarantined|unchanged failures=N threshold=M[ breaker=engaged]
 *     cleared=N rescinded=0|1
 *
 *   The first answers a failed command (the VF's tally after it, the
 *   threshold, and whether the max_quarantined breaker held a quarantine
 *   back), the second an ok command (failures cleared, quarantine lifted).
 *
 * Conventions: 0 or -errno (formatters: the length); outputs written only on
 * success.
 */
#ifndef VFHEALTH_GRAMMAR_REPORT_H
#define VFHEALTH_GRAMMAR_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "grammar/limits.h"

/* ---- the command ------------------------------------------------------------ */

enum report_command_kind {
	REPORT_COMMAND_FAILED,
	REPORT_COMMAND_OK,
};

struct report_command {
	enum report_command_kind kind;
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ]; /* canonical; "" for "-" */
	/* failed: the rest of the line as written (it points into the parsed
	 * command; message_sanitize() it before keeping it), "" when none;
	 * ok: "". */
	const char *message;
};

/* "failed ID CLAIMED_AT MESSAGE": the message sanitized (message.h) with the
 * spaces around it trimmed, and left out when empty.  claimed_at NULL or ""
 * is "-".  Returns the length; -EINVAL for a bad id or claimed_at, -ENOBUFS
 * when size is too small (REPORT_COMMAND_BUFSZ always fits). */
int report_format_failed(char *buf, size_t size, const char *instance_id, const char *claimed_at,
			 const char *message);
/* "ok ID CLAIMED_AT". */
int report_format_ok(char *buf, size_t size, const char *instance_id, const char *claimed_at);
/* Either of the above, from a parsed command. */
int report_command_format(char *buf, size_t size, const struct report_command *cmd);

/* Parse one command (NUL-terminated, its trailing newline already stripped).
 * ret->message points into command.  -EINVAL. */
int report_command_parse(const char *command, struct report_command *ret);

/* Which rule command breaks, as the writer it refuses is told (a static
 * string); NULL when report_command_parse() accepts it. */
const char *report_command_refusal(const char *command);

/* ---- the outcome line --------------------------------------------------------- */

enum report_kind {
	REPORT_RECORDED,
	REPORT_QUARANTINED,
	REPORT_UNCHANGED,
	REPORT_CLEARED, /* the answer to an ok report */
};

/* "recorded", "quarantined", "unchanged", "cleared"; NULL for others. */
const char *report_kind_name(enum report_kind kind);

struct report_outcome {
	enum report_kind kind;
	unsigned failures; /* failed reports: the tally after the report */
	unsigned threshold;
	bool breaker_engaged; /* the breaker held a quarantine back */
	unsigned cleared;     /* ok reports */
	bool rescinded;
};

/* The line without its newline.  Returns the length; -EINVAL for an unknown
 * kind, -ENOBUFS when size is too small (OUTCOME_LINE_BUFSZ always fits). */
int report_outcome_format(char *buf, size_t size, const struct report_outcome *o);

/* Parse what <vf>/report reads back (one trailing newline allowed), at most
 * OUTCOME_LINE_MAX bytes.  -EINVAL otherwise. */
int report_outcome_parse(const char *text, size_t len, struct report_outcome *ret);

#endif
