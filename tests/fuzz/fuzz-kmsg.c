/* SPDX-License-Identifier: MIT */
/*
 * fuzz-kmsg.c - the agent's /dev/kmsg record parser and line reader
 * (guest-agent/kmsg.c).  A guest's root can write anything into the kernel
 * log's userspace side, so the parser sees hostile bytes.
 *
 * The input is parsed as one record, then read as a file of lines through
 * kmsg_reader (the FIFO/regular-file path tests and replays use), each line
 * classified.  Invariants: the message lies inside the buffer and holds no
 * newline; failure writes nothing; MATCH only for facility 0 and the text
 * rule; a " " line is a continuation; no line handed out exceeds
 * KMSG_LINE_MAX.
 *
 * The input is also parsed as a rules file (an operator's file is trusted
 * less than it looks: it may be generated; when the input holds a "\n%%\n"
 * line, the rules are what comes before it and the records what follows,
 * else the whole input is both): a refused file leaves the rules
 * unchanged and names a line inside the input; an accepted one holds at most
 * KMSG_RULES_MAX rules within the limits, the built-in rule last; each line
 * of the input is then classified by those rules, and a MATCH or IGNORED
 * names a rule of that action whose text is in the message after "NVRM:".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest-agent/kmsg.h"
#include "common/cleanup.h"
#include "tests/fuzz/fuzz.h"

static void check_record(const char *buf, size_t len)
{
	struct kmsg_record rec, untouched;
	enum kmsg_verdict v;
	int r;

	fuzz_poison(rec, untouched, 0x6b);
	r = kmsg_parse_record(buf, len, &rec);
	fuzz_check(r == 0 || r == -EINVAL || r == -ENOMSG);
	if (r < 0) {
		fuzz_untouched(rec, untouched);
		fuzz_check(r != -ENOMSG || (len > 0 && buf[0] == ' '));
	} else {
		fuzz_check(rec.message > buf && rec.message <= buf + len);
		fuzz_check(rec.message + rec.message_len <= buf + len);
		fuzz_check(!memchr(rec.message, '\n', rec.message_len));
		fuzz_check(rec.priority <= 1023);
	}

	memset(&rec, 0, sizeof(rec));
	v = kmsg_classify(buf, len, &rec);
	fuzz_check(kmsg_verdict_name(v) != NULL);
	switch (v) {
	case KMSG_MATCH:
		fuzz_check(r == 0 && (rec.priority >> 3) == 0);
		fuzz_check(kmsg_message_is_init_failure(rec.message, rec.message_len));
		fuzz_check(memmem(rec.message, rec.message_len, "RmInitAdapter failed!", 21));
		break;
	case KMSG_IGNORED: /* the built-in rules have no ignore rule */
		fuzz_check(false);
		break;
	case KMSG_NO_MATCH:
		fuzz_check(r == 0 && (rec.priority >> 3) == 0);
		break;
	case KMSG_NOT_KERNEL:
		fuzz_check(r == 0 && (rec.priority >> 3) != 0);
		break;
	case KMSG_CONTINUATION:
		fuzz_check(r == -ENOMSG);
		break;
	case KMSG_MALFORMED:
		fuzz_check(r == -EINVAL);
		break;
	}
}

static void on_line(void *userdata, const char *record, size_t len)
{
	size_t *lines = userdata;

	fuzz_check(len <= KMSG_LINE_MAX);
	check_record(record, len);
	(*lines)++;
}

/* The same bytes as a regular file read through kmsg_reader. */
static void read_as_file(const uint8_t *data, size_t size)
{
	_cleanup_close_ int fd = memfd_create("kmsg-fuzz", MFD_CLOEXEC);
	struct kmsg_reader reader;
	char path[64];
	size_t lines = 0;
	int k = 0;

	if (fd < 0 || (size > 0 && write(fd, data, size) != (ssize_t)size))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (kmsg_reader_init(&reader, path) < 0)
		return;
	if (kmsg_reader_open(&reader) == 0) {
		/* A regular file finishes; each call handles a bounded batch. */
		for (int calls = 0; calls < 100000 && k == 0; calls++)
			k = kmsg_reader_drain(&reader, on_line, &lines);
		fuzz_check(k == 1);
		fuzz_check(lines <= size);
	}
	kmsg_reader_free(&reader);
}

static void check_rule_verdict(const struct kmsg_rules *rules, const char *line, size_t len)
{
	const struct kmsg_rule *rule = NULL;
	struct kmsg_record rec;
	enum kmsg_verdict v = kmsg_classify_rules(rules, line, len, &rec, &rule);

	if (v != KMSG_MATCH && v != KMSG_IGNORED)
		return;
	fuzz_check(rule >= rules->rule && rule < rules->rule + rules->n);
	fuzz_check((rec.priority >> 3) == 0);
	fuzz_check(rule->action == (v == KMSG_MATCH ? KMSG_RULE_FAILURE : KMSG_RULE_IGNORE));
	fuzz_check(memmem(rec.message, rec.message_len, rule->text, rule->len) != NULL);
}

static void check_rules(const char *buf, size_t size)
{
	static struct kmsg_rules rules, before;
	const char *split = memmem(buf, size, "\n%%\n", 4);
	size_t len = split ? (size_t)(split - buf) + 1 : size;
	const char *p = split ? split + 4 : buf, *end = buf + size;
	unsigned line = 12345;
	int k;

	kmsg_rules_init(&rules);
	memcpy(&before, &rules, sizeof(rules));
	k = kmsg_rules_parse(&rules, buf, len, &line);
	if (k < 0) {
		fuzz_check(k == -EINVAL || k == -ENAMETOOLONG || k == -E2BIG || k == -EFBIG);
		fuzz_untouched(rules, before);
		fuzz_check(line <= len + 1);
		fuzz_check(kmsg_rules_strerror(k) != NULL);
		return;
	}
	fuzz_check(line == 0);
	fuzz_check(rules.n >= 1 && rules.n <= KMSG_RULES_MAX + 1);
	fuzz_check(strcmp(rules.rule[rules.n - 1].text, KMSG_BUILTIN_RULE) == 0);
	for (unsigned i = 0; i < rules.n; i++) {
		fuzz_check(rules.rule[i].len >= 1 && rules.rule[i].len <= AGENT_RULE_MAX);
		fuzz_check(strlen(rules.rule[i].text) == rules.rule[i].len);
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		check_rule_verdict(&rules, p, n);
		p += n + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: ASan flags a read past len. */
	_cleanup_free_ char *buf = calloc(1, size ? size : 1);

	if (!buf)
		return 0;
	if (size > 0)
		memcpy(buf, data, size);
	check_record(buf, size);
	check_rules(buf, size);
	if (size <= 65536)
		read_as_file(data, size);
	return 0;
}
