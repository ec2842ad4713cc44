/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - the extra series of the `metrics` file: a short list of
 * providers (render callbacks) that the file table's metrics renderer
 * (vfiles.c) prints after the store's own series.  The composition root
 * (daemon/main.c) creates the list, registers providers (the sentinel's
 * counters) and hands it to the filesystem; the filesystem only passes it
 * on.  Kept out of the FUSE layer so that the file table never calls back
 * into it.
 *
 * Thread-safety: metrics_add_provider() and metrics_render_providers() may
 * run on any thread; a leaf mutex guards the list and providers run without
 * it.  Returns 0 or a negative errno.
 */
#ifndef VFHEALTH_METRICS_H
#define VFHEALTH_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "grammar/assignment.h"
#include "grammar/limits.h"

#define METRICS_MAX_PROVIDERS 8

/* Print complete Prometheus series (with their # HELP and # TYPE lines) to
 * out.  Called on every read of `metrics`, from a FUSE worker: it must not
 * block and must not touch the mount. */
typedef void (*metrics_render_fn)(void *userdata, FILE *out);

struct metrics;

int metrics_new(struct metrics **ret);
/* NULL: no-op. */
void metrics_free(struct metrics *m);

/* -ENOSPC once METRICS_MAX_PROVIDERS are registered; -EINVAL for NULLs. */
int metrics_add_provider(struct metrics *m, metrics_render_fn render, void *userdata);

/* Every provider's lines, in registration order.  m NULL: nothing. */
void metrics_render_providers(struct metrics *m, FILE *out);

/* The last check result of each VF's claim (vfhealth_vf_last_check).  Two
 * sources: the check source below, when one is set (the sentinel's shared
 * table: every result, rpc_error and unknown too), and the reports written
 * to <vf>/report (failed or ok, whoever wrote them), for a claim the source
 * does not know.  The reports' results are  Kept in memory, one entry per VF id, at most VFS_MAX entries (the
 * oldest VF id goes when full: ids are never reused, so it is the one most
 * likely gone).  m NULL: no-op / METRICS_CHECK_NONE. */
enum metrics_check {
	METRICS_CHECK_NONE,
	METRICS_CHECK_FAILED,
	METRICS_CHECK_OK,
};
void metrics_note_check(struct metrics *m, uint64_t vf_id, uint64_t claim_id,
			enum metrics_check result);
/* The result noted for this VF's claim claim_id; NONE when another claim's
 * (or none) was noted. */
enum metrics_check metrics_last_check(struct metrics *m, uint64_t vf_id, uint64_t claim_id);

/* One claim's last check as the check source saw it; result is a static
 * name ("ok", "failed", "unknown", "rpc_error", "unsupported_agent"). */
struct metrics_source_check {
	struct claim_ref claim;
	const char *result;
};
/* A copy of the source's checks sorted by vf, then instance_id (*ret:
 * free() it; NULL and 0 when none).  Runs on a FUSE worker: no blocking. */
typedef size_t (*metrics_checks_fn)(void *userdata, struct metrics_source_check **ret);
/* Set the check source (once, before the mount serves).  -EINVAL for NULLs. */
int metrics_set_check_source(struct metrics *m, metrics_checks_fn fn, void *userdata);
/* The source's checks (as metrics_checks_fn); 0 without a source. */
size_t metrics_source_checks(struct metrics *m, struct metrics_source_check **ret);

#endif
