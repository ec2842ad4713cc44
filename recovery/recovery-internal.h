/* SPDX-License-Identifier: MIT */
/*
 * recovery-internal.h - what the files of the recovery module share
 * (recovery.h is the public side).  One file per mechanism:
 *   recovery.c  the thread: requests, the cycle's steps, outcomes, metrics
 *   program.c   running one program under a deadline, its output captured
 *   sysfs.c     the VFs a physical function's virtfn links name
 *   register.c  the VFs sysfs shows, registered (--register sysfs)
 *   uevent.c    the kernel's uevents: a PCI device came or went
 *   auto.c      the automatic policy (pure)
 * Locks: `recovery.lock` in docs/architecture.md's lock table (a leaf,
 * never held across a store call or while a program runs).
 */
#ifndef VFHEALTH_RECOVERY_INTERNAL_H
#define VFHEALTH_RECOVERY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/parse.h"
#include "grammar/limits.h"
#include "store/store.h"

/* -- program.c ------------------------------------------------------------- */

#define PROGRAM_LINE_MAX 256   /* a longer output line is cut here */
#define PROGRAM_LINES_MAX 1000 /* lines handed on per run; the rest are counted */

/* Open the program at path (absolute) once, for every run: *ret an O_PATH
 * descriptor (close-on-exec) of the regular executable file the path names
 * now.  Every component the kernel walks -- each directory, each symbolic
 * link and what it points at, the file -- is looked at through descriptors
 * (no name is resolved twice) and must be owned by root (or this process's
 * user); no directory may be writable by group or others unless sticky,
 * and then only a directory may follow it (another user could have put a
 * file or link there); the file is not group or other writable.  -EACCES,
 * -ENOENT, -ELOOP, -EINVAL with why (a sentence naming the component).
 * Tests: tests/recovery/test-program.c test_open_rules,
 * tests/fs/test-recover.sh ("a program others may change"). */
int program_open(const char *path, int *ret, char *why, size_t why_size);

/* Field 22 of /proc/PID/stat (its start time, in clock ticks since boot)
 * and field 3 (its state: 'Z' a zombie).  -ENOENT: no such process. */
int process_start_time(pid_t pid, uint64_t *ret, char *state);

struct program_run {
	int exec_fd;       /* the program (program_open): exec'd from it, never by name */
	char *const *argv; /* argv[0]: its name, as it sees it */
	char *const *envp;
	int64_t timeout_ns;    /* SIGTERM to the process group at the deadline */
	int64_t kill_grace_ns; /* SIGKILL this long after */
	int stop_fd;           /* readable: end the run as at the deadline (-1: none) */
	/* Run it in a PID namespace of its own, under an init of ours: no
	 * process of it outlives the program, nor vfhealthd (see program.c);
	 * pids it sees are the namespace's.  started(userdata, init's pid) is
	 * called before the program runs: < 0 ends the run there, -errno. */
	bool own_pid_ns;
	int (*started)(void *userdata, pid_t init);
	/* each output line (stdout and stderr, without its newline) */
	void (*line)(void *userdata, const char *line);
	void *userdata;
};

enum program_end {
	PROGRAM_EXITED,    /* status: the exit status */
	PROGRAM_SIGNALED,  /* status: the signal */
	PROGRAM_TIMED_OUT, /* killed at the deadline */
	PROGRAM_STOPPED,   /* killed because stop_fd became readable */
};

struct program_result {
	enum program_end end;
	int status;
	char last_line[PROGRAM_LINE_MAX + 1]; /* "" when it wrote none */
	size_t dropped;                       /* lines past PROGRAM_LINES_MAX */
	int64_t elapsed_ns;
};

/* Run exec_fd with argv in its own process group (or PID namespace),
 * stdin /dev/null, stdout and stderr into the line callback, under the
 * deadline; always reaped before returning (in a namespace: every process
 * of it is gone).  0 with *ret filled, or -errno when it could not be
 * started (exec failed: the exec's errno; -EPERM: no namespace may be made). */
int program_run(const struct program_run *p, struct program_result *ret);

/* -- sysfs.c --------------------------------------------------------------- */

/* The addresses the virtfnN links of SYSFS_ROOT/bus/pci/devices/PF point
 * at, sorted (*ret malloc'd; NULL and 0 when none).  -ENOENT: no such
 * physical function. */
int sysfs_virtfns(const char *sysfs_root, const char *pf, char (**ret)[VF_ADDR_BUFSZ],
		  size_t *count);

/* Whether SYSFS_ROOT/bus/pci/devices/PF is an NVIDIA GPU with SR-IOV:
 * 0; -EPERM with *why (a static sentence) when its vendor is not 0x10de
 * or it has no sriov_totalvfs; -ENOENT (no such device) and other -errno
 * with *why too. */
int sysfs_gpu_check(const char *sysfs_root, const char *pf, const char **why);

/* -- register.c ------------------------------------------------------------ */

/* What one scan leaves for the next (zeroed before the first). */
struct register_state {
	bool scanned;  /* a scan ran: the per-GPU lines are logged only for news */
	size_t gpus;   /* NVIDIA GPUs the last scan found */
	size_t absent; /* VFs it left absent: a claim's end or a clear matters */
};

/* Make the store's VFs what sysfs shows: every VF (virtfnN link) of every
 * NVIDIA GPU with SR-IOV in SYSFS_ROOT/bus/pci/devices (sysfs_gpu_check)
 * registered with that GPU as its parent, and the VFs sysfs no longer
 * shows deregistered, or, while a claim or their record holds them,
 * absent (store_vf_set_absent) until it does not; a recovering GPU is
 * left alone.  Logs what it registered: one line per GPU with the count
 * (at the first scan, and when a GPU has new VFs), each VF at debug level,
 * a notice when there is no NVIDIA GPU.  0, with *retry when the store
 * could not take a change (try again later); -errno when sysfs cannot be
 * read.  Tests: tests/fs/test-register.sh. */
int register_scan(struct register_state *st, const char *sysfs_root, struct store *s, bool *retry);

/* -- uevent.c --------------------------------------------------------------- */

/* A non-blocking socket on the kernel's uevent group. */
int uevent_open(int *ret);
/* Whether a uevent (ACTION@DEVPATH, then KEY=VALUE fields, each NUL
 * terminated) names SUBSYSTEM=pci.  Tests: tests/recovery/test-sysfs.c
 * test_uevent_pci. */
bool uevent_is_pci(const char *msg, size_t len);
/* Read every waiting message: *pci set when one was of the pci subsystem
 * or some were lost (ENOBUFS).  0, or -errno. */
int uevent_drain(int fd, bool *pci);

/* -- auto.c ---------------------------------------------------------------- */

/* What the policy reads in one GPU's history (auto_history_read). */
struct auto_history {
	/* a quarantine counts when it began after this ("": every one): the
	 * GPU's last cycle began or its last undrain, whichever came later */
	char counts_after[RFC3339_BUFSZ];
	bool auto_drain;       /* its newest drain was the policy's (detail "auto:") */
	int64_t drained_at_ns; /* that drain's time, since the epoch; -1: none */
};

/* From a GPU's history, oldest first (store_gpu_history).  Tests:
 * tests/recovery/test-auto.c (history_facts). */
void auto_history_read(const struct store_gpu_event *h, size_t n, struct auto_history *ret);
/* Whether a quarantine that began at `since` counts towards the GPU's
 * automatic drain: an undrain (the operator's, or a drain's timeout) is
 * the word that the GPU serves with what is out of service then, so only
 * a quarantine after it drains the GPU again.  Tests: test-auto.c
 * (undrain_stands). */
bool auto_counts(const struct auto_history *h, const char *since);

/* One GPU as the automatic policy sees it. */
struct auto_gpu {
	const char *parent;
	enum store_gpu_state state;
	/* VFs out of service by automatic quarantine that count (auto_counts) */
	size_t fresh_quarantines;
	bool auto_drained;  /* its drain (still on) was started by the policy */
	int64_t drained_ns; /* auto_drained: how long ago that drain began */
};

struct auto_policy {
	int threshold;            /* auto_recover; 0: off (no drain, no cycle) */
	int64_t drain_timeout_ns; /* an automatic drain's deadline; 0: none */
	bool observe;             /* observe mode: no cycle */
};

enum auto_action {
	AUTO_NOTHING,
	AUTO_DRAIN,   /* drain gpus[index] */
	AUTO_CYCLE,   /* start the cycle of gpus[index] (drained) */
	AUTO_UNDRAIN, /* end the automatic drain of gpus[index]: its deadline passed */
};

struct auto_step {
	enum auto_action action;
	size_t index;
	/* the nearest deadline of an automatic drain not yet past, from now
	 * (-1: none): look again then, whatever else happens */
	int64_t wait_ns;
};

/* What the policy does now.  The cycle of a GPU it drained, once that one
 * is drained, when no GPU recovers (one at a time, whoever started it;
 * not in observe mode).  Else the end of an automatic drain past its
 * deadline (draining, or drained and not cycled: observe mode, auto_recover
 * off, another GPU's cycle), whatever
 * else runs.  Else a drain of the first serving GPU with at least
 * `threshold` fresh quarantines, unless a GPU recovers: a GPU waiting for
 * its VMs holds back no other GPU's drain or cycle.  A failed GPU is never
 * touched (no automatic retry); the deadline holds with auto_recover off.
 * Tests: tests/recovery/test-auto.c. */
struct auto_step auto_next(const struct auto_gpu *gpus, size_t n, const struct auto_policy *p);

#endif
