/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the program runner (recovery/program.c) with real
 * processes: exit status and signal, the output lines and their bounds,
 * the clean environment, stdin and descriptors, the deadline (SIGTERM to
 * the group, SIGKILL after the grace, everything reaped) and the stop;
 * program_open's rules and running what it opened; the PID namespace.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "recovery/recovery-internal.h"
#include "tests/common/check-main.h"

#define MS INT64_C(1000000)

struct lines {
	char text[8][PROGRAM_LINE_MAX + 1];
	size_t n;
};

static void keep_line(void *userdata, const char *line)
{
	struct lines *l = userdata;

	if (l->n < 8)
		snprintf(l->text[l->n], sizeof(l->text[0]), "%s", line);
	l->n++;
}

/* /bin/sh, opened as recovery_new opens the program */
static int shell_fd(void)
{
	static int fd = -1;
	char why[256];

	if (fd < 0)
		ck_assert_msg(program_open("/bin/sh", &fd, why, sizeof(why)) == 0, "%s", why);
	return fd;
}

static int run_sh(const char *script, int64_t timeout_ns, int64_t grace_ns, int stop_fd,
		  struct lines *l, struct program_result *res)
{
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", (char *)script, NULL };
	char *envp[] = { (char *)"FOO=bar", (char *)"PATH=/usr/bin:/bin", NULL };
	struct program_run p = { .exec_fd = shell_fd(),
				 .argv = argv,
				 .envp = envp,
				 .timeout_ns = timeout_ns,
				 .kill_grace_ns = grace_ns,
				 .stop_fd = stop_fd,
				 .line = keep_line,
				 .userdata = l };

	memset(l, 0, sizeof(*l));
	return program_run(&p, res);
}

/* Whether pid ends within 10 s (a pidfd is readable once it exited, also
 * as a zombie nobody reaps: an orphan in a container whose init does not
 * reap).  The group's SIGKILL is delivered asynchronously. */
static bool gone(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0 && errno == ENOSYS) {
		/* no pidfd (valgrind): look at its state for as long */
		char path[64], state = 0;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		for (int i = 0; i < 1000; i++) {
			FILE *f = fopen(path, "re");
			if (!f)
				return true;
			if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
				state = 0;
			fclose(f);
			if (state == 'Z')
				return true;
			usleep(10000);
		}
		return false;
	}
	if (fd < 0)
		return errno == ESRCH;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int k = poll(&p, 1, 10000);
	close(fd);
	return k == 1;
}

/* Valgrind execs a descriptor by the path /proc names for it. */
static bool under_valgrind(void)
{
	const char *preload = getenv("LD_PRELOAD");

	return preload && strstr(preload, "vgpreload");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "we");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(test_exit_and_output)
{
	struct program_result res;
	struct lines l;

	ck_assert_int_eq(run_sh("echo one; echo two >&2; echo \"$FOO:$HOME\"; exit 3", 5000 * MS,
				100 * MS, -1, &l, &res),
			 0);
	ck_assert_int_eq(res.end, PROGRAM_EXITED);
	ck_assert_int_eq(res.status, 3);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_str_eq(l.text[0], "one");
	ck_assert_str_eq(l.text[1], "two");
	ck_assert_str_eq(l.text[2], "bar:"); /* its environment is envp alone */
	ck_assert_str_eq(res.last_line, "bar:");
	ck_assert_int_eq(run_sh("printf 'no newline'", 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.status, 0);
	ck_assert_str_eq(res.last_line, "no newline");
	ck_assert_int_eq(run_sh("kill -KILL $$", 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_SIGNALED);
	ck_assert_int_eq(res.status, SIGKILL);
}
END_TEST

/* A long line is cut, the rest of it dropped; lines past the bound are
 * counted, not handed on. */
START_TEST(test_output_bounds)
{
	struct program_result res;
	struct lines l;

	ck_assert_int_eq(run_sh("head -c 1000 /dev/zero | tr '\\0' x; echo; echo short", 5000 * MS,
				100 * MS, -1, &l, &res),
			 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_uint_eq(strlen(l.text[0]), PROGRAM_LINE_MAX);
	ck_assert_str_eq(l.text[1], "short");
	ck_assert_int_eq(run_sh("seq 1 1500", 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_uint_eq(l.n, PROGRAM_LINES_MAX);
	ck_assert_uint_eq(res.dropped, 500);
	ck_assert_str_eq(res.last_line, "1500");
}
END_TEST

/* stdin is /dev/null; no descriptor of ours but 0, 1, 2 is inherited, and
 * 4: the program itself (a script's interpreter reads it as /dev/fd/4). */
START_TEST(test_stdin_and_descriptors)
{
	struct program_result res;
	struct lines l;
	char script[256], link[64], sh[256];
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int fd = fcntl(null, F_DUPFD, 10); /* no close-on-exec on purpose */
	ssize_t n;

	ck_assert_int_ge(fd, 10);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", shell_fd());
	n = readlink(link, sh, sizeof(sh) - 1);
	ck_assert_int_gt(n, 0);
	sh[n] = '\0';
	snprintf(script, sizeof(script),
		 "cat; for f in 3 5 6 7 8 9 %d; do [ ! -e /proc/$$/fd/$f ] || echo \"$f open\"; done;"
		 " readlink /proc/$$/fd/4",
		 fd);
	ck_assert_int_eq(run_sh(script, 5000 * MS, 100 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.status, 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.text[0], sh);
	close(fd);
	close(null);
}
END_TEST

/* An exec that fails is told apart from a program that exits 127: the
 * exec's errno (here a file of no format the kernel runs), in and out of
 * a namespace; no descriptor is no program. */
START_TEST(test_exec_failure)
{
	char dir[] = "/tmp/vfhealth-program.XXXXXX", path[64], why[256];
	char *argv[] = { path, NULL };
	char *envp[] = { NULL };
	struct program_run p = {
		.argv = argv, .envp = envp, .timeout_ns = 1000 * MS, .stop_fd = -1
	};
	struct program_result res;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/prog", dir);
	write_file(path, "neither ELF nor #!\n", 0755);
	ck_assert_int_eq(program_open(path, &fd, why, sizeof(why)), 0);
	p.exec_fd = fd;
	for (int ns = 0; ns < 2; ns++) {
		p.own_pid_ns = ns;
		ck_assert_int_eq(program_run(&p, &res), -ENOEXEC);
	}
	p.exec_fd = 0;
	ck_assert_int_eq(program_run(&p, &res), -EINVAL);
	close(fd);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* The deadline: SIGTERM to the whole group; a group that ignores it is
 * SIGKILLed after the grace; nothing of it is left. */
/* The child a script started (its pid its first line) is gone; a script
 * the deadline ended before it printed started none. */
static bool started_child_gone(const struct lines *l)
{
	return l->n == 0 || gone((pid_t)atoi(l->text[0]));
}

START_TEST(test_deadline)
{
	struct program_result res;
	struct lines l;

	ck_assert_int_eq(run_sh("sleep 100 & echo $!; wait", 200 * MS, 5000 * MS, -1, &l, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_TIMED_OUT);
	ck_assert_int_eq(res.status, SIGTERM); /* SIGTERM sufficed */
	ck_assert_int_lt(res.elapsed_ns, 4000 * MS);
	ck_assert(started_child_gone(&l));

	/* A program that ignores SIGTERM: only the SIGKILL, at the deadline
	 * plus the grace (at most the deadline), ends it, never anything
	 * earlier.  The runner gives the program SIGTERM's default action, so
	 * the shell's own trap may come after a deadline a loaded machine
	 * reaches first (under valgrind: 235 ms into a 200 ms deadline); its
	 * first line says whether the trap was set in time. */
	ck_assert_int_eq(run_sh("trap '' TERM; echo armed; sleep 100 & echo $!; wait; wait",
				1000 * MS, 1000 * MS, -1, &l, &res),
			 0);
	ck_assert_int_eq(res.end, PROGRAM_TIMED_OUT);
	if (l.n > 0 && strcmp(l.text[0], "armed") == 0) {
		ck_assert_int_eq(res.status, SIGKILL);
		ck_assert_int_ge(res.elapsed_ns, 2000 * MS);
		ck_assert(l.n < 2 || gone((pid_t)atoi(l.text[1])));
	} else {
		ck_assert_int_eq(res.status, SIGTERM); /* before its trap */
		ck_assert_int_ge(res.elapsed_ns, 1000 * MS);
	}
}
END_TEST

/* A stop ends the run as the deadline would, at once. */
START_TEST(test_stop)
{
	struct program_result res;
	struct lines l;
	int efd = eventfd(1, EFD_CLOEXEC); /* readable from the start */

	ck_assert_int_ge(efd, 0);
	ck_assert_int_eq(run_sh("sleep 100", 60000 * MS, 5000 * MS, efd, &l, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_STOPPED);
	ck_assert_int_lt(res.elapsed_ns, 4000 * MS);
	close(efd);
}
END_TEST

static void path_in(char *buf, size_t size, const char *dir, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
}

/* program_open's refusal: errno, and a sentence naming the component. */
static void refused(const char *path, int err, const char *because)
{
	char why[512] = "";
	int fd = -1;

	ck_assert_int_eq(program_open(path, &fd, why, sizeof(why)), err);
	ck_assert_int_eq(fd, -1);
	ck_assert_msg(strstr(why, because), "%s: '%s' does not say '%s'", path, why, because);
}

/* The file program_open opened is the file at path now. */
static void opens(const char *path, const char *file)
{
	struct stat a, b;
	char why[512] = "";
	int fd = -1;

	ck_assert_msg(program_open(path, &fd, why, sizeof(why)) == 0, "%s: %s", path, why);
	ck_assert_int_eq(fstat(fd, &a), 0);
	ck_assert_int_eq(stat(file, &b), 0);
	ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
}

/* P: DIR/SUB/prog, a script in SUB, a new directory of mode MODE. */
static void script_in_new_dir(char *p, size_t size, const char *dir, const char *sub, mode_t mode)
{
	char d[128];

	path_in(d, sizeof(d), dir, sub);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	ck_assert_int_eq(chmod(d, mode), 0);
	ck_assert_int_lt(snprintf(p, size, "%s/prog", d), (int)size);
	write_file(p, "#!/bin/sh\n", 0755);
}

static void remove_tree(const char *dir)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* What program_open accepts and refuses, each rule alone; then what runs
 * is what it opened: a #! script, after another file was renamed over its
 * path, in and out of a namespace. */
START_TEST(test_open_rules)
{
	char dir[] = "/tmp/vfhealth-open.XXXXXX", prog[128], p[128], q[128], why[512];
	char *argv[] = { prog, (char *)"x", NULL };
	char *envp[] = { (char *)"PATH=/usr/bin:/bin", NULL };
	struct program_result res;
	struct lines l;
	int fd = -1;

	/* /tmp is sticky: a directory of root's may follow it */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	path_in(prog, sizeof(prog), dir, "prog");
	write_file(prog, "#!/bin/sh\necho \"ran $1\"\n", 0755);
	opens(prog, prog);
	/* root's links, relative and absolute, through root's directories */
	path_in(p, sizeof(p), dir, "sub");
	ck_assert_int_eq(mkdir(p, 0755), 0);
	path_in(p, sizeof(p), dir, "sub/rel");
	ck_assert_int_eq(symlink("../prog", p), 0);
	path_in(q, sizeof(q), dir, "abs");
	ck_assert_int_eq(symlink(p, q), 0);
	opens(q, prog);
	path_in(q, sizeof(q), dir, "sub/../sub/./rel");
	opens(q, prog);

	refused("prog", -EINVAL, "not an absolute path");
	path_in(p, sizeof(p), dir, "missing");
	refused(p, -ENOENT, "cannot open");
	refused(dir, -EACCES, "is a directory");
	ck_assert_int_eq(chmod(prog, 0775), 0);
	refused(prog, -EACCES, "prog is writable by another user");
	ck_assert_int_eq(chmod(prog, 0644), 0);
	refused(prog, -EACCES, "prog is not executable");
	ck_assert_int_eq(chmod(prog, 0755), 0);
	path_in(p, sizeof(p), dir, "loop1");
	path_in(q, sizeof(q), dir, "loop2");
	ck_assert_int_eq(symlink(q, p), 0);
	ck_assert_int_eq(symlink(p, q), 0);
	refused(p, -ELOOP, "too many symbolic links");
	/* a group-writable directory; a sticky one holds only directories */
	script_in_new_dir(p, sizeof(p), dir, "gw", 0775);
	refused(p, -EACCES, "gw is a directory others may write");
	script_in_new_dir(p, sizeof(p), dir, "sticky", 01777);
	refused(p, -EACCES, "sticky/prog is directly in a directory others may write");
	script_in_new_dir(p, sizeof(p), dir, "sticky/d", 0755);
	opens(p, p);
	if (geteuid() == 0) {
		/* what another user owns: a directory on the way, a link */
		path_in(p, sizeof(p), dir, "sub");
		ck_assert_int_eq(chown(p, 65534, 65534), 0);
		path_in(q, sizeof(q), dir, "abs");
		refused(q, -EACCES, "sub is owned by uid 65534");
		ck_assert_int_eq(chown(p, 0, 0), 0);
		ck_assert_int_eq(lchown(q, 65534, 65534), 0);
		refused(q, -EACCES, "abs is owned by uid 65534");
	}

	/* it runs what was opened, a #! script, whatever the path names later
	 * (but under valgrind, which execs the path: see under_valgrind) */
	ck_assert_int_eq(program_open(prog, &fd, why, sizeof(why)), 0);
	path_in(p, sizeof(p), dir, "new");
	write_file(p, "#!/bin/sh\necho swapped\n", 0755);
	for (int ns = 0; ns < 4; ns++) {
		if (ns == 2 && under_valgrind())
			break;
		if (ns == 2)
			ck_assert_int_eq(rename(p, prog), 0);
		struct program_run run = { .exec_fd = fd,
					   .argv = argv,
					   .envp = envp,
					   .timeout_ns = 5000 * MS,
					   .kill_grace_ns = 100 * MS,
					   .stop_fd = -1,
					   .own_pid_ns = ns % 2,
					   .line = keep_line,
					   .userdata = &l };
		memset(&l, 0, sizeof(l));
		ck_assert_int_eq(program_run(&run, &res), 0);
		ck_assert_int_eq(res.status, 0);
		ck_assert_str_eq(res.last_line, "ran x");
	}
	close(fd);
	remove_tree(dir);
}
END_TEST

struct ns_run {
	struct lines l; /* first: keep_line's */
	char file[64];
	pid_t init;
	int started_err;
};

/* Before the program runs: the init exists; say so in a file the program
 * prints first. */
static int note_started(void *userdata, pid_t init)
{
	struct ns_run *n = userdata;
	uint64_t start;
	char state;

	n->init = init;
	n->started_err = process_start_time(init, &start, &state);
	write_file(n->file, "started first\n", 0644);
	return 0;
}

/* In a PID namespace of its own: the program is pid 2 there (under its
 * init), `started` comes before it runs, and a child that left its process
 * group and session is gone, with the init, when program_run returns. */
START_TEST(test_pid_ns)
{
	char dir[] = "/tmp/vfhealth-ns.XXXXXX", script[512];
	char *argv[] = { (char *)"/bin/sh", (char *)"-c", script, NULL };
	char *envp[] = { (char *)"PATH=/usr/bin:/bin", NULL };
	struct program_result res;
	struct ns_run n = { .init = 0 };
	uint64_t start;
	char state;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(n.file, sizeof(n.file), "%s/started", dir);
	/* the child's pid as the test sees it (/proc is the host's); it keeps
	 * running, detached, when the program exits */
	snprintf(script, sizeof(script),
		 "cat %s; echo \"pid $$\"; "
		 "p=$(setsid sh -c 'read -r p _ </proc/self/stat; echo $p; exec sleep 100 >/dev/null' &);"
		 " echo \"$p\"",
		 n.file);
	struct program_run run = { .exec_fd = shell_fd(),
				   .argv = argv,
				   .envp = envp,
				   .timeout_ns = 5000 * MS,
				   .kill_grace_ns = 100 * MS,
				   .stop_fd = -1,
				   .own_pid_ns = true,
				   .started = note_started,
				   .line = keep_line,
				   .userdata = &n };

	ck_assert_int_eq(program_run(&run, &res), 0);
	ck_assert_int_eq(res.end, PROGRAM_EXITED);
	ck_assert_int_eq(res.status, 0);
	ck_assert_int_gt(n.init, 0);
	ck_assert_int_eq(n.started_err, 0);
	ck_assert_uint_eq(n.l.n, 3);
	ck_assert_str_eq(n.l.text[0], "started first");
	ck_assert_str_eq(n.l.text[1], "pid 2");
	pid_t child = (pid_t)atoi(n.l.text[2]);
	ck_assert_int_gt(child, 1);
	/* gone already: the kernel empties the namespace before its init's
	 * exit can be seen */
	ck_assert_int_eq(process_start_time(child, &start, &state), -ENOENT);
	ck_assert_int_eq(process_start_time(n.init, &start, &state), -ENOENT);
	remove_tree(dir);
}
END_TEST

static const struct check_case program_case = { .suite = "recovery-program",
						.tcase = "program",
						.timeout = 60 };
CHECK_CASE_MAIN(program_case, test_exit_and_output, test_output_bounds, test_stdin_and_descriptors,
		test_exec_failure, test_deadline, test_stop, test_open_rules, test_pid_ns)
