/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the parts of libvffs that need no mount: the virtual file
 * tables (vfiles.c), the assignment parser, the notifier's mapping,
 * coalescing and poll bookkeeping (notify.c, watch.c) and the metrics providers
 * (metrics.c) against a real store, and the reader budget (budget.c).
 *
 * Design notes: each test runs in its own forked process (Check's default).
 * Threads: the fixture registers VFs from 8 threads so that the store's
 * group commit batches them, and joins them before any test runs; each
 * notifier test starts one notifier thread and stops or frees it (joining)
 * before it ends.  Locks: none of our own.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/budget.h"
#include "fs/metrics.h"
#include "fs/notify.h"
#include "store/store.h"
#include "fs/claims.h"
#include "fs/vfiles.h"
#include "common/cleanup.h"
#include "common/parse.h"
#include "tests/common/bad-assignments.h"
#include "tests/common/check-main.h"

/* -- the tables ---------------------------------------------------------------- */

static void check_table(const struct vfile *table, int count)
{
	for (int i = 0; i < count; i++) {
		const struct vfile *f = &table[i];

		ck_assert_ptr_nonnull(f->name);
		ck_assert_int_eq(vfile_find(table, count, f->name), i); /* names are unique */
		if (f->flags & VFILE_DIR) {
			ck_assert_uint_eq(f->changes, 0);
			ck_assert(f->render == NULL);
			ck_assert(f->write == NULL);
			/* writable only where entries are made (claims) */
			ck_assert_int_eq(f->mode, (f->flags & VFILE_CLAIM_DIR) ? 0775 : 0755);
			continue;
		}
		/* Writable by owner and group exactly when there is a write handler. */
		ck_assert_int_eq(f->mode, f->write ? 0664 : 0444);
		/* Something to read: rendered content or the last write's outcome. */
		ck_assert(f->render || (f->flags & VFILE_OUTCOME));
		/* Outcome files change only through their own handle. */
		ck_assert(!((f->flags & VFILE_OUTCOME) && (f->flags & VFILE_NOTIFY)));
		/* A notified file names the store changes that alter it; only those are. */
		ck_assert((f->changes != 0) == ((f->flags & VFILE_NOTIFY) != 0));
	}
	ck_assert_int_eq(vfile_find(table, count, "nonexistent"), -1);
	ck_assert_int_eq(vfile_find(table, count, ""), -1);
}

START_TEST(test_tables)
{
	check_table(top_files, TOP_FILE_COUNT);
	check_table(vf_files, VF_FILE_COUNT);
	check_table(gpu_files, GPU_FILE_COUNT);
	ck_assert_str_eq(top_files[TOP_THRESHOLD].name, "threshold");
	ck_assert_str_eq(vf_files[VF_REPORT].name, "report");
	ck_assert(!(top_files[TOP_METRICS].flags & VFILE_NOTIFY)); /* never notified */
	ck_assert(vf_files[VF_ASSIGNMENTS].flags & VFILE_DIR);
	/* Exactly one directory takes claims, and it is a directory. */
	for (int i = 0; i < VF_FILE_COUNT; i++)
		ck_assert_int_eq(!!(vf_files[i].flags & VFILE_CLAIM_DIR), i == VF_ASSIGNMENTS);
	for (int i = 0; i < TOP_FILE_COUNT; i++)
		ck_assert(!(top_files[i].flags & VFILE_CLAIM_DIR));
}
END_TEST

/* -- assignment files ------------------------------------------------------------ */

static struct store_claim *sample_claim(void)
{
	struct store_claim *c = calloc(1, sizeof(*c));

	ck_assert_ptr_nonnull(c);
	strcpy(c->a.vf, "0000:41:00.4");
	strcpy(c->a.instance_id, "vm-1");
	strcpy(c->a.claimed_at, "2026-11-29T07:00:00.000000000Z");
	c->id = 7;
	return c;
}

static int parse(const struct store_claim *cur, const char *text, bool first,
		 struct store_claim *ret)
{
	char buf[VFILE_COMMAND_MAX + 1];

	snprintf(buf, sizeof(buf), "%s", text);
	return claim_parse_update(cur, buf, first, ret);
}

START_TEST(test_claim_parse)
{
	_cleanup_free_ struct store_claim *cur = sample_claim();
	_cleanup_free_ struct store_claim *out = malloc(sizeof(*out));
	_cleanup_free_ struct store_claim *untouched = malloc(sizeof(*untouched));

	char cmd[128];

	snprintf(cmd, sizeof(cmd), "agent=vsock:3\ncontrol=/run/vm.sock\npid=%d", (int)getpid());
	ck_assert_int_eq(parse(cur, cmd, false, out), 0);
	ck_assert_str_eq(out->a.agent, "vsock:3:2222");
	ck_assert_str_eq(out->a.control, "/run/vm.sock");
	ck_assert_int_eq(out->a.pid, getpid());
	ck_assert_uint_gt(out->a.pid_starttime, 0); /* our own start time, from /proc */
	ck_assert_str_eq(out->a.claimed_at, cur->a.claimed_at);
	ck_assert_uint_eq(out->id, 7);

	/* empty values unset */
	*cur = *out;
	ck_assert_int_eq(parse(cur, "agent=\ncontrol=\npid=\n", false, out), 0);
	ck_assert_str_eq(out->a.agent, "");
	ck_assert_str_eq(out->a.control, "");
	ck_assert_int_eq(out->a.pid, 0);
	ck_assert_uint_eq(out->a.pid_starttime, 0);

	/* What a reader sees may be written back: pid_starttime is recorded anew
	 * from the pid (the same process: the same value), never taken from the
	 * writer. */
	{
		char *text = NULL;
		size_t len = 0;
		FILE *f;
		uint64_t recorded;

		snprintf(cmd, sizeof(cmd), "pid=%d", (int)getpid());
		ck_assert_int_eq(parse(cur, cmd, false, out), 0);
		recorded = out->a.pid_starttime;
		*cur = *out;
		f = open_memstream(&text, &len);
		assignment_render(&cur->a, f);
		fclose(f);
		ck_assert_int_eq(parse(cur, text, false, out), 0);
		ck_assert_uint_eq(out->a.pid_starttime, recorded);
		free(text);
		ck_assert_int_eq(parse(cur, "pid_starttime=1", false, out), -EINVAL);
		*cur = *out;
		cur->a.pid = 0;
		cur->a.pid_starttime = 0;
	}

	/* claimed_at: equal spellings always, a new value only on the first write */
	ck_assert_int_eq(parse(cur, "claimed_at=2026-11-29T07:00:00Z", false, out), 0);
	ck_assert_int_eq(parse(cur, "claimed_at=2026-11-29T07:00:01Z", false, out), -EINVAL);
	ck_assert_int_eq(parse(cur, "claimed_at=2026-11-29T07:00:01.5Z", true, out), 0);
	ck_assert_str_eq(out->a.claimed_at, "2026-11-29T07:00:01.500000000Z");

	static const char *const bad[] = {
		BAD_ASSIGNMENT_LINES,
		"control=/"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(untouched, 0xa5, sizeof(*untouched));
		memcpy(out, untouched, sizeof(*out));
		ck_assert_msg(parse(cur, bad[i], true, out) == -EINVAL, "accepted: %s", bad[i]);
		ck_assert_msg(memcmp(out, untouched, sizeof(*out)) == 0, "changed by: %s", bad[i]);
	}
}
END_TEST

/* Every transition of an open claim file (fs/claims.h), in one table. */
START_TEST(test_claim_states)
{
	static const struct {
		enum claim_state from;
		enum claim_event ev;
		enum claim_state to;
	} t[] = {
		{ CLAIM_RESERVED, CLAIM_EV_STAGE, CLAIM_RESERVED_STAGED },
		{ CLAIM_RESERVED_STAGED, CLAIM_EV_STAGE, CLAIM_RESERVED_STAGED },
		{ CLAIM_RESERVED_STAGED, CLAIM_EV_COMMIT, CLAIM_MADE },
		{ CLAIM_RESERVED_STAGED, CLAIM_EV_INCOMPLETE, CLAIM_RESERVED_STAGED },
		{ CLAIM_RESERVED_STAGED, CLAIM_EV_REFUSE, CLAIM_POISONED },
		{ CLAIM_MADE, CLAIM_EV_STAGE, CLAIM_MADE_STAGED },
		{ CLAIM_MADE_STAGED, CLAIM_EV_COMMIT, CLAIM_MADE },
		{ CLAIM_MADE_STAGED, CLAIM_EV_REFUSE, CLAIM_POISONED },
		{ CLAIM_MADE, CLAIM_EV_RELEASED, CLAIM_OPEN },
		{ CLAIM_OPEN, CLAIM_EV_STAGE, CLAIM_STAGED },
		{ CLAIM_STAGED, CLAIM_EV_COMMIT, CLAIM_OPEN },
		{ CLAIM_STAGED, CLAIM_EV_INCOMPLETE, CLAIM_STAGED },
		{ CLAIM_OPEN, CLAIM_EV_RELEASED, CLAIM_OPEN },
		/* nothing leaves POISONED: nothing from the handle is committed */
		{ CLAIM_POISONED, CLAIM_EV_STAGE, CLAIM_POISONED },
		{ CLAIM_POISONED, CLAIM_EV_COMMIT, CLAIM_POISONED },
		{ CLAIM_POISONED, CLAIM_EV_RELEASED, CLAIM_POISONED },
		{ CLAIM_RESERVED, CLAIM_EV_REFUSE, CLAIM_POISONED },
		{ CLAIM_RESERVED, CLAIM_EV_COMMIT, CLAIM_RESERVED }, /* nothing staged */
		/* a release is staged like a claim, alone, and committed at FLUSH */
		{ CLAIM_OPEN, CLAIM_EV_STAGE_RELEASE, CLAIM_RELEASE_STAGED },
		{ CLAIM_MADE, CLAIM_EV_STAGE_RELEASE, CLAIM_RELEASE_STAGED },
		{ CLAIM_RESERVED, CLAIM_EV_STAGE_RELEASE, CLAIM_RELEASE_STAGED },
		{ CLAIM_RELEASE_STAGED, CLAIM_EV_STAGE_RELEASE, CLAIM_RELEASE_STAGED },
		{ CLAIM_RELEASE_STAGED, CLAIM_EV_RELEASED, CLAIM_OPEN },
		{ CLAIM_RELEASE_STAGED, CLAIM_EV_REFUSE, CLAIM_POISONED },
		{ CLAIM_RELEASE_STAGED, CLAIM_EV_STAGE, CLAIM_POISONED }, /* mixed with a claim */
		{ CLAIM_STAGED, CLAIM_EV_STAGE_RELEASE, CLAIM_POISONED },
		{ CLAIM_RESERVED_STAGED, CLAIM_EV_STAGE_RELEASE, CLAIM_POISONED },
		{ CLAIM_MADE_STAGED, CLAIM_EV_STAGE_RELEASE, CLAIM_POISONED },
		{ CLAIM_POISONED, CLAIM_EV_STAGE_RELEASE, CLAIM_POISONED },
	};

	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		ck_assert_msg(claim_next(t[i].from, t[i].ev) == t[i].to, "transition %zu", i);
}
END_TEST

START_TEST(test_claim_render)
{
	_cleanup_free_ struct store_claim *c = sample_claim();
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	out = open_memstream(&text, &len);
	assignment_render(&c->a, out);
	fclose(out);
	ck_assert_str_eq(text, "claimed_at=2026-11-29T07:00:00.000000000Z\nagent=\ncontrol=\npid=\n"
			       "pid_starttime=\nboot_id=\n");
	free(text);

	strcpy(c->a.agent, "vsock:3:2222");
	c->a.pid = 42;
	c->a.pid_starttime = 8765;
	strcpy(c->a.boot_id, "0123abcd-4567-89ef-0123-456789abcdef");
	out = open_memstream(&text, &len);
	assignment_render(&c->a, out);
	fclose(out);
	ck_assert_str_eq(text,
			 "claimed_at=2026-11-29T07:00:00.000000000Z\nagent=vsock:3:2222\ncontrol=\n"
			 "pid=42\npid_starttime=8765\n"
			 "boot_id=0123abcd-4567-89ef-0123-456789abcdef\n");
	free(text);
}
END_TEST

/* -- the notifier ------------------------------------------------------------------ */

/* More VFs than the dirty set holds, so it must collapse. */
#define MANY_VFS (NOTIFY_MAX_QUEUED_VFS + 76)

static char tmpdir[PATH_MAX];
static struct store *store;

static void vf_name(int i, char out[VF_ADDR_BUFSZ])
{
	unsigned u = (unsigned)i;

	snprintf(out, VF_ADDR_BUFSZ, "0000:%02x:%02x.%u", (u / 64) & 0xff, (u / 8) % 8, u % 8);
}

static int vf_count;

struct register_job {
	int first, step;
	int result;
};

static void *register_vfs(void *arg)
{
	struct register_job *job = arg;

	for (int i = job->first; i < vf_count && job->result == 0; i += job->step) {
		char vf[VF_ADDR_BUFSZ];
		vf_name(i, vf);
		job->result = store_vf_register(store, vf, NULL);
	}
	return NULL;
}

static void store_setup(int count)
{
	char path[PATH_MAX + 16];
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	struct register_job jobs[8];
	pthread_t threads[8];

	snprintf(tmpdir, sizeof(tmpdir), "%s/vfhealth-notify.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/db", tmpdir);
	struct store_options so = { .path = path, .threshold = 0, .max_quarantined = -1 };
	ck_assert_int_eq(store_open(&so, &store), 0);
	/* Concurrent writers share commits (the store's group commit). */
	vf_count = count;
	for (int t = 0; t < 8; t++) {
		jobs[t] = (struct register_job){ .first = t, .step = 8 };
		ck_assert_int_eq(pthread_create(&threads[t], NULL, register_vfs, &jobs[t]), 0);
	}
	for (int t = 0; t < 8; t++) {
		pthread_join(threads[t], NULL);
		ck_assert_int_eq(jobs[t].result, 0);
	}
}

static void few_vfs_setup(void)
{
	store_setup(3);
}

static void many_vfs_setup(void)
{
	store_setup(MANY_VFS);
}

static void store_teardown(void)
{
	char cmd[PATH_MAX + 16];

	store_close(store);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static bool changed(struct notifier *n, const char *vf, int index)
{
	struct notify_key key = { .scope = vf[0] ? NOTIFY_VF : NOTIFY_TOP, .index = index };
	struct timespec t;

	snprintf(key.addr, sizeof(key.addr), "%s", vf);
	return notifier_mtime(n, &key, &t);
}

/* Wait (bounded) until the notifier has processed the file. */
static bool wait_changed(struct notifier *n, const char *vf, int index)
{
	int64_t deadline = monotonic_ns() + 20LL * 1000000000;

	while (!changed(n, vf, index)) {
		if (monotonic_ns() > deadline)
			return false;
		usleep(1000);
	}
	return true;
}

static struct notifier *new_notifier(void)
{
	struct notifier *n;

	/* No session: nothing here has a poll handle pending.  The mountpoint
	 * does not exist, so the inotify touches fail quietly with ENOENT. */
	ck_assert_int_eq(notifier_new(NULL, "/nonexistent/vfhealth-test", store, &n), 0);
	return n;
}

START_TEST(test_notify_mapping)
{
	struct notifier *n = new_notifier();
	struct store_change failures = { .bits = STORE_CHANGE_FAILURES };
	struct store_change quarantine = { .bits = STORE_CHANGE_QUARANTINE };
	char vf0[VF_ADDR_BUFSZ], vf1[VF_ADDR_BUFSZ], vf2[VF_ADDR_BUFSZ];

	vf_name(0, vf0);
	vf_name(1, vf1);
	vf_name(2, vf2);
	snprintf(failures.vf, sizeof(failures.vf), "%s", vf0);
	snprintf(quarantine.vf, sizeof(quarantine.vf), "%s", vf1);
	notifier_store_change(n, &failures);
	notifier_store_change(n, &quarantine);
	ck_assert_int_eq(notifier_start(n), 0);

	ck_assert(wait_changed(n, vf0, VF_TALLY));
	ck_assert(wait_changed(n, vf0, VF_FAILURES));
	ck_assert(wait_changed(n, vf1, VF_QUARANTINED));
	ck_assert(wait_changed(n, "", TOP_QUARANTINED));
	ck_assert(wait_changed(n, "", TOP_RESOURCES));
	notifier_stop(n); /* everything queued before is done */
	ck_assert(!changed(n, vf0, VF_QUARANTINED));
	ck_assert(!changed(n, vf1, VF_TALLY));
	ck_assert(!changed(n, vf2, VF_TALLY));
	ck_assert(!changed(n, "", TOP_THRESHOLD));
	ck_assert(!changed(n, "", TOP_METRICS));
	notifier_free(n);
}
END_TEST

START_TEST(test_notify_status_reaches_every_vf)
{
	struct notifier *n = new_notifier();
	struct store_change status = { .bits = STORE_CHANGE_STATUS };
	char vf[VF_ADDR_BUFSZ];

	notifier_store_change(n, &status);
	ck_assert_int_eq(notifier_start(n), 0);
	ck_assert(wait_changed(n, "", TOP_STATUS));
	for (int i = 0; i < MANY_VFS; i++) {
		vf_name(i, vf);
		ck_assert_msg(wait_changed(n, vf, VF_QUARANTINED), "%s/quarantined", vf);
	}
	notifier_stop(n);
	ck_assert(!changed(n, vf, VF_TALLY));
	notifier_free(n);
}
END_TEST

START_TEST(test_notify_overflow_loses_nothing)
{
	struct notifier *n = new_notifier();
	char vf[VF_ADDR_BUFSZ];

	/* Queued before the thread runs: the set overflows and collapses.  (A
	 * change of read-through files only is announced at once, never
	 * queued: these change VF/quarantined, which readers page-cache.) */
	for (int i = 0; i < MANY_VFS; i++) {
		struct store_change c = { .bits = STORE_CHANGE_FAILURES | STORE_CHANGE_QUARANTINE };
		vf_name(i, c.vf);
		notifier_store_change(n, &c);
	}
	ck_assert_int_eq(notifier_start(n), 0);
	for (int i = 0; i < MANY_VFS; i++) {
		vf_name(i, vf);
		ck_assert_msg(wait_changed(n, vf, VF_TALLY), "%s/tally", vf);
		ck_assert_msg(wait_changed(n, vf, VF_QUARANTINED), "%s/quarantined", vf);
	}
	notifier_free(n);
}
END_TEST

static bool gpu_changed(struct notifier *n, const char *gpu, int index)
{
	struct notify_key key = { .scope = NOTIFY_GPU, .index = index };
	struct timespec t;

	snprintf(key.addr, sizeof(key.addr), "%s", gpu);
	return notifier_mtime(n, &key, &t);
}

/* A change reaches the files of the GPU it names (a VF's parent, a drain's
 * GPU), no other GPU's, and only those whose text changed; a VF without a
 * parent reaches no GPU. */
START_TEST(test_notify_gpu_mapping)
{
	char vf0[VF_ADDR_BUFSZ], vf1[VF_ADDR_BUFSZ], vf2[VF_ADDR_BUFSZ];
	const char *pf_a = "0000:40:00.0", *pf_b = "0000:50:00.0";
	struct store_claim claim = { 0 };

	vf_name(0, vf0);
	vf_name(1, vf1);
	vf_name(2, vf2);
	ck_assert_int_eq(store_vf_set_parent(store, vf0, pf_a, NULL), 0);
	ck_assert_int_eq(store_vf_set_parent(store, vf1, pf_b, NULL), 0);
	struct notifier *n = new_notifier();
	ck_assert_int_eq(notifier_start(n), 0); /* what the files say now is seen */

	/* a claim on a serving GPU's VF: its state reads the same */
	snprintf(claim.a.vf, sizeof(claim.a.vf), "%s", vf1);
	snprintf(claim.a.instance_id, sizeof(claim.a.instance_id), "i-1");
	ck_assert_int_eq(store_claim(store, &claim, NULL), 0);
	struct store_change claimed = { .bits = STORE_CHANGE_CLAIMS };
	snprintf(claimed.vf, sizeof(claimed.vf), "%s", vf1);
	snprintf(claimed.parent, sizeof(claimed.parent), "%s", pf_b);
	notifier_store_change(n, &claimed);
	/* a VF without a parent reaches no GPU */
	struct store_change orphan = { .bits = STORE_CHANGE_CLAIMS | STORE_CHANGE_VFS };
	snprintf(orphan.vf, sizeof(orphan.vf), "%s", vf2);
	notifier_store_change(n, &orphan);
	/* a drain of A */
	ck_assert_int_eq(store_gpu_drain(store, pf_a, true, 0, NULL, NULL), 0);
	struct store_change drain = { .bits = STORE_CHANGE_GPU };
	snprintf(drain.parent, sizeof(drain.parent), "%s", pf_a);
	notifier_store_change(n, &drain);
	ck_assert(wait_changed(n, vf2, VF_HISTORY)); /* the orphan's own file */
	/* the drain, queued last, is announced after the renders of its pass:
	 * by then every change queued before it is done (a stopping notifier
	 * would mark what is left unrendered) */
	for (int64_t deadline = monotonic_ns() + 20LL * 1000000000;
	     !gpu_changed(n, pf_a, GPU_STATE) && monotonic_ns() < deadline;)
		usleep(1000);
	notifier_stop(n);
	ck_assert(gpu_changed(n, pf_a, GPU_STATE));
	ck_assert(gpu_changed(n, pf_a, GPU_DRAIN));
	ck_assert(gpu_changed(n, pf_a, GPU_HISTORY));
	ck_assert(!gpu_changed(n, pf_a, GPU_VFS));
	for (int i = 0; i < GPU_FILE_COUNT; i++)
		ck_assert_msg(!gpu_changed(n, pf_b, i), "%s/%s", pf_b, gpu_files[i].name);
	notifier_free(n);
}
END_TEST

START_TEST(test_notify_poll_generations)
{
	struct notifier *n = new_notifier();
	struct notify_watch w = { .key = { .index = TOP_THRESHOLD } };
	struct store_change threshold = { .bits = STORE_CHANGE_THRESHOLD };
	unsigned plain = POLLIN | POLLRDNORM;

	ck_assert_int_eq(notifier_watch_add(n, &w), 0);
	ck_assert_uint_eq(notifier_poll(n, &w, NULL, false), plain);
	ck_assert_int_eq(notifier_start(n), 0);
	notifier_store_change(n, &threshold);
	ck_assert(wait_changed(n, "", TOP_THRESHOLD));
	/* The generation moves after the invalidation and the replies (the
	 * ordering rule), a moment after the mtime: wait for it, bounded. */
	for (int64_t deadline = monotonic_ns() + 20LL * 1000000000;
	     notifier_poll(n, &w, NULL, false) == plain && monotonic_ns() < deadline;)
		usleep(1000);
	/* Changed since the last read: POLLPRI|POLLERR until the reader catches up. */
	ck_assert_uint_eq(notifier_poll(n, &w, NULL, false), plain | POLLPRI | POLLERR);
	ck_assert_uint_eq(notifier_poll(n, &w, NULL, false), plain | POLLPRI | POLLERR);
	notifier_seen(n, &w);
	ck_assert_uint_eq(notifier_poll(n, &w, NULL, false), plain);
	/* A watch added after a change starts as having seen it. */
	struct notify_watch late = { .key = { .index = TOP_THRESHOLD } };
	ck_assert_int_eq(notifier_watch_add(n, &late), 0);
	ck_assert_uint_eq(notifier_poll(n, &late, NULL, false), plain);
	notifier_watch_remove(n, &late);
	notifier_watch_remove(n, &w);
	notifier_free(n);
}
END_TEST

/* -- metrics providers ------------------------------------------------------------- */

static void provide_a(void *userdata, FILE *out)
{
	fprintf(out, "a_total %d\n", *(int *)userdata);
}

static void provide_b(void *userdata, FILE *out)
{
	fputs("b_total 2\n", out);
}

/* What `metrics` says with the given provider list. */
static char *render_metrics(struct metrics *m)
{
	struct vfile_call call = { .store = store, .metrics = m };
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(top_files[TOP_METRICS].render(&call, out), 0);
	ck_assert_int_eq(fclose(out), 0);
	return buf;
}

START_TEST(test_metrics_providers)
{
	struct metrics *m = NULL;
	int one = 1;
	_cleanup_free_ char *plain = NULL, *with = NULL;

	ck_assert_int_eq(metrics_new(&m), 0);
	plain = render_metrics(NULL); /* no list: the store's series alone */
	ck_assert_ptr_nonnull(strstr(plain, "\nvfhealth_vfs 3\n"));
	ck_assert_ptr_null(strstr(plain, "a_total"));

	/* The providers' lines follow the store's, in registration order. */
	ck_assert_int_eq(metrics_add_provider(m, provide_a, &one), 0);
	ck_assert_int_eq(metrics_add_provider(m, provide_b, NULL), 0);
	with = render_metrics(m);
	ck_assert_uint_gt(strlen(with), strlen(plain));
	ck_assert_int_eq(strncmp(with, plain, strlen(plain)), 0);
	ck_assert_str_eq(with + strlen(plain), "a_total 1\nb_total 2\n");

	/* Bounded, and bad input changes nothing. */
	ck_assert_int_eq(metrics_add_provider(m, NULL, NULL), -EINVAL);
	ck_assert_int_eq(metrics_add_provider(NULL, provide_b, NULL), -EINVAL);
	for (int i = 2; i < METRICS_MAX_PROVIDERS; i++)
		ck_assert_int_eq(metrics_add_provider(m, provide_b, NULL), 0);
	ck_assert_int_eq(metrics_add_provider(m, provide_a, &one), -ENOSPC);
	metrics_free(m);
	metrics_free(NULL);
}
END_TEST

/* -- the reader budget ----------------------------------------------------------- */

START_TEST(test_budget)
{
	struct budget *b;
	bool uid_spent;

	ck_assert_int_eq(budget_new(250, 100, &b), 0);
	/* A uid's own budget: up to it exactly, then -ENOBUFS and nothing charged. */
	ck_assert_int_eq(budget_charge(b, 1000, 60, &uid_spent), 0);
	ck_assert_int_eq(budget_charge(b, 1000, 40, &uid_spent), 0);
	ck_assert_int_eq(budget_charge(b, 1000, 1, &uid_spent), -ENOBUFS);
	ck_assert(uid_spent);
	ck_assert_int_eq(budget_charge(b, 1000, SIZE_MAX, &uid_spent), -ENOBUFS);
	ck_assert_uint_eq(budget_held(b, 1000), 100);
	ck_assert_uint_eq(budget_total(b), 100);
	/* Others are not affected by it ... */
	ck_assert_int_eq(budget_charge(b, 1001, 100, NULL), 0);
	/* ... until the total over every uid but root is spent. */
	ck_assert_int_eq(budget_charge(b, 1002, 51, &uid_spent), -ENOBUFS);
	ck_assert(!uid_spent);
	ck_assert_int_eq(budget_charge(b, 1002, 50, &uid_spent), 0);
	ck_assert_uint_eq(budget_total(b), 250);
	/* Root is not counted in the total: it has its own per-uid budget. */
	ck_assert_int_eq(budget_charge(b, 0, 100, NULL), 0);
	ck_assert_int_eq(budget_charge(b, 0, 1, &uid_spent), -ENOBUFS);
	ck_assert(uid_spent);
	ck_assert_uint_eq(budget_total(b), 250);
	/* Releases give back, never more than held; an empty uid is forgotten. */
	budget_release(b, 1000, 60);
	ck_assert_uint_eq(budget_held(b, 1000), 40);
	budget_release(b, 1000, 1000);
	ck_assert_uint_eq(budget_held(b, 1000), 0);
	budget_release(b, 4242, 10);
	ck_assert_uint_eq(budget_total(b), 150);
	ck_assert_int_eq(budget_charge(b, 1002, 50, NULL), 0);
	ck_assert_int_eq(budget_charge(b, 1003, 0, NULL), 0);
	/* Logged at most once per interval, for each kind. */
	ck_assert(budget_log_due(b, true, 1));
	ck_assert(!budget_log_due(b, true, 2));
	ck_assert(budget_log_due(b, false, 3));
	ck_assert(budget_log_due(b, true, 1 + (int64_t)BUDGET_LOG_INTERVAL_S * 1000000000));
	budget_free(b);
	budget_free(NULL);
}
END_TEST

static Suite *vffs_suite(void)
{
	Suite *s = suite_create("vffs");
	TCase *tables = check_tcase("tables", 30);
	TCase *notify = check_tcase("notify", 30);
	TCase *many = check_tcase("notify-many", 60);

	tcase_add_test(tables, test_tables);
	tcase_add_test(tables, test_claim_parse);
	tcase_add_test(tables, test_claim_render);
	tcase_add_test(tables, test_claim_states);
	tcase_add_test(tables, test_budget);
	suite_add_tcase(s, tables);

	tcase_add_checked_fixture(notify, few_vfs_setup, store_teardown);
	tcase_add_test(notify, test_notify_mapping);
	tcase_add_test(notify, test_notify_gpu_mapping);
	tcase_add_test(notify, test_notify_poll_generations);
	tcase_add_test(notify, test_metrics_providers);
	suite_add_tcase(s, notify);

	tcase_add_checked_fixture(many, many_vfs_setup, store_teardown);
	tcase_add_test(many, test_notify_status_reaches_every_vf);
	tcase_add_test(many, test_notify_overflow_loses_nothing);
	suite_add_tcase(s, many);
	return s;
}

CHECK_MAIN(vffs_suite)
