/* SPDX-License-Identifier: MIT */
/*
 * budget.h - what open files may hold in the daemon's memory.
 *
 * Every open file and directory is charged, to the uid that opened it, the
 * bytes it keeps between requests: its handle, and the text (snapshot or
 * listing) its last read at offset 0 rendered, whoever read it: memory is
 * charged to whoever holds it, so descriptors an unprivileged user hands to
 * a root process (SCM_RIGHTS, a setuid program's stdin) cost her, not root
 * (tests/adversarial/budget-lend.sh).
 * (The handle a claim's create returns is not charged: creating needs the
 * writers' group and makes at most one claim per VF; its reads are.)  A charge that would take the
 * uid past READER_BUDGET_PER_UID, or the sum over every uid but root past
 * READER_BUDGET_TOTAL, is refused with -ENOBUFS and changes nothing; the
 * filesystem answers that open or read with ENOBUFS (vfhealth(5),
 * docs/limits.md).  Root has its own per-uid budget and is not counted in
 * the total, so unprivileged readers cannot starve placement or the
 * sentinel.  The daemon holds at most READER_BUDGET_TOTAL +
 * READER_BUDGET_PER_UID for open files, plus what requests in flight render
 * (one text per FUSE worker).
 *
 * Thread-safe (one leaf mutex).  Test: tests/fs/test-vfiles.c (budget_*),
 * tests/fs/test-budget.sh and tests/adversarial/budget-lend.sh on a real
 * mount.
 */
#ifndef VFHEALTH_FS_BUDGET_H
#define VFHEALTH_FS_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The filesystem logs a spent budget at most once per this many seconds. */
#define BUDGET_LOG_INTERVAL_S 10

struct budget;

/* total_max: the sum over every uid but 0; per_uid_max: each uid, 0 too. */
int budget_new(size_t total_max, size_t per_uid_max, struct budget **ret);
void budget_free(struct budget *b);

/* Charge uid `bytes` more.  0, or -ENOBUFS when a limit would be passed
 * (*ret_uid_spent says whether it was uid's own), -ENOMEM. */
int budget_charge(struct budget *b, uid_t uid, size_t bytes, bool *ret_uid_spent);
/* Give back what a charge took (never more than uid holds). */
void budget_release(struct budget *b, uid_t uid, size_t bytes);

/* What uid holds now, and the total over every uid but 0. */
size_t budget_held(struct budget *b, uid_t uid);
size_t budget_total(struct budget *b);

/* True at most once per BUDGET_LOG_INTERVAL_S for each kind (a uid's own
 * budget, the total; now_ns on CLOCK_MONOTONIC): whether the caller should
 * log that a budget is spent. */
bool budget_log_due(struct budget *b, bool uid_spent, int64_t now_ns);

#endif
