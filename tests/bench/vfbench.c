/* SPDX-License-Identifier: MIT */
/*
 * vfbench.c - the measuring half of the benchmarks (run-benchmarks.sh
 * computes the ratios and prints the figures).  Each subcommand prints one
 * line of numbers on stdout.
 *
 *   vfbench read FILE ROUNDS              median ns of open+read+close of FILE
 *   vfbench reads BATCHES BATCH FILE...   the same of each FILE, interleaved: BATCHES
 *                                         rounds, each one batch of BATCH reads of every
 *                                         FILE in turn; per FILE the median over its
 *                                         batches of a batch's mean, in ns, on one line
 *   vfbench ls DIR ROUNDS                 median ns of readdir+fstatat of every entry
 *   vfbench lss ROUNDS DIR...             the same of each DIR, interleaved (one listing
 *                                         of every DIR in turn, ROUNDS times): the medians
 *                                         and the entries of each, on one line
 *   vfbench ingest MOUNT WRITERS COUNT [FIRST]
 *                                         durable "failed" reports per second through
 *                                         VF/report files, WRITERS threads, each its own
 *                                         VF (the FIRST-th VF under MOUNT on, default 0;
 *                                         a run on fresh VFs is not quarantined by an
 *                                         earlier one), COUNT reports in all
 *   vfbench reports FILE COUNT            the same, one writer, through one FILE (the
 *                                         report file of reportfloor.c)
 *   vfbench alternate COUNT BATCH FILES_A FILES_B
 *                                         the same through two sides, interleaved: COUNT
 *                                         reports to each, in batches of BATCH in the
 *                                         order A B B A A B ...; a side is a comma-
 *                                         separated list of files, each written an equal
 *                                         share in turn; the rate of each side over its
 *                                         own batches' time, on one line
 *   vfbench sqlite DB COUNT               the same rows committed one by one by the bare
 *                                         SQLite loop (barecommit.h), timed after COUNT
 *                                         untimed commits and a checkpoint
 *   vfbench store DB COUNT VF             the same reports through the store's API alone
 *                                         (no mount), to the VF-th VF of a populated DB,
 *                                         timed after 400 untimed ones to the next VF
 *   vfbench latency FILE SECONDS          reads of FILE for SECONDS: count p50 p99 max (ns)
 *   vfbench claims MOUNT ROUNDS           median ns of what one sentinel poll reads of the
 *                                         claims: MOUNT/claims, then open+read+close of
 *                                         every assignment file it names; and how many
 *   vfbench populate DB VFS FAILURES      a store with VFS VFs and FAILURES failures,
 *                                         through the store's own API
 *
 * Design notes (ingest): WRITERS threads, each writing its share of reports
 * to its own VF's report file (so the VFs never reach the threshold the
 * caller set) and timing from a shared start barrier to the last
 * acknowledgement.  No shared state after the barrier but an atomic counter.
 * The threads are joined before the figure is printed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>

#include "barecommit.h"

#include "grammar/assignment.h"
#include "store/store.h"
#include "common/cleanup.h"
#include "common/parse.h"

#define BENCH_VFS_MAX 4096

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t percentile(int64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static int64_t read_once(const char *path)
{
	char buf[4096];
	int64_t t0 = monotonic_ns();
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0) {
		perror(path);
		exit(1);
	}
	close(fd);
	return monotonic_ns() - t0;
}

static int cmd_read(const char *path, size_t rounds)
{
	_cleanup_free_ int64_t *t = malloc(rounds * sizeof(*t));
	if (!t)
		return 1;
	for (size_t i = 0; i < rounds; i++)
		t[i] = read_once(path);
	printf("%" PRId64 "\n", percentile(t, rounds, 0.5));
	return 0;
}

/* Interleaved, so that every file sees the same machine: a shared host's
 * speed drifts within seconds, and a figure and its limit measured minutes
 * apart can differ by the drift alone. */
static int cmd_reads(size_t batches, size_t batch, char **files, size_t n)
{
	_cleanup_free_ int64_t *t = malloc(batches * n * sizeof(*t));

	if (!t)
		return 1;
	for (size_t f = 0; f < n; f++) /* warm: lookups, attributes, pages */
		for (size_t i = 0; i < batch; i++)
			read_once(files[f]);
	for (size_t b = 0; b < batches; b++)
		for (size_t f = 0; f < n; f++) {
			int64_t t0 = monotonic_ns();
			for (size_t i = 0; i < batch; i++)
				read_once(files[f]);
			t[f * batches + b] = (monotonic_ns() - t0) / (int64_t)batch;
		}
	for (size_t f = 0; f < n; f++)
		printf("%s%" PRId64, f ? " " : "", percentile(t + f * batches, batches, 0.5));
	printf("\n");
	return 0;
}

/* The whole of a file (at most size - 1 bytes), NUL-terminated: its length. */
static size_t read_all(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n = 1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		perror(path);
		exit(1);
	}
	while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	if (n < 0) {
		perror(path);
		exit(1);
	}
	close(fd);
	buf[len] = '\0';
	return len;
}

static int cmd_claims(const char *mount, size_t rounds)
{
	_cleanup_free_ int64_t *t = malloc(rounds * sizeof(*t));
	_cleanup_free_ char *list = malloc(CLAIMS_FILE_MAX + 1);
	char path[PATH_MAX], claim[4096];
	size_t claims = 0;

	if (!t || !list)
		return 1;
	for (size_t i = 0; i < rounds; i++) {
		int64_t t0 = monotonic_ns();
		char *save = NULL;

		snprintf(path, sizeof(path), "%s/claims", mount);
		read_all(path, list, CLAIMS_FILE_MAX + 1);
		claims = 0;
		for (char *line = strtok_r(list, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			char *sp = strchr(line, ' ');
			if (!sp)
				return 1;
			*sp = '\0';
			snprintf(path, sizeof(path), "%s/%s/assignments/%s", mount, line, sp + 1);
			if (read_all(path, claim, sizeof(claim)) == 0)
				return 1;
			claims++;
		}
		t[i] = monotonic_ns() - t0;
	}
	printf("%" PRId64 " %zu\n", percentile(t, rounds, 0.5), claims);
	return 0;
}

/* One listing of dir with an fstatat of every entry (ls -l): ns, or -1. */
static int64_t list_once(const char *dir, size_t *entries)
{
	int64_t t0 = monotonic_ns();
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;

	if (!d) {
		perror(dir);
		return -1;
	}
	*entries = 0;
	while ((de = readdir(d))) {
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			perror(de->d_name);
			return -1;
		}
		(*entries)++;
	}
	return monotonic_ns() - t0;
}

static int cmd_lss(size_t rounds, char **dirs, size_t n)
{
	_cleanup_free_ int64_t *t = malloc(rounds * n * sizeof(*t));
	_cleanup_free_ size_t *entries = calloc(n, sizeof(*entries));

	if (!t || !entries)
		return 1;
	for (size_t r = 0; r < rounds; r++)
		for (size_t d = 0; d < n; d++)
			if ((t[d * rounds + r] = list_once(dirs[d], &entries[d])) < 0)
				return 1;
	for (size_t d = 0; d < n; d++)
		printf("%s%" PRId64 " %zu", d ? " " : "", percentile(t + d * rounds, rounds, 0.5),
		       entries[d]);
	printf("\n");
	return 0;
}

/* ---- ingest ------------------------------------------------------------------ */

struct writer {
	pthread_t thread;
	char report[512];
	unsigned index, count;
	int error;
};

static pthread_barrier_t start_barrier;

/* One durable report through REPORT: open, write, read the outcome back,
 * close.  0 or an errno. */
static int report_once(const char *report, unsigned writer, unsigned i)
{
	char command[256], at[RFC3339_BUFSZ], outcome[128];
	int fd = open(report, O_RDWR | O_CLOEXEC), r = 0;

	if (fd < 0)
		return errno;
	rfc3339_now(at);
	int n = snprintf(command, sizeof(command),
			 "failed bench-%u-%u %s NVRM: RmInitAdapter failed! (0x22:0x65:884)",
			 writer, i, at);
	if (write(fd, command, (size_t)n) != n || pread(fd, outcome, sizeof(outcome), 0) <= 0)
		r = errno ? errno : EIO;
	close(fd);
	return r;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	pthread_barrier_wait(&start_barrier);
	for (unsigned i = 0; i < w->count && !w->error; i++)
		w->error = report_once(w->report, w->index, i);
	return NULL;
}

/* COUNT reports through one file, one at a time (the floor's: reportfloor.c). */
static int cmd_reports(const char *report, unsigned count)
{
	int64_t t0 = monotonic_ns();

	for (unsigned i = 0; i < count; i++) {
		int r = report_once(report, 0, i);
		if (r) {
			fprintf(stderr, "vfbench: %s: %s\n", report, strerror(r));
			return 1;
		}
	}
	printf("%.1f\n", (double)count * 1e9 / (double)(monotonic_ns() - t0));
	return 0;
}

#define ALTERNATE_FILES_MAX 16

/* One side of `alternate`: its report files, from a comma-separated list. */
struct side {
	char *files[ALTERNATE_FILES_MAX];
	unsigned n_files;
	int64_t spent;
	unsigned done;
};

static int side_parse(char *list, struct side *sd)
{
	char *save = NULL;

	for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		if (sd->n_files == ALTERNATE_FILES_MAX)
			return -E2BIG;
		sd->files[sd->n_files++] = f;
	}
	return sd->n_files ? 0 : -EINVAL;
}

/* Two servers' report files in one process, batch by batch: a slow spell
 * of the disk (whose fdatasync is most of a report) falls on both alike,
 * and so does going first, which the order A B B A gives each side as
 * often.  A side with several files writes COUNT / n of its reports to
 * each in turn, so that no VF's failures grow past what a shorter run's
 * would. */
static int cmd_alternate(unsigned count, unsigned batch, char *a, char *b)
{
	struct side sides[2] = { 0 };

	if (side_parse(a, &sides[0]) < 0 || side_parse(b, &sides[1]) < 0) {
		fprintf(stderr, "vfbench: alternate: 1..%d comma-separated files a side\n",
			ALTERNATE_FILES_MAX);
		return 2;
	}
	for (unsigned k = 0; sides[0].done < count || sides[1].done < count; k++) {
		struct side *sd = &sides[(k % 4 == 0 || k % 4 == 3) ? 0 : 1];
		unsigned n = count - sd->done < batch ? count - sd->done : batch;
		unsigned per_file = (count + sd->n_files - 1) / sd->n_files;
		int64_t t0 = monotonic_ns();

		for (unsigned i = 0; i < n; i++) {
			const char *file = sd->files[(sd->done + i) / per_file];
			int r = report_once(file, 0, sd->done + i);
			if (r) {
				fprintf(stderr, "vfbench: %s: %s\n", file, strerror(r));
				return 1;
			}
		}
		sd->spent += monotonic_ns() - t0;
		sd->done += n;
	}
	printf("%.1f %.1f\n", (double)count * 1e9 / (double)sides[0].spent,
	       (double)count * 1e9 / (double)sides[1].spent);
	return 0;
}

static int cmd_ingest(const char *mount, unsigned writers, unsigned count, size_t first)
{
	static char names[BENCH_VFS_MAX][VF_ADDR_BUFSZ];
	size_t n_vfs = 0;
	_cleanup_closedir_ DIR *d = opendir(mount);
	struct dirent *de;
	_cleanup_free_ struct writer *w = calloc(writers, sizeof(*w));

	if (!d || !w)
		return 1;
	while ((de = readdir(d)) && n_vfs < BENCH_VFS_MAX)
		if (vf_address_valid(de->d_name)) /* exactly VF_ADDR_LEN long */
			memcpy(names[n_vfs++], de->d_name, VF_ADDR_BUFSZ);
	if (n_vfs < first + writers) {
		fprintf(stderr, "vfbench: %zu VFs for %u writers from the %zu-th\n", n_vfs, writers,
			first);
		return 1;
	}
	pthread_barrier_init(&start_barrier, NULL, writers + 1);
	for (unsigned i = 0; i < writers; i++) {
		w[i].index = i;
		w[i].count = count / writers + (i < count % writers);
		snprintf(w[i].report, sizeof(w[i].report), "%s/%s/report", mount, names[first + i]);
		if (pthread_create(&w[i].thread, NULL, writer_main, &w[i]) != 0)
			return 1;
	}
	int64_t t0 = monotonic_ns();
	pthread_barrier_wait(&start_barrier);
	for (unsigned i = 0; i < writers; i++)
		pthread_join(w[i].thread, NULL);
	int64_t elapsed = monotonic_ns() - t0;
	for (unsigned i = 0; i < writers; i++)
		if (w[i].error) {
			fprintf(stderr, "vfbench: writer %u: %s\n", i, strerror(w[i].error));
			return 1;
		}
	printf("%.1f\n", (double)count * 1e9 / (double)elapsed);
	return 0;
}

static int cmd_sqlite(const char *path, unsigned count)
{
	struct bare_loop *b = NULL;

	if (bare_open(path, count, &b) < 0)
		return 1;
	int64_t t0 = monotonic_ns();
	for (unsigned i = 0; i < count; i++)
		if (bare_commit(b) < 0) {
			bare_close(b);
			return 1;
		}
	int64_t elapsed = monotonic_ns() - t0;
	bare_close(b);
	printf("%.1f\n", (double)count * 1e9 / (double)elapsed);
	return 0;
}

static int cmd_latency(const char *path, double seconds)
{
	size_t cap = 1 << 20, n = 0;
	_cleanup_free_ int64_t *t = malloc(cap * sizeof(*t));
	int64_t end = monotonic_ns() + (int64_t)(seconds * 1e9);

	if (!t)
		return 1;
	while (monotonic_ns() < end && n < cap)
		t[n++] = read_once(path);
	if (n == 0)
		return 1;
	int64_t p50 = percentile(t, n, 0.5), p99 = percentile(t, n, 0.99);
	printf("%zu %" PRId64 " %" PRId64 " %" PRId64 "\n", n, p50, p99, t[n - 1]);
	return 0;
}

/* The test's VF naming (run-benchmarks.sh vf_name): i < 4096. */
static void vf_name(unsigned i, char out[static VF_ADDR_BUFSZ])
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "0000:%02x:%02x.%u", (0x80 + i / 256) & 0xff, (i / 8) % 32,
		 i % 8);
	memcpy(out, tmp, VF_ADDR_BUFSZ - 1);
	out[VF_ADDR_BUFSZ - 1] = '\0';
}

static int cmd_populate(const char *path, unsigned vfs, unsigned failures)
{
	struct store *s = NULL;
	struct store_options opt = { .path = path, .threshold = 1000, .max_quarantined = -1 };
	char vf[VF_ADDR_BUFSZ], id[64], at[RFC3339_BUFSZ];
	int r;

	if (store_open(&opt, &s) < 0 || !store_status(s, NULL, 0))
		return 1;
	for (unsigned i = 0; i < vfs; i++) {
		vf_name(i, vf);
		r = store_vf_register(s, vf, NULL);
		if (r < 0 && r != -EEXIST)
			return 1;
	}
	for (unsigned i = 0; i < failures; i++) {
		struct store_failure_result res;
		unsigned v = i % vfs;
		vf_name(v, vf);
		snprintf(id, sizeof(id), "vm-%u", i);
		rfc3339_format(1764400000 + i, 0, at);
		r = store_report_failure(
			s, vf, id, at,
			"NVRM: GPU 0000:00:05.0: RmInitAdapter failed! (0x22:0x65:884)", &res);
		if (r < 0) {
			fprintf(stderr, "vfbench: report %u: %s\n", i, strerror(-r));
			return 1;
		}
	}
	store_close(s);
	printf("%u %u\n", vfs, failures);
	return 0;
}

/* The store alone (no mount): COUNT reports to the VF-th VF of a store made
 * by `populate`, one at a time, each durable before the next. */
#define STORE_WARMUP 400
static int cmd_store(const char *path, unsigned count, unsigned vf_index)
{
	struct store *s = NULL;
	struct store_options opt = { .path = path, .threshold = 0, .max_quarantined = -1 };
	char vf[VF_ADDR_BUFSZ], id[64], at[RFC3339_BUFSZ];

	if (store_open(&opt, &s) < 0 || !store_status(s, NULL, 0))
		return 1;
	/* Untimed first, on the next VF, as many reports as the WAL needs to
	 * pass an automatic checkpoint (1000 pages, a few a report): the timed
	 * reports overwrite WAL frames already on disk, as a long-running
	 * daemon's do and as the bare loop's timed commits do (a growing WAL's
	 * every fdatasync also syncs its size). */
	int64_t t0 = 0;
	for (unsigned i = 0; i < count + STORE_WARMUP; i++) {
		struct store_failure_result res;
		if (i == STORE_WARMUP)
			t0 = monotonic_ns();
		vf_name(i < STORE_WARMUP ? vf_index + 1 : vf_index, vf);
		snprintf(id, sizeof(id), "store-%u", i);
		rfc3339_now(at);
		int r = store_report_failure(s, vf, id, at,
					     "NVRM: RmInitAdapter failed! (0x22:0x65:884)", &res);
		if (r < 0) {
			fprintf(stderr, "vfbench: report %u: %s\n", i, strerror(-r));
			return 1;
		}
	}
	int64_t elapsed = monotonic_ns() - t0;
	store_close(s);
	printf("%.1f\n", (double)count * 1e9 / (double)elapsed);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t a = 0, b = 0, c = 0;

	if (argc == 4 && strcmp(argv[1], "read") == 0 &&
	    parse_uint64(argv[3], 1, 100000000, &a) == 0)
		return cmd_read(argv[2], a);
	if (argc == 4 && strcmp(argv[1], "ls") == 0 && parse_uint64(argv[3], 1, 100000000, &a) == 0)
		return cmd_lss(a, argv + 2, 1);
	if (argc >= 5 && strcmp(argv[1], "reads") == 0 &&
	    parse_uint64(argv[2], 1, 1000000, &a) == 0 &&
	    parse_uint64(argv[3], 1, 1000000, &b) == 0)
		return cmd_reads(a, b, argv + 4, (size_t)argc - 4);
	if (argc >= 4 && strcmp(argv[1], "lss") == 0 && parse_uint64(argv[2], 1, 1000000, &a) == 0)
		return cmd_lss(a, argv + 3, (size_t)argc - 3);
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "ingest") == 0 &&
	    parse_uint64(argv[3], 1, 1024, &a) == 0 &&
	    parse_uint64(argv[4], 1, 10000000, &b) == 0 &&
	    (argc == 5 || parse_uint64(argv[5], 0, BENCH_VFS_MAX, &c) == 0))
		return cmd_ingest(argv[2], (unsigned)a, (unsigned)b, (size_t)c);
	if (argc == 4 && strcmp(argv[1], "reports") == 0 &&
	    parse_uint64(argv[3], 1, 10000000, &a) == 0)
		return cmd_reports(argv[2], (unsigned)a);
	if (argc == 6 && strcmp(argv[1], "alternate") == 0 &&
	    parse_uint64(argv[2], 1, 10000000, &a) == 0 &&
	    parse_uint64(argv[3], 1, 10000000, &b) == 0)
		return cmd_alternate((unsigned)a, (unsigned)b, argv[4], argv[5]);
	if (argc == 4 && strcmp(argv[1], "sqlite") == 0 &&
	    parse_uint64(argv[3], 1, 10000000, &a) == 0)
		return cmd_sqlite(argv[2], (unsigned)a);
	if (argc == 5 && strcmp(argv[1], "store") == 0 &&
	    parse_uint64(argv[3], 1, 10000000, &a) == 0 &&
	    parse_uint64(argv[4], 0, BENCH_VFS_MAX - 2, &b) == 0)
		return cmd_store(argv[2], (unsigned)a, (unsigned)b);
	if (argc == 4 && strcmp(argv[1], "claims") == 0 && parse_uint64(argv[3], 1, 1000, &a) == 0)
		return cmd_claims(argv[2], a);
	if (argc == 4 && strcmp(argv[1], "latency") == 0)
		return cmd_latency(argv[2], atof(argv[3]));
	if (argc == 5 && strcmp(argv[1], "populate") == 0 &&
	    parse_uint64(argv[3], 1, VFS_MAX, &a) == 0 &&
	    parse_uint64(argv[4], 0, 10000000, &b) == 0)
		return cmd_populate(argv[2], (unsigned)a, (unsigned)b);
	fprintf(stderr, "usage: see the header of tests/bench/vfbench.c\n");
	return 2;
}
