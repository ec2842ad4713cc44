/* SPDX-License-Identifier: MIT */
/*
 * log.h - one record per event, to the journal or to stderr.
 *
 * Where records go (log_set_target, --log-target):
 *   journal  the native protocol (sd_journal_sendv(3)): MESSAGE=, PRIORITY=,
 *            SYSLOG_IDENTIFIER= and, for an event, its fields (below);
 *   stderr   one line per record: "<N>ident: message" with N the syslog
 *            priority (sd-daemon(3)'s prefix, which journald's stream and
 *            systemd-cat file at that level), but "ident: message" without
 *            the prefix when stderr is a terminal;
 *   auto     (the default) journal when stderr is the journal
 *            ($JOURNAL_STREAM names stderr's device and inode, as systemd
 *            sets it for StandardError=journal), else stderr.
 * The journal chosen where journald is not (no /run/systemd/journal/socket
 * when chosen) is stderr.  A record the journal refuses, or any record of a
 * program that did not hand log.c its sender (log_set_journal_sender: the
 * guest agent, a static binary, links no libsystemd), is written to stderr
 * instead: nothing is lost silently.
 *
 * An event is a record with a kind from the one vocabulary below: EVENT=
 * names it, MESSAGE_ID= (a 128-bit id, as journalctl's catalog uses) stays
 * the same across releases, and the fields say which VF, instance, claim
 * and writer it is about, so that `journalctl VF=0000:41:00.4` tells one
 * VF's story.  On stderr an event is its message alone: the message names
 * the VF and instance in words, so that grep finds it either way.
 *
 * Thread-safe: a stderr record is one write(2); the journal's is one
 * datagram.  errno is preserved.  Tests: tests/ops/journal.sh.
 */
#ifndef VFHEALTH_LOG_H
#define VFHEALTH_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

/* The event vocabulary: the enum, EVENT= value and MESSAGE_ID= of each
 * kind.  An id is never reused for another kind, nor changed. */
#define LOG_EVENTS(X)                                                                 \
	X(QUARANTINED, "quarantined", "f94a40a0a7d54e56abf8aabc9454af4d")             \
	X(RESCINDED, "rescinded", "9a0e152596794c78a9d5aaf71577c520")                 \
	X(HELD, "held", "27f00c42537b45ec9fed0b35f1625694")                           \
	X(CLEARED, "cleared", "ce49da4b16a04cab84dea59a212afef3")                     \
	X(HELD_BACK, "held-back", "d431c5fa1a41482381b9d0557d139ace")                 \
	X(FAILURE_RECORDED, "failure-recorded", "454761b9e4ba4e04b427153eae2e5d67")   \
	X(FAILURES_CLEARED, "failures-cleared", "a80358c6a3ff441aa13b551060cdf786")   \
	X(CLAIMED, "claimed", "9804294fdacc489c85891521b025216d")                     \
	X(CLAIM_REFUSED, "claim-refused", "2068631159d74f4484e1afb742a9336b")         \
	X(RELEASED, "released", "d79fdcd37f944641935728f63e6f78a8")                   \
	X(VMM_DEAD, "vmm-dead", "7b0c045123a9451684c59728a464652d")                   \
	X(AGENT_UNREACHABLE, "agent-unreachable", "1d44bbd3c541455e9092b3d03afb404d") \
	X(AGENT_ANSWERING, "agent-answering", "42d7ec7c460b40b2b12d70884e13c479")     \
	X(STORE_UNAVAILABLE, "store-unavailable", "8f8b09c4f76c4bb7bef8be02cb7c2da9") \
	X(STORE_AVAILABLE, "store-available", "0d3cf01349744e44b8c9a391bab6f001")     \
	X(THRESHOLD_CHANGED, "threshold-changed", "b0885229a41a4cc8a66d27a05f38990a") \
	X(RECOVERY_STARTED, "recovery-started", "59293c7ac79643859fc822233433212d")   \
	X(RECOVERED, "recovered", "dd6f79566c6544729cbcc7b7fb03e840")                 \
	X(RECOVERY_FAILED, "recovery-failed", "4c177f9699b24e87b919e840f095dbc8")

enum log_event {
	LOG_EVENT_NONE, /* a plain message: no EVENT=, no MESSAGE_ID= */
#define LOG_EVENT_ENUM(id, name, message_id) LOG_EVENT_##id,
	LOG_EVENTS(LOG_EVENT_ENUM)
#undef LOG_EVENT_ENUM
	LOG_EVENT_COUNT,
};

/* EVENT= value and MESSAGE_ID= of e; NULL for LOG_EVENT_NONE or out of range. */
const char *log_event_name(enum log_event e);
const char *log_event_message_id(enum log_event e);

/* What an event is about; every member optional (NULL, or has_* false). */
struct log_fields {
	const char *vf;         /* VF= */
	const char *parent;     /* PARENT= (the VF's parent GPU) */
	const char *instance;   /* INSTANCE= */
	const char *claimed_at; /* CLAIMED_AT= (the assignment's) */
	const char *reason;     /* REASON= (the NVRM text, an errno's text, ...) */
	const char *result;     /* RESULT= (an agent check's result) */
	bool has_writer;        /* WRITER_UID=, WRITER_PID=: who wrote (the kernel's word) */
	uint32_t writer_uid;
	int32_t writer_pid;
	bool has_tally; /* FAILURES=, THRESHOLD= */
	unsigned tally;
	int threshold;
};

struct iovec;
/* sd_journal_sendv(3)'s signature: 0 or -errno. */
typedef int (*log_journal_sender_fn)(const struct iovec *iov, int n);
/* Call before any thread logs (vfhealthd and vfhealth-sentinel hand it
 * sd_journal_sendv). */
void log_set_journal_sender(log_journal_sender_fn send);

enum log_target {
	LOG_TARGET_AUTO,
	LOG_TARGET_JOURNAL,
	LOG_TARGET_STDERR,
};

/* "auto", "journal", "stderr" -> *ret: 0, or -EINVAL. */
int log_target_parse(const char *s, enum log_target *ret);
const char *log_target_name(enum log_target t);
/* Decide where records go (auto looks at $JOURNAL_STREAM and stderr now).
 * Call before any thread logs; LOG_TARGET_AUTO is decided on first use. */
void log_set_target(enum log_target t);
/* Whether records go to the journal (after the decision). */
bool log_to_journal(void);

/* Messages above this priority (numerically greater) are dropped.
 * Default LOG_INFO; set from -v / --debug. */
void log_set_max_priority(int prio);
int log_get_max_priority(void);

/* SYSLOG_IDENTIFIER= and the tag of a stderr line, e.g. "vfhealthd".  NULL
 * for none.  The string must outlive all logging. */
void log_set_ident(const char *ident);

/* An event of kind e about f (NULL: no fields). */
void log_event(int prio, enum log_event e, const struct log_fields *f, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A plain message: an event of no kind, with no fields. */
#define log_msg(prio, ...) log_event(prio, LOG_EVENT_NONE, NULL, __VA_ARGS__)

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
