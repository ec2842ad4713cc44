/* SPDX-License-Identifier: MIT */
/* assignment.c - the assignment file: one key table, render and parse; and
 * the lines of the claims listing that names them (assignment.h). */
#include "grammar/assignment.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "grammar/vf.h"
#include "common/endpoint.h"
#include "common/parse.h"
#include "common/procfs.h"

/* The key table: the order is the rendered order; command keys follow. */
static const struct {
	const char *name;
	bool writable; /* writers may set it (the daemon records the others) */
} keys[ASSIGNMENT_COMMAND_END] = {
	[ASSIGNMENT_CLAIMED_AT] = { "claimed_at", true },
	[ASSIGNMENT_AGENT] = { "agent", true },
	[ASSIGNMENT_CONTROL] = { "control", true },
	[ASSIGNMENT_PID] = { "pid", true },
	[ASSIGNMENT_PID_STARTTIME] = { "pid_starttime", false },
	[ASSIGNMENT_BOOT_ID] = { "boot_id", false },
	[ASSIGNMENT_RELEASE] = { "release", true },
	[ASSIGNMENT_ENDED] = { "ended", true },
	[ASSIGNMENT_DIED_AT] = { "died_at", true },
};

const char *assignment_key_name(enum assignment_key key)
{
	if ((unsigned)key >= ASSIGNMENT_COMMAND_END)
		return NULL;
	return keys[key].name;
}

int assignment_render(const struct assignment *a, FILE *out)
{
	for (int k = 0; k < ASSIGNMENT_KEY_COUNT; k++) {
		fprintf(out, "%s=", keys[k].name);
		switch ((enum assignment_key)k) {
		case ASSIGNMENT_CLAIMED_AT:
			fputs(a->claimed_at, out);
			break;
		case ASSIGNMENT_AGENT:
			fputs(a->agent, out);
			break;
		case ASSIGNMENT_CONTROL:
			fputs(a->control, out);
			break;
		case ASSIGNMENT_PID:
			if (a->pid > 0)
				fprintf(out, "%" PRId64, a->pid);
			break;
		case ASSIGNMENT_PID_STARTTIME:
			if (a->pid_starttime > 0)
				fprintf(out, "%" PRIu64, a->pid_starttime);
			break;
		case ASSIGNMENT_BOOT_ID:
			fputs(a->boot_id, out);
			break;
		default: /* command keys are never rendered */
			break;
		}
		fputc('\n', out);
	}
	return ferror(out) ? -EIO : 0;
}

/* ---- parsing ---------------------------------------------------------------- */

#define CONTROL_RULE                                          \
	"control= is an absolute path of at most " PARSE_STR( \
		CONTROL_PATH_MAX) " bytes without control characters"
#define PID_STARTTIME_RULE "pid_starttime= is recorded by vfhealthd: a writer may only repeat it"
#define BOOT_ID_RULE "boot_id= is recorded by vfhealthd: a writer may only repeat it"

struct parse_ctx {
	bool writer;                        /* a writer's command, not a rendered file */
	const struct assignment *current;   /* writer: the claim as it is */
	bool may_set_claimed_at;            /* writer */
	bool scan;                          /* only note which keys are named */
	struct assignment_release *release; /* a release command: where it goes */
	const char **why;                   /* writer: NULL, or where to say which rule broke */
};

/* err, saying in *ctx->why (when asked) which rule was broken. */
static int refuse(const struct parse_ctx *ctx, int err, const char *rule)
{
	if (ctx->why)
		*ctx->why = rule;
	return err;
}

#define CLAIMED_AT_RULE "claimed_at= is an RFC 3339 UTC time (\"2026-01-01T00:00:00Z\")"

/* value[0..len) as a NUL-terminated string in buf[size], or -EINVAL. */
static int terminate(char *buf, size_t size, const char *value, size_t len)
{
	if (len >= size)
		return -EINVAL;
	memcpy(buf, value, len);
	buf[len] = '\0';
	return 0;
}

static int parse_number(const char *value, size_t len, uint64_t max, uint64_t *ret)
{
	char digits[24];

	if (terminate(digits, sizeof(digits), value, len) < 0 ||
	    parse_uint64(digits, 1, max, ret) < 0)
		return -EINVAL;
	return 0;
}

static int apply(const struct parse_ctx *ctx, struct assignment *a, enum assignment_key key,
		 const char *value, size_t len)
{
	char raw[AGENT_ENDPOINT_MAX + 1], canonical[RFC3339_BUFSZ];
	uint64_t v = 0;

	switch (key) {
	case ASSIGNMENT_CLAIMED_AT:
		if (len == 0 && !ctx->writer) {
			a->claimed_at[0] = '\0';
			return 0;
		}
		if (terminate(raw, sizeof(raw), value, len) < 0 ||
		    rfc3339_normalize(raw, a->claimed_at) < 0)
			return refuse(ctx, -EINVAL, CLAIMED_AT_RULE);
		/* The assignment identity is fixed after the first write. */
		if (ctx->writer && !ctx->may_set_claimed_at &&
		    strcmp(a->claimed_at, ctx->current->claimed_at) != 0)
			return refuse(ctx, -EINVAL,
				      "claimed_at= is set only by the first write through the "
				      "handle that created the claim");
		return 0;
	case ASSIGNMENT_AGENT: {
		struct endpoint ep;

		if (len > AGENT_ENDPOINT_MAX)
			return refuse(ctx, -E2BIG,
				      "agent= is at most " PARSE_STR(AGENT_ENDPOINT_MAX) " bytes");
		memcpy(raw, value, len);
		raw[len] = '\0';
		if (!ctx->writer || len == 0) {
			memcpy(a->agent, raw, len + 1);
			return 0;
		}
		/* Stored canonical (port spelled out), so readers need no defaults. */
		if (endpoint_parse(raw, &ep) < 0 ||
		    endpoint_format(&ep, a->agent, sizeof(a->agent)) < 0)
			return refuse(ctx, -EINVAL,
				      "agent= is an endpoint: vsock:CID[:PORT], hvsock:PATH[:PORT] "
				      "or unix:PATH");
		return 0;
	}
	case ASSIGNMENT_CONTROL:
		if (len > 0 && value[0] != '/')
			return refuse(ctx, -EINVAL, CONTROL_RULE);
		if (len > CONTROL_PATH_MAX)
			return refuse(ctx, -E2BIG, CONTROL_RULE);
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
				return refuse(ctx, -EINVAL, CONTROL_RULE);
		memcpy(a->control, value, len);
		a->control[len] = '\0';
		return 0;
	case ASSIGNMENT_PID:
		if (len > 0 && parse_number(value, len, PID_VALUE_MAX, &v) < 0)
			return refuse(ctx, -EINVAL,
				      "pid= is an integer 1.." PARSE_STR(PID_VALUE_MAX));
		a->pid = (int64_t)v;
		return 0;
	case ASSIGNMENT_PID_STARTTIME:
		if (len > 0 && parse_number(value, len, UINT64_MAX, &v) < 0)
			return refuse(ctx, -EINVAL, PID_STARTTIME_RULE);
		if (ctx->writer && !keys[key].writable) /* the recorded value, written back */
			return v == ctx->current->pid_starttime ?
				       0 :
				       refuse(ctx, -EINVAL, PID_STARTTIME_RULE);
		a->pid_starttime = v;
		return 0;
	case ASSIGNMENT_BOOT_ID:
		if (len > 0 &&
		    (terminate(raw, sizeof(raw), value, len) < 0 || !proc_boot_id_valid(raw)))
			return refuse(ctx, -EINVAL, BOOT_ID_RULE);
		if (ctx->writer && !keys[key].writable) /* the recorded value, written back */
			return len == strlen(ctx->current->boot_id) &&
					       memcmp(value, ctx->current->boot_id, len) == 0 ?
				       0 :
				       refuse(ctx, -EINVAL, BOOT_ID_RULE);
		memcpy(a->boot_id, value, len);
		a->boot_id[len] = '\0';
		return 0;
	case ASSIGNMENT_RELEASE:
		if (!ctx->writer)
			return 0; /* never in a file: ignored like an unknown key */
		/* only alone, through assignment_parse_release() */
		if (terminate(raw, sizeof(raw), value, len) < 0 ||
		    rfc3339_normalize(raw, canonical) < 0)
			return refuse(ctx, -EINVAL,
				      "release= is an RFC 3339 UTC time (the claim's claimed_at)");
		if (!ctx->release)
			return refuse(ctx, -EINVAL, "release= is written alone");
		memcpy(ctx->release->claimed_at, canonical, sizeof(canonical));
		return 0;
	case ASSIGNMENT_ENDED:
		if (!ctx->writer)
			return 0;
		if (!ctx->release || len != strlen("crash") || memcmp(value, "crash", len) != 0)
			return refuse(ctx, -EINVAL, "ended=crash is written with release= alone");
		ctx->release->crashed = true;
		return 0;
	case ASSIGNMENT_DIED_AT:
		if (!ctx->writer)
			return 0;
		if (!ctx->release || terminate(raw, sizeof(raw), value, len) < 0 ||
		    rfc3339_normalize(raw, canonical) < 0)
			return refuse(ctx, -EINVAL,
				      "died_at= is an RFC 3339 UTC time, written with ended=crash");
		memcpy(ctx->release->died_at, canonical, sizeof(canonical));
		return 0;
	case ASSIGNMENT_COMMAND_END:
		break;
	}
	return -EINVAL;
}

static int find_key(const char *key, size_t len)
{
	for (int k = 0; k < ASSIGNMENT_COMMAND_END; k++)
		if (strlen(keys[k].name) == len && memcmp(keys[k].name, key, len) == 0)
			return k;
	return -1;
}

static int parse_lines(const struct parse_ctx *ctx, struct assignment *a, const char *text,
		       size_t len, unsigned *seen)
{
	size_t pos = 0;

	*seen = 0;
	while (pos < len) {
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t line_len = nl ? (size_t)(nl - line) : len - pos;
		const char *eq;
		int key, r;

		pos += line_len + (nl ? 1 : 0);
		if (line_len == 0)
			continue;
		eq = memchr(line, '=', line_len);
		if (!eq || eq == line)
			return refuse(ctx, -EINVAL, "each line is key=value");
		key = find_key(line, (size_t)(eq - line));
		if (key < 0) {
			if (ctx->writer)
				return refuse(ctx, -EINVAL,
					      "the keys are claimed_at, agent, control, pid, "
					      "pid_starttime and boot_id, or release (with ended "
					      "and died_at) alone");
			continue; /* a key from a newer daemon */
		}
		if (*seen & (1u << key))
			return refuse(ctx, -EINVAL, "each key appears once");
		*seen |= 1u << key;
		if (ctx->scan)
			continue;
		r = apply(ctx, a, (enum assignment_key)key, eq + 1,
			  line_len - (size_t)(eq - line) - 1);
		if (r < 0)
			return r;
	}
	return 0;
}

int assignment_parse(const char *vf, const char *instance_id, const char *text, size_t len,
		     struct assignment *ret)
{
	const struct parse_ctx ctx = { .writer = false };
	struct assignment a = { 0 };
	unsigned seen;
	int r;

	if (!vf_address_valid(vf) || !instance_id_valid(instance_id))
		return -EINVAL;
	if (len > ASSIGNMENT_FILE_MAX)
		return -E2BIG;
	if (memchr(text, '\0', len))
		return -EINVAL;
	memcpy(a.vf, vf, VF_ADDR_BUFSZ);
	memcpy(a.instance_id, instance_id, strlen(instance_id) + 1);
	r = parse_lines(&ctx, &a, text, len, &seen);
	if (r < 0)
		return r;
	*ret = a;
	return 0;
}

int assignment_parse_release(const char *command, struct assignment_release *ret)
{
	const unsigned release = 1u << ASSIGNMENT_RELEASE, ended = 1u << ASSIGNMENT_ENDED,
		       died_at = 1u << ASSIGNMENT_DIED_AT;
	struct parse_ctx ctx = { .writer = true, .scan = true };
	struct assignment scratch = { 0 };
	struct assignment_release r = { 0 };
	unsigned seen;

	/* first which keys it names (no value is looked at), then the values */
	if (parse_lines(&ctx, &scratch, command, strlen(command), &seen) < 0)
		return -EINVAL;
	if (!(seen & (release | ended | died_at)))
		return 0;
	if (seen != release && seen != (release | ended) && seen != (release | ended | died_at))
		return -EINVAL; /* command keys alone; ended= with its release, died_at= with both */
	ctx.scan = false;
	ctx.release = &r;
	if (parse_lines(&ctx, &scratch, command, strlen(command), &seen) < 0)
		return -EINVAL;
	*ret = r;
	return 1;
}

static int parse_update(const struct assignment *current, const char *command,
			bool may_set_claimed_at, struct assignment *ret, unsigned *keys_written,
			const char **why)
{
	const struct parse_ctx ctx = {
		.writer = true,
		.current = current,
		.may_set_claimed_at = may_set_claimed_at,
		.why = why,
	};
	struct assignment a = *current;
	unsigned seen;
	int r;

	r = parse_lines(&ctx, &a, command, strlen(command), &seen);
	if (r < 0)
		return -EINVAL; /* the file interface's answer to any bad write */
	if (seen & (1u << ASSIGNMENT_PID))
		a.pid_starttime = 0; /* the caller records the new process's */
	*ret = a;
	if (keys_written)
		*keys_written = seen;
	return 0;
}

int assignment_parse_update(const struct assignment *current, const char *command,
			    bool may_set_claimed_at, struct assignment *ret, unsigned *keys_written)
{
	return parse_update(current, command, may_set_claimed_at, ret, keys_written, NULL);
}

const char *assignment_update_refusal(const struct assignment *current, const char *command,
				      bool may_set_claimed_at)
{
	struct assignment a;
	const char *why = NULL;

	return parse_update(current, command, may_set_claimed_at, &a, NULL, &why) < 0 ? why : NULL;
}

/* -- the claims listing ---------------------------------------------------------- */

int claims_line_render(const char *vf, const char *instance_id, FILE *out)
{
	return fprintf(out, "%s %s\n", vf, instance_id) < 0 ? -EIO : 0;
}

int claims_line_parse(const char *line, size_t len, char vf[VF_ADDR_BUFSZ],
		      char instance_id[INSTANCE_ID_MAX + 1])
{
	size_t id_len = len - VF_ADDR_LEN - 1;

	if (len < VF_ADDR_LEN + 2 || line[VF_ADDR_LEN] != ' ' || id_len > INSTANCE_ID_MAX)
		return -EINVAL;
	memcpy(vf, line, VF_ADDR_LEN);
	vf[VF_ADDR_LEN] = '\0';
	memcpy(instance_id, line + VF_ADDR_LEN + 1, id_len);
	instance_id[id_len] = '\0';
	/* A NUL inside the line would end either string early: lengths must hold. */
	if (!vf_address_valid(vf) || strlen(instance_id) != id_len ||
	    !instance_id_valid(instance_id))
		return -EINVAL;
	return 0;
}
