/* SPDX-License-Identifier: MIT */
/* Unit tests for guest-agent/kmsg.c: the record parser (priority/facility
 * rules, flags, continuation lines, long records, malformed prefixes), the
 * text rule, and the reader on regular files, FIFOs and the real /dev/kmsg. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest-agent/kmsg.h"
#include "common/cleanup.h"
#include "tests/common/check-main.h"

#define NVRM "NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)"

static enum kmsg_verdict classify(const char *s)
{
	struct kmsg_record rec;
	return kmsg_classify(s, strlen(s), &rec);
}

START_TEST(test_parse_fields)
{
	const char *s = "4,1227,87669726564,c;" NVRM
			"\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:03.0\n";
	struct kmsg_record rec;

	ck_assert_int_eq(kmsg_parse_record(s, strlen(s), &rec), 0);
	ck_assert_uint_eq(rec.priority, 4);
	ck_assert_uint_eq(rec.seq, 1227);
	ck_assert_uint_eq(rec.ts_usec, 87669726564ULL);
	ck_assert_int_eq(rec.flags, 'c');
	ck_assert_uint_eq(rec.message_len, strlen(NVRM)); /* ends at the first newline */
	ck_assert_mem_eq(rec.message, NVRM, strlen(NVRM));

	/* Extra prefix fields (caller id) are allowed. */
	s = "6,2,3,-,caller=T1;hello";
	ck_assert_int_eq(kmsg_parse_record(s, strlen(s), &rec), 0);
	ck_assert_int_eq(rec.flags, '-');
	ck_assert_uint_eq(rec.message_len, 5);

	/* Not NUL-terminated: only len bytes are looked at. */
	char buf[] = { '0', ',', '1', ',', '2', ',', '-', ';', 'x', 'y' };
	ck_assert_int_eq(kmsg_parse_record(buf, sizeof(buf), &rec), 0);
	ck_assert_uint_eq(rec.message_len, 2);
}
END_TEST

START_TEST(test_facility_rules)
{
	/* facility 0, every level, both flags */
	for (int level = 0; level < 8; level++) {
		char s[200];
		snprintf(s, sizeof(s), "%d,1,1,-;" NVRM, level);
		ck_assert_int_eq(classify(s), KMSG_MATCH);
		snprintf(s, sizeof(s), "%d,1,1,c;" NVRM, level);
		ck_assert_int_eq(classify(s), KMSG_MATCH);
	}
	/* what userspace writes to /dev/kmsg: LOG_USER (1 << 3) and above */
	ck_assert_int_eq(classify("11,1,1,-;" NVRM), KMSG_NOT_KERNEL);
	ck_assert_int_eq(classify("8,1,1,-;" NVRM), KMSG_NOT_KERNEL);
	ck_assert_int_eq(classify("14,1,1,c;" NVRM), KMSG_NOT_KERNEL);
	ck_assert_int_eq(classify("30,1,1,-;" NVRM), KMSG_NOT_KERNEL); /* daemon */
	ck_assert_int_eq(classify("1023,1,1,-;" NVRM), KMSG_NOT_KERNEL);
	ck_assert_int_eq(classify("6,1,1,-;usb 1-1: new device"), KMSG_NO_MATCH);
}
END_TEST

START_TEST(test_text_rule)
{
	ck_assert(kmsg_message_is_init_failure(NVRM, strlen(NVRM)));
	/* old drivers: no "GPU BDF:" part; any (stage:status:line) tuple */
	ck_assert_int_eq(classify("3,1,1,-;NVRM: RmInitAdapter failed! (0x31:0xffff:1234)"),
			 KMSG_MATCH);
	ck_assert_int_eq(classify("3,1,1,-;NVRM: RmInitAdapter failed!"), KMSG_MATCH);
	ck_assert_int_eq(classify("3,1,1,-;   NVRM: GPU 0000:01:00.0: RmInitAdapter failed!  "),
			 KMSG_MATCH);
	/* not at the start, not the right text */
	ck_assert_int_eq(classify("3,1,1,-;foo NVRM: RmInitAdapter failed!"), KMSG_NO_MATCH);
	ck_assert_int_eq(classify("3,1,1,-;NVRM: RmInitAdapter failed (0x22:0x65:884)"),
			 KMSG_NO_MATCH);
	ck_assert_int_eq(classify("3,1,1,-;nvrm: RmInitAdapter failed!"), KMSG_NO_MATCH);
	ck_assert_int_eq(
		classify(
			"3,1,1,-;NVRM: GPU 0000:00:03.0: rm_init_adapter failed, device minor number 0"),
		KMSG_NO_MATCH);
	ck_assert_int_eq(classify("3,1,1,-;NVRM:"), KMSG_NO_MATCH);
	ck_assert_int_eq(classify("3,1,1,-;"), KMSG_NO_MATCH);
	/* the text only on a continuation line does not count */
	ck_assert_int_eq(classify("3,1,1,-;NVRM: GPU 0000:00:03.0:\n RmInitAdapter failed!"),
			 KMSG_NO_MATCH);
}
END_TEST

/* ---- rules --------------------------------------------------------------- */

static int parse_rules(struct kmsg_rules *r, const char *text, unsigned *line)
{
	return kmsg_rules_parse(r, text, strlen(text), line);
}

static enum kmsg_verdict classify_by(const struct kmsg_rules *r, const char *s,
				     const struct kmsg_rule **rule)
{
	struct kmsg_record rec;

	*rule = NULL;
	return kmsg_classify_rules(r, s, strlen(s), &rec, rule);
}

START_TEST(test_rules_file)
{
	static struct kmsg_rules r;
	const struct kmsg_rule *rule;
	unsigned line = 99;

	kmsg_rules_init(&r);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_int_eq(parse_rules(&r,
				     "# site rules\n"
				     "\n"
				     "failure GSP firmware init failed\n"
				     "  ignore\tRmInitAdapter failed! (0x25:0x65:1453)  \n"
				     "failure None of the NVIDIA devices were initialized.",
				     &line),
			 0);
	ck_assert_uint_eq(line, 0);
	ck_assert_uint_eq(r.n, 4);
	ck_assert_str_eq(r.rule[1].text, "RmInitAdapter failed! (0x25:0x65:1453)");
	ck_assert_str_eq(r.rule[3].text, KMSG_BUILTIN_RULE);

	/* a file rule matches after the NVRM: prefix, kernel facility only */
	ck_assert_int_eq(
		classify_by(&r, "3,1,1,-;NVRM: GPU 0000:41:00.4: GSP firmware init failed (0x1)",
			    &rule),
		KMSG_MATCH);
	ck_assert_str_eq(rule->text, "GSP firmware init failed");
	ck_assert_int_eq(classify_by(&r, "11,1,1,-;NVRM: GSP firmware init failed", &rule),
			 KMSG_NOT_KERNEL);
	ck_assert_int_eq(classify_by(&r, "3,1,1,-;GSP firmware init failed", &rule), KMSG_NO_MATCH);
	ck_assert_int_eq(classify_by(&r,
				     "3,1,1,-;NVRM: None of the NVIDIA devices were initialized.",
				     &rule),
			 KMSG_MATCH);
	/* an ignore rule before the built-in one overrides it for its line only */
	ck_assert_int_eq(
		classify_by(&r,
			    "3,1,1,-;NVRM: GPU 0000:41:00.4: RmInitAdapter failed! (0x25:0x65:1453)",
			    &rule),
		KMSG_IGNORED);
	ck_assert_int_eq(rule->action, KMSG_RULE_IGNORE);
	ck_assert_int_eq(
		classify_by(&r,
			    "3,1,1,-;NVRM: GPU 0000:41:00.4: RmInitAdapter failed! (0x22:0x38:891)",
			    &rule),
		KMSG_MATCH);
	ck_assert_str_eq(rule->text, KMSG_BUILTIN_RULE);
	/* the prefix itself is not searched: "NVRM:" as a rule's text never matches it */
	ck_assert_int_eq(parse_rules(&r, "failure NVRM:\n", &line), 0);
	ck_assert_int_eq(classify_by(&r, "3,1,1,-;NVRM: something", &rule), KMSG_NO_MATCH);
}
END_TEST

START_TEST(test_rules_refused_with_line)
{
	static struct kmsg_rules r, before;
	char big[KMSG_RULES_FILE_MAX + 2], text[AGENT_RULE_MAX + 16];
	unsigned line;
	size_t n = 0;

	kmsg_rules_init(&r);
	ck_assert_int_eq(parse_rules(&r, "ignore Xid 79\n", &line), 0);
	memcpy(&before, &r, sizeof(r));

	ck_assert_int_eq(parse_rules(&r, "# ok\nfailure a\nfail b\n", &line), -EINVAL);
	ck_assert_uint_eq(line, 3);
	ck_assert_int_eq(parse_rules(&r, "failure   \n", &line), -EINVAL);
	ck_assert_uint_eq(line, 1);
	ck_assert_int_eq(parse_rules(&r, "failure\n", &line), -EINVAL);
	ck_assert_int_eq(parse_rules(&r, "ignorex y\n", &line), -EINVAL);
	ck_assert_int_eq(parse_rules(&r, "\nfailure a\x01b\n", &line), -EINVAL);
	ck_assert_uint_eq(line, 2);

	/* the text limit: AGENT_RULE_MAX bytes pass, one more does not */
	snprintf(text, sizeof(text), "failure %0*d", AGENT_RULE_MAX, 0);
	ck_assert_int_eq(parse_rules(&r, text, &line), 0);
	ck_assert_uint_eq(r.rule[0].len, AGENT_RULE_MAX);
	memcpy(&r, &before, sizeof(r));
	snprintf(text, sizeof(text), "failure %0*d", AGENT_RULE_MAX + 1, 0);
	ck_assert_int_eq(parse_rules(&r, text, &line), -ENAMETOOLONG);
	ck_assert_uint_eq(line, 1);

	/* the count limit: the 65th rule is refused on its own line */
	for (int i = 0; i <= KMSG_RULES_MAX; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "failure rule %d\n", i);
	ck_assert_int_eq(parse_rules(&r, big, &line), -E2BIG);
	ck_assert_uint_eq(line, KMSG_RULES_MAX + 1);

	/* the size limit: refused as a whole */
	memset(big, '#', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(parse_rules(&r, big, &line), -EFBIG);
	ck_assert_uint_eq(line, 0);
	ck_assert_mem_eq(&r, &before, sizeof(r)); /* every refusal changed nothing */
}
END_TEST

START_TEST(test_continuation_and_malformed)
{
	static const char *const bad[] = {
		"",
		"hello",
		"4;msg",
		"4,1;msg",
		"4,1,2;msg",
		"4,1,2,;msg",
		"x,1,2,-;msg",
		"-4,1,2,-;msg",
		"+4,1,2,-;msg",
		"4,a,2,-;msg",
		"4,1,b,-;msg",
		"1024,1,2,-;msg",
		"4,1,2\n,-;msg",
		",1,2,-;msg",
		"4,,2,-;msg",
		"4,1,,-;msg",
		"4,99999999999999999999999,2,-;msg",
		"4 ,1,2,-;msg",
	};
	struct kmsg_record rec = { .seq = 42 };

	ck_assert_int_eq(classify(" SUBSYSTEM=pci"), KMSG_CONTINUATION);
	ck_assert_int_eq(classify(" DEVICE=+pci:0000:00:03.0"), KMSG_CONTINUATION);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(kmsg_parse_record(bad[i], strlen(bad[i]), &rec) == -EINVAL,
			      "accepted '%s'", bad[i]);
		ck_assert_int_eq(classify(bad[i]), KMSG_MALFORMED);
	}
	ck_assert_uint_eq(rec.seq, 42); /* untouched */

	/* A ';' only after KMSG_PREFIX_MAX bytes is not a prefix. */
	char longpfx[KMSG_PREFIX_MAX + 20];
	memset(longpfx, '1', sizeof(longpfx));
	memcpy(longpfx, "4,1,2,", 6);
	longpfx[sizeof(longpfx) - 2] = ';';
	longpfx[sizeof(longpfx) - 1] = 'x';
	ck_assert_int_eq(kmsg_parse_record(longpfx, sizeof(longpfx), &rec), -EINVAL);
}
END_TEST

START_TEST(test_long_record)
{
	/* Close to the kernel's 8 KiB record limit, the text at its very end. */
	size_t n = 8100;
	_cleanup_free_ char *s = malloc(n + 1);
	const char *head = "4,7,7,c;NVRM: GPU 0000:00:03.0: ";
	const char *tail = "RmInitAdapter failed!";
	struct kmsg_record rec;

	memset(s, 'x', n);
	memcpy(s, head, strlen(head));
	memcpy(s + n - strlen(tail), tail, strlen(tail));
	s[n] = '\0';
	ck_assert_int_eq(kmsg_classify(s, n, &rec), KMSG_MATCH);
	ck_assert_uint_eq(rec.message_len, n - strlen("4,7,7,c;"));
	/* one byte short of the text: no match */
	ck_assert_int_eq(kmsg_classify(s, n - 1, &rec), KMSG_NO_MATCH);
}
END_TEST

struct collected {
	int n;
	char lines[16][128];
	size_t lens[16];
};

static void collect(void *userdata, const char *rec, size_t len)
{
	struct collected *c = userdata;

	if (c->n < 16) {
		c->lens[c->n] = len;
		memcpy(c->lines[c->n], rec, MIN(len, sizeof(c->lines[0]) - 1));
		c->lines[c->n][MIN(len, sizeof(c->lines[0]) - 1)] = '\0';
	}
	c->n++;
}

START_TEST(test_reader_regular_file)
{
	char path[] = "/tmp/vfh-kmsg-XXXXXX";
	_cleanup_close_ int fd = mkstemp(path);
	struct kmsg_reader *r = malloc(sizeof(*r));
	struct collected c = { 0 };
	/* longer than three buffers: still one dropped line */
	size_t huge_len = 3 * KMSG_LINE_MAX + 100;
	_cleanup_free_ char *huge = malloc(huge_len);

	ck_assert_int_ge(fd, 0);
	memset(huge, 'h', huge_len - 1);
	memcpy(huge + KMSG_LINE_MAX, "\n3,9,9,-;inside an overlong line", 30);
	huge[KMSG_LINE_MAX] = 'h';
	huge[huge_len - 1] = '\n';
	ck_assert_int_eq(write(fd, "3,1,1,-;first\n SUBSYSTEM=pci\n", 29), 29);
	ck_assert_int_eq(write(fd, huge, huge_len), (ssize_t)huge_len);
	ck_assert_int_eq(write(fd, "3,2,2,-;after\n\n3,3,3,-;last", 27), 27);

	ck_assert_int_eq(kmsg_reader_init(r, path), 0);
	ck_assert_int_eq(kmsg_reader_open(r), 0);
	ck_assert(r->lines);
	int k;
	do
		k = kmsg_reader_drain(r, collect, &c);
	while (k == 0);
	ck_assert_int_eq(k, 1); /* finished */
	ck_assert(r->finished);
	ck_assert_int_eq(r->fd, -1);
	ck_assert_int_eq(c.n, 4); /* overlong line dropped, empty line skipped */
	ck_assert_str_eq(c.lines[0], "3,1,1,-;first");
	ck_assert_str_eq(c.lines[1], " SUBSYSTEM=pci");
	ck_assert_str_eq(c.lines[2], "3,2,2,-;after");
	ck_assert_str_eq(c.lines[3], "3,3,3,-;last"); /* no trailing newline */
	ck_assert_uint_eq(r->dropped_lines, 1);
	kmsg_reader_free(r);
	free(r);
	unlink(path);
}
END_TEST

START_TEST(test_reader_fifo_reopens_without_spinning)
{
	char dir[] = "/tmp/vfh-kmsg-XXXXXX", path[64];
	struct kmsg_reader *r = malloc(sizeof(*r));
	struct collected c = { 0 };
	int w;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_eq(kmsg_reader_init(r, path), 0);
	ck_assert_int_eq(kmsg_reader_open(r), 0);

	w = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(w, 0);
	ck_assert_int_eq(write(w, "3,1,1,-;one\n3,2,2,-;tw", 22), 22);
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	ck_assert_int_eq(poll(&p, 1, 5000), 1);
	ck_assert_int_eq(kmsg_reader_drain(r, collect, &c), 0);
	ck_assert_int_eq(c.n, 1);
	ck_assert_int_eq(write(w, "o\n", 2), 2);
	close(w); /* the writer goes away */
	p.fd = r->fd;
	ck_assert_int_eq(poll(&p, 1, 5000), 1);
	ck_assert_int_eq(kmsg_reader_drain(r, collect, &c), 0); /* EOF: reopened */
	ck_assert_int_eq(c.n, 2);
	ck_assert_str_eq(c.lines[1], "3,2,2,-;two");
	ck_assert_int_ge(r->fd, 0);

	/* After the reopen nothing is readable: poll must not wake (no spin). */
	p = (struct pollfd){ .fd = r->fd, .events = POLLIN };
	ck_assert_int_eq(poll(&p, 1, 200), 0);

	/* A new writer is read on the new descriptor. */
	w = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_eq(write(w, "3,3,3,-;three\n", 14), 14);
	ck_assert_int_eq(poll(&p, 1, 5000), 1);
	ck_assert_int_eq(kmsg_reader_drain(r, collect, &c), 0);
	ck_assert_int_eq(c.n, 3);
	close(w);
	kmsg_reader_free(r);
	free(r);
	unlink(path);
	rmdir(dir);
}
END_TEST

static int real_records, real_malformed;

static void judge_real(void *userdata, const char *rec, size_t len)
{
	struct kmsg_record r;

	real_records++;
	if (kmsg_classify(rec, len, &r) == KMSG_MALFORMED)
		real_malformed++;
}

/* Every record the running kernel hands out parses. */
START_TEST(test_reader_real_dev_kmsg)
{
	struct kmsg_reader *r = malloc(sizeof(*r));

	ck_assert_int_eq(kmsg_reader_init(r, "/dev/kmsg"), 0);
	if (kmsg_reader_open(r) < 0) {
		kmsg_reader_free(r);
		free(r);
		return; /* no readable /dev/kmsg here; the parser tests above stand */
	}
	ck_assert(!r->lines);
	/* Drain batches until one comes back short: the buffer is read. */
	for (int i = 0, before = -1; i < 256 && real_records != before; i++) {
		before = real_records;
		ck_assert_int_eq(kmsg_reader_drain(r, judge_real, NULL), 0);
		if (real_records - before < KMSG_DRAIN_BATCH)
			break;
	}
	ck_assert_int_gt(real_records, 0);
	ck_assert_int_eq(real_malformed, 0);
	kmsg_reader_free(r);
	free(r);
}
END_TEST

static const struct check_case kmsg_case = { .suite = "kmsg", .tcase = "core", .timeout = 30 };
CHECK_CASE_MAIN(kmsg_case, test_parse_fields, test_facility_rules, test_text_rule, test_rules_file,
		test_rules_refused_with_line, test_continuation_and_malformed, test_long_record,
		test_reader_regular_file, test_reader_fifo_reopens_without_spinning,
		test_reader_real_dev_kmsg)
