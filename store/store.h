/* SPDX-License-Identifier: MIT */
/*
 * store.h - the health store's public contract: the one module that owns
 * SQLite.  Its files (store/) split by concern; store-internal.h says which
 * file owns what.
 *
 * The store keeps, for every registered VF (an SR-IOV virtual function named
 * by its PCI address), the failed assignments reported against it, whether it
 * is quarantined or held by the operator, and the claims that hand it to
 * instances.  It decides
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
 *                 Unregistering one that is out of service, has failures
 *                 or holds a live claim: -EBUSY.
 *
 *  Out of service a VF is out of service when it is automatically
 *                 quarantined (by failures) or held by the operator: two
 *                 separate bits, so neither lifts the other.  Placement
 *                 sees one bit, out of service (store_vf_info.quarantined,
 *                 store_quarantined_list); claims are refused.  The store
 *                 keeps the time it went out of service (`since`, RFC 3339
 *                 UTC with nanoseconds) until it is back in service: a hold
 *                 on a quarantined VF, or a quarantine lifted under a hold,
 *                 keeps the first time.
 *
 *  Threshold      an integer 1..1000 (else -EINVAL), default 2, stored in the
 *                 database.  Setting it, or opening with a configured value
 *                 that differs from the stored one, re-evaluates every VF: a
 *                 VF whose tally meets the new threshold is quarantined, and
 *                 that is persisted in the same transaction.  Raising the
 *                 threshold never lifts a quarantine.
 *
 *  Failure report (vf, instance_id, assigned_at, message) -> outcome, tally:
 *                 - VF out of service (quarantined or held): UNCHANGED;
 *                 - (instance_id, assigned_at) already recorded for this VF:
 *                   UNCHANGED (polling is idempotent across restarts);
 *                 - else the failure is appended with the time it was
 *                   reported and the message; if the tally now meets the
 *                   threshold the VF is quarantined: QUARANTINED, else
 *                   RECORDED.  The tally is the number of recorded failures.
 *                 A quarantine or a hold-back also names the instances
 *                 behind it (the caller's log line).  Test: failure_dedupe.
 *
 *  Success report (vf, instance_id, assigned_at) -> (cleared, rescinded):
 *                 - a suspect VF is suspect no longer (whatever else);
 *                 - no recorded failures and not suspect: (0, false), on a
 *                   fast path that
 *                   takes no write transaction and no lock that claims or
 *                   failure reports hold, and that succeeds even while the
 *                   store is unavailable;
 *                 - no failure recorded with exactly this (instance_id,
 *                   assigned_at): (0, false);
 *                 - else the matching failure and every older one are removed
 *                   (cleared = how many); if none remain the automatic
 *                   quarantine is lifted; if some remain it stays.
 *                   rescinded = the VF is back in service: its quarantine
 *                   was lifted and it is not held.
 *                 - no success ever lifts an operator hold.
 *
 *  Operator       store_quarantine_manual(): set the operator hold, also on
 *                 an automatically quarantined VF (a no-op only when held);
 *                 no failure is recorded.  store_clear(): lift the hold and
 *                 the automatic quarantine and drop every failure (the last
 *                 step of the recovery runbook); a no-op on a VF with none
 *                 of them.  Both report what they found (struct
 *                 store_operator_result), so the caller logs what changed
 *                 without asking again.  Test: operator_clear.
 *
 *  Claims         at most one live claim per VF.  Claiming a VF out of
 *                 service (in enforce mode), or one another instance
 *                 holds: -EBUSY.  Claiming a VF the
 *                 same instance already holds: -EEXIST.  claimed_at is the
 *                 assignment identity, RFC 3339 UTC with nanoseconds; the
 *                 store stamps it when the caller gives none.  Released
 *                 claims stay in the database as history, with how they
 *                 ended and who released them.  A conditional
 *                 release names the claimed_at it releases: another one
 *                 (released and claimed again meanwhile) is -ESTALE.
 *
 *  Reservations   a claim in two steps, so that a claim exists only once
 *                 it is valid: store_claim_reserve() answers like a claim
 *                 (-EBUSY, -EEXIST, -EIO while unavailable) at once and
 *                 holds the VF in memory only: nothing durable, no history
 *                 row, no change announced.  store_claim_commit() makes it
 *                 the claim (one transaction, one change);
 *                 store_claim_cancel() drops it and nothing is left.  A
 *                 reservation refuses other claims and reservations of its
 *                 VF like a claim, blocks unregistering (-EBUSY), and counts
 *                 as claimed wherever placement reads (store_vf_info.claimed,
 *                 store_stats: fail closed).  It is visible by name like a
 *                 claim (store_claim_get/list/get_by_id, with `reserved`
 *                 set and its stamped claimed_at), so whoever holds the
 *                 name can reopen it; releasing it (store_release, also
 *                 naming its claimed_at) cancels it.  Commits and cancels of a reservation are
 *                 ordered: a commit after a cancel is -ENOENT, a second
 *                 commit -EALREADY.  A reservation is a claim for every
 *                 rule that runs after it is made: a hold, a quarantine
 *                 or a switch to enforce refuses no commit
 *                 (rule_commit_refusal), as it ends no live claim.  A
 *                 reservation whose creator is gone (store_claim_abandon)
 *                 while the store cannot commit stays, excluding its VF,
 *                 and is committed once the store is available again
 *                 (store_repair); a restart forgets it, like every
 *                 reservation.  Its states (held, kept) and every
 *                 transition: rule_reservation_next() (rules.h).  Tests:
 *                 claims_reservation, claims_bare_kept_while_unavailable,
 *                 reservation_transitions.
 *
 *  Claim identity (instance, claimed_at) is never reused on a VF: a
 *                 claimed_at the writer gives (a commit's or an update's
 *                 that differs from the stamp) must be later than every
 *                 other claim's of that VF, live or past, else -EINVAL
 *                 (rule_claimed_at_refusal).  Test:
 *                 claims_identity_never_reused.
 *
 *  Watched        a claim naming agent= also names pid= and/or control=,
 *                 else -EINVAL (rule_claim_watch_refusal): the sentinel
 *                 dials no agent without its VMM's liveness.  A claim
 *                 without agent= only excludes its VF (rule_claim_watched).
 *                 Test: claims_watch_rule.
 *
 *  Mode           enforce (the default) or observe, stored in the database.
 *                 In observe mode every rule runs and every state is what
 *                 enforcement would make it, but claims are not refused for
 *                 being out of service (rule_claim_refusal).  Switching to
 *                 enforce refuses such claims from then on; live claims stay.
 *
 *  History        cleared failures are kept (when, by which uid, why: a
 *                 success, the operator, or dropped over FAILURES_PER_VF_MAX)
 *                 and seen by no rule; store_history_list() shows a VF's
 *                 claims and failures, live and past.
 *
 *  Breaker        an optional cap on the number of automatically
 *                 quarantined VFs (0 = no cap, the default); operator holds
 *                 neither count against it nor are refused by it, so
 *                 draining VFs never lets a real wedge through.  A failure
 *                 report that would quarantine beyond the cap is recorded
 *                 (RECORDED) but does not quarantine, and the result says
 *                 the breaker is engaged.  A systemic guest/host driver
 *                 mismatch must not drain a whole host.  A VF is "held
 *                 back" when it is in service (neither quarantined nor
 *                 held) and its tally meets the threshold (only the cap
 *                 causes that); store_held_back_list() lists them.  The
 *                 breaker is engaged while the cap is reached and a
 *                 held-back VF exists.  Changing the cap re-evaluates like
 *                 the threshold (oldest registration first).
 *
 *  Parent GPU     each VF may name its physical function (a PCI address,
 *                 the VF address rule; "" while unknown), always what
 *                 sysfs says: given at registration (the filesystem reads
 *                 the VF's sysfs `physfn` link) or set once later
 *                 (store_vf_set_parent: setting the value it already has
 *                 changes nothing; a different value, once one is set,
 *                 -EBUSY; a VF as its own parent, or a bad address,
 *                 -EINVAL); store_gpu_adopt replaces it with what a GPU's
 *                 virtfn links say, before a drain or a cycle.
 *
 *  Placement      the allocatable VFs are those a claim may take now:
 *                 registered, in service (state ok, failing, suspect,
 *                 probation or held-back), unclaimed, and of a serving
 *                 GPU.  store_allocatable_list() orders them by the VF's
 *                 own evidence first (rule_placement_group): clean, then
 *                 suspect or on probation ("Probation"), then failing
 *                 (failures on record below the threshold; also when
 *                 suspect), then held-back; and
 *                 within each by its parent GPU (rule_placement_parent_rank):
 *                 parents with fewer VFs out of service first, a parent
 *                 with none, then an unknown parent, then one with one
 *                 out, two out, ...  The order among equals is drawn at
 *                 random for each read (getrandom(2); placement.h).  In
 *                 observe mode every unclaimed VF of a serving GPU is
 *                 allocatable: those enforcement would refuse rank with
 *                 the held-back ones.  Tests: allocatable_order;
 *                 test-rules.c placement_groups, placement_parents,
 *                 placement_shuffle; tests/fs/test-placement.sh.
 *
 *  GPUs           a parent GPU is any parent a registered VF names.  A
 *                 drain (store_gpu_drain) is the operator's, persisted:
 *                 from the commit on, every VF of the GPU refuses new
 *                 claims and reservations (-EBUSY, in observe mode too: it
 *                 is no judgement of health) and leaves the allocatable
 *                 list and store_stats.allocatable; live claims and
 *                 reservations stay.  A claim racing the drain either
 *                 holds its reservation before the drain is applied (it
 *                 lives) or is refused.  The GPU reads `draining` while a
 *                 VF of it has a claim or reservation, `drained` when none
 *                 has, `serving` once the drain ends.  A drain is no
 *                 quarantine: no VF's bits, tally or the breaker's count
 *                 change.  Each start and end is kept in the GPU's history
 *                 with who asked.  A phase in the database this code does
 *                 not write fails the open (unavailable).  Tests:
 *                 gpu_drain_refuses_claims, gpu_drain_persisted,
 *                 gpu_drain_unknown_phase_fails_closed.
 *
 *  Recovery       a drained GPU's SR-IOV cycle: recovering, then serving
 *                 (every VF cleared) or failed.  The phases and their
 *                 transitions are one table, rule_gpu_next (rules.h).  A
 *                 GPU that is recovering or failed refuses claims and
 *                 stays out of placement like a drained one; the check
 *                 that no claim lives on it and that no other GPU
 *                 recovers is made inside the commit that marks it
 *                 recovering, so a claim racing it is refused.  A restart
 *                 never resumes a cycle: store_gpu_fail_interrupted.
 *                 Tests: gpu_recover_cycle, gpu_recover_refused,
 *                 gpu_recover_one_at_a_time, gpu_recover_interrupted;
 *                 test-rules.c gpu_transitions.
 *
 *  State          each VF's state, derived: held (an operator hold, whatever
 *                 else), quarantined (automatically), held-back, suspect,
 *                 probation, failing (failures on record below the threshold), ok.
 *
 *  Suspect        a claim released with `crashed` (its VMM died: the
 *                 sentinel found it dead, or its manager says so) whose
 *                 death falls within the init window after its claimed_at
 *                 (rule_crash_suspect: died_at - claimed_at <= window,
 *                 window > 0) makes its VF suspect, with a history entry
 *                 (which claim, when it died) and `since`.  A plain release
 *                 never does.  A suspect VF stays in service and claimable:
 *                 no threshold, no breaker count; placement ranks it after
 *                 the clean and degraded-parent groups, before the
 *                 held-back ones.  It ends (the history says why) with the
 *                 next success report on the VF (`ok:INSTANCE`), the
 *                 operator's store_clear (`operator`), or a quarantine
 *                 (`quarantined`: confirmed); a second crash while suspect
 *                 changes nothing.  Persisted (table suspects).  Tests:
 *                 suspect_lifecycle, migrate_v3_to_v4; test-rules.c
 *                 crash_suspect.
 *
 *  Probation      a VF the GPU's SR-IOV cycle cleared (store_gpu_recover_end
 *                 with ok: its quarantine, failures or suspicion ended) is
 *                 on probation from that commit on, with a history entry:
 *                 the cycle may not have cured its wedge.  It ranks with
 *                 the suspect VFs in placement (rule_placement_group), and
 *                 its first failure report quarantines it whatever the
 *                 threshold (rule_after_failure), ending the probation
 *                 (`quarantined`); at the max_quarantined cap the failure
 *                 is recorded and it stays in service on probation.  It
 *                 ends too with a success report of an assignment made
 *                 after it began (`ok:INSTANCE`) and with the operator's
 *                 store_clear (`operator`: the operator vouches for the
 *                 VF).  Persisted (table probations).  Tests:
 *                 probation_lifecycle, probation_at_cap, migrate_v7_to_v8;
 *                 test-rules.c
 *                 placement_groups, after_failure.
 *
 *  Durability     every acknowledged mutation is committed durably before the
 *                 call returns (WAL, synchronous=FULL, BEGIN IMMEDIATE).
 *                 Concurrent writers are grouped into one transaction and one
 *                 fsync (group commit); each is acknowledged only after that
 *                 commit.  A failure report submitted while a commit is
 *                 under way (store_report_failure_submit) joins the next
 *                 batch without its caller waiting, and is answered once,
 *                 after that batch's commit, by the store's answerer
 *                 thread; close answers every one still queued.  Tests:
 *                 group_commit, reports_join_the_commit_under_way,
 *                 joined_reports_fail_with_their_batch.  application_id and user_version version the
 *                 schema; a newer schema is refused with a clear reason; an
 *                 older one is migrated at open, keeping its data (version
 *                 1: a manual quarantine becomes an operator hold;
 *                 version 2: every VF's parent is unknown; version 3: no
 *                 VF is suspect).
 *
 *  Fail closed    a failed commit (disk full, I/O error, read-only file,
 *                 corruption) latches the store unavailable with a
 *                 human-readable reason.  While latched: calls that would
 *                 change state fail with -EIO; calls that would change
 *                 nothing still succeed; placement-facing reads (the
 *                 lists, store_vf_get, store_claim_get) read
 *                 STORE_READ_RETRY first retry (store_retry_for_read: a
 *                 store_repair at most once a second for the whole store)
 *                 and then fail with -EIO; read STORE_READ_NORETRY, for
 *                 readers who may not write, they fail at once and never
 *                 repair.  Name lookups (STORE_READ_MEMORY) are not
 *                 placement-facing: they are answered from memory, never
 *                 retry, and work while latched.  Tests:
 *                 fail_closed_disk_full, read_retries_rate_limited,
 *                 lookups_served_while_unavailable.  store_repair() retries and clears the latch
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
 *  Its files      before and after each group commit, and from placement
 *                 reads at most once a second (no thread of its own), the
 *                 store checks that the database file and its WAL are still
 *                 linked and are the files at their paths (st_nlink;
 *                 st_dev/st_ino against a stat of the path; the stats are
 *                 skipped while nothing the paths resolve through changed:
 *                 store/files-watch.c).  Otherwise the
 *                 commit fails with -EIO (nothing is acknowledged that a
 *                 restart would not find), the store latches unavailable
 *                 with the file and what happened as the reason, and when
 *                 only the WAL is gone its content is checkpointed into the
 *                 database file first.  store_repair() refuses while the
 *                 files are not the store's (restart).  PATH "-lock" is
 *                 opened O_NOFOLLOW (common/safefile.h), and a database
 *                 directory writable by group or others is refused: the
 *                 store opens unavailable with the reason.  Tests:
 *                 tests/adversarial/vanished-files.sh, lock-symlink.sh;
 *                 files_moved_then_repaired.
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

#include "grammar/assignment.h"
#include "grammar/limits.h"
#include "grammar/vf.h" /* the VF address rule the store enforces */
#include "common/parse.h"

/* Every limit of the interface is grammar/limits.h's; the store adds only: */
#define STORE_REASON_MAX 512
#define INIT_WINDOW_MAX_S 86400  /* a day: longer is no init window */
#define INIT_WINDOW_DEFAULT_S 60 /* vfhealthd --init-window */

struct store;

struct store_options {
	const char *path;       /* database file; missing parent directories are created 0700 */
	int threshold;          /* 0: keep the stored value (default 2 on a new db) */
	int max_quarantined;    /* -1: keep the stored value (default 0 = no cap) */
	const char *vfs_name;   /* SQLite VFS to use (tests inject faults); NULL = default */
	int64_t init_window_ns; /* the init window ("Suspect" above), nanoseconds, at
				 * most INIT_WINDOW_MAX_S seconds; 0: off */
};

/* Open (creating if needed: "Lost database" above) the database.  Returns 0
 * with *ret set even when the database is unusable: the store is then
 * unavailable (store_status() says why) and serves nothing until
 * store_repair() succeeds.  Fails only on bad options (-EINVAL), -ENOMEM,
 * or -EBUSY when another process holds the database (its lock file, or the
 * database file under any name). */
int store_open(const struct store_options *opt, struct store **ret);
void store_close(struct store *s);

/* The version of the database engine (SQLite) the store runs with. */
const char *store_engine_version(void);

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
	STORE_CHANGE_STATUS = 1 << 6,    /* availability changed */
	STORE_CHANGE_BREAKER = 1 << 7,   /* breaker engaged/disengaged */
	STORE_CHANGE_HELD_BACK = 1 << 8, /* the set of held-back VFs changed */
	STORE_CHANGE_PARENT = 1 << 9,    /* vf's parent GPU was set */
	STORE_CHANGE_MODE = 1 << 10,     /* enforce <-> observe */
	STORE_CHANGE_FAILING = 1 << 11,  /* vf's tally went between 0 and not (ok <-> failing) */
	STORE_CHANGE_GPU = 1 << 12,      /* a GPU's phase changed (names no VF; parent) */
	STORE_CHANGE_SUSPECT = 1 << 13,  /* vf's suspicion or probation began or ended */
	STORE_CHANGE_AUTO_RECOVER = 1 << 14,
	/* vf's reservation was cancelled: what it excluded is free again.  The
	 * reservation itself was never announced, so files that list claims
	 * or allocatable VFs show what they showed before it; a GPU's state
	 * may not (draining -> drained) */
	STORE_CHANGE_RESERVATION = 1 << 15,
};

struct store_change {
	unsigned bits;          /* enum store_change_bits, or'ed */
	char vf[VF_ADDR_BUFSZ]; /* "" when not about one VF */
	/* vf's id (store_vf_info.id, which names its inodes), taken when the
	 * change was applied; 0 when the change names no VF or the VF is no
	 * longer registered.  Test: change_subscribers. */
	uint64_t vf_id;
	char instance_id[INSTANCE_ID_MAX + 1]; /* for STORE_CHANGE_CLAIMS */
	/* The parent GPU whose gpus/PF/ files the change is about: for a change
	 * of one VF that VF's parent (the new one when it was set), for
	 * STORE_CHANGE_GPU the GPU; "" when unknown or for every GPU (a change
	 * of every VF, a load).  Test: change_names_parent. */
	char parent[VF_ADDR_BUFSZ];
};

/* A subscriber to the store's changes.  Each is called once per changed
 * object after the change is durable, in the order they subscribed, from
 * the thread that committed it, with no store lock held.  It must not block
 * and must not call a store function that changes state (the committing
 * thread would wait on itself); reading is allowed.  vfhealthd's
 * composition root (daemon/main.c) subscribes the filesystem's notifier,
 * the recovery thread and its status notification. */
typedef void (*store_change_fn)(void *userdata, const struct store_change *change);

#define STORE_SUBSCRIBERS_MAX 4

/* Add (fn, userdata) to the subscribers: 0, -EEXIST when it is one
 * already, -ENOSPC when STORE_SUBSCRIBERS_MAX are, -EINVAL without s or fn.
 * The list is not locked: subscribe before any thread that may change the
 * store starts, and unsubscribe (a no-op when it is none, or s is NULL)
 * after every such thread stopped.  Test: change_subscribers. */
int store_subscribe(struct store *s, store_change_fn fn, void *userdata);
void store_unsubscribe(struct store *s, store_change_fn fn, void *userdata);

/* -- VFs ------------------------------------------------------------------ */

/* Register vf with its parent GPU (NULL or "": unknown).  -EEXIST when
 * registered, -EMLINK once VFS_MAX are (grammar/limits.h), -EINVAL for a
 * bad address or parent, or the VF as its own parent. */
int store_vf_register(struct store *s, const char *vf, const char *parent);
int store_vf_unregister(struct store *s, const char *vf);

/* A registered VF sysfs no longer shows while a claim or its record keeps
 * it registered (recovery/register.c): absent, it leaves the allocatable
 * list and store_stats.allocatable, and new claims and reservations of it
 * are refused (-EBUSY), in any mode; a live claim stays.  Memory only,
 * like a reservation (kept across store_repair): the caller says it again
 * after a restart.  *changed (may be NULL): it was not so before; a change
 * is announced as STORE_CHANGE_VFS.  -EINVAL, -ENOENT.  Tests: vf_absent
 * (test-store-vf.c), tests/fs/test-register.sh. */
int store_vf_set_absent(struct store *s, const char *vf, bool absent, bool *changed);

/* Set the parent GPU once ("Parent GPU" above): 0 (*unchanged, when
 * non-NULL, says it already was that parent), -EBUSY when another is set,
 * -EINVAL, -ENOENT, -EIO.  Test: parent_set_once_persisted. */
int store_vf_set_parent(struct store *s, const char *vf, const char *parent, bool *unchanged);

enum store_vf_state {
	STORE_VF_OK,
	STORE_VF_FAILING,     /* failures on record, below the threshold */
	STORE_VF_QUARANTINED, /* automatically, by failures */
	STORE_VF_HELD,        /* by the operator (whether quarantined or not) */
	STORE_VF_HELD_BACK,   /* meets the threshold; the breaker keeps it in service */
	STORE_VF_SUSPECT,     /* in service; its last VMM died in its init window */
	STORE_VF_PROBATION,   /* in service; back from its GPU's cycle, no OK since */
};
/* "ok", "failing", "quarantined", "held", "held-back", "suspect", "probation" */
const char *store_vf_state_name(enum store_vf_state state);

struct store_vf_info {
	char vf[VF_ADDR_BUFSZ];
	uint64_t id;           /* stable, never reused: names the VF's inodes */
	unsigned tally;        /* recorded failures */
	bool quarantined;      /* out of service (auto_quarantined or held): placement's bit */
	bool auto_quarantined; /* quarantined by failures (counts against the cap) */
	bool held;             /* held by the operator */
	enum store_vf_state state;
	char since[RFC3339_BUFSZ];  /* when it went out of service, or became suspect
				    * while in service; "" otherwise */
	bool suspect;               /* "Suspect" above; in service or not */
	bool probation;             /* "Probation" above; in service or not */
	bool claimed;               /* has a live claim or a reservation */
	char parent[VF_ADDR_BUFSZ]; /* the physical function; "" when unknown */
};

/* How a read is answered ("Fail closed" above).  Placement must read the
 * quarantine bit, the lists and the claims it decides on with RETRY or
 * NORETRY, which fail closed; MEMORY is for resolving names (a path lookup,
 * an inode) and never for placement.  The filesystem picks the value in one
 * place, from the reader's rights. */
enum store_read {
	STORE_READ_NORETRY, /* placement-facing, for a reader who may not write:
			     * -EIO at once while latched, never repairs (the
			     * zero value: a read repairs only when asked to) */
	STORE_READ_RETRY,   /* placement-facing, for a reader who may write: a
			     * latched store is retried (store_retry_for_read),
			     * then -EIO */
	STORE_READ_MEMORY,  /* from memory: never retries or repairs, served while
			     * unavailable; -EIO only when the database could
			     * never be loaded */
};

/* One VF, read as `how` says.  -EINVAL for a bad address or `how`, -ENOENT
 * when not registered, -EIO (see enum store_read).  Test:
 * lookups_served_while_unavailable, fail_closed_disk_full. */
int store_vf_get(struct store *s, const char *vf, enum store_read how, struct store_vf_info *ret);

/* One VF by its id (an inode number), from memory (STORE_READ_MEMORY). */
int store_vf_get_by_id(struct store *s, uint64_t id, struct store_vf_info *ret);

/* All registered VFs, sorted by address; *ret is malloc'd, free() it.
 * Served while unavailable (the set of VFs is not a placement decision). */
int store_vf_list(struct store *s, struct store_vf_info **ret, size_t *count);

/* The VFs out of service (quarantined or held), sorted; *ret malloc'd.
 * Placement-facing: `how` RETRY or NORETRY. */
int store_quarantined_list(struct store *s, enum store_read how, char (**ret)[VF_ADDR_BUFSZ],
			   size_t *count);

/* The held-back VFs (in service only because of the breaker), sorted.
 * Placement-facing (placement ranks them last). */
int store_held_back_list(struct store *s, enum store_read how, char (**ret)[VF_ADDR_BUFSZ],
			 size_t *count);

/* The placement groups, the VF's own evidence, in placement order
 * ("Placement" above). */
enum store_placement_group {
	STORE_PLACE_CLEAN,     /* no evidence against it */
	STORE_PLACE_SUSPECT,   /* a VMM died on it in its init window */
	STORE_PLACE_FAILING,   /* failed assignments on record, below the threshold */
	STORE_PLACE_HELD_BACK, /* in service only because of the breaker */
	STORE_PLACE_NONE,      /* not allocatable: out of service or claimed */
};

struct store_placement {
	char vf[VF_ADDR_BUFSZ];
	enum store_placement_group group; /* never STORE_PLACE_NONE here */
	unsigned parent_rank;             /* rule_placement_parent_rank(): lower first */
};

/* The allocatable VFs in placement order: by group, then by parent rank,
 * the order among equals drawn for this read; *ret malloc'd.  Placement-facing; -EIO also
 * when no random seed can be had. */
int store_allocatable_list(struct store *s, enum store_read how, struct store_placement **ret,
			   size_t *count);

struct store_failure {
	char reported_at[RFC3339_BUFSZ];
	char instance_id[INSTANCE_ID_MAX + 1];
	char assigned_at[RFC3339_BUFSZ]; /* "" when unknown */
	char message[FAILURE_MESSAGE_MAX + 1];
};

/* The failures of one VF, oldest first; *ret malloc'd. */
int store_failure_list(struct store *s, const char *vf, struct store_failure **ret, size_t *count);

/* -- settings ------------------------------------------------------------- */

int store_threshold_get(struct store *s);
int store_threshold_set(struct store *s, int threshold);
int store_max_quarantined_get(struct store *s);
int store_max_quarantined_set(struct store *s, int max_quarantined); /* >= 0, <= VFS_MAX */
/* How many VFs of one GPU out of service by automatic quarantine start its
 * recovery; 0: off (the default).  Persisted; 0 ... AUTO_RECOVER_MAX. */
#define AUTO_RECOVER_MAX 256
int store_auto_recover_get(struct store *s);
int store_auto_recover_set(struct store *s, int n);

enum store_mode {
	STORE_MODE_ENFORCE, /* out of service refuses claims (the default) */
	STORE_MODE_OBSERVE, /* every rule runs; no claim is refused for it */
};
const char *store_mode_name(enum store_mode mode); /* "enforce", "observe" */
/* The mode (>= 0) or -EIO when the database could never be loaded. */
int store_mode_get(struct store *s);
int store_mode_set(struct store *s, enum store_mode mode); /* -EINVAL for another value */

/* -- history -------------------------------------------------------------- */

enum store_history_kind {
	STORE_HISTORY_CLAIM,
	STORE_HISTORY_FAILURE,
	STORE_HISTORY_HOLD,
	STORE_HISTORY_SUSPECT,
	STORE_HISTORY_PROBATION, /* at: when it began; how: why it ended */
};

/* The why of a cleared failure, the how of an ended claim: one word. */
#define STORE_HISTORY_WORD_MAX (16 + INSTANCE_ID_MAX)

struct store_history_entry {
	enum store_history_kind kind;
	char at[RFC3339_BUFSZ]; /* claimed_at, a failure's reported_at, held_at, or
					   * when the VF became suspect */
	char instance_id[INSTANCE_ID_MAX + 1];
	char assigned_at[RFC3339_BUFSZ];       /* failures: "" when unknown; suspect: the
					   * claimed_at of the claim whose VMM died */
	char died_at[RFC3339_BUFSZ];           /* suspect: when its VMM was known dead */
	int64_t died_after_ms;                 /* suspect: died_at - the claim's claimed_at */
	char ended_at[RFC3339_BUFSZ];          /* released_at / cleared_at; "" while live */
	int64_t started_by;                    /* holds: the uid that held it; -1 when not known */
	char how[STORE_HISTORY_WORD_MAX + 1];  /* claims: how it ended; failures, suspect:
					       * why cleared; "" while live or when not
					       * recorded */
	int64_t by;                            /* the uid that ended it; -1 when not known */
	char message[FAILURE_MESSAGE_MAX + 1]; /* failures */
};

/* A VF's claims, failures and operator holds, live and past, oldest first
 * (by claimed_at, reported_at or held_at): the newest `max` of them in *ret (malloc'd, free() it), how
 * many older ones were left out in *dropped.  Read from SQLite through the
 * listing connection like store_failure_list().  -ENOENT: not registered. */
int store_history_list(struct store *s, const char *vf, size_t max,
		       struct store_history_entry **ret, size_t *count, size_t *dropped);

/* -- GPUs ("GPUs" above) -------------------------------------------------- */

enum store_gpu_state {
	STORE_GPU_SERVING,
	STORE_GPU_DRAINING, /* drained, with a claim or reservation left on it */
	STORE_GPU_DRAINED,
	STORE_GPU_RECOVERING, /* its SR-IOV cycle runs */
	STORE_GPU_FAILED,     /* its last cycle failed: out of service until an undrain */
};
/* "serving", "draining", "drained", "recovering", "failed" */
const char *store_gpu_state_name(enum store_gpu_state state);

struct store_gpu_info {
	char parent[VF_ADDR_BUFSZ];
	enum store_gpu_state state;
	size_t vfs;     /* registered VFs naming it */
	size_t claimed; /* of them, with a live claim or a reservation */
};

/* One GPU, read as `how` says.  -EINVAL for a bad address, -ENOENT when no
 * registered VF names it, -EIO (enum store_read). */
int store_gpu_get(struct store *s, const char *parent, enum store_read how,
		  struct store_gpu_info *ret);
/* Every GPU, sorted by address; *ret malloc'd.  From memory. */
int store_gpu_list(struct store *s, struct store_gpu_info **ret, size_t *count);
/* The registered VFs of a GPU, sorted; *ret malloc'd.  -ENOENT: none. */
int store_gpu_vfs(struct store *s, const char *parent, char (**ret)[VF_ADDR_BUFSZ], size_t *count);

/* Make sysfs's word the store's: every registered VF of vfs (the GPU's
 * virtfn links, read by the caller now) gets parent as its parent, also
 * over an empty or a different stored one (sysfs is the authority; the
 * set-once rule is for writers).  Unregistered ones are skipped.  Then a
 * drain or a cycle of parent covers them (claims refused, the no-claim
 * check).  *adopted (may be NULL): the VFs that changed.  Test:
 * gpu_adopt_sysfs (test-store-gpus.c), tests/fs/test-recover-target.sh. */
int store_gpu_adopt(struct store *s, const char *parent, char (*vfs)[VF_ADDR_BUFSZ], size_t n,
		    size_t *adopted);
/* Under the lock that reserves claims: how many of vfs have a live claim
 * or a reservation, and the first of them in *first ("" for none). */
int store_vfs_in_use(struct store *s, char (*vfs)[VF_ADDR_BUFSZ], size_t n, size_t *in_use,
		     char first[static VF_ADDR_BUFSZ]);

/* Why a GPU's step was refused (-EBUSY): its state then, its VFs with a
 * claim or reservation, and the GPU of the host that is recovering ("" for
 * none). */
struct store_gpu_refusal {
	enum store_gpu_state state;
	size_t claimed;
	char recovering[VF_ADDR_BUFSZ];
};

/* Start (drain true) or end a drain; uid: the writer and detail (may be
 * NULL: "") who and why, for the history.
 * *unchanged (may be NULL) when it already was so (no commit): a drain of
 * a GPU that is not serving (a failed GPU stays failed).  An undrain
 * returns a drained or failed GPU to service.  -EINVAL, -ENOENT (no VF
 * names it), -EBUSY (undrain during a cycle), -EIO while unavailable. */
int store_gpu_drain(struct store *s, const char *parent, bool drain, int64_t uid,
		    const char *detail, bool *unchanged);

/* A cycle's steps ("Recovery" above; rule_gpu_next in rules.h).  begin
 * marks a drained or failed GPU recovering in the same commit that finds
 * no claim or reservation on any VF of it and no other GPU of the host
 * recovering (-EBUSY otherwise, *why filled; may be NULL).  end: ok, every
 * VF of the GPU is back in service (its live failures cleared with why
 * `recovered`, its automatic quarantine lifted, its suspicion ended; an
 * operator hold stays) and the GPU serves, *cleared (may be NULL) the VFs
 * that changed; !ok, the GPU is failed and its VFs stay out of service.
 * detail: the outcome in a few words, kept in the history.  -EINVAL when
 * the GPU is not recovering. */
int store_gpu_recover_begin(struct store *s, const char *parent, int64_t uid,
			    struct store_gpu_refusal *why);
int store_gpu_recover_end(struct store *s, const char *parent, bool ok, const char *detail,
			  size_t *cleared);
/* Every GPU left recovering by an earlier vfhealthd becomes failed
 * (history `recover-failed`, detail `interrupted`): nothing re-runs a cycle
 * by itself.  Their addresses in *ret (malloc'd; NULL and 0 when none). */
int store_gpu_fail_interrupted(struct store *s, char (**ret)[VF_ADDR_BUFSZ], size_t *count);

#define STORE_GPU_DETAIL_MAX 200
struct store_gpu_event {
	char at[RFC3339_BUFSZ];
	/* "drain", "undrain", "recover", "recovered", "recover-failed" */
	char event[STORE_HISTORY_WORD_MAX + 1];
	int64_t by; /* the uid that asked; -1 when not known */
	char detail[STORE_GPU_DETAIL_MAX + 1];
};

/* A GPU's history, oldest first: the newest `max` events in *ret
 * (malloc'd), how many older ones were left out in *dropped.  Through the
 * listing connection like store_history_list(). */
int store_gpu_history(struct store *s, const char *parent, size_t max, struct store_gpu_event **ret,
		      size_t *count, size_t *dropped);

/* -- reports -------------------------------------------------------------- */

enum store_outcome {
	STORE_OUTCOME_UNCHANGED,
	STORE_OUTCOME_RECORDED,
	STORE_OUTCOME_QUARANTINED,
};
const char *store_outcome_name(enum store_outcome o); /* "unchanged", ... */

/* How many distinct instances a failure result names (for one log line). */
#define STORE_INSTANCES_SHOWN 8

struct store_failure_result {
	enum store_outcome outcome;
	unsigned tally;
	int threshold;
	bool breaker_engaged; /* this report would have quarantined but hit the cap */
	int max_quarantined;  /* the cap the decision was made against (breaker_engaged) */
	/* QUARANTINED or breaker_engaged: the distinct instances of the failures
	 * on record, oldest first, with how many assignments each; at most
	 * STORE_INSTANCES_SHOWN, more_instances when there are more */
	struct store_failed_instance {
		char instance_id[INSTANCE_ID_MAX + 1];
		unsigned assignments;
	} instances[STORE_INSTANCES_SHOWN];
	size_t n_instances;
	bool more_instances;
	bool suspect_confirmed; /* QUARANTINED: the VF was suspect ("Suspect" above) */
	bool probation_failed;  /* QUARANTINED: the VF was on probation ("Probation") */
};

/* assigned_at: canonical RFC 3339 (see rfc3339_normalize) or "" / NULL when
 * unknown.  message: truncated to FAILURE_MESSAGE_MAX bytes; control
 * characters are replaced by spaces.  -EINVAL for a bad vf, instance_id or
 * assigned_at; -ENOENT for an unknown VF; -EIO when it would change state
 * while unavailable. */
int store_report_failure(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, const char *message,
			 struct store_failure_result *ret);

/* A failure report answered later: store_report_failure_submit() queues it
 * behind the commit under way, so that the caller goes on at once, and
 * `done` is called once, by the store's answerer thread after the commit,
 * with no lock held: r is what store_report_failure() would return, and
 * *res its result when r is 0.  done may read the store, never change it
 * (it would wait for itself).  Returns 0 when queued; else nothing is
 * queued, done is never called, and the caller reports with
 * store_report_failure() (which commits on the caller's thread, or answers
 * from the state): -EAGAIN when there is no commit under way to join or
 * nothing to commit, or the refusal store_report_failure() would give. */
/* Whether a commit is under way now (false for NULL): a hint that a submit
 * may be queued (store_report_failure_submit decides), so that a lone
 * writer's caller prepares nothing for it. */
bool store_commit_under_way(struct store *s);
/* How many submitted reports may wait for their answer at once; past it a
 * submit says -EAGAIN (the caller's own call waits, as every call does). */
#define STORE_JOINED_MAX 1024
typedef void (*store_failure_done_fn)(void *userdata, int r,
				      const struct store_failure_result *res);
int store_report_failure_submit(struct store *s, const char *vf, const char *instance_id,
				const char *assigned_at, const char *message,
				store_failure_done_fn done, void *userdata);

struct store_success_result {
	unsigned cleared;
	bool rescinded;       /* back in service: the quarantine was lifted, no hold remains */
	bool suspect_cleared; /* the VF was suspect and is no longer ("Suspect" above) */
	bool probation_ended; /* the VF was on probation and is no longer ("Probation") */
};

/* uid: the writer, for the history (-1: unknown). */
int store_report_success(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, int64_t uid, struct store_success_result *ret);

/* -- operator actions ----------------------------------------------------- */

/* What an operator action found (the decision, for the caller's log line). */
struct store_operator_result {
	bool unchanged;        /* nothing to do: already held / nothing to clear */
	bool held;             /* held by the operator before */
	bool auto_quarantined; /* quarantined by failures before */
	bool quarantined;      /* out of service before */
	unsigned tally;        /* failures on record before */
	bool suspect;          /* suspect before (store_clear ends it) */
	bool probation;        /* on probation before (store_clear ends it) */
};

/* Set the hold (a no-op if held); uid: the writer, for the history (-1:
 * unknown).  ret may be NULL. */
int store_quarantine_manual(struct store *s, const char *vf, int64_t uid,
			    struct store_operator_result *ret);
/* Lift the hold and the quarantine, drop the failures (a no-op if none);
 * uid: the writer, for the history (-1: unknown). */
int store_clear(struct store *s, const char *vf, int64_t uid, struct store_operator_result *ret);

/* -- claims --------------------------------------------------------------- */

/* A claim is its assignment file's record (grammar/assignment.h: the VF,
 * the instance, claimed_at, the VMM's agent, control socket, pid and start
 * time, the boot id), the one the sentinel reads back, and the store's
 * identity for it.  claimed_at is stamped when "". */
struct store_claim {
	struct assignment a;
	uint64_t id;   /* stable, never reused: names the inode */
	bool reserved; /* a reservation, not committed yet (reads) */
};

/* Claim c->a.vf for c->a.instance_id.  On success, when ret is non-NULL, it
 * receives the stored claim (with claimed_at stamped and id set).  The
 * caller validates agent/control syntax; the store checks lengths.  Made as
 * a reservation committed at once. */
int store_claim(struct store *s, const struct store_claim *c, struct store_claim *ret);

/* Reserve c->a.vf for c->a.instance_id (see Reservations): the refusals of
 * store_claim(), answered from memory.  ret (required) receives the claim as
 * it will be stored: claimed_at stamped when c gives none, and the id the
 * claim will have. */
int store_claim_reserve(struct store *s, const struct store_claim *c, struct store_claim *ret);

/* Commit the reservation c->id of c->a.vf by c->a.instance_id as a claim with
 * c's attributes (claimed_at as given, or the reservation's when "").
 * -EALREADY when it was committed already (by a concurrent commit: c's
 * attributes are then not applied; store_claim_update() them); -ENOENT when
 * no such reservation or claim (cancelled); the refusals of store_claim()
 * when the VF was quarantined meanwhile; -EIO while unavailable.  On other
 * failures the reservation stays: the caller cancels it. */
int store_claim_commit(struct store *s, const struct store_claim *c);

/* The creator of the reservation c->id is gone without committing it (a
 * bare claim): commit it as store_claim_commit(); when the store cannot
 * write now (-EIO), keep it, excluding the VF, and commit it once the store
 * is available again: 0 with *kept set then.  Other errors: as
 * store_claim_commit() (the caller cancels). */
int store_claim_abandon(struct store *s, const struct store_claim *c, bool *kept);

/* Drop the reservation `id` of vf, if it is still one (a no-op otherwise). */
void store_claim_cancel(struct store *s, const char *vf, uint64_t id);

/* Update the attributes (agent, control, pid, pid_starttime) of a live claim.
 * When c->a.claimed_at is non-empty and differs, it replaces the assignment
 * identity: the filesystem allows that only on the first write through the
 * handle that created the claim (create stamps, the write that follows may
 * name the VMM's own time).  -ENOENT when not held. */
int store_claim_update(struct store *s, const struct store_claim *c);

/* How a release is made; NULL means { NULL, NULL, -1 }. */
struct store_release_opts {
	/* release only the claim (or reservation) with this claimed_at (any RFC
	 * 3339 spelling, compared canonical): -ESTALE when the live claim has
	 * another one (it was released and claimed again), and nothing changes;
	 * -EINVAL for a bad or empty time.  NULL: whichever is live. */
	const char *claimed_at;
	/* how the claim ended, for the history: a word of at most
	 * STORE_HISTORY_WORD_MAX bytes; NULL: "released", or "released-if" with
	 * claimed_at, or "crashed" with crashed */
	const char *how;
	/* its VMM died ("Suspect" above): with claimed_at only */
	bool crashed;
	/* crashed: when the VMM was known dead (any RFC 3339 spelling; not
	 * before claimed_at, not in the future: -EINVAL); NULL: now */
	const char *died_at;
	/* when non-NULL, set on success: this release made the VF suspect, its
	 * VMM dead *died_after_ms after the claim */
	bool *suspect_began;
	int64_t *died_after_ms;
	int64_t uid; /* the uid that ended it; -1: unknown */
	/* release only while the live claim names the VMM this one does (pid,
	 * pid_starttime, control): -EBUSY when it has changed since it was
	 * judged (rm judges a claim's VMM gone first); NULL: any */
	const struct store_claim *if_vmm;
};

/* Release a live claim (it moves to history), or cancel a reservation
 * (nothing is left).  -ENOENT when not held.  Test:
 * claims_conditional_release, claims_reservation, claims_release_if_vmm. */
int store_release(struct store *s, const char *vf, const char *instance_id,
		  const struct store_release_opts *opt);

/* The live claim (or reservation) of vf by instance_id, read as `how` says
 * (enum store_read): placement reads RETRY or NORETRY, resolving a name
 * MEMORY.  -EINVAL for a bad vf or instance id, -ENOENT when none. */
int store_claim_get(struct store *s, const char *vf, const char *instance_id, enum store_read how,
		    struct store_claim *ret);

/* A live claim, or a reservation, by its id (for inode numbers: the creator
 * of a reservation holds its inode), from memory.  vf_id: the store id of
 * its VF (store_vf_info.id), so that a lookup costs the same at VFS_MAX VFs;
 * 0 when not known (a scan of the live claims).  -ENOENT when none. */
int store_claim_get_by_id(struct store *s, uint64_t vf_id, uint64_t id, struct store_claim *ret);

/* Live claims: of one VF (vf non-NULL) or all (vf NULL), sorted by vf then
 * instance; *ret malloc'd.  Served while unavailable. */
int store_claim_list(struct store *s, const char *vf, struct store_claim **ret, size_t *count);

/* -- counters for metrics and resources ------------------------------------ */

struct store_stats {
	size_t vfs;
	size_t quarantined; /* out of service: automatically quarantined or held */
	size_t held;        /* held by the operator */
	size_t held_back;   /* held back by the breaker */
	size_t claimed;     /* VFs with a live claim or a reservation */
	size_t allocatable; /* neither out of service nor claimed; 0 while unavailable */
	bool available;
	bool breaker_engaged; /* a report was held back by the cap and the cap is still reached */
	/* reports since open, by kind and outcome */
	uint64_t failed_reports[3];  /* indexed by enum store_outcome */
	uint64_t ok_reports_cleared; /* success reports that cleared something */
	uint64_t ok_reports_noop;    /* success reports that changed nothing */
	size_t suspect;              /* VFs suspect now */
	size_t probation;            /* VFs on probation now */
	uint64_t suspect_confirmed;  /* suspect VFs quarantined since open */
	uint64_t suspect_cleared;    /* suspect VFs cleared (an OK, the operator) since open */
	uint64_t commits;            /* durable transactions since open */
	uint64_t commit_failures;
	uint64_t reports_joined; /* store_report_failure_submit() calls that queued */
	uint64_t repairs;        /* store_repair() attempts on an unavailable store */
};

void store_get_stats(struct store *s, struct store_stats *ret);

#endif
