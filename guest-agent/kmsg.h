/* SPDX-License-Identifier: MIT */
/*
 * kmsg.h - the kernel log as the agent sees it: a pure parser for
 * /dev/kmsg records (fuzzable) and a non-blocking reader.
 *
 * Record format (Documentation/ABI/testing/dev-kmsg):
 *
 *     PRI,SEQ,TS,FLAGS[,...];MESSAGE\n[ KEY=value\n]...
 *
 * PRI is facility << 3 | level.  Only facility 0 (the kernel) counts:
 * userspace writes to /dev/kmsg are forced to LOG_USER by the kernel, so a
 * guest user cannot forge a failure.  Any level and any flags count ('c' is
 * KERN_CONT, which NVIDIA's driver uses).  A message counts only when,
 * trimmed, it starts with "NVRM:"; the rest of it is judged by the rules.
 *
 * Rules: literal text searched for in the message after the "NVRM:" prefix,
 * each a failure (the agent turns FAILED) or ignore (the record is dropped).
 * The first rule that matches decides: the rules file's rules in file order,
 * then the built-in rule "failure RmInitAdapter failed!" (so an ignore line
 * can override it).  The "(stage:status:line)" tuple and the "GPU BDF:" part
 * are never in the built-in rule (they differ per driver build and are
 * absent on old drivers).  Rules file format, one rule per line:
 *
 *     # comment (also blank lines)
 *     failure GSP firmware init failed
 *     ignore RmInitAdapter failed! (0x25:0x65:1453)
 *
 * ACTION, blanks, TEXT; TEXT runs to the end of the line (trailing blanks
 * dropped), is matched byte for byte, 1..AGENT_RULE_MAX bytes, no control
 * characters.  At most KMSG_RULES_MAX rules, lines of KMSG_RULES_LINE_MAX
 * bytes, files of KMSG_RULES_FILE_MAX bytes; anything else refuses the whole
 * file with its line number.
 *
 * Sources:
 *   - a character device (the real /dev/kmsg): one record per read(2) into a
 *     KMSG_READ_BUFFER-byte buffer (a shorter buffer loses records: the kernel
 *     advances before it returns EINVAL).  EPIPE (records overwritten) keeps
 *     reading on the same descriptor; the lost records are counted from the
 *     sequence gap.  The first open starts at the oldest record, so failures
 *     logged before the agent started are seen; a reopen after an error seeks
 *     to the end so old history is not reported twice.
 *   - a FIFO or a regular file (tests, replay): '\n'-separated lines, each a
 *     record; lines starting with ' ' are continuation lines.  Lines longer
 *     than KMSG_LINE_MAX are dropped whole.  At EOF a FIFO is reopened (a
 *     fresh reader is not woken until a new writer comes and goes, so there is
 *     no busy loop); a regular file is finished.
 */
#ifndef VFHEALTH_AGENT_KMSG_H
#define VFHEALTH_AGENT_KMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/client.h"

/* The kernel's largest record is CONSOLE_EXT_LOG_MAX (8192); twice that
 * leaves room for the dictionary lines. */
#define KMSG_READ_BUFFER 16384
#define KMSG_LINE_MAX (KMSG_READ_BUFFER - 1)
/* Records handled per kmsg_reader_drain call, so a flood of kernel messages
 * cannot starve clients: poll reports the descriptor readable again. */
#define KMSG_DRAIN_BATCH 256
/* The prefix before ';' is short; anything longer is not a record. */
#define KMSG_PREFIX_MAX 256

struct kmsg_record {
	unsigned priority; /* facility << 3 | level */
	uint64_t seq;
	uint64_t ts_usec;
	char flags;          /* first character of the flags field: '-', 'c', ... */
	const char *message; /* into the parsed buffer, up to the first '\n' */
	size_t message_len;
};

/* ---- rules ------------------------------------------------------------- */

#define KMSG_RULES_MAX 64         /* from a file; the built-in rule comes on top */
#define KMSG_RULES_LINE_MAX 256   /* bytes of one line, without its '\n' */
#define KMSG_RULES_FILE_MAX 65536 /* bytes of a rules file */
#define KMSG_BUILTIN_RULE "RmInitAdapter failed!"

enum kmsg_action {
	KMSG_RULE_FAILURE,
	KMSG_RULE_IGNORE
};

struct kmsg_rule {
	enum kmsg_action action;
	size_t len;
	char text[AGENT_RULE_MAX + 1];
};

struct kmsg_rules {
	unsigned n; /* the built-in rule is always the last */
	struct kmsg_rule rule[KMSG_RULES_MAX + 1];
};

/* Only the built-in rule. */
void kmsg_rules_init(struct kmsg_rules *r);
/* Replace the file rules with those in text[0..len).  0; or on bad input
 * -EINVAL (not "failure|ignore TEXT", an empty or control character in
 * TEXT), -ENAMETOOLONG (TEXT over AGENT_RULE_MAX, a line over
 * KMSG_RULES_LINE_MAX), -E2BIG (more than KMSG_RULES_MAX rules), -EFBIG (over
 * KMSG_RULES_FILE_MAX), with the 1-based line in *ret_line (0: the whole
 * file); r is then unchanged. */
int kmsg_rules_parse(struct kmsg_rules *r, const char *text, size_t len, unsigned *ret_line);
/* kmsg_rules_parse on a file's contents; -errno from open/read as well. */
int kmsg_rules_load(struct kmsg_rules *r, const char *path, unsigned *ret_line);
/* What a parse error means, for the message naming the line. */
const char *kmsg_rules_strerror(int k);
/* The first rule matching the trimmed message, NULL when the message does
 * not start with "NVRM:" or no rule matches. */
const struct kmsg_rule *kmsg_rules_match(const struct kmsg_rules *r, const char *msg, size_t len);

/* ---- records ----------------------------------------------------------- */

enum kmsg_verdict {
	KMSG_MATCH,        /* a kernel NVRM record matching a failure rule */
	KMSG_IGNORED,      /* a kernel NVRM record matching an ignore rule */
	KMSG_NO_MATCH,     /* a kernel record about something else */
	KMSG_NOT_KERNEL,   /* facility != 0: userspace wrote it; never counts */
	KMSG_CONTINUATION, /* " KEY=value" line */
	KMSG_MALFORMED,
};

/* Parse one record (buf need not be NUL-terminated).  0, -ENOMSG for a
 * continuation line, -EINVAL for anything malformed; *ret untouched then. */
int kmsg_parse_record(const char *buf, size_t len, struct kmsg_record *ret);

/* Does the message text (any length, not NUL-terminated) report a failed
 * adapter init by the built-in rule?  The facility is the caller's. */
bool kmsg_message_is_init_failure(const char *msg, size_t len);

/* Parse and judge a record in one step by rules; *ret is filled unless
 * MALFORMED or CONTINUATION, *ret_rule (may be NULL) with the rule on MATCH
 * and IGNORED. */
enum kmsg_verdict kmsg_classify_rules(const struct kmsg_rules *rules, const char *buf, size_t len,
				      struct kmsg_record *ret, const struct kmsg_rule **ret_rule);
/* The same with the built-in rule only. */
enum kmsg_verdict kmsg_classify(const char *buf, size_t len, struct kmsg_record *ret);

const char *kmsg_verdict_name(enum kmsg_verdict v);

/* The trimmed message bounds (leading/trailing blanks removed). */
void kmsg_trim(const char **msg, size_t *len);

/* ---- the reader -------------------------------------------------------- */

typedef void (*kmsg_record_fn)(void *userdata, const char *record, size_t len);

struct kmsg_reader {
	char *path;
	int fd;     /* -1 while closed */
	bool lines; /* FIFO/regular file: line-oriented */
	bool is_fifo;
	bool opened_once; /* later opens seek to the end */
	bool finished;    /* a regular file was read to its end */
	bool have_seq;
	uint64_t next_seq;
	uint64_t lost;          /* records overwritten before we read them */
	uint64_t overruns;      /* EPIPE returns */
	uint64_t dropped_lines; /* overlong lines */
	bool discarding;        /* inside an overlong line */
	size_t buf_len;         /* line mode: bytes of a partial line */
	char buf[KMSG_READ_BUFFER];
};

/* Returns 0 or -errno (ENOMEM). */
int kmsg_reader_init(struct kmsg_reader *r, const char *path);
void kmsg_reader_free(struct kmsg_reader *r);

/* Open the source (non-blocking).  The first successful open reads from the
 * oldest record; later ones seek to the end first.  0 or -errno. */
int kmsg_reader_open(struct kmsg_reader *r);

/* Read what is available now (at most KMSG_DRAIN_BATCH records), calling fn
 * for every record or line.  Returns 0 when the caller should poll r->fd
 * for POLLIN again (r->fd may have been replaced: a FIFO reopened), 1 when
 * the source is finished (a regular file read to its end; r->fd is -1), or
 * -errno after a read error: r->fd is closed and the caller reopens later. */
int kmsg_reader_drain(struct kmsg_reader *r, kmsg_record_fn fn, void *userdata);

#endif
