/* SPDX-License-Identifier: MIT */
/*
 * metrics-file.c - the top-level `metrics` file (vfhealth(5), METRICS):
 * vfhealthd's own families rendered from the store, the parent GPUs'
 * (gpus.h), then every registered provider's (metrics.h).  A read-through
 * file like every other but VF/quarantined: never notified, since it
 * changes with every report.
 */
#include "fs/metrics-file.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>

#include "fs/gpus.h"
#include "fs/metrics.h"
#include "grammar/vf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/procfs.h"
#include "common/prometheus.h"
#include "store/rules.h"

/* Build and configuration, as info series (value 1, the facts in labels). */
static void metrics_render_info(const struct vfile_call *call, FILE *out, int threshold,
				int max_quarantined, int mode)
{
	char thr[16], maxq[16];

	(void)call;
	prom_family(out, "vfhealth_build_info", "gauge",
		    "The vfhealthd build: its version and the libfuse and SQLite it runs with.");
	prom_sample(out, "vfhealth_build_info",
		    PROM_LABELS({ "version", VFHEALTH_VERSION }, { "libfuse", fuse_pkgversion() },
				{ "sqlite", store_engine_version() }),
		    "1");
	if (threshold <= 0 || max_quarantined < 0 || mode < 0)
		return; /* the store could never be loaded: no settings to tell */
	snprintf(thr, sizeof(thr), "%d", threshold);
	snprintf(maxq, sizeof(maxq), "%d", max_quarantined);
	prom_family(out, "vfhealth_config_info", "gauge",
		    "The settings in force: threshold, max_quarantined (0 = no cap) and mode.");
	prom_sample(out, "vfhealth_config_info",
		    PROM_LABELS({ "threshold", thr }, { "max_quarantined", maxq },
				{ "mode", store_mode_name((enum store_mode)mode) }),
		    "1");
}

/* When the VF went out of service, as a Unix time (the store's `since`);
 * false when it is in service or the time is unknown. */
static bool vf_out_of_service_since(const struct store_vf_info *info, int64_t *ret)
{
	return info->since[0] && rfc3339_to_unix(info->since, ret) == 0;
}

/* Why a VF is out of service (the reason label of vfhealth_vf_out_of_service),
 * NULL when it is in service: its state (store.h), one name per state.
 * Held back: the cap alone keeps it placeable. */
static const char *vf_out_of_service_reason(const struct store_vf_info *info, int threshold)
{
	(void)threshold;
	switch (info->state) {
	case STORE_VF_HELD:
		return "operator";
	case STORE_VF_QUARANTINED:
		return "failures";
	case STORE_VF_HELD_BACK:
		return "held-back";
	case STORE_VF_OK:
	case STORE_VF_FAILING:
	case STORE_VF_SUSPECT:
	case STORE_VF_PROBATION:
		break;
	}
	return NULL;
}

/* The per-VF series: one per registered VF per family (last_check and since
 * only where known), so at most VFS_MAX each (docs/limits.md).  From the
 * store's memory (store_vf_list, store_claim_list): no SQLite per scrape.
 * parent is "" while the VF's physical function is unknown. */
static void metrics_render_vfs(const struct vfile_call *call, FILE *out, int threshold)
{
	static const char *const check_names[] = {
		[METRICS_CHECK_FAILED] = "failed", [METRICS_CHECK_OK] = "ok"
	};
	_cleanup_free_ struct store_vf_info *vfs = NULL;
	_cleanup_free_ struct store_claim *claims = NULL;
	_cleanup_free_ struct metrics_source_check *checks = NULL;
	size_t n_vfs = 0, n_claims = 0, c = 0, n_checks, k = 0;
	int64_t since;

	if (store_vf_list(call->store, &vfs, &n_vfs) < 0)
		return; /* never loaded: no VFs to tell */
	if (store_claim_list(call->store, NULL, &claims, &n_claims) < 0)
		n_claims = 0;
	n_checks = metrics_source_checks(call->metrics, &checks);

#define VF_LABELS(v) { "vf", (v).vf }, { "parent", (v).parent }
	prom_family(out, "vfhealth_vf_out_of_service", "gauge",
		    "1 while the VF is out of service, with why (failures, operator, held-back); "
		    "0 (no reason) while it is in service.");
	for (size_t i = 0; i < n_vfs; i++) {
		const char *reason = vf_out_of_service_reason(&vfs[i], threshold);
		prom_sample_u64(out, "vfhealth_vf_out_of_service",
				PROM_LABELS(VF_LABELS(vfs[i]), { "reason", reason ? reason : "" }),
				reason != NULL);
	}
	prom_family(out, "vfhealth_vf_suspect", "gauge",
		    "1 while the VF is suspect: the VMM of its last claim died within the init "
		    "window.");
	for (size_t i = 0; i < n_vfs; i++)
		prom_sample_u64(out, "vfhealth_vf_suspect", PROM_LABELS(VF_LABELS(vfs[i])),
				vfs[i].suspect);
	prom_family(out, "vfhealth_vf_failures", "gauge",
		    "Failed assignments on record for the VF.");
	for (size_t i = 0; i < n_vfs; i++)
		prom_sample_u64(out, "vfhealth_vf_failures", PROM_LABELS(VF_LABELS(vfs[i])),
				vfs[i].tally);
	prom_family(out, "vfhealth_vf_out_of_service_since_timestamp_seconds", "gauge",
		    "When the VF went out of service (Unix time), where known.");
	for (size_t i = 0; i < n_vfs; i++)
		if (vf_out_of_service_reason(&vfs[i], threshold) &&
		    vf_out_of_service_since(&vfs[i], &since))
			prom_sample_i64(out, "vfhealth_vf_out_of_service_since_timestamp_seconds",
					PROM_LABELS(VF_LABELS(vfs[i])), since);
	prom_family(out, "vfhealth_vf_last_check", "gauge",
		    "The result of the last check of the VF's live claim (ok, failed, unknown, "
		    "rpc_error, unsupported_agent), where it was checked.");
	/* the three lists are sorted by address: one merge walk */
	for (size_t i = 0; i < n_vfs; i++) {
		const char *result = NULL;

		while (c < n_claims && strcmp(claims[c].a.vf, vfs[i].vf) < 0)
			c++;
		if (c == n_claims || strcmp(claims[c].a.vf, vfs[i].vf) != 0)
			continue;
		while (k < n_checks && strcmp(checks[k].claim.vf, vfs[i].vf) < 0)
			k++;
		/* the sentinel's check of this very assignment, else its last report */
		for (size_t j = k; j < n_checks && strcmp(checks[j].claim.vf, vfs[i].vf) == 0; j++)
			if (strcmp(checks[j].claim.instance_id, claims[c].a.instance_id) == 0 &&
			    strcmp(checks[j].claim.claimed_at, claims[c].a.claimed_at) == 0)
				result = checks[j].result;
		if (!result) {
			enum metrics_check r = metrics_last_check(call->metrics, vfs[i].id,
								  claims[c].id);
			if (r != METRICS_CHECK_NONE)
				result = check_names[r];
		}
		if (result)
			prom_sample(out, "vfhealth_vf_last_check",
				    PROM_LABELS(VF_LABELS(vfs[i]), { "result", result }), "1");
	}
#undef VF_LABELS
}

/* VFs out of service by their failures (from memory): an operator's hold
 * is vfhealth_held_vfs, so that alerts tell a drain from a wedge. */
static size_t auto_quarantined_count(struct store *store)
{
	_cleanup_free_ struct store_vf_info *vfs = NULL;
	size_t n = 0, count = 0;

	if (store_vf_list(store, &vfs, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		count += vfs[i].auto_quarantined;
	return count;
}

int metrics_render(const struct vfile_call *call, FILE *out)
{
	struct store_stats st;
	int threshold = store_threshold_get(call->store);
	int max_quarantined = store_max_quarantined_get(call->store);
	int mode = store_mode_get(call->store);

	store_get_stats(call->store, &st);
	prom_scalar_u64(out, "vfhealth_vfs", "gauge", "Registered VFs.", st.vfs);
	prom_scalar_u64(out, "vfhealth_quarantined_vfs", "gauge",
			"VFs quarantined automatically, by failed assignments (also when held too).",
			auto_quarantined_count(call->store));
	prom_scalar_u64(out, "vfhealth_held_vfs", "gauge",
			"VFs held out of service by an operator (echo 1 > VF/quarantined).",
			st.held);
	prom_scalar_u64(out, "vfhealth_claimed_vfs", "gauge", "VFs with a live claim.", st.claimed);
	prom_scalar_u64(out, "vfhealth_probation_vfs", "gauge",
			"VFs on probation after their GPU's SR-IOV cycle, until their first OK.",
			st.probation);
	prom_scalar_u64(out, "vfhealth_allocatable_vfs", "gauge",
			"VFs neither quarantined nor claimed (0 while the store is unavailable).",
			st.available ? st.allocatable : 0);
	prom_scalar_u64(out, "vfhealth_store_unavailable", "gauge",
			"1 while the store cannot commit (placement fails closed).", !st.available);
	prom_scalar_u64(out, "vfhealth_breaker_engaged", "gauge",
			"1 while the max_quarantined cap holds back a quarantine.",
			st.breaker_engaged);
	if (threshold > 0)
		prom_scalar_u64(out, "vfhealth_threshold", "gauge",
				"Recorded failures that quarantine a VF.", (uint64_t)threshold);
	if (max_quarantined >= 0)
		prom_scalar_u64(out, "vfhealth_max_quarantined", "gauge",
				"Cap on quarantined VFs (0 = none).", (uint64_t)max_quarantined);
	if (mode >= 0)
		prom_scalar_u64(
			out, "vfhealth_observe_mode", "gauge",
			"1 in observe mode: claims are not refused for being out of service.",
			mode == STORE_MODE_OBSERVE);
	prom_family(out, "vfhealth_reports_total", "counter",
		    "Reports written to VF report files, by kind and outcome.");
	for (int o = STORE_OUTCOME_UNCHANGED; o <= STORE_OUTCOME_QUARANTINED; o++)
		prom_sample_u64(out, "vfhealth_reports_total",
				PROM_LABELS({ "kind", "failed" },
					    { "outcome",
					      store_outcome_name((enum store_outcome)o) }),
				st.failed_reports[o]);
	prom_sample_u64(out, "vfhealth_reports_total",
			PROM_LABELS({ "kind", "ok" }, { "outcome", "cleared" }),
			st.ok_reports_cleared);
	prom_sample_u64(out, "vfhealth_reports_total",
			PROM_LABELS({ "kind", "ok" }, { "outcome", "unchanged" }),
			st.ok_reports_noop);
	prom_family(out, "vfhealth_suspect_total", "counter",
		    "Suspect VFs that stopped being suspect, by how: confirmed (quarantined) or "
		    "cleared (an OK, the operator).");
	prom_sample_u64(out, "vfhealth_suspect_total", PROM_LABELS({ "outcome", "confirmed" }),
			st.suspect_confirmed);
	prom_sample_u64(out, "vfhealth_suspect_total", PROM_LABELS({ "outcome", "cleared" }),
			st.suspect_cleared);
	prom_scalar_u64(out, "vfhealth_store_commits_total", "counter",
			"Durable store transactions since start.", st.commits);
	prom_scalar_u64(out, "vfhealth_store_commit_failures_total", "counter",
			"Store commits that failed since start.", st.commit_failures);
	prom_scalar_u64(out, "vfhealth_store_reports_joined_total", "counter",
			"Failure reports that joined a commit under way, answered by the store's "
			"answerer instead of a FUSE worker waiting for the commit.",
			st.reports_joined);
	prom_scalar_u64(out, "vfhealth_store_repairs_total", "counter",
			"Attempts to bring the unavailable store back since start.", st.repairs);
	metrics_render_info(call, out, threshold, max_quarantined, mode);
	metrics_render_vfs(call, out, threshold);
	gpu_metrics_render(call->store, out);
	metrics_render_providers(call->metrics, out);
	return 0;
}
