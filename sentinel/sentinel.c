/* SPDX-License-Identifier: MIT */
/*
 * sentinel.c - the poll scheduler, the worker pool and the file-interface
 * client.
 *
 * DESIGN NOTES
 *
 * Threads.  One scheduler thread and `concurrency` worker threads, all
 * created by sentinel_start() with every signal blocked (the program's main
 * thread owns SIGTERM/SIGINT; a SIGPIPE from a guest that hung up stays
 * pending on our thread instead of killing the process).
 *   - The scheduler sleeps in ppoll() on the shutdown eventfd until the next
 *     poll or reconcile is due.  A poll: repair the store if `status` says
 *     so, list the claims through the mount (one read of `claims`, then each
 *     claim's assignment file: no directory walk over every VF), build the
 *     target array, publish it as the current scan, wait until the scan is
 *     done.  A reconcile runs on the scheduler alone (a few /proc reads per
 *     claim).  Both judge liveness in one pass (liveness.h): one socket-table
 *     read per network namespace, another namespace's through a short-lived
 *     thread that setns(2)es there.  Without polls (--reconcile-only) no
 *     worker is started.
 *   - A worker takes the next index of the current scan, runs one blocking
 *     agent_query() (bounded by poll_timeout and the shutdown eventfd),
 *     classifies the answer, re-reads the VF's claim (for an OK, or a claim
 *     without claimed_at) and writes the report, then takes the next index.
 *     So N unreachable guests cost ceil(N / concurrency) deadlines, never N.
 *
 * Locks.  One mutex (scan_lock) guards the scan: targets, target_count,
 * next_target, active_workers and stopping; work_cond wakes workers when a
 * scan is published or on stop, done_cond wakes the scheduler when the last
 * active worker of a finished (or stopped) scan is done.  No lock is held
 * across I/O: a worker reads its target (immutable while the scan runs: the
 * scheduler frees the array only after active_workers drops to 0 with
 * nothing left to hand out).  Counters are atomics, so metrics rendering
 * takes no lock.  The claim memory (which claims were judged dead) belongs to the
 * scheduler thread alone: polls and reconciles both run there.
 *
 * Shutdown.  sentinel_stop() writes the eventfd once and never reads it, so
 * it stays readable: the scheduler's ppoll returns, and every agent_query()
 * in flight or started later returns -ECANCELED at once, closing its socket.
 * It sets `stopping` under scan_lock and broadcasts: workers hand out no new
 * target; a worker whose query was cancelled counts nothing and reports
 * nothing; a worker already writing its report finishes that one
 * write(2)+pread (a report is one write: never half-written).  Then it
 * joins the scheduler and the workers, closes the eventfd, frees.  Bounded
 * by one poll_timeout plus one file operation.
 *
 * The sentinel talks to the store only through the mount (open/pread/pwrite
 * with O_CLOEXEC, readdir, unlink of a claim without claimed_at), so the daemon's notifier sees its writes
 * like anyone's and a standalone sentinel behaves the same.
 */
#include "sentinel/sentinel.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "proto/client.h"
#include "common/endpoint.h"
#include "proto/frame.h"
#include "common/log.h"
#include "common/path.h"
#include "common/parse.h"
#include "common/procfs.h"
#include "common/safefile.h"
#include "sentinel/liveness.h"
#include "sentinel/rules.h"

#define WORKER_STACK_SIZE (1024 * 1024)
#define STATUS_READ_MAX 1024

struct target {
	struct assignment claim;
	struct endpoint agent;
	/* what its worker learned, for the scheduler after the scan */
	bool answered;             /* result is set */
	enum check_result result;
	int64_t answered_ns;       /* Unix time of the answer */
	struct agent_telemetry telemetry; /* .present when the answer had some */
};

/* What the sentinel knows about a claim (an assignment: vf, instance,
 * claimed_at) across scans (scheduler thread only). */
struct claim_memory {
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ];
	bool dead;      /* judged dead (by a poll or a reconcile): never polled again,
			 * unless a reconcile finds it alive (its VMM was starting) */
	bool seen_dead; /* the previous reconcile found it dead */
	const char *uncertain_why; /* the reason of the last uncertain verdict (static
				    * text), NULL when the last was not uncertain:
				    * warned once per change */
	bool noted_no_evidence;    /* said once that it is never polled */
	/* detection latency: timed = first listed after this process's first
	 * listing (an older claim's "first" answer would time our restart, not
	 * the guest); seen_*: its first failed / ok answer was observed */
	bool timed;
	bool seen_failed;
	bool seen_ok;
};

struct sentinel {
	char *mountpoint;
	struct sentinel_options opt;
	char *proc_root;
	char *metrics_path;
	int cancel_fd;

	pthread_t scheduler;
	bool scheduler_started;
	pthread_t *workers;
	unsigned workers_started;

	pthread_mutex_t scan_lock;
	pthread_cond_t work_cond;
	pthread_cond_t done_cond;
	struct target *targets;
	size_t target_count;
	size_t next_target;
	unsigned active_workers;
	bool stopping;
	atomic_bool stopping_fast; /* the same flag, readable without the lock */
	bool stopped;              /* sentinel_stop() has joined everything */

	struct claim_memory *memory; /* sorted by claim_memory_cmp */
	size_t memory_count;
	bool listed_once; /* claim_memory_update() ran: later claims are new */

	struct sentinel_counters *counters; /* own_counters, or shared with a parent */
	struct sentinel_counters own_counters;
};

/* ---- the file interface ------------------------------------------------------ */

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
static int write_command(const char *path, const char *command, size_t len, char *answer,
			 size_t answer_size, size_t *answer_len)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = open(path, (answer ? O_RDWR : O_WRONLY) | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	do
		n = pwrite(fd, command, len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if ((size_t)n != len)
		return -EIO; /* the interface takes whole commands; a short write is a bug */
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

/* Read <vf>/assignments/<instance_id>. */
static int read_assignment(const struct sentinel *s, const char *vf, const char *instance_id,
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

/* The live claim of vf now: the captured instance's if it still holds it,
 * else whichever instance holds it, else -ENOENT. */
static int read_current_claim(const struct sentinel *s, const char *vf, const char *instance_id,
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

struct claim_list {
	struct assignment *items;
	size_t count;
	size_t capacity;
	bool error; /* part of the listing failed (counted once in list_errors) */
};

static void claim_list_free(struct claim_list *l)
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
static int list_claims(const struct sentinel *s, struct claim_list *l)
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

/* ---- reporting ------------------------------------------------------------------- */

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
			/* fall through */
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

static void report(struct sentinel *s, const struct assignment *c, enum check_result result,
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

/* ---- one target (worker threads) ---------------------------------------------------- */

static void check_target(struct sentinel *s, struct target *t)
{
	struct agent_status status = { 0 };
	_cleanup_free_ struct assignment *current = NULL;
	enum check_result result;
	int rc;

	/* Checked again at the connect itself (common/sockdir.h): a socket
	 * swapped for a symlink since the listing is not followed. */
	rc = agent_query_confined(&t->agent, &s->opt.socket_dirs, s->opt.poll_timeout_ns,
				  s->cancel_fd, &status);
	if (rc == -ECANCELED || atomic_load(&s->stopping_fast))
		return; /* shutting down: neither counted nor reported */
	result = sentinel_classify(rc, &status);
	t->result = result;
	t->answered_ns = realtime_ns();
	t->answered = true;
	if (rc == 0)
		t->telemetry = status.telemetry;
	atomic_fetch_add(&s->counters->checks[result], 1);
	if (result == CHECK_UNKNOWN) {
		unsigned why = (unsigned)status.reason; /* the client keeps it in the table */

		atomic_fetch_add(&s->counters->unknown[why < AGENT_REASON_COUNT ? why : 0], 1);
	}
	switch (result) {
	case CHECK_OK:
	case CHECK_FAILED:
		break;
	case CHECK_RPC_ERROR:
		log_debug("vf %s: agent %s of %s: %s", t->claim.vf, t->claim.agent,
			  t->claim.instance_id, rc < 0 ? strerror(-rc) : "unknown state");
		return;
	case CHECK_UNSUPPORTED_AGENT:
		log_debug("vf %s: agent %s of %s does not implement GetGPUInitStatus",
			  t->claim.vf, t->claim.agent, t->claim.instance_id);
		return;
	default:
		return;
	}

	/* The report names the assignment asked about; an OK only while that
	 * assignment still holds the VF (rules.h says why). */
	if (sentinel_revalidate_needed(&t->claim, result)) {
		current = malloc(sizeof(*current));
		if (!current)
			return;
		rc = result == CHECK_OK
			     ? read_assignment(s, t->claim.vf, t->claim.instance_id, current)
			     : read_current_claim(s, t->claim.vf, t->claim.instance_id, current);
	}
	if (sentinel_revalidate(&t->claim, result, rc, current) == REVALIDATE_DROP) {
		atomic_fetch_add(&s->counters->reports_dropped, 1);
		if (rc == -ENOENT)
			log_info("vf %s: the claim of %s (claimed %s) was released during the poll; "
				 "%s answer dropped",
				 t->claim.vf, t->claim.instance_id,
				 t->claim.claimed_at[0] ? t->claim.claimed_at : "-",
				 check_result_name(result));
		else if (rc < 0)
			/* EIO while the store is unavailable, typically: the next poll asks again. */
			log_info("vf %s: cannot re-read the claim of %s: %s; %s answer dropped",
				 t->claim.vf, t->claim.instance_id, strerror(-rc),
				 check_result_name(result));
		else
			log_info("vf %s: claim changed during the poll (was %s claimed %s, now %s "
				 "claimed %s); %s answer dropped",
				 t->claim.vf, t->claim.instance_id,
				 t->claim.claimed_at[0] ? t->claim.claimed_at : "-",
				 current->instance_id,
				 current->claimed_at[0] ? current->claimed_at : "-",
				 check_result_name(result));
		return;
	}
	if (atomic_load(&s->stopping_fast))
		return;
	report(s, &t->claim, result, status.message);
}

static void *worker_main(void *userdata)
{
	struct sentinel *s = userdata;

	pthread_mutex_lock(&s->scan_lock);
	for (;;) {
		struct target *t;

		while (!s->stopping && s->next_target >= s->target_count)
			pthread_cond_wait(&s->work_cond, &s->scan_lock);
		if (s->stopping)
			break;
		t = &s->targets[s->next_target++];
		s->active_workers++;
		pthread_mutex_unlock(&s->scan_lock);

		check_target(s, t);

		pthread_mutex_lock(&s->scan_lock);
		s->active_workers--;
		if (s->active_workers == 0 && (s->next_target >= s->target_count || s->stopping))
			pthread_cond_signal(&s->done_cond);
	}
	pthread_mutex_unlock(&s->scan_lock);
	return NULL;
}

/* ---- claim memory (scheduler thread) -------------------------------------------------- */

static int claim_memory_cmp(const void *a_, const void *b_)
{
	const struct claim_memory *a = a_, *b = b_;
	int r;

	if ((r = strcmp(a->vf, b->vf)))
		return r;
	if ((r = strcmp(a->instance_id, b->instance_id)))
		return r;
	return strcmp(a->claimed_at, b->claimed_at);
}

static void claim_memory_key(const struct assignment *c, struct claim_memory *key)
{
	memset(key, 0, sizeof(*key));
	memcpy(key->vf, c->vf, sizeof(key->vf));
	memcpy(key->instance_id, c->instance_id, sizeof(key->instance_id));
	memcpy(key->claimed_at, c->claimed_at, sizeof(key->claimed_at));
}

static struct claim_memory *claim_memory_find(struct sentinel *s, const struct assignment *c)
{
	struct claim_memory key;

	if (!s->memory)
		return NULL;
	claim_memory_key(c, &key);
	return bsearch(&key, s->memory, s->memory_count, sizeof(key), claim_memory_cmp);
}

/* Carry each listed claim's memory (dead, seen_dead) over to the next scan.
 * Claims no longer listed are forgotten, unless the listing was incomplete. */
static void claim_memory_update(struct sentinel *s, const struct claim_list *l)
{
	_cleanup_free_ struct claim_memory *next = NULL;
	size_t count = 0, capacity = l->count + (l->error ? s->memory_count : 0);

	if (capacity == 0) {
		free(s->memory);
		s->memory = NULL;
		s->memory_count = 0;
		return;
	}
	next = calloc(capacity, sizeof(*next));
	if (!next)
		return; /* keep the old memory; the next scan tries again */
	for (size_t i = 0; i < l->count; i++) {
		const struct assignment *c = &l->items[i];
		struct claim_memory *old = claim_memory_find(s, c);
		struct claim_memory *m = &next[count++];

		if (old) {
			*m = *old;
		} else {
			claim_memory_key(c, m);
			m->timed = s->listed_once;
		}
	}
	if (l->error)
		for (size_t i = 0; i < s->memory_count; i++)
			next[count++] = s->memory[i];
	qsort(next, count, sizeof(*next), claim_memory_cmp);
	/* Duplicates come only from merging an incomplete listing: keep the first. */
	size_t unique = 0;
	for (size_t i = 0; i < count; i++)
		if (unique == 0 || claim_memory_cmp(&next[unique - 1], &next[i]) != 0)
			next[unique++] = next[i];
	free(s->memory);
	s->memory = next;
	next = NULL;
	s->memory_count = unique;
	s->listed_once = true;
}

/* The first failed and the first ok answer of each timed assignment, into
 * the detection latency histograms (scheduler thread, after a scan). */
static void observe_latencies(struct sentinel *s, const struct target *targets, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct target *t = &targets[i];
		struct claim_memory *m;
		enum sentinel_latency_kind kind;
		bool *seen;
		int64_t ns;

		if (!t->answered || (t->result != CHECK_FAILED && t->result != CHECK_OK))
			continue;
		m = claim_memory_find(s, &t->claim);
		if (!m || !m->timed)
			continue;
		kind = t->result == CHECK_FAILED ? SENTINEL_LATENCY_FAILED : SENTINEL_LATENCY_OK;
		seen = kind == SENTINEL_LATENCY_FAILED ? &m->seen_failed : &m->seen_ok;
		if (*seen)
			continue;
		*seen = true;
		if (sentinel_latency_ns(t->claim.claimed_at, t->answered_ns, &ns) < 0)
			continue; /* no claimed_at: nothing to time from */
		atomic_fetch_add(&s->counters->latency[kind].buckets[sentinel_latency_bucket(ns)], 1);
		atomic_fetch_add(&s->counters->latency[kind].sum_ns, (uint64_t)ns);
		atomic_fetch_add(&s->counters->latency[kind].count, 1);
	}
}

/* The telemetry of this poll's answers replaces the last poll's (scheduler
 * thread): claims gone or no longer answering drop out. */
static void publish_agents(struct sentinel *s, const struct target *targets, size_t count)
{
	struct sentinel_counters *c = s->counters;
	size_t n = 0;

	atomic_fetch_add(&c->agents_seq, 1); /* odd: being rewritten */
	atomic_thread_fence(memory_order_release);
	for (size_t i = 0; i < count && n < SENTINEL_MAX_TARGETS; i++) {
		const struct target *t = &targets[i];
		if (!t->answered || !t->telemetry.present)
			continue;
		struct sentinel_agent_slot *slot = &c->agents[n++];
		memcpy(slot->vf, t->claim.vf, sizeof(slot->vf));
		memcpy(slot->instance_id, t->claim.instance_id, sizeof(slot->instance_id));
		slot->telemetry = t->telemetry;
	}
	atomic_store(&c->agents_count, n);
	atomic_fetch_add(&c->agents_seq, 1); /* even: consistent */
}

/* ---- metrics -------------------------------------------------------------------------- */

const char *sentinel_watch_name(enum sentinel_watch w)
{
#define SENTINEL_WATCH_NAME(id, name) [SENTINEL_WATCH_##id] = name,
	static const char *const names[SENTINEL_WATCH_COUNT] = { SENTINEL_WATCHES(SENTINEL_WATCH_NAME) };
#undef SENTINEL_WATCH_NAME

	if ((unsigned)w >= SENTINEL_WATCH_COUNT)
		return "invalid";
	return names[w];
}

void sentinel_render_metrics(void *sentinel, FILE *out)
{
	struct sentinel *s = sentinel;

	if (s)
		sentinel_counters_render(s->counters, out);
}

/* Seconds with up to nine decimals, no trailing zeros: "5", "0.2". */
static void format_seconds(int64_t ns, char *buf, size_t size)
{
	int len = snprintf(buf, size, "%" PRId64 ".%09" PRId64, ns / SENTINEL_NS_PER_S,
			   ns % SENTINEL_NS_PER_S);

	while (len > 0 && (size_t)len < size && buf[len - 1] == '0')
		buf[--len] = '\0';
	if (len > 0 && (size_t)len < size && buf[len - 1] == '.')
		buf[--len] = '\0';
}

static void render_latency(const struct sentinel_stats *st, FILE *out)
{
#define LATENCY_LE(le) #le,
	static const char *const le[] = { SENTINEL_LATENCY_BUCKETS(LATENCY_LE) "+Inf" };
#undef LATENCY_LE
	static const char *const kinds[SENTINEL_LATENCY_KINDS] = {
		[SENTINEL_LATENCY_FAILED] = "failed", [SENTINEL_LATENCY_OK] = "ok"
	};
	char sum[32];

	fputs("# HELP vfhealth_detection_latency_seconds Time from a claim to the first failed "
	      "(kind=failed) and the first ok (kind=ok) answer the sentinel saw for it.\n"
	      "# TYPE vfhealth_detection_latency_seconds histogram\n",
	      out);
	for (int k = 0; k < SENTINEL_LATENCY_KINDS; k++) {
		uint64_t cumulative = 0;
		for (size_t b = 0; b <= SENTINEL_LATENCY_BUCKET_COUNT; b++) {
			cumulative += st->latency[k].buckets[b];
			fprintf(out,
				"vfhealth_detection_latency_seconds_bucket{kind=\"%s\",le=\"%s\"} "
				"%" PRIu64 "\n",
				kinds[k], le[b], cumulative);
		}
		format_seconds((int64_t)st->latency[k].sum_ns, sum, sizeof(sum));
		fprintf(out,
			"vfhealth_detection_latency_seconds_sum{kind=\"%s\"} %s\n"
			"vfhealth_detection_latency_seconds_count{kind=\"%s\"} %" PRIu64 "\n",
			kinds[k], sum, kinds[k], st->latency[k].count);
	}
}

static int agent_slot_cmp(const void *a_, const void *b_)
{
	const struct sentinel_agent_slot *a = a_, *b = b_;
	int r = strcmp(a->vf, b->vf);

	return r ? r : strcmp(a->instance_id, b->instance_id);
}

/* A consistent copy of the published slots (sequence lock), each checked as
 * if from a stranger: the memory is shared with another process.  Sorted,
 * without duplicates (a duplicate series would spoil the whole scrape).
 * *ret NULL and 0 when none or no consistent copy could be had. */
static size_t agents_snapshot(const struct sentinel_counters *c, struct sentinel_agent_slot **ret)
{
	struct sentinel_agent_slot *copy = NULL;
	size_t n = 0;

	*ret = NULL;
	for (int tries = 0; tries < 16; tries++) {
		uint64_t seq = atomic_load(&c->agents_seq);
		if (seq & 1) {
			sched_yield(); /* the scheduler is rewriting: a memcpy's while */
			continue;
		}
		n = MIN((size_t)atomic_load(&c->agents_count), (size_t)SENTINEL_MAX_TARGETS);
		free(copy);
		copy = malloc(MAX(n, (size_t)1) * sizeof(*copy));
		if (!copy)
			return 0;
		memcpy(copy, (const void *)c->agents, n * sizeof(*copy));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&c->agents_seq) == seq)
			goto consistent;
	}
	free(copy);
	return 0;
consistent:;
	size_t kept = 0;
	for (size_t i = 0; i < n; i++) {
		struct sentinel_agent_slot *a = &copy[i];
		char version[AGENT_VERSION_MAX + 1];

		a->vf[sizeof(a->vf) - 1] = '\0';
		a->instance_id[sizeof(a->instance_id) - 1] = '\0';
		a->telemetry.version[sizeof(a->telemetry.version) - 1] = '\0';
		if (!vf_address_valid(a->vf) || !instance_id_valid(a->instance_id))
			continue;
		wire_sanitize_version(a->telemetry.version, version);
		memcpy(a->telemetry.version, version, sizeof(version));
		copy[kept++] = *a;
	}
	qsort(copy, kept, sizeof(*copy), agent_slot_cmp);
	n = 0;
	for (size_t i = 0; i < kept; i++)
		if (n == 0 || agent_slot_cmp(&copy[n - 1], &copy[i]) != 0)
			copy[n++] = copy[i];
	*ret = copy;
	return n;
}

/* Per claim whose agent answered in the last poll: labels vf, instance_id
 * (not "instance": Prometheus gives that label the scrape target). */
static void render_agents(const struct sentinel_counters *c, FILE *out)
{
	_cleanup_free_ struct sentinel_agent_slot *agents = NULL;
	size_t n = agents_snapshot(c, &agents);

#define AGENT_COUNTER(field, name, help)                                                     \
	fputs("# HELP " name " " help "\n# TYPE " name " counter\n", out);                  \
	for (size_t i = 0; i < n; i++)                                                       \
		fprintf(out, name "{vf=\"%s\",instance_id=\"%s\"} %" PRIu64 "\n", agents[i].vf, \
			agents[i].instance_id, agents[i].telemetry.field);
	fputs("# HELP vfhealth_sentinel_agent_info The guest agent of each polled claim that "
	      "answered with telemetry, and its version.\n"
	      "# TYPE vfhealth_sentinel_agent_info gauge\n",
	      out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "vfhealth_sentinel_agent_info{vf=\"%s\",instance_id=\"%s\",version=\"%s\"} 1\n",
			agents[i].vf, agents[i].instance_id, agents[i].telemetry.version);
	AGENT_COUNTER(kmsg_records_lost, "vfhealth_sentinel_agent_kmsg_records_lost_total",
		      "Kernel log records the agent never read (sequence gaps), as it last said.")
	AGENT_COUNTER(kmsg_overruns, "vfhealth_sentinel_agent_kmsg_overruns_total",
		      "Reads of the agent that found the kernel log overwritten under them.")
	AGENT_COUNTER(probe_attempts, "vfhealth_sentinel_agent_probe_attempts_total",
		      "Probe attempts the agent started.")
	AGENT_COUNTER(probe_timeouts, "vfhealth_sentinel_agent_probe_timeouts_total",
		      "Probe attempts the agent killed at their deadline.")
#undef AGENT_COUNTER
	fputs("# HELP vfhealth_sentinel_agent_probe_last_exit_status Exit status of the agent's "
	      "last ended probe attempt (128+N: signal N), once one has ended.\n"
	      "# TYPE vfhealth_sentinel_agent_probe_last_exit_status gauge\n",
	      out);
	for (size_t i = 0; i < n; i++)
		if (agents[i].telemetry.probe_last_exit_status >= 0)
			fprintf(out,
				"vfhealth_sentinel_agent_probe_last_exit_status{vf=\"%s\",instance_id=\"%s\"} %d\n",
				agents[i].vf, agents[i].instance_id,
				(int)agents[i].telemetry.probe_last_exit_status);
}

static void render_config(const struct sentinel_stats *st, FILE *out)
{
	char interval[32], timeout[32];

	if (st->concurrency == 0)
		return; /* not started */
	format_seconds(st->poll_interval_ns, interval, sizeof(interval));
	format_seconds(st->poll_timeout_ns, timeout, sizeof(timeout));
	fprintf(out,
		"# HELP vfhealth_sentinel_config_info The sentinel's options in force.\n"
		"# TYPE vfhealth_sentinel_config_info gauge\n"
		"vfhealth_sentinel_config_info{poll_interval_seconds=\"%s\","
		"poll_timeout_seconds=\"%s\",concurrency=\"%" PRIu64 "\"} 1\n",
		interval, timeout, st->concurrency);
}

void sentinel_counters_render(void *counters, FILE *out)
{
	struct sentinel_stats st;

	if (!counters)
		return;
	sentinel_counters_get(counters, &st);
	fprintf(out,
		"# HELP vfhealth_sentinel_checks_total Guest agent checks by result.\n"
		"# TYPE vfhealth_sentinel_checks_total counter\n");
	for (int r = 0; r < CHECK_RESULT_COUNT; r++)
		fprintf(out, "vfhealth_sentinel_checks_total{result=\"%s\"} %" PRIu64 "\n",
			check_result_name((enum check_result)r), st.checks[r]);
	fprintf(out,
		"# HELP vfhealth_sentinel_unknown_total Unknown answers by the agent's reason "
		"(unspecified: an agent older than reasons).\n"
		"# TYPE vfhealth_sentinel_unknown_total counter\n");
	for (int r = 0; r < AGENT_REASON_COUNT; r++)
		fprintf(out, "vfhealth_sentinel_unknown_total{reason=\"%s\"} %" PRIu64 "\n",
			agent_unknown_reason_name((enum agent_unknown_reason)r), st.unknown[r]);
#define RENDER_COUNTER(field, name, help)                                            \
	fprintf(out, "# HELP " name " " help "\n# TYPE " name " counter\n" name " %" PRIu64 "\n", \
		st.field);
	SENTINEL_SCALAR_COUNTERS(RENDER_COUNTER)
#undef RENDER_COUNTER
	fprintf(out,
		"# HELP vfhealth_sentinel_last_poll_duration_seconds Duration of the last "
		"completed poll.\n"
		"# TYPE vfhealth_sentinel_last_poll_duration_seconds gauge\n"
		"vfhealth_sentinel_last_poll_duration_seconds %" PRId64 ".%09" PRId64 "\n",
		st.last_poll_duration_ns / SENTINEL_NS_PER_S,
		st.last_poll_duration_ns % SENTINEL_NS_PER_S);
	fputs("# HELP vfhealth_sentinel_claims Live claims at the last poll, by how the sentinel "
	      "watches them (polled: its agent is asked; uncertain: asked and kept, its VMM's "
	      "liveness unknown; dead: no longer asked, to be released; no_agent, no_evidence, "
	      "unconfined: never asked).\n"
	      "# TYPE vfhealth_sentinel_claims gauge\n",
	      out);
	for (int w = 0; w < SENTINEL_WATCH_COUNT; w++)
		fprintf(out, "vfhealth_sentinel_claims{watch=\"%s\"} %" PRIu64 "\n",
			sentinel_watch_name((enum sentinel_watch)w), st.claims_watched[w]);
	render_latency(&st, out);
	render_config(&st, out);
	render_agents(counters, out);
}

void sentinel_get_stats(struct sentinel *s, struct sentinel_stats *ret)
{
	sentinel_counters_get(s->counters, ret);
}

void sentinel_counters_get(const struct sentinel_counters *c, struct sentinel_stats *ret)
{
	_Static_assert(ARRAY_SIZE(ret->checks) == CHECK_RESULT_COUNT, "one counter per result");
	for (int r = 0; r < CHECK_RESULT_COUNT; r++)
		ret->checks[r] = atomic_load(&c->checks[r]);
	for (int r = 0; r < AGENT_REASON_COUNT; r++)
		ret->unknown[r] = atomic_load(&c->unknown[r]);
#define LOAD_COUNTER(field, name, help) ret->field = atomic_load(&c->field);
	SENTINEL_SCALAR_COUNTERS(LOAD_COUNTER)
#undef LOAD_COUNTER
	ret->last_poll_duration_ns = atomic_load(&c->last_poll_duration_ns);
	for (int w = 0; w < SENTINEL_WATCH_COUNT; w++)
		ret->claims_watched[w] = atomic_load(&c->claims_watched[w]);
	for (int k = 0; k < SENTINEL_LATENCY_KINDS; k++) {
		for (size_t b = 0; b <= SENTINEL_LATENCY_BUCKET_COUNT; b++)
			ret->latency[k].buckets[b] = atomic_load(&c->latency[k].buckets[b]);
		ret->latency[k].sum_ns = atomic_load(&c->latency[k].sum_ns);
		ret->latency[k].count = atomic_load(&c->latency[k].count);
	}
	ret->poll_interval_ns = atomic_load(&c->poll_interval_ns);
	ret->poll_timeout_ns = atomic_load(&c->poll_timeout_ns);
	ret->concurrency = atomic_load(&c->concurrency);
}

static int render_metrics_to(void *sentinel, FILE *out)
{
	sentinel_render_metrics(sentinel, out);
	return 0;
}

/* Standalone: replace metrics_path atomically so a reader never sees half;
 * the directory may belong to someone else (node_exporter's textfile
 * directory), so no name in it is trusted (common/safefile.h). */
static void write_metrics_file(struct sentinel *s)
{
	int r;

	if (!s->metrics_path)
		return;
	r = safefile_replace(s->metrics_path, 0644, render_metrics_to, s);
	if (r < 0)
		log_warn("sentinel: cannot write %s: %s", s->metrics_path, strerror(-r));
}

/* ---- a poll (scheduler thread) ---------------------------------------------------------- */

/* One repair attempt when the store says it is unavailable; reading `status`
 * is the cheap no-op on a healthy store. */
static void repair_if_unavailable(struct sentinel *s)
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

/* Whether every socket path of c lies in the socket directories, reached
 * without a symlink (common/sockdir.h), checked before anything else looks
 * at them: a claim that does not is neither stat'ed nor polled, only
 * counted (and kept by reconcile as uncertain).  The daemon refuses such
 * writes; this catches claims stored before the directories changed and
 * paths swapped for symlinks since. */
static bool claim_confined(struct sentinel *s, const struct assignment *c)
{
	struct endpoint ep;
	const char *what = NULL;
	int r = 0;

	if (c->control[0]) {
		r = sockdirs_check(&s->opt.socket_dirs, c->control);
		what = "control";
	}
	if (r == 0 && c->agent[0] && endpoint_parse(c->agent, &ep) == 0 &&
	    ep.kind != ENDPOINT_VSOCK) {
		r = sockdirs_check(&s->opt.socket_dirs, ep.path);
		what = "agent";
	}
	if (r == 0)
		return true;
	atomic_fetch_add(&s->counters->claims_unconfined, 1);
	log_debug("vf %s: claim of %s skipped: its %s socket path %s", c->vf, c->instance_id,
		  what, r == -EACCES ? "is outside the socket directories or crosses a symlink"
				     : strerror(-r));
	return false;
}

/* The first dead verdict on a claim: from now on it is not polled (its
 * vsock CID may belong to another guest by now). */
static void mark_dead(struct claim_memory *m, const struct assignment *c, const char *reason)
{
	if (!m || m->dead)
		return;
	m->dead = true;
	log_info("vf %s: the VMM of %s (claimed %s) looks dead (%s): no longer polled; released "
		 "when the next reconcile finds it dead too",
		 c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-", reason);
}

/* A claim judged uncertain: warned once per change of reason (a claim of a
 * VMM that binds its control socket where we cannot see would warn every
 * pass otherwise); counted by the caller. */
static void note_uncertain(struct claim_memory *m, const struct assignment *c, const char *reason)
{
	if (m && m->uncertain_why == reason)
		return;
	log_warn("vf %s: keeping the claim of %s (claimed %s): %s (pid %" PRId64 ", control %s)",
		 c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-", reason, c->pid,
		 c->control[0] ? c->control : "-");
	if (m)
		m->uncertain_why = reason;
}

/* How this poll watches claim c: whether its agent is dialled, and if not
 * why (sentinel.h, enum sentinel_watch). */
static enum sentinel_watch watch_claim(struct sentinel *s, struct liveness_pass *pass,
				       const struct assignment *c)
{
	struct claim_memory *m;
	struct liveness_evidence ev;
	const char *reason;
	enum liveness l;

	if (!claim_confined(s, c))
		return SENTINEL_WATCH_UNCONFINED;
	if (!c->agent[0])
		return SENTINEL_WATCH_NO_AGENT;
	m = claim_memory_find(s, c);
	if (m && m->dead)
		return SENTINEL_WATCH_DEAD;
	liveness_gather(pass, c, &ev);
	l = liveness_verdict(&ev, &reason);
	switch (l) {
	case LIVENESS_DEAD:
		mark_dead(m, c, reason);
		return SENTINEL_WATCH_DEAD;
	case LIVENESS_UNMANAGED:
		/* No VMM to judge by, so nothing says the CID is still its:
		 * never dialled. */
		if (!m || !m->noted_no_evidence)
			log_notice("vf %s: the claim of %s names an agent but neither pid= nor "
				   "control=: never polled",
				   c->vf, c->instance_id);
		if (m)
			m->noted_no_evidence = true;
		return SENTINEL_WATCH_NO_EVIDENCE;
	case LIVENESS_UNCERTAIN:
		note_uncertain(m, c, reason);
		return SENTINEL_WATCH_UNCERTAIN;
	case LIVENESS_ALIVE:
		if (m)
			m->uncertain_why = NULL;
		break;
	}
	return SENTINEL_WATCH_POLLED;
}

static void run_scan(struct sentinel *s, struct target *targets, size_t count)
{
	pthread_mutex_lock(&s->scan_lock);
	if (!s->stopping) {
		s->targets = targets;
		s->target_count = count;
		s->next_target = 0;
		pthread_cond_broadcast(&s->work_cond);
		while (s->active_workers > 0 ||
		       (!s->stopping && s->next_target < s->target_count))
			pthread_cond_wait(&s->done_cond, &s->scan_lock);
		s->targets = NULL;
		s->target_count = 0;
		s->next_target = 0;
	}
	pthread_mutex_unlock(&s->scan_lock);
}

static void run_poll(struct sentinel *s)
{
	_cleanup_free_ struct target *targets = NULL;
	struct claim_list claims;
	struct liveness_pass pass;
	uint64_t watched[SENTINEL_WATCH_COUNT] = { 0 };
	int64_t started = monotonic_ns();
	size_t count = 0;
	bool claims_error;

	repair_if_unavailable(s); /* the one repair attempt of this poll */

	if (list_claims(s, &claims) == -ECANCELED) {
		claim_list_free(&claims);
		return;
	}
	claims_error = claims.error;
	if (claims.error)
		atomic_fetch_add(&s->counters->list_errors, 1);
	claim_memory_update(s, &claims);

	targets = calloc(claims.count ? claims.count : 1, sizeof(*targets));
	if (!targets) {
		claim_list_free(&claims);
		log_warn("sentinel: out of memory for %zu targets", claims.count);
		return;
	}
	liveness_pass_begin(&pass, s->proc_root);
	for (size_t i = 0; i < claims.count; i++) {
		struct target *t = &targets[count];
		enum sentinel_watch w = watch_claim(s, &pass, &claims.items[i]);
		int r;

		watched[w]++;
		if (w != SENTINEL_WATCH_POLLED && w != SENTINEL_WATCH_UNCERTAIN)
			continue;
		r = endpoint_parse(claims.items[i].agent, &t->agent);
		if (r < 0) {
			/* The daemon validated it; count it like any unreachable guest. */
			atomic_fetch_add(&s->counters->checks[CHECK_RPC_ERROR], 1);
			log_warn("vf %s: claim %s names an agent endpoint we cannot parse: %s",
				 claims.items[i].vf, claims.items[i].instance_id, strerror(-r));
			continue;
		}
		t->claim = claims.items[i];
		count++;
	}
	log_debug("sentinel: %zu socket table(s) read for %zu claim(s)", pass.tables_read,
		  claims.count);
	liveness_pass_end(&pass);
	claim_list_free(&claims);
	/* Not after a listing that failed in part: the figures would miss the
	 * claims it could not read. */
	for (int w = 0; !claims_error && w < SENTINEL_WATCH_COUNT; w++)
		atomic_store(&s->counters->claims_watched[w], watched[w]);

	run_scan(s, targets, count);
	if (atomic_load(&s->stopping_fast))
		return;
	observe_latencies(s, targets, count);
	publish_agents(s, targets, count);

	int64_t duration = monotonic_ns() - started;
	atomic_store(&s->counters->last_poll_duration_ns, duration);
	atomic_fetch_add(&s->counters->polls, 1);
	log_debug("sentinel: poll of %zu target(s) took %" PRId64 ".%03" PRId64 " s", count,
		  duration / SENTINEL_NS_PER_S, duration % SENTINEL_NS_PER_S / 1000000);
	write_metrics_file(s);
}

/* ---- reconcile (scheduler thread) ---------------------------------------------------------- */

/* Release c, judged dead twice, with the conditional release: it releases
 * that assignment (c->claimed_at) and nothing newer, so a VMM manager that
 * released and re-claimed meanwhile keeps its new claim (ESTALE). */
static void release_dead_claim(struct sentinel *s, const struct assignment *c, const char *reason)
{
	char path[PATH_MAX], command[sizeof("release=") + RFC3339_BUFSZ];
	int len, r;

	r = mount_path(s, path, sizeof(path), c->vf, "assignments", c->instance_id);
	if (r == 0 && !c->claimed_at[0]) {
		/* No identity to name (never so with this daemon): the
		 * re-read just before is all we have. */
		if (unlink(path) < 0)
			r = negative_errno();
	} else if (r == 0) {
		len = snprintf(command, sizeof(command), "release=%s\n", c->claimed_at);
		r = write_command(path, command, (size_t)len, NULL, 0, NULL);
	}
	if (r == -ESTALE) {
		log_info("vf %s: the claim of %s was released and made again since %s: kept",
			 c->vf, c->instance_id, c->claimed_at);
		return;
	}
	if (r < 0) {
		if (r != -ENOENT)
			log_warn("vf %s: cannot release the stale claim of %s: %s", c->vf,
				 c->instance_id, strerror(-r));
		return;
	}
	atomic_fetch_add(&s->counters->claims_released, 1);
	log_info("vf %s: released the claim of %s (claimed %s): VMM dead (%s)", c->vf,
		 c->instance_id, c->claimed_at[0] ? c->claimed_at : "-", reason);
}

/* Judge one listed claim c.  A claim the previous pass found dead is
 * re-read first and judged as it is now (same assignment, same pid and
 * control), then released if still dead. */
static void reconcile_claim(struct sentinel *s, struct liveness_pass *pass,
			    const struct assignment *c, struct assignment *fresh)
{
	struct claim_memory *m = claim_memory_find(s, c);
	const struct assignment *judged = c;
	struct liveness_evidence ev;
	const char *reason;
	enum liveness verdict;
	int r;

	if (m && m->seen_dead) {
		r = read_assignment(s, c->vf, c->instance_id, fresh);
		if (r < 0) {
			if (r != -ENOENT)
				log_debug("vf %s: cannot re-read the claim of %s: %s", c->vf,
					  c->instance_id, strerror(-r));
			return; /* gone, or we cannot tell: the next pass looks again */
		}
		if (strcmp(fresh->claimed_at, c->claimed_at) != 0)
			return; /* another assignment now, with a memory of its own */
		log_debug("vf %s: the claim of %s looked dead at the last reconcile; judging it again",
			  c->vf, c->instance_id);
		judged = fresh;
	}
	liveness_gather(pass, judged, &ev);
	verdict = liveness_verdict(&ev, &reason);

	switch (verdict) {
	case LIVENESS_DEAD:
		/* Dead twice in a row: a VMM that claimed its VF a moment
		 * before it bound its control socket is not dead. */
		if (m && m->seen_dead && judged->pid == c->pid &&
		    strcmp(judged->control, c->control) == 0)
			release_dead_claim(s, judged, reason);
		else
			mark_dead(m, judged, reason);
		break;
	case LIVENESS_UNCERTAIN:
		atomic_fetch_add(&s->counters->liveness_uncertain, 1);
		note_uncertain(m, judged, reason);
		break;
	case LIVENESS_ALIVE:
		if (m)
			m->uncertain_why = NULL;
		if (m && m->dead) {
			m->dead = false;
			log_info("vf %s: the VMM of %s (claimed %s) is alive (%s): polled again",
				 c->vf, c->instance_id, c->claimed_at[0] ? c->claimed_at : "-",
				 reason);
		}
		break;
	case LIVENESS_UNMANAGED:
		break;
	}
	if (m)
		m->seen_dead = verdict == LIVENESS_DEAD;
}

static void run_reconcile(struct sentinel *s)
{
	_cleanup_free_ struct assignment *fresh = NULL;
	struct claim_list claims;
	struct liveness_pass pass;

	if (list_claims(s, &claims) == -ECANCELED) {
		claim_list_free(&claims);
		return;
	}
	claim_memory_update(s, &claims);
	fresh = malloc(sizeof(*fresh));

	liveness_pass_begin(&pass, s->proc_root);
	for (size_t i = 0; fresh && i < claims.count && !atomic_load(&s->stopping_fast); i++)
		if (claim_confined(s, &claims.items[i]))
			reconcile_claim(s, &pass, &claims.items[i], fresh);
	liveness_pass_end(&pass);
	claim_list_free(&claims);
	if (!atomic_load(&s->stopping_fast))
		atomic_fetch_add(&s->counters->reconciles, 1);
	write_metrics_file(s);
}

/* ---- scheduler ------------------------------------------------------------------------------- */

/* Sleep until deadline (CLOCK_MONOTONIC ns) or shutdown; false on shutdown. */
static bool sleep_until(struct sentinel *s, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = s->cancel_fd, .events = POLLIN };
		int64_t left = deadline - monotonic_ns();
		struct timespec ts;
		int r;

		if (atomic_load(&s->stopping_fast))
			return false;
		if (left <= 0)
			return true;
		ts.tv_sec = left / SENTINEL_NS_PER_S;
		ts.tv_nsec = left % SENTINEL_NS_PER_S;
		r = ppoll(&p, 1, &ts, NULL);
		if (r > 0)
			return false;
		if (r < 0 && errno != EINTR) {
			log_err("sentinel: ppoll: %s", strerror(errno));
			return false;
		}
	}
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
	/* Stays readable forever: every agent_query() now returns at once. */
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
	    o->concurrency < SENTINEL_CONCURRENCY_MIN || o->concurrency > SENTINEL_CONCURRENCY_MAX ||
	    (!o->poll && !o->reconcile))
		return -EINVAL;
	return 0;
}

int sentinel_start(const char *mountpoint, const struct sentinel_options *o,
		   struct sentinel **ret)
{
	return sentinel_start_counting(mountpoint, o, NULL, ret);
}

int sentinel_start_counting(const char *mountpoint, const struct sentinel_options *o,
			    struct sentinel_counters *counters, struct sentinel **ret)
{
	struct sentinel *s;
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
	pthread_mutex_init(&s->scan_lock, NULL);
	pthread_cond_init(&s->work_cond, NULL);
	pthread_cond_init(&s->done_cond, NULL);
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
			 s->mountpoint, o->poll_interval_ns / SENTINEL_NS_PER_S,
			 o->poll_interval_ns % SENTINEL_NS_PER_S / 1000000,
			 o->poll_timeout_ns / SENTINEL_NS_PER_S,
			 o->poll_timeout_ns % SENTINEL_NS_PER_S / 1000000, o->concurrency,
			 o->reconcile ? "on" : "off");
	else
		log_info("sentinel: not polling agents; releasing stale claims under %s every %" PRId64
			 ".%03" PRId64 " s",
			 s->mountpoint, o->reconcile_interval_ns / SENTINEL_NS_PER_S,
			 o->reconcile_interval_ns % SENTINEL_NS_PER_S / 1000000);
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
