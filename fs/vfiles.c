/* SPDX-License-Identifier: MIT */
/*
 * vfiles.c - what each virtual file says and what writing to it does, and
 * the one log line of each event a write causes (the store decides and
 * reports; this caller logs, once, at the event's level: see the runbook).
 * The tables at the bottom are the only list of file names (vfiles.h).
 */
#include "fs/vfiles.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fs/gpus.h"
#include "fs/metrics-file.h"
#include "fs/metrics.h"
#include "fs/physfn.h"
#include "grammar/assignment.h"
#include "grammar/message.h"
#include "grammar/report.h"
#include "grammar/vf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/procfs.h"
#include "store/rules.h"

int vfile_find(const struct vfile *table, int count, const char *name)
{
	for (int i = 0; i < count; i++)
		if (strcmp(table[i].name, name) == 0)
			return i;
	return -1;
}

/* Refuse a write: -EINVAL, and the rule it broke for the caller to log
 * once (a static string). */
static int refuse(const struct vfile_call *call, const char *why)
{
	if (call->why)
		*call->why = why;
	return -EINVAL;
}

/* An integer setting: canonical digits, in [min, max]; else -EINVAL with
 * `rule` (the file's rule, a static string) as the reason. */
static int parse_setting(const struct vfile_call *call, const char *command, uint64_t min,
			 uint64_t max, const char *rule, int *ret)
{
	uint64_t v;

	if (parse_uint64(command, min, max, &v) < 0)
		return refuse(call, rule);
	*ret = (int)v;
	return 0;
}

/* A write that changed nothing: the filesystem logs no audit line for it. */
static void mark_unchanged(const struct vfile_call *call)
{
	if (call->unchanged)
		*call->unchanged = true;
}

/* The fields of an event about vf (its parent from the store's memory),
 * written by call's writer. */
static void event_fields(const struct vfile_call *call, const char *vf, struct log_fields *f,
			 struct store_vf_info *info)
{
	if (store_vf_get(call->store, vf, STORE_READ_MEMORY, info) < 0)
		info->parent[0] = '\0';
	*f = (struct log_fields){ .vf = vf, .parent = info->parent };
	if (call->uid >= 0) {
		f->has_writer = true;
		f->writer_uid = (uint32_t)call->uid;
		f->writer_pid = call->pid;
	}
}

/* -- top level ---------------------------------------------------------------- */

/* An integer setting of the store (threshold, max_quarantined): read back
 * as one number, written as one, logged when it changes. */
struct int_setting {
	const char *name;
	int min, max;
	const char *rule; /* why a value is refused */
	int (*get)(struct store *s);
	int (*set)(struct store *s, int value);
};

static const struct int_setting threshold_setting = {
	.name = "threshold",
	.min = THRESHOLD_MIN,
	.max = THRESHOLD_MAX,
	.rule = "the threshold is a whole number from " PARSE_STR(THRESHOLD_MIN) " to " PARSE_STR(
		THRESHOLD_MAX) ", without sign or leading zeros",
	.get = store_threshold_get,
	.set = store_threshold_set,
};

static const struct int_setting max_quarantined_setting = {
	.name = "max_quarantined",
	.min = 0,
	.max = VFS_MAX,
	.rule = "max_quarantined is a whole number from 0 (no cap) to " PARSE_STR(
		VFS_MAX) ", without sign or leading zeros",
	.get = store_max_quarantined_get,
	.set = store_max_quarantined_set,
};

static int setting_render(const struct int_setting *setting, const struct vfile_call *call,
			  FILE *out)
{
	int value = setting->get(call->store);

	if (value < 0)
		return value;
	fprintf(out, "%d\n", value);
	return 0;
}

/* The failed assignments on record, oldest first, as "vm-c, vm-d" (an
 * instance that failed more than one assignment once, with the count), at
 * most ASSIGNMENTS_LOGGED of them: one log line stays short. */
#define ASSIGNMENTS_LOGGED 8

static void failed_assignments_text(const struct vfile_call *call, const char *vf, char *buf,
				    size_t size, char last[static FAILURE_MESSAGE_MAX + 1])
{
	_cleanup_free_ struct store_failure *failures = NULL;
	size_t count = 0, shown = 0, used = 0;
	int r = store_failure_list(call->store, vf, &failures, &count);

	buf[0] = '\0';
	last[0] = '\0';
	if (r < 0) {
		snprintf(buf, size, "(not listed: %s)", strerror(-r));
		return;
	}
	if (count) /* oldest first: the last is the newest */
		memcpy(last, failures[count - 1].message, FAILURE_MESSAGE_MAX + 1);
	for (size_t i = 0; i < count; i++) {
		const char *id = failures[i].instance_id;
		unsigned same = 0;
		bool earlier = false;
		for (size_t j = 0; j < count; j++) {
			same += strcmp(failures[j].instance_id, id) == 0;
			earlier |= j < i && strcmp(failures[j].instance_id, id) == 0;
		}
		if (earlier)
			continue;
		if (shown == ASSIGNMENTS_LOGGED) {
			snprintf(buf + used, size - used, ", ...");
			return;
		}
		int n = same > 1 ? snprintf(buf + used, size - used, "%s%s (%u assignments)",
					    shown ? ", " : "", id, same) :
				   snprintf(buf + used, size - used, "%s%s", shown ? ", " : "", id);
		if (n < 0 || (size_t)n >= size - used)
			return; /* truncated: still one line */
		used += (size_t)n;
		shown++;
	}
}

/* A VF that meets the threshold, once, at err: quarantined, or held back
 * by the breaker.  by_threshold: a lowered threshold did it (no report). */
static void log_threshold_met(const struct vfile_call *call, const char *vf, bool held_back,
			      unsigned tally, int threshold, bool by_threshold,
			      const char *instance_id, const char *claimed_at)
{
	char list[ASSIGNMENTS_LOGGED * (INSTANCE_ID_MAX + 24) + 8];
	char last[FAILURE_MESSAGE_MAX + 1], cap[64] = "";
	struct store_vf_info info;
	struct log_fields f;

	failed_assignments_text(call, vf, list, sizeof(list), last);
	event_fields(call, vf, &f, &info);
	f.instance = instance_id;
	f.claimed_at = claimed_at;
	f.reason = last;
	f.has_tally = true;
	f.tally = tally;
	f.threshold = threshold;
	if (held_back)
		snprintf(cap, sizeof(cap), "held back by the breaker (max_quarantined %d reached)",
			 store_max_quarantined_get(call->store));
	log_event(LOG_ERR, held_back ? LOG_EVENT_HELD_BACK : LOG_EVENT_QUARANTINED, &f,
		  "%s: %s after %u distinct failed assignments (threshold %s%d): %s; last "
		  "failure: %s",
		  vf, held_back ? cap : "quarantined", tally, by_threshold ? "lowered to " : "",
		  threshold, list, last[0] ? last : "-");
}

/* Each VF a new setting quarantined (a lowered threshold, a raised cap) or
 * had the breaker hold back: its own line, as a report's would be.  Both
 * lists are sorted by address. */
static void log_threshold_changes(const struct vfile_call *call, const struct store_vf_info *before,
				  size_t n_before, const struct store_vf_info *after,
				  size_t n_after, int threshold, bool by_threshold)
{
	size_t j = 0;

	for (size_t i = 0; i < n_after; i++) {
		const struct store_vf_info *a = &after[i];
		bool was_quarantined = false, was_held_back = false;

		while (j < n_before && strcmp(before[j].vf, a->vf) < 0)
			j++;
		if (j < n_before && strcmp(before[j].vf, a->vf) == 0) {
			was_quarantined = before[j].auto_quarantined;
			was_held_back = before[j].state == STORE_VF_HELD_BACK;
		}
		if (a->auto_quarantined && !was_quarantined)
			log_threshold_met(call, a->vf, false, a->tally, threshold, by_threshold,
					  NULL, NULL);
		else if (a->state == STORE_VF_HELD_BACK && !was_held_back)
			log_threshold_met(call, a->vf, true, a->tally, threshold, by_threshold,
					  NULL, NULL);
	}
}

static int setting_write(const struct int_setting *setting, const struct vfile_call *call,
			 char *command)
{
	_cleanup_free_ struct store_vf_info *before = NULL, *after = NULL;
	size_t n_before = 0, n_after = 0;
	int value, r;

	r = parse_setting(call, command, setting->min, setting->max, setting->rule, &value);
	if (r < 0)
		return r;
	if (setting->get(call->store) == value)
		mark_unchanged(call);
	/* the VFs before and after, from memory: what the new value did */
	if (store_vf_list(call->store, &before, &n_before) < 0)
		before = NULL;
	r = setting->set(call->store, value);
	if (r < 0)
		return r;
	if (setting == &threshold_setting)
		log_event(LOG_NOTICE, LOG_EVENT_THRESHOLD_CHANGED, NULL, "%s set to %d",
			  setting->name, value);
	else
		log_info("%s set to %d", setting->name, value);
	if (before && store_vf_list(call->store, &after, &n_after) == 0)
		log_threshold_changes(call, before, n_before, after, n_after,
				      store_threshold_get(call->store),
				      setting == &threshold_setting);
	return 0;
}

static int threshold_render(const struct vfile_call *call, FILE *out)
{
	return setting_render(&threshold_setting, call, out);
}

static int threshold_write(const struct vfile_call *call, char *command)
{
	return setting_write(&threshold_setting, call, command);
}

/* A list of VF addresses, one a line. */
static int vf_list_render(const struct vfile_call *call, FILE *out,
			  int (*list)(struct store *s, enum store_read how,
				      char (**ret)[VF_ADDR_BUFSZ], size_t *count))
{
	_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	size_t count = 0;
	int r;

	r = list(call->store, call->read, &vfs, &count);
	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++)
		fprintf(out, "%s\n", vfs[i]);
	return 0;
}

static int top_quarantined_render(const struct vfile_call *call, FILE *out)
{
	return vf_list_render(call, out, store_quarantined_list);
}

static int held_back_render(const struct vfile_call *call, FILE *out)
{
	return vf_list_render(call, out, store_held_back_list);
}

/* Placement-facing like quarantined: fails closed (EIO) while the store is
 * unavailable.  The order is the store's (store/placement.c). */
static int allocatable_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_placement *list = NULL;
	size_t count = 0;
	int r;

	r = store_allocatable_list(call->store, call->read, &list, &count);
	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++)
		fprintf(out, "%s\n", list[i].vf);
	return 0;
}

static int resources_render(const struct vfile_call *call, FILE *out)
{
	char reason[STORE_REASON_MAX];
	struct store_stats stats;
	bool available;

	if (call->read == STORE_READ_RETRY) /* counters are no read that retries */
		store_retry_for_read(call->store);
	store_get_stats(call->store, &stats);
	available = store_status(call->store, reason, sizeof(reason));
	fprintf(out, "total_slots %zu\n", stats.vfs);
	fprintf(out, "used_slots %zu\n", stats.claimed);
	fprintf(out, "allocatable_slots %zu\n", available ? stats.allocatable : 0);
	fprintf(out, "quarantined_slots %zu\n", stats.quarantined);
	if (!available)
		fprintf(out, "placement_disabled_reason %s\n", reason);
	return 0;
}

static int status_render(const struct vfile_call *call, FILE *out)
{
	char reason[STORE_REASON_MAX];

	if (store_status(call->store, reason, sizeof(reason)))
		fputs("ok\n", out);
	else
		fprintf(out, "unavailable: %s\n", reason);
	return 0;
}

static int status_write(const struct vfile_call *call, char *command)
{
	char reason[STORE_REASON_MAX];

	if (strcmp(command, "repair") != 0)
		return refuse(call, "the only command status takes is \"repair\"");
	if (store_repair(call->store) < 0) {
		store_status(call->store, reason, sizeof(reason));
		log_warn("repair failed: %s", reason);
		return -EIO;
	}
	return 0; /* the store logs when it becomes available again */
}

static int max_quarantined_render(const struct vfile_call *call, FILE *out)
{
	return setting_render(&max_quarantined_setting, call, out);
}

static int max_quarantined_write(const struct vfile_call *call, char *command)
{
	return setting_write(&max_quarantined_setting, call, command);
}

static int mode_render(const struct vfile_call *call, FILE *out)
{
	int mode = store_mode_get(call->store);

	if (mode < 0)
		return mode;
	fprintf(out, "%s\n", store_mode_name((enum store_mode)mode));
	return 0;
}

/* `enforce` or `observe`.  The switch is logged once, by the filesystem's
 * audit line (who, which command); the state needs no recomputing: it is
 * what enforcement makes it in both modes. */
static int mode_write(const struct vfile_call *call, char *command)
{
	enum store_mode mode;

	if (strcmp(command, store_mode_name(STORE_MODE_ENFORCE)) == 0)
		mode = STORE_MODE_ENFORCE;
	else if (strcmp(command, store_mode_name(STORE_MODE_OBSERVE)) == 0)
		mode = STORE_MODE_OBSERVE;
	else
		return refuse(call, "mode takes \"enforce\" or \"observe\"");
	if (store_mode_get(call->store) == (int)mode)
		mark_unchanged(call);
	return store_mode_set(call->store, mode);
}

/* Every live claim, "VF INSTANCE" lines (grammar/assignment.h): the
 * sentinel's one read per poll.  From the store's memory, like a listing of
 * assignments/, so served while the store is unavailable. */
static int top_claims_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_claim *claims = NULL;
	size_t count = 0;
	int r;

	r = store_claim_list(call->store, NULL, &claims, &count);
	for (size_t i = 0; r == 0 && i < count; i++)
		r = claims_line_render(claims[i].a.vf, claims[i].a.instance_id, out);
	return r;
}

/* -- per VF ------------------------------------------------------------------- */

static int tally_render(const struct vfile_call *call, FILE *out)
{
	struct store_vf_info info;
	int r = store_vf_get_by_id(call->store, call->vf_id, &info);

	if (r < 0)
		return r;
	fprintf(out, "%u\n", info.tally);
	return 0;
}

static int vf_quarantined_render(const struct vfile_call *call, FILE *out)
{
	struct store_vf_info info;
	int r = store_vf_get(call->store, call->vf, call->read, &info);

	if (r < 0)
		return r;
	fprintf(out, "%d\n", info.quarantined ? 1 : 0);
	return 0;
}

/* state and since are placement-facing like quarantined: they fail closed. */
static int vf_state_render(const struct vfile_call *call, FILE *out)
{
	struct store_vf_info info;
	int r = store_vf_get(call->store, call->vf, call->read, &info);

	if (r < 0)
		return r;
	fprintf(out, "%s\n", store_vf_state_name(info.state));
	return 0;
}

static int vf_since_render(const struct vfile_call *call, FILE *out)
{
	struct store_vf_info info;
	int r = store_vf_get(call->store, call->vf, call->read, &info);

	if (r < 0)
		return r;
	fprintf(out, "%s\n", info.since); /* an empty line while in service */
	return 0;
}

/* Not placement-facing (a fact about the hardware, not a decision): served
 * from memory, also while the store is unavailable. */
static int vf_parent_render(const struct vfile_call *call, FILE *out)
{
	struct store_vf_info info;
	int r = store_vf_get(call->store, call->vf, STORE_READ_MEMORY, &info);

	if (r < 0)
		return r;
	fprintf(out, "%s\n", info.parent); /* an empty line while unknown */
	return 0;
}

/* Only what sysfs says: a write records the VF's physfn (a VF whose sysfs
 * entry appeared after it was registered), anything else is refused, so
 * no writer names the device root drains or cycles.  The same address
 * again changes nothing. */
static int vf_parent_write(const struct vfile_call *call, char *command)
{
	char sysfs_parent[VF_ADDR_BUFSZ];
	int r;

	if (!vf_address_valid(command) || strcmp(command, call->vf) == 0) {
		if (call->why)
			*call->why = "parent: not a PCI address like 0000:41:00.0, or the VF's own";
		return -EINVAL;
	}
	r = physfn_read(call->sysfs_root, call->vf, sysfs_parent);
	if (r < 0 || strcmp(sysfs_parent, command) != 0) {
		if (call->why)
			*call->why = r < 0 ? "parent: sysfs shows no physfn link for this VF;"
					     " the parent is only ever what sysfs says" :
					     "parent: sysfs's physfn link names another device;"
					     " the parent is only ever what sysfs says";
		return -EPERM;
	}
	/* sysfs's word also over a stored one that disagrees (an older write) */
	char vf[1][VF_ADDR_BUFSZ];
	size_t adopted = 0;
	snprintf(vf[0], sizeof(vf[0]), "%s", call->vf);
	r = store_gpu_adopt(call->store, command, vf, 1, &adopted);
	if (r < 0)
		return r;
	if (adopted == 0)
		mark_unchanged(call);
	else
		log_info("%s: parent GPU set to %s", call->vf, command);
	return 0;
}

/* "VF: back in service: cleared by the operator (hold lifted, quarantine
 * lifted, 2 failures dropped)", naming only what there was. */
static void log_cleared(const struct vfile_call *call, const struct store_operator_result *before)
{
	struct store_vf_info info;
	struct log_fields f;
	char what[96] = "", failures[32] = "";

	if (before->tally)
		snprintf(failures, sizeof(failures), "%u failures dropped", before->tally);
	const char *parts[] = { before->held ? "hold lifted" : "",
				before->auto_quarantined ? "quarantine lifted" : "", failures };
	for (size_t i = 0, used = 0; i < ARRAY_SIZE(parts); i++) {
		if (!parts[i][0])
			continue;
		int n = snprintf(what + used, sizeof(what) - used, "%s%s", used ? ", " : "",
				 parts[i]);
		if (n < 0 || (size_t)n >= sizeof(what) - used)
			break;
		used += (size_t)n;
	}
	event_fields(call, call->vf, &f, &info);
	log_event(LOG_NOTICE, LOG_EVENT_CLEARED, &f,
		  "%s: back in service: cleared by the operator (%s)", call->vf, what);
}

/* `echo 1` sets the operator hold; `echo 0` lifts the hold and the
 * quarantine and drops the failures.  What it changed is logged once (a
 * repeated command, which changes nothing, at debug level), from what the
 * store's decision found. */
static int vf_quarantined_write(const struct vfile_call *call, char *command)
{
	struct store_operator_result before;
	bool hold = strcmp(command, "1") == 0;
	int r;

	if (!hold && strcmp(command, "0") != 0)
		return refuse(call, "quarantined takes \"1\" (hold) or \"0\" (back in service)");
	r = hold ? store_quarantine_manual(call->store, call->vf, call->uid, &before) :
		   store_clear(call->store, call->vf, call->uid, &before);
	if (r < 0)
		return r;
	if (hold && before.unchanged) {
		mark_unchanged(call);
		log_debug("%s: already held by the operator", call->vf);
	} else if (hold) {
		struct store_vf_info info;
		struct log_fields f;

		event_fields(call, call->vf, &f, &info);
		log_event(LOG_NOTICE, LOG_EVENT_HELD, &f, "%s: held by the operator%s", call->vf,
			  before.auto_quarantined ? " (also quarantined)" : "");
	} else if (before.unchanged) {
		mark_unchanged(call);
		log_debug("%s: nothing to clear", call->vf);
	} else {
		log_cleared(call, &before);
		if (before.suspect)
			log_notice("%s: no longer suspect: cleared by the operator", call->vf);
		if (before.probation)
			log_notice("%s: probation ended: cleared by the operator", call->vf);
	}
	return 0;
}

static int failures_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_failure *failures = NULL;
	size_t count = 0;
	int r;

	r = store_failure_list(call->store, call->vf, &failures, &count);
	if (r < 0 && r != -ENOENT)
		log_warn("%s: listing the failures failed: %s", call->vf, strerror(-r));
	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++) {
		const struct store_failure *f = &failures[i];
		fprintf(out, "%s %s %s%s%s\n", f->reported_at, f->instance_id,
			f->assigned_at[0] ? f->assigned_at : "-", f->message[0] ? " " : "",
			f->message);
	}
	return 0;
}

/* The VF's claims and failures, live and past, oldest first, the newest
 * HISTORY_MAX (vfhealth(5)):
 *   # N older entries dropped
 *   CLAIMED_AT claim INSTANCE released=AT|- ended=HOW|- by=UID|-
 *   REPORTED_AT failure INSTANCE assigned=AT|- cleared=AT|- why=WHY|- by=UID|- MESSAGE
 *   SINCE probation cleared=AT|- why=WHY|- */
/* ms as seconds with three decimals: "12.345s". */
static const char *seconds_ms(int64_t ms, char *buf, size_t size)
{
	snprintf(buf, size, "%" PRId64 ".%03" PRId64 "s", ms / 1000, ms % 1000);
	return buf;
}

static int history_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_history_entry *h = NULL;
	size_t count = 0, dropped = 0;
	char by[24], after[32];
	int r;

	r = store_history_list(call->store, call->vf, HISTORY_MAX, &h, &count, &dropped);
	if (r < 0 && r != -ENOENT)
		log_warn("%s: listing the history failed: %s", call->vf, strerror(-r));
	if (r < 0)
		return r;
	if (dropped)
		fprintf(out, "# %zu older entries dropped\n", dropped);
	for (size_t i = 0; i < count; i++) {
		const struct store_history_entry *e = &h[i];
		if (e->by >= 0)
			snprintf(by, sizeof(by), "%" PRId64, e->by);
		else
			snprintf(by, sizeof(by), "-");
		if (e->kind == STORE_HISTORY_HOLD) {
			char held_by[24] = "-";

			if (e->started_by >= 0)
				snprintf(held_by, sizeof(held_by), "%" PRId64, e->started_by);
			fprintf(out, "%s hold by=%s cleared=%s cleared_by=%s\n", e->at, held_by,
				e->ended_at[0] ? e->ended_at : "-", e->ended_at[0] ? by : "-");
		} else if (e->kind == STORE_HISTORY_CLAIM)
			fprintf(out, "%s claim %s released=%s ended=%s by=%s\n", e->at,
				e->instance_id, e->ended_at[0] ? e->ended_at : "-",
				e->how[0] ? e->how : "-", by);
		else if (e->kind == STORE_HISTORY_PROBATION)
			fprintf(out, "%s probation cleared=%s why=%s\n", e->at,
				e->ended_at[0] ? e->ended_at : "-", e->how[0] ? e->how : "-");
		else if (e->kind == STORE_HISTORY_SUSPECT)
			fprintf(out,
				"%s suspect %s claimed=%s died=%s after=%s cleared=%s why=%s\n",
				e->at, e->instance_id, e->assigned_at, e->died_at,
				seconds_ms(e->died_after_ms, after, sizeof(after)),
				e->ended_at[0] ? e->ended_at : "-", e->how[0] ? e->how : "-");
		else
			fprintf(out, "%s failure %s assigned=%s cleared=%s why=%s by=%s%s%s\n",
				e->at, e->instance_id, e->assigned_at[0] ? e->assigned_at : "-",
				e->ended_at[0] ? e->ended_at : "-", e->how[0] ? e->how : "-", by,
				e->message[0] ? " " : "", e->message);
	}
	return 0;
}

/* The store's outcome in the grammar's words. */
static enum report_kind report_kind_of(enum store_outcome o)
{
	switch (o) {
	case STORE_OUTCOME_UNCHANGED:
		return REPORT_UNCHANGED;
	case STORE_OUTCOME_RECORDED:
		return REPORT_RECORDED;
	case STORE_OUTCOME_QUARANTINED:
		return REPORT_QUARANTINED;
	}
	return REPORT_UNCHANGED;
}

/* The store's decision on a report, logged once at its level
 * (vfhealthd(8), LOGGING): a failure below the threshold is notice, a
 * quarantine, or a VF the breaker keeps in service although it meets the
 * threshold, err; a success that cleared failures info, one that put the VF
 * back in service notice. */
static void log_failure_outcome(const struct vfile_call *call, const struct report_command *cmd,
				const struct store_failure_result *res)
{
	char message[FAILURE_MESSAGE_MAX + 1];
	struct store_vf_info info;
	struct log_fields f;

	switch (res->outcome) {
	case STORE_OUTCOME_QUARANTINED:
		log_threshold_met(call, call->vf, false, res->tally, res->threshold, false,
				  cmd->instance_id, cmd->claimed_at);
		return;
	case STORE_OUTCOME_RECORDED:
		if (res->breaker_engaged) {
			log_threshold_met(call, call->vf, true, res->tally, res->threshold, false,
					  cmd->instance_id, cmd->claimed_at);
			return;
		}
		/* as the store keeps it (grammar/message.h) */
		message_sanitize_to(cmd->message, message, sizeof(message));
		event_fields(call, call->vf, &f, &info);
		f.instance = cmd->instance_id;
		f.claimed_at = cmd->claimed_at;
		f.reason = message;
		f.has_tally = true;
		f.tally = res->tally;
		f.threshold = res->threshold;
		log_event(LOG_NOTICE, LOG_EVENT_FAILURE_RECORDED, &f,
			  "%s: failed assignment of instance %s recorded (%u of %d to "
			  "quarantine): %s",
			  call->vf, cmd->instance_id, res->tally, res->threshold, message);
		return;
	case STORE_OUTCOME_UNCHANGED:
		return; /* a repeat, or a VF already out of service: no new event */
	}
}

/* A report about the VF's live claim is its last check (vfhealth_vf_last_check);
 * one about an older assignment is not. */
static void note_check(const struct vfile_call *call, const struct report_command *cmd,
		       enum metrics_check result)
{
	struct store_claim claim;

	if (store_claim_get(call->store, call->vf, cmd->instance_id, STORE_READ_MEMORY, &claim) ==
		    0 &&
	    strcmp(claim.a.claimed_at, cmd->claimed_at) == 0)
		metrics_note_check(call->metrics, call->vf_id, claim.id, result);
}

/* A failure report recorded: its outcome, its metrics and its log lines. */
static void failure_reported(const struct vfile_call *call, const struct report_command *cmd,
			     const struct store_failure_result *res)
{
	struct report_outcome o = { 0 };

	note_check(call, cmd, METRICS_CHECK_FAILED);
	o.kind = report_kind_of(res->outcome);
	o.failures = res->tally;
	o.threshold = (unsigned)res->threshold;
	o.breaker_engaged = res->breaker_engaged;
	report_outcome_format(call->outcome, VFILE_OUTCOME_MAX, &o);
	/* no audit line for a repeat, nor for a routine failure (recorded
	 * below the threshold, not the VF's first): transitions only */
	if (res->outcome == STORE_OUTCOME_UNCHANGED ||
	    (res->outcome == STORE_OUTCOME_RECORDED && !res->breaker_engaged && res->tally > 1))
		mark_unchanged(call);
	log_failure_outcome(call, cmd, res);
	if (res->suspect_confirmed)
		log_notice("%s: suspicion confirmed: quarantined after its VMM died in "
			   "its init window, instance %s failed",
			   call->vf, cmd->instance_id);
	if (res->probation_failed)
		log_notice("%s: quarantined: failed on probation after its GPU's cycle, "
			   "instance %s failed",
			   call->vf, cmd->instance_id);
}

static void report_failed_answer(void *userdata, int r, const struct store_failure_result *res)
{
	struct vfile_deferred *d = userdata;

	if (r == 0)
		failure_reported(&d->call, &d->own.report, res);
	d->answer(d, r);
}

/* A failure report joins the commit under way (vfile_submit_fn); the rest,
 * and a lone report, are written by report_write(). */
static int report_submit(struct vfile_deferred *d, const char *command)
{
	struct report_command *cmd = &d->own.report;

	if (report_command_parse(command, cmd) < 0 || cmd->kind != REPORT_COMMAND_FAILED)
		return -EAGAIN;
	return store_report_failure_submit(d->call.store, d->call.vf, cmd->instance_id,
					   cmd->claimed_at, cmd->message, report_failed_answer, d);
}

static int report_write(const struct vfile_call *call, char *command)
{
	struct report_command cmd;
	struct report_outcome o = { 0 };
	int r;

	r = report_command_parse(command, &cmd);
	if (r < 0) {
		if (call->why)
			*call->why = report_command_refusal(command);
		return r;
	}

	if (cmd.kind == REPORT_COMMAND_FAILED) {
		struct store_failure_result res;

		/* The store keeps the message sanitized (grammar/message.h). */
		r = store_report_failure(call->store, call->vf, cmd.instance_id, cmd.claimed_at,
					 cmd.message, &res);
		if (r < 0)
			return r;
		failure_reported(call, &cmd, &res);
		return 0;
	}

	struct store_success_result res;

	r = store_report_success(call->store, call->vf, cmd.instance_id, cmd.claimed_at, call->uid,
				 &res);
	if (r < 0)
		return r;
	note_check(call, &cmd, METRICS_CHECK_OK);
	if (!res.cleared && !res.suspect_cleared && !res.probation_ended)
		mark_unchanged(call);
	if (res.suspect_cleared)
		log_notice("%s: no longer suspect: instance %s (claimed %s) succeeded", call->vf,
			   cmd.instance_id, cmd.claimed_at);
	if (res.probation_ended)
		log_notice("%s: probation ended: first OK: instance %s (claimed %s) succeeded",
			   call->vf, cmd.instance_id, cmd.claimed_at);
	o.kind = REPORT_CLEARED;
	o.cleared = res.cleared;
	o.rescinded = res.rescinded;
	report_outcome_format(call->outcome, VFILE_OUTCOME_MAX, &o);
	if (res.rescinded || res.cleared) {
		struct store_vf_info info;
		struct log_fields f;

		event_fields(call, call->vf, &f, &info);
		f.instance = cmd.instance_id;
		f.claimed_at = cmd.claimed_at;
		if (res.rescinded)
			log_event(LOG_NOTICE, LOG_EVENT_RESCINDED, &f,
				  "%s: back in service: quarantine rescinded, instance %s succeeded "
				  "(%u failures cleared)",
				  call->vf, cmd.instance_id, res.cleared);
		else
			log_event(LOG_INFO, LOG_EVENT_FAILURES_CLEARED, &f,
				  "%s: instance %s succeeded: %u failures cleared", call->vf,
				  cmd.instance_id, res.cleared);
	}
	return 0;
}

/* -- the tables ------------------------------------------------------------------ */

const struct vfile top_files[TOP_FILE_COUNT] = {
	[TOP_THRESHOLD] = { "threshold", 0664, threshold_render, threshold_write, VFILE_NOTIFY,
			    STORE_CHANGE_THRESHOLD },
	/* Availability decides whether the list reads or fails. */
	[TOP_QUARANTINED] = { "quarantined", 0444, top_quarantined_render, NULL,
			      VFILE_NOTIFY | VFILE_PLACEMENT,
			      STORE_CHANGE_QUARANTINE | STORE_CHANGE_STATUS },
	[TOP_RESOURCES] = { "resources", 0444, resources_render, NULL,
			    VFILE_NOTIFY | VFILE_PLACEMENT,
			    STORE_CHANGE_VFS | STORE_CHANGE_CLAIMS | STORE_CHANGE_QUARANTINE |
				    STORE_CHANGE_STATUS | STORE_CHANGE_GPU },
	[TOP_STATUS] = { "status", 0664, status_render, status_write, VFILE_NOTIFY,
			 STORE_CHANGE_STATUS },
	[TOP_MAX_QUARANTINED] = { "max_quarantined", 0664, max_quarantined_render,
				  max_quarantined_write, VFILE_NOTIFY,
				  STORE_CHANGE_MAX_QUARANTINED },
	/* Not notified: it changes with every report and every scrape (and
	 * STORE_CHANGE_BREAKER shows only here). */
	[TOP_METRICS] = { "metrics", 0444, metrics_render, NULL, 0, 0 },
	/* Placement-facing (placement ranks these last): fails closed. */
	[TOP_HELD_BACK] = { "held_back", 0444, held_back_render, NULL,
			    VFILE_NOTIFY | VFILE_PLACEMENT,
			    STORE_CHANGE_HELD_BACK | STORE_CHANGE_STATUS },
	/* Placement-facing: fails closed.  Its groups follow registrations,
	 * claims, quarantines and holds, the breaker, parents, suspicions, the
	 * mode and drains. */
	[TOP_ALLOCATABLE] = { "allocatable", 0444, allocatable_render, NULL,
			      VFILE_NOTIFY | VFILE_PLACEMENT,
			      STORE_CHANGE_VFS | STORE_CHANGE_CLAIMS | STORE_CHANGE_QUARANTINE |
				      STORE_CHANGE_HELD_BACK | STORE_CHANGE_PARENT |
				      STORE_CHANGE_MODE | STORE_CHANGE_SUSPECT |
				      STORE_CHANGE_STATUS | STORE_CHANGE_GPU },
	[TOP_CLAIMS] = { "claims", 0444, top_claims_render, NULL, VFILE_NOTIFY,
			 STORE_CHANGE_CLAIMS },
	[TOP_MODE] = { "mode", 0664, mode_render, mode_write, VFILE_NOTIFY, STORE_CHANGE_MODE },
	[TOP_GPUS] = { "gpus", 0755, NULL, NULL, VFILE_DIR, 0 },
	[TOP_AUTO_RECOVER] = { "auto_recover", 0664, auto_recover_render, auto_recover_write,
			       VFILE_NOTIFY, STORE_CHANGE_AUTO_RECOVER },
};

/* Read through at every read.  A VF's change reaches its parent's files;
 * the notifier announces one only when its text changed (notify.h), so a
 * claim reaches `state` only when it moves a drain (draining -> drained). */
const struct vfile gpu_files[GPU_FILE_COUNT] = {
	[GPU_VFS] = { "vfs", 0444, gpu_vfs_render, NULL, VFILE_NOTIFY,
		      STORE_CHANGE_VFS | STORE_CHANGE_PARENT },
	/* Placement-facing: a drain takes VFs out of placement. */
	[GPU_STATE] = { "state", 0444, gpu_state_render, NULL, VFILE_NOTIFY | VFILE_PLACEMENT,
			STORE_CHANGE_GPU | STORE_CHANGE_CLAIMS | STORE_CHANGE_RESERVATION |
				STORE_CHANGE_PARENT | STORE_CHANGE_STATUS },
	[GPU_DRAIN] = { "drain", 0664, gpu_drain_render, gpu_drain_write,
			VFILE_NOTIFY | VFILE_PLACEMENT, STORE_CHANGE_GPU | STORE_CHANGE_STATUS },
	/* Read from SQLite, not the mirror. */
	[GPU_HISTORY] = { "history", 0444, gpu_history_render, NULL, VFILE_NOTIFY,
			  STORE_CHANGE_GPU },
	/* `cycle` (recovery/recovery.h runs it); a read through the same
	 * handle shows what the write started. */
	[GPU_RECOVER] = { "recover", 0664, NULL, gpu_recover_write, VFILE_OUTCOME, 0 },
};

const struct vfile vf_files[VF_FILE_COUNT] = {
	[VF_TALLY] = { "tally", 0444, tally_render, NULL, VFILE_NOTIFY, STORE_CHANGE_FAILURES },
	/* Availability decides whether it reads or fails (placement-facing). */
	/* "0\n" or "1\n": page-cached for readers (fixed_size). */
	[VF_QUARANTINED] = { "quarantined", 0664, vf_quarantined_render, vf_quarantined_write,
			     VFILE_NOTIFY | VFILE_PLACEMENT,
			     STORE_CHANGE_QUARANTINE | STORE_CHANGE_STATUS, 2 },
	[VF_FAILURES] = { "failures", 0444, failures_render, NULL, VFILE_NOTIFY,
			  STORE_CHANGE_FAILURES },
	[VF_REPORT] = { "report", 0664, NULL, report_write, VFILE_OUTCOME, 0,
			.submit = report_submit },
	[VF_ASSIGNMENTS] = { "assignments", 0775, NULL, NULL, VFILE_DIR | VFILE_CLAIM_DIR, 0 },
	/* A new threshold moves a VF only between failing and held-back (the
	 * held-back set changes) or into quarantine: not every VF's state.  A
	 * report moves it only from ok (STORE_CHANGE_FAILING): the hundredth
	 * failure leaves it failing. */
	[VF_STATE] = { "state", 0444, vf_state_render, NULL, VFILE_NOTIFY | VFILE_PLACEMENT,
		       STORE_CHANGE_FAILING | STORE_CHANGE_QUARANTINE | STORE_CHANGE_HELD_BACK |
			       STORE_CHANGE_SUSPECT | STORE_CHANGE_STATUS },
	[VF_SINCE] = { "since", 0444, vf_since_render, NULL, VFILE_NOTIFY | VFILE_PLACEMENT,
		       STORE_CHANGE_QUARANTINE | STORE_CHANGE_SUSPECT | STORE_CHANGE_STATUS },
	/* sysfs's physfn: at registration, or a write of what it says. */
	[VF_PARENT] = { "parent", 0664, vf_parent_render, vf_parent_write, VFILE_NOTIFY,
			STORE_CHANGE_PARENT },
	/* Read from SQLite, not the mirror: it reads while the store is latched. */
	[VF_HISTORY] = { "history", 0444, history_render, NULL, VFILE_NOTIFY,
			 STORE_CHANGE_FAILURES | STORE_CHANGE_CLAIMS | STORE_CHANGE_QUARANTINE |
				 STORE_CHANGE_SUSPECT },
};
