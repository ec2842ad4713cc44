/* SPDX-License-Identifier: MIT */
/*
 * mount-client.c - the sentinel's one door to the store: every file operation
 * on the mount (vfhealth(5)): reading `status`, `claims` and assignment
 * files, writing reports, `repair` and `release=CLAIMED_AT`, and reading an
 * answer back on the same open file.  open/pread/pwrite with O_CLOEXEC,
 * readdir, and unlink of a claim without claimed_at: nothing else, so the
 * daemon's notifier sees these writes like anyone's and a standalone
 * sentinel behaves the same.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/path.h"
#include "sentinel/sentinel-internal.h"

#define STATUS_READ_MAX 1024

static int mount_path(const struct sentinel *s, char *buf, size_t size, const char *a,
		      const char *b, const char *c)
{
	int n = snprintf(buf, size, "%s%s%s%s%s%s%s", s->mountpoint, a ? "/" : "", a ? a : "",
			 b ? "/" : "", b ? b : "", c ? "/" : "", c ? c : "");
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* Read a whole (small) file into buf (NUL-terminated).  -E2BIG when it holds
 * size - 1 bytes or more: a file we do not expect to be that large. */
static int read_file(const char *path, char *buf, size_t size, size_t *ret_len)
{
	_cleanup_free_ char *text = NULL;
	int r = path_read(path, size - 2, &text, ret_len);

	if (r == 0)
		memcpy(buf, text, *ret_len + 1);
	return r;
}

/* One command: a single write(2) at offset 0, then, when answer is non-NULL,
 * the outcome read back from offset 0 of the same open file. */
/* Open path (flags) and write command whole at offset 0: the descriptor, or
 * -errno. */
static int open_write(const char *path, int flags, const char *command, size_t len)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = open(path, flags | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	do
		n = pwrite(fd, command, len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if ((size_t)n != len)
		return -EIO; /* the interface takes whole commands; a short write is a bug */
	return move_fd(fd);
}

static int write_command(const char *path, const char *command, size_t len, char *answer,
			 size_t answer_size, size_t *answer_len)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = open_write(path, answer ? O_RDWR : O_WRONLY, command, len);
	if (fd < 0)
		return fd;
	if (!answer)
		return 0;
	do
		n = pread(fd, answer, answer_size - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	answer[n] = '\0';
	*answer_len = (size_t)n;
	return 0;
}

/* A release is committed when a descriptor of its open file closes
 * (fs/claims.h): a duplicate's close(2) gives the store's answer, then the
 * outcome is read through the open file.  0: this write released it;
 * -ENOENT or -ESTALE (a newer claim of the instance lives): it was released
 * already; another refusal as is. */
static int write_release(const char *path, const char *command, size_t len)
{
	_cleanup_close_ int fd = -1;
	char outcome[256];
	ssize_t n;
	int dup_fd;

	fd = open_write(path, O_RDWR, command, len);
	if (fd < 0)
		return fd;
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return negative_errno();
	if (close(dup_fd) < 0)
		return negative_errno();
	do
		n = pread(fd, outcome, sizeof(outcome) - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	outcome[n] = '\0';
	if (strncmp(outcome, "already released ", strlen("already released ")) == 0)
		return strstr(outcome, " newer=") ? -ESTALE : -ENOENT;
	return 0;
}

int read_assignment(const struct sentinel *s, const char *vf, const char *instance_id,
		    struct assignment *ret)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r;

	r = mount_path(s, path, sizeof(path), vf, "assignments", instance_id);
	if (r < 0)
		return r;
	text = malloc(ASSIGNMENT_FILE_MAX + 2);
	if (!text)
		return -ENOMEM;
	r = read_file(path, text, ASSIGNMENT_FILE_MAX + 2, &len);
	if (r < 0)
		return r;
	return assignment_parse(vf, instance_id, text, len, ret);
}

int read_current_claim(const struct sentinel *s, const char *vf, const char *instance_id,
		       struct assignment *ret)
{
	char path[PATH_MAX];
	_cleanup_closedir_ DIR *dir = NULL;
	struct dirent *de;
	int r;

	r = read_assignment(s, vf, instance_id, ret);
	if (r != -ENOENT)
		return r;
	r = mount_path(s, path, sizeof(path), vf, "assignments", NULL);
	if (r < 0)
		return r;
	dir = opendir(path);
	if (!dir)
		return negative_errno(); /* -ENOENT: the VF itself is gone */
	while ((errno = 0, de = readdir(dir))) {
		if (!instance_id_valid(de->d_name))
			continue;
		r = read_assignment(s, vf, de->d_name, ret);
		if (r == -ENOENT)
			continue; /* released while we looked */
		return r;
	}
	return errno ? negative_errno() : -ENOENT;
}

void claim_list_free(struct claim_list *l)
{
	free(l->items);
	*l = (struct claim_list){ 0 };
}

static int claim_list_push(struct claim_list *l, const struct assignment *a)
{
	if (l->count == l->capacity) {
		size_t capacity = l->capacity ? l->capacity * 2 : 64;
		struct assignment *items;

		if (l->count >= SENTINEL_MAX_TARGETS)
			return -E2BIG;
		items = reallocarray(l->items, capacity, sizeof(*items));
		if (!items)
			return -ENOMEM;
		l->items = items;
		l->capacity = capacity;
	}
	l->items[l->count++] = *a;
	return 0;
}

/* Add the claim <vf>/assignments/<instance_id> to l.  Fails only when l is
 * full (-E2BIG) or memory is short: the listing stops there. */
static int list_claim(const struct sentinel *s, const char *vf, const char *instance_id,
		      struct assignment *a, struct claim_list *l)
{
	int r = read_assignment(s, vf, instance_id, a);

	if (r == -ENOENT)
		return 0; /* released since the listing was rendered */
	if (r < 0) {
		log_warn("sentinel: cannot read assignment %s/%s: %s", vf, instance_id,
			 strerror(-r));
		l->error = true;
		return 0;
	}
	r = claim_list_push(l, a);
	if (r < 0) {
		log_warn("sentinel: too many claims (over %d): %s", SENTINEL_MAX_TARGETS,
			 strerror(-r));
		l->error = true;
	}
	return r;
}

/* Every live claim under the mount: the `claims` file names them (one read,
 * however many VFs are registered: grammar/assignment.h), then each one's
 * assignment file is read. */
int list_claims(const struct sentinel *s, struct claim_list *l)
{
	char path[PATH_MAX];
	char vf[VF_ADDR_BUFSZ], instance_id[INSTANCE_ID_MAX + 1];
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ struct assignment *a = NULL;
	size_t len = 0;
	int r;

	*l = (struct claim_list){ 0 };
	r = mount_path(s, path, sizeof(path), "claims", NULL, NULL);
	if (r == 0)
		r = path_read(path, CLAIMS_FILE_MAX, &text, &len);
	if (r == 0 && !(a = malloc(sizeof(*a))))
		r = -ENOMEM;
	if (r < 0) {
		log_warn("sentinel: cannot read %s/claims: %s", s->mountpoint, strerror(-r));
		l->error = true;
		return r;
	}
	for (char *line = text, *end; line < text + len; line = end + 1) {
		end = memchr(line, '\n', (size_t)(text + len - line));
		if (!end)
			end = text + len; /* a last line without its newline */
		if (claims_line_parse(line, (size_t)(end - line), vf, instance_id) < 0) {
			log_warn("sentinel: %s/claims: unexpected line %.*s", s->mountpoint,
				 (int)MIN(end - line, (ptrdiff_t)CLAIMS_LINE_MAX), line);
			l->error = true;
			continue;
		}
		if (list_claim(s, vf, instance_id, a, l) < 0)
			break;
		if (atomic_load(&s->stopping_fast))
			return -ECANCELED;
	}
	return 0;
}

/* Count what the store made of a report, and log what only the sentinel
 * knows: the guest's own words, once per assignment (a repeated answer is
 * "unchanged" and says nothing).  The store's decisions (recorded,
 * quarantined, held back, rescinded) are vfhealthd's to log, once: the
 * sentinel does not restate them (docs/runbook.md lists every line). */
static void log_report_outcome(struct sentinel *s, const struct assignment *c,
			       enum check_result result, const char *message,
			       const struct report_outcome *o)
{
	const char *claimed_at = c->claimed_at[0] ? c->claimed_at : "-";

	if (result == CHECK_FAILED) {
		switch (o->kind) {
		case REPORT_QUARANTINED:
			atomic_fetch_add(&s->counters->quarantines, 1);
			__attribute__((fallthrough));
		case REPORT_RECORDED:
			atomic_fetch_add(&s->counters->init_failures, 1);
			log_info("vf %s: instance %s (claimed %s) failed GPU initialization: \"%s\"",
				 c->vf, c->instance_id, claimed_at, message);
			return;
		case REPORT_UNCHANGED:
			return;
		case REPORT_CLEARED:
			break;
		}
	} else if (o->kind == REPORT_CLEARED) {
		if (o->cleared)
			log_debug("vf %s: instance %s (claimed %s) initialized its GPU", c->vf,
				  c->instance_id, claimed_at);
		return;
	}
	log_warn("vf %s: unexpected answer to a %s report", c->vf, check_result_name(result));
}

void report(struct sentinel *s, const struct assignment *c, enum check_result result,
	    const char *message)
{
	char path[PATH_MAX], command[REPORT_COMMAND_BUFSZ],
		answer[OUTCOME_LINE_BUFSZ + 1] /* one more: an overlong answer is refused */;
	struct report_outcome outcome;
	size_t answer_len;
	int len, r;

	if (result == CHECK_FAILED)
		len = report_format_failed(command, sizeof(command), c->instance_id, c->claimed_at,
					   message);
	else
		len = report_format_ok(command, sizeof(command), c->instance_id, c->claimed_at);
	if (len < 0) {
		log_warn("vf %s: cannot format a report for %s: %s", c->vf, c->instance_id,
			 strerror(-len));
		return;
	}
	r = mount_path(s, path, sizeof(path), c->vf, "report", NULL);
	if (r == 0)
		r = write_command(path, command, (size_t)len, answer, sizeof(answer), &answer_len);
	if (r < 0) {
		/* EIO: the store is unavailable (the poll's repair step said so);
		 * the next poll asks the agent again and retries. */
		if (r == -EIO)
			log_debug("vf %s: %s report for %s not taken: %s", c->vf,
				  check_result_name(result), c->instance_id, strerror(-r));
		else
			log_warn("vf %s: %s report for %s not taken: %s", c->vf,
				 check_result_name(result), c->instance_id, strerror(-r));
		return;
	}
	r = report_outcome_parse(answer, answer_len, &outcome);
	if (r < 0) {
		log_warn("vf %s: cannot parse the report outcome \"%.*s\"", c->vf,
			 (int)strcspn(answer, "\n"), answer);
		return;
	}
	log_report_outcome(s, c, result, message, &outcome);
}

/* One repair attempt when the store says it is unavailable; reading `status`
 * is the cheap no-op on a healthy store. */
void repair_if_unavailable(struct sentinel *s)
{
	char path[PATH_MAX], status[STATUS_READ_MAX];
	size_t len;
	int r;

	if (mount_path(s, path, sizeof(path), "status", NULL, NULL) < 0)
		return;
	r = read_file(path, status, sizeof(status), &len);
	if (r < 0 && r != -EIO) {
		log_debug("sentinel: cannot read %s: %s", path, strerror(-r));
		return;
	}
	/* EIO: as good as unavailable; the poll goes on either way. */
	if (r < 0)
		snprintf(status, sizeof(status), "unreadable (%s)", strerror(-r));
	else if (strncmp(status, "unavailable", 11) != 0)
		return;
	status[strcspn(status, "\n")] = '\0';
	r = write_command(path, "repair", 6, NULL, 0, NULL);
	if (r < 0)
		log_warn("sentinel: store %s; repair failed: %s", status, strerror(-r));
	else
		log_info("sentinel: store repaired (was %s)", status);
}

/* The conditional release: it releases that assignment (c->claimed_at) and
 * nothing newer, so a VMM manager that released and re-claimed meanwhile
 * keeps its new claim (ESTALE). */
int release_claim(const struct sentinel *s, const struct assignment *c, const char *died_at)
{
	char path[PATH_MAX], command[64 + 2 * RFC3339_BUFSZ];
	int len, r;

	r = mount_path(s, path, sizeof(path), c->vf, "assignments", c->instance_id);
	if (r < 0)
		return r;
	if (!c->claimed_at[0])
		/* No identity to name (never so with this daemon): the
		 * re-read just before is all we have. */
		return unlink(path) < 0 ? negative_errno() : 0;
	/* its VMM died: the store judges the init window (ended=crash) */
	len = snprintf(command, sizeof(command), "release=%s\nended=crash\n%s%s%s", c->claimed_at,
		       died_at ? "died_at=" : "", died_at ? died_at : "", died_at ? "\n" : "");
	return write_release(path, command, (size_t)len);
}
