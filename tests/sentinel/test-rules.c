/* SPDX-License-Identifier: MIT */
/* Unit tests for sentinel/rules.c and sentinel/options.c: the classifier,
 * the revalidation rule, the liveness verdict and the evidence gatherers
 * (proto/procfs.c and sentinel/liveness.c against a fake /proc tree and the
 * real one: start times, boot ids, the Unix socket table),
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/cleanup.h"
#include "proto/procfs.h"
#include "sentinel/liveness.h"
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

	/* With an assignment identity the answer is reported against it,
	 * whatever the VF holds now (issue 11.4): no re-read needed. */
	ck_assert(!sentinel_revalidate_needed(&captured));
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &same), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, -ENOENT, NULL), REVALIDATE_REPORT);
	/* Released and re-claimed by the same instance: still the captured one. */
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &reclaimed), REVALIDATE_REPORT);
	/* Now held by another instance. */
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &other), REVALIDATE_REPORT);
	/* The re-read, were there one, failed (a store outage): still reported. */
	ck_assert_int_eq(sentinel_revalidate(&captured, -EIO, NULL), REVALIDATE_REPORT);
}
END_TEST

START_TEST(test_revalidate_empty_claimed_at)
{
	struct assignment captured = claim("0000:41:00.4", "vm-1", "");
	struct assignment stamped = claim("0000:41:00.4", "vm-1", T1);
	struct assignment other = claim("0000:41:00.4", "vm-2", "");

	/* No identity: which claim it is can only be told by re-reading. */
	ck_assert(sentinel_revalidate_needed(&captured));
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &captured), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, -ENOENT, NULL), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &stamped), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, 0, &other), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, -EIO, NULL), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, -EACCES, NULL), REVALIDATE_DROP);
}
END_TEST

/* ---- liveness ------------------------------------------------------------------------ */

#define BOOT_SAME .boot_id_given = true, .boot_id_same = true
START_TEST(test_liveness_verdicts)
{
	static const struct {
		struct liveness_evidence ev;
		enum liveness expected;
	} cases[] = {
		/* Nothing recorded: nothing to judge by. */
		{ { .pid = 0 }, LIVENESS_UNMANAGED },
		{ { BOOT_SAME }, LIVENESS_UNMANAGED },
		/* Listening on the control path, pid with its start time: alive. */
		{ { .control_given = true, .listening = true }, LIVENESS_ALIVE },
		{ { .control_given = true, .listening = true, .pid = 77, .starttime_now = 5,
		    .starttime_claimed = 5, BOOT_SAME },
		  LIVENESS_ALIVE },
		/* The pid alone: runs with the recorded start time, or none recorded. */
		{ { .pid = 77, .starttime_now = 500, .starttime_claimed = 500 }, LIVENESS_ALIVE },
		{ { .pid = 77, .starttime_now = 500 }, LIVENESS_ALIVE },
		/* 1. Another boot: dead, whatever else says alive. */
		{ { .control_given = true, .listening = true, .pid = 77, .starttime_now = 5,
		    .starttime_claimed = 5, .boot_id_given = true, .boot_id_same = false },
		  LIVENESS_DEAD },
		{ { .boot_id_given = true, .boot_id_same = false }, LIVENESS_DEAD },
		/* 2. The pid is gone (even with a socket listening there). */
		{ { .control_given = true, .listening = true, .pid = 77, .proc_rc = -ENOENT },
		  LIVENESS_DEAD },
		{ { .pid = 77, .proc_rc = -ESRCH }, LIVENESS_DEAD },
		/* 3. The pid names a process with another start time: reused. */
		{ { .control_given = true, .listening = true, .pid = 77, .starttime_now = 501,
		    .starttime_claimed = 500 },
		  LIVENESS_DEAD },
		/* 4. Nothing listens on the control path (its file may well exist:
		 * a SIGKILLed VMM leaves it), also with the process running. */
		{ { .control_given = true, .listening = false }, LIVENESS_DEAD },
		{ { .control_given = true, .listening = false, .pid = 77, .starttime_now = 5,
		    .starttime_claimed = 5 },
		  LIVENESS_DEAD },
		/* A dead fact wins over an unreadable one. */
		{ { .control_given = true, .listening = false, .boot_id_given = true,
		    .boot_rc = -EACCES },
		  LIVENESS_DEAD },
		{ { .pid = 77, .proc_rc = -ENOENT, .control_given = true, .sockets_rc = -ENOENT },
		  LIVENESS_DEAD },
		/* Uncertain: the boot id, the process or the socket table unreadable. */
		{ { .control_given = true, .listening = true, .boot_id_given = true,
		    .boot_rc = -ENOENT },
		  LIVENESS_UNCERTAIN },
		{ { .boot_id_given = true, .boot_rc = -EIO }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .proc_rc = -EACCES }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .proc_rc = -EBADMSG, .control_given = true, .sockets_rc = -EBADMSG },
		  LIVENESS_UNCERTAIN },
		{ { .control_given = true, .sockets_rc = -EACCES }, LIVENESS_UNCERTAIN },
		{ { .control_given = true, .sockets_rc = -ENOENT, .pid = 77, .starttime_now = 5 },
		  LIVENESS_UNCERTAIN },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *reason = NULL;
		enum liveness l = liveness_verdict(&cases[i].ev, &reason);

		ck_assert_msg(l == cases[i].expected, "case %zu: %s, expected %s", i,
			      liveness_name(l), liveness_name(cases[i].expected));
		ck_assert_ptr_nonnull(reason);
	}
	ck_assert_str_eq(liveness_name(LIVENESS_UNCERTAIN), "uncertain");
	ck_assert_str_eq(liveness_name((enum liveness)9), "invalid");
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

#define UNIX_HEADER "Num       RefCount Protocol Flags    Type St Inode Path\n"
#define LISTEN_LINE(path) "0000000000000000: 00000002 00000000 00010000 0001 01 4242 " path "\n"

START_TEST(test_unix_line)
{
	static const char *const not_listening[] = {
		UNIX_HEADER,
		/* Connected (St 03), no ACCEPTCON. */
		"0000000000000000: 00000003 00000000 00000000 0001 03 4243 /run/vm.ctl\n",
		/* ACCEPTCON but St 03 (cannot happen; not listening either way). */
		"0000000000000000: 00000002 00000000 00010000 0001 03 4244 /run/vm.ctl\n",
		/* Unconnected, not listening (bound only). */
		"0000000000000000: 00000002 00000000 00000000 0001 01 4245 /run/vm.ctl\n",
		/* Listening on another path, a longer one, a prefix, abstract. */
		LISTEN_LINE("/run/vm.ctl2"),
		LISTEN_LINE("/run/vm.ct"),
		LISTEN_LINE("/run/vm.ctl /x"),
		LISTEN_LINE("@/run/vm.ctl"),
		/* Unbound, listening. */
		"0000000000000000: 00000002 00000000 00010000 0001 01 4246\n",
		/* Malformed. */
		"garbage /run/vm.ctl\n",
		"",
	};

	for (size_t i = 0; i < ARRAY_SIZE(not_listening); i++)
		ck_assert_msg(!unix_line_listens_on(not_listening[i],
						    strcspn(not_listening[i], "\n"), "/run/vm.ctl"),
			      "line %zu", i);
	static const char ok[] = LISTEN_LINE("/run/vm.ctl");
	ck_assert(unix_line_listens_on(ok, strlen(ok) - 1, "/run/vm.ctl"));
	/* Kernel pointers shown, a padded inode, a SEQPACKET socket. */
	static const char ok2[] = "ffff8881a3c4e000: 00000002 00000000 00010000 0005 01    17 /run/vm.ctl";
	ck_assert(unix_line_listens_on(ok2, strlen(ok2), "/run/vm.ctl"));
}
END_TEST

static void fake_path(char *buf, size_t size, const char *rel)
{
	snprintf(buf, size, "%s/%s", fake_root, rel);
}

START_TEST(test_unix_socket_listening_fake_tree)
{
	char path[PATH_MAX];

	fake_path(path, sizeof(path), "self");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "self/net");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "self/net/unix");
	write_text(path, UNIX_HEADER LISTEN_LINE("/run/a.ctl")
			 "0000000000000000: 00000002 00000000 00000000 0001 01 9 /run/b.ctl\n");
	fake_path(path, sizeof(path), "100/net");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "100/net/unix");
	write_text(path, UNIX_HEADER LISTEN_LINE("/run/b.ctl"));

	/* No pid: the sentinel's own namespace. */
	ck_assert_int_eq(unix_socket_listening(fake_root, 0, "/run/a.ctl"), 1);
	ck_assert_int_eq(unix_socket_listening(fake_root, 0, "/run/b.ctl"), 0);
	/* A pid: that process's namespace. */
	ck_assert_int_eq(unix_socket_listening(fake_root, 100, "/run/b.ctl"), 1);
	ck_assert_int_eq(unix_socket_listening(fake_root, 100, "/run/a.ctl"), 0);
	/* Unreadable tables. */
	ck_assert_int_eq(unix_socket_listening(fake_root, 400, "/run/a.ctl"), -ENOENT);
	fake_path(path, sizeof(path), "300/net");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "300/net/unix");
	mkdir(path, 0755);
	ck_assert_int_eq(unix_socket_listening(fake_root, 300, "/run/a.ctl"), -EISDIR);
}
END_TEST

/* The real socket table: a socket we bind and listen on shows; once closed,
 * its file stays but it does not (the SIGKILLed VMM's leftover). */
START_TEST(test_unix_socket_listening_real)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	fake_path(sa.sun_path, sizeof(sa.sun_path), "vm.ctl");
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(unix_socket_listening("/proc", 0, sa.sun_path), 0); /* bound only */
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(unix_socket_listening("/proc", 0, sa.sun_path), 1);
	ck_assert_int_eq(unix_socket_listening("/proc", getpid(), sa.sun_path), 1);
	close(fd);
	ck_assert_int_eq(stat(sa.sun_path, &st), 0);
	ck_assert_int_eq(unix_socket_listening("/proc", 0, sa.sun_path), 0);
}
END_TEST

START_TEST(test_boot_id)
{
	char path[PATH_MAX], id[BOOT_ID_BUFSZ] = "untouched", real[BOOT_ID_BUFSZ];

	ck_assert_int_eq(proc_boot_id(fake_root, id), -ENOENT);
	ck_assert_str_eq(id, "untouched");
	fake_path(path, sizeof(path), "sys");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "sys/kernel");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "sys/kernel/random");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "sys/kernel/random/boot_id");
	write_text(path, "not a boot id\n");
	ck_assert_int_eq(proc_boot_id(fake_root, id), -EBADMSG);
	write_text(path, "0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b\n");
	ck_assert_int_eq(proc_boot_id(fake_root, id), 0);
	ck_assert_str_eq(id, "0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b");
	ck_assert_int_eq(proc_boot_id("/proc", real), 0);
	ck_assert_uint_eq(strlen(real), BOOT_ID_LEN);
}
END_TEST

/* liveness_gather() + liveness_verdict() on a fake tree: each fact read
 * from where the rule says. */
START_TEST(test_gather)
{
	char path[PATH_MAX];
	struct assignment c = claim("0000:41:00.4", "vm-1", T1);
	struct liveness_evidence ev;
	const char *boot = "0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b";

	fake_path(path, sizeof(path), "100/net");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "100/net/unix");
	write_text(path, UNIX_HEADER LISTEN_LINE("/run/vm.ctl"));

	/* pid 100 (start time 123456) listening on its control path. */
	c.pid = 100;
	c.pid_starttime = 123456;
	strcpy(c.control, "/run/vm.ctl");
	strcpy(c.boot_id, boot);
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_ALIVE);
	/* Another boot. */
	liveness_gather(fake_root, &c, 0, "11111111-1b3d-4f5e-8a9b-0c1d2e3f4a5b", &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	/* The boot id unreadable. */
	liveness_gather(fake_root, &c, -ENOENT, "", &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	/* Another start time: reused. */
	c.pid_starttime = 123455;
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	c.pid_starttime = 123456;
	/* Another control path: nothing listens there. */
	strcpy(c.control, "/run/other.ctl");
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	/* The pid gone; its stat unreadable (EISDIR); its stat unparsable. */
	c.pid = 400;
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	c.pid = 300;
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	c.pid = 200;
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	/* No pid and no self/net/unix in this tree: uncertain. */
	c.pid = 0;
	liveness_gather(fake_root, &c, 0, boot, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	ck_assert_int_eq(ev.sockets_rc, -ENOENT);
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

/* Detection latency: claimed_at to the answer, in the right bucket; a clock
 * stepped back is 0, a claim without claimed_at is not timed. */
START_TEST(test_latency)
{
	const int64_t s = SENTINEL_NS_PER_S;
	/* 2026-01-01T00:00:00Z is 1767225600 */
	const int64_t claimed = INT64_C(1767225600) * s + 250000000;
	int64_t ns = -1;

	ck_assert_int_eq(sentinel_latency_ns("2026-01-01T00:00:00.25Z", claimed + 7 * s, &ns), 0);
	ck_assert_int_eq(ns, 7 * s);
	ck_assert_int_eq(sentinel_latency_ns("2026-01-01T00:00:00.250000000Z", claimed - s, &ns), 0);
	ck_assert_int_eq(ns, 0);
	ns = 42;
	ck_assert_int_eq(sentinel_latency_ns("", claimed, &ns), -EINVAL);
	ck_assert_int_eq(sentinel_latency_ns("2026-13-01T00:00:00Z", claimed, &ns), -EINVAL);
	ck_assert_int_eq(sentinel_latency_ns(NULL, claimed, &ns), -EINVAL);
	ck_assert_int_eq(ns, 42); /* untouched on error */

	ck_assert_uint_eq(sentinel_latency_bucket(0), 0);
	ck_assert_uint_eq(sentinel_latency_bucket(1 * s), 0);      /* le is inclusive */
	ck_assert_uint_eq(sentinel_latency_bucket(1 * s + 1), 1);
	ck_assert_uint_eq(sentinel_latency_bucket(7 * s), 3);      /* 1 2 5 [10] */
	ck_assert_uint_eq(sentinel_latency_bucket(3600 * s), SENTINEL_LATENCY_BUCKET_COUNT - 1);
	ck_assert_uint_eq(sentinel_latency_bucket(3600 * s + 1), SENTINEL_LATENCY_BUCKET_COUNT);
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
		"vfhealth_sentinel_reconciles_total 0\n",
		"vfhealth_sentinel_list_errors_total 0\n",
		"vfhealth_sentinel_last_poll_duration_seconds 0.000000000\n",
		"vfhealth_detection_latency_seconds_bucket{kind=\"failed\",le=\"1\"} 0\n",
		"vfhealth_detection_latency_seconds_bucket{kind=\"failed\",le=\"3600\"} 0\n",
		"vfhealth_detection_latency_seconds_bucket{kind=\"ok\",le=\"+Inf\"} 0\n",
		"vfhealth_detection_latency_seconds_sum{kind=\"ok\"} 0\n",
		"vfhealth_detection_latency_seconds_count{kind=\"failed\"} 0\n",
		"# TYPE vfhealth_detection_latency_seconds histogram\n",
		"vfhealth_sentinel_config_info{poll_interval_seconds=\"3600\",poll_timeout_seconds=\"5\","
		"concurrency=\"64\"} 1\n",
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
		/* Every series under one prefix (issue 16.5), but the detection
		 * latency histogram, whose name the fleet dashboard and issue 14
		 * give (it is the fleet's, not the poller's). */
		ck_assert_msg(strncmp(line, "vfhealth_sentinel_", 18) == 0 ||
				      strncmp(line, "vfhealth_detection_latency_seconds_", 35) == 0,
			      "outside: %s", line);
		end = line + strcspn(line, "{ ");
		if (strncmp(line, "vfhealth_detection_latency_seconds_", 35) == 0)
			end = line + strlen("vfhealth_detection_latency_seconds"); /* a histogram's family */
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
	tcase_add_test(tc, test_latency);
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
	tcase_add_test(tc, test_unix_line);
	tcase_add_test(tc, test_unix_socket_listening_fake_tree);
	tcase_add_test(tc, test_unix_socket_listening_real);
	tcase_add_test(tc, test_boot_id);
	tcase_add_test(tc, test_gather);
	suite_add_tcase(s, tc);

	tc = tcase_create("options");
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_start_rejects_bad_options);
	tcase_add_test(tc, test_metrics_render);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(rules_suite)
