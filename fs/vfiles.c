/* SPDX-License-Identifier: MIT */
/*
 * vfiles.c - what each virtual file says and what writing to it does.
 * The tables at the bottom are the only list of file names (vfiles.h).
 */
#include "fs/vfiles.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fs/metrics.h"
#include "grammar/assignment.h"
#include "grammar/report.h"
#include "proto/cleanup.h"
#include "proto/log.h"
#include "proto/parse.h"
#include "proto/procfs.h"

int vfile_find(const struct vfile *table, int count, const char *name)
{
	for (int i = 0; i < count; i++)
		if (strcmp(table[i].name, name) == 0)
			return i;
	return -1;
}

/* An integer setting: digits only, in [min, max]; anything else -EINVAL. */
static int parse_setting(const char *command, uint64_t min, uint64_t max, int *ret)
{
	uint64_t v;

	if (parse_uint64(command, min, max, &v) < 0)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

/* -- top level ---------------------------------------------------------------- */

static int threshold_render(const struct vfile_call *call, FILE *out)
{
	int threshold = store_threshold_get(call->store);

	if (threshold < 0)
		return threshold;
	fprintf(out, "%d\n", threshold);
	return 0;
}

static int threshold_write(const struct vfile_call *call, char *command)
{
	int threshold, r;

	r = parse_setting(command, THRESHOLD_MIN, THRESHOLD_MAX, &threshold);
	if (r < 0)
		return r;
	r = store_threshold_set(call->store, threshold);
	if (r == 0)
		log_info("threshold set to %d", threshold);
	return r;
}

static int top_quarantined_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	size_t count = 0;
	int r;

	r = call->may_write ? store_quarantined_list(call->store, &vfs, &count)
			    : store_quarantined_list_noretry(call->store, &vfs, &count);
	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++)
		fprintf(out, "%s\n", vfs[i]);
	return 0;
}

static int resources_render(const struct vfile_call *call, FILE *out)
{
	char reason[STORE_REASON_MAX];
	struct store_stats stats;
	bool available;

	/* placement-facing: retries like the other placement reads */
	if (call->may_write)
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
		return -EINVAL;
	if (store_repair(call->store) < 0) {
		store_status(call->store, reason, sizeof(reason));
		log_warn("repair failed: %s", reason);
		return -EIO;
	}
	return 0; /* the store logs when it becomes available again */
}

static int max_quarantined_render(const struct vfile_call *call, FILE *out)
{
	int max = store_max_quarantined_get(call->store);

	if (max < 0)
		return max;
	fprintf(out, "%d\n", max);
	return 0;
}

static int max_quarantined_write(const struct vfile_call *call, char *command)
{
	int max, r;

	r = parse_setting(command, 0, VFS_MAX, &max);
	if (r < 0)
		return r;
	r = store_max_quarantined_set(call->store, max);
	if (r == 0)
		log_info("max_quarantined set to %d", max);
	return r;
}

static void metric(FILE *out, const char *name, const char *type, const char *help,
		   uint64_t value)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name,
		value);
}

static int metrics_render(const struct vfile_call *call, FILE *out)
{
	struct store_stats st;
	int threshold = store_threshold_get(call->store);
	int max_quarantined = store_max_quarantined_get(call->store);

	store_get_stats(call->store, &st);
	metric(out, "vfhealth_vfs", "gauge", "Registered VFs.", st.vfs);
	metric(out, "vfhealth_quarantined_vfs", "gauge", "Quarantined VFs.", st.quarantined);
	metric(out, "vfhealth_claimed_vfs", "gauge", "VFs with a live claim.", st.claimed);
	metric(out, "vfhealth_allocatable_vfs", "gauge",
	       "VFs neither quarantined nor claimed (0 while the store is unavailable).",
	       st.available ? st.allocatable : 0);
	metric(out, "vfhealth_store_unavailable", "gauge",
	       "1 while the store cannot commit (placement fails closed).", !st.available);
	metric(out, "vfhealth_breaker_engaged", "gauge",
	       "1 while the max_quarantined cap holds back a quarantine.", st.breaker_engaged);
	if (threshold > 0)
		metric(out, "vfhealth_threshold", "gauge",
		       "Recorded failures that quarantine a VF.", (uint64_t)threshold);
	if (max_quarantined >= 0)
		metric(out, "vfhealth_max_quarantined", "gauge",
		       "Cap on quarantined VFs (0 = none).", (uint64_t)max_quarantined);
	fputs("# HELP vfhealth_reports_total Reports written to VF report files, by kind and outcome.\n"
	      "# TYPE vfhealth_reports_total counter\n",
	      out);
	for (int o = STORE_OUTCOME_UNCHANGED; o <= STORE_OUTCOME_QUARANTINED; o++)
		fprintf(out, "vfhealth_reports_total{kind=\"failed\",outcome=\"%s\"} %" PRIu64 "\n",
			store_outcome_name((enum store_outcome)o), st.failed_reports[o]);
	fprintf(out, "vfhealth_reports_total{kind=\"ok\",outcome=\"cleared\"} %" PRIu64 "\n",
		st.ok_reports_cleared);
	fprintf(out, "vfhealth_reports_total{kind=\"ok\",outcome=\"unchanged\"} %" PRIu64 "\n",
		st.ok_reports_noop);
	metric(out, "vfhealth_store_commits_total", "counter",
	       "Durable store transactions since start.", st.commits);
	metric(out, "vfhealth_store_commit_failures_total", "counter",
	       "Store commits that failed since start.", st.commit_failures);
	metric(out, "vfhealth_store_repairs_total", "counter",
	       "Attempts to bring the unavailable store back since start.", st.repairs);
	metrics_render_providers(call->metrics, out);
	return 0;
}

/* Every live claim, "VF INSTANCE" lines (grammar/assignment.h): the
 * sentinel's one read per poll.  From the store's memory, like a listing of
 * assignments/, so served while the store is unavailable. */
static int claims_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_claim *claims = NULL;
	size_t count = 0;
	int r;

	r = store_claim_list(call->store, NULL, &claims, &count);
	for (size_t i = 0; r == 0 && i < count; i++)
		r = claims_line_render(claims[i].vf, claims[i].instance_id, out);
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
	int r = call->may_write ? store_vf_get(call->store, call->vf, &info)
				: store_vf_get_noretry(call->store, call->vf, &info);

	if (r < 0)
		return r;
	fprintf(out, "%d\n", info.quarantined ? 1 : 0);
	return 0;
}

static int vf_quarantined_write(const struct vfile_call *call, char *command)
{
	int r;

	if (strcmp(command, "1") == 0) {
		r = store_quarantine_manual(call->store, call->vf);
		if (r == 0)
			log_info("%s: quarantined by the operator", call->vf);
	} else if (strcmp(command, "0") == 0) {
		r = store_clear(call->store, call->vf);
		if (r == 0)
			log_info("%s: cleared by the operator", call->vf);
	} else {
		return -EINVAL;
	}
	return r;
}

static int failures_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_failure *failures = NULL;
	size_t count = 0;
	int r;

	r = store_failure_list(call->store, call->vf, &failures, &count);
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
		o.kind = report_kind_of(res.outcome);
		o.failures = res.tally;
		o.threshold = (unsigned)res.threshold;
		o.breaker_engaged = res.breaker_engaged;
		report_outcome_format(call->outcome, VFILE_OUTCOME_MAX, &o);
		if (res.outcome == STORE_OUTCOME_QUARANTINED)
			log_info("%s: quarantined: instance %s failed %u times (threshold %d)",
				 call->vf, cmd.instance_id, res.tally, res.threshold);
		else if (res.outcome == STORE_OUTCOME_RECORDED)
			log_warn("%s: failed assignment recorded: instance %s, %u of %d%s", call->vf,
				 cmd.instance_id, res.tally, res.threshold,
				 res.breaker_engaged ? ", quarantine held back by the breaker" : "");
		return 0;
	}

	struct store_success_result res;

	r = store_report_success(call->store, call->vf, cmd.instance_id, cmd.claimed_at, &res);
	if (r < 0)
		return r;
	o.kind = REPORT_CLEARED;
	o.cleared = res.cleared;
	o.rescinded = res.rescinded;
	report_outcome_format(call->outcome, VFILE_OUTCOME_MAX, &o);
	if (res.cleared)
		log_info("%s: instance %s succeeded: %u failures cleared%s", call->vf,
			 cmd.instance_id, res.cleared, res.rescinded ? ", quarantine lifted" : "");
	return 0;
}

/* -- assignment files ----------------------------------------------------------- */

/* The grammar's view of a stored claim.  Values reach the store only through
 * claim_parse_update(), so they fit the grammar's limits. */
static void copy_field(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* A claim and an assignment file carry the same fields, sized by one limit. */
_Static_assert(sizeof(((struct store_claim *)0)->agent) == sizeof(((struct assignment *)0)->agent) &&
		       sizeof(((struct store_claim *)0)->control) ==
			       sizeof(((struct assignment *)0)->control),
	       "claim fields are the grammar's");

static void claim_to_assignment(const struct store_claim *c, struct assignment *a)
{
	copy_field(a->vf, sizeof(a->vf), c->vf);
	copy_field(a->instance_id, sizeof(a->instance_id), c->instance_id);
	copy_field(a->claimed_at, sizeof(a->claimed_at), c->claimed_at);
	copy_field(a->agent, sizeof(a->agent), c->agent);
	copy_field(a->control, sizeof(a->control), c->control);
	a->pid = c->pid;
	a->pid_starttime = c->pid_starttime;
	a->boot_id[0] = '\0'; /* not recorded yet */
}

void claim_render(const struct store_claim *claim, FILE *out)
{
	struct assignment a;

	claim_to_assignment(claim, &a);
	assignment_render(&a, out);
}

int claim_parse_update(const struct store_claim *current, char *command, bool may_set_claimed_at,
		       struct store_claim *ret)
{
	struct store_claim next;
	struct assignment cur, upd;
	unsigned written;
	int r;

	claim_to_assignment(current, &cur);
	r = assignment_parse_update(&cur, command, may_set_claimed_at, &upd, &written);
	if (r < 0)
		return r;
	next = *current;
	memcpy(next.claimed_at, upd.claimed_at, sizeof(upd.claimed_at));
	memcpy(next.agent, upd.agent, sizeof(upd.agent));
	memcpy(next.control, upd.control, sizeof(upd.control));
	next.pid = upd.pid;
	next.pid_starttime = upd.pid_starttime;
	/* With the pid, its start time names one process even after the pid is
	 * reused; 0 (unknown) when /proc cannot tell. */
	if ((written & (1u << ASSIGNMENT_PID)) && next.pid > 0 &&
	    proc_pid_starttime(NULL, next.pid, &next.pid_starttime) < 0)
		next.pid_starttime = 0;
	*ret = next;
	return 0;
}

const char *claim_update_refusal(const struct store_claim *current, const char *command,
				 bool may_set_claimed_at)
{
	struct assignment cur;

	claim_to_assignment(current, &cur);
	return assignment_update_refusal(&cur, command, may_set_claimed_at);
}

/* -- the tables ------------------------------------------------------------------ */

const struct vfile top_files[TOP_FILE_COUNT] = {
	[TOP_THRESHOLD] = { "threshold", 0664, threshold_render, threshold_write, VFILE_NOTIFY,
			    STORE_CHANGE_THRESHOLD },
	/* Availability decides whether the list reads or fails. */
	[TOP_QUARANTINED] = { "quarantined", 0444, top_quarantined_render, NULL, VFILE_NOTIFY,
			      STORE_CHANGE_QUARANTINE | STORE_CHANGE_STATUS },
	[TOP_RESOURCES] = { "resources", 0444, resources_render, NULL, VFILE_NOTIFY,
			    STORE_CHANGE_VFS | STORE_CHANGE_CLAIMS | STORE_CHANGE_QUARANTINE |
				    STORE_CHANGE_STATUS },
	[TOP_STATUS] = { "status", 0664, status_render, status_write, VFILE_NOTIFY,
			 STORE_CHANGE_STATUS },
	[TOP_MAX_QUARANTINED] = { "max_quarantined", 0664, max_quarantined_render,
				  max_quarantined_write, VFILE_NOTIFY, STORE_CHANGE_MAX_QUARANTINED },
	/* Not notified: it changes with every report and every scrape (and
	 * STORE_CHANGE_BREAKER shows only here). */
	[TOP_METRICS] = { "metrics", 0444, metrics_render, NULL, 0, 0 },
	[TOP_CLAIMS] = { "claims", 0444, claims_render, NULL, VFILE_NOTIFY, STORE_CHANGE_CLAIMS },
};

const struct vfile vf_files[VF_FILE_COUNT] = {
	[VF_TALLY] = { "tally", 0444, tally_render, NULL, VFILE_NOTIFY, STORE_CHANGE_FAILURES },
	/* Availability decides whether it reads or fails (placement-facing). */
	[VF_QUARANTINED] = { "quarantined", 0664, vf_quarantined_render, vf_quarantined_write,
			     VFILE_NOTIFY, STORE_CHANGE_QUARANTINE | STORE_CHANGE_STATUS },
	[VF_FAILURES] = { "failures", 0444, failures_render, NULL, VFILE_NOTIFY,
			  STORE_CHANGE_FAILURES },
	[VF_REPORT] = { "report", 0664, NULL, report_write, VFILE_OUTCOME, 0 },
	[VF_ASSIGNMENTS] = { "assignments", 0775, NULL, NULL, VFILE_DIR | VFILE_CLAIM_DIR, 0 },
};
