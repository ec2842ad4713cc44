/* SPDX-License-Identifier: MIT */
/*
 * vffresh.c - the driver of the freshness stress test
 * (tests/fs/test-freshness.sh).  Failing open is the worst
 * bug vfhealth can have: a read that returns the state from before a write
 * that has already returned.  This program counts such reads.
 *
 *   vffresh pairs MOUNT ROUNDS VF...      rounds of concurrent changes, each
 *                                         read back by readers in other
 *                                         processes and by watchers
 *   vffresh hammer MOUNT SECONDS READERS VF
 *                                         READERS processes reading the same
 *                                         inodes while one writer changes
 *                                         them: a hang is detected and
 *                                         reported, never waited out
 *
 * Each prints one line of figures on stdout and exits 0 when nothing was
 * stale, torn or failed, 1 when something was (the first few are described
 * on stderr), 3 on a hang (nothing progressed for HANG_S seconds: its
 * processes are killed, so the caller can abort the mount and fail).
 *
 * Design notes
 * ------------
 * Processes.  The parent runs one writer thread per VF (pairs) or one writer
 * (hammer), and the coordinator.  Readers and watchers are forked child
 * processes (readers in other processes, as placement is), dying with the
 * parent (PR_SET_PDEATHSIG).  They share one anonymous MAP_SHARED region;
 * every word more than one process changes is an atomic, and the ones a
 * process sleeps on are futex words (no sleep where an event can be waited
 * for).
 *
 * A round (pairs).  Every writer takes its VF out of service or back
 * concurrently, each write returning before the round is announced: the
 * writers of even VFs by holding it (`1` or `0` to VF/quarantined, the file
 * read back), those of odd VFs through VF/report (the daemon runs with
 * threshold 1: `failed` quarantines, `ok` rescinds), so that the file read
 * back is not the one written and only the daemon's invalidation can make
 * a cached page fresh (the kernel drops a file's pages itself when that
 * file is written).  The writers read VF/quarantined back at once (a fresh
 * open and a held descriptor).  The coordinator then publishes the expected state of every
 * VF and the round number (a futex wake) and waits until every reader and
 * watcher has acknowledged it.  Nothing changes while a round is checked,
 * so every read must show exactly the published state:
 *  - fresh: open+read+close of VF/quarantined, VF/state and the derived
 *    top-level files quarantined, allocatable and resources;
 *  - held: the same files through descriptors opened once, re-read at offset 0;
 *  - mmap: VF/quarantined through a mapping made once and through a fresh
 *    mapping (when the file is mappable: its size is known; else counted as
 *    not mappable);
 *  - fillers read every VF/quarantined without pause, also while the
 *    writers write, so that a page the kernel dropped when the write began
 *    is filled again with the old state before the change commits: only
 *    an invalidation between the commit and the writer's reply removes it
 *    (without fillers the readers, idle during the writes, could not see
 *    a missing invalidation);
 *  - inotify and poll watchers: after an event (IN_MODIFY/IN_CLOSE_WRITE, or
 *    POLLPRI on a held descriptor) they re-read the file; the round is
 *    acknowledged once every VF shows its new value.  A watcher that does
 *    not see it within WATCH_DEADLINE_S missed it: counted stale.
 * A read that parses but shows another state is stale; one that does not
 * parse (a line cut, a size from one moment and content from another) is
 * torn.  A per-VF file read is one change/read pair; a top-level file read
 * checks every VF's change of the round, so it is one pair per VF.
 *
 * Hammer.  READERS processes read VF/quarantined (fresh, held, mmap) and the
 * top-level quarantined as fast as they can while the writer toggles the
 * hold; contents are checked for tears only (the value moves under them).
 * The parent watches every process's progress counter once a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_VFS 16
#define MAX_PROCS 80
#define HANG_S 20
#define WATCH_DEADLINE_S 10
#define BUF_MAX 65536
#define ERRORS_SHOWN 5

enum kind {
	K_FRESH,
	K_HELD,
	K_MMAP,
	K_INOTIFY,
	K_POLL,
	K_FILLER,
	K_HAMMER
};
static const char *const kind_name[] = { "fresh", "held",   "mmap",  "inotify",
					 "poll",  "filler", "hammer" };

struct proc_stats {
	atomic_uint_fast64_t pairs, stale, torn, errors, unmappable, progress;
};

struct shared {
	atomic_uint round; /* futex: the round being checked (0: none yet) */
	atomic_uint acks;  /* futex: processes that checked the round */
	atomic_bool stop;
	int expect[MAX_VFS];  /* the round's state: 1 held, 0 not */
	atomic_uint reported; /* problems described on stderr so far */
	struct proc_stats procs[MAX_PROCS];
	struct proc_stats writers;
};

static struct shared *sh;
static const char *mnt;
static char vfs[MAX_VFS][64];
static int n_vfs;

static long futex(atomic_uint *word, int op, unsigned val, const struct timespec *timeout)
{
	return syscall(SYS_futex, (unsigned *)word, op, val, timeout, NULL, 0);
}

static void wake_all(atomic_uint *word)
{
	futex(word, FUTEX_WAKE, INT_MAX, NULL);
}

/* Wait while *word == old, at most 1 s; the callers loop. */
static void wait_change(atomic_uint *word, unsigned old)
{
	struct timespec t = { .tv_sec = 1 };

	futex(word, FUTEX_WAIT, old, &t);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&sh->reported, 1) >= ERRORS_SHOWN)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static void path_of(char *buf, size_t size, int vf, const char *file)
{
	if (vf < 0)
		snprintf(buf, size, "%s/%s", mnt, file);
	else
		snprintf(buf, size, "%s/%s/%s", mnt, vfs[vf], file);
}

/* -- what a read must show ----------------------------------------------------------- */

enum verdict {
	FRESH,
	STALE,
	TORN
};

static enum verdict check_quarantined(const char *buf, ssize_t n, int want)
{
	if (n != 2 || buf[1] != '\n' || (buf[0] != '0' && buf[0] != '1'))
		return TORN;
	return buf[0] - '0' == want ? FRESH : STALE;
}

static enum verdict check_state(const char *buf, ssize_t n, int vf, int want)
{
	const char *expect = !want ? "ok\n" : vf % 2 ? "quarantined\n" : "held\n";
	static const char *const names[] = { "ok\n", "failing\n", "quarantined\n", "held\n",
					     "held-back\n" };
	bool known = false;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		known |= (size_t)n == strlen(names[i]) && memcmp(buf, names[i], (size_t)n) == 0;
	if (!known)
		return TORN;
	return (size_t)n == strlen(expect) && memcmp(buf, expect, (size_t)n) == 0 ? FRESH : STALE;
}

/* A list of VF addresses, one a line: exactly the VFs whose state is `held`
 * (quarantined) or is not (allocatable). */
static enum verdict check_list(const char *buf, ssize_t n, bool held)
{
	bool in[MAX_VFS] = { false };
	const char *p = buf, *end = buf + n;

	if (n > 0 && buf[n - 1] != '\n')
		return TORN;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int found = -1;

		for (int i = 0; i < n_vfs && found < 0; i++)
			if ((size_t)(nl - p) == strlen(vfs[i]) &&
			    memcmp(p, vfs[i], (size_t)(nl - p)) == 0)
				found = i;
		if (found < 0 || in[found])
			return TORN;
		in[found] = true;
		p = nl + 1;
	}
	for (int i = 0; i < n_vfs; i++)
		if (in[i] != (sh->expect[i] == held))
			return STALE;
	return FRESH;
}

static enum verdict check_resources(const char *buf, ssize_t n)
{
	unsigned long total, used, alloc, quar;
	char copy[512];
	int held = 0, len;

	if (n <= 0 || (size_t)n >= sizeof(copy) || buf[n - 1] != '\n')
		return TORN;
	memcpy(copy, buf, (size_t)n);
	copy[n] = '\0';
	if (sscanf(copy,
		   "total_slots %lu\nused_slots %lu\nallocatable_slots %lu\nquarantined_slots %lu\n%n",
		   &total, &used, &alloc, &quar, &len) != 4 ||
	    len != n)
		return TORN;
	if (total != (unsigned long)n_vfs || used != 0 || alloc + quar != total)
		return TORN; /* counts from two moments */
	for (int i = 0; i < n_vfs; i++)
		held += sh->expect[i];
	return quar == (unsigned long)held ? FRESH : STALE;
}

enum file {
	F_QUARANTINED,
	F_STATE,
	F_TOP_QUARANTINED,
	F_ALLOCATABLE,
	F_RESOURCES
};
static const char *const file_name[] = { "quarantined", "state", "quarantined", "allocatable",
					 "resources" };

static enum verdict check(enum file f, int vf, const char *buf, ssize_t n)
{
	switch (f) {
	case F_QUARANTINED:
		return check_quarantined(buf, n, sh->expect[vf]);
	case F_STATE:
		return check_state(buf, n, vf, sh->expect[vf]);
	case F_TOP_QUARANTINED:
		return check_list(buf, n, true);
	case F_ALLOCATABLE:
		return check_list(buf, n, false);
	case F_RESOURCES:
		return check_resources(buf, n);
	}
	return TORN;
}

/* Count one read of f: pairs it proves, or what went wrong. */
static void count(struct proc_stats *st, const char *who, enum file f, int vf, const char *buf,
		  ssize_t n, int err)
{
	unsigned round = atomic_load(&sh->round);
	char path[PATH_MAX];
	enum verdict v;

	path_of(path, sizeof(path), f <= F_STATE ? vf : -1, file_name[f]);
	if (n < 0) {
		atomic_fetch_add(&st->errors, 1);
		report("%s: round %u: %s: %s\n", who, round, path, strerror(err));
		return;
	}
	v = check(f, vf, buf, n);
	atomic_fetch_add(&st->pairs, f <= F_STATE ? 1 : (unsigned)n_vfs);
	if (v == FRESH)
		return;
	atomic_fetch_add(v == STALE ? &st->stale : &st->torn, 1);
	report("%s: round %u: %s read %s: \"%.*s\"\n", who, round, path,
	       v == STALE ? "STALE" : "TORN", (int)(n > 80 ? 80 : n), buf);
}

/* -- readers ----------------------------------------------------------------------- */

static ssize_t read_fresh(const char *path, char *buf, size_t size, int *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = -1, r;
	size_t got = 0;

	if (fd < 0) {
		*err = errno;
		return -1;
	}
	/* to EOF, as cat does: the kernel may split what the daemon rendered */
	while ((r = read(fd, buf + got, size - got)) > 0 && got + (size_t)r < size)
		got += (size_t)r;
	if (r < 0)
		*err = errno;
	else
		n = (ssize_t)(got + (size_t)(r > 0 ? r : 0));
	close(fd);
	return n;
}

static ssize_t read_held(int fd, char *buf, size_t size, int *err)
{
	ssize_t n = pread(fd, buf, size, 0);

	if (n < 0)
		*err = errno;
	return n;
}

struct held_files {
	int fd[MAX_VFS][2]; /* quarantined, state */
	int top[3];         /* quarantined, allocatable, resources */
	char *map[MAX_VFS]; /* VF/quarantined mapped once; NULL: not mappable */
	bool mappable;
};

static int open_or_die(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		_exit(1);
	}
	return fd;
}

static void held_open(struct held_files *h, bool map)
{
	char path[PATH_MAX];

	for (int i = 0; i < n_vfs; i++) {
		path_of(path, sizeof(path), i, "quarantined");
		h->fd[i][0] = open_or_die(path, O_RDONLY);
		path_of(path, sizeof(path), i, "state");
		h->fd[i][1] = open_or_die(path, O_RDONLY);
		h->map[i] = NULL;
	}
	for (int t = 0; t < 3; t++) {
		path_of(path, sizeof(path), -1, file_name[F_TOP_QUARANTINED + t]);
		h->top[t] = open_or_die(path, O_RDONLY);
	}
	h->mappable = false;
	if (!map)
		return;
	struct stat st;
	if (fstat(h->fd[0][0], &st) == 0 && st.st_size > 0) {
		h->mappable = true;
		for (int i = 0; i < n_vfs && h->mappable; i++) {
			void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, h->fd[i][0], 0);
			h->map[i] = p == MAP_FAILED ? NULL : p;
			h->mappable = h->map[i] != NULL;
		}
	}
}

/* One check of the current round by a reader of the given kind. */
static void reader_check(enum kind k, struct held_files *h, struct proc_stats *st)
{
	static char buf[BUF_MAX];
	char path[PATH_MAX];
	const char *who = kind_name[k];
	int err = 0;
	ssize_t n;

	for (int i = 0; i < n_vfs; i++) {
		if (k == K_MMAP) {
			struct stat s;
			int fd;

			if (!h->mappable) {
				atomic_fetch_add(&st->unmappable, 1);
				continue;
			}
			/* the mapping made once, and a fresh one */
			n = (ssize_t)strnlen(h->map[i], 2);
			memcpy(buf, h->map[i], (size_t)n);
			count(st, "mmap-held", F_QUARANTINED, i, buf, n, 0);
			path_of(path, sizeof(path), i, "quarantined");
			fd = open_or_die(path, O_RDONLY);
			if (fstat(fd, &s) == 0 && s.st_size > 0) {
				char *p = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_SHARED, fd,
					       0);
				if (p != MAP_FAILED) {
					n = (ssize_t)s.st_size;
					memcpy(buf, p, (size_t)n);
					munmap(p, (size_t)s.st_size);
					count(st, "mmap-fresh", F_QUARANTINED, i, buf, n, 0);
				} else {
					count(st, "mmap-fresh", F_QUARANTINED, i, buf, -1, errno);
				}
			} else {
				atomic_fetch_add(&st->unmappable, 1);
			}
			close(fd);
			continue;
		}
		for (int f = F_QUARANTINED; f <= F_STATE; f++) {
			if (k == K_FRESH) {
				path_of(path, sizeof(path), i, file_name[f]);
				n = read_fresh(path, buf, sizeof(buf), &err);
			} else {
				n = read_held(h->fd[i][f], buf, sizeof(buf), &err);
			}
			count(st, who, (enum file)f, i, buf, n, err);
		}
	}
	if (k == K_MMAP)
		return;
	for (int t = 0; t < 3; t++) {
		enum file f = (enum file)(F_TOP_QUARANTINED + t);
		if (k == K_FRESH) {
			path_of(path, sizeof(path), -1, file_name[f]);
			n = read_fresh(path, buf, sizeof(buf), &err);
		} else {
			n = read_held(h->top[t], buf, sizeof(buf), &err);
		}
		count(st, who, f, -1, buf, n, err);
	}
}

/* -- watchers ---------------------------------------------------------------------- */

/* Re-read VF i's quarantined after an event; *seen is what it showed. */
static void watch_read(enum kind k, int fd, int i, struct proc_stats *st, int *seen)
{
	char buf[64], path[PATH_MAX];
	int err = 0;
	ssize_t n;

	if (k == K_POLL) {
		n = read_held(fd, buf, sizeof(buf), &err);
	} else {
		path_of(path, sizeof(path), i, "quarantined");
		n = read_fresh(path, buf, sizeof(buf), &err);
	}
	if (n < 0) {
		atomic_fetch_add(&st->errors, 1);
		report("%s: %s/quarantined: %s\n", kind_name[k], vfs[i], strerror(err));
		return;
	}
	if (n != 2 || buf[1] != '\n' || (buf[0] != '0' && buf[0] != '1')) {
		atomic_fetch_add(&st->torn, 1);
		report("%s: %s/quarantined read TORN: \"%.*s\"\n", kind_name[k], vfs[i], (int)n,
		       buf);
		return;
	}
	seen[i] = buf[0] - '0';
}

static _Noreturn void watcher_main(enum kind k, struct proc_stats *st)
{
	int seen[MAX_VFS], fds[MAX_VFS], wd[MAX_VFS], in = -1;
	char path[PATH_MAX];
	unsigned done = 0;

	for (int i = 0; i < n_vfs; i++) {
		path_of(path, sizeof(path), i, "quarantined");
		seen[i] = -1;
		if (k == K_INOTIFY) {
			if (in < 0)
				in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
			wd[i] = inotify_add_watch(in, path, IN_MODIFY | IN_CLOSE_WRITE);
			if (in < 0 || wd[i] < 0) {
				fprintf(stderr, "inotify %s: %s\n", path, strerror(errno));
				_exit(1);
			}
		} else {
			fds[i] = open_or_die(path, O_RDONLY);
		}
	}
	for (int i = 0; i < n_vfs; i++) /* the state before any event */
		watch_read(k, k == K_POLL ? fds[i] : -1, i, st, seen);

	while (!atomic_load(&sh->stop)) {
		unsigned round = atomic_load(&sh->round);
		double deadline;

		if (round == done) {
			wait_change(&sh->round, round);
			continue;
		}
		deadline = now_s() + WATCH_DEADLINE_S;
		for (;;) {
			bool all = true;

			for (int i = 0; i < n_vfs; i++)
				all &= seen[i] == sh->expect[i];
			if (all) {
				atomic_fetch_add(&st->pairs, (unsigned)n_vfs);
				break;
			}
			if (now_s() > deadline) {
				for (int i = 0; i < n_vfs; i++)
					if (seen[i] != sh->expect[i]) {
						atomic_fetch_add(&st->stale, 1);
						report("%s: round %u: %s/quarantined: no event showed %d "
						       "within %d s (last read %d)\n",
						       kind_name[k], round, vfs[i], sh->expect[i],
						       WATCH_DEADLINE_S, seen[i]);
						seen[i] = sh->expect[i];
					}
				break;
			}
			if (k == K_INOTIFY) {
				struct pollfd p = { .fd = in, .events = POLLIN };
				char ev[4096]
					__attribute__((aligned(__alignof__(struct inotify_event))));
				bool hit[MAX_VFS] = { false };
				ssize_t n;

				if (poll(&p, 1, 1000) <= 0)
					continue;
				n = read(in, ev, sizeof(ev));
				for (char *e = ev; n > 0 && e < ev + n;) {
					struct inotify_event *ie = (struct inotify_event *)e;
					for (int i = 0; i < n_vfs; i++)
						hit[i] |= ie->wd == wd[i];
					e += sizeof(*ie) + ie->len;
				}
				for (int i = 0; i < n_vfs; i++)
					if (hit[i])
						watch_read(k, -1, i, st, seen);
			} else {
				struct pollfd p[MAX_VFS];

				for (int i = 0; i < n_vfs; i++)
					p[i] = (struct pollfd){ .fd = fds[i], .events = POLLPRI };
				if (poll(p, (nfds_t)n_vfs, 1000) <= 0)
					continue;
				for (int i = 0; i < n_vfs; i++)
					if (p[i].revents & (POLLPRI | POLLERR))
						watch_read(k, fds[i], i, st, seen);
			}
		}
		atomic_fetch_add(&st->progress, 1);
		done = round;
		atomic_fetch_add(&sh->acks, 1);
		wake_all(&sh->acks);
	}
	_exit(0);
}

static _Noreturn void reader_main(enum kind k, struct proc_stats *st)
{
	struct held_files h;
	unsigned done = 0;

	held_open(&h, k == K_MMAP);
	while (!atomic_load(&sh->stop)) {
		unsigned round = atomic_load(&sh->round);

		if (round == done) {
			wait_change(&sh->round, round);
			continue;
		}
		reader_check(k, &h, st);
		atomic_fetch_add(&st->progress, 1);
		done = round;
		atomic_fetch_add(&sh->acks, 1);
		wake_all(&sh->acks);
	}
	_exit(0);
}

/* Keep the page cache of every VF/quarantined filled, whatever it says. */
static _Noreturn void filler_main(struct proc_stats *st)
{
	char buf[64], path[PATH_MAX];
	int err = 0;

	while (!atomic_load(&sh->stop))
		for (int i = 0; i < n_vfs; i++) {
			path_of(path, sizeof(path), i, "quarantined");
			if (read_fresh(path, buf, sizeof(buf), &err) < 0) {
				atomic_fetch_add(&st->errors, 1);
				report("filler: %s: %s\n", path, strerror(err));
			}
			atomic_fetch_add(&st->progress, 1);
		}
	_exit(0);
}

static pid_t spawn(enum kind k, int index)
{
	pid_t parent = getpid(), pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid > 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	if (k == K_INOTIFY || k == K_POLL)
		watcher_main(k, &sh->procs[index]);
	if (k == K_FILLER)
		filler_main(&sh->procs[index]);
	reader_main(k, &sh->procs[index]);
	_exit(0);
}

/* -- writers ----------------------------------------------------------------------- */

struct writer {
	pthread_t thread;
	int vf;
	int value;
	atomic_uint go;   /* futex: the round to write */
	atomic_uint done; /* futex: the round written */
	int held_fd;
	int error;
};

static atomic_uint writers_done; /* futex */

/* Take VF vf out of service (value 1) or back (0): a hold for even VFs, a
 * failed report (threshold 1) and its success for odd ones; `round` names
 * the report's assignment. */
static int write_value(int vf, int value, unsigned round)
{
	char path[PATH_MAX], command[128];
	int fd, r = 0, len;

	if (vf % 2 == 0) {
		path_of(path, sizeof(path), vf, "quarantined");
		len = snprintf(command, sizeof(command), "%d\n", value);
	} else {
		/* the `ok` of round r clears the failure of round r - 1 */
		unsigned failed = value ? round : round - 1;
		path_of(path, sizeof(path), vf, "report");
		len = snprintf(command, sizeof(command), "%s vm-%u 2026-01-01T00:%02u:%02u.%09uZ\n",
			       value ? "failed" : "ok", failed, failed / 60 % 60, failed % 60,
			       failed);
	}
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, command, (size_t)len) != len)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	unsigned done = 0;

	while (!atomic_load(&sh->stop)) {
		unsigned go = atomic_load(&w->go);
		char buf[64];
		int err = 0;
		ssize_t n;

		if (go == done) {
			wait_change(&w->go, go);
			continue;
		}
		int r = write_value(w->vf, w->value, go);
		if (r < 0) {
			atomic_fetch_add(&sh->writers.errors, 1);
			report("writer %s: %s\n", vfs[w->vf], strerror(-r));
		}
		/* the writer's own read-back, as soon as the write returned */
		sh->expect[w->vf] = w->value; /* this VF is only ours */
		char path[PATH_MAX];
		path_of(path, sizeof(path), w->vf, "quarantined");
		n = read_fresh(path, buf, sizeof(buf), &err);
		count(&sh->writers, "writer-fresh", F_QUARANTINED, w->vf, buf, n, err);
		n = read_held(w->held_fd, buf, sizeof(buf), &err);
		count(&sh->writers, "writer-held", F_QUARANTINED, w->vf, buf, n, err);
		atomic_fetch_add(&sh->writers.progress, 1);
		done = go;
		atomic_fetch_add(&writers_done, 1);
		wake_all(&writers_done);
	}
	return NULL;
}

/* Wait until *word reaches want; false after HANG_S without progress. */
static bool wait_count(atomic_uint *word, unsigned want)
{
	double deadline = now_s() + HANG_S;
	unsigned last = atomic_load(word);

	for (;;) {
		unsigned v = atomic_load(word);
		if (v >= want)
			return true;
		if (v != last) {
			last = v;
			deadline = now_s() + HANG_S;
		}
		if (now_s() > deadline)
			return false;
		wait_change(word, v);
	}
}

static void kill_all(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
}

static void totals(struct proc_stats *sum, int n_procs)
{
	memset(sum, 0, sizeof(*sum));
	for (int i = 0; i <= n_procs; i++) {
		struct proc_stats *p = i < n_procs ? &sh->procs[i] : &sh->writers;
		atomic_fetch_add(&sum->pairs, atomic_load(&p->pairs));
		atomic_fetch_add(&sum->stale, atomic_load(&p->stale));
		atomic_fetch_add(&sum->torn, atomic_load(&p->torn));
		atomic_fetch_add(&sum->errors, atomic_load(&p->errors));
		atomic_fetch_add(&sum->unmappable, atomic_load(&p->unmappable));
	}
}

static int cmd_pairs(unsigned rounds)
{
	static const enum kind kinds[] = { K_FRESH, K_HELD,   K_MMAP,  K_INOTIFY,
					   K_POLL,  K_FILLER, K_FILLER };
	const int n_procs = (int)(sizeof(kinds) / sizeof(kinds[0]));
	const int n_checkers = n_procs - 2; /* the fillers acknowledge nothing */
	struct writer w[MAX_VFS];
	pid_t pids[MAX_PROCS];
	struct proc_stats sum;
	char path[PATH_MAX];
	double t0 = now_s();
	bool hung = false;
	unsigned r;

	/* every VF starts in service, as the readers' first state says */
	for (int i = 0; i < n_vfs; i++) {
		if (i % 2 == 0 && write_value(i, 0, 0) < 0) {
			fprintf(stderr, "cannot clear %s\n", vfs[i]);
			return 1;
		}
		sh->expect[i] = 0;
	}
	for (int i = 0; i < n_procs; i++)
		pids[i] = spawn(kinds[i], i);
	for (int i = 0; i < n_vfs; i++) {
		w[i] = (struct writer){ .vf = i };
		path_of(path, sizeof(path), i, "quarantined");
		w[i].held_fd = open_or_die(path, O_RDONLY);
		pthread_create(&w[i].thread, NULL, writer_main, &w[i]);
	}
	for (r = 1; r <= rounds && !hung; r++) {
		atomic_store(&writers_done, 0);
		for (int i = 0; i < n_vfs; i++) {
			w[i].value = (int)(r & 1);
			atomic_store(&w[i].go, r);
			wake_all(&w[i].go);
		}
		if (!wait_count(&writers_done, (unsigned)n_vfs)) {
			fprintf(stderr, "HANG: the writers made no progress for %d s in round %u\n",
				HANG_S, r);
			hung = true;
			break;
		}
		atomic_store(&sh->acks, 0);
		atomic_store(&sh->round, r); /* expect[] is set: publish */
		wake_all(&sh->round);
		if (!wait_count(&sh->acks, (unsigned)n_checkers)) {
			fprintf(stderr, "HANG: the readers made no progress for %d s in round %u\n",
				HANG_S, r);
			for (int i = 0; i < n_procs; i++)
				fprintf(stderr,
					"  %s: %" PRIuFAST64
					" rounds checked (reads, for fillers)\n",
					kind_name[kinds[i]], atomic_load(&sh->procs[i].progress));
			hung = true;
		}
		totals(&sum, n_procs);
		if (atomic_load(&sum.stale) || atomic_load(&sum.torn) || atomic_load(&sum.errors)) {
			rounds = r; /* fail fast: a watcher's miss costs WATCH_DEADLINE_S a round */
			break;
		}
	}
	if (hung) {
		kill_all(pids, n_procs);
		printf("HANG after %u rounds\n", r - 1);
		fflush(stdout);
		_exit(3); /* writer threads may be stuck in the mount: exit kills them */
	}
	atomic_store(&sh->stop, true);
	wake_all(&sh->round);
	for (int i = 0; i < n_vfs; i++) {
		wake_all(&w[i].go);
		pthread_join(w[i].thread, NULL);
		close(w[i].held_fd);
	}
	for (int i = 0; i < n_procs; i++)
		waitpid(pids[i], NULL, 0);
	totals(&sum, n_procs);
	printf("pairs %" PRIuFAST64 " stale %" PRIuFAST64 " torn %" PRIuFAST64
	       " errors %" PRIuFAST64 " rounds %u vfs %d seconds %.1f mmap %s",
	       atomic_load(&sum.pairs), atomic_load(&sum.stale), atomic_load(&sum.torn),
	       atomic_load(&sum.errors), rounds, n_vfs, now_s() - t0,
	       atomic_load(&sum.unmappable) ? "not-mappable" : "checked");
	for (int i = 0; i < n_checkers; i++)
		printf(" %s %" PRIuFAST64, kind_name[kinds[i]], atomic_load(&sh->procs[i].pairs));
	printf(" writer %" PRIuFAST64 "\n", atomic_load(&sh->writers.pairs));
	return atomic_load(&sum.stale) || atomic_load(&sum.torn) || atomic_load(&sum.errors) ? 1 :
											       0;
}

/* -- hammer ------------------------------------------------------------------------ */

static _Noreturn void hammer_main(struct proc_stats *st)
{
	static char buf[BUF_MAX];
	char path[PATH_MAX], top[PATH_MAX];
	int held, err = 0;
	char *map = NULL;
	struct stat s;
	ssize_t n;

	path_of(path, sizeof(path), 0, "quarantined");
	path_of(top, sizeof(top), -1, "quarantined");
	held = open_or_die(path, O_RDONLY);
	if (fstat(held, &s) == 0 && s.st_size > 0) {
		void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, held, 0);
		map = p == MAP_FAILED ? NULL : p;
	}
	while (!atomic_load(&sh->stop)) {
		for (int pass = 0; pass < 3; pass++) {
			if (pass == 0)
				n = read_fresh(path, buf, sizeof(buf), &err);
			else if (pass == 1)
				n = read_held(held, buf, sizeof(buf), &err);
			else if (map)
				memcpy(buf, map, (size_t)(n = 2));
			else
				continue;
			if (n < 0) {
				atomic_fetch_add(&st->errors, 1);
				report("hammer: %s: %s\n", path, strerror(err));
			} else if (check_quarantined(buf, n, buf[0] - '0') == TORN) {
				atomic_fetch_add(&st->torn, 1);
				report("hammer: %s TORN: \"%.*s\"\n", path, (int)(n > 80 ? 80 : n),
				       buf);
			}
			atomic_fetch_add(&st->pairs, 1);
		}
		n = read_fresh(top, buf, sizeof(buf), &err);
		if (n < 0) {
			atomic_fetch_add(&st->errors, 1);
			report("hammer: %s: %s\n", top, strerror(err));
		} else if (n != 0 &&
			   !((size_t)n == strlen(vfs[0]) + 1 &&
			     memcmp(buf, vfs[0], (size_t)n - 1) == 0 && buf[n - 1] == '\n')) {
			atomic_fetch_add(&st->torn, 1);
			report("hammer: %s TORN: \"%.*s\"\n", top, (int)(n > 80 ? 80 : n), buf);
		}
		atomic_fetch_add(&st->progress, 1);
	}
	_exit(0);
}

static void *hammer_writer(void *arg)
{
	for (int v = 1; !atomic_load(&sh->stop); v ^= 1) {
		int r = write_value(0, v, 0);
		if (r < 0) {
			atomic_fetch_add(&sh->writers.errors, 1);
			report("hammer writer: %s\n", strerror(-r));
		}
		atomic_fetch_add(&sh->writers.progress, 1);
		atomic_fetch_add(&sh->writers.pairs, 1);
	}
	return NULL;
}

static int cmd_hammer(double seconds, int readers)
{
	pid_t pids[MAX_PROCS];
	uint_fast64_t last[MAX_PROCS + 1] = { 0 };
	double stuck_since[MAX_PROCS + 1], t0 = now_s();
	struct proc_stats sum;
	pthread_t writer;

	for (int i = 0; i < readers; i++) {
		pid_t parent = getpid(), pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			hammer_main(&sh->procs[i]);
		}
		pids[i] = pid;
	}
	pthread_create(&writer, NULL, hammer_writer, NULL);
	for (int i = 0; i <= readers; i++)
		stuck_since[i] = now_s();
	while (now_s() - t0 < seconds) {
		struct timespec second = { .tv_sec = 1 };
		nanosleep(&second, NULL); /* the monitor's tick: nothing to wait for */
		for (int i = 0; i <= readers; i++) {
			struct proc_stats *p = i < readers ? &sh->procs[i] : &sh->writers;
			uint_fast64_t v = atomic_load(&p->progress);
			if (v != last[i]) {
				last[i] = v;
				stuck_since[i] = now_s();
			} else if (now_s() - stuck_since[i] > HANG_S) {
				fprintf(stderr,
					"HANG: %s %d made no progress for %d s (%.0f s in)\n",
					i < readers ? "reader" : "the writer", i, HANG_S,
					now_s() - t0);
				kill_all(pids, readers);
				printf("HANG\n");
				fflush(stdout);
				_exit(3);
			}
		}
	}
	atomic_store(&sh->stop, true);
	pthread_join(writer, NULL);
	for (int i = 0; i < readers; i++)
		waitpid(pids[i], NULL, 0);
	totals(&sum, readers);
	printf("reads %" PRIuFAST64 " writes %" PRIuFAST64 " torn %" PRIuFAST64
	       " errors %" PRIuFAST64 " readers %d seconds %.1f\n",
	       atomic_load(&sum.pairs) - atomic_load(&sh->writers.pairs),
	       atomic_load(&sh->writers.pairs), atomic_load(&sum.torn), atomic_load(&sum.errors),
	       readers, now_s() - t0);
	return atomic_load(&sum.torn) || atomic_load(&sum.errors) ? 1 : 0;
}

static _Noreturn void usage(void)
{
	fprintf(stderr, "usage: vffresh pairs MOUNT ROUNDS VF...\n"
			"       vffresh hammer MOUNT SECONDS READERS VF\n");
	exit(2);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 5)
		usage();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	mnt = argv[2];
	if (strcmp(argv[1], "pairs") == 0) {
		long rounds = strtol(argv[3], NULL, 10);
		for (int i = 4; i < argc && n_vfs < MAX_VFS; i++)
			snprintf(vfs[n_vfs++], sizeof(vfs[0]), "%s", argv[i]);
		if (rounds <= 0 || n_vfs == 0)
			usage();
		return cmd_pairs((unsigned)rounds);
	}
	if (strcmp(argv[1], "hammer") == 0 && argc == 6) {
		double seconds = strtod(argv[3], NULL);
		int readers = atoi(argv[4]);
		snprintf(vfs[n_vfs++], sizeof(vfs[0]), "%s", argv[5]);
		if (seconds <= 0 || readers <= 0 || readers > MAX_PROCS)
			usage();
		return cmd_hammer(seconds, readers);
	}
	usage();
}
