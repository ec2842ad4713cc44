/* SPDX-License-Identifier: MIT */
/* kmsg.c - /dev/kmsg record parser and reader.  Contract in kmsg.h. */
#include "guest-agent/kmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/path.h"

#define NVRM_PREFIX "NVRM:"

/* One decimal field of the prefix, [p, end) with no sign or blanks. */
static int parse_field(const char *p, size_t len, uint64_t max, uint64_t *ret)
{
	char digits[24];

	if (len == 0 || len >= sizeof(digits))
		return -EINVAL;
	memcpy(digits, p, len);
	digits[len] = '\0';
	return parse_uint64(digits, 0, max, ret) < 0 ? -EINVAL : 0;
}

int kmsg_parse_record(const char *buf, size_t len, struct kmsg_record *ret)
{
	struct kmsg_record rec = { 0 };
	const char *semi, *field, *end, *nl;
	size_t prefix_len;
	uint64_t v;

	if (!buf || len == 0)
		return -EINVAL;
	if (buf[0] == ' ')
		return -ENOMSG;
	semi = memchr(buf, ';', MIN(len, (size_t)KMSG_PREFIX_MAX));
	if (!semi)
		return -EINVAL;
	prefix_len = (size_t)(semi - buf);
	if (memchr(buf, '\n', prefix_len))
		return -EINVAL;

	/* PRI, SEQ, TS: decimal; then FLAGS, then optional fields. */
	field = buf;
	end = semi;
	for (int i = 0; i < 4; i++) {
		const char *comma = memchr(field, ',', (size_t)(end - field));
		const char *stop = comma ? comma : end;
		size_t flen = (size_t)(stop - field);

		if (i < 3 && !comma)
			return -EINVAL;
		switch (i) {
		case 0:
			if (parse_field(field, flen, 1023, &v) < 0) /* LOG_FACMASK | LOG_PRIMASK */
				return -EINVAL;
			rec.priority = (unsigned)v;
			break;
		case 1:
			if (parse_field(field, flen, UINT64_MAX, &rec.seq) < 0)
				return -EINVAL;
			break;
		case 2:
			if (parse_field(field, flen, UINT64_MAX, &rec.ts_usec) < 0)
				return -EINVAL;
			break;
		case 3:
			if (flen == 0)
				return -EINVAL;
			rec.flags = field[0];
			break;
		}
		field = stop + 1;
	}

	rec.message = semi + 1;
	rec.message_len = len - prefix_len - 1;
	nl = memchr(rec.message, '\n', rec.message_len);
	if (nl)
		rec.message_len = (size_t)(nl - rec.message);
	*ret = rec;
	return 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

void kmsg_trim(const char **msg, size_t *len)
{
	while (*len > 0 && is_blank(**msg)) {
		(*msg)++;
		(*len)--;
	}
	while (*len > 0 && is_blank((*msg)[*len - 1]))
		(*len)--;
}

/* ---- rules ------------------------------------------------------------- */

static const struct kmsg_rule builtin_rule = {
	.action = KMSG_RULE_FAILURE,
	.len = sizeof(KMSG_BUILTIN_RULE) - 1,
	.text = KMSG_BUILTIN_RULE,
};

void kmsg_rules_init(struct kmsg_rules *r)
{
	r->n = 1;
	r->rule[0] = builtin_rule;
}

/* One non-comment line (without '\n', trailing blanks dropped) -> a rule. */
static int parse_rule_line(const char *line, size_t len, struct kmsg_rule *ret)
{
	static const struct {
		const char *word;
		enum kmsg_action action;
	} actions[] = { { "failure", KMSG_RULE_FAILURE }, { "ignore", KMSG_RULE_IGNORE } };
	const char *text = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(actions); i++) {
		size_t w = strlen(actions[i].word);

		if (len > w && memcmp(line, actions[i].word, w) == 0 &&
		    (line[w] == ' ' || line[w] == '\t')) {
			ret->action = actions[i].action;
			text = line + w;
			break;
		}
	}
	if (!text)
		return -EINVAL;
	while (text < line + len && (*text == ' ' || *text == '\t'))
		text++;
	ret->len = (size_t)(line + len - text);
	if (ret->len == 0)
		return -EINVAL;
	if (ret->len > AGENT_RULE_MAX)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < ret->len; i++)
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
			return -EINVAL;
	memcpy(ret->text, text, ret->len);
	ret->text[ret->len] = '\0';
	return 0;
}

int kmsg_rules_parse(struct kmsg_rules *r, const char *text, size_t len, unsigned *ret_line)
{
	/* zeroed: the unused bytes of every rule are defined when copied out */
	_cleanup_free_ struct kmsg_rules *next = calloc(1, sizeof(*next));
	unsigned line_no = 0;
	size_t pos = 0;

	*ret_line = 0;
	if (!next)
		return -ENOMEM;
	if (len > KMSG_RULES_FILE_MAX)
		return -EFBIG;
	next->n = 0;
	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
		size_t line_len = nl ? (size_t)(nl - line) : len - pos;
		const char *p = line;
		size_t n = line_len;
		int k;

		pos += line_len + (nl ? 1 : 0);
		line_no++;
		*ret_line = line_no;
		if (line_len > KMSG_RULES_LINE_MAX)
			return -ENAMETOOLONG;
		kmsg_trim(&p, &n);
		if (n == 0 || p[0] == '#')
			continue;
		if (next->n == KMSG_RULES_MAX)
			return -E2BIG;
		k = parse_rule_line(p, n, &next->rule[next->n]);
		if (k < 0)
			return k;
		next->n++;
	}
	*ret_line = 0;
	next->rule[next->n++] = builtin_rule;
	memcpy(r, next, sizeof(*r));
	return 0;
}

int kmsg_rules_load(struct kmsg_rules *r, const char *path, unsigned *ret_line)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r_read;

	*ret_line = 0;
	r_read = path_read(path, KMSG_RULES_FILE_MAX, &buf, &len);
	if (r_read < 0)
		return r_read == -E2BIG ? -EFBIG : r_read;
	return kmsg_rules_parse(r, buf, len, ret_line);
}

const char *kmsg_rules_strerror(int k)
{
	switch (k) {
	case -EINVAL:
		return "expected 'failure TEXT' or 'ignore TEXT' (TEXT without control characters)";
	case -ENAMETOOLONG:
		return "line or rule text too long";
	case -E2BIG:
		return "too many rules";
	case -EFBIG:
		return "file too large";
	default:
		return strerror(-k);
	}
}

const struct kmsg_rule *kmsg_rules_match(const struct kmsg_rules *r, const char *msg, size_t len)
{
	kmsg_trim(&msg, &len);
	if (len < strlen(NVRM_PREFIX) || memcmp(msg, NVRM_PREFIX, strlen(NVRM_PREFIX)) != 0)
		return NULL;
	msg += strlen(NVRM_PREFIX);
	len -= strlen(NVRM_PREFIX);
	for (unsigned i = 0; i < r->n; i++)
		if (memmem(msg, len, r->rule[i].text, r->rule[i].len))
			return &r->rule[i];
	return NULL;
}

bool kmsg_message_is_init_failure(const char *msg, size_t len)
{
	struct kmsg_rules builtin = { .n = 1, .rule = { builtin_rule } };

	return kmsg_rules_match(&builtin, msg, len) != NULL;
}

enum kmsg_verdict kmsg_classify_rules(const struct kmsg_rules *rules, const char *buf, size_t len,
				      struct kmsg_record *ret, const struct kmsg_rule **ret_rule)
{
	const struct kmsg_rule *rule;
	struct kmsg_record rec;
	int k = kmsg_parse_record(buf, len, &rec);

	if (k == -ENOMSG)
		return KMSG_CONTINUATION;
	if (k < 0)
		return KMSG_MALFORMED;
	*ret = rec;
	if ((rec.priority >> 3) != 0)
		return KMSG_NOT_KERNEL;
	rule = kmsg_rules_match(rules, rec.message, rec.message_len);
	if (!rule)
		return KMSG_NO_MATCH;
	if (ret_rule)
		*ret_rule = rule;
	return rule->action == KMSG_RULE_FAILURE ? KMSG_MATCH : KMSG_IGNORED;
}

enum kmsg_verdict kmsg_classify(const char *buf, size_t len, struct kmsg_record *ret)
{
	struct kmsg_rules builtin = { .n = 1, .rule = { builtin_rule } };

	return kmsg_classify_rules(&builtin, buf, len, ret, NULL);
}

const char *kmsg_verdict_name(enum kmsg_verdict v)
{
	switch (v) {
	case KMSG_MATCH:
		return "match";
	case KMSG_IGNORED:
		return "ignored";
	case KMSG_NO_MATCH:
		return "no-match";
	case KMSG_NOT_KERNEL:
		return "not-kernel";
	case KMSG_CONTINUATION:
		return "continuation";
	case KMSG_MALFORMED:
	default:
		return "malformed";
	}
}

/* ---- the reader -------------------------------------------------------- */

int kmsg_reader_init(struct kmsg_reader *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->path = strdup(path);
	return r->path ? 0 : -ENOMEM;
}

static void reader_close(struct kmsg_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->buf_len = 0;
	r->discarding = false;
}

void kmsg_reader_free(struct kmsg_reader *r)
{
	reader_close(r);
	free(r->path);
	r->path = NULL;
}

int kmsg_reader_open(struct kmsg_reader *r)
{
	_cleanup_close_ int fd = open(r->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISREG(st.st_mode))
		return -EINVAL;
	/* After an error, history was already seen (or is stale): start at the
	 * end.  A FIFO has no position; a regular file is replayed only once. */
	if (r->opened_once && S_ISCHR(st.st_mode) && lseek(fd, 0, SEEK_END) < 0)
		return negative_errno();
	if (r->opened_once && S_ISREG(st.st_mode) && lseek(fd, 0, SEEK_END) < 0)
		return negative_errno();

	reader_close(r);
	r->fd = move_fd(fd);
	r->lines = !S_ISCHR(st.st_mode);
	r->is_fifo = S_ISFIFO(st.st_mode);
	r->opened_once = true;
	r->finished = false;
	r->have_seq = false; /* a gap across a reopen is skipped on purpose, not lost */
	return 0;
}

/* A record from the device: track the sequence to count overwritten ones. */
static void on_device_record(struct kmsg_reader *r, const char *buf, size_t len, kmsg_record_fn fn,
			     void *userdata)
{
	struct kmsg_record rec;

	if (kmsg_parse_record(buf, len, &rec) == 0) {
		if (r->have_seq && rec.seq > r->next_seq) {
			uint64_t gap = rec.seq - r->next_seq;
			r->lost += gap;
			log_warn(
				"kmsg: %llu records overwritten before they were read (%llu in all)",
				(unsigned long long)gap, (unsigned long long)r->lost);
		}
		r->have_seq = true;
		r->next_seq = rec.seq + 1;
	}
	fn(userdata, buf, len);
}

/* read(2) of the non-blocking descriptor, EINTR retried: bytes, or -errno
 * (-EAGAIN: nothing more for now). */
static ssize_t read_some(int fd, void *buf, size_t size)
{
	ssize_t n;

	do
		n = read(fd, buf, size);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

static int drain_device(struct kmsg_reader *r, kmsg_record_fn fn, void *userdata)
{
	for (int i = 0; i < KMSG_DRAIN_BATCH; i++) {
		ssize_t n = read_some(r->fd, r->buf, sizeof(r->buf));

		if (n == -EAGAIN)
			return 0;
		if (n == -EPIPE) {
			/* Overwritten under us; the next read returns the oldest
			 * record still there and the gap counts the loss. */
			r->overruns++;
			continue;
		}
		if (n < 0) {
			reader_close(r);
			return (int)n;
		}
		if (n == 0) {
			reader_close(r);
			return -ENODATA; /* a device never says EOF; treat as an error */
		}
		on_device_record(r, r->buf, (size_t)n, fn, userdata);
	}
	return 0;
}

/* Hand every complete line in buf to fn; keep the partial tail. */
static void split_lines(struct kmsg_reader *r, kmsg_record_fn fn, void *userdata)
{
	size_t start = 0;
	char *nl;

	while ((nl = memchr(r->buf + start, '\n', r->buf_len - start))) {
		size_t len = (size_t)(nl - (r->buf + start));

		if (r->discarding)
			r->discarding = false; /* the tail of an overlong line */
		else if (len > 0)
			fn(userdata, r->buf + start, len);
		start += len + 1;
	}
	memmove(r->buf, r->buf + start, r->buf_len - start);
	r->buf_len -= start;
	if (r->buf_len == KMSG_LINE_MAX) {
		/* No newline in a full buffer: drop this line up to its end,
		 * counted once however many buffers it spans. */
		if (!r->discarding) {
			r->dropped_lines++;
			log_warn("kmsg: dropped a line longer than %d bytes", KMSG_LINE_MAX);
		}
		r->discarding = true;
		r->buf_len = 0;
	}
}

static int drain_lines(struct kmsg_reader *r, kmsg_record_fn fn, void *userdata)
{
	for (int i = 0; i < KMSG_DRAIN_BATCH; i++) {
		ssize_t n = read_some(r->fd, r->buf + r->buf_len, KMSG_LINE_MAX - r->buf_len);

		if (n == -EAGAIN)
			return 0;
		if (n < 0) {
			reader_close(r);
			return (int)n;
		}
		if (n == 0) {
			int k;

			/* The writer is gone: a last line without '\n' still counts. */
			if (r->buf_len > 0 && !r->discarding)
				fn(userdata, r->buf, r->buf_len);
			reader_close(r);
			if (!r->is_fifo) {
				r->finished = true;
				return 1;
			}
			k = kmsg_reader_open(r);
			return k < 0 ? k : 0;
		}
		r->buf_len += (size_t)n;
		split_lines(r, fn, userdata);
	}
	return 0;
}

int kmsg_reader_drain(struct kmsg_reader *r, kmsg_record_fn fn, void *userdata)
{
	if (r->fd < 0)
		return r->finished ? 1 : -EBADF;
	return r->lines ? drain_lines(r, fn, userdata) : drain_device(r, fn, userdata);
}
