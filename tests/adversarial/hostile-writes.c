/* SPDX-License-Identifier: MIT */
/*
 * hostile-writes.c - thousands of random, boundary and mutated inputs to
 * every writable file of a mounted vfhealth file system (vfhealth(5)), each
 * judged against an oracle written from the documented interface:
 *
 *   threshold        digits, 1..1000                       else EINVAL
 *   max_quarantined  digits, 0..65536                      else EINVAL
 *                    (every number: canonical, no sign, no leading zero)
 *   status           "repair"                              else EINVAL
 *   VF/quarantined   "1" or "0"                            else EINVAL
 *   VF/report        "failed ID AT [MSG]" | "ok ID AT"     else EINVAL
 *                    (ID an instance id, AT RFC 3339 or "-", one line)
 *   VF/assignments/ID  key=value lines: claimed_at (fixed after the first
 *                    write), agent (an endpoint without control
 *                    characters), control (an absolute
 *                    path without control characters, < 108 bytes),
 *                    pid (1..4194304), each at most once    else EINVAL;
 *                    then a socket path the write changes (control=,
 *                    agent=unix:/hvsock:) lies in SOCKET_DIR: normalized,
 *                    below it, not through SOCKET_DIR/link (a symlink
 *                    this program plants, to a directory outside)  else EACCES
 *   mkdir NAME       a VF address                          else EINVAL
 *   create assignments/NAME   an instance id               else EINVAL
 *
 * One trailing newline is ignored; a write is one command: more than 4096
 * bytes, or a NUL byte, is EINVAL.  Every rejected write must leave every
 * readable file exactly as it was; every accepted one must show its effect;
 * any other errno (EIO, ENOTCONN: the daemon died) fails the test.
 *
 *   hostile-writes MOUNT ITERATIONS SEED SOCKET_DIR
 *
 * SOCKET_DIR is the daemon's only --socket-dir.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/endpoint.h"
#include "common/parse.h"

#define COMMAND_MAX 4096
#define SNAP_MAX (1 << 20)

static const char *mnt;
static const char *const vfs[] = { "0000:61:00.1", "0000:61:00.2", "0000:61:00.3" };
#define N_VFS 3
#define CLAIMED_VF 2 /* vfs[2] holds the claim "vm-3" */
static char claimed_at[RFC3339_BUFSZ];
static const char *sockroot; /* the daemon's --socket-dir */
static unsigned long n_ok, n_rejected, n_checked, n_denied;

enum target {
	T_THRESHOLD,
	T_MAXQ,
	T_STATUS,
	T_VFQ,
	T_REPORT,
	T_CLAIM,
	T_MKDIR,
	T_CREATE,
	T_COUNT
};
static const char *const target_names[T_COUNT] = {
	"threshold", "max_quarantined",     "status", "VF/quarantined",
	"VF/report", "VF/assignments/vm-3", "mkdir",  "create",
};
static unsigned long per_target[T_COUNT][2];

static __attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ---- reading the state ------------------------------------------------------- */

static size_t read_into(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t have = 0;

	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	for (;;) {
		ssize_t n = read(fd, buf + have, size - 1 - have);
		if (n < 0)
			die("read %s: %s", path, strerror(errno));
		if (n == 0)
			break;
		have += (size_t)n;
		if (have == size - 1)
			die("%s: larger than the test expects", path);
	}
	buf[have] = '\0';
	return have;
}

/* Everything a reader can see (placement reads included), as one string. */
static char *snapshot(void)
{
	static const char *const top[] = { "threshold", "max_quarantined", "quarantined", "status",
					   "claims" };
	static const char *const per_vf[] = { "tally", "quarantined", "failures" };
	char *out = malloc(SNAP_MAX), path[512];
	size_t len = 0;

	if (!out)
		die("out of memory");
	for (size_t i = 0; i < ARRAY_SIZE(top); i++) {
		snprintf(path, sizeof(path), "%s/%s", mnt, top[i]);
		len += (size_t)snprintf(out + len, SNAP_MAX - len, "== %s\n", top[i]);
		len += read_into(path, out + len, SNAP_MAX - len);
	}
	for (int v = 0; v < N_VFS; v++)
		for (size_t i = 0; i < ARRAY_SIZE(per_vf); i++) {
			snprintf(path, sizeof(path), "%s/%s/%s", mnt, vfs[v], per_vf[i]);
			len += (size_t)snprintf(out + len, SNAP_MAX - len, "== %s/%s\n", vfs[v],
						per_vf[i]);
			len += read_into(path, out + len, SNAP_MAX - len);
		}
	snprintf(path, sizeof(path), "%s/%s/assignments/vm-3", mnt, vfs[CLAIMED_VF]);
	len += (size_t)snprintf(out + len, SNAP_MAX - len, "== claim\n");
	len += read_into(path, out + len, SNAP_MAX - len);
	/* The VF directories themselves (a rejected mkdir must not add one). */
	struct stat st;
	for (int v = 0; v < N_VFS; v++) {
		snprintf(path, sizeof(path), "%s/%s", mnt, vfs[v]);
		if (stat(path, &st) < 0)
			die("stat %s: %s", path, strerror(errno));
	}
	return out;
}

static void read_value(const char *rel, char *buf, size_t size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	read_into(path, buf, size);
	buf[strcspn(buf, "\n")] = '\0';
}

/* ---- the oracle ------------------------------------------------------------------ */

/* The command as the daemon sees it: NULL when the write itself is invalid
 * (too long, a NUL byte, empty). */
static char *command_of(const char *buf, size_t len)
{
	char *c;

	if (len == 0 || len > COMMAND_MAX || memchr(buf, '\0', len))
		return NULL;
	c = malloc(len + 1);
	if (!c)
		die("out of memory");
	memcpy(c, buf, len);
	c[len] = '\0';
	if (c[len - 1] == '\n')
		c[len - 1] = '\0';
	return c;
}

/* The oracle's own rule, not the parser's: one spelling per number. */
static bool number_in(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	if (s[0] == '0' && s[1])
		return false; /* a leading zero */
	return parse_uint64(s, lo, hi, v) == 0;
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* "failed ID AT [MSG]" or "ok ID AT". */
static bool report_valid(const char *cmd)
{
	char norm[RFC3339_BUFSZ];
	const char *p = cmd, *tok[3];
	size_t tlen[3];

	if (strchr(cmd, '\n'))
		return false;
	for (int i = 0; i < 3; i++) {
		const char *sp = strchr(p, ' ');
		tok[i] = p;
		tlen[i] = sp ? (size_t)(sp - p) : strlen(p);
		if (tlen[i] == 0)
			return false;
		if (i < 2 && !sp)
			return false;
		p = sp ? sp + 1 : p + tlen[i];
		if (i == 2 && !sp)
			p = tok[2] + tlen[2];
	}
	char id[256], at[256];
	if (tlen[1] >= sizeof(id) || tlen[2] >= sizeof(at))
		return false;
	memcpy(id, tok[1], tlen[1]);
	id[tlen[1]] = '\0';
	memcpy(at, tok[2], tlen[2]);
	at[tlen[2]] = '\0';
	if (!instance_id_valid(id))
		return false;
	if (strcmp(at, "-") != 0 && rfc3339_normalize(at, norm) < 0)
		return false;
	bool has_rest = tok[2][tlen[2]] == ' ';
	if (tlen[0] == 6 && strncmp(tok[0], "failed", 6) == 0)
		return true;
	if (tlen[0] == 2 && strncmp(tok[0], "ok", 2) == 0)
		return !has_rest;
	return false;
}

struct claim_update {
	bool agent_set, control_set, pid_set;
	char agent[ENDPOINT_STRING_MAX + 64];
	char agent_path[ENDPOINT_STRING_MAX + 64]; /* unix: and hvsock:, else "" */
	char control[4200];
	uint64_t pid;
};

static bool claim_valid(const char *cmd, struct claim_update *u)
{
	_cleanup_free_ char *copy = strdup(cmd);
	char *line, *save = NULL;
	unsigned seen = 0;

	memset(u, 0, sizeof(*u));
	if (!copy)
		die("out of memory");
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		const char *v;
		int key;

		if (!eq)
			return false;
		*eq = '\0';
		v = eq + 1;
		if (strcmp(line, "claimed_at") == 0)
			key = 0;
		else if (strcmp(line, "agent") == 0)
			key = 1;
		else if (strcmp(line, "control") == 0)
			key = 2;
		else if (strcmp(line, "pid") == 0)
			key = 3;
		else
			return false;
		if (seen & (1u << key))
			return false;
		seen |= 1u << key;
		switch (key) {
		case 0: {
			char norm[RFC3339_BUFSZ];
			if (rfc3339_normalize(v, norm) < 0 || strcmp(norm, claimed_at) != 0)
				return false; /* fixed after the first write */
			break;
		}
		case 1: {
			struct endpoint ep;
			if (*v && (strlen(v) >= ENDPOINT_STRING_MAX || has_control(v) ||
				   endpoint_parse(v, &ep) < 0))
				return false;
			u->agent_set = true;
			if (*v)
				endpoint_format(&ep, u->agent, sizeof(u->agent));
			if (*v && ep.kind != ENDPOINT_VSOCK)
				snprintf(u->agent_path, sizeof(u->agent_path), "%s", ep.path);
			break;
		}
		case 2:
			if (*v && (v[0] != '/' || strlen(v) > 107))
				return false;
			for (const char *q = v; *q; q++)
				if ((unsigned char)*q < 0x20 || *q == 0x7f)
					return false;
			u->control_set = true;
			snprintf(u->control, sizeof(u->control), "%s", v);
			break;
		case 3:
			if (*v && !number_in(v, 1, 4194304, &u->pid))
				return false;
			u->pid_set = true;
			break;
		}
	}
	return true;
}

/* The confinement rule, as vfhealth(5) says it: below sockroot, every
 * component non-empty and neither "." nor "..", and not through
 * sockroot/link (the one symlink there). */
static bool path_confined(const char *p)
{
	size_t n = strlen(sockroot);
	const char *c;

	if (strncmp(p, sockroot, n) != 0 || p[n] != '/')
		return false;
	c = p + n + 1;
	if (strncmp(c, "link", 4) == 0 && (c[4] == '/' || c[4] == '\0'))
		return false;
	for (;;) {
		size_t len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[len])
			return true;
		c += len + 1;
	}
}

/* The stored value of KEY in the claim vm-3 ("" when unset). */
static void claim_value(const char *key, char *buf, size_t size)
{
	char path[512], content[8192], want[32];
	const char *line;

	snprintf(path, sizeof(path), "%s/%s/assignments/vm-3", mnt, vfs[CLAIMED_VF]);
	read_into(path, content, sizeof(content));
	snprintf(want, sizeof(want), "\n%s=", key);
	line = strstr(content, want);
	if (!line)
		die("claim without %s=:\n%s", key, content);
	line += strlen(want);
	snprintf(buf, size, "%.*s", (int)strcspn(line, "\n"), line);
}

/* Whether a valid claim update u must get EACCES: it changes a socket path
 * to one outside the socket directory. */
static bool claim_denied(const struct claim_update *u)
{
	char current[4300];

	if (u->control_set && u->control[0]) {
		claim_value("control", current, sizeof(current));
		if (strcmp(current, u->control) != 0 && !path_confined(u->control))
			return true;
	}
	if (u->agent_set && u->agent_path[0]) {
		claim_value("agent", current, sizeof(current));
		if (strcmp(current, u->agent) != 0 && !path_confined(u->agent_path))
			return true;
	}
	return false;
}

static bool vf_address_valid(const char *s)
{
	static const char shape[] = "xxxx:xx:xx.d";

	if (strlen(s) != strlen(shape))
		return false;
	for (size_t i = 0; shape[i]; i++) {
		char c = s[i];
		if (shape[i] == 'x' && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		if (shape[i] == 'd' && !(c >= '0' && c <= '7'))
			return false;
		if ((shape[i] == ':' || shape[i] == '.') && c != shape[i])
			return false;
	}
	return true;
}

/* ---- inputs ----------------------------------------------------------------------- */

static const char *const boundaries[] = {
	"",
	"\n",
	"\n\n",
	" ",
	"0",
	"1",
	"2",
	"999",
	"1000",
	"1001",
	"65536",
	"65537",
	"-1",
	"+1",
	" 1",
	"1 ",
	"01",
	"0x10",
	"1e3",
	"4294967296",
	"18446744073709551616",
	"1\n\n",
	"1\r\n",
	"repair",
	"repair\n",
	"repair ",
	"REPAIR",
	"repair\nrepair",
	"0\n",
	"1\n",
	"2",
	"failed",
	"failed ",
	"failed vm-1",
	"failed vm-1 -",
	"failed vm-1 - ",
	"failed  vm-1 -",
	"failed vm-1 -\n",
	"failed .vm -",
	"failed vm/1 -",
	"failed vm-1 2026-13-01T00:00:00Z",
	"failed vm-1 2026-02-29T00:00:00Z x",
	"failed vm-1 2024-02-29T00:00:00.123456789Z msg",
	"failed vm-1 2024-02-29T00:00:00.1234567890Z",
	"ok vm-1 -",
	"ok vm-1 - x",
	"ok vm-1",
	"ok vm-1 -\n",
	"OK vm-1 -",
	"failed vm-1 - a\nb",
	"failed vm-1 - \x01\x02\x7f",
	"agent=",
	"agent=unix:/x",
	"agent=unix:relative",
	"agent=vsock:3",
	"agent=vsock:any",
	"agent=hvsock:/run/vm.sock:77",
	"agent=tcp:1.2.3.4",
	"control=",
	"control=/run/c.sock",
	"control=relative",
	"control=/a\tb",
	"pid=",
	"pid=1",
	"pid=0",
	"pid=4194304",
	"pid=4194305",
	"pid=-1",
	"agent=unix:/x\nagent=unix:/y",
	"AGENT=unix:/x",
	"agent",
	"=",
	"==",
	"claimed_at=2020-01-01T00:00:00Z",
	"unknown=1",
	"agent=unix:/x\n\ncontrol=/c\n",
	"0000:61:00.1",
	"0000:61:00.8",
	"0000:61:0g.1",
	"0000:61:00.10",
	"0000:61:00",
	"0000:61:00.1 ",
	"0000:6A:00.1",
	"ffff:ff:ff.7",
	"vm-1",
	".vm",
	"a",
	"-",
	"_",
	/* strict values: leading zeros, control characters in agent= */
	"03",
	"00",
	"0001000",
	"pid=01",
	"pid=007",
	"agent=vsock:03",
	"agent=vsock:3:02222",
	"agent=unix:/run/a\x1b[31mb",
	"agent=unix:/run/a\rb",
	"agent=unix:/run/a\ab",
	"agent=hvsock:/run/a\x7f:2222",
	"control=/run/a\033b",
	"failed vm-1 - \x1b[31mred\a\r",
};

/* Claim values at the socket directory's edges ('@' is SOCKET_DIR). */
static const char *const root_boundary_forms[] = {
	"agent=unix:@/a.sock",
	"agent=hvsock:@/vm.sock:77",
	"control=@/c.sock",
	"control=@/vm-1/c.sock",
	"control=@/../etc/shadow",
	"control=@/./c",
	"control=@//c",
	"control=@/",
	"control=@",
	"control=@x/c.sock",
	"agent=unix:@/link/x.sock",
	"control=@/link",
	"control=@/link/c",
	"agent=hvsock:@/link/vm.sock:2222",
	"agent=unix:@/a/../../x.sock",
	"agent=unix:@/a.sock\ncontrol=@/link/c",
	"agent=vsock:3\ncontrol=@/ok.sock",
	"control=@/vm-1/../../root-only/x.sock",
};
static char *root_boundaries[ARRAY_SIZE(root_boundary_forms)];
static char claim_template[512];

/* form with every '@' replaced by sockroot (malloc'd). */
static char *expand(const char *form)
{
	char *out = malloc(strlen(form) * (strlen(sockroot) + 1) + 1), *o = out;

	if (!out)
		die("out of memory");
	for (const char *f = form; *f; f++) {
		if (*f == '@') {
			memcpy(o, sockroot, strlen(sockroot));
			o += strlen(sockroot);
		} else {
			*o++ = *f;
		}
	}
	*o = '\0';
	return out;
}

static const char *valid_template(enum target t)
{
	switch (t) {
	case T_THRESHOLD:
		return "1000";
	case T_MAXQ:
		return "0";
	case T_STATUS:
		return "repair";
	case T_VFQ:
		return "1";
	case T_REPORT:
		return "failed vm-9 2026-11-29T07:44:51.123456789Z NVRM: RmInitAdapter failed!";
	case T_CLAIM:
		return claim_template;
	case T_MKDIR:
		return "0000:62:00.1";
	case T_CREATE:
		return "vm-new-1";
	default:
		return "";
	}
}

static size_t make_input(enum target t, char *buf, size_t size)
{
	int how = (int)(random() % 10);
	size_t len = 0;

	if (how < 3) { /* random bytes, sometimes long */
		len = (random() % 8 == 0) ? (size_t)(random() % 6000) : (size_t)(random() % 40);
		if (len > 4000 && len < 4200)
			len = 4300; /* stay off the exact limit: its side is asserted below */
		const char *alphabet = "0123456789 -:.=\nabcdefghijklmnopqrstuvwxyz/_";
		for (size_t i = 0; i < len && i < size; i++)
			buf[i] = random() % 4 ? alphabet[random() % strlen(alphabet)] :
						(char)(random() % 256);
	} else if (how < 6) { /* a boundary value */
		const char *b = random() % 4 ?
					boundaries[random() % ARRAY_SIZE(boundaries)] :
					root_boundaries[random() % ARRAY_SIZE(root_boundaries)];
		len = strlen(b);
		memcpy(buf, b, len);
	} else { /* a valid command, mutated */
		const char *v = valid_template(t);
		len = strlen(v);
		memcpy(buf, v, len);
		for (int m = 0, n = 1 + (int)(random() % 3); m < n && len > 0; m++) {
			size_t at = (size_t)random() % len;
			switch (random() % 6) {
			case 0:
				buf[at] = (char)(random() % 256);
				break;
			case 1:
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			case 2:
				if (len + 1 < size) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = (char)(random() % 128);
					len++;
				}
				break;
			case 3:
				buf[at] = random() % 2 ? '\n' : '\0';
				break;
			case 4:
				len = at;
				break;
			case 5:
				if (len + 5000 < size && random() % 4 == 0) {
					memset(buf + len, 'x', 4200);
					len += 4200;
				}
				break;
			}
		}
		if (random() % 3 == 0 && len + 1 < size)
			buf[len++] = '\n';
	}
	return len;
}

/* ---- one attempt ------------------------------------------------------------------- */

/* One write(2) through a fresh open, then its close(2), whose error counts
 * too: a claim is committed at the close (vfhealth(5)). */
static int do_write(const char *path, const char *buf, size_t len, bool rdwr)
{
	int fd = open(path, (rdwr ? O_RDWR : O_WRONLY) | O_CLOEXEC);
	ssize_t n;
	int r = 0;

	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	n = write(fd, buf, len);
	if (n < 0)
		r = -errno;
	else if ((size_t)n != len)
		die("%s: short write %zd of %zu", path, n, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

/* Whether the claim vm-3 after u names agent= without pid= or control=:
 * refused as a whole. */
static bool claim_unwatchable(const struct claim_update *u)
{
	char agent[4300], control[4300], pid[32];

	claim_value("agent", agent, sizeof(agent));
	claim_value("control", control, sizeof(control));
	claim_value("pid", pid, sizeof(pid));
	if (u->agent_set)
		snprintf(agent, sizeof(agent), "%s", u->agent);
	if (u->control_set)
		snprintf(control, sizeof(control), "%s", u->control);
	if (u->pid_set)
		snprintf(pid, sizeof(pid), "%s", u->pid ? "1" : "");
	return agent[0] && !control[0] && !pid[0];
}

static void show(const char *buf, size_t len, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 5 < size && i < 80; i++) {
		unsigned char c = (unsigned char)buf[i];
		o += (size_t)snprintf(out + o, size - o,
				      c >= 0x20 && c < 0x7f && c != '\\' ? "%c" : "\\x%02x", c);
	}
	if (len > 80)
		snprintf(out + o, size - o, "...(%zu bytes)", len);
}

static void attempt(enum target t, const char *buf, size_t len)
{
	_cleanup_free_ char *before = snapshot();
	_cleanup_free_ char *cmd = command_of(buf, len);
	char path[512], shown[512], value[256];
	int v = (int)(random() % N_VFS);
	struct claim_update u;
	bool valid = false, may_busy = false, denied = false;
	uint64_t num = 0;
	int r;

	show(buf, len, shown, sizeof(shown));
	switch (t) {
	case T_THRESHOLD:
		valid = cmd && number_in(cmd, 1, 1000, &num);
		snprintf(path, sizeof(path), "%s/threshold", mnt);
		break;
	case T_MAXQ:
		valid = cmd && number_in(cmd, 0, 65536, &num);
		snprintf(path, sizeof(path), "%s/max_quarantined", mnt);
		break;
	case T_STATUS:
		valid = cmd && strcmp(cmd, "repair") == 0;
		snprintf(path, sizeof(path), "%s/status", mnt);
		break;
	case T_VFQ:
		valid = cmd && (strcmp(cmd, "0") == 0 || strcmp(cmd, "1") == 0);
		if (v == CLAIMED_VF)
			v = 0; /* keep the claimed VF claimable: quarantine is tested on the others */
		snprintf(path, sizeof(path), "%s/%s/quarantined", mnt, vfs[v]);
		break;
	case T_REPORT:
		valid = cmd && report_valid(cmd);
		snprintf(path, sizeof(path), "%s/%s/report", mnt, vfs[v]);
		break;
	case T_CLAIM:
		valid = cmd && claim_valid(cmd, &u);
		denied = valid && claim_denied(&u);
		valid = valid && (denied || !claim_unwatchable(&u));
		snprintf(path, sizeof(path), "%s/%s/assignments/vm-3", mnt, vfs[CLAIMED_VF]);
		break;
	case T_MKDIR:
	case T_CREATE: {
		/* A name: no '/', no NUL, not "." or ".."; the kernel caps it at 255. */
		char name[300];
		size_t n = MIN(len, sizeof(name) - 1);
		memcpy(name, buf, n);
		name[n] = '\0';
		for (size_t i = 0; i < n; i++)
			if (name[i] == '/' || name[i] == '\0')
				name[i] = '_';
		if (!name[0] || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			snprintf(name, sizeof(name), "_");
		if (t == T_MKDIR) {
			snprintf(path, sizeof(path), "%s/%s", mnt, name);
			valid = vf_address_valid(name);
			for (int i = 0; i < N_VFS; i++)
				if (strcmp(name, vfs[i]) == 0)
					may_busy = true; /* EEXIST */
			r = mkdir(path, 0755) < 0 ? -errno : 0;
		} else {
			snprintf(path, sizeof(path), "%s/%s/assignments/%s", mnt, vfs[v], name);
			valid = instance_id_valid(name);
			/* Claimed or quarantined VFs refuse (EBUSY); vm-3 is its own claim. */
			may_busy = true;
			int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
			r = fd < 0 ? -errno : 0;
			if (fd >= 0)
				close(fd);
		}
		bool too_long = strlen(name) > 255;
		if (r == 0 && !valid)
			die("%s '%s': accepted, want EINVAL", target_names[t], shown);
		if (r < 0 && !(r == -EINVAL && !valid) && !(too_long && r == -ENAMETOOLONG) &&
		    !(may_busy && (r == -EEXIST || r == -EBUSY)))
			die("%s '%s': %s, want %s", target_names[t], shown, strerror(-r),
			    valid ? "success" : "EINVAL");
		if (r == 0) {
			/* Undo, so the next attempt starts from the same state. */
			if ((t == T_MKDIR ? rmdir(path) : unlink(path)) < 0)
				die("undo %s: %s", path, strerror(errno));
			per_target[t][0]++;
			n_ok++;
			return;
		}
		goto rejected;
	}
	default:
		return;
	}

	r = do_write(path, buf, len, t == T_REPORT);
	if (len == 0) {
		/* write(fd, "", 0) never reaches the daemon: success, no effect. */
		if (r != 0)
			die("%s: an empty write failed: %s", target_names[t], strerror(-r));
		goto rejected;
	}
	if (denied) {
		if (r != -EACCES)
			die("%s '%s': %s, want EACCES (a socket path outside %s)", target_names[t],
			    shown, r ? strerror(-r) : "accepted", sockroot);
		n_denied++;
		goto rejected;
	}
	if (valid && r != 0 && !(t == T_VFQ && r == -EBUSY))
		die("%s '%s': %s, want success", target_names[t], shown, strerror(-r));
	if (!valid && r == 0)
		die("%s '%s': accepted, want EINVAL", target_names[t], shown);
	if (!valid && r != -EINVAL)
		die("%s '%s': %s, want EINVAL", target_names[t], shown, strerror(-r));
	if (r == 0) {
		per_target[t][0]++;
		n_ok++;
		/* The documented effect is visible. */
		if (t == T_THRESHOLD || t == T_MAXQ) {
			read_value(t == T_THRESHOLD ? "threshold" : "max_quarantined", value,
				   sizeof(value));
			if (strtoull(value, NULL, 10) != num)
				die("%s '%s': accepted but reads back %s", target_names[t], shown,
				    value);
		} else if (t == T_VFQ) {
			char rel[64];
			snprintf(rel, sizeof(rel), "%s/quarantined", vfs[v]);
			read_value(rel, value, sizeof(value));
			if (strcmp(value, cmd) != 0)
				die("%s '%s': accepted but reads back %s", target_names[t], shown,
				    value);
		} else if (t == T_STATUS) {
			read_value("status", value, sizeof(value));
			if (strcmp(value, "ok") != 0)
				die("repair accepted but status says %s", value);
		} else if (t == T_CLAIM) {
			char content[8192], want[4300];
			snprintf(path, sizeof(path), "%s/%s/assignments/vm-3", mnt,
				 vfs[CLAIMED_VF]);
			read_into(path, content, sizeof(content));
			if (u.agent_set) {
				snprintf(want, sizeof(want), "agent=%s\n", u.agent);
				if (!strstr(content, want))
					die("claim '%s': accepted but reads back:\n%s", shown,
					    content);
			}
			if (u.control_set) {
				snprintf(want, sizeof(want), "control=%s\n", u.control);
				if (!strstr(content, want))
					die("claim '%s': accepted but reads back:\n%s", shown,
					    content);
			}
			if (u.pid_set) {
				if (u.pid)
					snprintf(want, sizeof(want), "pid=%" PRIu64 "\n", u.pid);
				else
					snprintf(want, sizeof(want), "pid=\n");
				if (!strstr(content, want))
					die("claim '%s': accepted but reads back:\n%s", shown,
					    content);
			}
		}
		/* Whatever was accepted, no reader is shown a control character:
		 * values that could carry one are refused, messages sanitized. */
		{
			_cleanup_free_ char *now = snapshot();
			for (const char *q = now; *q; q++)
				if (*q != '\n' && ((unsigned char)*q < 0x20 || *q == 0x7f))
					die("%s '%s': accepted, and a reader sees control character 0x%02x",
					    target_names[t], shown, (unsigned char)*q);
		}
		return;
	}
rejected:
	per_target[t][1]++;
	n_rejected++;
	{
		_cleanup_free_ char *after = snapshot();
		n_checked++;
		if (strcmp(before, after) != 0)
			die("%s '%s' was rejected (%s) but the state changed:\n--- before\n%s\n--- after\n%s",
			    target_names[t], shown, strerror(-r), before, after);
	}
}

int main(int argc, char **argv)
{
	uint64_t iterations, seed;
	char path[512];
	static char buf[140000];

	if (argc != 5 || parse_uint64(argv[2], 1, 10000000, &iterations) < 0 ||
	    parse_uint64(argv[3], 0, UINT32_MAX, &seed) < 0 || argv[4][0] != '/') {
		fprintf(stderr, "usage: hostile-writes MOUNT ITERATIONS SEED SOCKET_DIR\n");
		return 2;
	}
	mnt = argv[1];
	sockroot = argv[4];
	for (size_t i = 0; i < ARRAY_SIZE(root_boundary_forms); i++)
		root_boundaries[i] = expand(root_boundary_forms[i]);
	snprintf(claim_template, sizeof(claim_template),
		 "agent=vsock:3:2222\ncontrol=%s/vmm.sock\npid=1\n", sockroot);
	/* A symlink in the socket directory to one outside it. */
	snprintf(path, sizeof(path), "%s/link", sockroot);
	if (symlink("/etc", path) < 0 && errno != EEXIST)
		die("symlink %s: %s", path, strerror(errno));
	srandom((unsigned)seed);

	for (int v = 0; v < N_VFS; v++) {
		snprintf(path, sizeof(path), "%s/%s", mnt, vfs[v]);
		if (mkdir(path, 0755) < 0)
			die("mkdir %s: %s", path, strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/%s/assignments/vm-3", mnt, vfs[CLAIMED_VF]);
	{
		_cleanup_close_ int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			die("claim %s: %s", path, strerror(errno));
	}
	char content[8192];
	read_into(path, content, sizeof(content));
	if (sscanf(content, "claimed_at=%30s", claimed_at) != 1)
		die("claim reads back '%s'", content);

	/* Every boundary value once against every file, then random rounds. */
	for (int t = 0; t < T_COUNT; t++) {
		for (size_t b = 0; b < ARRAY_SIZE(boundaries); b++)
			attempt((enum target)t, boundaries[b], strlen(boundaries[b]));
		for (size_t b = 0; b < ARRAY_SIZE(root_boundaries); b++)
			attempt((enum target)t, root_boundaries[b], strlen(root_boundaries[b]));
	}
	/* The command-length limit from both sides, and a write larger than
	 * one FUSE request (the kernel splits it; the first part is refused). */
	for (int t = 0; t < T_CREATE; t++) {
		if (t == T_MKDIR)
			continue;
		memset(buf, '1', sizeof(buf));
		attempt((enum target)t, buf, COMMAND_MAX + 1);
		attempt((enum target)t, buf, sizeof(buf));
	}
	for (uint64_t i = 0; i < iterations; i++) {
		enum target t = (enum target)(random() % T_COUNT);
		size_t len = make_input(t, buf, sizeof(buf));
		attempt(t, buf, len);
	}
	printf("hostile-writes: %lu accepted, %lu rejected (state compared after each), %lu of "
	       "them socket paths outside %s (EACCES):\n",
	       n_ok, n_rejected, n_denied, sockroot);
	for (size_t i = 0; i < ARRAY_SIZE(root_boundaries); i++)
		free(root_boundaries[i]);
	for (int t = 0; t < T_COUNT; t++)
		printf("  %-22s %5lu accepted %5lu rejected\n", target_names[t], per_target[t][0],
		       per_target[t][1]);
	return 0;
}
