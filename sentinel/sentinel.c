/* SPDX-License-Identifier: MIT */
/*
 * sentinel.c - the scheduler, and the start and stop of the sentinel's
 * threads (sentinel.h); the other files are sentinel-internal.h's list.
 *
 * DESIGN NOTES
 *
 * Threads.  One scheduler thread and `concurrency` worker threads, all
 * created by sentinel_start() with every signal blocked (the program's main
 * thread owns SIGTERM/SIGINT; a SIGPIPE from a guest that hung up stays
 * pending on our thread instead of killing the process).
 *   - The scheduler waits on done_cond until the next poll or reconcile is
 *     due, runs it (poll.c, reconcile.c), and waits again.  A poll hands its
 *     targets to the workers (worker.c) and waits on done_cond until they
 *     are done; a reconcile runs on the scheduler alone.  Both judge
 *     liveness in one pass (liveness.h): one socket-table read per network
 *     namespace, another namespace's through a short-lived thread that
 *     setns(2)es there and is joined at once.  Without polls
 *     (--reconcile-only) no worker is started.
 *   - A worker waits on work_cond for the next target of the current scan.
 *
 * Locks.  One mutex, scan_lock (S1 in docs/architecture.md's lock table),
 * guards the scan: targets, target_count, next_target, active_workers and
 * stopping.  No lock is held across I/O: a worker reads its target
 * (immutable while the scan runs: the scheduler frees the array only after
 * active_workers drops to 0 with nothing left to hand out).  Counters are
 * atomics, so metrics rendering takes no lock.  The claim memory belongs to
 * the scheduler thread alone.
 *
 * Stopping a thread: one way.  stop_threads() sets `stopping` under
 * scan_lock, broadcasts the two conditions every thread waits on
 * (work_cond, done_cond) and joins each thread; a thread checks `stopping`
 * under the lock each time it wakes.  What a condition cannot reach, a
 * thread blocked in I/O, the cancel eventfd does: written once and never
 * read, it stays readable, so every agent_query() in flight or started
 * later returns -ECANCELED at once, closing its socket.  A worker whose
 * query was cancelled counts nothing and reports nothing; one already
 * writing its report finishes that one write(2)+pread (a report is one
 * write: never half-written).  Bounded by one poll_timeout plus one file
 * operation.
 */
#include "sentinel/sentinel-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/safefile.h"

#define WORKER_STACK_SIZE ((size_t)1024 * 1024)

static int render_metrics_to(void *sentinel, FILE *out)
{
	sentinel_render_metrics(sentinel, out);
	return 0;
}

/* Standalone: replace metrics_path atomically so a reader never sees half;
 * the directory may belong to someone else (node_exporter's textfile
 * directory), so no name in it is trusted (common/safefile.h). */
void write_metrics_file(struct sentinel *s)
{
	int r;

	if (!s->metrics_path)
		return;
	r = safefile_replace(s->metrics_path, 0644, render_metrics_to, s);
	if (r < 0)
		log_warn("sentinel: cannot write %s: %s", s->metrics_path, strerror(-r));
}

void sentinel_render_metrics(void *sentinel, FILE *out)
{
	struct sentinel *s = sentinel;

	if (s)
		sentinel_counters_render(s->counters, out);
}

void sentinel_get_stats(struct sentinel *s, struct sentinel_stats *ret)
{
	sentinel_counters_get(s->counters, ret);
}

/* Wait on done_cond until deadline (CLOCK_MONOTONIC ns) or the stop;
 * false on the stop. */
static bool sleep_until(struct sentinel *s, int64_t deadline)
{
	struct timespec ts = { .tv_sec = deadline / NSEC_PER_SEC,
			       .tv_nsec = deadline % NSEC_PER_SEC };
	bool running;

	pthread_mutex_lock(&s->scan_lock);
	while (!s->stopping && monotonic_ns() < deadline)
		if (pthread_cond_timedwait(&s->done_cond, &s->scan_lock, &ts) == ETIMEDOUT)
			break;
	running = !s->stopping;
	pthread_mutex_unlock(&s->scan_lock);
	return running;
}

static void *scheduler_main(void *userdata)
{
	struct sentinel *s = userdata;
	int64_t now = monotonic_ns();
	int64_t next_poll = s->opt.poll ? now + s->opt.poll_interval_ns : INT64_MAX;
	int64_t next_reconcile = s->opt.reconcile ? now : INT64_MAX;

	for (;;) {
		if (!sleep_until(s, MIN(next_poll, next_reconcile)))
			break;
		now = monotonic_ns();
		if (now >= next_reconcile) {
			run_reconcile(s);
			next_reconcile = MAX(now + s->opt.reconcile_interval_ns, monotonic_ns());
		}
		if (now >= next_poll) {
			run_poll(s);
			/* Every interval from the start of the last poll; a poll that
			 * overran its interval is followed by the next at once. */
			next_poll = MAX(now + s->opt.poll_interval_ns, monotonic_ns());
		}
	}
	return NULL;
}

/* ---- start / stop ------------------------------------------------------------------------------ */

static void sentinel_release(struct sentinel *s)
{
	if (s->cancel_fd >= 0)
		close(s->cancel_fd);
	pthread_cond_destroy(&s->done_cond);
	pthread_cond_destroy(&s->work_cond);
	pthread_mutex_destroy(&s->scan_lock);
	free(s->memory);
	free(s->workers);
	free(s->metrics_path);
	free(s->proc_root);
	free(s->mountpoint);
	free(s);
}

static void stop_threads(struct sentinel *s)
{
	uint64_t one = 1;

	/* Before the eventfd: a query that returns -ECANCELED must find the
	 * flag set, or its poll would be counted as complete without it. */
	atomic_store(&s->stopping_fast, true);
	/* Stays readable forever: every agent_query() now returns at once
	 * (the design notes). */
	if (write(s->cancel_fd, &one, sizeof(one)) != sizeof(one))
		log_err("sentinel: cannot signal shutdown: %s", strerror(errno));
	pthread_mutex_lock(&s->scan_lock);
	s->stopping = true;
	atomic_store(&s->stopping_fast, true);
	pthread_cond_broadcast(&s->work_cond);
	pthread_cond_broadcast(&s->done_cond);
	pthread_mutex_unlock(&s->scan_lock);

	if (s->scheduler_started)
		pthread_join(s->scheduler, NULL);
	for (unsigned i = 0; i < s->workers_started; i++)
		pthread_join(s->workers[i], NULL);
	s->scheduler_started = false;
	s->workers_started = 0;
}

static int options_valid(const struct sentinel_options *o)
{
	if (o->poll_interval_ns <= 0 || o->poll_interval_ns > SENTINEL_DURATION_MAX_NS ||
	    o->poll_timeout_ns <= 0 || o->poll_timeout_ns > SENTINEL_DURATION_MAX_NS ||
	    o->reconcile_interval_ns <= 0 || o->reconcile_interval_ns > SENTINEL_DURATION_MAX_NS ||
	    o->concurrency < SENTINEL_CONCURRENCY_MIN ||
	    o->concurrency > SENTINEL_CONCURRENCY_MAX || (!o->poll && !o->reconcile))
		return -EINVAL;
	return 0;
}

int sentinel_start(const char *mountpoint, const struct sentinel_options *o, struct sentinel **ret)
{
	return sentinel_start_counting(mountpoint, o, NULL, ret);
}

int sentinel_start_counting(const char *mountpoint, const struct sentinel_options *o,
			    struct sentinel_counters *counters, struct sentinel **ret)
{
	struct sentinel *s;
	pthread_condattr_t cattr;
	pthread_attr_t attr;
	sigset_t all, saved;
	int r;

	if (!mountpoint || mountpoint[0] != '/' || !o || !ret || options_valid(o) < 0)
		return -EINVAL;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cancel_fd = -1;
	s->opt = *o;
	s->counters = counters ? counters : &s->own_counters;
	atomic_store(&s->counters->poll_interval_ns, o->poll_interval_ns);
	atomic_store(&s->counters->poll_timeout_ns, o->poll_timeout_ns);
	atomic_store(&s->counters->concurrency, o->concurrency);
	sentinel_counters_init(&s->own_counters);
	pthread_mutex_init(&s->scan_lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC); /* sleep_until()'s deadlines */
	pthread_cond_init(&s->done_cond, &cattr);
	pthread_condattr_destroy(&cattr);
	s->mountpoint = strdup(mountpoint);
	s->proc_root = strdup(o->proc_root ? o->proc_root : "/proc");
	s->metrics_path = o->metrics_path ? strdup(o->metrics_path) : NULL;
	s->workers = calloc(o->concurrency, sizeof(*s->workers));
	if (!s->mountpoint || !s->proc_root || (o->metrics_path && !s->metrics_path) ||
	    !s->workers) {
		sentinel_release(s);
		return -ENOMEM;
	}
	/* Options point into our copies from now on. */
	s->opt.proc_root = s->proc_root;
	s->opt.metrics_path = s->metrics_path;
	/* Strip trailing slashes so paths we build look like the ones users type. */
	for (size_t n = strlen(s->mountpoint); n > 1 && s->mountpoint[n - 1] == '/'; n--)
		s->mountpoint[n - 1] = '\0';

	s->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->cancel_fd < 0) {
		r = negative_errno();
		sentinel_release(s);
		return r;
	}

	/* Our threads take no signals: see the design notes. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WORKER_STACK_SIZE);

	r = 0;
	/* Without polls nobody queries an agent: no workers. */
	for (unsigned i = 0; o->poll && i < o->concurrency; i++) {
		r = -pthread_create(&s->workers[i], &attr, worker_main, s);
		if (r < 0)
			goto fail;
		s->workers_started++;
	}
	r = -pthread_create(&s->scheduler, &attr, scheduler_main, s);
	if (r < 0)
		goto fail;
	s->scheduler_started = true;

	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (o->poll)
		log_info("sentinel: polling agents of claims under %s every %" PRId64 ".%03" PRId64
			 " s (timeout %" PRId64 ".%03" PRId64 " s, %u at once), reconcile %s",
			 s->mountpoint, o->poll_interval_ns / NSEC_PER_SEC,
			 o->poll_interval_ns % NSEC_PER_SEC / 1000000,
			 o->poll_timeout_ns / NSEC_PER_SEC,
			 o->poll_timeout_ns % NSEC_PER_SEC / 1000000, o->concurrency,
			 o->reconcile ? "on" : "off");
	else
		log_info("sentinel: not polling agents; releasing stale claims under %s every %" PRId64
			 ".%03" PRId64 " s",
			 s->mountpoint, o->reconcile_interval_ns / NSEC_PER_SEC,
			 o->reconcile_interval_ns % NSEC_PER_SEC / 1000000);
	*ret = s;
	return 0;

fail:
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	log_err("sentinel: cannot start threads: %s", strerror(-r));
	stop_threads(s);
	sentinel_release(s);
	return r;
}

void sentinel_stop(struct sentinel *s)
{
	if (!s || s->stopped)
		return;
	stop_threads(s);
	s->stopped = true;
	log_info("sentinel: stopped");
}

void sentinel_free(struct sentinel *s)
{
	if (!s)
		return;
	sentinel_stop(s);
	sentinel_release(s);
}
