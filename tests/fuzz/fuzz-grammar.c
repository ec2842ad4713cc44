/* SPDX-License-Identifier: MIT */
/*
 * fuzz-grammar.c - the parsers of grammar/: the report command (what anyone
 * with write access to <vf>/report writes), the outcome line (what the
 * sentinel reads back), the assignment file as its readers parse it and as
 * writers update it, the VF address rule and the message sanitizer.
 *
 * The first input byte picks the parser; the rest is its input.  Invariants:
 * the result is success or the documented errno, and failure writes
 * nothing; what is accepted formats back to text that parses to the same
 * value, and formatting that again gives the same text (round trip); the
 * sanitized message is short, one line and a fixed point.
 */
#include <errno.h>
#include <stdbool.h>

#include "grammar/assignment.h"
#include "grammar/message.h"
#include "grammar/report.h"
#include "grammar/vf.h"
#include "common/cleanup.h"
#include "tests/fuzz/fuzz.h"

static void fuzz_report_command(const char *s)
{
	struct report_command c, untouched, again;
	char first[REPORT_COMMAND_BUFSZ], second[REPORT_COMMAND_BUFSZ];
	int r, n1, n2;

	fuzz_poison(c, untouched, 0x3c);
	r = report_command_parse(s, &c);
	fuzz_check(r == 0 || r == -EINVAL);
	if (r < 0) {
		fuzz_untouched(c, untouched);
		return;
	}
	fuzz_check(instance_id_valid(c.instance_id));
	fuzz_check(c.kind == REPORT_COMMAND_FAILED || !*c.message);
	n1 = report_command_format(first, sizeof(first), &c);
	fuzz_check(n1 > 0 && (size_t)n1 <= REPORT_COMMAND_MAX);
	fuzz_check(report_command_parse(first, &again) == 0);
	fuzz_check(again.kind == c.kind && strcmp(again.instance_id, c.instance_id) == 0 &&
		   strcmp(again.claimed_at, c.claimed_at) == 0);
	n2 = report_command_format(second, sizeof(second), &again);
	fuzz_check(n1 == n2 && strcmp(first, second) == 0);
}

static void fuzz_outcome(const char *s, size_t len)
{
	struct report_outcome o, untouched, again;
	char first[OUTCOME_LINE_BUFSZ], second[OUTCOME_LINE_BUFSZ];
	int r, n;

	fuzz_poison(o, untouched, 0x3c);
	r = report_outcome_parse(s, len, &o);
	fuzz_check(r == 0 || r == -EINVAL);
	if (r < 0) {
		fuzz_untouched(o, untouched);
		return;
	}
	n = report_outcome_format(first, sizeof(first), &o);
	fuzz_check(n > 0 && n < OUTCOME_LINE_MAX);
	fuzz_check(report_outcome_parse(first, (size_t)n, &again) == 0);
	fuzz_check(memcmp(&o, &again, sizeof(o)) == 0);
	fuzz_check(report_outcome_format(second, sizeof(second), &again) == n);
	fuzz_check(strcmp(first, second) == 0);
}

static char *render(const struct assignment *a)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	fuzz_check(assignment_render(a, f) == 0);
	fclose(f);
	return text;
}

static void fuzz_assignment_read(const char *s, size_t len)
{
	struct assignment a, untouched, again;
	int r;

	fuzz_poison(a, untouched, 0x3c);
	r = assignment_parse("0000:41:00.4", "vm-1", s, len, &a);
	fuzz_check(r == 0 || r == -EINVAL || r == -E2BIG);
	if (r < 0) {
		fuzz_untouched(a, untouched);
		return;
	}
	fuzz_check(a.pid >= 0 && a.pid <= PID_VALUE_MAX);
	fuzz_check(!a.control[0] || a.control[0] == '/');
	_cleanup_free_ char *first = render(&a);
	fuzz_check(strlen(first) <= ASSIGNMENT_FILE_MAX);
	fuzz_check(assignment_parse(a.vf, a.instance_id, first, strlen(first), &again) == 0);
	fuzz_check(memcmp(&a, &again, sizeof(a)) == 0);
	_cleanup_free_ char *second = render(&again);
	fuzz_check(strcmp(first, second) == 0);
}

static void fuzz_assignment_update(const char *s, bool may_set)
{
	static const struct assignment cur = {
		.vf = "0000:41:00.4",
		.instance_id = "vm-1",
		.claimed_at = "2026-11-29T07:44:51.123456789Z",
		.pid = 77,
		.pid_starttime = 4242,
	};
	struct assignment a, untouched, back;
	unsigned written = 0;
	int r;

	fuzz_poison(a, untouched, 0x3c);
	r = assignment_parse_update(&cur, s, may_set, &a, &written);
	fuzz_check(r == 0 || r == -EINVAL);
	if (r < 0) {
		fuzz_untouched(a, untouched);
		return;
	}
	fuzz_check(strcmp(a.vf, cur.vf) == 0 && strcmp(a.instance_id, cur.instance_id) == 0);
	if (!may_set)
		fuzz_check(strcmp(a.claimed_at, cur.claimed_at) == 0);
	fuzz_check(a.pid_starttime == ((written & (1u << ASSIGNMENT_PID)) ? 0 : cur.pid_starttime));
	fuzz_check(a.pid >= 0 && a.pid <= PID_VALUE_MAX);
	for (const char *q = a.control; *q; q++)
		fuzz_check((unsigned char)*q >= 0x20 && *q != 0x7f);
	/* What a reader then sees, a writer may write back unchanged. */
	_cleanup_free_ char *text = render(&a);
	fuzz_check(assignment_parse_update(&a, text, false, &back, NULL) == 0);
	fuzz_check(strcmp(back.claimed_at, a.claimed_at) == 0 && strcmp(back.agent, a.agent) == 0 &&
		   strcmp(back.control, a.control) == 0 && back.pid == a.pid);
}

static void fuzz_message_vf(const char *s)
{
	char out[FAILURE_MESSAGE_MAX + 1], again[FAILURE_MESSAGE_MAX + 1];
	size_t n = message_sanitize(s, out);

	fuzz_check(n == strlen(out) && n <= FAILURE_MESSAGE_MAX);
	for (size_t i = 0; i < n; i++)
		fuzz_check((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
	fuzz_check(message_sanitize(out, again) == n && strcmp(out, again) == 0);
	if (vf_address_valid(s)) {
		fuzz_check(strlen(s) == VF_ADDR_LEN);
		for (const char *q = s; *q; q++)
			fuzz_check(!(*q >= 'A' && *q <= 'Z'));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *s = NULL;

	if (size < 1 || size > 2 * ASSIGNMENT_FILE_MAX)
		return 0;
	s = fuzz_strndup(data + 1, size - 1);
	if (!s)
		return 0;
	switch (data[0] % 6) {
	case 0:
		fuzz_report_command(s);
		break;
	case 1:
		fuzz_outcome(s, size - 1);
		break;
	case 2:
		fuzz_assignment_read(s, size - 1);
		break;
	case 3:
	case 4:
		fuzz_assignment_update(s, data[0] % 6 == 4);
		break;
	case 5:
		fuzz_message_vf(s);
		break;
	}
	return 0;
}
