/* SPDX-License-Identifier: MIT */
/*
 * program.c - run one program under a deadline, its output captured
 * (recovery-internal.h, program_run).
 *
 * Design notes
 * ============
 *
 * The program, opened once (program_open).  Its path is walked a component
 * at a time, each one opened O_PATH|O_NOFOLLOW relative to the directory
 * before it and checked through that descriptor (a link's target is read
 * from the link's own descriptor and walked the same way), so what is
 * checked is what is opened; each run execs that descriptor (fexecve), so
 * what runs is what was checked, whatever the path names by then.  It is
 * EXEC_FD in the program, not close-on-exec: for a #! script the kernel
 * hands the interpreter /dev/fd/N, which a closed descriptor would make
 * ENOENT.
 *
 * A PID namespace of its own (own_pid_ns).  PR_SET_PDEATHSIG covers one
 * process, and a process group or session is the program's to leave; a
 * PID namespace is not, and when its init dies the kernel kills everything
 * in it before that init's exit is seen.  So the child vfhealthd clones
 * (CLONE_NEWPID) is an init of ours: it arms its parent-death signal
 * (SIGTERM), says so, and waits for vfhealthd's go (an EOF there: vfhealthd
 * died before the go, maybe before the signal was armed: nothing runs);
 * between the two, vfhealthd records it (started).  Then it forks the
 * program and reaps whatever ends, until the program ends; it reports the
 * program's wait status and exits, taking any leftover with it.  On
 * SIGTERM (the deadline, a stop, vfhealthd's death) it sends SIGTERM to
 * every process of the namespace (kill(-1): setsid'd ones too) and exits
 * after the grace; SIGKILL from vfhealthd ends it (and so the namespace)
 * at once.  An init ignores signals it has no handler for, so SIGTERM goes
 * to the init alone, never also to the program, which would get it twice.
 *
 * Without a namespace (tests of the runner alone), the child is the
 * program, the leader of a new process group (and the parent does the same
 * for it, so that neither order of the two calls leaves a window): at the
 * deadline SIGTERM, and SIGKILL after the grace, go to the whole group.
 *
 * Both children are made by common/child.h (child_fork for the init,
 * child_spawn for the program): async-signal-safe calls only between clone
 * and exec, every descriptor of vfhealthd's but those they need closed at
 * once (neither the init nor the program may hold /dev/fuse or the store's
 * flock'd files), and a failed exec's errno told apart from "exited 127".
 *
 * Waiting.  One poll(2) on a pidfd (the exit), the output pipe and the stop
 * descriptor, with the next deadline as its timeout: no sleeping, no
 * SIGCHLD (where pidfd_open(2) is missing, a look every CHILD_NO_PIDFD_POLL_MS).
 * The output is read until the program (or its init) exits; what a
 * leftover writes after that is not waited for.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child.h"
#include "common/cleanup.h"
#include "common/parse.h"
#include "recovery/recovery-internal.h"

#define LINKS_MAX 40 /* symbolic links followed on the path, as the kernel's */
/* The descriptor the program is exec'd from, in its process: left open, so
 * that a script's interpreter can read it as /dev/fd/4. */
#define EXEC_FD 4

/* -- the program, opened once ------------------------------------------------- */

/* Only root (or this process's user) may own what the path walks. */
static bool owner_trusted(const struct stat *st)
{
	return st->st_uid == 0 || st->st_uid == geteuid();
}

/* Append /name to the walked path `at` (for messages); ".." goes up. */
static void at_step(char *at, size_t size, const char *name)
{
	size_t len = strlen(at);

	if (strcmp(name, "..") == 0) {
		char *slash = strrchr(at, '/');
		if (slash)
			slash[slash == at ? 1 : 0] = '\0';
		return;
	}
	snprintf(at + len, size - len, "%s%s", len > 1 ? "/" : "", name);
}

int program_open(const char *path, int *ret, char *why, size_t why_size)
{
	char rest[PATH_MAX * 2], at[PATH_MAX * 2] = "/", target[PATH_MAX];
	_cleanup_close_ int dir = -1;
	bool open_dir = false; /* the directory walked is sticky and others may write it */
	unsigned links = 0;
	struct stat st;

	if (!path || !ret || path[0] != '/') {
		snprintf(why, why_size, "not an absolute path");
		return -EINVAL;
	}
	if (strlen(path) >= PATH_MAX) {
		snprintf(why, why_size, "too long");
		return -ENAMETOOLONG;
	}
	snprintf(rest, sizeof(rest), "%s", path);
	for (char *p = rest;;) {
		_cleanup_close_ int fd = -1;
		char *name, *next;

		if (*p == '/') {
			/* an absolute path (the argument, or a link's target) starts at / */
			closep(&dir);
			dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (dir < 0 || fstat(dir, &st) < 0) {
				snprintf(why, why_size, "cannot open /: %s", strerror(errno));
				return -errno;
			}
			snprintf(at, sizeof(at), "/");
			if (!owner_trusted(&st) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
				snprintf(why, why_size,
					 "/ may be changed by another user than root");
				return -EACCES;
			}
			open_dir = false;
		}
		while (*p == '/')
			p++;
		if (!*p) {
			snprintf(why, why_size, "%s is a directory, not a program", at);
			return -EACCES;
		}
		name = p;
		next = strchr(p, '/');
		if (next)
			*next++ = '\0';
		p = next ? next : name + strlen(name);
		while (*p == '/')
			p++;
		if (strcmp(name, ".") == 0)
			continue;
		fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		at_step(at, sizeof(at), name);
		if (fd < 0 || fstat(fd, &st) < 0) {
			snprintf(why, why_size, "cannot open %s: %s", at, strerror(errno));
			return -errno;
		}
		if (!owner_trusted(&st)) {
			snprintf(why, why_size,
				 "%s is owned by uid %u: only root may own what its path walks,"
				 " links and directories included",
				 at, (unsigned)st.st_uid);
			return -EACCES;
		}
		if (open_dir && !S_ISDIR(st.st_mode)) {
			/* another user may have put it there (a hard link to another
			 * root program, or the name taken first) */
			snprintf(why, why_size,
				 "%s is directly in a directory others may write (sticky): only a"
				 " directory may be there on its path",
				 at);
			return -EACCES;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
			if (++links > LINKS_MAX) {
				snprintf(why, why_size, "too many symbolic links");
				return -ELOOP;
			}
			if (n <= 0 || (size_t)n + 1 + strlen(p) + 1 > sizeof(rest)) {
				snprintf(why, why_size, "cannot read the link %s", at);
				return n < 0 ? -errno : -ENAMETOOLONG;
			}
			target[n] = '\0';
			/* the link's directory: back to where it is */
			at_step(at, sizeof(at), "..");
			/* fits: the length was checked above */
			char joined[sizeof(rest)];
			if (snprintf(joined, sizeof(joined), "%s%s%s", target, *p ? "/" : "", p) <
			    0)
				return -EINVAL;
			memcpy(rest, joined, sizeof(rest));
			p = rest; /* an absolute target starts again at / */
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
				snprintf(why, why_size,
					 "%s is a directory others may write: they could replace"
					 " the program",
					 at);
				return -EACCES;
			}
			open_dir = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
			closep(&dir);
			dir = move_fd(fd);
			continue;
		}
		if (!S_ISREG(st.st_mode) || *p) {
			snprintf(why, why_size, "%s is not a regular file", at);
			return -EACCES;
		}
		if (st.st_mode & (S_IWGRP | S_IWOTH)) {
			snprintf(why, why_size, "%s is writable by another user than root", at);
			return -EACCES;
		}
		if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
			snprintf(why, why_size, "%s is not executable", at);
			return -EACCES;
		}
		*ret = move_fd(fd);
		return 0;
	}
}

int process_start_time(pid_t pid, uint64_t *ret, char *state)
{
	char path[64], buf[1024], *close_paren;
	_cleanup_close_ int fd = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	/* the name (field 2) may hold anything: fields 3 on come after its ')' */
	close_paren = strrchr(buf, ')');
	if (!close_paren ||
	    sscanf(close_paren + 1,
		   " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s"
		   " %" SCNu64,
		   state, ret) != 2)
		return -EIO;
	return 0;
}

/* -- the child, between fork and exec: async-signal-safe calls only ----------- */

/* The program's descriptors: stdin /dev/null, stdout and stderr the output
 * pipe, nothing at 3, EXEC_FD the checked program, exec'd from that
 * descriptor, never from its path. */
static int spawn_program(const struct program_run *p, int null_fd, int out_fd, int exec_fd,
			 const struct child_opts *base, struct child *ret)
{
	const int fds[] = { null_fd, out_fd, out_fd, CHILD_FD_CLOSED, exec_fd };
	struct child_opts o = *base;
	const struct child_exec e = { .fd = EXEC_FD, .argv = p->argv, .envp = p->envp };

	o.fds = fds;
	o.n_fds = EXEC_FD + 1;
	return child_spawn(&o, &e, ret);
}

/* What the namespace's init tells vfhealthd, in order. */
enum report_kind {
	REPORT_ARMED,   /* its parent-death signal is set: vfhealthd may say go */
	REPORT_STARTED, /* value: 0, or the exec's errno */
	REPORT_ENDED,   /* value: the program's wait status */
};

struct report {
	int kind;
	int value;
};

static volatile sig_atomic_t init_termed;
static unsigned init_grace_s;

/* SIGTERM (vfhealthd's deadline or stop, or vfhealthd's death): to every
 * process of the namespace, setsid'd ones too; whatever is left when the
 * grace is over dies with the init. */
static void init_on_term(int sig)
{
	(void)sig;
	if (init_termed)
		return;
	init_termed = 1;
	kill(-1, SIGTERM);
	alarm(init_grace_s);
}

static _Noreturn void init_on_alarm(int sig)
{
	(void)sig;
	_exit(128 + SIGKILL); /* the kernel kills the rest of the namespace */
}

static void init_report(int fd, int kind, int value)
{
	struct report r = { .kind = kind, .value = value };

	if (write(fd, &r, sizeof(r)) < 0) {
		/* vfhealthd is gone: its parent-death signal ends this */
	}
}

/* The PID namespace's init: arms the parent-death signal, waits for
 * vfhealthd's go, forks the program and reaps everything until the program
 * ended.  Its exit ends the namespace: the kernel SIGKILLs every process
 * left in it before the init's own exit can be seen. */
static _Noreturn void init_main(const struct program_run *p, unsigned grace_s)
{
	struct sigaction term = { .sa_handler = init_on_term };
	struct sigaction alrm = { .sa_handler = init_on_alarm };
	const struct child_opts plain = { 0 };
	struct child program = CHILD_NONE;
	sigset_t none;
	int err, status = 0;
	char go;

	sigemptyset(&none);
	init_grace_s = grace_s;
	sigfillset(&term.sa_mask);
	sigfillset(&alrm.sa_mask);
	if (sigaction(SIGTERM, &term, NULL) < 0 || sigaction(SIGALRM, &alrm, NULL) < 0 ||
	    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		_exit(127);
	init_report(6, REPORT_ARMED, 0);
	/* EOF: vfhealthd died before its go, maybe before the signal was armed */
	if (read(5, &go, 1) != 1 || init_termed)
		_exit(127);
	err = -spawn_program(p, 3, 4, 7, &plain, &program);
	close(3);
	close(4);
	init_report(6, REPORT_STARTED, err);
	if (err)
		_exit(0); /* the program never ran (child_spawn reaped it) */
	for (;;) {
		int st;
		pid_t w = wait4(-1, &st, __WALL, NULL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 || w == program.pid) {
			status = w < 0 ? 127 << 8 : st;
			break;
		}
	}
	init_report(6, REPORT_ENDED, status);
	_exit(0);
}

struct output {
	const struct program_run *p;
	struct program_result *res;
	char buf[PROGRAM_LINE_MAX + 1];
	size_t len;
	bool cut; /* dropping the rest of a line longer than PROGRAM_LINE_MAX */
	size_t lines;
};

static void output_line(struct output *o)
{
	o->buf[o->len] = '\0';
	o->len = 0;
	memcpy(o->res->last_line, o->buf, sizeof(o->res->last_line));
	if (o->lines++ >= PROGRAM_LINES_MAX) {
		o->res->dropped++;
		return;
	}
	if (o->p->line)
		o->p->line(o->p->userdata, o->buf);
}

enum read_result {
	READ_EOF,  /* EOF or an error: the pipe is done */
	READ_DATA, /* read some */
	READ_NONE, /* nothing there now */
};

static enum read_result output_read(struct output *o, int fd)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return READ_NONE;
	if (n <= 0) {
		if (o->len && !o->cut)
			output_line(o);
		return READ_EOF;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (chunk[i] == '\n') {
			if (!o->cut)
				output_line(o);
			o->cut = false;
			o->len = 0;
		} else if (!o->cut) {
			o->buf[o->len++] = chunk[i];
			if (o->len == PROGRAM_LINE_MAX) {
				output_line(o);
				o->cut = true;
			}
		}
	}
	return READ_DATA;
}

static bool read_report(int fd, int kind, int *value)
{
	struct report r;
	ssize_t n;

	do
		n = read(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(r) || r.kind != kind)
		return false;
	*value = r.value;
	return true;
}

static void reap(pid_t pid)
{
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int program_run(const struct program_run *p, struct program_result *ret)
{
	_cleanup_close_ int null_fd = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1, go_r = -1,
			    go_w = -1;
	_cleanup_(child_release) struct child c = CHILD_NONE;
	struct output o = { .p = p, .res = ret };
	int fds[2], err = 0, pidfd;
	sigset_t all;
	pid_t pid;

	sigfillset(&all);

	if (!p || !ret || !p->argv || !p->argv[0] || !p->envp || p->exec_fd <= 2)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0)
		return -errno;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	out_r = fds[0];
	out_w = fds[1];
	/* the exec's errno, or (in a namespace) the init's reports */
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	err_r = fds[0];
	err_w = fds[1];
	if (p->own_pid_ns) {
		if (pipe2(fds, O_CLOEXEC) < 0)
			return -errno;
		go_r = fds[0];
		go_w = fds[1];
	}

	int64_t start = monotonic_ns();
	int64_t grace = p->kill_grace_ns < p->timeout_ns ? p->kill_grace_ns : p->timeout_ns;
	if (p->own_pid_ns) {
		/* 3 null, 4 output, 5 go, 6 report, 7 the program: vfhealthd's
		 * other descriptors (the FUSE device, the store's locks) must
		 * not live on; every signal blocked until its handlers are set */
		const int init_fds[] = { 0, 1, 2, null_fd, out_w, go_r, err_w, p->exec_fd };
		const struct child_opts init = { .fds = init_fds,
						 .n_fds = 8,
						 .pdeathsig = SIGTERM,
						 .new_pgroup = true,
						 .new_pid_ns = true,
						 .sigmask = &all };
		int k = child_fork(&init, &c);

		if (k == 0)
			init_main(p, (unsigned)((grace + NSEC_PER_SEC - 1) / NSEC_PER_SEC));
		if (k < 0)
			return k;
		/* the signals: to the init alone, which passes SIGTERM on to
		 * every process of its namespace */
		c.group = false;
	} else {
		const struct child_opts plain = { .new_pgroup = true, .pdeathsig = SIGKILL };
		int k = spawn_program(p, null_fd, out_w, p->exec_fd, &plain, &c);

		if (k < 0)
			return k;
	}
	pid = c.pid;
	close(move_fd(out_w));
	close(move_fd(err_w));
	if (p->own_pid_ns) {
		int k = 0;

		close(move_fd(go_r));
		if (!read_report(err_r, REPORT_ARMED, &err)) {
			reap(pid);
			return -EIO;
		}
		if (p->started)
			k = p->started(p->userdata, pid);
		if (k < 0 || write(go_w, "g", 1) != 1) {
			k = k < 0 ? k : -errno;
			kill(pid, SIGKILL);
			reap(pid);
			return k;
		}
		if (!read_report(err_r, REPORT_STARTED, &err) || err) {
			reap(pid); /* it exits after a failed start */
			return err > 0 ? -err : -EIO;
		}
	}
	pidfd = c.pidfd;
	(void)fcntl(out_r, F_SETFL, O_NONBLOCK);

	int64_t deadline = start + p->timeout_ns;
	bool output_open = true, termed = false, killed = false;
	ret->end = PROGRAM_EXITED;
	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = pidfd, .events = POLLIN },
			{ .fd = output_open ? out_r : -1, .events = POLLIN },
			{ .fd = termed ? -1 : p->stop_fd, .events = POLLIN },
		};
		int64_t now = monotonic_ns();

		if (now >= deadline && !killed) {
			if (!termed) {
				(void)child_signal(&c, SIGTERM);
				termed = true;
				deadline = now + grace;
				if (ret->end == PROGRAM_EXITED)
					ret->end = PROGRAM_TIMED_OUT;
			} else {
				(void)child_signal(&c, SIGKILL);
				killed = true;
			}
			continue;
		}
		int64_t left_ms = killed ? -1 : (deadline - now + 999999) / 1000000;
		if (pidfd < 0 && (left_ms < 0 || left_ms > CHILD_NO_PIDFD_POLL_MS))
			left_ms = CHILD_NO_PIDFD_POLL_MS;
		int k = poll(pfd, 3, left_ms > INT32_MAX ? INT32_MAX : (int)left_ms);
		if (k < 0 && errno != EINTR)
			return -errno; /* cannot happen with valid descriptors */
		siginfo_t info = { 0 };
		bool exited = false;
		if (pidfd < 0) {
			/* no pidfd: look, reaping it if it exited */
			if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG) == 0 && info.si_pid)
				exited = true;
		} else if (k > 0 && pfd[0].revents) {
			if (waitid(P_PID, (id_t)pid, &info, WEXITED) < 0) {
				if (errno == EINTR)
					continue;
				return -errno;
			}
			exited = true;
		}
		if (k <= 0 && !exited)
			continue;
		if (k > 0 && pfd[1].revents)
			output_open = output_read(&o, out_r) != READ_EOF;
		if (k > 0 && pfd[2].revents && !termed && !exited) {
			ret->end = PROGRAM_STOPPED;
			deadline = monotonic_ns(); /* SIGTERM now, SIGKILL after the grace */
			continue;
		}
		if (exited) {
			/* what it wrote before it exited; not what a leftover writes */
			enum read_result rr = READ_DATA;
			while (output_open && rr == READ_DATA)
				rr = output_read(&o, out_r);
			if (rr == READ_NONE && o.len && !o.cut)
				output_line(&o);
			int status;
			if (!p->own_pid_ns && (termed || killed))
				kill(-pid, SIGKILL); /* what is left of its group */
			if (p->own_pid_ns && read_report(err_r, REPORT_ENDED, &status)) {
				/* the program's own end, which its init reported */
				info.si_code = WIFEXITED(status) ? CLD_EXITED : CLD_KILLED;
				info.si_status = WIFEXITED(status) ? WEXITSTATUS(status) :
								     WTERMSIG(status);
			} else if (p->own_pid_ns && info.si_code == CLD_EXITED) {
				/* its init ended it at the grace: killed */
				info.si_code = CLD_KILLED;
				info.si_status = SIGKILL;
			}
			if (ret->end == PROGRAM_EXITED)
				ret->end = info.si_code == CLD_EXITED ? PROGRAM_EXITED :
									PROGRAM_SIGNALED;
			ret->status = info.si_status;
			break;
		}
	}
	ret->elapsed_ns = monotonic_ns() - start;
	return 0;
}
