/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for grammar/: the VF address rule, the assignment file (render,
 * the reader's parse, the writers' parse), the report command and its
 * outcome line (format and parse), the failure message rule, and that
 * docs/limits.md states every limit of grammar/limits.h with its value.
 * Round trips: format -> parse -> format is the identity for each grammar.
 * Pure functions, no threads, no locks.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/assignment.h"
#include "grammar/limits.h"
#include "grammar/message.h"
#include "grammar/report.h"
#include "grammar/vf.h"
#include "common/cleanup.h"
#include "tests/common/bad-assignments.h"
#include "tests/common/check-main.h"

#define T1 "2026-11-29T07:44:51.000000001Z"
#define BOOT "0123abcd-4567-89ef-0123-456789abcdef"

/* ---- assignments ---------------------------------------------------------------- */

START_TEST(test_vf_address)
{
	static const char *const good[] = { "0000:41:00.4", "ffff:ff:1f.7" };
	static const char *const bad[] = { "0000:41:00.8", "0000:41:00.40", "0000:4G:00.4",
					   "0000:4A:00.4", "status",        "" };

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		ck_assert_msg(vf_address_valid(good[i]), "refused %s", good[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(!vf_address_valid(bad[i]), "accepted %s", bad[i]);
	ck_assert(!vf_address_valid(NULL));
}
END_TEST

START_TEST(test_assignment_values)
{
	static const struct {
		const char *text, *claimed_at, *agent, *control;
		int64_t pid;
		uint64_t pid_starttime;
	} cases[] = {
		{ "claimed_at=2026-11-29T07:44:51.123456789Z\n"
		  "agent=hvsock:/run/vm/a.vsock:2222\n"
		  "control=/run/vm/a.ctl\n"
		  "pid=4242\n",
		  "2026-11-29T07:44:51.123456789Z", "hvsock:/run/vm/a.vsock:2222", "/run/vm/a.ctl",
		  4242, 0 },
		/* Empty values and unknown keys; the stamp normalized, so two
		 * spellings of one instant compare equal. */
		{ "claimed_at=2026-11-29t07:44:51.5z\nagent=\ncontrol=\npid=\n"
		  "future_key=whatever\n\npid_starttime=987654",
		  "2026-11-29T07:44:51.500000000Z", "", "", 0, 987654 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct assignment a;

		ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", cases[i].text,
						  strlen(cases[i].text), &a),
				 0);
		ck_assert_str_eq(a.vf, "0000:41:00.4");
		ck_assert_str_eq(a.instance_id, "vm-1");
		ck_assert_str_eq(a.claimed_at, cases[i].claimed_at);
		ck_assert_str_eq(a.agent, cases[i].agent);
		ck_assert_str_eq(a.control, cases[i].control);
		ck_assert_int_eq(a.pid, cases[i].pid);
		ck_assert_uint_eq(a.pid_starttime, cases[i].pid_starttime);
	}
}
END_TEST

START_TEST(test_assignment_rejects)
{
	static const char *const bad[] = {
		"claimed_at=yesterday\n",
		"claimed_at=2026-11-29T07:44:51Z\nclaimed_at=2026-11-29T07:44:52Z\n",
		"agent=unix:/a\nagent=unix:/b\n",
		"just a line\n",
		"=value\n",
		"pid=0\n",
		"pid=-3\n",
		"pid=12ab\n",
		"pid=99999999999\n",
		"control=relative/path\n",
		"pid_starttime=x\n",
		"boot_id=not-a-boot-id\n",
		"boot_id=0F2C4E6A\n",
		"boot_id=0f2c 4e6a\n",
	};
	struct assignment a;

	memset(&a, 0x5a, sizeof(a));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(assignment_parse("0000:41:00.4", "vm-1", bad[i], strlen(bad[i]),
					       &a) == -EINVAL,
			      "accepted %s", bad[i]);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", "pid=1\0x", 7, &a), -EINVAL);
	ck_assert_int_eq(assignment_parse("bogus", "vm-1", "", 0, &a), -EINVAL);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", ".hidden", "", 0, &a), -EINVAL);
	/* Nothing written on failure. */
	ck_assert_uint_eq((unsigned char)a.vf[0], 0x5a);
	ck_assert_uint_eq((unsigned char)a.claimed_at[0], 0x5a);
}
END_TEST

START_TEST(test_assignment_limits)
{
	_cleanup_free_ char *big = malloc(ASSIGNMENT_FILE_MAX + 1);
	char line[AGENT_ENDPOINT_MAX + 16];
	struct assignment a;
	int n;

	memset(big, '\n', ASSIGNMENT_FILE_MAX + 1);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", big, ASSIGNMENT_FILE_MAX, &a), 0);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", big, ASSIGNMENT_FILE_MAX + 1, &a),
			 -E2BIG);

	n = snprintf(line, sizeof(line), "agent=unix:/%0*d", AGENT_ENDPOINT_MAX - 6, 0);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", line, (size_t)n, &a), 0);
	ck_assert_uint_eq(strlen(a.agent), AGENT_ENDPOINT_MAX);
	n = snprintf(line, sizeof(line), "agent=unix:/%0*d", AGENT_ENDPOINT_MAX - 5, 0);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", line, (size_t)n, &a), -E2BIG);
}
END_TEST

/* ---- report commands ---------------------------------------------------------------- */

START_TEST(test_report_failed_format)
{
	char buf[REPORT_COMMAND_BUFSZ];
	int n;

	n = report_format_failed(buf, sizeof(buf), "vm-1", T1,
				 "NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)");
	ck_assert_int_eq(n, (int)strlen(buf));
	ck_assert_str_eq(buf, "failed vm-1 " T1
			      " NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)");

	/* A newline would end the command; tabs and other controls go too. */
	report_format_failed(buf, sizeof(buf), "vm-1", T1, "NVRM: a\nb\tc\r\x1b[0m\x7f end \n");
	ck_assert_str_eq(buf, "failed vm-1 " T1 " NVRM: a b c  [0m  end");

	/* No claimed_at: "-"; no message: nothing after it. */
	report_format_failed(buf, sizeof(buf), "vm-1", "", "");
	ck_assert_str_eq(buf, "failed vm-1 -");
	report_format_failed(buf, sizeof(buf), "vm-1", NULL, NULL);
	ck_assert_str_eq(buf, "failed vm-1 -");
	report_format_failed(buf, sizeof(buf), "vm-1", T1, " \n ");
	ck_assert_str_eq(buf, "failed vm-1 " T1);
}
END_TEST

START_TEST(test_report_failed_caps_message)
{
	char buf[REPORT_COMMAND_BUFSZ], message[3000];
	const char *tail;

	memset(message, 'x', sizeof(message) - 1);
	message[sizeof(message) - 1] = '\0';
	report_format_failed(buf, sizeof(buf), "vm-1", T1, message);
	tail = buf + strlen("failed vm-1 " T1 " ");
	ck_assert_uint_eq(strlen(tail), FAILURE_MESSAGE_MAX);

	/* "é" (2 bytes) straddling the cut is dropped whole. */
	memset(message, 'x', sizeof(message) - 1);
	message[FAILURE_MESSAGE_MAX - 1] = '\xc3';
	message[FAILURE_MESSAGE_MAX] = '\xa9';
	report_format_failed(buf, sizeof(buf), "vm-1", T1, message);
	tail = buf + strlen("failed vm-1 " T1 " ");
	ck_assert_uint_eq(strlen(tail), FAILURE_MESSAGE_MAX - 1);
	ck_assert_int_eq(tail[strlen(tail) - 1], 'x');
}
END_TEST

START_TEST(test_report_format_rejects)
{
	char buf[REPORT_COMMAND_BUFSZ], small[16];

	strcpy(buf, "untouched");
	ck_assert_int_eq(report_format_failed(buf, sizeof(buf), "bad id", T1, "m"), -EINVAL);
	ck_assert_int_eq(report_format_failed(buf, sizeof(buf), "vm-1", "yesterday", "m"), -EINVAL);
	ck_assert_int_eq(report_format_ok(buf, sizeof(buf), "", T1), -EINVAL);
	ck_assert_str_eq(buf, "untouched");
	ck_assert_int_eq(report_format_ok(small, sizeof(small), "vm-1", T1), -ENOBUFS);
}
END_TEST

START_TEST(test_report_ok_format)
{
	char buf[REPORT_COMMAND_BUFSZ];

	ck_assert_int_eq(report_format_ok(buf, sizeof(buf), "vm-1", T1),
			 (int)strlen("ok vm-1 " T1));
	ck_assert_str_eq(buf, "ok vm-1 " T1);
	report_format_ok(buf, sizeof(buf), "vm-1", "");
	ck_assert_str_eq(buf, "ok vm-1 -");
}
END_TEST

static struct report_outcome outcome_of(const char *text)
{
	struct report_outcome o;

	ck_assert_msg(report_outcome_parse(text, strlen(text), &o) == 0, "rejected %s", text);
	return o;
}

START_TEST(test_report_outcomes)
{
	struct report_outcome o;

	o = outcome_of("recorded failures=1 threshold=2\n");
	ck_assert_int_eq(o.kind, REPORT_RECORDED);
	ck_assert_uint_eq(o.failures, 1);
	ck_assert_uint_eq(o.threshold, 2);
	ck_assert(!o.breaker_engaged);

	o = outcome_of("quarantined failures=3 threshold=3");
	ck_assert_int_eq(o.kind, REPORT_QUARANTINED);
	ck_assert_uint_eq(o.failures, 3);

	o = outcome_of("unchanged failures=2 threshold=2\n");
	ck_assert_int_eq(o.kind, REPORT_UNCHANGED);

	o = outcome_of("recorded failures=5 threshold=2 breaker=engaged\n");
	ck_assert_int_eq(o.kind, REPORT_RECORDED);
	ck_assert(o.breaker_engaged);

	o = outcome_of("cleared=2 rescinded=1\n");
	ck_assert_int_eq(o.kind, REPORT_CLEARED);
	ck_assert_uint_eq(o.cleared, 2);
	ck_assert(o.rescinded);
	o = outcome_of("cleared=0 rescinded=0\n");
	ck_assert_uint_eq(o.cleared, 0);
	ck_assert(!o.rescinded);
}
END_TEST

START_TEST(test_report_outcome_rejects)
{
	static const char *const bad[] = {
		"",
		"\n",
		"recorded\n",
		"recorded failures=1\n",
		"recorded failures=x threshold=2\n",
		"recorded threshold=2 failures=1\n",
		"recorded failures=1 threshold=2 extra\n",
		"recorded failures=1 threshold=2\n\n",
		"cleared=1 rescinded=2\n",
		"cleared=1\n",
		"bogus failures=1 threshold=2\n",
		"recorded failures=99999999999 threshold=2\n",
	};
	struct report_outcome o;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(report_outcome_parse(bad[i], strlen(bad[i]), &o) == -EINVAL,
			      "accepted \"%s\"", bad[i]);
}
END_TEST

START_TEST(test_report_command_parse)
{
	struct report_command c;

	ck_assert_int_eq(report_command_parse("failed vm-1 " T1 " NVRM:  two  spaces ", &c), 0);
	ck_assert_int_eq(c.kind, REPORT_COMMAND_FAILED);
	ck_assert_str_eq(c.instance_id, "vm-1");
	ck_assert_str_eq(c.claimed_at, T1);
	ck_assert_str_eq(c.message, "NVRM:  two  spaces "); /* as written: the store sanitizes */

	/* Non-canonical spellings are stored canonical; "-" is unknown. */
	ck_assert_int_eq(report_command_parse("failed vm-2 2026-11-29t07:44:51.5z", &c), 0);
	ck_assert_str_eq(c.claimed_at, "2026-11-29T07:44:51.500000000Z");
	ck_assert_str_eq(c.message, "");
	ck_assert_int_eq(report_command_parse("failed vm-2 - ", &c), 0);
	ck_assert_str_eq(c.claimed_at, "");
	ck_assert_str_eq(c.message, "");
	ck_assert_int_eq(report_command_parse("failed vm-2 -  lead", &c), 0);
	ck_assert_str_eq(c.message, " lead");

	ck_assert_int_eq(report_command_parse("ok vm-3 " T1, &c), 0);
	ck_assert_int_eq(c.kind, REPORT_COMMAND_OK);
	ck_assert_str_eq(c.message, "");
	ck_assert_int_eq(report_command_parse("ok vm-3 -", &c), 0);
	ck_assert_str_eq(c.claimed_at, "");
}
END_TEST

START_TEST(test_report_command_rejects)
{
	char long_id[INSTANCE_ID_MAX + 32];
	static const char *const bad[] = {
		"",
		"failed",
		"failed ",
		"failed vm-5",
		"failed vm-5 ",
		"failed .vm " T1,
		"failed vm/5 " T1,
		"failed vm-5 yesterday",
		"failed vm-5 2026-13-01T00:00:00Z",
		"ok vm-4 " T1 " extra",
		"ok vm-4",
		"bogus vm-4 " T1,
		"OK vm-1 -",
		"failed  vm-1 -",
		" failed vm-1 -",
		"failed vm-1 - a\nb",
		"failed vm-1 -\n",
		"ok vm-1 " T1 "0",
		"failed vm-1 2024-02-29T00:00:00.1234567890Z",
	};
	struct report_command c, untouched;

	memset(&untouched, 0x5a, sizeof(untouched));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memcpy(&c, &untouched, sizeof(c));
		ck_assert_msg(report_command_parse(bad[i], &c) == -EINVAL, "accepted \"%s\"",
			      bad[i]);
		ck_assert_msg(memcmp(&c, &untouched, sizeof(c)) == 0, "changed by \"%s\"", bad[i]);
		ck_assert_msg(report_command_refusal(bad[i]), "no reason for \"%s\"", bad[i]);
	}
	/* The reason names the rule broken (the daemon logs it). */
	ck_assert_str_eq(report_command_refusal("failed vm:1 -"), INSTANCE_ID_RULE);
	ck_assert_ptr_nonnull(strstr(report_command_refusal("ok vm-1 yesterday"), "RFC 3339"));
	ck_assert_ptr_nonnull(strstr(report_command_refusal("ok vm-1 - x"), "nothing after"));
	ck_assert_ptr_nonnull(
		strstr(report_command_refusal("bogus vm-1 -"), "\"failed\" or \"ok\""));
	ck_assert_ptr_null(report_command_refusal("ok vm-1 -"));
	ck_assert_ptr_null(report_command_refusal("failed vm-1 - NVRM: x"));
	/* 129 characters: one over INSTANCE_ID_MAX. */
	snprintf(long_id, sizeof(long_id), "failed %0*d -", INSTANCE_ID_MAX + 1, 0);
	ck_assert_int_eq(report_command_parse(long_id, &c), -EINVAL);
	snprintf(long_id, sizeof(long_id), "failed %0*d -", INSTANCE_ID_MAX, 0);
	ck_assert_int_eq(report_command_parse(long_id, &c), 0);
	ck_assert_int_eq(report_command_parse(NULL, &c), -EINVAL);
}
END_TEST

START_TEST(test_report_command_round_trip)
{
	char message[FAILURE_MESSAGE_MAX + 100];
	static const struct {
		enum report_command_kind kind;
		const char *id, *claimed_at, *message;
	} cases[] = {
		{ REPORT_COMMAND_FAILED, "vm-1", T1,
		  "NVRM: RmInitAdapter failed! (0x22:0x65:884)" },
		{ REPORT_COMMAND_FAILED, "vm-1", "", "" },
		{ REPORT_COMMAND_FAILED, "vm_2.x", "2026-11-29T07:44:51Z", " \tpadded\r\n " },
		{ REPORT_COMMAND_FAILED, "a", T1, "caf\xc3\xa9 \x7f\x01 mid  spaces" },
		{ REPORT_COMMAND_FAILED, "a", T1, NULL }, /* the long message, below */
		{ REPORT_COMMAND_OK, "vm-1", T1, "" },
		{ REPORT_COMMAND_OK, "vm-9", "", "" },
		{ REPORT_COMMAND_OK, "vm-9", "2026-11-29t07:44:51.25z", "" },
	};

	memset(message, 'm', sizeof(message) - 1);
	message[sizeof(message) - 1] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct report_command in = { .kind = cases[i].kind,
					     .message = cases[i].message ? cases[i].message :
									   message };
		struct report_command parsed;
		char first[REPORT_COMMAND_BUFSZ], second[REPORT_COMMAND_BUFSZ];
		int n1, n2;

		snprintf(in.instance_id, sizeof(in.instance_id), "%s", cases[i].id);
		snprintf(in.claimed_at, sizeof(in.claimed_at), "%s", cases[i].claimed_at);
		n1 = report_command_format(first, sizeof(first), &in);
		ck_assert_msg(n1 > 0, "case %zu: %d", i, n1);
		ck_assert_uint_le((size_t)n1, REPORT_COMMAND_MAX);
		ck_assert_msg(report_command_parse(first, &parsed) == 0, "rejected \"%s\"", first);
		ck_assert_int_eq(parsed.kind, in.kind);
		ck_assert_str_eq(parsed.instance_id, in.instance_id);
		n2 = report_command_format(second, sizeof(second), &parsed);
		ck_assert_int_eq(n1, n2);
		ck_assert_str_eq(first, second);
	}
}
END_TEST

/* The longest command fits the limit and one write. */
START_TEST(test_report_command_longest)
{
	char id[INSTANCE_ID_MAX + 1], message[FAILURE_MESSAGE_MAX + 1], buf[REPORT_COMMAND_BUFSZ];

	memset(id, 'i', INSTANCE_ID_MAX);
	id[INSTANCE_ID_MAX] = '\0';
	memset(message, 'm', FAILURE_MESSAGE_MAX);
	message[FAILURE_MESSAGE_MAX] = '\0';
	ck_assert_int_eq(report_format_failed(buf, sizeof(buf), id, T1, message),
			 (int)REPORT_COMMAND_MAX);
	ck_assert_int_eq(report_format_failed(buf, sizeof(buf) - 1, id, T1, message), -ENOBUFS);
}
END_TEST

START_TEST(test_outcome_round_trip)
{
	static const struct report_outcome cases[] = {
		{ .kind = REPORT_RECORDED, .failures = 1, .threshold = 2 },
		{ .kind = REPORT_RECORDED, .failures = 5, .threshold = 2, .breaker_engaged = true },
		{ .kind = REPORT_QUARANTINED, .failures = 3, .threshold = 3 },
		{ .kind = REPORT_UNCHANGED, .failures = 0, .threshold = 1000 },
		{ .kind = REPORT_QUARANTINED,
		  .failures = UINT32_MAX,
		  .threshold = UINT32_MAX,
		  .breaker_engaged = true },
		{ .kind = REPORT_CLEARED, .cleared = 2, .rescinded = true },
		{ .kind = REPORT_CLEARED, .cleared = 0 },
		{ .kind = REPORT_CLEARED, .cleared = UINT32_MAX, .rescinded = true },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char first[OUTCOME_LINE_BUFSZ], second[OUTCOME_LINE_BUFSZ],
			shown[OUTCOME_LINE_BUFSZ];
		struct report_outcome o;
		int n;

		n = report_outcome_format(first, sizeof(first), &cases[i]);
		ck_assert_int_eq(n, (int)strlen(first));
		/* The file shows it with a newline: that too fits the limit. */
		ck_assert_int_le(n + 1, OUTCOME_LINE_MAX);
		snprintf(shown, sizeof(shown), "%s\n", first);
		ck_assert_int_eq(report_outcome_parse(shown, strlen(shown), &o), 0);
		ck_assert_int_eq(o.kind, cases[i].kind);
		ck_assert_uint_eq(o.failures, cases[i].failures);
		ck_assert_uint_eq(o.threshold, cases[i].threshold);
		ck_assert_int_eq(o.breaker_engaged, cases[i].breaker_engaged);
		ck_assert_uint_eq(o.cleared, cases[i].cleared);
		ck_assert_int_eq(o.rescinded, cases[i].rescinded);
		ck_assert_int_eq(report_outcome_format(second, sizeof(second), &o), n);
		ck_assert_str_eq(first, second);
	}
}
END_TEST

START_TEST(test_outcome_format_rejects)
{
	struct report_outcome o = { .kind = REPORT_RECORDED, .failures = 1, .threshold = 2 };
	char small[8], buf[OUTCOME_LINE_BUFSZ], line[OUTCOME_LINE_MAX + 2];

	ck_assert_int_eq(report_outcome_format(small, sizeof(small), &o), -ENOBUFS);
	o.kind = (enum report_kind)9;
	ck_assert_int_eq(report_outcome_format(buf, sizeof(buf), &o), -EINVAL);
	ck_assert_ptr_null(report_kind_name((enum report_kind)9));
	ck_assert_str_eq(report_kind_name(REPORT_UNCHANGED), "unchanged");
	/* A valid line padded past OUTCOME_LINE_MAX is refused. */
	memset(line, ' ', sizeof(line));
	memcpy(line, "cleared=0 rescinded=0", 21);
	line[OUTCOME_LINE_MAX] = '\n';
	ck_assert_int_eq(report_outcome_parse(line, OUTCOME_LINE_MAX + 1, &o), -EINVAL);
}
END_TEST

/* ---- assignment files: render and round trips --------------------------------------- */

static char *render(const struct assignment *a)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(assignment_render(a, out), 0);
	fclose(out);
	return text;
}

static struct assignment sample(void)
{
	struct assignment a = { .vf = "0000:41:00.4", .instance_id = "vm-1", .claimed_at = T1 };
	return a;
}

/* sample() with every other key set. */
static void fill(struct assignment *a)
{
	strcpy(a->agent, "vsock:3:2222");
	strcpy(a->control, "/run/vm.sock");
	a->pid = 42;
	a->pid_starttime = 123456;
	strcpy(a->boot_id, BOOT);
}

START_TEST(test_assignment_render)
{
	struct assignment a = sample();
	_cleanup_free_ char *empty = render(&a);
	_cleanup_free_ char *full = NULL;

	ck_assert_str_eq(empty,
			 "claimed_at=" T1 "\nagent=\ncontrol=\npid=\npid_starttime=\nboot_id=\n");
	fill(&a);
	full = render(&a);
	ck_assert_str_eq(full, "claimed_at=" T1 "\nagent=vsock:3:2222\ncontrol=/run/vm.sock\n"
			       "pid=42\npid_starttime=123456\nboot_id=" BOOT "\n");
	for (int k = 0; k < ASSIGNMENT_KEY_COUNT; k++)
		ck_assert_ptr_nonnull(strstr(full, assignment_key_name((enum assignment_key)k)));
	/* command keys are in the table, never in a file */
	ck_assert_str_eq(assignment_key_name(ASSIGNMENT_RELEASE), "release");
	ck_assert_ptr_null(strstr(full, "release"));
	ck_assert_ptr_null(assignment_key_name(ASSIGNMENT_COMMAND_END));
}
END_TEST

START_TEST(test_assignment_round_trip)
{
	struct assignment cases[4];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		cases[i] = sample();
	strcpy(cases[1].agent, "hvsock:/run/vm/a.vsock:2222");
	strcpy(cases[1].control, "/run/vm/a.ctl");
	cases[1].pid = 4242;
	cases[1].pid_starttime = 987654;
	strcpy(cases[1].boot_id, BOOT);
	cases[2].pid = PID_VALUE_MAX;
	cases[2].pid_starttime = UINT64_MAX;
	memset(cases[3].agent, 'a', AGENT_ENDPOINT_MAX); /* the reader checks only the length */
	cases[3].control[0] = '/';
	memset(cases[3].control + 1, 'c', CONTROL_PATH_MAX - 1);

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *first = render(&cases[i]), *second = NULL;
		struct assignment parsed;

		ck_assert_uint_le(strlen(first), ASSIGNMENT_FILE_MAX);
		ck_assert_int_eq(assignment_parse(cases[i].vf, cases[i].instance_id, first,
						  strlen(first), &parsed),
				 0);
		ck_assert_int_eq(memcmp(&parsed, &cases[i], sizeof(parsed)), 0);
		second = render(&parsed);
		ck_assert_str_eq(first, second);
	}
}
END_TEST

/* What a writer reads it may write back unchanged (cat f > tmp; cat tmp > f). */
START_TEST(test_assignment_write_back)
{
	struct assignment a = sample(), out;
	_cleanup_free_ char *text = NULL;
	unsigned written = 0;

	fill(&a);
	text = render(&a);
	ck_assert_int_eq(assignment_parse_update(&a, text, false, &out, &written), 0);
	ck_assert_uint_eq(written, (1u << ASSIGNMENT_KEY_COUNT) - 1);
	ck_assert_str_eq(out.claimed_at, a.claimed_at);
	ck_assert_str_eq(out.agent, a.agent);
	ck_assert_str_eq(out.control, a.control);
	ck_assert_int_eq(out.pid, a.pid);
	/* pid was written: the caller records the start time anew. */
	ck_assert_uint_eq(out.pid_starttime, 0);
}
END_TEST

START_TEST(test_assignment_update)
{
	struct assignment cur = sample(), out;
	unsigned written;

	ck_assert_int_eq(assignment_parse_update(&cur, "agent=vsock:3\ncontrol=/run/vm.sock\npid=7",
						 false, &out, &written),
			 0);
	ck_assert_str_eq(out.agent, "vsock:3:2222"); /* canonical */
	ck_assert_str_eq(out.control, "/run/vm.sock");
	ck_assert_int_eq(out.pid, 7);
	ck_assert_uint_eq(written, (1u << ASSIGNMENT_AGENT) | (1u << ASSIGNMENT_CONTROL) |
					   (1u << ASSIGNMENT_PID));

	/* Keys not written keep their value, pid_starttime included. */
	cur = out;
	cur.pid_starttime = 55;
	ck_assert_int_eq(assignment_parse_update(&cur, "\nagent=\n\n", false, &out, &written), 0);
	ck_assert_str_eq(out.agent, "");
	ck_assert_int_eq(out.pid, 7);
	ck_assert_uint_eq(out.pid_starttime, 55);
	ck_assert_uint_eq(written, 1u << ASSIGNMENT_AGENT);

	/* pid_starttime: only the recorded value, and it changes nothing. */
	ck_assert_int_eq(assignment_parse_update(&cur, "pid_starttime=55", false, &out, NULL), 0);
	ck_assert_uint_eq(out.pid_starttime, 55);
	ck_assert_int_eq(assignment_parse_update(&cur, "pid_starttime=56", false, &out, NULL),
			 -EINVAL);
	ck_assert_int_eq(assignment_parse_update(&cur, "pid_starttime=", false, &out, NULL),
			 -EINVAL);
	cur.pid_starttime = 0;
	ck_assert_int_eq(assignment_parse_update(&cur, "pid_starttime=", false, &out, NULL), 0);

	/* boot_id: the daemon's too; only the recorded value. */
	strcpy(cur.boot_id, "0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b");
	ck_assert_int_eq(assignment_parse_update(&cur,
						 "boot_id=0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b",
						 false, &out, NULL),
			 0);
	ck_assert_str_eq(out.boot_id, cur.boot_id);
	ck_assert_int_eq(assignment_parse_update(&cur, "boot_id=0f2c4e6a", false, &out, NULL),
			 -EINVAL);
	ck_assert_int_eq(assignment_parse_update(&cur, "boot_id=", false, &out, NULL), -EINVAL);
	cur.boot_id[0] = '\0';

	/* claimed_at: equal spellings always, a new value only on the first write. */
	cur = sample();
	ck_assert_int_eq(assignment_parse_update(&cur, "claimed_at=2026-11-29t07:44:51.000000001z",
						 false, &out, NULL),
			 0);
	ck_assert_int_eq(assignment_parse_update(&cur, "claimed_at=2026-11-29T07:00:01Z", false,
						 &out, NULL),
			 -EINVAL);
	ck_assert_int_eq(assignment_parse_update(&cur, "claimed_at=2026-11-29T07:00:01.5Z", true,
						 &out, NULL),
			 0);
	ck_assert_str_eq(out.claimed_at, "2026-11-29T07:00:01.500000000Z");

	/* boot_id: recorded by the daemon; a writer may only repeat it. */
	cur = sample();
	strcpy(cur.boot_id, BOOT);
	ck_assert_int_eq(assignment_parse_update(&cur, "boot_id=" BOOT, false, &out, NULL), 0);
	ck_assert_str_eq(out.boot_id, BOOT);
	ck_assert_int_eq(assignment_parse_update(&cur, "agent=vsock:3", true, &out, NULL), 0);
	ck_assert_str_eq(out.boot_id, BOOT); /* kept by every write */
	ck_assert_int_eq(assignment_parse_update(&cur,
						 "boot_id=0123abcd-4567-89ef-0123-456789abcde0",
						 true, &out, NULL),
			 -EINVAL);
	ck_assert_int_eq(assignment_parse_update(&cur, "boot_id=", true, &out, NULL), -EINVAL);
	cur.boot_id[0] = '\0';
	ck_assert_int_eq(assignment_parse_update(&cur, "boot_id=", false, &out, NULL), 0);
	ck_assert_int_eq(assignment_parse_update(&cur, "boot_id=" BOOT, true, &out, NULL), -EINVAL);
}
END_TEST

/* release=CLAIMED_AT: a command key, written alone or with ended=crash (and
 * died_at=), any RFC 3339 spelling. */
START_TEST(test_assignment_release)
{
	static const char *const bad[] = {
		"release=",
		"release=yesterday",
		"release=2026-02-30T00:00:00Z",
		"release=" T1 "\nagent=vsock:3",
		"agent=vsock:3\nrelease=" T1,
		"release=" T1 "\nrelease=" T1,
		"release=" T1 "\nbogus=1",
		"release",
		"ended=crash",
		"ended=crash\npid=3",
		"release=" T1 "\nended=crashed",
		"release=" T1 "\nended=",
		"release=" T1 "\nended=crash\nended=crash",
		"died_at=" T1,
		"ended=crash\ndied_at=" T1,
		"release=" T1 "\ndied_at=" T1,
		"release=" T1 "\nended=crash\ndied_at=soon",
		"release=" T1 "\nended=crash\ndied_at=",
		"release=" T1 "\nended=crash\npid=3",
	};
	struct assignment cur = sample(), out;
	struct assignment_release at;

	ck_assert_int_eq(assignment_parse_release("release=2026-11-29t07:44:51.000000001z", &at),
			 1);
	ck_assert_str_eq(at.claimed_at, T1);
	ck_assert(!at.crashed);
	ck_assert_int_eq(assignment_parse_release("\nrelease=" T1 "\n\n", &at), 1);
	ck_assert_str_eq(at.claimed_at, T1);
	/* a death said with its release, in either order */
	ck_assert_int_eq(assignment_parse_release("ended=crash\nrelease=" T1, &at), 1);
	ck_assert_str_eq(at.claimed_at, T1);
	ck_assert(at.crashed);
	ck_assert_str_eq(at.died_at, "");
	ck_assert_int_eq(assignment_parse_release("\nrelease=" T1 "\nended=crash\n"
						  "died_at=2026-11-29T07:44:52Z\n",
						  &at),
			 1);
	ck_assert(at.crashed);
	ck_assert_str_eq(at.died_at, "2026-11-29T07:44:52.000000000Z");
	/* not a release: an update, left to assignment_parse_update() */
	ck_assert_int_eq(assignment_parse_release("agent=vsock:3\npid=7", &at), 0);
	ck_assert_int_eq(assignment_parse_release("", &at), 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(assignment_parse_release(bad[i], &at) == -EINVAL, "accepted: %s",
			      bad[i]);
	/* an update may not name them; a reader ignores them (never rendered) */
	ck_assert_int_eq(assignment_parse_update(&cur, "release=" T1, true, &out, NULL), -EINVAL);
	ck_assert_int_eq(assignment_parse_update(&cur, "ended=crash", true, &out, NULL), -EINVAL);
	ck_assert_int_eq(assignment_parse_update(&cur, "died_at=" T1, true, &out, NULL), -EINVAL);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", "release=x\npid=3\n", 16, &out),
			 0);
	ck_assert_int_eq(out.pid, 3);
	ck_assert_int_eq(assignment_parse("0000:41:00.4", "vm-1", "ended=x\npid=4\n", 14, &out), 0);
	ck_assert_int_eq(out.pid, 4);
}
END_TEST

START_TEST(test_assignment_update_rejects)
{
	char long_agent[AGENT_ENDPOINT_MAX + 16], long_control[CONTROL_PATH_MAX + 16];
	static const char *const bad[] = {
		BAD_ASSIGNMENT_LINES,
		"control=/a\x7f",
		"agent=vsock:3\nbogus=1",
		"pid_starttime=1",
		"pid_starttime=x",
		"boot_id=x",
		"boot_id=0123ABCD-4567-89EF-0123-456789ABCDEF",
	};
	struct assignment cur = sample(), out, untouched;

	memset(&untouched, 0xa5, sizeof(untouched));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memcpy(&out, &untouched, sizeof(out));
		ck_assert_msg(assignment_parse_update(&cur, bad[i], true, &out, NULL) == -EINVAL,
			      "accepted: %s", bad[i]);
		ck_assert_msg(memcmp(&out, &untouched, sizeof(out)) == 0, "changed by: %s", bad[i]);
		ck_assert_msg(assignment_update_refusal(&cur, bad[i], true), "no reason: %s",
			      bad[i]);
	}
	/* The reason names the rule broken (the daemon logs it). */
	ck_assert_ptr_nonnull(strstr(assignment_update_refusal(&cur, "pid=0", true), "pid="));
	ck_assert_ptr_nonnull(
		strstr(assignment_update_refusal(&cur, "control=rel", true), "control="));
	ck_assert_ptr_nonnull(strstr(assignment_update_refusal(&cur, "bogus=1", true), "the keys"));
	ck_assert_ptr_nonnull(
		strstr(assignment_update_refusal(&cur, "claimed_at=2026-01-01T00:00:00Z", false),
		       "first write"));
	ck_assert_ptr_null(assignment_update_refusal(&cur, "pid=7\nagent=vsock:3", true));
	/* Lengths: the limit is accepted, one more is not. */
	snprintf(long_control, sizeof(long_control), "control=/%0*d", CONTROL_PATH_MAX - 1, 0);
	ck_assert_int_eq(assignment_parse_update(&cur, long_control, false, &out, NULL), 0);
	ck_assert_uint_eq(strlen(out.control), CONTROL_PATH_MAX);
	snprintf(long_control, sizeof(long_control), "control=/%0*d", CONTROL_PATH_MAX, 0);
	ck_assert_int_eq(assignment_parse_update(&cur, long_control, false, &out, NULL), -EINVAL);
	/* unix:PATH with a 107-byte path is a valid endpoint of 112 bytes; an
	 * agent longer than AGENT_ENDPOINT_MAX is refused before it is parsed. */
	snprintf(long_agent, sizeof(long_agent), "agent=unix:/%0*d", CONTROL_PATH_MAX - 1, 0);
	ck_assert_int_eq(assignment_parse_update(&cur, long_agent, false, &out, NULL), 0);
	snprintf(long_agent, sizeof(long_agent), "agent=hvsock:/%0*d:%0*d", 100, 0,
		 AGENT_ENDPOINT_MAX - 108, 1);
	ck_assert_int_eq(assignment_parse_update(&cur, long_agent, false, &out, NULL), -EINVAL);
}
END_TEST

/* ---- the claims listing -------------------------------------------------------------- */

/* A rendered line parses back to what was rendered; the longest fits
 * CLAIMS_LINE_MAX with its newline. */
START_TEST(test_claims_line_round_trip)
{
	char id[INSTANCE_ID_MAX + 1], vf[VF_ADDR_BUFSZ], got_id[INSTANCE_ID_MAX + 1];
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	memset(id, 'i', INSTANCE_ID_MAX);
	id[INSTANCE_ID_MAX] = '\0';
	ck_assert_int_eq(claims_line_render("0000:41:00.4", id, out), 0);
	ck_assert_int_eq(fclose(out), 0);
	ck_assert_uint_eq(len, CLAIMS_LINE_MAX);
	ck_assert_int_eq(text[len - 1], '\n');
	ck_assert_int_eq(claims_line_parse(text, len - 1, vf, got_id), 0);
	ck_assert_str_eq(vf, "0000:41:00.4");
	ck_assert_str_eq(got_id, id);
	free(text);
	ck_assert_int_eq(claims_line_parse("0000:03:00.1 vm-1", 17, vf, got_id), 0);
	ck_assert_str_eq(vf, "0000:03:00.1");
	ck_assert_str_eq(got_id, "vm-1");
}
END_TEST

START_TEST(test_claims_line_rejects)
{
	static const char *const bad[] = {
		"",
		"0000:41:00.4",
		"0000:41:00.4 ",
		"0000:41:00.4  vm-1",
		"0000:41:00.4 vm-1 x",
		"0000:41:00.4\tvm-1",
		"0000:41:00.8 vm-1",
		"0000:41:00.A vm-1",
		"000:41:00.4 vm-1x",
		" 0000:41:00.4 vm-1",
		"0000:41:00.4 vm/1",
		"not a claim line",
	};
	char vf[VF_ADDR_BUFSZ], id[INSTANCE_ID_MAX + 1], long_line[CLAIMS_LINE_MAX + 2];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(claims_line_parse(bad[i], strlen(bad[i]), vf, id) == -EINVAL, "'%s'",
			      bad[i]);
	/* A NUL inside the line: the lengths must hold. */
	ck_assert_int_eq(claims_line_parse("0000:41:00.4 vm\0-1", 19, vf, id), -EINVAL);
	/* One character past INSTANCE_ID_MAX. */
	snprintf(long_line, sizeof(long_line), "0000:41:00.4 %0*d", INSTANCE_ID_MAX + 1, 0);
	ck_assert_int_eq(claims_line_parse(long_line, strlen(long_line), vf, id), -EINVAL);
}
END_TEST

/* ---- the failure message ------------------------------------------------------------ */

START_TEST(test_message_sanitize)
{
	char out[FAILURE_MESSAGE_MAX + 1], in[FAILURE_MESSAGE_MAX + 100];

	ck_assert_uint_eq(message_sanitize("a\nb\tc\x1b[31m\x7f", out), 11);
	ck_assert_str_eq(out, "a b c [31m "); /* controls become spaces, nothing trimmed */
	ck_assert_uint_eq(message_sanitize(NULL, out), 0);
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(message_sanitize("  caf\xc3\xa9  ", out), 9);
	ck_assert_str_eq(out, "  caf\xc3\xa9  ");

	memset(in, 'x', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	ck_assert_uint_eq(message_sanitize(in, out), FAILURE_MESSAGE_MAX);
	/* A 3-byte sequence straddling the cut goes whole. */
	in[FAILURE_MESSAGE_MAX - 2] = '\xe2';
	in[FAILURE_MESSAGE_MAX - 1] = '\x82';
	in[FAILURE_MESSAGE_MAX] = '\xac';
	ck_assert_uint_eq(message_sanitize(in, out), FAILURE_MESSAGE_MAX - 2);
	/* Idempotent: what it wrote is a fixed point. */
	char again[FAILURE_MESSAGE_MAX + 1];
	message_sanitize("a\nb\tc\x1b[31m\x7f", out);
	message_sanitize(out, again);
	ck_assert_str_eq(out, again);
}
END_TEST

/* Invalid UTF-8 becomes U+FFFD, one per byte that starts no sequence;
 * well-formed sequences pass; the output is valid UTF-8 and a fixed point. */
START_TEST(test_message_utf8)
{
	char out[FAILURE_MESSAGE_MAX + 1], again[FAILURE_MESSAGE_MAX + 1],
		in[FAILURE_MESSAGE_MAX + 8];
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		  "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "a\xff"
		  "b",
		  "a\xef\xbf\xbd"
		  "b" },                                    /* never a UTF-8 byte */
		{ "\x80", "\xef\xbf\xbd" },                 /* a lone continuation */
		{ "\xc3", "\xef\xbf\xbd" },                 /* truncated at the end */
		{ "\xc3(", "\xef\xbf\xbd(" },               /* truncated inside */
		{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong '/' */
		{ "\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong */
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a surrogate */
		{ "\xf4\x90\x80\x80",
		  "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
		{ "\xef\xbf\xbd", "\xef\xbf\xbd" },                     /* U+FFFD itself */
		{ "x\x1b\xfe\n", "x \xef\xbf\xbd " },                   /* controls still spaces */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_uint_eq(message_sanitize(cases[i].in, out), strlen(cases[i].want));
		ck_assert_msg(strcmp(out, cases[i].want) == 0, "case %zu", i);
		message_sanitize(out, again);
		ck_assert_str_eq(out, again);
	}
	/* A replacement that would pass the cut is not written in part. */
	memset(in, 'x', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	in[FAILURE_MESSAGE_MAX - 1] = '\xff';
	ck_assert_uint_eq(message_sanitize(in, out), FAILURE_MESSAGE_MAX - 1);
	ck_assert_int_eq(out[FAILURE_MESSAGE_MAX - 2], 'x');
	/* Every invalid byte expands to three: the output stays in bounds. */
	memset(in, '\xff', sizeof(in) - 1);
	ck_assert_uint_eq(message_sanitize(in, out), FAILURE_MESSAGE_MAX / 3 * 3);
	/* The log's form: any size. */
	char small[5];
	ck_assert_uint_eq(message_sanitize_to("ab\xff"
					      "cd",
					      small, sizeof(small)),
			  2);
	ck_assert_str_eq(small, "ab");
	ck_assert_uint_eq(message_sanitize_to("\xc3\xa9\xc3\xa9", small, sizeof(small)), 4);
}
END_TEST

/* ---- docs/limits.md states every limit -------------------------------------------- */

/* true when line holds value as a whole number (not part of a longer one). */
static bool line_has_number(const char *line, uintmax_t value)
{
	char digits[32];
	size_t n = (size_t)snprintf(digits, sizeof(digits), "%" PRIuMAX, value);

	for (const char *p = strstr(line, digits); p; p = strstr(p + 1, digits)) {
		bool before = p > line && (p[-1] >= '0' && p[-1] <= '9');
		bool after = p[n] >= '0' && p[n] <= '9';
		if (!before && !after)
			return true;
	}
	return false;
}

START_TEST(test_limits_documented)
{
	static const struct {
		const char *name;
		uintmax_t value;
	} limits[] = {
#define LIMIT(name) { #name, (uintmax_t)(name) },
		GRAMMAR_LIMITS(LIMIT)
#undef LIMIT
	};
	const char *path = getenv("VFHEALTH_LIMITS_MD");
	_cleanup_fclose_ FILE *f = NULL;
	char line[2048];

	ck_assert_msg(path && *path, "VFHEALTH_LIMITS_MD is not set");
	f = fopen(path, "re");
	ck_assert_msg(f, "cannot open %s", path);
	for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
		char quoted[64];
		bool found = false;

		snprintf(quoted, sizeof(quoted), "`%s`", limits[i].name);
		rewind(f);
		while (!found && fgets(line, sizeof(line), f))
			found = strstr(line, quoted) && line_has_number(line, limits[i].value);
		ck_assert_msg(found, "docs/limits.md has no line naming %s with %" PRIuMAX,
			      limits[i].name, limits[i].value);
	}
}
END_TEST

static void add_case(Suite *s, const char *name, const TTest *const *tests, size_t n)
{
	TCase *tc = check_tcase(name, 60);

	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
}

static Suite *grammar_suite(void)
{
	Suite *s = suite_create("grammar");
	const TTest *const vf_tests[] = {
		test_vf_address,
	};
	const TTest *const assignment_tests[] = {
		test_assignment_values,     test_assignment_rejects,
		test_assignment_limits,     test_assignment_render,
		test_assignment_round_trip, test_assignment_write_back,
		test_assignment_update,     test_assignment_update_rejects,
		test_assignment_release,    test_claims_line_round_trip,
		test_claims_line_rejects,
	};
	const TTest *const report_tests[] = {
		test_report_failed_format,      test_report_failed_caps_message,
		test_report_format_rejects,     test_report_ok_format,
		test_report_command_parse,      test_report_command_rejects,
		test_report_command_round_trip, test_report_command_longest,
		test_report_outcomes,           test_report_outcome_rejects,
		test_outcome_round_trip,        test_outcome_format_rejects,
	};
	const TTest *const message_tests[] = {
		test_message_sanitize,
		test_message_utf8,
	};
	const TTest *const limits_tests[] = {
		test_limits_documented,
	};

	add_case(s, "vf", vf_tests, ARRAY_SIZE(vf_tests));
	add_case(s, "assignment", assignment_tests, ARRAY_SIZE(assignment_tests));
	add_case(s, "report", report_tests, ARRAY_SIZE(report_tests));
	add_case(s, "message", message_tests, ARRAY_SIZE(message_tests));
	add_case(s, "limits", limits_tests, ARRAY_SIZE(limits_tests));
	return s;
}

CHECK_MAIN(grammar_suite)
