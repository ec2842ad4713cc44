/* SPDX-License-Identifier: MIT */
/* report.c - the report command and the outcome line (report.h). */
#include "grammar/report.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "grammar/message.h"
#include "common/cleanup.h"
#include "common/parse.h"

/* ---- the command ------------------------------------------------------------ */

#define CLAIMED_AT_RULE "CLAIMED_AT is an RFC 3339 UTC time (\"2026-01-01T00:00:00Z\") or \"-\""

static int finish(int n, size_t size)
{
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= size)
		return -ENOBUFS;
	return n;
}

static bool blank(char c)
{
	return c == ' ' || (c > 0 && c < 0x20) || c == 0x7f;
}

int report_format_failed(char *buf, size_t size, const char *instance_id, const char *claimed_at,
			 const char *message)
{
	char when[RFC3339_BUFSZ], clean[FAILURE_MESSAGE_MAX + 1];
	size_t clean_len;

	if (!instance_id_valid(instance_id) || rfc3339_normalize_optional(claimed_at, when) < 0)
		return -EINVAL;
	if (!message)
		message = "";
	/* Leading blanks would be kept by the parser but say nothing: skip them
	 * before the cut, so the message keeps FAILURE_MESSAGE_MAX bytes of text. */
	while (blank(*message))
		message++;
	clean_len = message_sanitize(message, clean);
	while (clean_len > 0 && clean[clean_len - 1] == ' ')
		clean[--clean_len] = '\0';
	return finish(snprintf(buf, size, "failed %s %s%s%s", instance_id, when[0] ? when : "-",
			       clean_len ? " " : "", clean),
		      size);
}

int report_format_ok(char *buf, size_t size, const char *instance_id, const char *claimed_at)
{
	char when[RFC3339_BUFSZ];

	if (!instance_id_valid(instance_id) || rfc3339_normalize_optional(claimed_at, when) < 0)
		return -EINVAL;
	return finish(snprintf(buf, size, "ok %s %s", instance_id, when[0] ? when : "-"), size);
}

int report_command_format(char *buf, size_t size, const struct report_command *cmd)
{
	switch (cmd->kind) {
	case REPORT_COMMAND_FAILED:
		return report_format_failed(buf, size, cmd->instance_id, cmd->claimed_at,
					    cmd->message);
	case REPORT_COMMAND_OK:
		return report_format_ok(buf, size, cmd->instance_id, cmd->claimed_at);
	}
	return -EINVAL;
}

/* The next token at *p: non-empty, up to a space or the end.  *p moves past
 * the one space that ended it (so what follows can be a free-text message). */
static int next_token(const char **p, const char **start, size_t *len)
{
	const char *end;

	if (!**p || **p == ' ')
		return -EINVAL;
	*start = *p;
	end = strchr(*p, ' ');
	if (end) {
		*len = (size_t)(end - *p);
		*p = end + 1;
	} else {
		*len = strlen(*p);
		*p += *len;
	}
	return 0;
}

static bool token_is(const char *token, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(token, word, len) == 0;
}

/* -EINVAL, saying in *why (when why is not NULL) which rule was broken. */
static int refuse(const char **why, const char *rule)
{
	if (why)
		*why = rule;
	return -EINVAL;
}

static int parse_command(const char *command, struct report_command *ret, const char **why)
{
	struct report_command c = { .message = "" };
	const char *p = command, *kind, *id, *when;
	size_t kind_len, id_len, when_len;
	char raw[64];

	if (!command || strchr(command, '\n'))
		return refuse(why, "a report is one line");
	if (next_token(&p, &kind, &kind_len) < 0 || next_token(&p, &id, &id_len) < 0 ||
	    next_token(&p, &when, &when_len) < 0)
		return refuse(why, "a report is \"failed ID CLAIMED_AT [MESSAGE]\" or \"ok ID "
				   "CLAIMED_AT\", words separated by single spaces");

	if (token_is(kind, kind_len, "failed"))
		c.kind = REPORT_COMMAND_FAILED;
	else if (token_is(kind, kind_len, "ok"))
		c.kind = REPORT_COMMAND_OK;
	else
		return refuse(why, "a report starts with \"failed\" or \"ok\"");

	if (id_len > INSTANCE_ID_MAX)
		return refuse(why, INSTANCE_ID_RULE);
	memcpy(c.instance_id, id, id_len);
	c.instance_id[id_len] = '\0';
	if (!instance_id_valid(c.instance_id))
		return refuse(why, INSTANCE_ID_RULE);

	if (!token_is(when, when_len, "-")) {
		if (when_len >= sizeof(raw))
			return refuse(why, CLAIMED_AT_RULE);
		memcpy(raw, when, when_len);
		raw[when_len] = '\0';
		if (rfc3339_normalize(raw, c.claimed_at) < 0)
			return refuse(why, CLAIMED_AT_RULE);
	}

	if (c.kind == REPORT_COMMAND_FAILED)
		c.message = p; /* the rest of the line, possibly empty */
	else if (*p)
		return refuse(why, "an ok report has nothing after CLAIMED_AT");
	*ret = c;
	return 0;
}

int report_command_parse(const char *command, struct report_command *ret)
{
	return parse_command(command, ret, NULL);
}

const char *report_command_refusal(const char *command)
{
	struct report_command c;
	const char *why = NULL;

	return parse_command(command, &c, &why) < 0 ? why : NULL;
}

/* ---- the outcome line --------------------------------------------------------- */

static const char *const report_kind_names[] = {
	[REPORT_RECORDED] = "recorded",
	[REPORT_QUARANTINED] = "quarantined",
	[REPORT_UNCHANGED] = "unchanged",
	[REPORT_CLEARED] = "cleared",
};

const char *report_kind_name(enum report_kind kind)
{
	if ((unsigned)kind >= ARRAY_SIZE(report_kind_names))
		return NULL;
	return report_kind_names[kind];
}

int report_outcome_format(char *buf, size_t size, const struct report_outcome *o)
{
	switch (o->kind) {
	case REPORT_RECORDED:
	case REPORT_QUARANTINED:
	case REPORT_UNCHANGED:
		return finish(snprintf(buf, size, "%s failures=%u threshold=%u%s",
				       report_kind_name(o->kind), o->failures, o->threshold,
				       o->breaker_engaged ? " breaker=engaged" : ""),
			      size);
	case REPORT_CLEARED:
		return finish(snprintf(buf, size, "cleared=%u rescinded=%d", o->cleared,
				       o->rescinded ? 1 : 0),
			      size);
	}
	return -EINVAL;
}

/* Parse "NAME=N" at *p (exactly that name, N in [0, max]), advancing past it. */
static int parse_field(const char **p, const char *name, unsigned max, unsigned *ret)
{
	size_t name_len = strlen(name);
	char digits[12];
	size_t n = 0;
	uint64_t v;

	if (strncmp(*p, name, name_len) != 0 || (*p)[name_len] != '=')
		return -EINVAL;
	*p += name_len + 1;
	while ((*p)[n] >= '0' && (*p)[n] <= '9') {
		if (n + 1 >= sizeof(digits))
			return -EINVAL;
		digits[n] = (*p)[n];
		n++;
	}
	digits[n] = '\0';
	if (parse_uint64(digits, 0, max, &v) < 0)
		return -EINVAL;
	*p += n;
	*ret = (unsigned)v;
	return 0;
}

int report_outcome_parse(const char *text, size_t len, struct report_outcome *ret)
{
	struct report_outcome o = { 0 };
	char line[OUTCOME_LINE_BUFSZ];
	const char *p;
	unsigned flag;

	if (len == 0 || len > OUTCOME_LINE_MAX || memchr(text, '\0', len))
		return -EINVAL;
	memcpy(line, text, len);
	line[len] = '\0';
	if (line[len - 1] == '\n')
		line[len - 1] = '\0';
	p = line;

	if (strncmp(p, "cleared=", 8) == 0) {
		o.kind = REPORT_CLEARED;
		if (parse_field(&p, "cleared", UINT32_MAX, &o.cleared) < 0 || *p++ != ' ' ||
		    parse_field(&p, "rescinded", 1, &flag) < 0 || *p)
			return -EINVAL;
		o.rescinded = flag;
		*ret = o;
		return 0;
	}

	if (strncmp(p, "recorded ", 9) == 0) {
		o.kind = REPORT_RECORDED;
		p += 9;
	} else if (strncmp(p, "quarantined ", 12) == 0) {
		o.kind = REPORT_QUARANTINED;
		p += 12;
	} else if (strncmp(p, "unchanged ", 10) == 0) {
		o.kind = REPORT_UNCHANGED;
		p += 10;
	} else {
		return -EINVAL;
	}
	if (parse_field(&p, "failures", UINT32_MAX, &o.failures) < 0 || *p++ != ' ' ||
	    parse_field(&p, "threshold", UINT32_MAX, &o.threshold) < 0)
		return -EINVAL;
	if (strcmp(p, " breaker=engaged") == 0)
		o.breaker_engaged = true;
	else if (*p)
		return -EINVAL;
	*ret = o;
	return 0;
}
