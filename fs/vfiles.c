/* SPDX-License-Identifier: MIT */
/*
 * vfiles.c - what each virtual file says and what writing to it does.
 * The tables at the bottom are the only list of file names (vfiles.h).
 */
#include "fs/vfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "fs/metrics.h"
#include "proto/cleanup.h"
#include "proto/endpoint.h"
#include "proto/log.h"
#include "proto/parse.h"

/* A VMM's control socket is a Unix socket path: it must fit sun_path. */
#define CONTROL_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
/* Linux's PID_MAX_LIMIT. */
#define PID_VALUE_MAX 4194304

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

	r = parse_setting(command, STORE_THRESHOLD_MIN, STORE_THRESHOLD_MAX, &threshold);
	if (r < 0)
		return r;
	r = store_threshold_set(call->store, threshold);
	if (r == 0)
		log_info("threshold set to %d", threshold);
	return r;
}

static int top_quarantined_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ char(*vfs)[STORE_VF_BUFSZ] = NULL;
	size_t count = 0;
	int r;

	r = store_quarantined_list(call->store, &vfs, &count);
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
	log_info("store available after repair");
	return 0;
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

	r = parse_setting(command, 0, STORE_MAX_VFS, &max);
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
	metrics_render_providers(call->metrics, out);
	return 0;
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
	int r = store_vf_get(call->store, call->vf, &info);

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

/* Next space-separated token of *p; NULL when none.  Leaves *p after the one
 * space that ended the token (so the rest can be a free-text message). */
static char *next_token(char **p)
{
	char *start = *p, *end;

	if (!*start || *start == ' ')
		return NULL;
	end = strchr(start, ' ');
	if (end) {
		*end = '\0';
		*p = end + 1;
	} else {
		*p = start + strlen(start);
	}
	return start;
}

static int report_write(const struct vfile_call *call, char *command)
{
	char assigned_at[RFC3339_BUFSZ] = "";
	char *p = command, *kind, *instance_id, *assigned;
	int r;

	if (strchr(command, '\n'))
		return -EINVAL; /* one command, one line */
	kind = next_token(&p);
	instance_id = next_token(&p);
	assigned = next_token(&p);
	if (!kind || !instance_id || !assigned || !instance_id_valid(instance_id))
		return -EINVAL;
	if (strcmp(assigned, "-") != 0 && rfc3339_normalize(assigned, assigned_at) < 0)
		return -EINVAL;

	if (strcmp(kind, "failed") == 0) {
		struct store_failure_result res;

		/* The rest of the line, possibly empty, is the message. */
		r = store_report_failure(call->store, call->vf, instance_id, assigned_at, p, &res);
		if (r < 0)
			return r;
		snprintf(call->outcome, VFILE_OUTCOME_MAX, "%s failures=%u threshold=%d%s",
			 store_outcome_name(res.outcome), res.tally, res.threshold,
			 res.breaker_engaged ? " breaker=engaged" : "");
		if (res.outcome == STORE_OUTCOME_QUARANTINED)
			log_info("%s: quarantined: instance %s failed %u times (threshold %d)",
				 call->vf, instance_id, res.tally, res.threshold);
		else if (res.outcome == STORE_OUTCOME_RECORDED)
			log_warn("%s: failed assignment recorded: instance %s, %u of %d%s", call->vf,
				 instance_id, res.tally, res.threshold,
				 res.breaker_engaged ? ", quarantine held back by the breaker" : "");
		return 0;
	}
	if (strcmp(kind, "ok") == 0) {
		struct store_success_result res;

		if (*p)
			return -EINVAL;
		r = store_report_success(call->store, call->vf, instance_id, assigned_at, &res);
		if (r < 0)
			return r;
		snprintf(call->outcome, VFILE_OUTCOME_MAX, "cleared=%u rescinded=%d", res.cleared,
			 res.rescinded ? 1 : 0);
		if (res.cleared)
			log_info("%s: instance %s succeeded: %u failures cleared%s", call->vf,
				 instance_id, res.cleared, res.rescinded ? ", quarantine lifted" : "");
		return 0;
	}
	return -EINVAL;
}

/* -- assignment files ----------------------------------------------------------- */

void claim_render(const struct store_claim *claim, FILE *out)
{
	fprintf(out, "claimed_at=%s\nagent=%s\ncontrol=%s\npid=", claim->claimed_at, claim->agent,
		claim->control);
	if (claim->pid > 0)
		fprintf(out, "%" PRId64, claim->pid);
	fputc('\n', out);
}

/* Field 22 of /proc/PID/stat (start time in clock ticks since boot): with
 * the pid it names one process even after the pid is reused.  0 when the
 * process cannot be read. */
static uint64_t pid_starttime(int64_t pid)
{
	char path[64], buf[1024];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	char *p, *save = NULL;
	uint64_t starttime = 0;

	snprintf(path, sizeof(path), "/proc/%" PRId64 "/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm (field 2) may hold spaces and parentheses: fields 3.. follow the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field <= 22; field++) {
		char *tok = strtok_r(field == 3 ? p : NULL, " ", &save);
		if (!tok)
			return 0;
		if (field == 22 && parse_uint64(tok, 0, UINT64_MAX, &starttime) < 0)
			return 0;
	}
	return starttime;
}

enum claim_key { KEY_CLAIMED_AT, KEY_AGENT, KEY_CONTROL, KEY_PID, KEY_COUNT };
static const char *const claim_keys[KEY_COUNT] = {
	[KEY_CLAIMED_AT] = "claimed_at",
	[KEY_AGENT] = "agent",
	[KEY_CONTROL] = "control",
	[KEY_PID] = "pid",
};

static int claim_apply(struct store_claim *c, enum claim_key key, const char *value,
		       bool may_set_claimed_at)
{
	switch (key) {
	case KEY_CLAIMED_AT: {
		char canonical[RFC3339_BUFSZ];
		if (rfc3339_normalize(value, canonical) < 0)
			return -EINVAL;
		if (strcmp(canonical, c->claimed_at) != 0 && !may_set_claimed_at)
			return -EINVAL; /* the assignment identity is fixed after the first write */
		memcpy(c->claimed_at, canonical, sizeof(c->claimed_at));
		return 0;
	}
	case KEY_AGENT: {
		struct endpoint ep;
		if (!*value) {
			c->agent[0] = '\0';
			return 0;
		}
		if (strlen(value) >= ENDPOINT_STRING_MAX || endpoint_parse(value, &ep) < 0)
			return -EINVAL;
		/* Stored canonical (port spelled out), so readers need no defaults. */
		if (endpoint_format(&ep, c->agent, sizeof(c->agent)) < 0)
			return -EINVAL;
		return 0;
	}
	case KEY_CONTROL:
		if (*value && (value[0] != '/' || strlen(value) > CONTROL_PATH_MAX))
			return -EINVAL;
		for (const char *q = value; *q; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				return -EINVAL;
		snprintf(c->control, sizeof(c->control), "%s", value);
		return 0;
	case KEY_PID: {
		uint64_t pid = 0;
		if (*value && parse_uint64(value, 1, PID_VALUE_MAX, &pid) < 0)
			return -EINVAL;
		c->pid = (int64_t)pid;
		c->pid_starttime = pid ? pid_starttime(c->pid) : 0;
		return 0;
	}
	case KEY_COUNT:
		break;
	}
	return -EINVAL;
}

int claim_parse_update(const struct store_claim *current, char *command, bool may_set_claimed_at,
		       struct store_claim *ret)
{
	_cleanup_free_ struct store_claim *next = malloc(sizeof(*next));
	unsigned seen = 0;
	char *line, *save = NULL;

	if (!next)
		return -ENOMEM;
	*next = *current;
	for (line = strtok_r(command, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		int key = -1, r;

		if (!eq)
			return -EINVAL;
		*eq = '\0';
		for (int k = 0; k < KEY_COUNT; k++)
			if (strcmp(line, claim_keys[k]) == 0)
				key = k;
		if (key < 0 || (seen & (1u << key)))
			return -EINVAL;
		seen |= 1u << key;
		r = claim_apply(next, (enum claim_key)key, eq + 1, may_set_claimed_at);
		if (r < 0)
			return r;
	}
	*ret = *next;
	return 0;
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
