/* SPDX-License-Identifier: MIT */
/*
 * test-log.c - common/log.c: the event vocabulary (names and MESSAGE_IDs
 * unique, ids 128-bit hex), where records go (the journal when
 * $JOURNAL_STREAM names stderr, stderr otherwise and when the journal
 * refuses), the fields a journal record carries, and the stderr line (level
 * prefix, one line, no control characters).  The journal is a capturing sender here; the real
 * protocol on a socket is tests/ops/journal.sh's.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/common/check-main.h"

#define CAPTURED_MAX 32

static char captured[CAPTURED_MAX][1100];
static int n_captured, sender_result;

static int capture(const struct iovec *iov, int n)
{
	n_captured = 0;
	for (int i = 0; i < n && i < CAPTURED_MAX; i++) {
		ck_assert_uint_lt(iov[i].iov_len, sizeof(captured[0]));
		memcpy(captured[i], iov[i].iov_base, iov[i].iov_len);
		captured[i][iov[i].iov_len] = '\0';
		n_captured++;
	}
	return sender_result;
}

/* The captured field KEY's value, NULL when absent. */
static const char *field(const char *key)
{
	size_t len = strlen(key);

	for (int i = 0; i < n_captured; i++)
		if (strncmp(captured[i], key, len) == 0 && captured[i][len] == '=')
			return captured[i] + len + 1;
	return NULL;
}

static char stderr_path[] = "/tmp/test-log-XXXXXX";
static int saved_stderr = -1;

/* stderr to a file of ours; JOURNAL_STREAM naming it when journal. */
static void redirect_stderr(bool journal)
{
	struct stat st;
	char stream[64];
	int fd = mkstemp(stderr_path);

	ck_assert_int_ge(fd, 0);
	saved_stderr = dup(STDERR_FILENO);
	ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
	ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
	snprintf(stream, sizeof(stream), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	if (journal)
		setenv("JOURNAL_STREAM", stream, 1);
	else
		setenv("JOURNAL_STREAM", "1:2", 1); /* another stream: not ours */
	log_set_ident("test-log");
	log_set_journal_sender(capture);
	log_set_target(LOG_TARGET_AUTO);
	n_captured = 0;
	sender_result = 0;
}

/* What stderr got; restores it. */
static char *restore_stderr(void)
{
	static char text[4096];
	FILE *f;
	size_t n;

	ck_assert_int_eq(dup2(saved_stderr, STDERR_FILENO), STDERR_FILENO);
	close(saved_stderr);
	f = fopen(stderr_path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(stderr_path);
	strcpy(stderr_path, "/tmp/test-log-XXXXXX");
	return text;
}

START_TEST(test_vocabulary)
{
	ck_assert_ptr_null(log_event_name(LOG_EVENT_NONE));
	ck_assert_ptr_null(log_event_message_id(LOG_EVENT_NONE));
	ck_assert_ptr_null(log_event_name(LOG_EVENT_COUNT));
	for (int e = LOG_EVENT_NONE + 1; e < LOG_EVENT_COUNT; e++) {
		const char *id = log_event_message_id((enum log_event)e);

		ck_assert_ptr_nonnull(log_event_name((enum log_event)e));
		ck_assert_uint_eq(strlen(id), 32);
		ck_assert_uint_eq(strspn(id, "0123456789abcdef"), 32);
		for (int o = e + 1; o < LOG_EVENT_COUNT; o++) {
			ck_assert_str_ne(log_event_name((enum log_event)e),
					 log_event_name((enum log_event)o));
			ck_assert_str_ne(id, log_event_message_id((enum log_event)o));
		}
	}
	ck_assert_str_eq(log_event_name(LOG_EVENT_QUARANTINED), "quarantined");
	ck_assert_str_eq(log_event_name(LOG_EVENT_AGENT_UNREACHABLE), "agent-unreachable");
}
END_TEST

START_TEST(test_target_parse)
{
	enum log_target t = LOG_TARGET_STDERR;

	ck_assert_int_eq(log_target_parse("auto", &t), 0);
	ck_assert_int_eq(t, LOG_TARGET_AUTO);
	ck_assert_int_eq(log_target_parse("journal", &t), 0);
	ck_assert_int_eq(t, LOG_TARGET_JOURNAL);
	ck_assert_int_eq(log_target_parse("stderr", &t), 0);
	ck_assert_int_eq(t, LOG_TARGET_STDERR);
	ck_assert_int_eq(log_target_parse("syslog", &t), -EINVAL);
	ck_assert_int_eq(log_target_parse("", &t), -EINVAL);
	ck_assert_int_eq(log_target_parse(NULL, &t), -EINVAL);
	ck_assert_int_eq(t, LOG_TARGET_STDERR); /* unchanged by a refusal */
}
END_TEST

/* stderr is the journal: an event's fields, nothing on stderr. */
START_TEST(test_journal_fields)
{
	struct log_fields f = { .vf = "0000:41:00.4",
				.parent = "0000:41:00.0",
				.instance = "vm-1",
				.claimed_at = "2026-12-03T08:00:00Z",
				.reason = "NVRM: line\nwith a newline",
				.has_writer = true,
				.writer_uid = 65534,
				.writer_pid = 42,
				.has_tally = true,
				.tally = 2,
				.threshold = 2 };

	redirect_stderr(true);
	ck_assert(log_to_journal());
	log_event(LOG_ERR, LOG_EVENT_QUARANTINED, &f, "%s: quarantined", f.vf);
	ck_assert_str_eq(field("MESSAGE"), "0000:41:00.4: quarantined");
	ck_assert_str_eq(field("PRIORITY"), "3");
	ck_assert_str_eq(field("SYSLOG_IDENTIFIER"), "test-log");
	ck_assert_str_eq(field("EVENT"), "quarantined");
	ck_assert_str_eq(field("MESSAGE_ID"), log_event_message_id(LOG_EVENT_QUARANTINED));
	ck_assert_str_eq(field("VF"), "0000:41:00.4");
	ck_assert_str_eq(field("PARENT"), "0000:41:00.0");
	ck_assert_str_eq(field("INSTANCE"), "vm-1");
	ck_assert_str_eq(field("CLAIMED_AT"), "2026-12-03T08:00:00Z");
	ck_assert_str_eq(field("REASON"), "NVRM: line\nwith a newline"); /* the sender frames it */
	ck_assert_str_eq(field("WRITER_UID"), "65534");
	ck_assert_str_eq(field("WRITER_PID"), "42");
	ck_assert_str_eq(field("FAILURES"), "2");
	ck_assert_str_eq(field("THRESHOLD"), "2");
	ck_assert_ptr_null(field("RESULT"));

	/* A plain message: no EVENT=, no MESSAGE_ID=, its newline folded. */
	log_msg(LOG_INFO, "two\nlines");
	ck_assert_str_eq(field("MESSAGE"), "two lines");
	ck_assert_str_eq(field("PRIORITY"), "6");
	ck_assert_ptr_null(field("EVENT"));
	ck_assert_ptr_null(field("MESSAGE_ID"));
	ck_assert_ptr_null(field("VF"));
	ck_assert_str_eq(restore_stderr(), "");
}
END_TEST

/* Not the journal: one prefixed line per record, an event's message alone. */
START_TEST(test_stderr_line)
{
	struct log_fields f = { .vf = "0000:41:00.4" };

	redirect_stderr(false);
	ck_assert(!log_to_journal());
	log_event(LOG_WARNING, LOG_EVENT_AGENT_UNREACHABLE, &f, "vf %s: silent\nfor \x1b[1mlong",
		  f.vf);
	log_msg(LOG_DEBUG, "dropped at the default level");
	ck_assert_int_eq(n_captured, 0);
	/* one line, no control sequence for a terminal */
	ck_assert_str_eq(restore_stderr(), "<4>test-log: vf 0000:41:00.4: silent for  [1mlong\n");
}
END_TEST

/* A record the journal refuses goes to stderr. */
START_TEST(test_journal_refuses)
{
	redirect_stderr(true);
	sender_result = -EIO;
	log_msg(LOG_ERR, "kept");
	ck_assert_int_gt(n_captured, 0);
	ck_assert_str_eq(restore_stderr(), "<3>test-log: kept\n");
}
END_TEST

static const struct check_case log_case = { .suite = "log", .tcase = "log", .timeout = 30 };
CHECK_CASE_MAIN(log_case, test_vocabulary, test_target_parse, test_journal_fields, test_stderr_line,
		test_journal_refuses)
