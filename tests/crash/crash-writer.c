/* SPDX-License-Identifier: MIT */
/*
 * crash-writer.c - the two halves of the SIGKILL test (crash-restart.sh).
 *
 *   crash-writer run MOUNT LOG SEED ROUND VF...
 *	Hammers failure reports (VF/report) and claims (create and unlink of
 *	VF/assignments/ID) on the mount until an operation fails, which is
 *	what happens when the test SIGKILLs vfhealthd.  Every operation is
 *	appended to LOG as "try ..." before it is issued and as "ack ..." once
 *	the kernel returned success, so the log is exactly the set of
 *	acknowledged writes plus at most one in flight.  At start it records
 *	the claims it finds ("state VF ID" / "state VF -").
 *
 *   crash-writer snapshot MOUNT VF
 *	Prints what no writer touches: the top-level settings and the
 *	quarantine list, the VF directories, and VF's files (the test's fixed
 *	VF), for comparison across restarts in one process instead of many.
 *
 *   crash-writer check MOUNT LOG VF...
 *	After the restart: every acknowledged failure is listed in its VF's
 *	failures file, every listed failure was at least attempted (nothing
 *	else appeared), the tally matches, and each VF's live claims are what
 *	the acknowledged claims and releases say (either outcome for the one
 *	operation in flight at the kill).
 *
 * Failures use a threshold above what a round can reach (the test runs the
 * daemon with --threshold 1000), so nothing is quarantined and every unique
 * report must be "recorded".  Exits 0 when done (run: the daemon went away;
 * check: all consistent), 1 on a violated expectation, 2 on bad usage.
 */
#include <dirent.h>
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
#include "common/parse.h"

#define MAX_VFS 64
#define ID_MAX 64
/* Stop adding failures to a VF well before FAILURES_PER_VF_MAX. */
#define TALLY_CAP 900
/* A writer the test forgot to kill stops by itself. */
#define MAX_OPS 200000
#define FILE_MAX (1 << 20)

static int log_fd = -1;

static void logf_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_line(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(line) - 1) {
		fprintf(stderr, "crash-writer: log line too long\n");
		exit(1);
	}
	line[n++] = '\n';
	/* One write per line, O_APPEND: the test reads whole lines only. */
	if (write(log_fd, line, (size_t)n) != n) {
		perror("crash-writer: log");
		exit(1);
	}
}

/* Whole file into a malloc'd NUL-terminated buffer; -errno. */
static int read_file(const char *path, char **ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = malloc(FILE_MAX + 1);
	size_t have = 0;

	if (fd < 0)
		return negative_errno();
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + have, FILE_MAX - have);
		if (n < 0)
			return negative_errno();
		if (n == 0)
			break;
		have += (size_t)n;
		if (have == FILE_MAX)
			return -EFBIG;
	}
	buf[have] = '\0';
	*ret = move_ptr(buf);
	return 0;
}

/* The one live claim under VF/assignments ("" when none); -errno, or
 * -EUCLEAN when there are several. */
static int read_claim(const char *mount, const char *vf, char id[static ID_MAX])
{
	char path[512];
	struct dirent *de;
	int found = 0;

	snprintf(path, sizeof(path), "%s/%s/assignments", mount, vf);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return negative_errno();
	id[0] = '\0';
	errno = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		size_t len = strlen(de->d_name);
		if (found++ || len >= ID_MAX)
			return -EUCLEAN;
		memcpy(id, de->d_name, len + 1);
	}
	return errno ? -errno : 0;
}

static int read_tally(const char *mount, const char *vf, unsigned *ret)
{
	char path[512];
	_cleanup_free_ char *text = NULL;
	uint64_t v;
	int r;

	snprintf(path, sizeof(path), "%s/%s/tally", mount, vf);
	r = read_file(path, &text);
	if (r < 0)
		return r;
	text[strcspn(text, "\n")] = '\0';
	if (parse_uint64(text, 0, 100000, &v) < 0)
		return -EBADMSG;
	*ret = (unsigned)v;
	return 0;
}

/* ---- run ----------------------------------------------------------------- */

static int cmd_run(const char *mount, unsigned seed, unsigned round, int nvf, char **vfs)
{
	char holder[MAX_VFS][ID_MAX];
	unsigned tally[MAX_VFS];
	unsigned long acks = 0;
	char path[512];
	int r;

	srandom(seed);
	for (int i = 0; i < nvf; i++) {
		r = read_claim(mount, vfs[i], holder[i]);
		if (r == 0)
			r = read_tally(mount, vfs[i], &tally[i]);
		if (r < 0) {
			/* Killed before we began: nothing written, nothing to log.
			 * (A mount that never served fails the check step.) */
			logf_line("stop %s", strerrorname_np(-r) ? strerrorname_np(-r) : "?");
			printf("0\n");
			return 0;
		}
		logf_line("state %s %s", vfs[i], holder[i][0] ? holder[i] : "-");
	}

	for (unsigned op = 0; op < MAX_OPS; op++) {
		int i = (int)(random() % nvf), kind = (int)(random() % 10);
		char id[ID_MAX];

		if (kind < 6 && tally[i] < TALLY_CAP) {
			char assigned_at[RFC3339_BUFSZ], command[256], outcome[128];
			ssize_t n;

			snprintf(id, sizeof(id), "f%u-%u", round, op);
			rfc3339_now(assigned_at);
			n = snprintf(command, sizeof(command), "failed %s %s crash round %u op %u",
				     id, assigned_at, round, op);
			snprintf(path, sizeof(path), "%s/%s/report", mount, vfs[i]);
			logf_line("try F %s %s", vfs[i], id);
			_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd < 0 || write(fd, command, (size_t)n) != n)
				break;
			logf_line("ack F %s %s", vfs[i], id);
			acks++;
			tally[i]++;
			n = pread(fd, outcome, sizeof(outcome) - 1, 0);
			if (n < 0)
				break;
			outcome[n] = '\0';
			if (strncmp(outcome, "recorded ", 9) != 0) {
				fprintf(stderr,
					"crash-writer: %s: unique report %s answered '%s'\n",
					vfs[i], id, outcome);
				return 1;
			}
		} else if (kind < 8 && !holder[i][0]) {
			snprintf(id, sizeof(id), "c%u-%u", round, op);
			snprintf(path, sizeof(path), "%s/%s/assignments/%s", mount, vfs[i], id);
			logf_line("try C %s %s", vfs[i], id);
			int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
			if (fd < 0)
				break;
			/* A create only reserves; the close commits what was written
			 * durably (vfhealth(5)), so that is the acknowledgement. */
			static const char first[] = "agent=\n";
			bool written = write(fd, first, sizeof(first) - 1) ==
				       (ssize_t)sizeof(first) - 1;
			if (close(fd) != 0 || !written)
				break;
			logf_line("ack C %s %s", vfs[i], id);
			acks++;
			snprintf(holder[i], ID_MAX, "%s", id);
		} else if (kind >= 8 && holder[i][0]) {
			snprintf(path, sizeof(path), "%s/%s/assignments/%s", mount, vfs[i],
				 holder[i]);
			logf_line("try R %s %s", vfs[i], holder[i]);
			if (unlink(path) < 0)
				break;
			logf_line("ack R %s %s", vfs[i], holder[i]);
			acks++;
			holder[i][0] = '\0';
		}
	}
	const char *why = strerrorname_np(errno);
	logf_line("stop %s", why ? why : "?");
	printf("%lu\n", acks);
	return 0;
}

/* ---- check --------------------------------------------------------------- */

struct vf_expect {
	const char *vf;
	char **acked; /* failure ids acknowledged */
	size_t n_acked, cap_acked;
	char **tried; /* failure ids attempted (acked included) */
	size_t n_tried, cap_tried;
	char holder[ID_MAX];    /* claim after the last acknowledged operation */
	char in_flight[ID_MAX]; /* the other possible holder when an op was unacknowledged */
	bool pending;
};

static int push(char ***arr, size_t *n, size_t *cap, const char *s)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		char **bigger = realloc(*arr, c * sizeof(**arr));
		if (!bigger)
			return -ENOMEM;
		*arr = bigger;
		*cap = c;
	}
	(*arr)[*n] = strdup(s);
	if (!(*arr)[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool contains(char **sorted, size_t n, const char *s)
{
	return n > 0 && bsearch(&s, sorted, n, sizeof(*sorted), str_cmp) != NULL;
}

static void free_all(char **arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(arr[i]);
	free(arr);
}

static struct vf_expect *find_vf(struct vf_expect *e, int nvf, const char *vf)
{
	for (int i = 0; i < nvf; i++)
		if (strcmp(e[i].vf, vf) == 0)
			return &e[i];
	return NULL;
}

static int load_log(const char *log_path, struct vf_expect *e, int nvf, unsigned long *acks)
{
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;
	int r = read_file(log_path, &text);

	if (r < 0) {
		fprintf(stderr, "crash-writer: %s: %s\n", log_path, strerror(-r));
		return r;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char verb[8], kind[4], vf[32], id[ID_MAX];
		struct vf_expect *x;

		if (strncmp(line, "stop", 4) == 0)
			continue;
		if (sscanf(line, "state %31s %63s", vf, id) == 2) {
			if (!(x = find_vf(e, nvf, vf)))
				return -EBADMSG;
			snprintf(x->holder, ID_MAX, "%s", strcmp(id, "-") ? id : "");
			x->pending = false;
			continue;
		}
		if (sscanf(line, "%7s %3s %31s %63s", verb, kind, vf, id) != 4 ||
		    !(x = find_vf(e, nvf, vf))) {
			fprintf(stderr, "crash-writer: bad log line '%s'\n", line);
			return -EBADMSG;
		}
		bool ack = strcmp(verb, "ack") == 0;
		if (kind[0] == 'F') {
			r = ack ? push(&x->acked, &x->n_acked, &x->cap_acked, id) :
				  push(&x->tried, &x->n_tried, &x->cap_tried, id);
			if (r < 0)
				return r;
		} else if (kind[0] == 'C' || kind[0] == 'R') {
			const char *after = kind[0] == 'C' ? id : "";
			if (ack) {
				snprintf(x->holder, ID_MAX, "%s", after);
				x->pending = false;
			} else {
				snprintf(x->in_flight, ID_MAX, "%s", after);
				x->pending = true;
			}
		}
		*acks += ack;
	}
	return 0;
}

static int check_vf(const char *mount, struct vf_expect *x, size_t *listed)
{
	char path[512], claim[ID_MAX];
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;
	size_t lines = 0;
	unsigned tally;
	int bad = 0, r;

	if (x->n_acked)
		qsort(x->acked, x->n_acked, sizeof(char *), str_cmp);
	if (x->n_tried)
		qsort(x->tried, x->n_tried, sizeof(char *), str_cmp);

	snprintf(path, sizeof(path), "%s/%s/failures", mount, x->vf);
	r = read_file(path, &text);
	if (r < 0) {
		fprintf(stderr, "FAIL %s: %s\n", path, strerror(-r));
		return 1;
	}
	/* Mark each listed id by removing it from a copy of the acked set. */
	_cleanup_free_ bool *seen = calloc(x->n_acked + 1, sizeof(bool));
	if (!seen)
		return 1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char reported[64], id[ID_MAX];

		lines++;
		if (sscanf(line, "%63s %63s", reported, id) != 2) {
			fprintf(stderr, "FAIL %s: unparsable failure line '%s'\n", x->vf, line);
			bad = 1;
			continue;
		}
		if (id[0] != 'f')
			continue; /* not ours: the test's fixed state, compared separately */
		if (!contains(x->tried, x->n_tried, id)) {
			fprintf(stderr, "FAIL %s: failure %s was never written\n", x->vf, id);
			bad = 1;
		}
		const char *key = id;
		char **hit = x->n_acked ?
				     bsearch(&key, x->acked, x->n_acked, sizeof(char *), str_cmp) :
				     NULL;
		if (hit)
			seen[hit - x->acked] = true;
	}
	for (size_t i = 0; i < x->n_acked; i++)
		if (!seen[i]) {
			fprintf(stderr, "FAIL %s: acknowledged failure %s is gone\n", x->vf,
				x->acked[i]);
			bad = 1;
		}
	r = read_tally(mount, x->vf, &tally);
	if (r < 0 || tally != lines) {
		fprintf(stderr, "FAIL %s: tally %u (%s) but %zu failures listed\n", x->vf,
			r < 0 ? 0 : tally, r < 0 ? strerror(-r) : "ok", lines);
		bad = 1;
	}
	r = read_claim(mount, x->vf, claim);
	if (r < 0) {
		fprintf(stderr, "FAIL %s: assignments: %s\n", x->vf, strerror(-r));
		return 1;
	}
	if (strcmp(claim, x->holder) != 0 && !(x->pending && strcmp(claim, x->in_flight) == 0)) {
		fprintf(stderr, "FAIL %s: live claim '%s', expected '%s'%s%s\n", x->vf, claim,
			x->holder, x->pending ? " or '" : "", x->pending ? x->in_flight : "");
		bad = 1;
	}
	*listed += lines;
	return bad;
}

static int cmd_check(const char *mount, const char *log_path, int nvf, char **vfs)
{
	struct vf_expect e[MAX_VFS];
	unsigned long acks = 0;
	size_t listed = 0, acked = 0;
	int bad = 0;

	memset(e, 0, sizeof(e));
	for (int i = 0; i < nvf; i++)
		e[i].vf = vfs[i];
	if (load_log(log_path, e, nvf, &acks) < 0)
		bad = 1;
	for (int i = 0; i < nvf && !bad; i++) {
		/* every acked id was tried first */
		bad |= check_vf(mount, &e[i], &listed);
		acked += e[i].n_acked;
	}
	for (int i = 0; i < nvf; i++) {
		free_all(e[i].acked, e[i].n_acked);
		free_all(e[i].tried, e[i].n_tried);
	}
	if (!bad)
		printf("%lu acknowledged writes (%zu failure reports) all present; %zu failures listed\n",
		       acks, acked, listed);
	return bad;
}

static int cmd_snapshot(const char *mount, const char *fixed)
{
	static const char *const files[] = { "threshold", "max_quarantined", "quarantined" };
	static const char *const vf_files[] = { "tally", "quarantined", "failures" };
	char path[512];
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < ARRAY_SIZE(files) + ARRAY_SIZE(vf_files); i++) {
		_cleanup_free_ char *text = NULL;
		if (i < ARRAY_SIZE(files))
			snprintf(path, sizeof(path), "%s/%s", mount, files[i]);
		else
			snprintf(path, sizeof(path), "%s/%s/%s", mount, fixed,
				 vf_files[i - ARRAY_SIZE(files)]);
		int r = read_file(path, &text);
		if (r < 0) {
			fprintf(stderr, "crash-writer: %s: %s\n", path, strerror(-r));
			return 1;
		}
		printf("== %s\n%s", path + strlen(mount), text);
	}
	_cleanup_closedir_ DIR *d = opendir(mount);
	if (!d)
		return 1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && push(&names, &n, &cap, de->d_name) < 0)
			return 1;
	if (n)
		qsort(names, n, sizeof(*names), str_cmp);
	printf("== /\n");
	for (size_t i = 0; i < n; i++)
		printf("%s\n", names[i]);
	free_all(names, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 7 && strcmp(argv[1], "run") == 0 && argc - 6 <= MAX_VFS) {
		uint64_t seed, round;
		if (parse_uint64(argv[4], 0, UINT32_MAX, &seed) < 0 ||
		    parse_uint64(argv[5], 0, UINT32_MAX, &round) < 0)
			goto usage;
		log_fd = open(argv[3], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			perror(argv[3]);
			return 2;
		}
		return cmd_run(argv[2], (unsigned)seed, (unsigned)round, argc - 6, argv + 6);
	}
	if (argc == 4 && strcmp(argv[1], "snapshot") == 0)
		return cmd_snapshot(argv[2], argv[3]);
	if (argc >= 5 && strcmp(argv[1], "check") == 0 && argc - 4 <= MAX_VFS)
		return cmd_check(argv[2], argv[3], argc - 4, argv + 4);
usage:
	fprintf(stderr, "usage: crash-writer run MOUNT LOG SEED ROUND VF...\n"
			"       crash-writer snapshot MOUNT VF\n"
			"       crash-writer check MOUNT LOG VF...\n");
	return 2;
}
