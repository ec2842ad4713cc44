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
 * KERN_CONT, which NVIDIA's driver uses).  A failure is a message that,
 * trimmed, starts with "NVRM:" and contains "RmInitAdapter failed!"; the
 * "(stage:status:line)" tuple and the "GPU BDF:" part are never matched
 * (they differ per driver build and are absent on old drivers).
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

enum kmsg_verdict {
	KMSG_MATCH,        /* a kernel NVRM RmInitAdapter failure */
	KMSG_NO_MATCH,     /* a kernel record about something else */
	KMSG_NOT_KERNEL,   /* facility != 0: userspace wrote it; never counts */
	KMSG_CONTINUATION, /* " KEY=value" line */
	KMSG_MALFORMED,
};

/* Parse one record (buf need not be NUL-terminated).  0, -ENOMSG for a
 * continuation line, -EINVAL for anything malformed; *ret untouched then. */
int kmsg_parse_record(const char *buf, size_t len, struct kmsg_record *ret);

/* Does the message text (any length, not NUL-terminated) report a failed
 * adapter init?  Only the text rule; the facility is the caller's. */
bool kmsg_message_is_init_failure(const char *msg, size_t len);

/* Parse and judge a record in one step; *ret is filled unless MALFORMED or
 * CONTINUATION. */
enum kmsg_verdict kmsg_classify(const char *buf, size_t len, struct kmsg_record *ret);

const char *kmsg_verdict_name(enum kmsg_verdict v);

/* The trimmed message bounds (leading/trailing blanks removed). */
void kmsg_trim(const char **msg, size_t *len);

/* ---- the reader -------------------------------------------------------- */

typedef void (*kmsg_record_fn)(void *userdata, const char *record, size_t len);

struct kmsg_reader {
	char *path;
	int fd;          /* -1 while closed */
	bool lines;      /* FIFO/regular file: line-oriented */
	bool is_fifo;
	bool opened_once; /* later opens seek to the end */
	bool finished;    /* a regular file was read to its end */
	bool have_seq;
	uint64_t next_seq;
	uint64_t lost;      /* records overwritten before we read them */
	uint64_t overruns;  /* EPIPE returns */
	uint64_t dropped_lines; /* overlong lines */
	bool discarding;    /* inside an overlong line */
	size_t buf_len;     /* line mode: bytes of a partial line */
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
