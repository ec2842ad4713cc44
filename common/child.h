/* SPDX-License-Identifier: MIT */
/*
 * child.h - the one way vfhealth starts and ends a child process: which
 * descriptors it keeps, its signals, its process group, its parent-death
 * signal, a deadline with SIGTERM, a grace and SIGKILL, and how it ended.
 *
 * The child.  child_fork() returns 0 in the child, set up as asked:
 *   - descriptors: fds[i] becomes descriptor i (not close-on-exec; CHILD_FD_NULL
 *     opens /dev/null there, CHILD_FD_CLOSED leaves the number free); every
 *     other descriptor is closed (tests/common/test-child.c test_fds);
 *   - signals: every disposition back to SIG_DFL (an ignored one would stay
 *     ignored across exec), the mask *sigmask or empty; every signal is
 *     blocked in the parent across the clone, so no handler of the parent's
 *     runs in the child (test_signals);
 *   - a process group of its own (new_pgroup, set by both sides so that
 *     neither order leaves a window);
 *   - a parent-death signal (pdeathsig), with the race closed: a child whose
 *     parent died before prctl() took effect exits at once (test_pdeathsig).
 *     In a new PID namespace getppid() is 0 and says nothing: that caller
 *     closes the race itself (recovery/program.c, a handshake);
 *   - a new PID namespace (new_pid_ns, the child its init).
 * The fork is a raw clone: none of fork(3)'s handlers run, so the child of a
 * threaded process is safe as long as it calls only async-signal-safe
 * functions until it execs or exits: no malloc, no stdio, no logging;
 * whatever it needs is built before.  A setup that fails ends the child
 * with CHILD_SETUP_FAILED.  child_spawn() forks and execs, and tells a
 * failed setup or exec (its errno) from a program that exits 127 through a
 * close-on-exec pipe (test_spawn_failure).
 *
 * The end.  child_wait() waits for the exit on a pidfd (pidfd_open(2);
 * without it, a look every CHILD_NO_PIDFD_POLL_MS), sends SIGTERM at the
 * deadline and SIGKILL after the grace (at once when the grace is 0), to
 * the child's process group when it has one, and reaps it
 * (test_term_ignored, test_early_exit).  How it ended is one struct
 * (test_status).  child_fork and child_spawn also work in a raw-cloned
 * child (an init of recovery/program.c starts its program with them).
 */
#ifndef VFHEALTH_CHILD_H
#define VFHEALTH_CHILD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CHILD_FD_CLOSED (-1) /* nothing at this descriptor */
#define CHILD_FD_NULL (-2)   /* /dev/null, read-write */
#define CHILD_FDS_MAX 10

/* The exit status of a child whose setup failed (or, from child_spawn, whose
 * exec failed: the parent gets the errno, not this). */
#define CHILD_SETUP_FAILED 127

/* Without pidfd_open(2) (kernels before 5.3, valgrind), the exit is looked
 * for this often. */
#define CHILD_NO_PIDFD_POLL_MS 10

/* How long child_wait() waits for a child it SIGKILLed: one stuck in the
 * kernel (a driver, a dead mount) may never die, and the caller must not
 * hang on it. */
#define CHILD_KILL_WAIT_NS (2 * 1000000000LL)

struct child_opts {
	const int *fds; /* fds[i] becomes descriptor i; NULL with n_fds 0: none */
	unsigned n_fds; /* at most CHILD_FDS_MAX */
	int pdeathsig;  /* 0: none */
	bool new_pgroup;
	bool new_pid_ns;
	const sigset_t *sigmask; /* the child's mask; NULL: empty */
};

/* A child of ours until it is reaped (pid 0 then).  Signals go to its
 * process group when group is set (child_fork sets it with new_pgroup). */
struct child {
	pid_t pid;
	int pidfd; /* -1: none (opened when waited for, where possible) */
	bool group;
};

#define CHILD_NONE ((struct child){ .pid = 0, .pidfd = -1, .group = false })

enum child_end {
	CHILD_EXITED,   /* code: its exit status */
	CHILD_SIGNALED, /* code: the signal that ended it */
};

struct child_status {
	enum child_end end;
	int code;
	bool timed_out; /* the deadline passed: child_wait sent SIGTERM or SIGKILL */
};

/* Fork as the options say.  1 in the parent (*ret the child), 0 in the
 * child (which must not return into code that is not async-signal-safe),
 * -errno when no child was made. */
int child_fork(const struct child_opts *o, struct child *ret);

/* What child_spawn execs: the path, or (path NULL) descriptor fd as it is
 * numbered in the child (fexecve: what runs is what was opened).  envp
 * NULL: this process's environment. */
struct child_exec {
	const char *path;
	int fd;
	char *const *argv;
	char *const *envp;
};

/* child_fork, then exec.  0 once the program runs; -errno of a failed setup
 * or exec, the child reaped. */
int child_spawn(const struct child_opts *o, const struct child_exec *e, struct child *ret);

/* kill(2) the child, or its process group. */
int child_signal(const struct child *c, int sig);

/* Reap the child if it has ended: 1 (*ret how, when ret is not NULL, c
 * released), 0 while it runs, -errno (-ECHILD: not ours, or reaped). */
int child_try_wait(struct child *c, struct child_status *ret);

/* Wait for the child for timeout_ns (< 0: no deadline), then SIGTERM, and
 * SIGKILL after grace_ns (grace 0: SIGKILL at the deadline), and reap it.
 * A child in a group of its own that was signalled has its group SIGKILLed
 * after it ended: nothing it started outlives it.  0 with *ret how it
 * ended; -ETIMEDOUT when it did not die within CHILD_KILL_WAIT_NS of the
 * SIGKILL (not reaped); another -errno from waitid. */
int child_wait(struct child *c, int64_t timeout_ns, int64_t grace_ns, struct child_status *ret);

/* Decode a wait(2) status. */
void child_status_decode(int wstatus, struct child_status *ret);

/* Close the pidfd and forget the child (reaped or left to its fate). */
void child_release(struct child *c);

#endif
