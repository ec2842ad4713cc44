/* SPDX-License-Identifier: MIT */
/*
 * recovery.h - a parent GPU's SR-IOV cycle, run on the host's behalf
 * (vfhealthd(8), "Recovery"; vfhealth(5), gpus/PF/recover).
 *
 * The store decides (store.h, "Recovery": the phases, the one-at-a-time
 * and no-claim checks); this module runs the configured program for a GPU
 * the store marked recovering, checks that its VFs are back in sysfs, and
 * reports the outcome to the store.  It also runs the automatic policy
 * (auto_recover): drain a GPU with enough VFs out of service by automatic
 * quarantine, and cycle it once drained; end such a drain that could not
 * cycle within --auto-drain-timeout.  Everything runs on one thread of
 * its own, never on a FUSE worker: a write to gpus/PF/recover only commits
 * the step and wakes it.
 *
 * Thread-safety: every function may be called from any thread.  Returns 0
 * or a negative errno.
 */
#ifndef VFHEALTH_RECOVERY_H
#define VFHEALTH_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/parse.h"
#include "store/store.h"

#define RECOVERY_TIMEOUT_DEFAULT_S 300
#define RECOVERY_TIMEOUT_MAX_S 86400
/* After the deadline: SIGTERM to the program's process group, SIGKILL this
 * long after (or at the deadline's own length, when shorter). */
#define RECOVERY_KILL_GRACE_NS (10 * NSEC_PER_SEC)
/* An automatic drain whose cycle has not begun this long after the drain
 * began ends: the GPU serves again (its quarantined VFs stay out).  So a
 * tenant whose reports drained a GPU cannot keep it out of service with
 * its own VM.  Counted from the drain's time in the GPU's history, so a
 * restart does not put it off.  Tests: tests/fs/test-auto-drain.sh. */
#define AUTO_DRAIN_TIMEOUT_DEFAULT_S 86400
#define AUTO_DRAIN_TIMEOUT_MAX_S (30 * 86400)
#define REGISTER_SETTLE_NS (2 * NSEC_PER_SEC)
#define REGISTER_RESCAN_NS (60 * NSEC_PER_SEC)

struct recovery_options {
	const char *program; /* absolute path; NULL: no cycle is ever run */
	int64_t timeout_ns;  /* 0: RECOVERY_TIMEOUT_DEFAULT_S */
	/* 0: AUTO_DRAIN_TIMEOUT_DEFAULT_S; < 0: automatic drains never end */
	int64_t auto_drain_timeout_ns;
	const char *sysfs_root; /* NULL: /sys */
	/* where a running cycle is recorded (a file only vfhealthd's user
	 * writes, beside the store); NULL: nowhere */
	const char *record_path;
	/* --register sysfs: the VFs sysfs shows are registered at start,
	 * after every cycle and on every uevent of the pci subsystem
	 * (recovery-internal.h, register_scan); false: by hand only */
	bool register_sysfs;
};

struct recovery;

/* Check the options and make the object; -EINVAL / -EACCES / -ENOENT /
 * -ELOOP with the reason logged.  No thread runs yet.
 *
 * The program is opened here, once (program_open in recovery-internal.h:
 * a regular executable file, and every directory, link and link target its
 * path walks owned by root and writable by root alone), and every cycle
 * runs that descriptor, never the path again.  Tests: tests/fs/
 * test-recover.sh ("a program others may change", "the program checked
 * is the program run").
 *
 * Each cycle runs in a PID namespace of its own whose init dies with
 * vfhealthd (SIGTERM to every process of the cycle, SIGKILL after the
 * grace), and is recorded at record_path while it runs.  Here, before
 * anything is served, the processes of a cycle an earlier vfhealthd left
 * are waited for (SIGKILLed after the grace); should they not end (stuck
 * in the kernel), recovery_request refuses every cycle (-EBUSY) while they
 * live.  Tests: tests/fs/test-recover.sh ("a cycle dies with vfhealthd"). */
int recovery_new(const struct recovery_options *opt, struct recovery **ret);
/* Start the thread over an open store.  A GPU an earlier vfhealthd left
 * recovering is made failed (interrupted) before anything else runs.
 * With register_sysfs, the VFs sysfs shows are registered before it
 * returns (again by the thread, should the store refuse), and a thread
 * listens for the kernel's uevents (uevent.c): a PCI device that comes or
 * goes makes the thread look again, at once and REGISTER_SETTLE_NS after
 * the last such event (the kernel links a VF to its GPU after the VF's
 * own "add"); without that socket it looks every REGISTER_RESCAN_NS.
 * Tests: tests/fs/test-register.sh. */
int recovery_start(struct recovery *r, struct store *s);
/* Stop the thread; a program still running is killed and reaped and its
 * GPU left recovering (the next start makes it failed).  NULL: no-op. */
void recovery_stop(struct recovery *r);
void recovery_free(struct recovery *r);
static inline void recovery_freep(struct recovery **r)
{
	recovery_free(*r);
}

/* Whether a program is configured (r NULL: no). */
bool recovery_configured(const struct recovery *r);

/* gpus/PF/recover: start a cycle of parent for the writer uid.  0 when
 * the GPU is recovering and the thread was woken; -EOPNOTSUPP (no
 * program), -EPERM (observe mode: logged what would run), -EBUSY (not
 * drained, a claim left, another GPU recovering, processes of an earlier
 * vfhealthd's cycle still running: *why a static sentence), -EAGAIN (the
 * thread is not running yet, or any more), -ENOENT, -EIO. */
int recovery_request(struct recovery *r, const char *parent, int64_t uid, const char **why);

/* The device a drain or a cycle of pf acts on, as sysfs says now (never
 * from text a writer stored): SYSFS_ROOT/bus/pci/devices/PF must be an
 * NVIDIA GPU (its `vendor` reads 0x10de) with SR-IOV (`sriov_totalvfs`
 * exists), else -EPERM with *why a static sentence.  Its VFs are its
 * virtfnN links (*vfs malloc'd, sorted; NULL and 0 when none), and every
 * registered one is made the GPU's in the store (store_gpu_adopt), so a
 * drain and the no-claim check cover it.  sysfs_root NULL: /sys.  Tests:
 * tests/recovery/test-sysfs.c test_gpu_check, tests/fs/test-recover-target.sh. */
int recovery_gpu_target(const char *sysfs_root, struct store *s, const char *pf,
			char (**vfs)[VF_ADDR_BUFSZ], size_t *n, const char **why);

/* The recovery's subscriber to the store's changes (store_subscribe,
 * userdata the recovery; daemon/main.c subscribes it): the automatic
 * policy or the registration may have something to do.  Only sets a flag
 * (lock D2): called from the committing thread, it never blocks. */
void recovery_store_changed(void *userdata, const struct store_change *change);

/* vfhealth_gpu_recoveries_total{parent,outcome},
 * vfhealth_gpu_recovery_duration_seconds{parent} and
 * vfhealth_gpu_auto_drain_timeouts_total{parent} (metrics_render_fn). */
void recovery_render_metrics(void *userdata, FILE *out);

#endif
