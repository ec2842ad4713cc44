/* SPDX-License-Identifier: MIT */
/* Unit tests for sentinel/verdict.c and sentinel/options.c: the classifier,
 * the revalidation rule, the liveness verdict and the evidence gatherers
 * (common/procfs.c and sentinel/liveness.c against a fake /proc tree and the
 * real one: start times, states, boot ids; the kernel's socket diagnostics,
 * also in another network namespace),
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
#include <sched.h>
#include <stddef.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/procfs.h"
#include "sentinel/liveness.h"
#include "sentinel/verdict.h"
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
	const int rpc_errors[] = { -ETIMEDOUT,  -EPROTO,    -ECONNREFUSED, -ENOENT,
				   -ECONNRESET, -ECANCELED, -EIO,          -EBADMSG };

	for (size_t i = 0; i < ARRAY_SIZE(rpc_errors); i++)
		ck_assert_msg(sentinel_classify(rpc_errors[i], &failed) == CHECK_RPC_ERROR, "rc %d",
			      rpc_errors[i]);
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

	/* FAILED with an assignment identity: reported against it, whatever
	 * the VF holds now; no re-read needed. */
	ck_assert(!sentinel_revalidate_needed(&captured, CHECK_FAILED));
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, 0, &same), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, -ENOENT, NULL),
			 REVALIDATE_REPORT);
	/* Released and re-claimed by the same instance: still the captured one. */
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, 0, &reclaimed),
			 REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, 0, &other),
			 REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, -EIO, NULL),
			 REVALIDATE_REPORT);
}
END_TEST

/* An OK is booked only while the assignment asked about still holds the VF:
 * a re-claim with the same agent endpoint may have answered for its new boot. */
START_TEST(test_revalidate_ok)
{
	struct assignment captured = claim("0000:41:00.4", "vm-1", T1);
	struct assignment same = claim("0000:41:00.4", "vm-1", T1);
	struct assignment reclaimed = claim("0000:41:00.4", "vm-1", T2);
	struct assignment other_vf = claim("0000:41:00.5", "vm-1", T1);

	ck_assert(sentinel_revalidate_needed(&captured, CHECK_OK));
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, 0, &same), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, 0, &reclaimed), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, 0, &other_vf), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, -ENOENT, NULL), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, -EIO, NULL), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, 0, NULL), REVALIDATE_DROP);
}
END_TEST

START_TEST(test_revalidate_empty_claimed_at)
{
	struct assignment captured = claim("0000:41:00.4", "vm-1", "");
	struct assignment stamped = claim("0000:41:00.4", "vm-1", T1);
	struct assignment other = claim("0000:41:00.4", "vm-2", "");

	/* No identity: which claim it is can only be told by re-reading. */
	ck_assert(sentinel_revalidate_needed(&captured, CHECK_FAILED));
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, 0, &captured),
			 REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, -ENOENT, NULL),
			 REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, 0, &stamped),
			 REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, 0, &other), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, -EIO, NULL), REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_FAILED, -EACCES, NULL),
			 REVALIDATE_DROP);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, 0, &captured), REVALIDATE_REPORT);
	ck_assert_int_eq(sentinel_revalidate(&captured, CHECK_OK, -ENOENT, NULL), REVALIDATE_DROP);
}
END_TEST

/* ---- liveness ------------------------------------------------------------------------ */

#define BOOT_SAME .boot_id_given = true, .boot_id_same = true
/* A pid that runs with the recorded start time and boot id. */
#define PID_RUNS .pid = 77, .starttime_now = 5, .starttime_claimed = 5, BOOT_SAME
START_TEST(test_liveness_verdicts)
{
	static const struct {
		struct liveness_evidence ev;
		enum liveness expected;
	} cases[] = {
		/* Nothing recorded: nothing to judge by. */
		{ { .pid = 0 }, LIVENESS_UNMANAGED },
		{ { BOOT_SAME }, LIVENESS_UNMANAGED },
		/* A socket bound to the control path's file listens: alive, with
		 * or without the pid. */
		{ { .control_given = true, .listening = true }, LIVENESS_ALIVE },
		{ { .control_given = true, .listening = true, PID_RUNS }, LIVENESS_ALIVE },
		/* The pid alone, running as recorded: alive. */
		{ { PID_RUNS }, LIVENESS_ALIVE },
		/* A live VMM is never dead: the pid runs as recorded but its
		 * control socket is not found (a jail we cannot see into, a
		 * namespace we cannot enter, a path we cannot stat): uncertain. */
		{ { .control_given = true, .listening = false, PID_RUNS }, LIVENESS_UNCERTAIN },
		{ { .control_given = true, .sockets_rc = -EPERM, PID_RUNS }, LIVENESS_UNCERTAIN },
		{ { .control_given = true, .sockets_rc = -ENOENT, PID_RUNS }, LIVENESS_UNCERTAIN },
		/* The pid runs but is not proven the claim's: no start time or no
		 * boot id recorded.  Kept, not alive on its word; a listening
		 * control socket still vouches. */
		{ { .pid = 77, .starttime_now = 500, BOOT_SAME }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .starttime_now = 5, .starttime_claimed = 5 }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .starttime_now = 500, .control_given = true }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .starttime_now = 500, .control_given = true, .listening = true },
		  LIVENESS_ALIVE },
		/* 1. Another boot: dead, whatever else says alive. */
		{ { .control_given = true,
		    .listening = true,
		    .pid = 77,
		    .starttime_now = 5,
		    .starttime_claimed = 5,
		    .boot_id_given = true,
		    .boot_id_same = false },
		  LIVENESS_DEAD },
		{ { .boot_id_given = true, .boot_id_same = false }, LIVENESS_DEAD },
		/* 2. The pid is gone (even with a socket listening there). */
		{ { .control_given = true, .listening = true, .pid = 77, .proc_rc = -ENOENT },
		  LIVENESS_DEAD },
		{ { .pid = 77, .proc_rc = -ESRCH }, LIVENESS_DEAD },
		/* 3. A zombie keeps its pid and start time, but is no VMM. */
		{ { PID_RUNS, .ended = true }, LIVENESS_DEAD },
		{ { PID_RUNS, .ended = true, .control_given = true, .listening = true },
		  LIVENESS_DEAD },
		/* 4. The pid names a process with another start time: reused. */
		{ { .control_given = true,
		    .listening = true,
		    .pid = 77,
		    .starttime_now = 501,
		    .starttime_claimed = 500 },
		  LIVENESS_DEAD },
		/* 5. No pid, and nothing listens on the control path's file (it may
		 * well exist: a SIGKILLed VMM leaves it). */
		{ { .control_given = true, .listening = false }, LIVENESS_DEAD },
		{ { .control_given = true, .listening = false, BOOT_SAME }, LIVENESS_DEAD },
		/* A dead fact wins over an unreadable one. */
		{ { .pid = 77, .proc_rc = -ENOENT, .control_given = true, .sockets_rc = -ENOENT },
		  LIVENESS_DEAD },
		{ { .boot_id_given = true, .boot_id_same = false, .pid = 77, .proc_rc = -EACCES },
		  LIVENESS_DEAD },
		/* Uncertain: the boot id, the process or the socket table unreadable. */
		{ { .control_given = true,
		    .listening = true,
		    .boot_id_given = true,
		    .boot_rc = -ENOENT },
		  LIVENESS_UNCERTAIN },
		{ { .control_given = true,
		    .listening = false,
		    .boot_id_given = true,
		    .boot_rc = -EACCES },
		  LIVENESS_UNCERTAIN },
		{ { .boot_id_given = true, .boot_rc = -EIO }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .proc_rc = -EACCES }, LIVENESS_UNCERTAIN },
		{ { .pid = 77, .proc_rc = -EBADMSG, .control_given = true, .sockets_rc = -EBADMSG },
		  LIVENESS_UNCERTAIN },
		{ { .control_given = true, .sockets_rc = -EACCES }, LIVENESS_UNCERTAIN },
		/* Within the startup grace, nothing listening on the control path
		 * (yet) is neither dead nor uncertain: starting. */
		{ { .control_given = true, .control_grace = true }, LIVENESS_STARTING },
		{ { .control_given = true, .control_grace = true, BOOT_SAME }, LIVENESS_STARTING },
		{ { .control_given = true, .control_grace = true, PID_RUNS }, LIVENESS_STARTING },
		/* ... but it hides nothing else: a socket listening is alive, a
		 * dead fact dead, an unreadable fact uncertain. */
		{ { .control_given = true, .listening = true, .control_grace = true },
		  LIVENESS_ALIVE },
		{ { .control_given = true, .control_grace = true, .pid = 77, .proc_rc = -ENOENT },
		  LIVENESS_DEAD },
		{ { .control_given = true, .control_grace = true, PID_RUNS, .ended = true },
		  LIVENESS_DEAD },
		{ { .control_given = true,
		    .control_grace = true,
		    .boot_id_given = true,
		    .boot_id_same = false },
		  LIVENESS_DEAD },
		{ { .control_given = true, .control_grace = true, .sockets_rc = -EACCES },
		  LIVENESS_UNCERTAIN },
		{ { .control_given = true, .control_grace = true, PID_RUNS, .sockets_rc = -EPERM },
		  LIVENESS_UNCERTAIN },
		{ { .control_given = true, .control_grace = true, .pid = 77, .starttime_now = 5 },
		  LIVENESS_UNCERTAIN },
		{ { .control_grace = true }, LIVENESS_UNMANAGED },
		{ { PID_RUNS, .control_grace = true }, LIVENESS_ALIVE },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *reason = NULL;
		enum liveness l = liveness_verdict(&cases[i].ev, &reason);

		ck_assert_msg(l == cases[i].expected, "case %zu: %s (%s), expected %s", i,
			      liveness_name(l), reason, liveness_name(cases[i].expected));
		ck_assert_ptr_nonnull(reason);
	}
	ck_assert_str_eq(liveness_name(LIVENESS_UNCERTAIN), "uncertain");
	ck_assert_str_eq(liveness_name(LIVENESS_STARTING), "starting");
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

	snprintf(fake_root, sizeof(fake_root), "/tmp/vfsentinel-verdict-XXXXXX");
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

START_TEST(test_proc_stat_state)
{
	static const char zombie[] = "7 (a) b) Z 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 999 1";
	static const char sleeping[] = "7 (Z) S 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 998 1";
	static const char no_state[] = "7 (x)  0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 998 1";
	struct proc_stat st;

	ck_assert_int_eq(proc_stat_parse(zombie, strlen(zombie), &st), 0);
	ck_assert_int_eq(st.state, 'Z');
	ck_assert_uint_eq(st.starttime, 999);
	ck_assert(proc_state_ended(st.state));
	/* A comm of "Z" is no zombie. */
	ck_assert_int_eq(proc_stat_parse(sleeping, strlen(sleeping), &st), 0);
	ck_assert_int_eq(st.state, 'S');
	ck_assert(!proc_state_ended(st.state));
	ck_assert_int_eq(proc_stat_parse(no_state, strlen(no_state), &st), -EBADMSG);
	ck_assert(proc_state_ended('X'));
	ck_assert(!proc_state_ended('R'));
	ck_assert(!proc_state_ended('D'));
}
END_TEST

/* A real zombie: a child that exited and that we do not reap yet. */
START_TEST(test_proc_stat_zombie_real)
{
	struct proc_stat before, after;
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(proc_pid_stat(NULL, pid, &before), 0);
	/* Wait for it to exit without reaping it. */
	siginfo_t info = { 0 };
	ck_assert_int_eq(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT), 0);
	ck_assert_int_eq(proc_pid_stat(NULL, pid, &after), 0);
	ck_assert_int_eq(after.state, 'Z');
	ck_assert_uint_eq(after.starttime, before.starttime);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(proc_pid_stat(NULL, pid, &after), -ENOENT);
}
END_TEST

static void fake_path(char *buf, size_t size, const char *rel)
{
	snprintf(buf, size, "%s/%s", fake_root, rel);
}

static int listen_at(const char *path, bool do_listen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (do_listen)
		ck_assert_int_eq(listen(fd, 1), 0);
	return fd;
}

static bool listed(const char *path)
{
	struct unix_listeners l = { 0 };
	struct stat st;
	bool found;

	ck_assert_int_eq(unix_listeners_read(-1, &l), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	found = unix_listeners_has(&l, st.st_dev, st.st_ino);
	unix_listeners_free(&l);
	return found;
}

/* The kernel's table, by file identity: a socket we bind and listen on
 * shows; bound only, it does not; once closed, its file stays but it does
 * not (the SIGKILLed VMM's leftover); an abstract socket whose name spells
 * the path never does. */
START_TEST(test_unix_listeners_real)
{
	char path[PATH_MAX], moved[PATH_MAX];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, abstract;

	fake_path(path, sizeof(path), "vm.ctl");
	fd = listen_at(path, false);
	ck_assert(!listed(path));
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert(listed(path));
	/* Renamed: the same file, found by its new name (identity, not text). */
	fake_path(moved, sizeof(moved), "moved.ctl");
	ck_assert_int_eq(rename(path, moved), 0);
	ck_assert(listed(moved));
	ck_assert_int_eq(rename(moved, path), 0);
	close(fd);
	ck_assert(!listed(path));

	/* An abstract socket named like the path (and like a forged
	 * /proc/net/unix line) listens, and matches nothing. */
	abstract = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(abstract, 0);
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
			 "\n0000000000000000: 00000002 00000000 00010000 0001 01 4242 %s", path);
	ck_assert_int_lt(n, (int)sizeof(sa.sun_path) - 1);
	ck_assert_int_eq(bind(abstract, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
			 0);
	ck_assert_int_eq(listen(abstract, 1), 0);
	ck_assert(!listed(path));
	close(abstract);

	/* A new socket at the path: a new file, found again. */
	ck_assert_int_eq(unlink(path), 0);
	fd = listen_at(path, true);
	ck_assert(listed(path));
	close(fd);
}
END_TEST

START_TEST(test_kernel_dev)
{
	/* major 8 minor 1 (sda1); major 0 minor 0x12345 (a large anonymous minor) */
	ck_assert_uint_eq(kernel_dev_to_user((8u << 20) | 1u), makedev(8, 1));
	ck_assert_uint_eq(kernel_dev_to_user(0x12345u), makedev(0, 0x12345));
	ck_assert_uint_eq(kernel_dev_to_user((259u << 20) | 3u), makedev(259, 3));
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

/* liveness_gather() + liveness_verdict(): the process facts from a fake
 * tree, the socket from the kernel. */
START_TEST(test_gather)
{
	char path[PATH_MAX];
	struct assignment c = claim("0000:41:00.4", "vm-1", T1);
	struct liveness_evidence ev;
	struct liveness_pass pass;
	const char *boot = "0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b";
	int fd;

	fake_path(path, sizeof(path), "sys/kernel/random");
	ck_assert_int_eq(system(strcat(strcpy((char[PATH_MAX + 16]){ 0 }, "mkdir -p "), path)), 0);
	fake_path(path, sizeof(path), "sys/kernel/random/boot_id");
	write_text(path, "0f2c4e6a-1b3d-4f5e-8a9b-0c1d2e3f4a5b\n");
	/* pid 100 (start time 123456) has our namespace. */
	fake_path(path, sizeof(path), "100/ns");
	mkdir(path, 0755);
	fake_path(path, sizeof(path), "100/ns/net");
	ck_assert_int_eq(symlink("/proc/self/ns/net", path), 0);
	fake_path(c.control, sizeof(c.control), "vm.ctl");
	fd = listen_at(c.control, true);

	liveness_pass_begin(&pass, fake_root);
	c.pid = 100;
	c.pid_starttime = 123456;
	strcpy(c.boot_id, boot);
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_ALIVE);
	ck_assert(ev.listening);
	/* No pid: our own namespace, the same table (read once this pass). */
	c.pid = 0;
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_ALIVE);
	ck_assert_uint_eq(pass.tables_read, 1);
	c.pid = 100;
	/* Another boot. */
	strcpy(c.boot_id, "11111111-1b3d-4f5e-8a9b-0c1d2e3f4a5b");
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	strcpy(c.boot_id, boot);
	/* Another start time: reused. */
	c.pid_starttime = 123455;
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	c.pid_starttime = 123456;
	/* Another control path, where nothing listens: the pid runs, so
	 * uncertain; without the pid, dead. */
	fake_path(c.control, sizeof(c.control), "other.ctl");
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	c.pid = 0;
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	/* The pid gone; its stat unreadable (EISDIR); its stat unparsable. */
	c.pid = 400;
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_DEAD);
	c.pid = 300;
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	c.pid = 200;
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_UNCERTAIN);
	ck_assert_uint_eq(pass.tables_read, 1);
	liveness_pass_end(&pass);
	close(fd);
}
END_TEST

/* Another network namespace: its table is read through a socket made
 * inside it, once per pass however many claims it has; the sentinel's own
 * table does not show its sockets. */
START_TEST(test_gather_other_netns)
{
	char ctl[sizeof(((struct assignment *)0)->control)], ready;
	struct assignment c = claim("0000:41:00.4", "vm-1", T1);
	struct liveness_evidence ev;
	struct liveness_pass pass;
	int pipefd[2], hold[2];
	pid_t child;

	if (geteuid() != 0)
		return; /* unshare(CLONE_NEWNET) and setns need root */
	fake_path(ctl, sizeof(ctl), "netns.ctl");
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(pipe(hold), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		char byte;
		if (unshare(CLONE_NEWNET) < 0)
			_exit(1);
		listen_at(ctl, true);
		if (write(pipefd[1], "r", 1) != 1 || read(hold[0], &byte, 1) < 0)
			_exit(1);
		_exit(0);
	}
	ck_assert_int_eq(read(pipefd[0], &ready, 1), 1);

	ck_assert(!listed(ctl)); /* not in our namespace */
	liveness_pass_begin(&pass, "/proc");
	c.pid = child;
	ck_assert_int_eq(proc_pid_starttime(NULL, child, &c.pid_starttime), 0);
	ck_assert_int_eq(proc_boot_id(NULL, c.boot_id), 0);
	memcpy(c.control, ctl, sizeof(ctl));
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(ev.sockets_rc, 0);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_ALIVE);
	liveness_gather(&pass, &c, &ev);
	ck_assert_int_eq(liveness_verdict(&ev, NULL), LIVENESS_ALIVE);
	ck_assert_uint_eq(pass.tables_read, 1);
	liveness_pass_end(&pass);

	ck_assert_int_eq(write(hold[1], "x", 1), 1);
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	unlink(ctl);
	close(pipefd[0]);
	close(pipefd[1]);
	close(hold[0]);
	close(hold[1]);
}
END_TEST

/* The startup grace counts from the claim, on the boot clock: a claimed_at
 * in the past has spent part of it (a restarted sentinel does not renew
 * it), one to come counts from the first sighting (never extends it),
 * one before the boot from the boot. */
START_TEST(test_control_grace)
{
	const int64_t s = NSEC_PER_SEC;
	/* 2026-01-01T00:00:00Z is 1767225600 */
	const int64_t wall = INT64_C(1767225600) * s, boot = 1000 * s, grace = 300 * s;
	int64_t at;

	at = sentinel_claim_boot_ns("2025-12-31T23:58:20Z", wall, boot); /* 100 s ago */
	ck_assert_int_eq(at, 900 * s);
	ck_assert(sentinel_control_grace(at, boot, grace));
	ck_assert(sentinel_control_grace(at, 1200 * s - 1, grace));
	ck_assert(!sentinel_control_grace(at, 1200 * s, grace));
	/* Older than the grace at its first sighting: over at once. */
	at = sentinel_claim_boot_ns("2025-12-31T23:50:00Z", wall, boot);
	ck_assert(!sentinel_control_grace(at, boot, grace));
	/* To come (a writer's time, or a clock stepped back): from now. */
	at = sentinel_claim_boot_ns("2026-01-01T01:00:00Z", wall, boot);
	ck_assert_int_eq(at, boot);
	ck_assert(sentinel_control_grace(at, boot + grace - 1, grace));
	ck_assert(!sentinel_control_grace(at, boot + grace, grace));
	/* None, or unreadable: from now. */
	ck_assert_int_eq(sentinel_claim_boot_ns("", wall, boot), boot);
	ck_assert_int_eq(sentinel_claim_boot_ns("yesterday", wall, boot), boot);
	/* Before this boot: from the boot. */
	ck_assert_int_eq(sentinel_claim_boot_ns("2025-12-31T00:00:00Z", wall, boot), 0);
	/* 0: no grace at all. */
	ck_assert(!sentinel_control_grace(boot, boot, 0));
}
END_TEST

/* A VMM of another user (here: root that became uid 65534 after binding,
 * so not dumpable either) whose /proc/PID/ns/net the sentinel may not open
 * without CAP_SYS_PTRACE, which the checker drops: in the sentinel's own
 * namespace it is judged by its socket (alive); in a namespace of its own,
 * uncertain, never dead. */
static enum liveness judge_without_ptrace(bool own_netns, int *sockets_rc)
{
	char ctl[sizeof(((struct assignment *)0)->control)], ready;
	struct assignment c = claim("0000:41:00.4", "vm-1", T1);
	int pipefd[2], hold[2], result[2], status;
	pid_t vmm, checker;
	struct {
		enum liveness l;
		int sockets_rc;
	} out = { LIVENESS_UNMANAGED, 0 };

	fake_path(ctl, sizeof(ctl), own_netns ? "own.ctl" : "other.ctl");
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(pipe(hold), 0);
	ck_assert_int_eq(pipe(result), 0);
	vmm = fork();
	ck_assert_int_ge(vmm, 0);
	if (vmm == 0) {
		char byte;
		if (!own_netns && unshare(CLONE_NEWNET) < 0)
			_exit(1);
		listen_at(ctl, true);
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(1);
		if (write(pipefd[1], "r", 1) != 1 || read(hold[0], &byte, 1) < 0)
			_exit(1);
		_exit(0);
	}
	ck_assert_int_eq(read(pipefd[0], &ready, 1), 1);
	c.pid = vmm;
	ck_assert_int_eq(proc_pid_starttime(NULL, vmm, &c.pid_starttime), 0);
	ck_assert_int_eq(proc_boot_id(NULL, c.boot_id), 0);
	memcpy(c.control, ctl, sizeof(ctl));

	checker = fork();
	ck_assert_int_ge(checker, 0);
	if (checker == 0) {
		struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
		struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
		struct liveness_evidence ev;
		struct liveness_pass pass;
		char path[64];

		if (syscall(SYS_capget, &h, d) < 0)
			_exit(2);
		d[0].effective &= ~(1u << CAP_SYS_PTRACE);
		if (syscall(SYS_capset, &h, d) < 0)
			_exit(2);
		snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)vmm);
		if (open(path, O_RDONLY | O_CLOEXEC) >= 0)
			_exit(3); /* the premise: without CAP_SYS_PTRACE it does not open */
		liveness_pass_begin(&pass, "/proc");
		liveness_gather(&pass, &c, &ev);
		out.l = liveness_verdict(&ev, NULL);
		out.sockets_rc = ev.sockets_rc;
		liveness_pass_end(&pass);
		_exit(write(result[1], &out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(checker, &status, 0), checker);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "checker status %#x", status);
	ck_assert_int_eq(read(result[0], &out, sizeof(out)), (ssize_t)sizeof(out));
	ck_assert_int_eq(write(hold[1], "x", 1), 1);
	ck_assert_int_eq(waitpid(vmm, NULL, 0), vmm);
	unlink(ctl);
	for (int i = 0; i < 2; i++) {
		close(pipefd[i]);
		close(hold[i]);
		close(result[i]);
	}
	*sockets_rc = out.sockets_rc;
	return out.l;
}

START_TEST(test_gather_other_user)
{
	int rc;

	if (geteuid() != 0)
		return; /* setresuid, unshare(CLONE_NEWNET) and capset need root */
	ck_assert_int_eq(judge_without_ptrace(true, &rc), LIVENESS_ALIVE);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(judge_without_ptrace(false, &rc), LIVENESS_UNCERTAIN);
	ck_assert_int_eq(rc, -EACCES);
}
END_TEST

/* ---- options ----------------------------------------------------------------------------- */

START_TEST(test_options)
{
	struct sentinel_options o, before;

	sentinel_options_init(&o);
	ck_assert(o.enabled);
	ck_assert(o.reconcile);
	ck_assert_int_eq(o.poll_interval_ns, 5 * NSEC_PER_SEC);
	ck_assert_int_eq(o.poll_timeout_ns, 5 * NSEC_PER_SEC);
	ck_assert_int_eq(o.reconcile_interval_ns, 60 * NSEC_PER_SEC);
	ck_assert_uint_eq(o.concurrency, 64);
	ck_assert_int_eq(o.control_grace_ns, 300 * NSEC_PER_SEC);

	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONTROL_GRACE, "2.5"), 0);
	ck_assert_int_eq(o.control_grace_ns, 2500000000);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONTROL_GRACE, "0"), 0);
	ck_assert_int_eq(o.control_grace_ns, 0);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_INTERVAL, "0.2"), 0);
	ck_assert_int_eq(o.poll_interval_ns, 200000000);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_POLL_TIMEOUT, "1.25"), 0);
	ck_assert_int_eq(o.poll_timeout_ns, 1250000000);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_RECONCILE_INTERVAL, "3"), 0);
	ck_assert_int_eq(o.reconcile_interval_ns, 3 * NSEC_PER_SEC);
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
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONTROL_GRACE, "-1"), -EINVAL);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONTROL_GRACE, "5m"), -EINVAL);
	ck_assert_int_eq(sentinel_options_apply(&o, SENTINEL_OPT_CONTROL_GRACE, "86401"), -ERANGE);
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
	/* Neither polls nor reconciles: nothing to do. */
	sentinel_options_init(&o);
	o.poll = false;
	o.reconcile = false;
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
	const int64_t s = NSEC_PER_SEC;
	/* 2026-01-01T00:00:00Z is 1767225600 */
	const int64_t claimed = INT64_C(1767225600) * s + 250000000;
	int64_t ns = -1;

	ck_assert_int_eq(sentinel_latency_ns("2026-01-01T00:00:00.25Z", claimed + 7 * s, &ns), 0);
	ck_assert_int_eq(ns, 7 * s);
	ck_assert_int_eq(sentinel_latency_ns("2026-01-01T00:00:00.250000000Z", claimed - s, &ns),
			 0);
	ck_assert_int_eq(ns, 0);
	ns = 42;
	ck_assert_int_eq(sentinel_latency_ns("", claimed, &ns), -EINVAL);
	ck_assert_int_eq(sentinel_latency_ns("2026-13-01T00:00:00Z", claimed, &ns), -EINVAL);
	ck_assert_int_eq(sentinel_latency_ns(NULL, claimed, &ns), -EINVAL);
	ck_assert_int_eq(ns, 42); /* untouched on error */

	ck_assert_uint_eq(sentinel_latency_bucket(0), 0);
	ck_assert_uint_eq(sentinel_latency_bucket(1 * s), 0); /* le is inclusive */
	ck_assert_uint_eq(sentinel_latency_bucket(1 * s + 1), 1);
	ck_assert_uint_eq(sentinel_latency_bucket(7 * s), 3); /* 1 2 5 [10] */
	ck_assert_uint_eq(sentinel_latency_bucket(3600 * s), SENTINEL_LATENCY_BUCKET_COUNT - 1);
	ck_assert_uint_eq(sentinel_latency_bucket(3600 * s + 1), SENTINEL_LATENCY_BUCKET_COUNT);
}
END_TEST

/* Every series the sentinel renders has HELP and TYPE lines before its
 * samples, every check result is present (zeros included), and the names
 * are the ones the alert rules use. */
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
		"# TYPE vfhealth_sentinel_claims gauge\n",
		"vfhealth_sentinel_claims{watch=\"polled\"} 0\n",
		"vfhealth_sentinel_claims{watch=\"uncertain\"} 0\n",
		"vfhealth_sentinel_claims{watch=\"starting\"} 0\n",
		"vfhealth_sentinel_claims{watch=\"dead\"} 0\n",
		"vfhealth_sentinel_claims{watch=\"no_agent\"} 0\n",
		"vfhealth_sentinel_claims{watch=\"no_evidence\"} 0\n",
		"vfhealth_sentinel_claims{watch=\"unconfined\"} 0\n",
		"vfhealth_detection_latency_seconds_bucket{kind=\"failed\",le=\"1\"} 0\n",
		"vfhealth_detection_latency_seconds_bucket{kind=\"failed\",le=\"3600\"} 0\n",
		"vfhealth_detection_latency_seconds_bucket{kind=\"ok\",le=\"+Inf\"} 0\n",
		"vfhealth_detection_latency_seconds_sum{kind=\"ok\"} 0\n",
		"vfhealth_detection_latency_seconds_count{kind=\"failed\"} 0\n",
		"# TYPE vfhealth_detection_latency_seconds histogram\n",
		("vfhealth_sentinel_config_info{poll_interval_seconds=\"3600\",poll_timeout_seconds=\"5\","
		 "concurrency=\"64\"} 1\n"),
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
	o.poll_interval_ns = 3600 * NSEC_PER_SEC; /* no poll during the test */
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
		/* Every series under one prefix, but the detection latency
		 * histogram, whose name the fleet dashboard gives (it is the
		 * fleet's, not the poller's). */
		ck_assert_msg(strncmp(line, "vfhealth_sentinel_", 18) == 0 ||
				      strncmp(line, "vfhealth_detection_latency_seconds_", 35) == 0,
			      "outside: %s", line);
		end = line + strcspn(line, "{ ");
		if (strncmp(line, "vfhealth_detection_latency_seconds_", 35) == 0)
			end = line +
			      strlen("vfhealth_detection_latency_seconds"); /* a histogram's family */
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

/* The earliest time a dead VMM may have died: its last alive verdict, else
 * its claim's time when watched from it, else the first dead verdict; never
 * before the claim nor after now; none for a claim from the future. */
START_TEST(test_death_time)
{
	const char *claimed = "2026-11-29T07:00:01.000000000Z",
		   *alive = "2026-11-29T07:00:30.000000000Z",
		   *dead = "2026-11-29T07:01:30.000000000Z",
		   *now = "2026-11-29T07:02:00.000000000Z",
		   *before = "2026-11-29T07:00:00.000000000Z";

	ck_assert_str_eq(sentinel_death_time(claimed, alive, true, dead, now), alive);
	ck_assert_str_eq(sentinel_death_time(claimed, alive, false, dead, now), alive);
	ck_assert_str_eq(sentinel_death_time(claimed, "", true, dead, now), claimed);
	ck_assert_str_eq(sentinel_death_time(claimed, "", false, dead, now), dead);
	ck_assert_str_eq(sentinel_death_time(claimed, before, false, dead, now), claimed);
	ck_assert_str_eq(sentinel_death_time(claimed, "", false, "2026-11-29T07:03:00.000000000Z",
					     now),
			 now);
	ck_assert_ptr_null(sentinel_death_time(claimed, "", false, "", now));
	ck_assert_ptr_null(sentinel_death_time("", alive, true, dead, now));
	ck_assert_ptr_null(
		sentinel_death_time("2026-11-29T08:00:00.000000000Z", "", true, dead, now));
}
END_TEST

static Suite *verdict_suite(void)
{
	Suite *s = suite_create("sentinel-verdict");
	TCase *tc;

	tc = check_tcase("classify", 30);
	tcase_add_test(tc, test_classify_answers);
	tcase_add_test(tc, test_classify_errors);
	tcase_add_test(tc, test_classify_unknown_state_is_rpc_error);
	tcase_add_test(tc, test_check_result_names);
	tcase_add_test(tc, test_latency);
	suite_add_tcase(s, tc);

	tc = check_tcase("revalidate", 30);
	tcase_add_test(tc, test_revalidate);
	tcase_add_test(tc, test_revalidate_ok);
	tcase_add_test(tc, test_revalidate_empty_claimed_at);
	suite_add_tcase(s, tc);

	tc = check_tcase("liveness", 30);
	tcase_add_checked_fixture(tc, fake_proc_setup, fake_proc_teardown);
	tcase_add_test(tc, test_liveness_verdicts);
	tcase_add_test(tc, test_proc_starttime_fake_tree);
	tcase_add_test(tc, test_proc_starttime_real);
	tcase_add_test(tc, test_proc_stat_parse);
	tcase_add_test(tc, test_proc_stat_state);
	tcase_add_test(tc, test_proc_stat_zombie_real);
	tcase_add_test(tc, test_unix_listeners_real);
	tcase_add_test(tc, test_kernel_dev);
	tcase_add_test(tc, test_boot_id);
	tcase_add_test(tc, test_gather);
	tcase_add_test(tc, test_gather_other_netns);
	tcase_add_test(tc, test_gather_other_user);
	suite_add_tcase(s, tc);

	tc = check_tcase("death_time", 30);
	tcase_add_test(tc, test_death_time);
	tcase_add_test(tc, test_control_grace);
	suite_add_tcase(s, tc);

	tc = check_tcase("options", 30);
	tcase_add_test(tc, test_options);
	tcase_add_test(tc, test_start_rejects_bad_options);
	tcase_add_test(tc, test_metrics_render);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_MAIN(verdict_suite)
