/* SPDX-License-Identifier: MIT */
/* Unit tests for sentinel/rules.c and sentinel/options.c: the classifier,
 * the revalidation rule, the liveness verdict and the evidence gatherers
 * (proto/procfs.c against a fake /proc tree and the real one; control paths),
 * and the option parser.  The file grammar the sentinel speaks (assignment
 * files, report commands, outcomes) is tested in tests/grammar/. */
#include <check.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/cleanup.h"
#include "proto/procfs.h"
#include "sentinel/rules.h"
#include "sentinel/sentinel.h"
#include "tests/common/check-main.h"

/* ---- classify ---------------------------------------------------------------- */

static struct agent_status status_of(enum gpu_init_state state)
{
	struct agent_status st = { .state = state };
	return st;
}

START_TEST(test_classify_answers)
{
	struct agent_status ok = status_of(GPU_INIT_OK), failed = status_of(GPU_INIT_FAILED),
			    unknown = status_of(GPU_INIT_UNKNOWN);

	ck_assert_int_eq(sentinel_classify(0, &ok), CHECK_OK);
	ck_assert_int_eq(sentinel_classify(0, &failed), CHECK_FAILED);
	ck_assert_int_eq(sentinel_classify(0, &unknown), CHECK_UNKNOWN);
}
END_TEST

START_TEST(test_classify_errors)
{
	/* The answer must not matter once the call failed. */
	struct agent_status failed = status_of(GPU_INIT_FAILED);
	const int rpc_errors[] = { -ETIMEDOUT, -EPROTO, -ECONNREFUSED, -ENOENT, -ECONNRESET,
				   -ECANCELED, -EIO, -EBADMSG };

	for (size_t i = 0; i < ARRAY_SIZE(rpc_errors); i++)
		ck_assert_msg(sentinel_classify(rpc_errors[i], &failed) == CHECK_RPC_ERROR,
			      "rc %d", rpc_errors[i]);
	ck_assert_int_eq(sentinel_classify(-EOPNOTSUPP, &failed), CHECK_UNSUPPORTED_AGENT);
	ck_assert_int_eq(sentinel_classify(0, NULL), CHECK_RPC_ERROR);
}
END_TEST

START_TEST(test_classify_unknown_state_is_rpc_error)
{
	struct agent_status st = { .state = (enum gpu_init_state)7 };

	ck_assert_int_eq(sentinel_classify(0, &st), CHECK_RPC_ERROR);
}
END_TEST

START_TEST(test_check_result_names)
{
	const char *expected[] = { "ok", "failed", "unknown", "rpc_error", "unsupported_agent" };

	ck_assert_int_eq(ARRAY_SIZE(expected), CHECK_RESULT_COUNT);
	for (int r = 0; r < CHECK_RESULT_COUNT; r++)
		ck_assert_str_eq(check_result_name((enum check_result)r), expected[r]);
	ck_assert_str_eq(check_result_name(CHECK_RESULT_COUNT), "invalid");
}
END_TEST

/* ---- revalidate ------------------------------------------------------------------ */

static struct assignment claim(const char *vf, const char *id, const char *claimed_at)
{
	struct assignment a = { 0 };

	snprintf(a.vf, sizeof(a.vf), "%s", vf);
	snprintf(a.instance_id, sizeof(a.instance_id), "%s", id);
	snprintf(a.claimed_at, sizeof(a.claimed_at), "%s", claimed_at);
	return a;
}

#define T1 "2026-11-29T07:44:51.000000001Z"
#define T2 "2026-11-29T07:44:51.000000002Z"

START_TEST(test_revalidate)
{
	struct assignment captured = claim("0000:41:00.4", "vm-1", T1);
	struct assignment same = claim("0000:41:00.4", "vm-1", T1);
	struct assignment reclaimed = claim("0000:41:00.4", "vm-1", T2);
	struct assignment other = claim("0000:41:00.4", "vm-2", T1);

	/* Unchanged: report. */
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &same), REVALIDATE_REPORT);
	/* Released during the poll: still about the captured assignment. */
	ck_assert_int_eq(sentinel_revalidate(&captured, -ENOENT, NULL), REVALIDATE_REPORT);
	/* Released and re-claimed by the same instance: another assignment. */
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &reclaimed), REVALIDATE_DROP);
	/* Now held by another instance. */
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &other), REVALIDATE_DROP);
	/* Could not re-read: we cannot tell, so say nothing. */
	ck_assert_int_eq(sentinel_revalidate(&captured, -EIO, &same), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, -EACCES, NULL), REVALIDATE_DROP);
}
END_TEST

START_TEST(test_revalidate_empty_claimed_at)
{
	struct assignment captured = claim("0000:41:00.4", "vm-1", "");
	struct assignment stamped = claim("0000:41:00.4", "vm-1", T1);

	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &captured), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &stamped), REVALIDATE_DROP);
}
END_TEST

/* ---- liveness ------------------------------------------------------------------------ */

START_TEST(test_liveness_verdicts)
{
	static const struct {
		struct liveness_evidence ev;
		enum liveness expected;
	} cases[] = {
		/* No control path recorded: nothing to judge by. */
		{ { .control_given = false, .pid = 0 }, LIVENESS_UNMANAGED },
		{ { .control_given = false, .pid = 77, .proc_rc = -ENOENT }, LIVENESS_UNMANAGED },
		/* The control socket exists: alive, whatever the pid says. */
		{ { .control_given = true, .control_rc = 0, .pid = 77, .proc_rc = -ENOENT },
		  LIVENESS_ALIVE },
		/* Cannot stat the control path: uncertain. */
		{ { .control_given = true, .control_rc = -EACCES }, LIVENESS_UNCERTAIN },
		{ { .control_given = true, .control_rc = -ELOOP, .pid = 77, .proc_rc = -ENOENT },
		  LIVENESS_UNCERTAIN },
		/* Gone, and no pid to check: dead. */
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 0 }, LIVENESS_DEAD },
		/* Gone, and the process is gone. */
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .proc_rc = -ENOENT },
		  LIVENESS_DEAD },
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .proc_rc = -ESRCH },
		  LIVENESS_DEAD },
		/* Gone, but the process cannot be checked. */
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .proc_rc = -EACCES },
		  LIVENESS_UNCERTAIN },
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .proc_rc = -EBADMSG },
		  LIVENESS_UNCERTAIN },
		/* Gone, the pid runs with the recorded start time: alive. */
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .starttime_now = 500,
		    .starttime_claimed = 500 },
		  LIVENESS_ALIVE },
		/* ... with no recorded start time: cannot prove reuse, alive. */
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .starttime_now = 500 },
		  LIVENESS_ALIVE },
		/* ... with another start time: the pid was reused, dead. */
		{ { .control_given = true, .control_rc = -ENOENT, .pid = 77, .starttime_now = 501,
		    .starttime_claimed = 500 },
		  LIVENESS_DEAD },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *reason = NULL;
		enum liveness l = liveness_verdict(&cases[i].ev, &reason);

		ck_assert_msg(l == cases[i].expected, "case %zu: %s, expected %s", i,
			      liveness_name(l), liveness_name(cases[i].expected));
		ck_assert_ptr_nonnull(reason);
	}
}
END_TEST

static char fake_root[64];

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void fake_proc_setup(void)
{
	char path[PATH_MAX];

	snprintf(fake_root, sizeof(fake_root), "/tmp/vfsentinel-rules-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fake_root));
	/* A well-formed stat whose comm holds ") (" to fool naive parsers. */
	snprintf(path, sizeof(path), "%s/100", fake_root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/100/stat", fake_root);
	write_text(path, "100 (evil) (comm) S 1 100 100 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
			 "123456 1000 10 18446744073709551615\n");
	/* Unparsable. */
	snprintf(path, sizeof(path), "%s/200", fake_root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/200/stat", fake_root);
	write_text(path, "200 (short) S 1 2 3\n");
	/* A stat that is a directory: read fails with EISDIR. */
	snprintf(path, sizeof(path), "%s/300", fake_root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/300/stat", fake_root);
	mkdir(path, 0755);
}

static void fake_proc_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fake_root);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_proc_starttime_fake_tree)
{
	uint64_t t = 42;

	ck_assert_int_eq(proc_pid_starttime(fake_root, 100, &t), 0);
	ck_assert_uint_eq(t, 123456);
	t = 42;
	ck_assert_int_eq(proc_pid_starttime(fake_root, 200, &t), -EBADMSG);
	ck_assert_int_eq(proc_pid_starttime(fake_root, 300, &t), -EISDIR);
	ck_assert_int_eq(proc_pid_starttime(fake_root, 400, &t), -ENOENT);
	ck_assert_int_eq(proc_pid_starttime(fake_root, 0, &t), -EINVAL);
	ck_assert_uint_eq(t, 42);
}
END_TEST

START_TEST(test_proc_starttime_real)
{
	uint64_t self = 0, again = 0, init = 0;

	/* Our own start time is stable, and we started after pid 1. */
	ck_assert_int_eq(proc_pid_starttime("/proc", getpid(), &self), 0);
	ck_assert_int_eq(proc_pid_starttime(NULL, getpid(), &again), 0);
	ck_assert_uint_eq(self, again);
	ck_assert_int_eq(proc_pid_starttime("/proc", 1, &init), 0);
	ck_assert_uint_ge(self, init);
}
END_TEST

START_TEST(test_proc_stat_parse)
{
	static const char good[] = "7 (a b) c) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 999 1";
	uint64_t t = 0;

	ck_assert_int_eq(proc_stat_parse_starttime(good, strlen(good), &t), 0);
	ck_assert_uint_eq(t, 999);
	ck_assert_int_eq(proc_stat_parse_starttime("7 (x) R 1 2", 11, &t), -EBADMSG);
	ck_assert_int_eq(proc_stat_parse_starttime("no parens at all", 16, &t), -EBADMSG);
	ck_assert_int_eq(proc_stat_parse_starttime("", 0, &t), -EBADMSG);
	static const char junk[] = "7 (x) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 99x 1";
	ck_assert_int_eq(proc_stat_parse_starttime(junk, strlen(junk), &t), -EBADMSG);
	ck_assert_uint_eq(t, 999);
}
END_TEST

START_TEST(test_control_state)
{
	char path[PATH_MAX], loop[PATH_MAX];

	snprintf(path, sizeof(path), "%s/100/stat", fake_root);
	ck_assert_int_eq(sentinel_control_state(path), 0);
	snprintf(path, sizeof(path), "%s/missing.sock", fake_root);
	ck_assert_int_eq(sentinel_control_state(path), -ENOENT);
	/* A component that is a file: the path cannot exist. */
	snprintf(path, sizeof(path), "%s/100/stat/x.sock", fake_root);
	ck_assert_int_eq(sentinel_control_state(path), -ENOENT);
	/* A symlink loop: we cannot tell. */
	snprintf(loop, sizeof(loop), "%s/loop", fake_root);
	ck_assert_int_eq(symlink(loop, loop), 0);
	snprintf(path, sizeof(path), "%s/loop/x.sock", fake_root);
	ck_assert_int_eq(sentinel_control_state(path), -ELOOP);
}
END_TEST

/* ---- options ----------------------------------------------------------------------------- */

START_TEST(test_options)
{
	struct sentinel_options o, before;

	sentinel_options_init(&o);
	ck_assert(o.enabled);
	ck_assert(o.reconcile);
	ck_assert_int_eq(o.poll_interval_ns, 5 * SENTINEL_NS_PER_S);
	ck_assert_int_eq(o.poll_timeout_ns, 5 * SENTINEL_NS_PER_S);
	ck_assert_int_eq(o.reconcile_interval_ns, 60 * SENTINEL_NS_PER_S);
	ck_assert_uint_eq(o.concurrency, 64);

	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_INTERVAL, "0.2"), 0);
	ck_assert_int_eq(o.poll_interval_ns, 200000000);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_TIMEOUT, "1.25"), 0);
	ck_assert_int_eq(o.poll_timeout_ns, 1250000000);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_RECONCILE_INTERVAL, "3"), 0);
	ck_assert_int_eq(o.reconcile_interval_ns, 3 * SENTINEL_NS_PER_S);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONCURRENCY, "1024"), 0);
	ck_assert_uint_eq(o.concurrency, 1024);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_NO_RECONCILE, NULL), 0);
	ck_assert(!o.reconcile);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_NO_SENTINEL, NULL), 0);
	ck_assert(!o.enabled);

	before = o;
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_INTERVAL, "0"), -ERANGE);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_INTERVAL, "-1"), -EINVAL);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_TIMEOUT, "5s"), -EINVAL);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_TIMEOUT, "86401"), -ERANGE);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONCURRENCY, "0"), -ERANGE);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONCURRENCY, "1025"), -ERANGE);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONCURRENCY, "x"), -EINVAL);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_PROC_ROOT, "proc"), -EINVAL);
	ck_assert_int_eq(sentinel_options_apply(&o, 'x', "1"), -ENOENT);
	ck_assert_mem_eq(&o, &before, sizeof(o));
}
END_TEST

START_TEST(test_start_rejects_bad_options)
{
	struct sentinel_options o;
	struct sentinel *s = NULL;

	sentinel_options_init(&o);
	ck_assert_int_eq(sentinel_start("relative", &o, &s), -EINVAL);
	o.concurrency = 0;
	ck_assert_int_eq(sentinel_start("/run/vfhealth", &o, &s), -EINVAL);
	sentinel_options_init(&o);
	o.poll_timeout_ns = 0;
	ck_assert_int_eq(sentinel_start("/run/vfhealth", &o, &s), -EINVAL);
	ck_assert_ptr_null(s);
	sentinel_stop(NULL);
	sentinel_free(NULL);
}
END_TEST

/* Every series the sentinel renders has HELP and TYPE lines before its
 * samples, every check result is present (zeros included), and the names
 * are the ones the issue and the alert rules use. */
START_TEST(test_metrics_render)
{
	static const char *const series[] = {
		"vfhealth_sentinel_checks_total{result=\"ok\"} 0\n",
		"vfhealth_sentinel_checks_total{result=\"failed\"} 0\n",
		"vfhealth_sentinel_checks_total{result=\"unknown\"} 0\n",
		"vfhealth_sentinel_checks_total{result=\"rpc_error\"} 0\n",
		"vfhealth_sentinel_checks_total{result=\"unsupported_agent\"} 0\n",
		"vfhealth_sentinel_init_failures_total 0\n",
		"vfhealth_sentinel_quarantines_total 0\n",
		"vfhealth_sentinel_liveness_uncertain_total 0\n",
		"vfhealth_sentinel_polls_total 0\n",
		"vfhealth_sentinel_list_errors_total 0\n",
		"vfhealth_sentinel_last_poll_duration_seconds 0.000000000\n",
	};
	struct sentinel_options o;
	struct sentinel *s = NULL;
	char dir[] = "/tmp/vfsentinel-metrics-XXXXXX";
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	FILE *out;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	sentinel_options_init(&o);
	o.reconcile = false;
	o.poll_interval_ns = 3600 * SENTINEL_NS_PER_S; /* no poll during the test */
	ck_assert_int_eq(sentinel_start(dir, &o, &s), 0);
	out = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(out);
	sentinel_render_metrics(s, out);
	sentinel_render_metrics(NULL, out); /* not started: renders nothing */
	fclose(out);
	sentinel_stop(s);
	sentinel_free(s);
	rmdir(dir);

	for (size_t i = 0; i < ARRAY_SIZE(series); i++)
		ck_assert_msg(strstr(text, series[i]), "missing %s", series[i]);
	/* A failed listing is no check result (it has its own counter). */
	ck_assert_ptr_null(strstr(text, "list_error\""));
	/* Each sample's metric has # HELP and # TYPE lines before it. */
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char name[128], help[160], type[160];
		const char *end;

		if (line[0] == '#')
			continue;
		/* Every series under one prefix (issue 16.5). */
		ck_assert_msg(strncmp(line, "vfhealth_sentinel_", 18) == 0, "outside: %s", line);
		end = line + strcspn(line, "{ ");
		ck_assert_uint_lt((size_t)(end - line), sizeof(name));
		snprintf(name, sizeof(name), "%.*s", (int)(end - line), line);
		snprintf(help, sizeof(help), "# HELP %s ", name);
		snprintf(type, sizeof(type), "# TYPE %s ", name);
		/* strtok wrote NULs into text, so search the lines before this one. */
		bool seen_help = false, seen_type = false;
		for (const char *p = text; p < line; p += strlen(p) + 1) {
			seen_help |= strncmp(p, help, strlen(help)) == 0;
			seen_type |= strncmp(p, type, strlen(type)) == 0;
		}
		ck_assert_msg(seen_help && seen_type, "%s lacks HELP or TYPE", name);
	}
}
END_TEST

static Suite *rules_suite(void)
{
	Suite *s = suite_create("sentinel-rules");
	TCase *tc;

	tc = tcase_create("classify");
	tcase_add_test(tc, test_classify_answers);
	tcase_add_test(tc, test_classify_errors);
	tcase_add_test(tc, test_classify_unknown_state_is_rpc_error);
	tcase_add_test(tc, test_check_result_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("revalidate");
	tcase_add_test(tc, test_revalidate);
	tcase_add_test(tc, test_revalidate_empty_claimed_at);
	suite_add_tcase(s, tc);

	tc = tcase_create("liveness");
	tcase_add_checked_fixture(tc, fake_proc_setup, fake_proc_teardown);
	tcase_add_test(tc, test_liveness_verdicts);
	tcase_add_test(tc, test_proc_starttime_fake_tree);
	tcase_add_test(tc, test_proc_starttime_real);
	tcase_add_test(tc, test_proc_stat_parse);
	tcase_add_test(tc, test_control_state);
	suite_add_tcase(s, tc);

	tc = tcase_create("options");
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_start_rejects_bad_options);
	tcase_add_test(tc, test_metrics_render);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(rules_suite)
