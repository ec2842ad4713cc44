/* SPDX-License-Identifier: MIT */
/* Unit tests for guest-agent/probe.c with fake nvidia-smi scripts that
 * succeed, fail, or hang, and stand-in device nodes (files open, FIFOs block,
 * dangling links fail); the back-off after the window on a fake clock.
 * The probe is driven the way the agent drives it:
 * SIGCHLD through a signalfd, timers from probe_next_wakeup.  The test
 * process is a child subreaper, so anything a killed probe leaves behind
 * would become our child and be caught by the "no children left" checks. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest-agent/probe.h"
#include "common/cleanup.h"
#include "common/parse.h"
#include "tests/common/check-main.h"

#define MS (1000 * 1000LL)

static char dir[64];
/* when each attempt was started (the probe's own clock reading) */
static int64_t starts[64];
static int n_starts;

static void setup(void)
{
	strcpy(dir, "/tmp/vfh-probe-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "/bin/rm -rf '%s'", dir);
	if (system(cmd) != 0) {
		/* best effort */
	}
}

static const char *script(const char *name, const char *body)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\nD='%s'\n%s\n", dir, body);
	fclose(f);
	ck_assert_int_eq(chmod(path, 0755), 0);
	return path;
}

/* Drive the probe until it finishes or `limit_ns` passes.  Checks on the
 * way that a new attempt only starts once the previous child is reaped.
 * Returns how many times probe_step reported success. */
static int drive(struct probe *p, int64_t limit_ns)
{
	sigset_t mask;
	_cleanup_close_ int sfd = -1;
	int64_t end = monotonic_ns() + limit_ns;
	int successes = 0;
	pid_t last = 0;

	n_starts = 0; /* with CK_FORK=no (valgrind) every test shares these */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &mask, NULL), 0);
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	ck_assert_int_ge(sfd, 0);

	while (!p->finished && monotonic_ns() < end) {
		int64_t now = monotonic_ns(), wake = MIN(probe_next_wakeup(p), end);
		struct pollfd pfd = { .fd = sfd, .events = POLLIN };
		struct signalfd_siginfo si;
		int timeout = wake <= now ? 0 : (int)((wake - now + MS - 1) / MS);

		ck_assert_int_ge(poll(&pfd, 1, timeout), 0);
		while (read(sfd, &si, sizeof(si)) == sizeof(si))
			;
		for (int i = 0; i < 2; i++) { /* a reap may make the next attempt due */
			if (probe_step(p, monotonic_ns()) == 1)
				successes++;
			if (p->pid > 0 && p->pid != last) {
				if (n_starts < 64)
					starts[n_starts++] = p->attempt_deadline_ns - p->timeout_ns;
				/* the previous attempt is gone: not even a zombie */
				if (last > 0)
					ck_assert_int_eq(kill(last, 0), -1);
				last = p->pid;
			}
		}
	}
	return successes;
}

/* After the probe: reap what the subreaper inherited (a killed helper),
 * then there must be no child at all. */
static void assert_no_children(void)
{
	int64_t end = monotonic_ns() + 2000 * MS;
	pid_t r;

	while ((r = waitpid(-1, NULL, WNOHANG)) > 0 || (r == 0 && monotonic_ns() < end))
		if (r == 0)
			poll(NULL, 0, 10); /* a killed helper is on its way to zombie */
	ck_assert_int_eq(r, -1);
	ck_assert_int_eq(errno, ECHILD);
}

static int count_lines(const char *name)
{
	char path[128], line[64];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

START_TEST(test_success_first_time)
{
	struct probe p;
	const char *smi = script("smi", "echo \"$1\" >> \"$D/args\"\nexit 0");

	ck_assert_int_eq(probe_init(&p, smi, 100 * MS, 5000 * MS, 2000 * MS, monotonic_ns()), 0);
	ck_assert_int_eq(drive(&p, 5000 * MS), 1);
	ck_assert(p.succeeded);
	ck_assert(p.finished);
	ck_assert_uint_eq(p.attempts, 1);
	ck_assert_int_eq(probe_next_wakeup(&p), INT64_MAX); /* nothing more to do */
	ck_assert_int_eq(count_lines("args"), 1);
	/* it ran "nvidia-smi -L" */
	char path[128], arg[16] = "";
	snprintf(path, sizeof(path), "%s/args", dir);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(fgets(arg, sizeof(arg), f));
	fclose(f);
	ck_assert_str_eq(arg, "-L\n");
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_success_on_third_attempt)
{
	struct probe p;
	const char *smi = script("smi", "echo x >> \"$D/runs\"\n"
					"[ $(wc -l < \"$D/runs\") -ge 3 ]");

	ck_assert_int_eq(probe_init(&p, smi, 100 * MS, 10000 * MS, 2000 * MS, monotonic_ns()), 0);
	ck_assert_int_eq(drive(&p, 10000 * MS), 1);
	ck_assert_uint_eq(p.attempts, 3);
	ck_assert_uint_eq(p.failures, 2);
	ck_assert(p.finished);
	probe_free(&p);
	ck_assert_int_eq(count_lines("runs"), 3); /* no attempt after the success */
	assert_no_children();
}
END_TEST

START_TEST(test_failing_until_window_ends)
{
	struct probe p;
	const char *smi = script("smi", "echo x >> \"$D/runs\"\nexit 3");
	int64_t start = monotonic_ns();

	ck_assert_int_eq(probe_init(&p, smi, 100 * MS, 600 * MS, 2000 * MS, start), 0);
	ck_assert_int_eq(p.last_exit_status, -1); /* no attempt has ended */
	ck_assert_int_eq(drive(&p, 5000 * MS), 0);
	ck_assert(p.finished);
	ck_assert(!p.succeeded);
	ck_assert_int_ge(monotonic_ns() - start, 600 * MS); /* ran the whole window */
	/* one attempt at 0 then every 100 ms inside 600 ms: 6, give or take the
	 * scheduling of a loaded machine */
	ck_assert_uint_ge(p.attempts, 2); /* it went on after a failure */
	ck_assert_uint_le(p.attempts, 7); /* but not more often than the interval */
	ck_assert_uint_eq(p.failures, p.attempts);
	ck_assert_int_eq(p.last_exit_status, 3); /* the agent's telemetry says so */
	ck_assert_int_eq(count_lines("runs"), (int)p.attempts);

	/* spacing: attempts started never closer than the interval */
	for (int i = 1; i < n_starts; i++)
		ck_assert_msg(starts[i] - starts[i - 1] >= 100 * MS, "attempts %.3fs apart",
			      (double)(starts[i] - starts[i - 1]) / 1e9);
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_hang_is_killed_and_reaped)
{
	struct probe p;
	/* A helper (sleep) in the script's process group, and the script
	 * waiting for it: both must die at the timeout. */
	const char *smi = script("smi", "echo $$ >> \"$D/runs\"\nsleep 1000 &\n"
					"echo $! >> \"$D/helpers\"\nwait\nexit 0");
	int64_t start = monotonic_ns();

	ck_assert_int_eq(probe_init(&p, smi, 100 * MS, 1000 * MS, 300 * MS, start), 0);
	ck_assert_int_eq(drive(&p, 10000 * MS), 0);
	ck_assert(p.finished);
	ck_assert(!p.succeeded);
	/* each attempt killed at 300 ms, reaped, and the next one followed */
	ck_assert_uint_ge(p.attempts, 2);
	ck_assert_uint_le(p.attempts, 5); /* 1000 ms window / 300 ms, no pile-up */
	ck_assert_uint_eq(p.timeouts, p.attempts);
	ck_assert_int_eq(p.last_exit_status, 128 + SIGKILL); /* killed at its deadline */
	ck_assert_int_ge(monotonic_ns() - start, 300 * MS * (int64_t)p.attempts);
	ck_assert_int_eq(count_lines("runs"), (int)p.attempts);
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_stop_kills_running_attempt)
{
	struct probe p;
	const char *smi = script("smi", "exec sleep 1000");
	int64_t start = monotonic_ns();

	ck_assert_int_eq(probe_init(&p, smi, 100 * MS, 60000 * MS, 30000 * MS, start), 0);
	ck_assert_int_eq(probe_step(&p, start), 0);
	ck_assert_int_gt(p.pid, 0);
	probe_stop(&p);
	ck_assert_int_eq(p.pid, 0);
	ck_assert_int_lt(monotonic_ns() - start, 30000 * MS); /* not the 60 s window */
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_missing_binary_retries)
{
	struct probe p;
	char path[128];

	snprintf(path, sizeof(path), "%s/does-not-exist", dir);
	ck_assert_int_eq(probe_init(&p, path, 100 * MS, 350 * MS, 1000 * MS, monotonic_ns()), 0);
	ck_assert_int_eq(drive(&p, 5000 * MS), 0);
	ck_assert(p.finished);
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_find_nvidia_smi)
{
	_cleanup_free_ char *found = NULL;
	char env[256];

	script("nvidia-smi", "exit 0");
	snprintf(env, sizeof(env), "relative:/nonexistent:%s", dir);
	setenv("PATH", env, 1);
	ck_assert_int_eq(probe_find_nvidia_smi(NULL, &found), 0);
	ck_assert_str_eq(found, script("nvidia-smi", "exit 0"));
	free(found);
	found = NULL;

	setenv("PATH", "/nonexistent", 1);
	ck_assert_int_eq(probe_find_nvidia_smi(NULL, &found), -ENOENT);
	ck_assert_int_eq(probe_find_nvidia_smi("/nonexistent/nvidia-smi", &found), -EACCES);
	ck_assert_ptr_null(found);
}
END_TEST

/* ---- the device probe: stand-ins for the driver's nodes ---------------- */

static void make_node(const char *name, char kind)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/dev/%s", dir, name);
	if (kind == 'f')
		fclose(fopen(path, "w")); /* opens: a GPU that came up */
	else
		ck_assert_int_eq(mkfifo(path, 0600), 0); /* open blocks: a driver stuck in init */
}

static void make_dev_dir(void)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/dev", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
}

START_TEST(test_device_nodes_open_is_ok)
{
	struct probe p;
	char dev[160];

	make_dev_dir();
	make_node("nvidiactl", 'f');
	make_node("nvidia0", 'f');
	make_node("nvidia-uvm", 'p'); /* not a GPU's node: never opened (it would block) */
	snprintf(dev, sizeof(dev), "%s/dev", dir);
	/* no nvidia-smi at all: the nodes alone prove OK */
	ck_assert_int_eq(probe_init(&p, NULL, 100 * MS, 5000 * MS, 2000 * MS, monotonic_ns()), 0);
	ck_assert_int_eq(probe_set_device_dir(&p, dev), 0);
	ck_assert_int_eq(drive(&p, 5000 * MS), 1);
	ck_assert(p.succeeded);
	ck_assert_uint_eq(p.attempts, 1);
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_device_nodes_missing_then_nvidia_smi)
{
	struct probe p;
	const char *smi = script("smi", "echo x >> \"$D/args\"\nexit 0");
	char dev[160];

	/* nvidiactl but no nvidiaN: the nodes prove nothing, nvidia-smi runs */
	make_dev_dir();
	make_node("nvidiactl", 'f');
	snprintf(dev, sizeof(dev), "%s/dev", dir);
	ck_assert_int_eq(probe_init(&p, smi, 100 * MS, 5000 * MS, 2000 * MS, monotonic_ns()), 0);
	ck_assert_int_eq(probe_set_device_dir(&p, dev), 0);
	ck_assert_int_eq(drive(&p, 5000 * MS), 1);
	ck_assert_int_eq(count_lines("args"), 1);
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_device_node_failing_open_is_not_ok)
{
	struct probe p;
	char dev[160];

	/* nvidia0 opens, nvidia1 fails (a dangling link: ENOENT even as root,
	 * like a failed RmInitAdapter's open): not OK, attempts go on */
	make_dev_dir();
	make_node("nvidiactl", 'f');
	make_node("nvidia0", 'f');
	snprintf(dev, sizeof(dev), "%s/dev/nvidia1", dir);
	ck_assert_int_eq(symlink("/nonexistent/vfh-node", dev), 0);
	snprintf(dev, sizeof(dev), "%s/dev", dir);
	ck_assert_int_eq(probe_init(&p, NULL, 100 * MS, 600 * MS, 2000 * MS, monotonic_ns()), 0);
	ck_assert_int_eq(probe_set_device_dir(&p, dev), 0);
	ck_assert_int_eq(drive(&p, 5000 * MS), 0);
	ck_assert(p.finished);
	ck_assert(!p.succeeded);
	ck_assert_uint_ge(p.attempts, 3);
	ck_assert_uint_eq(p.failures, p.attempts);
	probe_free(&p);
	assert_no_children();
}
END_TEST

START_TEST(test_device_node_blocking_open_is_killed)
{
	struct probe p;
	char dev[160];
	int64_t start = monotonic_ns();

	make_dev_dir();
	make_node("nvidiactl", 'f');
	make_node("nvidia0", 'p'); /* the open blocks until a writer comes: never */
	snprintf(dev, sizeof(dev), "%s/dev", dir);
	ck_assert_int_eq(probe_init(&p, NULL, 100 * MS, 1000 * MS, 300 * MS, start), 0);
	ck_assert_int_eq(probe_set_device_dir(&p, dev), 0);
	ck_assert_int_eq(drive(&p, 10000 * MS), 0);
	ck_assert(p.finished);
	ck_assert_uint_ge(p.timeouts, 2);
	ck_assert_uint_le(p.attempts, 5); /* one at a time: 1000 ms window / 300 ms */
	probe_free(&p);
	assert_no_children();
}
END_TEST

/* ---- no cliff: the back-off after the window ----------------------------- */

/* The attempt starts while backing off: 2 x interval, doubling, capped.
 * Attempts that fail at once (no nodes, no nvidia-smi: no child), driven by
 * a fake clock. */
START_TEST(test_backoff_after_window)
{
	struct probe p;
	char dev[160];
	int64_t now = 1000 * MS, expect[] = { 200, 400, 800, 1000, 1000, 1000 };

	make_dev_dir();
	snprintf(dev, sizeof(dev), "%s/dev", dir);
	ck_assert_int_eq(probe_init(&p, NULL, 100 * MS, 1000 * MS, 300 * MS, now), 0);
	ck_assert_int_eq(probe_set_device_dir(&p, dev), 0);
	probe_set_backoff(&p, 1000 * MS);
	/* inside the window: every interval */
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(probe_next_wakeup(&p), now);
		ck_assert_int_eq(probe_step(&p, now), 0);
		ck_assert(!p.backing_off);
		now += 100 * MS;
	}
	ck_assert_uint_eq(p.attempts, 10);
	/* past it: never finished, the delays double up to the cap */
	for (size_t i = 0; i < ARRAY_SIZE(expect); i++) {
		ck_assert_int_eq(probe_step(&p, now), 0);
		ck_assert(p.backing_off);
		ck_assert(!p.finished);
		ck_assert_int_eq(probe_next_wakeup(&p) - now, expect[i] * MS);
		now = probe_next_wakeup(&p);
		/* nothing happens before it is due */
		ck_assert_int_eq(probe_step(&p, now - 1), 0);
		ck_assert_uint_eq(p.attempts, 10 + i + 1);
	}
	/* probe_halt ends it for good */
	probe_halt(&p);
	ck_assert(p.finished);
	ck_assert_int_eq(probe_next_wakeup(&p), INT64_MAX);
	ck_assert_int_eq(probe_step(&p, now + 100000 * MS), 0);
	ck_assert_uint_eq(p.attempts, 10 + ARRAY_SIZE(expect));
	probe_free(&p);
}
END_TEST

/* After the window a late success still counts (the driver was slow). */
START_TEST(test_success_while_backing_off)
{
	struct probe p;
	const char *smi = script("smi", "echo x >> \"$D/args\"\n[ -e \"$D/ok\" ]");
	char ok[160];

	ck_assert_int_eq(probe_init(&p, smi, 50 * MS, 200 * MS, 2000 * MS, monotonic_ns()), 0);
	probe_set_backoff(&p, 200 * MS);
	ck_assert_int_eq(drive(&p, 600 * MS), 0);
	ck_assert(p.backing_off);
	ck_assert(!p.finished);
	snprintf(ok, sizeof(ok), "%s/ok", dir);
	fclose(fopen(ok, "w"));
	ck_assert_int_eq(drive(&p, 5000 * MS), 1);
	ck_assert(p.succeeded);
	probe_free(&p);
	assert_no_children();
}
END_TEST

static const struct check_case probe_case = {
	.suite = "probe",
	.tcase = "core",
	.timeout = 30,
	.setup = setup,
	.teardown = teardown,
};
CHECK_CASE_MAIN(probe_case, test_success_first_time, test_success_on_third_attempt,
		test_failing_until_window_ends, test_hang_is_killed_and_reaped,
		test_stop_kills_running_attempt, test_missing_binary_retries, test_find_nvidia_smi,
		test_device_nodes_open_is_ok, test_device_nodes_missing_then_nvidia_smi,
		test_device_node_failing_open_is_not_ok, test_device_node_blocking_open_is_killed,
		test_backoff_after_window, test_success_while_backing_off)
