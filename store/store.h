/* SPDX-License-Identifier: MIT */
/*
 * store.h - the health store's public contract: the one module that owns
 * SQLite.  Its files (store/) split by concern; store-internal.h says which
 * file owns what.
 *
 * The store keeps, for every registered VF (an SR-IOV virtual function named
 * by its PCI address), the failed assignments reported against it, whether it
 * is quarantined, and the claims that hand it to instances.  It decides
 * quarantine; everything else in vfhealth (the filesystem, the sentinel)
 * only asks and reports.
 *
 * Conventions: every int-returning function returns 0 on success or a
 * negative errno.  Strings passed in are copied; nothing returned points into
 * the store after the call returns.  All functions are thread-safe.
 *
 * THE RULES (each one has a test in tests/store/):
 *
 *  VF addresses   must match ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$
 *                 (lowercase, as sysfs names them); anything else -EINVAL.
 *                 VFs are registered and unregistered explicitly.  Unknown
 *                 VF: -ENOENT.  Registering a known VF: -EEXIST.
 *                 Unregistering one that is quarantined, has failures or
 *                 holds a live claim: -EBUSY.
 *
 *  Threshold      an integer 1..1000 (else -EINVAL), default 2, stored in the
 *                 database.  Setting it, or opening with a configured value
 *                 that differs from the stored one, re-evaluates every VF: a
 *                 VF whose tally meets the new threshold is quarantined, and
 *                 that is persisted in the same transaction.  Raising the
 *                 threshold never lifts a quarantine.
 *
 *  Failure report (vf, instance_id, assigned_at, message) -> outcome, tally:
 *                 - VF already quarantined: UNCHANGED;
 *                 - (instance_id, assigned_at) already recorded for this VF:
 *                   UNCHANGED (polling is idempotent across restarts);
 *                 - else the failure is appended with the time it was
 *                   reported and the message; if the tally now meets the
 *                   threshold the VF is quarantined: QUARANTINED, else
 *                   RECORDED.  The tally is the number of recorded failures.
 *
 *  Success report (vf, instance_id, assigned_at) -> (cleared, rescinded):
 *                 - no recorded failures: (0, false), on a fast path that
 *                   takes no write transaction and no lock that claims or
 *                   failure reports hold, and that succeeds even while the
 *                   store is unavailable;
 *                 - no failure recorded with exactly this (instance_id,
 *                   assigned_at): (0, false);
 *                 - else the matching failure and every older one are removed
 *                   (cleared = how many); if none remain the quarantine is
 *                   lifted (rescinded = it was quarantined); if some remain
 *                   the quarantine stays.
 *                 - a quarantine with no failures behind it (manual) is never
 *                   lifted by a success.
 *
 *  Operator       store_quarantine_manual(): quarantine with no failure
 *                 record.  store_clear(): lift the quarantine and drop every
 *                 failure (the last step of the recovery runbook).
 *
 *  Claims         at most one live claim per VF.  Claiming a quarantined VF,
 *                 or one another instance holds: -EBUSY.  Claiming a VF the
 *                 same instance already holds: -EEXIST.  claimed_at is the
 *                 assignment identity, RFC 3339 UTC with nanoseconds; the
 *                 store stamps it when the caller gives none.  Released
 *                 claims stay in the database as history.
 *
 *  Breaker        an optional cap on the number of quarantined VFs (0 = no
 *                 cap, the default).  A failure report that would quarantine
 *                 beyond the cap is recorded (RECORDED) but does not
 *                 quarantine, and the result says the breaker is engaged.
 *                 A systemic guest/host driver mismatch must not drain a
 *                 whole host.  A VF is "held back" when it is not
 *                 quarantined and its tally meets the threshold (only the
 *                 cap causes that); the breaker is engaged while the cap is
 *                 reached and a held-back VF exists.  Changing the cap
 *                 re-evaluates like the threshold (oldest registration
 *                 first); manual quarantines ignore the cap.
 *
 *  Durability     every acknowledged mutation is committed durably before the
 *                 call returns (WAL, synchronous=FULL, BEGIN IMMEDIATE).
 *                 Concurrent writers are grouped into one transaction and one
 *                 fsync (group commit); each is acknowledged only after that
 *                 commit.  application_id and user_version version the
 *                 schema; a newer schema is refused with a clear reason.
 *
 *  Fail closed    a failed commit (disk full, I/O error, read-only file,
 *                 corruption) latches the store unavailable with a
 *                 human-readable reason.  While latched: calls that would
 *                 change state fail with -EIO; calls that would change
 *                 nothing still succeed; placement-facing reads
 *                 (store_quarantined_list, store_vf_get's quarantine bit,
 *                 store_claim_get) first retry (store_retry_for_read: a
 *                 store_repair at most once a second for the whole store)
 *                 and then fail with -EIO; their _noretry variants, for
 *                 readers who may not write, fail at once and never
 *                 repair.  Name lookups (store_vf_lookup,
 *                 store_claim_lookup) are not placement-facing: they are
 *                 answered from memory, never retry, and work while latched.  store_repair() retries and clears the latch
 *                 when a write works again.  A database that fails
 *                 PRAGMA quick_check or cannot be parsed at open is never
 *                 overwritten: the store opens unavailable with the reason,
 *                 and store_repair() retries the open.  The availability
 *                 transition is logged once, not once per failed retry.
 *
 *  Lost database  never taken for a new one: a database is created only
 *                 when PATH does not exist and no mark PATH ".created"
 *                 (written, fsync'd, when the database is created; holds
 *                 the creation time) says one existed.  A missing database
 *                 with its mark, an empty (0-byte) file or a file that is
 *                 not a vfhealth database: unavailable with the reason, the
 *                 file untouched.  To start afresh the operator removes
 *                 the mark (docs/runbook.md).
 *
 *  One writer     per database file: besides PATH "-lock", the store
 *                 flocks the database file itself, so a second store
 *                 opening the same file by any name or hard link gets
 *                 -EBUSY.
 */
#ifndef VFHEALTH_STORE_H
#define VFHEALTH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/limits.h"
#include "grammar/vf.h" /* the VF address rule the store enforces */
#include "proto/parse.h"

/* Every limit of the interface is grammar/limits.h's; the store adds only: */
#define STORE_REASON_MAX 512

struct store;

struct store_options {
	const char *path;     /* database file; missing parent directories are created 0700 */
	int threshold;        /* 0: keep the stored value (default 2 on a new db) */
	int max_quarantined;  /* -1: keep the stored value (default 0 = no cap) */
	const char *vfs_name; /* SQLite VFS to use (tests inject faults); NULL = default */
};

/* Open (creating if needed: "Lost database" above) the database.  Returns 0
 * with *ret set even when the database is unusable: the store is then
 * unavailable (store_status() says why) and serves nothing until
 * store_repair() succeeds.  Fails only on bad options (-EINVAL), -ENOMEM,
 * or -EBUSY when another process holds the database (its lock file, or the
 * database file under any name). */
int store_open(const struct store_options *opt, struct store **ret);
void store_close(struct store *s);


/* -- availability -------------------------------------------------------- */

/* true when available.  When unavailable and reason is non-NULL, copies the
 * human-readable reason (e.g. "commit failed: database or disk is full"). */
bool store_status(struct store *s, char *reason, size_t reason_size);

/* Retry: reopen if the open failed, else prove that a write commits.  0 when
 * the store is available afterwards (also when it already was), else -EIO
 * and the reason is updated. */
int store_repair(struct store *s);

/* The retry of a placement-facing read: store_repair(), but at most once a
 * second for the whole store (-EIO at once within that second).  0 when
 * available.  Call it only for a reader who may write. */
int store_retry_for_read(struct store *s);

/* -- change notification -------------------------------------------------- */

enum store_change_bits {
	STORE_CHANGE_VFS = 1 << 0,        /* a VF registered or unregistered */
	STORE_CHANGE_FAILURES = 1 << 1,   /* vf's tally/failures changed */
	STORE_CHANGE_QUARANTINE = 1 << 2, /* vf's quarantine bit changed */
	STORE_CHANGE_CLAIMS = 1 << 3,     /* a claim on vf was made or released */
	STORE_CHANGE_THRESHOLD = 1 << 4,
	STORE_CHANGE_MAX_QUARANTINED = 1 << 5,
	STORE_CHANGE_STATUS = 1 << 6,     /* availability changed */
	STORE_CHANGE_BREAKER = 1 << 7,    /* breaker engaged/disengaged */
};

struct store_change {
	unsigned bits;
	char vf[VF_ADDR_BUFSZ];                /* "" when not about one VF */
	char instance_id[INSTANCE_ID_MAX + 1];  /* for STORE_CHANGE_CLAIMS */
};

/* Called once per changed object after the change is durable, from the
 * thread that committed it, with no store lock held.  It must not block and
 * must not call a store function that changes state (the committing thread
 * would wait on itself); reading is allowed.  The filesystem queues the
 * change for its notifier thread.  Set before use. */
typedef void (*store_change_fn)(void *userdata, const struct store_change *change);
void store_set_change_callback(struct store *s, store_change_fn fn, void *userdata);

/* -- VFs ------------------------------------------------------------------ */

/* -EEXIST when registered, -EMLINK once VFS_MAX are (grammar/limits.h). */
int store_vf_register(struct store *s, const char *vf);
int store_vf_unregister(struct store *s, const char *vf);

struct store_vf_info {
	char vf[VF_ADDR_BUFSZ];
	uint64_t id;         /* stable, never reused: names the VF's inodes */
	unsigned tally;      /* recorded failures */
	bool quarantined;
	bool manual;         /* quarantined with no failure behind it */
	bool claimed;        /* has a live claim */
};

/* One VF.  -ENOENT when not registered; -EIO when unavailable after a retry
 * (its quarantine bit is a placement-facing read). */
int store_vf_get(struct store *s, const char *vf, struct store_vf_info *ret);
/* The same for a reader who may not write: never retries (-EIO at once). */
int store_vf_get_noretry(struct store *s, const char *vf, struct store_vf_info *ret);

/* The same from memory, for resolving names (a path lookup, an inode):
 * never retries or repairs, served while unavailable.  NOT placement-facing:
 * placement must read the quarantine bit through store_vf_get(), which fails
 * closed.  -EINVAL for a bad address, -ENOENT when not registered, -EIO only
 * when the database could never be loaded. */
int store_vf_lookup(struct store *s, const char *vf, struct store_vf_info *ret);

/* Look a VF up by its id (for inode numbers).  Served while unavailable. */
int store_vf_get_by_id(struct store *s, uint64_t id, struct store_vf_info *ret);

/* All registered VFs, sorted by address; *ret is malloc'd, free() it.
 * Served while unavailable (the set of VFs is not a placement decision). */
int store_vf_list(struct store *s, struct store_vf_info **ret, size_t *count);

/* The quarantined VFs, sorted.  Placement-facing: retries, then -EIO. */
int store_quarantined_list(struct store *s, char (**ret)[VF_ADDR_BUFSZ], size_t *count);
int store_quarantined_list_noretry(struct store *s, char (**ret)[VF_ADDR_BUFSZ], size_t *count);

struct store_failure {
	char reported_at[RFC3339_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char assigned_at[RFC3339_BUFSZ]; /* "" when unknown */
	char message[FAILURE_MESSAGE_MAX + 1];
};

/* The failures of one VF, oldest first; *ret malloc'd. */
int store_failure_list(struct store *s, const char *vf, struct store_failure **ret,
		       size_t *count);

/* -- settings ------------------------------------------------------------- */

int store_threshold_get(struct store *s);
int store_threshold_set(struct store *s, int threshold);
int store_max_quarantined_get(struct store *s);
int store_max_quarantined_set(struct store *s, int max_quarantined); /* >= 0, <= VFS_MAX */

/* -- reports -------------------------------------------------------------- */

enum store_outcome {
	STORE_OUTCOME_UNCHANGED,
	STORE_OUTCOME_RECORDED,
	STORE_OUTCOME_QUARANTINED,
};
const char *store_outcome_name(enum store_outcome o); /* "unchanged", ... */

struct store_failure_result {
	enum store_outcome outcome;
	unsigned tally;
	int threshold;
	bool breaker_engaged; /* this report would have quarantined but hit the cap */
};

/* assigned_at: canonical RFC 3339 (see rfc3339_normalize) or "" / NULL when
 * unknown.  message: truncated to FAILURE_MESSAGE_MAX bytes; control
 * characters are replaced by spaces.  -EINVAL for a bad vf, instance_id or
 * assigned_at; -ENOENT for an unknown VF; -EIO when it would change state
 * while unavailable. */
int store_report_failure(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, const char *message,
			 struct store_failure_result *ret);

struct store_success_result {
	unsigned cleared;
	bool rescinded;
};

int store_report_success(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, struct store_success_result *ret);

/* -- operator actions ----------------------------------------------------- */

int store_quarantine_manual(struct store *s, const char *vf); /* no-op if quarantined */
int store_clear(struct store *s, const char *vf);             /* no-op if clean */

/* -- claims --------------------------------------------------------------- */

struct store_claim {
	char vf[VF_ADDR_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char claimed_at[RFC3339_BUFSZ];       /* canonical; stamped when "" */
	char agent[AGENT_ENDPOINT_MAX + 1];   /* agent endpoint, "" when none */
	char control[CONTROL_PATH_MAX + 1];   /* VMM control socket path, "" when none */
	int64_t pid;                          /* VMM pid, 0 when none */
	uint64_t pid_starttime;               /* /proc/PID/stat field 22 at claim, 0 when unknown */
	uint64_t id;                          /* stable, never reused: names the inode */
};

/* Claim c->vf for c->instance_id.  On success, when ret is non-NULL, it
 * receives the stored claim (with claimed_at stamped and id set).  The
 * caller validates agent/control syntax; the store checks lengths. */
int store_claim(struct store *s, const struct store_claim *c, struct store_claim *ret);

/* Update the attributes (agent, control, pid, pid_starttime) of a live claim.
 * When c->claimed_at is non-empty and differs, it replaces the assignment
 * identity: the filesystem allows that only on the first write through the
 * handle that created the claim (create stamps, the write that follows may
 * name the VMM's own time).  -ENOENT when not held. */
int store_claim_update(struct store *s, const struct store_claim *c);

/* Release a live claim (it moves to history). -ENOENT when not held. */
int store_release(struct store *s, const char *vf, const char *instance_id);

/* The conditional release: release the live claim of vf by instance_id only
 * if its claimed_at (canonical) is claimed_at; -ESTALE when it is another
 * (released and re-claimed meanwhile: the newer claim stays), -ENOENT when
 * not held. */
int store_release_if(struct store *s, const char *vf, const char *instance_id,
		     const char *claimed_at);

/* The live claim of vf by instance_id (placement-facing: retries, then -EIO).
 * -ENOENT when none. */
int store_claim_get(struct store *s, const char *vf, const char *instance_id,
		    struct store_claim *ret);
int store_claim_get_noretry(struct store *s, const char *vf, const char *instance_id,
			    struct store_claim *ret);

/* The same from memory, for resolving names: never retries or repairs,
 * served while unavailable; NOT placement-facing (use store_claim_get()).
 * -EINVAL for a bad vf or instance id, -ENOENT when no such live claim, -EIO
 * only when the database could never be loaded. */
int store_claim_lookup(struct store *s, const char *vf, const char *instance_id,
		       struct store_claim *ret);

/* Look a live claim up by id (for inode numbers); served while unavailable. */
int store_claim_get_by_id(struct store *s, uint64_t id, struct store_claim *ret);

/* Live claims: of one VF (vf non-NULL) or all (vf NULL), sorted by vf then
 * instance; *ret malloc'd.  Served while unavailable. */
int store_claim_list(struct store *s, const char *vf, struct store_claim **ret, size_t *count);

/* -- counters for metrics and resources ------------------------------------ */

struct store_stats {
	size_t vfs;
	size_t quarantined;
	size_t claimed;       /* VFs with a live claim */
	size_t allocatable;   /* neither quarantined nor claimed; 0 while unavailable */
	bool available;
	bool breaker_engaged; /* a report was held back by the cap and the cap is still reached */
	/* reports since open, by kind and outcome */
	uint64_t failed_reports[3]; /* indexed by enum store_outcome */
	uint64_t ok_reports_cleared;   /* success reports that cleared something */
	uint64_t ok_reports_noop;      /* success reports that changed nothing */
	uint64_t commits;              /* durable transactions since open */
	uint64_t commit_failures;
	uint64_t repairs;              /* store_repair() attempts on an unavailable store */
};

void store_get_stats(struct store *s, struct store_stats *ret);

#endif
