/* SPDX-License-Identifier: MIT */
#include "sentinel/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/cleanup.h"

static const char *const check_result_names[CHECK_RESULT_COUNT] = {
	[CHECK_OK] = "ok",
	[CHECK_FAILED] = "failed",
	[CHECK_UNKNOWN] = "unknown",
	[CHECK_RPC_ERROR] = "rpc_error",
	[CHECK_UNSUPPORTED_AGENT] = "unsupported_agent",
	[CHECK_LIST_ERROR] = "list_error",
};

const char *check_result_name(enum check_result r)
{
	if ((unsigned)r >= CHECK_RESULT_COUNT)
		return "invalid";
	return check_result_names[r];
}

enum check_result sentinel_classify(int query_rc, const struct agent_status *status)
{
	if (query_rc == -EOPNOTSUPP)
		return CHECK_UNSUPPORTED_AGENT;
	if (query_rc != 0 || !status)
		return CHECK_RPC_ERROR;
	switch (status->state) {
	case GPU_INIT_OK:
		return CHECK_OK;
	case GPU_INIT_FAILED:
		return CHECK_FAILED;
	case GPU_INIT_UNKNOWN:
		return CHECK_UNKNOWN;
	}
	/* A state this host does not know: the agent spoke, but not sense. */
	return CHECK_RPC_ERROR;
}

/* ---- assignments ------------------------------------------------------------ */

static bool hex_lower(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool sentinel_vf_address_valid(const char *s)
{
	/* 0000:41:00.4 */
	static const char shape[] = "xxxx:xx:xx.d";

	if (!s || strlen(s) != sizeof(shape) - 1)
		return false;
	for (size_t i = 0; shape[i]; i++) {
		switch (shape[i]) {
		case 'x':
			if (!hex_lower(s[i]))
				return false;
			break;
		case 'd':
			if (s[i] < '0' || s[i] > '7')
				return false;
			break;
		default:
			if (s[i] != shape[i])
				return false;
		}
	}
	return true;
}

static int copy_value(char *dst, size_t dst_size, const char *value, size_t len)
{
	if (len >= dst_size)
		return -E2BIG;
	memcpy(dst, value, len);
	dst[len] = '\0';
	return 0;
}

enum assignment_key_bit {
	KEY_CLAIMED_AT = 1 << 0,
	KEY_AGENT = 1 << 1,
	KEY_CONTROL = 1 << 2,
	KEY_PID = 1 << 3,
	KEY_PID_STARTTIME = 1 << 4,
};

static int assignment_apply(struct assignment *a, unsigned *seen, const char *key, size_t key_len,
			    const char *value, size_t value_len)
{
	char number[24];
	uint64_t v;
	unsigned bit;
	int r;

#define KEY_IS(lit) (key_len == sizeof(lit) - 1 && memcmp(key, lit, key_len) == 0)
	if (KEY_IS("claimed_at"))
		bit = KEY_CLAIMED_AT;
	else if (KEY_IS("agent"))
		bit = KEY_AGENT;
	else if (KEY_IS("control"))
		bit = KEY_CONTROL;
	else if (KEY_IS("pid"))
		bit = KEY_PID;
	else if (KEY_IS("pid_starttime"))
		bit = KEY_PID_STARTTIME;
	else
		return 0; /* a key from a newer daemon */
#undef KEY_IS

	if (*seen & bit)
		return -EINVAL;
	*seen |= bit;

	switch (bit) {
	case KEY_CLAIMED_AT: {
		char raw[64];
		if (value_len == 0) {
			a->claimed_at[0] = '\0';
			return 0;
		}
		if (value_len >= sizeof(raw))
			return -EINVAL;
		memcpy(raw, value, value_len);
		raw[value_len] = '\0';
		return rfc3339_normalize(raw, a->claimed_at) < 0 ? -EINVAL : 0;
	}
	case KEY_AGENT:
		return copy_value(a->agent, sizeof(a->agent), value, value_len);
	case KEY_CONTROL:
		r = copy_value(a->control, sizeof(a->control), value, value_len);
		if (r < 0)
			return r;
		if (a->control[0] && a->control[0] != '/')
			return -EINVAL;
		return 0;
	case KEY_PID:
	case KEY_PID_STARTTIME:
		if (value_len == 0)
			return 0;
		if (value_len >= sizeof(number))
			return -EINVAL;
		memcpy(number, value, value_len);
		number[value_len] = '\0';
		r = parse_uint64(number, 1, bit == KEY_PID ? INT32_MAX : UINT64_MAX, &v);
		if (r < 0)
			return -EINVAL;
		if (bit == KEY_PID)
			a->pid = (int64_t)v;
		else
			a->pid_starttime = v;
		return 0;
	}
	return -EINVAL;
}

int assignment_parse(const char *vf, const char *instance_id, const char *text, size_t len,
		     struct assignment *ret)
{
	_cleanup_free_ struct assignment *a = NULL;
	unsigned seen = 0;
	size_t pos = 0;
	int r;

	if (!sentinel_vf_address_valid(vf) || !instance_id_valid(instance_id))
		return -EINVAL;
	if (len > SENTINEL_ASSIGNMENT_MAX)
		return -E2BIG;
	if (memchr(text, '\0', len))
		return -EINVAL;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	memcpy(a->vf, vf, SENTINEL_VF_BUFSZ);
	snprintf(a->instance_id, sizeof(a->instance_id), "%s", instance_id);

	while (pos < len) {
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t line_len = nl ? (size_t)(nl - line) : len - pos;
		const char *eq;

		pos += line_len + (nl ? 1 : 0);
		if (line_len == 0)
			continue;
		eq = memchr(line, '=', line_len);
		if (!eq || eq == line)
			return -EINVAL;
		r = assignment_apply(a, &seen, line, (size_t)(eq - line), eq + 1,
				     line_len - (size_t)(eq - line) - 1);
		if (r < 0)
			return r;
	}

	memcpy(ret, a, sizeof(*a));
	return 0;
}

/* ---- revalidate --------------------------------------------------------------- */

enum revalidate_verdict sentinel_revalidate(const struct assignment *captured, int current_rc,
					    const struct assignment *current)
{
	if (current_rc == -ENOENT)
		return REVALIDATE_REPORT;
	if (current_rc < 0 || !current)
		return REVALIDATE_DROP;
	if (strcmp(captured->vf, current->vf) != 0)
		return REVALIDATE_DROP;
	if (strcmp(captured->instance_id, current->instance_id) != 0)
		return REVALIDATE_DROP;
	if (strcmp(captured->claimed_at, current->claimed_at) != 0)
		return REVALIDATE_DROP;
	return REVALIDATE_REPORT;
}

/* ---- report commands ------------------------------------------------------------ */

static int check_identity(const char *instance_id, const char *claimed_at)
{
	char canonical[RFC3339_BUFSZ];

	if (!instance_id_valid(instance_id))
		return -EINVAL;
	if (claimed_at && *claimed_at && rfc3339_normalize(claimed_at, canonical) < 0)
		return -EINVAL;
	return 0;
}

static const char *claimed_at_or_dash(const char *claimed_at)
{
	return claimed_at && *claimed_at ? claimed_at : "-";
}

/* Copy at most SENTINEL_MESSAGE_MAX bytes of message, made safe for a
 * one-line command; returns the length written to out. */
static size_t sanitize_message(const char *message, char out[static SENTINEL_MESSAGE_MAX + 1])
{
	size_t len = 0, n = 0;

	if (!message)
		message = "";
	while (*message == ' ' || (*message > 0 && *message < 0x20) || *message == 0x7f)
		message++;
	len = strlen(message);
	if (len > SENTINEL_MESSAGE_MAX) {
		len = SENTINEL_MESSAGE_MAX;
		/* Do not leave half a UTF-8 sequence at the end. */
		while (len > 0 && ((unsigned char)message[len] & 0xc0) == 0x80)
			len--;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)message[i];
		out[n++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
	return n;
}

int report_format_failed(char *buf, size_t size, const char *instance_id, const char *claimed_at,
			 const char *message)
{
	char clean[SENTINEL_MESSAGE_MAX + 1];
	size_t clean_len;
	int n, r;

	r = check_identity(instance_id, claimed_at);
	if (r < 0)
		return r;
	clean_len = sanitize_message(message, clean);
	n = snprintf(buf, size, "failed %s %s%s%s", instance_id, claimed_at_or_dash(claimed_at),
		     clean_len ? " " : "", clean);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= size)
		return -ENOBUFS;
	return n;
}

int report_format_ok(char *buf, size_t size, const char *instance_id, const char *claimed_at)
{
	int n, r;

	r = check_identity(instance_id, claimed_at);
	if (r < 0)
		return r;
	n = snprintf(buf, size, "ok %s %s", instance_id, claimed_at_or_dash(claimed_at));
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= size)
		return -ENOBUFS;
	return n;
}

/* Parse "NAME=N" at *p (exactly that name), advancing past it. */
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
	char line[SENTINEL_OUTCOME_MAX];
	const char *p;
	unsigned flag;

	if (len == 0 || len >= sizeof(line) || memchr(text, '\0', len))
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

/* ---- liveness ----------------------------------------------------------------------- */

const char *liveness_name(enum liveness l)
{
	switch (l) {
	case LIVENESS_ALIVE:
		return "alive";
	case LIVENESS_DEAD:
		return "dead";
	case LIVENESS_UNCERTAIN:
		return "uncertain";
	case LIVENESS_UNMANAGED:
		return "unmanaged";
	}
	return "invalid";
}

enum liveness liveness_verdict(const struct liveness_evidence *ev, const char **reason)
{
	const char *why;
	enum liveness l;

	if (!ev->control_given) {
		l = LIVENESS_UNMANAGED;
		why = "no control socket recorded";
	} else if (ev->control_rc == 0) {
		l = LIVENESS_ALIVE;
		why = "control socket exists";
	} else if (ev->control_rc != -ENOENT) {
		l = LIVENESS_UNCERTAIN;
		why = "control socket path cannot be checked";
	} else if (ev->pid <= 0) {
		l = LIVENESS_DEAD;
		why = "control socket gone, no pid recorded";
	} else if (ev->proc_rc == -ENOENT || ev->proc_rc == -ESRCH) {
		l = LIVENESS_DEAD;
		why = "control socket gone, process gone";
	} else if (ev->proc_rc < 0) {
		l = LIVENESS_UNCERTAIN;
		why = "control socket gone, process cannot be checked";
	} else if (ev->starttime_claimed != 0 && ev->starttime_now != ev->starttime_claimed) {
		l = LIVENESS_DEAD;
		why = "control socket gone, pid reused by another process";
	} else {
		l = LIVENESS_ALIVE;
		why = "control socket gone but the process runs";
	}
	if (reason)
		*reason = why;
	return l;
}

int sentinel_control_state(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0)
		return 0;
	if (errno == ENOENT || errno == ENOTDIR)
		return -ENOENT;
	return negative_errno();
}

int proc_stat_parse_starttime(const char *text, size_t len, uint64_t *ret)
{
	char buf[1024];
	const char *close_paren, *p;
	int field;

	/* comm is at most 64 bytes (TASK_COMM_LEN on newer kernels): a stat line
	 * longer than this buffer is not one we understand. */
	if (len == 0 || len >= sizeof(buf) || memchr(text, '\0', len))
		return -EBADMSG;
	memcpy(buf, text, len);
	buf[len] = '\0';
	close_paren = strrchr(buf, ')');
	if (!close_paren || close_paren[1] != ' ')
		return -EBADMSG;
	/* After ") " comes field 3 (state); walk to field 22. */
	p = close_paren + 2;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EBADMSG;
		p++;
	}
	char digits[24];
	size_t n = strspn(p, "0123456789");
	if (n == 0 || n >= sizeof(digits) || (p[n] != ' ' && p[n] != '\n' && p[n] != '\0'))
		return -EBADMSG;
	memcpy(digits, p, n);
	digits[n] = '\0';
	uint64_t v;
	if (parse_uint64(digits, 0, UINT64_MAX, &v) < 0)
		return -EBADMSG;
	*ret = v;
	return 0;
}

int sentinel_proc_starttime(const char *proc_root, int64_t pid, uint64_t *ret)
{
	char path[PATH_MAX], text[1024];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	int len;

	if (pid <= 0)
		return -EINVAL;
	len = snprintf(path, sizeof(path), "%s/%" PRId64 "/stat", proc_root ? proc_root : "/proc", pid);
	if (len < 0 || (size_t)len >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errno == ESRCH ? -ENOENT : negative_errno();
	n = read(fd, text, sizeof(text));
	if (n < 0)
		/* The process exited between open and read. */
		return errno == ESRCH ? -ENOENT : negative_errno();
	return proc_stat_parse_starttime(text, (size_t)n, ret);
}
